"""Gossip learning (Hegedűs, Berta, Jelasity 2016, Alg. 1; Ormándi, Hegedűs, Jelasity 2013).

Every Δ each online node sends its current model to a random online neighbour; the receiver
updates the model with its own record (eq. 8, through the same
:class:`~netsim.algorithms.dpsgd.sgd.SGDAgent` as the walks) and keeps it as its current
model. It is push-only gossip
(:class:`~netsim.protocols.gossip.PushPullGossip` with ``pull=False``), so timing, churn and
transfer times are those of the network: a model of K·d weights is sent as 8·K·d bytes.

With N nodes there are N models in flight, each a walk of its own — and every one of them
spends the budgets of the records it visits in the same per-record accountant, which is why
the paper argues for a single walk under differential privacy (§3.1).
"""

from __future__ import annotations

from typing import Any

from netsim.algorithms.dpsgd.sgd import ModelState, SGDAgent
from netsim.api import BuildContext, ComponentConfig, NetworkProtocol
from netsim.distributions import PositiveDuration
from netsim.network.links import Transfer
from netsim.protocols.gossip import PushPullGossip

#: The walk id gossip-learning visits are logged with (models are not walks).
GOSSIP_LEARNING_WALK = -1


class GossipLearningRule:
    """Alg. 1 as a push-only gossip rule: a node's value is its current model."""

    def __init__(self, agent: SGDAgent, n: int) -> None:
        self.agent = agent
        self.models: list[ModelState] = [agent.initial_state()] * n

    def outgoing(self, node: int) -> ModelState:
        return self.models[node]

    def incoming(self, node: int, value: Any, sender: int, transfer: Transfer) -> None:
        """The received model, updated with ``node``'s record, becomes ``node``'s model."""
        self.models[node] = self.agent.visit(
            node, value, 0, GOSSIP_LEARNING_WALK, self.agent.sim.now
        )

    def model_bytes(self) -> float:
        """The size of one model message: 8 bytes per weight."""
        return 8.0 * self.models[0].weights.size


class GossipLearningConfig(ComponentConfig):
    """Gossip learning (Hegedűs et al. Alg. 1): every period each online node sends its model
    to a random online neighbour, which updates it with its record and keeps it."""

    period: PositiveDuration


class GossipLearning(NetworkProtocol):
    """The ``gossip_learning`` section: its own push-only gossip carrying the models."""

    Config = GossipLearningConfig
    requires = {"learning": "data set, model, privacy budget"}  # noqa: RUF012

    def __init__(self, config: GossipLearningConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        assert ctx.sim is not None and ctx.network is not None
        self.models = GossipLearningRule(ctx.require("learning"), ctx.nodes)
        self.engine = PushPullGossip(
            ctx.sim,
            ctx.network,
            period=config.period,
            message_size=self.models.model_bytes(),
            pull=False,
            name=ctx.key,
        )
        self.engine.register(self.models)

    def start(self) -> None:
        self.engine.start()
