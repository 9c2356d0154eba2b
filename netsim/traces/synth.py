"""A synthetic smartphone churn model fitted to a real availability trace.

The model (fitted by :func:`fit_churn_model`, sampled by :func:`generate_trace`):

- *Session lengths are the trace's own.* Online and offline period lengths are drawn from the
  empirical distributions of the fitted trace, stored as 101 quantiles of their logarithm
  (inverse-CDF sampling with linear interpolation), so no parametric family has to fit the
  heavy tails of smartphone sessions (STUNner: median ≈ 7 min, mean ≈ 59 min).
- *Per-user heterogeneity* through a Gaussian copula: node i has a latent z_i ~ N(0, 1) and each
  of its periods uses the quantile level u = Φ(ρ z_i + √(1 − ρ²) ε). The marginal stays the
  empirical one; ρ² is the share of the variance of log-lengths explained by the user, fitted
  from the between-user variance of mean log-lengths minus its sampling noise.
- *Diurnal pattern*: p(h), the fraction of nodes online during hour h of the day (time 0 =
  00:00 of the fitted trace's clock, UTC or local). A period starting in hour h has its online
  length stretched and its offline length shrunk by a(h) = √(p(h)(1 − p̄) / (p̄(1 − p(h)))),
  which makes the steady-state online fraction of hour h equal p(h) (a renewal argument:
  a²p̄ / (a²p̄ + 1 − p̄) = p).
- Censoring: only intervals that lie strictly inside their node's observation window are
  used for the length distributions (a session cut by the window end is not a session
  length); the first period of a generated node is drawn after a warm-up of one day, so
  nodes start in equilibrium.

The fitted parameters are plain JSON (:func:`save_params` / :func:`load_params`), so a trace
can be re-generated without the research-only source file.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from netsim import files
from netsim.errors import TraceError
from netsim.lazy import lazy_module
from netsim.storage import atomic_write_text
from netsim.traces.intervals import (
    MAX_TRACE_SECONDS,
    IntervalTrace,
    read_stunner_segments,
    read_stunner_users,
)
from netsim.traces.renewal import RenewalLimitError, alternating_renewal
from netsim.units import DAY, HOUR

if TYPE_CHECKING:
    import scipy.special as special
else:
    special = lazy_module("scipy.special")

QUANTILE_LEVELS = np.linspace(0.0, 1.0, 101)
#: What a generated trace may hold: its nodes' on/off periods over all nodes, and those of one
#: node. Both are built in memory and drawn in a loop, one pass per period of the busiest node
#: (some 20 µs), so 5·10⁸ periods are gigabytes and 10⁶ passes are some 20 s; a stretch of
#: 1e-300 or a log quantile of -1e300 made periods of no length, and the loop never ended.
MAX_SYNTH_PERIODS = 5 * 10**8
MAX_SYNTH_NODE_PERIODS = 10**6
#: Nodes a synthetic trace may have (labels and per-node draws: 10¹² ended in a 7 TiB
#: allocation); the STUNner trace's 2-day segments are some 10⁵.
MAX_SYNTH_NODES = 10**7


@dataclass(frozen=True)
class ChurnModelParams:
    """Everything needed to generate synthetic churn like the fitted trace."""

    source: str
    clock: str
    online_fraction: float
    hourly_online_fraction: tuple[float, ...]
    online_log_quantiles: tuple[float, ...]
    offline_log_quantiles: tuple[float, ...]
    online_user_correlation: float
    offline_user_correlation: float
    hourly_stretch: tuple[float, ...]
    fitted_nodes: int
    fitted_sessions: int


@dataclass(frozen=True)
class Periods:
    """Periods that start inside their node's observation window (an unbiased sample of
    lengths): ``event`` is False where the window ended first (right-censored)."""

    online: np.ndarray
    online_event: np.ndarray
    online_owner: np.ndarray
    offline: np.ndarray
    offline_event: np.ndarray
    offline_owner: np.ndarray


def periods(trace: IntervalTrace, windows: np.ndarray | None = None) -> Periods:
    """The online and offline periods of ``trace`` whose start lies inside ``(0, window)``.

    ``windows[j]`` is how long trace node j was observed (default: ``trace.span``, or the
    node's last interval end). A period cut by the window end is right-censored.
    """
    node = trace.node_index()
    start, end = trace.start, trace.end
    if windows is None:
        if trace.span is not None:
            windows = np.full(trace.node_count, trace.span)
        else:
            windows = np.zeros(trace.node_count)
            np.maximum.at(windows, node, end)
    window = windows[node]
    online = start > 0
    same = np.concatenate([node[1:] == node[:-1], [False]])  # another interval follows
    gap_start = end
    gap_end = np.where(same, np.concatenate([start[1:], [0.0]]), window)
    gap = (gap_end - gap_start) > 0
    return Periods(
        online=(np.minimum(end, window) - start)[online],
        online_event=(end < window)[online],
        online_owner=node[online],
        offline=(gap_end - gap_start)[gap],
        offline_event=same[gap],  # the gap after a node's last interval is cut by its window
        offline_owner=node[gap],
    )


def kaplan_meier_log_quantiles(lengths: np.ndarray, events: np.ndarray) -> np.ndarray:
    """Quantiles (at :data:`QUANTILE_LEVELS`) of log-length under right-censoring.

    Kaplan–Meier: S(t) = Π (1 − d_i / n_i) over event times t_i ≤ t. Levels beyond the last
    event (mass of lengths longer than any window) are put at the longest length observed.
    """
    order = np.argsort(lengths, kind="stable")
    lengths, events = lengths[order], events[order]
    at_risk = lengths.size - np.arange(lengths.size)
    survival = np.cumprod(1.0 - events / at_risk)
    cdf = 1.0 - survival
    positions = np.searchsorted(cdf, QUANTILE_LEVELS, side="left")
    positions = np.minimum(positions, lengths.size - 1)
    return np.log(lengths[positions])


def _user_correlation(lengths: np.ndarray, owners: np.ndarray) -> float:
    """ρ with ρ² = between-user variance of log-lengths / total variance (≥ 0, ≤ 0.95)."""
    logs = np.log(lengths)
    total = float(logs.var())
    if total <= 0 or lengths.size < 10:
        return 0.0
    _users, inverse, counts = np.unique(owners, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=logs)
    means = sums / counts
    squares = np.bincount(inverse, weights=logs**2)
    within = (squares - counts * means**2) / np.maximum(counts - 1, 1)
    several = counts > 1
    if several.sum() < 5:
        return 0.0
    pooled_within = float(np.average(within[several], weights=counts[several] - 1))
    between = float(means[several].var()) - float(np.mean(pooled_within / counts[several]))
    return float(math.sqrt(min(max(between / total, 0.0), 0.95**2)))


def _hourly_profile(trace: IntervalTrace, span: float, first_hour: int = 0) -> np.ndarray:
    """Fraction of nodes online in each hour of the day, averaged over the span (from
    ``first_hour`` on)."""
    hours = math.ceil(span / HOUR)
    edges = np.arange(hours + 1) * HOUR
    online = np.zeros(hours)
    start, end = trace.start, trace.end
    for h in range(first_hour, hours):
        lo, hi = edges[h], edges[h + 1]
        online[h] = np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0, None).sum()
    fraction = online / (trace.node_count * HOUR)
    by_hour = np.zeros(24)
    counts = np.zeros(24)
    used = np.arange(first_hour, hours)
    np.add.at(by_hour, used % 24, fraction[used])
    np.add.at(counts, used % 24, 1)
    return by_hour / np.maximum(counts, 1)


def fit_churn_model(
    trace: IntervalTrace,
    *,
    lengths_from: IntervalTrace | None = None,
    windows: np.ndarray | None = None,
    clock: str = "utc",
) -> ChurnModelParams:
    """Fit the model: the daily profile and online fraction from ``trace`` (best: the 2-day
    segments the simulator replays), the period lengths from ``lengths_from`` (default
    ``trace``; best: whole user records, observed for ``windows`` seconds each, where fewer
    periods are censored) with Kaplan–Meier."""
    source = lengths_from if lengths_from is not None else trace
    found = periods(source, windows)
    done_on = found.online_event
    done_off = found.offline_event
    if done_on.sum() < 50 or done_off.sum() < 50:
        raise TraceError(
            f"{trace.source}: too few complete sessions to fit a churn model "
            f"({int(done_on.sum())} online, {int(done_off.sum())} offline; at least 50 each)"
        )
    span = trace.span if trace.span is not None else float(trace.end.max())
    online_fraction = float((trace.end - trace.start).sum() / (trace.node_count * span))
    params = ChurnModelParams(
        source=trace.source,
        clock=clock,
        online_fraction=online_fraction,
        hourly_online_fraction=tuple(float(x) for x in _hourly_profile(trace, span)),
        online_log_quantiles=tuple(
            float(x) for x in kaplan_meier_log_quantiles(found.online, done_on)
        ),
        offline_log_quantiles=tuple(
            float(x) for x in kaplan_meier_log_quantiles(found.offline, done_off)
        ),
        online_user_correlation=_user_correlation(
            found.online[done_on], found.online_owner[done_on]
        ),
        offline_user_correlation=_user_correlation(
            found.offline[done_off], found.offline_owner[done_off]
        ),
        hourly_stretch=(1.0,) * 24,
        fitted_nodes=trace.node_count,
        fitted_sessions=int(done_on.sum()),
    )
    return calibrate_stretch(params)


def calibrate_stretch(
    params: ChurnModelParams, *, iterations: int = 12, nodes: int = 4000, seed: int = 0
) -> ChurnModelParams:
    """Tune the 24 hourly stretch factors until generated churn has the fitted hourly profile.

    The renewal formula a(h)² = odds(p(h)) / odds(p̄) is the starting point; because periods
    last hours and node-level heterogeneity is heavy, the generated profile is flatter than
    the target, so each iteration multiplies a(h)² by odds(target) / odds(generated) for each
    hour, measured on a fixed-seed sample of ``nodes`` nodes over the second day of two.
    """
    target = np.clip(np.asarray(params.hourly_online_fraction), 1e-3, 1 - 1e-3)
    p_bar = min(max(params.online_fraction, 1e-3), 1 - 1e-3)

    def odds(p: np.ndarray | float) -> np.ndarray | float:
        return p / (1 - p)

    log_a2 = np.log(odds(target) / odds(p_bar))
    for _ in range(iterations):
        trial = replace(params, hourly_stretch=tuple(float(x) for x in np.exp(log_a2 / 2)))
        sample = generate_trace(
            trial, nodes=nodes, duration=2 * DAY, rng=np.random.default_rng(seed)
        )
        measured = np.clip(_hourly_profile(sample, 2 * DAY, first_hour=24), 1e-3, 1 - 1e-3)
        log_a2 += np.log(odds(target) / odds(measured))
    return replace(params, hourly_stretch=tuple(float(x) for x in np.exp(log_a2 / 2)))


def _lengths(levels: np.ndarray, log_quantiles: np.ndarray) -> np.ndarray:
    return np.exp(np.interp(levels, QUANTILE_LEVELS, log_quantiles))


def generate_trace(
    params: ChurnModelParams,
    *,
    nodes: int,
    duration: float,
    rng: np.random.Generator,
    label_prefix: str = "synthetic-",
) -> IntervalTrace:
    """Sample ``nodes`` independent node histories over ``[0, duration)``."""
    if nodes < 1 or duration <= 0:
        raise ValueError("generate_trace needs nodes >= 1 and duration > 0")
    if nodes > MAX_SYNTH_NODES or not duration <= MAX_TRACE_SECONDS:
        raise TraceError(
            f"a synthetic trace has at most {MAX_SYNTH_NODES:.0e} nodes and lasts at most "
            f"{MAX_TRACE_SECONDS:.0e} s (about 317 years); got {nodes} nodes, {duration:g} s"
        )
    p_bar = params.online_fraction
    stretch = np.asarray(params.hourly_stretch)
    on_q = np.asarray(params.online_log_quantiles)
    off_q = np.asarray(params.offline_log_quantiles)
    rho_on, rho_off = params.online_user_correlation, params.offline_user_correlation
    z_on = rng.standard_normal(nodes)
    z_off = rng.standard_normal(nodes)

    def draw(active: np.ndarray, on_now: np.ndarray, begin: np.ndarray) -> np.ndarray:
        eps = rng.standard_normal(active.size)
        latent = np.where(
            on_now,
            rho_on * z_on[active] + math.sqrt(1 - rho_on**2) * eps,
            rho_off * z_off[active] + math.sqrt(1 - rho_off**2) * eps,
        )
        levels = special.ndtr(latent)
        length = np.where(on_now, _lengths(levels, on_q), _lengths(levels, off_q))
        factor = stretch[((begin % DAY) // HOUR).astype(np.int64)]
        return np.where(on_now, length * factor, length / factor)

    try:
        node, start, end = alternating_renewal(
            nodes, duration, warmup=DAY, p_online=p_bar, draw=draw, rng=rng,
            max_rounds=MAX_SYNTH_NODE_PERIODS, max_draws=MAX_SYNTH_PERIODS,
        )  # fmt: skip
    except RenewalLimitError:
        raise TraceError(
            f"a synthetic trace of {nodes} nodes over {duration:g} s (and a day's warm-up) "
            f"would have more than {MAX_SYNTH_NODE_PERIODS:.0e} on/off periods on one node or "
            f"{MAX_SYNTH_PERIODS:.0e} in all (from the parameters of {params.source}): use "
            "fewer nodes or a shorter duration"
        ) from None
    keep = end > 0
    node, start, end = node[keep], np.maximum(start[keep], 0.0), np.minimum(end[keep], duration)
    start = np.round(start, 3)  # milliseconds, as in the STUNner trace
    end = np.round(end, 3)
    keep = end > start
    node, start, end = node[keep], start[keep], end[keep]
    order = np.lexsort((start, node))
    node, start, end = node[order], start[order], end[order]
    offsets = np.zeros(nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(node, minlength=nodes), out=offsets[1:])
    return IntervalTrace(
        labels=tuple(f"{label_prefix}{i}" for i in range(nodes)),
        offsets=offsets,
        start=start,
        end=end,
        span=duration,
        source=f"synthetic churn like {params.source}",
    )


def save_params(params: ChurnModelParams, path: Path) -> None:
    """Write the parameters as JSON (atomically)."""
    atomic_write_text(Path(path), json.dumps(asdict(params), indent=2) + "\n")


def load_params(path: Path) -> ChurnModelParams:
    """Read parameters written by :func:`save_params`; errors name the file and the key."""
    path = Path(path)
    try:
        data = json.loads(
            files.read_text(
                path, what="parameter file", limit=files.MAX_SCENARIO_BYTES, error=TraceError
            )
        )
    except FileNotFoundError:
        raise TraceError(f"{path}: churn model parameters not found") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read the parameters: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: not a JSON file of churn model parameters: {exc}") from None
    fields = ChurnModelParams.__dataclass_fields__
    missing = [name for name in fields if name not in data]
    unknown = [name for name in data if name not in fields]
    if missing or unknown:
        raise TraceError(
            f"{path}: churn model parameters: missing keys {missing}, unknown keys {unknown}"
        )
    for key in (
        "hourly_online_fraction",
        "online_log_quantiles",
        "offline_log_quantiles",
        "hourly_stretch",
    ):
        data[key] = tuple(data[key])
    if len(data["hourly_online_fraction"]) != 24 or len(data["online_log_quantiles"]) != 101:
        raise TraceError(f"{path}: expected 24 hourly fractions and 101 quantiles per length")
    problem = _params_problem(data)
    if problem is not None:
        raise TraceError(f"{path}: churn model parameters: {problem}")
    return ChurnModelParams(**data)


def _numbers(values: object, low: float, high: float) -> bool:
    """Whether ``values`` are finite numbers (not booleans) in [low, high]."""
    items = values if isinstance(values, tuple) else (values,)
    return all(
        isinstance(x, int | float) and not isinstance(x, bool) and low <= x <= high for x in items
    )


def _params_problem(data: dict) -> str | None:  # type: ignore[type-arg]
    """What makes read parameters meaningless (``None``: nothing): a fraction outside
    [0, 1], a correlation outside [-1, 1] (its sqrt(1 - ρ²) raised a math domain error), a
    stretch that is not a positive finite factor (a negative one hung the generator), log
    quantiles that are not non-decreasing lengths from 1 µs to 10¹⁰ s, or 24 stretches missing."""
    fractions = (data["online_fraction"], *data["hourly_online_fraction"])
    if not _numbers(fractions, 0.0, 1.0):
        return "online_fraction and hourly_online_fraction must be numbers in [0, 1]"
    for key in ("online_user_correlation", "offline_user_correlation"):
        if not _numbers(data[key], -1.0, 1.0):
            return f"{key} must be a number in [-1, 1], got {data[key]!r}"
    stretch = data["hourly_stretch"]
    if len(stretch) != 24 or not _numbers(stretch, math.ulp(0.0), sys.float_info.max):
        return "hourly_stretch must be 24 positive finite factors"
    low, high = math.log(1e-6), math.log(MAX_TRACE_SECONDS)
    for key in ("online_log_quantiles", "offline_log_quantiles"):
        q = data[key]
        if (
            len(q) != 101
            or not _numbers(q, low, high)
            or any(b < a for a, b in itertools.pairwise(q))
        ):
            return (
                f"{key} must be 101 non-decreasing natural logarithms of lengths in seconds, "
                f"each in [ln 1e-6, ln 1e10] = [{low:.2f}, {high:.2f}]"
            )
    return None


def stunner_records(path: Path) -> tuple[IntervalTrace, np.ndarray]:
    """Whole STUNner records: one trace node per contiguous observed span of a user, and how
    long each was observed (the windows for Kaplan–Meier)."""
    users = read_stunner_users(path)
    labels: list[str] = []
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    counts: list[int] = []
    windows: list[float] = []
    for user in users:
        for first, last in zip(user.span_start, user.span_end, strict=True):
            lo = np.searchsorted(user.online_end, first, side="right")
            hi = np.searchsorted(user.online_start, last, side="left")
            s = np.clip(user.online_start[lo:hi], first, last) - first
            e = np.clip(user.online_end[lo:hi], first, last) - first
            keep = e > s
            labels.append(f"{user.user}@{int(first)}")
            starts.append(s[keep])
            ends.append(e[keep])
            counts.append(int(keep.sum()))
            windows.append(float(last - first))
    offsets = np.zeros(len(labels) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    trace = IntervalTrace(
        tuple(labels), offsets, np.concatenate(starts), np.concatenate(ends), None, str(path)
    )
    return trace, np.array(windows)


def fit_stunner(path: Path, *, local_time: bool = False) -> ChurnModelParams:
    """Fit to a STUNner file: the daily profile from its 2-day segments (what the simulator
    replays), the period lengths from the whole records (fewer censored periods)."""
    segments = read_stunner_segments(path, local_time=local_time)
    records, windows = stunner_records(path)
    return fit_churn_model(
        segments, lengths_from=records, windows=windows, clock="local" if local_time else "utc"
    )
