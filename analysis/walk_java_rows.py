"""The authors' walk (``walk.preset: authors``) against the numbers of the authors' own code
on the four configurations whose Java numbers it records, in both gossip modes (this script
runs no simulation).

    netsim sweep scenarios/walk/java-rows-sweep.yaml --workers 2 --out analysis/sweeps
    python analysis/walk_java_rows.py analysis/sweeps/walk-java-rows

The reference is the authors' Java code's numbers, recorded here, (the Gossip Learning
Framework, branch ``featureexse``: ``SoloWalkerProtocol`` with ``MobilTraceChurnForSoloWalker``
and the ``DummySoloWalker`` configuration) on the STUNner trace ``peersim_session_100.txt``:
N = 1,000, 50 out-neighbours, Δ = 100 ms, one hour, 5 seeds, mean ± standard error.

Walk counts: netsim integrates the number of propagating walks exactly over time. The authors'
observer instead counts the walks it finds right after each cycle's churn and gossip (every
10th cycle), so a walk started by a restart in a cycle is counted from that cycle on, one
cycle before it moves. That adds one cycle per restart to the count: the observer's mean is
netsim's time average plus restarts · Δ / duration, which is what the ``walks (observer)``
column gives (at δ_rw = Δ with kills, 0.09 of a walk; elsewhere under 0.01).

A netsim figure agrees with the Java one when their difference is within two standard errors
of the difference (√(s₁² + s₂²)), i.e. inside the two-sample 95% interval; the ``z`` columns
give the difference in those standard errors. The per-run table goes to
``analysis/results/walk-java-rows.parquet``; ``--runs`` rebuilds the summary from it, and
``--readme`` rewrites the ``walk-java-rows`` block of ``analysis/README.md`` and the table of
``docs/walk-variants.md`` from it (:func:`report`, :func:`docs_tables`;
``tests/test_analysis_tables.py`` holds both to the committed table).
"""

from __future__ import annotations

import io
import math
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from experiments import (
    parse_per_run_table_arguments,
    per_run_table_parser,
    read_per_run_table,
    replayed_fallback_trace,
    write_readme_tables,
)

from netsim.analysis.collect import load_sweep, run_status
from netsim.analysis.runs import load_run_scenario
from netsim.errors import NetsimError
from netsim.storage import atomic_write_bytes
from netsim.units import HOUR

REPO = Path(__file__).resolve().parents[1]

#: The standard error of a figure given without one, to two decimals: its rounding error,
#: uniform over half a unit of the last digit either way (standard deviation 0.01 / √12).
ROUNDING = 0.01 / math.sqrt(12)

#: The Java code's numbers: (δ_rw, δ − δ_rw) in units of Δ and the kill
#: probability -> metric -> (mean, standard error over 5 seeds).
JAVA: dict[tuple[float, float, float], dict[str, tuple[float, float]]] = {
    (100.0, 10.0, 0.0): {"walks": (1.45, 0.015), "restarts": (157, 5), "drops": (156, 5)},
    (1.0, 10.0, 0.0): {"walks": (1.00, ROUNDING), "restarts": (20.2, 1.2), "drops": (15.6, 1.3)},
    (1.0, 10.0, 0.05): {"walks": (1.17, 0.003), "restarts": (3300, 22), "drops": (1360, 20)},
    (100.0, 10.0, 0.05): {"walks": (1.85, 0.044), "restarts": (264, 13), "drops": (225, 12)},
}
METRICS = ("walks", "restarts", "drops")
#: The columns of the per-run table this script reads back (``--runs``).
COLUMNS = ("seed", "mode", "delta_rw", "delta_extra", "kill", "time_none", *METRICS)
RESULTS = REPO / "analysis" / "results" / "walk-java-rows.parquet"
#: The page that explains the comparison, whose ``walk-java-rows-table`` block is the table.
WALK_VARIANTS = REPO / "docs" / "walk-variants.md"


def run_metrics(run_dir: Path) -> dict[str, float]:
    """One run's configuration (in units of Δ) and what the Java figures measure."""
    if replayed_fallback_trace(run_dir):
        raise NetsimError(
            f"{run_dir}: replayed the synthetic fallback trace, not STUNner's "
            "peersim_session_100.txt that the Java figures come from (../shared/data is absent)"
        )
    scenario = load_run_scenario(run_dir)
    walk, period = scenario.walk, scenario.gossip.period
    summary = pq.read_table(run_dir / "walk_summary.parquet").to_pandas().iloc[0]
    hours = scenario.duration / HOUR
    restarts = float(summary["restarts"])
    return {
        "mode": scenario.gossip.mode,
        "delta_rw": round(walk.transfer_time / period, 6),
        "delta_extra": round((walk.timeout - walk.transfer_time) / period, 6),
        "kill": float(walk.kill_probability),
        "mean_walks": float(summary["mean_propagating"]),
        "time_none": float(summary["time_without_walk"]),
        "walks": float(summary["mean_propagating"]) + restarts * period / scenario.duration,
        "restarts": restarts / hours,
        "drops": float(summary["dropped"]) / hours,
        "killed": float(summary["killed"]) / hours,
        "max_steps": float(summary["max_steps"]),
    }


def per_run_table(sweep: Path) -> pd.DataFrame:
    """One row per complete run of the sweep: its id, seed and :func:`run_metrics`."""
    source = load_sweep(sweep)
    status = run_status(source)
    plan = source.plan.set_index("run_id")
    rows = []
    for run_id in status.loc[status["status"] == "complete", "run_id"]:
        row = {"run_id": run_id, "seed": int(plan.loc[run_id, "seed"])}
        row.update(run_metrics(source.run_directory(run_id)))
        rows.append(row)
    return pd.DataFrame(rows)


def never_recovered(runs: pd.DataFrame) -> pd.Series:
    """Runs whose walk died out and was never restarted: time without a walk and not one
    restart. Under the authors' rules no update exists before the first walk's first step, so
    a first walk killed there leaves nothing that can time out (``walk_grid.never_recovered``;
    the Java code behaves the same). Such runs measure how the run started, not the protocol,
    and are reported apart."""
    return (runs["restarts"] == 0) & (runs["time_none"] > 0)


def mean_and_error(values: pd.Series) -> tuple[float, float]:
    """Mean and its standard error (0 for one value)."""
    n = values.size
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0


def summary_rows(runs: pd.DataFrame) -> list[dict[str, object]]:
    """Per configuration and mode: n, each metric's mean ± s.e., and its z against Java."""
    out = []
    keys = ["delta_rw", "delta_extra", "kill"]
    for (delta_rw, extra, kill), group in runs.groupby(keys, sort=False):
        java = JAVA.get((delta_rw, extra, kill))
        for mode in ("rounds", "exact"):
            runs_of_mode = group[group["mode"] == mode]
            if runs_of_mode.empty:
                continue
            row: dict[str, object] = {
                "config": (delta_rw, extra, kill),
                "mode": mode,
                "n": len(runs_of_mode),
            }
            row["max_steps"] = mean_and_error(runs_of_mode["max_steps"])
            for metric in METRICS:
                mean, error = mean_and_error(runs_of_mode[metric])
                row[metric] = (mean, error)
                if java is not None:
                    ref, ref_error = java[metric]
                    spread = math.hypot(error, ref_error)
                    row[f"z_{metric}"] = (mean - ref) / spread if spread > 0 else math.inf
            out.append(row)
    return out


def cell(metric: str, value: tuple[float, float]) -> str:
    mean, error = value
    if metric == "walks":
        return f"{mean:.3f} ± {error:.3f}"
    if metric == "max_steps":
        return f"{mean:,.0f} ± {error:,.0f}"
    return f"{mean:,.1f} ± {error:,.1f}"


def config_label(config: tuple[float, float, float]) -> str:
    delta_rw, extra, kill = config
    return f"{delta_rw:g}Δ / {extra:g}Δ / {kill:.0%}"


def markdown(rows: list[dict[str, object]]) -> str:
    """The comparison as a Markdown table: Java's row, then netsim's per mode."""
    lines = [
        "| δ_rw / δ − δ_rw / kill | code | n | walks (observer) | restarts/h | drops/h | z "
        "| max steps |",
        "|---|---|---|---|---|---|---|---|",
    ]
    seen = set()
    for row in rows:
        config = row["config"]
        java = JAVA.get(config)  # type: ignore[arg-type]
        if config not in seen and java is not None:
            seen.add(config)
            cells = " | ".join(cell(m, java[m]) for m in METRICS)
            label = config_label(config)  # type: ignore[arg-type]
            lines.append(f"| {label} | Java (authors' code) | 5 | {cells} | | not given |")
        cells = " | ".join(cell(m, row[m]) for m in METRICS)  # type: ignore[arg-type]
        z = ", ".join(f"{row[f'z_{m}']:+.1f}" for m in METRICS if f"z_{m}" in row)
        steps = cell("max_steps", row["max_steps"])  # type: ignore[arg-type]
        lines.append(f"| | netsim, {row['mode']} | {row['n']} | {cells} | {z} | {steps} |")
    return "\n".join(lines)


def verdict(rows: list[dict[str, object]]) -> str:
    """Which figures fall outside two standard errors of the Java ones."""
    outside = [
        f"{config_label(row['config'])} {row['mode']} {m} (z = {row[f'z_{m}']:+.1f})"  # type: ignore[arg-type]
        for row in rows
        for m in METRICS
        if abs(row.get(f"z_{m}", 0.0)) > 2  # type: ignore[arg-type]
    ]
    if not outside:
        return "Every figure is within two standard errors of the Java code's."
    return "Outside two standard errors of the Java code's: " + "; ".join(outside) + "."


def report(runs: pd.DataFrame) -> str:
    """The comparison table, which figures fall outside two standard errors, and the runs left
    out of the means (:func:`never_recovered`), as Markdown."""
    apart = never_recovered(runs)
    rows = summary_rows(runs[~apart])
    text = f"{markdown(rows)}\n\n{verdict(rows)}"
    if apart.any():
        text += " Left out of the means, as runs whose first walk died at its first step:\n"
        for _, run in runs[apart].iterrows():
            text += (
                f"\n- {config_label((run['delta_rw'], run['delta_extra'], run['kill']))}, "
                f"{run['mode']}, seed {run['seed']}: no walk {run['time_none']:.3%} of the time"
            )
    return text


def generated_tables(results: Path = RESULTS) -> dict[str, str]:
    """The ``analysis/README.md`` block of this script, from the committed per-run table."""
    return {"walk-java-rows": report(read_per_run_table(results, COLUMNS))}


def docs_tables(runs: pd.DataFrame) -> dict[str, str]:
    """The block of ``docs/walk-variants.md``: the comparison table alone."""
    return {"walk-java-rows-table": markdown(summary_rows(runs[~never_recovered(runs)]))}


def main(argv: list[str] | None = None) -> int:
    parser = per_run_table_parser(__doc__.split("\n\n")[0], "the walk-java-rows sweep directory")
    args = parse_per_run_table_arguments(parser, argv)
    try:
        if args.runs is not None:
            runs = read_per_run_table(args.runs, COLUMNS)
            table = args.runs
        else:
            runs = per_run_table(args.sweep)
            if runs.empty:
                print(f"walk_java_rows: {args.sweep}: no complete run yet", file=sys.stderr)
                return 1
            buffer = io.BytesIO()
            runs.to_parquet(buffer, index=False)
            args.results.mkdir(parents=True, exist_ok=True)
            table = args.results / "walk-java-rows.parquet"
            atomic_write_bytes(table, buffer.getvalue())
    except NetsimError as exc:
        print(f"walk_java_rows: error: {exc}", file=sys.stderr)
        return 1
    text = report(runs)
    print(text)
    print(f"\n{len(runs)} complete runs; per-run table: {table}")
    if args.readme:
        write_readme_tables({"walk-java-rows": text})
        write_readme_tables(docs_tables(runs), WALK_VARIANTS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
