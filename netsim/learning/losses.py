"""The losses every learner here uses: one definition of each loss, its value and its
(sub)gradient, and one label convention.

Labels: a binary loss (``logistic``, ``hinge``) takes y ∈ {−1, +1}; a data set's class indices
{0, 1} map to −1, +1 (:func:`binary_label`). ``absolute`` takes a real target y. The
multi-class losses (``softmax``, ``multiclass_hinge``) take the class index y ∈ {0, …, K−1}
and weights of shape (K, d).

=====================  =====================================  ================================
loss                   ℓ(w; x, y)                             (sub)gradient in w
=====================  =====================================  ================================
``logistic``           log(1 + e^{−y w·x})                    −y σ(−y w·x) x
``hinge``              max(0, 1 − y w·x)                      −y x if y w·x < 1, else 0
``absolute``           ``|w·x − y|``                          sign(w·x − y) x (0 at the kink)
``softmax``            logsumexp(W x) − w_y·x                 (softmax(W x) − e_y) xᵀ
``multiclass_hinge``   max(0, 1 + max_{k≠y} w_k·x − w_y·x)    (e_{k*} − e_y) xᵀ when positive
=====================  =====================================  ================================

The binary losses are also written in their margin form (:func:`loss_values`,
:func:`loss_derivative`: z = y w·x, or the residual w·x − y for ``absolute``), which the
hindsight solver and the regret use. DOLA's compiled round kernels
(:mod:`netsim.algorithms.dola.kernels`) implement the same hinge and logistic definitions;
``tests/test_dola.py`` checks them against these.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from netsim.lazy import lazy_module

if TYPE_CHECKING:
    import scipy.special as special
else:
    special = lazy_module("scipy.special")

LOSSES: tuple[str, ...] = ("logistic", "hinge", "absolute", "softmax", "multiclass_hinge")
BINARY_LOSSES: tuple[str, ...] = ("logistic", "hinge", "absolute")
MULTICLASS_LOSSES: tuple[str, ...] = ("softmax", "multiclass_hinge")


def check_loss(loss: str, allowed: tuple[str, ...] = LOSSES) -> None:
    """Raise ``ValueError`` naming the known losses when ``loss`` is not one of ``allowed``."""
    if loss not in allowed:
        raise ValueError(f"unknown loss {loss!r}; known losses: {', '.join(allowed)}")


def binary_label(class_index: int) -> int:
    """A binary data set's class index 0 / 1 as the binary losses' label −1 / +1."""
    return 2 * int(class_index) - 1


# --- margin form (binary losses) ------------------------------------------------------------


def loss_values(loss: str, margins: np.ndarray) -> np.ndarray:
    """ℓ(z) elementwise for margins z = y⟨w, x⟩: the hinge max(0, 1 − z) or the logistic loss
    log(1 + e^{−z}), the latter computed without overflow as logaddexp(0, −z); for
    ``absolute`` the margins are residuals r = ⟨w, x⟩ − y and ℓ(r) = ``|r|``."""
    check_loss(loss, BINARY_LOSSES)
    z = np.asarray(margins, dtype=np.float64)
    if loss == "hinge":
        return np.maximum(0.0, 1.0 - z)
    if loss == "absolute":
        return np.abs(z)
    return np.logaddexp(0.0, -z)


def loss_derivative(loss: str, margins: np.ndarray) -> np.ndarray:
    """A (sub)derivative dℓ/dz elementwise: for the hinge −1 where z < 1 and 0 elsewhere, for
    the logistic loss −1/(1 + e^{z})."""
    check_loss(loss, BINARY_LOSSES)
    z = np.asarray(margins, dtype=np.float64)
    if loss == "hinge":
        return np.where(z < 1.0, -1.0, 0.0)
    if loss == "absolute":
        return np.sign(z)
    return -special.expit(-z)


def loss_value(loss: str, w: np.ndarray, x: np.ndarray, y: float | int) -> float:
    """ℓ(w; x, y) for one example (the table in the module docstring)."""
    check_loss(loss)
    scores = w @ x
    if loss in BINARY_LOSSES:
        z = float(scores)
        margin = z - float(y) if loss == "absolute" else float(y) * z
        return float(loss_values(loss, np.array([margin]))[0])
    label = int(y)
    if loss == "softmax":
        top = float(scores.max())
        return top + math.log(float(np.exp(scores - top).sum())) - float(scores[label])
    others = np.delete(scores, label)
    return max(0.0, 1.0 + float(others.max()) - float(scores[label]))


# --- per-example gradients ------------------------------------------------------------------


def _sigmoid(z: float) -> float:
    """σ(z) = 1 / (1 + e^{−z}), without overflow for large |z|."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


def _vector_args(w: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    wv = np.asarray(w, dtype=np.float64)
    xv = np.asarray(x, dtype=np.float64)
    if wv.ndim != 1 or xv.shape != wv.shape:
        raise ValueError(
            f"binary losses need w and x as vectors of one length, got shapes {wv.shape} "
            f"and {xv.shape}"
        )
    return wv, xv


def _matrix_args(
    w: np.ndarray, x: np.ndarray, y: float | int
) -> tuple[np.ndarray, np.ndarray, int]:
    wm = np.asarray(w, dtype=np.float64)
    xv = np.asarray(x, dtype=np.float64)
    if wm.ndim != 2 or xv.ndim != 1 or wm.shape[1] != xv.shape[0]:
        raise ValueError(
            f"multi-class losses need w of shape (K, d) and x of shape (d,), got {wm.shape} "
            f"and {xv.shape}"
        )
    k = wm.shape[0]
    if k < 2:
        raise ValueError(f"classes must be at least 2, got a weight matrix with {k} row(s)")
    label = int(y)
    if label != y or not 0 <= label < k:
        raise ValueError(f"y must be an integer class in [0, {k}), got {y!r}")
    return wm, xv, label


def _logistic(w: np.ndarray, x: np.ndarray, y: float | int) -> np.ndarray:
    """∇ log(1 + e^{−y w·x}) = −y σ(−y w·x) x, y ∈ {−1, 1} (σ(z) x for y = −1, and
    −σ(−z) x for y = 1: computed without cancellation)."""
    if y not in (-1, 1):
        raise ValueError(f"logistic loss needs y in {{-1, 1}}, got {y!r}")
    z = float(w @ x)
    coefficient = _sigmoid(z) if y == -1 else -_sigmoid(-z)
    return coefficient * x


def _hinge(w: np.ndarray, x: np.ndarray, y: float | int) -> np.ndarray:
    """∇ max(0, 1 − y w·x) = −y x if y w·x < 1 (strict), else 0; y ∈ {−1, 1}."""
    if y not in (-1, 1):
        raise ValueError(f"hinge loss needs y in {{-1, 1}}, got {y!r}")
    if y * float(w @ x) < 1.0:
        return -float(y) * x
    return np.zeros_like(x)


def _absolute(w: np.ndarray, x: np.ndarray, y: float | int) -> np.ndarray:
    """∂ |w·x − y| ∋ sign(w·x − y) x (the subgradient 0 at the kink w·x = y)."""
    yf = float(y)
    if not math.isfinite(yf):
        raise ValueError(f"absolute loss needs a finite real y, got {y!r}")
    return float(np.sign(float(w @ x) - yf)) * x


def _softmax_grad(w: np.ndarray, x: np.ndarray, y: int) -> np.ndarray:
    """∇_W (logsumexp(W x) − w_y·x) = (p − e_y) xᵀ with p = softmax(W x)."""
    c = _softmax(w @ x)
    c[y] -= 1.0
    return np.outer(c, x)


def _multiclass_hinge_grad(w: np.ndarray, x: np.ndarray, y: int) -> np.ndarray:
    """Crammer–Singer: ℓ = max(0, 1 + max_{k≠y} w_k·x − w_y·x). Violated iff that is > 0;
    then +x on row k* (the smallest index attaining the max over k ≠ y), −x on row y."""
    scores = w @ x
    others = scores.copy()
    others[y] = -np.inf
    k_star = int(np.argmax(others))  # argmax returns the first index attaining the max
    grad = np.zeros_like(w)
    if 1.0 + others[k_star] - scores[y] > 0.0:
        grad[k_star] = x
        grad[y] = -x
    return grad


def per_example_gradient(loss: str, w: np.ndarray, x: np.ndarray, y: float | int) -> np.ndarray:
    """The (sub)gradient of ``loss`` with respect to the weights at one record (x, y).

    * ``logistic``: w, x vectors, y ∈ {−1, 1}; returns −y σ(−y w·x) x.
    * ``hinge``: w, x vectors, y ∈ {−1, 1}; returns −y x if y w·x < 1 (strict), else 0.
    * ``absolute``: w, x vectors, y real; returns sign(w·x − y) x (0 at the kink).
    * ``softmax``: w of shape (K, d), x of shape (d,), y an int class; returns (p − e_y) xᵀ.
    * ``multiclass_hinge``: as softmax; returns (e_{k*} − e_y) xᵀ if
      1 + max_{k≠y} w_k·x − w_y·x > 0, else 0; k* is the smallest index attaining the max.

    The result has the shape of w. Raises ``ValueError`` for an unknown loss, mismatched
    shapes or a label outside the loss's label set.
    """
    check_loss(loss)
    if loss in MULTICLASS_LOSSES:
        wm, xv, label = _matrix_args(w, x, y)
        if loss == "softmax":
            return _softmax_grad(wm, xv, label)
        return _multiclass_hinge_grad(wm, xv, label)
    wv, xv = _vector_args(w, x)
    if loss == "logistic":
        return _logistic(wv, xv, y)
    if loss == "hinge":
        return _hinge(wv, xv, y)
    return _absolute(wv, xv, y)


def record_gradient(loss: str, w: np.ndarray, x: np.ndarray, y: int) -> np.ndarray:
    """:func:`per_example_gradient` without its argument checks, for a caller that checked
    them once (a model's visit, thousands a second): ``w`` and ``x`` float64 of matching
    shapes, ``y`` in the loss's label set. The arithmetic is the same, so bit for bit the
    same gradient. Compiled (binary losses, for the exact core's visits):
    :func:`netsim.learning.compiled_visit.record_gradient`, with eq. (8) in
    :func:`netsim.learning.compiled_visit.sgd_update`."""
    if loss == "logistic":
        z = float(w @ x)
        return (_sigmoid(z) if y == -1 else -_sigmoid(-z)) * x
    if loss == "hinge":
        return -float(y) * x if y * float(w @ x) < 1.0 else np.zeros_like(x)
    return per_example_gradient(loss, w, x, y)


def batch_gradient(loss: str, w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Many models, each at its own record: ``w`` (m, d) for a binary loss or (m, K, d) for
    a multi-class one, ``x`` (m, d), ``y`` (m,) labels of the loss's label set → the m
    gradients, shaped as ``w`` (the table above, row by row; the dot products are summed
    in another order than :func:`per_example_gradient`'s, so equal up to rounding)."""
    if loss in MULTICLASS_LOSSES:
        scores = np.einsum("mkd,md->mk", w, x)
        rows = np.arange(len(x))
        label = np.asarray(y, dtype=np.int64)
        if loss == "softmax":
            c = np.exp(scores - scores.max(axis=1, keepdims=True))
            c /= c.sum(axis=1, keepdims=True)
            c[rows, label] -= 1.0
        else:
            others = scores.copy()
            others[rows, label] = -np.inf
            k_star = np.argmax(others, axis=1)
            violated = 1.0 + others[rows, k_star] - scores[rows, label] > 0.0
            c = np.zeros_like(scores)
            c[rows[violated], k_star[violated]] = 1.0
            c[rows[violated], label[violated]] -= 1.0
        return c[:, :, None] * x[:, None, :]
    z = np.einsum("md,md->m", w, x)
    yf = np.asarray(y, dtype=np.float64)
    if loss == "logistic":
        coefficient = np.where(yf == -1.0, special.expit(z), -special.expit(-z))
    elif loss == "hinge":
        coefficient = np.where(yf * z < 1.0, -yf, 0.0)
    else:
        coefficient = np.sign(z - yf)
    return coefficient[:, None] * x
