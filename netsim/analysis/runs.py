"""Run directories as pandas DataFrames."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from netsim.errors import RunDirectoryError
from netsim.scenario.loader import load_scenario
from netsim.scenario.schema import Scenario
from netsim.storage import SCENARIO, complete_manifest
from netsim.units import format_duration


def load_manifest(path: Path) -> dict[str, Any]:
    """The manifest of a complete run directory."""
    manifest = complete_manifest(path)
    if manifest is None:
        raise RunDirectoryError(
            f"{path}: not a complete run directory (no manifest.json with status 'complete')"
        )
    return manifest


def load_run(path: Path) -> dict[str, pd.DataFrame]:
    """Every event table of a complete run, each row tagged with the run id (first column)."""
    path = Path(path)
    manifest = load_manifest(path)
    run_id = manifest["run_id"]
    frames: dict[str, pd.DataFrame] = {}
    for name in manifest["tables"]:
        file = path / f"{name}.parquet"
        if not file.is_file():
            raise RunDirectoryError(f"{path}: table file {file.name} is missing")
        frame = pq.read_table(file).to_pandas()
        frame.insert(0, "run_id", run_id)
        frames[name] = frame
    return frames


def load_run_scenario(path: Path) -> Scenario:
    """The resolved scenario a run was made from."""
    return load_scenario(Path(path) / SCENARIO)


def summarize_run(tables: dict[str, pd.DataFrame], scenario: Scenario) -> list[str]:
    """A few lines a person wants to see after a run."""
    lines = [
        f"scenario {scenario.name}: {scenario.nodes} nodes, "
        f"{format_duration(scenario.duration)} simulated, seed {scenario.seed}"
    ]
    samples = tables.get("samples")
    if samples is not None and len(samples):
        online = samples["online"].to_numpy()
        lines.append(
            f"online nodes: mean {online.mean():.0f} ({online.mean() / scenario.nodes:.0%}), "
            f"min {online.min()}, max {online.max()}"
        )
        last = samples.iloc[-1]
        lines.append(
            f"messages: {last['messages_sent']} sent, {last['messages_delivered']} delivered, "
            f"{last['messages_lost']} lost; churn transitions: {last['churn_transitions']}"
        )
    lost = tables.get("messages_lost")
    if lost is not None and len(lost):
        reasons = lost["reason"].value_counts().sort_index()
        lines.append("lost by reason: " + ", ".join(f"{r} {c}" for r, c in reasons.items()))
    broadcasts = tables.get("broadcasts")
    if broadcasts is not None and len(broadcasts):
        for column in (c for c in broadcasts.columns if c.startswith("t") and c[1:2].isdigit()):
            reached = broadcasts[column].dropna()
            if reached.empty:
                lines.append(f"broadcast {column}: never reached in {len(broadcasts)} updates")
                continue
            lines.append(
                f"broadcast time to {column[1:]}% of online nodes: median "
                f"{format_duration(float(np.median(reached)))}, max "
                f"{format_duration(float(reached.max()))} "
                f"({len(reached)}/{len(broadcasts)} updates)"
            )
    walk = tables.get("walk_summary")
    if walk is not None and len(walk):
        row = walk.iloc[0]
        lines.append(
            f"walks: mean {row['mean_propagating']:.3f} propagating, {row['restarts']} restarts, "
            f"{row['steps']} steps"
        )
    lines.extend(_learning_lines(tables))
    lines.extend(_dola_lines(tables))
    lines.extend(_mi_ogd_lines(tables))
    return lines


def _mi_ogd_lines(tables: dict[str, pd.DataFrame]) -> list[str]:
    """Rounds, regret against its bound, and the leakage of an MI-private OGD run."""
    summary = tables.get("mi_ogd_summary")
    if summary is None or not len(summary):
        return []
    row = summary.iloc[0]
    return [
        f"mi_ogd: {row['setting']} information, {row['loss']} loss, d = {row['dimension']}, "
        f"σ = {row['sigma']:g}; {row['played']} of {row['rounds']} rounds played, "
        f"{row['applied']} reports applied; regret {row['regret']:.4g} (bound "
        f"{row['bound']:.4g})",
        f"mi_ogd leakage: {row['leakage_per_report']:.4g} nats per report, at most "
        f"{row['leakage_max_per_example']:.4g} nats per example",
    ]


def _dola_lines(tables: dict[str, pd.DataFrame]) -> list[str]:
    """Regret, accuracy and the privacy guarantee of a DOLA run."""
    summary = tables.get("dola_summary")
    if summary is None or not len(summary):
        return []
    row = summary.iloc[0]
    lines = [
        f"dola: {row['algorithm']}, {row['nodes']} nodes, {row['rounds']} rounds, batch "
        f"{row['batch']}; average regret R/T {row['average_regret']:.4g} "
        f"({row['average_regret'] / row['nodes']:.4g} per node)",
        f"dola test accuracy: averaged iterate {row['accuracy_averaged']:.3f}, mean model "
        f"{row['accuracy_mean']:.3f}, regret node {row['accuracy_node']:.3f}; sparsity "
        f"{row['sparsity_node']:.1%}",
        f"dola privacy per example: {row['guarantee']}",
    ]
    return lines


def _learning_lines(tables: dict[str, pd.DataFrame]) -> list[str]:
    """Final test accuracy, updates and the privacy guarantee of a learning run."""
    summary = tables.get("learning_summary")
    if summary is None or not len(summary):
        return []
    row = summary.iloc[0]
    guarantee = {
        "non-private": "none (no noise)",
        "none": f"no DP guarantee (e.g. the paper's L2 noise), ε = {row['epsilon']:g} charged",
        "epsilon-DP": f"ε-DP with ε = {row['epsilon']:g}",
        "(epsilon,delta)-DP": f"(ε, δ)-DP with ε = {row['epsilon']:g}, δ = {row['delta']:g}",
    }.get(row["guarantee"], row["guarantee"])
    lines = [
        f"learning: {row['updates']} updates, {row['refused']} visits refused (budget spent); "
        f"privacy per record: {guarantee}"
    ]
    accuracy = tables.get("accuracy")
    if accuracy is not None and len(accuracy):
        last = accuracy[accuracy["visits"] == accuracy["visits"].max()]
        lines.append(
            f"test accuracy after {last['visits'].iloc[0]} visits: {last['accuracy'].mean():.3f}"
        )
    return lines
