"""Turn a validated :class:`Scenario` into a ready-to-run simulation: a loop over the
instances of its plan (:attr:`Scenario.plan <netsim.scenario.schema.Scenario.plan>`).

The network comes first (topology, churn), then every instance in the plan's build order —
which puts each after the instances it is wired to — and then, once all are built, each
component's ``start()`` in the same order. A component draws
from streams namespaced by its key in the scenario (``topology``, ``churn``, ``links.*``,
``gossip.*``, ``broadcast.*``, ``walk.*``, ``components.<name>.*``), so adding one never
changes another's draws.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from netsim.contracts import BuildContext, ChurnModel, Component, TopologyBuilder, Transport
from netsim.errors import ScenarioError
from netsim.log import I32, STR, EventLog, TableSchema
from netsim.network.churn import CHURN_TABLE, ChurnReplay, ChurnSchedule
from netsim.network.nodes import NodeStates
from netsim.network.samples import SAMPLES_TABLE as SAMPLES_TABLE
from netsim.network.topology import Topology
from netsim.protocols.exact import NOTHING_TO_RUN, attach_exact_core
from netsim.rng import RandomStreams
from netsim.scenario.estimate import check_run_size
from netsim.scenario.plan import TRANSPORT, Part, RunPlan
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


@dataclass
class BuiltRun:
    """Everything one run is made of: the network and the components by scenario key."""

    scenario: s.Scenario
    sim: Simulation
    topology: Topology
    nodes: NodeStates
    network: Transport
    churn: ChurnReplay
    components: dict[str, Component] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: What ran exact mode's events: ``compiled`` (the compiled core), ``simpy: <why>``, or
    #: ``rounds`` (gossip in rounds: no exact events to run).
    exact_engine: str = "simpy"

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
    for part in scenario.plan.parts:
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


def context(scenario: s.Scenario, part: Part, streams: RandomStreams, warnings: list[str],
            **built: Any) -> BuildContext:  # fmt: skip
    """The context ``part`` is built with: the run-wide values, its wiring, the configs of
    the instances (what it may read of those it is wired to) and what ``built`` adds."""
    return BuildContext(
        key=part.key, nodes=scenario.nodes, duration=scenario.duration, streams=streams,
        warnings=warnings, metrics=scenario.metrics, uses=part.uses,
        configs=scenario.plan.wired_configs(part), **built,
    )  # fmt: skip


def network_parts(
    scenario: s.Scenario, streams: RandomStreams, warnings: list[str]
) -> tuple[Topology, ChurnModel, ChurnSchedule]:
    """The topology, the churn component and its schedule (no simulation needed: ``netsim
    validate`` builds them too)."""
    plan = scenario.plan
    builder = plan.topology.cls.build(
        plan.topology.config, context(scenario, plan.topology, streams, warnings)
    )
    assert isinstance(builder, TopologyBuilder)
    topology = builder.build_topology(scenario.nodes)
    churn = plan.churn
    model = churn.cls.build(churn.config, context(scenario, churn, streams, warnings))
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
    return topology, model, schedule  # type: ignore[return-value]


def check_inputs(scenario: s.Scenario) -> list[str]:
    """Build what a run reads from files or derives from parameters (topology, churn
    schedule, data) without running it, so ``netsim validate`` finds every error ``run``
    would. Returns the warnings the run would print."""
    streams = RandomStreams(scenario.seed if scenario.seed is not None else 0)
    warnings: list[str] = []
    check_run_size(scenario, warnings)  # before building anything of that size
    check_omitted_tables(scenario)
    topology, _, _ = network_parts(scenario, streams, warnings)
    for part in scenario.plan.parts:
        ctx = context(scenario, part, streams, warnings, topology=topology)
        part.cls.check_inputs(part.config, ctx)
    return warnings


#: Which engine runs exact mode's events: the compiled core where every component has a
#: compiled form (``auto``), or SimPy for all of them (``simpy``: the reference).
ExactEngine = Literal["auto", "simpy"]


def build_run(scenario: s.Scenario, log: EventLog, *, engine: ExactEngine = "auto") -> BuiltRun:
    """Assemble the simulation for ``scenario`` (whose seed must be set); exact mode's events
    run on ``engine`` (:data:`ExactEngine`). Both engines give the same tables."""
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
    isolated = int((topology.degrees() == 0).sum())
    if isolated and scenario.plan.of_slot("gossip"):
        warnings.append(f"topology: {isolated} node(s) have no neighbour and cannot gossip")
    components: dict[str, Component] = {}
    for part in scenario.plan.parts:
        ctx = context(
            scenario, part, sim.streams, warnings,
            sim=sim.with_log(sim.log.prefixed(part.table_prefix)) if part.table_prefix else sim,
            network=components.get(part.uses.get(TRANSPORT, "")), built=components,
            topology=topology, node_states=nodes, churn=churn,
        )  # fmt: skip
        component = part.cls.build(part.config, ctx)
        components[part.key] = component
        sim.at_end(component.finish)
    for component in components.values():
        component.start()
    network = components[run_transport(scenario.plan)]
    assert isinstance(network, Transport)
    return BuiltRun(
        scenario=scenario, sim=sim, topology=topology, nodes=nodes, network=network,
        churn=churn, components=components, warnings=warnings,
        exact_engine=exact_engine(sim, components, engine),
    )  # fmt: skip


def run_transport(plan: RunPlan) -> str:
    """The key of the run's transport (:attr:`BuiltRun.network`): the first instance of the
    ``transport`` slot in the plan's build order, the one every ``transport`` role falls to
    when no ``uses`` names another (the ``links`` section)."""
    return plan.of_slot("transport")[0].key


def exact_engine(sim: Simulation, components: dict[str, Component], engine: ExactEngine) -> str:
    """Attach the compiled exact core when ``engine`` allows it and every component has a
    compiled form; what runs exact mode's events (:attr:`BuiltRun.exact_engine`)."""
    if any(getattr(component, "round_based", False) for component in components.values()):
        return "rounds"
    if engine == "simpy":
        return "simpy: asked for"
    blocker = attach_exact_core(sim, components)
    if blocker is None:
        return "compiled"
    if blocker != NOTHING_TO_RUN:
        tell_fallback(blocker)
    return f"simpy: {blocker}"


#: The fallbacks this process has told the terminal about (each once), and whether it tells
#: them at all (``netsim run -q`` prints only the run directory, or one error message).
_TOLD: set[str] = set()
_TELLING = {"fallbacks": True}


def tell_fallbacks(enabled: bool) -> bool:
    """Whether :func:`tell_fallback` prints (the manifest says why in any case); the setting
    it replaces, which a command run in a longer-lived process (``netsim.cli.main`` called
    from Python) restores when it ends."""
    previous = _TELLING["fallbacks"]
    _TELLING["fallbacks"] = enabled
    return previous


@contextmanager
def fallbacks_untold() -> Iterator[None]:
    """Within the block, :func:`tell_fallback` prints nothing (a sweep's run, whose caller
    tells each reason once for the whole sweep: :func:`fallback_reason`); restored after."""
    telling = tell_fallbacks(False)
    try:
        yield
    finally:
        tell_fallbacks(telling)


def fallback_reason(exact_engine: str) -> str | None:
    """Why a run's exact mode ran on SimPy although the compiled core was allowed, from its
    manifest's ``exact_engine`` (:func:`exact_engine`'s value), or None: compiled, rounds,
    SimPy asked for, or nothing for the core to run."""
    if not exact_engine.startswith("simpy: "):
        return None
    why = exact_engine.removeprefix("simpy: ")
    return None if why in ("asked for", NOTHING_TO_RUN) else why


def tell_fallback(why: str) -> None:
    """Say once on the terminal (standard error, one line) why exact mode runs on SimPy,
    not the compiled core: a run that is slower than it could be says why where it runs; the
    manifest's ``exact_engine`` keeps saying it."""
    if why in _TOLD or not _TELLING["fallbacks"]:
        return
    _TOLD.add(why)
    print(f"netsim: exact mode runs on SimPy, not the compiled core: {why}", file=sys.stderr)
