"""The IDX file format Fashion-MNIST ships in, read with every check a damaged copy can fail.

Taught (as what can go wrong with downloaded data) in notebooks/03_datasets_and_dataloaders.ipynb.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

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
