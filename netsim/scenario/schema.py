"""The scenario schema: typed, frozen, validated configuration.

The core keys (``name``, ``description``, ``seed``, ``nodes``, ``duration``, ``components``,
``metrics``) are defined here; every other top-level key is a section a built-in component
declares (:class:`~netsim.component.Section`, collected by
:meth:`netsim.registry.Registry.sections`) and is validated by that component's config model,
or, where the section names a component by ``kind`` (topology, churn, walk, and ``links`` or
``gossip`` with a ``kind``), by the model of the component registered under that name; so are
the entries of ``components``. Every section and entry may carry ``uses`` (role → instance
name), kept apart from its settings (:attr:`Scenario.wiring`). Every key, unit and default is
documented in ``scenarios/README.md``; a test checks that the two agree. Durations accept
``100ms``, ``1.5s``, ``10min``, ``2h``, ``2d`` (bare numbers are seconds), sizes ``64B`` /
``1MB``, bandwidths ``100kbit/s``. Relative file paths are resolved against the scenario file's
directory and must exist.

Validating a scenario computes its :class:`~netsim.scenario.plan.RunPlan` once
(:attr:`Scenario.plan`): what the build, the runner and the manifest read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ConfigDict, Field, PrivateAttr, create_model, model_validator

from netsim.component import MetricsConfig
from netsim.distributions import PositiveDuration
from netsim.fields import CheckedModel, Name
from netsim.network.links import LinkFailureConfig, LinksConfig
from netsim.registry import REGISTRY, SectionEntry, component_field, section_field
from netsim.scenario.plan import (
    INSTANCE_SLOTS,
    USES,
    RunPlan,
    WiringError,
    plan_problems,
    plan_scenario,
)

__all__ = ["LinkFailureConfig", "LinksConfig", "MetricsConfig", "Scenario", "StrictModel"]


class StrictModel(CheckedModel):
    """A scenario section (see :class:`~netsim.fields.CheckedModel`)."""

    model_config = ConfigDict(populate_by_name=True)


#: The entries of ``components``: any instance of :data:`INSTANCE_SLOTS`, named by ``kind``.
ComponentsField = component_field(*INSTANCE_SLOTS)


def _section_field(entry: SectionEntry) -> tuple[Any, Any]:
    """The annotation and default of the top-level key of a declared section."""
    section, owner = entry.section, entry.cls
    if section.by_kind == "always":
        annotation: Any = component_field(entry.slot)
    elif section.by_kind == "optional":
        annotation = section_field(entry.slot, owner.Config)
    else:
        annotation = owner.Config
    if section.required:
        return annotation, ...
    if section.present_by_default:
        return annotation, owner.Config()
    return annotation | None, None


def _own_uses(entry: SectionEntry) -> bool:
    """Whether the section's own config has a ``uses`` key of its own (``mi_ogd.uses``: an
    example's reports): such a section is wired by default only."""
    fields = entry.cls.Config.model_fields
    return any((info.alias or name) == USES for name, info in fields.items())


def _wiring_of(data: Any) -> tuple[Any, dict[str, Any]]:
    """``data`` without the ``uses`` of its sections and ``components`` entries, and those
    ``uses`` by the key of their section or entry (``walk``, ``components.<name>``)."""
    if not isinstance(data, dict):
        return data, {}
    wiring: dict[str, Any] = {}
    data = dict(data)
    for key, entry in REGISTRY.sections().items():
        if isinstance(data.get(key), dict) and USES in data[key] and not _own_uses(entry):
            data[key] = dict(data[key])
            wiring[key] = data[key].pop(USES)
    if isinstance(data.get("components"), dict):
        entries = {}
        for name, entry in data["components"].items():
            if isinstance(entry, dict) and USES in entry:
                entry = dict(entry)
                wiring[f"components.{name}"] = entry.pop(USES)
            entries[name] = entry
        data["components"] = entries
    return data, wiring


#: The keys no instance is planned from: a copy that changes only these keeps its plan.
UNPLANNED_KEYS = frozenset({"seed", "name", "description"})


class _ScenarioModel(StrictModel):
    """The behaviour of :class:`Scenario`, whose fields are assembled below."""

    _wiring: dict[str, Any] = PrivateAttr(default_factory=dict)
    _plan: RunPlan | None = PrivateAttr(default=None)

    @property
    def wiring(self) -> dict[str, Any]:
        """The ``uses`` of each section and ``components`` entry that has one, by its key
        (``walk``, ``components.<name>``), as written (checked by the plan)."""
        return self._wiring

    @property
    def plan(self) -> RunPlan:
        """Every component instance of the run, wired and in build order: computed once, when
        the scenario was validated (:func:`~netsim.scenario.plan.plan_scenario`)."""
        assert self._plan is not None
        return self._plan

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Any:
        """A copy (pydantic's, which does not validate); one whose ``update`` changes what the
        plan is made of (any key but the seed, name and description) is planned again, as
        the copy's instances are not the original's."""
        copy = super().model_copy(update=update, deep=deep)
        if update and set(update) - UNPLANNED_KEYS:
            copy._plan = plan_scenario(copy)
        return copy

    @model_validator(mode="wrap")
    @classmethod
    def _wired_and_consistent(cls, data: Any, handler: Any) -> Any:
        data, wiring = _wiring_of(data)
        scenario = handler(data)
        if wiring:
            scenario._wiring = wiring
        try:
            plan = plan_scenario(scenario)
        except WiringError as exc:
            raise ValueError(str(exc)) from None
        problem = plan_problems(plan, scenario)
        if problem is not None:
            raise ValueError(problem)
        scenario._plan = plan
        return scenario


def _fields() -> dict[str, Any]:
    """The scenario's top-level keys in the order a scenario file lists them: the core keys,
    the declared sections in their order, ``components``, ``metrics``."""
    return {
        "name": (Name, "scenario"),
        "description": (str, ""),
        "seed": (int | None, Field(default=None, ge=0, lt=2**63)),
        "nodes": (int, Field(ge=1)),
        "duration": (PositiveDuration, ...),
        **{key: _section_field(entry) for key, entry in REGISTRY.sections().items()},
        "components": (dict[Name, ComponentsField], Field(default_factory=dict)),
        "metrics": (MetricsConfig, MetricsConfig()),
    }


#: A whole run: network, churn, protocols, metrics. Every part of a run is a named component
#: instance: the sections (``links``, ``gossip``, ``walk``, ``dola``, …) are instances named
#: by their section, and ``components`` holds more, each by its own name; any of them may wire
#: itself to chosen instances with ``uses`` (role → instance name, e.g. ``{gossip:
#: fast_gossip}``); a role it does not wire is filled by the section of that name.
Scenario: type[_ScenarioModel] = create_model(  # type: ignore[call-overload]
    "Scenario", __base__=_ScenarioModel, __module__=__name__, **_fields()
)
Scenario.__doc__ = """A whole run: network, churn, protocols, metrics (see the module docstring).

Every part of a run is a named component instance: the sections (``links``, ``gossip``,
``walk``, ``dola``, …) are instances named by their section, and ``components`` holds more,
each by its own name. A section or entry may wire itself to chosen instances with ``uses``
(role → instance name, e.g. ``{gossip: fast_gossip}``); a role it does not wire is filled by
the section of that name. The wiring is kept apart from the settings (:attr:`wiring`); the
plan of the run is computed once (:attr:`plan`)."""
