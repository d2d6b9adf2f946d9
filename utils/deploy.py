"""Export a trained model to one self-contained ONNX file, and quantize it. Taught in notebooks/12_onnx_deployment.ipynb.

The export side needs torch; running the exported file does not: see `utils.onnx_predict`
(`OnnxPredictor`), which uses ONNX Runtime and NumPy only.
"""

from __future__ import annotations

import logging
import tempfile
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    import onnx

# The opset the graph is written in. 18 is what the torch.export-based exporter builds natively
# (newer opsets are converted from it). A runtime's compatibility has two columns, the highest
# opset it implements and the highest IR version (file format version) it reads: the exporter
# writes IR 10, which ONNX Runtime reads from 1.18 on (1.14-1.17 run opset 18 but refuse IR 10;
# lower `ir_version` on the saved model for them, see notebooks/12_onnx_deployment.ipynb).
DEFAULT_OPSET = 18


def export_onnx(
    model: nn.Module,
    path: str | Path,
    example_input: torch.Tensor,
    dynamic_batch: bool = True,
    input_name: str = "images",
    output_name: str = "logits",
    opset_version: int = DEFAULT_OPSET,
) -> Path:
    """Export `model` (in eval mode) to `path` as one self-contained .onnx file; return the path.

    torch.export-based exporter (`dynamo=True`), pinned `opset_version`, axis 0 named "batch" and
    dynamic when `dynamic_batch` is true (a size-1 example is repeated to 2 so it stays dynamic).
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
    dynamic_shapes = None
    if dynamic_batch:
        dynamic_shapes = ({0: torch.export.Dim("batch")},)
        if example_input.shape[0] == 1:  # torch.export special-cases size 1: it may fix the axis
            example_input = torch.cat([example_input, example_input])
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
            opset_version=opset_version,
            external_data=False,
            verbose=False,
        )
    finally:
        model.train(was_training)
    return path


def quantize_dynamic_onnx(src: str | Path, dst: str | Path, **kwargs) -> Path:
    """ONNX Runtime's `quantize_dynamic(src, dst, **kwargs)`, made to work on any exported file.

    First it drops the file's shape hints (`graph.value_info`; PyTorch 2.8 leaves stale ones, which
    stop the quantizer) and it silences the quantizer's logged reminder about optional
    pre-processing; `src` is not changed. Returns `dst`. Taught in notebooks/12_onnx_deployment.ipynb
    (Going further: shape annotations and pre-processing).
    """
    import onnx
    from onnxruntime.quantization import quantize_dynamic

    model = onnx.load(str(src))
    del model.graph.value_info[:]  # hints only: the computation does not read them
    previous = logging.root.manager.disable
    with tempfile.TemporaryDirectory() as folder:
        prepared = Path(folder) / "prepared.onnx"
        onnx.save(model, str(prepared))
        logging.disable(max(previous, logging.WARNING))  # the reminder is logged as a warning
        try:
            quantize_dynamic(str(prepared), str(dst), **kwargs)
        finally:
            logging.disable(previous)
    return Path(dst)


def external_data_files(path: str | Path) -> list[str]:
    """Names of the side files an .onnx model needs for its weights ([] = self-contained)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    locations = set()
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            locations.update(e.value for e in tensor.external_data if e.key == "location")
    return sorted(locations)


def op_counts(model: str | Path | onnx.ModelProto) -> dict[str, int]:
    """How many nodes of each operator type an ONNX graph has (a path or an onnx.ModelProto)."""
    import onnx

    if isinstance(model, (str, Path)):
        model = onnx.load(str(model), load_external_data=False)
    return dict(sorted(Counter(node.op_type for node in model.graph.node).items()))
