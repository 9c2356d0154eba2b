"""The package's tests, as a plugin author writes them: netsim's own component contract
(``netsim.testing``) on every component, and what each one is for.

Run them after installing the package (``pip install ./examples/netsim-examples``) with
``python -m pytest examples/netsim-examples/tests``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from netsim_examples.push_sum import push_sum_round

import netsim
from netsim.testing import assert_component_contract, check_component

#: Every component of the package (its entry points), with the keys the contract's small
#: scenario (12 nodes in a ring, two minutes) needs beyond the defaults.
COMPONENTS = {
    "push_sum": {},
    "max_value": {},
    "daily_sleep": {"bedtime": "30s", "spread": "10s", "sleep": "1min"},
    "metropolis_hastings": {},
    "circulant": {"offsets": [1, 3]},
    "coordinate_laplace": {},
    "fixed_gaussian": {"sigma": 6.0},
    "xor": {},
    "round_average": {"period": "10s"},
    "partitioned_links": {"split": 6, "start": "30s", "end": "1min"},
    "push_only": {"period": "2s"},
    "online_degree": {"every": "20s"},
    "quadratic_logistic": {},
}


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_every_component_keeps_the_netsim_contract(name):
    assert_component_contract(name, keys=COMPONENTS[name])


def test_push_sum_in_rounds_agrees_with_its_exact_mode():
    results = check_component("push_sum", agreement=("push_sum_error", "mean_error", 0.02))
    assert [r.check for r in results if not r.ok] == []
    assert any(r.check.startswith("its rounds agree") for r in results)


def batched_push_sum(initiators, peers, pull_lost, sums, weights):
    """The round as netsim's batched form merges it (``netsim.protocols.rounds``): each
    sender's messages carry 2^-(r+1) of its pair, in order, and it keeps 2^-count; the pushes
    are added in batches by rank, then the answers that were not lost."""

    def values(nodes):
        rank = np.zeros(nodes.size, dtype=np.int64)
        seen: dict[int, int] = {}
        for k, node in enumerate(nodes.tolist()):
            rank[k] = seen.get(node, 0)
            seen[node] = rank[k] + 1
        share = 0.5 ** (rank + 1)
        sent = sums[nodes] * share, weights[nodes] * share
        counts = np.bincount(nodes, minlength=sums.size)
        sums[:] *= 0.5**counts
        weights[:] *= 0.5**counts
        return sent

    pushed_sums, pushed_weights = values(initiators)
    for rank in range(initiators.size):  # batch r: the r-th push to each peer
        occurrence = np.array([np.sum(peers[:k] == peers[k]) for k in range(peers.size)])
        batch = np.flatnonzero(occurrence == rank)
        sums[peers[batch]] += pushed_sums[batch]
        weights[peers[batch]] += pushed_weights[batch]
    answered = ~pull_lost if pull_lost.size else np.ones(initiators.size, dtype=bool)
    if answered.any():
        pulled_sums, pulled_weights = values(peers[answered])
        sums[initiators[answered]] += pulled_sums
        weights[initiators[answered]] += pulled_weights


@given(
    st.integers(2, 12).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.permutations(range(n)).flatmap(
                lambda order: st.integers(1, n).flatmap(
                    lambda m: st.tuples(
                        st.just(order[:m]),
                        st.lists(st.integers(0, n - 1), min_size=m, max_size=m),
                        st.lists(st.booleans(), min_size=m, max_size=m) | st.just([]),
                    )
                )
            ),
            st.lists(st.floats(0, 1), min_size=n, max_size=n),
        )
    )
)
@settings(max_examples=200, deadline=None)
def test_the_push_sum_kernel_is_the_batched_round_bit_for_bit(case):
    """The compiled round (``push_sum_round``) adds and halves as the batched form does, so a
    run's tables are the same bit for bit in either form."""
    n, (initiators, peers, lost), values = case
    initiators, peers = np.array(initiators), np.array(peers)
    pull_lost = np.array(lost, dtype=bool)
    expected_sums, expected_weights = np.array(values), np.ones(n)
    batched_push_sum(initiators, peers, pull_lost, expected_sums, expected_weights)
    sums, weights, answers = np.array(values), np.ones(n), np.zeros(n, dtype=np.int64)
    push_sum_round(initiators, peers, pull_lost, sums, weights, answers)
    assert sums.tobytes() == expected_sums.tobytes()
    assert weights.tobytes() == expected_weights.tobytes()
    assert not answers.any()  # the scratch is left clean


def test_a_component_by_module_and_class_keeps_the_contract_too():
    assert_component_contract("netsim_examples.mh_walk:MetropolisHastingsWalk")


def test_the_metropolis_hastings_walk_visits_every_node_equally_often():
    """On a scale-free overlay a simple random walk visits hubs far more often; the
    Metropolis-Hastings walk visits every node equally often in the long run."""
    result = netsim.run(
        {
            "seed": 3,
            "nodes": 40,
            "duration": "30000s",
            "topology": {"kind": "barabasi_albert", "m": 2},
            "walk": {"kind": "metropolis_hastings", "step_time": "1s"},
        }
    )
    visits = result["walk_visits"]["visits"].to_numpy()
    steps = result["mh_walk_steps"]
    assert len(steps) > 29_000
    # the agent (visit_counter) saw every step the walk's table records
    assert (np.bincount(steps["node"], minlength=40) == visits).all()
    # uniform: every node within 30 % of the mean 750 (a degree-biased walk gives hubs 3-5x)
    assert np.abs(visits / visits.mean() - 1).max() < 0.3
    assert 0.2 < steps["accepted"].mean() < 1.0  # moves to hubs are refused at times
