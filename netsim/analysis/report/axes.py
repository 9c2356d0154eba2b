"""The x axes of the comparison figure besides simulated time (:data:`X_AXES`): passes over
the data (the gradient updates made so far in the whole network, every model's, over the
training-set size, from ``sgd_visits``) and messages sent (``samples.messages_sent``, every
message the transport counted). A curve's statistics, binned and averaged in time, are put on
such an axis by each run's map from time to passes or messages (:class:`AxisMap`): a point's
x at a time is the mean over its seeds (:func:`mapped_statistics`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from netsim.analysis.collect import SweepSource
from netsim.analysis.report.curves import CurveStatistics
from netsim.analysis.report.setting import Setting
from netsim.analysis.runs import load_manifest
from netsim.errors import ReportError, RunDirectoryError
from netsim.lazy import lazy_module
from netsim.storage import read_table

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

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
