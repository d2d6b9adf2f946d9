import json
import platform
import subprocess

import pytest
import torch

import utils.env as env_module
from utils.config import RunConfig, load_config, make_run_dir, save_config
from utils.env import environment


def test_defaults_round_trip_through_json(tmp_path):
    config = RunConfig(seed=3, lr=1e-4)
    path = save_config(config, tmp_path / "config.json")
    assert json.loads(path.read_text())["lr"] == 1e-4
    assert load_config(path) == config


def test_run_dir_holds_config_and_never_overwrites(tmp_path):
    config = RunConfig()
    first = make_run_dir(config, root=tmp_path, name="cnn")
    second = make_run_dir(config, root=tmp_path, name="cnn")
    assert first != second
    assert first.parent == tmp_path and first.name.endswith("-cnn")
    assert load_config(first / "config.json") == config
    assert load_config(second / "config.json") == config


def test_run_dir_defaults_to_runs_root(tmp_path):
    config = RunConfig(runs_root=str(tmp_path / "elsewhere"))
    assert make_run_dir(config).parent == tmp_path / "elsewhere"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seed": -1}, "seed must be a non-negative int"),
        ({"lr": 0.0}, "lr must be > 0"),
        ({"batch_size": 0}, "batch_size must be an int >= 1"),
        ({"num_epochs": 2.5}, "num_epochs must be an int >= 1"),
        ({"checkpoint_every": 0}, "checkpoint_every must be an int >= 1"),
        ({"patience": 0}, "patience must be None or an int >= 1"),
    ],
)
def test_bad_values_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**kwargs)


def test_unknown_field_is_an_error():
    with pytest.raises(ValueError, match=r"Unknown RunConfig field\(s\) \['learning_rate'\]"):
        RunConfig.from_dict({"learning_rate": 0.1})


def test_load_config_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="No config at"):
        load_config(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(ValueError, match="broken.json is not valid JSON"):
        load_config(tmp_path / "broken.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="holds a list, expected a JSON object"):
        load_config(tmp_path / "list.json")


def test_every_field_is_one_a_run_reads():
    # data_root was dropped: the data's location never changes a result, and utils.data finds it
    assert [f for f in RunConfig().to_dict()] == [
        "seed", "runs_root", "lr", "batch_size", "num_epochs", "checkpoint_every", "patience",
    ]  # fmt: skip


def _fake_git(outputs: dict):
    """A stand-in for subprocess.run: `outputs` maps a git subcommand to (returncode, stdout)."""

    def run(args, **kwargs):
        assert args[0] == "git"
        if outputs is None:
            raise FileNotFoundError("git")
        returncode, stdout = outputs[args[1]]
        return subprocess.CompletedProcess(args, returncode, stdout=stdout, stderr="")

    return run


def test_run_dir_records_the_environment(tmp_path, monkeypatch):
    commit = "0123456789abcdef0123456789abcdef01234567"
    fake = _fake_git({"rev-parse": (0, commit + "\n"), "status": (0, " M utils/config.py\n")})
    monkeypatch.setattr(env_module.subprocess, "run", fake)
    run_dir = make_run_dir(RunConfig(), root=tmp_path)
    recorded = json.loads((run_dir / "environment.json").read_text())
    assert recorded == {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "git_commit": commit,
        "git_dirty": True,
    }


def test_environment_without_a_gpu(monkeypatch):
    monkeypatch.setattr(env_module.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(env_module.subprocess, "run", _fake_git(None))
    recorded = environment()
    assert recorded["cudnn"] is None and recorded["gpu"] is None
    assert recorded["cuda"] == torch.version.cuda  # the build's CUDA version, GPU or not


def test_environment_with_a_gpu(monkeypatch):
    monkeypatch.setattr(env_module.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(env_module.torch.cuda, "get_device_name", lambda index: f"Fake GPU {index}")
    monkeypatch.setattr(env_module.torch.backends.cudnn, "version", lambda: 91002)
    monkeypatch.setattr(env_module.subprocess, "run", _fake_git(None))
    recorded = environment()
    assert recorded["gpu"] == "Fake GPU 0" and recorded["cudnn"] == 91002
    assert json.loads(json.dumps(recorded)) == recorded  # plain JSON types only


def test_environment_clean_checkout(monkeypatch):
    fake = _fake_git({"rev-parse": (0, "abc\n"), "status": (0, "")})
    monkeypatch.setattr(env_module.subprocess, "run", fake)
    assert environment()["git_commit"] == "abc" and environment()["git_dirty"] is False


@pytest.mark.parametrize(
    "outputs",
    [None, {"rev-parse": (128, ""), "status": (128, "")}],
    ids=["git-missing", "not-a-repository"],
)
def test_environment_without_git(outputs, monkeypatch):
    monkeypatch.setattr(env_module.subprocess, "run", _fake_git(outputs))
    recorded = environment()
    assert recorded["git_commit"] is None and recorded["git_dirty"] is None
    assert recorded["torch"] == torch.__version__


def test_environment_when_git_hangs(monkeypatch):
    def hang(args, **kwargs):
        raise subprocess.TimeoutExpired(args, kwargs.get("timeout"))

    monkeypatch.setattr(env_module.subprocess, "run", hang)
    assert environment()["git_commit"] is None
