"""A compiled event queue that orders events exactly as SimPy's does.

SimPy 4 keeps its pending events in a binary heap of ``(time, priority, event id, event)``
entries and processes the smallest first; the event id is a counter taken at every schedule,
so events of one instant and priority run in the order they were scheduled (``sim.py`` writes
the same entries through :meth:`~netsim.sim.Environment.schedule_at`). A compiled event core
for the built-in protocols must produce the SimPy path's events in the same order
(docs/performance.md): this queue keeps the same key, ``(time, priority, insertion id)``, with ids
taken from its own counter in the order events are pushed. Since every key is distinct, the
order in which events come out does not depend on how the heap is arranged: it is the sorted
order of the keys, the same as SimPy's for the same pushes.

Priorities are floats in SimPy, and netsim uses fractional ones: the gossip engine's ticks
run at NORMAL + (node + 1)/(n + 2), between the normal events of their instant and the late
ones. The queue takes each priority's *rank* among those a run uses instead
(:func:`priority_ranks`), an integer that orders them the same way, and packs it with the
insertion id into one 64-bit key, ``rank · 2⁴⁰ + id``: a comparison is then two numbers, not
three, which halves the cost of an event (``benchmarks/event_queue.py``).

The queue is a set of arrays a numba kernel works on (:class:`EventQueue` holds them): each
event has a ``kind`` (what happens) and two integer arguments (for example a node and a
message slot). :func:`queue_push` and :func:`queue_pop` sift on an implicit binary heap,
moving a hole rather than swapping (one write per level).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from netsim.kernel_cache import guard_kernels

#: ``meta`` entries: how many events are queued, and the next insertion id.
SIZE, NEXT_ID = 0, 1
#: Bits of the insertion id in a key (2⁴⁰ ≈ 10¹² events), and the ranks that fit above it.
ID_BITS = 40
MAX_RANK = (1 << (63 - ID_BITS)) - 1
ID_MASK = (1 << ID_BITS) - 1


def priority_ranks(priorities: Sequence[float]) -> dict[float, int]:
    """Each distinct priority's rank among ``priorities`` (0 for the smallest): integers in
    the same order, equal for equal priorities."""
    distinct = np.unique(np.asarray(priorities, dtype=float))
    if distinct.size > MAX_RANK + 1:
        raise ValueError(f"at most {MAX_RANK + 1} distinct priorities, got {distinct.size}")
    return {float(p): rank for rank, p in enumerate(distinct.tolist())}


@njit(cache=True, inline="always")
def queue_push(
    times: np.ndarray, keys: np.ndarray, kinds: np.ndarray, first: np.ndarray,
    second: np.ndarray, meta: np.ndarray, time: float, rank: int, kind: int, a: int, b: int,
) -> bool:  # fmt: skip
    """Queue an event of ``kind`` with arguments ``a``, ``b`` at ``time`` with priority
    ``rank`` (its insertion id the next of the counter); False, and nothing queued, if the
    arrays are full."""
    if meta[SIZE] == times.size:
        return False
    key = (rank << ID_BITS) | meta[NEXT_ID]
    meta[NEXT_ID] += 1
    queue_insert(times, keys, kinds, first, second, meta, time, key, kind, a, b)
    return True


@njit(cache=True, inline="always")
def queue_insert(
    times: np.ndarray, keys: np.ndarray, kinds: np.ndarray, first: np.ndarray,
    second: np.ndarray, meta: np.ndarray, time: float, key: int, kind: int, a: int, b: int,
) -> None:  # fmt: skip
    """Queue an event whose ``key`` (rank and insertion id) is given: one taken from SimPy's
    queue keeps its place in the order. The arrays must have room. The entries above it move
    down one level at a time until its place is found."""
    n = meta[SIZE]
    meta[SIZE] = n + 1
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        t = times[parent]
        if time > t or (time == t and key > keys[parent]):
            break
        times[i], keys[i] = t, keys[parent]
        kinds[i], first[i], second[i] = kinds[parent], first[parent], second[parent]
        i = parent
    times[i], keys[i] = time, key
    kinds[i], first[i], second[i] = kind, a, b


@njit(cache=True, inline="always")
def queue_pop(
    times: np.ndarray, keys: np.ndarray, kinds: np.ndarray, first: np.ndarray,
    second: np.ndarray, meta: np.ndarray,
) -> tuple[float, int, int, int, int, int]:  # fmt: skip
    """Take the first event: (time, rank, insertion id, kind, a, b). The queue must not be
    empty."""
    top = keys[0]
    out = (times[0], top >> ID_BITS, top & ID_MASK, kinds[0], first[0], second[0])
    queue_drop_first(times, keys, kinds, first, second, meta)
    return out


@njit(cache=True, inline="always")
def queue_drop_first(
    times: np.ndarray, keys: np.ndarray, kinds: np.ndarray, first: np.ndarray,
    second: np.ndarray, meta: np.ndarray,
) -> None:  # fmt: skip
    """Remove the first event (the queue must not be empty): the last entry fills the hole
    at the top, moving down one level at a time."""
    n = meta[SIZE] - 1
    meta[SIZE] = n
    if n == 0:
        return
    time, key = times[n], keys[n]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        right = child + 1
        if right < n and (
            times[right] < times[child]
            or (times[right] == times[child] and keys[right] < keys[child])
        ):
            child = right
        t = times[child]
        if time < t or (time == t and key < keys[child]):
            break
        times[i], keys[i] = t, keys[child]
        kinds[i], first[i], second[i] = kinds[child], first[child], second[child]
        i = child
    times[i], keys[i] = time, key
    kinds[i], first[i], second[i] = kinds[n], first[n], second[n]


class EventQueue:
    """The arrays of a compiled event queue (module docstring), growable between kernels."""

    def __init__(self, capacity: int = 1024) -> None:
        self.times = np.empty(capacity)
        self.keys = np.empty(capacity, dtype=np.int64)
        self.kinds = np.empty(capacity, dtype=np.int64)
        self.first = np.empty(capacity, dtype=np.int64)
        self.second = np.empty(capacity, dtype=np.int64)
        self.meta = np.zeros(2, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.meta[SIZE])

    def arrays(self) -> tuple[np.ndarray, ...]:
        """What :func:`queue_push` and :func:`queue_pop` take, in their order."""
        return self.times, self.keys, self.kinds, self.first, self.second, self.meta

    def grow(self) -> None:
        """Double the capacity (the heap's order is kept: entries stay where they are)."""
        for name in ("times", "keys", "kinds", "first", "second"):
            old = getattr(self, name)
            setattr(self, name, np.concatenate([old, np.empty_like(old)]))

    def push(self, time: float, rank: int, kind: int, a: int = 0, b: int = 0) -> int:
        """Queue an event at priority ``rank`` (growing the arrays if they are full); returns
        its insertion id."""
        if not 0 <= rank <= MAX_RANK:
            raise ValueError(f"a priority rank is in [0, {MAX_RANK}], got {rank}")
        if not queue_push(*self.arrays(), time, rank, kind, a, b):
            self.grow()
            queue_push(*self.arrays(), time, rank, kind, a, b)
        return int(self.meta[NEXT_ID]) - 1

    def pop(self) -> tuple[float, int, int, int, int, int]:
        """The first event: (time, rank, insertion id, kind, a, b)."""
        if not len(self):
            raise IndexError("pop from an empty event queue")
        return queue_pop(*self.arrays())


# --- the exact core's lanes and the array layout its handlers share ---------------------------
#
# The compiled exact core (:mod:`netsim.protocols.exact`) runs the events of several components
# in one kernel, each component's handlers written beside the component (the transport's in
# :mod:`netsim.network.links_exact`, the gossip engine's in
# :mod:`netsim.protocols.gossip_exact`, the broadcast's adoption in
# :mod:`netsim.protocols.broadcast`, the walk's in :mod:`netsim.protocols.walk.compiled`). The
# slots of the arrays they share are named here, below all of them.

#: Event kinds of the core's queue: a node's gossip tick (node, timer generation), a message's
#: completion (its slot), the walk's timeout timer (node, timer generation).
TICK, TRANSFER, TIMER = 0, 1, 2
#: ``counters`` entries: the transport's counters (sent, delivered, lost), the engine's
#: exchanges, the transport's lost rows gathered, its free message slots, where each block of
#: draws is read next (the engine's peers, the transport's delays and loss draws, the walk's
#: peers and kill draws), and, for a return to Python in the middle of an event, the node (a
#: walk's message: its slot), the timeout circle due (a walk's step: the part left to Python)
#: and the pull still to send (-1: none).
SENT, DELIVERED, LOST, EXCHANGES, LOST_ROWS, FREE, PEER_AT, DELAY_AT, LOSS_AT = range(9)
WALK_PEER_AT, KILL_AT = 9, 10
PENDING_NODE, PENDING_CIRCLE, PENDING_PULL = 11, 12, 13
COUNTERS = 14
#: The blocks of draws, in the order of the ``draws`` tuple (each read at ``PEER_AT + which``).
DRAW_BLOCKS = 5
#: ``settings`` entries: the engine's Δ, the links' loss probability, the constant delay (NaN:
#: drawn), the message size and the links' bandwidth (NaN: none), pull (1.0) or push only, the
#: walk's timeout δ, whether the engine has activation listeners (1.0), and the walk's steps
#: when compiled: its messages' kind code (NaN: the walk's messages are Python's), their
#: transfer time δ_rw and the kill probability.
PERIOD, LOSS, CONSTANT_DELAY, MESSAGE_SIZE, BANDWIDTH, PULLS, DELTA, LISTENERS = range(8)
WALK_KIND, WALK_TRANSFER, KILL_PROBABILITY = 8, 9, 10
SETTINGS = 11
#: A message slot's integer fields (``messages``), and its float fields (``message_times``).
#: The value a message carries is the sender's at sending: the broadcast's update, or the
#: walk's ``rwprop`` (steps, id, bootstrap flag; its origin in ``message_times``).
SRC, DST, KIND, VALUE, SRC_EPOCH, DST_EPOCH, DOOM, VALUE_ID, VALUE_SPECIAL = range(9)
SENT_AT, DOOM_TIME, VALUE_ORIGIN = 0, 1, 2
#: Message kinds by code (the gossip engine's push and pull).
PUSH_MESSAGE, PULL_MESSAGE = 0, 1
#: The applications the core carries in gossip messages.
SILENT, BROADCAST, WALK = 0, 1, 2
#: What a run of the core's kernel ends with: done (the next compiled event comes after the
#: bound, or none is left), a block of draws or some room needed before the next event can
#: run, the Python part of an event (a walk timeout due, ``onUpdateTimeout``; a rejoined node
#: heard from: the activation listeners, then the pull answering the push that woke it), or
#: a pause for Python to handle signals; then the rare part of a walk's step (a lost or
#: killed walk, one dropped, one with no online neighbour) and the walk's blocks of draws.
DONE, NEED_PEERS, NEED_DELAYS, NEED_LOSS, NEED_ROOM, TIMEOUT_DUE, ACTIVATED, PAUSED = range(8)
WALK_PART, NEED_WALK_PEERS, NEED_KILLS = 8, 9, 10
#: The two lanes (first-in-first-out queues of events queued in time order): ticks queued
#: again one period on, and messages of a constant transfer time; their ``lane_meta`` rows are
#: (head, count).
TICK_LANE, TRANSFER_LANE = 0, 1
HEAD, COUNT = 0, 1


@njit(cache=True, inline="always")
def lane_push(
    lanes: tuple, meta: np.ndarray, lane: int, time: float, rank: int, a: int, b: int
) -> None:
    """Queue an event at the tail of ``lane`` (its time is the lane's latest), with the next
    insertion id of the queue whose ``meta`` is given."""
    lane_times, lane_keys, lane_a, lane_b, lane_meta = lanes
    capacity = lane_times.shape[1]
    tail = lane_meta[lane, HEAD] + lane_meta[lane, COUNT]
    if tail >= capacity:
        tail -= capacity
    lane_times[lane, tail] = time
    lane_keys[lane, tail] = (rank << ID_BITS) | meta[NEXT_ID]
    meta[NEXT_ID] += 1
    lane_a[lane, tail], lane_b[lane, tail] = a, b
    lane_meta[lane, COUNT] += 1


def make_lanes(capacity: int, old: tuple | None = None) -> tuple:
    """The two lanes' arrays with room for ``capacity`` events each: ``old``'s events, in
    order, from the start of the new arrays."""
    times = np.zeros((2, capacity))
    keys = np.zeros((2, capacity), dtype=np.int64)
    first = np.zeros((2, capacity), dtype=np.int64)
    second = np.zeros((2, capacity), dtype=np.int64)
    meta = np.zeros((2, 2), dtype=np.int64)
    if old is not None:
        old_capacity = old[0].shape[1]
        for lane in range(2):
            head, count = old[4][lane]
            order = (head + np.arange(count)) % old_capacity
            for new, before in zip((times, keys, first, second), old[:4], strict=True):
                new[lane, :count] = before[lane, order]
            meta[lane, COUNT] = count
    return times, keys, first, second, meta


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
