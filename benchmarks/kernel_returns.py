"""Benchmark: how often the compiled exact core's kernel returns to Python, and why.

    python -m benchmarks.kernel_returns                   # the walk workload, 300 rounds
    python -m benchmarks.kernel_returns broadcast         # the broadcast workload
    python -m benchmarks.kernel_returns scenarios/walk/paper-drw1-d10-kill0.yaml --rounds 600
    python -m benchmarks.kernel_returns walk --profile    # and cProfile's top entries

Each call of the kernel (:func:`netsim.protocols.exact.kernel.run_events`) ends with a status:
``DONE`` (SimPy's next event comes first: a walk's step, churn, an observer), ``NEED_PEERS``,
``NEED_DELAYS``, ``NEED_LOSS`` (the next draws), ``NEED_ROOM``, ``TIMEOUT_DUE`` (a walk
timeout that may restart a walk), ``ACTIVATED`` (a rejoined node's listeners), ``WALK_PART``
(the rare rest of a walk's step: lost, killed, dropped, no online neighbour),
``NEED_WALK_PEERS`` / ``NEED_KILLS`` (the walk's draws), ``LEARNING_PART`` (a gossip-learning
visit left to Python) or ``PAUSED``.
The run is built in this process, its first 10 s (a scenario file) or 10 rounds (a workload
of :mod:`benchmarks.workloads`, N = 10,000 or ``--nodes``) run untimed, and the next
``--rounds`` rounds are counted and timed: returns per round by status, and CPU µs per round
(with ``--profile``, under cProfile, and its top entries by own time).
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import pstats
import time
from pathlib import Path

import netsim.protocols.exact.core as core_module
from benchmarks.workloads import PERIOD, fixed_online
from netsim import event_queue
from netsim.log import EventLog
from netsim.scenario.build import build_run
from netsim.scenario.loader import load_scenario, validate_scenario

STATUSES = (
    "DONE", "NEED_PEERS", "NEED_DELAYS", "NEED_LOSS", "NEED_ROOM", "PAUSED", "TIMEOUT_DUE",
    "ACTIVATED", "WALK_PART", "NEED_WALK_PEERS", "NEED_KILLS", "LEARNING_PART",
)  # fmt: skip


def build(what: str, rounds: int, nodes: int):
    """The run of ``what`` (a scenario file, or ``walk`` / ``broadcast`` on ``nodes``), built,
    its end, and the time at which its counted rounds start."""
    if what in ("walk", "broadcast"):
        data = fixed_online(nodes, rounds + 10, mode="exact", app=what)
        scenario = validate_scenario(data, source="benchmark", base_dir=None)
        start = 10 * PERIOD
    else:
        start = 10.0
        scenario = load_scenario(Path(what), [f"duration={start + rounds * PERIOD}"])
    return build_run(scenario, EventLog()), scenario.duration, start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="?", default="walk", help="walk, broadcast or a file")
    parser.add_argument("--rounds", type=int, default=300, help="rounds counted (300)")
    parser.add_argument("--nodes", type=int, default=10_000, help="a workload's N (10,000)")
    parser.add_argument("--profile", action="store_true", help="under cProfile: its top 15")
    args = parser.parse_args()
    names = {getattr(event_queue, name): name for name in STATUSES}
    counts: collections.Counter[str] = collections.Counter()
    kernel = core_module.run_events

    def counted(*arguments):
        status, now = kernel(*arguments)
        counts[names.get(status, str(status))] += 1
        return status, now

    core_module.run_events = counted  # the core calls the kernel through its module
    built, duration, start = build(args.what, args.rounds, args.nodes)
    built.sim.env.run(until=start)
    counts.clear()
    profile = cProfile.Profile() if args.profile else None
    cpu = time.process_time()
    if profile is not None:
        profile.enable()
    built.sim.run(duration)
    if profile is not None:
        profile.disable()
    cpu = time.process_time() - cpu
    total = sum(counts.values())
    profiled = " (profiled)" if profile is not None else ""
    print(f"{args.what}: {args.rounds} rounds, engine {built.exact_engine}, "
          f"CPU {1e6 * cpu / args.rounds:.0f} µs a round{profiled}")  # fmt: skip
    print(f"  returns to Python: {total} ({total / args.rounds:.3f} a round)")
    for name, count in counts.most_common():
        print(f"  {count:9d}  {count / args.rounds:7.3f} a round  {name}")
    if profile is not None:
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
