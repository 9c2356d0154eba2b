"""DOLA's (ε, δ) releases composed by RDP or PLD (``dola.accounting``): the Gaussian noise is
calibrated so that an example's releases compose to its budget, the accountant composes them
so, dp-accounting rebuilds every example's ε from the ledger, and Laplace stays basic."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.algorithms.dola.config import DolaConfig
from netsim.algorithms.dola.learner import DolaLearner
from netsim.errors import DolaConfigError, ScenarioError
from netsim.learning.online_data import OnlineData, synthetic_ball
from netsim.privacy import mechanisms
from netsim.privacy.composition import calibrated_noise_multiplier, composed_epsilon_from_ledger
from netsim.scenario.loader import validate_scenario
from netsim.scenario.runner import run_in_memory

#: 16 nodes, 6,000 training examples (375 per node), 200 rounds of mini-batches of 5: every
#: example is used in 2 or 3 passes (3 allowed), each pass one Gaussian release of the
#: mini-batch mean gradient (L2 sensitivity 2L/h = 0.4 to one example replaced).
BASE = {
    "name": "dola-accounting",
    "seed": 3,
    "nodes": 16,
    "duration": 200,
    "topology": {"kind": "random_regular", "degree": 4},
    "dola": {
        "data": {"name": "synthetic_ball", "options": {"examples": 8000, "features": 5}},
        "algorithm": "gaussian", "epsilon": 1.0, "delta": 1e-5, "batch": 5, "max_passes": 3,
        "regret_checkpoints": 0, "evaluate_every": 50, "strong_convexity": 1.0, "radius": 1.0,
    },
}  # fmt: skip


def run(**dola: object) -> tuple[object, dict[str, pd.DataFrame]]:
    spec = {**BASE, "dola": {**BASE["dola"], **dola}}
    return run_in_memory(validate_scenario(spec, source="test", base_dir=None))


@pytest.fixture(scope="module")
def basic_run() -> dict[str, pd.DataFrame]:
    return run(accounting="basic")[1]


@pytest.mark.parametrize("accounting", ["rdp", "pld"])
def test_gaussian_dola_spends_the_composed_budget_that_dp_accounting_rebuilds(
    accounting, basic_run
):
    built, frames = run(accounting=accounting)
    ledger, records = frames["privacy_ledger"], frames["privacy_records"]
    z = calibrated_noise_multiplier(3, 1.0, 1e-5, accounting)
    # every release: σ_t = z·Δ_t with Δ_t = 2L/h, z calibrated for the three passes
    np.testing.assert_allclose(ledger["sensitivity"], 2.0 / 5)
    np.testing.assert_allclose(ledger["noise_scale"] / ledger["sensitivity"], z, rtol=1e-12)
    assert set(ledger["mechanism"]) == {f"gaussian_dola_{accounting}"}
    assert set(records["uses"]) == {2, 3}
    # an example used in all three passes spends the budget to 1e-6, and never more
    full = records[records["uses"] == 3]
    assert (full["epsilon_spent"] <= 1.0 + 1e-9).all()
    assert (full["epsilon_spent"] >= 1.0 - 1e-6).all()
    assert (records["epsilon_spent"] <= 1.0 + 1e-9).all()
    assert (records["delta_spent"] == 1e-5).all()
    # dp-accounting's own accountant, fed the ledger, gives every example's ε
    rebuilt = composed_epsilon_from_ledger(ledger, 1e-5, accounting)
    used = records.set_index("record")["epsilon_spent"]
    np.testing.assert_allclose(used.loc[rebuilt.index], rebuilt, rtol=1e-9)
    summary = frames["dola_summary"].iloc[0]
    assert summary["composition"] == accounting
    assert summary["epsilon_spent_max"] == pytest.approx(records["epsilon_spent"].max())
    assert summary["delta_spent_max"] == 1e-5
    report = built.components["dola"].privacy_accountant().report()  # the manifest's entry
    assert report["accounting"] == report["composition"] == accounting
    assert report["spent_epsilon"] <= 1.0 + 1e-9 and report["differentially_private"]
    # basic composition gives each of the three releases (ε/3, δ/3): over 1.5× the noise
    basic = basic_run["privacy_ledger"]
    assert set(basic["mechanism"]) == {"gaussian_dola_analytic"}
    sigma = mechanisms.analytic_gaussian_sigma(2.0 / 5, 1.0 / 3, 1e-5 / 3)
    np.testing.assert_allclose(basic["noise_scale"], sigma, rtol=1e-12)
    assert sigma / ledger["noise_scale"].iloc[0] > 1.5
    assert basic_run["dola_summary"]["composition"].iloc[0] == "basic"


def test_laplace_dola_keeps_basic_composition_and_says_so(basic_run):
    _, basic = run(algorithm="laplace", accounting="basic")
    built, rdp = run(algorithm="laplace", accounting="rdp")
    pd.testing.assert_frame_equal(rdp["privacy_ledger"], basic["privacy_ledger"])
    pd.testing.assert_frame_equal(rdp["privacy_records"], basic["privacy_records"])
    assert rdp["dola_summary"]["composition"].iloc[0] == "basic"
    report = built.components["dola"].privacy_accountant().report()
    assert report["accounting"] == "rdp" and report["composition"] == "basic"
    assert "laplace_dola is pure ε-DP" in report["composition_reason"]


def tiny_data(n_train: int = 600, features: int = 8) -> OnlineData:
    return synthetic_ball(examples=int(n_train / 0.75) + 1, features=features, seed=0)


def learner_after(rounds: int, nodes: int = 4, **keys: object) -> DolaLearner:
    """A DolaLearner run ``rounds`` rounds on a ring of identity mixing (every node online)."""
    config = DolaConfig(data={"name": "synthetic_ball"}, rounds=rounds, **keys)
    learner = DolaLearner(config, tiny_data(), nodes, shard_seed=0, rng=np.random.default_rng(7))
    identity = (np.arange(nodes + 1), np.arange(nodes), np.ones(nodes))
    for t in range(rounds):
        learner.round(t, *identity, np.arange(nodes))
    return learner


def test_a_gaussian_mechanism_on_the_released_iterate_is_calibrated_per_round_sensitivity():
    """Output perturbation (Alg. 1) with the registered Gaussian under PLD: Δ_t = 2α_t L/h
    shrinks with t and σ_t = z·Δ_t, z calibrated for the examples' two passes."""
    learner = learner_after(
        300, algorithm="laplace", mechanism="gaussian", epsilon=0.5, delta=1e-6,
        strong_convexity=0.5, accounting="pld", max_passes=2,
    )  # fmt: skip
    ledger = learner.accountant.ledger_frame()
    alphas = np.repeat(1 / (0.5 * np.arange(1, 301)), 4)
    np.testing.assert_allclose(ledger["sensitivity"], 2 * alphas)
    z = calibrated_noise_multiplier(2, 0.5, 1e-6, "pld")
    np.testing.assert_allclose(ledger["noise_scale"], z * 2 * alphas, rtol=1e-12)
    records = learner.accountant.records_frame()
    assert records["uses"].max() == 2
    rebuilt = composed_epsilon_from_ledger(ledger, 1e-6, "pld")
    np.testing.assert_allclose(records["epsilon_spent"].iloc[rebuilt.index], rebuilt, rtol=1e-9)
    assert rebuilt.max() <= 0.5 * (1 + 1e-9) and rebuilt.max() >= 0.5 - 1e-6


@settings(max_examples=15, deadline=None)
@given(
    epsilon=st.floats(0.05, 4.0),
    rounds=st.integers(1, 400),
    batch=st.integers(1, 3),
    nodes=st.integers(1, 5),
)
def test_no_example_passes_its_budget_under_rdp(epsilon, rounds, batch, nodes):
    """However many passes a run makes, each example's RDP-composed ε stays within the budget
    (the noise is calibrated for the run's passes, the accountant would refuse otherwise)."""
    keys = {"algorithm": "gaussian", "epsilon": epsilon, "delta": 1e-5, "batch": batch,
            "accounting": "rdp", "max_passes": 100, "strong_convexity": 1.0}  # fmt: skip
    learner = learner_after(rounds, nodes, **keys)
    records = learner.accountant.records_frame()
    assert records["uses"].max() == learner.passes
    assert (records["epsilon_spent"] <= epsilon * (1 + 1e-9)).all()
    most = records["epsilon_spent"][records["uses"] == learner.passes]
    assert (most >= epsilon - 1e-6 * max(1.0, epsilon)).all()


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"calibration": "printed"}, "leave calibration out, or set accounting: basic"),
        ({"accounting": "moments"}, "dola.accounting"),
    ],
)
def test_bad_accounting_is_refused(keys, message):
    spec = {**BASE, "dola": {**BASE["dola"], "accounting": "rdp", **keys}}
    with pytest.raises(ScenarioError, match=message):
        validate_scenario(spec, source="test", base_dir=None)


def test_a_fixed_noise_multiplier_that_composes_past_the_budget_is_refused_before_the_run():
    too_small = {"kind": "gaussian", "noise_multiplier": 2.0}
    with pytest.raises(DolaConfigError, match=r"compose \(rdp\) to ε = .* more than the stated"):
        learner_after(1, mechanism=too_small, epsilon=0.5, delta=1e-6, accounting="rdp")
    learner = learner_after(
        3, mechanism={"kind": "gaussian", "noise_multiplier": 20.0}, epsilon=0.5, delta=1e-6,
        accounting="rdp",
    )  # fmt: skip
    ledger = learner.accountant.ledger_frame()
    assert (ledger["noise_scale"] / ledger["sensitivity"] == 20.0).all()
    assert math.isclose(learner.noise_multiplier or 0.0, 20.0)


def test_the_calibrated_pld_run_composed_as_a_whole_stays_within_its_budget():
    """DOLA's Gaussian releases at ε = 0.5, δ = 10⁻⁵, two passes, PLD: every example's releases,
    read from the ledger and composed as a whole by a fresh dp-accounting accountant (one
    ``ComposedDpEvent`` of its releases, each composed after the other), come to at most ε.
    The calibration's own search composes k-fold self-composition, which under PLD sits some
    2e-8 below the whole composition: a z fitted to the first alone overshoots the second."""
    import dp_accounting
    from dp_accounting import pld

    learner = learner_after(300, algorithm="gaussian", epsilon=0.5, delta=1e-5,
                            accounting="pld", max_passes=2)  # fmt: skip
    ledger = learner.accountant.ledger_frame()
    assert learner.accountant.records_frame()["uses"].max() == 2
    multipliers = ledger["noise_scale"] / ledger["sensitivity"]
    histories = {
        tuple(sorted(group)) for _, group in multipliers.groupby(ledger["record"].to_numpy())
    }
    assert max(len(history) for history in histories) == 2
    for history in histories:
        accountant = pld.PLDAccountant()
        accountant.compose(
            dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(z) for z in history])
        )
        assert accountant.get_epsilon(1e-5) <= 0.5
    # the accountant's own figure (self-composed) is within the budget too, and close to it
    spent = learner.accountant.records_frame()["epsilon_spent"]
    assert spent.max() <= 0.5 and spent.max() >= 0.5 - 1e-6
