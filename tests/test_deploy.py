"""Tests of utils.deploy (ONNX export) and utils.onnx_predict (torch-free predictor)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

from utils import onnx_predict
from utils.data import MEAN, STD, fashion_mnist_tensors, load_split
from utils.deploy import (
    DEFAULT_OPSET,
    export_onnx,
    external_data_files,
    op_counts,
    quantize_dynamic_onnx,
)
from utils.models import SimpleCNN
from utils.onnx_predict import OnnxPredictor, preprocess
from utils.seed import set_seed

NUM_IMAGES = 200


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A SimpleCNN (seeded, with non-trivial BatchNorm statistics) and its exported file."""
    set_seed(0)
    model = SimpleCNN()
    images = fashion_mnist_tensors(train=True, limit=256).tensors[0]
    with torch.no_grad():  # one forward in train mode moves BatchNorm's running statistics
        model(images)
    model.train()
    path = export_onnx(model, tmp_path_factory.mktemp("onnx") / "cnn.onnx", images[:1])
    return model, path


@pytest.fixture(scope="module")
def test_images():
    images, labels = load_split(train=False)
    return images[:NUM_IMAGES].numpy(), labels[:NUM_IMAGES].numpy()


def torch_logits(model: nn.Module, pixels: np.ndarray) -> np.ndarray:
    x = (torch.from_numpy(pixels).float().unsqueeze(1) / 255.0 - MEAN) / STD
    model.eval()
    with torch.no_grad():
        return model(x).numpy()


def test_export_restores_training_mode_and_writes_one_file(exported):
    model, path = exported
    assert model.training  # export switched to eval and back
    assert path.suffix == ".onnx" and path.is_file()
    assert [p.name for p in path.parent.iterdir()] == ["cnn.onnx"]
    assert external_data_files(path) == []


def test_onnx_runtime_matches_torch_on_real_images(exported, test_images):
    model, path = exported
    pixels, _ = test_images
    expected = torch_logits(model, pixels)
    got = OnnxPredictor(path).predict(pixels)
    assert got.shape == (NUM_IMAGES, 10) and got.dtype == np.float32
    assert np.abs(got - expected).max() <= 1e-4
    assert (got.argmax(1) == expected.argmax(1)).all()


def test_dynamic_batch_axis_accepts_1_and_64(exported, test_images):
    _, path = exported
    predictor = OnnxPredictor(path, num_threads=1)
    pixels, _ = test_images
    assert predictor.predict(pixels[:1]).shape == (1, 10)
    assert predictor.predict(pixels[:64]).shape == (64, 10)
    assert predictor.predict_classes(pixels[:64]).shape == (64,)
    normalised = preprocess(pixels[:64])
    np.testing.assert_array_equal(
        predictor.predict(normalised, normalized=True), predictor.predict(pixels[:64])
    )


def test_export_pins_the_opset_and_keeps_a_batch_of_1_example_dynamic(exported, tmp_path):
    import onnx

    _, path = exported  # exported from a batch-1 example, which export_onnx repeats to 2
    graph = onnx.load(str(path))
    assert [o.version for o in graph.opset_import if o.domain in ("", "ai.onnx")] == [DEFAULT_OPSET]
    assert graph.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
    newer = export_onnx(
        model, tmp_path / "opset20.onnx", torch.zeros(1, 1, 28, 28), opset_version=20
    )
    assert [o.version for o in onnx.load(str(newer)).opset_import if o.domain == ""] == [20]


def test_op_counts_of_the_exported_cnn(exported):
    _, path = exported
    counts = op_counts(path)
    assert counts["Conv"] == 2 and counts["Relu"] == 3 and counts["MaxPool"] == 2
    assert list(counts) == sorted(counts)
    import onnx

    assert op_counts(onnx.load(str(path))) == counts


def test_fixed_batch_export_rejects_other_batch_sizes(tmp_path):
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
    path = export_onnx(
        model, tmp_path / "fixed.onnx", torch.zeros(2, 1, 28, 28), dynamic_batch=False
    )
    predictor = OnnxPredictor(path)
    assert predictor.predict(np.zeros((2, 1, 28, 28), np.uint8)).shape == (2, 10)
    with pytest.raises(Exception, match="(?i)dimension|shape"):
        predictor.predict(np.zeros((3, 1, 28, 28), np.uint8))


def test_external_data_files_finds_side_file(tmp_path):
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10)).eval()
    path = tmp_path / "split.onnx"
    torch.onnx.export(
        model,
        (torch.zeros(1, 1, 28, 28),),
        str(path),
        dynamo=True,
        external_data=True,
        verbose=False,
    )
    assert external_data_files(path) == ["split.onnx.data"]


def test_quantize_dynamic_onnx_survives_stale_shape_hints(tmp_path, caplog):
    import logging

    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 16), nn.ReLU(), nn.Linear(16, 10))
    exported = onnx.load(str(export_onnx(model, tmp_path / "mlp.onnx", torch.zeros(2, 1, 28, 28))))
    relu_output = next(node.output[0] for node in exported.graph.node if node.op_type == "Relu")
    stale = onnx.helper.make_tensor_value_info(relu_output, onnx.TensorProto.FLOAT, ["batch", 17])
    exported.graph.value_info.append(stale)  # a wrong shape hint, like PyTorch 2.8's
    src = tmp_path / "stale.onnx"
    onnx.save(exported, str(src))
    kwargs = {"op_types_to_quantize": ["MatMul"], "weight_type": QuantType.QInt8}
    # what the helper works around (the error's class and text vary between releases)
    with pytest.raises((RuntimeError, onnx.shape_inference.InferenceError)):
        quantize_dynamic(str(src), str(tmp_path / "plain.onnx"), **kwargs)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        dst = quantize_dynamic_onnx(src, tmp_path / "int8.onnx", reduce_range=True, **kwargs)
    assert dst == tmp_path / "int8.onnx" and op_counts(dst).get("MatMulInteger") == 2
    assert not caplog.records and logging.root.manager.disable == logging.NOTSET
    assert stale in onnx.load(str(src)).graph.value_info  # the source file is left as it was
    weights = [
        onnx.numpy_helper.to_array(t)
        for t in onnx.load(str(dst)).graph.initializer
        if t.data_type == onnx.TensorProto.INT8 and len(t.dims) == 2
    ]
    assert len(weights) == 2 and max(int(np.abs(w.astype(np.int32)).max()) for w in weights) <= 64
    x = np.random.default_rng(0).uniform(-1, 1, (8, 1, 28, 28)).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(x)).numpy()
    session = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"])
    assert np.abs(session.run(None, {"images": x})[0] - expected).max() <= 0.1


def test_preprocess_matches_utils_data_normalisation():
    pixels, _ = load_split(train=True)
    expected = fashion_mnist_tensors(train=True, limit=8).tensors[0].numpy()
    got = preprocess(pixels[:8].numpy())
    assert got.shape == (8, 1, 28, 28) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert preprocess(pixels[:8].numpy()[:, None]).shape == (8, 1, 28, 28)
    floats = np.zeros((2, 1, 28, 28), np.float64)
    assert preprocess(floats, normalized=True).dtype == np.float32  # passed through as float32
    np.testing.assert_array_equal(preprocess(expected, normalized=True), expected)
    np.testing.assert_array_equal(preprocess(np.array([[[0, 255]]], np.uint8)), [[[[-1.0, 1.0]]]])


def test_preprocess_bad_inputs():
    with pytest.raises(ValueError, match=r"add a batch axis: images\[None\]"):
        preprocess(np.zeros((28, 28), np.uint8))
    with pytest.raises(TypeError, match="expected uint8 pixels"):
        preprocess(np.zeros((1, 28, 28), np.int32))


def test_preprocess_refuses_floats_it_cannot_interpret():
    to_tensor_output = np.full((1, 28, 28), 0.5, np.float32)  # 0..1, not normalised
    with pytest.raises(TypeError, match=r"without normalized=True.*astype\(np.uint8\)"):
        preprocess(to_tensor_output)
    with pytest.raises(ValueError, match=r"lie in \[-1, 1\].*uint8"):
        preprocess(np.full((1, 28, 28), 200.0, np.float32), normalized=True)  # 0..255 floats
    with pytest.raises(ValueError, match="drop normalized=True"):
        preprocess(np.zeros((1, 28, 28), np.uint8), normalized=True)


def test_predictor_bad_inputs(tmp_path, exported):
    with pytest.raises(FileNotFoundError, match="export one first"):
        OnnxPredictor(tmp_path / "missing.onnx")
    with pytest.raises(ValueError, match="num_threads must be >= 1"):
        OnnxPredictor(exported[1], num_threads=0)


def test_export_bad_inputs(tmp_path):
    model = nn.Linear(4, 2)
    with pytest.raises(TypeError, match="must be a torch.nn.Module"):
        export_onnx(lambda x: x, tmp_path / "f.onnx", torch.zeros(1, 4))
    with pytest.raises(TypeError, match=r"example_input must be a torch.Tensor"):
        export_onnx(model, tmp_path / "f.onnx", [0.0] * 4)
    with pytest.raises(ValueError, match="needs a batch axis"):
        export_onnx(model, tmp_path / "f.onnx", torch.tensor(1.0))
    with pytest.raises(ValueError, match=r"should end in \.onnx"):
        export_onnx(model, tmp_path / "f.pt", torch.zeros(1, 4))


def test_predictor_module_never_imports_torch():
    code = "import sys, utils.onnx_predict; print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_command_line_predicts_without_torch(exported, test_images, tmp_path):
    model, path = exported
    pixels, _ = test_images
    np.save(tmp_path / "images.npy", pixels)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "utils.onnx_predict",
            str(path),
            str(tmp_path / "images.npy"),
            "--out",
            str(tmp_path / "logits.npy"),
            "--batch-size",
            "64",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["torch_imported"] is False
    assert report["num_images"] == NUM_IMAGES
    expected = torch_logits(model, pixels)
    assert report["predictions"] == expected.argmax(1).tolist()
    assert np.abs(np.load(tmp_path / "logits.npy") - expected).max() <= 1e-4


def test_command_line_takes_normalised_floats_with_the_flag(exported, test_images, tmp_path):
    _, path = exported
    pixels, _ = test_images
    np.save(tmp_path / "floats.npy", preprocess(pixels[:8]))
    command = [sys.executable, "-m", "utils.onnx_predict", str(path), str(tmp_path / "floats.npy")]
    refused = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "normalized=True" in refused.stderr
    result = subprocess.run([*command, "--normalized"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    expected = OnnxPredictor(path).predict_classes(pixels[:8]).tolist()
    assert json.loads(result.stdout)["predictions"] == expected


def test_torch_free_predictor_normalises_like_the_training_data():
    """onnx_predict must not import torch (or utils.data), so it keeps its own copy of the constants."""
    assert (onnx_predict.MEAN, onnx_predict.STD) == (MEAN, STD)
