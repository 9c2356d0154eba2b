"""Benchmark: peak memory of a run at 10⁶ nodes (the target: under 718 MiB, PeerSim CD's peak).

    python -m benchmarks.scale                       # 10⁶ nodes, 50 neighbours, 20 rounds
    python -m benchmarks.scale --nodes 20000 --rounds 5   # the smoke test's size

The workload is the fixed-online one (``benchmarks/workloads.py``: a fixed random 30% online, 50
random out-neighbours, Δ = 100 ms) with the random walk service in rounds mode, at ``--nodes``
nodes.
A fresh child process validates and builds the run and runs its rounds; it prints its resident
memory after the imports, after the build and at the end. The peak is the child's maximum
resident set size as ``/usr/bin/time -v`` reports it (``ru_maxrss`` of the child where that
tool is missing): everything the process held at its fullest, imports included.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys, time
page = os.sysconf("SC_PAGE_SIZE")

def rss_mb():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * page / 2**20

figures = {}
from benchmarks.workloads import fixed_online
from netsim.log import EventLog
from netsim.scenario.build import build_run
from netsim.scenario.loader import validate_scenario
figures["imports_mb"] = rss_mb()
args = json.loads(sys.argv[1])
started = time.perf_counter()
data = fixed_online(args["nodes"], args["rounds"], mode="rounds", app="walk")
built = build_run(validate_scenario(data, source="benchmark", base_dir=None), EventLog())
figures["build_s"] = time.perf_counter() - started
figures["built_mb"] = rss_mb()
started = time.perf_counter()
built.sim.run(data["duration"])
figures["run_s"] = time.perf_counter() - started
figures["end_mb"] = rss_mb()
index = built.network._index()
figures["links"] = int(built.topology.indptr[-1])
figures["compact_index"] = bool(index.compact)
figures["index_mb"] = index.nbytes() / 2**20
figures["topology_mb"] = (built.topology.indices.nbytes + built.topology.indptr.nbytes) / 2**20
print(json.dumps(figures))
"""


def measure(nodes: int, rounds: int) -> dict[str, float]:
    """Run the workload in a child; its figures and its peak resident memory (MiB)."""
    payload = json.dumps({"nodes": nodes, "rounds": rounds})
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    timer = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").exists() else None)
    with tempfile.NamedTemporaryFile(mode="r", suffix=".txt") as report:
        command = [sys.executable, "-c", CHILD, payload]
        if timer is not None:
            command = [timer, "-v", "-o", report.name, *command]
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env)
        if done.returncode != 0:
            raise SystemExit(f"the {nodes:,}-node run failed:\n{done.stderr[-4000:]}")
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", report.read())
    if found is not None:
        figures["peak_mb"], figures["peak_from"] = int(found.group(1)) / 1024, "/usr/bin/time -v"
    else:
        import resource

        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        figures["peak_mb"], figures["peak_from"] = children / 1024, "ru_maxrss"
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    figures = measure(args.nodes, args.rounds)
    print(f"{platform.machine()}, Python {platform.python_version()}, {os.cpu_count()} CPUs")
    print(
        f"{args.nodes:,} nodes, {figures['links']:,} links, {args.rounds} rounds "
        f"(walk service, rounds mode): build {figures['build_s']:.1f} s, "
        f"run {figures['run_s']:.1f} s"
    )
    kind = "compact" if figures["compact_index"] else "full"
    print(
        f"resident memory: {figures['imports_mb']:.0f} MiB after the imports, "
        f"{figures['built_mb']:.0f} MiB built, {figures['end_mb']:.0f} MiB at the end; "
        f"topology {figures['topology_mb']:.0f} MiB, online-neighbour index ({kind}) "
        f"{figures['index_mb']:.0f} MiB"
    )
    print(f"peak {figures['peak_mb']:.0f} MiB (maximum resident set, {figures['peak_from']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
