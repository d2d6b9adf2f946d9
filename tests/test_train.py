"""utils.train.train_one_epoch and evaluate against losses and SGD updates computed by hand.

The reference model is y = w . x + b with w = [1, -1], b = 0.5, trained with MSE loss and
SGD (lr 0.1), so every loss, gradient and update below can be checked with pencil and paper.
"""

import math

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from utils.train import evaluate, train_one_epoch

X = torch.tensor([[1.0, 2.0], [3.0, 1.0], [0.0, 1.0]])
Y = torch.tensor([[0.0], [2.0], [1.0]])


def linear_model() -> nn.Linear:
    model = nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[1.0, -1.0]]))
        model.bias.copy_(torch.tensor([0.5]))
    return model


def loader(n: int, batch_size: int) -> DataLoader:
    return DataLoader(TensorDataset(X[:n], Y[:n]), batch_size=batch_size, shuffle=False)


def run_epoch(n: int, batch_size: int) -> tuple[float, nn.Linear]:
    model = linear_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = train_one_epoch(model, loader(n, batch_size), nn.MSELoss(), optimizer, "cpu")
    return loss, model


def test_one_batch_loss_and_sgd_update_by_hand():
    # predictions [1 - 2 + 0.5, 3 - 1 + 0.5] = [-0.5, 2.5]; errors [-0.5, 0.5]; loss 0.25
    # dL/dw = (2/2) * (-0.5 * [1, 2] + 0.5 * [3, 1]) = [1.0, -0.5]; dL/db = (2/2) * 0 = 0
    # w <- [1, -1] - 0.1 * [1.0, -0.5] = [0.9, -0.95]; b stays 0.5
    loss, model = run_epoch(n=2, batch_size=2)
    assert loss == pytest.approx(0.25, abs=1e-7)
    assert model.weight.tolist()[0] == pytest.approx([0.9, -0.95], abs=1e-6)
    assert model.bias.item() == pytest.approx(0.5, abs=1e-7)


def test_two_steps_each_use_the_updated_weights():
    # step 1, x = [1, 2], y = 0: pred -0.5, loss 0.25, grad w = 2 * -0.5 * [1, 2] = [-1, -2], b -1
    #   -> w = [1.1, -0.8], b = 0.6
    # step 2, x = [3, 1], y = 2: pred 3.3 - 0.8 + 0.6 = 3.1, loss 1.1**2 = 1.21,
    #   grad w = 2 * 1.1 * [3, 1] = [6.6, 2.2], b 2.2 -> w = [0.44, -1.02], b = 0.38
    loss, model = run_epoch(n=2, batch_size=1)
    assert loss == pytest.approx((0.25 + 1.21) / 2, abs=1e-6)
    assert model.weight.tolist()[0] == pytest.approx([0.44, -1.02], abs=1e-6)
    assert model.bias.item() == pytest.approx(0.38, abs=1e-6)


def test_mean_is_per_example_when_the_last_batch_is_smaller():
    # batch 1 (2 examples) as in the one-batch test: loss 0.25, then w = [0.9, -0.95], b = 0.5
    # batch 2 (1 example), x = [0, 1], y = 1: pred -0.95 + 0.5 = -0.45, loss 1.45**2 = 2.1025
    # mean per example: (2 * 0.25 + 1 * 2.1025) / 3, not the mean of batch means (0.25 + 2.1025) / 2
    loss, model = run_epoch(n=3, batch_size=2)
    assert loss == pytest.approx((2 * 0.25 + 2.1025) / 3, abs=1e-6)
    # second update: grad w = 2 * -1.45 * [0, 1] = [0, -2.9], grad b = -2.9
    assert model.weight.tolist()[0] == pytest.approx([0.9, -0.95 + 0.29], abs=1e-6)
    assert model.bias.item() == pytest.approx(0.5 + 0.29, abs=1e-6)


def test_same_as_a_plain_loop_written_out():
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(50, 4), torch.randint(0, 3, (50,)))
    models = [nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    optimizers = [torch.optim.Adam(m.parameters(), lr=0.01) for m in models]
    loss_fn = nn.CrossEntropyLoss()

    helper_loss = train_one_epoch(
        models[0], DataLoader(data, batch_size=16), loss_fn, optimizers[0]
    )
    total = 0.0
    for xb, yb in DataLoader(data, batch_size=16):
        optimizers[1].zero_grad()
        loss = loss_fn(models[1](xb), yb)
        loss.backward()
        optimizers[1].step()
        total += loss.item() * len(yb)
    assert helper_loss == total / 50
    assert all(
        torch.equal(a, b)
        for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True)
    )


def test_gradients_do_not_leak_between_steps():
    # With zero_grad missing, step 2 would use the sum of both gradients: w = [0.44 - 0.1, ...].
    _, model = run_epoch(n=2, batch_size=1)
    assert model.weight.grad.tolist()[0] == pytest.approx([6.6, 2.2], abs=1e-5)  # step 2's only


def classifier() -> nn.Linear:
    model = nn.Linear(3, 3)  # logits = x: identity weights, zero bias
    with torch.no_grad():
        model.weight.copy_(torch.eye(3))
        model.bias.zero_()
    return model


CLS_X = torch.tensor([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 3.0], [1.0, 0.0, 0.0]])
CLS_Y = torch.tensor([0, 1, 0, 2])  # predictions are [0, 1, 2, 0]: two of four right


def cross_entropy_by_hand(logits: list[float], label: int) -> float:
    return -math.log(math.exp(logits[label]) / sum(math.exp(v) for v in logits))


@pytest.mark.parametrize("batch_size", [1, 3, 4])
def test_evaluate_loss_and_accuracy_by_hand(batch_size):
    expected_loss = (
        sum(cross_entropy_by_hand(x, int(y)) for x, y in zip(CLS_X.tolist(), CLS_Y, strict=True))
        / 4
    )
    data = DataLoader(TensorDataset(CLS_X, CLS_Y), batch_size=batch_size)
    loss, acc = evaluate(classifier(), data, nn.CrossEntropyLoss(), "cpu")
    assert acc == 0.5
    assert loss == pytest.approx(expected_loss, abs=1e-6)


def test_evaluate_changes_nothing_and_records_no_graph():
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3), nn.Dropout(0.5))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    data = DataLoader(TensorDataset(CLS_X, CLS_Y), batch_size=2)
    first = evaluate(model, data, nn.CrossEntropyLoss())
    second = evaluate(model, data, nn.CrossEntropyLoss())
    assert first == second  # eval mode: Dropout off, so the result is deterministic
    assert not model.training
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # BN stats too
    assert all(p.grad is None for p in model.parameters())


def test_train_one_epoch_switches_to_train_mode_and_updates_batchnorm():
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    model.eval()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # no parameter update
    data = DataLoader(TensorDataset(CLS_X, CLS_Y), batch_size=4)
    train_one_epoch(model, data, nn.CrossEntropyLoss(), optimizer)
    assert model.training
    assert not torch.equal(model[1].running_mean, torch.zeros(3))


def test_empty_loader_is_a_clear_error():
    empty = DataLoader(TensorDataset(X[:0], Y[:0]), batch_size=2)
    dropped = DataLoader(TensorDataset(X, Y), batch_size=4, drop_last=True)  # 3 < 4: no batch
    model = linear_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for data in (empty, dropped):
        with pytest.raises(ValueError, match="The loader yielded no examples"):
            train_one_epoch(model, data, nn.MSELoss(), optimizer)
        with pytest.raises(ValueError, match="drop_last=True"):
            evaluate(classifier(), data, nn.CrossEntropyLoss())
