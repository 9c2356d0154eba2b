"""Tuning as a sweep (``sweep.select``): the choice, the trials it draws, and the privacy it
states, checked against the runs' own tables and, for the private selection, against the
exact distribution of a best-of-K release (Papernot & Steinke 2022)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import integrate, stats

from netsim.cli import main as cli_main
from netsim.errors import SweepError
from netsim.sweep.selection import (
    SelectSpec,
    draw_trials,
    random_trials_privacy,
    read_select,
    tnb_gamma,
    tnb_probabilities,
    worst_record_inverse_square,
)
from netsim.sweep.spec import plan_sweep

BASE = {
    "name": "tune",
    "seed": 1,
    "nodes": 150,
    "duration": "300s",
    "topology": {"kind": "ring", "k": 2},
    "walk": {
        "kind": "ideal", "sampling": "without_replacement", "step_time": "1s",
        "agent": {"kind": "sgd"},
    },
    "learning": {
        "dataset": {"name": "spambase", "validation_fraction": 0.2},
        "algorithm": "dp-sgd",
        "noise": {"kind": "gaussian", "noise_multiplier": 1.0},
        "accounting": "rdp", "epsilon": 8.0, "delta": 1e-5, "clip": 1.0,
        "evaluate_every": 75,
    },
}  # fmt: skip
GRID = {"learning.learning_rate": [0.03, 0.3, 3.0], "learning.clip": [0.3, 1.0]}


def sweep_file(tmp_path: Path, select: dict, grid: dict | None = None, **sweep) -> Path:
    data = dict(BASE, sweep={"grid": grid or GRID, "select": select, **sweep})
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run_sweep_cli(path: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    assert cli_main(["sweep", str(path), "--out", str(out), "--workers", "1", "-q"]) == 0
    return out / "tune"


def summaries(directory: Path) -> pd.DataFrame:
    rows = []
    for run in sorted((directory / "runs").iterdir()):
        if (run / "learning_summary.parquet").exists():
            frame = pd.read_parquet(run / "learning_summary.parquet")
            rows.append({"run_id": run.name, **frame.iloc[0].to_dict()})
    return pd.DataFrame(rows).set_index("run_id")


# --- the number of trials ----------------------------------------------------------------------


@pytest.mark.parametrize(("shape", "mean"), [(1.0, 5.0), (0.0, 10.0), (0.5, 20.0), (2.0, 3.0)])
def test_trial_distribution_has_the_stated_mean_and_dp_accountings_gamma(shape, mean):
    from dp_accounting.rdp.rdp_privacy_accountant import _gamma_truncated_negative_binomial

    assert tnb_gamma(shape, mean) == pytest.approx(
        _gamma_truncated_negative_binomial(shape, mean), rel=1e-8
    )
    p = tnb_probabilities(shape, mean)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert (np.arange(1, p.size + 1) * p).sum() == pytest.approx(mean, rel=1e-9)


def test_geometric_trials_follow_their_distribution():
    """Shape 1 is the geometric law P[K = k] = γ(1 − γ)^(k−1) (γ = 1/mean): the counts drawn
    over 2,000 seeds pass a chi-square test against it, and the points are uniform."""
    spec = SelectSpec(privacy="random_trials", mean_trials=4.0, shape=1.0, validation_epsilon=1.0)
    draws = [draw_trials(spec, 6, seed) for seed in range(2000)]
    counts = np.bincount([len(d) for d in draws])[1:]
    k = np.arange(1, counts.size + 1)
    expected = 2000 * 0.25 * 0.75 ** (k - 1)
    cut = int(np.argmax(expected < 5)) or len(k)  # pool the sparse tail into the last cell
    observed = np.append(counts[:cut], counts[cut:].sum())
    wanted = np.append(expected[:cut], 2000 - expected[:cut].sum())
    assert stats.chisquare(observed, wanted).pvalue > 1e-3
    points = np.bincount(np.concatenate(draws), minlength=6)
    assert stats.chisquare(points).pvalue > 1e-3
    assert draw_trials(spec, 6, 7) == draw_trials(spec, 6, 7)


# --- reading the key ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"privacy": "none"}, r"privacy: 'none'; say what the selection costs"),
        ({}, r"privacy: None"),
        ({"privacy": "unaccounted", "colour": 1}, r"select.colour: unknown key"),
        ({"privacy": "unaccounted", "metric": "accuracy"}, r"metric: 'accuracy'; a metric is"),
        ({"privacy": "unaccounted", "goal": "best"}, r"goal: 'best'"),
        ({"privacy": "random_trials", "validation_epsilon": 1}, r"random_trials needs trials"),
        (
            {"privacy": "random_trials", "trials": {"mean": 0.5, "shape": 1}},
            r"trials.mean: 0.5; expected a finite number >= 1",
        ),
        (
            {"privacy": "random_trials", "trials": {"mean": 5, "shape": 1}},
            r"validation_epsilon: missing",
        ),
        (
            {"privacy": "unaccounted", "trials": {"mean": 5, "shape": 1}},
            r"trials: only for privacy random_trials",
        ),
    ],
)
def test_a_bad_select_key_is_refused_naming_it(raw, message):
    with pytest.raises(SweepError, match=message):
        read_select(raw, ["learning.learning_rate"], 1, "f.yaml: sweep.select")


def test_random_trials_refuse_privacy_axes_and_repetitions():
    raw = {"privacy": "random_trials", "trials": {"mean": 5, "shape": 1}, "validation_epsilon": 1}
    with pytest.raises(SweepError, match=r"grid axis learning.epsilon changes what a trial"):
        read_select(raw, ["learning.learning_rate", "learning.epsilon"], 1, "w")
    with pytest.raises(SweepError, match=r"grid axis learning.dataset.split_seed changes"):
        read_select(raw, ["learning.dataset.split_seed"], 1, "w")
    with pytest.raises(SweepError, match=r"remove sweep.repetitions \(3\)"):
        read_select(raw, ["learning.learning_rate"], 3, "w")


# --- the choice --------------------------------------------------------------------------------


def test_unaccounted_selection_chooses_the_best_mean_validation_point(tmp_path):
    """Every point × repetition runs; the chosen point has the best mean validation accuracy
    over its two runs, its test accuracies are reported, and the privacy is named unaccounted."""
    path = sweep_file(tmp_path, {"privacy": "unaccounted"}, repetitions=2)
    directory = run_sweep_cli(path, tmp_path)
    selection = json.loads((directory / "selection.json").read_text())
    frame = summaries(directory)
    plan = plan_sweep(path)
    assert len(plan.runs) == 12 and selection["runs"] == 12 and selection["candidates"] == 6
    point_of = {run.run_id: run.point for run in plan.runs}
    frame["point"] = [point_of[r] for r in frame.index]
    means = frame.groupby("point")["validation_accuracy"].mean()
    assert selection["chosen_point"] == int(means.idxmax())
    assert selection["metric_value"] == pytest.approx(means.max(), abs=1e-15)
    chosen = frame[frame["point"] == selection["chosen_point"]]
    assert sorted(selection["report_values"]) == sorted(chosen["test_accuracy"].tolist())
    assert selection["statement"].startswith("unaccounted:")
    assert selection["epsilon"] is None
    assert means.max() > means.min()  # the grid's points differ: the choice means something


def test_selection_chooses_among_the_pairs_of_a_zip_block(tmp_path):
    """A zip block's pairs are the points selected among; its keys are the chosen parameters.
    A private selection refuses a zip key that changes what a trial spends, as a grid axis."""
    pairs = {"learning.learning_rate": [0.03, 3.0], "learning.clip": [0.3, 1.0]}
    path = tmp_path / "tune.yaml"
    sweep = {"zip": pairs, "select": {"privacy": "unaccounted"}}
    path.write_text(yaml.safe_dump(dict(BASE, sweep=sweep), sort_keys=False))
    plan = plan_sweep(path)
    assert [r.parameters for r in plan.runs] == [
        {"learning.learning_rate": 0.03, "learning.clip": 0.3},
        {"learning.learning_rate": 3.0, "learning.clip": 1.0},
    ]
    directory = run_sweep_cli(path, tmp_path)
    selection = json.loads((directory / "selection.json").read_text())
    assert selection["candidates"] == 2
    chosen = plan.runs[selection["chosen_point"]]
    assert selection["chosen_parameters"] == chosen.parameters
    assert selection["chosen_runs"] == [chosen.run_id]
    private = {"privacy": "random_trials", "trials": {"mean": 4, "shape": 1},
               "validation_epsilon": 0.5}  # fmt: skip
    sweep = {"zip": {"learning.learning_rate": [0.3, 3.0], "learning.epsilon": [1, 8]},
             "select": private}  # fmt: skip
    path.write_text(yaml.safe_dump(dict(BASE, sweep=sweep), sort_keys=False))
    with pytest.raises(SweepError, match=r"learning.epsilon changes what a trial spends"):
        plan_sweep(path)


def test_random_trials_selection_is_counted_and_releases_the_best_noisy_score(tmp_path):
    select = {"privacy": "random_trials", "trials": {"mean": 4, "shape": 1},
              "validation_epsilon": 0.5}  # fmt: skip
    path = sweep_file(tmp_path, select)
    plan = plan_sweep(path)
    spec = plan.spec.select
    assert [run.point for run in plan.runs] == draw_trials(spec, 6, 1)
    directory = run_sweep_cli(path, tmp_path)
    selection = json.loads((directory / "selection.json").read_text())
    frame = summaries(directory)
    trials = pd.DataFrame(selection["trials"])
    assert len(trials) == len(plan.runs) == selection["candidates"]
    assert trials["metric"].tolist() == frame.loc[trials["run_id"], "validation_accuracy"].tolist()
    best = trials.loc[trials["noisy_score"].idxmax()]
    assert selection["chosen_runs"] == [best["run_id"]]
    assert selection["report_values"] == [frame.loc[best["run_id"], "test_accuracy"]]
    # the noise: Laplace of scale 1/(n_val ε_val), n_val = 920 (0.2 of Spambase's 4,601 rows)
    noise = (trials["noisy_score"] - trials["metric"]).abs()
    assert 0 < noise.max() < 30 / (920 * 0.5)
    # each run is (ε = its own, δ) for its records; the selection costs more, and says so
    run_epsilon = frame["epsilon"].max()
    assert selection["delta"] == 1e-5 and selection["epsilon"] > run_epsilon
    assert "counted" in selection["statement"]


def test_worst_record_inverse_square_adds_one_records_releases():
    ledger = pd.DataFrame({
        "record": [0, 0, 1, 2, 2, 2], "mechanism": ["gaussian_multiplier"] * 6,
        "sensitivity": [2.0] * 6, "noise_scale": [2.0, 4.0, 1.0, 4.0, 4.0, 4.0],
    })  # fmt: skip
    assert worst_record_inverse_square(ledger, "r") == pytest.approx(4.0)  # record 1: (2/1)²
    ledger.loc[3, "mechanism"] = "laplace"
    with pytest.raises(SweepError, match=r"Gaussian releases only; its ledger has 'laplace'"):
        worst_record_inverse_square(ledger, "r")


# --- the privacy of the selection, against the exact law of a best-of-K release -----------------


def best_of_k_hockey_stick(shift: float, epsilon: float, mean: float, shape: float) -> float:
    """δ(ε) between the laws of max(X_1, …, X_K), X_i ~ N(shift, 1) and N(0, 1) (both ways),
    K ~ D_{shape} (mean ``mean``): the selection of P&S Alg. 1 with a Gaussian mechanism as the
    trial and its own output as the score. The law is exact: P[max ≤ t] = Σ_k P(k) Φ(t − μ)^k."""
    p = tnb_probabilities(shape, mean)
    k = np.arange(1, p.size + 1)
    keep = p > 1e-16
    p, k = p[keep], k[keep]

    def density(t: float, mu: float) -> float:
        cdf = stats.norm.cdf(t - mu)
        return float(np.sum(p * k * cdf ** (k - 1)) * stats.norm.pdf(t - mu))

    worst = 0.0
    for a, b in ((shift, 0.0), (0.0, shift)):
        value, _ = integrate.quad(
            lambda t, a=a, b=b: max(0.0, density(t, a) - math.exp(epsilon) * density(t, b)),
            -12.0, 14.0, limit=400, points=[0.0, shift],
        )  # fmt: skip
        worst = max(worst, value)
    return worst


def test_the_stated_selection_epsilon_holds_for_the_exact_best_of_k_law_and_one_runs_does_not():
    """A trial that releases N(x, σ²) (z = σ/Δ = 1.5) and is scored by its own value: at the
    selection's stated ε the exact hockey-stick divergence of the best-of-K law is within δ,
    while at one trial's ε it is not — so an accountant that charged the selection as one run
    would be caught."""
    import dp_accounting

    from netsim.privacy.composition import rdp_accountant

    z, delta = 1.5, 1e-5
    spec = SelectSpec(privacy="random_trials", mean_trials=10.0, shape=1.0, validation_epsilon=1.0)
    stated = random_trials_privacy(spec, 1.0 / z**2, delta)[0]
    single = rdp_accountant().compose(dp_accounting.GaussianDpEvent(z)).get_epsilon(delta)
    assert stated > single
    assert best_of_k_hockey_stick(1.0 / z, stated, 10.0, 1.0) <= delta
    assert best_of_k_hockey_stick(1.0 / z, single, 10.0, 1.0) > delta
    # with half the noise the trials release, the stated ε no longer holds: the check can fail
    assert best_of_k_hockey_stick(2.0 / z, stated, 10.0, 1.0) > delta


def test_an_unaccounted_choice_says_when_the_points_do_not_spend_alike():
    """A grid over the learning rate past 2/(β + λ) voids amplification by iteration: at the
    same noise the runs' worst per-observer ε differ (1 against 2.7 on the Adult walk), and
    the statement says so; equal spends, or runs with no per-observer table, add nothing."""
    from netsim.sweep.selection import SelectSpec, select_unaccounted

    spec = SelectSpec(
        metric="learning_summary.validation_accuracy", goal="max",
        report="learning_summary.test_accuracy", privacy="unaccounted",
    )  # fmt: skip
    runs = pd.DataFrame({
        "point": [0, 1], "run_id": ["a", "b"], "metric": [0.70, 0.75], "report": [0.7, 0.74],
        "observer_epsilon": [1.0, 2.72],
    })  # fmt: skip
    parameters = {0: {"learning.learning_rate": 1.0}, 1: {"learning.learning_rate": 100.0}}
    statement = select_unaccounted(spec, runs, parameters).statement
    assert "do not spend alike: the runs' worst per-observer ε ranges from 1 to 2.72" in statement
    assert "(the chosen point's: 2.72)" in statement
    for same in ([1.0, 1.0], [float("nan")] * 2):
        alike = select_unaccounted(spec, runs.assign(observer_epsilon=same), parameters)
        assert "spend alike" not in alike.statement
