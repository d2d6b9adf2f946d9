"""The training loop, written inline in notebooks/04_training_loop.ipynb, kept here for later chapters."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
from torch import nn


def train_one_epoch(
    model: nn.Module,
    loader: Iterable,
    loss_fn: Callable,
    optimizer: torch.optim.Optimizer,
    device: torch.device | str = "cpu",
) -> float:
    """One pass over `loader`; returns the mean loss per example."""
    model.train()  # Dropout active, BatchNorm updates its running statistics
    total_loss, total_count = 0.0, 0
    for X, y in loader:
        X, y = X.to(device), y.to(device)
        loss = loss_fn(model(X), y)  # forward
        optimizer.zero_grad()  # clear the gradients of the previous step
        loss.backward()  # backward: fill .grad of every parameter
        optimizer.step()  # update the parameters
        total_loss += loss.item() * len(y)
        total_count += len(y)
    return total_loss / total_count


@torch.no_grad()  # no graph: less memory, faster
def evaluate(
    model: nn.Module,
    loader: Iterable,
    loss_fn: Callable,
    device: torch.device | str = "cpu",
) -> tuple[float, float]:
    """Mean loss and accuracy over `loader`, in eval mode and without building a graph."""
    model.eval()  # Dropout off, BatchNorm uses its running statistics
    total_loss, correct, total_count = 0.0, 0, 0
    for X, y in loader:
        X, y = X.to(device), y.to(device)
        logits = model(X)
        total_loss += loss_fn(logits, y).item() * len(y)
        correct += (logits.argmax(dim=1) == y).sum().item()
        total_count += len(y)
    return total_loss / total_count, correct / total_count


def fit(
    model: nn.Module,
    train_loader: Iterable,
    val_loader: Iterable,
    loss_fn: Callable,
    optimizer: torch.optim.Optimizer,
    num_epochs: int,
    device: torch.device | str = "cpu",
    scheduler=None,
    patience: int | None = None,
    progress: bool = False,
    on_epoch_end: Callable[[int, dict], None] | None = None,
) -> dict:
    """Train for `num_epochs`, evaluating after each; return the history dict.

    `patience`: stop when validation accuracy has not improved for that many epochs.
    A non-finite training loss stops training and sets history["diverged"] instead of crashing.
    `on_epoch_end(epoch, history)` runs after each epoch (saving a checkpoint, for example).
    """
    history = {"train_loss": [], "val_loss": [], "val_acc": [], "lr": [], "diverged": False,
               "stopped_early": False, "best_epoch": None}
    best_acc, epochs_without_gain = -math.inf, 0
    epochs = range(1, num_epochs + 1)
    if progress:
        from tqdm.auto import tqdm

        epochs = tqdm(epochs, desc="epochs")
    for epoch in epochs:
        history["lr"].append(optimizer.param_groups[0]["lr"])
        train_loss = train_one_epoch(model, train_loader, loss_fn, optimizer, device)
        history["train_loss"].append(train_loss)
        if not math.isfinite(train_loss):
            history["diverged"] = True
            break
        val_loss, val_acc = evaluate(model, val_loader, loss_fn, device)
        history["val_loss"].append(val_loss)
        history["val_acc"].append(val_acc)
        if scheduler is not None:
            scheduler.step()
        if on_epoch_end is not None:
            on_epoch_end(epoch, history)
        if val_acc > best_acc:
            best_acc, epochs_without_gain, history["best_epoch"] = val_acc, 0, epoch
        else:
            epochs_without_gain += 1
            if patience is not None and epochs_without_gain >= patience:
                history["stopped_early"] = True
                break
    return history
