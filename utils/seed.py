"""Make runs repeatable. Taught in notebooks/03_datasets_and_dataloaders.ipynb and 06_tuning."""

from __future__ import annotations

import os
import random

import numpy as np
import torch


def set_seed(seed: int, deterministic: bool = False) -> torch.Generator:
    """Seed Python, NumPy and torch (all devices); return a torch.Generator for DataLoaders.

    With `deterministic=True` torch also refuses nondeterministic kernels, so two runs with the
    same seed give bit-identical results (at some cost in speed on a GPU).
    """
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # seeds every device's generator too
    torch.use_deterministic_algorithms(deterministic, warn_only=False)
    if deterministic:
        # cuBLAS needs this workspace setting to be deterministic; harmless elsewhere.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if torch.backends.cudnn.is_available():
        torch.backends.cudnn.deterministic = deterministic
        if deterministic:
            torch.backends.cudnn.benchmark = False
    return make_generator(seed)


def make_generator(seed: int) -> torch.Generator:
    """A CPU generator with its own seed: pass it to DataLoader(shuffle=True, generator=...)."""
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator
