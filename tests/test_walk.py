"""The single random walk service (Hegedűs et al. 2016, Alg. 2): rules and properties."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from netsim.log import EventLog
from netsim.network import topology as t
from netsim.network.links import LinkModel, Network, Transfer
from netsim.network.nodes import NodeStates
from netsim.protocols.walk import (
    IdealWalk,
    RandomWalkService,
    VisitCounter,
    WalkToken,
    WalkVariant,
)
from netsim.protocols.walk.kernels import should_replace
from netsim.scenario.loader import validate_scenario
from netsim.scenario.runner import run_in_memory
from netsim.sim import Simulation

DELTA = 10.0


# --- line 14: the replace rule -------------------------------------------------------------

TRUTH_TABLE = [
    # (local steps, local age, new steps, new age, replace?)
    (5, 1.0, 6, 2.0, True),  # more steps, live, local not older
    (5, 1.0, 6, 11.0, False),  # more steps but timed out and older than the local one
    (5, 3.0, 6, 2.0, True),  # more steps and younger
    (5, 12.0, 6, 11.0, True),  # more steps, both timed out, incoming younger
    (5, 12.0, 4, 2.0, True),  # fewer steps, local timed out, incoming live
    (5, 12.0, 5, 11.0, False),  # equal steps, both timed out, incoming younger by < δ
    (5, 25.0, 4, 11.0, True),  # fewer steps but younger by more than δ
    (5, 1.0, 4, 0.0, False),  # fewer steps, both live
    (5, 1.0, 5, 1.0, False),  # same
    (5, 9.0, 5, 0.5, False),  # equal steps, local still live
]


@pytest.mark.parametrize(("steps", "age", "new_steps", "new_age", "expected"), TRUTH_TABLE)
def test_replace_rule_truth_table(steps, age, new_steps, new_age, expected):
    assert bool(should_replace(steps, age, new_steps, new_age, DELTA)) is expected


@given(
    st.lists(
        st.tuples(st.integers(-5, 5), st.floats(0, 40), st.integers(-5, 5), st.floats(0, 40)),
        min_size=1,
        max_size=50,
    )
)
def test_replace_rule_vectorised_equals_scalar(rows):
    a = np.array(rows)
    vector = should_replace(a[:, 0], a[:, 1], a[:, 2], a[:, 3], DELTA)
    scalar = [
        bool(should_replace(int(s), float(x), int(ns), float(nx), DELTA)) for s, x, ns, nx in rows
    ]
    assert vector.tolist() == scalar


# --- a small static harness ----------------------------------------------------------------


def harness(n=6, timeout=DELTA, transfer=1.0, kill=0.0, variant=None):
    sim = Simulation(seed=2, log=EventLog())
    nodes = NodeStates(np.ones(n, dtype=bool))
    network = Network(sim, t.complete(n), nodes, LinkModel())
    agent = VisitCounter(sim, n)
    service = RandomWalkService(
        sim,
        network,
        agent,
        transfer_time=transfer,
        timeout=timeout,
        kill_probability=kill,
        start=1e12,
        variant=variant or WalkVariant(),
    )  # no bootstrap here
    return sim, service


def gossip_value(service, node, steps, update, age, sent_at=None):
    sent_at = service.sim.now if sent_at is None else sent_at
    transfer = Transfer(0, node, "gossip_push", None, sent_at, 0, 0, lambda tr: None, None)
    service.incoming(node, (steps, update, sent_at - age, False), 0, transfer)


def arrive(service, node, token, sender=0):
    transfer = Transfer(sender, node, "walk", token, service.sim.now, 0, 0, lambda tr: None, None)
    service.on_receive_random_walk(transfer)


def test_bootstrap_state():
    _, service = harness(n=50)
    assert service.rw_steps.min() >= -50 and service.rw_steps.max() <= -1
    assert len(set(service.rw_steps.tolist())) > 10
    assert service.prop_special.all() and not any(service.timed_out(i) for i in range(50))
    # the bootstrap update is replaced by any real update, even an old one
    gossip_value(service, 3, 0, 7, age=3 * DELTA)
    assert service.prop_id[3] == 7 and not service.prop_special[3]


def test_ages_accumulate_time_on_links():
    sim, service = harness()
    sim.run(5.0)
    gossip_value(service, 1, 3, 9, age=2.0, sent_at=4.0)  # 1 s on the link
    assert service.age(1) == pytest.approx(3.0)


def test_accept_once_never_revives_a_timed_out_update():
    sim, service = harness()
    gossip_value(service, 1, 10, 42, age=0.0)
    sim.run(DELTA + 1)
    assert service.timed_out(1)
    # a copy of update 42 that has not timed out elsewhere arrives: it is dropped by id
    gossip_value(service, 1, 10, 42, age=1.0)
    assert service.timed_out(1) and service.age(1) == pytest.approx(DELTA + 1)
    # while another live update with the same step count would replace it (line 14)
    gossip_value(service, 1, 10, 43, age=1.0)
    assert service.prop_id[1] == 43 and not service.timed_out(1)


def test_walk_forwarded_when_it_is_the_best_known_and_dropped_otherwise():
    _sim, service = harness()
    gossip_value(service, 2, 20, 5, age=0.0)  # node 2 knows a live walk at step 20
    behind = WalkToken(walk=1, steps=9, state=None, restart_of=-1, holder=0)
    service.propagating[1] = behind
    arrive(service, 2, behind)
    assert behind.status == "ended"
    assert service.counts["dropped"] == 1 and service.rw_steps[2] == 10  # copy kept (line 28)
    ahead = WalkToken(walk=2, steps=20, state=None, restart_of=-1, holder=0)
    service.propagating[2] = ahead
    arrive(service, 2, ahead)
    assert ahead.status == "transfer" and ahead.steps == 21
    assert service.prop_steps[2] == 21 and service.prop_id[2] != 5  # a new update (line 31)


def test_restart_id_forces_the_update_to_time_out():
    _sim, service = harness()
    gossip_value(service, 2, 20, 5, age=0.0)
    plain = WalkToken(walk=1, steps=15, state=None, restart_of=-1, holder=0)
    service.propagating[1] = plain
    arrive(service, 2, plain)
    assert plain.status == "ended"  # update 5 is live: dropped
    service.rw_steps[2] = 0
    gossip_value(service, 2, 20, 6, age=0.0)  # replaces 5? no: same steps, both live
    assert service.prop_id[2] == 5
    restarted = WalkToken(walk=2, steps=15, state=None, restart_of=5, holder=0)
    service.propagating[2] = restarted
    arrive(service, 2, restarted)
    assert restarted.status == "transfer"  # forced to time out: forwarded (§4.4)
    assert service.prop_steps[2] == 16


def test_the_ith_timeout_widens_the_circle():
    _sim, service = harness()
    service.rw_steps[:] = [10, 11, 12, 13, 14, 14]
    for node in range(6):
        gossip_value(service, node, 14, 77, age=0.0)
    restarts = service.restarts_table
    for i in (1, 2, 3):
        for node in range(6):
            service.on_update_timeout(node, i)
    launched = [
        (row_node, row_i)
        for row_node, row_i in zip(restarts._columns[1], restarts._columns[4], strict=True)
    ]
    # node k restarts at the first i with 14 - rw.steps <= i, once (then it is forwarding)
    assert launched == [(3, 1), (4, 1), (5, 1), (2, 2), (1, 3)]  # node 0 would need i = 4


def test_negative_copies_restart_at_step_zero():
    _sim, service = harness()
    service.rw_steps[0] = -4
    gossip_value(service, 0, -3, 8, age=0.0)
    service.on_update_timeout(0, 1)
    assert restarts_steps(service) == [0]
    assert service.rw_steps[0] == 0


def restarts_steps(service):
    return list(service.restarts_table._columns[-1])


# --- the authors' variant (docs/walk-variants.md) ---------------------------------------------

AUTHORS_RULE = WalkVariant(replace_rule="authors")


def test_the_authors_rule_takes_back_an_update_it_holds():
    sim, service = harness(variant=AUTHORS_RULE)
    gossip_value(service, 1, 10, 42, age=0.0)
    sim.run(DELTA + 1)
    assert service.timed_out(1)
    # the copy of update 42 that has not timed out elsewhere revives it (no accept-once)
    gossip_value(service, 1, 10, 42, age=1.0)
    assert service.prop_id[1] == 42 and service.age(1) == pytest.approx(1.0)
    assert not service.timed_out(1)


@pytest.mark.parametrize(
    ("rule", "replaced"), [(WalkVariant(), False), (AUTHORS_RULE, True)], ids=["paper", "authors"]
)
def test_equal_steps_take_the_more_steps_branch_only_under_the_authors_rule(rule, replaced):
    # local (10 steps, age 1) and a live incoming (10 steps, age 2): line 14's "no more steps"
    # branch keeps the local update; the authors' "more steps" branch takes a live one
    sim, service = harness(variant=rule)
    sim.run(1.0)
    gossip_value(service, 1, 10, 5, age=0.0)
    sim.run(2.0)
    gossip_value(service, 1, 10, 6, age=2.0)
    assert bool(service.prop_id[1] == 6) == replaced


def test_a_taken_back_update_times_out_by_its_new_age():
    """An update re-adopted younger re-arms its timeout: the first circle fires at δ of the
    new age, not of the old one; re-adopted older, a circle already fired is not fired again."""
    sim, service = harness(variant=AUTHORS_RULE)
    service.rw_steps[1] = 10  # node 1 made the last step: it restarts at i = 1
    gossip_value(service, 1, 10, 42, age=0.0)
    sim.run(DELTA - 2)
    gossip_value(service, 1, 10, 42, age=1.0)  # younger by 7 s
    sim.run(DELTA + 1)
    assert service.restarts_table._columns[0] == []  # the old circle-1 instant passed quietly
    sim.run(3 * DELTA)
    times = list(service.restarts_table._columns[0])
    circles = list(service.restarts_table._columns[4])
    # the new origin is DELTA - 3, so circle 1 is due at 2·DELTA - 3; the restart launches a
    # walk that node 1 is still forwarding (the harness does not deliver), so no second one
    assert times == [pytest.approx(2 * DELTA - 3)] and circles == [1]


def test_the_age_error_is_uniform_in_its_width():
    width = 2.0
    sim, service = harness(n=2, variant=WalkVariant(age_error=width))
    sim.run(100.0)
    errors = []
    for update in range(1, 2001):
        gossip_value(service, 1, update, update, age=5.0)  # more steps, live: always adopted
        errors.append(service.age(1) - 5.0)
    errors = np.array(errors)
    assert errors.min() >= -width / 2 and errors.max() <= width / 2
    # mean 0 and variance w²/12, within 5 standard errors of 2,000 draws
    n = errors.size
    assert abs(errors.mean()) < 5 * width / math.sqrt(12 * n)
    fourth = width**4 / 80  # E[e⁴] of U[−w/2, w/2]
    var_se = math.sqrt((fourth - (width**2 / 12) ** 2) / n)
    assert abs(errors.var() - width**2 / 12) < 5 * var_se


def test_without_a_bootstrap_update_a_walk_killed_at_its_first_step_is_never_restarted():
    # every walk is killed on arrival: the paper's starter update times out and restarts it;
    # without the step-0 update nobody ever holds a real update, so nobody times out
    paper = run_in_memory(scenario(**{"walk.kill_probability": 1.0}))[1]
    authors = run_in_memory(
        scenario(**{"walk.kill_probability": 1.0, "walk.bootstrap_update": False})
    )[1]
    assert paper["walk_summary"].iloc[0]["restarts"] > 10
    assert authors["walk_summary"].iloc[0]["restarts"] == 0
    assert authors["walk_restarts"]["reason"].tolist() == ["bootstrap"]
    assert authors["walk_ends"]["reason"].tolist() == ["killed"]


def test_the_authors_preset_sets_its_rules_and_explicit_options_win():
    base = scenario().walk
    assert base.variant(0.1) == WalkVariant("paper", 0.0, True)
    assert base.cycle is None  # absent from the scenario's identity: old run ids hold
    authors = scenario(**{"walk.preset": "authors"}).walk
    # age error width Δ, and the authors' cycle, written into the resolved scenario
    assert authors.variant(0.1) == WalkVariant("authors", 0.1, False, "authors")
    assert authors.cycle == "authors"
    mixed = scenario(**{"walk.preset": "authors", "walk.age_error": "0s"}).walk
    assert mixed.variant(0.1) == WalkVariant("authors", 0.0, False, "authors")
    older = scenario(**{"walk.preset": "authors", "walk.cycle": "netsim"}).walk
    assert older.variant(0.1) == WalkVariant("authors", 0.1, False, "netsim")


def test_runs_of_the_authors_preset_from_before_its_cycle_get_new_ids():
    """A scenario that says preset: authors resolves to the authors' cycle and its id says
    so: the same id as with the cycle spelled out, another than with netsim's cycle (the
    rules its runs had before the preset took the authors' cycle)."""
    from netsim.scenario.loader import scenario_hash

    authors = scenario_hash(scenario(**{"walk.preset": "authors"}))
    older = scenario_hash(scenario(**{"walk.preset": "authors", "walk.cycle": "netsim"}))
    explicit = scenario_hash(scenario(**{"walk.preset": "authors", "walk.cycle": "authors"}))
    assert authors == explicit != older


# --- whole runs ----------------------------------------------------------------------------


def scenario(**overrides):
    data = {
        "name": "walk",
        "seed": 4,
        "nodes": 60,
        "duration": "5min",
        "topology": {"kind": "k_out", "k": 10},
        "gossip": {"period": "100ms"},
        "walk": {"kind": "service", "transfer_time": "1s", "timeout": "3s"},
        "metrics": {"sample_every": "10s"},
    }
    for key, value in overrides.items():
        target = data
        *path, last = key.split(".")
        for part in path:
            target = target.setdefault(part, {})
        target[last] = value
    return validate_scenario(data, source="<test>", base_dir=None)


def test_without_churn_one_walk_moves_at_full_speed_and_never_restarts():
    _built, tables = run_in_memory(scenario())
    steps = tables["walk_steps"]
    summary = tables["walk_summary"].iloc[0]
    # one step per δ_rw = 1 s from time 0: the maximum progress t/δ_rw
    assert steps["walk"].unique().tolist() == [0]
    assert steps["time"].tolist() == [float(k) for k in range(1, 300)]
    assert steps["steps"].tolist() == list(range(1, 300))
    assert tables["walk_restarts"]["reason"].tolist() == ["bootstrap"]
    assert summary["mean_propagating"] == pytest.approx(1.0)
    assert summary["restarts"] == 0 and summary["dropped"] == 0
    visits = tables["walk_visits"]
    assert visits["visits"].sum() == len(steps)


def test_a_crashed_holder_costs_only_the_last_step():
    cfg = scenario(**{"duration": "3min"})
    from netsim.log import EventLog as Log
    from netsim.scenario.build import build_run

    built = build_run(cfg.model_copy(update={"seed": 4}), Log())
    service = built["walk"]
    crash_at = 60.5
    crashed = {}

    def crash():
        (token,) = service.propagating.values()
        crashed["node"], crashed["steps"] = token.holder, token.steps
        built.nodes.set_offline(token.holder, built.sim.now)  # leaves mid-transfer for good

    built.sim.call_later(crash_at, crash)
    built.sim.run(cfg.duration)
    frames = built.sim.log.to_frames()
    restarts = frames["walk_restarts"]
    timeout_restarts = restarts[restarts["reason"] == "timeout"]
    assert len(timeout_restarts) == 1
    restart = timeout_restarts.iloc[0]
    # the node that sent the walk to the crashed holder restarts after one δ (i = 1)
    assert restart["i"] == 1
    assert crash_at < restart["time"] <= crash_at + 3.0
    assert restart["steps"] == crashed["steps"] - 1  # only the last step is lost
    # and the restarted walk then progresses at full speed again
    later = frames["walk_steps"][frames["walk_steps"]["walk"] == restart["walk"]]
    assert later["steps"].iloc[-1] - restart["steps"] >= 170 - math.ceil(restart["time"]) - 1


def churn_scenario(**overrides):
    """120 nodes with churn, Δ = 100 ms, δ_rw = Δ, gossip messages delayed 20–100 ms."""
    base = {
        "nodes": 120,
        "topology.k": 20,
        "links": {"delay": {"dist": "uniform", "low": "20ms", "high": "100ms"}},
        "churn": {
            "kind": "synthetic",
            "online": {"dist": "exponential", "mean": "20min"},
            "offline": {"dist": "exponential", "mean": "20min"},
        },
        "walk.transfer_time": "100ms",
    }
    base.update(overrides)
    return scenario(**base)


def test_with_churn_and_a_large_timeout_about_one_walk_propagates():
    # δ = δ_rw + 100Δ = 10.1 s: the paper's "large" setting
    _, tables = run_in_memory(churn_scenario(**{"walk.timeout": "10.1s"}))
    summary = tables["walk_summary"].iloc[0]
    assert 0.9 <= summary["mean_propagating"] <= 1.1
    assert summary["time_with_several"] < 0.05
    assert summary["max_steps"] >= 0.9 * 3000  # close to t/δ_rw = 300 s / 0.1 s


def test_a_timeout_near_the_broadcast_time_restarts_more_and_runs_more_walks():
    # with 20–100 ms per gossip message, spreading an update takes most of a second
    _, small = run_in_memory(churn_scenario(**{"walk.timeout": "700ms"}))
    _, large = run_in_memory(churn_scenario(**{"walk.timeout": "10.1s"}))
    s, lg = small["walk_summary"].iloc[0], large["walk_summary"].iloc[0]
    assert s["restarts"] >= 10 * max(lg["restarts"], 1)
    assert s["mean_propagating"] > lg["mean_propagating"]
    assert s["time_with_several"] > lg["time_with_several"]


def test_with_five_percent_kills_walks_never_die_out_for_good():
    _, tables = run_in_memory(
        churn_scenario(**{"walk.kill_probability": 0.05, "walk.timeout": "1.1s"})
    )
    ends = tables["walk_ends"]
    steps = tables["walk_steps"]
    killed = int((ends["reason"] == "killed").sum())
    assert killed > 50  # about one kill per 20 steps
    # after every kill a walk moves again, until the end of the run
    assert steps["time"].max() > 300 - 5
    # a killed walk's last update times out δ after it was made (or, if the nodes holding it
    # left, at 2δ elsewhere), and the restarted walk steps δ_rw later: no step-free stretch is
    # longer than that (a check of samples every 10 s would catch a run of unlucky instants)
    gaps = np.diff(np.sort(steps["time"].to_numpy()))
    assert gaps.max() <= 2 * 1.1 + 0.1 + 1e-6
    summary = tables["walk_summary"].iloc[0]
    assert summary["time_without_walk"] < 0.5


# --- ideal walks ---------------------------------------------------------------------------


def ideal(n, replacement, steps):
    sim = Simulation(seed=9, log=EventLog())
    agent = VisitCounter(sim, n)
    walk = IdealWalk(sim, n, agent, step_time=1.0, replacement=replacement)
    sim.run(steps + 0.5)
    return walk, agent, sim.log.to_frames()["walk_steps"]


def test_ideal_walk_without_replacement_follows_permutations():
    _walk, agent, steps = ideal(20, replacement=False, steps=100)
    nodes = steps["node"].to_numpy()
    for block in range(5):
        assert sorted(nodes[block * 20 : (block + 1) * 20].tolist()) == list(range(20))
    assert (agent.visits == 5).all()


def test_ideal_walk_with_replacement_is_uniform():
    n, count = 10, 20_000
    _walk, agent, steps = ideal(n, replacement=True, steps=count)
    expected = count / n
    assert np.abs(agent.visits - expected).max() < 5 * math.sqrt(expected)
    # the chance that a node is never visited in its first n steps is about e^-1 (§3.1)
    unvisited = []
    nodes = steps["node"].to_numpy()
    for start in range(0, count - n, n):
        unvisited.append(n - len(set(nodes[start : start + n].tolist())))
    assert np.mean(unvisited) / n == pytest.approx((1 - 1 / n) ** n, abs=0.02)


def rejoin_run(fresher_walk_elsewhere):
    """Node 1 takes a walk, leaves mid-transfer, rejoins 3 s later."""
    from netsim.protocols.gossip import PushPullGossip

    sim = Simulation(seed=3, log=EventLog())
    nodes = NodeStates(np.ones(5, dtype=bool))
    network = Network(sim, t.complete(5), nodes, LinkModel())
    service = RandomWalkService(
        sim, network, VisitCounter(sim, 5), transfer_time=1.0, timeout=DELTA, start=1e12
    )
    gossip = PushPullGossip(sim, network, service, period=0.1)
    service.attach(gossip)
    token = WalkToken(walk=7, steps=5, state=None, restart_of=-1, holder=0)
    service.propagating[7] = token
    sim.call_later(0.0, arrive, service, 1, token)
    sim.call_later(0.5, nodes.set_offline, 1, 0.5)
    if fresher_walk_elsewhere:
        sim.call_later(2.0, gossip_value, service, 2, 50, 999, 0.0)
    sim.call_later(3.0, nodes.set_online, 1, 3.0)
    statuses = {}
    sim.call_later(2.9, lambda: statuses.update(offline=token.status))
    sim.call_later(3.0, lambda: statuses.update(rejoined=(token.status, bool(gossip.active[1]))))
    sim.run(3.5)
    return service, token, statuses


def test_rejoining_holder_resumes_a_walk_that_is_still_the_leader():
    service, token, statuses = rejoin_run(fresher_walk_elsewhere=False)
    assert statuses["offline"] == "suspended"
    assert statuses["rejoined"] == ("suspended", False)  # waits for fresh gossip
    assert token.status == "transfer" and token.holder == 1 and token.steps == 6
    assert 7 in service.propagating


def test_rejoining_holder_abandons_a_walk_overtaken_meanwhile():
    service, token, statuses = rejoin_run(fresher_walk_elsewhere=True)
    assert statuses["rejoined"] == ("suspended", False)
    assert token.status == "ended" and service.counts["abandoned"] == 1
    assert service.prop_steps[1] == 50  # it learnt of the fresher walk first


def test_the_authors_cycle_is_refused_where_it_does_not_model_the_authors_code():
    """walk.cycle: authors runs in both gossip modes, on links that lose nothing (their
    code has no loss); on lossy links a run is refused with the reason."""
    from netsim.errors import ScenarioError

    base = {
        "seed": 1, "nodes": 50, "duration": "1min", "topology": {"kind": "k_out", "k": 5},
        "gossip": {"period": "1s", "mode": "rounds"},
        "walk": {"kind": "service", "transfer_time": "1s", "timeout": "11s", "cycle": "authors"},
    }  # fmt: skip
    lossy = {**base, "links": {"loss": 0.1}}
    with pytest.raises(ScenarioError, match="loses nothing"):
        run_in_memory(validate_scenario(lossy, source="t", base_dir=None))
    for mode in ("rounds", "exact"):
        fine = {**base, "gossip": {"period": "1s", "mode": mode}}
        built, _ = run_in_memory(validate_scenario(fine, source="t", base_dir=None))
        assert built["walk"].counts["steps"] > 0


@pytest.mark.parametrize("sampling", ["neighbour", "metropolis"])
def test_an_ideal_walk_along_the_topology_moves_by_its_transition_law(sampling, tmp_path):
    """The ideal walk along an irregular topology (a star of 4 leaves joined to a path): its
    transitions over 40,000 steps match the law — a uniform neighbour, or the
    Metropolis–Hastings weights 1/(1 + max(d_u, d_v)) with the rest on staying put — by a
    chi-square test per node (p > 1e-4 at this seed), and it never jumps off a link."""
    from scipy import stats

    from netsim.privacy.pairwise import metropolis_from_edges

    edges = [(0, 1), (0, 2), (0, 3), (0, 4), (4, 5), (5, 6)]
    path = tmp_path / "edges.txt"
    path.write_text("".join(f"{a} {b}\n" for a, b in edges))
    scenario = validate_scenario(
        {"name": "overlay-walk", "seed": 5, "nodes": 7, "duration": "40000s",
         "topology": {"kind": "edge_list", "path": str(path)},
         "walk": {"kind": "ideal", "sampling": sampling, "sample_every": "10000s"}},
        source="test", base_dir=None,
    )  # fmt: skip
    nodes = run_in_memory(scenario)[1]["walk_steps"]["node"].to_numpy()
    src, dst = np.array(edges).T
    law = metropolis_from_edges(7, src, dst).toarray()
    if sampling == "neighbour":
        np.fill_diagonal(law, 0.0)
        law = (law > 0) / (law > 0).sum(axis=1, keepdims=True)
    counts = np.zeros((7, 7))
    np.add.at(counts, (nodes[:-1], nodes[1:]), 1)
    assert (counts[law == 0] == 0).all()
    for u in range(7):
        possible = law[u] > 0
        if possible.sum() == 1:  # a leaf of the simple walk: always its one neighbour
            continue
        expected = law[u, possible] * counts[u].sum()
        assert stats.chisquare(counts[u, possible], expected).pvalue > 1e-4


def test_the_service_is_a_full_component_with_its_config():
    """Built from a scenario, the service keeps the walk section's config and its context;
    made in code, it gets the config of its arguments (with the variant's rules)."""
    scenario = validate_scenario(
        {
            "name": "walk-config", "seed": 1, "nodes": 10, "duration": 20.0,
            "topology": {"kind": "ring", "k": 2}, "gossip": {"period": 1.0},
            "walk": {"kind": "service", "transfer_time": 1.0, "timeout": 10.0},
        },
        source="test", base_dir=None,
    )  # fmt: skip
    built, _ = run_in_memory(scenario)
    service = built.components["walk"]
    assert service.config is scenario.walk and service.ctx.key == "walk"
    _, made = harness(timeout=DELTA, transfer=1.0, kill=0.25, variant=AUTHORS_RULE)
    assert (made.config.timeout, made.config.transfer_time) == (DELTA, 1.0)
    assert made.config.kill_probability == 0.25 and made.config.start == 1e12
    assert made.config.variant(0.5) == AUTHORS_RULE
    assert made.ctx is None
