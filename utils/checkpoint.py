"""Checkpoints: one dict, written atomically, loaded safely. Taught in notebooks/08_saving_and_loading.ipynb.

A checkpoint holds the model, the optimizer (and scheduler), the epoch, the run config, the
history so far and every random-number state, so training resumed from it continues exactly as
if it had never stopped. Only tensors and plain Python types go in, so `torch.load` can keep its
safe default `weights_only=True`.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePath
from typing import BinaryIO

import torch
from torch import nn

from utils.seed import rng_state, set_rng_state


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, empty, damaged, or does not fit the model; the message says which."""


def _shown(path: str | PurePath) -> str:
    """`path` with forward slashes, so an error message reads the same on Windows as elsewhere."""
    return (path if isinstance(path, PurePath) else Path(path)).as_posix()


def atomic_write(path: str | Path, write: Callable[[BinaryIO], object]) -> Path:
    """Call `write(file)` on a temporary file in the same folder, then rename it over `path`.

    The rename is atomic: after a crash mid-write, `path` is either the old file or the new one,
    never half of each. The temporary file is removed if the write fails.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())  # the bytes are on disk before the name points at them
        os.replace(temp_name, path)
    except BaseException:  # KeyboardInterrupt too: never leave the temporary file behind
        Path(temp_name).unlink(missing_ok=True)
        raise
    return path


def atomic_save(obj: object, path: str | Path) -> Path:
    """`torch.save(obj, path)` through `atomic_write`: the old file or the new one, never half."""
    return atomic_write(path, lambda file: torch.save(obj, file))


def save_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    epoch: int = 0,
    config: dict | None = None,
    scheduler=None,
    history: dict | None = None,
    generator: torch.Generator | None = None,
    extra: dict | None = None,
) -> Path:
    """Save one dict (model, optimizer, scheduler, epoch, config, history, RNG states) atomically."""
    if config is not None and not isinstance(config, dict):
        raise TypeError(
            f"config must be a plain dict (use RunConfig.to_dict()), got {type(config).__name__}: "
            "custom classes would make the file unloadable with weights_only=True."
        )
    checkpoint = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "epoch": epoch,
        "config": config,
        "history": history,
        "rng": rng_state(generator),
        "extra": extra,
    }
    return atomic_save(checkpoint, path)


def read_checkpoint(path: str | Path, map_location: str | torch.device | None = "cpu") -> dict:
    """`torch.load(path, weights_only=True)` with clear errors that name the file."""
    path = Path(path)
    shown = _shown(path)
    if not path.is_file():
        raise CheckpointError(
            f"No checkpoint at {shown}. Check the path, or start without resuming."
        )
    if path.stat().st_size == 0:
        raise CheckpointError(
            f"Checkpoint {shown} is empty (0 bytes): a save was interrupted. "
            "Use an earlier checkpoint, or save with utils.checkpoint.atomic_save next time."
        )
    with open(path, "rb") as file:
        head = file.read(4)
    if head != b"PK\x03\x04":  # torch.save writes a zip archive; anything else is not ours
        raise CheckpointError(
            f"Checkpoint {shown} is not a file written by torch.save (it does not start like a "
            "zip archive): it is damaged or another kind of file. Use an earlier checkpoint."
        )
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        if "weights_only" in str(err) or "Weights only" in str(err):
            raise CheckpointError(
                f"Checkpoint {shown} holds Python objects other than tensors and plain types, so the "
                "safe loader refused it (unpickling can run arbitrary code). If you trust where the "
                "file came from, allow its classes with torch.serialization.safe_globals([...])."
            ) from err
        raise CheckpointError(f"Checkpoint {shown} is damaged and cannot be read ({err}).") from err
    except (RuntimeError, EOFError, OSError, ValueError) as err:
        reason = (
            str(err).split(". This is an internal miniz error")[0].strip() or type(err).__name__
        )
        raise CheckpointError(
            f"Checkpoint {shown} is damaged or not a PyTorch file ({reason}). "
            "Use an earlier checkpoint."
        ) from err


def check_state_dict(model: nn.Module, state_dict: dict, source: str = "the state_dict") -> None:
    """Raise a CheckpointError listing missing keys, unexpected keys and shape mismatches, if any."""
    expected = model.state_dict()
    missing = [key for key in expected if key not in state_dict]
    unexpected = [key for key in state_dict if key not in expected]
    mismatched = [
        f"{key}: file {tuple(state_dict[key].shape)} vs model {tuple(expected[key].shape)}"
        for key in expected
        if key in state_dict and tuple(state_dict[key].shape) != tuple(expected[key].shape)
    ]
    if missing or unexpected or mismatched:
        lines = [f"{source} does not fit {type(model).__name__}:"]
        if missing:
            lines.append(f"  missing keys (in the model, not in the file): {missing}")
        if unexpected:
            lines.append(f"  unexpected keys (in the file, not in the model): {unexpected}")
        if mismatched:
            lines.append(f"  shape mismatches: {mismatched}")
        lines.append("Build the model with the same architecture and settings that saved it.")
        raise CheckpointError("\n".join(lines))


def check_config(checkpoint: dict, expect_config: dict, source: str = "The checkpoint") -> None:
    """Raise a CheckpointError naming every key of `expect_config` whose stored value differs.

    Only the keys of `expect_config` are compared: leave out a setting you change on purpose.
    """
    stored = checkpoint.get("config")
    if not isinstance(stored, dict):
        raise CheckpointError(
            f"{source} holds no config, so it cannot be checked against yours. Resume without "
            "expect_config if you know it is the right run, or start a new run."
        )
    differences = []
    for key, value in expect_config.items():
        if key not in stored:
            differences.append(f"  {key}: not in the checkpoint, now {value!r}")
        elif stored[key] != value:
            differences.append(f"  {key}: checkpoint {stored[key]!r}, now {value!r}")
    if differences:
        lines = [f"{source} was saved with another config; resuming would mix two runs:"]
        lines += differences
        lines.append(
            "Resume with the checkpoint's settings, or start these settings in a new run "
            "folder. To change a setting on purpose, leave its key out of expect_config."
        )
        raise CheckpointError("\n".join(lines))


def load_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler=None,
    generator: torch.Generator | None = None,
    restore_rng: bool = True,
    map_location: str | torch.device | None = "cpu",
    expect_config: dict | None = None,
) -> dict:
    """Load a `save_checkpoint` file into fresh objects (model, optimizer, ...); return the dict.

    With `restore_rng=True` the random states (and `generator`'s) are restored too, so training
    resumed from here is bit-identical to training that never stopped. With `expect_config`, a
    file whose stored config differs in any of its keys is refused before anything is loaded.
    """
    checkpoint = read_checkpoint(path, map_location=map_location)
    shown = _shown(path)
    if not isinstance(checkpoint, dict) or "model" not in checkpoint:
        raise CheckpointError(
            f"{shown} is not a training checkpoint (no 'model' entry). A bare state_dict is loaded "
            "with model.load_state_dict(torch.load(path, weights_only=True))."
        )
    if expect_config is not None:
        check_config(checkpoint, expect_config, source=f"Checkpoint {shown}")
    check_state_dict(model, checkpoint["model"], source=f"Checkpoint {shown}")
    model.load_state_dict(checkpoint["model"])
    if optimizer is not None:
        if checkpoint.get("optimizer") is None:
            raise CheckpointError(f"Checkpoint {shown} holds no optimizer state to resume from.")
        optimizer.load_state_dict(checkpoint["optimizer"])
    if scheduler is not None:
        if checkpoint.get("scheduler") is None:
            raise CheckpointError(f"Checkpoint {shown} holds no scheduler state to resume from.")
        scheduler.load_state_dict(checkpoint["scheduler"])
    if restore_rng:
        try:
            set_rng_state(checkpoint["rng"], generator)
        except ValueError as err:  # no generator state in the file
            raise CheckpointError(f"Checkpoint {shown}: {err}") from None
    return checkpoint
