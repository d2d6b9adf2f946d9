"""Data-parallel training with DistributedDataParallel (DDP). Taught in notebooks/11_distributed_ddp.ipynb.

One process per device; each process (rank) trains on its own shard of every batch and DDP
averages the gradients across ranks in backward, so every rank takes the same optimizer step.
This module is what each rank runs; start it with torchrun, here two CPU processes over gloo:

    python -m torch.distributed.run --standalone --nproc-per-node=2 -m utils.distributed \\
        --out runs/ddp --steps 5 --batch-size 32

Each rank builds its model with its own seed (`--seed` + rank), so the copies start different
and DDP's first broadcast of rank 0's weights is visible. Rank 0 saves the trained weights to
`checkpoint.pt` under --out and every rank loads them back. Each rank writes `rank<r>.pt` there:
its weights before and right after wrapping, the final and reloaded weights, losses, the sample
indices it saw and the time of each step. `utils.ddp_launch.launch` runs the command above from
Python. With `--by-hand` the script replaces DDP by a few explicit collectives (a broadcast of the
parameters, then an all-reduce of every gradient): the exercise "write your own DDP";
`--by-hand-from my_ddp.py` takes those two functions from a file of your own instead.
`--skip-collective-on-rank R --timeout-s 3` shows a hang turned into an error: after training,
every rank but R calls an all-reduce that R never joins, and the group's timeout ends it.
Its options are parsed by `utils.ddp_launch.parse_args`, the one parser. Two measure after training: `--eval-limit N` splits the first N test
images across the ranks (no padding) and all-reduces the counts of correct predictions and images;
`--time-allreduce K` times K all-reduces of a buffer the size of the model's gradient.
Two more are off by default too: `--count-allreduce` registers a DDP communication hook that counts
the gradient all-reduces DDP launches (one per bucket per synchronising backward), and
`--sync-every-micro-batch` drops `no_sync()` in gradient accumulation, to show what it saves.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from utils.checkpoint import atomic_save
from utils.ddp_launch import MODELS, parse_args


class Process(NamedTuple):
    """Who this process is in the job, and where it computes."""

    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: torch.device


def build_model(name: str, seed: int) -> nn.Module:
    """A freshly initialised MLP or SimpleCNN; the same seed gives the same weights in every process.

    The global random state is left as it was (the seed applies inside `fork_rng` only).
    """
    from utils.models import MLP, SimpleCNN

    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    with torch.random.fork_rng(devices=[]):  # CPU generator only: models are built on the CPU
        torch.manual_seed(seed)
        return MLP() if name == "mlp" else SimpleCNN()


def check_sync_bn(sync_bn: bool, backend: str) -> None:
    """Refuse --sync-bn where SyncBatchNorm cannot run: it needs GPU tensors, so the nccl backend."""
    if sync_bn and backend != "nccl":
        raise ValueError(
            f"--sync-bn needs GPUs: SyncBatchNorm runs only on GPU tensors, and this run uses the "
            f"{backend} backend on the CPU. Drop --sync-bn (each rank then normalises over its own "
            "shard), or run with one GPU per rank (--backend nccl)."
        )


def broadcast_parameters(model: nn.Module) -> None:
    """By hand: copy rank 0's parameters and buffers to every rank, as DDP(model) does once."""
    for tensor in [*model.parameters(), *model.buffers()]:
        dist.broadcast(tensor.data, src=0)


def average_gradients(model: nn.Module, world_size: int) -> None:
    """By hand: replace every gradient by its mean over the ranks, as DDP does during backward."""
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)  # the sum over ranks, on every rank
            p.grad /= world_size


def by_hand_functions(
    path: Path | None,
) -> tuple[Callable[[nn.Module], None], Callable[[nn.Module, int], None]]:
    """The broadcast and gradient-averaging functions --by-hand uses: this module's, or the
    `broadcast_parameters` and `average_gradients` defined in the Python file at `path`."""
    if path is None:
        return broadcast_parameters, average_gradients
    spec = importlib.util.spec_from_file_location("by_hand_ddp", path)
    if spec is None or spec.loader is None or not Path(path).is_file():
        raise ValueError(f"--by-hand-from {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    missing = [n for n in ("broadcast_parameters", "average_gradients") if not hasattr(module, n)]
    if missing:
        raise ValueError(f"--by-hand-from {path} must define {' and '.join(missing)}")
    return module.broadcast_parameters, module.average_gradients


def pick_backend(requested: str, local_world_size: int) -> str:
    """nccl when every local rank can have its own CUDA device, else gloo (CPU, any OS)."""
    if requested != "auto":
        return requested
    return "nccl" if torch.cuda.device_count() >= local_world_size else "gloo"


def join_group(requested_backend: str, timeout_s: float = 60.0) -> Process:
    """Read who this process is from torchrun's environment, pick its device, join the group.

    A collective that waits longer than `timeout_s` for the other ranks raises instead of hanging.
    """
    rank = int(os.environ["RANK"])  # DDP: torchrun sets RANK, LOCAL_RANK and WORLD_SIZE
    local_rank = int(os.environ["LOCAL_RANK"])
    backend = pick_backend(requested_backend, int(os.environ["LOCAL_WORLD_SIZE"]))
    if backend == "nccl":  # DDP on GPUs: one device per process, chosen by LOCAL_RANK
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))  # DDP: join the group
    return Process(rank, int(os.environ["WORLD_SIZE"]), local_rank, backend, device)


def make_loader(args: argparse.Namespace, world_size: int) -> DataLoader:
    """Real Fashion-MNIST with each item's index, so a run can show which images each rank saw."""
    from utils.data import fashion_mnist_tensors

    X, y = fashion_mnist_tensors(train=True, limit=args.train_limit).tensors
    dataset = TensorDataset(X, y, torch.arange(len(X)))
    sampler = DistributedSampler(dataset, shuffle=True, seed=args.seed)  # DDP: a disjoint shard
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    if len(loader) == 0:
        raise ValueError(
            f"--train-limit {args.train_limit} over {world_size} ranks leaves fewer than "
            f"--batch-size {args.batch_size} images per rank: raise the limit or lower the batch"
        )
    return loader


def counting_allreduce_hook(state: dict[str, int], bucket):
    # No annotations on bucket and the result: DDP checks them against dist.GradBucket and
    # Future[Tensor], and this module's postponed (string) annotations would fail that check.
    """A DDP communication hook: count the call in `state["calls"]`, then all-reduce the bucket
    exactly as DDP's default does (the mean over the ranks)."""
    state["calls"] += 1
    return allreduce_hook(None, bucket)


def train_steps(
    ddp_model: nn.Module, loader: DataLoader, args: argparse.Namespace, proc: Process
) -> dict:
    """`args.steps` SGD steps of `args.accum_steps` micro-batches each; losses, indices, step times.

    `ddp_model` is the DDP-wrapped model, or with --by-hand the plain one (gradients averaged here).
    """
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=args.lr)
    average = by_hand_functions(args.by_hand_from)[1] if args.by_hand else None
    loss_fn = nn.CrossEntropyLoss()
    losses, indices_seen, step_ends = [], [], [time.perf_counter()]
    micro, epoch, step_loss = 0, 0, 0.0
    while len(losses) < args.steps:
        loader.sampler.set_epoch(epoch)  # DDP: a new shuffle each epoch, the same on every rank
        for xb, yb, idx in loader:
            micro += 1
            last_micro = micro % args.accum_steps == 0
            skip_sync = not last_micro and not args.by_hand and not args.sync_every_micro_batch
            with ddp_model.no_sync() if skip_sync else nullcontext():  # DDP: sync on last only
                loss = loss_fn(ddp_model(xb.to(proc.device)), yb.to(proc.device)) / args.accum_steps
                loss.backward()
            step_loss += loss.item()
            indices_seen.append(idx)
            if not last_micro:
                continue
            if args.by_hand:
                average(ddp_model, proc.world_size)  # what DDP's backward hooks do
            optimizer.step()
            optimizer.zero_grad()
            # Logging every step keeps this demo checkable; a real job all-reduces and calls .item()
            # (which waits for the device) only every N steps, and prints on rank 0 only.
            mean_loss = torch.tensor([step_loss], device=proc.device)
            dist.all_reduce(mean_loss)  # DDP: sum over ranks, for logging only
            losses.append(mean_loss.item() / proc.world_size)
            step_ends.append(time.perf_counter())
            step_loss = 0.0
            if len(losses) == args.steps:
                break
        epoch += 1
    step_seconds = [b - a for a, b in pairwise(step_ends)]
    return {"losses": losses, "indices": indices_seen, "step_seconds": step_seconds}


def save_and_reload(ddp_model: DDP, args: argparse.Namespace, proc: Process) -> dict:
    """Rank 0 saves the weights, all ranks wait, then each loads them into a fresh model."""
    path = args.out / "checkpoint.pt"
    module = getattr(ddp_model, "module", ddp_model)  # the plain model (--by-hand has no wrapper)
    if proc.rank == 0:  # DDP: one writer; .module drops DDP's "module." key prefix
        atomic_save(module.state_dict(), path)
    # The other ranks wait here at most the group's timeout (--timeout-s, 60 s): a checkpoint
    # that takes longer to write turns this barrier into an error, so raise it for big models.
    dist.barrier()  # DDP: nobody reads before rank 0 has finished writing
    restored = build_model(args.model, seed=args.seed + 1 + proc.rank)  # other weights per rank
    restored = restored.to(proc.device)
    state_dict = torch.load(path, map_location=proc.device, weights_only=True)  # DDP: to my device
    restored.load_state_dict(state_dict)
    return {
        "ddp_keys": list(ddp_model.state_dict()),
        "checkpoint_keys": list(state_dict),
        "loaded_on": str(next(iter(state_dict.values())).device),
        "restored_state_dict": {k: v.detach().cpu() for k, v in restored.state_dict().items()},
    }


def evaluate(model: nn.Module, eval_limit: int, proc: Process) -> dict:
    """Accuracy on the first `eval_limit` test images over all ranks: each rank counts on its shard.

    The shards are not padded, so they may differ in size: the ranks all-reduce (sum) the counts of
    correct predictions and of images, not their accuracies, which would weigh the shards equally.
    """
    from utils.data import fashion_mnist_tensors

    X, y = fashion_mnist_tensors(train=False, limit=eval_limit).tensors
    # Contiguous shards, no padding: their sizes differ by at most one image.
    shard = torch.tensor_split(torch.arange(len(X)), proc.world_size)[proc.rank]
    model.eval()
    with torch.no_grad():
        predictions = model(X[shard].to(proc.device)).argmax(dim=1).cpu()
    local = torch.tensor([int((predictions == y[shard]).sum()), len(shard)], dtype=torch.int64)
    total = local.clone().to(proc.device)
    dist.all_reduce(total)  # DDP: the sum over ranks of (correct, images)
    return {"eval_local": local.tolist(), "eval_global": total.cpu().tolist()}


def time_allreduce(num_elements: int, repeats: int, proc: Process) -> dict:
    """Seconds of each of `repeats` all-reduces of a float32 buffer of `num_elements` (after one
    warm-up), and whether every sum came out right; the ranks start each one together."""
    buffer = torch.empty(num_elements, device=proc.device)
    seconds, sums_right = [], True
    for _ in range(repeats + 1):
        buffer.fill_(1.0)
        dist.barrier()  # start together: time the exchange, not a rank that arrives late
        start = time.perf_counter()
        dist.all_reduce(buffer)  # what DDP does with the gradient every step
        if proc.device.type == "cuda":
            torch.cuda.synchronize(proc.device)
        seconds.append(time.perf_counter() - start)
        sums_right &= bool((buffer == proc.world_size).all())
    return {
        "allreduce_elements": num_elements,
        "allreduce_seconds": seconds[1:],
        "allreduce_sums_right": sums_right,
    }


def skip_collective(skipping_rank: int, timeout_s: float, proc: Process) -> None:
    """The hang demo: every rank but `skipping_rank` calls an all-reduce that it never joins.

    The skipping rank is busy elsewhere (it sleeps past the timeout), so the others wait for it
    until the group's timeout turns the wait into an error.
    """
    if proc.rank == skipping_rank:
        time.sleep(timeout_s + 30)  # e.g. a branch only this rank takes; torchrun stops it
    else:
        try:
            dist.all_reduce(torch.ones(1, device=proc.device))  # waits for a rank that never comes
        except RuntimeError as err:  # say which collective timed out: the library's text does not
            raise RuntimeError(
                f"skip_collective: rank {proc.rank}'s all_reduce gave up waiting for rank "
                f"{skipping_rank}: {err}"
            ) from err


def cpu_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """A detached CPU copy of the model's state_dict, to save in the rank's result file."""
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def train(args: argparse.Namespace) -> dict:
    """Body of one rank: the single-device loop plus the lines marked DDP."""
    proc = join_group(args.backend, args.timeout_s)
    try:
        check_sync_bn(args.sync_bn, proc.backend)
        loader = make_loader(args, proc.world_size)
        # A different seed per rank, so the copies start different: DDP makes them equal.
        model = build_model(args.model, args.seed + proc.rank)
        if args.sync_bn:
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        model = model.to(proc.device)
        before_wrap = cpu_state(model)
        if args.by_hand:
            by_hand_functions(args.by_hand_from)[0](
                model
            )  # what DDP(model) does once, when it wraps
            ddp_model = model
        else:
            device_ids = [proc.local_rank] if proc.backend == "nccl" else None  # DDP on GPUs
            ddp_model = DDP(model, device_ids=device_ids)  # DDP: wrap; copies rank 0's weights
        allreduce_count = {"calls": 0}
        if args.count_allreduce and not args.by_hand:
            ddp_model.register_comm_hook(allreduce_count, counting_allreduce_hook)
        after_wrap = cpu_state(model)
        history = train_steps(ddp_model, loader, args, proc)
        measured = {"allreduce_calls": allreduce_count["calls"]} if args.count_allreduce else {}
        eval_limit, repeats = args.eval_limit, args.time_allreduce
        if eval_limit:
            measured |= evaluate(getattr(ddp_model, "module", ddp_model), eval_limit, proc)
        if repeats:
            num_elements = sum(p.numel() for p in model.parameters())  # the gradient's size
            measured |= time_allreduce(num_elements, repeats, proc)
        if args.skip_collective_on_rank is not None:
            skip_collective(args.skip_collective_on_rank, args.timeout_s, proc)
        reloaded = save_and_reload(ddp_model, args, proc)
    finally:
        dist.destroy_process_group()  # DDP: leave the group, also after an error
    return {
        **proc._asdict(),
        "device": str(proc.device),
        "before_wrap": before_wrap,
        "after_wrap": after_wrap,
        "state_dict": cpu_state(model),
        **history,
        **reloaded,
        **measured,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if "RANK" not in os.environ:
        sys.exit(
            "utils.distributed is a DDP entry point: start it with torchrun, e.g.\n"
            "  python -m torch.distributed.run --standalone --nproc-per-node=2 "
            "-m utils.distributed --out runs/ddp"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    result = train(args)
    torch.save(result, args.out / f"rank{result['rank']}.pt")
    if result["rank"] == 0:
        print(
            f"{result['world_size']} ranks over {result['backend']}: {len(result['losses'])} steps, "
            f"loss {result['losses'][0]:.4f} -> {result['losses'][-1]:.4f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
