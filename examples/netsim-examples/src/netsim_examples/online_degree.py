"""An observer: how many online neighbours the online nodes have.

Every ``every`` seconds (and at the end of the run) it writes one row of ``online_degree``: the
online nodes, and the mean and smallest number of online neighbours among them. It reads the
node states and the topology of the transport it is wired to (``uses: {transport: ...}``).
Its observations are SimPy events that read the node states, so it can run beside the compiled
exact core (``exact_support``): a run with it stays compiled.
"""

from __future__ import annotations

import numpy as np

from netsim.api import BuildContext, ExactRun, ExactSupport, Observer, ObserverConfig
from netsim.log import F64, I64, TableSchema

DEGREE_TABLE = TableSchema(
    name="online_degree",
    columns=(("time", F64), ("online", I64), ("mean_degree", F64), ("min_degree", I64)),
    description="Online nodes and their online neighbours, every `every` seconds.",
    role="samples",
    time="time",
)


class OnlineDegree(Observer):
    """Online degree of the online nodes at fixed times."""

    Config = ObserverConfig  # every
    tables = (DEGREE_TABLE,)

    def __init__(self, config: ObserverConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        assert ctx.network is not None
        topology = ctx.network.topology
        self.sources = np.repeat(np.arange(topology.n), topology.degrees())
        self.targets = np.concatenate([topology.neighbours(i) for i in range(topology.n)])
        self.table = ctx.table(DEGREE_TABLE)

    def exact_support(self, run: ExactRun) -> ExactSupport:
        return ExactSupport(True, role="beside")

    def observe(self) -> None:
        network, sim = self.ctx.network, self.ctx.sim
        assert network is not None and sim is not None
        online = network.nodes.online
        live = online[self.sources] & online[self.targets]
        degree = np.bincount(self.sources[live], minlength=online.size)[online]
        mean = float(degree.mean()) if degree.size else float("nan")
        self.table.append(sim.now, int(online.sum()), mean, int(degree.min(initial=0)))
