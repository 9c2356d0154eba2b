"""DP-SGD-5 over the real walk service with STUNner churn, next to the same run over an ideal
walk (Hegedűs et al. 2016: §5 and §6 together).

    python analysis/learning_service.py --reps 3 [--jobs 2 | --scheduler ADDRESS] [--out DIR]

Runs ``scenarios/learning/spambase-service-stunner.yaml`` and ``scenarios/learning/
spambase.yaml`` set to the same learning section (DP-SGD-5, the paper's L2 noise, local
normalisation) with and without replacement, seeds 1..reps. Each variant is a sweep of
:mod:`netsim.sweep` (one listed point per seed, run with exactly that seed) into
``<--out>/learning-service-<variant>/`` (default ``analysis/sweeps``; runs already complete
there are kept, so a rerun only draws). It draws
``analysis/figures/learning-service-vs-ideal.png`` from those run directories (accuracy
against walk steps, with Spambase's majority-class and centralised non-private accuracy
dashed; how many times each record was used) and prints the figures that matter: accuracy
beside those two yardsticks (principle 9 of ``docs/architecture.md``), restarts, concurrent
walks, refused visits.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from experiments import SweepRunner, add_runner_arguments, guarded, run_plan, runner_from

from netsim.analysis.figures import save_figure
from netsim.analysis.learning import curves_from_run, run_baselines
from netsim.analysis.runs import load_run
from netsim.errors import NetsimError
from netsim.plotting import pyplot
from netsim.sweep import SweepPlan, SweepPoint, plan_points

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "scenarios" / "learning"
OUT = REPO / "analysis" / "figures" / "learning-service-vs-ideal.png"
IDEAL = {"learning.algorithm": "dp-sgd-5", "learning.noise": "l2_paper"}
# label -> (sweep name, scenario file, overrides)
VARIANTS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "walk service, STUNner churn": (
        "learning-service-stunner", "spambase-service-stunner.yaml", {}
    ),
    "ideal walk, with replacement": (
        "learning-service-ideal-with-replacement", "spambase.yaml",
        {**IDEAL, "walk.sampling": "with_replacement"},
    ),
    "ideal walk, without replacement": (
        "learning-service-ideal-without-replacement", "spambase.yaml", IDEAL
    ),
}  # fmt: skip


def plan(label: str, reps: int) -> SweepPlan:
    """The sweep of one variant: its scenario with its overrides, seeds 1..reps."""
    name, file, overrides = VARIANTS[label]
    points = [SweepPoint(overrides, seed, label) for seed in range(1, reps + 1)]
    return plan_points(SCENARIOS / file, points, name=name)


def run_all(reps: int, runner: SweepRunner) -> dict[str, list[Path]]:
    """Run every variant with seeds 1..reps (complete runs are kept); their run directories."""
    plans = {label: plan(label, reps) for label in VARIANTS}  # all checked before any run
    runs: dict[str, list[Path]] = {}
    for label, sweep in plans.items():
        directories, failed = run_plan(sweep, runner)
        if failed:
            raise NetsimError(f"{label}: {failed} runs failed; run the same command to retry")
        runs[label] = directories
    return runs


def summarise(label: str, directories: list[Path]) -> dict[str, object]:
    """Mean figures over the runs of one variant."""
    rows = []
    for directory in directories:
        tables = load_run(directory, parameters=False)
        summary = tables["learning_summary"].iloc[0]
        uses = tables["privacy_records"]["uses"]
        walk = tables.get("walk_summary")
        majority, centralised = run_baselines(directory)
        rows.append(
            {
                "final accuracy": curves_from_run(directory)["accuracy"].iloc[-1],
                "majority class": majority,
                "centralised non-private": centralised,
                "updates": summary["updates"],
                "refused visits": summary["refused"],
                "records never used": float((uses == 0).mean()),
                "records used 5 times": float((uses == 5).mean()),
                "restarts": walk["restarts"].iloc[0] if walk is not None else 0,
                "mean concurrent walks": walk["mean_propagating"].iloc[0]
                if walk is not None
                else 1,
            }
        )
    frame = pd.DataFrame(rows)
    return {"variant": label, "runs": len(rows), **frame.mean().to_dict()}


def draw(runs: dict[str, list[Path]]) -> Path:
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12.5, 4.4))
    width = 0.8 / len(runs)
    for position, (label, directories) in enumerate(runs.items()):
        curves = pd.concat([curves_from_run(d) for d in directories], ignore_index=True)
        mean = curves.groupby("visits")["accuracy"].mean()
        left.plot(mean.index / curves["records"].iloc[0], mean.to_numpy(), label=label)
        uses = np.concatenate(
            [load_run(d)["privacy_records"]["uses"].to_numpy() for d in directories]
        )
        share = np.bincount(uses, minlength=6)[:6] / uses.size
        offset = (position - (len(runs) - 1) / 2) * width  # bars side by side, centred
        right.bar(np.arange(6) + offset, share, width, label=label)
    yardsticks = np.array([run_baselines(d) for dirs in runs.values() for d in dirs]).mean(axis=0)
    for value, name, colour in zip(
        yardsticks, ("majority class", "centralised non-private"), ("0.45", "black"), strict=True
    ):
        left.axhline(value, color=colour, linestyle="--", lw=1.2, label=f"{name} ({value:.3f})")
    left.set_xlabel("walk steps (multiples of the 4,140 records)")
    left.set_ylabel("test accuracy (fraction correct)")
    left.set_ylim(0.0, 1.0)
    left.grid(alpha=0.3)
    left.legend(fontsize=8, loc="lower right")
    left.set_title(f"Spambase, LogReg, DP-SGD-5, L2 (paper), ε = 1 ({len(directories)} runs)")
    right.set_xlabel("updates a record took part in (budget ε/5 each)")
    right.set_ylabel("fraction of records")
    right.set_title("How the per-record budgets were spent")
    right.legend(fontsize=8)
    right.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return save_figure(fig, OUT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3, help="seeds per variant")
    add_runner_arguments(parser)
    args = parser.parse_args(argv)

    def act() -> int:
        runs = run_all(args.reps, runner_from(args))
        print(draw(runs))
        table = pd.DataFrame([summarise(label, dirs) for label, dirs in runs.items()])
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        return 0

    return guarded("learning_service", act)


if __name__ == "__main__":
    sys.exit(main())
