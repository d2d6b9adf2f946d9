"""FSDP2 on the CPU: utils.ddp_template's training with `fully_shard` instead of DDP.

Taught in notebooks/11_distributed_ddp.ipynb (Going further). Run it with torchrun:
    torchrun --standalone --nproc-per-node=2 -m utils.demos.fsdp_train --out runs/fsdp
Rank 0 writes `fsdp.pt`: the full trained weights and the shapes of its own shards.
"""

import argparse
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from utils.checkpoint import atomic_save
from utils.data import fashion_mnist_tensors
from utils.models import MLP


def main() -> None:
    parser = argparse.ArgumentParser(description="Train an MLP with FSDP2 over gloo (torchrun).")
    parser.add_argument("--out", type=Path, required=True, help="folder for fsdp.pt")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--train-limit", type=int, default=1024, help="first N training images")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    dist.init_process_group("gloo")  # CPU processes; on GPUs: nccl, as in the template
    rank = dist.get_rank()
    try:
        X, y = fashion_mnist_tensors(train=True, limit=args.train_limit).tensors
        dataset = TensorDataset(X, y)
        sampler = DistributedSampler(dataset, shuffle=True, seed=args.seed)
        loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)
        torch.manual_seed(args.seed)
        model = MLP()
        for layer in (model.fc1, model.fc2):
            fully_shard(layer)  # this layer's parameters are split across the ranks
        fully_shard(model)  # the root: everything not yet sharded
        # Sum the ranks' gradients, then divide by their number: on gloo, torch 2.8's FSDP2 averaged
        # with a reduction that returned the plain sum (pytorch issue 162338).
        for module in (model.fc1, model.fc2, model):
            module.set_force_sum_reduction_for_comms(True)
        shard_shapes = {name: list(p.to_local().shape) for name, p in model.named_parameters()}
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
        loss_fn = nn.CrossEntropyLoss()
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)
            for xb, yb in loader:
                loss = loss_fn(model(xb), yb)
                loss.backward()  # gradients are reduce-scattered: each rank keeps its shard's
                optimizer.step()  # each rank updates its own shard only
                optimizer.zero_grad()
        # full_tensor() gathers a parameter from every rank: a collective, so every rank calls it.
        full = {k: v.full_tensor() for k, v in model.state_dict().items()}
        if rank == 0:
            atomic_save({"state_dict": full, "shard_shapes": shard_shapes}, args.out / "fsdp.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
