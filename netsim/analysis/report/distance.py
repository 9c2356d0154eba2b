"""The report's figure of privacy per observer against the hops between observer and record
(:data:`PAIRWISE_FIGURE`), for runs that state it (``privacy.model network``, Muffliato,
decentralised SGD's linear view).

A DP claim against single observers is a claim about the worst pair, not the mean at a
distance: under churn a pair four or five hops apart can reach the local ε. The figure reads
every single observer's pair of ``privacy_pairs`` (coalitions, link eavesdroppers and
unreachable pairs left out), pools the pairs of a point's repetitions (seeds) and draws, per
point and distance, the **worst pair** (triangles), the **median** (circles) and a band from
the **10th to the 90th percentile** of the pairs (:func:`distance_statistics`), with each
point's local ε (every release public) dotted.

**Exact figures and upper bounds are drawn apart** (:func:`pair_kinds`): a pair whose ε is the
exact loss of the run's view (``privacy_summary.claim`` ``exact: …``, Gaussian gossip
averaging's linear view) is drawn solid with filled markers; a pair whose ε is an upper bound
(an RDP bound, e.g. a walk whose path the observer knows, or the pairs ``linear_pairs`` marks
not ``exact``) dashed with hollow markers and a hatched band.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from netsim.analysis.collect import SweepSource
from netsim.analysis.figures import save_figure
from netsim.analysis.report.drawing import log_y
from netsim.analysis.report.styles import LineStyle
from netsim.analysis.runs import load_manifest
from netsim.contracts import Curve, FigureSpec
from netsim.errors import RunDirectoryError
from netsim.lazy import lazy_module
from netsim.plotting import pyplot
from netsim.storage import read_table

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

#: Privacy per observer against the hops between observer and record. Drawn by
#: :func:`draw_distance_figure`; the panel names the table and its metric.
PAIRWISE_FIGURE = FigureSpec(
    file="privacy_by_distance.png",
    caption="privacy per observer against the hops between observer and record",
    sentence=(
        "Per grid point and shortest-path distance on the topology between observer and "
        "record: the worst (observer, record) pair (triangles), the median pair (circles) and "
        "the 10th to 90th percentile of the pairs (band) of single observers (privacy_pairs; "
        "the run's own view: path known for a walk, exact for Gaussian gossip averaging), the "
        "pairs of a point's repetitions pooled. Solid lines, filled markers: exact ε; dashed "
        "lines, hollow markers, hatched band: upper bounds (an RDP bound). Dotted: each "
        "point's local ε (every release public)."
    ),
    title="Privacy per observer against distance",
    panels=(Curve("privacy_pairs", "epsilon", "point", "ε of an (observer, record) pair"),),
)

EXACT, BOUND = "exact", "bound"
#: The quantiles drawn besides the worst pair: the band's edges and the middle line.
BAND_QUANTILES = (0.1, 0.9)
MIDDLE_QUANTILE = 0.5
#: How the two kinds of pair are drawn: line style, whether markers are filled, band hatch.
KIND_STYLES: dict[str, tuple[str, bool, str | None]] = {
    EXACT: ("-", True, None),
    BOUND: ("--", False, "///"),
}


def pair_kinds(claim: str, exact: np.ndarray | None, pairs: int) -> np.ndarray:
    """Per pair of a run's ``privacy_pairs`` (``pairs`` rows), :data:`EXACT` or :data:`BOUND`:
    every pair exact when ``privacy_summary.claim`` says ``exact:``; per pair by ``exact``
    (``linear_pairs.exact``, row for row) when it says some are bounds and ``exact`` lines up;
    else every pair a bound (an RDP bound; a pair that cannot be told is not drawn as exact)."""
    if claim.startswith("exact:"):
        return np.full(pairs, EXACT)
    if claim.startswith("exact") and exact is not None and exact.size == pairs:
        return np.where(exact.astype(bool), EXACT, BOUND)
    return np.full(pairs, BOUND)


def _read(directory: Path, table: str, columns: list[str] | None = None) -> pd.DataFrame:
    try:
        return read_table(directory / f"{table}.parquet").to_pandas()[columns or slice(None)]
    except (OSError, pa.ArrowException, KeyError) as exc:
        raise RunDirectoryError(f"{directory}: cannot read {table} ({exc})") from None


def run_pairs(directory: Path) -> tuple[pd.DataFrame, float] | None:
    """The single observers' reachable pairs of the run at ``directory`` (``distance``,
    ``epsilon``, ``kind``) and its local ε; None for a run without ``privacy_pairs``."""
    tables = load_manifest(directory).get("tables", {})
    if "privacy_pairs" not in tables or "privacy_summary" not in tables:
        return None
    pairs = _read(directory, "privacy_pairs")
    summary = _read(directory, "privacy_summary")
    if summary.empty:
        return None
    exact = None
    if "linear_pairs" in tables:
        exact = _read(directory, "linear_pairs", ["exact"])["exact"].to_numpy()
    kinds = pair_kinds(str(summary["claim"].iloc[0]), exact, len(pairs))
    keep = ((pairs["observer"] >= 0) & (pairs["distance"] >= 0)).to_numpy()
    found = pairs.loc[keep, ["distance", "epsilon"]].assign(kind=kinds[keep])
    return found.reset_index(drop=True), float(summary["local_epsilon"].iloc[0])


def distance_pairs(source: SweepSource, status: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every single observer's reachable pair of the complete runs that state privacy per
    observer (``run, point, distance, kind, epsilon``), and their local ε (``run, point,
    local_epsilon``)."""
    complete = status.loc[status["status"] == "complete", ["run", "run_id", "point"]]
    pieces, local = [], []
    for run, run_id, point in complete.itertuples(index=False):
        found = run_pairs(source.run_directory(str(run_id)))
        if found is None:
            continue
        pairs, epsilon = found
        pieces.append(pairs.assign(run=int(run), point=int(point)))
        local.append((int(run), int(point), epsilon))
    columns = ["run", "point", "distance", "kind", "epsilon"]
    frame = (
        pd.concat(pieces, ignore_index=True)[columns] if pieces else pd.DataFrame(columns=columns)
    )
    return frame, pd.DataFrame(local, columns=["run", "point", "local_epsilon"])


def distance_statistics(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per point, kind and distance of ``pairs`` (:func:`distance_pairs`, the pairs of a
    point's runs pooled): the pairs and runs counted, the worst pair (``worst``), the
    quantiles of :data:`BAND_QUANTILES` (``low``, ``high``) and :data:`MIDDLE_QUANTILE`
    (``median``), and the mean."""
    columns = ["point", "kind", "distance", "pairs", "runs", "worst", "high", "median", "low",
               "mean"]  # fmt: skip
    pairs = pairs.dropna(subset=["epsilon"])
    if pairs.empty:
        return pd.DataFrame(columns=columns)
    grouped = pairs.groupby(["point", "kind", "distance"], sort=True)
    epsilon = grouped["epsilon"]
    frame = pd.DataFrame({
        "pairs": epsilon.size(),
        "runs": grouped["run"].nunique(),
        "worst": epsilon.max(),
        "high": epsilon.quantile(BAND_QUANTILES[1]),
        "median": epsilon.quantile(MIDDLE_QUANTILE),
        "low": epsilon.quantile(BAND_QUANTILES[0]),
        "mean": epsilon.mean(),
    }).reset_index()  # fmt: skip
    return frame[columns]


def _legend_handles(kinds: set[str]) -> list:
    """The legend entries of the figure's marks and styles (beside the points' colours)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Line2D([], [], color="0.3", marker="^", linestyle="none", label="worst pair"),
        Line2D([], [], color="0.3", marker="o", linestyle="none", ms=4, label="median pair"),
        Patch(facecolor="0.6", alpha=0.35, label="10th–90th percentile of the pairs"),
        Line2D([], [], color="0.3", linestyle=":", label="local ε (every release public)"),
    ]
    if EXACT in kinds:
        handles.append(Line2D([], [], color="0.3", linestyle="-", marker="^", label="exact ε"))
    if BOUND in kinds:
        handles.append(
            Line2D([], [], color="0.3", linestyle="--", marker="^", mfc="none",
                   label="upper bound on ε (RDP)")
        )  # fmt: skip
    return handles


def _draw_kind(ax, line: pd.DataFrame, kind: str, colour: object, label: str) -> None:
    """One point's pairs of one kind: worst pair, median and the quantile band."""
    linestyle, filled, hatch = KIND_STYLES[kind]
    face = colour if filled else "none"
    x = line["distance"].to_numpy(dtype=float)
    ax.plot(x, line["worst"], color=colour, linestyle=linestyle, marker="^", mfc=face, lw=1.6,
            ms=7, label=label)  # fmt: skip
    ax.plot(x, line["median"], color=colour, linestyle=linestyle, marker="o", mfc=face, lw=0.9,
            ms=4, label="_nolegend_")  # fmt: skip
    ax.fill_between(x, line["low"], line["high"], facecolor=colour if filled else "none",
                    edgecolor=colour, alpha=0.2 if filled else 0.5, hatch=hatch, lw=0)  # fmt: skip


def draw_distance_figure(
    statistics: pd.DataFrame,
    local: pd.DataFrame,
    labels: dict[int, str],
    styles: dict[int, LineStyle],
    out: Path,
) -> Path:
    """Draw :data:`PAIRWISE_FIGURE` from :func:`distance_statistics` and the runs' local ε
    (``point, local_epsilon``) into ``out``."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.0, 5.0), layout="constrained")
    for (point, kind), line in statistics.groupby(["point", "kind"], sort=True):
        colour = styles[int(point)].colour
        name = labels[int(point)] + (" (upper bound)" if kind == BOUND else "")
        _draw_kind(ax, line.sort_values("distance"), str(kind), colour, name)
    for point, value in local.groupby("point")["local_epsilon"].max().items():
        ax.axhline(float(value), linestyle=":", color=styles[int(point)].colour, alpha=0.8)
    values = pd.concat(
        [statistics[["worst", "low"]].stack(), local["local_epsilon"]], ignore_index=True
    )
    if log_y(pd.DataFrame({"mean": values.to_numpy(dtype=float)})):
        ax.set_yscale("log")
    ax.set_xlabel("shortest-path distance between observer and record (hops)")
    ax.set_ylabel(PAIRWISE_FIGURE.panels[0].ylabel)
    ax.set_xticks(np.sort(statistics["distance"].unique()))
    ax.grid(alpha=0.3)
    handles, names = ax.get_legend_handles_labels()
    marks = _legend_handles(set(statistics["kind"]))
    ax.legend(handles + marks, names + [h.get_label() for h in marks], fontsize=7,
              loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # fmt: skip
    runs = statistics.groupby("point")["runs"].max()
    seeds = (
        "one run per point" if runs.max() <= 1
        else f"the pairs of {runs.min()}–{runs.max()} runs per point pooled"
        if runs.min() != runs.max() else f"the pairs of {runs.max()} runs per point pooled"
    )  # fmt: skip
    ax.set_title(
        f"{PAIRWISE_FIGURE.title}\nsingle observers; worst pair, median and 10th–90th "
        f"percentile per distance; {seeds}",
        fontsize=10,
    )
    return save_figure(fig, out, tight=True)
