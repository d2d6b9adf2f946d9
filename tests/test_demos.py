"""Tests of utils.demos: the failing DataLoader of notebooks/14_error_gallery.ipynb (worker_crash) and the spawn guard of notebooks/03 (spawn)."""

import multiprocessing
import re
import signal
import subprocess
import sys

import pytest
import torch

from utils.demos.worker_crash import FlakyDataset, error_lines, kill_signal, load_all, main


def test_dataset_items_and_length():
    dataset = FlakyDataset(size=5, fail_at=3, mode="fixed")
    assert len(dataset) == 5
    assert [dataset[i].item() for i in range(5)] == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_dataset_raises_at_the_bad_item_only():
    dataset = FlakyDataset(size=5, fail_at=3, mode="raises")
    assert torch.equal(dataset[2], torch.tensor([2.0]))
    with pytest.raises(ValueError, match="item 3: could not decode the image file"):
        dataset[3]


def test_dataset_rejects_unknown_mode():
    with pytest.raises(ValueError, match="mode must be one of killed, raises, fixed, got 'boom'"):
        FlakyDataset(mode="boom")


@pytest.mark.parametrize("fail_at", [-1, 5])
def test_dataset_rejects_fail_at_outside_the_dataset(fail_at):
    with pytest.raises(ValueError, match=r"fail_at must be in 0\.\.4"):
        FlakyDataset(size=5, fail_at=fail_at)


def test_fixed_loads_every_item():
    assert load_all("fixed", num_workers=0) == 64
    assert load_all("fixed", num_workers=2) == 64


def test_raises_in_main_process_shows_the_original_error():
    with pytest.raises(ValueError, match="^item 3: could not decode the image file$"):
        load_all("raises", num_workers=0)


def test_raises_in_worker_is_reraised_with_the_worker_named():
    with pytest.raises(ValueError, match="Caught ValueError in DataLoader worker process 0"):
        load_all("raises", num_workers=2)


def test_killed_worker_is_reported_by_the_loader():
    # Which error surfaces last is a race (the loader's "killed by signal" / "exited unexpectedly"
    # check, or a ConnectionResetError from its next read), but the chain always names the worker.
    with pytest.raises((RuntimeError, ConnectionResetError)) as info:
        load_all("killed", num_workers=2)
    messages, error = [], info.value
    while error is not None:
        messages.append(str(error))
        error = error.__cause__ or error.__context__
    assert any(
        re.search(r"DataLoader worker \(pid.*(exited unexpectedly|killed by signal)", m)
        for m in messages
    ), messages


def test_no_worker_outlives_a_failed_load():
    # A surviving worker would be stopped only when the traceback is garbage-collected, stalling
    # whatever runs then for up to 5 s; load_all stops the workers itself.
    for mode in ("killed", "raises"):
        before = set(multiprocessing.active_children())  # other tests' processes, if any
        with pytest.raises((RuntimeError, ConnectionResetError, ValueError)):
            load_all(mode, num_workers=2)
        assert set(multiprocessing.active_children()) <= before, mode


def test_kill_signal_is_portable(monkeypatch):
    if hasattr(signal, "SIGKILL"):
        assert kill_signal() == signal.SIGKILL
        monkeypatch.delattr(signal, "SIGKILL")  # as on Windows
    assert kill_signal() == signal.SIGTERM


def test_killed_needs_a_worker_process():
    with pytest.raises(ValueError, match="mode 'killed' needs num_workers >= 1"):
        load_all("killed", num_workers=0)


def test_negative_workers_rejected():
    with pytest.raises(ValueError, match="num_workers must be >= 0, got -1"):
        load_all("fixed", num_workers=-1)


def test_error_lines_masks_process_ids():
    stderr = (
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "RuntimeError: DataLoader worker (pid 7652) is killed by signal: Killed. \n"
        "\nThe above exception was the direct cause of the following exception:\n\n"
        "RuntimeError: DataLoader worker (pid(s) 7652, 7653) exited unexpectedly\n"
    )
    assert error_lines(stderr) == [
        "RuntimeError: DataLoader worker (pid N) is killed by signal: Killed.",
        "RuntimeError: DataLoader worker (pid(s) N) exited unexpectedly",
    ]


def test_error_lines_needs_an_error_line():
    with pytest.raises(ValueError, match="no 'SomeError: message' line"):
        error_lines("all good\n")


def test_main_prints_the_count(capsys):
    assert main(["fixed", "--num-workers", "0"]) == 0
    assert capsys.readouterr().out == "loaded 64 items with num_workers=0\n"


@pytest.mark.slow  # a new Python process that imports torch and starts two workers
def test_script_reports_a_killed_worker():
    result = subprocess.run(
        [sys.executable, "-m", "utils.demos.worker_crash", "killed", "--num-workers", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    worker_lines = [line for line in error_lines(result.stderr) if "DataLoader worker (pid" in line]
    assert worker_lines
    assert all("killed by signal" in line or "exited unexpectedly" in line for line in worker_lines)


@pytest.mark.slow  # two fresh Python processes that import torch, one spawning a worker
def test_spawn_demo_fails_without_the_guard_and_works_with_it():
    from utils.demos import spawn

    guarded, unguarded = spawn.run(guard=True), spawn.run(guard=False)
    assert guarded.returncode == 0 and guarded.stdout.strip().endswith(": 140"), guarded.stderr
    assert unguarded.returncode != 0 and "bootstrapping phase" in unguarded.stderr


def test_runtime_errors_keeps_each_first_sentence_and_masks_process_ids():
    from utils.demos.spawn import runtime_errors

    stderr = (
        "Traceback (most recent call last):\n  ...\nRuntimeError: \n        An attempt has been made to start a new\n"
        "        process before the current process has finished its bootstrapping phase. More text follows.\n"
        "Traceback ...\nRuntimeError: DataLoader worker (pid(s) 123, 456) exited unexpectedly\n"
    )
    assert runtime_errors(stderr) == [
        "RuntimeError: An attempt has been made to start a new process before the current process has finished"
        " its bootstrapping phase.",
        "RuntimeError: DataLoader worker (pid(s) ...) exited unexpectedly",
    ]
    assert runtime_errors("no error here") == []
