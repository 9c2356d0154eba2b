"""A walk agent that finds the largest value held by any node.

Every node holds a value drawn uniformly from [0, 1); the walk carries the largest value it
has seen. The table ``max_value_walk`` records, every ``record_every`` steps, how far the
carried maximum still is from the true maximum: a random walk's cover time made visible.
"""

from __future__ import annotations

from pydantic import Field

from netsim.api import BuildContext, ComponentConfig, WalkAgent
from netsim.log import F64, I64, TableSchema

MAX_TABLE = TableSchema(
    name="max_value_walk",
    columns=(("time", F64), ("steps", I64), ("carried", F64), ("gap", F64)),
    description=(
        "Every record_every steps of the walk: the largest value it has seen and its gap to "
        "the largest value of any node."
    ),
    role="samples",
    time="time",
)


class MaxValueConfig(ComponentConfig):
    record_every: int = Field(default=10, ge=1)


class MaxValue(WalkAgent):
    """The walk's state is the largest node value it has seen (a float)."""

    Config = MaxValueConfig
    tables = (MAX_TABLE,)

    def __init__(self, config: MaxValueConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.values = ctx.stream("values").random(ctx.nodes)
        self.largest = float(self.values.max())
        self.table = ctx.table(MAX_TABLE)

    def initial_state(self) -> float:
        return -1.0

    def visit(self, node: int, state: float, steps: int, walk: int, now: float) -> float:
        carried = max(state, float(self.values[node]))
        if steps % self.config.record_every == 0:
            self.table.append(now, steps, carried, self.largest - carried)
        return carried
