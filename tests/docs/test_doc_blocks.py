"""Every code block of the docs runs as written (doc_blocks.py; docs/README.md says how to write one).

One test per page with ```python or ```sh blocks: the page's blocks run in order as one session in a
fresh folder laid out like the checkout, with the built `placelab` on PATH (PLACELAB_BIN) and this
checkout's `placelab` package. The tests of the runner itself come first.
"""
import os

import pytest

from doc_blocks import ROOT, Block, blocks_of, doc_files, make_sandbox, parse, run_session, session_env

BIN = os.environ.get("PLACELAB_BIN")

# Commands the docs give at full size that CI runs smaller, as (doc, text, what CI runs instead). Each
# must still be found in its doc, or the page's test fails: a changed command is never skipped silently.
SHORTCUTS = [
    ("README.md", "--policy gdp --steps 200 ", "--policy gdp --steps 2 "),              # minutes -> seconds
    ("README.md", '{"pretrained": false}', '{"pretrained": false, "steps": 2}'),
    ("README.md", '{"simulations": 1000}', '{"simulations": 60}'),
    ("README.md", "calibrate --backend cpu --out", "calibrate --backend cpu --quick --out"),
    ("README.md", "reproduce.py --quick --out", "reproduce.py --quick --only tarnawski --out"),
    ("docs/replay.md", "calibrate --backend cpu --out", "calibrate --backend cpu --quick --out"),
]

# The blocks that may say `# not run in CI: ...`, per page. Keep it short: a new one is added here, in review.
OPT_OUTS = {
    "README.md": 2,             # `make run` / `make test`, and building by hand: CI is that build
    "docs/distributed.md": 2,   # a hostfile of two nodes, and a Slurm script
    "docs/reproducing.md": 4,   # the papers' full tables: hours on 2 cores
}


def with_shortcuts(blocks, shortcuts=SHORTCUTS):
    """`blocks` with the CI shortcuts of their doc applied; a shortcut its doc no longer holds is an error."""
    out = list(blocks)
    for doc, text, instead in shortcuts:
        hits = [i for i, b in enumerate(out) if b.doc == doc and text in b.text]
        if doc in {b.doc for b in out} and not hits:
            raise AssertionError(f"{doc} no longer holds {text!r}: update SHORTCUTS in {__file__}")
        for i in hits:
            b = out[i]
            out[i] = Block(b.doc, b.line, b.lang, b.text.replace(text, instead), b.skip)
    return out


# ---- the runner ----

def session(tmp_path, markdown, doc="page.md"):
    return run_session(parse(markdown, doc), make_sandbox(tmp_path), session_env(BIN or "/usr/bin/true"), 120)


def test_blocks_are_python_and_shell_only():
    text = "```python\nx = 1\n```\n```\nsynopsis [--x]\n```\n```json\n{}\n```\n```sh\necho hi\n```\n"
    assert [(b.line, b.lang, b.text) for b in parse(text, "d.md")] == [(2, "python", "x = 1\n"), (11, "sh", "echo hi\n")]


def test_an_opt_out_needs_a_reason():
    [b] = parse("```sh\n# not run in CI: needs a GPU\nplacelab replay --backend cuda\n```\n", "d.md")
    assert b.skip == "needs a GPU"
    with pytest.raises(ValueError, match=r"d.md:2: .*needs its reason"):
        parse("```sh\n# not run in CI:\nls\n```\n", "d.md")


def test_a_page_is_one_session(tmp_path):
    page = ("```python\nimport json\nopen('a.json', 'w').write(json.dumps({'n': 2}))\nn = 2\n```\n"
            "```sh\ntest \"$(cat a.json)\" = '{\"n\": 2}' && V=1 && echo $V > b.txt\n```\n"
            "```python\nassert n == 2 and open('b.txt').read() == '1\\n'\n```\n"
            "```sh\n# not run in CI: shows how\nexit 3\n```\n")
    r = session(tmp_path, page)
    assert r.returncode == 0, r.stdout
    assert "page.md:13 (sh): not run in CI: shows how" in r.stdout


def test_blocks_see_none_of_the_runners_names(tmp_path):
    r = session(tmp_path, "```python\njson.dumps(1)\n```\n")
    assert r.returncode == 1 and "NameError: name 'json' is not defined" in r.stdout


def test_a_failing_python_block_names_its_doc_line(tmp_path):
    r = session(tmp_path, "text\n\n```python\nx = 1\ny = undefined_name\n```\n")
    assert r.returncode == 1
    assert 'page.md", line 5' in r.stdout and "FAILED: page.md:4 (python block)" in r.stdout


def test_a_failing_shell_command_names_its_doc_line(tmp_path):
    r = session(tmp_path, "```sh\ntrue\nfalse   # fails\necho never\n```\n")
    assert r.returncode == 1 and "exit 1 at line 3" in r.stdout and "never" not in r.stdout
    r = session(tmp_path / "u", "```sh\necho $NOT_SET\n```\n")
    assert r.returncode == 1 and "NOT_SET: unbound variable" in r.stdout


def test_the_session_is_laid_out_like_a_checkout(tmp_path):
    r = session(tmp_path, "```sh\ntest -f README.md && test -d ../shared/data && touch new.txt\n```\n")
    assert r.returncode == 0, r.stdout
    assert not (ROOT / "new.txt").exists() and (tmp_path / "main" / "new.txt").exists()


def test_prompt_blocks_check_a_json_output(tmp_path):
    good = '```sh\n$ echo \'{"a": 1, "b": 2}\'\n{"a": ..., "b": 2}\n```\n'
    assert session(tmp_path / "1", good).returncode == 0
    r = session(tmp_path / "2", good.replace('"b": 2}\n```', '"b": 3}\n```'))
    assert r.returncode == 1 and "the output has {'b': 2}, the doc shows {'b': 3}" in r.stdout
    r = session(tmp_path / "3", good.replace('"b": 2}\n```', '"c": 2}\n```'))
    assert r.returncode == 1 and "the output's keys are ['a', 'b'], the doc shows ['a', 'c']" in r.stdout


def test_a_shortcut_the_doc_lost_is_an_error():
    blocks = parse("```sh\nplacelab train --steps 200\n```\n", "README.md")
    assert with_shortcuts(blocks, [("README.md", "--steps 200", "--steps 2")])[0].text == "placelab train --steps 2\n"
    with pytest.raises(AssertionError, match="README.md no longer holds '--steps 20000'"):
        with_shortcuts(blocks, [("README.md", "--steps 20000", "--steps 2")])


# ---- the docs ----

PAGES = [doc for doc in doc_files() if blocks_of(doc)]


def test_opt_outs_are_the_listed_few():
    found = {}
    for doc in PAGES:
        for b in blocks_of(doc):
            if b.skip:
                found[b.doc] = found.get(b.doc, 0) + 1
    assert found == OPT_OUTS, "blocks marked '# not run in CI' differ from OPT_OUTS in this file"


@pytest.mark.parametrize("doc", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_doc_blocks_run(doc, tmp_path):
    if not BIN:
        pytest.skip("PLACELAB_BIN is not set: the shell blocks need the placelab program")
    blocks = with_shortcuts(blocks_of(doc))
    sandbox = make_sandbox(tmp_path)
    r = run_session(blocks, sandbox, session_env(BIN), timeout=300)
    assert r.returncode == 0, f"{doc.relative_to(ROOT)}'s blocks failed (docs/README.md):\n{r.stdout[-8000:]}"
    if doc.name == "README.md" and doc.parent == ROOT:
        # Run from the repository root, the README's commands write under runs/ (git ignores it) alone.
        made = sorted(p.name for p in sandbox.iterdir() if not p.is_symlink() and p.name != ".doc_blocks.json")
        assert made == ["runs"], f"the README's blocks wrote {made} into the checkout"
