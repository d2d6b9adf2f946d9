"""utils.amp: the autocast type per device and the scaler; utils.train's mixed-precision epoch."""

from types import SimpleNamespace

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import utils.amp
from utils.amp import amp_policy, amp_setup, autocast_dtype, make_grad_scaler
from utils.device import cpu_native_bfloat16
from utils.train import train_one_epoch


def _fake_cuda(
    monkeypatch,
    capability: tuple[int, int] = (7, 5),
    hip: str | None = None,
    arch: str = "gfx90a:sramecc+:xnack-",
    bf16_supported: bool = True,
) -> list:
    """Pretend a CUDA (or ROCm) GPU is present; returns the devices whose capability was asked."""
    asked = []

    def get_device_capability(device=None):
        asked.append(device)
        return capability

    def get_device_properties(device=None):
        asked.append(("properties", device))
        return SimpleNamespace(gcnArchName=arch, major=capability[0], minor=capability[1])

    monkeypatch.setattr(torch.version, "hip", hip)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", get_device_capability)
    monkeypatch.setattr(torch.cuda, "get_device_properties", get_device_properties)
    # Every CUDA GPU can *emulate* bfloat16 (True from Volta on): the CUDA policy must not go by
    # this answer. Under ROCm torch answers True for every GPU: the ROCm policy follows it.
    monkeypatch.setattr(
        torch.cuda, "is_bf16_supported", lambda including_emulation=True: bf16_supported
    )
    return asked


def test_cuda_with_native_bfloat16_uses_it_without_a_scaler(monkeypatch):
    _fake_cuda(monkeypatch, capability=(8, 0))
    policy = amp_policy("cuda:1")
    assert (policy.dtype, policy.use_scaler, policy.native) == (torch.bfloat16, False, True)
    assert policy.enabled
    assert autocast_dtype("cuda") is torch.bfloat16


def test_cuda_asks_the_capability_of_the_device_passed_in(monkeypatch):
    asked = _fake_cuda(monkeypatch, capability=(9, 0))
    amp_policy("cuda:1")
    amp_policy(torch.device("cuda", 3))
    assert asked == [torch.device("cuda:1"), torch.device("cuda:3")]


@pytest.mark.parametrize("capability", [(7, 0), (7, 5)])
def test_volta_and_turing_get_float16_with_a_scaler(monkeypatch, capability):
    # Emulated bfloat16 (torch.cuda.is_bf16_supported() is True on such GPUs) must not count.
    _fake_cuda(monkeypatch, capability=capability)
    policy = amp_policy("cuda")
    assert (policy.dtype, policy.use_scaler, policy.native) == (torch.float16, True, True)
    assert policy.enabled
    dtype, scaler = amp_setup("cuda")
    assert dtype is torch.float16 and isinstance(scaler, torch.amp.GradScaler)


@pytest.mark.parametrize("capability", [(6, 1), (6, 0), (5, 2)])
def test_cuda_without_tensor_cores_stays_in_float32(monkeypatch, capability):
    _fake_cuda(monkeypatch, capability=capability)
    policy = amp_policy("cuda")
    assert (policy.dtype, policy.use_scaler, policy.native) == (torch.float16, True, False)
    assert not policy.enabled
    assert f"compute capability {capability[0]}.{capability[1]}" in policy.reason
    assert "no tensor cores" in policy.reason
    assert amp_setup("cuda") == (None, None)


@pytest.mark.parametrize("arch", ["gfx90a:sramecc+:xnack-", "gfx942", "gfx1100", "gfx908", ""])
def test_rocm_with_bfloat16_instructions_gets_bfloat16(monkeypatch, arch):
    # AMD's capability numbers (gfx90a reports 9.0) are not NVIDIA's: the CUDA thresholds must not
    # be applied; the architecture of the device passed in decides.
    asked = _fake_cuda(monkeypatch, capability=(6, 0), hip="6.2", arch=arch)
    policy = amp_policy("cuda:1")
    assert (policy.dtype, policy.use_scaler, policy.native) == (torch.bfloat16, False, True)
    assert policy.enabled and "ROCm" in policy.reason
    assert asked == [("properties", torch.device("cuda:1"))]


@pytest.mark.parametrize("arch", ["gfx906:sramecc+:xnack-", "gfx1030", "gfx900", "gfx803"])
def test_rocm_emulating_bfloat16_stays_in_float32(monkeypatch, arch):
    _fake_cuda(monkeypatch, hip="6.2", arch=arch)
    policy = amp_policy("cuda")
    assert (policy.dtype, policy.use_scaler, policy.native) == (torch.bfloat16, False, False)
    assert not policy.enabled
    assert arch.split(":")[0] in policy.reason and "emulated" in policy.reason
    assert amp_setup("cuda") == (None, None)


def test_rocm_follows_torch_when_it_says_no_bfloat16(monkeypatch):
    _fake_cuda(monkeypatch, hip="6.2", bf16_supported=False)
    policy = amp_policy("cuda")
    assert (policy.dtype, policy.use_scaler, policy.enabled) == (torch.float16, True, True)
    dtype, scaler = amp_setup("cuda")
    assert dtype is torch.float16 and isinstance(scaler, torch.amp.GradScaler)


def test_cuda_ignores_is_bf16_supported(monkeypatch):
    # is_bf16_supported() is True on Volta (emulation) and could be False for another current
    # device: the CUDA branch decides by the capability of the device passed in.
    _fake_cuda(monkeypatch, capability=(8, 6), bf16_supported=False)
    assert amp_policy("cuda").dtype is torch.bfloat16


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


def test_gpus_with_tensor_cores_are_enabled(monkeypatch):
    _fake_cuda(monkeypatch, capability=(7, 0))
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
