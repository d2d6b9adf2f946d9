"""The files that let others take the project over stay true: `make help`, the ruff hook, licenses."""

import re
import shutil
import subprocess
import tomllib

import pytest

from tests.helpers import REPO_ROOT


def phony_targets() -> list[str]:
    makefile = (REPO_ROOT / "Makefile").read_text()
    return re.search(r"^\.PHONY:(.*)$", makefile, re.M).group(1).split()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_help_lists_every_target_with_its_text() -> None:
    result = subprocess.run(  # no target named: plain `make` must be `make help`
        ["make", "-s", "--no-print-directory", "-f", str(REPO_ROOT / "Makefile")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    listed = dict(line.strip().split(maxsplit=1) for line in result.stdout.splitlines())
    assert sorted(listed) == sorted(phony_targets())
    assert all(len(text) > 10 for text in listed.values()), listed


def test_the_ruff_hook_runs_the_pinned_ruff() -> None:
    pinned = re.search(r"^ruff==(\S+)$", (REPO_ROOT / "constraints.txt").read_text(), re.M)
    hook = (REPO_ROOT / ".pre-commit-config.yaml").read_text()
    assert f"rev: v{pinned.group(1)}\n" in hook, "set the hook's rev to constraints.txt's ruff"


def test_code_is_mit_and_prose_cc_by() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (REPO_ROOT / "LICENSE").read_text().startswith("MIT License\n")
    text = (REPO_ROOT / "LICENSE-text.md").read_text()
    assert "https://creativecommons.org/licenses/by/4.0/" in text
    assert "The PyTorch book authors" in text


def test_readme_shows_make_tests_file_order() -> None:
    """The README prints the command `make test` runs: the same files, longest first, that exist."""
    makefile = (REPO_ROOT / "Makefile").read_text().replace("\\\n", " ")
    longest = re.search(r"^LONGEST_FIRST := (.*)$", makefile, re.M).group(1).split()
    readme = (REPO_ROOT / "README.md").read_text().replace("\\\n", " ")
    command = re.search(r"--no-loadscope-reorder (.*?) tests notebooks\n", readme).group(1).split()
    assert command == longest, (
        "README.md's make-test command and the Makefile's LONGEST_FIRST differ"
    )
    missing = [path for path in longest if not (REPO_ROOT / path).is_file()]
    assert not missing, f"LONGEST_FIRST names files that do not exist: {missing}"
