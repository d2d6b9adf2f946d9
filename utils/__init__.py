"""The PyTorch book's course package: the helpers each chapter teaches, for later chapters to reuse."""

from pathlib import Path


def _book_root() -> Path:
    """The repository's root when this package sits in a clone (data/ and runs/ go there), else the cwd.

    An installed copy (Colab, a notebook copied out of the repository) works in the current folder.
    """
    checkout = Path(__file__).resolve().parent.parent
    return checkout if (checkout / "pyproject.toml").is_file() else Path.cwd()


REPO_ROOT = _book_root()
