"""The compiled event queue (:mod:`netsim.event_queue`) pops events in SimPy's order: by time,
then priority, then the order they were queued, whatever the interleaving of pushes and pops,
and however often its arrays grow."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from simpy.events import URGENT

from netsim.event_queue import (
    KIND_MASK,
    MAX_A,
    MAX_RANK,
    EventQueue,
    order_time,
    priority_ranks,
    queue_pop,
    queue_push,
    time_order,
)
from netsim.sim import LATE, NORMAL, Call, Environment

#: The priorities netsim schedules at: the gossip engine's ticks run at fractional ones
#: between NORMAL and LATE.
PRIORITIES = (URGENT, NORMAL, NORMAL + 1 / 3, NORMAL + 2 / 3, LATE)
RANK = priority_ranks(PRIORITIES)
#: A push (time step in half-seconds from the last pop, priority) or a pop (None).
OPERATIONS = st.lists(
    st.one_of(
        st.none(),
        st.tuples(st.integers(0, 4), st.sampled_from(PRIORITIES)),
    ),
    min_size=1,
    max_size=400,
)


@settings(max_examples=200, deadline=None)
@given(OPERATIONS)
def test_events_come_out_in_simpys_order(operations) -> None:
    """The same pushes into SimPy's environment (``schedule_at``, as netsim's events are
    scheduled, at float priorities) and into the queue (at their ranks), interleaved with
    pops (a SimPy step): the same events come out in the same order, at the same times. Many
    share an instant and a priority, so the insertion order decides; the queue starts with
    room for 2 and grows."""
    env = Environment()
    queue = EventQueue(capacity=2)
    fired: list[tuple[float, int]] = []
    popped: list[tuple[float, int]] = []
    now, tag = 0.0, 0

    def fire(event_tag: int) -> None:
        fired.append((env.now, event_tag))

    for operation in operations:
        if operation is None and len(queue):
            env.step()
            time, _, _, kind, _, _ = queue.pop()
            popped.append((time, kind))
            now = time
            continue
        step, priority = operation if operation is not None else (0, NORMAL)
        at = now + 0.5 * step
        Call(env, 0.0, fire, (tag,), priority=priority, at=at)
        queue.push(at, RANK[priority], tag, a=tag, b=-tag)
        tag += 1
    while len(queue):
        env.step()
        time, _, _, kind, a, b = queue.pop()
        assert (a, b) == (kind, -kind)  # the arguments travel with their event
        popped.append((time, kind))
    assert popped == fired
    assert len(popped) == tag


def test_ties_are_broken_by_priority_then_insertion() -> None:
    queue = EventQueue()
    for kind, (time, rank) in enumerate([(1.0, 1), (1.0, 0), (0.5, 2), (1.0, 1), (1.0, 0)]):
        queue.push(time, rank, kind)
    popped = [queue.pop() for _ in range(5)]
    assert [event[3] for event in popped] == [2, 1, 4, 0, 3]
    assert [(event[1], event[2]) for event in popped] == [(2, 2), (0, 1), (0, 4), (1, 0), (1, 3)]
    with pytest.raises(IndexError):
        queue.pop()


def test_priorities_become_ranks_in_their_order() -> None:
    assert priority_ranks([LATE, NORMAL, NORMAL + 0.5, NORMAL, URGENT]) == {
        URGENT: 0, NORMAL: 1, NORMAL + 0.5: 2, LATE: 3,
    }  # fmt: skip
    with pytest.raises(ValueError, match="rank"):
        EventQueue().push(0.0, -1, 0)


def test_a_full_queue_refuses_a_push_in_a_kernel() -> None:
    """Inside a kernel the arrays cannot grow: a push into a full queue says so and queues
    nothing, and the ids go on where they were once it has grown."""
    queue = EventQueue(capacity=1)
    assert queue_push(*queue.arrays(), 1.0, 1, 7, 0, 0)
    assert not queue_push(*queue.arrays(), 2.0, 1, 8, 0, 0)
    assert len(queue) == 1
    assert queue.push(2.0, 1, 8) == 1  # grown, with the next id
    assert queue_pop(*queue.arrays())[3] == 7
    assert queue.pop()[2] == 1
    np.testing.assert_array_equal(queue.meta, [0, 2])


#: A push (time, priority rank, kind, first and second argument) or a pop (None). Times cover
#: the whole float line: negatives, both zeros, infinities, ties.
TIMES = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, 1e-300, -1e-300]),
    st.floats(allow_nan=False),
)
PUSHES = st.tuples(
    TIMES, st.integers(0, MAX_RANK), st.integers(0, KIND_MASK), st.integers(-MAX_A - 1, MAX_A),
    st.integers(-(2**63), 2**63 - 1),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), PUSHES), min_size=1, max_size=300))
def test_the_rows_pop_in_the_sorted_order_of_their_keys(operations) -> None:
    """Any interleaving of pushes and pops takes the events out in the sorted order of their
    keys (time, priority rank, insertion id) — the order of a sorted list of what is queued —
    with each event's kind and arguments, however the heap's rows are arranged or grown."""
    queue = EventQueue(capacity=1)
    pending: list[tuple[float, int, int, int, int, int]] = []
    for operation in operations:
        if operation is None:
            if pending:
                pending.sort()
                assert queue.pop() == pending.pop(0)
            continue
        time, rank, kind, a, b = operation
        event_id = queue.push(time, rank, kind, a, b)
        pending.append((time, rank, event_id, kind, a, b))
    pending.sort()
    assert [queue.pop() for _ in range(len(queue))] == pending


@given(st.floats(allow_nan=False), st.floats(allow_nan=False))
@example(-0.0, 0.0)
def test_a_time_order_is_the_times_order(x: float, y: float) -> None:
    """The integer a row sorts its time by orders times as floats do (−0.0 equal to 0.0)."""
    assert (time_order(x) < time_order(y)) == (x < y)
    assert (time_order(x) == time_order(y)) == (x == y)
    assert order_time(time_order(x)) == x
