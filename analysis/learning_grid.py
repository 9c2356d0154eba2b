"""Run the grids of Hegedűs et al. (2016) Fig. 4–7 and draw them.

    python analysis/learning_grid.py run spambase --reps 20 [--jobs 2 | --scheduler ADDRESS]
                                     [--out DIR] [--models logreg svm]
    python analysis/learning_grid.py figures
    python analysis/learning_grid.py baselines
    python analysis/learning_grid.py tables [--readme]

``run`` varies ``scenarios/learning/<dataset>.yaml`` over the paper's grid — model (LogReg,
SVM) × algorithm (DP-SGD-1, -5, -∞) × noise (L1, the paper's L2, the ε-DP K-norm L2) ×
normalisation (local, global) × sampling (with, without replacement) at ε = 1, the noise-free
SGD baseline, and ε = 0.1 for Fig. 7 — with seeds 1..reps. The grid is a sweep of
:mod:`netsim.sweep` (:func:`plan`: one listed point per configuration and seed, run with
exactly that seed) into the sweep directory ``<--out>/learning-<dataset>/`` (default
``analysis/sweeps``), on ``--jobs`` local processes or a Dask cluster; runs already complete
there are kept, so ``run`` resumes (and a run with more ``--reps`` reuses the seeds it has).
The accuracy curves of the run directories go to ``analysis/results/learning-<dataset>.parquet``
(atomically, when all runs are done). ``figures`` draws
``analysis/figures/learning-fig{4,5,6}-{paper-l2,k-norm}.png`` and
``learning-fig7-{paper-l2,k-norm}.png`` from every results file, and prints the final
accuracies as a Markdown table. Every figure draws, dashed, each data set's majority-class and
centralised non-private accuracy (local L2 normalisation, as the scenario files), and every row
of the table carries them for its own pre-processing (principle 9 of ``docs/architecture.md``).
They are computed here from the scenario files with the code the runs use
(:func:`netsim.analysis.learning.scenario_baselines`) for results collected before the runs
recorded them. ``baselines`` prints them per data set as a Markdown table.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import sys
from pathlib import Path
from typing import Any

import pandas as pd
from experiments import (
    SweepRunner,
    add_runner_arguments,
    describe,
    guarded,
    run_experiments,
    runner_from,
    show_tables,
)

from netsim.analysis.learning import (
    ALGORITHM_LABELS,
    BASELINE_COLUMNS,
    NOISE_LABELS,
    curves_from_run,
    learning_figure,
    scenario_baselines,
)
from netsim.errors import NetsimError
from netsim.learning.baselines import LearningBaselines
from netsim.learning.sgd_agent import learning_data
from netsim.scenario.loader import load_scenario
from netsim.scenario.schema import Scenario
from netsim.sweep import SweepPlan, SweepPoint, plan_points

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "scenarios" / "learning"
RESULTS = REPO / "analysis" / "results"
FIGURES = REPO / "analysis" / "figures"
ALGORITHMS = ("dp-sgd-1", "dp-sgd-5", "dp-sgd-inf")
SAMPLINGS = ("with_replacement", "without_replacement")
MODELS = ("logreg", "svm")


DATASETS = ("spambase", "segmentation", "mnist")
#: Adult is no grid of the paper; its yardsticks are printed when this project's copy exists.
ADULT = REPO.parent / "shared" / "data" / "uci" / "adult-complete-rows.csv"
#: The pre-processing of the scenario files (local normalisation; the paper's L2 noise).
SCENARIO_PREPROCESSING = ("local", "l2_paper")


def grid(models: tuple[str, ...] = MODELS) -> list[dict[str, Any]]:
    """Every configuration of Fig. 4–7 for ``models`` as dotted-key overrides."""
    configurations: list[dict[str, Any]] = []
    for model, algorithm, noise, normalisation, sampling in itertools.product(
        models, ALGORITHMS, ("l1", "l2_paper", "k_norm_l2"), ("local", "global"),
        SAMPLINGS,
    ):  # fmt: skip
        configurations.append(
            {
                "learning.model": model,
                "learning.algorithm": algorithm,
                "learning.noise": noise,
                "learning.normalisation": normalisation,
                "walk.sampling": sampling,
            }
        )
    for model, sampling in itertools.product(models, SAMPLINGS):
        configurations.append(
            {"learning.model": model, "learning.algorithm": "sgd", "walk.sampling": sampling}
        )
    for model, algorithm, noise in itertools.product(
        models, ALGORITHMS, ("l2_paper", "k_norm_l2")
    ):  # Fig. 7: ε = 0.1, L2, local normalisation, without replacement
        configurations.append(
            {
                "learning.model": model,
                "learning.algorithm": algorithm,
                "learning.noise": noise,
                "learning.epsilon": 0.1,
                "walk.sampling": "without_replacement",
            }
        )
    return configurations


def plan(
    dataset: str,
    reps: int,
    models: tuple[str, ...] = MODELS,
    overrides: dict[str, Any] | None = None,
) -> SweepPlan:
    """The sweep ``learning-<dataset>``: every configuration × seeds 1..reps (every point
    validated). ``overrides`` are set at every point after its own (for a short check)."""
    points = []
    for configuration in grid(models):
        configuration = {**configuration, **(overrides or {})}
        label = describe(configuration)
        points.extend(SweepPoint(configuration, seed, label) for seed in range(1, reps + 1))
    return plan_points(SCENARIOS / f"{dataset}.yaml", points, name=f"learning-{dataset}")


def reduce_run(dataset: str, directory: Path) -> pd.DataFrame:
    """One run directory's accuracy curve."""
    return curves_from_run(directory)


def results_file(dataset: str) -> Path:
    return RESULTS / f"learning-{dataset}.parquet"


def run_grid(dataset: str, reps: int, runner: SweepRunner, models: tuple[str, ...] = MODELS) -> int:
    """Run the whole grid for ``dataset`` and write its curve table; returns the number of
    failed runs (no table is written if any failed)."""
    return run_experiments(
        [dataset], runner,
        plan=lambda name: plan(name, reps, models), reduce=reduce_run, results=results_file,
    )  # fmt: skip


def dataset_scenario(dataset: str, *overrides: str) -> Scenario:
    """``scenarios/learning/<dataset>.yaml`` with ``overrides``; Adult, which has no scenario
    file, is ``spambase.yaml`` on :data:`ADULT`."""
    if dataset == "adult":
        file = SCENARIOS / "spambase.yaml"
        overrides = ("learning.dataset.name=adult", f"learning.dataset.path={ADULT}", *overrides)
    else:
        file = SCENARIOS / f"{dataset}.yaml"
    return load_scenario(file, overrides)


def configuration_baselines(dataset: str, normalisation: str, noise: str) -> LearningBaselines:
    """The yardsticks of ``dataset``'s scenario with that normalisation and noise (whose norm
    the data are normalised in), as its runs compute them."""
    scenario = dataset_scenario(
        dataset, f"learning.normalisation={normalisation}", f"learning.noise={noise}"
    )
    return scenario_baselines(scenario)


def with_baselines(curves: pd.DataFrame) -> pd.DataFrame:
    """``curves`` with :data:`BASELINE_COLUMNS` filled in where the runs did not record them
    (results collected before learning_summary had them): per data set, normalisation and
    noise, from the scenario file."""
    curves = curves.copy()
    for column in BASELINE_COLUMNS:
        if column not in curves:
            curves[column] = float("nan")
    missing = curves[list(BASELINE_COLUMNS)].isna().any(axis=1)
    keys = ["dataset", "normalisation", "noise"]
    for (dataset, normalisation, noise), rows in curves[missing].groupby(keys).groups.items():
        found = configuration_baselines(dataset, normalisation, noise)
        curves.loc[rows, list(BASELINE_COLUMNS)] = [found.majority, found.centralised]
    return curves


def final_accuracies(curves: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: mean and standard deviation over seeds of the last evaluation, the
    mean curve's best value, and the configuration's majority-class and centralised
    non-private accuracy (its data set, split and pre-processing)."""
    keys = ["dataset", "model", "algorithm", "noise", "normalisation", "sampling", "epsilon"]
    curves = with_baselines(curves)
    last = curves[curves["visits"] == curves.groupby([*keys, "seed"])["visits"].transform("max")]
    summary = last.groupby(keys)["accuracy"].agg(["mean", "std", "count"])
    best = curves.groupby([*keys, "visits"])["accuracy"].mean().groupby(keys).max()
    yardsticks = curves.groupby(keys)[list(BASELINE_COLUMNS)].mean()
    return summary.assign(best=best).join(yardsticks).reset_index()


def dataset_baselines(datasets: tuple[str, ...] = DATASETS) -> pd.DataFrame:
    """Per data set whose data are here: its split and the yardsticks — majority class and
    the centralised model under each pre-processing of the grid (and Adult's, when this
    project's copy exists)."""
    preprocessings = {
        "centralised, local L2": ("local", "l2_paper"),
        "centralised, local L1": ("local", "l1"),
        "centralised, global L2": ("global", "l2_paper"),
    }
    rows = []
    for name in (*datasets, *(("adult",) if ADULT.is_file() else ())):
        try:
            scenario = dataset_scenario(name)
            assert scenario.learning is not None
            data = learning_data(scenario.learning, 1)
        except NetsimError as exc:  # e.g. MNIST without ../shared/data
            print(f"{name}: left out ({exc})", file=sys.stderr)
            continue
        row: dict[str, Any] = {
            "data set": name,
            "train / test rows": f"{data.n_train:,} / {data.n_test:,}",
            "classes": data.classes,
        }
        for label, (normalisation, noise) in preprocessings.items():
            found = configuration_baselines(name, normalisation, noise)
            row.setdefault("majority class", found.majority)
            row[label] = found.centralised
        rows.append(row)
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame) -> str:
    """``table`` as a Markdown table (numbers with 3 decimals)."""

    def cell(value: object) -> str:
        return f"{value:.3f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(False)]
    return "\n".join(lines)


def mnist_table(curves: pd.DataFrame) -> str:
    """The MNIST grid as a Markdown table, generated from its results (one row per
    configuration: the final accuracy, over the seeds that ran, its best point and the
    configuration's yardsticks; SGD has no noise)."""
    table = final_accuracies(curves[curves["dataset"] == "mnist"])
    lines = [
        "| algorithm | noise | normalisation | sampling | ε | final accuracy (n) | best "
        "| majority | centralised |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    order = {name: k for k, name in enumerate(("sgd", *ALGORITHMS))}
    table = table.sort_values(
        ["algorithm", "epsilon", "noise", "normalisation", "sampling"],
        key=lambda c: c.map(order) if c.name == "algorithm" else c,
        ascending=[True, False, True, True, True],
    )
    for row in table.itertuples(False):
        spread = "" if pd.isna(row.std) else f" ± {row.std:.3f}"
        noise = "none" if row.algorithm == "sgd" else NOISE_LABELS.get(row.noise, row.noise)
        lines.append(
            f"| {ALGORITHM_LABELS.get(row.algorithm, row.algorithm)} | {noise} | "
            f"{row.normalisation} | {row.sampling.replace('_', ' ')} | "
            f"{'—' if row.algorithm == 'sgd' else f'{row.epsilon:g}'} | "
            f"{row.mean:.3f}{spread} ({row.count}) | {row.best:.3f} | "
            f"{row.majority_accuracy:.3f} | {row.centralised_accuracy:.3f} |"
        )
    return "\n".join(lines)


def draw(curves: pd.DataFrame) -> list[Path]:
    """Fig. 4–6 (one per algorithm) and Fig. 7, each with the paper's L2 and with K-norm;
    dashed in every panel, its data set's majority class and centralised model (with the
    scenario files' pre-processing: the panels mix normalisations)."""
    made = []
    rows = []
    for name in sorted(curves["dataset"].unique()):
        found = configuration_baselines(name, *SCENARIO_PREPROCESSING)
        rows.append([name, found.majority, found.centralised])
    baselines = pd.DataFrame(rows, columns=["dataset", *BASELINE_COLUMNS])
    figure = functools.partial(
        learning_figure,
        baselines=baselines,
        centralised_label="centralised non-private (local L2 normalisation)",
    )
    eps1 = curves[curves["epsilon"] == 1.0]
    baseline = eps1[eps1["algorithm"] == "sgd"]
    for number, algorithm in zip((4, 5, 6), ALGORITHMS, strict=True):
        for l2, tag in (("l2_paper", "paper-l2"), ("k_norm_l2", "k-norm")):
            chosen = eps1[(eps1["algorithm"] == algorithm) & eps1["noise"].isin(["l1", l2])]
            title = (
                f"Fig. {number}: {ALGORITHM_LABELS[algorithm]}, ε = 1, L1 vs "
                f"{NOISE_LABELS[l2]}; dash-dotted: SGD without noise"
            )
            both = pd.concat([chosen, baseline.assign(noise="none", normalisation="local")])
            made.append(figure(both, FIGURES / f"learning-fig{number}-{tag}.png", title=title))
    for l2, tag in (("l2_paper", "paper-l2"), ("k_norm_l2", "k-norm")):
        chosen = curves[
            (curves["noise"] == l2)
            & (curves["normalisation"] == "local")
            & (curves["sampling"] == "without_replacement")
            & (curves["algorithm"] != "sgd")
        ]
        title = f"Fig. 7: ε = 0.1 vs 1, {NOISE_LABELS[l2]}, local normalisation, w/o replacement"
        made.append(figure(chosen, FIGURES / f"learning-fig7-{tag}.png", title=title))
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the grid for one data set (resumes)")
    run.add_argument("dataset", choices=DATASETS)
    run.add_argument("--reps", type=int, default=20, help="seeds per configuration (paper: 20)")
    run.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    add_runner_arguments(run)
    commands.add_parser("figures", help="draw the figures from analysis/results")
    tables = commands.add_parser("tables", help="print the MNIST grid's table")
    tables.add_argument("--readme", action="store_true", help="write it into the README")
    commands.add_parser(
        "baselines", help="print each data set's majority-class and centralised accuracy"
    )
    args = parser.parse_args(argv)

    def act() -> int:
        if args.command == "run":
            failed = run_grid(args.dataset, args.reps, runner_from(args), tuple(args.models))
            return 1 if failed else 0
        if args.command == "baselines":
            print(markdown(dataset_baselines()))
            return 0
        if args.command == "tables":
            mnist = RESULTS / "learning-mnist.parquet"
            if not mnist.is_file():
                raise NetsimError(f"no {mnist}: run `learning_grid.py run mnist` first")
            show_tables({"learning-mnist": mnist_table(pd.read_parquet(mnist))}, args.readme)
            return 0
        files = sorted(RESULTS.glob("learning-*.parquet"))
        if not files:
            raise NetsimError(f"no results in {RESULTS}: run `learning_grid.py run` first")
        curves = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
        for path in draw(curves):
            print(path)
        print(markdown(final_accuracies(curves)))
        return 0

    return guarded("learning_grid", act)


if __name__ == "__main__":
    sys.exit(main())
