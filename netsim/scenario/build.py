"""Turn a validated :class:`Scenario` into a ready-to-run simulation.

Each component draws from its own named random stream (``topology``, ``churn``, ``links.*``,
``gossip.*``, ``broadcast.*``), so adding one never changes another's draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from netsim.errors import ScenarioError
from netsim.learning.datasets import (
    DataError,
    Dataset,
    load_dataset,
    preprocess,
    vector_norms,
)
from netsim.learning.dola import DolaLearner, dola_config
from netsim.learning.dola_run import DolaRounds
from netsim.learning.gossip_learning import GossipLearningRule
from netsim.learning.mi_ogd import MiOgdConfig, Stream, max_loss, synthetic_regression
from netsim.learning.mi_ogd_run import MiOgdRounds
from netsim.learning.mixing import MixingSchedule
from netsim.learning.models import LinearModel
from netsim.learning.online_data import OnlineData, load_online_data
from netsim.learning.sgd import NOISES, PrivateSGD, SGDAgent
from netsim.log import F64, I32, I64, STR, EventLog, TableSchema
from netsim.network import churn as churn_models
from netsim.network import topology as topologies
from netsim.network.churn import ChurnReplay, ChurnSchedule
from netsim.network.links import LinkModel, Network
from netsim.network.nodes import NodeStates
from netsim.network.topology import Topology
from netsim.network.traces import read_canonical_trace, read_stunner_segments
from netsim.privacy.accountant import PrivacyAccountant, policy_by_name
from netsim.protocols.broadcast import Broadcast
from netsim.protocols.gossip import CompositeRule, GossipRule, PushPullGossip
from netsim.protocols.rounds import RoundGossip
from netsim.protocols.walk import IdealWalk, RandomWalkService, VisitCounter, WalkAgent
from netsim.rng import RandomStreams
from netsim.scenario import schema as s
from netsim.sim import Simulation

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
)


TRACE_ASSIGNMENT_TABLE = TableSchema(
    name="trace_assignment",
    columns=(("node", I32), ("trace_node", STR)),
    description=(
        "For churn replayed from a trace: the trace node (a STUNner segment is "
        "'<user>@<start, Unix s>') each simulated node replays."
    ),
)


@dataclass
class BuiltRun:
    """Everything one run is made of."""

    scenario: s.Scenario
    sim: Simulation
    topology: Topology
    nodes: NodeStates
    network: Network
    churn: ChurnReplay
    gossip: PushPullGossip | RoundGossip | None = None
    broadcast: Broadcast | None = None
    walk: RandomWalkService | IdealWalk | None = None
    learner: SGDAgent | None = None
    gossip_learning: PushPullGossip | None = None
    dola: DolaRounds | None = None
    mi_ogd: MiOgdRounds | None = None
    warnings: list[str] = field(default_factory=list)
    trace_assignment: np.ndarray | None = None


def build_topology(config: s.TopologyConfig, n: int, streams: RandomStreams) -> Topology:
    """Build the topology that ``config`` describes, seeded from the ``topology`` stream."""
    seed = streams.integer_seed("topology")
    match config:
        case s.KOutTopology(k=k, undirected=undirected):
            return topologies.k_out(n, k, streams.get("topology"), undirected=undirected)
        case s.RandomRegularTopology(degree=degree):
            return topologies.random_regular(n, degree, seed)
        case s.ErdosRenyiTopology(p=p):
            return topologies.erdos_renyi(n, p, seed)
        case s.WattsStrogatzTopology(k=k, p=p):
            return topologies.watts_strogatz(n, k, p, seed)
        case s.BarabasiAlbertTopology(m=m):
            return topologies.barabasi_albert(n, m, seed)
        case s.RandomGeometricTopology(radius=radius, dim=dim):
            return topologies.random_geometric(n, radius, seed, dim=dim)
        case s.RingTopology(k=k):
            return topologies.ring(n, k)
        case s.CompleteTopology():
            return topologies.complete(n)
        case s.EdgeListTopology(path=path, directed=directed):
            return topologies.edge_list(path, n, directed=directed)
    raise ScenarioError(f"unsupported topology {config!r}")  # pragma: no cover


def build_churn(
    config: s.ChurnConfig, n: int, horizon: float, streams: RandomStreams, warnings: list[str]
) -> tuple[ChurnSchedule, np.ndarray | None]:
    """The churn schedule (and, for traces, the trace node each node replays)."""
    rng = streams.get("churn")
    match config:
        case s.AlwaysOnChurn():
            return churn_models.always_on(n), None
        case s.SyntheticChurn(online=online, offline=offline, diurnal=diurnal):
            return (
                churn_models.synthetic(
                    n,
                    horizon,
                    online=online,
                    offline=offline,
                    rng=rng,
                    diurnal_amplitude=diurnal.amplitude if diurnal else 0.0,
                    diurnal_peak=diurnal.peak if diurnal else 0.0,
                ),
                None,
            )
        case s.TraceChurn(path=path, assign=assign):
            trace = read_canonical_trace(path)
        case s.StunnerChurn(path=path, fallback=fallback) if (
            not path.is_file() and fallback is not None
        ):
            warnings.append(
                f"churn: {path} is absent; replaying the fallback trace {fallback.path}"
            )
            return build_churn(fallback, n, horizon, streams, warnings)
        case s.StunnerChurn(
            path=path, segment_length=length, segment_step=step, local_time=local, assign=assign
        ):
            trace = read_stunner_segments(path, length=length, step=step, local_time=local)
        case _:  # pragma: no cover
            raise ScenarioError(f"unsupported churn {config!r}")
    if trace.span is not None and horizon > trace.span:
        warnings.append(
            f"churn: the run lasts {horizon:g} s but trace segments cover {trace.span:g} s; "
            "nodes stay offline after their segment ends"
        )
    if n > trace.node_count:
        how = "re-sampled at random" if assign == "random" else "reused in order"
        warnings.append(
            f"churn: {n} nodes but {trace.node_count} trace nodes in {trace.source}; "
            f"trace nodes are {how}"
        )
    schedule, picks = churn_models.from_trace(trace, n, horizon, rng, assign)
    return schedule, np.asarray(trace.labels, dtype=object)[picks]


def check_inputs(scenario: s.Scenario) -> list[str]:
    """Build what a run reads from files or derives from parameters (topology, churn
    schedule) without running it, so ``netsim validate`` finds every error ``run`` would.
    Returns the warnings the run would print."""
    streams = RandomStreams(scenario.seed if scenario.seed is not None else 0)
    warnings: list[str] = []
    topology = build_topology(scenario.topology, scenario.nodes, streams)
    build_churn(scenario.churn, scenario.nodes, scenario.duration, streams, warnings)
    warnings.extend(_walk_checks(scenario, topology))
    if scenario.learning is not None:
        learning_data(scenario.learning, scenario.nodes)
    if scenario.dola is not None:
        _dola_parts(scenario, topology, streams, np.random.default_rng(0))
    if scenario.mi_ogd is not None:
        mi_ogd_parts(scenario.mi_ogd, scenario.duration)
    return warnings


def _walk_checks(scenario: s.Scenario, topology: Topology) -> list[str]:
    """Reject a walk service that cannot work; warn about settings that make it struggle."""
    walk = scenario.walk
    if not isinstance(walk, s.WalkServiceConfig):
        return []
    lonely = np.flatnonzero(topology.degrees() == 0)
    if lonely.size:
        raise ScenarioError(
            f"walk: {lonely.size} node(s) (e.g. node {lonely[0]}) have no neighbour in the "
            "topology; a walk reaching them could never be forwarded"
        )
    assert scenario.gossip is not None
    spread = walk.transfer_time + scenario.gossip.period * math.log2(max(scenario.nodes, 2))
    if walk.timeout < spread:
        return [
            f"walk: timeout δ = {walk.timeout:g} s is less than transfer_time + gossip.period "
            f"× log2(nodes) = {spread:g} s; updates may time out before the gossip spreads "
            "them, so expect many restarts (the paper's smallest δ is δ_rw + 10Δ)"
        ]
    return []


def build_run(scenario: s.Scenario, log: EventLog) -> BuiltRun:
    """Assemble the simulation for ``scenario`` (whose seed must be set)."""
    if scenario.seed is None:
        raise ScenarioError("build_run needs a scenario with a seed")
    sim = Simulation(seed=scenario.seed, log=log)
    warnings: list[str] = []
    n = scenario.nodes
    topology = build_topology(scenario.topology, n, sim.streams)
    schedule, picks = build_churn(scenario.churn, n, scenario.duration, sim.streams, warnings)
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
        trace_assignment=picks,
    )
    isolated = int((topology.degrees() == 0).sum())
    if isolated and scenario.gossip is not None:
        warnings.append(f"topology: {isolated} node(s) have no neighbour and cannot gossip")
    warnings.extend(_walk_checks(scenario, topology))
    sample_every = scenario.metrics.sample_every
    if scenario.learning is not None:
        built.learner = build_learner(scenario.learning, sim, n)
    rules: list[GossipRule] = []
    if scenario.broadcast is not None:
        config = scenario.broadcast
        built.broadcast = Broadcast(
            sim,
            network,
            interval=config.interval,
            start=config.start,
            thresholds=config.thresholds,
        )
        rules.append(built.broadcast)
    walk = scenario.walk
    if isinstance(walk, s.WalkServiceConfig):
        assert scenario.gossip is not None
        built.walk = RandomWalkService(
            sim,
            network,
            _walk_agent(walk.agent, built),
            transfer_time=walk.transfer_time,
            timeout=walk.timeout,
            kill_probability=walk.kill_probability,
            start=walk.start,
            retry_interval=walk.retry_interval or scenario.gossip.period,
            sample_every=walk.sample_every or sample_every,
        )
        rules.append(built.walk)
    elif isinstance(walk, s.IdealWalkConfig):
        built.walk = IdealWalk(
            sim,
            n,
            _walk_agent(walk.agent, built),
            step_time=walk.step_time,
            replacement=walk.sampling == "with_replacement",
            sample_every=walk.sample_every or sample_every,
        )
    if scenario.gossip is not None:
        gossip: PushPullGossip | RoundGossip
        if scenario.gossip.mode == "rounds":
            gossip = RoundGossip(
                sim,
                network,
                rules,
                period=scenario.gossip.period,
                message_size=scenario.gossip.message_size,
            )
        else:
            rule: GossipRule = (
                _Silent() if not rules else rules[0] if len(rules) == 1 else CompositeRule(rules)
            )
            gossip = PushPullGossip(
                sim,
                network,
                rule,
                period=scenario.gossip.period,
                message_size=scenario.gossip.message_size,
            )
        built.gossip = gossip
        if built.broadcast is not None:
            # updates start at nodes that take part in gossip, not at a just-rejoined node
            built.broadcast.origin_candidates = lambda: np.flatnonzero(gossip.active)
        if isinstance(built.walk, RandomWalkService):
            built.walk.attach(gossip)
    if scenario.gossip_learning is not None:
        assert built.learner is not None  # the schema asks for a learning section
        models = GossipLearningRule(built.learner, n)
        built.gossip_learning = PushPullGossip(
            sim,
            network,
            models,
            period=scenario.gossip_learning.period,
            message_size=models.model_bytes(),
            pull=False,
            name="gossip_learning",
        )
        sim.at_end(built.learner.finish)
    if scenario.dola is not None and n > 1 and not topology.is_connected():
        warnings.append(
            "dola: the topology is not connected, so the union of the round graphs never is "
            "(Li et al., Assumption 2(4)); the components learn separately"
        )
    if scenario.dola is not None:
        learner, schedule = _dola_parts(
            scenario, topology, sim.streams, sim.streams.get("dola.noise")
        )
        section = scenario.dola
        built.dola = DolaRounds(
            sim,
            network,
            learner,
            schedule,
            period=section.period,
            evaluate_every=section.evaluate_every,
            regret_checkpoints=section.regret_checkpoints,
            window=section.mixing.window,
        )
    if scenario.mi_ogd is not None:
        section = scenario.mi_ogd
        config, stream = mi_ogd_parts(section, scenario.duration)
        built.mi_ogd = MiOgdRounds(
            sim,
            network,
            config,
            stream,
            learner=section.learner,
            period=section.period,
            regret_checkpoints=section.regret_checkpoints,
            shard_seed=sim.streams.integer_seed("mi_ogd.shards"),
        )
    _sample_system(built, scenario.metrics.sample_every)
    return built


REGRESSION_OPTIONS = {"examples": 10_000, "dimension": 1, "noise": 0.1, "scale": 0.5}


def mi_ogd_parts(section: s.MiOgdSection, duration: float) -> tuple[MiOgdConfig, Stream]:
    """The configuration and the users' examples of an ``mi_ogd`` section."""
    data = section.data
    if data.name == "synthetic_regression":
        unknown = sorted(set(data.options) - set(REGRESSION_OPTIONS))
        if unknown:
            raise ScenarioError(
                f"mi_ogd.data.options: unknown option(s) {', '.join(unknown)}; "
                f"synthetic_regression takes {', '.join(REGRESSION_OPTIONS)}"
            )
        options = {**REGRESSION_OPTIONS, **data.options}
        if options["examples"] < 1 or options["dimension"] < 1 or options["noise"] < 0:
            raise ScenarioError(
                "mi_ogd.data.options: examples and dimension must be >= 1 and noise >= 0"
            )
        stream = synthetic_regression(
            examples=int(options["examples"]),
            dimension=int(options["dimension"]),
            noise=float(options["noise"]),
            scale=float(options["scale"]),
            seed=data.split_seed,
        )
    else:
        loaded = load_online_data(
            data.name, path=data.path, label=data.label, split_seed=data.split_seed,
            options=data.options,
        )  # fmt: skip
        if loaded.sparse:
            raise ScenarioError(
                f"mi_ogd.data: {data.name} is sparse; MI-private OGD here takes dense data"
            )
        stream = Stream(loaded.x_train, loaded.y_train, loaded.source)
    rounds = section.rounds_in(duration)
    lipschitz = 1.0  # every example has ‖x‖ ≤ 1 (checked below), so every loss is 1-Lipschitz
    if stream.lipschitz > lipschitz + 1e-9:
        raise ScenarioError(
            f"mi_ogd.data: the longest example has norm {stream.lipschitz:.4g} > 1; the "
            "leakage and regret bounds assume L = 1"
        )
    base = MiOgdConfig(
        dimension=stream.dimension, rounds=rounds, setting=section.setting, loss=section.loss,
        sigma=section.sigma, radius=section.radius, lipschitz=lipschitz, eta=section.eta,
        smoothing=section.smoothing,
    )  # fmt: skip
    reach = base.radius + (base.delta if base.setting == "bandit" else 0.0)
    y_max = float(np.abs(stream.y).max())
    config = replace(base, max_loss=max_loss(section.loss, reach, lipschitz, y_max))
    return config, stream


def dola_data(section: s.DolaSection) -> OnlineData:
    """The data stream of a ``dola`` section (SPEC §6 pre-processing for loaded sets)."""
    data = section.data
    return load_online_data(
        data.name,
        path=data.path,
        label=data.label,
        split_seed=data.split_seed,
        test_fraction=data.test_fraction,
        options=data.options,
    )


def _dola_parts(
    scenario: s.Scenario, topology: Topology, streams: RandomStreams, rng: np.random.Generator
) -> tuple[DolaLearner, MixingSchedule]:
    """The learner (data, shards, accountant) and the mixing schedule of ``scenario.dola``;
    raises the configuration's errors (batch > local data, isolated nodes, ...)."""
    section = scenario.dola
    assert section is not None
    config = dola_config(section, rounds=section.rounds_in(scenario.duration))
    learner = DolaLearner(
        config,
        dola_data(section),
        scenario.nodes,
        shard_seed=streams.integer_seed("dola.shards"),
        rng=rng,
        regret_node=section.regret_node,
    )
    mixing = section.mixing
    schedule = MixingSchedule(
        topology,
        fraction=mixing.fraction,
        count=mixing.count,
        time_invariant=mixing.time_invariant,
    )
    return learner, schedule


def learning_data(config: s.LearningConfig, n: int) -> Dataset:
    """The data set of ``config``, pre-processed as Hegedűs et al. (2016) §6.2, checked to hold
    a record for each of the ``n`` nodes and, unnormalised, vectors of length at most 1."""
    data_config = config.dataset
    mechanism_norm = NOISES[config.noise][1]
    data = preprocess(
        load_dataset(
            data_config.name,
            path=data_config.path,
            label=data_config.label,
            split_seed=data_config.split_seed,
            test_fraction=data_config.test_fraction,
        ),
        normalisation=config.normalisation,
        norm=mechanism_norm,
    )
    if data.n_train < n:
        raise DataError(
            f"learning.dataset: {data.name} has {data.n_train:,} training records but the "
            f"scenario has {n:,} nodes; every node holds one record, so nodes must be at most "
            f"{data.n_train:,}"
        )
    if config.normalisation == "none":
        radius = float(vector_norms(data.x_train, mechanism_norm).max())
        if radius > 1.0 + 1e-9:
            raise DataError(
                f"learning.normalisation none: the longest training vector has {mechanism_norm} "
                f"length {radius:.3g} > 1, so the gradient sensitivity would not hold; use "
                "local or global"
            )
    return data


def build_learner(config: s.LearningConfig, sim: Simulation, n: int) -> SGDAgent:
    """One record per node (a seeded choice of training rows), the accountant and the private
    SGD agent of ``config`` (Hegedűs et al. 2016 §3, §6)."""
    data = learning_data(config, n)
    rows = sim.streams.get("learning.rows").permutation(data.n_train)[:n]
    model = LinearModel(config.model, data.classes, data.features)
    policy = policy_by_name("unlimited" if config.algorithm == "sgd" else config.algorithm)
    accountant = PrivacyAccountant(n, epsilon=config.epsilon, policy=policy)
    sgd = PrivateSGD(
        model,
        data.x_train[rows],
        data.y_train[rows],
        accountant,
        noise=config.noise,
        regularisation=config.regularisation,
        rng=sim.streams.get("learning.noise"),
    )
    return SGDAgent(
        sim,
        sgd,
        rows=rows,
        x_test=data.x_test,
        y_test=data.y_test,
        evaluate_every=config.evaluate_every,
    )


def _walk_agent(config: s.WalkAgentConfig, built: BuiltRun) -> WalkAgent:
    match config:
        case s.VisitCounterAgent():
            return VisitCounter(built.sim, built.topology.n)
        case s.SGDWalkAgent():
            assert built.learner is not None  # the schema asks for a learning section
            return built.learner
    raise ScenarioError(f"unsupported walk agent {config!r}")  # pragma: no cover


class _Silent:
    """Gossip without an application: exchanges carry nothing (useful to measure traffic)."""

    def outgoing(self, node: int) -> None:
        return None

    def incoming(self, node: int, value: object, sender: int, transfer: object) -> None:
        return None


def _sample_system(built: BuiltRun, every: float) -> None:
    table = built.sim.log.table(SAMPLES_TABLE)

    def sample() -> None:
        gossip = built.gossip
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
