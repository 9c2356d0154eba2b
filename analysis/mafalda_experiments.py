"""MAFALDA-SGD (Bellet, Cyffers, Frey, Gaudel, Lerévérend, Taïani, ICLR 2026) against independent
and anti-PGD noise at the same pairwise network DP, on the Florentine families graph, then under
STUNner churn and message loss.

    python analysis/mafalda_experiments.py run [--jobs 2 | --scheduler ADDRESS] [--out DIR]
    python analysis/mafalda_experiments.py tables [--readme]
    python analysis/mafalda_experiments.py figures

MFDL's claim: optimising the temporal correlation of each node's noise for the graph
(MAFALDA-SGD) beats independent noise (Muffliato-SGD) and earlier correlations (anti-PGD) at
the same privacy. netsim runs ``scenarios/dsgd/mafalda-florentine.yaml`` (15 nodes, Spambase,
160 records a node in batches of 10, so each record takes part every 16th step, 160 rounds,
η = 0.3, C = 1, example-level units, logistic regression) with the noise of each method scaled
before the run so that the worst (observer, record) pair of pairwise network DP (PNDP: a node
sees the messages it receives and knows its own noise) on the planned run is exactly (ε, 10⁻⁵),
for ε = 1 and 4; beside the majority class, a centralised non-private model and central DP at
the same (ε, δ). The hyper-parameters are the scenario's, the same for every method and not
tuned on the test rows.

Then MAFALDA and independent noise at ε = 4 under the STUNner trace (a round a minute) with
5 % of the messages lost, each noise at its static calibration: accuracy and each run's own
accounting. MAFALDA's matrix is optimised for the planned graph; under churn a node's k-th step
still uses row k.

The ``objective`` table needs no run: the noise MAFALDA leaves in the models, tr(G X⁻¹) at
sensitivity 1, against independent and anti-PGD noise and against the optimum of the surrogate
workload MFDL's code optimises (``netsim/algorithms/dsgd/mafalda.py``), on the Florentine
families and an Erdős–Rényi graph (n = 100, p = 0.1, seed 1). Results:
``analysis/results/mafalda-experiments.parquet`` (one row per run).
"""

from __future__ import annotations

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
    experiment_main,
    load_result_tables,
    mean_interval,
    planned_label,
    run_experiments,
    show_tables,
    t_half_width,
)

from netsim.algorithms.dsgd import mafalda
from netsim.analysis.figures import save_figure
from netsim.analysis.runs import load_run, load_run_scenario
from netsim.plotting import pyplot
from netsim.privacy.pairwise import metropolis_from_edges
from netsim.sweep import SweepPlan, SweepPoint, plan_points

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "scenarios" / "dsgd" / "mafalda-florentine.yaml"
RESULTS = REPO / "analysis" / "results"
FIGURE = REPO / "analysis" / "figures" / "mafalda-experiments.png"
STUNNER = REPO.parent / "shared" / "data" / "traces" / "stunner" / "peersim_session_100.txt"
FALLBACK = REPO / "traces" / "stunner-synthetic.csv"
NAME = "mafalda-experiments"
DELTA = 1e-5
EPSILONS = (1.0, 4.0)
CHURN_EPSILON = 4.0
SEEDS = 3
LOSS = 0.05
#: A round a minute under churn.
CHURN_PERIOD = 60.0
METHODS = {
    "local": "independent (Muffliato-SGD)",
    "anti_pgd": "anti-PGD",
    "mafalda": "MAFALDA-SGD",
}


@dataclass(frozen=True)
class Row:
    """A row: its label, method (a key of :data:`METHODS`), target ε and whether it churns."""

    label: str
    method: str
    epsilon: float
    churn: bool = False


ROWS: tuple[Row, ...] = (
    *(Row(f"{method}, ε = {epsilon:g}", method, epsilon)
      for epsilon in EPSILONS for method in METHODS),
    *(Row(f"{method}, ε = {CHURN_EPSILON:g}, churn + loss", method, CHURN_EPSILON, True)
      for method in ("local", "mafalda")),
)  # fmt: skip


def overrides(row: Row) -> dict[str, Any]:
    """The base scenario's keys a row changes."""
    changed: dict[str, Any] = {"dsgd.calibrate.epsilon": row.epsilon}
    if row.method == "local":
        changed["dsgd.noise"] = {"kind": "local", "noise_multiplier": 1.0}
    elif row.method == "anti_pgd":
        changed["dsgd.noise.matrix"] = "anti_pgd"
    if row.churn:
        changed["churn"] = {
            "kind": "stunner", "path": str(STUNNER),
            "fallback": {"kind": "trace", "path": str(FALLBACK)},
        }  # fmt: skip
        changed["links.loss"] = LOSS
        changed["dsgd.period"] = CHURN_PERIOD
        changed["duration"] = f"{160 * CHURN_PERIOD:g}s"
    return changed


def plan(name: str = NAME) -> SweepPlan:
    points = [SweepPoint(overrides(row), seed, row.label) for row in ROWS
              for seed in range(1, SEEDS + 1)]  # fmt: skip
    return plan_points(BASE, points, name=name)


COLUMNS = (
    "row", "method", "epsilon_target", "churn", "seed", "online_mean", "lost",
    "noise_multiplier", "average_accuracy", "node_accuracy", "majority_accuracy",
    "centralised_accuracy", "central_dp_accuracy", "network_epsilon", "epsilon_median",
    "local_epsilon",
)  # fmt: skip


def reduce_run(name: str, directory: Path) -> pd.DataFrame:
    """One run as one row of :data:`COLUMNS`."""
    tables = load_run(directory, parameters=False)
    seed = int(load_run_scenario(directory).seed)
    label = planned_label(directory, NAME)
    row = next(r for r in ROWS if r.label == label)
    rounds, summary = tables["dsgd_rounds"], tables["dsgd_summary"].iloc[0]
    privacy = tables["privacy_summary"].iloc[0]
    values = {
        "row": label, "method": row.method, "epsilon_target": row.epsilon, "churn": row.churn,
        "seed": seed, "online_mean": float(rounds["online"].mean()),
        "lost": int(rounds["lost"].sum()),
        "noise_multiplier": float(summary["noise_multiplier"]),
        "average_accuracy": float(summary["average_accuracy"]),
        "node_accuracy": float(summary["node_accuracy"]),
        "majority_accuracy": float(summary["majority_accuracy"]),
        "centralised_accuracy": float(summary["centralised_accuracy"]),
        "central_dp_accuracy": float(summary["central_dp_accuracy"]),
        "network_epsilon": float(privacy["network_epsilon"]),
        "epsilon_median": float(privacy["epsilon_median"]),
        "local_epsilon": float(privacy["local_epsilon"]),
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
    return load_result_tables([NAME], lambda name: results_file(), "mafalda_experiments.py")


def static_table(runs: pd.DataFrame) -> str:
    static = runs[~runs["churn"]]
    first = static.iloc[0]
    lines = [
        f"Spambase, Florentine families (15 nodes), 160 rounds, example-level pairwise network "
        f"DP at δ = {DELTA:g}, noise calibrated on the planned run; mean over {SEEDS} seeds with "
        f"its 95% interval. Yardsticks on the same split: majority class "
        f"{first['majority_accuracy']:.3f}, centralised non-private "
        f"{first['centralised_accuracy']:.3f}.",
        "",
        "| target ε (worst pair) | noise | σ | accuracy: average model | mean of the nodes' "
        "models | central DP at the same (ε, δ) | median pair's ε | local DP ε |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for _, part in static.groupby("row", sort=False):
        lines.append(
            f"| {part['epsilon_target'].iloc[0]:g} | {METHODS[part['method'].iloc[0]]} | "
            f"{part['noise_multiplier'].mean():.3g} | "
            f"{mean_interval(part['average_accuracy'])} | "
            f"{mean_interval(part['node_accuracy'])} | "
            f"{mean_interval(part['central_dp_accuracy'])} | "
            f"{mean_interval(part['epsilon_median'])} | "
            f"{part['local_epsilon'].mean():.3g} |"
        )
    return "\n".join(lines)


def churn_table(runs: pd.DataFrame) -> str:
    churn = runs[runs["churn"]]
    lines = [
        f"The ε = {CHURN_EPSILON:g} runs under the STUNner trace (a round a minute) with "
        f"{LOSS:.0%} of the messages lost, each noise at its static calibration; mean over "
        "seeds [95% interval].",
        "",
        "| noise | online (mean of 15) | messages lost | accuracy: average model | nodes' "
        "models | worst pair's ε | median pair's ε |",
        "|---|---|---|---|---|---|---|",
    ]
    for _, part in churn.groupby("row", sort=False):
        lines.append(
            f"| {METHODS[part['method'].iloc[0]]} | {part['online_mean'].mean():.1f} | "
            f"{part['lost'].mean():.0f} | {mean_interval(part['average_accuracy'])} | "
            f"{mean_interval(part['node_accuracy'])} | "
            f"{mean_interval(part['network_epsilon'])} | "
            f"{mean_interval(part['epsilon_median'])} |"
        )
    return "\n".join(lines)


@cache
def _graph_eigenvalues(name: str) -> np.ndarray:
    graph = (
        nx.florentine_families_graph() if name == "florentine"
        else nx.erdos_renyi_graph(100, 0.1, seed=1)
    )  # fmt: skip
    graph = nx.convert_node_labels_to_integers(graph)
    edges = np.array([(min(e), max(e)) for e in graph.edges()])
    weights = metropolis_from_edges(graph.number_of_nodes(), edges[:, 0], edges[:, 1])
    return np.linalg.eigvalsh(weights.toarray())


def objective_rows() -> pd.DataFrame:
    """tr(G X⁻¹) at sensitivity 1 for each correlation, per graph and (T, participations)."""
    rows = []
    for name in ("florentine", "erdos_renyi"):
        for rounds, epochs in ((20, 4), (50, 5), (160, 10)):
            interval = rounds // epochs
            plan_ = mafalda.StepPlan((1.0,) * rounds, (1.0,) * rounds, 1, interval)
            gram = mafalda.workload_gram(_graph_eigenvalues(name), plan_)
            classes = mafalda.participation_classes(rounds, interval)

            def error(x: np.ndarray, gram: np.ndarray = gram) -> float:
                return float(np.trace(np.linalg.solve(x, gram)))

            identity = np.diag(1.0 / np.bincount(classes)[classes])
            prefix = np.tri(rounds)
            anti = prefix.T @ prefix
            flip = np.fliplr(np.eye(rounds))
            surrogate = np.linalg.cholesky(flip @ gram @ flip)
            rows.append({
                "graph": name, "rounds": rounds, "participations": epochs,
                "independent": error(identity),
                "anti_pgd": error(anti) * mafalda.sensitivity(anti, classes) ** 2,
                "mfdl_surrogate": error(mafalda.optimal_gram(surrogate.T @ surrogate, classes)),
                "mafalda": error(mafalda.optimal_gram(gram, classes)),
            })  # fmt: skip
    return pd.DataFrame(rows)


def objective_table() -> str:
    frame = objective_rows()
    lines = [
        "The noise each correlation leaves in the nodes' models after averaging, summed over "
        "the nodes and rounds, tr(G X⁻¹) at sensitivity 1 (units of σ²C²/b²; η = 1); MFDL's "
        "surrogate: the optimum of the workload MFDL's code hands its optimiser, scored on the "
        "true workload.",
        "",
        "| graph | rounds | participations | independent | anti-PGD | MFDL's surrogate | "
        "MAFALDA (netsim) | MAFALDA / independent | surrogate / MAFALDA |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for _, row in frame.iterrows():
        graph = "Florentine families" if row["graph"] == "florentine" else "Erdős–Rényi (100, 0.1)"
        lines.append(
            f"| {graph} | {row['rounds']} | {row['participations']} | "
            f"{row['independent']:.4g} | {row['anti_pgd']:.4g} | {row['mfdl_surrogate']:.5g} | "
            f"{row['mafalda']:.5g} | {row['mafalda'] / row['independent']:.3f} | "
            f"{row['mfdl_surrogate'] / row['mafalda']:.4f} |"
        )
    return "\n".join(lines)


def generated_tables(runs: pd.DataFrame | None = None) -> dict[str, str]:
    runs = load_results() if runs is None else runs
    return {
        f"{NAME}-static": static_table(runs),
        f"{NAME}-churn": churn_table(runs),
        f"{NAME}-objective": objective_table(),
    }


def draw(out: Path = FIGURE) -> Path:
    """Accuracy of the average model per target ε and noise (static), with the yardsticks as
    reference lines (majority, centralised non-private) and central DP per ε as markers."""
    plt = pyplot()
    runs = load_results()
    static = runs[~runs["churn"]]
    figure, axis = plt.subplots(figsize=(8, 5.4))
    width = 0.25
    for k, method in enumerate(METHODS):
        means, halves = [], []
        for epsilon in EPSILONS:
            values = static[(static["method"] == method) & (static["epsilon_target"] == epsilon)]
            means.append(values["average_accuracy"].mean())
            halves.append(t_half_width(values["average_accuracy"]))
        positions = np.arange(len(EPSILONS)) + (k - 1) * width
        axis.bar(positions, means, width, yerr=halves, capsize=4, color=f"C{k}",
                 label=METHODS[method])  # fmt: skip
    central = [static[static["epsilon_target"] == e]["central_dp_accuracy"].mean()
               for e in EPSILONS]  # fmt: skip
    positions = np.arange(len(EPSILONS))
    axis.hlines(central, positions - 1.5 * width, positions + 1.5 * width, colors="black",
                linestyles="--", label="central DP at the same (ε, δ)")  # fmt: skip
    first = runs.iloc[0]
    axis.axhline(first["majority_accuracy"], color="grey", ls=":", label="majority class")
    axis.axhline(first["centralised_accuracy"], color="black", ls="-",
                 label="centralised non-private")  # fmt: skip
    axis.set_xticks(np.arange(len(EPSILONS)), [f"ε = {e:g}" for e in EPSILONS])
    axis.set_xlabel(f"worst pair's pairwise network DP (δ = {DELTA:g}), calibrated before the run")
    axis.set_ylabel("test accuracy of the average model")
    axis.set_ylim(0.5, 0.95)
    handles, names = axis.get_legend_handles_labels()
    figure.legend(handles, names, loc="lower center", ncol=3, fontsize=8)
    axis.set_title("Spambase, Florentine families (15 nodes), 160 rounds; mean over seeds, 95% "
                   "intervals", fontsize=10)  # fmt: skip
    figure.tight_layout(rect=(0, 0.12, 1, 1))
    return save_figure(figure, out)


def main(argv: list[str] | None = None) -> int:
    return experiment_main(
        __doc__.splitlines()[0], [NAME], lambda only, runner: run(runner),
        lambda: print(draw()), argv,
        lambda readme: show_tables(generated_tables(), readme),
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
