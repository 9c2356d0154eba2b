"""The plan of a run: every component instance of a scenario, wired, in build order, with the
names of its tables — computed once, when the scenario is validated (:func:`plan_scenario`),
and read by the build, the runner, the manifest and the table declarations
(:attr:`Scenario.plan <netsim.scenario.schema.Scenario.plan>`).

A scenario's top-level sections are shorthands: each is one instance of the class that
declares it (:class:`~netsim.component_sections.Section`, a built-in's or a plug-in's, collected by
:meth:`netsim.registry.Registry.sections`; the scenario's own set is its
``declared_sections``), named after its section; ``components`` adds
instances of any kind under names of their own. Each role an instance fills (its
``requires``, its ``optional``, and ``transport``) resolves to the instance its ``uses`` names,
else to the section of the role's name; the instances are built in a stable topological order
of that wiring (sections in their declared order, then the entries as written, where the
wiring allows), and an entry whose tables another instance also writes writes them as
``<name>.<table>``. The topology and churn sections build the network, before every instance.
``docs/architecture.md`` draws it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from netsim.contracts import (
    BuildContext,
    Component,
    MetricsConfig,
    TopologyBuilder,
    supports_rounds,
)
from netsim.errors import NetsimError
from netsim.network.samples import SystemSampler
from netsim.protocols.gossip import round_mode
from netsim.registry import REGISTRY, SLOT_NAMES, SectionEntry, component_class

__all__ = [
    "COMPONENTS_PREFIX",
    "INSTANCE_SLOTS",
    "NETWORK_SLOTS",
    "TRANSPORT",
    "Part",
    "PlannedScenario",
    "RunPlan",
    "WiringError",
    "builtin_component_classes",
    "check_context",
    "class_reference",
    "plan_problems",
    "plan_scenario",
    "section_class",
    "topology_problem",
]

#: The slots of the instances a ``components`` entry may be (a walk agent travels with its
#: walk; topology, churn, mechanisms and data sets are named where they are used).
INSTANCE_SLOTS = ("application", "protocol", "learner", "walk", "gossip", "transport", "observer")
#: The slots of the sections that build the network (before every instance).
NETWORK_SLOTS = ("topology", "churn")
COMPONENTS_PREFIX = "components."
#: The role of the transport every instance sends through unless wired to another (the
#: ``links`` section).
TRANSPORT = "transport"
#: The key of a section or ``components`` entry that wires it to other instances.
USES = "uses"
#: The slot of the instance a role must be filled by, where it is not the section's own class.
ROLE_SLOTS: dict[str, str] = {"gossip": "gossip", TRANSPORT: "transport"}


class PlannedScenario(Protocol):
    """What the planner reads of a validated scenario (:class:`netsim.scenario.schema.Scenario`,
    whose validation calls the planner, so this module cannot import it): the run-wide values,
    the ``components`` entries, the wiring, its sections (built-in and plug-in, in build order)
    and each section by its key (``getattr``)."""

    nodes: int
    duration: float
    components: Mapping[str, Any]
    metrics: MetricsConfig

    @property
    def wiring(self) -> Mapping[str, Any]: ...

    @property
    def declared_sections(self) -> Mapping[str, SectionEntry]: ...


@dataclass(frozen=True)
class Part:
    """One component instance of a scenario: its key, its validated config, its class, whom
    it is wired to (role → key of the instance) and the prefix of its tables' names (empty
    unless another instance writes tables of the same names)."""

    key: str
    config: Any
    cls: type[Component]
    uses: Mapping[str, str] = field(default_factory=dict)
    table_prefix: str = ""

    @property
    def label(self) -> str:
        """How messages name it: the key, with the kind where the scenario chose one."""
        kind = getattr(self.config, "kind", None)
        return self.key if kind is None else f"{self.key} (kind {kind})"

    @property
    def instance(self) -> str:
        """The name of the instance it belongs to: a ``components`` entry's name, else its
        section (a walk's agent belongs to its walk)."""
        if self.in_components:
            return self.key[len(COMPONENTS_PREFIX) :].split(".", 1)[0]
        return self.key.split(".", 1)[0]

    @property
    def instance_key(self) -> str:
        """Where its instance sits in the scenario: ``components.<name>`` or the section, the
        key whose ``uses`` wires it."""
        return COMPONENTS_PREFIX + self.instance if self.in_components else self.instance

    @property
    def in_components(self) -> bool:
        """Whether it is (part of) an entry of ``components`` rather than a section."""
        return self.key.startswith(COMPONENTS_PREFIX)

    def table_schemas(self) -> tuple[Any, ...]:
        """The tables it writes, under the names it writes them."""
        schemas = self.cls.table_schemas(self.config)
        if not self.table_prefix:
            return schemas
        return tuple(replace(t, name=self.table_prefix + t.name) for t in schemas)


class WiringError(ValueError):
    """A ``uses`` that cannot be honoured (its message names it)."""


@dataclass(frozen=True)
class RunPlan:
    """Every component of a scenario, computed once: the two network sections, then the
    instances wired and in build order, each with the names of its tables."""

    topology: Part
    churn: Part
    parts: tuple[Part, ...]

    def part(self, key: str) -> Part:
        """The instance at ``key`` (``walk``, ``components.averaging``, …)."""
        return next(part for part in self.parts if part.key == key)

    def classes(self) -> dict[str, type[Component]]:
        """Every component by key, as the class it is built from (network sections first)."""
        return {part.key: part.cls for part in (self.topology, self.churn, *self.parts)}

    def references(self) -> dict[str, str]:
        """Every component by key, as the ``module:Class`` it is built from (the run's
        manifest records them, so ``netsim report`` finds their figures)."""
        return {key: class_reference(cls) for key, cls in self.classes().items()}

    def table_prefixes(self) -> dict[str, str]:
        """The instances whose tables carry their name, by key → the prefix."""
        return {part.key: part.table_prefix for part in self.parts if part.table_prefix}

    def configs(self) -> dict[str, Any]:
        """Every instance's validated config, by key."""
        return {part.key: part.config for part in self.parts}

    def wired_configs(self, part: Part) -> dict[str, Any]:
        """The configs of the instances ``part`` is wired to, by key: all of the others it
        may see."""
        configs = self.configs()
        return {key: configs[key] for key in part.uses.values() if key in configs}

    def dependents(self, part: Part) -> list[str]:
        """The labels of the instances wired to ``part`` (observers aside), in build order."""
        return [
            other.label
            for other in self.parts
            if part.key in other.uses.values() and other is not part
            and other.cls.slot != "observer"
        ]  # fmt: skip

    def of_slot(self, slot: str) -> list[Part]:
        """The instances of ``slot`` (e.g. every gossip engine), in build order."""
        return [part for part in self.parts if part.cls.slot == slot]


def class_reference(cls: type) -> str:
    """How a scenario names ``cls`` by its module: ``module:Class``."""
    return f"{cls.__module__}:{cls.__qualname__}"


# --- sections and declared instances ----------------------------------------------------------


def section_class(entry: SectionEntry, config: Any = None) -> type[Component]:
    """The component class of the section ``entry`` holding ``config``: the class that
    declares the section, or the component of its slot its ``kind`` names."""
    by_kind = entry.section.by_kind
    if by_kind == "always" or (by_kind == "optional" and getattr(config, "kind", None)):
        return component_class(config, (entry.slot,))
    return entry.cls


def _walk_parts(key: str, walk: Any, cls: type[Component]) -> list[Part]:
    """A walk and its agent (the agent first: the walk is built on it)."""
    agent = walk.agent
    agent_class = component_class(agent, ("walk_agent",))
    return [Part(f"{key}.agent", agent, agent_class), Part(key, walk, cls)]


def _instance_parts(key: str, config: Any, cls: type[Component]) -> list[Part]:
    return _walk_parts(key, config, cls) if cls.slot == "walk" else [Part(key, config, cls)]


def _declared_parts(scenario: PlannedScenario) -> list[Part]:
    """Every instance of ``scenario`` except topology and churn, unwired, in the order the
    scenario gives them: the sections in their declared order (a walk's agent before its
    walk), the ``components`` entries as written, the ``samples`` observer last."""
    parts: list[Part] = []
    for key, entry in scenario.declared_sections.items():
        config = getattr(scenario, key)
        if config is not None and entry.slot not in NETWORK_SLOTS:
            parts.extend(_instance_parts(key, config, section_class(entry, config)))
    for name, config in scenario.components.items():
        cls = component_class(config, INSTANCE_SLOTS)
        parts.extend(_instance_parts(COMPONENTS_PREFIX + name, config, cls))
    sampler = SystemSampler.Config(every=scenario.metrics.sample_every)
    parts.append(Part("samples", sampler, SystemSampler))
    return parts


# --- wiring -----------------------------------------------------------------------------------


def _roles(part: Part) -> list[str]:
    """The roles ``part`` is wired in: what it requires, what it uses optionally, the
    transport it sends through (all but a transport) and a walk's own agent."""
    roles = [*part.cls.requires, *(r for r in part.cls.optional if r not in part.cls.requires)]
    if part.cls.slot != "transport":
        roles.append(TRANSPORT)
    if part.cls.slot == "walk":
        roles.append("walk.agent")
    return roles


def _check_uses_shape(wiring: Mapping[str, Any]) -> None:
    for where, uses in wiring.items():
        if not isinstance(uses, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in uses.items()
        ):
            raise WiringError(
                f"{where}.uses: a mapping of role to instance name, e.g. {{gossip: my_gossip}}"
            )


def _check_roles_known(
    parts: list[Part], wiring: Mapping[str, Any], sections: Mapping[str, SectionEntry]
) -> None:
    """Every role a ``uses`` names is one of its instance's roles."""
    roles: dict[str, set[str]] = {}
    for part in parts:
        roles.setdefault(part.instance_key, set()).update(_roles(part))
    by_key = {part.key: part for part in parts}
    for where, uses in wiring.items():
        if where in sections and sections[where].slot in NETWORK_SLOTS:
            raise WiringError(
                f"{where}.uses: the {where} section builds the network before every instance "
                "and fills no role; leave uses out"
            )
        if where not in roles:
            continue  # a wired entry that failed validation: its own error is reported
        allowed = roles[where] - {"walk.agent"}
        unknown = sorted(set(uses) - allowed)
        if unknown:
            raise WiringError(
                f"{where}.uses.{unknown[0]}: {by_key[where].label} has no such role; its "
                f"roles: {', '.join(sorted(allowed)) or 'none'}"
            )


@dataclass(frozen=True)
class _Instances:
    """What resolving a ``uses`` target needs: the parts by key and the entry names."""

    parts: list[Part]
    by_key: dict[str, Part]
    entries: set[str]
    sections: Mapping[str, SectionEntry]

    @classmethod
    def of(cls, parts: list[Part], sections: Mapping[str, SectionEntry]) -> _Instances:
        entries = {part.instance for part in parts if part.in_components}
        return cls(parts, {part.key: part for part in parts}, entries, sections)

    def names(self) -> list[str]:
        return sorted(
            p.instance for p in self.parts if p.key in (p.instance, COMPONENTS_PREFIX + p.instance)
        )


def _wired_target(where: str, part: Part, target: str, instances: _Instances) -> str:
    """The key of the instance a ``uses`` names as ``target`` (an entry name, else a
    section), checked to exist and to be another instance."""
    in_components = target in instances.entries
    if in_components and target in instances.by_key:
        raise WiringError(
            f"{where}: {target!r} names both the {target} section and the components entry "
            f"{target!r}; rename the entry"
        )
    key = COMPONENTS_PREFIX + target if in_components else target
    if key not in instances.by_key or key == part.key:
        raise WiringError(
            f"{where}: no other instance is named {target!r}; the instances: "
            f"{', '.join(instances.names())}"
        )
    return key


def _check_role_filler(
    where: str, role: str, target: Part, sections: Mapping[str, SectionEntry]
) -> None:
    """``target`` can fill ``role``: an instance of the role's slot, or of the class of the
    section the role is named after."""
    slot = ROLE_SLOTS.get(role)
    if slot is not None:
        if target.cls.slot != slot:
            raise WiringError(
                f"{where}: {target.label} is a {target.cls.slot_title}, not a {SLOT_NAMES[slot]}"
            )
        return
    if role not in sections:
        return  # a plugin's own role: any instance may fill it
    try:
        expected = section_class(sections[role])
    except NetsimError:
        return
    if not issubclass(target.cls, expected):
        raise WiringError(
            f"{where}: {target.label} cannot fill the role {role!r} (a {expected.__name__} does)"
        )


def _wire_part(part: Part, own: Mapping[str, str], instances: _Instances) -> Part:
    """``part`` with each of its roles resolved: its own ``uses``, else the section of the
    role's name (the transport: ``links``; a walk's agent: its own)."""
    uses: dict[str, str] = {}
    for role in _roles(part):
        if role == "walk.agent":
            uses[role] = f"{part.key}.agent"
        elif role in own:
            where = f"{part.instance_key}.uses.{role}"
            key = _wired_target(where, part, own[role], instances)
            _check_role_filler(where, role, instances.by_key[key], instances.sections)
            uses[role] = key
        elif role == TRANSPORT:
            uses[role] = "links"
        elif role in instances.by_key:
            uses[role] = role
        # a missing required section is reported by plan_problems
    return replace(part, uses=uses)


def _wire(
    parts: list[Part], wiring: Mapping[str, Any], sections: Mapping[str, SectionEntry]
) -> list[Part]:
    """``parts`` with each one's roles resolved to the key of the instance that fills them.
    ``wiring``: each section's or entry's ``uses`` by its key (``walk``,
    ``components.<name>``). Raises :class:`WiringError` naming the ``uses`` key."""
    _check_uses_shape(wiring)
    _check_roles_known(parts, wiring, sections)
    instances = _Instances.of(parts, sections)
    return [_wire_part(part, wiring.get(part.instance_key, {}), instances) for part in parts]


def _build_order(parts: list[Part]) -> list[Part]:
    """``parts`` in an order where each comes after the instances it is wired to, otherwise
    as declared (a stable topological order); a circle of wiring is a :class:`WiringError`."""
    pending = list(parts)
    placed: set[str] = set()
    ordered: list[Part] = []
    keys = {part.key for part in parts}
    while pending:
        part = next(
            (p for p in pending if {key for key in p.uses.values() if key in keys} <= placed),
            None,
        )
        if part is None:
            circle = ", ".join(p.label for p in pending)
            raise WiringError(f"the wiring of {circle} is circular (each uses another)")
        pending.remove(part)
        placed.add(part.key)
        ordered.append(part)
    return ordered


def _table_prefixes(parts: list[Part]) -> list[Part]:
    """``parts`` with the prefix of their tables: an instance in ``components`` writing a table
    that a section or an entry before it writes too writes all its tables as
    ``<name>.<table>``."""

    def names(part: Part) -> set[str]:
        return {t.name for t in part.cls.table_schemas(part.config)}

    entries: dict[str, set[str]] = {}  # instance → its tables (a walk's and its agent's)
    written: set[str] = set()
    for part in parts:
        if part.in_components:
            entries.setdefault(part.instance, set()).update(names(part))
        else:
            written |= names(part)
    renamed: set[str] = set()
    for instance, tables in entries.items():
        if tables & written:
            renamed.add(instance)
        else:
            written |= tables
    return [
        replace(part, table_prefix=f"{part.instance}.")
        if part.in_components and part.instance in renamed
        else part
        for part in parts
    ]


def plan_scenario(scenario: PlannedScenario) -> RunPlan:
    """The plan of ``scenario``: its network sections, and every instance wired, in build
    order (as declared, each moved after the instances it uses), with its tables' names.
    Raises :class:`WiringError` for a ``uses`` that cannot be honoured."""
    sections = scenario.declared_sections
    wired = _wire(_declared_parts(scenario), scenario.wiring, sections)
    parts = _table_prefixes(_build_order(wired))
    network = [
        Part(key, getattr(scenario, key), section_class(entry, getattr(scenario, key)))
        for key, entry in sections.items()
        if entry.slot in NETWORK_SLOTS
    ]
    topology, churn = sorted(network, key=lambda part: NETWORK_SLOTS.index(part.cls.slot))
    return RunPlan(topology=topology, churn=churn, parts=tuple(parts))


# --- what makes a scenario unrunnable ---------------------------------------------------------


def check_context(part: Part, plan: RunPlan, scenario: PlannedScenario) -> BuildContext:
    """What :meth:`Component.check` sees of the run: the run-wide values and the configs of
    the instances ``part`` is wired to (nothing is built)."""
    return BuildContext(
        key=part.key, nodes=scenario.nodes, duration=scenario.duration, streams=None,
        warnings=[], metrics=scenario.metrics, uses=part.uses, configs=plan.wired_configs(part),
    )  # fmt: skip


def _part_problem(part: Part, plan: RunPlan, scenario: PlannedScenario) -> str | None:
    """What makes ``part`` unrunnable: a missing required section, round mode for a protocol
    without it, its own checks."""
    for section, why in part.cls.requires.items():
        if section not in part.uses:
            return f"{part.label} needs a {section} section ({why})"
    engine = plan.configs().get(part.uses.get("gossip", ""))
    if (
        engine is not None
        and "gossip" in part.cls.requires
        and round_mode(engine)
        and not supports_rounds(part.cls)
    ):
        return (
            f"{part.label} does not support gossip.mode rounds (it implements only the "
            "exact-mode methods outgoing and incoming); use gossip.mode exact"
        )
    try:
        part.cls.check(part.config, check_context(part, plan, scenario))
        part.cls.check_dependents(part.config, plan.dependents(part))
    except ValueError as exc:
        return str(exc)
    return None


def plan_problems(plan: RunPlan, scenario: PlannedScenario) -> str | None:
    """What makes ``scenario`` unrunnable across its instances (``None`` if nothing): each
    instance's problems (:func:`_part_problem`), two instances writing one table, a topology
    impossible on ``nodes``."""
    writers: dict[str, str] = {}
    for part in plan.parts:
        problem = _part_problem(part, plan, scenario)
        if problem is not None:
            return problem
        for table in part.table_schemas():
            other = writers.setdefault(table.name, part.label)
            if other != part.label:
                return f"{other} and {part.label} both write the table {table.name!r}"
    return topology_problem(plan.topology, scenario.nodes)


def topology_problem(topology: Part, n: int) -> str | None:
    """Why the topology of ``topology`` cannot be built on ``n`` nodes, or ``None``."""
    cls = topology.cls
    assert issubclass(cls, TopologyBuilder)
    if n < 2 and not cls.single_node_ok:
        return f"nodes: a {topology.config.kind} topology needs at least 2 nodes, got {n}"
    return cls.problem(topology.config, n)


def builtin_component_classes() -> list[type[Component]]:
    """Every component class netsim registers, and those that hold a section without a slot
    (the ``learning`` section's)."""
    classes: list[type[Component]] = [
        entry.cls for entry in REGISTRY.sections(plugins=False).values() if not entry.slot
    ]
    for slot, name, _, origin in REGISTRY.entries():
        if origin == "netsim":
            classes.append(REGISTRY.lookup((slot,), name)[0])
    return list(dict.fromkeys(classes))
