"""The report's comparison of learning runs: one figure of every learning run's test accuracy
(:data:`~netsim.analysis.learning.COMPARISON_FIGURE`) that a paper can use as it is.

- **Its privacy setting and data in a caption line** (:func:`setting_lines`): ε, δ, the noise
  mechanism and its guarantee, the accounting (and the composition the ledger used), the privacy
  unit, the data set and N (records, and nodes), read from each run's resolved scenario, its
  ``learning_summary`` and its manifest (``privacy.learning``). One line when every line of
  the figure shares the setting, else one line per setting naming its lines.
- **Seeds as a band** (:data:`~netsim.analysis.report.drawing.BAND_RANGE`): the mean over the
  runs (seeds) of a point, and a band from the lowest to the highest seed at each x; the title
  says how many seeds, or that one seed draws no band.
- **Three x axes** (:data:`X_AXES`): simulated time, passes over the data (the gradient
  updates made so far in the whole network, every model's, over the training-set size — the
  unit DP-SGD's per-record budgets are spent in) and messages sent (every message the
  transport counted, the ``samples`` table's ``messages_sent``). The runs are binned and
  averaged in time as on the time axis; each time is then put at the point's mean over its
  seeds of the passes or messages at that time (interpolated in each run's own record).
- **The central-DP yardstick at each run's own guarantee** (:func:`guarantee_of`): a run
  whose every release was ε-DP (K-norm noise: ``learning_summary.guarantee`` ``epsilon-DP``)
  is read against central training at (ε, 0), output perturbation, not DP-GD at the δ its
  scenario states; ``learning_summary.central_dp_accuracy`` holds the latter, so the report
  computes the former (:func:`netsim.learning.central_dp.central_dp_baseline`, cached on disk
  as the run's own). Points of different guarantees get a line each.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from netsim.analysis.collect import SweepSource, run_configuration
from netsim.analysis.learning import (
    CENTRAL_DP_COLUMN,
    COMPARISON_FIGURE,
    GOSSIP_ACCURACY_TABLE,
    WALK_ACCURACY_TABLE,
    YARDSTICKS,
    learning_accuracy_samples,
)
from netsim.analysis.report.curves import BaselineLine, CurveStatistics, curve_statistics
from netsim.analysis.report.drawing import BAND_RANGE, FigureOptions, draw_curve_figure, log_x
from netsim.analysis.report.styles import LineStyle
from netsim.analysis.runs import load_manifest, load_run_scenario
from netsim.contracts import FigureSpec
from netsim.errors import ReportError, RunDirectoryError
from netsim.plotting import HOURS, TimeUnit
from netsim.storage import read_table

#: The x axes the comparison figure can be drawn against.
TIME, PASSES, MESSAGES = "time", "passes", "messages"
X_AXES: tuple[str, ...] = (TIME, PASSES, MESSAGES)
#: The axis labels of the x axes other than time (time is in the runs' own unit).
X_LABELS: Mapping[str, str] = {
    PASSES: "passes over the data (gradient updates in the network / training records)",
    MESSAGES: "messages sent (every message the transport counted)",
}
#: The tables the two x axes other than time are read from.
VISITS_TABLE = "sgd_visits"
SAMPLES_TABLE = "samples"
MESSAGES_COLUMN = "messages_sent"
#: A mapped x axis spanning more decades than this is logarithmic (messages: a walk's progress
#: gossip against gossip learning's models differ by orders of magnitude).
LOG_X_OVER_DECADES = 2.0


def x_axes(choice: str | Sequence[str]) -> tuple[str, ...]:
    """The x axes asked for: ``"time,passes"`` or a sequence of names, each one of
    :data:`X_AXES`, in the order given without repeats. Raises :class:`ReportError`
    naming what is allowed."""
    names = choice.split(",") if isinstance(choice, str) else list(choice)
    names = [name.strip() for name in names if name.strip()]
    unknown = [name for name in names if name not in X_AXES]
    if unknown or not names:
        raise ReportError(
            f"x axis {', '.join(unknown) or '(none)'} is not one of {', '.join(X_AXES)} "
            "(netsim report --x-axis, write_report(x_axes=...))"
        )
    return tuple(dict.fromkeys(names))


def figure_file(axis: str) -> str:
    """The comparison figure's file on ``axis``: the time axis keeps the file's own name."""
    if axis == TIME:
        return COMPARISON_FIGURE.file
    stem = COMPARISON_FIGURE.file.removesuffix(".png")
    return f"{stem}_{axis}.png"


def comparison_spec(axis: str) -> FigureSpec:
    """:data:`~netsim.analysis.learning.COMPARISON_FIGURE` on ``axis``: its file, its title
    and its sentence say which axis; the central-DP yardstick is left to
    :func:`central_dp_lines` (one line per guarantee), the other yardsticks stay."""
    curve = replace(
        COMPARISON_FIGURE.panels[0],
        baselines=tuple(b for b in YARDSTICKS if b.column != CENTRAL_DP_COLUMN),
    )
    if axis == TIME:
        return replace(COMPARISON_FIGURE, panels=(curve,))
    against = "passes over the data" if axis == PASSES else "messages sent"
    return replace(
        COMPARISON_FIGURE,
        file=figure_file(axis),
        caption=f"test accuracy of every learning run against {against}",
        title=f"{COMPARISON_FIGURE.title} against {against}",
        sentence=COMPARISON_FIGURE.sentence.replace("against simulated time", f"against {against}")
        + f" x: {X_LABELS[axis]}, at each time bin the mean over the point's seeds.",
        panels=(curve,),
    )


def has_learning(long: pd.DataFrame) -> bool:
    """True iff some run of ``long`` evaluated a model (a walk's or gossip learning's)."""
    return bool(long["table"].isin([WALK_ACCURACY_TABLE, GOSSIP_ACCURACY_TABLE]).any())


def mixed_learning(long: pd.DataFrame) -> bool:
    """True iff some runs of ``long`` learned by gossip (``gossip_learning_accuracy``) and
    others by a walk (``accuracy`` only): their accuracies are in different tables, which
    :data:`~netsim.analysis.learning.COMPARISON_FIGURE` draws in one panel."""
    gossip = set(long.loc[long["table"] == GOSSIP_ACCURACY_TABLE, "run"])
    walk = set(long.loc[long["table"] == WALK_ACCURACY_TABLE, "run"])
    return bool(gossip) and bool(walk - gossip)


# --- the privacy setting ------------------------------------------------------------------------

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
    ``learning_summary.central_dp_accuracy`` when that was computed there (at the learning
    section's ε and δ), else computed on the run's own split
    (:func:`netsim.learning.sgd_agent.central_dp_accuracy`); NaN for a run without a budget."""
    from netsim.learning.sgd_agent import central_dp_accuracy, learning_data

    if not (math.isfinite(epsilon) and epsilon > 0):
        return math.nan
    learning = run_configuration(directory).get("learning") or {}
    summary = _summary_row(directory)
    recorded = float(summary.get(CENTRAL_DP_COLUMN, math.nan))
    stated = (float(learning.get("epsilon") or math.nan), float(learning.get("delta") or 0.0))
    if stated == (epsilon, delta) and not math.isnan(recorded):
        return recorded
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


# --- passes and messages ------------------------------------------------------------------------


@dataclass(frozen=True)
class AxisMap:
    """A run's passes or messages at a time: ``values`` at ``times`` (sorted), read as a step
    (``step``: the count of events at or before the time, each event one ``values`` step) or
    linearly between samples (a cumulative counter sampled now and then)."""

    times: np.ndarray
    values: np.ndarray
    step: bool = False

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.step:
            return self.values[np.searchsorted(self.times, x, side="right")]
        return np.interp(x, self.times, self.values)


def _cumulative_updates(directory: Path, records: int) -> AxisMap | None:
    """Passes over the data of a run at each time: the visits of its ``sgd_visits`` that
    updated a model (every model's) at or before it, over its ``records``; None for a run
    without the table."""
    if VISITS_TABLE not in load_manifest(directory).get("tables", {}):
        return None
    try:
        visits = read_table(directory / f"{VISITS_TABLE}.parquet").to_pandas()
    except OSError as exc:
        raise RunDirectoryError(f"{directory}: cannot read {VISITS_TABLE} ({exc})") from None
    times = np.sort(visits.loc[visits["updated"].astype(bool), "time"].to_numpy(dtype=float))
    return AxisMap(times, np.arange(times.size + 1, dtype=float) / records, step=True)


def _cumulative_messages(long: pd.DataFrame, run: int) -> AxisMap | None:
    """Messages sent by run ``run`` at each time, linear between its ``samples`` rows in
    ``long`` (from none at time 0); None without them."""
    rows = long[
        (long["run"] == run)
        & (long["table"] == SAMPLES_TABLE)
        & (long["metric"] == MESSAGES_COLUMN)
    ].sort_values("time")
    if rows.empty:
        return None
    times = rows["time"].to_numpy(dtype=float)
    values = rows["value"].to_numpy(dtype=float)
    if times[0] > 0:
        times, values = np.append(0.0, times), np.append(0.0, values)
    return AxisMap(times, values)


def axis_maps(
    axis: str,
    source: SweepSource,
    runs: pd.DataFrame,
    long: pd.DataFrame,
    settings: Mapping[int, Setting],
) -> dict[int, AxisMap]:
    """Per run of ``runs`` (columns ``run``, ``run_id``, ``point``): the map that puts a time
    on ``axis`` — passes over the data (updates / the point's N records) or messages sent.
    Runs without the record are left out."""
    maps = {}
    for run, run_id, point in runs.drop_duplicates("run")[["run", "run_id", "point"]].itertuples(
        index=False
    ):
        found = None
        if axis == PASSES:
            setting = settings.get(int(point))
            if setting is not None and setting.records > 0:
                found = _cumulative_updates(source.run_directory(str(run_id)), setting.records)
        else:
            found = _cumulative_messages(long, int(run))
        if found is not None:
            maps[int(run)] = found
    return maps


def _map_point_x(
    frame: pd.DataFrame, maps: Mapping[int, AxisMap], members: Mapping
) -> pd.DataFrame:
    """``frame`` (columns ``point``, ``x`` in seconds) with each x put at the mean over the
    point's runs (``members``: point -> runs) of their map at that time; points none of whose
    runs has a map are left out."""
    pieces = []
    for point, part in frame.groupby("point", sort=True):
        found = [maps[r] for r in members.get(int(point), ()) if r in maps]
        if not found:
            continue
        x = part["x"].to_numpy(dtype=float)
        mapped = np.mean([found_map(x) for found_map in found], axis=0)
        pieces.append(part.assign(x=mapped))
    return pd.concat(pieces, ignore_index=True) if pieces else frame.iloc[:0]


def _map_runs_x(runs: pd.DataFrame, maps: Mapping[int, AxisMap]) -> pd.DataFrame:
    """Each run's own values (``run, point, x, value``) with x put on the run's own map."""
    pieces = [
        part.assign(x=maps[int(run)](part["x"].to_numpy(dtype=float)))
        for run, part in runs.groupby("run", sort=True)
        if int(run) in maps
    ]
    return pd.concat(pieces, ignore_index=True) if pieces else runs.iloc[:0]


def mapped_statistics(
    statistics: CurveStatistics,
    maps: Mapping[int, AxisMap],
    runs: pd.DataFrame,
) -> CurveStatistics:
    """``statistics`` (on the time axis) with every x on the axis ``maps`` give."""
    members = runs.groupby("point")["run"].apply(lambda r: sorted({int(x) for x in r})).to_dict()
    spread = statistics.spread
    if spread is not None:
        spread = (_map_point_x(spread[0], maps, members), _map_point_x(spread[1], maps, members))
    return replace(
        statistics,
        frame=_map_point_x(statistics.frame, maps, members),
        runs=None if statistics.runs is None else _map_runs_x(statistics.runs, maps),
        reference=None
        if statistics.reference is None
        else _map_point_x(statistics.reference, maps, members),
        spread=spread,
    )


# --- the figure ---------------------------------------------------------------------------------


def seeds_text(counts: Sequence[int]) -> str:
    """What the comparison's lines and band are over, for its title."""
    low, high = min(counts, default=0), max(counts, default=0)
    if high <= 1:
        return "one seed per line: no band (run more seeds to see their spread)"
    span = f"{high}" if low == high else f"{low}–{high}"
    return f"mean over {span} seeds per line; band: lowest to highest seed"


@dataclass(frozen=True)
class Comparison:
    """What the comparison figures of one report share: the runs' source, the learning runs'
    samples (and which runs, of which points), their settings and caption lines, the
    per-guarantee central-DP yardsticks and the lines' labels, styles and repetitions."""

    source: SweepSource
    samples: pd.DataFrame
    runs: pd.DataFrame
    settings: Mapping[int, Setting]
    captions: tuple[str, ...]
    central: tuple[BaselineLine, ...]
    labels: Mapping[int, str]
    styles: Mapping[int, LineStyle]
    repetitions: Mapping[int, int]


def prepare_comparison(
    long: pd.DataFrame,
    source: SweepSource,
    labels: Mapping[int, str],
    styles: Mapping[int, LineStyle],
    repetitions: Mapping[int, int],
) -> Comparison:
    """Read what every comparison figure of ``long``'s learning runs needs, once."""
    samples = pd.concat([long, learning_accuracy_samples(long)], ignore_index=True)
    learned = samples.loc[samples["table"] == COMPARISON_FIGURE.panels[0].table, "run"].unique()
    runs = source.plan[source.plan["run"].isin(learned)][["run", "run_id", "point"]]
    settings = point_settings(source, runs)
    return Comparison(
        source,
        samples,
        runs,
        settings,
        tuple(setting_lines(settings, labels)),
        tuple(central_dp_lines(source, runs, settings)),
        labels,
        styles,
        repetitions,
    )


def draw_comparison(
    comparison: Comparison, axis: str, out: Path, unit: TimeUnit = HOURS
) -> tuple[FigureSpec, str] | None:
    """Draw the comparison figure on ``axis`` into the directory ``out``: returns its spec
    and how its runs were binned, or None when nothing can be drawn on that axis (no learning
    run has the record it needs)."""
    spec = comparison_spec(axis)
    statistics = curve_statistics(comparison.samples, spec.panels[0])
    if statistics.empty:
        return None
    statistics = replace(statistics, baselines=statistics.baselines + comparison.central)
    options = FigureOptions(
        band=BAND_RANGE,
        notes=comparison.captions,
        repetitions=seeds_text(
            [comparison.repetitions.get(int(p), 0) for p in comparison.runs["point"].unique()]
        ),
    )
    if axis != TIME:
        maps = axis_maps(
            axis, comparison.source, comparison.runs, comparison.samples, comparison.settings
        )
        statistics = mapped_statistics(statistics, maps, comparison.runs)
        if statistics.empty:
            return None
        options = replace(
            options,
            xlabel=X_LABELS[axis],
            x_scale=1.0,
            log_x=log_x([statistics], LOG_X_OVER_DECADES),
        )
    binned = draw_curve_figure(
        spec, [statistics], dict(comparison.labels), dict(comparison.styles),
        dict(comparison.repetitions), out / spec.file, unit, options,
    )  # fmt: skip
    stated = " ".join(f"{line}." for line in comparison.captions)
    sentence = f"{spec.sentence} Lines: {options.repetitions}."
    if stated:
        sentence += f" Privacy setting and data: {stated}"
    return replace(spec, sentence=sentence), binned
