"""The two things `utils.train.fit` does at the end of an epoch besides training: stop, save.

`EarlyStopping` is taught in notebooks/06_tuning.ipynb, `Checkpointer` in
notebooks/07_saving_and_loading.ipynb. Each is a small object with state, so `fit` stays a plain
loop and each piece can be tested on its own.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from torch import nn

from utils.checkpoint import CheckpointError, atomic_write, load_checkpoint, save_checkpoint
from utils.config import RunConfig


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
    ) -> None:
        """The checkpoint (with the early-stopping state), then the history it holds, as JSON."""
        extra = {"early_stopping": early_stopping.state_dict()} if early_stopping else None
        save_checkpoint(
            self.path, model, optimizer, epoch, self.config, scheduler, history, generator, extra
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
        return checkpoint["history"], checkpoint["epoch"] + 1
