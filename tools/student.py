"""Write student copies of the chapters and deep dives: exercise solutions replaced by a stub, outputs cleared.

python -m tools.student [--out DIR]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from tools import REPO_ROOT, book_notebooks, is_deep_dive

SOLUTION_TAGS = frozenset({"hide-cell", "hide-input"})
STUDENT_STUB = "# your code here"


def _heading(cell) -> tuple[int, str] | None:
    """(level, text) of the first Markdown heading in a cell, or None."""
    if cell.cell_type != "markdown":
        return None
    for line in cell.source.splitlines():
        match = re.match(r"^(#{1,6})\s+(.*)", line)
        if match:
            return len(match.group(1)), match.group(2).strip()
    return None


def solution_cells(nb) -> list[int]:
    """Indices of exercise solutions: code cells tagged hide-cell/hide-input in an Exercises section.

    The section starts at a heading that begins with "Exercise" and ends at the next heading of
    the same or a higher level that is not itself an exercise heading (e.g. "## Summary").
    """
    indices, section_level = [], None
    for index, cell in enumerate(nb.cells):
        heading = _heading(cell)
        if heading is not None:
            level, text = heading
            if text.lower().startswith("exercise"):
                section_level = level if section_level is None else min(section_level, level)
            elif section_level is not None and level <= section_level:
                section_level = None
        tags = set(cell.metadata.get("tags", []))
        if section_level is not None and cell.cell_type == "code" and tags & SOLUTION_TAGS:
            indices.append(index)
    return indices


def student_copy(nb):
    """A copy of the notebook with each exercise solution replaced by a stub, its outputs cleared."""
    import copy

    student = copy.deepcopy(nb)
    for index in solution_cells(student):
        cell = student.cells[index]
        cell.source = STUDENT_STUB
        cell.outputs = []
        cell.execution_count = None
        tags = [tag for tag in cell.metadata.get("tags", []) if tag not in SOLUTION_TAGS]
        if tags:
            cell.metadata["tags"] = tags
        else:
            cell.metadata.pop("tags", None)
    return student


def write_student_copies(out_dir: Path, notebooks: list[Path] | None = None) -> list[Path]:
    """Write a validated student copy of every notebook into out_dir (deep dives into
    out_dir/deeper/, as in notebooks/); return the paths written."""
    import nbformat

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in book_notebooks() if notebooks is None else notebooks:
        student = student_copy(nbformat.read(path, as_version=4))
        nbformat.validate(student)
        target = (
            out_dir / path.parent.name / path.name if is_deep_dive(path) else out_dir / path.name
        )
        target.parent.mkdir(exist_ok=True)
        nbformat.write(student, target)
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "student")
    args = parser.parse_args(argv)
    written = write_student_copies(args.out)
    print(f"wrote {len(written)} student notebooks into {args.out.name}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
