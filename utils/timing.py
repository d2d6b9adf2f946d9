"""Measuring speed honestly: every timer of the book lives here.

- `time_call`, `summary`, `synchronize`: warm up, repeat, report medians (taught in
  notebooks/03_datasets_and_dataloaders.ipynb);
- `alternate` (`round_order`), `spread`, `verdict`, `break_even`: versions of a call timed in
  alternating rounds, so a machine that slows down favours none (notebooks/10_torch_compile.ipynb;
  also 09, 12, 13 and `tools.bench`); `report` puts them together for a one-off cost (chapter 10).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TypeVar

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


# Comparing two versions of a call fairly: alternating rounds, spread, verdict, break-even (taught in notebooks/10_torch_compile.ipynb)
Rounds = list[list[float]]  # seconds per call, one list per round


def alternate(
    calls: dict[str, Callable[[], object]],
    rounds: int,
    repeat: int,
    device: torch.device | str = "cpu",
    warmup: int = 2,
    around: Callable[[str], AbstractContextManager] | None = None,
) -> dict[str, Rounds]:
    """Time each callable in `rounds` rounds of `repeat` calls (after `warmup` untimed calls each),
    the order reversed in every other round, so a machine that slows down favours none of them.

    With `around`, each turn of `name` (its warm-up and timed calls) runs inside the context
    `around(name)`, entered and left outside the timer: a profiler, say (notebooks/13_profiling.ipynb).
    """
    times: dict[str, Rounds] = {name: [] for name in calls}
    for round_index in range(rounds):
        order = list(calls) if round_index % 2 == 0 else list(calls)[::-1]
        for name in order:
            with around(name) if around is not None else nullcontext():
                result = time_call(calls[name], warmup=warmup, repeat=repeat, device=device)
            times[name].append(result["times_s"])
    return times


def pooled(rounds: Rounds) -> list[float]:
    """Every timed call of every round, in one list."""
    return [seconds for round_times in rounds for seconds in round_times]


def spread(rounds: Rounds, digits: int = 2) -> str:
    """The median and quartiles of all calls, in ms to `digits` decimals, and how many calls and
    rounds they came from."""
    q1, median, q3 = statistics.quantiles(pooled(rounds), n=4)
    return (
        f"median {median * 1e3:.{digits}f} ms (quartiles {q1 * 1e3:.{digits}f}-{q3 * 1e3:.{digits}f}, "
        f"{len(pooled(rounds))} calls in {len(rounds)} rounds)"
    )


def round_savings(
    times: dict[str, Rounds], base: str = "eager", other: str = "compiled"
) -> list[float]:
    """Seconds saved per call in each round: `base`'s median minus `other`'s, timed in the same round."""
    pairs = zip(times[base], times[other], strict=True)
    return [statistics.median(b) - statistics.median(o) for b, o in pairs]


def break_even(
    first_s: float, times: dict[str, Rounds], base: str = "eager", other: str = "compiled"
) -> tuple[float, float, float]:
    """Calls after which compiling has paid off: (median round, best round, worst round).

    n calls cost n * e eager and first + (n - 1) * c compiled (the first call also did one call's
    work), so they cross at n = 1 + (first - e) / (e - c), at least 1. math.inf (never) where a
    round's compiled call was not faster.
    """
    eager_s, savings = statistics.median(pooled(times[base])), round_savings(times, base, other)

    def calls(saved_s: float) -> float:
        return max(1.0, 1 + (first_s - eager_s) / saved_s) if saved_s > 0 else math.inf

    return calls(statistics.median(savings)), calls(max(savings)), calls(min(savings))


def one_figure(x: float, rounding: Callable[[float], float] = round) -> str:
    """`x` to one significant figure (rounding: round, math.floor or math.ceil), e.g. 1,234 -> '1,000'."""
    if not x > 0:
        raise ValueError(f"one_figure needs a positive number, got {x}")
    scale = 10 ** math.floor(math.log10(x))
    value = rounding(round(x / scale, 9)) * scale  # round(..., 9): 0.3 / 0.1 is 2.9999999999999996
    return f"{value:,.0f}" if value >= 1 else f"{value:.{-math.floor(math.log10(scale))}f}"


def break_even_text(central: float, low: float, high: float, unit: str = "calls") -> str:
    """The break-even as a sentence, to the one figure the timings support; a range is rounded
    outwards, so that it still holds what the rounds measured."""
    if low == math.inf:
        return "never: compiled was not faster in any round"
    if high == math.inf:
        low_text = one_figure(low, math.floor)
        low_unit = unit[:-1] if low_text == "1" else unit  # "1 epoch", "2 epochs"
        return f"between {low_text} {low_unit} and never (compiled was not faster in every round)"
    low_text, high_text = one_figure(low, math.floor), one_figure(high, math.ceil)
    if high / low > 2:
        return f"between {low_text} and {high_text} {unit} (the rounds disagree by more than 2x)"
    central_text = one_figure(central)
    if low_text != high_text:
        rounds_text = f"rounds: {low_text} to {high_text}"
    else:
        rounds_text = "all rounds agree to one figure"
    unit_text = unit[:-1] if central_text == "1" else unit  # "1 epoch", "2 epochs"
    return f"after about {central_text} {unit_text} ({rounds_text})"


def report(
    first_s: float, times: dict[str, Rounds], base: str = "eager", other: str = "compiled"
) -> str:
    """What a one-off cost (`first_s`, a first call that compiles) buys, as lines of text: the first
    call, both steady states, the verdict, the saving per call and the break-even
    (notebooks/10_torch_compile.ipynb)."""
    savings_ms = sorted(saved * 1e3 for saved in round_savings(times, base, other))
    width = max(len(base), len(other)) + 1
    lines = [f"  first {other} call: {first_s:.1f} s"]
    lines += [f"  {name + ':':{width}s} {spread(times[name])}" for name in (base, other)]
    lines.append(f"  verdict: {verdict(times, base, other)}")
    lines.append(
        f"  saving per call: {statistics.median(savings_ms):.2f} ms in the median round "
        f"(rounds: {savings_ms[0]:.2f} to {savings_ms[-1]:.2f} ms)"
    )
    lines.append(f"  break-even: {break_even_text(*break_even(first_s, times, base, other))}")
    return "\n".join(lines)


def verdict(times: dict[str, Rounds], base: str = "eager", other: str = "compiled") -> str:
    """'faster in all rounds', 'slower in all rounds', or within the noise (the rounds disagree)."""
    savings = round_savings(times, base, other)
    faster = sum(saved > 0 for saved in savings)
    if faster == len(savings):
        return f"{other} faster in all {len(savings)} rounds"
    if faster == 0:
        return f"{other} slower in all {len(savings)} rounds"
    return f"within the noise: {other} faster in {faster} of {len(savings)} rounds"


T = TypeVar("T")


def round_order(items: Sequence[T], round_index: int) -> list[T]:
    """The order of round `round_index` in `alternate`: as given, reversed in every other round;
    for callers that time one call at a time and must go on when one fails (tools.bench's epochs)."""
    return list(items) if round_index % 2 == 0 else list(items)[::-1]
