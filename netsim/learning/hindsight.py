"""The best fixed linear model in hindsight, with a certified optimality gap.

The regret of a decentralised online learner (Li et al., "Distributed autonomous online
learning: regrets and intrinsic privacy-preserving properties" (DOLA), Definition 2) is

    R_D = Σ_t Σ_i f_t^i(w_t^j) − min_{w ∈ W} Σ_t Σ_i f_t^i(w),

so it needs the comparator ``min_{w ∈ W} Σ f``: the best fixed model in hindsight over the
feasible set W = {‖w‖₂ ≤ R}. With linear models every f_t^i is a (regularised) margin loss of
one example, and examples may repeat, so the comparator is the minimum of

    F(w) = Σ_k c_k ℓ(y_k ⟨w, x_k⟩) + (φ/2) (Σ_k c_k) ‖w‖²   subject to ‖w‖₂ ≤ R,

with integer multiplicities c_k ≥ 0, labels y_k ∈ {−1, +1}, regulariser φ ≥ 0 and ℓ the hinge
max(0, 1 − z) or the logistic loss log(1 + e^{−z}).

Method. Spectral projected gradient (SPG; Birgin, Martínez & Raydan, "Nonmonotone spectral
projected gradient methods on convex sets", SIAM J. Optim. 10(4), 2000, algorithm SPG2):
Barzilai–Borwein step lengths, projection onto the ball, and a non-monotone Armijo line
search against the largest of the last ten objective values. The logistic loss is smooth and
is minimised directly. The hinge is replaced by Nesterov's smoothing ("Smooth minimization of
non-smooth functions", Math. Program. 103, 2005)

    h_μ(z) = 0 (z ≥ 1),   (1 − z)²/(2μ) (1 − μ < z < 1),   1 − z − μ/2 (z ≤ 1 − μ),

which satisfies h_μ ≤ h ≤ h_μ + μ/2 and has a 1/μ-Lipschitz derivative, with continuation
μ = 1, 0.1, 0.01, … (each stage warm-started from the previous one) down to a μ with
(μ/2) Σ c_k ≤ tolerance · max(1, |value|) / 2 at the latest.

Certificate. Every iterate w is feasible and yields a lower bound on min F, because F_μ (the
objective with h_μ in place of h; F_μ = F for the logistic loss) is convex and φC-strongly
convex (C = Σ c_k), so for every feasible v

    F(v) ≥ F_μ(v) ≥ F_μ(w) + ⟨∇F_μ(w), v − w⟩ + (φC/2) ‖v − w‖².

The right-hand side is minimised over the ball in closed form: at v = P(w − ∇F_μ(w)/(φC)) (P
the projection onto the ball) when φC > 0, and at v = −R ∇F_μ(w)/‖∇F_μ(w)‖ when φ = 0, where
the bound is F_μ(w) − gap_FW with the Frank–Wolfe duality gap
gap_FW = ⟨∇F_μ(w), w⟩ + R ‖∇F_μ(w)‖. The bound is therefore a property of the returned numbers
alone, not of the solver having converged: ``value`` (F at the returned w, with the true loss)
is an upper bound on min F and ``lower_bound`` (the best such bound over all iterates, less a
tiny allowance for floating-point rounding) a lower bound, so their difference bounds the
error of the comparator whether or not ``max_iterations`` cut the run short.

Only ``x @ w`` and ``x.T @ v`` touch the data, so dense arrays and scipy CSR matrices are
handled by the same code; the line search reuses ``x @ d`` along the search direction, so each
iteration costs one product with x and one with its transpose.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import expit
from threadpoolctl import threadpool_limits

LOSSES: tuple[str, ...] = ("hinge", "logistic")

# SPG2 constants (Birgin et al. 2000 §3): history length of the non-monotone line search,
# Armijo constant, safeguards of the quadratic interpolation, and bounds on the spectral step.
_HISTORY = 10
_ARMIJO = 1e-4
_SIGMA1, _SIGMA2 = 0.1, 0.9
_STEP_MIN, _STEP_MAX = 1e-30, 1e30
# Recompute the margins y ⊙ (x @ w) from scratch this often instead of updating them along the
# search directions, so that rounding cannot accumulate.
_REFRESH_EVERY = 25
# Relative allowance subtracted from the lower bound for rounding in the sums that produce it.
_ROUNDING = 1e-12
# Dense inputs with at most this many features are copied to column-major order (if the copy
# takes at most _COPY_BYTES), and their products run on one BLAS thread.
_FEW_FEATURES = 1024
_COPY_BYTES = 1 << 28


@dataclass(frozen=True)
class HindsightSolution:
    """The best fixed model in hindsight found, with a certified bracket on the minimum.

    ``lower_bound ≤ min F ≤ value``; ``value − lower_bound`` is the reported gap.
    """

    w: np.ndarray  # the minimiser found (‖w‖ ≤ R)
    value: float  # F(w) with the true loss: an upper bound on the minimum
    lower_bound: float  # a certified lower bound on min F
    iterations: int  # spectral projected gradient iterations, summed over smoothing stages


def _check_loss(loss: str) -> None:
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; use one of {', '.join(LOSSES)}")


def loss_values(loss: str, margins: np.ndarray) -> np.ndarray:
    """ℓ(z) elementwise for margins z = y⟨w, x⟩: the hinge max(0, 1 − z) or the logistic loss
    log(1 + e^{−z}), the latter computed without overflow as logaddexp(0, −z)."""
    _check_loss(loss)
    z = np.asarray(margins, dtype=np.float64)
    if loss == "hinge":
        return np.maximum(0.0, 1.0 - z)
    return np.logaddexp(0.0, -z)


def loss_derivative(loss: str, margins: np.ndarray) -> np.ndarray:
    """A (sub)derivative dℓ/dz elementwise: for the hinge −1 where z < 1 and 0 elsewhere, for
    the logistic loss −1/(1 + e^{z})."""
    _check_loss(loss)
    z = np.asarray(margins, dtype=np.float64)
    if loss == "hinge":
        return np.where(z < 1.0, -1.0, 0.0)
    return -expit(-z)


def _validate(x, y, weights, loss: str, regularisation: float):
    """Check the problem data and return (x as float64 ndarray or CSR, y, weights)."""
    _check_loss(loss)
    if sp.issparse(x):
        if x.ndim != 2:
            raise ValueError(f"x must be a 2-D (N, d) matrix, got shape {x.shape}")
        x = sp.csr_matrix(x, dtype=np.float64)
        if not np.all(np.isfinite(x.data)):
            raise ValueError("x must contain only finite values")
    else:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2:
            raise ValueError(
                f"x must be a 2-D (N, d) ndarray or scipy.sparse CSR matrix, got shape {x.shape}"
            )
        if not np.all(np.isfinite(x)):
            raise ValueError("x must contain only finite values")
    n = x.shape[0]
    y = np.asarray(y, dtype=np.float64)
    if y.shape != (n,):
        raise ValueError(f"y must have shape ({n},) to match x of shape {x.shape}, got {y.shape}")
    if not np.all((y == 1.0) | (y == -1.0)):
        raise ValueError("labels y must be −1 or +1")
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (n,):
        raise ValueError(
            f"weights must have shape ({n},) to match x of shape {x.shape}, got {weights.shape}"
        )
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("weights (multiplicities) must be finite and ≥ 0")
    if not (math.isfinite(regularisation) and regularisation >= 0):
        raise ValueError(f"regularisation must be finite and ≥ 0, got {regularisation}")
    return x, y, weights


def _project(w: np.ndarray, radius: float) -> np.ndarray:
    norm = float(np.linalg.norm(w))
    return w * (radius / norm) if norm > radius else w


def objective(w, x, y, weights, loss: str, regularisation: float = 0.0) -> float:
    """F(w) = Σ_k c_k ℓ(y_k⟨w, x_k⟩) + (φ/2)(Σ_k c_k)‖w‖², the hindsight objective of Li et al.
    (DOLA, Definition 2) with multiplicities c = ``weights`` and φ = ``regularisation``."""
    x, y, weights = _validate(x, y, weights, loss, regularisation)
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (x.shape[1],):
        raise ValueError(f"w must have shape ({x.shape[1]},) to match x, got {w.shape}")
    margins = y * (x @ w)
    total = float(weights.sum())
    return float(weights @ loss_values(loss, margins)) + 0.5 * regularisation * total * float(w @ w)


def _lower_bound(f: float, g: np.ndarray, w: np.ndarray, radius: float, strong: float) -> float:
    """min over the ball of the strongly convex minorant f + ⟨g, v − w⟩ + (strong/2)‖v − w‖²
    of a convex function with value f and gradient g at w (see the module docstring)."""
    if strong > 0.0:
        step = _project(w - g / strong, radius) - w
        bound = f + float(g @ step) + 0.5 * strong * float(step @ step)
    else:
        bound = f - float(g @ w) - radius * float(np.linalg.norm(g))
    scale = abs(f) + radius * float(np.linalg.norm(g)) + abs(float(g @ w))
    return bound - _ROUNDING * scale


class _DataTerm:
    """Σ_k c_k ℓ(z_k) and its gradient in w for margins z = y ⊙ (x @ w), on work arrays.

    All elementwise work writes into arrays allocated once: fresh temporaries of N floats per
    operation (several per evaluation) would cost more than the arithmetic itself.

    For the hinge, ``evaluate`` uses Nesterov's smoothed hinge (Nesterov 2005): with
    t = 1 − z and r = clip(t/μ, 0, 1), h_μ(z) = r (t − μr/2), which is 0 for t ≤ 0, t²/(2μ) for
    0 < t < μ and t − μ/2 for t ≥ μ, and −h_μ'(z) = r.
    """

    def __init__(self, x, y: np.ndarray, weights: np.ndarray, hinge: bool) -> None:
        n = y.size
        self.x, self.y, self.weights, self.hinge = x, y, weights, hinge
        self.signed = weights * y
        self.dense = not sp.issparse(x)
        self.transposed = x.T  # a view for ndarrays, CSC for CSR: both multiply without copies
        self.first, self.second, self.third = np.empty(n), np.empty(n), np.empty(n)
        self.last: np.ndarray | None = None  # the margins of the last evaluation
        self.mu = 0.0

    def margins(self, v: np.ndarray, out: np.ndarray) -> np.ndarray:
        """y ⊙ (x @ v), written into ``out``."""
        if self.dense:
            np.matmul(self.x, v, out=out)
        else:
            out[...] = self.x @ v
        out *= self.y
        return out

    def evaluate(self, z: np.ndarray, mu: float) -> float:
        """Σ c ℓ_μ(z): the smoothed hinge h_μ, or the logistic loss (μ unused)."""
        first, second, third = self.first, self.second, self.third
        self.last, self.mu = z, mu
        if self.hinge:
            np.subtract(1.0, z, out=first)  # t
            np.multiply(first, 1.0 / mu, out=second)
            np.clip(second, 0.0, 1.0, out=second)  # r = −h_μ'(z)
            np.multiply(second, -0.5 * mu, out=third)
            third += first
            third *= second
        else:  # log(1 + e^{−z}) = max(−z, 0) + log1p(e^{−|z|}), without overflow
            np.abs(z, out=first)
            np.negative(first, out=first)
            np.exp(first, out=first)  # e^{−|z|}, kept for the slope
            np.log1p(first, out=third)
            np.negative(z, out=second)
            np.maximum(second, 0.0, out=second)
            third += second
        return float(self.weights @ third)

    def true_hinge(self, z: np.ndarray) -> float:
        """Σ c max(0, 1 − z) (overwrites the work arrays)."""
        self.last = None
        np.subtract(1.0, z, out=self.third)
        np.maximum(self.third, 0.0, out=self.third)
        return float(self.weights @ self.third)

    def gradient(self) -> tuple[np.ndarray, float]:
        """At the margins of the last ``evaluate``: the gradient of Σ c ℓ_μ in w,
        −xᵀ(c ⊙ y ⊙ s) with s = −ℓ_μ'(z), and for the hinge the dual bonus (μ/2) Σ c s²."""
        assert self.last is not None
        first, second, third = self.first, self.second, self.third
        if self.hinge:
            slope = second
            np.multiply(slope, slope, out=third)
            bonus = 0.5 * self.mu * float(self.weights @ third)
        else:  # s = 1/(1 + e^{z}) = e^{−|z|}/(1 + e^{−|z|}) for z ≥ 0, 1/(1 + e^{−|z|}) else
            slope = second
            np.add(first, 1.0, out=slope)
            np.reciprocal(slope, out=slope)
            np.multiply(first, slope, out=third)
            np.copyto(slope, third, where=self.last >= 0.0)
            bonus = 0.0
        np.multiply(self.signed, slope, out=third)
        grad = np.asarray(self.transposed @ third).ravel()
        np.negative(grad, out=grad)
        return grad, bonus


def hindsight_minimum(
    x,
    y,
    weights,
    *,
    loss: str,
    radius: float,
    regularisation: float = 0.0,
    tolerance: float = 1e-6,
    max_iterations: int = 5000,
    start: np.ndarray | None = None,
) -> HindsightSolution:
    """Minimise F over the ball ‖w‖ ≤ ``radius``: the comparator of the regret of Li et al.
    (DOLA, Definition 2).

    ``x`` is a dense (N, d) float array or a scipy.sparse CSR matrix, ``y`` the labels in
    {−1, +1}, ``weights`` the multiplicities c_k ≥ 0 and ``regularisation`` φ ≥ 0. Runs the
    spectral projected gradient method (Birgin et al. 2000) on F (logistic) or on Nesterov's
    smoothed hinge with continuation in μ (hinge), until the certified gap
    ``value − lower_bound`` is at most ``tolerance · max(1, |value|)`` or ``max_iterations``
    iterations (over all stages) have run; in the latter case the returned bracket is still
    valid, only wider. ``start`` (projected onto the ball) warm-starts the search.
    """
    x, y, weights = _validate(x, y, weights, loss, regularisation)
    radius = float(radius)
    if not (math.isfinite(radius) and radius > 0):
        raise ValueError(f"radius must be finite and > 0, got {radius}")
    if not (math.isfinite(tolerance) and tolerance > 0):
        raise ValueError(f"tolerance must be finite and > 0, got {tolerance}")
    if int(max_iterations) != max_iterations or max_iterations < 0:
        raise ValueError(f"max_iterations must be an integer ≥ 0, got {max_iterations}")
    d = x.shape[1]
    if start is None:
        w = np.zeros(d)
    else:
        w = np.array(start, dtype=np.float64)
        if w.shape != (d,):
            raise ValueError(f"start must have shape ({d},) to match x, got {w.shape}")
        if not np.all(np.isfinite(w)):
            raise ValueError("start must contain only finite values")
        w = _project(w, radius)

    total = float(weights.sum())
    if total == 0.0:  # F ≡ 0
        return HindsightSolution(w=np.zeros(d), value=0.0, lower_bound=0.0, iterations=0)
    keep = weights > 0
    if np.count_nonzero(keep) < 0.75 * keep.size:  # drop the rows that do not count
        x, y, weights = x[keep], y[keep], weights[keep]

    if sp.issparse(x):
        return _solve(x, y, weights, w, loss, radius, regularisation, tolerance, max_iterations)
    if x.shape[1] <= _FEW_FEATURES and not x.flags.f_contiguous and x.nbytes <= _COPY_BYTES:
        x = np.asfortranarray(x)  # column-major products are about twice as fast here
    # Matrix–vector products of this size gain nothing from threads, and OpenBLAS's threads
    # slow them down by an order of magnitude when other processes compete for the cores.
    with threadpool_limits(limits=1, user_api="blas"):
        return _solve(x, y, weights, w, loss, radius, regularisation, tolerance, max_iterations)


def _solve(
    x,
    y: np.ndarray,
    weights: np.ndarray,
    w: np.ndarray,
    loss: str,
    radius: float,
    regularisation: float,
    tolerance: float,
    max_iterations: int,
) -> HindsightSolution:
    """SPG2 with smoothing continuation on validated data (see :func:`hindsight_minimum`)."""
    total = float(weights.sum())
    hinge = loss == "hinge"
    data = _DataTerm(x, y, weights, hinge)
    reg = 0.5 * regularisation * total  # F = Σ c ℓ + reg ‖w‖²
    strong = regularisation * total  # modulus of strong convexity of F and F_μ
    n = y.size
    z, trial_z, dz = data.margins(w, np.empty(n)), np.empty(n), np.empty(n)
    sq = float(w @ w)

    def true_value(z: np.ndarray, sq: float) -> float:
        return (data.true_hinge(z) if hinge else data.evaluate(z, 0.0)) + reg * sq

    best_w, best_value = w.copy(), true_value(z, sq)
    best_lower = -math.inf
    iterations = 0
    step = None  # spectral step length λ
    mu = 1.0 if hinge else 0.0

    while True:  # smoothing stages (a single one for the logistic loss)
        f = data.evaluate(z, mu) + reg * sq
        g, bonus = data.gradient()
        g += (2.0 * reg) * w
        history: deque[float] = deque([f], maxlen=_HISTORY)
        since_refresh = 0
        done = False
        while True:  # SPG2 iterations on F_μ
            value = true_value(z, sq) if hinge else f
            if value < best_value:
                best_w, best_value = w.copy(), value
            bound = _lower_bound(f, g, w, radius, strong)  # ≤ min F_μ
            best_lower = max(best_lower, bound + bonus)  # ≤ min F (Lagrangian dual)
            target = tolerance * max(1.0, abs(best_value))
            if best_value - best_lower <= target or iterations >= max_iterations:
                done = True
                break
            last_stage = not hinge or mu * total <= target
            if not last_stage and f - bound <= max(0.5 * target, value - f - bonus):
                break  # F_μ is solved as well as its smoothing error warrants

            if step is None:
                first = _project(w - g, radius) - w
                size = float(np.max(np.abs(first)))
                step = min(_STEP_MAX, max(_STEP_MIN, 1.0 / size)) if size > 0 else 1.0
            direction = _project(w - step * g, radius) - w
            slope = float(g @ direction)
            if not slope < 0.0:  # stationary to working precision
                done = last_stage
                break
            data.margins(direction, out=dz)
            wd, dd = float(w @ direction), float(direction @ direction)
            reference = max(history)
            alpha = 1.0
            while True:  # non-monotone Armijo search with safeguarded quadratic interpolation
                trial_sq = sq + 2.0 * alpha * wd + alpha * alpha * dd
                np.multiply(dz, alpha, out=trial_z)
                trial_z += z
                trial = data.evaluate(trial_z, mu) + reg * trial_sq
                if trial <= reference + _ARMIJO * alpha * slope:
                    break
                curvature = trial - f - alpha * slope
                candidate = -0.5 * alpha * alpha * slope / curvature if curvature > 0 else 0.0
                alpha = candidate if _SIGMA1 <= candidate <= _SIGMA2 * alpha else 0.5 * alpha
                if alpha < 1e-16:
                    break
            if alpha < 1e-16:  # no decrease representable along the direction
                done = last_stage
                break

            w_new = w + alpha * direction
            sq = float(w_new @ w_new)
            z, trial_z = trial_z, z
            since_refresh += 1
            if since_refresh >= _REFRESH_EVERY:  # recompute instead of accumulating rounding
                data.margins(w_new, out=z)
                since_refresh = 0
                trial = data.evaluate(z, mu) + reg * sq
            g_new, bonus = data.gradient()
            g_new += (2.0 * reg) * w_new
            s, r = w_new - w, g_new - g
            curv = float(s @ r)
            step = min(_STEP_MAX, max(_STEP_MIN, float(s @ s) / curv)) if curv > 0 else _STEP_MAX
            w, f, g = w_new, trial, g_new
            history.append(f)
            iterations += 1
        if done:
            break
        # Next smoothing stage, warm-started; never smoother than needed for the tolerance.
        mu = max(0.1 * mu, tolerance * max(1.0, abs(best_value)) / total)
        data.margins(w, out=z)

    # Report F at the returned point from freshly computed margins.
    w = best_w
    norm = float(np.linalg.norm(w))
    if norm > radius:  # rounding in the convex combinations
        w = w * (radius / norm)
    value = true_value(data.margins(w, out=z), float(w @ w))
    return HindsightSolution(
        w=w, value=value, lower_bound=min(best_lower, value), iterations=iterations
    )
