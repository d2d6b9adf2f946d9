"""Shared fixtures: the real Fashion-MNIST raw files, prepared once per test session."""

from pathlib import Path

import pytest

from utils.data import find_fashion_mnist


@pytest.fixture(scope="session")
def real_raw_dir() -> Path:
    """The folder holding the four real IDX files (prepared from the system copy if needed)."""
    return find_fashion_mnist().raw_dir
