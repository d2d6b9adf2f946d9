import subprocess
import sys

import torch

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
