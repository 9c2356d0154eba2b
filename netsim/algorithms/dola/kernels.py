"""Compiled per-round kernels of DOLA (Li et al.): mixing and the local update of all nodes.

A round touches every online node's m-row of an (m × n) state array a few times; doing it in
numpy costs one pass over memory per operation, so the mixing b_i = Σ_j a_ij v_j and the
local step (gradient of a mini-batch at b_i, step, projection onto the L2 ball, or the soft-
threshold of Alg. 3) are compiled loops over the online nodes. Data come either dense
(``dense`` of shape (N, n), with empty CSR arrays) or as CSR arrays (``dense`` of shape
(0, n)). Losses: 0 = hinge max(0, 1 − z), 1 = logistic log(1 + e^−z), z = y⟨w, x⟩.
"""

from __future__ import annotations

import math

import numpy as np

from netsim.compiled import njit
from netsim.kernel_cache import guard_kernels

HINGE = 0
LOGISTIC = 1


@njit(cache=True, inline="always")
def _loss(kind: int, z: float) -> float:
    if kind == HINGE:
        return max(0.0, 1.0 - z)
    if z > 0:
        return math.log1p(math.exp(-z))
    return -z + math.log1p(math.exp(z))


@njit(cache=True, inline="always")
def _loss_slope(kind: int, z: float) -> float:
    """dℓ/dz (a subgradient for the hinge: −1 below the hinge point 1, else 0)."""
    if kind == HINGE:
        return -1.0 if z < 1.0 else 0.0
    if z > 0:
        e = math.exp(-z)
        return -e / (1.0 + e)
    return -1.0 / (1.0 + math.exp(z))


@njit(cache=True, inline="always")
def _dot_pair(
    u: np.ndarray,
    v: np.ndarray,
    row: int,
    dense: np.ndarray,
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
) -> tuple[float, float]:
    """(⟨u, x_row⟩, ⟨v, x_row⟩) in one pass over the example. Each is summed in four running
    sums in a fixed order: faster than one (the adds overlap) and, unlike fastmath
    reassociation, the same result on every CPU; the two dots' eight sums keep the adder busier
    still."""
    if dense.shape[0] == 0:
        first = second = 0.0
        for e in range(indptr[row], indptr[row + 1]):
            first += u[indices[e]] * data[e]
            second += v[indices[e]] * data[e]
        return first, second
    x = dense[row]
    s0 = s1 = s2 = s3 = t0 = t1 = t2 = t3 = 0.0
    n4 = u.size - u.size % 4
    for f in range(0, n4, 4):
        s0 += u[f] * x[f]
        s1 += u[f + 1] * x[f + 1]
        s2 += u[f + 2] * x[f + 2]
        s3 += u[f + 3] * x[f + 3]
        t0 += v[f] * x[f]
        t1 += v[f + 1] * x[f + 1]
        t2 += v[f + 2] * x[f + 2]
        t3 += v[f + 3] * x[f + 3]
    for f in range(n4, u.size):
        s0 += u[f] * x[f]
        t0 += v[f] * x[f]
    return (s0 + s1) + (s2 + s3), (t0 + t1) + (t2 + t3)


@njit(cache=True, inline="always")
def _dot(
    w: np.ndarray,
    row: int,
    dense: np.ndarray,
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
) -> float:
    """⟨w, x_row⟩, summed as :func:`_dot_pair` sums it (the compiler merges the two identical
    halves, so it costs one dot)."""
    return _dot_pair(w, w, row, dense, data, indices, indptr)[0]


@njit(cache=True, inline="always")
def _axpy(
    out: np.ndarray,
    c: float,
    row: int,
    dense: np.ndarray,
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
) -> None:
    """out += c · x_row."""
    if dense.shape[0] > 0:
        x = dense[row]
        for f in range(out.size):
            out[f] += c * x[f]
    else:
        for e in range(indptr[row], indptr[row + 1]):
            out[indices[e]] += c * data[e]


@njit(cache=True, inline="always")
def _squared_norm(w: np.ndarray) -> float:
    """‖w‖² with four running sums in a fixed order (see :func:`_dot`)."""
    s0 = s1 = s2 = s3 = 0.0
    n4 = w.size - w.size % 4
    for f in range(0, n4, 4):
        s0 += w[f] * w[f]
        s1 += w[f + 1] * w[f + 1]
        s2 += w[f + 2] * w[f + 2]
        s3 += w[f + 3] * w[f + 3]
    for f in range(n4, w.size):
        s0 += w[f] * w[f]
    return (s0 + s1) + (s2 + s3)


@njit(cache=True, inline="always")
def _project(w: np.ndarray, radius: float) -> None:
    """Euclidean projection onto the ball ‖w‖ ≤ radius, in place."""
    squared = _squared_norm(w)
    if squared > radius * radius:
        scale = radius / math.sqrt(squared)
        for f in range(w.size):
            w[f] *= scale


@njit(cache=True, inline="always")
def _batch_gradient(
    point: np.ndarray,
    k: int,
    rows: np.ndarray,
    dense: np.ndarray,
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
    labels: np.ndarray,
    loss: int,
    regularisation: float,
    slopes: np.ndarray,
    gradient: np.ndarray,
) -> None:
    """gradient = φ·point + (1/h) Σ_r ∇ℓ(point; x_r, y_r) over the k-th node's h examples:
    slopes[r] = ℓ'(y_r⟨point, x_r⟩)·y_r/h, and the gradient φ·point + Σ_r slopes[r]·x_r."""
    h = rows.shape[1]
    for r in range(h):
        row = rows[k, r]
        z = labels[row] * _dot(point, row, dense, data, indices, indptr)
        slopes[r] = _loss_slope(loss, z) * labels[row] / h
    for f in range(point.size):
        gradient[f] = regularisation * point[f]
    for r in range(rows.shape[1]):
        if slopes[r] != 0.0:
            _axpy(gradient, slopes[r], rows[k, r], dense, data, indices, indptr)


@njit(cache=True, inline="always")
def _node_loss(
    w: np.ndarray,
    k: int,
    rows: np.ndarray,
    dense: np.ndarray,
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
    labels: np.ndarray,
    loss: int,
) -> float:
    """(1/h) Σ_r ℓ(y_r⟨w, x_r⟩) over the k-th node's h examples (without the regulariser)."""
    h = rows.shape[1]
    total = 0.0
    for r in range(h):
        row = rows[k, r]
        total += _loss(loss, labels[row] * _dot(w, row, dense, data, indices, indptr)) / h
    return total


@njit(cache=True, inline="always")
def _mix_row(
    a_ptr: np.ndarray,
    a_idx: np.ndarray,
    a_val: np.ndarray,
    values: np.ndarray,
    i: int,
    out: np.ndarray,
) -> None:
    """out = Σ_j a_ij values[j] (row i of A_t in CSR), summed in CSR order from 0.0.

    Four sources per pass over ``out`` (the sum's order, and so every bit, is that of one
    source per pass: ((o + a₀s₀) + a₁s₁) + …); the first pass starts from 0.0 rather than
    clearing ``out`` in a pass of its own."""
    first, end = a_ptr[i], a_ptr[i + 1]
    if first == end:
        for f in range(out.size):
            out[f] = 0.0
        return
    e = first
    while e < end:
        if end - e >= 4:
            a0, a1, a2, a3 = a_val[e], a_val[e + 1], a_val[e + 2], a_val[e + 3]
            s0, s1 = values[a_idx[e]], values[a_idx[e + 1]]
            s2, s3 = values[a_idx[e + 2]], values[a_idx[e + 3]]
            if e == first:
                for f in range(out.size):
                    out[f] = (((0.0 + a0 * s0[f]) + a1 * s1[f]) + a2 * s2[f]) + a3 * s3[f]
            else:
                for f in range(out.size):
                    out[f] = (((out[f] + a0 * s0[f]) + a1 * s1[f]) + a2 * s2[f]) + a3 * s3[f]
            e += 4
        else:
            a, source = a_val[e], values[a_idx[e]]
            if e == first:
                for f in range(out.size):
                    out[f] = 0.0 + a * source[f]
            else:
                for f in range(out.size):
                    out[f] += a * source[f]
            e += 1


@njit(cache=True)
def mix_rows(
    a_ptr: np.ndarray,
    a_idx: np.ndarray,
    a_val: np.ndarray,
    values: np.ndarray,
    nodes: np.ndarray,
    out: np.ndarray,
) -> None:
    """out[i] = Σ_j a_ij values[j] for every i in ``nodes`` (other rows untouched)."""
    for i in nodes:
        _mix_row(a_ptr, a_idx, a_val, values, i, out[i])


@njit(cache=True)
def project_rows(values: np.ndarray, nodes: np.ndarray, radius: float, out: np.ndarray) -> None:
    """out[i] = Proj_W(values[i]) onto the ball ‖w‖ ≤ radius for every i in ``nodes`` (other
    rows untouched)."""
    for i in nodes:
        target = out[i]
        target[:] = values[i]
        _project(target, radius)


@njit(cache=True)
def gradient_steps(
    a_ptr: np.ndarray,
    a_idx: np.ndarray,
    a_val: np.ndarray,
    values: np.ndarray,
    points: np.ndarray,
    nodes: np.ndarray,
    rows: np.ndarray,
    dense: np.ndarray,
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
    labels: np.ndarray,
    loss: int,
    alpha: float,
    regularisation: float,
    radius: float,
    gradient_noise: np.ndarray,
    out: np.ndarray,
    observer: np.ndarray,
    previous: np.ndarray,
    column_sum: np.ndarray,
) -> float:
    """Li et al. Alg. 1 line 6 / Alg. 2 line 7 / mini-batch Alg. 4 line 6, for every node:

        out[i] = Proj_W[ b_i − α (φ b_i + (1/h) Σ_k ∇ℓ(b_i; x_k, y_k) + noise_i) ]

    with b_i = Σ_j a_ij ``values[j]`` mixed on the fly (A_t in CSR ``a_*``; saves a pass
    over memory) or, when ``a_ptr`` is empty, b_i = ``points[i]`` (values mixed and amended
    beforehand), the h examples ``rows[k]`` of the k-th node ``nodes[k]``, and
    ``gradient_noise[k]`` (Alg. 2's Gaussian; an empty (0, n) array for none). The
    regulariser φ is applied at b_i (a post-processing of released values) rather than at the
    node's previous iterate as printed, so no earlier example enters this release.

    Returns Σ_k f_t^k(``observer``), the round's losses at the regret node's iterate (as
    :func:`batch_loss`), computed while each example is in cache. ``column_sum`` (Σ_i of the
    nodes' iterates) is kept up to date: it gains out[i] − previous[i] for every node stepped
    (``previous`` may be ``out`` itself), which saves a pass over all iterates per round.
    """
    n = out.shape[1]
    h = rows.shape[1]
    mixed = np.empty(n)
    slopes = np.empty(h)
    noisy = gradient_noise.shape[0] > 0
    zeros = np.zeros(n)  # stands in for the noise row or the example when there is none
    keep = 1.0 - alpha * regularisation
    observed = 0.0
    for k in range(nodes.size):
        i = nodes[k]
        if a_ptr.size > 0:
            _mix_row(a_ptr, a_idx, a_val, values, i, mixed)
            b = mixed
        else:
            b = points[i]
        # per example, the loss at the regret node's iterate and the slope at b: one pass
        node_loss = 0.0  # as batch_loss sums it
        for r in range(h):
            row = rows[k, r]
            at_observer, at_b = _dot_pair(observer, b, row, dense, data, indices, indptr)
            node_loss += _loss(loss, labels[row] * at_observer) / h
            slopes[r] = _loss_slope(loss, labels[row] * at_b) * labels[row] / h
        observed += node_loss
        # the gradient is φb + Σ_r c_r x_r; the step is taken without materialising it, in
        # one pass with the first dense example: take the old iterate out of the running sum
        # (read before ``target`` is written: ``previous`` may be ``out``), then
        # b − α(φb + noise) − α c_0 x_0; the other examples follow as axpys. The sums are
        # those of one operation per pass: (((keep·b) − α·noise) + (−α c_0)·x_0) + …
        target = out[i]
        before = previous[i]
        noise = gradient_noise[k] if noisy else zeros
        joined = dense.shape[0] > 0 and slopes[0] != 0.0
        coefficient = -alpha * slopes[0] if joined else 0.0
        x = dense[rows[k, 0]] if joined else zeros
        for f in range(n):
            column_sum[f] -= before[f]
            step = keep * b[f]
            if noisy:
                step -= alpha * noise[f]
            if joined:
                step += coefficient * x[f]
            target[f] = step
        for r in range(1 if joined else 0, h):
            if slopes[r] != 0.0:
                _axpy(target, -alpha * slopes[r], rows[k, r], dense, data, indices, indptr)
        # projection onto the ball, and the new iterate into the running sum, in one pass
        squared = _squared_norm(target)
        if squared > radius * radius:  # as _project scales
            scale = radius / math.sqrt(squared)
            for f in range(n):
                target[f] *= scale
                column_sum[f] += target[f]
        else:
            for f in range(n):
                column_sum[f] += target[f]
    if regularisation > 0:
        observed += nodes.size * 0.5 * regularisation * _squared_norm(observer)
    return observed


@njit(cache=True)
def sparse_dual_steps(
    points: np.ndarray,
    nodes: np.ndarray,
    rows: np.ndarray,
    dense: np.ndarray,
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
    labels: np.ndarray,
    loss: int,
    alpha: float,
    threshold: float,
    regularisation: float,
    radius: float,
    weights: np.ndarray,
    duals: np.ndarray,
) -> None:
    """Li et al. (TKDE) Alg. 3 for every node, from the mixed duals p_i = ``points[i]``:

        w_i = Proj_W[ argmin_w ½‖p_i − w‖² + ρ_t ‖w‖₁ ]   (soft-thresholding at ρ_t, then the ball)
        ϑ_i = w_i − α_t (φ w_i + (1/h) Σ_k ∇ℓ(w_i; x_k, y_k))

    written to ``weights[i]`` and ``duals[i]``. The gradient step starts from the thresholded
    w_i (the proximal, FOBOS form): started from p_i, as the printed algorithm can be read, the
    shrinkage ρ_t = α_t ρ would never accumulate and would vanish as α_t → 0.
    """
    n = points.shape[1]
    gradient = np.empty(n)
    slopes = np.empty(rows.shape[1])
    for k in range(nodes.size):
        i = nodes[k]
        p = points[i]
        w = weights[i]
        for f in range(n):
            v = p[f]
            if v > threshold:
                w[f] = v - threshold
            elif v < -threshold:
                w[f] = v + threshold
            else:
                w[f] = 0.0
        _project(w, radius)
        _batch_gradient(w, k, rows, dense, data, indices, indptr, labels, loss, regularisation,
                        slopes, gradient)  # fmt: skip
        theta = duals[i]
        for f in range(n):
            theta[f] = w[f] - alpha * gradient[f]


@njit(cache=True)
def batch_loss(
    w: np.ndarray,
    rows: np.ndarray,
    dense: np.ndarray,
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
    labels: np.ndarray,
    loss: int,
    regularisation: float,
) -> float:
    """Σ_k f_t^k(w) over the nodes k whose examples are ``rows[k]`` (one row per node):
    f = (1/h) Σ ℓ(y⟨w, x⟩) + (φ/2)‖w‖², the losses that the regret of Li et al. (Def. 2)
    sums for one round at one node's iterate w."""
    total = 0.0
    for k in range(rows.shape[0]):
        total += _node_loss(w, k, rows, dense, data, indices, indptr, labels, loss)
    if regularisation > 0:
        total += rows.shape[0] * 0.5 * regularisation * _squared_norm(w)
    return total


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
