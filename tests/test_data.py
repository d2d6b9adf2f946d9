"""utils.data against the real Fashion-MNIST files, and every way they can be missing or damaged."""

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from utils import data
from utils.data import (
    CLASSES,
    FILES,
    DataError,
    fashion_mnist,
    fashion_mnist_tensors,
    find_fashion_mnist,
    load_split,
)


def copy_raw(real_raw_dir: Path, root: Path) -> Path:
    """A private copy of the four real files under root/FashionMNIST/raw, for damaging."""
    raw = root / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for pair in FILES.values():
        for name in pair:
            shutil.copy(real_raw_dir / name, raw / name)
    return raw


def test_real_data_has_the_expected_sizes(real_raw_dir):
    X_train, y_train = load_split(True)
    X_test, y_test = load_split(False)
    assert X_train.shape == (60_000, 28, 28) and X_train.dtype == torch.uint8
    assert X_test.shape == (10_000, 28, 28)
    assert torch.bincount(y_train).tolist() == [6000] * 10
    assert torch.bincount(y_test).tolist() == [1000] * 10
    assert y_train[:5].tolist() == [9, 0, 0, 3, 0]  # the published first labels of Fashion-MNIST
    assert len(CLASSES) == 10 and CLASSES[9] == "Ankle boot"


def test_tensors_are_normalised_like_totensor_plus_normalize(real_raw_dir):
    from torchvision import transforms

    tensors = fashion_mnist_tensors(False, limit=3)
    pil_set = fashion_mnist(
        False,
        transform=transforms.Compose(
            [transforms.ToTensor(), transforms.Normalize((data.MEAN,), (data.STD,))]
        ),
    )
    for i in range(3):
        image, label = pil_set[i]
        assert torch.allclose(tensors[i][0], image, atol=1e-6)
        assert tensors[i][1].item() == label
    X = tensors.tensors[0]
    assert X.shape == (3, 1, 28, 28) and X.min() >= -1 and X.max() <= 1


def test_system_copy_is_unpacked_into_an_empty_root(tmp_path, real_raw_dir):
    system = tmp_path / "system"
    system.mkdir()
    for pair in FILES.values():
        for name in pair:
            with (
                open(real_raw_dir / name, "rb") as src,
                gzip.open(system / f"{name}.gz", "wb", compresslevel=1) as dst,
            ):
                shutil.copyfileobj(src, dst)
    source = find_fashion_mnist(tmp_path / "root", system_dir=system, download=False)
    assert source.origin == "system copy"
    assert (
        find_fashion_mnist(tmp_path / "root", system_dir=system, download=False).origin
        == "prepared"
    )
    X, y = load_split(False, tmp_path / "root", system_dir=system, download=False)
    assert X.shape == (10_000, 28, 28)


def test_no_data_anywhere_names_all_three_fixes(tmp_path):
    with pytest.raises(DataError) as info:
        find_fashion_mnist(tmp_path, system_dir=tmp_path / "absent", download=False)
    message = str(info.value)
    assert "FashionMNIST/raw" in message  # 1. place the files by hand
    assert "apt install dataset-fashion-mnist" in message  # 2. the system package
    assert "internet" in message and "download" in message  # 3. torchvision's download


def test_no_data_message_names_the_real_system_location_apart_from_the_searched_one(tmp_path):
    searched = tmp_path / "absent"
    with pytest.raises(DataError) as info:
        find_fashion_mnist(tmp_path, system_dir=searched, download=False)
    message = str(info.value)
    searched_line, apt_line = (
        next(line for line in message.splitlines() if line.startswith(start))
        for start in ("Searched:", "  2. install")
    )
    assert f"{searched}/" in searched_line  # the folder this call looked in
    assert str(searched) not in message.split("  2. install", 1)[1]  # not where apt puts files
    follow_up = message.split(apt_line, 1)[1].splitlines()[1]
    assert f"{data.SYSTEM_DIR.as_posix()}/" in follow_up  # where the package really puts them


def test_failed_download_is_reported(tmp_path, monkeypatch):
    def no_network(root):
        raise OSError("Network is unreachable")

    monkeypatch.setattr(data, "_download", no_network)
    with pytest.raises(DataError, match="download failed: OSError: Network is unreachable"):
        find_fashion_mnist(tmp_path, system_dir=tmp_path / "absent", download=True)


def test_root_from_environment(tmp_path, monkeypatch, real_raw_dir):
    copy_raw(real_raw_dir, tmp_path)
    monkeypatch.setenv("FASHION_MNIST_ROOT", str(tmp_path))
    assert find_fashion_mnist(download=False).raw_dir == tmp_path / "FashionMNIST" / "raw"


def test_truncated_file_is_named(tmp_path, real_raw_dir):
    raw = copy_raw(real_raw_dir, tmp_path)
    path = raw / "t10k-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:100_000])
    with pytest.raises(DataError, match=r"t10k-images-idx3-ubyte is truncated.*Delete"):
        load_split(False, tmp_path, download=False)


def test_empty_file_is_named(tmp_path, real_raw_dir):
    raw = copy_raw(real_raw_dir, tmp_path)
    (raw / "train-labels-idx1-ubyte").write_bytes(b"")
    with pytest.raises(DataError, match="train-labels-idx1-ubyte is truncated or empty"):
        load_split(True, tmp_path, download=False)


def test_corrupt_header_is_named(tmp_path, real_raw_dir):
    raw = copy_raw(real_raw_dir, tmp_path)
    path = raw / "t10k-labels-idx1-ubyte"
    path.write_bytes(b"<html>" + path.read_bytes()[6:])  # e.g. an error page saved as the file
    with pytest.raises(DataError, match=r"t10k-labels-idx1-ubyte is not an IDX label file"):
        load_split(False, tmp_path, download=False)


def test_wrong_item_count(tmp_path, real_raw_dir):
    raw = copy_raw(real_raw_dir, tmp_path)
    path = raw / "t10k-labels-idx1-ubyte"
    content = path.read_bytes()
    path.write_bytes(content[:4] + (9_999).to_bytes(4, "big") + content[8:-1])
    with pytest.raises(DataError, match="holds 9999 items; Fashion-MNIST has 10000"):
        load_split(False, tmp_path, download=False)


def test_wrong_class_counts(tmp_path, real_raw_dir):
    raw = copy_raw(real_raw_dir, tmp_path)
    path = raw / "t10k-labels-idx1-ubyte"
    content = bytearray(path.read_bytes())
    first = content[8]
    content[8] = (first + 1) % 10  # one label moved to another class: counts 999 / 1001
    path.write_bytes(bytes(content))
    with pytest.raises(DataError, match="1000 of each of 10 classes"):
        load_split(False, tmp_path, download=False)


def test_loaders_batch_and_order(real_raw_dir):
    from utils.seed import make_generator

    train_loader, test_loader = data.make_loaders(
        batch_size=32,
        generator=make_generator(0),
        train_limit=256,
        test_limit=100,
        eval_batch_size=50,
    )
    X, y = next(iter(train_loader))
    assert X.shape == (32, 1, 28, 28) and y.shape == (32,)
    labels = torch.cat([y for _, y in test_loader])
    assert torch.equal(labels, load_split(False)[1][:100])  # test loader keeps the file's order
    again = next(iter(data.make_loaders(32, make_generator(0), train_limit=256, test_limit=100)[0]))
    assert torch.equal(again[1], y)
    assert np.unique(y.numpy()).size > 1


def test_gz_files_placed_by_hand_are_unpacked(tmp_path, real_raw_dir):
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for pair in FILES.values():
        for name in pair:
            with (
                open(real_raw_dir / name, "rb") as src,
                gzip.open(raw / f"{name}.gz", "wb", compresslevel=1) as dst,
            ):
                shutil.copyfileobj(src, dst)
    source = find_fashion_mnist(tmp_path, system_dir=tmp_path / "absent", download=False)
    assert source.origin == "prepared"
    assert load_split(False, tmp_path, download=False)[0].shape == (10_000, 28, 28)
