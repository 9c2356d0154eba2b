"""Compare the speed of this checkout with another commit, measured alternately.

    python -m benchmarks.compare b5bc1e0                     # every workload, 5 pairs each
    python -m benchmarks.compare HEAD~3 --pairs 9 exact-walk rounds-walk
    python -m benchmarks.compare HEAD --quick --pairs 1      # a smoke test (tiny sizes)

The other commit is checked out into a temporary git worktree (removed afterwards). For every
workload of :mod:`benchmarks.workloads` named (all by default), the two checkouts run it in
turn — this one, the other, the other, this one, … so neither always goes first — each run a
fresh child process timing ``sim.run`` only, after one unmeasured small run of each (which
compiles and caches its kernels). Printed per workload: the median CPU µs per round
of each, and the ratio this/other as the median of the per-pair ratios with their range.
A ratio below 1 means this checkout is faster.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import tempfile
from pathlib import Path

from benchmarks.workloads import REPO, WORKLOADS, measure


def worktree(commit: str, directory: Path) -> Path:
    """Check out ``commit`` of this repository into ``directory`` (a detached worktree)."""
    target = directory / "other"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(target), commit],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return target


def remove_worktree(path: Path) -> None:
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)],
        check=False, capture_output=True,
    )  # fmt: skip


def compare(names: list[str], other: Path, pairs: int, quick: bool) -> list[str]:
    """One line per workload: both medians and the ratio this/other (median, range)."""
    lines = []
    for name in names:
        mine: list[float] = []
        theirs: list[float] = []
        for tree in (REPO, other):  # unmeasured: compiles and caches each one's kernels
            measure(name, quick=True, tree=tree)
        for pair in range(pairs):
            trees = (REPO, other) if pair % 2 == 0 else (other, REPO)
            for tree in trees:
                cpu = measure(name, quick=quick, tree=tree)["cpu_us_per_round"]
                (mine if tree == REPO else theirs).append(cpu)
        ratios = [a / b for a, b in zip(mine, theirs, strict=True)]
        lines.append(
            f"  {name:17s} this {statistics.median(mine):9.0f}  other "
            f"{statistics.median(theirs):9.0f}  this/other {statistics.median(ratios):.3f} "
            f"({min(ratios):.3f}–{max(ratios):.3f}, n = {pairs})"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commit", help="the other commit (a hash, tag, branch, HEAD~n)")
    parser.add_argument("workloads", nargs="*", help=f"of {', '.join(WORKLOADS)} (all)")
    parser.add_argument("--pairs", type=int, default=5, help="alternating pairs (5)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    args = parser.parse_intermixed_args()
    names = list(args.workloads) or list(WORKLOADS)
    unknown = [name for name in names if name not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload {unknown[0]!r}; the workloads: {', '.join(WORKLOADS)}")
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, "
          f"Python {platform.python_version()}; this checkout against {args.commit}")  # fmt: skip
    print("CPU µs per simulated round (median over pairs)")
    with tempfile.TemporaryDirectory(prefix="netsim-compare-") as directory:
        other = worktree(args.commit, Path(directory))
        try:
            for line in compare(names, other, args.pairs, args.quick):
                print(line, flush=True)
        finally:
            remove_worktree(other)


if __name__ == "__main__":
    main()
