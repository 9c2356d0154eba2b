"""Benchmark: a decentralised SGD run with DECOR's noise, accounted per observer from its
messages (``netsim/privacy/linear.py``), at the network-DP papers' scale.

    python -m benchmarks.linear_accountant               # 2,048 nodes, 100 rounds, 64 observers
    python -m benchmarks.linear_accountant --observers 8 # a shorter look (same run)
    python -m benchmarks.linear_accountant --quick       # 256 nodes, 10 rounds, 4 observers
    python -m benchmarks.linear_accountant --all-pairs   # 500 nodes, 100 rounds, local noise,
                                                         # every node an observer (249,500 pairs)
    python -m benchmarks.linear_accountant --all-pairs --observers 16   # a sample of that run

The run: Spambase (shipped), one record per node, a random 6-regular topology, DECOR noise
(σ = 1, σ_cor = 4), every node online, 100 synchronous rounds; ``privacy.model: network`` with
``trust: pndp`` and a uniform sample of observers, node-level units. The whole run goes
through ``netsim.run`` in a fresh child process; the figures are CPU seconds of that process
(the simulation, then the accounting at the end), its peak resident memory, and the
accounting's CPU seconds per observer, and of these the views' (``dsgd.privacy.account``: the
linear accountant) apart from the tables and the published bounds' audit. Each observer's view
has about 6 × 100 rows (the messages it receives) and the run's noise has 2,048 × 100
independent parts and 6,144 × 100 secrets, so every view is accounted from its Gram
(``linear.FACTOR_LIMIT``).

``--all-pairs`` is decentralised SGD with independent (``local``) noise, Muffliato-SGD's
setting: 500 nodes, 100 rounds, every node an observer under ``trust: pndp`` (each view 600
rows, the run's noise 50,000 independent parts). ``--noise``, ``--trust``, ``--nodes``,
``--rounds`` and ``--observers`` (a sample instead of every node) change one thing of either
run; ``--all-observers`` accounts every node of any run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
from netsim.log import EventLog
from netsim.scenario.build import build_run
from netsim.scenario.loader import validate_scenario
from netsim.algorithms.dsgd import privacy
args = json.loads(sys.argv[1])
views = {"cpu": 0.0, "wall": 0.0}
every_view = privacy.account


def timed_views(*a, **k):
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        return every_view(*a, **k)
    finally:
        views["cpu"] += time.process_time() - cpu
        views["wall"] += time.perf_counter() - wall


privacy.account = timed_views  # the linear accountant's part of the accounting
scenario = validate_scenario(args["scenario"], source="benchmark", base_dir=None)
cpu = time.process_time()
built = build_run(scenario, EventLog())
learner = built["dsgd"]
account = learner.account_privacy
# timed on its own below: the run's end (learner.finish) writes the summary without it
learner.account_privacy = lambda: (float("nan"), float("nan"))
built.sim.run(scenario.duration)
simulated = time.process_time() - cpu
cpu, wall = time.process_time(), time.perf_counter()
account()
accounted, account_wall = time.process_time() - cpu, time.perf_counter() - wall
frames = built.sim.log.to_frames()
pairs = frames["linear_pairs"]
print(json.dumps({
    "simulate_cpu_s": simulated, "account_cpu_s": accounted, "account_wall_s": account_wall,
    "views_cpu_s": views["cpu"], "views_wall_s": views["wall"],
    "observers": int(pairs["observer"].nunique()), "pairs": len(pairs),
    "worst_epsilon": float(pairs["epsilon"].max()),
    "median_epsilon": float(pairs["epsilon"].median()),
    "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


#: The noise of each ``--noise`` (σ = 1 in units of C/b; DECOR's secrets σ_cor = 4).
NOISES = {
    "decor": {"kind": "decor", "noise_multiplier": 1.0, "correlated_multiplier": 4.0},
    "local": {"kind": "local", "noise_multiplier": 1.0},
}


def scenario(
    nodes: int, rounds: int, observers: int | None, noise: str = "decor", trust: str = "pndp"
) -> dict:
    """The benchmark's run as a scenario mapping (``observers`` None: every node)."""
    privacy: dict = {"model": "network", "trust": trust, "delta": 1e-5}
    if observers is not None:
        privacy["observers"] = observers
    return {
        "name": "linear-accountant-benchmark", "seed": 1, "nodes": nodes,
        "duration": f"{rounds}s", "topology": {"kind": "random_regular", "degree": 6},
        "dsgd": {
            "dataset": {"name": "spambase"}, "records_per_node": 1, "batch": 1, "clip": 1.0,
            "learning_rate": 0.5, "rounds": rounds, "evaluate_every": rounds,
            "noise": NOISES[noise], "unit": "node",
        },
        "privacy": privacy,
    }  # fmt: skip


def measure(
    nodes: int, rounds: int, observers: int | None, noise: str = "decor", trust: str = "pndp"
) -> dict:
    """One run in a fresh child process."""
    argument = json.dumps({"scenario": scenario(nodes, rounds, observers, noise, trust)})
    done = subprocess.run([sys.executable, "-c", CHILD, argument], capture_output=True,
                          text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the benchmark's run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, help="default 2,048 (--all-pairs: 500)")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--observers", type=int, help="a sample (default 64; --all-pairs: all)")
    parser.add_argument("--all-observers", action="store_true", help="every node an observer")
    parser.add_argument("--noise", choices=sorted(NOISES), help="decor (--all-pairs: local)")
    parser.add_argument("--trust", choices=("pndp", "secldp", "ldp"), default="pndp")
    parser.add_argument("--quick", action="store_true", help="256 nodes, 10 rounds, 4 observers")
    parser.add_argument(
        "--all-pairs", action="store_true", help="500 nodes, 100 rounds, local noise, every node"
    )
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.rounds, args.observers = 256, 10, 4
    pairs = args.all_pairs
    nodes = args.nodes or (500 if pairs else 2048)
    noise = args.noise or ("local" if pairs else "decor")
    every = args.all_observers or (pairs and args.observers is None)
    observers = None if every else (args.observers or 64)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,) * 3
    result = measure(nodes, args.rounds, observers, noise, args.trust)
    print(f"machine: {platform.processor() or platform.machine()}, {platform.system()}, "
          f"{os.cpu_count()} CPUs, load average {load[0]:.2f} before the run")  # fmt: skip
    print(f"{nodes} nodes, {args.rounds} rounds, {noise} noise, trust {args.trust}, "
          f"{result['observers']} observers ({result['pairs']:,} pairs)")  # fmt: skip
    print(f"simulation: {result['simulate_cpu_s']:.1f} s CPU")
    per_observer = result["account_cpu_s"] / max(result["observers"], 1)
    total = result["account_cpu_s"]
    wall = result["account_wall_s"]
    wall_each = wall / max(result["observers"], 1)
    print(f"accounting: {total:.1f} s CPU ({per_observer:.2f} s CPU per observer), "
          f"{wall:.1f} s wall ({wall_each:.2f} s per observer)")  # fmt: skip
    each = max(result["observers"], 1)
    print(f"  of which the views (linear accountant): {result['views_cpu_s']:.1f} s CPU "
          f"({result['views_cpu_s'] / each:.2f} s per observer), {result['views_wall_s']:.1f} s "
          f"wall ({result['views_wall_s'] / each:.2f} s per observer); the rest is the tables "
          "and the published bounds' audit")  # fmt: skip
    print(f"worst pair ε = {result['worst_epsilon']:.3g}, median {result['median_epsilon']:.3g}")
    print(f"peak resident memory: {result['peak_mb']:.0f} MB")


if __name__ == "__main__":
    main()
