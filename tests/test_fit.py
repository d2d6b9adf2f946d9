import json
import math

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from utils.checkpoint import CheckpointError, read_checkpoint
from utils.train import Checkpointer, EarlyStopping, evaluate, fit


def make_run(seed=0, lr=0.05):
    """A small model with Dropout, a shuffling loader and a scheduler: every source of randomness."""
    X = torch.randn(96, 8, generator=torch.Generator().manual_seed(0))  # the same data every time
    torch.manual_seed(seed)
    y = (X[:, 0] > 0).long()
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=4)
    train_loader = DataLoader(
        TensorDataset(X[:64], y[:64]),
        batch_size=16,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
    )
    val_loader = DataLoader(TensorDataset(X[64:], y[64:]), batch_size=32)
    return model, optimizer, scheduler, train_loader, val_loader


def same_weights(a, b):
    return all(
        torch.equal(x, y)
        for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    )


def test_history_has_one_entry_per_epoch():
    model, optimizer, scheduler, train_loader, val_loader = make_run()
    history = fit(
        model,
        train_loader,
        val_loader,
        nn.CrossEntropyLoss(),
        optimizer,
        3,
        scheduler=scheduler,
        scheduler_step="epoch",
    )
    assert len(history["train_loss"]) == len(history["val_acc"]) == len(history["lr"]) == 3
    assert len(history["val_loss"]) == 3
    assert history["lr"][0] == 0.05 and history["lr"][1] < 0.05  # the scheduler stepped
    assert not history["diverged"] and not history["stopped_early"]


def fit_with(run, num_epochs, **kwargs):
    model, optimizer, scheduler, train_loader, val_loader = run
    return fit(
        model,
        train_loader,
        val_loader,
        nn.CrossEntropyLoss(),
        optimizer,
        num_epochs,
        scheduler=scheduler,
        scheduler_step="epoch",
        **kwargs,
    )


@pytest.mark.parametrize("patience", [None, 2])
def test_resume_is_bit_identical_to_an_uninterrupted_run(tmp_path, patience):
    def stopper():
        return None if patience is None else EarlyStopping(patience, restore_best=True)

    straight_run = make_run()
    straight = fit_with(straight_run, 4, early_stopping=stopper())

    first = make_run()
    fit_with(first, 2, early_stopping=stopper(), checkpointer=Checkpointer(tmp_path))
    torch.manual_seed(1234)  # a fresh process would not share the first run's random state
    second = make_run(seed=99)  # fresh objects, even a different initialization and shuffle seed
    resumed = fit_with(
        second, 4, early_stopping=stopper(), checkpointer=Checkpointer(tmp_path, resume=True)
    )
    assert same_weights(straight_run[0], second[0])
    assert resumed == straight
    assert read_checkpoint(tmp_path / "checkpoint.pt")["epoch"] == len(straight["val_acc"])


def test_checkpointer_writes_checkpoint_and_history_every_n_epochs(tmp_path):
    saved = []

    def record(epoch, history):
        path = tmp_path / "checkpoint.pt"
        on_disk = json.loads((tmp_path / "history.json").read_text()) if path.exists() else None
        saved.append(read_checkpoint(path)["epoch"] if path.exists() else None)
        if on_disk is not None:  # the history file always matches the checkpoint beside it
            assert on_disk == read_checkpoint(path)["history"]

    history = fit_with(
        make_run(), 5, checkpointer=Checkpointer(tmp_path, every=2), on_epoch_end=record
    )
    assert saved == [None, 2, 2, 4, 5]  # every 2 epochs, and after the last one
    assert json.loads((tmp_path / "history.json").read_text()) == history
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt", "history.json"]


def test_checkpoint_after_an_early_stop(tmp_path):
    run = make_run(lr=0.0)  # lr 0: accuracy never moves
    history = fit_with(
        run, 10, early_stopping=EarlyStopping(2), checkpointer=Checkpointer(tmp_path, every=5)
    )
    assert history["stopped_early"] and read_checkpoint(tmp_path / "checkpoint.pt")["epoch"] == 3


def test_checkpointer_for_run_takes_interval_and_config_from_a_run_config(tmp_path):
    from utils.config import RunConfig

    config = RunConfig(checkpoint_every=3, num_epochs=3)
    checkpointer = Checkpointer.for_run(tmp_path, config)
    assert checkpointer.every == 3 and checkpointer.config == config.to_dict()
    fit_with(make_run(), config.num_epochs, checkpointer=checkpointer)
    assert read_checkpoint(checkpointer.path)["config"] == config.to_dict()


def test_divergence_is_reported_not_raised():
    model, optimizer, _, train_loader, val_loader = make_run()
    with torch.no_grad():
        model[0].weight.fill_(float("nan"))
    history = fit(model, train_loader, val_loader, nn.CrossEntropyLoss(), optimizer, 3)
    assert history["diverged"] and len(history["train_loss"]) == 1
    assert math.isnan(history["train_loss"][0]) and history["val_acc"] == []


def test_early_stopping_stops_after_patience_epochs_without_gain():
    model, optimizer, _, train_loader, val_loader = make_run(lr=0.0)  # lr 0: accuracy never moves
    stopper = EarlyStopping(patience=2)
    history = fit(
        model,
        train_loader,
        val_loader,
        nn.CrossEntropyLoss(),
        optimizer,
        10,
        early_stopping=stopper,
    )
    assert history["stopped_early"] and stopper.best_epoch == 1
    assert len(history["val_acc"]) == 3


def test_min_delta_counts_tiny_gains_as_no_gain():
    stopper = EarlyStopping(patience=1, min_delta=1.0)
    history = fit_with(make_run(), 10, early_stopping=stopper)
    assert history["stopped_early"] and len(history["val_acc"]) == 2


def test_restore_best_leaves_the_best_epochs_weights_in_the_model():
    model, optimizer, _, train_loader, val_loader = make_run(lr=0.3)  # big steps: accuracy moves
    stopper = EarlyStopping(patience=3, restore_best=True)
    history = fit(
        model, train_loader, val_loader, nn.CrossEntropyLoss(), optimizer, 8, early_stopping=stopper
    )
    best = history["val_acc"][stopper.best_epoch - 1]
    assert best == max(history["val_acc"]) and history["val_acc"][-1] < best  # the last is worse
    assert evaluate(model, val_loader, nn.CrossEntropyLoss())[1] == best


def test_bad_num_epochs():
    with pytest.raises(ValueError, match="num_epochs must be an int >= 1, got 0"):
        fit_with(make_run(), 0)


def test_resume_from_missing_file_names_it(tmp_path):
    with pytest.raises(CheckpointError, match="No checkpoint at .*gone.*checkpoint.pt"):
        fit_with(make_run(), 2, checkpointer=Checkpointer(tmp_path / "gone", resume=True))


def test_resume_with_early_stopping_needs_its_state(tmp_path):
    fit_with(make_run(), 1, checkpointer=Checkpointer(tmp_path))
    with pytest.raises(CheckpointError, match="holds no early-stopping state"):
        fit_with(
            make_run(),
            2,
            early_stopping=EarlyStopping(2),
            checkpointer=Checkpointer(tmp_path, resume=True),
        )
