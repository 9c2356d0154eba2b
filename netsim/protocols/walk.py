"""The single random walk service (Hegedűs, Berta, Jelasity 2016, Alg. 2 and §4.2–4.4).

A random walk is a token carrying an opaque state (e.g. a model) from node to node. Walk
progress is broadcast with push-pull gossip as ``rwprop`` = (steps, id, age); the update
timeout δ triggers restarts from local copies; the replace rule of line 14 and the
accept-once rule of §4.4 decide which update a node keeps.

Node state lives in arrays indexed by node id:

- ``rwprop``: ``prop_steps``, ``prop_id``, and ``prop_origin``, the update's virtual creation
  time on the node's clock (arrival time − age on arrival), so that age() = now − origin: ages
  accumulate the time an update spends on nodes and on links, so no synchronised clocks are
  needed (§4.1). ``prop_special`` marks the bootstrap update that never times out. These
  are views of one record array, ``prop`` (one record per node), which the compiled
  rounds-mode kernels of :mod:`netsim.protocols.walk_kernels` work on; exact mode, which reads
  one node at a time, holds them as Python lists instead, and sends (steps, id, origin,
  special) — the age when sent is the message's send time − origin.
- ``rw``: ``rw_steps`` and ``rw_state`` (the local copy of the best walk that visited the node).

Choices where the paper leaves room (each is tested in ``tests/test_walk.py``):

1. *Walk identity.* The paper has no walk ids. Here a walk gets a fresh id when it is started
   (bootstrap) or restarted, and keeps it while it is forwarded; since walks move hot-potato,
   one id is one token. When a node forwards its local copy instead of the arriving walk
   (line 30 after line 27 kept an older copy with more steps), the token keeps its id and
   takes the copy's steps and state.
2. *Alive.* A walk is *propagating* while it is in transfer or held for forwarding by an
   online node; it is *suspended* while its holder is offline (it may resume, see 5). The
   "number of walks propagating concurrently" (§5.2, Fig. 2–3) counts propagating walks; its
   time average is integrated exactly over every change, not sampled.
3. *The bootstrap update* (never times out) is replaced by any real update: its only purpose is
   to keep nodes from restarting before the first walk's updates arrive (§4.4).
4. *Timeouts.* ``onUpdateTimeout(i)`` fires when the local update's age reaches i·δ; a node that
   adopts an update already older than δ waits for the next multiple. A node that is still
   trying to forward its own local copy does not start a second walk on a timeout: its
   ``forwardRandomWalk()`` is already running. Only active nodes (online and having heard fresh
   gossip since they rejoined) time out.
5. *Rejoining.* A suspended walk is resumed when its holder, back online, receives its first
   fresh gossip message — if the walk is still the leader, i.e. its step count is at least the
   node's (fresh) ``rwprop.steps``; otherwise it ends ("abandoned"). Receiving a walk does not
   count as the fresh gossip message (§4.4 speaks of gossip).
6. *Kills* (§5.3 stress test) happen on arrival, before the step is counted.
7. *Retries.* A failed transfer is retried at once with a new random online neighbour while
   forwarding is still necessary (no fresher live update with a larger step count); with no
   online neighbour the node tries again after ``retry_interval``.

Where the authors' published implementation differs from the paper (accept-once and ties in
line 14, an age error at each adoption, the starter's step-0 update, and their gossip cycle
and walk handling) are options, :class:`WalkVariant`, described in ``docs/walk-variants.md``;
``preset: authors`` selects all of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import model_validator

from netsim.contracts import BuildContext, ComponentConfig, Curve, FigureSpec, Walk, WalkAgent
from netsim.distributions import Duration, PositiveDuration
from netsim.errors import ScenarioError
from netsim.fields import Probability
from netsim.log import F64, I32, I64, STR, TableSchema
from netsim.network.links import Network, Transfer
from netsim.protocols.gossip import GossipEngine, PushPullEngine
from netsim.protocols.walk_kernels import (
    AGE_TOLERANCE,
    BUFFER_RECORD,
    PROP_RECORD,
    adopted_circles,
    authors_cycle,
    authors_exchange,
    authors_merge_visible,
    authors_timeout_check,
    due_timeouts,
    exchange_round,
    in_index_order,
    replaces,
    timeout_circle,
)
from netsim.registry import component_field
from netsim.rng import BlockDraws
from netsim.sim import Simulation

WALK = "walk"
NO_AGE_ERRORS = np.zeros(0)

STEPS_TABLE = TableSchema(
    name="walk_steps",
    columns=(("time", F64), ("walk", I64), ("steps", I64), ("node", I32)),
    description="Every step a walk made: arrival time, walk id, its step count there, node.",
    time="time",
)
RESTARTS_TABLE = TableSchema(
    name="walk_restarts",
    columns=(
        ("time", F64),
        ("node", I32),
        ("walk", I64),
        ("reason", STR),
        ("i", I64),
        ("update", I64),
        ("update_steps", I64),
        ("steps", I64),
    ),
    description=(
        "Walks started: reason 'bootstrap' (the first walk) or 'timeout' (onUpdateTimeout(i) "
        "with rwprop.steps - rw.steps <= i); the timed-out update's id and step count, and "
        "the new walk's step count (negative copies restart at 0)."
    ),
    time="time",
)
ENDS_TABLE = TableSchema(
    name="walk_ends",
    columns=(("time", F64), ("node", I32), ("walk", I64), ("steps", I64), ("reason", STR)),
    description=(
        "Walks that stopped: 'dropped' (line 30: a fresher live walk is known), 'superseded' "
        "(forwarding no longer necessary after a failed transfer), 'killed' (kill "
        "probability), 'abandoned' (its holder rejoined and it was no longer the leader)."
    ),
    time="time",
)
SAMPLES_TABLE = TableSchema(
    name="walk_samples",
    columns=(
        ("time", F64),
        ("propagating", I64),
        ("suspended", I64),
        ("oldest_walk", I64),
        ("oldest_steps", I64),
    ),
    description=(
        "Periodic sample: walks propagating (in transfer or held by an online node), walks "
        "suspended (holder offline), and the propagating walk with the largest step count "
        "(-1 when none)."
    ),
    role="samples",
    time="time",
    # oldest_walk is a walk id (-1: none), not a quantity to average
    metrics=("propagating", "suspended", "oldest_steps"),
)
SUMMARY_TABLE = TableSchema(
    name="walk_summary",
    columns=(
        ("mean_propagating", F64),
        ("time_without_walk", F64),
        ("time_with_several", F64),
        ("steps", I64),
        ("restarts", I64),
        ("dropped", I64),
        ("superseded", I64),
        ("killed", I64),
        ("abandoned", I64),
        ("max_steps", I64),
    ),
    description=(
        "One row at the end: the exact time average of the number of propagating walks, the "
        "fractions of time with none and with more than one, and event counts."
    ),
    role="summary",
)


VISITS_TABLE = TableSchema(
    name="walk_visits",
    columns=(("node", I32), ("visits", I64)),
    description="Visits per node counted by the visit_counter agent (written at the end).",
    role="static",
)


#: The walk counts figure of ``netsim report`` (Hegedűs et al. 2016, Figs. 2–3).
WALK_FIGURE = FigureSpec(
    file="walk_counts.png",
    caption="random walks over time",
    sentence=(
        "The number of random walks propagating at once (top) and the step count of the "
        "oldest propagating walk (bottom) against simulated time."
    ),
    title="Random walks",
    panels=(
        Curve("walk_samples", "propagating", "time", "walks propagating (number of walks)"),
        Curve("walk_samples", "oldest_steps", "time", "oldest walk (number of steps)"),
    ),
)


class VisitCounter(WalkAgent):
    """The trivial agent: the walk carries nothing; visits are counted per node."""

    class Config(ComponentConfig):
        kind: Literal["visit_counter"] = "visit_counter"

    tables = (VISITS_TABLE,)

    def __init__(self, sim: Simulation, n: int) -> None:
        self.sim = sim
        self.visits = np.zeros(n, dtype=np.int64)

    @classmethod
    def build(cls, config: Config, ctx: BuildContext) -> VisitCounter:
        assert ctx.sim is not None
        return cls(ctx.sim, ctx.nodes)

    def initial_state(self) -> None:
        return None

    def visit(self, node: int, state: Any, steps: int, walk: int, now: float) -> None:
        self.visits[node] += 1
        return state

    def finish(self) -> None:
        self.sim.log.table(VISITS_TABLE).extend([range(self.visits.size), self.visits.tolist()])


def _carries_nothing(node: int) -> None:
    """The walk's gossip value when its exchanges happen outside the engine's messages."""
    return None


def _takes_nothing(node: int, value: Any, sender: int, transfer: Transfer) -> None:
    """The walk's merge when its exchanges happen outside the engine's messages."""
    return None


@dataclass(eq=False)
class WalkToken:
    """One walk: its id, step count, state, and the update whose timeout restarted it."""

    walk: int
    steps: int
    state: Any
    restart_of: int
    holder: int
    status: str = "forwarding"  # forwarding | holding | transfer | suspended | ended
    retry_generation: int = 0  # invalidates a pending retry when the walk moves on
    update: int = -1  # the update its holder made when the walk arrived (-1: none)
    # the authors' forwarding (WalkVariant.cycle): the target chosen when a hold began, and
    # the hand-overs so far (a hold's end acts only on the hop it was started in)
    target: int = -1
    hop: int = 0


#: The walk agent of a walk section (the visit counter when none is named).
AgentField = component_field("walk_agent")


class WalkServiceConfig(ComponentConfig):
    """The single random walk service (Hegedűs et al. Alg. 2) over the simulated network."""

    kind: Literal["service"] = "service"
    transfer_time: PositiveDuration
    timeout: PositiveDuration
    kill_probability: Probability = 0.0
    start: Duration = 0.0
    retry_interval: PositiveDuration | None = None
    sample_every: PositiveDuration | None = None
    agent: AgentField = VisitCounter.Config()
    preset: Literal["paper", "authors"] = "paper"
    replace_rule: Literal["paper", "authors"] | None = None
    age_error: Duration | None = None
    bootstrap_update: bool | None = None
    cycle: Literal["netsim", "authors"] | None = None

    def variant(self, gossip_period: float) -> WalkVariant:
        """The protocol rules this section asks for: each option as given, else its preset's
        value (``paper``: Alg. 2 as written, exact ages; ``authors``: the authors' published
        implementation, with an age error of width Δ = ``gossip_period``)."""
        authors = self.preset == "authors"
        return WalkVariant(
            replace_rule=self.replace_rule or self.preset,
            age_error=(
                self.age_error
                if self.age_error is not None
                else (gossip_period if authors else 0.0)
            ),
            bootstrap_update=(
                self.bootstrap_update if self.bootstrap_update is not None else not authors
            ),
            cycle=self.cycle or "netsim",
        )

    @model_validator(mode="before")
    @classmethod
    def _authors_preset_runs_the_authors_cycle(cls, data: Any) -> Any:
        """``preset: authors`` runs the authors' cycle unless ``cycle`` says otherwise. The
        choice is written into the resolved scenario, so a run's id tells which rules made it
        (runs of the preset from before the cycle existed resolve to new ids)."""
        if isinstance(data, Mapping) and data.get("preset") == "authors":
            if data.get("cycle") is None:
                data = {**data, "cycle": "authors"}
        return data

    @model_validator(mode="after")
    def _timeout_covers_a_transfer(self) -> WalkServiceConfig:
        if self.timeout < self.transfer_time:
            raise ValueError(
                f"timeout δ ({self.timeout:g} s) must be at least transfer_time δ_rw "
                f"({self.transfer_time:g} s): an update is not overwritten for δ_rw on average "
                "(Hegedűs et al. §5.2)"
            )
        return self


@dataclass(frozen=True)
class WalkVariant:
    """The three rules where the paper (Hegedűs et al. 2016) and its authors' published
    implementation differ (see ``docs/walk-variants.md``).

    - ``replace_rule``: ``paper`` is Alg. 2 line 14 with §4.4's accept-once by id;
      ``authors`` accepts an update it already holds again and lets an equal step count take
      line 14's "more steps" branch.
    - ``age_error``: width w of the error U[−w/2, +w/2] added to an update's age each time a
      node adopts it (§4.1: measured ages carry "some error"); 0 = exact ages.
    - ``bootstrap_update``: the starter broadcasts an update with step count 0 (§4.4); without
      it, nobody times out until the first walk's first step creates an update.
    - ``cycle``: ``authors`` runs the walk as the authors' code runs it (C1–C7 of
      ``docs/walk-variants.md``; the default of ``preset: authors``). Gossip: each node's
      cycle checks its timeout before its exchange, with one counter per node; pushes go into
      the peer's buffer; every merge (of its own buffer too) draws the age error; the same
      update is taken back when merged two times fewer; rounds mode runs the nodes in index
      order, exact mode each node's cycle at its own tick, both without link time. Walks: a
      walk is kept as the local copy only when it is forwarded, and an update made from the
      local copy carries the copy's id; a restarted walk forces its restart id for its whole
      life; only the walk that made a node's update keeps it from restarting; a walk is held
      for δ_rw and handed over if its target is then online, else held again; a node back
      online runs its cycle, pulls, and resends the walks it parked. Its merges are the
      authors' own (``replace_rule`` does not apply to them); ``age_error`` is their error's
      width.
    """

    replace_rule: Literal["paper", "authors"] = "paper"
    age_error: float = 0.0
    bootstrap_update: bool = True
    cycle: Literal["netsim", "authors"] = "netsim"


class IdealWalkConfig(ComponentConfig):
    """A walk that never fails: the next node uniformly, with or without replacement."""

    kind: Literal["ideal"] = "ideal"
    sampling: Literal["with_replacement", "without_replacement"] = "with_replacement"
    step_time: PositiveDuration = 1.0
    sample_every: PositiveDuration | None = None
    agent: AgentField = VisitCounter.Config()


class RandomWalkService(Walk):
    """Alg. 2: push-pull broadcast of walk progress, restarts on timeouts, hot-potato walks.

    Plug it into a :class:`PushPullGossip` as its rule (it implements ``outgoing`` /
    ``incoming``), then call :meth:`attach` with that gossip (built from a scenario, the
    service registers with the gossip engine and attaches when the run starts).
    """

    figures = (WALK_FIGURE,)

    Config = WalkServiceConfig
    tables = (STEPS_TABLE, RESTARTS_TABLE, ENDS_TABLE, SAMPLES_TABLE, SUMMARY_TABLE)
    requires = {  # noqa: RUF012
        "gossip": "walk progress is broadcast by push-pull gossip with period Δ = gossip.period"
    }
    #: In rounds it does its own exchanges (round_exchange, round_tick).
    round_form = "fused"

    def __init__(
        self,
        sim: Simulation,
        network: Network,
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
        variant: WalkVariant = WalkVariant(),
    ) -> None:
        n = network.topology.n
        self._engine = engine  # attached when the run starts
        self.sim = sim
        self._env = sim.env
        self.network = network
        self.nodes = network.nodes
        self.agent = agent
        self.transfer_time = transfer_time
        self.timeout = timeout
        self.kill_probability = kill_probability
        self.retry_interval = retry_interval
        self.n = n
        self.variant = variant
        self.authors_rule = variant.replace_rule == "authors"  # read on every gossip merge
        # drawn only when there is an error, so exact-age runs keep their streams unchanged
        self._age_error_rng = sim.streams.get(f"{name}.age_error") if variant.age_error else None
        self._age_error_draw = (
            BlockDraws(self._age_error_rng.random) if self._age_error_rng is not None else None
        )
        # rwprop: the bootstrap update (id 0) never times out and has fewer steps than any rw
        self.prop = np.zeros(n, dtype=PROP_RECORD)  # the fields below are views into it
        self.prop_steps = self.prop["steps"]
        self.prop_id = self.prop["id"]
        self.prop_origin = self.prop["origin"]
        self.prop_special = self.prop["special"]
        # rounds mode has no timers: the last timeout circle i handled for the current update
        self.fired_i = self.prop["fired"]
        self.prop_steps[:] = -n - 1
        self.prop_special[:] = True
        # the authors' gossip cycle (variant.cycle): a buffer per node, merge counters, and the
        # nodes whose timeout check a held walk blocks (scratch)
        self.authors_cycle = variant.cycle == "authors"
        if self.authors_cycle:
            self.buffer = np.zeros(n, dtype=BUFFER_RECORD)
            self.buffer["steps"] = -n - 1
            self.buffer["special"] = True
            self.merges = np.zeros(n, dtype=np.int64)
            self._guarded = np.zeros(n, dtype=bool)
            self._peer_of = np.full(n, -1, dtype=np.int64)  # scratch of in_index_order
            # the update id the local copy carries (latestModel's stepID): the id of the
            # update the node made when it last forwarded, or a fresh one after a restart
            self.rw_update = np.full(n, -1, dtype=np.int64)
        # exact mode: each node's gossip value (steps, id, origin, special) as one tuple, made
        # when the node adopts an update rather than at every message (README, Performance);
        # rounds mode
        # sends none (attach drops it)
        self._rwprop: list[tuple[int, int, float, bool]] | None = [(-n - 1, 0, 0.0, True)] * n
        # rw: uniform random negative step counts in [-N, -1] (§4.4)
        init = sim.streams.get(f"{name}.init")
        self.rw_steps = init.integers(-n, 0, size=n).astype(np.int64)
        self.rw_state: list[Any] = [agent.initial_state()] * n
        self._uniform = BlockDraws(sim.streams.get(f"{name}.peers").random)
        self._kill_draw = BlockDraws(sim.streams.get(f"{name}.kill").random)
        self._start_rng = sim.streams.get(f"{name}.start")
        self._timer_generation = np.zeros(n, dtype=np.int64)
        self._timer_due = np.full(n, np.inf)  # when the pending timeout check fires
        self.round_based = False  # set by attach()

        # walks held by a node, by node: only the few holders have an entry (a list per node
        # would be 128 MB of empty lists at 10⁶ nodes)
        self.forwarding: dict[int, list[WalkToken]] = {}  # held, not in transfer
        self.suspended: dict[int, list[WalkToken]] = {}
        self._next_update_id = 1
        self._next_walk_id = 0
        self.gossip: GossipEngine | None = None
        # alive-walk bookkeeping
        self.propagating: dict[int, WalkToken] = {}
        self.suspended_count = 0
        self._area = 0.0
        self._area_zero = 0.0
        self._area_several = 0.0
        self._last_change = 0.0
        self.counts = {
            "steps": 0,
            "restarts": 0,
            "dropped": 0,
            "superseded": 0,
            "killed": 0,
            "abandoned": 0,
        }
        self.max_steps = 0
        log = sim.log
        self.steps_table = log.table(STEPS_TABLE)
        self.restarts_table = log.table(RESTARTS_TABLE)
        self.ends_table = log.table(ENDS_TABLE)
        self.samples_table = log.table(SAMPLES_TABLE)
        self.summary_table = log.table(SUMMARY_TABLE)
        self.nodes.on_leave(self._on_leave)
        if self.authors_cycle:
            self.nodes.on_join(self._authors_rejoin)
            # exact mode: the cycle runs at each tick without messages (_authors_tick), so
            # the engine's messages carry nothing of the walk (instance attributes: the usual
            # rule pays nothing for the choice; the engine binds them at start)
            self.outgoing = _carries_nothing  # type: ignore[method-assign]
            self.incoming = _takes_nothing  # type: ignore[method-assign]
        sim.call_later(start, self._bootstrap)
        sim.every(sample_every, self._sample, first=0.0)

    @classmethod
    def check_inputs(cls, config: WalkServiceConfig, ctx: BuildContext) -> None:
        """Reject a topology the walk cannot cross; warn about a timeout shorter than the
        time its updates need to spread (Hegedűs et al. 2016 §5.2: δ ≥ δ_rw + 10Δ)."""
        assert ctx.topology is not None
        lonely = np.flatnonzero(ctx.topology.degrees() == 0)
        if lonely.size:
            raise ScenarioError(
                f"walk: {lonely.size} node(s) (e.g. node {lonely[0]}) have no neighbour in the "
                "topology; a walk reaching them could never be forwarded"
            )
        # the engine it is wired to (a components entry, or the gossip section), not the
        # section by name: every engine's config has a period (netsim.registry checks it)
        gossip = ctx.config_of("gossip")
        if gossip is None:
            raise ScenarioError(f"{ctx.key} needs a gossip engine: a gossip section, or uses")
        if config.cycle == "authors":
            if ctx.network is not None and ctx.network.lossy:
                raise ScenarioError(
                    "walk.cycle: authors (the default of walk.preset: authors) models the "
                    "authors' code, whose gossip loses nothing: links.loss must be 0 and "
                    "links.failure absent, or set walk.cycle: netsim for netsim's own cycle"
                )
        spread = config.transfer_time + gossip.period * math.log2(max(ctx.nodes, 2))
        if config.timeout < spread:
            engine = ctx.uses.get("gossip", "gossip")
            ctx.warn(
                f"timeout δ = {config.timeout:g} s is less than transfer_time + {engine}.period "
                f"× log2(nodes) = {spread:g} s; updates may time out before the gossip spreads "
                "them, so expect many restarts (the paper's smallest δ is δ_rw + 10Δ)"
            )

    @classmethod
    def build(cls, config: WalkServiceConfig, ctx: BuildContext) -> RandomWalkService:
        assert ctx.sim is not None and ctx.network is not None
        cls.check_inputs(config, ctx)
        gossip = ctx.require("gossip")
        if config.cycle == "authors" and not isinstance(gossip, PushPullEngine):
            raise ScenarioError(
                "walk.cycle: authors (the default of walk.preset: authors) runs the authors' "
                f"cycle on the built-in gossip engine's ticks; the gossip section names "
                f"{type(gossip).__name__}: use the built-in engine, or walk.cycle: netsim"
            )
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
        )
        gossip.register(service)
        return service

    def start(self) -> None:
        """Use the gossip engine the service registered with (see :meth:`attach`)."""
        if self._engine is not None:
            self.attach(self._engine)

    # --- wiring ----------------------------------------------------------------------------

    def attach(self, gossip: GossipEngine) -> None:
        """Use ``gossip`` (whose rule is this service) for activity and rejoin signals.

        With :class:`~netsim.protocols.rounds.RoundGossip` timeouts are evaluated once per
        round for all nodes (:meth:`round_tick`) instead of by per-node timers.
        """
        self.gossip = gossip
        self.round_based = gossip.round_based
        if self.round_based or self.authors_cycle:
            self._rwprop = None  # the compiled kernels read the record arrays
        else:
            self._hold_state_in_lists()
        if self.authors_cycle and not self.round_based:
            # their simulator runs every node's cycle at the same instants, in index order
            gossip.run_cycles(self._authors_tick)

        gossip.on_activate(self._on_activate)
        for node in np.flatnonzero(gossip.active).tolist():
            self._schedule_timeout(node)

    def _hold_state_in_lists(self) -> None:
        """Exact mode reads and writes one node's ``rwprop`` and timer at every message and
        timer: as Python lists that is several times cheaper than numpy scalars (README,
        Performance).
        The values and their arithmetic are the same (int64 and float64 are Python's int and
        float); rounds mode keeps the record array its compiled kernels read."""
        record = self.prop
        self.prop_steps = record["steps"].tolist()
        self.prop_id = record["id"].tolist()
        self.prop_origin = record["origin"].tolist()
        self.prop_special = record["special"].tolist()
        self.fired_i = record["fired"].tolist()
        self._timer_generation = self._timer_generation.tolist()
        self._timer_due = self._timer_due.tolist()
        self.prop = None  # the lists hold the state now: no stale copy to read by mistake

    def _active(self, node: int) -> bool:
        return (
            bool(self.gossip.active[node])
            if self.gossip is not None
            else bool(self.nodes.online[node])
        )

    # --- rwprop ----------------------------------------------------------------------------

    def age(self, node: int) -> float:
        """``rwprop.age()`` at ``node`` now (time on nodes and links since its creation)."""
        return self._env._now - self.prop_origin[node]

    def _store_prop(self, node: int, steps: int, update: int, age: float) -> None:
        if self.authors_cycle:
            self._authors_store(node, steps, update, age)
            return
        same = update == self.prop_id[node] and not self.prop_special[node]
        if same:  # re-adopted (replace_rule: authors): circles fired here stay fired
            fired = adopted_circles(True, int(self.fired_i[node]), age, self.timeout)
        self.prop_steps[node] = steps
        self.prop_id[node] = update
        origin = self.prop_origin[node] = self.sim.env.now - age
        self.prop_special[node] = False
        if self._rwprop is not None:
            self._rwprop[node] = (steps, update, origin, False)
        if same:
            self.fired_i[node] = fired
            if not self.round_based and self._active(node):
                self._schedule_timeout(node, fired + 1)  # the age moved: re-time the check
        # A pending check notices a changed update when it fires and reschedules; only an
        # update that times out before that check needs a new timer now. So a node has one
        # timer event per δ or so, not one per adoption.
        elif self.round_based:  # the circles this update already passed elsewhere
            self.fired_i[node] = timeout_circle(age, self.timeout)
        else:
            if self.authors_rule:  # exact mode reads fired_i only when an update is re-adopted
                self.fired_i[node] = self._next_i(node) - 1
            # _next_due(node) (the update is not the bootstrap one), inlined: once per adoption
            origin = self.prop_origin[node]
            circle = max(math.ceil((self._env._now - origin - AGE_TOLERANCE) / self.timeout), 1)
            if origin + circle * self.timeout < self._timer_due[node] and self._active(node):
                self._schedule_timeout(node)

    def _fresh_update_id(self) -> int:
        update = self._next_update_id
        self._next_update_id += 1
        return update

    def _new_update(self, node: int, steps: int) -> None:
        self._store_prop(node, steps, self._fresh_update_id(), 0.0)

    def timed_out(self, node: int) -> bool:
        """Has the local update reached age δ (the bootstrap update never does)?"""
        return not self.prop_special[node] and self.age(node) >= self.timeout

    def outgoing(self, node: int) -> tuple[int, int, float, bool]:
        """Gossip value: (steps, id, origin, is the bootstrap update). The origin is the
        update's virtual creation time: its age when sent is ``transfer.sent_at − origin``."""
        return self._rwprop[node]  # type: ignore[index]  # exact mode only

    def incoming(self, node: int, value: Any, sender: int, transfer: Transfer) -> None:
        """``onReceiveRWProps``: line 14 with accept-once by id (§4.4), or the authors' rule
        (:class:`WalkVariant`); an adopted age gets the age error added."""
        steps, update, origin, special = value
        if special:
            return  # the bootstrap update carries no information
        if update == self.prop_id[node] and not self.authors_rule:
            return  # accepted once: a timed-out update is never revived
        now = self._env._now
        sent_at = transfer.sent_at
        # its age when sent, plus the time spent on the link (in this order: the sum is the
        # one of an age computed by the sender)
        age = (sent_at - origin) + (now - sent_at)
        if self.prop_special[node] or replaces(
            self.prop_steps[node],
            now - self.prop_origin[node],  # self.age(node), inlined
            steps,
            age,
            self.timeout,
            self.authors_rule,
        ):
            if self._age_error_draw is not None:
                age = max(age + (self._age_error_draw() - 0.5) * self.variant.age_error, 0.0)
            self._store_prop(node, steps, update, age)

    # --- timeouts --------------------------------------------------------------------------

    def _next_i(self, node: int) -> int:
        """The next i whose timeout i·δ has not fired at ``node`` for its current update: the
        smallest i ≥ 1 with i·δ not below the age (up to :data:`AGE_TOLERANCE`), so that a
        timeout due at this very instant still fires (each i fires once, in order)."""
        return max(math.ceil((self.age(node) - AGE_TOLERANCE) / self.timeout), 1)

    def _next_due(self, node: int) -> float:
        if self.prop_special[node]:
            return np.inf
        return float(self.prop_origin[node]) + self._next_i(node) * self.timeout

    def _schedule_timeout(self, node: int, i: int | None = None) -> None:
        """Schedule ``onUpdateTimeout(i)`` for the current update (next i when not given)."""
        if self.authors_cycle:  # the node checks its own counter when it gossips
            return
        if self.round_based:
            self.fired_i[node] = self._next_i(node) - 1  # round_tick handles the next
            return
        self._timer_generation[node] += 1
        if self.prop_special[node]:
            self._timer_due[node] = np.inf
            return
        if i is None:
            i = self._next_i(node)
        self.fired_i[node] = i - 1
        due = float(self.prop_origin[node]) + i * self.timeout  # when the age reaches i·δ
        self._timer_due[node] = due
        self.sim.call_later(
            max(due - self.sim.env.now, 0.0),
            self._on_timer,
            node,
            int(self._timer_generation[node]),
            int(self.prop_id[node]),
            i,
        )

    def _on_timer(self, node: int, generation: int, update: int, i: int) -> None:
        if generation != self._timer_generation[node]:
            return
        self._timer_due[node] = np.inf
        if not self._active(node):
            return
        if update != self.prop_id[node]:
            self._schedule_timeout(node)  # the update changed: check the new one's timeouts
            return
        self.on_update_timeout(node, i)
        # the next circle; i is passed on, not recomputed from a rounded age
        self._schedule_timeout(node, i + 1)

    def on_update_timeout(self, node: int, i: int) -> None:
        """``onUpdateTimeout(i)``: restart if rwprop.steps − rw.steps ≤ i (lines 19–22)."""
        if self.prop_steps[node] - self.rw_steps[node] > i:
            return
        if any(
            token.holder == node and token.steps == self.rw_steps[node]
            for token in self.propagating.values()
        ):
            return  # already forwarding its local copy (choice 4)
        steps = max(int(self.rw_steps[node]), 0)
        self._launch(node, steps, "timeout", i, int(self.prop_id[node]), int(self.prop_steps[node]))

    # --- RoundRule (round-based gossip) ----------------------------------------------------

    def round_exchange(
        self, initiators: np.ndarray, peers: np.ndarray, pull_lost: np.ndarray
    ) -> None:
        """``onReceiveRWProps`` for one round's pushes and pulls (compiled, see
        :func:`~netsim.protocols.walk_kernels.exchange_round`)."""
        if self.authors_cycle:
            self._authors_round(initiators, peers)
            return
        errors = self._round_age_errors(2 * initiators.size)
        exchange_round(
            initiators,
            peers,
            pull_lost,
            self.sim.env.now,
            self.timeout,
            self.prop,
            self.authors_rule,
            errors,
        )

    def _authors_round(self, initiators: np.ndarray, peers: np.ndarray) -> None:
        """One round as the authors' gossip cycle (:func:`authors_cycle`): the initiators in
        index order, then the restarts their timeout checks made, in that order."""
        self._authors_exchanges(*in_index_order(initiators, peers, self._peer_of))

    def _authors_exchanges(
        self, initiators: np.ndarray, peers: np.ndarray, rejoined: int = -1
    ) -> None:
        """The authors' cycle (:func:`authors_cycle`) for these initiators in this order, and
        the restarts their timeout checks made. A node forwarding the walk that made its
        update does not restart (``isSendingThisStepID``), nor does a ``rejoined`` node that
        parked such a walk when it left."""
        holders = [
            token.holder for token in self.propagating.values() if self._sends_its_update(token)
        ]
        if rejoined >= 0 and any(map(self._sends_its_update, self.suspended.get(rejoined, ()))):
            holders.append(rejoined)
        self._guarded[holders] = True
        errors = self._round_age_errors(3 * initiators.size)
        restarts = authors_cycle(
            initiators, peers, self.prop, self.merges, self.buffer, self.rw_steps,
            self._guarded, errors, self.sim.env.now, self.timeout,
        )  # fmt: skip
        self._guarded[holders] = False
        # the update that timed out, as it was at the check (the exchange after it may have
        # replaced it)
        for node, i, update, update_steps in zip(*(a.tolist() for a in restarts), strict=True):
            steps = max(int(self.rw_steps[node]), 0)
            self._launch(node, steps, "timeout", i, update, update_steps)

    def _sends_its_update(self, token: WalkToken) -> bool:
        """``isSendingThisStepID``: is ``token`` the walk that made its holder's update (which
        keeps the holder from restarting, C6)?"""
        return token.update >= 0 and token.update == self.prop_id[token.holder]

    def _authors_rejoin(self, node: int) -> None:
        """A node back online in the authors' code (C7 of ``docs/walk-variants.md``): it runs
        its cycle at once if a neighbour is online — the timeout check sees the update it held
        when it left, aged by its time offline, with its counter as it was, then it exchanges
        with that neighbour — then pulls one more neighbour's value straight into its own
        (its own value when none is online), takes part in gossip from now on, and resends
        the walks it parked whose step count is at least its update's (the others end)."""
        peer = self.network.random_online_neighbour(node, self._uniform)
        if peer >= 0:
            self._authors_exchanges(
                np.array([node], dtype=np.int64), np.array([peer], dtype=np.int64), node
            )
        source = self.network.random_online_neighbour(node, self._uniform)
        if source < 0:
            source = node  # getRandomNeighbor's fallback: the node merges its own value
        errors = self._round_age_errors(1)
        record = self.prop[source]
        authors_merge_visible(
            self.prop, self.merges, node, record["steps"], record["id"], record["origin"],
            self.merges[source], record["special"], self.sim.env.now, self.timeout,
            errors[0] if errors.size else 0.0,
        )  # fmt: skip
        assert self.gossip is not None
        self.gossip.activate(node)  # resumes or ends its parked walks (_on_activate)

    def _authors_store(self, node: int, steps: int, update: int, age: float) -> None:
        """A new update at ``node`` under the authors' cycle: its buffer is a copy, merged 0
        times; its age is below δ, so the node's counter goes back to i = 1 (C2.4)."""
        origin = self._env._now - age
        self.prop[node] = (steps, update, origin, 0, False)
        self.merges[node] = 0
        self.buffer[node] = (steps, update, origin, 0, False)

    def _authors_tick(self, node: int) -> None:
        """Exact mode, the authors' cycle: at each of its gossip ticks a node runs its cycle
        (C2) — the timeout check, then the exchange with a random online neighbour of its
        own choice — at once: the authors' gossip reads and writes the neighbour's records
        directly, with no message and no link time. A node with no online neighbour skips
        it, as theirs does."""
        peer = self.network.random_online_neighbour(node, self._uniform)
        if peer < 0:
            return
        now = self._env._now
        guarded = any(
            token.holder == node and self._sends_its_update(token)
            for token in self.propagating.values()
        )
        circle = authors_timeout_check(
            self.prop, node, self.rw_steps[node], guarded, now, self.timeout
        )
        update, update_steps = int(self.prop_id[node]), int(self.prop_steps[node])  # as checked
        if self._age_error_draw is None:
            authors_exchange(
                self.prop, self.merges, self.buffer, node, peer, now, self.timeout, 0.0, 0.0, 0.0
            )
        else:
            draw, width = self._age_error_draw, self.variant.age_error
            authors_exchange(
                self.prop, self.merges, self.buffer, node, peer, now, self.timeout,
                (draw() - 0.5) * width, (draw() - 0.5) * width, (draw() - 0.5) * width,
            )  # fmt: skip
        if circle:
            steps = max(int(self.rw_steps[node]), 0)
            self._launch(node, steps, "timeout", circle, update, update_steps)

    def _round_age_errors(self, count: int) -> np.ndarray:
        """One age error per message of a round (pushes, then pulls), used if adopted."""
        if self._age_error_rng is None:
            return NO_AGE_ERRORS
        return (self._age_error_rng.random(count) - 0.5) * self.variant.age_error

    def round_tick(self, active: np.ndarray) -> None:
        """``onUpdateTimeout(i)`` for every ``active`` node whose update's age passed i·δ (the
        authors' cycle checked its timeouts during its exchanges)."""
        if self.authors_cycle:
            return
        nodes, circles = due_timeouts(active, self.prop, self.sim.env.now, self.timeout)
        for node, reached in zip(nodes.tolist(), circles.tolist(), strict=True):
            for i in range(int(self.fired_i[node]) + 1, reached + 1):
                self.on_update_timeout(node, i)
            self.fired_i[node] = reached

    # --- walks -----------------------------------------------------------------------------

    def _launch(
        self, node: int, steps: int, reason: str, i: int, update: int, update_steps: int
    ) -> None:
        walk = self._next_walk_id
        self._next_walk_id += 1
        self.rw_steps[node] = max(int(self.rw_steps[node]), steps)
        token = WalkToken(
            walk, steps, self.rw_state[node], update if reason == "timeout" else -1, node
        )
        if self.authors_cycle:  # a (re)started walk's model gets new ids (initIDs)
            token.update = self.rw_update[node] = self._fresh_update_id()
        self.counts["restarts"] += reason == "timeout"
        self.restarts_table.append(
            self.sim.env.now, node, walk, reason, i, update, update_steps, steps
        )
        self._set_alive(token, True)
        self._forward(token)

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
            self._new_update(starter, 0)
        self.rw_steps[starter] = max(int(self.rw_steps[starter]), 0)
        self._launch(starter, 0, "bootstrap", 0, int(self.prop_id[starter]), 0)

    def _forward(self, token: WalkToken) -> None:
        """``forwardRandomWalk``: send to a random online neighbour, retrying as needed."""
        node = token.holder
        if not self.nodes.online[node]:
            self._suspend(token)
            return
        if self.authors_cycle:
            self._authors_hold(token)
            return
        peer = self.network.random_online_neighbour(node, self._uniform)
        if peer < 0:
            token.status = "forwarding"
            token.retry_generation += 1
            self.forwarding.setdefault(node, []).append(token)
            self.sim.call_later(self.retry_interval, self._retry, token, token.retry_generation)
            return
        token.status = "transfer"
        self.network.send(
            node,
            peer,
            kind=WALK,
            payload=token,
            duration=self.transfer_time,
            on_deliver=self.on_receive_random_walk,
            on_lost=self._on_transfer_lost,
        )

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
            self._forward(token)
        else:
            self._end(token, node, "superseded")

    def _still_needed(self, node: int, token: WalkToken) -> bool:
        """Forwarding stops once a fresher live update reports a larger step count."""
        return not (self.prop_steps[node] > token.steps and not self.timed_out(node))

    def _on_transfer_lost(self, transfer: Transfer, reason: str) -> None:
        token: WalkToken = transfer.payload
        node = transfer.src
        left = self.nodes.epoch[node] != transfer.src_epoch
        if not self.nodes.online[node] or (left and not self._active(node)):
            self._suspend(token)  # decided when the holder hears fresh gossip again
        elif left:
            self._resume_or_abandon(token)  # back and active already: decide now
        elif self._still_needed(node, token):
            self._forward(token)
        else:
            self._end(token, node, "superseded")

    def on_receive_random_walk(self, transfer: Transfer) -> None:
        """``onReceiveRandomWalk`` (lines 25–31), with kills and the forced timeout of §4.4."""
        token: WalkToken = transfer.payload
        node = transfer.dst
        now = self.sim.env.now
        if self.kill_probability > 0 and self._kill_draw() < self.kill_probability:
            self._end(token, node, "killed")
            return
        token.holder = node
        token.steps += 1
        forced = token.restart_of >= 0 and token.restart_of == self.prop_id[node]
        if self.authors_cycle:
            self._authors_receive(token, node, forced)
            return
        if self.rw_steps[node] < token.steps:
            self.rw_steps[node] = token.steps
            self.rw_state[node] = token.state
        if self.prop_steps[node] < self.rw_steps[node] or self.timed_out(node) or forced:
            # forward the local best copy (it is the arriving walk unless an older copy had
            # more steps: choice 1)
            token.steps = int(self.rw_steps[node])
            self._new_update(node, token.steps)
            token.update = int(self.prop_id[node])
            token.state = self.agent.visit(node, self.rw_state[node], token.steps, token.walk, now)
            self.rw_state[node] = token.state
            if not self.authors_cycle:  # the authors' walk forces its restart id throughout
                token.restart_of = -1
            self.counts["steps"] += 1
            self.max_steps = max(self.max_steps, token.steps)
            self.steps_table.append(now, token.walk, token.steps, node)
            self._forward(token)
        else:
            self._end(token, node, "dropped")

    # --- the authors' walk (WalkVariant.cycle; C4-C5 of docs/walk-variants.md) --------------

    def _authors_receive(self, token: WalkToken, node: int, forced: bool) -> None:
        """``onReceiveRandomWalk`` of the authors' code (C4): the arriving walk, one step on,
        against the node's local copy, which wins unless the walk has more steps. The winner
        is forwarded, with a new update, if the node's update has fewer steps, has timed out
        or is the one this walk restarted (``forced``), and only then becomes the local copy
        (a walk that ends here leaves the local copy as it was). An update made from the
        local copy carries the local copy's id."""
        local_wins = self.rw_steps[node] >= token.steps
        steps = int(self.rw_steps[node]) if local_wins else token.steps
        if not (self.prop_steps[node] < steps or self.timed_out(node) or forced):
            self._end(token, node, "dropped")
            return
        update = int(self.rw_update[node]) if local_wins else -1
        if update < 0:
            update = self._fresh_update_id()
        now = self._env._now
        self._store_prop(node, steps, update, 0.0)
        token.steps = steps
        token.update = update
        state = self.rw_state[node] if local_wins else token.state
        token.state = self.agent.visit(node, state, steps, token.walk, now)
        self.rw_steps[node] = steps
        self.rw_state[node] = token.state
        self.rw_update[node] = update
        self.counts["steps"] += 1
        self.max_steps = max(self.max_steps, steps)
        self.steps_table.append(now, token.walk, steps, node)
        self._forward(token)

    def _authors_hold(self, token: WalkToken) -> None:
        """The authors' forwarding (C5): the target is chosen now (a random online neighbour,
        the node itself when none is), and the walk is held for δ_rw by its holder, where it
        counts as propagating while the holder is online. A hold that ends on a gossip cycle
        ends after that cycle, as in their simulator, whose cycle runs before the protocol's
        events of its instant: at the cycle's own float, after its events, rather than at a
        float a few bits off it, before or after it by the rounding."""
        node = token.holder
        target = self.network.random_online_neighbour(node, self._uniform)
        token.target = node if target < 0 else target
        token.status = "holding"
        self.forwarding.setdefault(node, []).append(token)
        due = self._env._now + self.transfer_time
        cycle = self.gossip.cycle_instant(due) if self.gossip is not None else None
        if cycle is None:
            self.sim.call_later(self.transfer_time, self._authors_hold_end, token, token.hop)
        else:
            self.sim.call_at_end_of(cycle, self._authors_hold_end, token, token.hop)

    def _authors_hold_end(self, token: WalkToken, hop: int) -> None:
        """The end of a hold (C5): the walk is handed over at once if its target is online;
        otherwise a new target is chosen and the walk held for another full δ_rw, without
        asking whether it is still needed. The end of a hold started before a hand-over
        does nothing, and one that falls while the holder is offline is lost (the walk
        stays parked until the holder is back); one started before the holder left and
        came back acts on the walk as held now."""
        node = token.holder
        if token.hop != hop or token.status != "holding" or not self.nodes.online[node]:
            return
        held = self.forwarding[node]
        held.remove(token)
        if not held:
            del self.forwarding[node]
        target = token.target
        if not self.nodes.online[target]:
            self._authors_hold(token)
            return
        token.hop += 1
        token.status = "transfer"
        self.network.send(
            node,
            target,
            kind=WALK,
            payload=token,
            duration=0.0,
            on_deliver=self.on_receive_random_walk,
            on_lost=self._on_transfer_lost,
        )

    # --- churn -----------------------------------------------------------------------------

    def _suspend(self, token: WalkToken) -> None:
        if token.status == "suspended":
            return
        self._set_alive(token, False)
        token.status = "suspended"
        self.suspended.setdefault(token.holder, []).append(token)
        self.suspended_count += 1

    def _on_leave(self, node: int) -> None:
        self._timer_generation[node] += 1
        self._timer_due[node] = np.inf
        for token in self.forwarding.pop(node, ()):
            self._suspend(token)

    def _on_activate(self, node: int) -> None:
        """First fresh gossip after a rejoin: resume walks that are still the leader."""
        waiting = self.suspended.pop(node, ())
        for token in waiting:
            self.suspended_count -= 1
            self._resume_or_abandon(token)
        self._schedule_timeout(node)

    def _resume_or_abandon(self, token: WalkToken) -> None:
        node = token.holder
        if token.steps >= self.prop_steps[node]:
            if token.status == "suspended":
                token.status = "forwarding"
            self._set_alive(token, True)
            self._forward(token)
        else:
            self._end(token, node, "abandoned")

    # --- bookkeeping -----------------------------------------------------------------------

    def _account(self) -> None:
        now = self.sim.env.now
        span = now - self._last_change
        alive = len(self.propagating)
        self._area += alive * span
        self._area_zero += span * (alive == 0)
        self._area_several += span * (alive > 1)
        self._last_change = now

    def _set_alive(self, token: WalkToken, alive: bool) -> None:
        self._account()
        if alive:
            self.propagating[token.walk] = token
        else:
            self.propagating.pop(token.walk, None)

    def _end(self, token: WalkToken, node: int, reason: str) -> None:
        if token.status == "suspended":
            self.suspended_count -= 1
        self._set_alive(token, False)
        token.status = "ended"
        self.counts[reason] += 1
        self.ends_table.append(self.sim.env.now, node, token.walk, token.steps, reason)

    def _sample(self) -> None:
        oldest = max(self.propagating.values(), key=lambda t: (t.steps, -t.walk), default=None)
        self.samples_table.append(
            self.sim.env.now,
            len(self.propagating),
            self.suspended_count,
            oldest.walk if oldest is not None else -1,
            oldest.steps if oldest is not None else -1,
        )

    def mean_propagating(self) -> float:
        """Time average of the number of propagating walks from 0 until now (exact)."""
        self._account()
        return self._area / max(self.sim.env.now, 1e-300)

    def finish(self) -> None:
        mean = self.mean_propagating()
        duration = max(self.sim.env.now, 1e-300)
        self._sample()
        c = self.counts
        self.summary_table.append(
            mean,
            self._area_zero / duration,
            self._area_several / duration,
            c["steps"],
            c["restarts"],
            c["dropped"],
            c["superseded"],
            c["killed"],
            c["abandoned"],
            self.max_steps,
        )

    @classmethod
    def summary_lines(cls, tables: Mapping[str, pd.DataFrame]) -> list[str]:
        """Mean concurrent walks, restarts and steps."""
        lines: list[str] = []
        walk = tables.get("walk_summary")
        if walk is not None and len(walk):
            row = walk.iloc[0]
            lines.append(
                f"walks: mean {row['mean_propagating']:.3f} propagating, "
                f"{row['restarts']} restarts, {row['steps']} steps"
            )
        return lines


class IdealWalk(Walk):
    """A walk that never fails (for learning experiments, Hegedűs et al. §6).

    Every ``step_time`` it moves to the next node: uniform with replacement, or following
    random permutations of the nodes, a new one each time all nodes were visited (without
    replacement, §3.1). It ignores churn and the network.
    """

    figures = (WALK_FIGURE,)

    Config = IdealWalkConfig
    tables = (STEPS_TABLE, SAMPLES_TABLE)

    def __init__(
        self,
        sim: Simulation,
        n: int,
        agent: WalkAgent,
        *,
        step_time: float,
        replacement: bool = True,
        sample_every: float = 60.0,
        name: str = "walk",
    ) -> None:
        self.sim = sim
        self.n = n
        self.agent = agent
        self.step_time = step_time
        self.replacement = replacement
        self._rng = sim.streams.get(f"{name}.ideal")
        self._order: list[int] = []
        self.state = agent.initial_state()
        self.steps = 0
        self.steps_table = sim.log.table(STEPS_TABLE)
        self.samples_table = sim.log.table(SAMPLES_TABLE)
        sim.every(step_time, self._step)
        sim.every(sample_every, self._sample, first=0.0)

    @classmethod
    def build(cls, config: IdealWalkConfig, ctx: BuildContext) -> IdealWalk:
        assert ctx.sim is not None
        return cls(
            ctx.sim,
            ctx.nodes,
            ctx.require("walk.agent"),
            step_time=config.step_time,
            replacement=config.sampling == "with_replacement",
            sample_every=config.sample_every or ctx.metrics.sample_every,
            name=ctx.key,
        )

    def next_node(self) -> int:
        """The next node to visit."""
        if self.replacement:
            return int(self._rng.integers(self.n))
        if not self._order:
            self._order = self._rng.permutation(self.n).tolist()[::-1]
        return self._order.pop()

    def _step(self) -> None:
        node = self.next_node()
        self.steps += 1
        now = self.sim.env.now
        self.state = self.agent.visit(node, self.state, self.steps, 0, now)
        self.steps_table.append(now, 0, self.steps, node)

    def _sample(self) -> None:
        self.samples_table.append(self.sim.env.now, 1, 0, 0, self.steps)
