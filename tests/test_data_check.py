"""Without Fashion-MNIST a run that needs it stops at once with one message (tests/data_check.py).

Each test runs pytest (in this process, with `pytester`) on a tiny test file or notebook in a
temporary folder, with the plugin loaded and the data hidden: FASHION_MNIST_ROOT points at an empty
folder, and `find_fashion_mnist` at an empty system folder with its download turned off (so this
machine's own copy is not found and nothing goes to the network).
"""

from __future__ import annotations

import json

import pytest

import utils.data

pytest_plugins = ["pytester"]

NOT_FOUND = "Fashion-MNIST was not found"
RAN = "a test ran although the data is missing"
NEEDS_DATA = f"""
import pytest

@pytest.fixture
def real_raw_dir():
    raise AssertionError({RAN!r})

def test_reads_the_data(real_raw_dir):
    pass

def test_reads_it_too(real_raw_dir):
    pass
"""
NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# 99 · Tiny"]},
        {
            "cell_type": "code",
            "execution_count": 1,
            "metadata": {},
            "outputs": [],
            "source": [f"raise AssertionError({RAN!r})"],
        },
    ],
    "metadata": {},
    "nbformat": 4,
    "nbformat_minor": 5,
}


@pytest.fixture
def no_data(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester whose runs find no Fashion-MNIST anywhere and may not download it."""
    monkeypatch.setenv("FASHION_MNIST_ROOT", str(pytester.path / "empty_root"))
    empty_system = pytester.mkdir("empty_system")
    # find_fashion_mnist(root=None, system_dir=<an empty folder>, download=False)
    monkeypatch.setattr(utils.data.find_fashion_mnist, "__defaults__", (None, empty_system, False))
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, str]:
    result = pytester.runpytest_inprocess("-p", "tests.data_check", "-p", "no:cacheprovider", *args)
    return result, result.stdout.str() + result.stderr.str()


def assert_stopped_with_one_message(result: pytest.RunResult, output: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert output.count(NOT_FOUND) == 1, output
    assert "download=False" in output and "Any one of these fixes it" in output, output
    assert RAN not in output, output


def test_tests_that_need_the_data_stop_the_run_at_once(no_data: pytest.Pytester) -> None:
    no_data.makepyfile(test_needs_data=NEEDS_DATA)
    result, output = run(no_data, "test_needs_data.py")
    assert_stopped_with_one_message(result, output)
    assert "passed" not in output and "failed" not in output


def test_notebooks_under_xdist_stop_before_any_worker_starts(no_data: pytest.Pytester) -> None:
    (no_data.path / "99_tiny.ipynb").write_text(json.dumps(NOTEBOOK))
    result, output = run(no_data, "--nbval", "-n", "2", "99_tiny.ipynb")
    assert_stopped_with_one_message(result, output)
    assert "workers" not in output  # xdist never said "created: 2/2 workers"


def test_a_run_that_needs_no_data_does_not_look(no_data: pytest.Pytester) -> None:
    no_data.makepyfile(test_no_data="def test_arithmetic():\n    assert 1 + 1 == 2\n")
    result, output = run(no_data, "test_no_data.py")
    assert result.ret == pytest.ExitCode.OK and "1 passed" in output, output
    assert NOT_FOUND not in output
