"""matplotlib's pyplot for netsim's figures, with the Agg backend (no display needed), and
one clear error when matplotlib is not installed (it is the optional ``plot`` extra).

A foundation module: the trace statistics (building blocks) and the run reports (analysis)
both draw through it. :func:`time_unit` picks the unit of a time axis from the span it shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from netsim.errors import RunDirectoryError
from netsim.units import DAY, HOUR, MINUTE


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend; :class:`RunDirectoryError` without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - depends on the installation
        raise RunDirectoryError(
            "figures need matplotlib: pip install 'netsim-ppml[plot]'"
        ) from None
    return plt


@dataclass(frozen=True)
class TimeUnit:
    """The unit a figure's time axis is drawn in: its length in seconds and its name."""

    seconds: float
    name: str

    def label(self, what: str = "time") -> str:
        """The axis label: ``time (minutes)``."""
        return f"{what} ({self.name})"


SECONDS = TimeUnit(1.0, "seconds")
MINUTES = TimeUnit(MINUTE, "minutes")
HOURS = TimeUnit(HOUR, "hours")
DAYS = TimeUnit(DAY, "days")
#: Time units of figure axes, shortest first, each used for spans up to its limit (seconds).
TIME_AXIS_UNITS: tuple[tuple[TimeUnit, float], ...] = (
    (SECONDS, 2 * MINUTE),
    (MINUTES, 2 * HOUR),
    (HOURS, 2 * DAY),
)


def time_unit(duration: float) -> TimeUnit:
    """The unit for a time axis that spans ``duration`` seconds: seconds up to 2 minutes,
    minutes up to 2 hours, hours up to 2 days, days beyond — so that a run's ticks read
    0–60 seconds or 0–11.5 hours, never 0–0.017 hours."""
    for unit, limit in TIME_AXIS_UNITS:
        if duration <= limit:
            return unit
    return DAYS
