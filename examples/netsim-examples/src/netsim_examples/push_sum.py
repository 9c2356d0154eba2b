"""Push-sum averaging (Kempe, Dobra, Gehrke 2003) as a gossip application of netsim.

Every node i holds a sum s_i (its initial value x_i) and a weight w_i (1); its estimate of the
network's average is s_i / w_i. In an exchange a node keeps half of its pair and sends the
other half; the receiver adds what it gets. Sum and weight are conserved over the nodes and
the messages in flight, so the estimates converge to the average of the initial values (a
message lost in transit takes its mass with it: with churn, the estimates drift).

In netsim's push-pull gossip the pull answer carries half of the peer's pair back, so every
exchange halves both pairs once. Round mode implements the same rule vectorised.

Table ``push_sum_error`` (every ``sample_every``): the largest and the mean absolute error of
the online nodes' estimates against the true average of all initial values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field

from netsim.api import BuildContext, ComponentConfig, Curve, FigureSpec, GossipApplication
from netsim.distributions import PositiveDuration
from netsim.log import F64, I64, TableSchema

ERROR_TABLE = TableSchema(
    name="push_sum_error",
    columns=(("time", F64), ("online", I64), ("max_error", F64), ("mean_error", F64)),
    description=(
        "Push-sum estimates every sample_every: online nodes, the largest and the mean "
        "absolute error |s_i/w_i − x̄| over the online nodes."
    ),
    role="samples",
    time="time",
)

#: The figure ``netsim report`` draws of the table (without it, a generic one).
ERROR_FIGURE = FigureSpec(
    file="push_sum_error.png",
    caption="push-sum error over time",
    sentence="The largest and the mean absolute error of the online nodes' estimates.",
    title="Push-sum averaging: error",
    panels=(
        Curve("push_sum_error", "max_error", "time", "largest error (value units)"),
        Curve("push_sum_error", "mean_error", "time", "mean error (value units)"),
    ),
)


class PushSumConfig(ComponentConfig):
    """Initial values uniform in [low, high); the error sampled every ``sample_every``."""

    low: float = Field(default=0.0, allow_inf_nan=False)
    high: float = Field(default=1.0, allow_inf_nan=False)
    sample_every: PositiveDuration = 1.0


class PushSum(GossipApplication):
    """Push-sum over the scenario's push-pull gossip, in exact and round mode."""

    Config = PushSumConfig
    tables = (ERROR_TABLE,)
    figures = (ERROR_FIGURE,)

    @classmethod
    def summary_lines(cls, tables: Mapping[str, pd.DataFrame]) -> list[str]:
        """The final error, for the summary ``netsim run`` prints."""
        errors = tables.get("push_sum_error")
        if errors is None or not len(errors):
            return []
        last = errors.iloc[-1]
        return [f"push-sum: largest error {last['max_error']:.3g} at the end"]

    def __init__(self, config: PushSumConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        values = ctx.stream("values").uniform(config.low, config.high, ctx.nodes)
        self.truth = float(values.mean())
        self.sums = values.copy()
        self.weights = np.ones(ctx.nodes)
        self.table = ctx.table(ERROR_TABLE)

    def start(self) -> None:
        sim = self.ctx.sim
        assert sim is not None
        sim.every(self.config.sample_every, self.sample, first=0.0)

    # --- exact mode: a message carries half of the sender's pair ---------------------------

    def outgoing(self, node: int) -> tuple[float, float]:
        half = (self.sums[node] / 2, self.weights[node] / 2)
        self.sums[node], self.weights[node] = half
        return half

    def incoming(self, node: int, value: Any, sender: int, transfer: Any) -> None:
        s, w = value
        self.sums[node] += s
        self.weights[node] += w

    # --- round mode: the same rule on arrays ------------------------------------------------

    def round_values(self, nodes: np.ndarray) -> tuple[np.ndarray, ...]:
        # a node answering several pulls halves its pair once per message, in order: its
        # r-th message (r = 0, 1, …) carries 2^-(r+1) of the pair, and it keeps 2^-count
        order = np.argsort(nodes, kind="stable")
        sorted_nodes = nodes[order]
        first = np.r_[True, sorted_nodes[1:] != sorted_nodes[:-1]]
        starts = np.flatnonzero(first)
        rank = np.empty(nodes.size, dtype=np.int64)
        rank[order] = np.arange(nodes.size) - np.repeat(starts, np.diff(np.r_[starts, nodes.size]))
        share = 0.5 ** (rank + 1)
        sums, weights = self.sums[nodes] * share, self.weights[nodes] * share
        counts = np.bincount(nodes, minlength=self.sums.size)
        self.sums *= 0.5**counts
        self.weights *= 0.5**counts
        return sums, weights

    def round_relevant(self, senders: np.ndarray, targets: np.ndarray) -> np.ndarray:
        return np.ones(senders.size, dtype=bool)  # every exchange moves mass

    def round_merge(
        self, targets: np.ndarray, values: tuple[np.ndarray, ...], senders: np.ndarray, via: str
    ) -> None:
        sums, weights = values
        self.sums[targets] += sums
        self.weights[targets] += weights

    def round_tick(self, active: np.ndarray) -> None:
        return None

    # --- the error table --------------------------------------------------------------------

    def sample(self) -> None:
        sim = self.ctx.sim
        network = self.ctx.network
        assert sim is not None and network is not None
        online = network.nodes.online
        estimates = self.sums[online] / self.weights[online]
        error = np.abs(estimates - self.truth)
        self.table.append(
            sim.now,
            int(online.sum()),
            float(error.max()) if error.size else float("nan"),
            float(error.mean()) if error.size else float("nan"),
        )

    def finish(self) -> None:
        self.sample()
