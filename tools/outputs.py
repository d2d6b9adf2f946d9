"""Re-execute chapter notebooks in place, each on a fresh kernel, and rewrite the run report.

    python -m tools.outputs [NOTEBOOK ...]    (no argument: every chapter and deep dive)

Each executed notebook records in its metadata ("book_run") how long the run took and on what
machine and versions, so the site's run report is read from the notebooks, never typed by hand.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from tools import REPO_ROOT, book_notebooks
from tools.report import SETUP_FIELDS, write_report

RUN_FIELDS = ("seconds", "date", *SETUP_FIELDS)


def run_metadata(seconds: float) -> dict:
    """What `outputs` stores in a notebook's metadata["book_run"]: time, date, machine, versions."""
    import torch

    from utils.device import cpu_instructions, cpu_model

    return {
        "seconds": round(seconds, 1),
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{cpu_model()}, {os.cpu_count()} logical CPUs",
        "cpu": cpu_instructions(),
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook")
    args = parser.parse_args(argv)
    for path in args.notebooks or book_notebooks():
        print(f"executing {path.name} ...", flush=True)
        seconds = execute(path.resolve())
        print(f"  done in {seconds:.1f} s", flush=True)
    print(f"wrote {write_report().relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
