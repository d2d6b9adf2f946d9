"""Every random-number state of a run. Taught in notebooks/07_saving_and_loading.ipynb.

A checkpoint stores these states so that resumed training draws the same dropout masks and the
same shuffling order as a run that never stopped. The states are tensors and plain types only, so
they load with `torch.load(..., weights_only=True)`. Every accelerator present is covered: CUDA
(every device; ROCm too), Apple's MPS and Intel's XPU.
"""

from __future__ import annotations

import random

import numpy as np
import torch


def _mps_available() -> bool:
    return torch.backends.mps.is_available()


def _xpu_available() -> bool:
    return hasattr(torch, "xpu") and torch.xpu.is_available()


def rng_state(generator: torch.Generator | None = None) -> dict:
    """Python, NumPy, torch CPU, every accelerator and (if given) a DataLoader generator's state.

    The keys are the same on every machine; an accelerator that is absent gets `[]` or `None`.
    """
    version, mt_state, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": [version, list(mt_state), gauss],
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached],
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "mps": torch.mps.get_rng_state() if _mps_available() else None,
        "xpu": torch.xpu.get_rng_state_all() if _xpu_available() else [],
        "generator": generator.get_state() if generator is not None else None,
    }


def set_rng_state(state: dict, generator: torch.Generator | None = None) -> None:
    """Restore what `rng_state` captured (the DataLoader's generator too, if you pass it).

    An accelerator's state is restored where that accelerator is present; a state saved on a
    machine without it (or missing from an older file) leaves it as it is.
    """
    if generator is not None and state.get("generator") is None:
        raise ValueError(
            "The saved state holds no DataLoader generator state; save it with "
            "save_checkpoint(..., generator=train_loader.generator) to resume the shuffling."
        )
    version, mt_state, gauss = state["python"]
    random.setstate((version, tuple(mt_state), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if state.get("mps") is not None and _mps_available():
        torch.mps.set_rng_state(state["mps"])
    if state.get("xpu") and _xpu_available():
        torch.xpu.set_rng_state_all(state["xpu"])
    if generator is not None:
        generator.set_state(state["generator"])
