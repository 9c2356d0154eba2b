"""Run directories as pandas DataFrames."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from netsim.errors import RunDirectoryError
from netsim.lazy import lazy_module
from netsim.scenario.loader import load_scenario, scenario_file_problem
from netsim.scenario.schema import Scenario
from netsim.storage import (
    SCENARIO,
    UNVERIFIED_REASON,
    RunCheck,
    check_run,
    complete_manifest,
    manifest_problem,
    read_table,
)
from netsim.units import format_duration

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")


def load_manifest(path: Path) -> dict[str, Any]:
    """The manifest of a complete run directory."""
    manifest = complete_manifest(path)
    if manifest is None:
        raise RunDirectoryError(f"{path}: not a complete run directory ({manifest_problem(path)})")
    return manifest


def scenario_checked(check: RunCheck, manifest: Mapping[str, Any] | None) -> RunCheck:
    """``check``, damaged when its files match their checksums but its ``scenario.yaml`` is
    not the scenario the manifest's ``scenario_hash`` names
    (:func:`~netsim.scenario.loader.scenario_file_problem`: a file swapped with its checksum
    recomputed)."""
    if check.state == "damaged" or manifest is None:
        return check
    problem = scenario_file_problem(check.directory, manifest)
    if problem is None:
        return check
    return dataclasses.replace(
        check, state="damaged", problems=(*check.problems, (SCENARIO, problem))
    )


def damaged_message(path: Path, reasons: list[str]) -> str:
    """The message that refuses the damaged run at ``path``: what is wrong, and what to do."""
    return (
        f"{path}: damaged run directory: {'; '.join(reasons)}; it is not read (netsim verify "
        "checks runs; run it again, or remove it)"
    )


def unverified_message(path: Path) -> str:
    """The message that refuses the unverified run at ``path`` (no checksums to check it by)."""
    return (
        f"{path}: unverified run directory: {UNVERIFIED_REASON}; it is not read unless asked "
        "(--allow-unverified, or allow_unverified=True in Python; or run it again)"
    )


def load_run(
    path: Path, *, parameters: bool = True, allow_unverified: bool = False
) -> dict[str, pd.DataFrame]:
    """Every event table of a complete run. Each row is tagged with the run id (first column)
    and, with ``parameters``, then the run's parameters (the keys given on top of its
    scenario file, by ``--set`` or a sweep point; one column per dotted key, unless the
    table has a column of that name). Code that merges a run's tables reads them without.

    A damaged run is refused (:class:`RunDirectoryError`); so is an unverified one (its
    manifest records no checksums) unless ``allow_unverified``."""
    path = Path(path)
    manifest = load_manifest(path)
    check = scenario_checked(check_run(path, manifest), manifest)
    if check.state == "damaged":
        raise RunDirectoryError(damaged_message(path, check.reasons))
    if check.state == "unverified" and not allow_unverified:
        raise RunDirectoryError(unverified_message(path))
    run_id = manifest["run_id"]
    # runs made before the manifest recorded them have none
    recorded = (manifest.get("parameters") or {}) if parameters else {}
    frames: dict[str, pd.DataFrame] = {}
    for name in manifest["tables"]:
        file = path / f"{name}.parquet"
        try:
            frame = read_table(file).to_pandas()
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise RunDirectoryError(f"{path}: {file.name} cannot be read ({exc})") from None
        frame.insert(0, "run_id", run_id)
        for position, (key, value) in enumerate(recorded.items(), start=1):
            if key not in frame.columns:
                frame.insert(position, key, [value] * len(frame))
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
    for part in scenario.plan.parts:
        prefix = part.table_prefix
        if not prefix:
            lines.extend(part.cls.summary_lines(tables))
            continue
        # an instance whose tables carry its name: its lines from its own tables, so named
        own = {name[len(prefix) :]: t for name, t in tables.items() if name.startswith(prefix)}
        lines.extend(f"{part.instance}: {line}" for line in part.cls.summary_lines(own))
    return lines
