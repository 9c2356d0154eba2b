"""Figures are drawn from run directories."""

import struct

import pandas as pd
import pytest

from netsim.analysis.figures import walk_figure
from netsim.errors import RunDirectoryError
from netsim.scenario.loader import validate_scenario
from netsim.scenario.runner import run_scenario


def png_size(path):
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", header[16:24])


def walk_run(tmp_path, **walk):
    data = {
        "name": "fig",
        "seed": 2,
        "nodes": 40,
        "duration": "2min",
        "topology": {"kind": "k_out", "k": 8},
        "gossip": {"period": "100ms"},
        "walk": {
            "kind": "service",
            "transfer_time": "1s",
            "timeout": "3s",
            "sample_every": "5s",
            **walk,
        },
    }
    scenario = validate_scenario(data, source="<test>", base_dir=None)
    return run_scenario(scenario, out=tmp_path / "runs").directory


def test_walk_figure_draws_one_panel_per_run(tmp_path):
    runs = [walk_run(tmp_path), walk_run(tmp_path, kill_probability=0.05)]
    out = walk_figure(runs, tmp_path / "fig2.png", columns=2)
    width, height = png_size(out)
    one = walk_figure(runs[:1], tmp_path / "one.png")
    assert width > 1.5 * png_size(one)[0] and height == png_size(one)[1]
    assert not list(tmp_path.glob(".*.tmp*"))


def test_walk_figure_rejects_a_run_without_a_walk(tmp_path):
    data = {
        "name": "plain",
        "seed": 1,
        "nodes": 10,
        "duration": "1min",
        "topology": {"kind": "ring"},
    }
    run = run_scenario(validate_scenario(data, source="<t>", base_dir=None), out=tmp_path).directory
    with pytest.raises(RunDirectoryError, match="not a run of the random walk service"):
        walk_figure([run], tmp_path / "x.png")


def learning_run(tmp_path, seed, **learning):
    data = {
        "name": "fig-learning",
        "seed": seed,
        "nodes": 120,
        "duration": 600,
        "topology": {"kind": "ring", "k": 2},
        "walk": {"kind": "ideal", "agent": {"kind": "sgd"}},
        "learning": {"dataset": {"name": "breast_cancer"}, "evaluate_every": 40, **learning},
    }
    scenario = validate_scenario(data, source="<test>", base_dir=None)
    return run_scenario(scenario, out=tmp_path / "runs").directory


def test_learning_figure_averages_runs_per_configuration(tmp_path):
    from netsim.analysis.learning import curves_from_run, learning_figure

    runs = [
        learning_run(tmp_path, seed, noise=noise) for seed in (1, 2) for noise in ("l1", "l2_paper")
    ]
    curves = pd.concat([curves_from_run(run) for run in runs], ignore_index=True)
    assert set(curves["noise"]) == {"l1", "l2_paper"} and set(curves["seed"]) == {1, 2}
    assert (curves["records"] == 120).all() and curves["visits"].max() == 560
    assert curves["accuracy"].between(0, 1).all()
    out = learning_figure(curves, tmp_path / "learning.png", title="test")
    width, height = png_size(out)
    assert width > 500 and height > 300
    with pytest.raises(RunDirectoryError, match="no accuracy curves"):
        learning_figure(curves.iloc[:0], tmp_path / "empty.png", title="empty")
    assert not (tmp_path / "empty.png").exists()


def dola_run(tmp_path, seed: int, **dola):
    data = {
        "name": f"dola-{seed}",
        "seed": seed,
        "nodes": 8,
        "duration": 60,
        "topology": {"kind": "ring", "k": 2},
        "dola": {
            "data": {"name": "synthetic_ball", "options": {"examples": 2000, "features": 4}},
            "regret_checkpoints": 5,
            **dola,
        },
    }
    scenario = validate_scenario(data, source="<t>", base_dir=None)
    return run_scenario(scenario, out=tmp_path).directory


def test_dola_curves_and_figures_from_run_directories(tmp_path):
    from netsim.analysis.dola_figures import curve_figure, dola_curves_from_run, sparsity_figure

    runs = [dola_run(tmp_path, seed, epsilon=eps) for seed in (1, 2) for eps in (0.1, 1.0)]
    curves = pd.concat([dola_curves_from_run(run) for run in runs], ignore_index=True)
    assert set(curves["epsilon"]) == {0.1, 1.0} and set(curves["seed"]) == {1, 2}
    regret = curves.dropna(subset=["average_regret"])
    assert regret.groupby(["epsilon", "seed"])["round"].max().eq(60).all()
    assert (curves.dropna(subset=["consensus"])["round"] % 10 == 0).all()
    out = curve_figure(curves, tmp_path / "regret.png", metric="average_regret", title="t")
    width, height = png_size(out)
    assert width > 500 and height > 300
    points = pd.DataFrame(
        {"topology": ["a", "a", "b"], "sparsity_rho": [0.0, 1.0, 0.0], "seed": [1, 1, 1],
         "sparsity": [0.0, 0.5, 0.0], "accuracy": [0.8, 0.85, 0.7]}
    )  # fmt: skip
    assert png_size(sparsity_figure(points, tmp_path / "s.png", title="t"))[0] > 500
    with pytest.raises(RunDirectoryError, match="no consensus values"):
        curve_figure(curves.iloc[:0], tmp_path / "none.png", metric="consensus", title="t")


def report_figures(monkeypatch, path, out, **options):
    """Write the report of ``path`` and keep its figures open: file name -> Figure."""
    import netsim.analysis.report as report
    import netsim.analysis.report.distance
    import netsim.analysis.report.drawing
    import netsim.analysis.report.privacy  # noqa: F401  (the modules that save figures)

    drawn = {}

    def keep(fig, file, **_options):
        drawn[file.name] = fig
        return file

    for module in (report.drawing, report.privacy, report.distance):
        monkeypatch.setattr(module, "save_figure", keep)
    report.write_report(path, out, **options)
    return drawn


def dashed_lines(ax):
    """The horizontal dashed lines of ``ax`` as {legend label: y}."""
    return {
        line.get_label(): float(line.get_ydata()[0])
        for line in ax.get_lines()
        if line.get_linestyle() == "--" and len(set(line.get_ydata())) == 1
    }


def test_the_accuracy_figure_draws_the_baselines_dashed(tmp_path, monkeypatch):
    """Principle 9: the report's accuracy figure draws the runs' majority-class and
    centralised accuracy (learning_summary) as dashed horizontal lines named in the legend."""
    from netsim.analysis.runs import load_run

    runs = [learning_run(tmp_path, seed) for seed in (1, 2)]
    figures = report_figures(monkeypatch, runs, tmp_path / "report")
    (ax,) = figures["accuracy_vs_time.png"].axes
    summary = load_run(runs[0], parameters=False)["learning_summary"].iloc[0]
    lines = dashed_lines(ax)
    majority = summary["majority_accuracy"]
    centralised = summary["centralised_accuracy"]
    central_dp = summary["central_dp_accuracy"]
    assert lines == {
        f"majority class ({majority:.3f})": pytest.approx(majority),
        f"centralised non-private ({centralised:.3f})": pytest.approx(centralised),
        f"central DP at the run's (ε, δ) ({central_dp:.3f})": pytest.approx(central_dp),
    }
    low, high = ax.get_ylim()
    assert low <= majority <= high and low <= centralised <= high
    legend = [text.get_text() for legend in ax.figure.legends for text in legend.get_texts()]
    assert f"majority class ({majority:.3f})" in legend
    assert ax.get_ylabel() == "test accuracy (fraction correct)"
    assert ax.get_xlabel() == "time (minutes)"  # a 10-minute run


def test_the_gossip_learning_figure_draws_the_spread_and_the_baselines(tmp_path, monkeypatch):
    data = {
        "name": "fig-gossip",
        "seed": 1,
        "nodes": 60,
        "duration": 20,
        "topology": {"kind": "k_out", "k": 8},
        "gossip_learning": {"period": 1.0},
        "learning": {"dataset": {"name": "breast_cancer"}, "algorithm": "sgd"},
        "metrics": {"sample_every": 2},
    }
    run = run_scenario(validate_scenario(data, source="<t>", base_dir=None), out=tmp_path)
    figures = report_figures(monkeypatch, run.directory, tmp_path / "report")
    (ax,) = figures["gossip_learning_accuracy.png"].axes
    labels = sorted(label.split(" (")[0] for label in dashed_lines(ax))
    assert labels == ["centralised non-private", "majority class"]
    dotted = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert len(dotted) == 2  # the lowest and the highest model
    spread = pd.read_parquet(run.directory / "gossip_learning_accuracy.parquet")
    assert dotted[0].get_ydata().tolist() == pytest.approx(spread["accuracy_min"].tolist())
    assert dotted[1].get_ydata().tolist() == pytest.approx(spread["accuracy_max"].tolist())


def test_baselines_of_several_runs_are_their_mean_with_the_range():
    from netsim.analysis.report import baseline_lines

    long = pd.DataFrame(
        {
            "run": [0, 1, 0, 1],
            "table": ["learning_summary"] * 4,
            "metric": ["majority_accuracy"] * 2 + ["other"] * 2,
            "value": [0.6, 0.7, 1.0, 1.0],
        }
    )
    (line,) = baseline_lines(
        long,
        [("learning_summary", "majority_accuracy", "majority"), ("absent", "x", "gone")],
    )
    assert line.value == pytest.approx(0.65) and (line.low, line.high, line.runs) == (0.6, 0.7, 2)
    assert line.text() == "majority (mean of 2 runs 0.650, 0.600–0.700)"


def test_learning_figure_draws_each_data_sets_baselines_dashed(tmp_path, monkeypatch):
    """The analysis figures (Fig. 4-7): each panel has its data set's majority-class and
    centralised accuracy as dashed lines, from the runs' learning_summary."""
    import netsim.analysis.learning as learning
    from netsim.analysis.runs import load_run

    run = learning_run(tmp_path, 1)
    curves = learning.curves_from_run(run)
    summary = load_run(run, parameters=False)["learning_summary"].iloc[0]
    assert (curves["majority_accuracy"] == summary["majority_accuracy"]).all()
    assert (curves["centralised_accuracy"] == summary["centralised_accuracy"]).all()
    assert learning.run_baselines(run) == (
        summary["majority_accuracy"],
        summary["centralised_accuracy"],
    )
    drawn = []
    monkeypatch.setattr(learning, "save_figure", lambda fig, out: drawn.append(fig) or out)
    learning.learning_figure(curves, tmp_path / "fig.png", title="t")
    (ax,) = [ax for ax in drawn[0].axes if ax.get_visible()]
    assert dashed_lines(ax) == {
        "majority class": pytest.approx(summary["majority_accuracy"]),
        "centralised non-private": pytest.approx(summary["centralised_accuracy"]),
    }
    # results collected before the runs recorded them: computed from the run's scenario
    old = curves.drop(columns=["majority_accuracy", "centralised_accuracy"])
    learning.learning_figure(old, tmp_path / "old.png", title="t")
    (ax,) = [ax for ax in drawn[1].axes if ax.get_visible()]
    assert dashed_lines(ax) == {}  # nothing to draw from
    scenario = learning.load_run_scenario(run)
    expected = learning.scenario_baselines(scenario)
    assert (expected.majority, expected.centralised) == (
        summary["majority_accuracy"],
        summary["centralised_accuracy"],
    )


def test_a_curve_on_an_axis_the_report_cannot_index_is_refused_where_it_is_declared():
    """A figure whose curve was drawn against a column that is not the table's time or round
    (or the grid point) stopped ``netsim report`` with pandas' KeyError traceback."""
    from netsim.component import Curve

    with pytest.raises(ValueError, match="axis 'distance' is not one of time, round, point"):
        Curve("privacy_pairs", "epsilon", "distance", "ε")
    assert Curve("samples", "online", "time", "online nodes").axis == "time"
