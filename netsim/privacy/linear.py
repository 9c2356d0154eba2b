"""One accountant for every linear-Gaussian protocol: an observer's view as O = A·G + B·Z
(restated with its sources in ``docs/explanation/linear-accountant.md``).

A decentralised protocol whose messages are linear in the clipped gradients G and in Gaussian
noise Z — Muffliato's averaging, decentralised SGD with local, pairwise-cancelling (DECOR),
zero-sum (Zip-DL) or temporally correlated (MAFALDA-SGD) noise — gives every observer a view
that is Gaussian once what the observer knows is subtracted. The gradients are adversarial
within their clip: changing one privacy unit (a record, or all of a node's records) moves each
input it was used in by at most its sensitivity, so the view's mean moves by

    a = Σ_s Δ_s · d_s · A e_s,   ‖d_s‖ ≤ 1 (one unit vector per use s of the unit),

and its covariance is Σ = B̃B̃ᵀ over the noise the observer does not know. The loss is then a
Gaussian mechanism of sensitivity μ = √(aᵀΣ⁺a) and unit noise: ρ(α) = α μ²/2 (RDP), μ-GDP,
and (ε, δ) from the exact Gaussian profile (Balle & Wang 2018, Thm 8). A shift with a part
outside Σ's range is revealed exactly: μ = ∞, reported as such.

Worst case over the uses' directions. With K[s, t] = Δ_sΔ_t e_sᵀAᵀΣ⁺Ae_t (the whitened
uses' Gram), μ² = max over unit vectors d_s of Σ_{s,t} K[s,t]⟨d_s, d_t⟩. When every entry of K
is non-negative, aligned uses (all d_s equal) attain it: μ² = Σ K, exact. Otherwise the pair
says it is a bound: the smaller of Σ|K| (MFDL's sensitivity for repeated participation,
Bellet et al. 2026, computes this sum) and λ_max(K)·(number of uses) (the quadratic form is at
most λ_max Σ‖d_s‖²), which is below Σ|K| where Σ|K| passes local DP — and at most the unit's
local-DP loss, since every view is a post-processing of the view of every step's input
(:func:`capped_by_local`).

The view's rank. A view small enough for its factor (:data:`FACTOR_LIMIT` entries) keeps the
singular values of B̃ itself above :data:`RANK_TOLERANCE` times the largest (its SVD, after a QR
of B̃ᵀ when B̃ is wide; the cut of :mod:`netsim.privacy.pairwise`, so Muffliato's pairs keep
their numbers). A larger view accumulates Σ = B̃B̃ᵀ round by round and is whitened by its
Cholesky factor when Σ has full rank at :data:`GRAM_TOLERANCE` (as decentralised SGD's views
have: every message carries its sender's fresh noise), else by its eigenvectors above that
cut. A looser cut drops directions in which the observer does see noise (a test holds that).
A view of fresh noise whose factor would hold more than :data:`GRAM_FIRST` entries (up to
:data:`FACTOR_LIMIT`; decentralised SGD's 600-row views of a 500-node run) forms its Gram
first: when Σ has full rank at :data:`GRAM_TOLERANCE` the factor's SVD would keep every
direction as well (its singular values are then above 10⁻⁶ of the largest), so the view is
whitened by Σ's Cholesky factor, its whitened coefficients recursed backwards through the
rounds (:func:`recursive_grams`; the losses agree with the factor's to about 10⁻¹⁴); otherwise
the factor is formed and cut as above.

Protocols hand the accountant a :class:`LinearRun`: per round, the mixing W_r, who stepped
and with what step size and noise, the secrets, and every message's ends and fate. The
protocol model, written once here for every built-in::

    h_i = x_i + y_i                    (node i's state after its step; y_i = −η (ḡ_i + n_i))
    m_{i→j} = h_i + ξ_{i→j}            (the message i sends j; ξ: per-message noise, Zip-DL)
    x'_j = Σ_i W_r[j, i] (h_i + ξ_{i→j})   (the average over the messages that arrived and
                                         were used; an offline node keeps its state)

so a message of round r is x^r + y^r (+ ξ). Muffliato is the case with one input at round 0
(the noisy value) and none after; its Chebyshev acceleration adds (1 − γ) x^{r−1}.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
from threadpoolctl import ThreadpoolController

from netsim.compiled import njit, prange
from netsim.kernel_cache import guard_kernels
from netsim.lazy import lazy_module
from netsim.privacy.mechanisms import gaussian_epsilon
from netsim.privacy.pairwise import RANK_TOLERANCE

if TYPE_CHECKING:
    import scipy.linalg as linalg
    import scipy.sparse as sp
else:
    linalg = lazy_module("scipy.linalg")
    sp = lazy_module("scipy.sparse")

#: A shift whose part outside the view's noise range is above this share of its length is
#: revealed exactly (μ = ∞). Round-off leaves about 1e-15 of a shift that is in the range.
RANGE_TOLERANCE = 1e-8

#: Entries of a use Gram K below −this share of its diagonal's largest count as negative: the
#: aligned sum is then not the worst case, and Σ|K| (a bound) is reported.
SIGN_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Whitening:
    """Σ⁺ of a view in factored form: Σ = U diag(s²) Uᵀ on its range (``basis`` U, rows ×
    rank; ``scale`` s), or, for a Σ of full rank, its Cholesky factor ``lower`` (Σ = LLᵀ; the
    whitened shift is then L⁻¹a)."""

    basis: np.ndarray
    scale: np.ndarray
    lower: np.ndarray | None = None

    @property
    def rank(self) -> int:
        return int(self.scale.size) if self.lower is None else int(self.lower.shape[0])

    def whiten_from(self, shifts: np.ndarray, lo: int) -> np.ndarray:
        """Whitened shifts (rank × m) of shift columns whose rows before ``lo`` are zero
        (``shifts`` holds the rows from ``lo`` on). With a Cholesky factor the rows before
        ``lo`` of L⁻¹a are zero too, so only the trailing block is solved."""
        if self.lower is not None:
            out = np.zeros((self.rank, shifts.shape[1]))
            out[lo:] = linalg.solve_triangular(
                self.lower[lo:, lo:], shifts, lower=True, check_finite=False
            )
            return out
        return (self.basis[lo:].T @ shifts) / self.scale[:, None]


def whitening(factor: np.ndarray) -> Whitening:
    """The :class:`Whitening` of Σ = B̃B̃ᵀ from the noise factor B̃ (rows × columns): the left
    singular vectors and values of B̃ above :data:`RANK_TOLERANCE` of the largest. A wide B̃ is
    first reduced to the R of a QR of B̃ᵀ (same left singular vectors and values)."""
    factor = np.asarray(factor, dtype=float)
    rows, columns = factor.shape
    if rows == 0 or columns == 0:
        return Whitening(np.zeros((rows, 0)), np.zeros(0))
    if columns > 2 * rows:
        factor = linalg.qr(factor.T, mode="r", check_finite=False)[0][:rows].T
    left, singular, _ = np.linalg.svd(factor, full_matrices=False)
    top = float(singular.max(initial=0.0))
    keep = singular > RANK_TOLERANCE * max(top, 1e-300)
    return Whitening(left[:, keep], singular[keep])


@dataclass(frozen=True)
class UnitLoss:
    """One privacy unit's loss against one view: μ² (``inf`` when revealed exactly) and
    whether it is exact (aligned uses are the worst case) or a bound (Σ|K|)."""

    mu_squared: float
    exact: bool


def unit_loss(gram: np.ndarray, revealed: np.ndarray, sensitivities: np.ndarray) -> UnitLoss:
    """The loss of a unit used at inputs whose whitened unit shifts have the Gram ``gram``
    (uses × uses: aᵀΣ⁺a for unit moves), each use moving its input by up to
    ``sensitivities[s]``, a use with ``revealed`` set being seen without noise."""
    if sensitivities.size == 0 or not np.any(sensitivities > 0):
        return UnitLoss(0.0, True)
    if np.any(revealed & (sensitivities > 0)):
        return UnitLoss(math.inf, True)
    scaled = gram * np.outer(sensitivities, sensitivities)
    floor = -SIGN_TOLERANCE * max(float(np.diag(scaled).max(initial=0.0)), 1e-300)
    if scaled.min(initial=0.0) >= floor:
        return UnitLoss(float(scaled.sum()), True)
    spectral = float(np.linalg.eigvalsh(scaled)[-1]) * scaled.shape[0]
    return UnitLoss(min(float(np.abs(scaled).sum()), spectral), False)


def epsilon_of(mu_squared: float, delta: float) -> float:
    """(ε at δ) of a Gaussian mechanism with sensitivity √μ² and unit noise (exact profile)."""
    if math.isinf(mu_squared):
        return math.inf
    return gaussian_epsilon(1.0, math.sqrt(max(mu_squared, 0.0)), delta)


# ----- the protocol model ---------------------------------------------------------------------


@dataclass
class LinearRound:
    """What one round of a linear-Gaussian protocol did (the protocol model of this module).

    ``mixing`` W_r (n × n; the row of a node that did not average is e_j). ``step`` (n): the
    coefficient of a node's gradient input in its state (η_r, 0 for a node that did not step).
    ``noise_std`` (n): the standard deviation of its independent noise in gradient units.
    ``sensitivity`` (n): how far one use of a unit moves its gradient input (2C/b replace-one).
    ``batch`` (n): which use group of the node's records the step used (−1: none).
    Secrets (DECOR): secret k, of standard deviation ``secret_std[k]``, is added to node
    ``secret_a[k]``'s gradient noise (when ``secret_a_added[k]``) and subtracted from
    ``secret_b[k]``'s (when ``secret_b_added[k]``). Messages: ``sent_src``/``sent_dst`` with
    ``delivered`` (received by its destination) and ``message_std`` (the standard deviation of
    per-message noise ξ in model units, 0 when none) with ``zero_sum`` (the ξ of one sender's
    messages of the round sum to zero, Zip-DL). ``gamma``: Chebyshev acceleration, x^{r+1} =
    γ W_r h + (1 − γ) x^{r−1} (None: none)."""

    mixing: sp.csr_matrix
    step: np.ndarray
    noise_std: np.ndarray
    sensitivity: np.ndarray
    batch: np.ndarray
    sent_src: np.ndarray
    sent_dst: np.ndarray
    delivered: np.ndarray
    secret_a: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    secret_b: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    secret_std: np.ndarray = field(default_factory=lambda: np.zeros(0))
    secret_a_added: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    secret_b_added: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    message_std: np.ndarray | None = None
    zero_sum: bool = False
    gamma: float | None = None


@dataclass
class LinearRun:
    """Every round of a run, and the noise's temporal correlation: ``temporal`` (T × T, lower
    triangular) makes a node's independent noise at its k-th step Σ_j temporal[k, j] z_j with
    z_j i.i.d. N(0, 1) scaled by that step's ``noise_std`` (None: independent steps)."""

    n: int
    rounds: list[LinearRound] = field(default_factory=list)
    temporal: np.ndarray | None = None

    def step_index(self) -> np.ndarray:
        """(rounds × n) each node's 0-based step count at each round (−1 where it did not
        step): the row of ``temporal`` its noise uses."""
        stepped = np.array([r.step != 0 for r in self.rounds], dtype=bool)
        counts = np.cumsum(stepped, axis=0) - 1
        return np.where(stepped, counts, -1)


# ----- views ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class View:
    """An observer's view of a run: which messages it sees (``rows``: per round, indices into
    that round's messages) and which noise it knows (``known_nodes``: their independent and
    per-message noise, and every secret with an end among them; ``known_secrets``: every
    secret, for local DP). ``secret_holders``, when given, replaces ``known_nodes`` as the
    nodes whose secrets are known (an accountant told wrongly what the observer holds, in the
    audit that must catch it)."""

    rows: list[np.ndarray]
    known_nodes: np.ndarray
    known_secrets: bool = False
    secret_holders: np.ndarray | None = None

    def holders(self, n: int) -> np.ndarray:
        """The mask of nodes whose secrets the observer knows."""
        return _mask(n, self.known_nodes if self.secret_holders is None else self.secret_holders)


def pndp_view(run: LinearRun, members: Sequence[int], *, knows_noise: bool = True) -> View:
    """Pairwise network DP (Cyffers & Bellet; Bellet et al. 2026): the messages delivered to a
    member of the coalition ``members`` from outside it; it knows its members' noise and the
    secrets they share (``knows_noise`` False: an observer that forgot its own noise, the
    weaker adversary some papers' sums assume)."""
    inside = _mask(run.n, members)
    rows = [np.flatnonzero(r.delivered & inside[r.sent_dst] & ~inside[r.sent_src])
            for r in run.rounds]  # fmt: skip
    return View(rows, np.flatnonzero(inside) if knows_noise else np.zeros(0, np.int64))


def secldp_view(run: LinearRun, members: Sequence[int]) -> View:
    """SecLDP (Allouah et al. 2024): every message sent from outside the coalition (an
    eavesdropper on every link, with the curious users ``members``, possibly none); the secret
    of two users outside the coalition stays hidden."""
    inside = _mask(run.n, members)
    rows = [np.flatnonzero(~inside[r.sent_src]) for r in run.rounds]
    return View(rows, np.flatnonzero(inside))


def ldp_view(run: LinearRun, node: int) -> View:
    """Local DP of ``node``'s units: every message it sends is public and every noise but its
    own (independent and per-message) is known, secrets included. Its sent messages are then
    all the others reveal about it (each other message is a known function of them)."""
    rows = [np.flatnonzero(r.sent_src == node) for r in run.rounds]
    others = np.setdiff1d(np.arange(run.n), [node])
    return View(rows, others, known_secrets=True)


def _mask(n: int, members: Sequence[int]) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[np.asarray(list(members), dtype=np.int64)] = True
    return mask


#: A view whose noise factor B̃ would hold more entries than this is accounted from its Gram
#: Σ = B̃B̃ᵀ, accumulated round by round (a 2,048-node run's factor has 10⁸–10⁹ entries).
FACTOR_LIMIT = 30_000_000

#: On the Gram path, eigenvalues of Σ below this share of the largest count as zero (Σ's
#: eigenvalues carry about 1e-16 of the largest in error, so the factor's cut cannot be used).
GRAM_TOLERANCE = 1e-12

#: A view with fresh noise in every round it sees whose factor would hold more entries than
#: this (up to :data:`FACTOR_LIMIT`) first forms its Gram, and keeps it when Σ has full rank at
#: :data:`GRAM_TOLERANCE` (Cholesky whitening; the factor's cut would keep every direction too,
#: its singular values then being above 10⁻⁶ of the largest); otherwise it is accounted from
#: its factor. The factor's QR dominates such a view (a 600 × 50,000 factor: seconds).
GRAM_FIRST = 4_000_000


@dataclass
class ViewSystem:
    """A view as a linear system. Rows are the view's messages in round order; ``first[r]``
    is the first row of round r or later (the rows before it do not depend on round r's
    inputs). ``inputs[r]`` (rows from ``first[r]`` × n; no rows for a round without a step):
    the coefficient of each node's gradient input at round r (the columns of A). The noise the
    observer does not know, as its factor B̃ (``noise``, rows × k) or its Gram Σ = B̃B̃ᵀ
    (``gram``)."""

    inputs: list[np.ndarray]
    first: np.ndarray
    rows: int
    noise: np.ndarray | None = None
    gram: np.ndarray | None = None
    #: the Gram stands in for a factor (:data:`GRAM_FIRST`): only a full-rank Σ is whitened,
    #: and the rounds of independent noise keep no ``inputs`` (:func:`recursive_grams`)
    gram_first: bool = False

    def whitening(self) -> Whitening | None:
        """Σ⁺ in factored form, from the factor (its SVD) or from the Gram (its eigenvectors
        above :data:`GRAM_TOLERANCE`); None for a Gram in place of a factor
        (:attr:`gram_first`) whose Σ has not full rank."""
        if self.noise is not None:
            return whitening(self.noise)
        assert self.gram is not None
        if self.rows == 0:
            return Whitening(np.zeros((0, 0)), np.zeros(0))
        values = np.linalg.eigvalsh(self.gram)
        if values.min() > GRAM_TOLERANCE * values.max():
            lower = linalg.cholesky(self.gram, lower=True, check_finite=False)
            return Whitening(np.zeros((self.rows, 0)), np.zeros(0), lower)
        if self.gram_first:
            return None
        values, vectors = np.linalg.eigh(self.gram)
        keep = values > GRAM_TOLERANCE * max(float(values.max(initial=0.0)), 1e-300)
        return Whitening(vectors[:, keep], np.sqrt(values[keep]))


def view_system(run: LinearRun, view: View, *, force: str | None = None) -> ViewSystem:
    """Propagate the view's rows back through the rounds (the protocol model in the module
    docstring): q^r, each row's coefficient on h^r = x^r + y^r, is γ_r q^{r+1} W_r +
    (1 − γ_{r+1}) q^{r+2} plus the rows of round r themselves; a node's input at round r then
    has coefficient η_r q^r[:, j], a message's noise γ_r q^{r+1}[:, j] W_r[j, i] (and 1 in its
    own row). ``force`` ``factor`` or ``gram`` overrides the choice by size."""
    n, rounds = run.n, run.rounds
    offsets = np.cumsum([0] + [rows.size for rows in view.rows])
    total = int(offsets[-1])
    known = _mask(n, view.known_nodes)
    holders = view.holders(n)
    gram_first = force is None and _gram_first(run, view)
    use_factor = _uses_factor(run, view, total, force, gram_first)
    # q^{r+1} and q^{r+2}, each kept from the first row that depends on its round on, in
    # Fortran order: the sparse product with W_r then reads each row's coefficients
    # contiguously (four times faster than on C-ordered rows)
    after = np.zeros((0, n), order="F")
    after2 = np.zeros((0, n), order="F")
    inputs: list[np.ndarray] = [np.zeros((0, n))] * len(rounds)
    blocks: list[tuple[int, np.ndarray]] = []  # (first row, factor columns)
    gram = None if use_factor else np.zeros((total, total))
    for r in range(len(rounds) - 1, -1, -1):
        this = rounds[r]
        lo, hi = int(offsets[r]), int(offsets[r + 1])
        gamma = 1.0 if this.gamma is None else this.gamma
        current = np.zeros((total - lo, n), order="F")
        # q^{r+1} W_r for the rows of round r + 1 on: (W_rᵀ q^{r+1}ᵀ)ᵀ, sparse from the right
        if hi < total:
            current[hi - lo :] = gamma * np.asarray((this.mixing.T @ after.T).T)
        following = rounds[r + 1] if r + 1 < len(rounds) else None
        if following is not None and following.gamma is not None and after2.shape[0]:
            current[total - after2.shape[0] - lo :] += (1.0 - following.gamma) * after2
        own = view.rows[r]
        current[np.arange(own.size), this.sent_src[own]] += 1.0
        stepped = bool(np.any(this.step != 0))
        # a round without a step (a gossip pass) moves no input: its coefficients are not kept
        if (
            stepped
            and gram_first
            and (std := _input_std(this, known, holders, view.known_secrets)) is not None
        ):
            # independent noise only: Σ's part is a SYRK, and recursive_grams needs no inputs
            scaled = current * (this.step * std)[None, :]
            gram[lo:, lo:] += scaled @ scaled.T
            after2, after = after, current
            continue
        inputs[r] = current * this.step[None, :] if stepped else np.zeros((0, n))
        if this.message_std is not None and np.any(this.message_std > 0):
            padded = np.zeros((total - lo, n))
            padded[hi - lo :] = after
            for block in _message_noise(this, gamma, padded, own, known):
                _add_noise(block, lo, blocks, gram)
        if not stepped:
            pass  # a gossip pass without a step: no input noise
        elif run.temporal is None and gram is not None:
            covariance = _input_covariance(this, known, holders, view.known_secrets)
            spread = np.asarray(covariance @ inputs[r].T)
            gram[lo:, lo:] += inputs[r] @ spread
        elif run.temporal is None:
            for block in _round_input_noise(this, inputs[r], known, holders, view.known_secrets):
                _add_noise(block, lo, blocks, gram)
        after2, after = after, current
    if run.temporal is not None:
        blocks.append((0, _temporal_noise(run, inputs, offsets, total, known)))
    first = offsets[:-1].astype(np.int64)
    if gram is not None:
        return ViewSystem(inputs, first, total, gram=gram, gram_first=gram_first)
    return ViewSystem(inputs, first, total, noise=_stacked_factor(blocks, total))


def _uses_factor(
    run: LinearRun, view: View, total: int, force: str | None, gram_first: bool
) -> bool:
    """Whether :func:`view_system` forms the view's factor (else its Gram). Every message a
    node sends right after its own step carries that step's fresh noise, so the view's Σ is
    well conditioned; messages of gossip passes without a step (or of Muffliato's rounds
    after the first) mix old noise only and need the factor's rank cut."""
    use_factor = (
        force == "factor"
        or (force is None and (run.temporal is not None or not _fresh(run, view)
                               or total * _column_estimate(run, view) <= FACTOR_LIMIT)
            and not gram_first)
    )  # fmt: skip
    if run.temporal is not None and not use_factor:
        raise ValueError("a temporally correlated run is accounted from its factor")
    return use_factor


def _stacked_factor(blocks: list[tuple[int, np.ndarray]], total: int) -> np.ndarray:
    """The view's factor B̃ (total rows): each block's columns from its first row on."""
    noise = np.zeros((total, sum(b.shape[1] for _, b in blocks)))
    column = 0
    for lo, block in blocks:
        noise[lo:, column : column + block.shape[1]] = block
        column += block.shape[1]
    return noise


def _fresh(run: LinearRun, view: View) -> bool:
    """Whether every round the view sees a message of had a step (fresh noise in it)."""
    return all(
        np.any(r.step != 0) for r, own in zip(run.rounds, view.rows, strict=True) if own.size
    )


def _gram_first(run: LinearRun, view: View) -> bool:
    """Whether the view forms its Gram in place of its factor (:data:`GRAM_FIRST`): fresh noise,
    no per-message noise, acceleration or temporal correlation (:func:`recursive_grams`
    applies), and a factor of more than :data:`GRAM_FIRST` entries up to :data:`FACTOR_LIMIT`."""
    if not (increments_apply(run) and _fresh(run, view)):
        return False
    return (
        GRAM_FIRST
        < sum(rows.size for rows in view.rows) * _column_estimate(run, view)
        <= FACTOR_LIMIT
    )


def _input_std(
    this: LinearRound, known: np.ndarray, holders: np.ndarray, known_secrets: bool
) -> np.ndarray | None:
    """The standard deviation (n) of round r's input noise the observer does not know when it
    is independent across nodes (no hidden secret; :func:`_input_covariance`'s diagonal), else
    None."""
    if (
        this.secret_std.size
        and not known_secrets
        and np.any(~(holders[this.secret_a] | holders[this.secret_b]) & (this.secret_std > 0))
    ):
        return None
    return np.where(~known & (this.noise_std > 0) & (this.step != 0), this.noise_std, 0.0)


@cache
def _thread_pools() -> ThreadpoolController:
    """The process's native thread pools (found once: the scan takes milliseconds)."""
    return ThreadpoolController()


def _column_estimate(run: LinearRun, view: View) -> int:
    """How many noise columns a view's factor would have (an upper bound)."""
    count = 0
    for this in run.rounds:
        count += int(np.count_nonzero(this.noise_std > 0)) + int(this.secret_std.size)
        if this.message_std is not None:
            count += int(this.sent_src.size)
    return count


def _add_noise(
    block: np.ndarray, lo: int, blocks: list[tuple[int, np.ndarray]], gram: np.ndarray | None
) -> None:
    """Add factor columns (rows from ``lo`` on) to the factor, or their Gram to Σ."""
    if block.shape[1] == 0:
        return
    if gram is None:
        blocks.append((lo, block))
    else:
        gram[lo:, lo:] += block @ block.T


def _message_noise(
    this: LinearRound, gamma: float, after: np.ndarray, own: np.ndarray, known: np.ndarray
) -> list[np.ndarray]:
    """The factor columns (rows of round r on) of round r's per-message noise ξ that the
    observer does not know: message i → j's ξ reaches the rows through x^{r+1}_j (weight
    γ W_r[j, i]) and is in the message's own row (``own``: the view's rows of the round, first
    in ``after``). A zero-sum sender's ξ over its d messages is std · (I − 11ᵀ/d) z: its
    columns minus their mean."""
    std = this.message_std
    if std is None or not np.any(std > 0):
        return []
    src, dst = this.sent_src, this.sent_dst
    weights = np.asarray(this.mixing[dst, src]).ravel()  # W_r[j, i] of each message
    columns = gamma * after[:, dst] * weights[None, :]
    columns[np.arange(own.size), own] += 1.0
    columns *= std[None, :]
    hidden = (std > 0) & ~known[src]
    if not this.zero_sum:
        return [columns[:, hidden]]
    blocks = []
    for sender in np.unique(src[hidden]):
        block = columns[:, src == sender]
        blocks.append(block - block.mean(axis=1, keepdims=True))
    return blocks


def _round_input_noise(
    this: LinearRound,
    coefficient: np.ndarray,
    known: np.ndarray,
    holders: np.ndarray,
    known_secrets: bool,
) -> list[np.ndarray]:
    """The factor columns of round r's independent input noise and secrets that the observer
    does not know (``coefficient``: the inputs' coefficients, rows of round r on)."""
    own = np.flatnonzero(~known & (this.noise_std > 0) & (this.step != 0))
    blocks = [coefficient[:, own] * this.noise_std[own][None, :]]
    if this.secret_std.size and not known_secrets:
        secret = ~(holders[this.secret_a] | holders[this.secret_b]) & (this.secret_std > 0)
        a, b = this.secret_a[secret], this.secret_b[secret]
        plus = coefficient[:, a] * this.secret_a_added[secret][None, :]
        minus = coefficient[:, b] * this.secret_b_added[secret][None, :]
        blocks.append((plus - minus) * this.secret_std[secret][None, :])
    return blocks


def _input_covariance(
    this: LinearRound, known: np.ndarray, holders: np.ndarray, known_secrets: bool
) -> sp.csr_matrix:
    """The covariance (n × n, sparse) of round r's input noise that the observer does not know,
    in units of the inputs' coefficients: its independent noise on the diagonal, and each
    hidden secret's ±std on its two ends (the same parts :func:`_round_input_noise` gives as
    factor columns)."""
    n = known.size
    hidden = ~known & (this.noise_std > 0) & (this.step != 0)
    covariance = sp.diags(np.where(hidden, this.noise_std, 0.0) ** 2, format="csr")
    if this.secret_std.size and not known_secrets:
        secret = np.flatnonzero(~(holders[this.secret_a] | holders[this.secret_b])
                                & (this.secret_std > 0))  # fmt: skip
        rows = np.concatenate([np.arange(secret.size)] * 2)
        columns = np.concatenate([this.secret_a[secret], this.secret_b[secret]])
        values = np.concatenate([this.secret_a_added[secret].astype(float),
                                 -this.secret_b_added[secret].astype(float)])  # fmt: skip
        incidence = sp.csr_matrix((values, (rows, columns)), shape=(secret.size, n))
        weights = sp.diags(this.secret_std[secret] ** 2)
        covariance = covariance + incidence.T @ weights @ incidence
    return sp.csr_matrix(covariance)


def _temporal_noise(
    run: LinearRun, inputs: list[np.ndarray], offsets: np.ndarray, total: int, known: np.ndarray
) -> np.ndarray:
    """The factor columns of temporally correlated independent noise: node j's k-th step
    carries Σ_m temporal[k, m] z_{j, m}, so column (j, m) is Σ_r temporal[k_r, m] times the
    step's scaled coefficient."""
    assert run.temporal is not None
    index = run.step_index()
    depth = run.temporal.shape[0]
    if index.max(initial=-1) >= depth:
        raise ValueError(
            f"a node took {int(index.max()) + 1} steps, more than the temporal correlation's "
            f"{depth} rows"
        )
    correlated = np.zeros((total, run.n, depth))
    for r, (coefficient, this) in enumerate(zip(inputs, run.rounds, strict=True)):
        stepped = np.flatnonzero(index[r] >= 0)
        if not stepped.size:
            continue
        scaled = coefficient[:, stepped] * this.noise_std[stepped][None, :]
        correlated[int(offsets[r]) :, stepped, :] += (
            scaled[:, :, None] * run.temporal[index[r, stepped]][None]
        )
    # an explicit width: a view with no rows (an observer that received nothing) has total 0
    return correlated[:, ~known, :].reshape(total, int((~known).sum()) * depth)


# ----- losses ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class UnitLosses:
    """Every privacy unit's loss against one view: ``node`` and ``group`` (the use group of
    record-level units, −1 for a node's whole data), μ², and whether each is exact."""

    node: np.ndarray
    group: np.ndarray
    mu_squared: np.ndarray
    exact: np.ndarray


#: Nodes whose whitened inputs are formed at a time (bounds the memory of a large view).
NODE_CHUNK = 256


def input_grams(
    system: ViewSystem, white: Whitening, nodes: np.ndarray, stepping: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """For every node of ``nodes``: the Gram of its inputs' whitened shifts over the rounds
    ``stepping`` (those with a step: nodes × steps × steps, entry [r, t] = a_rᵀΣ⁺a_t for unit
    moves of the node's input at the r-th and t-th of them), and whether a_r has a part outside
    Σ's range (steps × nodes)."""
    rounds = len(stepping)
    grams = np.zeros((nodes.size, rounds, rounds))
    revealed = np.zeros((rounds, nodes.size), dtype=bool)
    deficient = white.lower is None and white.rank < system.rows
    for start in range(0, nodes.size, NODE_CHUNK):
        chunk = nodes[start : start + NODE_CHUNK]
        whitened = np.zeros((chunk.size, rounds, white.rank))
        for r, round_index in enumerate(stepping):
            coefficient = system.inputs[round_index]
            lo = int(system.first[round_index])
            shifts = coefficient[:, chunk]
            unit = white.whiten_from(shifts, lo)
            whitened[:, r, :] = unit.T
            if deficient:
                residual = white.basis @ (unit * white.scale[:, None])
                residual[lo:] -= shifts
                length = np.sqrt((shifts**2).sum(axis=0))
                out = np.sqrt((residual**2).sum(axis=0)) > RANGE_TOLERANCE * np.maximum(
                    length, 1e-300
                )
                revealed[r, start : start + chunk.size] = out & (length > 0)
        for k in range(chunk.size):  # one BLAS product a node: faster than a batched matmul
            grams[start + k] = whitened[k] @ whitened[k].T
    return grams, revealed


def recursive_grams(
    run: LinearRun,
    view: View,
    system: ViewSystem,
    white: Whitening,
    nodes: np.ndarray,
    stepping: Sequence[int],
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`input_grams` for a view whitened by a Cholesky factor L of a run without
    acceleration or per-message noise, by the backward recursion of the whitened coefficients
    instead of one triangular solve per round. With Z_r = L_r⁻¹ q^r (L_r: L from the round's
    first row on; q^r: the rows' coefficients on h^r, :func:`view_system`) and the rows of
    round r first (E: their senders, one-hot), then those after (q^r = [E; q^{r+1} W_r]),
    Z_r = [L₁₁⁻¹E; Z_{r+1} W_r − L₂₂⁻¹L₂₁ L₁₁⁻¹E]: a sparse product and a solve with as many
    right-hand sides as the round has rows. A node's whitened shift is η_r Z_r[:, j], zero
    before the round's first row, so its Gram sums over the rows both shifts reach
    (:func:`_staircase_grams`)."""
    lower, total, n = white.lower, system.rows, run.n
    assert lower is not None
    offsets = np.append(system.first, total)
    position = {k: i for i, k in enumerate(stepping)}
    sizes = np.array([total - int(offsets[k]) for k in stepping], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    packed = np.zeros((nodes.size, int(starts[-1])))  # each node's whitened shifts, end to end
    after = np.zeros((0, n), order="F")  # Z_{r+1}, Fortran order as in view_system
    for r in range(len(run.rounds) - 1, -1, -1):
        this = run.rounds[r]
        lo, hi = int(offsets[r]), int(offsets[r + 1])
        current = np.zeros((total - lo, n), order="F")
        if hi < total:
            current[hi - lo :] = np.asarray((this.mixing.T @ after.T).T)
        own = view.rows[r]
        if own.size:
            senders = this.sent_src[own]
            columns = np.unique(senders)
            unit = np.zeros((own.size, columns.size))
            unit[np.arange(own.size), np.searchsorted(columns, senders)] = 1.0
            solved = linalg.solve_triangular(
                lower[lo:hi, lo:hi], unit, lower=True, check_finite=False
            )
            current[: hi - lo, columns] = solved
            if hi < total:
                coupling = linalg.solve_triangular(
                    lower[hi:, hi:], lower[hi:, lo:hi], lower=True, check_finite=False
                )
                current[hi - lo :, columns] -= coupling @ solved
        if r in position:
            i = position[r]
            scaled = current[:, nodes] * this.step[nodes][None, :]
            packed[:, starts[i] : starts[i + 1]] = scaled.T
        after = current
    grams = np.zeros((nodes.size, len(stepping), len(stepping)))
    _staircase_grams(packed, starts, sizes, grams)
    return grams, np.zeros((len(stepping), nodes.size), dtype=bool)


@njit(cache=True, parallel=True)
def _staircase_grams(
    packed: np.ndarray, starts: np.ndarray, sizes: np.ndarray, grams: np.ndarray
) -> None:
    """grams[u, i, t] = the dot product of node u's whitened shifts i and t over the rows
    both reach (shift t's rows are the last ``sizes[t]`` of shift i's, for t ≥ i), summed in
    four interleaved parts (the same order on every machine)."""
    for u in prange(grams.shape[0]):  # one node a thread: the same sums on any number
        row = packed[u]
        for i in range(grams.shape[1]):
            for t in range(i, grams.shape[1]):
                length = sizes[t]
                a = starts[i] + sizes[i] - length
                b = starts[t]
                s0 = s1 = s2 = s3 = 0.0
                k = 0
                while k + 4 <= length:
                    s0 += row[a + k] * row[b + k]
                    s1 += row[a + k + 1] * row[b + k + 1]
                    s2 += row[a + k + 2] * row[b + k + 2]
                    s3 += row[a + k + 3] * row[b + k + 3]
                    k += 4
                while k < length:
                    s0 += row[a + k] * row[b + k]
                    k += 1
                value = (s0 + s1) + (s2 + s3)
                grams[u, i, t] = value
                grams[u, t, i] = value


def view_losses(
    run: LinearRun,
    view: View,
    *,
    unit: str = "record",
    nodes: Sequence[int] | None = None,
    force: str | None = None,
) -> UnitLosses:
    """The loss of every unit of ``nodes`` (default: every node the view does not know) against
    ``view``. ``unit`` ``record``: the records of one use group of a node (a record is used at
    the steps whose ``batch`` is its group); ``node``: all of a node's records (every step)."""
    known = _mask(run.n, view.known_nodes)
    chosen = np.flatnonzero(~known) if nodes is None else np.asarray(list(nodes), np.int64)
    # the rounds with a step: gossip passes without one move no input
    stepping = [k for k, r in enumerate(run.rounds) if np.any(r.step != 0)]
    taken = [run.rounds[k] for k in stepping]
    batches = np.array([r.batch for r in taken]).reshape(len(taken), run.n)[:, chosen]
    sens = np.array([r.sensitivity * (r.step != 0) for r in taken]).reshape(len(taken), run.n)[
        :, chosen
    ]
    if force is None and _gram_first(run, view):
        # products of a few hundred rows: on two BLAS threads they cost several times the CPU
        # when the other core is busy (5 instead of 1.1 s a 600-row view)
        with _thread_pools().limit(limits=1, user_api="blas"):
            system = view_system(run, view)
            white = system.whitening()
            if white is not None:
                grams, revealed = recursive_grams(run, view, system, white, chosen, stepping)
                return group_losses(grams, revealed, sens, batches, chosen, unit)
        # Σ has not full rank: the factor, cut by its SVD
        return _factor_losses(run, view, "factor", chosen, stepping, sens, batches, unit)
    return _factor_losses(run, view, force, chosen, stepping, sens, batches, unit)


def _factor_losses(
    run: LinearRun,
    view: View,
    force: str | None,
    chosen: np.ndarray,
    stepping: Sequence[int],
    sens: np.ndarray,
    batches: np.ndarray,
    unit: str,
) -> UnitLosses:
    """:func:`view_losses` by :func:`input_grams` (the factor's SVD, or the Gram's
    eigenvectors or Cholesky factor)."""
    system = view_system(run, view, force=force)
    white = system.whitening()
    assert white is not None
    grams, revealed = input_grams(system, white, chosen, stepping)
    return group_losses(grams, revealed, sens, batches, chosen, unit)


def group_losses(
    grams: np.ndarray,
    revealed: np.ndarray,
    sens: np.ndarray,
    batches: np.ndarray,
    chosen: np.ndarray,
    unit: str,
) -> UnitLosses:
    """Every unit's loss from its node's input Gram (:func:`input_grams`): a unit's uses are
    its node's steps of one batch group (``unit`` record) or all of them (node), each scaled by
    its sensitivity; aligned uses are the worst case when the scaled Gram has no negative
    entry (μ² = its sum, exact), else Σ|K| bounds it."""
    used = sens > 0
    groups = np.unique(batches[used]) if unit == "record" else np.array([-1])
    magnitude, negative = np.abs(grams), np.minimum(grams, 0.0)
    diagonal = np.einsum("urr->ur", grams)
    result: dict[str, list] = {"node": [], "group": [], "mu_squared": [], "exact": []}
    for group in groups.tolist():
        member = used & (batches == group) if unit == "record" else used
        weight = np.where(member, sens, 0.0)  # rounds × nodes
        has = member.any(axis=0)
        aligned = np.einsum("urt,ru,tu->u", grams, weight, weight)
        bound = np.einsum("urt,ru,tu->u", magnitude, weight, weight)
        below = np.einsum("urt,ru,tu->u", negative, weight, weight)
        top = (diagonal.T * weight**2).max(axis=0, initial=0.0)
        exact = below >= -SIGN_TOLERANCE * np.maximum(top, 1e-300)
        for k in np.flatnonzero(has & ~exact):  # a bound: unit_loss also tries λ_max(K)·uses
            pick = np.flatnonzero(member[:, k])
            no = np.zeros(pick.size, dtype=bool)
            bound[k] = unit_loss(grams[k][np.ix_(pick, pick)], no, weight[pick, k]).mu_squared
        seen = (revealed & member).any(axis=0)
        mu2 = np.where(seen, math.inf, np.where(exact, aligned, bound))
        result["node"].append(chosen[has])
        result["group"].append(np.full(int(has.sum()), group, dtype=np.int64))
        result["mu_squared"].append(mu2[has])
        result["exact"].append((exact | seen)[has])
    if not result["node"]:
        empty = np.zeros(0, np.int64)
        return UnitLosses(empty, empty, np.zeros(0), np.zeros(0, bool))
    order = np.lexsort((np.concatenate(result["group"]), np.concatenate(result["node"])))
    return UnitLosses(*(np.concatenate(result[key])[order]
                        for key in ("node", "group", "mu_squared", "exact")))  # fmt: skip


def local_mu_squared(run: LinearRun, unit: str = "record") -> dict[tuple[int, int], float]:
    """Each unit's μ² with every use public but for its own independent noise (local DP: the
    sum over its uses of (sensitivity / noise std)²; ∞ for a use without noise), keyed by
    (node, group) as :func:`view_losses` names units. With temporally correlated noise, every
    step's input public instead (:func:`_temporal_local_mu_squared`)."""
    if run.temporal is not None:
        return _temporal_local_mu_squared(run, unit)
    totals: dict[tuple[int, int], float] = {}
    for this in run.rounds:
        stepped = np.flatnonzero((this.step != 0) & (this.sensitivity > 0))
        for node in stepped.tolist():
            key = (node, int(this.batch[node]) if unit == "record" else -1)
            std = float(this.noise_std[node])
            share = math.inf if std == 0 else (float(this.sensitivity[node]) / std) ** 2
            totals[key] = totals.get(key, 0.0) + share
    return totals


def _temporal_local_mu_squared(run: LinearRun, unit: str) -> dict[tuple[int, int], float]:
    """Local DP of a temporally correlated run: every step's input y = g + M_K D z public (K
    the node's steps, M_K the leading K × K block of ``temporal``, D its draws' standard
    deviations), every other noise known. The inputs' precision is (D⁻¹C_K)ᵀ(D⁻¹C_K) with C_K
    = M_K⁻¹, and a unit used at steps S moves them by Δ_s along e_s: its μ² follows
    :func:`unit_loss` on the precision's S × S block (exact when it has no negative entry; for
    MFDL's factorisations with the cyclic constraints, Σ_S X = 1 per draw variance: one use's
    loss). Not the sum over uses: correlated draws are not independent releases."""
    assert run.temporal is not None
    index = run.step_index()
    totals: dict[tuple[int, int], float] = {}
    for node in range(run.n):
        rounds = np.flatnonzero(index[:, node] >= 0)
        if not rounds.size:
            continue
        steps = rounds.size
        std = np.array([run.rounds[r].noise_std[node] for r in rounds], dtype=np.float64)
        sensitivity = np.array([run.rounds[r].sensitivity[node] for r in rounds])
        group = (np.array([run.rounds[r].batch[node] for r in rounds], dtype=np.int64)
                 if unit == "record" else np.full(steps, -1, dtype=np.int64))  # fmt: skip
        used = sensitivity > 0
        if np.any(std[used] == 0):
            precision = None
        else:
            encoder = linalg.solve_triangular(
                run.temporal[:steps, :steps], np.eye(steps), lower=True, check_finite=False
            )
            whitened = encoder / np.where(std > 0, std, 1.0)[:, None]
            precision = whitened.T @ whitened
        for key in np.unique(group[used]).tolist():
            uses = np.flatnonzero(used & (group == key))
            if precision is None:  # a draw without noise: some input is seen exactly
                totals[(node, key)] = math.inf
                continue
            loss = unit_loss(precision[np.ix_(uses, uses)], np.zeros(uses.size, dtype=bool),
                             sensitivity[uses])  # fmt: skip
            totals[(node, key)] = loss.mu_squared
    return totals


def capped_by_local(losses: UnitLosses, local: dict[tuple[int, int], float]) -> UnitLosses:
    """``losses`` with each bound (a unit whose uses' Gram has a negative entry) at most the
    unit's local-DP μ² (:func:`local_mu_squared`): the view that sees every step's input with
    every other noise known determines every message, so any observer's view is a
    post-processing of it. Exact losses are left as they are (they are below it up to
    rounding); a capped loss stays a bound."""
    if losses.exact.all():
        return losses
    base = np.array([local.get((int(u), int(g)), math.inf)
                     for u, g in zip(losses.node, losses.group, strict=True)])  # fmt: skip
    mu_squared = np.where(losses.exact, losses.mu_squared, np.minimum(losses.mu_squared, base))
    return UnitLosses(losses.node, losses.group, mu_squared, losses.exact)


def account_views(
    run: LinearRun,
    views: Sequence[tuple[int, View]],
    *,
    delta: float,
    unit: str = "record",
) -> dict[str, np.ndarray]:
    """The loss of every unit against every view: columns ``observer`` (the id given with the
    view), ``node``, ``group``, ``mu_squared``, ``exact``, ``local_share`` (μ² over the unit's
    local-DP μ²), ``rho`` (ρ(α) = α·rho, i.e. μ²/2) and ``epsilon`` at ``delta``. A node's own
    units are not accounted against a view that knows its noise."""
    local = local_mu_squared(run, unit)
    columns: dict[str, list] = {key: [] for key in
                                ("observer", "node", "group", "mu_squared", "exact")}  # fmt: skip
    for observer, view in views:
        losses = capped_by_local(view_losses(run, view, unit=unit), local)
        columns["observer"].append(np.full(losses.node.size, observer, dtype=np.int64))
        columns["node"].append(losses.node)
        columns["group"].append(losses.group)
        columns["mu_squared"].append(losses.mu_squared)
        columns["exact"].append(losses.exact)
    out = {key: np.concatenate(parts) if parts else np.zeros(0) for key, parts in columns.items()}
    mu2 = out["mu_squared"].astype(float)
    base = np.array([local.get((int(u), int(g)), math.nan)
                     for u, g in zip(out["node"], out["group"], strict=True)])  # fmt: skip
    with np.errstate(invalid="ignore", divide="ignore"):
        out["local_share"] = np.where(np.isfinite(base) & (base > 0), mu2 / base, math.nan)
    out["rho"] = mu2 / 2.0
    out["epsilon"] = np.array([epsilon_of(float(m), delta) for m in mu2])
    return out


# ----- views that see every message: the revealed increments -----------------------------------


def increments_apply(run: LinearRun) -> bool:
    """Whether :func:`increment_losses` applies: no per-message noise, no acceleration and no
    temporal correlation (then a view of every message a node sends is one of its increments)."""
    return run.temporal is None and all(
        r.gamma is None and (r.message_std is None or not np.any(r.message_std > 0))
        for r in run.rounds
    )


def increment_blocks(run: LinearRun) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The revealed increments of a run whose every message is seen: for each node and each
    round in which it sends, the sum of its inputs since its previous send (rounds after its
    last send are never revealed). Returns ``node``, ``first`` and ``last`` round of each block.

    Why this is the whole view: the observer sees h_j^r for every sender j of round r. By
    induction over rounds it knows x_i^r up to i's inputs since its last send: if i averaged at
    r − 1 its state is a mix of h's it received (seen) and its own h (seen, as it sent); if it
    stepped without sending, its state is x^{r−1} plus that step's input; if it was offline it
    is unchanged. So each h_i^r reveals exactly the block's sum, and the blocks determine every
    message (a bijection given the known W_r)."""
    nodes, firsts, lasts = [], [], []
    start = np.zeros(run.n, dtype=np.int64)
    for r, this in enumerate(run.rounds):
        senders = np.unique(this.sent_src)
        nodes.append(senders)
        firsts.append(start[senders].copy())
        lasts.append(np.full(senders.size, r, dtype=np.int64))
        start[senders] = r + 1
    if not nodes:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    return np.concatenate(nodes), np.concatenate(firsts), np.concatenate(lasts)


def increment_losses(
    run: LinearRun,
    members: Sequence[int] = (),
    *,
    unit: str = "record",
    local: int | None = None,
    every_local: bool = False,
) -> UnitLosses:
    """Every unit's loss against an observer of every message (SecLDP: the coalition
    ``members`` knows its own noise and the secrets it holds, the secrets of pairs outside it
    stay hidden), or, with ``local`` a node, that node's units under local DP (every noise but
    its own independent noise known). Exact per block structure: blocks that share no hidden
    noise are independent, so a unit's μ² adds over the connected groups of blocks, each a
    small Gaussian view (a round's n increments, for a run where every node sends every
    round). ``every_local``: every node's units under local DP at once — with every secret
    known a node's blocks hold only its own noise, so each node's view is its own blocks."""
    from scipy.sparse.csgraph import connected_components

    if not increments_apply(run):
        raise ValueError("revealed increments need a run without per-message noise")
    known = ~_mask(run.n, [local]) if local is not None else _mask(run.n, members)
    if every_local:
        known = np.zeros(run.n, dtype=bool)
    holder, count = _block_holders(run, known)
    secrets = local is None and not every_local
    covariance = _block_covariance(run, holder, count, known, secrets=secrets)
    _, label = connected_components(covariance, directed=False)
    components = _Components(covariance, label)
    result: dict[str, list] = {"node": [], "group": [], "mu_squared": [], "exact": []}
    for (node, group), uses in sorted(_unit_uses(run, holder, known, unit).items()):
        loss = components.loss(uses)
        result["node"].append(node)
        result["group"].append(group)
        result["mu_squared"].append(loss.mu_squared)
        result["exact"].append(loss.exact)
    return UnitLosses(
        np.asarray(result["node"], np.int64), np.asarray(result["group"], np.int64),
        np.asarray(result["mu_squared"], float), np.asarray(result["exact"], bool),
    )  # fmt: skip


def _block_holders(run: LinearRun, known: np.ndarray) -> tuple[np.ndarray, int]:
    """The revealed block holding each (round, node) input (−1: never revealed, or a known
    node's), numbering the unknown nodes' blocks of :func:`increment_blocks` from 0, and how
    many there are."""
    block_node, block_first, block_last = increment_blocks(run)
    keep = ~known[block_node]
    block_node, block_first, block_last = block_node[keep], block_first[keep], block_last[keep]
    holder = np.full((len(run.rounds), run.n), -1, dtype=np.int64)
    for b in range(block_node.size):
        holder[block_first[b] : block_last[b] + 1, block_node[b]] = b
    return holder, int(block_node.size)


def _block_covariance(
    run: LinearRun, holder: np.ndarray, count: int, known: np.ndarray, *, secrets: bool
) -> sp.csr_matrix:
    """The covariance of the revealed blocks' hidden noise (blocks × blocks, sparse): each
    block's independent noise summed over its rounds, plus each hidden secret's factor column
    (± std · step at the blocks of its two ends that added it)."""
    variance = np.zeros(count)
    rows: list[np.ndarray] = []
    columns: list[np.ndarray] = []
    values: list[np.ndarray] = []
    width = 0
    for r, this in enumerate(run.rounds):
        stepped = (this.step != 0) & (this.noise_std > 0) & (holder[r] >= 0)
        np.add.at(variance, holder[r, stepped], (this.step[stepped] * this.noise_std[stepped]) ** 2)
        if not secrets or not this.secret_std.size:
            continue
        hidden = np.flatnonzero(
            ~(known[this.secret_a] | known[this.secret_b]) & (this.secret_std > 0)
        )
        ends = (
            (this.secret_a, this.secret_a_added, 1.0),
            (this.secret_b, this.secret_b_added, -1.0),
        )
        for end, added, sign in ends:
            node = end[hidden]
            on = added[hidden] & (holder[r, node] >= 0)
            rows.append(holder[r, node[on]])
            columns.append(width + np.flatnonzero(on))
            values.append(sign * this.step[node[on]] * this.secret_std[hidden[on]])
        width += hidden.size
    factor = sp.csr_matrix(
        (np.concatenate(values) if values else np.zeros(0),
         (np.concatenate(rows) if rows else np.zeros(0, np.int64),
          np.concatenate(columns) if columns else np.zeros(0, np.int64))),
        shape=(count, width),
    )  # fmt: skip
    return (sp.diags(variance) + factor @ factor.T).tocsr()


def _unit_uses(
    run: LinearRun, holder: np.ndarray, known: np.ndarray, unit: str
) -> dict[tuple[int, int], list[tuple[int, float]]]:
    """Each unknown node's units (node, group) and their uses: the revealed block each use's
    input falls in and how far the use moves it (sensitivity × step)."""
    units: dict[tuple[int, int], list[tuple[int, float]]] = {}
    for r, this in enumerate(run.rounds):
        for node in np.flatnonzero((this.step != 0) & (this.sensitivity > 0)).tolist():
            if known[node]:
                continue
            key = (node, int(this.batch[node]) if unit == "record" else -1)
            shift = float(this.sensitivity[node] * abs(this.step[node]))
            units.setdefault(key, []).append((int(holder[r, node]), shift))
    return units


class _Components:
    """The connected groups of revealed blocks (blocks sharing hidden noise), each whitened
    once when a unit first needs it."""

    def __init__(self, covariance: sp.csr_matrix, label: np.ndarray) -> None:
        self.covariance, self.label = covariance, label
        self.order = np.argsort(label, kind="stable")
        self.bounds = np.searchsorted(label[self.order], np.arange(int(label.max(initial=-1)) + 2))
        self.cache: dict[int, tuple[np.ndarray, Whitening]] = {}

    def whitening(self, c: int) -> tuple[np.ndarray, Whitening]:
        """The blocks of group ``c`` and the whitening of their covariance."""
        if c not in self.cache:
            members = self.order[self.bounds[c] : self.bounds[c + 1]]
            sigma = self.covariance[members][:, members].toarray()
            values, vectors = np.linalg.eigh(sigma)
            keep = values > GRAM_TOLERANCE * max(float(values.max(initial=0.0)), 1e-300)
            self.cache[c] = (members, Whitening(vectors[:, keep], np.sqrt(values[keep])))
        return self.cache[c]

    def loss(self, uses: list[tuple[int, float]]) -> UnitLoss:
        """A unit's loss: uses in one block add up (aligned is the worst case within a block);
        the groups' losses add (their noises are independent)."""
        by_group: dict[int, dict[int, float]] = {}
        for block, shift in uses:
            if block >= 0:  # a use after the node's last send is never revealed
                shifts = by_group.setdefault(int(self.label[block]), {})
                shifts[block] = shifts.get(block, 0.0) + shift
        total, exact = 0.0, True
        for c, shifts in by_group.items():
            members, white = self.whitening(c)
            position = {int(b): i for i, b in enumerate(members.tolist())}
            vectors = np.zeros((members.size, len(shifts)))
            for k, block in enumerate(shifts):
                vectors[position[block], k] = 1.0
            projected = white.basis.T @ vectors
            residual = vectors - white.basis @ projected
            revealed = np.abs(residual).max(axis=0) > RANGE_TOLERANCE
            unit = projected / white.scale[:, None]
            loss = unit_loss(unit.T @ unit, revealed, np.array(list(shifts.values())))
            total += loss.mu_squared
            exact &= loss.exact
        return UnitLoss(total, exact)


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
