"""The scenario schema: typed, frozen, validated configuration.

The core keys (``name``, ``description``, ``seed``, ``nodes``, ``duration``, ``components``,
``metrics``) are defined here; every other top-level key is a section a component declares
(:class:`~netsim.component_sections.Section`: a built-in's, an installed plug-in's, or the section a
scenario names by ``kind: package.module:Class``; collected by
:meth:`netsim.registry.Registry.sections`, so a scenario is validated by the model of its own
sections, :func:`scenario_model`) and is validated by that component's config model,
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
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, PrivateAttr, create_model, model_validator

from netsim.component import MetricsConfig
from netsim.distributions import PositiveDuration
from netsim.errors import ComponentError
from netsim.fields import CheckedModel, Name
from netsim.network.links import LinkFailureConfig, LinksConfig
from netsim.registry import (
    REGISTRY,
    SectionEntry,
    component_field,
    import_reference,
    own_section_field,
    section_field,
)
from netsim.scenario.plan import (
    INSTANCE_SLOTS,
    USES,
    RunPlan,
    WiringError,
    plan_problems,
    plan_scenario,
)

__all__ = [
    "LinkFailureConfig",
    "LinksConfig",
    "MetricsConfig",
    "Scenario",
    "StrictModel",
    "scenario_model",
]


class StrictModel(CheckedModel):
    """A scenario section (see :class:`~netsim.fields.CheckedModel`)."""

    model_config = ConfigDict(populate_by_name=True)


#: The entries of ``components``: any instance of :data:`INSTANCE_SLOTS`, named by ``kind``.
ComponentsField = component_field(*INSTANCE_SLOTS)


def _section_field(entry: SectionEntry) -> tuple[Any, Any]:
    """The annotation and default of the top-level key of a declared section."""
    section, owner = entry.section, entry.cls
    if not entry.builtin and section.by_kind == "never":
        annotation: Any = own_section_field(entry)
    elif section.by_kind == "always":
        annotation = component_field(entry.slot)
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


def _wiring_of(data: Any, sections: Mapping[str, SectionEntry]) -> tuple[Any, dict[str, Any]]:
    """``data`` without the ``uses`` of its sections and ``components`` entries, and those
    ``uses`` by the key of their section or entry (``walk``, ``components.<name>``)."""
    if not isinstance(data, dict):
        return data, {}
    wiring: dict[str, Any] = {}
    data = dict(data)
    for key, entry in sections.items():
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
    #: The sections of this model's top-level keys, in build order.
    __sections__: ClassVar[dict[str, SectionEntry]] = {}
    #: The classes the scenario named by ``kind: module:Class`` for a section of theirs
    #: (what rebuilds this model in another process: :func:`scenario_model_of`).
    __references__: ClassVar[tuple[str, ...]] = ()

    @property
    def declared_sections(self) -> Mapping[str, SectionEntry]:
        """The sections of this scenario's model (built-in and plug-in), in build order."""
        return type(self).__sections__

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
        data, wiring = _wiring_of(data, cls.__sections__)
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

    def __reduce_ex__(self, protocol: Any) -> Any:
        """A scenario of plug-in sections pickles as "the model of these sections" plus its
        state (its class is made at run time: pickle cannot find it by name)."""
        if type(self) is Scenario:
            return super().__reduce_ex__(protocol)
        return (_rebuild_scenario, (type(self).__references__,), self.__getstate__())


def _fields(sections: Mapping[str, SectionEntry]) -> dict[str, Any]:
    """The scenario's top-level keys in the order a scenario file lists them: the core keys,
    the declared sections in their order, ``components``, ``metrics``."""
    return {
        "name": (Name, "scenario"),
        "description": (str, ""),
        "seed": (int | None, Field(default=None, ge=0, lt=2**63)),
        "nodes": (int, Field(ge=1)),
        "duration": (PositiveDuration, ...),
        **{key: _section_field(entry) for key, entry in sections.items()},
        "components": (dict[Name, ComponentsField], Field(default_factory=dict)),
        "metrics": (MetricsConfig, MetricsConfig()),
    }


#: A whole run: network, churn, protocols, metrics. Every part of a run is a named component
#: instance: the sections (``links``, ``gossip``, ``walk``, ``dola``, …) are instances named
#: by their section, and ``components`` holds more, each by its own name; any of them may wire
#: itself to chosen instances with ``uses`` (role → instance name, e.g. ``{gossip:
#: fast_gossip}``); a role it does not wire is filled by the section of that name.
def _model(sections: dict[str, SectionEntry], references: tuple[str, ...]) -> Any:
    model = create_model(  # type: ignore[call-overload]
        "Scenario", __base__=_ScenarioModel, __module__=__name__, **_fields(sections)
    )
    model.__sections__ = sections
    model.__references__ = references
    return model


#: The scenario model of the built-in sections (that of a scenario without plug-in sections).
Scenario: type[_ScenarioModel] = _model(REGISTRY.sections(plugins=False), ())
#: The models of other sets of sections, by their keys and declaring classes.
_MODELS: dict[tuple[tuple[str, type], ...], type[_ScenarioModel]] = {}


def scenario_model_of(references: tuple[str, ...] = ()) -> type[_ScenarioModel]:
    """The scenario model of the built-in sections, the installed plug-ins' and those of the
    classes ``references`` names (``module:Class``): :data:`Scenario` when they are only
    the built-in ones."""
    sections = REGISTRY.sections(references)
    signature = tuple((key, entry.cls) for key, entry in sections.items())
    if signature == tuple((key, entry.cls) for key, entry in Scenario.__sections__.items()):
        return Scenario
    model = _MODELS.get(signature)
    if model is None:
        model = _MODELS[signature] = _model(sections, references)
    return model


def _rebuild_scenario(references: tuple[str, ...]) -> _ScenarioModel:
    """An empty scenario of :func:`scenario_model_of` (pickle then sets its state)."""
    model = scenario_model_of(references)
    return model.__new__(model)


def scenario_model(data: Any) -> type[_ScenarioModel]:
    """The model that validates the plain scenario ``data``: the built-in and installed
    sections, and a section a top-level key names by ``kind: package.module:Class`` (a
    plug-in's section used without installing it: the class must declare that key)."""
    references: list[str] = []
    if isinstance(data, dict):
        known = set(Scenario.model_fields)
        for key, value in data.items():
            kind = value.get("kind") if isinstance(value, dict) else None
            if key not in known and isinstance(kind, str) and ":" in kind:
                _check_declares(key, kind)
                references.append(kind)
    return scenario_model_of(tuple(references))


def _check_declares(key: str, reference: str) -> None:
    """Raise :class:`ComponentError` unless the class ``reference`` names declares the
    section ``key`` (the top-level key that names it)."""
    try:
        cls = import_reference(reference)
    except ComponentError as exc:
        raise ComponentError(f"{key}.kind: {exc}") from None
    section = getattr(cls, "section", None)
    if getattr(section, "key", None) != key:
        declared = f"the section {section.key!r}" if section is not None else "no section"
        raise ComponentError(
            f"{key}: {reference} declares {declared}, so it cannot be the {key!r} section; "
            "a component without a section of its own is an entry of components"
        )


Scenario.__doc__ = """A whole run: network, churn, protocols, metrics (see the module docstring).

Every part of a run is a named component instance: the sections (``links``, ``gossip``,
``walk``, ``dola``, …) are instances named by their section, and ``components`` holds more,
each by its own name. A section or entry may wire itself to chosen instances with ``uses``
(role → instance name, e.g. ``{gossip: fast_gossip}``); a role it does not wire is filled by
the section of that name. The wiring is kept apart from the settings (:attr:`wiring`); the
plan of the run is computed once (:attr:`plan`)."""
