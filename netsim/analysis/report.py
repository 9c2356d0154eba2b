"""The standard figures of a sweep (or a single run) and a Markdown page that shows them.

:func:`write_report` collects the runs (:func:`netsim.analysis.collect.collect`), draws the
figures whose tables the runs have — walk counts, accuracy, regret, privacy spent, online
nodes — and writes ``report.md`` with the grid, the failed runs, a table of the one-row summary
metrics per grid point and the figures. Every line of a figure is one grid point: the mean over
its repetitions, with a band for the Student t confidence interval of the mean when it has
several (:func:`netsim.analysis.collect.summarize`). Long series (more than
:data:`LONG_SERIES_SAMPLES` samples a run) are first averaged per run into at most
:data:`MAX_LONG_SERIES_BINS` equal time bins, as the title says; a panel whose positive means
span more than :data:`LOG_Y_OVER_DECADES` decades gets a logarithmic y-axis. Lines are told
apart by colour, and in grids of more than ten points also by line style (one varying
parameter) — see :func:`point_styles` — and named by the parameters a sweep varies, or for
runs read from their directories (``netsim report A B --out C``) by their names or the scenario
keys that differ (:func:`point_labels`). Time axes are in seconds, minutes, hours or days by
the runs' simulated duration (:func:`netsim.plotting.time_unit`).

Runs that learned, by a walk or by gossip, get their final test accuracy as the first row of
the summary table, beside the yardsticks of ``learning_summary`` (:func:`final_accuracies`);
when some learned by a walk and others by gossip, one figure draws all their accuracies over
time (:data:`netsim.analysis.learning.COMPARISON_FIGURE`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from netsim.analysis.collect import (
    SweepSource,
    bound_audit_shares,
    check_runs,
    format_value,
    half_width,
    load_sweep,
    long_table,
    pair_distance_samples,
    parameter_columns,
    refuse_damaged,
    run_configuration,
    run_name,
    run_status,
    summarize,
)
from netsim.analysis.figures import _pyplot, save_figure
from netsim.analysis.labels import series_labels
from netsim.analysis.learning import (
    COMPARISON_FIGURE,
    GOSSIP_ACCURACY_TABLE,
    WALK_ACCURACY_TABLE,
    YARDSTICKS,
    final_accuracy,
    learning_accuracy_samples,
)
from netsim.analysis.runs import load_manifest
from netsim.contracts import Curve, FigureSpec
from netsim.errors import NetsimError, RunDirectoryError
from netsim.plotting import HOURS, TimeUnit, time_unit
from netsim.storage import atomic_write_text, read_table
from netsim.units import DAY, HOUR, MINUTE

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

REPORT_FILE = "report.md"
REPORT_DIR = "report"
CONFIDENCE = 0.95
#: At most this many time bins when the runs' time stamps differ (e.g. accuracy evaluations).
MAX_TIME_BINS = 100
#: A run with more samples than this on a curve's axis is averaged into at most
#: :data:`MAX_LONG_SERIES_BINS` equal bins first: a dozen lines of a few hundred noisy samples
#: each cannot be told apart.
LONG_SERIES_SAMPLES = 150
MAX_LONG_SERIES_BINS = 120
#: A panel's y-axis is logarithmic when the positive means span more decades than this.
LOG_Y_OVER_DECADES = 2.0
#: With fewer repetitions per point than this, a figure draws every run instead of a band (a
#: Student t interval over two runs is 12.7 standard errors wide and says little).
BAND_FROM_REPETITIONS = 3
LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


#: The figure of the network itself (every run has its ``samples`` table).
NETWORK_FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec(
        file="online_nodes.png",
        caption="online nodes over time",
        sentence="The number of nodes online against simulated time (churn).",
        title="Online nodes",
        panels=(Curve("samples", "online", "time", "online nodes (number of nodes)"),),
    ),
)
PRIVACY_FIGURE = FigureSpec(
    file="privacy_spent.png",
    caption="privacy spent per grid point",
    sentence=(
        "The largest ε any record spent (basic composition over its uses) per grid point, "
        "with the confidence interval of the mean over repetitions."
    ),
    title="Privacy spent",
    panels=(Curve("privacy", "epsilon_spent_max", "point", "ε spent (largest over records)"),),
)
#: Privacy per observer against the hops between observer and record (runs that state it:
#: ``privacy.model network``, Muffliato). Drawn by :func:`_draw_pairwise_figure`; the panel
#: names the table and its metric, its x axis is the hop count.
PAIRWISE_FIGURE = FigureSpec(
    file="privacy_by_distance.png",
    caption="privacy per observer against the hops between observer and record",
    sentence=(
        "The mean ε of the (observer, record) pairs at each shortest-path distance on the "
        "topology (privacy_pairs, single observers; the run's own view: path known for a walk, "
        "exact for Gaussian gossip averaging), with the confidence interval of the mean over "
        "repetitions; dashed: the same runs' local ε (every release public)."
    ),
    title="Privacy per observer against distance",
    panels=(Curve("privacy_pairs", "epsilon", "point", "ε of a pair (mean over the pairs)"),),
)


def builtin_figures() -> tuple[FigureSpec, ...]:
    """The figures of the network and of every built-in component."""
    from netsim.scenario.plan import builtin_component_classes

    specs = (*NETWORK_FIGURES, *(s for c in builtin_component_classes() for s in c.figures))
    return tuple({spec.file: spec for spec in specs}.values())


def component_figures(source: SweepSource, status: pd.DataFrame) -> tuple[FigureSpec, ...]:
    """The network's figure and the figures of every component the complete runs were built
    from (their manifests name the classes); for runs whose manifests do not, the figures of
    every built-in component. A component class that no longer imports contributes none."""
    from netsim.registry import import_reference

    references: dict[tuple[str, str], None] = {}  # (class reference, table prefix)
    recorded = False
    for run_id in status.loc[status["status"] == "complete", "run_id"]:
        manifest = load_manifest(source.run_directory(str(run_id)))
        components = manifest.get("components")
        if components is not None:
            recorded = True
            prefixes = manifest.get("table_prefixes", {})
            references.update(
                dict.fromkeys((ref, prefixes.get(key, "")) for key, ref in components.items())
            )
    if not recorded:
        return builtin_figures()
    specs = {spec.file: spec for spec in NETWORK_FIGURES}
    for reference, prefix in references:
        try:
            cls = import_reference(reference)
        except NetsimError:
            continue
        for spec in getattr(cls, "figures", ()):
            spec = prefixed_figure(spec, prefix) if prefix else spec
            specs.setdefault(spec.file, spec)
    return tuple(specs.values())


def prefixed_figure(spec: FigureSpec, prefix: str) -> FigureSpec:
    """``spec`` drawn from the tables of an instance whose tables carry its name
    (``<prefix><table>``): its own file, and its name in the caption and title."""
    name = prefix.rstrip(".")

    def curve(panel: Curve) -> Curve:
        baselines = tuple(b._replace(table=prefix + b.table) for b in panel.baselines)
        return replace(panel, table=prefix + panel.table, baselines=baselines)

    return replace(
        spec, file=prefix + spec.file, caption=f"{name}: {spec.caption}",
        title=f"{name}: {spec.title}", panels=tuple(curve(p) for p in spec.panels),
    )  # fmt: skip


# --- what the lines are -----------------------------------------------------------------------


def varying_parameters(source: SweepSource) -> list[str]:
    """The parameters whose value differs between grid points of the plan."""
    points = source.plan.drop_duplicates("point")
    return [p for p in source.parameters if points[p].nunique(dropna=False) > 1]


def short_names(keys: Sequence[str]) -> dict[str, str]:
    """Each dotted key by its shortest ending of whole components that no other key shares
    (``walk.timeout`` -> ``timeout``, but ``a.rate`` and ``b.rate`` stay as they are)."""
    names = {}
    for key in keys:
        parts = key.split(".")
        for length in range(1, len(parts) + 1):
            suffix = parts[-length:]
            if not any(other != key and other.split(".")[-length:] == suffix for other in keys):
                break
        names[key] = ".".join(suffix)
    return names


def point_labels(source: SweepSource) -> dict[int, str]:
    """How each grid point is named in legends. A sweep's: the parameters that vary, by their
    shortest unambiguous name (``transfer_time=0.1, timeout=1.1, kill_probability=0``). Runs
    read from their directories (``netsim report A B``): their run's name, or when names are
    shared the scenario keys that differ (:func:`netsim.analysis.labels.series_labels`)."""
    if source.directories is not None:
        return run_point_labels(source)
    varying = varying_parameters(source)
    names = short_names(varying)
    labels = {}
    for _, row in source.plan.drop_duplicates("point").iterrows():
        parts = [f"{names[p]}={format_value(row[p])}" for p in varying]
        labels[int(row["point"])] = ", ".join(parts) if parts else source.name
    return labels


def run_point_labels(source: SweepSource) -> dict[int, str]:
    """The legend label of each point of runs read from their directories: each point by its
    first run's name and resolved scenario (:func:`~netsim.analysis.labels.series_labels`);
    a point whose runs go by several names is named by its scenario's name."""
    points = source.plan.sort_values("run").drop_duplicates("point")
    names, configurations = [], []
    for point, run_id in zip(points["point"], points["run_id"], strict=True):
        runs = source.plan.loc[source.plan["point"] == point, "run_id"]
        manifests = [load_manifest(source.run_directory(str(r))) for r in runs]
        given = {run_name(m) for m in manifests}
        names.append(given.pop() if len(given) == 1 else str(manifests[0]["scenario_name"]))
        configurations.append(run_configuration(source.run_directory(str(run_id))))
    labels = series_labels(names, configurations)
    return {int(p): label for p, label in zip(points["point"], labels, strict=True)}


@dataclass(frozen=True)
class LineStyle:
    """How one grid point is drawn, the same in every figure."""

    colour: object
    linestyle: str = "-"
    marker: str = "o"


def _style_parameter(rows: pd.DataFrame, varying: Sequence[str]) -> str | None:
    """The parameter to draw as line style: the one with the fewest values (2–4) for which the
    other varying parameters need at most 10 colours, then the one needing the fewest colours,
    then the later one (the grid's inner loop); None when there is none such."""
    best, best_key = None, None
    for parameter in varying:
        values = rows[parameter].nunique(dropna=False)
        if not 2 <= values <= len(LINE_STYLES):
            continue
        others = [p for p in varying if p != parameter]
        colours = len(rows[others].drop_duplicates()) if others else 1
        key = (values, colours)
        if colours <= 10 and (best_key is None or key <= best_key):
            best, best_key = parameter, key
    return best


def point_styles(source: SweepSource) -> dict[int, LineStyle]:
    """A colour, line style and marker per grid point. Up to 10 points: one tab10 colour each.
    More: one colour per value of all but one varying parameter and a line style (and marker)
    per value of that one, when it works out to at most 10 colours; else tab20 (up to 20
    points) or viridis, with the line styles cycling so that neighbouring colours differ."""
    plt = _pyplot()
    rows = source.plan.drop_duplicates("point").sort_values("point").reset_index(drop=True)
    points = [int(p) for p in rows["point"]]
    if len(points) <= 10:
        cmap = plt.get_cmap("tab10")
        return {p: LineStyle(cmap(i), "-", MARKERS[i]) for i, p in enumerate(points)}
    varying = varying_parameters(source)
    by_style = _style_parameter(rows, varying)
    if by_style is not None:
        others = [p for p in varying if p != by_style]
        groups = (
            rows.groupby(others, sort=False, dropna=False).ngroup().to_numpy()
            if others
            else np.zeros(len(rows), dtype=int)
        )
        values, _ = pd.factorize(rows[by_style], use_na_sentinel=False)
        cmap = plt.get_cmap("tab10")
        return {
            p: LineStyle(cmap(int(group)), LINE_STYLES[k], MARKERS[k])
            for p, group, k in zip(points, groups, values, strict=True)
        }
    if len(points) <= 20:
        cmap = plt.get_cmap("tab20")
        colours = [cmap(i) for i in range(len(points))]
    else:
        cmap = plt.get_cmap("viridis")
        colours = [cmap(i / (len(points) - 1)) for i in range(len(points))]
    return {
        p: LineStyle(colours[i], LINE_STYLES[i % len(LINE_STYLES)], MARKERS[i % len(MARKERS)])
        for i, p in enumerate(points)
    }


def repetitions_text(counts: Sequence[int]) -> str:
    """What a figure's lines are averaged over, for its title."""
    low, high = min(counts), max(counts)
    if high <= 1:
        return "one run" if len(counts) == 1 else "one repetition per point"
    span = f"{high}" if low == high else f"{low}–{high}"
    if high < BAND_FROM_REPETITIONS:
        return f"mean of {span} repetitions per point; thin lines: the runs"
    return f"mean of {span} repetitions per point; band: {CONFIDENCE:.0%} CI of the mean"


# --- curves -----------------------------------------------------------------------------------


def _aligned(samples: pd.DataFrame, axis: str) -> bool:
    """True iff every run of a grid point sampled at the same ``axis`` values."""
    runs_per_point = samples.groupby("point")["run"].nunique()
    runs_at = samples.drop_duplicates(["run", axis]).groupby(["point", axis])["run"].nunique()
    expected = runs_per_point.reindex(runs_at.index.get_level_values("point")).to_numpy()
    return bool((runs_at.to_numpy() == expected).all())


NICE_TIME_WIDTHS = (
    *(m * 10.0**e for e in range(-3, 1) for m in (1, 2, 5)),
    10.0, 15.0, 20.0, 30.0,
    MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 15 * MINUTE, 20 * MINUTE, 30 * MINUTE,
    HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY,
)  # fmt: skip


def _one_two_five(raw: float) -> float:
    """The smallest 1, 2 or 5 × 10^k not below ``raw`` (> 0)."""
    exponent = math.floor(math.log10(raw))
    for mantissa in (1, 2, 5, 10):
        width = mantissa * 10.0**exponent
        if width >= raw * (1 - 1e-9):
            return width
    return 10.0 ** (exponent + 1)  # pragma: no cover - the loop always returns


def _nice_width(raw: float, axis: str) -> float:
    """A round bin width not below ``raw``: 30 s, 5 min, 2 h … on the time axis, 1, 2 or 5 ×
    10^k rounds (at least one) on the round axis."""
    if axis == "time":
        for width in NICE_TIME_WIDTHS:
            if width >= raw * (1 - 1e-9):
                return width
        return _one_two_five(raw / DAY) * DAY
    return max(1.0, _one_two_five(raw))


def _width_text(width: float, axis: str) -> str:
    if axis != "time":
        return f"{width:g} round" + ("" if width == 1 else "s")
    for unit, name in ((DAY, "d"), (HOUR, "h"), (MINUTE, "min"), (1.0, "s")):
        if width >= unit:
            return f"{width / unit:g} {name}"
    return f"{width * 1e3:g} ms"


@dataclass(frozen=True)
class Binning:
    """Equal bins of a curve's axis into which each run's samples are averaged first."""

    axis: str
    origin: float
    width: float
    bins: int

    def text(self) -> str:
        return _width_text(self.width, self.axis)

    def apply(self, samples: pd.DataFrame) -> pd.DataFrame:
        """``samples`` with the axis snapped to the centre of its bin."""
        x = samples[self.axis].to_numpy(dtype=float)
        index = np.clip(np.floor((x - self.origin) / self.width), 0, self.bins - 1)
        return samples.assign(**{self.axis: self.origin + (index + 0.5) * self.width})


def curve_binning(samples: pd.DataFrame, axis: str) -> Binning | None:
    """How to bin ``samples`` on ``axis`` before averaging, or None to keep every x.

    Long series (a typical run has more than :data:`LONG_SERIES_SAMPLES` distinct x) go into
    at most :data:`MAX_LONG_SERIES_BINS` bins; runs sampled at differing x into about as many
    bins as a run has x (at most :data:`MAX_TIME_BINS`), so that repetitions can be averaged.
    The width is rounded up to a round number (30 s, 5 min, 10 rounds …)."""
    distinct = samples.drop_duplicates(["run", axis]).groupby("run")[axis].size()
    typical = float(np.median(distinct.to_numpy()))
    if typical > LONG_SERIES_SAMPLES:
        target = MAX_LONG_SERIES_BINS
    elif not _aligned(samples, axis):
        target = int(min(MAX_TIME_BINS, max(2, typical)))
    else:
        return None
    low, high = float(samples[axis].min()), float(samples[axis].max())
    if not high > low:
        return None
    width = _nice_width((high - low) / target, axis)
    origin = math.floor(low / width) * width
    bins = max(1, math.ceil((high - origin) / width - 1e-9))
    return Binning(axis, origin, width, bins)


@dataclass(frozen=True)
class BaselineLine:
    """A :class:`~netsim.api.Baseline` of a panel: its label and the mean, lowest and highest
    value over the runs that have it."""

    label: str
    value: float
    low: float
    high: float
    runs: int

    def text(self) -> str:
        """The legend entry: "majority class (0.612)", with the runs' range when they
        differ."""
        if self.runs > 1 and self.high - self.low > 5e-4:
            return (
                f"{self.label} (mean of {self.runs} runs {self.value:.3f}, "
                f"{self.low:.3f}–{self.high:.3f})"
            )
        return f"{self.label} ({self.value:.3f})"


#: Colours of a panel's baselines, in the order they are declared.
BASELINE_COLOURS = ("0.45", "black", "tab:brown", "tab:olive")


def baseline_lines(
    long: pd.DataFrame, baselines: Sequence[tuple[str, str, str]]
) -> list[BaselineLine]:
    """The value of each baseline (a :class:`~netsim.api.Baseline` or ``(table, column,
    label)``) over the runs of ``long``: per run the mean of the column (one row in a summary
    table), then the mean over runs. Baselines no run has are left out."""
    lines = []
    for table, column, label in baselines:
        rows = long[(long["table"] == table) & (long["metric"] == column)]
        per_run = rows.groupby("run")["value"].mean().dropna()
        if per_run.empty:
            continue
        lines.append(
            BaselineLine(
                label,
                float(per_run.mean()),
                float(per_run.min()),
                float(per_run.max()),
                len(per_run),
            )
        )
    return lines


@dataclass(frozen=True)
class CurveStatistics:
    """A panel's statistics per grid point and x, how its runs were binned (if at all), each
    run's values (``run, point, x, value``), the statistics of the curve's reference metric
    and of its spread metrics (low, high) (None without them) and its baselines."""

    frame: pd.DataFrame
    binning: Binning | None = None
    runs: pd.DataFrame | None = None
    reference: pd.DataFrame | None = None
    spread: tuple[pd.DataFrame, pd.DataFrame] | None = None
    baselines: tuple[BaselineLine, ...] = ()

    @property
    def empty(self) -> bool:
        return self.frame.empty


#: Bin as :func:`curve_binning` chooses (the default of :func:`curve_statistics`).
CHOOSE_BINNING = "choose"


def curve_statistics(
    long: pd.DataFrame, curve: Curve, binning: Binning | str | None = CHOOSE_BINNING
) -> CurveStatistics:
    """Per grid point and ``curve.axis`` value: n, mean and CI over repetitions of the metric,
    after averaging each run over its series and, for long series or runs whose x differ, over
    equal bins of the axis (``binning``: :func:`curve_binning`'s unless given; the reference
    and spread metrics are binned as the metric, so that they line up with it)."""
    samples = long[(long["table"] == curve.table) & (long["metric"] == curve.metric)]
    samples = samples.dropna(subset=[curve.axis])
    if samples["value"].isna().all():
        return CurveStatistics(pd.DataFrame())
    if binning == CHOOSE_BINNING:
        binning = curve_binning(samples, curve.axis)
    assert binning is None or isinstance(binning, Binning)
    if binning is not None:
        samples = binning.apply(samples)
    samples = samples.dropna(subset=["value"])  # after the check: a missing value is no shift
    parameters = parameter_columns(long)
    per_run = (
        samples.groupby(["run", "point", *parameters, curve.axis], dropna=False)["value"]
        .mean()
        .reset_index()
    )
    other = "round" if curve.axis == "time" else "time"
    per_run = per_run.assign(table=curve.table, metric=curve.metric, series="", **{other: np.nan})
    statistics = summarize(per_run, CONFIDENCE)
    # the range of the runs' own values at each x, to keep the axes on the data (a t interval
    # over two repetitions is 12.7 standard errors wide and would flatten every line)
    extent = per_run.groupby(["point", curve.axis])["value"].agg(run_min="min", run_max="max")
    statistics = statistics.merge(extent.reset_index(), on=["point", curve.axis], how="left")
    frame = statistics.rename(columns={curve.axis: "x"}).sort_values(["point", "x"])
    runs = per_run[["run", "point", curve.axis, "value"]].rename(columns={curve.axis: "x"})
    reference = None
    if curve.reference is not None:
        found = curve_statistics(long, Curve(curve.table, curve.reference, curve.axis, ""), binning)
        reference = None if found.empty else found.frame
    spread = None
    if curve.spread is not None:
        low, high = (
            curve_statistics(long, Curve(curve.table, metric, curve.axis, ""), binning)
            for metric in curve.spread
        )
        spread = None if low.empty or high.empty else (low.frame, high.frame)
    return CurveStatistics(
        frame,
        binning,
        runs.sort_values(["run", "x"]),
        reference,
        spread,
        tuple(baseline_lines(long, curve.baselines)),
    )


def _log_x(statistics: list[CurveStatistics], decades: float | None) -> bool:
    if decades is None:
        return False
    x = np.concatenate([s.frame["x"].to_numpy() for s in statistics])
    positive = x[x > 0]
    return positive.size > 0 and positive.max() / positive.min() > 10**decades


def _log_y(frame: pd.DataFrame) -> bool:
    """True iff the positive means of a panel span more than :data:`LOG_Y_OVER_DECADES`
    decades and none is negative (a log axis would hide it; zeros are left out)."""
    means = frame["mean"].to_numpy(dtype=float)
    means = means[np.isfinite(means)]
    if (means < 0).any():
        return False
    positive = means[means > 0]
    return positive.size > 1 and positive.max() / positive.min() > 10**LOG_Y_OVER_DECADES


def _limit_to_runs(ax, statistics: pd.DataFrame, log: bool = False) -> None:
    """Cut confidence bands that reach beyond every run's values (and a reference line's) at
    the axes' edge."""
    if log:
        values = statistics[["run_min", "run_max", "mean"]].to_numpy(dtype=float).ravel()
        values = values[np.isfinite(values) & (values > 0)]
        if not values.size:
            return
        low, high = float(values.min()), float(values.max())
        pad = (high / low) ** 0.04 if high > low else 2.0
        bottom, top = ax.get_ylim()
        ax.set_ylim(max(bottom, low / pad), min(top, high * pad))
        return
    low, high = float(statistics["run_min"].min()), float(statistics["run_max"].max())
    if not (math.isfinite(low) and math.isfinite(high)):
        return
    pad = 0.06 * (high - low) if high > low else max(abs(high) * 0.06, 0.5)
    bottom, top = ax.get_ylim()
    ax.set_ylim(max(bottom, low - pad), min(top, high + pad))


def _log_label(label: str) -> str:
    """``label`` saying its axis is logarithmic: "steps (number)" -> "steps (number, log
    scale)"."""
    if label.endswith(")"):
        return f"{label[:-1]}, log scale)"
    return f"{label} (log scale)"


def _binning_text(panels: Sequence[Curve], statistics: Sequence[CurveStatistics]) -> str:
    """What the figure's runs were averaged over before the mean, or "" if nothing."""
    binned = [(c, s.binning) for c, s in zip(panels, statistics, strict=True) if s.binning]
    if not binned:
        return ""
    widths = {b.text() for _, b in binned}
    if len(binned) == len(panels) and len(widths) == 1:
        return f"each run's samples first averaged per {widths.pop()}"
    return "; ".join(f"{c.metric}: each run first averaged per {b.text()}" for c, b in binned)


def _fit_legend(fig, handles, names, max_columns: int = 4):
    """A legend below the axes with as many columns (up to ``max_columns``) as fit the
    figure's width; one column when even two do not (saving with a tight bounding box then
    keeps it whole)."""
    renderer = fig.canvas.get_renderer()
    limit = 0.98 * fig.bbox.width
    for columns in range(min(max_columns, len(names)), 0, -1):
        legend = fig.legend(
            handles,
            names,
            loc="outside lower center",
            ncols=columns,
            fontsize=8,
            frameon=False,
            handlelength=3.2,  # long enough to show a dashed or dotted line
        )
        if columns == 1 or legend.get_window_extent(renderer).width <= limit:
            return legend
        legend.remove()
    return None  # pragma: no cover - the loop always returns


@dataclass(frozen=True)
class _CurveCanvas:
    """What every panel of one curve figure draws with: the grid points (sorted), their
    labels and styles, the time axis' scale, the bands' opacity and whether each run is drawn
    as a thin line instead of a band."""

    points: list[int]
    labels: dict[int, str]
    styles: dict[int, LineStyle]
    x_scale: float
    band_alpha: float
    draw_runs: bool

    def marker_size(self, point: int) -> float:
        """Hollow markers, the later point's the smaller: markers of lines that coincide
        nest."""
        return 7.0 - 3.0 * self.points.index(point) / max(1, len(self.points) - 1)


def _band_alpha(points: int) -> float:
    """The opacity of the confidence bands: many overlapping bands would hide the lines."""
    return 0.2 if points <= 3 else 0.12 if points <= 6 else 0.08


def _curve_x_scale(spec: FigureSpec, unit: TimeUnit) -> float:
    """Seconds per x unit: ``unit`` for a time axis, 1 for a round axis."""
    return unit.seconds if spec.panels[0].axis == "time" else 1.0


def _curve_xlabel(spec: FigureSpec, unit: TimeUnit) -> str:
    """The bottom axis' label: the spec's, else the time unit's or "round"."""
    default_xlabel = unit.label() if spec.panels[0].axis == "time" else "round"
    return spec.xlabel or default_xlabel


def _curve_axes(panels: int) -> tuple[Figure, np.ndarray]:
    """A figure of ``panels`` panels stacked on one shared x axis (a column of axes)."""
    plt = _pyplot()
    fig, axes = plt.subplots(
        panels,
        1,
        figsize=(8.0, 3.0 + 2.4 * panels),
        sharex=True,
        squeeze=False,
        layout="constrained",
    )
    return fig, axes


def _limits_frame(stats: CurveStatistics) -> pd.DataFrame:
    """The values a panel's y range is kept to: the runs' own, and the reference, spread and
    baseline lines' (which the axes hold too)."""
    frame = stats.frame
    extra = []
    for other in (stats.reference, *(stats.spread or ())):
        if other is not None:
            extra.append(other.assign(run_min=other["mean"], run_max=other["mean"]))
    if stats.baselines:
        values = [b.value for b in stats.baselines]
        extra.append(pd.DataFrame({"mean": values, "run_min": values, "run_max": values}))
    return pd.concat([frame, *extra], ignore_index=True) if extra else frame


def _draw_point(
    ax: Axes,
    canvas: _CurveCanvas,
    stats: CurveStatistics,
    point: object,
    line: pd.DataFrame,
    floor: float | None,
) -> None:
    """One grid point's mean line, with its runs as thin lines or its confidence band; on a
    log axis (``floor`` not None) means and band tops of zero or less are left out and band
    bottoms of zero or less drawn at ``floor``."""
    x = line["x"].to_numpy() / canvas.x_scale
    mean = line["mean"].to_numpy(dtype=float)
    low = line["ci_low"].to_numpy(dtype=float)
    high = line["ci_high"].to_numpy(dtype=float)
    if floor is not None:  # a log axis has no place for zero or less: leave those out
        mean = np.where(mean > 0, mean, np.nan)
        low = np.where(low > 0, low, floor)
        high = np.where(high > 0, high, np.nan)
    style = canvas.styles[int(point)]
    ax.plot(
        x,
        mean,
        color=style.colour,
        linestyle=style.linestyle,
        lw=1.4,
        marker=style.marker if len(x) <= 30 else None,
        ms=canvas.marker_size(int(point)),
        mfc="none",
        mew=1.1,
        label=canvas.labels[int(point)],
    )
    if canvas.draw_runs and stats.runs is not None:
        for _, run in stats.runs[stats.runs["point"] == point].groupby("run"):
            ax.plot(
                run["x"].to_numpy() / canvas.x_scale, run["value"].to_numpy(dtype=float),
                color=style.colour, linestyle=style.linestyle, lw=0.7, alpha=0.55,
            )  # fmt: skip
    elif line["n"].max() > 1:
        ax.fill_between(x, low, high, color=style.colour, alpha=canvas.band_alpha, lw=0)


def _draw_reference(ax: Axes, canvas: _CurveCanvas, curve: Curve, reference: pd.DataFrame) -> None:
    """The curve's reference metric, dashed in each point's colour (named by the point when
    there are several)."""
    for point, line in reference.groupby("point", sort=True):
        ax.plot(
            line["x"].to_numpy() / canvas.x_scale, line["mean"].to_numpy(dtype=float),
            color=canvas.styles[int(point)].colour, linestyle="--", lw=1.1,
            label=f"{curve.reference_label or curve.reference}"
            + (f" ({canvas.labels[int(point)]})" if len(canvas.points) > 1 else ""),
        )  # fmt: skip


def _draw_spread(
    ax: Axes,
    canvas: _CurveCanvas,
    curve: Curve,
    spread: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    """The curve's spread metrics (low, high), dotted in each point's colour, with one legend
    entry for all."""
    assert curve.spread is not None
    name = curve.spread_label or " / ".join(curve.spread)
    low, high = spread
    for k, point in enumerate(sorted(set(low["point"]) & set(high["point"]))):
        for bound, line in enumerate((low, high)):
            line = line[line["point"] == point]
            ax.plot(
                line["x"].to_numpy() / canvas.x_scale, line["mean"].to_numpy(dtype=float),
                color=canvas.styles[int(point)].colour, linestyle=":", lw=1.0,
                label=name if k == 0 and bound == 0 else "_nolegend_",
            )  # fmt: skip


def _draw_baselines(ax: Axes, baselines: Sequence[BaselineLine]) -> None:
    """Each baseline as a dashed horizontal line across the panel, in the declared order's
    colour (:data:`BASELINE_COLOURS`)."""
    for k, baseline in enumerate(baselines):
        ax.axhline(
            baseline.value,
            color=BASELINE_COLOURS[k % len(BASELINE_COLOURS)],
            linestyle="--",
            lw=1.2,
            label=baseline.text(),
        )


def _draw_panel(
    ax: Axes, canvas: _CurveCanvas, curve: Curve, stats: CurveStatistics, panels: int
) -> None:
    """One panel of a curve figure: a line per grid point, then the reference, spread and
    baseline lines, the y label and grid, the y range kept to the runs, and the panel's own
    legend when a single point has decorations in a figure of several panels."""
    frame = stats.frame
    log = _log_y(frame)
    floor = None
    if log:
        ax.set_yscale("log")
        positive = frame["mean"][frame["mean"] > 0]
        floor = float(positive.min()) / 1e3  # a band reaching 0 or below: off the axis
    for point, line in frame.groupby("point", sort=True):
        _draw_point(ax, canvas, stats, point, line, floor)
    if stats.reference is not None:
        _draw_reference(ax, canvas, curve, stats.reference)
    if stats.spread is not None:
        _draw_spread(ax, canvas, curve, stats.spread)
    _draw_baselines(ax, stats.baselines)
    ax.set_ylabel(_log_label(curve.ylabel) if log else curve.ylabel)
    ax.grid(alpha=0.3, which="major")
    ax.grid(alpha=0.1, which="minor")
    _limit_to_runs(ax, _limits_frame(stats), log)
    decorated = stats.reference is not None or stats.spread is not None or stats.baselines
    if decorated and len(canvas.points) == 1 and panels > 1:
        ax.legend(fontsize=8, frameon=False)


def _figure_legend(fig: Figure, top: Axes, points: int, panels: int) -> None:
    """The top panel's legend below the axes, when it names several points or several lines
    of a single panel (below the axes a legend never hides a line, nor a baseline across the
    whole axes)."""
    handles, names = top.get_legend_handles_labels()
    if points > 1 or (panels == 1 and len(names) > 1):
        _fit_legend(fig, handles, names)


def _draw_curve_figure(
    spec: FigureSpec,
    statistics: list[CurveStatistics],
    labels: dict[int, str],
    styles: dict[int, LineStyle],
    repetitions: dict[int, int],
    out: Path,
    unit: TimeUnit = HOURS,
) -> str:
    """Draw ``spec`` into ``out``, a time axis in ``unit``; returns how the runs were binned
    ("" if not)."""
    panels = len(spec.panels)
    fig, axes = _curve_axes(panels)
    points = sorted({int(p) for s in statistics for p in s.frame["point"].unique()})
    counts = [repetitions.get(p, 0) for p in points]
    canvas = _CurveCanvas(
        points,
        labels,
        styles,
        _curve_x_scale(spec, unit),
        _band_alpha(len(points)),
        draw_runs=1 < max(counts) < BAND_FROM_REPETITIONS,
    )
    for ax, curve, stats in zip(axes[:, 0], spec.panels, statistics, strict=True):
        _draw_panel(ax, canvas, curve, stats, panels)
    bottom = axes[-1, 0]
    bottom.set_xlabel(_curve_xlabel(spec, unit))
    if _log_x(statistics, spec.log_x_over_decades):
        bottom.set_xscale("log")
    binned = _binning_text(spec.panels, statistics)
    title = [spec.title, repetitions_text(counts), *([binned] if binned else [])]
    axes[0, 0].set_title("\n".join(title), fontsize=10)
    _figure_legend(fig, axes[0, 0], len(points), panels)
    save_figure(fig, out, tight=True)
    return binned


def _draw_privacy_figure(
    statistics: pd.DataFrame,
    runs: pd.DataFrame,
    labels: dict[int, str],
    styles: dict[int, LineStyle],
    repetitions: dict[int, int],
    out: Path,
) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.0, 4.6), layout="constrained")
    statistics = statistics.sort_values("point")
    positions = np.arange(len(statistics))
    counts = [repetitions.get(int(p), 0) for p in statistics["point"]]
    draw_runs = 1 < max(counts) < BAND_FROM_REPETITIONS
    for position, row in zip(positions, statistics.itertuples(index=False), strict=True):
        below, above = row.mean - row.ci_low, row.ci_high - row.mean
        style = styles[int(row.point)]
        ax.errorbar(
            [position],
            [row.mean],
            yerr=None if draw_runs else [[below], [above]],
            fmt=style.marker,
            capsize=5,
            color=style.colour,
            ms=6,
        )
        if draw_runs:
            values = runs.loc[runs["point"] == row.point, "value"].to_numpy(dtype=float)
            ax.plot(np.full(values.size, position + 0.12), values, "x", color=style.colour,
                    ms=5, alpha=0.7)  # fmt: skip
    names = [labels[int(p)] for p in statistics["point"]]
    rotate = sum(len(n) for n in names) > 80
    ax.set_xticks(
        positions,
        names,
        rotation=30 if rotate else 0,
        ha="right" if rotate else "center",
        fontsize=8,
    )
    ax.set_xlim(-0.5, len(positions) - 0.5)
    ax.set_xlabel("grid point")
    ax.set_ylabel(PRIVACY_FIGURE.panels[0].ylabel)
    tops = statistics["ci_high"].to_numpy(dtype=float)
    tops = tops[np.isfinite(tops)]
    if tops.size:  # ε spent is never negative; an infinite one leaves the axis to matplotlib
        ax.set_ylim(bottom=0, top=max(1e-9, float(tops.max())) * 1.15)
    ax.grid(alpha=0.3, axis="y")
    text = repetitions_text(counts).replace("band", "error bars")
    text = text.replace("thin lines: the runs", "crosses: the runs")
    ax.set_title(f"{PRIVACY_FIGURE.title}\n{text}", fontsize=10)
    return save_figure(fig, out, tight=True)


def _draw_pairwise_figure(
    statistics: pd.DataFrame,
    labels: dict[int, str],
    styles: dict[int, LineStyle],
    repetitions: dict[int, int],
    out: Path,
) -> Path:
    """Mean ε per hop count, one line per grid point with its interval, and each point's
    local ε dashed in its colour (:data:`PAIRWISE_FIGURE`)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.0, 4.6), layout="constrained")
    pairs = statistics[statistics["metric"] == "epsilon"]
    local = statistics[statistics["metric"] == "local_epsilon"].set_index("point")["mean"]
    for point, line in pairs.groupby("point", sort=True):
        style = styles[int(point)]
        line = line.sort_values("round")
        below = line["mean"] - line["ci_low"]
        above = line["ci_high"] - line["mean"]
        ax.errorbar(
            line["round"], line["mean"], yerr=[below, above], fmt=style.marker,
            linestyle=style.linestyle, color=style.colour, capsize=4, ms=5,
            label=labels[int(point)],
        )  # fmt: skip
        if point in local.index:
            ax.axhline(float(local[point]), linestyle="--", color=style.colour, alpha=0.7)
    ax.plot([], [], "--", color="0.4", label="local ε (every release public)")
    if _log_y(pd.concat([pairs, local.reset_index()], ignore_index=True)):
        ax.set_yscale("log")
    ax.set_xlabel("shortest-path distance between observer and record (hops)")
    ax.set_ylabel(PAIRWISE_FIGURE.panels[0].ylabel)
    hops = np.sort(pairs["round"].unique())
    ax.set_xticks(hops)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    counts = [repetitions.get(int(p), 0) for p in pairs["point"].unique()]
    text = repetitions_text(counts).replace("band", "error bars")
    text = text.replace("; thin lines: the runs", "")
    ax.set_title(f"{PAIRWISE_FIGURE.title}\n{text}", fontsize=10)
    return save_figure(fig, out, tight=True)


def _spent_epsilon(privacy: pd.DataFrame) -> bool:
    """True iff some run's records spent some ε (mutual-information releases and non-private
    runs spend none: a figure of zeros says nothing)."""
    spent = privacy["value"].dropna()
    return bool((spent != 0).any())


#: A table figure shows at most this many of the table's metrics (one panel each).
TABLE_FIGURE_PANELS = 4
TABLE_FIGURE_PREFIX = "table_"


def table_figures(
    long: pd.DataFrame, standard_figures: Sequence[FigureSpec]
) -> tuple[FigureSpec, ...]:
    """One figure per table of ``long`` that none of ``standard_figures`` (nor the privacy
    figure) draws and that has a time or round axis — any component's table without a figure
    of its own: its first metrics against simulated time (or the round when it has no
    time)."""
    standard = {
        curve.table for spec in (*standard_figures, PRIVACY_FIGURE) for curve in spec.panels
    }
    specs = []
    for table in sorted(set(long["table"].unique()) - standard):
        rows = long[long["table"] == table]
        axis = "time" if rows["time"].notna().any() else "round"
        if not rows[axis].notna().any():
            continue  # one row per run: in the summary table instead
        metrics = list(dict.fromkeys(rows["metric"].tolist()))[:TABLE_FIGURE_PANELS]
        unit = "simulated time" if axis == "time" else "the round"
        specs.append(
            FigureSpec(
                file=f"{TABLE_FIGURE_PREFIX}{table}.png",
                caption=f"table {table}",
                sentence=f"The metrics of table `{table}` against {unit}.",
                title=f"Table {table}",
                panels=tuple(Curve(table, metric, axis, metric) for metric in metrics),
            )
        )
    return tuple(specs)


def mixed_learning(long: pd.DataFrame) -> bool:
    """True iff some runs of ``long`` learned by gossip (``gossip_learning_accuracy``) and
    others by a walk (``accuracy`` only): their accuracies are in different tables, which
    :data:`~netsim.analysis.learning.COMPARISON_FIGURE` draws in one panel."""
    gossip = set(long.loc[long["table"] == GOSSIP_ACCURACY_TABLE, "run"])
    walk = set(long.loc[long["table"] == WALK_ACCURACY_TABLE, "run"])
    return bool(gossip) and bool(walk - gossip)


def draw_figures(
    long: pd.DataFrame,
    source: SweepSource,
    repetitions: dict[int, int],
    out: Path,
    figures: Sequence[FigureSpec] = NETWORK_FIGURES,
    unit: TimeUnit = HOURS,
    pairs: pd.DataFrame | None = None,
) -> dict[FigureSpec, str]:
    """Draw every standard figure whose tables ``long`` has, and a figure of every other
    table with a time or round axis, into ``out``, time axes in ``unit``; returns those drawn,
    each with a note on how its runs were binned ("" if they were not). Runs that learned by
    a walk and by gossip get, first, their accuracies in one figure
    (:data:`~netsim.analysis.learning.COMPARISON_FIGURE`), in place of the walk's own.
    ``pairs``: the runs' privacy per observer by distance
    (:func:`~netsim.analysis.collect.pair_distance_samples`), drawn when not empty."""
    labels = point_labels(source)
    styles = point_styles(source)
    drawn: dict[FigureSpec, str] = {}

    def draw(specs: Sequence[FigureSpec], rows: pd.DataFrame = long) -> None:
        for spec in specs:
            statistics = [curve_statistics(rows, curve) for curve in spec.panels]
            if any(s.empty for s in statistics):
                continue
            drawn[spec] = _draw_curve_figure(
                spec, statistics, labels, styles, repetitions, out / spec.file, unit
            )

    superseded: tuple[FigureSpec, ...] = ()
    if mixed_learning(long):
        draw([COMPARISON_FIGURE], pd.concat([long, learning_accuracy_samples(long)]))
        # the walk's accuracy figure would repeat the walk's line beside gossip learning's
        # single-model evaluations (its runs' accuracy table), which the comparison leaves out
        superseded = tuple(
            spec for spec in figures if {c.table for c in spec.panels} == {WALK_ACCURACY_TABLE}
        )
    draw([spec for spec in figures if spec not in superseded])
    # a table no drawn figure shows (e.g. broadcasts with other thresholds) gets its own
    draw(table_figures(long, (*drawn, *superseded)))
    privacy = long[(long["table"] == "privacy") & (long["metric"] == "epsilon_spent_max")]
    if _spent_epsilon(privacy):
        statistics = summarize(privacy, CONFIDENCE)
        _draw_privacy_figure(
            statistics, privacy, labels, styles, repetitions, out / PRIVACY_FIGURE.file
        )
        drawn[PRIVACY_FIGURE] = ""
    if pairs is not None and not pairs.empty:
        statistics = summarize(pairs, CONFIDENCE)
        _draw_pairwise_figure(statistics, labels, styles, repetitions, out / PAIRWISE_FIGURE.file)
        drawn[PAIRWISE_FIGURE] = ""
    return drawn


# --- the Markdown page ------------------------------------------------------------------------


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _number(value: float) -> str:
    """A summary value as a person reads it: counts as integers with thousands separators
    (10,000, not 1e+04), large values to the unit, others to 4 significant digits."""
    if math.isnan(value):
        return "–"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if abs(value) < 1e15 and (float(value).is_integer() or abs(value) >= 1e4):
        return f"{value:,.0f}"
    return f"{value:.4g}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |"]
    lines.append("| " + " | ".join("---" for _ in header) + " |")
    lines.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)
    return lines


def grid_lines(
    source: SweepSource, status: pd.DataFrame, labels: dict[int, str] | None = None
) -> list[str]:
    """The grid as a Markdown table: one row per point with its parameters, how many of its
    planned repetitions completed and, given ``labels``, its name in the figures' legends."""
    complete = status[status["status"] == "complete"].groupby("point").size()
    planned = status.groupby("point").size()
    points = source.plan.drop_duplicates("point").sort_values("point")
    rows = [
        [
            str(int(row["point"])),
            *(format_value(row[p]) for p in source.parameters),
            f"{int(complete.get(row['point'], 0))}/{int(planned.get(row['point'], 0))}",
            *([labels.get(int(row["point"]), "")] if labels is not None else []),
        ]
        for _, row in points.iterrows()
    ]
    legend = ["in the legends"] if labels is not None else []
    return _table(["point", *source.parameters, "repetitions complete/planned", *legend], rows)


def failure_lines(status: pd.DataFrame) -> list[str]:
    """Failed runs, one line each, and how many runs are missing."""
    failed = status[status["status"] == "failed"]
    lines = [
        f"- run {row.run} (point {row.point}, repetition {row.repetition}, `{row.run_id}`): "
        f"{_one_line(row.error) or '(no message)'}"
        for row in failed.itertuples(index=False)
    ]
    if not lines:
        lines.append("No run failed.")
    missing = status[status["status"] == "missing"]
    if len(missing):
        runs = ", ".join(str(r) for r in missing["run"].head(20))
        more = ", …" if len(missing) > 20 else ""
        lines += [
            "",
            f"{len(missing)} run(s) missing (not run yet, or interrupted): run {runs}{more}.",
        ]
    return lines


#: The summary table's row of the final test accuracy (:func:`final_accuracies`).
FINAL_ACCURACY_ROW = "final test accuracy"
#: The summary table's first rows after it: the yardsticks of a learning result.
YARDSTICK_KEYS: tuple[tuple[str, str], ...] = tuple((b.table, b.column) for b in YARDSTICKS)


def final_accuracies(source: SweepSource, status: pd.DataFrame) -> pd.DataFrame:
    """The final test accuracy of every complete learning run (``run, point, value``), from
    its ``accuracy`` or ``gossip_learning_accuracy`` table
    (:func:`netsim.analysis.learning.final_accuracy`); runs that learned nothing have none."""
    rows = []
    complete = status[status["status"] == "complete"]
    for run, point, run_id in complete[["run", "point", "run_id"]].itertuples(index=False):
        directory = source.run_directory(str(run_id))
        listed = load_manifest(directory).get("tables", {})
        tables = {
            name: read_table(directory / f"{name}.parquet").to_pandas()
            for name in (WALK_ACCURACY_TABLE, GOSSIP_ACCURACY_TABLE)
            if name in listed
        }
        value = final_accuracy(tables)
        if value is not None:
            rows.append((int(run), int(point), value))
    return pd.DataFrame(rows, columns=["run", "point", "value"])


def _statistic_cells(statistics: pd.DataFrame) -> dict[tuple[str, str, int], str]:
    """``mean ± half-width`` (the mean alone for n = 1 or no spread) by (table, metric,
    point)."""
    statistics = statistics.assign(half=half_width(statistics))
    return {
        (row.table, row.metric, int(row.point)): (
            _number(row.mean)
            if row.n <= 1 or not row.half > 0
            else f"{_number(row.mean)} ± {row.half:.2g}"
        )
        for row in statistics.itertuples(index=False)
    }


def summary_lines(
    long: pd.DataFrame,
    points: Sequence[int],
    single: bool = False,
    final: pd.DataFrame | None = None,
    labels: dict[int, str] | None = None,
) -> list[str]:
    """The one-row summary metrics as a Markdown table: one row per ``table.metric``, one
    column per grid point (headed by its legend label from ``labels``), ``mean ± half-width
    of the CI`` (just the mean for n = 1). The final test accuracy of the runs (``final``, as
    :func:`final_accuracies` gives it) comes first, then the yardsticks of
    ``learning_summary`` beside it, then the other metrics by table."""
    indexed = long["time"].notna() | long["round"].notna()
    per_table = indexed.groupby(long["table"]).any()
    one_row = sorted(per_table.index[~per_table.to_numpy()].tolist())
    statistics = summarize(long[long["table"].isin(one_row)], CONFIDENCE)
    if final is not None and len(final):
        samples = final.assign(
            table="", metric=FINAL_ACCURACY_ROW, series="", round=np.nan, time=np.nan
        )
        statistics = pd.concat([summarize(samples, CONFIDENCE), statistics], ignore_index=True)
    if statistics.empty:
        return ["No summary tables in these runs."]
    order = {name: i for i, name in enumerate(["", *one_row])}
    first = {key: i for i, key in enumerate((("", FINAL_ACCURACY_ROW), *YARDSTICK_KEYS))}
    keys = sorted(
        statistics[["table", "metric"]].drop_duplicates().itertuples(index=False),
        key=lambda k: (first.get((k.table, k.metric), len(first)), order[k.table], k.metric),
    )
    cells = _statistic_cells(statistics)
    rows = [
        [
            f"{table}.{metric}" if table else metric,
            *(cells.get((table, metric, p), "–") for p in points),
        ]
        for table, metric in keys
    ]
    if len(points) == 1 and single:
        columns = ["value"]
    else:
        labels = labels or {}
        columns = [f"point {p}" + (f": {labels[p]}" if p in labels else "") for p in points]
    return _table(["metric", *columns], rows)


def _single_run_head(source: SweepSource) -> list[str]:
    """The top of a one-run report: the run, its seed and parameters (no grid or repetitions
    to speak of)."""
    row = source.plan.iloc[0]
    parameters = ", ".join(f"{p} = {format_value(row[p])}" for p in source.parameters)
    given = f"; parameters: {parameters}" if parameters else ""
    return [
        f"# Report: {source.name}",
        "",
        f"Run `{row['run_id']}` in `{source.path}`, seed {int(row['seed'])}{given}.",
        "",
    ]


def _sweep_head(source: SweepSource, status: pd.DataFrame) -> list[str]:
    """The top of a report of several runs: where they are, how many completed, the grid and
    the failed runs."""
    counts = status["status"].value_counts()
    if source.directories is None:
        where = f"Sweep directory `{source.path}`"
        if source.scenario:
            where += f", scenario `{source.scenario}`"
    elif source.path is not None:
        where = f"Run directories in `{source.path}`"
    else:
        where = f"{len(source.directories)} run directories"
    most = max(status[status["status"] == "complete"].groupby("point").size(), default=0)
    spread = (
        f"± half the width of the {CONFIDENCE:.0%} Student t confidence interval of the mean "
        "(no ± with one repetition or equal values)"
    )
    drawing = (
        "In the figures, bands reaching beyond every run's values are cut at the edge of the axes."
        if most >= BAND_FROM_REPETITIONS
        else "With fewer than three repetitions the figures draw every run instead of a band."
    )
    return [
        f"# Report: {source.name}",
        "",
        f"{where}. {counts.get('complete', 0)} of {len(status)} planned runs complete, "
        f"{counts.get('failed', 0)} failed, {counts.get('missing', 0)} missing. Values are the "
        f"mean over the complete repetitions of a grid point {spread}. {drawing}",
        "",
        "## Grid",
        "",
        *grid_lines(source, status, point_labels(source) if source.directories else None),
        "",
        "## Failed runs",
        "",
        *failure_lines(status),
        "",
    ]


def simulated_span(source: SweepSource, status: pd.DataFrame, long: pd.DataFrame) -> float:
    """The longest simulated duration of the complete runs (their manifests'
    ``simulated_seconds``), what the time axes show; the latest time stamp of ``long`` for
    runs whose manifests do not say."""
    spans = [
        load_manifest(source.run_directory(str(run_id))).get("simulated_seconds")
        for run_id in status.loc[status["status"] == "complete", "run_id"]
    ]
    recorded = [float(x) for x in spans if isinstance(x, int | float) and math.isfinite(x)]
    if recorded:
        return max(recorded)
    times = long["time"].dropna()
    return float(times.max()) if len(times) else 0.0


AUDIT_HEADER = ("run", "bound", "pairs", "below the exact loss", "share", "worst exact ε",
                "worst bound ε")  # fmt: skip


def bound_audit_lines(shares: pd.DataFrame, labels: Mapping[int, str]) -> list[str]:
    """The report's bound-audit section: per run and published bound, the share of the pairs
    it covers whose exact loss it understates (empty without a ``bound_audit`` table)."""
    if shares.empty:
        return []
    rows = [
        [labels.get(int(row.run), str(row.run)), row.bound, f"{row.pairs:,}", f"{row.below:,}",
         f"{100 * row.share:.1f} %", _number(row.exact_epsilon), _number(row.bound_epsilon)]
        for row in shares.itertuples(index=False)
    ]  # fmt: skip
    walk = (
        " For `walk_path_secret` the exact loss is that of an observer that knows the walk's "
        "path: a pair below it is protected only while the path stays secret."
        if (shares["bound"] == "walk_path_secret").any()
        else ""
    )
    return [
        "## Bound audit",
        "",
        "Published per-pair bounds beside the exact loss of the same run's pairs "
        "(`bound_audit`): a bound below the exact loss understates what the observer learns."
        + walk,
        "",
        *_table(AUDIT_HEADER, rows),
        "",
    ]


def write_report(
    path: Path | Sequence[Path], out: Path | None = None, *, allow_unverified: bool = False
) -> Path:
    """Draw the standard figures of the sweep or runs at ``path`` (what
    :func:`~netsim.analysis.collect.load_sweep` reads: a sweep directory, a run directory, a
    folder of runs, a list of run directories) into ``out`` (default ``<path>/report/``; a
    list of runs needs ``out``) and write ``report.md`` there linking them; returns its path.

    Only the figures whose tables the complete runs have are drawn; figures of an earlier
    report that no longer apply are removed so that the directory matches the page. A damaged
    run refuses the report, and so does an unverified one unless ``allow_unverified``
    (:func:`~netsim.analysis.collect.refuse_damaged`).
    """
    source = load_sweep(path)
    checks = check_runs(source)
    status = run_status(source, checks)  # one snapshot: the grid table and the figures agree
    # a damaged run is not drawn as if it were complete, nor one whose bytes cannot be checked
    refuse_damaged(source, status, checks, allow_unverified=allow_unverified)
    long = long_table(source, status)
    if out is None and source.path is None:
        raise RunDirectoryError("write_report: a list of run directories needs out=")
    out = Path(out) if out is not None else Path(str(source.path)) / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    repetitions = {
        int(p): int(n)
        for p, n in status[status["status"] == "complete"].groupby("point").size().items()
    }
    figures = component_figures(source, status)
    unit = time_unit(simulated_span(source, status, long))
    pairs = pair_distance_samples(source, status)
    drawn = draw_figures(long, source, repetitions, out, figures, unit, pairs)
    known = {
        spec.file for spec in (*figures, *builtin_figures(), PRIVACY_FIGURE, PAIRWISE_FIGURE)
    }
    for file in known - {spec.file for spec in drawn}:
        (out / file).unlink(missing_ok=True)
    drawn_files = {spec.file for spec in drawn}
    for stale in out.glob(f"{TABLE_FIGURE_PREFIX}*.png"):
        if stale.name not in drawn_files:
            stale.unlink()
    points = sorted(int(p) for p in source.plan["point"].unique())
    if source.single_run:
        lines = _single_run_head(source)
    else:
        lines = _sweep_head(source, status)
    lines += [
        "## Summary metrics",
        "",
        *summary_lines(
            long,
            points,
            single=source.single_run,
            final=final_accuracies(source, status),
            labels=point_labels(source),
        ),
        "",
        "## Figures",
        "",
    ]
    if not drawn:
        lines += ["No figures: the complete runs have none of the tables they are drawn from.", ""]
    if PRIVACY_FIGURE not in drawn and (long["table"] == "privacy").any():
        lines += [
            "No figure of the privacy spent: no record spent any ε (non-private runs, or "
            "only mutual-information releases).",
            "",
        ]
    for spec, binned in drawn.items():
        sentence = spec.sentence
        if binned:
            sentence += f" Binning: {binned}, then the mean over repetitions."
        lines += [f"### {spec.title}", "", f"![{spec.caption}]({spec.file})", "", sentence, ""]
    lines += bound_audit_lines(bound_audit_shares(source, status), point_labels(source))
    report = out / REPORT_FILE
    atomic_write_text(report, "\n".join(lines))
    return report
