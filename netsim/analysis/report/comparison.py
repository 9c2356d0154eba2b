"""The report's comparison of learning runs: one figure of every learning run's test accuracy
(:data:`~netsim.analysis.learning.COMPARISON_FIGURE`) that a paper can use as it is.

- **Its privacy setting and data in a caption line**: ε, δ, the noise mechanism and its
  guarantee, the accounting (and the composition the ledger used), the privacy unit, the data
  set and N (records, and nodes), from each run's resolved scenario, ``learning_summary`` and
  manifest; one line when every line of the figure shares them, else one per setting
  (:mod:`~netsim.analysis.report.setting`).
- **Seeds as a band** (:data:`~netsim.analysis.report.drawing.BAND_RANGE`): the mean over the
  runs (seeds) of a point, and a band from the lowest to the highest seed at each x; the title
  says how many seeds, or that one seed draws no band.
- **Three x axes**: simulated time, passes over the data (the gradient updates made so far in
  the whole network, every model's, over the training-set size: the unit DP-SGD's per-record
  budgets are spent in) and messages sent (every message the transport counted). The runs are
  binned and averaged in time as on the time axis; each time is then put at the point's mean
  over its seeds of the passes or messages at that time (:mod:`~netsim.analysis.report.axes`).
- **The central-DP yardstick at each run's own guarantee**: a run whose every release was
  ε-DP (K-norm noise) is read against central training at (ε, 0), not at the δ its scenario
  states; points of different guarantees get a line each
  (:func:`~netsim.analysis.report.setting.central_dp_lines`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from netsim.analysis.collect import SweepSource
from netsim.analysis.learning import (
    CENTRAL_DP_COLUMN,
    COMPARISON_FIGURE,
    GOSSIP_ACCURACY_TABLE,
    WALK_ACCURACY_TABLE,
    YARDSTICKS,
    learning_accuracy_samples,
)
from netsim.analysis.report.axes import (
    LOG_X_OVER_DECADES,
    PASSES,
    TIME,
    X_LABELS,
    axis_maps,
    mapped_statistics,
)
from netsim.analysis.report.curves import BaselineLine, curve_statistics
from netsim.analysis.report.drawing import BAND_RANGE, FigureOptions, draw_curve_figure, log_x
from netsim.analysis.report.setting import Setting, central_dp_lines, point_settings, setting_lines
from netsim.analysis.report.styles import LineStyle
from netsim.contracts import FigureSpec
from netsim.lazy import lazy_module
from netsim.plotting import HOURS, TimeUnit

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")


def figure_file(axis: str) -> str:
    """The comparison figure's file on ``axis``: the time axis keeps the file's own name."""
    if axis == TIME:
        return COMPARISON_FIGURE.file
    stem = COMPARISON_FIGURE.file.removesuffix(".png")
    return f"{stem}_{axis}.png"


def comparison_spec(axis: str) -> FigureSpec:
    """:data:`~netsim.analysis.learning.COMPARISON_FIGURE` on ``axis``: its file, its title
    and its sentence say which axis; the central-DP yardstick is left to
    :func:`central_dp_lines` (one line per guarantee), the other yardsticks stay."""
    curve = replace(
        COMPARISON_FIGURE.panels[0],
        baselines=tuple(b for b in YARDSTICKS if b.column != CENTRAL_DP_COLUMN),
    )
    if axis == TIME:
        return replace(COMPARISON_FIGURE, panels=(curve,))
    against = "passes over the data" if axis == PASSES else "messages sent"
    return replace(
        COMPARISON_FIGURE,
        file=figure_file(axis),
        caption=f"test accuracy of every learning run against {against}",
        title=f"{COMPARISON_FIGURE.title} against {against}",
        sentence=COMPARISON_FIGURE.sentence.replace("against simulated time", f"against {against}")
        + f" x: {X_LABELS[axis]}, at each time bin the mean over the point's seeds.",
        panels=(curve,),
    )


def has_learning(long: pd.DataFrame) -> bool:
    """True iff some run of ``long`` evaluated a model (a walk's or gossip learning's)."""
    return bool(long["table"].isin([WALK_ACCURACY_TABLE, GOSSIP_ACCURACY_TABLE]).any())


def mixed_learning(long: pd.DataFrame) -> bool:
    """True iff some runs of ``long`` learned by gossip (``gossip_learning_accuracy``) and
    others by a walk (``accuracy`` only): their accuracies are in different tables, which
    :data:`~netsim.analysis.learning.COMPARISON_FIGURE` draws in one panel."""
    gossip = set(long.loc[long["table"] == GOSSIP_ACCURACY_TABLE, "run"])
    walk = set(long.loc[long["table"] == WALK_ACCURACY_TABLE, "run"])
    return bool(gossip) and bool(walk - gossip)


# --- the figure ---------------------------------------------------------------------------------


def seeds_text(counts: Sequence[int]) -> str:
    """What the comparison's lines and band are over, for its title."""
    low, high = min(counts, default=0), max(counts, default=0)
    if high <= 1:
        return "one seed per line: no band (run more seeds to see their spread)"
    span = f"{high}" if low == high else f"{low}–{high}"
    return f"mean over {span} seeds per line; band: lowest to highest seed"


@dataclass(frozen=True)
class Comparison:
    """What the comparison figures of one report share: the runs' source, the learning runs'
    samples (and which runs, of which points), their settings and caption lines, the
    per-guarantee central-DP yardsticks and the lines' labels, styles and repetitions."""

    source: SweepSource
    samples: pd.DataFrame
    runs: pd.DataFrame
    settings: Mapping[int, Setting]
    captions: tuple[str, ...]
    central: tuple[BaselineLine, ...]
    labels: Mapping[int, str]
    styles: Mapping[int, LineStyle]
    repetitions: Mapping[int, int]


def prepare_comparison(
    long: pd.DataFrame,
    source: SweepSource,
    labels: Mapping[int, str],
    styles: Mapping[int, LineStyle],
    repetitions: Mapping[int, int],
) -> Comparison:
    """Read what every comparison figure of ``long``'s learning runs needs, once."""
    samples = pd.concat([long, learning_accuracy_samples(long)], ignore_index=True)
    learned = samples.loc[samples["table"] == COMPARISON_FIGURE.panels[0].table, "run"].unique()
    runs = source.plan[source.plan["run"].isin(learned)][["run", "run_id", "point"]]
    settings = point_settings(source, runs)
    return Comparison(
        source,
        samples,
        runs,
        settings,
        tuple(setting_lines(settings, labels)),
        tuple(central_dp_lines(source, runs, settings)),
        labels,
        styles,
        repetitions,
    )


def draw_comparison(
    comparison: Comparison, axis: str, out: Path, unit: TimeUnit = HOURS
) -> tuple[FigureSpec, str] | None:
    """Draw the comparison figure on ``axis`` into the directory ``out``: returns its spec
    and how its runs were binned, or None when nothing can be drawn on that axis (no learning
    run has the record it needs)."""
    spec = comparison_spec(axis)
    statistics = curve_statistics(comparison.samples, spec.panels[0])
    if statistics.empty:
        return None
    statistics = replace(statistics, baselines=statistics.baselines + comparison.central)
    options = FigureOptions(
        band=BAND_RANGE,
        notes=comparison.captions,
        repetitions=seeds_text(
            [comparison.repetitions.get(int(p), 0) for p in comparison.runs["point"].unique()]
        ),
    )
    if axis != TIME:
        maps = axis_maps(
            axis, comparison.source, comparison.runs, comparison.samples, comparison.settings
        )
        statistics = mapped_statistics(statistics, maps, comparison.runs)
        if statistics.empty:
            return None
        options = replace(
            options,
            xlabel=X_LABELS[axis],
            x_scale=1.0,
            log_x=log_x([statistics], LOG_X_OVER_DECADES),
        )
    binned = draw_curve_figure(
        spec, [statistics], dict(comparison.labels), dict(comparison.styles),
        dict(comparison.repetitions), out / spec.file, unit, options,
    )  # fmt: skip
    stated = " ".join(f"{line}." for line in comparison.captions)
    sentence = f"{spec.sentence} Lines: {options.repetitions}."
    if stated:
        sentence += f" Privacy setting and data: {stated}"
    sentence += yardstick_note(comparison.central, comparison.settings)
    return replace(spec, sentence=sentence), binned


def yardstick_note(central: Sequence[BaselineLine], settings: Mapping[int, Setting]) -> str:
    """The page's word on the central-DP yardsticks drawn: their values at each guarantee
    and, when some run's guarantee holds at another δ than the one it states, that the summary
    table's ``learning_summary.central_dp_accuracy`` is at the stated δ."""
    if not central:
        return ""
    values = "; ".join(line.text() for line in central)
    note = f" Central DP at each run's guarantee: {values}."
    if any(s.stated_delta != s.delta for s in settings.values()):
        note += (
            " The summary table's learning_summary.central_dp_accuracy is at the δ the "
            "scenario states, not at the runs' guarantee."
        )
    return note
