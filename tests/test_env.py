import os
import subprocess
import sys

import pytest
import torch

import utils.env as env
from utils.env import build_flavour, check_tensor_op, format_report, report


def test_build_flavour_matches_torch():
    flavour = build_flavour()
    if torch.version.hip:
        assert flavour.startswith("ROCm")
    elif torch.version.cuda:
        assert flavour == f"CUDA {torch.version.cuda}"
    else:
        assert flavour == "CPU-only"


def test_report_has_a_working_cpu():
    info = report(gflops=False)
    assert info["torch"] == torch.__version__
    assert info["devices"]["cpu"]["tensor_op_ok"] is True
    assert "get_device() -> " in format_report(info)


def test_tensor_op_check_compares_with_cpu():
    assert check_tensor_op(torch.device("cpu"))


def test_command_line_report():
    result = subprocess.run(
        [sys.executable, "-m", "utils.env"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "torch        " + torch.__version__ in result.stdout
    assert "tensor op ok" in result.stdout
    assert "GFLOP/s" in result.stdout


def _pretend_cpu(monkeypatch, arch: str, capability: str, bf16_instructions: bool) -> None:
    """Pretend to be an x86 or ARM CPU at a torch capability level, with or without bfloat16."""
    monkeypatch.setattr(env, "_is_x86", lambda: arch == "x86")
    monkeypatch.setattr(env, "_is_arm", lambda: arch == "arm")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    monkeypatch.setattr(env, "cpu_has_bfloat16_instructions", lambda: bf16_instructions)
    for name in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)


def test_avx512_bf16_cpu_is_native(monkeypatch):
    _pretend_cpu(monkeypatch, "x86", "AVX512", bf16_instructions=True)
    assert env.cpu_native_bfloat16() is True
    assert env.cpu_instructions() == "AVX512 with native bfloat16"


def test_avx512_without_bf16_instructions_is_emulated(monkeypatch):
    _pretend_cpu(monkeypatch, "x86", "AVX512", bf16_instructions=False)  # e.g. Skylake-X, Zen 3
    assert env.cpu_native_bfloat16() is False
    assert env.cpu_instructions() == "AVX512, bfloat16 emulated"


def test_aten_capped_at_avx2_is_emulated(monkeypatch):
    # ATEN_CPU_CAPABILITY=avx2 on a bfloat16-capable chip: torch may not use the instructions.
    _pretend_cpu(monkeypatch, "x86", "AVX2", bf16_instructions=True)
    assert env.cpu_native_bfloat16() is False
    assert env.cpu_instructions() == "AVX2, bfloat16 emulated"


@pytest.mark.parametrize(
    ("variable", "value", "native"),
    [
        ("ONEDNN_MAX_CPU_ISA", "AVX2", False),
        ("ONEDNN_MAX_CPU_ISA", "avx2", False),  # oneDNN reads the value case-insensitively
        ("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_VNNI", False),
        ("DNNL_MAX_CPU_ISA", "AVX512_CORE", False),  # the older name
        ("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16", True),
        ("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX", True),
        ("ONEDNN_MAX_CPU_ISA", "ALL", True),
        ("ONEDNN_MAX_CPU_ISA", "not-an-isa", True),  # oneDNN ignores values it does not know
    ],
)
def test_onednn_cap_decides(monkeypatch, variable, value, native):
    _pretend_cpu(monkeypatch, "x86", "AVX512", bf16_instructions=True)
    monkeypatch.setenv(variable, value)
    assert env.cpu_native_bfloat16() is native
    if not native:
        assert (
            env.cpu_instructions()
            == f"AVX512 (oneDNN capped at {value.upper()}), bfloat16 emulated"
        )


@pytest.mark.parametrize(
    ("bf16", "expected"),
    [(True, "ARM NEON with native bfloat16"), (False, "ARM NEON, bfloat16 emulated")],
)
def test_arm(monkeypatch, bf16, expected):
    _pretend_cpu(monkeypatch, "arm", "DEFAULT", bf16_instructions=bf16)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # an x86 cap means nothing on ARM
    assert env.cpu_native_bfloat16() is bf16
    assert env.cpu_instructions() == expected


@pytest.mark.parametrize(
    ("avx512_bf16", "amx", "expected"),
    [(True, False, True), (False, True, True), (False, False, False)],
)
def test_x86_instructions_from_torch_probe(monkeypatch, avx512_bf16, amx, expected):
    monkeypatch.setattr(env, "_is_x86", lambda: True)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
    assert env.cpu_has_bfloat16_instructions() is expected


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"avx2", "avx512f", "avx512_bf16"}, True),
        ({"amx_bf16"}, True),
        ({"avx2", "avx512f"}, False),
    ],
)
def test_x86_instructions_from_cpuinfo_without_torch_probe(monkeypatch, flags, expected):
    monkeypatch.setattr(env, "_is_x86", lambda: True)
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported", raising=False)
    monkeypatch.setattr(env, "_cpuinfo_flags", lambda: flags)
    assert env.cpu_has_bfloat16_instructions() is expected


def test_arm_linux_instructions_from_cpuinfo(monkeypatch):
    monkeypatch.setattr(env, "_is_x86", lambda: False)
    monkeypatch.setattr(env, "_is_arm", lambda: True)
    monkeypatch.setattr(env, "_cpuinfo_flags", lambda: {"fp", "asimd", "bf16"})
    assert env.cpu_has_bfloat16_instructions() is True


@pytest.mark.skipif(not env._is_x86(), reason="the ATEN/oneDNN caps are x86 settings")
def test_capped_torch_really_reports_emulated():
    """End to end: a fresh interpreter under the caps a learner's AVX2 laptop has."""
    capped = dict(os.environ, ATEN_CPU_CAPABILITY="avx2", ONEDNN_MAX_CPU_ISA="AVX2")
    code = "from utils.env import cpu_instructions, cpu_native_bfloat16; print(cpu_native_bfloat16(), cpu_instructions())"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=capped, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split(None, 1) == ["False", "AVX2, bfloat16 emulated\n"]


def test_report_names_the_instruction_set():
    info = report(gflops=False)
    assert info["cpu_instructions"] == env.cpu_instructions()
    assert f"CPU ISA      {info['cpu_instructions']}" in format_report(info)


def test_build_flavour_names_xpu_and_mps_wheels(monkeypatch):
    from utils import env

    monkeypatch.setattr(env.torch.version, "hip", None)
    monkeypatch.setattr(env.torch.version, "cuda", None)
    monkeypatch.setattr(env.torch.version, "xpu", "20250101", raising=False)
    assert env.build_flavour() == "XPU 20250101"
    monkeypatch.setattr(env.torch.version, "xpu", None, raising=False)
    monkeypatch.setattr(env.torch.backends.mps, "is_built", lambda: True)
    assert env.build_flavour() == "macOS (MPS)"
    monkeypatch.setattr(env.torch.backends.mps, "is_built", lambda: False)
    assert env.build_flavour() == "CPU-only"
