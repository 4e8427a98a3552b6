"""Builds the notebooks of docs/notebooks/ from their script twins, so their code is never written twice.

Each notebook NAME.ipynb is generated from NAME.py, a plain Python script whose cells are separated by
`# %%` lines (the "percent" format of Jupytext, VS Code and Spyder): `# %% [markdown]` starts a markdown
cell whose lines are comments (`# text`), any other `# %%` a code cell. The notebooks carry no outputs.

    /usr/bin/python3 docs/notebooks/build_notebooks.py           # (re)writes every NAME.ipynb
    /usr/bin/python3 docs/notebooks/build_notebooks.py --check   # exit 1 when one is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
_MARKER = "# %%"


def scripts(folder: Path = HERE) -> list[Path]:
    """The script twins in `folder`: every .py file except this tool."""
    return sorted(p for p in folder.glob("*.py") if p.name != Path(__file__).name)


def _split_cells(text: str) -> list[tuple[str, list[str]]]:
    """(kind, lines) per `# %%` cell; lines before the first marker are an error (they would be lost)."""
    cells: list[tuple[str, list[str]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith(_MARKER):
            kind = "markdown" if line[len(_MARKER):].strip() == "[markdown]" else "code"
            cells.append((kind, []))
        elif cells:
            cells[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"line {number}: text before the first '{_MARKER}' cell marker; start the file with one")
    return cells


def _trim(lines: list[str]) -> list[str]:
    """Drops blank lines at both ends of a cell."""
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def _markdown_line(line: str, where: str) -> str:
    if line.strip() == "#" or not line.strip():
        return ""
    if not line.startswith("# "):
        raise ValueError(f"{where}: a markdown cell line must be a '# ' comment, got {line!r}")
    return line[2:]


def notebook_from_script(path: Path) -> nbformat.NotebookNode:
    """The notebook of a `# %%` script: its cells in order, no outputs, fixed cell ids (stable diffs)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    for index, (kind, lines) in enumerate(_split_cells(path.read_text())):
        lines = _trim(lines)
        if kind == "markdown":
            source = "\n".join(_markdown_line(line, f"{path.name} cell {index}") for line in lines)
            cell = nbformat.v4.new_markdown_cell(source)
        else:
            cell = nbformat.v4.new_code_cell("\n".join(lines))
        cell["id"] = f"cell-{index:02d}"
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def notebook_text(path: Path) -> str:
    """The .ipynb file contents for a script twin."""
    return nbformat.writes(notebook_from_script(path)) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for script in scripts():
        target = script.with_suffix(".ipynb")
        text = notebook_text(script)
        if target.exists() and target.read_text() == text:
            continue
        if check:
            stale.append(target.name)
        else:
            target.write_text(text)
            print(f"wrote {target.relative_to(HERE.parent.parent)}")
    if stale:
        print(f"out of date (run {Path(__file__).name}): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
