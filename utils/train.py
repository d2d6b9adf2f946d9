"""The training loop, written inline in notebooks/04_training_loop.ipynb, kept here for later chapters."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
from torch import nn

from utils.callbacks import Checkpointer, EarlyStopping


def _check_not_empty(count: int) -> None:
    if count == 0:
        raise ValueError(
            "The loader yielded no examples. Check that its dataset is not empty, and that "
            "drop_last=True is not dropping the only batch (dataset smaller than batch_size)."
        )


def train_one_epoch(
    model: nn.Module,
    loader: Iterable,
    loss_fn: Callable,
    optimizer: torch.optim.Optimizer,
    device: torch.device | str = "cpu",
    *,
    autocast_dtype: torch.dtype | None = None,
    scaler: torch.amp.GradScaler | None = None,
    memory_format: torch.memory_format | None = None,
) -> float:
    """One pass over `loader`; returns the mean loss per example (`loss_fn` must average over its batch).

    The three keyword options are chapter 08's additions: `autocast_dtype` runs the forward pass
    under `torch.autocast` in that 16-bit type, `scaler` (a `torch.amp.GradScaler`) scales the loss
    for float16, `memory_format=torch.channels_last` feeds NHWC images (convert the model too).
    """
    device = torch.device(device)
    model.train()  # Dropout active, BatchNorm updates its running statistics
    total_loss, total_count = 0.0, 0
    for X, y in loader:
        X = X.to(device, memory_format=memory_format or torch.preserve_format)
        y = y.to(device)
        with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            loss = loss_fn(model(X), y)  # forward (16-bit inside autocast, the loss in float32)
        optimizer.zero_grad()  # clear the gradients of the previous step
        if scaler is None:
            loss.backward()  # backward: fill .grad of every parameter
            optimizer.step()  # update the parameters
        else:
            scaler.scale(loss).backward()  # scaled so small float16 gradients do not become 0
            scaler.step(optimizer)  # unscale; skip the step if a gradient is inf/nan
            scaler.update()
        total_loss += loss.item() * len(y)
        total_count += len(y)
    _check_not_empty(total_count)
    return total_loss / total_count


@torch.no_grad()  # no graph: less memory (chapter 04 measures it)
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
    _check_not_empty(total_count)
    return total_loss / total_count, correct / total_count


def new_history() -> dict:
    """What `fit` records: one entry per epoch in each list, and how the run ended."""
    return {"train_loss": [], "val_loss": [], "val_acc": [], "lr": [], "diverged": False,
            "stopped_early": False}  # fmt: skip


def fit(
    model: nn.Module,
    train_loader: Iterable,
    val_loader: Iterable,
    loss_fn: Callable,
    optimizer: torch.optim.Optimizer,
    num_epochs: int,
    device: torch.device | str = "cpu",
    *,
    scheduler=None,
    early_stopping: EarlyStopping | None = None,
    checkpointer: Checkpointer | None = None,
    on_epoch_end: Callable[[int, dict], None] | None = None,
    progress: bool = False,
) -> dict:
    """Train for up to `num_epochs` in all, validating after each; return the history dict.

    A non-finite training loss stops the run and sets history["diverged"] instead of crashing.
    `early_stopping` and `checkpointer` (utils.callbacks) stop and save; `on_epoch_end(epoch,
    history)` runs last in each epoch. Taught in notebooks/05_cnn_fashion_mnist.ipynb to 07.
    """
    if not isinstance(num_epochs, int) or num_epochs < 1:
        raise ValueError(f"num_epochs must be an int >= 1, got {num_epochs!r}")
    generator = getattr(train_loader, "generator", None)  # the DataLoader's shuffling generator
    parts = (model, optimizer, scheduler, generator, early_stopping)  # what a checkpoint holds
    history, start = new_history(), 1
    if checkpointer is not None and checkpointer.resume:
        history, start = checkpointer.restore(*parts)
    for epoch in _epochs(start, num_epochs, progress):
        if not train_and_validate(
            model, train_loader, val_loader, loss_fn, optimizer, device, history
        ):
            break  # the training loss is not finite: history["diverged"] says so
        if scheduler is not None:
            scheduler.step()
        if early_stopping is not None and early_stopping.step(epoch, history["val_acc"][-1], model):
            history["stopped_early"] = True
        last = epoch == num_epochs or history["stopped_early"]
        if checkpointer is not None and checkpointer.due(epoch, last):
            checkpointer.save(epoch, history, *parts)
        if on_epoch_end is not None:
            on_epoch_end(epoch, history)
        if history["stopped_early"]:
            break
    if early_stopping is not None and early_stopping.best_weights is not None:
        early_stopping.restore(model)  # the best epoch's weights, not the last epoch's
    return history


def train_and_validate(
    model: nn.Module,
    train_loader: Iterable,
    val_loader: Iterable,
    loss_fn: Callable,
    optimizer: torch.optim.Optimizer,
    device: torch.device | str,
    history: dict,
) -> bool:
    """One epoch of `fit`, appended to `history`; False if the training loss is not finite."""
    history["lr"].append(optimizer.param_groups[0]["lr"])
    history["train_loss"].append(train_one_epoch(model, train_loader, loss_fn, optimizer, device))
    if not math.isfinite(history["train_loss"][-1]):
        history["diverged"] = True  # reported, not raised: a sweep survives its bad members
        return False
    val_loss, val_acc = evaluate(model, val_loader, loss_fn, device)
    history["val_loss"].append(val_loss)
    history["val_acc"].append(val_acc)
    return True


def _epochs(start: int, num_epochs: int, progress: bool) -> Iterable[int]:
    """Epoch numbers start..num_epochs, behind a progress bar if asked."""
    epochs = range(start, num_epochs + 1)
    if progress:
        from tqdm.auto import tqdm

        return tqdm(epochs, desc="epochs")
    return epochs
