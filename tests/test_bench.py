"""utils.bench: argument checks, the report's ratios, and a --quick smoke run of the command."""

import subprocess
import sys

import pytest

from utils.bench import TrainResult, describe, format_report, parse_args


def test_defaults_and_quick():
    args = parse_args([])
    assert (args.epochs, args.train_limit, args.no_compile, args.quick) == (1, None, False, False)
    quick = parse_args(["--quick"])
    assert (quick.train_limit, quick.test_limit, quick.no_compile) == (1024, 500, True)
    assert parse_args(["--quick", "--train-limit", "256"]).train_limit == 256


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--epochs", "0"], "--epochs must be >= 1, got 0"),
        (["--train-limit", "0"], "--train-limit must be >= 1, got 0"),
        (["--test-limit", "-3"], "--test-limit must be >= 1, got -3"),
    ],
)
def test_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_describe():
    row = {"channels_last": True, "bf16": True, "compile": True}
    assert describe(row) == "channels_last + bf16 autocast + compiled"
    assert describe({"channels_last": False, "bf16": False, "compile": False}) == "NCHW + fp32"


def test_report_ratios():
    train = [
        TrainResult("article", 64, 100.0, 0.80),
        TrainResult("chapter 05", 128, 250.0, 0.81),
        TrainResult("fastest", 256, 500.0, 0.82, compile_s=12.0),
    ]
    probe = [
        {
            "batch_size": 256,
            "channels_last": True,
            "bf16": True,
            "compile": False,
            "images_per_s": 480.0,
        }
    ]
    inference = {
        "seconds": {"eager": {1: 0.004, 64: 0.02}, "onnxruntime": {1: 0.001, 64: 0.01}},
        "onnx_export": "utils.deploy + utils.onnx_predict",
    }
    text = format_report(train, probe, inference, 1, 60000, 10000)
    lines = text.splitlines()
    assert lines[0] == "Training: 1 epoch(s) of 60000 images, test accuracy on 10000"
    assert "1.00x" in lines[2] and "2.50x" in lines[3] and "5.00x" in lines[4]
    assert "(+12 s compile, once)" in lines[4]
    ort = next(line for line in lines if line.startswith("onnxruntime"))
    assert ort.split() == ["onnxruntime", "1.000", "4.00x", "10.000", "2.00x"]


def test_quick_command_runs():
    result = subprocess.run(
        [sys.executable, "-m", "utils.bench", "--quick"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "article recipe (PIL + transforms, 2 workers, fp32, Adam 3e-4)" in out
    assert "chapter 05 (cached tensors, channels_last, fp32, Adam 1e-3)" in out
    assert "fastest: cached + " in out
    assert out.count("x") >= 6
    assert any(line.startswith("onnxruntime") for line in out.splitlines())
