"""Private gossip learning in rounds mode under RDP/PLD (Hegedűs, Berta, Jelasity 2016 Alg. 1
with Gaussian noise composed per record, Mironov 2017): the round's batched charges are the
releases of exact mode one after the other, its noise is the noise the ledger charges, what it
cannot run is refused when the run is built, and its accuracy curve is exact mode's (what
rounds mode approximates is listed in netsim/protocols/rounds.py)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas.testing as pd_testing
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import netsim
from netsim.algorithms.gossip_learning.rounds import arrival_ranks
from netsim.errors import BudgetExhausted, ScenarioError
from netsim.privacy.accountant import PrivacyAccountant, policy_by_name
from netsim.privacy.mechanisms import build_mechanism, gaussian_noise
from netsim.registry import REGISTRY

RECORDS = 6


def gaussian(**settings: object):
    """The registered ``gaussian`` mechanism with ``settings`` as a scenario gives them."""
    _, config = REGISTRY.lookup(("mechanism",), "gaussian")
    return build_mechanism(config(kind="gaussian", **settings))


# --- the batched charge is the releases one after the other ---------------------------------


@settings(max_examples=60, deadline=None)
@given(
    rounds=st.lists(
        st.lists(st.integers(0, RECORDS - 1), min_size=1, max_size=14), min_size=1, max_size=5
    ),
    accounting=st.sampled_from(["rdp", "pld"]),
    # (policy, fixed noise multiplier): the composed budget binds, the k of DP-SGD-k binds
    # (calibrated, or a multiplier with room for more than k uses)
    policy=st.sampled_from([("dp-sgd", 1.3), ("dp-sgd-3", None), ("dp-sgd-2", 6.0)]),
    epsilon=st.sampled_from([1.0, 2.5, 6.0]),
)
def test_a_rounds_charges_are_exact_modes_releases_one_after_the_other(
    rounds: list[list[int]], accounting: str, policy: tuple[str, float | None], epsilon: float
) -> None:
    """Each round's arrivals (records, repeated when a node receives several models) charged
    at once by ``charge_at_multiplier`` leave every table of the accountant as releasing them
    one after the other does (``_release_at_multiplier``, exact mode's path): the ledger row
    for row, the records' uses, composed ε and refusals, the last refusal's reason."""
    name, fixed = policy
    mechanism = gaussian() if fixed is None else gaussian(noise_multiplier=fixed)
    budget = {"epsilon": epsilon, "delta": 1e-5, "accounting": accounting}
    one_by_one = PrivacyAccountant(RECORDS, policy=policy_by_name(name), **budget)
    at_once = PrivacyAccountant(RECORDS, policy=policy_by_name(name), **budget)
    rng = np.random.default_rng(0)
    multiplier = at_once.noise_multiplier_for(mechanism)
    assert multiplier is not None
    _, event = mechanism.release_at_multiplier(
        np.zeros(3), sensitivity=2.0, noise_multiplier=multiplier, delta=1e-5, rng=rng
    )
    counts = np.zeros(RECORDS, dtype=np.int64)
    for time, batch in enumerate(rounds):
        for record in batch:
            try:
                one_by_one.release(
                    record, np.zeros(3), mechanism=mechanism, sensitivity=2.0, rng=rng,
                    time=float(time),
                )  # fmt: skip
            except BudgetExhausted:
                pass
        records = np.array(batch, dtype=np.int64)
        ranks, _ = arrival_ranks(records, counts)
        admitted = at_once.charge_at_multiplier(records, ranks, event, time=float(time))
        for record in set(batch):  # once refused, a record is refused for the whole round
            assert (np.diff(admitted[records == record].astype(int)) <= 0).all()
    pd_testing.assert_frame_equal(at_once.ledger_frame(), one_by_one.ledger_frame())
    pd_testing.assert_frame_equal(at_once.records_frame(), one_by_one.records_frame())
    assert at_once.last_refusal == one_by_one.last_refusal
    assert at_once.composition == one_by_one.composition


# --- the noise, and what rounds mode refuses -------------------------------------------------


def _private_data(mode: str, seed: int, **learning: object) -> dict:
    """Breast Cancer on 455 nodes (one training record each), gossip learning with the merge
    variant (Ormándi et al. 2013) under dp-sgd: Gaussian noise at z = 1.1, composed by RDP
    against (16, 1e-5) per record, so a record is refused after about a dozen uses, by
    midway through a 20 s run (the models' accuracy rises from 0.45 to 0.66 meanwhile)."""
    return {
        "name": f"gl-private-{mode}", "seed": seed, "nodes": 455, "duration": "20s",
        "topology": {"kind": "k_out", "k": 20},
        "links": {"delay": {"dist": "uniform", "low": "10ms", "high": "50ms"}},
        "gossip_learning": {"period": "1s", "mode": mode, "merge": "average"},
        "learning": {
            "dataset": {"name": "breast_cancer"}, "algorithm": "dp-sgd",
            "noise": {"kind": "gaussian", "noise_multiplier": 1.1}, "accounting": "rdp",
            "epsilon": 16.0, "delta": 1e-5, "evaluate_every": 5, **learning,
        },
        "metrics": {"sample_every": "1s"},
    }  # fmt: skip


@pytest.mark.parametrize("accounting", ["rdp", "pld"])
def test_rounds_gaussian_noise_is_the_noise_the_ledger_charges(accounting: str) -> None:
    """The audit's link for rounds mode under rdp/pld: the noise a round adds to a step is
    N(0, σ²I) at the σ the ledger charged for that use (``noise_scale``, z·Δ). Two-sample KS
    on the noise vectors' L2 norms, 4,000 draws each: with σ 10% off the statistic is about
    0.3; with the right σ below 0.06 (exceeded by chance with p ≈ 1e-6)."""
    from netsim.scenario.loader import validate_scenario
    from netsim.scenario.runner import run_in_memory

    data = _private_data("rounds", 4, accounting=accounting)
    data.update(nodes=60, duration="3s")
    built, tables = run_in_memory(validate_scenario(data, source="audit", base_dir=None))
    ledger = tables["privacy_ledger"]
    assert (ledger["mechanism"] == "gaussian_multiplier").all()
    sigma = float(ledger["noise_scale"].iloc[0])
    assert sigma == pytest.approx(1.1 * float(ledger["sensitivity"].iloc[0]))
    models = built["gossip_learning"].models
    d = int(models.parameters.shape[1])
    draws = 4000
    added = np.zeros((draws, d))
    models._add_noise(added, np.full(draws, float(ledger["epsilon"].iloc[0])))
    claimed = gaussian_noise(draws, d, sigma, np.random.default_rng(9))
    statistic = stats.ks_2samp(np.linalg.norm(added, axis=1), np.linalg.norm(claimed, axis=1))
    assert statistic.statistic < 0.06, statistic


@pytest.mark.parametrize(
    ("learning", "named"),
    [
        ({"noise": "k_norm_l2", "algorithm": "dp-sgd-5"}, "KNormL2Mechanism"),
        ({"noise": "gaussian", "algorithm": "dp-sgd-inf"}, "dp-sgd-inf"),
    ],
)
def test_rounds_mode_refuses_what_it_cannot_draw_in_blocks_under_rdp(
    learning: dict, named: str
) -> None:
    """Under rdp/pld rounds mode runs Gaussian noise at one noise multiplier per run; noise
    given a share of ε per use (a non-Gaussian mechanism, or DP-SGD-∞'s halving shares) is
    refused when the run is built, naming the key."""
    data = _private_data("rounds", 1, **learning)
    with pytest.raises(ScenarioError, match=rf"learning\.noise gaussian.*{named}"):
        netsim.run(data)


@pytest.mark.parametrize("every", ["1s", "2s", "3s"])
def test_a_sample_at_t_sees_the_sends_exact_mode_made_before_t(every: str) -> None:
    """Rounds fall at (k + ½)Δ, the mean instant of exact mode's k-th sends (node i's at
    kΔ + φ_i): a sample at t = mΔ follows exactly m rounds, whatever the sample period. With
    rounds at kΔ a sample at a round's instant came first when its timeout was the older
    (a sample period longer than Δ) and saw one round fewer."""
    data = _private_data("rounds", 2, algorithm="sgd")
    data.update(nodes=60, duration="9s", metrics={"sample_every": every})
    tables = netsim.run(data).tables
    rounds = np.unique(tables["sgd_visits"]["time"].to_numpy())
    np.testing.assert_allclose(rounds, np.arange(9) + 0.5)
    for t in tables["gossip_learning_accuracy"]["time"]:
        assert np.count_nonzero(rounds < t) == round(t), t
        assert not np.isclose(rounds, t).any(), t


# --- the accuracy curve: a paired test that sees a lag of 0.007 ------------------------------

#: The lag of rounds mode behind exact mode's mean accuracy the full test must see.
LAG = 0.007
#: The level of the paired t-test: a difference is found when p < LEVEL. 1%, not 5%: the
#: documented approximations may leave a real difference far below LAG (64 seeds put rounds
#: mode 0.002 ahead, p = 0.13) that a test this powerful would too often call a difference.
LEVEL = 0.01
#: Seeds of the default run, and of the full run (``-m slow``).
FEW_SEEDS = tuple(range(1, 9))
ALL_SEEDS = tuple(range(1, 33))


@functools.cache
def _accuracy(mode: str, seed: int) -> np.ndarray:
    """The mean test accuracy across the models at every sample (each second) of one run."""
    tables = netsim.run(_private_data(mode, seed)).tables
    return tables["gossip_learning_accuracy"]["accuracy_mean"].to_numpy()


@dataclass(frozen=True)
class Paired:
    """A paired t-test of rounds mode's accuracy against exact mode's over seeds (independent
    runs; the samples of one run are not), and its power against a lag."""

    difference: float  # mean over seeds of the weighted difference, rounds − exact
    low: float  # its 99% confidence interval
    high: float
    p: float
    power: float  # of the two-sided test at LEVEL against a difference of −lag

    @property
    def agrees(self) -> bool:
        """Whether the test finds no difference at :data:`LEVEL`."""
        return self.p >= LEVEL


def paired(seeds: tuple[int, ...], *, shift: float = 0.0, against: float = LAG) -> Paired:
    """:class:`Paired` over ``seeds``, rounds mode's accuracy lowered by ``shift`` (a lag put
    in on purpose). Per seed the difference of the two runs' mean accuracy is averaged over
    the sample times weighted by the inverse of its spread across seeds at that time (the sum
    of the two modes' variances): the accuracy of models that have learnt varies from run to
    run several times more than at the start (standard deviation of a seed's difference 0.008
    over the first 5 s, 0.04 over the last 5, 64 seeds), and a lag of the whole curve is seen
    best where the runs vary least (0.0093 weighted, 0.024 unweighted). A shift moves no
    variance, so it leaves the weights as they are. The power against a lag of ``against`` is
    the noncentral t distribution's at the observed spread of the seeds' differences."""
    exact = np.array([_accuracy("exact", s) for s in seeds])
    rounds = np.array([_accuracy("rounds", s) for s in seeds]) - shift
    spread = np.maximum(exact.var(axis=0, ddof=1) + rounds.var(axis=0, ddof=1), 1e-12)
    differences = (rounds - exact) @ (1.0 / spread) / np.sum(1.0 / spread)
    test = stats.ttest_1samp(differences, 0.0)
    interval = test.confidence_interval(1.0 - LEVEL)
    n = differences.size
    error = differences.std(ddof=1) / math.sqrt(n)
    critical = stats.t.ppf(1.0 - LEVEL / 2, n - 1)
    noncentral = against / error
    power = stats.nct.sf(critical, n - 1, noncentral) + stats.nct.cdf(-critical, n - 1, noncentral)
    return Paired(
        float(differences.mean()), float(interval.low), float(interval.high),
        float(test.pvalue), float(power),
    )  # fmt: skip


def test_private_rounds_mode_has_exact_modes_accuracy_curve() -> None:
    """8 seeds of private gossip learning (Gaussian, RDP) in both modes: the paired t-test
    finds no difference in accuracy, and it would see a lag of 0.015 (power ≥ 0.9, and with
    0.015 put in on purpose it does). The full test (``-m slow``) sees 0.007."""
    real = paired(FEW_SEEDS, against=0.015)
    assert real.power >= 0.9, real
    assert real.agrees, real
    assert not paired(FEW_SEEDS, shift=0.015).agrees


@pytest.mark.slow
def test_private_rounds_mode_does_not_trail_exact_mode_by_0_007() -> None:
    """32 seeds: the paired t-test finds no difference in accuracy, has power ≥ 0.9 against
    a lag of 0.007 (an earlier audit saw rounds mode trail exact mode by that much on Breast
    Cancer, before its rounds were moved to (k + ½)Δ), and with that lag put in on purpose
    it finds it."""
    real = paired(ALL_SEEDS)
    assert real.power >= 0.9, real
    assert real.agrees, real
    assert not paired(ALL_SEEDS, shift=LAG).agrees
