"""Measure the training and inference paths the book teaches against this machine's own limit.

    python -m tools.bench                 the full run (several minutes on a laptop CPU)
    python -m tools.bench --quick         every path on a small subset: a smoke test (~20 s)
    python -m tools.bench --out DIR       also write DIR/bench.json, DIR/bench.md, DIR/bench.png
    python -m tools.bench --speedrun      time to 0.92 test accuracy: the speedrun's rows (tools/bench/speedrun.py)

The limit is what a float32 matrix multiply reaches on the device in the same run (and bfloat16
where the hardware has it natively). The model's cost is counted, not guessed: FlopCounterMode
counts SimpleCNN's FLOP per training image (forward and backward). Every path shows images/s,
its ratio to the baseline (a typical tutorial recipe: PIL transforms in the DataLoader, batch 64,
2 workers, float32) and its share of the limit, each as the median and the range over epochs
timed one by one. The paths take turns epoch by epoch, in reverse order every other round, so a
busy machine slows all of them alike, and the fastest path is decided by those epochs (its median
ratio to the baseline), never by a probe. A path that fails is reported as failed, with its error;
ratios to it are unavailable, and the other paths are still measured and reported.
Inference: eager vs compiled vs ONNX Runtime at batch 1 and 64, on the CPU.
Taught in notebooks/05_convolutions.ipynb, 09_mixed_precision.ipynb, 10_torch_compile.ipynb.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from tools.bench.inference import InferenceResult, bench_inference
from tools.bench.machine import bf16_native, describe_device, load_average
from tools.bench.plan import OTHER_BATCHES, QUICK_BACKEND, make_loader, plan_paths
from tools.bench.report import format_report, plot, summarize, to_json
from tools.bench.run import describe_error, progress, train_paths
from utils.data import fashion_mnist_tensors
from utils.device import get_device
from utils.models import SimpleCNN
from utils.seed import set_seed


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
        "--speedrun",
        action="store_true",
        help="measure the speedrun instead (final recipe, ablations, reference recipes); with --out FILE.json",
    )
    parser.add_argument(
        "--only",
        type=lambda text: [part for part in text.split(",") if part],
        default=None,
        help="--speedrun: only these rows (comma-separated), merged into the existing --out file",
    )
    parser.add_argument(
        "--seeds", type=int, default=5, help="--speedrun: seeds of the final recipe"
    )
    parser.add_argument(
        "--ablation-seeds", type=int, default=3, help="--speedrun: seeds of every other row"
    )
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
    if args.seeds < 1 or args.ablation_seeds < 1:
        parser.error("--seeds and --ablation-seeds must be >= 1")
    if args.only and not args.speedrun:
        parser.error("--only selects rows of --speedrun; add --speedrun")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    try:
        args.device = get_device(args.device)
    except (ValueError, RuntimeError) as err:
        parser.error(str(err))
    if args.speedrun:
        return args
    if args.epochs is None:
        args.epochs = 2 if args.quick else 3
    if args.quick:
        # One thread: a smoke test on a shared machine, where idle threads waiting for a busy
        # core would stall every parallel kernel; it checks that every path runs, not speed.
        args.threads = args.threads or 1
        args.train_limit = args.train_limit or 512
        args.test_limit = args.test_limit or 500
    return args


def measure_inference(images: torch.Tensor, args: argparse.Namespace) -> InferenceResult:
    """bench_inference with the run's settings; if it fails as a whole, a result that says why."""
    set_seed(args.seed)
    try:
        return bench_inference(
            SimpleCNN(),
            images,
            QUICK_BACKEND if args.quick else None,
            not args.no_compile,
            {1: 20, 64: 5} if args.quick else {1: 300, 64: 100},
            warmup=2 if args.quick else 10,
        )
    except Exception as err:  # the training report is still worth printing
        return InferenceResult({}, "none", [describe_error("inference", err)])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Inductor imports torch.utils.cpp_extension, which warns "No CUDA runtime is found" on a
    # CUDA build of torch without a GPU: harmless for CPU code generation.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = args.device
    if args.speedrun:
        from tools.bench.speedrun import RESULTS, format_table, run_speedrun

        out = (
            args.out if args.out is None or args.out.suffix == ".json" else args.out / RESULTS.name
        )
        results = run_speedrun(out, args.only, args.seeds, args.ablation_seeds, device, args.quick)
        print(format_table(results))
        return 0
    native_bf16 = bf16_native(device)
    train_set = fashion_mnist_tensors(True, limit=args.train_limit)
    test_set = fashion_mnist_tensors(False, limit=args.test_limit)
    on_device = TensorDataset(*(t.to(device) for t in train_set.tensors))
    loader_for = functools.partial(
        make_loader, train_set=train_set, on_device=on_device, seed=args.seed
    )
    paths, skipped = plan_paths(native_bf16, not args.no_compile, args.batches)
    load_start = load_average()
    progress("training")
    results, limits = train_paths(
        paths,
        loader_for,
        DataLoader(test_set, batch_size=1000),
        device,
        epochs=args.epochs,
        seed=args.seed,
        native_bf16=native_bf16,
        quick=args.quick,
    )
    progress("timing inference")
    inference = measure_inference(test_set.tensors[0], args)
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
