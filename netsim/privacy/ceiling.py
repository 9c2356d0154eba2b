"""The network budget: a record is used until some observer's composed loss would pass it.

Under ``privacy: {model: network, budget: network}`` the learning section's (ε, δ) is not each
record's local-DP budget but a ceiling on what any node — or any configured coalition — may
learn about it from the models it receives (SPEC §8.4; Cyffers, Bellet, Upadhyay, ICML 2024
calibrate their network rows the same way, by the worst pair). :class:`ChainCeiling` decides,
before each noisy step of a walk whose models form one chain (an ideal walk: no restarts, no
copies), whether the visited node's unit may contribute again, so that at the end of the run
every pair's path-known RDP slope (:func:`~netsim.privacy.walk_pairwise.path_known_slopes`) is
within the slope B whose ε at the run's δ is the budget (:func:`slope_for_epsilon`).

The bound it keeps is an upper bound on the path-known accountant's, valid whatever happens
later in the run. Contribution i of unit u (state p_i, displacement s_i = η·Δ) is charged
against observer v by its stretch: from p_i to the state before the first of (v's next
reception, u's next contribution), at cost s_i² / (2 Σ_{j in stretch} σ_j²) under
amplification by iteration (Feldman et al. 2018), s_i² / (2σ_{p_i}²) — one Gaussian release —
without it. The path-known accountant pools these stretches optimally, so their sum bounds it;
a stretch closed by u's next contribution is charged to every observer whether or not it ever
receives the model again (the pessimistic part). When u is about to contribute again the
stretch of its last contribution closes for every observer at once, so the bound of every pair
(v, u) is then known: the new contribution is admitted iff the largest over v of that bound,
plus the new contribution's worst cost (v the next holder: s²/(2σ²) = 1/(2z²)), is at most B.
Between two contributions of u every pair's bound only falls, so no later event can break it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netsim.errors import SimulationError

#: Relative slack on the budget slope (the bisection of :func:`slope_for_epsilon` is exact to
#: about 1e-15; summing stretches in another order differs by a few ulps).
BUDGET_TOLERANCE = 1e-12


class ChainCeiling:
    """Per-observer admission of a walk's contributions (module docstring).

    ``nodes`` nodes observe (every one: the ceiling holds for all, not for a sample), plus
    ``coalitions`` (each observing the union of its members' receptions). A link
    eavesdropper needs no row of its own: every state that crosses the link is received by
    one end, the other having received its parent before, so within each stretch the link's
    first sight costs at most what each end's first reception costs, and its bound is at
    most either end's. ``owner[u]`` is the node of unit u (its own and its coalitions' views
    of it are not bounded).
    ``budget_slope`` is B, ``contribution_slope`` one contribution's cost when observed at
    once, 1/(2z²). ``amplified``: the update maps are contractive."""

    def __init__(
        self,
        nodes: int,
        owner: np.ndarray,
        coalitions: Sequence[Sequence[int]],
        budget_slope: float,
        contribution_slope: float,
        amplified: bool,
    ) -> None:
        self.nodes = nodes
        self.owner = np.asarray(owner, dtype=np.int64)
        units = self.owner.size
        self.coalitions = [np.asarray(c, dtype=np.int64) for c in coalitions]
        views = nodes + len(self.coalitions)
        self.limit = budget_slope * (1.0 + BUDGET_TOLERANCE)
        self.contribution_slope = contribution_slope
        self.amplified = amplified
        # a unit's owner and the coalitions holding it do not count against it
        # (unit, observer): a row per unit, read and written whole at each of its uses
        self.excluded = np.zeros((units, views), dtype=bool)
        self.excluded[np.arange(units), self.owner] = True
        for k, members in enumerate(self.coalitions):
            self.excluded[np.isin(self.owner, members), nodes + k] = True
        #: Σ over closed stretches charged to every observer, per unit.
        self.common = np.zeros(units)
        #: What an observer is charged beyond ``common`` (it received within a stretch).
        self.extra = np.zeros((units, views))
        self.last_state = np.full(units, -1, dtype=np.int64)
        self.last_shift = np.zeros(units)
        # the chain: per state, who received it and the noise variance summed up to it, and
        # the serial of its latest state (−1: none yet)
        self.receiver: list[int] = []
        self.variance: list[float] = []  # cumulative, inclusive
        self.latest = -1
        self._pending: tuple[int, float, np.ndarray, np.ndarray] | None = None

    def made(self, serial: int, parent: int, unit: int, shift: float, noise_std: float) -> None:
        """The walk made state ``serial`` from ``parent`` (−1: the initial model); ``unit``
        contributed (−1: none) with displacement ``shift`` and noise ``noise_std``."""
        if self.latest >= 0 and parent != self.latest:
            raise SimulationError(
                "privacy.budget network follows one chain of models, but state "
                f"{serial} was made from {parent}, not the latest state {self.latest}"
            )
        before = self.variance[-1] if self.variance else 0.0
        self.latest = serial
        self.receiver.append(-1)
        self.variance.append(before + noise_std**2)
        if unit < 0:
            return
        if self.last_state[unit] >= 0:
            # the stretch of the unit's last contribution closes: charge what admits computed
            if self._pending is None or self._pending[0] != unit:
                raise SimulationError(
                    f"privacy.budget network: unit {unit} contributed to state {serial} "
                    "without being admitted"
                )
            _, base, observers, costs = self._pending
            self.common[unit] += base
            self.extra[unit, observers] += costs - base
        self._pending = None
        self.last_state[unit] = len(self.receiver) - 1
        self.last_shift[unit] = shift

    def received(self, node: int, serial: int) -> None:
        """``node`` received state ``serial``, which must be the latest of the chain."""
        if self.latest < 0 or serial != self.latest:
            raise SimulationError(
                "privacy.budget network follows one chain of models, but node "
                f"{node} received state {serial}, not the latest"
            )
        if self.receiver[-1] < 0:
            self.receiver[-1] = node

    def admits(self, unit: int) -> bool:
        """Whether ``unit`` may contribute to the next state (the latest one received by the
        visiting node): the largest bound over observers plus a contribution observed at once
        stays within the budget."""
        worst = self.contribution_slope
        last = int(self.last_state[unit])
        self._pending = None
        if last >= 0:
            base, observers, costs = self._closing(last, float(self.last_shift[unit]))
            row = self.extra[unit].copy()
            row[observers] += costs - base
            row[self.excluded[unit]] = -np.inf
            worst += self.common[unit] + base + float(row.max(initial=0.0))
            self._pending = (unit, base, observers, costs)
        else:
            row = np.where(self.excluded[unit], -np.inf, self.extra[unit])
            worst += self.common[unit] + float(row.max(initial=0.0))
        if worst <= self.limit:
            return True
        self._pending = None
        return False

    def _closing(self, last: int, shift: float) -> tuple[float, np.ndarray, np.ndarray]:
        """The stretch of the contribution at chain position ``last`` closed now: its cost to
        an observer that did not receive within it (``base``), and the observers (nodes, then
        coalitions) that did, with their costs (the stretch ending at their first
        reception)."""
        variance = np.asarray(self.variance[last - 1 :] if last else [0.0, *self.variance])
        since = variance[1:] - variance[0]  # noise from the contribution's state to each state
        receivers = np.asarray(self.receiver[last:], dtype=np.int64)
        if not self.amplified:
            # each contribution reaching an observer is one Gaussian release, charged to all
            full = shift**2 / (2.0 * since[0]) if since[0] > 0 else 0.0
            return full, np.zeros(0, dtype=np.int64), np.zeros(0)
        base = shift**2 / (2.0 * since[-1]) if since[-1] > 0 else 0.0
        seen = receivers >= 0
        nodes, first = np.unique(receivers[seen], return_index=True)
        at = np.flatnonzero(seen)[first]
        costs = shift**2 / (2.0 * since[at])
        member_rows, member_costs = [], []
        for k, members in enumerate(self.coalitions):
            inside = np.isin(nodes, members)
            if inside.any():
                member_rows.append(self.nodes + k)
                member_costs.append(costs[inside].max())
        return (
            base,
            np.concatenate([nodes, np.asarray(member_rows, dtype=np.int64)]),
            np.concatenate([costs, np.asarray(member_costs, dtype=float)]),
        )
