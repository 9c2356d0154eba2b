"""Typed config fields that components share: probabilities, sizes, bandwidths, names and
file paths resolved against the scenario file's directory (durations and distributions are in
:mod:`netsim.distributions`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, model_validator

from netsim.units import parse_bandwidth, parse_size

Probability = Annotated[float, Field(ge=0.0, le=1.0)]
Size = Annotated[float, BeforeValidator(parse_size)]
Bandwidth = Annotated[float, BeforeValidator(parse_bandwidth)]
Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=80)]


#: Largest integer a scenario may give anywhere (simulated quantities are 64-bit).
MAX_INTEGER = 2**63 - 1


def bounded_integers(data: object) -> object:
    """Refuse an integer beyond 64 bits among a section's values before its fields convert
    them: ``10**400`` nodes, or a 400-digit duration, would otherwise end in an
    ``OverflowError`` far from the file. (A model-level check: pydantic allows no field
    validator on a discriminator such as ``dist``.)"""
    for key, value in _leaves(data, ""):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INTEGER:
            raise ValueError(
                f"{key}: a {len(str(abs(value)))}-digit integer is out of range; numbers are "
                "at most 2**63 - 1 in magnitude"
            )
    return data


def _leaves(data: object, prefix: str) -> Iterator[tuple[str, object]]:
    """Every value in nested plain dicts and lists (e.g. a data set's ``options``), by path."""
    if isinstance(data, dict):
        items: Iterator[tuple[object, object]] = iter(data.items())
    elif isinstance(data, list):
        items = enumerate(data)
    else:
        return
    for key, value in items:
        if isinstance(value, dict | list):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


class CheckedModel(BaseModel):
    """Base of every scenario section, config and distribution: unknown keys are errors,
    instances are immutable, NaN and ±∞ are refused in every number field (a field that means
    something by ∞ says so) and integers must fit in 64 bits (:func:`bounded_integers`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _bounded_integers(cls, data: object) -> object:
        return bounded_integers(data)


def resolved_path(value: Path, info: ValidationInfo) -> Path:
    """``value`` made absolute against the scenario file's directory (validation context
    ``base_dir``)."""
    base = (info.context or {}).get("base_dir")
    path = Path(value).expanduser()
    if not path.is_absolute() and base is not None:
        path = Path(base) / path
    return path.resolve()


def existing_file(value: Path, info: ValidationInfo) -> Path:
    """:func:`resolved_path`, which must name a regular file (a FIFO or a device is refused
    here: reading one could wait or run for ever)."""
    path = resolved_path(value, info)
    if not path.exists():
        raise ValueError(f"file not found: {path}")
    if not path.is_file():
        raise ValueError(f"not a regular file: {path}")
    return path
