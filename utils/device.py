"""Pick the device to compute on. Taught in notebooks/00_environment.ipynb."""

from __future__ import annotations

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
