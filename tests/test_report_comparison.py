"""``netsim report`` over runs of different learning algorithms: legend labels from the run names
or the scenario keys that differ, one accuracy figure across the walk's and gossip learning's
tables with the yardsticks, the final test accuracy in the summary table, and time axes in the
runs' own unit."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from netsim.analysis.collect import complete_run_directories, load_sweep, run_name
from netsim.analysis.labels import differing_keys, key_label, series_labels
from netsim.analysis.learning import (
    CENTRAL_DP_COLUMN,
    COMPARISON_FIGURE,
    YARDSTICKS,
    final_accuracy,
    final_gossip_accuracy,
    final_walk_accuracy,
)
from netsim.analysis.report import FINAL_ACCURACY_ROW, baseline_lines, point_labels, write_report
from netsim.errors import RunDirectoryError
from netsim.plotting import time_unit
from netsim.scenario.loader import validate_scenario
from netsim.scenario.runner import run_scenario

# --- labels from the keys that differ -----------------------------------------------------------

BASE = {
    "name": "same",
    "description": "one",
    "nodes": 60,
    "duration": 120.0,
    "topology": {"kind": "ring", "k": 2},
    "learning": {"dataset": {"name": "breast_cancer"}, "epsilon": 1.0, "algorithm": "dp-sgd-1"},
    "walk": {"step_time": 1.0, "kind": "ideal", "agent": {"kind": "sgd"}},
    "gossip_learning": None,
}


def changed(**sections) -> dict:
    """``BASE`` with sections (or keys of sections) replaced."""
    scenario = json.loads(json.dumps(BASE))
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(scenario.get(key), dict):
            scenario[key].update(value)
        else:
            scenario[key] = value
    return scenario


def test_two_runs_differing_in_one_key_are_named_by_it():
    other = changed(learning={"epsilon": 0.1}, description="two")  # description: not a key
    assert series_labels(["same", "same"], [BASE, other]) == [
        "learning.epsilon=1",
        "learning.epsilon=0.1",
    ]


def test_two_runs_differing_in_two_keys_are_named_by_both_in_scenario_order():
    other = changed(nodes=80, learning={"algorithm": "dp-sgd-5"})
    assert series_labels(["same", "same"], [BASE, other]) == [
        "nodes=60, learning.algorithm=dp-sgd-1",
        "nodes=80, learning.algorithm=dp-sgd-5",
    ]


def test_a_section_only_one_run_has_is_named_by_one_key_of_it():
    gossip = changed(walk=None, gossip_learning={"period": 1.0})
    assert series_labels(["same", "same"], [BASE, gossip]) == [
        "walk.kind=ideal",
        "gossip_learning.period=1",
    ]
    # another kind of component: its kind alone, not the settings that come with it
    service = changed(walk={"kind": "service", "transfer_time": 1.0, "timeout": 3.0})
    assert differing_keys([BASE, service]) == [[("walk.kind", "ideal")], [("walk.kind", "service")]]


def test_runs_with_different_names_are_named_by_them_and_never_runs():
    other = changed(learning={"epsilon": 0.1})
    assert series_labels(["walk", "gossip"], [BASE, other]) == ["walk", "gossip"]
    # a name shared by some: the name, then what differs
    third = changed(learning={"epsilon": 0.5})
    assert series_labels(["a", "a", "b"], [BASE, other, third]) == [
        "a: learning.epsilon=1",
        "a: learning.epsilon=0.1",
        "b: learning.epsilon=0.5",
    ]
    # nothing but descriptive keys differ: the name, numbered to keep the lines apart
    assert series_labels(["x", "x"], [BASE, changed(description="two")]) == ["x (1)", "x (2)"]


def test_a_long_difference_is_cut_after_three_keys():
    pairs = [(f"k{i}", i) for i in range(5)]
    assert key_label(pairs) == "k0=0, k1=1, k2=2 (+2 more)"


# --- time axes in the runs' unit -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("duration", "unit"),
    [
        (1.0, "seconds"),
        (60.0, "seconds"),
        (120.0, "seconds"),
        (121.0, "minutes"),
        (3600.0, "minutes"),
        (7200.0, "minutes"),
        (7201.0, "hours"),
        (41400.0, "hours"),
        (2 * 86400.0, "hours"),
        (2 * 86400.0 + 1, "days"),
    ],
)
def test_the_time_unit_follows_the_duration(duration, unit):
    chosen = time_unit(duration)
    assert chosen.name == unit
    assert chosen.seconds == {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400}[unit]
    assert chosen.label() == f"time ({unit})"


# --- final accuracy -------------------------------------------------------------------------------


def test_the_final_accuracy_of_a_walk_is_the_mean_of_its_last_evaluation():
    accuracy = pd.DataFrame(
        {
            "time": [1.0, 2.0, 3.0, 3.5, 4.0],
            "walk": [0, 0, 1, 0, 2],
            "visits": [10, 20, 30, 30, 20],
            "updates": [10, 20, 30, 30, 20],
            "accuracy": [0.1, 0.2, 0.6, 0.8, 0.9],
        }
    )
    assert final_walk_accuracy(accuracy) == pytest.approx(0.7)  # walks 1 and 0 at 30 visits
    spread = pd.DataFrame({"time": [20.0, 10.0], "accuracy_mean": [0.55, 0.5]})
    assert final_gossip_accuracy(spread) == 0.55  # the latest, whatever the row order
    # a gossip-learning run has both tables: its models' mean, not one model's
    both = {"accuracy": accuracy, "gossip_learning_accuracy": spread}
    assert final_accuracy(both) == 0.55
    assert final_accuracy({"accuracy": accuracy}) == pytest.approx(0.7)
    assert final_accuracy({"accuracy": accuracy.iloc[:0]}) is None
    assert final_accuracy({}) is None


def test_the_central_dp_yardstick_is_drawn_when_the_runs_record_it():
    rows = [("majority_accuracy", 0.6), ("centralised_accuracy", 0.9)]
    long = pd.DataFrame(
        [(0, "learning_summary", metric, value) for metric, value in rows],
        columns=["run", "table", "metric", "value"],
    )
    assert [line.label for line in baseline_lines(long, YARDSTICKS)] == [
        "majority class",
        "centralised non-private",
    ]
    with_dp = pd.concat(
        [
            long,
            pd.DataFrame([(0, "learning_summary", CENTRAL_DP_COLUMN, 0.8)], columns=long.columns),
        ]
    )
    lines = baseline_lines(with_dp, YARDSTICKS)
    assert [(line.label, line.value) for line in lines][-1] == ("central DP at the same ε", 0.8)


def comparison_long(gossip_runs: int) -> pd.DataFrame:
    """A collected long table: run 0 an SGD walk evaluated every 7 s for 1,400 s (two walks),
    the next ``gossip_runs`` runs one gossip-learning point sampled every 2 s for 600 s (with
    an ``accuracy`` table of single models too, which the comparison leaves out). Both are long
    series: the figure bins them."""
    rows = []
    for time in range(7, 1401, 7):
        for walk in (0, 1):
            rows.append((0, 0, "accuracy", "accuracy", time, str(walk), 0.5 + 0.01 * walk))
    for run in range(1, 1 + gossip_runs):
        for time in range(2, 601, 2):
            for metric, value in (("accuracy_mean", 0.6), ("accuracy_min", 0.4),
                                  ("accuracy_max", 0.8)):  # fmt: skip
                rows.append((run, 1, "gossip_learning_accuracy", metric, time, "", value))
            rows.append((run, 1, "accuracy", "accuracy", time + 0.5, "-1", 0.1))
    columns = ["run", "point", "table", "metric", "time", "series", "value"]
    long = pd.DataFrame(rows, columns=columns).assign(round=float("nan"))
    return long.assign(run_id=long["run"].astype(str), repetition=0, seed=1)


def test_the_comparison_bins_the_spread_as_its_line_and_drops_it_over_repetitions():
    from netsim.analysis.learning import learning_accuracy_samples
    from netsim.analysis.report import curve_statistics

    curve = COMPARISON_FIGURE.panels[0]
    samples = learning_accuracy_samples(comparison_long(gossip_runs=1))
    assert set(samples.groupby("run")["metric"].unique().map(tuple)) == {
        ("accuracy",),
        ("accuracy", "accuracy_min", "accuracy_max"),
    }
    assert not (samples["value"] == 0.1).any()  # gossip's single-model table is left out
    statistics = curve_statistics(samples, curve)
    assert statistics.binning is not None  # 200 and 300 samples a run
    gossip = statistics.frame[statistics.frame["point"] == 1]
    assert gossip["mean"].tolist() == pytest.approx([0.6] * len(gossip))
    walk = statistics.frame[statistics.frame["point"] == 0]
    assert walk["mean"].tolist() == pytest.approx([0.505] * len(walk))  # mean over walks
    assert statistics.spread is not None
    for bound in statistics.spread:  # binned as the line: the same x
        assert bound["x"].tolist() == gossip["x"].tolist()
    # two runs of the gossip point: no lowest / highest model (a mean of minima is no model's)
    repeated = learning_accuracy_samples(comparison_long(gossip_runs=2))
    assert set(repeated["metric"]) == {"accuracy"}


# --- a walk and gossip learning in one report ----------------------------------------------------


def learning_scenario(**sections) -> dict:
    """A small learning run of one name: an ideal walk's SGD unless ``sections`` say
    otherwise; 60 nodes, two simulated minutes, an evaluation every 10 s."""
    data = {
        "name": "compare",
        "seed": 3,
        "nodes": 60,
        "duration": 120,
        "topology": {"kind": "k_out", "k": 8},
        "walk": {"kind": "ideal", "step_time": 1.0, "agent": {"kind": "sgd"}},
        "learning": {"dataset": {"name": "breast_cancer"}, "evaluate_every": 10},
        "metrics": {"sample_every": 10},
    }
    data.update(sections)
    return {key: value for key, value in data.items() if value is not None}


@pytest.fixture(scope="module")
def walk_and_gossip(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("compare")
    runs = {}
    for label, data in (
        ("walk", learning_scenario()),
        ("gossip", learning_scenario(walk=None, gossip_learning={"period": 1.0})),
        ("walk_eps", learning_scenario(learning={**learning_scenario()["learning"],
                                                  "epsilon": 0.5})),
    ):  # fmt: skip
        scenario = validate_scenario(data, source="<test>", base_dir=None)
        runs[label] = run_scenario(scenario, out=out / label).directory
    return runs


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


def test_one_figure_draws_the_walk_and_gossip_learning_with_the_yardsticks(
    walk_and_gossip, tmp_path, monkeypatch
):
    runs = [walk_and_gossip["walk"], walk_and_gossip["gossip"]]
    figures = report_figures(monkeypatch, runs, tmp_path / "report")
    # in place of the walk's own accuracy figure (and no table figure of its table)
    assert "accuracy_vs_time.png" not in figures and "table_accuracy.png" not in figures
    assert "gossip_learning_accuracy.png" in figures
    (ax,) = figures[COMPARISON_FIGURE.file].axes
    solid = {line.get_label(): line for line in ax.get_lines() if line.get_linestyle() == "-"}
    assert set(solid) == {"walk.kind=ideal", "gossip_learning.period=1"}
    # the walk: its accuracy table, averaged over the models evaluated at each time
    walk = pd.read_parquet(runs[0] / "accuracy.parquet").groupby("time")["accuracy"].mean()
    line = solid["walk.kind=ideal"]
    assert line.get_xdata().tolist() == pytest.approx(walk.index.tolist())  # seconds
    assert line.get_ydata().tolist() == pytest.approx(walk.tolist())
    # gossip learning: the mean over models, with the lowest and highest dotted (one run)
    spread = pd.read_parquet(runs[1] / "gossip_learning_accuracy.parquet")
    line = solid["gossip_learning.period=1"]
    assert line.get_xdata().tolist() == pytest.approx(spread["time"].tolist())
    assert line.get_ydata().tolist() == pytest.approx(spread["accuracy_mean"].tolist())
    dotted = [line.get_ydata().tolist() for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert dotted == [
        pytest.approx(spread["accuracy_min"].tolist()),
        pytest.approx(spread["accuracy_max"].tolist()),
    ]
    # the yardsticks, dashed, at learning_summary's values
    summary = pd.read_parquet(runs[0] / "learning_summary.parquet").iloc[0]
    dashed = {
        line.get_label().split(" (")[0]: float(line.get_ydata()[0])
        for line in ax.get_lines()
        if line.get_linestyle() == "--"
    }
    assert dashed == {
        "majority class": pytest.approx(summary["majority_accuracy"]),
        "centralised non-private": pytest.approx(summary["centralised_accuracy"]),
        # at the run's own guarantee: the test scenario states no δ
        "central DP at ε = 1, δ = 0": pytest.approx(summary["central_dp_accuracy"]),
    }
    legend = [text.get_text() for legend in ax.figure.legends for text in legend.get_texts()]
    assert "walk.kind=ideal" in legend and not any("runs" in text for text in legend)
    # a two-minute run: seconds on every time axis
    assert ax.get_xlabel() == "time (seconds)"
    assert figures["online_nodes.png"].axes[-1].get_xlabel() == "time (seconds)"


def test_runs_of_one_algorithm_get_no_comparison_figure(walk_and_gossip, tmp_path):
    runs = [walk_and_gossip["walk"], walk_and_gossip["walk_eps"]]
    report = write_report(runs, tmp_path / "report")
    assert not (report.parent / COMPARISON_FIGURE.file).exists()
    assert (report.parent / "accuracy_vs_time.png").is_file()
    markdown = report.read_text(encoding="utf-8")
    header = "| metric | point 0: learning.epsilon=1 | point 1: learning.epsilon=0.5 |"
    assert header in markdown


def summary_row(markdown: str, name: str) -> list[str]:
    line = next(x for x in markdown.splitlines() if x.startswith(f"| {name} |"))
    return [cell.strip() for cell in line.strip("|").split("|")][1:]


def test_the_summary_table_starts_with_the_final_accuracy_beside_the_yardsticks(
    walk_and_gossip, tmp_path
):
    runs = [walk_and_gossip["walk"], walk_and_gossip["gossip"]]
    report = write_report(runs, tmp_path / "report")
    markdown = report.read_text(encoding="utf-8")
    assert markdown.startswith("# Report: compare\n")
    accuracy = pd.read_parquet(runs[0] / "accuracy.parquet")
    last = accuracy[accuracy["visits"] == accuracy["visits"].max()]["accuracy"].mean()
    spread = pd.read_parquet(runs[1] / "gossip_learning_accuracy.parquet")
    final = spread.loc[spread["time"].idxmax(), "accuracy_mean"]
    assert summary_row(markdown, FINAL_ACCURACY_ROW) == [f"{last:.4g}", f"{final:.4g}"]
    rows = [line.split(" |")[0][2:] for line in markdown.split("## Summary metrics")[1]
            .split("## Figures")[0].splitlines() if line.startswith("| ")][2:]  # fmt: skip
    assert rows[:3] == [
        FINAL_ACCURACY_ROW,
        "learning_summary.majority_accuracy",
        "learning_summary.centralised_accuracy",
    ]
    assert "| point 0: walk.kind=ideal | point 1: gossip_learning.period=1 |" in markdown


def test_netsim_report_compares_several_directories(walk_and_gossip, tmp_path, capsys):
    from netsim.cli import main

    walk, gossip = walk_and_gossip["walk"], walk_and_gossip["gossip"]
    assert main(["report", str(walk), str(gossip)]) == 2
    assert "several directories need --out" in capsys.readouterr().err
    # the folders the runs are in stand for their runs
    assert main(["report", str(walk.parent), str(gossip.parent), "--out", str(tmp_path)]) == 0
    assert (tmp_path / COMPARISON_FIGURE.file).is_file()
    assert complete_run_directories(walk.parent) == [walk]
    with pytest.raises(RunDirectoryError, match="holds no complete run directory"):
        complete_run_directories(tmp_path)


def test_a_named_run_goes_by_its_name(walk_and_gossip):
    manifest = json.loads((walk_and_gossip["walk"] / "manifest.json").read_text())
    assert run_name(manifest) == "compare"
    assert run_name({**manifest, "run_id": "my-walk"}) == "my-walk"
    source = load_sweep([walk_and_gossip["walk"], walk_and_gossip["walk_eps"]])
    assert source.name == "compare" and set(point_labels(source).values()) == {
        "learning.epsilon=1",
        "learning.epsilon=0.5",
    }


# --- the how-to's pair of scenarios --------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
HOWTO = REPO / "docs" / "howto" / "compare-algorithms.md"


def test_the_how_to_compares_two_shipped_scenarios_that_differ_only_in_what_learns():
    from netsim.scenario.loader import load_scenario

    text = HOWTO.read_text(encoding="utf-8")
    files = ["compare-walk-service.yaml", "compare-gossip-learning.yaml"]
    for file in files:
        assert f"netsim run scenarios/learning/{file}" in text
    assert 'netsim report "$A" "$B" --out' in text
    assert (
        "](compare-algorithms.png)" in text and (HOWTO.parent / "compare-algorithms.png").is_file()
    )
    assert "compare-algorithms" in (HOWTO.parent / "index.md").read_text(encoding="utf-8")
    walk, gossip = (load_scenario(REPO / "scenarios" / "learning" / f) for f in files)
    assert walk.walk is not None and walk.gossip_learning is None
    assert gossip.gossip_learning is not None and gossip.walk is None
    # the same data set, privacy budget, churn, network and duration
    assert walk.learning == gossip.learning
    assert walk.churn == gossip.churn and walk.nodes == gossip.nodes == 4140
    assert walk.duration == gossip.duration and walk.seed == gossip.seed
    assert walk.topology == gossip.topology and walk.links == gossip.links
