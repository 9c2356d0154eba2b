"""The simulation core: one SimPy environment, named random streams, the event log.

One clock (``docs/architecture.md``, principle 1). Everything that happens in simulated time is
an event of the single :class:`simpy.Environment` owned by :class:`Simulation`; ties resolve
deterministically by SimPy's (time, priority, insertion id) order. Time is in seconds.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Generator
from typing import Any

import simpy

from netsim.log import EventLog, PrefixedLog
from netsim.rng import RandomStreams

Callback = Callable[[], None]


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

        A plain callback on a timeout event: cheaper than a SimPy process for one-shot work
        (message deliveries, timers).
        """
        event = self.env.timeout(delay)
        event.callbacks.append(lambda _event: callback(*args))
        return event

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
