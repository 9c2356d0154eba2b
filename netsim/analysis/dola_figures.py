"""DOLA curves from runs and the figures of Li et al. (arXiv Fig. 1–2; TKDE Fig. 3, 5, 6).

:func:`dola_curves` turns one run's tables into long rows — the run's configuration
(:data:`DOLA_COLUMNS`), ``seed``, ``round``, and the metric columns of ``dola_regret`` and
``dola_rounds`` — so that runs from many configurations and seeds stack into one table.
:func:`curve_figure` draws a metric against rounds, one line per configuration, mean over
seeds with a band of ± one standard deviation where there are several.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from netsim.analysis.figures import save_figure
from netsim.analysis.runs import load_run, load_run_scenario
from netsim.errors import RunDirectoryError
from netsim.lazy import lazy_module
from netsim.plotting import pyplot
from netsim.scenario.schema import Scenario

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

DOLA_COLUMNS: tuple[str, ...] = (
    "dataset",
    "algorithm",
    "calibration",
    "epsilon",
    "nodes",
    "batch",
    "topology",
    "sparsity_rho",
)

METRIC_LABELS = {
    "average_regret": "average regret R_D(T)/T (loss units per round)",
    "average_regret_per_node": "average regret per node R_D(T)/(mT) (loss units)",
    "consensus": "Σ_i ‖w_i − w̄‖² (squared parameter distance)",
    "accuracy_averaged": "test accuracy of ŵ_T = (1/T) Σ w̄_t (fraction correct)",
    "accuracy_node": "test accuracy of w_T^j (fraction correct)",
}


def configuration(scenario: Scenario) -> dict[str, object]:
    """The :data:`DOLA_COLUMNS` of a DOLA scenario."""
    dola = scenario.dola
    if dola is None:
        raise RunDirectoryError(f"scenario {scenario.name!r} has no dola section")
    topology = scenario.topology
    described = topology.kind + "".join(
        f" {k}={v:g}" if isinstance(v, float) else f" {k}={v}"
        for k, v in topology.model_dump().items()
        if k not in ("kind", "path", "directed", "undirected")
    )
    return {
        "dataset": dola.data.name,
        "algorithm": dola.algorithm,
        "calibration": dola.calibration if dola.algorithm == "gaussian" else "-",
        "epsilon": math.inf if dola.algorithm == "non_private" else dola.epsilon,  # ∞: none
        "nodes": scenario.nodes,
        "batch": dola.batch,
        "topology": described,
        "sparsity_rho": dola.sparsity,
    }


def dola_curves(tables: dict[str, pd.DataFrame], scenario: Scenario) -> pd.DataFrame:
    """One row per logged round: configuration, seed, round and every metric (regret columns
    are NaN on rounds without a regret checkpoint, and vice versa)."""
    if "dola_rounds" not in tables:
        raise RunDirectoryError(f"run of {scenario.name!r} has no dola_rounds table")
    metrics = tables["dola_rounds"].drop(columns=["run_id"], errors="ignore")
    regret = tables.get("dola_regret")
    if regret is not None and len(regret):
        regret = regret.drop(columns=["run_id", "cumulative_loss"], errors="ignore")
        metrics = metrics.merge(regret, on="round", how="outer").sort_values("round")
    for column, value in configuration(scenario).items():
        metrics[column] = value
    metrics["seed"] = scenario.seed
    first = [*DOLA_COLUMNS, "seed", "round"]
    return metrics[first + [c for c in metrics.columns if c not in first]].reset_index(drop=True)


def dola_curves_from_run(run_dir: Path) -> pd.DataFrame:
    """:func:`dola_curves` of a run directory."""
    return dola_curves(load_run(run_dir, parameters=False), load_run_scenario(run_dir))


def line_label(row: pd.Series, varying: Sequence[str]) -> str:
    """How a line of a figure is named from the configuration columns that vary."""
    parts = []
    for column in varying:
        value = row[column]
        if column == "epsilon":
            parts.append("non-private" if math.isinf(value) else f"ε = {value:g}")
        elif column == "nodes":
            parts.append(f"{value} node{'s' if value != 1 else ''}")
        elif column == "batch":
            parts.append(f"batch h = {value}")
        elif column == "calibration":
            if value != "-":
                parts.append({"printed": "J² as printed", "analytic": "analytic σ"}[value])
        elif column == "sparsity_rho":
            parts.append(f"ρ = {value:g}")
        else:
            parts.append(str(value))
    return ", ".join(parts)


def curve_figure(
    curves: pd.DataFrame,
    out: Path,
    *,
    metric: str,
    title: str,
    log_y: bool = False,
    varying: Sequence[str] | None = None,
) -> Path:
    """``metric`` against rounds, one line per configuration (the columns that vary, or
    ``varying``), mean over seeds with a ± one standard deviation band. Writes PNG ``out``."""
    data = curves.dropna(subset=[metric])
    if data.empty:
        raise RunDirectoryError(f"no {metric} values to draw for {title!r}")
    if varying is None:
        varying = [c for c in DOLA_COLUMNS if data[c].nunique() > 1]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.6, 4.4))
    groups = data.groupby(list(varying), sort=True) if varying else [((), data)]
    for _key, line in groups:
        stats = line.groupby("round")[metric].agg(["mean", "std", "count"])
        rounds = stats.index.to_numpy()
        mean = stats["mean"].to_numpy()
        (drawn,) = ax.plot(rounds, mean, lw=1.4, label=line_label(line.iloc[0], varying))
        if stats["count"].max() > 1:
            spread = stats["std"].fillna(0.0).to_numpy()
            ax.fill_between(rounds, mean - spread, mean + spread, alpha=0.2,
                            color=drawn.get_color(), lw=0)  # fmt: skip
    yardsticks = metric.startswith("accuracy") and draw_yardsticks(ax, data)
    seeds = data.groupby(list(varying) if varying else ["dataset"])["seed"].nunique().min()
    ax.set_xlabel("round t")
    ax.set_ylabel(METRIC_LABELS.get(metric, metric))
    if log_y:
        ax.set_yscale("log")
    ax.set_xscale("log")
    ax.grid(alpha=0.3, which="both")
    if yardsticks:  # the dashed lines span the axes: the legend goes below them
        fig.set_size_inches(6.6, 5.6)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    else:
        ax.legend(fontsize=8)
    runs = f"mean ± sd of {seeds} runs" if seeds > 1 else "1 run"
    ax.set_title(f"{title} ({runs})", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, out)


#: The yardsticks an accuracy figure draws dashed, by column of the curves (run summaries).
YARDSTICKS = (
    ("majority_accuracy", "majority class", "0.35"),
    ("centralised_accuracy", "centralised non-private logistic regression", "0.1"),
)


def draw_yardsticks(ax: object, curves: pd.DataFrame) -> bool:
    """Dashed horizontal lines at the majority-class and centralised non-private accuracy of
    the runs' split (principle 9 of ``docs/architecture.md``), where the curves carry them
    (one line per data set; the mean over its runs, which share the split). Returns whether
    any was drawn."""
    drawn = False
    for column, label, colour in YARDSTICKS:
        if column not in curves:
            continue
        values = curves.dropna(subset=[column]).groupby("dataset")[column].mean()
        for dataset, value in values.items():
            named = f"{label} ({dataset})" if len(values) > 1 else label
            ax.axhline(value, ls="--", lw=1.0, color=colour, label=f"{named}: {value:.3f}")
            drawn = True
    return drawn


def sparsity_figure(points: pd.DataFrame, out: Path, *, title: str) -> Path:
    """Test accuracy against the fraction of zero weights (TKDE Fig. 5): one line per
    topology, one point per ρ (mean over seeds). ``points`` has columns topology,
    sparsity_rho, seed, sparsity, accuracy."""
    if points.empty:
        raise RunDirectoryError(f"no sparsity points to draw for {title!r}")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.6, 4.4))
    for topology, line in points.groupby("topology", sort=True):
        mean = line.groupby("sparsity_rho")[["sparsity", "accuracy"]].mean().sort_values("sparsity")
        ax.plot(100 * mean["sparsity"], mean["accuracy"], "o-", lw=1.3, ms=4, label=topology)
        best = mean["accuracy"].idxmax()
        ax.annotate(f"ρ={best:g}", (100 * mean.loc[best, "sparsity"], mean.loc[best, "accuracy"]),
                    textcoords="offset points", xytext=(4, 4), fontsize=7)  # fmt: skip
    ax.set_xlabel("sparsity of w_T^j (% of weights exactly zero)")
    ax.set_ylabel("test accuracy (fraction correct)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, out)


def final_values(curves: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per configuration: the last logged value of ``metric`` (mean and sd over seeds)."""
    last = (
        curves.dropna(subset=[metric])
        .sort_values("round")
        .groupby([*DOLA_COLUMNS, "seed"], dropna=False)
        .tail(1)
    )
    stats = last.groupby(list(DOLA_COLUMNS), dropna=False)[metric].agg(["mean", "std", "count"])
    return stats.reset_index().replace({np.nan: None})
