"""The ideal walk: a walk that never fails (for learning experiments, Hegedűs et al. §6)."""

from __future__ import annotations

from netsim.contracts import BuildContext, Walk, WalkAgent
from netsim.protocols.walk.config import IdealWalkConfig
from netsim.protocols.walk.tables import SAMPLES_TABLE, STEPS_TABLE, WALK_FIGURE
from netsim.sim import Simulation


class IdealWalk(Walk):
    """A walk that never fails (for learning experiments, Hegedűs et al. §6).

    Every ``step_time`` it moves to the next node: uniform with replacement, or following
    random permutations of the nodes, a new one each time all nodes were visited (without
    replacement, §3.1). It ignores churn and the network.
    """

    figures = (WALK_FIGURE,)

    Config = IdealWalkConfig
    tables = (STEPS_TABLE, SAMPLES_TABLE)

    def __init__(
        self,
        sim: Simulation,
        n: int,
        agent: WalkAgent,
        *,
        step_time: float,
        replacement: bool = True,
        sample_every: float = 60.0,
        name: str = "walk",
    ) -> None:
        self.sim = sim
        self.n = n
        self.agent = agent
        self.step_time = step_time
        self.replacement = replacement
        self._rng = sim.streams.get(f"{name}.ideal")
        self._order: list[int] = []
        self.state = agent.initial_state()
        self.steps = 0
        self.steps_table = sim.log.table(STEPS_TABLE)
        self.samples_table = sim.log.table(SAMPLES_TABLE)
        sim.every(step_time, self._step)
        sim.every(sample_every, self._sample, first=0.0)

    @classmethod
    def build(cls, config: IdealWalkConfig, ctx: BuildContext) -> IdealWalk:
        assert ctx.sim is not None
        return cls(
            ctx.sim,
            ctx.nodes,
            ctx.require("walk.agent"),
            step_time=config.step_time,
            replacement=config.sampling == "with_replacement",
            sample_every=config.sample_every or ctx.metrics.sample_every,
            name=ctx.key,
        )

    def next_node(self) -> int:
        """The next node to visit."""
        if self.replacement:
            return int(self._rng.integers(self.n))
        if not self._order:
            self._order = self._rng.permutation(self.n).tolist()[::-1]
        return self._order.pop()

    def _step(self) -> None:
        node = self.next_node()
        self.steps += 1
        now = self.sim.env.now
        self.state = self.agent.visit(node, self.state, self.steps, 0, now)
        self.steps_table.append(now, 0, self.steps, node)

    def _sample(self) -> None:
        self.samples_table.append(self.sim.env.now, 1, 0, 0, self.steps)
