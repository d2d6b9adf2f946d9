"""Stop a test run at once, with one message, when Fashion-MNIST is missing.

Without the data, every notebook and every test that reads the real files fails with a copy of
the same `utils.data.DataError` (hundreds of them in `make test`). This pytest plugin, which the
repository's conftest.py loads, looks for the data once, before anything runs, and only when the
run needs it:
- a run of notebooks (`--nbval` or `--nbval-lax` with a notebook or a folder to collect) checks
  at the start, before collection; under pytest-xdist (`-n 2`) that is the controller, before
  any worker starts;
- any other run checks after collection, if a collected test is a notebook cell or uses the
  `real_raw_dir` fixture; a run of unit tests that need no data never looks.
The check is `find_fashion_mnist()` itself (the data folder, $FASHION_MNIST_ROOT, the system
copy, the download), so the run stops with its message: where it looked and the three fixes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

DATA_FIXTURE = "real_raw_dir"  # tests/conftest.py: the real raw files
CHECKED = pytest.StashKey[bool]()


def missing_data() -> str | None:
    """The DataError's message when Fashion-MNIST can be neither found nor fetched, else None."""
    from utils.data import DataError, find_fashion_mnist

    try:
        find_fashion_mnist()
    except DataError as error:
        return str(error)
    return None


def stop_if_missing(config: pytest.Config) -> None:
    """Look for the data once per run; without it, end the run with one message (exit code 4)."""
    config.stash[CHECKED] = True
    message = missing_data()
    if message is not None:
        # A UsageError ends the run before any test and prints its message once (pytest.exit
        # would print it twice: once to stderr, once in the summary).
        raise pytest.UsageError(f"{message}\nNo test was run: every notebook needs this data.")


def runs_notebooks(config: pytest.Config) -> bool:
    """Whether nbval is on and the command line names a notebook or a folder (which may hold some)."""
    if not (config.getoption("nbval", False) or config.getoption("nbval_lax", False)):
        return False
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0])
        if path.suffix == ".ipynb" or path.is_dir():
            return True
    return False


def is_worker(config: pytest.Config) -> bool:
    """A pytest-xdist worker: its controller has done the check."""
    return hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)  # before xdist's own sessionstart, which starts the workers
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if config.option.collectonly or is_worker(config):
        return
    if runs_notebooks(config):
        stop_if_missing(config)


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if config.option.collectonly or is_worker(config) or config.stash.get(CHECKED, False):
        return
    if any(
        item.path.suffix == ".ipynb" or DATA_FIXTURE in getattr(item, "fixturenames", ())
        for item in session.items
    ):
        stop_if_missing(config)
