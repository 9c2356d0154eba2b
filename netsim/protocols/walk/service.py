"""The single random walk service's core (Hegedűs, Berta, Jelasity 2016, Alg. 2): its walks'
tokens, their forwarding and retries, the reaction to churn, the local copies ``rw``, and the
bookkeeping; what the gossip mode decides is its cycle strategy's
(:mod:`netsim.protocols.walk.cycle`). The rules and the choices where the paper leaves room are
in the docstring of :mod:`netsim.protocols.walk`.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from netsim.contracts import (
    BuildContext,
    Component,
    ExactRun,
    ExactSupport,
    Transport,
    Walk,
    WalkAgent,
)
from netsim.lazy import lazy_module
from netsim.network.links import Transfer
from netsim.protocols.gossip import GossipEngine, PushPullEngine
from netsim.protocols.walk.compiled import attach_walk_core, exact_support_of
from netsim.protocols.walk.config import (
    PAPER_RULES,
    WalkServiceConfig,
    WalkVariant,
    check_cycle_engine,
    check_service_inputs,
    service_config_of,
)
from netsim.protocols.walk.cycle import WalkCycle, new_prop_records
from netsim.protocols.walk.cycle_authors import AuthorsCycle
from netsim.protocols.walk.cycle_exact import ExactCycle
from netsim.protocols.walk.ledger import WalkLedger
from netsim.protocols.walk.ledger import summary_lines as walk_summary_lines
from netsim.protocols.walk.resimulate import path_resimulator
from netsim.protocols.walk.steps import attach_steps, steps_compiled
from netsim.protocols.walk.tables import (
    ENDS_TABLE,
    RESTARTS_TABLE,
    SAMPLES_TABLE,
    STEPS_TABLE,
    SUMMARY_TABLE,
    WALK_FIGURE,
)
from netsim.protocols.walk.tokens import WALK, WalkToken
from netsim.rng import BlockDraws
from netsim.sim import Simulation

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

#: The cycle strategy of each ``walk.cycle``. netsim's starts exact and hands over to
#: :class:`~netsim.protocols.walk.cycle_rounds.RoundsCycle` when attached to round-based
#: gossip (the engine's mode is known only then); a new variant is a new entry.
CYCLES: dict[str, type[WalkCycle]] = {"netsim": ExactCycle, "authors": AuthorsCycle}


class RandomWalkService(Walk):
    """Alg. 2: push-pull broadcast of walk progress, restarts on timeouts, hot-potato walks.

    Plug it into a :class:`PushPullGossip` as its rule (it implements ``outgoing`` /
    ``incoming``), then call :meth:`attach` with that gossip (built from a scenario, the
    service registers with the gossip engine and attaches when the run starts). ``cycle`` is
    its cycle strategy; the service implements
    :class:`~netsim.protocols.walk.cycle.WalkCore` for it.
    """

    figures = (WALK_FIGURE,)

    Config = WalkServiceConfig
    tables = (STEPS_TABLE, RESTARTS_TABLE, ENDS_TABLE, SAMPLES_TABLE, SUMMARY_TABLE)
    requires = {  # noqa: RUF012
        "gossip": "walk progress is broadcast by push-pull gossip with period Δ = gossip.period"
    }
    optional = {  # noqa: RUF012
        "privacy": "the threat model: under a network budget the walk's agent admits or "
        "refuses each restart from a local copy"
    }
    #: In rounds it does its own exchanges (round_exchange, round_tick).
    round_form = "fused"

    def __init__(
        self,
        sim: Simulation,
        network: Transport,
        agent: WalkAgent,
        *,
        transfer_time: float,
        timeout: float,
        kill_probability: float = 0.0,
        start: float = 0.0,
        retry_interval: float = 0.1,
        sample_every: float = 60.0,
        engine: GossipEngine | None = None,
        name: str = "walk",
        variant: WalkVariant = PAPER_RULES,
        config: WalkServiceConfig | None = None,
        ctx: BuildContext | None = None,
    ) -> None:
        # a service made in code (not from a scenario) gets the config of its arguments
        arguments = {"transfer_time": transfer_time, "timeout": timeout, "start": start,
                     "kill_probability": kill_probability, "retry_interval": retry_interval,
                     "sample_every": sample_every}  # fmt: skip
        Component.__init__(self, config or service_config_of(arguments, variant), ctx)
        self._engine = engine  # attached when the run starts
        self.sim = sim
        self.network = network
        self.nodes = network.nodes
        self.agent = agent
        #: The agent's hook for every arrival, when it has one (None keeps the path lean).
        self._received = (
            agent.received
            if getattr(type(agent), "received", WalkAgent.received) is not WalkAgent.received
            else None
        )
        self.transfer_time = transfer_time
        self.timeout = timeout
        self.kill_probability = kill_probability
        self.retry_interval = retry_interval
        self.n = network.topology.n
        self.variant = variant
        self.gossip: GossipEngine | None = None
        self.round_based = False  # set by attach()
        self.cycle = self._make_cycle(variant, name)
        self._draw_local_copies(name)
        self._open_streams(name)
        self._start_bookkeeping()
        self.nodes.on_leave(self._on_leave)
        sim.call_later(start, self._bootstrap)
        sim.every(sample_every, self.ledger.sample, first=0.0)

    def _make_cycle(self, variant: WalkVariant, name: str) -> WalkCycle:
        """The cycle strategy of ``variant`` on every node's bootstrap ``rwprop``; exact mode's
        gossip calls its ``outgoing`` and ``incoming`` directly (instance attributes, bound
        once: the engine binds them when it starts)."""
        # drawn only when there is an error, so exact-age runs keep their streams unchanged
        streams = self.sim.streams
        age_error_rng = streams.get(f"{name}.age_error") if variant.age_error else None
        cycle = CYCLES[variant.cycle](self, variant, age_error_rng, new_prop_records(self.n))
        self.outgoing = cycle.outgoing  # type: ignore[method-assign]
        self.incoming = cycle.incoming  # type: ignore[method-assign]
        return cycle

    def _draw_local_copies(self, name: str) -> None:
        """``rw``: uniform random negative step counts in [-N, -1] (§4.4), and the agent's
        initial state at every node."""
        init = self.sim.streams.get(f"{name}.init")
        self.rw_steps = init.integers(-self.n, 0, size=self.n).astype(np.int64)
        self.rw_state: list[Any] = [self.agent.initial_state()] * self.n

    def _open_streams(self, name: str) -> None:
        """The walk's random streams: peers, kills, the starter."""
        self.peer_draw = BlockDraws(self.sim.streams.get(f"{name}.peers").random)
        self._kill_draw = BlockDraws(self.sim.streams.get(f"{name}.kill").random)
        self._start_rng = self.sim.streams.get(f"{name}.start")

    def _start_bookkeeping(self) -> None:
        """Walks held by a node, by node: only the few holders have an entry (a list per node
        would be 128 MB of empty lists at 10⁶ nodes); ids; the ledger and its tables."""
        self.forwarding: dict[int, list[WalkToken]] = {}  # held, not in transfer
        self.suspended: dict[int, list[WalkToken]] = {}
        self.next_update = np.ones(1, dtype=np.int64)  # the next update id (compiled steps')
        self._next_walk_id = 0
        self.new_token: Any = WalkToken  # the compiled steps' when they run in the core
        self.ledger = WalkLedger(self.sim)
        self.propagating = self.ledger.propagating
        self.counts = self.ledger.counts
        self.steps_table = self.ledger.steps_table
        self.restarts_table = self.ledger.restarts_table
        self.ends_table = self.ledger.ends_table
        self.samples_table = self.ledger.samples_table
        self.summary_table = self.ledger.summary_table

    @classmethod
    def check_inputs(cls, config: WalkServiceConfig, ctx: BuildContext) -> None:
        """See :func:`~netsim.protocols.walk.config.check_service_inputs`."""
        check_service_inputs(config, ctx)

    @classmethod
    def build(cls, config: WalkServiceConfig, ctx: BuildContext) -> RandomWalkService:
        assert ctx.sim is not None and ctx.network is not None
        cls.check_inputs(config, ctx)
        gossip = ctx.require("gossip")
        check_cycle_engine(config, gossip, isinstance(gossip, PushPullEngine))
        service = cls(
            ctx.sim,
            ctx.network,
            ctx.require("walk.agent"),
            transfer_time=config.transfer_time,
            timeout=config.timeout,
            kill_probability=config.kill_probability,
            start=config.start,
            retry_interval=config.retry_interval or gossip.period,
            sample_every=config.sample_every or ctx.metrics.sample_every,
            engine=gossip,
            name=ctx.key,
            variant=config.variant(gossip.period),
            config=config,
            ctx=ctx,
        )
        gossip.register(service)
        topology = ctx.network.topology
        service.agent.resimulated_by(path_resimulator(topology.indptr, topology.indices))
        return service

    def start(self) -> None:
        """Use the gossip engine the service registered with (see :meth:`attach`)."""
        if self._engine is not None:
            self.attach(self._engine)

    # --- wiring ----------------------------------------------------------------------------

    def attach(self, gossip: GossipEngine) -> None:
        """Use ``gossip`` (whose rule is this service) for activity and rejoin signals; the
        cycle strategy becomes the one of the engine's mode (with
        :class:`~netsim.protocols.rounds.RoundGossip` timeouts are evaluated once per round
        for all nodes instead of by per-node timers)."""
        self.gossip = gossip
        self.round_based = gossip.round_based
        self.cycle = self.cycle.attach(gossip)
        self.outgoing = self.cycle.outgoing  # type: ignore[method-assign]
        self.incoming = self.cycle.incoming  # type: ignore[method-assign]
        gossip.on_activate(self._on_activate)
        for node in np.flatnonzero(gossip.active).tolist():
            self.cycle.schedule_timeout(node)

    def active(self, node: int) -> bool:
        """Does ``node`` take part in gossip (online and having heard fresh gossip)?"""
        return (
            bool(self.gossip.active[node])
            if self.gossip is not None
            else bool(self.nodes.online[node])
        )

    # --- rwprop, as the cycle strategy holds it ------------------------------------------------

    @property
    def prop_steps(self) -> Any:
        """Every node's ``rwprop.steps``."""
        return self.cycle.prop_steps

    @property
    def prop_id(self) -> Any:
        """Every node's ``rwprop`` update id."""
        return self.cycle.prop_id

    @property
    def prop_origin(self) -> Any:
        """Every node's ``rwprop`` origin (virtual creation time: age = now − origin)."""
        return self.cycle.prop_origin

    @property
    def prop_special(self) -> Any:
        """Every node's flag: does it still hold the bootstrap update?"""
        return self.cycle.prop_special

    def age(self, node: int) -> float:
        """``rwprop.age()`` at ``node`` now (time on nodes and links since its creation)."""
        return self.cycle.age(node)

    def timed_out(self, node: int) -> bool:
        """Has the local update reached age δ (the bootstrap update never does)?"""
        return self.cycle.timed_out(node)

    def fresh_update_id(self) -> int:
        """A new update id (ids are never reused)."""
        update = int(self.next_update[0])
        self.next_update[0] = update + 1
        return update

    # --- gossip: exact mode binds outgoing/incoming of the strategy (see _make_cycle) -------

    def outgoing(self, node: int) -> Any:
        """Exact mode's gossip value of ``node`` (the cycle strategy's)."""
        return self.cycle.outgoing(node)

    def incoming(self, node: int, value: Any, sender: int, transfer: Transfer) -> None:
        """``onReceiveRWProps`` (the cycle strategy's)."""
        self.cycle.incoming(node, value, sender, transfer)

    def round_exchange(
        self, initiators: np.ndarray, peers: np.ndarray, pull_lost: np.ndarray
    ) -> None:
        """One round's pushes and pulls (the cycle strategy's)."""
        self.cycle.round_exchange(initiators, peers, pull_lost)

    def round_tick(self, active: np.ndarray) -> None:
        """After a round's exchanges: timeouts (the cycle strategy's)."""
        self.cycle.round_tick(active)

    # --- timeouts and walks ----------------------------------------------------------------

    def exact_support(self, run: ExactRun) -> ExactSupport:  # the compiled exact core
        """See :func:`~netsim.protocols.walk.compiled.exact_support_of`."""
        return exact_support_of(self.variant)

    def attach_core(self, core: Any) -> None:
        """See :func:`~netsim.protocols.walk.compiled.attach_walk_core` and, with the trivial
        agent, :func:`~netsim.protocols.walk.steps.attach_steps`."""
        self.cycle = attach_walk_core(self, core)
        if steps_compiled(self):
            attach_steps(self, core, self.cycle, self.peer_draw, self._kill_draw)

    def core_timeout(self, node: int, circle: int) -> None:
        """A timeout the core found due: ``onUpdateTimeout``, then the next circle's timer."""
        self.on_update_timeout(node, circle)
        self.cycle.schedule_timeout(node, circle + 1)

    def on_update_timeout(self, node: int, i: int) -> None:
        """``onUpdateTimeout(i)``: restart if rwprop.steps − rw.steps ≤ i (lines 19–22)."""
        cycle = self.cycle
        if cycle.prop_steps[node] - self.rw_steps[node] > i:
            return
        if any(
            token.holder == node and token.steps == self.rw_steps[node]
            for token in self.propagating.values()
        ):
            return  # already forwarding its local copy (choice 4)
        steps = max(int(self.rw_steps[node]), 0)
        self.launch(
            node, steps, "timeout", i, int(cycle.prop_id[node]), int(cycle.prop_steps[node])
        )

    def launch(
        self, node: int, steps: int, reason: str, i: int, update: int, update_steps: int
    ) -> None:
        """Start a walk at ``node`` with ``steps`` (reason ``bootstrap`` or ``timeout`` of
        circle ``i`` of ``update``), log it and forward it — unless the agent refuses a
        restart from the node's local copy (:meth:`~netsim.contracts.WalkAgent.continues`:
        a privacy ceiling), which is then not made."""
        if reason == "timeout":
            copy = self.rw_state[node]
            if not self.agent.continues(node, copy, self.carried(copy)):
                return
        walk = self._next_walk_id
        self._next_walk_id += 1
        self.rw_steps[node] = max(int(self.rw_steps[node]), steps)
        token = self.new_token(
            walk, steps, self.rw_state[node], update if reason == "timeout" else -1, node
        )
        self.cycle.launched(token, node)
        self.counts["restarts"] += reason == "timeout"
        self.restarts_table.append(
            self.sim.env.now, node, walk, reason, i, update, update_steps, steps
        )
        self.ledger.set_alive(token, True)
        self.forward(token)

    def carried(self, state: Any) -> bool:
        """Whether a walk, propagating or parked, carries ``state``."""
        tokens = chain(self.propagating.values(), *self.suspended.values())
        return any(token.state is state for token in tokens)

    def _bootstrap(self) -> None:
        """The starter broadcasts an update with step count 0 (unless the variant has no
        bootstrap update) and launches the first walk."""
        candidates = (
            np.flatnonzero(self.gossip.active)
            if self.gossip is not None
            else np.flatnonzero(self.nodes.online)
        )
        if candidates.size == 0:
            self.sim.call_later(self.retry_interval, self._bootstrap)
            return
        starter = int(candidates[self._start_rng.integers(candidates.size)])
        if self.variant.bootstrap_update:
            self.cycle.new_update(starter, 0)
        self.rw_steps[starter] = max(int(self.rw_steps[starter]), 0)
        self.launch(starter, 0, "bootstrap", 0, int(self.cycle.prop_id[starter]), 0)

    def forward(self, token: WalkToken) -> None:
        """``forwardRandomWalk``: as the cycle strategy forwards, or suspended if the holder
        is offline."""
        if not self.nodes.online[token.holder]:
            self._suspend(token)
            return
        self.cycle.forward(token)

    def send(self, token: WalkToken) -> None:
        """Send to a random online neighbour; with none, :meth:`wait_for_peer` (compiled twin:
        :func:`netsim.protocols.walk.steps.forward`)."""
        node = token.holder
        peer = self.network.random_online_neighbour(node, self.peer_draw)
        if peer < 0:
            self.wait_for_peer(token)
            return
        token.status = "transfer"
        self.network.send(
            node,
            peer,
            kind=WALK,
            payload=token,
            duration=self.transfer_time,
            on_deliver=self.on_receive_random_walk,
            on_lost=self.on_transfer_lost,
        )

    def wait_for_peer(self, token: WalkToken) -> None:
        """No online neighbour: the walk waits at its holder and tries after the retry
        interval."""
        token.status = "forwarding"
        token.retry_generation += 1
        self.forwarding.setdefault(token.holder, []).append(token)
        self.sim.call_later(self.retry_interval, self._retry, token, token.retry_generation)

    def _retry(self, token: WalkToken, generation: int) -> None:
        node = token.holder
        if token.status != "forwarding" or generation != token.retry_generation:
            return
        held = self.forwarding[node]
        held.remove(token)
        if not held:
            del self.forwarding[node]
        if not self.nodes.online[node]:
            self._suspend(token)
        elif self._still_needed(node, token):
            self.forward(token)
        else:
            self.end(token, node, "superseded")

    def _still_needed(self, node: int, token: WalkToken) -> bool:
        """Forwarding stops once a fresher live update reports a larger step count."""
        return not (self.cycle.prop_steps[node] > token.steps and not self.timed_out(node))

    def on_transfer_lost(self, transfer: Transfer, reason: str) -> None:
        """A walk's transfer failed (choice 7; a holder that left and came back: choice 5)."""
        token: WalkToken = transfer.payload
        node = transfer.src
        left = self.nodes.epoch[node] != transfer.src_epoch
        if not self.nodes.online[node] or (left and not self.active(node)):
            self._suspend(token)  # decided when the holder hears fresh gossip again
        elif left:
            self._resume_or_abandon(token)  # back and active already: decide now
        elif self._still_needed(node, token):
            self.forward(token)
        else:
            self.end(token, node, "superseded")

    def on_receive_random_walk(self, transfer: Transfer) -> None:
        """``onReceiveRandomWalk`` (lines 25–31), with kills and the forced timeout of §4.4;
        what the node keeps and forwards is the cycle strategy's
        (:meth:`~netsim.protocols.walk.cycle.WalkCycle.receive`; compiled twin of both:
        :func:`netsim.protocols.walk.steps.arrive`)."""
        token: WalkToken = transfer.payload
        node = transfer.dst
        if self.kill_probability > 0 and self._kill_draw() < self.kill_probability:
            self.end(token, node, "killed")
            return
        if self._received is not None:
            self._received(node, token.state)
        token.holder = node
        token.steps += 1
        forced = token.restart_of >= 0 and token.restart_of == self.cycle.prop_id[node]
        self.cycle.receive(token, node, forced)

    # --- churn -----------------------------------------------------------------------------

    def _suspend(self, token: WalkToken) -> None:
        if token.status == "suspended":
            return
        self.ledger.set_alive(token, False)
        token.status = "suspended"
        self.suspended.setdefault(token.holder, []).append(token)
        self.ledger.suspended_count += 1

    def _on_leave(self, node: int) -> None:
        self.cycle.on_leave(node)
        for token in self.forwarding.pop(node, ()):
            self._suspend(token)

    def _on_activate(self, node: int) -> None:
        """First fresh gossip after a rejoin: resume walks that are still the leader."""
        waiting = self.suspended.pop(node, ())
        for token in waiting:
            self.ledger.suspended_count -= 1
            self._resume_or_abandon(token)
        self.cycle.schedule_timeout(node)

    def _resume_or_abandon(self, token: WalkToken) -> None:
        node = token.holder
        if token.steps >= self.cycle.prop_steps[node]:
            if token.status == "suspended":
                token.status = "forwarding"
            self.ledger.set_alive(token, True)
            self.forward(token)
        else:
            self.end(token, node, "abandoned")

    # --- bookkeeping -----------------------------------------------------------------------

    def end(self, token: WalkToken, node: int, reason: str) -> None:
        """``token`` stops for good at ``node``."""
        self.ledger.end(token, node, reason)

    def mean_propagating(self) -> float:
        """Time average of the number of propagating walks from 0 until now (exact)."""
        return self.ledger.mean_propagating()

    def finish(self) -> None:
        self.ledger.finish()

    @classmethod
    def summary_lines(cls, tables: Mapping[str, pd.DataFrame]) -> list[str]:
        """Mean concurrent walks, restarts and steps."""
        return walk_summary_lines(tables)
