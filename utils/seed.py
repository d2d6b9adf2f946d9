"""Make runs repeatable. Taught in notebooks/03_datasets_and_dataloaders.ipynb and 06_tuning."""

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
