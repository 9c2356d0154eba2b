"""Parameter sweeps: a grid over scenario keys × repetitions, or a list of runs each with its own
overrides and seed, run locally or on Dask."""

from netsim.sweep.execute import DaskCluster, ProcessPool, SweepResult, run_sweep
from netsim.sweep.spec import (
    PlannedRun,
    SweepPlan,
    SweepPoint,
    SweepSpec,
    plan_points,
    plan_sweep,
    point_seed,
)

__all__ = [
    "DaskCluster",
    "PlannedRun",
    "ProcessPool",
    "SweepPlan",
    "SweepPoint",
    "SweepResult",
    "SweepSpec",
    "plan_points",
    "plan_sweep",
    "point_seed",
    "run_sweep",
]
