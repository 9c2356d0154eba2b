"""The Markdown of ``report.md``: the head (the run, or where the runs are with the grid and
the failed runs), the summary table (the final test accuracy and its yardsticks first, then one
row per ``table.metric`` of the one-row tables, a column per grid point) and the bound-audit
section."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from netsim.analysis.collect import (
    SweepSource,
    format_value,
    half_width,
    summarize,
)
from netsim.analysis.learning import (
    GOSSIP_ACCURACY_TABLE,
    WALK_ACCURACY_TABLE,
    YARDSTICKS,
    final_accuracy,
)
from netsim.analysis.report.privacy import PRIVACY_FIGURE
from netsim.analysis.report.styles import BAND_FROM_REPETITIONS, CONFIDENCE, point_labels
from netsim.analysis.runs import load_manifest
from netsim.contracts import FigureSpec
from netsim.lazy import lazy_module
from netsim.storage import read_table

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")


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


def single_run_head(source: SweepSource) -> list[str]:
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


def sweep_head(source: SweepSource, status: pd.DataFrame) -> list[str]:
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


def figure_lines(drawn: Mapping[FigureSpec, str], privacy_rows: bool = False) -> list[str]:
    """The page's figures: per figure drawn its title, image and sentence, with how its runs
    were binned (``drawn``: spec -> binning note, "" for none); a line when none was drawn,
    and one when runs with a privacy table (``privacy_rows``) spent no ε to draw."""
    lines = []
    if not drawn:
        lines += ["No figures: the complete runs have none of the tables they are drawn from.", ""]
    if privacy_rows and PRIVACY_FIGURE not in drawn:
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
    return lines


DISTANCE_HEADER = ("line", "ε is", "hops", "pairs", "worst pair", "90th percentile", "median",
                   "local ε")  # fmt: skip


def distance_lines(
    statistics: pd.DataFrame, local: pd.DataFrame, labels: Mapping[int, str]
) -> list[str]:
    """The worst pair per distance beside the quantiles and the local ε, a row per point,
    kind of figure (exact or an upper bound) and hop count (``statistics``:
    :func:`~netsim.analysis.report.distance.distance_statistics`; ``local``: the runs' local
    ε); nothing without pairs."""
    if statistics.empty:
        return []
    own = local.groupby("point")["local_epsilon"].max()
    rows = [
        [labels.get(int(row.point), str(row.point)), "exact" if row.kind == "exact" else
         "an upper bound", str(int(row.distance)), f"{int(row.pairs):,}", _number(row.worst),
         _number(row.high), _number(row.median), _number(float(own.get(row.point, math.nan)))]
        for row in statistics.itertuples(index=False)
    ]  # fmt: skip
    return [
        "Privacy per observer by distance: the worst (observer, record) pair of single "
        "observers at each hop count, the pairs of a point's repetitions pooled; a claim "
        "against single observers is the worst pair's.",
        "",
        *_table(DISTANCE_HEADER, rows),
        "",
    ]
