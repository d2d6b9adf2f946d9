"""Maintainer tools for the book itself (not taught in a chapter).

    python -m utils.maintain outputs [NOTEBOOK ...]   re-execute notebooks in place, fresh kernel each
    python -m utils.maintain report                   write book/run_report.md from the notebooks
    python -m utils.maintain student [--out DIR]      write student copies (solutions removed)
    python -m utils.maintain publish [--remote R]     push _build/html to the gh-pages branch

Each executed notebook records in its metadata ("book_run") how long the run took and on what
machine and versions, so the site's run report is read from the notebooks, never typed by hand.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
REPORT_PATH = REPO_ROOT / "book" / "run_report.md"
SOLUTION_TAGS = frozenset({"hide-cell", "hide-input"})
STUDENT_STUB = "# your code here"
RUN_FIELDS = ("seconds", "date", "machine", "accelerator", "python", "torch")


def chapter_notebooks(notebook_dir: Path = NOTEBOOK_DIR) -> list[Path]:
    """The numbered chapter notebooks (NN_name.ipynb), in reading order."""
    return sorted(notebook_dir.glob("[0-9][0-9]_*.ipynb"))


def run_metadata(seconds: float) -> dict:
    """What `outputs` stores in a notebook's metadata["book_run"]: time, date, machine, versions."""
    import torch

    from utils.env import cpu_model

    return {
        "seconds": round(seconds, 1),
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{cpu_model()}, {os.cpu_count()} logical CPUs",
        "accelerator": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def strip_machine_paths(nb) -> None:
    """Make stored outputs (tracebacks especially) free of this machine's absolute paths."""
    import json

    replacements = [(str(REPO_ROOT) + "/", ""), (str(Path(sys.base_prefix)) + "/", "<python>/")]
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            text = json.dumps(output)
            for old, new in replacements:
                text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
            output.clear()
            output.update(json.loads(text))


def execute(path: Path, timeout: int = 900) -> float:
    """Run one notebook top to bottom on a fresh kernel, with the notebook's folder as cwd."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    strip_machine_paths(nb)
    nb.metadata["book_run"] = run_metadata(seconds)
    nbformat.write(nb, path)
    return seconds


# --- the run report ---------------------------------------------------------------------------


def notebook_title(nb) -> str | None:
    """The text of the notebook's first `# ` heading (the "NN · Title" line), None if absent."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return None


def cell_text(cell) -> str:
    """The stored text output of a code cell: streams and text/plain results, images skipped."""
    parts = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            parts.append(output.text)
        elif output.output_type in ("execute_result", "display_data"):
            if "text/plain" in output.data and not any(k.startswith("image/") for k in output.data):
                parts.append(output.data["text/plain"] + "\n")
    return "".join(parts)


def headline_lines(nb) -> list[str]:
    """Non-empty output lines of the cells tagged `headline`, in notebook order."""
    lines = []
    for cell in nb.cells:
        if cell.cell_type == "code" and "headline" in cell.metadata.get("tags", []):
            lines += [line.rstrip() for line in cell_text(cell).splitlines() if line.strip()]
    return lines


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|$#~{}])")


def escape_markdown(text: str) -> str:
    """Backslash-escape what Markdown (and MyST's dollar math) would otherwise interpret."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def fenced(text: str) -> str:
    """A Markdown code block holding text verbatim (the fence outgrows any backtick run inside)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def render_report(notebooks: list[Path]) -> str:
    """The run report page (Markdown), built only from the notebooks' metadata and stored outputs."""
    import nbformat

    rows, results, setups, dates, total = [], [], [], set(), 0.0
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        run = nb.metadata.get("book_run")
        link = f"[{escape_markdown(notebook_title(nb) or path.stem)}](../notebooks/{path.name})"
        headline = headline_lines(nb)
        results += [
            f"### {link}",
            "",
            fenced("\n".join(headline)) if headline else "No cell is tagged `headline`.",
            "",
        ]
        if run is None:
            rows.append(f"| {link} | not recorded | | |")
            continue
        setup = tuple(str(run[field]) for field in RUN_FIELDS[2:])
        if setup not in setups:
            setups.append(setup)
        total += float(run["seconds"])
        dates.add(str(run["date"]))
        key = chr(ord("A") + setups.index(setup))
        rows.append(f"| {link} | {float(run['seconds']):.1f} s | {key} | {run['date']} |")

    lines = [
        "# Run report",
        "",
        "Every number on this page is read from the notebooks themselves: the run time, date and",
        "machine that `make outputs` recorded in each notebook's metadata when it ran the notebook top",
        "to bottom on a fresh kernel, and the stored output of the cells each chapter tagged",
        "`headline`. `python -m utils.maintain report` writes this page and a test checks that it",
        "matches the notebooks, so nothing here is typed by hand. On your machine the run times and",
        "speed ratios will differ; the results that do not depend on the machine are the ones",
        "`pytest --nbval` checks.",
        "",
        "## Run times",
        "",
        ":::{table} Wall time of a top-to-bottom run of each chapter",
        ":class: run-times",
        "| Chapter | Run time | Setup | Date |",
        "|:--|--:|:-:|:--|",
        *rows,
        ":::",
        "",
        f"Total: {total:.1f} s ({total / 60:.1f} min) for the chapters with a recorded run.",
        "",
        "## Machines and versions",
        "",
    ]
    if setups:
        lines += ["| Setup | Machine | Accelerator | Python | PyTorch |", "|:-:|:--|:--|:--|:--|"]
        for index, (machine, accelerator, python, torch_version) in enumerate(setups):
            cells = (escape_markdown(v) for v in (machine, accelerator, python, torch_version))
            lines.append(f"| {chr(ord('A') + index)} | " + " | ".join(cells) + " |")
        first, last = min(dates), max(dates)
        span = first if first == last else f"{first} to {last}"
        lines += ["", f"The notebooks were executed on {span}."]
    else:
        lines.append("No notebook has a recorded run yet: run `make outputs`.")
    lines += [
        "",
        "## Headline results",
        "",
        "The stored output of each chapter's `headline` cells.",
        "",
    ]
    return "\n".join(lines + results).rstrip("\n") + "\n"


def write_report(notebooks: list[Path] | None = None, path: Path = REPORT_PATH) -> Path:
    """Write the run report atomically (temp file + rename) and return its path."""
    text = render_report(chapter_notebooks() if notebooks is None else notebooks)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".md.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)
    return path


# --- student copies ---------------------------------------------------------------------------


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
    """Write a validated student copy of every chapter into out_dir; return the paths written."""
    import nbformat

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in chapter_notebooks() if notebooks is None else notebooks:
        student = student_copy(nbformat.read(path, as_version=4))
        nbformat.validate(student)
        target = out_dir / path.name
        nbformat.write(student, target)
        written.append(target)
    return written


# --- publishing -------------------------------------------------------------------------------


def publish(site_dir: Path, remote: str, branch: str = "gh-pages") -> None:
    """Commit site_dir (plus .nojekyll) as the new tree of `branch` and force-push it to remote.

    Runs git in the current folder, which must be inside a git repository.
    """
    import ghp_import

    site_dir = Path(site_dir)
    if not (site_dir / "index.html").is_file():
        raise FileNotFoundError(
            f"{site_dir}/index.html not found: build the site first with `make book`"
        )
    try:
        ghp_import.ghp_import(
            str(site_dir),
            remote=remote,
            branch=branch,
            push=True,
            force=True,
            nojekyll=True,
            mesg="Publish the book",
        )
    except ghp_import.GhpError as error:
        raise RuntimeError(f"publishing to {remote} ({branch}) failed: {error.message}") from error


# --- command line -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    outputs = sub.add_parser(
        "outputs", help="re-execute notebooks in place, then rewrite the report"
    )
    outputs.add_argument("notebooks", nargs="*", type=Path)
    sub.add_parser("report", help="write book/run_report.md from the notebooks")
    student = sub.add_parser("student", help="write student copies with the solutions removed")
    student.add_argument("--out", type=Path, default=REPO_ROOT / "student")
    publish_parser = sub.add_parser("publish", help="push the built site to a gh-pages branch")
    publish_parser.add_argument("--remote", default="origin", help="git remote name or URL")
    publish_parser.add_argument("--branch", default="gh-pages")
    publish_parser.add_argument("--site", type=Path, default=Path("_build/html"))
    args = parser.parse_args(argv)

    if args.command == "outputs":
        paths = args.notebooks or chapter_notebooks()
        for path in paths:
            print(f"executing {path.name} ...", flush=True)
            seconds = execute(path.resolve())
            print(f"  done in {seconds:.1f} s", flush=True)
        print(f"wrote {write_report().relative_to(REPO_ROOT)}")
    elif args.command == "report":
        print(f"wrote {write_report().relative_to(REPO_ROOT)}")
    elif args.command == "student":
        written = write_student_copies(args.out)
        print(f"wrote {len(written)} student notebooks into {args.out.name}/")
    elif args.command == "publish":
        try:
            publish(args.site, args.remote, args.branch)
        except (FileNotFoundError, RuntimeError) as error:
            print(error, file=sys.stderr)
            return 1
        print(f"published {args.site} to {args.remote} (branch {args.branch})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
