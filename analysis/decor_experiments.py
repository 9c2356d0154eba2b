"""DECOR's headline comparison (Allouah, Koloskova, El Firdoussi, Jaggi, Guerraoui, ICML 2024)
on Adult at (ε, δ) = (1, 10⁻⁵), accounted by netsim from each run's messages, then the same
under STUNner churn and message loss.

    python analysis/decor_experiments.py run [--jobs 2 | --scheduler ADDRESS] [--out DIR]
    python analysis/decor_experiments.py tables [--readme]
    python analysis/decor_experiments.py figures

DECOR's claim: with pairwise-cancelling noise, decentralised SGD under SecLDP (an eavesdropper
of every message; the secret of two honest linked users hidden) reaches the privacy–utility
trade-off of central DP on any connected graph. Its experiments use 16 users on a ring, a
4 × 4 torus and the complete graph, logistic regression on a9a (Adult). netsim runs
``scenarios/dsgd/decor-adult.yaml`` (16 nodes, 1,664 records each, batch 64, 1,000 rounds,
η = 0.5, C = 1, example-level units) with, per topology:

- **DECOR** (σ_cor = 10 σ), both noises scaled before the run so that the worst record's
  SecLDP loss on the planned run is exactly (1, 10⁻⁵) (``dsgd.calibrate``);
- **local DP** (independent noise only), scaled so that every record's local-DP loss — every
  message public, every other noise known — is (1, 10⁻⁵);

beside the majority class, a centralised non-private model and **central DP** at the same
(1, 10⁻⁵) (DP-GD by a trusted curator on the whole training split,
``netsim.learning.central_dp``, one run per seed). The hyper-parameters are the scenario's, not
tuned on the test rows (the same for every method). DECOR's own choices differ (uniform
weights, σ from the central-DP calibration then σ_cor by search, 5,000 rounds;
``docs/explanation/linear-accountant.md``).

Then DECOR and local DP on every topology under the STUNner trace (a round a minute, so 1,000
rounds span 16.7 hours of smartphone churn) with 5 % of the messages lost, each noise kept at
its static calibration: the uncancelled pairwise noise an offline neighbour leaves (DECOR adds
every topology neighbour's secret), accuracy, and the worst and median record's loss as each
run's own accounting states it. Results: ``analysis/results/decor-experiments.parquet`` (one
row per run).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd
from experiments import (
    SweepRunner,
    edge_list_file,
    experiment_main,
    load_result_tables,
    mean_interval,
    planned_label,
    run_experiments,
    show_tables,
    t_half_width,
)

from netsim.algorithms.dsgd.learner import dsgd_data
from netsim.analysis.figures import save_figure
from netsim.analysis.runs import load_run, load_run_scenario
from netsim.learning.central_dp import central_dp_baseline
from netsim.plotting import pyplot
from netsim.sweep import SweepPlan, SweepPoint, plan_points

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "scenarios" / "dsgd" / "decor-adult.yaml"
RESULTS = REPO / "analysis" / "results"
FIGURE = REPO / "analysis" / "figures" / "decor-experiments.png"
GRAPHS = REPO / "analysis" / "sweeps" / "decor-graphs"
STUNNER = REPO.parent / "shared" / "data" / "traces" / "stunner" / "peersim_session_100.txt"
FALLBACK = REPO / "traces" / "stunner-synthetic.csv"
NAME = "decor-experiments"
NODES = 16
EPSILON, DELTA = 1.0, 1e-5
SEEDS = 3
LOSS = 0.05
#: A round a minute under churn.
CHURN_PERIOD = 60.0


@dataclass(frozen=True)
class Row:
    """A row: its label, topology, method (decor or local) and whether it runs under churn."""

    label: str
    topology: str
    method: str
    churn: bool = False


TOPOLOGIES = ("ring", "torus", "complete")
ROWS: tuple[Row, ...] = tuple(
    Row(f"{topology}, {method}{', churn + loss' if churn else ''}", topology, method, churn)
    for churn in (False, True)
    for topology in TOPOLOGIES
    for method in ("decor", "local")
)


@cache
def torus_file() -> Path:
    """The 4 × 4 wrap-around grid's edge list (DECOR's "grid")."""
    graph = nx.convert_node_labels_to_integers(nx.grid_2d_graph(4, 4, periodic=True))
    return edge_list_file(graph.edges(), GRAPHS / "torus-4x4.txt")


def overrides(row: Row) -> dict[str, Any]:
    """The base scenario's keys a row changes."""
    changed: dict[str, Any] = {}
    if row.topology == "torus":
        changed["topology"] = {"kind": "edge_list", "path": str(torus_file())}
    elif row.topology == "complete":
        changed["topology"] = {"kind": "complete"}
    if row.method == "local":
        changed["dsgd.noise"] = {"kind": "local", "noise_multiplier": 1.0}
        changed["privacy.trust"] = "ldp"
    if row.churn:
        changed["churn"] = {
            "kind": "stunner", "path": str(STUNNER),
            "fallback": {"kind": "trace", "path": str(FALLBACK)},
        }  # fmt: skip
        changed["links.loss"] = LOSS
        changed["dsgd.period"] = CHURN_PERIOD
        changed["duration"] = f"{1000 * CHURN_PERIOD:g}s"
    return changed


def plan(name: str = NAME) -> SweepPlan:
    points = [SweepPoint(overrides(row), seed, row.label) for row in ROWS
              for seed in range(1, SEEDS + 1)]  # fmt: skip
    return plan_points(BASE, points, name=name)


COLUMNS = (
    "row", "topology", "method", "churn", "seed", "online_mean", "lost", "uncancelled_mean",
    "noise_multiplier", "correlated_multiplier", "average_accuracy", "node_accuracy",
    "majority_accuracy", "centralised_accuracy", "central_dp_accuracy", "network_epsilon",
    "epsilon_median", "local_epsilon", "bound_pairs",
)  # fmt: skip


@cache
def central_dp(seed: int) -> float:
    """Central DP's test accuracy at (ε, δ) on the scenario's split, noise seed ``seed``."""
    from netsim.scenario.loader import load_scenario

    scenario = load_scenario(BASE)
    data = dsgd_data(scenario.dsgd, NODES)
    baseline = central_dp_baseline(data.x_train, data.y_train, data.x_test, data.y_test,
                                   epsilon=EPSILON, delta=DELTA, seed=seed)  # fmt: skip
    return float(baseline.accuracy)


def reduce_run(name: str, directory: Path) -> pd.DataFrame:
    """One run as one row of :data:`COLUMNS`."""
    tables = load_run(directory, parameters=False)
    seed = int(load_run_scenario(directory).seed)
    label = planned_label(directory, NAME)
    row = next(r for r in ROWS if r.label == label)
    rounds, summary = tables["dsgd_rounds"], tables["dsgd_summary"].iloc[0]
    privacy = tables["privacy_summary"].iloc[0]
    units = tables["linear_pairs"]
    values = {
        "row": label, "topology": row.topology, "method": row.method, "churn": row.churn,
        "seed": seed, "online_mean": float(rounds["online"].mean()),
        "lost": int(rounds["lost"].sum()), "uncancelled_mean": float(rounds["uncancelled"].mean()),
        "noise_multiplier": float(summary["noise_multiplier"]),
        "correlated_multiplier": float(summary["correlated_multiplier"]),
        "average_accuracy": float(summary["average_accuracy"]),
        "node_accuracy": float(summary["node_accuracy"]),
        "majority_accuracy": float(summary["majority_accuracy"]),
        "centralised_accuracy": float(summary["centralised_accuracy"]),
        "central_dp_accuracy": central_dp(seed - 1),
        "network_epsilon": float(privacy["network_epsilon"]),
        "epsilon_median": float(privacy["epsilon_median"]),
        "local_epsilon": float(privacy["local_epsilon"]),
        "bound_pairs": int((~units["exact"]).sum()),
    }  # fmt: skip
    return pd.DataFrame([values], columns=list(COLUMNS))


def results_file() -> Path:
    return RESULTS / f"{NAME}.parquet"


def run(runner: SweepRunner) -> int:
    return run_experiments(
        [NAME], runner, plan=lambda name: plan(), reduce=reduce_run,
        results=lambda name: results_file(),
    )  # fmt: skip


def load_results() -> pd.DataFrame:
    return load_result_tables([NAME], lambda name: results_file(), "decor_experiments.py")


def _number(value: float, digits: int = 3) -> str:
    return "—" if not math.isfinite(value) else f"{value:.{digits}g}"


def static_table(runs: pd.DataFrame) -> str:
    static = runs[~runs["churn"]]
    first = static.iloc[0]
    cdp = static.groupby("seed")["central_dp_accuracy"].first()
    lines = [
        f"Adult, 16 nodes, 1,000 rounds, example-level (ε, δ) = ({EPSILON:g}, {DELTA:g}); mean "
        f"over {SEEDS} seeds with its 95% interval. Yardsticks on the same split: majority class "
        f"{first['majority_accuracy']:.3f}, centralised non-private "
        f"{first['centralised_accuracy']:.3f}, **central DP at the same (ε, δ) "
        f"{mean_interval(cdp)}**.",
        "",
        "| topology | method (trust) | σ | σ_cor | accuracy: average model | mean of the nodes' "
        "models | worst record's ε (accounted) |",
        "|---|---|---|---|---|---|---|",
    ]
    for _, part in static.groupby("row", sort=False):
        method = "DECOR (SecLDP)" if part["method"].iloc[0] == "decor" else "local DP"
        lines.append(
            f"| {part['topology'].iloc[0]} | {method} | "
            f"{part['noise_multiplier'].mean():.3g} | "
            f"{_number(part['correlated_multiplier'].mean())} | "
            f"{mean_interval(part['average_accuracy'])} | "
            f"{mean_interval(part['node_accuracy'])} | "
            f"{_number(part['network_epsilon'].max(), 4)} |"
        )
    return "\n".join(lines)


def churn_table(runs: pd.DataFrame) -> str:
    churn = runs[runs["churn"]]
    lines = [
        f"The same runs under the STUNner trace (a round a minute) with {LOSS:.0%} of the "
        "messages lost, each noise at its static calibration; mean over seeds [95% interval].",
        "",
        "| topology | method (trust) | online (mean of 16) | messages lost | uncancelled noise a "
        "round (gradient units) | accuracy: average model | nodes' models | worst record's ε "
        "| median record's ε |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for _, part in churn.groupby("row", sort=False):
        method = "DECOR (SecLDP)" if part["method"].iloc[0] == "decor" else "local DP"
        lines.append(
            f"| {part['topology'].iloc[0]} | {method} | {part['online_mean'].mean():.1f} | "
            f"{part['lost'].mean():.0f} | {mean_interval(part['uncancelled_mean'])} | "
            f"{mean_interval(part['average_accuracy'])} | "
            f"{mean_interval(part['node_accuracy'])} | "
            f"{mean_interval(part['network_epsilon'])} | "
            f"{mean_interval(part['epsilon_median'])} |"
        )
    return "\n".join(lines)


def generated_tables(runs: pd.DataFrame | None = None) -> dict[str, str]:
    runs = load_results() if runs is None else runs
    return {f"{NAME}-static": static_table(runs), f"{NAME}-churn": churn_table(runs)}


def draw(out: Path = FIGURE) -> Path:
    """Accuracy of the average model per topology and method, static and under churn, with
    the yardsticks as horizontal lines (majority, central DP, centralised non-private)."""
    plt = pyplot()
    runs = load_results()
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharey=True)
    width = 0.35
    for axis, churned in zip(axes, (False, True), strict=True):
        part = runs[runs["churn"] == churned]
        for k, method in enumerate(("decor", "local")):
            means, halves = [], []
            for topology in TOPOLOGIES:
                values = part[(part["method"] == method) & (part["topology"] == topology)]
                values = values["average_accuracy"]
                means.append(values.mean())
                halves.append(t_half_width(values))
            positions = np.arange(len(TOPOLOGIES)) + (k - 0.5) * width
            axis.bar(positions, means, width, yerr=halves, capsize=4, color=f"C{k}",
                     label="DECOR (SecLDP)" if method == "decor" else "local DP")  # fmt: skip
        first = runs.iloc[0]
        cdp = runs.groupby("seed")["central_dp_accuracy"].first().mean()
        axis.axhline(first["majority_accuracy"], color="grey", ls=":", label="majority class")
        axis.axhline(cdp, color="black", ls="--", label=f"central DP at ε = {EPSILON:g}")
        axis.axhline(first["centralised_accuracy"], color="black", ls="-",
                     label="centralised non-private")  # fmt: skip
        axis.set_xticks(np.arange(len(TOPOLOGIES)), TOPOLOGIES)
        axis.set_xlabel("topology (16 nodes)")
        axis.set_title("static" if not churned else f"STUNner churn, {LOSS:.0%} loss")
        axis.set_ylim(0.5, 0.86)
    axes[0].set_ylabel("test accuracy of the average model")
    handles, names = axes[0].get_legend_handles_labels()
    figure.legend(handles, names, loc="lower center", ncol=5, fontsize=9)
    figure.suptitle(f"Adult at (ε, δ) = ({EPSILON:g}, {DELTA:g}), example level, 1,000 rounds; "
                    "mean over seeds with 95% intervals")  # fmt: skip
    figure.tight_layout(rect=(0, 0.08, 1, 1))
    return save_figure(figure, out)


def main(argv: list[str] | None = None) -> int:
    return experiment_main(
        __doc__.splitlines()[0], [NAME], lambda only, runner: run(runner),
        lambda: print(draw()), argv,
        lambda readme: show_tables(generated_tables(), readme),
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
