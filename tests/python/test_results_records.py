# bench/results holds one current record per benchmark, listed in bench/results/README.md (issue 55). Checked:
#
# - the README names every file of the folder, and every file it names exists (but in "Being added");
# - every path a record's own Markdown names (backticked `bench/...` paths, relative links, bare record file
#   names such as `fidelity_table.md`) exists, as test_docs_references.py checks docs/;
# - every `bench/results/...` path the bench scripts and the notebooks name exists (`git show C:bench/results/...`
#   names one in git);
# - every `/usr/bin/python3 bench/<script>.py ...` command the README gives names a script that accepts its
#   options (its --help lists them).
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_docs_references import TOP, missing_references, repo_files

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
RECORD_EXT = (".md", ".csv", ".png", ".json", ".gz")


def record_files(folder):
    """Every file under `folder`, relative to it, README.md itself left out."""
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        out += [os.path.relpath(os.path.join(dirpath, f), folder) for f in filenames]
    return sorted(f for f in out if f != "README.md")


def readme_names(text):
    """(names in the record sections, names in "Being added"): every backticked word or link target that
    looks like a file or folder of the results folder."""
    listed, coming = set(), set()
    section = listed
    for line in text.splitlines():
        if line.startswith("## "):
            section = coming if line.strip() == "## Being added" else listed
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            section.add(target)
        for span in re.findall(r"`([^`\n]+)`", line):
            word = span.strip()
            if re.fullmatch(r"[\w.-]+(/[\w.-]*)?", word) and (word.endswith(RECORD_EXT) or word.endswith("/")) \
                    and not word.startswith(TOP):  # docs/reproducing.md is a doc, not a record
                section.add(word)
    return listed, coming


def unlisted(files, listed):
    """The files that the README names neither themselves nor by a folder."""
    folders = {n.split("/")[0] + "/" for n in listed if "/" in n}
    return [f for f in files if f not in listed and not any(f.startswith(d) for d in folders)]


def test_readme_lists_every_record_and_only_files_that_exist():
    listed, coming = readme_names((RESULTS / "README.md").read_text(encoding="utf-8"))
    assert {"sim.md", "fidelity.json.gz", "gdp_suite/"} <= listed
    assert unlisted(record_files(RESULTS), listed) == [], "bench/results/README.md does not list these files"
    missing = sorted(n for n in listed if not (RESULTS / n).exists())
    assert missing == [], "bench/results/README.md names files that do not exist"


def test_the_listing_check_can_fail(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ("a.md", "a_0.csv", "sub/x.json", "README.md"):
        (tmp_path / name).write_text("x")
    text = "# r\n\n| [`a.md`](a.md) | ... |\n\n## Being added\n\n| `b.md` | |\n"
    listed, coming = readme_names(text)
    assert listed == {"a.md"} and coming == {"b.md"}
    assert unlisted(record_files(tmp_path), listed) == ["a_0.csv", "sub/x.json"]
    assert unlisted(record_files(tmp_path), listed | {"a_0.csv", "sub/"}) == []


def missing_in_record_doc(name, text, folder, files):
    """The references of one record's Markdown (links resolve from `folder`) that do not exist. Build outputs
    (`build/...`) and another machine's absolute paths, named in commands, are not files of the repository."""
    missing = [m for m in missing_references(name, text, folder, files)
               if not m.split(": ", 1)[1].startswith(("build/", "/"))]
    for lineno, line in enumerate(text.splitlines(), 1):
        for span in re.findall(r"`([^`\n]+)`", line):
            for word in span.split():
                word = word.strip("(),;:'\"")
                if re.fullmatch(r"[\w.-]+", word) and word.endswith(RECORD_EXT) \
                        and not (folder / word).exists() and not (RESULTS / word).exists():
                    missing.append(f"{name}:{lineno}: {word}")
    return missing


def test_records_name_files_that_exist():
    files = repo_files()
    docs = sorted(RESULTS.rglob("*.md"))
    assert len(docs) > 20
    # The README's "Being added" names records still to come.
    missing = [m for doc in docs
               for m in missing_in_record_doc(str(doc.relative_to(ROOT)),
                                              doc.read_text(encoding="utf-8").split("\n## Being added")[0],
                                              doc.parent, files)]
    assert not missing, "records name files that do not exist:\n" + "\n".join(missing)


def test_the_record_check_can_fail():
    text = ("See `fidelity_table.md`, `no_such_table.md`, `bench/results/gone.md`, [x](gone.png),\n"
            "`build/release/cli/placelab` and `/elsewhere/gemm_shapes.py`.\n")
    assert missing_in_record_doc("r.md", text, RESULTS, repo_files()) == [
        "r.md:1: bench/results/gone.md", "r.md:1: link gone.png", "r.md:1: no_such_table.md"]


def test_scripts_and_notebooks_name_records_that_exist():
    sources = sorted((ROOT / "bench").glob("*.py")) + sorted((ROOT / "bench").glob("*.cpp")) + \
        sorted((ROOT / "bench").glob("*.h")) + sorted((ROOT / "docs" / "notebooks").glob("*.py")) + \
        sorted((ROOT / "docs" / "notebooks").glob("*.ipynb"))
    missing = []
    for path in sources:
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for ref in re.findall(r"(?<![\w:/])bench/results/[\w./-]*\w", line):  # not git show C:bench/...
                if not (ROOT / ref).exists():
                    missing.append(f"{path.relative_to(ROOT)}:{lineno}: {ref}")
    assert not missing, "scripts name records that do not exist:\n" + "\n".join(missing)


def readme_commands():
    """(script, [--options]) of every `/usr/bin/python3 bench/<script>.py ...` command in the README."""
    text = (RESULTS / "README.md").read_text(encoding="utf-8")
    out = []
    for span in re.findall(r"`(/usr/bin/python3 bench/[^`]+)`", text):
        script = span.split()[1]
        out.append((script, re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", span)))
    return out


def test_readme_commands_name_scripts_that_take_their_options():
    commands = readme_commands()
    assert len(commands) >= 15 and ("bench/paper_tarnawski.py", ["--steps", "--milp-limit"]) in commands
    helps, bad = {}, []
    for script, options in commands:
        if script not in helps:
            if not (ROOT / script).exists():
                bad.append(f"{script}: no such script")
                helps[script] = ""
                continue
            r = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True, text=True,
                               timeout=120, env=dict(os.environ, MPLBACKEND="Agg"))
            helps[script] = r.stdout if r.returncode == 0 else ""
            if r.returncode != 0:
                bad.append(f"{script} --help: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        for option in options:
            if helps[script] and not re.search(re.escape(option) + r"(?![\w-])", helps[script]):
                bad.append(f"{script} {option}: not in its --help")
    assert not bad, "bench/results/README.md gives commands the scripts do not take:\n" + "\n".join(bad)


@pytest.mark.parametrize("span, expected", [
    ("`/usr/bin/python3 bench/x.py --a 1 --b-c`", [("bench/x.py", ["--a", "--b-c"])]),
])
def test_commands_are_read_from_backticked_spans(span, expected, monkeypatch, tmp_path):
    (tmp_path / "README.md").write_text(f"| r | {span} |\n")
    monkeypatch.setattr(sys.modules[__name__], "RESULTS", tmp_path)
    assert readme_commands() == expected
