"""Benchmark: exact-mode gossip learning against another commit, CPU time per message.

    python -m benchmarks.gossip_learning_exact e216b72             # 5 alternating pairs
    python -m benchmarks.gossip_learning_exact e216b72 --pairs 3
    python -m benchmarks.gossip_learning_exact HEAD --quick        # a smoke test: 300 nodes

The shipped scenario ``scenarios/learning/spambase-gossip-learning.yaml`` (4,140 nodes, one
record each, no churn: every node sends its model once a cycle, so a cycle is 4,140 messages)
in exact mode under plain SGD and under DP-SGD-1, run by this checkout and by the other
commit (a temporary git worktree) in turn — this, other, other, this, … — each run in a fresh
child process that times ``env.run`` over :data:`CYCLES` cycles after :data:`WARMUP` untimed
seconds (the child of :mod:`benchmarks.gossip_learning_rounds`; end-of-run tables and
yardsticks excluded). Printed per algorithm: the median CPU µs per message of each checkout
and the ratio this/other as the median of the per-pair ratios with their range.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.anchors import cpu_model
from benchmarks.compare import remove_worktree, worktree
from benchmarks.gossip_learning_rounds import CHILD, WARMUP, spread

SCENARIO = Path("scenarios") / "learning" / "spambase-gossip-learning.yaml"
#: Timed cycles (Δ = 1 s) per run.
CYCLES = 10
NODES = {"full": 4140, "quick": 300}


#: The algorithms compared across commits (exact mode's per-message cost).
ALGORITHMS = ("sgd", "dp-sgd-1")


def measure(tree: Path, algorithm: str, *, nodes: int, cycles: int) -> float:
    """CPU µs per message of one exact-mode run by the checkout ``tree``, in a fresh child."""
    overrides = [f"learning.algorithm={algorithm}", f"duration={WARMUP + cycles + 1:g}s",
                 f"nodes={nodes}"]  # fmt: skip
    payload = {"path": str(tree / SCENARIO), "overrides": overrides, "warmup": WARMUP,
               "until": WARMUP + cycles, "cycles": cycles}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(payload)], capture_output=True, text=True,
        cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"benchmark run failed in {tree}:\n{done.stderr[-4000:]}")
    per_cycle = float(json.loads(done.stdout.strip().splitlines()[-1])["cpu_s_per_cycle"])
    return 1e6 * per_cycle / nodes  # one message per node and cycle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commit", help="the other commit (a hash, tag, branch, HEAD~n)")
    parser.add_argument("--pairs", type=int, default=5, help="alternating pairs (5)")
    parser.add_argument("--quick", action="store_true", help="300 nodes, 1 pair: a smoke test")
    args = parser.parse_args()
    pairs = 1 if args.quick else args.pairs
    nodes = NODES["quick" if args.quick else "full"]
    here = Path(__file__).resolve().parents[1]
    print(f"machine: {platform.machine()}, {cpu_model()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; this checkout against {args.commit}")  # fmt: skip
    print(f"exact-mode gossip learning, Spambase, {nodes:,} nodes, Δ = 1 s, {CYCLES} cycles: "
          f"CPU µs per message, median [range] of {pairs} alternating pairs")  # fmt: skip
    with tempfile.TemporaryDirectory() as directory:
        other = worktree(args.commit, Path(directory))
        try:
            for algorithm in ALGORITHMS:
                mine: list[float] = []
                theirs: list[float] = []
                for pair in range(pairs):
                    trees = (here, other) if pair % 2 == 0 else (other, here)
                    for tree in trees:
                        cpu = measure(tree, algorithm, nodes=nodes, cycles=CYCLES)
                        (mine if tree == here else theirs).append(cpu)
                ratios = [a / b for a, b in zip(mine, theirs, strict=True)]
                print(f"  {algorithm:9s} this {spread(mine)}  other {spread(theirs)}  "
                      f"this/other {spread(ratios, digits=3)}")  # fmt: skip
        finally:
            remove_worktree(other)
    print("(below 1: this checkout is faster)")


if __name__ == "__main__":
    main()
