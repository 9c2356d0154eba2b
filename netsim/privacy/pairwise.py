"""Pairwise network DP of Gaussian gossip averaging, exact, from the mixing a run really did.

Muffliato (Cyffers, Even, Bellet, Massoulié, NeurIPS 2022; ``docs/papers.md``): every node u
adds N(0, σ²I) to its private value x_u once, then the nodes average for K rounds,
x ← W_t x, with W_t the (doubly stochastic) weights over the links that were up in round t. An
observer v sees the messages it receives: in round t, the current value of every neighbour w
with W_t[v, w] > 0, which is row w of P_t = W_{t−1} ⋯ W_0 applied to the noisy values. So v's
view is linear in the noisy values, V_v = M_v (x + z), with M_v known from the log, and v knows
its own value and noise (the columns of a coalition's members, for a coalition).

Whitened, the view of u's record is a Gaussian mechanism: with M̃ the columns v does not know
and m_u u's column, the Rényi divergence between neighbouring data sets (u's value moved by at
most Δ in L2) is exactly

    ρ_{u→v}(α) = (α / 2) · Δ² · m_uᵀ (σ² M̃ M̃ᵀ)⁺ m_u = α · Δ² · λ_u / (2σ²),

where λ_u = m_uᵀ (M̃ M̃ᵀ)⁺ m_u ∈ [0, 1] is the leverage of column u in M̃ (the squared norm of
u's row in an orthonormal basis of M̃'s row space). The view is then a Gaussian mechanism of
sensitivity Δ·√λ_u and noise σ, so its (ε, δ) is the exact privacy profile of the Gaussian
(Balle & Wang 2018, Thm 8: :func:`~netsim.privacy.mechanisms.gaussian_epsilon`), no conversion
from RDP needed. λ_u = 1 when v sees u's noisy value itself (local DP); mixing before v hears of
u lowers it. The same holds coordinate by coordinate for vector values.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from netsim.lazy import lazy_module
from netsim.privacy.mechanisms import gaussian_epsilon

if TYPE_CHECKING:
    import pandas as pd
    import scipy.sparse as sp
else:
    pd = lazy_module("pandas")
    sp = lazy_module("scipy.sparse")

#: A round's mixing matrix W_t, dense or sparse.
Mixing: TypeAlias = "np.ndarray | sp.spmatrix"

#: Singular values below this share of the largest count as zero (the view's rank). A view's
#: real directions can be far below its largest: gossip mixes the same noisy values round
#: after round, and on the 64-node cycle 20 rounds leave observer 0 directions down to
#: 1.2e-11 of the largest, which a cut of 1e-10 dropped (a node at λ = 0.004 whose exact λ is
#: 1). Round-off puts a view's exactly-zero singular values near 1e-16 of the largest (at
#: most max(rows, columns) · 2.2e-16, 5e-13 for the 2,048 nodes a run accounts all of), so
#: the cut sits between the two; a real direction below it is dropped, which no float64
#: computation of the view can tell from round-off (tests/test_linear_accountant.py holds
#: both accountants to the exact computation).
RANK_TOLERANCE = 1e-12


def received_rows(mixing: Sequence[Mixing], observers: Iterable[int]) -> np.ndarray:
    """M for the coalition ``observers``: one row per message its members receive — in round
    t, from every node w ∉ coalition with W_t[v, w] > 0 for a member v — giving that message
    as a combination of the noisy initial values (row w of P_t = W_{t−1} ⋯ W_0).

    ``mixing`` holds W_0, …, W_{K−1} (N × N, dense or scipy sparse; row v: the weights v
    gives its neighbours' values). Messages between members are left out: the coalition
    knows them already."""
    return received_views(mixing, [list(observers)])[0]


def received_views(
    mixing: Sequence[Mixing],
    coalitions: Sequence[Sequence[int]],
    *,
    acceleration: float | None = None,
) -> list[np.ndarray]:
    """:func:`received_rows` for each coalition, in one pass over the rounds (the maps P_t
    from the noisy initial values to the round's state are formed once). With
    ``acceleration`` γ (Chebyshev, Muffliato Alg. 1), the states follow
    x_{t+1} = γ W_t x_t + (1 − γ) x_{t−1} from x_1 = W_0 x_0, so P_{t+1} = γ W_t P_t +
    (1 − γ) P_{t−1}; the messages are still each neighbour's current state."""
    if not mixing:
        return [np.zeros((0, 0)) for _ in coalitions]
    n = mixing[0].shape[0]
    inside = []
    for members in coalitions:
        mask = np.zeros(n, dtype=bool)
        mask[list(members)] = True
        inside.append(mask)
    rows: list[list[np.ndarray]] = [[] for _ in coalitions]
    product = np.eye(n)
    previous: np.ndarray | None = None
    for weights in mixing:
        for k, members in enumerate(coalitions):
            weights_of = weights[list(members)]
            dense = weights_of.toarray() if sp.issparse(weights_of) else np.asarray(weights_of)
            heard = np.flatnonzero((dense > 0).any(axis=0) & ~inside[k])
            rows[k].append(product[heard])
        mixed = np.asarray(weights @ product)
        if acceleration is not None and previous is not None:
            mixed = acceleration * mixed + (1.0 - acceleration) * previous
        previous, product = product, mixed
    return [np.concatenate(parts) for parts in rows]


def chebyshev_gamma(spectral_gap: float) -> float:
    """γ of Chebyshev-accelerated gossip for a gossip matrix whose spectral gap (the second
    smallest eigenvalue of I − W) is ``spectral_gap``: 2(1 − √(γ₂(1 − γ₂/4)))/(1 − γ₂/2)²
    (Muffliato, Cyffers, Even, Bellet, Massoulié 2022, Alg. 1)."""
    gap = spectral_gap
    if not 0.0 < gap <= 1.0:
        raise ValueError(f"the spectral gap must be in (0, 1], got {gap}")
    return 2.0 * (1.0 - math.sqrt(gap * (1.0 - gap / 4.0))) / (1.0 - gap / 2.0) ** 2


def leverages(view: np.ndarray, known: Iterable[int]) -> np.ndarray:
    """λ_u = m_uᵀ(M̃M̃ᵀ)⁺m_u for every column u of ``view`` not in ``known`` (NaN for those):
    the squared row norms of the right singular vectors of M̃ (the columns not known) with
    non-zero singular values."""
    n = view.shape[1]
    known_columns = np.zeros(n, dtype=bool)
    known_columns[list(known)] = True
    result = np.full(n, np.nan)
    unknown = np.flatnonzero(~known_columns)
    reduced = view[:, unknown]
    if reduced.size == 0:
        result[unknown] = 0.0
        return result
    _, singular, vt = np.linalg.svd(reduced, full_matrices=False)
    rank = int(np.count_nonzero(singular > RANK_TOLERANCE * max(singular.max(initial=0.0), 1e-300)))
    basis = vt[:rank]
    result[unknown] = np.minimum((basis**2).sum(axis=0), 1.0)
    return result


def pairwise_epsilons(
    mixing: Sequence[np.ndarray],
    *,
    sigma: float,
    sensitivity: float,
    delta: float,
    observers: Iterable[int] | None = None,
    acceleration: float | None = None,
    coalitions: Sequence[Sequence[int]] = (),
) -> pd.DataFrame:
    """The pairwise network DP of Gaussian gossip averaging for each observer (default: every
    node) and every other node's record: ``observer``, ``record``, ``leverage`` (λ), ``rho``
    (the RDP slope, ρ(α) = α·rho) and ``epsilon`` at ``delta`` (exact for the Gaussian view).
    ``sigma`` is the noise each node adds once; ``sensitivity`` the L2 distance two
    neighbouring values can be apart; ``acceleration`` γ: the rounds were Chebyshev-
    accelerated (:func:`received_views`). ``coalitions``: colluding sets, each after the
    observers as observer −1−k, knowing its members' values and noise, of every record of a
    node outside it."""
    if sigma <= 0 or sensitivity < 0:
        raise ValueError("sigma must be positive and sensitivity non-negative")
    n = mixing[0].shape[0] if mixing else 0
    chosen = list(range(n)) if observers is None else [int(v) for v in observers]
    views_of = [[observer] for observer in chosen] + [list(c) for c in coalitions]
    ids = chosen + [-1 - k for k in range(len(coalitions))]
    views = received_views(mixing, views_of, acceleration=acceleration)
    frames = []
    for observer, members, view in zip(ids, views_of, views, strict=True):
        lam = leverages(view, members)
        records = np.flatnonzero(~np.isnan(lam))
        slope = sensitivity**2 * lam[records] / (2.0 * sigma**2)
        epsilon = [
            gaussian_epsilon(sigma, sensitivity * float(np.sqrt(value)), delta)
            for value in lam[records]
        ]
        columns = {"observer": observer, "record": records, "leverage": lam[records],
                   "rho": slope, "epsilon": epsilon}  # fmt: skip
        frames.append(pd.DataFrame(columns))
    if not frames:
        return pd.DataFrame(columns=["observer", "record", "leverage", "rho", "epsilon"])
    return pd.concat(frames, ignore_index=True)


def metropolis_weights(adjacency: np.ndarray) -> np.ndarray:
    """Metropolis–Hastings gossip weights over an undirected graph, dense
    (:func:`metropolis_from_edges`)."""
    graph = np.asarray(adjacency, dtype=bool)
    graph = (graph | graph.T) & ~np.eye(graph.shape[0], dtype=bool)
    src, dst = np.nonzero(np.triu(graph))
    return metropolis_from_edges(graph.shape[0], src, dst).toarray()


def metropolis_from_edges(n: int, src: np.ndarray, dst: np.ndarray) -> sp.csr_matrix:
    """Metropolis–Hastings gossip weights over the undirected links {src[k], dst[k]} (each
    listed once; Xiao & Boyd 2004): W[v, w] = 1 / (1 + max(deg v, deg w)) on a link, the rest
    of each row on the diagonal (1 for a node without links). Doubly stochastic and
    symmetric, so averaging with it keeps the mean."""
    degree = np.bincount(src, minlength=n) + np.bincount(dst, minlength=n)
    weight = 1.0 / (1.0 + np.maximum(degree[src], degree[dst]))
    given = np.bincount(src, weight, minlength=n) + np.bincount(dst, weight, minlength=n)
    nodes = np.arange(n)
    rows = np.concatenate([src, dst, nodes])
    columns = np.concatenate([dst, src, nodes])
    values = np.concatenate([weight, weight, 1.0 - given])
    return sp.csr_matrix((values, (rows, columns)), shape=(n, n))
