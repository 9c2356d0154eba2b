"""Doubly stochastic mixing matrices A_t for DOLA (Li et al., Assumption 2).

Every round, each online node talks to a random subset of its online neighbours (a fraction
or a count of them); a link is used if either end chose it, both ends are online and the link
is up. On that round graph the Metropolis–Hastings weights

    a_ij = 1 / (1 + max(d_i, d_j))  for a used link {i, j},    a_ii = 1 − Σ_j a_ij

(d_i: node i's number of used links; Xiao & Boyd 2004) give a symmetric, hence doubly
stochastic, matrix whose support is exactly the used links and the diagonal. Offline nodes
have a_ii = 1: they skip the round and keep their state. The time-invariant option builds the
weights once on every link of the topology.

What was generated is checked against Assumption 2 and logged (table ``dola_mixing``): row
and column sums (1 up to rounding), η = the smallest positive entry, the number of connected
components of the round graph, and every ``window`` rounds the components of the union of the
last ``window`` round graphs over the nodes that were online in it (Assumption 2(4) asks for
one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from netsim.compiled import njit
from netsim.errors import ScenarioError
from netsim.kernel_cache import guard_kernels
from netsim.lazy import lazy_module
from netsim.log import BOOL, F64, I64, TableSchema
from netsim.network.links import draw_below
from netsim.network.topology import Topology

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")

MIXING_TABLE = TableSchema(
    name="dola_mixing",
    columns=(
        ("round", I64),
        ("time", F64),
        ("online", I64),
        ("links", I64),
        ("eta", F64),
        ("row_sum_error", F64),
        ("column_sum_error", F64),
        ("components", I64),
        ("window_checked", BOOL),
        ("window_components", I64),
    ),
    description=(
        "Every DOLA round's mixing matrix A_t checked against Li et al.'s Assumption 2: online "
        "nodes, links used, η (smallest positive entry), the largest |row sum − 1| and "
        "|column sum − 1|, connected components of the round graph over online nodes, and, "
        "where window_checked, the components of the union of the last dola.mixing.window "
        "round graphs over the nodes online in that window (1 = connected)."
    ),
    role="rounds",
    time="time",
    round="round",
)


@dataclass(frozen=True, eq=False)
class MixingMatrix:
    """One round's A_t (CSR, m × m, diagonal included) and what the round graph was."""

    matrix: sp.csr_matrix
    links: int
    eta: float


def undirected(topology: Topology) -> Topology:
    """``topology`` with every link usable both ways (DOLA's weights are symmetric)."""
    if not topology.directed:
        return topology
    sources = np.repeat(np.arange(topology.n), topology.degrees())
    return Topology.from_edges(topology.n, sources, topology.indices, directed=False)


def check_mixable(topology: Topology) -> None:
    """Reject a topology on which no doubly stochastic A_t can connect the nodes.

    An isolated node's row and column can only be e_i, so the union of the round graphs can
    never be connected (Assumption 2(4)); a single node needs no neighbour.
    """
    if topology.n < 2:
        return
    lonely = np.flatnonzero(topology.degrees() == 0)
    if lonely.size:
        raise ScenarioError(
            f"dola: {lonely.size} node(s) (e.g. node {lonely[0]}) have no neighbour in the "
            "topology, so no doubly stochastic mixing matrix can reach them (Li et al., "
            "Assumption 2: the union of the round graphs must be connected); use a denser "
            "topology (e.g. a larger random_geometric radius)"
        )


@njit(cache=True)
def _reverse_entries(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """For a symmetric CSR pattern with sorted rows: the entry index of (j, i) for each (i, j)."""
    reverse = np.empty(indices.size, dtype=np.int64)
    for i in range(indptr.size - 1):
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            lo, hi = indptr[j], indptr[j + 1]
            while lo < hi:  # binary search for i in row j
                mid = (lo + hi) // 2
                if indices[mid] < i:
                    lo = mid + 1
                else:
                    hi = mid
            reverse[e] = lo
    return reverse


@njit(cache=True)
def _choose_links(
    indptr: np.ndarray,
    indices: np.ndarray,
    reverse: np.ndarray,
    usable: np.ndarray,
    online: np.ndarray,
    fraction: float,
    count: int,
    raw: np.ndarray,
) -> np.ndarray:
    """The round's used links as a mask over CSR entries (symmetric).

    Each online node picks ``count`` (or ⌈fraction·k⌉) of its k usable neighbours uniformly
    at random without replacement (partial Fisher–Yates over 32-bit halves of ``raw``, one
    word per CSR entry); a link is used if either end picked it.
    """
    n = indptr.size - 1
    chosen = np.zeros(indices.size, dtype=np.bool_)
    candidates = np.empty(indices.size, dtype=np.int64)
    for i in range(n):
        if not online[i]:
            continue
        k = 0
        for e in range(indptr[i], indptr[i + 1]):
            if usable[e] and online[indices[e]]:
                candidates[indptr[i] + k] = e
                k += 1
        if k == 0:
            continue
        want = count if count > 0 else int(np.ceil(fraction * k))
        want = min(want, k)
        base = indptr[i]
        for r in range(want):
            j = r + draw_below(raw[base + r] >> np.uint64(32), k - r)
            candidates[base + r], candidates[base + j] = candidates[base + j], candidates[base + r]
            chosen[candidates[base + r]] = True
    used = np.zeros(indices.size, dtype=np.bool_)
    for e in range(indices.size):
        used[e] = chosen[e] or chosen[reverse[e]]
    return used


@njit(cache=True)
def _metropolis(
    indptr: np.ndarray, indices: np.ndarray, used: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR (indptr, indices, data) of the Metropolis–Hastings weights on the used links, with
    every diagonal entry present (columns sorted within rows)."""
    n = indptr.size - 1
    degree = np.zeros(n, dtype=np.int64)
    for i in range(n):
        for e in range(indptr[i], indptr[i + 1]):
            if used[e]:
                degree[i] += 1
    out_ptr = np.empty(n + 1, dtype=np.int64)
    out_ptr[0] = 0
    for i in range(n):
        out_ptr[i + 1] = out_ptr[i] + degree[i] + 1
    out_idx = np.empty(out_ptr[n], dtype=np.int32)
    out_val = np.empty(out_ptr[n], dtype=np.float64)
    for i in range(n):
        k = out_ptr[i]
        total = 0.0
        diagonal_at = -1
        placed = False
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            if not placed and j > i:
                diagonal_at = k
                k += 1
                placed = True
            if used[e]:
                weight = 1.0 / (1.0 + max(degree[i], degree[j]))
                out_idx[k] = j
                out_val[k] = weight
                total += weight
                k += 1
        if not placed:
            diagonal_at = k
        out_idx[diagonal_at] = i
        out_val[diagonal_at] = 1.0 - total
    return out_ptr, out_idx, out_val


class MixingSchedule:
    """Draws A_t for every round over a topology (time-variant) or returns one fixed A.

    ``fraction`` or ``count`` says how many neighbours each online node talks to per round
    (a count wins when both are given; ``count`` 0 means use ``fraction``).
    """

    def __init__(
        self,
        topology: Topology,
        *,
        fraction: float = 0.5,
        count: int = 0,
        time_invariant: bool = False,
    ) -> None:
        if not 0.0 < fraction <= 1.0:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        topology = undirected(topology)
        check_mixable(topology)
        self.topology = topology
        self.fraction = fraction
        self.count = count
        self.time_invariant = time_invariant
        self.indptr = topology.indptr.astype(np.int64)
        self.indices = topology.indices.astype(np.int64)
        self.reverse = _reverse_entries(self.indptr, self.indices)
        self.sources = np.repeat(np.arange(topology.n, dtype=np.int64), np.diff(self.indptr))
        self._keys = self.sources * topology.n + self.indices  # sorted: CSR rows are sorted
        self._all = np.ones(self.indices.size, dtype=np.bool_)
        self._fixed = self._build(self._all) if time_invariant else None

    def entries(self, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """The CSR entry index of each link (rows[k], columns[k]) (the links must exist)."""
        return np.searchsorted(self._keys, rows.astype(np.int64) * self.topology.n + columns)

    def _build(self, used: np.ndarray) -> MixingMatrix:
        n = self.topology.n
        indptr, indices, data = _metropolis(self.indptr, self.indices, used)
        matrix = sp.csr_matrix((data, indices, indptr), shape=(n, n))
        positive = data[data > 0]
        eta = float(positive.min()) if positive.size else 1.0
        return MixingMatrix(matrix, int(used.sum()) // 2, eta)

    def draw(
        self,
        online: np.ndarray,
        rng: np.random.Generator,
        usable: np.ndarray | None = None,
    ) -> MixingMatrix:
        """A_t for a round in which ``online`` nodes take part; ``usable`` masks CSR entries
        of links that are up (all by default). The time-invariant A ignores both."""
        if self._fixed is not None:
            return self._fixed
        raw = rng.integers(0, 2**64 - 1, max(self.indices.size, 1), dtype=np.uint64, endpoint=True)
        used = _choose_links(
            self.indptr,
            self.indices,
            self.reverse,
            self._all if usable is None else usable,
            np.asarray(online, dtype=np.bool_),
            self.fraction,
            self.count,
            raw,
        )
        return self._build(used)


@dataclass(frozen=True)
class AssumptionCheck:
    """Assumption 2 measured on one round's A_t."""

    row_sum_error: float
    column_sum_error: float
    eta: float
    components: int


def check_round(mixing: MixingMatrix, online: np.ndarray) -> AssumptionCheck:
    """Row and column sums, η, and the components of the round graph over online nodes."""
    a = mixing.matrix
    rows = np.abs(np.add.reduceat(a.data, a.indptr[:-1]) - 1.0).max()  # no row is empty
    columns = np.abs(np.bincount(a.indices, weights=a.data, minlength=a.shape[0]) - 1.0).max()
    return AssumptionCheck(float(rows), float(columns), mixing.eta, union_components([a], online))


@njit(cache=True)
def _root(parent: np.ndarray, i: int) -> int:
    """The representative of i's set (path halving)."""
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


@njit(cache=True)
def _join_links(parent: np.ndarray, indptr: np.ndarray, indices: np.ndarray, online: np.ndarray):
    """Merge the sets of the two ends of every link between online nodes (union–find)."""
    for i in range(indptr.size - 1):
        if not online[i]:
            continue
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            if online[j]:
                a, b = _root(parent, i), _root(parent, j)
                if a != b:
                    parent[max(a, b)] = min(a, b)


@njit(cache=True)
def _count_roots(parent: np.ndarray, online: np.ndarray) -> int:
    count = 0
    for i in range(parent.size):
        if online[i] and parent[i] == i:
            count += 1
    return count


def union_components(matrices: list[sp.csr_matrix], online: np.ndarray) -> int:
    """Connected components of the union of the matrices' graphs, over ``online`` nodes.

    A compiled union–find over the CSR entries: no union matrix is built (scipy's sum,
    slicing and ``connected_components`` cost ten times as much per round)."""
    mask = np.asarray(online, dtype=np.bool_)
    parent = np.arange(mask.size, dtype=np.int64)
    for a in matrices:
        _join_links(parent, a.indptr, a.indices, mask)
    return int(_count_roots(parent, mask))


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
