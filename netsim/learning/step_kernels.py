"""Compiled arithmetic of one model's step at one record: the record's gradient for the
binary linear losses and the update of eq. (8) (Hegedűs, Berta, Jelasity 2016:
w ← w − η_t (λ w + g̃), η_t = η / √t).

A visit of a walk or of gossip learning steps one model at one record, thousands of times a
simulated second, and as numpy expressions on vectors of some 60 weights each operation is a
call of its own (its result allocated, an ``errstate`` context entered and left, ``isfinite``
and ``all``): under cProfile the gradient and the update took 1.0 s of exact-mode gossip
learning's 3.05 s on Spambase (20,704 messages, SGD). Here each is one compiled call, the
building block of a compiled visit (docs/performance.md, "Exact-mode gossip learning across
commits"). The arithmetic is numpy's, operation for operation, so the models are the same
bit for bit (``tests/test_step_kernels.py`` holds it on random inputs, and the shipped
scenarios' table digests on both engines hold it on whole runs):

- w·x is ``np.dot`` of two contiguous float64 vectors, which numba hands to the same BLAS
  routine (``ddot``) that numpy's ``w @ x`` calls;
- σ is :func:`netsim.learning.losses._sigmoid` with the C library's ``exp``, as Python's
  ``math.exp``;
- the update is computed element by element in numpy's order, ((λ·w) + g̃)·η subtracted
  from w, and numba contracts no multiply-add into a fused one without ``fastmath``.
"""

from __future__ import annotations

import math

import numpy as np

from netsim.compiled import njit
from netsim.kernel_cache import guard_kernels


@njit(cache=True, inline="always")
def sigmoid(z: float) -> float:
    """σ(z) = 1 / (1 + e^{−z}) as :func:`netsim.learning.losses._sigmoid` computes it."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@njit(cache=True)
def logistic_gradient(w: np.ndarray, x: np.ndarray, y: int) -> np.ndarray:
    """The logistic loss's gradient −y σ(−y w·x) x at one record, y ∈ {−1, +1}
    (:func:`netsim.learning.losses.record_gradient`): σ(w·x) x for y = −1, −σ(−w·x) x for
    y = +1. ``w`` and ``x`` contiguous float64 of one length."""
    z = np.dot(w, x)
    scale = sigmoid(z) if y == -1 else -sigmoid(-z)
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = scale * x[i]
    return out


@njit(cache=True)
def hinge_gradient(w: np.ndarray, x: np.ndarray, y: int) -> np.ndarray:
    """The hinge loss's subgradient at one record: −y x where y w·x < 1, else 0
    (:func:`netsim.learning.losses.record_gradient`)."""
    out = np.zeros_like(x)
    if y * np.dot(w, x) < 1.0:
        scale = -float(y)
        for i in range(x.size):
            out[i] = scale * x[i]
    return out


@njit(cache=True)
def sgd_update(
    w: np.ndarray, gradient: np.ndarray, eta: float, regularisation: float
) -> tuple[np.ndarray, bool]:
    """Eq. (8)'s step w − η (λ w + g̃) and whether every weight of it is finite
    (:meth:`netsim.learning.private_sgd.PrivateSGD._updated`, which keeps the old model
    when one is not)."""
    out = np.empty_like(w)
    finite = True
    for i in range(w.size):
        value = w[i] - eta * (regularisation * w[i] + gradient[i])
        out[i] = value
        finite = finite and math.isfinite(value)
    return out, finite


guard_kernels(__name__)
