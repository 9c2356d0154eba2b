"""The standard figures of a sweep (or a single run) and a Markdown page that shows them.

:func:`write_report` collects the runs (:func:`netsim.analysis.collect.collect`), draws the
figures whose tables the runs have — walk counts, accuracy, regret, privacy spent, online
nodes — and writes ``report.md`` with the grid, the failed runs, a table of the one-row summary
metrics per grid point and the figures. Every line of a figure is one grid point: the mean over
its repetitions, with a band for the Student t confidence interval of the mean when it has
several (:func:`netsim.analysis.collect.summarize`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from netsim.analysis.collect import (
    METRIC_TABLES,
    SweepSource,
    format_value,
    half_width,
    load_sweep,
    long_table,
    parameter_columns,
    run_status,
    summarize,
)
from netsim.analysis.figures import _pyplot, save_figure
from netsim.storage import atomic_write_text
from netsim.units import HOUR

REPORT_FILE = "report.md"
REPORT_DIR = "report"
CONFIDENCE = 0.95
#: At most this many time bins when the runs' time stamps differ (e.g. accuracy evaluations).
MAX_TIME_BINS = 100


@dataclass(frozen=True)
class Curve:
    """One metric of one table against ``axis`` ("time" or "round") in one panel."""

    table: str
    metric: str
    axis: str
    ylabel: str


@dataclass(frozen=True)
class FigureSpec:
    """A standard figure: its file, what it shows and its panels (drawn top to bottom)."""

    file: str
    caption: str
    sentence: str
    title: str
    panels: tuple[Curve, ...]
    log_x_over_decades: float | None = None  # log-scaled x when x spans more decades


CURVE_FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec(
        file="walk_counts.png",
        caption="random walks over time",
        sentence=(
            "The number of random walks propagating at once (top) and the step count of the "
            "oldest propagating walk (bottom) against simulated time."
        ),
        title="Random walks",
        panels=(
            Curve("walk_samples", "propagating", "time", "walks propagating (number of walks)"),
            Curve("walk_samples", "oldest_steps", "time", "oldest walk (number of steps)"),
        ),
    ),
    FigureSpec(
        file="accuracy_vs_time.png",
        caption="test accuracy over time",
        sentence=(
            "Test accuracy of the learned models against simulated time, first averaged over "
            "the models (walks) evaluated in each time bin of a run."
        ),
        title="Test accuracy",
        panels=(Curve("accuracy", "accuracy", "time", "accuracy (fraction correct)"),),
    ),
    FigureSpec(
        file="dola_accuracy_vs_round.png",
        caption="DOLA test accuracy by round",
        sentence="Test accuracy of DOLA's running average ŵ_t = (1/t) Σ w̄_s against the round t.",
        title="DOLA: test accuracy of the averaged iterate",
        panels=(Curve("dola_rounds", "accuracy_averaged", "round", "accuracy (fraction correct)"),),
    ),
    FigureSpec(
        file="dola_regret_vs_round.png",
        caption="DOLA average regret per node",
        sentence=(
            "DOLA's average regret per node R_D(t)/(t·m) at the regret checkpoints (a lower "
            "bound: the hindsight minimum is a solver's upper bound)."
        ),
        title="DOLA: average regret per node",
        panels=(
            Curve(
                "dola_regret",
                "average_regret_per_node",
                "round",
                "average regret per node (loss units)",
            ),
        ),
        log_x_over_decades=2.0,
    ),
    FigureSpec(
        file="mi_ogd_regret_vs_round.png",
        caption="MI-OGD regret",
        sentence=(
            "Regret of mutual-information-private online gradient descent over the rounds "
            "played up to round t (a lower bound, as for DOLA)."
        ),
        title="MI-private OGD: regret",
        panels=(Curve("mi_ogd_regret", "regret", "round", "regret (loss units)"),),
        log_x_over_decades=2.0,
    ),
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
ALL_FIGURES: tuple[FigureSpec, ...] = (*CURVE_FIGURES, PRIVACY_FIGURE)


# --- what the lines are -----------------------------------------------------------------------


def varying_parameters(source: SweepSource) -> list[str]:
    """The parameters whose value differs between grid points of the plan."""
    points = source.plan.drop_duplicates("point")
    return [p for p in source.parameters if points[p].nunique(dropna=False) > 1]


def point_labels(source: SweepSource) -> dict[int, str]:
    """How each grid point is named in legends: the parameters that vary (``key=value``)."""
    varying = varying_parameters(source)
    labels = {}
    for _, row in source.plan.drop_duplicates("point").iterrows():
        parts = [f"{p}={format_value(row[p])}" for p in varying]
        labels[int(row["point"])] = ", ".join(parts) if parts else source.name
    return labels


def point_colours(points: Sequence[int]) -> dict[int, object]:
    """A fixed colour per grid point, the same in every figure."""
    plt = _pyplot()
    ordered = sorted(points)
    if len(ordered) <= 10:
        cmap = plt.get_cmap("tab10")
        return {p: cmap(i) for i, p in enumerate(ordered)}
    if len(ordered) <= 20:
        cmap = plt.get_cmap("tab20")
        return {p: cmap(i) for i, p in enumerate(ordered)}
    cmap = plt.get_cmap("viridis")
    return {p: cmap(i / (len(ordered) - 1)) for i, p in enumerate(ordered)}


def repetitions_text(counts: Sequence[int]) -> str:
    """What a figure's lines are averaged over, for its title."""
    low, high = min(counts), max(counts)
    if high <= 1:
        return "one repetition per point (no confidence band)"
    span = f"{high}" if low == high else f"{low}–{high}"
    return f"mean of {span} repetitions per point; band: {CONFIDENCE:.0%} CI of the mean"


# --- curves -----------------------------------------------------------------------------------


def _aligned(samples: pd.DataFrame, axis: str) -> bool:
    """True iff every run of a grid point sampled at the same ``axis`` values."""
    runs_per_point = samples.groupby("point")["run"].nunique()
    runs_at = samples.drop_duplicates(["run", axis]).groupby(["point", axis])["run"].nunique()
    expected = runs_per_point.reindex(runs_at.index.get_level_values("point")).to_numpy()
    return bool((runs_at.to_numpy() == expected).all())


def _on_common_grid(samples: pd.DataFrame, axis: str) -> pd.DataFrame:
    """``samples`` with ``axis`` snapped to the centres of equal bins, about as many as a run
    has distinct values (at most :data:`MAX_TIME_BINS`), so repetitions whose time stamps
    differ can be averaged."""
    distinct = samples.drop_duplicates(["run", axis]).groupby("run")[axis].size()
    bins = int(min(MAX_TIME_BINS, max(2, np.median(distinct.to_numpy()))))
    low, high = float(samples[axis].min()), float(samples[axis].max())
    if high <= low:
        return samples
    width = (high - low) / bins
    index = np.clip(np.floor((samples[axis].to_numpy() - low) / width), 0, bins - 1)
    return samples.assign(**{axis: low + (index + 0.5) * width})


def curve_statistics(long: pd.DataFrame, curve: Curve) -> pd.DataFrame:
    """Per grid point and ``curve.axis`` value: n, mean and CI over repetitions of the metric,
    after averaging each run over its series (and over time bins when runs' times differ)."""
    samples = long[(long["table"] == curve.table) & (long["metric"] == curve.metric)]
    samples = samples.dropna(subset=[curve.axis])
    if samples["value"].isna().all():
        return pd.DataFrame()
    if not _aligned(samples, curve.axis):
        samples = _on_common_grid(samples, curve.axis)
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
    return statistics.rename(columns={curve.axis: "x"}).sort_values(["point", "x"])


def _log_x(statistics: list[pd.DataFrame], decades: float | None) -> bool:
    if decades is None:
        return False
    x = np.concatenate([s["x"].to_numpy() for s in statistics])
    positive = x[x > 0]
    return positive.size > 0 and positive.max() / positive.min() > 10**decades


def _limit_to_runs(ax, statistics: pd.DataFrame) -> None:
    """Cut confidence bands that reach beyond every run's values at the axes' edge."""
    low, high = float(statistics["run_min"].min()), float(statistics["run_max"].max())
    if not (math.isfinite(low) and math.isfinite(high)):
        return
    pad = 0.06 * (high - low) if high > low else max(abs(high) * 0.06, 0.5)
    bottom, top = ax.get_ylim()
    ax.set_ylim(max(bottom, low - pad), min(top, high + pad))


def _draw_curve_figure(
    spec: FigureSpec,
    statistics: list[pd.DataFrame],
    labels: dict[int, str],
    colours: dict[int, object],
    repetitions: dict[int, int],
    out: Path,
) -> Path:
    plt = _pyplot()
    panels = len(spec.panels)
    fig, axes = plt.subplots(
        panels,
        1,
        figsize=(8.0, 3.0 + 2.4 * panels),
        sharex=True,
        squeeze=False,
        layout="constrained",
    )
    points = sorted({int(p) for s in statistics for p in s["point"].unique()})
    alpha = 0.2 if len(points) <= 3 else 0.12  # many overlapping bands would hide the lines
    for ax, curve, stats in zip(axes[:, 0], spec.panels, statistics, strict=True):
        for point, line in stats.groupby("point", sort=True):
            x = line["x"].to_numpy() / (HOUR if curve.axis == "time" else 1.0)
            colour = colours[int(point)]
            marker = "o" if len(x) <= 30 else None
            ax.plot(
                x, line["mean"], color=colour, lw=1.4, marker=marker, ms=3, label=labels[int(point)]
            )
            if line["n"].max() > 1:
                ax.fill_between(x, line["ci_low"], line["ci_high"], color=colour, alpha=alpha, lw=0)
        ax.set_ylabel(curve.ylabel)
        ax.grid(alpha=0.3, which="both")
        _limit_to_runs(ax, stats)
    bottom = axes[-1, 0]
    bottom.set_xlabel("time (hours)" if spec.panels[0].axis == "time" else "round")
    if _log_x(statistics, spec.log_x_over_decades):
        bottom.set_xscale("log")
    counts = [repetitions.get(p, 0) for p in points]
    axes[0, 0].set_title(f"{spec.title}\n{repetitions_text(counts)}", fontsize=10)
    if len(points) > 1:
        handles, names = axes[0, 0].get_legend_handles_labels()
        # outside the axes: a legend never hides a line
        fig.legend(
            handles,
            names,
            loc="outside lower center",
            ncols=min(3, len(points)),
            fontsize=8,
            frameon=False,
        )
    return save_figure(fig, out)


def _draw_privacy_figure(
    statistics: pd.DataFrame,
    labels: dict[int, str],
    colours: dict[int, object],
    repetitions: dict[int, int],
    out: Path,
) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.0, 4.6), layout="constrained")
    statistics = statistics.sort_values("point")
    positions = np.arange(len(statistics))
    for position, row in zip(positions, statistics.itertuples(index=False), strict=True):
        below, above = row.mean - row.ci_low, row.ci_high - row.mean
        ax.errorbar(
            [position],
            [row.mean],
            yerr=[[below], [above]],
            fmt="o",
            capsize=5,
            color=colours[int(row.point)],
            ms=6,
        )
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
    counts = [repetitions.get(int(p), 0) for p in statistics["point"]]
    text = repetitions_text(counts).replace("band", "error bars")
    ax.set_title(f"{PRIVACY_FIGURE.title}\n{text}", fontsize=10)
    return save_figure(fig, out)


def _spent_epsilon(privacy: pd.DataFrame) -> bool:
    """True iff some run's records spent some ε (mutual-information releases and non-private
    runs spend none: a figure of zeros says nothing)."""
    spent = privacy["value"].dropna()
    return bool((spent != 0).any())


def draw_figures(
    long: pd.DataFrame, source: SweepSource, repetitions: dict[int, int], out: Path
) -> list[FigureSpec]:
    """Draw every standard figure whose tables ``long`` has into ``out``; returns those drawn."""
    labels = point_labels(source)
    colours = point_colours(list(labels))
    drawn = []
    for spec in CURVE_FIGURES:
        statistics = [curve_statistics(long, curve) for curve in spec.panels]
        if any(s.empty for s in statistics):
            continue
        _draw_curve_figure(spec, statistics, labels, colours, repetitions, out / spec.file)
        drawn.append(spec)
    privacy = long[(long["table"] == "privacy") & (long["metric"] == "epsilon_spent_max")]
    if _spent_epsilon(privacy):
        statistics = summarize(privacy, CONFIDENCE)
        _draw_privacy_figure(statistics, labels, colours, repetitions, out / PRIVACY_FIGURE.file)
        drawn.append(PRIVACY_FIGURE)
    return drawn


# --- the Markdown page ------------------------------------------------------------------------


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _number(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.4g}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |"]
    lines.append("| " + " | ".join("---" for _ in header) + " |")
    lines.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)
    return lines


def grid_lines(source: SweepSource, status: pd.DataFrame) -> list[str]:
    """The grid as a Markdown table: one row per point with its parameters and how many of
    its planned repetitions completed."""
    complete = status[status["status"] == "complete"].groupby("point").size()
    planned = status.groupby("point").size()
    points = source.plan.drop_duplicates("point").sort_values("point")
    rows = [
        [
            str(int(row["point"])),
            *(format_value(row[p]) for p in source.parameters),
            f"{int(complete.get(row['point'], 0))}/{int(planned.get(row['point'], 0))}",
        ]
        for _, row in points.iterrows()
    ]
    return _table(["point", *source.parameters, "repetitions complete/planned"], rows)


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


def summary_lines(long: pd.DataFrame, points: Sequence[int]) -> list[str]:
    """The one-row summary metrics as a Markdown table: one row per ``table.metric``, one
    column per grid point, ``mean ± half-width of the CI`` (just the mean for n = 1)."""
    one_row = [t.name for t in METRIC_TABLES if t.one_row]
    statistics = summarize(long[long["table"].isin(one_row)], CONFIDENCE)
    if statistics.empty:
        return ["No summary tables in these runs."]
    statistics = statistics.assign(half=half_width(statistics))
    order = {name: i for i, name in enumerate(one_row)}
    keys = sorted(
        statistics[["table", "metric"]].drop_duplicates().itertuples(index=False),
        key=lambda k: (order[k.table], k.metric),
    )
    cells = {
        (row.table, row.metric, int(row.point)): (
            _number(row.mean)
            if row.n <= 1 or not row.half > 0
            else f"{_number(row.mean)} ± {row.half:.2g}"
        )
        for row in statistics.itertuples(index=False)
    }
    rows = [
        [f"{table}.{metric}", *(cells.get((table, metric, p), "–") for p in points)]
        for table, metric in keys
    ]
    return _table(["metric", *(f"point {p}" for p in points)], rows)


def write_report(path: Path, out: Path | None = None) -> Path:
    """Draw the standard figures of the sweep (or run) at ``path`` into ``out`` (default
    ``<path>/report/``) and write ``report.md`` there linking them; returns its path.

    Only the figures whose tables the complete runs have are drawn; figures of an earlier
    report that no longer apply are removed so that the directory matches the page.
    """
    source = load_sweep(path)
    status = run_status(source)  # one snapshot: the grid table and the figures agree
    long = long_table(source, status)
    out = Path(out) if out is not None else source.path / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    repetitions = {
        int(p): int(n)
        for p, n in status[status["status"] == "complete"].groupby("point").size().items()
    }
    drawn = draw_figures(long, source, repetitions, out)
    for spec in ALL_FIGURES:
        if spec not in drawn:
            (out / spec.file).unlink(missing_ok=True)
    points = sorted(int(p) for p in source.plan["point"].unique())
    counts = status["status"].value_counts()
    kind = "run" if source.single_run else "sweep"
    lines = [
        f"# Report: {source.name}",
        "",
        f"{kind.capitalize()} directory `{source.path}`"
        + (f", scenario `{source.scenario}`" if source.scenario and not source.single_run else "")
        + f". {counts.get('complete', 0)} of {len(status)} planned runs complete, "
        f"{counts.get('failed', 0)} failed, {counts.get('missing', 0)} missing. Values are the "
        f"mean over the complete repetitions of a grid point ± half the width of the "
        f"{CONFIDENCE:.0%} Student t confidence interval of the mean (no ± with one repetition "
        "or equal values). In the figures, bands reaching beyond every run's values are cut "
        "at the edge of the axes.",
        "",
        "## Grid",
        "",
        *grid_lines(source, status),
        "",
        "## Failed runs",
        "",
        *failure_lines(status),
        "",
        "## Summary metrics",
        "",
        *summary_lines(long, points),
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
    for spec in drawn:
        lines += [f"### {spec.title}", "", f"![{spec.caption}]({spec.file})", "", spec.sentence, ""]
    report = out / REPORT_FILE
    atomic_write_text(report, "\n".join(lines))
    return report
