"""Benchmark: netsim against a plain SimPy loop on the fixed-online workload, and rounds mode
(PeerSim itself is measured by :mod:`benchmarks.peersim`).

    python -m benchmarks.exact             # N = 10,000: 300 exact rounds, 3,000 in rounds mode
    python -m benchmarks.exact --quick     # N = 500, a few rounds (a smoke test, no figures)
    python -m benchmarks.exact --repeat 5  # each measurement 5 times, alternating; medians

Prints the CPU microseconds per simulated round of the plain SimPy push-pull loop
(:mod:`benchmarks.plain_simpy`), of netsim in exact mode (the broadcast on the compiled core
and on SimPy, and on PeerSim's event-driven workload; the walk service likewise) with its
ratio to the plain loop measured in the same repeat, and of netsim in rounds mode (walk
service, broadcast) with the broadcast's ratio to the walk. Each measurement runs in a fresh
child process; with ``--repeat`` the measurements alternate (plain, exact broadcast, exact
walk, …, then again), so a change of the machine's speed during the benchmark touches all of
them alike.

The plain loop is a reference within the run, not a stand-in for PeerSim: its speed relative
to the JVM changes with the machine's load (a loaded machine slows Python more), so a ratio
to PeerSim is only quoted as :mod:`benchmarks.peersim` measures it, PeerSim and netsim
alternately in the same call.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys

from benchmarks.workloads import REPO, WORKLOADS, measure

ORDER = (
    "exact-broadcast", "exact-broadcast-simpy", "exact-broadcast-peersim", "exact-walk",
    "exact-walk-simpy", "exact-walk-peersim", "rounds-walk", "rounds-broadcast",
)  # fmt: skip


def measure_plain(quick: bool) -> float:
    """CPU µs per round of the plain loop, in a fresh child (the exact workloads' size)."""
    workload = WORKLOADS["exact-broadcast"]
    nodes, rounds = workload.quick if quick else workload.full
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.plain_simpy", "--json", "--rounds", str(rounds),
         "--nodes", str(nodes)],
        capture_output=True, text=True, cwd=REPO, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])["cpu_us_per_round"]


def spread(values: list[float]) -> str:
    """The median, with the range when there are several values."""
    median = statistics.median(values)
    if len(values) == 1:
        return f"{median:9.0f}"
    return f"{median:9.0f} ({min(values):.0f}–{max(values):.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--repeat", type=int, default=1, help="measurements of each (1)")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, "
          f"Python {platform.python_version()}")  # fmt: skip
    cpu: dict[str, list[float]] = {name: [] for name in ("plain", *ORDER)}
    for _ in range(args.repeat):
        cpu["plain"].append(measure_plain(args.quick))
        for name in ORDER:
            cpu[name].append(measure(name, quick=args.quick)["cpu_us_per_round"])
    print("CPU µs per simulated round (median, range over repeats); a ratio is the median and")
    print("range over the repeats of its two figures' quotient in that repeat")
    print(f"  {'plain SimPy push-pull loop':50s}{spread(cpu['plain'])}")
    for name in ORDER:
        line = f"  netsim {WORKLOADS[name].title:43s}{spread(cpu[name])}"
        if name.startswith("exact"):
            line += f"   {ratios(cpu[name], cpu['plain'])} the plain loop"
        if name == "rounds-broadcast":
            line += f"   {ratios(cpu[name], cpu['rounds-walk'])} the rounds walk"
        print(line)


def ratios(numerators: list[float], denominators: list[float]) -> str:
    """The median of the per-repeat ratios, with their range when there are several."""
    values = [a / b for a, b in zip(numerators, denominators, strict=True)]
    median = statistics.median(values)
    if len(values) == 1:
        return f"{median:.2f}×"
    return f"{median:.2f}× ({min(values):.2f}–{max(values):.2f})"


if __name__ == "__main__":
    main()
