"""The network budget: a record is used until some observer's composed loss would pass it.

Under ``privacy: {model: network, budget: network}`` the learning section's (ε, δ) is not each
record's local-DP budget but a ceiling on what any node — or any configured coalition — may
learn about it from the models it receives (SPEC §8.4; Cyffers, Bellet, Upadhyay, ICML 2024
calibrate their network rows the same way, by the worst pair). :class:`LineageCeiling` decides,
before each noisy step, whether the visited node's unit may contribute, and, before a walk
continues from a state that was handed on already (a restart from a local copy, a node's visit
of its older copy), whether that branch may be made, so that at the end of the run every
pair's path-known RDP slope (:func:`~netsim.privacy.walk_pairwise.path_known_slopes`) is within
the slope B whose ε at the run's δ is the budget (:func:`slope_for_epsilon`).

**The bound it keeps**, an upper bound on the path-known accountant's that no later event can
raise past B. Contribution i of unit u (state x, displacement s = η·Δ) is charged against
observer v by its *stretch*: the states from x down the lineage to the first of

- v's first reception of one of them,
- the state before u's next contribution below x, and
- a *cut*: a state the walk continued from again (its second child, or its reception after it
  had a child),

at cost s² / (2 V), V the noise variance summed over the stretch, under amplification by
iteration (Feldman et al. 2018) — s²/(2σ_x²), one Gaussian release, without it. The
path-known accountant gives v the lowest common ancestors of its receptions; each is a cut, so
each of its factors' stretches contains one of these, and it pools them optimally: their sum
bounds it. Stretches ended by u's next contribution or by a cut are charged to every observer
(the pessimistic part), so a later reception cannot raise them.

**What it admits.** A unit's bound is the sum of its closed stretches' charges (the worst
observer's) plus one full contribution, 1/(2z²), for each of its stretches still open: an
open stretch costs at most that whatever happens to it. A contribution is admitted iff the
bound, with the stretch it closes (the unit's open contribution above the visited state)
charged and its own reserve added, is within B. A cut at a state y raises, for each unit, at
most the one closed stretch that spans y (to s²/(2V(x→y)) for every observer that had not
received before y); it is admitted iff every unit's bound stays within B, and open stretches
through y close at y within their reserve. A refused cut is not made: the walk service does
not restart from that copy, and a node visits the walk that arrived rather than its older
copy. A state no one holds a child of, and no other walk carries, is continued from freely:
nobody observes both sides of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from netsim.errors import SimulationError

#: Relative slack on the budget slope (the bisection of :func:`slope_for_epsilon` is exact to
#: about 1e-15; summing stretches in another order differs by a few ulps).
BUDGET_TOLERANCE = 1e-12


@njit(cache=True)
def _is_ancestor(ancestor: int, state: int, parent: np.ndarray, depth: np.ndarray) -> bool:
    """Whether ``ancestor`` is ``state`` or one of its ancestors."""
    target = depth[ancestor]
    while state >= 0 and depth[state] > target:
        state = parent[state]
    return state == ancestor


@njit(cache=True)
def _first_receptions(
    top: int,
    bottom: int,
    parent: np.ndarray,
    depth: np.ndarray,
    cumvar: np.ndarray,
    rec_head: np.ndarray,
    rec_node: np.ndarray,
    rec_next: np.ndarray,
    member_ptr: np.ndarray,
    member_view: np.ndarray,
    first_var: np.ndarray,
    first_depth: np.ndarray,
    touched: np.ndarray,
) -> int:
    """Each view's first reception on the stretch from ``top`` down to ``bottom`` (its
    ancestor-or-self): the noise variance from ``top`` to it (``first_var``, −1 for none) and
    its depth; returns how many views received (listed in ``touched``). A coalition's first
    reception is its members' first."""
    above = cumvar[parent[top]] if parent[top] >= 0 else 0.0
    count = 0
    x = bottom
    while True:
        r = rec_head[x]
        variance = cumvar[x] - above
        while r >= 0:
            node = rec_node[r]
            view = node
            j = member_ptr[node]
            while True:  # the node, then its coalitions
                if first_var[view] < 0:
                    touched[count] = view
                    count += 1
                first_var[view] = variance
                first_depth[view] = depth[x]
                if j == member_ptr[node + 1]:
                    break
                view = member_view[j]
                j += 1
            r = rec_next[r]
        if x == top:
            break
        x = parent[x]
    return count


@njit(cache=True)
def _cut(
    cut_at: int,
    apply: bool,
    limit: float,
    contribution_slope: float,
    amplified: bool,
    parent: np.ndarray,
    depth: np.ndarray,
    cumvar: np.ndarray,
    unit: np.ndarray,
    shift: np.ndarray,
    end: np.ndarray,
    base: np.ndarray,
    cut: np.ndarray,
    rec_head: np.ndarray,
    rec_node: np.ndarray,
    rec_next: np.ndarray,
    member_ptr: np.ndarray,
    member_view: np.ndarray,
    common: np.ndarray,
    extra: np.ndarray,
    excluded: np.ndarray,
    open_count: np.ndarray,
    first_var: np.ndarray,
    first_depth: np.ndarray,
    touched: np.ndarray,
    row: np.ndarray,
    closed: np.ndarray,
) -> int:
    """A cut at ``cut_at`` (module docstring): with ``apply`` False, 1 if every unit's bound
    stays within ``limit``, else −1; with ``apply`` True, the charges made, and how many open
    stretches it closed (their states in ``closed``). Walks up from the cut to the nearest
    earlier cut (no stretch spans one)."""
    y = cut_at
    x = y
    count_closed = 0
    while x >= 0:
        if x != y and cut[x]:
            break
        u = unit[x]
        if u >= 0 and shift[x] > 0:
            open_stretch = end[x] < 0
            if open_stretch or (amplified and depth[end[x]] >= depth[y]):
                s2 = shift[x] * shift[x]
                above = cumvar[parent[x]] if parent[x] >= 0 else 0.0
                v_cut = cumvar[y] - above
                new_base = s2 / (2.0 * v_cut) if v_cut > 0 else 0.0
                if not amplified:
                    v_own = cumvar[x] - above
                    new_base = s2 / (2.0 * v_own) if v_own > 0 else 0.0
                bottom = y if open_stretch else end[x]
                count = 0
                if amplified:
                    count = _first_receptions(
                        x, bottom, parent, depth, cumvar, rec_head, rec_node, rec_next,
                        member_ptr, member_view, first_var, first_depth, touched,
                    )  # fmt: skip
                views = extra.shape[1]
                for v in range(views):
                    row[v] = extra[u, v]
                for i in range(count):
                    v = touched[i]
                    q = s2 / (2.0 * first_var[v])
                    if open_stretch:
                        row[v] += q - new_base
                    elif first_depth[v] <= depth[y]:
                        row[v] += base[x] - new_base
                    else:
                        row[v] += base[x] - q
                    first_var[v] = -1.0
                raise_by = new_base if open_stretch else new_base - base[x]
                if apply:
                    common[u] += raise_by
                    for v in range(views):
                        extra[u, v] = row[v]
                    if open_stretch:
                        open_count[u] -= 1
                        closed[count_closed] = x
                        count_closed += 1
                    end[x] = y
                    base[x] = new_base
                elif not open_stretch:
                    worst = 0.0
                    for v in range(views):
                        if not excluded[u, v] and row[v] > worst:
                            worst = row[v]
                    bound = contribution_slope * open_count[u] + (common[u] + raise_by + worst)
                    if bound > limit:
                        return -1
        x = parent[x]
    return count_closed if apply else 1


class LineageCeiling:
    """Per-observer admission of a walk's contributions and branches (module docstring).

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
        self.excluded = np.zeros((units, views), dtype=bool)
        self.excluded[np.arange(units), self.owner] = True
        for k, members in enumerate(self.coalitions):
            self.excluded[np.isin(self.owner, members), nodes + k] = True
        # the coalitions each node is in (CSR), for its receptions
        memberships = [[] for _ in range(nodes)]
        for k, members in enumerate(self.coalitions):
            for node in members.tolist():
                memberships[node].append(nodes + k)
        self.member_ptr = np.zeros(nodes + 1, dtype=np.int64)
        self.member_ptr[1:] = np.cumsum([len(m) for m in memberships])
        self.member_view = np.asarray([v for m in memberships for v in m], dtype=np.int64)
        #: Σ over closed stretches charged to every observer, per unit.
        self.common = np.zeros(units)
        #: What an observer is charged beyond ``common`` (it received within a stretch).
        self.extra = np.zeros((units, views))
        #: Open stretches per unit (each reserves one full contribution), and a list of them.
        self.open_count = np.zeros(units, dtype=np.int64)
        self._open: list[list[int]] = [[] for _ in range(units)]
        # the lineage, per state: parent, depth, noise variance summed from the root
        # (inclusive), the unit that made it and its displacement, its stretch's end (−1:
        # open) and charge to every observer, children, whether it is a cut, receptions
        self.states = 0
        capacity = 1024
        self.parent = np.empty(capacity, dtype=np.int64)
        self.depth = np.empty(capacity, dtype=np.int64)
        self.cumvar = np.empty(capacity)
        self.unit = np.empty(capacity, dtype=np.int64)
        self.shift = np.empty(capacity)
        self.end = np.empty(capacity, dtype=np.int64)
        self.base = np.empty(capacity)
        self.children = np.empty(capacity, dtype=np.int64)
        self.cut = np.empty(capacity, dtype=bool)
        self.rec_head = np.empty(capacity, dtype=np.int64)
        self.rec_node = np.empty(capacity, dtype=np.int64)
        self.rec_next = np.empty(capacity, dtype=np.int64)
        self.receptions = 0
        # scratch of the kernels
        self._first_var = np.full(views, -1.0)
        self._first_depth = np.zeros(views, dtype=np.int64)
        self._touched = np.empty(views, dtype=np.int64)
        self._row = np.empty(views)
        self._closed = np.empty(units, dtype=np.int64)  # at most one per unit per cut
        #: The state the visiting node is about to update (its parent, if it contributes).
        self.visiting_state = -1
        #: Branches refused (a restart from a copy, a visit of an older copy).
        self.refused = 0
        self._pending: tuple[int, int, int, float, np.ndarray, np.ndarray] | None = None

    _STATE_COLUMNS = ("parent", "depth", "cumvar", "unit", "shift", "end", "base", "children",
                      "cut", "rec_head")  # fmt: skip

    def _grow(self, columns: tuple[str, ...], size: int) -> None:
        """Double the capacity of ``columns`` until it holds ``size`` entries."""
        for name in columns:
            old = getattr(self, name)
            if old.size < size:
                setattr(self, name, np.concatenate([old, np.empty_like(old)]))

    def made(self, serial: int, parent: int, unit: int, shift: float, noise_std: float) -> None:
        """The walk made state ``serial`` from ``parent`` (−1: an initial model); ``unit``
        contributed (−1: none) with displacement ``shift`` and noise ``noise_std``."""
        if serial != self.states:
            raise SimulationError(f"privacy.budget network: state {serial} made out of order")
        self._grow(self._STATE_COLUMNS, serial + 1)
        self.states += 1
        if parent >= 0:
            self.children[parent] += 1
            if self.children[parent] > 1 and not self.cut[parent]:
                raise SimulationError(
                    f"privacy.budget network: state {parent} was continued from twice without "
                    "the ceiling's consent (a walk protocol must ask before it branches)"
                )
        before = self.cumvar[parent] if parent >= 0 else 0.0
        self.parent[serial] = parent
        self.depth[serial] = self.depth[parent] + 1 if parent >= 0 else 0
        self.cumvar[serial] = before + noise_std**2
        self.unit[serial] = unit
        self.shift[serial] = shift
        self.end[serial] = -1
        self.base[serial] = 0.0
        self.children[serial] = 0
        self.cut[serial] = False
        self.rec_head[serial] = -1
        if unit < 0:
            return
        pending = self._pending
        if pending is None or pending[0] != unit or pending[1] != parent:
            raise SimulationError(
                f"privacy.budget network: unit {unit} contributed to state {serial} without "
                "being admitted"
            )
        _, _, closing, base, observers, costs = pending
        if closing >= 0:
            # the stretch of the unit's open contribution above closes: charge what admits
            # computed
            self.common[unit] += base
            self.extra[unit, observers] += costs - base
            self.end[closing] = parent
            self.base[closing] = base
            self._open[unit].remove(closing)
            self.open_count[unit] -= 1
        self._pending = None
        self._open[unit].append(serial)
        self.open_count[unit] += 1

    def received(self, node: int, serial: int) -> None:
        """``node`` received state ``serial``: a state with a child must be a cut."""
        if self.children[serial] > 0 and not self.cut[serial]:
            raise SimulationError(
                f"privacy.budget network: node {node} received state {serial}, which was "
                "continued from already, without the ceiling's consent"
            )
        head = self.rec_head[serial]
        if head >= 0 and self.rec_node[head] == node:
            return
        self._grow(("rec_node", "rec_next"), self.receptions + 1)
        r = self.receptions
        self.rec_node[r] = node
        self.rec_next[r] = head
        self.rec_head[serial] = r
        self.receptions += 1

    def visiting(self, node: int, serial: int) -> None:
        """``node`` is about to update state ``serial`` (it holds it)."""
        self.received(node, serial)
        self.visiting_state = serial

    def _closing_state(self, unit: int, parent: int) -> int:
        """The unit's open contribution that ``parent`` descends from (−1: none): its stretch
        closes when the unit contributes to a child of ``parent``."""
        for state in self._open[unit]:
            if _is_ancestor(state, parent, self.parent, self.depth):
                return state
        return -1

    def admits(self, unit: int) -> bool:
        """Whether ``unit`` may contribute to a child of the visited state: the largest bound
        over observers, with the stretch it closes charged and a full contribution reserved
        for each stretch left open, stays within the budget."""
        parent = self.visiting_state
        self._pending = None
        closing = self._closing_state(unit, parent)
        reserve = self.contribution_slope * (self.open_count[unit] + (closing < 0))
        worst = float(reserve)
        if closing >= 0:
            base, observers, costs = self._closing(closing, parent)
            row = self.extra[unit].copy()
            row[observers] += costs - base
            row[self.excluded[unit]] = -np.inf
            worst += self.common[unit] + base + float(row.max(initial=0.0))
        else:
            base, observers, costs = 0.0, np.zeros(0, dtype=np.int64), np.zeros(0)
            row = np.where(self.excluded[unit], -np.inf, self.extra[unit])
            worst += self.common[unit] + float(row.max(initial=0.0))
        if worst <= self.limit:
            self._pending = (unit, parent, closing, base, observers, costs)
            return True
        return False

    def _closing(self, top: int, bottom: int) -> tuple[float, np.ndarray, np.ndarray]:
        """The stretch of the contribution at ``top`` closed at ``bottom``: its cost to an
        observer that did not receive within it (``base``), and the observers (nodes, then
        coalitions) that did, with their costs (the stretch ending at their first
        reception)."""
        shift = float(self.shift[top])
        above = self.cumvar[self.parent[top]] if self.parent[top] >= 0 else 0.0
        if not self.amplified:
            # each contribution reaching an observer is one Gaussian release, charged to all
            own = self.cumvar[top] - above
            full = shift**2 / (2.0 * own) if own > 0 else 0.0
            return full, np.zeros(0, dtype=np.int64), np.zeros(0)
        total = self.cumvar[bottom] - above
        base = shift**2 / (2.0 * total) if total > 0 else 0.0
        count = _first_receptions(
            top, bottom, self.parent, self.depth, self.cumvar, self.rec_head, self.rec_node,
            self.rec_next, self.member_ptr, self.member_view, self._first_var,
            self._first_depth, self._touched,
        )  # fmt: skip
        observers = self._touched[:count].copy()
        variance = self._first_var[observers]
        self._first_var[observers] = -1.0
        return base, observers, shift**2 / (2.0 * variance)

    def continues(self, serial: int, carried: bool) -> bool:
        """Whether a walk may continue from state ``serial`` again (a restart from a node's
        local copy, or a node's visit of its older copy); ``carried``: another walk carries
        it still. A state with no child that no other walk carries is free; otherwise it is
        a cut, made iff every unit's bound stays within the budget."""
        if self.cut[serial] or (self.children[serial] == 0 and not carried):
            return True
        arguments = (
            self.limit, self.contribution_slope, self.amplified, self.parent, self.depth,
            self.cumvar, self.unit, self.shift, self.end, self.base, self.cut, self.rec_head,
            self.rec_node, self.rec_next, self.member_ptr, self.member_view, self.common,
            self.extra, self.excluded, self.open_count, self._first_var, self._first_depth,
            self._touched, self._row, self._closed,
        )  # fmt: skip
        if _cut(serial, False, *arguments) < 0:
            self.refused += 1
            return False
        for state in self._closed[: _cut(serial, True, *arguments)].tolist():
            self._open[int(self.unit[state])].remove(state)
        self.cut[serial] = True
        return True
