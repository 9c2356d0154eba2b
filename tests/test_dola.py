"""DOLA (Li et al.): mixing matrices, the update rules, privacy accounting, metrics, bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from netsim.algorithms.dola import calibration, kernels
from netsim.algorithms.dola.config import DolaConfig
from netsim.algorithms.dola.learner import LOSS_CODES, DolaLearner
from netsim.algorithms.dola.mixing import MixingSchedule, check_round, union_components
from netsim.cli import main
from netsim.errors import DolaConfigError, ScenarioError
from netsim.learning.losses import loss_derivative, loss_values
from netsim.learning.online_data import OnlineData, passes, shard_rows, synthetic_ball
from netsim.network import topology as topologies
from netsim.privacy import mechanisms
from netsim.scenario.loader import validate_scenario
from netsim.scenario.runner import run_in_memory
from tests.test_bad_input import cli_error, write

# --- mixing matrices (Assumption 2) --------------------------------------------------------


#: The papers' synthetic setting (data in the unit ball): λ = 1, R = 1 unless a test says.
UNIT_BALL = {"strong_convexity": 1.0, "radius": 1.0}


def dola(**keys: object) -> DolaConfig:
    """A ``dola`` section's config with ``keys`` (the data key is not read by the learner)."""
    return DolaConfig(data={"name": "synthetic_ball"}, **{**UNIT_BALL, **keys})


@settings(max_examples=40)
@given(
    n=st.integers(2, 40),
    p=st.floats(0.05, 0.9),
    online_share=st.floats(0.0, 1.0),
    fraction=st.floats(0.05, 1.0),
    count=st.integers(0, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_mixing_matrices_are_doubly_stochastic_on_the_used_links(
    n, p, online_share, fraction, count, seed
):
    rng = np.random.default_rng(seed)
    topology = topologies.erdos_renyi(n, p, seed % 1000)
    if (topology.degrees() == 0).any():
        return  # rejected by check_mixable (tested below)
    schedule = MixingSchedule(topology, fraction=fraction, count=count)
    online = rng.random(n) < online_share
    mixing = schedule.draw(online, rng)
    a = mixing.matrix.toarray()
    assert (a >= 0).all()
    np.testing.assert_allclose(a.sum(axis=0), 1.0, atol=1e-12)
    np.testing.assert_allclose(a.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(a, a.T)
    adjacency = np.zeros((n, n), dtype=bool)
    for i in range(n):
        adjacency[i, topology.neighbours(i)] = True
    off = a.copy()
    np.fill_diagonal(off, 0.0)
    used = off > 0
    assert not (used & ~adjacency).any(), "a weight on a pair that is not a link"
    assert not used[~online].any() and not used[:, ~online].any(), "an offline node mixes"
    np.testing.assert_array_equal(a[~online][:, ~online], np.eye(int((~online).sum())))
    assert mixing.links == int(used.sum()) // 2
    assert mixing.eta == pytest.approx(a[a > 0].min())
    # every online node talks to at least as many online neighbours as it chose
    online_degree = (adjacency & online[None, :]).sum(axis=1)
    want = np.minimum(count if count else np.ceil(fraction * online_degree), online_degree)
    assert (used.sum(axis=1)[online] >= want[online]).all()
    # Metropolis–Hastings weights
    degree = used.sum(axis=1)
    for i, j in zip(*np.nonzero(used), strict=True):
        assert a[i, j] == pytest.approx(1.0 / (1 + max(degree[i], degree[j])))
    check = check_round(mixing, online)
    assert check.row_sum_error < 1e-12 and check.column_sum_error < 1e-12


def test_fraction_one_and_everyone_online_uses_every_link():
    topology = topologies.random_regular(30, 4, 3)
    schedule = MixingSchedule(topology, fraction=1.0)
    mixing = schedule.draw(np.ones(30, bool), np.random.default_rng(0))
    assert mixing.links == topology.edge_count
    assert mixing.eta == pytest.approx(1 / 5)  # 4-regular: 1/(1+4) off-diagonal and diagonal


def test_time_invariant_mixing_is_fixed_and_ignores_churn():
    topology = topologies.ring(12, 2)
    schedule = MixingSchedule(topology, time_invariant=True)
    rng = np.random.default_rng(1)
    first = schedule.draw(np.ones(12, bool), rng).matrix
    second = schedule.draw(rng.random(12) < 0.5, rng).matrix
    assert (first != second).nnz == 0
    assert first.nnz == 12 + 2 * topology.edge_count


@settings(max_examples=60)
@given(
    n=st.integers(1, 30),
    density=st.floats(0.0, 0.3),
    matrices=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_union_components_matches_scipy_on_the_online_subgraph(n, density, matrices, seed):
    from scipy.sparse.csgraph import connected_components

    rng = np.random.default_rng(seed)
    graphs = [sp.random(n, n, density=density, format="csr", random_state=rng) for _ in
              range(matrices)]  # fmt: skip
    online = rng.random(n) < 0.7
    union = sum(graphs[1:], graphs[0])
    nodes = np.flatnonzero(online)
    expected = connected_components(union[nodes][:, nodes], directed=False)[0] if nodes.size else 0
    assert union_components(graphs, online) == expected


def test_union_over_a_window_connects_what_single_rounds_do_not():
    ring = topologies.ring(20, 1)
    schedule = MixingSchedule(ring, count=1)
    rng = np.random.default_rng(5)
    online = np.ones(20, bool)
    rounds = [schedule.draw(online, rng).matrix for _ in range(30)]
    assert union_components(rounds[:1], online) > 1  # one round: a matching-like graph
    assert union_components(rounds, online) == 1


def test_a_topology_with_an_isolated_node_is_rejected():
    topology = topologies.Topology.from_edges(4, np.array([0, 1]), np.array([1, 2]), directed=False)
    with pytest.raises(Exception, match=r"node 3.*no doubly stochastic"):
        MixingSchedule(topology)


# --- the learner ---------------------------------------------------------------------------


def tiny_data(n_train: int = 200, features: int = 5, seed: int = 0) -> OnlineData:
    data = synthetic_ball(
        examples=int(n_train / 0.75) + 1, features=features, label_noise=0.1, seed=seed
    )
    return data


def identity(m: int) -> sp.csr_matrix:
    return sp.identity(m, format="csr")


def run_rounds(learner: DolaLearner, rounds: int, matrix, nodes=None) -> list[float]:
    nodes = np.arange(learner.m) if nodes is None else nodes
    return [
        learner.round(t, matrix.indptr, matrix.indices, matrix.data, nodes).loss_at_node
        for t in range(rounds)
    ]


@pytest.mark.parametrize("algorithm", ["laplace", "gaussian", "non_private"])
@pytest.mark.parametrize("step", ["strongly_convex", "convex"])
@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_one_node_without_noise_is_projected_online_gradient_descent(algorithm, step, loss):
    """ε = ∞ (or the non-private baseline) and m = 1: plain projected OGD, step by step."""
    data = tiny_data()
    config = dola(
        algorithm=algorithm, epsilon=math.inf, loss=loss, step=step, strong_convexity=2.0,
        radius=0.8, regularisation=0.01, rounds=60,
    )  # fmt: skip
    learner = DolaLearner(config, data, 1, shard_seed=3, rng=np.random.default_rng(0))
    order = learner.table[0, : learner.lengths[0]]
    w = np.zeros(data.features)
    for t in range(60):
        x, y = data.x_train[order[t % order.size]], data.y_train[order[t % order.size]]
        z = y * (w @ x)
        slope = (-1.0 if z < 1 else 0.0) if loss == "hinge" else -1.0 / (1.0 + math.exp(z))
        expected_loss = (max(0.0, 1 - z) if loss == "hinge" else math.log1p(math.exp(-z))) + (
            0.005 * (w @ w)
        )
        g = slope * y * x + 0.01 * w
        alpha = 1 / (2.0 * (t + 1)) if step == "strongly_convex" else 1 / (2 * math.sqrt(t + 1))
        report = learner.round(t, *_csr(identity(1)), np.array([0]))
        assert report.loss_at_node == pytest.approx(expected_loss, rel=1e-12, abs=1e-12)
        w = w - alpha * g
        norm = np.linalg.norm(w)
        if norm > 0.8:
            w *= 0.8 / norm
        np.testing.assert_allclose(learner.weights[0], w, rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(learner.released[0], learner.weights[0])
    ledger = learner.accountant.ledger_frame()
    assert len(ledger) == 60 and set(ledger["guarantee"]) == {"non-private"}


def _csr(matrix):
    return matrix.indptr, matrix.indices, matrix.data


@settings(max_examples=60)
@given(
    seed=st.integers(0, 2**31),
    batch=st.integers(1, 4),
    alpha=st.floats(1e-3, 2.0),
    loss=st.sampled_from(["hinge", "logistic"]),
)
def test_a_release_moves_at_most_the_sensitivity_when_one_example_changes(seed, batch, alpha, loss):
    """Li et al. Lemma 1 / 7: ‖w − w'‖₁ ≤ 2 α √n L / h for batches differing in one example
    (L = 1 for ‖x‖ ≤ 1), checked on the compiled step itself."""
    rng = np.random.default_rng(seed)
    n = 6
    x = rng.normal(size=(batch + 1, n))
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1.0) * rng.uniform(1, 3)
    y = rng.choice([-1.0, 1.0], batch + 1)
    b = rng.normal(size=(1, n)) * 0.3
    rows_a = np.arange(batch)[None, :]
    rows_b = rows_a.copy()
    rows_b[0, 0] = batch  # the neighbouring batch: one example replaced
    outs = []
    for rows in (rows_a, rows_b):
        out = np.zeros((1, n))
        kernels.gradient_steps(
            np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0), b, b, np.array([0]),
            rows, x, np.zeros(0), np.zeros(0, np.int64), np.zeros(1, np.int64), y,
            LOSS_CODES[loss], alpha, 0.05, 1.0, np.zeros((0, n)), out, np.zeros(n), out,
            np.zeros(n),
        )  # fmt: skip
        outs.append(out[0])
    bound = calibration.dola_sensitivity(alpha, n, 1.0, batch)
    assert np.abs(outs[0] - outs[1]).sum() <= bound * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    batch=st.integers(1, 4),
    sparse_data=st.booleans(),
    noisy=st.booleans(),
    regularisation=st.sampled_from([0.0, 0.3]),
    loss=st.sampled_from(["hinge", "logistic"]),
)
def test_compiled_round_equals_the_printed_step_in_numpy(
    seed, batch, sparse_data, noisy, regularisation, loss
):
    """The fused kernel (four sources per mixing pass, both dots of an example in one pass,
    the first example and the noise inside the step pass) against Li et al. Alg. 1 line 6 /
    TKDE Alg. 2 line 7 written plainly: b = A v, w = Proj[b − α(φb + (1/h) Σ ∇ℓ + noise)].
    Rows of A hold 0 to 9 entries, so every grouping of the mixing passes occurs."""
    rng = np.random.default_rng(seed)
    m, n, examples = 7, 13, 20
    a = sp.random(m, m, density=0.6, random_state=rng, format="csr")
    a.data = rng.uniform(0.05, 0.5, a.data.size)
    values = rng.normal(size=(m, n))
    x = rng.normal(size=(examples, n)) * rng.uniform(0.2, 1.0, (examples, 1))
    x[rng.random(x.shape) < 0.3] = 0.0
    y = rng.choice([-1.0, 1.0], examples)
    nodes = np.array([0, 2, 3, 5, 6])
    rows = rng.integers(0, examples, (nodes.size, batch))
    noise = rng.normal(size=(nodes.size, n)) if noisy else np.zeros((0, n))
    observer = rng.normal(size=n) * 0.4
    alpha, radius = 0.3, 1.5
    out = rng.normal(size=(m, n))
    column_sum = out.sum(axis=0)
    expected_out, expected_sum = out.copy(), column_sum.copy()
    if sparse_data:
        csr = sp.csr_matrix(x)
        data = (
            np.zeros((0, n)),
            csr.data,
            csr.indices.astype(np.int64),
            csr.indptr.astype(np.int64),
        )
    else:
        data = (x, np.zeros(0), np.zeros(0, np.int64), np.zeros(1, np.int64))
    code = LOSS_CODES[loss]
    observed = kernels.gradient_steps(
        a.indptr.astype(np.int64), a.indices.astype(np.int64), a.data, values, values, nodes,
        rows, *data, y, code, alpha, regularisation, radius, noise, out, observer, out,
        column_sum,
    )  # fmt: skip

    # the compiled kernel against the one definition of each loss (netsim.learning.losses)
    def slope(z):
        return loss_derivative(loss, z)

    def value(z):
        return loss_values(loss, z)

    mixed = a @ values
    expected_loss = 0.0
    for k, i in enumerate(nodes):
        b = mixed[i]
        xs, ys = x[rows[k]], y[rows[k]]
        gradient = regularisation * b + (slope(ys * (xs @ b)) * ys) @ xs / batch
        step = b - alpha * (gradient + (noise[k] if noisy else 0.0))
        step *= min(1.0, radius / np.linalg.norm(step))
        expected_sum += step - expected_out[i]
        expected_out[i] = step
        expected_loss += value(ys * (xs @ observer)).mean()
    expected_loss += nodes.size * 0.5 * regularisation * observer @ observer
    np.testing.assert_allclose(out, expected_out, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(column_sum, expected_sum, rtol=1e-12, atol=1e-12)
    assert observed == pytest.approx(expected_loss, rel=1e-12, abs=1e-13)
    mixed_rows = np.zeros((m, n))
    kernels.mix_rows(a.indptr.astype(np.int64), a.indices.astype(np.int64), a.data, values,
                     np.arange(m), mixed_rows)  # fmt: skip
    np.testing.assert_allclose(mixed_rows, mixed, rtol=1e-12, atol=1e-14)


def test_offline_nodes_keep_their_state_and_spend_nothing():
    data = tiny_data(n_train=300)
    config = dola(algorithm="laplace", epsilon=1.0, rounds=20)
    learner = DolaLearner(config, data, 6, shard_seed=1, rng=np.random.default_rng(2))
    ring = MixingSchedule(topologies.ring(6, 1), fraction=1.0)
    rng = np.random.default_rng(3)
    everyone = np.ones(6, bool)
    a = ring.draw(everyone, rng).matrix
    learner.round(0, *_csr(a), np.arange(6))
    online = everyone.copy()
    online[[1, 4]] = False
    weights, released = learner.weights.copy(), learner.released.copy()
    a = ring.draw(online, rng).matrix
    learner.round(1, *_csr(a), np.flatnonzero(online))
    np.testing.assert_array_equal(learner.weights[[1, 4]], weights[[1, 4]])
    np.testing.assert_array_equal(learner.released[[1, 4]], released[[1, 4]])
    assert not np.array_equal(learner.weights[0], weights[0])
    assert learner.steps.tolist() == [2, 1, 2, 2, 1, 2]
    np.testing.assert_allclose(learner.mean_weights(), learner.weights.mean(axis=0), atol=1e-15)
    ledger = learner.accountant.ledger_frame()
    assert len(ledger) == 6 + 4
    shards = {i: set(learner.table[i, : learner.lengths[i]].tolist()) for i in range(6)}
    second = set(ledger["record"].iloc[6:])
    assert not second & (shards[1] | shards[4])


def test_laplace_noise_scale_follows_the_formula_and_shrinks_with_the_batch():
    data = tiny_data(n_train=600, features=8)
    ledgers = {}
    noise = {}
    for h in (1, 5):
        config = dola(algorithm="laplace", epsilon=0.5, batch=h, strong_convexity=0.5,
                            rounds=10)  # fmt: skip
        learner = DolaLearner(config, data, 4, shard_seed=0, rng=np.random.default_rng(7))
        a = identity(4)
        learner.round(0, *_csr(a), np.arange(4))
        noise[h] = (learner.released - learner.weights).ravel()
        for t in range(1, 10):
            learner.round(t, *_csr(a), np.arange(4))
        ledgers[h] = learner.accountant.ledger_frame()
    for h, ledger in ledgers.items():
        assert len(ledger) == 10 * 4 * h  # every example of every batch charged once
        scales = ledger["noise_scale"].to_numpy().reshape(10, 4 * h)[:, 0]
        alphas = 1 / (0.5 * np.arange(1, 11))
        np.testing.assert_allclose(scales, 2 * alphas * math.sqrt(8) * 1.0 / (h * 0.5))
        assert (ledger["epsilon"] == 0.5).all() and (ledger["mechanism"] == "laplace_dola").all()
    np.testing.assert_allclose(
        ledgers[5]["noise_scale"].to_numpy()[::20], ledgers[1]["noise_scale"].to_numpy()[::4] / 5
    )
    # the drawn noise has the recorded scale: E|X| = b for Laplace(b), 32 draws each
    for h in (1, 5):
        b = 2 * (1 / 0.5) * math.sqrt(8) / (h * 0.5)
        mean_abs = np.abs(noise[h]).mean()
        assert abs(mean_abs - b) < 5 * b / math.sqrt(noise[h].size)


@pytest.mark.parametrize("calibration", ["printed", "analytic"])
def test_gaussian_noise_scale_follows_the_formula(calibration):
    data = tiny_data(n_train=400, features=6)
    config = dola(
        algorithm="gaussian", epsilon=0.5, delta=1e-4, calibration=calibration, batch=2,
        rounds=8,
    )  # fmt: skip
    learner = DolaLearner(config, data, 3, shard_seed=0, rng=np.random.default_rng(1))
    run_rounds(learner, 8, identity(3))
    ledger = learner.accountant.ledger_frame()
    sigmas = ledger["noise_scale"].to_numpy().reshape(8, 6)[:, 0]
    for t, sigma in enumerate(sigmas, start=1):
        alpha = 1.0 / t
        if calibration == "printed":
            j2 = 4 * alpha**2 * 6 * 1.0 * 8 * math.log(8 / 1e-4) * math.log(1e4) / 0.25
            assert sigma == pytest.approx(math.sqrt(j2) / 2)
            eps = mechanisms.gaussian_epsilon(sigma, 2.0 / 2, 1e-4)
            assert ledger["epsilon"].iloc[6 * (t - 1)] == pytest.approx(eps)
        else:
            assert sigma == pytest.approx(mechanisms.analytic_gaussian_sigma(1.0, 0.5, 1e-4))
            assert ledger["epsilon"].iloc[6 * (t - 1)] == 0.5
    records = learner.accountant.records_frame()
    assert records["uses"].max() == 1  # 8 rounds × 2 examples fit in every shard
    assert (records["delta_spent"] <= 1e-4 * (1 + 1e-12)).all()


@settings(max_examples=40)
@given(
    algorithm=st.sampled_from(["laplace", "sparse", "gaussian"]),
    epsilon=st.floats(0.01, 5.0),
    nodes=st.integers(1, 6),
    batch=st.integers(1, 3),
    rounds=st.integers(1, 30),
    max_passes=st.integers(1, 4),
    churn=st.floats(0.0, 0.6),
    seed=st.integers(0, 1000),
)
def test_no_example_exceeds_the_stated_budget(
    algorithm, epsilon, nodes, batch, rounds, max_passes, churn, seed
):
    """The scenario states ε per example over the run (a ceiling) and how many passes it
    allows: a run that would use an example more often is refused, and no example of a run
    spends more than ε, however many passes it makes (each release gets ε/passes)."""
    data = tiny_data(n_train=40, features=3, seed=seed)
    config = dola(
        algorithm=algorithm, epsilon=epsilon, batch=batch, rounds=rounds, sparsity=0.1,
        calibration="analytic", max_passes=max_passes,
    )  # fmt: skip
    _, lengths = shard_rows(data.n_train, nodes, seed)
    needed = passes(lengths, rounds, batch)
    if needed > max_passes:
        with pytest.raises(DolaConfigError, match=f"allow it with max_passes: {needed}"):
            DolaLearner(config, data, nodes, shard_seed=seed, rng=np.random.default_rng(seed))
        return
    learner = DolaLearner(config, data, nodes, shard_seed=seed, rng=np.random.default_rng(seed))
    rng = np.random.default_rng(seed + 1)
    for t in range(rounds):
        online = np.flatnonzero(rng.random(nodes) >= churn)
        learner.round(t, *_csr(identity(nodes)), online)
    accountant = learner.accountant
    records = accountant.records_frame()
    ceiling = epsilon * (1 + 1e-9)
    assert (records["epsilon_spent"] <= ceiling).all()
    assert records["uses"].max() <= max_passes
    ledger = accountant.ledger_frame()
    np.testing.assert_allclose(learner.mean_weights(), learner.weights.mean(axis=0), atol=1e-12)
    per_record = ledger.groupby("record")["epsilon"].sum()
    assert (per_record <= ceiling).all()
    assert len(ledger) == batch * learner.steps.sum()


def test_a_run_past_the_stated_budget_is_refused_naming_both_numbers():
    # 40 examples on 2 nodes (20 each), T·batch = 30: each example would be used twice
    data = tiny_data(n_train=40, features=3)
    config = dola(epsilon=1.0, rounds=30)
    with pytest.raises(DolaConfigError) as info:
        DolaLearner(config, data, 2, shard_seed=0, rng=np.random.default_rng(0))
    assert str(info.value) == (
        "T·batch = 30·1 exceeds the smallest node's data (20 examples), so an example would "
        "be used 2 times (passes) and each release could spend only ε = 0.5 of the stated "
        "budget epsilon = 1; lower rounds or batch, or allow it with max_passes: 2"
    )
    allowed = DolaLearner(
        dola(epsilon=1.0, rounds=30, max_passes=2), data, 2, shard_seed=0,
        rng=np.random.default_rng(0),
    )  # fmt: skip
    assert allowed.accountant.epsilon == 1.0 and allowed.release_epsilon == 0.5


def test_a_printed_gaussian_that_spends_more_than_stated_is_refused_with_the_fix():
    """J² as printed (scenarios/README.md, `dola.calibration`): ε = 0.1, λ = 1, 1,000
    rounds ran and reported ε = 0.2262 before the calibration was checked."""
    data = tiny_data(n_train=64_000, features=10)
    config = dola(algorithm="gaussian", calibration="printed", epsilon=0.1, rounds=1000)
    with pytest.raises(DolaConfigError) as info:
        DolaLearner(config, data, 64, shard_seed=0, rng=np.random.default_rng(0))
    message = str(info.value)
    assert "ε' = 0.2262 at δ = 1e-05, more than its share 0.1 of the stated budget" in message
    assert "use calibration: analytic" in message
    analytic = DolaLearner(
        config.model_copy(update={"calibration": "analytic"}), data, 64, shard_seed=0,
        rng=np.random.default_rng(0),
    )  # fmt: skip
    assert analytic.gaussian_event(1000).epsilon == pytest.approx(0.1)
    assert analytic.accountant.report()["stated_epsilon"] == 0.1


def test_bad_learner_configuration():
    data = tiny_data(n_train=30)
    with pytest.raises(DolaConfigError, match="larger than the smallest node's local data"):
        DolaLearner(dola(batch=11, rounds=5), data, 3, shard_seed=0, rng=np.random.default_rng())
    with pytest.raises(ValidationError, match="strong_convexity λ > 0"):
        dola(strong_convexity=0.0)
    with pytest.raises(ValidationError, match="epsilon must be positive"):
        dola(epsilon=0.0)
    assert not dola(epsilon=math.inf).private and dola(epsilon=1e9).private
    with pytest.raises(ValidationError, match=r"delta must be in \(0, 1\)"):
        dola(algorithm="gaussian", delta=1.0)


# --- runs over the simulated network -------------------------------------------------------

BASE = {
    "name": "dola-test",
    "seed": 3,
    "nodes": 16,
    "duration": 200,
    "topology": {"kind": "random_regular", "degree": 4},
    "dola": {
        "data": {"name": "synthetic_ball", "options": {"examples": 8000, "features": 5}},
        "algorithm": "non_private",
        "regret_checkpoints": 8,
        "evaluate_every": 20,
        **UNIT_BALL,
    },
}


def scenario(**changes):
    spec = {**BASE, "dola": {**BASE["dola"]}}
    for key, value in changes.items():
        if key.startswith("dola_"):
            spec["dola"][key[5:]] = value
        else:
            spec[key] = value
    return validate_scenario(spec, source="test", base_dir=None)


def test_non_private_average_regret_falls_with_t():
    _, frames = run_in_memory(scenario())
    regret = frames["dola_regret"]
    assert regret["round"].iloc[-1] == 200
    average = regret["average_regret"].to_numpy()
    assert average[-1] < 0.5 * average[1]
    assert (regret["hindsight_gap"] < 1e-3 * regret["hindsight_loss"]).all()
    summary = frames["dola_summary"].iloc[0]
    assert summary["guarantee"] == "non-private"
    assert summary["accuracy_averaged"] > 0.8


def test_regret_grows_as_epsilon_falls_and_runs_are_reproducible():
    finals = {}
    for eps in (10.0, 1.0, 0.1):
        _, frames = run_in_memory(scenario(dola_algorithm="laplace", dola_epsilon=eps))
        finals[eps] = frames["dola_regret"]["average_regret"].iloc[-1]
        assert frames["dola_summary"]["guarantee"].iloc[0] == f"ε-DP with ε = {eps:g}"
    assert finals[10.0] < finals[1.0] < finals[0.1]
    _, again = run_in_memory(scenario(dola_algorithm="laplace", dola_epsilon=0.1))
    assert again["dola_regret"]["average_regret"].iloc[-1] == finals[0.1]


def test_nodes_approach_each_other():
    _, frames = run_in_memory(scenario())
    consensus = frames["dola_rounds"]["consensus"].to_numpy()
    assert consensus[-1] < 0.1 * consensus[0]
    mixing = frames["dola_mixing"]
    assert (mixing["row_sum_error"] < 1e-12).all() and (mixing["column_sum_error"] < 1e-12).all()
    windows = mixing[mixing["window_checked"]]
    assert len(windows) == 20 and (windows["window_components"] == 1).all()


def test_sparse_dola_makes_sparse_models_as_rho_grows():
    sparsity = []
    for rho in (0.0, 0.5, 1.0):
        _, frames = run_in_memory(
            scenario(dola_algorithm="sparse", dola_epsilon=5.0, dola_sparsity=rho)
        )
        sparsity.append(frames["dola_rounds"]["sparsity_mean"].iloc[-1])
    assert sparsity[0] == 0.0
    assert sparsity[0] < sparsity[1] < sparsity[2]


def test_lost_values_are_replaced_by_the_last_ones_received():
    _, frames = run_in_memory(scenario(links={"loss": 0.3}))
    rounds = frames["dola_rounds"]
    assert rounds["stale_values"].sum() > 0 and rounds["max_staleness"].max() >= 1
    lost = frames["messages_lost"]
    assert len(lost) > 0 and set(lost["kind"]) == {"dola"}
    links = frames["dola_mixing"]["links"].sum() * 2
    share = len(lost) / links
    assert abs(share - 0.3) < 5 * math.sqrt(0.3 * 0.7 / links)


def test_the_transport_counts_late_and_lost_values_once():
    """Delays longer than the round make values late (they arrive, after their round); the
    transport counts every value sent as delivered or lost, and logs each loss once."""
    links = {"loss": 0.2, "delay": {"dist": "uniform", "low": "0.5s", "high": "2s"}}
    _, frames = run_in_memory(scenario(links=links))
    last = frames["samples"].iloc[-1]
    sent = frames["dola_mixing"]["links"].sum() * 2
    assert last["messages_sent"] == sent
    assert last["messages_sent"] == last["messages_delivered"] + last["messages_lost"]
    assert len(frames["messages_lost"]) == last["messages_lost"]
    assert frames["dola_rounds"]["max_staleness"].max() >= 1  # late values were used


def test_churn_from_a_model_skips_offline_nodes():
    churn = {
        "kind": "synthetic",
        "online": {"dist": "exponential", "mean": "30s"},
        "offline": {"dist": "exponential", "mean": "30s"},
    }
    _, frames = run_in_memory(scenario(churn=churn, dola_algorithm="laplace"))
    mixing = frames["dola_mixing"]
    assert mixing["online"].min() < 16
    summary = frames["dola_summary"].iloc[0]
    ledger = frames["privacy_ledger"]
    assert len(ledger) == mixing["online"].sum()  # one example per online node and round
    assert summary["epsilon_spent_max"] <= 1.0 * summary["passes"]


# --- bad input through the command line ----------------------------------------------------

YAML = """\
name: dola-bad
seed: 1
nodes: 8
duration: 20s
topology: {kind: ring, k: 1}
dola:
  data: {name: synthetic_ball, options: {examples: 400, features: 3}}
"""


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("  epsilon: 0\n", "epsilon must be positive, got 0.0"),
        ("  epsilon: -1\n", "epsilon must be positive"),
        ("  epsilon: .nan\n", "epsilon must be positive, got nan"),
        ("  algorithm: gaussian\n  delta: 1.5\n", "delta must be in (0, 1)"),
        ("  algorithm: gaussian\n  delta: 0\n", "delta must be in (0, 1)"),
        ("  batch: 100\n", "batch 100 is larger than the smallest node's local data (37"),
        ("  strong_convexity: 0\n", "use step: convex (1/(2√t)) for λ = 0"),
        ("  regret_node: 8\n", "dola.regret_node (8) must be a node id below nodes (8)"),
        ("  rounds: 50\n", "dola.rounds (50) × dola.period (1 s) is longer than duration"),
    ],
)
def test_bad_dola_scenario(capsys, tmp_path: Path, extra: str, expected: str) -> None:
    path = write(tmp_path / "s.yaml", YAML + extra)
    err = cli_error(capsys, "validate", path)
    assert expected in err


def test_dola_on_a_topology_with_an_isolated_node(capsys, tmp_path: Path) -> None:
    write(tmp_path / "edges.txt", "0 1\n1 2\n")
    text = YAML.replace("nodes: 8", "nodes: 4").replace(
        "{kind: ring, k: 1}", "{kind: edge_list, path: edges.txt}"
    )
    err = cli_error(capsys, "validate", write(tmp_path / "s.yaml", text))
    assert "node 3" in err and "no doubly stochastic mixing matrix" in err


def test_dola_scenario_runs_from_the_cli(capsys, tmp_path: Path) -> None:
    path = write(tmp_path / "s.yaml", YAML)
    assert main(["run", str(path), "--out", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "dola:" in out and "ε-DP with ε = 1" in out


def test_links_that_are_down_are_left_out_of_a_t():
    links = {"failure": {"mean_up": "20s", "mean_down": "20s"}}
    _, frames = run_in_memory(scenario(links=links, dola_algorithm="laplace"))
    mixing = frames["dola_mixing"]
    _, ideal = run_in_memory(scenario(dola_algorithm="laplace"))
    # about half the links are down at any time, so fewer are used per round
    assert mixing["links"].mean() < 0.8 * ideal["dola_mixing"]["links"].mean()
    assert (mixing["row_sum_error"] < 1e-12).all()


def test_privacy_ledger_totals_keeps_the_records_and_drops_the_per_charge_rows():
    charges = run_in_memory(scenario(dola_algorithm="laplace", dola_epsilon=1.0))[1]
    totals_scenario = scenario(dola_algorithm="laplace", dola_epsilon=1.0)
    totals_scenario = totals_scenario.model_copy(
        update={"metrics": totals_scenario.metrics.model_copy(update={"privacy_ledger": "totals"})}
    )
    totals = run_in_memory(totals_scenario)[1]
    assert len(charges["privacy_ledger"]) > 1000 and len(totals["privacy_ledger"]) == 0
    for name in ("privacy_records", "dola_summary", "dola_regret"):
        pd.testing.assert_frame_equal(totals[name], charges[name])


def test_the_manifest_states_the_budget_and_the_guarantee_reached(tmp_path):
    from netsim.scenario.runner import run_scenario

    result = run_scenario(scenario(dola_algorithm="laplace", dola_epsilon=0.5), out=tmp_path)
    report = json.loads((result.directory / "manifest.json").read_text())["privacy"]["dola"]
    assert report["policy"] == "dola: one release per example per pass (1 pass)"
    assert report["stated_epsilon"] == 0.5
    assert report["spent_epsilon"] == 0.5 and report["spent_delta"] == 0.0
    assert report["differentially_private"] is True and report["refused"] == 0
    assert report["uses"] == 200 * 16  # one example per node and round


# --- DOLA on real data, beside its yardsticks ------------------------------------

REPO = Path(__file__).resolve().parents[1]
ADULT = REPO.parent / "shared" / "data" / "uci" / "adult-complete-rows.csv"


@pytest.mark.skipif(
    not ADULT.is_file(), reason="UCI Adult is read from ../shared/data (research data, not shipped)"
)
def test_dola_on_adult_with_the_shipped_defaults_learns_beside_its_baselines():
    """With R = 1, λ = 1 every DOLA model on Adult was the constant classifier (0.746, the
    majority share); the validated defaults learn, and the summary carries the yardsticks."""
    from netsim.scenario.loader import load_scenario

    _, tables = run_in_memory(load_scenario(REPO / "scenarios" / "dola" / "adult.yaml"))
    row = tables["dola_summary"].iloc[0]
    assert row["majority_accuracy"] == pytest.approx(0.746, abs=0.001)
    assert row["centralised_accuracy"] > 0.83
    assert row["accuracy_averaged"] >= row["majority_accuracy"] + 0.03
    assert row["accuracy_mean"] >= row["centralised_accuracy"] - 0.03


def test_the_summary_carries_the_majority_class_of_its_own_split():
    """The yardsticks are computed on the run's own split: the majority accuracy is the share
    of the training majority label among the test labels."""
    built, tables = run_in_memory(scenario())
    data = built.components["dola"].learner.data
    majority = 1.0 if (data.y_train == 1).sum() > (data.y_train == -1).sum() else -1.0
    row = tables["dola_summary"].iloc[0]
    assert row["majority_accuracy"] == pytest.approx(float(np.mean(data.y_test == majority)))
    assert row["majority_accuracy"] < row["centralised_accuracy"] <= 1.0


# --- a registered mechanism for DOLA's releases (dola.mechanism) ---------------------------


def mechanism_ledger(rounds: int = 6, **keys: object) -> tuple[DolaLearner, pd.DataFrame]:
    config = dola(epsilon=0.5, strong_convexity=0.5, rounds=rounds, **keys)
    learner = DolaLearner(config, tiny_data(n_train=600, features=8), 4, shard_seed=0,
                          rng=np.random.default_rng(7))  # fmt: skip
    for t in range(rounds):
        learner.round(t, *_csr(identity(4)), np.arange(4))
    return learner, learner.accountant.ledger_frame()


@pytest.mark.parametrize("algorithm", ["laplace", "sparse"])
def test_a_registered_mechanism_gets_each_release_sensitivity_in_its_norm(algorithm):
    """Output perturbation: the L1 mechanism gets S(t) = 2 α_t √n L / h (the scale of DOLA's
    own Laplace), an L2 mechanism 2 α_t L / h; each release spends the per-release ε."""
    alphas = np.repeat(1 / (0.5 * np.arange(1, 7)), 4)
    _, own = mechanism_ledger(algorithm=algorithm)
    _, l1 = mechanism_ledger(algorithm=algorithm, mechanism="l1")
    _, l2 = mechanism_ledger(algorithm=algorithm, mechanism="k_norm_l2")
    np.testing.assert_allclose(l1["noise_scale"], own["noise_scale"])
    np.testing.assert_allclose(l1["sensitivity"], 2 * alphas * math.sqrt(8))
    np.testing.assert_allclose(l2["sensitivity"], 2 * alphas)
    np.testing.assert_allclose(l2["noise_scale"], 2 * alphas / 0.5)
    assert set(l1["mechanism"]) == {"laplace"} and set(l2["mechanism"]) == {"k_norm_l2"}
    assert (l1["epsilon"] == 0.5).all() and (l2["delta"] == 0).all()


def test_a_delta_mechanism_perturbs_the_gradient_with_its_share_of_delta():
    """Gradient perturbation (algorithm gaussian) with the registered Gaussian: the same σ as
    DOLA's analytic calibration (L2 sensitivity 2L/h), δ spent from dola.delta."""
    learner, ledger = mechanism_ledger(algorithm="gaussian", mechanism="gaussian", delta=1e-6)
    _, own = mechanism_ledger(algorithm="gaussian", delta=1e-6)
    np.testing.assert_allclose(ledger["noise_scale"], own["noise_scale"], rtol=1e-12)
    assert (ledger["sensitivity"] == 2.0).all() and (ledger["delta"] == 1e-6).all()
    assert learner.accountant.run_guarantee().delta == pytest.approx(1e-6)
    # output perturbation with a δ mechanism spends δ too
    learner, ledger = mechanism_ledger(algorithm="laplace", mechanism="gaussian", delta=1e-6)
    assert (ledger["delta"] == 1e-6).all() and set(ledger["mechanism"]) == {"gaussian_analytic"}


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"mechanism": "gaussian", "delta": 0.0}, r"mechanism gaussian is \(epsilon,delta\)-DP"),
        ({"mechanism": "l1", "algorithm": "non_private"}, "algorithm non_private adds none"),
        ({"mechanism": "gaussian", "algorithm": "gaussian", "calibration": "printed"},
         "leave calibration out"),
        ({"mechanism": {"kind": "gaussian", "sigma": 1}}, r"mechanism\.sigma"),
    ],
)  # fmt: skip
def test_bad_dola_mechanisms_are_refused(keys, message):
    with pytest.raises(ScenarioError, match=message):
        scenario(**{f"dola_{key}": v for key, v in {"algorithm": "laplace", **keys}.items()})
