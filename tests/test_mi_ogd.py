"""MI-private OGD (Zhang & Venkitasubramaniam): learner, encryption layer, leakage, regret."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from scipy import integrate, stats

from netsim.algorithms.mi_ogd.config import MiOgdConfig
from netsim.algorithms.mi_ogd.learner import (
    LazyProjectionOGD,
    MiOgdProblem,
    max_loss,
    project,
    subgradient,
    synthetic_regression,
    user_report,
)
from netsim.errors import ScenarioError
from netsim.learning.hindsight import hindsight_minimum
from netsim.privacy.composition import calibrated_noise_multiplier, composed_epsilon_from_ledger
from netsim.scenario.loader import validate_scenario
from netsim.scenario.runner import run_in_memory
from tests.test_bad_input import cli_error, write


def problem(
    dimension: int, rounds: int, *, lipschitz: float = 1.0, max_loss: float = 2.0, **keys: object
) -> MiOgdProblem:
    """An MI-OGD problem of dimension d and horizon T with the ``mi_ogd`` section ``keys``."""
    return MiOgdProblem(MiOgdConfig(**keys), dimension, rounds, lipschitz, max_loss)


def play(config: MiOgdProblem, seed: int, examples: int = 2000) -> tuple[float, float]:
    """One run without the network: (regret against the hindsight optimum, its bound)."""
    stream = synthetic_regression(
        examples=examples, dimension=config.dimension, noise=0.1, scale=0.5, seed=seed
    )
    rng = np.random.default_rng(seed + 1)
    order = rng.integers(0, examples, config.rounds)
    learner = LazyProjectionOGD(config)
    total = 0.0
    for row in order:
        report = user_report(config, learner.w, stream.x[row], stream.y[row], rng)
        total += report.loss
        learner.apply(report.vector)
    weights = np.bincount(order, minlength=examples).astype(float)
    radius = config.config.radius
    best = hindsight_minimum(stream.x, stream.y, weights, loss="absolute", radius=radius)
    return total - best.value, config.regret_bound()


def test_without_noise_the_learner_is_lazy_projection_ogd():
    config = problem(dimension=3, rounds=50, sigma=0.0, radius=0.7, eta=0.3)
    stream = synthetic_regression(examples=200, dimension=3, noise=0.2, scale=0.6, seed=4)
    learner = LazyProjectionOGD(config)
    rng = np.random.default_rng(0)
    theta = np.zeros(3)
    w = np.zeros(3)
    for t in range(50):
        x, y = stream.x[t], float(stream.y[t])
        report = user_report(config, learner.w, x, y, rng)
        assert report.event.guarantee == "non-private"
        assert report.loss == pytest.approx(abs(w @ x - y), abs=1e-15)
        learner.apply(report.vector)
        theta -= np.sign(w @ x - y) * x
        w = 0.3 * theta
        if np.linalg.norm(w) > 0.7:
            w *= 0.7 / np.linalg.norm(w)
        np.testing.assert_allclose(learner.w, w, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize(
    ("dimension", "sigma", "rounds"), [(1, 1.0, 100), (3, 0.5, 200), (5, 2.0, 60), (2, 0.0, 150)]
)
def test_average_regret_stays_under_the_bound(dimension, sigma, rounds):
    config = problem(dimension=dimension, rounds=rounds, sigma=sigma)
    regrets = [play(config, seed)[0] for seed in range(30)]
    bound = config.regret_bound()
    assert bound == pytest.approx(math.sqrt((1 + dimension * sigma**2) * rounds))
    # the mean over 30 seeds, plus 3 standard errors, stays under B √((L² + dσ²) T)
    mean, se = np.mean(regrets), np.std(regrets, ddof=1) / math.sqrt(30)
    assert mean + 3 * se < bound
    assert mean > -1e-6  # the hindsight optimum is at least as good as the run


def test_bandit_regret_stays_under_its_bound():
    config = problem(dimension=2, rounds=400, setting="bandit", sigma=0.5, max_loss=2.0)
    regrets = [play(config, seed)[0] for seed in range(20)]
    assert np.mean(regrets) < config.regret_bound()


def test_leakage_matches_the_gaussian_channel():
    """C is the capacity of the Gaussian channel: a Gaussian input of power L² attains it
    (differential entropies), and a binary input ±L stays below it (numerical integral)."""
    for d, lip, sigma in ((1, 1.0, 1.0), (4, 2.0, 0.5), (10, 1.0, 0.3)):
        config = problem(dimension=d, rounds=1, sigma=sigma, lipschitz=lip)
        gaussian_input = d / 2 * math.log(2 * math.pi * math.e * (lip**2 / d + sigma**2)) - (
            d / 2 * math.log(2 * math.pi * math.e * sigma**2)
        )
        assert config.leakage() == pytest.approx(gaussian_input)
    assert problem(dimension=1, rounds=1, sigma=1.0).leakage() == pytest.approx(0.5 * math.log(2))

    def density(v: float) -> float:  # z̃ = ±1 + N(0, 1), equiprobable
        return 0.5 * (stats.norm.pdf(v - 1.0) + stats.norm.pdf(v + 1.0))

    h_out, _ = integrate.quad(lambda v: -density(v) * math.log(density(v)), -12, 12)
    binary = h_out - 0.5 * math.log(2 * math.pi * math.e)
    assert 0.1 < binary < 0.5 * math.log(2)


def test_bandit_leakage_and_reports_carry_the_bound():
    config = problem(dimension=3, rounds=100, setting="bandit", sigma=2.0, max_loss=1.5)
    delta = config.delta
    assert delta == pytest.approx(100**-0.25)
    expected = 1.5 * math.log1p(3 * (1.5 / delta + 1.0) ** 2 / 4.0)
    assert config.leakage() == pytest.approx(expected)
    report = user_report(config, np.zeros(3), np.array([0.5, 0, 0]), 0.2,
                         np.random.default_rng(0))  # fmt: skip
    assert report.event.guarantee == "mutual-information"
    assert report.event.mutual_information == pytest.approx(expected)
    assert np.linalg.norm(report.played) == pytest.approx(delta)


def test_bandit_estimate_is_unbiased_for_a_linear_loss():
    """Flaxman et al. Lemma 1 on the users' own reports: E[(d/δ) f(w + δe) e + v] = ∇f̂(w),
    which is ∇f for a linear f. The absolute loss |⟨u, x⟩ − y| is y − ⟨u, x⟩ (gradient −x) on
    the whole sphere of radius δ around w when y > ⟨w, x⟩ + δ‖x‖. Each coordinate's mean over n
    reports (fixed seed) must be within 5 standard errors (≈ 0.013) of −x: a factor d − 1 for d
    is a bias of x/4 (≥ 7 standard errors here), e inside the ball rather than on the sphere
    one of x/3 (≥ 9). The points played must be w + δe with e uniform on the sphere: each
    coordinate of e has the law of 2B − 1, B ~ Beta((d − 1)/2, (d − 1)/2), which also catches
    directions that are unbiased for a linear f but not uniform (a normalised cube point)."""
    d, n, smoothing = 4, 60_000, 0.3
    config = problem(dimension=d, rounds=100, setting="bandit", sigma=0.5, smoothing=smoothing)
    x = np.array([0.6, -0.5, 0.5, 0.374])
    w = np.array([0.1, 0.2, -0.3, 0.4])
    y = float(w @ x) + 1.5 * smoothing * float(np.linalg.norm(x))
    rng = np.random.default_rng(11)
    reports = [user_report(config, w, x, y, rng) for _ in range(n)]
    estimates = np.array([report.vector for report in reports])
    played = np.array([report.played for report in reports])
    losses = np.array([report.loss for report in reports])
    np.testing.assert_allclose(losses, y - played @ x, rtol=1e-12)  # linear where played
    mean = estimates.mean(axis=0)
    standard_error = estimates.std(axis=0, ddof=1) / math.sqrt(n)
    z = (mean + x) / standard_error
    assert (np.abs(z) < 5).all(), f"mean {mean} vs gradient {-x}: {z} standard errors"
    e = (played - w) / smoothing
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, rtol=1e-9)
    marginal = stats.beta((d - 1) / 2, (d - 1) / 2, loc=-1, scale=2)
    for coordinate in range(d):
        assert stats.kstest(e[:, coordinate], marginal.cdf).pvalue > 1e-3


def test_losses_and_bounds_helpers():
    x, y = np.array([0.6, 0.8]), 0.5
    assert np.allclose(subgradient("absolute", np.zeros(2), x, y), -x)
    assert np.allclose(subgradient("hinge", np.zeros(2), x, 1.0), -x)
    assert np.allclose(project(np.array([3.0, 4.0]), 1.0), [0.6, 0.8])
    assert max_loss("absolute", 1.5, 1.0, 0.5) == 2.0
    assert max_loss("hinge", 1.0, 1.0, 1.0) == 2.0


def test_bad_configurations():
    with pytest.raises(ValidationError, match="sigma must be >= 0"):
        problem(dimension=1, rounds=1, sigma=-0.1)
    with pytest.raises(ValidationError, match="radius B must be positive"):
        problem(dimension=1, rounds=1, radius=0.0)
    with pytest.raises(ValidationError, match="smoothing δ must be positive"):
        problem(dimension=1, rounds=1, setting="bandit", smoothing=0.0)


# --- on the network -------------------------------------------------------------------------

BASE = {
    "name": "mi-test",
    "seed": 5,
    "nodes": 21,
    "duration": 300,
    "topology": {"kind": "complete"},
    "mi_ogd": {"data": {"name": "synthetic_regression", "options": {"examples": 3000}},
               "regret_checkpoints": 6},
}  # fmt: skip


def scenario(**changes):
    spec = {**BASE, "mi_ogd": {**BASE["mi_ogd"]}}
    for key, value in changes.items():
        if key.startswith("mi_"):
            spec["mi_ogd"][key[3:]] = value
        else:
            spec[key] = value
    return validate_scenario(spec, source="test", base_dir=None)


def test_a_run_over_the_network_logs_rounds_regret_and_leakage():
    _, frames = run_in_memory(scenario())
    rounds = frames["mi_ogd_rounds"]
    assert len(rounds) == 300 and (rounds["staleness"] == 0).all()
    assert set(rounds["user"]) <= set(range(1, 21)) and 0 not in set(rounds["user"])
    assert rounds["leakage"].eq(0.5 * math.log(2)).all()
    regret = frames["mi_ogd_regret"]
    assert regret["round"].iloc[-1] == 300 and regret["played"].iloc[-1] == 300
    assert (regret["regret"] < regret["bound"]).all()
    assert regret["bound"].iloc[-1] == pytest.approx(math.sqrt(2 * 300))
    ledger = frames["privacy_ledger"]
    assert len(ledger) == 300 and (ledger["guarantee"] == "mutual-information").all()
    records = frames["privacy_records"]
    assert records["mutual_information_spent"].sum() == pytest.approx(300 * 0.5 * math.log(2))
    summary = frames["mi_ogd_summary"].iloc[0]
    assert summary["applied"] == 300 and summary["leakage_per_report"] == pytest.approx(
        0.5 * math.log(2)
    )


def test_without_noise_the_network_run_follows_plain_ogd():
    built, frames = run_in_memory(scenario(mi_sigma=0.0, mi_regret_checkpoints=0))
    rounds = frames["mi_ogd_rounds"]
    stream = built["mi_ogd"].stream
    eta = built["mi_ogd"].problem.step
    w, theta = np.zeros(1), np.zeros(1)
    for example, loss in zip(rounds["example"], rounds["loss"], strict=True):
        x, y = stream.x[example], stream.y[example]
        assert loss == pytest.approx(abs(w @ x - y), abs=1e-14)
        theta -= np.sign(w @ x - y) * x
        w = project(eta * theta, 1.0)


def test_late_reports_are_applied_with_their_staleness():
    links = {"delay": {"dist": "uniform", "low": 0.2, "high": 3.0}}
    _, frames = run_in_memory(scenario(links=links))
    rounds = frames["mi_ogd_rounds"]
    applied = rounds.dropna(subset=["applied_at"])
    assert len(applied) > 250  # the last few may still be in flight at the end
    assert applied["staleness"].max() >= 1 and (applied["applied_at"] > applied["sent_at"]).all()


YAML = """\
name: mi-bad
seed: 1
nodes: 5
duration: 20s
topology: {kind: complete}
mi_ogd:
"""


def test_the_scenario_runs_from_the_cli(capsys, tmp_path: Path) -> None:
    from netsim.cli import main

    scenario_file = Path(__file__).resolve().parents[1] / "scenarios" / "mi_ogd" / "regression.yaml"
    code = main(["run", str(scenario_file), "--out", str(tmp_path), "--set", "duration=100s"])
    out = capsys.readouterr().out
    assert code == 0
    assert "100 of 100 rounds played, 100 reports applied" in out
    assert "0.3466 nats per report" in out


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("  sigma: -1\n", "sigma must be >= 0, got -1.0"),
        ("  setting: bandit\n  smoothing: 0\n", "smoothing δ must be positive in the bandit"),
        ("  radius: 0\n", "radius B must be positive, got 0.0"),
        ("  radius: -2\n", "radius B must be positive"),
        ("  smoothing: 0.1\n", "smoothing δ is for the bandit setting"),
        ("  loss: hinge\n", "loss hinge needs labels ±1"),
        ("  learner: 9\n", "mi_ogd.learner (9) must be a node id below nodes (5)"),
    ],
)
def test_bad_mi_ogd_scenario(capsys, tmp_path: Path, extra: str, expected: str) -> None:
    err = cli_error(capsys, "validate", write(tmp_path / "s.yaml", YAML + extra))
    assert expected in err


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_classification_losses_on_a_binary_data_set(loss):
    data = {"name": "spambase"}
    built, frames = run_in_memory(scenario(mi_loss=loss, mi_data=data, mi_sigma=0.5, duration=120))
    assert built["mi_ogd"].stream.dimension == 57
    regret = frames["mi_ogd_regret"]
    assert (regret["regret"] < regret["bound"]).all()
    leakage = frames["mi_ogd_summary"]["leakage_per_report"].iloc[0]
    assert leakage == pytest.approx(57 / 2 * math.log1p(1 / (57 * 0.25)))


# --- a registered mechanism for the users' reports (mi_ogd.mechanism) ----------------------


def test_a_registered_mechanism_perturbs_the_reports_within_the_examples_budget():
    """Every report is a release of sensitivity 2√P = 2L (full information) in the
    mechanism's norm, charged to its example against mi_ogd.epsilon / delta over at most
    ``uses`` reports; reports past an example's budget are refused and not sent."""
    built, frames = run_in_memory(
        scenario(
            mi_mechanism={"kind": "gaussian"}, mi_epsilon=1.0, mi_delta=1e-5, mi_uses=2,
            mi_eta=0.05, mi_data={"name": "synthetic_regression", "options": {"examples": 40}},
        )
    )  # fmt: skip
    ledger, records = frames["privacy_ledger"], frames["privacy_records"]
    problem = built.components["mi_ogd"].problem
    assert set(ledger["mechanism"]) == {"gaussian_analytic"}
    np.testing.assert_allclose(ledger["sensitivity"], 2 * problem.lipschitz)
    assert (ledger["epsilon"] == 0.5).all() and (ledger["delta"] == 5e-6).all()
    assert records["epsilon_spent"].max() == pytest.approx(1.0)
    assert records["delta_spent"].max() == pytest.approx(1e-5)
    refused = int(records["refused"].sum())
    assert (
        refused > 0
        and len(ledger) == (records["uses"] == 2).sum() * 2 + (records["uses"] == 1).sum()
    )
    summary = frames["mi_ogd_summary"].iloc[0]
    assert summary["played"] == 300 and summary["applied"] == 300 - refused
    assert math.isnan(summary["sigma"]) and math.isnan(summary["bound"])


@pytest.mark.parametrize("accounting", ["rdp", "pld"])
def test_gaussian_reports_are_calibrated_to_the_examples_composed_budget(accounting):
    """mi_ogd.accounting rdp/pld: σ = z·2√P with z calibrated so that an example's ``uses``
    reports compose to (ε, δ); the accountant composes them so, dp-accounting rebuilds every
    example's ε from the ledger, and a third report of an example is refused."""
    _, frames = run_in_memory(
        scenario(
            mi_mechanism={"kind": "gaussian"}, mi_epsilon=1.0, mi_delta=1e-5, mi_uses=2,
            mi_eta=0.05, mi_accounting=accounting,
            mi_data={"name": "synthetic_regression", "options": {"examples": 40}},
        )
    )  # fmt: skip
    ledger, records = frames["privacy_ledger"], frames["privacy_records"]
    z = calibrated_noise_multiplier(2, 1.0, 1e-5, accounting)
    np.testing.assert_allclose(ledger["noise_scale"] / ledger["sensitivity"], z, rtol=1e-12)
    twice = records[records["uses"] == 2]
    assert len(twice) and (twice["epsilon_spent"] >= 1.0 - 1e-6).all()
    assert (records["epsilon_spent"] <= 1.0 + 1e-9).all() and records["refused"].sum() > 0
    rebuilt = composed_epsilon_from_ledger(ledger, 1e-5, accounting)
    spent = records.set_index("record")["epsilon_spent"]
    np.testing.assert_allclose(spent.loc[rebuilt.index], rebuilt, rtol=1e-9)
    assert frames["mi_ogd_summary"]["composition"].iloc[0] == accounting
    # basic: each report (ε/2, δ/2) by the analytic Gaussian, over 1.2× the noise
    _, basic = run_in_memory(
        scenario(
            mi_mechanism={"kind": "gaussian"}, mi_epsilon=1.0, mi_delta=1e-5, mi_uses=2,
            mi_eta=0.05, mi_data={"name": "synthetic_regression", "options": {"examples": 40}},
        )
    )  # fmt: skip
    assert basic["mi_ogd_summary"]["composition"].iloc[0] == "basic"
    assert (basic["privacy_ledger"]["noise_scale"] / ledger["noise_scale"].iloc[0]).min() > 1.2


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"mi_accounting": "rdp"}, "accounting: the budget of a mechanism's releases"),
        ({"mi_mechanism": "l1", "mi_eta": 0.1}, "mechanism needs epsilon"),
        ({"mi_mechanism": "l1", "mi_epsilon": 1.0}, "mechanism needs eta"),
        ({"mi_mechanism": "gaussian", "mi_epsilon": 1.0, "mi_eta": 0.1},
         r"mechanism gaussian is \(epsilon,delta\)-DP.*delta .*is 0"),
        ({"mi_epsilon": 1.0}, "the budget of a mechanism's releases"),
    ],
)  # fmt: skip
def test_bad_mi_ogd_mechanisms_are_refused(keys, message):
    with pytest.raises(ScenarioError, match=message):
        scenario(**keys)
