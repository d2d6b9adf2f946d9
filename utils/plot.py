"""Plots the chapters reuse; each function returns the Figure. Taught in notebooks/05_convolutions.ipynb.

Call `plt.show()` (or `display(fig)`) yourself: returning the figure keeps these functions free of
side effects and lets a test inspect what was drawn.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator


def plot_history(history: dict, title: str | None = None) -> Figure:
    """Training/validation loss and validation accuracy per epoch, side by side."""
    for key in ("train_loss", "val_loss", "val_acc"):
        if key not in history:
            raise KeyError(f"history has no {key!r}; pass the dict that utils.train.fit returns")
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.5))
    epochs = range(1, len(history["train_loss"]) + 1)
    ax_loss.plot(epochs, history["train_loss"], marker="o", label="train")
    ax_loss.plot(
        range(1, len(history["val_loss"]) + 1), history["val_loss"], marker="o", label="validation"
    )
    ax_loss.set(xlabel="epoch", ylabel="loss", title="loss")
    ax_loss.legend()
    ax_acc.plot(range(1, len(history["val_acc"]) + 1), history["val_acc"], marker="o", color="C2")
    ax_acc.set(xlabel="epoch", ylabel="accuracy", title="validation accuracy")
    for ax in (ax_loss, ax_acc):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole: no tick at 1.5
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_curves(
    curves: dict[str, Sequence[float]], ylabel: str, xlabel: str = "epoch", title: str | None = None
) -> Figure:
    """Several named curves on one axis (one per optimizer, learning rate, ...)."""
    if not curves:
        raise ValueError("curves is empty: pass {label: [values per epoch], ...}")
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for label, values in curves.items():
        ax.plot(range(1, len(values) + 1), values, marker="o", label=label)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title or "")
    ax.xaxis.set_major_locator(
        MaxNLocator(integer=True)
    )  # one point per epoch (or step): whole ticks
    ax.legend()
    fig.tight_layout()
    return fig


def plot_confusion_matrix(
    matrix: torch.Tensor, class_names: Sequence[str], normalize: bool = False
) -> Figure:
    """Heat map of a confusion matrix with the counts (or row fractions) written in each cell."""
    matrix = torch.as_tensor(matrix)
    n = len(class_names)
    if matrix.shape != (n, n):
        raise ValueError(f"matrix must be {n}x{n} for {n} class names, got {tuple(matrix.shape)}")
    values = matrix.double()
    if normalize:
        values = values / values.sum(dim=1, keepdim=True).clamp(min=1)
    fig, ax = plt.subplots(figsize=(7, 6))
    image = ax.imshow(values.numpy(), cmap="Blues")
    fig.colorbar(image, ax=ax)
    ax.set_xticks(range(n), class_names, rotation=45, ha="right")
    ax.set_yticks(range(n), class_names)
    ax.set(xlabel="predicted", ylabel="true")
    threshold = values.max().item() / 2
    for i in range(n):
        for j in range(n):
            text = f"{values[i, j]:.2f}" if normalize else f"{int(matrix[i, j])}"
            color = "white" if values[i, j] > threshold else "black"
            ax.text(j, i, text, ha="center", va="center", fontsize=7, color=color)
    fig.tight_layout()
    return fig


def show_images(
    images: torch.Tensor, titles: Sequence[str] | None = None, ncols: int = 8, scale: float = 1.4
) -> Figure:
    """A grid of greyscale images (N, 1, H, W) or (N, H, W), any value range, with optional titles."""
    images = torch.as_tensor(images).detach().cpu()
    if images.dim() == 4 and images.shape[1] == 1:
        images = images[:, 0]
    if images.dim() != 3 or len(images) == 0:
        raise ValueError(
            f"images must be a non-empty (N, H, W) or (N, 1, H, W) tensor, got {tuple(images.shape)}"
        )
    if titles is not None and len(titles) != len(images):
        raise ValueError(f"got {len(titles)} titles for {len(images)} images")
    ncols = min(ncols, len(images))
    nrows = -(-len(images) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(scale * ncols, scale * nrows * 1.15), squeeze=False
    )
    for index, ax in enumerate(axes.flat):
        ax.axis("off")
        if index < len(images):
            ax.imshow(images[index].numpy(), cmap="gray")
            if titles is not None:
                ax.set_title(titles[index], fontsize=7)
    fig.tight_layout()
    return fig


def plot_bars(
    values: dict[str, float], ylabel: str, title: str | None = None, fmt: str = "{:.2f}"
) -> Figure:
    """Bar chart of measurements (times, throughputs, accuracies) with each value written on its bar."""
    if not values:
        raise ValueError("values is empty: pass {label: number, ...}")
    fig, ax = plt.subplots(figsize=(1.2 * len(values) + 2.5, 3.5))
    labels, heights = list(values), [float(v) for v in values.values()]
    bars = ax.bar(labels, heights, color=[f"C{i}" for i in range(len(values))])
    for bar, height in zip(bars, heights, strict=True):
        ax.annotate(
            fmt.format(height),
            (bar.get_x() + bar.get_width() / 2, height),
            ha="center",
            va="bottom",
        )
    ax.set(ylabel=ylabel, title=title or "")
    fig.tight_layout()
    return fig
