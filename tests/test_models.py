"""utils.models.MLP and count_parameters against hand-computed values."""

import pytest
import torch
from torch import nn

from utils.models import MLP, count_parameters


def test_parameter_count_is_101770_by_hand():
    model = MLP()
    by_hand = (784 * 128 + 128) + (128 * 10 + 10)
    assert by_hand == 101_770
    assert count_parameters(model) == by_hand
    assert count_parameters(MLP(in_features=4, hidden=3, num_classes=2)) == (4 * 3 + 3) + (
        3 * 2 + 2
    )


def test_registered_layers_and_state_dict_keys():
    model = MLP()
    shapes = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    assert shapes == {
        "fc1.weight": (128, 784),
        "fc1.bias": (128,),
        "fc2.weight": (10, 128),
        "fc2.bias": (10,),
    }


def test_forward_matches_a_hand_computation():
    model = MLP(in_features=4, hidden=3, num_classes=2)
    with torch.no_grad():
        model.fc1.weight.copy_(
            torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, -1.0, 0.0], [-1.0, 0.0, 0.0, 0.0]])
        )
        model.fc1.bias.copy_(torch.tensor([0.0, 0.5, 0.0]))
        model.fc2.weight.copy_(torch.tensor([[1.0, 1.0, 1.0], [2.0, 0.0, -1.0]]))
        model.fc2.bias.copy_(torch.tensor([0.0, 1.0]))
    x = torch.tensor([[[2.0, 3.0], [1.0, 5.0]]])  # (1, 2, 2): flattened to [2, 3, 1, 5]
    # hidden pre-activation: [2, 3 - 1 + 0.5, -2] = [2, 2.5, -2]; ReLU -> [2, 2.5, 0]
    # logits: [2 + 2.5 + 0, 4 + 0 - 0 + 1] = [4.5, 5]
    assert model(x).tolist() == [[4.5, 5.0]]


def test_accepts_images_and_flat_vectors_with_any_batch_size():
    model = MLP().eval()
    images = torch.randn(5, 1, 28, 28)
    assert model(images).shape == (5, 10)
    assert torch.equal(model(images), model(images.reshape(5, 784)))
    assert model(torch.randn(1, 1, 28, 28)).shape == (1, 10)


def test_outputs_are_logits_and_gradients_reach_every_parameter():
    torch.manual_seed(0)
    model = MLP()
    logits = model(torch.randn(4, 1, 28, 28))
    assert not torch.allclose(logits.sum(dim=1), torch.ones(4))  # no softmax inside
    nn.functional.cross_entropy(logits, torch.tensor([0, 1, 2, 3])).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_count_parameters_trainable_only():
    model = MLP()
    model.fc1.requires_grad_(False)
    assert count_parameters(model) == 128 * 10 + 10
    assert count_parameters(model, trainable_only=False) == 101_770


def test_same_seed_same_weights():
    torch.manual_seed(3)
    first = MLP()
    torch.manual_seed(3)
    second = MLP()
    assert all(
        torch.equal(a, b) for a, b in zip(first.parameters(), second.parameters(), strict=True)
    )


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"in_features": 0}, "in_features=0"),
        ({"hidden": -3}, "hidden=-3"),
        ({"num_classes": 2.5}, "num_classes=2.5"),
        ({"hidden": True}, "hidden=True"),
    ],
)
def test_bad_sizes_are_a_clear_error(kwargs, name):
    with pytest.raises(ValueError, match="MLP sizes must be positive integers") as err:
        MLP(**kwargs)
    assert name in str(err.value)


def test_wrong_input_width_names_both_shapes():
    with pytest.raises(
        RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x2352 and 784x128\)"
    ):
        MLP()(torch.randn(2, 3, 28, 28))  # colour images into a greyscale model
