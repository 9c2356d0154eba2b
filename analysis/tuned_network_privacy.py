"""The network-DP tables' rows tuned on a validation split, beside the same rows untuned.

    python analysis/tuned_network_privacy.py run [--jobs 2 | --scheduler ADDRESS] [--out DIR]
                                                 [--only NAME ...] [--reps 3]
    python analysis/tuned_network_privacy.py tables [--readme]

The rows are those of ``analysis/network_privacy.py`` (2,048 nodes of 13 Adult records, 20,000
walk steps, node-level privacy): every row of ``adult-1`` at (1, 10⁻⁵), ``adult-10`` at
(10, 10⁻⁶) and ``adult-10-churn`` (the walk service under STUNner churn). Each row keeps its
noise multiplier exactly: a row with a closed-form calibration recomputes it, a row
calibrated on a pilot (path known, or the ceiling) takes the multiplier its shipped run at
the same seed took (``analysis/results/network-privacy-<name>.parquet``). Within the grid
the step size and the clip change nothing that a row spends: σ = z·C scales with the clip,
so every release's ε is the shipped one, and every learning rate of the grid keeps each
update contractive, η₁(β + λ) ≤ 2 (β = 1/4 for logistic regression on records of norm at
most 1 and λ = 10⁻⁴, so η₁ ≤ 7.997), which the network rows' accounting needs
(amplification by iteration, :mod:`netsim.learning.observers`): every observer's pairwise
loss and every refusal of the ceiling are then those of the shipped row (the tuned runs' own
privacy columns show it).
Past it a row's calibration is void: a first grid up to η₁ = 100 chose 100 for most rows,
and the path-known rows, calibrated to a worst pair of ε = 1, ran at 2.65–2.72 (complete
graph) and 1.29–1.35 (hypercube), every contribution's pairwise loss counted whole.

**The validation rows.** The shipped experiment holds 26,624 of the split's 27,146 training
rows (2,048 nodes × 13); ``learning.dataset.validation_fraction: 0.0173`` holds out 522 rows,
exactly what leaves 26,624 for the nodes, so the test rows are those of the shipped tables and
every node keeps its 13 records. 522 rows measure an accuracy near 0.8 to about ±0.017 (one
s.d.); the grid points are compared on the same rows, so their differences are measured more
finely than that.

For each row, three sweeps of :mod:`netsim.sweep` machinery:

============  ===============================================================================
``select``    the grid :data:`GRID` (learning rate × clip) × 1 repetition at the seeds the
              sweep derives, with ``select: {privacy: unaccounted}``: the point with the best
              ``learning_summary.validation_accuracy`` is chosen; test accuracy is never read
              to choose. A row calibrated on a pilot runs at its seed-1 multiplier. These
              runs read no per-observer table, so they run with ``privacy.model: local``
              (the learning is the same: the threat model only observes, except under the
              ceiling, whose selection runs keep ``budget: network``).
``tuned``     the chosen point at seeds 1..``--reps``, with the row's full privacy accounting
``untuned``   the row's shipped settings (η_t = 1/√t, clip 0.4) on the same split at seeds
              1..``--reps`` (``privacy.model: local`` except under the ceiling: only their
              accuracy is read; their privacy is the tuned runs')
============  ===============================================================================

The sweeps are written into ``<--out>/tuned-network-privacy/`` and run there; complete runs are
kept, so ``run`` resumes (``--only`` runs some experiments). When an experiment's rows are all
complete, ``run`` writes ``analysis/results/tuned-network-privacy-<name>.parquet`` (one row
per ``tuned`` or ``untuned`` run); ``tables`` prints the table of the experiments that have
results (``--readme``: into analysis/README.md's generated block).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from experiments import (
    SweepRunner,
    load_result_tables,
    mean_sd,
    tuning_main,
    write_results,
)
from network_privacy import (
    BUDGETS,
    DEFAULT_REPS,
    EXPERIMENT_ROWS,
    EXPERIMENTS,
    REPO,
    Row,
    base_of,
    central_dp_at_budget,
    load_results,
    overrides,
    path_known_multipliers,
    reduce_run,
)
from scipy import stats
from tuned_private_learning import run_all, set_dotted, slug, write_if_changed

from netsim.analysis.runs import load_run
from netsim.errors import NetsimError
from netsim.scenario.loader import parse_yaml, read_scenario_text
from netsim.storage import SWEEP_RUNS
from netsim.sweep import SweepPlan, SweepPoint, plan_points
from netsim.sweep.selection import select_sweep, write_selection
from netsim.sweep.spec import plan_sweep

RESULTS = REPO / "analysis" / "results"
#: 522 of Adult's 30,162 rows: what the 2,048 × 13 records leave of the training split.
VALIDATION_FRACTION = 0.0173
#: Learning rate (η_t = learning_rate/√t) × clip, 12 points around the untuned (1, 0.4): the
#: rates keep every update contractive (η₁ ≤ 2/(β + λ) = 7.997 for the scenario's logistic
#: regression, β = 1/4 and λ = 10⁻⁴), as the network rows' amplification by iteration needs.
GRID: dict[str, list[float]] = {
    "learning.learning_rate": [1.0, 2.0, 4.0, 7.5],
    "learning.clip": [0.1, 0.4, 1.6],
}
#: The keys of a scenario that name files, made absolute when its YAML is written elsewhere.
PATH_KEYS = (("learning", "dataset"), ("churn",), ("churn", "fallback"))
#: The order the experiments run in: the papers' headline budget (1, 10⁻⁵) first.
RUN_ORDER = ("adult-1", "adult-10", "adult-10-churn")
SUMMARY = "learning_summary"


@functools.cache
def shipped_multipliers(name: str) -> dict[tuple[str, int], float]:
    """(row, seed) → the noise multiplier the shipped run of a pilot-calibrated row took."""
    found = path_known_multipliers(name)
    if not found:
        raise NetsimError(
            f"no shipped results for {name}: run `python analysis/network_privacy.py run` first"
        )
    return found


def row_overrides(name: str, row: Row, seed: int) -> dict[str, Any]:
    """The shipped row's overrides at ``seed`` (its noise exactly as shipped)."""
    epsilon, delta = BUDGETS[name]
    multiplier = None if row.pilot is None else shipped_multipliers(name)[row.label, seed]
    return overrides(row, epsilon, delta, multiplier)


def observing_only(row: Row) -> dict[str, Any]:
    """Overrides that drop the per-observer accounting of a run whose privacy tables are not
    read (it changes no learning); the ceiling's keeps it: it refuses visits online."""
    if row.ceiling:
        return {"privacy.secret_paths": 0}
    return {"privacy.model": "local", "privacy.secret_paths": 0}


def absolute_paths(data: dict[str, Any], base_dir: Path) -> None:
    """Make the files a scenario names (data set, churn trace and its fallback) absolute, so
    that its YAML can be written in another folder."""
    for keys in PATH_KEYS:
        section: Any = data
        for key in keys:
            section = section.get(key) if isinstance(section, dict) else None
        if isinstance(section, dict) and isinstance(section.get("path"), str):
            section["path"] = str((base_dir / section["path"]).resolve())


def base_data(name: str, row: Row, changes: dict[str, Any], tag: str) -> dict[str, Any]:
    """The experiment's base scenario with ``changes`` and the validation split, as data."""
    base = base_of(name)
    data = parse_yaml(read_scenario_text(base), source=str(base))
    absolute_paths(data, base.parent)
    data["learning"]["dataset"]["validation_fraction"] = VALIDATION_FRACTION
    for key, value in changes.items():
        set_dotted(data, key, value)
    data["name"] = f"tnp-{name}-{slug(row.label)}-{tag}"
    return data


def select_plan(folder: Path, name: str, row: Row) -> SweepPlan:
    """The ``select`` sweep of a row: :data:`GRID` × 1 repetition, chosen on validation."""
    changes = {**row_overrides(name, row, 1), **observing_only(row)}
    data = base_data(name, row, changes, "select")
    sweep = {"name": data["name"], "grid": GRID, "repetitions": 1,
             "select": {"privacy": "unaccounted"}}  # fmt: skip
    return plan_sweep(write_if_changed(folder / f"{data['name']}.yaml", {**data, "sweep": sweep}))


def seeds_plan(
    folder: Path, name: str, row: Row, protocol: str, setting: dict[str, Any], reps: int
) -> SweepPlan:
    """The row at ``setting`` (empty: untuned) at seeds 1..``reps``; the points are labelled
    with the row's label, as the shipped sweep's are (:func:`network_privacy.reduce_run`)."""
    observe = {} if protocol == "tuned" else observing_only(row)
    data = base_data(name, row, {}, protocol)
    base = write_if_changed(folder / f"{data['name']}.yaml", data)
    points = [
        SweepPoint({**row_overrides(name, row, seed), **observe, **setting}, seed, row.label)
        for seed in range(1, reps + 1)
    ]
    return plan_points(base, points, name=data["name"])


def chosen_setting(folder: Path, name: str, row: Row, runner: SweepRunner) -> dict[str, Any]:
    """Run the row's ``select`` sweep; the chosen (learning rate, clip) overrides (the
    selection is written to its sweep directory's ``selection.json``)."""
    plan = select_plan(folder, name, row)
    directory = run_all(runner, folder, plan)
    selection = select_sweep(plan, directory, lambda path: load_run(path, parameters=False))
    write_selection(directory, selection)
    print("\n".join(selection.lines()), flush=True)
    return {key: float(value) for key, value in selection.chosen_parameters.items()}


def results_file(name: str) -> Path:
    return RESULTS / f"tuned-network-privacy-{name}.parquet"


def run(names: Sequence[str], runner: SweepRunner, reps: int) -> int:
    """Per experiment: select and run every row tuned, then untuned, then write its results."""
    folder = runner.out / "tuned-network-privacy"
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        rows = EXPERIMENT_ROWS[name]
        for row in rows:
            setting = chosen_setting(folder, name, row, runner)
            run_all(runner, folder, seeds_plan(folder, name, row, "tuned", setting, reps))
        for row in rows:
            run_all(runner, folder, seeds_plan(folder, name, row, "untuned", {}, reps))
        write_results(collect(folder, name, reps), results_file(name))
        print(f"wrote {results_file(name).relative_to(REPO)}", flush=True)
    return 0


def accuracies(tables: dict[str, pd.DataFrame]) -> dict[str, float]:
    summary = tables[SUMMARY].iloc[0]
    return {
        "validation_accuracy": float(summary["validation_accuracy"]),
        "test_accuracy": float(summary["test_accuracy"]),
    }


def collect(folder: Path, name: str, reps: int) -> pd.DataFrame:
    """One row per ``tuned`` or ``untuned`` run of every row of experiment ``name``: the
    tuned runs reduced as the shipped ones (:func:`network_privacy.reduce_run`), the
    untuned runs' accuracies, and the row's selection."""
    frames = []
    for order, row in enumerate(EXPERIMENT_ROWS[name]):
        prefix = f"tnp-{name}-{slug(row.label)}"
        selection = json.loads((folder / f"{prefix}-select" / "selection.json").read_text())
        chosen = {k: float(v) for k, v in selection["chosen_parameters"].items()}
        for protocol, setting in (("tuned", chosen), ("untuned", {})):
            plan = seeds_plan(folder, name, row, protocol, setting, reps)
            for planned in plan.runs:
                directory = folder / plan.spec.name / SWEEP_RUNS / planned.run_id
                tables = load_run(directory, parameters=False)
                # an untuned ceiling run keeps its per-observer accounting (it refuses
                # visits by it): reduced in full, so its spend can be compared
                reduced = (
                    reduce_run(name, directory)
                    if protocol == "tuned" or row.ceiling
                    else pd.DataFrame(
                        [{"experiment": name, "row": row.label, "seed": int(planned.seed)}]
                    )
                )
                frames.append(reduced.assign(
                    order=order, protocol=protocol, **accuracies(tables),
                    learning_rate=setting.get("learning.learning_rate", 1.0),
                    clip=setting.get("learning.clip", 0.4),
                    selection_validation=float(selection["metric_value"]),
                    candidates=int(selection["candidates"]),
                ))  # fmt: skip
    return pd.concat(frames, ignore_index=True)


# --- table --------------------------------------------------------------------------------------


def load_tuned(names: Sequence[str] = EXPERIMENTS) -> pd.DataFrame:
    return load_result_tables(names, results_file, "tuned_network_privacy.py")


def margin(tuned: pd.Series, untuned: pd.Series) -> str:
    """Tuned minus untuned test accuracy, with a 95% Welch interval."""
    if tuned.count() < 2 or untuned.count() < 2:
        return "—"
    low, high = stats.ttest_ind(tuned, untuned, equal_var=False).confidence_interval(0.95)
    return f"{tuned.mean() - untuned.mean():+.3f} [{low:+.3f}, {high:+.3f}]"


def shipped_accuracy(shipped: pd.DataFrame, name: str, label: str) -> str:
    """The shipped table's untuned test accuracy of the row (the split without validation)."""
    part = shipped[(shipped["experiment"] == name) & (shipped["row"] == label)]
    return mean_sd(part["final_accuracy"]) if len(part) else "—"


def markdown_table(frame: pd.DataFrame, shipped: pd.DataFrame, name: str) -> str:
    epsilon, delta = BUDGETS[name]
    part = frame[frame["experiment"] == name]
    if part.empty:
        return f"(no results for {name}: run `python analysis/tuned_network_privacy.py run`)"
    lines = [
        f"At (ε, δ) = ({epsilon:g}, {delta:g}){', STUNner churn' if 'churn' in name else ''}; "
        f"central DP at the stated (ε, δ) {central_dp_at_budget(name):.3f} (shipped split).",
        "",
        "| row | z = σ/Δ | shipped untuned test | untuned test (same split) | chosen (η, clip) "
        "| tuned validation (selection run) | tuned test | tuned − untuned (95% CI) "
        "| network ε, path known (worst, tuned) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (_, label), group in part.groupby(["order", "row"], sort=True):
        tuned = group[group["protocol"] == "tuned"]
        untuned = group[group["protocol"] == "untuned"]
        first = tuned.iloc[0]
        lines.append(
            f"| {label} | {tuned['noise_multiplier'].mean():.3g} | "
            f"{shipped_accuracy(shipped, name, label)} | {mean_sd(untuned['test_accuracy'])} | "
            f"{first['learning_rate']:g}, {first['clip']:g} | "
            f"{tuned['validation_accuracy'].mean():.3f} ({first['selection_validation']:.3f}) | "
            f"{mean_sd(tuned['test_accuracy'])} | "
            f"{margin(tuned['test_accuracy'], untuned['test_accuracy'])} | "
            f"{tuned['network_epsilon'].max():.3g} |"
        )
    return "\n".join(lines)


def generated_tables(frame: pd.DataFrame | None = None) -> dict[str, str]:
    frame = load_tuned() if frame is None else frame
    shipped = load_results()
    names = [name for name in EXPERIMENTS if (frame["experiment"] == name).any()]
    return {"tuned-network-privacy": "\n\n".join(markdown_table(frame, shipped, n) for n in names)}


def main(argv: list[str] | None = None) -> int:
    return tuning_main(
        "tuned_network_privacy",
        __doc__.split("\n\n")[0],
        EXPERIMENTS,
        run,
        generated_tables,
        default_only=RUN_ORDER,
        count_option="reps",
        count_default=DEFAULT_REPS,
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
