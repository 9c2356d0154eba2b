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

The queue is one array a numba kernel works on (:class:`EventQueue` holds it, with its
``meta``): a row of four 64-bit integers per event, as a C heap keeps a struct per entry —
its time as an integer of the same order (:func:`time_order`), its key, its ``kind`` (what
happens) packed with the first integer argument, and the second argument (for example a node
and a timer generation, or a message slot). A sift then moves one 32-byte row per level (two
to a cache line) where separate arrays for each field took five scattered writes, and the
(time, key) comparison is of two integers. :func:`queue_push` and :func:`queue_pop` sift on
an implicit 4-ary heap, moving a hole rather than swapping (one row written per level): half
the levels of a binary heap, each one group of four children in two cache lines, the
smallest picked without a branch (:func:`queue_drop_first`). Taking the first event is most
of a heap's cost, and in the kernel it waits on memory, level after level. Against five
arrays, one per field, on a binary heap with a branch there, the hold benchmark's event went
from 135 to 72 ns (binary, in rows: 86 ns; ``benchmarks/hold.py``, docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netsim.compiled import njit
from netsim.kernel_cache import guard_kernels

#: ``meta`` entries: how many events are queued, and the next insertion id.
SIZE, NEXT_ID = 0, 1
#: Bits of the insertion id in a key (2⁴⁰ ≈ 10¹² events), and the ranks that fit above it.
ID_BITS = 40
MAX_RANK = (1 << (63 - ID_BITS)) - 1
ID_MASK = (1 << ID_BITS) - 1
#: A row's columns: the time's order (:func:`time_order`), the key, the kind | the first
#: argument << :data:`KIND_BITS`, the second argument.
ORDER, KEY, KIND_A, B = range(4)
ROW = 4
#: The heap is 4-ary, its first entry in row 3: the four children of the entry in row i are
#: rows 4i − 8 … 4i − 5, a group that starts at a multiple of four rows (128 bytes: two cache
#: lines). ``PADDING`` rows beyond the capacity: the three before the first, and room for a
#: last group of children that runs past the end.
FIRST = 3
PADDING = 8
#: The time order of the rows past the end: above every time's (+∞'s included), so a child
#: past the end never wins.
SENTINEL = np.iinfo(np.int64).max
#: Bits of a row's ``KIND_A`` that hold the kind (:data:`TICK`, :data:`TRANSFER`, :data:`TIMER`
#: in the core), and the first arguments that fit above them (a node, a message slot).
KIND_BITS = 16
KIND_MASK = (1 << KIND_BITS) - 1
MAX_A = (1 << (63 - KIND_BITS)) - 1
#: The bits below a float64's sign (a negative time's order flips them).
MAGNITUDE = np.int64((1 << 63) - 1)


def priority_ranks(priorities: Sequence[float]) -> dict[float, int]:
    """Each distinct priority's rank among ``priorities`` (0 for the smallest): integers in
    the same order, equal for equal priorities."""
    distinct = np.unique(np.asarray(priorities, dtype=float))
    if distinct.size > MAX_RANK + 1:
        raise ValueError(f"at most {MAX_RANK + 1} distinct priorities, got {distinct.size}")
    return {float(p): rank for rank, p in enumerate(distinct.tolist())}


@njit(cache=True, inline="always")
def time_order(time: float) -> int:
    """An integer in the order of ``time`` (not NaN) among floats: its IEEE 754 bits, with
    a negative's lower bits flipped (the standard total order, −0.0 taken as +0.0 first so
    that equal times have equal orders)."""
    bits = np.float64(time + 0.0).view(np.int64)
    return bits ^ ((bits >> 63) & MAGNITUDE)


@njit(cache=True, inline="always")
def order_time(order: int) -> float:
    """The time whose :func:`time_order` is ``order``."""
    return np.int64(order ^ ((order >> 63) & MAGNITUDE)).view(np.float64)


@njit(cache=True, inline="always")
def queue_push(
    rows: np.ndarray, meta: np.ndarray, time: float, rank: int, kind: int, a: int, b: int
) -> bool:
    """Queue an event of ``kind`` with arguments ``a``, ``b`` at ``time`` with priority
    ``rank`` (its insertion id the next of the counter); False, and nothing queued, if the
    rows are full."""
    if meta[SIZE] == rows.shape[0] - PADDING:
        return False
    key = (rank << ID_BITS) | meta[NEXT_ID]
    meta[NEXT_ID] += 1
    queue_insert(rows, meta, time, key, kind, a, b)
    return True


@njit(cache=True, inline="always")
def queue_insert(
    rows: np.ndarray, meta: np.ndarray, time: float, key: int, kind: int, a: int, b: int
) -> None:
    """Queue an event whose ``key`` (rank and insertion id) is given: one taken from SimPy's
    queue keeps its place in the order. The rows must have room. The entries above it move
    down one level at a time until its place is found."""
    n = meta[SIZE]
    meta[SIZE] = n + 1
    order = time_order(time)
    i = n + FIRST
    while i > FIRST:
        parent = (i >> 2) + (FIRST - 1)  # (entry − 1) // 4, as a row
        t = rows[parent, ORDER]
        if order > t or (order == t and key > rows[parent, KEY]):
            break
        rows[i, ORDER], rows[i, KEY] = t, rows[parent, KEY]
        rows[i, KIND_A], rows[i, B] = rows[parent, KIND_A], rows[parent, B]
        i = parent
    rows[i, ORDER], rows[i, KEY] = order, key
    rows[i, KIND_A], rows[i, B] = (a << KIND_BITS) | kind, b


@njit(cache=True, inline="always")
def queue_first(rows: np.ndarray) -> tuple[float, int]:
    """The first event's (time, key) (the queue must not be empty)."""
    return order_time(rows[FIRST, ORDER]), rows[FIRST, KEY]


@njit(cache=True, inline="always")
def queue_first_event(rows: np.ndarray) -> tuple[int, int, int]:
    """The first event's (kind, a, b) (the queue must not be empty)."""
    packed = rows[FIRST, KIND_A]
    return packed & KIND_MASK, packed >> KIND_BITS, rows[FIRST, B]


@njit(cache=True, inline="always")
def queue_pop(rows: np.ndarray, meta: np.ndarray) -> tuple[float, int, int, int, int, int]:
    """Take the first event: (time, rank, insertion id, kind, a, b). The queue must not be
    empty."""
    time, top = queue_first(rows)
    kind, a, b = queue_first_event(rows)
    queue_drop_first(rows, meta)
    return time, top >> ID_BITS, top & ID_MASK, kind, a, b


@njit(cache=True, inline="always")
def before(rows: np.ndarray, x: int, y: int) -> int:
    """1 if row ``x``'s (time, key) comes before row ``y``'s, else 0, without a branch."""
    tx, ty = rows[x, ORDER], rows[y, ORDER]
    return (tx < ty) | ((tx == ty) & (rows[x, KEY] < rows[y, KEY]))


@njit(cache=True, inline="always")
def queue_drop_first(rows: np.ndarray, meta: np.ndarray) -> None:
    """Remove the first event (the queue must not be empty): the last entry fills the hole
    at the top, moving down one level at a time, and its row becomes a sentinel.

    The smallest of four children is picked without a branch, by a two-round tournament
    (which one wins is a coin flip the processor cannot predict); children past the end are
    sentinels, which never win."""
    n = meta[SIZE] - 1
    meta[SIZE] = n
    last = n + FIRST
    order, key = rows[last, ORDER], rows[last, KEY]
    kind_a, b = rows[last, KIND_A], rows[last, B]
    rows[last, ORDER] = SENTINEL
    i = FIRST
    while True:
        child = 4 * i - 8  # the row of the first child of the entry in row i
        if child >= last:
            break
        left = child + before(rows, child + 1, child)
        right = child + 2 + before(rows, child + 3, child + 2)
        child = left + (right - left) * before(rows, right, left)
        t = rows[child, ORDER]
        if order < t or (order == t and key < rows[child, KEY]):
            break
        rows[i, ORDER], rows[i, KEY] = t, rows[child, KEY]
        rows[i, KIND_A], rows[i, B] = rows[child, KIND_A], rows[child, B]
        i = child
    if i != last:
        rows[i, ORDER], rows[i, KEY] = order, key
        rows[i, KIND_A], rows[i, B] = kind_a, b


def sentinel_rows(count: int) -> np.ndarray:
    """``count`` rows past the end: their time order the sentinel's."""
    rows = np.zeros((count, ROW), dtype=np.int64)
    rows[:, ORDER] = SENTINEL
    return rows


class EventQueue:
    """The rows of a compiled event queue (module docstring), growable between kernels."""

    def __init__(self, capacity: int = 1024) -> None:
        self.rows = sentinel_rows(capacity + PADDING)
        self.meta = np.zeros(2, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.meta[SIZE])

    @property
    def capacity(self) -> int:
        return int(self.rows.shape[0]) - PADDING

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """What :func:`queue_push` and :func:`queue_pop` take, in their order."""
        return self.rows, self.meta

    def grow(self) -> None:
        """Double the capacity (the heap's order is kept: entries stay where they are)."""
        self.rows = np.concatenate([self.rows, sentinel_rows(self.capacity)])

    def push(self, time: float, rank: int, kind: int, a: int = 0, b: int = 0) -> int:
        """Queue an event at priority ``rank`` (growing the rows if they are full); returns
        its insertion id."""
        if not 0 <= rank <= MAX_RANK:
            raise ValueError(f"a priority rank is in [0, {MAX_RANK}], got {rank}")
        if not 0 <= kind <= KIND_MASK:
            raise ValueError(f"an event kind is in [0, {KIND_MASK}], got {kind}")
        if not -MAX_A - 1 <= a <= MAX_A:
            raise ValueError(f"an event's first argument is in [{-MAX_A - 1}, {MAX_A}], got {a}")
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
#: The applications the core carries in gossip messages (gossip learning: the models of its
#: own push gossip, :mod:`netsim.learning.compiled_visit`).
SILENT, BROADCAST, WALK, GOSSIP_LEARNING = 0, 1, 2, 3
#: What a run of the core's kernel ends with: done (the next compiled event comes after the
#: bound, or none is left), a block of draws or some room needed before the next event can
#: run, the Python part of an event (a walk timeout due, ``onUpdateTimeout``; a rejoined node
#: heard from: the activation listeners, then the pull answering the push that woke it), or
#: a pause for Python to handle signals; then the rare part of a walk's step (a lost or
#: killed walk, one dropped, one with no online neighbour), the walk's blocks of draws, and a
#: gossip-learning visit left to Python (a release with noise: the node and the message's slot).
DONE, NEED_PEERS, NEED_DELAYS, NEED_LOSS, NEED_ROOM, TIMEOUT_DUE, ACTIVATED, PAUSED = range(8)
WALK_PART, NEED_WALK_PEERS, NEED_KILLS, LEARNING_PART = 8, 9, 10, 11
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
