"""Sweeps: the spec, seeds, resume after an interrupt, failures, the process pool and Dask."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import SUBPROCESS_HANG_LIMIT

from netsim.analysis import collect, collect_status
from netsim.cli import main
from netsim.errors import SweepError
from netsim.progress import PROGRESS_DIR
from netsim.scenario.loader import scenario_hash
from netsim.scenario.runner import run_id_for
from netsim.signals import clear_stop
from netsim.storage import SWEEP_PLAN as PLAN
from netsim.storage import SWEEP_RUNS as RUNS
from netsim.storage import is_complete_run
from netsim.sweep import ProcessPool, plan_sweep, run_sweep
from netsim.sweep.execute import (
    PickledTask,
    RunOutcome,
    RunTask,
    execute_pickled,
    is_done,
)
from tests.test_bad_input import cli_error, write

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "traces" / "stunner-synthetic.csv"

BASE = f"""\
name: tiny-walk
seed: 7
nodes: 40
duration: 2min
topology: {{kind: k_out, k: 5}}
links:
  delay: {{dist: uniform, low: 10ms, high: 50ms}}
churn: {{kind: trace, path: {TRACE}}}
gossip: {{period: 1s}}
walk:
  kind: service
  transfer_time: 1s
  timeout: 11s
  kill_probability: 0.0
  sample_every: 10s
metrics: {{sample_every: 10s}}
"""

GRID = """\
sweep:
  grid:
    walk.transfer_time: [1s, 2s]
    walk.timeout: ["= walk.transfer_time + 10 * gossip.period", "= walk.transfer_time + 30s"]
    walk.kill_probability: [0, 0.05]
  repetitions: 2
"""


def sweep_file(tmp_path: Path, sweep: str = GRID, base: str = BASE) -> Path:
    return write(tmp_path / "sweep.yaml", base + sweep)


# --- the spec and the plan ---------------------------------------------------------------


def test_the_plan_is_the_grid_product_with_derived_values_in_seconds(tmp_path):
    plan = plan_sweep(sweep_file(tmp_path))
    assert plan.spec.points == 8 and len(plan.runs) == 16
    assert [(r.point, r.repetition) for r in plan.runs[:4]] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    timeouts = {
        (r.parameters["walk.transfer_time"], r.parameters["walk.timeout"]) for r in plan.runs
    }
    assert timeouts == {(1.0, 11.0), (1.0, 31.0), (2.0, 12.0), (2.0, 32.0)}
    for run in plan.runs:  # the scenario that runs is the one the plan reports
        assert run.scenario.walk.timeout == run.parameters["walk.timeout"]
        assert run.scenario.walk.kill_probability == run.parameters["walk.kill_probability"]
        assert run.scenario.seed == run.seed


def test_seeds_are_distinct_across_points_and_repetitions_and_stable_across_plans(tmp_path):
    first = plan_sweep(sweep_file(tmp_path))
    again = plan_sweep(sweep_file(tmp_path))
    seeds = [r.seed for r in first.runs]
    assert len(set(seeds)) == len(seeds)
    assert seeds == [r.seed for r in again.runs]
    assert all(0 <= s < 2**63 for s in seeds)
    # a point keeps its seeds when the grid grows: its finished runs stay valid
    grown = plan_sweep(
        sweep_file(tmp_path, GRID.replace("[0, 0.05]", "[0, 0.05, 0.1]").replace("2\n", "3\n"))
    )
    by_point = {(tuple(r.parameters.values()), r.repetition): r.seed for r in grown.runs}
    for run in first.runs:
        assert by_point[(tuple(run.parameters.values()), run.repetition)] == run.seed
    # a different base seed gives different seeds
    other = plan_sweep(sweep_file(tmp_path, base=BASE.replace("seed: 7", "seed: 8")))
    assert not set(seeds) & {r.seed for r in other.runs}


def test_ranges_and_derived_keys(tmp_path):
    sweep = """\
sweep:
  grid:
    nodes: {from: 20, to: 40, step: 10}
    walk.kill_probability: {from: 0.01, to: 0.1, count: 2, scale: log}
  derived:
    metrics.sample_every: "= walk.transfer_time * 5"
"""
    plan = plan_sweep(sweep_file(tmp_path, sweep))
    values = [(r.parameters["nodes"], r.parameters["walk.kill_probability"]) for r in plan.runs]
    assert values == [(n, p) for n in (20, 30, 40) for p in (0.01, pytest.approx(0.1))]
    assert {r.parameters["metrics.sample_every"] for r in plan.runs} == {5.0}
    assert plan.spec.repetitions == 1 and plan.spec.name == "tiny-walk"


@pytest.mark.parametrize(
    ("sweep", "expected"),
    [
        (
            "sweep:\n  grid: {walk.nonsense: [1, 2]}\n",
            "sweep.grid: walk.nonsense is not a key of the scenario (keys of walk: kind,",
        ),
        (
            "sweep:\n  grid: {dola.epsilon: [1, 2]}\n",
            "dola.epsilon is not a key of the scenario (the scenario has no dola section)",
        ),
        ("sweep:\n  grid: {}\n", "sweep.grid: the grid is empty"),
        ("sweep:\n  repetitions: 2\n", "sweep.grid: the grid is empty"),
        ("sweep:\n  grid: {nodes: []}\n", "sweep.grid.nodes: no values; give at least one"),
        (
            "sweep:\n  grid: {nodes: [10]}\n  repetitions: 0\n",
            "sweep.repetitions: 0; repetitions is an integer >= 1",
        ),
        (
            "sweep:\n  grid: {nodes: [10]}\n  repeats: 2\n",
            "sweep.repeats: unknown key (did you mean 'repetitions'?); allowed keys here: "
            "name, grid, zip, derived, repetitions",
        ),
        ("sweep:\n  grid: {walk: [1]}\n", "walk is a section; sweep one of its keys"),
        (  # a near miss is named
            "sweep:\n  grid: {walk.timeot: [1s]}\n",
            "sweep.grid: walk.timeot is not a key of the scenario (did you mean walk.timeout? "
            "keys of walk: kind,",
        ),
        (
            "sweep:\n  grid: {wlk.timeout: [1s]}\n",
            "wlk.timeout is not a key of the scenario (did you mean walk.timeout? the scenario "
            "has no wlk section)",
        ),
        (
            'sweep:\n  grid: {walk.timeout: ["= walk.transfer_tme + 1"]}\n',
            "walk.transfer_tme is not a key of the scenario (did you mean walk.transfer_time?)",
        ),
        (  # zip: lists of one length, each key swept once
            "sweep:\n  zip: {walk.transfer_time: [1s, 2s], walk.timeout: [11s, 12s, 13s]}\n",
            "sweep.zip: the lists of a zip block pair their values one by one, so they must "
            "have equal lengths: walk.transfer_time has 2, walk.timeout has 3",
        ),
        (
            "sweep:\n  grid: {walk.timeout: [11s]}\n  zip: {walk.timeout: [12s], nodes: [3]}\n",
            "sweep.zip.walk.timeout: already swept in the grid; a key is swept in the grid or "
            "in one zip block, not both",
        ),
        (
            "sweep:\n  zip: [{nodes: [30]}, {nodes: [40]}]\n",
            "sweep.zip[1].nodes: already swept in sweep.zip[0]",
        ),
        ("sweep:\n  zip: {}\n", "sweep.zip: expected a mapping of dotted keys to lists"),
        ("sweep:\n  zip: {walk.timout: [1s]}\n", "(did you mean walk.timeout?"),
        (
            "sweep:\n  zip: {nodes: [30]}\n  derived: {nodes: '= 2'}\n",
            "sweep.derived.nodes: already a key of a zip block",
        ),
        ("sweep:\n  grid: {seed: [1, 2]}\n", "seed cannot be swept; every run's seed is derived"),
        (
            "sweep:\n  grid: {nodes: [10]}\n  derived: {walk.timeout: 12s}\n",
            "sweep.derived.walk.timeout: '12s'; a derived value is a string '= expression'",
        ),
        (
            'sweep:\n  grid: {walk.timeout: ["= walk.transfer_time + open(1)"]}\n',
            "unknown function 'open'",
        ),
        (
            'sweep:\n  grid: {walk.timeout: ["= walk.transfer_tim + 1"]}\n',
            "walk.transfer_tim is not a key of the scenario",
        ),
        (
            "sweep:\n  grid: {walk.timeout: [500ms]}\n",
            "sweep point (walk.timeout='500ms'): invalid scenario",
        ),
        ("sweep:\n  grid: {nodes: {from: 1, to: 3}}\n", "exactly one of step or count"),
        (  # refused before a billion values are made
            "sweep:\n  grid: {walk.kill_probability: {from: 0, to: 1, count: 1000000000}}\n",
            "1000000000 values; at most 10000 runs per sweep",
        ),
        (  # an exact 9**9**9 would take minutes and gigabytes
            'sweep:\n  grid: {walk.timeout: ["= 9**9**9"]}\n',
            "'= 9**9**9' cannot be computed: the power is too large",
        ),
        (
            'sweep:\n  grid: {walk.timeout: ["= 10**18 * 10"]}\n',
            "'= 10**18 * 10' is 1e+19; an expression's value must be finite and at most 2**63",
        ),
    ],
)
def test_bad_sweeps_end_in_one_message_before_any_run(tmp_path, capsys, sweep, expected):
    out = tmp_path / "out"
    err = cli_error(capsys, "sweep", sweep_file(tmp_path, sweep), "--out", out, "--workers", 1)
    assert expected in err, err
    assert str(tmp_path / "sweep.yaml") in err
    assert not out.exists()  # nothing started


def test_a_sweep_needs_a_seed_and_a_sweep_section(tmp_path, capsys):
    no_seed = sweep_file(tmp_path, base=BASE.replace("seed: 7\n", ""))
    assert "a sweep needs the scenario's seed" in cli_error(capsys, "sweep", no_seed)
    plain = write(tmp_path / "plain.yaml", BASE)
    assert "no sweep section" in cli_error(capsys, "sweep", plain)
    assert "--workers 0" in cli_error(capsys, "sweep", sweep_file(tmp_path), "--workers", 0)
    blocked = write(tmp_path / "a-file", "")
    err = cli_error(capsys, "sweep", sweep_file(tmp_path), "--out", blocked, "--workers", 1)
    assert f"--out {blocked}: exists and is not a directory" in err
    # a parent that cannot hold the sweep directory fails before any run, too
    plan = plan_sweep(sweep_file(tmp_path))
    with pytest.raises(SweepError, match="cannot create the sweep directory"):
        run_sweep(plan, out=blocked / "below", backend=ProcessPool(1))


def test_run_and_validate_take_the_base_scenario_of_a_sweep_file(tmp_path, capsys):
    path = sweep_file(tmp_path)
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "valid sweep 'tiny-walk': 8 points x 2 repetitions = 16 runs" in out
    assert main(["run", str(path), "--out", str(tmp_path / "runs")]) == 0
    captured = capsys.readouterr()
    assert "has a sweep section; netsim run runs its base scenario" in captured.err
    assert "tiny-walk-seed7-" in captured.out  # the base scenario's own seed


#: The seed of the first run of :data:`GRID`, as planned before zip blocks existed.
RECORDED_FIRST_SEED = 4855268051408957296

ZIP = """\
sweep:
  grid:
    walk.kill_probability: [0, 0.05]
  zip:
    walk.transfer_time: [1s, 2s, 3s]
    walk.timeout: [11s, "= walk.transfer_time + 30s", 40s]
  repetitions: 2
"""


def test_a_zip_block_pairs_its_keys_as_one_axis_of_the_grids_product(tmp_path):
    plan = plan_sweep(sweep_file(tmp_path, ZIP))
    assert plan.spec.points == 2 * 3 and len(plan.runs) == 12  # not 2 x 3 x 3
    assert plan.spec.parameters == ("walk.kill_probability", "walk.transfer_time", "walk.timeout")
    points = {
        r.point: (r.parameters["walk.kill_probability"], r.parameters["walk.transfer_time"],
                  r.parameters["walk.timeout"])
        for r in plan.runs
    }  # fmt: skip
    pairs = [(1.0, 11.0), (2.0, 32.0), (3.0, 40.0)]
    assert [points[p] for p in range(6)] == [(k, *pair) for k in (0, 0.05) for pair in pairs]
    for run in plan.runs:  # the scenario that runs is the one the plan reports
        assert run.scenario.walk.transfer_time == run.parameters["walk.transfer_time"]
        assert run.scenario.walk.timeout == run.parameters["walk.timeout"]
    assert len({r.seed for r in plan.runs}) == 12
    # a zip block alone is a sweep, and several blocks are several axes
    alone = "sweep:\n  zip: {walk.transfer_time: [1s, 2s], walk.timeout: [11s, 12s]}\n"
    assert plan_sweep(sweep_file(tmp_path, alone)).spec.points == 2
    blocks = (
        "sweep:\n  zip:\n    - {walk.transfer_time: [1s, 2s], walk.timeout: [11s, 12s]}\n"
        "    - {nodes: [30, 40]}\n"
    )
    assert plan_sweep(sweep_file(tmp_path, blocks)).spec.points == 4


def test_a_one_key_zip_block_is_a_grid_axis_and_a_grid_keeps_its_run_ids(tmp_path):
    """Grid points are planned as before zip blocks existed: the ids of a grid's runs are its
    point values' (a zip block's key is one more value of its points, after the grid's)."""
    grid = "sweep:\n  grid: {walk.kill_probability: [0, 0.05], nodes: [30, 40]}\n"
    zipped = "sweep:\n  grid: {walk.kill_probability: [0, 0.05]}\n  zip: {nodes: [30, 40]}\n"
    ids = [r.run_id for r in plan_sweep(sweep_file(tmp_path, grid)).runs]
    assert ids == [r.run_id for r in plan_sweep(sweep_file(tmp_path, zipped)).runs]
    # recorded before zip blocks: the first run of the test file's grid
    first = plan_sweep(sweep_file(tmp_path)).runs[0]
    assert first.seed == RECORDED_FIRST_SEED


def test_a_zip_sweep_resumes_and_collects_its_keys_as_columns(tmp_path, capsys):
    path = sweep_file(tmp_path, ZIP.replace("[0, 0.05]", "[0]").replace("2\n", "1\n"))
    plan = plan_sweep(path)
    assert len(plan.runs) == 3
    out = tmp_path / "out"
    first = InterruptAfter(1)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(plan, out=out, backend=first)
    assert main(["sweep", str(path), "--out", str(out), "--workers", "1", "-q"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    directory = out / "tiny-walk"
    manifest = json.loads((directory / "sweep.json").read_text())
    assert manifest["zip"] == [["walk.transfer_time", "walk.timeout"]]
    assert manifest["status"] == "complete" and manifest["runs"] == 3
    long = collect(directory, write=False)
    columns = ["walk.kill_probability", "walk.transfer_time", "walk.timeout"]
    assert set(columns) <= set(long.columns)
    rows = long[columns].drop_duplicates().sort_values("walk.transfer_time")
    assert rows.values.tolist() == [[0, 1.0, 11.0], [0, 2.0, 32.0], [0, 3.0, 40.0]]
    again = InterruptAfter(99)
    run_sweep(plan, out=out, backend=again)
    assert again.ran == []  # nothing repeated


# --- running -----------------------------------------------------------------------------


class InterruptAfter:
    """A backend that runs tasks in this process and 'presses Ctrl-C' after ``count`` runs."""

    description = "test"

    def __init__(self, count: int) -> None:
        self.count = count
        self.ran: list[int] = []

    def run(self, tasks: list[RunTask]) -> Iterator[RunOutcome]:
        for task in tasks:
            if len(self.ran) == self.count:
                raise KeyboardInterrupt
            self.ran.append(task.run)
            yield from ProcessPool(1).run([task])


def small_sweep(tmp_path: Path) -> Path:
    return sweep_file(
        tmp_path, "sweep:\n  grid:\n    walk.kill_probability: [0, 0.05, 0.1]\n  repetitions: 2\n"
    )


def test_an_interrupted_sweep_resumes_with_exactly_the_missing_runs(tmp_path):
    plan = plan_sweep(small_sweep(tmp_path))
    out = tmp_path / "out"
    first = InterruptAfter(4)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(plan, out=out, backend=first)
    runs_dir = out / "tiny-walk" / RUNS
    assert sorted(p.name for p in runs_dir.iterdir()) == sorted(
        plan.runs[i].run_id for i in first.ran
    )  # only complete runs; no staging directories
    manifest = json.loads((out / "tiny-walk" / "sweep.json").read_text())
    assert manifest["status"] == "incomplete" and manifest["complete"] == 4
    second = InterruptAfter(99)
    result = run_sweep(plan, out=out, backend=second)
    assert second.ran == [r.run for r in plan.runs if r.run not in first.ran]
    assert result.progress.already_done == 4 and result.progress.complete == 2
    assert all(is_done(run, runs_dir) for run in plan.runs)
    assert json.loads((out / "tiny-walk" / "sweep.json").read_text())["status"] == "complete"
    third = InterruptAfter(99)
    run_sweep(plan, out=out, backend=third)
    assert third.ran == []  # nothing repeated


def test_a_changed_scenario_is_not_taken_for_a_finished_run(tmp_path):
    plan = plan_sweep(small_sweep(tmp_path))
    run_sweep(plan, out=tmp_path, backend=InterruptAfter(99))
    runs_dir = tmp_path / "tiny-walk" / RUNS
    first = runs_dir / plan.runs[0].run_id
    manifest = json.loads((first / "manifest.json").read_text())
    manifest["scenario_hash"] = "0" * 64
    (first / "manifest.json").write_text(json.dumps(manifest))
    assert not is_done(plan.runs[0], runs_dir) and is_done(plan.runs[1], runs_dir)


def test_keys_added_later_at_their_neutral_default_leave_the_hash_of_earlier_runs(tmp_path):
    """A run made before metrics.privacy_ledger and metrics.omit_tables existed recorded the
    hash of its scenario without them; at their defaults they still hash to that, so a resumed
    sweep does not run it again. Set to anything else, they make another configuration."""
    import hashlib

    from netsim.scenario.loader import (
        HASH_NEUTRAL_DEFAULTS,
        content_digest,
        load_scenario,
        scenario_hash,
        scenario_to_data,
    )

    scenario = load_scenario(write(tmp_path / "s.yaml", BASE))
    before = scenario_to_data(scenario)
    for *sections, key in HASH_NEUTRAL_DEFAULTS:
        parent = before
        for section in sections:
            parent = parent.get(section) or {}
        parent.pop(key, None)
    before["churn"]["path"] = content_digest(Path(before["churn"]["path"]))  # its bytes
    canonical = json.dumps(before, sort_keys=True, separators=(",", ":"))
    assert scenario_hash(scenario) == hashlib.sha256(canonical.encode()).hexdigest()
    totals = load_scenario(write(tmp_path / "t.yaml", BASE), ["metrics.privacy_ledger=totals"])
    assert scenario_hash(totals) != scenario_hash(scenario)
    # each neutral value is the schema's default (the table cannot drift from it): resolved,
    # a scenario that leaves the keys out has exactly those values
    stunner = BASE.replace(
        f"churn: {{kind: trace, path: {TRACE}}}",
        f"churn: {{kind: stunner, path: {tmp_path / 'absent.txt'}, "
        f"fallback: {{kind: trace, path: {TRACE}}}}}",
    )
    resolved = scenario_to_data(load_scenario(write(tmp_path / "u.yaml", stunner)))
    from netsim.algorithms.dola.config import DolaConfig, DolaDataConfig
    from netsim.algorithms.gossip_learning.application import GossipLearningConfig
    from netsim.algorithms.mi_ogd.config import MiOgdConfig
    from netsim.algorithms.muffliato.config import MuffliatoConfig
    from netsim.learning.sgd_agent import DatasetConfig, LearningConfig
    from netsim.privacy.threat import ThreatModelConfig

    # sections BASE does not have: the default of the section's own config
    models = {
        ("dola",): DolaConfig, ("dola", "data"): DolaDataConfig, ("learning",): LearningConfig,
        ("mi_ogd",): MiOgdConfig, ("gossip_learning",): GossipLearningConfig,
        ("muffliato",): MuffliatoConfig, ("privacy",): ThreatModelConfig,
        ("learning", "dataset"): DatasetConfig, ("dsgd", "dataset"): DatasetConfig,
    }  # fmt: skip
    for (*sections, key), neutral in HASH_NEUTRAL_DEFAULTS.items():
        if not sections:  # a whole section added later: absent (None) by default
            assert resolved[key] is None and neutral is None, key
            continue
        if resolved.get(sections[0]) is None:
            field = models[tuple(sections)].model_fields[key]
            assert field.get_default(call_default_factory=True) == neutral, key
            continue
        parent = resolved
        for section in sections:
            parent = parent[section]
        assert parent[key] == neutral, key


def test_a_run_with_a_damaged_table_is_not_taken_for_done_and_load_run_says_why(tmp_path):
    """A table zeroed in place (a crash of the disk, not of netsim) or replaced by a valid
    Parquet file of another table made a resumed sweep skip the run, and load_run raise
    pyarrow's error or hand collect a table that broke it with a KeyError."""
    from netsim.analysis import load_run
    from netsim.errors import RunDirectoryError

    plan = plan_sweep(small_sweep(tmp_path))
    run_sweep(plan, out=tmp_path, backend=InterruptAfter(99))
    runs_dir = tmp_path / "tiny-walk" / RUNS
    zeroed, swapped = (runs_dir / plan.runs[i].run_id for i in (0, 1))
    table = zeroed / "walk_steps.parquet"
    table.write_bytes(bytes(table.stat().st_size))
    (swapped / "walk_summary.parquet").write_bytes((swapped / "walk_ends.parquet").read_bytes())
    assert not is_done(plan.runs[0], runs_dir) and not is_done(plan.runs[1], runs_dir)
    with pytest.raises(RunDirectoryError, match=r"walk_steps\.parquet is not a readable Parquet"):
        load_run(zeroed)
    with pytest.raises(RunDirectoryError, match=r"walk_summary\.parquet has \d+ rows; the"):
        load_run(swapped)
    again = InterruptAfter(99)
    run_sweep(plan, out=tmp_path, backend=again)
    assert again.ran == [0, 1]  # both run again, and are whole afterwards
    assert load_run(zeroed)["walk_steps"].shape[0] > 0


def test_a_failing_run_is_recorded_and_the_others_complete(tmp_path, capsys):
    broken = write(tmp_path / "broken.csv", "node,start,end\n0,10,oops\n")
    path = sweep_file(tmp_path, f"sweep:\n  grid:\n    churn.path: [{TRACE}, {broken}]\n")
    out = tmp_path / "out"
    code = main(["sweep", str(path), "--out", str(out), "--workers", "1", "-q"])
    captured = capsys.readouterr()
    assert code == 1
    assert "1 of 2 runs failed" in captured.err and "Traceback" not in captured.err
    status = collect_status(out / "tiny-walk")
    assert status["status"].tolist() == ["complete", "failed"]
    assert "broken.csv" in status["error"].iloc[1]
    record = json.loads((out / "tiny-walk" / "failures" / f"{status.run_id[1]}.json").read_text())
    assert record["point"] == 1 and "TraceError" in record["error"] and record["traceback"]
    assert set(collect(out / "tiny-walk", write=False)["point"]) == {0}


def test_a_worker_that_cannot_unpickle_a_run_fails_that_run_with_a_message():
    """A component module missing on a worker fails its run (recorded, the sweep goes on)
    instead of killing the worker process."""
    task = PickledTask(3, "r3", b"cnowhere_plugin_module\nThing\n.")
    outcome = execute_pickled(task)
    assert (outcome.run, outcome.run_id, outcome.status) == (3, "r3", "failed")
    assert "the worker cannot read the run's scenario (ModuleNotFoundError" in outcome.error
    assert "must be importable on every worker" in outcome.error


def _tables(sweep_dir: Path) -> dict[str, bytes]:
    """Every table file of every run, by run id and name (manifests hold wall times)."""
    return {
        f"{run.name}/{table.name}": table.read_bytes()
        for run in sorted((sweep_dir / RUNS).iterdir())
        for table in sorted(run.glob("*.parquet"))
    }


def test_the_process_pool_and_a_dask_local_cluster_give_identical_tables(tmp_path, capsys):
    distributed = pytest.importorskip("distributed")
    # a grid axis and a zip block: 2 x 2 points
    zipped = "  zip: {walk.transfer_time: [1s, 2s], walk.timeout: [11s, 32s]}\n"
    path = sweep_file(tmp_path, "sweep:\n  grid:\n    walk.kill_probability: [0, 0.05]\n" + zipped)
    assert main(["sweep", str(path), "--out", str(tmp_path / "pool"), "--workers", "2"]) == 0
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        code = main(
            ["sweep", str(path), "--out", str(tmp_path / "dask"), "--scheduler",
             cluster.scheduler_address]
        )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Dask scheduler" in captured.err and "(2 workers)" in captured.err
    pool, dask = tmp_path / "pool" / "tiny-walk", tmp_path / "dask" / "tiny-walk"
    assert len(_tables(pool)) > 6 and _tables(pool) == _tables(dask)
    pd.testing.assert_frame_equal(
        pd.read_parquet(pool / "results.parquet"), pd.read_parquet(dask / "results.parquet")
    )
    plan = pq.read_table(pool / PLAN).to_pandas()
    assert plan.equals(pq.read_table(dask / PLAN).to_pandas())
    long = collect(pool, write=False)
    assert set(long["run_id"]) == set(plan["run_id"])
    # every run's manifest records its point's parameters, resolved (seconds)
    parameters = [c for c in plan.columns if "." in c]
    for row in plan.to_dict("records"):
        for base in (pool, dask):
            manifest = json.loads((base / RUNS / row["run_id"] / "manifest.json").read_text())
            assert manifest["parameters"] == {key: row[key] for key in parameters}
    assert parameters == ["walk.kill_probability", "walk.transfer_time", "walk.timeout"]
    pairs = zip(plan["walk.transfer_time"], plan["walk.timeout"], strict=True)
    assert len(plan) == 4 and set(pairs) == {(1.0, 11.0), (2.0, 32.0)}


def test_an_unreachable_scheduler_is_one_message_before_any_run(tmp_path, capsys):
    pytest.importorskip("distributed")
    out = tmp_path / "out"
    err = cli_error(
        capsys, "sweep", small_sweep(tmp_path), "--out", out, "--scheduler", "tcp://127.0.0.1:9"
    )
    assert "--scheduler tcp://127.0.0.1:9: cannot reach the Dask scheduler" in err
    assert not out.exists()


@pytest.mark.parametrize("address", ["not an address", "localhost", "tcp://host"])
def test_a_malformed_scheduler_address_is_one_message_and_no_traceback(tmp_path, address):
    """In a subprocess: a Dask client made from a malformed address printed a traceback of
    its own at interpreter exit, after netsim's message."""
    import subprocess
    import sys

    pytest.importorskip("distributed")
    result = subprocess.run(
        [sys.executable, "-m", "netsim", "sweep", str(small_sweep(tmp_path)), "--scheduler",
         address, "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=SUBPROCESS_HANG_LIMIT, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr == (
        f"netsim: error: --scheduler {address!r}: not a scheduler address; give the address "
        "'dask scheduler' prints, e.g. tcp://127.0.0.1:8786 (or host:port)\n"
    )


def test_ctrl_c_stops_the_pool_keeps_finished_runs_and_the_same_command_resumes(tmp_path):
    path = sweep_file(
        tmp_path,
        "sweep:\n  grid:\n    walk.kill_probability: {from: 0, to: 0.1, count: 6}\n",
        base=BASE.replace("duration: 2min", "duration: 20min"),
    )
    out = tmp_path / "out"
    command = [sys.executable, "-m", "netsim", "sweep", str(path), "--out", str(out)]
    # Ctrl-C at its default, as a terminal's foreground job has it: a process started by one
    # that ignores SIGINT (a test worker may) inherits the ignoring, and netsim then keeps it
    # ignored, as it should for a background job (netsim.signals.install_stop_handlers)
    foreground = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
    )
    inherited = signal.getsignal(signal.SIGINT)
    process = subprocess.Popen(
        [sys.executable, "-c", foreground, *command[1:], "--workers", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    runs_dir = out / "tiny-walk" / RUNS
    deadline = time.monotonic() + SUBPROCESS_HANG_LIMIT
    while time.monotonic() < deadline and process.poll() is None:
        if runs_dir.is_dir() and any(is_complete_run(p) for p in runs_dir.iterdir()):
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=SUBPROCESS_HANG_LIMIT)
    assert process.returncode == 130, f"{err}\n(SIGINT in the test process: {inherited})"
    assert "Run the same command again to resume" in err
    kept = sorted(p.name for p in runs_dir.iterdir())
    assert kept and all(is_complete_run(runs_dir / name) for name in kept)  # no partial dirs
    assert len(kept) < 6
    again = subprocess.run(
        [*command, "--workers", "1"], capture_output=True, text=True, timeout=SUBPROCESS_HANG_LIMIT
    )
    assert again.returncode == 0, again.stderr
    assert f"{6 - len(kept)} ran, {len(kept)} were already complete, 0 failed" in again.stderr
    assert len(list(runs_dir.iterdir())) == 6


def test_a_sweep_on_a_full_disk_is_one_message(tmp_path, capsys, monkeypatch):
    """The runs failed on the full disk and were recorded; then writing the sweep's own
    manifest raised an OSError traceback."""
    import errno

    import netsim.sweep.execute as execute

    real_write_json = execute.write_json

    def full_disk(path, payload):  # type: ignore[no-untyped-def]
        if Path(path).name == "sweep.json" and payload.get("status") == "complete":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real_write_json(path, payload)

    monkeypatch.setattr(execute, "write_json", full_disk)
    out = tmp_path / "out"
    code = main(["sweep", str(small_sweep(tmp_path)), "--out", str(out), "--workers", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.endswith(
        f"netsim: error: {out / 'tiny-walk' / 'sweep.json'}: No space left on device\n"
    )


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state, ppid, ..., start time at
    index 19), or None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _children(pid: int) -> dict[int, str]:
    """The processes whose parent is ``pid``, with their start times."""
    found = {}
    for entry in Path("/proc").glob("[0-9]*"):
        fields = _stat(int(entry.name))
        if fields is not None and int(fields[1]) == pid:
            found[int(entry.name)] = fields[19]
    return found


def _running(pid: int, started: str) -> bool:
    """Whether that process still runs (not exited, not a zombie, not a reused pid)."""
    fields = _stat(pid)
    return fields is not None and fields[19] == started and fields[0] != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process tree from /proc")
def test_workers_exit_quietly_when_the_sweep_is_killed(tmp_path):
    """Orphaned pool workers finished their runs, then printed BrokenPipeError tracebacks
    when they sent the results to their dead parent; they now exit when it dies, quietly, and
    leave no staging directory."""
    path = sweep_file(
        tmp_path,
        "sweep:\n  grid:\n    walk.kill_probability: {from: 0, to: 0.1, count: 4}\n",
        base=BASE.replace("duration: 2min", "duration: 20min"),
    )
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "netsim", "sweep", str(path), "--out", str(out), "--workers", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    runs_dir = out / "tiny-walk" / RUNS
    progress = runs_dir / ".progress"
    deadline = time.monotonic() + SUBPROCESS_HANG_LIMIT
    while time.monotonic() < deadline and process.poll() is None:
        if progress.is_dir() and len(list(progress.iterdir())) >= 2:
            break  # both workers are in a run
        time.sleep(0.05)
    workers = _children(process.pid)
    assert len(workers) >= 2 and process.poll() is None
    process.kill()  # SIGKILL: the parent cannot stop its pool
    # ends when the last worker closed stderr
    _, err = process.communicate(timeout=SUBPROCESS_HANG_LIMIT)
    deadline = time.monotonic() + SUBPROCESS_HANG_LIMIT
    while time.monotonic() < deadline and any(_running(*w) for w in workers.items()):
        time.sleep(0.05)
    assert not any(_running(*w) for w in workers.items())
    assert "Traceback" not in err and "Error" not in err, err
    assert "leaked semaphore" not in err, err
    assert not any(".partial-" in p.name for p in runs_dir.iterdir())


KILLED_HOLDING_A_LOCK = """
import multiprocessing, os, signal, sys
from netsim.sweep.execute import start_quiet_resource_tracker
if sys.argv[1] == "netsim":
    start_quiet_resource_tracker()
lock = multiprocessing.get_context("spawn").Lock()  # a named semaphore, as a pool's queues hold
print(lock._semlock.name, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="reads POSIX semaphores in /dev/shm")
@pytest.mark.parametrize("tracker", ["netsim", "python"])
def test_a_killed_sweeps_semaphores_are_unlinked_without_a_warning(tmp_path, tracker):
    """After a sweep was killed, Python's resource tracker printed "There appear to be 6
    leaked semaphore objects to clean up at shutdown" below the sweep's own message. The
    tracker netsim starts unlinks them as before, quietly; the tracker Python starts by
    itself (the second case) shows what the warning was."""
    script = tmp_path / "killed.py"
    script.write_text(KILLED_HOLDING_A_LOCK, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script), tracker], capture_output=True, text=True,
        timeout=SUBPROCESS_HANG_LIMIT, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    # run() returns once the tracker, which shares stderr, has cleaned up and exited
    assert result.returncode == -signal.SIGKILL
    name = result.stdout.strip().lstrip("/")
    assert name and not (Path("/dev/shm") / f"sem.{name}").exists()
    warned = "leaked semaphore objects to clean up" in result.stderr
    assert warned == (tracker == "python"), result.stderr


def _pool_workers(pid: int) -> dict[int, str]:
    """The pool workers ``pid`` spawned (its children running ``spawn_main``; not the
    resource tracker), with their start times."""
    found = {}
    for child, started in _children(pid).items():
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in command:
            found[child] = started
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process tree from /proc")
def test_workers_whose_sweep_died_while_they_started_take_no_task(tmp_path):
    """The sweep was killed while its pool workers were still starting: they set up their
    parent watch after it had died (watching their new parent's pid, the parent-death signal
    already past), then ran the tasks the dead sweep had queued, published those runs and
    printed BrokenPipeError tracebacks when they sent the results (or, with nothing queued,
    waited for a task for ever). Now they exit before taking a task, quietly."""
    path = sweep_file(
        tmp_path,
        "sweep:\n  grid:\n    walk.kill_probability: {from: 0, to: 0.1, count: 4}\n",
    )
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "netsim", "sweep", str(path), "--out", str(out), "--workers", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    deadline = time.monotonic() + SUBPROCESS_HANG_LIMIT
    workers: dict[int, str] = {}
    while time.monotonic() < deadline and process.poll() is None and len(workers) < 2:
        workers = _pool_workers(process.pid)
        time.sleep(0.01)
    assert len(workers) == 2 and process.poll() is None
    process.kill()  # as soon as the workers exist: before they have imported netsim
    _, err = process.communicate(timeout=SUBPROCESS_HANG_LIMIT)
    deadline = time.monotonic() + SUBPROCESS_HANG_LIMIT
    while time.monotonic() < deadline and any(_running(*w) for w in workers.items()):
        time.sleep(0.05)
    assert not any(_running(*w) for w in workers.items())
    assert "Traceback" not in err and "Error" not in err, err
    runs_dir = out / "tiny-walk" / RUNS
    assert not any(is_complete_run(p) for p in runs_dir.iterdir())


@contextmanager
def signal_inside_compiled_code(handler: Callable[[int, object], None]) -> Iterator[list[str]]:
    """Run ``handler`` (as SIGTERM's) the first time the authors' round kernel
    (``kernels.authors_cycle``, called by ``AuthorsCycle.exchanges``) calls back into the
    interpreter (numba's ``_numba_unpickle``), which is where a real signal's handler ran when
    a sweep hung: what it raised there came out as a ``SystemError``. Yields where it ran
    (once, or the test is moot)."""
    hit: list[str] = []

    def tracer(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call" and not hit and frame.f_code.co_name == "_numba_unpickle":
            caller = frame.f_back  # compiled code makes no frame: its caller's is next
            if caller is not None and caller.f_code.co_name == "exchanges":
                hit.append(f"{frame.f_code.co_name} in {caller.f_code.co_name}")
                handler(signal.SIGTERM, frame)
        return None

    sys.settrace(tracer)
    try:
        yield hit
    finally:
        sys.settrace(None)
        clear_stop()


ROUNDS_AUTHORS = BASE.replace("gossip: {period: 1s}", "gossip: {period: 1s, mode: rounds}").replace(
    "  kind: service\n", "  kind: service\n  preset: authors\n"
)


def test_a_sigterm_that_compiled_code_swallows_still_stops_the_worker(tmp_path):
    """A worker's SIGTERM handler ran inside a kernel's callback: numba turned its SystemExit
    into a SystemError, the run was recorded as failed and the worker went back for the next
    task — and its pool, which sends SIGTERM once, waited for it forever."""
    from netsim.scenario.loader import load_scenario
    from netsim.sweep.execute import RunTask, _exit_on_term, execute_task

    scenario = load_scenario(write(tmp_path / "s.yaml", ROUNDS_AUTHORS))
    runs = tmp_path / "runs"
    task = RunTask(0, "tiny-walk-run", scenario, str(runs))
    with signal_inside_compiled_code(_exit_on_term) as hit, pytest.raises(SystemExit) as stop:
        execute_task(task)
    assert len(hit) == 1 and hit[0].startswith("_numba_unpickle in ")
    assert stop.value.code == 143
    # nothing but the sweep's (now empty) progress directory: no run, complete or partial
    assert [p.name for p in runs.iterdir()] == [PROGRESS_DIR]
    assert list((runs / PROGRESS_DIR).iterdir()) == []


def test_a_sigterm_that_compiled_code_swallows_still_ends_netsim_run_as_terminated(
    tmp_path, capsys
):
    from netsim.signals import _terminate

    scenario = write(tmp_path / "s.yaml", ROUNDS_AUTHORS)
    out = tmp_path / "runs"
    with signal_inside_compiled_code(_terminate) as hit:
        code = main(["run", str(scenario), "--out", str(out)])
    err = capsys.readouterr().err
    assert len(hit) == 1 and hit[0].startswith("_numba_unpickle in ")
    assert code == 143, err
    assert err == "netsim: terminated; no partial run directory was kept\n"
    assert not out.exists() or list(out.iterdir()) == []


def test_a_run_id_hashes_data_content_not_where_the_checkout_lives(tmp_path):
    """The same scenario with its trace at another path, or reached through a symlinked
    directory, has the same run id; another trace's content gives another id."""
    from netsim.scenario.loader import load_scenario
    from netsim.scenario.runner import run_id_for

    elsewhere = tmp_path / "checkout" / "traces"
    elsewhere.mkdir(parents=True)
    (elsewhere / TRACE.name).write_bytes(TRACE.read_bytes())
    (tmp_path / "shared").symlink_to(elsewhere)
    ids = []
    for trace in (TRACE, elsewhere / TRACE.name, tmp_path / "shared" / TRACE.name):
        file = write(tmp_path / "s.yaml", BASE.replace(str(TRACE), str(trace)))
        ids.append(run_id_for(load_scenario(file).model_copy(update={"seed": 3})))
    assert len(set(ids)) == 1, ids
    (elsewhere / TRACE.name).write_bytes(TRACE.read_bytes() + b"\n")
    edited = write(tmp_path / "s.yaml", BASE.replace(str(TRACE), str(elsewhere / TRACE.name)))
    assert run_id_for(load_scenario(edited).model_copy(update={"seed": 3})) != ids[0]


def test_a_sweep_made_before_portable_run_ids_keeps_its_finished_runs(tmp_path, monkeypatch):
    """Runs published under the old ids (their hash over absolute data paths) are found by
    their resolved scenario, renamed to the new ids and not run again."""
    import netsim.scenario.loader as loader

    sweep = sweep_file(tmp_path, "sweep:\n  grid:\n    walk.kill_probability: [0, 0.05, 0.1]\n")
    plan = plan_sweep(sweep)
    out = tmp_path / "out"
    run_sweep(plan, out=out, backend=ProcessPool(1))
    runs = out / plan.spec.name / RUNS
    before = {r.run_id: (runs / r.run_id / "walk_steps.parquet").read_bytes() for r in plan.runs}
    new_ids = [r.run_id for r in plan.runs]
    with monkeypatch.context() as old_netsim:  # the old identity: the absolute path itself
        old_netsim.setattr(loader, "content_digest", str)
        old = [(run_id_for(r.scenario), scenario_hash(r.scenario)) for r in plan.runs]
    old_ids = dict(zip(new_ids, old, strict=True))
    for run_id, (old_id, old_hash) in old_ids.items():
        assert old_id != run_id
        manifest = json.loads((runs / run_id / "manifest.json").read_text())
        manifest.update(run_id=old_id, scenario_hash=old_hash)
        (runs / run_id / "manifest.json").write_text(json.dumps(manifest))
        (runs / run_id).rename(runs / old_id)
    again = InterruptAfter(99)
    run_sweep(plan_sweep(sweep), out=out, backend=again)
    assert again.ran == []  # every finished run found under its old id
    for run_id, (old_id, _) in old_ids.items():
        assert (runs / run_id / "walk_steps.parquet").read_bytes() == before[run_id]
        manifest = json.loads((runs / run_id / "manifest.json").read_text())
        assert (manifest["run_id"], manifest["earlier_run_id"]) == (run_id, old_id)
        assert not (runs / old_id).exists()
    assert main(["verify", str(out / plan.spec.name)]) == 0
