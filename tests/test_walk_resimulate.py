"""One online-neighbour rule: the transport's event path (``Network.random_online_neighbour``)
and its compiled form (``netsim.network.links.online_neighbour``) pick the same neighbour
from the same draws, and the path-secret estimate's re-simulator
(``netsim.protocols.walk.resimulate``), given a walk's own draws and visit times, retraces
the path the walk service took on a run under churn."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import netsim
from netsim.log import EventLog
from netsim.network import topology as t
from netsim.network.links import REJECTION_TRIES, LinkModel, Network, online_neighbour
from netsim.network.nodes import NodeStates
from netsim.protocols.walk.resimulate import resimulated_walk_paths
from netsim.rng import BlockDraws, RandomStreams
from netsim.scenario.build import build_run
from netsim.scenario.loader import validate_scenario
from netsim.sim import Simulation


class CountingDraws(BlockDraws):
    """Block draws that count what they hand out (to compare the draws each form takes)."""

    __slots__ = ()

    def taken(self) -> int:
        return self._next


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    online_share=st.floats(0.0, 1.0),
    undirected=st.booleans(),
)
def test_the_compiled_rule_picks_what_the_transport_picks(seed, online_share, undirected):
    """For every node of a random overlay with a random online set (none, few, most, all
    online: the rejection tries, the pick among the online ones, and -1), both forms return
    the same neighbour and consume the same number of draws."""
    rng = np.random.default_rng(seed)
    topology = t.k_out(25, 3, rng, undirected=undirected)
    nodes = NodeStates(rng.random(25) < online_share)
    network = Network(Simulation(seed=0, log=EventLog()), topology, nodes, LinkModel())
    draws = rng.random(40_000)
    uniform = CountingDraws(lambda size: draws[:size], block=draws.size)
    at = 0
    for node in list(range(25)) * 20:
        expected = network.random_online_neighbour(node, uniform)
        got, at = online_neighbour(topology.indptr, topology.indices, nodes.online, node, draws, at)
        assert got == expected
        assert at == uniform.taken()


#: The walk service under churn, half the nodes online: the holder's neighbours are often
#: offline, so the rule's rejections and its pick among the online ones both decide steps.
SERVICE = {
    "name": "resimulate",
    "seed": 11,
    "nodes": 200,
    "duration": "15min",
    "topology": {"kind": "k_out", "k": 10},
    "churn": {
        "kind": "synthetic",
        "online": {"dist": "exponential", "mean": "30min"},
        "offline": {"dist": "exponential", "mean": "30min"},
    },
    "gossip": {"period": "1s"},
    "walk": {"kind": "service", "transfer_time": "1s", "timeout": "30s"},
}


def _first_walk(tables: dict) -> tuple[int, np.ndarray, np.ndarray]:
    """The first walk's start node, and its visit times and nodes (the start first) up to
    what the re-simulation leaves out: a second walk drawing from the same stream, a lost
    walk message, a wait for an online neighbour (a step that took longer than the
    transfer)."""
    restarts = tables["walk_restarts"]
    boot = restarts[restarts["reason"] == "bootstrap"].iloc[0]
    steps = tables["walk_steps"]
    first = steps[steps["walk"] == boot["walk"]].sort_values("steps")
    times = np.concatenate([[boot["time"]], first["time"].to_numpy()])
    nodes = np.concatenate([[boot["node"]], first["node"].to_numpy()])
    lost = tables["messages_lost"]
    cut = min(
        restarts.loc[restarts["reason"] != "bootstrap", "time"].to_numpy().min(initial=np.inf),
        lost.loc[lost["kind"] == "walk", "time"].to_numpy().min(initial=np.inf),
    )
    waits = np.flatnonzero(~np.isclose(np.diff(times), 1.0))
    keep = int(np.searchsorted(times, cut))
    if waits.size:
        keep = min(keep, int(waits[0]) + 1)
    return int(boot["node"]), times[:keep], nodes[:keep]


@pytest.fixture(scope="module")
def service_run() -> tuple[dict, object]:
    tables = netsim.run(SERVICE).tables
    built = build_run(validate_scenario(SERVICE, source="test", base_dir=None), EventLog())
    return tables, built


def test_the_resimulator_retraces_the_walk_from_its_own_draws(service_run) -> None:
    """Same draws, same path: re-simulated from the walk's stream (``walk.peers``) at its
    visit times on the run's churn schedule, the path is the walk's, step for step, over a
    stretch where the holders' neighbours were often offline."""
    tables, built = service_run
    start, times, nodes = _first_walk(tables)
    assert times.size >= 150
    schedule = built.churn.schedule
    topology = built.topology
    peers = RandomStreams(SERVICE["seed"]).get("walk.peers")
    path = resimulated_walk_paths(
        topology.indptr, topology.indices, schedule, times, 1, peers, start=start
    )[0]
    np.testing.assert_array_equal(path, nodes)
    # the churn mattered: some holder had offline neighbours when it forwarded
    online = np.asarray(schedule.initially_online).copy()
    offline_seen = 0
    change = 0
    for holder, when in zip(nodes[:-1], times[:-1], strict=True):
        while change < schedule.time.size and schedule.time[change] <= when:
            online[schedule.node[change]] = schedule.online[change]
            change += 1
        offline_seen += int((~online[topology.neighbours(int(holder))]).sum())
    assert offline_seen > times.size


def test_a_rule_with_other_tries_loses_the_walk(service_run) -> None:
    """The test above holds the two to the same rule: with 16 tries in place of the
    transport's 8 (the re-simulator's own rule before it took the transport's), the
    re-simulated path leaves the walk's where 8 tries missed."""
    tables, built = service_run
    start, times, nodes = _first_walk(tables)
    topology = built.topology
    assert REJECTION_TRIES == 8
    other = _sixteen_tries()
    path = other(topology.indptr, topology.indices, built.churn.schedule, times, start,
                 RandomStreams(SERVICE["seed"]).get("walk.peers"))  # fmt: skip
    assert not np.array_equal(path, nodes)


def _sixteen_tries():
    """The re-simulation with the pre-unification rule (16 rejection tries), in plain Python:
    a walk of one path started at ``start``, choosing at the previous visit."""

    def run(indptr, indices, schedule, times, start, rng):
        online = np.asarray(schedule.initially_online).copy()
        change = 0
        path = [start]
        for k in range(1, times.size):
            while change < schedule.time.size and schedule.time[change] <= times[k - 1]:
                online[schedule.node[change]] = schedule.online[change]
                change += 1
            here = path[-1]
            neighbours = indices[indptr[here] : indptr[here + 1]]
            chosen = -1
            for _ in range(16):
                candidate = neighbours[int(rng.random() * neighbours.size)]
                if online[candidate]:
                    chosen = int(candidate)
                    break
            if chosen < 0:
                listed = neighbours[online[neighbours]]
                chosen = int(listed[int(rng.random() * listed.size)]) if listed.size else -1
            path.append(chosen)
        return np.asarray(path)

    return run
