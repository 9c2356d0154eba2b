"""The compiled exact core: exact mode's events of the built-in transport, push-pull gossip,
broadcast and walk service, run by one numba kernel in SimPy's order, with SimPy kept for
everything else.

Exact mode on SimPy costs some 1.5 µs per event in SimPy's own loop and as much again in the
handlers (docs/performance.md). Here the events of the components that declare a compiled form
(:attr:`netsim.component.Component.exact_form`) — a node's gossip tick, a message's
completion with its epoch and loss checks, the broadcast's adoption and coverage check, the
walk's ``rwprop`` merge and timeout timer (:mod:`netsim.protocols.walk.compiled`) — live in a
compiled event queue (:mod:`netsim.event_queue`, plus two first-in-first-out lanes for events
queued in time order) and are handled in compiled code over the components' array state.
Everything else — churn transitions from the schedule, the broadcast's new updates, the walks
themselves, observers, progress, the end of the run — stays a SimPy event. Where an event has
a Python part (a timeout that may restart a walk, activation listeners) the kernel returns for
it, and SimPy's next event is looked up again afterwards.

**Same events, same order.** Both queues order by SimPy's key (time, priority, insertion id)
and share one insertion counter (:class:`SharedCounter` takes SimPy's place), so every event
gets the id it would get on SimPy. Before SimPy processes an event, the kernel processes
every compiled event whose key is smaller (:meth:`ExactCore.advance`, called by
:meth:`netsim.sim.Environment.step`): the merged order is SimPy's order.

**Same draws.** The random words come from the same named streams in the same blocks
(``<gossip>.peers``, ``<links>.delay``, ``<links>.loss``: :class:`~netsim.rng.BlockDraws`
draws 4,096 at a time): the kernel reads the current block and returns to Python for the next
one before an event could run out, and Python draws it from the stream exactly as
:class:`~netsim.rng.BlockDraws` would.

**Same floats and rows.** Every instant is computed as the SimPy path computes it (a first
tick at now + (when − now), a tick again at now + Δ, a message's completion at now + its
transfer time); rows are gathered in arrays in the SimPy path's order and written to the same
tables in the row groups its one-by-one appends make (:meth:`netsim.log.EventTable.extend_as_rows`).
Python state that other components read (message counters, the engine's exchanges) is brought
up to date whenever the kernel returns, that is before every SimPy event; the walk's own lost
messages join the kernel's rows, and its draws from the transport's streams read the kernel's
blocks (:class:`CoreDraws`).

The kernel is compiled without numba's reference counts (:func:`kernel`). Like every cached
kernel of netsim, it is compiled again when a module whose code or constants it inlines changes
(the links' rejection tries, the queue, the broadcast's coverage check, the walk's cycle): the
modules are derived from its code (:mod:`netsim.kernel_cache`), not listed here.

``tests/test_exact_core.py`` holds the two engines to identical tables. Which engine ran is in
the run's manifest (``exact_engine``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from numba import njit
from simpy.events import NORMAL

from netsim.errors import SimulationError
from netsim.event_queue import (
    ID_BITS,
    ID_MASK,
    NEXT_ID,
    SIZE,
    EventQueue,
    queue_drop_first,
    queue_insert,
    queue_push,
)
from netsim.kernel_cache import guard_kernels
from netsim.log import string_runs
from netsim.network.links import (
    _REJECTION_TRIES,
    LINK_DOWN,
    RANDOM_LOSS,
    SOURCE_OFFLINE,
    TARGET_OFFLINE,
    Network,
)
from netsim.protocols.broadcast import (
    PULL_CODE,
    PUSH_CODE,
    VIA_LABELS,
    Broadcast,
    coverage_check,
)
from netsim.protocols.gossip import PULL, PUSH, PushPullGossip, _Silent, _Tick
from netsim.protocols.walk.compiled import TIMER, CompiledCycle, merge, timer
from netsim.protocols.walk.service import RandomWalkService
from netsim.sim import Call

if TYPE_CHECKING:
    from collections.abc import Mapping

    from netsim.component import Component
    from netsim.sim import Environment, Simulation

#: Event kinds of the compiled queue: a node's gossip tick (node, timer generation) and a
#: message's completion (its slot); the walk's timeout timer is :data:`TIMER` (node, timer
#: generation).
TICK, TRANSFER = 0, 1
#: Message kinds and loss reasons by code (labels as the SimPy path writes them).
MESSAGE_KINDS = (PUSH, PULL)
PUSH_MESSAGE, PULL_MESSAGE = 0, 1
LOSS_REASONS = (SOURCE_OFFLINE, TARGET_OFFLINE, LINK_DOWN, RANDOM_LOSS)
NO_LOSS, SOURCE_CODE, TARGET_CODE, LINK_CODE, RANDOM_CODE = -1, 0, 1, 2, 3
#: The applications the kernel carries in gossip messages.
SILENT, BROADCAST, WALK = 0, 1, 2

#: ``counters`` entries: the transport's and engine's counters, the rows gathered, the free
#: message slots, and where each block of draws is read next.
SENT, DELIVERED, LOST, EXCHANGES, LOST_ROWS, ADOPTION_ROWS, FREE, PEER_AT, DELAY_AT, LOSS_AT = (
    range(10)
)
#: ``counters`` entries of a return to Python in the middle of an event: the node, and the
#: timeout circle due or the pull still to send (-1: none).
PENDING_NODE, PENDING_CIRCLE, PENDING_PULL = 10, 11, 12
COUNTERS = 13
#: ``settings`` entries: Δ, the loss probability, the constant delay (NaN: drawn), the
#: transfer time a message's size adds (NaN: no bandwidth), pull (1.0) or push only, the
#: walk's timeout δ, and whether the engine has activation listeners (1.0).
PERIOD, LOSS, CONSTANT_DELAY, SIZE_TIME, PULLS, DELTA, LISTENERS = range(7)
#: A message slot's integer fields (``messages``), and its float fields (``message_times``).
#: The value a message carries is the sender's at sending: the broadcast's update, or the
#: walk's ``rwprop`` (steps, id, bootstrap flag; its origin in ``message_times``).
SRC, DST, KIND, VALUE, SRC_EPOCH, DST_EPOCH, DOOM, VALUE_ID, VALUE_SPECIAL = range(9)
SENT_AT, DOOM_TIME, VALUE_ORIGIN = 0, 1, 2
#: The two lanes (FIFO queues of events queued in time order): ticks queued again one period
#: on, and messages of a constant transfer time; their ``lane_meta`` rows are (head, count).
TICK_LANE, TRANSFER_LANE = 0, 1
#: The source of an event taken from the heap rather than a lane.
HEAP = 2
HEAD, COUNT = 0, 1
#: Kernel results: done (the next compiled event comes after the bound, or none is left), or
#: a block of draws or some room is needed before the next event can run.
DONE, NEED_PEERS, NEED_DELAYS, NEED_LOSS, NEED_ROOM = range(5)
#: Returns in the middle of an event, for the Python part of it: a walk timeout is due
#: (``onUpdateTimeout``), or a rejoined node was heard from (the activation listeners; the
#: pull answering the push that woke it is sent after them).
TIMEOUT_DUE, ACTIVATED = 5, 6
#: A return after this many events, for Python to handle signals (an interrupt, the run's
#: time limit) in a run whose SimPy events are far apart: some 0.05–0.15 s of kernel time.
PAUSED = 7
EVENTS_PER_CALL = 1 << 20
#: The most draws of one block an event takes: a tick's peer choice (the rejection tries and
#: the fallback's one draw); a message takes one delay and one loss draw.
PEER_DRAWS_PER_EVENT = _REJECTION_TRIES + 1
#: Rows gathered per table before they are written (and room checked before each event).
ROW_BLOCK = 65_536


def kernel(function: Callable) -> Callable:
    """``function`` compiled with numba's runtime (its reference counts) switched off where
    numba allows it. The kernel allocates nothing, and with the runtime on, every array its
    inlined helpers take was counted in and out with atomic operations at each event: three
    quarters of its time (docs/performance.md). Numbas without the option compile it with
    the runtime: the same results, slower."""
    try:
        return njit(cache=True, _nrt=False)(function)
    except (KeyError, TypeError, ValueError):  # pragma: no cover (numba without the option)
        return njit(cache=True)(function)



@njit(cache=True, inline="always")
def _online_neighbour(node: int, network: tuple, peers: np.ndarray, counters: np.ndarray) -> int:
    """:meth:`netsim.network.links.Network.random_online_neighbour` with the same draws:
    up to :data:`_REJECTION_TRIES` uniform neighbours, the first online one taken; then one
    draw among the online neighbours in list order; -1 without a draw when none is online."""
    indptr, indices, online = network[0], network[1], network[2]
    start = indptr[node]
    degree = indptr[node + 1] - start
    if degree == 0:
        return -1
    at = counters[PEER_AT]
    for _ in range(_REJECTION_TRIES):
        item = indices[start + int(peers[at] * degree)]
        at += 1
        if online[item]:
            counters[PEER_AT] = at
            return item
    counters[PEER_AT] = at
    count = 0
    for p in range(start, start + degree):
        if online[indices[p]]:
            count += 1
    if count == 0:
        return -1
    pick = int(peers[at] * count)
    counters[PEER_AT] = at + 1
    for p in range(start, start + degree):
        if online[indices[p]]:
            if pick == 0:
                return indices[p]
            pick -= 1
    return -1


@njit(cache=True, inline="always")
def _send(
    src: int, dst: int, kind: int, app: int, now: float, normal: int, network: tuple,
    settings: np.ndarray, counters: np.ndarray, draws: tuple, in_flight: tuple, queue: tuple,
    lanes: tuple, version: np.ndarray, walk: tuple,
) -> None:  # fmt: skip
    """:meth:`netsim.network.links.Network.send`: the transfer time (the constant delay or
    the next drawn one, plus size / bandwidth), the planned loss (an endpoint offline now;
    else one loss draw when ``links.loss`` > 0), the message in a free slot and its completion
    queued at now + its transfer time (in the transfer lane when that time is constant)."""
    online, epoch = network[2], network[3]
    delays, losses = draws[1], draws[2]
    messages, message_times, free = in_flight
    counters[SENT] += 1
    duration = settings[CONSTANT_DELAY]
    if math.isnan(duration):
        duration = delays[counters[DELAY_AT]]
        counters[DELAY_AT] += 1
    if not math.isnan(settings[SIZE_TIME]):
        duration += settings[SIZE_TIME]
    doom = NO_LOSS
    doom_time = 0.0
    if not online[src]:
        doom, doom_time = SOURCE_CODE, now
    elif not online[dst]:
        doom, doom_time = TARGET_CODE, now
    elif settings[LOSS] > 0:
        draw = losses[counters[LOSS_AT]]
        counters[LOSS_AT] += 1
        if draw < settings[LOSS]:
            doom, doom_time = RANDOM_CODE, now + duration
    counters[FREE] -= 1
    slot = free[counters[FREE]]
    messages[slot, SRC], messages[slot, DST], messages[slot, KIND] = src, dst, kind
    messages[slot, DOOM] = doom
    messages[slot, SRC_EPOCH], messages[slot, DST_EPOCH] = epoch[src], epoch[dst]
    message_times[slot, SENT_AT], message_times[slot, DOOM_TIME] = now, doom_time
    if app == BROADCAST:  # the sender's value now (GossipRule.outgoing)
        messages[slot, VALUE] = version[src]
    elif app == WALK:
        messages[slot, VALUE], messages[slot, VALUE_ID] = walk[0][src], walk[1][src]
        messages[slot, VALUE_SPECIAL] = walk[3][src]
        message_times[slot, VALUE_ORIGIN] = walk[2][src]
    if math.isnan(settings[CONSTANT_DELAY]):
        times, keys, kinds, first, second, meta = queue
        queue_push(times, keys, kinds, first, second, meta, now + duration, normal, TRANSFER,
                   slot, 0)  # fmt: skip
    else:  # a constant transfer time: completions come in the order they are queued
        _lane_push(lanes, queue[5], TRANSFER_LANE, now + duration, normal, slot, 0)


@njit(cache=True)
def send_message(
    src: int, dst: int, kind: int, app: int, now: float, normal: int, network: tuple,
    settings: np.ndarray, counters: np.ndarray, draws: tuple, in_flight: tuple, queue: tuple,
    lanes: tuple, version: np.ndarray, walk: tuple,
) -> None:  # fmt: skip
    """:func:`_send` for Python callers (the pull that waited for activation listeners)."""
    _send(src, dst, kind, app, now, normal, network, settings, counters, draws, in_flight, queue,
          lanes, version, walk)  # fmt: skip


@njit(cache=True, inline="always")
def _loss_reason(slot: int, network: tuple, in_flight: tuple) -> tuple[int, float]:
    """Why the message in ``slot`` is lost and when (:data:`NO_LOSS` when it arrives), as
    ``Network._complete`` decides: the planned loss, unless an endpoint left first (the
    source checked before the target)."""
    epoch, last_leave = network[3], network[4]
    messages, message_times = in_flight[0], in_flight[1]
    reason = messages[slot, DOOM]
    src, dst = messages[slot, SRC], messages[slot, DST]
    if (
        reason == NO_LOSS
        and epoch[src] == messages[slot, SRC_EPOCH]
        and epoch[dst] == messages[slot, DST_EPOCH]
    ):
        return NO_LOSS, 0.0
    when = message_times[slot, DOOM_TIME]
    if reason == NO_LOSS or reason >= LINK_CODE:
        if epoch[src] != messages[slot, SRC_EPOCH]:
            left = last_leave[src]
            if reason == NO_LOSS or left < when:
                reason, when = SOURCE_CODE, left
        if epoch[dst] != messages[slot, DST_EPOCH]:
            left = last_leave[dst]
            if reason == NO_LOSS or left < when:
                reason, when = TARGET_CODE, left
    return reason, when


@njit(cache=True, inline="always")
def broadcast_adopt(
    node: int, update: int, sender: int, via: int, now: float, online: np.ndarray,
    online_count: int, updates: int, broadcast: tuple, rows: tuple, counters: np.ndarray,
) -> None:  # fmt: skip
    """:meth:`netsim.protocols.broadcast.Broadcast._adopt` on the broadcast's arrays: the
    row, the online holders counted for every update the node now holds, and a coverage check
    when an update a threshold waits for gained a holder. The kernel's adoptions and the new
    updates Python makes at their origins run this one code."""
    version, known, starts, reached, next_update, shares = broadcast
    row_time, row_ints = rows
    previous = version[node]
    version[node] = update
    r = counters[ADOPTION_ROWS]
    row_time[r] = now
    row_ints[r, 0], row_ints[r, 1], row_ints[r, 2] = node, update, previous
    row_ints[r, 3], row_ints[r, 4] = sender, via
    counters[ADOPTION_ROWS] = r + 1
    if not online[node]:
        return
    for k in range(previous + 1, update + 1):
        known[k] += 1
    for j in range(next_update.size):
        if previous < next_update[j] <= update:
            coverage_check(known, starts, reached, next_update, shares, updates, online_count, now)
            return


@njit(cache=True, inline="always")
def _first_event(queue: tuple, lanes: tuple) -> tuple[int, float, int]:
    """The first event of the heap and the two lanes, the smallest (time, key): its source
    (a lane, :data:`HEAP`, or -1 when all are empty), time and key."""
    times, keys, meta = queue[0], queue[1], queue[5]
    lane_times, lane_keys, lane_meta = lanes[0], lanes[1], lanes[4]
    source, time, key = -1, math.inf, 0
    if meta[SIZE] > 0:
        source, time, key = HEAP, times[0], keys[0]
    for lane in range(2):
        if lane_meta[lane, COUNT] > 0:
            head = lane_meta[lane, HEAD]
            t = lane_times[lane, head]
            if source < 0 or t < time or (t == time and lane_keys[lane, head] < key):
                source, time, key = lane, t, lane_keys[lane, head]
    return source, time, key


@njit(cache=True, inline="always")
def _what_is_missing(
    settings: np.ndarray, counters: np.ndarray, draws: tuple, queue: tuple, lanes: tuple,
    lost_rows: tuple, adoption_rows: tuple,
) -> int:  # fmt: skip
    """What the next event could run out of (:data:`NEED_PEERS` …), or :data:`DONE` when it
    has all it can use: a tick's peer draws, a message's delay and loss draws, room for two
    queued events, two message slots and a row in each table."""
    peers, delays, losses = draws
    if counters[PEER_AT] + PEER_DRAWS_PER_EVENT > peers.size:
        return NEED_PEERS
    if counters[DELAY_AT] + 1 > delays.size and math.isnan(settings[CONSTANT_DELAY]):
        return NEED_DELAYS
    if counters[LOSS_AT] + 1 > losses.size and settings[LOSS] > 0:
        return NEED_LOSS
    lane_capacity, lane_meta = lanes[0].shape[1], lanes[4]
    if (
        queue[5][SIZE] + 3 > queue[0].size
        or lane_meta[TICK_LANE, COUNT] + 2 > lane_capacity
        or lane_meta[TRANSFER_LANE, COUNT] + 2 > lane_capacity
        or counters[FREE] < 2
        or counters[LOST_ROWS] + 2 > lost_rows[0].shape[0]
        or counters[ADOPTION_ROWS] + 2 > adoption_rows[0].size
    ):
        return NEED_ROOM
    return DONE


@njit(cache=True, inline="always")
def _take(source: int, queue: tuple, lanes: tuple) -> tuple[int, int, int]:
    """Remove the first event, from ``source``: its (kind, a, b)."""
    if source == HEAP:
        times, keys, kinds, first, second, meta = queue
        event = kinds[0], first[0], second[0]
        queue_drop_first(times, keys, kinds, first, second, meta)
        return event
    lane_a, lane_b, lane_meta = lanes[2], lanes[3], lanes[4]
    head = lane_meta[source, HEAD]
    event = source, lane_a[source, head], lane_b[source, head]
    # the next head, wrapped by a comparison (a division per event cost more than the event)
    head += 1
    lane_meta[source, HEAD] = 0 if head == lanes[0].shape[1] else head
    lane_meta[source, COUNT] -= 1
    return event


@kernel
def run_events(
    queue: tuple, lanes: tuple, rank_priority: np.ndarray, normal: int, bound_time: float,
    bound_priority: float, bound_id: int, network: tuple, settings: np.ndarray,
    counters: np.ndarray, draws: tuple, in_flight: tuple, lost_rows: tuple, gossip: tuple,
    app: int, broadcast: tuple, adoption_rows: tuple, online_count: int, updates: int,
    walk: tuple,
) -> tuple[int, float]:  # fmt: skip
    """Process the compiled events whose key (time, priority, insertion id) is smaller than
    the bound's, in key order; returns (:data:`DONE` or what must be done first, the time of
    the last event processed, NaN if none); :data:`PAUSED` after :data:`EVENTS_PER_CALL`
    events. Before each event it checks that the event
    cannot run out of draws or room, so an event always runs whole.

    A tick (``PushPullGossip._tick``): a stale generation ends it (the node left); else the
    push to a random online neighbour and the next tick one period on. A message's completion
    (``Network._complete``): a loss row, or the arrival — the merge (``incoming``), a rejoined
    node heard from (its first tick, :meth:`PushPullGossip._schedule_tick`), and a push
    answered by the pull. A walk timer (``ExactCycle._on_timer``). Where an event has a
    Python part (a due timeout, activation listeners) the kernel returns for it at once."""
    phase, generation, active = gossip
    version = broadcast[0]
    messages = in_flight[0]
    period = settings[PERIOD]
    now = math.nan
    for _ in range(EVENTS_PER_CALL):
        source, time, key = _first_event(queue, lanes)
        if source < 0 or time > bound_time:
            return DONE, now
        if time == bound_time:
            priority = rank_priority[key >> ID_BITS]
            if priority > bound_priority or (
                priority == bound_priority and (key & ID_MASK) > bound_id
            ):
                return DONE, now
        missing = _what_is_missing(settings, counters, draws, queue, lanes, lost_rows,
                                   adoption_rows)  # fmt: skip
        if missing != DONE:
            return missing, now
        kind, a, b = _take(source, queue, lanes)
        now = time
        if kind == TICK:
            if b != generation[a]:
                continue
            peer = _online_neighbour(a, network, draws[0], counters)
            if peer >= 0:
                counters[EXCHANGES] += 1
                _send(a, peer, PUSH_MESSAGE, app, now, normal, network, settings, counters, draws,
                      in_flight, queue, lanes, version, walk)  # fmt: skip
            _lane_push(lanes, queue[5], TICK_LANE, now + period, normal, a, b)
            continue
        if kind == TIMER:
            circle = timer(a, b, now, settings[DELTA], walk, active, queue, normal)
            if circle >= 0:
                counters[PENDING_NODE], counters[PENDING_CIRCLE] = a, circle
                return TIMEOUT_DUE, now
            continue
        src, dst, message = messages[a, SRC], messages[a, DST], messages[a, KIND]
        if not _arrives(a, now, network, counters, in_flight, lost_rows):
            continue
        if app == BROADCAST and messages[a, VALUE] > version[dst]:
            via = PUSH_CODE if message == PUSH_MESSAGE else PULL_CODE  # VIA_LABELS
            broadcast_adopt(dst, messages[a, VALUE], src, via, now, network[2], online_count,
                            updates, broadcast, adoption_rows, counters)  # fmt: skip
        elif app == WALK:
            merge(dst, messages[a, VALUE], messages[a, VALUE_ID], messages[a, VALUE_SPECIAL],
                  in_flight[1][a, VALUE_ORIGIN], in_flight[1][a, SENT_AT], now, settings[DELTA],
                  walk, active, queue, normal)  # fmt: skip
        pull = message == PUSH_MESSAGE and settings[PULLS] > 0
        if not active[dst]:
            _schedule_tick(dst, generation[dst], now, period, phase, queue, normal)
            active[dst] = True
            if settings[LISTENERS] > 0:  # they run in Python, then the pull is sent
                counters[PENDING_NODE] = dst
                counters[PENDING_PULL] = src if pull else -1
                return ACTIVATED, now
        if pull:
            _send(dst, src, PULL_MESSAGE, app, now, normal, network, settings, counters, draws,
                  in_flight, queue, lanes, version, walk)  # fmt: skip
    return PAUSED, now


@njit(cache=True, inline="always")
def _arrives(
    slot: int, now: float, network: tuple, counters: np.ndarray, in_flight: tuple,
    lost_rows: tuple,
) -> bool:  # fmt: skip
    """The completion of the message in ``slot``: its slot freed, and either its loss row
    (False) or it counted as delivered (True)."""
    messages, message_times, free = in_flight
    reason, when = _loss_reason(slot, network, in_flight)
    counters[FREE] += 1
    free[counters[FREE] - 1] = slot
    if reason == NO_LOSS:
        counters[DELIVERED] += 1
        return True
    lost_time, lost_ints = lost_rows
    counters[LOST] += 1
    r = counters[LOST_ROWS]
    lost_time[r, 0], lost_time[r, 1] = when, message_times[slot, SENT_AT]
    lost_ints[r, 0], lost_ints[r, 1] = messages[slot, KIND], messages[slot, SRC]
    lost_ints[r, 2], lost_ints[r, 3] = messages[slot, DST], reason
    counters[LOST_ROWS] = r + 1
    return False


@njit(cache=True, inline="always")
def _schedule_tick(
    node: int, generation: int, now: float, period: float, phase: np.ndarray, queue: tuple,
    normal: int,
) -> None:  # fmt: skip
    """A (re)joined node's first tick: ``PushPullGossip._schedule_tick`` — the next
    k·Δ + φ after now, queued as SimPy queues a delay, at now + (that − now)."""
    k = np.floor((now - phase[node]) / period) + 1
    when = k * period + phase[node]
    if when <= now:
        when += period
    times, keys, kinds, first, second, meta = queue
    queue_push(times, keys, kinds, first, second, meta, now + (when - now), normal, TICK, node,
               generation)  # fmt: skip


@njit(cache=True, inline="always")
def _lane_push(
    lanes: tuple, meta: np.ndarray, lane: int, time: float, rank: int, a: int, b: int
) -> None:
    """Queue an event at the tail of ``lane`` (its time is the lane's latest), with the next
    insertion id."""
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


class SharedCounter:
    """SimPy's event-id counter (``Environment._eid``) made one with the compiled queue's:
    every event, SimPy's or compiled, takes the next id of one sequence, as on SimPy alone."""

    __slots__ = ("_meta",)

    def __init__(self, meta: np.ndarray) -> None:
        self._meta = meta

    def __iter__(self) -> SharedCounter:
        return self

    def __next__(self) -> int:
        value = int(self._meta[NEXT_ID])
        self._meta[NEXT_ID] = value + 1
        return value


def exact_engine_blocker(components: Mapping[str, Component]) -> str | None:
    """Why exact mode cannot run on the compiled core (None when it can): every component
    must declare a compiled form (:attr:`~netsim.component.Component.exact_form`) on its own
    class (a subclass may change what its parent's form stands for); one transport without
    link failures; at most one plain event-driven gossip engine, carrying at most one
    broadcast or walk service (the ``netsim`` cycle, the paper's replace rule, exact ages)."""
    for key, component in components.items():
        form = type(component).__dict__.get("exact_form")
        if form is None:
            return f"{key} ({type(component).__name__}) has no compiled form"
    gossips = [c for c in components.values() if isinstance(c, PushPullGossip)]
    networks = [c for c in components.values() if isinstance(c, Network)]
    if len(networks) != 1 or len(gossips) > 1:
        return "the compiled core runs one transport and at most one gossip engine"
    if networks[0].failures is not None:
        return "links.failure has no compiled form"
    if not gossips:
        return "no gossip engine: exact mode has no events the core runs"
    gossip = gossips[0]
    rules = gossip.rules
    if gossip._aligned:
        return "a gossip engine on a common grid has no compiled form"
    if len(rules) > 1 or any(not isinstance(r, Broadcast | RandomWalkService) for r in rules):
        return "the compiled core carries one broadcast or walk service in gossip messages"
    if any(rule.network is not networks[0] for rule in rules):
        return "a gossip application on another transport"
    walks = [rule for rule in rules if isinstance(rule, RandomWalkService)]
    listeners = [getattr(f, "__self__", None) for f in gossip._activation_listeners]
    if any(owner not in walks for owner in listeners):
        return "a gossip engine with activation listeners of no compiled form"
    for walk in walks:
        variant = walk.variant
        if variant.cycle != "netsim" or variant.replace_rule != "paper" or variant.age_error:
            return (
                "the walk's cycle has a compiled form for walk.cycle: netsim, the paper's "
                "replace rule and exact ages only"
            )
    return None


class ExactCore:
    """The compiled core of one run (module docstring): its queue, the components' array
    state, and the Python side of the kernel's returns (draw blocks, room, rows, counters,
    the Python part of an event)."""

    def __init__(self, sim: Simulation, network: Network, gossip: PushPullGossip | None) -> None:
        self.sim, self.network, self.gossip = sim, network, gossip
        n = max(network.topology.n, 256)
        self.queue = EventQueue(4 * n)
        self.lanes = _lanes(2 * n)
        self.normal = 0
        self.rank_priority = np.array([float(NORMAL)])
        self.counters = np.zeros(COUNTERS, dtype=np.int64)
        nodes, topology = network.nodes, network.topology
        self.network_arrays = (
            topology.indptr, topology.indices, nodes.online, nodes.epoch, nodes.last_leave,
        )  # fmt: skip
        self.in_flight = (np.zeros((0, 9), dtype=np.int64), np.zeros((0, 3)), np.zeros(0, int))
        self._grow_messages(2 * n)
        rules = gossip.rules if gossip is not None else []
        self.broadcast = next((r for r in rules if isinstance(r, Broadcast)), None)
        self.rows = CoreRows(network, self.broadcast, self.counters)
        self.walk = next((r for r in rules if isinstance(r, RandomWalkService)), None)
        self.app = BROADCAST if self.broadcast else WALK if self.walk else SILENT
        self.settings = self._settings()
        self.streams = (
            gossip._peer_uniform if gossip is not None else None,
            network._next_delay,
            network._next_loss_draw,
        )
        self.draws = [self._remaining(stream) for stream in self.streams]
        network._next_delay = CoreDraws(self, 1)  # Python's sends read the same blocks
        network._next_loss_draw = CoreDraws(self, 2)
        network._record_loss = self.rows.lost
        self._take_events(sim.env)
        sim.env.attach_core(self)
        sim._end_hooks.insert(0, self.finish)

    # --- set-up ----------------------------------------------------------------------------

    def _settings(self) -> np.ndarray:
        gossip, links = self.gossip, self.network.links
        constant = self.network._constant_delay
        size = gossip.message_size if gossip is not None else 0.0
        return np.array([
            gossip.period if gossip is not None else 1.0,
            links.loss,
            math.nan if constant is None else constant,
            math.nan if links.bandwidth is None else size / links.bandwidth,
            1.0 if gossip is not None and gossip.pull else 0.0,
            self.walk.timeout if self.walk is not None else 1.0,
            1.0 if gossip is not None and gossip._activation_listeners else 0.0,
        ])  # fmt: skip

    @staticmethod
    def _remaining(stream: object) -> np.ndarray:
        """The draws a :class:`~netsim.rng.BlockDraws` still holds (the kernel reads them
        first)."""
        if stream is None:
            return np.zeros(0)
        return np.array(stream._buffer[stream._next :], dtype=np.float64)

    def _take_events(self, env: Environment) -> None:
        """Make the components' state the core's and move the events they queued on SimPy
        (gossip ticks, walk timers) into the compiled queue, each with its key; SimPy's event
        ids are shared from then on."""
        gossip, broadcast, walk = self.gossip, self.broadcast, self.walk
        if gossip is not None:
            gossip._timer_generation = np.array(gossip._timer_generation, dtype=np.int64)
            gossip._core = self
        if broadcast is not None:
            broadcast._core = self
        exact = walk.cycle if walk is not None else None
        if walk is not None:
            walk.cycle = CompiledCycle(exact, self)
        for time, priority, event_id, event in env.take_events(
            lambda e: isinstance(e, _Tick) or (exact is not None and _is_timer(e, exact))
        ):
            if priority != NORMAL:
                raise SimulationError(f"an event at priority {priority}: the core runs NORMAL")
            if isinstance(event, _Tick):
                self._insert(time, event_id, TICK, event.node, event.generation)
            else:
                node, generation, update, circle = event.args
                walk.cycle.arm(node, generation, update, circle)
                self._insert(time, event_id, TIMER, node, generation)
        self.queue.meta[NEXT_ID] = env.share_event_ids(SharedCounter(self.queue.meta))

    def _insert(self, time: float, event_id: int, kind: int, a: int, b: int) -> None:
        self.make_room()
        key = (self.normal << ID_BITS) | event_id
        queue_insert(*self.queue.arrays(), float(time), key, kind, a, b)

    def push_tick(self, node: int, generation: int, at: float) -> None:
        """Queue ``node``'s tick at ``at`` (normal priority, the next insertion id): what the
        engine's Python code queues while the core runs its ticks."""
        self.make_room()
        queue_push(*self.queue.arrays(), float(at), self.normal, TICK, node, generation)

    def _grow_messages(self, capacity: int) -> None:
        """Room for ``capacity`` messages in flight (the slots in use keep their place)."""
        old_messages, old_times, old_free = self.in_flight
        old = old_messages.shape[0]
        messages = np.zeros((capacity, old_messages.shape[1]), dtype=np.int64)
        times = np.zeros((capacity, old_times.shape[1]))
        messages[:old], times[:old] = old_messages, old_times
        free = np.empty(capacity, dtype=np.int64)
        count = int(self.counters[FREE])
        free[:count] = old_free[:count]
        fresh = np.arange(capacity - 1, old - 1, -1, dtype=np.int64)
        free[count : count + fresh.size] = fresh
        self.counters[FREE] = count + fresh.size
        self.in_flight = (messages, times, free)

    # --- running ---------------------------------------------------------------------------

    def advance(self) -> None:
        """Process every compiled event before SimPy's next, with the Python parts of events
        where they fall (SimPy's next event is looked up again after each: a Python part may
        queue one that comes first)."""
        gossip, broadcast, walk = self.gossip, self.broadcast, self.walk
        gossip_state = (
            (gossip.phase, gossip._timer_generation, gossip.active)
            if gossip is not None
            else (np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.bool_))
        )
        walk_state = walk.cycle.arrays() if walk is not None else _NO_WALK
        env = self.sim.env
        while True:
            time, priority, event_id = env.next_key()
            self._counters_to_kernel()
            status, now = run_events(
                self.queue.arrays(), self.lanes, self.rank_priority, self.normal, time,
                priority, event_id, self.network_arrays, self.settings,
                self.counters, tuple(self.draws), self.in_flight, self.rows.lost_arrays,
                gossip_state, self.app, self._broadcast_state(), self.rows.adoption_arrays,
                self.network.nodes.online_count,
                broadcast.updates if broadcast is not None else 0, walk_state,
            )  # fmt: skip
            if not math.isnan(now):
                self.sim.env.set_clock(now)
            self._counters_from_kernel()
            if status == DONE:
                return
            self._python_part(status)

    def _python_part(self, status: int) -> None:
        """What the kernel returned for: draws, room, or the Python part of an event."""
        counters = self.counters
        if status == PAUSED:  # Python's turn: a signal handler may run here
            return
        if status in (NEED_PEERS, NEED_DELAYS, NEED_LOSS):
            self.refill(status - NEED_PEERS)
        elif status == NEED_ROOM:
            self.make_room()
        elif status == TIMEOUT_DUE:  # ExactCycle._on_timer, the service's part
            node, circle = int(counters[PENDING_NODE]), int(counters[PENDING_CIRCLE])
            assert self.walk is not None
            self.walk.on_update_timeout(node, circle)
            self.walk.cycle.schedule_timeout(node, circle + 1)
        else:  # ACTIVATED: the engine's listeners, then the pull
            node, peer = int(counters[PENDING_NODE]), int(counters[PENDING_PULL])
            assert self.gossip is not None
            self.gossip.is_active[node] = True
            for listener in self.gossip._activation_listeners:
                listener(node)
            if peer >= 0:
                self.send_from_python(node, peer, PULL_MESSAGE)

    def send_from_python(self, src: int, dst: int, kind: int) -> None:
        """A gossip message sent by Python code (a pull after the activation listeners), by
        the kernel's code."""
        self.make_room()
        for which, count in ((1, 1), (2, 1)):
            if self.counters[PEER_AT + which] + count > self.draws[which].size:
                self.refill(which)
        self._counters_to_kernel()
        walk = self.walk.cycle.arrays() if self.walk is not None else _NO_WALK
        send_message(
            src, dst, kind, self.app, float(self.sim.env.now), self.normal,
            self.network_arrays, self.settings, self.counters, tuple(self.draws),
            self.in_flight, self.queue.arrays(), self.lanes, self._broadcast_state()[0], walk,
        )  # fmt: skip
        self._counters_from_kernel()

    def _broadcast_state(self) -> tuple:
        broadcast = self.broadcast
        if broadcast is None:
            return _NO_BROADCAST
        return (
            broadcast.version, broadcast.known_online, broadcast.start_times,
            broadcast.reached, broadcast._next, broadcast.threshold_shares,
        )  # fmt: skip

    def refill(self, which: int) -> None:
        """The next block of draws of stream ``which`` after what is left of the current one
        (drawn as :class:`~netsim.rng.BlockDraws` draws it: the same values in order)."""
        position = PEER_AT + which
        stream = self.streams[which]
        assert stream is not None
        left = self.draws[which][int(self.counters[position]) :]
        block = np.asarray(stream._draw(stream._block), dtype=np.float64)
        self.draws[which] = np.concatenate([left, block])
        self.counters[position] = 0

    def make_room(self) -> None:
        """Room for the next event: in the queue and lanes, for messages and rows."""
        queue = self.queue
        if len(queue) + 4 > queue.times.size:
            queue.grow()
        lane_meta = self.lanes[4]
        capacity = self.lanes[0].shape[1]
        if lane_meta[:, COUNT].max() + 2 > capacity:
            self.lanes = _lanes(2 * capacity, self.lanes)
        if self.counters[FREE] < 2:
            self._grow_messages(2 * self.in_flight[0].shape[0])
        self.rows.make_room()

    def _counters_to_kernel(self) -> None:
        """The transport's counters as Python left them (a walk's messages are Python's)."""
        counters, network = self.counters, self.network
        counters[SENT], counters[DELIVERED], counters[LOST] = (
            network.sent, network.delivered, network.lost,
        )  # fmt: skip

    def _counters_from_kernel(self) -> None:
        """Python's counters from the kernel's (observers read them between events)."""
        counters, network = self.counters, self.network
        network.sent = int(counters[SENT])
        network.delivered = int(counters[DELIVERED])
        network.lost = int(counters[LOST])
        if self.gossip is not None:
            self.gossip.exchanges += int(counters[EXCHANGES])
            counters[EXCHANGES] = 0

    def adopt(self, node: int, update: int, sender: int, via: int) -> None:
        """A broadcast adoption made in Python (a new update at its origin), through the same
        compiled code and rows as the kernel's."""
        broadcast = self.broadcast
        assert broadcast is not None
        self.rows.make_room()
        nodes = self.network.nodes
        broadcast_adopt(
            node, update, sender, via, float(self.sim.env.now), nodes.online,
            nodes.online_count, broadcast.updates, self._broadcast_state(),
            self.rows.adoption_arrays, self.counters,
        )  # fmt: skip

    def finish(self) -> None:
        """At the end of the run: the rows still gathered written, and the Python copies of
        the state the kernel kept in arrays (flags lists, the broadcast's held updates)."""
        self.rows.write_lost()
        self.rows.write_adoptions()
        gossip = self.gossip
        if gossip is not None:
            gossip.is_active[:] = gossip.active.tolist()
        if self.broadcast is not None and self.broadcast._held is not None:
            self.broadcast._held[:] = self.broadcast.version.tolist()


def _is_timer(event: object, cycle: object) -> bool:
    """Is ``event`` a timeout timer the exact walk cycle queued on SimPy?"""
    return isinstance(event, Call) and getattr(event, "callback", None) == cycle._on_timer


class CoreDraws:
    """One of the core's blocks of draws, read one at a time by Python code (a walk's send
    on lossy links): the kernel and Python consume one sequence, as on SimPy."""

    __slots__ = ("_core", "_which")

    def __init__(self, core: ExactCore, which: int) -> None:
        self._core, self._which = core, which

    def __call__(self) -> float:
        core, which = self._core, self._which
        position = PEER_AT + which
        if core.counters[position] >= core.draws[which].size:
            core.refill(which)
        value = float(core.draws[which][core.counters[position]])
        core.counters[position] += 1
        return value


class CoreRows:
    """The rows the core gathers for its tables (``messages_lost`` and the broadcast's
    adoptions), written in the row groups the SimPy path's appends make. Python's own lost
    messages (a walk's) join the same rows, so the table keeps the order of events."""

    def __init__(
        self, network: Network, broadcast: Broadcast | None, counters: np.ndarray
    ) -> None:
        self.network, self.broadcast, self.counters = network, broadcast, counters
        self.lost_arrays = (np.empty((ROW_BLOCK, 2)), np.empty((ROW_BLOCK, 4), dtype=np.int64))
        self.adoption_arrays = (np.empty(ROW_BLOCK), np.empty((ROW_BLOCK, 5), dtype=np.int64))
        self.kinds = list(MESSAGE_KINDS)  # message kinds by code: gossip's, then Python's

    def lost(
        self, when: float, sent_at: float, kind: str, src: int, dst: int, reason: str
    ) -> None:
        """A message Python's transport lost (``Network._complete``): its row, in order."""
        counters = self.counters
        if counters[LOST_ROWS] + 1 > ROW_BLOCK:
            self.write_lost()
        if kind not in self.kinds:
            self.kinds.append(kind)
        r = int(counters[LOST_ROWS])
        times, ints = self.lost_arrays
        times[r] = when, sent_at
        ints[r] = self.kinds.index(kind), src, dst, LOSS_REASONS.index(reason)
        counters[LOST_ROWS] = r + 1

    def make_room(self) -> None:
        """Room for an event's rows (the gathered rows written when the blocks are full)."""
        if self.counters[LOST_ROWS] + 2 > ROW_BLOCK:
            self.write_lost()
        if self.counters[ADOPTION_ROWS] + 2 > ROW_BLOCK:
            self.write_adoptions()

    def write_lost(self) -> None:
        """The gathered ``messages_lost`` rows, to the table."""
        rows = int(self.counters[LOST_ROWS])
        if rows == 0:
            return
        times, ints = self.lost_arrays
        self.network.lost_table.extend_as_rows([
            times[:rows, 0].copy(), times[:rows, 1].copy(),
            _labels(tuple(self.kinds), ints[:rows, 0]),
            ints[:rows, 1].astype(np.int32), ints[:rows, 2].astype(np.int32),
            _labels(LOSS_REASONS, ints[:rows, 3]),
        ])  # fmt: skip
        self.counters[LOST_ROWS] = 0

    def write_adoptions(self) -> None:
        """The gathered adoption rows, to the broadcast's table."""
        rows = int(self.counters[ADOPTION_ROWS])
        if rows == 0 or self.broadcast is None:
            return
        times, ints = self.adoption_arrays
        self.broadcast.adoptions.extend_as_rows([
            times[:rows].copy(), ints[:rows, 0].astype(np.int32), ints[:rows, 1].copy(),
            ints[:rows, 2].copy(), ints[:rows, 3].astype(np.int32),
            _labels(VIA_LABELS, ints[:rows, 4]),
        ])  # fmt: skip
        self.counters[ADOPTION_ROWS] = 0


def _lanes(capacity: int, old: tuple | None = None) -> tuple:
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


_NO_WALK = (
    np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0),
    np.zeros(0, dtype=np.bool_), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
    np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
    np.zeros(0, dtype=np.int64),
)  # fmt: skip
_NO_BROADCAST = (
    np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros((0, 1)),
    np.zeros(0, dtype=np.int64), np.zeros(0),
)  # fmt: skip


def _labels(labels: tuple[str, ...], codes: np.ndarray) -> object:
    """A string column of ``labels[code]`` per row, built from its runs
    (:func:`netsim.log.string_runs`)."""
    if codes.size == 0:
        return string_runs(labels, [], [])
    starts = np.flatnonzero(np.diff(codes)) + 1
    bounds = np.concatenate([[0], starts, [codes.size]])
    return string_runs(labels, codes[bounds[:-1]].tolist(), np.diff(bounds).tolist())


def attach_exact_core(sim: Simulation, components: Mapping[str, Component]) -> str | None:
    """Run exact mode's events on the compiled core when every component has a compiled form
    (:func:`exact_engine_blocker`); returns why not otherwise (then SimPy runs them all)."""
    blocker = exact_engine_blocker(components)
    if blocker is not None:
        return blocker
    network = next(c for c in components.values() if isinstance(c, Network))
    gossip = next((c for c in components.values() if isinstance(c, PushPullGossip)), None)
    if gossip is not None and isinstance(gossip.rule, _Silent) and gossip.rules:
        return "a gossip engine that was not started"
    ExactCore(sim, network, gossip)
    return None


__all__ = ["ExactCore", "attach_exact_core", "exact_engine_blocker", "run_events"]


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
