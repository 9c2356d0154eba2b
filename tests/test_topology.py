import networkx as nx
import numpy as np
import pytest

from netsim.errors import TopologyError
from netsim.network import topology as t


def test_k_out_degrees_exact_values_and_connectivity():
    g = t.k_out(1000, 50, np.random.default_rng(1))
    assert g.directed
    assert (g.degrees() == 50).all()
    assert g.edge_count == 50_000
    assert all(node not in g.neighbours(node) for node in range(1000))
    assert all(len(set(g.neighbours(i).tolist())) == 50 for i in range(1000))
    assert g.is_connected()
    small = t.k_out(10, 3, np.random.default_rng(42))
    assert small.neighbours(0).tolist() == [1, 6, 7]
    assert small.neighbours(9).tolist() == [3, 6, 8]


@pytest.mark.parametrize(("n", "k"), [(2, 1), (7, 6), (300, 5), (2000, 50)])
def test_k_out_is_what_from_edges_makes_of_the_same_draws(n, k):
    # the directed k_out builds its CSR directly (10⁶ × 50 in 200 MB); it must be
    # exactly the general path's result: each node's draws, sorted, int32
    built = t.k_out(n, k, np.random.default_rng(n))
    rng = np.random.default_rng(n)
    picks = [rng.choice(n - 1, size=k, replace=False) for _ in range(n)]
    targets = np.concatenate([p + (p >= node) for node, p in enumerate(picks)])
    general = t.Topology.from_edges(n, np.repeat(np.arange(n), k), targets, directed=True)
    assert np.array_equal(built.indptr, general.indptr)
    assert np.array_equal(built.indices, general.indices)
    assert built.indices.dtype == np.int32 and built.directed


def test_k_out_undirected_is_symmetric():
    g = t.k_out(200, 5, np.random.default_rng(3), undirected=True)
    nxg = g.to_networkx()
    assert not g.directed and isinstance(nxg, nx.Graph)
    assert g.degrees().min() >= 5
    for u in range(200):
        for v in g.neighbours(u):
            assert u in g.neighbours(int(v))


def test_k_out_choices_are_uniform():
    # each of the other n-1 nodes is chosen with probability k/(n-1) by every node
    n, k, trials = 20, 4, 4000
    counts = np.zeros(n)
    rng = np.random.default_rng(0)
    for _ in range(trials // n):
        g = t.k_out(n, k, rng)
        counts += np.bincount(g.indices, minlength=n)
    expected = (trials // n) * n * k / n
    # binomial-ish counts: 5 standard deviations
    sd = np.sqrt(expected)
    assert np.abs(counts - expected).max() < 5 * sd


def test_networkx_builders_exact_values_at_fixed_seeds():
    assert t.random_regular(20, 3, 7).neighbours(0).tolist() == [9, 10, 19]
    assert (t.random_regular(20, 3, 7).degrees() == 3).all()
    assert t.erdos_renyi(50, 0.1, 7).edge_count == 143
    assert t.watts_strogatz(20, 4, 0.2, 7).neighbours(0).tolist() == [1, 2]
    assert t.barabasi_albert(30, 2, 7).edge_count == 56
    assert t.random_geometric(50, 0.3, 7).edge_count == 253
    # same seed, same graph; other seed, other graph
    assert np.array_equal(t.erdos_renyi(50, 0.1, 7).indices, t.erdos_renyi(50, 0.1, 7).indices)
    assert not np.array_equal(t.erdos_renyi(50, 0.1, 8).indices, t.erdos_renyi(50, 0.1, 7).indices)


def test_ring_complete_and_edge_list(tmp_path):
    ring = t.ring(10, 2)
    assert ring.neighbours(0).tolist() == [1, 2, 8, 9]
    assert (ring.degrees() == 4).all() and ring.is_connected()
    full = t.complete(6)
    assert (full.degrees() == 5).all() and full.edge_count == 30
    path = tmp_path / "edges.txt"
    path.write_text("# a triangle and a tail\n0 1\n1,2\n2 0\n2 3  # tail\n")
    g = t.edge_list(path, 4)
    assert g.neighbours(2).tolist() == [0, 1, 3]
    assert g.edge_count == 4 and not g.directed
    d = t.edge_list(path, 4, directed=True)
    assert d.neighbours(3).tolist() == [] and d.neighbours(2).tolist() == [0, 3]


@pytest.mark.parametrize(
    "build",
    [
        lambda: t.k_out(5, 5, np.random.default_rng(0)),
        lambda: t.random_regular(5, 3, 0),
        lambda: t.ring(4, 2),
        lambda: t.watts_strogatz(10, 1, 0.1, 0),
    ],
)
def test_impossible_parameters_are_errors(build):
    with pytest.raises(TopologyError):
        build()
