"""The training loop, written inline in notebooks/04_training_loop.ipynb, kept here for later chapters."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
from torch import nn


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
    _check_not_empty(total_count)
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
    min_delta: float = 0.0,
    run_dir: str | Path | None = None,
    checkpoint_every: int | None = None,
    resume_from: str | Path | None = None,
    config: dict | None = None,
) -> dict:
    """Train for up to `num_epochs` in all, evaluating after each; return the history dict.

    `patience`: stop when validation accuracy has not improved by more than `min_delta` for that
    many epochs. A non-finite training loss stops training and sets history["diverged"] instead
    of crashing. `on_epoch_end(epoch, history)` runs after each epoch.
    `run_dir` + `checkpoint_every=N`: write `run_dir/checkpoint.pt` (atomically) every N epochs
    and after the last one, and `run_dir/history.json` every epoch. `resume_from`: a checkpoint to
    continue from; with the same `train_loader` generator seed the result is bit-identical to a
    run that never stopped. Taught in notebooks/05_cnn_fashion_mnist.ipynb to 07_saving_and_loading.
    """
    from utils.checkpoint import load_checkpoint, save_checkpoint

    if num_epochs < 1:
        raise ValueError(f"num_epochs must be >= 1, got {num_epochs}")
    if patience is not None and patience < 1:
        raise ValueError(f"patience must be None or >= 1, got {patience}")
    if checkpoint_every is not None and (checkpoint_every < 1 or run_dir is None):
        raise ValueError(
            "checkpoint_every needs an int >= 1 and a run_dir to write into, "
            f"got checkpoint_every={checkpoint_every}, run_dir={run_dir}"
        )
    generator = getattr(train_loader, "generator", None)  # the DataLoader's shuffling generator
    history = {
        "train_loss": [],
        "val_loss": [],
        "val_acc": [],
        "lr": [],
        "diverged": False,
        "stopped_early": False,
        "best_epoch": None,
    }
    start_epoch = 1
    if resume_from is not None:
        checkpoint = load_checkpoint(resume_from, model, optimizer, scheduler, generator=generator)
        if checkpoint.get("history") is None:
            raise ValueError(f"{resume_from} holds no history; it was not written by fit().")
        history = checkpoint["history"]
        start_epoch = checkpoint["epoch"] + 1
    best_acc = max(history["val_acc"], default=-math.inf)
    epochs_without_gain = (
        0 if history["best_epoch"] is None else start_epoch - 1 - history["best_epoch"]
    )

    def save(epoch: int) -> None:
        save_checkpoint(
            Path(run_dir) / "checkpoint.pt",
            model,
            optimizer,
            epoch,
            config,
            scheduler,
            history,
            generator,
        )

    epochs = range(start_epoch, num_epochs + 1)
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
        if val_acc > best_acc + min_delta:
            best_acc, epochs_without_gain, history["best_epoch"] = val_acc, 0, epoch
        else:
            epochs_without_gain += 1
            if patience is not None and epochs_without_gain >= patience:
                history["stopped_early"] = True
        if run_dir is not None:
            (Path(run_dir) / "history.json").write_text(json.dumps(history, indent=1) + "\n")
            last = epoch == num_epochs or history["stopped_early"]
            if checkpoint_every is not None and (epoch % checkpoint_every == 0 or last):
                save(epoch)
        if on_epoch_end is not None:
            on_epoch_end(epoch, history)
        if history["stopped_early"]:
            break
    return history
