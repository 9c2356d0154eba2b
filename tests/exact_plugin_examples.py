"""Two plug-in observers for ``tests/test_exact_plugins.py`` and ``docs/components.md``
(Compiled forms): one that answers :meth:`~netsim.api.Component.exact_support` and keeps a
run on the compiled exact core, and one that does not, so the run falls back to SimPy and
says why."""

from __future__ import annotations

from netsim.api import ExactRun, ExactSupport, Observer, ObserverConfig
from netsim.log import F64, I64, TableSchema

TRAFFIC_TABLE = TableSchema(
    name="traffic",
    columns=(("time", F64), ("sent", I64), ("lost", I64)),
    description="Messages sent and lost so far, every `every` seconds.",
    role="samples",
    time="time",
)


class Traffic(Observer):
    """The transport's message counters at fixed times. Its observations are SimPy events,
    and the compiled core brings the counters up to date before each: it runs beside the
    core."""

    Config = ObserverConfig
    tables = (TRAFFIC_TABLE,)

    def exact_support(self, run: ExactRun) -> ExactSupport:
        return ExactSupport(True, role="beside")

    def observe(self) -> None:
        network, sim = self.ctx.network, self.ctx.sim
        assert network is not None and sim is not None
        self.ctx.table(TRAFFIC_TABLE).append(sim.now, network.sent, network.lost)


class PlainTraffic(Observer):
    """The same counters, from an observer that does not say it can run beside the core."""

    Config = ObserverConfig
    tables = (TRAFFIC_TABLE,)

    def observe(self) -> None:
        network, sim = self.ctx.network, self.ctx.sim
        assert network is not None and sim is not None
        self.ctx.table(TRAFFIC_TABLE).append(sim.now, network.sent, network.lost)
