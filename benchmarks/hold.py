"""Benchmark: the compiled exact core's event queue against a C binary heap, in the hold model
(PHOLD-style: the standard benchmark of a discrete-event engine's queue).

    python -m benchmarks.hold                  # 5 alternating pairs of 10⁷ events each
    python -m benchmarks.hold --pairs 3 --steps 5000000
    python -m benchmarks.hold --quick          # 2·10⁵ events, 1 pair: a smoke test
    python -m benchmarks.hold --write-docs     # and quote the output in docs/performance.md

The anchor is ``c/hold.c`` of the anchors' folder (``../shared/bench``,
:mod:`benchmarks.anchors`), built with ``cc -O2`` into ``~/.cache/netsim/bench`` (outside the
repository; again when the source changes): P = 5,000 pending events on a binary heap keyed
(time, insertion id); each step pops the minimum, max-merges a value into one of N = 10,000
nodes' state and pushes one event 10–50 ms later (uniform) to a random node. Without ``cc`` or
the source it prints why and measures nothing.

netsim's side runs the same steps in one numba loop over the compiled core's own queue
functions — :func:`netsim.protocols.exact.kernel.first_event` (the smallest of the heap and
the two lanes) and :func:`~netsim.protocols.exact.kernel.take`, then
:func:`netsim.event_queue.queue_push` or :func:`netsim.event_queue.lane_push`, compiled as the
core's kernel is (:func:`~netsim.protocols.exact.kernel.kernel`) — on two paths:

- ``heap``: drawn delays, uniform in [10, 50) ms, as the C model: every event through the heap
  (keys (time, priority rank · 2⁴⁰ + insertion id), as SimPy orders them);
- ``lanes``: constant delays, the kernel's hottest path: half the pending events are ticks
  (re-queued Δ = 100 ms later in the tick lane), half transfers (re-queued 10 ms later in the
  transfer lane); first-in-first-out lanes, no heap.

The same xorshift generator draws the delays and destinations in both programs. Each pair
measures the C model, then the heap path, then the lane path, each in a fresh process; the
CPU time of the steps only (the kernel loaded from numba's cache before the clock starts).
Printed: ns per event of each (median [min–max] over the pairs) and each path's ratio to the C
model of its pair, with the load average before and after. Each netsim child also checks
that the events came out in time order.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from numba import njit

from benchmarks import PERFORMANCE_PAGE, REPO, write_output
from benchmarks.anchors import (
    anchors_folder,
    build_root,
    load_average,
    machine_line,
    missing,
    paired_ratios,
    sources_digest,
    spread,
)
from netsim.event_queue import (
    TICK_LANE,
    TRANSFER_LANE,
    EventQueue,
    lane_push,
    make_lanes,
    queue_push,
)
from netsim.kernel_cache import guard_kernels
from netsim.protocols.exact.kernel import first_event, kernel, take

#: The block of docs/performance.md that quotes this benchmark's output.
DOCS_BLOCK = "hold"
PENDING, NODES = 5_000, 10_000
STEPS, QUICK_STEPS = 10_000_000, 200_000
PATHS = ("heap", "lanes")
#: The lanes' constant delays: a tick's period and a transfer's time, seconds.
TICK_DELAY, TRANSFER_DELAY = 0.1, 0.01
SEED = 88172645463325252  # hold.c's


class HoldError(RuntimeError):
    """The C model did not build or run."""


def hold_source() -> Path:
    return anchors_folder() / "c" / "hold.c"


def why_not() -> str | None:
    """Why the C model cannot be measured here, or None."""
    return missing([hold_source()], ("cc",))


def build_hold() -> Path:
    """The C model's binary (under :func:`build_root`), built with ``cc -O2`` if absent."""
    source = hold_source()
    binary = build_root() / f"hold-{sources_digest([source])}"
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=binary.parent, prefix="hold-build-")) / "hold"
    done = subprocess.run(["cc", "-O2", "-o", str(scratch), str(source)], capture_output=True,
                          text=True)  # fmt: skip
    if done.returncode != 0:
        raise HoldError(f"cc failed:\n{done.stderr[-3000:]}")
    scratch.rename(binary)
    scratch.parent.rmdir()
    return binary


def run_c(binary: Path, steps: int) -> float:
    """ns per event of one run of the C model, in a fresh process."""
    done = subprocess.run([str(binary), str(PENDING), str(NODES), str(steps)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        raise HoldError(f"{binary} failed:\n{done.stderr[-3000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["ns_per_event"])


@njit(cache=True, inline="always")
def _next(state: np.ndarray) -> np.uint64:
    """hold.c's xorshift64 step on ``state[0]``."""
    s = state[0]
    s ^= s << np.uint64(13)
    s ^= s >> np.uint64(7)
    s ^= s << np.uint64(17)
    state[0] = s
    return s


@njit(cache=True, inline="always")
def _uniform(state: np.ndarray) -> float:
    return float(_next(state) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True, inline="always")
def _node(state: np.ndarray, nodes: int) -> int:
    return int(_next(state) % np.uint64(nodes))


@kernel  # compiled as the exact core's kernel is: without numba's reference counts
def _hold(
    queue: tuple, lanes: tuple, values: np.ndarray, rng: np.ndarray, steps: int, heap: bool
) -> tuple[int, int]:
    """``steps`` hold steps: take the first event, max-merge its value into its node, queue
    one: (a checksum of the nodes, events that came out before their predecessor)."""
    nodes = values.size
    checksum, disorder, last = 0, 0, -1.0
    for step in range(steps):
        source, now, _ = first_event(queue, lanes)
        lane, node, value = take(source, queue, lanes)
        if now < last:
            disorder += 1
        last = now
        if value > values[node]:
            values[node] = value
        else:
            value = values[node]
        value += 1 if step % 97 == 0 else 0
        target = _node(rng, nodes)
        if heap:
            delay = 0.01 + _uniform(rng) * 0.04
            queue_push(queue[0], queue[1], now + delay, 0, 0, target, value)
        else:
            delay = TICK_DELAY if lane == TICK_LANE else TRANSFER_DELAY
            lane_push(lanes, queue[1], lane, now + delay, 0, target, value)
        checksum += node
    return checksum, disorder


def setup(path: str) -> tuple[tuple, tuple, np.ndarray, np.ndarray]:
    """The queue, lanes, node values and generator state with :data:`PENDING` events queued:
    at uniform times in the first 100 ms on the heap, or half in each lane at sorted times
    within its delay."""
    rng = np.array([SEED], dtype=np.uint64)
    queue = EventQueue(capacity=PENDING + 1).arrays()
    lanes = make_lanes(PENDING + 1)
    draws = np.random.default_rng(1)
    targets = draws.integers(0, NODES, PENDING)
    if path == "heap":
        for time_, node in zip(draws.random(PENDING) * 0.1, targets, strict=True):
            queue_push(*queue, float(time_), 0, 0, int(node), 0)
    else:
        half = PENDING // 2
        plan = (
            (TICK_LANE, 0, half, TICK_DELAY),
            (TRANSFER_LANE, half, PENDING - half, TRANSFER_DELAY),
        )
        for lane, first, count, delay in plan:
            for k, time_ in enumerate(np.sort(draws.random(count) * delay)):
                lane_push(lanes, queue[1], lane, float(time_), 0, int(targets[first + k]), 0)
    return queue, lanes, np.zeros(NODES, dtype=np.int64), rng


def child(path: str, steps: int) -> dict[str, float]:
    """One measurement of ``path`` (in this process): ns per event, and the time-order check."""
    warm = setup(path)
    _hold(*warm, 10, path == "heap")  # loads the kernel from numba's cache (or compiles it)
    state = setup(path)
    started = time.process_time()
    _, disorder = _hold(*state, steps, path == "heap")
    cpu = time.process_time() - started
    return {"ns_per_event": 1e9 * cpu / steps, "out_of_order": disorder}


def run_netsim(path: str, steps: int) -> float:
    """ns per event of ``path`` in a fresh child process."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.hold", "--child", path, "--steps", str(steps)],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the {path} hold child failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["out_of_order"]:
        raise SystemExit(f"the {path} path took {result['out_of_order']} events out of order")
    return float(result["ns_per_event"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=5, help="alternating pairs (5)")
    parser.add_argument("--steps", type=int, default=STEPS, help=f"events a run ({STEPS:,})")
    parser.add_argument("--quick", action="store_true", help="2·10⁵ events, 1 pair")
    parser.add_argument("--child", choices=PATHS, help=argparse.SUPPRESS)
    parser.add_argument(
        "--write-docs", action="store_true",
        help=f"also write the output into docs/performance.md's block {DOCS_BLOCK!r}",
    )  # fmt: skip
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.steps)))
        return
    if args.write_docs and args.quick:
        parser.error("--write-docs quotes the full benchmark: not with --quick")
    reason = why_not()
    if reason is not None:
        print(f"the C hold model not measured: {reason}")
        return
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    binary = build_hold()
    pairs, steps = (1, QUICK_STEPS) if args.quick else (args.pairs, args.steps)
    say(machine_line())
    say(f"load average (1, 5, 15 min) before: {load_average()}")
    run_netsim("heap", 1000)  # unmeasured: compiles the kernels into numba's cache
    run_netsim("lanes", 1000)
    ns: dict[str, list[float]] = {"c": [], **{path: [] for path in PATHS}}
    for _ in range(pairs):
        ns["c"].append(run_c(binary, steps))
        for path in PATHS:
            ns[path].append(run_netsim(path, steps))
    say(f"load average (1, 5, 15 min) after: {load_average()}")
    say(
        f"hold model, {PENDING:,} pending events, {NODES:,} nodes, {steps:,} events a run: ns "
        f"per event, median [min–max] of {pairs} alternating triples"
    )
    say(f"  {'C binary heap (hold.c, cc -O2), delays 10–50 ms':58s}{spread(ns['c'], 1):>20s}")
    titles = {
        "heap": "netsim heap, delays 10–50 ms",
        "lanes": "netsim lanes, ticks and constant transfers",
    }
    for path in PATHS:
        ratio = spread(paired_ratios(ns[path], ns["c"]))
        say(f"  {titles[path]:58s}{spread(ns[path], 1):>20s}: {ratio}× the C heap")
    if args.write_docs and write_output(DOCS_BLOCK, "\n".join(lines)):
        print(f"wrote the output into {PERFORMANCE_PAGE.relative_to(REPO)}")


guard_kernels(__name__)  # recompiled when the queue code they inline changed

if __name__ == "__main__":
    main()
