"""The simulation core: one SimPy environment, named random streams, the event log.

One clock (``docs/architecture.md``, principle 1). Everything that happens in simulated time is
an event of the single :class:`simpy.Environment` owned by :class:`Simulation`; ties resolve
deterministically by SimPy's (time, priority, insertion id) order. Time is in seconds.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Generator
from heapq import heappush
from typing import Any

import simpy
from simpy.events import NORMAL

from netsim.log import EventLog, PrefixedLog
from netsim.rng import RandomStreams

#: The priority of an event that runs after every normal event of its instant (simpy orders
#: events of one instant by priority, URGENT = 0 and NORMAL = 1 first).
LATE = NORMAL + 1

Callback = Callable[[], None]


class Call(simpy.events.Event):
    """A timer that runs ``callback(*args)`` when it fires: a SimPy event scheduled like a
    :class:`simpy.events.Timeout` (normal priority, after ``delay``), with the callback kept on
    the event rather than in a closure made for each one (README, Performance: a closure per message
    was a tenth of exact mode's time)."""

    def __init__(
        self,
        env: simpy.Environment,
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
            heappush(env._queue, (at, priority, next(env._eid), self))


def _run_call(event: Call) -> None:
    event.callback(*event.args)


class Simulation:
    """One run's clock, random streams and event log."""

    def __init__(self, *, seed: int, log: EventLog | None = None) -> None:
        self.env = simpy.Environment()
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
        return Call(self.env, 0.0, callback, args, LATE, at=max(when, self.env._now))

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

    def at_end(self, callback: Callback) -> None:
        """Register ``callback()`` to run once when :meth:`run` reaches its end time."""
        self._end_hooks.append(callback)

    def run(self, until: float, *, progress: Callable[[float], None] | None = None) -> None:
        """Advance the clock to ``until`` seconds, reporting progress when asked."""
        if progress is not None and until > 0:
            step = until / 200.0
            self.every(step, lambda: progress(self.now), first=step)
        self.env.run(until=until)
        for hook in self._end_hooks:
            hook()
