"""Muffliato's averaging figure at its scale (Cyffers, Even, Bellet, Massoulié, NeurIPS 2022,
Fig. 1a), then under STUNner churn and message loss.

    python analysis/muffliato_averaging.py run [--jobs 2 | --scheduler ADDRESS] [--out DIR]
    python analysis/muffliato_averaging.py tables [--readme]
    python analysis/muffliato_averaging.py figures

The authors' figure (``totilas/muffliato``, ``figa.py``): every node adds Gaussian noise to its
value once, at σ such that its local Rényi loss at order α = 2 is 1, then the nodes average
with Chebyshev-accelerated gossip on four graphs of about 2,048 nodes — the hypercube 2¹¹
("exponential"), an Erdős–Rényi graph with p = ln n / n, a random geometric graph (r = 0.07)
and a 45 × 45 grid — and the figure plots each node's Rényi loss about one node's value
against their shortest-path distance, on a log scale below the local-DP line.

netsim runs the same averaging as a scenario (``scenarios/muffliato/averaging.yaml`` at 2,048
nodes; Δ = 1, σ = Δ, so one release is α·Δ²/(2σ²) = 1 at α = 2), with these choices:

- rounds: ⌈ln n / √γ⌉ Chebyshev rounds for the spectral gap γ of the graph's
  Metropolis–Hastings weights (the accelerated mixing time; the authors' own ``T_mix`` is not
  in their repository). The run's RMS error to the true mean says how far it mixed;
- the loss is netsim's exact one (the observer's whole view, a Gaussian mechanism:
  ``netsim.privacy.pairwise``), not a sum of per-message losses, for 64 observers drawn
  uniformly against every other node's value, pooled by distance;
- the Erdős–Rényi graph is the first connected draw from seed 7, the geometric graph the one of
  ``analysis/network_privacy.py``.

Then the hypercube's averaging under the STUNner trace (about 28% of the nodes online, offline
nodes keep their values), and with 10% of the messages lost besides: what the papers' static,
synchronous setting leaves out. Results: ``analysis/results/muffliato-averaging.parquet`` (one
row per run) and ``muffliato-averaging-distance.parquet`` (per run and distance: the pairs'
mean, least and largest Rényi loss at α = 2).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import network_privacy
import networkx as nx
import numpy as np
import pandas as pd
from experiments import (
    SweepRunner,
    add_runner_arguments,
    edge_list_file,
    guarded,
    load_result_tables,
    mean_interval,
    planned_label,
    run_directories,
    run_experiments,
    runner_from,
    write_readme_tables,
    write_results,
)

from netsim.algorithms.muffliato.averaging import topology_gap
from netsim.analysis.figures import save_figure
from netsim.analysis.runs import load_run, load_run_scenario
from netsim.plotting import pyplot
from netsim.sweep import SweepPlan, SweepPoint, plan_points

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "scenarios" / "muffliato" / "averaging.yaml"
RESULTS = REPO / "analysis" / "results"
FIGURE = REPO / "analysis" / "figures" / "muffliato-averaging.png"
GRAPHS = REPO / "analysis" / "sweeps" / "muffliato-graphs"
STUNNER = REPO.parent / "shared" / "data" / "traces" / "stunner" / "peersim_session_100.txt"
FALLBACK = REPO / "traces" / "stunner-synthetic.csv"
NODES = 2048
OBSERVERS = 64
NAME = "muffliato-averaging"
#: The Rényi order of the authors' figure.
ORDER = 2.0


@dataclass(frozen=True)
class Row:
    """A row: its label, its graph, the churn and loss it adds, and how many seeds it runs
    (a churn row draws its trace assignment and losses from the seed)."""

    label: str
    graph: str
    churn: bool = False
    loss: float = 0.0
    seeds: int = 1


ROWS: tuple[Row, ...] = (
    Row("hypercube 2^11", "hypercube"),
    Row("Erdős–Rényi p = ln n / n", "er"),
    Row("geometric r = 0.07", "geometric"),
    Row("grid 45 x 45", "grid"),
    Row("hypercube, STUNner churn", "hypercube", churn=True, seeds=5),
    Row("hypercube, churn and 10% loss", "hypercube", churn=True, loss=0.1, seeds=5),
)


@cache
def graph(name: str) -> nx.Graph:
    """The topology ``name`` (module docstring); the hypercube and the geometric graph are
    those of ``analysis/network_privacy.py``."""
    if name in ("hypercube", "geometric"):
        return network_privacy.graph(name)
    if name == "grid":
        return nx.convert_node_labels_to_integers(nx.grid_2d_graph(45, 45))
    rng = np.random.default_rng(7)
    while True:
        built = nx.gnp_random_graph(NODES, math.log(NODES) / NODES, seed=int(rng.integers(2**31)))
        if nx.is_connected(built):
            return built


def edge_list(name: str) -> Path:
    """The graph's edge list file (written once; the runs' scenarios name it)."""
    return edge_list_file(graph(name).edges(), GRAPHS / f"{name}.txt")


@cache
def rounds(name: str) -> int:
    """⌈ln n / √γ⌉ for the spectral gap γ of the graph's Metropolis–Hastings weights."""
    built = graph(name)
    edges = np.asarray(built.edges())
    low, high = np.minimum(edges[:, 0], edges[:, 1]), np.maximum(edges[:, 0], edges[:, 1])
    n = built.number_of_nodes()
    return math.ceil(math.log(n) / math.sqrt(topology_gap(n, low, high)))


def overrides(row: Row) -> dict[str, Any]:
    """The base scenario's keys a row changes."""
    count = rounds(row.graph)
    changed: dict[str, Any] = {
        "nodes": graph(row.graph).number_of_nodes(),
        "duration": f"{count}s",
        "topology": {"kind": "edge_list", "path": str(edge_list(row.graph))},
        "muffliato.rounds": count,
        "muffliato.acceleration": "chebyshev",
        "muffliato.observers": OBSERVERS,
    }
    if row.churn:
        changed["churn"] = {
            "kind": "stunner", "path": str(STUNNER),
            "fallback": {"kind": "trace", "path": str(FALLBACK)},
        }  # fmt: skip
    if row.loss:
        changed["links.loss"] = row.loss
    return changed


def plan(name: str = NAME) -> SweepPlan:
    points = [
        SweepPoint(overrides(row), seed, row.label)
        for row in ROWS
        for seed in range(1, row.seeds + 1)
    ]
    return plan_points(BASE, points, name=name)


COLUMNS = (
    "row", "graph", "seed", "nodes", "rounds", "online_mean", "final_rmse", "central_rmse",
    "local_epsilon", "network_epsilon", "epsilon_median", "loss_neighbours", "loss_least",
    "least_at", "loss_farthest", "diameter",
)  # fmt: skip


def distances(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The pairs' Rényi loss at α = 2 (α·rho) by hops: mean, least and largest, and count."""
    pairs = tables["privacy_pairs"]
    pairs = pairs[(pairs["observer"] >= 0) & (pairs["distance"] >= 0)]
    loss = pairs.assign(loss=ORDER * pairs["rho"])
    grouped = loss.groupby("distance")["loss"]
    return grouped.agg(["mean", "min", "max", "count"]).reset_index()


def reduce_run(name: str, directory: Path) -> pd.DataFrame:
    """One run as one row of :data:`COLUMNS`."""
    tables = load_run(directory, parameters=False)
    seed = int(load_run_scenario(directory).seed)
    label = planned_label(directory, NAME)
    row = next(r for r in ROWS if r.label == label)
    summary = tables["privacy_summary"].iloc[0]
    averaging = tables["muffliato_summary"].iloc[0]
    by_distance = distances(tables)
    beyond = by_distance[by_distance["distance"] >= 2]
    values = {
        "row": label, "graph": row.graph, "seed": seed,
        "nodes": graph(row.graph).number_of_nodes(),
        "rounds": len(tables["muffliato_rounds"]),
        "online_mean": float(tables["muffliato_rounds"]["online"].mean()),
        "final_rmse": float(averaging["final_rmse"]),
        "central_rmse": float(averaging["central_rmse"]),
        "local_epsilon": float(summary["local_epsilon"]),
        "network_epsilon": float(summary["network_epsilon"]),
        "epsilon_median": float(summary["epsilon_median"]),
        "loss_neighbours": float(by_distance.loc[by_distance["distance"] == 1, "mean"].iloc[0]),
        "loss_least": float(beyond["mean"].min()),
        "least_at": int(beyond.loc[beyond["mean"].idxmin(), "distance"]),
        "loss_farthest": float(by_distance["mean"].iloc[-1]),
        "diameter": int(by_distance["distance"].iloc[-1]),
    }  # fmt: skip
    return pd.DataFrame([values], columns=list(COLUMNS))


def results_file() -> Path:
    return RESULTS / f"{NAME}.parquet"


def distance_file() -> Path:
    return RESULTS / f"{NAME}-distance.parquet"


def run(runner: SweepRunner) -> int:
    """Run the sweep; one per-run table and one distance table."""
    failed = run_experiments(
        [NAME], runner, plan=lambda name: plan(), reduce=reduce_run,
        results=lambda name: results_file(),
    )  # fmt: skip
    sweep = runner.out / NAME
    if not failed and sweep.is_dir():
        frames = []
        for directory in run_directories([sweep]):
            label = planned_label(directory, NAME)
            seed = int(load_run_scenario(directory).seed)
            frames.append(
                distances(load_run(directory, parameters=False)).assign(row=label, seed=seed)
            )
        write_results(pd.concat(frames, ignore_index=True), distance_file())
    return failed


def load_results() -> pd.DataFrame:
    return load_result_tables([NAME], lambda name: results_file(), "muffliato_averaging.py")


def _number(value: float) -> str:
    return "—" if not math.isfinite(value) else f"{value:.3g}"


def markdown_table(runs: pd.DataFrame | None = None) -> str:
    runs = load_results() if runs is None else runs
    lines = [
        f"Chebyshev-accelerated Muffliato averaging, σ = Δ (local Rényi loss 1 at α = 2, "
        f"local ε at δ = 1e-5: {runs['local_epsilon'].iloc[0]:.3g}), {OBSERVERS} observers "
        "against every other node. One run per static graph; the churn rows give the mean "
        "over seeds with its 95% interval.",
        "",
        "| row | seeds | rounds | online (mean) | RMS error | curator's error at the worst "
        "ε | Rényi loss at α = 2: neighbours | least (at hops) | farthest (hops) "
        "| ε: worst pair; median |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, part in runs.groupby("row", sort=False):
        lines.append(
            f"| {label} | {len(part)} | {int(part['rounds'].iloc[0])} | "
            f"{part['online_mean'].mean():.0f} | {mean_interval(part['final_rmse'])} | "
            f"{_number(part['central_rmse'].mean())} | "
            f"{mean_interval(part['loss_neighbours'])} | "
            f"{mean_interval(part['loss_least'])} ({int(part['least_at'].median())}) | "
            f"{mean_interval(part['loss_farthest'])} ({int(part['diameter'].max())}) | "
            f"{_number(part['network_epsilon'].max())}; "
            f"{_number(part['epsilon_median'].mean())} |"
        )
    return "\n".join(lines)


def generated_tables(runs: pd.DataFrame | None = None) -> dict[str, str]:
    return {NAME: markdown_table(runs)}


def draw(out: Path = FIGURE) -> Path:
    """The pairs' mean Rényi loss at α = 2 against the hops between observer and record, one
    line per row (the mean over its seeds), with the local-DP loss (1) as the line above:
    left the four static graphs, right the hypercube with churn and loss."""
    plt = pyplot()
    table = pd.read_parquet(distance_file())
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    for axis, rows in ((axes[0], ROWS[:4]), (axes[1], (ROWS[0], *ROWS[4:]))):
        for index, row in enumerate(rows):
            part = table[(table["row"] == row.label) & (table["distance"] > 0)]
            part = part.groupby("distance")["mean"].mean()
            axis.plot(part.index, part.to_numpy(), "-o", ms=4, color=f"C{index}",
                      label=row.label)  # fmt: skip
        axis.axhline(1.0, color="black", lw=1.5, label="local DP (every value public)")
        axis.set_yscale("log")
        axis.set_xlabel("shortest-path distance between observer and node (hops)")
        axis.legend(fontsize=8, loc="lower left")
    axes[0].set_ylabel("Rényi loss at α = 2 of a pair (mean over pairs)")
    axes[0].set_title("Static graphs, 2,048 nodes (Muffliato Fig. 1a)")
    axes[1].set_title("Hypercube 2^11 under STUNner churn and loss")
    figure.tight_layout()
    return save_figure(figure, out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    add_runner_arguments(commands.add_parser("run", help="run the experiment (resumes)"))
    tables = commands.add_parser("tables", help="print the table from analysis/results")
    tables.add_argument("--readme", action="store_true")
    commands.add_parser("figures", help=f"draw {FIGURE.relative_to(REPO)}")
    args = parser.parse_args(argv)

    def act() -> int:
        if args.command == "run":
            return 1 if run(runner_from(args)) else 0
        if args.command == "tables":
            if args.readme:
                write_readme_tables(generated_tables())
            else:
                print(markdown_table())
            return 0
        print(draw())
        return 0

    return guarded(Path(sys.argv[0]).name, act)


if __name__ == "__main__":
    sys.exit(main())
