"""Published per-pair privacy bounds of gossip protocols, computed as their authors' code computes
them, to be put beside the exact loss of the same run (``docs/papers.md``, "Where it differs
from composing messages one by one"; the exact side is
:mod:`netsim.privacy.linear`, or :mod:`netsim.privacy.pairwise` for plain averaging).

Each function restates a published formula in netsim's own code; the docstring names the paper,
the statement, and the repository and function whose conventions (which messages, which
variance, which rounds, what clipping) it follows. None of them reads those repositories.

These are the authors' numbers, not netsim's guarantees. Composing every message an observer
receives as an independent Gaussian release (Muffliato's sum) is not an upper bound when the
messages share noise: on the path 0 – 1 – 2 observer 0, who knows its own value, solves its two
messages for node 2's (local DP, λ = 1), where the sum gives λ = 1/3
(``tests/test_published_bounds.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from netsim.lazy import lazy_module
from netsim.log import BOOL, F64, I64, STR, TableSchema
from netsim.privacy.pairwise import Mixing

if TYPE_CHECKING:
    import pandas as pd
    import scipy.sparse as sp
else:
    pd = lazy_module("pandas")
    sp = lazy_module("scipy.sparse")

AUDIT_TABLE = TableSchema(
    name="bound_audit",
    columns=(
        ("observer", I64),
        ("record", I64),
        ("bound", STR),
        ("exact_rho", F64),
        ("bound_rho", F64),
        ("exact_epsilon", F64),
        ("bound_epsilon", F64),
        ("below", BOOL),
    ),
    description=(
        "A published bound beside the exact loss of the same pair: observer and unit as in "
        "privacy_pairs (record: the unit id), the bound's name (muffliato_message_sum: "
        "Muffliato's per-message sum as its authors' code computes it, for gossip averaging; "
        "muffliato_sgd_corrected: Muffliato-SGD's Thm 11 as MFDL's code computes it, under "
        "trust pndp with local noise on a static graph; decor_secldp: DECOR's accountant "
        "under trust secldp with decor noise; walk_path_secret: the path-secret closed form "
        "of Cyffers, Bellet, Upadhyay for DP-SGD on a walk with a fixed law, per single "
        "observer, whose exact side is the exact Gaussian loss of the path-known view, an "
        "observer that knows the realised path, e.g. from timing: the closed form assumes "
        "the path secret, so below counts the pairs whose protection under it rests on the "
        "path staying secret, not an arithmetic error), the exact and the bound's RDP "
        "slopes, the exact epsilon (Gaussian profile) and the bound's epsilon (as its "
        "authors convert it; the Gaussian profile of its slope where they state RDP only; "
        "netsim's RDP conversion for walk_path_secret), and whether the bound is below the "
        "exact loss (slopes compared)."
    ),
    role="ledger",
    metrics=("exact_rho", "bound_rho"),
)

#: A published slope this far below the exact one (relative) counts as below it.
BELOW_TOLERANCE = 1e-9


def audit_lines(audit: pd.DataFrame | None) -> list[str]:
    """A run summary's lines on its ``bound_audit`` table: per published bound, the pairs it
    puts below their exact loss (for the walk's path-secret closed form, the loss of an
    observer that knows the path)."""
    if audit is None or not len(audit):
        return []
    return [
        f"bound audit: {bound} is below the exact loss for {int(part['below'].sum()):,} of "
        f"{len(part):,} pairs{PATH_KNOWN_CLAUSE if bound == 'walk_path_secret' else ''}"
        for bound, part in audit.groupby("bound", sort=True)
    ]


#: What ``below`` means for the walk's closed form, said where the audit is printed.
PATH_KNOWN_CLAUSE = (
    " (exact: an observer that knows the walk's path; a pair below is protected only while "
    "the path stays secret)"
)


def _dense(weights: Mixing) -> np.ndarray:
    return weights.toarray() if sp.issparse(weights) else np.asarray(weights, dtype=float)


def muffliato_message_sum(
    mixing: Sequence[Mixing], observer: int, sigma: float, sensitivity: float
) -> np.ndarray:
    """Muffliato's per-message sum: for every record u, the RDP slope (ρ(α) = α·slope) that
    the authors' code charges observer ``observer`` for Gaussian gossip averaging, each message
    it receives counted as an independent Gaussian release and the releases composed by adding.

    The paper: Cyffers, Even, Bellet, Massoulié, *Muffliato*, NeurIPS 2022 (arXiv 2206.05091),
    the pairwise network DP of gossip averaging (Thm. 1 there, for a fixed W; time-varying
    W_t here, as netsim's runs have):

        slope_u = Δ² / (2σ²) · Σ_t Σ_{w ∈ N_t(v), w ≠ v} (P_t[w, u])² / ‖P_t[w, :]‖²,

    with P_t = W_{t−1} ⋯ W_0 (P_0 = I) the map from the noisy values x + z to round t's state
    and N_t(v) = {w : W_t[v, w] > 0}. The conventions are those of ``totilas/muffliato``,
    ``muffliato.py::simulation`` with ``graphutils.py::contrib``:

    - the messages: in each round, the current state of every neighbour w ≠ v (its row of P_t);
    - the variance: a message's whole noise, σ²‖P_t[w, :]‖², the observer's own noise and the
      record's included — nothing the observer knows is subtracted (its own noise, its earlier
      messages), so the sum neither uses what v knows nor the noise the messages share;
    - the composition: per-message losses added over the neighbours and the rounds.

    Two differences, both stated: (1) the rounds. With a fixed W the code's loop starts from
    W¹ (its round t charges W^{t+1}): its T rounds are rounds 1..T of this sum over T + 1
    rounds, i.e. this sum minus round 0's term, which is Δ²/(2σ²) for a neighbour u of v
    (its raw noisy value) and 0 for the others. Here round t charges the messages v averages in
    round t, P_t, as :func:`netsim.privacy.pairwise.received_rows` and netsim's runs number
    them. (2) No clipping: the authors' figure (``figa.py::vector_loss``) clips the summed
    loss at the local-DP loss; this returns the sum.

    ``mixing``: W_0, …, W_{K−1} (n × n, dense or sparse, row v the weights v gives). Returns the
    slope of each record (length n), NaN at the observer's own."""
    if sigma <= 0 or sensitivity < 0:
        raise ValueError("sigma must be positive and sensitivity non-negative")
    if not mixing:
        raise ValueError("muffliato_message_sum needs at least one round")
    n = mixing[0].shape[0]
    if not 0 <= observer < n:
        raise ValueError(f"observer {observer} is not a node of a {n}-node run")
    total = np.zeros(n)
    state = np.eye(n)  # P_t
    for weights in mixing:
        row = _dense(weights[observer]).ravel()
        heard = np.flatnonzero(row > 0)
        heard = heard[heard != observer]
        squares = state[heard] ** 2
        norms = squares.sum(axis=1)
        used = norms > 0
        total += (squares[used] / norms[used, None]).sum(axis=0)
        state = np.asarray(weights @ state)
    slope = sensitivity**2 * total / (2.0 * sigma**2)
    slope[observer] = math.nan
    return slope


def muffliato_message_sums(
    mixing: Sequence[Mixing], observers: np.ndarray, sigma: float, sensitivity: float
) -> np.ndarray:
    """:func:`muffliato_message_sum` for every observer of ``observers`` at once (observers ×
    records; NaN at each observer's own record), in one pass over the rounds: the sum over
    round t's neighbours w ≠ v of P_t[w, u]²/‖P_t[w, :]‖² is row v of A_t Q_t, with A_t the
    round's links (W_t > 0 off the diagonal) and Q_t those normalised squares."""
    if sigma <= 0 or sensitivity < 0:
        raise ValueError("sigma must be positive and sensitivity non-negative")
    n = mixing[0].shape[0]
    observers = np.asarray(observers, dtype=np.int64)
    total = np.zeros((observers.size, n))
    state = np.eye(n)  # P_t
    for weights in mixing:
        links = sp.csr_matrix(weights)[observers].tocoo()
        keep = (links.data > 0) & (observers[links.row] != links.col)
        heard = sp.csr_matrix(
            (np.ones(int(keep.sum())), (links.row[keep], links.col[keep])),
            shape=(observers.size, n),
        )
        squares = state**2
        norms = squares.sum(axis=1)
        normalised = np.divide(squares, norms[:, None], out=np.zeros_like(squares),
                               where=norms[:, None] > 0)  # fmt: skip
        total += np.asarray(heard @ normalised)
        state = np.asarray(weights @ state)
    slope = sensitivity**2 * total / (2.0 * sigma**2)
    slope[np.arange(observers.size), observers] = math.nan
    return slope


def mfdl_corrected_muffliato(
    W: Mixing,
    u: int | Sequence[int] | np.ndarray,
    v: int,
    T: int,
    alpha: float,
    sigma: float,
    sensitivity: float,
) -> float | np.ndarray:
    """The corrected Muffliato-GD bound, ε^T_{u→v}(α) (a Rényi divergence at order α, not a
    slope), as MFDL's code computes it; vectorised over the record ``u`` (an int gives a float,
    a sequence an array).

    The statement: Cyffers, Even, Bellet, Massoulié, *Muffliato* (arXiv 2206.05091), Thm. 11,
    in the corrected form that Bellet, Cyffers, Frey, Gaudel, Lerévérend, Taïani (*Unified
    Privacy Guarantees for Decentralized Learning via Matrix Factorization*, ICLR 2026, arXiv
    2510.17480) compare with: with s = j − t substituted in Σ_{t=1}^{T} Σ_{j=t}^{T},

        ε = α Δ² / (2σ²) · min(T, Σ_{s=0}^{T−1} (T − s) Σ_{w ∈ N(v)} (W^s)[u, w] / ‖W^s[:, w]‖²).

    The conventions are those of ``dimiarbre/MFDL``, ``MFDL/simulations/muffliato_accounting.py::
    epsilon_upper_bound``: a fixed W; (W^s)[u, w] to the first power (not squared, unlike the
    per-message sum of :func:`muffliato_message_sum`) over the squared norm of W^s's column w;
    N(v) = {w : W[v, w] > 0}, which holds v itself when W[v, v] > 0 — as in MFDL, whose graphs
    carry self-loops (``utils.get_graph``), so ``G.neighbors(v)`` includes v; the sum clipped at
    T (the local-DP composition of T steps, as MFDL does after discussing it with Muffliato's
    authors). The (T − s) form equals the double sum (``tests/test_published_bounds.py``)."""
    (epsilon,) = mfdl_corrected_muffliato_observers(W, [v], T, alpha, sigma, sensitivity)
    if np.ndim(u) == 0:
        return float(epsilon[int(u)])  # type: ignore[arg-type]
    return epsilon[np.asarray(u, dtype=np.int64)]


def mfdl_corrected_muffliato_observers(
    W: Mixing,
    observers: Sequence[int] | np.ndarray,
    T: int,
    alpha: float,
    sigma: float,
    sensitivity: float,
) -> np.ndarray:
    """:func:`mfdl_corrected_muffliato` of every record against each of ``observers``
    (observers × n): the powers W^s and their column norms are computed once for all of them,
    and each observer's sum is formed exactly as for one."""
    if sigma <= 0 or sensitivity < 0 or alpha <= 1 or T < 0:
        raise ValueError("need sigma > 0, sensitivity ≥ 0, alpha > 1 and T ≥ 0")
    weights = _dense(W)
    n = weights.shape[0]
    observers = np.asarray(observers, dtype=np.int64).reshape(-1)
    if weights.shape != (n, n) or ((observers < 0) | (observers >= n)).any():
        raise ValueError(f"W must be square and each observer a node, got {weights.shape}")
    neighbours = [np.flatnonzero(weights[v] > 0) for v in observers]
    total = np.zeros((observers.size, n))
    power = np.eye(n)  # W^s
    for s in range(T):
        norms = (power**2).sum(axis=0)
        for k, around in enumerate(neighbours):
            total[k] += (T - s) * (power[:, around] / norms[None, around]).sum(axis=1)
        power = power @ weights
    return alpha * sensitivity**2 / (2.0 * sigma**2) * np.minimum(total, T)


# ----- DECOR's SecLDP bound (Allouah, Koloskova, El Firdoussi, Jaggi, Guerraoui, ICML 2024) -----


def decor_secldp_slope(
    link_a: np.ndarray,
    link_b: np.ndarray,
    n: int,
    *,
    sigma: float,
    sigma_cor: float,
    sensitivity: float,
) -> float:
    """DECOR's per-round SecLDP charge as an RDP slope (ρ(α) = α·slope): with the independent
    noise σ and the pairwise noise σ_cor of every link (i, j) of the topology (v_ij = −v_ji), an
    eavesdropper of every message sees each round's inputs with noise covariance
    Σ = σ²I + σ_cor²L (L the topology's Laplacian), and one unit moving one node's input by Δ
    costs at most Δ²·max_i [Σ⁻¹]_ii / 2.

    The paper: Allouah, Koloskova, El Firdoussi, Jaggi, Guerraoui, *The Privacy Power of
    Correlated Noise in Decentralized Learning*, ICML 2024 (arXiv 2405.01031). The conventions
    follow its code (``elfirdoussilab1/DECOR``, ``rdp_account``: 2C²·max_i [Σ⁻¹]_ii per round
    for user-level DP, Δ = 2C), composed over T rounds by adding: the caller multiplies by the
    rounds a unit is used in. It assumes every node adds every link's secret each round; under
    churn an offline neighbour does not, which the exact accountant follows and this formula
    does not."""
    if sigma <= 0 or sigma_cor < 0 or sensitivity < 0:
        raise ValueError("need sigma > 0, sigma_cor ≥ 0 and sensitivity ≥ 0")
    laplacian = np.zeros((n, n))
    np.add.at(laplacian, (link_a, link_a), 1.0)
    np.add.at(laplacian, (link_b, link_b), 1.0)
    np.add.at(laplacian, (link_a, link_b), -1.0)
    np.add.at(laplacian, (link_b, link_a), -1.0)
    covariance = sigma**2 * np.eye(n) + sigma_cor**2 * laplacian
    worst = float(np.diag(np.linalg.inv(covariance)).max())
    return sensitivity**2 * worst / 2.0


def decor_epsilon(slope: float, delta: float) -> float:
    """DECOR's (ε, δ) of a composed RDP slope ρ (ρ(α) = α·ρ): ε = ρ + 2√(ρ ln(1/δ)), the
    conversion at the best order (as its code reports ε; the exact Gaussian profile of the same
    slope is smaller)."""
    return slope + 2.0 * math.sqrt(slope * math.log(1.0 / delta))
