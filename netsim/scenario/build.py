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

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from netsim.algorithms.dpsgd.sgd import SGDAgent
from netsim.contracts import BuildContext, ChurnModel, Component, TopologyBuilder, supports_rounds
from netsim.errors import ScenarioError
from netsim.log import F64, I32, I64, STR, EventLog, TableSchema
from netsim.network.churn import CHURN_TABLE, ChurnReplay, ChurnSchedule
from netsim.network.links import LOSS_TABLE, LinkModel, Network
from netsim.network.nodes import NodeStates
from netsim.network.topology import Topology
from netsim.protocols.gossip import GossipEngine, round_mode
from netsim.registry import REGISTRY, component_class
from netsim.rng import RandomStreams
from netsim.scenario.estimate import check_run_size
from netsim.sim import Simulation

if TYPE_CHECKING:
    from netsim.scenario import schema as s

SAMPLES_TABLE = TableSchema(
    name="samples",
    columns=(
        ("time", F64),
        ("online", I64),
        ("gossip_active", I64),
        ("messages_sent", I64),
        ("messages_delivered", I64),
        ("messages_lost", I64),
        ("gossip_exchanges", I64),
        ("churn_transitions", I64),
    ),
    description=(
        "System state every metrics.sample_every (and at the end): online nodes, nodes taking "
        "part in gossip, and cumulative counters of messages and churn transitions."
    ),
    role="samples", time="time",
)


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
    """One component of a scenario: its key, its validated config and its class."""

    key: str
    config: Any
    cls: type[Component]

    @property
    def label(self) -> str:
        """How messages name it: the key, with the kind where the scenario chose one."""
        kind = getattr(self.config, "kind", None)
        return self.key if kind is None else f"{self.key} (kind {kind})"


#: The slots whose components may stand in the ``components`` section.
COMPONENT_SLOTS = ("application", "protocol", "learner")
#: The fixed sections of a scenario, in build order (each after what it requires): the shared
#: infrastructure (the DP-SGD learner state, the gossip engine), then registered components
#: that a scenario names by section rather than by ``kind`` (looked up in the registry under
#: the section's name, like any plugin).
INFRASTRUCTURE: dict[str, type[Component]] = {"learning": SGDAgent, "gossip": GossipEngine}
FIXED_BEFORE_WALK: tuple[str, ...] = ("learning", "gossip", "broadcast")
FIXED_AFTER_WALK: tuple[str, ...] = ("gossip_learning", "dola", "mi_ogd")


def section_class(key: str) -> type[Component]:
    """The component class of the fixed section ``key``."""
    cls = INFRASTRUCTURE.get(key)
    if cls is None:
        cls, _ = REGISTRY.lookup(COMPONENT_SLOTS, key)
    return cls


def scenario_parts(scenario: s.Scenario) -> list[Part]:
    """Every component of ``scenario`` except topology and churn, in build order: the fixed
    sections, the walk's agent before the walk, then the ``components`` entries in the order
    written."""
    parts = [
        Part(key, getattr(scenario, key), section_class(key))
        for key in FIXED_BEFORE_WALK
        if getattr(scenario, key) is not None
    ]
    walk = scenario.walk
    if walk is not None:
        agent = walk.agent
        parts.append(Part("walk.agent", agent, component_class(agent, ("walk_agent",))))
        parts.append(Part("walk", walk, component_class(walk, ("walk",))))
    parts.extend(
        Part(key, getattr(scenario, key), section_class(key))
        for key in FIXED_AFTER_WALK
        if getattr(scenario, key) is not None
    )
    for name, config in scenario.components.items():
        cls = component_class(config, COMPONENT_SLOTS)
        parts.append(Part(f"components.{name}", config, cls))
    return parts


def scenario_problems(scenario: s.Scenario) -> str | None:
    """What makes ``scenario`` unrunnable across its sections (``None`` if nothing): missing
    required sections, round mode for an application without it, each component's own
    check, two components writing one table, a topology impossible on ``nodes``."""
    gossip = scenario.gossip
    rounds = round_mode(gossip)
    parts = scenario_parts(scenario)
    present = {part.key for part in parts}
    writers: dict[str, str] = {}
    for part in parts:
        for section, why in part.cls.requires.items():
            if section not in present:
                return f"{part.label} needs a {section} section ({why})"
        if rounds and "gossip" in part.cls.requires and not supports_rounds(part.cls):
            return (
                f"{part.label} does not support gossip.mode rounds (it implements only the "
                "exact-mode methods outgoing and incoming); use gossip.mode exact"
            )
        try:
            part.cls.check(part.config, scenario)
            part.cls.check_dependents(
                part.config,
                [o.label for o in parts if part.key in o.cls.requires and o is not part],
            )
        except ValueError as exc:
            return str(exc)
        for table in part.cls.table_schemas(part.config):
            other = writers.setdefault(table.name, part.label)
            if other != part.label:
                return f"{other} and {part.label} both write the table {table.name!r}"
    return topology_problem(scenario.topology, scenario.nodes)


def component_references(scenario: s.Scenario) -> dict[str, str]:
    """Every component of ``scenario`` by key, as the ``module:Class`` it was built from (the
    run's manifest records them, so ``netsim report`` finds their figures)."""
    classes = {
        "topology": component_class(scenario.topology, ("topology",)),
        "churn": component_class(scenario.churn, ("churn",)),
        **{part.key: part.cls for part in scenario_parts(scenario)},
    }
    return {key: f"{cls.__module__}:{cls.__qualname__}" for key, cls in classes.items()}


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
    """The tables a run of ``scenario`` may write: the network's and its components'."""
    core = (SAMPLES_TABLE, TRACE_ASSIGNMENT_TABLE, CHURN_TABLE, LOSS_TABLE)
    names = {table.name for table in core}
    for part in scenario_parts(scenario):
        names.update(table.name for table in part.cls.tables)
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
    for part in scenario_parts(scenario):
        ctx = BuildContext(
            key=part.key, scenario=scenario, streams=streams, warnings=warnings,
            topology=topology,
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
    link_config = scenario.links
    network = Network(
        sim,
        topology,
        nodes,
        LinkModel(
            delay=link_config.delay,
            bandwidth=link_config.bandwidth,
            loss=link_config.loss,
            mean_up=link_config.failure.mean_up if link_config.failure else None,
            mean_down=link_config.failure.mean_down if link_config.failure else None,
        ),
    )
    churn = ChurnReplay(sim, nodes, schedule)
    picks = churn_model.trace_labels
    if picks is not None:
        sim.log.table(TRACE_ASSIGNMENT_TABLE).extend([range(n), picks.tolist()])
    built = BuiltRun(
        scenario=scenario,
        sim=sim,
        topology=topology,
        nodes=nodes,
        network=network,
        churn=churn,
        warnings=warnings,
    )
    isolated = int((topology.degrees() == 0).sum())
    if isolated and scenario.gossip is not None:
        warnings.append(f"topology: {isolated} node(s) have no neighbour and cannot gossip")
    for part in scenario_parts(scenario):
        ctx = BuildContext(
            key=part.key, scenario=scenario, streams=sim.streams, warnings=warnings, sim=sim,
            network=network, built=built.components, topology=topology,
        )  # fmt: skip
        component = part.cls.build(part.config, ctx)
        built.components[part.key] = component
        sim.at_end(component.finish)
    for component in built.components.values():
        component.start()
    _sample_system(built, scenario.metrics.sample_every)
    return built


def _sample_system(built: BuiltRun, every: float) -> None:
    table = built.sim.log.table(SAMPLES_TABLE)
    gossip = built.get("gossip")

    def sample() -> None:
        network = built.network
        table.append(
            built.sim.now,
            built.nodes.online_count,
            gossip.active_count if gossip is not None else 0,
            network.sent,
            network.delivered,
            network.lost,
            gossip.exchanges if gossip is not None else 0,
            built.churn.transitions_applied,
        )

    built.sim.every(every, sample, first=0.0)
    built.sim.at_end(sample)
