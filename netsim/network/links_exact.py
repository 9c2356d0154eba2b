"""The transport's compiled handlers for the compiled exact core (:mod:`netsim.protocols.exact`):
a message sent, its completion with its epoch and loss checks, a random online neighbour, and
the ``messages_lost`` rows they gather.

Each function is the compiled twin of a method of :class:`~netsim.network.links.Network` (its
docstring names it, and the method's names the function; ``tests/test_exact_twins.py`` fails
when one of a pair changes and the other does not). They work on the arrays the core shares
(:mod:`netsim.event_queue`'s layout): ``network`` is (``indptr``, ``indices``, ``online``,
``epoch``, ``last_leave``) of the topology and node states, ``in_flight`` the message slots
(``messages``, ``message_times``, the free slots), ``draws`` the blocks of the engine's peer
draws and the transport's delay and loss draws. :meth:`Network.attach_core
<netsim.network.links.Network.attach_core>` hands the transport's streams and settings over.
"""

from __future__ import annotations

import math

import numpy as np

from netsim.compiled import njit
from netsim.event_queue import (
    CONSTANT_DELAY,
    DELAY_AT,
    DELIVERED,
    DOOM,
    DOOM_TIME,
    DST,
    DST_EPOCH,
    FREE,
    KIND,
    LOSS,
    LOSS_AT,
    LOST,
    LOST_ROWS,
    PEER_AT,
    SENT,
    SENT_AT,
    SRC,
    SRC_EPOCH,
    TRANSFER,
    TRANSFER_LANE,
    lane_push,
    queue_push,
)
from netsim.kernel_cache import guard_kernels
from netsim.log import EventTable, string_runs
from netsim.network.links import (
    LINK_DOWN,
    RANDOM_LOSS,
    REJECTION_TRIES,
    SOURCE_OFFLINE,
    TARGET_OFFLINE,
)
from netsim.network.links import online_neighbour as rule_online_neighbour

#: Loss reasons by code (labels as :meth:`Network.send` writes them).
LOSS_REASONS = (SOURCE_OFFLINE, TARGET_OFFLINE, LINK_DOWN, RANDOM_LOSS)
NO_LOSS, SOURCE_CODE, TARGET_CODE, LINK_CODE, RANDOM_CODE = -1, 0, 1, 2, 3
#: The most draws of one block a peer choice takes (the rejection tries and the fallback's
#: one draw); a message takes one delay and one loss draw.
PEER_DRAWS = REJECTION_TRIES + 1
#: Integer fields of a message slot (the layout's fields and the carried value's).
MESSAGE_FIELDS, MESSAGE_TIMES = 9, 3


@njit(cache=True, inline="always")
def online_neighbour(node: int, network: tuple, peers: np.ndarray, counters: np.ndarray) -> int:
    """The transport's online-neighbour rule (:func:`netsim.network.links.online_neighbour`,
    the compiled twin of :meth:`netsim.network.links.Network.random_online_neighbour`) on the
    core's peer draws, which it reads from ``counters[PEER_AT]`` on and advances past."""
    peer, at = rule_online_neighbour(
        network[0], network[1], network[2], node, peers, counters[PEER_AT]
    )
    counters[PEER_AT] = at
    return peer


@njit(cache=True, inline="always")
def send(
    src: int, dst: int, kind: int, size_time: float, now: float, normal: int, network: tuple,
    settings: np.ndarray, counters: np.ndarray, draws: tuple, in_flight: tuple, queue: tuple,
    lanes: tuple,
) -> int:  # fmt: skip
    """Compiled twin of :meth:`netsim.network.links.Network.send`: the transfer time (the
    constant delay or the next drawn one, plus ``size_time``, the message's size / bandwidth;
    NaN: no bandwidth), the message placed (:func:`place`) and its completion queued at now +
    its transfer time (in the transfer lane when that time is constant). Returns the slot (the
    sender writes the value it carries there)."""
    duration = settings[CONSTANT_DELAY]
    if math.isnan(duration):
        duration = draws[1][counters[DELAY_AT]]
        counters[DELAY_AT] += 1
    if not math.isnan(size_time):
        duration += size_time
    slot = place(src, dst, kind, duration, now, network, settings, counters, draws, in_flight)
    if math.isnan(settings[CONSTANT_DELAY]):
        queue_push(queue[0], queue[1], now + duration, normal, TRANSFER, slot, 0)
    else:  # a constant transfer time: completions come in the order they are queued
        lane_push(lanes, queue[1], TRANSFER_LANE, now + duration, normal, slot, 0)
    return slot


@njit(cache=True, inline="always")
def send_for(
    src: int, dst: int, kind: int, duration: float, now: float, normal: int, network: tuple,
    settings: np.ndarray, counters: np.ndarray, draws: tuple, in_flight: tuple, queue: tuple,
) -> int:  # fmt: skip
    """Compiled twin of :meth:`netsim.network.links.Network.send` with its ``duration`` given
    (a walk's fixed δ_rw): the message placed (:func:`place`, no delay drawn) and its
    completion queued at now + ``duration``. Returns the slot."""
    slot = place(src, dst, kind, duration, now, network, settings, counters, draws, in_flight)
    queue_push(queue[0], queue[1], now + duration, normal, TRANSFER, slot, 0)
    return slot


@njit(cache=True, inline="always")
def place(
    src: int, dst: int, kind: int, duration: float, now: float, network: tuple,
    settings: np.ndarray, counters: np.ndarray, draws: tuple, in_flight: tuple,
) -> int:  # fmt: skip
    """The part of :meth:`netsim.network.links.Network.send` after the transfer time
    (compiled twin, with :func:`send` and :func:`send_for`): the message counted, its planned
    loss (an endpoint offline now; else one loss draw when ``links.loss`` > 0) and the message
    in a free slot. Returns the slot."""
    online, epoch = network[2], network[3]
    losses = draws[2]
    messages, message_times, free = in_flight
    counters[SENT] += 1
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
    return slot


@njit(cache=True, inline="always")
def loss_reason(slot: int, network: tuple, in_flight: tuple) -> tuple[int, float]:
    """Why the message in ``slot`` is lost and when (:data:`NO_LOSS` when it arrives), as
    :meth:`netsim.network.links.Network._complete` decides (its compiled twin, with
    :func:`complete`): the planned loss, unless an endpoint left first (the source checked
    before the target)."""
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
def complete(
    slot: int, network: tuple, counters: np.ndarray, in_flight: tuple, lost_rows: tuple
) -> bool:
    """Compiled twin of :meth:`netsim.network.links.Network._complete`: the message in
    ``slot`` completes, its slot freed, and either its loss row (False) or it counted as
    delivered (True: the receiver handles it)."""
    messages, message_times, free = in_flight
    reason, when = loss_reason(slot, network, in_flight)
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


class LostRows:
    """The ``messages_lost`` rows the compiled core gathers, written in the row groups
    :meth:`Network._complete <netsim.network.links.Network._complete>`'s appends make
    (:meth:`~netsim.log.EventTable.extend_as_rows`). Python's own lost messages (a walk's)
    join the same rows, so the table keeps the order of events. ``kinds``: the message kinds
    by code that compiled senders use (more are added as Python's losses name them)."""

    def __init__(
        self, table: EventTable, counters: np.ndarray, kinds: tuple[str, ...], block: int
    ) -> None:
        self.table, self.counters, self.block = table, counters, block
        self.arrays = (np.empty((block, 2)), np.empty((block, 4), dtype=np.int64))
        self.kinds = list(kinds)

    def add(self, when: float, sent_at: float, kind: str, src: int, dst: int, reason: str) -> None:
        """A message Python's transport lost (``Network._complete``): its row, in order."""
        counters = self.counters
        if counters[LOST_ROWS] + 1 > self.block:
            self.write()
        if kind not in self.kinds:
            self.kinds.append(kind)
        r = int(counters[LOST_ROWS])
        times, ints = self.arrays
        times[r] = when, sent_at
        ints[r] = self.kinds.index(kind), src, dst, LOSS_REASONS.index(reason)
        counters[LOST_ROWS] = r + 1

    def make_room(self) -> None:
        """Room for an event's rows (the gathered rows written when the block is full)."""
        if self.counters[LOST_ROWS] + 2 > self.block:
            self.write()

    def write(self) -> None:
        """The gathered rows, to the table."""
        rows = int(self.counters[LOST_ROWS])
        if rows == 0:
            return
        times, ints = self.arrays
        self.table.extend_as_rows([
            times[:rows, 0].copy(), times[:rows, 1].copy(),
            labels(tuple(self.kinds), ints[:rows, 0]),
            ints[:rows, 1].astype(np.int32), ints[:rows, 2].astype(np.int32),
            labels(LOSS_REASONS, ints[:rows, 3]),
        ])  # fmt: skip
        self.counters[LOST_ROWS] = 0


def labels(names: tuple[str, ...], codes: np.ndarray) -> object:
    """A string column of ``names[code]`` per row, built from its runs
    (:func:`netsim.log.string_runs`)."""
    if codes.size == 0:
        return string_runs(names, [], [])
    starts = np.flatnonzero(np.diff(codes)) + 1
    bounds = np.concatenate([[0], starts, [codes.size]])
    return string_runs(names, codes[bounds[:-1]].tolist(), np.diff(bounds).tolist())


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
