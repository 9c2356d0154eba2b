"""Parameter sweeps: a grid over scenario keys × repetitions, run locally or on Dask."""

from netsim.sweep.execute import DaskCluster, ProcessPool, SweepResult, run_sweep
from netsim.sweep.spec import PlannedRun, SweepPlan, SweepSpec, plan_sweep, point_seed

__all__ = [
    "DaskCluster",
    "PlannedRun",
    "ProcessPool",
    "SweepPlan",
    "SweepResult",
    "SweepSpec",
    "plan_sweep",
    "point_seed",
    "run_sweep",
]
