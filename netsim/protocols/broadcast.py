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
from pydantic import Field, field_validator

from netsim.contracts import BuildContext, ComponentConfig, Curve, FigureSpec, GossipApplication
from netsim.distributions import Duration, PositiveDuration
from netsim.log import F64, I32, I64, STR, TableSchema
from netsim.network.links import Network, Transfer
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
        Curve("broadcasts", f"t{share}", "round", f"time to {share}% (s)")
        for share in (50, 90, 99)
    ),
    xlabel="update",
)


class Broadcast(GossipApplication):
    """The broadcast application of push-pull gossip (exact and round mode)."""

    Config = BroadcastConfig
    figures = (BROADCAST_FIGURE,)
    requires = {"gossip": "it spreads updates by gossip"}  # noqa: RUF012
    #: In rounds the engine merges its values in batches (round_values … round_tick).
    round_form = "batched"

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
        self._rng = sim.streams.get(f"{name}.origin")
        # updates start at nodes that take part in gossip, not at a just-rejoined node
        self.engine = engine
        self.known_online = np.zeros(64, dtype=np.int64)  # online holders per update
        self.origins: list[int] = []
        self.starts: list[float] = []
        self.online_at_start: list[int] = []
        self.reached: list[list[float]] = []  # per update, time to each threshold
        self._next = [0] * len(self.thresholds)  # oldest update not yet at threshold j
        self.skipped = 0
        self.adoptions = sim.log.table(ADOPTIONS_TABLE)
        self.summary = sim.log.table(broadcasts_table(self.thresholds))
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
        return len(self.starts)

    # --- GossipRule ------------------------------------------------------------------------

    def outgoing(self, node: int) -> int:
        return int(self.version[node])

    def incoming(self, node: int, value: Any, sender: int, transfer: Transfer) -> None:
        if value > self.version[node]:
            self._adopt(node, int(value), sender, transfer.kind)

    # --- internals -------------------------------------------------------------------------

    def _adopt(self, node: int, update: int, sender: int, via: str) -> None:
        previous = int(self.version[node])
        self.version[node] = update
        if self.nodes.online[node]:
            self.known_online[previous + 1 : update + 1] += 1
        self.adoptions.append(self.sim.env.now, node, update, previous, sender, via)
        self._check()

    def _originate(self) -> None:
        candidates = self.origin_candidates()
        if candidates.size == 0:
            self.skipped += 1
            return
        origin = int(candidates[self._rng.integers(candidates.size)])
        update = self.updates
        if update >= self.known_online.size:
            grown = np.zeros(2 * self.known_online.size, dtype=np.int64)
            grown[: self.known_online.size] = self.known_online
            self.known_online = grown
        self.origins.append(origin)
        self.starts.append(self.sim.env.now)
        self.online_at_start.append(self.nodes.online_count)
        self.reached.append([math.nan] * len(self.thresholds))
        self._adopt(origin, update, -1, "origin")

    def _on_join(self, node: int) -> None:
        self.known_online[: self.version[node] + 1] += 1
        self._check()

    def _on_leave(self, node: int) -> None:
        self.known_online[: self.version[node] + 1] -= 1
        self._check()

    def _check(self) -> None:
        online = self.nodes.online_count
        if online == 0:
            return
        now = self.sim.env.now
        for j, threshold in enumerate(self.thresholds):
            k = self._next[j]
            # updates reach a threshold in order (coverage is non-increasing in k)
            while k < self.updates and self.known_online[k] >= threshold * online - 1e-9:
                self.reached[k][j] = now - self.starts[k]
                k += 1
            self._next[j] = k

    def finish(self) -> None:
        online = max(self.nodes.online_count, 1)
        for k in range(self.updates):
            self.summary.append(
                k,
                self.origins[k],
                self.starts[k],
                self.online_at_start[k],
                *self.reached[k],
                float(self.known_online[k]) / online,
            )

    # --- RoundRule (round-based gossip) ----------------------------------------------------

    def round_values(self, nodes: np.ndarray) -> tuple[np.ndarray, ...]:
        return (self.version[nodes],)

    def round_relevant(self, senders: np.ndarray, targets: np.ndarray) -> np.ndarray:
        return self.version[senders] > self.version[targets]

    def round_merge(
        self, targets: np.ndarray, values: tuple[np.ndarray, ...], senders: np.ndarray, via: str
    ) -> None:
        (incoming,) = values
        newer = incoming > self.version[targets]
        targets, incoming, senders = targets[newer], incoming[newer], senders[newer]
        if targets.size == 0:
            return
        previous = self.version[targets]
        self.version[targets] = incoming
        # every target is online (it just took part in an exchange): it now holds updates
        # previous+1 .. incoming; add that to the per-update counts with a difference array
        diff = np.zeros(self.known_online.size + 1, dtype=np.int64)
        np.add.at(diff, previous + 1, 1)
        np.add.at(diff, incoming + 1, -1)
        self.known_online += np.cumsum(diff[:-1])
        now = self.sim.env.now
        self.adoptions.extend(
            [
                [now] * targets.size,
                targets.tolist(),
                incoming.tolist(),
                previous.tolist(),
                senders.tolist(),
                [via] * targets.size,
            ]
        )
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

