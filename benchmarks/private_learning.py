"""Benchmark: what private learning costs per model step, by model, noise and accounting, and
what the central-DP yardstick costs per data set.

    python -m benchmarks.private_learning             # about two minutes
    python -m benchmarks.private_learning --quick     # a smoke test

1. **Per visit.** An ideal walk over Spambase (4,140 nodes, one record each) makes
   ``--visits`` steps of DP-SGD-5 (ε = 1, δ = 1e-5 for the Gaussian), in a fresh child process
   each, and the CPU time of the simulation (the build and the learning section's
   ``finish()`` — its tables and yardsticks — excluded) is divided by the visits. The cases:
   plain SGD (no noise, no accounting work beyond counting), the K-norm noise under basic
   composition (the ε-DP row of the paper's grid), the Gaussian under basic, RDP and PLD
   composition (RDP keeps a curve per record, PLD an ε per distinct history), a mini-batch of
   10 records per visit, and the MLP (32 tanh units, clipped) under RDP.
2. **Yardstick.** The central-DP yardstick (:func:`netsim.learning.central_dp.central_dp_baseline`)
   computed once, cold, on each bundled data set at (1, 1e-5) (DP-GD) and (1, 0) (output
   perturbation); Adult and MNIST too when ``../shared/data`` is there.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"

CHILD = r"""
import json, sys, time
from netsim.log import EventLog
from netsim.scenario.build import build_run
from netsim.scenario.loader import validate_scenario
args = json.loads(sys.argv[1])
scenario = validate_scenario(args["scenario"], source="benchmark", base_dir=None)
built = build_run(scenario, EventLog())
agent = built["learning"]
started = time.process_time()
built.sim.env.run(until=scenario.duration)  # the visits, without the end-of-run hooks
cpu = time.process_time() - started
print(json.dumps({"cpu_s": cpu, "visits": agent.updates + agent.refused,
                  "updates": agent.updates}))
"""

#: learning-section overrides of each per-visit case.
CASES: dict[str, dict] = {
    "sgd (no noise)": {"algorithm": "sgd"},
    "k_norm_l2, basic": {"noise": "k_norm_l2"},
    "gaussian, basic": {"noise": "gaussian"},
    "gaussian, rdp": {"noise": "gaussian", "accounting": "rdp"},
    "gaussian, pld": {"noise": "gaussian", "accounting": "pld"},
    "gaussian, rdp, batch 10": {"noise": "gaussian", "accounting": "rdp",
                                "records_per_node": 10, "batch": 10},
    "mlp [32], clip 1, gaussian, rdp": {"noise": "gaussian", "accounting": "rdp",
                                        "model": {"kind": "mlp", "hidden": [32]}, "clip": 1.0},
}  # fmt: skip


def walk_scenario(visits: int, learning: dict) -> dict:
    """An ideal walk of ``visits`` one-second steps over Spambase under DP-SGD-5."""
    nodes = 4140 // learning.get("records_per_node", 1)
    return {
        "name": "private-learning-benchmark",
        "seed": 1,
        "nodes": nodes,
        "duration": visits + 1,
        "topology": {"kind": "ring", "k": 2},
        "walk": {"kind": "ideal", "sampling": "without_replacement", "step_time": 1.0,
                 "agent": {"kind": "sgd"}},
        "learning": {"dataset": {"name": "spambase"}, "algorithm": "dp-sgd-5", "epsilon": 1.0,
                     "delta": 1e-5, "evaluate_every": 10**9, **learning},
        "metrics": {"sample_every": visits + 1, "privacy_ledger": "totals"},
    }  # fmt: skip


def measure(spec: dict) -> dict:
    """Run the scenario ``spec`` in a child process; its CPU time and visits."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps({"scenario": spec})],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"benchmark run failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def yardstick_data() -> list[tuple[str, dict]]:
    """(name, load_dataset arguments) of the data sets the yardstick is timed on."""
    sets = [("spambase", {}), ("segmentation", {})]
    if (SHARED / "uci" / "adult-complete-rows.csv").is_file():
        sets.append(("adult", {"path": SHARED / "uci" / "adult-complete-rows.csv"}))
    if (SHARED / "mnist").is_dir():
        sets.append(("mnist", {"path": SHARED / "mnist"}))
    return sets


def time_yardsticks(names: set[str] | None = None) -> None:
    from netsim.learning.central_dp import central_dp_baseline, clear_cache
    from netsim.learning.datasets import load_dataset, preprocess

    for name, options in yardstick_data():
        if names is not None and name not in names:
            continue
        data = preprocess(load_dataset(name, **options), normalisation="local", norm="L2")
        for delta in (1e-5, 0.0):
            clear_cache()
            started = time.perf_counter()
            result = central_dp_baseline(
                data.x_train, data.y_train, data.x_test, data.y_test, epsilon=1.0, delta=delta
            )
            wall = time.perf_counter() - started
            method = "DP-GD" if delta > 0 else "output perturbation"
            print(
                f"central DP yardstick, {name} ({data.n_train:,} × {data.features}), "
                f"(1, {delta:g}), {method}: {wall:.2f} s (accuracy {result.accuracy:.3f})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visits", type=int, default=20_700, help="walk steps per case")
    parser.add_argument("--quick", action="store_true", help="200 visits, Spambase only")
    args = parser.parse_args()
    visits = 200 if args.quick else args.visits
    cpu = platform.processor() or "cpu"
    print(f"machine: {platform.machine()}, {cpu}, python {sys.version.split()[0]}")
    for name, learning in CASES.items():
        r = measure(walk_scenario(visits, learning))
        print(
            f"{name}: {1e6 * r['cpu_s'] / r['visits']:.1f} µs CPU per visit "
            f"({r['visits']:,} visits, {r['updates']:,} updates, {r['cpu_s']:.2f} s)"
        )
    time_yardsticks({"spambase"} if args.quick else None)


if __name__ == "__main__":
    main()
