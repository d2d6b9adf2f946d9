"""The maintainer tools in tools/: run report, student copies, `outputs` metadata, `make publish`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tests.helpers import REPO_ROOT
from tools import book_notebooks, chapter_notebooks, outputs
from tools import report as run_report
from tools import student as student_tools

RUN = {
    "seconds": 12.3,
    "date": "2026-01-02",
    "machine": "Test CPU, 2 logical CPUs",
    "cpu": "AVX2, bfloat16 emulated",
    "accelerator": "none",
    "python": "3.11.2",
    "torch": "2.6.0+cpu",
}


def stream(text: str):
    return new_output("stream", name="stdout", text=text)


def chapter(title: str = "05 · A chapter", run: dict | None = RUN) -> nbformat.NotebookNode:
    """A small chapter: a headline cell, a folded helper outside the exercises, two solutions."""
    nb = new_notebook(
        cells=[
            new_markdown_cell(f"# {title}\n\nIntro."),
            new_code_cell("x = 1", execution_count=1),
            new_code_cell(
                "print('test accuracy 0.912')",
                execution_count=2,
                metadata={"tags": ["headline"]},
                outputs=[stream("test accuracy 0.912\n")],
            ),
            new_code_cell(
                "plot_helper_code()",
                execution_count=3,
                metadata={"tags": ["hide-input"]},
                outputs=[stream("plotted\n")],
            ),
            new_markdown_cell("## Exercises\n\n### Exercise 1\n\nDo it."),
            new_code_cell(
                "secret_answer_one = 6 * 7\nprint(secret_answer_one)",
                execution_count=4,
                metadata={"tags": ["hide-cell"]},
                outputs=[stream("42\n")],
            ),
            new_markdown_cell("### Exercise 2\n\nAnd this."),
            new_code_cell(
                "secret_answer_two = 'abc'[::-1]",
                execution_count=5,
                metadata={"tags": ["hide-input", "nbval-ignore-output"]},
            ),
            new_code_cell("student_scratch = 1", execution_count=6),
            new_markdown_cell("## Summary\n\n- one"),
            new_code_cell(
                "after_summary = 1",
                execution_count=7,
                metadata={"tags": ["hide-cell"]},
            ),
        ]
    )
    if run is not None:
        nb.metadata["book_run"] = dict(run)
    return nb


def write(nb, path: Path) -> Path:
    nbformat.write(nb, path)
    return path


# --- run report -----------------------------------------------------------------------------


def test_headline_lines_reads_streams_and_results_but_not_images() -> None:
    cell = new_code_cell(
        "...",
        metadata={"tags": ["headline"]},
        outputs=[
            stream("ratio 4.1x\n\n"),
            new_output("execute_result", data={"text/plain": "'ok'"}, execution_count=1),
            new_output("display_data", data={"image/png": "AAAA", "text/plain": "<Figure>"}),
        ],
    )
    nb = new_notebook(cells=[cell, new_code_cell("print(1)", outputs=[stream("1\n")])])
    assert run_report.headline_lines(nb) == ["ratio 4.1x", "'ok'"]


def test_escape_markdown_escapes_table_and_math_characters() -> None:
    assert run_report.escape_markdown("a|b $x$ *y* n_1") == r"a\|b \$x\$ \*y\* n\_1"


def test_fenced_outgrows_backticks_inside() -> None:
    assert run_report.fenced("a ``` b") == "````text\na ``` b\n````"


def test_reading_notes_follow_their_marker_lines() -> None:
    noisy = ["  verdict: within the noise: compiled faster in 3 of 4 rounds"]
    assert run_report.reading_notes(noisy) == [run_report.READING_NOTES[0][1]]
    assert run_report.reading_notes(["  verdict: compiled faster in all 4 rounds"]) == []


def test_render_report_lists_times_setups_and_headlines(tmp_path: Path) -> None:
    first = write(chapter("05 · CNN"), tmp_path / "05_cnn.ipynb")
    gpu_run = dict(RUN, seconds=3.04, accelerator="NVIDIA H100", date="2026-01-03")
    second = write(chapter("08 · AMP", run=gpu_run), tmp_path / "08_amp.ipynb")
    third = write(chapter("09 · Compile", run=None), tmp_path / "09_compile.ipynb")
    report = run_report.render_report([first, second, third])
    assert "| [05 · CNN](../notebooks/05_cnn.ipynb) | 12.3 s | A | 2026-01-02 |" in report
    assert "| [08 · AMP](../notebooks/08_amp.ipynb) | 3.0 s | B | 2026-01-03 |" in report
    assert "| [09 · Compile](../notebooks/09_compile.ipynb) | not recorded | | |" in report
    assert (
        "| A | Test CPU, 2 logical CPUs | AVX2, bfloat16 emulated | none | 3.11.2 | 2.6.0+cpu |"
        in report
    )
    assert (
        "| B | Test CPU, 2 logical CPUs | AVX2, bfloat16 emulated | NVIDIA H100 | 3.11.2 | 2.6.0+cpu |"
        in report
    )
    assert "Total: 15.3 s (0.3 min)" in report
    assert "executed on 2026-01-02 to 2026-01-03" in report
    assert "measured only on the setups above" in report
    assert "CUDA build" not in report  # neither setup is a "+cu" torch without a GPU
    assert report.count("```text\ntest accuracy 0.912\n```") == 3


def test_render_report_explains_a_cuda_build_without_a_gpu(tmp_path: Path) -> None:
    cpu_only = dict(RUN, torch="2.14.1+cu130")  # accelerator "none"
    with_gpu = dict(cpu_only, accelerator="NVIDIA H100")
    first = write(chapter("05 · CNN", run=cpu_only), tmp_path / "05_cnn.ipynb")
    second = write(chapter("08 · AMP", run=with_gpu), tmp_path / "08_amp.ipynb")
    report = run_report.render_report([first, second])
    assert (
        "Setup A's PyTorch, 2.14.1+cu130, is a CUDA build (the default wheel on Linux x86-64) on a "
        "machine without a GPU: it ran everything on the CPU, as a CPU-only build would."
    ) in report
    assert "Setup B's" not in report  # the same build with a GPU needs no note


def test_render_report_links_a_deep_dive_in_its_folder(tmp_path: Path) -> None:
    (tmp_path / "deeper").mkdir()
    first = write(chapter("05 · CNN"), tmp_path / "05_cnn.ipynb")
    deep = write(chapter("Going deeper · Speed"), tmp_path / "deeper" / "speed.ipynb")
    report = run_report.render_report([first, deep])
    assert "| [Going deeper · Speed](../notebooks/deeper/speed.ipynb) | 12.3 s | A |" in report
    assert "### [Going deeper · Speed](../notebooks/deeper/speed.ipynb)" in report


def test_render_report_without_any_run(tmp_path: Path) -> None:
    report = run_report.render_report([write(chapter(run=None), tmp_path / "05_a.ipynb")])
    assert "No notebook has a recorded run yet: run `make outputs`." in report


def test_render_report_follows_the_table_of_contents(tmp_path: Path) -> None:
    toc = tmp_path / "_toc.yml"
    toc.write_text(
        "format: jb-book\nroot: book/intro\nparts:\n  - caption: Part\n    chapters:\n"
        "      - file: book/setup\n      - file: notebooks/13_profiling\n"
        "      - file: notebooks/12_errors.ipynb\n"
    )
    paths = [
        write(chapter(f"{name[:2]} · {name}"), tmp_path / f"{name}.ipynb")
        for name in ("11_onnx", "12_errors", "13_profiling", "14_extra")
    ]
    report = run_report.render_report(paths, toc=tmp_path / "_toc.yml")
    order = [report.index(f"(../notebooks/{p.name}) |") for p in paths]
    # 13 and 12 as the toc lists them, then the notebooks it does not list, in the given order
    assert order[2] < order[1] < order[0] < order[3]
    assert run_report.in_reading_order(paths, tmp_path / "missing.yml") == paths  # no toc: as given


def test_real_reading_order_is_the_file_order() -> None:
    # A file browser lists the chapters as the book reads them: the toc's order is the names' order.
    names = [p.stem for p in run_report.in_reading_order(chapter_notebooks())]
    assert names == sorted(names), names
    assert sorted(names) == [p.stem for p in chapter_notebooks()]  # none lost or repeated
    numbers = [n[:2] for n in names]
    assert numbers == [f"{i:02d}" for i in range(len(numbers))], numbers  # 00, 01, ... with no gap


def test_render_report_says_when_headline_cells_lost_their_output(tmp_path: Path) -> None:
    nb = chapter()
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    cleared = write(nb, tmp_path / "05_cleared.ipynb")
    report = run_report.render_report([cleared])
    assert "Tagged `headline` cells have no stored output: re-run `make outputs`." in report
    assert "No cell is tagged" not in report
    untagged = new_notebook(cells=[new_markdown_cell("# 06 · Plain"), new_code_cell("x = 1")])
    report = run_report.render_report([write(untagged, tmp_path / "06_plain.ipynb")])
    assert "No cell is tagged `headline`." in report


def test_write_report_is_atomic_and_creates_the_folder(tmp_path: Path) -> None:
    notebook = write(chapter(), tmp_path / "05_a.ipynb")
    target = run_report.write_report([notebook], tmp_path / "book" / "run_report.md")
    assert target.read_text() == run_report.render_report([notebook])
    assert sorted(p.name for p in target.parent.iterdir()) == ["run_report.md"]


def test_committed_run_report_matches_the_notebooks() -> None:
    expected = run_report.render_report(book_notebooks())
    assert run_report.REPORT_PATH.read_text() == expected, (
        "book/run_report.md is stale: run `make report` (or `python -m tools.report`)"
    )


def test_run_report_numbers_are_the_notebooks_numbers() -> None:
    """Read back independently: each chapter's time and headline numbers are the stored ones."""
    report = run_report.REPORT_PATH.read_text()
    headline_part = report.split("## Headline results", 1)[1]
    for path in book_notebooks():
        nb = nbformat.read(path, as_version=4)
        link = run_report.page_link(path)
        row = next(line for line in report.splitlines() if f"({link}) |" in line)
        if "book_run" in nb.metadata:
            run = nb.metadata["book_run"]
            assert f"| {float(run['seconds']):.1f} s |" in row, path.name
            assert f"| {run['date']} |" in row, path.name
        section = headline_part.split(f"({link})", 1)[1].split("\n### ", 1)[0]
        stored = "".join(
            cell_output["text"]
            for cell in nb.cells
            if "headline" in cell.get("metadata", {}).get("tags", [])
            for cell_output in cell.get("outputs", [])
            if cell_output.get("output_type") == "stream"
        ) + "".join(
            cell_output["data"]["text/plain"]
            for cell in nb.cells
            if "headline" in cell.get("metadata", {}).get("tags", [])
            for cell_output in cell.get("outputs", [])
            if cell_output.get("output_type") == "execute_result"
        )
        number = r"\d+(?:\.\d+)?"
        assert re.findall(number, section) == re.findall(number, stored), path.name


# --- student copies -------------------------------------------------------------------------


def test_solution_cells_are_only_code_cells_folded_inside_exercises() -> None:
    assert student_tools.solution_cells(chapter()) == [5, 7]


def test_student_copy_replaces_solutions_and_keeps_everything_else() -> None:
    original = chapter()
    student = student_tools.student_copy(original)
    nbformat.validate(student)
    for index in (5, 7):
        cell = student.cells[index]
        assert cell.source == "# your code here"
        assert cell.outputs == [] and cell.execution_count is None
        assert not {"hide-cell", "hide-input"} & set(cell.metadata.get("tags", []))
    assert student.cells[7].metadata["tags"] == ["nbval-ignore-output"]
    for index in (0, 1, 2, 3, 4, 6, 8, 9, 10):
        assert student.cells[index] == original.cells[index]
    assert "secret_answer" in original.cells[5].source, "the original is left untouched"


def test_write_student_copies_of_the_real_notebooks(tmp_path: Path) -> None:
    notebooks = chapter_notebooks()
    written = student_tools.write_student_copies(tmp_path / "student", notebooks)
    assert [p.name for p in written] == [p.name for p in notebooks]
    for source, copy in zip(notebooks, written, strict=True):
        original = nbformat.read(source, as_version=4)
        student = nbformat.read(copy, as_version=4)
        nbformat.validate(student)
        solutions = student_tools.solution_cells(original)
        kept = "\n".join(cell.source for i, cell in enumerate(original.cells) if i not in solutions)
        text = copy.read_text()
        for index in solutions:
            assert student.cells[index].source == "# your code here"
            for line in original.cells[index].source.splitlines():
                if len(line.strip()) > 3 and line.strip() not in kept:
                    assert line.strip() not in text, f"{copy.name}: solution line left: {line!r}"


def test_student_command_line(tmp_path: Path) -> None:
    assert student_tools.main(["--out", str(tmp_path / "copies")]) == 0
    assert len(list((tmp_path / "copies").glob("*.ipynb"))) == len(chapter_notebooks())
    deep_dives = [p.name for p in book_notebooks() if p not in chapter_notebooks()]
    assert sorted(p.name for p in (tmp_path / "copies" / "deeper").glob("*.ipynb")) == deep_dives


def test_student_folder_is_ignored_by_git_and_the_site() -> None:
    assert "student/" in (REPO_ROOT / ".gitignore").read_text().split()
    assert '"student/*"' in (REPO_ROOT / "_config.yml").read_text()


# --- publishing -----------------------------------------------------------------------------


def git(*args: str, cwd: Path) -> str:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="Book",
        GIT_AUTHOR_EMAIL="book@example.org",
        GIT_COMMITTER_NAME="Book",
        GIT_COMMITTER_EMAIL="book@example.org",
    )
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_make_publish_pushes_the_site_to_a_gh_pages_branch(tmp_path: Path) -> None:
    """`make publish REMOTE=...` from a clone-like repo into a local bare repository."""
    bare, work = tmp_path / "remote.git", tmp_path / "work"
    git("init", "--bare", "-q", str(bare), cwd=tmp_path)
    work.mkdir()
    git("init", "-q", cwd=work)
    site = work / "_build" / "html"
    (site / "notebooks").mkdir(parents=True)
    (site / "index.html").write_text("<html>book</html>")
    (site / "notebooks" / "05_cnn.html").write_text("<html>05</html>")
    env = dict(
        os.environ,
        GIT_COMMITTER_NAME="Book",
        GIT_COMMITTER_EMAIL="book@example.org",
        PYTHONPATH=str(REPO_ROOT),
    )
    result = subprocess.run(
        [
            "make",
            "-f",
            str(REPO_ROOT / "Makefile"),
            "publish",
            f"REMOTE={bare}",
            f"BIN={Path(sys.executable).parent}",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    files = git("ls-tree", "-r", "--name-only", "gh-pages", cwd=bare).split()
    assert sorted(files) == [".nojekyll", "index.html", "notebooks/05_cnn.html"]
    assert git("show", "gh-pages:index.html", cwd=bare) == "<html>book</html>"

    # Publishing again adds a commit with the new content.
    (site / "index.html").write_text("<html>book v2</html>")
    rerun = subprocess.run(result.args, cwd=work, capture_output=True, text=True, env=env)
    assert rerun.returncode == 0, rerun.stderr
    assert git("show", "gh-pages:index.html", cwd=bare) == "<html>book v2</html>"
    assert git("rev-list", "--count", "gh-pages", cwd=bare).strip() == "2"


def test_make_publish_without_a_build_says_to_build_first(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            "make",
            "-f",
            str(REPO_ROOT / "Makefile"),
            "publish",
            f"BIN={Path(sys.executable).parent}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "build the site first with 'make book'" in result.stdout + result.stderr


# --- outputs --------------------------------------------------------------------------------


def test_execute_runs_a_notebook_and_records_book_run(tmp_path: Path) -> None:
    path = write(
        new_notebook(cells=[new_markdown_cell("# 99 · Tiny"), new_code_cell("print(6 * 7)")]),
        tmp_path / "99_tiny.ipynb",
    )
    seconds = outputs.execute(path)
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[1].outputs[0].text == "42\n"
    assert nb.cells[1].execution_count == 1
    run = nb.metadata["book_run"]
    assert set(run) == set(outputs.RUN_FIELDS)
    assert run["seconds"] == round(seconds, 1) and run["seconds"] > 0
    assert run["python"] == ".".join(map(str, sys.version_info[:3]))
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", run["date"])
