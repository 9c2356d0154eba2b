"""Push-pull broadcast of numbered updates, with exact time-to-coverage measurement.

A new update is started every ``interval`` at a random active node; gossip spreads it with the
merge rule "keep the newest update" (a node holding update v also holds every older one, as
with the random walk service's step counts). Push-pull with random peers reaches all N nodes
in O(log N) periods (Karp et al. 2000; Hegedűs et al. §4.3).

Coverage is measured against the *online* nodes: for update k and threshold θ, the time from
its start until at least θ of the nodes online at that moment hold it. Since holding k implies
holding every older update, coverage is non-increasing in k, so updates reach each threshold in
order and one pointer per threshold suffices — O(1) work per adoption or churn event.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
from pydantic import Field, field_validator

from netsim.compiled import njit
from netsim.contracts import (
    BuildContext,
    ComponentConfig,
    Curve,
    ExactRun,
    ExactSupport,
    FigureSpec,
    GossipApplication,
    Section,
    Transport,
)
from netsim.distributions import Duration, PositiveDuration
from netsim.event_queue import BROADCAST
from netsim.kernel_cache import guard_kernels
from netsim.lazy import lazy_module
from netsim.log import F64, I32, I64, STR, EventTable, TableSchema, string_runs
from netsim.network.links import Transfer
from netsim.protocols.gossip import PULL, PUSH
from netsim.sim import Simulation
from netsim.units import format_duration

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

if TYPE_CHECKING:
    from netsim.protocols.gossip import GossipEngine

ADOPTIONS_TABLE = TableSchema(
    name="broadcast_adoptions",
    columns=(
        ("time", F64),
        ("node", I32),
        ("update", I64),
        ("previous", I64),
        ("sender", I32),
        ("via", STR),
    ),
    description=(
        "A node adopted a newer update: at time, node, the update it now holds, the one it held "
        "before (-1: none), who sent it (-1 at the origin) and how (origin, gossip_push, "
        "gossip_pull)."
    ),
    time="time",
)


def broadcasts_table(thresholds: Sequence[float]) -> TableSchema:
    """Schema of the per-update summary for the configured coverage thresholds."""
    return TableSchema(
        name="broadcasts",
        columns=(
            ("update", I64),
            ("origin", I32),
            ("start", F64),
            ("online_at_start", I64),
            *((threshold_column(t), F64) for t in thresholds),
            ("final_coverage", F64),
        ),
        description=(
            "One row per update: origin node, start time, online nodes then, the time it took "
            "to reach each coverage threshold of the online nodes (t90: 90%; NaN: never "
            "within the run) and the covered fraction of online nodes at the end of the run."
        ),
        role="rounds",
        time="start",
        round="update",
        metrics=(*(threshold_column(t) for t in thresholds), "final_coverage"),
    )


def threshold_column(threshold: float) -> str:
    """Column name for a threshold: 0.9 → ``t90``, 0.995 → ``t99.5``."""
    return f"t{threshold * 100:g}"


class BroadcastConfig(ComponentConfig):
    """A new update every ``interval`` from ``start``; coverage measured at ``thresholds``."""

    interval: PositiveDuration
    start: Duration = 0.0
    thresholds: tuple[Annotated[float, Field(gt=0.0, le=1.0)], ...] = (0.5, 0.9, 0.99, 1.0)

    @field_validator("thresholds")
    @classmethod
    def _distinct(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value:
            raise ValueError("give at least one threshold")
        if len({threshold_column(t) for t in value}) != len(value):
            raise ValueError(
                "thresholds must be distinct as percentages with 6 significant digits "
                "(each becomes a column such as t90)"
            )
        return tuple(sorted(value))


#: How fast each update spread (Hegedűs et al. 2016 §4.3: the walk's progress travels by this
#: broadcast), for the default thresholds; other thresholds get the generic table figure.
BROADCAST_FIGURE = FigureSpec(
    file="broadcast_times.png",
    caption="time to reach 50, 90 and 99% of the online nodes, per update",
    sentence=(
        "Seconds from an update's start until it had reached 50, 90 and 99% of the nodes "
        "online at its start, against the update's number."
    ),
    title="Broadcast: time to reach a share of the online nodes",
    panels=tuple(
        Curve("broadcasts", f"t{share}", "round", f"time to {share}% (s)") for share in (50, 90, 99)
    ),
    xlabel="update",
)


@njit(cache=True)
def broadcast_round(
    initiators: np.ndarray, peers: np.ndarray, pull_lost: np.ndarray, now: float,
    online: np.ndarray, online_count: int, updates: int, broadcast: tuple, rows: tuple,
    rank: np.ndarray,
) -> int:  # fmt: skip
    """One round of push-pull for the broadcast, in place, with the semantics of
    :mod:`netsim.protocols.rounds`: initiator k pushes the newest update it held at the start
    of the round to ``peers[k]``; then every initiator whose pull answer was not lost
    (``pull_lost``) takes its peer's as it stood after all pushes. Each adoption is
    :func:`adopt`'s (the one every engine runs), its row added to ``rows``.

    Pushes are merged in batches: the first push to every target in the round's order, then
    the second, and so on (a push counts only if it was newer than the target's update at the
    start of the round), so the adoptions come out in the order a batch-by-batch merge gives.
    ``rank`` is a zeroed scratch array indexed by node id (left zeroed). Returns how many of
    the adoptions were pushes (their rows come first)."""
    version = broadcast[0]
    m = initiators.size
    sent = np.empty(m, dtype=np.int64)
    pushes_per_rank = np.zeros(m + 1, dtype=np.int64)
    push_rank = np.full(m, -1, dtype=np.int64)
    for k in range(m):
        sent[k] = version[initiators[k]]
        target = peers[k]
        if sent[k] > version[target]:  # relevant: newer than the target's at the start
            push_rank[k] = rank[target]
            rank[target] += 1
            pushes_per_rank[push_rank[k] + 1] += 1
    for k in range(m):
        rank[peers[k]] = 0
    # the relevant pushes by (rank, k): a counting sort
    for r in range(m):
        pushes_per_rank[r + 1] += pushes_per_rank[r]
    order = np.empty(pushes_per_rank[m], dtype=np.int64)
    for k in range(m):
        if push_rank[k] >= 0:
            order[pushes_per_rank[push_rank[k]]] = k
            pushes_per_rank[push_rank[k]] += 1
    first = rows[2][0]
    for k in order:
        if sent[k] > version[peers[k]]:
            adopt(peers[k], sent[k], initiators[k], PUSH_CODE, now, online, online_count,
                  updates, broadcast, rows)  # fmt: skip
    pushed = rows[2][0] - first
    for k in range(m):  # each peer answers with its update after all pushes
        sent[k] = version[peers[k]]
    every_answer = pull_lost.size == 0
    for k in range(m):
        if (every_answer or not pull_lost[k]) and sent[k] > version[initiators[k]]:
            adopt(initiators[k], sent[k], peers[k], PULL_CODE, now, online, online_count,
                  updates, broadcast, rows)  # fmt: skip
    return pushed


@njit(cache=True, inline="always")
def adopt(
    node: int, update: int, sender: int, via: int, now: float, online: np.ndarray,
    online_count: int, updates: int, broadcast: tuple, rows: tuple,
) -> None:  # fmt: skip
    """``node`` adopts ``update`` (newer than its own: the caller checked) from ``sender``
    by ``via`` (:data:`VIA_LABELS` code): the one adoption of every engine — SimPy's and the
    compiled core's exact mode (:meth:`Broadcast.incoming`, a new update at its origin) and
    rounds mode (:func:`broadcast_round`). Its row (time, node, update, previous, sender,
    via) goes to ``rows`` (:class:`AdoptionRows`); an online node is counted as a holder of
    every update it now holds, and coverage is checked when an update a threshold waits for
    gained a holder: only such an update can newly reach a threshold, since every other
    count and the online count are as at the last check (every join and leave checks again;
    docs/performance.md: one adoption in 20 messages, and a full check was a third of the
    adoption's cost). ``broadcast``: :meth:`Broadcast.compiled_state`'s arrays."""
    version, known, starts, reached, next_update, shares = broadcast
    row_time, row_ints, row_count = rows
    previous = version[node]
    version[node] = update
    r = row_count[0]
    row_time[r] = now
    row_ints[r, 0], row_ints[r, 1], row_ints[r, 2] = node, update, previous
    row_ints[r, 3], row_ints[r, 4] = sender, via
    row_count[0] = r + 1
    if not online[node]:
        return  # no online holder more: no coverage changes
    for k in range(previous + 1, update + 1):
        known[k] += 1
    for j in range(next_update.size):
        if previous < next_update[j] <= update:
            coverage_check(known, starts, reached, next_update, shares, updates, online_count, now)
            return


@njit(cache=True)
def adopt_from_python(
    node: int, update: int, sender: int, via: int, now: float, online: np.ndarray,
    online_count: int, updates: int, broadcast: tuple, rows: tuple,
) -> None:  # fmt: skip
    """:func:`adopt` for Python callers (an exact-mode message on SimPy, a new update)."""
    adopt(node, update, sender, via, now, online, online_count, updates, broadcast, rows)


@njit(cache=True, inline="always")
def coverage_check(
    known_online: np.ndarray,
    start_times: np.ndarray,
    reached: np.ndarray,
    next_update: np.ndarray,
    shares: np.ndarray,
    updates: int,
    online: int,
    now: float,
) -> None:
    """Record, for each threshold j, the updates that now reach it: from the oldest update
    not yet at it (``next_update[j]``) on, while at least ``shares[j]`` of the ``online``
    nodes hold it, ``reached[k, j]`` becomes ``now`` minus its start. Updates reach a
    threshold in order (coverage is non-increasing in k), so one pointer per threshold
    suffices (module docstring). Every mode and engine checks coverage with this."""
    if online == 0:
        return
    for j in range(shares.size):
        k = next_update[j]
        if k >= updates:
            continue
        needed = shares[j] * online - 1e-9
        while k < updates and known_online[k] >= needed:
            reached[k, j] = now - start_times[k]
            k += 1
        next_update[j] = k


#: The ``via`` values of rounds-mode adoptions, by their code in :class:`RoundAdoptions`.
VIA_LABELS = ("origin", PUSH, PULL)
ORIGIN_CODE, PUSH_CODE, PULL_CODE = 0, 1, 2


#: Adoption rows gathered before they are written (and room checked before each event).
ROW_BLOCK = 65_536


class AdoptionRows:
    """The adoption rows :func:`adopt` gathers (times; node, update, previous, sender, via
    code; how many), written to the table in the row groups one-by-one appends would make
    (:meth:`~netsim.log.EventTable.extend_as_rows`), or handed to :class:`RoundAdoptions`
    in rounds mode (:meth:`take`)."""

    def __init__(self, table: EventTable, block: int = ROW_BLOCK) -> None:
        self.table = table
        self.arrays = (np.empty(block), np.empty((block, 5), dtype=np.int64),
                       np.zeros(1, dtype=np.int64))  # fmt: skip

    def make_room(self, rows: int = 2) -> None:
        """Room for ``rows`` more rows: the gathered ones written when the block is full, and
        a larger block for more rows than a block holds."""
        times, count = self.arrays[0], self.arrays[2]
        if count[0] + rows <= times.size:
            return
        self.write()
        if rows > times.size:
            size = max(rows, 2 * times.size)
            self.arrays = (np.empty(size), np.empty((size, 5), dtype=np.int64), count)

    def take(self) -> tuple[np.ndarray, ...]:
        """The gathered rows' node, update, previous and sender columns (copies), now taken."""
        ints, count = self.arrays[1], self.arrays[2]
        rows = int(count[0])
        count[0] = 0
        return tuple(ints[:rows, c].copy() for c in range(4))

    def write(self) -> None:
        """The gathered rows, to the table."""
        times, ints, count = self.arrays
        rows = int(count[0])
        if rows == 0:
            return
        codes = ints[:rows, 4]
        starts = np.flatnonzero(np.diff(codes)) + 1
        bounds = np.concatenate([[0], starts, [rows]])
        via = string_runs(VIA_LABELS, codes[bounds[:-1]].tolist(), np.diff(bounds).tolist())
        self.table.extend_as_rows([
            times[:rows].copy(), ints[:rows, 0].astype(np.int32), ints[:rows, 1].copy(),
            ints[:rows, 2].copy(), ints[:rows, 3].astype(np.int32), via,
        ])  # fmt: skip
        count[0] = 0


class RoundAdoptions:
    """Rounds-mode adoptions, copied from the arrays each round returns into preallocated
    column blocks and written to the adoptions table a block of at least ``block_rows`` rows
    at a time: one Arrow conversion per block, not per round (per round through Python lists,
    the conversion was half of a round's CPU with a new update every round; concatenating the
    rounds' arrays per block was still a third of it: ``benchmarks/broadcast_rounds.py``)."""

    def __init__(self, table: EventTable, block_rows: int = 65_536) -> None:
        self.table = table
        self.block_rows = block_rows
        self._allocate(2 * block_rows)

    def _allocate(self, capacity: int) -> None:
        """Fresh, empty column blocks (the table keeps the previous ones without copying)."""
        self._time = np.empty(capacity, dtype=np.float64)
        self._node = np.empty(capacity, dtype=np.int32)
        self._update = np.empty(capacity, dtype=np.int64)
        self._previous = np.empty(capacity, dtype=np.int64)
        self._sender = np.empty(capacity, dtype=np.int32)
        self._codes: list[int] = []  # via code and row count of each run of equal via
        self._counts: list[int] = []
        self._rows = 0

    def _grow(self, capacity: int) -> None:
        """Room for ``capacity`` rows, keeping the rows gathered so far."""
        columns = (self._time, self._node, self._update, self._previous, self._sender)
        rows, codes, counts = self._rows, self._codes, self._counts
        self._allocate(capacity)
        fresh = (self._time, self._node, self._update, self._previous, self._sender)
        for old, new in zip(columns, fresh, strict=True):
            new[:rows] = old[:rows]
        self._rows, self._codes, self._counts = rows, codes, counts

    def add(
        self,
        time: float,
        columns: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        pushed: int,
        *,
        origin: bool = False,
    ) -> None:
        """Rows at ``time``: nodes, updates, previous updates and senders; the first
        ``pushed`` came by push, the rest by pull (or every one from its origin)."""
        nodes, updates, previous, senders = columns
        start = self._rows
        end = start + nodes.size
        if end > self._time.size:
            self._grow(max(end, 2 * self._time.size))
        self._time[start:end] = time
        self._node[start:end] = nodes
        self._update[start:end] = updates
        self._previous[start:end] = previous
        self._sender[start:end] = senders
        if origin:
            self._codes.append(ORIGIN_CODE)
            self._counts.append(nodes.size)
        else:
            self._codes += (PUSH_CODE, PULL_CODE)
            self._counts += (pushed, nodes.size - pushed)
        self._rows = end
        if end >= self.block_rows:
            self.flush()

    def flush(self) -> None:
        """Write the rows gathered so far to the table, in the order they were added."""
        rows = self._rows
        if rows == 0:
            return
        self.table.extend(
            [
                self._time[:rows],
                self._node[:rows],
                self._update[:rows],
                self._previous[:rows],
                self._sender[:rows],
                string_runs(VIA_LABELS, self._codes, self._counts),
            ]
        )
        self._allocate(self._time.size)


class Broadcast(GossipApplication):
    """The broadcast application of push-pull gossip (exact and round mode)."""

    Config = BroadcastConfig
    section = Section("broadcast", after=("gossip",))
    figures = (BROADCAST_FIGURE,)
    requires = {"gossip": "it spreads updates by gossip"}  # noqa: RUF012
    #: In rounds a compiled kernel does the round's exchanges (round_exchange, round_tick).
    round_form = "fused"

    def __init__(
        self,
        sim: Simulation,
        network: Transport,
        *,
        interval: float,
        start: float = 0.0,
        thresholds: Sequence[float] = (0.5, 0.9, 0.99, 1.0),
        engine: GossipEngine | None = None,
        name: str = "broadcast",
    ) -> None:
        self.sim = sim
        self.network = network
        self.nodes = network.nodes
        self.thresholds = tuple(sorted(thresholds))
        self.version = np.full(network.topology.n, -1, dtype=np.int64)
        # exact mode: the same as a list, read by every message (docs/performance.md), written with
        # version by _adopt; rounds mode reads version only (in its compiled kernel)
        self._held: list[int] | None = (
            None if engine is not None and engine.round_based else [-1] * network.topology.n
        )
        self._rng = sim.streams.get(f"{name}.origin")
        # updates start at nodes that take part in gossip, not at a just-rejoined node
        self.engine = engine
        # per update (grown together): online holders, start time, time to each threshold
        self.known_online = np.zeros(64, dtype=np.int64)
        self.start_times = np.zeros(64)
        self.reached = np.full((64, len(self.thresholds)), math.nan)
        self.threshold_shares = np.array(self.thresholds)
        self.origins: list[int] = []
        self.online_at_start: list[int] = []
        self._next = np.zeros(len(self.thresholds), dtype=np.int64)  # oldest not at threshold j
        self.skipped = 0
        self._rank_scratch = np.zeros(network.topology.n, dtype=np.int64)
        self.adoptions = sim.log.table(ADOPTIONS_TABLE)
        #: Every engine's adoption rows (:func:`adopt`), written in exact mode's row groups;
        #: rounds mode hands them to its blocks (written as a round's arrays).
        self.rows = AdoptionRows(self.adoptions)
        self._round_adoptions = None if self._held is not None else RoundAdoptions(self.adoptions)
        self.summary = sim.log.table(broadcasts_table(self.thresholds))
        #: Whether the compiled exact core merges the messages (it then holds ``version``).
        self._compiled = False
        self.nodes.on_join(self._on_join)
        self.nodes.on_leave(self._on_leave)
        sim.every(interval, self._originate, first=start)

    @classmethod
    def build(cls, config: BroadcastConfig, ctx: BuildContext) -> Broadcast:
        assert ctx.sim is not None and ctx.network is not None
        engine = ctx.require("gossip")
        app = cls(
            ctx.sim, ctx.network, interval=config.interval, start=config.start,
            thresholds=config.thresholds, engine=engine, name=ctx.key,
        )  # fmt: skip
        engine.register(app)
        return app

    @classmethod
    def table_schemas(cls, config: BroadcastConfig) -> tuple[TableSchema, ...]:
        return (ADOPTIONS_TABLE, broadcasts_table(config.thresholds))

    def origin_candidates(self) -> np.ndarray:
        """The nodes an update may start at: those taking part in gossip (online ones
        without an engine)."""
        if self.engine is not None:
            return np.flatnonzero(self.engine.active)
        return np.flatnonzero(self.nodes.online)

    @property
    def updates(self) -> int:
        return len(self.origins)

    # --- GossipRule ------------------------------------------------------------------------

    def outgoing(self, node: int) -> int:
        return self._held[node]  # type: ignore[index]  # exact mode only

    def incoming(self, node: int, value: Any, sender: int, transfer: Transfer) -> None:
        if value > self._held[node]:  # type: ignore[index]
            self._adopt(node, int(value), sender, transfer.kind)

    # --- internals -------------------------------------------------------------------------

    def _adopt(self, node: int, update: int, sender: int, via: str) -> None:
        """``node`` adopts ``update``: :func:`adopt`, the one adoption of every engine (its
        compiled core's messages run the same code in the kernel)."""
        self.rows.make_room()
        adopt_from_python(
            node, update, sender, VIA_LABELS.index(via), float(self.sim.env.now),
            self.nodes.online, self.nodes.online_count, self.updates, self.compiled_state(),
            self.rows.arrays,
        )  # fmt: skip
        if self._round_adoptions is not None:
            self._round_adoptions.add(self.sim.env.now, self.rows.take(), 0, origin=True)
        elif not self._compiled:
            self._held[node] = update  # type: ignore[index]

    def compiled_state(self) -> tuple[np.ndarray, ...]:
        """The arrays :func:`adopt` works on: each node's update, and per update its online
        holders, start and time to each threshold, the oldest update not at each threshold,
        the thresholds (read again after every change: the per-update arrays grow)."""
        return (
            self.version, self.known_online, self.start_times, self.reached, self._next,
            self.threshold_shares,
        )  # fmt: skip

    # --- the compiled exact core ------------------------------------------------------------

    def exact_support(self, run: ExactRun) -> ExactSupport:
        """The compiled core carries the broadcast's updates in gossip messages and merges
        them with :func:`adopt` (``netsim.protocols.gossip_exact.deliver``)."""
        return ExactSupport(True, role="carried")

    def attach_core(self, core: Any) -> None:
        """The core's kernel merges the updates messages carry, with this broadcast's arrays
        and rows (:meth:`compiled_state`), and makes room in its rows before each event."""
        self._compiled = True
        core.carry(BROADCAST, lambda: (self.compiled_state(), self.rows.arrays, self.updates))
        core.on_room(self.rows.make_room)

    def _originate(self) -> None:
        candidates = self.origin_candidates()
        if candidates.size == 0:
            self.skipped += 1
            return
        origin = int(candidates[self._rng.integers(candidates.size)])
        update = self.updates
        if update >= self.known_online.size:
            self._grow_updates()
        self.origins.append(origin)
        self.start_times[update] = self.sim.env.now
        self.online_at_start.append(self.nodes.online_count)
        self._adopt(origin, update, -1, "origin")

    def _grow_updates(self) -> None:
        """Double the room for updates in the per-update arrays."""
        size = self.known_online.size
        known = np.zeros(2 * size, dtype=np.int64)
        starts = np.zeros(2 * size)
        reached = np.full((2 * size, len(self.thresholds)), math.nan)
        known[:size], starts[:size], reached[:size] = (
            self.known_online,
            self.start_times,
            self.reached,
        )
        self.known_online, self.start_times, self.reached = known, starts, reached

    def _on_join(self, node: int) -> None:
        self.known_online[: self.version[node] + 1] += 1
        self._check()

    def _on_leave(self, node: int) -> None:
        self.known_online[: self.version[node] + 1] -= 1
        self._check()

    def _check(self) -> None:
        coverage_check(
            self.known_online, self.start_times, self.reached, self._next,
            self.threshold_shares, self.updates, self.nodes.online_count, float(self.sim.env.now),
        )  # fmt: skip

    def finish(self) -> None:
        if self._round_adoptions is not None:
            self._round_adoptions.flush()
        self.rows.write()
        if self._compiled:  # the held updates, as the SimPy path's list would have them
            self._held[:] = self.version.tolist()  # type: ignore[index]
        online = max(self.nodes.online_count, 1)
        for k in range(self.updates):
            self.summary.append(
                k,
                self.origins[k],
                float(self.start_times[k]),
                self.online_at_start[k],
                *self.reached[k].tolist(),
                float(self.known_online[k]) / online,
            )

    # --- round mode (a compiled kernel: broadcast_round) ----------------------------------

    def round_exchange(
        self, initiators: np.ndarray, peers: np.ndarray, pull_lost: np.ndarray
    ) -> None:
        """One round's pushes and pulls (compiled, :func:`broadcast_round`: each adoption
        :func:`adopt`'s), then its adoptions logged and the coverage thresholds checked."""
        if self._rank_scratch.size != self.version.size:
            self._rank_scratch = np.zeros(self.version.size, dtype=np.int64)
        self.rows.make_room(2 * initiators.size)
        nodes = self.nodes
        pushed = broadcast_round(
            initiators, peers, pull_lost, float(self.sim.env.now), nodes.online,
            nodes.online_count, self.updates, self.compiled_state(), self.rows.arrays,
            self._rank_scratch,
        )  # fmt: skip
        columns = self.rows.take()
        if columns[0].size == 0:
            return
        assert self._round_adoptions is not None  # rounds mode
        self._round_adoptions.add(self.sim.env.now, columns, pushed)
        self._check()

    def round_tick(self, active: np.ndarray) -> None:
        return None

    @classmethod
    def summary_lines(cls, tables: Mapping[str, pd.DataFrame]) -> list[str]:
        """The median and largest time to reach each coverage threshold."""
        broadcasts = tables.get("broadcasts")
        if broadcasts is None or not len(broadcasts):
            return []
        lines = []
        for column in (c for c in broadcasts.columns if c.startswith("t") and c[1:2].isdigit()):
            reached = broadcasts[column].dropna()
            if reached.empty:
                lines.append(f"broadcast {column}: never reached in {len(broadcasts)} updates")
                continue
            lines.append(
                f"broadcast time to {column[1:]}% of online nodes: median "
                f"{format_duration(float(np.median(reached)))}, max "
                f"{format_duration(float(reached.max()))} "
                f"({len(reached)}/{len(broadcasts)} updates)"
            )
        return lines


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
