"""The CPU probe: instruction set and native bfloat16, as torch is allowed to use them."""

import os
import subprocess
import sys

import pytest
import torch

import utils.device as cpu


def _pretend_cpu(monkeypatch, arch: str, capability: str, bf16_instructions: bool) -> None:
    """Pretend to be an x86 or ARM CPU at a torch capability level, with or without bfloat16."""
    monkeypatch.setattr(cpu, "_is_x86", lambda: arch == "x86")
    monkeypatch.setattr(cpu, "_is_arm", lambda: arch == "arm")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    monkeypatch.setattr(cpu, "cpu_has_bfloat16_instructions", lambda: bf16_instructions)
    for name in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)


def test_avx512_bf16_cpu_is_native(monkeypatch):
    _pretend_cpu(monkeypatch, "x86", "AVX512", bf16_instructions=True)
    assert cpu.cpu_native_bfloat16() is True
    assert cpu.cpu_instructions() == "AVX512 with native bfloat16"


def test_avx512_without_bf16_instructions_is_emulated(monkeypatch):
    _pretend_cpu(monkeypatch, "x86", "AVX512", bf16_instructions=False)  # e.g. Skylake-X, Zen 3
    assert cpu.cpu_native_bfloat16() is False
    assert cpu.cpu_instructions() == "AVX512, bfloat16 emulated"


def test_aten_capped_at_avx2_is_emulated(monkeypatch):
    # ATEN_CPU_CAPABILITY=avx2 on a bfloat16-capable chip: torch may not use the instructions.
    _pretend_cpu(monkeypatch, "x86", "AVX2", bf16_instructions=True)
    assert cpu.cpu_native_bfloat16() is False
    assert cpu.cpu_instructions() == "AVX2, bfloat16 emulated"


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
    assert cpu.cpu_native_bfloat16() is native
    if not native:
        assert (
            cpu.cpu_instructions()
            == f"AVX512 (oneDNN capped at {value.upper()}), bfloat16 emulated"
        )


@pytest.mark.parametrize(
    ("bf16", "expected"),
    [(True, "ARM NEON with native bfloat16"), (False, "ARM NEON, bfloat16 emulated")],
)
def test_arm(monkeypatch, bf16, expected):
    _pretend_cpu(monkeypatch, "arm", "DEFAULT", bf16_instructions=bf16)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # an x86 cap means nothing on ARM
    assert cpu.cpu_native_bfloat16() is bf16
    assert cpu.cpu_instructions() == expected


@pytest.mark.parametrize(
    ("avx512_bf16", "amx", "expected"),
    [(True, False, True), (False, True, True), (False, False, False)],
)
def test_x86_instructions_from_torch_probe(monkeypatch, avx512_bf16, amx, expected):
    monkeypatch.setattr(cpu, "_is_x86", lambda: True)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
    assert cpu.cpu_has_bfloat16_instructions() is expected


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"avx2", "avx512f", "avx512_bf16"}, True),
        ({"amx_bf16"}, True),
        ({"avx2", "avx512f"}, False),
    ],
)
def test_x86_instructions_from_cpuinfo_without_torch_probe(monkeypatch, flags, expected):
    monkeypatch.setattr(cpu, "_is_x86", lambda: True)
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported", raising=False)
    monkeypatch.setattr(cpu, "_cpuinfo_flags", lambda: flags)
    assert cpu.cpu_has_bfloat16_instructions() is expected


def test_arm_linux_instructions_from_cpuinfo(monkeypatch):
    monkeypatch.setattr(cpu, "_is_x86", lambda: False)
    monkeypatch.setattr(cpu, "_is_arm", lambda: True)
    monkeypatch.setattr(cpu, "_cpuinfo_flags", lambda: {"fp", "asimd", "bf16"})
    assert cpu.cpu_has_bfloat16_instructions() is True


@pytest.mark.skipif(not cpu._is_x86(), reason="the ATEN/oneDNN caps are x86 settings")
def test_capped_torch_really_reports_emulated():
    """End to end: a fresh interpreter under the caps a learner's AVX2 laptop has."""
    capped = dict(os.environ, ATEN_CPU_CAPABILITY="avx2", ONEDNN_MAX_CPU_ISA="AVX2")
    code = "from utils.device import cpu_instructions, cpu_native_bfloat16; print(cpu_native_bfloat16(), cpu_instructions())"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=capped, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split(None, 1) == ["False", "AVX2, bfloat16 emulated\n"]
