"""Tests of utils.distributed and utils.ddp_launch: sharding, the torchrun launch, the rank-0
checkpoint every rank reloads, and DDP = one large batch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from torch import nn

from utils.data import fashion_mnist_tensors
from utils.ddp_launch import (
    global_batches,
    launch,
    launch_env,
    parse_args,
    shard_batches,
    torchrun_command,
    without_gloo_lines,
)
from utils.distributed import (
    Process,
    average_gradients,
    broadcast_parameters,
    build_model,
    by_hand_functions,
    check_sync_bn,
    counting_allreduce_hook,
    evaluate,
    pick_backend,
    save_and_reload,
    time_allreduce,
)

TRAIN_LIMIT, BATCH_SIZE, NUM_STEPS, LR, SEED = 256, 16, 3, 0.1, 0


def test_shards_are_disjoint_and_cover_the_data():
    shards = [shard_batches(100, 2, r, batch_size=10, seed=1) for r in range(2)]
    assert [len(s) for s in shards] == [5, 5]
    seen = torch.cat([torch.cat(s) for s in shards]).tolist()
    assert sorted(seen) == list(range(100))


def test_shards_match_distributed_sampler_and_change_with_epoch():
    from torch.utils.data import DistributedSampler

    sampler = DistributedSampler(range(20), num_replicas=2, rank=1, shuffle=True, seed=3)
    sampler.set_epoch(4)
    batches = shard_batches(20, 2, 1, batch_size=5, seed=3, epoch=4)
    assert torch.cat(batches).tolist() == list(sampler)
    assert shard_batches(20, 2, 1, 5, seed=3, epoch=0)[0].tolist() != batches[0].tolist()


def test_uneven_data_drops_the_incomplete_batch():
    batches = shard_batches(10, 3, 0, batch_size=3, seed=0)  # 4 padded indices per rank
    assert [len(b) for b in batches] == [3]


def test_global_batches_concatenate_ranks():
    steps = global_batches(40, 2, batch_size=4, seed=0)
    per_rank = [shard_batches(40, 2, r, 4, seed=0) for r in range(2)]
    assert len(steps) == 5
    assert torch.equal(steps[2], torch.cat([per_rank[0][2], per_rank[1][2]]))


def test_build_model_is_seeded():
    a, b = build_model("mlp", 7), build_model("mlp", 7)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert type(build_model("cnn", 0)).__name__ == "SimpleCNN"
    with pytest.raises(ValueError, match="unknown model 'resnet'; choose one of mlp, cnn"):
        build_model("resnet", 0)


def test_build_model_leaves_the_global_random_state_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    build_model("mlp", 7)
    assert torch.equal(torch.rand(3), expected)


def test_sync_bn_is_refused_without_gpus_with_a_clear_message():
    check_sync_bn(False, "gloo")  # no --sync-bn: nothing to check
    check_sync_bn(True, "nccl")  # one GPU per rank: allowed
    with pytest.raises(ValueError) as error:
        check_sync_bn(True, "gloo")
    message = str(error.value)
    assert message.startswith("--sync-bn needs GPUs: SyncBatchNorm runs only on GPU tensors")
    assert "gloo backend" in message and "Drop --sync-bn" in message and "--backend nccl" in message


def test_parse_args_rejects_bad_values(capsys):
    args = parse_args(["--out", "x", "--steps", "2"])
    assert args.steps == 2 and args.accum_steps == 1 and args.backend == "auto"
    assert not args.by_hand and not args.sync_bn and parse_args(["--out", "x", "--by-hand"]).by_hand
    with pytest.raises(SystemExit):
        parse_args(["--out", "x", "--batch-size", "0"])
    assert "--batch-size must be >= 1, got 0" in capsys.readouterr().err
    assert (
        args.timeout_s == 60 and args.by_hand_from is None and args.skip_collective_on_rank is None
    )
    mine = parse_args(["--out", "x", "--by-hand-from", "my_ddp.py", "--timeout-s", "3"])
    assert mine.by_hand and mine.by_hand_from.name == "my_ddp.py" and mine.timeout_s == 3
    with pytest.raises(SystemExit):
        parse_args(["--out", "x", "--timeout-s", "0"])
    assert "--timeout-s must be > 0, got 0.0" in capsys.readouterr().err


def test_pick_backend():
    assert pick_backend("gloo", 2) == "gloo"
    expected = "nccl" if torch.cuda.device_count() >= 2 else "gloo"
    assert pick_backend("auto", 2) == expected


def test_torchrun_command():
    command = torchrun_command(2, ["--out", "r"])
    assert command[0] == sys.executable
    assert command[1:] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           "-m", "utils.distributed", "--out", "r"]  # fmt: skip


@pytest.mark.parametrize(
    ("platform", "ifname", "libuv"),
    [("linux", "lo", None), ("win32", None, "0"), ("darwin", "lo0", None)],
)
def test_launch_env_per_platform(monkeypatch, platform, ifname, libuv):
    monkeypatch.setattr(sys, "platform", platform)
    env = launch_env({"PATH": "/bin", "OMP_NUM_THREADS": "8"})
    assert env["PATH"] == "/bin" and env["OMP_NUM_THREADS"] == "1"  # one thread per rank
    assert "MASTER_ADDR" not in env  # torchrun --standalone sets it for every rank
    assert env.get("GLOO_SOCKET_IFNAME") == ifname
    assert env.get("USE_LIBUV") == libuv  # Windows builds may lack libuv: torchrun needs it off


def test_launch_env_keeps_what_the_user_set(monkeypatch):
    monkeypatch.setattr(sys, "platform", "win32")
    assert launch_env({"USE_LIBUV": "1"})["USE_LIBUV"] == "1"
    monkeypatch.setattr(sys, "platform", "linux")
    assert launch_env({"GLOO_SOCKET_IFNAME": "eth0"})["GLOO_SOCKET_IFNAME"] == "eth0"


def test_gloo_connection_lines_are_dropped_from_the_output():
    printed = (
        "[Gloo] Rank 1 is connected to 1 peer ranks. Expected number of connected peer ranks is : 1\n"
        "epoch 0: loss 0.5\n[Gloo] Rank 0 is connected to 1 peer ranks.\nepoch 1: loss 0.4\n"
    )
    assert without_gloo_lines(printed) == "epoch 0: loss 0.5\nepoch 1: loss 0.4\n"
    assert (
        without_gloo_lines("epoch 0\n  [Gloo] not at the start\n")
        == "epoch 0\n  [Gloo] not at the start\n"
    )


def test_launch_rejects_bad_nproc():
    with pytest.raises(ValueError, match="nproc must be >= 1, got 0"):
        launch(0, ["--out", "r"])


@pytest.fixture
def one_rank_group():
    """A real gloo process group of one rank, in this process (an in-memory store, no ports)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield Process(rank=0, world_size=1, local_rank=0, backend="gloo", device=torch.device("cpu"))
    dist.destroy_process_group()


def test_save_and_reload_writes_module_weights_and_loads_them_into_a_fresh_model(
    one_rank_group, tmp_path
):
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = build_model("mlp", 3)
    ddp_model = DDP(model)
    args = parse_args(["--out", str(tmp_path), "--seed", "3"])
    reloaded = save_and_reload(ddp_model, args, one_rank_group)

    saved = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert list(saved) == reloaded["checkpoint_keys"] == list(model.state_dict())
    assert reloaded["ddp_keys"] == [f"module.{key}" for key in saved]  # what .module avoids
    assert reloaded["loaded_on"] == "cpu"
    fresh = build_model("mlp", 3 + 1)  # the seed save_and_reload starts rank 0's copy from
    for name, tensor in model.state_dict().items():
        assert torch.equal(reloaded["restored_state_dict"][name], tensor), name
        assert not torch.equal(fresh.state_dict()[name], tensor), name  # the load replaced it
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]  # no temporary file left


def test_by_hand_collectives_in_a_group_of_one(one_rank_group):
    model = build_model("mlp", 1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    broadcast_parameters(model)  # rank 0 broadcasts to itself: nothing changes
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    model(torch.ones(2, 1, 28, 28)).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    average_gradients(model, world_size=1)  # the sum over one rank, divided by 1
    assert all(torch.equal(g, p.grad) for g, p in zip(grads, model.parameters(), strict=True))


def test_by_hand_functions_from_a_learners_file(one_rank_group, tmp_path):
    assert by_hand_functions(None) == (broadcast_parameters, average_gradients)
    mine = tmp_path / "my_ddp.py"
    mine.write_text(
        "import torch.distributed as dist\n"
        "def broadcast_parameters(model):\n"
        "    model.called = 'broadcast'\n"
        "def average_gradients(model, world_size):\n"
        "    for p in model.parameters():\n"
        "        dist.all_reduce(p.grad)\n"
        "        p.grad /= 2 * world_size\n"
    )
    broadcast, average = by_hand_functions(mine)
    model = build_model("mlp", 1)
    broadcast(model)
    assert model.called == "broadcast"
    model(torch.ones(2, 1, 28, 28)).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    average(model, 1)  # the learner's version (here a wrong one: it halves) is what runs
    assert all(torch.equal(g / 2, p.grad) for g, p in zip(grads, model.parameters(), strict=True))
    half = tmp_path / "half.py"
    half.write_text("def broadcast_parameters(model):\n    pass\n")
    with pytest.raises(ValueError, match="half.py must define average_gradients"):
        by_hand_functions(half)
    with pytest.raises(ValueError, match="not a Python file"):
        by_hand_functions(tmp_path / "missing.py")


def test_measure_options_eval_and_allreduce_timing_are_off_by_default(capsys):
    args = parse_args(["--out", "r", "--steps", "3"])
    assert (args.eval_limit, args.time_allreduce, args.steps) == (0, 0, 3)
    args = parse_args(["--eval-limit", "101", "--out", "r", "--time-allreduce", "5"])
    assert (args.eval_limit, args.time_allreduce) == (101, 5)
    with pytest.raises(SystemExit):
        parse_args(["--out", "r", "--eval-limit", "-1"])
    assert "--eval-limit must be >= 0, got -1" in capsys.readouterr().err


def test_switches_count_allreduce_and_sync_every_micro_batch_are_off_by_default():
    args = parse_args(["--out", "r"])
    assert (args.count_allreduce, args.sync_every_micro_batch) == (False, False)
    args = parse_args(["--count-allreduce", "--out", "r", "--sync-every-micro-batch"])
    assert (args.count_allreduce, args.sync_every_micro_batch) == (True, True)


def test_counting_hook_counts_synchronising_backwards_and_averages(one_rank_group):
    from torch.nn.parallel import DistributedDataParallel as DDP

    plain, model = build_model("mlp", 4), build_model("mlp", 4)
    ddp_model, state = DDP(model), {"calls": 0}
    ddp_model.register_comm_hook(state, counting_allreduce_hook)
    x = torch.ones(2, 1, 28, 28)
    with ddp_model.no_sync():  # no all-reduce here
        ddp_model(x).sum().backward()
    assert state["calls"] == 0
    ddp_model(x).sum().backward()  # one bucket (the MLP's gradient is small): one call
    assert state["calls"] == 1
    for _ in range(2):
        plain(x).sum().backward()
    for p, q in zip(plain.parameters(), model.parameters(), strict=True):  # the mean over 1 rank
        torch.testing.assert_close(q.grad, p.grad)


def test_evaluate_sums_counts_and_matches_one_process(one_rank_group):
    model = build_model("mlp", 2)
    result = evaluate(model, 101, one_rank_group)
    X, y = fashion_mnist_tensors(train=False, limit=101).tensors
    with torch.no_grad():
        correct = int((model(X).argmax(dim=1) == y).sum())
    assert (
        result["eval_local"] == result["eval_global"] == [correct, 101]
    )  # one rank: the sum is itself
    assert not model.training


def test_time_allreduce_times_each_call_and_checks_the_sum(one_rank_group):
    result = time_allreduce(1000, 3, one_rank_group)
    assert result["allreduce_elements"] == 1000 and result["allreduce_sums_right"]
    assert len(result["allreduce_seconds"]) == 3 and all(
        s >= 0 for s in result["allreduce_seconds"]
    )


@pytest.mark.slow  # starts Python processes that import torch
def test_running_without_torchrun_explains_how():
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    result = subprocess.run([sys.executable, "-m", "utils.distributed", "--out", "r"],
                            capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert result.returncode == 1
    assert "start it with torchrun" in result.stderr


@pytest.mark.slow  # starts Python processes that import torch
def test_failed_run_shows_the_child_stderr(tmp_path):
    with pytest.raises(RuntimeError, match=r"(?s)torchrun failed with exit code.*raise the limit"):
        launch(1, ["--out", tmp_path, "--train-limit", 4, "--batch-size", 8], timeout=120)


@pytest.mark.slow  # two torchrun ranks; one waits 2 s in vain
def test_a_skipped_collective_times_out_instead_of_hanging(tmp_path):
    with pytest.raises(
        RuntimeError, match=r"(?s)torchrun failed with exit code.*skip_collective: rank 0"
    ):
        launch(
            2,
            ["--out", tmp_path, "--steps", 1, "--batch-size", 8, "--train-limit", 64,
             "--backend", "gloo", "--skip-collective-on-rank", 1, "--timeout-s", 2],
            timeout=120,
        )  # fmt: skip


def reference_run(per_rank_batch: int) -> tuple[nn.Module, list[float]]:
    """One process, global batch of 2 * BATCH_SIZE, on exactly the samples the 2 ranks see."""
    X, y = fashion_mnist_tensors(train=True, limit=TRAIN_LIMIT).tensors
    model = build_model("mlp", SEED)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for idx in global_batches(TRAIN_LIMIT, 2, per_rank_batch, seed=SEED)[:NUM_STEPS]:
        loss = nn.functional.cross_entropy(model(X[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model, losses


@pytest.mark.slow  # two torchrun ranks train on real data
def test_two_gloo_ranks_with_no_sync_match_one_large_batch(tmp_path):
    """2 ranks x 2 micro-batches of 8 (no_sync) == 1 process x batch 32, on real Fashion-MNIST."""
    result = launch(
        2,
        ["--out", tmp_path, "--steps", NUM_STEPS, "--batch-size", BATCH_SIZE // 2,
         "--accum-steps", 2, "--train-limit", TRAIN_LIMIT, "--lr", LR, "--seed", SEED,
         "--backend", "gloo", "--eval-limit", 101, "--time-allreduce", 2, "--count-allreduce"],
        timeout=180,
    )  # fmt: skip
    assert "2 ranks over gloo: 3 steps" in result.stdout
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]
    assert [r["allreduce_calls"] for r in ranks] == [NUM_STEPS, NUM_STEPS]  # no_sync skipped half
    assert [r["rank"] for r in ranks] == [0, 1] and ranks[0]["world_size"] == 2
    for name, tensor in ranks[0]["state_dict"].items():
        assert torch.equal(tensor, ranks[1]["state_dict"][name]), name  # identical on every rank
    for step in range(2 * NUM_STEPS):
        assert not set(ranks[0]["indices"][step].tolist()) & set(ranks[1]["indices"][step].tolist())
    checkpoint = torch.load(tmp_path / "checkpoint.pt", weights_only=True)  # rank 0 wrote it
    for rank in ranks:  # each rank loaded it into its own fresh model, on its own device
        assert rank["loaded_on"] == rank["device"] == "cpu"
        for name, tensor in checkpoint.items():
            assert torch.equal(rank["restored_state_dict"][name], tensor), name
            assert torch.equal(rank["state_dict"][name], tensor), name

    reference, reference_losses = reference_run(BATCH_SIZE)
    start = build_model("mlp", SEED).state_dict()
    for name, tensor in start.items():  # each rank built its own seed; DDP copied rank 0's weights
        assert not torch.equal(ranks[1]["before_wrap"][name], tensor), name
        assert torch.equal(ranks[0]["before_wrap"][name], tensor), name
        assert all(torch.equal(rank["after_wrap"][name], tensor) for rank in ranks), name
    assert all(len(rank["step_seconds"]) == NUM_STEPS for rank in ranks)
    for name, expected in reference.state_dict().items():
        got = ranks[0]["state_dict"][name]
        assert (got - start[name]).abs().max() > 1e-3  # training moved the weights
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    assert ranks[0]["losses"] == pytest.approx(reference_losses, abs=1e-5)

    # Evaluation split 51 + 50 without padding: the all-reduced counts are one process's counts.
    assert [rank["eval_local"][1] for rank in ranks] == [51, 50]
    assert ranks[0]["eval_global"] == ranks[1]["eval_global"]
    assert ranks[0]["eval_global"] == [sum(rank["eval_local"][i] for rank in ranks) for i in (0, 1)]
    X_test, y_test = fashion_mnist_tensors(train=False, limit=101).tensors
    trained = build_model("mlp", SEED)
    trained.load_state_dict(checkpoint)
    with torch.no_grad():
        correct = int((trained(X_test).argmax(dim=1) == y_test).sum())
    assert ranks[0]["eval_global"] == [correct, 101]
    for rank in ranks:  # gradient-sized all-reduces, timed twice after a warm-up, sums right
        assert rank["allreduce_elements"] == sum(t.numel() for t in checkpoint.values())
        assert len(rank["allreduce_seconds"]) == 2 and rank["allreduce_sums_right"]
