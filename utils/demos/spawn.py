"""Why a script with DataLoader workers needs `if __name__ == "__main__":` under the spawn start method.

Taught in notebooks/03_datasets_and_dataloaders.ipynb. Run it from a terminal:
    python -m utils.demos.spawn             # guarded: works
    python -m utils.demos.spawn --no-guard  # unguarded: every worker re-runs the script and fails
"""

from __future__ import annotations

import re
import subprocess
import sys

import torch
from torch.utils.data import DataLoader, Dataset


class SquaresDataset(Dataset):
    """Item i is the tensor i**2: tiny, picklable, and defined at module level so workers find it."""

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor(index**2)


def run(guard: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run this script in a fresh Python process, with the guard or without it; capture its output."""
    command = [sys.executable, "-m", "utils.demos.spawn"] + ([] if guard else ["--no-guard"])
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def runtime_errors(stderr: str) -> list[str]:
    """The first sentence of each RuntimeError in a run's stderr, in order, each on one line.

    The worker's message spans several indented lines; process ids, which change from run to run,
    become "...".
    """
    text = " ".join(stderr.split())  # the whole stderr on one line
    errors = []
    for message in text.split("RuntimeError: ")[1:]:
        first_sentence = re.match(r".*?(?:\.(?= )|$)", message).group()  # up to the first ". "
        without_ids = re.sub(r"\(pid(\(s\))? [\d, ]+\)", r"(pid\1 ...)", first_sentence)
        errors.append("RuntimeError: " + without_ids)
    return errors


def main(num_workers: int = 1) -> int:
    """Load 8 items in batches of 4 with spawned worker processes; print and return their sum."""
    loader = DataLoader(
        SquaresDataset(8),
        batch_size=4,
        num_workers=num_workers,
        multiprocessing_context="spawn",  # the default on Windows and macOS; forced here on Linux
    )
    total = int(sum(batch.sum() for batch in loader))
    print(f"sum of squares 0..7 loaded by {num_workers} spawned worker(s): {total}")
    return total


# Under spawn, each worker starts a fresh interpreter and imports this file again (as
# "__mp_main__", not "__main__"). Spawned children see the parent's sys.argv, so they take the
# same branch as the parent here.
if "--no-guard" in sys.argv:
    main()  # the mistake: runs again inside every worker while it is still starting up
elif __name__ == "__main__":
    main()  # the fix: workers import the module, skip this line, and only load data
