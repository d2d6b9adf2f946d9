import os
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


def test_deterministic_flag_is_set_and_cleared(monkeypatch):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    set_seed(0, deterministic=True)
    assert torch.are_deterministic_algorithms_enabled()
    set_seed(0)
    assert not torch.are_deterministic_algorithms_enabled()


def test_cublas_setting_is_made_while_cuda_is_not_yet_initialised(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    set_seed(0, deterministic=True)
    set_seed(0)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


def test_cublas_setting_too_late_is_an_error_that_says_how(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    set_seed(0)  # deterministic algorithms off
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)  # as after work on a GPU
    with pytest.raises(RuntimeError, match=r"CUDA is already initialised(.|\n)*first cell"):
        set_seed(0, deterministic=True)
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ  # not set where it cannot take effect
    assert not torch.are_deterministic_algorithms_enabled()  # and nothing else half-done
    set_seed(0)  # without deterministic=True nothing is needed


def test_cublas_setting_made_in_time_is_accepted_after_cuda_started(monkeypatch):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")  # the user's own valid choice
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    set_seed(0, deterministic=True)
    set_seed(0)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"  # kept, not overwritten


@pytest.mark.parametrize("bad", [-1, 1.5, "1"])
def test_bad_seed(bad):
    with pytest.raises(ValueError, match="non-negative int"):
        set_seed(bad)
