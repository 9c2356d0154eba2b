"""Pairwise network DP of DP-SGD on a random walk: what observer v learns about record u.

The token's model is updated at every visit, θ ← θ − η_s(g_s + N(0, σ_s² I)), with g_s the
clipped gradient of the visited node's record (``docs/papers.md``, "Network DP of a random
walk: path known and path secret"). Two views of the observer, both reported by name:

**Path known** (:func:`path_known_slopes`; pessimistic, valid for any run, churn included). The
observer is assumed to know the realised path. The run's models form a lineage tree: every state
the walk (or a restart from a local copy) carries has a parent, the node whose visit made it and
the noise that visit added. Give the observer, besides the states it received, the states where
two of its received lineages part (their lowest common ancestors): a stronger observer, so a
bound for it holds for v. Its view then factorises along the tree, each observed state o given
its nearest observed ancestor a, and that factor depends on u only through u's contributions on
the path from a to o: what v saw before a is post-processing with independent noise and data,
and a copy that never reached v leaks nothing. If every update map is contractive (convex,
β-smooth loss, η ≤ 2/(β + λ)), privacy amplification by iteration (Feldman, Mironov, Talwar,
Thakurta, FOCS 2018, Thm 22) bounds u's contributions on that path by shifts a_j absorbed step
by step, at a cost α Σ_j a_j² / (2σ_j²), with s_c = η_c·Δ the displacement u's record can cause
in step c and σ_j = η_j·σ the noise of step j. netsim chooses the shifts optimally: a
contribution's stretch runs from it until u's next contribution on the path (or o), and the
best shifts spend a constant amount per unit of noise over pooled runs of stretches — the
isotonic regression of s/V over the stretches, pooled while an earlier stretch's ratio is
higher — so each pooled run B costs

    ρ_B(α) = α · (Σ_{c ∈ B} s_c)² / (2 Σ_{j ∈ B} σ_j²),

one contribution alone seen after k equally noisy steps costing α s²/(2kσ²) (one Gaussian
release, s/σ = Δ/σ, when v is the next hop). Without contractivity each
contribution that reaches v counts as one Gaussian release, ρ(α) = α s_c² / (2σ_c²). The
curves (all linear in α: ρ(α) = α·slope) add over u's contributions.

**Path secret** (:func:`path_secret_slopes`; the papers' model on a static graph). The walk's
randomness is part of the mechanism: v does not know when u contributed. Cyffers, Bellet,
Upadhyay (ICML 2024, arXiv 2402.07471) give a closed form from the transition matrix W: u
contributes T/n times in a walk of T steps, and a contribution reaches v after t steps with
probability (W^t)_{uv}, amplified by t, so

    slope_{u→v} = c · (T/n) · Σ_{t≥1} (W^t)_{uv} / t  ≈  c · (T/n) · (R_{uv} + ln T / n),

R = Σ_{λ_i ≠ 1} −ln(1 − λ_i) φ_i φ_iᵀ over W's eigenpairs (the matrix logarithm of the
resolvent; the stationary part Σ_{t ≤ T} 1/(nt) taken as ln T / n), and c = Δ²/(2σ²) one
contribution's slope. This is what the authors' code computes (``totilas/DPrandomwalk``,
``graph.py``: ``logW``, ``priv_global``), with their noise parameter σ_a such that c = 1/σ_a².
Their variant for an observer that knows which neighbour sent the token takes
max_{w ∈ N(v)} R_{uw} in place of R_{uv} (``maxi_priv``): :func:`path_secret_slopes` with
``sender_known=True``. For a reversible walk that is not uniform (a simple random walk on an
irregular graph) netsim uses the same sum with the walk's stationary law π: u contributes
T·π_u times and the stationary part is π_v ln T.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from netsim.compiled import njit
from netsim.kernel_cache import guard_kernels
from netsim.lazy import lazy_module
from netsim.privacy.composition import RDP_ORDERS, rdp_epsilons
from netsim.privacy.linear import RANGE_TOLERANCE, UnitLosses, group_losses, whitening

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")

#: An eigenvalue of W this close to 1 is the stationary one.
UNIT_EIGENVALUE_TOLERANCE = 1e-9


def _symmetric_form(transition: np.ndarray | sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
    """(S, π) with S = D^{1/2} P D^{−1/2} symmetric for a reversible walk P with stationary
    law π (D = diag π); a ValueError for a walk that is not reversible."""
    p = transition.toarray() if sp.issparse(transition) else np.asarray(transition, float)
    n = p.shape[0]
    if p.shape != (n, n) or not np.allclose(p.sum(axis=1), 1.0, atol=1e-9) or (p < 0).any():
        raise ValueError("transition must be a square row-stochastic matrix")
    # the walks netsim runs have a known stationary law: uniform (doubly stochastic, e.g.
    # Metropolis–Hastings) or proportional to the degree (the simple walk); a general walk
    # falls back to the eigenvector of eigenvalue 1 (a dense eig: slow past ~1,000 nodes)
    stationary = None
    for candidate in (np.ones(n), np.count_nonzero(p, axis=1).astype(float)):
        candidate = candidate / candidate.sum()
        if np.allclose(candidate @ p, candidate, atol=1e-12):
            stationary = candidate
            break
    if stationary is None:
        values, vectors = np.linalg.eig(p.T)
        stationary = np.real(vectors[:, np.argmin(np.abs(values - 1.0))])
        stationary = np.abs(stationary) / np.abs(stationary).sum()
    flow = stationary[:, None] * p
    if not np.allclose(flow, flow.T, atol=1e-12):
        raise ValueError("the walk is not reversible (π_u P_uv ≠ π_v P_vu): no closed form")
    root = np.sqrt(stationary)
    symmetric = root[:, None] * p / root[None, :]
    return (symmetric + symmetric.T) / 2.0, stationary


def log_resolvent(transition: np.ndarray | sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
    """(R, π): R_{uv} = Σ_{t≥1} ((P^t)_{uv} − π_v) / t for a reversible walk P, by the
    eigenpairs of its symmetric form, Σ_{λ_i ≠ 1} −ln(1 − λ_i) φ_i φ_iᵀ rescaled by
    D^{∓1/2} (Cyffers, Bellet, Upadhyay 2024; for a doubly stochastic W, π = 1/n and R is
    the authors' ``logW``), and the stationary law π."""
    symmetric, stationary = _symmetric_form(transition)
    values, vectors = np.linalg.eigh(symmetric)
    unit = np.abs(values - 1.0) < UNIT_EIGENVALUE_TOLERANCE
    if unit.sum() != 1:
        raise ValueError(
            "the walk is not irreducible (eigenvalue 1 has multiplicity "
            f"{int(unit.sum())}): pairs in different components never meet"
        )
    if (values <= -1.0 + UNIT_EIGENVALUE_TOLERANCE).any():
        raise ValueError("the walk is periodic (eigenvalue −1): add self-loops (a lazy walk)")
    weights = np.where(unit, 0.0, -np.log1p(-np.where(unit, 0.0, values)))
    core = (vectors * weights) @ vectors.T
    root = np.sqrt(stationary)
    return core * (1.0 / root)[:, None] * root[None, :], stationary


def path_secret_slopes(
    transition: np.ndarray | sp.spmatrix,
    steps: int,
    contribution_slope: float,
    *,
    sender_known: bool = False,
    contributions: float | None = None,
) -> np.ndarray:
    """The closed-form pairwise RDP slopes of a walk of ``steps`` steps (module docstring):
    entry [u, v] is the slope of u's record against observer v, ρ(α) = α·slope (0 on the
    diagonal, as in the authors' code). ``contribution_slope`` is one contribution's c =
    Δ²/(2σ²). ``sender_known``: the observer knows the neighbour that sent it the token, so
    the loss is the largest over v's neighbours w of u's reaching w (``maxi_priv``).
    ``contributions``: how many times each node contributes (default its expectation, T·π_u;
    a per-node cap bounds it for every run)."""
    if steps < 1 or contribution_slope < 0:
        raise ValueError("steps must be at least 1 and contribution_slope non-negative")
    resolvent, stationary = log_resolvent(transition)
    if sender_known:
        p = transition.toarray() if sp.issparse(transition) else np.asarray(transition)
        neighbours = (p > 0) & ~np.eye(p.shape[0], dtype=bool)
        masked = np.where(neighbours.T[None, :, :], resolvent[:, None, :], -np.inf)
        resolvent = masked.max(axis=2)
    uses = steps * stationary if contributions is None else np.full(stationary.size, contributions)
    slopes = (
        contribution_slope * uses[:, None] * (resolvent + stationary[None, :] * math.log(steps))
    )
    np.fill_diagonal(slopes, 0.0)
    return slopes


def authors_walk_length(spectral_gap: float, n: int, sigma: float) -> int:
    """The number of steps the authors' code runs for its pairwise figures (``computeTwalk``:
    20·⌈ln n / γ⌉·(¼ + σ²)/σ², truncated, for the spectral gap γ of W and their noise σ):
    a reproduction parameter, not a netsim default."""
    return int(20 * math.ceil(math.log(n) / spectral_gap) * (0.25 + sigma**2) / sigma**2)


def spectral_gap(transition: np.ndarray | sp.spmatrix) -> float:
    """1 − λ₂ of a reversible walk (the second largest eigenvalue of its symmetric form)."""
    symmetric, _ = _symmetric_form(transition)
    values = np.linalg.eigvalsh(symmetric)
    return float(1.0 - values[-2])


def epsilons_of_slopes(slopes: np.ndarray, delta: float) -> np.ndarray:
    """ε at ``delta`` of linear RDP curves ρ(α) = α·slope, by dp-accounting's conversion over
    :data:`~netsim.privacy.composition.RDP_ORDERS` (never the Gaussian's exact profile: a
    composed bound on the curve is not a Gaussian mechanism)."""
    flat = np.asarray(slopes, dtype=np.float64).reshape(-1)
    out = np.empty(flat.size)
    for start in range(0, flat.size, 65536):  # rows × orders at most 65,536 × ~60 doubles
        part = flat[start : start + 65536]
        out[start : start + part.size] = rdp_epsilons(part[:, None] * RDP_ORDERS, delta)
    return out.reshape(np.shape(slopes))


# --- path known, from the run's lineage ----------------------------------------------------


@njit(cache=True)
def _observed_closure(
    parent: np.ndarray,
    reception_state: np.ndarray,
    start: int,
    stop: int,
    seen: np.ndarray,
    children: np.ndarray,
    touched: np.ndarray,
) -> int:
    """Mark the ancestors of receptions [start, stop) in ``seen`` and count, for each, how
    many of its children lead to a reception (``children``); a state reached from two
    children is where two received lineages part (their lowest common ancestor). Returns
    how many states were marked (listed in ``touched``)."""
    count = 0
    for i in range(start, stop):
        x = reception_state[i]
        child = -1
        while x >= 0:
            if seen[x]:
                if child >= 0:
                    children[x] += 1
                break
            seen[x] = True
            children[x] = 0 if child < 0 else 1
            touched[count] = x
            count += 1
            child = x
            x = parent[x]
    return count


@njit(cache=True)
def _path_known(
    parent: np.ndarray,
    unit: np.ndarray,
    owner: np.ndarray,
    shift2: np.ndarray,
    noise_var: np.ndarray,
    reception_ptr: np.ndarray,
    reception_state: np.ndarray,
    member_ptr: np.ndarray,
    member_node: np.ndarray,
    amplified: bool,
    units: int,
    nodes: int,
) -> np.ndarray:
    """slopes[k, unit] for coalition k (see :func:`path_known_slopes`)."""
    states = parent.size
    observers = reception_ptr.size - 1
    out = np.zeros((observers, units))
    seen = np.zeros(states, dtype=np.bool_)
    observed = np.zeros(states, dtype=np.bool_)
    children = np.zeros(states, dtype=np.int64)
    touched = np.empty(states, dtype=np.int64)
    last = np.full(units, -1.0)  # noise summed from the walk-up's start to u's last state
    head = np.full(units, -1)  # u's latest block of pooled stretches (a stack, top first)
    block_shift = np.empty(states)
    block_var = np.empty(states)
    block_next = np.empty(states, dtype=np.int64)
    last_units = np.empty(states, dtype=np.int64)
    inside = np.zeros(nodes, dtype=np.bool_)
    for k in range(observers):
        for i in range(member_ptr[k], member_ptr[k + 1]):
            inside[member_node[i]] = True
        start, stop = reception_ptr[k], reception_ptr[k + 1]
        marked = _observed_closure(parent, reception_state, start, stop, seen, children, touched)
        for i in range(start, stop):
            observed[reception_state[i]] = True
        for i in range(marked):
            x = touched[i]
            if children[x] >= 2:
                observed[x] = True
        for i in range(marked):
            o = touched[i]
            if not observed[o]:
                continue
            # o's factor: the states from o up to its nearest observed ancestor (exclusive)
            acc = 0.0
            reset = 0
            blocks = 0
            x = o
            while x >= 0 and (x == o or not observed[x]):
                acc += noise_var[x]
                u = unit[x]
                if u >= 0 and shift2[x] > 0 and not inside[owner[x]]:
                    if not amplified:
                        out[k, u] += (
                            shift2[x] / (2.0 * noise_var[x]) if noise_var[x] > 0 else np.inf
                        )
                    else:
                        # x's stretch: the noise from x until u's next state below it (or o)
                        segment = acc - last[u] if last[u] >= 0 else acc
                        if last[u] < 0:
                            last_units[reset] = u
                            reset += 1
                        last[u] = acc
                        # pool with the later blocks while their shift per unit of noise is
                        # lower (the prefix constraint binds: isotonic regression)
                        s_pool = math.sqrt(shift2[x])
                        v_pool = segment
                        b = head[u]
                        while b >= 0 and s_pool * block_var[b] > block_shift[b] * v_pool:
                            s_pool += block_shift[b]
                            v_pool += block_var[b]
                            b = block_next[b]
                        block_shift[blocks] = s_pool
                        block_var[blocks] = v_pool
                        block_next[blocks] = b
                        head[u] = blocks
                        blocks += 1
                x = parent[x]
            for i2 in range(reset):
                u = last_units[i2]
                b = head[u]
                while b >= 0:
                    var = block_var[b]
                    out[k, u] += block_shift[b] ** 2 / (2.0 * var) if var > 0 else np.inf
                    b = block_next[b]
                head[u] = -1
                last[u] = -1.0
        for i in range(marked):
            x = touched[i]
            seen[x] = False
            observed[x] = False
            children[x] = 0
        for i in range(member_ptr[k], member_ptr[k + 1]):
            inside[member_node[i]] = False
    return out


def path_known_slopes(
    *,
    parent: np.ndarray,
    unit: np.ndarray,
    owner: np.ndarray,
    shift: np.ndarray,
    noise_std: np.ndarray,
    receptions: Sequence[np.ndarray],
    coalitions: Sequence[Sequence[int]],
    units: int,
    amplified: bool,
) -> np.ndarray:
    """The path-known RDP slopes (module docstring) of every privacy unit against each
    coalition: a (coalitions × units) array, ρ(α) = α·slope.

    The lineage: state x was made from ``parent[x]`` (−1: an initial model) by a visit that
    used privacy unit ``unit[x]`` (−1: none, e.g. a refused visit) of node ``owner[x]``,
    moved the model by at most ``shift[x]`` = η·Δ for that unit and added Gaussian noise of
    standard deviation ``noise_std[x]`` = η·σ per coordinate. ``receptions[k]`` holds every
    state a member of coalition k received (a node that updates a state must be listed as
    receiving it), in any order, repeats allowed. Units owned by a member are left out (0).
    ``amplified``: amplification by iteration holds (every update map contractive)."""
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    states = parent.size
    if np.any(parent >= np.arange(states)):
        raise ValueError("parent[x] must come before x (states in the order they were made)")
    ptr = np.zeros(len(receptions) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(r) for r in receptions])
    received = (
        np.concatenate([np.asarray(r, dtype=np.int64) for r in receptions])
        if receptions
        else np.zeros(0, dtype=np.int64)
    )
    member_ptr = np.zeros(len(coalitions) + 1, dtype=np.int64)
    member_ptr[1:] = np.cumsum([len(c) for c in coalitions])
    members = np.asarray([m for c in coalitions for m in c], dtype=np.int64)
    nodes = int(max(owner.max(initial=-1), members.max(initial=-1))) + 1
    return _path_known(
        parent,
        np.ascontiguousarray(unit, dtype=np.int64),
        np.ascontiguousarray(owner, dtype=np.int64),
        np.ascontiguousarray(shift, dtype=np.float64) ** 2,
        np.ascontiguousarray(noise_std, dtype=np.float64) ** 2,
        ptr,
        received,
        member_ptr,
        members,
        amplified,
        int(units),
        nodes,
    )


@njit(cache=True)
def _view_segments(
    parent: np.ndarray,
    unit: np.ndarray,
    shift: np.ndarray,
    noise_var: np.ndarray,
    holder: np.ndarray,
    received: np.ndarray,
    observer: int,
    seen: np.ndarray,
    children: np.ndarray,
    touched: np.ndarray,
    key_of: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One observer's view of the lineage in segments (see
    :func:`path_known_exact_mu_squared`): the key states (the ``received`` states, distinct,
    and the states where two received lineages part), each key's segment (the key and its
    ancestors up to the nearest key, exclusive), the variance of the segment's noise that the
    observer did not add, and the contributions in each segment. Returns (indicator: received
    × keys, 1 where the key is the received state or one of its ancestors; variance per key;
    the contributions' key, unit and shift; the key of each received state). ``seen``,
    ``children``, ``touched`` and ``key_of`` (−1 throughout) are scratch arrays of one entry
    per state, left as they were found."""
    marked = _observed_closure(parent, received, 0, received.size, seen, children, touched)
    for i in range(received.size):
        key_of[received[i]] = 0
    key_state = np.empty(marked, dtype=np.int64)
    keys = 0
    for i in range(marked):
        x = touched[i]
        if key_of[x] == 0 or children[x] >= 2:
            key_of[x] = keys + 1  # shifted by one until every key is numbered
            key_state[keys] = x
            keys += 1
    for i in range(keys):
        key_of[key_state[i]] -= 1
    up = np.full(keys, -1, dtype=np.int64)
    variance = np.zeros(keys)
    c_key = np.empty(marked, dtype=np.int64)
    c_unit = np.empty(marked, dtype=np.int64)
    c_shift = np.empty(marked)
    count = 0
    for k in range(keys):
        x = key_state[k]
        while x >= 0 and (x == key_state[k] or key_of[x] < 0):
            if holder[x] != observer:
                variance[k] += noise_var[x]
            if unit[x] >= 0 and shift[x] > 0:
                c_key[count] = k
                c_unit[count] = unit[x]
                c_shift[count] = shift[x]
                count += 1
            x = parent[x]
        if x >= 0:
            up[k] = key_of[x]
    indicator = np.zeros((received.size, keys))
    row_key = np.empty(received.size, dtype=np.int64)
    for i in range(received.size):
        k = key_of[received[i]]
        row_key[i] = k
        while k >= 0:
            indicator[i, k] = 1.0
            k = up[k]
    for i in range(marked):
        x = touched[i]
        seen[x] = False
        children[x] = 0
        key_of[x] = -1
    return indicator, variance, c_key[:count], c_unit[:count], c_shift[:count], row_key


#: Units × keys² of one observer's use Grams formed at a time (bounds the memory of a long
#: view: :func:`~netsim.privacy.linear.group_losses` forms the Gram of every unit).
GRAM_CHUNK = 4_000_000


def path_known_exact_mu_squared(
    *,
    parent: np.ndarray,
    unit: np.ndarray,
    shift: np.ndarray,
    noise_std: np.ndarray,
    holder: np.ndarray,
    receptions: Sequence[np.ndarray],
    observers: Sequence[int],
    units: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The exact Gaussian loss, μ² (ρ(α) = α μ²/2), of every privacy unit against each single
    observer that knows the realised path: the lineage's view as a linear-Gaussian system
    (:mod:`netsim.privacy.linear`), not a bound by amplification by iteration.

    The lineage is that of :func:`path_known_slopes` (``parent``, ``unit``, ``shift`` = η·Δ,
    ``noise_std`` = η·σ per coordinate) with ``holder[x]``, the node whose visit made state x
    and added its noise (−1: an initial model). State x's value is the sum over x and its
    ancestors y of shift_y·g_y + z_y, z_y ~ N(0, noise_std_y² I) independent, and g_y any
    vector of norm at most 1 (the clipped gradients are adversarial within the clip: every
    other unit's gradients are fixed, unit u's chosen to move the view most). Observer
    ``observers[k]`` sees the states ``receptions[k]`` (repeats allowed) and knows the noise
    of the states it made (holder = observer). Given that, its view is Gaussian with
    covariance Σ[o, o'] = the variance of the unknown noise of the common ancestors
    (inclusive) of o and o', and u's contribution c moves it by shift_c·g_c along a_c (a_c[o]
    = 1 when c is o or one of its ancestors). With K[c, c'] = a_cᵀΣ⁺a_c' scaled by the
    shifts, μ² follows netsim's rule (:func:`~netsim.privacy.linear.unit_loss`, through
    :func:`~netsim.privacy.linear.group_losses`): ΣK, exact, when K has no negative entry
    (aligned gradients are then the worst case), else the smaller of Σ|K| and λ_max(K)·uses,
    a bound (a view of two branches without the state where they part can have one; a
    chain, the walk without restarts, never has: its increments are independent). Σ⁺ is
    taken as linear.py takes it (:func:`~netsim.privacy.linear.whitening`:
    singular values above ``RANK_TOLERANCE`` of the largest), and a shift with a part outside
    Σ's range (above ``RANGE_TOLERANCE``) is revealed exactly: μ² = ∞.

    What it guarantees: the exact loss of an observer that knows the path (e.g. from timing),
    the gradients adversarial within the clip, no amplification by iteration assumed (no
    contractivity of the updates is needed). Like the linear accountant it takes each
    gradient as an input fixed in advance, not as a function of the hidden state it is taken
    at: exact for that linear view, which is what a published bound for the same pair is put
    beside. Its exact pairs are at most the path-known figure without amplification
    (:func:`path_known_slopes` with ``amplified=False``, μ² = 2·slope): each contribution
    that reaches the observer is one Gaussian release, and the view is their
    post-processing.

    How: the received states and the states where two received lineages part are the keys;
    the states from a key up to the next key form its segment, whose noise is one column of
    Σ's factor (its unknown variance on the received states below the key) and whose
    contributions of one unit move the view along one column (so they add: one use). The
    view is then at most (received states) × (2 × received states), whatever the run's
    length. Returns (μ², exact), each observers × units; 0 (exact) for a unit none of whose
    contributions reaches the observer. The observer's own units are computed as any other:
    leave them out."""
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    if np.any(parent >= np.arange(parent.size)):
        raise ValueError("parent[x] must come before x (states in the order they were made)")
    unit = np.ascontiguousarray(unit, dtype=np.int64)
    shift = np.ascontiguousarray(shift, dtype=np.float64)
    noise_var = np.ascontiguousarray(noise_std, dtype=np.float64) ** 2
    holder = np.ascontiguousarray(holder, dtype=np.int64)
    mu_squared = np.zeros((len(observers), units))
    exact = np.ones((len(observers), units), dtype=bool)
    seen = np.zeros(parent.size, dtype=np.bool_)
    children = np.zeros(parent.size, dtype=np.int64)
    touched = np.empty(parent.size, dtype=np.int64)
    key_of = np.full(parent.size, -1, dtype=np.int64)
    for k, (observer, states) in enumerate(zip(observers, receptions, strict=True)):
        received = np.unique(np.asarray(states, dtype=np.int64))
        if not received.size:
            continue
        indicator, variance, c_key, c_unit, c_shift, _ = _view_segments(
            parent, unit, shift, noise_var, holder, received, int(observer), seen, children,
            touched, key_of,
        )  # fmt: skip
        if not c_key.size:
            continue
        for losses in _segment_losses(indicator, variance, c_key, c_unit, c_shift, units):
            mu_squared[k, losses.node] = losses.mu_squared
            exact[k, losses.node] = losses.exact
    return mu_squared, exact


def _segment_losses(
    indicator: np.ndarray,
    variance: np.ndarray,
    c_key: np.ndarray,
    c_unit: np.ndarray,
    c_shift: np.ndarray,
    units: int,
) -> Iterator[UnitLosses]:
    """One observer's unit losses from its view in segments (:func:`_view_segments`): each
    segment's noise is one column of Σ's factor, whitened as linear.py whitens; each unit's
    contributions in a segment add (one use, one column); units are composed by
    :func:`~netsim.privacy.linear.group_losses`, :data:`GRAM_CHUNK` entries at a time."""
    white = whitening(indicator * np.sqrt(variance)[None, :])
    projected = white.basis.T @ indicator
    residual = indicator - white.basis @ projected
    revealed = np.abs(residual).max(axis=0, initial=0.0) > RANGE_TOLERANCE
    whitened = projected / white.scale[:, None]
    gram = whitened.T @ whitened
    # each unit's uses: its shifts summed per segment (one column each)
    keys = indicator.shape[1]
    weights = np.bincount(c_key * units + c_unit, weights=c_shift, minlength=keys * units)
    weights = weights.reshape(keys, units)
    present = np.flatnonzero(weights.any(axis=0))
    weights = weights[:, present]
    chunk = max(1, GRAM_CHUNK // max(gram.size, 1))
    for lo in range(0, present.size, chunk):
        part = slice(lo, lo + chunk)
        size = present[part].size
        yield group_losses(
            np.broadcast_to(gram, (size, *gram.shape)), revealed[:, None],
            weights[:, part], np.full((gram.shape[0], size), -1, dtype=np.int64),
            present[part], "node",
        )  # fmt: skip


def expected_first_reception_slopes(
    transition: np.ndarray | sp.spmatrix,
    steps: int,
    contribution_slope: float,
    *,
    tolerance: float = 1e-12,
) -> np.ndarray:
    """What the path-known figure of one contribution averages to over a stationary walk of
    ``steps`` steps, times u's expected contributions (an explanation of the gap between the
    closed form and the runs, not a bound on the path-secret view: a mixture's Rényi
    divergence is bounded by the log-mean-exp of its components', not their mean): entry
    [u, v] = c · T·π_u · Σ_{t≥1} F_t[u, v] / t, with F_t[u, v] the probability
    that the token, leaving u after its update, first reaches v t steps later (t noisy steps
    since the contribution: u's and t − 1 others). Unlike the closed form of
    :func:`path_secret_slopes`, which amplifies every later visit of the token to v by its
    distance and composes them all (Σ_t (W^t)_{uv}/t, whose stationary part grows as ln T),
    only v's first reception counts: later ones are post-processing of it. The sum stops when
    the mass not yet arrived is below ``tolerance`` or at ``steps``."""
    p = transition.toarray() if sp.issparse(transition) else np.asarray(transition, float)
    _, stationary = _symmetric_form(p)
    n = p.shape[0]
    off = 1.0 - np.eye(n)
    first = p.copy()  # F_1
    total = first.copy()
    for t in range(2, steps + 1):
        first = p @ (first * off)
        total += first / t
        if first.sum(axis=0).max() < tolerance:
            break
    slopes = contribution_slope * steps * stationary[:, None] * total
    np.fill_diagonal(slopes, 0.0)
    return slopes


def network_noise_multiplier(
    transition: np.ndarray | sp.spmatrix,
    steps: int,
    epsilon: float,
    delta: float,
    contributions: float | None = None,
) -> float:
    """The noise multiplier z = σ/Δ at which the worst pair of the path-secret closed form
    (:func:`path_secret_slopes`, T = ``steps``, each node contributing ``contributions``
    times, default T·π_u) is (``epsilon``, ``delta``)-DP: the papers' calibration of network
    DP-SGD on a static graph (one contribution's slope is 1/(2z²))."""
    worst = float(path_secret_slopes(transition, steps, 1.0, contributions=contributions).max())
    return math.sqrt(worst / (2.0 * slope_for_epsilon(epsilon, delta)))


def slope_for_epsilon(epsilon: float, delta: float) -> float:
    """The slope s of the linear RDP curve α·s whose ε at ``delta`` is ``epsilon``
    (:func:`epsilons_of_slopes` inverted by bisection; the largest s at most ε)."""
    low, high = 0.0, 1.0
    while float(epsilons_of_slopes(high, delta)) < epsilon:
        high *= 2.0
    for _ in range(100):
        middle = (low + high) / 2.0
        if float(epsilons_of_slopes(middle, delta)) < epsilon:
            low = middle
        else:
            high = middle
    return low


# --- path secret under churn: the papers' sum over re-simulated paths ------------------------


@njit(cache=True)
def _secret_exposure(
    paths: np.ndarray, cap: np.ndarray, observer_of: np.ndarray, total: np.ndarray,
    squares: np.ndarray,
) -> None:  # fmt: skip
    steps = paths.shape[1]
    exposure = np.zeros_like(total)
    uses = np.zeros(observer_of.size, dtype=np.int64)
    contributor = np.empty(steps, dtype=np.int64)
    for m in range(paths.shape[0]):
        exposure[:] = 0.0
        uses[:] = 0
        made = 0  # contributions so far: the noisy steps, so contribution j is 1/(made − j) away
        for t in range(steps):
            v = paths[m, t]
            if v < 0:
                continue
            o = observer_of[v]
            if o >= 0:
                for j in range(made):
                    exposure[o, contributor[j]] += 1.0 / (made - j)
            if uses[v] < cap[v]:
                uses[v] += 1
                contributor[made] = v
                made += 1
        for o in range(total.shape[0]):
            for u in range(total.shape[1]):
                total[o, u] += exposure[o, u]
                squares[o, u] += exposure[o, u] ** 2


def path_secret_exposure(
    paths: np.ndarray, cap: int | np.ndarray, observers: np.ndarray, nodes: int
) -> tuple[np.ndarray, np.ndarray]:
    """The papers' path-secret sum estimated from walk paths (re-simulated by the walk:
    :func:`netsim.protocols.walk.resimulate.resimulated_walk_paths`):
    (mean, standard error) over the paths of Σ 1/k over every visit of observer v (a row, in
    the order of ``observers``) at k noisy steps after a contribution of node u (a column;
    0 for v's own). A node contributes at its first ``cap`` visits (each adds noise; one
    count for all, or one per node) and forwards without noise after. Times one
    contribution's slope c = Δ²/(2σ²) this is the RDP slope whose expectation over a walk
    with fixed law W and stationary start is c·Σ_s π_u Σ_{t=1}^{T−1−s} (W^t)_{uv}/t: the
    closed form of :func:`path_secret_slopes` (Cyffers, Bellet, Upadhyay 2024) with each
    contribution followed to the end of the run instead of for T steps and each node's
    actual contributions in place of T·π_u."""
    paths = np.ascontiguousarray(paths, dtype=np.int64)
    count = paths.shape[0]
    if count < 2:
        raise ValueError("the standard error needs at least two paths")
    observer_of = np.full(nodes, -1, dtype=np.int64)
    observer_of[np.asarray(observers, dtype=np.int64)] = np.arange(len(observers))
    total = np.zeros((len(observers), nodes))
    squares = np.zeros_like(total)
    caps = np.ascontiguousarray(np.broadcast_to(np.asarray(cap, dtype=np.int64), (nodes,)))
    _secret_exposure(paths, caps, observer_of, total, squares)
    mean = total / count
    variance = np.maximum(squares / count - mean**2, 0.0) * count / (count - 1)
    standard_error = np.sqrt(variance / count)
    rows = np.arange(len(observers))
    mean[rows, observers] = 0.0
    standard_error[rows, observers] = 0.0
    return mean, standard_error


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
