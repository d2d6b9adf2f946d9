"""Tests of utils.timing.report: the lines chapter 10 prints for a compiled call's one-off cost."""

from utils.timing import report


def test_report_gives_first_call_spreads_verdict_saving_and_break_even():
    # Eager 10 and 12 ms, compiled 6 and 10 ms: savings 4 and 2 ms, eager median 11 ms.
    times = {
        "eager": [[0.010, 0.010], [0.012, 0.012]],
        "compiled": [[0.006, 0.006], [0.010, 0.010]],
    }
    # Break-even 1 + 1.0 s / saving: 334 calls (median round), 251 and 501 (best and worst),
    # the range rounded outwards.
    lines = report(1.011, times).splitlines()
    assert lines == [
        "  first compiled call: 1.0 s",
        "  eager:    median 11.00 ms (quartiles 10.00-12.00, 4 calls in 2 rounds)",
        "  compiled: median 8.00 ms (quartiles 6.00-10.00, 4 calls in 2 rounds)",
        "  verdict: compiled faster in all 2 rounds",
        "  saving per call: 3.00 ms in the median round (rounds: 2.00 to 4.00 ms)",
        "  break-even: after about 300 calls (rounds: 200 to 600)",
    ]


def test_report_names_other_versions_and_says_when_there_is_no_break_even():
    times = {"default": [[0.010], [0.010]], "graphs": [[0.012], [0.009]]}  # slower, then faster
    lines = report(2.0, times, base="default", other="graphs").splitlines()
    assert lines[0] == "  first graphs call: 2.0 s"
    assert lines[1].startswith("  default: median") and lines[2].startswith("  graphs:  median")
    assert lines[3] == "  verdict: within the noise: graphs faster in 1 of 2 rounds"
    assert lines[4] == "  saving per call: -0.50 ms in the median round (rounds: -2.00 to 1.00 ms)"
    # 1 + 1.99 s / 1 ms = 1,991 calls in the best round, rounded down; never in the other
    assert lines[5].startswith("  break-even: between 1,000 calls and never")
