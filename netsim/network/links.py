"""Links and the network transport every protocol sends through (``docs/architecture.md``,
principle 3: the transport owns message fate).

Transfer semantics (Hegedűs et al. §4, "a reliable transfer protocol is applied"): a message
is lost only if its source or target goes offline before the transfer completes, plus two
optional causes beyond the paper: a per-message loss probability and per-link up/down
failures. The sender learns the outcome when the transfer would have completed (it waits for
an acknowledgement that never comes), and every loss is logged with its reason and the time
it happened.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from netsim.compiled import njit
from netsim.contracts import (
    BuildContext,
    ComponentConfig,
    ExactRun,
    ExactSupport,
    Section,
    Transport,
)
from netsim.distributions import Constant, Distribution, PositiveDuration
from netsim.event_queue import BANDWIDTH, CONSTANT_DELAY, DELAY_AT, LOSS, LOSS_AT
from netsim.fields import Bandwidth, Probability
from netsim.kernel_cache import guard_kernels
from netsim.log import F64, I32, STR, TableSchema
from netsim.network.nodes import NodeStates
from netsim.network.topology import Topology
from netsim.rng import BlockDraws
from netsim.sim import Simulation

LOSS_TABLE = TableSchema(
    name="messages_lost",
    columns=(
        ("time", F64),
        ("sent_at", F64),
        ("kind", STR),
        ("src", I32),
        ("dst", I32),
        ("reason", STR),
    ),
    description=(
        "Every message that did not arrive: when it was lost (the time of the cause: the "
        "endpoint's departure, or for one that left more than once mid-transfer its last "
        "departure; the link failure; or, for random_loss, the planned arrival), when it was "
        "sent, the sending protocol's message kind, endpoints, and why (source_offline, "
        "target_offline, link_down, random_loss)."
    ),
    time="time",
)

#: Uniform neighbours a peer choice tries before it lists the online ones: the online-neighbour
#: rule's rejection tries (:meth:`Network.random_online_neighbour`, and its compiled form
#: :func:`online_neighbour`).
REJECTION_TRIES = 8


@njit(cache=True)
def online_neighbour(
    indptr: np.ndarray,
    indices: np.ndarray,
    online: np.ndarray,
    node: int,
    draws: np.ndarray,
    at: int,
) -> tuple[int, int]:
    """The online-neighbour rule of :meth:`Network.random_online_neighbour`, compiled, with the
    same draws: up to :data:`REJECTION_TRIES` uniform neighbours of ``node`` (CSR
    ``indptr``/``indices``), the first online one taken; then one draw among the online
    neighbours in list order; -1 without a draw when none is online. The U[0, 1) draws are
    read from ``draws[at]`` on (the caller leaves at least ``REJECTION_TRIES + 1``);
    returns (the neighbour or -1, the next unread draw). ``tests/test_links.py`` holds the
    two forms to the same neighbour and draws."""
    start = indptr[node]
    degree = indptr[node + 1] - start
    if degree == 0:
        return -1, at
    for _ in range(REJECTION_TRIES):
        item = indices[start + int(draws[at] * degree)]
        at += 1
        if online[item]:
            return item, at
    count = 0
    for p in range(start, start + degree):
        if online[indices[p]]:
            count += 1
    if count == 0:
        return -1, at
    pick = int(draws[at] * count)
    at += 1
    for p in range(start, start + degree):
        if online[indices[p]]:
            if pick == 0:
                return indices[p], at
            pick -= 1
    return -1, at


SOURCE_OFFLINE = "source_offline"
TARGET_OFFLINE = "target_offline"
LINK_DOWN = "link_down"
RANDOM_LOSS = "random_loss"


@dataclass(frozen=True)
class BatchFate:
    """What the transport decided for a batch of messages (:meth:`Network.send_batch`):
    ``lost[k]`` whether message k is lost, ``delays[k]`` its transfer time (``None`` when the
    caller asked for none)."""

    lost: np.ndarray
    delays: np.ndarray | None


class LinkFailureConfig(ComponentConfig):
    """``links.failure``: every link alternates up and down periods with these means."""

    mean_up: PositiveDuration
    mean_down: PositiveDuration


class LinksConfig(ComponentConfig):
    """The ``links`` section (the built-in transport ``links``): every message's delay
    (a distribution), the links' bandwidth, a random loss probability and link failures."""

    delay: Distribution = Constant(dist="constant", value=0.0)
    bandwidth: Bandwidth | None = None
    loss: Probability = 0.0
    failure: LinkFailureConfig | None = None

    def link_model(self) -> LinkModel:
        """The :class:`LinkModel` these settings describe."""
        failure = self.failure
        return LinkModel(
            delay=self.delay,
            bandwidth=self.bandwidth,
            loss=self.loss,
            mean_up=failure.mean_up if failure else None,
            mean_down=failure.mean_down if failure else None,
        )


@dataclass(frozen=True)
class LinkModel:
    """How long a transfer takes and what can go wrong on a link.

    Transfer time = a delay drawn from ``delay`` + ``size / bandwidth`` (no bandwidth: size is
    free). ``loss`` is the probability that a message is lost for no other reason.
    ``mean_up`` / ``mean_down`` switch on per-link failures: every link alternates
    exponentially distributed up and down periods with these means.
    """

    delay: Distribution = field(default_factory=lambda: Constant(dist="constant", value=0.0))
    bandwidth: float | None = None
    loss: float = 0.0
    mean_up: float | None = None
    mean_down: float | None = None


class LinkFailures:
    """Per-link up/down processes, advanced lazily when a link is used.

    Each undirected link alternates Exp(mean_up) up and Exp(mean_down) down periods, starting
    from the stationary state. Only links that carry traffic get state; because the periods are
    memoryless, advancing a link's process on demand gives exactly the process's law, and the
    draws are deterministic because the simulation's use order is.
    """

    def __init__(self, n: int, mean_up: float, mean_down: float, rng: np.random.Generator):
        self.n = n
        self.mean_up = mean_up
        self.mean_down = mean_down
        self.rng = rng
        self._state: dict[int, tuple[bool, float]] = {}  # link -> (is up, time of next change)

    def _key(self, a: int, b: int) -> int:
        return a * self.n + b if a < b else b * self.n + a

    def _advance(self, key: int, now: float) -> tuple[bool, float]:
        state = self._state.get(key)
        if state is None:
            up = bool(self.rng.random() < self.mean_up / (self.mean_up + self.mean_down))
            state = (up, now + self.rng.exponential(self.mean_up if up else self.mean_down))
        up, change = state
        while change <= now:
            up = not up
            change += self.rng.exponential(self.mean_up if up else self.mean_down)
        self._state[key] = (up, change)
        return up, change

    def failure_time(self, a: int, b: int, start: float, end: float) -> float | None:
        """When the link a–b is or goes down during ``[start, end)``, or ``None`` if it stays up."""
        up, change = self._advance(self._key(a, b), start)
        if not up:
            return start
        return change if change < end else None


#: Where a node's neighbour segment starts in ``OnlineNeighbourIndex.order`` and how many of
#: its neighbours are online, side by side: a round's peer choice reads both for thousands of
#: random nodes, and one record is one cache miss instead of two.
SEGMENT_RECORD = np.dtype([("start", np.int64), ("online", np.int64)])

_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)


@njit(cache=True)
def draw_below(bits: np.uint64, bound: int) -> int:
    """⌊bits · bound / 2³²⌋ for 32 random bits: a draw from 0..bound−1 (Lemire's multiply-shift;
    each value's probability is off by at most bound/2³² relative, < 3·10⁻⁵ for 10⁵ nodes)."""
    return int((bits * np.uint64(bound)) >> _SHIFT32)


@njit(cache=True)
def pair_online(
    active: np.ndarray,
    raw: np.ndarray,
    segments: np.ndarray,
    order: np.ndarray,
    targets: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One gossip round's pairs: every ``active`` node, in a uniformly random order, with a
    uniform random online neighbour; nodes without one are left out.

    Returns (initiators, peers, the peers that are not active yet — with repeats, and all
    active nodes in increasing order).

    ``raw`` holds one random 64-bit word per active node (exactly as many): the high 32 bits drive a
    Fisher–Yates shuffle, the low 32 bits the choice among the online neighbours (the first
    ``segments.online`` entries of the node's segment of ``order``). The entries are node ids,
    or with ``targets`` (non-empty; a compact :class:`OnlineNeighbourIndex`) positions in the
    node's segment of ``targets``.
    """
    listed = np.empty(raw.size, dtype=np.int64)
    m = 0
    for node in range(active.size):
        if active[node]:
            listed[m] = node
            m += 1
    nodes = listed.copy()
    for i in range(m - 1, 0, -1):
        j = draw_below(raw[i] >> _SHIFT32, i + 1)
        nodes[i], nodes[j] = nodes[j], nodes[i]
    peers = np.empty(m, dtype=np.int64)
    asleep = np.empty(m, dtype=np.int64)
    kept = 0
    sleeping = 0
    by_position = targets.size > 0
    for k in range(m):
        node = nodes[k]
        segment = segments[node]
        if segment.online > 0:
            entry = order[segment.start + draw_below(raw[k] & _LOW32, segment.online)]
            peer = targets[segment.start + entry] if by_position else entry
            nodes[kept] = node
            peers[kept] = peer
            kept += 1
            if not active[peer]:
                asleep[sleeping] = peer
                sleeping += 1
    return nodes[:kept], peers[:kept], asleep[:sleeping], listed


#: Above this many links the :class:`OnlineNeighbourIndex` is compact: 5 or 6 bytes per link
#: instead of 16 (docs/performance.md: 10⁶ nodes with 50 neighbours in 1 GB; there the full
#: index would
#: take 800 MB, the compact one 250 MB). Its peer choice costs one more read, so smaller
#: topologies keep the full index.
COMPACT_ABOVE_LINKS = 1 << 24


@njit(cache=True)
def partition_online_first(
    indptr: np.ndarray,
    indices: np.ndarray,
    online: np.ndarray,
    order: np.ndarray,
    slot_of_link: np.ndarray,
    by_position: bool,
) -> np.ndarray:
    """Fill ``order`` with every node's neighbour list, online neighbours first, each group in
    its listed order (a stable partition): as node ids, or ``by_position`` as positions in the
    node's list. Returns how many neighbours of each node are online. ``slot_of_link[p]``
    receives the new slot of link ``p`` unless it is empty."""
    n = indptr.size - 1
    online_count = np.zeros(n, dtype=np.int64)
    mapped = slot_of_link.size > 0
    for u in range(n):
        start = indptr[u]
        slot = start
        for first in (True, False):  # the online neighbours, then the others
            for p in range(start, indptr[u + 1]):
                if online[indices[p]] == first:
                    order[slot] = p - start if by_position else indices[p]
                    if mapped:
                        slot_of_link[p] = slot
                    slot += 1
            if first:
                online_count[u] = slot - start
    return online_count


@njit(cache=True)
def in_links(
    indptr: np.ndarray, indices: np.ndarray, slot_of_link: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The links by target (a counting sort): ``(in_indptr, in_sources, slot_of, in_link_at)``,
    where ``in_sources[q]`` is the source of in-link q. With ``slot_of_link`` (non-empty)
    also each in-link's slot and, per slot, its in-link; otherwise both are empty."""
    n = indptr.size - 1
    in_indptr = np.zeros(n + 1, dtype=np.int64)
    for p in range(indices.size):
        in_indptr[indices[p] + 1] += 1
    for v in range(n):
        in_indptr[v + 1] += in_indptr[v]
    cursor = in_indptr[:-1].copy()
    in_sources = np.empty(indices.size, dtype=np.int32)
    mapped = slot_of_link.size > 0
    slot_of = np.empty(indices.size if mapped else 0, dtype=np.int32)
    in_link_at = np.empty(indices.size if mapped else 0, dtype=np.int32)
    for u in range(n):
        for p in range(indptr[u], indptr[u + 1]):
            q = cursor[indices[p]]
            cursor[indices[p]] += 1
            in_sources[q] = u
            if mapped:
                slot_of[q] = slot_of_link[p]
                in_link_at[slot_of_link[p]] = q
    return in_indptr, in_sources, slot_of, in_link_at


@njit(cache=True)
def move_across_boundary(
    order: np.ndarray,
    segments: np.ndarray,
    targets: np.ndarray,
    in_indptr: np.ndarray,
    in_sources: np.ndarray,
    slot_of: np.ndarray,
    in_link_at: np.ndarray,
    node: int,
    joining: bool,
) -> None:
    """Move ``node`` across the online/offline boundary of the segment of each node that lists
    it: swap it with the first offline entry (joining; that boundary then moves up by one) or,
    after the boundary moved down by one, with the last online entry (leaving).

    ``node``'s slot comes from the slot map (``slot_of``) or, in a compact index (entries are
    positions in ``targets``), from a scan of the owner's list and of the part of its segment
    that holds ``node``; the swaps, and so every later peer choice, are the same.
    """
    mapped = slot_of.size > 0
    for q in range(in_indptr[node], in_indptr[node + 1]):
        owner = in_sources[q]
        segment = segments[owner]
        if joining:
            boundary = segment.start + segment.online
            segment.online += 1
        else:
            segment.online -= 1
            boundary = segment.start + segment.online
        if mapped:
            slot = slot_of[q]
        else:
            position = 0
            while targets[segment.start + position] != node:
                position += 1
            # joining: it is among the offline entries; leaving: among the online ones
            slot = boundary if joining else segment.start
            while order[slot] != position:
                slot += 1
        entry = order[slot]
        order[slot] = order[boundary]
        order[boundary] = entry
        if mapped:
            other = in_link_at[boundary]
            in_link_at[slot] = other
            slot_of[other] = slot
            in_link_at[boundary] = q
            slot_of[q] = boundary


class OnlineNeighbourIndex:
    """Every node's neighbour list kept partitioned: online neighbours first.

    For round-based peer choice (one uniform random online neighbour for thousands of nodes per
    round) this turns the choice into one read: ``order[start[u] + ⌊U·online[u]⌋]`` with the
    node's :data:`SEGMENT_RECORD` (see :func:`pair_online`).
    A transition of node v moves v across the boundary in the segment of each of its
    in-neighbours (a swap with the boundary entry, :func:`move_across_boundary`), in
    O(in-degree) compiled work with the slot map, so churn costs nothing per round and the
    choice is exactly uniform at every instant.

    A *compact* index (more than :data:`COMPACT_ABOVE_LINKS` links, or ``compact=True``) holds
    each entry as the neighbour's position in the node's list (uint8 below 256 neighbours) and
    no slot map; a transition then scans the lists of v's in-neighbours to find it. Either way
    the same entries are swapped, so the peer choices are the same.

    The in-links (who lists v: one int32 per link, 191 MiB at 10⁶ nodes × 50) are built at the
    first transition (:meth:`in_links`), not with the index: a run without churn never needs
    them. Until then no entry has moved, so they are the same as when the index was built.
    """

    def __init__(
        self, topology: Topology, nodes: NodeStates, *, compact: bool | None = None
    ) -> None:
        self.topology = topology
        self.nodes = nodes
        links = int(topology.indptr[-1])
        self.compact = links > COMPACT_ABOVE_LINKS if compact is None else compact
        if self.compact:
            widest = int(topology.degrees().max(initial=0))
            entry = np.uint8 if widest <= 256 else np.uint16 if widest <= 65536 else np.int32
            self._targets = topology.indices
        else:
            entry, self._targets = np.int32, np.empty(0, dtype=np.int32)
        self.order = np.empty(links, dtype=entry)
        slot_of_link = np.empty(0 if self.compact else links, dtype=np.int32)
        self.segments = np.zeros(topology.n, dtype=SEGMENT_RECORD)
        self.segments["start"] = topology.indptr[:-1]
        self.online_count = self.segments["online"]  # a view
        self.online_count[:] = partition_online_first(
            topology.indptr, topology.indices, nodes.online, self.order, slot_of_link,
            self.compact,
        )  # fmt: skip
        self._slot_of_link = slot_of_link  # until the in-links are built (the slot map's input)
        self._in: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        nodes.on_join(self._joined)
        nodes.on_leave(self._left)

    def neighbours_in_order(self, node: int) -> np.ndarray:
        """``node``'s neighbours as the index holds them: the online ones first."""
        start, end = self.topology.indptr[node], self.topology.indptr[node + 1]
        entries = self.order[start:end]
        return self.topology.indices[start + entries.astype(np.int64)] if self.compact else entries

    def in_links(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The links by target, built on first use: ``(in_indptr, in_sources, slot_of,
        in_link_at)`` (:func:`in_links`; the last two empty in a compact index)."""
        if self._in is None:
            topology = self.topology
            self._in = in_links(topology.indptr, topology.indices, self._slot_of_link)
            self._slot_of_link = np.empty(0, dtype=np.int32)
        return self._in

    def nbytes(self) -> int:
        """The bytes the index holds now (the in-links once a transition has built them)."""
        held = (self.order, self.segments, self._slot_of_link, *(self._in or ()))
        return sum(array.nbytes for array in held)

    def _move(self, node: int, joining: bool) -> None:
        in_indptr, in_sources, slot_of, in_link_at = self.in_links()
        move_across_boundary(
            self.order, self.segments, self._targets, in_indptr, in_sources, slot_of,
            in_link_at, node, joining,
        )  # fmt: skip

    def _joined(self, node: int) -> None:
        self._move(node, joining=True)

    def _left(self, node: int) -> None:
        self._move(node, joining=False)

    def pairs(
        self, active: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The initiators of a gossip round in random order, their peers, the peers not
        ``active``, and the active nodes in increasing order (see :func:`pair_online`)."""
        raw = rng.bit_generator.random_raw(int(np.count_nonzero(active)))
        return pair_online(active, raw, self.segments, self.order, self._targets)


class Transfer(simpy.events.Event):
    """One message in flight, and the SimPy event of its completion: :meth:`Network.send`
    schedules the transfer itself, with the transport's completion as its one callback
    (docs/performance.md: a message is one object, not a record plus a timer event plus an argument
    tuple)."""

    _ok = True  # a transfer always succeeds as an event; its fate is doom_reason's
    _value = None
    #: Why the message is lost (a ``LOSS_CAUSES`` entry), decided when it is sent; None when
    #: nothing planned its loss (an endpoint may still leave before it arrives).
    doom_reason: str | None = None
    doom_time = 0.0  # when the planned loss happens

    def __init__(
        self,
        src: int,
        dst: int,
        kind: str,
        payload: Any,
        sent_at: float,
        src_epoch: int,
        dst_epoch: int,
        on_deliver: Callable[[Transfer], None],
        on_lost: Callable[[Transfer, str], None] | None,
    ) -> None:
        # simpy's Event.__init__ is not called: the transport sets env and callbacks when it
        # schedules the transfer, as simpy's Timeout does for itself; _ok, _value and the
        # doom fields start as the class's defaults (docs/performance.md: fewer stores per message)
        self.src = src
        self.dst = dst
        self.kind = kind
        self.payload = payload
        self.sent_at = sent_at
        self.src_epoch = src_epoch
        self.dst_epoch = dst_epoch
        self.on_deliver = on_deliver
        self.on_lost = on_lost


class Network(Transport):
    """Topology + links + node states: the built-in transport (``links``), the only way
    protocols exchange messages. Its random streams are ``<key>.delay``, ``<key>.loss`` and
    ``<key>.failure`` (``links.*`` for the ``links`` section)."""

    Config = LinksConfig
    section = Section("links", after=("topology",), by_kind="optional", present_by_default=True)
    tables = (LOSS_TABLE,)

    def __init__(
        self,
        sim: Simulation,
        topology: Topology,
        nodes: NodeStates,
        links: LinkModel,
        *,
        key: str = "links",
    ) -> None:
        if topology.n != nodes.n:
            raise ValueError("topology and node states disagree on the number of nodes")
        self.sim = sim
        self.topology = topology
        self.nodes = nodes
        self.links = links
        delay_rng = sim.streams.get(f"{key}.delay")
        self._next_delay = BlockDraws(lambda size: links.delay.sample(delay_rng, size))
        self._constant_delay = links.delay.value if isinstance(links.delay, Constant) else None
        self._next_loss_draw = BlockDraws(sim.streams.get(f"{key}.loss").random)
        # neighbour lists as Python lists: scalar access is far cheaper than numpy slicing;
        # made on a node's first send (a complete graph of 10⁴ nodes would need 10⁸ ints)
        self._neighbour_lists: list[list[int] | None] = [None] * topology.n
        self.failures = (
            LinkFailures(
                topology.n, links.mean_up, links.mean_down, sim.streams.get(f"{key}.failure")
            )
            if links.mean_up is not None and links.mean_down is not None
            else None
        )
        self.lost_table = sim.log.table(LOSS_TABLE)
        #: Where a lost message's row goes: the table, or the compiled exact core's rows (which
        #: keep the table's order when the core loses messages too).
        self._record_loss = self.lost_table.append
        self._env = sim.env
        # every transfer's callbacks: one shared tuple (simpy only iterates them; a tuple
        # cannot be appended to by mistake), not a new list and bound method per message
        self._completion = (self._complete,)
        # a message's transfer time when it is the same for every message (a constant delay
        # and no bandwidth)
        self._fixed_duration = self._constant_delay if links.bandwidth is None else None
        #: Whether a message between online nodes can be lost (per-message loss or link
        #: failures); without, a message needs no fate drawn and a batch is delivered as it is
        #: (:meth:`deliver_reliably`).
        self.lossy = links.loss > 0 or self.failures is not None
        # built by the first round-based use; from then on it follows every transition
        self._online_index: OnlineNeighbourIndex | None = None
        self.sent = 0
        self.delivered = 0
        self.lost = 0

    @classmethod
    def build(cls, config: LinksConfig, ctx: BuildContext) -> Network:
        """The transport of ``config`` over the run's topology and node states."""
        assert ctx.sim is not None and ctx.topology is not None and ctx.node_states is not None
        network = cls(ctx.sim, ctx.topology, ctx.node_states, config.link_model(), key=ctx.key)
        network.config, network.ctx = config, ctx
        return network

    def exact_support(self, run: ExactRun) -> ExactSupport:
        """The compiled core decides every message's fate with this transport's compiled
        twins (:mod:`netsim.network.links_exact`), except under link failures."""
        if self.failures is not None:
            return ExactSupport(False, "links.failure has no compiled form")
        return ExactSupport(True, role="transport")

    def attach_core(self, core: Any) -> None:
        """Hand the compiled core this transport's settings and its delay and loss streams
        (Python's sends read the core's blocks from then on, so both consume one sequence),
        and record the messages Python loses among the core's rows (one table order)."""
        core.settings[LOSS] = self.links.loss
        constant = self._constant_delay
        core.settings[CONSTANT_DELAY] = math.nan if constant is None else constant
        bandwidth = self.links.bandwidth
        core.settings[BANDWIDTH] = math.nan if bandwidth is None else bandwidth
        self._next_delay = core.take_draws(DELAY_AT, self._next_delay)
        self._next_loss_draw = core.take_draws(LOSS_AT, self._next_loss_draw)
        self._record_loss = core.record_loss

    def transfer_time(self, size: float) -> float:
        """Draw the duration of one transfer of ``size`` bytes."""
        delay = self._constant_delay if self._constant_delay is not None else self._next_delay()
        if self.links.bandwidth is not None:
            delay += size / self.links.bandwidth
        return delay

    def random_online_neighbour(self, node: int, uniform: BlockDraws) -> int:
        """A uniform random online neighbour of ``node``, or -1 if none is online (compiled
        twin: :func:`netsim.network.links.online_neighbour`).

        ``uniform`` hands out U[0, 1) draws (:class:`~netsim.rng.BlockDraws`). Rejection
        sampling — draw a neighbour, keep it if online — is uniform over the online neighbours
        and cheap when a fair share of them is online; after a few misses the online
        neighbours are listed and one is drawn from them, which is equally uniform.
        """
        neighbours = self._neighbour_lists[node]
        if neighbours is None:
            neighbours = self._neighbour_lists[node] = self.topology.neighbours(node).tolist()
        degree = len(neighbours)
        if degree == 0:
            return -1
        online = self.nodes.is_online
        candidate = uniform.pick_where(neighbours, online, REJECTION_TRIES)
        if candidate >= 0:
            return candidate
        candidates = [v for v in neighbours if online[v]]
        if not candidates:
            return -1
        return candidates[int(uniform() * len(candidates))]

    def _index(self) -> OnlineNeighbourIndex:
        """The :class:`OnlineNeighbourIndex`, created on first use and kept up to date by every
        later join and leave."""
        if self._online_index is None:
            self._online_index = OnlineNeighbourIndex(self.topology, self.nodes)
        return self._online_index

    def round_pairs(
        self, active: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A gossip round's (initiators, peers, inactive peers, active nodes): every
        ``active`` node in uniformly random order with a uniform random online neighbour
        (nodes with none left out), the chosen peers that are not ``active`` (with repeats),
        and the active nodes in increasing order."""
        return self._index().pairs(active, rng)

    def send(
        self,
        src: int,
        dst: int,
        *,
        kind: str,
        payload: Any,
        on_deliver: Callable[[Transfer], None],
        on_lost: Callable[[Transfer, str], None] | None = None,
        size: float = 0.0,
        duration: float | None = None,
    ) -> Transfer:
        """Start a transfer from ``src`` to ``dst``.

        ``on_deliver(transfer)`` runs at the target when it completes; otherwise
        ``on_lost(transfer, reason)`` runs at the sender at the time the transfer would have
        completed. ``duration`` overrides the link model (e.g. the paper's fixed δ_rw).

        Compiled twin: :func:`netsim.network.links_exact.send` (a given ``duration``:
        :func:`netsim.network.links_exact.send_for`), both through
        :func:`netsim.network.links_exact.place`.
        """
        env = self._env
        now = env.now
        nodes = self.nodes
        epochs = nodes.epochs
        transfer = Transfer(
            src, dst, kind, payload, now, epochs[src], epochs[dst], on_deliver, on_lost
        )
        self.sent += 1
        if duration is None:
            duration = self._fixed_duration
            if duration is None:
                duration = self.transfer_time(size)
        online = nodes.is_online
        if not online[src]:
            transfer.doom_reason, transfer.doom_time = SOURCE_OFFLINE, now
        elif not online[dst]:
            transfer.doom_reason, transfer.doom_time = TARGET_OFFLINE, now
        elif self.lossy:  # links that lose nothing check nothing more (docs/performance.md)
            if self.failures is not None:
                down_at = self.failures.failure_time(src, dst, now, now + duration)
                if down_at is not None:
                    transfer.doom_reason, transfer.doom_time = LINK_DOWN, down_at
            loss = self.links.loss
            if loss > 0 and self._next_loss_draw() < loss:
                if transfer.doom_reason is None:
                    transfer.doom_reason, transfer.doom_time = RANDOM_LOSS, now + duration
        transfer.env = env
        transfer.callbacks = self._completion
        # env.schedule(transfer, NORMAL, duration) at the instant it computes (tests/test_sim.py
        # holds the two to the same order)
        env.schedule_at(transfer, now + duration)
        return transfer

    # --- batches: a round's messages, sent at one instant -------------------------------

    def deliver_reliably(self, count: int) -> None:
        """Count a batch of ``count`` messages between online nodes on links that cannot lose
        them (:attr:`lossy` is false): all sent and delivered."""
        self.sent += count
        self.delivered += count

    def send_batch(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        *,
        kind: str,
        rng: np.random.Generator,
        window: float = 0.0,
        size: float | None = None,
        links_up: bool = False,
    ) -> BatchFate:
        """Send message k from ``src[k]`` to ``dst[k]`` for every k, all now, between nodes the
        caller found online, and decide each message's fate.

        A message is lost when its link is down at some time in ``[now, now + window)``
        (link failures; ``window`` 0 for a round's exchanges, which take no time) or, with
        probability ``links.loss``, at random; link failure is the reported cause when both
        apply. With ``size``, each message also gets a transfer time (delay + size /
        bandwidth), and a randomly lost one is lost at its planned arrival. The random draws
        come from ``rng``, the sending protocol's own stream — one U[0, 1) per message for the
        loss (when ``links.loss`` > 0), then one delay per message — so a protocol's batches
        never shift another's draws. ``links_up``: the caller sends only over links that
        :meth:`links_down_at` found up through the round, so they are not checked again.
        Counts every message (the ones not lost as delivered: they arrive, if later than the
        round, then) and logs every loss in ``messages_lost``.
        """
        count = int(src.size)
        now = self.sim.env.now
        random_lost = (
            rng.random(count) < self.links.loss if self.links.loss > 0 else np.zeros(count, bool)
        )
        delays = None
        if size is not None:
            delays = np.asarray(self.links.delay.sample(rng, count), dtype=float)
            if self.links.bandwidth is not None:
                delays = delays + size / self.links.bandwidth
        link_down = np.zeros(count, dtype=bool)
        down_at = np.zeros(count)
        if self.failures is not None and not links_up:
            down_at[:] = self.links_down_at(src, dst, now, now + window)
            link_down = ~np.isnan(down_at)
        lost = random_lost | link_down
        self.sent += count
        lost_count = int(lost.sum())
        self.delivered += count - lost_count
        if lost_count:
            self.lost += lost_count
            when = np.where(link_down, down_at, now if delays is None else now + delays)
            self.lost_table.extend(
                [
                    when[lost].tolist(),
                    [now] * lost_count,
                    [kind] * lost_count,
                    src[lost].tolist(),
                    dst[lost].tolist(),
                    np.where(link_down[lost], LINK_DOWN, RANDOM_LOSS).tolist(),
                ]
            )
        return BatchFate(lost, delays)

    def links_down_at(
        self, src: np.ndarray, dst: np.ndarray, start: float, end: float
    ) -> np.ndarray:
        """For each pair: when its link is or goes down during ``[start, end)`` (``start`` if it
        is down at ``start``; with ``end == start``, whether it is down at that instant), NaN
        if it stays up or there are no link failures. Each link's
        process is advanced in the pairs' order (its draws are deterministic)."""
        out = np.full(int(src.size), np.nan)
        failures = self.failures
        if failures is None:
            return out
        for k, (a, b) in enumerate(zip(src.tolist(), dst.tolist(), strict=True)):
            down = failures.failure_time(a, b, start, end)
            if down is not None:
                out[k] = down
        return out

    def _complete(self, transfer: Transfer) -> None:
        """A transfer completes: delivered, or lost (counted, its row, the sender told) when
        its planned loss or an endpoint's departure came first (compiled twins:
        :func:`netsim.network.links_exact.complete` and
        :func:`~netsim.network.links_exact.loss_reason`)."""
        reason = transfer.doom_reason
        nodes = self.nodes
        epochs = nodes.epochs
        if (
            reason is None
            and epochs[transfer.src] == transfer.src_epoch
            and epochs[transfer.dst] == transfer.dst_epoch
        ):  # the common case: nothing went wrong
            self.delivered += 1
            transfer.on_deliver(transfer)
            return
        when = transfer.doom_time
        if reason is None or reason in (LINK_DOWN, RANDOM_LOSS):
            # an endpoint leaving earlier than the link failure is the first cause
            for node, epoch, why in (
                (transfer.src, transfer.src_epoch, SOURCE_OFFLINE),
                (transfer.dst, transfer.dst_epoch, TARGET_OFFLINE),
            ):
                if nodes.epochs[node] != epoch:
                    left = float(nodes.last_leave[node])
                    if reason is None or left < when:
                        reason, when = why, left
        if reason is None:
            self.delivered += 1
            transfer.on_deliver(transfer)
            return
        self.lost += 1
        self._record_loss(when, transfer.sent_at, transfer.kind, transfer.src, transfer.dst, reason)
        if transfer.on_lost is not None:
            transfer.on_lost(transfer, reason)


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
