import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure

from utils.plot import plot_bars, plot_confusion_matrix, plot_curves, plot_history, show_images
from utils.train import confusion_matrix

HISTORY = {"train_loss": [1.0, 0.5, 0.4], "val_loss": [0.9, 0.6, 0.5], "val_acc": [0.7, 0.8, 0.85]}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_confusion_matrix_against_hand_count():
    targets = torch.tensor([0, 0, 1, 2, 2, 2])
    predictions = torch.tensor([0, 1, 1, 2, 0, 2])
    expected = torch.tensor([[1, 1, 0], [0, 1, 0], [1, 0, 2]])
    assert torch.equal(confusion_matrix(targets, predictions, 3), expected)
    assert confusion_matrix(targets, predictions, 3).sum() == len(targets)


def test_confusion_matrix_bad_inputs():
    with pytest.raises(ValueError, match="same length"):
        confusion_matrix(torch.tensor([0, 1]), torch.tensor([0]), 2)
    with pytest.raises(ValueError, match=r"predictions must lie in 0..1, found 0..2"):
        confusion_matrix(torch.tensor([0, 1]), torch.tensor([0, 2]), 2)
    with pytest.raises(ValueError, match=r"targets must lie in 0..1"):
        confusion_matrix(torch.tensor([-1, 1]), torch.tensor([0, 1]), 2)


def test_plot_history_draws_each_series():
    fig = plot_history(HISTORY, title="run")
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    loss_axis, acc_axis = fig.axes
    assert [list(line.get_ydata()) for line in loss_axis.lines] == [
        HISTORY["train_loss"],
        HISTORY["val_loss"],
    ]
    assert list(acc_axis.lines[0].get_ydata()) == HISTORY["val_acc"]


def test_epoch_axes_have_whole_ticks_only():
    three_epochs = {
        "train_loss": [0.9, 0.6, 0.5],
        "val_loss": [0.8, 0.7, 0.6],
        "val_acc": [0.7, 0.8, 0.85],
    }
    figures = [
        plot_history(three_epochs),
        plot_curves({"adam": [0.5, 0.6, 0.7]}, ylabel="accuracy"),
    ]
    for ax in [ax for fig in figures for ax in fig.axes]:
        fig = ax.figure
        fig.canvas.draw()
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_plot_history_missing_key():
    with pytest.raises(KeyError, match="history has no 'val_acc'"):
        plot_history({"train_loss": [1.0], "val_loss": [1.0]})


def test_plot_curves():
    fig = plot_curves({"adam": [0.5, 0.6], "sgd": [0.4, 0.7]}, ylabel="accuracy")
    assert [line.get_label() for line in fig.axes[0].lines] == ["adam", "sgd"]
    with pytest.raises(ValueError, match="curves is empty"):
        plot_curves({}, ylabel="accuracy")


def test_plot_confusion_matrix_writes_counts_and_checks_shape():
    matrix = torch.tensor([[5, 1], [2, 7]])
    fig = plot_confusion_matrix(matrix, ["a", "b"])
    assert [text.get_text() for text in fig.axes[0].texts] == ["5", "1", "2", "7"]
    fig = plot_confusion_matrix(matrix, ["a", "b"], normalize=True)
    assert fig.axes[0].texts[0].get_text() == "0.83"
    with pytest.raises(ValueError, match="matrix must be 3x3 for 3 class names"):
        plot_confusion_matrix(matrix, ["a", "b", "c"])


def test_show_images_grid_and_titles():
    fig = show_images(torch.rand(10, 1, 28, 28), titles=[str(i) for i in range(10)], ncols=4)
    assert len(fig.axes) == 12  # 3 rows of 4, the last two left empty
    assert fig.axes[9].get_title() == "9" and len(fig.axes[10].images) == 0
    with pytest.raises(ValueError, match="got 2 titles for 3 images"):
        show_images(torch.rand(3, 28, 28), titles=["a", "b"])
    with pytest.raises(ValueError, match="non-empty"):
        show_images(torch.rand(3, 3, 28, 28))


def test_plot_bars_labels_values():
    fig = plot_bars({"contiguous": 2.0, "channels_last": 1.25}, ylabel="s")
    assert [text.get_text() for text in fig.axes[0].texts] == ["2.00", "1.25"]
    with pytest.raises(ValueError, match="values is empty"):
        plot_bars({}, ylabel="s")
