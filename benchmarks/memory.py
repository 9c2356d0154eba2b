"""Benchmark: memory over simulated time, for long runs (does it stay flat?).

    python -m benchmarks.memory gossip-learning --hours 24   # 4,140 nodes, DP-SGD-∞
    python -m benchmarks.memory walk --hours 48              # N = 10,000, 2 days, rounds
    python -m benchmarks.memory gossip-learning --hours 0.1  # a quick look
    python -m benchmarks.memory gossip-learning --hours 24 --period 30s  # 24 h, fewer messages

1. ``gossip-learning``: ``scenarios/learning/spambase-gossip-learning.yaml`` under DP-SGD-∞
   (every visit charges the visited record, so the privacy ledger grows fastest): 4,140
   models sent every second. Before the ledger streamed to disk this grew by about 870
   bytes per charge, 13 GB per simulated hour. ``--period`` sets the gossip period Δ (1 s in
   the scenario): resident memory depends on the rows written, not on simulated time, so a
   longer period reaches 24 simulated hours with fewer charges in reach of one session.
2. ``walk``: ``scenarios/walk/paper-drw1-d10-kill5.yaml`` in rounds mode (the paper's
   scale).

The run writes its run directory to a temporary directory, as ``netsim run`` does, in a fresh
child process. Every ``--every`` simulated seconds the child prints its resident memory
(``/proc/self/statm``); at the end the peak (``ru_maxrss``), the wall time, the growth of
resident memory between the first and the last tenth of the run, its CPU time (build and run),
the load average, what ran the compiled kernels (``netsim compile``: :mod:`netsim.compiled`;
``NETSIM_AOT=0`` runs numba's JIT), the import floor (resident
memory once netsim's run modules are imported, before the scenario is read) and which heavy
modules the run loaded (pandas, scipy.stats, networkx, dp-accounting, matplotlib, dask,
scikit-learn, JAX, PyTorch: none for the walk case, ``tests/test_footprint.py``; and numba,
absent when the kernels were compiled ahead of time).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = {
    "gossip-learning": (
        REPO / "scenarios" / "learning" / "spambase-gossip-learning.yaml",
        ["learning.algorithm=dp-sgd-inf", "metrics.sample_every=10min"],
    ),
    "walk": (
        REPO / "scenarios" / "walk" / "paper-drw1-d10-kill5.yaml",
        ["gossip.mode=rounds"],
    ),
}

CHILD = r"""
import json, os, resource, sys, tempfile, time
from pathlib import Path
page = os.sysconf("SC_PAGE_SIZE")

def rss_mb():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * page / 2**20

from netsim.log import EventLog
from netsim.scenario.build import build_run
from netsim.scenario.loader import load_scenario
imports_mb = rss_mb()
args = json.loads(sys.argv[1])
scenario = load_scenario(Path(args["path"]), args["overrides"])

samples = []
with tempfile.TemporaryDirectory() as directory:
    log = EventLog(Path(directory))
    started = time.perf_counter()
    cpu_started = time.process_time()
    built = build_run(scenario, log)

    def sample():
        samples.append((built.sim.now, rss_mb()))
        print(json.dumps({"hours": built.sim.now / 3600, "rss_mb": round(samples[-1][1], 1)}),
              flush=True)

    built.sim.every(args["every"], sample, first=0.0)
    built.sim.run(scenario.duration)
    log.close()
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
tenth = max(len(samples) // 10, 1)
first = sum(m for _, m in samples[:tenth]) / tenth
last = sum(m for _, m in samples[-tenth:]) / tenth
heavy = ("pandas", "scipy.stats", "networkx", "dp_accounting", "matplotlib", "dask", "sklearn",
         "jax", "torch", "numba")
import netsim.compiled
print(json.dumps({"done": True, "wall_s": round(wall, 1), "cpu_s": round(cpu, 2),
                  "load": [round(x, 1) for x in os.getloadavg()],
                  "kernels": netsim.compiled.kernels_engine(),
                  "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "imports_mb": round(imports_mb, 1),
                  "rss_first_tenth_mb": round(first, 1), "rss_last_tenth_mb": round(last, 1),
                  "heavy_modules_loaded": [name for name in heavy if name in sys.modules]}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("--hours", type=float, default=1.0, help="simulated hours")
    parser.add_argument("--every", type=float, default=None, help="simulated s between samples")
    parser.add_argument(
        "--period", default=None, help="gossip-learning period Δ, e.g. 30s (default: 1s)"
    )
    args = parser.parse_args(argv)
    path, overrides = CASES[args.case]
    if args.period is not None:
        if args.case != "gossip-learning":
            parser.error("--period applies to the gossip-learning case only")
        overrides = [*overrides, f"gossip_learning.period={args.period}"]
    seconds = args.hours * 3600
    payload = {
        "path": str(path),
        "overrides": [*overrides, f"duration={seconds:g}s"],
        "every": args.every or max(seconds / 48, 1.0),
    }
    period = f", period {args.period}" if args.period else ""
    machine = platform.processor() or "cpu"
    print(
        f"# {args.case}{period}, {args.hours:g} simulated hours, {machine}, "
        f"Python {platform.python_version()}",
        flush=True,
    )
    result = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(payload)], cwd=REPO, check=False, text=True
    )
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
