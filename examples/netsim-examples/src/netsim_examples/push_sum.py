"""Push-sum averaging (Kempe, Dobra, Gehrke 2003) as a gossip application of netsim.

Every node i holds a sum s_i (its initial value x_i) and a weight w_i (1); its estimate of the
network's average is s_i / w_i. In an exchange a node keeps half of its pair and sends the
other half; the receiver adds what it gets. Sum and weight are conserved over the nodes and
the messages in flight, so the estimates converge to the average of the initial values (a
message lost in transit takes its mass with it: with churn, the estimates drift).

In netsim's push-pull gossip the pull answer carries half of the peer's pair back, so every
exchange halves both pairs once. Round mode runs the same rule in one compiled kernel per
round (:func:`push_sum_round`, the round-kernel form of ``docs/components.md``).

Table ``push_sum_error`` (every ``sample_every``): the largest and the mean absolute error of
the online nodes' estimates against the true average of all initial values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from numba import njit
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


@njit(cache=True)
def push_sum_round(
    initiators: np.ndarray,
    peers: np.ndarray,
    pull_lost: np.ndarray,
    sums: np.ndarray,
    weights: np.ndarray,
    answers: np.ndarray,
) -> None:
    """One round of push-sum, in place, in the order netsim's rounds follow
    (``netsim.protocols.rounds``): initiator k sends half of its pair as it stood at the start
    of the round to ``peers[k]`` (so it keeps half), and the pushes are added in the order of
    k; then every peer whose answer to initiator k is not lost sends it a share of its pair
    as it stood after the pushes — its r-th answer of the round (r = 0, 1, …) carries
    2^-(r+1) of the pair, and it keeps 2^-answers — and the initiators add what they get.
    ``answers`` is scratch indexed by node, all zero on entry and on return.

    Every halving is a multiplication by a power of two, exact in floating point, and each
    node's additions happen in the same order as in the batched form (pushes merged in
    batches by rank): the tables are those of the batched form, bit for bit
    (``tests/test_components.py`` checks the kernel against a numpy statement of it).
    """
    m = initiators.size
    sent_sums = np.empty(m)
    sent_weights = np.empty(m)
    for k in range(m):
        node = initiators[k]
        sent_sums[k] = sums[node] * 0.5
        sent_weights[k] = weights[node] * 0.5
    for k in range(m):
        node = initiators[k]
        sums[node] *= 0.5
        weights[node] *= 0.5
    for k in range(m):
        sums[peers[k]] += sent_sums[k]
        weights[peers[k]] += sent_weights[k]
    # the answers: shares of the pairs after the pushes
    every_answer = pull_lost.size == 0
    for k in range(m):
        if every_answer or not pull_lost[k]:
            peer = peers[k]
            share = 0.5 ** (answers[peer] + 1)
            sent_sums[k] = sums[peer] * share
            sent_weights[k] = weights[peer] * share
            answers[peer] += 1
    for k in range(m):
        peer = peers[k]
        if answers[peer] > 0:
            kept = 0.5 ** answers[peer]
            sums[peer] *= kept
            weights[peer] *= kept
            answers[peer] = 0
    for k in range(m):
        if every_answer or not pull_lost[k]:
            sums[initiators[k]] += sent_sums[k]
            weights[initiators[k]] += sent_weights[k]


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
        self._answers = np.zeros(ctx.nodes, dtype=np.int64)  # round scratch: answers per node
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

    # --- round mode: the same rule in one compiled kernel ----------------------------------

    def round_exchange(
        self, initiators: np.ndarray, peers: np.ndarray, pull_lost: np.ndarray
    ) -> None:
        """One round's pushes and pulls (:func:`push_sum_round`)."""
        push_sum_round(initiators, peers, pull_lost, self.sums, self.weights, self._answers)

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
