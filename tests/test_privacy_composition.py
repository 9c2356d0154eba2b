"""Composition by RDP or PLD as the ceiling of the per-record accountant: exact values against
dp-accounting, refusals at the boundary, DP-SGD-k's calibrated noise, dp-sgd's number of uses,
ledger reproduction, honest labels, and an empirical audit of the composed mechanism."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import pld, rdp
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.errors import BudgetExhausted, PrivacyError
from netsim.privacy import audit
from netsim.privacy import composition as c
from netsim.privacy import mechanisms as m
from netsim.privacy.accountant import (
    KUses,
    PrivacyAccountant,
    SingleUse,
    UntilSpent,
    accounting_problem,
    composition_for,
    policy_by_name,
)
from netsim.registry import REGISTRY

DELTA = 1e-5


def gaussian_mechanism(**settings):
    _, config = REGISTRY.lookup(("mechanism",), "gaussian")
    return m.build_mechanism(config(kind="gaussian", **settings))


def gaussian_event(z, sensitivity=1.0):
    return m.gaussian_at_multiplier(
        np.zeros(1), sensitivity=sensitivity, noise_multiplier=z, delta=DELTA,
        rng=np.random.default_rng(0),
    )[1]  # fmt: skip


def reference_epsilon(multipliers, delta, accounting):
    """ε of Gaussian releases at ``multipliers`` from a fresh dp-accounting accountant, one
    compose per distinct multiplier (as a self-composition)."""
    accountant = (
        rdp.RdpAccountant(orders=c.RDP_ORDERS.tolist())
        if accounting == "rdp"
        else pld.PLDAccountant()
    )
    values, counts = np.unique(np.asarray(multipliers), return_counts=True)
    for z, n in zip(values, counts, strict=True):
        accountant.compose(dp_accounting.GaussianDpEvent(float(z)), int(n))
    return accountant.get_epsilon(delta)


# --- exact values ----------------------------------------------------------------------------


@pytest.mark.parametrize("accounting", ["rdp", "pld"])
def test_composed_epsilon_is_dp_accountings(accounting):
    """Records charged with Gaussian events of mixed multipliers, one by one and in batches,
    hold the ε dp-accounting's accountant gives for their releases (RDP: same orders and
    conversion, to 1e-9 relative; PLD: the same computation)."""
    rng = np.random.default_rng(4)
    accountant = PrivacyAccountant(
        6, epsilon=1e6, delta=DELTA, policy=UntilSpent(), accounting=accounting
    )
    history: dict[int, list[float]] = {r: [] for r in range(6)}
    for step in range(16 if accounting == "pld" else 40):
        z = float(rng.choice([4.0, 8.0] if accounting == "pld" else [2.0, 3.5, 7.0]))
        if step % 4 == 0:
            records = rng.integers(0, 6, 5)
            accountant.charge_batch(records, gaussian_event(z))
            for r in records:
                history[int(r)].append(z)
        else:
            r = int(rng.integers(6))
            accountant.charge(r, gaussian_event(z))
            history[r].append(z)
    for record, multipliers in history.items():
        expected = reference_epsilon(multipliers, DELTA, accounting) if multipliers else 0.0
        assert accountant.epsilon_spent[record] == pytest.approx(expected, rel=1e-9)
        assert accountant.delta_spent[record] == (DELTA if multipliers else 0.0)
        assert accountant.uses[record] == len(multipliers)
    assert accountant.composition == accounting


def test_vectorised_rdp_conversion_is_compute_epsilon():
    rng = np.random.default_rng(1)
    for _ in range(200):
        curve = c.gaussian_rdp_curve(float(np.exp(rng.uniform(-1, 8)))) * int(rng.integers(1, 900))
        delta = float(10 ** rng.uniform(-12, -1))
        expected = rdp.compute_epsilon(c.RDP_ORDERS, curve, delta)[0]
        assert c.rdp_epsilons(curve, delta)[0] == pytest.approx(expected, rel=1e-12)


def test_replace_one_neighbours_are_a_shift_by_the_sensitivity():
    """netsim's Δ is measured between replace-one neighbours, so one release's PLD ε is the
    exact ε of a Gaussian shift by Δ (Balle & Wang 2018), not dp-accounting's REPLACE_ONE
    (which would shift by 2Δ)."""
    z = 3.0
    exact = m.gaussian_epsilon(z, 1.0, DELTA)
    assert c.pld_epsilon(((z, 1),), DELTA) == pytest.approx(exact, abs=2e-3)
    assert c.pld_epsilon(((z, 1),), DELTA) >= exact - 1e-9  # pessimistic discretisation


# --- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize("accounting", ["rdp", "pld"])
def test_refusal_at_the_boundary_leaves_state_unchanged(accounting):
    """With the budget ε exactly the composed ε of 4 releases, 4 are charged and the fifth is
    refused, counted, and changes nothing else."""
    z = 2.5
    budget = reference_epsilon([z] * 4, DELTA, accounting)
    accountant = PrivacyAccountant(
        2, epsilon=budget, delta=DELTA, policy=UntilSpent(), accounting=accounting
    )
    mechanism, rng = gaussian_mechanism(noise_multiplier=z), np.random.default_rng(0)
    for _ in range(4):
        accountant.release(0, np.zeros(2), mechanism=mechanism, sensitivity=1.0, rng=rng)
    before = accountant.records_frame()
    rng_state = rng.bit_generator.state
    with pytest.raises(BudgetExhausted, match="composed ε"):
        accountant.release(0, np.zeros(2), mechanism=mechanism, sensitivity=1.0, rng=rng)
    with pytest.raises(BudgetExhausted):
        accountant.charge_batch(np.array([1, 0]), gaussian_event(z))  # all or nothing
    after = accountant.records_frame()
    assert after["refused"].tolist() == [1, 0]
    assert after.drop(columns="refused").equals(before.drop(columns="refused"))
    assert rng.bit_generator.state == rng_state  # refused before any noise was drawn
    assert len(accountant.ledger_frame()) == 4
    assert accountant.epsilon_spent[0] <= budget * (1 + 1e-9)


# --- DP-SGD-k: noise calibrated to the composed budget -------------------------------------


@pytest.mark.parametrize("accounting", ["rdp", "pld"])
@pytest.mark.parametrize("k", [1, 5, 10])
def test_dp_sgd_k_makes_k_uses_that_compose_to_the_budget(accounting, k):
    accountant = PrivacyAccountant(
        3, epsilon=1.0, delta=DELTA, policy=policy_by_name(f"dp-sgd-{k}"), accounting=accounting
    )
    mechanism, rng = gaussian_mechanism(), np.random.default_rng(2)
    z = accountant.noise_multiplier_for(mechanism)
    assert z == c.calibrated_noise_multiplier(k, 1.0, DELTA, accounting)
    for _ in range(k):
        _, event = accountant.release(1, np.zeros(3), mechanism=mechanism, sensitivity=2.0, rng=rng)
        assert event.noise_scale == pytest.approx(2.0 * z, rel=1e-15)
    with pytest.raises(BudgetExhausted, match="budget spent"):
        accountant.release(1, np.zeros(3), mechanism=mechanism, sensitivity=2.0, rng=rng)
    spent = accountant.epsilon_spent[1]
    assert 1.0 - 1e-6 <= spent <= 1.0
    assert spent == pytest.approx(reference_epsilon([z] * k, DELTA, accounting), rel=1e-9)
    report = accountant.report()
    assert report["spent_epsilon"] == spent and report["spent_delta"] == DELTA
    assert report["composition"] == accounting and report["uses"] == k


def test_tight_calibration_needs_less_noise_than_basic_for_many_uses():
    """For k = 10 at (1, 1e-5) the same noise would cost ≈ 3 under the basic sum."""
    z_rdp = c.calibrated_noise_multiplier(10, 1.0, DELTA, "rdp")
    z_pld = c.calibrated_noise_multiplier(10, 1.0, DELTA, "pld")
    assert z_pld < z_rdp < m.analytic_gaussian_sigma(1.0, 0.1, DELTA / 10)
    assert 10 * m.gaussian_epsilon(z_rdp, 1.0, DELTA / 10) > 2.5


# --- dp-sgd: the accounting decides the number of uses -------------------------------------


@pytest.mark.parametrize("accounting", ["rdp", "pld"])
def test_dp_sgd_allows_exactly_the_uses_the_accountant_permits(accounting):
    z, budget = 6.0, 2.0
    permitted = 0
    while reference_epsilon([z] * (permitted + 1), DELTA, accounting) <= budget:
        permitted += 1
    assert permitted > 2
    accountant = PrivacyAccountant(
        1, epsilon=budget, delta=DELTA, policy=policy_by_name("dp-sgd"), accounting=accounting
    )
    mechanism, rng = gaussian_mechanism(noise_multiplier=z), np.random.default_rng(0)
    for _ in range(permitted + 5):
        try:
            accountant.release(0, np.zeros(2), mechanism=mechanism, sensitivity=1.0, rng=rng)
        except BudgetExhausted:
            pass
    assert accountant.uses[0] == permitted and accountant.refused[0] == 5


def test_dp_sgd_needs_rdp_or_pld_and_a_fixed_multiplier():
    _, config = REGISTRY.lookup(("mechanism",), "gaussian")
    fixed = config(kind="gaussian", noise_multiplier=1.1)
    assert accounting_problem(fixed, "dp-sgd", "rdp") == ""
    assert accounting_problem("k_norm_l2", "dp-sgd-5", "rdp") == ""
    assert "needs accounting rdp or pld" in accounting_problem(fixed, "dp-sgd", "basic")
    assert "fixed noise multiplier" in accounting_problem("gaussian", "dp-sgd", "pld")
    assert "fixed noise multiplier" in accounting_problem("k_norm_l2", "dp-sgd", "rdp")
    assert "not one of" in accounting_problem("gaussian", "dp-sgd-1", "moments")
    with pytest.raises(PrivacyError, match="needs accounting rdp or pld"):
        PrivacyAccountant(3, epsilon=1.0, delta=DELTA, policy=UntilSpent())
    accountant = PrivacyAccountant(
        3, epsilon=1.0, delta=DELTA, policy=UntilSpent(), accounting="rdp"
    )
    with pytest.raises(PrivacyError, match="fixed noise multiplier"):
        accountant.release(
            0, np.zeros(2), mechanism=gaussian_mechanism(), sensitivity=1.0,
            rng=np.random.default_rng(0),
        )  # fmt: skip


# --- which mechanisms are composed how ---------------------------------------------------------


def test_pure_epsilon_and_non_dp_mechanisms_keep_basic_composition_and_say_so():
    rng = np.random.default_rng(0)
    k_norm = PrivacyAccountant(2, epsilon=1.0, policy=KUses(4), accounting="rdp")
    for _ in range(4):
        k_norm.release(0, np.zeros(3), mechanism="k_norm_l2", sensitivity=1.0, rng=rng)
    assert k_norm.epsilon_spent[0] == pytest.approx(1.0) and k_norm.delta_spent[0] == 0.0
    assert k_norm.composition == "basic"
    assert "k_norm_l2 is pure ε-DP" in k_norm.composition_reason
    assert composition_for("k_norm_l2", "rdp")[0] == "basic"
    assert "pure ε-DP" in composition_for("l1", "pld")[1]
    assert composition_for("gaussian", "pld")[0] == "pld"
    assert composition_for("gaussian", "basic")[0] == "basic"
    # a record mixing both: the Gaussian part composed, the Laplace ε added
    mixed = PrivacyAccountant(1, epsilon=10.0, delta=DELTA, policy=UntilSpent(), accounting="rdp")
    mixed.charge(0, gaussian_event(4.0))
    mixed.charge(0, m.laplace(np.zeros(1), sensitivity=1.0, epsilon=0.3, rng=rng)[1])
    assert mixed.epsilon_spent[0] == pytest.approx(reference_epsilon([4.0], DELTA, "rdp") + 0.3)
    assert mixed.composition == "rdp+basic"


def test_a_run_without_a_dp_guarantee_reports_a_nominal_epsilon_only():
    accountant = PrivacyAccountant(2, epsilon=1.0, policy=SingleUse())
    accountant.release(
        0, np.zeros(3), mechanism="l2_laplace_radius", sensitivity=1.0,
        rng=np.random.default_rng(0),
    )  # fmt: skip
    report = accountant.report()
    assert report["spent_epsilon"] is None and report["nominal_epsilon"] == 1.0
    assert report["differentially_private"] is False
    private = PrivacyAccountant(2, epsilon=1.0, policy=SingleUse())
    private.release(
        0, np.zeros(3), mechanism="k_norm_l2", sensitivity=1.0, rng=np.random.default_rng(0)
    )
    assert private.report()["spent_epsilon"] == 1.0
    assert private.report()["nominal_epsilon"] is None


# --- invariants --------------------------------------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(
    accounting=st.sampled_from(["rdp", "pld"]),
    budget=st.floats(0.3, 8.0),
    charges=st.lists(
        st.tuples(st.integers(0, 2), st.sampled_from([1.5, 3.0, 6.0]), st.booleans()),
        max_size=25,
    ),
)
def test_composed_epsilon_never_passes_the_budget_and_grows_with_uses(accounting, budget, charges):
    accountant = PrivacyAccountant(
        3, epsilon=budget, delta=DELTA, policy=UntilSpent(), accounting=accounting
    )
    for record, z, batch in charges:
        before = accountant.records_frame()
        try:
            if batch:
                accountant.charge_batch(np.array([record, (record + 1) % 3]), gaussian_event(z))
            else:
                accountant.charge(record, gaussian_event(z))
        except BudgetExhausted:
            assert accountant.records_frame().equals(before)
            continue
        after = accountant.records_frame()
        assert (after["epsilon_spent"] <= budget * (1 + 1e-9)).all()
        used = after["uses"] > before["uses"]
        assert (after["epsilon_spent"][used] > before["epsilon_spent"][used]).all()
        assert (after["epsilon_spent"][~used] == before["epsilon_spent"][~used]).all()


# --- the ledger reproduces the records table ---------------------------------------------------


@pytest.mark.parametrize("accounting", ["rdp", "pld", "basic"])
def test_dp_accounting_rebuilds_the_records_table_from_the_ledger(accounting):
    rng = np.random.default_rng(9)
    policy = UntilSpent() if accounting != "basic" else KUses(1000)
    accountant = PrivacyAccountant(
        5, epsilon=50.0, delta=DELTA, policy=policy, accounting=accounting
    )
    for step in range(30):
        if step % 5 == 4:
            event = m.k_norm_l2(np.zeros(2), sensitivity=1.0, epsilon=0.2, rng=rng)[1]
        else:
            multipliers = [4.0] if accounting == "pld" else [2.0, 5.0]  # PLD: fast histories
            event = gaussian_event(float(rng.choice(multipliers)), sensitivity=0.5)
            if accounting == "basic":
                event = m.gaussian(np.zeros(1), sensitivity=0.5, epsilon=0.5, delta=1e-7, rng=rng)[
                    1
                ]
        accountant.charge_batch(rng.integers(0, 5, 3), event)
    rebuilt = c.composed_epsilon_from_ledger(accountant.ledger_frame(), DELTA, accounting)
    records = accountant.records_frame().set_index("record")["epsilon_spent"]
    used = records[accountant.uses > 0]
    assert list(rebuilt.index) == list(used.index)
    np.testing.assert_allclose(rebuilt.to_numpy(), used.to_numpy(), rtol=1e-9)


# --- an empirical audit of the composed mechanism that can fail --------------------------------


@pytest.mark.parametrize("accounting", ["rdp", "pld"])
def test_audit_of_k_calibrated_gaussian_releases(accounting):
    """k = 5 Gaussian releases of a scalar record with the noise the accountant calibrates
    for DP-SGD-5 at (1, 1e-5), on neighbours 0 and Δ = 1: a threshold test on the sum of the
    releases, with Clopper–Pearson bounds at 99.9 %, gives an ε lower bound below the
    accounted ε; with half that noise the same audit proves more than the accounted ε."""
    k, samples = 5, 600_000
    accountant = PrivacyAccountant(
        1, epsilon=1.0, delta=DELTA, policy=KUses(k), accounting=accounting
    )
    mechanism = gaussian_mechanism()
    z = accountant.noise_multiplier_for(mechanism)
    _, event = accountant.release(
        0, 0.0, mechanism=mechanism, sensitivity=1.0, rng=np.random.default_rng(0)
    )
    assert event.noise_scale == z  # the audited noise is the noise released

    def lower_bound(noise_multiplier):
        rng = np.random.default_rng(11)
        scores = [
            audit.composed_gaussian_scores(k, noise_multiplier, value=x, samples=samples, rng=rng)
            for x in (0.0, 1.0)
        ]
        spread = math.sqrt(k) * noise_multiplier
        thresholds = k / 2 + spread * np.linspace(-5.0, 5.0, 41)
        return audit.threshold_epsilon_lower_bound(*scores, thresholds, delta=DELTA, alpha=1e-3)

    accounted = 1.0
    assert lower_bound(z) < accounted
    assert lower_bound(z / 2) > accounted  # the audit has the power to catch half the noise


def test_clopper_pearson_covers_its_level():
    low, high = audit.clopper_pearson(30, 100, 0.05)
    assert low == pytest.approx(0.2124, abs=1e-3) and high == pytest.approx(0.3998, abs=1e-3)
    assert audit.clopper_pearson(0, 50, 0.05)[0] == 0.0
