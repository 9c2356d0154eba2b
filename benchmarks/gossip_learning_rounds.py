"""Benchmark: gossip learning in rounds mode against exact mode, CPU time per cycle.

    python -m benchmarks.gossip_learning_rounds             # 5 alternating pairs (~2 minutes)
    python -m benchmarks.gossip_learning_rounds --pairs 3
    python -m benchmarks.gossip_learning_rounds --quick     # a smoke test: 300 nodes
    python -m benchmarks.gossip_learning_rounds --write-docs   # and quote it in the docs

The shipped scenario ``scenarios/learning/spambase-gossip-learning.yaml`` (Hegedűs et al. 2016
Alg. 1 on Spambase: 4,140 nodes, one record each, 50 random out-neighbours, Δ = 1 s, the
models evaluated every 10 of their visits and the spread across models every 10 s) under
plain SGD, under DP-SGD-1 (ε = 1, the paper's L2 noise) and under private SGD as the field
runs it (``dp-sgd-gaussian``: Gaussian noise at z = 1.1 composed per record by RDP, Mironov
2017, against (64, 1e-5), which no record reaches in the timed cycles, so every arrival is
composed and charged), in exact and in rounds mode, alternately: exact, rounds, exact,
rounds, … each in a fresh child process. A child builds the run, runs the first
:data:`WARMUP` simulated seconds untimed (the compiled kernels load), then times
``env.run`` over whole sample periods — the cycles only, without the end-of-run tables and
yardsticks — with ``time.process_time``, and prints the CPU seconds per cycle (Δ).

BLAS runs as netsim leaves it (rounds mode limits its own products to one thread: CPU time
counts every thread, and a multi-threaded BLAS spends CPU waiting on small products);
``--blas-threads N`` sets ``OPENBLAS_NUM_THREADS`` and the like in the children.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

from benchmarks import PERFORMANCE_PAGE, REPO, write_output
from benchmarks.anchors import cpu_model

SCENARIO = REPO / "scenarios" / "learning" / "spambase-gossip-learning.yaml"
#: The block of docs/performance.md that quotes this benchmark's output.
DOCS_BLOCK = "gossip-learning-rounds"
#: Simulated seconds run untimed before the measurement.
WARMUP = 2.0
#: Timed cycles per mode (whole sample periods of 10 s): rounds mode is ~20× cheaper a cycle.
CYCLES = {"exact": 20, "rounds": 100}
#: What each case overrides, and whether both modes time the same cycles (those of exact
#: mode): a Gaussian run's records are composed until their budget is spent, so its cycles
#: cost more before than after, and both modes must see the same ones.
CASES: dict[str, tuple[tuple[str, ...], bool]] = {
    "sgd": (("learning.algorithm=sgd",), False),
    "dp-sgd-1": (("learning.algorithm=dp-sgd-1",), False),
    "dp-sgd-gaussian": (
        (
            "learning.algorithm=dp-sgd",
            "learning.noise={kind: gaussian, noise_multiplier: 1.1}",
            "learning.accounting=rdp",
            "learning.epsilon=64",
            "learning.delta=1e-5",
        ),
        True,
    ),
}

CHILD = r"""
import json, sys, time
from pathlib import Path
from netsim.log import EventLog
from netsim.scenario.build import build_run
from netsim.scenario.loader import load_scenario
args = json.loads(sys.argv[1])
scenario = load_scenario(Path(args["path"]), tuple(args["overrides"]))
built = build_run(scenario, EventLog())
built.sim.env.run(until=args["warmup"])
cpu = time.process_time()
built.sim.env.run(until=args["until"])
cpu = time.process_time() - cpu
print(json.dumps({"cpu_s_per_cycle": cpu / args["cycles"]}))
"""


def measure(mode: str, case: str, *, cycles: int, small: bool, threads: int) -> float:
    """CPU seconds per cycle of one run in a fresh child process."""
    overrides = [
        f"gossip_learning.mode={mode}", *CASES[case][0], f"duration={WARMUP + cycles + 1:g}s",
    ]  # fmt: skip
    if small:
        overrides.append("nodes=300")
    payload = {"path": str(SCENARIO), "overrides": overrides, "warmup": WARMUP,
               "until": WARMUP + cycles, "cycles": cycles}  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if threads:
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[name] = str(threads)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(payload)],
        capture_output=True, text=True, cwd=REPO, env=env,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"benchmark run failed:\n{done.stderr[-4000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["cpu_s_per_cycle"])


def spread(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
    """``median [min–max]`` of ``values`` times ``scale``."""
    low, mid, high = (scale * v for v in (min(values), statistics.median(values), max(values)))
    return f"{mid:.{digits}f} [{low:.{digits}f}–{high:.{digits}f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=5, help="alternating exact/rounds pairs")
    parser.add_argument("--quick", action="store_true", help="300 nodes, 1 pair: a smoke test")
    parser.add_argument("--blas-threads", type=int, default=0, help="0: as netsim leaves it")
    parser.add_argument(
        "--write-docs", action="store_true",
        help=f"also write the output into docs/performance.md's block {DOCS_BLOCK!r}",
    )  # fmt: skip
    args = parser.parse_args()
    if args.write_docs and args.quick:
        parser.error("--write-docs quotes the full benchmark: not with --quick")
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    pairs = 1 if args.quick else args.pairs
    cycles = {mode: 10 for mode in CYCLES} if args.quick else CYCLES
    threads = args.blas_threads
    say(
        f"machine: {platform.machine()}, {cpu_model()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; BLAS threads: {threads or 'as netsim leaves them'}"
    )
    nodes = "300" if args.quick else "4,140"
    say(
        f"gossip learning, Spambase, {nodes} nodes, Δ = 1 s: CPU per cycle, median [range] of "
        f"{pairs} alternating pairs"
    )
    for case, (_, same_cycles) in CASES.items():
        exact, rounds = [], []
        for _ in range(pairs):
            for mode, into in (("exact", exact), ("rounds", rounds)):
                timed = cycles["exact"] if same_cycles else cycles[mode]
                into.append(measure(mode, case, cycles=timed, small=args.quick, threads=threads))
        ratios = [e / r for e, r in zip(exact, rounds, strict=True)]
        say(
            f"  {case:15s} exact {spread(exact, 1e3)} ms, rounds {spread(rounds, 1e3, 2)} "
            f"ms: rounds {spread(ratios)}× exact mode's speed"
        )
    if args.write_docs and write_output(DOCS_BLOCK, "\n".join(lines)):
        print(f"wrote the output into {PERFORMANCE_PAGE.relative_to(REPO)}")


if __name__ == "__main__":
    main()
