"""Gossip learning in exact and in rounds mode agree on what the papers measure: the accuracy
curve, the spread across models, the updates, the refusals and the ε spent (Hegedűs et al.
2016 Alg. 1; what rounds mode approximates is listed in netsim/protocols/rounds.py)."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import netsim
from netsim.algorithms.gossip_learning.rounds import arrival_ranks, chain_levels, descend
from netsim.learning.models import build_model, model_test_accuracies

SEEDS = (1, 2, 3)
NODES = 300


@functools.cache
def _run(
    mode: str, seed: int, algorithm: str, merge: str = "none", duration: str = "20s"
) -> dict:
    data = {
        "name": f"gl-{mode}", "seed": seed, "nodes": NODES, "duration": duration,
        "topology": {"kind": "k_out", "k": 20},
        "links": {"delay": {"dist": "uniform", "low": "10ms", "high": "50ms"}},
        "gossip_learning": {"period": "1s", "mode": mode, "merge": merge},
        "learning": {"dataset": {"name": "spambase"}, "algorithm": algorithm,
                     "noise": "k_norm_l2", "epsilon": 1.0, "evaluate_every": 5},
        "metrics": {"sample_every": "5s"},
    }  # fmt: skip
    tables = netsim.run(data).tables
    summary = tables["learning_summary"].iloc[0]
    spread = tables["gossip_learning_accuracy"]
    evaluated = tables["accuracy"]
    return {
        "accuracy": spread["accuracy_mean"].to_numpy(),
        "times": spread["time"].to_numpy(),
        "age": spread["updates_mean"].to_numpy(),
        "by_age": evaluated.groupby("updates")["accuracy"].agg(["mean", "count"]),
        "range": float(spread["accuracy_max"].iloc[-1] - spread["accuracy_min"].iloc[-1]),
        "updates": int(summary["updates"]),
        "refused": int(summary["refused"]),
        "visits": int(summary["visits"]),
        "epsilon": float(summary["epsilon"]),
        "record_of_node": tables["sgd_visits"].groupby("node")["row"].unique(),
    }


@pytest.mark.parametrize(
    ("algorithm", "merge"),
    [("sgd", "none"), ("dp-sgd-1", "none"), ("dp-sgd-inf", "none"), ("sgd", "average")],
)  # fmt: skip
def test_exact_and_rounds_agree(algorithm: str, merge: str) -> None:
    exact = [_run("exact", s, algorithm, merge) for s in SEEDS]
    rounds = [_run("rounds", s, algorithm, merge) for s in SEEDS]
    for key in ("visits", "updates", "refused"):
        e = np.array([r[key] for r in exact], dtype=float)
        o = np.array([r[key] for r in rounds], dtype=float)
        # one period's messages (N) of slack: exact mode's first ticks fall anywhere in [0, Δ)
        assert abs(e.mean() - o.mean()) <= NODES + 4 * math.sqrt(e.var() + o.var() + 1), key
    assert [r["epsilon"] for r in exact] == pytest.approx([r["epsilon"] for r in rounds])
    # the accuracy curve: at every sample, the mean accuracy within 4 standard errors of the
    # difference of the seed means, floored at the binomial error of one model's accuracy on
    # Spambase's test split (461 rows); and the models' age (mean updates) within 10%
    assert all(np.array_equal(r["times"], exact[0]["times"]) for r in exact + rounds)
    floor = math.sqrt(0.25 / 461)
    for sample, time in enumerate(exact[0]["times"]):
        e = np.array([r["accuracy"][sample] for r in exact])
        o = np.array([r["accuracy"][sample] for r in rounds])
        allowed = 4 * math.sqrt((e.var() + o.var()) / len(SEEDS)) + floor
        assert abs(e.mean() - o.mean()) <= allowed, f"mean accuracy at {time:g} s"
        # rounds fall at (k + ½)Δ, exact mode's ticks anywhere in [kΔ, (k + 1)Δ): one
        # period's growth of slack
        e_age = np.mean([r["age"][sample] for r in exact])
        o_age = np.mean([r["age"][sample] for r in rounds])
        growth = np.mean([r["age"][-1] for r in exact]) / exact[0]["times"][-1]
        allowed = 0.1 * e_age + growth + 0.5
        assert abs(e_age - o_age) <= allowed, f"mean updates per model at {time:g} s"
    spread_e = np.mean([r["range"] for r in exact])
    spread_o = np.mean([r["range"] for r in rounds])
    assert abs(spread_e - spread_o) <= 0.15 + 4 * floor


@pytest.mark.parametrize("algorithm", ["sgd", "dp-sgd-inf"])
def test_the_learning_curve_by_model_age_is_the_same_in_both_modes(algorithm: str) -> None:
    """The whole accuracy curve, by the models' age: the mean accuracy of the models evaluated
    after u updates agrees, for every u that at least 50 evaluations reach in every run of
    both modes (6 seeds of 40 s each), within 4 standard errors of the difference of the seed means
    (the evaluations of one run are correlated: models share their history) plus a quarter
    of one model's binomial error on the test split (the curve over simulated time is held
    by :func:`test_exact_and_rounds_agree`). Not under DP-SGD-1: its models stop at one or
    two noisy steps, whose accuracy varies from seed to seed more than 6 seeds can pin."""
    seeds = range(1, 7)
    exact = [_run("exact", seed, algorithm, duration="40s") for seed in seeds]
    rounds = [_run("rounds", seed, algorithm, duration="40s") for seed in seeds]
    ages = set.intersection(
        *(set(r["by_age"].index[r["by_age"]["count"] >= 50]) for r in exact + rounds)
    )
    assert len(ages) >= 3
    floor = math.sqrt(0.25 / 461) / 4
    for age in sorted(ages):
        e = np.array([r["by_age"].loc[age, "mean"] for r in exact])
        o = np.array([r["by_age"].loc[age, "mean"] for r in rounds])
        allowed = 4 * math.sqrt((e.var(ddof=1) + o.var(ddof=1)) / len(seeds)) + floor
        assert abs(e.mean() - o.mean()) <= allowed, f"mean accuracy after {age} updates"


@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=40),
    average=st.booleans(),
)
def test_sends_stepped_level_by_level_are_the_sends_taken_one_after_the_other(pairs, average):
    """The round's sends in the order given, one after the other (a node sends the model it
    holds at its turn; the receiver keeps the stepped model, with ``average`` first averaged
    with its own), equal the sends stepped level by level from :func:`chain_levels`' sources.
    A model is its history: the sends that made it, and what each met."""
    senders = np.array([s for s, _ in pairs], dtype=np.int64)
    targets = np.array([t for _, t in pairs], dtype=np.int64)
    start = {node: (f"start {node}",) for node in range(8)}
    held_now = dict(start)
    sequential = []
    for k, (sender, target) in enumerate(pairs):
        model = (held_now[sender], held_now[target]) if average else held_now[sender]
        held_now[target] = (model, k)
        sequential.append(held_now[target])
    latest = np.full(8, -1, dtype=np.int64)
    held, local, level = chain_levels(senders, targets, latest, average)
    assert (latest == -1).all()
    out: list = [None] * len(pairs)
    for depth in sorted(set(level.tolist())):
        for k in np.flatnonzero(level == depth):
            sent = out[held[k]] if held[k] >= 0 else start[int(senders[k])]
            mine = out[local[k]] if local[k] >= 0 else start[int(targets[k])]
            assert sent is not None and mine is not None  # computed at a lower level
            out[k] = ((sent, mine) if average else sent, int(k))
    assert out == sequential


def test_every_arrival_is_stepped_with_the_receivers_record() -> None:
    """A node holds one record: in both modes all its visits use it (in rounds mode too the
    receiver's, never the sender's), and the modes give each node the same record."""
    exact, rounds = _run("exact", 1, "sgd"), _run("rounds", 1, "sgd")
    for run in (exact, rounds):
        assert (run["record_of_node"].map(len) == 1).all()
    shared = exact["record_of_node"].index.intersection(rounds["record_of_node"].index)
    assert len(shared) > NODES // 2
    assert [r[0] for r in exact["record_of_node"][shared]] == [
        r[0] for r in rounds["record_of_node"][shared]
    ]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=60))
def test_arrival_ranks_number_the_arrivals_at_each_node_in_order(keys):
    counts = np.zeros(10, dtype=np.int64)
    ranks, last = arrival_ranks(np.array(keys, dtype=np.int64), counts)
    assert ranks.tolist() == [keys[:i].count(k) for i, k in enumerate(keys)]
    assert last.tolist() == [k not in keys[i + 1 :] for i, k in enumerate(keys)]
    assert not counts.any()  # left zeroed for the next round


def test_descend_is_the_step_of_eq_8_and_reports_a_non_finite_row():
    rng = np.random.default_rng(4)
    w, g = rng.normal(size=(30, 5)), rng.normal(size=(30, 5))
    eta = rng.uniform(0.01, 1.0, 30)
    out = np.empty_like(w)
    assert descend(w, g, eta, 1e-4, out)
    np.testing.assert_array_equal(out, w - eta[:, None] * (1e-4 * w + g))
    g[7, 2] = np.inf
    assert not descend(w, g, eta, 1e-4, out)


@pytest.mark.parametrize("model", ["logreg", "svm"])
def test_test_accuracies_are_those_of_the_predictions(model):
    """The counted signs give each model's accuracy as its predictions do (Spambase-shaped:
    binary, 57 features; blocks of models smaller than the batch)."""
    linear = build_model(model, classes=2, features=57)
    rng = np.random.default_rng(5)
    params = rng.normal(size=(700, 57))
    x, y = rng.normal(size=(461, 57)), rng.integers(0, 2, 461)
    expected = np.mean(linear.predict_many(params, x) == y[None, :], axis=1)
    np.testing.assert_array_equal(model_test_accuracies(linear, params, x, y), expected)


def test_test_accuracies_decide_scores_near_zero_in_float64():
    """Scores within float32 rounding of 0 (here ±1e-9 on one test row) and weights whose
    float32 copy or sums overflow take the float64 path: the accuracies stay those of the
    float64 predictions."""
    linear = build_model("logreg", classes=2, features=57)
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(461, 57)), rng.integers(0, 2, 461)
    first = x[0] / np.dot(x[0], x[0])
    params = rng.normal(size=(200, 57))
    params -= np.outer(params @ x[0], first)  # orthogonal to the first test row
    params += np.outer(rng.choice([-1e-9, 1e-9], 200), first)
    params[:3] *= 1e35
    params[3:20] = 1e38 * np.sign(rng.normal(size=(17, 57)))  # float32 sums overflow: NaN
    expected = np.mean(linear.predict_many(params, x) == y[None, :], axis=1)
    np.testing.assert_array_equal(model_test_accuracies(linear, params, x, y), expected)


@pytest.mark.parametrize("noise", ["k_norm_l2", "l1"])
def test_rounds_noise_is_the_noise_the_ledger_charges(noise: str) -> None:
    """The audit's link for rounds mode: the noise a round adds to a step has the distribution
    of the mechanism's noise at the ``noise_scale`` the ledger charged for that use (the
    mechanisms themselves are audited at their scale in tests/test_privacy.py). Two-sample KS
    on the noise vectors' L2 norms, 4,000 draws each: with half the noise the statistic is
    near 1; with the right noise below 0.06 (exceeded by chance with p ≈ 1e-6)."""
    from scipy.stats import ks_2samp

    from netsim.scenario.loader import validate_scenario
    from netsim.scenario.runner import run_in_memory

    data = {
        "name": "gl-audit", "seed": 4, "nodes": 60, "duration": "3s",
        "topology": {"kind": "k_out", "k": 10},
        "gossip_learning": {"period": "1s", "mode": "rounds"},
        "learning": {"dataset": {"name": "spambase"}, "algorithm": "dp-sgd-inf",
                     "noise": noise, "epsilon": 1.0},
    }  # fmt: skip
    built, tables = run_in_memory(validate_scenario(data, source="audit", base_dir=None))
    ledger = tables["privacy_ledger"]
    charged = ledger[ledger["use"] == 1].iloc[0]
    models = built["gossip_learning"].models
    sgd = models.agent.sgd
    d = int(models.parameters.shape[1])
    draws = 4000
    added = np.zeros((draws, d))
    models._add_noise(added, np.full(draws, float(charged["epsilon"])))
    claimed = sgd.mechanism.noise(draws, d, float(charged["noise_scale"]), np.random.default_rng(9))
    statistic = ks_2samp(np.linalg.norm(added, axis=1), np.linalg.norm(claimed, axis=1)).statistic
    assert statistic < 0.06, statistic
