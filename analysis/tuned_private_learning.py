"""The private-learning tables' rows tuned on a validation split, beside the same rows untuned.

    python analysis/tuned_private_learning.py run [--jobs 2 | --scheduler ADDRESS] [--out DIR]
                                                  [--only NAME ...] [--seeds 5]
    python analysis/tuned_private_learning.py tables [--readme]

The rows are those of ``analysis/private_learning.py``: every row of the Spambase walk
(:data:`~private_learning.WALK_ROWS`) and of Spambase gossip learning
(:data:`~private_learning.GOSSIP_ROWS`), and the Adult walk rows with shards (b = 10 and
b = 100, logistic regression and MLP). The one-record Adult rows are not run: each is a walk
of 21k nodes for ten passes, and the 15-point grid of each would alone take most of the time
budget.

Every run holds a fifth of the rows out as a validation split
(``learning.dataset.validation_fraction: 0.2``; the test rows are those of the shipped
tables), so the nodes are recomputed from the smaller training split as
:func:`private_learning.shard_overrides` does (one record per node: nodes = training rows;
shards of r: training rows // r; ten passes and ten evaluations per pass kept; gossip keeps
its 100 s). For each row, three sweeps of :mod:`netsim.sweep` machinery:

============  ===============================================================================
``select``    the grid :data:`GRID` (learning rate × clip) × 1 repetition (seeds derived by
              the sweep) with ``select: {privacy: unaccounted}``: the point with the best
              ``learning_summary.validation_accuracy`` is chosen; test accuracy is never read
              to choose
``tuned``     the chosen point at seeds 1..``--seeds``
``untuned``   the row's shipped settings (η_t = 1/√t; no clip for logistic regression, clip 1
              for the MLP) on the same split at seeds 1..``--seeds``
============  ===============================================================================

Each sweep's files are written into ``<--out>/tuned-private-learning/`` and run there;
complete runs are kept, so ``run`` resumes (and ``run --only`` lets experiments run in
separate processes). Once every row of every experiment is complete, ``run`` writes
``analysis/results/tuned-private-learning.parquet`` (one row per ``tuned`` or ``untuned``
run); ``tables`` prints the table (``--readme``: into analysis/README.md's generated block).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from experiments import (
    SweepRunner,
    mean_sd,
    run_plan,
    tuning_main,
    write_results,
)
from private_learning import BASES, EVALUATIONS_PER_PASS, PASSES, Row, rows_of, shard_overrides

from netsim.analysis.runs import load_run
from netsim.errors import NetsimError
from netsim.learning.sgd_agent import learning_data
from netsim.scenario.loader import load_scenario, parse_yaml, read_scenario_text
from netsim.storage import SWEEP_RUNS
from netsim.sweep import SweepPlan, SweepPoint, plan_points
from netsim.sweep.selection import select_sweep, write_selection
from netsim.sweep.spec import plan_sweep

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "analysis" / "results" / "tuned-private-learning.parquet"
EXPERIMENTS = ("spambase", "gossip", "adult")
VALIDATION_FRACTION = 0.2
DEFAULT_SEEDS = 5
#: Learning rate (η_t = learning_rate/√t) × clip: 15 points around the untuned η = 1.
GRID: dict[str, list[float]] = {
    "learning.learning_rate": [0.3, 1.0, 3.0, 10.0, 30.0],
    "learning.clip": [0.1, 0.3, 1.0],
}
SUMMARY = "learning_summary"


def tuned_rows(name: str) -> tuple[Row, ...]:
    """The rows of experiment ``name`` that are tuned (Adult: the shard rows only)."""
    rows = rows_of(name)
    return tuple(row for row in rows if row.shard > 1) if name == "adult" else rows


def slug(text: str) -> str:
    """A file-name form of a row label (``gaussian rdp, b = 10`` → ``gaussian-rdp-b-10``)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


@functools.cache
def training_rows(name: str) -> int:
    """The training rows of experiment ``name``'s data set once the validation fifth is held
    out (the test rows stay those of the shipped tables)."""
    scenario = load_scenario(
        BASES[name], [f"learning.dataset.validation_fraction={VALIDATION_FRACTION}"]
    )
    assert scenario.learning is not None
    return learning_data(scenario.learning, 1).n_train


def row_overrides(name: str, row: Row) -> dict[str, Any]:
    """The row's overrides with the nodes resized to the smaller training split."""
    overrides = dict(row.overrides)
    rows = training_rows(name)
    if row.shard > 1:
        overrides.update(shard_overrides(rows, row.shard))
    elif name == "gossip":
        overrides["nodes"] = rows  # gossip keeps its 100 s and its evaluation period
    else:
        overrides.update({
            "nodes": rows, "duration": float(PASSES * rows),
            "learning.evaluate_every": max(1, rows // EVALUATIONS_PER_PASS),
        })  # fmt: skip
    return overrides


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    """Set ``a.b.c`` in nested ``data`` as ``--set`` would."""
    *parents, last = key.split(".")
    for part in parents:
        data = data.setdefault(part, {})
    data[last] = value


def base_data(name: str, row: Row) -> dict[str, Any]:
    """The row's scenario as plain data: the experiment's base with the row's overrides and
    the validation split (the data set's path made absolute, so the files can live in the
    sweep folder)."""
    base = BASES[name]
    data = parse_yaml(read_scenario_text(base), source=str(base))
    dataset = data["learning"]["dataset"]
    if "path" in dataset:
        dataset["path"] = str((base.parent / dataset["path"]).resolve())
    dataset["validation_fraction"] = VALIDATION_FRACTION
    for key, value in row_overrides(name, row).items():
        set_dotted(data, key, value)
    data["name"] = f"tpl-{name}-{slug(row.label)}"
    return data


def write_if_changed(path: Path, data: dict[str, Any]) -> Path:
    """Write ``data`` as YAML to ``path`` unless it already holds exactly that (so resumed
    sweeps see the same file)."""
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


def select_plan(folder: Path, name: str, row: Row) -> SweepPlan:
    """The ``select`` sweep of a row: :data:`GRID` × 1 repetition, chosen on validation."""
    data = base_data(name, row)
    sweep = {"name": f"{data['name']}-select", "grid": GRID, "repetitions": 1,
             "select": {"privacy": "unaccounted"}}  # fmt: skip
    path = folder / f"{data['name']}-select.yaml"
    return plan_sweep(write_if_changed(path, {**data, "sweep": sweep}))


def seeds_plan(
    folder: Path, name: str, row: Row, protocol: str, setting: dict[str, Any], seeds: int
) -> SweepPlan:
    """The row at ``setting`` (dotted overrides; empty: untuned) at seeds 1..``seeds``."""
    data = base_data(name, row)
    base = write_if_changed(folder / f"{data['name']}.yaml", data)
    label = f"{row.label}: {protocol}"
    points = [SweepPoint(setting, seed, label) for seed in range(1, seeds + 1)]
    return plan_points(base, points, name=f"{data['name']}-{protocol}")


def run_all(runner: SweepRunner, folder: Path, plan: SweepPlan) -> Path:
    """Run ``plan`` in ``folder`` (resuming); its sweep directory, or an error if runs failed."""
    _, failed = run_plan(plan, dataclasses.replace(runner, out=folder))
    if failed:
        raise NetsimError(
            f"{plan.spec.name}: {failed} runs failed; run the same command again to retry them"
        )
    return folder / plan.spec.name


def chosen_setting(folder: Path, name: str, row: Row, runner: SweepRunner) -> dict[str, Any]:
    """Run the row's ``select`` sweep and return the chosen (learning rate, clip) overrides;
    the selection is written to the sweep directory's ``selection.json``."""
    plan = select_plan(folder, name, row)
    directory = run_all(runner, folder, plan)
    selection = select_sweep(plan, directory, lambda path: load_run(path, parameters=False))
    write_selection(directory, selection)
    print("\n".join(selection.lines()), flush=True)
    return {key: float(value) for key, value in selection.chosen_parameters.items()}


def run(names: Sequence[str], runner: SweepRunner, seeds: int) -> int:
    """Select and run every row of ``names`` (all rows' tuned runs before any untuned ones,
    so a cut-short run has the tuned column first); write the results when every
    experiment's runs are complete."""
    folder = runner.out / "tuned-private-learning"
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        for row in tuned_rows(name):
            setting = chosen_setting(folder, name, row, runner)
            run_all(runner, folder, seeds_plan(folder, name, row, "tuned", setting, seeds))
    for name in names:
        for row in tuned_rows(name):
            run_all(runner, folder, seeds_plan(folder, name, row, "untuned", {}, seeds))
    if set(names) != set(EXPERIMENTS):
        print("ran part of the experiments: run all of them to write the results")
        return 0
    write_results(collect(folder, seeds), RESULTS)
    print(f"wrote {RESULTS.relative_to(REPO)}")
    return 0


def run_rows(directory: Path, plan: SweepPlan) -> list[dict[str, Any]]:
    """Seed, validation and test accuracy of each run of ``plan`` in ``directory``."""
    out = []
    for planned in plan.runs:
        summary = load_run(directory / SWEEP_RUNS / planned.run_id, parameters=False)[SUMMARY]
        out.append({
            "seed": int(planned.seed),
            "validation_accuracy": float(summary["validation_accuracy"].iloc[0]),
            "test_accuracy": float(summary["test_accuracy"].iloc[0]),
        })  # fmt: skip
    return out


def collect(folder: Path, seeds: int) -> pd.DataFrame:
    """One row per ``tuned`` or ``untuned`` run of every row, with the row's selection."""
    records = []
    for name in EXPERIMENTS:
        for order, row in enumerate(tuned_rows(name)):
            prefix = f"tpl-{name}-{slug(row.label)}"
            selection = json.loads((folder / f"{prefix}-select" / "selection.json").read_text())
            chosen = {k: float(v) for k, v in selection["chosen_parameters"].items()}
            untuned_clip = row.overrides.get("learning.clip", math.nan)
            for protocol, setting in (("tuned", chosen), ("untuned", {})):
                plan = seeds_plan(folder, name, row, protocol, setting, seeds)
                for record in run_rows(folder / plan.spec.name, plan):
                    records.append({
                        "experiment": name, "row": row.label, "order": order,
                        "private": row.overrides.get("learning.algorithm") != "sgd",
                        "guarantee": "none" if "paper" in row.label else "dp",
                        "protocol": protocol,
                        "learning_rate": setting.get("learning.learning_rate", 1.0),
                        "clip": setting.get("learning.clip", untuned_clip),
                        "selection_validation": float(selection["metric_value"]),
                        "candidates": int(selection["candidates"]),
                        **record,
                    })  # fmt: skip
    return pd.DataFrame(records)


# --- table --------------------------------------------------------------------------------------

DATASETS = {"spambase": ("spambase", "walk"), "gossip": ("spambase", "gossip"),
            "adult": ("adult", "walk")}  # fmt: skip


def privacy_label(private: bool, guarantee: str) -> str:
    """What choosing this row's point costs in privacy, as the table states it."""
    if not private:
        return "none needed (non-private)"
    if guarantee == "none":
        return "unaccounted (runs: no guarantee)"
    return "unaccounted"


def setting_text(learning_rate: float, clip: float) -> str:
    """``η, clip`` (``—`` for no clip: the model's own bound)."""
    return f"{learning_rate:g}, {'—' if math.isnan(clip) else f'{clip:g}'}"


def generated_tables(frame: pd.DataFrame | None = None) -> dict[str, str]:
    """The table: per row the untuned and tuned accuracy on the same split (validation means
    over the seeds; test mean ± s.d. (n)), the chosen point with the validation accuracy of
    its one selection run (the maximum of 15, so biased upwards), and the selection's
    privacy."""
    frame = pd.read_parquet(RESULTS) if frame is None else frame
    lines = [
        "| data set | learner | row | untuned validation | untuned test accuracy (same split) "
        "| chosen (η, clip) | tuned validation (selection run) | tuned test accuracy "
        "| selection privacy |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    frame = frame.assign(rank=frame["experiment"].map(EXPERIMENTS.index))
    for (_, _, name, label), group in frame.groupby(
        ["rank", "order", "experiment", "row"], sort=True
    ):
        tuned = group[group["protocol"] == "tuned"]
        untuned = group[group["protocol"] == "untuned"]
        first = tuned.iloc[0]
        dataset, learner = DATASETS[name]
        lines.append(
            f"| {dataset} | {learner} | {label} | {untuned['validation_accuracy'].mean():.3f} | "
            f"{mean_sd(untuned['test_accuracy'])} | "
            f"{setting_text(first['learning_rate'], first['clip'])} | "
            f"{tuned['validation_accuracy'].mean():.3f} ({first['selection_validation']:.3f}) | "
            f"{mean_sd(tuned['test_accuracy'])} | "
            f"{privacy_label(bool(first['private']), first['guarantee'])} |"
        )
    return {"tuned-private-learning": "\n".join(lines)}


def main(argv: list[str] | None = None) -> int:
    return tuning_main(
        "tuned_private_learning",
        __doc__.split("\n\n")[0],
        EXPERIMENTS,
        run,
        generated_tables,
        default_only=EXPERIMENTS,
        count_option="seeds",
        count_default=DEFAULT_SEEDS,
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
