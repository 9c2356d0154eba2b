"""A walk: Metropolis–Hastings over the overlay, so every node is visited equally often.

A simple random walk visits a node in proportion to its degree. The Metropolis–Hastings walk
(Metropolis et al. 1953; Hastings 1970) proposes a uniform neighbour j of the current node i
and moves there with probability min(1, deg(i) / deg(j)), else stays at i (the stay counts as
a visit). On a connected undirected overlay its stationary distribution is uniform over the
nodes, whatever the degrees.

Only a :class:`~netsim.api.Walk` chooses the next hop: the walk agent it carries
(``walk.agent``) is told of every visit and carries the walk's state, as with netsim's walks.
Like the ``ideal`` walk, it ignores churn and message delays: a step every ``step_time``.

Table ``mh_walk_steps``: every step's time, count, node and whether the proposal was taken.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from netsim.api import BuildContext, Walk, WalkConfig
from netsim.distributions import PositiveDuration
from netsim.log import F64, I64, TableSchema

STEPS_TABLE = TableSchema(
    name="mh_walk_steps",
    columns=(("time", F64), ("steps", I64), ("node", I64), ("accepted", I64)),
    description=(
        "Every step of the Metropolis-Hastings walk: its time, step count, the node it is at "
        "after the step, and 1 if it moved to the proposed neighbour (0 if it stayed)."
    ),
    role="events",
    time="time",
)


class MetropolisHastingsConfig(WalkConfig):  # WalkConfig: the agent key every walk has
    step_time: PositiveDuration = 1.0
    start: int = Field(default=0, ge=0)


class MetropolisHastingsWalk(Walk):
    """One walk from node ``start``, a step every ``step_time``, uniform in the long run."""

    Config = MetropolisHastingsConfig
    tables = (STEPS_TABLE,)

    @classmethod
    def check(cls, config: MetropolisHastingsConfig, scenario: Any) -> None:
        if config.start >= scenario.nodes:
            raise ValueError(
                f"walk.start ({config.start}) must be a node id below nodes ({scenario.nodes})"
            )

    def __init__(self, config: MetropolisHastingsConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        assert ctx.topology is not None
        self.agent = ctx.require("walk.agent")  # built before the walk
        self.topology = ctx.topology
        self.degrees = ctx.topology.degrees()
        self.rng = ctx.stream()
        self.node = config.start
        self.steps = 0
        self.state = self.agent.initial_state()
        self.table = ctx.table(STEPS_TABLE)

    def start(self) -> None:
        assert self.ctx.sim is not None
        self.ctx.sim.every(self.config.step_time, self.step)

    def step(self) -> None:
        here = self.node
        neighbours = self.topology.neighbours(here)
        accepted = 0
        if neighbours.size:
            there = int(neighbours[self.rng.integers(neighbours.size)])
            if self.rng.random() * self.degrees[there] < self.degrees[here]:
                self.node, accepted = there, 1
        self.steps += 1
        now = self.ctx.sim.now  # type: ignore[union-attr]
        self.state = self.agent.visit(self.node, self.state, self.steps, 0, now)
        self.table.append(now, self.steps, self.node, accepted)
