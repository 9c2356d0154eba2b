"""The random-walk grid of Hegedűs et al. (2016) §5.2–5.3: a table with 95% intervals and the
paper's Figs. 2–3, from a sweep of the walk service (this script runs no simulation).

    netsim sweep scenarios/walk/paper-sweep.yaml --workers 2 --out analysis/sweeps
    python analysis/walk_grid.py analysis/sweeps/walk-paper-grid --figures

For every complete run: the time-averaged number of concurrent walks, the fractions of time
with none and with more than one, restarts per hour, and progress, the largest step count
reached over the maximum t/δ_rw. Runs are grouped by the sweep's parameters; each group gets
its mean and the two-sided Student t 95% interval over its seeds. A run whose walk died out and
was never restarted (:func:`never_recovered`) is listed apart and left out of its group's mean:
it measures how the run started, not the protocol in steady state. The per-run table goes to
``analysis/results/<sweep>.parquet`` (with a ``never_recovered`` column) and the summary is
printed as Markdown. ``--runs`` rebuilds the summary from such a per-run table when the sweep's
run directories are not at hand:

    python analysis/walk_grid.py --runs analysis/results/walk-paper-grid.parquet

With ``--figures`` (from a sweep directory), per value of ``walk.preset`` the first repetition
of every point is drawn as Fig. 2 (no kills) and Fig. 3 (kill probability > 0) into
``analysis/figures/``. With ``--readme`` the tables of ``analysis/README.md`` that rest on this
sweep (its ``<!-- generated: ... -->`` blocks: :func:`readme_tables`) are rewritten from the
per-run table; ``tests/test_analysis_tables.py`` holds the README to the committed tables.
The README states §5.3's figures on the STUNner trace, so ``--readme`` refuses a sweep with a
run that replayed the synthetic fallback trace instead (``../shared/data`` absent; the per-run
table's ``fallback_trace`` column, absent from tables written before it existed).
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from experiments import (
    parse_per_run_table_arguments,
    per_run_table_parser,
    read_per_run_table,
    replayed_fallback_trace,
    write_readme_tables,
)
from scipy import stats

from netsim.analysis.collect import load_sweep, run_status
from netsim.analysis.figures import walk_figure
from netsim.analysis.runs import load_run_scenario
from netsim.errors import NetsimError
from netsim.scenario.loader import load_scenario
from netsim.storage import atomic_write_bytes
from netsim.units import HOUR

REPO = Path(__file__).resolve().parents[1]
METRICS = ("mean_walks", "time_none", "time_several", "restarts_per_hour", "progress")
PRESET = "walk.preset"
RESULTS = REPO / "analysis" / "results"
#: The sweeps whose tables analysis/README.md shows (:func:`readme_tables`).
README_SWEEPS = ("walk-paper-grid", "walk-age-error", "walk-authors-age-error")
#: The age-error sweeps, whose Δ the README's error widths are given in.
AGE_ERROR_SWEEPS = {
    "walk-age-error": REPO / "scenarios" / "walk" / "age-error-sweep.yaml",
    "walk-authors-age-error": REPO / "scenarios" / "walk" / "authors-age-error-sweep.yaml",
}


def run_metrics(run_dir: Path) -> dict[str, float | bool]:
    """What §5.3 reports about one run (see the module docstring), and whether it replayed the
    synthetic fallback trace."""
    scenario = load_run_scenario(run_dir)
    walk = scenario.walk
    summary = pq.read_table(run_dir / "walk_summary.parquet").to_pandas().iloc[0]
    span = scenario.duration - walk.start
    return {
        "delta_rw": walk.transfer_time / scenario.gossip.period,  # in units of Δ
        "delta_extra": (walk.timeout - walk.transfer_time) / scenario.gossip.period,
        "mean_walks": float(summary["mean_propagating"]),
        "time_none": float(summary["time_without_walk"]),
        "time_several": float(summary["time_with_several"]),
        "restarts_per_hour": float(summary["restarts"]) / (scenario.duration / HOUR),
        "progress": float(summary["max_steps"]) * walk.transfer_time / span,
        "fallback_trace": replayed_fallback_trace(run_dir),
    }


def from_per_run_table(path: Path) -> tuple[pd.DataFrame, list[str], Path]:
    """A per-run table written by :func:`main`, with its ``never_recovered`` column computed
    afresh (tables written before the column existed have none), and the sweep parameters it
    holds."""
    runs = read_per_run_table(path, ("run_id", "seed", "delta_rw", "delta_extra", *METRICS))
    runs["never_recovered"] = never_recovered(runs)
    parameters = [c for c in runs.columns if c.startswith("walk.")]
    return runs, parameters, path


def per_run_table(sweep: Path) -> tuple[pd.DataFrame, list[str]]:
    """One row per complete run: its plan row (parameters, seed) and :func:`run_metrics`."""
    source = load_sweep(sweep)
    status = run_status(source)
    complete = status[status["status"] == "complete"]
    plan = source.plan.set_index("run_id")
    rows = []
    for run_id in complete["run_id"]:
        # value by value: a row as one Series would turn an all-numeric plan's seeds into
        # floats, and 64-bit seeds do not survive that
        row = {column: plan.at[run_id, column] for column in plan.columns}
        row["run_id"] = run_id
        row.update(run_metrics(source.run_directory(run_id)))
        rows.append(row)
    return pd.DataFrame(rows), list(source.parameters)


def never_recovered(runs: pd.DataFrame) -> pd.Series:
    """Runs whose walk died out and was never restarted: some time without a walk and not one
    restart. Only a timeout restarts a walk, and a node times out only on an update it holds, so
    such a run had no update that could time out — under the authors' rules the starter makes
    no step-0 update, and a first walk killed at its first step leaves none — and had no walk
    from then to the end."""
    return (runs["restarts_per_hour"] == 0) & (runs["time_none"] > 0)


def fallback_runs(runs: pd.DataFrame) -> int:
    """How many runs replayed the synthetic fallback trace instead of STUNner's (0 for a
    per-run table written before the ``fallback_trace`` column existed, which cannot tell)."""
    return int(runs["fallback_trace"].sum()) if "fallback_trace" in runs else 0


def refuse_fallback_for_readme(runs: pd.DataFrame, name: str) -> None:
    """The README's tables state what §5.3 measures on the STUNner trace: a :class:`NetsimError`
    if any run replayed the synthetic fallback trace (``../shared/data`` absent)."""
    fallback = fallback_runs(runs)
    if fallback:
        raise NetsimError(
            f"{name}: {fallback} of {len(runs)} runs replayed the synthetic fallback trace, "
            "not STUNner's peersim_session_100.txt; analysis/README.md's tables are of the "
            "STUNner trace, so they are left as they are (run the sweep with ../shared/data)"
        )


def interval(values: pd.Series) -> tuple[float, float]:
    """Mean and the half width of its two-sided Student t 95% interval (0 for one value)."""
    n = values.size
    mean = float(values.mean())
    if n < 2:
        return mean, 0.0
    return mean, float(stats.t.ppf(0.975, n - 1) * values.std(ddof=1) / np.sqrt(n))


def summary_table(runs: pd.DataFrame, parameters: list[str]) -> pd.DataFrame:
    """Per group of equal parameters: the number of seeds and each metric's mean ± half width."""
    keys = [p for p in parameters if p not in ("walk.transfer_time", "walk.timeout")]
    keys = ["delta_rw", "delta_extra", *keys]
    rows = []
    for values, group in runs.groupby(keys, sort=True):
        row = dict(zip(keys, values, strict=True))
        row["seeds"] = len(group)
        for metric in METRICS:
            row[metric], row[f"{metric}_pm"] = interval(group[metric])
        rows.append(row)
    return pd.DataFrame(rows)


def apart(runs: pd.DataFrame) -> str:
    """The runs left out of the means (:func:`never_recovered`), one Markdown line each."""
    lines = []
    for _, row in runs[runs["never_recovered"]].iterrows():
        preset = f"{row[PRESET]}, " if PRESET in row else ""
        lines.append(
            f"- {preset}δ_rw = {row['delta_rw']:g}Δ, δ − δ_rw = {row['delta_extra']:g}Δ, "
            f"kill probability {row['walk.kill_probability']:g}, seed {row['seed']}: no walk "
            f"{100 * row['time_none']:.3f}% of the time, no restart (run {row['run_id']})"
        )
    return "\n".join(lines)


def markdown(summary: pd.DataFrame) -> str:
    """The summary as a Markdown table (δ in units of Δ, fractions in %)."""
    keys = [c for c in summary.columns if c not in METRICS and not c.endswith("_pm")]
    names = {"delta_rw": "δ_rw/Δ", "delta_extra": "(δ−δ_rw)/Δ"}
    header = [names.get(k, k.removeprefix("walk.")) for k in keys] + [
        "mean walks",
        "time with 0 walks",
        "time with > 1",
        "restarts / h",
        "progress",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, row in summary.iterrows():
        cells = [f"{row[k]:g}" if isinstance(row[k], float) else str(row[k]) for k in keys]
        cells.append(f"{row['mean_walks']:.3f} ± {row['mean_walks_pm']:.3f}")
        cells.append(f"{100 * row['time_none']:.2f}% ± {100 * row['time_none_pm']:.2f}")
        cells.append(f"{100 * row['time_several']:.2f}% ± {100 * row['time_several_pm']:.2f}")
        cells.append(f"{row['restarts_per_hour']:.1f} ± {row['restarts_per_hour_pm']:.1f}")
        cells.append(f"{row['progress']:.3f} ± {row['progress_pm']:.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def in_deltas(multiple: float) -> str:
    """A duration given in units of Δ as the README writes it: 0, Δ/2, Δ, 10Δ."""
    if multiple == 0:
        return "0"
    if multiple == 1:
        return "Δ"
    if multiple < 1 and (1 / multiple).is_integer():
        return f"Δ/{1 / multiple:g}"
    return f"{multiple:g}Δ"


def rate_cell(mean: float, half_width: float) -> str:
    """A rate with its interval: one decimal below 100, whole numbers from there."""
    if abs(mean) >= 100:
        return f"{mean:,.0f} ± {half_width:,.0f}"
    return f"{mean:.1f} ± {half_width:.1f}"


def grid_table(summary: pd.DataFrame, killed: bool) -> str:
    """The paper grid's rows without kills (Fig. 2) or with them (Fig. 3) as the README's
    Markdown table: per configuration, the paper's variant, then the authors'."""
    rows = summary[(summary["walk.kill_probability"] > 0) == killed].copy()
    rows["variant_order"] = rows[PRESET].map({"paper": 0, "authors": 1})
    rows = rows.sort_values(["delta_rw", "delta_extra", "variant_order"])
    lines = [
        "| δ_rw | δ − δ_rw | variant | mean walks | time with 0 walks | time with > 1 "
        "| restarts/h | progress | seeds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for _, row in rows.iterrows():
        lines.append(
            f"| {in_deltas(row['delta_rw'])} | {in_deltas(row['delta_extra'])} | {row[PRESET]} "
            f"| {row['mean_walks']:.3f} ± {row['mean_walks_pm']:.3f} "
            f"| {100 * row['time_none']:.2f}% | {100 * row['time_several']:.2f}% "
            f"| {rate_cell(row['restarts_per_hour'], row['restarts_per_hour_pm'])} "
            f"| {row['progress']:.3f} ± {row['progress_pm']:.3f} | {int(row['seeds'])} |"
        )
    return "\n".join(lines)


def age_error_table(summary: pd.DataFrame, period: float) -> str:
    """The age-error sweep as the README's Markdown table: per error width (in units of the
    gossip period ``period``) and replace rule, mean walks and restarts per hour without kills
    and with them."""
    kills = sorted(summary["walk.kill_probability"].unique())
    header = ["w", "rule"]
    for kill in kills:
        label = "no kills" if kill == 0 else f"kill {kill:.0%}"
        header += [f"mean walks, {label}", f"restarts/h, {label}"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (error, _), group in summary.groupby(
        ["walk.age_error", summary["walk.replace_rule"].map({"paper": 0, "authors": 1})]
    ):
        cells = [in_deltas(round(error / period, 6)), group["walk.replace_rule"].iloc[0]]
        for kill in kills:
            row = group[group["walk.kill_probability"] == kill].iloc[0]
            cells.append(f"{row['mean_walks']:.3f} ± {row['mean_walks_pm']:.3f}")
            cells.append(rate_cell(row["restarts_per_hour"], row["restarts_per_hour_pm"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def authors_age_error_table(summary: pd.DataFrame, period: float) -> str:
    """The authors' walk with and without its age error as the README's Markdown table: per
    kill probability and error width (in units of ``period``), the §5.3 quantities."""
    lines = [
        "| kill probability | age error w | mean walks | time with 0 walks | time with > 1 "
        "| restarts/h | progress | seeds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = summary.sort_values(["walk.kill_probability", "walk.age_error"], ascending=[True, False])
    for _, row in rows.iterrows():
        width = in_deltas(round(row["walk.age_error"] / period, 6))
        lines.append(
            f"| {row['walk.kill_probability']:.0%} | {width} "
            f"| {row['mean_walks']:.3f} ± {row['mean_walks_pm']:.3f} "
            f"| {100 * row['time_none']:.2f}% | {100 * row['time_several']:.2f}% "
            f"| {rate_cell(row['restarts_per_hour'], row['restarts_per_hour_pm'])} "
            f"| {row['progress']:.3f} ± {row['progress_pm']:.3f} | {int(row['seeds'])} |"
        )
    return "\n".join(lines)


def readme_tables(name: str, runs: pd.DataFrame, parameters: list[str]) -> dict[str, str]:
    """The ``analysis/README.md`` blocks that rest on the sweep ``name`` (none for others):
    ``walk-paper-fig2`` and ``walk-paper-fig3`` (with the runs left out of the means) for the
    paper grid, ``walk-age-error`` and ``walk-authors-age-error`` for the age-error sweeps."""
    summary = summary_table(runs[~runs["never_recovered"]], parameters)
    if name == "walk-paper-grid":
        left_out = apart(runs)
        fig3 = grid_table(summary, killed=True)
        if left_out:
            fig3 += "\n\nLeft out of the means (never recovered):\n\n" + left_out
        return {"walk-paper-fig2": grid_table(summary, killed=False), "walk-paper-fig3": fig3}
    if name == "walk-age-error":
        period = load_scenario(AGE_ERROR_SWEEPS[name]).gossip.period
        return {name: age_error_table(summary, period)}
    if name == "walk-authors-age-error":
        period = load_scenario(AGE_ERROR_SWEEPS[name]).gossip.period
        return {name: authors_age_error_table(summary, period)}
    return {}


def generated_tables(results: Path = RESULTS) -> dict[str, str]:
    """Every ``analysis/README.md`` block of this script, from the committed per-run tables."""
    tables: dict[str, str] = {}
    for name in README_SWEEPS:
        runs, parameters, _ = from_per_run_table(results / f"{name}.parquet")
        tables.update(readme_tables(name, runs, parameters))
    return tables


def draw_figures(sweep: Path, runs: pd.DataFrame, figures: Path) -> list[Path]:
    """Figs. 2 (no kills) and 3 (kills), per variant: the first repetition of each point."""
    source = load_sweep(sweep)
    first = runs[runs["repetition"] == 0]
    variants = sorted(first[PRESET].unique()) if PRESET in first else ["paper"]
    name = sweep.name.removesuffix("-grid")
    written = []
    for variant in variants:
        chosen = first[first[PRESET] == variant] if PRESET in first else first
        for figure, killed in (("fig2", False), ("fig3", True)):
            panels = chosen[(chosen["walk.kill_probability"] > 0) == killed]
            panels = panels.sort_values(["delta_rw", "delta_extra"])
            if panels.empty:
                continue
            out = figures / f"{name}-{variant}-{figure}.png"
            dirs = [source.run_directory(run_id) for run_id in panels["run_id"]]
            written.append(walk_figure(dirs, out, columns=3))
    return written


def draw_sensitivity(summary: pd.DataFrame, period: float, out: Path) -> Path:
    """Restarts per hour and mean concurrent walks against the age error (in units of Δ), one
    line per replace rule, one column per kill probability, with the 95% t intervals."""
    from netsim.analysis.figures import save_figure
    from netsim.plotting import pyplot

    plt = pyplot()
    kills = sorted(summary["walk.kill_probability"].unique())
    fig, axes = plt.subplots(2, len(kills), figsize=(5.2 * len(kills), 7.0), squeeze=False,
                             sharex=True, layout="constrained")  # fmt: skip
    for column, kill in enumerate(kills):
        at_kill = summary[summary["walk.kill_probability"] == kill]
        for rule, marker in (("paper", "o"), ("authors", "s")):
            line = at_kill[at_kill["walk.replace_rule"] == rule].sort_values("walk.age_error")
            x = line["walk.age_error"].to_numpy() / period
            for row, metric in enumerate(("restarts_per_hour", "mean_walks")):
                axes[row, column].errorbar(
                    x, line[metric], yerr=line[f"{metric}_pm"], marker=marker, capsize=3,
                    label={"paper": "paper's replace rule", "authors": "authors' rule"}[rule],
                )  # fmt: skip
        axes[0, column].set_title(f"kill probability {kill:g}", fontsize=10)
        axes[0, column].set_yscale("log")
        axes[1, column].set_xlabel("age error width w (units of Δ): U[−w/2, w/2] per adoption")
    axes[0, 0].set_ylabel("restarts per hour (log scale)")
    axes[1, 0].set_ylabel("mean concurrent walks")
    axes[0, 0].legend(fontsize=8)
    for ax in axes.ravel():
        ax.grid(alpha=0.3)
    fig.suptitle("Walk service vs age error (N = 10,000, 6 h, δ_rw = Δ, δ = δ_rw + 10Δ; "
                 "mean of 3 seeds, 95% t interval)", fontsize=10)  # fmt: skip
    return save_figure(fig, out, tight=True)


def main(argv: list[str] | None = None) -> int:
    parser = per_run_table_parser(__doc__.split("\n\n")[0], "sweep directory of the walk service")
    parser.add_argument("--figures", action="store_true", help="draw Figs. 2–3 per variant")
    parser.add_argument("--figures-dir", type=Path, default=REPO / "analysis" / "figures")
    args = parse_per_run_table_arguments(parser, argv)
    try:
        if args.runs is not None:
            runs, parameters, table = from_per_run_table(args.runs)
        else:
            runs, parameters = per_run_table(args.sweep)
            if runs.empty:
                print(f"walk_grid: {args.sweep}: no complete run yet", file=sys.stderr)
                return 1
            runs["never_recovered"] = never_recovered(runs)
            buffer = io.BytesIO()
            runs.to_parquet(buffer, index=False)
            args.results.mkdir(parents=True, exist_ok=True)
            table = args.results / f"{args.sweep.name}.parquet"
            atomic_write_bytes(table, buffer.getvalue())
        summary = summary_table(runs[~runs["never_recovered"]], parameters)
        print(markdown(summary))
        print(f"\n{len(runs)} complete runs; per-run table: {table}")
        if runs["never_recovered"].any():
            print("Left out of the means: runs whose walk died out and was never restarted")
            print(apart(runs))
        fallback = fallback_runs(runs)
        if fallback:
            print(
                f"{fallback} of {len(runs)} runs replayed the synthetic fallback "
                "trace (../shared/data absent), not the STUNner trace"
            )
        if args.readme:
            name = args.sweep.name if args.sweep is not None else table.stem
            refuse_fallback_for_readme(runs, name)
            tables = readme_tables(name, runs, parameters)
            if not tables:
                raise NetsimError(f"{name}: analysis/README.md shows no table of this sweep")
            write_readme_tables(tables)
        if args.sweep is None:
            return 0  # the figures need the run directories
        sensitivity = "walk.age_error" in summary and "walk.replace_rule" in summary
        if args.figures and sensitivity:
            period = load_run_scenario(
                load_sweep(args.sweep).run_directory(runs["run_id"].iloc[0])
            ).gossip.period
            out = args.figures_dir / f"{args.sweep.name}.png"
            print(draw_sensitivity(summary, period, out))
        if args.figures and "walk.age_error" not in parameters:  # else: none, or the above
            for path in draw_figures(args.sweep, runs, args.figures_dir):
                print(path)
    except NetsimError as exc:
        print(f"walk_grid: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
