"""Runs the placelab program under test (PLACELAB_BIN, set by ctest) for the CLI tests."""
import os
import subprocess

BIN = os.environ.get("PLACELAB_BIN", "build/dev/cli/placelab")


def placelab(*args, check=True):
    """Runs `placelab ARGS`; with check, a non-zero exit fails the test with its stderr."""
    proc = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"placelab {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc
