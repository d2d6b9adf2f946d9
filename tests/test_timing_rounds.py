"""Tests of utils.timing: alternating order (and what runs around each turn), savings per round,
the break-even and its rounding."""

import math
from contextlib import contextmanager

import pytest

from utils import timing
from utils.timing import (
    alternate,
    break_even,
    break_even_text,
    one_figure,
    pooled,
    round_order,
    round_savings,
    spread,
    verdict,
)


def test_alternate_swaps_the_order_every_round():
    order = []
    times = alternate(
        {"a": lambda: order.append("a"), "b": lambda: order.append("b")},
        rounds=3,
        repeat=2,
        warmup=1,
    )
    per_round = [
        order[i : i + 6] for i in range(0, len(order), 6)
    ]  # 3 calls of each (1 warm-up + 2)
    assert [r[0] for r in per_round] == ["a", "b", "a"]
    assert all(len(rounds) == 3 and all(len(r) == 2 for r in rounds) for rounds in times.values())
    assert len(pooled(times["a"])) == 6 and "6 calls in 3 rounds" in spread(times["a"])


def test_round_order_is_the_order_alternate_times_in():
    order = []
    calls = {name: (lambda name=name: order.append(name)) for name in ("a", "b", "c")}
    alternate(calls, rounds=3, repeat=1, warmup=0)
    assert order == [name for i in range(3) for name in round_order(["a", "b", "c"], i)]
    assert round_order(("a", "b", "c"), 1) == ["c", "b", "a"]  # any sequence, a list back


def fake(eager_rounds, compiled_rounds):
    return {"eager": eager_rounds, "compiled": compiled_rounds}


def test_savings_break_even_and_verdict():
    times = fake([[0.010, 0.010], [0.012, 0.012]], [[0.006, 0.006], [0.010, 0.010]])
    assert round_savings(times) == pytest.approx([0.004, 0.002])
    central, low, high = break_even(1.011, times)  # eager median 0.011: n = 1 + 1.0 / saving
    assert (central, low, high) == pytest.approx((1 + 1 / 0.003, 1 + 1 / 0.004, 1 + 1 / 0.002))
    assert verdict(times) == "compiled faster in all 2 rounds"
    assert verdict(fake([[0.01]], [[0.02]])) == "compiled slower in all 1 rounds"
    assert verdict(fake([[0.01], [0.02]], [[0.02], [0.01]])).startswith("within the noise")
    assert break_even(1.0, fake([[0.01]], [[0.02]]))[0] == math.inf


def test_one_figure_rounds_as_asked():
    assert one_figure(1234) == "1,000" and one_figure(1234, math.ceil) == "2,000"
    assert one_figure(0.0345) == "0.03" and one_figure(0.0345, math.ceil) == "0.04"
    assert one_figure(0.3, math.floor) == "0.3" and one_figure(0.7, math.floor) == "0.7"
    assert one_figure(0.07, math.ceil) == "0.07"
    with pytest.raises(ValueError, match="positive"):
        one_figure(0.0)


def test_break_even_text_says_what_the_rounds_support():
    assert (
        break_even_text(math.inf, math.inf, math.inf)
        == "never: compiled was not faster in any round"
    )
    assert break_even_text(1500, 1200, math.inf).startswith("between 1,000 calls and never")
    assert "disagree by more than 2x" in break_even_text(3000, 1000, 9000)
    assert break_even_text(1500, 1300, 1900) == "after about 2,000 calls (rounds: 1,000 to 2,000)"
    assert (
        break_even_text(1.0, 1.0, 1.0, unit="epochs")
        == "after about 1 epoch (all rounds agree to one figure)"
    )


def test_break_even_is_at_least_one_call_and_keys_can_be_named():
    times = {"default": [[0.010]], "graphs": [[0.004]]}
    assert break_even(0.001, times, "default", "graphs") == (
        1.0,
        1.0,
        1.0,
    )  # a warm start: pays at once
    assert verdict(times, "default", "graphs") == "graphs faster in all 1 rounds"
    assert break_even_text(1.0, 1.0, math.inf, unit="epochs").startswith(
        "between 1 epoch and never"
    )


def test_alternate_runs_each_turn_inside_around_and_times_only_the_calls(monkeypatch):
    clock, log = [0.0], []  # a fake clock: only what advances it takes time
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock[0])

    @contextmanager
    def around(name):
        log.append(f"enter {name}")
        clock[0] += 100.0  # a slow start and stop (a profiler's), which must not be timed
        yield
        clock[0] += 100.0
        log.append(f"exit {name}")

    def call(name):
        def run():
            log.append(name)
            clock[0] += 0.5

        return run

    times = alternate({"a": call("a"), "b": call("b")}, rounds=2, repeat=2, warmup=1, around=around)
    turn = ["enter {0}", "{0}", "{0}", "{0}", "exit {0}"]  # 1 warm-up + 2 timed calls, inside
    assert log == [step.format(name) for name in ("a", "b", "b", "a") for step in turn]
    assert times == {"a": [[0.5, 0.5], [0.5, 0.5]], "b": [[0.5, 0.5], [0.5, 0.5]]}


def test_spread_prints_the_decimals_asked_for():
    rounds = [[0.000061, 0.000062], [0.000066, 0.000081]]  # quartiles 61.25, 64 and 77.25 us
    assert spread(rounds) == "median 0.06 ms (quartiles 0.06-0.08, 4 calls in 2 rounds)"
    assert (
        spread(rounds, digits=3) == "median 0.064 ms (quartiles 0.061-0.077, 4 calls in 2 rounds)"
    )
