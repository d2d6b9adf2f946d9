"""utils.train: EarlyStopping and Checkpointer on their own, without a training loop."""

import math
from dataclasses import replace

import pytest
import torch
from torch import nn

from utils.checkpoint import CheckpointError, read_checkpoint
from utils.config import RunConfig
from utils.train import Checkpointer, EarlyStopping


def model_with_weight(value: float) -> nn.Linear:
    model = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(value)
    return model


def test_stops_after_patience_epochs_without_a_gain_bigger_than_min_delta():
    stopper = EarlyStopping(patience=2, min_delta=0.01)
    model = model_with_weight(0.0)
    decisions = [
        stopper.step(epoch, acc, model) for epoch, acc in enumerate([0.5, 0.6, 0.605, 0.6], 1)
    ]
    assert decisions == [False, False, False, True]  # 0.605 is not 0.01 better than 0.6
    assert stopper.epochs_without_gain == 2
    assert stopper.best_epoch == 3 and stopper.best_acc == 0.605  # still the best epoch, though


def test_small_gains_do_not_reset_the_count_even_when_they_add_up():
    stopper = EarlyStopping(patience=3, min_delta=0.01)
    model = model_with_weight(0.0)
    accs = [0.5, 0.508, 0.516, 0.524]  # each 0.008 better than the last: 0.024 in all
    assert [stopper.step(epoch, acc, model) for epoch, acc in enumerate(accs, 1)] == [
        False, False, False, True,
    ]  # fmt: skip
    assert stopper.best_epoch == 4


def test_a_gain_resets_the_count():
    stopper = EarlyStopping(patience=2)
    model = model_with_weight(0.0)
    decisions = [
        stopper.step(epoch, acc, model) for epoch, acc in enumerate([0.5, 0.4, 0.6, 0.6, 0.6], 1)
    ]
    assert decisions == [False, False, False, False, True] and stopper.best_epoch == 3


def test_restore_best_copies_the_weights_of_the_best_epoch():
    stopper = EarlyStopping(patience=5, restore_best=True)
    model = model_with_weight(1.0)
    stopper.step(1, 0.9, model)
    with torch.no_grad():
        model.weight.fill_(2.0)  # training goes on and changes the weights in place
    stopper.step(2, 0.8, model)
    stopper.restore(model)
    assert model.weight.item() == 1.0


def test_restore_without_best_weights_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"restore_best=True"):
        EarlyStopping(patience=1).restore(model_with_weight(0.0))


def test_state_dict_round_trip_continues_the_count():
    stopper = EarlyStopping(patience=3, restore_best=True)
    model = model_with_weight(3.0)
    stopper.step(1, 0.7, model)
    stopper.step(2, 0.6, model)
    again = EarlyStopping(patience=3, restore_best=True)
    again.load_state_dict(stopper.state_dict())
    assert again.best_epoch == 1 and again.epochs_without_gain == 1
    assert not again.step(3, 0.6, model) and again.step(4, 0.6, model)
    assert torch.equal(again.best_weights["weight"], torch.full((1, 1), 3.0))


def test_fresh_state_holds_no_best():
    state = EarlyStopping(patience=1).state_dict()
    assert state["best_acc"] == -math.inf and state["best_epoch"] is None
    assert state["best_weights"] is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"patience": 0}, "patience must be an int >= 1"),
        ({"patience": None}, "patience must be an int >= 1"),
        ({"patience": 1, "min_delta": -0.1}, "min_delta must be >= 0"),
    ],
)
def test_early_stopping_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EarlyStopping(**kwargs)


def test_checkpointer_is_due_every_n_epochs_and_at_the_end(tmp_path):
    checkpointer = Checkpointer(tmp_path, every=3)
    assert [checkpointer.due(epoch, last=epoch == 7) for epoch in range(1, 8)] == [
        False, False, True, False, False, True, True,
    ]  # fmt: skip


def test_checkpointer_save_then_restore(tmp_path):
    model = model_with_weight(5.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    stopper = EarlyStopping(patience=2)
    stopper.step(1, 0.5, model)
    history = {"val_acc": [0.5]}
    checkpointer = Checkpointer(tmp_path, every=1, config={"lr": 0.1})
    checkpointer.save(1, history, model, optimizer, None, None, stopper)
    assert read_checkpoint(checkpointer.path)["config"] == {"lr": 0.1}
    assert (tmp_path / "history.json").read_text() == '{\n "val_acc": [\n  0.5\n ]\n}\n'

    fresh, fresh_stopper = model_with_weight(0.0), EarlyStopping(patience=2)
    fresh_optimizer = torch.optim.SGD(fresh.parameters(), lr=0.1)
    restored, next_epoch = checkpointer.restore(fresh, fresh_optimizer, None, None, fresh_stopper)
    assert restored == history and next_epoch == 2
    assert fresh.weight.item() == 5.0 and fresh_stopper.best_epoch == 1


@pytest.mark.parametrize("every", [0, 1.5, None])
def test_checkpointer_bad_interval(tmp_path, every):
    with pytest.raises(ValueError, match="every must be an int >= 1"):
        Checkpointer(tmp_path, every=every)


def test_checkpointer_check_config_refuses_other_settings_but_not_more_epochs(tmp_path):
    config = RunConfig(lr=1e-3, num_epochs=2)
    model = model_with_weight(5.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    Checkpointer.for_run(tmp_path, config).save(2, {}, model, optimizer, None, None, None)

    def restore(checkpointer: Checkpointer) -> int:
        fresh = model_with_weight(0.0)
        fresh_optimizer = torch.optim.SGD(fresh.parameters(), lr=0.1)
        return checkpointer.restore(fresh, fresh_optimizer, None, None, None)[1]

    changed = replace(config, lr=3e-4, batch_size=64, num_epochs=5)
    with pytest.raises(CheckpointError) as info:
        restore(Checkpointer.for_run(tmp_path, changed, resume=True, check_config=True))
    message = str(info.value)
    assert "lr: checkpoint 0.001, now 0.0003" in message
    assert "batch_size: checkpoint 128, now 64" in message
    assert "num_epochs" not in message  # a ceiling: raising it to train longer is allowed
    longer = replace(config, num_epochs=5)
    assert restore(Checkpointer.for_run(tmp_path, longer, resume=True, check_config=True)) == 3
    assert (
        restore(Checkpointer.for_run(tmp_path, changed, resume=True)) == 3
    )  # unchecked: as before
