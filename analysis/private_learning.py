"""Private learning as the field does it now, beside the paper's rows, with three yardsticks.

    python analysis/private_learning.py run [--jobs 2 | --scheduler ADDRESS] [--out DIR]
                                            [--only NAME ...] [--reps 5]
    python analysis/private_learning.py tables [--readme]
    python analysis/private_learning.py figures

At ε = 1 per record (δ = 1e-5 where the mechanism spends δ), seeds 1..reps per row (the two
rows of the Adult margin, :data:`MARGIN_ROWS`: seeds 1..20):

=============  ===========================================================================
``spambase``   DP-SGD over an ideal walk, ``scenarios/learning/spambase.yaml`` (4,140 nodes,
               ten passes): the rows of :data:`WALK_ROWS`
``adult``      the same on ``scenarios/learning/adult.yaml`` (27,146 nodes, ten passes; needs
               ../shared/data)
``gossip``     gossip learning on Spambase, ``scenarios/learning/spambase-gossip-learning.yaml``
               (4,140 nodes, no churn, period 1 s, 100 s): the rows of :data:`GOSSIP_ROWS`
=============  ===========================================================================

The walk rows are Hegedűs, Berta, Jelasity (2016) §6's DP-SGD-5 with the paper's L2 noise
(no DP guarantee: its ε is nominal), with the ε-DP K-norm L2 mechanism (Hardt & Talwar 2010)
under basic composition, with Gaussian noise under basic composition and under Rényi-DP
composition (Mironov 2017; dp-accounting), then shards of r records per node stepped on
mini-batches of b = r clipped gradients (Abadi et al. 2016: sensitivity 2C/b per record; the
nodes are the training rows / r, so the walk still makes ten passes), and an MLP with one
hidden layer of 32 units, clip 1, the same way; and the non-private SGD row of each model.
Every hyper-parameter is the shipped scenarios' (learning rate 1/√t, λ = 1e-4, local
normalisation, clip 1 for the MLP): nothing is tuned on the test rows, and tuning on the
private training rows would itself be a use of them that the budget does not count.

Each experiment is a sweep of :mod:`netsim.sweep` (:func:`plan`: one listed point per row and
seed, run with exactly that seed) into ``<--out>/private-learning-<name>/`` (default
``analysis/sweeps``; complete runs are kept, so ``run`` resumes). Its run directories are
reduced to one row per run (:func:`reduce_run`: final test accuracy, updates, the worst
record's ε and δ spent, the composition, and the three yardsticks of ``learning_summary``:
majority class, centralised non-private, central DP at the same (ε, δ)) in
``analysis/results/private-learning-<name>.parquet``. ``tables`` prints the Markdown tables
(:func:`generated_tables`) and with ``--readme`` writes them into analysis/README.md's
generated blocks; ``figures`` draws ``analysis/figures/private-learning.png``.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from experiments import (
    SweepRunner,
    add_runner_arguments,
    describe,
    guarded,
    load_result_tables,
    planned_label,
    run_experiments,
    runner_from,
    stored_yardstick,
    write_readme_tables,
)
from scipy import stats

from netsim.analysis.figures import save_figure
from netsim.analysis.learning import final_accuracy
from netsim.analysis.runs import load_run, load_run_scenario
from netsim.errors import NetsimError
from netsim.plotting import pyplot
from netsim.scenario.loader import load_scenario
from netsim.sweep import SweepPlan, SweepPoint, plan_points

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "scenarios" / "learning"
RESULTS = REPO / "analysis" / "results"
FIGURE = REPO / "analysis" / "figures" / "private-learning.png"
EXPERIMENTS = ("spambase", "adult", "gossip")
#: The base scenario of each experiment (its nodes are the data set's training rows).
BASES = {
    "spambase": SCENARIOS / "spambase.yaml",
    "adult": SCENARIOS / "adult.yaml",
    "gossip": SCENARIOS / "spambase-gossip-learning.yaml",
}
EPSILON = 1.0
#: The δ of every mechanism that spends one (the Gaussian); the others run at δ = 0.
DELTA = 1e-5
#: Seeds 1..DEFAULT_REPS per row.
DEFAULT_REPS = 5
#: Walk passes over the training rows (the paper's Fig. 4–7 x-axis).
PASSES = 10
#: Accuracy evaluations per pass of a walk.
EVALUATIONS_PER_PASS = 10
MLP = {"kind": "mlp", "hidden": [32]}
MLP_CLIP = 1.0


@dataclass(frozen=True)
class Row:
    """One row of the tables: its label and its overrides of the experiment's base scenario;
    ``shard`` is r = b (records per node, records per visit), 1 for one record per node."""

    label: str
    overrides: dict[str, Any] = field(default_factory=dict)
    shard: int = 1


def _private(noise: str, accounting: str) -> dict[str, Any]:
    """DP-SGD-5 with ``noise`` composed by ``accounting`` at ε = 1 (and δ where it spends δ)."""
    overrides: dict[str, Any] = {
        "learning.algorithm": "dp-sgd-5",
        "learning.noise": noise,
        "learning.accounting": accounting,
        "learning.epsilon": EPSILON,
        "learning.delta": DELTA if noise == "gaussian" else 0.0,
    }
    return overrides


NON_PRIVATE = {"learning.algorithm": "sgd", "learning.noise": "k_norm_l2", "learning.delta": 0.0}
MLP_MODEL = {"learning.model": MLP, "learning.clip": MLP_CLIP}

#: The rows of a walk experiment, in table order.
WALK_ROWS: tuple[Row, ...] = (
    Row("non-private logreg", NON_PRIVATE),
    Row("non-private mlp", {**NON_PRIVATE, "learning.model": MLP}),
    Row("paper L2 (no guarantee)", _private("l2_paper", "basic")),
    Row("k-norm basic", _private("k_norm_l2", "basic")),
    Row("gaussian basic", _private("gaussian", "basic")),
    Row("gaussian rdp", _private("gaussian", "rdp")),
    Row("gaussian rdp, b = 10", _private("gaussian", "rdp"), shard=10),
    Row("gaussian rdp, b = 100", _private("gaussian", "rdp"), shard=100),
    Row("mlp gaussian rdp, b = 10", {**_private("gaussian", "rdp"), **MLP_MODEL}, shard=10),
    Row("mlp gaussian rdp, b = 100", {**_private("gaussian", "rdp"), **MLP_MODEL}, shard=100),
)
#: The rows of the gossip-learning experiment (one record per node).
GOSSIP_ROWS: tuple[Row, ...] = (
    Row("non-private logreg", NON_PRIVATE),
    Row("k-norm basic", _private("k_norm_l2", "basic")),
    Row("gaussian rdp", _private("gaussian", "rdp")),
)
#: The two rows whose margin on Adult analysis/README.md states (one record per node, DP-SGD-5), and
#: the seeds they run at least (more than the other rows: the margin's standard error).
MARGIN_ROWS = ("gaussian rdp", "k-norm basic")
MARGIN_REPS = 20


def rows_of(name: str) -> tuple[Row, ...]:
    """The rows of experiment ``name``."""
    return GOSSIP_ROWS if name == "gossip" else WALK_ROWS


def shard_overrides(training_rows: int, shard: int) -> dict[str, Any]:
    """Shards of ``shard`` records, one visit stepping on all of them (b = r): the nodes are
    the whole shards of the training rows, and the walk's duration (1 s steps) and
    evaluation interval keep ten passes over the nodes with ten evaluations each."""
    nodes = training_rows // shard
    return {
        "nodes": nodes,
        "duration": float(PASSES * nodes),
        "learning.records_per_node": shard,
        "learning.batch": shard,
        "learning.evaluate_every": max(1, nodes // EVALUATIONS_PER_PASS),
    }


def points(name: str, reps: int) -> list[SweepPoint]:
    """The runs of experiment ``name``: each row of :func:`rows_of` × seeds 1..reps (the
    :data:`MARGIN_ROWS` on Adult: 1..max(reps, :data:`MARGIN_REPS`))."""
    training_rows = load_scenario(BASES[name]).nodes  # one record per node in the base
    listed = []
    for row in rows_of(name):
        overrides = dict(row.overrides)
        if row.shard > 1:
            overrides.update(shard_overrides(training_rows, row.shard))
        label = f"{row.label}: {describe(overrides)}"
        seeds = max(reps, MARGIN_REPS) if name == "adult" and row.label in MARGIN_ROWS else reps
        listed.extend(SweepPoint(overrides, seed, label) for seed in range(1, seeds + 1))
    return listed


def plan(name: str, reps: int = DEFAULT_REPS) -> SweepPlan:
    """The sweep ``private-learning-<name>`` (every point validated)."""
    return plan_points(BASES[name], points(name, reps), name=f"private-learning-{name}")


#: The columns :func:`reduce_run` writes (one row per run).
COLUMNS = (
    "experiment", "dataset", "learner", "row", "model", "mechanism", "algorithm", "accounting",
    "records_per_node", "batch", "nodes", "epsilon", "delta", "seed", "final_accuracy",
    "visits", "updates", "refused", "epsilon_spent", "delta_spent", "guarantee",
    "composition", "privacy_unit", "noise_multiplier", "majority_accuracy",
    "centralised_accuracy", "central_dp_accuracy",
)  # fmt: skip


def row_label(directory: Path) -> str:
    """The row a run directory of a sweep belongs to: its point's label in the sweep's
    ``plan.parquet`` (``"<row>: <overrides>"``, :func:`points`)."""
    return planned_label(directory, "private-learning").split(": ", 1)[0]


def reduce_run(name: str, directory: Path) -> pd.DataFrame:
    """One run directory as one row of :data:`COLUMNS`: its configuration, final test
    accuracy (:func:`netsim.analysis.learning.final_accuracy`), the ``learning_summary`` (the
    worst record's ε and δ, the yardsticks) and the Gaussian's noise multiplier σ/Δ (the
    ledger's median; NaN for other noise)."""
    tables = load_run(directory, parameters=False)
    scenario = load_run_scenario(directory)
    learning = scenario.learning
    assert learning is not None
    summary = tables["learning_summary"].iloc[0]
    ledger = tables.get("privacy_ledger")
    gaussian = (
        ledger is not None and len(ledger) and ledger["mechanism"].str.startswith("gaussian").all()
    )
    multiplier = (
        float((ledger["noise_scale"] / ledger["sensitivity"]).median()) if gaussian else math.nan
    )
    private = learning.algorithm != "sgd"
    model = learning.model if isinstance(learning.model, str) else learning.model.kind
    row = {
        "experiment": name,
        "dataset": learning.dataset.name,
        "learner": "gossip" if scenario.gossip_learning is not None else "walk",
        "row": row_label(directory),
        "model": model,
        "mechanism": str(getattr(learning.noise, "kind", learning.noise)) if private else "none",
        "algorithm": learning.algorithm,
        "accounting": learning.accounting if private else "—",
        "records_per_node": learning.records_per_node,
        "batch": learning.batch,
        "nodes": scenario.nodes,
        "epsilon": learning.epsilon if private else math.inf,
        "delta": learning.delta if private else 0.0,
        "seed": scenario.seed,
        "final_accuracy": final_accuracy(tables),
        "visits": int(summary["visits"]),
        "updates": int(summary["updates"]),
        "refused": int(summary["refused"]),
        "epsilon_spent": float(summary["epsilon"]),
        "delta_spent": float(summary["delta"]),
        "guarantee": str(summary["guarantee"]),
        "composition": str(summary["composition"]),
        "privacy_unit": str(summary["privacy_unit"]),
        "noise_multiplier": multiplier,
        "majority_accuracy": float(summary["majority_accuracy"]),
        "centralised_accuracy": float(summary["centralised_accuracy"]),
        "central_dp_accuracy": float(summary["central_dp_accuracy"]),
    }
    return pd.DataFrame([row], columns=list(COLUMNS))


def results_file(name: str) -> Path:
    return RESULTS / f"private-learning-{name}.parquet"


@functools.cache
def pure_central_dp(name: str, mechanism: str, epsilon: float) -> float:
    """The pure-ε central-DP yardstick of experiment ``name``'s rows with ``mechanism`` (whose
    norm decides the pre-processing): output perturbation's mean test accuracy over its
    :data:`~netsim.learning.central_dp.FINAL_DRAWS` noise draws, computed as runs do now
    (runs reduced before recorded one draw's)."""
    from netsim.learning.central_dp import central_dp_baseline
    from netsim.learning.sgd_agent import learning_data

    def compute() -> float:
        scenario = load_scenario(BASES[name], [f"learning.noise={mechanism}"])
        assert scenario.learning is not None
        data = learning_data(scenario.learning, 1)
        return central_dp_baseline(
            data.x_train, data.y_train, data.x_test, data.y_test, epsilon=epsilon, delta=0.0
        ).accuracy

    key = (
        f"central DP, {BASES[name].relative_to(REPO)} with learning.noise={mechanism}, "
        f"ε={epsilon:g}, δ=0"
    )
    return stored_yardstick(key, compute)


def run(names: Sequence[str], runner: SweepRunner, reps: int = DEFAULT_REPS) -> int:
    """Run the sweeps of ``names`` and write one per-run table each; the failed runs."""
    return run_experiments(
        names, runner,
        plan=lambda name: plan(name, reps), reduce=reduce_run, results=results_file,
    )  # fmt: skip


def load_results(names: Sequence[str] = EXPERIMENTS) -> pd.DataFrame:
    """The per-run tables of ``names`` that exist, concatenated in experiment order."""
    return load_result_tables(names, results_file, "private_learning.py")


# --- tables -------------------------------------------------------------------------------------

MECHANISM_LABELS = {
    "none": "none",
    "l2_paper": "L2 (paper)",
    "k_norm_l2": "K-norm L2",
    "gaussian": "Gaussian",
}


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (experiment, row) in table order: the configuration, final accuracy mean,
    s.d. and n over seeds, mean updates, the largest ε and δ spent by any record in any run,
    the guarantee, the noise multiplier and the yardsticks' means."""
    order = {(n, row.label): i for n in EXPERIMENTS for i, row in enumerate(rows_of(n))}
    keys = ["experiment", "row"]
    first = runs.groupby(keys, sort=False).first()
    grouped = runs.groupby(keys, sort=False)
    table = first[
        ["dataset", "learner", "model", "mechanism", "accounting", "records_per_node", "batch",
         "epsilon", "delta", "guarantee", "composition"]
    ].assign(
        accuracy=grouped["final_accuracy"].mean(),
        sd=grouped["final_accuracy"].std(),
        n=grouped["final_accuracy"].count(),
        updates=grouped["updates"].mean(),
        epsilon_spent=grouped["epsilon_spent"].max(),
        delta_spent=grouped["delta_spent"].max(),
        noise_multiplier=grouped["noise_multiplier"].mean(),
        majority=grouped["majority_accuracy"].mean(),
        centralised=grouped["centralised_accuracy"].mean(),
        central_dp=grouped["central_dp_accuracy"].mean(),
    )  # fmt: skip
    table = table.reset_index()
    # the pure-ε yardstick as runs compute it now: the mean of several draws, not one
    pure = (table["delta"] == 0) & table["central_dp"].notna()
    table.loc[pure, "central_dp"] = [
        pure_central_dp(e, m, float(eps))
        for e, m, eps in zip(table.loc[pure, "experiment"], table.loc[pure, "mechanism"],
                             table.loc[pure, "epsilon"], strict=True)
    ]  # fmt: skip
    rank = [
        (EXPERIMENTS.index(e), order.get((e, r), len(order)))
        for e, r in zip(table["experiment"], table["row"], strict=True)
    ]
    return table.iloc[sorted(range(len(table)), key=rank.__getitem__)].reset_index(drop=True)


def _number(value: float, digits: int = 3) -> str:
    return "—" if not math.isfinite(value) else f"{value:.{digits}f}"


def _spent(row: pd.Series) -> str:
    """ε (and δ) spent by the worst record; the paper's L2 rows carry only a nominal ε."""
    if row["mechanism"] == "none":
        return "—"
    if row["guarantee"] == "none":
        return f"{row['epsilon_spent']:.3g} nominal, no guarantee"
    spent = f"{row['epsilon_spent']:.3g}"
    return spent + (f", δ {row['delta_spent']:.2g}" if row["delta_spent"] > 0 else "")


def markdown_table(summary: pd.DataFrame) -> str:
    """The rows of ``summary`` (:func:`summarise`) as a Markdown table."""
    header = (
        "| data set | learner | model | mechanism | accounting | r / b | ε | δ | final accuracy "
        "(n) | updates | ε spent (worst record) | σ/Δ | majority | centralised | central DP |"
    )
    lines = [header, "|" + "---|" * 15]
    for _, row in summary.iterrows():
        private = row["mechanism"] != "none"
        epsilon = f"{row['epsilon']:g}" if private else "—"
        if private and row["guarantee"] == "none":
            epsilon += " (nominal)"
        delta = f"{row['delta']:g}" if private else "—"
        sd = "" if not math.isfinite(row["sd"]) else f" ± {row['sd']:.3f}"
        lines.append(
            "| " + " | ".join([
                row["dataset"], row["learner"], row["model"],
                MECHANISM_LABELS.get(row["mechanism"], row["mechanism"]),
                row["accounting"] if private else "—",
                f"{row['records_per_node']} / {row['batch']}", epsilon, delta,
                f"{row['accuracy']:.3f}{sd} ({row['n']})", f"{row['updates']:,.0f}",
                _spent(row), _number(row["noise_multiplier"], 2),
                _number(row["majority"]), _number(row["centralised"]),
                _number(row["central_dp"]),
            ]) + " |"
        )  # fmt: skip
    return "\n".join(lines)


@dataclass(frozen=True)
class Margin:
    """The difference of two rows' mean final accuracy over seeds: its standard error
    (unpaired, Welch), the paired one over the seeds both rows ran (same walk order), and
    the Welch t-test's two-sided p value."""

    lead: str
    behind: str
    difference: float
    standard_error: float
    paired_standard_error: float
    p_value: float
    n: tuple[int, int]


def margin(runs: pd.DataFrame, experiment: str, lead: str, behind: str) -> Margin:
    """:class:`Margin` of row ``lead`` over row ``behind`` in ``experiment``'s runs."""
    of = runs[runs["experiment"] == experiment]
    a = of[of["row"] == lead].set_index("seed")["final_accuracy"]
    b = of[of["row"] == behind].set_index("seed")["final_accuracy"]
    if len(a) < 2 or len(b) < 2:
        raise NetsimError(f"{experiment}: need two seeds of {lead!r} and {behind!r}")
    se = math.sqrt(a.var() / len(a) + b.var() / len(b))
    both = a.index.intersection(b.index)
    paired = (a[both] - b[both]).std() / math.sqrt(len(both))
    test = stats.ttest_ind(a, b, equal_var=False)
    return Margin(
        lead, behind, float(a.mean() - b.mean()), se, float(paired), float(test.pvalue),
        (len(a), len(b)),
    )  # fmt: skip


def margin_text(found: Margin, dataset: str) -> str:
    """One sentence stating :class:`Margin` ``found``."""
    return (
        f"On {dataset}, `{found.lead}` leads `{found.behind}` by "
        f"**{found.difference:+.3f} ± {found.standard_error:.3f}** (difference of the means "
        f"± its standard error over n = {found.n[0]} and {found.n[1]} seeds; paired by seed "
        f"± {found.paired_standard_error:.3f}; Welch's t-test p = {found.p_value:.2g})."
    )


def generated_tables(runs: pd.DataFrame | None = None) -> dict[str, str]:
    """The generated blocks of analysis/README.md's private-learning section, from the
    committed per-run tables: one table per experiment and the margin on Adult."""
    runs = load_results() if runs is None else runs
    summary = summarise(runs)
    out = {
        f"private-learning-{name}": markdown_table(summary[summary["experiment"] == name])
        for name in EXPERIMENTS
        if (summary["experiment"] == name).any()
    }
    if (runs["experiment"] == "adult").any():
        out["private-learning-margin"] = margin_text(margin(runs, "adult", *MARGIN_ROWS), "Adult")
    return out


# --- figure -------------------------------------------------------------------------------------

#: The yardsticks drawn dashed, with their colours.
YARDSTICKS = (
    ("majority", "majority class", "0.55"),
    ("centralised", "centralised non-private", "black"),
    ("central_dp_gaussian", f"central DP, ε = 1, δ = {DELTA:g} (DP-GD)", "tab:blue"),
    ("central_dp_pure", "central DP, ε = 1, δ = 0 (output perturbation)", "tab:orange"),
)


def draw(runs: pd.DataFrame, out: Path = FIGURE) -> Path:
    """Final test accuracy per row (mean ± s.d. over seeds, each seed a dot), one panel per
    experiment, with the yardsticks as dashed vertical lines."""
    plt = pyplot()
    summary = summarise(runs)
    names = [n for n in EXPERIMENTS if (summary["experiment"] == n).any()]
    heights = [len(summary[summary["experiment"] == n]) for n in names]
    fig, axes = plt.subplots(
        len(names), 1, figsize=(9.5, 1.1 + 0.42 * sum(heights) + 1.1 * len(names)),
        gridspec_kw={"height_ratios": heights}, squeeze=False,
    )  # fmt: skip
    for ax, name in zip(axes[:, 0], names, strict=True):
        rows = summary[summary["experiment"] == name].reset_index(drop=True)
        of = runs[runs["experiment"] == name]
        y = np.arange(len(rows))[::-1]
        for position, (_, row) in zip(y, rows.iterrows(), strict=True):
            seeds = of[of["row"] == row["row"]]["final_accuracy"]
            colour = "tab:red" if row["guarantee"] == "none" else (
                "0.3" if row["mechanism"] == "none" else "tab:green"
            )  # fmt: skip
            ax.scatter(seeds, np.full(len(seeds), position), s=9, color=colour, alpha=0.45)
            ax.errorbar(
                row["accuracy"], position, xerr=0 if not math.isfinite(row["sd"]) else row["sd"],
                fmt="o", color=colour, capsize=3, ms=6,
            )  # fmt: skip
        gaussian = rows[rows["mechanism"] == "gaussian"]
        pure = rows[rows["mechanism"].isin(["k_norm_l2"])]
        levels = {
            "majority": rows["majority"].mean(),
            "centralised": rows["centralised"].mean(),
            "central_dp_gaussian": gaussian["central_dp"].mean() if len(gaussian) else math.nan,
            "central_dp_pure": pure["central_dp"].mean() if len(pure) else math.nan,
        }
        for key, label, colour in YARDSTICKS:
            if math.isfinite(levels[key]):
                ax.axvline(levels[key], ls="--", lw=1.2, color=colour, label=label)
        ax.set_yticks(y)
        ax.set_yticklabels(rows["row"])
        dataset = rows["dataset"].iloc[0]
        learner = "gossip learning, 100 s" if name == "gossip" else "ideal walk, 10 passes"
        ax.set_title(f"{dataset}: {learner}, ε = 1 per record", fontsize=10)
        ax.set_xlabel("final test accuracy (fraction correct)")
        ax.set_ylabel("configuration")
        ax.set_xlim(0.3, 1.0)
        ax.grid(axis="x", alpha=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.suptitle(
        "Final test accuracy, DP-SGD-5 at ε = 1 per record: mean ± s.d. over seeds (dots: seeds)\n"
        "green: DP guarantee; grey: non-private; red: the paper's L2 (nominal ε, no guarantee)",
        fontsize=10,
    )  # fmt: skip
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    return save_figure(fig, out)


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
    commands.add_parser("figures", help="draw analysis/figures/private-learning.png")
    args = parser.parse_args(argv)

    def act() -> int:
        if args.command == "run":
            return 1 if run(args.only, runner_from(args), args.reps) else 0
        if args.command == "figures":
            print(draw(load_results()))
            return 0
        found = generated_tables()
        for name, table in found.items():
            print(f"\n<!-- {name} -->\n{table}")
        if args.readme:
            write_readme_tables(found)
        return 0

    return guarded("private_learning", act)


if __name__ == "__main__":
    sys.exit(main())
