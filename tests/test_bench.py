"""tools.bench: argument checks, spreads and ratios, the FLOP count, the report, failing paths
and runtimes (base paths included), and a --quick run."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tools.bench import run
from tools.bench.__main__ import parse_args
from tools.bench.inference import InferenceResult
from tools.bench.machine import Limits, training_flop_per_image
from tools.bench.plan import BASELINE, plan_paths
from tools.bench.report import (
    Spread,
    fastest,
    format_report,
    paired_ratios,
    plot,
    summarize,
    to_json,
)
from tools.bench.run import PathResult, images_per_epoch, train_paths
from utils.data import TensorBatches
from utils.device import get_device
from utils.models import SimpleCNN

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
    results, limits = make_results()
    results[3].images_per_s = [310.0, 140.0]  # sliced-256 vs sliced: faster, then slower
    by_key = {row.key: row for row in summarize(results, limits)}
    assert by_key["compiled"].verdict == "compiled slower in all 2 rounds"
    assert by_key["compiled"].pays is False
    assert by_key["sliced-tuned"].verdict == "sliced-tuned faster in all 2 rounds"
    assert by_key["sliced-tuned"].pays is True
    assert by_key["sliced-256"].verdict == "within the noise: sliced-256 faster in 1 of 2 rounds"
    assert by_key["sliced-256"].pays is False
    assert by_key["baseline"].verdict is None and by_key["baseline"].pays is None


def test_limits_and_summary():
    results, limits = make_results()
    assert limits.images_per_s() == pytest.approx(15e9 / 25e6)  # median 15 GFLOP/s
    # 400 * 25e6 / 20e9, then bf16 measured against the bf16 limit
    assert limits.shares(results[3].images_per_s) == pytest.approx([0.5, 0.5])
    assert limits.shares(results[7].images_per_s, bf16=True) == pytest.approx([0.4375, 0.4375])
    rows = summarize(results, limits)
    by_key = {row.key: row for row in rows}
    assert by_key["baseline"].vs_baseline == Spread(1.0, 1.0, 1.0)
    assert by_key["dataloader"].vs_baseline.median == pytest.approx(2.5)
    assert by_key["compiled"].vs_base.median == pytest.approx(0.9)
    assert by_key["sliced-tuned"].vs_base.median == pytest.approx(1.1)
    assert fastest(rows).key == "bf16-compiled"
    assert math.isclose(by_key["bf16-compiled"].vs_baseline.median, 8.0)


INFERENCE = InferenceResult(
    {"eager": {1: 0.004, 64: 0.02}, "onnxruntime": {1: 0.001, 64: 0.01}},
    "utils.deploy + utils.onnx_predict",
)
MACHINE = {
    "device": "cpu",
    "name": "Test CPU, instruction set AVX2, 2 threads (inter-op 2)",
    "bf16_native": False,
    "epochs": 2,
    "num_train": 60000,
    "num_test": 10000,
}


def table(text: str) -> dict[str, list[str]]:
    """The tables' rows by their first cell (up to any ':'), as lists of stripped cells."""
    rows = [line.split("|")[1:-1] for line in text.splitlines() if line.startswith("| ")]
    return {cells[0].strip().split(":")[0]: [c.strip() for c in cells] for cells in rows}


def test_report_text():
    results, limits = make_results()
    inference, machine = INFERENCE, MACHINE
    text = format_report(summarize(results, limits), limits, inference, machine, ["bf16: none"])
    assert "instruction set AVX2" in text and "bfloat16 native: no" in text
    assert "Limit: float32 matmul (2048x2048) 15 GFLOP/s (10-20), i.e. 600 images/s" in text
    row = table(text)
    dataloader = row["cached tensors in a DataLoader (chapter 03), channels_last, float32"]
    assert dataloader[3:5] == ["2.50x (2.50-2.50)", "2.50x (2.50-2.50)"]
    assert row["sliced batches, float32, batch 256, learning rate 0.002"][5] == "50% (50-50)"
    compiled = row["sliced batches, float32, torch.compile (+12 s compile, once)"]
    assert compiled[4] == "0.90x (0.90-0.90)"
    assert (
        "Not a win here: compiled runs at 0.90x (0.90-0.90) of sliced, the path it changes one "
        "thing of (compiled slower in all 2 rounds)." in text
    )
    assert "Not a win here: sliced-tuned" not in text and "Failed" not in text
    best = "sliced batches, bfloat16 autocast, torch.compile: 8.00x (8.00-8.00) the baseline"
    assert f"Fastest taught path, by measured epochs: {best}" in text
    assert "Skipped: bf16: none" in text and "article" not in text
    assert row["onnxruntime"] == [
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


class FakeRun:
    """A PathRun that trains nothing: 100 images/s times its place in the plan, or fails as told."""

    fail: dict[str, object] = {}  # path key -> "prepare" or the round (1, 2, ...) to fail in

    def __init__(self, spec, loader, device, seed, backend):
        if self.fail.get(spec.key) == "prepare":
            raise RuntimeError(f"{spec.key} broke")
        self.spec, self.result, self.rounds = spec, PathResult(spec, test_acc=0.9), 0
        keys = [p.key for p in plan_paths(native_bf16=True, use_compile=True)[0]]
        self.rate = 100.0 * (1 + keys.index(spec.key))

    def epoch(self) -> float:
        self.rounds += 1
        if self.fail.get(self.spec.key) == self.rounds:
            # Only the last line of an error is reported (a compile error can be pages long).
            raise RuntimeError(f"index 6422592 is out of bounds\nin {self.spec.key}")
        self.result.images_per_s.append(self.rate)
        return self.rate

    def finish(self, test_loader):
        return self.result


def fake_train(monkeypatch, fail: dict[str, object]) -> tuple[list[PathResult], Limits]:
    """train_paths over every path, FakeRun failing as `fail` says; limits 20 and 40 GFLOP/s."""

    def limits_of_round(limits, device, native_bf16):
        limits.float32.append(20.0)
        limits.bfloat16.append(40.0)

    monkeypatch.setattr(run, "PathRun", FakeRun)
    monkeypatch.setattr(FakeRun, "fail", fail)
    monkeypatch.setattr(run, "measure_limits", limits_of_round)
    monkeypatch.setattr(run, "training_flop_per_image", lambda: 25e6)
    paths, _ = plan_paths(native_bf16=True, use_compile=True)
    device = torch.device("cpu")
    return train_paths(
        paths, lambda spec: None, None, device, epochs=2, seed=0, native_bf16=True, quick=True
    )


def test_a_failing_path_is_reported_and_the_others_carry_on(monkeypatch):
    results, _ = fake_train(monkeypatch, {"bf16-compiled": "prepare", "compiled": 1})
    paths, _ = plan_paths(native_bf16=True, use_compile=True)
    assert [r.spec.key for r in results] == [p.key for p in paths]  # failed ones included
    ran = [r for r in results if r.error is None]
    assert [r.spec.key for r in ran] == [p.key for p in paths if "compiled" not in p.key]
    assert all(len(r.images_per_s) == 2 for r in ran)
    assert {r.spec.key: r.error for r in results if r.error} == {
        "compiled": "in round 1 (RuntimeError: in compiled)",
        "bf16-compiled": "while preparing (RuntimeError: bf16-compiled broke)",
    }


def report_of(results: list[PathResult], limits: Limits) -> str:
    rows = summarize(results, limits)
    return format_report(rows, limits, INFERENCE, MACHINE, [])


@pytest.mark.parametrize("when", ["prepare", 2])
def test_a_failing_baseline_is_reported_and_no_ratio_to_it_is_invented(monkeypatch, when):
    results, limits = fake_train(monkeypatch, {"baseline": when})
    assert all(row.vs_baseline is None for row in summarize(results, limits))
    text = report_of(results, limits)
    row = table(text)
    assert row["baseline"][2:] == ["failed", "-", "-", "-", "-"]
    paths = [cells for cells in row.values() if cells[1].isdigit()]  # the batch column
    assert len(paths) == len(results)
    assert all(cells[3] == "unavailable" for cells in paths[1:])  # vs baseline
    assert row["cached tensors in a DataLoader (chapter 03), channels_last, float32"][4] == (
        "unavailable"  # its base is the baseline
    )
    assert row["sliced batches, float32, torch.compile"][4] == "2.33x (2.33-2.33)"  # 700 / 300
    error = {
        "prepare": "while preparing (RuntimeError: baseline broke)",
        2: "in round 2 (RuntimeError: in baseline)",
    }[when]
    assert f"Failed: baseline, {error}; every ratio to the baseline is unavailable." in text
    assert "Fastest taught path, by measured epochs: unavailable" in text
    assert row["onnxruntime"][2] == "4.00x"  # the inference table still prints
    payload = to_json(summarize(results, limits), results, limits, INFERENCE, MACHINE, [])
    assert payload["fastest"] is None and payload["paths"][0]["error"] == error
    json.dumps(payload)


def test_a_failing_sliced_base_leaves_its_changes_unavailable(monkeypatch, tmp_path):
    results, limits = fake_train(monkeypatch, {"sliced": 1})
    text = report_of(results, limits)
    row = table(text)
    sliced = row["chapter 06's loader"]
    assert sliced[2:] == ["failed", "-", "-", "-", "-"]
    assert "Failed: sliced, in round 1 (RuntimeError: in sliced); the ratios of " in text
    assert "sliced-64, sliced-256, sliced-tuned, compiled, bf16 to it are unavailable." in text
    tuned = row["sliced batches, float32, ReLU after pooling (chapter 06's model)"]
    assert tuned[3:5] == ["6.00x (6.00-6.00)", "unavailable"]  # 600 / 100 vs the baseline
    assert row["sliced batches, bfloat16 autocast"][4] == "unavailable"
    assert row["sliced batches, bfloat16 autocast, torch.compile"][4] == "1.50x (1.50-1.50)"
    best = "sliced batches, bfloat16 autocast, torch.compile: 12.00x (12.00-12.00) the baseline"
    assert f"Fastest taught path, by measured epochs: {best}" in text
    plot(summarize(results, limits), limits, tmp_path / "bench.png")  # the bars of those that ran
    assert (tmp_path / "bench.png").stat().st_size > 0


def test_failing_inference_runtimes_are_reported_and_eager_is_still_timed(monkeypatch):
    from tools.bench import inference

    def broken_export(model, folder):
        raise RuntimeError("no exporter here")

    monkeypatch.setattr(inference, "export_for_ort", broken_export)
    monkeypatch.setattr(inference.torch, "compile", lambda model, **options: lambda X: model(X) + 1)
    result = inference.bench_inference(
        SimpleCNN(), torch.zeros(4, 1, 28, 28), None, True, {1: 2, 4: 2}, warmup=0
    )
    assert list(result.seconds) == ["eager"] and list(result.seconds["eager"]) == [1, 4]
    assert result.failures == [
        "onnxruntime inference, while exporting (RuntimeError: no exporter here)",
        "compiled inference, at batch 1 (ValueError: its logits disagree with eager (beyond "
        "1e-4)); not timed",
    ]
    results, limits = make_results()
    text = format_report(summarize(results, limits), limits, result, MACHINE, [])
    assert "| eager " in text and "Failed: compiled inference, at batch 1" in text


def test_inference_that_fails_as_a_whole_still_leaves_a_report(monkeypatch):
    from tools.bench import __main__ as command

    def broken(*args, **kwargs):
        raise RuntimeError("eager broke")

    monkeypatch.setattr(command, "bench_inference", broken)
    result = command.measure_inference(torch.zeros(1, 1, 28, 28), parse_args(["--quick"]))
    assert result.failures == ["inference (RuntimeError: eager broke)"]
    results, limits = make_results()
    text = format_report(summarize(results, limits), limits, result, MACHINE, [])
    assert "Inference on the CPU: not measured." in text
    assert "Failed: inference (RuntimeError: eager broke)" in text
