"""Units of time, size and bandwidth used in scenario files.

Internally netsim measures time in seconds (float), sizes in bytes and bandwidth in bytes per
second. Scenario files may write ``100ms``, ``1.5s``, ``10min``, ``2h``, ``2d`` (a bare number is
seconds), sizes such as ``64B``, ``1MB`` (decimal) or ``1MiB`` (binary), and bandwidths such as
``100kbit/s``, ``1Mbit/s`` or ``2MB/s``.
"""

from __future__ import annotations

import math
import re

MINUTE = 60.0
HOUR = 3600.0
DAY = 86400.0

TIME_UNITS: dict[str, float] = {
    "us": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "min": MINUTE,
    "h": HOUR,
    "d": DAY,
}
SIZE_UNITS: dict[str, float] = {
    "B": 1.0,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "KiB": 1024.0,
    "MiB": 1024.0**2,
    "GiB": 1024.0**3,
    "bit": 1 / 8,
    "kbit": 1e3 / 8,
    "Mbit": 1e6 / 8,
    "Gbit": 1e9 / 8,
}

_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z/]*)\s*$")


def _split(text: str, what: str) -> tuple[float, str]:
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a {what}")
    return float(match.group(1)), match.group(2)


def _finite_non_negative(value: float, text: object, what: str) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite {what}")
    if value < 0:
        raise ValueError(f"{what} {text!r} is negative; it must be >= 0")
    return value


def parse_duration(value: object) -> float:
    """Parse a duration into seconds: a number (seconds) or a string like ``100ms`` or ``2d``.

    Raises ``ValueError`` naming the allowed units for anything else, including negative values.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        return _finite_non_negative(float(value), value, "duration")
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a duration")
    number, unit = _split(value, "duration")
    unit = unit or "s"
    if unit not in TIME_UNITS:
        allowed = ", ".join(TIME_UNITS)
        raise ValueError(f"unknown time unit {unit!r} in {value!r}; allowed units: {allowed}")
    return _finite_non_negative(number * TIME_UNITS[unit], value, "duration")


def parse_size(value: object) -> float:
    """Parse a message size into bytes: a number (bytes) or a string like ``64B`` or ``1MB``."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int | float):
        return _finite_non_negative(float(value), value, "size")
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a size")
    number, unit = _split(value, "size")
    unit = unit or "B"
    if unit not in SIZE_UNITS:
        allowed = ", ".join(SIZE_UNITS)
        raise ValueError(f"unknown size unit {unit!r} in {value!r}; allowed units: {allowed}")
    return _finite_non_negative(number * SIZE_UNITS[unit], value, "size")


def parse_bandwidth(value: object) -> float:
    """Parse a bandwidth into bytes per second: ``100kbit/s``, ``1Mbit/s``, ``2MB/s``.

    A bare number is bytes per second. Zero is rejected: a link must be able to carry data.
    """
    if isinstance(value, str):
        text = value.strip()
        if not text.endswith("/s"):
            raise ValueError(f"bandwidth {value!r} must end in '/s', e.g. '100kbit/s' or '1MB/s'")
        rate = parse_size(text[:-2])
    else:
        rate = parse_size(value)
    if rate <= 0:
        raise ValueError(f"bandwidth {value!r} must be positive")
    return rate


def format_duration(seconds: float) -> str:
    """Format seconds for people: ``1.5s``, ``12min``, ``2.0h``, ``2d``."""
    if seconds < 1:
        return f"{seconds * 1e3:.0f}ms"
    if seconds < MINUTE:
        return f"{seconds:.3g}s"
    if seconds < HOUR:
        return f"{seconds / MINUTE:.3g}min"
    if seconds < DAY:
        return f"{seconds / HOUR:.3g}h"
    return f"{seconds / DAY:.3g}d"
