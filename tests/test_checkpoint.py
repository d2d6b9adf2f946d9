import random

import numpy as np
import pytest
import torch
from torch import nn

from utils.checkpoint import (
    CheckpointError,
    atomic_save,
    atomic_write,
    load_checkpoint,
    read_checkpoint,
    save_checkpoint,
)
from utils.seed import rng_state, set_rng_state


class Interrupt:
    """Pickling this raises mid-save, like Ctrl-C or a crash while the file is being written."""

    def __reduce__(self):
        raise KeyboardInterrupt("simulated crash during the write")


def small_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))


def test_round_trip_restores_model_optimizer_and_config(tmp_path):
    model = small_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(5, 4)).sum().backward()
    optimizer.step()
    path = save_checkpoint(tmp_path / "c.pt", model, optimizer, epoch=3, config={"lr": 1e-3})
    fresh = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    fresh_optimizer = torch.optim.Adam(fresh.parameters(), lr=1e-3)
    checkpoint = load_checkpoint(path, fresh, fresh_optimizer)
    assert checkpoint["epoch"] == 3 and checkpoint["config"] == {"lr": 1e-3}
    for a, b in zip(model.state_dict().values(), fresh.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert str(fresh_optimizer.state_dict()) == str(optimizer.state_dict())


def test_file_loads_with_weights_only_true(tmp_path):
    path = save_checkpoint(tmp_path / "c.pt", small_model(), epoch=1, history={"val_acc": [0.5]})
    assert torch.load(path, weights_only=True)["history"] == {"val_acc": [0.5]}


def test_rng_states_round_trip():
    generator = torch.Generator().manual_seed(5)
    state = rng_state(generator)
    expected = (
        random.random(),
        np.random.rand(),
        torch.rand(1),
        torch.rand(1, generator=generator),
    )
    set_rng_state(state, generator)
    again = (random.random(), np.random.rand(), torch.rand(1), torch.rand(1, generator=generator))
    assert expected[:2] == again[:2]
    assert torch.equal(expected[2], again[2]) and torch.equal(expected[3], again[3])


def test_missing_generator_state_is_explained(tmp_path):
    with pytest.raises(ValueError, match="no DataLoader generator state"):
        set_rng_state(rng_state(None), torch.Generator())
    path = save_checkpoint(tmp_path / "c.pt", small_model())  # saved without generator=
    with pytest.raises(
        CheckpointError, match="c.pt: The saved state holds no DataLoader generator"
    ):
        load_checkpoint(path, small_model(), generator=torch.Generator())


def test_rng_keys_are_the_same_on_every_machine():
    assert sorted(rng_state()) == ["cuda", "generator", "mps", "numpy", "python", "torch", "xpu"]


class FakeDevice:
    """Stands in for torch.cuda / torch.mps / torch.xpu: a state to hand out, a record of sets."""

    def __init__(self, *states):
        self.states, self.received = [torch.tensor(s, dtype=torch.uint8) for s in states], []

    def get_all(self):
        return [state.clone() for state in self.states]

    def get_one(self):
        return self.states[0].clone()


def fake_accelerators(monkeypatch):
    """CUDA with two devices, MPS and XPU with one each, all 'present' on this CPU machine."""
    cuda, mps, xpu = FakeDevice([1, 2], [3, 4]), FakeDevice([5, 6]), FakeDevice([7, 8])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", cuda.get_all)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", cuda.received.append)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.mps, "get_rng_state", mps.get_one)
    monkeypatch.setattr(torch.mps, "set_rng_state", mps.received.append)
    monkeypatch.setattr(torch.xpu, "is_available", lambda: True)
    monkeypatch.setattr(torch.xpu, "get_rng_state_all", xpu.get_all)
    monkeypatch.setattr(torch.xpu, "set_rng_state_all", xpu.received.append)
    return cuda, mps, xpu


def test_every_accelerator_state_is_saved_and_restored(tmp_path, monkeypatch):
    cuda, mps, xpu = fake_accelerators(monkeypatch)
    path = save_checkpoint(tmp_path / "c.pt", small_model())
    saved = torch.load(path, weights_only=True)["rng"]  # through the file, the safe loader
    assert [s.tolist() for s in saved["cuda"]] == [[1, 2], [3, 4]]  # every CUDA device
    assert saved["mps"].tolist() == [5, 6] and [s.tolist() for s in saved["xpu"]] == [[7, 8]]
    load_checkpoint(path, small_model())
    assert [[s.tolist() for s in call] for call in cuda.received] == [[[1, 2], [3, 4]]]
    assert [s.tolist() for s in mps.received] == [[5, 6]]
    assert [[s.tolist() for s in call] for call in xpu.received] == [[[7, 8]]]


def test_accelerator_states_are_skipped_where_the_accelerator_is_absent(monkeypatch):
    state = rng_state()
    if torch.cuda.is_available() or torch.backends.mps.is_available():
        pytest.skip("this check is for a machine without CUDA and MPS")
    assert state["cuda"] == [] and state["mps"] is None
    _, mps, _ = fake_accelerators(monkeypatch)
    set_rng_state(state)  # saved where nothing was present: nothing to restore on the devices
    assert mps.received == []
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    set_rng_state({**state, "mps": torch.tensor([9], dtype=torch.uint8)})  # saved on a Mac
    assert mps.received == []  # no MPS here: left alone instead of failing
    old_file = {key: value for key, value in state.items() if key not in ("mps", "xpu")}
    set_rng_state(old_file)  # a checkpoint written before MPS and XPU states were saved


def test_atomic_write_writes_any_bytes(tmp_path):
    path = atomic_write(tmp_path / "notes.txt", lambda file: file.write(b"hello"))
    assert path.read_bytes() == b"hello"


def test_interrupted_save_leaves_previous_file_loadable(tmp_path):
    path = tmp_path / "c.pt"
    atomic_save({"w": torch.ones(3)}, path)
    with pytest.raises(KeyboardInterrupt):
        atomic_save({"w": torch.zeros(3), "boom": Interrupt()}, path)
    assert torch.equal(read_checkpoint(path)["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # no temporary file left behind


def test_plain_torch_save_interrupted_destroys_the_file(tmp_path):
    """The reason atomic_save exists: torch.save straight to the path truncates it first."""
    path = tmp_path / "c.pt"
    torch.save({"w": torch.ones(3)}, path)
    with pytest.raises(KeyboardInterrupt):
        torch.save({"w": torch.zeros(3), "boom": Interrupt()}, path)
    with pytest.raises(CheckpointError, match="c.pt is damaged"):
        read_checkpoint(path)


def test_missing_empty_corrupt_and_truncated_files_name_the_file(tmp_path):
    with pytest.raises(CheckpointError, match="No checkpoint at .*nothing.pt"):
        read_checkpoint(tmp_path / "nothing.pt")
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match="empty.pt is empty"):
        read_checkpoint(tmp_path / "empty.pt")
    (tmp_path / "junk.pt").write_bytes(b"this is not a checkpoint")
    with pytest.raises(CheckpointError, match="junk.pt is not a file written by torch.save"):
        read_checkpoint(tmp_path / "junk.pt")
    good = atomic_save({"w": torch.ones(100)}, tmp_path / "good.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(good[: len(good) // 2])
    with pytest.raises(CheckpointError, match="cut.pt is damaged"):
        read_checkpoint(tmp_path / "cut.pt")


def test_pickled_objects_are_refused_by_the_safe_loader(tmp_path):
    torch.save(small_model(), tmp_path / "whole.pt")  # pickles the module object
    with pytest.raises(CheckpointError, match="safe loader refused it"):
        read_checkpoint(tmp_path / "whole.pt")


def test_wrong_architecture_lists_missing_unexpected_and_mismatched(tmp_path):
    path = save_checkpoint(tmp_path / "c.pt", small_model())
    other = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2), nn.Linear(2, 2))
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path, other)
    message = str(info.value)
    assert "c.pt does not fit Sequential" in message
    assert "missing keys (in the model, not in the file): ['3.weight', '3.bias']" in message
    assert "0.weight: file (3, 4) vs model (5, 4)" in message
    with pytest.raises(CheckpointError, match=r"unexpected keys .*\['3.weight', '3.bias'\]"):
        load_checkpoint(save_checkpoint(tmp_path / "d.pt", other), small_model())


def test_bad_arguments(tmp_path):
    with pytest.raises(TypeError, match="config must be a plain dict"):
        save_checkpoint(tmp_path / "c.pt", small_model(), config=object())
    torch.save({"0.weight": torch.ones(1)}, tmp_path / "bare.pt")
    with pytest.raises(CheckpointError, match="not a training checkpoint"):
        load_checkpoint(tmp_path / "bare.pt", small_model())
    path = save_checkpoint(tmp_path / "c.pt", small_model())
    model = small_model()
    with pytest.raises(CheckpointError, match="no optimizer state"):
        load_checkpoint(path, model, torch.optim.SGD(model.parameters(), lr=0.1))


def test_error_messages_use_forward_slashes(tmp_path):
    from pathlib import PureWindowsPath

    from utils.checkpoint import _shown

    assert _shown(PureWindowsPath("runs\\07\\ck.pt")) == "runs/07/ck.pt"
    assert _shown("runs/07/ck.pt") == "runs/07/ck.pt"
    missing = tmp_path / "sub" / "nothing.pt"
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(missing)
    assert f"No checkpoint at {missing.as_posix()}." in str(info.value)
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(empty, nn.Linear(2, 2))
    assert f"Checkpoint {empty.as_posix()} is empty" in str(info.value)


def test_expect_config_refuses_a_different_config_before_loading(tmp_path):
    path = save_checkpoint(tmp_path / "c.pt", small_model(), config={"lr": 1e-3, "batch_size": 128})
    fresh = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    before = {k: v.clone() for k, v in fresh.state_dict().items()}
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path, fresh, expect_config={"lr": 3e-4, "batch_size": 128, "model": "cnn"})
    message = str(info.value)
    assert "c.pt was saved with another config" in message
    assert "  lr: checkpoint 0.001, now 0.0003\n" in message
    assert "  model: not in the checkpoint, now 'cnn'\n" in message
    assert "batch_size" not in message and "leave its key out of expect_config" in message
    assert all(torch.equal(v, before[k]) for k, v in fresh.state_dict().items())  # untouched
    # the keys given are the keys checked; without expect_config nothing is checked, as before
    assert load_checkpoint(path, fresh, expect_config={"batch_size": 128})["epoch"] == 0
    assert load_checkpoint(path, fresh)["config"] == {"lr": 1e-3, "batch_size": 128}
    with pytest.raises(CheckpointError, match="holds no config"):
        load_checkpoint(save_checkpoint(tmp_path / "d.pt", fresh), fresh, expect_config={"lr": 1})
