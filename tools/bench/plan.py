"""What the benchmark runs: the training paths, each changing one thing of another, and their loaders."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, Subset, TensorDataset

from utils.data import MEAN, STD, TensorBatches, fashion_mnist
from utils.seed import make_generator

BASELINE = (
    "a typical tutorial recipe: PIL transforms in the DataLoader, batch 64, 2 workers, float32"
)
RECIPE_BATCH, RECIPE_WORKERS, RECIPE_LR = 64, 2, 3e-4  # the recipe's DataLoader and Adam
CHAPTER06_BATCH, CHAPTER06_LR = 128, 1e-3  # chapter 06's batch; Adam's default learning rate
OTHER_BATCHES = (64, 256)  # tried against chapter 06's 128 in each precision; the lr scales
QUICK_BACKEND = "aot_eager"  # --quick traces with torch.compile but skips code generation


def scaled_lr(batch_size: int) -> float:
    """Chapter 06's learning rate scaled linearly with the batch size (the linear scaling rule)."""
    return CHAPTER06_LR * batch_size / CHAPTER06_BATCH


@dataclass(frozen=True)
class PathSpec:
    """One way to train SimpleCNN; `base` names the path it changes one thing of."""

    key: str
    label: str
    batch_size: int
    lr: float
    loader: str  # "recipe" (PIL + transforms), "dataloader" (cached tensors), "slices"
    channels_last: bool = False
    bf16: bool = False
    compile_mode: str | None = None  # a torch.compile mode; None runs eagerly
    tuned: bool = False  # SimpleCNN(relu_after_pool=True): the same function, chapter 06's model
    base: str | None = None


def sliced_path(
    key: str,
    label: str,
    base: str,
    bf16: bool,
    batch_size: int = CHAPTER06_BATCH,
    compile_mode: str | None = None,
    tuned: bool = False,
) -> PathSpec:
    """A path over batches sliced from the cached tensors, channels_last, learning rate scaled."""
    return PathSpec(
        key,
        label,
        batch_size,
        scaled_lr(batch_size),
        "slices",
        channels_last=True,
        bf16=bf16,
        compile_mode=compile_mode,
        tuned=tuned,
        base=base,
    )


def plan_paths(
    native_bf16: bool, use_compile: bool, batches: Sequence[int] = OTHER_BATCHES
) -> tuple[list[PathSpec], list[str]]:
    """The paths to measure, baseline first, and a sentence for each path left out.

    Each path after the baseline changes one thing of its `base`, so each row of the report
    answers one question: does this change pay on this machine? Per precision: sliced batches of
    chapter 06's size, the same at each of `batches`, with the ReLU after pooling (`tuned`), and compiled.
    """
    paths = [
        PathSpec("baseline", f"baseline: {BASELINE}", RECIPE_BATCH, RECIPE_LR, "recipe"),
        PathSpec(
            "dataloader",
            "cached tensors in a DataLoader (chapter 03), channels_last, float32",
            CHAPTER06_BATCH,
            CHAPTER06_LR,
            "dataloader",
            channels_last=True,
            base="baseline",
        ),
    ]
    skipped = []
    precisions = [("sliced", "float32", False, "dataloader")]
    if native_bf16:
        precisions.append(("bf16", "bfloat16 autocast", True, "sliced"))
    else:
        skipped.append("bfloat16 paths: bfloat16 is not native on this device (emulated, slower)")
    if not use_compile:
        skipped.append("torch.compile paths: left out (--no-compile)")
    for key, precision, bf16, base in precisions:
        first = "chapter 06's loader: cached tensors sliced into shuffled batches, channels_last, ReLU before pooling"
        label = f"{first if not bf16 else 'sliced batches'}, {precision}"
        paths.append(sliced_path(key, label, base, bf16))
        for batch in sorted(set(batches) - {CHAPTER06_BATCH}):
            label = (
                f"sliced batches, {precision}, batch {batch}, learning rate {scaled_lr(batch):g}"
            )
            paths.append(sliced_path(f"{key}-{batch}", label, key, bf16, batch))
        label = f"sliced batches, {precision}, ReLU after pooling (chapter 06's model)"
        paths.append(sliced_path(f"{key}-tuned", label, key, bf16, tuned=True))
        if use_compile:
            compiled = "compiled" if key == "sliced" else f"{key}-compiled"
            label = f"sliced batches, {precision}, torch.compile"
            paths.append(sliced_path(compiled, label, key, bf16, compile_mode="default"))
    return paths, skipped


def recipe_loader(num_images: int, generator: torch.Generator) -> DataLoader:
    """The baseline: PIL images, ToTensor + Normalize per item, batch 64, 2 worker processes."""
    from torchvision import transforms

    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((MEAN,), (STD,))])
    dataset = fashion_mnist(True, transform=transform)
    if num_images < len(dataset):
        dataset = Subset(dataset, range(num_images))
    return DataLoader(
        dataset,
        batch_size=RECIPE_BATCH,
        shuffle=True,
        num_workers=RECIPE_WORKERS,
        generator=generator,
    )


def make_loader(
    spec: PathSpec, train_set: TensorDataset, on_device: TensorDataset, seed: int
) -> DataLoader | TensorBatches:
    """The loader `spec` names, shuffled from `seed`; `on_device` is `train_set` on the device."""
    generator = make_generator(seed)
    if spec.loader == "recipe":
        return recipe_loader(len(train_set), generator)
    if spec.loader == "dataloader":
        return DataLoader(train_set, batch_size=spec.batch_size, shuffle=True, generator=generator)
    # A compiled path drops the last, smaller batch: one more shape would compile again.
    drop_last = spec.compile_mode is not None
    X, y = on_device.tensors
    return TensorBatches(X, y, spec.batch_size, generator, drop_last=drop_last)
