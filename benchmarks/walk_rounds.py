"""Benchmark: the random walk service at the paper's scale in ``rounds`` mode.

    python -m benchmarks.walk_rounds                # the full benchmark (about 10 minutes)
    python -m benchmarks.walk_rounds --quick        # short windows only (about a minute)
    python -m benchmarks.walk_rounds --smoke        # tiny sizes: a smoke test, no figures

1. The paper's configuration (Hegedűs et al. 2016 §5.2: N = 10,000, 50 fixed neighbours,
   STUNner churn, Δ = 100 ms, δ_rw = Δ, δ = δ_rw + 10Δ) for 2 simulated days in rounds mode:
   wall time, peak memory, exchanges and walk steps per second.
2. The same scenario over a short window in exact and in rounds mode: the speed ratio.
3. Cost per simulated round for N = 10³, 10⁴, 10⁵ (rounds mode), against online nodes.

Each measurement runs in a fresh child process, so its peak memory is its own. Without
``../shared/data`` the STUNner trace is replaced by synthetic churn with a similar online
fraction, and the output says so.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAPER = REPO / "scenarios" / "walk" / "paper-drw1-d10-kill0.yaml"
SYNTHETIC_CHURN = {
    "kind": "synthetic",
    "online": {"dist": "lognormal", "median": "7min", "sigma": 1.6},
    "offline": {"dist": "lognormal", "median": "30min", "sigma": 1.6},
}

CHILD = r"""
import json, resource, sys, time
from netsim.log import EventLog
from netsim.scenario.build import build_run
from netsim.scenario.loader import load_scenario
args = json.loads(sys.argv[1])
scenario = load_scenario(args["path"], args["overrides"])
started = time.perf_counter()
built = build_run(scenario, EventLog())
setup = time.perf_counter() - started
started = time.perf_counter()
built.sim.run(scenario.duration)
wall = time.perf_counter() - started
online = built.sim.log.to_frames()["samples"]["online"]
print(json.dumps({
    "setup_s": setup, "wall_s": wall,
    "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "exchanges": built["gossip"].exchanges, "rounds": getattr(built["gossip"], "rounds", None),
    "walk_steps": built["walk"].counts["steps"], "mean_online": float(online.mean()),
    "mean_walks": built["walk"].mean_propagating(),
    "restarts": built["walk"].counts["restarts"],
}))
"""


def measure(overrides: list[str], path: Path = PAPER) -> dict:
    """Run the scenario at ``path`` with ``overrides`` in a child process; its figures."""
    payload = json.dumps({"path": str(path), "overrides": overrides})
    done = subprocess.run(
        [sys.executable, "-c", CHILD, payload], capture_output=True, text=True, cwd=REPO
    )
    if done.returncode != 0:
        raise SystemExit(f"benchmark run failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def churn_overrides() -> tuple[list[str], str]:
    trace = REPO.parent / "shared" / "data" / "traces" / "stunner" / "peersim_session_100.txt"
    if trace.is_file():
        return [], "STUNner trace (../shared/data)"
    return [f"churn={json.dumps(SYNTHETIC_CHURN)}"], "synthetic churn (STUNner trace absent)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short windows only")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: a smoke test")
    args = parser.parse_args()
    args.quick = args.quick or args.smoke
    # the smoke test runs every part on a few hundred nodes for seconds
    small = ["nodes=300"] if args.smoke else []
    churn, churn_note = churn_overrides()
    print(
        f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, "
        f"Python {platform.python_version()}; churn: {churn_note}"
    )

    if not args.quick:
        full = measure([*churn, "gossip.mode=rounds"])
        print("\n1. paper configuration, N = 10,000, 2 simulated days, rounds mode")
        print(
            f"   wall {full['wall_s']:.1f} s (+ {full['setup_s']:.1f} s set-up), peak memory "
            f"{full['peak_mb']:.0f} MB"
        )
        print(
            f"   {full['exchanges'] / full['wall_s']:.3g} exchanges/s, "
            f"{full['walk_steps'] / full['wall_s']:.3g} walk steps/s, "
            f"{full['wall_s'] / full['rounds'] * 1e6:.0f} µs per round "
            f"(mean {full['mean_online']:.0f} online nodes)"
        )
        print(f"   mean concurrent walks {full['mean_walks']:.3f}, restarts {full['restarts']}")

    window = "10s" if args.smoke else "2min"
    exact = measure([*churn, *small, "gossip.mode=exact", f"duration={window}"])
    rounds = measure([*churn, *small, "gossip.mode=rounds", f"duration={window}"])
    print(
        f"\n2. same scenario, first {window}: exact {exact['wall_s']:.1f} s, rounds "
        f"{rounds['wall_s']:.2f} s: rounds is {exact['wall_s'] / rounds['wall_s']:.0f}× faster"
    )

    print(f"\n3. cost per simulated round (rounds mode, {'30 s' if args.smoke else '10 min'} "
          "simulated)")  # fmt: skip
    print("   nodes    online   µs/round   ns per online node")
    for nodes in (200, 300) if args.smoke else (1_000, 10_000, 100_000):
        duration = "30s" if args.smoke else "10min"
        row = measure([*churn, "gossip.mode=rounds", f"duration={duration}", f"nodes={nodes}"])
        per_round = row["wall_s"] / row["rounds"] * 1e6
        print(
            f"   {nodes:7d}  {row['mean_online']:7.0f}  {per_round:9.0f}  "
            f"{per_round * 1e3 / max(row['mean_online'], 1):10.0f}"
        )


if __name__ == "__main__":
    main()
