"""What autograd keeps for the backward pass, in bytes.

Taught in notebooks/06_training_a_cnn.ipynb and notebooks/09_mixed_precision.ipynb (their *Going
further* sections write the hook out); used on 09's main path to compare float32 with autocast.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def saved_bytes(forward: Callable[[], object]) -> dict[torch.dtype, int]:
    """Call `forward()` and return the bytes autograd saved for the backward pass, per dtype.

    Each block of memory (a storage) counts once and in full, however many saved tensors view it.
    Under `torch.no_grad()` nothing is saved: `{}`. `forward`'s result, and its graph, are dropped.
    """
    saved: dict[tuple[torch.device, int], tuple[torch.UntypedStorage, torch.dtype]] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:  # called on every tensor autograd saves
        storage = tensor.untyped_storage()  # kept alive in `saved`, so no address is reused
        saved[tensor.device, storage.data_ptr()] = (storage, tensor.dtype)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        forward()
    totals: dict[torch.dtype, int] = {}
    for storage, dtype in saved.values():
        totals[dtype] = totals.get(dtype, 0) + storage.nbytes()
    return totals
