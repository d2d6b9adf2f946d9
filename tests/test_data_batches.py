"""utils.data: TensorBatches against a hand-made shuffle, random_hflip against torch.flip."""

import pytest
import torch

from utils.data import TensorBatches, random_hflip


def make_data(n: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    X = torch.arange(n * 4, dtype=torch.float32).reshape(n, 1, 2, 2)
    return X, torch.arange(n)


def test_one_pass_is_the_seeded_permutation_in_slices():
    X, y = make_data(10)
    batches = list(TensorBatches(X, y, 4, torch.Generator().manual_seed(3)))
    order = torch.randperm(10, generator=torch.Generator().manual_seed(3))
    assert [len(yb) for _, yb in batches] == [4, 4, 2]
    assert torch.equal(torch.cat([yb for _, yb in batches]), order)
    assert all(torch.equal(Xb, X[yb]) for Xb, yb in batches)  # images stay with their labels


def test_every_example_once_per_pass_and_a_new_order_each_pass():
    X, y = make_data(50)
    batches = TensorBatches(X, y, 8, torch.Generator().manual_seed(0))
    first = torch.cat([yb for _, yb in batches])
    second = torch.cat([yb for _, yb in batches])
    assert sorted(first.tolist()) == sorted(second.tolist()) == list(range(50))
    assert not torch.equal(first, second)


def test_same_seed_same_batches():
    X, y = make_data(30)
    runs = [
        [yb.tolist() for _, yb in TensorBatches(X, y, 7, torch.Generator().manual_seed(5))]
        for _ in range(2)
    ]
    assert runs[0] == runs[1]


@pytest.mark.parametrize(
    "n, batch_size, drop_last, expected",
    [(10, 4, False, 3), (10, 4, True, 2), (8, 4, False, 2), (8, 4, True, 2), (3, 4, False, 1)],
)
def test_len_counts_batches_like_a_dataloader(n, batch_size, drop_last, expected):
    X, y = make_data(n)
    batches = TensorBatches(X, y, batch_size, torch.Generator(), drop_last=drop_last)
    assert len(batches) == expected == len(list(batches))
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(X, y), batch_size=batch_size, drop_last=drop_last
    )
    assert len(loader) == expected
    if drop_last:
        assert all(len(yb) == batch_size for _, yb in batches)


def test_augment_runs_on_each_batch_with_the_generator():
    X, y = make_data(6)
    seen = []

    def negate(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        seen.append(generator)
        return -images

    generator = torch.Generator().manual_seed(1)
    batches = list(TensorBatches(X, y, 4, generator, augment=negate))
    assert len(seen) == 2 and all(g is generator for g in seen)
    assert all(torch.equal(Xb, -X[yb]) for Xb, yb in batches)


def test_random_hflip_mirrors_the_drawn_half():
    images = torch.arange(8 * 3 * 3, dtype=torch.float32).reshape(8, 1, 3, 3)
    flipped = random_hflip(images, torch.Generator().manual_seed(4))
    drawn = torch.rand(8, generator=torch.Generator().manual_seed(4)) < 0.5
    assert 0 < drawn.sum() < 8  # this seed flips some and keeps some
    for image, out, flip in zip(images, flipped, drawn, strict=True):
        assert torch.equal(out, image.flip(-1) if flip else image)
    assert torch.equal(images[0, 0, 0], torch.tensor([0.0, 1.0, 2.0]))  # the input is unchanged


def test_random_hflip_needs_a_batch_of_images():
    with pytest.raises(ValueError, match=r"expects a batch \(B, C, H, W\), got shape \(3, 3\)"):
        random_hflip(torch.zeros(3, 3), torch.Generator())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"batch_size": 0}, "batch_size must be a positive int, got 0"),
        ({"batch_size": 2.0}, "batch_size must be a positive int, got 2.0"),
        ({"batch_size": 20, "drop_last": True}, "no batches: 10 examples, batch_size=20"),
    ],
)
def test_bad_arguments_are_clear_errors(kwargs, message):
    X, y = make_data(10)
    with pytest.raises(ValueError, match=message):
        TensorBatches(X, y, generator=torch.Generator(), **kwargs)


def test_lengths_must_match():
    X, y = make_data(10)
    with pytest.raises(ValueError, match="same length, got 10 and 9"):
        TensorBatches(X, y[:9], 4, torch.Generator())
