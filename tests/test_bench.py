"""tools.bench: argument checks, spreads and ratios, the FLOP count, the report, and a --quick run."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tools.bench import (
    BASELINE,
    Limits,
    PathResult,
    Spread,
    fastest,
    format_report,
    images_per_epoch,
    paired_ratios,
    parse_args,
    plan_paths,
    plot,
    summarize,
    training_flop_per_image,
    verdict,
)
from utils.data import TensorBatches
from utils.device import get_device

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_defaults_and_quick():
    args = parse_args([])
    assert (args.epochs, args.threads, args.train_limit, args.quick) == (3, None, None, False)
    assert args.device == get_device()
    quick = parse_args(["--quick"])
    assert (quick.epochs, quick.threads, quick.train_limit, quick.test_limit) == (2, 1, 512, 500)
    assert parse_args(["--quick", "--train-limit", "256", "--epochs", "1"]).train_limit == 256
    assert parse_args(["--device", "cpu"]).device == torch.device("cpu")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--epochs", "0"], "--epochs must be >= 1, got 0"),
        (["--train-limit", "0"], "--train-limit must be >= 1, got 0"),
        (["--test-limit", "-3"], "--test-limit must be >= 1, got -3"),
        (["--threads", "0"], "--threads must be >= 1, got 0"),
        (["--seed", "-1"], "--seed must be >= 0, got -1"),
        (["--device", "tpu"], "Unknown device 'tpu'"),
    ],
)
def test_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_spread_and_paired_ratios():
    spread = Spread.of([3.0, 1.0, 2.0])
    assert (spread.median, spread.low, spread.high) == (2.0, 1.0, 3.0)
    assert Spread.of([4200.4, 3900.0, 4400.0]).format() == "4200 (3900-4400)"
    assert Spread.of([2.5, 2.4]).format("{:.2f}", "x") == "2.45x (2.40-2.50)"
    with pytest.raises(ValueError, match="at least one"):
        Spread.of([])
    assert paired_ratios([200.0, 300.0], [100.0, 200.0]) == [2.0, 1.5]
    with pytest.raises(ValueError, match="as many values as bases"):
        paired_ratios([1.0], [1.0, 2.0])


def test_flop_per_image_matches_the_arithmetic():
    conv1, conv2 = 2 * 28 * 28 * 32 * 9, 2 * 14 * 14 * 64 * 32 * 9  # 2 * outputs * (C_in * 3 * 3)
    fc1, fc2 = 2 * 3136 * 128, 2 * 128 * 10
    forward = conv1 + conv2 + fc1 + fc2
    backward = conv1 + 2 * (
        conv2 + fc1 + fc2
    )  # the input needs no gradient: conv1 only for weights
    assert training_flop_per_image(batch_size=2) == forward + backward == 24_995_328


def test_plan_paths():
    paths, skipped = plan_paths(native_bf16=True, use_compile=True)
    keys = [p.key for p in paths]
    assert keys == [
        "baseline",
        "dataloader",
        "sliced",
        "sliced-64",
        "sliced-256",
        "sliced-tuned",
        "compiled",
        "bf16",
        "bf16-64",
        "bf16-256",
        "bf16-tuned",
        "bf16-compiled",
    ]
    assert paths[0].label == f"baseline: {BASELINE}" and skipped == []
    assert "article" not in " ".join(p.label for p in paths)
    for index, path in enumerate(paths[1:], start=1):
        assert path.base in keys[:index]  # each path changes one thing of one measured before it
    by_key = {p.key: p for p in paths}
    assert (by_key["sliced-256"].lr, by_key["bf16-256"].batch_size, by_key["compiled"].lr) == (
        2e-3,
        256,
        1e-3,
    )
    assert by_key["sliced-64"].lr == 5e-4
    assert [p.bf16 for p in paths] == [False] * 7 + [True] * 5
    assert [p.key for p in paths if p.tuned] == ["sliced-tuned", "bf16-tuned"]
    assert by_key["sliced-tuned"].base == "sliced" and by_key["bf16-tuned"].base == "bf16"
    paths, skipped = plan_paths(native_bf16=False, use_compile=False, batches=[128])
    assert [p.key for p in paths] == ["baseline", "dataloader", "sliced", "sliced-tuned"]
    assert any("not native" in reason for reason in skipped)
    assert any("--no-compile" in reason for reason in skipped)


@pytest.mark.parametrize(("drop_last", "images"), [(False, 10), (True, 9)])
def test_images_per_epoch(drop_last, images):
    X, y = torch.arange(10.0).reshape(10, 1), torch.arange(10)
    loader = TensorBatches(X, y, 3, torch.Generator().manual_seed(0), drop_last=drop_last)
    assert images_per_epoch(loader) == images == sum(len(yb) for _, yb in loader)


def make_results() -> tuple[list[PathResult], Limits]:
    paths, _ = plan_paths(native_bf16=True, use_compile=True, batches=[256])
    rates = {  # images/s in two rounds
        "baseline": [100.0, 50.0],
        "dataloader": [250.0, 125.0],
        "sliced": [300.0, 150.0],
        "sliced-256": [400.0, 200.0],
        "sliced-tuned": [330.0, 165.0],
        "compiled": [270.0, 135.0],
        "bf16": [600.0, 300.0],
        "bf16-256": [700.0, 350.0],
        "bf16-tuned": [660.0, 330.0],
        "bf16-compiled": [800.0, 400.0],
    }
    results = [
        PathResult(p, rates[p.key], test_acc=0.9, compile_s=12.0 * bool(p.compile_mode))
        for p in paths
    ]
    limits = Limits(
        flop_per_image=25e6, matmul_size=2048, float32=[20.0, 10.0], bfloat16=[40.0, 20.0]
    )
    return results, limits


def test_verdict_needs_every_epoch_to_agree():
    assert verdict(Spread(0.9, 0.8, 0.99)) == "loses"
    assert verdict(Spread(1.2, 1.01, 1.3)) == "wins"
    assert verdict(Spread(0.99, 0.83, 1.02)) == "within noise"


def test_limits_and_summary():
    results, limits = make_results()
    assert limits.images_per_s() == pytest.approx(15e9 / 25e6)  # median 15 GFLOP/s
    assert limits.shares(results[3]) == pytest.approx([0.5, 0.5])  # 400 * 25e6 / 20e9
    assert limits.shares(results[7]) == pytest.approx([0.4375, 0.4375])  # bf16 vs the bf16 limit
    rows = summarize(results, limits)
    by_key = {row["key"]: row for row in rows}
    assert by_key["baseline"]["vs_baseline"] == Spread(1.0, 1.0, 1.0)
    assert by_key["dataloader"]["vs_baseline"].median == pytest.approx(2.5)
    assert by_key["compiled"]["vs_base"].median == pytest.approx(0.9)
    assert by_key["sliced-tuned"]["vs_base"].median == pytest.approx(1.1)
    assert fastest(rows)["key"] == "bf16-compiled"
    assert math.isclose(by_key["bf16-compiled"]["vs_baseline"].median, 8.0)


def test_report_text():
    results, limits = make_results()
    inference = {
        "seconds": {"eager": {1: 0.004, 64: 0.02}, "onnxruntime": {1: 0.001, 64: 0.01}},
        "onnx_export": "utils.deploy + utils.onnx_predict",
    }
    machine = {
        "device": "cpu",
        "name": "Test CPU, instruction set AVX2, 2 threads (inter-op 2)",
        "bf16_native": False,
        "epochs": 2,
        "num_train": 60000,
        "num_test": 10000,
    }
    text = format_report(summarize(results, limits), limits, inference, machine, ["bf16: none"])
    lines = text.splitlines()
    assert "instruction set AVX2" in text and "bfloat16 native: no" in text
    assert "Limit: float32 matmul (2048x2048) 15 GFLOP/s (10-20), i.e. 600 images/s" in text
    row = {
        line.split("|")[1].strip().split(":")[0]: line for line in lines if line.startswith("| ")
    }
    assert (
        "2.50x (2.50-2.50)"
        in row["cached tensors in a DataLoader (chapter 03), channels_last, float32"]
    )
    assert "50% (50-50)" in row["sliced batches, float32, batch 256, learning rate 0.002"]
    compiled = row["sliced batches, float32, torch.compile (+12 s compile, once)"]
    assert "0.90x (0.90-0.90) loses" in compiled
    assert "Loses here: compiled runs at 0.90x (0.90-0.90) of sliced" in text
    best = "sliced batches, bfloat16 autocast, torch.compile: 8.00x (8.00-8.00) the baseline"
    assert f"Fastest taught path, by measured epochs: {best}" in text
    assert "Skipped: bf16: none" in text and "article" not in text
    ort = next(line for line in lines if line.startswith("| onnxruntime"))
    assert [cell.strip() for cell in ort.split("|")[1:-1]] == [
        "onnxruntime",
        "1.000",
        "4.00x",
        "10.000",
        "2.00x",
    ]


def test_plot_writes_png(tmp_path):
    results, limits = make_results()
    plot(summarize(results, limits), limits, tmp_path / "bench.png")
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_quick_command_runs(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tools.bench", "--quick", "--device", "cpu", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert f"baseline: {BASELINE}" in out
    assert "instruction set" in out and "Limit: float32 matmul" in out
    assert "Fastest taught path, by measured epochs: " in out
    assert any(line.startswith("| onnxruntime") for line in out.splitlines())
    assert (tmp_path / "bench.md").read_text() == out
    payload = json.loads((tmp_path / "bench.json").read_text())
    keys = [path["key"] for path in payload["paths"]]
    assert keys[:3] == ["baseline", "dataloader", "sliced"] and payload["fastest"] in keys[1:]
    assert all(len(path["epochs_images_per_s"]) == 2 for path in payload["paths"])
    assert (tmp_path / "bench.png").stat().st_size > 0


def test_a_failing_path_is_reported_and_the_others_carry_on(monkeypatch):
    import tools.bench as bench

    class FakeRun:
        def __init__(self, spec, loader, device, seed, backend):
            if spec.key == "bf16-compiled":
                raise RuntimeError("compile broke")
            self.spec, self.result = spec, PathResult(spec)

        def epoch(self) -> float:
            if self.spec.key == "compiled":
                raise RuntimeError("index 6422592 is out of bounds")
            self.result.images_per_s.append(100.0)
            return 100.0

        def finish(self, test_loader):
            return self.result

    monkeypatch.setattr(bench, "PathRun", FakeRun)
    monkeypatch.setattr(bench, "measure_limits", lambda limits, device, native: None)
    paths, _ = plan_paths(native_bf16=True, use_compile=True)
    args = parse_args(["--quick", "--epochs", "2"])
    results, _, failures = bench.train_paths(
        paths, lambda spec: None, None, args.device, args, True
    )
    assert [r.spec.key for r in results] == [p.key for p in paths if "compiled" not in p.key]
    assert all(r.images_per_s == [100.0, 100.0] for r in results)
    assert failures == [
        "bf16-compiled: failed while preparing (RuntimeError: compile broke)",
        "compiled: failed in round 1 (RuntimeError: index 6422592 is out of bounds)",
    ]
