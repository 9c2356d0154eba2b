"""Which figures a report draws: the network's (:data:`NETWORK_FIGURES`), those every
component the runs were built from declares (:func:`component_figures`), one per other table
with a time or round axis (:func:`table_figures`), the comparison of learning runs, the privacy
spent and privacy per observer against distance (:func:`draw_figures`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from netsim.analysis.collect import (
    SweepSource,
    summarize,
)
from netsim.analysis.learning import (
    WALK_ACCURACY_TABLE,
)
from netsim.analysis.report.comparison import (
    TIME,
    draw_comparison,
    has_learning,
    mixed_learning,
    prepare_comparison,
)
from netsim.analysis.report.curves import curve_statistics
from netsim.analysis.report.distance import (
    PAIRWISE_FIGURE,
    distance_statistics,
    draw_distance_figure,
)
from netsim.analysis.report.drawing import draw_curve_figure
from netsim.analysis.report.privacy import PRIVACY_FIGURE, draw_privacy_figure, spent_epsilon
from netsim.analysis.report.styles import CONFIDENCE, point_labels, point_styles
from netsim.analysis.runs import load_manifest
from netsim.contracts import Curve, FigureSpec
from netsim.errors import NetsimError
from netsim.lazy import lazy_module
from netsim.plotting import HOURS, TimeUnit

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

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


def draw_figures(
    long: pd.DataFrame,
    source: SweepSource,
    repetitions: dict[int, int],
    out: Path,
    figures: Sequence[FigureSpec] = NETWORK_FIGURES,
    unit: TimeUnit = HOURS,
    distances: tuple[pd.DataFrame, pd.DataFrame] | None = None,
    x_axes: Sequence[str] = (TIME,),
) -> dict[FigureSpec, str]:
    """Draw every standard figure whose tables ``long`` has, and a figure of every other
    table with a time or round axis, into ``out``, time axes in ``unit``; returns those drawn,
    each with a note on how its runs were binned ("" if they were not).

    Runs that learned by a walk and by gossip get, first, their accuracies in one figure
    (:mod:`netsim.analysis.report.comparison`), in place of the walk's own; so do learning
    runs of one kind when ``x_axes`` asks for passes or messages (one comparison figure per
    axis of ``x_axes``). ``distances``: the runs' pairs by distance and local ε
    (:func:`~netsim.analysis.report.distance.distance_pairs`), drawn when there are pairs."""
    labels = point_labels(source)
    styles = point_styles(source)
    drawn: dict[FigureSpec, str] = {}

    def draw(specs: Sequence[FigureSpec], rows: pd.DataFrame = long) -> None:
        for spec in specs:
            statistics = [curve_statistics(rows, curve) for curve in spec.panels]
            if any(s.empty for s in statistics):
                continue
            drawn[spec] = draw_curve_figure(
                spec, statistics, labels, styles, repetitions, out / spec.file, unit
            )

    superseded: tuple[FigureSpec, ...] = ()
    if has_learning(long) and (mixed_learning(long) or set(x_axes) - {TIME}):
        comparison = prepare_comparison(long, source, labels, styles, repetitions)
        for axis in x_axes:
            found = draw_comparison(comparison, axis, out, unit)
            if found is not None:
                drawn[found[0]] = found[1]
        # the walk's accuracy figure would repeat the walk's line beside gossip learning's
        # single-model evaluations (its runs' accuracy table), which the comparison leaves out
        superseded = tuple(
            spec for spec in figures if {c.table for c in spec.panels} == {WALK_ACCURACY_TABLE}
        )
    draw([spec for spec in figures if spec not in superseded])
    # a table no drawn figure shows (e.g. broadcasts with other thresholds) gets its own
    draw(table_figures(long, (*drawn, *superseded)))
    privacy = long[(long["table"] == "privacy") & (long["metric"] == "epsilon_spent_max")]
    if spent_epsilon(privacy):
        statistics = summarize(privacy, CONFIDENCE)
        draw_privacy_figure(
            statistics, privacy, labels, styles, repetitions, out / PRIVACY_FIGURE.file
        )
        drawn[PRIVACY_FIGURE] = ""
    if distances is not None and not distances[0].empty:
        draw_distance_figure(
            distance_statistics(distances[0]), distances[1], labels, styles,
            out / PAIRWISE_FIGURE.file,
        )  # fmt: skip
        drawn[PAIRWISE_FIGURE] = ""
    return drawn


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
