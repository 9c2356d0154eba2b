"""The compiled per-round kernels of rounds mode against plain-Python statements of the same
rules (module docstring of ``netsim.protocols.rounds``)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.network.links import SEGMENT_RECORD, pair_online
from netsim.protocols.walk.kernels import (
    AGE_TOLERANCE,
    BUFFER_RECORD,
    PROP_RECORD,
    authors_cycle,
    due_timeouts,
    exchange_round,
    in_index_order,
    replaces,
    replaces_compiled,
    should_replace,
    timeout_circle,
)

TIMEOUT = 1.1


def reference_exchange(initiators, peers, pull_lost, now, timeout, prop, authors, errors):
    """The documented semantics, one exchange at a time, with the numpy replace rule."""
    prop = prop.copy()

    def receive(node, steps, update, age, special, error):
        local = prop[node]
        same = update == local["id"]
        if special or (same and not authors):
            return
        local_age = now - local["origin"]
        if local["special"] or bool(
            should_replace(local["steps"], local_age, steps, age, timeout, authors)
        ):
            age = max(age + error, 0.0)
            fired = math.floor((age + AGE_TOLERANCE) / timeout)
            if same and not local["special"]:  # re-adopted: circles fired here stay fired
                fired = min(fired, int(local["fired"]))
            prop[node] = (steps, update, now - age, fired, False)

    def value(node):
        r = prop[node]
        return int(r["steps"]), int(r["id"]), now - float(r["origin"]), bool(r["special"])

    m = len(initiators)
    error = (lambda k: float(errors[k])) if errors.size else (lambda k: 0.0)
    pushed = [value(s) for s in initiators]  # values from the start of the round
    for k, (peer, sent) in enumerate(zip(peers, pushed, strict=True)):
        receive(peer, *sent, error(k))
    answers = [value(p) for p in peers]  # each peer answers after all pushes
    for k, (node, answer) in enumerate(zip(initiators, answers, strict=True)):
        if not pull_lost[k]:
            receive(node, *answer, error(m + k))
    return prop


def same_records(a, b):
    """Field by field (the records' padding bytes are not state)."""
    return all(np.array_equal(a[name], b[name]) for name in PROP_RECORD.names)


def random_prop(rng, n, now):
    prop = np.zeros(n, dtype=PROP_RECORD)
    prop["steps"] = rng.integers(-3, 6, n)
    prop["id"] = rng.integers(0, 5, n)  # few ids, so accept-once matters
    prop["origin"] = now - rng.choice([0.0, 0.4, 1.0, 1.1, 1.5, 2.3, 5.0], n)
    prop["special"] = rng.random(n) < 0.2
    prop["fired"] = rng.integers(0, 3, n)
    return prop


NO_ERRORS = np.zeros(0)


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 12), st.integers(0, 2**32 - 1), st.booleans(), st.booleans(), st.booleans())
def test_exchange_round_is_the_documented_sequential_merge(n, seed, lose_pulls, authors, noisy):
    rng = np.random.default_rng(seed)
    now = 10.0
    prop = random_prop(rng, n, now)
    m = int(rng.integers(1, n + 1))
    initiators = rng.permutation(n)[:m].astype(np.int64)
    peers = rng.integers(0, n, m).astype(np.int64)  # repeated targets on purpose
    pull_lost = rng.random(m) < 0.3 if lose_pulls else np.zeros(m, dtype=bool)
    errors = rng.uniform(-1.0, 1.0, 2 * m) if noisy else NO_ERRORS
    expected = reference_exchange(initiators, peers, pull_lost, now, TIMEOUT, prop, authors, errors)
    got = prop.copy()
    exchange_round(initiators, peers, pull_lost, now, TIMEOUT, got, authors, errors)
    assert same_records(got, expected)
    if not lose_pulls:  # an empty mask means "none lost"
        again = prop.copy()
        exchange_round(
            initiators, peers, np.zeros(0, dtype=bool), now, TIMEOUT, again, authors, errors
        )
        assert same_records(again, expected)


def test_a_push_uses_the_value_from_the_start_of_the_round():
    # node 0 pushes to 1, then 1 (which just learnt update 7) pushes to 2: 2 gets 1's old value
    now = 5.0
    prop = np.zeros(3, dtype=PROP_RECORD)
    prop[0] = (9, 7, now, 0, False)
    prop[1] = (3, 4, now - 0.5, 0, False)
    prop[2] = (1, 2, now - 0.5, 0, False)
    exchange_round(
        np.array([0, 1]),
        np.array([1, 2]),
        np.ones(2, dtype=bool),
        now,
        TIMEOUT,
        prop,
        False,
        NO_ERRORS,
    )
    assert prop["id"].tolist() == [7, 7, 4]


def test_timeout_circle_and_replace_rule_compile_to_the_python_definitions():
    for age in np.linspace(0, 10, 1001):
        expected = math.floor((age + AGE_TOLERANCE) / TIMEOUT)
        assert timeout_circle(float(age), TIMEOUT) == expected
    grid = [(-1, 0.0), (0, 0.5), (3, 1.1), (5, 2.5)]
    for (s, a), (ns, na) in [(x, y) for x in grid for y in grid]:
        for ties_more in (False, True):
            assert replaces_compiled(s, a, ns, na, TIMEOUT, ties_more) == bool(
                should_replace(np.int64(s), a, np.int64(ns), na, TIMEOUT, ties_more)
            )


ages = st.one_of(st.floats(0, 5, allow_nan=False), st.sampled_from([0.0, 0.5, 1.1, 2.2, 3.3]))


@given(st.integers(-3, 3), ages, st.integers(-3, 3), ages, st.booleans())
def test_the_scalar_replace_rule_of_exact_mode_is_the_array_form(
    steps, age, new_steps, new_age, ties_more
):
    # exact mode decides line 14 with replaces (and/or on Python scalars): it must agree with
    # the array form the round kernels compile, on ties and at the timeout's boundary too
    array = should_replace(np.int64(steps), age, np.int64(new_steps), new_age, TIMEOUT, ties_more)
    assert replaces(steps, age, new_steps, new_age, TIMEOUT, ties_more) is bool(array)


@given(st.integers(0, 2**32 - 1))
def test_due_timeouts_lists_active_nodes_past_a_new_circle(seed):
    rng = np.random.default_rng(seed)
    n, now = 40, 20.0
    prop = random_prop(rng, n, now)
    active = rng.random(n) < 0.7
    nodes, circles = due_timeouts(np.flatnonzero(active), prop, now, TIMEOUT)
    expected = [
        (node, math.floor((now - prop["origin"][node] + AGE_TOLERANCE) / TIMEOUT))
        for node in range(n)
        if active[node]
        and not prop["special"][node]
        and math.floor((now - prop["origin"][node] + AGE_TOLERANCE) / TIMEOUT) > prop["fired"][node]
    ]
    assert list(zip(nodes.tolist(), circles.tolist(), strict=True)) == expected


@settings(max_examples=50)
@given(st.integers(0, 20_000), st.integers(1, 5))
def test_updates_created_on_the_round_grid_time_out_at_exactly_i_delta(start_round, i):
    """δ = 11Δ: an update created at a round instant times out i·δ later, not a round late.
    Times are what the simulation computes: sums of the round period Δ = 0.1 s."""
    delta_rounds, period, timeout = 11, 0.1, 1.1
    now = 0.0
    for _ in range(start_round):
        now += period
    prop = np.zeros(1, dtype=PROP_RECORD)
    prop[0]["origin"], prop[0]["fired"] = now, i - 1
    for _ in range(i * delta_rounds - 1):
        now += period
    nodes, _ = due_timeouts(np.array([0]), prop, now, timeout)
    assert nodes.size == 0  # one round before i·δ: not yet
    now += period
    nodes, circles = due_timeouts(np.array([0]), prop, now, timeout)
    assert nodes.tolist() == [0] and circles.tolist() == [i]


NO_TARGETS = np.empty(0, dtype=np.int32)  # entries are node ids


def segments_of(neighbours, online):
    """CSR neighbour lists, each partitioned with online neighbours first."""
    order, segments = [], np.zeros(len(neighbours), dtype=SEGMENT_RECORD)
    for node, nbrs in enumerate(neighbours):
        segments[node] = (len(order), sum(online[v] for v in nbrs))
        order += [v for v in nbrs if online[v]] + [v for v in nbrs if not online[v]]
    return segments, np.array(order, dtype=np.int32)


def test_pair_online_pairs_every_active_node_with_an_online_neighbour():
    neighbours = [[1, 2, 3], [0, 2], [0], [0, 1, 2], [2]]
    online = [True, True, False, True, False]
    active = np.array([True, False, False, True, False])  # 1 is online but not active yet
    segments, order = segments_of(neighbours, online)
    rng = np.random.default_rng(0)
    woken = set()
    for _ in range(50):
        nodes, peers, asleep, listed = pair_online(
            active, rng.bit_generator.random_raw(2), segments, order, NO_TARGETS
        )
        assert sorted(nodes.tolist()) == [0, 3]  # every active node, once
        assert listed.tolist() == [0, 3]  # all active nodes, in order
        for node, peer in zip(nodes.tolist(), peers.tolist(), strict=True):
            assert peer in neighbours[node] and online[peer]
        assert asleep.tolist() == [p for p in peers.tolist() if not active[p]]
        woken |= set(asleep.tolist())
    assert woken == {1}
    lonely = np.array([False, False, False, False, True])  # node 4's only neighbour is offline
    nodes, peers, _, listed = pair_online(
        lonely, rng.bit_generator.random_raw(1), segments, order, NO_TARGETS
    )
    assert nodes.size == 0 and peers.size == 0 and listed.tolist() == [4]


def test_pair_online_order_and_choice_are_uniform():
    n, draws = 4, 24_000
    neighbours = [[v for v in range(n) if v != u] for u in range(n)]
    segments, order = segments_of(neighbours, [True] * n)
    active = np.ones(n, dtype=bool)
    rng = np.random.default_rng(1)
    orders: dict[tuple, int] = {}
    choices = np.zeros((n, n), dtype=np.int64)
    for _ in range(draws):
        nodes, peers, _, _ = pair_online(
            active, rng.bit_generator.random_raw(n), segments, order, NO_TARGETS
        )
        orders[tuple(nodes.tolist())] = orders.get(tuple(nodes.tolist()), 0) + 1
        choices[nodes, peers] += 1
    # all 24 orders, each with probability 1/24: 5 standard deviations of a binomial count
    expected = draws / 24
    assert len(orders) == 24
    assert max(abs(c - expected) for c in orders.values()) < 5 * math.sqrt(expected)
    per_peer = draws / (n - 1)
    off_diagonal = choices[~np.eye(n, dtype=bool)]
    assert np.abs(off_diagonal - per_peer).max() < 5 * math.sqrt(per_peer)
    assert np.trace(choices) == 0


def reference_broadcast_round(initiators, peers, pull_lost, version, known_online):
    """The documented batch-by-batch merge (``netsim.protocols.rounds``), one push at a time:
    the relevant pushes (newer than the target's update at the start of the round) in
    batches by their rank among the pushes to the same target, then the pulls."""
    version, known_online = version.copy(), known_online.copy()
    rows = []

    def adopt(node, update, sender, via):
        if update > version[node]:
            rows.append((node, update, int(version[node]), sender, via))
            known_online[version[node] + 1 : update + 1] += 1
            version[node] = update

    start = version.copy()
    pushes = [k for k in range(len(initiators)) if start[initiators[k]] > start[peers[k]]]
    seen: dict[int, int] = {}
    ranked = []
    for k in pushes:
        ranked.append((seen.get(int(peers[k]), 0), k))
        seen[int(peers[k])] = seen.get(int(peers[k]), 0) + 1
    for _, k in sorted(ranked):
        adopt(int(peers[k]), int(start[initiators[k]]), int(initiators[k]), "push")
    answers = version[peers].copy()  # each peer answers after all pushes
    for k, node in enumerate(initiators):
        if not pull_lost[k]:
            adopt(int(node), int(answers[k]), int(peers[k]), "pull")
    return version, known_online, rows


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 12), st.integers(0, 2**32 - 1), st.booleans())
def test_broadcast_round_is_the_documented_batched_merge(n, seed, lose_pulls):
    from netsim.protocols.broadcast import broadcast_round

    rng = np.random.default_rng(seed)
    version = rng.integers(-1, 4, n).astype(np.int64)  # few versions: repeated pushes matter
    known_online = np.zeros(8, dtype=np.int64)
    m = int(rng.integers(1, n + 1))
    initiators = rng.permutation(n)[:m].astype(np.int64)
    peers = rng.integers(0, n, m).astype(np.int64)  # repeated targets on purpose
    pull_lost = rng.random(m) < 0.3 if lose_pulls else np.zeros(m, dtype=bool)
    want_version, want_known, want_rows = reference_broadcast_round(
        initiators, peers, pull_lost, version, known_online
    )
    rank = np.zeros(n, dtype=np.int64)
    # the arrays of the one adoption (broadcast.adopt): no threshold to check, all online
    state = (version, known_online, np.zeros(8), np.zeros((8, 1)), np.full(1, 8), np.ones(1))
    table = (np.empty(2 * m), np.empty((2 * m, 5), dtype=np.int64), np.zeros(1, dtype=np.int64))
    online = np.ones(n, dtype=np.bool_)
    pushed = broadcast_round(initiators, peers, pull_lost, 1.0, online, n, 8, state, table, rank)
    ints = table[1][: table[2][0]]
    vias = ["push"] * pushed + ["pull"] * (len(ints) - pushed)
    assert ints[:, 4].tolist() == [1] * pushed + [2] * (len(ints) - pushed)  # VIA_LABELS codes
    rows = list(zip(*(ints[:, c].tolist() for c in range(4)), vias, strict=True))
    assert rows == want_rows  # the same adoptions, in the same order
    assert np.array_equal(version, want_version) and np.array_equal(known_online, want_known)
    assert not rank.any()  # the scratch is left zeroed


# --- the authors' gossip cycle (walk.cycle: authors; docs/walk-variants.md C2–C3) ------------

NOW = 100.0


def cycle_state(n, records, fired=()):
    """Visible records, buffers (copies) and merge counts: node -> (steps, id, age, merges)."""
    prop = np.zeros(n, dtype=PROP_RECORD)
    prop["steps"], prop["special"] = -n - 1, True
    buffer = np.zeros(n, dtype=BUFFER_RECORD)
    buffer["steps"], buffer["special"] = -n - 1, True
    merges = np.zeros(n, dtype=np.int64)
    for node, (steps, update, age, count) in records.items():
        prop[node] = (steps, update, NOW - age, 0, False)
        buffer[node] = (steps, update, NOW - age, count, False)
        merges[node] = count
    for node, value in fired:
        prop[node]["fired"] = value
    return prop, buffer, merges


def run_cycle(initiators, peers, state, rw_steps, guarded=(), errors=()):
    prop, buffer, merges = state
    n = prop.size
    guard = np.zeros(n, dtype=bool)
    guard[list(guarded)] = True
    nodes, circles, updates, steps = authors_cycle(
        np.array(initiators), np.array(peers), prop, merges, buffer,
        np.array(rw_steps, dtype=np.int64), guard, np.array(errors, dtype=float), NOW, TIMEOUT,
    )  # fmt: skip
    run_cycle.timed_out = list(zip(updates.tolist(), steps.tolist(), strict=True))
    return list(zip(nodes.tolist(), circles.tolist(), strict=True))


def test_the_authors_cycle_checks_the_timeout_before_the_exchange():
    """Node 0's update is past δ; the fresher update it pulls in the same cycle comes too late
    to stop the restart (C2.3), and its counter stays advanced (its age was ≥ δ at the check)."""
    state = cycle_state(3, {0: (10, 1, 1.2, 3), 1: (11, 2, 0.1, 0)})
    assert run_cycle([0], [1], state, rw_steps=[10, 0, 0]) == [(0, 1)]
    assert run_cycle.timed_out == [(1, 10)]  # the update that timed out, not the one pulled
    prop, buffer, _ = state
    assert prop[0]["id"] == 2 and prop[0]["fired"] == 1  # merged after the check
    assert buffer[1]["id"] == 2  # node 1 keeps its own: fewer steps and an old age lose


def test_a_push_waits_in_the_peers_buffer_until_the_peers_own_turn():
    state = cycle_state(2, {0: (11, 2, 0.1, 4), 1: (10, 1, 0.5, 0)})
    prop, buffer, merges = state
    run_cycle([0], [1], state, rw_steps=[0, 0])
    assert prop[1]["id"] == 1  # not yet visible at node 1
    assert buffer[1]["id"] == 2 and buffer[1]["merges"] == 5
    run_cycle([1], [0], state, rw_steps=[0, 0])  # node 1's turn: its buffer is merged in
    assert prop[1]["id"] == 2 and merges[1] == 7  # pull (6) and own-buffer merge (7)


def test_every_cycle_merges_the_own_buffer_again_with_an_age_error():
    state = cycle_state(2, {0: (5, 3, 0.4, 2)})
    prop, buffer, merges = state
    run_cycle([0], [1], state, rw_steps=[0, 0], errors=[0.0, 0.0, 0.25])
    assert NOW - prop[0]["origin"] == pytest.approx(0.65) and merges[0] == 3
    assert buffer[0]["origin"] == prop[0]["origin"] and buffer[0]["merges"] == 3
    assert NOW - buffer[1]["origin"] == pytest.approx(0.4)  # the push: error 0.0 drawn


def test_the_same_update_merged_two_times_fewer_is_taken_back_even_timed_out():
    state = cycle_state(2, {0: (5, 3, 0.2, 6), 1: (5, 3, 1.5, 2)})
    prop, _, merges = state
    run_cycle([0], [1], state, rw_steps=[5, 5])
    assert NOW - prop[0]["origin"] == pytest.approx(1.5)  # the older copy, merged fewer times
    assert merges[0] == 4


def test_the_timeout_counter_belongs_to_the_node_and_a_held_walk_guards_it():
    state = cycle_state(2, {0: (10, 1, 2.3, 0)})
    prop, _, _ = state
    assert run_cycle([0], [1], state, rw_steps=[10, 0]) == [(0, 1)]
    assert run_cycle([0], [1], state, rw_steps=[10, 0]) == [(0, 2)]  # 2.3 ≥ 2δ: i = 2 fires
    assert run_cycle([0], [1], state, rw_steps=[10, 0]) == []  # 2.3 < 3δ
    assert prop[0]["fired"] == 2
    guarded = cycle_state(2, {0: (10, 1, 1.2, 0)})
    assert run_cycle([0], [1], guarded, rw_steps=[10, 0], guarded=[0]) == []
    assert guarded[0][0]["fired"] == 1  # no restart, but the counter moved on
    young = cycle_state(2, {0: (10, 1, 0.5, 0)}, fired=[(0, 3)])
    run_cycle([0], [1], young, rw_steps=[10, 0])
    assert young[0][0]["fired"] == 0  # an age below δ resets it to i = 1


@given(st.integers(1, 60), st.integers(0, 2**32 - 1))
def test_in_index_order_is_the_stable_sort_of_the_initiators(n: int, seed: int) -> None:
    """The authors' cycle runs a round's initiators in index order: the compiled scatter gives
    exactly what a stable argsort gave, and leaves its scratch as it found it."""
    rng = np.random.default_rng(seed)
    initiators = rng.permutation(n)[: rng.integers(0, n + 1)].astype(np.int64)
    peers = rng.integers(0, n, size=initiators.size).astype(np.int64)
    scratch = np.full(n, -1, dtype=np.int64)
    ordered, their_peers = in_index_order(initiators, peers, scratch)
    order = np.argsort(initiators, kind="stable")
    assert ordered.tolist() == initiators[order].tolist()
    assert their_peers.tolist() == peers[order].tolist()
    assert (scratch == -1).all()
