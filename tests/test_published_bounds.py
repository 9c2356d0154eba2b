"""The published per-pair bounds (``netsim.privacy.bounds``) beside netsim's exact accountant
(``netsim.privacy.linear``), and MFDL's accounting figure (``analysis/mfdl_accounting.py``)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from netsim.privacy.bounds import mfdl_corrected_muffliato, muffliato_message_sum
from netsim.privacy.linear import LinearRound, LinearRun, pndp_view, view_losses
from netsim.privacy.pairwise import metropolis_weights

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analysis"))  # the scripts import their shared module by name

import mfdl_accounting  # noqa: E402


def averaging_run(weights: np.ndarray, rounds: int, sigma: float = 1.0) -> LinearRun:
    """Muffliato's averaging as a linear run: every node's noisy value is its one input, at
    round 0 (step 1, noise σ, sensitivity 1); every link carries a message each round."""
    n = weights.shape[0]
    dst, src = np.nonzero((weights > 0) & ~np.eye(n, dtype=bool))
    mixing = sp.csr_matrix(weights)
    ones = np.ones(n)
    return LinearRun(n, [
        LinearRound(mixing=mixing, step=ones * (r == 0), noise_std=sigma * ones,
                    sensitivity=ones, batch=np.zeros(n, np.int64), sent_src=src,
                    sent_dst=dst, delivered=np.ones(src.size, bool))
        for r in range(rounds)
    ])  # fmt: skip


def test_muffliatos_message_sum_is_not_a_bound_on_a_path() -> None:
    """A published bound is not the exact loss (docs/papers.md, "Where it differs from
    composing messages one by one"). On the path 0 – 1 – 2 (Metropolis weights, two rounds)
    observer 0 hears x̃₁, then W₁₀x̃₀ + W₁₁x̃₁ + W₁₂x̃₂. The per-message sum charges node 2's record
    W₁₂²/‖W₁‖² = 1/3 of local DP; the exact loss is local DP when node 0 knows its own noise
    (it solves for x̃₂) and 1/2 of it when it does not."""
    weights = metropolis_weights(nx.to_numpy_array(nx.path_graph(3)))
    sigma, sensitivity = 1.5, 2.0
    slope = muffliato_message_sum([weights, weights], 0, sigma, sensitivity)
    local = sensitivity**2 / (2 * sigma**2)
    assert np.isnan(slope[0])
    assert slope[2] / local == pytest.approx(1 / 3)
    assert slope[1] / local == pytest.approx(1 + (1 / 3) ** 2 / (3 / 9))

    run = averaging_run(weights, 2, sigma)
    for knows, expected in ((True, 1.0), (False, 0.5)):
        losses = view_losses(run, pndp_view(run, [0], knows_noise=knows), unit="node")
        mu2 = dict(zip(losses.node.tolist(), losses.mu_squared.tolist(), strict=True))
        # μ² of unit noise: the leverage λ over σ² (sensitivity 1 per use)
        assert mu2[2] * sigma**2 == pytest.approx(expected)


def test_the_message_sum_is_the_codes_sum_shifted_by_one_round() -> None:
    """Muffliato's code charges its rounds t = 0..T−1 with W^{t+1}: the same as this sum over
    T + 1 rounds less round 0's, which is local DP for the observer's neighbours only."""
    graph = nx.random_regular_graph(3, 10, seed=5)
    weights = metropolis_weights(nx.to_numpy_array(graph))
    observer, rounds = 0, 4
    codes = np.zeros(10)
    power = weights.copy()
    for _ in range(rounds):
        for w in graph.neighbors(observer):
            codes += power[w] ** 2 / (power[w] ** 2).sum()
        power = weights @ power
    ours = muffliato_message_sum([weights] * (rounds + 1), observer, 1.0, 1.0) * 2.0
    first = np.zeros(10)
    first[list(graph.neighbors(observer))] = 1.0
    np.testing.assert_allclose(np.delete(ours - first, observer), np.delete(codes, observer))


@pytest.mark.parametrize("kind", ["mfdl", "metropolis"])
def test_the_corrected_bound_is_the_double_sum_of_theorem_11(kind: str) -> None:
    """The (T − s) form equals Σ_{t=1}^{T} Σ_{j=t}^{T} Σ_{w ∈ N(v)} (W^{j−t})[u, w] /
    ‖W^{j−t}[:, w]‖², clipped at T and times αΔ²/(2σ²), written out term by term."""
    graph = nx.path_graph(5)
    graph.add_edge(1, 3)
    adjacency = nx.to_numpy_array(graph)
    if kind == "mfdl":  # MFDL's graphs carry self-loops; rows normalised
        adjacency += np.eye(5)
        weights = adjacency / adjacency.sum(axis=1, keepdims=True)
    else:
        weights = metropolis_weights(adjacency)
    T, alpha, sigma, sensitivity = 4, 3.0, 1.3, 0.7
    for v in range(5):
        expected = np.zeros(5)
        for u in range(5):
            total = 0.0
            for t in range(1, T + 1):
                for j in range(t, T + 1):
                    power = np.linalg.matrix_power(weights, j - t)
                    for w in range(5):
                        if weights[v, w] > 0:
                            total += power[u, w] / np.sum(power[:, w] ** 2)
            expected[u] = alpha * sensitivity**2 / (2 * sigma**2) * min(total, T)
        got = mfdl_corrected_muffliato(weights, range(5), v, T, alpha, sigma, sensitivity)
        np.testing.assert_allclose(got, expected, rtol=1e-12)
        assert mfdl_corrected_muffliato(
            weights, 2, v, T, alpha, sigma, sensitivity
        ) == pytest.approx(expected[2])


def test_netsim_equals_mfdls_pinv_number_on_florentine() -> None:
    """Where K ≥ 0 elementwise, netsim's exact μ² and MFDL's Σ|K| (numpy pinv) agree to 1e-8;
    where it is not, netsim says it is a bound and reports the smaller of Σ|K| (MFDL's number)
    and λ_max(K)·T (Medici: 10 against Σ|K| = 10.91)."""
    frame = mfdl_accounting.account_graph("florentine")
    assert len(frame) == 14
    positive = frame["k_min"] >= -1e-12
    assert positive.sum() >= 10
    np.testing.assert_allclose(
        frame.loc[positive, "netsim"], frame.loc[positive, "mfdl"], rtol=0, atol=1e-8
    )
    assert frame.loc[positive, "exact"].all()
    assert (frame["exact"] == ~frame["negative_k"]).all()
    negative = frame["negative_k"]
    assert (frame.loc[negative, "netsim"] <= frame.loc[negative, "mfdl"] + 1e-9).all()
    np.testing.assert_allclose(
        frame.loc[negative, "netsim"], frame.loc[negative, "worst_high"], rtol=1e-9
    )


def test_the_scripts_core_runs_on_florentine_in_seconds() -> None:
    start = time.process_time()  # its CPU time: the cores may be shared (a parallel test run)
    frame = mfdl_accounting.account_graph("florentine")
    table = mfdl_accounting.by_distance(frame)
    assert time.process_time() - start < 10.0
    assert table["distance"].tolist() == [1, 2, 3, 4]
    assert table["nodes"].sum() == 14
    # the worst case of a unit with negative K is never above local DP (T at α = 2)
    negative = frame[frame["negative_k"]]
    assert (negative["worst_low"] <= negative["worst_high"] + 1e-9).all()
    assert (negative["worst_high"] <= mfdl_accounting.STEPS + 1e-9).all()


def test_decors_accountant_gives_its_codes_numbers_and_the_exact_loss_on_a_static_ring() -> None:
    """DECOR's ring of 16 users (its code's example: C = 1, σ = 17.8271, σ_cor = 188, T = 3,500,
    δ = 1e-5) charges ρ = 4.6563e-4 a round and reports ε = 10.293. On a static ring every node
    is alike, so its max over nodes is each node's loss: netsim's exact SecLDP loss of a node
    unit over T rounds (revealed increments) is T·ρ, and its exact (ε, δ) is below DECOR's."""
    from netsim.privacy.bounds import decor_epsilon, decor_secldp_slope
    from netsim.privacy.linear import LinearRound, LinearRun, epsilon_of, increment_losses
    from netsim.privacy.pairwise import metropolis_from_edges

    n, rounds = 16, 40
    nodes = np.arange(n)
    a, b = np.minimum(nodes, (nodes + 1) % n), np.maximum(nodes, (nodes + 1) % n)
    slope = decor_secldp_slope(a, b, n, sigma=17.8271, sigma_cor=188.0, sensitivity=2.0)
    assert slope == pytest.approx(4.6563e-4, rel=1e-4)
    assert decor_epsilon(3500 * slope, 1e-5) == pytest.approx(10.293, abs=5e-4)
    run = LinearRun(n)
    src, dst = np.concatenate([a, b]), np.concatenate([b, a])
    for _ in range(rounds):
        run.rounds.append(LinearRound(
            mixing=metropolis_from_edges(n, a, b), step=np.full(n, 0.1),
            noise_std=np.full(n, 17.8271), sensitivity=np.full(n, 2.0),
            batch=np.zeros(n, np.int64), sent_src=src, sent_dst=dst,
            delivered=np.ones(src.size, bool), secret_a=a, secret_b=b,
            secret_std=np.full(n, 188.0), secret_a_added=np.ones(n, bool),
            secret_b_added=np.ones(n, bool),
        ))  # fmt: skip
    exact = increment_losses(run, unit="node").mu_squared / 2.0
    np.testing.assert_allclose(exact, rounds * slope, rtol=1e-9)
    assert epsilon_of(2 * 3500 * slope, 1e-5) < decor_epsilon(3500 * slope, 1e-5)
