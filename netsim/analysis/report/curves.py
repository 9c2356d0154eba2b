"""A curve's statistics per grid point and x: each run averaged over its series and, for long
series (more than :data:`LONG_SERIES_SAMPLES` samples a run) or runs sampled at differing x,
over equal bins of the axis (:func:`curve_binning`, at most :data:`MAX_LONG_SERIES_BINS` or
:data:`MAX_TIME_BINS` bins of a round width); then n, mean, the Student t interval of the mean
and the runs' range per point and x (:func:`curve_statistics`); and the yardsticks' values over
the runs (:func:`baseline_lines`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from netsim.analysis.collect import (
    parameter_columns,
    summarize,
)
from netsim.analysis.report.styles import CONFIDENCE
from netsim.contracts import Curve
from netsim.lazy import lazy_module
from netsim.units import DAY, HOUR, MINUTE

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

#: At most this many time bins when the runs' time stamps differ (e.g. accuracy evaluations).
MAX_TIME_BINS = 100


#: A run with more samples than this on a curve's axis is averaged into at most
#: :data:`MAX_LONG_SERIES_BINS` equal bins first: a dozen lines of a few hundred noisy samples
#: each cannot be told apart.
LONG_SERIES_SAMPLES = 150


MAX_LONG_SERIES_BINS = 120


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
