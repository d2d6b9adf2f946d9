"""The Fashion-MNIST speedrun: how fast can this machine train a model to 0.92 test accuracy?

A `Recipe` names every choice (network widths, batch, learning rate, schedule, label smoothing,
flips, memory format, weight averaging, test-time flips); `train_run` trains one seed of it with
the book's loop (`utils.train.train_one_epoch`), times the training epochs only, reads the
validation split after each epoch (untimed, for the curve) and the test set once, at the end.
`python -m tools.bench --speedrun` runs the ablations and writes the results file.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from utils.data import TensorBatches, fashion_mnist_tensors, random_hflip
from utils.seed import make_generator, set_seed
from utils.timing import synchronize
from utils.train import train_one_epoch

TARGET = 0.92  # the mean test accuracy over seeds a recipe must reach
VAL_SIZE = 5_000  # held out of the 60,000 training images: as many as chapter 06 holds out
SPLIT_SEED = 0  # one split for every run: seeds change the weights and the batches, not the referee


@dataclass(frozen=True)
class Recipe:
    """Every choice of a speedrun; `dataclasses.replace(recipe, epochs=4)` makes a variant."""

    widths: tuple[int, int, int] = (16, 32, 128)  # stem channels, second conv, hidden units
    epochs: int = 8
    batch_size: int = 256
    lr: float = 4e-3  # AdamW's peak learning rate
    weight_decay: float = 5e-4  # on weight matrices and filters only
    schedule: str = "onecycle"  # "onecycle" (warm up 25%, anneal) or "constant"
    label_smoothing: float = 0.0
    flip: bool = True  # mirror a random half of each training batch
    channels_last: bool = True
    bf16: bool = False  # bfloat16 autocast: only worth it where the CPU has it natively
    ema: float | None = None  # decay of an exponential moving average of the weights, or None
    tta: bool = True  # at test time, average the predictions of each image and its mirror

    def __post_init__(self) -> None:
        if self.schedule not in ("onecycle", "constant"):
            raise ValueError(f"schedule must be 'onecycle' or 'constant', got {self.schedule!r}")
        if self.epochs < 1 or self.batch_size < 1 or self.lr <= 0:
            raise ValueError(f"epochs, batch_size and lr must be positive: {self}")
        if self.ema is not None and not 0 < self.ema < 1:
            raise ValueError(f"ema is a decay in (0, 1), e.g. 0.99, or None; got {self.ema!r}")

    def replace(self, **changes) -> Recipe:
        """A copy with `changes` (field=value) applied."""
        return dataclasses.replace(self, **changes)


def speed_net(widths: tuple[int, int, int] = Recipe.widths) -> nn.Sequential:
    """A small CNN for 28x28 images: a stride-2 stem, one conv + pool, a hidden layer.

    (B, 1, 28, 28) -> stem 3x3 stride 2 -> (B, c1, 14, 14) -> conv 3x3 -> pool -> (B, c2, 7, 7)
    -> hidden (h) -> 10 logits. The stride-2 stem does on 14x14 what SimpleCNN does on 28x28.
    """
    c1, c2, hidden = widths
    return nn.Sequential(
        nn.Conv2d(1, c1, 3, stride=2, padding=1, bias=False),  # BatchNorm's shift is the bias
        nn.BatchNorm2d(c1),
        nn.ReLU(inplace=True),
        nn.Conv2d(c1, c2, 3, padding=1, bias=False),
        nn.BatchNorm2d(c2),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(c2 * 7 * 7, hidden),
        nn.ReLU(inplace=True),
        nn.Linear(hidden, 10),
    )


@dataclass
class Data:
    """The training part, the validation split and the test set, as tensors on one device."""

    train: tuple[torch.Tensor, torch.Tensor]
    val: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]


def load_data(device: torch.device | str = "cpu", train_limit: int | None = None) -> Data:
    """Fashion-MNIST as normalised tensors: 55,000 to train on, 5,000 to validate, the 10,000 test.

    `train_limit` keeps only that many training images (a smoke test), the split unchanged.
    """
    X, y = fashion_mnist_tensors(True).tensors
    X_test, y_test = fashion_mnist_tensors(False).tensors
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(SPLIT_SEED))
    val_index, train_index = order[:VAL_SIZE], order[VAL_SIZE:][:train_limit]
    on = lambda *ts: tuple(t.to(device) for t in ts)  # noqa: E731
    return Data(
        on(X[train_index], y[train_index]), on(X[val_index], y[val_index]), on(X_test, y_test)
    )


@torch.no_grad()
def accuracy(
    model: nn.Module, X: torch.Tensor, y: torch.Tensor, recipe: Recipe, tta: bool | None = None
) -> float:
    """Share of (X, y) classified right in eval mode; with test-time flips if `tta` (default: the recipe's)."""
    tta = recipe.tta if tta is None else tta
    model.eval()
    memory_format = torch.channels_last if recipe.channels_last else torch.contiguous_format
    correct = 0
    for start in range(0, len(y), 1000):
        images = X[start : start + 1000].contiguous(memory_format=memory_format)
        with torch.autocast(X.device.type, dtype=torch.bfloat16, enabled=recipe.bf16):
            scores = model(images).float().softmax(dim=1)
            if tta:  # the mirror of a garment is the same garment
                scores += model(images.flip(-1)).float().softmax(dim=1)
        correct += (scores.argmax(dim=1) == y[start : start + 1000]).sum().item()
    return correct / len(y)


def flop_per_image(model: nn.Module) -> float:
    """FLOP of one training step per image (forward, loss, backward), as FlopCounterMode counts them.

    Convolutions and matrix multiplies; not the elementwise layers or the optimizer step.
    Independent of the machine, so it compares runs anywhere.
    """
    from torch.utils.flop_counter import FlopCounterMode

    batch = 16
    with FlopCounterMode(display=False) as counter:
        images = torch.zeros(batch, 1, 28, 28)
        nn.functional.cross_entropy(model(images), torch.zeros(batch, dtype=torch.long)).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / batch


def training_flop(recipe: Recipe, num_images: int) -> float:
    """FLOP of a run of `recipe` that trains on `num_images` images (counting repeats)."""
    return flop_per_image(speed_net(recipe.widths)) * num_images


@dataclass
class RunResult:
    """One seed of a recipe: training seconds, the validation curve, the final test accuracy."""

    seed: int
    train_seconds: float
    test_acc: float  # with test-time flips where the recipe has them
    test_acc_other: float = float("nan")  # the same weights scored the other way (flips off/on)
    curve: list[tuple[float, float]] = field(default_factory=list)  # (seconds so far, val acc)
    val_acc_other: float = float("nan")  # the last epoch's validation accuracy scored the other way
    flop: float = 0.0
    diverged: bool = False


def decay_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two parameter groups, as in chapter 06: decay on matrices and filters, none on biases and norms."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in params if p.ndim > 1], "weight_decay": weight_decay},
        {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0},
    ]


def make_optimizer(model: nn.Module, recipe: Recipe, steps: int):
    """AdamW with decay on matrices and filters only, and the recipe's schedule over `steps`."""
    optimizer = torch.optim.AdamW(decay_groups(model, recipe.weight_decay), lr=recipe.lr)
    if recipe.schedule == "constant":
        return optimizer, None
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=recipe.lr, total_steps=steps, pct_start=0.25
    )
    return optimizer, scheduler


def train_run(
    recipe: Recipe, seed: int, data: Data, device: torch.device | str = "cpu"
) -> RunResult:
    """Train one seed of `recipe` on `data`; only the training epochs are timed."""
    device = torch.device(device)
    set_seed(seed)  # the same weights, batches and flips for the same seed
    memory_format = torch.channels_last if recipe.channels_last else torch.contiguous_format
    model = speed_net(recipe.widths).to(device, memory_format=memory_format)
    X, y = data.train
    batches = TensorBatches(
        X.contiguous(memory_format=memory_format), y, recipe.batch_size, make_generator(seed),
        drop_last=True, augment=random_hflip if recipe.flip else None,
    )  # fmt: skip
    optimizer, scheduler = make_optimizer(model, recipe, recipe.epochs * len(batches))
    loss_fn = nn.CrossEntropyLoss(label_smoothing=recipe.label_smoothing)
    averaged = None
    if recipe.ema is not None:
        averaged = AveragedModel(
            model, multi_avg_fn=get_ema_multi_avg_fn(recipe.ema), use_buffers=True
        )
    result = RunResult(
        seed, 0.0, 0.0, flop=training_flop(recipe, recipe.epochs * len(batches) * recipe.batch_size)
    )
    scored = averaged if averaged is not None else model
    for _ in range(recipe.epochs):
        synchronize(device)
        start = time.perf_counter()
        loss = train_one_epoch(
            model, batches, loss_fn, optimizer, device, scheduler=scheduler,
            autocast_dtype=torch.bfloat16 if recipe.bf16 else None, memory_format=memory_format,
            on_step=(lambda _loss: averaged.update_parameters(model)) if averaged else None,
        )  # fmt: skip
        synchronize(device)
        result.train_seconds += time.perf_counter() - start
        if not math.isfinite(loss):
            result.diverged = True
            break
        result.curve.append((result.train_seconds, accuracy(scored, *data.val, recipe)))
    result.val_acc_other = accuracy(scored, *data.val, recipe, tta=not recipe.tta)
    result.test_acc = accuracy(scored, *data.test, recipe)  # read once, after training
    result.test_acc_other = accuracy(
        scored, *data.test, recipe, tta=not recipe.tta
    )  # for the ablation
    return result


FINAL = Recipe()  # the speedrun's recipe: each ablation below changes one thing of it


@dataclass(frozen=True)
class Ablation:
    """One row: a recipe that changes one thing of FINAL, and what the change is."""

    key: str
    change: str
    recipe: Recipe


def ablations(native_bf16: bool) -> list[Ablation]:
    """FINAL, then one change at a time, in the order a learner meets the ideas."""
    rows = [
        Ablation("final", "the final recipe", FINAL),
        Ablation("batch-512", "batch 512, learning rate doubled", FINAL.replace(batch_size=512, lr=FINAL.lr * 2)),
        Ablation("constant-lr", "no schedule: a constant learning rate (a third of the peak)",
                 FINAL.replace(schedule="constant", lr=FINAL.lr / 3)),
        Ablation("smoothing", "label smoothing 0.1", FINAL.replace(label_smoothing=0.1)),
        Ablation("contiguous", "NCHW (contiguous) instead of channels_last", FINAL.replace(channels_last=False)),
        Ablation("no-flips", "no random flips in training", FINAL.replace(flip=False)),
        Ablation("narrower", "narrower network (8, 16, 64)", FINAL.replace(widths=(8, 16, 64))),
        Ablation("fewer-epochs", f"{FINAL.epochs - 1} epochs", FINAL.replace(epochs=FINAL.epochs - 1)),
        Ablation("ema", "an exponential moving average of the weights (decay 0.99)", FINAL.replace(ema=0.99)),
    ]  # fmt: skip
    if native_bf16:
        rows.append(Ablation("bf16", "bfloat16 autocast", FINAL.replace(bf16=True)))
    return rows


def results_table(results: dict) -> str:
    """A results file's rows as a markdown table: seeds, seconds and test accuracy (mean, min-max), FLOP."""
    rows, lines = results["rows"], []
    lines.append(
        "| row | change | seeds | training s (min-max) | test accuracy mean (min-max) | GFLOP |"
    )
    lines.append("|:--|:--|--:|--:|--:|--:|")
    for key, row in rows.items():
        if "acc_mean" not in row:
            continue
        lines.append(
            f"| {key} | {row['change']} | {len(row['runs'])} | {row['seconds_mean']:.1f} "
            f"({row['seconds_min']:.1f}-{row['seconds_max']:.1f}) | {row['acc_mean']:.4f} "
            f"({row['acc_min']:.4f}-{row['acc_max']:.4f}) | {row['flop'] / 1e9:.0f} |"
        )
    for name in ("chapter06", "tutorial"):
        if name in rows:
            row = rows[name]
            reach = next((seconds for seconds, acc in row["curve"] if acc >= TARGET), None)
            text = (
                f"first epoch there at {reach:.0f} s"
                if reach is not None
                else f"not reached in {row['epochs']} epochs"
            )
            lines.append(
                f"| {name} | reference recipe | 1 | {row['curve'][-1][0]:.0f} | "
                f"{row['test_acc']:.4f} | to {TARGET}: {text} |"
            )
    machine = results.get("machine", {})
    lines.append(f"\nMachine: {machine.get('name')}; torch {machine.get('torch')}.")
    return "\n".join(lines)
