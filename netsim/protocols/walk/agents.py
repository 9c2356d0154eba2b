"""The trivial walk agent: it carries nothing and counts visits per node (Hegedűs et al. 2016
§5 measure the walk itself, not what it carries)."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from netsim.contracts import BuildContext, ComponentConfig, ExactRun, ExactSupport, WalkAgent
from netsim.log import I32, I64, TableSchema
from netsim.sim import Simulation

VISITS_TABLE = TableSchema(
    name="walk_visits",
    columns=(("node", I32), ("visits", I64)),
    description="Visits per node counted by the visit_counter agent (written at the end).",
    role="static",
)


class VisitCounter(WalkAgent):
    """The trivial agent: the walk carries nothing; visits are counted per node."""

    class Config(ComponentConfig):
        kind: Literal["visit_counter"] = "visit_counter"

    tables = (VISITS_TABLE,)

    def __init__(self, sim: Simulation, n: int) -> None:
        self.sim = sim
        self.visits = np.zeros(n, dtype=np.int64)

    @classmethod
    def build(cls, config: Config, ctx: BuildContext) -> VisitCounter:
        assert ctx.sim is not None
        return cls(ctx.sim, ctx.nodes)

    def exact_support(self, run: ExactRun) -> ExactSupport:
        """Beside the compiled core: the walk service's Python part calls it, and it has no
        events of its own."""
        return ExactSupport(True, role="beside")

    def initial_state(self) -> None:
        return None

    def visit(self, node: int, state: Any, steps: int, walk: int, now: float) -> None:
        """Count the visit (compiled twin, in the walk's step:
        :func:`netsim.protocols.walk.steps.arrive`)."""
        self.visits[node] += 1
        return state

    def finish(self) -> None:
        self.sim.log.table(VISITS_TABLE).extend([range(self.visits.size), self.visits.tolist()])
