"""Run an exported model with ONNX Runtime and NumPy only: no torch. Taught in notebooks/12_onnx_deployment.ipynb.

This module (and `utils/__init__.py`, which Python imports first) must never import torch, so the
predictor works in a slim deployment image. From the command line:

    python -m utils.onnx_predict MODEL.onnx IMAGES.npy --out LOGITS.npy

(IMAGES.npy: uint8 pixels; add --normalized for floats already normalised like training)

prints one JSON line: how many images, the predicted classes, and whether torch was imported.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

MEAN, STD = 0.5, 0.5  # the same Normalize((0.5,), (0.5,)) as utils.data: 0..255 -> -1..1


def preprocess(images: np.ndarray, normalized: bool = False) -> np.ndarray:
    """uint8 pixels (N, 28, 28) or (N, 1, 28, 28) -> normalised float32 (N, 1, 28, 28) in [-1, 1].

    Float input must already be normalised like training, (pixels / 255 - 0.5) / 0.5, and say so
    with `normalized=True`: a float array alone could be in 0..1 or 0..255 just as well.
    """
    images = np.asarray(images)
    if images.ndim == 3:
        images = images[:, None, :, :]  # (N, 28, 28) -> (N, 1, 28, 28)
    if images.ndim != 4:
        raise ValueError(
            f"expected images of shape (N, 28, 28) or (N, 1, 28, 28), got {images.shape}; "
            "for a single image add a batch axis: images[None]"
        )
    if images.dtype == np.uint8:
        if normalized:
            raise ValueError(
                "uint8 images are raw pixels 0..255, not normalised: drop normalized=True"
            )
        return ((images.astype(np.float32) / 255.0 - MEAN) / STD).astype(np.float32)
    if np.issubdtype(images.dtype, np.floating):
        if not normalized:
            raise TypeError(
                f"got {images.dtype} images without normalized=True. Pass raw uint8 pixels 0..255, "
                "or floats normalised like training, (pixels / 255 - 0.5) / 0.5, with "
                "normalized=True. Floats in 0..1 (ToTensor output): (x * 255).round().astype(np.uint8)"
            )
        if images.size and (images.min() < -1 - 1e-3 or images.max() > 1 + 1e-3):
            raise ValueError(
                f"normalised images lie in [-1, 1], got values in [{images.min():g}, "
                f"{images.max():g}]: pass raw pixels as uint8 instead"
            )
        return np.ascontiguousarray(images, dtype=np.float32)
    raise TypeError(
        f"expected uint8 pixels (0..255) or normalised floats, got dtype {images.dtype}; "
        "convert with images.astype(np.uint8) or pass normalised float32 with normalized=True"
    )


class OnnxPredictor:
    """Load an .onnx file once, then `predict(images) -> logits (N, num_classes)` as NumPy.

    `num_threads` sets ONNX Runtime's intra-op threads (None: its default, one per physical core).
    Float images need `normalized=True` (see `preprocess`).
    """

    def __init__(
        self, path: str | Path, num_threads: int | None = None, providers: list[str] | None = None
    ):
        import onnxruntime as ort  # imported here so `preprocess` works without it

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(
                f"no ONNX model at {path}; export one first with utils.deploy.export_onnx"
            )
        options = ort.SessionOptions()
        if num_threads is not None:
            if num_threads < 1:
                raise ValueError(f"num_threads must be >= 1 or None, got {num_threads}")
            options.intra_op_num_threads = num_threads
        self.session = ort.InferenceSession(
            str(path), sess_options=options, providers=providers or ["CPUExecutionProvider"]
        )
        self.input_name = self.session.get_inputs()[0].name
        self.output_name = self.session.get_outputs()[0].name

    def predict(self, images: np.ndarray, normalized: bool = False) -> np.ndarray:
        """Logits (N, num_classes) float32 for uint8 pixels, or normalised floats with normalized=True."""
        batch = preprocess(images, normalized=normalized)
        return self.session.run([self.output_name], {self.input_name: batch})[0]

    def predict_classes(self, images: np.ndarray, normalized: bool = False) -> np.ndarray:
        """Predicted class index (N,) int64: the argmax of the logits."""
        return self.predict(images, normalized=normalized).argmax(axis=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Predict with an ONNX model, without torch.")
    parser.add_argument("model", type=Path, help="the .onnx file")
    parser.add_argument(
        "images", type=Path, help=".npy of uint8 (N, 28, 28) or normalised float (N, 1, 28, 28)"
    )
    parser.add_argument(
        "--normalized", action="store_true", help="the images are floats normalised like training"
    )
    parser.add_argument("--out", type=Path, help="write the logits here as .npy")
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error(f"--batch-size must be >= 1, got {args.batch_size}")
    predictor = OnnxPredictor(args.model)
    images = np.load(args.images)
    logits = np.concatenate(
        [
            predictor.predict(images[i : i + args.batch_size], normalized=args.normalized)
            for i in range(0, len(images), args.batch_size)
        ]
    )
    if args.out is not None:
        np.save(args.out, logits)
    report = {
        "num_images": int(len(images)),
        "predictions": logits.argmax(axis=1).tolist(),
        "torch_imported": "torch" in sys.modules,
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
