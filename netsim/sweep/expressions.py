"""Derived sweep values: small arithmetic expressions over the scenario's dotted keys.

A value written ``"= walk.transfer_time + 10 * gossip.period"`` is computed for every grid
point from the point's resolved scenario, in SI units (durations in seconds, sizes in bytes),
so Hegedűs et al.'s δ = δ_rw + 10Δ is written as it is printed. Numbers may carry a unit
(``100ms``, ``2h``: read as seconds). Allowed: numbers, dotted keys, ``+ - * / // % **``,
parentheses and the functions below; nothing else is evaluated (the expression is parsed
with :mod:`ast`, never passed to ``eval``).
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

from netsim.errors import SweepError, nearest_names
from netsim.units import TIME_UNITS

EXPRESSION_MARK = "="

_OPERATORS: dict[type[ast.AST], Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: lambda base, exponent: _power(base, exponent),
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
FUNCTIONS: dict[str, Callable[..., float]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "round": round,
    "sqrt": math.sqrt,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "ceil": math.ceil,
    "floor": math.floor,
}
# a number directly followed by a time unit: 100ms, 1.5h (not part of a longer name)
_UNIT_NUMBER = re.compile(
    r"(?<![\w.])(\d+\.?\d*|\.\d+)(" + "|".join(sorted(TIME_UNITS, key=len, reverse=True)) + r")\b"
)


#: Largest magnitude an expression may compute (as an integer or a float).
MAX_MAGNITUDE = 2.0**63
#: Longest expression (in characters): derived values are short formulas, and Python's parser
#: runs out of memory on, e.g., 100,000 nested unary minus signs.
MAX_EXPRESSION_CHARS = 1000


def _power(base: float, exponent: float) -> float:
    """``base ** exponent`` that fails fast instead of building a huge integer: ``9**9**9``
    would take minutes and gigabytes as an exact integer; any result past
    :data:`MAX_MAGNITUDE` is refused anyway, so it is computed in floating point when the
    exact value would be that large."""
    if isinstance(base, int) and isinstance(exponent, int) and exponent >= 0:
        if abs(base) <= 1 or exponent * abs(base).bit_length() <= 64:
            return base**exponent
    try:
        result = float(base) ** float(exponent)
    except ZeroDivisionError:
        raise ArithmeticError("0 cannot be raised to a negative power") from None
    except OverflowError:
        raise ArithmeticError("the power is too large") from None
    if isinstance(result, complex):
        raise ArithmeticError("a negative number to a fractional power is not real")
    return result


def is_expression(value: object) -> bool:
    """True for a string that starts with ``=`` (a derived value)."""
    return isinstance(value, str) and value.lstrip().startswith(EXPRESSION_MARK)


def _with_units_in_seconds(text: str) -> str:
    return _UNIT_NUMBER.sub(lambda m: repr(float(m.group(1)) * TIME_UNITS[m.group(2)]), text)


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _parse(expression: str, *, where: str) -> ast.Expression:
    body = expression.lstrip()[len(EXPRESSION_MARK) :].strip()
    if not body:
        raise SweepError(f"{where}: the expression {expression!r} is empty after '='")
    if len(body) > MAX_EXPRESSION_CHARS:
        raise SweepError(
            f"{where}: the expression {_shown(expression)} is {len(body):,} characters long; "
            f"an expression may have at most {MAX_EXPRESSION_CHARS:,}"
        )
    try:
        return ast.parse(_with_units_in_seconds(body), mode="eval")
    except SyntaxError:
        raise SweepError(f"{where}: {expression!r} is not a valid expression") from None
    except (MemoryError, RecursionError):
        raise SweepError(f"{where}: {_shown(expression)} nests too deeply to be read") from None


def _shown(expression: str) -> str:
    """``expression`` quoted, cut to its first 60 characters in messages."""
    return repr(expression[:60] + "..." if len(expression) > 60 else expression)


def evaluate(expression: str, lookup: Callable[[str], Any], *, where: str) -> float:
    """The value of ``expression`` with each dotted key read through ``lookup``."""
    tree = _parse(expression, where=where)

    def value(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.operand))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            function = FUNCTIONS.get(node.func.id)
            if function is None or node.keywords:
                allowed = ", ".join(FUNCTIONS)
                raise SweepError(
                    f"{where}: unknown function {node.func.id!r} in {expression!r}; "
                    f"allowed: {allowed}"
                )
            return function(*(value(arg) for arg in node.args))
        key = _dotted(node)
        if key is not None:
            found = lookup(key)
            if isinstance(found, bool) or not isinstance(found, int | float):
                raise SweepError(
                    f"{where}: {key} is {found!r} in {expression!r}; an expression needs "
                    "numeric keys"
                )
            return found
        raise SweepError(
            f"{where}: {expression!r} may use numbers, dotted keys, + - * / // % ** and "
            f"the functions {', '.join(FUNCTIONS)}"
        )

    try:
        result = value(tree)
    except (ArithmeticError, ValueError) as exc:
        raise SweepError(f"{where}: {expression!r} cannot be computed: {exc}") from None
    except RecursionError:
        raise SweepError(f"{where}: {_shown(expression)} nests too deeply to be computed") from None
    if not math.isfinite(result) or abs(result) > MAX_MAGNITUDE:
        raise SweepError(
            f"{where}: {expression!r} is {result:.6g}; an expression's value must be finite "
            f"and at most 2**63 in magnitude"
        )
    return result


def lookup_in(data: Mapping[str, Any], *, where: str) -> Callable[[str], Any]:
    """A ``lookup`` for :func:`evaluate` that reads dotted keys of nested plain data."""

    def lookup(key: str) -> Any:
        found = dotted_get(data, key)
        if found is _MISSING:
            raise SweepError(
                f"{where}: {key} is not a key of the scenario{suggested_keys(data, key)}"
            )
        return found

    return lookup


_MISSING = object()


def dotted_get(data: Mapping[str, Any], key: str) -> Any:
    """The value at ``a.b.c`` in nested mappings, or a private marker when absent."""
    current: Any = data
    for part in key.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return _MISSING
        current = current[part]
    return current


def is_missing(value: object) -> bool:
    """True for the marker :func:`dotted_get` returns for an absent key."""
    return value is _MISSING


def nearest_keys(data: Mapping[str, Any], key: str) -> list[str]:
    """Dotted keys of ``data`` close to the absent ``key``: its first part that is not a key
    of its section replaced by each of that section's :func:`~netsim.errors.nearest_names`,
    the parts after it kept (``wlk.timeout`` -> ``walk.timeout``)."""
    parts = key.split(".")
    current: Any = data
    for index, part in enumerate(parts):
        if not isinstance(current, Mapping):
            return []
        if part not in current:
            names = [str(name) for name in current]
            return [
                ".".join([*parts[:index], near, *parts[index + 1 :]])
                for near in nearest_names(part, names)
            ]
        current = current[part]
    return []


def suggested_keys(data: Mapping[str, Any], key: str) -> str:
    """`` (did you mean a.b?)`` for the :func:`nearest_keys` of ``key``; empty if none."""
    near = nearest_keys(data, key)
    return f" (did you mean {' or '.join(near)}?)" if near else ""
