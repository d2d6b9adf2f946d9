"""utils.speedrun and tools.bench.speedrun: the recipe's checks, the network, the split, one short
run, the FLOP count, the results file's merge rules and the table."""

import json
import math

import pytest
import torch

from tools.bench import speedrun as bench
from tools.bench.machine import training_flop_per_image
from utils.speedrun import (
    TARGET,
    VAL_SIZE,
    Data,
    Recipe,
    RunResult,
    accuracy,
    load_data,
    speed_net,
    train_run,
    training_flop,
)


@pytest.fixture(scope="module")
def small_data() -> Data:
    data = load_data(train_limit=512)
    # a smaller referee keeps the test fast; the split itself is checked below
    return Data(data.train, tuple(t[:500] for t in data.val), tuple(t[:500] for t in data.test))


def test_recipe_rejects_bad_values_with_what_to_pass():
    with pytest.raises(ValueError, match="onecycle"):
        Recipe(schedule="cosine")
    with pytest.raises(ValueError, match="ema is a decay"):
        Recipe(ema=1.5)
    with pytest.raises(ValueError, match="positive"):
        Recipe(epochs=0)
    assert Recipe().replace(epochs=3).epochs == 3 and Recipe().epochs != 3


def test_speed_net_shapes_and_cost():
    net = speed_net((16, 32, 128))
    assert net(torch.zeros(4, 1, 28, 28)).shape == (4, 10)
    # one image's training FLOP: well under SimpleCNN's
    per_image = training_flop(Recipe(), 1)
    assert 0 < per_image < training_flop_per_image() / 3
    assert math.isclose(training_flop(Recipe(), 10), 10 * per_image)


def test_the_split_is_fixed_and_disjoint():
    first, second = load_data(train_limit=100), load_data(train_limit=100)
    assert len(first.val[1]) == VAL_SIZE and len(first.test[1]) == 10_000
    assert torch.equal(first.val[0], second.val[0]) and torch.equal(first.train[0], second.train[0])
    # no validation image is also a training image (compared as whole images)
    train_rows = {row.numpy().tobytes() for row in first.train[0].flatten(1)}
    assert not any(row.numpy().tobytes() in train_rows for row in first.val[0][:500].flatten(1))


def test_a_short_run_records_time_curve_and_both_test_scores(small_data):
    recipe = Recipe(epochs=2, batch_size=64)
    result = train_run(recipe, 0, small_data)
    assert result.train_seconds > 0 and len(result.curve) == 2 and not result.diverged
    assert [seconds for seconds, _ in result.curve] == sorted(s for s, _ in result.curve)
    assert 0.1 < result.test_acc <= 1 and 0.1 < result.test_acc_other <= 1
    assert result.flop == training_flop(recipe, 2 * (512 // 64) * 64)
    again = train_run(recipe, 0, small_data)
    assert again.test_acc == result.test_acc  # the seed fixes weights, batches and flips


def test_test_time_flips_change_what_is_scored(small_data):
    torch.manual_seed(0)
    net = speed_net().eval()
    X, y = small_data.test
    plain, flipped = accuracy(net, X, y, Recipe(tta=False)), accuracy(net, X, y, Recipe(tta=True))
    assert plain == accuracy(net, X, y, Recipe(tta=True), tta=False)
    assert plain != flipped  # an untrained network is not mirror-symmetric


def test_ema_and_constant_schedule_run(small_data):
    result = train_run(
        Recipe(epochs=1, batch_size=128, ema=0.9, schedule="constant"), 1, small_data
    )
    assert len(result.curve) == 1 and 0 < result.test_acc <= 1


def _results_file(path, machine_name="machine A"):
    rows = {"final": {"change": "the final recipe", **bench.summarize_runs(
        [RunResult(0, 10.0, 0.93, 0.92, [(5.0, 0.9), (10.0, 0.925)], 0.91, 1e12),
         RunResult(1, 12.0, 0.91, 0.90, [(6.0, 0.9), (12.0, 0.915)], 0.9, 1e12)])}}  # fmt: skip
    payload = {"machine": {"name": machine_name}, "final": bench.asdict(bench.FINAL), "rows": rows}
    path.write_text(json.dumps(payload))


def test_summarize_gives_mean_and_spread(tmp_path):
    _results_file(tmp_path / "r.json")
    row = json.loads((tmp_path / "r.json").read_text())["rows"]["final"]
    assert row["seconds_mean"] == 11.0 and (row["seconds_min"], row["seconds_max"]) == (10.0, 12.0)
    assert math.isclose(row["acc_mean"], 0.92) and row["reaches_target"] == (0.92 >= TARGET)
    assert math.isclose(row["val_mean"], 0.92)


def test_only_refuses_a_file_from_another_machine_and_keeps_it(tmp_path):
    path = tmp_path / "r.json"
    _results_file(path, "another machine")
    before = path.read_text()
    with pytest.raises(SystemExit, match="cannot share a table"):
        bench.run_speedrun(path, ["final"], 1, 1, torch.device("cpu"), quick=True)
    assert path.read_text() == before  # nothing already saved is lost


def test_only_names_the_rows_it_knows(tmp_path):
    with pytest.raises(SystemExit, match="unknown rows"):
        bench.run_speedrun(tmp_path / "r.json", ["fastest"], 1, 1, torch.device("cpu"), quick=True)


def test_table_lists_rows_and_references(tmp_path):
    _results_file(tmp_path / "r.json")
    results = json.loads((tmp_path / "r.json").read_text())
    results["machine"]["torch"] = "x"
    results["rows"]["tutorial"] = {
        "epochs": 6,
        "curve": [[50.0, 0.88]],
        "test_acc": 0.88,
        "seconds_to_target": None,
    }
    table = bench.format_table(results)
    assert "| final |" in table and "not reached in 6 epochs" in table


def test_the_committed_results_reach_the_target():
    results = json.loads(bench.RESULTS.read_text()) if bench.RESULTS.exists() else None
    if results is None:
        pytest.fail(
            f"{bench.RESULTS} is missing: run python -m tools.bench --speedrun --out {bench.RESULTS}"
        )
    final = results["rows"]["final"]
    assert len(final["runs"]) >= 5 and final["acc_mean"] >= TARGET
    assert final["recipe"] == bench.as_json(bench.asdict(bench.FINAL)), (
        "the results were measured on another recipe"
    )
