"""Run the grids of Hegedűs et al. (2016) Fig. 4–7 and draw them.

    python analysis/learning_grid.py run spambase --reps 20 --jobs 2
    python analysis/learning_grid.py figures

``run`` varies ``scenarios/learning/<dataset>.yaml`` over the paper's grid — model (LogReg,
SVM) × algorithm (DP-SGD-1, -5, -∞) × noise (L1, the paper's L2, the ε-DP K-norm L2) ×
normalisation (local, global) × sampling (with, without replacement) at ε = 1, the noise-free
SGD baseline, and ε = 0.1 for Fig. 7 — with seeds 1..reps, in worker processes, and writes the
accuracy curves to ``analysis/results/learning-<dataset>.parquet`` (atomically, when all runs
are done). ``figures`` draws ``analysis/figures/learning-fig{4,5,6}-{paper-l2,k-norm}.png`` and
``learning-fig7-{paper-l2,k-norm}.png`` from every results file, and prints the final
accuracies as a Markdown table.
"""

from __future__ import annotations

import argparse
import io
import itertools
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd

from netsim.analysis.learning import (
    ALGORITHM_LABELS,
    NOISE_LABELS,
    curves_from_tables,
    learning_figure,
)
from netsim.errors import NetsimError
from netsim.scenario.loader import load_scenario
from netsim.scenario.runner import run_in_memory, with_seed
from netsim.storage import atomic_write_bytes

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "scenarios" / "learning"
RESULTS = REPO / "analysis" / "results"
FIGURES = REPO / "analysis" / "figures"
ALGORITHMS = ("dp-sgd-1", "dp-sgd-5", "dp-sgd-inf")
SAMPLINGS = ("with_replacement", "without_replacement")
MODELS = ("logreg", "svm")


def grid(models: tuple[str, ...] = MODELS) -> list[tuple[str, ...]]:
    """Every configuration of Fig. 4–7 for ``models`` as ``--set`` overrides."""
    configurations = []
    for model, algorithm, noise, normalisation, sampling in itertools.product(
        models, ALGORITHMS, ("l1", "l2_paper", "k_norm_l2"), ("local", "global"),
        SAMPLINGS,
    ):  # fmt: skip
        configurations.append(
            (
                f"learning.model={model}",
                f"learning.algorithm={algorithm}",
                f"learning.noise={noise}",
                f"learning.normalisation={normalisation}",
                f"walk.sampling={sampling}",
            )
        )
    for model, sampling in itertools.product(models, SAMPLINGS):
        configurations.append(
            (f"learning.model={model}", "learning.algorithm=sgd", f"walk.sampling={sampling}")
        )
    for model, algorithm, noise in itertools.product(
        models, ALGORITHMS, ("l2_paper", "k_norm_l2")
    ):  # Fig. 7: ε = 0.1, L2, local normalisation, without replacement
        configurations.append(
            (
                f"learning.model={model}",
                f"learning.algorithm={algorithm}",
                f"learning.noise={noise}",
                "learning.epsilon=0.1",
                "walk.sampling=without_replacement",
            )
        )
    return configurations


def run_one(task: tuple[str, tuple[str, ...], int]) -> pd.DataFrame:
    """One run in a worker: its accuracy curve."""
    path, overrides, seed = task
    scenario = with_seed(load_scenario(Path(path), overrides), seed)
    _built, tables = run_in_memory(scenario)
    return curves_from_tables(tables, scenario)


def run_grid(dataset: str, reps: int, jobs: int, models: tuple[str, ...] = MODELS) -> Path:
    """Run the whole grid for ``dataset``; write its curve table; return the file."""
    path = SCENARIOS / f"{dataset}.yaml"
    load_scenario(path)  # fail early on a bad scenario or missing data
    tasks = [(str(path), c, seed) for c in grid(models) for seed in range(1, reps + 1)]
    started = time.perf_counter()
    curves = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for done, curve in enumerate(pool.map(run_one, tasks, chunksize=4), start=1):
            curves.append(curve)
            if done % 50 == 0 or done == len(tasks):
                elapsed = time.perf_counter() - started
                print(f"{dataset}: {done}/{len(tasks)} runs, {elapsed:.0f} s", flush=True)
    table = pd.concat(curves, ignore_index=True)
    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False)
    out = RESULTS / f"learning-{dataset}.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, buffer.getvalue())
    return out


def final_accuracies(curves: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: mean and standard deviation over seeds of the last evaluation, and
    the mean curve's best value."""
    keys = ["dataset", "model", "algorithm", "noise", "normalisation", "sampling", "epsilon"]
    last = curves[curves["visits"] == curves.groupby([*keys, "seed"])["visits"].transform("max")]
    summary = last.groupby(keys)["accuracy"].agg(["mean", "std", "count"])
    best = curves.groupby([*keys, "visits"])["accuracy"].mean().groupby(keys).max()
    return summary.assign(best=best).reset_index()


def markdown(table: pd.DataFrame) -> str:
    """``table`` as a Markdown table (numbers with 3 decimals)."""

    def cell(value: object) -> str:
        return f"{value:.3f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(False)]
    return "\n".join(lines)


def draw(curves: pd.DataFrame) -> list[Path]:
    """Fig. 4–6 (one per algorithm) and Fig. 7, each with the paper's L2 and with K-norm."""
    made = []
    eps1 = curves[curves["epsilon"] == 1.0]
    baseline = eps1[eps1["algorithm"] == "sgd"]
    for number, algorithm in zip((4, 5, 6), ALGORITHMS, strict=True):
        for l2, tag in (("l2_paper", "paper-l2"), ("k_norm_l2", "k-norm")):
            chosen = eps1[(eps1["algorithm"] == algorithm) & eps1["noise"].isin(["l1", l2])]
            title = (
                f"Fig. {number}: {ALGORITHM_LABELS[algorithm]}, ε = 1, L1 vs "
                f"{NOISE_LABELS[l2]}; dashed: SGD without noise"
            )
            both = pd.concat([chosen, baseline.assign(noise="none", normalisation="local")])
            made.append(learning_figure(both, FIGURES / f"learning-fig{number}-{tag}.png",
                                        title=title))  # fmt: skip
    for l2, tag in (("l2_paper", "paper-l2"), ("k_norm_l2", "k-norm")):
        chosen = curves[
            (curves["noise"] == l2)
            & (curves["normalisation"] == "local")
            & (curves["sampling"] == "without_replacement")
            & (curves["algorithm"] != "sgd")
        ]
        title = f"Fig. 7: ε = 0.1 vs 1, {NOISE_LABELS[l2]}, local normalisation, w/o replacement"
        made.append(learning_figure(chosen, FIGURES / f"learning-fig7-{tag}.png", title=title))
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the grid for one data set")
    run.add_argument("dataset", choices=["spambase", "segmentation", "mnist"])
    run.add_argument("--reps", type=int, default=20, help="seeds per configuration (paper: 20)")
    run.add_argument("--jobs", type=int, default=2, help="worker processes")
    run.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    commands.add_parser("figures", help="draw the figures from analysis/results")
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            print(run_grid(args.dataset, args.reps, args.jobs, tuple(args.models)))
            return 0
        files = sorted(RESULTS.glob("learning-*.parquet"))
        if not files:
            raise NetsimError(f"no results in {RESULTS}: run `learning_grid.py run` first")
        curves = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
        for path in draw(curves):
            print(path)
        print(markdown(final_accuracies(curves)))
    except NetsimError as exc:
        print(f"learning_grid: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
