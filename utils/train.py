"""The training loop the whole book uses, written inline in notebooks/04_training_loop.ipynb.

`fit` (epochs, validation, history) calls `train_one_epoch` and `evaluate`; what later chapters
change is a keyword: a scheduler stepped per batch or per epoch (06, 07), autocast and a
GradScaler (09), a per-step callback, early stopping (`EarlyStopping`, 07) and checkpoints
(`Checkpointer`, 08). `confusion_matrix` counts what `evaluate`'s predictions got wrong (06).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
from torch import nn
from torch.optim.lr_scheduler import LRScheduler

from utils.checkpoint import CheckpointError, atomic_write, load_checkpoint, save_checkpoint
from utils.config import RunConfig


def _check_not_empty(count: int) -> None:
    if count == 0:
        raise ValueError(
            "The loader yielded no examples. Check that its dataset is not empty, and that "
            "drop_last=True is not dropping the only batch (dataset smaller than batch_size)."
        )


def _sum_dtype(device: torch.device) -> torch.dtype:
    """The dtype a running sum of losses is kept in on `device`: float64, where the device has it."""
    return torch.float32 if device.type == "mps" else torch.float64  # MPS has no float64


def train_one_epoch(
    model: nn.Module,
    loader: Iterable,
    loss_fn: Callable,
    optimizer: torch.optim.Optimizer,
    device: torch.device | str = "cpu",
    *,
    scheduler: LRScheduler | None = None,
    autocast_dtype: torch.dtype | None = None,
    scaler: torch.amp.GradScaler | None = None,
    memory_format: torch.memory_format | None = None,
    on_step: Callable[[torch.Tensor], None] | None = None,
) -> float:
    """One pass over `loader`; returns the mean loss per example (`loss_fn` must average over its batch).

    The loss is added up on the device and read once, at the end: no sync per step (chapter 09).
    Options: `scheduler` is stepped after every optimizer step (a per-batch schedule, chapter 06);
    `autocast_dtype` runs the forward pass under `torch.autocast` in that 16-bit type and `scaler`
    (a `torch.amp.GradScaler`) scales the loss for float16 (chapter 09);
    `memory_format=torch.channels_last` feeds NHWC images (convert the model too); `on_step(loss)`
    gets each step's detached batch loss, still on the device (`.item()` on it waits for the device).
    """
    device = torch.device(device)
    model.train()  # Dropout active, BatchNorm updates its running statistics
    total_loss = torch.zeros((), dtype=_sum_dtype(device), device=device)
    total_count = 0
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
        if scheduler is not None:
            scheduler.step()  # a per-batch schedule: once after every optimizer step
        total_loss += loss.detach().to(total_loss.dtype) * len(y)  # on the device: no wait here
        total_count += len(y)
        if on_step is not None:
            on_step(loss.detach())
    _check_not_empty(total_count)
    return total_loss.item() / total_count  # the epoch's one sync


@torch.no_grad()  # no graph: less memory (chapter 04 measures it)
def evaluate(
    model: nn.Module,
    loader: Iterable,
    loss_fn: Callable,
    device: torch.device | str = "cpu",
    *,
    autocast_dtype: torch.dtype | None = None,
    memory_format: torch.memory_format | None = None,
) -> tuple[float, float]:
    """Mean loss and accuracy over `loader`, in eval mode and without building a graph.

    `autocast_dtype` and `memory_format` as in `train_one_epoch`; the sums stay on the device.
    """
    device = torch.device(device)
    model.eval()  # Dropout off, BatchNorm uses its running statistics
    total_loss = torch.zeros((), dtype=_sum_dtype(device), device=device)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    total_count = 0
    for X, y in loader:
        X = X.to(device, memory_format=memory_format or torch.preserve_format)
        y = y.to(device)
        with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            logits = model(X)
            total_loss += loss_fn(logits, y).to(total_loss.dtype) * len(y)
        correct += (logits.argmax(dim=1) == y).sum()
        total_count += len(y)
    _check_not_empty(total_count)
    return total_loss.item() / total_count, correct.item() / total_count


def confusion_matrix(
    targets: torch.Tensor, predictions: torch.Tensor, num_classes: int
) -> torch.Tensor:
    """Counts (num_classes, num_classes): row = true class, column = predicted class."""
    targets, predictions = torch.as_tensor(targets), torch.as_tensor(predictions)
    if targets.shape != predictions.shape or targets.dim() != 1:
        raise ValueError(
            f"targets and predictions must be 1-D and the same length, got shapes "
            f"{tuple(targets.shape)} and {tuple(predictions.shape)}"
        )
    for name, values in (("targets", targets), ("predictions", predictions)):
        if len(values) and (values.min() < 0 or values.max() >= num_classes):
            raise ValueError(
                f"{name} must lie in 0..{num_classes - 1}, found {int(values.min())}..{int(values.max())}"
            )
    flat = targets.long() * num_classes + predictions.long()
    return torch.bincount(flat, minlength=num_classes**2).reshape(num_classes, num_classes)


def new_history() -> dict:
    """What `fit` records: one entry per epoch in each list, and how the run ended."""
    return {"train_loss": [], "val_loss": [], "val_acc": [], "lr": [], "diverged": False,
            "stopped_early": False}  # fmt: skip


SCHEDULER_STEPS = ("batch", "epoch")


def fit(
    model: nn.Module,
    train_loader: Iterable,
    val_loader: Iterable,
    loss_fn: Callable,
    optimizer: torch.optim.Optimizer,
    num_epochs: int,
    device: torch.device | str = "cpu",
    *,
    scheduler: LRScheduler | None = None,
    scheduler_step: str | None = None,
    autocast_dtype: torch.dtype | None = None,
    scaler: torch.amp.GradScaler | None = None,
    memory_format: torch.memory_format | None = None,
    on_step: Callable[[torch.Tensor], None] | None = None,
    early_stopping: EarlyStopping | None = None,
    checkpointer: Checkpointer | None = None,
    on_epoch_end: Callable[[int, dict], None] | None = None,
    progress: bool = False,
) -> dict:
    """Train for up to `num_epochs` in all, validating after each; return the history dict.

    `scheduler_step` says when `scheduler` steps: "batch" (after every optimizer step, e.g.
    OneCycleLR) or "epoch" (after each epoch, e.g. StepLR). `autocast_dtype`, `scaler`,
    `memory_format` and `on_step` go to `train_one_epoch` (and the first two to `evaluate`).
    A non-finite training loss stops the run and sets history["diverged"] instead of crashing.
    `early_stopping` and `checkpointer` stop and save; `on_epoch_end(epoch, history)` runs last
    in each epoch. Introduced in notebooks/04_training_loop.ipynb, used from chapter 06 on.
    """
    if not isinstance(num_epochs, int) or num_epochs < 1:
        raise ValueError(f"num_epochs must be an int >= 1, got {num_epochs!r}")
    _check_scheduler_step(scheduler, scheduler_step)
    generator = getattr(train_loader, "generator", None)  # the DataLoader's shuffling generator
    parts = (model, optimizer, scheduler, generator, early_stopping, scaler)  # a checkpoint's
    history, start = new_history(), 1
    if checkpointer is not None and checkpointer.resume:
        history, start = checkpointer.restore(*parts)
    per_batch = scheduler if scheduler_step == "batch" else None
    for epoch in _epochs(start, num_epochs, progress):
        history["lr"].append(optimizer.param_groups[0]["lr"])  # the rate the epoch starts with
        train_loss = train_one_epoch(
            model, train_loader, loss_fn, optimizer, device, scheduler=per_batch,
            autocast_dtype=autocast_dtype, scaler=scaler, memory_format=memory_format,
            on_step=on_step,
        )  # fmt: skip
        history["train_loss"].append(train_loss)
        if not math.isfinite(train_loss):
            history["diverged"] = True  # reported, not raised: a sweep survives its bad members
            break
        val_loss, val_acc = evaluate(
            model, val_loader, loss_fn, device,
            autocast_dtype=autocast_dtype, memory_format=memory_format,
        )  # fmt: skip
        history["val_loss"].append(val_loss)
        history["val_acc"].append(val_acc)
        if scheduler is not None and scheduler_step == "epoch":
            scheduler.step()
        if early_stopping is not None and early_stopping.step(epoch, val_acc, model):
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


def _check_scheduler_step(scheduler: LRScheduler | None, scheduler_step: str | None) -> None:
    """A scheduler needs to be told when it steps; `scheduler_step` alone is a mistake too."""
    if scheduler is None:
        if scheduler_step is not None:
            raise ValueError(f"scheduler_step={scheduler_step!r} was given without a scheduler.")
        return
    if scheduler_step not in SCHEDULER_STEPS:
        raise ValueError(
            f"Say when the scheduler steps, scheduler_step='batch' or 'epoch' (got "
            f"{scheduler_step!r}): 'batch' steps it after every optimizer step (OneCycleLR, a "
            "cosine schedule built with total_steps = num_epochs * len(train_loader)); 'epoch' "
            "steps it once after each epoch (StepLR, a schedule counted in epochs)."
        )


def _epochs(start: int, num_epochs: int, progress: bool) -> Iterable[int]:
    """Epoch numbers start..num_epochs, behind a progress bar if asked."""
    epochs = range(start, num_epochs + 1)
    if progress:
        from tqdm.auto import tqdm

        return tqdm(epochs, desc="epochs")
    return epochs


# What fit does at the end of an epoch besides training: stop early (notebooks/07_tuning.ipynb)
# and save (notebooks/08_saving_and_loading.ipynb).
class EarlyStopping:
    """Stop after `patience` epochs in a row without a gain of more than `min_delta` on the best.

    The score is validation accuracy. The best epoch is the one with the highest score, however
    small its gain; with `restore_best=True` a copy of its weights is kept, and `fit` puts them
    back into the model when training ends, so you keep the best model, not the last one.
    """

    def __init__(self, patience: int, min_delta: float = 0.0, restore_best: bool = False) -> None:
        if not isinstance(patience, int) or patience < 1:
            raise ValueError(f"patience must be an int >= 1, got {patience!r}")
        if not min_delta >= 0:
            raise ValueError(f"min_delta must be >= 0, got {min_delta!r}")
        self.patience, self.min_delta, self.restore_best = patience, min_delta, restore_best
        self.best_acc = -math.inf
        self.best_epoch: int | None = None  # epochs count from 1, as in fit's history
        self.epochs_without_gain = 0
        self.best_weights: dict[str, torch.Tensor] | None = None

    def step(self, epoch: int, val_acc: float, model: nn.Module) -> bool:
        """Record one epoch's validation accuracy; return True when training should stop."""
        if val_acc > self.best_acc + self.min_delta:
            self.epochs_without_gain = 0
        else:
            self.epochs_without_gain += 1  # a gain of min_delta or less is noise: no reset
        if val_acc > self.best_acc:
            self.best_acc, self.best_epoch = val_acc, epoch
            if self.restore_best:  # a copy: the model's own tensors keep changing
                self.best_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
        return self.epochs_without_gain >= self.patience

    def restore(self, model: nn.Module) -> None:
        """Load the best epoch's weights into `model` (needs `restore_best=True`)."""
        if self.best_weights is None:
            raise RuntimeError(
                "No best weights to restore: create EarlyStopping(..., restore_best=True) and "
                "train at least one epoch with it."
            )
        model.load_state_dict(self.best_weights)

    def state_dict(self) -> dict:
        """Counters and best weights as tensors and plain types, for a checkpoint."""
        return {
            "best_acc": self.best_acc,
            "best_epoch": self.best_epoch,
            "epochs_without_gain": self.epochs_without_gain,
            "best_weights": self.best_weights,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from a `state_dict()` (patience and min_delta stay this object's own)."""
        self.best_acc, self.best_epoch = state["best_acc"], state["best_epoch"]
        self.epochs_without_gain = state["epochs_without_gain"]
        self.best_weights = state["best_weights"]


class Checkpointer:
    """Write `run_dir/checkpoint.pt` and `run_dir/history.json` every `every` epochs and at the end.

    Both are written atomically (temporary file, then rename), so a crash costs at most `every`
    epochs and never leaves half a file. `resume=True`: `fit` first continues from the checkpoint,
    refusing it if its config differs from `expect_config` in any of that dict's keys.
    """

    def __init__(
        self,
        run_dir: str | Path,
        every: int = 1,
        config: dict | None = None,
        resume: bool = False,
        expect_config: dict | None = None,
    ) -> None:
        if not isinstance(every, int) or every < 1:
            raise ValueError(
                f"every must be an int >= 1 (epochs between checkpoints), got {every!r}"
            )
        self.run_dir, self.every, self.config, self.resume = Path(run_dir), every, config, resume
        self.expect_config = expect_config  # resume refuses a checkpoint whose config differs

    @classmethod
    def for_run(
        cls,
        run_dir: str | Path,
        config: RunConfig,
        resume: bool = False,
        check_config: bool = False,
    ) -> Checkpointer:
        """Every `config.checkpoint_every` epochs, with `config` inside each checkpoint.

        `check_config=True`: resuming refuses a checkpoint whose config differs from `config` in
        any field but `num_epochs` (a ceiling you may raise to train longer).
        """
        expected = None
        if check_config:
            expected = {k: v for k, v in config.to_dict().items() if k != "num_epochs"}
        return cls(run_dir, config.checkpoint_every, config.to_dict(), resume, expected)

    @property
    def path(self) -> Path:
        return self.run_dir / "checkpoint.pt"

    def due(self, epoch: int, last: bool) -> bool:
        """Whether to save after `epoch`: every `every` epochs, and after the last one."""
        return last or epoch % self.every == 0

    def save(
        self,
        epoch: int,
        history: dict,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler,
        generator: torch.Generator | None,
        early_stopping: EarlyStopping | None,
        scaler: torch.amp.GradScaler | None = None,
    ) -> None:
        """The checkpoint (with the early-stopping and GradScaler states), then its history, as JSON."""
        extra = {}
        if early_stopping is not None:
            extra["early_stopping"] = early_stopping.state_dict()
        if scaler is not None:  # its scale: resuming without it skips steps again (chapter 09)
            extra["grad_scaler"] = scaler.state_dict()
        save_checkpoint(
            self.path,
            model,
            optimizer,
            epoch,
            self.config,
            scheduler,
            history,
            generator,
            extra or None,
        )
        text = json.dumps(history, indent=1) + "\n"
        atomic_write(self.run_dir / "history.json", lambda file: file.write(text.encode()))

    def restore(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler,
        generator: torch.Generator | None,
        early_stopping: EarlyStopping | None,
        scaler: torch.amp.GradScaler | None = None,
    ) -> tuple[dict, int]:
        """Load the checkpoint into these objects; return (history so far, next epoch)."""
        checkpoint = load_checkpoint(
            self.path, model, optimizer, scheduler, generator=generator,
            expect_config=self.expect_config,
        )  # fmt: skip
        if checkpoint.get("history") is None:
            raise CheckpointError(f"{self.path} holds no history; it was not written by fit().")
        if early_stopping is not None:
            state = (checkpoint.get("extra") or {}).get("early_stopping")
            if state is None:
                raise CheckpointError(
                    f"{self.path} holds no early-stopping state: the run was saved without "
                    "early_stopping, so it cannot resume with it."
                )
            early_stopping.load_state_dict(state)
        if scaler is not None:
            state = (checkpoint.get("extra") or {}).get("grad_scaler")
            if state is None:
                raise CheckpointError(
                    f"{self.path} holds no GradScaler state: the run was saved without a scaler, "
                    "so it cannot resume with one."
                )
            scaler.load_state_dict(state)
        return checkpoint["history"], checkpoint["epoch"] + 1
