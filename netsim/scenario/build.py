"""Turn a validated :class:`Scenario` into a ready-to-run simulation: a loop over its
components in dependency order.

The network comes first (topology, churn, links), then every component the scenario names, in
the order of :func:`scenario_parts` — which puts each after the sections it requires — and
then, once all are built, each component's ``start()`` in the same order. A component draws
from streams namespaced by its key in the scenario (``topology``, ``churn``, ``links.*``,
``gossip.*``, ``broadcast.*``, ``walk.*``, ``components.<name>.*``), so adding one never
changes another's draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from netsim.algorithms.dpsgd.sgd import SGDAgent
from netsim.contracts import BuildContext, ChurnModel, Component, TopologyBuilder, supports_rounds
from netsim.errors import NetsimError, ScenarioError
from netsim.log import I32, STR, EventLog, TableSchema
from netsim.network.churn import CHURN_TABLE, ChurnReplay, ChurnSchedule
from netsim.network.links import Network
from netsim.network.nodes import NodeStates
from netsim.network.samples import SAMPLES_TABLE as SAMPLES_TABLE
from netsim.network.samples import SystemSampler
from netsim.network.topology import Topology
from netsim.protocols.gossip import round_mode
from netsim.registry import REGISTRY, SLOT_NAMES, component_class
from netsim.rng import RandomStreams
from netsim.scenario.estimate import check_run_size
from netsim.sim import Simulation

if TYPE_CHECKING:
    from netsim.scenario import schema as s

TRACE_ASSIGNMENT_TABLE = TableSchema(
    name="trace_assignment",
    columns=(("node", I32), ("trace_node", STR)),
    description=(
        "For churn replayed from a trace: the trace node (a STUNner segment is "
        "'<user>@<start, Unix s>') each simulated node replays."
    ),
    role="static",
)


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
        if self.key.startswith(COMPONENTS_PREFIX):
            return self.key[len(COMPONENTS_PREFIX) :].split(".", 1)[0]
        return self.key.split(".", 1)[0]

    def table_schemas(self) -> tuple[TableSchema, ...]:
        """The tables it writes, under the names it writes them."""
        schemas = self.cls.table_schemas(self.config)
        if not self.table_prefix:
            return schemas
        return tuple(replace(t, name=self.table_prefix + t.name) for t in schemas)


#: The slots of the instances a ``components`` entry may be (a walk agent travels with its
#: walk; topology, churn, mechanisms and data sets are named where they are used).
INSTANCE_SLOTS = ("application", "protocol", "learner", "walk", "gossip", "transport", "observer")
COMPONENTS_PREFIX = "components."
#: The transport every instance sends through unless wired to another (the ``links`` section).
TRANSPORT = "transport"
#: The fixed sections of a scenario, in build order (each after what it requires): the
#: transport (``links``), the DP-SGD learner state (``learning``, not a registered component),
#: then registered components that a scenario names by section rather than by ``kind`` (looked
#: up in the registry under the section's name, like any plugin: ``gossip`` is the built-in
#: gossip engine). The ``samples`` observer is built last.
INFRASTRUCTURE: dict[str, type[Component]] = {"learning": SGDAgent}
FIXED_BEFORE_WALK: tuple[str, ...] = ("learning", "gossip", "broadcast")
FIXED_AFTER_WALK: tuple[str, ...] = ("gossip_learning", "dola", "mi_ogd")
#: The slot of the instance a role must be filled by, where it is not the section's own class.
ROLE_SLOTS: dict[str, str] = {"gossip": "gossip", TRANSPORT: "transport"}
#: Fixed sections whose config may name another component of their slot by ``kind`` (the
#: built-in one is registered under the section's name).
SECTION_SLOTS: dict[str, str] = {"links": "transport", "gossip": "gossip"}


def section_class(key: str, config: Any = None) -> type[Component]:
    """The component class of the fixed section ``key`` (of its ``kind``, when it names one)."""
    slot = SECTION_SLOTS.get(key)
    if slot is not None and getattr(config, "kind", None) is not None:
        return component_class(config, (slot,))
    cls = INFRASTRUCTURE.get(key)
    if cls is None:
        cls, _ = REGISTRY.lookup((slot,) if slot else INSTANCE_SLOTS, key)
    return cls


def _declared_parts(scenario: s.Scenario) -> list[Part]:
    """Every instance of ``scenario`` except topology and churn, unwired, in the order the
    scenario gives them: the transport, the fixed sections (a walk's agent before its walk),
    the ``components`` entries in the order written, the ``samples`` observer."""

    def walk_parts(key: str, walk: Any) -> list[Part]:
        agent = walk.agent
        return [
            Part(f"{key}.agent", agent, component_class(agent, ("walk_agent",))),
            Part(key, walk, component_class(walk, ("walk",))),
        ]

    parts = [Part("links", scenario.links, section_class("links", scenario.links))]
    parts.extend(
        Part(key, getattr(scenario, key), section_class(key, getattr(scenario, key)))
        for key in FIXED_BEFORE_WALK
        if getattr(scenario, key) is not None
    )
    if scenario.walk is not None:
        parts.extend(walk_parts("walk", scenario.walk))
    parts.extend(
        Part(key, getattr(scenario, key), section_class(key))
        for key in FIXED_AFTER_WALK
        if getattr(scenario, key) is not None
    )
    for name, config in scenario.components.items():
        cls = component_class(config, INSTANCE_SLOTS)
        key = COMPONENTS_PREFIX + name
        parts.extend(walk_parts(key, config) if cls.slot == "walk" else [Part(key, config, cls)])
    sampler = SystemSampler.Config(every=scenario.metrics.sample_every)
    parts.append(Part("samples", sampler, SystemSampler))
    return parts


class WiringError(ValueError):
    """A ``components`` entry's ``uses`` that cannot be honoured (its message names it)."""


def _roles(part: Part) -> list[str]:
    """The roles ``part`` is wired in: what it requires, what it uses optionally, the
    transport it sends through (all but a transport) and a walk's own agent."""
    roles = [*part.cls.requires, *(r for r in part.cls.optional if r not in part.cls.requires)]
    if part.cls.slot != "transport":
        roles.append(TRANSPORT)
    if part.cls.slot == "walk":
        roles.append("walk.agent")
    return roles


def _wire(parts: list[Part], wiring: Mapping[str, Any]) -> list[Part]:
    """``parts`` with each one's roles resolved to the key of the instance that fills them:
    the instance its ``uses`` names, else the section of the role's name (a walk's agent:
    its own). Raises :class:`WiringError` naming the entry's ``uses`` key."""
    by_key = {part.key: part for part in parts}
    components = {part.instance for part in parts if part.key.startswith(COMPONENTS_PREFIX)}
    for name, uses in wiring.items():
        if not isinstance(uses, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in uses.items()
        ):
            raise WiringError(
                f"components.{name}.uses: a mapping of role to instance name, e.g. "
                "{gossip: my_gossip}"
            )
    instance_roles: dict[str, set[str]] = {}
    for part in parts:
        instance_roles.setdefault(part.instance, set()).update(_roles(part))
    for name, uses in wiring.items():
        if name not in components:
            continue  # a wired entry that failed validation: its own error is reported
        allowed = instance_roles[name] - {"walk.agent"}
        unknown = sorted(set(uses) - allowed)
        if unknown:
            entry = by_key[COMPONENTS_PREFIX + name]
            raise WiringError(
                f"components.{name}.uses.{unknown[0]}: {entry.label} has no such role; its "
                f"roles: {', '.join(sorted(allowed)) or 'none'}"
            )
    wired = []
    for part in parts:
        roles = _roles(part)
        own = wiring.get(part.instance, {}) if part.key.startswith(COMPONENTS_PREFIX) else {}
        where = f"components.{part.instance}.uses"
        uses: dict[str, str] = {}
        for role in roles:
            if role == "walk.agent":
                uses[role] = f"{part.key}.agent"
                continue
            if role in own:
                target = own[role]
                in_components = target in components
                if in_components and target in by_key:
                    raise WiringError(
                        f"{where}.{role}: {target!r} names both the {target} section and the "
                        f"components entry {target!r}; rename the entry"
                    )
                key = COMPONENTS_PREFIX + target if in_components else target
                if key not in by_key or key == part.key:
                    names = sorted(
                        p.instance
                        for p in parts
                        if p.key == p.instance or p.key == COMPONENTS_PREFIX + p.instance
                    )
                    raise WiringError(
                        f"{where}.{role}: no other instance is named {target!r}; the "
                        f"instances: {', '.join(names)}"
                    )
                _check_role_filler(f"{where}.{role}", role, by_key[key])
                uses[role] = key
            elif role == TRANSPORT:
                uses[role] = "links"
            elif role in by_key:
                uses[role] = role
            # a missing required section is reported by scenario_problems
        wired.append(replace(part, uses=uses))
    return wired


def _check_role_filler(where: str, role: str, target: Part) -> None:
    """``target`` can fill ``role``: an instance of the role's slot, or of the class of the
    section the role is named after."""
    slot = ROLE_SLOTS.get(role)
    if slot is not None:
        if target.cls.slot != slot:
            raise WiringError(
                f"{where}: {target.label} is a {target.cls.slot_title}, not a {SLOT_NAMES[slot]}"
            )
        return
    try:
        expected = section_class(role)
    except NetsimError:
        return  # a plugin's own role: any instance may fill it
    if not issubclass(target.cls, expected):
        raise WiringError(
            f"{where}: {target.label} cannot fill the role {role!r} (a {expected.__name__} does)"
        )


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
    that a fixed section or an entry before it writes too writes all its tables as
    ``<name>.<table>``."""

    def names(part: Part) -> set[str]:
        return {t.name for t in part.cls.table_schemas(part.config)}

    entries: dict[str, set[str]] = {}  # instance → its tables (a walk's and its agent's)
    written: set[str] = set()
    for part in parts:
        if part.key.startswith(COMPONENTS_PREFIX):
            entries.setdefault(part.instance, set()).update(names(part))
        else:
            written |= names(part)
    renamed: set[str] = set()
    for instance, tables in entries.items():
        if tables & written:
            renamed.add(instance)
        else:
            written |= tables
    result = []
    for part in parts:
        if part.key.startswith(COMPONENTS_PREFIX) and part.instance in renamed:
            part = replace(part, table_prefix=f"{part.instance}.")
        result.append(part)
    return result


def scenario_parts(scenario: s.Scenario) -> list[Part]:
    """Every component instance of ``scenario`` except topology and churn, wired, with its
    tables' names, in build order: as :func:`_declared_parts` gives them, each moved after
    the instances it uses."""
    return _table_prefixes(_build_order(_wire(_declared_parts(scenario), scenario.wiring)))


def scenario_problems(scenario: s.Scenario) -> str | None:
    """What makes ``scenario`` unrunnable across its sections (``None`` if nothing): missing
    required sections, wiring that cannot be honoured, round mode for an application without
    it, each component's own check, two components writing one table, a topology impossible
    on ``nodes``."""
    try:
        parts = scenario_parts(scenario)
    except WiringError as exc:
        return str(exc)
    by_key = {part.key: part for part in parts}
    writers: dict[str, str] = {}
    for part in parts:
        for section, why in part.cls.requires.items():
            if section not in part.uses:
                return f"{part.label} needs a {section} section ({why})"
        engine = by_key.get(part.uses.get("gossip", ""))
        if (
            engine is not None
            and "gossip" in part.cls.requires
            and round_mode(engine.config)
            and not supports_rounds(part.cls)
        ):
            return (
                f"{part.label} does not support gossip.mode rounds (it implements only the "
                "exact-mode methods outgoing and incoming); use gossip.mode exact"
            )
        try:
            part.cls.check(part.config, scenario)
            part.cls.check_dependents(
                part.config,
                [o.label for o in parts if part.key in o.uses.values() and o is not part
                 and o.cls.slot != "observer"],
            )  # fmt: skip
        except ValueError as exc:
            return str(exc)
        for table in part.table_schemas():
            other = writers.setdefault(table.name, part.label)
            if other != part.label:
                return f"{other} and {part.label} both write the table {table.name!r}"
    return topology_problem(scenario.topology, scenario.nodes)


def component_classes(scenario: s.Scenario) -> dict[str, type]:
    """Every component of ``scenario`` by key, as the class it is built from."""
    return {
        "topology": component_class(scenario.topology, ("topology",)),
        "churn": component_class(scenario.churn, ("churn",)),
        **{part.key: part.cls for part in scenario_parts(scenario)},
    }


def class_reference(cls: type) -> str:
    """How a scenario names ``cls`` by its module: ``module:Class``."""
    return f"{cls.__module__}:{cls.__qualname__}"


def component_references(scenario: s.Scenario) -> dict[str, str]:
    """Every component of ``scenario`` by key, as the ``module:Class`` it was built from (the
    run's manifest records them, so ``netsim report`` finds their figures)."""
    return {key: class_reference(cls) for key, cls in component_classes(scenario).items()}


def table_prefixes(scenario: s.Scenario) -> dict[str, str]:
    """The instances of ``scenario`` whose tables carry their name, by key → the prefix (the
    run's manifest records them, so ``netsim report`` draws their figures from their tables)."""
    return {part.key: part.table_prefix for part in scenario_parts(scenario) if part.table_prefix}


def builtin_component_classes() -> list[type[Component]]:
    """The fixed sections' infrastructure and every component netsim registers."""
    classes: list[type[Component]] = list(INFRASTRUCTURE.values())
    for slot, name, _, origin in REGISTRY.entries():
        if origin == "netsim":
            classes.append(REGISTRY.lookup((slot,), name)[0])
    return list(dict.fromkeys(classes))


def topology_problem(config: Any, n: int) -> str | None:
    """Why the topology of ``config`` cannot be built on ``n`` nodes, or ``None``."""
    cls = component_class(config, ("topology",))
    assert issubclass(cls, TopologyBuilder)
    if n < 2 and not cls.single_node_ok:
        return f"nodes: a {config.kind} topology needs at least 2 nodes, got {n}"
    return cls.problem(config, n)


@dataclass
class BuiltRun:
    """Everything one run is made of: the network and the components by scenario key."""

    scenario: s.Scenario
    sim: Simulation
    topology: Topology
    nodes: NodeStates
    network: Network
    churn: ChurnReplay
    components: dict[str, Component] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def __getitem__(self, key: str) -> Any:
        """The built component of the scenario section ``key`` (``walk``, ``gossip``,
        ``components.averaging``, …)."""
        return self.components[key]

    def get(self, key: str) -> Any:
        """The component of ``key``, or ``None`` when the scenario has none."""
        return self.components.get(key)


def declared_tables(scenario: s.Scenario) -> set[str]:
    """The tables a run of ``scenario`` may write: the churn's and its instances' (under the
    names they write them)."""
    names = {table.name for table in (TRACE_ASSIGNMENT_TABLE, CHURN_TABLE)}
    for part in scenario_parts(scenario):
        names.update(table.name for table in part.table_schemas())
    return names


def check_omitted_tables(scenario: s.Scenario) -> None:
    """``metrics.omit_tables`` may name only tables this scenario writes."""
    omitted = set(scenario.metrics.omit_tables)
    if not omitted:
        return
    known = declared_tables(scenario)
    unknown = sorted(omitted - known)
    if unknown:
        raise ScenarioError(
            f"metrics.omit_tables: {', '.join(unknown)} is not a table of this scenario; "
            f"its tables: {', '.join(sorted(known))}"
        )


#: Below this share of node-time online, a run is warned about: it will see almost nothing.
ALMOST_NOBODY_ONLINE = 0.01


def network_parts(
    scenario: s.Scenario, streams: RandomStreams, warnings: list[str]
) -> tuple[Topology, ChurnModel, ChurnSchedule]:
    """The topology, the churn component and its schedule (no simulation needed: ``netsim
    validate`` builds them too)."""

    def context(key: str) -> BuildContext:
        return BuildContext(key=key, scenario=scenario, streams=streams, warnings=warnings)

    topology_config = scenario.topology
    builder = component_class(topology_config, ("topology",)).build(
        topology_config, context("topology")
    )
    assert isinstance(builder, TopologyBuilder)
    topology = builder.build_topology(scenario.nodes)
    churn_config = scenario.churn
    model = component_class(churn_config, ("churn",)).build(churn_config, context("churn"))
    assert isinstance(model, ChurnModel)
    schedule = model.schedule(scenario.nodes, scenario.duration)
    online = schedule.online_fraction(scenario.duration)
    if online < ALMOST_NOBODY_ONLINE:
        warnings.append(
            f"churn: nodes are online {online:.2%} of the time over the run's "
            f"{scenario.duration:g} s, so almost nothing can happen; check the churn model (a "
            "long trace replayed from its start may begin with nobody online: churn.start_at "
            "replays a later window)"
        )
    return topology, model, schedule


def check_inputs(scenario: s.Scenario) -> list[str]:
    """Build what a run reads from files or derives from parameters (topology, churn
    schedule, data) without running it, so ``netsim validate`` finds every error ``run``
    would. Returns the warnings the run would print."""
    streams = RandomStreams(scenario.seed if scenario.seed is not None else 0)
    warnings: list[str] = []
    check_run_size(scenario, warnings)  # before building anything of that size
    check_omitted_tables(scenario)
    topology, _, _ = network_parts(scenario, streams, warnings)
    parts = scenario_parts(scenario)
    configs = {part.key: part.config for part in parts}
    for part in parts:
        ctx = BuildContext(
            key=part.key, scenario=scenario, streams=streams, warnings=warnings,
            topology=topology, uses=part.uses, configs=configs,
        )  # fmt: skip
        part.cls.check_inputs(part.config, ctx)
    return warnings


def build_run(scenario: s.Scenario, log: EventLog) -> BuiltRun:
    """Assemble the simulation for ``scenario`` (whose seed must be set)."""
    if scenario.seed is None:
        raise ScenarioError("build_run needs a scenario with a seed")
    warnings: list[str] = []
    check_run_size(scenario, warnings)
    check_omitted_tables(scenario)
    log.omit(scenario.metrics.omit_tables)
    sim = Simulation(seed=scenario.seed, log=log)
    n = scenario.nodes
    topology, churn_model, schedule = network_parts(scenario, sim.streams, warnings)
    nodes = NodeStates(schedule.initially_online)
    churn = ChurnReplay(sim, nodes, schedule)
    picks = churn_model.trace_labels
    if picks is not None:
        sim.log.table(TRACE_ASSIGNMENT_TABLE).extend([range(n), picks.tolist()])
    components: dict[str, Component] = {}
    parts = scenario_parts(scenario)
    configs = {part.key: part.config for part in parts}
    for part in parts:
        ctx = BuildContext(
            key=part.key, scenario=scenario, streams=sim.streams, warnings=warnings,
            sim=sim.with_log(sim.log.prefixed(part.table_prefix)) if part.table_prefix else sim,
            network=components.get(part.uses.get(TRANSPORT, "")), built=components,
            topology=topology, uses=part.uses, configs=configs, node_states=nodes, churn=churn,
        )  # fmt: skip
        component = part.cls.build(part.config, ctx)
        components[part.key] = component
        sim.at_end(component.finish)
        if part.key == "links":
            isolated = int((topology.degrees() == 0).sum())
            if isolated and scenario.gossip is not None:
                warnings.append(f"topology: {isolated} node(s) have no neighbour and cannot gossip")
    for component in components.values():
        component.start()
    network = components["links"]
    assert isinstance(network, Network)
    return BuiltRun(
        scenario=scenario, sim=sim, topology=topology, nodes=nodes, network=network,
        churn=churn, components=components, warnings=warnings,
    )  # fmt: skip
