"""Muffliato's gossip-GD figure (Cyffers, Even, Bellet, Massoulié, NeurIPS 2022, Fig. 1c) on
Spambase, accounted by netsim from each run's messages.

    python analysis/muffliato_gd.py run [--jobs 2 | --scheduler ADDRESS] [--out DIR]
    python analysis/muffliato_gd.py tables [--readme]
    python analysis/muffliato_gd.py figures

The authors' experiment (``totilas/muffliato``, ``gd.py`` and ``draw.py``): logistic regression
by 10 steps of gradient descent at 2,000 nodes, each node's clipped gradient (L = 0.4) noised by
N(0, 1.5²), then gossip averaging with Chebyshev acceleration on an Erdős–Rényi graph redrawn
every step; the figure shows the test accuracy per step beside "central" (the same noisy
gradients averaged exactly) and a histogram of every node's privacy loss towards one observer
as a share of local DP. netsim runs ``scenarios/dsgd/muffliato-gd-spambase.yaml``:

- Spambase (shipped) instead of Houses (not available here); on Adult, 10 gradient steps do not
  leave the majority class even without noise;
- one Erdős–Rényi graph (p = 1.5 ln n / n) for the whole run, and 20 plain gossip passes a
  step (about ln n / √γ, the accelerated count, for its spectral gap γ ≈ 0.16);
- the loss of every other node's data (node-level) towards one observer drawn per seed,
  netsim's exact one from the messages it received (``netsim/privacy/linear.py``), not the
  authors' per-message sum;
- "central": the same scenario on the complete graph with one pass (Metropolis weights 1/n:
  exact averaging).

Results: ``analysis/results/muffliato-gd.parquet`` (per run and step: accuracy) and
``muffliato-gd-pairs.parquet`` (per run and pair: the loss as a share of local DP).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from experiments import (
    SweepRunner,
    experiment_main,
    mean_interval,
    planned_label,
    run_directories,
    run_experiments,
    show_tables,
    write_results,
)

from netsim.analysis.figures import save_figure
from netsim.analysis.runs import load_run, load_run_scenario
from netsim.plotting import pyplot
from netsim.sweep import SweepPlan, SweepPoint, plan_points

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "scenarios" / "dsgd" / "muffliato-gd-spambase.yaml"
RESULTS = REPO / "analysis" / "results"
FIGURE = REPO / "analysis" / "figures" / "muffliato-gd.png"
NAME = "muffliato-gd"
SEEDS = 5


@dataclass(frozen=True)
class Row:
    """A row: its label and the base scenario's keys it changes."""

    label: str
    changes: tuple[tuple[str, Any], ...]


ROWS: tuple[Row, ...] = (
    Row("Muffliato-GD (Erdős–Rényi, 20 passes)", ()),
    Row("central (exact averaging)", (("topology", {"kind": "complete"}),
                                      ("dsgd.gossip_rounds", 1), ("privacy", None))),
)  # fmt: skip


def plan(name: str = NAME) -> SweepPlan:
    points = [SweepPoint(dict(row.changes), seed, row.label) for row in ROWS
              for seed in range(1, SEEDS + 1)]  # fmt: skip
    return plan_points(BASE, points, name=name)


def reduce_run(name: str, directory: Path) -> pd.DataFrame:
    """One run as its accuracies per step (columns row, seed, round, accuracy: the average
    model's, node_accuracy: the mean of the nodes' own models', which the authors plot)."""
    tables = load_run(directory, parameters=False)
    rounds = tables["dsgd_rounds"]
    return pd.DataFrame({
        "row": planned_label(directory, NAME), "seed": int(load_run_scenario(directory).seed),
        "round": rounds["round"].to_numpy(), "accuracy": rounds["accuracy"].to_numpy(),
        "node_accuracy": rounds["node_accuracy"].to_numpy(),
    })  # fmt: skip


def results_file() -> Path:
    return RESULTS / f"{NAME}.parquet"


def pairs_file() -> Path:
    return RESULTS / f"{NAME}-pairs.parquet"


def run(runner: SweepRunner) -> int:
    """Run the sweep; the accuracy table and the pairs' shares of local DP."""
    failed = run_experiments(
        [NAME], runner, plan=lambda name: plan(), reduce=reduce_run,
        results=lambda name: results_file(),
    )  # fmt: skip
    sweep = runner.out / NAME
    if not failed and sweep.is_dir():
        frames = []
        for directory in run_directories([sweep]):
            tables = load_run(directory, parameters=False)
            if "linear_pairs" not in tables:
                continue
            pairs = tables["linear_pairs"]
            frames.append(pd.DataFrame({
                "seed": int(load_run_scenario(directory).seed),
                "observer": pairs["observer"].to_numpy(), "node": pairs["node"].to_numpy(),
                "distance": pairs["distance"].to_numpy(),
                "local_share": pairs["local_share"].to_numpy(),
                "epsilon": pairs["epsilon"].to_numpy(),
            }))  # fmt: skip
        write_results(pd.concat(frames, ignore_index=True), pairs_file())
    return failed


def markdown_table(runs: pd.DataFrame | None = None, pairs: pd.DataFrame | None = None) -> str:
    runs = pd.read_parquet(results_file()) if runs is None else runs
    pairs = pd.read_parquet(pairs_file()) if pairs is None else pairs
    last = runs[runs["round"] == runs["round"].max()]
    lines = [
        f"Spambase, 2,000 nodes, 10 steps; mean over {SEEDS} seeds with its 95% interval. The "
        "loss of every other node's data towards one observer a seed, as a share of local DP "
        "(every message public).",
        "",
        "| row | test accuracy after step 10: the nodes' models (mean) | their average model |",
        "|---|---|---|",
    ]
    for label, part in last.groupby("row", sort=False):
        lines.append(f"| {label} | {mean_interval(part['node_accuracy'])} | "
                     f"{mean_interval(part['accuracy'])} |")  # fmt: skip
    share = pairs["local_share"]
    quantiles = np.quantile(share, [0.1, 0.5, 0.9])
    lines += [
        "",
        "| pairs | share of local DP: 10th percentile | median | 90th percentile | largest | "
        "pairs at local DP |",
        "|---|---|---|---|---|---|",
        f"| {len(share):,} | {quantiles[0]:.3g} | {quantiles[1]:.3g} | {quantiles[2]:.3g} | "
        f"{share.max():.3g} | {int((share > 1 - 1e-9).sum()):,} |",
    ]
    return "\n".join(lines)


def generated_tables() -> dict[str, str]:
    return {NAME: markdown_table()}


def draw(out: Path = FIGURE) -> Path:
    """Above, the histogram of the pairs' loss as a share of local DP (the local-DP line at
    1); below, the mean test accuracy of the nodes' models per step (as the authors plot),
    mean ± standard deviation over seeds."""
    plt = pyplot()
    runs, pairs = pd.read_parquet(results_file()), pd.read_parquet(pairs_file())
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 9),
                                         gridspec_kw={"height_ratios": [1, 1.4]})  # fmt: skip
    top.hist(pairs["local_share"], bins=60, color="tab:green", label="pairwise network DP")
    top.axvline(1.0, color="red", label="local DP")
    top.set_xlabel("privacy loss of a node's data towards the observer (share of local DP)")
    top.set_ylabel("pairs (nodes × seeds)")
    top.legend(loc="upper center")
    for k, (label, part) in enumerate(runs.groupby("row", sort=False)):
        by_round = part.groupby("round")["node_accuracy"]
        mean, spread = by_round.mean(), by_round.std().fillna(0.0)
        bottom.errorbar(mean.index + 0.08 * k, mean.to_numpy(), spread.to_numpy(), capsize=4,
                        lw=2, ls=("-", "--")[k % 2], marker=("o", "s")[k % 2],
                        color=("tab:green", "tab:blue")[k % 2], label=label)  # fmt: skip
    bottom.set_xlabel("gradient step")
    bottom.set_ylabel("test accuracy (mean of the nodes' models)")
    bottom.set_ylim(0.5, 1.0)
    bottom.legend(loc="lower right")
    figure.suptitle("Muffliato-GD on Spambase, 2,000 nodes (Muffliato Fig. 1c)")
    figure.tight_layout()
    return save_figure(figure, out)


def main(argv: list[str] | None = None) -> int:
    return experiment_main(
        __doc__.splitlines()[0], [NAME], lambda only, runner: run(runner),
        lambda: print(draw()), argv,
        lambda readme: show_tables(generated_tables(), readme),
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
