"""The report: a row per path (spreads over epochs), the text and Markdown report, plot and JSON.

A path that failed keeps its row, marked failed; a ratio to a failed path is unavailable, never
computed from another path in its place.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from tools.bench.inference import InferenceResult
from tools.bench.machine import Limits
from tools.bench.run import PathResult
from utils.timing import Rounds, round_savings, verdict

UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class Spread:
    """The median and the range (min-max) of measurements paired by epoch (images/s, ratios).

    Not utils.timing.spread: that pools many calls into quartiles; a path has a few epochs.
    """

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if len(values) == 0:
            raise ValueError("a spread needs at least one measurement, got none")
        return cls(statistics.median(values), min(values), max(values))

    def format(self, fmt: str = "{:.0f}", unit: str = "") -> str:
        """'4200 (3900-4400)': the median, then the range in brackets."""
        median, low, high = (fmt.format(v) for v in (self.median, self.low, self.high))
        return f"{median}{unit} ({low}-{high})"


def paired_ratios(values: Sequence[float], bases: Sequence[float]) -> list[float]:
    """Ratio of each measurement to the one taken in the same round (paired, so load cancels)."""
    if len(values) != len(bases):
        raise ValueError(
            f"paired ratios need as many values as bases: {len(values)} vs {len(bases)}"
        )
    return [value / base for value, base in zip(values, bases, strict=True)]


@dataclass(frozen=True)
class Row:
    """One path of the report; a measurement is None where it is unavailable (a failed path)."""

    key: str
    label: str
    batch_size: int
    lr: float
    bf16: bool
    base: str | None  # the path this one changes one thing of
    compile_s: float
    test_acc: float | None = None
    images_per_s: Spread | None = None
    vs_baseline: Spread | None = None
    vs_base: Spread | None = None
    share: Spread | None = None  # of the limit of the path's own precision
    verdict: str | None = None  # against its base, round by round (utils.timing.verdict)
    pays: bool | None = None  # faster than its base in every round
    error: str | None = None  # why the path failed


def seconds_per_image(result: PathResult) -> Rounds:
    """A path's epochs as utils.timing rounds: one round per epoch, seconds per image."""
    return [[1 / rate] for rate in result.images_per_s]


def ratio(result: PathResult, base: PathResult | None) -> Spread | None:
    """`result`'s images/s over `base`'s, epoch by epoch; None where either path failed."""
    if base is None or result.error is not None or base.error is not None:
        return None
    return Spread.of(paired_ratios(result.images_per_s, base.images_per_s))


def summarize(results: list[PathResult], limits: Limits) -> list[Row]:
    """A row per path, in plan order; the first path is the baseline every path is compared with."""
    by_key = {r.spec.key: r for r in results}
    return [row_of(r, by_key.get(r.spec.base), results[0], limits) for r in results]


def row_of(
    result: PathResult, base: PathResult | None, baseline: PathResult, limits: Limits
) -> Row:
    """images/s, the ratios to the baseline and to its base, the share of the limit, the verdict."""
    spec = result.spec
    row = Row(
        spec.key,
        spec.label,
        spec.batch_size,
        spec.lr,
        spec.bf16,
        spec.base,
        result.compile_s,
        error=result.error,
    )
    if result.error is not None:
        return row  # what it measured before it failed is in bench.json, not compared
    vs_base, change_verdict, pays = ratio(result, base), None, None
    if vs_base is not None:
        times = {base.spec.key: seconds_per_image(base), spec.key: seconds_per_image(result)}
        change_verdict = verdict(times, base.spec.key, spec.key)
        pays = all(saved > 0 for saved in round_savings(times, base.spec.key, spec.key))
    return replace(
        row,
        test_acc=result.test_acc,
        images_per_s=Spread.of(result.images_per_s),
        vs_baseline=ratio(result, baseline),
        vs_base=vs_base,
        share=Spread.of(limits.shares(result.images_per_s, spec.bf16)),
        verdict=change_verdict,
        pays=pays,
    )


def percent(share: Spread) -> str:
    """'48% (45-50)': a spread of fractions as percentages."""
    return Spread(100 * share.median, 100 * share.low, 100 * share.high).format(unit="%")


def fastest(rows: list[Row]) -> Row | None:
    """The taught path with the highest median ratio to the baseline over the measured epochs.

    The ratio pairs each epoch with the baseline's epoch of the same round, so a machine that is
    busier in one round than another does not decide it, as raw images/s could. None where no
    path has that ratio (the baseline failed, or every other path did).
    """
    compared = [row for row in rows[1:] if row.vs_baseline is not None]
    return max(compared, key=lambda row: row.vs_baseline.median, default=None)


def markdown_table(header: list[str], body: list[list[str]]) -> list[str]:
    """A Markdown table padded so it also reads well as plain text."""
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return [line(header), line(["-" * w for w in widths]), *(line(cells) for cells in body)]


def ratio_cell(ratio: Spread | None) -> str:
    return UNAVAILABLE if ratio is None else ratio.format("{:.2f}", "x")


def table_cells(row: Row) -> list[str]:
    """A row of the paths table; a failed path says so in its images/s column."""
    note = f" (+{row.compile_s:.0f} s compile, once)" if row.compile_s else ""
    if row.error is not None:
        return [row.label + note, str(row.batch_size), "failed", "-", "-", "-", "-"]
    return [
        row.label + note,
        str(row.batch_size),
        row.images_per_s.format(),
        ratio_cell(row.vs_baseline),
        "-" if row.base is None else ratio_cell(row.vs_base),
        percent(row.share) + (" of bf16" if row.bf16 else ""),
        f"{row.test_acc:.3f}",
    ]


def failure_line(row: Row, rows: list[Row]) -> str:
    """'Failed: key, when (error)', and which ratios that leaves unavailable."""
    line = f"Failed: {row.key}, {row.error}"
    if row is rows[0]:
        return line + "; every ratio to the baseline is unavailable."
    dependents = [other.key for other in rows if other.base == row.key]
    if dependents:
        return line + f"; the ratios of {', '.join(dependents)} to it are unavailable."
    return line + "."


def format_report(
    rows: list[Row],
    limits: Limits,
    inference: InferenceResult,
    machine: dict,
    skipped: list[str],
) -> str:
    """The report the command prints (and writes to bench.md): machine, limit, paths, inference."""
    fp32_limit = Spread.of(limits.float32)
    lines = [
        f"# Training and inference benchmark: SimpleCNN on Fashion-MNIST ({machine['device']})",
        "",
        f"- Machine: {machine['name']}; bfloat16 native: {'yes' if machine['bf16_native'] else 'no'}",
        *load_lines(machine.get("load_average")),
        f"- Limit: float32 matmul ({limits.matmul_size}x{limits.matmul_size}) "
        f"{fp32_limit.format(unit=' GFLOP/s')}, i.e. {limits.images_per_s():.0f} images/s at "
        f"{limits.flop_per_image / 1e6:.1f} MFLOP per training image (forward + backward, "
        "counted by FlopCounterMode)",
    ]
    if limits.bfloat16:
        lines.append(
            f"- bfloat16 matmul {Spread.of(limits.bfloat16).format(unit=' GFLOP/s')}, i.e. "
            f"{limits.images_per_s(bf16=True):.0f} images/s; bfloat16 paths are measured against it"
        )
    lines += [
        f"- Training: {machine['epochs']} epoch(s) of {machine['num_train']} images per path, each "
        "epoch timed on its own, the paths taking turns (in reverse order every other round); "
        f"test accuracy on {machine['num_test']} images after the last epoch. Spreads: median "
        "(min-max) over the epochs.",
        "",
    ]
    header = [
        "path",
        "batch",
        "images/s",
        "vs baseline",
        "vs its base",
        "share of limit",
        "test acc",
    ]
    lines += markdown_table(header, [table_cells(row) for row in rows])
    lines.append("")
    best = fastest(rows)
    if best is None:
        lines.append(
            f"Fastest taught path, by measured epochs: {UNAVAILABLE} (no ratio to the baseline)."
        )
    else:
        lines.append(
            f"Fastest taught path, by measured epochs: {best.label}: "
            f"{ratio_cell(best.vs_baseline)} the baseline, {percent(best.share)} of its limit."
        )
    for row in rows:
        if row.pays is False:
            lines.append(
                f"Not a win here: {row.key} runs at {ratio_cell(row.vs_base)} of {row.base}, "
                f"the path it changes one thing of ({row.verdict})."
            )
    lines += [failure_line(row, rows) for row in rows if row.error is not None]
    lines += [f"Skipped: {reason}" for reason in skipped]
    lines += inference_lines(inference)
    return "\n".join(lines)


def load_lines(load: list[float | None] | None) -> list[str]:
    """A line on how busy the machine was, since other work slows the paths and widens spreads."""
    if not load or None in load:
        return []
    return [
        f"- Load average (1 min) at start and end: {load[0]:.1f}, {load[1]:.1f} on "
        f"{os.cpu_count()} logical CPUs; above that count, other work competes with the timings"
    ]


def inference_lines(inference: InferenceResult) -> list[str]:
    """The inference table (median ms per call, ratio to eager), then what failed."""
    seconds = inference.seconds
    failures = [f"Failed: {failure}" for failure in inference.failures]
    if "eager" not in seconds:
        return ["", "Inference on the CPU: not measured.", *failures]
    batch_sizes = list(seconds["eager"])
    header = ["runtime"]
    for b in batch_sizes:
        header += [f"batch {b}, ms", "vs eager"]
    body = []
    for runtime, by_batch in seconds.items():
        cells = [runtime]
        for b in batch_sizes:
            cells += [f"{1000 * by_batch[b]:.3f}", f"{seconds['eager'][b] / by_batch[b]:.2f}x"]
        body.append(cells)
    return [
        "",
        f"Inference on the CPU (ONNX export via {inference.onnx_export}), median ms per call:",
        "",
        *markdown_table(header, body),
        *failures,
    ]


def plot(rows: list[Row], limits: Limits, path: Path) -> None:
    """Horizontal bars of images/s per path that ran (median, min-max whiskers), limits as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [row for row in rows[::-1] if row.images_per_s is not None]  # the baseline on top
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(rows) + 1.8))
    spreads = [row.images_per_s for row in rows]
    whiskers = [[s.median - s.low for s in spreads], [s.high - s.median for s in spreads]]
    colors = ["C7" if row.key == "baseline" else "C1" if row.bf16 else "C0" for row in rows]
    ax.barh(
        [row.key for row in rows],
        [s.median for s in spreads],
        xerr=whiskers,
        color=colors,
        capsize=3,
    )
    for y, s in enumerate(spreads):
        ax.annotate(f" {s.median:.0f}", (s.high, y), va="center")
    ax.axvline(limits.images_per_s(), color="C3", label="float32 matmul limit")
    if limits.bfloat16:
        ax.axvline(
            limits.images_per_s(bf16=True), color="C1", ls="--", label="bfloat16 matmul limit"
        )
    ax.set(
        xlabel="training images/s (median, min-max over epochs)",
        title="SimpleCNN training on Fashion-MNIST",
    )
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def to_json(
    rows: list[Row],
    results: list[PathResult],
    limits: Limits,
    inference: InferenceResult,
    machine: dict,
    skipped: list[str],
) -> dict:
    """Everything the report shows, and every epoch's images/s, for bench.json."""
    paths = [
        {**asdict(row), "epochs_images_per_s": result.images_per_s}
        for row, result in zip(rows, results, strict=True)
    ]
    best = fastest(rows)
    return {
        "machine": machine,
        "limits": asdict(limits),
        "paths": paths,
        "fastest": None if best is None else best.key,
        "skipped": skipped,
        "inference": asdict(inference),
    }
