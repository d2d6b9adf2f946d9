"""Tests of utils.timing: warm-up calls are not timed, and the summary reports the spread."""

import pytest

from utils.timing import summary, time_call


def test_time_call_warms_up_then_times_each_call():
    calls = []
    result = time_call(lambda: calls.append(1), warmup=2, repeat=5)
    assert len(calls) == 7 and len(result["times_s"]) == 5 and result["repeat"] == 5
    assert result["min_s"] <= result["median_s"] <= result["max_s"]
    assert result["min_s"] == min(result["times_s"]) and result["max_s"] == max(result["times_s"])


def test_time_call_rejects_bad_counts():
    with pytest.raises(ValueError, match="need repeat >= 1 and warmup >= 0"):
        time_call(lambda: None, repeat=0)


def test_summary_shows_median_min_max():
    result = {"median_s": 0.0037, "min_s": 0.00361, "max_s": 0.00402, "repeat": 20}
    assert summary(result) == "median 3.70 ms (min 3.61, max 4.02, 20 calls)"
    assert summary(result, unit="us").startswith("median 3700.00 us")
