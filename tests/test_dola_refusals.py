"""DOLA when an example's budget runs out mid-run: a release the accountant refuses is not
published (the released values stay those of the round before), charges nothing, and is
counted as refused (``privacy_records.refused``, ``DolaLearner.refused_releases``, the run's
warning), for each of Li et al.'s algorithms (Alg. 1 ``laplace``, Alg. 2 ``gaussian``,
Alg. 3 ``sparse``).

The budget runs out because the mechanism below spends 1.5 times the share ε/passes it is
given (and declares so): with two passes over the data, an example's first release spends
0.75 ε and is admitted, its second would bring it to 1.5 ε and is refused. A round's releases
are charged as one batch (all or nothing), so the first round in which any node re-uses an
example is refused for every node.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import netsim
from netsim.algorithms.dola.learner import DolaLearner, RoundReport
from netsim.api import Mechanism, RunOutcome
from netsim.errors import BudgetExhausted
from netsim.privacy.mechanisms import k_norm_l2
from tests.test_dola import dola, tiny_data

HERE = "tests.test_dola_refusals"
ALGORITHMS = ["laplace", "gaussian", "sparse"]


class HalfAgainShare(Mechanism):
    """K-norm noise for 1.5 times the ε it is given (its event says so)."""

    def release(self, value, *, sensitivity, epsilon, rng):
        return k_norm_l2(value, sensitivity=sensitivity, epsilon=1.5 * epsilon, rng=rng)


# --- the learner: 3 nodes, shards of 3, 2 and 2 examples, 3 rounds (2 passes) ----------------

#: A_t of every round: the complete graph on 3 nodes with weights 1/3 (doubly stochastic), so
#: every node mixes every node's released value.
COMPLETE = sp.csr_matrix(np.full((3, 3), 1.0 / 3.0))

#: The training rows of the rounds (node 0's shard is [2, 6, 1], node 1's [4, 5], node 2's
#: [3, 0]): round 2 re-uses the first examples of nodes 1 and 2, 4 and 3.
ROUND_ROWS = [[2, 4, 3], [6, 5, 0], [1, 4, 3]]

#: The released values after round 1 (the last admitted one) at seed 7: their sum pins the
#: seed's noise draws, so "unchanged" is checked against the values the run really published.
PUBLISHED_SUM = {"laplace": -14.333951480412068, "gaussian": 3.849290990048367,
                 "sparse": -14.513028926687769}  # fmt: skip


def refusing_learner(algorithm: str, **keys: object) -> DolaLearner:
    """3 nodes on 7 examples (shards of 3, 2, 2), T = 3 rounds of one example: 2 passes, each
    release's share ε/2 = 0.5 at ε = 1, α_t = 1/t."""
    config = dola(algorithm=algorithm, epsilon=1.0, rounds=3, max_passes=2, **keys)
    data = tiny_data(n_train=6, features=3)
    return DolaLearner(config, data, 3, shard_seed=0, rng=np.random.default_rng(7))


def step(learner: DolaLearner, t: int) -> RoundReport:
    """Round ``t`` with every node online."""
    return learner.round(t, COMPLETE.indptr, COMPLETE.indices, COMPLETE.data, np.arange(3))


def play(
    learner: DolaLearner, rounds: int
) -> tuple[list[RoundReport], list[np.ndarray], list[np.ndarray]]:
    """Rounds 0 … rounds − 1 with every node online: the reports, and copies of the released
    values and of the iterates after each round."""
    reports, released, weights = [], [], []
    for t in range(rounds):
        reports.append(step(learner, t))
        released.append(learner.released.copy())
        weights.append(learner.weights.copy())
    return reports, released, weights


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_refused_round_publishes_nothing_new(algorithm):
    """Round 2 is refused: every node's released value stays that of round 1 (which differs
    from round 0's, so the check is not vacuous), and the round reports no event."""
    learner = refusing_learner(algorithm, mechanism=f"{HERE}:HalfAgainShare")
    np.testing.assert_array_equal(learner.table[:, :3], [[2, 6, 1], [4, 5, -1], [3, 0, -1]])
    assert learner.passes == 2 and learner.release_epsilon == 0.5
    reports, released, _ = play(learner, 3)
    assert [rows.tolist() for rows in learner.used_rows] == ROUND_ROWS
    assert [r.event.epsilon for r in reports[:2]] == [0.75, 0.75]
    assert reports[2].event is None
    assert not np.array_equal(released[1], released[0])
    np.testing.assert_array_equal(released[2], released[1])
    np.testing.assert_array_equal(learner.released_models(), learner.weights
                                  if algorithm == "sparse" else released[1])  # fmt: skip
    assert released[1].sum() == pytest.approx(PUBLISHED_SUM[algorithm], rel=1e-12)


def test_a_refused_gaussian_round_does_not_step():
    """Alg. 2's iterates are its releases: a refused round leaves every node's iterate where
    it was, and the running sum Σ_i w_i (the mean model) follows."""
    learner = refusing_learner("gaussian", mechanism=f"{HERE}:HalfAgainShare")
    _, _, weights = play(learner, 3)
    assert learner.released is learner.weights
    np.testing.assert_array_equal(weights[2], weights[1])
    np.testing.assert_allclose(learner.weight_sum, weights[1].sum(axis=0), rtol=0, atol=1e-15)
    np.testing.assert_allclose(learner.mean_weights(), weights[1].mean(axis=0), atol=1e-15)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_refused_round_charges_nothing_and_is_counted_as_refused(algorithm):
    """The ledger holds the 6 admitted releases only (each example's first use, 0.75 each);
    the 3 examples of round 2 are each counted refused once, node 0's fresh example 1 too (the
    round is charged as one batch), which therefore spends nothing."""
    learner = refusing_learner(algorithm, mechanism=f"{HERE}:HalfAgainShare")
    play(learner, 3)
    accountant = learner.accountant
    ledger = accountant.ledger_frame()
    assert ledger["record"].tolist() == [2, 4, 3, 6, 5, 0]
    assert ledger["use"].tolist() == [1] * 6 and ledger["epsilon"].tolist() == [0.75] * 6
    # output perturbation: 2 α_t L / h over 0.75; gradient perturbation: 2 L / h over 0.75
    scales = [8 / 3] * 6 if algorithm == "gaussian" else [8 / 3] * 3 + [4 / 3] * 3
    np.testing.assert_allclose(ledger["noise_scale"], scales, rtol=1e-12)
    records = accountant.records_frame()
    assert records["uses"].tolist() == [1, 0, 1, 1, 1, 1, 1]
    assert records["epsilon_spent"].tolist() == [0.75, 0, 0.75, 0.75, 0.75, 0.75, 0.75]
    assert records["refused"].tolist() == [0, 1, 0, 1, 1, 0, 0]
    assert accountant.last_refusal == (
        "record 3: 1 release(s) of ε 0.75, δ 0 would exceed the budget (1, 0)"
    )
    assert (learner.charged_releases, learner.refused_releases) == (6, 3)
    report = accountant.report()
    assert (report["uses"], report["refused"], report["spent_epsilon"]) == (6, 3, 0.75)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_refusals_go_on_once_the_budget_is_gone(algorithm):
    """A fourth round (past T; its examples are 2, 5, 0, each at its second use) is refused
    too: still nothing published or charged, 3 more refusals."""
    learner = refusing_learner(algorithm, mechanism=f"{HERE}:HalfAgainShare")
    reports, released, _ = play(learner, 4)
    assert reports[3].event is None
    np.testing.assert_array_equal(released[3], released[1])
    assert len(learner.accountant.ledger_frame()) == 6
    assert learner.accountant.records_frame()["refused"].tolist() == [1, 1, 1, 1, 1, 1, 0]
    assert (learner.charged_releases, learner.refused_releases) == (6, 6)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_algorithms_own_noise_past_its_budget_stops_the_run(algorithm):
    """Without ``dola.mechanism`` the budget is checked before the run (passes ≤ max_passes),
    so a release past it can only come from a learner driven beyond its T: rounds 3 and 4 (0-
    based) take examples to their second and third use at ε/2 = 0.5 each; the second use fits
    the budget, the third raises :class:`BudgetExhausted` naming the example (an error, not a
    withheld release: no refusal is counted), and nothing is charged for that round."""
    learner = refusing_learner(algorithm, delta=1e-5 if algorithm == "gaussian" else 0.0)
    play(learner, 4)
    with pytest.raises(BudgetExhausted, match=r"^record 3: 1 release\(s\) of ε 0\.5, δ "):
        step(learner, 4)
    accountant = learner.accountant
    assert accountant.ledger_frame()["record"].tolist() == [2, 4, 3, 6, 5, 0, 1, 4, 3, 2, 5, 0]
    assert accountant.records_frame()["uses"].tolist() == [2, 1, 2, 2, 2, 2, 1]
    assert accountant.records_frame()["refused"].tolist() == [0] * 7
    assert accountant.run_guarantee().epsilon == pytest.approx(1.0, rel=1e-12)


# --- a run: 4 nodes, 30 examples (shards of 8, 8, 7, 7), 9 rounds -----------------------------


def refusing_run(algorithm: str) -> RunOutcome:
    """Rounds 1–7 use every example once (admitted); rounds 8 and 9 re-use the 7-example
    shards' first examples, so both are refused for all 4 nodes."""
    return netsim.run({
        "name": "dola-refusals", "seed": 3, "nodes": 4, "duration": 9,
        "topology": {"kind": "ring", "k": 1},
        "dola": {
            "data": {"name": "synthetic_ball", "options": {"examples": 40, "features": 3}},
            "algorithm": algorithm, "epsilon": 1.0, "max_passes": 2,
            "mechanism": f"{HERE}:HalfAgainShare", "strong_convexity": 1.0, "radius": 1.0,
            "evaluate_every": 1, "regret_checkpoints": 0,
        },
    })  # fmt: skip


#: The released values' noise scale of rounds 1–9 in dola_rounds: 2 α_t L / h over ε = 0.75
#: (α_t = 1/t) for output perturbation, 2 L / h over 0.75 for gradient perturbation; a refused
#: round publishes no release, so rounds 8 and 9 keep round 7's.
OUTPUT_SCALES = [2 / (t * 0.75) for t in (1, 2, 3, 4, 5, 6, 7, 7, 7)]
ROUND_SCALES = {"laplace": OUTPUT_SCALES, "sparse": OUTPUT_SCALES, "gaussian": [8 / 3] * 9}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_run_whose_budget_runs_out_says_so_and_charges_only_what_it_published(algorithm):
    outcome = refusing_run(algorithm)
    (warning,) = outcome.warnings
    assert warning == (
        f"dola: mechanism {HERE}:HalfAgainShare: the noise mechanism was refused on some "
        "releases: 8 of 36 node releases withheld (last refusal: record 12: 1 release(s) of "
        "ε 0.75, δ 0 would exceed the budget (1, 0)); a release may spend ε/passes = 0.5"
    )
    ledger, records = outcome["privacy_ledger"], outcome["privacy_records"]
    assert len(ledger) == 28 and set(ledger["use"]) == {1} and set(ledger["epsilon"]) == {0.75}
    assert records["refused"].sum() == 8 and records["uses"].sum() == 28
    # the 8-example shards' last examples came up in round 8 only: refused, never charged
    unused = records[records["uses"] == 0]
    assert unused["record"].tolist() == [3, 14] and unused["refused"].tolist() == [1, 1]
    assert (unused["epsilon_spent"] == 0).all()
    assert records["refused"].max() == 1 and records["epsilon_spent"].max() == 0.75
    summary = outcome["dola_summary"].iloc[0]
    assert (summary["rounds"], summary["passes"]) == (9, 2)
    assert summary["epsilon_spent_max"] == 0.75
    assert summary["guarantee"] == "ε-DP with ε = 0.75"
    rounds = outcome["dola_rounds"]
    assert rounds["round"].tolist() == list(range(1, 10))
    np.testing.assert_allclose(rounds["noise_scale"], ROUND_SCALES[algorithm], rtol=1e-12)


@pytest.mark.parametrize("algorithm", ["laplace", "gaussian"])
def test_the_released_models_of_a_refused_round_are_the_last_published(algorithm):
    """Alg. 1's w̃ and Alg. 2's w̃ (= w) are the released models: after the refused rounds 8
    and 9 their test accuracy is round 7's. (Alg. 3's released model Proj[soft(p)] is
    recomputed from the mixed duals in every round, refused or not.)"""
    rounds = refusing_run(algorithm)["dola_rounds"].set_index("round")
    for column in ("accuracy_released_mean", "accuracy_released_node"):
        assert rounds.loc[8, column] == rounds.loc[9, column] == rounds.loc[7, column]
