"""The environment report: what is installed and what actually computes. Taught in notebooks/00_environment.ipynb.

`environment()` is the short form a run directory records (notebooks/08_saving_and_loading.ipynb).

Run it from a terminal with `python -m utils.env`.
"""

from __future__ import annotations

import platform
import re
import subprocess
import sys
import time

import torch

from utils.device import (  # noqa: F401 (re-exported)
    available_types,
    cpu_instructions,
    cpu_model,
    cpu_native_bfloat16,
    get_device,
)


def build_flavour() -> str:
    """'CUDA 12.8', 'ROCm 6.2', 'XPU ...', 'macOS (MPS)' or 'CPU-only': what this torch wheel was built for."""
    if torch.version.hip:
        return f"ROCm {torch.version.hip}"
    if torch.version.cuda:
        return f"CUDA {torch.version.cuda}"
    xpu = getattr(torch.version, "xpu", None)
    if xpu:
        return f"XPU {xpu}"
    if torch.backends.mps.is_built():
        return "macOS (MPS)"
    return "CPU-only"


def device_name(device: torch.device) -> str:
    """A human name for a device (the GPU model where there is one)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "xpu":
        return torch.xpu.get_device_name(device)
    if device.type == "mps":
        return "Apple GPU (Metal)"
    return cpu_model()


def kernel_support(capability: tuple[int, int], arch_list: list[str]) -> str:
    """Can a wheel built for `arch_list` (torch.cuda.get_arch_list()) run on an NVIDIA GPU of `capability`?

    'native': compiled for exactly this GPU; 'compatible': for an older GPU of the same major
    version, whose binaries run here; 'ptx': only through the driver compiling PTX at start-up (slow
    first run); 'none': no kernel can run ("no kernel image is available for execution").
    """
    found = set()
    for entry in arch_list:
        match = re.fullmatch(r"(sm|compute)_(\d+)(\d)([a-z]?)", entry)
        if match is None:  # not an NVIDIA name (ROCm lists gfx...)
            continue
        kind, major, minor, suffix = match[1], int(match[2]), int(match[3]), match[4]
        if (major, minor) == tuple(capability):
            found.add("native" if kind == "sm" else "ptx")
        elif suffix == "a":  # 'sm_90a' uses features of that one GPU: it runs nowhere else
            continue
        elif kind == "sm" and major == capability[0] and minor < capability[1]:
            found.add("compatible")
        elif kind == "compute" and (major, minor) < tuple(capability):
            found.add("ptx")
    for answer in ("native", "compatible", "ptx"):
        if answer in found:
            return answer
    return "none"


def tensor_op_results(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Small-integer results computed on `device`, returned on the CPU: (row sums of 2x + 1, x @ x.T).

    The tensor is created on the device; the elementwise op and the reduction run PyTorch's own
    kernels, the matmul a vendor library (cuBLAS, rocBLAS, MPS), so a wheel without kernels for
    this GPU fails here even where the library's matmul would work.
    """
    x = torch.arange(12.0, device=device).reshape(3, 4)
    row_sums = (x * 2 + 1).sum(dim=1)
    product = x @ x.T
    return row_sums.cpu(), product.cpu()


def check_tensor_op(device: torch.device) -> bool:
    """Run real computations on `device` and compare them with the CPU: True when exactly equal.

    Every number involved is a small integer, exact in float32, so any difference is a fault.
    """
    on_device = tensor_op_results(device)
    on_cpu = tensor_op_results(torch.device("cpu"))
    return all(torch.equal(got, want) for got, want in zip(on_device, on_cpu, strict=True))


def matmul_rates(
    device: torch.device, n: int = 1024, repeat: int = 5, dtype: torch.dtype = torch.float32
) -> list[float]:
    """GFLOP/s of each of `repeat` timed n x n matrix multiplies in `dtype`, after one warm-up call."""
    from utils.timing import synchronize

    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    a @ b  # warm-up: first calls load kernels
    synchronize(device)
    rates = []
    for _ in range(repeat):
        start = time.perf_counter()
        a @ b
        synchronize(device)
        rates.append(2 * n**3 / (time.perf_counter() - start) / 1e9)
    return rates


def matmul_gflops(
    device: torch.device, n: int = 1024, repeat: int = 5, dtype: torch.dtype = torch.float32
) -> float:
    """Matmul speed in GFLOP/s, best of `repeat`: a rough probe of this machine's compute."""
    return max(matmul_rates(device, n, repeat, dtype))


def _git(*args: str) -> str | None:
    """Output of `git <args>` in the current directory; None without git or outside a repository."""
    try:
        result = subprocess.run(["git", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):  # git not installed, or it hung
        return None
    return result.stdout if result.returncode == 0 else None


def environment() -> dict:
    """What else decides a run besides its config: versions, the GPU, the code's commit.

    `cuda` is the CUDA version torch was built with (None for a CPU-only build); `cudnn` and
    `gpu` (the name of CUDA device 0) are None without a usable CUDA GPU. `git_commit` is the
    current directory's `git rev-parse HEAD` and `git_dirty` whether uncommitted changes exist;
    both are None without git or outside a repository.
    """
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain")
    has_gpu = torch.cuda.is_available()
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if has_gpu else None,
        "gpu": torch.cuda.get_device_name(0) if has_gpu else None,
        "git_commit": commit.strip() if commit is not None else None,
        "git_dirty": bool(status.strip()) if status is not None else None,
    }


def report(gflops: bool = True) -> dict:
    """Everything the report prints, as a dict (so a notebook can assert on it)."""
    import numpy as np

    try:
        import torchvision

        tv_version = torchvision.__version__
    except Exception as err:  # a broken torchvision install is worth reporting, not crashing on
        tv_version = f"not importable ({type(err).__name__}: {err})"
    info = {
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "torch": torch.__version__,
        "torchvision": tv_version,
        "numpy": np.__version__,
        "build": build_flavour(),
        "cpu_threads": torch.get_num_threads(),
        "cpu_instructions": cpu_instructions(),
        "cuda_available": torch.cuda.is_available(),
        "cuda_device_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "mps_available": "mps" in available_types(),
        "xpu_available": "xpu" in available_types(),
        "devices": {},
    }
    for kind in available_types():
        device = get_device(kind)
        entry = {"name": device_name(device), "tensor_op_ok": check_tensor_op(device)}
        if device.type == "cuda" and not torch.version.hip:
            capability = torch.cuda.get_device_capability(device)
            entry["kernels"] = kernel_support(capability, torch.cuda.get_arch_list())
        if gflops:
            entry["matmul_gflops"] = round(matmul_gflops(device), 1)
        info["devices"][str(device)] = entry
    info["chosen_device"] = str(get_device())
    return info


def format_report(info: dict) -> str:
    """The report as the lines `python -m utils.env` prints."""
    lines = [
        f"Python       {info['python']} on {info['platform']}",
        f"torch        {info['torch']}  (build: {info['build']})",
        f"torchvision  {info['torchvision']}",
        f"numpy        {info['numpy']}",
        f"CPU threads  {info['cpu_threads']}",
        f"CPU ISA      {info.get('cpu_instructions', 'unknown')}",
        f"CUDA/ROCm    available={info['cuda_available']}  devices={info['cuda_device_count']}",
        f"MPS          available={info['mps_available']}",
        f"XPU          available={info['xpu_available']}",
    ]
    for name, entry in info["devices"].items():
        speed = f"  matmul {entry['matmul_gflops']} GFLOP/s" if "matmul_gflops" in entry else ""
        status = "ok" if entry["tensor_op_ok"] else "WRONG RESULT"
        kernels = f"  kernels in the wheel: {entry['kernels']}" if "kernels" in entry else ""
        lines.append(f"device {name:<6} {entry['name']}: tensor op {status}{speed}{kernels}")
    lines.append(f"get_device() -> {info['chosen_device']}")
    return "\n".join(lines)


def main() -> int:
    info = report()
    print(format_report(info))
    ok = all(entry["tensor_op_ok"] for entry in info["devices"].values())
    if not ok:
        print(
            "A device computed a wrong result: see notebooks/00_environment.ipynb.", file=sys.stderr
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
