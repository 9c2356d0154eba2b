"""Collecting sweep and run directories into one long table, its statistics, and the report."""

from __future__ import annotations

import json
import math
import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from scipy import stats

from netsim.analysis import collect, collect_status, summarize
from netsim.analysis.collect import (
    METRIC_TABLES,
    METRIC_TABLES_BY_NAME,
    MetricTable,
    read_results,
    table_samples,
)
from netsim.analysis.report import write_report
from netsim.errors import RunDirectoryError
from netsim.scenario.loader import validate_scenario
from netsim.scenario.runner import run_scenario, with_seed
from netsim.storage import SWEEP_RESULTS as RESULTS_FILE
from netsim.storage import SWEEP_SUMMARY as SUMMARY_FILE

REPO = Path(__file__).resolve().parents[1]
LONG_COLUMNS_AFTER_PARAMETERS = ["table", "metric", "time", "round", "series", "value"]
SORT_KEYS = ["run", "table", "metric", "series", "round", "time"]

WALK_LEARNING = {
    "name": "walk-sgd",
    "nodes": 60,
    "duration": 240,
    "topology": {"kind": "k_out", "k": 10},
    "gossip": {"period": 0.25},
    "walk": {
        "kind": "service",
        "transfer_time": 1.0,
        "timeout": 4.0,
        "kill_probability": 0.0,
        "sample_every": 10,
        "agent": {"kind": "sgd"},
    },
    "churn": {
        "kind": "synthetic",
        "online": {"dist": "exponential", "mean": "5min"},
        "offline": {"dist": "exponential", "mean": "5min"},
    },
    "learning": {
        "dataset": {"name": "spambase"},
        "evaluate_every": 20,
        "algorithm": "dp-sgd-5",
        "noise": "l2_paper",
    },
    "metrics": {"sample_every": 10},
}
DOLA = {
    "name": "dola-sweep",
    "nodes": 16,
    "duration": 200,
    "topology": {"kind": "random_regular", "degree": 4},
    "dola": {
        "data": {"name": "synthetic_ball", "options": {"examples": 4000, "features": 5}},
        "algorithm": "laplace",
        "epsilon": 1.0,
        "max_passes": 2,  # 200 rounds over shards of 187 examples
        "regret_checkpoints": 8,
        "evaluate_every": 20,
    },
}
MI_OGD = {
    "name": "mi-run",
    "seed": 5,
    "nodes": 21,
    "duration": 300,
    "topology": {"kind": "complete"},
    "mi_ogd": {
        "data": {"name": "synthetic_regression", "options": {"examples": 3000}},
        "regret_checkpoints": 6,
    },
}


def with_values(spec: dict, values: dict) -> dict:
    """``spec`` (deep-copied) with each dotted key set to its value."""
    spec = json.loads(json.dumps(spec))
    for key, value in values.items():
        *path, last = key.split(".")
        target = spec
        for part in path:
            target = target[part]
        target[last] = value
    return spec


def make_sweep(directory: Path, name: str, spec: dict, grid: list[dict], repetitions: int) -> Path:
    """Run every grid point ``repetitions`` times into ``directory/runs`` and write the plan and
    sweep.json as ``netsim sweep`` does."""
    rows = []
    for point, values in enumerate(grid):
        for repetition in range(repetitions):
            run = len(rows)
            seed = 1000 + 17 * run
            scenario = validate_scenario(with_values(spec, values), source="test", base_dir=None)
            result = run_scenario(with_seed(scenario, seed), out=directory / "runs")
            rows.append(
                {"run": run, "point": point, "repetition": repetition, "seed": seed,
                 "run_id": result.run_id, **values}
            )  # fmt: skip
    plan = pd.DataFrame(rows).astype({c: "int64" for c in ("run", "point", "repetition", "seed")})
    plan.to_parquet(directory / "plan.parquet", index=False)
    sweep = {
        "name": name,
        "scenario": f"{name}.yaml",
        "parameters": list(grid[0]),
        "repetitions": repetitions,
        "runs": len(rows),
        "complete": len(rows),
        "failed": 0,
        "status": "complete",
    }
    (directory / "sweep.json").write_text(json.dumps(sweep), encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def walk_sweep(tmp_path_factory) -> Path:
    """Walk service with SGD: kill probability 0 / 0.05 (and two constant parameters, a
    string and a bool) × two repetitions."""
    grid = [
        {"walk.kill_probability": kill, "learning.noise": "l2_paper", "topology.undirected": False}
        for kill in (0.0, 0.05)
    ]
    return make_sweep(tmp_path_factory.mktemp("walk"), "walk-grid", WALK_LEARNING, grid, 2)


@pytest.fixture(scope="module")
def dola_sweep(tmp_path_factory) -> Path:
    grid = [{"dola.epsilon": eps} for eps in (1.0, 10.0)]
    return make_sweep(tmp_path_factory.mktemp("dola"), "dola-grid", DOLA, grid, 2)


@pytest.fixture(scope="module")
def mi_run(tmp_path_factory) -> Path:
    scenario = validate_scenario(MI_OGD, source="test", base_dir=None)
    return run_scenario(scenario, out=tmp_path_factory.mktemp("mi")).directory


@pytest.fixture(scope="module")
def quickstart_run(tmp_path_factory) -> Path:
    """The quick-start scenario shrunk to 30 nodes and one minute: only ``samples``."""
    data = yaml.safe_load((REPO / "scenarios" / "quickstart.yaml").read_text(encoding="utf-8"))
    data.update(nodes=30, duration=60, topology={"kind": "k_out", "k": 5})
    scenario = validate_scenario(data, source="quickstart", base_dir=REPO / "scenarios")
    return run_scenario(scenario, out=tmp_path_factory.mktemp("quick")).directory


def read_table(run_dir: Path, table: str) -> pd.DataFrame:
    return pq.read_table(run_dir / f"{table}.parquet").to_pandas()


def expected_metrics(spec: MetricTable, frame: pd.DataFrame) -> list[str]:
    """The metric columns of a run's table, worked out independently of the module."""
    if spec.metrics is not None:
        return list(spec.metrics)
    return [
        c
        for c in frame.columns
        if c not in spec.index_columns
        and (pd.api.types.is_numeric_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c]))
    ]


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", header[16:24])


def image_links(markdown: str) -> list[str]:
    return re.findall(r"!\[[^\]]+\]\(([^)]+)\)", markdown)


# --- the registry --------------------------------------------------------------------------


def test_the_registry_names_columns_the_tables_have():
    from netsim.algorithms.dola import rounds as dola_run
    from netsim.algorithms.mi_ogd import rounds as mi_ogd_run
    from netsim.learning import sgd_agent as sgd
    from netsim.privacy.accountant import RECORDS_TABLE
    from netsim.protocols import walk
    from netsim.scenario.build import SAMPLES_TABLE

    schemas = {
        s.name: s
        for s in (
            SAMPLES_TABLE, walk.SAMPLES_TABLE, walk.SUMMARY_TABLE, sgd.ACCURACY_TABLE,
            sgd.SUMMARY_TABLE, dola_run.ROUNDS_TABLE, dola_run.REGRET_TABLE,
            dola_run.SUMMARY_TABLE, mi_ogd_run.REGRET_TABLE, mi_ogd_run.SUMMARY_TABLE,
            RECORDS_TABLE,
        )
    }  # fmt: skip
    for spec in METRIC_TABLES:
        columns = schemas[spec.file_table].column_names
        assert set(spec.index_columns) <= set(columns), spec.name
        if spec.metrics is not None and spec.prepare is None:
            assert set(spec.metrics) <= set(columns), spec.name
    assert {"oldest_walk", "oldest_steps"} <= set(walk.SAMPLES_TABLE.column_names)
    assert {"epsilon_spent", "delta_spent", "uses", "refused"} <= set(RECORDS_TABLE.column_names)


def test_booleans_become_zero_or_one_and_text_is_skipped():
    frame = pd.DataFrame(
        {"time": [1.0, 2.0], "flag": [True, False], "name": ["a", "b"], "count": [3, 4]}
    )
    samples = table_samples(frame, MetricTable("t", time="time"), 7, Path("t.parquet"))
    assert samples["metric"].tolist() == ["flag", "flag", "count", "count"]
    assert samples["value"].tolist() == [1.0, 0.0, 3.0, 4.0]
    assert samples["time"].tolist() == [1.0, 2.0, 1.0, 2.0]
    assert samples["round"].isna().all() and (samples["series"] == "").all()
    assert (samples["run"] == 7).all()


# --- collect --------------------------------------------------------------------------------


def test_collect_has_one_row_per_run_and_metric_sample(walk_sweep, dola_sweep):
    for sweep in (walk_sweep, dola_sweep):
        long = collect(sweep, write=False)
        plan = pd.read_parquet(sweep / "plan.parquet")
        parameters = json.loads((sweep / "sweep.json").read_text())["parameters"]
        assert list(long.columns) == [
            "run_id", "run", "point", "repetition", "seed", *parameters,
            *LONG_COLUMNS_AFTER_PARAMETERS,
        ]  # fmt: skip
        assert set(long["run_id"]) == set(plan["run_id"])
        tables_seen = set()
        for run_id in plan["run_id"]:
            run_dir = sweep / "runs" / run_id
            manifest = json.loads((run_dir / "manifest.json").read_text())
            rows = long[long["run_id"] == run_id]
            for spec in METRIC_TABLES:
                got = rows[rows["table"] == spec.name]
                if spec.file_table not in manifest["tables"]:
                    assert got.empty
                    continue
                tables_seen.add(spec.name)
                frame = read_table(run_dir, spec.file_table)
                metrics = expected_metrics(spec, frame)
                per_row = 1 if spec.name == "privacy" else len(frame)
                assert len(got) == per_row * len(metrics), (run_id, spec.name)
                assert got.groupby("metric").size().to_dict() == dict.fromkeys(metrics, per_row)
        assert {"samples", "privacy"} <= tables_seen
        # deterministic order, and the same table twice
        resorted = long.sort_values(SORT_KEYS, na_position="last", kind="stable")
        assert resorted.index.tolist() == list(range(len(long)))
        pd.testing.assert_frame_equal(long, collect(sweep, write=False))


def test_collected_values_are_the_tables_values(walk_sweep):
    long = collect(walk_sweep, write=False)
    run_id = pd.read_parquet(walk_sweep / "plan.parquet")["run_id"].iloc[1]
    run_dir = walk_sweep / "runs" / run_id
    rows = long[long["run_id"] == run_id]
    samples = read_table(run_dir, "samples")
    online = rows[(rows["table"] == "samples") & (rows["metric"] == "online")]
    assert online["time"].tolist() == samples["time"].tolist()
    assert online["value"].tolist() == samples["online"].astype(float).tolist()
    assert online["round"].isna().all() and (online["series"] == "").all()
    # accuracy: the walk is the series, the time is kept
    accuracy = read_table(run_dir, "accuracy")
    got = rows[(rows["table"] == "accuracy") & (rows["metric"] == "accuracy")]
    want = sorted(
        zip(accuracy["walk"].astype(str), accuracy["time"], accuracy["accuracy"], strict=True)
    )
    assert sorted(zip(got["series"], got["time"], got["value"], strict=True)) == want
    # no walk propagating: oldest_steps is missing, not -1 steps
    walks = read_table(run_dir, "walk_samples")
    oldest = rows[(rows["table"] == "walk_samples") & (rows["metric"] == "oldest_steps")]
    none = (walks["oldest_walk"] < 0).to_numpy()
    assert oldest["value"].isna().to_numpy().tolist() == none.tolist()
    np.testing.assert_array_equal(oldest["value"].to_numpy()[~none], walks["oldest_steps"][~none])
    # one-row summaries, and the privacy summary derived from privacy_records
    records = read_table(run_dir, "privacy_records")
    privacy = rows[rows["table"] == "privacy"].set_index("metric")["value"]
    assert privacy["epsilon_spent_max"] == records["epsilon_spent"].max()
    assert privacy["epsilon_spent_mean"] == pytest.approx(records["epsilon_spent"].mean())
    assert privacy["delta_spent_max"] == records["delta_spent"].max()
    assert privacy["uses_mean"] == pytest.approx(records["uses"].mean())
    assert privacy["refused_total"] == records["refused"].sum()
    summary = rows[rows["table"] == "walk_summary"]
    assert summary["time"].isna().all() and summary["round"].isna().all()
    walk_summary = read_table(run_dir, "walk_summary").iloc[0]
    for metric, value in zip(summary["metric"], summary["value"], strict=True):
        assert value == float(walk_summary[metric])
    learning = rows[rows["table"] == "learning_summary"]
    assert set(learning["metric"]) == {
        "visits", "updates", "refused", "epsilon", "delta",
        "majority_accuracy", "centralised_accuracy", "central_dp_accuracy",  # the yardsticks
        "test_accuracy", "validation_accuracy",  # the final models (NaN: no validation split)
    }  # fmt: skip
    learning_summary = read_table(run_dir, "learning_summary").iloc[0]
    for metric, value in zip(learning["metric"], learning["value"], strict=True):
        expected = float(learning_summary[metric])
        assert value == expected or (math.isnan(value) and math.isnan(expected)), metric


def test_every_row_carries_its_runs_plan_values(walk_sweep, dola_sweep):
    for sweep in (walk_sweep, dola_sweep):
        long = collect(sweep, write=False)
        plan = pd.read_parquet(sweep / "plan.parquet")
        joined = long.merge(plan, on="run_id", suffixes=("", "_plan"), validate="many_to_one")
        for column in plan.columns.drop("run_id"):
            np.testing.assert_array_equal(joined[column], joined[f"{column}_plan"], column)
    long = collect(walk_sweep, write=False)
    assert long["walk.kill_probability"].dtype == np.float64
    assert long["topology.undirected"].dtype == bool and not long["topology.undirected"].any()
    assert (long["learning.noise"] == "l2_paper").all()
    assert sorted(long["repetition"].unique()) == [0, 1]
    for run_id, rows in long.groupby("run_id"):
        manifest = json.loads((walk_sweep / "runs" / run_id / "manifest.json").read_text())
        assert (rows["seed"] == manifest["seed"]).all()


def test_failed_and_missing_runs_are_left_out_and_reported(walk_sweep, tmp_path):
    sweep = tmp_path / "sweep"
    shutil.copytree(walk_sweep, sweep)
    plan = pd.read_parquet(sweep / "plan.parquet")
    failed, missing = plan.iloc[3], plan.iloc[1]
    shutil.rmtree(sweep / "runs" / failed["run_id"])
    shutil.rmtree(sweep / "runs" / missing["run_id"])
    (sweep / "failures").mkdir()
    record = {
        "run_id": failed["run_id"], "run": 3, "point": 1, "repetition": 1,
        "error": "SimulationError: the walk | got lost\nsecond line", "traceback": "Traceback…",
    }  # fmt: skip
    (sweep / "failures" / f"{failed['run_id']}.json").write_text(json.dumps(record))
    # a run being written: a hidden staging directory with a partial run
    staging = sweep / "runs" / f".{missing['run_id']}.partial-4242"
    shutil.copytree(walk_sweep / "runs" / missing["run_id"], staging)
    (staging / "manifest.json").unlink()

    status = collect_status(sweep)
    assert list(status.columns) == ["run", "point", "repetition", "run_id", "status", "error"]
    assert status["run"].tolist() == [0, 1, 2, 3]
    assert status["status"].tolist() == ["complete", "missing", "complete", "failed"]
    assert status["error"].tolist()[:3] == ["", "", ""]
    assert status["error"].iloc[3] == record["error"]
    long = collect(sweep)
    assert set(long["run_id"]) == {plan["run_id"].iloc[0], plan["run_id"].iloc[2]}
    assert (sweep / RESULTS_FILE).is_file()

    markdown = write_report(sweep).read_text(encoding="utf-8")
    assert "| 0 | 0 | l2_paper | False | 1/2 |" in markdown
    assert "| 1 | 0.05 | l2_paper | False | 1/2 |" in markdown
    failure_line = next(line for line in markdown.splitlines() if line.startswith("- run 3"))
    assert failed["run_id"] in failure_line and "the walk | got lost second line" in failure_line
    assert "1 run(s) missing" in markdown and "run 1." in markdown
    assert "2 of 4 planned runs complete, 1 failed, 1 missing" in markdown


@pytest.mark.parametrize(
    ("manifest", "why"),
    [
        (lambda text: text[:100], r"manifest.json cannot be read as JSON"),
        (lambda text: "[" * 5000 + "]" * 5000, r"manifest.json .*(deep|nest)"),
        (lambda text: json.dumps({"status": "written"}), r"no manifest.json with status"),
    ],
)
def test_a_run_whose_manifest_is_unreadable_is_named_not_left_out(
    walk_sweep, tmp_path, manifest, why
):
    """A run directory is renamed into place complete, so one whose manifest is truncated,
    nested past the reader's limit or no longer complete was damaged since: collect and
    report stop naming it (exit 2 from the command line) instead of writing a table without
    it."""
    sweep = tmp_path / "sweep"
    shutil.copytree(walk_sweep, sweep)
    run_id = pd.read_parquet(sweep / "plan.parquet")["run_id"].iloc[2]
    file = sweep / "runs" / run_id / "manifest.json"
    file.write_text(manifest(file.read_text(encoding="utf-8")), encoding="utf-8")
    status = collect_status(sweep)
    assert status["status"].tolist() == ["complete", "complete", "damaged", "complete"]
    assert re.search(why, status["error"].iloc[2])
    with pytest.raises(RunDirectoryError, match=rf"1 of 4 runs are damaged[\s\S]*{run_id}"):
        collect(sweep)
    assert not (sweep / RESULTS_FILE).is_file() or (
        (sweep / RESULTS_FILE).stat().st_mtime <= file.stat().st_mtime
    )
    with pytest.raises(RunDirectoryError, match=run_id):
        write_report(sweep)


@pytest.mark.parametrize(
    ("manifest", "why"),
    [
        (lambda text: '{"status": "complete"}', r"the manifest lists no tables"),
        (lambda text: text[:100], r"manifest.json cannot be read as JSON"),
        (lambda text: "[" * 5000 + "]" * 5000, r"manifest.json .*(deep|nest)"),
    ],
)
def test_a_folder_of_runs_with_a_damaged_manifest_is_refused_naming_the_run(
    walk_sweep, tmp_path, manifest, why
):
    """In a folder of runs (not a sweep's), a manifest of only ``{"status": "complete"}``
    ended collect and report in ``KeyError: 'run_id'``, and a truncated or too deeply nested
    one left its run out of the table with exit 0; each run is named as damaged."""
    folder = tmp_path / "runs"
    shutil.copytree(walk_sweep / "runs", folder)
    run_id = pd.read_parquet(walk_sweep / "plan.parquet")["run_id"].iloc[1]
    file = folder / run_id / "manifest.json"
    file.write_text(manifest(file.read_text(encoding="utf-8")), encoding="utf-8")
    pattern = rf"1 of 4 runs are damaged[\s\S]*run {run_id} .*{why}"
    with pytest.raises(RunDirectoryError, match=pattern):
        collect(folder)
    with pytest.raises(RunDirectoryError, match=pattern):
        write_report(folder)


def test_a_sweep_without_complete_runs_collects_an_empty_table(walk_sweep, tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    for name in ("plan.parquet", "sweep.json"):
        shutil.copy(walk_sweep / name, sweep / name)
    long = collect(sweep)
    assert long.empty and list(long.columns) == list(collect(walk_sweep, write=False).columns)
    assert summarize(long).empty
    assert (collect_status(sweep)["status"] == "missing").all()
    markdown = check_report(write_report(sweep), set())
    assert "| 1 | 0.05 | l2_paper | False | 0/2 |" in markdown and "4 run(s) missing" in markdown


def test_a_complete_run_wins_over_an_old_failure_record(walk_sweep, tmp_path):
    sweep = tmp_path / "sweep"
    shutil.copytree(walk_sweep, sweep)
    run_id = pd.read_parquet(sweep / "plan.parquet")["run_id"].iloc[0]
    (sweep / "failures").mkdir()
    (sweep / "failures" / f"{run_id}.json").write_text(json.dumps({"error": "old"}))
    assert collect_status(sweep)["status"].tolist() == ["complete"] * 4


def test_results_parquet_round_trips(dola_sweep, tmp_path):
    sweep = tmp_path / "sweep"
    shutil.copytree(dola_sweep, sweep)
    long = collect(sweep)
    pd.testing.assert_frame_equal(pq.read_table(sweep / RESULTS_FILE).to_pandas(), long)
    pd.testing.assert_frame_equal(read_results(sweep), long)
    summary = pq.read_table(sweep / SUMMARY_FILE).to_pandas()
    pd.testing.assert_frame_equal(summary, summarize(long))
    assert not list(sweep.glob(".*.tmp"))  # atomic writes leave no temporary files
    with pytest.raises(RunDirectoryError, match="no collected results"):
        read_results(dola_sweep)
    regret = summary[(summary["table"] == "dola_regret") & (summary["metric"] == "regret")]
    assert (regret["n"] == 2).all() and regret["round"].notna().all()
    assert regret.groupby("point").size().tolist() == [8, 8]  # 8 checkpoints per point


def test_a_plain_run_directory_is_a_sweep_of_one_run(mi_run):
    long = collect(mi_run)
    manifest = json.loads((mi_run / "manifest.json").read_text())
    assert list(long.columns) == [
        "run_id", "run", "point", "repetition", "seed", *LONG_COLUMNS_AFTER_PARAMETERS
    ]  # fmt: skip
    assert (long["run_id"] == manifest["run_id"]).all() and (long["seed"] == 5).all()
    assert (long[["run", "point", "repetition"]] == 0).all().all()
    assert set(long["table"]) == {"samples", "mi_ogd_regret", "mi_ogd_summary", "privacy"}
    regret = read_table(mi_run, "mi_ogd_regret")
    got = long[(long["table"] == "mi_ogd_regret") & (long["metric"] == "regret")]
    assert got["round"].tolist() == regret["round"].astype(float).tolist()
    assert got["value"].tolist() == regret["regret"].tolist() and got["time"].isna().all()
    status = collect_status(mi_run)
    assert status.to_dict("records") == [
        {"run": 0, "point": 0, "repetition": 0, "run_id": manifest["run_id"],
         "status": "complete", "error": ""}
    ]  # fmt: skip
    summary = summarize(long)
    assert set(summary["n"]) == {0, 1} and summary["std"].isna().all()  # 0: smoothing is NaN
    once = summary[summary["n"] == 1]
    assert (once["ci_low"] == once["mean"]).all() and (once["ci_high"] == once["mean"]).all()


def test_a_path_that_is_not_a_sweep_or_run_names_itself(tmp_path, mi_run):
    empty = tmp_path / "empty"
    empty.mkdir()
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    only_plan = tmp_path / "only-plan"
    only_plan.mkdir()
    pd.DataFrame({"run": [0]}).to_parquet(only_plan / "plan.parquet")
    only_sweep = tmp_path / "only-sweep"
    only_sweep.mkdir()
    (only_sweep / "sweep.json").write_text("{}")
    unfinished = tmp_path / "unfinished"
    shutil.copytree(mi_run, unfinished)
    manifest = json.loads((unfinished / "manifest.json").read_text())
    (unfinished / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))
    for path, why in (
        (tmp_path / "absent", "does not exist"),
        (empty, "has no sweep.json"),
        (a_file, "is a file"),
        (only_plan, "sweep.json is missing"),
        (only_sweep, "plan.parquet is missing"),
        (unfinished, "not a complete run directory (no manifest.json with status 'complete')"),
    ):
        for call in (collect, collect_status, write_report):
            with pytest.raises(RunDirectoryError) as error:
                call(path)
            message = str(error.value)
            assert message.startswith(f"{path}: {why}"), message
            assert "expected a sweep directory" in message and "complete run directory" in message
    assert not (empty / "report").exists()


# --- summarize ------------------------------------------------------------------------------


def test_summarize_gives_mean_std_and_a_student_t_interval():
    nan = math.nan
    rows = [  # point, eps, table, metric, series, round, time, value
        (0, 1.0, "t", "m", "", nan, 10.0, 1.0),
        (0, 1.0, "t", "m", "", nan, 10.0, 2.0),
        (0, 1.0, "t", "m", "", nan, 10.0, 4.0),
        (0, 1.0, "t", "m", "", nan, 20.0, 5.0),  # n = 1
        (0, 1.0, "t", "m", "", nan, 20.0, nan),  # a missing value does not count
        (1, 2.0, "s", "x", "", nan, nan, 3.0),  # NaN keys group
        (1, 2.0, "s", "x", "", nan, nan, 3.0),
        (1, 2.0, "r", "y", "w1", 4.0, nan, math.inf),  # equal infinities: no spread
        (1, 2.0, "r", "y", "w1", 4.0, nan, math.inf),
        (1, 2.0, "r", "y", "w2", 4.0, nan, nan),  # nothing but NaN: n = 0
    ]
    long = pd.DataFrame(
        rows, columns=["point", "eps", "table", "metric", "series", "round", "time", "value"]
    )
    long.insert(0, "run", range(len(long)))
    summary = summarize(long, confidence=0.9)
    assert list(summary.columns) == [
        "point", "eps", "table", "metric", "series", "round", "time",
        "n", "mean", "std", "ci_low", "ci_high",
    ]  # fmt: skip
    assert len(summary) == 5
    row = summary[(summary["table"] == "t") & (summary["time"] == 10.0)].iloc[0]
    values = np.array([1.0, 2.0, 4.0])
    sd = values.std(ddof=1)
    half = stats.t.ppf(0.95, 2) * sd / math.sqrt(3)
    assert row["n"] == 3 and row["mean"] == pytest.approx(7 / 3)
    assert row["std"] == pytest.approx(sd)
    assert row["ci_low"] == pytest.approx(7 / 3 - half)
    assert row["ci_high"] == pytest.approx(7 / 3 + half)
    single = summary[(summary["table"] == "t") & (summary["time"] == 20.0)].iloc[0]
    assert single["n"] == 1 and math.isnan(single["std"])
    assert single["ci_low"] == single["mean"] == single["ci_high"] == 5.0
    grouped_nan = summary[summary["table"] == "s"].iloc[0]
    assert grouped_nan["n"] == 2 and grouped_nan["std"] == 0.0
    assert grouped_nan["ci_low"] == grouped_nan["ci_high"] == 3.0
    assert math.isnan(grouped_nan["time"]) and math.isnan(grouped_nan["round"])
    infinite = summary[summary["series"] == "w1"].iloc[0]
    assert infinite["n"] == 2 and infinite["std"] == 0.0 and infinite["ci_low"] == math.inf
    empty = summary[summary["series"] == "w2"].iloc[0]
    assert empty["n"] == 0 and math.isnan(empty["mean"]) and math.isnan(empty["ci_low"])
    default = summarize(long).iloc[0]
    assert default["ci_high"] - default["mean"] == pytest.approx(
        stats.t.ppf(0.975, 2) * sd / math.sqrt(3)
    )
    with pytest.raises(ValueError, match="confidence"):
        summarize(long, confidence=1.0)


def test_summarize_pools_the_repetitions_of_a_point(dola_sweep):
    long = collect(dola_sweep, write=False)
    summary = summarize(long)
    key = (long["table"] == "dola_summary") & (long["metric"] == "accuracy_averaged")
    for point, rows in long[key].groupby("point"):
        got = summary[
            (summary["point"] == point)
            & (summary["table"] == "dola_summary")
            & (summary["metric"] == "accuracy_averaged")
        ].iloc[0]
        assert got["n"] == 2 and got["mean"] == pytest.approx(rows["value"].mean())
        assert got["dola.epsilon"] == rows["dola.epsilon"].iloc[0]
        assert got["std"] == pytest.approx(rows["value"].std(ddof=1))


# --- the report -----------------------------------------------------------------------------


def check_report(report: Path, figures: set[str]) -> str:
    """The report's image links are exactly ``figures``, each a non-empty PNG next to it."""
    markdown = report.read_text(encoding="utf-8")
    links = image_links(markdown)
    assert set(links) == figures and len(links) == len(figures)
    for link in links:
        png = report.parent / link
        width, height = png_size(png)
        assert width > 300 and height > 200 and png.stat().st_size > 5000
    assert {p.name for p in report.parent.glob("*.png")} == figures
    assert not list(report.parent.glob(".*.tmp"))
    return markdown


def test_report_of_a_walk_sweep(walk_sweep, tmp_path):
    report = write_report(walk_sweep, tmp_path / "walk-report")
    assert report == tmp_path / "walk-report" / "report.md"
    markdown = check_report(
        report, {"walk_counts.png", "accuracy_vs_time.png", "online_nodes.png",
                 "privacy_spent.png"},
    )  # fmt: skip
    assert markdown.startswith("# Report: walk-grid\n")
    header = "| point | walk.kill_probability | learning.noise | topology.undirected |"
    assert header in markdown
    assert "| 0 | 0 | l2_paper | False | 2/2 |" in markdown
    assert "| 1 | 0.05 | l2_paper | False | 2/2 |" in markdown
    assert "No run failed." in markdown
    # the summary metrics: mean ± half-width per point, from the one-row tables
    long = collect(walk_sweep, write=False)
    summary = summarize(long)
    spread = summary[summary["table"].isin(["walk_summary", "learning_summary", "privacy"])]
    spread = spread[spread["ci_high"] > spread["ci_low"]]
    assert len(spread) >= 3
    for row in spread.itertuples(index=False):
        line = next(
            x for x in markdown.splitlines() if x.startswith(f"| {row.table}.{row.metric} |")
        )
        cells = [c.strip() for c in line.strip("|").split("|")]
        half = (row.ci_high - row.ci_low) / 2
        assert cells[1 + row.point] == f"{row.mean:.4g} ± {half:.2g}"
    constant = summary[(summary["metric"] == "epsilon") & (summary["table"] == "learning_summary")]
    assert (constant["ci_low"] == constant["ci_high"]).all()
    assert "| learning_summary.epsilon | 1 | 1 |" in markdown  # no ± 0
    for table in ("walk_summary", "learning_summary", "privacy"):
        assert f"| {table}." in markdown
    assert "dola_summary." not in markdown and "samples.online" not in markdown
    # every figure has a sentence after it
    for link in image_links(markdown):
        after = markdown.split(f"({link})", 1)[1].strip().splitlines()[0]
        assert after.endswith(".") and len(after) > 30


def test_report_draws_only_the_figures_of_the_tables_present(dola_sweep, quickstart_run, tmp_path):
    out = tmp_path / "report"
    markdown = check_report(
        write_report(dola_sweep, out),
        {"dola_accuracy_vs_round.png", "dola_regret_vs_round.png", "online_nodes.png",
         "privacy_spent.png", "table_dola_mixing.png"},
    )  # fmt: skip
    # two repetitions: the figures draw the runs, not a 12.7-standard-error band
    assert "With fewer than three repetitions the figures draw every run" in markdown
    # the same directory for another source: the old figures go
    markdown = check_report(write_report(quickstart_run, out), {"online_nodes.png"})
    # one run: its id and seed, no grid, repetitions or failed runs to speak of
    run_id = json.loads((quickstart_run / "manifest.json").read_text())["run_id"]
    assert f"Run `{run_id}` in `{quickstart_run}`, seed " in markdown
    for sweep_text in ("## Grid", "## Failed runs", "repetitions", "confidence"):
        assert sweep_text not in markdown
    assert "No summary tables" in markdown


def test_report_of_a_plain_run_goes_into_the_run_directory(mi_run):
    report = write_report(mi_run)
    assert report == mi_run / "report" / "report.md"
    # MI-private releases spend no ε: no figure of zeros, a sentence instead
    markdown = check_report(report, {"mi_ogd_regret_vs_round.png", "online_nodes.png"})
    assert "no record spent any ε" in markdown
    assert "| mi_ogd_summary.regret |" in markdown and "| metric | value |" in markdown
    # the regret figure draws the theorem's bound beside the regret (dashed)
    from netsim.algorithms.mi_ogd.rounds import REGRET_FIGURE
    from netsim.analysis.report import curve_statistics

    curve = REGRET_FIGURE.panels[0]
    statistics = curve_statistics(collect(mi_run, write=False), curve)
    regret = read_table(mi_run, "mi_ogd_regret")
    assert curve.reference == "bound" and statistics.reference is not None
    assert statistics.reference["mean"].tolist() == regret["bound"].tolist()
    # counts as integers: rounds scheduled, played and applied
    summary = read_table(mi_run, "mi_ogd_summary").iloc[0]
    assert f"| mi_ogd_summary.played | {int(summary['played']):,} |" in markdown


def test_metric_tables_are_registered_by_name():
    assert set(METRIC_TABLES_BY_NAME) == {
        "samples", "walk_samples", "accuracy", "dola_rounds", "dola_regret", "mi_ogd_regret",
        "walk_summary", "learning_summary", "dola_summary", "mi_ogd_summary", "privacy",
    }  # fmt: skip
    assert all(METRIC_TABLES_BY_NAME[n].one_row for n in ("walk_summary", "privacy"))
    assert not METRIC_TABLES_BY_NAME["accuracy"].one_row


# --- runs that carry their parameters -----------------------------------------------------------

QUICK = ["--set", "duration=2min", "--set", "topology.k=5"]


def cli_run(out: Path, *arguments: str) -> Path:
    """``netsim run`` of the quick-start scenario, shrunk, into ``out``; its run directory."""
    from netsim.cli import main

    status = main(["run", str(REPO / "scenarios" / "quickstart.yaml"), "--out", str(out), "-q",
                   *QUICK, *arguments])  # fmt: skip
    assert status == 0
    return out / sorted(p.name for p in out.iterdir() if not p.name.startswith("."))[-1]


@pytest.fixture(scope="module")
def folder_of_runs(tmp_path_factory) -> dict[str, Path]:
    """Four runs made with --set: 30 nodes with seeds 1 and 2 (one configuration), 40 nodes,
    and 30 nodes with a 2 s gossip period under a readable name."""
    runs = {}
    for label, arguments in (
        ("n30-s1", ["--set", "nodes=30", "--set", "seed=1"]),
        ("n30-s2", ["--set", "nodes=30", "--seed", "2"]),
        ("n40", ["--set", "nodes=40"]),
        ("named", ["--set", "nodes=30", "--set", "gossip.period=2s", "--name", "fast-gossip"]),
    ):
        out = tmp_path_factory.mktemp(label)
        runs[label] = cli_run(out, *arguments)
    folder = tmp_path_factory.mktemp("folder")
    for run_dir in runs.values():
        shutil.copytree(run_dir, folder / run_dir.name)
    runs["folder"] = folder
    return runs


def test_a_run_records_its_overrides_resolved_and_load_run_puts_them_on_every_row(
    folder_of_runs,
):
    from netsim.analysis import load_run

    named = folder_of_runs["named"]
    assert named.name == "fast-gossip"
    manifest = json.loads((named / "manifest.json").read_text())
    # resolved: durations in seconds; the seed is a column of its own, not a parameter
    assert manifest["parameters"] == {
        "duration": 120.0, "gossip.period": 2.0, "nodes": 30, "topology.k": 5
    }  # fmt: skip
    assert json.loads((folder_of_runs["n30-s1"] / "manifest.json").read_text())["parameters"] == {
        "duration": 120.0,
        "nodes": 30,
        "topology.k": 5,
    }
    samples = load_run(named)["samples"]
    assert list(samples.columns[:5]) == ["run_id", "duration", "gossip.period", "nodes",
                                         "topology.k"]  # fmt: skip
    assert (samples["run_id"] == "fast-gossip").all() and (samples["gossip.period"] == 2.0).all()
    assert len(samples) == 3  # samples at 0, 1 and 2 minutes
    assert list(load_run(named, parameters=False)["samples"].columns[:2]) == ["run_id", "time"]


def test_collect_reads_a_folder_or_a_list_of_runs_grouped_by_configuration(folder_of_runs):
    folder = folder_of_runs["folder"]
    long = collect(folder)
    assert (folder / RESULTS_FILE).is_file() and (folder / SUMMARY_FILE).is_file()
    plan = long.drop_duplicates("run_id").set_index("run_id")
    ids = {label: folder_of_runs[label].name for label in ("n30-s1", "n30-s2", "n40", "named")}
    # runs in directory-name order; a run not given a key has its scenario's value there
    first = plan.loc[ids["n30-s1"], ["repetition", "seed", "nodes", "gossip.period"]]
    assert first.tolist() == [0, 1, 30, 5.0]
    assert plan.loc[ids["n30-s2"], "point"] == plan.loc[ids["n30-s1"], "point"]
    assert plan.loc[ids["n30-s2"], ["repetition", "seed"]].tolist() == [1, 2]
    assert plan.loc[ids["n40"], "nodes"] == 40 and plan.loc[ids["named"], "gossip.period"] == 2.0
    assert plan["point"].nunique() == 3
    summary = summarize(long)
    online = summary[(summary["table"] == "samples") & (summary["metric"] == "online")]
    assert sorted(online.groupby("point")["n"].max()) == [1, 1, 2]
    # the same table from a list of run directories; a list has nowhere to write to
    listed = collect([folder / name for name in sorted(ids.values())])
    pd.testing.assert_frame_equal(listed, long)
    with pytest.raises(RunDirectoryError, match="no directory to write"):
        collect([folder / ids["n40"]], write=True)
    with pytest.raises(RunDirectoryError, match="give each run once"):
        collect([folder / ids["n40"], folder / ids["n40"]])
    report = write_report(folder)
    text = report.read_text()
    assert text.startswith("# Report: ") and f"Run directories in `{folder}`" in text
    assert (report.parent / "online_nodes.png").is_file()
    assert (report.parent / "broadcast_times.png").is_file()  # one update, at 1 min


def test_broadcasts_with_other_thresholds_get_the_table_figure(tmp_path):
    run_dir = cli_run(tmp_path / "runs", "--set", "nodes=30", "--set",
                      "broadcast.thresholds=[0.5, 0.75]")  # fmt: skip
    markdown = check_report(write_report(run_dir), {"online_nodes.png", "table_broadcasts.png"})
    assert "Table broadcasts" in markdown


def test_a_named_run_never_replaces_another_run(folder_of_runs, tmp_path, capsys):
    from netsim.cli import main

    out = tmp_path / "runs"
    shutil.copytree(folder_of_runs["named"], out / "fast-gossip")
    quickstart = str(REPO / "scenarios" / "quickstart.yaml")
    # the same scenario and seed: replaced by its identical rerun
    same = ["--set", "nodes=30", "--set", "gossip.period=2s"]
    assert main(["run", quickstart, "--out", str(out), "-q", *QUICK, *same,
                 "--name", "fast-gossip"]) == 0  # fmt: skip
    other = ["--set", "nodes=31", "--name", "fast-gossip"]
    assert main(["run", quickstart, "--out", str(out), "-q", *QUICK, *other]) == 2
    assert "holds another run (scenario 'quickstart', seed 1)" in capsys.readouterr().err
    (out / "not-a-run").mkdir()
    assert main(["run", quickstart, "--out", str(out), "-q", *QUICK, "--name", "not-a-run"]) == 2
    assert "is not a complete run directory" in capsys.readouterr().err
    for bad in (".hidden", "a/b", "", "x" * 201):
        assert main(["run", quickstart, "--out", str(out), "-q", "--name", bad]) == 2
        assert "a run name is 1 to 200 letters" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["fast-gossip", "not-a-run"]


# --- netsim collect: the same table from the command line -----------------------------------


def test_netsim_collect_writes_the_tidy_table_to_parquet_or_csv(dola_sweep, tmp_path, capsys):
    from netsim.cli import main

    expected = collect(dola_sweep, write=False)
    assert main(["collect", str(dola_sweep), "--out", str(tmp_path / "long.parquet")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "long.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "long.parquet"), expected)
    assert main(["collect", str(dola_sweep), "--out", str(tmp_path / "long.csv")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "long.csv")
    frame = pd.read_csv(tmp_path / "long.csv", keep_default_na=False, na_values=[""])
    assert list(frame.columns) == list(expected.columns) and len(frame) == len(expected)
    np.testing.assert_allclose(frame["value"], expected["value"], rtol=1e-12)
    assert not list(tmp_path.glob(".*tmp"))  # written atomically: no temporary file left
    # without --out: DIRECTORY/results.parquet and summary.parquet, as collect() writes them
    copy = tmp_path / "sweep"
    shutil.copytree(dola_sweep, copy)
    (copy / RESULTS_FILE).unlink(missing_ok=True)
    assert main(["collect", str(copy)]) == 0
    assert capsys.readouterr().out.strip() == str(copy / RESULTS_FILE)
    pd.testing.assert_frame_equal(pd.read_parquet(copy / RESULTS_FILE), expected)
    assert (copy / SUMMARY_FILE).is_file()


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("long.txt", "write the table to a .parquet or a .csv file"),
        ("nowhere/long.csv", "does not exist"),
        ("", "is a directory; give a file name"),
    ],
)
def test_netsim_collect_refuses_a_bad_out_with_one_message(dola_sweep, tmp_path, capsys,
                                                           target, expected):  # fmt: skip
    from netsim.cli import main

    out = tmp_path / target if target else tmp_path
    assert main(["collect", str(dola_sweep), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("netsim: error: --out") and expected in err and "Traceback" not in err


def test_netsim_collect_of_a_path_that_is_no_run_is_one_message(tmp_path, capsys):
    from netsim.cli import main

    assert main(["collect", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and err.count("\n") == 1


NETWORK_WALK = {
    "name": "walk-pairs",
    "nodes": 30,
    "duration": "300s",
    "topology": {"kind": "random_regular", "degree": 3},
    "walk": {"kind": "ideal", "sampling": "neighbour", "step_time": "1s",
             "agent": {"kind": "sgd"}},
    "learning": {
        "dataset": {"name": "spambase"}, "model": "logreg", "clip": 1.0,
        "algorithm": "dp-sgd", "noise": {"kind": "gaussian", "noise_multiplier": 1.5},
        "accounting": "rdp", "epsilon": 8.0, "delta": 1e-5, "evaluate_every": 100,
    },
    "privacy": {"model": "network"},
}  # fmt: skip


def test_report_draws_privacy_per_observer_against_distance(tmp_path):
    """A sweep stating privacy per observer gets the distance figure: per run and hop count
    the mean ε of its single observers' pairs, and the run's local ε, pooled over the
    repetitions of a point like every other sample."""
    from netsim.analysis.collect import load_sweep, pair_distance_samples, run_status

    sweep = make_sweep(
        tmp_path / "sweep", "walk-pairs", NETWORK_WALK,
        [{"learning.epsilon": 4.0}, {"learning.epsilon": 8.0}], 2,
    )  # fmt: skip
    source = load_sweep(sweep)
    samples = pair_distance_samples(source, run_status(source))
    for run_id, run in zip(source.plan["run_id"], source.plan["run"], strict=True):
        pairs = pd.read_parquet(sweep / "runs" / run_id / "privacy_pairs.parquet")
        local = pd.read_parquet(sweep / "runs" / run_id / "privacy_summary.parquet")
        mine = samples[(samples["run"] == run) & (samples["metric"] == "epsilon")]
        expected = pairs[pairs["distance"] >= 0].groupby("distance")["epsilon"].mean()
        np.testing.assert_array_equal(mine["round"], expected.index.to_numpy(float))
        np.testing.assert_allclose(mine["value"], expected.to_numpy())
        assert len(mine) >= 3  # a 3-regular graph of 30 nodes: at least 3 hops across
        own = samples[(samples["run"] == run) & (samples["metric"] == "local_epsilon")]
        assert own["value"].tolist() == [local["local_epsilon"].iloc[0]]
    markdown = check_report(
        write_report(sweep, tmp_path / "report"),
        {"walk_counts.png", "accuracy_vs_time.png", "online_nodes.png", "privacy_spent.png",
         "privacy_by_distance.png"},
    )  # fmt: skip
    assert "### Privacy per observer against distance" in markdown


def test_the_report_has_a_bound_audit_section_with_the_runs_shares(tmp_path):
    """A small Muffliato run: the section's counts are the bound_audit table's."""
    data = yaml.safe_load(
        (REPO / "scenarios" / "muffliato" / "averaging.yaml").read_text(encoding="utf-8")
    )
    data.update(nodes=40)
    data["muffliato"]["rounds"] = 4
    scenario = validate_scenario(data, source="muffliato", base_dir=REPO / "scenarios")
    run = run_scenario(scenario, out=tmp_path).directory
    audit = read_table(run, "bound_audit")
    below = int(audit["below"].sum())
    assert 0 < below < len(audit)
    markdown = write_report(run).read_text(encoding="utf-8")
    row = f"| muffliato_message_sum | {len(audit):,} | {below:,} | {100 * below / len(audit):.1f} %"
    assert "## Bound audit" in markdown and row in markdown
