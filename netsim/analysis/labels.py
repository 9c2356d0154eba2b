"""How the lines of a report over several runs are named in legends.

A sweep names its grid points by the parameters it varies
(:func:`netsim.analysis.report.point_labels`). Runs made one by one — ``netsim run`` of two
scenario files, then ``netsim report A B`` — have no such parameters, so each line is named
by its run's name when the runs' names differ, and otherwise by the keys of the resolved
scenarios that differ between them (:func:`differing_keys`): ``learning.epsilon=1`` against
``learning.epsilon=0.1``; a section only some runs have by one key of it,
``walk.kind=service`` against ``gossip_learning.period=1``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from netsim.analysis.collect import format_value

#: Keys that describe a scenario rather than configure it: never a difference worth a label.
DESCRIPTIVE_KEYS: frozenset[str] = frozenset({"name", "description", "seed"})
#: A label names at most this many differing keys, then says how many more there are.
MAX_LABEL_KEYS = 3
#: The key that names what a section is (``walk.kind``, ``churn.kind``).
KIND_KEY = "kind"


def _section_key(section: Mapping[str, Any]) -> str | None:
    """The key that stands for a whole section in a label: its ``kind``, else its first key
    with a plain value (a number, text or flag), else None."""
    if KIND_KEY in section and not isinstance(section[KIND_KEY], Mapping):
        return KIND_KEY
    for key, value in section.items():
        if value is not None and not isinstance(value, Mapping | list):
            return key
    return None


def _is_section(value: Any) -> bool:
    return isinstance(value, Mapping)


def _differences(
    configurations: Sequence[Mapping[str, Any] | None], prefix: str
) -> list[list[tuple[str, Any]]]:
    """Per configuration, the ``(dotted key, value)`` pairs under ``prefix`` in which the
    configurations differ, in the order of the keys (see :func:`differing_keys`)."""
    out: list[list[tuple[str, Any]]] = [[] for _ in configurations]
    keys: dict[str, None] = {}
    for configuration in configurations:
        keys.update(dict.fromkeys(configuration or {}))
    for key in keys:
        if not prefix and key in DESCRIPTIVE_KEYS:
            continue
        dotted = f"{prefix}{key}"
        values = [(c or {}).get(key) for c in configurations]
        if all(v == values[0] for v in values):
            continue
        present = [_is_section(v) for v in values]
        if all(present):
            kinds = [v.get(KIND_KEY) for v in values]
            if not all(k == kinds[0] for k in kinds):
                # another kind of component: its kind says it, its settings follow from it
                for entries, kind in zip(out, kinds, strict=True):
                    entries.append((f"{dotted}.{KIND_KEY}", kind))
                continue
            for entries, found in zip(out, _differences(values, f"{dotted}."), strict=True):
                entries.extend(found)
        elif any(present):
            # a section some configurations have and others not: one key of it names it
            for entries, value in zip(out, values, strict=True):
                if _is_section(value):
                    inner = _section_key(value)
                    if inner is not None:
                        entries.append((f"{dotted}.{inner}", value[inner]))
                    else:
                        entries.append((dotted, "on"))
        else:
            for entries, value in zip(out, values, strict=True):
                if value is not None:
                    entries.append((dotted, value))
    return out


def differing_keys(configurations: Sequence[Mapping[str, Any]]) -> list[list[tuple[str, Any]]]:
    """Per resolved scenario (a nested mapping), the dotted keys whose value differs between
    the scenarios, each with its value there.

    The scenario's name, description and seed are left out. A section every scenario has
    with the same ``kind`` is compared key by key; one whose ``kind`` differs contributes only
    ``<section>.kind``; one that only some scenarios have contributes, to those, one key of
    it (its ``kind``, else its first plain key) and nothing to the others. A key a scenario
    does not have (or has as null) is not named for that scenario.
    """
    return _differences(list(configurations), "")


def key_label(pairs: Sequence[tuple[str, Any]], limit: int = MAX_LABEL_KEYS) -> str:
    """``key=value, key=value`` for at most ``limit`` pairs, then ``(+N more)``."""
    shown = [f"{key}={_value_text(value)}" for key, value in pairs[:limit]]
    more = len(pairs) - limit
    return ", ".join(shown) + (f" (+{more} more)" if more > 0 else "")


def _value_text(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    return format_value(value)


def series_labels(names: Sequence[str], configurations: Sequence[Mapping[str, Any]]) -> list[str]:
    """The legend label of each line (one per configuration, named ``names``): the name when
    the names differ; else the keys that differ (:func:`differing_keys`), after the name when
    some names are shared and others not; the name alone when nothing but descriptive keys
    differ (with a number when that leaves two lines alike)."""
    if len(set(names)) == len(names):
        return list(names)
    keys = differing_keys(configurations)
    uniform = len(set(names)) == 1
    labels = []
    for name, pairs in zip(names, keys, strict=True):
        text = key_label(pairs)
        if not text:
            labels.append(name)
        elif uniform:
            labels.append(text)
        else:
            labels.append(f"{name}: {text}")
    if len(set(labels)) < len(labels):
        labels = [f"{label} ({k + 1})" for k, label in enumerate(labels)]
    return labels
