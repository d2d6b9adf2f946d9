"""Tools for maintaining the book (not installed, not taught): outputs, run report, student copies, benchmark.

Run them from the repository root as modules, e.g. `python -m tools.outputs`; the Makefile does.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
DEEPER_DIR = NOTEBOOK_DIR / "deeper"  # the "Going deeper" notebooks: one topic each, not numbered


def chapter_notebooks(notebook_dir: Path = NOTEBOOK_DIR) -> list[Path]:
    """The numbered chapter notebooks (NN_name.ipynb), in reading order."""
    return sorted(notebook_dir.glob("[0-9][0-9]_*.ipynb"))


def deep_dive_notebooks(deeper_dir: Path = DEEPER_DIR) -> list[Path]:
    """The Going-deeper notebooks (notebooks/deeper/name.ipynb), by name."""
    return sorted(deeper_dir.glob("*.ipynb"))


def book_notebooks() -> list[Path]:
    """Every notebook of the book: the chapters in reading order, then the deep dives."""
    return chapter_notebooks() + deep_dive_notebooks()


def is_deep_dive(path: Path) -> bool:
    """Whether a notebook is a Going-deeper notebook (it sits in a folder named `deeper`)."""
    return path.parent.name == DEEPER_DIR.name
