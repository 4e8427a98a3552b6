# The notebooks of docs/notebooks/: each is generated from its script twin (in sync, no outputs
# committed) and runs top to bottom in the python3 Jupyter kernel against this checkout's placelab.
import importlib.util
import json
import os
from pathlib import Path

import pytest

import placelab

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "docs" / "notebooks"


def _build_tool():
    spec = importlib.util.spec_from_file_location("build_notebooks", NOTEBOOKS_DIR / "build_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BUILD = _build_tool()
SCRIPTS = BUILD.scripts(NOTEBOOKS_DIR)
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


def test_every_notebook_has_a_script_twin():
    assert [p.stem for p in NOTEBOOKS] == [p.stem for p in SCRIPTS]
    assert {"quickstart", "optimal_pipelined", "torch_import"} <= {p.stem for p in NOTEBOOKS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_notebook_is_generated_from_its_script(script):
    committed = script.with_suffix(".ipynb").read_text()
    assert committed == BUILD.notebook_text(script), f"run docs/notebooks/build_notebooks.py after editing {script.name}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_has_no_committed_outputs(path):
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, f"{path.name} cell {i} has outputs"


def test_build_tool_rejects_text_before_the_first_cell(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text("import os\n# %%\nprint(1)\n")
    with pytest.raises(ValueError, match="line 1: text before the first"):
        BUILD.notebook_from_script(script)


def test_build_tool_splits_markdown_and_code_cells(tmp_path):
    script = tmp_path / "two.py"
    script.write_text("# %% [markdown]\n# # Title\n#\n# text\n\n# %%\nx = 1\n\nprint(x)\n\n")
    nb = BUILD.notebook_from_script(script)
    assert [(c.cell_type, c.source) for c in nb.cells] == [("markdown", "# Title\n\ntext"), ("code", "x = 1\n\nprint(x)")]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path, tmp_path, monkeypatch):
    nb = nbformat.read(path, as_version=4)
    if any("import torch" in c.source for c in nb.cells) and importlib.util.find_spec("torchvision") is None:
        pytest.skip("needs torch and torchvision")
    # The kernel inherits this environment: the placelab under test, and matplotlib's inline backend
    # as in a real notebook (ctest sets MPLBACKEND=Agg for the other tests).
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(Path(placelab.__file__).resolve().parents[1])] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    monkeypatch.delenv("MPLBACKEND", raising=False)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError naming the cell on any exception
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        stderr = "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stderr")
        assert not stderr, f"{path.name} cell {i} wrote to stderr (a warning?):\n{stderr}"
    figures = sum(1 for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {}))
    assert figures >= 2, f"{path.name} showed {figures} figures"
