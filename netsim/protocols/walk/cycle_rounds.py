"""The walk's cycle in round-based gossip: a round's exchanges and its timeout scan in compiled
kernels over the ``rwprop`` record array (Hegedűs et al. 2016 Alg. 2; the semantics of
:mod:`netsim.protocols.rounds`, the kernels of :mod:`netsim.protocols.walk.kernels`)."""

from __future__ import annotations

import numpy as np

from netsim.protocols.walk.cycle import WalkCycle
from netsim.protocols.walk.kernels import (
    adopted_circles,
    due_timeouts,
    exchange_round,
    timeout_circle,
)


class RoundsCycle(WalkCycle):
    """Rounds mode: no timers; the last timeout circle handled per node (``fired_i``) is
    compared with the circle each active node's update has reached once per round."""

    def store(self, node: int, steps: int, update: int, age: float) -> None:
        """Adopt the update; the circles it already passed elsewhere count as handled."""
        same = update == self.prop_id[node] and not self.prop_special[node]
        if same:  # re-adopted (replace_rule: authors): circles fired here stay fired
            fired = adopted_circles(True, int(self.fired_i[node]), age, self.timeout)
        self.prop_steps[node] = steps
        self.prop_id[node] = update
        self.prop_origin[node] = self.sim.env.now - age
        self.prop_special[node] = False
        if same:
            self.fired_i[node] = fired
        else:  # the circles this update already passed elsewhere
            self.fired_i[node] = timeout_circle(age, self.timeout)

    def schedule_timeout(self, node: int, i: int | None = None) -> None:
        """The circles passed so far count as handled: :meth:`round_tick` handles the next."""
        self.fired_i[node] = self._next_i(node) - 1

    def round_exchange(
        self, initiators: np.ndarray, peers: np.ndarray, pull_lost: np.ndarray
    ) -> None:
        """``onReceiveRWProps`` for one round's pushes and pulls (compiled, see
        :func:`~netsim.protocols.walk.kernels.exchange_round`)."""
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

    def round_tick(self, active: np.ndarray) -> None:
        """``onUpdateTimeout(i)`` for every ``active`` node whose update's age passed i·δ."""
        nodes, circles = due_timeouts(active, self.prop, self.sim.env.now, self.timeout)
        on_update_timeout = self.core.on_update_timeout
        for node, reached in zip(nodes.tolist(), circles.tolist(), strict=True):
            for i in range(int(self.fired_i[node]) + 1, reached + 1):
                on_update_timeout(node, i)
            self.fired_i[node] = reached
