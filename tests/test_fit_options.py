"""fit's options, each checked bit for bit against the loop written out by hand (on the CPU).

A per-batch and a per-epoch scheduler, autocast in bfloat16 and float16 with a GradScaler, the
per-step losses, one read of the loss per epoch, and resuming mid-schedule from a checkpoint.
"""

import math

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from utils.checkpoint import CheckpointError
from utils.train import Checkpointer, evaluate, fit, train_one_epoch

NUM_EPOCHS, LR = 3, 0.05


def make_run(seed=0):
    """A small model with Dropout, a shuffling loader and a fixed validation set."""
    X = torch.randn(80, 8, generator=torch.Generator().manual_seed(0))
    y = (X[:, 0] + X[:, 1] > 0).long()
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    train_loader = DataLoader(
        TensorDataset(X[:60], y[:60]),  # batches of 16, 16, 16 and 12: a short last one
        batch_size=16,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
    )
    val_loader = DataLoader(TensorDataset(X[60:], y[60:]), batch_size=8)
    return model, optimizer, train_loader, val_loader


def one_cycle(optimizer, steps):
    return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=LR, total_steps=steps)


def by_hand(scheduler_step=None, dtype=None, use_scaler=False):
    """The loop written out: (weights, per-epoch train losses, val accuracies, per-step losses)."""
    model, optimizer, train_loader, val_loader = make_run()
    loss_fn = nn.CrossEntropyLoss()
    if scheduler_step == "batch":
        scheduler = one_cycle(optimizer, NUM_EPOCHS * len(train_loader))
    elif scheduler_step == "epoch":
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8) if use_scaler else None
    epoch_losses, accuracies, step_losses = [], [], []
    for _ in range(NUM_EPOCHS):
        model.train()
        total, count = 0.0, 0
        for X, y in train_loader:
            with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
                loss = loss_fn(model(X), y)
            optimizer.zero_grad()
            if scaler is None:
                loss.backward()
                optimizer.step()
            else:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            if scheduler_step == "batch":
                scheduler.step()
            total += loss.item() * len(y)
            count += len(y)
            step_losses.append(loss.item())
        epoch_losses.append(total / count)
        model.eval()
        correct = 0
        with torch.no_grad():
            for X, y in val_loader:
                with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
                    correct += (model(X).argmax(dim=1) == y).sum().item()
        accuracies.append(correct / len(val_loader.dataset))
        if scheduler_step == "epoch":
            scheduler.step()
    return model, epoch_losses, accuracies, step_losses


def with_fit(scheduler_step=None, dtype=None, use_scaler=False, **kwargs):
    """The same run through fit: (model, history, per-step losses)."""
    model, optimizer, train_loader, val_loader = make_run()
    scheduler = None
    if scheduler_step == "batch":
        scheduler = one_cycle(optimizer, NUM_EPOCHS * len(train_loader))
    elif scheduler_step == "epoch":
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8) if use_scaler else None
    step_losses = []
    history = fit(
        model, train_loader, val_loader, nn.CrossEntropyLoss(), optimizer, NUM_EPOCHS,
        scheduler=scheduler, scheduler_step=scheduler_step, autocast_dtype=dtype, scaler=scaler,
        on_step=step_losses.append, **kwargs,
    )  # fmt: skip
    return model, history, [loss.item() for loss in step_losses]


def same_weights(a, b):
    pairs = zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    return all(torch.equal(x, y) for x, y in pairs)


@pytest.mark.parametrize(
    "scheduler_step, dtype, use_scaler",
    [
        (None, None, False),
        ("batch", None, False),
        ("epoch", None, False),
        ("batch", torch.bfloat16, False),
        ("batch", torch.float16, True),
    ],
)
def test_fit_is_the_loop_written_out(scheduler_step, dtype, use_scaler):
    hand_model, hand_losses, hand_acc, hand_steps = by_hand(scheduler_step, dtype, use_scaler)
    fit_model, history, fit_steps = with_fit(scheduler_step, dtype, use_scaler)
    assert same_weights(hand_model, fit_model)
    assert history["train_loss"] == hand_losses  # the same float64 sums, to the last bit
    assert history["val_acc"] == hand_acc
    assert fit_steps == hand_steps and len(fit_steps) == NUM_EPOCHS * 4


def test_per_batch_and_per_epoch_schedules_differ_and_are_recorded():
    _, per_batch, _ = with_fit("batch")
    _, per_epoch, _ = with_fit("epoch")
    assert per_epoch["lr"] == [LR, LR / 2, LR / 4]  # StepLR halves the rate after each epoch
    assert per_batch["lr"][0] == pytest.approx(LR / 25)  # OneCycle starts at max_lr / 25
    assert per_batch["lr"][1] > per_batch["lr"][0]  # and warms up over the first steps


def test_the_loss_is_read_once_per_epoch(monkeypatch):
    model, _, train_loader, _ = make_run()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)  # Adam reads its step count with .item()
    calls = {"item": 0}
    real_item = torch.Tensor.item

    def counting_item(self):
        calls["item"] += self.is_floating_point()  # not the DataLoader's integer seed
        return real_item(self)

    monkeypatch.setattr(torch.Tensor, "item", counting_item)
    loss = train_one_epoch(model, train_loader, nn.CrossEntropyLoss(), optimizer)
    assert calls["item"] == 1 and len(train_loader) == 4  # four steps, one read
    assert math.isfinite(loss)


def test_evaluate_under_autocast_matches_by_hand():
    model, _, _, val_loader = make_run()
    loss, accuracy = evaluate(
        model, val_loader, nn.CrossEntropyLoss(), autocast_dtype=torch.bfloat16
    )
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        batches = [(model(X), y) for X, y in val_loader]
        by_batch = [nn.functional.cross_entropy(logits, y).item() for logits, y in batches]
    logits = torch.cat([logits for logits, _ in batches])
    targets = torch.cat([y for _, y in batches])
    assert accuracy == (logits.argmax(dim=1) == targets).sum().item() / 20
    sizes = [8, 8, 4]
    assert loss == sum(b * n for b, n in zip(by_batch, sizes, strict=True)) / 20


@pytest.mark.parametrize("dtype, use_scaler", [(None, False), (torch.float16, True)])
def test_resume_mid_schedule_is_bit_identical(tmp_path, dtype, use_scaler):
    """A per-batch OneCycle (and a GradScaler's scale) continue where the checkpoint left them."""
    straight_model, straight, _ = with_fit("batch", dtype, use_scaler)

    def power_cut(epoch, history):
        if epoch == 2:
            raise RuntimeError("power cut")

    with pytest.raises(RuntimeError, match="power cut"):
        with_fit("batch", dtype, use_scaler, checkpointer=Checkpointer(tmp_path),
                 on_epoch_end=power_cut)  # fmt: skip
    model, optimizer, train_loader, val_loader = make_run(seed=5)  # other weights: all restored
    scheduler = one_cycle(optimizer, NUM_EPOCHS * len(train_loader))
    scaler = torch.amp.GradScaler("cpu", init_scale=1.0) if use_scaler else None  # restored too
    resumed = fit(
        model, train_loader, val_loader, nn.CrossEntropyLoss(), optimizer, NUM_EPOCHS,
        scheduler=scheduler, scheduler_step="batch", autocast_dtype=dtype, scaler=scaler,
        checkpointer=Checkpointer(tmp_path, resume=True),
    )  # fmt: skip
    assert same_weights(straight_model, model)
    assert resumed["train_loss"] == straight["train_loss"] and resumed["lr"] == straight["lr"]
    assert scheduler.last_epoch == NUM_EPOCHS * len(train_loader)  # every step, none twice
    if use_scaler:
        assert scaler.get_scale() != 1.0  # the saved scale, not the fresh one


def test_resume_with_a_scaler_needs_its_state(tmp_path):
    with_fit(checkpointer=Checkpointer(tmp_path))  # saved without a scaler
    model, optimizer, train_loader, val_loader = make_run()
    with pytest.raises(CheckpointError, match="no GradScaler state"):
        fit(model, train_loader, val_loader, nn.CrossEntropyLoss(), optimizer, NUM_EPOCHS + 1,
            scaler=torch.amp.GradScaler("cpu"), checkpointer=Checkpointer(tmp_path, resume=True))  # fmt: skip


def test_a_scheduler_must_say_when_it_steps():
    model, optimizer, train_loader, val_loader = make_run()
    scheduler = one_cycle(optimizer, NUM_EPOCHS * len(train_loader))
    args = (model, train_loader, val_loader, nn.CrossEntropyLoss(), optimizer, NUM_EPOCHS)
    with pytest.raises(ValueError, match="scheduler_step='batch' or 'epoch'"):
        fit(*args, scheduler=scheduler)
    with pytest.raises(ValueError, match="scheduler_step='batch' or 'epoch'"):
        fit(*args, scheduler=scheduler, scheduler_step="step")
    with pytest.raises(ValueError, match="without a scheduler"):
        fit(*args, scheduler_step="batch")
    assert scheduler.last_epoch == 0  # refused before any training
