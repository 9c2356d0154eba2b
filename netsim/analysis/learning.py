"""Accuracy curves of private SGD runs and the figures of Hegedűs et al. (2016) Fig. 4–7.

A *curve table* has one row per (run, evaluation): the configuration columns of
:data:`CONFIG_COLUMNS`, ``seed``, ``records`` (one per node), ``visits`` (the model's walk
steps so far, the paper's x-axis "updates") and ``accuracy``. :func:`curves_from_run` makes
one from a run directory or from in-memory tables; :func:`learning_figure` averages over seeds
and draws one panel per (data set, model) with one line per configuration, as the paper does
(20 repetitions).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from netsim.analysis.figures import _pyplot, save_figure
from netsim.analysis.runs import load_run, load_run_scenario
from netsim.errors import RunDirectoryError
from netsim.protocols.walk import IdealWalkConfig
from netsim.scenario.schema import Scenario

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
        "model": learning.model,
        "algorithm": learning.algorithm,
        "noise": learning.noise,
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
    return curve[[*CONFIG_COLUMNS, "seed", "records", "visits", "accuracy"]]


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


def learning_figure(curves: pd.DataFrame, out: Path, *, title: str, columns: int = 2) -> Path:
    """One panel per (data set, model): mean accuracy over seeds against walk steps (as a
    multiple of the training-set size), one line per configuration. Writes the PNG ``out``."""
    if curves.empty:
        raise RunDirectoryError(f"no accuracy curves to draw for {title!r}")
    plt = _pyplot()
    panels = sorted(curves.groupby(["dataset", "model"]).groups)
    varying = [
        c for c in CONFIG_COLUMNS if c not in ("dataset", "model") and curves[c].nunique() > 1
    ]
    columns = min(columns, len(panels))
    rows = math.ceil(len(panels) / columns)
    lines = curves.groupby(varying or ["dataset"]).ngroups
    height = 4.4 * rows + 0.35 + 0.22 * math.ceil(lines / 3)
    fig, axes = plt.subplots(rows, columns, figsize=(6.4 * columns, height), squeeze=False)
    for ax, (dataset, model) in zip(axes.ravel(), panels, strict=False):
        panel = curves[(curves["dataset"] == dataset) & (curves["model"] == model)]
        size = panel["records"].iloc[0]  # one record per node
        seeds = panel.groupby(varying or ["dataset"])["seed"].nunique().min()
        for _key, line in panel.groupby(varying or ["dataset"], sort=True):
            mean = line.groupby("visits")["accuracy"].mean()
            label = _line_label(line.iloc[0], varying)
            dashed = line.iloc[0].get("algorithm") == "sgd"
            ax.plot(
                mean.index / size, mean.to_numpy(), "--" if dashed else "-", label=label, lw=1.3
            )
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
