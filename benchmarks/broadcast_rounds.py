"""Benchmark: the rounds-mode broadcast with a new update every round, against the plain SimPy
loop, with its tables in memory and written to a run directory.

    python -m benchmarks.broadcast_rounds              # N = 10,000, 3,000 rounds, 3 repeats
    python -m benchmarks.broadcast_rounds --repeat 5
    python -m benchmarks.broadcast_rounds --quick      # N = 500, a smoke test (no figures)

The workload is ``rounds-broadcast-every`` of :mod:`benchmarks.workloads` (N = 10,000, a fixed
random 30% online, 50 out-neighbours, Δ = 100 ms, a new update every round: PeerSim's broadcast
workload). Each repeat measures, alternately and each in a fresh child process: the plain SimPy
push-pull loop (:mod:`benchmarks.plain_simpy`, 300 rounds), the broadcast with its tables kept
in memory (``EventLog()``, as ``netsim.run`` without ``out`` does) and the broadcast writing its
tables to a run directory (as ``netsim run`` does). Printed: CPU µs per simulated round
(median and range over the repeats), the ratio to the plain loop (median and range of the
per-repeat quotients) and the peak resident memory of each child. PeerSim's cycle-driven
engine on this workload is measured by :mod:`benchmarks.peersim` (side by side, never through
the plain loop: their relative speed changes with the machine's load).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from typing import Any

from benchmarks.exact import spread
from benchmarks.workloads import REPO, WARMUP_ROUNDS, WORKLOADS, measure

WORKLOAD = "rounds-broadcast-every"

#: The workload's child, writing its tables to a run directory (Parquet) as ``netsim run`` does.
DIRECTORY_CHILD = r"""
import json, resource, sys, tempfile, time
from pathlib import Path
from netsim.log import EventLog
from netsim.scenario.build import build_run
from netsim.scenario.loader import validate_scenario
args = json.loads(sys.argv[1])
scenario = validate_scenario(args["scenario"], source="benchmark", base_dir=None)
with tempfile.TemporaryDirectory() as directory:
    log = EventLog(Path(directory))
    built = build_run(scenario, log)
    built.sim.env.run(until=args["warmup"])
    cpu = time.process_time()
    built.sim.run(scenario.duration)
    log.close()
    cpu = time.process_time() - cpu
print(json.dumps({"cpu_us_per_round": 1e6 * cpu / args["rounds"],
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure_directory(quick: bool) -> dict[str, Any]:
    """The workload with its tables written to a temporary run directory (closing included)."""
    data, rounds = WORKLOADS[WORKLOAD].data(quick)
    warmup = min(WARMUP_ROUNDS, rounds // 4)
    payload = {"scenario": data, "rounds": rounds - warmup,
               "warmup": warmup * float(data["duration"]) / rounds}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", DIRECTORY_CHILD, json.dumps(payload)], capture_output=True,
        text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"benchmark failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_plain(quick: bool) -> float:
    """CPU µs per round of the plain SimPy loop (300 rounds; the quick size for a smoke test)."""
    nodes, rounds = (500, 20) if quick else (10_000, 300)
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.plain_simpy", "--json", "--rounds", str(rounds),
         "--nodes", str(nodes)],
        capture_output=True, text=True, cwd=REPO, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])["cpu_us_per_round"]


def quotients(numerators: list[float], denominators: list[float]) -> str:
    """The median of the per-repeat quotients, with their range."""
    values = [a / b for a, b in zip(numerators, denominators, strict=True)]
    return f"{statistics.median(values):.4g}× ({min(values):.4g}–{max(values):.4g})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--repeat", type=int, default=3, help="alternating repeats (3)")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, "
          f"Python {platform.python_version()}; {WORKLOADS[WORKLOAD].title}")  # fmt: skip
    measure(WORKLOAD, quick=True)  # unmeasured: loads (or compiles) the kernels
    plain: list[float] = []
    runs: dict[str, list[dict[str, Any]]] = {"in memory": [], "run directory": []}
    for _ in range(args.repeat):
        plain.append(measure_plain(args.quick))
        runs["in memory"].append(measure(WORKLOAD, quick=args.quick))
        runs["run directory"].append(measure_directory(args.quick))
    print("CPU µs per simulated round (median, range over repeats)")
    print(f"  plain SimPy push-pull loop   {spread(plain)}")
    for label, rows in runs.items():
        cpu = [row["cpu_us_per_round"] for row in rows]
        peak = [row["peak_mb"] for row in rows]
        print(f"  broadcast, tables {label:13s}{spread(cpu)}   peak {spread(peak).strip()} MiB")
        print(f"      {quotients(cpu, plain)} the plain loop")


if __name__ == "__main__":
    main()
