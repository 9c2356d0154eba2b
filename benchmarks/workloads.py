"""The workloads the speed benchmarks measure, and the child process that measures one.

The fixed-online workload: N = 10,000 nodes, a fixed random 30% online for the whole run (synthetic
churn whose constant on and off periods, 3,000 and 7,000 days, are far longer than any run: each
node is online with probability 0.3 from the start and stays so), 50 random out-neighbours,
Δ = 100 ms, push-pull gossip, messages taking a constant 10 ms. On it: a broadcast, or the
random walk service (δ_rw = Δ, δ = δ_rw + 10Δ, the paper's), each in exact mode and in rounds
mode. Plus the DOLA round learner on synthetic data. Every workload is plain scenario data (no
files), so any commit of netsim can run it: :mod:`benchmarks.compare` measures two commits
alternately with the same child code.

A measurement runs in a fresh child process (``python -c CHILD``): it validates the scenario,
builds the run, runs the first :data:`WARMUP_ROUNDS` rounds untimed, and times the rest of
``sim.run`` only — CPU time (``time.process_time``) and wall time — then prints one JSON line
with the CPU and wall microseconds per simulated round measured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PERIOD = 0.1  # Δ, seconds
#: Rounds run untimed before the measurement (a quarter of a short run at most): the first
#: call of each compiled kernel loads it from numba's cache (or compiles it), some 0.1 s that
#: would otherwise be spread over the rounds measured.
WARMUP_ROUNDS = 10
#: The seed of PeerSim's workloads: at N = 10,000 its fixed online set has exactly
#: round(0.3·N) = 3,000 nodes, as PeerSim's ``Online`` initializer makes it (seed 1's has 2,963).
PEERSIM_SEED = 89

CHILD = r"""
import json, resource, sys, time
from netsim.log import EventLog
from netsim.scenario.build import build_run
from netsim.scenario.loader import validate_scenario
args = json.loads(sys.argv[1])
scenario = validate_scenario(args["scenario"], source="benchmark", base_dir=None)
# the engine only when asked for and known: a commit from before the compiled core has no such
# argument (and runs exact mode on SimPy)
import inspect
known = "engine" in inspect.signature(build_run).parameters
options = {"engine": args["engine"]} if args["engine"] and known else {}
built = build_run(scenario, EventLog(), **options)
# the first rounds, untimed: they load (or compile) the compiled kernels
built.sim.env.run(until=args["warmup"])
cpu, wall = time.process_time(), time.perf_counter()
built.sim.run(scenario.duration)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
rounds = args["rounds"]
print(json.dumps({
    "cpu_us_per_round": 1e6 * cpu / rounds, "wall_us_per_round": 1e6 * wall / rounds,
    "rounds": rounds, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


def fixed_online(
    nodes: int, rounds: int, *, mode: str, app: str, update_every: int = 10,
    uniform_delays: bool = False, seed: int = 1,
) -> dict[str, Any]:  # fmt: skip
    """The fixed-online workload: ``app`` (``broadcast`` or ``walk``) on push-pull gossip in
    ``mode`` (``exact`` or ``rounds``) for ``rounds`` periods; the broadcast starts a new
    update every ``update_every`` rounds. PeerSim's event-driven workload: a new update every
    round and messages taking a uniform 10–50 ms (``uniform_delays``) instead of 10 ms, at
    :data:`PEERSIM_SEED`."""
    data: dict[str, Any] = {
        "name": f"{mode}-{app}",
        "seed": seed,
        "nodes": nodes,
        "duration": rounds * PERIOD,
        "topology": {"kind": "k_out", "k": 50},
        "churn": {
            "kind": "synthetic",
            "online": {"dist": "constant", "value": "3000d"},
            "offline": {"dist": "constant", "value": "7000d"},
        },
        "links": {
            "delay": {"dist": "uniform", "low": 0.01, "high": 0.05}
            if uniform_delays
            else {"dist": "constant", "value": 0.01}
        },
        "gossip": {"period": PERIOD, "mode": mode},
    }
    if app == "broadcast":
        data["broadcast"] = {"interval": update_every * PERIOD}
    else:
        data["walk"] = {"kind": "service", "transfer_time": PERIOD, "timeout": 11 * PERIOD}
    return data


def dola(nodes: int, rounds: int) -> dict[str, Any]:
    """DOLA (Alg. 1, ε = 1) on synthetic data in the unit ball: ``rounds`` one-second rounds,
    one example per node per round (``max_passes`` lets a short shard be reused)."""
    examples = max(20 * nodes, 2000)
    return {
        "name": "dola",
        "seed": 1,
        "nodes": nodes,
        "duration": float(rounds),
        "topology": {"kind": "random_regular", "degree": 10},
        "dola": {
            "data": {"name": "synthetic_ball", "options": {"examples": examples, "features": 100}},
            "algorithm": "laplace",
            "epsilon": 1.0,
            "max_passes": rounds,  # an allowance: at most one pass a round
            "regret_checkpoints": 0,
            "evaluate_every": 10,
        },
    }


@dataclass(frozen=True)
class Workload:
    """A named workload: its scenario at full and at smoke scale, its rounds, and the engine
    of exact mode (``None``: the default, the compiled core where it applies)."""

    title: str
    scenario: Callable[[int, int], dict[str, Any]]
    full: tuple[int, int]  # (nodes, rounds)
    quick: tuple[int, int]
    engine: str | None = None

    def data(self, quick: bool) -> tuple[dict[str, Any], int]:
        nodes, rounds = self.quick if quick else self.full
        return self.scenario(nodes, rounds), rounds


WORKLOADS: dict[str, Workload] = {
    "exact-broadcast": Workload(
        "exact mode, broadcast",
        lambda n, r: fixed_online(n, r, mode="exact", app="broadcast"), (10_000, 300), (500, 20),
    ),
    "exact-broadcast-simpy": Workload(
        "exact mode, broadcast, on SimPy",
        lambda n, r: fixed_online(n, r, mode="exact", app="broadcast"), (10_000, 300), (500, 20),
        engine="simpy",
    ),
    "exact-broadcast-peersim": Workload(
        "exact mode, broadcast, PeerSim's workload",
        lambda n, r: fixed_online(n, r, mode="exact", app="broadcast", update_every=1,
                                  uniform_delays=True, seed=PEERSIM_SEED),
        (10_000, 300), (500, 20),
    ),
    "exact-walk": Workload(
        "exact mode, walk service",
        lambda n, r: fixed_online(n, r, mode="exact", app="walk"), (10_000, 300), (500, 20),
    ),
    "exact-walk-simpy": Workload(
        "exact mode, walk service, on SimPy",
        lambda n, r: fixed_online(n, r, mode="exact", app="walk"), (10_000, 300), (500, 20),
        engine="simpy",
    ),
    "exact-walk-peersim": Workload(
        "exact mode, walk service, PeerSim's workload",
        lambda n, r: fixed_online(n, r, mode="exact", app="walk", uniform_delays=True,
                                  seed=PEERSIM_SEED),
        (10_000, 300), (500, 20),
    ),
    "rounds-walk": Workload(
        "rounds mode, walk service",
        lambda n, r: fixed_online(n, r, mode="rounds", app="walk"), (10_000, 3000), (500, 50),
    ),
    "rounds-broadcast": Workload(
        "rounds mode, broadcast",
        lambda n, r: fixed_online(n, r, mode="rounds", app="broadcast"), (10_000, 3000),
        (500, 50),
    ),
    "rounds-broadcast-every": Workload(
        "rounds mode, broadcast, a new update every round",
        lambda n, r: fixed_online(n, r, mode="rounds", app="broadcast", update_every=1,
                                  seed=PEERSIM_SEED),
        (10_000, 3000), (500, 50),
    ),
    "dola": Workload("DOLA, 100 features", dola, (1000, 200), (50, 20)),
}  # fmt: skip


def measure(
    name: str, *, quick: bool = False, tree: Path = REPO, python: str = sys.executable
) -> dict[str, float]:
    """Run workload ``name`` with the netsim of the checkout ``tree`` in a fresh child; its
    figures. A failed child ends the benchmark with its error output."""
    data, rounds = WORKLOADS[name].data(quick)
    warmup_rounds = min(WARMUP_ROUNDS, rounds // 4)
    period = float(data["duration"]) / rounds
    payload = {"scenario": data, "rounds": rounds - warmup_rounds,
               "warmup": warmup_rounds * period, "engine": WORKLOADS[name].engine}  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [python, "-c", CHILD, json.dumps(payload)],
        capture_output=True, text=True, cwd=tree, env=env,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"benchmark {name} failed in {tree}:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
