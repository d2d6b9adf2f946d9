"""utils.amp: the autocast type per device, the scaler, and the mixed-precision epoch."""

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from utils.amp import autocast_dtype, make_grad_scaler, train_one_epoch_amp
from utils.train import train_one_epoch


def test_autocast_dtype_by_device():
    assert autocast_dtype("cpu") is torch.bfloat16
    assert autocast_dtype(torch.device("cpu")) is torch.bfloat16
    assert autocast_dtype("cuda") is torch.float16
    assert autocast_dtype("cuda:1") is torch.float16
    assert autocast_dtype("mps") is torch.float16
    assert autocast_dtype("xpu") is torch.bfloat16


def test_autocast_dtype_unknown_device():
    with pytest.raises(ValueError, match="No autocast type known for device 'meta'"):
        autocast_dtype("meta")


def test_scaler_enabled_only_for_float16():
    assert make_grad_scaler("cpu", torch.float16).is_enabled()
    assert not make_grad_scaler("cpu", torch.bfloat16).is_enabled()


def test_scaler_rejects_other_dtypes():
    with pytest.raises(ValueError, match="must be torch.float16 or torch.bfloat16"):
        make_grad_scaler("cpu", torch.float32)


def _setup(seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(64, 3))
    data = TensorDataset(torch.randn(32, 1, 4, 4), torch.randint(0, 3, (32,)))
    loader = DataLoader(data, batch_size=8, shuffle=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return model, loader, optimizer


def test_float32_path_matches_plain_epoch():
    model_a, loader, opt_a = _setup()
    loss_a = train_one_epoch(model_a, loader, nn.CrossEntropyLoss(), opt_a, "cpu")
    model_b, loader, opt_b = _setup()
    loss_b = train_one_epoch_amp(model_b, loader, nn.CrossEntropyLoss(), opt_b, "cpu", None)
    assert loss_a == pytest.approx(loss_b, rel=1e-6)
    for a, b in zip(model_a.parameters(), model_b.parameters(), strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("channels_last", [False, True])
def test_bfloat16_epoch_close_to_float32_and_weights_stay_float32(channels_last):
    model_a, loader, opt_a = _setup()
    loss_a = train_one_epoch(model_a, loader, nn.CrossEntropyLoss(), opt_a, "cpu")
    model_b, loader, opt_b = _setup()
    if channels_last:
        model_b = model_b.to(memory_format=torch.channels_last)
    scaler = make_grad_scaler("cpu", torch.bfloat16)
    loss_b = train_one_epoch_amp(
        model_b, loader, nn.CrossEntropyLoss(), opt_b, "cpu", torch.bfloat16, scaler, channels_last
    )
    assert loss_b == pytest.approx(loss_a, rel=0.05)
    assert all(p.dtype == torch.float32 for p in model_b.parameters())  # master weights


def test_float16_with_scaler_trains():
    model, loader, optimizer = _setup()
    before = [p.detach().clone() for p in model.parameters()]
    scaler = make_grad_scaler("cpu", torch.float16)
    loss = train_one_epoch_amp(
        model, loader, nn.CrossEntropyLoss(), optimizer, "cpu", torch.float16, scaler
    )
    assert torch.isfinite(torch.tensor(loss))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
