"""Compare two versions of a call fairly: timed in alternating rounds, with the spread and a break-even.

Taught in notebooks/09_torch_compile.ipynb, where "eager" and "compiled" take turns. Times are kept
per round, because two versions timed back to back in one round met the same machine: the
difference of their medians within a round is the fair comparison, and its spread over the rounds
says how much to trust it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

import torch

from utils.timing import time_call

Rounds = list[list[float]]  # seconds per call, one list per round


def alternate(
    calls: dict[str, Callable[[], object]],
    rounds: int,
    repeat: int,
    device: torch.device | str = "cpu",
    warmup: int = 2,
) -> dict[str, Rounds]:
    """Time each callable in `rounds` rounds of `repeat` calls (after `warmup` untimed calls each),
    the order reversed in every other round, so a machine that slows down favours none of them."""
    times: dict[str, Rounds] = {name: [] for name in calls}
    for round_index in range(rounds):
        order = list(calls) if round_index % 2 == 0 else list(calls)[::-1]
        for name in order:
            result = time_call(calls[name], warmup=warmup, repeat=repeat, device=device)
            times[name].append(result["times_s"])
    return times


def pooled(rounds: Rounds) -> list[float]:
    """Every timed call of every round, in one list."""
    return [seconds for round_times in rounds for seconds in round_times]


def spread(rounds: Rounds) -> str:
    """The median and quartiles of all calls, in ms, and how many calls and rounds they came from."""
    q1, median, q3 = statistics.quantiles(pooled(rounds), n=4)
    return (
        f"median {median * 1e3:.2f} ms (quartiles {q1 * 1e3:.2f}-{q3 * 1e3:.2f}, "
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


def verdict(times: dict[str, Rounds], base: str = "eager", other: str = "compiled") -> str:
    """'faster in all rounds', 'slower in all rounds', or within the noise (the rounds disagree)."""
    savings = round_savings(times, base, other)
    faster = sum(saved > 0 for saved in savings)
    if faster == len(savings):
        return f"{other} faster in all {len(savings)} rounds"
    if faster == 0:
        return f"{other} slower in all {len(savings)} rounds"
    return f"within the noise: {other} faster in {faster} of {len(savings)} rounds"
