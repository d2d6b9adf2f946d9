"""Shuffled mini-batches sliced from tensors already in memory, and a per-image random flip.

Taught in notebooks/03_datasets_and_dataloaders.ipynb (`random_hflip`) and
notebooks/05_cnn_fashion_mnist.ipynb (`TensorBatches`).

A `DataLoader` over a `TensorDataset` fetches each image on its own and stacks them (collate) for
every batch; when the whole data set already sits in memory as one tensor, one indexed gather per
batch does the same job with much less Python work per image.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

Augment = Callable[[torch.Tensor, torch.Generator], torch.Tensor]


def random_hflip(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Mirror a random half (on average) of a batch (B, C, H, W) left to right; a new tensor."""
    if images.dim() != 4:
        raise ValueError(
            f"random_hflip expects a batch (B, C, H, W), got shape {tuple(images.shape)}"
        )
    # drawn on the CPU from the generator: the same flips on any device
    flip = torch.rand(len(images), generator=generator) < 0.5
    flip = flip.to(images.device).view(-1, 1, 1, 1)
    return torch.where(flip, images.flip(-1), images)


class TensorBatches:
    """Iterate over (X, y) in shuffled mini-batches, one gather per batch, like a shuffling DataLoader.

    Each pass draws a new order from `generator` (so a seeded generator gives the same batches on
    every machine); `augment(X_batch, generator)` (e.g. `random_hflip`) runs on each batch.
    """

    def __init__(
        self,
        X: torch.Tensor,
        y: torch.Tensor,
        batch_size: int,
        generator: torch.Generator,
        *,
        drop_last: bool = False,
        augment: Augment | None = None,
    ) -> None:
        if len(X) != len(y):
            raise ValueError(f"X and y must have the same length, got {len(X)} and {len(y)}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if len(y) == 0 or (drop_last and len(y) < batch_size):
            raise ValueError(
                f"no batches: {len(y)} examples, batch_size={batch_size}, drop_last={drop_last}"
            )
        self.X, self.y, self.batch_size = X, y, batch_size
        self.generator, self.drop_last, self.augment = generator, drop_last, augment

    def __len__(self) -> int:
        """Batches per pass, as `len(DataLoader)` counts them."""
        full, rest = divmod(len(self.y), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        order = torch.randperm(len(self.y), generator=self.generator).to(self.y.device)
        end = len(self) * self.batch_size if self.drop_last else len(self.y)
        for start in range(0, end, self.batch_size):
            index = order[start : start + self.batch_size]
            X = self.X[index]
            if self.augment is not None:
                X = self.augment(X, self.generator)
            yield X, self.y[index]
