"""Write book/run_report.md from the notebooks' recorded runs and `headline` outputs.

python -m tools.report
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tools import REPO_ROOT, book_notebooks, is_deep_dive

REPORT_PATH = REPO_ROOT / "book" / "run_report.md"
TOC_PATH = REPO_ROOT / "_toc.yml"
# What a setup is: the same machine, CPU instruction set, accelerator and versions.
SETUP_FIELDS = ("machine", "cpu", "accelerator", "python", "torch")


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


def toc_files(toc: Path = TOC_PATH) -> list[str]:
    """The `file:` entries of a jupyter-book _toc.yml, in order, without suffix; [] if absent."""
    if not toc.exists():
        return []
    found = re.findall(r"^[\s-]*file:\s*['\"]?([^'\"\s#]+)", toc.read_text(), flags=re.MULTILINE)
    return [
        str(Path(entry).with_suffix("")) if entry.endswith(".ipynb") else entry for entry in found
    ]


def in_reading_order(notebooks: list[Path], toc: Path = TOC_PATH) -> list[Path]:
    """The notebooks in the order the table of contents lists them; the rest after, as given."""
    position = {Path(entry).name: index for index, entry in enumerate(toc_files(toc))}
    listed = sorted((p for p in notebooks if p.stem in position), key=lambda p: position[p.stem])
    return listed + [p for p in notebooks if p.stem not in position]


def page_link(path: Path) -> str:
    """The notebook's address from this page (book/): deep dives are in notebooks/deeper/."""
    folder = f"{path.parent.name}/" if is_deep_dive(path) else ""
    return f"../notebooks/{folder}{path.name}"


def has_headline_cells(nb) -> bool:
    """Whether any code cell is tagged `headline`, with or without stored output."""
    return any(
        cell.cell_type == "code" and "headline" in cell.metadata.get("tags", [])
        for cell in nb.cells
    )


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


INTRO = """# Run report

Every number on this page is read from the notebooks themselves: the run time, date and
machine that `make outputs` recorded in each notebook's metadata when it ran the notebook top
to bottom on a fresh kernel, and the stored output of the cells each chapter tagged
`headline`. `python -m tools.report` writes this page and a test checks that it
matches the notebooks, so nothing here is typed by hand. On your machine the run times and
speed ratios will differ; the results that do not depend on the machine are the ones
`pytest --nbval` checks."""


# A note printed under a chapter's headline output when one of its lines starts with the marker
# (leading spaces ignored). A line that reads clearly next to its chapter's prose can be terse on
# this page; the note travels with the line, so it disappears if the chapter stops printing it.
READING_NOTES: tuple[tuple[str, str], ...] = (
    (
        "verdict: within the noise",
        "**Which to believe: the verdict.** It compares the two versions round by round, each "
        "round timing them back to back on the same machine, and *within the noise* means the "
        "rounds disagreed about which one was faster. A ratio printed next to such a verdict "
        "(a ratio of medians, or the median of the rounds' ratios) describes a speed-up that this "
        "run did not confirm, not a measured one: a disturbed round can pull it either way. "
        "Rerun the chapter on a quieter machine before you rely on it.",
    ),
    (
        "import torch, nothing else",
        "**What the start-up lines time:** each is the wall-clock time of a fresh Python process, "
        "from launch to exit, with its files already in the operating system's cache: one that "
        "loads the ONNX file and predicts one image without importing torch, one that imports "
        "torch, loads the `state_dict` into a `SimpleCNN` and predicts the same image, and one "
        "that runs `import torch` and nothing else. The last is there to show that importing torch "
        "is nearly all of the PyTorch process's time. When it comes out a little slower than the "
        "whole PyTorch process, that is the noise between processes, not extra work.",
    ),
)


def reading_notes(lines: list[str]) -> list[str]:
    """The READING_NOTES whose marker starts one of `lines`, each once, in READING_NOTES order."""
    starts = [line.lstrip() for line in lines]
    return [note for marker, note in READING_NOTES if any(s.startswith(marker) for s in starts)]


def _letter(index: int) -> str:
    return chr(ord("A") + index)


def _read_runs(notebooks: list[Path]) -> tuple[list[str], list[str], list[tuple], list[dict]]:
    """Per chapter: a run-time table row and its headline section; the distinct setups; the runs."""
    import nbformat

    rows, results, setups, runs = [], [], [], []
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        link = f"[{escape_markdown(notebook_title(nb) or path.stem)}]({page_link(path)})"
        headline = headline_lines(nb)
        if headline:
            body = fenced("\n".join(headline))
        elif has_headline_cells(nb):
            body = "Tagged `headline` cells have no stored output: re-run `make outputs`."
        else:
            body = "No cell is tagged `headline`."
        results += [f"### {link}", "", body, ""]
        for note in reading_notes(headline):
            results += [note, ""]
        run = nb.metadata.get("book_run")
        if run is None:
            rows.append(f"| {link} | not recorded | | |")
            continue
        setup = tuple(str(run.get(field, "not recorded")) for field in SETUP_FIELDS)
        if setup not in setups:
            setups.append(setup)
        runs.append(run)
        key = _letter(setups.index(setup))
        rows.append(f"| {link} | {float(run['seconds']):.1f} s | {key} | {run['date']} |")
    return rows, results, setups, runs


def _setup_lines(setups: list[tuple], runs: list[dict]) -> list[str]:
    """The table of machines and versions, and the dates the notebooks ran."""
    if not setups:
        return ["No notebook has a recorded run yet: run `make outputs`."]
    lines = [
        "| Setup | Machine | CPU instructions | Accelerator | Python | PyTorch |",
        "|:-:|:--|:--|:--|:--|:--|",
    ]
    for index, setup in enumerate(setups):
        lines.append(f"| {_letter(index)} | " + " | ".join(map(escape_markdown, setup)) + " |")
    dates = sorted({str(run["date"]) for run in runs})
    span = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    which = "the one setup above" if len(setups) == 1 else "the setups above"
    lines += [
        "",
        f"The notebooks were executed on {span}.",
        "The CPU instruction set is recorded because speed ratios can depend on it: bfloat16",
        "arithmetic is native only on CPUs with bfloat16 instructions and emulated elsewhere.",
        f"Chapter 09's speed ratio was measured only on {which}, so on your machine it may come",
        "out differently.",
    ]
    notes = [note for setup in setups if (note := _cuda_on_cpu_note(setups, setup))]
    return lines + ([""] + notes if notes else [])


def _cuda_on_cpu_note(setups: list[tuple], setup: tuple) -> str | None:
    """A sentence for a setup whose torch is a CUDA build ("+cu...") on a machine without a GPU."""
    fields = dict(zip(SETUP_FIELDS, setup, strict=True))
    if "+cu" not in fields["torch"] or fields["accelerator"] != "none":
        return None
    return (
        f"Setup {_letter(setups.index(setup))}'s PyTorch, {escape_markdown(fields['torch'])}, is a "
        "CUDA build (the default wheel on Linux x86-64) on a machine without a GPU: it ran "
        "everything on the CPU, as a CPU-only build would."
    )


def render_report(notebooks: list[Path], toc: Path = TOC_PATH) -> str:
    """The run report page (Markdown), built only from the notebooks' metadata and stored outputs.

    Chapters appear in the reading order of `toc` (the book's _toc.yml), others after them.
    """
    rows, results, setups, runs = _read_runs(in_reading_order(notebooks, toc))
    total = sum(float(run["seconds"]) for run in runs)
    lines = [
        INTRO,
        "",
        "## Run times",
        "",
        ":::{table} Wall time of a top-to-bottom run of each chapter (the Going-deeper notebooks last)",
        ":class: run-times",
        "| Chapter | Run time | Setup | Date |",
        "|:--|--:|:-:|:--|",
        *rows,
        ":::",
        "",
        f"Total: {total:.1f} s ({total / 60:.1f} min) for the notebooks with a recorded run.",
        "",
        "## Machines and versions",
        "",
        *_setup_lines(setups, runs),
        "",
        "## Headline results",
        "",
        "The stored output of each chapter's `headline` cells. Where a line needs its chapter's",
        "context to be read right, a note under the output says how to read it.",
        "",
    ]
    return "\n".join(lines + results).rstrip("\n") + "\n"


def write_report(notebooks: list[Path] | None = None, path: Path = REPORT_PATH) -> Path:
    """Write the run report atomically (temp file + rename) and return its path."""
    text = render_report(book_notebooks() if notebooks is None else notebooks)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".md.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)
    return path


def main() -> int:
    print(f"wrote {write_report().relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
