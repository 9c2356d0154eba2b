"""The walk's cycle in exact (event-driven) gossip: one message at a time, one timer per node
(Hegedűs et al. 2016 Alg. 2, ``onReceiveRWProps`` and ``onUpdateTimeout``; choice 4 of
:mod:`netsim.protocols.walk`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from netsim.network.links import Transfer
from netsim.protocols.gossip import GossipEngine
from netsim.protocols.walk.config import WalkVariant
from netsim.protocols.walk.cycle import WalkCore, WalkCycle
from netsim.protocols.walk.cycle_rounds import RoundsCycle
from netsim.protocols.walk.kernels import AGE_TOLERANCE, adopted_circles, replaces
from netsim.sim import Call


class ExactCycle(WalkCycle):
    """Exact mode: ``rwprop`` merged message by message, timeouts by per-node timers.

    Until it is attached it works on the record array it was given; attached to exact gossip
    it holds ``rwprop`` and its timers as Python lists (:meth:`_hold_state_in_lists`);
    attached to round-based gossip it hands the record array over to a
    :class:`~netsim.protocols.walk.cycle_rounds.RoundsCycle`.
    """

    def __init__(
        self,
        core: WalkCore,
        variant: WalkVariant,
        age_error_rng: np.random.Generator | None,
        prop: np.ndarray,
    ) -> None:
        super().__init__(core, variant, age_error_rng, prop)
        n = core.n
        # each node's gossip value (steps, id, origin, special) as one tuple, made when the
        # node adopts an update rather than at every message (docs/performance.md)
        self._rwprop: list[tuple[int, int, float, bool]] = [(-n - 1, 0, 0.0, True)] * n
        self._timer_generation: Any = np.zeros(n, dtype=np.int64)
        self._timer_due: Any = np.full(n, np.inf)  # when the pending timeout check fires

    def attach(self, gossip: GossipEngine) -> WalkCycle:
        """Exact gossip: this strategy, on lists; round-based gossip: a rounds strategy on the
        same record array."""
        if gossip.round_based:
            return RoundsCycle(self.core, self.variant, self._age_error_rng, self.prop)
        self._hold_state_in_lists()
        return self

    def _hold_state_in_lists(self) -> None:
        """Exact mode reads and writes one node's ``rwprop`` and timer at every message and
        timer: as Python lists that is several times cheaper than numpy scalars
        (docs/performance.md).
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

    # --- onReceiveRWProps -------------------------------------------------------------------

    def outgoing(self, node: int) -> tuple[int, int, float, bool]:
        """Gossip value: (steps, id, origin, is the bootstrap update). The origin is the
        update's virtual creation time: its age when sent is ``transfer.sent_at − origin``."""
        return self._rwprop[node]

    def incoming(self, node: int, value: Any, sender: int, transfer: Transfer) -> None:
        """``onReceiveRWProps``: line 14 with accept-once by id (§4.4), or the authors' rule
        (:class:`~netsim.protocols.walk.config.WalkVariant`); an adopted age gets the age
        error added (compiled twin: :func:`netsim.protocols.walk.compiled.merge`)."""
        steps, update, origin, special = value
        if special:
            return  # the bootstrap update carries no information
        if update == self.prop_id[node] and not self.authors_rule:
            return  # accepted once: a timed-out update is never revived
        now = self._env.now
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
            self.store(node, steps, update, age)

    def store(self, node: int, steps: int, update: int, age: float) -> None:
        """Adopt the update; re-time the node's check only if the update is due before it
        (compiled twin: :func:`netsim.protocols.walk.compiled.store`)."""
        same = update == self.prop_id[node] and not self.prop_special[node]
        if same:  # re-adopted (replace_rule: authors): circles fired here stay fired
            fired = adopted_circles(True, int(self.fired_i[node]), age, self.timeout)
        self.prop_steps[node] = steps
        self.prop_id[node] = update
        origin = self.prop_origin[node] = self._env.now - age
        self.prop_special[node] = False
        self._rwprop[node] = (steps, update, origin, False)
        if same:
            self.fired_i[node] = fired
            if self._active(node):
                self.schedule_timeout(node, fired + 1)  # the age moved: re-time the check
            return
        # A pending check notices a changed update when it fires and reschedules; only an
        # update that times out before that check needs a new timer now. So a node has one
        # timer event per δ or so, not one per adoption.
        if self.authors_rule:  # exact mode reads fired_i only when an update is re-adopted
            self.fired_i[node] = self._next_i(node) - 1
        # the next due instant (the update is not the bootstrap one), inlined: once per
        # adoption
        origin = self.prop_origin[node]
        circle = max(math.ceil((self._env.now - origin - AGE_TOLERANCE) / self.timeout), 1)
        if origin + circle * self.timeout < self._timer_due[node] and self._active(node):
            self.schedule_timeout(node)

    # --- onUpdateTimeout --------------------------------------------------------------------

    def schedule_timeout(self, node: int, i: int | None = None) -> None:
        """Schedule ``onUpdateTimeout(i)`` for the current update (next i when not given;
        compiled twin: :func:`netsim.protocols.walk.compiled.schedule_timeout`)."""
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

    def owns_timer(self, event: object) -> bool:
        """Is ``event`` a timeout timer this cycle queued on SimPy (the compiled core takes
        them over)?"""
        return isinstance(event, Call) and getattr(event, "callback", None) == self._on_timer

    def _on_timer(self, node: int, generation: int, update: int, i: int) -> None:
        """A node's timeout timer: ``onUpdateTimeout(i)`` when it still applies, then the
        next circle (compiled twin: :func:`netsim.protocols.walk.compiled.timer`)."""
        if generation != self._timer_generation[node]:
            return
        self._timer_due[node] = np.inf
        if not self._active(node):
            return
        if update != self.prop_id[node]:
            self.schedule_timeout(node)  # the update changed: check the new one's timeouts
            return
        self.core.on_update_timeout(node, i)
        # the next circle; i is passed on, not recomputed from a rounded age
        self.schedule_timeout(node, i + 1)

    def on_leave(self, node: int) -> None:
        """The node's pending timer is cancelled."""
        self._timer_generation[node] += 1
        self._timer_due[node] = np.inf
