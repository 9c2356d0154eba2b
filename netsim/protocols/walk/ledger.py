"""The walk service's bookkeeping: which walks are alive, the exact time averages of their
number, event counts and the tables (Hegedűs et al. 2016 §5.2, Figs. 2–3; choice 2 of
:mod:`netsim.protocols.walk`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from netsim.lazy import lazy_module
from netsim.protocols.walk.tables import (
    ENDS_TABLE,
    RESTARTS_TABLE,
    SAMPLES_TABLE,
    STEPS_TABLE,
    SUMMARY_TABLE,
)
from netsim.protocols.walk.tokens import WalkToken
from netsim.sim import Simulation

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")


class WalkLedger:
    """The walks propagating and suspended, integrated exactly over every change, the event
    counts of the summary, and the service's event tables."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.propagating: dict[int, WalkToken] = {}
        self.suspended_count = 0
        self._area = 0.0
        self._area_zero = 0.0
        self._area_several = 0.0
        self._last_change = 0.0
        self.counts = {
            "steps": 0,
            "restarts": 0,
            "dropped": 0,
            "superseded": 0,
            "killed": 0,
            "abandoned": 0,
        }
        self.max_steps = 0
        log = sim.log
        self.steps_table = log.table(STEPS_TABLE)
        self.restarts_table = log.table(RESTARTS_TABLE)
        self.ends_table = log.table(ENDS_TABLE)
        self.samples_table = log.table(SAMPLES_TABLE)
        self.summary_table = log.table(SUMMARY_TABLE)

    def account(self) -> None:
        """Add the time since the last change to the integrals of the number of walks."""
        now = self.sim.env.now
        span = now - self._last_change
        alive = len(self.propagating)
        self._area += alive * span
        self._area_zero += span * (alive == 0)
        self._area_several += span * (alive > 1)
        self._last_change = now

    def set_alive(self, token: WalkToken, alive: bool) -> None:
        """``token`` starts or stops propagating (choice 2)."""
        self.account()
        if alive:
            self.propagating[token.walk] = token
        else:
            self.propagating.pop(token.walk, None)

    def step(self, now: float, walk: int, steps: int, node: int) -> None:
        """A walk made a step: counted, and logged (compiled twin, in the walk's step:
        :func:`netsim.protocols.walk.steps.arrive`)."""
        self.counts["steps"] += 1
        self.max_steps = max(self.max_steps, steps)
        self.steps_table.append(now, walk, steps, node)

    def end(self, token: WalkToken, node: int, reason: str) -> None:
        """``token`` stops for good at ``node`` (the reasons of the ends table)."""
        if token.status == "suspended":
            self.suspended_count -= 1
        self.set_alive(token, False)
        token.status = "ended"
        self.counts[reason] += 1
        self.ends_table.append(self.sim.env.now, node, token.walk, token.steps, reason)

    def sample(self) -> None:
        """One row of the samples table: the walks now, and the oldest propagating one."""
        oldest = max(self.propagating.values(), key=lambda t: (t.steps, -t.walk), default=None)
        self.samples_table.append(
            self.sim.env.now,
            len(self.propagating),
            self.suspended_count,
            oldest.walk if oldest is not None else -1,
            oldest.steps if oldest is not None else -1,
        )

    def mean_propagating(self) -> float:
        """Time average of the number of propagating walks from 0 until now (exact)."""
        self.account()
        return self._area / max(self.sim.env.now, 1e-300)

    def finish(self) -> None:
        """The last sample and the summary row."""
        mean = self.mean_propagating()
        duration = max(self.sim.env.now, 1e-300)
        self.sample()
        c = self.counts
        self.summary_table.append(
            mean,
            self._area_zero / duration,
            self._area_several / duration,
            c["steps"],
            c["restarts"],
            c["dropped"],
            c["superseded"],
            c["killed"],
            c["abandoned"],
            self.max_steps,
        )


def summary_lines(tables: Mapping[str, pd.DataFrame]) -> list[str]:
    """Mean concurrent walks, restarts and steps of a run's summary table."""
    lines: list[str] = []
    walk = tables.get("walk_summary")
    if walk is not None and len(walk):
        row = walk.iloc[0]
        lines.append(
            f"walks: mean {row['mean_propagating']:.3f} propagating, "
            f"{row['restarts']} restarts, {row['steps']} steps"
        )
    return lines
