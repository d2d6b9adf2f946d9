"""One typed config per run and a timestamped run directory. Taught in notebooks/08_saving_and_loading.ipynb."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from utils.env import environment


@dataclass(frozen=True)
class RunConfig:
    """Everything that decides a training run, in one place, so a run can be repeated and compared."""

    seed: int = 0  # Python, NumPy and torch from one seed: runs differ only where you change them
    runs_root: str = "runs"  # each run gets a timestamped folder in here (git-ignored)
    lr: float = 1e-3  # Adam's easy default; drop to 1e-4 or 1e-5 if the loss turns NaN
    batch_size: int = 128  # 64/128/256 are sane defaults; halve it when memory runs out
    num_epochs: int = 4  # a ceiling: early stopping may end the run sooner
    checkpoint_every: int = 1  # epochs between checkpoints: a crash then costs at most this many
    patience: int | None = None  # epochs without a validation gain before stopping; None: never

    def __post_init__(self) -> None:
        problems = []
        if not isinstance(self.seed, int) or self.seed < 0:
            problems.append(f"seed must be a non-negative int, got {self.seed!r}")
        if not self.lr > 0:
            problems.append(f"lr must be > 0, got {self.lr!r}")
        for name in ("batch_size", "num_epochs", "checkpoint_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                problems.append(f"{name} must be an int >= 1, got {value!r}")
        if self.patience is not None and (not isinstance(self.patience, int) or self.patience < 1):
            problems.append(f"patience must be None or an int >= 1, got {self.patience!r}")
        if problems:
            raise ValueError("Invalid RunConfig: " + "; ".join(problems))

    def to_dict(self) -> dict:
        """Plain types only, so it goes into JSON and into a `weights_only=True` checkpoint."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> RunConfig:
        """Rebuild a config from `to_dict()` output; unknown keys are an error, not silently dropped."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"Unknown RunConfig field(s) {unknown}; known fields are {sorted(known)}. "
                "Was this config written by a different version of the code?"
            )
        return cls(**values)


def make_run_dir(config: RunConfig, root: str | Path | None = None, name: str = "run") -> Path:
    """Create `<root>/<YYYYmmdd-HHMMSS>-<name>/` holding config.json and environment.json.

    `root` defaults to `config.runs_root`. A second run in the same second gets a numbered suffix
    instead of overwriting the first.
    """
    root = Path(root if root is not None else config.runs_root)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = root / f"{stamp}-{name}"
    suffix = 1
    while True:
        try:
            run_dir.mkdir(parents=True, exist_ok=False)
            break
        except FileExistsError:
            suffix += 1
            run_dir = root / f"{stamp}-{name}-{suffix}"
    save_config(config, run_dir / "config.json")
    (run_dir / "environment.json").write_text(json.dumps(environment(), indent=2) + "\n")
    return run_dir


def save_config(config: RunConfig, path: str | Path) -> Path:
    """Write the config as readable JSON."""
    path = Path(path)
    path.write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    return path


def load_config(path: str | Path) -> RunConfig:
    """Read a config.json written by `save_config`, with a clear error naming a bad file."""
    path = Path(path)
    try:
        values = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"No config at {path}: is this a run directory?") from None
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{path} is not valid JSON ({err}); it is damaged or not a config."
        ) from None
    if not isinstance(values, dict):
        raise ValueError(f"{path} holds a {type(values).__name__}, expected a JSON object.")
    return RunConfig.from_dict(values)
