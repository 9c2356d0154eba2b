"""Typed config fields that components share: probabilities, sizes, bandwidths, names and
file paths resolved against the scenario file's directory (durations and distributions are in
:mod:`netsim.distributions`)."""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    model_validator,
)
from pydantic_core import PydanticCustomError

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


def _arms(annotation: Any) -> Iterator[Any]:
    """The types a field annotation admits: ``Annotated`` unwrapped, unions split, a list's,
    tuple's or mapping's items (a bool among them is a bool given for the field)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Annotated:
        yield from _arms(args[0])
    elif origin in (Union, types.UnionType, list, tuple, set, frozenset):
        for arg in args:
            if arg is not Ellipsis:
                yield from _arms(arg)
    elif origin in (dict, Mapping) and len(args) == 2:
        yield from _arms(args[1])
    elif origin is Literal:
        yield from (type(value) for value in args)
    else:
        yield annotation


@functools.cache
def number_fields(model: type[BaseModel]) -> frozenset[str]:
    """The keys (names and aliases) of ``model``'s fields that take a number and never a
    boolean. Pydantic reads ``True`` as 1 in a number field, and YAML 1.1 reads ``yes``,
    ``on`` and ``true`` as ``True``: ``loss: yes`` would lose every message."""
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        arms = set(_arms(field.annotation))
        if arms & {int, float} and not arms & {bool, Any, object}:
            keys.update(key for key in (name, field.alias) if key)
    return frozenset(keys)


#: The pydantic error type of :func:`no_booleans_for_numbers` (its ``ctx`` names the key).
BOOLEAN_FOR_NUMBER = "boolean_for_number"


def no_booleans_for_numbers(model: type[BaseModel], data: object) -> object:
    """Refuse a boolean given for a number field of ``model`` (:func:`number_fields`), or in
    a list or mapping of numbers. A model-level check, not a field validator: pydantic allows
    none on a discriminator such as ``dist``, and one check here covers every section, config
    and distribution. The error's type is :data:`BOOLEAN_FOR_NUMBER`, its ``ctx`` the key."""
    if not isinstance(data, dict):
        return data
    numbers = number_fields(model)
    for key, value in data.items():
        if key not in numbers:
            continue
        if isinstance(value, dict):
            items = [(f"{key}.{k}", v) for k, v in value.items()]
        else:
            items = [(key, v) for v in (value if isinstance(value, list) else [value])]
        for where, item in items:
            if isinstance(item, bool):
                raise PydanticCustomError(
                    BOOLEAN_FOR_NUMBER,
                    "{value} is a boolean (YAML reads true, yes and on as true, and false, no "
                    "and off as false); a number is expected here",
                    {"key": where, "value": repr(value if where == key else item)},
                )
    return data


class CheckedModel(BaseModel):
    """Base of every scenario section, config and distribution: unknown keys are errors,
    instances are immutable, NaN and ±∞ are refused in every number field (a field that means
    something by ∞ says so), integers must fit in 64 bits (:func:`bounded_integers`) and a
    boolean is never a number (:func:`no_booleans_for_numbers`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _bounded_integers(cls, data: object) -> object:
        return no_booleans_for_numbers(cls, bounded_integers(data))



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
