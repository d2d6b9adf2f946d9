"""Real Fashion-MNIST, found offline where a copy exists. Taught in notebooks/03_datasets_and_dataloaders.ipynb.

Where the data comes from, in this order:
1. `<root>/FashionMNIST/raw/` already prepared (root: argument, else $FASHION_MNIST_ROOT,
   else `data/` at the repository root, or in the current folder outside a clone);
2. a system copy, `/usr/share/datasets/fashion-mnist/*.gz` from the Debian/Ubuntu package
   `dataset-fashion-mnist`, unpacked into the layout torchvision expects;
3. torchvision's own download.
It never substitutes random or synthetic data. Every file is checked before use.
"""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from utils import REPO_ROOT
from utils.idx import IMAGES_MAGIC, LABELS_MAGIC, DataError, read_idx

CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")
FILES = {  # split -> (images, labels), the names torchvision uses
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
COUNTS = {"train": 60_000, "test": 10_000}
MEAN, STD = 0.5, 0.5  # Normalize((0.5,), (0.5,)) maps 0..1 to -1..1


@dataclass(frozen=True)
class DataSource:
    raw_dir: Path  # <root>/FashionMNIST/raw, holding the four unpacked IDX files
    origin: str  # "prepared", "system copy" or "download"


def default_root() -> Path:
    """$FASHION_MNIST_ROOT if set, else `data/` at the repository root."""
    return Path(os.environ.get("FASHION_MNIST_ROOT", REPO_ROOT / "data"))


def _all_files() -> list[str]:
    return [name for pair in FILES.values() for name in pair]


def _has_files(folder: Path) -> bool:
    return all((folder / name).is_file() for name in _all_files())


def _unpack_system_copy(system_dir: Path, raw_dir: Path) -> None:
    """Unpack the four .gz files found in `system_dir` into `raw_dir`, atomically each."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    for name in _all_files():
        source = system_dir / f"{name}.gz"
        # Write to a temporary file, then rename: a half-unpacked file never looks prepared.
        with tempfile.NamedTemporaryFile(dir=raw_dir, delete=False) as out:
            try:
                with gzip.open(source, "rb") as src:
                    shutil.copyfileobj(src, out)
            except (OSError, EOFError) as err:
                out.close()
                os.unlink(out.name)
                raise DataError(
                    f"Could not unpack {source}: {err}. Reinstall the package "
                    "(sudo apt install --reinstall dataset-fashion-mnist)."
                ) from err
        os.replace(out.name, raw_dir / name)


def _download(root: Path) -> None:
    from torchvision.datasets import FashionMNIST

    for train in (True, False):
        FashionMNIST(str(root), train=train, download=True)


def find_fashion_mnist(
    root: str | Path | None = None,
    system_dir: str | Path = SYSTEM_DIR,
    download: bool = True,
) -> DataSource:
    """Make sure the four raw files are under `<root>/FashionMNIST/raw` and say where they came from."""
    root = Path(root) if root is not None else default_root()
    raw_dir = root / "FashionMNIST" / "raw"
    if _has_files(raw_dir):
        return DataSource(raw_dir, "prepared")
    if all((raw_dir / f"{name}.gz").is_file() for name in _all_files()):
        _unpack_system_copy(raw_dir, raw_dir)  # the .gz files placed by hand: unpack them in place
        return DataSource(raw_dir, "prepared")
    system_dir = Path(system_dir)
    if all((system_dir / f"{name}.gz").is_file() for name in _all_files()):
        _unpack_system_copy(system_dir, raw_dir)
        return DataSource(raw_dir, "system copy")
    problem = "download=False"
    if download:
        try:
            _download(root)
        except Exception as err:  # no network, proxy, server down: all end the same way
            problem = f"the download failed: {type(err).__name__}: {err}"
        if _has_files(raw_dir):
            return DataSource(raw_dir, "download")
    raise DataError(
        f"Fashion-MNIST was not found and could not be fetched ({problem}).\n"
        f"Searched: {raw_dir}/ (the four files or their .gz) and {system_dir}/ (a system copy).\n"
        "Any one of these fixes it:\n"
        f"  1. put the four files {', '.join(_all_files())} (or their .gz) in {raw_dir}/\n"
        f"     (or point FASHION_MNIST_ROOT at a folder that has FashionMNIST/raw/ inside);\n"
        f"  2. install the system copy: sudo apt install dataset-fashion-mnist (the package puts\n"
        f"     the files in {SYSTEM_DIR.as_posix()}/, searched unless you pass another system_dir);\n"
        "  3. connect to the internet and run again: torchvision downloads the data itself."
    )


def load_split(
    train: bool, root: str | Path | None = None, **find_kwargs
) -> tuple[torch.Tensor, torch.Tensor]:
    """Raw images (N, 28, 28) uint8 and labels (N,) int64 of one split, checked."""
    split = "train" if train else "test"
    raw_dir = find_fashion_mnist(root, **find_kwargs).raw_dir
    images_name, labels_name = FILES[split]
    count = COUNTS[split]
    images = read_idx(raw_dir / images_name, IMAGES_MAGIC, count)
    labels = read_idx(raw_dir / labels_name, LABELS_MAGIC, count)
    per_class = np.bincount(labels, minlength=len(CLASSES))
    if len(per_class) != len(CLASSES) or not (per_class == count // len(CLASSES)).all():
        raise DataError(
            f"{raw_dir / labels_name} has labels {per_class.tolist()} per class; Fashion-MNIST has "
            f"{count // len(CLASSES)} of each of 10 classes. Delete it and run again."
        )
    return torch.from_numpy(images.copy()), torch.from_numpy(labels.astype(np.int64))


def fashion_mnist(train: bool, root: str | Path | None = None, transform=None, **find_kwargs):
    """The torchvision `FashionMNIST` dataset (PIL images through `transform`), found offline first."""
    from torchvision.datasets import FashionMNIST

    source = find_fashion_mnist(root, **find_kwargs)
    load_split(train, root, **find_kwargs)  # check the files before torchvision trusts them
    return FashionMNIST(
        str(source.raw_dir.parent.parent), train=train, transform=transform, download=False
    )


def fashion_mnist_tensors(
    train: bool, root: str | Path | None = None, limit: int | None = None, **find_kwargs
) -> TensorDataset:
    """Images as normalised float tensors (N, 1, 28, 28) in [-1, 1], labels (N,): preprocessed once.

    This is what `ToTensor()` + `Normalize((0.5,), (0.5,))` give per image, done for the whole
    split in one vectorised step instead of again in every epoch. `limit` keeps the first N items.
    """
    images, labels = load_split(train, root, **find_kwargs)
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    X = (images.unsqueeze(1).float() / 255.0 - MEAN) / STD  # (N, 1, 28, 28)
    return TensorDataset(X, labels)


def make_loaders(
    batch_size: int = 128,
    generator: torch.Generator | None = None,
    root: str | Path | None = None,
    train_limit: int | None = None,
    test_limit: int | None = None,
    eval_batch_size: int = 1000,
) -> tuple[DataLoader, DataLoader]:
    """Train loader (shuffled with `generator`) and test loader (in order) over cached tensors."""
    train_set = fashion_mnist_tensors(True, root, limit=train_limit)
    test_set = fashion_mnist_tensors(False, root, limit=test_limit)
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, generator=generator)
    test_loader = DataLoader(test_set, batch_size=eval_batch_size, shuffle=False)
    return train_loader, test_loader
