"""Benchmark: DOLA rounds (Li et al.): 1,000 nodes × 1,000 dense features, and RCV1's dimension.

    python -m benchmarks.dola_rounds            # both cases, 1,000 rounds each (about a minute)
    python -m benchmarks.dola_rounds --rounds 100   # a quick look
    python -m benchmarks.dola_rounds --quick        # 5 rounds: a smoke test

1. Dense: m = 1,000 nodes, n = 1,000 features (synthetic data in the unit ball), a random
   10-regular topology, each node talking to half its neighbours, ε-DP Alg. 1: every round
   mixes (nnz(A_t) · n), steps all nodes (m · n) and draws m · n = 10⁶ Laplace variates.
2. Sparse: m = 64 nodes, n = 47,236 features (the RCV1 dimension; synthetic sparse rows with
   75 non-zeros), the same algorithm: 3·10⁶ Laplace draws per round on dense iterates.

The whole simulation runs (SimPy round process, mixing matrices, Assumption-2 checks, the
privacy ledger, metrics every 10 rounds); regret checkpoints are off (they solve hindsight
problems after the run and are measured separately). Each case runs in a fresh child process.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
from netsim.log import EventLog
from netsim.scenario.build import build_run
from netsim.scenario.loader import validate_scenario
args = json.loads(sys.argv[1])
scenario = validate_scenario(args["scenario"], source="benchmark", base_dir=None)
started = time.perf_counter()
built = build_run(scenario, EventLog())
setup = time.perf_counter() - started
started = time.perf_counter()
built.sim.run(scenario.duration)
wall = time.perf_counter() - started
rounds = built["dola"].round_index
print(json.dumps({
    "setup_s": setup, "wall_s": wall, "rounds": rounds,
    "ms_per_round": 1e3 * wall / rounds,
    "laplace_draws": rounds * scenario.nodes * built["dola"].learner.n,
    "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "mean_links": float(built.sim.log.to_frames()["dola_mixing"]["links"].mean()),
}))
"""


def scenario(nodes: int, rounds: int, data: dict, topology: dict) -> dict:
    """A DOLA scenario of ``rounds`` one-second rounds (Alg. 1, ε = 1, hinge loss). A node's
    shard holds some tens of examples, one used per round: ``max_passes`` (at most one pass
    a round) lets a run of more rounds reuse them; each release then spends ε / passes, the
    same work."""
    return {
        "name": "dola-benchmark",
        "seed": 1,
        "nodes": nodes,
        "duration": rounds,
        "topology": topology,
        "dola": {
            "data": data,
            "algorithm": "laplace",
            "epsilon": 1.0,
            "max_passes": rounds,
            "regret_checkpoints": 0,
            "evaluate_every": 10,
        },
    }


CASES = {
    "dense m=1000 n=1000": lambda rounds: scenario(
        1000,
        rounds,
        {"name": "synthetic_ball", "options": {"examples": 20000, "features": 1000}},
        {"kind": "random_regular", "degree": 10},
    ),
    "sparse m=64 n=47236": lambda rounds: scenario(
        64,
        rounds,
        {
            "name": "synthetic_sparse",
            "options": {"examples": 20242, "features": 47236, "nonzeros": 75},
        },
        {"kind": "random_regular", "degree": 6},
    ),
}


def measure(spec: dict) -> dict:
    """Run the scenario ``spec`` in a child process; its figures."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps({"scenario": spec})],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"benchmark run failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1000, help="rounds per case (1000)")
    parser.add_argument("--quick", action="store_true", help="5 rounds: a smoke test")
    args = parser.parse_args()
    if args.quick:
        args.rounds = 5
    cpu = platform.processor() or "cpu"
    print(f"machine: {platform.machine()}, {cpu}, python {sys.version.split()[0]}")
    for name, build in CASES.items():
        r = measure(build(args.rounds))
        print(
            f"{name}: {r['rounds']} rounds in {r['wall_s']:.1f} s "
            f"({r['ms_per_round']:.1f} ms/round; set-up {r['setup_s']:.1f} s), "
            f"{r['laplace_draws']:.3g} Laplace draws, mean links/round {r['mean_links']:.0f}, "
            f"peak {r['peak_mb']:.0f} MB"
        )


if __name__ == "__main__":
    main()
