import subprocess
import sys

import pytest
import torch

import utils.env as env
from utils.device import cpu_instructions
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
    row_sums, product = env.tensor_op_results(torch.device("cpu"))
    assert row_sums.tolist() == [16.0, 48.0, 80.0]  # (2x + 1) summed over each row of 0..11
    assert product.tolist() == [[14.0, 38.0, 62.0], [38.0, 126.0, 214.0], [62.0, 214.0, 366.0]]


def test_tensor_op_check_demands_exact_equality(monkeypatch):
    """A device off in the last bit, or right on the matmul but wrong on the reduction, fails."""
    cpu_results = env.tensor_op_results(torch.device("cpu"))

    def faulty(row_sums_error: float, product_error: float):
        def results(device: torch.device):
            if device.type == "cpu":
                return cpu_results
            row_sums, product = cpu_results
            return row_sums + row_sums_error, product + product_error

        return results

    fake_gpu = torch.device("cuda")
    monkeypatch.setattr(env, "tensor_op_results", faulty(0.0, 0.0))
    assert check_tensor_op(fake_gpu)
    monkeypatch.setattr(env, "tensor_op_results", faulty(0.0, 1e-5))
    assert torch.allclose(cpu_results[1] + 1e-5, cpu_results[1])  # allclose would pass it
    assert not check_tensor_op(fake_gpu)
    monkeypatch.setattr(env, "tensor_op_results", faulty(1.0, 0.0))  # only the reduction is wrong
    assert not check_tensor_op(fake_gpu)


@pytest.mark.slow  # a fresh Python process that imports torch
def test_command_line_report():
    result = subprocess.run(
        [sys.executable, "-m", "utils.env"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "torch        " + torch.__version__ in result.stdout
    assert "tensor op ok" in result.stdout
    assert "GFLOP/s" in result.stdout


def test_report_names_the_instruction_set():
    info = report(gflops=False)
    assert info["cpu_instructions"] == cpu_instructions()
    assert f"CPU ISA      {info['cpu_instructions']}" in format_report(info)


def test_build_flavour_names_xpu_and_mps_wheels(monkeypatch):
    monkeypatch.setattr(env.torch.version, "hip", None)
    monkeypatch.setattr(env.torch.version, "cuda", None)
    monkeypatch.setattr(env.torch.version, "xpu", "20250101", raising=False)
    assert env.build_flavour() == "XPU 20250101"
    monkeypatch.setattr(env.torch.version, "xpu", None, raising=False)
    monkeypatch.setattr(env.torch.backends.mps, "is_built", lambda: True)
    assert env.build_flavour() == "macOS (MPS)"
    monkeypatch.setattr(env.torch.backends.mps, "is_built", lambda: False)
    assert env.build_flavour() == "CPU-only"


def test_kernel_support_reads_the_arch_list():
    wheel = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert env.kernel_support((8, 6), wheel) == "native"
    assert env.kernel_support((8, 9), wheel) == "compatible"  # Ada runs the sm_86 binaries
    assert env.kernel_support((12, 1), wheel) == "compatible"
    assert env.kernel_support((6, 1), wheel) == "none"  # an old GPU dropped from the wheel
    assert env.kernel_support((10, 3), ["sm_90", "compute_90"]) == "ptx"  # newer GPU: PTX only
    assert env.kernel_support((9, 0), ["sm_90a"]) == "native"
    assert env.kernel_support((9, 1), ["sm_90a"]) == "none"  # arch-specific: no compatibility
    assert (
        env.kernel_support((10, 3), ["sm_100f"]) == "compatible"
    )  # family-specific: the 10.x family
    assert env.kernel_support((9, 0), ["gfx90a", "gfx942"]) == "none"  # ROCm names are not NVIDIA's
    assert env.kernel_support((8, 0), []) == "none"


def test_format_report_shows_kernel_support():
    info = report(gflops=False)
    info["devices"] = {"cuda:0": {"name": "Some GPU", "tensor_op_ok": True, "kernels": "native"}}
    assert "device cuda:0 Some GPU: tensor op ok  kernels in the wheel: native" in format_report(
        info
    )
