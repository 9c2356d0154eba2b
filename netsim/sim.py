"""The simulation core: one SimPy environment, named random streams, the event log.

One clock (``docs/architecture.md``, principle 1). Everything that happens in simulated time is
an event of the single :class:`simpy.Environment` owned by :class:`Simulation`; ties resolve
deterministically by SimPy's (time, priority, insertion id) order. Time is in seconds.

This module is netsim's one seam with SimPy's internals: the hot paths of exact mode (a message,
a gossip tick, a timer at an exact instant) push their events onto SimPy's queue themselves
rather than through :meth:`simpy.Environment.schedule` (docs/performance.md), and only
:class:`Environment` does so. :func:`check_simpy` states what the seam assumes of SimPy and is run
by every :class:`Environment`; ``pyproject.toml`` bounds SimPy to the major version it holds for.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Generator, Iterator
from heapq import heapify, heappush
from typing import Any, Protocol

import simpy
from simpy.events import NORMAL

from netsim.errors import SimulationError
from netsim.log import EventLog, PrefixedLog
from netsim.rng import RandomStreams

#: The priority of an event that runs after every normal event of its instant (simpy orders
#: events of one instant by priority, URGENT = 0 and NORMAL = 1 first).
LATE = NORMAL + 1

Callback = Callable[[], None]

#: The SimPy major version whose internals the seam relies on (``pyproject.toml`` bounds it too).
SIMPY_MAJOR = 4


def check_simpy(env: simpy.Environment) -> None:
    """Raise :class:`~netsim.errors.SimulationError` unless ``env`` is built as the seam assumes:
    SimPy 4's event queue, a heap list of ``(time, priority, event id, event)`` entries, its
    event-id counter and its clock attribute (what :meth:`Environment.schedule_at` writes and
    :meth:`simpy.Environment.schedule` writes the same way)."""
    version = getattr(simpy, "__version__", "0")
    major = version.split(".", 1)[0]
    problems = []
    if major != str(SIMPY_MAJOR):
        problems.append(f"SimPy {version} is installed")
    if not isinstance(getattr(env, "_queue", None), list):
        problems.append("its environment has no event-queue list (_queue)")
    if not callable(getattr(getattr(env, "_eid", None), "__next__", None)):
        problems.append("its environment has no event-id counter (_eid)")
    if not isinstance(getattr(env, "_now", None), int | float):
        problems.append("its environment keeps no clock value (_now)")
    if problems:
        raise SimulationError(
            f"netsim schedules events on SimPy {SIMPY_MAJOR}'s event queue directly, but "
            f"{'; '.join(problems)}: install simpy>=4.1,<5 (pyproject.toml)"
        )


class EventCore(Protocol):
    """Another queue of events merged into SimPy's order (the compiled exact core,
    ``netsim.protocols.exact_core``)."""

    def advance(self) -> None:
        """Process its events whose key comes before SimPy's next event's
        (:meth:`Environment.next_key`)."""


class Environment(simpy.Environment):
    """SimPy's environment with netsim's fast path: :meth:`schedule_at` queues an event at an
    exact instant as :meth:`~simpy.Environment.schedule` queues it after a delay (same priority
    rule, next event id), so the two interleave in SimPy's order (``tests/test_sim.py``). The
    only class of netsim that writes SimPy's private fields."""

    #: The compiled exact core that runs some of the events (None: SimPy runs every event).
    core: EventCore | None = None

    def __init__(self, initial_time: float = 0) -> None:
        super().__init__(initial_time)
        check_simpy(self)

    def attach_core(self, core: EventCore) -> None:
        """Merge ``core``'s events into this environment's order from now on: each step first
        lets it process every event that comes before SimPy's next (one order, by SimPy's key:
        ``netsim.protocols.exact_core``). A run without a core keeps SimPy's own step, at no
        cost per event."""
        self.core = core
        simpy_step = super().step

        def step() -> None:
            core.advance()
            simpy_step()

        self.step = step  # type: ignore[method-assign]

    def next_key(self) -> tuple[float, float, int]:
        """The key (time, priority, event id) of SimPy's next event; infinite when none is
        queued. An event of another queue with a smaller key comes first."""
        if not self._queue:
            return float("inf"), float("inf"), 0
        time, priority, event_id, _ = self._queue[0]
        return float(time), float(priority), int(event_id)

    def take_events(
        self, belongs: Callable[[simpy.events.Event], bool]
    ) -> list[tuple[float, float, int, simpy.events.Event]]:
        """Remove from SimPy's queue every event for which ``belongs(event)`` holds; their
        entries (time, priority, event id, event), for another queue to keep their places."""
        taken = [entry for entry in self._queue if belongs(entry[3])]
        if taken:
            self._queue[:] = [entry for entry in self._queue if not belongs(entry[3])]
            heapify(self._queue)
        return taken

    def share_event_ids(self, counter: Iterator[int]) -> int:
        """Take every later event id from ``counter`` (one sequence with another queue's);
        returns the next id SimPy's own counter would have given."""
        following = next(self._eid)
        self._eid = counter
        return int(following)

    def set_clock(self, now: float) -> None:
        """The clock at ``now``: the time of the last event another queue processed."""
        self._now = now

    def schedule_at(self, event: simpy.events.Event, at: float, priority: int = NORMAL) -> None:
        """Queue ``event`` (triggered, with its callbacks set) to be processed at the instant
        ``at`` exactly (``now + delay`` would round it), with ``priority``."""
        heappush(self._queue, (at, priority, next(self._eid), event))


class Call(simpy.events.Event):
    """A timer that runs ``callback(*args)`` when it fires: a SimPy event scheduled like a
    :class:`simpy.events.Timeout` (normal priority, after ``delay``), with the callback kept on
    the event rather than in a closure made for each one (docs/performance.md: a closure per message
    was a tenth of exact mode's time)."""

    def __init__(
        self,
        env: Environment,
        delay: float,
        callback: Callable[..., None],
        args: tuple,
        priority: int = NORMAL,
        at: float | None = None,
    ) -> None:
        if delay < 0:
            raise ValueError(f"negative delay {delay}")
        # Event.__init__ inlined, as simpy's Timeout does
        self.env = env
        self.callbacks = [_run_call]
        self._value = None
        self._ok = True
        self.callback = callback
        self.args = args
        if at is None:
            env.schedule(self, priority, delay)
        else:  # at this float exactly (now + a delay would round it)
            env.schedule_at(self, at, priority)


def _run_call(event: Call) -> None:
    event.callback(*event.args)


class Simulation:
    """One run's clock, random streams and event log."""

    def __init__(self, *, seed: int, log: EventLog | None = None) -> None:
        self.env = Environment()
        self.streams = RandomStreams(seed)
        self.log: EventLog | PrefixedLog = log if log is not None else EventLog()
        self._end_hooks: list[Callback] = []

    def with_log(self, log: EventLog | PrefixedLog) -> Simulation:
        """This simulation (the same clock, streams and end hooks) writing to ``log``: what a
        component instance whose tables are renamed is built with."""
        view = copy.copy(self)
        view.log = log
        return view

    @property
    def now(self) -> float:
        """Current simulated time in seconds."""
        return float(self.env.now)

    def call_later(self, delay: float, callback: Callable[..., None], *args: Any) -> simpy.Event:
        """Run ``callback(*args)`` after ``delay`` seconds of simulated time.

        One :class:`Call` event: cheaper than a SimPy process for one-shot work (message
        deliveries, timers), and than a timeout with a closure per event. It is scheduled as
        a timeout is (same priority, next event id), so the order of events is a timeout's.
        """
        return Call(self.env, delay, callback, args)

    def call_at_end_of(self, when: float, callback: Callable[..., None], *args: Any) -> simpy.Event:
        """Run ``callback(*args)`` at the instant ``when`` (not before now), after every event
        of normal priority at that instant (:data:`LATE`): what a cycle-driven simulator does
        with a protocol's events that fall on a cycle (its cycle runs first)."""
        return Call(self.env, 0.0, callback, args, LATE, at=max(when, self.env.now))

    def every(
        self, period: float, callback: Callback, *, first: float | None = None
    ) -> simpy.Process:
        """Run ``callback()`` at ``first`` (default: one period from now) and every ``period``."""

        def loop() -> Generator[simpy.Event, Any, None]:
            yield self.env.timeout(period if first is None else first)
            while True:
                callback()
                yield self.env.timeout(period)

        return self.env.process(loop())

    def at_end(self, callback: Callback, *, first: bool = False) -> None:
        """Register ``callback()`` to run once when :meth:`run` reaches its end time (before
        every callback registered so far when ``first``: the compiled exact core writes the
        rows it gathered before the components finish)."""
        if first:
            self._end_hooks.insert(0, callback)
        else:
            self._end_hooks.append(callback)

    def run(self, until: float, *, progress: Callable[[float], None] | None = None) -> None:
        """Advance the clock to ``until`` seconds, reporting progress when asked."""
        if progress is not None and until > 0:
            step = until / 200.0
            self.every(step, lambda: progress(self.now), first=step)
        self.env.run(until=until)
        for hook in self._end_hooks:
            hook()
