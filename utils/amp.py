"""Mixed precision by device: which 16-bit type, whether a GradScaler. Taught in notebooks/09_mixed_precision.ipynb.

The policy: bfloat16 without a scaler wherever the device computes bfloat16 (CUDA GPUs from compute
capability 8.0, AMD GPUs under ROCm when torch says so, Intel XPUs, CPUs), float16 with a
`GradScaler` on older CUDA GPUs and MPS. A device where 16 bits would be slower than float32 (a CPU
or an AMD GPU that only emulates bfloat16, a CUDA GPU without tensor cores, compute capability
below 7.0) is better left in float32: `enabled`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from utils.device import cpu_native_bfloat16

DEVICE_TYPES = ("cuda", "mps", "xpu", "cpu")


@dataclass(frozen=True)
class AmpPolicy:
    """What `torch.autocast` should use on one device, and why."""

    dtype: torch.dtype  # the 16-bit type autocast computes in
    use_scaler: bool  # float16 needs loss scaling (small exponent range); bfloat16 does not
    native: bool  # False: the hardware emulates `dtype`, so autocast may be slower than float32
    reason: str
    enabled: bool = (
        True  # train with autocast here? False: stay in float32 (16 bits would be slower)
    )


def amp_policy(device: torch.device | str) -> AmpPolicy:
    """The book's mixed-precision choice for `device`: bfloat16 where supported, else float16 + scaler."""
    device = torch.device(device)
    kind = device.type
    if kind == "cuda":
        if torch.version.hip:  # an AMD GPU under ROCm also reports as "cuda"
            return _rocm_policy(device)
        # Not torch.cuda.is_bf16_supported(): by default it also counts emulated bfloat16 (True on
        # Volta and Turing), and it asks the current device. The capability of `device` tells both.
        major, minor = torch.cuda.get_device_capability(device)
        if major >= 8:  # Ampere and newer; what is_bf16_supported(including_emulation=False) asks
            return AmpPolicy(torch.bfloat16, False, True, "CUDA GPU with bfloat16 tensor cores")
        if major >= 7:  # Volta, Turing: float16 tensor cores
            return AmpPolicy(
                torch.float16, True, True, "CUDA GPU without bfloat16: float16 with loss scaling"
            )
        return AmpPolicy(
            torch.float16,
            True,
            False,
            f"CUDA GPU of compute capability {major}.{minor}: no tensor cores, float16 is rarely "
            "faster than float32",
            enabled=False,
        )
    if kind == "xpu":
        return AmpPolicy(torch.bfloat16, False, True, "Intel GPU: bfloat16")
    if kind == "mps":
        # float16 works in MPS autocast on every macOS that torch supports; bfloat16 needs macOS 14.
        return AmpPolicy(torch.float16, True, True, "Apple GPU: float16 with loss scaling")
    if kind == "cpu":
        if cpu_native_bfloat16():
            return AmpPolicy(torch.bfloat16, False, True, "CPU with native bfloat16")
        return AmpPolicy(
            torch.bfloat16,
            False,
            False,
            "CPU without bfloat16 instructions: emulated, slower than float32",
            enabled=False,
        )
    raise ValueError(
        f"No autocast type known for device {kind!r}; use one of {', '.join(DEVICE_TYPES)}, "
        "or pass dtype=torch.bfloat16 / torch.float16 to torch.autocast yourself."
    )


# AMD architectures without bfloat16 matrix or dot instructions (Polaris, Vega, RDNA 1 and 2):
# bfloat16 runs there, but converted to float32 and back. MI100 (gfx908) and newer, RDNA 3 on have them.
ROCM_ARCHS_WITHOUT_BFLOAT16 = (
    "gfx8",
    "gfx900",
    "gfx902",
    "gfx904",
    "gfx906",
    "gfx909",
    "gfx90c",
    "gfx101",
    "gfx103",
)


def _rocm_policy(device: torch.device) -> AmpPolicy:
    """ROCm: the type follows `torch.cuda.is_bf16_supported()`; `native` comes from the GPU's architecture.

    Its capability numbers are AMD's, not NVIDIA's, so the CUDA thresholds do not apply.
    """
    if not torch.cuda.is_bf16_supported():
        return AmpPolicy(
            torch.float16, True, True, "ROCm GPU without bfloat16: float16 with loss scaling"
        )
    arch = getattr(torch.cuda.get_device_properties(device), "gcnArchName", "").split(":")[0]
    if arch.startswith(ROCM_ARCHS_WITHOUT_BFLOAT16):
        return AmpPolicy(
            torch.bfloat16,
            False,
            False,
            f"ROCm GPU {arch} without bfloat16 instructions: emulated, time it before you switch",
            enabled=False,
        )
    return AmpPolicy(
        torch.bfloat16, False, True, f"ROCm GPU {arch or '(unknown architecture)'}: bfloat16"
    )


def autocast_dtype(device: torch.device | str) -> torch.dtype:
    """The 16-bit type `torch.autocast` should use on `device` (see `amp_policy`)."""
    return amp_policy(device).dtype


def make_grad_scaler(device: torch.device | str, dtype: torch.dtype) -> torch.amp.GradScaler:
    """A `torch.amp.GradScaler` enabled only for float16, the type whose gradients underflow.

    Disabled, it passes the loss through and just calls `optimizer.step()`: one code path for all types.
    """
    if dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(
            f"dtype must be torch.float16 or torch.bfloat16 (the autocast types), got {dtype}"
        )
    return torch.amp.GradScaler(torch.device(device).type, enabled=dtype == torch.float16)


def amp_setup(
    device: torch.device | str,
) -> tuple[torch.dtype | None, torch.amp.GradScaler | None]:
    """`(autocast dtype, scaler)` for training on `device`: a fresh GradScaler for float16, else None.

    `(None, None)` (plain float32) where the policy is not `enabled`. Pass both to
    `utils.train.train_one_epoch(..., autocast_dtype=dtype, scaler=scaler)`.
    """
    policy = amp_policy(device)
    if not policy.enabled:
        return None, None
    scaler = torch.amp.GradScaler(torch.device(device).type) if policy.use_scaler else None
    return policy.dtype, scaler
