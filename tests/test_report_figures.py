"""Figures a paper can use (``netsim.analysis.report.comparison`` and ``.distance``): the
comparison of learning runs states its privacy setting and data in a caption line, draws seeds
as a band from the lowest to the highest seed, takes simulated time, passes over the data or
messages as its x axis, and draws the central-DP yardstick at each run's own guarantee (δ = 0
for K-norm noise, whatever δ the scenario states); privacy per observer against distance draws
the worst pair and quantiles, exact figures and upper bounds in different styles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgb

from netsim.analysis.report.axes import X_LABELS, x_axes
from netsim.analysis.report.comparison import figure_file
from netsim.analysis.report.distance import (
    BOUND,
    EXACT,
    PAIRWISE_FIGURE,
    distance_statistics,
    draw_distance_figure,
    pair_kinds,
)
from netsim.analysis.report.setting import Setting, run_setting, setting_lines
from netsim.analysis.report.styles import LineStyle
from netsim.errors import ReportError
from netsim.learning.central_dp import central_dp_baseline
from netsim.learning.sgd_agent import learning_data
from netsim.scenario.loader import validate_scenario
from netsim.scenario.runner import run_scenario

LEARNING = {
    "dataset": {"name": "breast_cancer"},
    "evaluate_every": 10,
    "noise": "k_norm_l2",
    "epsilon": 1.0,
    "delta": 1e-5,  # stated; K-norm noise is ε-DP, so the runs' guarantee holds at δ = 0
}


@pytest.fixture(autouse=True)
def close_figures():
    """The figures a test keeps open (:func:`report_figures`) are closed after it."""
    yield
    from netsim.plotting import pyplot

    pyplot().close("all")


def scenario(seed: int, **sections) -> dict:
    """A small learning run: an ideal walk's DP-SGD with K-norm noise unless ``sections``
    say otherwise; 60 nodes (one breast-cancer record each), two simulated minutes."""
    data = {
        "name": "paper",
        "seed": seed,
        "nodes": 60,
        "duration": 120,
        "topology": {"kind": "k_out", "k": 8},
        "walk": {"kind": "ideal", "step_time": 1.0, "agent": {"kind": "sgd"}},
        "learning": LEARNING,
        "metrics": {"sample_every": 10},
    }
    data.update(sections)
    return {key: value for key, value in data.items() if value is not None}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, list[Path]]:
    """Two seeds of a walk and of gossip learning, same learning section."""
    out = tmp_path_factory.mktemp("paper")
    found: dict[str, list[Path]] = {"walk": [], "gossip": []}
    for seed in (1, 2):
        for kind, data in (
            ("walk", scenario(seed)),
            ("gossip", scenario(seed, walk=None, gossip_learning={"period": 2.0})),
        ):
            checked = validate_scenario(data, source="<test>", base_dir=None)
            found[kind].append(run_scenario(checked, out=out / kind).directory)
    return found


def report_figures(monkeypatch, path, out, **options) -> dict:
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


def solid_lines(ax) -> dict:
    return {line.get_label(): line for line in ax.get_lines() if line.get_linestyle() == "-"}


# --- the caption line ---------------------------------------------------------------------------


def test_the_comparison_states_its_privacy_setting_and_data(runs, tmp_path, monkeypatch):
    figures = report_figures(monkeypatch, [runs["walk"][0], runs["gossip"][0]], tmp_path / "report")
    (ax,) = figures[figure_file("time")].axes
    title = ax.get_title()
    caption = title.splitlines()[1]
    expected = ("ε = 1 per record", "δ = 0", "ε-DP", "stated δ = 1e-05", "k_norm_l2 noise",
                "accounting basic", "data breast_cancer", "N = 60 records on 60 nodes")  # fmt: skip
    for text in expected:
        assert text in caption, text
    markdown = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert f"Privacy setting and data: {caption}." in markdown


def test_differing_settings_get_a_caption_line_each():
    base = Setting(1.0, 0.0, 0.0, "k_norm_l2", "epsilon-DP", "basic", "basic", "record",
                   "spambase", 4140, 4140)  # fmt: skip
    other = Setting(8.0, 1e-5, 1e-5, "gaussian", "(epsilon,delta)-DP", "rdp", "rdp", "record",
                    "spambase", 4140, 4140)  # fmt: skip
    assert setting_lines({0: base, 1: base}, {0: "a", 1: "b"}) == [base.text()]
    lines = setting_lines({0: base, 1: other}, {0: "a", 1: "b"})
    assert lines == [
        "a: ε = 1 per record, δ = 0 (ε-DP), k_norm_l2 noise, accounting basic",
        "b: ε = 8 per record, δ = 1e-05 ((ε, δ)-DP), gaussian noise, accounting rdp",
        "data spambase, N = 4,140 records on 4,140 nodes",
    ]


# --- seeds as a band ----------------------------------------------------------------------------


def test_two_seeds_are_drawn_as_a_band_from_the_lowest_to_the_highest(runs, tmp_path, monkeypatch):
    figures = report_figures(monkeypatch, [*runs["walk"], *runs["gossip"]], tmp_path / "report")
    (ax,) = figures[figure_file("time")].axes
    assert "mean over 2 seeds per line; band: lowest to highest seed" in ax.get_title()
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 2  # one per line (point), none drawn run by run
    assert len(solid_lines(ax)) == 2
    # gossip learning's band: its two seeds' accuracy_mean at each sample, lowest to highest
    seeds = [pd.read_parquet(r / "gossip_learning_accuracy.parquet") for r in runs["gossip"]]
    both = pd.concat(seeds).groupby("time")["accuracy_mean"]
    gossip = solid_lines(ax)["gossip_learning.period=2"]
    assert gossip.get_ydata().tolist() == pytest.approx(both.mean().tolist())
    colour = to_rgb(gossip.get_color())
    (band,) = [b for b in bands if tuple(b.get_facecolor()[0][:3]) == pytest.approx(colour)]
    vertices = band.get_paths()[0].vertices
    for time, low, high in zip(both.min().index, both.min(), both.max(), strict=True):
        at = vertices[np.isclose(vertices[:, 0], time)][:, 1]
        assert (at.min(), at.max()) == pytest.approx((low, high))


def test_one_seed_draws_no_band_and_says_so(runs, tmp_path, monkeypatch):
    figures = report_figures(monkeypatch, [runs["walk"][0], runs["gossip"][0]], tmp_path / "report")
    (ax,) = figures[figure_file("time")].axes
    assert "one seed per line: no band" in ax.get_title()
    assert not [c for c in ax.collections if isinstance(c, PolyCollection)]


# --- x axes -------------------------------------------------------------------------------------


def test_each_x_axis_gets_its_figure_and_label(runs, tmp_path, monkeypatch):
    figures = report_figures(
        monkeypatch, [runs["walk"][0], runs["gossip"][0]], tmp_path / "report",
        x_axis="time,passes,messages",
    )  # fmt: skip
    labels = {axis: figures[figure_file(axis)].axes[0].get_xlabel() for axis in X_LABELS}
    assert figures[figure_file("time")].axes[0].get_xlabel() == "time (seconds)"
    assert labels == {
        "passes": "passes over the data (gradient updates in the network / training records)",
        "messages": "messages sent (every message the transport counted)",
    }
    # passes: the walk's updates so far over its 60 records, at each evaluation's time
    ax = figures[figure_file("passes")].axes[0]
    walk = solid_lines(ax)["walk.kind=ideal"]
    visits = pd.read_parquet(runs["walk"][0] / "sgd_visits.parquet")
    accuracy = pd.read_parquet(runs["walk"][0] / "accuracy.parquet")
    updated = np.sort(visits.loc[visits["updated"], "time"].to_numpy())
    expected = [np.searchsorted(updated, t, side="right") / 60 for t in accuracy["time"]]
    assert walk.get_xdata().tolist() == pytest.approx(expected)
    # messages: the samples table's messages_sent at gossip learning's sample times
    ax = figures[figure_file("messages")].axes[0]
    gossip = solid_lines(ax)["gossip_learning.period=2"]
    samples = pd.read_parquet(runs["gossip"][0] / "samples.parquet").set_index("time")
    times = pd.read_parquet(runs["gossip"][0] / "gossip_learning_accuracy.parquet")["time"]
    assert gossip.get_xdata().tolist() == pytest.approx(
        samples.loc[times, "messages_sent"].tolist()
    )
    # the default: time only, and the files of other axes are not left behind
    report_figures(monkeypatch, [runs["walk"][0], runs["gossip"][0]], tmp_path / "report")


def test_an_unknown_x_axis_is_refused_by_name(runs, tmp_path, capsys):
    from netsim.cli import main

    with pytest.raises(ReportError, match="x axis rounds is not one of time, passes, messages"):
        x_axes("time,rounds")
    assert x_axes(["passes", "time", "passes"]) == ("passes", "time")
    walk, gossip = runs["walk"][0], runs["gossip"][0]
    out = tmp_path / "cli"
    assert main(["report", str(walk), str(gossip), "--out", str(out), "--x-axis", "hops"]) == 2
    assert "x axis hops is not one of" in capsys.readouterr().err
    assert main(["report", str(walk), "--out", str(out), "--x-axis", "passes"]) == 0
    # learning runs of one kind get the comparison on an axis other than time
    assert (out / figure_file("passes")).is_file()
    assert not (out / figure_file("time")).exists()


# --- the central-DP yardstick at the run's guarantee ---------------------------------------------


def test_a_k_norm_run_gets_the_pure_epsilon_yardstick(runs, tmp_path, monkeypatch):
    run = runs["walk"][0]
    setting = run_setting(run)
    assert setting is not None and (setting.epsilon, setting.delta) == (1.0, 0.0)
    assert setting.stated_delta == 1e-5 and setting.pure
    figures = report_figures(
        monkeypatch, [run, runs["gossip"][0]], tmp_path / "report", x_axis="time"
    )
    (ax,) = figures[figure_file("time")].axes
    dashed = {
        line.get_label(): float(line.get_ydata()[0])
        for line in ax.get_lines()
        if line.get_linestyle() == "--"
    }
    central = {label: y for label, y in dashed.items() if label.startswith("central DP")}
    from netsim.analysis.runs import load_run_scenario

    loaded = load_run_scenario(run)
    data = learning_data(loaded.learning, loaded.nodes)
    pure = central_dp_baseline(
        data.x_train, data.y_train, data.x_test, data.y_test, epsilon=1.0, delta=0.0
    ).accuracy
    assert central == {f"central DP at ε = 1, δ = 0 (pure ε) ({pure:.3f})": pytest.approx(pure)}
    # not the value the run recorded at the stated δ
    recorded = pd.read_parquet(run / "learning_summary.parquet")["central_dp_accuracy"].iloc[0]
    stated = central_dp_baseline(
        data.x_train, data.y_train, data.x_test, data.y_test, epsilon=1.0, delta=1e-5
    ).accuracy
    assert recorded == pytest.approx(stated) and recorded != pytest.approx(pure)
    markdown = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert (
        f"Central DP at each run's guarantee: central DP at ε = 1, δ = 0 (pure ε) ({pure:.3f})."
        in markdown
    )
    assert "central_dp_accuracy is at the δ the scenario states" in markdown


# --- privacy per observer against distance ------------------------------------------------------


def test_the_kind_of_each_pair_follows_the_claim():
    assert (pair_kinds("exact: the view is linear", None, 3) == EXACT).all()
    assert (pair_kinds("RDP bound: amplification by iteration", None, 2) == BOUND).all()
    mixed = "exact but for 1 of 3 pairs, bounds: their uses' Gram has negative entries"
    flags = np.array([True, False, True])
    assert pair_kinds(mixed, flags, 3).tolist() == [EXACT, BOUND, EXACT]
    assert (pair_kinds(mixed, flags, 4) == BOUND).all()  # rows that do not line up: bounds


def synthetic_pairs() -> pd.DataFrame:
    """Two points: point 0 exact, point 1 upper bounds, three distances, two runs each."""
    rng = np.random.default_rng(7)
    rows = []
    for point, kind in ((0, EXACT), (1, BOUND)):
        for run in (2 * point, 2 * point + 1):
            for distance in (1, 2, 3):
                for value in rng.exponential(1.0 / distance, size=40):
                    rows.append((run, point, distance, kind, value))
    return pd.DataFrame(rows, columns=["run", "point", "distance", "kind", "epsilon"])


def test_the_worst_pair_is_above_the_quantiles():
    pairs = synthetic_pairs()
    statistics = distance_statistics(pairs)
    assert len(statistics) == 6
    assert (statistics["worst"] >= statistics["high"]).all()
    assert (statistics["high"] >= statistics["median"]).all()
    assert (statistics["median"] >= statistics["low"]).all()
    assert (statistics["pairs"] == 80).all() and (statistics["runs"] == 2).all()
    for row in statistics.itertuples(index=False):
        mine = pairs[(pairs["point"] == row.point) & (pairs["distance"] == row.distance)]
        assert row.worst == mine["epsilon"].max()  # pooled over the point's runs
        assert row.high == pytest.approx(mine["epsilon"].quantile(0.9))


def test_exact_figures_and_bounds_are_drawn_apart(tmp_path, monkeypatch):
    import netsim.analysis.report.distance as distance

    drawn = []
    monkeypatch.setattr(distance, "save_figure", lambda fig, out, **_: drawn.append(fig) or out)
    statistics = distance_statistics(synthetic_pairs())
    local = pd.DataFrame({"run": [0, 2], "point": [0, 1], "local_epsilon": [3.0, 4.0]})
    styles = {0: LineStyle("tab:blue"), 1: LineStyle("tab:orange")}
    draw_distance_figure(statistics, local, {0: "exact run", 1: "walk"}, styles,
                         tmp_path / PAIRWISE_FIGURE.file)  # fmt: skip
    (ax,) = drawn[0].axes
    worst = {line.get_label(): line for line in ax.get_lines() if line.get_marker() == "^"}
    exact, bound = worst["exact run"], worst["walk (upper bound)"]
    assert exact.get_linestyle() == "-" and exact.get_markerfacecolor() != "none"
    assert bound.get_linestyle() == "--" and bound.get_markerfacecolor() == "none"
    top = statistics[statistics["point"] == 1].sort_values("distance")["worst"]
    assert bound.get_ydata().tolist() == pytest.approx(top.tolist())
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    for entry in ("worst pair", "median pair", "exact ε", "upper bound on ε (RDP)",
                  "local ε (every release public)"):  # fmt: skip
        assert entry in legend
    assert "worst pair, median and 10th–90th percentile" in ax.get_title()
    assert "pairs of 2 runs per point pooled" in ax.get_title()
