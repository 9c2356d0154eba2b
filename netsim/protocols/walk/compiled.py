"""The walk's cycle on the compiled exact core (:mod:`netsim.protocols.exact`): ``rwprop``
merged and its timeout timers run in compiled code; the walks' steps too, with the trivial
agent (:mod:`netsim.protocols.walk.steps`).

The exact cycle (:class:`~netsim.protocols.walk.cycle_exact.ExactCycle`) does two kinds of
work per gossip period: a merge of ``rwprop`` at every message (Hegedűs et al. 2016, Alg. 2
line 14, ``onReceiveRWProps``) and a check at each node's timeout timer (``onUpdateTimeout``).
These are the walk's hot path, and here they are compiled functions over arrays that the core's
kernel calls: :func:`merge` at a gossip message, :func:`timer` at a timer event. The walks'
steps — a token's transfer, its arrival, the kill draw, the new update, the visit of the
trivial agent, the forward — are compiled in :mod:`netsim.protocols.walk.steps` (the tokens
read their step counts and holders from its arrays); restarts, the rare ends of a step (lost,
killed, dropped, no online neighbour) and a learning agent's steps stay Python (a learning
agent's walks are SimPy events merged into the core's order). Python code that adopts an update
(:meth:`CompiledCycle.store`) or arms a timer calls the same compiled functions, so each rule is
written once for the core, and the SimPy path's (:class:`ExactCycle`) is its reference.

Covered: the ``netsim`` cycle with the paper's replace rule and exact ages (the paper's and the
reduced grid's configurations); other variants run on SimPy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from netsim.compiled import njit
from netsim.contracts import ExactSupport
from netsim.event_queue import DELTA, TIMEOUT_DUE, TIMER, queue_push
from netsim.event_queue import WALK as WALK_VALUES
from netsim.kernel_cache import guard_kernels
from netsim.protocols.walk.config import WalkVariant
from netsim.protocols.walk.cycle_exact import ExactCycle
from netsim.protocols.walk.kernels import AGE_TOLERANCE, adopted_circles, replaces_compiled

#: The walk's arrays, in the order of the tuple the compiled functions take: ``rwprop``
#: (steps, id, origin, bootstrap flag), the last circle handled, the timer (generation, due
#: instant, and the update and circle the latest armed timer checks), and the local copies'
#: step counts ``rw`` (the service's array); then what the walk's compiled steps use
#: (:mod:`netsim.protocols.walk.steps`): the walks' step counts, holders, the update each
#: restarted and the update its holder made (by walk id), the agent's visits per node, the
#: ``walk_steps`` rows gathered (times; walk, steps, node), their count, the steps counted
#: and the largest step count (``STEP_META``), and the next update id (the service's).
STEPS, ID, ORIGIN, SPECIAL, FIRED, GENERATION, DUE, TIMER_UPDATE, TIMER_CIRCLE, RW_STEPS = range(10)
TOKEN_STEPS, TOKEN_HOLDER, TOKEN_RESTART, TOKEN_UPDATE, VISITS = range(10, 15)
STEP_TIMES, STEP_INTS, STEP_META, UPDATE_IDS = range(15, 19)
#: ``STEP_META`` entries: rows gathered, steps counted, the largest step count.
ROWS, STEP_COUNT, MAX_STEPS = range(3)
#: The walk's step arrays when its steps are Python's (:data:`TOKEN_STEPS` … ``UPDATE_IDS``).
NO_STEPS = (
    np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
    np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0),
    np.zeros((0, 3), dtype=np.int64), np.zeros(3, dtype=np.int64), np.zeros(1, dtype=np.int64),
)  # fmt: skip


@njit(cache=True, inline="always")
def schedule_timeout(
    node: int, circle: int, now: float, delta: float, walk: tuple, queue: tuple, normal: int
) -> None:
    """Compiled twin of :meth:`netsim.protocols.walk.cycle_exact.ExactCycle.schedule_timeout`:
    the node's timer for circle ``circle`` (the next one
    not handled when -1) of its current update, at now + max(due − now, 0) as SimPy queues a
    delay; a bootstrap update has none."""
    ids, origin, special, fired = walk[ID], walk[ORIGIN], walk[SPECIAL], walk[FIRED]
    generation, due = walk[GENERATION], walk[DUE]
    timer_update, timer_circle = walk[TIMER_UPDATE], walk[TIMER_CIRCLE]
    generation[node] += 1
    if special[node]:
        due[node] = math.inf
        return
    if circle < 0:
        circle = max(math.ceil(((now - origin[node]) - AGE_TOLERANCE) / delta), 1)
    fired[node] = circle - 1
    at = origin[node] + circle * delta
    due[node] = at
    timer_update[node], timer_circle[node] = ids[node], circle
    queue_push(queue[0], queue[1], now + max(at - now, 0.0), normal, TIMER, node,
               generation[node])  # fmt: skip


@njit(cache=True, inline="always")
def store(
    node: int, steps_: int, update: int, age: float, now: float, delta: float, walk: tuple,
    active: np.ndarray, queue: tuple, normal: int,
) -> None:  # fmt: skip
    """Compiled twin of :meth:`netsim.protocols.walk.cycle_exact.ExactCycle.store` (paper
    rule): adopt the update; re-time the node's timer only if
    the update is due before the pending one."""
    steps, ids, origin, special, fired, due = (
        walk[STEPS], walk[ID], walk[ORIGIN], walk[SPECIAL], walk[FIRED], walk[DUE],
    )  # fmt: skip
    same = update == ids[node] and not special[node]
    circle_done = 0
    if same:
        circle_done = adopted_circles(True, fired[node], age, delta)
    steps[node] = steps_
    ids[node] = update
    origin[node] = now - age
    special[node] = False
    if same:
        fired[node] = circle_done
        if active[node]:
            schedule_timeout(node, circle_done + 1, now, delta, walk, queue, normal)
        return
    circle = max(math.ceil((now - origin[node] - AGE_TOLERANCE) / delta), 1)
    if origin[node] + circle * delta < due[node] and active[node]:
        schedule_timeout(node, -1, now, delta, walk, queue, normal)


@njit(cache=True, inline="always")
def merge(
    node: int, steps_: int, update: int, special_: int, sent_origin: float, sent_at: float,
    now: float, delta: float, walk: tuple, active: np.ndarray, queue: tuple, normal: int,
) -> None:  # fmt: skip
    """Compiled twin of :meth:`netsim.protocols.walk.cycle_exact.ExactCycle.incoming` (paper
    rule, exact ages): the bootstrap update and an update
    already held are ignored; otherwise line 14 decides on the update's age when sent plus
    its time on the link."""
    steps, ids, origin, special = walk[STEPS], walk[ID], walk[ORIGIN], walk[SPECIAL]
    if special_:
        return
    if update == ids[node]:
        return
    age = (sent_at - sent_origin) + (now - sent_at)
    if special[node] or replaces_compiled(steps[node], now - origin[node], steps_, age, delta,
                                          False):  # fmt: skip
        store(node, steps_, update, age, now, delta, walk, active, queue, normal)


@njit(cache=True, inline="always")
def timer(
    node: int, generation: int, now: float, delta: float, walk: tuple, active: np.ndarray,
    queue: tuple, normal: int,
) -> int:  # fmt: skip
    """Compiled twin of :meth:`netsim.protocols.walk.cycle_exact.ExactCycle._on_timer`: the
    circle whose ``onUpdateTimeout`` (lines 19–22) may
    restart a walk, for Python to run now (then arm the next circle), or -1. The common
    outcome, a local copy too far behind the update (line 20: rwprop.steps − rw.steps > i),
    is decided here and the next circle armed, as the service would."""
    ids, generations, due = walk[ID], walk[GENERATION], walk[DUE]
    if generation != generations[node]:
        return -1
    due[node] = math.inf
    if not active[node]:
        return -1
    if walk[TIMER_UPDATE][node] != ids[node]:
        schedule_timeout(node, -1, now, delta, walk, queue, normal)
        return -1
    circle = walk[TIMER_CIRCLE][node]
    if walk[STEPS][node] - walk[RW_STEPS][node] > circle:  # no restart
        schedule_timeout(node, circle + 1, now, delta, walk, queue, normal)
        return -1
    return circle


@njit(cache=True)
def store_from_python(
    node: int, steps_: int, update: int, age: float, now: float, delta: float, walk: tuple,
    active: np.ndarray, queue: tuple, normal: int,
) -> None:  # fmt: skip
    """:func:`store` for Python callers (a walk's step makes a new update)."""
    store(node, steps_, update, age, now, delta, walk, active, queue, normal)


@njit(cache=True)
def schedule_from_python(
    node: int, circle: int, now: float, delta: float, walk: tuple, queue: tuple, normal: int
) -> None:
    """:func:`schedule_timeout` for Python callers (a rejoined node, the next circle)."""
    schedule_timeout(node, circle, now, delta, walk, queue, normal)


class CompiledCycle(ExactCycle):
    """:class:`ExactCycle` with ``rwprop`` and its timers in arrays the core's kernel shares,
    made from the exact cycle the service attached (its lists carry over, value for value)."""

    def __init__(self, exact: ExactCycle, core: Any) -> None:
        self.__dict__.update(exact.__dict__)
        self._core = core
        n = len(exact.prop_steps)
        self.prop_steps = np.array(exact.prop_steps, dtype=np.int64)
        self.prop_id = np.array(exact.prop_id, dtype=np.int64)
        self.prop_origin = np.array(exact.prop_origin, dtype=np.float64)
        self.prop_special = np.array(exact.prop_special, dtype=np.bool_)
        self.fired_i = np.array(exact.fired_i, dtype=np.int64)
        self._timer_generation = np.array(self._timer_generation, dtype=np.int64)
        self._timer_due = np.array(self._timer_due, dtype=np.float64)
        self.timer_update = np.zeros(n, dtype=np.int64)
        self.timer_circle = np.zeros(n, dtype=np.int64)
        self._rwprop = None  # the core sends rwprop from the arrays
        #: The compiled steps (:class:`netsim.protocols.walk.steps.WalkSteps`), when the
        #: walk's steps run in the core: their arrays, and the forward from Python.
        self.steps: Any = None

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The walk's arrays in the order the compiled functions take them."""
        return (
            self.prop_steps, self.prop_id, self.prop_origin, self.prop_special, self.fired_i,
            self._timer_generation, self._timer_due, self.timer_update, self.timer_circle,
            self.core.rw_steps,
        ) + (NO_STEPS if self.steps is None else self.steps.arrays())  # fmt: skip

    def forward(self, token: Any) -> None:
        """``forwardRandomWalk`` at an online holder: the compiled steps' forward when the
        walk's steps run in the core, the service's send otherwise."""
        if self.steps is None:
            super().forward(token)
        else:
            self.steps.forward(token)

    def arm(self, node: int, generation: int, update: int, circle: int) -> None:
        """A timer the exact cycle had queued on SimPy, now the core's: what it checks."""
        if generation == self._timer_generation[node]:
            self.timer_update[node], self.timer_circle[node] = update, circle

    def store(self, node: int, steps: int, update: int, age: float) -> None:
        core = self._core
        core.make_room()  # the adoption may arm a timer
        store_from_python(
            node, steps, update, float(age), float(self._env.now), self.timeout, self.arrays(),
            core.gossip.active, core.queue.arrays(), core.normal,
        )  # fmt: skip

    def schedule_timeout(self, node: int, i: int | None = None) -> None:
        core = self._core
        core.make_room()
        schedule_from_python(
            node, -1 if i is None else i, float(self._env.now), self.timeout, self.arrays(),
            core.queue.arrays(), core.normal,
        )  # fmt: skip

    def outgoing(self, node: int) -> Any:  # pragma: no cover (the kernel sends rwprop)
        raise AssertionError("the compiled core sends rwprop")

    def incoming(self, node: int, value: Any, sender: int, transfer: Any) -> None:
        raise AssertionError("the compiled core merges rwprop")  # pragma: no cover


guard_kernels(__name__)  # recompiled when a module these kernels inline changed


def exact_support_of(variant: WalkVariant) -> ExactSupport:
    """The walk service's answer to the compiled exact core: compiled for the ``netsim``
    cycle, the paper's replace rule and exact ages, with ``rwprop`` carried in gossip
    messages; SimPy otherwise."""
    if variant.cycle != "netsim" or variant.replace_rule != "paper" or variant.age_error:
        return ExactSupport(
            False,
            "the walk's cycle has a compiled form for walk.cycle: netsim, the paper's "
            "replace rule and exact ages only",
        )
    return ExactSupport(True, role="carried")


def attach_walk_core(service: Any, core: Any) -> CompiledCycle:
    """Attach the walk ``service`` (a :class:`~netsim.protocols.walk.service.RandomWalkService`
    on the exact cycle) to the compiled ``core``: ``rwprop`` and the timers as arrays the kernel
    shares (:class:`CompiledCycle`), SimPy's timers moved to the core's queue; a due timeout
    returns to ``service.core_timeout``. Returns the cycle the service runs from now on."""
    exact = service.cycle
    assert isinstance(exact, ExactCycle)
    compiled = CompiledCycle(exact, core)
    core.settings[DELTA] = service.timeout
    core.carry(WALK_VALUES, compiled.arrays)
    core.on_python_part(TIMEOUT_DUE, service.core_timeout)
    for time, _priority, event_id, event in core.take_simpy_events(exact.owns_timer):
        node, generation, update, circle = event.args
        compiled.arm(node, generation, update, circle)
        core.insert(time, event_id, TIMER, node, generation)
    return compiled
