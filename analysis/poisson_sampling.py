"""The gain of Poisson subsampling within a node's shard, at one budget (ε, δ) per record.

    python analysis/poisson_sampling.py run [--jobs 2 | --scheduler ADDRESS] [--out DIR]
                                            [--reps 5]
    python analysis/poisson_sampling.py tables [--readme]

DP-SGD over an ideal walk on Spambase (``scenarios/learning/spambase.yaml``): 41 nodes of
r = 100 training records each, ten visits of every node (the walk without replacement), a
visit stepping on b = 10 records' clipped gradients (C = 1), logistic regression, Gaussian
noise composed by RDP to (ε, δ) = (1, 1e-5) per record, seeds 1..reps per row
(:func:`rows`):

=================================  ==========================================================
``cyclic``                          the next b records of the shard in turn; a record is
                                    used 10·b/r = once (DP-SGD-1), a full Gaussian release
                                    of the mean, replace-one sensitivity 2C/b
``poisson, amplified``              each record taken with probability q = b/r = 1/10; every
                                    record charged at each of its node's 10 visits
                                    (DP-SGD-10) with ``PoissonSampledDpEvent(q, ·)``,
                                    add/remove sensitivity C/b (Abadi et al. 2016, Alg. 1;
                                    Mironov, Talwar & Zhang 2019)
``poisson, charged unsampled``      the same sampling, with the noise multiplier ten
                                    *unsampled* Gaussian uses need at (1, 1e-5) under
                                    add/remove: the adjacency change alone, without the
                                    amplification (the run's own ledger charges the
                                    amplified ε, which is below the budget)
``non-private``                     cyclic, no noise: the ceiling of the three
=================================  ==========================================================

The noise each needs is compared on the released step ĝ = (Σ clipped gradients + N(0,
σ²I))/b: σ/C = 2z for cyclic (Δ = 2C), z for Poisson (Δ = C). Each row is a sweep point of
:mod:`netsim.sweep` (sweep ``poisson-sampling`` in ``<--out>``, default ``analysis/sweeps``;
complete runs are kept, so ``run`` resumes), reduced to one row per run (:func:`reduce_run`)
in ``analysis/results/poisson-sampling.parquet``; ``tables`` prints the Markdown table
(:func:`generated_tables`, with the PLD multipliers beside the runs' RDP ones) and with
``--readme`` writes it into analysis/README.md's generated block.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from experiments import (
    SweepRunner,
    add_runner_arguments,
    describe,
    guarded,
    load_result_tables,
    mean_interval,
    planned_label,
    run_experiments,
    runner_from,
    show_tables,
)

from netsim.analysis.learning import final_accuracy
from netsim.analysis.runs import load_run, load_run_scenario
from netsim.privacy.composition import calibrated_noise_multiplier
from netsim.scenario.loader import load_scenario
from netsim.sweep import SweepPlan, SweepPoint, plan_points

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "scenarios" / "learning" / "spambase.yaml"
RESULTS = REPO / "analysis" / "results" / "poisson-sampling.parquet"
NAME = "poisson-sampling"
EPSILON = 1.0
DELTA = 1e-5
ACCOUNTING = "rdp"
#: r: training records per node; b: the (expected) batch of a visit.
RECORDS_PER_NODE = 100
BATCH = 10
CLIP = 1.0
#: Visits of every node (the walk without replacement visits each once per pass).
PASSES = 10
EVALUATIONS_PER_PASS = 10
DEFAULT_REPS = 10


def cyclic_uses() -> int:
    """The most uses a record gets from cyclic mini-batches: ⌈passes · b / r⌉."""
    return math.ceil(PASSES * BATCH / RECORDS_PER_NODE)


def sampling_rate() -> float:
    """q = b / r."""
    return BATCH / RECORDS_PER_NODE


def unsampled_multiplier(accounting: str = ACCOUNTING) -> float:
    """The noise multiplier of :data:`PASSES` unsampled Gaussian uses at (ε, δ): what a
    Poisson run would need were its amplification not claimed."""
    return calibrated_noise_multiplier(PASSES, EPSILON, DELTA, accounting)


def _private(algorithm: str, sampling: str, noise: Any = "gaussian") -> dict[str, Any]:
    return {
        "learning.algorithm": algorithm,
        "learning.sampling": sampling,
        "learning.noise": noise,
        "learning.accounting": ACCOUNTING,
        "learning.epsilon": EPSILON,
        "learning.delta": DELTA,
    }


@dataclass(frozen=True)
class Row:
    """One row of the table: its label, its overrides and how its uses are charged."""

    label: str
    overrides: dict[str, Any] = field(default_factory=dict)


def rows() -> tuple[Row, ...]:
    """The rows, in table order (see the module docstring)."""
    fixed = {"kind": "gaussian", "noise_multiplier": unsampled_multiplier()}
    return (
        Row("cyclic", _private(f"dp-sgd-{cyclic_uses()}", "cyclic")),
        Row("poisson, amplified", _private(f"dp-sgd-{PASSES}", "poisson")),
        Row("poisson, charged unsampled", _private(f"dp-sgd-{PASSES}", "poisson", fixed)),
        Row("non-private", {"learning.algorithm": "sgd", "learning.noise": "k_norm_l2"}),
    )


def shard_overrides() -> dict[str, Any]:
    """r records per node, b a visit, clip C: nodes are the whole shards of the training
    rows; the duration gives every node exactly :data:`PASSES` visits (steps at 1 s … the
    last, hence the one more second)."""
    nodes = load_scenario(BASE).nodes // RECORDS_PER_NODE  # one record per node in the base
    return {
        "nodes": nodes,
        "duration": float(PASSES * nodes + 1),
        "learning.records_per_node": RECORDS_PER_NODE,
        "learning.batch": BATCH,
        "learning.clip": CLIP,
        "learning.evaluate_every": max(1, nodes // EVALUATIONS_PER_PASS),
    }


def points(reps: int) -> list[SweepPoint]:
    """Each row × seeds 1..``reps``."""
    shards = shard_overrides()
    listed = []
    for row in rows():
        overrides = {**shards, **row.overrides}
        label = f"{row.label}: {describe(row.overrides)}"
        listed.extend(SweepPoint(overrides, seed, label) for seed in range(1, reps + 1))
    return listed


def plan(reps: int = DEFAULT_REPS) -> SweepPlan:
    """The sweep ``poisson-sampling`` (every point validated)."""
    return plan_points(BASE, points(reps), name=NAME)


COLUMNS = (
    "row", "sampling", "algorithm", "records_per_node", "batch", "seed", "final_accuracy",
    "updates", "refused", "uses", "epsilon_spent", "composition", "noise_multiplier",
    "step_noise", "majority_accuracy", "centralised_accuracy", "central_dp_accuracy",
)  # fmt: skip


def reduce_run(name: str, directory: Path) -> pd.DataFrame:
    """One run directory as one row of :data:`COLUMNS`: its configuration, final test
    accuracy, the worst record's ε and its charges, the ledger's noise multiplier σ/Δ and
    the released step's noise over C (σ·b/C: 2z under replace-one, z under add/remove)."""
    tables = load_run(directory, parameters=False)
    learning = load_run_scenario(directory).learning
    assert learning is not None
    summary = tables["learning_summary"].iloc[0]
    ledger = tables["privacy_ledger"]
    private = learning.algorithm != "sgd"
    multiplier = step_noise = math.nan
    if private:
        multiplier = float((ledger["noise_scale"] / ledger["sensitivity"]).median())
        step_noise = float((ledger["noise_scale"] * learning.batch / learning.clip).median())
    row = {
        "row": planned_label(directory, NAME).split(": ", 1)[0],
        "sampling": learning.sampling,
        "algorithm": learning.algorithm,
        "records_per_node": learning.records_per_node,
        "batch": learning.batch,
        "seed": load_run_scenario(directory).seed,
        "final_accuracy": final_accuracy(tables),
        "updates": int(summary["updates"]),
        "refused": int(summary["refused"]),
        "uses": int(tables["privacy_records"]["uses"].max()),
        "epsilon_spent": float(summary["epsilon"]),
        "composition": str(summary["composition"]),
        "noise_multiplier": multiplier,
        "step_noise": step_noise,
        "majority_accuracy": float(summary["majority_accuracy"]),
        "centralised_accuracy": float(summary["centralised_accuracy"]),
        "central_dp_accuracy": float(summary["central_dp_accuracy"]),
    }
    return pd.DataFrame([row], columns=list(COLUMNS))


def run(runner: SweepRunner, reps: int = DEFAULT_REPS) -> int:
    """Run the sweep and write its per-run table; the failed runs."""
    return run_experiments(
        [NAME], runner,
        plan=lambda _: plan(reps), reduce=reduce_run, results=lambda _: RESULTS,
    )  # fmt: skip


# --- the table ----------------------------------------------------------------------------------


def pld_multiplier(label: str) -> float:
    """The noise multiplier the row would need under PLD (dp-accounting's PLDAccountant) at
    the same (ε, δ): cyclic k uses, Poisson 10 uses at q (amplified) or unsampled."""
    if label == "cyclic":
        return calibrated_noise_multiplier(cyclic_uses(), EPSILON, DELTA, "pld")
    if label == "poisson, amplified":
        return calibrated_noise_multiplier(PASSES, EPSILON, DELTA, "pld", sampling_rate())
    if label == "poisson, charged unsampled":
        return unsampled_multiplier("pld")
    return math.nan


def _number(value: float, digits: int = 2) -> str:
    return "—" if not math.isfinite(value) else f"{value:.{digits}f}"


def markdown_table(runs: pd.DataFrame) -> str:
    """One row per configuration, in :func:`rows`' order: its sampling, neighbouring
    relation, charges a record takes, q, the runs' RDP noise multiplier and PLD's, the
    released step's noise σ·b/C, the worst record's ε, the final accuracy's mean with its
    95 % t interval over seeds, and the yardsticks."""
    header = (
        "| row | neighbours | charges per record | q | z = σ/Δ (RDP, run) | z (PLD) | "
        "step noise σ·b/C | ε spent (worst record) | final accuracy, mean [95 % CI] (n) | "
        "majority | centralised | central DP |"
    )
    lines = [header, "|" + "---|" * 12]
    for row in rows():
        of = runs[runs["row"] == row.label]
        if of.empty:
            continue
        first = of.iloc[0]
        private = first["algorithm"] != "sgd"
        poisson = first["sampling"] == "poisson"
        neighbours = "add/remove" if poisson else "replace-one" if private else "—"
        q = sampling_rate() if poisson else math.nan
        charges = f"{int(of['uses'].max())}" if private else "—"
        lines.append(
            "| " + " | ".join([
                row.label, neighbours, charges, _number(q),
                _number(float(of["noise_multiplier"].mean())), _number(pld_multiplier(row.label)),
                _number(float(of["step_noise"].mean())),
                _number(float(of["epsilon_spent"].max()), 3) if private else "—",
                f"{mean_interval(of['final_accuracy'])} ({len(of)})",
                _number(float(of["majority_accuracy"].mean()), 3),
                _number(float(of["centralised_accuracy"].mean()), 3),
                _number(float(of["central_dp_accuracy"].mean()), 3),
            ]) + " |"
        )  # fmt: skip
    return "\n".join(lines)


def generated_tables(runs: pd.DataFrame | None = None) -> dict[str, str]:
    """The generated block of analysis/README.md, from the committed per-run table."""
    runs = (
        load_result_tables([NAME], lambda _: RESULTS, "poisson_sampling.py")
        if runs is None
        else runs
    )
    return {NAME: markdown_table(runs)}


# --- command line -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run the sweep (resumes)")
    add_runner_arguments(run_parser)
    run_parser.add_argument("--reps", type=int, default=DEFAULT_REPS, help="seeds per row")
    tables = commands.add_parser("tables", help="print the table from analysis/results")
    tables.add_argument("--readme", action="store_true", help="write it into analysis/README.md")
    args = parser.parse_args(argv)
    logging.getLogger("absl").setLevel(logging.ERROR)  # dp-accounting's dropped RDP orders

    def act() -> int:
        if args.command == "run":
            return 1 if run(runner_from(args), args.reps) else 0
        show_tables(generated_tables(), args.readme)
        return 0

    return guarded("poisson_sampling", act)


if __name__ == "__main__":
    sys.exit(main())
