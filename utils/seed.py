"""Randomness: seed a run (notebooks/03_datasets_and_dataloaders.ipynb, 07_tuning) and capture or
restore every random-number state for a checkpoint (`rng_state`, notebooks/08_saving_and_loading.ipynb).
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch

# cuBLAS (CUDA's matrix library) is deterministic only with a fixed workspace; it reads this
# variable once, when CUDA first calls it, so it must be set before any work on the GPU.
CUBLAS_WORKSPACE_CONFIG = ":4096:8"


def set_seed(seed: int, deterministic: bool = False) -> torch.Generator:
    """Seed Python, NumPy and torch (all devices); return a torch.Generator for DataLoaders.

    With `deterministic=True` torch also refuses nondeterministic kernels, so two runs with the
    same seed give bit-identical results (at some cost in speed on a GPU).
    """
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    if deterministic:
        require_cublas_workspace_config()
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # seeds every device's generator too
    torch.use_deterministic_algorithms(deterministic, warn_only=False)
    if torch.backends.cudnn.is_available():
        torch.backends.cudnn.deterministic = deterministic
        if deterministic:
            torch.backends.cudnn.benchmark = False
    return make_generator(seed)


def require_cublas_workspace_config() -> None:
    """Set CUBLAS_WORKSPACE_CONFIG while it can take effect; raise if CUDA already runs without it.

    Once CUDA is initialised, cuBLAS may already have read the variable, so setting it then would
    look right and change nothing. Set it at the top of your notebook or script instead.
    """
    if os.environ.get("CUBLAS_WORKSPACE_CONFIG"):
        return
    if torch.cuda.is_initialized():
        raise RuntimeError(
            "set_seed(deterministic=True) needs CUBLAS_WORKSPACE_CONFIG, but CUDA is already "
            "initialised, so setting it now would not take effect. Put\n"
            f'    os.environ["CUBLAS_WORKSPACE_CONFIG"] = "{CUBLAS_WORKSPACE_CONFIG}"\n'
            "in the first cell of your notebook (or the top of your script), before anything runs "
            "on the GPU, or export it in the shell; then restart the kernel."
        )
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE_CONFIG  # harmless without CUDA


def make_generator(seed: int) -> torch.Generator:
    """A CPU generator with its own seed: pass it to DataLoader(shuffle=True, generator=...)."""
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator


# Every random-number state of a run, for a checkpoint (notebooks/08_saving_and_loading.ipynb)
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
