"""One benchmark run of the training and inference paths the book teaches, as ratios.

    python -m utils.bench            the full run (a few minutes on a laptop CPU)
    python -m utils.bench --quick    a smoke test on a small subset, without torch.compile

Training: images/s and test accuracy after the same number of epochs for the source article's
literal recipe (PIL images through ToTensor + Normalize in every epoch, batch 64, 2 workers,
float32), chapter 05's path (tensors preprocessed once), and the fastest combination of what
chapters 08-09 teach (channels_last x bfloat16 autocast x batch size x torch.compile), picked by a
short probe. Inference: eager vs compiled vs ONNX Runtime at batch 1 and 64.
Taught in notebooks/08_mixed_precision.ipynb and 09_torch_compile.ipynb.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, Subset

from utils.amp import train_one_epoch_amp
from utils.data import MEAN, STD, fashion_mnist, fashion_mnist_tensors
from utils.deploy import export_onnx
from utils.models import SimpleCNN
from utils.onnx_predict import OnnxPredictor
from utils.seed import make_generator, set_seed
from utils.timing import time_call
from utils.train import evaluate

ARTICLE_BATCH, ARTICLE_WORKERS, ARTICLE_LR = 64, 2, 3e-4  # the article's DataLoader and Adam
CHAPTER05_BATCH, CHAPTER05_LR = 128, 1e-3  # chapter 05: cached tensors, make_loaders' default
PROBE_BATCHES = (128, 256)  # larger batches take fewer steps per epoch: accuracy drops at 1 epoch


def scaled_lr(batch_size: int) -> float:
    """Chapter 05's learning rate scaled linearly with the batch size (the linear scaling rule)."""
    return CHAPTER05_LR * batch_size / CHAPTER05_BATCH


@dataclass
class TrainResult:
    path: str
    batch_size: int
    images_per_s: float
    test_acc: float
    compile_s: float = 0.0  # one-off, excluded from images_per_s


def make_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m utils.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick", action="store_true", help="small subset, no compile: a smoke test"
    )
    parser.add_argument(
        "--epochs", type=int, default=1, help="training epochs per path (default 1)"
    )
    parser.add_argument("--train-limit", type=int, default=None, help="first N training images")
    parser.add_argument("--test-limit", type=int, default=None, help="first N test images")
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and check the command line; bad values exit with a message saying what to pass."""
    parser = make_arg_parser()
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error(f"--epochs must be >= 1, got {args.epochs}")
    for name in ("train_limit", "test_limit"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    if args.quick:
        args.train_limit = args.train_limit or 1024
        args.test_limit = args.test_limit or 500
        args.no_compile = True
    return args


def article_loader(train_limit: int | None, generator: torch.Generator) -> DataLoader:
    """The article's recipe: PIL images, ToTensor + Normalize per item, batch 64, 2 workers."""
    from torchvision import transforms

    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((MEAN,), (STD,))])
    dataset = fashion_mnist(True, transform=transform)
    if train_limit is not None:
        dataset = Subset(dataset, range(min(train_limit, len(dataset))))
    return DataLoader(
        dataset,
        batch_size=ARTICLE_BATCH,
        shuffle=True,
        num_workers=ARTICLE_WORKERS,
        generator=generator,
    )


def train_path(
    name: str,
    loader: DataLoader,
    test_loader: DataLoader,
    lr: float,
    epochs: int,
    seed: int,
    channels_last: bool = False,
    dtype: torch.dtype | None = None,
    compile_model: bool = False,
) -> TrainResult:
    """Train a fresh SimpleCNN for `epochs`, timing the epochs; evaluate in float32 eagerly."""
    set_seed(seed)
    model = SimpleCNN()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    runner = torch.compile(model) if compile_model else model
    compile_s, images = 0.0, 0
    if compile_model:  # compile on one real batch first; its time is reported apart
        X, y = next(iter(loader))
        start = time.perf_counter()
        train_one_epoch_amp(runner, [(X, y)], loss_fn, optimizer, "cpu", dtype, None, channels_last)
        compile_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(epochs):
        train_one_epoch_amp(runner, loader, loss_fn, optimizer, "cpu", dtype, None, channels_last)
        images += len(loader.dataset)
    seconds = time.perf_counter() - start
    _, acc = evaluate(model.to(memory_format=torch.contiguous_format), test_loader, loss_fn, "cpu")
    return TrainResult(name, loader.batch_size, images / seconds, acc, compile_s)


def probe_step(
    X: torch.Tensor,
    y: torch.Tensor,
    channels_last: bool,
    dtype: torch.dtype | None,
    compile_model: bool,
    seed: int,
    repeat: int,
) -> float:
    """Images/s of one training step on a real batch (median after warm-up)."""
    set_seed(seed)
    model = SimpleCNN()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        X = X.contiguous(memory_format=torch.channels_last)
    runner = torch.compile(model) if compile_model else model
    optimizer = torch.optim.Adam(model.parameters(), lr=scaled_lr(len(X)))

    def step() -> None:
        with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            loss = nn.functional.cross_entropy(runner(X), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    seconds = time_call(step, warmup=2, repeat=repeat)["median_s"]
    return len(X) / seconds


def explore(
    train_set, batch_sizes: tuple[int, ...], use_compile: bool, seed: int, repeat: int
) -> list[dict]:
    """Probe every layout x precision x batch size eagerly, then the best one compiled."""
    rows = []
    for batch_size in batch_sizes:
        X, y = train_set.tensors[0][:batch_size], train_set.tensors[1][:batch_size]
        for channels_last in (False, True):
            for dtype in (None, torch.bfloat16):
                ips = probe_step(X, y, channels_last, dtype, False, seed, repeat)
                rows.append(
                    {
                        "batch_size": batch_size,
                        "channels_last": channels_last,
                        "bf16": dtype is not None,
                        "compile": False,
                        "images_per_s": ips,
                    }
                )
    if use_compile:
        best = max(rows, key=lambda row: row["images_per_s"])
        batch_size = best["batch_size"]
        X, y = train_set.tensors[0][:batch_size], train_set.tensors[1][:batch_size]
        dtype = torch.bfloat16 if best["bf16"] else None
        ips = probe_step(X, y, best["channels_last"], dtype, True, seed, repeat)
        rows.append({**best, "compile": True, "images_per_s": ips})
    return rows


def describe(row: dict) -> str:
    parts = [
        "channels_last" if row["channels_last"] else "NCHW",
        "bf16 autocast" if row["bf16"] else "fp32",
    ]
    if row["compile"]:
        parts.append("compiled")
    return " + ".join(parts)


def export_for_ort(model: nn.Module, folder: Path) -> tuple[object, str]:
    """Export `model` with utils.deploy and load it in ONNX Runtime, as chapter 11 does."""
    path = export_onnx(model, folder / "model.onnx", torch.zeros(1, 1, 28, 28))
    return OnnxPredictor(path).predict, "utils.deploy + utils.onnx_predict"


def bench_inference(
    model: nn.Module, images: torch.Tensor, use_compile: bool, repeat: dict[int, int]
) -> dict:
    """Median seconds per call of eager, compiled and ONNX Runtime inference, by batch size."""
    model = model.eval()
    results: dict[str, dict[int, float]] = {"eager": {}, "onnxruntime": {}}
    compiled = torch.compile(model, dynamic=False) if use_compile else None
    if use_compile:
        results["compiled"] = {}
    with tempfile.TemporaryDirectory() as folder:
        predict, how = export_for_ort(model, Path(folder))
        for batch_size, calls in repeat.items():
            X = images[:batch_size].contiguous()
            X_np = X.numpy()
            with torch.inference_mode():
                expected = model(X)
                results["eager"][batch_size] = time_call(lambda X=X: model(X), 10, calls)[
                    "median_s"
                ]
                if compiled is not None:
                    got = compiled(X)  # compiles for this batch size
                    if not torch.allclose(got, expected, rtol=1e-4, atol=1e-4):
                        raise RuntimeError("compiled inference disagrees with eager")
                    t = time_call(lambda X=X: compiled(X), 10, calls)["median_s"]
                    results["compiled"][batch_size] = t
            got = torch.from_numpy(predict(X_np))
            if not torch.allclose(got, expected, rtol=1e-4, atol=1e-4):
                raise RuntimeError("ONNX Runtime disagrees with eager")
            results["onnxruntime"][batch_size] = time_call(
                lambda X_np=X_np: predict(X_np), 10, calls
            )["median_s"]
    return {"seconds": results, "onnx_export": how}


def format_report(
    train: list[TrainResult],
    probe: list[dict],
    inference: dict,
    epochs: int,
    num_train: int,
    num_test: int,
) -> str:
    """The tables the command prints, ratios against the article's recipe and against eager."""
    lines = [f"Training: {epochs} epoch(s) of {num_train} images, test accuracy on {num_test}"]
    lines.append(f"{'path':<68} {'batch':>5} {'images/s':>9} {'vs article':>10} {'test acc':>8}")
    base = train[0].images_per_s
    for r in train:
        extra = f"  (+{r.compile_s:.0f} s compile, once)" if r.compile_s else ""
        lines.append(
            f"{r.path:<68} {r.batch_size:>5} {r.images_per_s:>9.0f} "
            f"{r.images_per_s / base:>9.2f}x {r.test_acc:>8.3f}{extra}"
        )
    lines += ["", "Probe of one training step (images/s, median after warm-up):"]
    for row in probe:
        lines.append(
            f"  batch {row['batch_size']:>4}  {describe(row):<40} {row['images_per_s']:>7.0f}"
        )
    seconds = inference["seconds"]
    batch_sizes = list(seconds["eager"])
    lines += ["", f"Inference (ONNX export via {inference['onnx_export']}), ms per call:"]
    header = f"{'runtime':<12}" + "".join(
        f" {'batch ' + str(b):>10} {'vs eager':>9}" for b in batch_sizes
    )
    lines.append(header)
    for runtime, by_batch in seconds.items():
        cells = "".join(
            f" {1000 * by_batch[b]:>10.3f} {seconds['eager'][b] / by_batch[b]:>8.2f}x"
            for b in batch_sizes
        )
        lines.append(f"{runtime:<12}{cells}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Inductor imports torch.utils.cpp_extension, which warns "No CUDA runtime is found" on a
    # CUDA build of torch without a GPU: harmless for CPU code generation.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    torch.manual_seed(args.seed)
    train_set = fashion_mnist_tensors(True, limit=args.train_limit)
    test_set = fashion_mnist_tensors(False, limit=args.test_limit)
    test_loader = DataLoader(test_set, batch_size=1000)
    use_compile = not args.no_compile
    repeat = 3 if args.quick else 10
    batch_sizes = (CHAPTER05_BATCH,) if args.quick else PROBE_BATCHES

    def cached_loader(batch_size: int) -> DataLoader:
        return DataLoader(
            train_set, batch_size=batch_size, shuffle=True, generator=make_generator(args.seed)
        )

    print("probing layout x precision x batch size ...", file=sys.stderr, flush=True)
    probe = explore(train_set, batch_sizes, use_compile, args.seed, repeat)
    best = max(probe, key=lambda row: row["images_per_s"])
    print("training the three paths ...", file=sys.stderr, flush=True)
    train = [
        train_path(
            "article recipe (PIL + transforms, 2 workers, fp32, Adam 3e-4)",
            article_loader(args.train_limit, make_generator(args.seed)),
            test_loader,
            ARTICLE_LR,
            args.epochs,
            args.seed,
        ),
        train_path(
            "chapter 05 (cached tensors, channels_last, fp32, Adam 1e-3)",
            cached_loader(CHAPTER05_BATCH),
            test_loader,
            CHAPTER05_LR,
            args.epochs,
            args.seed,
            channels_last=True,  # chapter 05 measures it and keeps it where it wins, as on x86 CPUs
        ),
        train_path(
            f"fastest: cached + {describe(best)}, Adam {scaled_lr(best['batch_size']):g}",
            cached_loader(best["batch_size"]),
            test_loader,
            scaled_lr(best["batch_size"]),
            args.epochs,
            args.seed,
            best["channels_last"],
            torch.bfloat16 if best["bf16"] else None,
            best["compile"],
        ),
    ]
    print("timing inference ...", file=sys.stderr, flush=True)
    set_seed(args.seed)
    inference = bench_inference(
        SimpleCNN(),
        test_set.tensors[0],
        use_compile,
        {1: 50 if args.quick else 300, 64: 10 if args.quick else 100},
    )
    print(format_report(train, probe, inference, args.epochs, len(train_set), len(test_set)))
    if args.json is not None:
        payload = {
            "train": [asdict(r) for r in train],
            "probe": probe,
            "inference": inference,
            "epochs": args.epochs,
        }
        args.json.write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
