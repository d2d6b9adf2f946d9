"""Inference on the CPU: eager vs compiled vs ONNX Runtime, median seconds per call at each batch."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from tools.bench.run import describe_error
from utils.deploy import export_onnx
from utils.onnx_predict import OnnxPredictor
from utils.timing import time_call


@dataclass
class InferenceResult:
    """Median seconds per call by runtime, then batch size; `failures` says what was not timed."""

    seconds: dict[str, dict[int, float]]
    onnx_export: str
    failures: list[str] = field(default_factory=list)


def export_for_ort(model: nn.Module, folder: Path) -> Callable:
    """Export `model` with utils.deploy and load it in ONNX Runtime, as chapter 12 does."""
    path = export_onnx(model, folder / "model.onnx", torch.zeros(1, 1, 28, 28))
    predictor = OnnxPredictor(path)

    def predict(images):  # the normalised float arrays of utils.data
        return predictor.predict(images, normalized=True)

    return predict


def bench_inference(
    model: nn.Module,
    images: torch.Tensor,
    compile_backend: str | None,
    use_compile: bool,
    repeat: dict[int, int],
    warmup: int = 10,
) -> InferenceResult:
    """Median seconds per call of eager, compiled and ONNX Runtime inference on the CPU.

    A runtime that raises, or whose logits disagree with eager's, is reported in `failures` and
    left out at every batch size; the other runtimes are still measured.
    """
    model = model.cpu().eval()
    runtimes: dict[str, Callable] = {"eager": model}
    failures: list[str] = []
    if use_compile:
        options = {"backend": compile_backend} if compile_backend else {}
        runtimes["compiled"] = torch.compile(model, dynamic=False, **options)
    seconds: dict[str, dict[int, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        try:
            runtimes["onnxruntime"] = export_for_ort(model, Path(folder))
        except Exception as err:  # the other runtimes are still worth measuring
            failures.append(f"onnxruntime inference, {describe_error('while exporting', err)}")
        for batch_size, calls in repeat.items():
            X = images[:batch_size].contiguous()
            with torch.inference_mode():
                expected = model(X)
                for name, runtime in list(runtimes.items()):
                    batch = X.numpy() if name == "onnxruntime" else X  # ORT takes NumPy arrays
                    try:
                        got = torch.as_tensor(runtime(batch))  # compiles for this batch size
                        if not torch.allclose(got, expected, rtol=1e-4, atol=1e-4):
                            raise ValueError("its logits disagree with eager (beyond 1e-4)")
                        timed = time_call(
                            lambda f=runtime, b=batch: f(b), warmup=warmup, repeat=calls
                        )
                    except Exception as err:
                        when = describe_error(f"at batch {batch_size}", err)
                        failures.append(f"{name} inference, {when}; not timed")
                        del runtimes[name]
                        seconds.pop(name, None)
                        continue
                    seconds.setdefault(name, {})[batch_size] = timed["median_s"]
    return InferenceResult(seconds, "utils.deploy + utils.onnx_predict", failures)
