"""Start a DDP run and predict what its ranks will see. Taught in notebooks/11_distributed_ddp.ipynb.

The training itself is `utils.distributed`, run once per rank by torchrun. This module is its
command line: the options every rank parses, the torchrun command that starts the ranks, the
environment a shared machine needs, `launch` to run it with captured output, and the index batches
each rank's sampler will give, computed without a process group so a run can be checked.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import torch
from torch.utils.data import DistributedSampler

MODELS = ("mlp", "cnn")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options of one DDP run, checked: the one parser of utils.distributed, which every rank runs."""
    parser = argparse.ArgumentParser(
        description="Train on Fashion-MNIST with DDP (run via torchrun)."
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="folder for checkpoint.pt and rank<r>.pt"
    )
    parser.add_argument("--model", choices=MODELS, default="mlp")
    parser.add_argument("--steps", type=int, default=5, help="optimizer steps")
    parser.add_argument("--batch-size", type=int, default=32, help="per rank, per micro-batch")
    parser.add_argument(
        "--accum-steps", type=int, default=1, help="micro-batches per step (no_sync)"
    )
    parser.add_argument("--train-limit", type=int, default=1024, help="first N training images")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument(
        "--seed", type=int, default=0, help="rank r builds its model with seed + r; data order"
    )
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    parser.add_argument(
        "--sync-bn", action="store_true", help="convert BatchNorm to SyncBatchNorm (GPUs only)"
    )
    parser.add_argument(
        "--by-hand", action="store_true", help="no DDP: broadcast and all-reduce explicitly"
    )
    parser.add_argument(
        "--by-hand-from",
        type=Path,
        default=None,
        help="a Python file defining broadcast_parameters and average_gradients (implies --by-hand)",
    )
    parser.add_argument(
        "--timeout-s", type=float, default=60.0, help="process group timeout for every collective"
    )
    parser.add_argument(
        "--skip-collective-on-rank",
        type=int,
        default=None,
        help="demo of a hang: after training, every other rank calls all_reduce and this one does not",
    )
    parser.add_argument(
        "--eval-limit",
        type=int,
        default=0,
        help="after training: split the first N test images across the ranks and all-reduce the counts",
    )
    parser.add_argument(
        "--time-allreduce",
        type=int,
        default=0,
        help="after training: time K all-reduces of a buffer the size of the model's gradient",
    )
    parser.add_argument(
        "--count-allreduce",
        action="store_true",
        help="count the gradient all-reduces DDP launches, with a communication hook",
    )
    parser.add_argument(
        "--sync-every-micro-batch", action="store_true",
        help="drop no_sync() in gradient accumulation, to show what it saves",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.by_hand_from is not None:
        args.by_hand = True
    if args.timeout_s <= 0:
        parser.error(f"--timeout-s must be > 0, got {args.timeout_s}")
    for name in ("steps", "batch_size", "accum_steps", "train_limit"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    for name in ("eval_limit", "time_allreduce"):  # 0 is off
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    return args


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


def torchrun_command(
    nproc: int, script_args: list[str], module: str = "utils.distributed"
) -> list[str]:
    """The torchrun command line that starts `nproc` ranks of `module` on one machine."""
    return [
        sys.executable, "-m", "torch.distributed.run",
        "--standalone",  # single node: torchrun picks a free port on this machine itself
        f"--nproc-per-node={nproc}",
        "-m", module,
        *script_args,
    ]  # fmt: skip


def launch_env(base: Mapping[str, str]) -> dict[str, str]:
    """The environment `launch` gives torchrun: `base` plus the settings a shared machine needs.

    One OpenMP thread per rank (the ranks share the cores); gloo on the loopback interface, whose
    name depends on the platform (`lo` on Linux, `lo0` on macOS; Windows keeps gloo's default, the
    address the host name resolves to); on Windows USE_LIBUV=0, because some Windows builds of torch lack the libuv
    rendezvous store that torchrun asks for by default since torch 2.4. A value already set in
    `base` for those two machine-specific keys (GLOO_SOCKET_IFNAME, USE_LIBUV) is kept. The
    master address needs nothing: `torchrun --standalone` sets MASTER_ADDR for every rank itself.
    """
    env = {**base, "OMP_NUM_THREADS": "1"}
    loopback = {"linux": "lo", "darwin": "lo0"}.get(sys.platform)
    if loopback is not None:  # no network interface needed
        env.setdefault("GLOO_SOCKET_IFNAME", loopback)
    if sys.platform == "win32":
        env.setdefault("USE_LIBUV", "0")
    return env


def launch(
    nproc: int,
    script_args: list[str],
    timeout: float = 120,
    cwd: str | Path | None = None,
    module: str = "utils.distributed",
) -> subprocess.CompletedProcess:
    """Run `torchrun_command` with captured output; a clear error with the child's stderr on failure.

    `module` is the script every rank runs: utils.distributed, or e.g. utils.ddp_template.

    The environment comes from `launch_env` (one thread per rank, gloo over loopback, and on
    Windows USE_LIBUV=0). A run that exceeds `timeout` seconds is killed together with all of its ranks.
    """
    if nproc < 1:
        raise ValueError(f"nproc must be >= 1, got {nproc}")
    command = torchrun_command(nproc, [str(a) for a in script_args], module)
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=launch_env(os.environ), cwd=cwd,
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
    if process.returncode != 0:
        raise RuntimeError(
            f"torchrun failed with exit code {process.returncode}: {' '.join(command[1:])}\n"
            f"Its stderr ends with:\n{stderr[-3000:]}"
        )
    return subprocess.CompletedProcess(
        command, process.returncode, without_gloo_lines(stdout), stderr
    )


def without_gloo_lines(stdout: str) -> str:
    """`stdout` without the lines gloo itself prints in some torch releases (2.8 prints
    "[Gloo] Rank 1 is connected to 1 peer ranks. ..." when a rank joins), so that what is left is
    what the script printed."""
    return "".join(
        line for line in stdout.splitlines(keepends=True) if not line.startswith("[Gloo] ")
    )
