"""Churn: when each node is online, as one sorted array of transitions replayed by one process.

A :class:`ChurnSchedule` is built before the run (always-on, a synthetic on/off model, or a
trace), and :class:`ChurnReplay` applies it with a single SimPy process, so churn costs
O(number of transitions) rather than a sleeping process per node.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import simpy
from pydantic import Field, field_validator, model_validator

from netsim.contracts import ChurnModel, ComponentConfig, Section
from netsim.distributions import Distribution, Duration, PositiveDuration
from netsim.errors import ScenarioError
from netsim.fields import existing_file, resolved_path
from netsim.log import BOOL, F64, I32, TableSchema
from netsim.network.nodes import NodeStates
from netsim.sim import Simulation
from netsim.traces.intervals import IntervalTrace, read_canonical_trace, read_stunner_segments
from netsim.traces.renewal import RenewalLimitError, alternating_renewal
from netsim.units import DAY

#: What the run's manifest warning says when a STUNner replay replayed its fallback trace (the
#: research-only file absent): scripts that compare with figures of the real trace look for it.
FALLBACK_WARNING = "replaying the fallback trace"

CHURN_TABLE = TableSchema(
    name="churn",
    columns=(("time", F64), ("node", I32), ("online", BOOL)),
    description=(
        "Node state changes. Every node starts offline; nodes online at time 0 have a row "
        "(time 0, online=true), so the table alone reconstructs every online interval."
    ),
    time="time",
)


@dataclass(frozen=True, eq=False)
class ChurnSchedule:
    """Initial online state and the transitions after time 0, sorted by (time, node)."""

    initially_online: np.ndarray
    time: np.ndarray
    node: np.ndarray
    online: np.ndarray

    @property
    def n(self) -> int:
        return int(self.initially_online.size)

    def online_fraction(self, horizon: float) -> float:
        """The share of node-time in ``[0, horizon]`` that nodes are online."""
        if self.n == 0 or horizon <= 0:
            return 0.0
        _, start, end = self.online_intervals(horizon)
        return float(np.clip(end, 0.0, horizon).sum() - np.clip(start, 0.0, horizon).sum()) / (
            self.n * horizon
        )

    def online_intervals(self, horizon: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(node, start, end) of every online interval within ``[0, horizon]``, by node."""
        nodes = np.concatenate([np.flatnonzero(self.initially_online), self.node])
        times = np.concatenate([np.zeros(int(self.initially_online.sum())), self.time])
        states = np.concatenate([np.ones(int(self.initially_online.sum()), bool), self.online])
        order = np.lexsort((times, nodes))
        nodes, times, states = nodes[order], times[order], states[order]
        starts = np.flatnonzero(states)
        # the next row of the same node is its leave; none means online until the horizon
        has_end = (starts + 1 < nodes.size) & (
            nodes[np.minimum(starts + 1, nodes.size - 1)] == nodes[starts]
        )
        ends = np.where(has_end, times[np.minimum(starts + 1, nodes.size - 1)], horizon)
        return nodes[starts], times[starts], ends


def schedule_from_intervals(
    n: int, node: np.ndarray, start: np.ndarray, end: np.ndarray, horizon: float
) -> ChurnSchedule:
    """Turn per-node online intervals (sorted per node, non-overlapping) into a schedule.

    Touching intervals of a node are merged (no leave and join at the same instant); anything
    at or after ``horizon`` is dropped.
    """
    node = np.asarray(node, dtype=np.int64)
    order = np.lexsort((start, node))
    node, start, end = node[order], np.asarray(start)[order], np.asarray(end)[order]
    keep = (end > 0) & (start < horizon) & (end > start)
    node, start, end = node[keep], start[keep], end[keep]
    if node.size:
        new_run = np.concatenate([[True], (node[1:] != node[:-1]) | (start[1:] > end[:-1])])
        run = np.cumsum(new_run) - 1
        run_end = np.full(int(run[-1]) + 1, -np.inf)
        np.maximum.at(run_end, run, end)
        node, start, end = node[new_run], start[new_run], run_end
    initially = np.zeros(n, dtype=bool)
    initially[node[start <= 0]] = True
    joins = start > 0
    leaves = end < horizon
    time = np.concatenate([start[joins], end[leaves]])
    who = np.concatenate([node[joins], node[leaves]])
    state = np.concatenate([np.ones(int(joins.sum()), bool), np.zeros(int(leaves.sum()), bool)])
    order = np.lexsort((who, time))
    return ChurnSchedule(
        initially_online=initially,
        time=time[order].astype(np.float64),
        node=who[order].astype(np.int32),
        online=state[order],
    )


def always_on(n: int) -> ChurnSchedule:
    """No churn: every node online for the whole run."""
    return ChurnSchedule(
        initially_online=np.ones(n, dtype=bool),
        time=np.empty(0),
        node=np.empty(0, dtype=np.int32),
        online=np.empty(0, dtype=bool),
    )


def diurnal_factor(t: np.ndarray, amplitude: float, peak: float) -> np.ndarray:
    """1 + a·cos(2π(t − peak)/1 day): > 1 around ``peak`` (time of day, s after 00:00 UTC)."""
    return 1.0 + amplitude * np.cos(2.0 * math.pi * (t - peak) / DAY)


def synthetic(
    n: int,
    horizon: float,
    *,
    online: Distribution,
    offline: Distribution,
    rng: np.random.Generator,
    diurnal_amplitude: float = 0.0,
    diurnal_peak: float = 0.0,
) -> ChurnSchedule:
    """Alternating on/off renewal model with optional diurnal modulation.

    Online and offline period lengths are drawn from ``online`` and ``offline``. With a
    diurnal amplitude a, a period that begins at time t is stretched (online) or shrunk
    (offline) by m(t) = 1 + a·cos(2π(t − peak)/day), so more nodes are online around ``peak``;
    this modulation is evaluated once per period (an approximation of a time-varying rate).
    To start in (approximate) equilibrium the process runs from ``−warm-up`` (ten mean cycles,
    at least a day when modulated) and only what happens after time 0 is kept.
    """
    cycle = online.mean() + offline.mean()
    warmup = 10.0 * cycle
    if diurnal_amplitude > 0:
        warmup = max(warmup, DAY)

    def draw(nodes: np.ndarray, on_now: np.ndarray, begin: np.ndarray) -> np.ndarray:
        length = np.empty(nodes.size)
        length[on_now] = online.sample(rng, int(on_now.sum()))
        length[~on_now] = offline.sample(rng, int((~on_now).sum()))
        if diurnal_amplitude > 0:
            factor = diurnal_factor(begin, diurnal_amplitude, diurnal_peak)
            length = np.where(on_now, length * factor, length / factor)
        return length

    # A distribution whose mean is set by rare, very long periods (Weibull shape 0.01: the
    # mean is 10¹⁵⁸ times the median) needs some 10¹⁷ draws to cross a warm-up of ten mean
    # cycles. Each node is expected to need 2·(warm-up + horizon)/cycle + 2 periods; a
    # thousand times that per node (and a hundred times it over all nodes) is refused, far
    # past what a distribution with a usable mean draws (lognormal sigma 4: some 10²).
    expected = 2.0 * (warmup + horizon) / cycle + 2.0
    max_rounds = 1000.0 * expected + 1e5
    try:
        nodes, starts, ends = alternating_renewal(
            n, horizon, warmup=warmup, p_online=online.mean() / cycle, draw=draw, rng=rng,
            max_rounds=max_rounds, max_draws=100.0 * n * expected + 1e7,
        )  # fmt: skip
    except RenewalLimitError:
        raise ScenarioError(
            f"churn: the on/off periods from the warm-up ({warmup:.3g} s before time 0) to the "
            f"run's end took more than {max_rounds:.3g} periods of one node, or {100:d} times "
            f"the {expected:.3g} expected per node over all nodes: churn.online (mean "
            f"{online.mean():.3g} s) or churn.offline (mean {offline.mean():.3g} s) has a mean "
            "set by rare periods far longer than the typical one, so the warm-up of ten mean "
            "cycles cannot be drawn; use a distribution whose mean is closer to its median "
            "(a larger Weibull shape or a smaller lognormal sigma)"
        ) from None
    return schedule_from_intervals(n, nodes, starts, ends, horizon)


def assign_trace_nodes(
    trace_nodes: int, n: int, rng: np.random.Generator, how: Literal["random", "in_order"]
) -> np.ndarray:
    """Which trace node each simulated node replays.

    ``random``: distinct trace nodes in random order while they last, then re-sampled uniformly
    with replacement (Hegedűs et al. §5.1: "when we needed more users than segments, we
    re-sampled the segments"). ``in_order``: node i replays trace node i mod M.
    """
    if how == "in_order":
        return np.arange(n) % trace_nodes
    first = rng.permutation(trace_nodes)[:n]
    if n <= trace_nodes:
        return first
    return np.concatenate([first, rng.integers(0, trace_nodes, n - trace_nodes)])


def from_trace(
    trace: IntervalTrace,
    n: int,
    horizon: float,
    rng: np.random.Generator,
    how: Literal["random", "in_order"] = "random",
) -> tuple[ChurnSchedule, np.ndarray]:
    """Replay ``trace``: returns the schedule and the trace node assigned to each node."""
    picks = assign_trace_nodes(trace.node_count, n, rng, how)
    counts = np.diff(trace.offsets)[picks]
    first_row = trace.offsets[picks]
    # row indices of every picked node's intervals, node by node
    within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    rows = np.repeat(first_row, counts) + within
    nodes = np.repeat(np.arange(n), counts)
    schedule = schedule_from_intervals(n, nodes, trace.start[rows], trace.end[rows], horizon)
    return schedule, picks


class ChurnReplay:
    """Applies a :class:`ChurnSchedule` to :class:`NodeStates` with a single SimPy process."""

    def __init__(self, sim: Simulation, nodes: NodeStates, schedule: ChurnSchedule) -> None:
        self.sim = sim
        self.nodes = nodes
        self.schedule = schedule
        self.table = sim.log.table(CHURN_TABLE)
        for node in np.flatnonzero(schedule.initially_online).tolist():
            self.table.append(0.0, node, True)
        self.transitions_applied = 0
        if schedule.time.size:
            sim.env.process(self._replay())

    def _replay(self) -> Generator[simpy.Event, Any, None]:
        env = self.sim.env
        times = self.schedule.time
        who = self.schedule.node.tolist()
        state = self.schedule.online.tolist()
        time_list = times.tolist()
        k, total = 0, len(time_list)
        while k < total:
            t = time_list[k]
            if t > env.now:
                yield env.timeout(t - env.now)
            while k < total and time_list[k] == t:
                node = who[k]
                if state[k]:
                    self.nodes.set_online(node, t)
                else:
                    self.nodes.set_offline(node, t)
                self.table.append(t, node, state[k])
                k += 1
                self.transitions_applied += 1


# --- the churn components --------------------------------------------------------------------
# Each draws from the ``churn`` stream only.


class AlwaysOn(ChurnModel):
    """No churn: every node online for the whole run (the ``churn`` section's default)."""

    class Config(ComponentConfig):
        kind: Literal["always_on"] = "always_on"

    section = Section("churn", after=("links",), by_kind="always", present_by_default=True)

    def schedule(self, nodes: int, horizon: float) -> ChurnSchedule:
        return always_on(nodes)


class DiurnalConfig(ComponentConfig):
    amplitude: float = Field(ge=0.0, lt=1.0)
    peak: Duration = 0.0

    @field_validator("peak")
    @classmethod
    def _time_of_day(cls, value: float) -> float:
        if value >= DAY:
            raise ValueError("peak is a time of day: it must be less than 1d")
        return value


class SyntheticChurnModel(ChurnModel):
    """Alternating on/off periods drawn from two distributions (:func:`synthetic`)."""

    class Config(ComponentConfig):
        kind: Literal["synthetic"] = "synthetic"
        online: Distribution
        offline: Distribution
        diurnal: DiurnalConfig | None = None

        @model_validator(mode="after")
        def _positive_means(self) -> SyntheticChurnModel.Config:
            for key in ("online", "offline"):
                if getattr(self, key).mean() <= 0:
                    raise ValueError(f"{key} periods must have a positive mean length")
            return self

    @classmethod
    def expected_transitions(cls, config: Config, nodes: int, horizon: float) -> float:
        """Two transitions per node and mean on/off cycle (the diurnal modulation moves
        periods around the day, not their number much)."""
        cycle = config.online.mean() + config.offline.mean()
        return 2.0 * nodes * (horizon / cycle + 1.0)

    def schedule(self, nodes: int, horizon: float) -> ChurnSchedule:
        config = self.config
        diurnal = config.diurnal
        return synthetic(
            nodes,
            horizon,
            online=config.online,
            offline=config.offline,
            rng=self.ctx.stream(),
            diurnal_amplitude=diurnal.amplitude if diurnal else 0.0,
            diurnal_peak=diurnal.peak if diurnal else 0.0,
        )


class _Replay(ChurnModel):
    """What the trace replays share: warnings about the trace's span and size."""

    def replay(
        self,
        trace: IntervalTrace,
        nodes: int,
        horizon: float,
        assign: str,
        start_at: float = 0.0,
    ) -> ChurnSchedule:
        """Replay ``trace`` from ``start_at`` seconds on (time 0 of the run), with warnings
        when the run outlasts the trace; a ``start_at`` after the trace's last online interval
        is refused (every node would stay offline: the run would replay nothing)."""
        if start_at > 0:
            last = float(trace.end.max()) if trace.end.size else 0.0
            if start_at >= last:
                raise ScenarioError(
                    f"churn.start_at: {start_at:g} s is at or after the end of the last online "
                    f"interval of {trace.source} ({last:g} s), so every node would stay "
                    f"offline; start_at must be less than {last:g} s"
                )
            trace = trace.starting_at(start_at)
        if trace.span is not None and horizon > trace.span:
            self.ctx.warn(
                f"the run lasts {horizon:g} s but trace segments cover {trace.span:g} s; "
                "nodes stay offline after their segment ends"
            )
        if nodes > trace.node_count:
            how = "re-sampled at random" if assign == "random" else "reused in order"
            self.ctx.warn(
                f"{nodes} nodes but {trace.node_count} trace nodes in {trace.source}; "
                f"trace nodes are {how}"
            )
        schedule, picks = from_trace(trace, nodes, horizon, self.ctx.stream(), assign)  # type: ignore[arg-type]
        self.trace_labels = np.asarray(trace.labels, dtype=object)[picks]
        return schedule


class TraceReplay(_Replay):
    """Replay of a trace in netsim's canonical format (``netsim trace convert``)."""

    class Config(ComponentConfig):
        kind: Literal["trace"] = "trace"
        path: Path
        assign: Literal["random", "in_order"] = "random"
        #: Where in the trace the run's time 0 is: a long trace (years of FTA) replayed
        #: from a chosen window instead of its first days.
        start_at: Duration = Field(default=0.0, ge=0.0)

        _path = field_validator("path")(existing_file)

    def schedule(self, nodes: int, horizon: float) -> ChurnSchedule:
        trace = read_canonical_trace(self.config.path)
        return self.replay(trace, nodes, horizon, self.config.assign, self.config.start_at)


class StunnerReplay(_Replay):
    """Replay of the STUNner trace; ``fallback`` replaces it where the research-only file is
    absent (e.g. the shipped synthetic trace fitted to it)."""

    class Config(ComponentConfig):
        kind: Literal["stunner"] = "stunner"
        path: Path
        segment_length: PositiveDuration = 2 * DAY
        segment_step: PositiveDuration = DAY
        local_time: bool = False
        assign: Literal["random", "in_order"] = "random"
        #: Where in each segment the run's time 0 is (e.g. 12h: start at noon).
        start_at: Duration = Field(default=0.0, ge=0.0)
        fallback: TraceReplay.Config | None = None

        _path = field_validator("path")(resolved_path)

        @model_validator(mode="after")
        def _file_or_fallback(self) -> StunnerReplay.Config:
            if not self.path.is_file() and self.fallback is None:
                raise ValueError(f"path: file not found: {self.path} (and no fallback is given)")
            return self

    def schedule(self, nodes: int, horizon: float) -> ChurnSchedule:
        config = self.config
        if not config.path.is_file() and config.fallback is not None:
            self.ctx.warn(f"{config.path} is absent; {FALLBACK_WARNING} {config.fallback.path}")
            fallback = TraceReplay(config.fallback, self.ctx)
            schedule = fallback.schedule(nodes, horizon)
            self.trace_labels = fallback.trace_labels
            return schedule
        trace = read_stunner_segments(
            config.path, length=config.segment_length, step=config.segment_step,
            local_time=config.local_time,
        )  # fmt: skip
        return self.replay(trace, nodes, horizon, config.assign, config.start_at)
