"""The experiment scripts of ``analysis/`` run through :mod:`netsim.sweep`: sweeps of listed
points (``plan_points``), and results from the sweep's run directories equal to those of the
same scenarios run in memory with the same reduction (shortened DOLA and MI-OGD experiments)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from pandas.testing import assert_frame_equal

from netsim.analysis import collect, collect_status
from netsim.analysis.learning import curves_from_tables
from netsim.errors import SweepError
from netsim.scenario.loader import load_scenario
from netsim.scenario.runner import run_id_for, run_in_memory
from netsim.storage import SWEEP_PLAN, SWEEP_RUNS, SWEEP_SOURCE
from netsim.sweep import ProcessPool, SweepPlan, SweepPoint, plan_points, run_sweep
from tests.conftest import SHARED_DATA

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analysis"))  # the scripts import their shared module by name

import dola_experiments  # noqa: E402
import experiments  # noqa: E402
import learning_grid  # noqa: E402
import mi_ogd_experiments  # noqa: E402
import walk_figure  # noqa: E402
import walk_grid  # noqa: E402
import walk_java_rows  # noqa: E402

MI_OGD = REPO / "scenarios" / "mi_ogd" / "regression.yaml"


def mi_ogd_base(**changes: object) -> dict:
    """The MI-OGD scenario as plain data, shortened."""
    data = load_scenario(MI_OGD).model_dump(mode="json", exclude_none=True)
    return {**data, "duration": 5.0, **changes}


def only(plan: SweepPlan, keep) -> SweepPlan:
    """``plan`` with the runs ``keep`` selects (to run a few runs of an experiment)."""
    return dataclasses.replace(plan, runs=tuple(run for run in plan.runs if keep(run)))


# --- plan_points ---------------------------------------------------------------------------


def test_listed_points_run_with_their_own_seeds_and_group_into_points():
    points = [
        SweepPoint({"mi_ogd.sigma": 0.0}, 5, "non-private"),
        SweepPoint({"mi_ogd.sigma": 0.0}, 9, "non-private"),
        SweepPoint({"mi_ogd.sigma": 1.0, "topology": {"kind": "ring", "k": 2}}, 5, "ring"),
    ]
    plan = plan_points(mi_ogd_base(), points, name="mi-listed")
    assert plan.spec.name == "mi-listed" and plan.spec.points == 2 and len(plan.runs) == 3
    assert plan.spec.parameters == ("mi_ogd.sigma", "topology")
    assert [(r.point, r.repetition, r.seed, r.label) for r in plan.runs] == [
        (0, 0, 5, "non-private"),
        (0, 1, 9, "non-private"),
        (1, 0, 5, "ring"),
    ]
    for run in plan.runs:  # exactly the given seed, and the usual run ids
        assert run.scenario.seed == run.seed
        assert run.run_id == run_id_for(run.scenario)
        assert run.run_id.startswith(f"mi-ogd-regression-seed{run.seed}-")
    assert plan.runs[2].scenario.topology.kind == "ring"
    assert json.loads(plan.runs[2].parameters["topology"])["kind"] == "ring"
    assert json.loads(plan.runs[0].parameters["topology"]) == {"kind": "complete"}
    # the same scenario as the base with the overrides validated directly
    direct = load_scenario(MI_OGD, ["duration=5", "mi_ogd.sigma=0.0"])
    assert plan.runs[1].scenario == direct.model_copy(update={"seed": 9})


def test_a_scenario_file_is_a_base_and_its_sweep_section_is_ignored(tmp_path):
    data = mi_ogd_base()
    data["sweep"] = {"grid": {"mi_ogd.sigma": [0.0, 1.0]}}
    path = tmp_path / "base.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    plan = plan_points(path, [SweepPoint({}, 3)])
    assert plan.source == path and plan.spec.name == "mi-ogd-regression"
    assert plan.runs[0].scenario == plan_points(mi_ogd_base(), [SweepPoint({}, 3)]).runs[0].scenario


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ([], "no points"),
        ([SweepPoint({"seed": 3}, 1)], "give the run's seed as the point's seed"),
        ([SweepPoint({}, -1)], "seed -1; a seed is an integer in [0, 2^63)"),
        ([SweepPoint({}, 1), SweepPoint({}, 1, "again")], "point 1 (again): the same scenario"),
        ([SweepPoint({"mi_ogd.nonsense": 1}, 1)], "point 0: invalid scenario"),
        ([SweepPoint({"nodes.count": 1}, 1)], "nodes is not a section"),
        ([SweepPoint({"": 1}, 1)], "'' is not a dotted scenario key"),
    ],
)
def test_bad_points_end_in_one_message_before_any_run(points, expected):
    with pytest.raises(SweepError) as error:
        plan_points(mi_ogd_base(), points, source=Path("listed.yaml"))
    assert expected in str(error.value)


def test_a_sweep_of_listed_points_records_its_points_and_resumes(tmp_path):
    points = [
        SweepPoint({"mi_ogd.sigma": s}, seed, f"σ={s}") for s in (0.0, 1.0) for seed in (1, 2)
    ]
    plan = plan_points(mi_ogd_base(), points, name="mi-resume", source=MI_OGD)
    first = run_sweep(plan, out=tmp_path, backend=ProcessPool(1))
    assert first.progress.complete == 4 and not first.failures
    again = run_sweep(plan, out=tmp_path, backend=ProcessPool(1))
    assert again.progress.already_done == 4 and again.progress.complete == 0
    directory = tmp_path / "mi-resume"
    recorded = yaml.safe_load((directory / SWEEP_SOURCE).read_text(encoding="utf-8"))
    assert recorded["points"][3] == {"label": "σ=1.0", "seed": 2, "set": {"mi_ogd.sigma": 1.0}}
    assert recorded["base"]["name"] == "mi-ogd-regression"
    table = pq.read_table(directory / SWEEP_PLAN).to_pandas()
    assert table["seed"].tolist() == [1, 2, 1, 2]
    assert table["label"].tolist() == [p.label for p in points]
    assert table["run_id"].tolist() == [r.run_id for r in plan.runs]
    assert (collect_status(directory)["status"] == "complete").all()
    long = collect(directory, write=False)
    assert set(long["mi_ogd.sigma"]) == {0.0, 1.0}
    # a sweep directory stands for its complete runs where a script takes run directories
    found = experiments.run_directories([directory])
    assert found == [directory / SWEEP_RUNS / r.run_id for r in plan.runs]


def test_the_walk_figure_takes_a_sweep_directory(tmp_path):
    base = load_scenario(REPO / "scenarios" / "walk" / "reduced-drw1-d10-kill0.yaml")
    data = base.model_dump(mode="json", exclude_none=True)
    data.update(nodes=30, duration=60.0)
    del data["churn"]  # always online: no trace needed
    data["topology"] = {"kind": "k_out", "k": 5}
    plan = plan_points(data, [SweepPoint({}, 1), SweepPoint({"walk.kill_probability": 0.5}, 1)])
    result = run_sweep(plan, out=tmp_path, backend=ProcessPool(1))
    out = tmp_path / "fig.png"
    assert walk_figure.main([str(result.directory), "--out", str(out)]) == 0
    assert out.stat().st_size > 0


# --- the scripts: sweep results equal in-memory runs -------------------------------------------


def in_memory_dola(plan: SweepPlan) -> pd.DataFrame:
    """What the old per-task runner computed: every run in memory, the same reduction."""
    frames = []
    for run in plan.runs:
        _built, tables = run_in_memory(run.scenario)
        frames.append(dola_experiments.run_curves(tables, run.scenario))
    return pd.concat(frames, ignore_index=True)


def in_memory_mi_ogd(name: str, plan: SweepPlan, labels: list[dict]) -> pd.DataFrame:
    """What the old per-task runner computed, with the labels the old tasks carried."""
    frames = []
    for run, label in zip(plan.runs, labels, strict=True):
        _built, tables = run_in_memory(run.scenario)
        regret = tables["mi_ogd_regret"].copy()
        for key, value in label.items():
            regret[key] = value
        regret["seed"] = run.seed
        regret["leakage"] = tables["mi_ogd_summary"].iloc[0]["leakage_per_report"]
        frames.append(regret)
    return pd.concat(frames, ignore_index=True)


def test_a_shortened_dola_experiment_through_the_sweep_equals_in_memory_runs(tmp_path, capsys):
    """ε experiment, 20 rounds, seed 1 of each configuration, on 2 worker processes."""
    plan = only(dola_experiments.plan("epsilon", {"duration": 20.0}), lambda r: r.seed == 1)
    assert len(plan.runs) == 7 and plan.spec.name == "dola-epsilon"
    assert [r.seed for r in plan.runs] == [1] * 7
    runner = experiments.SweepRunner(out=tmp_path / "sweeps", jobs=2)
    results = tmp_path / "results" / "dola-epsilon.parquet"
    failed = experiments.run_experiments(
        ["epsilon"], runner,
        plan=lambda name: plan, reduce=dola_experiments.reduce_run, results=lambda name: results,
    )  # fmt: skip
    assert failed == 0
    expected = in_memory_dola(plan)
    assert_frame_equal(pd.read_parquet(results), expected, check_exact=True)
    assert set(expected["epsilon"]) == {1.0, 0.1, 0.01, float("inf")}
    capsys.readouterr()
    # a second run resumes: nothing runs again, and the table is the same
    experiments.run_experiments(
        ["epsilon"], runner,
        plan=lambda name: plan, reduce=dola_experiments.reduce_run, results=lambda name: results,
    )  # fmt: skip
    assert "0 ran, 7 were already complete, 0 failed" in capsys.readouterr().out
    assert_frame_equal(pd.read_parquet(results), expected, check_exact=True)


def test_a_shortened_mi_ogd_experiment_through_the_sweep_equals_in_memory_runs(tmp_path):
    """Fig. 4 (T = 25) for σ = 0 and 1, seeds 1 and 2; the bandit horizon label from its run."""
    plan = only(
        mi_ogd_experiments.plan("fig4"), lambda r: r.seed <= 2 and r.parameters["mi_ogd.sigma"] <= 1
    )
    labels = [{"sigma": r.parameters["mi_ogd.sigma"]} for r in plan.runs]
    assert [label["sigma"] for label in labels] == [0.0, 0.0, 0.25, 0.25, 0.5, 0.5, 1.0, 1.0]
    result = run_sweep(plan, out=tmp_path, backend=ProcessPool(1))
    directories = [result.directory / SWEEP_RUNS / r.run_id for r in plan.runs]
    reduced = experiments.reduce_runs(
        directories, lambda d: mi_ogd_experiments.reduce_run("fig4", d)
    )
    assert_frame_equal(reduced, in_memory_mi_ogd("fig4", plan, labels), check_exact=True)
    bandit = only(mi_ogd_experiments.plan("bandit"), lambda r: r.run in (0, 10))
    assert [r.seed for r in bandit.runs] == [1, 1]
    result = run_sweep(bandit, out=tmp_path, backend=ProcessPool(1))
    directories = [result.directory / SWEEP_RUNS / r.run_id for r in bandit.runs]
    reduced = experiments.reduce_runs(
        directories, lambda d: mi_ogd_experiments.reduce_run("bandit", d)
    )
    labels = [{"setting": "bandit", "T": 100}, {"setting": "bandit", "T": 316}]
    assert_frame_equal(reduced, in_memory_mi_ogd("bandit", bandit, labels), check_exact=True)


def test_the_learning_grid_plans_the_scenarios_its_overrides_name():
    """Every configuration × seed is the scenario file with its ``--set`` overrides."""
    plan = learning_grid.plan("segmentation", 2, ("logreg",))
    assert len(plan.runs) == 2 * len(learning_grid.grid(("logreg",)))
    path = REPO / "scenarios" / "learning" / "segmentation.yaml"
    configurations = learning_grid.grid(("logreg",))
    for run in plan.runs[::7]:
        overrides = [f"{key}={value}" for key, value in configurations[run.point].items()]
        expected = load_scenario(path, overrides).model_copy(update={"seed": run.seed})
        assert run.scenario == expected and run.seed == run.repetition + 1


def test_experiments_needing_shared_data_skip_without_it():
    """The DOLA data-set comparison includes Adult only where ../shared/data has it."""
    adult = SHARED_DATA / "uci" / "adult-complete-rows.csv"
    if not adult.is_file():
        pytest.skip(f"data file {adult} is absent (research-only data is read from ../shared/data)")
    plan = dola_experiments.plan("datasets")
    assert {r.scenario.dola.data.name for r in plan.runs} == {"adult", "spambase", "synthetic_ball"}


def test_a_shortened_learning_grid_through_the_sweep_equals_in_memory_runs(tmp_path):
    """Two Segmentation configurations, 420 walk steps, seed 1: the same accuracy curves."""
    plan = only(
        learning_grid.plan("segmentation", 1, ("logreg",), {"duration": 420.0}),
        lambda r: r.point in (0, 36),
    )
    result = run_sweep(plan, out=tmp_path, backend=ProcessPool(1))
    directories = [result.directory / SWEEP_RUNS / r.run_id for r in plan.runs]
    reduced = experiments.reduce_runs(
        directories, lambda d: learning_grid.reduce_run("segmentation", d)
    )
    expected = pd.concat(
        [curves_from_tables(run_in_memory(r.scenario)[1], r.scenario) for r in plan.runs],
        ignore_index=True,
    )
    assert_frame_equal(reduced, expected, check_exact=True)
    assert set(reduced["algorithm"]) == {"dp-sgd-1", "sgd"}


def test_an_experiment_with_a_failed_run_writes_no_table_and_the_rerun_retries_it(tmp_path, capsys):
    isolated = {"topology": {"kind": "random_geometric", "radius": 0.01}}
    points = [SweepPoint({}, 1, "connected"), SweepPoint(isolated, 1, "isolated nodes")]
    base = dola_experiments.experiment_base("epsilon") | {"duration": 3.0}
    plan = plan_points(base, points, base_dir=REPO)
    runner = experiments.SweepRunner(out=tmp_path, jobs=1)
    results = tmp_path / "dola-broken.parquet"

    def run() -> int:
        return experiments.run_experiments(
            ["broken"], runner,
            plan=lambda name: plan, reduce=dola_experiments.reduce_run,
            results=lambda name: results,
        )  # fmt: skip

    assert run() == 1 and not results.exists()
    err = capsys.readouterr().err
    assert f"run 1 ({plan.runs[1].run_id}) failed" in err and "not written" in err
    assert run() == 1  # the failed run is tried again; the complete one is kept
    assert "0 ran, 1 were already complete, 1 failed" in capsys.readouterr().out


def test_a_failed_run_of_a_plan_holding_some_of_its_runs_is_recorded(tmp_path, capsys):
    """A plan narrowed to some runs (as ``only`` does) keeps their run numbers; a failure of
    one of them is recorded under its number, not looked up by position."""
    isolated = {"topology": {"kind": "random_geometric", "radius": 0.01}}
    points = [SweepPoint({}, 1, "a"), SweepPoint({}, 2, "b"), SweepPoint(isolated, 1, "broken")]
    base = dola_experiments.experiment_base("epsilon") | {"duration": 3.0}
    plan = only(plan_points(base, points, base_dir=REPO), lambda run: run.run == 2)
    runner = experiments.SweepRunner(out=tmp_path, jobs=1)
    failed = experiments.run_experiments(
        ["broken"], runner, plan=lambda name: plan, reduce=dola_experiments.reduce_run,
        results=lambda name: tmp_path / "broken.parquet",
    )  # fmt: skip
    assert failed == 1
    (record,) = (tmp_path / plan.spec.name / "failures").glob("*.json")
    assert json.loads(record.read_text())["run"] == 2


def test_runs_whose_walk_never_came_back_are_reported_apart(tmp_path, capsys):
    """A run with time without a walk and no restart at all (its first walk died before any
    update existed) is listed apart and left out of its group's mean and interval; a run
    with no walk for a while that restarted stays in."""
    base = {"walk.kill_probability": 0.05, "walk.preset": "authors", "delta_rw": 100.0,
            "delta_extra": 10.0, "time_several": 0.1, "progress": 0.9}  # fmt: skip
    rows = [
        {**base, "run_id": "a", "seed": 1, "mean_walks": 1.1, "time_none": 0.01,
         "restarts_per_hour": 44.0},
        {**base, "run_id": "b", "seed": 2, "mean_walks": 1.12, "time_none": 0.0,
         "restarts_per_hour": 47.0},
        {**base, "run_id": "c", "seed": 3, "mean_walks": 1e-6, "time_none": 0.99994,
         "restarts_per_hour": 0.0},
    ]  # fmt: skip
    table = tmp_path / "runs.parquet"
    pd.DataFrame(rows).to_parquet(table)
    assert walk_grid.never_recovered(pd.DataFrame(rows)).tolist() == [False, False, True]
    assert walk_grid.main(["--runs", str(table)]) == 0
    out = capsys.readouterr().out
    assert "| 100 | 10 | 0.05 | authors | 2 | 1.110 ± 0.127 |" in out
    assert "45.5 ± 19.1" in out  # the mean of 44 and 47 with its t interval, without seed 3
    assert "Left out of the means" in out and "seed 3: no walk 99.994% of the time" in out
    assert "seed 1:" not in out and "seed 2:" not in out


def test_the_java_rows_summary_compares_each_mode_with_the_java_figures(tmp_path, capsys):
    """The per-configuration means and standard errors, and each difference from the Java
    figures in standard errors of the difference; a figure more than two of them
    away is named (walk_java_rows.py)."""
    base = {"delta_rw": 100.0, "delta_extra": 10.0, "kill": 0.0, "killed": 0.0,
            "max_steps": 358.0, "mean_walks": 1.4, "time_none": 0.0}  # fmt: skip
    rows = [  # exact mode restarts 100/h more than rounds mode
        {**base, "run_id": f"{mode}{seed}", "seed": seed, "mode": mode, "walks": walks,
         "restarts": restarts + extra, "drops": restarts + extra - 1}
        for seed, walks, restarts in ((1, 1.44, 150.0), (2, 1.46, 160.0))
        for mode, extra in (("rounds", 0.0), ("exact", 100.0))
    ]  # fmt: skip
    # a run whose first walk died at once: reported apart, out of the means
    rows.append({**base, "run_id": "dead", "seed": 9, "mode": "rounds", "walks": 0.0001,
                 "restarts": 0.0, "drops": 0.0, "time_none": 0.9999})  # fmt: skip
    table = tmp_path / "runs.parquet"
    pd.DataFrame(rows).to_parquet(table)
    assert walk_java_rows.main(["--runs", str(table)]) == 0
    out = capsys.readouterr().out
    assert "- 100Δ / 10Δ / 0%, rounds, seed 9: no walk 99.990% of the time" in out
    assert "| 100Δ / 10Δ / 0% | Java (authors' code) | 5 | 1.450 ± 0.015 | 157.0 ± 5.0 |" in out
    # rounds: restarts 155 ± 5 against 157 ± 5: z = -2 / √50 = -0.3
    assert "| | netsim, rounds | 2 | 1.450 ± 0.010 | 155.0 ± 5.0 | 154.0 ± 5.0 | +0.0, -0.3" in out
    assert "| +0.0, -0.3, -0.3 | 358 ± 0 |" in out  # and the largest step count
    assert "Outside two standard errors of the Java code's: 100Δ / 10Δ / 0% exact restarts" in out
    assert "rounds" not in out.split("Outside")[1].split("\n")[0]


def test_the_java_rows_refuse_a_table_they_did_not_write(tmp_path, capsys):
    table = tmp_path / "other.parquet"
    pd.DataFrame({"seed": [1], "walks": [1.0]}).to_parquet(table)
    assert walk_java_rows.main(["--runs", str(table)]) == 1
    assert "not a per-run table of this script: no mode" in capsys.readouterr().err


def test_the_java_rows_refuse_runs_of_the_synthetic_fallback_trace(tmp_path):
    """The Java figures come from the STUNner trace: a run that replayed the shipped synthetic
    trace instead (the research-only file absent) is refused, with the run named."""
    from netsim.api import run
    from netsim.errors import NetsimError

    synthetic = str(REPO / "traces" / "stunner-synthetic.csv")
    scenario = {
        "seed": 1, "nodes": 30, "duration": "30s", "topology": {"kind": "k_out", "k": 5},
        "churn": {"kind": "stunner", "path": str(tmp_path / "absent.txt"),
                  "fallback": {"kind": "trace", "path": synthetic}},
        "gossip": {"period": "1s", "mode": "rounds"},
        "walk": {"kind": "service", "preset": "authors", "transfer_time": "1s", "timeout": "11s"},
    }  # fmt: skip
    outcome = run(scenario, out=tmp_path / "runs")
    with pytest.raises(NetsimError, match="synthetic fallback trace"):
        walk_java_rows.run_metrics(outcome.directory)


def test_the_walk_grid_marks_runs_of_the_fallback_trace(tmp_path):
    """walk_grid.py records per run whether it replayed the STUNner replay's synthetic
    fallback (the research-only file absent) or not (here: a trace replayed directly)."""
    from netsim.api import run

    synthetic = str(REPO / "traces" / "stunner-synthetic.csv")
    base = {
        "seed": 1, "nodes": 30, "duration": "30s", "topology": {"kind": "k_out", "k": 5},
        "gossip": {"period": "1s", "mode": "rounds"},
        "walk": {"kind": "service", "transfer_time": "1s", "timeout": "11s"},
    }  # fmt: skip
    fallback = {"kind": "stunner", "path": str(tmp_path / "absent.txt"),
                "fallback": {"kind": "trace", "path": synthetic}}  # fmt: skip
    replayed = run({**base, "churn": fallback}, out=tmp_path / "fallback")
    direct = run({**base, "churn": {"kind": "trace", "path": synthetic}}, out=tmp_path / "direct")
    assert walk_grid.run_metrics(replayed.directory)["fallback_trace"] is True
    assert walk_grid.run_metrics(direct.directory)["fallback_trace"] is False


def test_the_walk_grid_keeps_the_readme_from_runs_of_the_fallback_trace(
    tmp_path, capsys, monkeypatch
):
    """--readme refuses a per-run table with a run of the synthetic fallback trace, naming
    how many: analysis/README.md states §5.3's figures on the STUNner trace."""
    written = []
    monkeypatch.setattr(walk_grid, "write_readme_tables", written.append)
    row = {"walk.kill_probability": 0.0, "walk.preset": "paper", "delta_rw": 1.0,
           "delta_extra": 10.0, "time_several": 0.0, "progress": 0.99, "mean_walks": 1.0,
           "time_none": 0.0, "restarts_per_hour": 2.0}  # fmt: skip
    rows = [{**row, "run_id": f"r{seed}", "seed": seed, "fallback_trace": seed == 2}
            for seed in (1, 2, 3)]  # fmt: skip
    table = tmp_path / "walk-paper-grid.parquet"  # a sweep whose tables the README shows
    pd.DataFrame(rows).to_parquet(table)
    assert walk_grid.main(["--runs", str(table), "--readme"]) == 2
    captured = capsys.readouterr()
    assert "1 of 3 runs replayed the synthetic fallback trace" in captured.out
    assert "walk-paper-grid: 1 of 3 runs replayed the synthetic fallback trace" in captured.err
    assert written == []
    pd.DataFrame([{**r, "fallback_trace": False} for r in rows]).to_parquet(table)
    assert walk_grid.main(["--runs", str(table), "--readme"]) == 0
    assert len(written) == 1
