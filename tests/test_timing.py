"""Tests of utils.timing's `time_call`, `synchronize` and `summary`, against a fake clock.

The clock (`time.perf_counter`) is replaced by one that returns a known sequence, so every
result is computed by hand: the median, min and max, each timed call, which calls were timed
and where `synchronize` ran.
"""

import re

import pytest
import torch

from utils import timing
from utils.timing import summary, time_call


class FakeClock:
    """Returns `readings` one per call and logs each read in `events` (shared with the fakes)."""

    def __init__(self, readings: list[float], events: list[str]) -> None:
        self.readings, self.events = list(readings), events

    def __call__(self) -> float:
        self.events.append("clock")
        return self.readings.pop(0)


def clock_for(durations: list[float], start: float = 100.0) -> list[float]:
    """Readings (start, end) per timed call giving `durations`; dyadic numbers, exact in floats."""
    readings, now = [], start
    for seconds in durations:
        readings += [now, now + seconds]
        now += seconds + 1.0  # a gap between calls, which must not count
    return readings


@pytest.fixture
def events(monkeypatch) -> list[str]:
    """The order of clock reads, calls of the timed function and synchronize calls."""
    log: list[str] = []
    monkeypatch.setattr(timing, "synchronize", lambda device: log.append(f"sync {device}"))
    return log


def test_time_call_reports_the_median_min_max_of_the_timed_calls(monkeypatch, events):
    durations = [0.5, 0.125, 2.0, 0.25, 1.0]
    monkeypatch.setattr(timing.time, "perf_counter", FakeClock(clock_for(durations), events))
    result = time_call(lambda: events.append("call"), warmup=0, repeat=5)
    assert result == {
        "median_s": 0.5,  # sorted: 0.125, 0.25, 0.5, 1.0, 2.0
        "min_s": 0.125,
        "max_s": 2.0,
        "repeat": 5,
        "times_s": [0.5, 0.125, 2.0, 0.25, 1.0],  # in call order
    }


def test_time_call_median_of_an_even_count_is_the_mean_of_the_middle_two(monkeypatch, events):
    durations = [0.25, 1.0, 0.5, 4.0]
    monkeypatch.setattr(timing.time, "perf_counter", FakeClock(clock_for(durations), events))
    result = time_call(lambda: None, warmup=1, repeat=4)
    assert result["median_s"] == 0.75  # (0.5 + 1.0) / 2
    assert (result["min_s"], result["max_s"]) == (0.25, 4.0)


def test_warmup_calls_are_not_timed_and_each_timed_call_is_synchronized(monkeypatch, events):
    clock = FakeClock(clock_for([0.5, 0.25, 1.0]), events)
    monkeypatch.setattr(timing.time, "perf_counter", clock)
    time_call(lambda: events.append("call"), warmup=2, repeat=3, device="cuda")
    timed = ["clock", "call", "sync cuda", "clock"]  # the end is read after the sync
    assert events == ["call", "call", "sync cuda"] + timed * 3
    assert clock.readings == [], "each timed call reads the clock exactly twice"


@pytest.mark.parametrize(
    ("repeat", "warmup"), [(0, 3), (-1, 3), (10, -1)], ids=["repeat 0", "repeat -1", "warmup -1"]
)
def test_time_call_rejects_bad_counts_before_calling(repeat, warmup):
    calls = []
    message = f"need repeat >= 1 and warmup >= 0, got repeat={repeat}, warmup={warmup}"
    with pytest.raises(ValueError, match=re.escape(message)):
        time_call(lambda: calls.append(1), warmup=warmup, repeat=repeat)
    assert calls == []


@pytest.mark.parametrize("kind", ["cuda", "mps", "xpu"])
def test_synchronize_waits_on_the_device_it_is_given(monkeypatch, kind):
    waited = []
    for other in ("cuda", "mps", "xpu"):
        monkeypatch.setattr(getattr(torch, other), "synchronize", lambda o=other: waited.append(o))
    timing.synchronize(kind)
    timing.synchronize(torch.device(kind))
    timing.synchronize("cpu")
    assert waited == [kind, kind]


def test_summary_shows_median_min_max():
    result = {"median_s": 0.0037, "min_s": 0.00361, "max_s": 0.00402, "repeat": 20}
    assert summary(result) == "median 3.70 ms (min 3.61, max 4.02, 20 calls)"
    assert summary(result, unit="us") == "median 3700.00 us (min 3610.00, max 4020.00, 20 calls)"
    assert summary(result, unit="s") == "median 0.00 s (min 0.00, max 0.00, 20 calls)"
