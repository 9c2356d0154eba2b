"""Order-defined linear algebra: sums whose order of additions is fixed by this code.

Why. ``x @ v``, ``a @ b``, ``np.dot`` and ``np.linalg.norm`` of float64 arrays call BLAS, and
which kernel BLAS runs depends on the CPU (OpenBLAS picks one at load time; ``OPENBLAS_CORETYPE``
overrides it): kernels add the same products in different orders, with or without fused
multiply-adds, so the last bits of the result depend on the machine. ``np.einsum`` picks SIMD
loops by CPU in the same way. Most numbers netsim reports do not care (they move by 1e-16
relative), but some amplify the last bits: an iterative solver's stopping point and its
certified gap (a small difference of large numbers), a sign that decides a label. netsim's
reproducibility contract (``docs/reproducibility.md``) therefore computes those from the
functions here, whose result is the same on every IEEE-754 machine:

* every sum starts at 0.0 and adds its terms in ascending index order, one rounding per
  multiplication and one per addition (numba compiles without fast-math, so no fused
  multiply-add and no reassociation: vector instructions only run independent sums side by
  side);
* :func:`dot` and :func:`total` keep four partial sums, of the terms i ≡ 0, 1, 2, 3 (mod 4),
  each in ascending order, and add them as (s0 + s1) + (s2 + s3) plus the tail: a fixed
  order too, with dependency chains four times shorter.

The functions take float64 arrays (any layout; C order is fastest) and are compiled once and
cached on disk like netsim's other kernels.
"""

from __future__ import annotations

import math

import numpy as np

from netsim.compiled import njit
from netsim.kernel_cache import guard_kernels


@njit(cache=True)
def dot(a: np.ndarray, b: np.ndarray) -> float:
    """Σ_i a_i b_i of two 1-D arrays of equal length, in the fixed order of the module doc."""
    n = a.shape[0]
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    blocks = n - n % 4
    for i in range(0, blocks, 4):
        s0 += a[i] * b[i]
        s1 += a[i + 1] * b[i + 1]
        s2 += a[i + 2] * b[i + 2]
        s3 += a[i + 3] * b[i + 3]
    total = (s0 + s1) + (s2 + s3)
    for i in range(blocks, n):
        total += a[i] * b[i]
    return total


@njit(cache=True)
def total(a: np.ndarray) -> float:
    """Σ_i a_i of a 1-D array, in :func:`dot`'s order (numpy's ``sum`` adds in an order that
    depends on the CPU's vector width)."""
    n = a.shape[0]
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    blocks = n - n % 4
    for i in range(0, blocks, 4):
        s0 += a[i]
        s1 += a[i + 1]
        s2 += a[i + 2]
        s3 += a[i + 3]
    out = (s0 + s1) + (s2 + s3)
    for i in range(blocks, n):
        out += a[i]
    return out


@njit(cache=True)
def norm(v: np.ndarray) -> float:
    """‖v‖₂ = √(Σ v_i²) of a 1-D array, with :func:`dot`'s order."""
    return math.sqrt(dot(v, v))


def matvec(x: np.ndarray, v: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out_i = Σ_j x_ij v_j (ascending j) for a 2-D float64 ``x``; returns ``out``. The loop
    runs along the memory layout of ``x`` (rows of a C-ordered array, columns of a Fortran-
    ordered one, where the rows' sums advance side by side): the same additions either way."""
    if x.flags.f_contiguous and not x.flags.c_contiguous:
        return _matvec_columns(x, v, out)
    return _matvec_rows(x, v, out)


@njit(cache=True)
def _matvec_rows(x: np.ndarray, v: np.ndarray, out: np.ndarray) -> np.ndarray:
    rows, columns = x.shape
    for i in range(rows):
        total = 0.0
        for j in range(columns):
            total += x[i, j] * v[j]
        out[i] = total
    return out


@njit(cache=True)
def _matvec_columns(x: np.ndarray, v: np.ndarray, out: np.ndarray) -> np.ndarray:
    rows, columns = x.shape
    for i in range(rows):
        out[i] = 0.0
    for j in range(columns):
        vj = v[j]
        for i in range(rows):
            out[i] += x[i, j] * vj
    return out


@njit(cache=True)
def rmatvec(x: np.ndarray, c: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out_j = Σ_i x_ij c_i (ascending i), i.e. xᵀc, for a 2-D ``x`` (fastest in C order: the
    columns' sums advance side by side); returns ``out``."""
    rows, columns = x.shape
    for j in range(columns):
        out[j] = 0.0
    for i in range(rows):
        ci = c[i]
        for j in range(columns):
            out[j] += x[i, j] * ci
    return out


@njit(cache=True)
def row_squares(x: np.ndarray) -> np.ndarray:
    """Σ_j x_ij² (ascending j) for every row of a 2-D ``x``."""
    rows, columns = x.shape
    out = np.empty(rows)
    for i in range(rows):
        total = 0.0
        for j in range(columns):
            total += x[i, j] * x[i, j]
        out[i] = total
    return out


@njit(cache=True)
def scores(x: np.ndarray, models: np.ndarray) -> np.ndarray:
    """The (rows × models) matrix Σ_j x_ij w_mj (ascending j) of a 2-D ``x`` and the models
    w_m stacked as the rows of ``models``."""
    rows, columns = x.shape
    count = models.shape[0]
    out = np.empty((rows, count))
    for i in range(rows):
        for m in range(count):
            total = 0.0
            for j in range(columns):
                total += x[i, j] * models[m, j]
            out[i, m] = total
    return out


def matvec_new(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """:func:`matvec` into a new array (float64 inputs as given, converted if not)."""
    x = np.asarray(x, dtype=np.float64)
    return matvec(x, np.asarray(v, dtype=np.float64), np.empty(x.shape[0]))


def row_norms(x: np.ndarray) -> np.ndarray:
    """‖x_i‖₂ of every row of a dense 2-D array, with :func:`row_squares`' order."""
    return np.sqrt(row_squares(np.asarray(x, dtype=np.float64)))


def column_means(x: np.ndarray) -> np.ndarray:
    """(1/rows) Σ_i x_ij (ascending i) for every column of a 2-D array."""
    x = np.asarray(x, dtype=np.float64)
    return rmatvec(x, np.ones(x.shape[0]), np.empty(x.shape[1])) / x.shape[0]


def sum_squares(x: np.ndarray) -> float:
    """Σ x² over all entries of an array, in C order with :func:`dot`'s order."""
    flat = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    return dot(flat, flat)


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
