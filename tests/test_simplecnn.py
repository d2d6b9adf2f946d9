import torch
from torch import nn

from utils.models import SimpleCNN, count_parameters


def test_shapes_through_each_block():
    model = SimpleCNN().eval()
    x = torch.randn(2, 1, 28, 28)
    shapes = []
    for layer in model.features:
        x = layer(x)
        shapes.append(tuple(x.shape))
    assert shapes[3] == (2, 32, 14, 14)  # 3x3 conv with padding 1 keeps 28, pooling halves it
    assert shapes[-1] == (2, 64, 7, 7)
    assert x.flatten(1).shape[1] == 64 * 7 * 7 == 3136
    assert model(torch.randn(2, 1, 28, 28)).shape == (2, 10)


def test_parameter_count_by_hand():
    conv1 = 1 * 32 * 9 + 32 + 2 * 32  # conv weights + bias + BatchNorm weight and bias
    conv2 = 32 * 64 * 9 + 64 + 2 * 64
    fc = 3136 * 128 + 128 + 128 * 10 + 10
    assert count_parameters(SimpleCNN()) == conv1 + conv2 + fc


def test_outputs_are_logits_not_probabilities():
    model = SimpleCNN().eval()
    logits = model(torch.randn(4, 1, 28, 28))
    assert not torch.allclose(logits.sum(dim=1), torch.ones(4))
    assert not any(isinstance(m, nn.Softmax | nn.LogSoftmax) for m in model.modules())


def test_channels_last_gives_the_same_result():
    torch.manual_seed(0)
    model = SimpleCNN().eval()
    x = torch.randn(3, 1, 28, 28)
    expected = model(x)
    model = model.to(memory_format=torch.channels_last)
    torch.testing.assert_close(model(x), expected, rtol=1e-4, atol=1e-5)


def test_custom_number_of_classes_and_dropout():
    model = SimpleCNN(num_classes=3, dropout=0.5)
    assert model(torch.randn(1, 1, 28, 28)).shape == (1, 3)
    assert model.classifier[3].p == 0.5


def test_relu_after_pool_is_the_same_function_with_the_same_keys():
    torch.manual_seed(0)
    plain, swapped = SimpleCNN(dropout=0.0), SimpleCNN(dropout=0.0, relu_after_pool=True)
    assert list(swapped.state_dict()) == list(plain.state_dict())
    swapped.load_state_dict(plain.state_dict())
    assert [type(m).__name__ for m in swapped.features[:4]] == [
        "Conv2d",
        "BatchNorm2d",
        "MaxPool2d",
        "ReLU",
    ]
    x = torch.randn(8, 1, 28, 28)
    torch.testing.assert_close(swapped(x), plain(x))
    plain(x).square().sum().backward()
    swapped(x).square().sum().backward()
    for (name, p), q in zip(plain.named_parameters(), swapped.parameters(), strict=True):
        torch.testing.assert_close(q.grad, p.grad, msg=name)
