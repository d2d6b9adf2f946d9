"""The speedrun's measurements: the final recipe over seeds, one-change ablations, two reference recipes.

    python -m tools.bench --speedrun                      everything (about 45 minutes on 2 cores)
    python -m tools.bench --speedrun --only final,tutorial   some rows, merged into an existing --out file
    python -m tools.bench --speedrun --quick              a smoke test on 2,000 images (~1 minute)

Each row trains from scratch, times the training epochs only (validation and test are untimed),
and reads the test set once per run, after its last epoch. The two reference recipes train
SimpleCNN: the typical tutorial recipe (PIL transforms in a DataLoader, batch 64, 2 workers,
Adam 3e-4, no schedule) and chapter 06's (10 epochs, flips). Their test accuracy is read after
every epoch, and the first epoch at the target gives their time to it (no decision uses it).
Results go to --out (JSON, with the machine they were measured on); the speedrun notebook in
notebooks/deeper/ draws its table and plot from the committed copy.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, Subset

from tools.bench.machine import bf16_native, describe_device, load_average
from tools.bench.plan import recipe_loader
from tools.bench.run import progress
from utils.data import TensorBatches, random_hflip
from utils.models import SimpleCNN
from utils.seed import make_generator, set_seed
from utils.speedrun import (
    FINAL,
    TARGET,
    Data,
    RunResult,
    ablations,
    decay_groups,
    load_data,
    results_table,
    train_run,
)
from utils.train import evaluate, train_one_epoch

RESULTS = Path("notebooks/deeper/speedrun_results.json")  # the committed copy the notebook reads
TUTORIAL_EPOCHS = 6  # the typical recipe's budget: "does not reach the target in 6 epochs"
CHAPTER06 = {"batch_size": 128, "lr": 3e-3, "weight_decay": 0.05, "epochs": 10}


def summarize_runs(runs: list[RunResult]) -> dict:
    """Mean and spread (min, max) of seconds and test accuracy over a row's seeds."""
    seconds, accs = [r.train_seconds for r in runs], [r.test_acc for r in runs]
    vals = [r.curve[-1][1] if r.curve else float("nan") for r in runs]
    return {
        "val_mean": statistics.fmean(vals),
        "val_other_mean": statistics.fmean(r.val_acc_other for r in runs),
        "acc_other_mean": statistics.fmean(r.test_acc_other for r in runs),
        "seconds_mean": statistics.fmean(seconds),
        "seconds_min": min(seconds),
        "seconds_max": max(seconds),
        "acc_mean": statistics.fmean(accs),
        "acc_min": min(accs),
        "acc_max": max(accs),
        "acc_stdev": statistics.stdev(accs) if len(accs) > 1 else 0.0,
        "reaches_target": statistics.fmean(accs) >= TARGET,
        "flop": runs[0].flop,
        "runs": [asdict(r) for r in runs],
    }


def run_reference(name: str, data: Data, seed: int, device: torch.device, quick: bool) -> dict:
    """One seed of the tutorial recipe or chapter 06's, with test accuracy after each epoch."""
    set_seed(seed)
    model = SimpleCNN(relu_after_pool=name == "chapter06").to(device)
    loss_fn = nn.CrossEntropyLoss()
    X, y = data.train
    if name == "tutorial":
        loader = recipe_loader(10**9, make_generator(seed))  # PIL + ToTensor + Normalize per item
        train_ids = _train_indices(len(loader.dataset), quick, len(y))
        loader = DataLoader(Subset(loader.dataset, train_ids), batch_size=loader.batch_size, shuffle=True,
                            num_workers=loader.num_workers, generator=make_generator(seed))  # fmt: skip
        optimizer, scheduler, epochs = (
            torch.optim.Adam(model.parameters(), lr=3e-4),
            None,
            TUTORIAL_EPOCHS,
        )
        memory_format = None
    else:
        c = CHAPTER06
        model = model.to(memory_format=torch.channels_last)
        memory_format = torch.channels_last
        loader = TensorBatches(X, y, c["batch_size"], make_generator(seed), augment=random_hflip)
        optimizer = torch.optim.AdamW(decay_groups(model, c["weight_decay"]), lr=c["lr"])
        epochs = c["epochs"]
        scheduler = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=c["lr"], total_steps=epochs * len(loader)
        )
    if quick:
        epochs = 2
    test_loader = DataLoader(torch.utils.data.TensorDataset(*data.test), batch_size=1000)
    seconds, curve = 0.0, []
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        train_one_epoch(
            model,
            loader,
            loss_fn,
            optimizer,
            device,
            scheduler=scheduler,
            memory_format=memory_format,
        )
        seconds += time.perf_counter() - start
        _, test_acc = evaluate(model, test_loader, loss_fn, device, memory_format=memory_format)
        curve.append((seconds, test_acc))
        progress(f"{name}: epoch {epoch}, {seconds:.0f} s, test accuracy {test_acc:.4f}")
    # chapter 06's schedule anneals over all its epochs: only its last epoch is its result
    reached = [
        s for s, acc in curve if acc >= TARGET
    ]  # the first epoch at the target: a generous reading
    return {"seed": seed, "epochs": epochs, "curve": curve, "test_acc": curve[-1][1],
            "seconds_to_target": reached[0] if reached else None}  # fmt: skip


def _train_indices(num_all: int, quick: bool, num_train: int) -> list[int]:
    """The speedrun's training part of the 60,000 (the validation split left out), as indices."""
    from utils.speedrun import SPLIT_SEED, VAL_SIZE

    order = torch.randperm(num_all, generator=torch.Generator().manual_seed(SPLIT_SEED))
    return order[VAL_SIZE:][:num_train].tolist()


def as_json(value):
    """`value` as it reads back from a JSON file (tuples become lists)."""
    return json.loads(json.dumps(value))


def machine_record(device: torch.device) -> dict:
    """What the numbers were measured on."""
    return {"name": describe_device(device), "device": str(device), "torch": torch.__version__,
            "bf16_native": bf16_native(device), "threads": torch.get_num_threads()}  # fmt: skip


def run_speedrun(
    out: Path | None,
    only: list[str] | None,
    seeds: int,
    ablation_seeds: int,
    device: torch.device,
    quick: bool,
) -> dict:
    """Measure the rows (all, or `only` those keys), merge them into `out` and return the results."""
    machine = machine_record(device)
    results = {"machine": machine, "target": TARGET, "final": asdict(FINAL), "rows": {}}
    if out is not None and out.exists() and only:
        previous = json.loads(out.read_text())
        if previous.get("machine", {}).get("name") != machine["name"]:
            raise SystemExit(
                f"{out} was measured on {previous.get('machine', {}).get('name')!r}, this is "
                f"{machine['name']!r}: rows from two machines cannot share a table. Write to "
                "another --out, or leave out --only to measure every row here."
            )
        if previous.get("final") != as_json(asdict(FINAL)):
            raise SystemExit(
                f"{out} was measured against another final recipe; rerun every row (no --only)."
            )
        results["rows"] = previous["rows"]
    rows = ablations(machine["bf16_native"])
    keys = [row.key for row in rows] + ["chapter06", "tutorial"]
    unknown = sorted(set(only or []) - set(keys))
    if unknown:
        raise SystemExit(f"--only: unknown rows {unknown}; the rows are {', '.join(keys)}")
    data = load_data(device, train_limit=2_000 if quick else None)
    for row in rows:
        if only and row.key not in only:
            continue
        count = 1 if quick else seeds if row.key == "final" else ablation_seeds
        recipe = row.recipe.replace(epochs=1) if quick else row.recipe
        runs = []
        for seed in range(count):
            runs.append(train_run(recipe, seed, data, device))
            progress(
                f"{row.key} seed {seed}: {runs[-1].train_seconds:.1f} s, test {runs[-1].test_acc:.4f}"
            )
        results["rows"][row.key] = {"change": row.change, "recipe": asdict(recipe), "load": load_average(),
                                    **summarize_runs(runs)}  # fmt: skip
    for name in ("chapter06", "tutorial"):
        if not only or name in only:
            results["rows"][name] = {
                "load": load_average(),
                **run_reference(name, data, 0, device, quick),
            }
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1) + "\n")
    return results


format_table = results_table  # the table lives beside the recipe, for the notebook
