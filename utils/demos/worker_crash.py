"""A DataLoader whose worker fails, run as a script to show the real message. Taught in notebooks/14_error_gallery.ipynb.

python -m utils.demos.worker_crash killed --num-workers 2   # a worker process dies
python -m utils.demos.worker_crash raises --num-workers 2   # a worker raises an exception
python -m utils.demos.worker_crash raises --num-workers 0   # same bug, read in the main process
python -m utils.demos.worker_crash fixed --num-workers 2    # the repaired dataset
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys

import torch
from torch.utils.data import DataLoader, Dataset

MODES = ("killed", "raises", "fixed")


def kill_signal() -> int:
    """SIGKILL where it exists (Linux, macOS); on Windows SIGTERM, with which os.kill ends a process."""
    return getattr(signal, "SIGKILL", signal.SIGTERM)


class FlakyDataset(Dataset):
    """`size` items, item i is tensor([i.]); item `fail_at` fails the way `mode` says.

    "killed": the process loading it dies at once (as when the OS kills a worker for memory);
    "raises": `__getitem__` raises ValueError (a corrupt file, a bad path); "fixed": no failure.
    The default `fail_at` lies in worker 0's first batch, so it dies before sending any tensor.
    """

    def __init__(self, size: int = 64, fail_at: int = 3, mode: str = "raises"):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if not 0 <= fail_at < size:
            raise ValueError(
                f"fail_at must be in 0..{size - 1} (an index of the dataset), got {fail_at}"
            )
        self.size, self.fail_at, self.mode = size, fail_at, mode

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> torch.Tensor:
        if index == self.fail_at and self.mode == "killed":
            # No Python cleanup, no traceback: the OS ends the process, as its out-of-memory killer
            # would. Windows has no SIGKILL; there os.kill ends the process (TerminateProcess).
            os.kill(os.getpid(), kill_signal())
        if index == self.fail_at and self.mode == "raises":
            raise ValueError(f"item {index}: could not decode the image file")
        return torch.tensor([float(index)])


def load_all(mode: str, num_workers: int, batch_size: int = 8, size: int = 64) -> int:
    """Iterate a DataLoader over a FlakyDataset once; return how many items arrived."""
    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0, got {num_workers}")
    if mode == "killed" and num_workers == 0:
        raise ValueError(
            "mode 'killed' needs num_workers >= 1: with 0 workers the item is loaded in this "
            "process, which would be the one killed."
        )
    loader = DataLoader(
        FlakyDataset(size=size, mode=mode), batch_size=batch_size, num_workers=num_workers
    )
    batches, count = iter(loader), 0
    try:
        for batch in batches:
            count += len(batch)
    finally:
        # Stop the worker processes now, also after an error. Otherwise the iterator lives on in
        # the error's traceback and stops them only when it is garbage-collected, later and at a
        # random point, waiting up to 5 s for a worker when one has died. DataLoader iterators
        # have no public close(); the one with workers has _shutdown_workers (0 workers: none).
        shutdown = getattr(batches, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
        del batches
    return count


def error_lines(stderr: str) -> list[str]:
    """The 'SomeError: message' lines of a child's traceback, process ids masked as N (they change every run)."""
    found = [
        line.strip()
        for line in stderr.splitlines()
        if re.match(r"^\w+(\.\w+)*(Error|Exception)\b", line.strip())
    ]
    if not found:
        raise ValueError(
            "no 'SomeError: message' line in the text given; pass the child process's stderr"
        )
    return [re.sub(r"(pid(?:\(s\))?) \d+(?:, \d+)*", r"\1 N", line) for line in found]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("--num-workers", type=int, default=2)
    args = parser.parse_args(argv)
    count = load_all(args.mode, args.num_workers)
    print(f"loaded {count} items with num_workers={args.num_workers}")
    return 0


# The main guard: workers started with spawn (Windows, macOS) or forkserver (Linux from Python
# 3.14) import this file again, and must not run main() when they do.
if __name__ == "__main__":
    sys.exit(main())
