"""The push-pull gossip engine's compiled handlers for the compiled exact core
(:mod:`netsim.protocols.exact`): a node's tick, a rejoined node's first tick, the value a
message carries, and what a delivered message does at its receiver (the merge, the
activation, the pull that answers a push).

Each function is the compiled twin of a method of
:class:`~netsim.protocols.gossip.PushPullGossip` (its docstring names it, the method's names
the function; ``tests/test_exact_twins.py``). ``gossip`` is the engine's (``phase``, timer
``generation``, ``active``) arrays; the application a message carries is named by its code
(:data:`~netsim.event_queue.BROADCAST`, :data:`~netsim.event_queue.WALK`) and merged by its
own compiled handler: the broadcast's one adoption (:func:`netsim.protocols.broadcast.adopt`),
the walk's ``rwprop`` merge (:func:`netsim.protocols.walk.compiled.merge`).
"""

from __future__ import annotations

import numpy as np

from netsim.compiled import njit
from netsim.event_queue import (
    ACTIVATED,
    BANDWIDTH,
    BROADCAST,
    DELTA,
    DST,
    EXCHANGES,
    GOSSIP_LEARNING,
    KIND,
    LEARNING_PART,
    LISTENERS,
    MESSAGE_SIZE,
    PENDING_NODE,
    PENDING_PULL,
    PERIOD,
    PULL_MESSAGE,
    PULLS,
    PUSH_MESSAGE,
    SENT_AT,
    SRC,
    TICK,
    TICK_LANE,
    VALUE,
    VALUE_ID,
    VALUE_ORIGIN,
    VALUE_SPECIAL,
    WALK,
    lane_push,
    queue_push,
)
from netsim.kernel_cache import guard_kernels
from netsim.learning.compiled_visit import carry_model, visit_model
from netsim.network.links_exact import online_neighbour, send
from netsim.protocols.broadcast import PULL_CODE, PUSH_CODE, adopt
from netsim.protocols.walk.compiled import merge

#: What a delivered message leaves to do: nothing, or (:data:`~netsim.event_queue.ACTIVATED`)
#: the activation listeners, in Python, then the pull (:data:`~netsim.event_queue.PENDING_PULL`).
HANDLED = 0


@njit(cache=True, inline="always")
def carry(
    slot: int, src: int, app: int, in_flight: tuple, broadcast: tuple, walk: tuple,
    learning: tuple,
) -> None:  # fmt: skip
    """The value ``src`` sends in the message in ``slot``, taken now (``GossipRule.outgoing``:
    :meth:`Broadcast.outgoing <netsim.protocols.broadcast.Broadcast.outgoing>`, the walk's
    ``rwprop``, gossip learning's model: :func:`~netsim.learning.compiled_visit.carry_model`)."""
    messages, message_times = in_flight[0], in_flight[1]
    if app == BROADCAST:
        messages[slot, VALUE] = broadcast[0][src]
    elif app == WALK:
        messages[slot, VALUE], messages[slot, VALUE_ID] = walk[0][src], walk[1][src]
        messages[slot, VALUE_SPECIAL] = walk[3][src]
        message_times[slot, VALUE_ORIGIN] = walk[2][src]
    elif app == GOSSIP_LEARNING:
        carry_model(slot, src, learning)


@njit(cache=True, inline="always")
def gossip_send(
    src: int, dst: int, kind: int, app: int, now: float, normal: int, network: tuple,
    settings: np.ndarray, counters: np.ndarray, draws: tuple, in_flight: tuple, queue: tuple,
    lanes: tuple, broadcast: tuple, walk: tuple, learning: tuple,
) -> None:  # fmt: skip
    """A gossip message of ``kind`` through the transport's compiled send, carrying the
    sender's value (``network.send(…, payload=self._outgoing(node), size=message_size)``)."""
    size_time = settings[MESSAGE_SIZE] / settings[BANDWIDTH]
    slot = send(src, dst, kind, size_time, now, normal, network, settings, counters, draws,
                in_flight, queue, lanes)  # fmt: skip
    carry(slot, src, app, in_flight, broadcast, walk, learning)


@njit(cache=True)
def send_from_python(
    src: int, dst: int, kind: int, app: int, now: float, normal: int, network: tuple,
    settings: np.ndarray, counters: np.ndarray, draws: tuple, in_flight: tuple, queue: tuple,
    lanes: tuple, broadcast: tuple, walk: tuple, learning: tuple,
) -> None:  # fmt: skip
    """:func:`gossip_send` for Python callers (the pull that waited for activation
    listeners)."""
    gossip_send(src, dst, kind, app, now, normal, network, settings, counters, draws, in_flight,
                queue, lanes, broadcast, walk, learning)  # fmt: skip


@njit(cache=True, inline="always")
def tick(
    node: int, generation: int, now: float, normal: int, gossip: tuple, app: int,
    network: tuple, settings: np.ndarray, counters: np.ndarray, draws: tuple, in_flight: tuple,
    queue: tuple, lanes: tuple, broadcast: tuple, walk: tuple, learning: tuple,
) -> None:  # fmt: skip
    """Compiled twin of :meth:`netsim.protocols.gossip.PushPullGossip._tick`: a stale
    generation ends it (the node left); else the push to a random online neighbour and the
    next tick one period on."""
    if generation != gossip[1][node]:
        return
    peer = online_neighbour(node, network, draws[0], counters)
    if peer >= 0:
        counters[EXCHANGES] += 1
        gossip_send(node, peer, PUSH_MESSAGE, app, now, normal, network, settings, counters,
                    draws, in_flight, queue, lanes, broadcast, walk, learning)  # fmt: skip
    lane_push(lanes, queue[1], TICK_LANE, now + settings[PERIOD], normal, node, generation)


@njit(cache=True, inline="always")
def schedule_tick(
    node: int, generation: int, now: float, period: float, phase: np.ndarray, queue: tuple,
    normal: int,
) -> None:  # fmt: skip
    """Compiled twin of :meth:`netsim.protocols.gossip.PushPullGossip._schedule_tick`: a
    (re)joined node's first tick, the next k·Δ + φ after now, queued as SimPy queues a delay,
    at now + (that − now)."""
    k = np.floor((now - phase[node]) / period) + 1
    when = k * period + phase[node]
    if when <= now:
        when += period
    queue_push(queue[0], queue[1], now + (when - now), normal, TICK, node, generation)


@njit(cache=True, inline="always")
def deliver(
    slot: int, now: float, normal: int, gossip: tuple, app: int, network: tuple,
    settings: np.ndarray, counters: np.ndarray, draws: tuple, in_flight: tuple, queue: tuple,
    lanes: tuple, broadcast: tuple, broadcast_rows: tuple, online_count: int, updates: int,
    walk: tuple, learning: tuple,
) -> int:  # fmt: skip
    """Compiled twin of :meth:`netsim.protocols.gossip.PushPullGossip._on_push` and
    :meth:`~netsim.protocols.gossip.PushPullGossip._on_pull`: the receiver merges the value
    (the application's ``incoming``), a rejoined node heard from gets its first tick and is
    active again, and a push is answered by the pull. Returns :data:`ACTIVATED` when the
    activation listeners must run first (in Python; the pull is then sent after them), and
    :data:`~netsim.event_queue.LEARNING_PART` when a gossip-learning visit is Python's (made
    after the rest of the delivery, which does not depend on it: the node and the message's
    slot in ``counters``)."""
    messages, message_times = in_flight[0], in_flight[1]
    phase, generation, active = gossip
    src, dst, message = messages[slot, SRC], messages[slot, DST], messages[slot, KIND]
    value = messages[slot, VALUE]
    if app == BROADCAST:
        if value > broadcast[0][dst]:  # Broadcast.incoming
            via = PUSH_CODE if message == PUSH_MESSAGE else PULL_CODE
            adopt(dst, value, src, via, now, network[2], online_count, updates, broadcast,
                  broadcast_rows)  # fmt: skip
    elif app == WALK:
        merge(dst, value, messages[slot, VALUE_ID], messages[slot, VALUE_SPECIAL],
              message_times[slot, VALUE_ORIGIN], message_times[slot, SENT_AT], now,
              settings[DELTA], walk, active, queue, normal)  # fmt: skip
    python_visit = app == GOSSIP_LEARNING and not visit_model(slot, dst, now, learning)
    pull = message == PUSH_MESSAGE and settings[PULLS] > 0
    if not active[dst]:
        schedule_tick(dst, generation[dst], now, settings[PERIOD], phase, queue, normal)
        active[dst] = True
        if settings[LISTENERS] > 0:  # they run in Python, then the pull is sent
            counters[PENDING_NODE] = dst
            counters[PENDING_PULL] = src if pull else -1
            return ACTIVATED
    if pull:
        gossip_send(dst, src, PULL_MESSAGE, app, now, normal, network, settings, counters,
                    draws, in_flight, queue, lanes, broadcast, walk, learning)  # fmt: skip
    if python_visit:
        counters[PENDING_NODE], counters[PENDING_PULL] = dst, slot
        return LEARNING_PART
    return HANDLED


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
