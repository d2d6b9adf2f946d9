"""The networks the chapters build, kept here so later chapters can reuse them: `MLP`
(notebooks/02_nn_module.ipynb) and `SimpleCNN` (notebooks/05_convolutions.ipynb).
"""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    """784-128-10 multilayer perceptron. Taught in notebooks/02_nn_module.ipynb."""

    def __init__(self, in_features: int = 784, hidden: int = 128, num_classes: int = 10):
        super().__init__()
        sizes = {"in_features": in_features, "hidden": hidden, "num_classes": num_classes}
        for name, size in sizes.items():
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise ValueError(
                    f"MLP sizes must be positive integers, got {name}={size!r} "
                    "(for Fashion-MNIST: in_features=784, num_classes=10)."
                )
        self.flatten = nn.Flatten()  # (B, 1, 28, 28) -> (B, 784)
        self.fc1 = nn.Linear(in_features, hidden)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.relu(self.fc1(self.flatten(x))))  # logits (B, num_classes)


class SimpleCNN(nn.Module):
    """Two conv blocks and a classifier for 28x28 greyscale images. Taught in notebooks/05_convolutions.ipynb."""

    def __init__(self, num_classes: int = 10, dropout: float = 0.25, relu_after_pool: bool = False):
        """`relu_after_pool=True` swaps each ReLU with the max-pooling after it: the same function and
        the same parameter names, with ReLU on a 4x smaller map. Whether a step gets faster depends
        on the CPU and the memory layout: chapter 13 profiles it, chapter 06 times whole epochs."""
        super().__init__()
        self.features = nn.Sequential(
            # 3x3 with padding 1 keeps 28: (B, 1, 28, 28) -> (B, 32, 28, 28)
            nn.Conv2d(1, 32, kernel_size=3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),  # (B, 32, 14, 14)
            nn.Conv2d(32, 64, kernel_size=3, padding=1),  # (B, 64, 14, 14)
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.MaxPool2d(2),  # (B, 64, 7, 7)
        )
        if relu_after_pool:  # ReLU and max commute: relu(max(a, b)) == max(relu(a), relu(b))
            for relu_at in (2, 6):  # ... then ReLU runs on the 4x smaller pooled map
                layers = self.features
                layers[relu_at], layers[relu_at + 1] = layers[relu_at + 1], layers[relu_at]
        self.classifier = nn.Sequential(
            nn.Flatten(),  # (B, 64 * 7 * 7) = (B, 3136)
            nn.Linear(64 * 7 * 7, 128),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(128, num_classes),  # logits: CrossEntropyLoss applies log-softmax itself
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """Number of (trainable) scalar parameters the model registers."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
