"""Mixed precision by device: which 16-bit type, whether a GradScaler. Taught in notebooks/08_mixed_precision.ipynb."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import nn

# float16 needs loss scaling (its exponent range is small); bfloat16 has float32's exponent range.
AUTOCAST_DTYPES = {
    "cuda": torch.float16,
    "mps": torch.float16,
    "xpu": torch.bfloat16,
    "cpu": torch.bfloat16,
}


def autocast_dtype(device: torch.device | str) -> torch.dtype:
    """The 16-bit type `torch.autocast` should use on `device`: float16 on GPUs, bfloat16 on CPUs."""
    kind = torch.device(device).type
    if kind not in AUTOCAST_DTYPES:
        raise ValueError(
            f"No autocast type known for device {kind!r}; use one of {', '.join(AUTOCAST_DTYPES)}, "
            "or pass dtype=torch.bfloat16 / torch.float16 to torch.autocast yourself."
        )
    return AUTOCAST_DTYPES[kind]


def make_grad_scaler(device: torch.device | str, dtype: torch.dtype) -> torch.amp.GradScaler:
    """A `torch.amp.GradScaler` that is enabled only for float16, the type whose gradients underflow."""
    if dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(
            f"dtype must be torch.float16 or torch.bfloat16 (the autocast types), got {dtype}"
        )
    return torch.amp.GradScaler(torch.device(device).type, enabled=dtype == torch.float16)


def train_one_epoch_amp(
    model: nn.Module,
    loader: Iterable,
    loss_fn: Callable,
    optimizer: torch.optim.Optimizer,
    device: torch.device | str,
    dtype: torch.dtype | None,
    scaler: torch.amp.GradScaler | None = None,
    channels_last: bool = False,
) -> float:
    """`utils.train.train_one_epoch` with autocast (`dtype=None`: plain float32) and a scaler.

    `channels_last=True` feeds images in NHWC memory order (convert the model the same way).
    Returns the mean loss per example.
    """
    device = torch.device(device)
    if scaler is None:
        scaler = torch.amp.GradScaler(device.type, enabled=False)  # a no-op scaler
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    model.train()
    total_loss, total_count = 0.0, 0
    for X, y in loader:
        X, y = X.to(device, memory_format=memory_format), y.to(device)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = loss_fn(model(X), y)  # matmuls/convs in 16 bits, the loss in float32
        optimizer.zero_grad()
        scaler.scale(loss).backward()  # scale up so small float16 gradients do not become 0
        scaler.step(optimizer)  # unscale, skip the step if any gradient is inf/nan
        scaler.update()
        total_loss += loss.item() * len(y)
        total_count += len(y)
    return total_loss / total_count
