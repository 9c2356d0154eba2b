"""The authors' cycle of the walk service (``walk.cycle: authors``; C1–C7 of
``docs/walk-variants.md``): the gossip cycle and walk handling of Hegedűs et al.'s published
implementation, in both gossip modes.

Each node's cycle checks its timeout before its exchange, with one counter per node; pushes go
into the peer's buffer; every merge draws the age error; rounds mode runs the nodes in index
order, exact mode each node's cycle at its own tick, both without link time. A walk is kept as
the local copy only when it is forwarded, an update made from the local copy carries the copy's
id, a walk is held for δ_rw and handed over if its target is then online, and a node back
online runs its cycle, pulls, and resends the walks it parked.
"""

from __future__ import annotations

import numpy as np

from netsim.protocols.gossip import GossipEngine
from netsim.protocols.walk.config import WalkVariant
from netsim.protocols.walk.cycle import WalkCore, WalkCycle, continued_state
from netsim.protocols.walk.kernels import (
    BUFFER_RECORD,
    authors_cycle,
    authors_exchange,
    authors_merge_visible,
    authors_timeout_check,
    in_index_order,
)
from netsim.protocols.walk.tokens import WALK, WalkToken


class AuthorsCycle(WalkCycle):
    """The authors' cycle: ``rwprop`` (the visible record) plus a buffer and a merge counter
    per node, the timeout checked at each node's own cycle, and the authors' walk handling
    (C4, C5, C7)."""

    def __init__(
        self,
        core: WalkCore,
        variant: WalkVariant,
        age_error_rng: np.random.Generator | None,
        prop: np.ndarray,
    ) -> None:
        super().__init__(core, variant, age_error_rng, prop)
        n = core.n
        # a buffer per node, merge counters, and the nodes whose timeout check a held walk
        # blocks (scratch)
        self.buffer = np.zeros(n, dtype=BUFFER_RECORD)
        self.buffer["steps"] = -n - 1
        self.buffer["special"] = True
        self.merges = np.zeros(n, dtype=np.int64)
        self._guarded = np.zeros(n, dtype=bool)
        self._peer_of = np.full(n, -1, dtype=np.int64)  # scratch of in_index_order
        # the update id the local copy carries (latestModel's stepID): the id of the update
        # the node made when it last forwarded, or a fresh one after a restart
        self.rw_update = np.full(n, -1, dtype=np.int64)
        core.nodes.on_join(self.rejoin)

    def attach(self, gossip: GossipEngine) -> WalkCycle:
        """In exact mode every node's cycle runs at the same instants, in index order, as in
        the authors' simulator (:meth:`tick`); in rounds mode at each round
        (:meth:`round_exchange`)."""
        if not gossip.round_based:
            gossip.run_cycles(self.tick)
        return self

    # --- rwprop and the cycle (C2, C3) --------------------------------------------------------

    def store(self, node: int, steps: int, update: int, age: float) -> None:
        """A new update at ``node`` under the authors' cycle: its buffer is a copy, merged 0
        times; its age is below δ, so the node's counter goes back to i = 1 (C2.4)."""
        origin = self._env.now - age
        self.prop[node] = (steps, update, origin, 0, False)
        self.merges[node] = 0
        self.buffer[node] = (steps, update, origin, 0, False)

    def schedule_timeout(self, node: int, i: int | None = None) -> None:
        """Nothing to arrange: the node checks its own counter when it gossips."""

    def round_exchange(
        self, initiators: np.ndarray, peers: np.ndarray, pull_lost: np.ndarray
    ) -> None:
        """One round as the authors' gossip cycle (:func:`authors_cycle`): the initiators in
        index order, then the restarts their timeout checks made, in that order."""
        self.exchanges(*in_index_order(initiators, peers, self._peer_of))

    def exchanges(self, initiators: np.ndarray, peers: np.ndarray, rejoined: int = -1) -> None:
        """The authors' cycle (:func:`authors_cycle`) for these initiators in this order, and
        the restarts their timeout checks made. A node forwarding the walk that made its
        update does not restart (``isSendingThisStepID``), nor does a ``rejoined`` node that
        parked such a walk when it left."""
        core = self.core
        holders = [
            token.holder
            for token in core.ledger.propagating.values()
            if self.sends_its_update(token)
        ]
        if rejoined >= 0 and any(map(self.sends_its_update, core.suspended.get(rejoined, ()))):
            holders.append(rejoined)
        self._guarded[holders] = True
        errors = self._round_age_errors(3 * initiators.size)
        restarts = authors_cycle(
            initiators, peers, self.prop, self.merges, self.buffer, core.rw_steps,
            self._guarded, errors, self.sim.env.now, self.timeout,
        )  # fmt: skip
        self._guarded[holders] = False
        # the update that timed out, as it was at the check (the exchange after it may have
        # replaced it)
        for node, i, update, update_steps in zip(*(a.tolist() for a in restarts), strict=True):
            steps = max(int(core.rw_steps[node]), 0)
            core.launch(node, steps, "timeout", i, update, update_steps)

    def sends_its_update(self, token: WalkToken) -> bool:
        """``isSendingThisStepID``: is ``token`` the walk that made its holder's update (which
        keeps the holder from restarting, C6)?"""
        return token.update >= 0 and token.update == self.prop_id[token.holder]

    def tick(self, node: int) -> None:
        """Exact mode, the authors' cycle: at each of its gossip ticks a node runs its cycle
        (C2) — the timeout check, then the exchange with a random online neighbour of its
        own choice — at once: the authors' gossip reads and writes the neighbour's records
        directly, with no message and no link time. A node with no online neighbour skips
        it, as theirs does."""
        core = self.core
        peer = core.network.random_online_neighbour(node, core.peer_draw)
        if peer < 0:
            return
        now = self._env.now
        guarded = any(
            token.holder == node and self.sends_its_update(token)
            for token in core.ledger.propagating.values()
        )
        circle = authors_timeout_check(
            self.prop, node, core.rw_steps[node], guarded, now, self.timeout
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
            steps = max(int(core.rw_steps[node]), 0)
            core.launch(node, steps, "timeout", circle, update, update_steps)

    def rejoin(self, node: int) -> None:
        """A node back online in the authors' code (C7 of ``docs/walk-variants.md``): it runs
        its cycle at once if a neighbour is online — the timeout check sees the update it held
        when it left, aged by its time offline, with its counter as it was, then it exchanges
        with that neighbour — then pulls one more neighbour's value straight into its own
        (its own value when none is online), takes part in gossip from now on, and resends
        the walks it parked whose step count is at least its update's (the others end)."""
        core = self.core
        peer = core.network.random_online_neighbour(node, core.peer_draw)
        if peer >= 0:
            self.exchanges(np.array([node], dtype=np.int64), np.array([peer], dtype=np.int64), node)
        source = core.network.random_online_neighbour(node, core.peer_draw)
        if source < 0:
            source = node  # getRandomNeighbor's fallback: the node merges its own value
        errors = self._round_age_errors(1)
        record = self.prop[source]
        authors_merge_visible(
            self.prop, self.merges, node, record["steps"], record["id"], record["origin"],
            self.merges[source], record["special"], self.sim.env.now, self.timeout,
            errors[0] if errors.size else 0.0,
        )  # fmt: skip
        assert core.gossip is not None
        core.gossip.activate(node)  # resumes or ends its parked walks (the core's on_activate)

    # --- the walk (C4, C5) --------------------------------------------------------------------

    def launched(self, token: WalkToken, node: int) -> None:
        """A (re)started walk's model gets new ids (``initIDs``)."""
        token.update = self.rw_update[node] = self.core.fresh_update_id()

    def receive(self, token: WalkToken, node: int, forced: bool) -> None:
        """``onReceiveRandomWalk`` of the authors' code (C4): the arriving walk, one step on,
        against the node's local copy, which wins unless the walk has more steps. The winner
        is forwarded, with a new update, if the node's update has fewer steps, has timed out
        or is the one this walk restarted (``forced``), and only then becomes the local copy
        (a walk that ends here leaves the local copy as it was). An update made from the
        local copy carries the local copy's id."""
        core = self.core
        local_wins = core.rw_steps[node] >= token.steps
        steps = int(core.rw_steps[node]) if local_wins else token.steps
        if not (self.prop_steps[node] < steps or self.timed_out(node) or forced):
            core.end(token, node, "dropped")
            return
        update = int(self.rw_update[node]) if local_wins else -1
        if update < 0:
            update = core.fresh_update_id()
        now = self._env.now
        self.store(node, steps, update, 0.0)
        token.steps = steps
        token.update = update
        state = continued_state(core, node, token) if local_wins else token.state
        token.state = core.agent.visit(node, state, steps, token.walk, now)
        core.rw_steps[node] = steps
        core.rw_state[node] = token.state
        self.rw_update[node] = update
        core.ledger.step(now, token.walk, steps, node)
        core.forward(token)

    def forward(self, token: WalkToken) -> None:
        """The authors' forwarding (C5): hold the walk, then hand it over."""
        self.hold(token)

    def hold(self, token: WalkToken) -> None:
        """The authors' forwarding (C5): the target is chosen now (a random online neighbour,
        the node itself when none is), and the walk is held for δ_rw by its holder, where it
        counts as propagating while the holder is online. A hold that ends on a gossip cycle
        ends after that cycle, as in their simulator, whose cycle runs before the protocol's
        events of its instant: at the cycle's own float, after its events, rather than at a
        float a few bits off it, before or after it by the rounding."""
        core = self.core
        node = token.holder
        target = core.network.random_online_neighbour(node, core.peer_draw)
        token.target = node if target < 0 else target
        token.status = "holding"
        core.forwarding.setdefault(node, []).append(token)
        due = self._env.now + core.transfer_time
        cycle = core.gossip.cycle_instant(due) if core.gossip is not None else None
        if cycle is None:
            self.sim.call_later(core.transfer_time, self.hold_end, token, token.hop)
        else:
            self.sim.call_at_end_of(cycle, self.hold_end, token, token.hop)

    def hold_end(self, token: WalkToken, hop: int) -> None:
        """The end of a hold (C5): the walk is handed over at once if its target is online;
        otherwise a new target is chosen and the walk held for another full δ_rw, without
        asking whether it is still needed. The end of a hold started before a hand-over
        does nothing, and one that falls while the holder is offline is lost (the walk
        stays parked until the holder is back); one started before the holder left and
        came back acts on the walk as held now."""
        core = self.core
        node = token.holder
        if token.hop != hop or token.status != "holding" or not core.nodes.online[node]:
            return
        held = core.forwarding[node]
        held.remove(token)
        if not held:
            del core.forwarding[node]
        target = token.target
        if not core.nodes.online[target]:
            self.hold(token)
            return
        token.hop += 1
        token.status = "transfer"
        core.network.send(
            node,
            target,
            kind=WALK,
            payload=token,
            duration=0.0,
            on_deliver=core.on_receive_random_walk,
            on_lost=core.on_transfer_lost,
        )
