"""Rounds mode: its building blocks, and statistical agreement with exact mode."""

import numpy as np
import pytest
from equivalence import compare, measure
from hypothesis import given
from hypothesis import strategies as st

from netsim.protocols.broadcast import Broadcast
from netsim.protocols.rounds import RoundGossip, by_rank
from netsim.protocols.walk import RandomWalkService

# Allowances for the documented approximations of rounds mode: broadcast times are whole
# rounds (Δ = 0.5 s here) and gossip messages take no time; the rest must agree statistically.
SLACK = {"t90": 0.5, "mean_walks": 0.02, "restarts_per_hour": 10.0, "progress": 0.01}


@given(st.lists(st.integers(0, 9), max_size=60))
def test_by_rank_batches_keep_the_order_of_pushes_to_each_target(targets):
    targets = np.array(targets, dtype=np.int64)
    batches = by_rank(targets, np.zeros(10, dtype=np.int64))
    positions = np.concatenate(batches) if batches else np.empty(0, dtype=np.int64)
    assert sorted(positions.tolist()) == list(range(targets.size))
    for batch in batches:
        assert len(set(targets[batch].tolist())) == batch.size  # distinct targets
    rank = {int(p): r for r, batch in enumerate(batches) for p in batch}
    for node in set(targets.tolist()):
        order = np.flatnonzero(targets == node)
        assert [rank[int(p)] for p in order] == list(range(order.size))


def runs(nodes, duration, mode, seeds, walk=None):
    return [measure(nodes, duration, mode, seed, walk) for seed in seeds]


def test_rounds_agree_with_exact_on_what_the_paper_measures():
    seeds = range(3)
    exact = runs(200, "30min", "exact", seeds)
    rounds = runs(200, "30min", "rounds", seeds)
    for comparison in compare(exact, rounds, SLACK):
        assert comparison.agrees, comparison


def test_rounds_agree_with_exact_under_a_large_age_error():
    """Ages with an error of width 4Δ at every adoption (docs/walk-variants.md). Under the
    authors' replace rule the modes disagree, and the docs say why."""
    seeds = range(3)
    walk = {"age_error": "2s"}
    exact = runs(200, "30min", "exact", seeds, walk)
    rounds = runs(200, "30min", "rounds", seeds, walk)
    for comparison in compare(exact, rounds, SLACK):
        assert comparison.agrees, comparison


def test_the_equivalence_check_catches_a_broken_rounds_mode(monkeypatch):
    """Negative control: rounds mode without pulls spreads news more slowly, and the same
    comparison must say so."""
    seeds = range(3)
    exact = runs(200, "30min", "exact", seeds)
    # every pull lost, in both round forms: the engine's batched merge and the compiled
    # kernels of the broadcast and the walk service
    batched = RoundGossip._exchange
    monkeypatch.setattr(
        RoundGossip,
        "_exchange",
        lambda self, rule, initiators, peers, pull_lost: batched(
            self, rule, initiators, peers, np.ones(initiators.size, dtype=bool)
        ),
    )
    for fused_rule in (Broadcast, RandomWalkService):
        fused = fused_rule.round_exchange
        monkeypatch.setattr(
            fused_rule,
            "round_exchange",
            lambda self, initiators, peers, pull_lost, fused=fused: fused(
                self, initiators, peers, np.ones(initiators.size, dtype=bool)
            ),
        )
    broken = runs(200, "30min", "rounds", seeds)
    verdict = {c.metric: c.agrees for c in compare(exact, broken, SLACK)}
    assert not verdict["t90"]


@pytest.mark.slow
def test_rounds_agree_with_exact_at_two_thousand_nodes():
    seeds = range(3)
    exact = runs(2000, "1h", "exact", seeds)
    rounds = runs(2000, "1h", "rounds", seeds)
    for comparison in compare(exact, rounds, SLACK):
        assert comparison.agrees, comparison


def test_rounds_mode_with_random_loss_counts_and_logs_every_lost_message():
    from netsim.scenario.loader import validate_scenario
    from netsim.scenario.runner import run_in_memory

    loss = 0.2
    data = {
        "name": "lossy-rounds",
        "seed": 5,
        "nodes": 100,
        "duration": "2min",
        "topology": {"kind": "k_out", "k": 10},
        "links": {"loss": loss},
        "gossip": {"period": "1s", "mode": "rounds"},
        "broadcast": {"interval": "30s"},
    }
    _built, tables = run_in_memory(validate_scenario(data, source="test", base_dir=None))
    last = tables["samples"].iloc[-1]
    lost = tables["messages_lost"]
    assert last["messages_sent"] == last["messages_delivered"] + last["messages_lost"]
    assert len(lost) == last["messages_lost"]
    assert set(lost["kind"]) == {"gossip_push", "gossip_pull"}
    assert set(lost["reason"]) == {"random_loss"}
    share = last["messages_lost"] / last["messages_sent"]
    # every message sent (a push, or the pull answer to a push that arrived) is lost with p;
    # 5 standard deviations of a binomial proportion
    expected = loss
    assert abs(share - expected) < 5 * np.sqrt(expected * (1 - expected) / last["messages_sent"])
    assert tables["broadcasts"]["t90"].notna().all()  # news still spreads


@pytest.mark.parametrize("mode", ["exact", "rounds"])
def test_link_failures_lose_the_exchanges_over_links_that_are_down(mode):
    """The transport decides message fate in both modes: an exchange over a link that is down
    when it is sent is lost, so the share of lost pushes is the stationary down fraction
    p = mean_down / (mean_up + mean_down)."""
    from netsim.scenario.loader import validate_scenario
    from netsim.scenario.runner import run_in_memory

    data = {
        "name": "failing-links",
        "seed": 3,
        "nodes": 100,
        "duration": "2min",
        "topology": {"kind": "k_out", "k": 10},
        "links": {"failure": {"mean_up": "30s", "mean_down": "10s"}},
        "gossip": {"period": "1s", "mode": mode},
        "broadcast": {"interval": "30s"},
    }
    built, tables = run_in_memory(validate_scenario(data, source="test", base_dir=None))
    last = tables["samples"].iloc[-1]
    lost = tables["messages_lost"]
    assert last["messages_sent"] == last["messages_delivered"] + last["messages_lost"]
    assert len(lost) == last["messages_lost"]
    assert set(lost["reason"]) == {"link_down"} and set(lost["kind"]) == {"gossip_push"}
    pushes = last["gossip_exchanges"]
    share = (lost["kind"] == "gossip_push").sum() / pushes
    # a link's state is strongly correlated from one round to the next, so count each link
    # as one sample only: 5 standard deviations of that proportion
    links = int(built.topology.degrees().sum()) // 2
    p = 10 / 40
    assert abs(share - p) < 5 * np.sqrt(p * (1 - p) / links), (share, links)
    assert tables["broadcasts"]["t90"].notna().all()


def test_rounds_mode_fires_update_timeouts_at_exactly_i_delta():
    """δ = δ_rw + 10Δ with walks stepping on the round grid: a walk that dies leaves an update
    that times out δ after its creation, as in exact mode, not a round late (float ages summed
    from round periods used to fall a few ulps short of δ)."""
    import netsim

    result = netsim.run(
        "scenarios/walk/reduced-drw1-d10-kill5.yaml",
        seed=3,
        overrides=[
            "gossip.mode=rounds", "duration=10min", "nodes=300", "churn={kind: always_on}",
            "links.delay={dist: constant, value: 0}", "walk.kill_probability=0.2",
        ],
    )  # fmt: skip
    restarts, steps = result["walk_restarts"], result["walk_steps"]
    timeouts = restarts[(restarts["reason"] == "timeout") & (restarts["i"] == 1)]
    delays = []
    for row in timeouts.itertuples():
        created = steps[(steps["steps"] == row.update_steps) & (steps["time"] <= row.time)]
        delays.append(row.time - created["time"].max())
    delays = np.array(delays)
    assert delays.size > 50
    assert np.median(delays) == pytest.approx(1.1, abs=1e-6)
    assert not (delays > 1.1 + 1e-6).any()  # none a round late
