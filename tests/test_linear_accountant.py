"""The linear accountant (``netsim/privacy/linear.py``): an observer's view as O = A·G + B·Z,
held to the Muffliato accountant it generalises, to the path 0 – 1 – 2, to a Monte-Carlo of a
DECOR view, to itself by its two numerical paths (factor and Gram) and its two views of every
message (messages and revealed increments), and to its rank decision."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from netsim.privacy import linear
from netsim.privacy.linear import (
    LinearRound,
    LinearRun,
    View,
    increment_losses,
    ldp_view,
    pndp_view,
    secldp_view,
    view_losses,
    whitening,
)
from netsim.privacy.linear_audit import audit_pair, sample_received
from netsim.privacy.pairwise import metropolis_from_edges, metropolis_weights
from netsim.scenario.loader import load_scenario
from netsim.scenario.runner import run_in_memory

REPO = Path(__file__).resolve().parents[1]


def decor_run(
    n: int = 8, rounds: int = 6, *, churn: float = 0.75, loss: float = 0.1, seed: int = 3,
    sigma: float = 1.0, sigma_cor: float = 2.0, step: float = 0.5,
) -> LinearRun:  # fmt: skip
    """A DECOR-like run on a ring with a chord: each round a random set of nodes is online,
    the links between online nodes carry a message each way (some lost), every topology link
    has a secret (added by each end that stepped), and records cycle through two batches."""
    rng = np.random.default_rng(seed)
    graph = nx.cycle_graph(n)
    graph.add_edge(0, n // 2)
    edges = np.array(graph.edges())
    a, b = edges.min(axis=1), edges.max(axis=1)
    run = LinearRun(n)
    for t in range(rounds):
        online = rng.random(n) < churn
        both = online[a] & online[b]
        src = np.concatenate([a[both], b[both]])
        dst = np.concatenate([b[both], a[both]])
        delivered = rng.random(src.size) >= loss
        used = delivered[: both.sum()] & delivered[both.sum() :]
        weights = metropolis_from_edges(n, a[both][used], b[both][used])
        run.rounds.append(LinearRound(
            mixing=weights, step=np.where(online, step, 0.0),
            noise_std=np.where(online, sigma, 0.0), sensitivity=np.full(n, 2.0),
            batch=np.full(n, t % 2), sent_src=src, sent_dst=dst, delivered=delivered,
            secret_a=a, secret_b=b, secret_std=np.full(a.size, sigma_cor),
            secret_a_added=online[a], secret_b_added=online[b],
        ))  # fmt: skip
    return run


def as_dict(losses: linear.UnitLosses) -> dict[tuple[int, int], float]:
    triples = zip(losses.node, losses.group, losses.mu_squared, strict=True)
    return {(int(u), int(g)): float(m) for u, g, m in triples}


def test_muffliatos_pairs_are_a_case_of_the_linear_accountant() -> None:
    """The shipped 256-node scenario: every accounted pair's λ from the linear accountant
    equals ``privacy_pairs`` (netsim.privacy.pairwise) to 1e-10; and the bound audit finds
    Muffliato's per-message sum below the exact loss for 55,581 of its 65,280 pairs."""
    scenario = load_scenario(REPO / "scenarios/muffliato/averaging.yaml")
    built, tables = run_in_memory(scenario)
    pairs = tables["privacy_pairs"]
    audit = tables["bound_audit"]
    assert (len(audit), int(audit["below"].sum())) == (65_280, 55_581)
    merged = audit.merge(pairs, on=["observer", "record"])
    np.testing.assert_array_equal(merged["exact_rho"], merged["rho"])
    run = built["muffliato"].linear_run()
    observers = sorted(set(pairs["observer"]))[::37]  # 7 observers: the SVDs take a second
    for observer in observers:
        losses = view_losses(run, pndp_view(run, [observer]), unit="node")
        expected = pairs[pairs["observer"] == observer].set_index("record")["local_share"]
        assert losses.exact.all()
        np.testing.assert_allclose(
            losses.mu_squared, expected.loc[losses.node].to_numpy(), rtol=0, atol=1e-10
        )


def test_the_path_observer_unmixes_its_neighbour_when_it_knows_its_noise() -> None:
    """Path 0 – 1 – 2, two rounds of averaging: observer 0 against node 2 has λ = 1 knowing its
    own noise and 1/2 not knowing it (the per-message sum gives 1/3:
    tests/test_published_bounds.py)."""
    weights = metropolis_weights(nx.to_numpy_array(nx.path_graph(3)))
    run = LinearRun(3)
    for t in range(2):
        run.rounds.append(LinearRound(
            mixing=metropolis_from_edges(3, np.array([0, 1]), np.array([1, 2])),
            step=np.full(3, float(t == 0)), noise_std=np.ones(3), sensitivity=np.ones(3),
            batch=np.zeros(3, np.int64), sent_src=np.array([1, 0, 2, 1]),
            sent_dst=np.array([0, 1, 1, 2]), delivered=np.ones(4, bool),
        ))  # fmt: skip
    assert np.allclose(run.rounds[0].mixing.toarray(), weights)
    knowing = view_losses(run, pndp_view(run, [0]), unit="node", nodes=[2])
    forgetting = view_losses(run, pndp_view(run, [0], knows_noise=False), unit="node", nodes=[2])
    assert knowing.mu_squared[0] == pytest.approx(1.0, abs=1e-12)
    assert forgetting.mu_squared[0] == pytest.approx(0.5, abs=1e-12)


@pytest.mark.parametrize("unit", ["record", "node"])
def test_the_factor_and_the_gram_paths_agree(unit: str) -> None:
    run = decor_run(n=12, rounds=8)
    for members in ([0], [3, 7]):
        view = pndp_view(run, members)
        factor = as_dict(view_losses(run, view, unit=unit, force="factor"))
        gram = as_dict(view_losses(run, view, unit=unit, force="gram"))
        assert factor.keys() == gram.keys()
        for key, value in factor.items():
            assert gram[key] == pytest.approx(value, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("unit", ["record", "node"])
def test_every_message_seen_is_its_revealed_increments(unit: str) -> None:
    """SecLDP and local DP from the revealed increments equal the message-level view on a
    lossy, churned DECOR run (offline ends leave secrets uncancelled)."""
    run = decor_run()
    for members in ([], [3], [2, 5]):
        messages = as_dict(view_losses(run, secldp_view(run, members), unit=unit))
        increments = as_dict(increment_losses(run, members, unit=unit))
        assert messages.keys() == increments.keys()
        for key, value in messages.items():
            assert increments[key] == pytest.approx(value, rel=1e-9, abs=1e-12)
    for node in (0, 4):
        messages = as_dict(view_losses(run, ldp_view(run, node), unit=unit))
        increments = as_dict(increment_losses(run, local=node, unit=unit))
        assert messages == pytest.approx(increments, rel=1e-9)


def test_local_dp_is_the_sum_over_uses_and_secldp_is_below_it() -> None:
    """With every other noise known, each use is a Gaussian release at σ: μ² = Σ (Δ/σ)²; hidden
    secrets can only lower it."""
    run = decor_run(churn=1.0, loss=0.0)
    local = linear.local_mu_squared(run, "node")
    for node in range(run.n):
        mu2 = increment_losses(run, local=node, unit="node").mu_squared[0]
        assert mu2 == pytest.approx(local[(node, -1)], rel=1e-12)
        assert mu2 == pytest.approx(len(run.rounds) * (2.0 / 1.0) ** 2, rel=1e-12)
    secldp = as_dict(increment_losses(run, unit="node"))
    assert all(value < local[key] for key, value in secldp.items())


def test_a_secret_the_observer_holds_is_no_noise_to_it() -> None:
    """A coalition holding a pair's secret sees more than the eavesdropper alone: its view of
    every other unit loses at least nothing."""
    run = decor_run(churn=1.0, loss=0.0)
    alone = as_dict(increment_losses(run, [], unit="node"))
    holding = as_dict(increment_losses(run, [1], unit="node"))
    assert all(holding[key] >= alone[key] - 1e-12 for key in holding)
    assert any(holding[key] > alone[key] + 1e-6 for key in holding)


def test_the_view_is_a_monte_carlo_of_the_protocol() -> None:
    """Observer 0's received messages, simulated by running the protocol model itself with its
    own noise and secrets fixed (it knows them) on two data sets where node u's inputs differ by
    their sensitivity at every use (aligned): the squared Mahalanobis distance of the two view
    distributions, estimated from samples alone, is the accountant's μ²."""
    run = decor_run(n=6, rounds=3, churn=1.0, loss=0.0, sigma_cor=1.5)
    observer, target, samples = 0, 2, 60_000
    exact = view_losses(run, pndp_view(run, [observer]), unit="node", nodes=[target])
    rng = np.random.default_rng(5)

    def views(shift: float) -> np.ndarray:
        return sample_received(run, observer, target, shift=shift, samples=samples, rng=rng,
                               fixed=np.random.default_rng(7))  # fmt: skip

    zero, moved = views(0.0), views(1.0)
    difference = moved.mean(axis=1) - zero.mean(axis=1)
    covariance = 0.5 * (np.cov(zero) + np.cov(moved))
    estimate = float(difference @ np.linalg.solve(covariance, difference))
    rows = zero.shape[0]
    # the estimate's relative error: about √(2/samples·(1 + 2·rows/μ²)) for means and covariance
    tolerance = 4 * np.sqrt(2.0 / samples * (1 + 2 * rows / exact.mu_squared[0]))
    assert estimate == pytest.approx(exact.mu_squared[0], rel=tolerance)


AUDIT_DELTA = 1e-3


def audited_run() -> LinearRun:
    """A 6-node ring with a chord, 3 rounds, every node online: DECOR noise σ = 1, σ_cor = 3."""
    return decor_run(n=6, rounds=3, churn=1.0, loss=0.0, sigma=1.0, sigma_cor=3.0)


def test_the_audit_stays_below_the_accounted_epsilon() -> None:
    """Observer 0 against its neighbour 1: a threshold test on 200,000 runs per data set
    certifies ε ≥ 3.8 (95 %) where the accountant says 4.63."""
    run = audited_run()
    accounted = view_losses(run, pndp_view(run, [0]), unit="node", nodes=[1]).mu_squared[0]
    epsilon = linear.epsilon_of(accounted, AUDIT_DELTA)
    audit = audit_pair(run, 0, 1, delta=AUDIT_DELTA, samples=200_000)
    assert 0.6 * epsilon < audit.epsilon_lower <= epsilon


def test_the_audit_catches_a_run_with_half_the_noise() -> None:
    run = audited_run()
    accounted = view_losses(run, pndp_view(run, [0]), unit="node", nodes=[1]).mu_squared[0]
    audit = audit_pair(run, 0, 1, delta=AUDIT_DELTA, samples=200_000, noise_scale=0.5)
    assert audit.epsilon_lower > linear.epsilon_of(accounted, AUDIT_DELTA)


def test_the_audit_catches_an_accountant_told_a_held_secret_is_hidden() -> None:
    """The accountant treats observer 0's secrets (with 1, 5 and 3) as hidden: it claims
    3.15 where the run leaks at least 3.8."""
    run = audited_run()
    honest = pndp_view(run, [0])
    mistaken = View(honest.rows, honest.known_nodes, secret_holders=np.zeros(0, np.int64))
    claimed = view_losses(run, mistaken, unit="node", nodes=[1]).mu_squared[0]
    assert claimed < view_losses(run, honest, unit="node", nodes=[1]).mu_squared[0]
    audit = audit_pair(run, 0, 1, delta=AUDIT_DELTA, samples=200_000)
    assert audit.epsilon_lower > linear.epsilon_of(claimed, AUDIT_DELTA)


def test_the_rank_cut_keeps_a_small_but_real_direction() -> None:
    """A view whose noise is 10⁻⁷ of the largest in one direction: the shift along it is
    hidden by that noise, μ² = (1/10⁻⁷)². A cut of 10⁻⁶ (looser) drops the direction and
    calls the shift revealed (infinite loss); the Gram path with its 10⁻¹² eigenvalue cut
    keeps it. Both cuts are what the docs state."""
    factor = np.diag([1.0, 1e-7])
    shift = np.array([[0.0], [1.0]])
    white = whitening(factor)
    assert white.rank == 2
    value = float((white.whiten_from(shift, 0) ** 2).sum())
    assert value == pytest.approx(1e14, rel=1e-9)
    assert linear.RANK_TOLERANCE <= 1e-8 and linear.GRAM_TOLERANCE <= 1e-12
    loose = np.linalg.svd(factor)[1] > 1e-6
    assert not loose.all()  # a looser cut would lose the direction


def exact_leverages(graph: nx.Graph, observer: int, rounds: int) -> tuple[np.ndarray, int]:
    """λ_u (every node but ``observer``) of Muffliato's averaging on a d-regular ``graph`` for
    ``rounds`` rounds, in exact arithmetic: Metropolis weights are W = (I + A)/(d + 1), so
    the message from a neighbour w in round t, row w of W^t, is the integer row
    e_wᵀ(I + A)^t up to its scale, which does not change the rows' span. The rows, exact
    Python integers, are orthonormalised at 80 digits (mpmath, Gram–Schmidt twice); λ_u is
    the squared norm of u's coordinate in that basis. Returns λ and the view's rank."""
    import mpmath

    n = graph.number_of_nodes()
    step = nx.to_numpy_array(graph, dtype=np.int64).astype(object) + np.eye(n, dtype=int)
    others = [u for u in range(n) if u != observer]
    current = [np.eye(n, dtype=int)[w].astype(object) for w in sorted(graph[observer])]
    rows = []
    for _ in range(rounds):
        rows += [row[others] for row in current]
        current = [row.dot(step) for row in current]
    with mpmath.workdps(80):
        basis: list[list] = []
        for row in rows:
            v = [mpmath.mpf(int(x)) for x in row]
            size = mpmath.sqrt(mpmath.fsum(x * x for x in v))
            for _ in range(2):
                for b in basis:
                    dot = mpmath.fsum(x * y for x, y in zip(v, b, strict=True))
                    v = [x - dot * y for x, y in zip(v, b, strict=True)]
            left = mpmath.sqrt(mpmath.fsum(x * x for x in v))
            # a new direction is at least 1e-15 of its row here, a dependent row 1e-60 at most:
            # the exact rank is not in doubt
            assert not mpmath.mpf(10) ** -60 < left / size < mpmath.mpf(10) ** -15
            if left > mpmath.mpf(10) ** -40 * size:
                basis.append([x / left for x in v])
        lam = [float(mpmath.fsum(b[i] ** 2 for b in basis)) for i in range(len(others))]
    return np.array(lam), len(basis)


@pytest.mark.parametrize(
    ("name", "rank"),
    [("cycle", 40), ("random 4-regular", 63)],
)
def test_the_rank_cut_gives_the_exact_loss_of_20_rounds_of_gossip_on_64_nodes(
    name: str, rank: int
) -> None:
    """Muffliato's averaging (noise σ = Δ = 1 once, then 20 rounds of Metropolis gossip) on 64
    nodes, observer 0: every pair's λ, and its ε at δ = 10⁻⁵, from both accountants
    (``pairwise``'s leverages and the linear accountant's factor) against the exact
    computation. The view's real directions go down to 1e-11 of its largest singular value
    on the cycle (1.9e-10 on the random graph): a cut of 1e-10 drops four of the cycle's 40
    and puts a node at λ = 0.004 whose exact λ is 1, a cut of 1e-6 drops 17 of the random
    graph's 63 (λ 0.51 for 1)."""
    from netsim.privacy.mechanisms import gaussian_epsilon
    from netsim.privacy.pairwise import pairwise_epsilons

    graph = nx.cycle_graph(64) if name == "cycle" else nx.random_regular_graph(4, 64, seed=1)
    exact, found = exact_leverages(graph, 0, 20)
    assert found == rank
    weights = metropolis_weights(nx.to_numpy_array(graph))
    pairs = pairwise_epsilons([weights] * 20, sigma=1.0, sensitivity=1.0, delta=1e-5,
                              observers=[0])  # fmt: skip
    np.testing.assert_array_equal(pairs["record"], np.arange(1, 64))
    np.testing.assert_allclose(pairs["leverage"], exact, atol=1e-9)
    expected = [gaussian_epsilon(1.0, float(np.sqrt(value)), 1e-5) for value in exact]
    np.testing.assert_allclose(pairs["epsilon"], expected, rtol=1e-8, atol=1e-12)
    run = LinearRun(64)
    links = sp.coo_matrix(weights)
    off = links.row != links.col
    for t in range(20):
        run.rounds.append(LinearRound(
            mixing=sp.csr_matrix(weights), step=np.full(64, float(t == 0)),
            noise_std=np.ones(64), sensitivity=np.ones(64), batch=np.zeros(64, np.int64),
            sent_src=links.col[off], sent_dst=links.row[off],
            delivered=np.ones(int(off.sum()), bool),
        ))  # fmt: skip
    losses = view_losses(run, pndp_view(run, [0]), unit="node")
    np.testing.assert_array_equal(losses.node, np.arange(1, 64))
    np.testing.assert_allclose(losses.mu_squared, exact, atol=1e-9)


def test_accelerated_averaging_is_a_case_too() -> None:
    """Chebyshev-accelerated gossip (x' = γ W h + (1 − γ) x_prev) on a 4-regular graph of 64
    nodes: the linear accountant's λ equals netsim.privacy.pairwise's."""
    from netsim.privacy.pairwise import pairwise_epsilons

    weights = metropolis_weights(nx.to_numpy_array(nx.random_regular_graph(4, 64, seed=2)))
    mixing, gamma = [weights] * 6, 1.3
    reference = pairwise_epsilons(mixing, sigma=1.0, sensitivity=1.0, delta=1e-5,
                                  observers=[0, 9], acceleration=gamma)  # fmt: skip
    run = LinearRun(64)
    links = sp.coo_matrix(weights)
    off = links.row != links.col
    for t in range(len(mixing)):
        run.rounds.append(LinearRound(
            mixing=sp.csr_matrix(weights), step=np.full(64, float(t == 0)),
            noise_std=np.ones(64), sensitivity=np.ones(64), batch=np.zeros(64, np.int64),
            sent_src=links.col[off], sent_dst=links.row[off],
            delivered=np.ones(int(off.sum()), bool), gamma=gamma if t > 0 else None,
        ))  # fmt: skip
    for observer in (0, 9):
        losses = view_losses(run, pndp_view(run, [observer]), unit="node")
        expected = reference[reference["observer"] == observer].set_index("record")["leverage"]
        np.testing.assert_allclose(losses.mu_squared, expected.loc[losses.node], atol=1e-10)


@pytest.mark.parametrize("unit", ["record", "node"])
def test_every_nodes_local_dp_at_once_is_each_nodes_alone(unit: str) -> None:
    run = decor_run()
    together = as_dict(increment_losses(run, unit=unit, every_local=True))
    alone: dict[tuple[int, int], float] = {}
    for node in range(run.n):
        alone |= as_dict(increment_losses(run, local=node, unit=unit))
    assert together.keys() == alone.keys()
    for key, value in alone.items():
        assert together[key] == pytest.approx(value, rel=1e-12)


def without_secrets(run: LinearRun) -> LinearRun:
    """The run with independent noise only (decentralised SGD's ``local`` noise)."""
    for this in run.rounds:
        this.secret_a = this.secret_b = np.zeros(0, np.int64)
        this.secret_std = np.zeros(0)
        this.secret_a_added = this.secret_b_added = np.zeros(0, bool)
    return run


@pytest.mark.parametrize("secrets", [True, False])
def test_a_gram_formed_in_place_of_the_factor_agrees_with_it(
    secrets: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every view above ``GRAM_FIRST`` (here all) whose Σ has full rank is whitened by its
    Cholesky factor with the recursed whitened coefficients: the losses equal the factor's SVD
    to 1e-12 (with and without DECOR's secrets: the Σ of independent noise is a SYRK)."""
    run = decor_run(n=12, rounds=8)
    if not secrets:
        run = without_secrets(run)
    monkeypatch.setattr(linear, "GRAM_FIRST", 0)
    for members in ([0], [6], [3, 7]):
        view = pndp_view(run, members)
        assert linear._gram_first(run, view)
        system = linear.view_system(run, view)
        assert system.gram is not None and system.whitening() is not None
        for unit in ("record", "node"):
            fast = as_dict(view_losses(run, view, unit=unit))
            factor = as_dict(view_losses(run, view, unit=unit, force="factor"))
            assert fast.keys() == factor.keys()
            for key, value in factor.items():
                assert fast[key] == pytest.approx(value, rel=1e-12, abs=1e-300)


def test_a_gram_in_place_of_the_factor_without_full_rank_falls_back_to_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nodes 3 and 5 both receive node 4's messages: two equal rows, Σ singular. The Gram
    formed first is not whitened; the factor's SVD cuts the rank, the numbers its own."""
    run = without_secrets(decor_run(n=12, rounds=8, churn=1.0, loss=0.0))
    monkeypatch.setattr(linear, "GRAM_FIRST", 0)
    view = pndp_view(run, [3, 5])
    assert linear.view_system(run, view).whitening() is None
    fast = view_losses(run, view, unit="node")
    factor = view_losses(run, view, unit="node", force="factor")
    np.testing.assert_array_equal(fast.mu_squared, factor.mu_squared)
    np.testing.assert_array_equal(fast.exact, factor.exact)
