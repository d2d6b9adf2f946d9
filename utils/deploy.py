"""Export a trained model to one self-contained ONNX file. Taught in notebooks/11_onnx_deployment.ipynb.

The export side needs torch; running the exported file does not: see `utils.onnx_predict`
(`OnnxPredictor`), which uses ONNX Runtime and NumPy only.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


def export_onnx(
    model: nn.Module,
    path: str | Path,
    example_input: torch.Tensor,
    dynamic_batch: bool = True,
    input_name: str = "images",
    output_name: str = "logits",
) -> Path:
    """Export `model` (in eval mode) to `path` as a single .onnx file; return the path.

    Uses the torch.export-based exporter (`dynamo=True`), weights stored inside the file
    (`external_data=False`), axis 0 named "batch" and dynamic when `dynamic_batch` is true.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(example_input, torch.Tensor):
        raise TypeError(
            f"example_input must be a torch.Tensor shaped like one real batch, e.g. "
            f"torch.zeros(1, 1, 28, 28); got {type(example_input).__name__}"
        )
    if example_input.ndim == 0:
        raise ValueError("example_input needs a batch axis first, e.g. shape (1, 1, 28, 28)")
    path = Path(path)
    if path.suffix != ".onnx":
        raise ValueError(f"the file name should end in .onnx, got {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    dynamic_shapes = ({0: torch.export.Dim("batch")},) if dynamic_batch else None
    was_training = model.training
    model.eval()  # export what inference runs: Dropout off, BatchNorm uses running statistics
    try:
        torch.onnx.export(
            model,
            (example_input,),
            str(path),
            dynamo=True,
            input_names=[input_name],
            output_names=[output_name],
            dynamic_shapes=dynamic_shapes,
            external_data=False,
            verbose=False,
        )
    finally:
        model.train(was_training)
    return path


def external_data_files(path: str | Path) -> list[str]:
    """Names of the side files an .onnx model needs for its weights ([] = self-contained)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    locations = set()
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            locations.update(e.value for e in tensor.external_data if e.key == "location")
    return sorted(locations)
