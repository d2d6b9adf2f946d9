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
    """Call `fn` `warmup` times untimed, then `repeat` times timed; seconds per call.

    The result holds the median (the number to report), min and max (their spread shows how noisy
    the machine was) and every timed call in `times_s`; `summary` prints the three on one line.
    """
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


def summary(result: dict, unit: str = "ms") -> str:
    """A time_call result on one line, e.g. 'median 3.70 ms (min 3.61, max 4.02, 20 calls)'."""
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    return (
        f"median {result['median_s'] * scale:.2f} {unit} (min {result['min_s'] * scale:.2f}, "
        f"max {result['max_s'] * scale:.2f}, {result['repeat']} calls)"
    )
