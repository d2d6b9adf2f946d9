"""Every notebook, chapter or deep dive, is clean and complete: listed in the toc, titled, run top to
bottom, portable. Deep dives (notebooks/deeper/) follow the chapters' template with their own title."""

import ast
import json
import re
from functools import cache
from pathlib import Path

import pytest
from IPython.core.inputtransformer2 import TransformerManager

from tests.helpers import (
    ALLOWED_TAGS,
    MACHINE_PATH,
    NOTEBOOK_DIR,
    SOLUTION_TAGS,
    book_notebooks,
    is_deep_dive,
    toc_files,
)
from tests.helpers import REPO_ROOT as ROOT

NOTEBOOKS = book_notebooks()
DEEP_DIVE_TITLE = "# Going deeper · "


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def code_cells(nb: dict) -> list[dict]:
    return [cell for cell in nb["cells"] if cell["cell_type"] == "code"]


@cache
def _ipython() -> TransformerManager:
    return TransformerManager()


def count_asserts(source: str) -> int:
    """The `assert` statements in one code cell, as the kernel runs it: magics and shell lines
    (`%pip`, `!ls`) are turned into Python the way IPython does first; a comment or a string
    saying "assert" is no assert, and neither is the body of a cell magic (`%%time`). A cell that
    is not valid Python counts 0."""
    try:
        tree = ast.parse(_ipython().transform_cell(source))
    except SyntaxError:
        return 0
    return sum(isinstance(node, ast.Assert) for node in ast.walk(tree))


def cells_with_asserts(nb: dict) -> int:
    """How many code cells of a notebook hold at least one real assert statement."""
    return sum(count_asserts("".join(cell["source"])) > 0 for cell in code_cells(nb))


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"
    stray = {p.relative_to(NOTEBOOK_DIR) for p in NOTEBOOK_DIR.rglob("*.ipynb")} - {
        p.relative_to(NOTEBOOK_DIR) for p in NOTEBOOKS
    }
    stray = {p for p in stray if ".ipynb_checkpoints" not in p.parts}
    assert not stray, f"notebooks outside notebooks/NN_*.ipynb and notebooks/deeper/: {stray}"


def test_toc_and_notebooks_match():
    listed = {f for f in toc_files() if f.startswith("notebooks/")}
    present = {f"notebooks/{p.relative_to(NOTEBOOK_DIR).with_suffix('')}" for p in NOTEBOOKS}
    assert present - listed == set(), "notebooks missing from _toc.yml"
    assert listed - present == set(), "_toc.yml lists notebooks that do not exist"


def test_toc_pages_exist():
    for entry in toc_files():
        if not entry.startswith("notebooks/"):
            assert (ROOT / f"{entry}.md").exists() or (ROOT / entry).exists(), (
                f"{entry} in _toc.yml is missing"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_name_and_title(path):
    first = load(path)["cells"][0]
    assert first["cell_type"] == "markdown"
    title = "".join(first["source"]).splitlines()[0]
    if is_deep_dive(path):
        assert re.fullmatch(r"[a-z][a-z0-9_]+", path.stem), "deep dives are named topic_words.ipynb"
        assert title.startswith(DEEP_DIVE_TITLE), f"first line must be '{DEEP_DIVE_TITLE}Title'"
        return
    assert re.fullmatch(r"\d\d_[a-z0-9_]+", path.stem), "notebooks are named NN_topic_words.ipynb"
    assert title.startswith(f"# {path.stem[:2]} · "), (
        f"first line must be '# {path.stem[:2]} · Title', got {title!r}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_executed_in_order_on_a_fresh_kernel(path):
    counts = [cell["execution_count"] for cell in code_cells(load(path))]
    assert counts == list(range(1, len(counts) + 1)), (
        f"run `make outputs NB={path.relative_to(ROOT)}`"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_tags_errors_and_paths(path):
    nb = load(path)
    for index, cell in enumerate(code_cells(nb)):
        tags = set(cell.get("metadata", {}).get("tags", []))
        assert tags <= ALLOWED_TAGS, f"cell {index}: tags {tags - ALLOWED_TAGS} are not allowed"
        errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
        if "raises-exception" in tags:
            assert errors, f"cell {index} is tagged raises-exception but stored no error"
        else:
            assert not errors, f"cell {index} stored an error: {errors[0].get('ename')}"
        text = json.dumps(cell["outputs"])
        found = MACHINE_PATH.search(text)
        assert not found, f"cell {index} output holds a machine path {found.group()!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_template_parts(path):
    nb = load(path)
    sources = ["".join(cell["source"]) for cell in nb["cells"]]
    headings = [line for s in sources for line in s.splitlines() if line.startswith("## ")]
    assert any("Exercises" in h for h in headings), "a chapter ends with Exercises"
    assert any("Summary" in h for h in headings), "and a Summary"
    tagged = [set(cell.get("metadata", {}).get("tags", [])) for cell in code_cells(nb)]
    assert any(SOLUTION_TAGS & tags for tags in tagged), "exercise solutions are folded"
    assert any("parameters" in tags for tags in tagged), "one cell tagged parameters"
    assert cells_with_asserts(nb) >= 3, "claims are checked with assert (in at least 3 cells)"


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if is_deep_dive(p)], ids=lambda p: p.stem)
def test_a_deep_dive_and_its_chapters_link_both_ways(path):
    link = f"deeper/{path.name}"
    chapters = [p for p in NOTEBOOKS if not is_deep_dive(p) and link in p.read_text()]
    assert chapters, f"no chapter links to {link}"
    text = path.read_text()
    for chapter in chapters:
        assert f"../{chapter.name}" in text, f"{path.name} does not link back to {chapter.name}"


def test_count_asserts_counts_statements_not_the_word():
    assert count_asserts("x = 1\nassert x == 1, 'one'\nassert x") == 2
    assert count_asserts("# assert x == 1\nprint('assert x')  # a comment and a string") == 0
    assert count_asserts("if True:\n    %pip install --quiet {source}\n    assert 1 + 1 == 2") == 1
    assert count_asserts("!ls\nfiles = !ls\nassert files") == 1
    assert count_asserts("def check(x):\n    assert x > 0\n\ncheck(1)") == 1
    assert count_asserts("%%time\nassert True") == 0  # the body of a cell magic is a string
    assert count_asserts("assert (") == 0  # not Python: counted as no assert, not a crash


def test_a_chapter_whose_asserts_are_only_comments_fails_the_template():
    def cell(source: str, cell_type: str = "code") -> dict:
        return {"cell_type": cell_type, "source": [source], "metadata": {}, "outputs": []}

    claims = [cell(f"y = {n}  # assert y == {n}") for n in range(3)]
    prose = cell("We assert that y is small.", "markdown")
    assert cells_with_asserts({"cells": [prose, *claims]}) == 0
    checked = [cell(f"y = {n}\nassert y == {n}") for n in range(3)]
    assert cells_with_asserts({"cells": [prose, *claims, *checked]}) == 3
