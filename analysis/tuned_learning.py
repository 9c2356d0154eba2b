"""Walk DP-SGD on Adult tuned on a validation split by a sweep, beside the untuned row.

    python analysis/tuned_learning.py run [--jobs 2 | --scheduler ADDRESS] [--out DIR]
                                          [--tunings 5]
    python analysis/tuned_learning.py tables [--readme]

The setting is the private-learning table's ``gaussian rdp, b = 100`` row on Adult
(``scenarios/learning/adult.yaml``; ``analysis/private_learning.py``): an ideal walk, shards of
r = 100 records per node stepped on mini-batches of b = 100 clipped gradients, Gaussian noise
under RDP at (ε, δ) = (1, 1e-5) per record, DP-SGD-5, ten passes. Here a fifth of the rows is
held out as a validation split (``learning.dataset.validation_fraction: 0.2``; the test rows
are those of the same split seed without one), so the walk has 211 nodes of 100 records.

Three protocols, each a sweep of ``netsim sweep`` machinery (:mod:`netsim.sweep.selection`):

=================  ===========================================================================
``untuned``        the shipped settings (η_t = 1/√t, the logistic regression's own bound, no
                   clip), seeds 1..5
``unaccounted``    the grid :data:`GRID` (learning rate × clip) × 5 repetitions; the point with
                   the best mean validation accuracy is chosen and its test accuracy reported
                   at its 5 seeds; the choice's privacy is **not** counted (named so)
``random trials``  private selection (Papernot & Steinke 2022): ``--tunings`` independent
                   tunings (base seeds 1..5), each K ~ geometric (mean :data:`MEAN_TRIALS`)
                   random grid points, the best by validation accuracy + Laplace noise
                   (ε_val = :data:`VALIDATION_EPSILON`) released; its (ε, δ) is stated
=================  ===========================================================================

The sweep files are written into the sweep output folder (``<--out>/tuned-learning/``) and run
there; complete runs are kept, so ``run`` resumes. ``analysis/results/tuned-learning.parquet``
holds one row per reported model; ``tables`` prints the table (``--readme``: into
analysis/README.md's generated block).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from experiments import (
    add_runner_arguments,
    guarded,
    mean_interval,
    run_plan,
    runner_from,
    show_tables,
    write_results,
)

from netsim.analysis.runs import load_run
from netsim.scenario.loader import parse_yaml, read_scenario_text
from netsim.sweep.selection import select_sweep, write_selection
from netsim.sweep.spec import plan_sweep

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "scenarios" / "learning" / "adult.yaml"
RESULTS = REPO / "analysis" / "results" / "tuned-learning.parquet"
NODES = 211  # 21,114 training rows once a fifth is validation, in shards of 100
SHARD = 100
PASSES = 10
SEEDS = 5
#: Learning rate (η_t = learning_rate/√t) × clip, log-spaced around the effective step
#: η·C ≈ 1 of the untuned row: 25 points.
GRID = {
    "learning.learning_rate": [1.0, 3.0, 10.0, 30.0, 100.0],
    "learning.clip": [0.1, 0.2, 0.3, 0.5, 1.0],
}
MEAN_TRIALS = 10
VALIDATION_EPSILON = 0.1


def base_data() -> dict[str, Any]:
    """The Adult scenario with the b = 100 Gaussian RDP row's settings and a validation fifth
    (the data set's path made absolute, so the sweep files can live elsewhere)."""
    data = parse_yaml(read_scenario_text(BASE), source=str(BASE))
    learning = data["learning"]
    learning["dataset"]["path"] = str((BASE.parent / learning["dataset"]["path"]).resolve())
    learning["dataset"]["validation_fraction"] = 0.2
    learning.update({
        "algorithm": "dp-sgd-5", "noise": "gaussian", "accounting": "rdp", "epsilon": 1.0,
        "delta": 1e-5, "records_per_node": SHARD, "batch": SHARD,
        "evaluate_every": NODES // 10,
    })  # fmt: skip
    data.update({"name": "tuned-adult", "nodes": NODES, "duration": f"{PASSES * NODES}s"})
    return data


def sweep_files(folder: Path, tunings: int) -> dict[str, Path]:
    """The sweep files of the three protocols (written when missing or different)."""
    folder.mkdir(parents=True, exist_ok=True)
    base = base_data()
    sweeps: dict[str, dict[str, Any]] = {
        "untuned": {"name": "tuned-adult-untuned",
                    "grid": {"learning.learning_rate": [1.0]}, "repetitions": SEEDS,
                    "select": {"privacy": "unaccounted"}},
        "unaccounted": {"name": "tuned-adult-unaccounted", "grid": GRID, "repetitions": SEEDS,
                        "select": {"privacy": "unaccounted"}},
    }  # fmt: skip
    for seed in range(1, tunings + 1):
        sweeps[f"random-trials-{seed}"] = {
            "name": f"tuned-adult-random-trials-{seed}", "grid": GRID,
            "select": {"privacy": "random_trials", "trials": {"mean": MEAN_TRIALS, "shape": 1},
                       "validation_epsilon": VALIDATION_EPSILON},
        }  # fmt: skip
    files = {}
    for name, sweep in sweeps.items():
        seeded = dict(base, seed=int(name.rsplit("-", 1)[-1]) if "trials" in name else 1)
        text = yaml.safe_dump({**seeded, "sweep": sweep}, sort_keys=False, allow_unicode=True)
        path = folder / f"{name}.yaml"
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        files[name] = path
    return files


def rows_of(protocol: str, selection: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per reported model of a selection."""
    chosen = selection["chosen_parameters"]
    return [
        {
            "protocol": protocol.rsplit("-", 1)[0] if "trials" in protocol else protocol,
            "sweep": protocol,
            "learning_rate": float(chosen.get("learning.learning_rate", 1.0)),
            "clip": chosen.get("learning.clip"),
            "validation_accuracy": float(selection["metric_value"]),
            "test_accuracy": float(value),
            "candidates": int(selection["candidates"]),
            "selection_epsilon": selection["epsilon"],
            "statement": selection["statement"],
        }
        for value in selection["report_values"]
    ]


def run(args: argparse.Namespace) -> int:
    runner = runner_from(args)
    folder = runner.out / "tuned-learning"
    rows: list[dict[str, Any]] = []
    for protocol, path in sweep_files(folder, args.tunings).items():
        plan = plan_sweep(path)
        _, failed = run_plan(plan, dataclasses.replace(runner, out=folder))
        if failed:
            print(f"{protocol}: {failed} runs failed; no table written", file=sys.stderr)
            return 1
        directory = folder / plan.spec.name
        selection = select_sweep(
            plan, directory, lambda path: load_run(path, parameters=False)
        )
        write_selection(directory, selection)
        rows.extend(rows_of(protocol, json.loads((directory / "selection.json").read_text())))
        print("\n".join(selection.lines()))
    write_results(pd.DataFrame(rows), RESULTS)
    print(f"wrote {RESULTS.relative_to(REPO)}")
    return 0


def generated_tables() -> dict[str, str]:
    """The table: per protocol the chosen setting, test accuracy over its models, and what the
    selection's privacy is."""
    frame = pd.read_parquet(RESULTS)
    lines = [
        "| protocol | chosen (η, clip) | models | validation | test accuracy (95% interval) "
        "| selection privacy |",
        "|---|---|---|---|---|---|",
    ]
    for protocol, group in frame.groupby("protocol", sort=False):
        settings = sorted(
            {(r.learning_rate, None if pd.isna(r.clip) else r.clip) for r in group.itertuples()},
            key=lambda pair: (pair[0], -1.0 if pair[1] is None else pair[1]),
        )
        chosen = "; ".join(
            f"{lr:g}, {'—' if clip is None else f'{clip:g}'}"
            for lr, clip in settings
        )
        if protocol == "random-trials":
            eps = group["selection_epsilon"]
            spread = f"{eps.min():.3g}" if eps.min() == eps.max() else (
                f"{eps.min():.3g}–{eps.max():.3g}"
            )
            privacy = (
                f"counted: ε = {spread} at δ = 1e-5 per record (K drawn: "
                f"{', '.join(str(int(k)) for k in group['candidates'])} trials)"
            )
        elif protocol == "untuned":
            privacy = "none needed: nothing chosen (ε = 1, δ = 1e-5 per run)"
        else:
            privacy = "unaccounted (each run ε = 1, δ = 1e-5; the choice is not counted)"
        lines.append(
            f"| {protocol} | {chosen} | {len(group)} | "
            f"{group['validation_accuracy'].mean():.3f} | "
            f"{mean_interval(group['test_accuracy'])} | {privacy} |"
        )
    return {"tuned-learning": "\n".join(lines)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run (or resume) the sweeps and select")
    add_runner_arguments(run_parser)
    run_parser.add_argument("--tunings", type=int, default=SEEDS, help="private tunings")
    tables = commands.add_parser("tables", help="print the table")
    tables.add_argument("--readme", action="store_true", help="write it into the README")
    args = parser.parse_args(argv)
    if args.command == "run":
        return guarded("tuned_learning", lambda: run(args))
    return guarded(
        "tuned_learning", lambda: (show_tables(generated_tables(), args.readme), 0)[1]
    )


if __name__ == "__main__":
    sys.exit(main())
