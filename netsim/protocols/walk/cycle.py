"""What a cycle strategy of the walk service is, and netsim's walk handling that its exact and
rounds strategies share (Hegedűs et al. 2016 Alg. 2).

The service core (:mod:`netsim.protocols.walk.service`) holds the walks: tokens, forwarding,
churn, the local copies ``rw`` and the tables. A cycle strategy (:class:`WalkCycle`) holds
everything the gossip mode decides: its representation of ``rwprop``, how updates are
exchanged (one message at a time, or a round's in a compiled kernel), how timeouts are noticed,
and the walk's moves where a variant departs from Alg. 2 (:meth:`WalkCycle.receive`,
:meth:`WalkCycle.forward`). The strategies are:

- :class:`~netsim.protocols.walk.cycle_exact.ExactCycle`: exact (event-driven) gossip, one
  timer per node;
- :class:`~netsim.protocols.walk.cycle_rounds.RoundsCycle`: round-based gossip, one timeout scan
  per round;
- :class:`~netsim.protocols.walk.cycle_authors.AuthorsCycle`: the authors' cycle
  (``walk.cycle: authors``, ``docs/walk-variants.md``) in either gossip mode.

A strategy sees the core through :class:`WalkCore`, the members it may use.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, Protocol

import numpy as np

from netsim.contracts import Transport, WalkAgent
from netsim.network.links import Transfer
from netsim.network.nodes import NodeStates
from netsim.protocols.gossip import GossipEngine
from netsim.protocols.walk.config import WalkVariant
from netsim.protocols.walk.kernels import AGE_TOLERANCE, PROP_RECORD
from netsim.protocols.walk.ledger import WalkLedger
from netsim.protocols.walk.tokens import WalkToken
from netsim.rng import BlockDraws
from netsim.sim import Simulation

NO_AGE_ERRORS = np.zeros(0)


class WalkCore(Protocol):
    """The walk service's members a cycle strategy uses (the service core implements it)."""

    sim: Simulation
    network: Transport
    nodes: NodeStates
    agent: WalkAgent
    n: int
    timeout: float
    transfer_time: float
    rw_steps: np.ndarray
    rw_state: list[Any]
    forwarding: dict[int, list[WalkToken]]
    suspended: dict[int, list[WalkToken]]
    gossip: GossipEngine | None
    ledger: WalkLedger
    peer_draw: BlockDraws

    def active(self, node: int) -> bool: ...
    def fresh_update_id(self) -> int: ...
    def launch(
        self, node: int, steps: int, reason: str, i: int, update: int, update_steps: int
    ) -> None: ...
    def forward(self, token: WalkToken) -> None: ...
    def send(self, token: WalkToken) -> None: ...
    def end(self, token: WalkToken, node: int, reason: str) -> None: ...
    def carried(self, state: Any) -> bool: ...
    def on_update_timeout(self, node: int, i: int) -> None: ...
    def on_receive_random_walk(self, transfer: Transfer) -> None: ...
    def on_transfer_lost(self, transfer: Transfer, reason: str) -> None: ...


def continued_state(core: WalkCore, node: int, token: WalkToken) -> Any:
    """The state ``node`` updates and forwards: its local copy, unless that is an older copy
    than the walk that arrived and the agent refuses to continue from it again (a privacy
    ceiling, :meth:`~netsim.contracts.WalkAgent.continues`): the walk that arrived then."""
    state = core.rw_state[node]
    if state is token.state or core.agent.continues(node, state, core.carried(state)):
        return state
    return token.state


def new_prop_records(n: int) -> np.ndarray:
    """Every node's ``rwprop`` as :data:`PROP_RECORD` records: the bootstrap update (id 0),
    which never times out and has fewer steps than any ``rw``."""
    prop = np.zeros(n, dtype=PROP_RECORD)
    prop["steps"] = -n - 1
    prop["special"] = True
    return prop


class WalkCycle(ABC):
    """One cycle strategy: the state of ``rwprop``, its exchange, its timeouts, and the walk's
    moves (Alg. 2 lines 25–31 and ``forwardRandomWalk`` unless a subclass says otherwise).

    ``prop_steps``, ``prop_id``, ``prop_origin`` and ``prop_special`` index a node's
    ``rwprop``; ``prop_origin`` is the update's virtual creation time on the node's clock, so
    that age() = now − origin (module docstring of :mod:`netsim.protocols.walk`).
    """

    def __init__(
        self,
        core: WalkCore,
        variant: WalkVariant,
        age_error_rng: np.random.Generator | None,
        prop: np.ndarray,
    ) -> None:
        self.core = core
        self.sim = core.sim
        self._env = core.sim.env
        self.timeout = core.timeout
        self.variant = variant
        self.authors_rule = variant.replace_rule == "authors"  # read on every gossip merge
        # drawn only when there is an error, so exact-age runs keep their streams unchanged
        self._age_error_rng = age_error_rng
        self._age_error_draw = (
            BlockDraws(age_error_rng.random) if age_error_rng is not None else None
        )
        self._active = core.active  # bound once: read at every adoption in exact mode
        self.prop = prop  # the views below are fields of this record array
        self.prop_steps: Any = prop["steps"]
        self.prop_id: Any = prop["id"]
        self.prop_origin: Any = prop["origin"]
        self.prop_special: Any = prop["special"]
        # the last timeout circle i handled for the current update
        self.fired_i: Any = prop["fired"]

    # --- the gossip engine --------------------------------------------------------------------

    def attach(self, gossip: GossipEngine) -> WalkCycle:
        """Run on ``gossip``: the strategy for its mode (this one unless it hands over)."""
        return self

    def outgoing(self, node: int) -> Any:
        """Exact mode's gossip value: none unless the strategy's exchanges are messages."""
        return None

    def incoming(self, node: int, value: Any, sender: int, transfer: Transfer) -> None:
        """Exact mode's merge: nothing unless the strategy's exchanges are messages."""
        return None

    def round_exchange(
        self, initiators: np.ndarray, peers: np.ndarray, pull_lost: np.ndarray
    ) -> None:
        """One round's pushes and pulls (round-based gossip)."""
        return None

    def round_tick(self, active: np.ndarray) -> None:
        """After a round's exchanges (round-based gossip)."""
        return None

    # --- rwprop -------------------------------------------------------------------------------

    @abstractmethod
    def store(self, node: int, steps: int, update: int, age: float) -> None:
        """``node`` adopts the update (``steps``, ``update``) whose age is ``age`` now."""

    def new_update(self, node: int, steps: int) -> None:
        """``node`` makes a new update with ``steps`` (age 0, a fresh id)."""
        self.store(node, steps, self.core.fresh_update_id(), 0.0)

    def age(self, node: int) -> float:
        """``rwprop.age()`` at ``node`` now (time on nodes and links since its creation)."""
        return self._env.now - self.prop_origin[node]

    def timed_out(self, node: int) -> bool:
        """Has the local update reached age δ (the bootstrap update never does)?"""
        return not self.prop_special[node] and self.age(node) >= self.timeout

    def _next_i(self, node: int) -> int:
        """The next i whose timeout i·δ has not fired at ``node`` for its current update: the
        smallest i ≥ 1 with i·δ not below the age (up to :data:`AGE_TOLERANCE`), so that a
        timeout due at this very instant still fires (each i fires once, in order)."""
        return max(math.ceil((self.age(node) - AGE_TOLERANCE) / self.timeout), 1)

    def _round_age_errors(self, count: int) -> np.ndarray:
        """One age error per message of a round (pushes, then pulls), used if adopted."""
        if self._age_error_rng is None:
            return NO_AGE_ERRORS
        return (self._age_error_rng.random(count) - 0.5) * self.variant.age_error

    # --- timeouts and churn -------------------------------------------------------------------

    @abstractmethod
    def schedule_timeout(self, node: int, i: int | None = None) -> None:
        """Arrange ``onUpdateTimeout(i)`` for ``node``'s current update (next i if not given)."""

    def on_leave(self, node: int) -> None:
        """``node`` went offline: its pending timeout checks are off."""
        return None

    # --- the walk -----------------------------------------------------------------------------

    def launched(self, token: WalkToken, node: int) -> None:
        """A walk was (re)started at ``node`` (before it is logged and forwarded)."""
        return None

    def forward(self, token: WalkToken) -> None:
        """``forwardRandomWalk`` at an online holder: send the walk at once."""
        self.core.send(token)

    def receive(self, token: WalkToken, node: int, forced: bool) -> None:
        """``onReceiveRandomWalk`` lines 25–31 for a walk one step on at ``node``: keep it as
        the local copy if it has more steps (line 28), then forward the local best copy with a
        new update if the node's update has fewer steps, has timed out or is the one this walk
        restarted (``forced``, §4.4); otherwise the walk ends ("dropped") (compiled twin, with
        the service's ``on_receive_random_walk``: :func:`netsim.protocols.walk.steps.arrive`)."""
        core = self.core
        rw_steps = core.rw_steps
        now = self._env.now
        if rw_steps[node] < token.steps:
            rw_steps[node] = token.steps
            core.rw_state[node] = token.state
        if self.prop_steps[node] < rw_steps[node] or self.timed_out(node) or forced:
            # forward the local best copy (it is the arriving walk unless an older copy had
            # more steps: choice 1)
            token.steps = int(rw_steps[node])
            self.new_update(node, token.steps)
            token.update = int(self.prop_id[node])
            token.state = core.agent.visit(
                node, continued_state(core, node, token), token.steps, token.walk, now
            )
            core.rw_state[node] = token.state
            token.restart_of = -1
            core.ledger.step(now, token.walk, token.steps, node)
            core.forward(token)
        else:
            core.end(token, node, "dropped")
