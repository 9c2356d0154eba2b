"""Reliable-transfer semantics: a message is lost iff an endpoint leaves before it completes."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.distributions import Constant
from netsim.log import EventLog
from netsim.network import topology as t
from netsim.network.churn import ChurnReplay, schedule_from_intervals
from netsim.network.links import LinkModel, Network
from netsim.network.nodes import NodeStates
from netsim.sim import Simulation


def make_network(n, intervals, horizon, links=None, seed=0):
    """A complete network whose node i is online during intervals[i] (list of (start, end))."""
    sim = Simulation(seed=seed, log=EventLog())
    nodes_, starts, ends = [], [], []
    for node, spans in enumerate(intervals):
        for s, e in spans:
            nodes_.append(node)
            starts.append(s)
            ends.append(e)
    schedule = schedule_from_intervals(
        n, np.array(nodes_), np.array(starts), np.array(ends), horizon
    )
    nodes = NodeStates(schedule.initially_online)
    network = Network(sim, t.complete(n), nodes, links or LinkModel())
    ChurnReplay(sim, nodes, schedule)
    return sim, network


def send_at(sim, network, when, src, dst, duration, outcomes):
    def go():
        network.send(
            src,
            dst,
            kind="test",
            payload=None,
            duration=duration,
            on_deliver=lambda tr: outcomes.append(("delivered", sim.now)),
            on_lost=lambda tr, why: outcomes.append((why, sim.now)),
        )

    sim.call_later(when, go)


times = st.floats(min_value=0.0, max_value=100.0, allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(
    send=times,
    duration=st.floats(0.01, 50.0),
    src_leave=times,
    dst_leave=times,
    rejoin=st.floats(0.001, 5.0),
)
def test_lost_iff_an_endpoint_leaves_before_completion(
    send, duration, src_leave, dst_leave, rejoin
):
    horizon = 1000.0
    done = send + duration
    # avoid exact ties between a leave and the completion instant (order would be arbitrary)
    for leave in (src_leave, dst_leave):
        for change in (leave, leave + rejoin):
            if any(math.isclose(change, x, abs_tol=1e-6) for x in (send, done)):
                return
    # each endpoint: online from 0, leaves at *_leave, comes back `rejoin` later
    intervals = [
        [(0.0, src_leave), (src_leave + rejoin, horizon)],
        [(0.0, dst_leave), (dst_leave + rejoin, horizon)],
    ]
    sim, network = make_network(2, intervals, horizon)
    outcomes = []
    send_at(sim, network, send, 0, 1, duration, outcomes)
    sim.run(horizon)
    assert len(outcomes) == 1
    outcome, when = outcomes[0]
    assert when == pytest.approx(done)  # the sender learns the outcome at completion time

    def offline_at(leave, t):
        return leave <= t < leave + rejoin

    if offline_at(src_leave, send):
        expected = "source_offline"
    elif offline_at(dst_leave, send):
        expected = "target_offline"
    else:
        left = [
            (leave, why)
            for leave, why in ((src_leave, "source_offline"), (dst_leave, "target_offline"))
            if send < leave < done
        ]
        expected = min(left)[1] if left else "delivered"
    assert outcome == expected
    lost = network.lost_table.rows
    assert lost == (0 if expected == "delivered" else 1)


def test_loss_is_logged_with_reason_and_time_of_departure():
    sim, network = make_network(2, [[(0, 5.0)], [(0, 100.0)]], 100.0)
    outcomes = []
    send_at(sim, network, 1.0, 0, 1, 10.0, outcomes)
    sim.run(100.0)
    frame = sim.log.to_frames()["messages_lost"]
    assert outcomes == [("source_offline", 11.0)]
    assert frame.to_dict("records") == [
        {
            "time": 5.0,
            "sent_at": 1.0,
            "kind": "test",
            "src": 0,
            "dst": 1,
            "reason": "source_offline",
        }
    ]


def test_transfer_time_is_delay_plus_size_over_bandwidth():
    links = LinkModel(delay=Constant(dist="constant", value=0.05), bandwidth=12_500.0)
    sim, network = make_network(2, [[(0, 100.0)], [(0, 100.0)]], 100.0, links)
    arrivals = []
    sim.call_later(
        1.0,
        lambda: network.send(
            0, 1, kind="x", payload=None, size=1e6, on_deliver=lambda tr: arrivals.append(sim.now)
        ),
    )
    sim.run(100.0)
    assert arrivals == [pytest.approx(1.0 + 0.05 + 80.0)]


def test_random_loss_frequency():
    p, count = 0.2, 5000
    sim, network = make_network(2, [[(0, 1e6)], [(0, 1e6)]], 1e6, LinkModel(loss=p), seed=3)
    outcomes = []
    for k in range(count):
        send_at(sim, network, float(k), 0, 1, 0.5, outcomes)
    sim.run(1e6)
    lost = sum(o == "random_loss" for o, _ in outcomes)
    sd = math.sqrt(count * p * (1 - p))
    assert abs(lost - count * p) < 5 * sd


def test_link_failures_match_the_stationary_down_fraction():
    # up 9 s, down 1 s on average: an instantaneous transfer finds the link down 10% of the time
    links = LinkModel(mean_up=9.0, mean_down=1.0)
    count = 4000
    sim, network = make_network(2, [[(0, 1e6)], [(0, 1e6)]], 1e6, links, seed=4)
    outcomes = []
    for k in range(count):
        send_at(sim, network, 20.0 * k, 0, 1, 1e-6, outcomes)
    sim.run(1e6)
    down = sum(o == "link_down" for o, _ in outcomes) / count
    sd = math.sqrt(0.1 * 0.9 / count)
    assert abs(down - 0.1) < 5 * sd
    # a long transfer on the same link fails far more often: P(up for 9 s) = 0.9·e^{-1}
    sim, network = make_network(2, [[(0, 1e6)], [(0, 1e6)]], 1e6, links, seed=5)
    outcomes = []
    for k in range(count):
        send_at(sim, network, 50.0 * k, 0, 1, 9.0, outcomes)
    sim.run(1e6)
    ok = sum(o == "delivered" for o, _ in outcomes) / count
    expected = 0.9 * math.exp(-1.0)
    assert abs(ok - expected) < 5 * math.sqrt(expected * (1 - expected) / count)


def test_random_online_neighbour_is_uniform_over_online_neighbours():
    n = 12
    online = [[(0, 100.0)] if i % 3 else [(50.0, 100.0)] for i in range(n)]
    _sim, network = make_network(n, online, 100.0)
    from netsim.rng import BlockDraws

    draws = BlockDraws(np.random.default_rng(9).random)
    picks = np.array([network.random_online_neighbour(1, draws) for _ in range(11_000)])
    # node 1's online neighbours at time 0: nodes i with i % 3 != 0, except itself
    allowed = [i for i in range(n) if i % 3 and i != 1]
    assert set(picks.tolist()) == set(allowed)
    counts = np.bincount(picks, minlength=n)[allowed]
    expected = len(picks) / len(allowed)
    assert np.abs(counts - expected).max() < 5 * math.sqrt(expected)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    flips=st.lists(st.integers(0, 29), max_size=120),
    undirected=st.booleans(),
)
def test_online_neighbour_index_follows_every_transition(seed, flips, undirected):
    from netsim.network.links import OnlineNeighbourIndex

    rng = np.random.default_rng(seed)
    topology = t.k_out(30, 4, rng, undirected=undirected)
    nodes = NodeStates(rng.random(30) < 0.5)
    index = OnlineNeighbourIndex(topology, nodes)
    # the index of a topology too large for the full index holds positions and no slot map
    compact = OnlineNeighbourIndex(topology, nodes, compact=True)
    assert compact.order.dtype == np.uint8 and index.order.dtype == np.int32
    for node in flips:
        if nodes.online[node]:
            nodes.set_offline(node, 0.0)
        else:
            nodes.set_online(node, 0.0)
        # the same swaps, so the same order and the same later peer choices
        assert np.array_equal(compact.segments, index.segments)
        for u in range(30):
            segment = index.neighbours_in_order(u)
            assert np.array_equal(compact.neighbours_in_order(u), segment)
            listed = set(segment[: index.online_count[u]].tolist())
            truth = {int(v) for v in topology.neighbours(u) if nodes.online[v]}
            assert listed == truth
            assert sorted(segment.tolist()) == topology.neighbours(u).tolist()
    full_pairs = index.pairs(nodes.online, np.random.default_rng(seed))
    compact_pairs = compact.pairs(nodes.online, np.random.default_rng(seed))
    assert all(np.array_equal(a, b) for a, b in zip(full_pairs, compact_pairs, strict=True))


def test_round_peer_choice_is_uniform_over_online_neighbours():
    n = 12
    online = [[(0, 100.0)] if i % 3 else [(50.0, 100.0)] for i in range(n)]
    _sim, network = make_network(n, online, 100.0)
    rng = np.random.default_rng(4)
    only_node_1 = np.arange(n) == 1
    picks = np.concatenate([network.round_pairs(only_node_1, rng)[1] for _ in range(12_000)])
    allowed = [i for i in range(n) if i % 3 and i != 1]
    assert set(picks.tolist()) == set(allowed)
    counts = np.bincount(picks, minlength=n)[allowed]
    expected = picks.size / len(allowed)
    assert np.abs(counts - expected).max() < 5 * math.sqrt(expected)
