"""DOLA's (ε, δ) releases composed by RDP or PLD (``dola.accounting``) instead of splitting the
budget: how much less noise they need, and what it buys in accuracy.

    python analysis/dola_accounting.py run [--jobs 2 | --scheduler ADDRESS] [--out DIR]
                                           [--only NAME ...] [--reps 5]
    python analysis/dola_accounting.py tables [--readme]

Every run is Li et al. (TKDE 2018) Alg. 2 (``dola.algorithm: gaussian``, gradient noise) at
δ = 1e-5 per example, with the shipped R and λ, for each of :data:`BATCHES` × :data:`EPSILONS` ×
:data:`ACCOUNTINGS` and seeds 1..reps (default 5), at most :data:`MAX_PASSES` passes:

=============  ===========================================================================
``synthetic``  ``scenarios/dola/synthetic.yaml`` (100,000 points in the unit ball of R^10,
               64 nodes, 1,000 rounds)
``adult``      ``scenarios/dola/adult.yaml`` (UCI Adult, 64 nodes, 400 rounds; needs
               ../shared/data)
=============  ===========================================================================

Under ``basic`` each of an example's k releases (k: the passes over a node's shard) gets
(ε/k, δ/k) and the analytic Gaussian of Balle & Wang (2018); under ``rdp`` and ``pld`` the noise
multiplier z = σ/Δ is calibrated so that the k releases compose to (ε, δ) by Rényi DP (Mironov
2017) or by their privacy-loss distribution (dp-accounting;
:func:`netsim.privacy.composition.calibrated_noise_multiplier`).

Each experiment is a sweep of :mod:`netsim.sweep` (:func:`plan`: one listed point per
configuration and seed, run with exactly that seed) into ``<--out>/dola-accounting-<name>/``
(default ``analysis/sweeps``; complete runs are kept, so ``run`` resumes), reduced to one row
per run (:func:`reduce_run`: the test accuracy of the internal ŵ_T and of the covered running
averages of the released models and of the projected mixes, the passes, z, ε and δ spent, and
the three yardsticks of ``dola_summary``) in ``analysis/results/dola-accounting-<name>.parquet``.
``tables`` prints the Markdown tables (:func:`generated_tables`: σ/Δ for k releases, computed
by :func:`sigma_table`, and the accuracies, from the per-run tables) and with ``--readme``
writes them into analysis/README.md's generated blocks.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from experiments import (
    SweepRunner,
    add_runner_arguments,
    describe,
    guarded,
    load_result_tables,
    run_experiments,
    runner_from,
    write_readme_tables,
)
from scipy.optimize import brentq

from netsim.analysis.runs import load_run, load_run_scenario
from netsim.errors import NetsimError
from netsim.privacy.composition import calibrated_noise_multiplier
from netsim.privacy.mechanisms import analytic_gaussian_sigma
from netsim.sweep import SweepPlan, SweepPoint, plan_points

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "analysis" / "results"
EXPERIMENTS = ("synthetic", "adult")
#: The base scenario of each experiment.
BASES = {
    "synthetic": REPO / "scenarios" / "dola" / "synthetic.yaml",
    "adult": REPO / "scenarios" / "dola" / "adult.yaml",
}
#: How an example's releases compose, in table order.
ACCOUNTINGS = ("basic", "rdp", "pld")
#: Examples per release h: one pass (h = 1) and several (h = 8: 7 passes on the synthetic set's
#: 1,000 rounds, 8 on Adult's 400).
BATCHES = (1, 8)
EPSILONS = (1.0, 0.1)
DELTA = 1e-5
#: The passes an example may make over its node's shard (more than any run needs).
MAX_PASSES = 10
DEFAULT_REPS = 5
#: The σ/Δ table: releases per example k, at each of :data:`EPSILONS` and δ = :data:`DELTA`.
SIGMA_USES = (1, 2, 3, 5, 7, 10)


# --- σ/Δ for k releases (computed) --------------------------------------------------------------


def basic_multiplier(uses: int, epsilon: float, delta: float) -> float:
    """σ/Δ of each of ``uses`` releases at (ε/k, δ/k): sequential composition (Dwork & Roth
    2014, Thm. 3.16) of analytic Gaussians (Balle & Wang, ICML 2018, Alg. 1)."""
    return analytic_gaussian_sigma(1.0, epsilon / uses, delta / uses)


def advanced_multiplier(uses: int, epsilon: float, delta: float) -> float:
    """σ/Δ for k releases under the better of basic and advanced composition (Dwork, Rothblum
    & Vadhan, FOCS 2010, Thm. III.3): ε = √(2k ln(1/δ')) ε₀ + k ε₀ (e^{ε₀} − 1) with δ' = δ/2,
    the releases at (ε₀, δ/(2k)) by the analytic Gaussian."""
    basic = basic_multiplier(uses, epsilon, delta)
    if uses == 1:
        return basic
    slack = delta / 2

    def excess(e0: float) -> float:
        return math.sqrt(2 * uses * math.log(1 / slack)) * e0 + uses * e0 * math.expm1(e0) - epsilon

    e0 = brentq(excess, 1e-12, epsilon)
    return min(basic, analytic_gaussian_sigma(1.0, e0, delta / (2 * uses)))


def sigma_rows(
    epsilons: Sequence[float] = EPSILONS, delta: float = DELTA, uses: Sequence[int] = SIGMA_USES
) -> pd.DataFrame:
    """σ/Δ for k releases per example at (ε, δ) under basic, advanced, RDP and PLD composition
    (one row per ε and k)."""
    rows = []
    for epsilon in epsilons:
        for k in uses:
            rows.append({
                "epsilon": epsilon, "uses": k,
                "basic": basic_multiplier(k, epsilon, delta),
                "advanced": advanced_multiplier(k, epsilon, delta),
                "rdp": calibrated_noise_multiplier(k, epsilon, delta, "rdp"),
                "pld": calibrated_noise_multiplier(k, epsilon, delta, "pld"),
            })  # fmt: skip
    return pd.DataFrame(rows)


def sigma_table(rows: pd.DataFrame) -> str:
    """:func:`sigma_rows` as a Markdown table, with RDP's and PLD's σ/Δ as a share of basic's."""
    lines = [
        "| ε | k | basic | advanced | rdp | pld | rdp / basic | pld / basic |",
        "|" + "---|" * 8,
    ]
    for _, row in rows.iterrows():
        lines.append(
            f"| {row['epsilon']:g} | {int(row['uses'])} | {row['basic']:.4g} "
            f"| {row['advanced']:.4g} | {row['rdp']:.4g} | {row['pld']:.4g} "
            f"| {row['rdp'] / row['basic']:.3f} | {row['pld'] / row['basic']:.3f} |"
        )
    return "\n".join(lines)


# --- the sweeps ---------------------------------------------------------------------------------


def points(reps: int = DEFAULT_REPS) -> list[SweepPoint]:
    """The runs of either experiment: Alg. 2 at each batch, ε and accounting, seeds 1..reps."""
    listed = []
    for batch in BATCHES:
        for epsilon in EPSILONS:
            for accounting in ACCOUNTINGS:
                overrides: dict[str, Any] = {
                    "dola.algorithm": "gaussian", "dola.epsilon": epsilon, "dola.delta": DELTA,
                    "dola.batch": batch, "dola.accounting": accounting,
                    "dola.max_passes": MAX_PASSES, "dola.regret_checkpoints": 0,
                }  # fmt: skip
                label = describe(overrides)
                listed.extend(SweepPoint(overrides, seed, label) for seed in range(1, reps + 1))
    return listed


def plan(name: str, reps: int = DEFAULT_REPS) -> SweepPlan:
    """The sweep ``dola-accounting-<name>`` (every point validated)."""
    if name not in BASES:
        raise NetsimError(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")
    return plan_points(BASES[name], points(reps), name=f"dola-accounting-{name}")


#: The columns :func:`reduce_run` writes (one row per run).
COLUMNS = (
    "experiment", "dataset", "batch", "max_passes", "passes", "epsilon", "delta", "accounting",
    "composition", "seed", "noise_multiplier", "accuracy_averaged", "accuracy_released_averaged",
    "accuracy_released_mixed_averaged", "epsilon_spent", "delta_spent", "guarantee",
    "majority_accuracy", "centralised_accuracy", "central_dp_accuracy",
)  # fmt: skip


def reduce_run(name: str, directory: Path) -> pd.DataFrame:
    """One run directory as one row of :data:`COLUMNS`: its configuration, the passes its
    examples made, the noise multiplier z = σ/Δ of its releases (the ledger's median), the
    final test accuracies of ŵ_T (internal) and of the covered running averages, ε and δ
    spent per example, and the three yardsticks of its ``dola_summary``."""
    tables = load_run(directory, parameters=False)
    dola = load_run_scenario(directory).dola
    if dola is None:
        raise NetsimError(f"{directory}: not a DOLA run (no dola section)")
    summary = tables["dola_summary"].iloc[0]
    ledger = tables["privacy_ledger"]
    row = {
        "experiment": name,
        "dataset": dola.data.name,
        "batch": dola.batch,
        "max_passes": dola.max_passes,
        "passes": int(summary["passes"]),
        "epsilon": dola.epsilon,
        "delta": dola.delta,
        "accounting": dola.accounting,
        "composition": str(summary["composition"]),
        "seed": int(load_run_scenario(directory).seed),
        "noise_multiplier": float((ledger["noise_scale"] / ledger["sensitivity"]).median()),
        "accuracy_averaged": float(summary["accuracy_averaged"]),
        "accuracy_released_averaged": float(summary["accuracy_released_averaged"]),
        "accuracy_released_mixed_averaged": float(summary["accuracy_released_mixed_averaged"]),
        "epsilon_spent": float(summary["epsilon_spent_max"]),
        "delta_spent": float(summary["delta_spent_max"]),
        "guarantee": str(summary["guarantee"]),
        "majority_accuracy": float(summary["majority_accuracy"]),
        "centralised_accuracy": float(summary["centralised_accuracy"]),
        "central_dp_accuracy": float(summary["central_dp_accuracy"]),
    }
    return pd.DataFrame([row], columns=list(COLUMNS))


def results_file(name: str) -> Path:
    return RESULTS / f"dola-accounting-{name}.parquet"


def run(names: Sequence[str], runner: SweepRunner, reps: int = DEFAULT_REPS) -> int:
    """Run the sweeps of ``names`` and write one per-run table each; the failed runs."""
    return run_experiments(
        names, runner,
        plan=lambda name: plan(name, reps), reduce=reduce_run, results=results_file,
    )  # fmt: skip


def load_results(names: Sequence[str] = EXPERIMENTS) -> pd.DataFrame:
    """The per-run tables of ``names`` that exist, concatenated in experiment order."""
    return load_result_tables(names, results_file, "dola_accounting.py")


# --- the accuracy table -------------------------------------------------------------------------


def _mean_sd(values: pd.Series) -> str:
    """``mean ± sd`` over seeds (the mean alone for one seed)."""
    if len(values) < 2:
        return f"{values.mean():.3f}"
    return f"{values.mean():.3f} ± {values.std():.3f}"


def accuracy_table(runs: pd.DataFrame) -> str:
    """One row per data set, batch, ε and accounting (table order): the passes, σ/Δ, ε spent
    by the worst example in any run, the test accuracy of ŵ_T (an internal iterate) and of
    the running averages of the released models and of their projected mixes (both covered
    by the guarantee), mean ± s.d. over the n seeds, and the yardsticks' means on the same
    split (majority class, centralised non-private, central DP at the same (ε, δ))."""
    lines = [
        "| data set | batch (passes) | ε | accounting | σ/Δ | ε spent | accuracy ŵ_T (internal) "
        "| accuracy released average (covered) | accuracy projected-mix average (covered) | n "
        "| majority | centralised | central DP |",
        "|" + "---|" * 13,
    ]
    runs = runs.assign(
        _experiment=runs["experiment"].map(EXPERIMENTS.index),
        _accounting=runs["accounting"].map(ACCOUNTINGS.index),
        _epsilon=-runs["epsilon"],
    )
    keys = ["_experiment", "batch", "_epsilon", "_accounting"]
    for _, group in runs.groupby(keys, sort=True):
        first = group.iloc[0]
        passes = "/".join(str(p) for p in sorted(group["passes"].unique()))
        lines.append(
            "| " + " | ".join([
                str(first["dataset"]), f"{first['batch']} ({passes})", f"{first['epsilon']:g}",
                str(first["accounting"]), f"{group['noise_multiplier'].mean():.4g}",
                f"{group['epsilon_spent'].max():.4g}", _mean_sd(group["accuracy_averaged"]),
                _mean_sd(group["accuracy_released_averaged"]),
                _mean_sd(group["accuracy_released_mixed_averaged"]), str(len(group)),
                f"{group['majority_accuracy'].mean():.3f}",
                f"{group['centralised_accuracy'].mean():.3f}",
                f"{group['central_dp_accuracy'].mean():.3f}",
            ]) + " |"
        )  # fmt: skip
    return "\n".join(lines)


def generated_tables(runs: pd.DataFrame | None = None) -> dict[str, str]:
    """The generated blocks of analysis/README.md's section on DOLA's accounting: σ/Δ for k
    releases (computed) and the accuracies (from the committed per-run tables)."""
    runs = load_results() if runs is None else runs
    return {
        "dola-accounting-sigma": sigma_table(sigma_rows()),
        "dola-accounting-accuracy": accuracy_table(runs),
    }


# --- command line -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run the experiments (resumes)")
    add_runner_arguments(run_parser)
    run_parser.add_argument("--only", nargs="+", choices=EXPERIMENTS, default=list(EXPERIMENTS))
    run_parser.add_argument("--reps", type=int, default=DEFAULT_REPS, help="seeds per row")
    tables = commands.add_parser("tables", help="print the tables from analysis/results")
    tables.add_argument("--readme", action="store_true", help="write them into analysis/README.md")
    args = parser.parse_args(argv)

    def act() -> int:
        if args.command == "run":
            return 1 if run(args.only, runner_from(args), args.reps) else 0
        found = generated_tables()
        for name, table in found.items():
            print(f"\n<!-- {name} -->\n{table}")
        if args.readme:
            write_readme_tables(found)
        return 0

    return guarded("dola_accounting", act)


if __name__ == "__main__":
    sys.exit(main())
