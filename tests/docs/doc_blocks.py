"""The code blocks of the docs (README.md, docs/*.md), run as a reader would run them (docs/README.md).

Each page is one session: its ```python and ```sh blocks run in order, in one Python process (Python
blocks share one namespace, as in a notebook; each shell block runs in bash with `set -euo pipefail`, its
variables lasting for that block), in a fresh folder laid out like a checkout (every top-level entry of
the repository linked in, and `../shared/data` the data sets), so that files a block writes are there
for the next one and none lands in the checkout. `placelab` is the built command line, first on PATH.
A block whose first line is `# not run in CI: REASON` is listed with its reason and not run. A shell
block whose lines start with `$ ` runs those lines only; the others are their output, checked when it
is a JSON object (the keys, and every value that is not `...`).

Run as a script (`doc_blocks.py BLOCKS.json`), this file is the session itself: the tests write the
page's blocks to BLOCKS.json and run it in the session's folder.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import traceback
import types
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LANGUAGES = {"python": "python", "py": "python", "sh": "sh", "bash": "sh", "shell": "sh", "console": "sh"}
MARKER = re.compile(r"#\s*not run in CI:?(.*)$")
FENCE = re.compile(r"^(\s*)(```+)\s*([\w+-]*)")


class BlockFailed(Exception):
    """A block that failed and said why on the output already: reported without a traceback."""


@dataclass
class Block:
    doc: str   # path from the repository root
    line: int  # line of its first code line in the doc
    lang: str  # "python" or "sh"
    text: str
    skip: str = ""  # why it is not run ("": it runs)


def doc_files(root: Path = ROOT) -> list[Path]:
    return [root / "README.md"] + sorted((root / "docs").glob("*.md"))


def parse(text: str, doc: str) -> list[Block]:
    """The runnable blocks of a Markdown text (other languages and bare fences are prose: not run)."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.groups()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        if end == len(lines):
            raise ValueError(f"{doc}:{i + 1}: code block never closed")
        body = [line[len(indent):] if line.startswith(indent) else line for line in lines[i + 1:end]]
        if lang.lower() in LANGUAGES:
            block = Block(doc, i + 2, LANGUAGES[lang.lower()], "\n".join(body) + "\n")
            # The marker is one of the block's leading comment lines (a script's `#!` line stays first).
            leading = [line.strip() for line in body if line.strip()]
            leading = leading[:next((k for k, line in enumerate(leading) if not line.startswith("#")), len(leading))]
            marker = next((m for m in map(MARKER.match, leading) if m), None)
            if marker:
                block.skip = marker.group(1).strip()
                if not block.skip:
                    raise ValueError(f"{doc}:{i + 2}: '# not run in CI:' needs its reason after the colon")
            out.append(block)
        i = end + 1
    return out


def blocks_of(path: Path, root: Path = ROOT) -> list[Block]:
    return parse(path.read_text(encoding="utf-8"), str(path.relative_to(root)))


def shared_data() -> Path:
    return Path(os.environ.get("PLACELAB_SHARED_DATA") or ROOT.parent / "shared" / "data").resolve()


def make_sandbox(folder: Path) -> Path:
    """folder/main, laid out like the checkout (its entries linked), beside folder/shared/data. The build
    trees are left out: a block that builds (`make run`) must not touch the shared ones."""
    main = folder / "main"
    main.mkdir(parents=True)
    for entry in ROOT.iterdir():
        if entry.name not in (".git", "runs", "build"):
            (main / entry.name).symlink_to(entry)
    (folder / "shared").mkdir()
    (folder / "shared" / "data").symlink_to(shared_data())
    return main


def session_env(binary: str) -> dict:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(binary).resolve().parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python")] + [p for p in [env.get("PYTHONPATH")] if p])
    env["MPLBACKEND"] = "Agg"
    return env


def run_session(blocks: list[Block], cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess:
    """Runs `blocks` as one session in `cwd`: the exit status, and stdout and stderr together."""
    spec = cwd / ".doc_blocks.json"
    spec.write_text(json.dumps([asdict(b) for b in blocks]))
    # In a process group of its own, so that a timeout ends the commands the blocks started too.
    with subprocess.Popen([sys.executable, "-X", "faulthandler", "-W", "error", __file__, str(spec)], cwd=cwd, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True) as proc:
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            out += f"\nTIMEOUT: the session ran past {timeout} s and was stopped\n"
            return subprocess.CompletedProcess(proc.args, -signal.SIGKILL, out)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out)


# ---- the session (this file run as a script) ----

def split_prompt(text: str) -> tuple[str, list[str]]:
    """A block with `$ ` lines: (the commands, with their `\\` continuations; the other lines, its output)."""
    lines = text.splitlines()
    if not any(line.startswith("$ ") for line in lines):
        return text, []
    commands, output, continued = [], [], False
    for line in lines:
        if line.startswith("$ ") or continued:
            commands.append(line[2:] if line.startswith("$ ") else line)
            continued = line.endswith("\\")
        else:
            commands.append("")  # keeps the line numbers
            output.append(line)
    return "\n".join(commands) + "\n", output


def check_output(block: Block, expected: list[str], printed: str) -> None:
    """A documented JSON object output: the same keys, and the same values where the doc shows one."""
    text = "\n".join(expected).strip()
    if not text.startswith("{"):
        return
    shown = json.loads(re.sub(r"(?<=[:\[,\s])\.\.\.(?=\s*[,}\]])", "null", text))
    got = json.loads(printed.strip().splitlines()[-1])
    if sorted(shown) != sorted(got):
        raise BlockFailed(f"the output's keys are {sorted(got)}, the doc shows {sorted(shown)}")
    wrong = {k: got[k] for k, v in shown.items() if v is not None and v != got[k]}
    if wrong:
        raise BlockFailed(f"the output has {wrong}, the doc shows { {k: shown[k] for k in wrong} }")


def run_shell(block: Block) -> None:
    script, expected = split_prompt(block.text)
    # The trap names the doc's line: the script is padded so that bash's line numbers are the doc's.
    prelude = "trap 'echo \"$BASH_COMMAND: exit $? at line $LINENO\" >&2' ERR\n"
    padded = prelude + "\n" * (block.line - 2) + script
    proc = subprocess.run(["bash", "-Eeuo", "pipefail", "-c", padded], text=True,
                          stdout=subprocess.PIPE if expected else None)
    if expected:
        sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        raise BlockFailed(f"the shell block failed (exit {proc.returncode})")
    if expected:
        check_output(block, expected, proc.stdout)


def run_python(block: Block, namespace: dict) -> None:
    # Padded so that tracebacks name the doc's file and line (linecache reads the doc itself).
    code = compile("\n" * (block.line - 1) + block.text, str(ROOT / block.doc), "exec")
    exec(code, namespace)  # noqa: S102 - running the docs' own examples is the point


def main(spec: str) -> int:
    # The blocks run in a module of their own named __main__: they see none of this file's names, and
    # what they define pickles by name (a process pool's functions).
    session = types.ModuleType("__main__")
    session.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = session
    for b in (Block(**d) for d in json.loads(Path(spec).read_text())):
        if b.skip:
            print(f"==> {b.doc}:{b.line} ({b.lang}): not run in CI: {b.skip}", flush=True)
            continue
        print(f"==> {b.doc}:{b.line} ({b.lang})", flush=True)
        try:
            run_shell(b) if b.lang == "sh" else run_python(b, session.__dict__)
        except BlockFailed as e:
            print(f"FAILED: {b.doc}:{b.line} ({b.lang} block): {e}", flush=True)
            return 1
        except BaseException:  # noqa: BLE001 - whatever a Python block raises, with its traceback
            sys.stdout.flush()
            traceback.print_exc(file=sys.stdout)
            print(f"FAILED: {b.doc}:{b.line} ({b.lang} block)", flush=True)
            return 1
        sys.stdout.flush()
        sys.stderr.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
