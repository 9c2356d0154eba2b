"""DP-SGD-5 over the real walk service with STUNner churn, next to the same run over an ideal
walk (Hegedűs et al. 2016: §5 and §6 together).

    python analysis/learning_service.py --reps 3

Runs ``scenarios/learning/spambase-service-stunner.yaml`` and ``scenarios/learning/
spambase.yaml`` set to the same learning section (DP-SGD-5, the paper's L2 noise, local
normalisation) with and without replacement, seeds 1..reps, into run directories under
``analysis/runs/``; draws ``analysis/figures/learning-service-vs-ideal.png`` from those run
directories (accuracy against walk steps; how many times each record was used) and prints the
figures that matter: accuracy, restarts, concurrent walks, refused visits.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from netsim.analysis.figures import _pyplot, save_figure
from netsim.analysis.learning import curves_from_run
from netsim.analysis.runs import load_run
from netsim.errors import NetsimError
from netsim.scenario.loader import load_scenario
from netsim.scenario.runner import run_id_for, run_scenario, with_seed
from netsim.storage import is_complete_run

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "scenarios" / "learning"
RUNS = REPO / "analysis" / "runs"
OUT = REPO / "analysis" / "figures" / "learning-service-vs-ideal.png"
IDEAL = ["learning.algorithm=dp-sgd-5", "learning.noise=l2_paper"]
VARIANTS = {
    "walk service, STUNner churn": ("spambase-service-stunner.yaml", []),
    "ideal walk, with replacement": ("spambase.yaml", [*IDEAL, "walk.sampling=with_replacement"]),
    "ideal walk, without replacement": ("spambase.yaml", IDEAL),
}


def run_all(reps: int) -> dict[str, list[Path]]:
    """Run every variant with seeds 1..reps (a finished run directory is reused)."""
    runs: dict[str, list[Path]] = {}
    for label, (file, overrides) in VARIANTS.items():
        scenario = load_scenario(SCENARIOS / file, overrides)
        runs[label] = []
        for seed in range(1, reps + 1):
            seeded = with_seed(scenario, seed)
            directory = RUNS / run_id_for(seeded)
            if not is_complete_run(directory):
                directory = run_scenario(seeded, out=RUNS).directory
            runs[label].append(directory)
    return runs


def summarise(label: str, directories: list[Path]) -> dict[str, object]:
    """Mean figures over the runs of one variant."""
    rows = []
    for directory in directories:
        tables = load_run(directory)
        summary = tables["learning_summary"].iloc[0]
        uses = tables["privacy_records"]["uses"]
        walk = tables.get("walk_summary")
        rows.append(
            {
                "final accuracy": curves_from_run(directory)["accuracy"].iloc[-1],
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
    plt = _pyplot()
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
    args = parser.parse_args(argv)
    try:
        runs = run_all(args.reps)
        print(draw(runs))
        table = pd.DataFrame([summarise(label, dirs) for label, dirs in runs.items()])
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    except NetsimError as exc:
        print(f"learning_service: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
