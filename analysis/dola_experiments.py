"""Run the experiments of Li et al. (DOLA; arXiv 2017 §6, TKDE 2018 §7) and draw them.

    python analysis/dola_experiments.py run [--jobs 2 | --scheduler ADDRESS] [--out DIR]
                                            [--only NAME ...]
    python analysis/dola_experiments.py figures
    python analysis/dola_experiments.py tables [--readme]

Experiments (all on the simulated network, synchronous and loss-free as in the papers, hinge
loss, step 1/(λt) with λ = 1, W the unit L2 ball; ``scenarios/dola/synthetic.yaml`` is the
base: 100,000 points in the unit ball of R^10, 64 nodes on a random geometric graph, each node
talking to half its neighbours per round, 1,000 rounds):

=============  ===========================================================================
``epsilon``    regret vs ε: non-private, ε = 1, 0.1, 0.01 (Alg. 1, Laplace) and the (ε, δ)
               Gaussian of TKDE Alg. 2 (J² as printed, and analytic), 3 seeds (arXiv Fig. 1a,
               TKDE Fig. 3a-b); also consensus and the averaged iterate (TKDE Fig. 6a, 6c)
``nodes``      regret vs nodes 1, 4, 64 at ε = 0.1, 3 seeds (arXiv Fig. 1c)
``batch``      regret vs batch size h = 1, 5 at ε = 0.1 and non-private, 10 seeds: mean and
               spread (arXiv Fig. 2, TKDE Fig. 6b)
``topology``   regret vs three random geometric topologies (radius 0.2, 0.35, 0.8: mean
               degree about 6, 17 and 45) at ε = 1, Alg. 1 and Alg. 2, 3 seeds whose
               topology has no isolated node (TKDE Fig. 3c-d)
``datasets``   regret on Adult and Spambase (pre-processed as ``docs/papers.md`` says) vs
               synthetic, ε = 0.1
               and 1, 3 seeds (TKDE Fig. 4; Adult needs ../shared/data)
``table3``     test accuracy for ε = 1, 0.1, 0.01 and non-private × nodes 1, 4, 64 on sparse
               synthetic data standing in for RCV1 (n = 47,236, 75 non-zeros per row, 20,242
               rows, 3/4 for training), one pass over the training data, λ = 0.01 (TKDE
               Table 3)
``sparsity``   accuracy vs sparsity of Alg. 3 on sparse synthetic data standing in for
               real-sim (n = 20,958), ρ swept, three topologies without noise (ε = ∞) and the
               middle one at ε = 1, one pass, λ = 0.01 (TKDE Fig. 5a)
=============  ===========================================================================

Each experiment is a sweep of :mod:`netsim.sweep` (:func:`plan`: the base scenario named
``dola-<experiment>`` and one listed point per configuration and seed, each run with exactly
that seed). ``run`` runs it on ``--jobs`` local processes or a Dask cluster into the sweep
directory ``<--out>/dola-<experiment>/`` (default ``analysis/sweeps``; runs already complete
there are kept, so ``run`` resumes), reduces the run directories into
``analysis/results/dola-<experiment>.parquet`` (atomically) and ``figures`` draws
``analysis/figures/dola-*.png`` from them and prints the tables in Markdown. ``tables`` prints
the tables analysis/README.md shows (:func:`generated_tables`) and with ``--readme`` writes
them into its generated blocks (``figures`` writes them too).

The tables show three yardsticks per row on the row's own train/test split: the majority
class and the centralised non-private model (each run's ``dola_summary``), and central DP at
the row's stated (ε, δ) (:mod:`netsim.learning.central_dp`). Runs reduced before DOLA's
summary recorded the last carry only the first two, so the script computes it
(:func:`central_dp_accuracy`) on the split that ``netsim.algorithms.dola.rounds.dola_data``
loads for each private run of :func:`plan`, once per (data, ε, δ), and keeps it per run in
``analysis/results/dola-central-dp.parquet`` (:func:`update_central_dp`, called by ``tables``
and ``figures`` for the runs it lacks), which the tables read.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from experiments import (
    SweepRunner,
    describe,
    experiment_main,
    run_experiments,
    write_readme_tables,
    write_results,
)

from netsim.algorithms.dola.config import DolaConfig
from netsim.algorithms.dola.rounds import dola_data
from netsim.analysis import load_run, load_run_scenario
from netsim.analysis.dola_figures import (
    DOLA_COLUMNS,
    configuration,
    curve_figure,
    dola_curves,
    final_values,
    sparsity_figure,
)
from netsim.errors import NetsimError
from netsim.learning.central_dp import FINAL_DRAWS, central_dp_baseline
from netsim.network.topology import random_geometric
from netsim.rng import RandomStreams
from netsim.scenario.loader import load_scenario
from netsim.scenario.schema import Scenario
from netsim.sweep import SweepPlan, SweepPoint, plan_points

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "scenarios" / "dola" / "synthetic.yaml"
RESULTS = REPO / "analysis" / "results"
FIGURES = REPO / "analysis" / "figures"
SHARED = REPO.parent / "shared" / "data"
ADULT = SHARED / "uci" / "adult-complete-rows.csv"
RCV1_LIKE = {"examples": 20242, "features": 47236, "nonzeros": 75, "relevant": 500}
REAL_SIM_LIKE = {"examples": 20000, "features": 20958, "nonzeros": 50, "relevant": 500}
#: A run's final values kept in its curve rows. The ``accuracy_*`` are of the internal
#: iterates, which the privacy guarantee does not cover; the ``accuracy_released_*`` of the
#: released models, which it covers (``DolaLearner.released_models``), and of the average of
#: the nodes' projected mixes of released values, also covered (``DolaLearner.mixed_models``).
SUMMARY_COLUMNS = (
    "accuracy_averaged", "accuracy_mean", "accuracy_node", "sparsity_node",
    "accuracy_released_averaged", "accuracy_released_mean", "accuracy_released_node",
    "accuracy_released_mixed_averaged",
)  # fmt: skip


def base_spec() -> dict[str, Any]:
    """The base scenario as a plain dictionary."""
    return load_scenario(BASE).model_dump(mode="json", exclude_none=True)


def experiment_base(name: str) -> dict[str, Any]:
    """The base scenario of experiment ``name``: regret at 16 checkpoints, named after it."""
    base = base_spec()
    base["name"] = f"dola-{name}"
    base["dola"]["regret_checkpoints"] = 16
    return base


#: The passes the data-set experiment allows (Spambase on 64 nodes needs 16 in 1,000 rounds).
DATASET_PASSES = 25
#: R and λ chosen by the ``tuning`` experiment (the defaults of ``dola.radius`` and
#: ``dola.strong_convexity``), set explicitly where the base scenario has the unit ball's.
DEFAULT_SHAPE = {
    f"dola.{key}": DolaConfig.model_fields[key].default for key in ("radius", "strong_convexity")
}


#: The tuning grid (``tuning``): ball radii R, step constants λ of α_t = 1/(λt), the share of
#: the training rows held out for validation, and the rounds of each run.
TUNING_RADII = (1.0, 3.0, 10.0, 30.0, 100.0)
TUNING_STRONG_CONVEXITY = (1.0, 0.1, 0.01, 0.001, 0.0001)
TUNING_VALIDATION = 0.2
TUNING_ROUNDS = 400


def real_datasets(validation: float | None = None) -> list[dict[str, Any]]:
    """The ``dola.data`` sections of the real binary data sets: Adult (if ../shared/data is
    there), Spambase and breast cancer (bundled); with ``validation``, evaluated on that share
    of the training rows instead of the test split."""
    sets: list[dict[str, Any]] = [{"name": "spambase"}, {"name": "breast_cancer"}]
    if ADULT.is_file():
        sets.insert(0, {"name": "adult", "path": str(ADULT)})
    if validation is not None:
        sets = [{**data, "validation": validation} for data in sets]
    return sets


def training_rows(examples: int) -> int:
    """Training rows of a generated data set: the test split is round(0.25 · examples) rows
    (``netsim.learning.online_data``)."""
    return examples - math.floor(0.25 * examples + 0.5)


def points(name: str, base: dict[str, Any]) -> list[SweepPoint]:
    """The runs of experiment ``name``: dotted-key overrides of ``base`` and a seed each."""
    out: list[SweepPoint] = []

    def add(overrides: dict[str, Any], seeds: Sequence[int]) -> None:
        out.extend(SweepPoint(overrides, seed, describe(overrides)) for seed in seeds)

    if name == "epsilon":
        add({"dola.algorithm": "non_private"}, range(1, 4))
        for eps in (1.0, 0.1, 0.01):
            add({"dola.epsilon": eps}, range(1, 4))
            # the analytic calibration: J² as printed spends more than the stated ε (refused)
            add({"dola.algorithm": "gaussian", "dola.epsilon": eps}, range(1, 4))
    elif name == "nodes":
        for m in (1, 4, 64):
            topology = {"kind": "complete"} if m < 64 else base["topology"]
            add({"nodes": m, "topology": topology}, range(1, 4))
    elif name == "batch":
        for h in (1, 5):
            # T·h = 5,000 examples per node cycle through a shard of ~1,171 five times: each
            # release gets ε/5, so h = 1 and h = 5 both spend the stated ε per example
            add({"dola.batch": h, "dola.max_passes": h}, range(1, 11))
            add({"dola.batch": h, "dola.algorithm": "non_private"}, range(1, 11))
    elif name == "topology":
        for radius in (0.2, 0.35, 0.8):
            topology = {"kind": "random_geometric", "radius": radius}
            seeds = connected_seeds(base["nodes"], radius, 3)
            for algorithm in ("laplace", "gaussian"):
                add(
                    {"topology": topology, "dola.algorithm": algorithm, "dola.epsilon": 1.0},
                    seeds,
                )
    elif name == "datasets":
        sets: list[dict[str, Any]] = [{"name": "spambase"}, dict(base["dola"]["data"])]
        if ADULT.is_file():
            sets.insert(0, {"name": "adult", "path": str(ADULT)})
        for data in sets:
            # the data set's validated R and λ (the defaults) for real data, the unit ball's
            # for the synthetic set (the base scenario's)
            # (four regret checkpoints on real data: at R = 30 the hindsight solver needs
            # about 6 s per checkpoint on Adult, whose optimum lies inside the ball)
            shape = (
                {} if data["name"] == "synthetic_ball"
                else {**DEFAULT_SHAPE, "dola.regret_checkpoints": 4}
            )  # fmt: skip
            add({"dola.data": data, "dola.algorithm": "non_private", **shape}, range(1, 4))
            for eps in (1.0, 0.1):
                # 1,000 rounds cycle through the small shards of Adult (3 passes on 64 nodes)
                # and Spambase (16): each release gets ε/passes of the stated budget
                add(
                    {"dola.data": data, "dola.epsilon": eps, "dola.max_passes": DATASET_PASSES,
                     **shape},
                    range(1, 4),
                )  # fmt: skip
    elif name == "tuning":
        # R and λ chosen on a validation split of the training rows (never the test set):
        # non-private DOLA, 400 rounds, every real binary data set
        for data in real_datasets(validation=TUNING_VALIDATION):
            for radius in TUNING_RADII:
                for strong in TUNING_STRONG_CONVEXITY:
                    add({
                        "dola.data": data, "dola.algorithm": "non_private",
                        "dola.radius": radius, "dola.strong_convexity": strong,
                        "duration": float(TUNING_ROUNDS), "dola.regret_checkpoints": 0,
                        "dola.evaluate_every": TUNING_ROUNDS // 4,
                    }, range(1, 3))  # fmt: skip
    elif name == "table3":
        data = {"name": "synthetic_sparse", "options": RCV1_LIKE}
        train = training_rows(RCV1_LIKE["examples"])
        for m in (1, 4, 64):
            rounds = train // m  # one pass over the smallest shard: every example used once
            topology = {"kind": "complete"} if m < 64 else base["topology"]
            for eps in (None, 1.0, 0.1, 0.01):
                overrides: dict[str, Any] = {
                    "nodes": m, "topology": topology, "duration": float(rounds),
                    "dola.data": data, "dola.regret_checkpoints": 0,
                    "dola.evaluate_every": max(rounds // 20, 1), **DEFAULT_SHAPE,
                }  # fmt: skip
                if eps is None:
                    overrides["dola.algorithm"] = "non_private"
                else:
                    overrides["dola.epsilon"] = eps
                add(overrides, range(1, 2))
    elif name == "sparsity":
        data = {"name": "synthetic_sparse", "options": REAL_SIM_LIKE}
        rounds = training_rows(REAL_SIM_LIKE["examples"]) // 64  # one pass
        for radius, eps in ((0.2, math.inf), (0.35, math.inf), (0.8, math.inf), (0.35, 1.0)):
            seeds = connected_seeds(base["nodes"], radius, 1)
            for rho in (0.0, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1):
                add({
                    "topology": {"kind": "random_geometric", "radius": radius},
                    "duration": float(rounds), "dola.data": data, "dola.algorithm": "sparse",
                    "dola.epsilon": eps, "dola.sparsity": rho, "dola.regret_checkpoints": 0,
                    "dola.evaluate_every": max(rounds // 10, 1), "dola.strong_convexity": 0.01,
                    "dola.radius": 1.0,
                }, seeds)  # fmt: skip
    else:
        raise SystemExit(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")
    return out


def plan(name: str, overrides: dict[str, Any] | None = None) -> SweepPlan:
    """The sweep of experiment ``name`` (every point validated). ``overrides`` are set at every
    point after its own (e.g. ``{"duration": 20.0}`` for a short check)."""
    base = experiment_base(name)
    listed = points(name, base)
    if overrides:
        listed = [SweepPoint({**p.overrides, **overrides}, p.seed, p.label) for p in listed]
    return plan_points(base, listed, base_dir=REPO, source=BASE)


def connected_seeds(nodes: int, radius: float, count: int) -> list[int]:
    """The first ``count`` seeds ≥ 1 whose random geometric topology is connected (DOLA
    refuses isolated nodes, and Assumption 2 needs a connected union of round graphs)."""
    seeds: list[int] = []
    seed = 0
    while len(seeds) < count:
        seed += 1
        streams = RandomStreams(seed)
        graph = random_geometric(nodes, radius, streams.integer_seed("topology"))
        if graph.is_connected():
            seeds.append(seed)
    return seeds


EXPERIMENTS = ("tuning", "epsilon", "nodes", "batch", "topology", "datasets", "table3", "sparsity")


def reduce_run(name: str, directory: Path) -> pd.DataFrame:
    """One run directory's curve rows, with the final accuracies and sparsity of its summary."""
    return run_curves(load_run(directory, parameters=False), load_run_scenario(directory))


def run_curves(tables: dict[str, pd.DataFrame], scenario: Scenario) -> pd.DataFrame:
    """One run's curve rows (:func:`dola_curves`) with its summary's final values, R and λ,
    the ε and δ its ledger spent, and the yardsticks on its split."""
    curves = dola_curves(tables, scenario)
    summary = tables["dola_summary"].iloc[0]
    for column in SUMMARY_COLUMNS:
        if column in summary.index:  # runs recorded before the released models' columns
            curves[f"final_{column}"] = summary[column]
    curves["radius"] = scenario.dola.radius
    curves["strong_convexity"] = scenario.dola.strong_convexity
    # the ε (and δ) the ledger spent per example, beside the stated budget ``epsilon``
    curves["epsilon_spent"] = summary["epsilon_spent_max"]
    curves["delta_spent"] = summary["delta_spent_max"]
    for column in ("majority_accuracy", "centralised_accuracy", "central_dp_accuracy"):
        if column in summary.index:  # central DP: runs recorded since dola_summary has it
            curves[column] = summary[column]
    return curves


def results_file(name: str) -> Path:
    return RESULTS / f"dola-{name}.parquet"


# --- the central-DP yardstick of runs reduced before dola_summary recorded it -----------------

#: The central-DP yardstick of every private run of :data:`CENTRAL_DP_EXPERIMENTS`: one row per
#: run (:data:`CENTRAL_DP_COLUMNS`), keyed like the results by :data:`RUN_KEY`.
CENTRAL_DP = RESULTS / "dola-central-dp.parquet"
#: The experiments whose README tables show the central-DP yardstick.
CENTRAL_DP_EXPERIMENTS = ("epsilon", "batch", "nodes", "topology", "datasets", "table3")
#: What identifies a run in a results table: its configuration columns and seed.
RUN_KEY = [*DOLA_COLUMNS, "seed"]
CENTRAL_DP_COLUMNS = (
    "experiment", *RUN_KEY, "data", "stated_epsilon", "stated_delta", "central_dp_accuracy",
    "pure_draws",
)  # fmt: skip
#: The yardstick per (data key, ε, δ) computed or read in this process: computed once each.
_CENTRAL_DP_CACHE: dict[tuple[str, float, float], float] = {}


def data_key(dola: DolaConfig) -> str:
    """The run's ``dola.data`` section as canonical JSON, a file path relative to the
    repository: runs with equal keys load the same train/test split (the split depends on the
    section, never on the run's seed)."""
    data = dola.data.model_dump(mode="json", exclude_none=True)
    if "path" in data:
        data["path"] = os.path.relpath(data["path"], REPO)
    return json.dumps(data, sort_keys=True)


def stated_budget(dola: DolaConfig) -> tuple[float, float]:
    """The (ε, δ) per example a private run states, as its own ``dola_summary`` takes it for
    the yardstick: δ only where the releases spend it (Alg. 2's Gaussian), else 0."""
    return dola.epsilon, dola.delta if dola.spends_delta else 0.0


def central_dp_accuracy(dola: DolaConfig) -> float:
    """Test accuracy of centrally private logistic regression
    (:func:`netsim.learning.central_dp.central_dp_baseline`) on the split a run with section
    ``dola`` loads (``dola_data``, as the run does) at its :func:`stated_budget`; computed
    once per (:func:`data_key`, ε, δ) in this process."""
    epsilon, delta = stated_budget(dola)
    key = (data_key(dola), epsilon, delta)
    if key not in _CENTRAL_DP_CACHE:
        data = dola_data(dola)
        _CENTRAL_DP_CACHE[key] = central_dp_baseline(
            data.x_train, data.y_train, data.x_test, data.y_test, epsilon=epsilon, delta=delta
        ).accuracy
    return _CENTRAL_DP_CACHE[key]


def central_dp_rows(name: str) -> pd.DataFrame:
    """One row of :data:`CENTRAL_DP_COLUMNS` per private run of experiment ``name``'s plan."""
    rows = []
    for planned in plan(name).runs:
        dola = planned.scenario.dola
        if dola is None or not dola.private:
            continue
        epsilon, delta = stated_budget(dola)
        rows.append({
            "experiment": name, **configuration(planned.scenario), "seed": planned.seed,
            "data": data_key(dola), "stated_epsilon": epsilon, "stated_delta": delta,
            "central_dp_accuracy": central_dp_accuracy(dola),
            "pure_draws": FINAL_DRAWS if delta == 0 else 0,
        })  # fmt: skip
    return pd.DataFrame(rows, columns=list(CENTRAL_DP_COLUMNS))


def load_central_dp() -> pd.DataFrame:
    """The committed yardstick table (empty when there is none)."""
    if not CENTRAL_DP.is_file():
        return pd.DataFrame(columns=list(CENTRAL_DP_COLUMNS))
    return pd.read_parquet(CENTRAL_DP)


def _private_runs(curves: pd.DataFrame) -> pd.DataFrame:
    """The :data:`RUN_KEY` of every private run of a results table."""
    runs = curves.drop_duplicates(RUN_KEY)[RUN_KEY]
    return runs[(runs["algorithm"] != "non_private") & runs["epsilon"].map(math.isfinite)]


def _carries_central_dp(curves: pd.DataFrame) -> bool:
    """Whether every private run of a results table carries its own central-DP yardstick
    (reduced from runs whose ``dola_summary`` records it)."""
    if "central_dp_accuracy" not in curves:
        return False
    private = (curves["algorithm"] != "non_private") & curves["epsilon"].map(math.isfinite)
    return bool(curves.loc[private, "central_dp_accuracy"].notna().all())


def _lacking(curves: pd.DataFrame, yardsticks: pd.DataFrame) -> pd.DataFrame:
    """The private runs of ``curves`` that ``yardsticks`` has no central-DP row for."""
    found = _private_runs(curves).merge(
        yardsticks[RUN_KEY].drop_duplicates(), on=RUN_KEY, how="left", indicator=True
    )
    return found[found["_merge"] == "left_only"][RUN_KEY]


def update_central_dp(names: Sequence[str] = CENTRAL_DP_EXPERIMENTS) -> pd.DataFrame:
    """The yardstick table, with the rows of every experiment among ``names`` whose results
    have a private run it lacks recomputed from :func:`plan` and written; a value the table
    holds for a (data, ε, δ) is reused, not computed again."""
    table = load_central_dp()
    # pure-ε yardsticks made with another number of noise draws (one, before the mean of
    # FINAL_DRAWS) are stale: their experiments are computed again
    draws = table["pure_draws"] if "pure_draws" in table else pd.Series(-1, index=table.index)
    stale = (table["stated_delta"] == 0) & (draws != FINAL_DRAWS)
    table = table[~table["experiment"].isin(table.loc[stale, "experiment"])]
    for row in table.itertuples(index=False):
        _CENTRAL_DP_CACHE.setdefault(
            (row.data, row.stated_epsilon, row.stated_delta), row.central_dp_accuracy
        )
    changed = False
    for name in names:
        curves = _load(name)
        of = table[table["experiment"] == name]
        if curves is None or _carries_central_dp(curves) or _lacking(curves, of).empty:
            continue
        print(f"dola-{name}: the central-DP yardstick of its private runs", flush=True)
        rows = central_dp_rows(name)
        missing = _lacking(curves, rows)
        if not missing.empty:
            raise NetsimError(
                f"dola-{name}: {len(missing)} private runs of {results_file(name)} are not in "
                f"the experiment's plan (first: {missing.iloc[0].to_dict()})"
            )
        table = pd.concat([table[table["experiment"] != name], rows], ignore_index=True)
        changed = True
    if changed:
        write_results(table, CENTRAL_DP)
        print(f"wrote {CENTRAL_DP.relative_to(REPO)}")
    return table


def with_central_dp(curves: pd.DataFrame, yardsticks: pd.DataFrame, name: str) -> pd.DataFrame:
    """``curves`` with the column ``central_dp_accuracy`` of ``yardsticks`` per run (NaN for
    non-private runs), unless the runs carry their own; a private run without one is an error
    naming the command that adds it."""
    if _carries_central_dp(curves):
        return curves
    of = yardsticks[yardsticks["experiment"] == name]
    lacking = _lacking(curves, of)
    if not lacking.empty:
        raise NetsimError(
            f"{CENTRAL_DP}: no central-DP yardstick for {len(lacking)} private runs of "
            f"dola-{name}; `python analysis/dola_experiments.py tables` computes them"
        )
    values = of[[*RUN_KEY, "central_dp_accuracy"]]
    return curves.drop(columns="central_dp_accuracy", errors="ignore").merge(
        values, on=RUN_KEY, how="left", validate="many_to_one"
    )


def run(names: list[str], runner: SweepRunner) -> int:
    """Run the sweeps of ``names`` and write one results file per experiment; returns the
    number of failed runs."""
    return run_experiments(names, runner, plan=plan, reduce=reduce_run, results=results_file)


def _load(name: str) -> pd.DataFrame | None:
    path = results_file(name)
    return pd.read_parquet(path) if path.is_file() else None


def _markdown(table: pd.DataFrame) -> str:
    header = "| " + " | ".join(map(str, table.columns)) + " |"
    rule = "|" + "---|" * len(table.columns)
    rows = ["| " + " | ".join(_cell(v) for v in row) + " |" for row in table.itertuples(False)]
    return "\n".join([header, rule, *rows])


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "non-private" if math.isinf(value) else f"{value:.4g}"
    return str(value)


FIGURE_SPECS: list[tuple[str, str, Callable[[pd.DataFrame], pd.DataFrame], dict[str, Any]]] = [
    ("epsilon", "dola-regret-vs-epsilon.png",
     lambda c: c[c["algorithm"].isin(["laplace", "non_private"])],
     {"metric": "average_regret_per_node", "log_y": True, "varying": ["epsilon"],
      "title": "Regret vs privacy, Alg. 1 (Laplace), synthetic d = 10, 64 nodes"}),
    ("epsilon", "dola-regret-vs-epsilon-gaussian.png",
     lambda c: c[c["algorithm"].isin(["gaussian", "non_private"])],
     {"metric": "average_regret_per_node", "log_y": True,
      "varying": ["epsilon", "calibration"],
      "title": "Regret vs privacy, Alg. 2 (Gaussian, δ = 1e-5), 64 nodes"}),
    ("epsilon", "dola-consensus.png", lambda c: c[c["algorithm"] != "gaussian"],
     {"metric": "consensus", "log_y": True, "varying": ["epsilon"],
      "title": "Nodes approach each other, Alg. 1, 64 nodes"}),
    ("epsilon", "dola-averaged-iterate.png", lambda c: c[c["algorithm"] != "gaussian"],
     {"metric": "accuracy_averaged", "varying": ["epsilon"],
      "title": "Stochastic-optimisation conversion: accuracy of ŵ_t, Alg. 1"}),
    ("nodes", "dola-regret-vs-nodes.png", lambda c: c,
     {"metric": "average_regret", "log_y": True, "varying": ["nodes"],
      "title": "Regret vs nodes, ε = 0.1, synthetic d = 10"}),
    ("nodes", "dola-regret-per-node-vs-nodes.png", lambda c: c,
     {"metric": "average_regret_per_node", "log_y": True, "varying": ["nodes"],
      "title": "Regret per node vs nodes, ε = 0.1"}),
    ("batch", "dola-regret-vs-batch.png", lambda c: c,
     {"metric": "average_regret_per_node", "log_y": True, "varying": ["epsilon", "batch"],
      "title": "Regret vs mini-batch size, 64 nodes"}),
    ("topology", "dola-regret-vs-topology.png", lambda c: c[c["algorithm"] == "laplace"],
     {"metric": "average_regret_per_node", "log_y": True, "varying": ["topology"],
      "title": "Regret vs topology, Alg. 1, ε = 1, 64 nodes"}),
    ("topology", "dola-regret-vs-topology-gaussian.png",
     lambda c: c[c["algorithm"] == "gaussian"],
     {"metric": "average_regret_per_node", "log_y": True, "varying": ["topology"],
      "title": "Regret vs topology, Alg. 2 (J² printed), ε = 1, 64 nodes"}),
    ("datasets", "dola-accuracy-vs-dataset.png", lambda c: c[c["dataset"] != "synthetic_ball"],
     {"metric": "accuracy_averaged", "varying": ["dataset", "epsilon"],
      "title": "Accuracy of ŵ_t on real data, Alg. 1, 64 nodes, validated R and λ"}),
    ("datasets", "dola-regret-vs-dataset.png", lambda c: c,
     {"metric": "average_regret_per_node", "log_y": True, "varying": ["dataset", "epsilon"],
      "title": "Regret vs data set, Alg. 1, 64 nodes"}),
]  # fmt: skip


def draw() -> None:
    """Every figure whose results exist, the Markdown tables, and analysis/README.md's
    generated tables."""
    write_tables()
    for name, file, select, options in FIGURE_SPECS:
        curves = _load(name)
        if curves is None:
            continue
        path = curve_figure(select(curves), FIGURES / file, **options)
        print(f"wrote {path.relative_to(REPO)}")
    for name in ("epsilon", "nodes", "batch", "topology", "datasets"):
        curves = _load(name)
        if curves is None:
            continue
        table = final_values(curves, "average_regret_per_node")
        print(f"\n### {name}: final average regret per node R_D(T)/(mT)\n")
        print(_markdown(table[["dataset", "algorithm", "calibration", "epsilon", "nodes", "batch",
                               "topology", "mean", "std", "count"]]))  # fmt: skip
    table3 = _load("table3")
    if table3 is not None:
        last = table3.groupby(["nodes", "epsilon"], dropna=False).tail(1)
        pivot = last.pivot_table(
            index="epsilon", columns="nodes", values="final_accuracy_averaged"
        ).sort_index(ascending=False)
        mean_model = last.pivot_table(
            index="epsilon", columns="nodes", values="final_accuracy_mean"
        ).sort_index(ascending=False)
        print("\n### Table 3: test accuracy of ŵ_T (averaged iterate)\n")
        print(_markdown((100 * pivot).round(2).reset_index()))
        print("\n### Table 3: test accuracy of w̄_T (mean of the final models)\n")
        print(_markdown((100 * mean_model).round(2).reset_index()))
    sparsity = _load("sparsity")
    if sparsity is not None:
        last = sparsity.groupby(["topology", "epsilon", "sparsity_rho", "seed"]).tail(1)
        noise = last["epsilon"].map(lambda e: "no noise" if math.isinf(e) else f"ε = {e:g}")
        points = pd.DataFrame({
            "topology": last["topology"] + ", " + noise, "sparsity_rho": last["sparsity_rho"],
            "seed": last["seed"], "sparsity": last["final_sparsity_node"],
            "accuracy": last["final_accuracy_node"],
        })  # fmt: skip
        path = sparsity_figure(
            points, FIGURES / "dola-accuracy-vs-sparsity.png",
            title="Alg. 3: accuracy vs sparsity, real-sim-like data (n = 20,958), 64 nodes",
        )  # fmt: skip
        print(f"wrote {path.relative_to(REPO)}")
        print("\n### Accuracy vs sparsity (Alg. 3)\n")
        print(_markdown(points.drop(columns="seed").round(4)))


# --- tables generated into analysis/README.md -------------------------------------------------

#: Configuration columns of a results table (one row per run and logged round).
CONFIG = ["dataset", "algorithm", "calibration", "epsilon", "nodes", "batch", "topology",
          "radius", "strong_convexity"]  # fmt: skip


#: The final accuracy of the released models' running average (what the guarantee covers);
#: results reduced before it was recorded lack it, and their tables leave it out.
RELEASED = "final_accuracy_released_averaged"


def _finals(curves: pd.DataFrame) -> pd.DataFrame:
    """One row per run: its configuration, seed and final values."""
    return curves.sort_values("round").groupby([*CONFIG, "seed"], dropna=False).tail(1)


def _mean_sd(values: pd.Series, digits: int = 3) -> str:
    """``mean ± sd`` over runs (the mean alone for one run)."""
    if len(values) < 2:
        return f"{values.mean():.{digits}f}"
    return f"{values.mean():.{digits}f} ± {values.std():.{digits}f}"


def _yardstick(values: pd.Series) -> str:
    """The mean of a yardstick over a row's runs, "—" where it has none (non-private)."""
    mean = values.mean()
    return "—" if pd.isna(mean) else f"{mean:.3f}"


def _epsilon(value: float) -> str:
    return "non-private" if not math.isfinite(value) else f"{value:g}"


def tuning_table(curves: pd.DataFrame) -> tuple[str, dict[str, float]]:
    """Validation accuracy of ŵ_T per (R, λ) and data set, mean of the seeds, and the mean
    over the data sets; the best mean is the default (returned as {radius, strong_convexity})."""
    finals = _finals(curves)
    grid = finals.pivot_table(
        index=["radius", "strong_convexity"], columns="dataset", values="accuracy_averaged"
    )
    grid["mean"] = grid.mean(axis=1)
    grid = grid.sort_values("mean", ascending=False)
    best = grid.index[0]
    rows = ["| R | λ | " + " | ".join(grid.columns) + " |", "|" + "---|" * (len(grid.columns) + 2)]
    for (radius, strong), values in grid.iterrows():
        mark = " (default)" if (radius, strong) == best else ""
        cells = " | ".join(f"{v:.4f}" for v in values)
        rows.append(f"| {radius:g}{mark} | {strong:g} | {cells} |")
    for column, label in (("majority_accuracy", "majority class"),
                          ("centralised_accuracy", "centralised non-private")):  # fmt: skip
        values = finals.groupby("dataset")[column].mean().reindex(grid.columns[:-1])
        cells = " | ".join(f"{v:.4f}" for v in values)
        rows.append(f"| {label} | | {cells} | {values.mean():.4f} |")
    return "\n".join(rows), {"radius": best[0], "strong_convexity": best[1]}


def datasets_table(curves: pd.DataFrame) -> str:
    """Per data set and budget: ε stated and spent, test accuracy of ŵ_T and w̄_T, the regret
    per node, and the yardsticks on the same split (mean ± sd over seeds)."""
    finals = _finals(curves)
    released = RELEASED in finals
    rows = [
        "| data set | R, λ | ε stated | ε spent | accuracy ŵ_T"
        + (" (iterates) | accuracy ŵ_T (released)" if released else "")
        + " | accuracy w̄_T"
        + (" (iterates)" if released else "")
        + " | R_D/(mT) | majority class | centralised | central DP |",
        "|---|---|---|---|---|---|---|---|---|---|" + ("---|" if released else ""),
    ]
    order = {"non_private": 0}
    finals = finals.assign(
        _order=finals["algorithm"].map(order).fillna(1), _eps=-finals["epsilon"].fillna(math.inf)
    ).sort_values(["dataset", "_order", "_eps"])
    for (dataset, algorithm, epsilon, radius, strong), runs in finals.groupby(
        ["dataset", "algorithm", "epsilon", "radius", "strong_convexity"], sort=False
    ):
        stated = "non-private" if algorithm == "non_private" else _epsilon(epsilon)
        spent = "—" if algorithm == "non_private" else f"{runs['epsilon_spent'].max():.4g}"
        rows.append(
            f"| {dataset} | {radius:g}, {strong:g} | {stated} | {spent} "
            f"| {_mean_sd(runs['final_accuracy_averaged'])} "
            + (f"| {_mean_sd(runs[RELEASED])} " if released else "")
            + f"| {_mean_sd(runs['final_accuracy_mean'])} "
            f"| {_mean_sd(runs['average_regret_per_node'], 4)} "
            f"| {runs['majority_accuracy'].iloc[0]:.3f} "
            f"| {runs['centralised_accuracy'].iloc[0]:.3f} "
            f"| {_yardstick(runs['central_dp_accuracy'])} |"
        )
    return "\n".join(rows)


def regret_table(curves: pd.DataFrame, by: Sequence[str]) -> str:
    """Final regret per node and accuracy of ŵ_T per configuration, with ε stated and spent."""
    finals = _finals(curves)
    released = RELEASED in finals
    rows = [
        "| "
        + " | ".join(by)
        + " | ε stated | ε spent | runs | R_D/(mT) | accuracy ŵ_T"
        + (" (iterates) | accuracy ŵ_T (released)" if released else "")
        + " | Σ‖w_i − w̄‖² | majority class | centralised | central DP |",
        "|" + "---|" * (len(by) + 9 + released),
    ]
    finals = finals.assign(_eps=-finals["epsilon"])
    for key, runs in finals.groupby([*by, "_eps"], dropna=False, sort=True):
        key = key[:-1]
        private = runs["algorithm"].iloc[0] != "non_private"
        stated = _epsilon(runs["epsilon"].iloc[0]) if private else "non-private"
        spent = f"{runs['epsilon_spent'].max():.4g}" if private else "—"
        cells = " | ".join(_cell(v) for v in key)
        rows.append(
            f"| {cells} | {stated} | {spent} | {len(runs)} "
            f"| {_mean_sd(runs['average_regret_per_node'], 4)} "
            f"| {_mean_sd(runs['final_accuracy_averaged'])} "
            + (f"| {_mean_sd(runs[RELEASED])} " if released else "")
            + f"| {runs['consensus'].mean():.2g} | {runs['majority_accuracy'].mean():.3f} "
            f"| {runs['centralised_accuracy'].mean():.3f} "
            f"| {_yardstick(runs['central_dp_accuracy'])} |"
        )
    return "\n".join(rows)


def table3_table(curves: pd.DataFrame) -> str:
    """TKDE Table 3: test accuracy (%) of ŵ_T by ε and nodes, with ε spent and the yardsticks
    (central DP at each row's ε in its own column: it does not depend on the nodes)."""
    finals = _finals(curves)
    nodes = sorted(finals["nodes"].unique())
    rows = [
        "| ε stated (spent) | " + " | ".join(f"{m} node{'s' if m > 1 else ''}" for m in nodes)
        + " | central DP (same ε) |",
        "|" + "---|" * (len(nodes) + 2),
    ]  # fmt: skip
    private = finals["algorithm"] != "non_private"
    finals = finals.assign(_eps=finals["epsilon"].where(private, math.inf))
    for epsilon, runs in sorted(finals.groupby("_eps"), key=lambda item: -item[0]):
        runs = runs.set_index("nodes")
        label = (
            "non-private" if not math.isfinite(epsilon)
            else f"{epsilon:g} ({runs['epsilon_spent'].max():.4g})"
        )  # fmt: skip
        cells = " | ".join(f"{100 * runs.loc[m, 'final_accuracy_averaged']:.2f}" for m in nodes)
        central = runs["central_dp_accuracy"].mean()
        central_cell = "—" if pd.isna(central) else f"{100 * central:.2f}"
        rows.append(f"| {label} | {cells} | {central_cell} |")
    for column, label in (("majority_accuracy", "majority class"),
                          ("centralised_accuracy", "centralised non-private")):  # fmt: skip
        values = finals.groupby("nodes")[column].mean()
        cells = " | ".join(f"{100 * values[m]:.2f}" for m in nodes)
        rows.append(f"| {label} | {cells} | — |")
    return "\n".join(rows)


def generated_tables(yardsticks: pd.DataFrame | None = None) -> dict[str, str]:
    """Every table of analysis/README.md's DOLA section, from the results files and the
    central-DP yardsticks (default: the committed :data:`CENTRAL_DP`)."""
    yardsticks = load_central_dp() if yardsticks is None else yardsticks
    out: dict[str, str] = {}
    # results written before ε spent and the yardsticks were recorded have no tables here
    loaded = {
        name: curves if curves is not None and "epsilon_spent" in curves else None
        for name, curves in ((name, _load(name)) for name in EXPERIMENTS)
    }
    for name in CENTRAL_DP_EXPERIMENTS:
        if loaded[name] is not None:
            loaded[name] = with_central_dp(loaded[name], yardsticks, name)
    if loaded["tuning"] is not None:
        out["dola-tuning"] = tuning_table(loaded["tuning"])[0]
    if loaded["datasets"] is not None:
        out["dola-datasets"] = datasets_table(loaded["datasets"])
    if loaded["table3"] is not None:
        out["dola-table3"] = table3_table(loaded["table3"])
    for name, by in (
        ("epsilon", ["algorithm"]), ("batch", ["batch", "algorithm"]), ("nodes", ["nodes"]),
        ("topology", ["topology", "algorithm"]),
    ):  # fmt: skip
        if loaded[name] is not None:
            out[f"dola-{name}"] = regret_table(loaded[name], by)
    return out


def write_tables() -> None:
    """Rewrite the generated tables of analysis/README.md from the results files (with the
    central-DP yardsticks the committed table lacks computed first)."""
    write_readme_tables(generated_tables(update_central_dp()))


def tables(readme: bool) -> None:
    """Print the generated tables (the central-DP yardsticks the committed table lacks
    computed first) and, with ``readme``, write them into analysis/README.md."""
    found = generated_tables(update_central_dp())
    for name, table in found.items():
        print(f"\n<!-- {name} -->\n{table}")
    if readme:
        write_readme_tables(found)


def main(argv: list[str] | None = None) -> int:
    return experiment_main(__doc__.splitlines()[0], EXPERIMENTS, run, draw, argv, tables)


if __name__ == "__main__":
    sys.exit(main())
