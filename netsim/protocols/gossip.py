"""Push-pull gossip, exact (event-driven) mode.

Hegedűs et al. (2016), Alg. 2 lines 6–11: every period Δ each node picks a random online
neighbour p, sends p its value (push) and asks p for p's value (pull). What a value is and how
a received value is merged belongs to the protocol that uses the gossip — a
:class:`GossipRule` (the broadcast here, the random walk service's replace rule of line 14
later) — so the exchange machinery is written once.

Timing: node i gossips at k·Δ + φ_i with its own phase φ_i ~ U[0, Δ), i.e. clocks are not
synchronised. Both messages travel through the :class:`~netsim.network.links.Network`, so they
take the link's transfer time and can be lost.

Rejoining (§4.4): a node that comes back online starts no exchange of its own until it has
received a fresh gossip message. Answers to pulls it sent before leaving are lost with the
connection, so in practice the fresh message is a push from an online neighbour, after which
the node is *active* again; nodes online at time 0 are active from the start.

Per-node state is in arrays indexed by node id, so a vectorised round mode can act on all
nodes at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
import simpy
from simpy.events import NORMAL

from netsim.contracts import (
    BuildContext,
    ComponentConfig,
    ExactRun,
    ExactSupport,
    GossipEngine,
    Section,
    Transport,
)
from netsim.distributions import PositiveDuration
from netsim.event_queue import LISTENERS, MESSAGE_SIZE, PEER_AT, PERIOD, PULLS, TICK
from netsim.fields import Size
from netsim.network.links import Transfer
from netsim.registry import import_reference
from netsim.rng import BlockDraws
from netsim.sim import Simulation

PUSH = "gossip_push"
PULL = "gossip_pull"

#: How close an instant must be to a cycle of the common grid to count as on it. Sums of
#: floating-point periods drift apart in the last bits (t + 100·Δ and t + Δ + … + Δ differ
#: by some 10⁻¹⁴ s); 1 µs is 10⁻⁴ of the smallest Δ used (10 ms), so no other instant is taken
#: for a cycle.
GRID_TOLERANCE = 1e-6


def grid_instant(last: float, period: float, when: float) -> float | None:
    """The instant of the grid ``last``, ``last`` + Δ, ``last`` + Δ + Δ, … (added up as a
    cycle's clock adds it) within :data:`GRID_TOLERANCE` of ``when``, or None."""
    instant = last
    while instant < when - GRID_TOLERANCE:
        instant += period
    return instant if abs(instant - when) <= GRID_TOLERANCE else None


class GossipRule(Protocol):
    """What a protocol plugs into push-pull gossip."""

    def outgoing(self, node: int) -> Any:
        """The value ``node`` sends (a snapshot taken when the message leaves)."""

    def incoming(self, node: int, value: Any, sender: int, transfer: Transfer) -> None:
        """Merge ``value`` received by ``node`` from ``sender`` (``transfer.kind`` says push
        or pull; ``transfer.sent_at`` lets a rule age what it received on the link)."""


class GossipConfig(ComponentConfig):
    """The ``gossip`` section: push-pull gossip every ``period`` with messages of
    ``message_size``, event by event (``exact``) or in vectorised rounds (``rounds``)."""

    period: PositiveDuration
    message_size: Size = 64.0
    mode: Literal["exact", "rounds"] = "exact"


def round_mode(gossip: GossipConfig | None) -> bool:
    """Whether a scenario's gossip (its ``gossip`` section, ``None`` when it has none) runs in
    vectorised rounds: the one place netsim reads ``gossip.mode``."""
    return gossip is not None and getattr(gossip, "mode", "exact") == "rounds"


#: The engine of each gossip mode as ``module:Class``, found as the registry finds its
#: built-ins: the round engine derives from :class:`PushPullEngine`, so this module cannot
#: import it.
ENGINES: dict[bool, str] = {
    False: "netsim.protocols.gossip:PushPullGossip",
    True: "netsim.protocols.rounds:RoundGossip",
}


class PushPullEngine(GossipEngine):
    """The built-in gossip engine (``gossip``): what both gossip modes share, the period and
    which nodes take part.

    Applications :meth:`register` while the run is built; :meth:`start` begins the
    exchanges once all of them are registered.

    A node is *active* when it is online and has heard a fresh message since it last joined
    (nodes online at time 0 are active from the start); components that must react when a
    rejoined node becomes active again subscribe with :meth:`on_activate`.
    """

    Config = GossipConfig
    section = Section("gossip", after=("links", "learning"), by_kind="optional")
    #: Whether the engine runs in rounds (its applications then get round calls, and a walk
    #: evaluates its timeouts once per round).
    round_based: ClassVar[bool] = False

    def __init__(
        self,
        sim: Simulation,
        network: Transport,
        *,
        period: float,
        message_size: float,
        name: str,
    ) -> None:
        if period <= 0:
            raise ValueError(f"gossip period must be positive, got {period}")
        self.sim = sim
        self.network = network
        self.period = period
        self.message_size = message_size
        self.name = name
        self.active = network.nodes.online.copy()
        # the same flags as a list, read by every exact-mode message (docs/performance.md)
        self.is_active: list[bool] = self.active.tolist()
        self._activation_listeners: list[Callable[[int], None]] = []
        self.exchanges = 0
        self.rules: list[Any] = []
        network.nodes.on_leave(self._on_leave)

    @classmethod
    def build(cls, config: GossipConfig, ctx: BuildContext) -> PushPullEngine:
        """The engine of the ``gossip`` section, exact or in rounds (:func:`round_mode`)."""
        assert ctx.sim is not None and ctx.network is not None
        engine = import_reference(ENGINES[round_mode(config)])
        return engine(
            ctx.sim, ctx.network, period=config.period, message_size=config.message_size,
            name=ctx.key,
        )  # fmt: skip

    def register(self, rule: Any) -> None:
        """Add an application (its values travel in every message, in registration order)."""
        self.rules.append(rule)

    def on_activate(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(node)`` when a rejoined node hears its first fresh message."""
        self._activation_listeners.append(listener)

    @property
    def active_count(self) -> int:
        return int(self.active.sum())

    def _on_leave(self, node: int) -> None:
        self.active[node] = False
        self.is_active[node] = False

    def cycle_instant(self, when: float) -> float | None:
        """The instant of a cycle of the engine's common grid that ``when`` falls on (up to
        :data:`GRID_TOLERANCE`), as the engine's clock reaches it, or None: between cycles,
        or no common grid (exact mode without :meth:`PushPullGossip.run_cycles`)."""
        return None

    def activate(self, node: int) -> None:
        """Let online ``node`` take part at once, as if it had heard a fresh message (the
        authors' walk runs a rejoined node's cycle right away: ``walk.cycle: authors``)."""
        if not self.active[node]:
            self._activate(node)

    def _activate(self, node: int) -> None:
        """``node`` heard a fresh message: it takes part again (listeners are told)."""
        self.active[node] = True
        self.is_active[node] = True
        for listener in self._activation_listeners:
            listener(node)


class _Tick(simpy.events.Event):
    """A node's gossip timer: one event per node, scheduled again every period
    (docs/performance.md: no
    new timer, closure or argument tuple per tick). ``generation`` cancels it when the node
    leaves."""

    _ok = True
    _value = None

    def __init__(self, node: int, generation: int) -> None:
        # simpy's Event.__init__ is not called: the engine sets env and callbacks when it
        # schedules the tick, as simpy's Timeout does for itself
        self.node = node
        self.generation = generation


class PushPullGossip(PushPullEngine):
    """Event-driven push-pull exchanges among online nodes. On the compiled exact core its
    ticks and exchanges are compiled (:mod:`netsim.protocols.gossip_exact`, the twins its
    methods name)."""

    def __init__(
        self,
        sim: Simulation,
        network: Transport,
        rule: GossipRule | None = None,
        *,
        period: float,
        message_size: float = 64.0,
        pull: bool = True,
        name: str = "gossip",
    ) -> None:
        """With ``rule`` the exchanges begin at once; without, applications
        :meth:`register` and :meth:`start` begins them."""
        super().__init__(sim, network, period=period, message_size=message_size, name=name)
        self.rule: GossipRule = _Silent()
        self._outgoing, self._incoming = self.rule.outgoing, self.rule.incoming
        self.pull = pull  # False: push only (gossip learning sends models one way)
        n = network.topology.n
        self._peer_uniform = BlockDraws(sim.streams.get(f"{name}.peers").random)
        self.phase = sim.streams.get(f"{name}.phase").uniform(0.0, period, n)
        self._timer_generation = [0] * n  # a list: read at every tick (docs/performance.md)
        self._env = sim.env
        # every tick's callbacks: one shared tuple, as for a transfer (Network.send)
        self._tick_callbacks = (self._tick,)
        # the deliveries' bound methods, made once rather than at every message
        self._deliver_push, self._deliver_pull = self._on_push, self._on_pull
        self._started = False
        # run_cycles: every node on one grid, a cycle's order, the hook, the last cycle
        self._aligned = False
        self._tick_priority: list[float] = []
        self._before_push_hook: Callable[[int], None] = _no_hook
        self._cycle_at = 0.0
        #: The compiled exact core when it runs the ticks (:meth:`attach_core`).
        self._core: Any = None
        if rule is not None:
            self.register(rule)
            self.start()

    def start(self) -> None:
        """Begin the exchanges: every active node's first tick."""
        rules = self.rules
        single = rules[0] if len(rules) == 1 else CompositeRule(rules)
        self.rule = single if rules else _Silent()
        # its two methods, bound once: every message calls one of them (docs/performance.md)
        self._outgoing, self._incoming = self.rule.outgoing, self.rule.incoming
        self._started = True
        for node in np.flatnonzero(self.active).tolist():
            self._schedule_tick(node)

    def _schedule_tick(self, node: int) -> None:
        """``node``'s first tick after it (re)joined: the next k·Δ + φ after now (compiled
        twin: :func:`netsim.protocols.gossip_exact.schedule_tick`)."""
        if self._aligned:
            self._schedule_aligned_tick(node)
            return
        now = self.sim.env.now
        phase = self.phase[node]
        # next instant k·Δ + φ strictly after now
        k = np.floor((now - phase) / self.period) + 1
        when = k * self.period + phase
        if when <= now:
            when += self.period
        if self._core is not None:  # the compiled core runs the ticks
            self._core.push_tick(node, int(self._timer_generation[node]), now + (when - now))
            return
        tick = _Tick(node, self._timer_generation[node])
        tick.env = self.sim.env
        tick.callbacks = self._tick_callbacks
        self.sim.env.schedule(tick, NORMAL, when - now)

    def _on_leave(self, node: int) -> None:
        super()._on_leave(node)
        self._timer_generation[node] += 1  # cancels the pending tick

    def run_cycles(self, hook: Callable[[int], None]) -> None:
        """Run as a cycle-driven simulator does (the authors' walk: ``walk.cycle: authors``):
        every node ticks at the same instants k·Δ, in index order, instead of at its own phase
        (a node that rejoins takes its index's place in the cycles it takes part in), and
        ``hook(node)`` runs at each tick before the node's push leaves. Plain ticks pay
        nothing for either."""
        self.phase[:] = 0.0
        self._aligned = True
        self._before_push_hook = hook
        self._tick_callbacks = (self._cycle_tick,)
        # one cycle's ticks in index order whenever they were queued: a priority between
        # NORMAL and LATE per node (simpy orders an instant's events by priority, then by
        # when they were queued)
        n = self.phase.size
        self._tick_priority = [NORMAL + (node + 1) / (n + 2) for node in range(n)]
        if self._started:  # the ticks already queued, again at the aligned instants
            for node in np.flatnonzero(self.active).tolist():
                self._timer_generation[node] += 1
                self._schedule_tick(node)

    def cycle_instant(self, when: float) -> float | None:
        """See the base class: with aligned ticks the grid of their instants."""
        if not self._aligned:
            return None
        return grid_instant(self._cycle_at, self.period, when)

    def _schedule_aligned_tick(self, node: int) -> None:
        """A tick at the common grid's next instant: the float every ticking node computes
        (the last cycle's instant plus Δ, added up as their re-queued ticks add it), not
        k·Δ, which differs from it in the last bits after many cycles and would put the
        node before or after everyone else."""
        env = self._env
        when = self._cycle_at + self.period
        while when <= env.now:
            when += self.period
        tick = _Tick(node, self._timer_generation[node])
        tick.env = env
        tick.callbacks = self._tick_callbacks
        env.schedule_at(tick, when, self._tick_priority[node])

    def _cycle_tick(self, tick: _Tick) -> None:
        """A tick under :meth:`run_cycles`: :meth:`_tick` with the hook first and the next
        tick queued at the node's place in the cycle (written out again so that the plain
        tick pays for neither)."""
        env = self._env
        self._cycle_at = env.now
        node = tick.node
        if tick.generation != self._timer_generation[node]:
            return
        self._before_push_hook(node)
        peer = self.network.random_online_neighbour(node, self._peer_uniform)
        if peer >= 0:
            self.exchanges += 1
            self.network.send(
                node, peer, kind=PUSH, payload=self._outgoing(node),
                on_deliver=self._deliver_push, size=self.message_size,
            )  # fmt: skip
        tick.callbacks = self._tick_callbacks
        env.schedule_at(tick, env.now + self.period, self._tick_priority[node])

    def _tick(self, tick: _Tick) -> None:
        """A node's tick: the push to a random online neighbour, and the next tick one
        period on (compiled twin: :func:`netsim.protocols.gossip_exact.tick`)."""
        node = tick.node
        if tick.generation != self._timer_generation[node]:
            return
        peer = self.network.random_online_neighbour(node, self._peer_uniform)
        if peer >= 0:
            self.exchanges += 1
            self.network.send(
                node,
                peer,
                kind=PUSH,
                payload=self._outgoing(node),
                on_deliver=self._deliver_push,
                size=self.message_size,
            )
        # the same event again, one period on: env.schedule(tick, NORMAL, period) at the instant
        # (tests/test_sim.py holds the two to the same order)
        tick.callbacks = self._tick_callbacks
        env = self._env
        env.schedule_at(tick, env.now + self.period)

    def _heard(self, node: int) -> None:
        if not self.is_active[node]:
            self._schedule_tick(node)
            self._activate(node)

    def activate(self, node: int) -> None:
        """Let online ``node`` take part at once: its ticks begin (see the base class)."""
        self._heard(node)

    def _on_push(self, transfer: Transfer) -> None:
        """A push arrived: merged, the receiver active again, the pull sent back (compiled
        twin: :func:`netsim.protocols.gossip_exact.deliver`)."""
        peer, sender = transfer.dst, transfer.src
        self._incoming(peer, transfer.payload, sender, transfer)
        if not self.is_active[peer]:  # _heard, inlined (once per message)
            self._heard(peer)  # after the merge: listeners see the fresh value
        if not self.pull:
            return
        # the pull: the peer answers the request that came with the push
        self.network.send(
            peer,
            sender,
            kind=PULL,
            payload=self._outgoing(peer),
            on_deliver=self._deliver_pull,
            size=self.message_size,
        )

    def _on_pull(self, transfer: Transfer) -> None:
        """A pull's answer arrived: merged, the receiver active again (compiled twin:
        :func:`netsim.protocols.gossip_exact.deliver`)."""
        node = transfer.dst
        self._incoming(node, transfer.payload, transfer.src, transfer)
        if not self.is_active[node]:  # _heard, inlined
            self._heard(node)

    # --- the compiled exact core ------------------------------------------------------------

    def exact_support(self, run: ExactRun) -> ExactSupport:
        """Compiled: the ticks and exchanges of a started engine on its own phases, carrying
        at most one application that answers ``carried`` on the same transport, whose
        activation listeners (if any) are its applications'."""
        if self._aligned:
            return ExactSupport(False, "a gossip engine on a common grid has no compiled form")
        if isinstance(self.rule, _Silent) and self.rules:
            return ExactSupport(False, "a gossip engine that was not started")
        rules = self.rules
        members = list(run.components.values())
        answers = [_answer(rule, run) for rule in rules]
        if any(not a.ok and rule in members for rule, a in zip(rules, answers, strict=True)):
            return ExactSupport(True, role="gossip")  # the application's own answer says why
        if len(rules) > 1 or any(a.role != "carried" or not a.ok for a in answers):
            return ExactSupport(
                False, "the compiled core carries one broadcast or walk service in gossip messages"
            )
        if any(getattr(rule, "network", self.network) is not self.network for rule in rules):
            return ExactSupport(False, "a gossip application on another transport")
        owners = [getattr(listener, "__self__", None) for listener in self._activation_listeners]
        if any(owner not in rules for owner in owners):
            return ExactSupport(
                False, "a gossip engine with activation listeners of no compiled form"
            )
        return ExactSupport(True, role="gossip")

    def attach_core(self, core: Any) -> None:
        """Hand the compiled core the ticks queued on SimPy, the peer draws, the timer
        generations, phases and active flags (as arrays the kernel shares), Δ, the message
        size and whether to pull; the core returns to :meth:`core_activated` for the
        activation listeners."""
        self._timer_generation = np.array(self._timer_generation, dtype=np.int64)
        self._core = core
        self._peer_uniform = core.take_draws(PEER_AT, self._peer_uniform)
        settings = core.settings
        settings[PERIOD], settings[MESSAGE_SIZE] = self.period, self.message_size
        settings[PULLS] = 1.0 if self.pull else 0.0
        settings[LISTENERS] = 1.0 if self._activation_listeners else 0.0
        core.run_gossip(self, (self.phase, self._timer_generation, self.active))
        for time, _priority, event_id, event in core.take_simpy_events(
            lambda event: isinstance(event, _Tick)
        ):
            core.insert(time, event_id, TICK, event.node, event.generation)

    def core_activated(self, node: int) -> None:
        """The compiled core delivered a fresh message to rejoined ``node`` (its first tick is
        queued, its flag set): the Python flags and the activation listeners."""
        self._activate(node)

    def core_finished(self) -> None:
        """The run's end on the compiled core: the flags list from its array."""
        self.is_active[:] = self.active.tolist()


def _answer(component: Any, run: ExactRun) -> ExactSupport:
    """``component``'s :meth:`~netsim.component.Component.exact_support` answer, asked only
    of a class that answers itself (no for anything else)."""
    if "exact_support" not in type(component).__dict__:
        return ExactSupport(False, "no compiled form")
    return component.exact_support(run)


def _no_hook(node: int) -> None:
    """The hook of :meth:`PushPullGossip.run_cycles` until one is given."""


class _Silent:
    """Gossip without an application: exchanges carry nothing (useful to measure traffic)."""

    def outgoing(self, node: int) -> None:
        return None

    def incoming(self, node: int, value: object, sender: int, transfer: object) -> None:
        return None


class CompositeRule:
    """Several protocols sharing one push-pull gossip: each message carries every value."""

    def __init__(self, rules: list[GossipRule]) -> None:
        self.rules = rules

    def outgoing(self, node: int) -> tuple[Any, ...]:
        return tuple(rule.outgoing(node) for rule in self.rules)

    def incoming(self, node: int, value: Any, sender: int, transfer: Transfer) -> None:
        for rule, part in zip(self.rules, value, strict=True):
            rule.incoming(node, part, sender, transfer)
