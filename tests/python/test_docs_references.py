# The docs name files, CLI verbs and options, and Python API names: check that each one exists.
#
# - Every backticked repository path in README.md, CONTRIBUTING.md and docs/*.md (and every relative
#   Markdown link there) exists relative to the repository root; globs are expanded; bare or partial
#   source file names (`engine_test.cpp`, `cuda/kernels.cu`) must match the end of some file in the
#   repository.
# - Every `placelab VERB` and every `--option` in docs/cli.md's code blocks is accepted by
#   `placelab VERB --help` (needs PLACELAB_BIN).
# - Every `pl.NAME` / `placelab.NAME` in docs/python.md exists on the module.
import glob
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Top-level entries of the repository a backticked path may start with.
TOP = ("graphs/", "sim/", "policy/", "cli/", "python/", "bench/", "tests/", "docs/", ".ci/", "build/")
# Extensions that make a bare backticked word a source or data file of ours.
SOURCE_EXT = (".cpp", ".h", ".cu", ".py", ".sh", ".cmake", ".ipynb", ".trace")

# Paths the docs name that are not in the repository, with the reason.
ALLOWED = {
    "build/release/cli/placelab": "build output of `make run`",
    "build/cuda": "the build folder of the cuda preset (docs/replay.md)",
    "throughput-dp/dp.cpp": "a file of the msr-fiddle/dnn-partitioning repository, not ours",
    "throughput-ip/ip.py": "a file of the msr-fiddle/dnn-partitioning repository, not ours",
    "model_specs.py": "a file of the TensorFlow models repository (NASNet), not ours",
    "step.json": "an output file the user writes in an example",
    "sim/tf_placement_sim/tf_sim.py": "Placeto's simulator, in aravic/generalizable-device-placement, not ours",
    "gnmt_model.py": "a file of the tensorflow/nmt repository (GNMT), not ours",
}


def doc_files():
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md"] + sorted((ROOT / "docs").glob("*.md"))


def repo_files():
    out = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        rel = os.path.relpath(dirpath, ROOT)
        dirnames[:] = [d for d in dirnames if not (rel == "." and d in ("build", ".git"))
                       and d not in ("__pycache__", ".pytest_cache")]
        out += [os.path.normpath(os.path.join(rel, f)) for f in filenames]
    return out


def expand_braces(token):
    m = re.search(r"\{([^{}]*)\}", token)
    if not m:
        return [token]
    return [x for alt in m.group(1).split(",")
            for x in expand_braces(token[:m.start()] + alt + token[m.end():])]


def is_template_word(token):
    """A word the docs use as a slot for the user's own value (`<F>`, `$OUT`, `DIR/...`, `NAME`), not a path."""
    return any(c in token for c in "<>$") or "..." in token or re.search(r"\bNAME\b|\bDIR\b", token)


def references(text):
    """(line, token, kind) for each path-like backticked word and each relative link target."""
    refs = []
    in_fence = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue  # code blocks hold commands and user outputs, not references
        for span in re.findall(r"`([^`\n]+)`", line):
            for word in span.split():
                word = word.strip("(),;:'\"")
                if not word or "://" in word or is_template_word(word):
                    continue
                if word.startswith(TOP):
                    refs.append((lineno, word, "path"))
                elif word.endswith(SOURCE_EXT) and re.fullmatch(r"[\w.{},/-]+", word) \
                        and not word.startswith(("../", ".")):
                    refs.append((lineno, word, "suffix"))
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            target = target.split("#")[0]
            if target and "://" not in target and not target.startswith("mailto:"):
                refs.append((lineno, target, "link"))
    return refs


def missing_references(name, text, base, files):
    """The references of one doc (its text; links resolve from folder base) that do not exist."""
    missing = []
    for lineno, token, kind in references(text):
        if token in ALLOWED:
            continue
        for t in expand_braces(token):
            if kind == "link":
                target = (base / t).resolve()
                if target.is_relative_to(ROOT.resolve()) and not target.exists():
                    missing.append(f"{name}:{lineno}: link {t}")
            elif kind == "path":
                t = t.rstrip("/.")
                if not glob.glob(str(ROOT / t)):
                    missing.append(f"{name}:{lineno}: {t}")
            else:
                if not any(f == t or f.endswith("/" + t) for f in files):
                    missing.append(f"{name}:{lineno}: {t} (no file of that name)")
    return missing


def test_doc_paths_exist():
    files = repo_files()
    missing = [m for doc in doc_files()
               for m in missing_references(doc.name, doc.read_text(encoding="utf-8"), doc.parent, files)]
    assert not missing, "docs name paths that do not exist:\n" + "\n".join(missing)


def test_path_check_can_fail(tmp_path):
    # A temporary copy of a real doc, with one path, one file name and one link broken.
    files = repo_files()
    original = (ROOT / "docs" / "reproducing.md").read_text(encoding="utf-8")
    assert "`bench/results/pipeline.md`" in original and "`bench/paper_*.py`" in original
    copy = tmp_path / "reproducing.md"
    copy.write_text(original.replace("`bench/results/pipeline.md`", "`bench/results/pipelines.md`")
                    + "\nSee `no_such_file_test.cpp` and [x](no_such_doc.md).\n", encoding="utf-8")
    docs = ROOT / "docs"
    assert missing_references("reproducing.md", original, docs, files) == []
    n = len(original.splitlines())
    missing = missing_references("reproducing.md", copy.read_text(encoding="utf-8"), docs, files)
    assert len(missing) == 3
    assert "bench/results/pipelines.md" in missing[0]
    assert missing[1:] == [f"reproducing.md:{n + 2}: no_such_file_test.cpp (no file of that name)",
                           f"reproducing.md:{n + 2}: link no_such_doc.md"]


def cli_commands():
    """(verb, [options]) for each `placelab VERB ...` line in docs/cli.md's code blocks."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    out = []
    verb = None
    for block in blocks:
        for line in block.splitlines():
            m = re.match(r"\s*\$?\s*placelab\s+(\S+)", line)
            if m:
                verb = m.group(1)
            elif not line.startswith(" ") or verb is None:
                verb = None
                continue  # output lines, not a command or its continuation
            opts = [o for o in re.findall(r"(?<![\w-])(--[a-z][a-z0-9_-]*)", line) if o != "--PARAM"]
            out.append((verb, opts))
    return out


def test_cli_verbs_and_options_exist():
    binary = os.environ.get("PLACELAB_BIN")
    if not binary:
        pytest.skip("PLACELAB_BIN is not set: cannot ask the placelab program for its options")
    commands = cli_commands()
    assert {v for v, _ in commands} >= {"graph", "cluster", "simulate", "place", "compare", "train",
                                        "replay", "calibrate"}
    helps = {}
    bad = []
    for verb, opts in commands:
        if verb.startswith("--"):
            opts = [verb] + opts
            verb = ""
        if verb not in helps:
            r = subprocess.run([binary] + ([verb] if verb else []) + ["--help"], capture_output=True,
                               text=True, timeout=30)
            if r.returncode != 0:
                bad.append(f"placelab {verb}: not a verb ({r.stderr.strip()})")
                helps[verb] = ""
                continue
            helps[verb] = r.stdout
        for o in opts:
            if not re.search(re.escape(o) + r"(?![\w-])", helps[verb]):
                bad.append(f"placelab {verb} {o}: not in its --help")
    assert not bad, "docs/cli.md shows what the program does not take:\n" + "\n".join(bad)


# `placelab.<kind>` names a file format in the docs (`placelab.graph`), and `placelab.pth` the path
# file the build writes: neither is a module attribute.
FORMAT_NAMES = {"graph", "cluster", "placement", "checkpoint", "replay", "calibration", "profile",
                "params", "pth"}


def test_python_names_exist():
    import placelab

    text = (ROOT / "docs" / "python.md").read_text(encoding="utf-8")
    names = set(re.findall(r"(?<![\w.])pl\.([A-Za-z_]\w*)", text))
    names |= set(re.findall(r"(?<![\w.])placelab\.([A-Za-z_]\w*)", text)) - FORMAT_NAMES
    assert "Simulator" in names and "make_model" in names
    missing = sorted(n for n in names if not hasattr(placelab, n))
    assert not missing, "docs/python.md names what placelab does not have: " + ", ".join(missing)
