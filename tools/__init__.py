"""Tools for maintaining the book (not installed, not taught): outputs, run report, student copies, benchmark.

Run them from the repository root as modules, e.g. `python -m tools.outputs`; the Makefile does.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = REPO_ROOT / "notebooks"


def chapter_notebooks(notebook_dir: Path = NOTEBOOK_DIR) -> list[Path]:
    """The numbered chapter notebooks (NN_name.ipynb), in reading order."""
    return sorted(notebook_dir.glob("[0-9][0-9]_*.ipynb"))
