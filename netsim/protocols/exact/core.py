"""The compiled exact core's Python side: its queue merged with SimPy's, the blocks of draws,
the message slots, the rows, the counters, and the Python parts of events.

:class:`ExactCore` holds what the kernel (:func:`netsim.protocols.exact.kernel.run_events`)
works on. The components hand it their events, state and draws through their public
``attach_core`` (:meth:`netsim.component.Component.attach_core`), using only the public
methods here: :meth:`~ExactCore.take_draws` (a block stream the kernel reads from then on),
:meth:`~ExactCore.take_simpy_events` and :meth:`~ExactCore.insert` (events queued on SimPy
moved into the core's queue with their keys), :meth:`~ExactCore.run_gossip`,
:meth:`~ExactCore.carry` (the application gossip messages carry), :meth:`~ExactCore.on_room`
and :meth:`~ExactCore.on_python_part`, and ``settings``. The core reads no private attribute
of another class.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from simpy.events import NORMAL

from netsim.errors import SimulationError
from netsim.event_queue import (
    ACTIVATED,
    COUNT,
    COUNTERS,
    DELIVERED,
    DONE,
    DRAW_BLOCKS,
    EXCHANGES,
    FREE,
    ID_BITS,
    LOST,
    NEED_KILLS,
    NEED_LOSS,
    NEED_PEERS,
    NEED_ROOM,
    NEED_WALK_PEERS,
    NEXT_ID,
    PAUSED,
    PEER_AT,
    PENDING_CIRCLE,
    PENDING_NODE,
    PENDING_PULL,
    PULL_MESSAGE,
    SENT,
    SETTINGS,
    SILENT,
    TICK,
    TIMEOUT_DUE,
    WALK_PART,
    WALK_PEER_AT,
    EventQueue,
    make_lanes,
    queue_insert,
    queue_push,
)
from netsim.event_queue import BROADCAST as BROADCAST_VALUES
from netsim.event_queue import GOSSIP_LEARNING as LEARNING_VALUES
from netsim.event_queue import WALK as WALK_VALUES
from netsim.learning.compiled_visit import no_learning
from netsim.network.links_exact import MESSAGE_FIELDS, MESSAGE_TIMES, LostRows
from netsim.protocols.broadcast import ROW_BLOCK
from netsim.protocols.exact.kernel import run_events
from netsim.protocols.gossip import PULL, PUSH
from netsim.protocols.gossip_exact import send_from_python
from netsim.protocols.walk.compiled import NO_STEPS

if TYPE_CHECKING:
    from netsim.contracts import Transport
    from netsim.rng import BlockDraws
    from netsim.sim import Simulation

#: The kernel's arguments for what a run does not have: no walk, no broadcast, no gossip.
NO_WALK = (
    np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0),
    np.zeros(0, dtype=np.bool_), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
    np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
    np.zeros(0, dtype=np.int64), *NO_STEPS,
)  # fmt: skip
NO_BROADCAST = (
    np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros((0, 1)),
    np.zeros(0, dtype=np.int64), np.zeros(0),
)  # fmt: skip
NO_BROADCAST_ROWS = (np.zeros(2), np.zeros((2, 5), dtype=np.int64), np.zeros(1, dtype=np.int64))
NO_GOSSIP = (np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.bool_))
NO_LEARNING = no_learning()


#: The most draws one refill of a stream takes (2 MB of float64): each refill takes twice the
#: blocks of the one before, up to this, so a stream drawn from every round (peers, delays:
#: some 10⁴ a round at 10⁴ nodes) returns to Python once in tens of rounds, not several
#: times a round, and a stream seldom drawn from keeps a block's size.
REFILL_DRAWS = 1 << 18


class CoreDraws:
    """One of the core's blocks of draws, read one at a time by Python code (a walk's send
    on lossy links): the kernel and Python consume one sequence, as on SimPy."""

    __slots__ = ("core", "which")

    def __init__(self, core: ExactCore, which: int) -> None:
        self.core, self.which = core, which

    def __call__(self) -> float:
        core, which = self.core, self.which
        position = PEER_AT + which
        if core.counters[position] >= core.draws[which].size:
            core.refill(which)
        value = float(core.draws[which][core.counters[position]])
        core.counters[position] += 1
        return value


class SharedCounter:
    """SimPy's event-id counter made one with the compiled queue's: every event, SimPy's or
    compiled, takes the next id of one sequence, as on SimPy alone."""

    __slots__ = ("meta",)

    def __init__(self, meta: np.ndarray) -> None:
        self.meta = meta

    def __iter__(self) -> SharedCounter:
        return self

    def __next__(self) -> int:
        value = int(self.meta[NEXT_ID])
        self.meta[NEXT_ID] = value + 1
        return value


class ExactCore:
    """The compiled core of one run (module docstring): its queue, the components' array
    state, and the Python side of the kernel's returns (draw blocks, room, rows, counters,
    the Python part of an event)."""

    def __init__(self, sim: Simulation, transport: Transport) -> None:
        self.sim, self.network = sim, transport
        nodes, topology = transport.nodes, transport.topology
        n = max(topology.n, 256)
        self.queue = EventQueue(4 * n)
        self.lanes = make_lanes(2 * n)
        self.normal = 0
        self.rank_priority = np.array([float(NORMAL)])
        self.counters = np.zeros(COUNTERS, dtype=np.int64)
        self.settings = np.zeros(SETTINGS)
        self.settings[:] = math.nan
        self.network_arrays = (
            topology.indptr, topology.indices, nodes.online, nodes.epoch, nodes.last_leave,
        )  # fmt: skip
        self.in_flight = (
            np.zeros((0, MESSAGE_FIELDS), dtype=np.int64), np.zeros((0, MESSAGE_TIMES)),
            np.zeros(0, int),
        )  # fmt: skip
        self._grow_messages(2 * n)
        self.lost_rows = LostRows(transport.lost_table, self.counters, (PUSH, PULL), ROW_BLOCK)
        self.streams: list[BlockDraws | None] = [None] * DRAW_BLOCKS
        self.draws = [np.zeros(0) for _ in range(DRAW_BLOCKS)]
        self._refill_blocks = [1] * DRAW_BLOCKS
        self.gossip: Any = None
        self.gossip_state = NO_GOSSIP
        self.app = SILENT
        self._carried: Callable[[], Any] | None = None
        self._room: list[Callable[[], None]] = []
        self._python_parts: dict[int, Callable[[int, int], None]] = {}

    # --- what components call from attach_core ----------------------------------------------

    def take_draws(self, position: int, stream: BlockDraws) -> CoreDraws:
        """The kernel reads ``stream``'s draws from now on (``position``: where in
        ``counters`` its block is read, :data:`~netsim.event_queue.PEER_AT` …): what the
        stream still holds first, then its next blocks; Python reads the same sequence
        through the returned reader."""
        which = position - PEER_AT
        self.streams[which] = stream
        self.draws[which] = stream.remaining()
        self.counters[position] = 0
        return CoreDraws(self, which)

    def take_simpy_events(self, belongs: Callable[[Any], bool]) -> list[tuple]:
        """Remove from SimPy's queue the events ``belongs`` picks (for :meth:`insert`): their
        (time, priority, event id, event); the core runs normal priority only."""
        taken = self.sim.env.take_events(belongs)
        for _time, priority, _event_id, _event in taken:
            if priority != NORMAL:
                raise SimulationError(f"an event at priority {priority}: the core runs NORMAL")
        return taken

    def insert(self, time: float, event_id: int, kind: int, a: int, b: int) -> None:
        """Queue an event of ``kind`` taken from SimPy with its own key (time, id)."""
        self.make_room()
        key = (self.normal << ID_BITS) | event_id
        queue_insert(*self.queue.arrays(), float(time), key, kind, a, b)

    def run_gossip(self, engine: Any, state: tuple) -> None:
        """The gossip engine whose ticks the kernel runs, and its (phase, timer generation,
        active) arrays; a fresh message to a rejoined node returns to its
        ``core_activated(node)``, and the end of the run calls its ``core_finished()``."""
        self.gossip, self.gossip_state = engine, state
        self.on_python_part(ACTIVATED, self._activated)

    def carry(self, app: int, state: Callable[[], Any]) -> None:
        """The application gossip messages carry (:data:`~netsim.event_queue.BROADCAST`,
        :data:`~netsim.event_queue.WALK` or :data:`~netsim.event_queue.GOSSIP_LEARNING`) and
        how to read its arrays before each run of the kernel (they may have grown)."""
        self.app, self._carried = app, state

    def on_room(self, make_room: Callable[[], None]) -> None:
        """Call ``make_room()`` before every event that may add rows a component gathers."""
        self._room.append(make_room)

    def on_python_part(self, status: int, part: Callable[[int, int], None]) -> None:
        """Run ``part(node, value)`` when the kernel returns ``status`` for the Python part of
        an event (the node and the timeout circle due, the pull to send, or the slot of the
        message whose gossip-learning visit is Python's)."""
        self._python_parts[status] = part

    def record_loss(
        self, when: float, sent_at: float, kind: str, src: int, dst: int, reason: str
    ) -> None:
        """A message Python's transport lost: its row among the kernel's, in order."""
        self.lost_rows.add(when, sent_at, kind, src, dst, reason)

    def push_tick(self, node: int, generation: int, at: float) -> None:
        """Queue ``node``'s tick at ``at`` (normal priority, the next insertion id): what the
        engine's Python code queues while the core runs its ticks."""
        self.make_room()
        queue_push(*self.queue.arrays(), float(at), self.normal, TICK, node, generation)

    # --- running ------------------------------------------------------------------------------

    def start(self) -> None:
        """Share SimPy's event ids from now on, run before SimPy's every step, and write the
        rows first at the end of the run."""
        env = self.sim.env
        self.queue.meta[NEXT_ID] = env.share_event_ids(SharedCounter(self.queue.meta))
        env.attach_core(self)
        self.sim.at_end(self.finish, first=True)

    def advance(self) -> None:
        """Process every compiled event before SimPy's next, with the Python parts of events
        where they fall (SimPy's next event is looked up again after each: a Python part may
        queue one that comes first)."""
        env = self.sim.env
        nodes = self.network.nodes
        while True:
            time, priority, event_id = env.next_key()
            broadcast, broadcast_rows, updates = NO_BROADCAST, NO_BROADCAST_ROWS, 0
            walk, learning = NO_WALK, NO_LEARNING
            if self.app == BROADCAST_VALUES:
                broadcast, broadcast_rows, updates = self._carried()  # type: ignore[misc]
            elif self.app == WALK_VALUES:
                walk = self._carried()  # type: ignore[misc]
            elif self.app == LEARNING_VALUES:
                learning = self._carried()  # type: ignore[misc]
            self._counters_to_kernel()
            status, now = run_events(
                self.queue.arrays(), self.lanes, self.rank_priority, self.normal, time,
                priority, event_id, self.network_arrays, self.settings, self.counters,
                tuple(self.draws), self.in_flight, self.lost_rows.arrays, self.gossip_state,
                self.app, broadcast, broadcast_rows, nodes.online_count, updates, walk, learning,
            )  # fmt: skip
            if not math.isnan(now):
                env.set_clock(now)
            self._counters_from_kernel()
            if status == DONE:
                return
            self._python_part(status)

    def _python_part(self, status: int) -> None:
        """What the kernel returned for: draws, room, or the Python part of an event."""
        if status == PAUSED:  # Python's turn: a signal handler may run here
            return
        if NEED_PEERS <= status <= NEED_LOSS:
            self.refill(status - NEED_PEERS)
        elif NEED_WALK_PEERS <= status <= NEED_KILLS:  # the walk's follow the transport's
            self.refill(WALK_PEER_AT - PEER_AT + status - NEED_WALK_PEERS)
        elif status == NEED_ROOM:
            self.make_room()
        else:
            counters = self.counters
            node = int(counters[PENDING_NODE])
            circle = status in (TIMEOUT_DUE, WALK_PART)
            value = counters[PENDING_CIRCLE] if circle else counters[PENDING_PULL]
            self._python_parts[status](node, int(value))

    def _activated(self, node: int, peer: int) -> None:
        """A rejoined node heard from: the engine's listeners, then the pull (if any)."""
        self.gossip.core_activated(node)
        if peer >= 0:
            self.send_from_python(node, peer, PULL_MESSAGE)

    def message_kind(self, kind: str) -> int:
        """The code of message kind ``kind`` in the core's rows (a compiled sender's)."""
        kinds = self.lost_rows.kinds
        if kind not in kinds:
            kinds.append(kind)
        return kinds.index(kind)

    def before_python_send(self, blocks: tuple[int, ...], draws: int) -> None:
        """Before compiled code called from Python sends (a walk forwarded by Python code):
        room for an event, ``draws`` draws in each block of ``blocks`` (indices of
        ``draws``), and the transport's counters as Python left them; then
        :meth:`after_python_send`."""
        self.make_room()
        for which in blocks:
            if self.counters[PEER_AT + which] + draws > self.draws[which].size:
                self.refill(which)
        self._counters_to_kernel()

    def after_python_send(self) -> None:
        """After :meth:`before_python_send`'s send: Python's counters from the kernel's."""
        self._counters_from_kernel()

    def send_from_python(self, src: int, dst: int, kind: int) -> None:
        """A gossip message sent by Python code (a pull after the activation listeners), by
        the kernel's code."""
        self.make_room()
        for which in (1, 2):
            if self.counters[PEER_AT + which] + 1 > self.draws[which].size:
                self.refill(which)
        self._counters_to_kernel()
        broadcast, walk, learning = NO_BROADCAST, NO_WALK, NO_LEARNING
        if self.app == BROADCAST_VALUES:
            broadcast = self._carried()[0]  # type: ignore[misc]
        elif self.app == WALK_VALUES:
            walk = self._carried()  # type: ignore[misc]
        elif self.app == LEARNING_VALUES:
            learning = self._carried()  # type: ignore[misc]
        send_from_python(
            src, dst, kind, self.app, float(self.sim.env.now), self.normal,
            self.network_arrays, self.settings, self.counters, tuple(self.draws),
            self.in_flight, self.queue.arrays(), self.lanes, broadcast, walk, learning,
        )  # fmt: skip
        self._counters_from_kernel()

    def refill(self, which: int) -> None:
        """The next blocks of draws of stream ``which`` after what is left of the current
        ones (drawn as :class:`~netsim.rng.BlockDraws` draws them, block after block: the same
        values in order); twice as many blocks as the last refill, up to
        :data:`REFILL_DRAWS` draws."""
        position = PEER_AT + which
        stream = self.streams[which]
        assert stream is not None
        blocks = self._refill_blocks[which]
        self._refill_blocks[which] = min(2 * blocks, max(REFILL_DRAWS // stream.block, 1))
        left = self.draws[which][int(self.counters[position]) :]
        self.draws[which] = np.concatenate([left, stream.next_blocks(blocks)])
        self.counters[position] = 0

    def make_room(self) -> None:
        """Room for the next event: in the queue and lanes, for messages and rows."""
        queue = self.queue
        if len(queue) + 4 > queue.capacity:
            queue.grow()
        lane_meta = self.lanes[4]
        capacity = self.lanes[0].shape[1]
        if lane_meta[:, COUNT].max() + 2 > capacity:
            self.lanes = make_lanes(2 * capacity, self.lanes)
        if self.counters[FREE] < 2:
            self._grow_messages(2 * self.in_flight[0].shape[0])
        self.lost_rows.make_room()
        for make_room in self._room:
            make_room()

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

    def finish(self) -> None:
        """At the end of the run: the transport's rows still gathered written, and the
        engine's Python flags from the kernel's arrays (before any component's finish)."""
        self.lost_rows.write()
        if self.gossip is not None:
            self.gossip.core_finished()


__all__ = ["REFILL_DRAWS", "CoreDraws", "ExactCore", "SharedCounter"]
