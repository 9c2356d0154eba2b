"""The report's figure of the privacy spent: the largest ε any record spent, per grid point
(:data:`PRIVACY_FIGURE`), with the interval of the mean over repetitions or, below
:data:`~netsim.analysis.report.styles.BAND_FROM_REPETITIONS` of them, every run's value."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from netsim.analysis.figures import save_figure
from netsim.analysis.report.styles import BAND_FROM_REPETITIONS, LineStyle, repetitions_text
from netsim.contracts import Curve, FigureSpec
from netsim.lazy import lazy_module
from netsim.plotting import pyplot

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

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


def draw_privacy_figure(
    statistics: pd.DataFrame,
    runs: pd.DataFrame,
    labels: dict[int, str],
    styles: dict[int, LineStyle],
    repetitions: dict[int, int],
    out: Path,
) -> Path:
    """Draw :data:`PRIVACY_FIGURE` from ``statistics`` (:func:`~netsim.analysis.collect.
    summarize` of ``runs``, the runs' ``privacy.epsilon_spent_max``) into ``out``."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.0, 4.6), layout="constrained")
    statistics = statistics.sort_values("point")
    positions = np.arange(len(statistics))
    counts = [repetitions.get(int(p), 0) for p in statistics["point"]]
    draw_runs = 1 < max(counts) < BAND_FROM_REPETITIONS
    for position, row in zip(positions, statistics.itertuples(index=False), strict=True):
        below, above = row.mean - row.ci_low, row.ci_high - row.mean
        style = styles[int(row.point)]
        ax.errorbar(
            [position],
            [row.mean],
            yerr=None if draw_runs else [[below], [above]],
            fmt=style.marker,
            capsize=5,
            color=style.colour,
            ms=6,
        )
        if draw_runs:
            values = runs.loc[runs["point"] == row.point, "value"].to_numpy(dtype=float)
            ax.plot(np.full(values.size, position + 0.12), values, "x", color=style.colour,
                    ms=5, alpha=0.7)  # fmt: skip
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
    text = repetitions_text(counts).replace("band", "error bars")
    text = text.replace("thin lines: the runs", "crosses: the runs")
    ax.set_title(f"{PRIVACY_FIGURE.title}\n{text}", fontsize=10)
    return save_figure(fig, out, tight=True)


def spent_epsilon(privacy: pd.DataFrame) -> bool:
    """True iff some run's records spent some ε (mutual-information releases and non-private
    runs spend none: a figure of zeros says nothing)."""
    spent = privacy["value"].dropna()
    return bool((spent != 0).any())
