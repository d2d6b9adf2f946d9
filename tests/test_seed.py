import random

import numpy as np
import pytest
import torch

from utils.seed import make_generator, set_seed


def draw():
    return random.random(), np.random.rand(), torch.rand(3).tolist()


def test_same_seed_same_numbers_everywhere():
    set_seed(7)
    first = draw()
    set_seed(7)
    assert draw() == first
    set_seed(8)
    assert draw() != first


def test_generator_drives_shuffling():
    data = list(range(20))

    def order(generator):
        loader = torch.utils.data.DataLoader(data, batch_size=20, shuffle=True, generator=generator)
        return next(iter(loader)).tolist()

    assert order(set_seed(3)) == order(make_generator(3))
    assert order(make_generator(3)) != order(make_generator(4))


def test_deterministic_flag_is_set_and_cleared():
    set_seed(0, deterministic=True)
    assert torch.are_deterministic_algorithms_enabled()
    set_seed(0)
    assert not torch.are_deterministic_algorithms_enabled()


@pytest.mark.parametrize("bad", [-1, 1.5, "1"])
def test_bad_seed(bad):
    with pytest.raises(ValueError, match="non-negative int"):
        set_seed(bad)
