"""The first code cell of every chapter and deep dive: install the book's `utils` where it is missing.

    python -m tools.bootstrap    write (or refresh) that cell in every notebook

On Colab, or with a notebook copied out of the repository, `import utils` fails; the cell then
installs the package from the repository named once, in _config.yml (`repository.url`), which
also gives the site its repository and launch buttons. Set BOOK_UTILS_SOURCE to install from
somewhere else (a fork, a local folder). Inside a set-up clone the cell does nothing and prints
nothing.
"""

from __future__ import annotations

import sys

import yaml

from tools import REPO_ROOT, book_notebooks

MARKER = "# Colab, or this notebook copied out of the book's repository:"


def repository_url() -> str:
    """The book's repository, as _config.yml names it."""
    config = yaml.safe_load((REPO_ROOT / "_config.yml").read_text())
    return config["repository"]["url"]


# _config.yml's repository URL until the book is published
PLACEHOLDER = "https://github.com/example/pytorch-book"

# While _config.yml still names the placeholder, the cell stops with this message instead of a pip
# error about a repository that does not exist; after the real URL is set, `python -m
# tools.bootstrap` drops these lines.
PLACEHOLDER_STOP = (
    '    if source == "git+{url}":  # no real repository is named yet\n'
    "        raise RuntimeError(\"set os.environ['BOOK_UTILS_SOURCE'] to the book's pip source, e.g. \"\n"
    "                           \"'git+https://github.com/OWNER/REPO', and rerun this cell (or use a clone and `make setup`)\") from None\n"
)


def bootstrap_source(url: str) -> str:
    """The cell's code for a repository URL."""
    stop = PLACEHOLDER_STOP.format(url=url) if url == PLACEHOLDER else ""
    return (
        f"{MARKER} install the book's `utils` package\n"
        "# first. In a clone set up with `make setup` it is already installed and nothing happens.\n"
        "import os\n"
        "\n"
        "try:\n"
        "    import utils.device  # the book's package\n"
        "except ModuleNotFoundError:\n"
        f'    source = os.environ.get("BOOK_UTILS_SOURCE", "git+{url}")\n'
        f"{stop}"
        "    %pip install --quiet {source}"
    )


FOLDED = "hide-cell"  # the site folds the install cell: a page opens on the chapter, not on pip


def apply(nb, source: str) -> bool:
    """Put `source` in the notebook's first code cell (inserting one if needed), folded on the site;
    True if changed."""
    from nbformat.v4 import new_code_cell

    first = next(i for i, cell in enumerate(nb.cells) if cell.cell_type == "code")
    if nb.cells[first].source.startswith(MARKER):
        cell = nb.cells[first]
        tags = cell.metadata.setdefault("tags", [])
        if cell.source == source and FOLDED in tags:
            return False
        cell.source = source
        if FOLDED not in tags:
            tags.append(FOLDED)
    else:
        nb.cells.insert(first, new_code_cell(source, metadata={"tags": [FOLDED]}))
    return True


def main() -> int:
    import nbformat

    source = bootstrap_source(repository_url())
    for path in book_notebooks():
        nb = nbformat.read(path, as_version=4)
        if apply(nb, source):
            nbformat.write(nb, path)
            print(
                f"updated {path.name}: re-execute it with `make outputs NB={path.relative_to(REPO_ROOT)}`"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
