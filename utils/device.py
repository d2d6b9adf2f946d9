"""The hardware: which device to compute on (notebooks/00_environment.ipynb) and what the CPU can do.

`get_device` picks cuda -> mps -> xpu -> cpu; `cpu_model`, `cpu_instructions` and
`cpu_native_bfloat16` say what the CPU is and whether bfloat16 autocast can be fast on it
(notebooks/09_mixed_precision.ipynb).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import torch

KNOWN_TYPES = ("cuda", "mps", "xpu", "cpu")


def available_types() -> list[str]:
    """Device types that have at least one usable device here, best first."""
    found = []
    if torch.cuda.is_available():  # also true on ROCm builds: AMD GPUs appear as "cuda"
        found.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        found.append("xpu")
    found.append("cpu")
    return found


def get_device(prefer: str | None = None) -> torch.device:
    """Return `prefer` if it is usable, else the best device here (cuda -> mps -> xpu -> cpu).

    Asking for a device that does not exist here is an error, never a silent fall-back to the CPU.
    """
    if prefer is None:
        return torch.device(available_types()[0])
    try:
        device = torch.device(prefer)
    except RuntimeError:
        raise ValueError(
            f"Unknown device {prefer!r}. Use one of {', '.join(KNOWN_TYPES)} "
            "(optionally with an index, like 'cuda:1'), or None to pick the best available."
        ) from None
    if device.type not in KNOWN_TYPES:
        raise ValueError(
            f"Unknown device {prefer!r}. Use one of {', '.join(KNOWN_TYPES)}, "
            "or None to pick the best available."
        )
    if device.type not in available_types():
        raise RuntimeError(
            f"You asked for {prefer!r}, but no {device.type} device is usable on this machine "
            f"(usable here: {', '.join(available_types())}). Run `python -m utils.env` to see "
            "why, or call get_device() with no argument to use the best available device."
        )
    if device.type == "cuda" and device.index is not None:
        count = torch.cuda.device_count()
        if device.index >= count:
            raise RuntimeError(
                f"You asked for {prefer!r}, but this machine has {count} CUDA device(s) "
                f"(indices 0..{count - 1})."
            )
    return device


# What the CPU can do: its name, the vector instructions torch uses, whether bfloat16 is native (notebooks/09_mixed_precision.ipynb)
def cpu_model() -> str:
    """The CPU's marketing name where the OS tells it (Linux), else the architecture."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# oneDNN (the CPU convolution and matmul library) levels below the first one with bfloat16
# instructions; ONEDNN_MAX_CPU_ISA set to one of these keeps oneDNN off native bfloat16.
ONEDNN_LEVELS_WITHOUT_BF16 = frozenset(
    {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"}
)


def _is_x86() -> bool:
    return platform.machine().lower() in {"x86_64", "amd64", "i386", "i686", "x86"}


def _is_arm() -> bool:
    return platform.machine().lower().startswith(("arm", "aarch64"))


def _cpuinfo_flags() -> set[str]:
    """The CPU feature flags Linux lists in /proc/cpuinfo ("flags" on x86, "Features" on ARM)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_has_bfloat16_instructions() -> bool:
    """Whether the chip itself has bfloat16 arithmetic (AVX512-BF16 or AMX-BF16 on x86, BF16 on ARM).

    This ignores what torch is allowed to use; `cpu_native_bfloat16` adds that.
    """
    if _is_x86():
        probes = [
            getattr(torch.cpu, name, None)
            for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
        ]
        if all(probe is not None for probe in probes):  # torch's own CPU probe, on every OS
            return any(probe() for probe in probes)
        return bool({"avx512_bf16", "amx_bf16"} & _cpuinfo_flags())
    if _is_arm():
        if "bf16" in _cpuinfo_flags():  # Linux
            return True
        if sys.platform == "darwin":  # Apple silicon from M2 on
            try:
                answer = subprocess.run(
                    ["sysctl", "-n", "hw.optional.arm.FEAT_BF16"],
                    capture_output=True,
                    text=True,
                    timeout=5,
                )
                return answer.stdout.strip() == "1"
            except (OSError, subprocess.SubprocessError):
                return False
    return False


def onednn_isa_cap() -> str | None:
    """The instruction-set cap set for oneDNN (ONEDNN_MAX_CPU_ISA, formerly DNNL_MAX_CPU_ISA), if any."""
    for name in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        value = os.environ.get(name, "").strip().upper()
        if value:
            return value
    return None


def cpu_native_bfloat16() -> bool:
    """True when torch computes bfloat16 natively on this CPU, so CPU autocast can be fast.

    On x86 that needs the instructions (AVX512-BF16 or AMX) and torch allowed to use them: ATen at
    AVX512 (not capped by ATEN_CPU_CAPABILITY) and oneDNN not capped below AVX512_CORE_BF16.
    """
    if not cpu_has_bfloat16_instructions():
        return False
    if _is_x86():
        if torch.backends.cpu.get_cpu_capability() != "AVX512":
            return False
        return onednn_isa_cap() not in ONEDNN_LEVELS_WITHOUT_BF16
    return True


def cpu_instructions() -> str:
    """The vector instructions torch uses on this CPU and whether bfloat16 is native, for example
    'AVX512 with native bfloat16' or 'AVX2, bfloat16 emulated'."""
    capability = torch.backends.cpu.get_cpu_capability()
    if _is_arm():
        name = "ARM NEON" if capability == "DEFAULT" else f"ARM {capability}"
    else:
        name = capability
        cap = onednn_isa_cap()
        if _is_x86() and capability == "AVX512" and cap in ONEDNN_LEVELS_WITHOUT_BF16:
            name += f" (oneDNN capped at {cap})"
    return f"{name} with native bfloat16" if cpu_native_bfloat16() else f"{name}, bfloat16 emulated"
