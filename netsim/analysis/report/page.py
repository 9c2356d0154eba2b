"""``netsim report``'s entry point: :func:`write_report` collects the runs, draws the figures
(:mod:`netsim.analysis.report.figures`) and writes ``report.md``
(:mod:`netsim.analysis.report.markdown`) beside them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from netsim.analysis.collect import (
    bound_audit_shares,
    check_runs,
    load_sweep,
    long_table,
    refuse_damaged,
    run_status,
)
from netsim.analysis.report.axes import TIME, X_AXES, x_axes
from netsim.analysis.report.comparison import figure_file
from netsim.analysis.report.distance import PAIRWISE_FIGURE, distance_pairs, distance_statistics
from netsim.analysis.report.figures import (
    TABLE_FIGURE_PREFIX,
    builtin_figures,
    component_figures,
    draw_figures,
    simulated_span,
)
from netsim.analysis.report.markdown import (
    bound_audit_lines,
    distance_lines,
    figure_lines,
    final_accuracies,
    single_run_head,
    summary_lines,
    sweep_head,
)
from netsim.analysis.report.privacy import PRIVACY_FIGURE
from netsim.analysis.report.styles import point_labels
from netsim.contracts import FigureSpec
from netsim.errors import RunDirectoryError
from netsim.plotting import time_unit
from netsim.storage import atomic_write_text

REPORT_FILE = "report.md"


REPORT_DIR = "report"


def remove_stale_figures(
    out: Path, figures: Sequence[FigureSpec], drawn: Mapping[FigureSpec, str]
) -> None:
    """Remove from ``out`` the figures of an earlier report that this one did not draw (the
    standard ones, ``figures``, the comparison's on every axis and the table figures), so that
    the directory matches the page."""
    known = {spec.file for spec in (*figures, PRIVACY_FIGURE, PAIRWISE_FIGURE)}
    known |= {figure_file(axis) for axis in X_AXES}
    drawn_files = {spec.file for spec in drawn}
    for file in known - drawn_files:
        (out / file).unlink(missing_ok=True)
    for stale in out.glob(f"{TABLE_FIGURE_PREFIX}*.png"):
        if stale.name not in drawn_files:
            stale.unlink()


def write_report(
    path: Path | Sequence[Path],
    out: Path | None = None,
    *,
    allow_unverified: bool = False,
    x_axis: str | Sequence[str] = TIME,
) -> Path:
    """Draw the standard figures of the sweep or runs at ``path`` (what
    :func:`~netsim.analysis.collect.load_sweep` reads: a sweep directory, a run directory, a
    folder of runs, a list of run directories) into ``out`` (default ``<path>/report/``; a
    list of runs needs ``out``) and write ``report.md`` there linking them; returns its path.

    Only the figures whose tables the complete runs have are drawn; figures of an earlier
    report that no longer apply are removed so that the directory matches the page. A damaged
    run refuses the report, and so does an unverified one unless ``allow_unverified``
    (:func:`~netsim.analysis.collect.refuse_damaged`).

    ``x_axis``: the x axes of the comparison of learning runs (``"time"``, ``"passes"``,
    ``"messages"``, or several, comma-separated or as a sequence: one figure each,
    :mod:`netsim.analysis.report.comparison`); an unknown one raises
    :class:`~netsim.errors.ReportError` before anything is read.
    """
    axes = x_axes(x_axis)
    source = load_sweep(path)
    checks = check_runs(source)
    status = run_status(source, checks)  # one snapshot: the grid table and the figures agree
    # a damaged run is not drawn as if it were complete, nor one whose bytes cannot be checked
    refuse_damaged(source, status, checks, allow_unverified=allow_unverified)
    long = long_table(source, status)
    if out is None and source.path is None:
        raise RunDirectoryError("write_report: a list of run directories needs out=")
    out = Path(out) if out is not None else Path(str(source.path)) / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    repetitions = {
        int(p): int(n)
        for p, n in status[status["status"] == "complete"].groupby("point").size().items()
    }
    figures = component_figures(source, status)
    unit = time_unit(simulated_span(source, status, long))
    distances = distance_pairs(source, status)
    drawn = draw_figures(long, source, repetitions, out, figures, unit, distances, axes)
    remove_stale_figures(out, (*figures, *builtin_figures()), drawn)
    points = sorted(int(p) for p in source.plan["point"].unique())
    labels = point_labels(source)
    lines = single_run_head(source) if source.single_run else sweep_head(source, status)
    lines += [
        "## Summary metrics",
        "",
        *summary_lines(
            long,
            points,
            single=source.single_run,
            final=final_accuracies(source, status),
            labels=labels,
        ),
        "",
        "## Figures",
        "",
        *figure_lines(drawn, privacy_rows=bool((long["table"] == "privacy").any())),
        *distance_lines(distance_statistics(distances[0]), distances[1], labels),
        *bound_audit_lines(bound_audit_shares(source, status), labels),
    ]
    report = out / REPORT_FILE
    atomic_write_text(report, "\n".join(lines))
    return report
