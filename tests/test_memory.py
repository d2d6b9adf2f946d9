"""utils.memory.saved_bytes: the bytes autograd saves, checked against tensor sizes known by hand."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from utils.memory import saved_bytes


@pytest.fixture
def layer() -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(8, 4)


def test_a_linear_saves_its_input_for_the_weight_gradient(layer):
    inputs = torch.randn(32, 8)  # needs no gradient: only the weight's gradient needs the input
    assert saved_bytes(lambda: layer(inputs)) == {torch.float32: 32 * 8 * 4}


def test_a_linear_also_saves_its_weight_when_the_input_needs_a_gradient(layer):
    inputs = torch.randn(32, 8, requires_grad=True)
    assert saved_bytes(lambda: layer(inputs)) == {torch.float32: (32 * 8 + 4 * 8) * 4}


def test_a_tensor_saved_twice_counts_once():
    x = torch.randn(16, 16, requires_grad=True)
    assert saved_bytes(lambda: x * x) == {torch.float32: 16 * 16 * 4}  # mul saves both operands


def test_a_view_counts_its_whole_storage():
    x = torch.randn(16, 16, requires_grad=True)
    assert saved_bytes(lambda: x[:2].exp()) == {torch.float32: 2 * 16 * 4}  # exp saves its result
    assert saved_bytes(lambda: x[:2] * x[2:4]) == {torch.float32: 16 * 16 * 4}  # views of x


def test_max_pooling_saves_int64_indices_beside_its_input():
    images = torch.randn(2, 3, 8, 8, requires_grad=True)
    assert saved_bytes(lambda: F.max_pool2d(images, 2)) == {
        torch.float32: 2 * 3 * 8 * 8 * 4,
        torch.int64: 2 * 3 * 4 * 4 * 8,
    }


def test_autocast_saves_the_16_bit_copy(layer):
    inputs = torch.randn(32, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert saved_bytes(lambda: layer(inputs)) == {torch.bfloat16: 32 * 8 * 2}


def test_nothing_is_saved_without_a_graph(layer):
    inputs = torch.randn(32, 8)
    with torch.no_grad():
        assert saved_bytes(lambda: layer(inputs)) == {}
    with torch.inference_mode():
        assert saved_bytes(lambda: layer(inputs)) == {}


def test_the_hook_is_removed_when_forward_fails(layer):
    def failing():
        layer(torch.randn(32, 8))
        raise ValueError("in the forward pass")

    outer = []  # an outer hook sees saved tensors only while no inner hook is left on top of it
    with torch.autograd.graph.saved_tensors_hooks(lambda t: outer.append(t) or t, lambda t: t):
        with pytest.raises(ValueError, match="in the forward pass"):
            saved_bytes(failing)
        layer(torch.randn(2, 8))
    assert [tuple(t.shape) for t in outer] == [(2, 8)]
