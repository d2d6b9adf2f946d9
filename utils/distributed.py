"""Data-parallel training with DistributedDataParallel (DDP). Taught in notebooks/10_distributed_ddp.ipynb.

One process per device; each process (rank) trains on its own shard of every batch and DDP
averages the gradients across ranks in backward, so every rank takes the same optimizer step.
Launch the training entry point with torchrun, here two CPU processes talking over gloo:

    python -m torch.distributed.run --standalone --nproc-per-node=2 -m utils.distributed \\
        --out runs/ddp --steps 5 --batch-size 32

Each rank writes `rank<r>.pt` under --out: final weights, losses and the sample indices it saw.
`launch` runs that command as a subprocess with the settings a shared machine needs.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from contextlib import nullcontext
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

MODELS = ("mlp", "cnn")


def build_model(name: str, seed: int) -> nn.Module:
    """A freshly initialised MLP or SimpleCNN; the same seed gives the same weights in every process."""
    from utils.models import MLP, SimpleCNN

    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    torch.manual_seed(seed)
    return MLP() if name == "mlp" else SimpleCNN()


def shard_batches(
    num_items: int, world_size: int, rank: int, batch_size: int, seed: int, epoch: int = 0
) -> list[torch.Tensor]:
    """The index batches DistributedSampler(shuffle=True) + DataLoader(drop_last=True) give one rank."""
    sampler = DistributedSampler(
        range(num_items), num_replicas=world_size, rank=rank, shuffle=True, seed=seed
    )
    sampler.set_epoch(epoch)
    indices = torch.tensor(list(sampler))
    num_batches = len(indices) // batch_size
    return list(indices[: num_batches * batch_size].split(batch_size))


def global_batches(
    num_items: int, world_size: int, batch_size: int, seed: int, epoch: int = 0
) -> list[torch.Tensor]:
    """Step k's samples over all ranks together: what one process must see to match DDP's step k."""
    per_rank = [
        shard_batches(num_items, world_size, r, batch_size, seed, epoch) for r in range(world_size)
    ]
    return [torch.cat(batches) for batches in zip(*per_rank, strict=True)]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Train on Fashion-MNIST with DDP (run via torchrun)."
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for rank<r>.pt results")
    parser.add_argument("--model", choices=MODELS, default="mlp")
    parser.add_argument("--steps", type=int, default=5, help="optimizer steps")
    parser.add_argument("--batch-size", type=int, default=32, help="per rank, per micro-batch")
    parser.add_argument(
        "--accum-steps", type=int, default=1, help="micro-batches per step (no_sync)"
    )
    parser.add_argument("--train-limit", type=int, default=1024, help="first N training images")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    parser.add_argument("--sync-bn", action="store_true", help="convert BatchNorm to SyncBatchNorm")
    args = parser.parse_args(argv)
    for name in ("steps", "batch_size", "accum_steps", "train_limit"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    return args


def pick_backend(requested: str, local_world_size: int) -> str:
    """nccl when every local rank can have its own CUDA device, else gloo (CPU, any OS)."""
    if requested != "auto":
        return requested
    return "nccl" if torch.cuda.device_count() >= local_world_size else "gloo"


def train(args: argparse.Namespace) -> dict:
    """Body of one rank: the single-device loop plus the lines marked DDP."""
    from utils.data import fashion_mnist_tensors

    rank = int(os.environ["RANK"])  # DDP: torchrun sets RANK, LOCAL_RANK and WORLD_SIZE
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    backend = pick_backend(args.backend, int(os.environ["LOCAL_WORLD_SIZE"]))
    if backend == "nccl":  # DDP on GPUs: one device per process, chosen by LOCAL_RANK
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend, timeout=timedelta(seconds=60))  # DDP: join the group

    X, y = fashion_mnist_tensors(train=True, limit=args.train_limit).tensors
    dataset = TensorDataset(X, y, torch.arange(len(X)))  # the index lets us check the shards
    sampler = DistributedSampler(dataset, shuffle=True, seed=args.seed)  # DDP: a disjoint shard
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    if len(loader) == 0:
        raise ValueError(
            f"--train-limit {args.train_limit} over {world_size} ranks leaves fewer than "
            f"--batch-size {args.batch_size} images per rank: raise the limit or lower the batch"
        )

    model = build_model(args.model, args.seed)
    if args.sync_bn:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model = model.to(device)
    ddp_model = DDP(model, device_ids=[local_rank] if backend == "nccl" else None)  # DDP: wrap
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()

    losses, indices_seen = [], []
    step, micro, epoch, step_loss = 0, 0, 0, 0.0
    while step < args.steps:
        sampler.set_epoch(epoch)  # DDP: a new shuffle each epoch, the same on every rank
        for xb, yb, idx in loader:
            micro += 1
            last_micro = micro % args.accum_steps == 0
            with nullcontext() if last_micro else ddp_model.no_sync():  # DDP: sync on last only
                loss = loss_fn(ddp_model(xb.to(device)), yb.to(device)) / args.accum_steps
                loss.backward()
            step_loss += loss.item()
            indices_seen.append(idx)
            if not last_micro:
                continue
            optimizer.step()
            optimizer.zero_grad()
            mean_loss = torch.tensor([step_loss], device=device)
            dist.all_reduce(mean_loss)  # DDP: sum over ranks, for logging only
            losses.append(mean_loss.item() / world_size)
            step, step_loss = step + 1, 0.0
            if step == args.steps:
                break
        epoch += 1

    result = {
        "rank": rank,
        "world_size": world_size,
        "backend": backend,
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "losses": losses,
        "indices": indices_seen,
    }
    dist.destroy_process_group()
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if "RANK" not in os.environ:
        sys.exit(
            "utils.distributed is a DDP entry point: start it with torchrun, e.g.\n"
            "  python -m torch.distributed.run --standalone --nproc-per-node=2 "
            "-m utils.distributed --out runs/ddp"
        )
    result = train(args)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.save(result, args.out / f"rank{result['rank']}.pt")
    if result["rank"] == 0:
        print(
            f"{result['world_size']} ranks over {result['backend']}: {len(result['losses'])} steps, "
            f"loss {result['losses'][0]:.4f} -> {result['losses'][-1]:.4f}"
        )
    return 0


def torchrun_command(nproc: int, script_args: list[str]) -> list[str]:
    """The torchrun command line that starts `nproc` ranks of this module on one machine."""
    return [
        sys.executable, "-m", "torch.distributed.run",
        "--standalone",  # single node: torchrun picks a free port on this machine itself
        f"--nproc-per-node={nproc}",
        "-m", "utils.distributed",
        *script_args,
    ]  # fmt: skip


def launch_env(base: Mapping[str, str]) -> dict[str, str]:
    """The environment `launch` gives torchrun: `base` plus the settings a shared machine needs.

    One OpenMP thread per rank (the ranks share the cores) and gloo on the loopback address; on
    Windows USE_LIBUV=0, because some Windows builds of torch lack the libuv rendezvous store that
    torchrun asks for by default since torch 2.4. A value already set in `base` for those two
    machine-specific keys (GLOO_SOCKET_IFNAME, USE_LIBUV) is kept.
    """
    env = {**base, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1"}
    if sys.platform.startswith("linux"):
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback: no network interface needed
    if sys.platform == "win32":
        env.setdefault("USE_LIBUV", "0")
    return env


def launch(
    nproc: int, script_args: list[str], timeout: float = 120, cwd: str | Path | None = None
) -> subprocess.CompletedProcess:
    """Run `torchrun_command` with captured output; a clear error with the child's stderr on failure.

    The environment comes from `launch_env` (one thread per rank, gloo over loopback, and on
    Windows USE_LIBUV=0). A run that exceeds `timeout` seconds is killed together with all of its ranks.
    """
    if nproc < 1:
        raise ValueError(f"nproc must be >= 1, got {nproc}")
    command = torchrun_command(nproc, [str(a) for a in script_args])
    env = launch_env(os.environ)
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
        start_new_session=os.name == "posix",  # its own process group, so a kill reaches every rank
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        if os.name == "posix":
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
        stdout, stderr = process.communicate()
        raise RuntimeError(
            f"torchrun did not finish within {timeout} s and was stopped. Its stderr ends with:\n"
            f"{stderr[-3000:]}"
        ) from None
    result = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    if result.returncode != 0:
        raise RuntimeError(
            f"torchrun failed with exit code {result.returncode}: {' '.join(command[1:])}\n"
            f"Its stderr ends with:\n{stderr[-3000:]}"
        )
    return result


if __name__ == "__main__":
    sys.exit(main())
