"""A learning run's privacy setting and data (:class:`Setting`, read from its resolved
scenario, its ``learning_summary`` and its manifest) as the comparison figure's caption lines
(:func:`setting_lines`), and the central-DP yardstick at each run's own guarantee
(:func:`central_dp_lines`): a run whose every release was ε-DP (K-norm noise,
``learning_summary.guarantee`` ``epsilon-DP``) is read against central training at (ε, 0),
output perturbation, not DP-GD at the δ its scenario states, which
``learning_summary.central_dp_accuracy`` holds; the report computes the former
(:func:`netsim.learning.central_dp.central_dp_baseline`, cached on disk as the run's own)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from netsim.analysis.collect import SweepSource, run_configuration
from netsim.analysis.learning import (
    CENTRAL_DP_COLUMN,
)
from netsim.analysis.report.curves import BaselineLine
from netsim.analysis.runs import load_manifest, load_run_scenario
from netsim.errors import RunDirectoryError
from netsim.lazy import lazy_module
from netsim.learning.sgd_agent import central_dp_accuracy, learning_data
from netsim.storage import read_table

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

#: ``learning_summary.guarantee`` as a caption says it.
GUARANTEE_TEXT: Mapping[str, str] = {"epsilon-DP": "ε-DP", "(epsilon,delta)-DP": "(ε, δ)-DP"}


@dataclass(frozen=True)
class Setting:
    """What a learning run's privacy and data were: the budget per privacy unit (ε and the δ
    the guarantee holds at: 0 for an ε-DP run whatever δ its scenario states), the δ stated,
    the noise mechanism and the guarantee its releases gave, the accounting asked for and the
    composition the ledger used, the privacy unit, the data set, N (training records) and the
    nodes."""

    epsilon: float
    delta: float
    stated_delta: float
    mechanism: str
    guarantee: str
    accounting: str
    composition: str
    unit: str
    dataset: str
    records: int
    nodes: int

    @property
    def pure(self) -> bool:
        """True iff every release was ε-DP: the guarantee holds at δ = 0."""
        return self.guarantee == "epsilon-DP"

    def privacy_text(self) -> str:
        """``ε = 1, δ = 0 (ε-DP; stated δ = 1e-05), k_norm_l2 noise, accounting basic``."""
        if self.guarantee in ("non-private", "") or not math.isfinite(self.epsilon):
            budget = f"no DP budget ({self.guarantee or 'non-private'})"
        else:
            budget = f"ε = {self.epsilon:g} per {self.unit}, δ = {self.delta:g}"
            notes = [GUARANTEE_TEXT.get(self.guarantee, self.guarantee)] if self.guarantee else []
            if self.stated_delta != self.delta:
                notes.append(f"stated δ = {self.stated_delta:g}")
            if notes:
                budget += f" ({'; '.join(notes)})"
        composition = (
            f"accounting {self.accounting}"
            if self.composition in ("", self.accounting)
            else f"accounting {self.accounting} (composed {self.composition})"
        )
        return f"{budget}, {self.mechanism} noise, {composition}"

    def data_text(self) -> str:
        """``data spambase, N = 4,140 records on 4,140 nodes``."""
        return f"data {self.dataset}, N = {self.records:,} records on {self.nodes:,} nodes"

    def text(self) -> str:
        return f"{self.privacy_text()}; {self.data_text()}"


def _summary_row(directory: Path) -> dict[str, Any]:
    """The one row of a run's ``learning_summary`` (empty without one)."""
    if "learning_summary" not in load_manifest(directory).get("tables", {}):
        return {}
    try:
        frame = read_table(directory / "learning_summary.parquet").to_pandas()
    except OSError as exc:
        raise RunDirectoryError(f"{directory}: cannot read learning_summary ({exc})") from None
    return frame.iloc[0].to_dict() if len(frame) else {}


def _kind(spec: Any) -> str:
    """A component spec's kind: the text itself, or a mapping's ``kind``."""
    if isinstance(spec, Mapping):
        return str(spec.get("kind", "?"))
    return str(spec)


def guarantee_of(summary: Mapping[str, Any], learning: Mapping[str, Any]) -> tuple[float, float]:
    """The (ε, δ) a run's guarantee holds at: the learning section's budget ε, and δ = 0 when
    every release was ε-DP (``learning_summary.guarantee`` ``epsilon-DP``: K-norm or Laplace
    noise), else the δ the section states."""
    epsilon = float(learning.get("epsilon") or math.nan)
    stated = float(learning.get("delta") or 0.0)
    pure = summary.get("guarantee") == "epsilon-DP"
    return epsilon, 0.0 if pure else stated


def run_setting(directory: Path) -> Setting | None:
    """The :class:`Setting` of the learning run at ``directory``; None for a run without a
    learning section."""
    configuration = run_configuration(directory)
    learning = configuration.get("learning")
    if not isinstance(learning, Mapping):
        return None
    summary = _summary_row(directory)
    recorded = (load_manifest(directory).get("privacy") or {}).get("learning") or {}
    epsilon, delta = guarantee_of(summary, learning)
    nodes = int(configuration.get("nodes") or 0)
    records = recorded.get("records") or nodes * int(learning.get("records_per_node") or 1)
    dataset = learning.get("dataset")
    return Setting(
        epsilon=epsilon,
        delta=delta,
        stated_delta=float(learning.get("delta") or 0.0),
        mechanism=_kind(learning.get("noise", "?")),
        guarantee=str(summary.get("guarantee", "")),
        accounting=str(learning.get("accounting", "?")),
        composition=str(summary.get("composition", "") or ""),
        unit=str(learning.get("privacy_unit", "record")),
        dataset=str(dataset.get("name") if isinstance(dataset, Mapping) else dataset),
        records=int(records),
        nodes=nodes,
    )


def point_settings(source: SweepSource, runs: pd.DataFrame) -> dict[int, Setting]:
    """The setting of each point of ``runs`` (columns ``run_id``, ``point``), from its first
    run; the seeds of a point share it."""
    settings = {}
    for run_id, point in runs.drop_duplicates("point")[["run_id", "point"]].itertuples(index=False):
        found = run_setting(source.run_directory(str(run_id)))
        if found is not None:
            settings[int(point)] = found
    return settings


def setting_lines(settings: Mapping[int, Setting], labels: Mapping[int, str]) -> list[str]:
    """The caption lines of the privacy setting and data: one when every point shares them;
    else one per distinct setting, headed by its points' legend labels (the data once when the
    points share it)."""
    if not settings:
        return []
    distinct = list(dict.fromkeys(settings.values()))
    if len(distinct) == 1:
        return [distinct[0].text()]
    data = {s.data_text() for s in distinct}
    shared = len(data) == 1
    lines = []
    for setting in distinct:
        names = ", ".join(labels.get(p, str(p)) for p, s in settings.items() if s == setting)
        text = setting.privacy_text() if shared else setting.text()
        lines.append(f"{names}: {text}")
    if shared:
        lines.append(data.pop())
    return lines


# --- the central-DP yardstick at each run's guarantee -------------------------------------------


def central_dp_value(directory: Path, epsilon: float, delta: float) -> float:
    """The central-DP yardstick of the run at ``directory`` at (``epsilon``, ``delta``): its
    ``learning_summary.central_dp_accuracy`` when (ε, δ) is the learning section's, where the
    run computed it (NaN when it recorded none: no budget, or a run older than the column);
    else — a guarantee at another δ than the one stated — computed on the run's own split
    (:func:`netsim.learning.sgd_agent.central_dp_accuracy`, cached on disk)."""
    if not (math.isfinite(epsilon) and epsilon > 0):
        return math.nan
    learning = run_configuration(directory).get("learning") or {}
    stated = (float(learning.get("epsilon") or math.nan), float(learning.get("delta") or 0.0))
    if stated == (epsilon, delta):
        return float(_summary_row(directory).get(CENTRAL_DP_COLUMN, math.nan))
    scenario = load_run_scenario(directory)
    assert scenario.learning is not None
    return central_dp_accuracy(learning_data(scenario.learning, scenario.nodes), epsilon, delta)


def central_dp_lines(
    source: SweepSource, runs: pd.DataFrame, settings: Mapping[int, Setting]
) -> list[BaselineLine]:
    """One dashed yardstick per distinct guarantee (ε, δ) among the points of ``runs``
    (columns ``run``, ``run_id``, ``point``): central DP training at it, the mean over the
    runs of the points that have it (:func:`central_dp_value`), named by it."""
    groups: dict[tuple[float, float, bool], list[float]] = {}
    for run_id, point in runs.drop_duplicates("run")[["run_id", "point"]].itertuples(index=False):
        setting = settings.get(int(point))
        if setting is None or not math.isfinite(setting.epsilon):
            continue
        key = (setting.epsilon, setting.delta)
        value = central_dp_value(source.run_directory(str(run_id)), *key)
        if math.isfinite(value):
            groups.setdefault((*key, setting.pure), []).append(value)
    return [
        BaselineLine(
            f"central DP at ε = {epsilon:g}, δ = {delta:g}" + (" (pure ε)" if pure else ""),
            float(np.mean(values)),
            float(np.min(values)),
            float(np.max(values)),
            len(values),
        )
        for (epsilon, delta, pure), values in groups.items()
    ]
