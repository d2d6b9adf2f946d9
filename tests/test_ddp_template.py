"""Tests of utils.ddp_template, the DDP script a learner copies: two gloo ranks started by torchrun
train, rank 0 saves the plain model's weights, and they equal one process on the combined batches;
the FSDP2 demo of the same chapter (utils.demos.fsdp_train) likewise."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from utils.data import fashion_mnist_tensors
from utils.ddp_launch import global_batches, launch, torchrun_command
from utils.models import MLP

TRAIN_LIMIT, BATCH_SIZE, LR, SEED = 256, 16, 0.1, 0


def test_torchrun_command_runs_the_template_module():
    command = torchrun_command(2, ["--out", "r"], module="utils.ddp_template")
    assert command[-4:] == ["-m", "utils.ddp_template", "--out", "r"]


def one_process_reference(num_epochs: int) -> tuple[dict, dict]:
    """The MLP trained in one process on each step's global batch (both ranks' shards together)."""
    X, y = fashion_mnist_tensors(train=True, limit=TRAIN_LIMIT).tensors
    torch.manual_seed(SEED)
    model = MLP()
    start = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer, loss_fn = torch.optim.SGD(model.parameters(), lr=LR), nn.CrossEntropyLoss()
    for epoch in range(num_epochs):
        for idx in global_batches(TRAIN_LIMIT, 2, BATCH_SIZE, seed=SEED, epoch=epoch):
            loss = loss_fn(model(X[idx]), y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return start, model.state_dict()


@pytest.mark.parametrize("accum_steps", [2, pytest.param(1, marks=pytest.mark.slow)])
def test_two_gloo_ranks_train_and_match_one_process(tmp_path, accum_steps):
    """2 ranks x batch 16 (or 2 micro-batches of 8 under no_sync) == 1 process x batch 32."""
    result = launch(
        2,
        ["--out", tmp_path, "--epochs", 2, "--batch-size", BATCH_SIZE // accum_steps,
         "--accum-steps", accum_steps, "--train-limit", TRAIN_LIMIT, "--lr", LR, "--seed", SEED],
        timeout=180,
        module="utils.ddp_template",
    )  # fmt: skip
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == ["epoch 0", "epoch 1"]
    checkpoint = torch.load(tmp_path / "checkpoint.pt", weights_only=True)  # rank 0 wrote it
    assert list(checkpoint) == list(MLP().state_dict())  # the plain model's keys, no "module."
    start, expected = one_process_reference(num_epochs=2)
    for name, tensor in expected.items():
        assert (checkpoint[name] - start[name]).abs().max() > 1e-3  # training moved the weights
        torch.testing.assert_close(checkpoint[name], tensor, atol=1e-5, rtol=0)


def test_the_template_stays_short():
    from pathlib import Path

    import utils.ddp_template

    lines = Path(utils.ddp_template.__file__).read_text().splitlines()
    code = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    assert len(code) <= 65, len(code)  # about 60 lines a learner can read and copy
    assert "utils.distributed" not in "\n".join(lines)  # no instrumentation switches


@pytest.mark.slow  # two torchrun ranks train with FSDP2 over gloo
def test_fsdp_demo_shards_the_parameters_and_matches_one_process(tmp_path):
    launch(
        2,
        ["--out", tmp_path, "--epochs", 2, "--batch-size", BATCH_SIZE,
         "--train-limit", TRAIN_LIMIT, "--lr", LR, "--seed", SEED],
        timeout=240,
        module="utils.demos.fsdp_train",
    )  # fmt: skip
    saved = torch.load(tmp_path / "fsdp.pt", weights_only=True)
    start, expected = one_process_reference(num_epochs=2)
    assert saved["shard_shapes"] == {k: [v.shape[0] // 2, *v.shape[1:]] for k, v in start.items()}
    for name, tensor in expected.items():
        assert (saved["state_dict"][name] - start[name]).abs().max() > 1e-3
        torch.testing.assert_close(saved["state_dict"][name], tensor, atol=1e-5, rtol=0)
