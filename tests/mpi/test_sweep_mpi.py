"""Paper scripts spread over 2 MPI ranks (paperlib.sweep, docs/distributed.md): the table gathered by rank 0
is the single-process table for deterministic placers, and bench/reproduce.py runs its scripts on both
ranks, each writing its own report. ctest runs this only where MPI and mpi4py are installed."""
import csv
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPIRUN = os.environ.get("PLACELAB_MPIEXEC", "mpirun")
MPI_FLAGS = ["--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "--timeout", "120"]
# The MILP stops at a time limit (1 s in quick mode), so its incumbent depends on the machine's load.
TIMED = {"MILP"}


def script(ranks, name, *args):
    command = [sys.executable, os.path.join(ROOT, "bench", name), "--quick", *args]
    if ranks > 0:
        command = [MPIRUN, "-np", str(ranks), *MPI_FLAGS, *command]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, f"{' '.join(command)} failed ({proc.returncode}): {proc.stderr[-3000:]}"
    return proc


def table(path):
    with open(path, newline="") as f:
        return [{k: v for k, v in row.items() if k not in TIMED} for row in csv.DictReader(f)]


def test_two_ranks_give_the_single_process_table(tmp_path):
    # Every paper script sweeps its configurations; two of them here (the others run the same helper).
    for name, stem in (("paper_tarnawski.py", "tarnawski"), ("paper_hsdag.py", "hsdag")):
        script(0, name, "--out", str(tmp_path / stem / "one"))
        script(2, name, "--out", str(tmp_path / stem / "two"))
        one, two = (table(tmp_path / stem / k / f"{stem}_quick_0.csv") for k in ("one", "two"))
        assert one and one == two, name


def test_reproduce_spreads_its_scripts_over_the_ranks(tmp_path):
    proc = script(2, "reproduce.py", "--only", "tarnawski,hsdag", "--out", str(tmp_path))
    assert "tarnawski (rank 0 of 2)" in proc.stderr and "hsdag (rank 1 of 2)" in proc.stderr
    assert (tmp_path / "tarnawski_quick.md").exists() and (tmp_path / "hsdag_quick.md").exists()
