"""The network budget: a record is used until some observer's composed loss would pass it.

Under ``privacy: {model: network, budget: network}`` the learning section's (ε, δ) is not each
record's local-DP budget but a ceiling on what any node — or any configured coalition — may learn
about it from the models it receives (``docs/explanation/privacy.md``, "Threat models"; Cyffers,
Bellet, Upadhyay, ICML 2024 calibrate their network rows the same way, by the worst pair).
:class:`LineageCeiling` decides, before each noisy step, whether the visited node's unit may
contribute, and, before a walk continues from a state that was handed on already (a restart from a
local copy, a node's visit of its older copy), whether that branch may be made, so that at the end
of the run every pair's path-known RDP slope
(:func:`~netsim.privacy.walk_pairwise.path_known_slopes`) is within the slope B whose ε at the run's
δ is the budget (:func:`slope_for_epsilon`).
**The bound it keeps**, an upper bound on the path-known accountant's that no later event can
raise past B. Contribution i of unit u (state x, displacement s = η·Δ) has a *stretch*: the
states from x down to the state before u's next contribution below it, or to a *cut* (a state
the walk continued from again: its second child, or its reception after it had a child). An
observer v's path-known view is its receptions and their lowest common ancestors, which are
cuts; give v every cut too (a stronger observer: splitting a factor, or shortening a stretch,
only raises the accountant's figure, since the optimal shifts of one factor are feasible for
the pieces). v's factors then each lie on one chain between cuts, and each holds the
stretches of u from the first after v's previous observed state to v's next one, the last
ending at that state. Its cost is the isotonic pooling of those stretches (Feldman et al.
2018, Thm 22, the shifts chosen optimally, as :func:`~netsim.privacy.walk_pairwise.
path_known_slopes` pools them), Σ over pooled blocks (Σ s)²/(2 Σ V); without amplification,
s²/(2σ_x²) per contribution, one Gaussian release.

**Which observers a closed stretch still affects.** The per-stretch ceiling this refines
charged each closed stretch s²/(2V) to every observer that had not received in it, as if it
were a factor of its own. It is one only for an observer whose next observed state is inside
it or at its end. For every other observer — it received nothing in the stretch's span, and
no state of that span can be received later except at a cut — the stretch is one of several
in a factor it has not closed yet, and that factor pools them: a short stretch (the walk came
back to u at once, or through nodes whose visits added no noise) followed by a long one costs
((s₁ + s₂)²/(2(V₁ + V₂))), not s₁²/(2V₁) + s₂²/(2V₂). Every such observer can still close
that factor (the walk goes on, and any node may be visited), so it is charged, but pooled.

**The bound per observer.** For unit u and view v (a node or coalition): the cost of v's
closed factors (``closed_cost``), plus, for each of u's live chains (its stretches since the
last cut above, ending with an open one), the pooled cost of the closed stretches after the
one v last received in, plus one full contribution, 1/(2z²), per open stretch. It bounds v's
accountant figure whatever happens next: the open factor ends at v's next observed state
below; its stretches are the closed ones (their noise fixed) and open ones, each costing at
most 1/(2z²) alone (its stretch holds at least its own noise), and the pooled cost of a
concatenation is at most the sum of its parts' (absorbing each part's shift within the part
is one choice of shifts). A unit's bound is its largest over the views that count against it.

**What it admits.** A contribution is admitted iff the bound, with the stretch it closes
ended (each view that received in it closes its factor at its first reception there: the
pooled cost of its open factor with that stretch cut short there) and a reserve added for its
own open stretch, is within B. A cut at y is admitted iff every unit's bound stays within B
once every view observes y: for the one stretch of each unit that spans y (its last
contribution since the previous cut), a view's factor across y starts after its lowest
reception above y; if still open, it closes at y at its pooled cost; if it ended below y it was
charged whole, and splitting it adds at most its part above y (the part below costs at most
the whole: an earlier stretch only adds to a pooled cost; for a factor that ended in the
spanning stretch itself, the difference: the cut only shortens its last stretch); an open
stretch through y closes at y, its reserve released. The chain splits at y: the part above is
done, the part below and the new branch start afresh (nothing pools across a cut). A refused
cut is not made: the walk service does not restart from that copy, and a node visits the walk
that arrived rather than its older copy. A state no one holds a child of, and no other walk
carries, is continued from freely: nobody observes both sides of it.

**Links.** Every state a link eavesdropper sees was received by one end and, by the other,
either received or made from a parent it received: its observed states map to a subset of
either end's, each to itself or its parent, which only raises the figure; so each end's bound
covers the link.

**What it cannot buy.** The next node after a use receives it at once (1/(2z²)), and the next
node after the unit's following use may be that one again: below two contributions' worth
(B < 1/z²) no online ceiling can admit a unit twice, and this one, like local DP, admits once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netsim.compiled import njit
from netsim.errors import SimulationError
from netsim.kernel_cache import guard_kernels

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
def _lowest_receptions(
    cut_at: int,
    parent: np.ndarray,
    depth: np.ndarray,
    cut: np.ndarray,
    rec_head: np.ndarray,
    rec_node: np.ndarray,
    rec_next: np.ndarray,
    member_ptr: np.ndarray,
    member_view: np.ndarray,
    lowest: np.ndarray,
) -> None:
    """The depth of each view's lowest reception from ``cut_at`` up to the nearest earlier
    cut, exclusive (``lowest``, −1 for none): where its factor across ``cut_at`` starts."""
    x = cut_at
    while x >= 0:
        if x != cut_at and cut[x]:
            break
        r = rec_head[x]
        while r >= 0:
            node = rec_node[r]
            view = node
            j = member_ptr[node]
            while True:  # the node, then its coalitions
                if lowest[view] < 0:
                    lowest[view] = depth[x]
                if j == member_ptr[node + 1]:
                    break
                view = member_view[j]
                j += 1
            r = rec_next[r]
        x = parent[x]


@njit(cache=True)
def _block_cost(shift: float, variance: float) -> float:
    """(Σ s)² / (2 Σ V) of a pooled block; a shift no noise covers is revealed."""
    if shift <= 0.0:
        return 0.0
    return shift * shift / (2.0 * variance) if variance > 0.0 else np.inf


@njit(cache=True)
def _suffix_costs(shift: np.ndarray, variance: np.ndarray, amplified: bool) -> np.ndarray:
    """cost[j]: the path-known cost of stretches j, j+1, … (cost[m] = 0) absorbed in one
    factor: the isotonic pooling of :func:`~netsim.privacy.walk_pairwise.path_known_slopes`
    (Feldman et al. 2018, the optimal shifts), built from the latest stretch up, so each
    suffix's cost is read off as its earliest stretch is pushed. Without amplification each
    stretch is one Gaussian release (``variance`` its own noise) and nothing pools."""
    m = shift.size
    out = np.zeros(m + 1)
    block_shift = np.empty(m)
    block_var = np.empty(m)
    top = 0
    total = 0.0
    for j in range(m - 1, -1, -1):
        s, v = shift[j], variance[j]
        if amplified:
            # pool with the later blocks while their shift per unit of noise is lower
            while top > 0 and s * block_var[top - 1] > block_shift[top - 1] * v:
                top -= 1
                total -= _block_cost(block_shift[top], block_var[top])
                s += block_shift[top]
                v += block_var[top]
        block_shift[top] = s
        block_var[top] = v
        top += 1
        total += _block_cost(s, v)
        out[j] = total
    return out


@njit(cache=True)
def _piece_costs(
    shift: np.ndarray,
    variance: np.ndarray,
    starts: np.ndarray,
    last_shift: float,
    last_var: np.ndarray,
    amplified: bool,
) -> np.ndarray:
    """For each observer i, the cost of its factor that ends inside a stretch: the closed
    stretches ``starts[i]``, …, m−1 then the ended one (``last_shift``, noise
    ``last_var[i]`` down to the observer's first reception in it), pooled as
    :func:`_suffix_costs` pools."""
    m = shift.size
    out = np.empty(starts.size)
    block_shift = np.empty(m + 1)
    block_var = np.empty(m + 1)
    for i in range(starts.size):
        block_shift[0] = last_shift
        block_var[0] = last_var[i]
        top = 1
        for j in range(m - 1, starts[i] - 1, -1):
            s, v = shift[j], variance[j]
            if amplified:
                while top > 0 and s * block_var[top - 1] > block_shift[top - 1] * v:
                    top -= 1
                    s += block_shift[top]
                    v += block_var[top]
            block_shift[top] = s
            block_var[top] = v
            top += 1
        total = 0.0
        for b in range(top):
            total += _block_cost(block_shift[b], block_var[b])
        out[i] = total
    return out


class LineageCeiling:
    """Per-observer admission of a walk's contributions and branches (module docstring).

    ``nodes`` nodes observe (every one: the ceiling holds for all, not for a sample), plus
    ``coalitions`` (each observing the union of its members' receptions). A link
    eavesdropper needs no row of its own (module docstring: each state it sees, one end
    received, or received the parent of). ``owner[u]`` is the node of unit u (its own and
    its coalitions' views of it are not bounded).
    ``budget_slope`` is B, ``contribution_slope`` one contribution's cost when observed at
    once, 1/(2z²). ``amplified``: the update maps are contractive. It is the accountant's
    :class:`~netsim.privacy.budgets.Admission` (``accountant.admit_by(ceiling)``):
    :meth:`admits` decides each use, ``refusal`` says why one is refused."""

    def __init__(
        self,
        nodes: int,
        owner: np.ndarray,
        coalitions: Sequence[Sequence[int]],
        budget_slope: float,
        contribution_slope: float,
        amplified: bool,
        refusal: str = "the network budget's ceiling refuses the use",
    ) -> None:
        #: Why :meth:`admits` refuses (the accountant's refusal reason).
        self.refusal = refusal
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
        #: Per unit and view: the cost of the view's closed factors (ended by one of its
        #: receptions or by a cut).
        self.closed_cost = np.zeros((units, views))
        #: Per unit and view: the stretch in which the view last received (−1: none); its
        #: open factor holds the unit's later stretches of that chain.
        self.last = np.full((units, views), -1, dtype=np.int64)
        #: Open stretches per unit (each reserves one full contribution).
        self.open_count = np.zeros(units, dtype=np.int64)
        #: Chains: the stretches of one unit since the last cut above them, in lineage order
        #: (a live chain ends with an open stretch; a frozen one was ended by a cut).
        self._chains: list[list[int]] = []
        self._live: list[list[int]] = [[] for _ in range(units)]
        # the lineage, per state: parent, depth, noise variance summed from the root
        # (inclusive), the unit that made it and its displacement, its stretch's end (−1:
        # open), its chain and place in it, its closed stretch's noise, children, whether
        # it is a cut, receptions
        self.states = 0
        capacity = 1024
        self.parent = np.empty(capacity, dtype=np.int64)
        self.depth = np.empty(capacity, dtype=np.int64)
        self.cumvar = np.empty(capacity)
        self.unit = np.empty(capacity, dtype=np.int64)
        self.shift = np.empty(capacity)
        self.end = np.empty(capacity, dtype=np.int64)
        self.chain = np.empty(capacity, dtype=np.int64)
        self.place = np.empty(capacity, dtype=np.int64)
        self.stretch_var = np.empty(capacity)
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
        #: The state the visiting node is about to update (its parent, if it contributes).
        self.visiting_state = -1
        #: Branches refused (a restart from a copy, a visit of an older copy).
        self.refused = 0
        self._pending: tuple[int, int, int, float, np.ndarray, np.ndarray] | None = None

    _STATE_COLUMNS = ("parent", "depth", "cumvar", "unit", "shift", "end", "chain", "place",
                      "stretch_var", "children", "cut", "rec_head")  # fmt: skip

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
        self.chain[serial] = -1
        self.place[serial] = -1
        self.stretch_var[serial] = 0.0
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
        _, _, closing, variance, costs, last = pending
        self._pending = None
        if closing >= 0:
            # the stretch of the unit's open contribution above closes: the factors that
            # ended in it (admits computed them) become closed
            self.closed_cost[unit] = costs
            self.last[unit] = last
            self.end[closing] = parent
            self.stretch_var[closing] = variance
            self.open_count[unit] -= 1
            chain = int(self.chain[closing])
        else:
            chain = len(self._chains)
            self._chains.append([])
            self._live[unit].append(chain)
        self.chain[serial] = chain
        self.place[serial] = len(self._chains[chain])
        self._chains[chain].append(serial)
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

    def _open_above(self, unit: int, state: int) -> int:
        """The unit's open contribution that ``state`` descends from (−1: none)."""
        for chain in self._live[unit]:
            top = self._chains[chain][-1]
            if _is_ancestor(top, state, self.parent, self.depth):
                return top
        return -1

    def _variance(self, top: int, bottom: int) -> float:
        """The noise a stretch from ``top`` down to ``bottom`` absorbs its shift in: the
        states' summed variance under amplification, else ``top``'s own (one release)."""
        above = self.cumvar[self.parent[top]] if self.parent[top] >= 0 else 0.0
        return float(self.cumvar[bottom if self.amplified else top] - above)

    def _chain_arrays(self, stretches: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """The shifts and noise of closed ``stretches``."""
        index = np.asarray(stretches, dtype=np.int64)
        return self.shift[index], self.stretch_var[index]

    def _starts(self, last: np.ndarray, chain: int, offset: int = 0) -> np.ndarray:
        """Where each view's open factor starts in ``chain`` (places from ``offset``): after
        the stretch it last received in, if that is of the chain at or past ``offset``,
        else at the chain's top (a cut, or the unit's first use, above)."""
        known = last >= 0
        index = np.where(known, last, 0)
        mine = known & (self.chain[index] == chain) & (self.place[index] >= offset)
        return np.where(mine, self.place[index] - offset + 1, 0)

    def _first_seen(self, top: int, bottom: int) -> tuple[np.ndarray, np.ndarray]:
        """The views that received a state from ``top`` down to ``bottom``, and the noise
        from ``top`` to the first such state of each."""
        count = _first_receptions(
            top, bottom, self.parent, self.depth, self.cumvar, self.rec_head, self.rec_node,
            self.rec_next, self.member_ptr, self.member_view, self._first_var,
            self._first_depth, self._touched,
        )  # fmt: skip
        views = self._touched[:count].copy()
        variance = self._first_var[views]
        self._first_var[views] = -1.0
        if not self.amplified:
            variance = np.full(count, self._variance(top, top))
        return views, variance

    def _bound(
        self, unit: int, costs: np.ndarray, last: np.ndarray,
        chains: Sequence[tuple[np.ndarray, np.ndarray, int, int]], reserve: float,
    ) -> float:  # fmt: skip
        """The unit's largest bound over the views that count against it: closed factors,
        each open factor's closed stretches pooled (``chains``: shifts, noise, chain id and
        place offset), and ``reserve``."""
        total = costs.copy()
        for shift, variance, chain, offset in chains:
            suffix = _suffix_costs(shift, variance, self.amplified)
            total += suffix[self._starts(last, chain, offset)]
        total[self.excluded[unit]] = -np.inf
        return float(total.max(initial=0.0)) + reserve

    def _live_chains(
        self, unit: int, skip: int = -1
    ) -> list[tuple[np.ndarray, np.ndarray, int, int]]:
        """The closed stretches of each live chain of ``unit`` but ``skip``."""
        return [
            (*self._chain_arrays(self._chains[c][:-1]), c, 0) for c in self._live[unit] if c != skip
        ]

    def admits(self, unit: int) -> bool:
        """Whether ``unit`` may contribute to a child of the visited state: the largest bound
        over views, with the stretch it closes ended (the factors that end in it closed) and
        a full contribution reserved for each stretch left open, stays within the budget."""
        parent = self.visiting_state
        self._pending = None
        closing = self._open_above(unit, parent)
        costs = self.closed_cost[unit].copy()
        last = self.last[unit].copy()
        variance = 0.0
        chains = self._live_chains(unit)
        if closing >= 0:
            chain = int(self.chain[closing])
            closed = self._chains[chain][:-1]
            shift, stretch_var = self._chain_arrays(closed)
            views, first = self._first_seen(closing, parent)
            costs[views] += _piece_costs(
                shift, stretch_var, self._starts(last[views], chain),
                float(self.shift[closing]), first, self.amplified,
            )  # fmt: skip
            last[views] = closing
            variance = self._variance(closing, parent)
            ended = (np.append(shift, self.shift[closing]), np.append(stretch_var, variance),
                     chain, 0)  # fmt: skip
            chains = [*self._live_chains(unit, skip=chain), ended]
        reserve = self.contribution_slope * (self.open_count[unit] + (closing < 0))
        if self._bound(unit, costs, last, chains, reserve) <= self.limit:
            self._pending = (unit, parent, closing, variance, costs, last)
            return True
        return False

    def _units_above(self, cut_at: int) -> list[int]:
        """Each unit's last contribution at or above ``cut_at`` since the nearest earlier
        cut (the one stretch of the unit that spans the cut)."""
        found: dict[int, int] = {}
        x = cut_at
        while x >= 0:
            if x != cut_at and self.cut[x]:
                break
            u = int(self.unit[x])
            if u >= 0 and self.shift[x] > 0 and u not in found:
                found[u] = x
            x = int(self.parent[x])
        return list(found.values())

    def _split(self, spanning: int, cut_at: int, lowest: np.ndarray, apply: bool) -> bool:
        """A cut at ``cut_at`` through the stretch of ``spanning`` (module docstring, "A
        cut"): every view observes the cut, so its factor across it splits there. With
        ``apply`` False, whether the unit's bound stays within the budget; with ``apply``
        True, the split made. ``lowest``: each view's lowest reception above the cut
        (:func:`_lowest_receptions`)."""
        u = int(self.unit[spanning])
        chain = int(self.chain[spanning])
        stretches = self._chains[chain]
        i = int(self.place[spanning])
        is_open = self.end[spanning] < 0
        live = chain in self._live[u]
        shift, variance = self._chain_arrays(stretches[:i])
        upper_shift = np.append(shift, self.shift[spanning])
        upper_var = np.append(variance, self._variance(spanning, cut_at))
        upper = _suffix_costs(upper_shift, upper_var, self.amplified)
        costs = self.closed_cost[u].copy()
        last = self.last[u].copy()
        views, first = self._first_seen(spanning, cut_at)
        seen = np.zeros(costs.size, dtype=bool)
        seen[views] = True
        starts = self._starts(last, chain) if live else np.zeros(costs.size, dtype=np.int64)
        if is_open:
            # the factors that end in the open stretch above the cut close as admits closes
            # them; every other view's open factor closes at the cut
            costs[views] += _piece_costs(
                shift, variance, starts[views], float(self.shift[spanning]), first,
                self.amplified,
            )  # fmt: skip
            last[views] = spanning
            costs[~seen] += upper[starts[~seen]]
        else:
            # a view's factor across the cut starts after its lowest reception above it.
            # Still open, it closes at the cut; ended below the cut, it was charged whole,
            # and splitting it adds at most its upper part's cost (nothing without
            # amplification: one release per contribution however the view is cut)
            depths = self.depth[np.asarray(stretches[: i + 1], dtype=np.int64)]
            start_r = np.where(lowest >= 0, np.searchsorted(depths, lowest, side="right"), 0)
            known = last >= 0
            index = np.where(known, last, 0)
            below = known & (
                (index == spanning) | ((self.chain[index] == chain) & (self.place[index] > i))
            )
            if not live:
                below[:] = True
            charged = ~seen & (True if self.amplified else ~below)
            raise_by = upper[start_r]
            if self.amplified and live:
                # a factor that ended in the spanning stretch below the cut holds no later
                # contribution: it was charged at its end, and the cut only shortens its
                # last stretch (its cost rises to the upper part's, not by it)
                ended, first = self._first_seen(spanning, int(self.end[spanning]))
                inside = ended[~seen[ended] & (last[ended] == spanning)]
                first = first[~seen[ended] & (last[ended] == spanning)]
                paid = _piece_costs(
                    shift, variance, start_r[inside], float(self.shift[spanning]), first, True
                )
                raise_by[inside] = np.maximum(raise_by[inside] - paid, 0.0)
            costs[charged] += raise_by[charged]
        if not apply:
            others = self._live_chains(u, skip=chain) if live else self._live_chains(u)
            if live and not is_open:
                lower = stretches[i + 1 : -1]
                others.append((*self._chain_arrays(lower), chain, i + 1))
            reserve = self.contribution_slope * (self.open_count[u] - is_open)
            return self._bound(u, costs, last, others, reserve) <= self.limit
        self.closed_cost[u] = costs
        self.last[u] = last
        if live:
            self._cut_chain(spanning, cut_at, float(upper_var[-1]))
        return True

    def _cut_chain(self, spanning: int, cut_at: int, upper_variance: float) -> None:
        """Cut the live chain of stretch ``spanning`` at ``cut_at`` (:meth:`_split` made):
        an open stretch ends there (its noise variance above the cut ``upper_variance``); a
        closed one leaves the stretches below it as a new live chain of the unit."""
        u = int(self.unit[spanning])
        chain = int(self.chain[spanning])
        stretches = self._chains[chain]
        i = int(self.place[spanning])
        self._live[u].remove(chain)
        if self.end[spanning] < 0:
            self.end[spanning] = cut_at
            self.stretch_var[spanning] = upper_variance
            self.open_count[u] -= 1
        else:
            lower = stretches[i + 1 :]
            new = len(self._chains)
            self._chains.append(lower)
            self._live[u].append(new)
            for place, state in enumerate(lower):
                self.chain[state] = new
                self.place[state] = place
        self._chains[chain] = stretches[: i + 1]

    def continues(self, serial: int, carried: bool) -> bool:
        """Whether a walk may continue from state ``serial`` again (a restart from a node's
        local copy, or a node's visit of its older copy); ``carried``: another walk carries
        it still. A state with no child that no other walk carries is free; otherwise it is
        a cut, made iff every unit's bound stays within the budget."""
        if self.cut[serial] or (self.children[serial] == 0 and not carried):
            return True
        spanning = self._units_above(serial)
        lowest = np.full(self._first_var.size, -1, dtype=np.int64)
        _lowest_receptions(
            serial, self.parent, self.depth, self.cut, self.rec_head, self.rec_node,
            self.rec_next, self.member_ptr, self.member_view, lowest,
        )  # fmt: skip
        if not all(self._split(x, serial, lowest, False) for x in spanning):
            self.refused += 1
            return False
        for x in spanning:
            self._split(x, serial, lowest, True)
        self.cut[serial] = True
        return True


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
