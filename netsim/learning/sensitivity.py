"""Sensitivity of one per-example gradient, for calibrating differentially private SGD updates.

The private query of one SGD step at a node holding one record (x, y) is the gradient
g(w; x, y) = ∇_w ℓ(w; x, y) at public weights w. Its sensitivity in a norm ‖·‖ is

    Δ = sup { ‖g(w; x₁, y₁) − g(w; x₂, y₂)‖ : both records admissible, w arbitrary }.

Every record must satisfy ‖x‖ ≤ R, measured **in the same norm as the noise** (L1 for the
Laplace mechanism, L2 for the L2 mechanisms); use :func:`clip_rows` for data that is not
normalised. A K×d gradient is measured as its flattened vector: Frobenius norm for L2, sum of
absolute entries for L1. If one gradient is bounded by G (:func:`gradient_bound`), the triangle
inequality gives Δ ≤ ‖g₁‖ + ‖g₂‖ ≤ 2G (:func:`sensitivity`); the bound is not loose, see the
per-loss notes below (attained, or approached as a supremum; the constructions need d ≥ 2 for
logistic and softmax).

Sources. Hegedűs, Berta, Jelasity (2016) §3.2, eqs. (9)–(10): for binary logistic regression
and the (Pegasos) linear SVM "the gradient is a linear function of x and its length is not
larger than that of x", hence the sensitivity 2·max‖x‖ (= 2 for normalised data). Their §2.1
uses multi-class variants (K hyperplanes for the SVM, Crammer & Singer 2002 [19]; multinomial
logistic regression); the paper gives no sensitivity for those, and the bounds below for the
whole K×d gradient are derived here. Zhang & Venkitasubramaniam (Mutual-information-private
OGD, §2 and Thm. 1) use the absolute loss ``|⟨w, x⟩ − y|`` with subgradient ±x and
L-Lipschitz losses, ‖z‖₂ ≤ L; with ‖x‖₂ ≤ R the absolute loss is R-Lipschitz.

=====================  =========  ===============  ============  =================================
loss                   norm       gradient bound   sensitivity   supremum
=====================  =========  ===============  ============  =================================
``logistic``           L1 / L2    R                2R            approached, not attained
``hinge``              L1 / L2    R                2R            attained
``absolute``           L1 / L2    R                2R            attained
``softmax``            L2         √2·R             2√2·R         approached, not attained
``softmax``            L1         2R               4R            approached, not attained
``multiclass_hinge``   L2         √2·R             2√2·R         attained
``multiclass_hinge``   L1         2R               4R            attained
=====================  =========  ===============  ============  =================================

None of the bounds depends on the number of classes K.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from netsim.learning.losses import BINARY_LOSSES, check_loss, per_example_gradient
from netsim.privacy.events import Norm

__all__ = ["clip_rows", "gradient_bound", "per_example_gradient", "sensitivity"]


# --- argument checks -----------------------------------------------------------------------


def _check_norm(norm: str) -> None:
    if norm not in ("L1", "L2"):
        raise ValueError(f"norm must be 'L1' or 'L2', got {norm!r}")


def _check_radius(radius: float) -> None:
    if not (radius > 0 and math.isfinite(radius)):
        raise ValueError(f"radius must be positive and finite, got {radius}")


def _check_classes(loss: str, classes: int) -> int:
    try:
        k = operator.index(classes)
    except TypeError:
        raise ValueError(f"classes must be an integer, got {classes!r}") from None
    if k < 2:
        raise ValueError(f"classes must be at least 2, got {k}")
    if loss in BINARY_LOSSES and k != 2:
        raise ValueError(
            f"loss {loss!r} is binary and needs classes=2, got {k}; K one-vs-rest binary models "
            "trained together have a larger bound (√K·R in L2, K·R in L1), use 'softmax' or "
            "'multiclass_hinge' for K classes"
        )
    return k


def _vector_norm(a: np.ndarray, norm: Norm) -> float:
    """The L1 or L2 norm of ``a`` flattened (Frobenius norm for L2 of a matrix)."""
    flat = np.ravel(a)
    if norm == "L1":
        return float(np.sum(np.abs(flat)))
    return float(np.linalg.norm(flat))


# --- bounds ---------------------------------------------------------------------------------


def _gradient_factor(loss: str, norm: Norm) -> float:
    """G / R: the largest norm of one gradient per unit of ‖x‖ (derivations in the callers)."""
    if loss in BINARY_LOSSES:
        return 1.0
    return math.sqrt(2.0) if norm == "L2" else 2.0


def gradient_bound(loss: str, *, radius: float, norm: Norm, classes: int = 2) -> float:
    """The largest norm G of ONE per-example gradient when ‖x‖ ≤ R in the same norm.

    Every gradient below factors as (coefficient) × x, or for K classes as the outer product
    c xᵀ of a coefficient vector c ∈ R^K with x, whose flattened norm is ‖c‖·‖x‖ in both L1
    (Σ|c_k x_j| = Σ|c_k| Σ|x_j|) and L2 (Frobenius norm of a rank-one matrix).

    * ``logistic`` (y ∈ {0, 1}): ∇ = (σ(w·x) − y) x and ``|σ − y|`` < 1, so ‖∇‖ < ‖x‖ ≤ R in
      any norm (Hegedűs et al. 2016 §3.2, eq. 9, written there with the opposite sign). G = R is a
      supremum (``|σ − y|`` → 1 as ``|w·x|`` → ∞), not attained.
    * ``hinge`` (y ∈ {−1, 1}, ℓ = max(0, 1 − y w·x)): ∇ = −y x · 1[y w·x < 1], so ‖∇‖ ≤ R
      (Hegedűs et al. eq. 10); attained whenever the margin is violated and ‖x‖ = R.
    * ``absolute`` (ℓ = ``|w·x − y|``, Zhang & Venkitasubramaniam): ∇ = sign(w·x − y) x,
      ‖∇‖ ≤ R; attained off the kink.
    * ``softmax`` (K×d weights, p = softmax(W x)): ∇ = (p − e_y) xᵀ.
      L2: ‖p − e_y‖₂² = (1 − p_y)² + Σ_{k≠y} p_k² ≤ (1 − p_y)² + (Σ_{k≠y} p_k)² = 2(1 − p_y)²
      < 2, so G = √2·R (supremum as p → e_b for some b ≠ y, not attained).
      L1: ‖p − e_y‖₁ = (1 − p_y) + Σ_{k≠y} p_k = 2(1 − p_y) < 2, so G = 2R (supremum).
    * ``multiclass_hinge`` (Crammer & Singer 2002, ℓ = max(0, 1 + max_{k≠y} w_k·x − w_y·x)):
      when the margin is violated ∇ = (e_{k*} − e_y) xᵀ (+x on row k*, −x on row y), else 0.
      ‖e_{k*} − e_y‖₂ = √2 and ‖e_{k*} − e_y‖₁ = 2, so G = √2·R in L2 and 2R in L1, attained
      (e.g. at W = 0 every margin is violated). For comparison, K one-vs-rest binary hinges
      trained together have gradient rows ±x·1[violated_k] and can have all K rows active:
      G = √K·R in L2 and K·R in L1, which is why they are not offered under this name.

    Raises ``ValueError`` for an unknown loss, a norm other than "L1"/"L2", R ≤ 0 (or not
    finite), K < 2, or K ≠ 2 for a binary loss.
    """
    check_loss(loss)
    _check_norm(norm)
    _check_radius(radius)
    _check_classes(loss, classes)
    return _gradient_factor(loss, norm) * float(radius)


def sensitivity(loss: str, *, radius: float, norm: Norm, classes: int = 2) -> float:
    """Δ = 2·G: the largest norm of the difference of two records' gradients at the same w.

    Upper bound: ‖g₁ − g₂‖ ≤ ‖g₁‖ + ‖g₂‖ ≤ 2G (triangle inequality). It is also the supremum
    (for d ≥ 2), so no smaller Δ is valid for all weights:

    * ``hinge``: x₁ = R·u, x₂ = −R·u, y₁ = y₂ = 1, w = 0 (both margins violated, ``|w·x|`` < 1):
      g₁ − g₂ = −x₁ − x₁ = −2R·u, norm 2R exactly, in any norm and any d.
    * ``absolute``: x₁ = x₂ = x with ‖x‖ = R, w = 0, y₁ = −1, y₂ = 1 (or x₂ = −x₁, y = 1):
      g₁ − g₂ = x + x, norm 2R exactly.
    * ``logistic``: the pair x₂ = −x₁ cannot attain 2R, because w·x₂ = −w·x₁ makes the two
      coefficients σ − y point the wrong way (the difference is then at most R). Instead take
      y₁ = y₂ = 0, a unit u ⊥ x₁, x₂ = −c x₁ + R√(1 − c²) u (‖x₁‖₂ = R), and w with
      w·x₁ = w·x₂ = M (possible thanks to the u component). Then g₁ − g₂ = σ(M)(x₁ − x₂) and
      ‖x₁ − x₂‖₂ = R√(2 + 2c) → 2R as c → 1, σ(M) → 1 as M → ∞: 2R is approached, never
      attained (``|σ − y|`` < 1). In L1 take x₁ = R e₁, x₂ = −cR e₁ + (1 − c)R e₂: ‖x₁ − x₂‖₁ = 2R
      for every c ∈ [0, 1), so only M → ∞ is needed. In d = 1 the supremum is only ≈ 1.05·R
      (numerically), since every w·x then has the sign of x.
    * ``softmax``: the same construction with y₁ = y₂ = y and weights that put probability
      p_b → 1 on one class b ≠ y for both inputs (row b = M-multiple of a vector with
      w_b·x₁ = w_b·x₂ = M, the other rows 0). Then g₁ − g₂ → (e_b − e_y)(x₁ − x₂)ᵀ, so
      ‖g₁ − g₂‖_F² → 2‖x₁ − x₂‖₂² = 2(2 + 2c)R² → 8R² as c → 1: 2√2·R approached, not
      attained (‖p − e_y‖₂ < √2 always). In L1, x₁ = R e₁ and x₂ = R e₂ (disjoint supports)
      with p_y → 0 on both give ‖g₁ − g₂‖₁ = 2(1 − p_y(x₁))R + 2(1 − p_y(x₂))R → 4R.
    * ``multiclass_hinge``: the large-weight construction above gives exactly
      ‖g₁ − g₂‖_F = √2·R√(2 + 2c) = 2√2·R·√((1 + c)/2) in L2 (no limit in M needed, but < 2√2·R
      for c < 1), and exactly 4R in L1. The supremum is nevertheless attained, because the
      hinge is active in a band around W x = 0: at W = 0 with y₁ = y₂ = y, x₂ = −x₁, both
      margins are violated (1 + 0 − 0 > 0) with the same k*, so g₁ − g₂ = 2(e_{k*} − e_y) x₁ᵀ,
      of norm 2√2·R in L2 and 4R in L1, in any d.
    """
    return 2.0 * gradient_bound(loss, radius=radius, norm=norm, classes=classes)


# --- data clipping --------------------------------------------------------------------------


def clip_rows(x: np.ndarray, radius: float, norm: Norm) -> np.ndarray:
    """A copy of the 2-D array ``x`` with every row of norm > ``radius`` scaled to norm
    ``radius`` (up to rounding, ~1e-16 relative); rows already inside are unchanged.

    Use it on data that is not normalised, so that the bounds above hold with R = radius.
    Integer input is returned as float64; floating input keeps its dtype.
    """
    _check_norm(norm)
    _check_radius(radius)
    arr = np.asarray(x)
    if arr.ndim != 2:
        raise ValueError(f"clip_rows needs a 2-D array (one record per row), got shape {arr.shape}")
    dtype = arr.dtype if np.issubdtype(arr.dtype, np.floating) else np.float64
    out = np.array(arr, dtype=dtype, copy=True)
    if norm == "L1":
        norms = np.sum(np.abs(out), axis=1)
    else:
        norms = np.linalg.norm(out, axis=1)
    outside = norms > radius
    out[outside] *= (radius / norms[outside])[:, None]
    return out
