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
import pandas as pd
from numba import njit
from pydantic import Field, field_validator

from netsim.contracts import (
    BuildContext,
    ComponentConfig,
    Curve,
    FigureSpec,
    GossipApplication,
    Section,
)
from netsim.distributions import Duration, PositiveDuration
from netsim.kernel_cache import guard_kernels
from netsim.log import F64, I32, I64, STR, EventTable, TableSchema, string_runs
from netsim.network.links import Network, Transfer
from netsim.protocols.gossip import PULL, PUSH
from netsim.sim import Simulation
from netsim.units import format_duration

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
    initiators: np.ndarray,
    peers: np.ndarray,
    pull_lost: np.ndarray,
    version: np.ndarray,
    known_online: np.ndarray,
    rank: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """One round of push-pull for the broadcast, in place, with the semantics of
    :mod:`netsim.protocols.rounds`: initiator k pushes the newest update it held at the start
    of the round to ``peers[k]``; then every initiator whose pull answer was not lost
    (``pull_lost``) takes its peer's as it stood after all pushes. A node adopts a newer
    update and so holds every update up to it: ``known_online`` (online holders per update;
    every node in an exchange is online) counts it for each.

    Pushes are merged in batches: the first push to every target in the round's order, then
    the second, and so on (a push counts only if it was newer than the target's update at the
    start of the round), so the adoptions come out in the order a batch-by-batch merge gives.
    ``rank`` is a zeroed scratch array indexed by node id (left zeroed). Returns the
    adoptions — node, update, previous update, sender — pushes first, and how many were pushes.
    """
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
    nodes = np.empty(2 * m, dtype=np.int64)
    updates = np.empty(2 * m, dtype=np.int64)
    previous = np.empty(2 * m, dtype=np.int64)
    senders = np.empty(2 * m, dtype=np.int64)
    count = 0
    for k in order:
        count = _adopt_newer(
            peers[k], sent[k], initiators[k], version, known_online, nodes, updates, previous,
            senders, count,
        )  # fmt: skip
    pushed = count
    for k in range(m):  # each peer answers with its update after all pushes
        sent[k] = version[peers[k]]
    every_answer = pull_lost.size == 0
    for k in range(m):
        if every_answer or not pull_lost[k]:
            count = _adopt_newer(
                initiators[k], sent[k], peers[k], version, known_online, nodes, updates,
                previous, senders, count,
            )  # fmt: skip
    return nodes[:count], updates[:count], previous[:count], senders[:count], pushed


@njit(cache=True)
def _adopt_newer(
    node: int,
    update: int,
    sender: int,
    version: np.ndarray,
    known_online: np.ndarray,
    nodes: np.ndarray,
    updates: np.ndarray,
    previous: np.ndarray,
    senders: np.ndarray,
    count: int,
) -> int:
    """``node`` (online) adopts ``update`` if it is newer than its own, recorded at row
    ``count``; the next free row."""
    held = version[node]
    if update <= held:
        return count
    version[node] = update
    for k in range(held + 1, update + 1):  # it now holds held+1 .. update
        known_online[k] += 1
    nodes[count], updates[count], previous[count], senders[count] = node, update, held, sender
    return count + 1


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
    section = Section("broadcast", 50)
    figures = (BROADCAST_FIGURE,)
    requires = {"gossip": "it spreads updates by gossip"}  # noqa: RUF012
    #: In rounds a compiled kernel does the round's exchanges (round_exchange, round_tick).
    round_form = "fused"
    exact_form = "broadcast"

    def __init__(
        self,
        sim: Simulation,
        network: Network,
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
        # rounds mode gathers its adoptions as arrays and writes them in blocks
        self._round_adoptions = None if self._held is not None else RoundAdoptions(self.adoptions)
        self.summary = sim.log.table(broadcasts_table(self.thresholds))
        #: The compiled exact core when it runs the adoptions (``netsim.protocols.exact_core``).
        self._core: Any = None
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
        if self._core is not None:  # the same adoption, with the compiled core's rows
            self._core.adopt(node, update, sender, VIA_LABELS.index(via))
            return
        previous = int(self.version[node])
        self.version[node] = update
        if self._round_adoptions is not None:
            row = np.array((node, update, previous, sender), dtype=np.int64)
            self._round_adoptions.add(
                self.sim.env.now, (row[0:1], row[1:2], row[2:3], row[3:4]), 0, origin=True
            )
        else:
            self._held[node] = update  # type: ignore[index]
            self.adoptions.append(self.sim.env.now, node, update, previous, sender, via)
        if not self.nodes.is_online[node]:
            return  # no online holder more: no coverage changes
        if update == previous + 1:  # the usual step: one count, without a slice
            self.known_online[update] += 1
        else:
            self.known_online[previous + 1 : update + 1] += 1
        # Only an update whose count just grew can newly reach a threshold: the others'
        # counts and the online count are as at the last check (every join and leave
        # checks again), so the check would find nothing (docs/performance.md: one adoption in 20
        # messages, and a full check was a third of the adoption's cost).
        for k in self._next.tolist():
            if previous < k <= update:
                self._check()
                return

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
            self.known_online, self.start_times, self.reached
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
        """One round's pushes and pulls (compiled, :func:`broadcast_round`), then its
        adoptions logged and the coverage thresholds checked."""
        if self._rank_scratch.size != self.version.size:
            self._rank_scratch = np.zeros(self.version.size, dtype=np.int64)
        nodes, updates, previous, senders, pushed = broadcast_round(
            initiators, peers, pull_lost, self.version, self.known_online, self._rank_scratch
        )
        if nodes.size == 0:
            return
        assert self._round_adoptions is not None  # rounds mode
        self._round_adoptions.add(self.sim.env.now, (nodes, updates, previous, senders), pushed)
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
