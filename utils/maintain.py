"""Maintainer tools for the book itself (not taught in a chapter).

    python -m utils.maintain outputs [NOTEBOOK ...]   re-execute notebooks in place, fresh kernel each

Each executed notebook records in its metadata ("book_run") how long the run took and on what
machine and versions, so the site's run report is read from the notebooks, never typed by hand.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = REPO_ROOT / "notebooks"


def cpu_model() -> str:
    """The CPU's marketing name where the OS tells it, else the architecture."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_metadata(seconds: float) -> dict:
    import os

    import torch

    return {
        "seconds": round(seconds, 1),
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{cpu_model()}, {os.cpu_count()} logical CPUs",
        "accelerator": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def execute(path: Path, timeout: int = 900) -> float:
    """Run one notebook top to bottom on a fresh kernel, with the notebook's folder as cwd."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    nb.metadata["book_run"] = run_metadata(seconds)
    nbformat.write(nb, path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    outputs = sub.add_parser("outputs", help="re-execute notebooks in place")
    outputs.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args(argv)
    if args.command == "outputs":
        paths = args.notebooks or sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
        for path in paths:
            print(f"executing {path.name} ...", flush=True)
            seconds = execute(path.resolve())
            print(f"  done in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
