"""utils.amp: the autocast type per device and the scaler; utils.train's mixed-precision epoch."""

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import utils.amp
from utils.amp import amp_policy, amp_setup, autocast_dtype, make_grad_scaler
from utils.cpu import cpu_native_bfloat16
from utils.train import train_one_epoch


def _fake_cuda(monkeypatch, bf16_native: bool, capability: tuple[int, int] = (7, 5)):
    """Pretend a CUDA GPU is present: with bfloat16 tensor cores (bf16_native) or only emulation."""

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return bf16_native or including_emulation  # every CUDA GPU can *emulate* bfloat16

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)


def test_cuda_with_native_bfloat16_uses_it_without_a_scaler(monkeypatch):
    _fake_cuda(monkeypatch, bf16_native=True, capability=(8, 0))
    policy = amp_policy("cuda:1")
    assert (policy.dtype, policy.use_scaler, policy.native) == (torch.bfloat16, False, True)
    assert autocast_dtype("cuda") is torch.bfloat16


@pytest.mark.parametrize(("capability", "tensor_cores"), [((7, 5), True), ((6, 1), False)])
def test_older_cuda_gets_float16_with_a_scaler(monkeypatch, capability, tensor_cores):
    # Emulated bfloat16 (torch.cuda.is_bf16_supported() is True on such GPUs) must not count.
    _fake_cuda(monkeypatch, bf16_native=False, capability=capability)
    policy = amp_policy("cuda")
    assert (policy.dtype, policy.use_scaler, policy.native) == (torch.float16, True, tensor_cores)


def test_mps_gets_float16_with_a_scaler():
    policy = amp_policy("mps")
    assert (policy.dtype, policy.use_scaler) == (torch.float16, True)
    dtype, scaler = amp_setup("mps")
    assert dtype is torch.float16 and isinstance(scaler, torch.amp.GradScaler)
    assert scaler.is_enabled()


def test_xpu_gets_bfloat16_without_a_scaler():
    policy = amp_policy("xpu")
    assert (policy.dtype, policy.use_scaler, policy.native) == (torch.bfloat16, False, True)


@pytest.mark.parametrize("native", [True, False])
def test_cpu_gets_bfloat16_without_a_scaler_native_or_not(monkeypatch, native):
    monkeypatch.setattr(utils.amp, "cpu_native_bfloat16", lambda: native)
    policy = amp_policy(torch.device("cpu"))
    assert (policy.dtype, policy.use_scaler, policy.native) == (torch.bfloat16, False, native)
    assert ("emulated" in policy.reason) is not native
    # Emulated bfloat16 is slower than float32: the policy says so and amp_setup stays in float32.
    assert policy.enabled is native
    assert amp_setup("cpu") == ((torch.bfloat16, None) if native else (None, None))


def test_every_gpu_policy_is_enabled(monkeypatch):
    _fake_cuda(monkeypatch, bf16_native=False, capability=(6, 1))  # even without tensor cores
    assert all(amp_policy(kind).enabled for kind in ("cuda", "mps", "xpu"))


def test_cpu_policy_reports_this_machine():
    assert amp_policy("cpu").native == cpu_native_bfloat16()


def test_amp_setup_gives_a_fresh_scaler_each_time():
    _, first = amp_setup("mps")
    _, second = amp_setup("mps")
    assert first is not second


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


def test_amp_setup_float32_fallback_is_a_plain_epoch(monkeypatch):
    monkeypatch.setattr(utils.amp, "cpu_native_bfloat16", lambda: False)
    dtype, scaler = amp_setup("cpu")
    model_a, loader, opt_a = _setup()
    loss_a = train_one_epoch(model_a, loader, nn.CrossEntropyLoss(), opt_a, "cpu")
    model_b, loader, opt_b = _setup()
    loss_b = train_one_epoch(
        model_b, loader, nn.CrossEntropyLoss(), opt_b, "cpu", autocast_dtype=dtype, scaler=scaler
    )
    assert loss_a == loss_b
    assert all(
        torch.equal(a, b) for a, b in zip(model_a.parameters(), model_b.parameters(), strict=True)
    )


def test_float32_path_matches_plain_epoch():
    model_a, loader, opt_a = _setup()
    loss_a = train_one_epoch(model_a, loader, nn.CrossEntropyLoss(), opt_a, "cpu")
    model_b, loader, opt_b = _setup()
    disabled = torch.amp.GradScaler("cpu", enabled=False)  # a scaler that does nothing
    loss_b = train_one_epoch(model_b, loader, nn.CrossEntropyLoss(), opt_b, "cpu", scaler=disabled)
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
    memory_format = torch.channels_last if channels_last else None
    loss_b = train_one_epoch(
        model_b,
        loader,
        nn.CrossEntropyLoss(),
        opt_b,
        "cpu",
        autocast_dtype=torch.bfloat16,
        scaler=scaler,
        memory_format=memory_format,
    )
    assert loss_b == pytest.approx(loss_a, rel=0.05)
    assert all(p.dtype == torch.float32 for p in model_b.parameters())  # master weights


def test_float16_with_scaler_trains():
    model, loader, optimizer = _setup()
    before = [p.detach().clone() for p in model.parameters()]
    scaler = make_grad_scaler("cpu", torch.float16)
    loss = train_one_epoch(
        model,
        loader,
        nn.CrossEntropyLoss(),
        optimizer,
        "cpu",
        autocast_dtype=torch.float16,
        scaler=scaler,
    )
    assert torch.isfinite(torch.tensor(loss))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
