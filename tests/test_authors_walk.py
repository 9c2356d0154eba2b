"""The authors' walk as their code runs it (``walk.cycle: authors``; C4, C5 and C7 of
docs/walk-variants.md): what a node keeps when a walk arrives, how a walk is held and handed
over, what a node does when it comes back online, and the cycle in exact mode. The compiled
cycle of rounds mode is tested rule by rule in tests/test_round_kernels.py."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.log import EventLog
from netsim.network import topology as t
from netsim.network.links import LinkModel, Network, Transfer
from netsim.network.nodes import NodeStates
from netsim.protocols.gossip import PushPullGossip
from netsim.protocols.walk import RandomWalkService, VisitCounter, WalkToken, WalkVariant
from netsim.sim import Simulation
from tests.equivalence import compare, measure

DELTA = 11.0
AUTHORS = WalkVariant(
    replace_rule="authors", age_error=0.0, bootstrap_update=False, cycle="authors"
)


def authors_service(n=6, transfer=1.0, gossip=False, seed=2):
    """A walk service under the authors' cycle on a complete graph, with exact-mode gossip
    (period 0.1 s) when asked; no bootstrap (the tests launch their walks)."""
    sim = Simulation(seed=seed, log=EventLog())
    nodes = NodeStates(np.ones(n, dtype=bool))
    network = Network(sim, t.complete(n), nodes, LinkModel())
    service = RandomWalkService(
        sim, network, VisitCounter(sim, n), transfer_time=transfer, timeout=DELTA, start=1e12,
        variant=AUTHORS,
    )  # fmt: skip
    engine = None
    if gossip:
        engine = PushPullGossip(sim, network, service, period=0.1)
        service.attach(engine)
    return sim, service, nodes, engine


def arrive(service, node, token, sender=0):
    transfer = Transfer(sender, node, "walk", token, service.sim.now, 0, 0, lambda tr: None, None)
    service.propagating[token.walk] = token
    service.on_receive_random_walk(transfer)


def rows(table):
    """An event table's rows so far, as {column: list}."""
    frame = table.to_arrow().to_pandas()
    return {name: frame[name].tolist() for name in table.schema.column_names}


def record(service, node):
    """(steps, id, age) of ``node``'s visible record."""
    visible = service.cycle.prop[node]
    return int(visible["steps"]), int(visible["id"]), service.sim.now - float(visible["origin"])


# --- C4: a walk arrives ---------------------------------------------------------------------


def test_a_walk_that_ends_leaves_the_local_copy_as_it_was():
    """The authors' code keeps the arriving walk as its local copy only when it forwards it;
    the paper's line 28 keeps it in any case."""
    _sim, service, _nodes, _ = authors_service()
    service.cycle.store(2, 20, 5, 0.0)  # node 2 holds a live update at step 20
    service.rw_steps[2] = 3
    token = WalkToken(walk=1, steps=9, state=None, restart_of=-1, holder=0)
    arrive(service, 2, token)
    assert token.status == "ended" and service.counts["dropped"] == 1
    assert service.rw_steps[2] == 3  # not 10


def test_an_update_made_from_the_local_copy_carries_the_local_copys_id():
    """When the local copy has at least the arriving walk's steps it is what is forwarded,
    and the node's new update takes the id the copy carries (latestModel's stepID); a walk
    with more steps makes an update with a fresh id and becomes the local copy."""
    sim, service, _nodes, _ = authors_service()
    service.cycle.store(2, 20, 5, 0.0)
    sim.run(DELTA + 1)  # update 5 has timed out: any walk is forwarded
    service.rw_steps[2], service.cycle.rw_update[2] = 30, 77
    behind = WalkToken(walk=1, steps=9, state=None, restart_of=-1, holder=0)
    arrive(service, 2, behind)
    assert (behind.steps, behind.update, behind.status) == (30, 77, "holding")
    assert record(service, 2)[:2] == (30, 77)
    service.rw_steps[3], service.cycle.rw_update[3] = 4, 78
    ahead = WalkToken(walk=2, steps=40, state=None, restart_of=-1, holder=0)
    arrive(service, 3, ahead)
    steps, update, age = record(service, 3)
    assert (steps, age) == (41, 0.0) and update not in (5, 77, 78)
    assert service.rw_steps[3] == 41 and service.cycle.rw_update[3] == update == ahead.update


# --- C5: holding and handing over -----------------------------------------------------------


def held_walk(n=3, transfer=1.0, gossip=False):
    """A walk launched at node 0 at time 0 (held there for ``transfer``)."""
    sim, service, nodes, engine = authors_service(n=n, transfer=transfer, gossip=gossip)
    service.launch(0, 5, "bootstrap", 0, -1, 0)
    (token,) = service.propagating.values()
    return sim, service, nodes, engine, token


def test_a_walk_is_held_for_the_transfer_time_then_handed_over_at_once():
    sim, service, _nodes, _, token = held_walk()
    target = token.target
    assert token.status == "holding" and token.holder == 0 and target in (1, 2)
    sim.run(0.999)
    assert token.status == "holding" and token.holder == 0
    sim.run(1.0 + 1e-9)
    assert token.holder == target and token.steps == 6
    steps = rows(service.steps_table)
    assert steps["time"] == [1.0] and steps["node"] == [target]


def test_an_offline_target_costs_a_second_full_hold_and_no_still_needed_test():
    """The target is looked at only when the hold ends; then a new target is chosen and the
    walk held for another full δ_rw, even though its holder learnt of a fresher walk."""
    sim, service, nodes, _, token = held_walk()
    first = token.target
    sim.call_later(0.5, nodes.set_offline, first, 0.5)
    sim.call_later(0.6, service.cycle.store, 0, 100, 9, 0.0)  # a fresher walk is known
    sim.run(1.5)
    assert token.status == "holding" and token.holder == 0 and token.target == 3 - first
    sim.run(2.0 + 1e-9)
    assert token.holder == 3 - first and service.counts["superseded"] == 0


def test_a_holder_that_leaves_parks_the_walk_and_its_hold_end_is_lost():
    """Offline at the end of the hold: the walk is parked (not propagating) until the holder
    is back, then held again from there (C5, C7.3)."""
    sim, service, nodes, _, token = held_walk(n=4, gossip=True)
    sim.call_later(0.5, nodes.set_offline, 0, 0.5)
    sim.call_later(1.5, nodes.set_online, 0, 1.5)
    sim.run(1.2)
    assert token.status == "suspended" and token.walk not in service.propagating
    sim.run(1.5 + 1e-9)
    assert token.status == "holding" and token.holder == 0  # resent on rejoining
    sim.run(2.4)
    assert token.holder == 0
    sim.run(2.5 + 1e-9)
    assert token.holder != 0 and token.steps == 6


def test_a_hold_begun_before_the_holder_left_and_came_back_still_ends_on_time():
    """Their hold ends act on the walk by its message id: back online before the first hold
    ends, the holder resends the walk, and the first hold's end hands it over anyway."""
    sim, _service, nodes, _, token = held_walk(n=4, gossip=True)
    sim.call_later(0.3, nodes.set_offline, 0, 0.3)
    sim.call_later(0.6, nodes.set_online, 0, 0.6)
    sim.run(1.0 + 1e-9)
    assert token.holder != 0 and token.steps == 6


def test_a_parked_walk_overtaken_meanwhile_ends_when_its_holder_is_back():
    sim, service, nodes, _, token = held_walk(n=4, gossip=True)
    sim.call_later(0.5, nodes.set_offline, 0, 0.5)
    for node in (1, 2, 3):
        sim.call_later(0.7, service.cycle.store, node, 50, 9, 0.0)
    sim.call_later(1.5, nodes.set_online, 0, 1.5)
    sim.run(1.5 + 1e-9)
    assert token.status == "ended" and service.counts["abandoned"] == 1
    assert record(service, 0)[:2] == (50, 9)  # it pulled the fresher update first


# --- C7: back online ------------------------------------------------------------------------


def test_a_node_back_online_checks_its_timeout_exchanges_and_takes_part_at_once():
    sim, service, nodes, engine = authors_service(n=4, gossip=True)
    for node in range(4):
        service.cycle.store(node, 10, 3, 0.0)
        service.rw_steps[node] = 9
    sim.call_later(1.0, nodes.set_offline, 1, 1.0)
    sim.call_later(2.0, lambda: [service.cycle.store(v, 12, 4, 0.0) for v in (0, 2, 3)])
    sim.call_later(20.0, nodes.set_online, 1, 20.0)
    sim.run(20.0 + 1e-9)
    assert bool(engine.active[1])  # no wait for a push
    restarts = rows(service.restarts_table)
    assert restarts["node"] == [1] and restarts["update"] == [3]
    assert record(service, 1)[:2] == (12, 4)  # its exchange and its pull brought update 4


# --- the cycle in exact mode ----------------------------------------------------------------


def test_exact_mode_runs_each_nodes_cycle_at_its_tick_without_messages():
    """Every node ticks at the same instants k·Δ in index order, as in the authors'
    simulator; at its tick a node exchanges at once with a neighbour (no link time): its
    push lands in the peer's buffer, which the peer takes at its own tick, later in the same
    cycle; the engine's messages carry nothing of the walk."""
    sim, service, _nodes, engine = authors_service(n=4, gossip=True)
    assert not engine.phase.any()
    service.cycle.store(0, 12, 4, 0.0)
    for node in (1, 2, 3):
        service.cycle.store(node, 10, 3, 0.0)
    assert service.outgoing(0) is None
    sim.run(0.1 + 1e-9)  # one cycle: node 0 first, then its peer
    ids = [record(service, node)[1] for node in range(4)]
    assert ids[0] == 4 and ids.count(4) >= 2  # node 0's update went at least one hop
    assert all(int(service.cycle.buffer[v]["id"]) == ids[v] for v in range(4))  # buffers are copies


def test_exact_mode_checks_the_timeout_at_the_tick_before_the_push():
    sim, service, _nodes, _engine = authors_service(n=4, gossip=True)
    for node in range(4):
        service.cycle.store(node, 10, 3, 0.0)
    service.rw_steps[2] = 10
    sim.run(DELTA + 0.1 + 1e-9)  # every node has ticked once with the update past δ
    restarts = rows(service.restarts_table)
    assert restarts["node"] == [2] and restarts["i"] == [1]
    assert restarts["time"][0] == pytest.approx(DELTA, abs=0.1)


# --- the two modes agree --------------------------------------------------------------------


@pytest.mark.slow
def test_exact_and_rounds_agree_under_the_authors_cycle():
    """The equivalence scenario of tests/equivalence.py under preset: authors with the
    authors' cycle: the exact mode's per-node ticks and the rounds mode's index order give
    the same walk counts, restarts and progress within the comparison's tolerance."""
    walk = {"preset": "authors", "cycle": "authors"}
    seeds = range(3)
    exact = [measure(200, "30min", "exact", seed, walk) for seed in seeds]
    rounds = [measure(200, "30min", "rounds", seed, walk) for seed in seeds]
    slack = {"t90": 1.0, "mean_walks": 0.05, "restarts_per_hour": 40.0, "progress": 0.02}
    for comparison in compare(exact, rounds, slack):
        assert comparison.agrees, comparison


def test_a_node_back_online_ticks_at_the_very_instants_of_the_others():
    """Aligned ticks are one grid to the last bit: a rejoining node's ticks fall at the float
    every other node's re-queued tick computes, not at k·Δ (which differs from it after many
    cycles and would put the node before or after the whole cycle), and in its index's place
    in the cycle."""
    from netsim.protocols.gossip import _Tick

    sim, _service, nodes, engine = authors_service(n=4, gossip=True)
    sim.call_later(12.345, nodes.set_offline, 2, 12.345)
    sim.call_later(31.71, nodes.set_online, 2, 31.71)
    ticks = []
    hook = engine._before_push_hook
    engine._before_push_hook = lambda node: (ticks.append((sim.env.now, node)), hook(node))
    sim.run(40.05)
    pending = {
        when
        for when, _, _, event in sim.env._queue
        if isinstance(event, _Tick) and event.generation == engine._timer_generation[event.node]
    }
    assert len(pending) == 1 and bool(engine.active[2])
    # and it takes its turn in index order, as in their cycle, not last
    last = max(when for when, _ in ticks)
    assert [node for when, node in ticks if when == last] == [0, 1, 2, 3]


@pytest.mark.parametrize("mode", ["exact", "rounds"])
def test_a_hold_that_ends_on_a_cycle_ends_after_it(mode):
    """Their simulator runs a cycle before the protocol's events of its instant: a hold of
    δ_rw = 10Δ that ends on a cycle ends after that cycle's exchanges, at the very float the
    gossip's clock reaches there (Δ added up, not the start + 1.0)."""
    from netsim.protocols.rounds import RoundGossip

    sim, service, _nodes, _ = authors_service(n=4, transfer=1.0)
    engine_type = PushPullGossip if mode == "exact" else RoundGossip
    engine = engine_type(sim, service.network, [service] if mode == "rounds" else service,
                         period=0.1)  # fmt: skip
    service.attach(engine)
    order = []
    exchanges = service.cycle.exchanges if mode == "rounds" else service.cycle.tick

    def logged_exchange(*args, **kwargs):
        order.append(("cycle", sim.env.now))
        return exchanges(*args, **kwargs)

    hold_end = service.cycle.hold_end

    def logged_hold_end(*args):
        order.append(("hold end", sim.env.now))
        return hold_end(*args)

    if mode == "rounds":
        service.cycle.exchanges = logged_exchange
    else:
        engine._before_push_hook = logged_exchange
    service.cycle.hold_end = logged_hold_end
    sim.call_later(0.3, lambda: service.launch(0, 5, "bootstrap", 0, -1, 0))
    sim.run(1.35)
    (end,) = [when for what, when in order if what == "hold end"]
    cycle = 0.0
    for _ in range(13):
        cycle += 0.1  # the clock of the cycles, added up
    assert end == cycle
    at_end = [what for what, when in order if when == end]
    assert at_end[-1] == "hold end" and at_end.count("cycle") == (4 if mode == "exact" else 1)
