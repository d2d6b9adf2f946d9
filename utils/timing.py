"""Honest timing: warm up, repeat, report medians. Taught in notebooks/03_datasets_and_dataloaders.ipynb."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def synchronize(device: torch.device | str) -> None:
    """Wait for queued work on an accelerator, so a timer measures the work and not its launch."""
    kind = torch.device(device).type
    if kind == "cuda":
        torch.cuda.synchronize()
    elif kind == "mps":
        torch.mps.synchronize()
    elif kind == "xpu":
        torch.xpu.synchronize()


def time_call(
    fn: Callable[[], object],
    warmup: int = 3,
    repeat: int = 10,
    device: torch.device | str = "cpu",
) -> dict:
    """Call `fn` `warmup` times untimed, then `repeat` times timed; seconds per call."""
    if repeat < 1 or warmup < 0:
        raise ValueError(f"need repeat >= 1 and warmup >= 0, got repeat={repeat}, warmup={warmup}")
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "repeat": repeat,
        "times_s": times,
    }


def throughput(items_per_call: int, seconds_per_call: float) -> float:
    """Items per second."""
    return items_per_call / seconds_per_call
