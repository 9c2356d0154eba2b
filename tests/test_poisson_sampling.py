"""Poisson subsampling within a node's shard (``learning.sampling: poisson``): the per-record ε
as a fresh dp-accounting accountant composes the same events (RDP and PLD), q = 1 as the
unsampled Gaussian, the taken-batch sizes as Binomial(r, q), the release as Abadi et al.'s
noisy sum over the expected batch, honest labels (add/remove neighbours), the settings that
cannot run, and an empirical audit of one subsampled step that catches a claimed q smaller
than the q used."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pandas as pd
import pytest
from dp_accounting import pld, rdp
from scipy import stats

import netsim
from netsim.errors import BudgetExhausted, PrivacyError, ScenarioError
from netsim.learning.models import build_model
from netsim.learning.private_sgd import PrivateSGD
from netsim.learning.sgd_agent import SGDAgent
from netsim.privacy import audit
from netsim.privacy import composition as c
from netsim.privacy.accountant import KUses, PrivacyAccountant, Unlimited, policy_by_name
from netsim.privacy.mechanisms import build_mechanism
from netsim.registry import REGISTRY

DELTA = 1e-5

#: A short ideal walk on Spambase: 64 nodes of 8 records, each node visited about 5 times.
WALK = {
    "name": "poisson-walk",
    "seed": 3,
    "nodes": 64,
    "duration": "321s",  # visits at 1 s … 320 s
    "topology": {"kind": "ring", "k": 2},
    "walk": {"kind": "ideal", "sampling": "without_replacement", "step_time": "1s",
             "agent": {"kind": "sgd"}},
    "learning": {"dataset": {"name": "spambase"}, "algorithm": "dp-sgd-5", "noise": "gaussian",
                 "epsilon": 1.0, "delta": DELTA, "accounting": "rdp", "evaluate_every": 64,
                 "records_per_node": 8, "batch": 2, "clip": 0.5, "sampling": "poisson"},
    "metrics": {"sample_every": "10min"},
}  # fmt: skip


def walk(**learning: object) -> dict:
    return {**WALK, "learning": {**WALK["learning"], **learning}}


def fresh_accountant(accounting: str) -> dp_accounting.PrivacyAccountant:
    if accounting == "rdp":
        return rdp.RdpAccountant(orders=c.RDP_ORDERS.tolist())
    return pld.PLDAccountant()


def gaussian(**settings: object):
    _, config = REGISTRY.lookup(("mechanism",), "gaussian")
    return build_mechanism(config(kind="gaussian", **settings))


# --- the accounting against dp-accounting ----------------------------------------------------


@pytest.mark.parametrize("accounting", ["rdp", "pld"])
def test_a_poisson_run_spends_what_dp_accounting_composes_for_its_sampled_events(accounting):
    result = netsim.run(walk(accounting=accounting))
    records = result["privacy_records"].set_index("record")
    ledger = result["privacy_ledger"]
    q = 2 / 8
    z = c.calibrated_noise_multiplier(5, 1.0, DELTA, accounting, q)
    # every record of a visited shard is charged, taken or not: the node's visits, all five
    assert (records["uses"] == 5).all()
    assert (ledger["mechanism"] == c.POISSON_MECHANISM).all()
    # add/remove: one record's presence changes the sum by C, over the expected batch b
    np.testing.assert_allclose(ledger["sensitivity"], 0.5 / 2, rtol=1e-15)
    np.testing.assert_allclose(ledger["noise_scale"] / ledger["sensitivity"], z, rtol=1e-12)
    accountant = fresh_accountant(accounting)
    accountant.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)), 5)
    expected = accountant.get_epsilon(DELTA)
    np.testing.assert_allclose(records["epsilon_spent"], expected, rtol=1e-9)
    assert expected <= 1.0 + 1e-9 and expected > 1.0 - 1e-6  # calibrated to the budget
    rebuilt = c.composed_epsilon_from_ledger(ledger, DELTA, accounting, sampling_rate=q)
    np.testing.assert_allclose(rebuilt.loc[records.index], records["epsilon_spent"], rtol=1e-9)
    with pytest.raises(PrivacyError, match="sampling_rate"):
        c.composed_epsilon_from_ledger(ledger, DELTA, accounting)
    summary = result["learning_summary"].iloc[0]
    assert summary["composition"] == f"{accounting}+poisson"
    line = SGDAgent.summary_lines({"learning_summary": result["learning_summary"]})[0]
    assert "add/remove neighbours" in line


def test_the_subsampled_noise_is_calibrated_below_the_unsampled_one():
    for accounting in ("rdp", "pld"):
        sampled = c.calibrated_noise_multiplier(10, 1.0, DELTA, accounting, 0.25)
        unsampled = c.calibrated_noise_multiplier(10, 1.0, DELTA, accounting)
        assert sampled < unsampled / 3  # ten uses at q = 1/4: 3.69 against 12.79 (RDP)
        # and the sampled z composes to the budget by dp-accounting's own accountant
        accountant = fresh_accountant(accounting)
        event = dp_accounting.PoissonSampledDpEvent(0.25, dp_accounting.GaussianDpEvent(sampled))
        accountant.compose(event, 10)
        assert 1.0 - 1e-6 < accountant.get_epsilon(DELTA) <= 1.0 + 1e-9


@pytest.mark.parametrize("accounting", ["rdp", "pld"])
def test_a_sample_of_the_whole_shard_is_accounted_exactly_as_the_unsampled_gaussian(accounting):
    sampled = PrivacyAccountant(4, epsilon=1.0, delta=DELTA, policy=KUses(3), accounting=accounting)
    plain = PrivacyAccountant(4, epsilon=1.0, delta=DELTA, policy=KUses(3), accounting=accounting)
    mechanism = gaussian()
    assert sampled.noise_multiplier_for(mechanism, 1.0) == plain.noise_multiplier_for(mechanism)
    for use in range(3):
        for record in range(4):
            rng = np.random.default_rng(use)
            _, event = sampled.release_sampled(
                np.array([record]), np.zeros(3), sampling_rate=1.0, mechanism=mechanism,
                sensitivity=0.5, rng=rng,
            )  # fmt: skip
            plain.release(record, np.zeros(3), mechanism=mechanism, sensitivity=1.0, rng=rng)
            assert event.accounting == dp_accounting.GaussianDpEvent(event.noise_multiplier())
            assert event.neighbours == "add-remove"
    assert np.array_equal(sampled.epsilon_spent, plain.epsilon_spent)  # bit for bit
    assert sampled.report()["neighbours"] == "add-remove"
    assert plain.report()["neighbours"] == "replace-one"


def test_one_record_per_node_under_poisson_runs_and_takes_it_at_every_visit():
    result = netsim.run(walk(records_per_node=1, batch=1, algorithm="dp-sgd-2"))
    records = result["privacy_records"]
    z = c.calibrated_noise_multiplier(2, 1.0, DELTA, "rdp")  # q = 1: the unsampled Gaussian
    accountant = fresh_accountant("rdp")
    accountant.compose(dp_accounting.GaussianDpEvent(z), 2)
    np.testing.assert_allclose(records["epsilon_spent"], accountant.get_epsilon(DELTA), rtol=1e-9)


# --- the sampling and the release --------------------------------------------------------------


def poisson_sgd(records_per_node: int, batch: int, *, seed: int = 0, policy: str = "unlimited"):
    rng = np.random.default_rng(seed)
    nodes = 3
    model = build_model("logreg", 2, 5)
    x = rng.normal(size=(nodes * records_per_node, 5))
    y = rng.integers(0, 2, nodes * records_per_node)
    accountant = PrivacyAccountant(
        x.shape[0], epsilon=1.0, delta=DELTA, policy=policy_by_name(policy),
        accounting="rdp" if policy != "unlimited" else "basic",
    )  # fmt: skip
    return PrivateSGD(
        model, x, y, accountant, noise=gaussian(), regularisation=0.0, rng=rng,
        initial=rng.normal(size=model.size), clip=0.5, records_per_node=records_per_node,
        batch=batch, sampling="poisson", sampling_rng=np.random.default_rng(seed + 1),
    )  # fmt: skip


def test_the_taken_batch_sizes_are_binomial():
    """Chi-square goodness of fit of 20,000 visits' sample sizes to Binomial(8, 1/4), at a
    level of 1e-4 (a fixed seed; an error in q of 0.01 gives a statistic far past it), and
    the mean within five standard errors √(rq(1 − q)/n)."""
    r, b, n = 8, 2, 20_000
    sgd = poisson_sgd(r, b)
    sizes = np.array([sgd.sample_records(1).size for _ in range(n)])
    q = b / r
    observed = np.bincount(sizes, minlength=r + 1)
    expected = n * stats.binom.pmf(np.arange(r + 1), r, q)
    pooled = expected >= 5  # the chi-square approximation needs expected counts of 5 or more
    tail = ~pooled
    observed = np.append(observed[pooled], observed[tail].sum())
    expected = np.append(expected[pooled], expected[tail].sum())
    assert stats.chisquare(observed, expected).pvalue > 1e-4
    assert abs(sizes.mean() - r * q) < 5 * math.sqrt(r * q * (1 - q) / n)
    taken = sgd.sample_records(2)
    assert ((taken >= 2 * r) & (taken < 3 * r)).all()  # only the visited node's shard


def test_the_release_is_the_taken_records_clipped_sum_over_the_expected_batch():
    sgd = poisson_sgd(8, 2, seed=4)  # no noise (the unlimited policy): the release itself
    sampling = np.random.default_rng(5)
    state = sgd.initial_state()
    for _ in range(30):
        expected_taken = 8 + np.flatnonzero(sampling.random(8) < 0.25)
        before = state.parameters
        state, _, updated = sgd.step(state, 1, 0.0)
        assert updated
        total = np.zeros_like(before)
        if expected_taken.size:
            gradients = sgd.model.per_example_gradients(
                before, sgd.x[expected_taken], sgd.y[expected_taken]
            )
            norms = np.linalg.norm(gradients, axis=1, keepdims=True)
            total = (gradients * np.minimum(1.0, 0.5 / norms)).sum(axis=0)
        eta = 1.0 / math.sqrt(state.updates)
        np.testing.assert_allclose(state.parameters, before - eta * total / 2, rtol=1e-12)
    # every record of the visited shard is charged each visit, taken or not
    assert (sgd.accountant.uses[8:16] == 30).all() and sgd.accountant.uses[:8].sum() == 0


def test_a_private_poisson_step_charges_the_shard_with_the_sampled_event():
    sgd = poisson_sgd(8, 2, policy="dp-sgd-3")
    state = sgd.initial_state()
    for visit in range(4):
        state, epsilon, updated = sgd.step(state, 0, float(visit))
        assert updated == (visit < 3)  # DP-SGD-3: the fourth visit of the node is refused
        assert (epsilon is None) == (visit == 3)
    accountant = sgd.accountant
    assert (accountant.uses[:8] == 3).all() and (accountant.refused[:8] == 1).all()
    assert accountant.composition == "rdp+poisson" and accountant.neighbours == "add-remove"
    assert "add/remove" in accountant.composition_reason
    assert isinstance(accountant.policy, KUses)


# --- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("learning", "key"),
    [
        ({"sampling": "bernoulli"}, r"learning\.sampling.*'cyclic' or 'poisson'"),
        ({"accounting": "basic"}, r"learning\.sampling poisson .* basic composition"),
        ({"privacy_unit": "node"}, r"learning\.sampling poisson .*learning\.privacy_unit node"),
        ({"noise": "k_norm_l2"}, r"learning\.sampling poisson needs Gaussian noise"),
        ({"clip": None}, r"learning\.sampling poisson needs learning\.clip"),
        ({"algorithm": "dp-sgd-inf"}, r"dp-sgd-inf needs a fixed noise multiplier"),
    ],
)
def test_poisson_settings_that_cannot_run_are_one_message(learning, key):
    with pytest.raises(ScenarioError, match=key):
        netsim.run(walk(**learning))


def test_poisson_is_refused_under_the_network_threat_model():
    scenario = {**walk(algorithm="dp-sgd", noise={"kind": "gaussian", "noise_multiplier": 2.0}),
                "privacy": {"model": "network"}}  # fmt: skip
    with pytest.raises(ScenarioError, match=r"learning\.sampling poisson is accounted under"):
        netsim.run(scenario)


def test_a_sampled_release_needs_tight_accounting_at_a_multiplier():
    accountant = PrivacyAccountant(4, epsilon=1.0, delta=DELTA, policy=KUses(2))  # basic
    with pytest.raises(PrivacyError, match="RDP or PLD at a noise multiplier"):
        accountant.release_sampled(
            np.arange(4), np.zeros(2), sampling_rate=0.5, mechanism=gaussian(),
            sensitivity=1.0, rng=np.random.default_rng(0),
        )  # fmt: skip
    free = PrivacyAccountant(4, epsilon=1.0, policy=Unlimited())
    with pytest.raises(PrivacyError):
        free.release_sampled(
            np.arange(4), np.zeros(2), sampling_rate=0.5, mechanism=gaussian(),
            sensitivity=1.0, rng=np.random.default_rng(0),
        )  # fmt: skip


# --- an empirical audit of one subsampled step that can fail -------------------------------------


@pytest.mark.parametrize(
    "accounting", ["rdp", pytest.param("pld", marks=pytest.mark.slow)]  # PLD: 11 s more
)
def test_audit_of_one_poisson_subsampled_gaussian_step(accounting):
    """One DP-SGD-1 release of a Poisson sample at q = 1/4 with the noise the accountant
    calibrates for (1, 1e-5), on add/remove neighbours (the record of value C = 1 absent, or
    present and taken with probability q): a threshold test on the release, with
    Clopper–Pearson bounds at 99.9 %, finds an ε lower bound below the accounted ε. With half
    that noise, or with the noise of an accountant that claimed a sampling rate eight times
    smaller than the one used, the same audit proves more than the ε claimed (600,000 draws
    a side; RDP's one-step curve is loose, so a claim of q/4 would give it 0.91 only)."""
    q, samples = 0.25, 600_000
    accountant = PrivacyAccountant(
        8, epsilon=1.0, delta=DELTA, policy=KUses(1), accounting=accounting
    )
    mechanism = gaussian()
    z = accountant.noise_multiplier_for(mechanism, q)
    _, event = accountant.release_sampled(
        np.arange(8), np.zeros(1), sampling_rate=q, mechanism=mechanism, sensitivity=1.0,
        rng=np.random.default_rng(0),
    )  # fmt: skip
    assert event.noise_scale == z and event.neighbours == "add-remove"  # the audited noise
    accounted = float(accountant.epsilon_spent.max())
    assert accounted <= 1.0 + 1e-9

    def lower_bound(noise_multiplier: float) -> float:
        rng = np.random.default_rng(11)
        absent, present = (
            audit.poisson_gaussian_scores(
                q, noise_multiplier, present=present, samples=samples, rng=rng
            )
            for present in (False, True)
        )
        thresholds = noise_multiplier * np.linspace(-1.0, 6.0, 57)
        return audit.threshold_epsilon_lower_bound(
            absent, present, thresholds, delta=DELTA, alpha=1e-3
        )

    assert lower_bound(z) < accounted  # 0.40 (rdp), 0.51 (pld) against 1
    assert lower_bound(z / 2) > 1.0  # the audit has the power to catch half the noise
    claimed = c.calibrated_noise_multiplier(1, 1.0, DELTA, accounting, q / 8)
    assert lower_bound(claimed) > 1.0  # caught: 1.14 (rdp), 1.91 (pld)


# --- the analysis table (analysis/poisson_sampling.py) -----------------------------------------


def test_the_readme_poisson_table_is_generated_from_runs_that_are_what_their_labels_say():
    import sys
    from pathlib import Path

    analysis = Path(__file__).resolve().parents[1] / "analysis"
    sys.path.insert(0, str(analysis))  # the scripts import their shared module by name
    try:
        import experiments
        import poisson_sampling
    finally:
        sys.path.remove(str(analysis))
    runs = pd.read_parquet(poisson_sampling.RESULTS)
    text = experiments.README.read_text(encoding="utf-8")
    tables = poisson_sampling.generated_tables(runs)
    assert "<!-- generated: poisson-sampling -->" in text
    assert experiments.with_tables(text, tables) == text  # no number typed by hand
    q = poisson_sampling.sampling_rate()
    expected = {
        "cyclic": c.calibrated_noise_multiplier(1, 1.0, DELTA, "rdp"),
        "poisson, amplified": c.calibrated_noise_multiplier(10, 1.0, DELTA, "rdp", q),
        "poisson, charged unsampled": c.calibrated_noise_multiplier(10, 1.0, DELTA, "rdp"),
    }
    for label, z in expected.items():
        of = runs[runs["row"] == label]
        assert len(of) >= 3
        np.testing.assert_allclose(of["noise_multiplier"], z, rtol=1e-9)
        assert (of["epsilon_spent"] <= 1.0 + 1e-9).all()
    assert (runs.loc[runs["row"] != "cyclic", "composition"] != "rdp").all()


def test_dp_sgd_uses_a_shard_while_the_subsampled_composition_fits():
    z, q = 4.0, 0.25
    accountant = PrivacyAccountant(
        4, epsilon=1.0, delta=DELTA, policy=policy_by_name("dp-sgd"), accounting="rdp"
    )
    mechanism = gaussian(noise_multiplier=z)
    rng = np.random.default_rng(0)
    uses = 0
    while True:
        try:
            accountant.release_sampled(
                np.arange(4), np.zeros(2), sampling_rate=q, mechanism=mechanism,
                sensitivity=1.0, rng=rng,
            )  # fmt: skip
        except BudgetExhausted:
            break
        uses += 1
    allowed = 0  # the most uses dp-accounting composes within (1, 1e-5)
    while True:
        reference = fresh_accountant("rdp")
        event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z))
        reference.compose(event, allowed + 1)
        if reference.get_epsilon(DELTA) > 1.0:
            break
        allowed += 1
    assert uses == allowed and allowed > 5  # unsampled, one use alone needs z = 4.05 (RDP)
