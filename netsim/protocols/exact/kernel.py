"""The compiled exact core's kernel: the merged queue's events in SimPy's order, each handed
to the compiled handler of the component it belongs to (written beside the component).

:func:`run_events` takes the first event of the heap and the two lanes, checks that it cannot
run out of draws or room, and dispatches it: a tick to the gossip engine
(:func:`netsim.protocols.gossip_exact.tick`), a message's completion to the transport
(:func:`netsim.network.links_exact.complete`) and, delivered, to the engine's receiver
(:func:`netsim.protocols.gossip_exact.deliver`: the application's merge) or, a walk's
message, to the walk's step (:func:`netsim.protocols.walk.steps.arrive`), a walk timer to the
walk (:func:`netsim.protocols.walk.compiled.timer`). Nothing here restates a component's
logic; the kernel is the queue, the bound and the dispatch.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from netsim.compiled import njit
from netsim.event_queue import (
    CONSTANT_DELAY,
    COUNT,
    DELAY_AT,
    DELTA,
    DONE,
    FREE,
    GOSSIP_LEARNING,
    HEAD,
    ID_BITS,
    ID_MASK,
    KILL_AT,
    KILL_PROBABILITY,
    KIND,
    LOSS,
    LOSS_AT,
    LOST_ROWS,
    NEED_DELAYS,
    NEED_KILLS,
    NEED_LOSS,
    NEED_PEERS,
    NEED_ROOM,
    NEED_WALK_PEERS,
    PADDING,
    PAUSED,
    PEER_AT,
    PENDING_CIRCLE,
    PENDING_NODE,
    SIZE,
    TICK,
    TICK_LANE,
    TIMEOUT_DUE,
    TIMER,
    TRANSFER_LANE,
    WALK_KIND,
    WALK_PART,
    WALK_PEER_AT,
    queue_drop_first,
    queue_first,
    queue_first_event,
)
from netsim.kernel_cache import guard_kernels
from netsim.learning.compiled_visit import learning_room
from netsim.network.links_exact import PEER_DRAWS, complete
from netsim.protocols.gossip_exact import HANDLED, deliver, tick
from netsim.protocols.walk.compiled import ROWS, STEP_META, STEP_TIMES, timer
from netsim.protocols.walk.steps import STEPPED, arrive

#: The source of an event taken from the heap rather than a lane.
HEAP = 2
#: A return after this many events, for Python to handle signals (an interrupt, the run's
#: time limit) in a run whose SimPy events are far apart: some 0.05–0.15 s of kernel time.
EVENTS_PER_CALL = 1 << 20


def kernel(function: Callable) -> Callable:
    """``function`` compiled with numba's runtime (its reference counts) switched off where
    numba allows it. The kernel allocates nothing, and with the runtime on, every array its
    inlined helpers take was counted in and out with atomic operations at each event: three
    quarters of its time (docs/performance). Numbas without the option compile it with
    the runtime: the same results, slower."""
    try:
        return njit(cache=True, _nrt=False)(function)
    except (KeyError, TypeError, ValueError):  # pragma: no cover (numba without the option)
        return njit(cache=True)(function)


@njit(cache=True, inline="always")
def first_event(queue: tuple, lanes: tuple) -> tuple[int, float, int]:
    """The first event of the heap and the two lanes, the smallest (time, key): its source
    (a lane, :data:`HEAP`, or -1 when all are empty), time and key."""
    rows, meta = queue
    lane_times, lane_keys, lane_meta = lanes[0], lanes[1], lanes[4]
    source, time, key = -1, math.inf, 0
    if meta[SIZE] > 0:
        time, key = queue_first(rows)
        source = HEAP
    for lane in range(2):
        if lane_meta[lane, COUNT] > 0:
            head = lane_meta[lane, HEAD]
            t = lane_times[lane, head]
            if source < 0 or t < time or (t == time and lane_keys[lane, head] < key):
                source, time, key = lane, t, lane_keys[lane, head]
    return source, time, key


@njit(cache=True, inline="always")
def what_is_missing(
    settings: np.ndarray, counters: np.ndarray, draws: tuple, queue: tuple, lanes: tuple,
    lost_rows: tuple, adoption_rows: tuple, walk: tuple, app: int, learning: tuple,
) -> int:  # fmt: skip
    """What the next event could run out of (:data:`NEED_PEERS` …), or :data:`DONE` when it
    has all it can use: a tick's peer draws, a message's delay and loss draws, a walk's peer
    and kill draws (its steps compiled), room for two queued events, two message slots and a
    row in each table (a gossip-learning visit's rows included)."""
    peers, delays, losses = draws[0], draws[1], draws[2]
    if not math.isnan(settings[WALK_KIND]):
        if counters[WALK_PEER_AT] + PEER_DRAWS > draws[3].size:
            return NEED_WALK_PEERS
        if counters[KILL_AT] + 1 > draws[4].size and settings[KILL_PROBABILITY] > 0:
            return NEED_KILLS
        if walk[STEP_META][ROWS] + 1 > walk[STEP_TIMES].size:
            return NEED_ROOM
    if counters[PEER_AT] + PEER_DRAWS > peers.size:
        return NEED_PEERS
    if counters[DELAY_AT] + 1 > delays.size and math.isnan(settings[CONSTANT_DELAY]):
        return NEED_DELAYS
    if counters[LOSS_AT] + 1 > losses.size and settings[LOSS] > 0:
        return NEED_LOSS
    lane_capacity, lane_meta = lanes[0].shape[1], lanes[4]
    if (
        queue[1][SIZE] + 3 > queue[0].shape[0] - PADDING
        or lane_meta[TICK_LANE, COUNT] + 2 > lane_capacity
        or lane_meta[TRANSFER_LANE, COUNT] + 2 > lane_capacity
        or counters[FREE] < 2
        or counters[LOST_ROWS] + 2 > lost_rows[0].shape[0]
        or adoption_rows[2][0] + 2 > adoption_rows[0].size
        or (app == GOSSIP_LEARNING and not learning_room(learning))
    ):
        return NEED_ROOM
    return DONE


@njit(cache=True, inline="always")
def take(source: int, queue: tuple, lanes: tuple) -> tuple[int, int, int]:
    """Remove the first event, from ``source``: its (kind, a, b)."""
    if source == HEAP:
        rows, meta = queue
        event = queue_first_event(rows)
        queue_drop_first(rows, meta)
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
    walk: tuple, learning: tuple,
) -> tuple[int, float]:  # fmt: skip
    """Process the compiled events whose key (time, priority, insertion id) is smaller than
    the bound's, in key order; returns (:data:`~netsim.event_queue.DONE` or what must be done
    first, the time of the last event processed, NaN if none);
    :data:`~netsim.event_queue.PAUSED` after :data:`EVENTS_PER_CALL` events. Before each
    event it checks that the event cannot run out of draws or room, so an event always runs
    whole. Where an event has a Python part (a due timeout, activation listeners) the kernel
    returns for it at once (a gossip-learning visit left to Python: after the rest of the
    delivery)."""
    active = gossip[2]
    now = math.nan
    for _ in range(EVENTS_PER_CALL):
        source, time, key = first_event(queue, lanes)
        if source < 0 or time > bound_time:
            return DONE, now
        if time == bound_time:
            priority = rank_priority[key >> ID_BITS]
            if priority > bound_priority or (
                priority == bound_priority and (key & ID_MASK) > bound_id
            ):
                return DONE, now
        missing = what_is_missing(settings, counters, draws, queue, lanes, lost_rows,
                                  adoption_rows, walk, app, learning)  # fmt: skip
        if missing != DONE:
            return missing, now
        kind, a, b = take(source, queue, lanes)
        now = time
        if kind == TICK:
            tick(a, b, now, normal, gossip, app, network, settings, counters, draws, in_flight,
                 queue, lanes, broadcast, walk, learning)  # fmt: skip
        elif kind == TIMER:
            circle = timer(a, b, now, settings[DELTA], walk, active, queue, normal)
            if circle >= 0:
                counters[PENDING_NODE], counters[PENDING_CIRCLE] = a, circle
                return TIMEOUT_DUE, now
        else:
            delivered = complete(a, network, counters, in_flight, lost_rows)
            if in_flight[0][a, KIND] == settings[WALK_KIND]:  # a walk's step
                part = arrive(a, delivered, now, settings[DELTA], normal, network, settings,
                              counters, draws, in_flight, queue, walk, active)  # fmt: skip
                if part != STEPPED:
                    counters[PENDING_NODE], counters[PENDING_CIRCLE] = a, part
                    return WALK_PART, now
            elif delivered:
                handled = deliver(
                    a, now, normal, gossip, app, network, settings, counters, draws, in_flight,
                    queue, lanes, broadcast, adoption_rows, online_count, updates, walk, learning,
                )  # fmt: skip
                if handled != HANDLED:  # activation listeners, or a visit left to Python
                    return handled, now
    return PAUSED, now


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
