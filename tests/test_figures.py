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
    from netsim.algorithms.dola.figures import curve_figure, dola_curves_from_run, sparsity_figure

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
