"""Measure the training and inference paths the book teaches against this machine's own limit.

    python -m tools.bench                 the full run (several minutes on a laptop CPU)
    python -m tools.bench --quick         every path on a small subset: a smoke test (~20 s)
    python -m tools.bench --out DIR       also write DIR/bench.json, DIR/bench.md, DIR/bench.png

The limit is what a float32 matrix multiply reaches on the device in the same run (and bfloat16
where the hardware has it natively). The model's cost is counted, not guessed: FlopCounterMode
counts SimpleCNN's FLOP per training image (forward and backward). Every path shows images/s,
its ratio to the baseline (a typical tutorial recipe: PIL transforms in the DataLoader, batch 64,
2 workers, float32) and its share of the limit, each as the median and the range over epochs
timed one by one. The paths take turns epoch by epoch, so a busy machine slows all of them alike,
and the fastest path is the one with the most images/s over those epochs, never a probe.
Inference: eager vs compiled vs ONNX Runtime at batch 1 and 64, on the CPU.
Taught in notebooks/05_cnn_fashion_mnist.ipynb, 08_mixed_precision.ipynb, 09_torch_compile.ipynb.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, Subset

from utils.data import MEAN, STD, TensorBatches, fashion_mnist, fashion_mnist_tensors
from utils.deploy import export_onnx
from utils.device import cpu_model, cpu_native_bfloat16, get_device
from utils.models import SimpleCNN
from utils.onnx_predict import OnnxPredictor
from utils.seed import make_generator, set_seed
from utils.timing import synchronize, time_call
from utils.train import evaluate, train_one_epoch

BASELINE = (
    "a typical tutorial recipe: PIL transforms in the DataLoader, batch 64, 2 workers, float32"
)
RECIPE_BATCH, RECIPE_WORKERS, RECIPE_LR = 64, 2, 3e-4  # the recipe's DataLoader and Adam
CHAPTER05_BATCH, CHAPTER05_LR = 128, 1e-3  # chapter 05's batch; Adam's default learning rate
OTHER_BATCHES = (64, 256)  # tried against chapter 05's 128 in each precision; the lr scales
QUICK_BACKEND = "aot_eager"  # --quick traces with torch.compile but skips code generation
MATMUL_SIZE = {"cpu": 2048, "cuda": 8192}  # large enough to run at full speed, 4096 elsewhere
MATMUL_REPEAT = 5  # float32 and bfloat16 matmuls timed before each round of epochs


def scaled_lr(batch_size: int) -> float:
    """Chapter 05's learning rate scaled linearly with the batch size (the linear scaling rule)."""
    return CHAPTER05_LR * batch_size / CHAPTER05_BATCH


# ----------------------------------------------------------------------------- measurements


@dataclass(frozen=True)
class Spread:
    """The median and the range (min-max) of repeated measurements."""

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


def matmul_gflops(device: torch.device, dtype: torch.dtype, n: int, repeat: int) -> list[float]:
    """GFLOP/s of `repeat` timed n x n matrix multiplies in `dtype` (after one warm-up call)."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    a @ b
    synchronize(device)
    rates = []
    for _ in range(repeat):
        start = time.perf_counter()
        a @ b
        synchronize(device)
        rates.append(2 * n**3 / (time.perf_counter() - start) / 1e9)
    return rates


def training_flop_per_image(batch_size: int = 16) -> float:
    """FLOP of one SimpleCNN training step per image (forward, loss, backward), as torch counts them.

    FlopCounterMode counts matrix multiplies and convolutions, the work the limit measures; the
    cheap elementwise layers (BatchNorm, ReLU, pooling) and the optimizer step are not counted.
    """
    from torch.utils.flop_counter import FlopCounterMode

    model = SimpleCNN()
    X = torch.zeros(batch_size, 1, 28, 28)
    y = torch.zeros(batch_size, dtype=torch.long)
    with FlopCounterMode(display=False) as counter:
        nn.functional.cross_entropy(model(X), y).backward()
    return counter.get_total_flops() / batch_size


def bf16_native(device: torch.device) -> bool:
    """Whether `device` computes bfloat16 in hardware (AVX512-BF16/AMX on a CPU, Ampere+ GPUs)."""
    if device.type == "cpu":
        return cpu_native_bfloat16()
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    return False


def describe_device(device: torch.device) -> str:
    """The device's name and, on a CPU, the vector instructions torch uses and its threads."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type != "cpu":
        return device.type
    capability = torch.backends.cpu.get_cpu_capability()
    count = torch.get_num_threads()
    threads = f"{count} thread{'s' * (count != 1)} (inter-op {torch.get_num_interop_threads()})"
    return f"{cpu_model()}, instruction set {capability}, {threads}"


_START = time.perf_counter()


def progress(message: str) -> None:
    """A progress line on stderr, stamped with the seconds since the command started."""
    print(f"[{time.perf_counter() - _START:6.1f} s] {message}", file=sys.stderr, flush=True)


def load_average() -> float | None:
    """The 1-minute load average (runnable processes), where the OS reports one."""
    try:
        return round(os.getloadavg()[0], 1)
    except (AttributeError, OSError):  # Windows has none
        return None


# ----------------------------------------------------------------------------- training paths


@dataclass(frozen=True)
class PathSpec:
    """One way to train SimpleCNN; `base` names the path it changes one thing of."""

    key: str
    label: str
    batch_size: int
    lr: float
    loader: str  # "recipe" (PIL + transforms), "dataloader" (cached tensors), "slices"
    channels_last: bool = False
    bf16: bool = False
    compile_mode: str | None = None  # a torch.compile mode; None runs eagerly
    tuned: bool = False  # SimpleCNN(relu_after_pool=True): the same function, chapter 05's model
    base: str | None = None


def sliced_path(
    key: str,
    label: str,
    base: str,
    bf16: bool,
    batch_size: int = CHAPTER05_BATCH,
    compile_mode: str | None = None,
    tuned: bool = False,
) -> PathSpec:
    """A path over batches sliced from the cached tensors, channels_last, learning rate scaled."""
    return PathSpec(
        key,
        label,
        batch_size,
        scaled_lr(batch_size),
        "slices",
        channels_last=True,
        bf16=bf16,
        compile_mode=compile_mode,
        tuned=tuned,
        base=base,
    )


def plan_paths(
    native_bf16: bool, use_compile: bool, batches: Sequence[int] = OTHER_BATCHES
) -> tuple[list[PathSpec], list[str]]:
    """The paths to measure, baseline first, and a sentence for each path left out.

    Each path after the baseline changes one thing of its `base`, so each row of the report
    answers one question: does this change pay on this machine? Per precision: sliced batches of
    chapter 05's size, the same at each of `batches`, with the ReLU after pooling (`tuned`), and compiled.
    """
    paths = [
        PathSpec("baseline", f"baseline: {BASELINE}", RECIPE_BATCH, RECIPE_LR, "recipe"),
        PathSpec(
            "dataloader",
            "cached tensors in a DataLoader (chapter 03), channels_last, float32",
            CHAPTER05_BATCH,
            CHAPTER05_LR,
            "dataloader",
            channels_last=True,
            base="baseline",
        ),
    ]
    skipped = []
    precisions = [("sliced", "float32", False, "dataloader")]
    if native_bf16:
        precisions.append(("bf16", "bfloat16 autocast", True, "sliced"))
    else:
        skipped.append("bfloat16 paths: bfloat16 is not native on this device (emulated, slower)")
    if not use_compile:
        skipped.append("torch.compile paths: left out (--no-compile)")
    for key, precision, bf16, base in precisions:
        first = "chapter 05's loader: cached tensors sliced into shuffled batches, channels_last, ReLU before pooling"
        label = f"{first if not bf16 else 'sliced batches'}, {precision}"
        paths.append(sliced_path(key, label, base, bf16))
        for batch in sorted(set(batches) - {CHAPTER05_BATCH}):
            label = (
                f"sliced batches, {precision}, batch {batch}, learning rate {scaled_lr(batch):g}"
            )
            paths.append(sliced_path(f"{key}-{batch}", label, key, bf16, batch))
        label = f"sliced batches, {precision}, ReLU after pooling (chapter 05's model)"
        paths.append(sliced_path(f"{key}-tuned", label, key, bf16, tuned=True))
        if use_compile:
            compiled = "compiled" if key == "sliced" else f"{key}-compiled"
            label = f"sliced batches, {precision}, torch.compile"
            paths.append(sliced_path(compiled, label, key, bf16, compile_mode="default"))
    return paths, skipped


def recipe_loader(train_limit: int | None, generator: torch.Generator) -> DataLoader:
    """The baseline: PIL images, ToTensor + Normalize per item, batch 64, 2 worker processes."""
    from torchvision import transforms

    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((MEAN,), (STD,))])
    dataset = fashion_mnist(True, transform=transform)
    if train_limit is not None:
        dataset = Subset(dataset, range(min(train_limit, len(dataset))))
    return DataLoader(
        dataset,
        batch_size=RECIPE_BATCH,
        shuffle=True,
        num_workers=RECIPE_WORKERS,
        generator=generator,
    )


def images_per_epoch(loader) -> int:
    if isinstance(loader, TensorBatches):
        return min(len(loader) * loader.batch_size, len(loader.y))
    return len(loader.dataset)


@dataclass
class PathResult:
    spec: PathSpec
    images_per_s: list[float] = field(default_factory=list)  # one per epoch, in round order
    test_acc: float = float("nan")
    compile_s: float = 0.0  # one-off, excluded from images/s


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
        start = time.perf_counter()
        train_one_epoch(self.runner, batches, self.loss_fn, scratch, **self.options)
        synchronize(self.device)
        seconds = time.perf_counter() - start
        self.model.load_state_dict(state)
        return seconds

    def epoch(self) -> float:
        start = time.perf_counter()
        train_one_epoch(self.runner, self.loader, self.loss_fn, self.optimizer, **self.options)
        synchronize(self.device)
        rate = images_per_epoch(self.loader) / (time.perf_counter() - start)
        self.result.images_per_s.append(rate)
        return rate

    def finish(self, test_loader: DataLoader) -> PathResult:
        _, self.result.test_acc = evaluate(self.model, test_loader, self.loss_fn, self.device)
        return self.result


@dataclass
class Limits:
    """Matmul GFLOP/s per round (the median of that round's repeats) and FLOP per image."""

    flop_per_image: float
    matmul_size: int
    float32: list[float] = field(default_factory=list)
    bfloat16: list[float] = field(default_factory=list)  # empty where bfloat16 is not native

    def images_per_s(self, bf16: bool = False) -> float:
        """The images/s the median limit would allow if all counted FLOP ran at matmul speed."""
        rates = self.bfloat16 if bf16 else self.float32
        return statistics.median(rates) * 1e9 / self.flop_per_image

    def shares(self, result: PathResult) -> list[float]:
        """Share of the limit (of the path's own precision) reached in each epoch."""
        rates = self.bfloat16 if result.spec.bf16 else self.float32
        return [
            ips * self.flop_per_image / (gflops * 1e9)
            for ips, gflops in zip(result.images_per_s, rates, strict=True)
        ]


def measure_limits(limits: Limits, device: torch.device, native_bf16: bool) -> None:
    """Append one round's median float32 (and native bfloat16) matmul GFLOP/s to `limits`."""
    n = limits.matmul_size
    limits.float32.append(statistics.median(matmul_gflops(device, torch.float32, n, MATMUL_REPEAT)))
    if native_bf16:
        rates = matmul_gflops(device, torch.bfloat16, n, MATMUL_REPEAT)
        limits.bfloat16.append(statistics.median(rates))


def train_paths(
    paths: list[PathSpec],
    make_loader: Callable[[PathSpec], object],
    test_loader: DataLoader,
    device: torch.device,
    args: argparse.Namespace,
    native_bf16: bool,
) -> tuple[list[PathResult], Limits, list[str]]:
    """Build every path, then run `args.epochs` rounds: the limits, then one epoch of each path.

    Returns the results of the paths that ran, the limits, and a sentence per path that failed.
    """
    backend = QUICK_BACKEND if args.quick else None
    runs, failures = [], []

    def failed(spec: PathSpec, when: str, err: Exception) -> None:
        """A path that raises is reported and dropped; the other paths carry on."""
        message = str(err).strip().splitlines()[-1][:200] if str(err).strip() else ""
        failures.append(f"{spec.key}: failed {when} ({type(err).__name__}: {message})")
        progress(failures[-1])

    for spec in paths:
        progress(f"preparing {spec.key}")
        try:
            runs.append(PathRun(spec, make_loader(spec), device, args.seed, backend))
        except Exception as err:  # e.g. a torch.compile failure: the other paths still count
            failed(spec, "while preparing", err)
    size = MATMUL_SIZE.get(device.type, 4096) // (4 if args.quick else 1)
    limits = Limits(training_flop_per_image(), size)
    for round_index in range(args.epochs):
        measure_limits(limits, device, native_bf16)
        for run in list(runs):
            try:
                rate = run.epoch()
            except Exception as err:
                failed(run.spec, f"in round {round_index + 1}", err)
                runs.remove(run)
                continue
            progress(f"round {round_index + 1}/{args.epochs} {run.spec.key}: {rate:.0f} images/s")
    return [run.finish(test_loader) for run in runs], limits, failures


# ----------------------------------------------------------------------------- inference


def export_for_ort(model: nn.Module, folder: Path) -> tuple[Callable, str]:
    """Export `model` with utils.deploy and load it in ONNX Runtime, as chapter 11 does."""
    path = export_onnx(model, folder / "model.onnx", torch.zeros(1, 1, 28, 28))
    predictor = OnnxPredictor(path)

    def predict(images):  # the normalised float arrays of utils.data
        return predictor.predict(images, normalized=True)

    return predict, "utils.deploy + utils.onnx_predict"


def bench_inference(
    model: nn.Module,
    images: torch.Tensor,
    compile_backend: str | None,
    use_compile: bool,
    repeat: dict[int, int],
    warmup: int = 10,
) -> dict:
    """Median seconds per call of eager, compiled and ONNX Runtime inference on the CPU.

    A compiled model whose logits disagree with eager is reported in "failures", not timed.
    """
    model = model.cpu().eval()
    results: dict[str, dict[int, float]] = {"eager": {}, "onnxruntime": {}}
    failures: list[str] = []
    compiled = None
    if use_compile:
        options = {"backend": compile_backend} if compile_backend else {}
        compiled = torch.compile(model, dynamic=False, **options)
        results["compiled"] = {}
    with tempfile.TemporaryDirectory() as folder:
        predict, how = export_for_ort(model, Path(folder))
        for batch_size, calls in repeat.items():
            X = images[:batch_size].contiguous()
            X_np = X.numpy()
            with torch.inference_mode():
                expected = model(X)
                results["eager"][batch_size] = time_call(
                    lambda X=X: model(X), warmup=warmup, repeat=calls
                )["median_s"]
                if compiled is not None:
                    got = compiled(X)  # compiles for this batch size
                    if not torch.allclose(got, expected, rtol=1e-4, atol=1e-4):
                        # Reported, not raised: the other runtimes are still worth measuring.
                        failures.append(
                            f"compiled inference: its logits at batch {batch_size} disagree "
                            "with eager (beyond 1e-4), so it is not timed"
                        )
                        compiled = None
                        del results["compiled"]
                    else:
                        results["compiled"][batch_size] = time_call(
                            lambda X=X, f=compiled: f(X), warmup=warmup, repeat=calls
                        )["median_s"]
            got = torch.from_numpy(predict(X_np))
            if not torch.allclose(got, expected, rtol=1e-4, atol=1e-4):
                raise RuntimeError("ONNX Runtime disagrees with eager")
            results["onnxruntime"][batch_size] = time_call(
                lambda X_np=X_np: predict(X_np), warmup=warmup, repeat=calls
            )["median_s"]
    return {"seconds": results, "onnx_export": how, "failures": failures}


# ----------------------------------------------------------------------------- the report


def summarize(results: list[PathResult], limits: Limits) -> list[dict]:
    """Per path: images/s, ratio to the baseline and to its base, share of the limit (spreads)."""
    by_key = {r.spec.key: r for r in results}
    baseline = results[0].images_per_s
    rows = []
    for r in results:
        base = by_key.get(r.spec.base) if r.spec.base else None
        rows.append(
            {
                "key": r.spec.key,
                "label": r.spec.label,
                "batch_size": r.spec.batch_size,
                "lr": r.spec.lr,
                "bf16": r.spec.bf16,
                "images_per_s": Spread.of(r.images_per_s),
                "vs_baseline": Spread.of(paired_ratios(r.images_per_s, baseline)),
                "vs_base": Spread.of(paired_ratios(r.images_per_s, base.images_per_s))
                if base
                else None,
                "base": r.spec.base,
                "share": Spread.of(limits.shares(r)),
                "test_acc": r.test_acc,
                "compile_s": r.compile_s,
            }
        )
    return rows


def percent(share: Spread) -> str:
    """'48% (45-50)': a spread of fractions as percentages."""
    return Spread(100 * share.median, 100 * share.low, 100 * share.high).format(unit="%")


def fastest(rows: list[dict]) -> dict:
    """The taught path with the highest median ratio to the baseline over the measured epochs.

    The ratio pairs each epoch with the baseline's epoch of the same round, so a machine that is
    busier in one round than another does not decide it, as raw images/s could.
    """
    return max(rows[1:], key=lambda row: row["vs_baseline"].median)


def verdict(ratio: Spread) -> str:
    """'loses' or 'wins' when every epoch agrees, else 'within noise'."""
    if ratio.high < 1:
        return "loses"
    return "wins" if ratio.low > 1 else "within noise"


def markdown_table(header: list[str], body: list[list[str]]) -> list[str]:
    """A Markdown table padded so it also reads well as plain text."""
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return [line(header), line(["-" * w for w in widths]), *(line(cells) for cells in body)]


def format_report(
    rows: list[dict],
    limits: Limits,
    inference: dict,
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
        f"epoch timed on its own and the paths taking turns; test accuracy on {machine['num_test']} "
        "images after the last epoch. Spreads: median (min-max) over the epochs.",
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
    body = []
    for row in rows:
        vs_base = "-" if row["vs_base"] is None else row["vs_base"].format("{:.2f}", "x")
        if row["vs_base"] is not None and verdict(row["vs_base"]) != "wins":
            vs_base += f" {verdict(row['vs_base'])}"
        note = f" (+{row['compile_s']:.0f} s compile, once)" if row["compile_s"] else ""
        share = percent(row["share"])
        body.append(
            [
                row["label"] + note,
                str(row["batch_size"]),
                row["images_per_s"].format(),
                row["vs_baseline"].format("{:.2f}", "x"),
                vs_base,
                share + (" of bf16" if row["bf16"] else ""),
                f"{row['test_acc']:.3f}",
            ]
        )
    lines += markdown_table(header, body)
    best = fastest(rows)
    lines += [
        "",
        f"Fastest taught path, by measured epochs: {best['label']}: "
        f"{best['vs_baseline'].format('{:.2f}', 'x')} the baseline, "
        f"{percent(best['share'])} of its limit.",
    ]
    for row in rows[1:]:
        if verdict(row["vs_base"]) != "wins":
            lines.append(
                f"{verdict(row['vs_base']).capitalize()} here: {row['key']} runs at "
                f"{row['vs_base'].format('{:.2f}', 'x')} of {row['base']}, the path it changes "
                "one thing of."
            )
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


def inference_lines(inference: dict) -> list[str]:
    seconds = inference["seconds"]
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
        f"Inference on the CPU (ONNX export via {inference['onnx_export']}), median ms per call:",
        "",
        *markdown_table(header, body),
    ]


def plot(rows: list[dict], limits: Limits, path: Path) -> None:
    """Horizontal bars of images/s per path (median, min-max whiskers) with the limits as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 0.5 * len(rows) + 1.8))
    rows = rows[::-1]  # the baseline on top
    spreads = [row["images_per_s"] for row in rows]
    whiskers = [[s.median - s.low for s in spreads], [s.high - s.median for s in spreads]]
    colors = ["C7" if row["key"] == "baseline" else "C1" if row["bf16"] else "C0" for row in rows]
    ax.barh(
        [row["key"] for row in rows],
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
    rows: list[dict],
    results: list[PathResult],
    limits: Limits,
    inference: dict,
    machine: dict,
    skipped: list[str],
) -> dict:
    paths = []
    for row, result in zip(rows, results, strict=True):
        entry = {k: asdict(v) if isinstance(v, Spread) else v for k, v in row.items()}
        entry["epochs_images_per_s"] = result.images_per_s
        paths.append(entry)
    return {
        "machine": machine,
        "limits": asdict(limits),
        "paths": paths,
        "fastest": fastest(rows)["key"],
        "skipped": skipped,
        "inference": inference,
    }


# ----------------------------------------------------------------------------- command line


def make_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="every path on a small subset, 1 thread, compile traced but not generated",
    )
    parser.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="epochs per path, each timed (default 3, 2 with --quick)",
    )
    parser.add_argument(
        "--device", default=None, help="cpu, cuda, mps, ... (default: the best here)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch.set_num_threads (default: torch's own, 1 with --quick)",
    )
    parser.add_argument(
        "--batches",
        type=lambda text: [int(part) for part in text.split(",")],
        default=list(OTHER_BATCHES),
        help="other batch sizes tried in each precision, comma-separated (default "
        f"{','.join(map(str, OTHER_BATCHES))}), learning rate scaled",
    )
    parser.add_argument("--train-limit", type=int, default=None, help="first N training images")
    parser.add_argument("--test-limit", type=int, default=None, help="first N test images")
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder to write bench.json, bench.md and bench.png into",
    )
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and check the command line; bad values exit with a message saying what to pass."""
    parser = make_arg_parser()
    args = parser.parse_args(argv)
    for name in ("epochs", "threads", "train_limit", "test_limit"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    if any(batch < 1 for batch in args.batches):
        parser.error(f"--batches must all be >= 1, got {args.batches}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    try:
        args.device = get_device(args.device)
    except (ValueError, RuntimeError) as err:
        parser.error(str(err))
    if args.epochs is None:
        args.epochs = 2 if args.quick else 3
    if args.quick:
        # One thread: a smoke test on a shared machine, where idle threads waiting for a busy
        # core would stall every parallel kernel; it checks that every path runs, not speed.
        args.threads = args.threads or 1
        args.train_limit = args.train_limit or 512
        args.test_limit = args.test_limit or 500
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Inductor imports torch.utils.cpp_extension, which warns "No CUDA runtime is found" on a
    # CUDA build of torch without a GPU: harmless for CPU code generation.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = args.device
    native_bf16 = bf16_native(device)
    use_compile = not args.no_compile
    train_set = fashion_mnist_tensors(True, limit=args.train_limit)
    test_set = fashion_mnist_tensors(False, limit=args.test_limit)
    test_loader = DataLoader(test_set, batch_size=1000)
    X_train, y_train = (t.to(device) for t in train_set.tensors)

    def make_loader(spec: PathSpec):
        generator = make_generator(args.seed)
        if spec.loader == "recipe":
            return recipe_loader(args.train_limit, generator)
        if spec.loader == "dataloader":
            return DataLoader(
                train_set, batch_size=spec.batch_size, shuffle=True, generator=generator
            )
        # A compiled path drops the last, smaller batch: one more shape would compile again.
        drop_last = spec.compile_mode is not None
        return TensorBatches(X_train, y_train, spec.batch_size, generator, drop_last=drop_last)

    paths, skipped = plan_paths(native_bf16, use_compile, args.batches)
    load_start = load_average()
    progress("training")
    results, limits, failures = train_paths(
        paths, make_loader, test_loader, device, args, native_bf16
    )
    skipped += failures
    progress("timing inference")
    set_seed(args.seed)
    inference = bench_inference(
        SimpleCNN(),
        test_set.tensors[0],
        QUICK_BACKEND if args.quick else None,
        use_compile,
        {1: 20, 64: 5} if args.quick else {1: 300, 64: 100},
        warmup=2 if args.quick else 10,
    )
    skipped += inference.pop("failures")
    machine = {
        "device": str(device),
        "name": describe_device(device),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "bf16_native": native_bf16,
        "torch": torch.__version__,
        "epochs": args.epochs,
        "num_train": len(train_set),
        "num_test": len(test_set),
        "quick": args.quick,
        "load_average": [load_start, load_average()],
    }
    rows = summarize(results, limits)
    report = format_report(rows, limits, inference, machine, skipped)
    print(report)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench.md").write_text(report + "\n")
        payload = to_json(rows, results, limits, inference, machine, skipped)
        (args.out / "bench.json").write_text(json.dumps(payload, indent=2) + "\n")
        plot(rows, limits, args.out / "bench.png")
    progress("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
