"""Facts the tests share, each defined once: where the repository is, what the toc lists,
which tags a notebook may carry, and what counts as a machine path in a stored output."""

from __future__ import annotations

import configparser
import re

import yaml

from tools import NOTEBOOK_DIR, REPO_ROOT, book_notebooks, chapter_notebooks, is_deep_dive
from tools.student import SOLUTION_TAGS

__all__ = ["ALLOWED_TAGS", "MACHINE_PATH", "NOTEBOOK_DIR", "REPO_ROOT", "SOLUTION_TAGS"]
__all__ += ["book_notebooks", "chapter_notebooks", "is_deep_dive", "toc_files"]

ALLOWED_TAGS = SOLUTION_TAGS | {
    "parameters",
    "raises-exception",
    "nbval-ignore-output",
    "hide-output",
    "headline",
}


def _machine_path_pattern() -> re.Pattern:
    """The machine-path pattern nbval masks (nbval.cfg), so the hygiene test and nbval agree."""
    config = configparser.ConfigParser()
    config.read(REPO_ROOT / "nbval.cfg")
    for section in config.sections():
        if config[section].get("replace") == "PATH":
            return re.compile(config[section]["regex"])
    raise LookupError("nbval.cfg has no section that replaces machine paths with PATH")


MACHINE_PATH = _machine_path_pattern()


def toc_files() -> list[str]:
    """Every document in _toc.yml (root first), as paths without suffix; each part has a caption."""
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        assert part.get("caption"), "every part of _toc.yml needs a caption"
        files += [chapter["file"] for chapter in part["chapters"]]
    return files
