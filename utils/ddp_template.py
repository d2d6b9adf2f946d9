"""A complete DDP training script to copy: an MLP on Fashion-MNIST. Taught in notebooks/11_distributed_ddp.ipynb.

Run it as `torchrun --standalone --nproc-per-node=2 -m utils.ddp_template --out runs/ddp`.
The lines marked DDP are what a single-device script does not have."""

import argparse
import os
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from utils.checkpoint import atomic_save
from utils.data import fashion_mnist_tensors
from utils.models import MLP


def main() -> None:
    parser = argparse.ArgumentParser(description="Train an MLP with DDP (start it with torchrun).")
    parser.add_argument("--out", type=Path, required=True, help="folder for checkpoint.pt")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank and micro-batch")
    parser.add_argument("--accum-steps", type=int, default=1, help="micro-batches per step")
    parser.add_argument("--train-limit", type=int, default=1024, help="first N training images")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    local_rank = int(os.environ["LOCAL_RANK"])  # DDP: torchrun sets it, RANK and WORLD_SIZE
    if torch.cuda.device_count() >= int(os.environ["LOCAL_WORLD_SIZE"]):  # one GPU per rank
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)  # DDP: join, bound to this GPU
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")  # DDP: join the group (CPU)
    rank = dist.get_rank()
    try:
        X, y = fashion_mnist_tensors(train=True, limit=args.train_limit).tensors
        dataset = TensorDataset(X, y)
        sampler = DistributedSampler(dataset, shuffle=True, seed=args.seed)  # DDP: my shard
        loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)
        torch.manual_seed(args.seed)
        model = MLP().to(device)
        model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)  # DDP
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
        loss_fn = nn.CrossEntropyLoss()
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)  # DDP: a new shuffle each epoch, the same on every rank
            for i, (xb, yb) in enumerate(loader):
                step_now = (i + 1) % args.accum_steps == 0 or i + 1 == len(loader)
                with nullcontext() if step_now else model.no_sync():  # DDP: sync on the last
                    loss = loss_fn(model(xb.to(device)), yb.to(device)) / args.accum_steps
                    loss.backward()
                if step_now:
                    optimizer.step()
                    optimizer.zero_grad()
            if rank == 0:  # DDP: one rank prints
                print(f"epoch {epoch}: loss {loss.item() * args.accum_steps:.3f} (rank 0's batch)")
        if rank == 0:  # DDP: one writer; .module has the plain model's keys
            atomic_save(model.module.state_dict(), args.out / "checkpoint.pt")
        dist.barrier()  # DDP: no rank moves on before the file is complete
    finally:
        dist.destroy_process_group()  # DDP: leave the group, also after an error


if __name__ == "__main__":
    main()
