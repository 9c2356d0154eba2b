"""How each grid point of a report is named and drawn, the same in every figure.

A sweep's points are named by the parameters it varies (:func:`point_labels`); runs read from
their directories (``netsim report A B --out C``) by their names or the scenario keys that
differ (:func:`netsim.analysis.labels.series_labels`). Lines are told apart by colour, and in
grids of more than ten points also by line style (one varying parameter,
:func:`point_styles`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from netsim.analysis.collect import (
    SweepSource,
    format_value,
    run_configuration,
    run_name,
)
from netsim.analysis.labels import series_labels
from netsim.analysis.runs import load_manifest
from netsim.lazy import lazy_module
from netsim.plotting import pyplot

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

CONFIDENCE = 0.95


#: With fewer repetitions per point than this, a figure draws every run instead of a band (a
#: Student t interval over two runs is 12.7 standard errors wide and says little).
BAND_FROM_REPETITIONS = 3


LINE_STYLES = ("-", "--", ":", "-.")


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


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
    plt = pyplot()
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
