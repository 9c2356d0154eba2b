"""Statistics and a figure of availability traces (Hegedűs et al. 2016 §5.1, Fig. 1).

:func:`trace_statistics` summarises an :class:`~netsim.traces.intervals.IntervalTrace`: the share
of node-time online, its daily rhythm, the lengths of online sessions and offline gaps, and the
rates of log-ins and log-outs. :func:`trace_figure` draws the paper's Fig. 1: the proportion of
nodes online and ever online over the observation window, and the proportion logging in and out
per hour. For the STUNner trace cut into 2-day segments each trace node is one segment and time
0 is 00:00 GMT (:func:`~netsim.traces.intervals.cut_segments`).

All computations are vectorised over intervals (sorting, ``np.searchsorted``, prefix sums,
``np.bincount``); nothing loops over intervals or nodes in Python.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from netsim.plotting import pyplot
from netsim.storage import atomic_write_bytes
from netsim.traces.intervals import IntervalTrace
from netsim.units import DAY, HOUR, MINUTE

QUANTILES: dict[str, float] = {
    "p10": 0.10,
    "p25": 0.25,
    "median": 0.50,
    "p75": 0.75,
    "p90": 0.90,
    "p99": 0.99,
}


@dataclass(frozen=True, eq=False)
class TraceStats:
    """Summary of an availability trace.

    ``span_seconds`` is the observation length of every node: ``trace.span`` when the trace
    gives it, else the largest interval end. Intervals of one node that touch (``end == next
    start``) count as one session, as on replay.

    Censoring: an online interval that starts at 0 or ends at ``span_seconds`` is cut by the
    observation window, so its true length is unknown (it is at least what is seen). Such
    intervals are left out of ``session_quantiles`` and counted in ``censored_sessions``; the
    quantiles describe only the ``session_count`` sessions seen from log-in to log-out, which
    biases them towards shorter sessions when the window is short. Likewise the leading and
    trailing offline periods of a node are not gaps: ``offline_quantiles`` describe the
    ``gap_count`` gaps between a node's consecutive sessions. Quantile dicts have keys
    ``p10 p25 median p75 p90 p99 mean`` in seconds (linear interpolation; NaN when empty).

    ``online_by_hour[h]`` is the mean fraction of nodes online during [h:00, h+1:00) over all
    days of the span (time 0 = 00:00), weighted by how much of that hour the span covers (NaN
    for an hour the span never reaches). ``logins_per_hour[k]`` / ``logouts_per_hour[k]`` are
    the numbers of log-ins (session starts > 0) / log-outs (session ends < span) in hour
    [k, k+1) of the span divided by the number of nodes.
    """

    nodes: int
    intervals: int
    span_seconds: float
    online_fraction: float
    online_by_hour: np.ndarray
    session_quantiles: dict[str, float]
    session_count: int
    censored_sessions: int
    offline_quantiles: dict[str, float]
    gap_count: int
    logins_per_hour: np.ndarray = field(repr=False)
    logouts_per_hour: np.ndarray = field(repr=False)


# --- computation ---------------------------------------------------------------------------


def _span(trace: IntervalTrace) -> float:
    if trace.span is not None:
        return float(trace.span)
    return float(trace.end.max()) if trace.end.size else 0.0


def _sessions(trace: IntervalTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(node, start, end) of each session: a node's touching intervals merged (CSR order)."""
    node = trace.node_index()
    start, end = trace.start, trace.end
    if start.size == 0:
        return node, start, end
    new = np.ones(start.size, dtype=bool)
    new[1:] = (node[1:] != node[:-1]) | (start[1:] > end[:-1])
    last = np.ones(start.size, dtype=bool)  # the final row of each merged run
    last[:-1] = new[1:]
    return node[new], start[new], end[last]


def _quantiles(values: np.ndarray) -> dict[str, float]:
    if values.size == 0:
        return {**dict.fromkeys(QUANTILES, math.nan), "mean": math.nan}
    q = np.quantile(values, list(QUANTILES.values()))
    return {**dict(zip(QUANTILES, q.tolist(), strict=True)), "mean": float(values.mean())}


def _online_seconds_before(start: np.ndarray, end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Node-seconds online in [0, t) for each t: Σ_i clip(t - s_i, 0, e_i - s_i), exactly.

    Σ_i max(0, t - s_i) - max(0, t - e_i), each sum from sorted times and prefix sums.
    """

    def ramp(times: np.ndarray) -> np.ndarray:
        times = np.sort(times)
        prefix = np.concatenate([[0.0], np.cumsum(times)])
        k = np.searchsorted(times, t, side="left")
        return k * t - prefix[k]

    return ramp(start) - ramp(end)


def _bin_counts(times: np.ndarray, span: float, bin_seconds: float) -> np.ndarray:
    """Events per bin [k b, (k+1) b) of the span (the last bin may be partial)."""
    bins = max(1, math.ceil(span / bin_seconds - 1e-9))
    index = np.clip(np.floor(times / bin_seconds).astype(np.int64), 0, bins - 1)
    return np.bincount(index, minlength=bins).astype(np.float64)


def _online_by_hour(start: np.ndarray, end: np.ndarray, nodes: int, span: float) -> np.ndarray:
    if nodes == 0 or span <= 0:
        return np.full(24, math.nan)
    edges = np.minimum(np.arange(math.ceil(span / HOUR - 1e-9) + 1) * HOUR, span)
    edges[-1] = span
    online = np.diff(_online_seconds_before(start, end, edges))
    length = np.diff(edges)
    hour = np.arange(length.size) % 24
    online_h = np.bincount(hour, weights=online, minlength=24)
    length_h = np.bincount(hour, weights=length, minlength=24)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(length_h > 0, online_h / (nodes * length_h), math.nan)


def trace_statistics(trace: IntervalTrace) -> TraceStats:
    """Compute the :class:`TraceStats` of ``trace`` (see there for the definitions)."""
    nodes = trace.node_count
    span = _span(trace)
    total = float(np.sum(trace.end - trace.start))
    fraction = total / (nodes * span) if nodes and span > 0 else math.nan
    node, start, end = _sessions(trace)
    censored = (start <= 0) | (end >= span)
    same_node = node[1:] == node[:-1]
    gaps = (start[1:] - end[:-1])[same_node]
    logins = start[start > 0]
    logouts = end[end < span]
    scale = 1.0 / nodes if nodes else math.nan
    return TraceStats(
        nodes=nodes,
        intervals=int(trace.start.size),
        span_seconds=span,
        online_fraction=fraction,
        online_by_hour=_online_by_hour(trace.start, trace.end, nodes, span),
        session_quantiles=_quantiles((end - start)[~censored]),
        session_count=int((~censored).sum()),
        censored_sessions=int(censored.sum()),
        offline_quantiles=_quantiles(gaps),
        gap_count=int(gaps.size),
        logins_per_hour=_bin_counts(logins, span, HOUR) * scale,
        logouts_per_hour=_bin_counts(logouts, span, HOUR) * scale,
    )


# --- presentation --------------------------------------------------------------------------


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "n/a"
    if seconds < 2 * HOUR:
        return f"{seconds / MINUTE:.1f} min"
    return f"{seconds / HOUR:.2f} h"


def _quantile_line(quantiles: dict[str, float]) -> str:
    return ", ".join(f"{key} {_duration(value)}" for key, value in quantiles.items())


def format_statistics(stats: TraceStats) -> list[str]:
    """Human-readable lines (%, min, h) for ``netsim trace info``."""
    lines = [
        f"nodes: {stats.nodes}, online intervals: {stats.intervals}, "
        f"observed span: {stats.span_seconds / HOUR:.2f} h per node",
        f"online share of node-time: {stats.online_fraction:.2%}",
    ]
    by_hour = stats.online_by_hour
    if np.isfinite(by_hour).any():
        busiest, quietest = int(np.nanargmax(by_hour)), int(np.nanargmin(by_hour))
        lines.append(
            f"online by hour of day (time 0 = 00:00): busiest {busiest:02d}:00 "
            f"{by_hour[busiest]:.1%}, quietest {quietest:02d}:00 {by_hour[quietest]:.1%}"
        )
    lines.append(
        f"online sessions ({stats.session_count} seen whole; {stats.censored_sessions} cut by "
        f"the window excluded): {_quantile_line(stats.session_quantiles)}"
    )
    lines.append(
        f"offline gaps between sessions ({stats.gap_count}): "
        f"{_quantile_line(stats.offline_quantiles)}"
    )
    for name, rate in (("log-ins", stats.logins_per_hour), ("log-outs", stats.logouts_per_hour)):
        if rate.size:
            lines.append(
                f"{name} per hour (share of nodes): mean {rate.mean():.2%}, "
                f"min {rate.min():.2%}, max {rate.max():.2%}"
            )
    return lines


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def statistics_dict(stats: TraceStats) -> dict[str, Any]:
    """A JSON-serialisable dict of ``stats`` (seconds, fractions; NaN becomes ``None``)."""
    return {
        "nodes": stats.nodes,
        "intervals": stats.intervals,
        "span_seconds": _finite(stats.span_seconds),
        "online_fraction": _finite(stats.online_fraction),
        "online_by_hour": [_finite(v) for v in stats.online_by_hour.tolist()],
        "session_quantiles": {k: _finite(v) for k, v in stats.session_quantiles.items()},
        "session_count": stats.session_count,
        "censored_sessions": stats.censored_sessions,
        "offline_quantiles": {k: _finite(v) for k, v in stats.offline_quantiles.items()},
        "gap_count": stats.gap_count,
        "logins_per_hour": [_finite(v) for v in stats.logins_per_hour.tolist()],
        "logouts_per_hour": [_finite(v) for v in stats.logouts_per_hour.tolist()],
    }


# --- figure --------------------------------------------------------------------------------


def online_curves(
    trace: IntervalTrace, step: float = 5 * MINUTE
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(times, proportion online, proportion ever online) at ``times = 0, step, ... < span``.

    Exact at each grid time t: a node is online at t when some interval has ``start <= t <
    end``, and ever online when its first interval starts at or before t.
    """
    span = _span(trace)
    nodes = max(trace.node_count, 1)
    times = np.arange(0.0, span, step) if span > 0 else np.zeros(1)
    online = np.searchsorted(np.sort(trace.start), times, side="right") - np.searchsorted(
        np.sort(trace.end), times, side="right"
    )
    has = np.diff(trace.offsets) > 0
    first = np.sort(trace.start[trace.offsets[:-1][has]])
    ever = np.searchsorted(first, times, side="right")
    return times, online / nodes, ever / nodes


#: Fig. 1 draws at most this many login/logout bars and curve points: a 10-year trace at one
#: bar per hour (90,000 bars) took minutes and drew bars thinner than a pixel.
MAX_FIGURE_BARS = 240
MAX_FIGURE_POINTS = 4000
#: Bar widths Fig. 1 chooses from when the requested one would give too many bars.
FIGURE_BIN_WIDTHS = (
    HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, 7 * DAY, 14 * DAY, 30 * DAY,
    91 * DAY, 182 * DAY, 365 * DAY,
)  # fmt: skip


def figure_bin_seconds(span: float, requested: float) -> float:
    """The bar width of Fig. 1: ``requested``, or the first of :data:`FIGURE_BIN_WIDTHS`
    that gives at most :data:`MAX_FIGURE_BARS` bars over ``span``."""
    if span <= requested * MAX_FIGURE_BARS:
        return requested
    for width in FIGURE_BIN_WIDTHS:
        if width >= requested and span <= width * MAX_FIGURE_BARS:
            return width
    return math.ceil(span / MAX_FIGURE_BARS / DAY) * DAY


def _time_unit(span: float) -> tuple[float, str]:
    """The x-axis unit of Fig. 1: hours up to four days (the paper's), days up to two years,
    then years (of 365 days)."""
    if span <= 4 * DAY:
        return HOUR, "hours"
    if span <= 2 * 365 * DAY:
        return DAY, "days"
    return 365 * DAY, "years"


def _width_text(seconds: float) -> str:
    for unit, name in ((365 * DAY, "y"), (DAY, "d"), (HOUR, "h")):
        if seconds >= unit and (seconds / unit).is_integer():
            return f"{seconds / unit:g} {name}"
    return f"{seconds / HOUR:.3g} h"


def trace_figure(
    trace: IntervalTrace,
    out: Path,
    *,
    bin_seconds: float = HOUR,
    title: str | None = None,
) -> Path:
    """Draw Hegedűs et al. (2016) Fig. 1 for ``trace`` into the PNG ``out``.

    Top: the proportion of nodes online and ever online (since time 0) every 5 minutes (or
    coarser, at most :data:`MAX_FIGURE_POINTS` points). Bottom: per bin, the proportion of
    nodes logging in (bars up) and logging out (bars down), as a rate per hour; the bin is
    ``bin_seconds``, or wider for long traces (:func:`figure_bin_seconds`). Time is in
    hours from the window start (GMT for the STUNner segments), or days or years for long
    traces.
    """
    if bin_seconds <= 0:
        raise ValueError(f"bin_seconds must be positive, got {bin_seconds}")
    plt = pyplot()  # a clear error when matplotlib is missing, before importing from it
    from matplotlib.ticker import MaxNLocator

    span = _span(trace)
    stats_nodes = max(trace.node_count, 1)
    times, online, ever = online_curves(trace, step=max(5 * MINUTE, span / MAX_FIGURE_POINTS))
    _, start, end = _sessions(trace)
    bin_seconds = figure_bin_seconds(span, bin_seconds)
    per_hour = HOUR / bin_seconds / stats_nodes
    logins = _bin_counts(start[start > 0], span, bin_seconds) * per_hour
    logouts = _bin_counts(end[end < span], span, bin_seconds) * per_hour
    unit, unit_name = _time_unit(span)
    centres = (np.arange(logins.size) + 0.5) * bin_seconds / unit

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8.0, 6.4), sharex=True)
    top.plot(times / unit, ever, color="tab:orange", linewidth=1.4, label="ever online")
    top.plot(times / unit, online, color="tab:blue", linewidth=1.4, label="online")
    top.set_ylabel("proportion of nodes")
    top.set_ylim(0, 1)
    top.grid(alpha=0.3)
    top.legend(loc="center right")
    width = 0.85 * bin_seconds / unit
    bottom.bar(centres, logins, width=width, color="tab:green", label="log in")
    bottom.bar(centres, -logouts, width=width, color="tab:red", label="log out (negative)")
    bottom.axhline(0, color="black", linewidth=0.6)
    bottom.set_ylabel(f"proportion of nodes per hour\n(bins of {_width_text(bin_seconds)})")
    bottom.set_xlabel(f"time ({unit_name}, GMT)")
    bottom.grid(alpha=0.3)
    low, high = -float(logouts.max(initial=0.0)), float(logins.max(initial=0.0))
    if high - low > 0:  # headroom above the bars for the legend
        bottom.set_ylim(low - 0.05 * (high - low), high + 0.35 * (high - low))
    bottom.legend(loc="upper center", ncol=2, fontsize=8)
    if span > 0:
        bottom.set_xlim(0, span / unit)
        if unit == HOUR and span >= DAY:  # the paper's 6-hour ticks
            bottom.set_xticks(np.arange(0, span / HOUR + 1e-9, 6))
        else:
            bottom.xaxis.set_major_locator(MaxNLocator(nbins=10, steps=[1, 2, 3, 5, 6, 10]))
    if title is None:
        fraction = float(np.sum(trace.end - trace.start)) / (stats_nodes * span) if span else 0.0
        title = (
            f"{Path(trace.source).name}: {trace.node_count} nodes, "
            f"{span / HOUR:g} h, online {fraction:.1%} of node-time"
        )
    top.set_title(title, fontsize=10)
    fig.tight_layout()
    out = Path(out)
    tmp = out.with_name(f".{out.name}.tmp.png")
    try:
        fig.savefig(tmp, dpi=110)
        atomic_write_bytes(out, tmp.read_bytes())
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return out
