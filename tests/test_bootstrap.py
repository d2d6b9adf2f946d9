"""The first cell of every chapter installs the book's `utils` where it is missing (Colab, a copy)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests.helpers import REPO_ROOT, book_notebooks, chapter_notebooks
from tools.bootstrap import MARKER, apply, bootstrap_source, repository_url


def test_the_repository_url_is_named_once_in_the_site_config():
    url = repository_url()
    assert url.startswith("https://github.com/"), "launch buttons and pip need a GitHub URL"
    assert f"git+{url}" in bootstrap_source(url)


@pytest.mark.parametrize("path", book_notebooks(), ids=lambda p: p.stem)
def test_every_notebook_starts_with_the_bootstrap_cell(path: Path):
    nb = nbformat.read(path, as_version=4)
    first = next(cell for cell in nb.cells if cell.cell_type == "code")
    assert first.source == bootstrap_source(repository_url()), (
        "run `python -m tools.bootstrap`, then `make outputs`"
    )
    assert first.outputs == [], "inside a set-up clone the cell prints nothing"
    assert "hide-cell" in first.metadata.get("tags", []), "the site folds the install cell"


def test_apply_inserts_once_then_refreshes():
    nb = new_notebook(cells=[new_markdown_cell("# 99 · T"), new_code_cell("x = 1")])
    assert apply(nb, bootstrap_source("https://github.com/a/b"))
    assert nb.cells[1].source.startswith(MARKER) and nb.cells[2].source == "x = 1"
    assert nb.cells[1].metadata["tags"] == ["hide-cell"]
    assert not apply(nb, bootstrap_source("https://github.com/a/b"))
    nb.cells[1].metadata["tags"] = []  # an unfolded cell is folded again
    assert apply(nb, bootstrap_source("https://github.com/a/b"))
    assert nb.cells[1].metadata["tags"] == ["hide-cell"]
    assert apply(nb, bootstrap_source("https://github.com/c/d"))
    assert len(nb.cells) == 3 and "github.com/c/d" in nb.cells[1].source


def _run_cell_without_utils(source: str, monkeypatch) -> list[tuple[str, str]]:
    """Run the cell's Python where `import utils` fails, as on Colab, with BOOK_UTILS_SOURCE unset;
    return the magics it called (name, line as IPython would expand it)."""
    from IPython.core.inputtransformer2 import TransformerManager

    monkeypatch.delenv("BOOK_UTILS_SOURCE", raising=False)
    monkeypatch.setitem(sys.modules, "utils", None)  # makes `import utils.device` fail
    calls = []

    class Shell:
        def run_line_magic(self, name, line):
            calls.append((name, line))

    namespace = {"get_ipython": Shell}
    exec(TransformerManager().transform_cell(source), namespace)
    return [(name, line.format(**namespace)) for name, line in calls]  # IPython expands {source}


def test_the_placeholder_url_stops_with_a_message_not_a_pip_error(monkeypatch):
    from tools.bootstrap import PLACEHOLDER

    with pytest.raises(RuntimeError, match="BOOK_UTILS_SOURCE"):
        _run_cell_without_utils(bootstrap_source(PLACEHOLDER), monkeypatch)
    calls = _run_cell_without_utils(bootstrap_source("https://github.com/a/b"), monkeypatch)
    assert calls == [("pip", "install --quiet git+https://github.com/a/b")]
    assert "RuntimeError" not in bootstrap_source("https://github.com/a/b")


def _python_without_utils(folder: Path) -> Path:
    """A venv that sees this environment's packages (torch, Jupyter) but not the editable `utils`.

    A .pth line adds the site-packages folder to sys.path without running its own .pth files, so
    the editable install's finder is not loaded: `import utils` fails, as on Colab.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "book-test-parent.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


@pytest.mark.slow
def test_a_copied_chapter_installs_utils_and_runs(tmp_path: Path, monkeypatch):
    """Chapter 01 copied out of the repository runs top to bottom in a kernel without `utils`."""
    from nbclient import NotebookClient

    python = _python_without_utils(tmp_path / "venv")
    check = subprocess.run(
        [str(python), "-c", "import utils.device"], capture_output=True, cwd=tmp_path
    )
    assert check.returncode != 0, "the test environment must start without the book's utils"
    kernels = tmp_path / "jupyter" / "kernels" / "copied"
    kernels.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (kernels / "kernel.json").write_text(json.dumps({"argv": argv, "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    # Install from a copy of this checkout's package instead of the repository URL (offline, and
    # the build folder setuptools writes stays out of the checkout).
    source_dir = tmp_path / "source"
    shutil.copytree(
        REPO_ROOT / "utils", source_dir / "utils", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(REPO_ROOT / "pyproject.toml", source_dir)
    monkeypatch.setenv("BOOK_UTILS_SOURCE", f"--no-build-isolation --no-deps {source_dir}")
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    source = next(p for p in chapter_notebooks() if p.name.startswith("01_"))
    copy = shutil.copy(source, workdir / source.name)
    nb = nbformat.read(copy, as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="copied", resources={"metadata": {"path": str(workdir)}}
    ).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    tagged = [c for c in nb.cells if "raises-exception" in c.metadata.get("tags", [])]
    assert len(errors) == len(tagged), "only the cells tagged raises-exception may fail"
    installed = subprocess.run(
        [str(python), "-c", "import utils, sys; print(utils.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    assert str(tmp_path / "venv") in installed, "utils now comes from the copy's own environment"
