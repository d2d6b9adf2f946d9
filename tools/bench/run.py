"""Running the training paths: each epoch timed on its own, the paths taking turns round by round."""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils.data import DataLoader

from tools.bench.machine import Limits, matmul_size, measure_limits, training_flop_per_image
from tools.bench.plan import QUICK_BACKEND, PathSpec
from utils.data import TensorBatches
from utils.models import SimpleCNN
from utils.seed import set_seed
from utils.timing import round_order, time_call
from utils.train import evaluate, train_one_epoch

_START = time.perf_counter()


def progress(message: str) -> None:
    """A progress line on stderr, stamped with the seconds since the command started."""
    print(f"[{time.perf_counter() - _START:6.1f} s] {message}", file=sys.stderr, flush=True)


def images_per_epoch(loader) -> int:
    """Images one pass over `loader` trains on (a TensorBatches may drop its last batch)."""
    if isinstance(loader, TensorBatches):
        return min(len(loader) * loader.batch_size, len(loader.y))
    return len(loader.dataset)


@dataclass
class PathResult:
    """What one path measured; a path that raised keeps its `error` and is not compared."""

    spec: PathSpec
    images_per_s: list[float] = field(default_factory=list)  # one per epoch, in round order
    test_acc: float = float("nan")
    compile_s: float = 0.0  # one-off, excluded from images/s
    error: str | None = None  # e.g. "in round 2 (RuntimeError: ...)"


def describe_error(when: str, err: Exception) -> str:
    """'in round 1 (RuntimeError: out of memory)': when it failed and the error's last line."""
    text = str(err).strip()
    message = text.splitlines()[-1][:200] if text else ""
    return f"{when} ({type(err).__name__}: {message})"


class PathRun:
    """A fresh SimpleCNN, its optimizer and loader for one path; `epoch()` times one epoch."""

    def __init__(
        self, spec: PathSpec, loader, device: torch.device, seed: int, backend: str | None
    ):
        self.spec, self.loader, self.device = spec, loader, device
        set_seed(seed)  # every path starts from the same weights
        self.model = SimpleCNN(relu_after_pool=spec.tuned).to(device)
        if spec.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.runner = self.model
        if spec.compile_mode is not None:
            options = {"backend": backend} if backend else {"mode": spec.compile_mode}
            self.runner = torch.compile(self.model, dynamic=False, **options)
        self.loss_fn = nn.CrossEntropyLoss()
        self.options = {
            "device": device,
            "autocast_dtype": torch.bfloat16 if spec.bf16 else None,
            "memory_format": torch.channels_last if spec.channels_last else None,
        }
        self.result = PathResult(spec)
        if spec.compile_mode is not None:
            self.result.compile_s = self.warm_up()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=spec.lr)

    def warm_up(self) -> float:
        """Compile on one real batch of every shape the epochs use; restore the initial weights."""
        state = copy.deepcopy(self.model.state_dict())
        scratch = torch.optim.Adam(self.model.parameters(), lr=self.spec.lr)
        X, y = next(iter(self.loader))
        batches = [(X, y)]
        rest = images_per_epoch(self.loader) % self.spec.batch_size
        if rest:
            batches.append((X[:rest], y[:rest]))

        def train() -> None:
            train_one_epoch(self.runner, batches, self.loss_fn, scratch, **self.options)

        seconds = time_call(train, warmup=0, repeat=1, device=self.device)["median_s"]
        self.model.load_state_dict(state)
        return seconds

    def epoch(self) -> float:
        """Train one epoch; its images/s (the work queued on the device included)."""

        def train() -> None:
            train_one_epoch(self.runner, self.loader, self.loss_fn, self.optimizer, **self.options)

        seconds = time_call(train, warmup=0, repeat=1, device=self.device)["median_s"]
        rate = images_per_epoch(self.loader) / seconds
        self.result.images_per_s.append(rate)
        return rate

    def finish(self, test_loader: DataLoader) -> PathResult:
        _, self.result.test_acc = evaluate(self.model, test_loader, self.loss_fn, self.device)
        return self.result


def train_paths(
    paths: list[PathSpec],
    make_loader: Callable[[PathSpec], object],
    test_loader: DataLoader,
    device: torch.device,
    *,
    epochs: int,
    seed: int,
    native_bf16: bool,
    quick: bool = False,
) -> tuple[list[PathResult], Limits]:
    """Build every path, then run `epochs` rounds: the limits, then one epoch of each path.

    The order is reversed every other round (utils.timing.round_order), so a machine that slows
    down favours no path. Returns a result per path, in plan order, and the limits; a path that
    raises keeps its error in its result and leaves the rounds, the other paths carry on.
    """
    backend = QUICK_BACKEND if quick else None
    results = {spec.key: PathResult(spec) for spec in paths}
    runs: list[PathRun] = []

    def failed(spec: PathSpec, when: str, err: Exception) -> None:
        results[spec.key].error = describe_error(when, err)
        progress(f"{spec.key}: failed {results[spec.key].error}")

    for spec in paths:
        progress(f"preparing {spec.key}")
        try:
            run = PathRun(spec, make_loader(spec), device, seed, backend)
        except Exception as err:  # e.g. a torch.compile failure: the other paths still count
            failed(spec, "while preparing", err)
            continue
        runs.append(run)
        results[spec.key] = run.result
    limits = Limits(training_flop_per_image(), matmul_size(device, quick))
    for round_index in range(epochs):
        measure_limits(limits, device, native_bf16)
        for run in round_order(runs, round_index):  # a new list: a failed run can leave `runs`
            try:
                rate = run.epoch()
            except Exception as err:
                failed(run.spec, f"in round {round_index + 1}", err)
                runs.remove(run)
                continue
            progress(f"round {round_index + 1}/{epochs} {run.spec.key}: {rate:.0f} images/s")
    for run in runs:
        try:
            run.finish(test_loader)
        except Exception as err:
            failed(run.spec, "while testing", err)
    return list(results.values()), limits
