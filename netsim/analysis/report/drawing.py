"""A curve figure of the report: one panel per curve on a shared x axis, a line per grid point
with its band (the interval of the mean, or the runs' range) or its runs as thin lines, the
curve's reference, spread and yardstick lines, a legend below the axes and a title saying what
the lines are averaged over (:func:`draw_curve_figure`). A panel whose positive means span more
than :data:`LOG_Y_OVER_DECADES` decades gets a logarithmic y axis."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from netsim.analysis.figures import save_figure
from netsim.analysis.report.curves import BaselineLine, CurveStatistics
from netsim.analysis.report.styles import BAND_FROM_REPETITIONS, LineStyle, repetitions_text
from netsim.contracts import Curve, FigureSpec
from netsim.lazy import lazy_module
from netsim.plotting import HOURS, TimeUnit, pyplot

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

#: A panel's y-axis is logarithmic when the positive means span more decades than this.
LOG_Y_OVER_DECADES = 2.0

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


#: Colours of a panel's baselines, in the order they are declared.
BASELINE_COLOURS = ("0.45", "black", "tab:brown", "tab:olive")


def log_x(statistics: list[CurveStatistics], decades: float | None) -> bool:
    if decades is None:
        return False
    x = np.concatenate([s.frame["x"].to_numpy() for s in statistics])
    positive = x[x > 0]
    return positive.size > 0 and positive.max() / positive.min() > 10**decades


def log_y(frame: pd.DataFrame) -> bool:
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


def log_label(label: str) -> str:
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


def fit_legend(fig, handles, names, max_columns: int = 4):
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


#: A band of the Student t interval of the mean over repetitions (the standard figures).
BAND_CI = "ci"
#: A band from the lowest to the highest repetition (seed) of a point at each x.
BAND_RANGE = "range"


@dataclass(frozen=True)
class FigureOptions:
    """How a curve figure departs from the standard one: its bottom axis' label and seconds
    (or units) per tick unit (else the spec's, the time unit's or "round"), whether that axis
    is logarithmic (else the spec's rule), the band (:data:`BAND_CI`: the interval of the
    mean, runs drawn one by one below :data:`BAND_FROM_REPETITIONS`; :data:`BAND_RANGE`: the
    lowest to highest run from two runs on), the title's line about the repetitions (else
    :func:`repetitions_text`'s) and further title lines (``notes``: e.g. the privacy
    setting)."""

    xlabel: str | None = None
    x_scale: float | None = None
    log_x: bool | None = None
    band: str = BAND_CI
    repetitions: str | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _CurveCanvas:
    """What every panel of one curve figure draws with: the grid points (sorted), their
    labels and styles, the x axis' scale, the bands' opacity, whether each run is drawn as a
    thin line instead of a band and which band (:data:`BAND_CI` or :data:`BAND_RANGE`)."""

    points: list[int]
    labels: dict[int, str]
    styles: dict[int, LineStyle]
    x_scale: float
    band_alpha: float
    draw_runs: bool
    band: str = BAND_CI

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
    plt = pyplot()
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
    """One grid point's mean line, with its runs as thin lines or its band (the confidence
    interval, or the runs' range for :data:`BAND_RANGE`); on a
    log axis (``floor`` not None) means and band tops of zero or less are left out and band
    bottoms of zero or less drawn at ``floor``."""
    x = line["x"].to_numpy() / canvas.x_scale
    mean = line["mean"].to_numpy(dtype=float)
    lows, highs = ("run_min", "run_max") if canvas.band == BAND_RANGE else ("ci_low", "ci_high")
    low = line[lows].to_numpy(dtype=float)
    high = line[highs].to_numpy(dtype=float)
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
    log = log_y(frame)
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
    ax.set_ylabel(log_label(curve.ylabel) if log else curve.ylabel)
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
        fit_legend(fig, handles, names)


def draw_curve_figure(
    spec: FigureSpec,
    statistics: list[CurveStatistics],
    labels: dict[int, str],
    styles: dict[int, LineStyle],
    repetitions: dict[int, int],
    out: Path,
    unit: TimeUnit = HOURS,
    options: FigureOptions = FigureOptions(),
) -> str:
    """Draw ``spec`` into ``out``, a time axis in ``unit`` unless ``options`` say otherwise;
    returns how the runs were binned ("" if not)."""
    panels = len(spec.panels)
    fig, axes = _curve_axes(panels)
    points = sorted({int(p) for s in statistics for p in s.frame["point"].unique()})
    counts = [repetitions.get(p, 0) for p in points]
    ranged = options.band == BAND_RANGE
    canvas = _CurveCanvas(
        points,
        labels,
        styles,
        options.x_scale or _curve_x_scale(spec, unit),
        _band_alpha(len(points)),
        draw_runs=not ranged and 1 < max(counts) < BAND_FROM_REPETITIONS,
        band=options.band,
    )
    for ax, curve, stats in zip(axes[:, 0], spec.panels, statistics, strict=True):
        _draw_panel(ax, canvas, curve, stats, panels)
    bottom = axes[-1, 0]
    bottom.set_xlabel(options.xlabel or _curve_xlabel(spec, unit))
    logarithmic = options.log_x
    if logarithmic is None:
        logarithmic = log_x(statistics, spec.log_x_over_decades)
    if logarithmic:
        bottom.set_xscale("log")
    binned = _binning_text(spec.panels, statistics)
    repeated = options.repetitions or repetitions_text(counts)
    title = [spec.title, *options.notes, repeated, *([binned] if binned else [])]
    axes[0, 0].set_title("\n".join(title), fontsize=10 if not options.notes else 9)
    _figure_legend(fig, axes[0, 0], len(points), panels)
    save_figure(fig, out, tight=True)
    return binned
