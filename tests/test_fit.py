import json
import math

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from utils.checkpoint import read_checkpoint
from utils.train import fit


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
        model, train_loader, val_loader, nn.CrossEntropyLoss(), optimizer, 3, scheduler=scheduler
    )
    assert len(history["train_loss"]) == len(history["val_acc"]) == len(history["lr"]) == 3
    assert history["lr"][0] == 0.05 and history["lr"][1] < 0.05  # the scheduler stepped
    assert not history["diverged"] and not history["stopped_early"]
    assert history["best_epoch"] == 1 + max(range(3), key=lambda i: (history["val_acc"][i], -i))


def test_resume_is_bit_identical_to_an_uninterrupted_run(tmp_path):
    model, optimizer, scheduler, train_loader, val_loader = make_run()
    straight = fit(
        model, train_loader, val_loader, nn.CrossEntropyLoss(), optimizer, 4, scheduler=scheduler
    )

    first = make_run()
    fit(
        first[0],
        first[3],
        first[4],
        nn.CrossEntropyLoss(),
        first[1],
        2,
        scheduler=first[2],
        run_dir=tmp_path,
        checkpoint_every=1,
    )
    torch.manual_seed(1234)  # a fresh process would not share the first run's random state
    second = make_run(seed=99)  # fresh objects, even a different initialization and shuffle seed
    resumed = fit(
        second[0],
        second[3],
        second[4],
        nn.CrossEntropyLoss(),
        second[1],
        4,
        scheduler=second[2],
        resume_from=tmp_path / "checkpoint.pt",
    )
    assert same_weights(model, second[0])
    assert resumed == straight


def test_checkpoint_every_writes_checkpoint_and_history(tmp_path):
    model, optimizer, _, train_loader, val_loader = make_run()
    saved = []

    def record(epoch, history):
        path = tmp_path / "checkpoint.pt"
        saved.append(read_checkpoint(path)["epoch"] if path.exists() else None)

    fit(
        model,
        train_loader,
        val_loader,
        nn.CrossEntropyLoss(),
        optimizer,
        5,
        run_dir=tmp_path,
        checkpoint_every=2,
        on_epoch_end=record,
    )
    assert saved == [None, 2, 2, 4, 5]  # every 2 epochs, and after the last one
    assert json.loads((tmp_path / "history.json").read_text())["val_acc"] != []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt", "history.json"]


def test_divergence_is_reported_not_raised():
    model, optimizer, _, train_loader, val_loader = make_run()
    with torch.no_grad():
        model[0].weight.fill_(float("nan"))
    history = fit(model, train_loader, val_loader, nn.CrossEntropyLoss(), optimizer, 3)
    assert history["diverged"] and len(history["train_loss"]) == 1
    assert math.isnan(history["train_loss"][0]) and history["val_acc"] == []


def test_early_stopping_stops_after_patience_epochs_without_gain():
    model, optimizer, _, train_loader, val_loader = make_run(lr=0.0)  # lr 0: accuracy never moves
    for group in optimizer.param_groups:
        group["lr"] = 0.0
    history = fit(model, train_loader, val_loader, nn.CrossEntropyLoss(), optimizer, 10, patience=2)
    assert history["stopped_early"] and history["best_epoch"] == 1
    assert len(history["val_acc"]) == 3


def test_min_delta_counts_tiny_gains_as_no_gain():
    model, optimizer, _, train_loader, val_loader = make_run()
    history = fit(
        model,
        train_loader,
        val_loader,
        nn.CrossEntropyLoss(),
        optimizer,
        10,
        patience=1,
        min_delta=1.0,
    )
    assert history["stopped_early"] and len(history["val_acc"]) == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_epochs": 0}, "num_epochs must be >= 1"),
        ({"patience": 0}, "patience must be None or >= 1"),
        ({"checkpoint_every": 1}, "checkpoint_every needs an int >= 1 and a run_dir"),
    ],
)
def test_bad_arguments(kwargs, message):
    model, optimizer, _, train_loader, val_loader = make_run()
    arguments = {"num_epochs": 1} | kwargs
    with pytest.raises(ValueError, match=message):
        fit(model, train_loader, val_loader, nn.CrossEntropyLoss(), optimizer, **arguments)


def test_resume_from_missing_file_names_it(tmp_path):
    from utils.checkpoint import CheckpointError

    model, optimizer, _, train_loader, val_loader = make_run()
    with pytest.raises(CheckpointError, match="No checkpoint at .*gone.pt"):
        fit(
            model,
            train_loader,
            val_loader,
            nn.CrossEntropyLoss(),
            optimizer,
            2,
            resume_from=tmp_path / "gone.pt",
        )
