"""The compiled exact core: exact mode's events of the built-in transport, push-pull gossip and
broadcast, run by one numba kernel in SimPy's order, with SimPy kept for everything else.

Exact mode on SimPy costs some 1.5 µs per event in SimPy's own loop and as much again in the
handlers (README, Performance). Here the events of the components that declare a compiled form
(:attr:`netsim.component.Component.exact_form`) — a node's gossip tick, a message's
completion with its epoch and loss checks, the broadcast's adoption and coverage check — live
in a compiled event queue (:mod:`netsim.event_queue`) and are handled in compiled code over the
components' array state. Everything else — churn transitions from the schedule, the broadcast's
new updates, observers, progress, the end of the run — stays a SimPy event.

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
up to date whenever the kernel returns, that is before every SimPy event.

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
from netsim.event_queue import ID_BITS, ID_MASK, NEXT_ID, SIZE, EventQueue, queue_insert, queue_push
from netsim.log import string_runs
from netsim.network.links import (
    _REJECTION_TRIES,
    LINK_DOWN,
    RANDOM_LOSS,
    SOURCE_OFFLINE,
    TARGET_OFFLINE,
    Network,
)
from netsim.protocols.broadcast import VIA_LABELS, Broadcast, coverage_check
from netsim.protocols.gossip import PULL, PUSH, PushPullGossip, _Silent, _Tick

if TYPE_CHECKING:
    from collections.abc import Mapping

    from netsim.component import Component
    from netsim.sim import Environment, Simulation

#: Event kinds of the compiled queue: a node's gossip tick (node, timer generation) and a
#: message's completion (its slot).
TICK, TRANSFER = 0, 1
#: Message kinds and loss reasons by code (labels as the SimPy path writes them).
MESSAGE_KINDS = (PUSH, PULL)
PUSH_CODE, PULL_CODE = 0, 1
LOSS_REASONS = (SOURCE_OFFLINE, TARGET_OFFLINE, LINK_DOWN, RANDOM_LOSS)
NO_LOSS, SOURCE_CODE, TARGET_CODE, LINK_CODE, RANDOM_CODE = -1, 0, 1, 2, 3
#: The applications the kernel carries in gossip messages.
SILENT, BROADCAST = 0, 1
ORIGIN_VIA, PUSH_VIA, PULL_VIA = 0, 1, 2  # VIA_LABELS

#: ``counters`` entries: the transport's and engine's counters, the rows gathered, the free
#: message slots, and where each block of draws is read next.
SENT, DELIVERED, LOST, EXCHANGES, LOST_ROWS, ADOPTION_ROWS, FREE, PEER_AT, DELAY_AT, LOSS_AT = (
    range(10)
)
#: ``settings`` entries: Δ, the loss probability, the constant delay (NaN: drawn), the
#: transfer time a message's size adds (NaN: no bandwidth), pull (1.0) or push only.
PERIOD, LOSS, CONSTANT_DELAY, SIZE_TIME, PULLS = range(5)
#: A message slot's integer fields (``messages``), and its float fields (``message_times``).
SRC, DST, KIND, VALUE, SRC_EPOCH, DST_EPOCH, DOOM = range(7)
SENT_AT, DOOM_TIME = 0, 1
#: The two lanes (FIFO queues of events queued in time order): ticks queued again one period
#: on, and messages of a constant transfer time; their ``lane_meta`` rows are (head, count).
TICK_LANE, TRANSFER_LANE = 0, 1
#: The source of an event taken from the heap rather than a lane.
HEAP = 2
HEAD, COUNT = 0, 1
#: Kernel results: done (the next compiled event comes after the bound, or none is left), or
#: a block of draws or some room is needed before the next event can run.
DONE, NEED_PEERS, NEED_DELAYS, NEED_LOSS, NEED_ROOM = range(5)
#: The most draws of one block an event takes: a tick's peer choice (the rejection tries and
#: the fallback's one draw); a message takes one delay and one loss draw.
PEER_DRAWS_PER_EVENT = _REJECTION_TRIES + 1
#: Rows gathered per table before they are written (and room checked before each event).
ROW_BLOCK = 65_536


def _compile_without_reference_counts(function: Callable) -> Callable:
    """``function`` compiled with numba's runtime (its reference counts) switched off where
    numba allows it. The kernel allocates nothing, and with the runtime on, every array its
    inlined helpers take was counted in and out with atomic operations at each event: three
    quarters of its time (README, Performance). Numbas without the option compile it with
    the runtime: the same results, slower."""
    try:
        return njit(cache=True, _nrt=False)(function)
    except (KeyError, TypeError, ValueError):  # pragma: no cover (numba without the option)
        return njit(cache=True)(function)


kernel = _compile_without_reference_counts


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
    src: int, dst: int, kind: int, value: int, now: float, normal: int, network: tuple,
    settings: np.ndarray, counters: np.ndarray, draws: tuple, in_flight: tuple, queue: tuple,
    lanes: tuple,
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
    messages[slot, VALUE], messages[slot, DOOM] = value, doom
    messages[slot, SRC_EPOCH], messages[slot, DST_EPOCH] = epoch[src], epoch[dst]
    message_times[slot, SENT_AT], message_times[slot, DOOM_TIME] = now, doom_time
    if math.isnan(settings[CONSTANT_DELAY]):
        times, keys, kinds, first, second, meta = queue
        queue_push(times, keys, kinds, first, second, meta, now + duration, normal, TRANSFER,
                   slot, 0)  # fmt: skip
    else:  # a constant transfer time: completions come in the order they are queued
        _lane_push(lanes, queue[5], TRANSFER_LANE, now + duration, normal, slot, 0)


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
        queue_insert_top(times, keys, kinds, first, second, meta, meta[SIZE] - 1)
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
) -> tuple[int, float]:  # fmt: skip
    """Process the compiled events whose key (time, priority, insertion id) is smaller than
    the bound's, in key order; returns (:data:`DONE` or what must be done first, the time of
    the last event processed, NaN if none). Before each event it checks that the event
    cannot run out of draws or room, so an event always runs whole.

    A tick (``PushPullGossip._tick``): a stale generation ends it (the node left); else the
    push to a random online neighbour and the next tick one period on. A message's completion
    (``Network._complete``): a loss row, or the arrival — the merge (``incoming``), a rejoined
    node heard from (its first tick, :meth:`PushPullGossip._schedule_tick`), and a push
    answered by the pull."""
    phase, generation, active = gossip
    version = broadcast[0]
    messages = in_flight[0]
    period = settings[PERIOD]
    now = math.nan
    while True:
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
                value = version[a] if app == BROADCAST else 0
                _send(a, peer, PUSH_CODE, value, now, normal, network, settings, counters, draws,
                      in_flight, queue, lanes)  # fmt: skip
            _lane_push(lanes, queue[5], TICK_LANE, now + period, normal, a, b)
            continue
        src, dst, message = messages[a, SRC], messages[a, DST], messages[a, KIND]
        if not _arrives(a, now, network, counters, in_flight, lost_rows):
            continue
        if app == BROADCAST and messages[a, VALUE] > version[dst]:
            via = PUSH_VIA if message == PUSH_CODE else PULL_VIA
            broadcast_adopt(dst, messages[a, VALUE], src, via, now, network[2], online_count,
                            updates, broadcast, adoption_rows, counters)  # fmt: skip
        if not active[dst]:
            _schedule_tick(dst, generation[dst], now, period, phase, queue, normal)
            active[dst] = True
        if message == PUSH_CODE and settings[PULLS] > 0:
            value = version[dst] if app == BROADCAST else 0
            _send(dst, src, PULL_CODE, value, now, normal, network, settings, counters, draws,
                  in_flight, queue, lanes)  # fmt: skip


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


@njit(cache=True, inline="always")
def queue_insert_top(
    times: np.ndarray, keys: np.ndarray, kinds: np.ndarray, first: np.ndarray,
    second: np.ndarray, meta: np.ndarray, last: int,
) -> None:  # fmt: skip
    """Remove the first event: the entry at ``last`` fills the hole at the top
    (:func:`netsim.event_queue.queue_pop` without building its result)."""
    meta[SIZE] = last
    if last == 0:
        return
    time, key = times[last], keys[last]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= last:
            break
        right = child + 1
        if right < last and (
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
    kinds[i], first[i], second[i] = kinds[last], first[last], second[last]


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
    class (a subclass may change what its parent's form stands for), the gossip engine must be
    the plain event-driven one, and links must have no failures."""
    for key, component in components.items():
        form = type(component).__dict__.get("exact_form")
        if form is None:
            return f"{key} ({type(component).__name__}) has no compiled form"
    gossips = [c for c in components.values() if isinstance(c, PushPullGossip)]
    networks = [c for c in components.values() if isinstance(c, Network)]
    if len(networks) != 1 or len(gossips) > 1:
        return "the compiled core runs one transport and at most one gossip engine"
    network = networks[0]
    if network.failures is not None:
        return "links.failure has no compiled form"
    if gossips:
        gossip = gossips[0]
        if gossip._aligned or gossip._activation_listeners:
            return "a gossip engine on a common grid or with activation listeners"
        rules = gossip.rules
        if len(rules) > 1 or any(not isinstance(rule, Broadcast) for rule in rules):
            return "the compiled core carries at most one broadcast in gossip messages"
        if any(rule.network is not network for rule in rules):
            return "a broadcast on another transport"
    return None


class ExactCore:
    """The compiled core of one run (module docstring): its queue, the components' array
    state, and the Python side of the kernel's returns (draw blocks, room, rows, counters)."""

    def __init__(
        self, sim: Simulation, network: Network, gossip: PushPullGossip | None
    ) -> None:
        self.sim, self.network, self.gossip = sim, network, gossip
        env = sim.env
        nodes = network.nodes
        self.queue = EventQueue(4 * max(network.topology.n, 256))
        self.lanes = _lanes(2 * max(network.topology.n, 256))
        self.normal = 0
        self.rank_priority = np.array([float(NORMAL)])
        links = network.links
        constant = network._constant_delay
        self.settings = np.array([
            gossip.period if gossip is not None else 1.0,
            links.loss,
            math.nan if constant is None else constant,
            math.nan if links.bandwidth is None else
            (gossip.message_size if gossip is not None else 0.0) / links.bandwidth,
            1.0 if gossip is not None and gossip.pull else 0.0,
        ])  # fmt: skip
        self.counters = np.zeros(10, dtype=np.int64)
        self.counters[SENT], self.counters[DELIVERED] = network.sent, network.delivered
        self.counters[LOST] = network.lost
        topology = network.topology
        self.network_arrays = (
            topology.indptr, topology.indices, nodes.online, nodes.epoch, nodes.last_leave,
        )  # fmt: skip
        self.streams = (
            gossip._peer_uniform if gossip is not None else None,
            network._next_delay,
            network._next_loss_draw,
        )
        self.draws = [self._remaining(stream) for stream in self.streams]
        self.messages = np.zeros((0, 7), dtype=np.int64)
        self.message_times = np.zeros((0, 2))
        self.free = np.zeros(0, dtype=np.int64)
        self._grow_messages(2 * max(network.topology.n, 256))
        self.lost_rows = (np.empty((ROW_BLOCK, 2)), np.empty((ROW_BLOCK, 4), dtype=np.int64))
        self.adoption_rows = (np.empty(ROW_BLOCK), np.empty((ROW_BLOCK, 5), dtype=np.int64))
        self.broadcast: Broadcast | None = None
        if gossip is not None:
            gossip._timer_generation = np.array(gossip._timer_generation, dtype=np.int64)
            rules = gossip.rules
            self.broadcast = rules[0] if rules else None
        if self.broadcast is not None:
            self.broadcast._core = self
        self._take_ticks(env)
        env.core = self
        if gossip is not None:
            gossip._core = self
        sim._end_hooks.insert(0, self.finish)

    # --- set-up ----------------------------------------------------------------------------

    @staticmethod
    def _remaining(stream: object) -> np.ndarray:
        """The draws a :class:`~netsim.rng.BlockDraws` still holds (the kernel reads them
        first)."""
        if stream is None:
            return np.zeros(0)
        return np.array(stream._buffer[stream._next :], dtype=np.float64)

    def _take_ticks(self, env: Environment) -> None:
        """Move the ticks the engine queued on SimPy (its start) into the compiled queue, each
        with its key, and share SimPy's event ids from then on."""
        for time, priority, event_id, tick in env.take_events(lambda e: isinstance(e, _Tick)):
            if priority != NORMAL:
                raise SimulationError(f"a tick at priority {priority}: the core runs NORMAL only")
            self._insert(time, event_id, TICK, tick.node, tick.generation)
        self.queue.meta[NEXT_ID] = env.share_event_ids(SharedCounter(self.queue.meta))

    def _insert(self, time: float, event_id: int, kind: int, a: int, b: int) -> None:
        if len(self.queue) == self.queue.times.size:
            self.queue.grow()
        key = (self.normal << ID_BITS) | event_id
        queue_insert(*self.queue.arrays(), float(time), key, kind, a, b)

    def push_tick(self, node: int, generation: int, at: float) -> None:
        """Queue ``node``'s tick at ``at`` (normal priority, the next insertion id): what the
        engine's Python code queues while the core runs its ticks."""
        if len(self.queue) == self.queue.times.size:
            self.queue.grow()
        queue_push(*self.queue.arrays(), float(at), self.normal, TICK, node, generation)

    def _grow_messages(self, capacity: int) -> None:
        """Room for ``capacity`` messages in flight (the slots in use keep their place)."""
        old = self.messages.shape[0]
        messages = np.zeros((capacity, 7), dtype=np.int64)
        times = np.zeros((capacity, 2))
        messages[:old], times[:old] = self.messages, self.message_times
        free = np.empty(capacity, dtype=np.int64)
        count = int(self.counters[FREE])
        free[:count] = self.free[:count]
        fresh = np.arange(capacity - 1, old - 1, -1, dtype=np.int64)
        free[count : count + fresh.size] = fresh
        self.counters[FREE] = count + fresh.size
        self.messages, self.message_times, self.free = messages, times, free

    # --- running ---------------------------------------------------------------------------

    def advance(self, time: float, priority: float, event_id: int) -> None:
        """Process every compiled event before SimPy's next, whose key is (``time``,
        ``priority``, ``event_id``)."""
        gossip, broadcast = self.gossip, self.broadcast
        gossip_state = (
            (gossip.phase, gossip._timer_generation, gossip.active)
            if gossip is not None
            else (np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.bool_))
        )
        while True:
            app_state = (
                (
                    broadcast.version, broadcast.known_online, broadcast.start_times,
                    broadcast.reached, broadcast._next, broadcast.threshold_shares,
                )
                if broadcast is not None
                else _NO_BROADCAST
            )  # fmt: skip
            status, now = run_events(
                self.queue.arrays(), self.lanes, self.rank_priority, self.normal, float(time),
                float(priority), int(event_id), self.network_arrays, self.settings,
                self.counters, tuple(self.draws),
                (self.messages, self.message_times, self.free), self.lost_rows, gossip_state,
                BROADCAST if broadcast is not None else SILENT, app_state,
                self.adoption_rows, self.network.nodes.online_count,
                broadcast.updates if broadcast is not None else 0,
            )  # fmt: skip
            if not math.isnan(now):
                self.sim.env.set_clock(now)
            self._sync()
            if status == DONE:
                return
            if status in (NEED_PEERS, NEED_DELAYS, NEED_LOSS):
                self._refill(status - NEED_PEERS)
            else:
                self._make_room()

    def _refill(self, which: int) -> None:
        """The next block of draws of stream ``which`` after what is left of the current one
        (drawn as :class:`~netsim.rng.BlockDraws` draws it: the same values in order)."""
        position = PEER_AT + which
        stream = self.streams[which]
        assert stream is not None
        left = self.draws[which][int(self.counters[position]) :]
        block = np.asarray(stream._draw(stream._block), dtype=np.float64)
        self.draws[which] = np.concatenate([left, block])
        self.counters[position] = 0

    def _make_room(self) -> None:
        queue = self.queue
        if len(queue) + 3 > queue.times.size:
            queue.grow()
        lane_meta = self.lanes[4]
        capacity = self.lanes[0].shape[1]
        if lane_meta[:, COUNT].max() + 2 > capacity:
            self.lanes = _lanes(2 * capacity, self.lanes)
        if self.counters[FREE] < 2:
            self._grow_messages(2 * self.messages.shape[0])
        if self.counters[LOST_ROWS] + 2 > ROW_BLOCK:
            self._write_lost_rows()
        if self.counters[ADOPTION_ROWS] + 2 > ROW_BLOCK:
            self._write_adoption_rows()

    def _sync(self) -> None:
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
        if self.counters[ADOPTION_ROWS] + 1 > ROW_BLOCK:
            self._write_adoption_rows()
        nodes = self.network.nodes
        broadcast_adopt(
            node, update, sender, via, float(self.sim.env.now), nodes.online,
            nodes.online_count, broadcast.updates,
            (broadcast.version, broadcast.known_online, broadcast.start_times,
             broadcast.reached, broadcast._next, broadcast.threshold_shares),
            self.adoption_rows, self.counters,
        )  # fmt: skip

    # --- rows ------------------------------------------------------------------------------

    def _write_lost_rows(self) -> None:
        rows = int(self.counters[LOST_ROWS])
        if rows == 0:
            return
        times, ints = self.lost_rows
        self.network.lost_table.extend_as_rows([
            times[:rows, 0].copy(), times[:rows, 1].copy(),
            _labels(MESSAGE_KINDS, ints[:rows, 0]),
            ints[:rows, 1].astype(np.int32), ints[:rows, 2].astype(np.int32),
            _labels(LOSS_REASONS, ints[:rows, 3]),
        ])  # fmt: skip
        self.counters[LOST_ROWS] = 0

    def _write_adoption_rows(self) -> None:
        rows = int(self.counters[ADOPTION_ROWS])
        if rows == 0 or self.broadcast is None:
            return
        times, ints = self.adoption_rows
        self.broadcast.adoptions.extend_as_rows([
            times[:rows].copy(), ints[:rows, 0].astype(np.int32), ints[:rows, 1].copy(),
            ints[:rows, 2].copy(), ints[:rows, 3].astype(np.int32),
            _labels(VIA_LABELS, ints[:rows, 4]),
        ])  # fmt: skip
        self.counters[ADOPTION_ROWS] = 0

    def finish(self) -> None:
        """At the end of the run: the rows still gathered written, and the Python copies of
        the state the kernel kept in arrays (flags lists, the broadcast's held updates)."""
        self._write_lost_rows()
        self._write_adoption_rows()
        gossip = self.gossip
        if gossip is not None:
            gossip.is_active[:] = gossip.active.tolist()
        if self.broadcast is not None and self.broadcast._held is not None:
            self.broadcast._held[:] = self.broadcast.version.tolist()


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
