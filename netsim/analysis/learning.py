"""Accuracy curves of private SGD runs and the figures of Hegedűs et al. (2016) Fig. 4–7.

A *curve table* has one row per (run, evaluation): the configuration columns of
:data:`CONFIG_COLUMNS`, ``seed``, ``records`` (one per node), ``visits`` (the model's walk
steps so far, the paper's x-axis "updates"), ``accuracy`` and the run's yardsticks
(:data:`BASELINE_COLUMNS`, NaN for runs written before ``learning_summary`` had them).
:func:`curves_from_run` makes one from a run directory or from in-memory tables;
:func:`learning_figure` averages over seeds and draws one panel per (data set, model) with one
line per configuration, as the paper does (20 repetitions), and the data set's majority-class
and centralised non-private accuracy as dashed lines (principle 9 of
``docs/architecture.md``). :func:`scenario_baselines` computes those for a scenario's data set
and pre-processing, with the code a run uses.

For ``netsim report``: :func:`final_accuracy` is a learning run's final test accuracy (a
walk's last evaluation, gossip learning's last mean over models) and
:func:`learning_accuracy_samples` puts the accuracies of walk and gossip-learning runs, kept in
different tables, into one table for :data:`COMPARISON_FIGURE`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from netsim.analysis.figures import save_figure
from netsim.analysis.runs import load_run, load_run_scenario
from netsim.contracts import Baseline, Curve, FigureSpec
from netsim.errors import RunDirectoryError
from netsim.lazy import lazy_module
from netsim.learning.baselines import LearningBaselines, learning_baselines
from netsim.plotting import pyplot
from netsim.protocols.walk import IdealWalkConfig
from netsim.registry import spec_kind
from netsim.scenario.schema import Scenario

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

CONFIG_COLUMNS: tuple[str, ...] = (
    "dataset",
    "model",
    "algorithm",
    "noise",
    "normalisation",
    "sampling",
    "epsilon",
    "walk_kind",
)

#: The yardsticks of a run (``learning_summary``, netsim.learning.baselines).
BASELINE_COLUMNS: tuple[str, ...] = ("majority_accuracy", "centralised_accuracy")
#: The yardstick of centrally private training at the run's (ε, δ) (``docs/papers.md``, "The
#: central-DP yardstick"), a
#: column of ``learning_summary`` in runs that record it; runs written before have none.
CENTRAL_DP_COLUMN = "central_dp_accuracy"

#: The tables the final test accuracy and the accuracy over time are read from: a walk's SGD
#: agent evaluates a model every ``evaluate_every`` of its visits (``accuracy``, one series per
#: walk); gossip learning evaluates the current models of a fixed set of nodes every
#: ``metrics.sample_every`` (``gossip_learning_accuracy``, their mean, minimum, median and
#: maximum).
WALK_ACCURACY_TABLE = "accuracy"
GOSSIP_ACCURACY_TABLE = "gossip_learning_accuracy"
#: The table of the report's combined accuracy figure, made from the two above
#: (:func:`learning_accuracy_samples`): metric ``accuracy`` and, for a gossip-learning grid
#: point of one run, ``accuracy_min`` and ``accuracy_max``.
COMBINED_ACCURACY_TABLE = "test_accuracy"

#: The yardsticks of every learning figure of the report: dashed lines at the
#: ``learning_summary`` columns (principle 9 of ``docs/architecture.md``); a column the runs
#: lack draws no line.
YARDSTICKS: tuple[Baseline, ...] = (
    Baseline("learning_summary", "majority_accuracy", "majority class"),
    Baseline("learning_summary", "centralised_accuracy", "centralised non-private"),
    Baseline("learning_summary", CENTRAL_DP_COLUMN, "central DP at the same ε"),
)

#: Test accuracy over time of every learning run, whatever learned: a walk or gossip.
COMPARISON_FIGURE = FigureSpec(
    file="test_accuracy_compared.png",
    caption="test accuracy over time, every learning run",
    sentence=(
        "Test accuracy against simulated time of every learning run in one panel: for a "
        "walk, the mean over the models (walks) its `accuracy` table evaluated in each time "
        "bin; for gossip learning, the mean over the nodes' current models "
        "(`gossip_learning_accuracy.accuracy_mean`), with the lowest and highest model dotted "
        "when its line is one run. Dashed: the yardsticks of `learning_summary` — the "
        "majority class, centralised non-private training and, when the runs record it, "
        "central DP training at each run's own guarantee (ε, and δ = 0 for a run whose "
        "releases were all ε-DP)."
    ),
    title="Test accuracy of every learning run",
    panels=(
        Curve(
            COMBINED_ACCURACY_TABLE,
            "accuracy",
            "time",
            "test accuracy (fraction correct)",
            spread=("accuracy_min", "accuracy_max"),
            spread_label="lowest / highest model (gossip learning, one run)",
            baselines=YARDSTICKS,
        ),
    ),
)

NOISE_LABELS = {"l1": "L1", "l2_paper": "L2 (paper)", "k_norm_l2": "L2 (K-norm)"}
ALGORITHM_LABELS = {
    "dp-sgd-1": "DP-SGD-1",
    "dp-sgd-5": "DP-SGD-5",
    "dp-sgd-inf": "DP-SGD-∞",
    "sgd": "SGD (no noise)",
}


def configuration(scenario: Scenario) -> dict[str, object]:
    """The :data:`CONFIG_COLUMNS` of a learning scenario."""
    learning = scenario.learning
    if learning is None:
        raise RunDirectoryError(f"scenario {scenario.name!r} has no learning section")
    walk = scenario.walk
    if scenario.gossip_learning is not None:
        sampling, kind = "gossip", "gossip_learning"
    elif isinstance(walk, IdealWalkConfig):
        sampling, kind = walk.sampling, "ideal"
    else:
        sampling, kind = "walk_service", "service"
    return {
        "dataset": learning.dataset.name,
        "model": spec_kind(learning.model),
        "algorithm": learning.algorithm,
        "noise": spec_kind(learning.noise),
        "normalisation": learning.normalisation,
        "sampling": sampling,
        "epsilon": learning.epsilon,
        "walk_kind": kind,
    }


def curves_from_tables(tables: dict[str, pd.DataFrame], scenario: Scenario) -> pd.DataFrame:
    """The curve table of one run: per evaluation, the mean accuracy over the models that
    reached that many visits (one model for an ideal walk)."""
    if "accuracy" not in tables:
        raise RunDirectoryError(f"run of {scenario.name!r} has no accuracy table")
    accuracy = tables["accuracy"]
    curve = accuracy.groupby("visits", as_index=False)["accuracy"].mean()
    for column, value in configuration(scenario).items():
        curve[column] = value
    curve["seed"] = scenario.seed
    curve["records"] = scenario.nodes
    summary = tables.get("learning_summary")
    for column in BASELINE_COLUMNS:
        found = summary is not None and len(summary) and column in summary.columns
        curve[column] = float(summary[column].iloc[0]) if found else np.nan
    return curve[[*CONFIG_COLUMNS, "seed", "records", "visits", "accuracy", *BASELINE_COLUMNS]]


def scenario_baselines(scenario: Scenario) -> LearningBaselines:
    """The majority-class and centralised non-private accuracy on the data set of a learning
    scenario, loaded and pre-processed as its runs do
    (:func:`netsim.learning.sgd_agent.learning_data`): what ``learning_summary`` of its runs
    records, for results collected before it did."""
    from netsim.learning.sgd_agent import learning_data

    if scenario.learning is None:
        raise RunDirectoryError(f"scenario {scenario.name!r} has no learning section")
    data = learning_data(scenario.learning, scenario.nodes)
    return learning_baselines(data.x_train, data.y_train, data.x_test, data.y_test)


def curves_from_run(run_dir: Path) -> pd.DataFrame:
    """:func:`curves_from_tables` for a run directory."""
    return curves_from_tables(load_run(run_dir, parameters=False), load_run_scenario(run_dir))


def _line_label(row: pd.Series, varying: Sequence[str]) -> str:
    parts = []
    for column in varying:
        value = row[column]
        if column == "noise":
            parts.append(NOISE_LABELS.get(value, value))
        elif column == "algorithm":
            parts.append(ALGORITHM_LABELS.get(value, value))
        elif column == "epsilon":
            parts.append(f"ε = {value:g}")
        elif column == "sampling":
            parts.append(
                {"with_replacement": "with repl.", "without_replacement": "w/o repl."}.get(
                    value, value
                )
            )
        else:
            parts.append(str(value))
    return ", ".join(parts)


def run_baselines(run_dir: Path) -> tuple[float, float]:
    """The majority-class and centralised accuracy of a run directory: its
    ``learning_summary``'s, or for a run written before it had them, computed from its
    scenario (:func:`scenario_baselines`)."""
    summary = load_run(run_dir, parameters=False).get("learning_summary")
    if summary is not None and len(summary) and set(BASELINE_COLUMNS) <= set(summary.columns):
        majority, centralised = (float(summary[c].iloc[0]) for c in BASELINE_COLUMNS)
        return majority, centralised
    found = scenario_baselines(load_run_scenario(run_dir))
    return found.majority, found.centralised


#: Colours of the majority-class and centralised lines.
_BASELINE_STYLE = {"majority_accuracy": "0.45", "centralised_accuracy": "black"}


def figure_baselines(curves: pd.DataFrame) -> pd.DataFrame:
    """Per data set, the mean of the runs' yardsticks in ``curves`` (:data:`BASELINE_COLUMNS`;
    data sets whose runs lack them are left out)."""
    if not set(BASELINE_COLUMNS) <= set(curves.columns):
        return pd.DataFrame(columns=["dataset", *BASELINE_COLUMNS])
    runs = curves.drop_duplicates([*CONFIG_COLUMNS, "seed"])
    return runs.groupby("dataset", as_index=False)[list(BASELINE_COLUMNS)].mean().dropna()


def learning_figure(
    curves: pd.DataFrame,
    out: Path,
    *,
    title: str,
    columns: int = 2,
    baselines: pd.DataFrame | None = None,
    centralised_label: str = "centralised non-private",
) -> Path:
    """One panel per (data set, model): mean accuracy over seeds against walk steps (as a
    multiple of the training-set size), one line per configuration, and, dashed, the data
    set's majority-class and centralised accuracy: ``baselines`` (a row per ``dataset`` with
    :data:`BASELINE_COLUMNS`; default :func:`figure_baselines` of ``curves``), the
    centralised line named ``centralised_label``. Writes the PNG ``out``."""
    if curves.empty:
        raise RunDirectoryError(f"no accuracy curves to draw for {title!r}")
    plt = pyplot()
    panels = sorted(curves.groupby(["dataset", "model"]).groups)
    varying = [
        c for c in CONFIG_COLUMNS if c not in ("dataset", "model") and curves[c].nunique() > 1
    ]
    columns = min(columns, len(panels))
    rows = math.ceil(len(panels) / columns)
    lines = curves.groupby(varying or ["dataset"]).ngroups + 2
    if baselines is None:
        baselines = figure_baselines(curves)
    yardsticks = baselines.set_index("dataset") if len(baselines) else None
    height = 4.4 * rows + 0.35 + 0.22 * math.ceil(lines / 3)
    fig, axes = plt.subplots(rows, columns, figsize=(6.4 * columns, height), squeeze=False)
    for ax, (dataset, model) in zip(axes.ravel(), panels, strict=False):
        panel = curves[(curves["dataset"] == dataset) & (curves["model"] == model)]
        size = panel["records"].iloc[0]  # one record per node
        seeds = panel.groupby(varying or ["dataset"])["seed"].nunique().min()
        for _key, line in panel.groupby(varying or ["dataset"], sort=True):
            mean = line.groupby("visits")["accuracy"].mean()
            label = _line_label(line.iloc[0], varying)
            noise_free = line.iloc[0].get("algorithm") == "sgd"
            ax.plot(
                mean.index / size, mean.to_numpy(), "-." if noise_free else "-", label=label,
                lw=1.3,
            )  # fmt: skip
        if yardsticks is not None and dataset in yardsticks.index:
            for column, name in zip(
                BASELINE_COLUMNS, ("majority class", centralised_label), strict=True
            ):
                value = float(yardsticks.loc[dataset, column])
                colour = _BASELINE_STYLE[column]
                ax.axhline(value, color=colour, linestyle="--", lw=1.2, label=name)
                ax.text(
                    1.005, value, f"{value:.3f}", transform=ax.get_yaxis_transform(),
                    va="center", fontsize=7, color=colour,
                )  # fmt: skip
        runs = f"{seeds} run{'s' if seeds != 1 else ''} averaged"
        ax.set_title(f"{dataset}, {'LogReg' if model == 'logreg' else 'SVM'} ({runs})")
        ax.set_xlabel("walk steps (multiples of the training-set size)")
        ax.set_ylabel("test accuracy (fraction correct)")
        ax.set_ylim(0.0, 1.0)
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[len(panels) :]:
        ax.set_visible(False)
    # one legend for all panels (the same configurations in each), below them
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    legend_rows = math.ceil(len(labels) / 3)
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(title)
    bottom = (0.35 + 0.22 * legend_rows) / fig.get_figheight()
    fig.tight_layout(rect=(0, bottom, 1, 1 - 0.45 / fig.get_figheight()))
    return save_figure(fig, out)


# --- the report's comparison of learning runs --------------------------------------------------


def final_walk_accuracy(accuracy: pd.DataFrame) -> float:
    """The final test accuracy of a walk's SGD run: the mean accuracy of the models at its
    last evaluation, the rows with the most visits of an ``accuracy`` table (what ``netsim run``
    prints as "test accuracy after N visits")."""
    last = accuracy[accuracy["visits"] == accuracy["visits"].max()]
    return float(last["accuracy"].mean())


def final_gossip_accuracy(spread: pd.DataFrame) -> float:
    """The final test accuracy of a gossip-learning run: ``accuracy_mean`` of the last
    evaluation of the nodes' models (the latest row of ``gossip_learning_accuracy``)."""
    return float(spread.sort_values("time", kind="stable")["accuracy_mean"].iloc[-1])


def final_accuracy(tables: Mapping[str, pd.DataFrame]) -> float | None:
    """The final test accuracy of a learning run from its tables: gossip learning's
    (:func:`final_gossip_accuracy`) when it has ``gossip_learning_accuracy`` — its
    ``accuracy`` table holds single models, the best-travelled one no better a summary than
    any other — else the walk's (:func:`final_walk_accuracy`); None for a run with neither."""
    spread = tables.get(GOSSIP_ACCURACY_TABLE)
    if spread is not None and len(spread):
        return final_gossip_accuracy(spread)
    accuracy = tables.get(WALK_ACCURACY_TABLE)
    if accuracy is not None and len(accuracy):
        return final_walk_accuracy(accuracy)
    return None


def learning_accuracy_samples(long: pd.DataFrame) -> pd.DataFrame:
    """The rows of a collected long table (:func:`netsim.analysis.collect.collect`) that the
    report's :data:`COMPARISON_FIGURE` draws, as table :data:`COMBINED_ACCURACY_TABLE`: per
    run, gossip learning's ``accuracy_mean`` as ``accuracy`` when the run has
    ``gossip_learning_accuracy`` — with ``accuracy_min`` and ``accuracy_max`` when the run is
    its grid point's only one (a mean of the lowest models of several runs is no model's) —
    else its walk's ``accuracy`` (one series per walk, averaged per time bin when drawn)."""
    gossip = long[long["table"] == GOSSIP_ACCURACY_TABLE]
    gossip_runs = set(gossip["run"].unique())
    walk = long[
        (long["table"] == WALK_ACCURACY_TABLE)
        & (long["metric"] == "accuracy")
        & ~long["run"].isin(gossip_runs)
    ]
    runs_per_point = gossip.groupby("point")["run"].nunique()
    alone = set(runs_per_point.index[runs_per_point.to_numpy() == 1])
    metrics = gossip["metric"].map(
        {
            "accuracy_mean": "accuracy",
            "accuracy_min": "accuracy_min",
            "accuracy_max": "accuracy_max",
        }
    )
    keep = metrics.eq("accuracy") | (metrics.notna() & gossip["point"].isin(alone))
    gossip = gossip[keep].assign(metric=metrics[keep])
    return pd.concat([walk, gossip], ignore_index=True).assign(table=COMBINED_ACCURACY_TABLE)
