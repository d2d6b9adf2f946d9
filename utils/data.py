"""Real Fashion-MNIST, found offline where a copy exists. Taught in notebooks/03_datasets_and_dataloaders.ipynb.

Also here: the IDX file reader with its checks (`read_idx`, `DataError`), and batches sliced from
tensors already in memory (`TensorBatches`, `random_hflip`, notebooks/05_convolutions.ipynb).

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from utils import REPO_ROOT

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


# The IDX file format Fashion-MNIST ships in, read with every check a damaged copy can fail
IMAGES_MAGIC, LABELS_MAGIC = 2051, 2049  # IDX headers: 0x00000803 and 0x00000801


class DataError(RuntimeError):
    """Fashion-MNIST is missing or a file of it is damaged; the message says what to do."""


def read_idx(path: Path, magic: int, count: int) -> np.ndarray:
    """Read one IDX file and check its header and size against what Fashion-MNIST must be."""
    data = path.read_bytes()
    fix = f"Delete {path} and run again to unpack or download a fresh copy."
    if len(data) < 8:
        raise DataError(f"{path} is truncated or empty ({len(data)} bytes). {fix}")
    found_magic = int.from_bytes(data[0:4], "big")
    if found_magic != magic:
        raise DataError(
            f"{path} is not an IDX {'image' if magic == IMAGES_MAGIC else 'label'} file "
            f"(magic number {found_magic}, expected {magic}): it is corrupt or the wrong file. {fix}"
        )
    found_count = int.from_bytes(data[4:8], "big")
    if found_count != count:
        raise DataError(f"{path} holds {found_count} items; Fashion-MNIST has {count} here. {fix}")
    header = 16 if magic == IMAGES_MAGIC else 8
    shape = (count, 28, 28) if magic == IMAGES_MAGIC else (count,)
    if magic == IMAGES_MAGIC and data[8:16] != (28).to_bytes(4, "big") * 2:
        raise DataError(f"{path} does not hold 28x28 images. {fix}")
    expected = header + int(np.prod(shape))
    if len(data) != expected:
        raise DataError(
            f"{path} is truncated or padded: {len(data)} bytes, expected {expected}. {fix}"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


# Shuffled mini-batches sliced from tensors already in memory, and a per-image random flip (notebooks 03 and 06)
Augment = Callable[[torch.Tensor, torch.Generator], torch.Tensor]


def random_hflip(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Mirror a random half (on average) of a batch (B, C, H, W) left to right; a new tensor."""
    if images.dim() != 4:
        raise ValueError(
            f"random_hflip expects a batch (B, C, H, W), got shape {tuple(images.shape)}"
        )
    # drawn on the CPU from the generator: the same flips on any device
    flip = torch.rand(len(images), generator=generator) < 0.5
    flip = flip.to(images.device).view(-1, 1, 1, 1)
    return torch.where(flip, images.flip(-1), images)


class TensorBatches:
    """Iterate over (X, y) in shuffled mini-batches, one gather per batch, like a shuffling DataLoader.

    Each pass draws a new order from `generator` (so a seeded generator gives the same batches on
    every machine); `augment(X_batch, generator)` (e.g. `random_hflip`) runs on each batch.
    """

    def __init__(
        self,
        X: torch.Tensor,
        y: torch.Tensor,
        batch_size: int,
        generator: torch.Generator,
        *,
        drop_last: bool = False,
        augment: Augment | None = None,
    ) -> None:
        if len(X) != len(y):
            raise ValueError(f"X and y must have the same length, got {len(X)} and {len(y)}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if len(y) == 0 or (drop_last and len(y) < batch_size):
            raise ValueError(
                f"no batches: {len(y)} examples, batch_size={batch_size}, drop_last={drop_last}"
            )
        self.X, self.y, self.batch_size = X, y, batch_size
        self.generator, self.drop_last, self.augment = generator, drop_last, augment

    def __len__(self) -> int:
        """Batches per pass, as `len(DataLoader)` counts them."""
        full, rest = divmod(len(self.y), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        order = torch.randperm(len(self.y), generator=self.generator).to(self.y.device)
        end = len(self) * self.batch_size if self.drop_last else len(self.y)
        for start in range(0, end, self.batch_size):
            index = order[start : start + self.batch_size]
            X = self.X[index]
            if self.augment is not None:
                X = self.augment(X, self.generator)
            yield X, self.y[index]
