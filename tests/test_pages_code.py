"""The solutions shown in the guide pages run and their own checks pass."""

import re
import textwrap
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
DROPDOWN = re.compile(r"^( *):::\{dropdown\}.*?\n\1```python\n(.*?)\n\1```", re.S | re.M)


def dropdown_solutions() -> list[tuple[str, str]]:
    """(page:line, code) for every python block inside a dropdown of a book page."""
    found = []
    for page in sorted((ROOT / "book").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for match in DROPDOWN.finditer(text):
            line = text[: match.start()].count("\n") + 1
            found.append((f"{page.name}:{line}", textwrap.dedent(match.group(2))))
    return found


SOLUTIONS = dropdown_solutions()


def test_the_pages_have_solutions():
    assert any(where.startswith("ecosystem.md") for where, _ in SOLUTIONS)


@pytest.mark.parametrize(
    "code", [code for _, code in SOLUTIONS], ids=[where for where, _ in SOLUTIONS]
)
def test_solution_runs(code, capsys):
    torch.manual_seed(0)  # the pages draw random inputs; a test must not
    exec(compile(code, "<page solution>", "exec"), {"__name__": "page_solution"})
    printed = capsys.readouterr().out
    if "MultiHeadSelfAttention" in code:
        assert printed.strip() == "torch.Size([2, 5, 16])"  # what the page's comment promises
