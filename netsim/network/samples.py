"""The ``samples`` observer: the state of the whole system at fixed times (the ``samples``
table every ``metrics.sample_every``, and at the end of the run)."""

from __future__ import annotations

from typing import ClassVar

from netsim.contracts import BuildContext, ExactRun, ExactSupport, Observer, ObserverConfig
from netsim.log import F64, I64, TableSchema

SAMPLES_TABLE = TableSchema(
    name="samples",
    columns=(
        ("time", F64),
        ("online", I64),
        ("gossip_active", I64),
        ("messages_sent", I64),
        ("messages_delivered", I64),
        ("messages_lost", I64),
        ("gossip_exchanges", I64),
        ("churn_transitions", I64),
    ),
    description=(
        "System state every metrics.sample_every (and at the end): online nodes, nodes taking "
        "part in gossip, and cumulative counters of messages and churn transitions."
    ),
    role="samples",
    time="time",
)


class SystemSampler(Observer):
    """Online nodes, the gossip engine's active nodes and exchanges, the transport's message
    counters and the churn transitions so far: one ``samples`` row per observation. Its gossip
    engine and transport are the ones it is wired to (``uses``; by default the ``gossip`` and
    ``links`` sections); without a gossip engine the gossip columns are 0."""

    Config = ObserverConfig
    tables = (SAMPLES_TABLE,)
    optional: ClassVar[dict[str, str]] = {  # type: ignore[assignment]
        "gossip": "its active nodes and exchanges are sampled"
    }

    def __init__(self, config: ObserverConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        assert ctx.sim is not None and ctx.network is not None and ctx.node_states is not None
        self.sim, self.network, self.nodes = ctx.sim, ctx.network, ctx.node_states
        self.churn = ctx.churn
        self.gossip = ctx.find("gossip")
        self.table = ctx.table(SAMPLES_TABLE)

    def exact_support(self, run: ExactRun) -> ExactSupport:
        """Beside the compiled core: its observations are SimPy events, and the counters and
        flags it reads are brought up to date before each."""
        return ExactSupport(True, role="beside")

    def observe(self) -> None:
        network, gossip, churn = self.network, self.gossip, self.churn
        self.table.append(
            self.sim.now,
            self.nodes.online_count,
            gossip.active_count if gossip is not None else 0,
            network.sent,
            network.delivered,
            network.lost,
            gossip.exchanges if gossip is not None else 0,
            churn.transitions_applied if churn is not None else 0,
        )
