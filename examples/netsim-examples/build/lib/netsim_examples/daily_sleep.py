"""A churn model: every node sleeps (is offline) for a few hours each day.

Node i goes offline every day at its own bedtime, drawn once uniformly in
[bedtime − spread/2, bedtime + spread/2), and comes back ``sleep`` later. The schedule is built
before the run as one array of transitions, like every netsim churn model.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field, model_validator

from netsim.api import ChurnModel, ComponentConfig
from netsim.distributions import Duration, PositiveDuration
from netsim.network.churn import ChurnSchedule, schedule_from_intervals

DAY = 86_400.0


class DailySleepConfig(ComponentConfig):
    bedtime: Duration = 23 * 3600.0
    spread: Duration = 2 * 3600.0
    sleep: PositiveDuration = 8 * 3600.0
    awake_fraction: float = Field(default=1.0, gt=0.0, le=1.0)

    @model_validator(mode="after")
    def _fits_in_a_day(self) -> DailySleepConfig:
        if self.sleep >= DAY:
            raise ValueError("sleep must be shorter than a day")
        return self


class DailySleep(ChurnModel):
    """Nodes offline for ``sleep`` every day from their own bedtime; a fraction
    ``1 − awake_fraction`` of the nodes never comes online at all."""

    Config = DailySleepConfig

    def schedule(self, nodes: int, horizon: float) -> ChurnSchedule:
        config = self.config
        rng = self.ctx.stream()
        bedtime = config.bedtime + rng.uniform(-config.spread / 2, config.spread / 2, nodes)
        present = rng.random(nodes) < config.awake_fraction
        days = int(np.ceil(horizon / DAY)) + 1
        # online from each wake-up to the next bedtime: [b + d·DAY − DAY + sleep, b + d·DAY)
        day = np.arange(days, dtype=float)
        starts = (bedtime[:, None] + (day - 1) * DAY + config.sleep).ravel()
        ends = (bedtime[:, None] + day * DAY).ravel()
        who = np.repeat(np.arange(nodes), days)
        keep = present[who]
        return schedule_from_intervals(nodes, who[keep], starts[keep], ends[keep], horizon)
