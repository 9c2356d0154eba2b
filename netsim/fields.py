"""Typed config fields that components share: probabilities, sizes, bandwidths, names and
file paths resolved against the scenario file's directory (durations and distributions are in
:mod:`netsim.distributions`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BeforeValidator, Field, ValidationInfo

from netsim.units import parse_bandwidth, parse_size

Probability = Annotated[float, Field(ge=0.0, le=1.0)]
Size = Annotated[float, BeforeValidator(parse_size)]
Bandwidth = Annotated[float, BeforeValidator(parse_bandwidth)]
Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=80)]


def resolved_path(value: Path, info: ValidationInfo) -> Path:
    """``value`` made absolute against the scenario file's directory (validation context
    ``base_dir``)."""
    base = (info.context or {}).get("base_dir")
    path = Path(value).expanduser()
    if not path.is_absolute() and base is not None:
        path = Path(base) / path
    return path.resolve()


def existing_file(value: Path, info: ValidationInfo) -> Path:
    """:func:`resolved_path`, which must name a file."""
    path = resolved_path(value, info)
    if not path.is_file():
        raise ValueError(f"file not found: {path}")
    return path
