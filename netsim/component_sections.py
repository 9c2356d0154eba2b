"""Scenario sections: the top-level keys that are shorthand for one component instance, and
the order they are built in.

A class declares the section it fills as its :attr:`netsim.component.Component.section`
(a built-in class, or an installed plug-in's: ``section = Section("my_algo",
after=("learning",))``). The order of the sections is not a number but what each declares it
comes after (:func:`section_order`): a stable topological order of those ``after`` names,
sections left free by them in the order of their keys' names, so a plug-in's section lands
where it asks whatever the order in which packages were installed. This module is the bottom
of the contract layer with :mod:`netsim.context` (``docs/architecture.md``): it imports only
the foundation; :meth:`netsim.registry.Registry.sections` collects the declarations.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from netsim.errors import SectionError, did_you_mean

__all__ = ["Declared", "Section", "SectionError", "section_order"]


@dataclass(frozen=True)
class Section:
    """A top-level key of a scenario that is shorthand for one component instance named after
    it (``links``, ``gossip``, ``walk``, ``dola``, …): a class declares the section it fills
    as its :attr:`~netsim.component.Component.section`, and the scenario's schema, build order
    and wiring are assembled from those declarations
    (:meth:`netsim.registry.Registry.sections`).

    ``after`` names the sections this one is built after (and listed after in the schema): the
    sections are in a stable topological order of these names (:func:`section_order`), each
    still built after the instances it is wired to, before the ``components`` entries; the
    topology and churn sections build the network, before everything else.

    ``by_kind`` says how the section's value is read: ``never`` — the declaring class's own
    config; ``optional`` — that config, or with a ``kind`` key any component of its slot;
    ``always`` — a ``kind`` key names the component of its slot (declared by an interface:
    ``topology``, ``churn``, ``walk``). A section left out of a scenario is absent, unless it
    is ``required`` (an error) or ``present_by_default`` (the declaring class's default config).
    """

    key: str
    after: tuple[str, ...] = ()
    by_kind: Literal["always", "optional", "never"] = "never"
    required: bool = False
    present_by_default: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.after, str):  # after="learning": one name, not its letters
            object.__setattr__(self, "after", (self.after,))


@dataclass(frozen=True)
class Declared:
    """One declaration of a section: the section and who declares it (``module:Class``, as
    messages name it)."""

    section: Section
    by: str


def section_order(declared: Sequence[Declared]) -> list[Declared]:
    """``declared`` in build order: each section after every section its ``after`` names;
    of the sections that order leaves free, the one whose key comes first by name (so the
    order does not depend on the order of discovery). Raises :class:`SectionError` listing
    every problem in one message: a key declared by two classes, an ``after`` naming no
    declared section, sections that are each after another."""
    by_key: dict[str, Declared] = {}
    problems: list[str] = []
    for item in declared:
        other = by_key.setdefault(item.section.key, item)
        if other is not item and other.section is not item.section:
            problems.append(
                f"the section {item.section.key!r} is declared by both {other.by} and {item.by}"
            )
    for item in by_key.values():
        for name in item.section.after:
            if name not in by_key:
                problems.append(
                    f"{item.by} puts the section {item.section.key!r} after {name!r}, which no "
                    f"class declares{did_you_mean(name, by_key)}; the sections: "
                    f"{', '.join(sorted(by_key))}"
                )
    if not problems:
        ordered = _topological(by_key)
        if len(ordered) < len(by_key):
            circle = sorted(set(by_key) - {item.section.key for item in ordered})
            problems.append(
                "the sections "
                + ", ".join(
                    f"{key!r} (after {', '.join(by_key[key].section.after)})" for key in circle
                )
                + " are each after another: no order builds them (declared by "
                + ", ".join(by_key[key].by for key in circle)
                + ")"
            )
    if problems:
        raise SectionError("scenario sections cannot be ordered: " + "; ".join(problems))
    return ordered


def _topological(by_key: dict[str, Declared]) -> list[Declared]:
    """Kahn's algorithm, the free section of the first key by name first; the sections of a
    circle (and those after them) are left out."""
    waiting = {key: set(item.section.after) for key, item in by_key.items()}
    free = [key for key, after in waiting.items() if not after]
    heapq.heapify(free)
    ordered: list[Declared] = []
    while free:
        key = heapq.heappop(free)
        ordered.append(by_key[key])
        for other, after in waiting.items():
            if key in after:
                after.discard(key)
                if not after:
                    heapq.heappush(free, other)
    return ordered
