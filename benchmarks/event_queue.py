"""The cost of one event in a compiled event queue against SimPy's own (the floor a compiled
exact core builds on; ``netsim/event_queue.py``).

    python -m benchmarks.event_queue                  # 5,000 live events, 2·10⁶ hold steps
    python -m benchmarks.event_queue --live 500       # a smaller heap

The classic hold model: a queue of ``live`` pending events; each step pops the first and
pushes one a random delay later (uniform in [0, 1) periods, drawn beforehand), at one of two
priorities (NORMAL and LATE). Printed: nanoseconds per pop-and-push in a numba loop over
:func:`~netsim.event_queue.queue_push` / :func:`~netsim.event_queue.queue_pop`, and per SimPy
step of a :class:`~netsim.sim.Call` that schedules the next one (SimPy's heap, a Python
callback, no work), the ratio between them, and whether both popped the same events in the
same order over the first 10⁵ steps.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from numba import njit

from netsim.event_queue import EventQueue, queue_pop, queue_push
from netsim.kernel_cache import guard_kernels
from netsim.sim import NORMAL, Call, Environment


@njit(cache=True)
def _hold(
    rows: np.ndarray, meta: np.ndarray, delays: np.ndarray, late: np.ndarray, order: np.ndarray
) -> None:
    """``delays.size`` hold steps; the kinds popped in the first ``order.size`` steps (rank
    ``late`` 0 is NORMAL, 1 is LATE)."""
    for step in range(delays.size):
        time, _, _, kind, _, _ = queue_pop(rows, meta)
        if step < order.size:
            order[step] = kind
        queue_push(rows, meta, time + delays[step], late[step], kind, 0, 0)


def compiled(live: int, delays: np.ndarray, late: np.ndarray, checked: int) -> tuple[float, list]:
    """Seconds for the hold steps on the compiled queue, and the kinds first popped."""
    queue = EventQueue(capacity=live + 1)
    for kind in range(live):
        queue.push(float(delays[kind]), int(late[kind]), kind)
    order = np.empty(checked, dtype=np.int64)
    warm = EventQueue(capacity=live + 1)
    warm.push(0.0, 0, 0)
    _hold(*warm.arrays(), delays[:1], late[:1], order[:0])  # compile outside the clock
    start = time.process_time()
    _hold(*queue.arrays(), delays[live:], late[live:], order)
    return time.process_time() - start, order.tolist()


def simpy_steps(
    live: int, delays: np.ndarray, late: np.ndarray, checked: int
) -> tuple[float, list]:
    """Seconds for the same hold steps on SimPy's queue, and the kinds first popped."""
    env = Environment()
    order: list[int] = []
    step = [live]
    delay_list, late_list = delays.tolist(), late.tolist()

    def fire(kind: int) -> None:
        if len(order) < checked:
            order.append(kind)
        k = step[0]
        step[0] = k + 1
        if k < len(delay_list):
            Call(env, 0.0, fire, (kind,), priority=NORMAL + late_list[k],
                 at=env.now + delay_list[k])  # fmt: skip

    for kind in range(live):
        Call(env, 0.0, fire, (kind,), priority=NORMAL + late_list[kind], at=delay_list[kind])
    steps = len(delay_list) - live
    start = time.process_time()
    for _ in range(steps):
        env.step()
    return time.process_time() - start, order


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live", type=int, default=5_000)
    parser.add_argument("--steps", type=int, default=2_000_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    total = args.live + args.steps
    # delays on a grid of 1/64: many events share an instant, so ties are decided
    delays = np.floor(rng.random(total) * 64) / 64
    late = rng.integers(0, 2, total)
    checked = min(100_000, args.steps)
    compiled_seconds, compiled_order = compiled(args.live, delays, late, checked)
    simpy_seconds, simpy_order = simpy_steps(args.live, delays, late, checked)
    result = {
        "live": args.live,
        "steps": args.steps,
        "compiled_ns_per_event": round(1e9 * compiled_seconds / args.steps, 1),
        "simpy_ns_per_event": round(1e9 * simpy_seconds / args.steps, 1),
        "simpy_over_compiled": round(simpy_seconds / compiled_seconds, 1),
        "same_order": compiled_order == simpy_order,
    }
    print(json.dumps(result))
    return 0 if result["same_order"] else 1


guard_kernels(__name__)  # recompiled when the queue code they inline changed

if __name__ == "__main__":
    raise SystemExit(main())
