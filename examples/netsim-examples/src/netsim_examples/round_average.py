"""A round learner: synchronous averaging (Jacobi iteration) over the overlay.

Every node holds a value, uniform in [0, 1). In each round every online node replaces its
value by the mean of its own and its online neighbours' values (all at once, from the values
of the previous round). Table ``round_average``: the spread (largest − smallest value) of the
online nodes after each round.
"""

from __future__ import annotations

import numpy as np

from netsim.api import BuildContext, RoundLearner, RoundsConfig
from netsim.log import F64, I64, TableSchema

SPREAD_TABLE = TableSchema(
    name="round_average",
    columns=(("round", I64), ("time", F64), ("online", I64), ("spread", F64)),
    description="After each round: online nodes and the spread of their values.",
    role="rounds",
    time="time",
    round="round",
)


class RoundAverageConfig(RoundsConfig):  # RoundsConfig: period, rounds
    pass


class RoundAverage(RoundLearner):
    """Synchronous neighbourhood averaging, one round every ``period``."""

    Config = RoundAverageConfig
    tables = (SPREAD_TABLE,)

    def __init__(self, config: RoundAverageConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.values = ctx.stream("values").random(ctx.nodes)
        self.table = ctx.table(SPREAD_TABLE)

    def round(self, t: int) -> None:
        network, sim = self.ctx.network, self.ctx.sim
        assert network is not None and sim is not None
        online = network.nodes.online
        topology = network.topology
        previous = self.values.copy()
        for node in np.flatnonzero(online):
            around = topology.neighbours(node)
            around = around[online[around]]
            self.values[node] = (previous[node] + previous[around].sum()) / (around.size + 1)
        spread = float(np.ptp(self.values[online])) if online.any() else float("nan")
        self.table.append(t, sim.now, int(online.sum()), spread)
