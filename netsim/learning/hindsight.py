"""The best fixed linear model in hindsight, with a certified optimality gap.

The regret of a decentralised online learner (Li et al., "Distributed autonomous online
learning: regrets and intrinsic privacy-preserving properties" (DOLA), Definition 2) is

    R_D = Σ_t Σ_i f_t^i(w_t^j) − min_{w ∈ W} Σ_t Σ_i f_t^i(w),

so it needs the comparator ``min_{w ∈ W} Σ f``: the best fixed model in hindsight over the
feasible set W = {‖w‖₂ ≤ R}. With linear models every f_t^i is a (regularised) margin loss of
one example, and examples may repeat, so the comparator is the minimum of

    F(w) = Σ_k c_k ℓ(y_k ⟨w, x_k⟩) + (φ/2) C ‖w‖²   subject to ‖w‖₂ ≤ R,   C = Σ_k c_k,

with integer multiplicities c_k ≥ 0, labels y_k ∈ {−1, +1}, regulariser φ ≥ 0 and ℓ the hinge
max(0, 1 − z) or the logistic loss log(1 + e^{−z}); or, for regression (Zhang &
Venkitasubramaniam's experiment), F(w) = Σ_k c_k ``|⟨w, x_k⟩ − y_k|`` + (φ/2) C ‖w‖² with real
y_k (``absolute``).

Method. Spectral projected gradient (SPG; Birgin, Martínez & Raydan, "Nonmonotone spectral
projected gradient methods on convex sets", SIAM J. Optim. 10(4), 2000, algorithm SPG2):
Barzilai–Borwein step lengths, projection onto the feasible set, and a non-monotone Armijo
line search against the largest of the last ten objective values, capped by their Zhang–Hager
average (SIAM J. Optim. 14(4), 2004; without the cap SPG2 can cycle on very non-quadratic
objectives such as a nearly separable logistic loss, accepting again and again a return to an
old, poor point that the history still tolerates).

* Logistic loss: SPG on F over the ball.
* Absolute error: SPG over the ball on the Huber-smoothed ``|r|``, h_μ(r) = r²/(2μ)
  (``|r|`` ≤ μ), ``|r|`` − μ/2 (else), with h_μ ≤ ``|r|`` ≤ h_μ + μ/2, and the same
  continuation in μ as the hinge (primal only: its certificate is the gradient bound below).
* Hinge: SPG over the ball on F_μ, F with Nesterov's smoothed hinge ("Smooth minimization of
  non-smooth functions", Math. Program. 103, 2005)

      h_μ(z) = 0 (z ≥ 1),   (1 − z)²/(2μ) (1 − μ < z < 1),   1 − z − μ/2 (z ≤ 1 − μ),

  which satisfies h_μ ≤ h ≤ h_μ + μ/2 and has a 1/μ-Lipschitz derivative, with continuation
  μ = 1, 0.1, 0.01, … (each stage warm-started from the last) down to a μ with
  (μ/2) C ≤ tolerance · max(1, ``|value|``)/2 at the latest. After the first stage a second SPG runs
  on the Lagrangian dual (below) over the box 0 ≤ α ≤ c, warm-started from the first stage's
  multipliers and interleaved with the primal iterations: the smoothed primal is fast when
  few examples sit on the margin at the optimum (d ≪ N) and is the only useful one when the
  optimum is interior and φ = 0; the dual is fast when the ball constraint is active or φ > 0,
  also when many examples sit on the margin (high-dimensional sparse data), where the smoothed
  primal needs ever smaller μ and stalls. Each solver keeps its own bracket; the one that
  would reach the tolerance sooner at its recent rate of progress gets eight iterations per
  round and the other one (they take turns while neither is clearly faster), and the primal
  leads while φ = 0 and its point is inside the ball.

Certificates. Every number reported is a bound that holds whatever the iterates are:
``value`` = F(w) at a feasible w (with the true loss) is an upper bound on min F, and
``lower_bound`` is the best of 0 (F ≥ 0) and the following lower bounds over all iterates of
both solvers, each less an allowance for rounding of 1e-13 · Σ_k c_k (1 + R‖x_k‖), a bound on
the total magnitude of the terms of the sums that produce it. (This is a generous allowance for
the rounding of such sums in practice, not interval arithmetic.)

* Gradient bound (logistic; and hinge via F_μ ≤ F). F_μ is convex and φC-strongly convex, so
  for every feasible v, F(v) ≥ F_μ(v) ≥ F_μ(w) + ⟨∇F_μ(w), v − w⟩ + (φC/2)‖v − w‖²; the
  right-hand side is minimised over the ball in closed form, at v = P(w − ∇F_μ(w)/(φC)) (P the
  projection onto the ball) if φ > 0 and at v = −R∇F_μ(w)/‖∇F_μ(w)‖ if φ = 0, where it is
  F_μ(w) − gap_FW with the Frank–Wolfe duality gap ⟨∇F_μ(w), w⟩ + R‖∇F_μ(w)‖.
* Lagrangian dual (hinge). Since c h(z) = max_{0 ≤ a ≤ c} a (1 − z) and the ball and the box
  are compact and convex, min F = max_{0 ≤ α ≤ c} D(α) (Sion's minimax theorem) with

      D(α) = Σ_k α_k + min_{‖w‖ ≤ R} (−⟨v, w⟩ + (φC/2)‖w‖²),   v = Σ_k α_k y_k x_k,

  the inner minimum being −R‖v‖ + (φC/2)R² at w = Rv/‖v‖ if ‖v‖ ≥ φCR, else −‖v‖²/(2φC) at
  w = v/(φC). So D(α) ≤ min F for every α in the box, and w(α) is a feasible point whose F is
  an upper bound. The multipliers α_k = c_k · (−h_μ'(z_k)) of a smoothed-primal iterate give
  exactly the gradient bound plus (μ/2) Σ_k α_k²/c_k, which the primal therefore also reports:
  the smoothing then costs only the examples inside the band 1 − μ < z < 1, not μC/2.

Only ``x @ w`` and ``x.T @ v`` touch the data, so dense arrays and scipy CSR matrices are
handled by the same code, and each iteration costs one product with x and one with its
transpose (the line searches reuse the product along the search direction). Elementwise work
on the N margins goes to arrays allocated once, and dense x with few columns is also kept in
column-major order (for x @ w).

Reproducibility. Every sum of the solver is order-defined (:mod:`netsim.learning.ordered`
for dense products, norms and inner products; scipy's sequential loops for CSR products): no
BLAS, whose kernels differ between CPUs. The iterates, the stopping point and so the
reported value and gap are therefore the same on every machine whose elementwise functions
agree (netsim's reproducibility contract, ``docs/reproducibility.md``); with BLAS they moved
by up to 8e-4 of the gap under a second OpenBLAS kernel.

Limits. First-order methods converge slowly on badly conditioned instances; the ones seen are
the hinge with φ = 0, an interior optimum and rows of very different scale, and the logistic
loss with tiny φ on separable data (the loss is exponentially flat near the optimum). There
the solver may stop at ``max_iterations`` with a gap wider than the tolerance; the bracket is
still valid, so compare ``value − lower_bound`` with what the regret needs.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from netsim.lazy import lazy_module
from netsim.learning import ordered
from netsim.learning.losses import BINARY_LOSSES, check_loss, loss_values

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")

# SPG2 constants (Birgin et al. 2000 §3): history length of the non-monotone line search,
# Armijo constant, safeguards of the quadratic interpolation, and bounds on the spectral step.
_HISTORY = 10
_ARMIJO = 1e-4
_SIGMA1, _SIGMA2 = 0.1, 0.9
_STEP_MIN, _STEP_MAX = 1e-30, 1e30
# The reference value of the line search is also capped by the Zhang & Hager (SIAM J. Optim.
# 14(4), 2004) average of past values with this weight, so that an old peak in the history
# cannot be revisited again and again (which makes SPG cycle on very non-quadratic objectives).
_AVERAGING = 0.85
_SMALLEST_STEP = 1e-16  # a line search below this makes no representable progress
# Recompute products that are otherwise updated along the search directions this often, so
# that rounding cannot accumulate.
_REFRESH_EVERY = 25
# Lower bounds are lowered by this fraction of Σ_k c_k (1 + R‖x_k‖), a bound on the total
# magnitude of the terms of the sums (and products with x) that produce them, for rounding:
# about 500 times the unit roundoff, above the typical error of such sums in double precision.
_ROUNDING = 1e-13
# Interleaving of the primal and dual solvers for the hinge: each solver's rate of progress is
# the narrowing of log(its own gap) per iteration over its last _WINDOW iterations; the solver
# that would reach the tolerance in fewer iterations at its rate gets _LEAD iterations per round
# and the other one, if it is faster by a factor _CLEAR, else they take turns.
_WINDOW, _LEAD, _CLEAR = 30, 8, 2.0
_INSIDE = 1e-3  # w is interior if ‖w‖ < (1 − _INSIDE) R
# Dense inputs with at most this many features are also kept in column-major order (if the
# copy takes at most _COPY_BYTES): x @ w then runs down the columns, about 1.7 times faster.
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
    iterations: int  # SPG iterations, of both solvers (hinge) and over all smoothing stages


def checkpoint_rounds(rounds: int, count: int) -> np.ndarray:
    """``count`` roughly log-spaced rounds in [1, rounds], always including ``rounds``: where
    the regret curves of DOLA and MI-private OGD are evaluated."""
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    # Past rounds·ln(rounds) + 1 points the largest gap of the geometric grid,
    # rounds·(1 − rounds^(−1/(count−1))) ≤ rounds·ln(rounds)/(count − 1), is below 1, so every
    # round is one: the same answer without an array of ``count`` (10¹² ran out of memory).
    if count > rounds * math.log(max(rounds, 1)) + 1:
        return np.arange(1, max(rounds, 1) + 1, dtype=np.int64)
    points = np.unique(np.round(np.geomspace(1, rounds, count)).astype(np.int64))
    return np.union1d(points, [rounds])


def _validate(x, y, weights, loss: str, regularisation: float):
    """Check the problem data and return (x as float64 ndarray or CSR, y, weights)."""
    check_loss(loss, BINARY_LOSSES)
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
    if loss == "absolute":
        if not np.all(np.isfinite(y)):
            raise ValueError("targets y must be finite")
    elif not np.all((y == 1.0) | (y == -1.0)):
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


def project_to_ball(w: np.ndarray, radius: float) -> np.ndarray:
    """Euclidean projection onto the ball ‖w‖₂ ≤ radius (``w`` itself when inside)."""
    norm = ordered.norm(w)
    return w * (radius / norm) if norm > radius else w


def objective(w, x, y, weights, loss: str, regularisation: float = 0.0) -> float:
    """F(w) = Σ_k c_k ℓ(y_k⟨w, x_k⟩) + (φ/2)(Σ_k c_k)‖w‖², the hindsight objective of Li et al.
    (DOLA, Definition 2) with multiplicities c = ``weights`` and φ = ``regularisation``."""
    x, y, weights = _validate(x, y, weights, loss, regularisation)
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (x.shape[1],):
        raise ValueError(f"w must have shape ({x.shape[1]},) to match x, got {w.shape}")
    products = x @ w if sp.issparse(x) else ordered.matvec(x, w, np.empty(x.shape[0]))
    margins = products - y if loss == "absolute" else y * products
    total = ordered.total(weights)
    return ordered.dot(weights, loss_values(loss, margins)) + (
        0.5 * regularisation * total * ordered.dot(w, w)
    )


class _Bracket:
    """The best upper bound on min F (with its point) and the best lower bound seen (by one
    solver; each passes its bounds on to the ``parent`` bracket of both)."""

    def __init__(self, tolerance: float, parent: _Bracket | None = None) -> None:
        self.tolerance, self.parent = tolerance, parent
        self.value = math.inf
        self.w: np.ndarray | None = None
        self.lower = 0.0  # F ≥ 0: the losses, the multiplicities and φ are ≥ 0

    def offer(self, value: float, w: np.ndarray, lower: float) -> None:
        if value < self.value:
            self.value, self.w = value, w.copy()
        self.lower = max(self.lower, lower)
        if self.parent is not None:
            self.parent.offer(value, w, lower)

    def target(self) -> float:
        """The gap that is small enough: tolerance · max(1, |value|)."""
        return self.tolerance * max(1.0, abs(self.value))

    def certified(self) -> bool:
        return self.value - self.lower <= self.target()

    def log_gap(self) -> float:
        return math.log(max(self.value - self.lower, 1e-300))


class _DataTerm:
    """Σ_k c_k ℓ(z_k) and its gradient in w for margins z = y ⊙ (x @ w), on work arrays.

    All elementwise work writes into arrays allocated once: fresh temporaries of N floats per
    operation (several per evaluation) would cost more than the arithmetic itself.

    For the hinge, ``evaluate`` uses Nesterov's smoothed hinge (Nesterov 2005): with
    t = 1 − z and r = clip(t/μ, 0, 1), h_μ(z) = r (t − μr/2), which is 0 for t ≤ 0, t²/(2μ) for
    0 < t < μ and t − μ/2 for t ≥ μ, and −h_μ'(z) = r.
    """

    def __init__(self, x, y: np.ndarray, weights: np.ndarray, loss: str) -> None:
        n = y.size
        self.x, self.y, self.weights = x, y, weights
        self.hinge, self.absolute = loss == "hinge", loss == "absolute"
        self.smoothed = self.hinge or self.absolute  # solved with continuation in μ
        # gradient = −xᵀ(signed ⊙ s): s = −ℓ'(z) of margins z = y ⊙ x@w, or −h_μ'(r) of
        # residuals r = x@w − y
        self.signed = weights if self.absolute else weights * y
        self.dense = not sp.issparse(x)
        # CSR products are scipy's (order-defined C++ loops); dense ones the module
        # ``ordered``'s, with a column-major copy for x @ v where the copy is small enough
        self.transposed = x.T if not self.dense else None  # CSC for CSR: no copy
        self.columns = (
            np.asfortranarray(x)
            if self.dense and x.shape[1] <= _FEW_FEATURES and x.nbytes <= _COPY_BYTES
            else x
        )
        self.first, self.second, self.third = np.empty(n), np.empty(n), np.empty(n)
        self.fourth = np.empty(n) if self.absolute else self.third
        self.last: np.ndarray | None = None  # the margins of the last evaluation
        self.mu = self.last_value = 0.0
        self.slack = 0.0  # subtracted from lower bounds for rounding (set by the solver)

    def margins(self, v: np.ndarray, out: np.ndarray, *, point: bool = True) -> np.ndarray:
        """y ⊙ (x @ v), written into ``out``; for ``absolute`` the residuals x @ v − y of a
        point, or x @ v for a direction (``point`` False: margins are linear in v, residuals
        affine)."""
        if self.dense:
            ordered.matvec(self.columns, v, out)
        else:
            out[...] = self.x @ v
        if self.absolute:
            if point:
                out -= self.y
        else:
            out *= self.y
        return out

    def combine(self, coefficients: np.ndarray) -> np.ndarray:
        """Σ_k coefficients_k y_k x_k = xᵀ (y ⊙ coefficients), a new array."""
        np.multiply(self.y, coefficients, out=self.third)
        return self.transpose_times(self.third)

    def transpose_times(self, c: np.ndarray) -> np.ndarray:
        """xᵀ c, a new array (order-defined for dense x, scipy's CSC product for CSR)."""
        if self.dense:
            return ordered.rmatvec(self.x, c, np.empty(self.x.shape[1]))
        return np.asarray(self.transposed @ c).ravel()

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
        elif self.absolute:  # Huber: h_μ(r) = q (|r| − μq/2) with q = min(|r|/μ, 1)
            np.abs(z, out=first)
            np.multiply(first, 1.0 / mu, out=third)
            np.minimum(third, 1.0, out=third)  # q
            np.multiply(z, -1.0 / mu, out=second)
            np.clip(second, -1.0, 1.0, out=second)  # −h_μ'(r), kept for the gradient
            np.multiply(third, -0.5 * mu, out=self.fourth)
            self.fourth += first
            third *= self.fourth
        else:  # log(1 + e^{−z}) = max(−z, 0) + log1p(e^{−|z|}), without overflow
            np.abs(z, out=first)
            np.negative(first, out=first)
            np.exp(first, out=first)  # e^{−|z|}, kept for the slope
            np.log1p(first, out=third)
            np.negative(z, out=second)
            np.maximum(second, 0.0, out=second)
            third += second
        self.last_value = ordered.dot(self.weights, third)
        return self.last_value

    def true_hinge(self, z: np.ndarray) -> float:
        """Σ c max(0, 1 − z) (overwrites the work arrays)."""
        self.last = None
        np.subtract(1.0, z, out=self.third)
        np.maximum(self.third, 0.0, out=self.third)
        return ordered.dot(self.weights, self.third)

    def gradient(self) -> tuple[np.ndarray, float, float]:
        """At the margins of the last ``evaluate``: the gradient of Σ c ℓ_μ in w,
        −xᵀ(c ⊙ y ⊙ s) with s = −ℓ_μ'(z); for the hinge the dual bonus (μ/2) Σ c s²; and the
        data term Σ c ℓ(z) with the true (unsmoothed) loss."""
        assert self.last is not None
        first, second, third = self.first, self.second, self.third
        slope = second
        if self.hinge:  # s = r, already in place; t = 1 − z in ``first``
            np.multiply(slope, slope, out=third)
            bonus = 0.5 * self.mu * ordered.dot(self.weights, third)
            np.maximum(first, 0.0, out=third)
            exact = ordered.dot(self.weights, third)
        elif self.absolute:  # s = −h_μ'(r) in place; |r| in ``first``
            bonus, exact = 0.0, ordered.dot(self.weights, first)
        else:  # s = 1/(1 + e^{z}): e^{−|z|}/(1 + e^{−|z|}) for z ≥ 0, 1/(1 + e^{−|z|}) else
            np.add(first, 1.0, out=slope)
            np.reciprocal(slope, out=slope)
            np.multiply(first, slope, out=third)
            np.copyto(slope, third, where=self.last >= 0.0)
            bonus, exact = 0.0, self.last_value
        np.multiply(self.signed, slope, out=third)
        grad = self.transpose_times(third)
        np.negative(grad, out=grad)
        return grad, bonus, exact

    def multipliers(self, z: np.ndarray, mu: float) -> np.ndarray:
        """The dual point α = c ⊙ (−h_μ'(z)) of margins z, a new array."""
        alpha = np.subtract(1.0, z)
        alpha *= 1.0 / mu
        np.clip(alpha, 0.0, 1.0, out=alpha)
        alpha *= self.weights
        return alpha


def _gradient_bound(f: float, g: np.ndarray, w: np.ndarray, radius: float, strong: float) -> float:
    """min over the ball of the minorant f + ⟨g, v − w⟩ + (strong/2)‖v − w‖² of a convex,
    ``strong``-strongly convex function with value f and gradient g at w (module docstring)."""
    if strong > 0.0:
        step = project_to_ball(w - g / strong, radius) - w
        return f + ordered.dot(g, step) + 0.5 * strong * ordered.dot(step, step)
    return f - ordered.dot(g, w) - radius * ordered.norm(g)


class _Primal:
    """F_μ over the ball, for SPG: the point w, its margins, and the bounds it certifies."""

    def __init__(
        self, data: _DataTerm, radius: float, reg: float, bracket: _Bracket, w: np.ndarray
    ) -> None:
        n = data.y.size
        self.data, self.radius, self.reg, self.bracket = data, radius, reg, bracket
        self.total = ordered.total(data.weights)
        self.w = w
        self.z, self.trial_z, self.dz = np.empty(n), np.empty(n), np.empty(n)
        self.mu = 1.0 if data.smoothed else 0.0
        self.since_refresh = 0
        # Set by _evaluate: F at w (true loss), F_μ(w), the gradient bound on min F_μ, and the
        # dual bonus (μ/2) Σ α²/c of the hinge.
        self.value = self.f = self.bound = self.bonus = 0.0

    def reset(self) -> tuple[float, np.ndarray]:
        """F_μ and its gradient at w, from freshly computed margins."""
        self.data.margins(self.w, out=self.z)
        self.sq = ordered.dot(self.w, self.w)
        self.since_refresh = 0
        return self._evaluate()

    def _evaluate(self, loss: float | None = None) -> tuple[float, np.ndarray]:
        """Evaluate at w; ``loss`` is Σ c ℓ_μ(z) if the data term was just evaluated at z."""
        data, reg = self.data, self.reg
        if loss is None:
            loss = data.evaluate(self.z, self.mu)
        f = loss + reg * self.sq
        g, bonus, exact = data.gradient()
        g += (2.0 * reg) * self.w
        self.f, self.bonus = f, bonus
        self.bound = _gradient_bound(f, g, self.w, self.radius, 2.0 * reg)  # ≤ min F_μ
        self.value = exact + reg * self.sq
        self.bracket.offer(self.value, self.w, self.bound + bonus - data.slack)
        return f, g

    def direction(self, step: float, g: np.ndarray) -> np.ndarray:
        return project_to_ball(self.w - step * g, self.radius) - self.w

    def prepare(self, direction: np.ndarray) -> None:
        self.direction_ = direction
        self.data.margins(direction, out=self.dz, point=False)
        self.wd, self.dd = ordered.dot(self.w, direction), ordered.dot(direction, direction)

    def trial(self, alpha: float) -> float:
        np.multiply(self.dz, alpha, out=self.trial_z)
        self.trial_z += self.z
        sq = self.sq + 2.0 * alpha * self.wd + alpha * alpha * self.dd
        self.trial_loss = self.data.evaluate(self.trial_z, self.mu)
        return self.trial_loss + self.reg * sq

    def accept(self, alpha: float) -> tuple[float, np.ndarray]:
        """Move to w + α d, where α is the step of the last ``trial``."""
        self.w = self.w + alpha * self.direction_
        self.z, self.trial_z = self.trial_z, self.z
        self.sq = ordered.dot(self.w, self.w)
        self.since_refresh += 1
        if self.since_refresh >= _REFRESH_EVERY:
            return self.reset()
        return self._evaluate(self.trial_loss)  # the work arrays still hold that evaluation

    def interior(self) -> bool:
        """Whether w is clearly inside the ball."""
        return self.sq < (1.0 - _INSIDE) ** 2 * self.radius**2

    def last_stage(self, target: float) -> bool:
        """Whether μ is small enough that (μ/2) C ≤ target/2 (always for the logistic loss)."""
        # a relative slack: ``advance`` sets μ = target/C, whose product with C may round up
        return not self.data.smoothed or self.mu * self.total <= target * (1.0 + 1e-9)

    def stage_done(self, target: float) -> bool:
        """Whether F_μ is solved as well as its smoothing error warrants."""
        if self.last_stage(target):
            return False
        return self.f - self.bound <= max(0.5 * target, self.value - self.f - self.bonus)

    def advance(self, target: float) -> None:
        """Next smoothing stage: never smoother than the tolerance requires."""
        self.mu = max(0.1 * self.mu, target / self.total)


class _Dual:
    """−D(α) over the box 0 ≤ α ≤ c (hinge), for SPG, with the primal point w(α)."""

    def __init__(
        self, data: _DataTerm, radius: float, reg: float, bracket: _Bracket, alpha: np.ndarray
    ) -> None:
        n = data.y.size
        self.data, self.radius, self.reg, self.bracket = data, radius, reg, bracket
        self.alpha = alpha
        self.z, self.g, self.d = np.empty(n), np.empty(n), np.empty(n)
        self.since_refresh = 0

    def _inner(self, v: np.ndarray) -> tuple[float, float]:
        """min_{‖w‖ ≤ R} −⟨v, w⟩ + reg ‖w‖², and the scale s of its minimiser w = s v."""
        norm, reg, radius = ordered.norm(v), self.reg, self.radius
        if reg > 0.0 and norm <= 2.0 * reg * radius:
            return -norm * norm / (4.0 * reg), 1.0 / (2.0 * reg)
        return -radius * norm + reg * radius * radius, (radius / norm if norm > 0 else 0.0)

    def reset(self) -> tuple[float, np.ndarray]:
        self.v = self.data.combine(self.alpha)
        self.since_refresh = 0
        return self._evaluate()

    def _evaluate(self) -> tuple[float, np.ndarray]:
        data = self.data
        inner, scale = self._inner(self.v)
        total = ordered.total(self.alpha)
        dual = total + inner
        lower = dual - data.slack
        w = scale * self.v
        data.margins(w, out=self.z)
        value = data.true_hinge(self.z) + self.reg * ordered.dot(w, w)
        self.bracket.offer(value, w, lower)
        np.subtract(self.z, 1.0, out=self.g)  # ∇(−D)(α) = y ⊙ (x @ w(α)) − 1 (Danskin)
        return -dual, self.g

    def direction(self, step: float, g: np.ndarray) -> np.ndarray:
        d = self.d
        np.multiply(g, -step, out=d)
        d += self.alpha
        np.clip(d, 0.0, self.data.weights, out=d)
        d -= self.alpha
        return d

    def prepare(self, direction: np.ndarray) -> None:
        self.u = self.data.combine(direction)
        self.base, self.rise = ordered.total(self.alpha), ordered.total(direction)

    def trial(self, alpha: float) -> float:
        return -(self.base + alpha * self.rise + self._inner(self.v + alpha * self.u)[0])

    def accept(self, alpha: float) -> tuple[float, np.ndarray]:
        np.multiply(self.d, alpha, out=self.z)
        self.alpha += self.z
        np.clip(self.alpha, 0.0, self.data.weights, out=self.alpha)  # rounding
        self.v = self.v + alpha * self.u
        self.since_refresh += 1
        if self.since_refresh >= _REFRESH_EVERY:
            return self.reset()
        return self._evaluate()


class _Spg:
    """The SPG2 iteration of Birgin, Martínez & Raydan (2000) on a problem that provides
    ``reset``, ``direction`` (projected-gradient direction for a spectral step), ``prepare``,
    ``trial`` (objective along the direction) and ``accept``."""

    def __init__(self, problem) -> None:
        self.problem = problem
        self.step: float | None = None
        self.restart()

    def restart(self) -> None:
        """Start a new non-monotone history (after the objective changed)."""
        self.f, self.g = self.problem.reset()
        self.history: deque[float] = deque([self.f], maxlen=_HISTORY)
        self.average, self.mass = self.f, 1.0  # Zhang–Hager reference

    def iterate(self) -> bool:
        """One iteration; False if no decrease is possible (stationary to working precision)."""
        problem, g = self.problem, self.g
        if self.step is None:
            size = float(np.max(np.abs(problem.direction(1.0, g)), initial=0.0))
            self.step = min(_STEP_MAX, max(_STEP_MIN, 1.0 / size)) if size > 0 else 1.0
        direction = problem.direction(self.step, g)
        slope = ordered.dot(g, direction)
        if not slope < 0.0:
            return False
        problem.prepare(direction)
        reference = min(max(self.history), self.average)
        alpha = 1.0
        while True:  # non-monotone Armijo search with safeguarded quadratic interpolation
            trial = problem.trial(alpha)
            if trial <= reference + _ARMIJO * alpha * slope:
                break
            curvature = trial - self.f - alpha * slope
            candidate = -0.5 * alpha * alpha * slope / curvature if curvature > 0 else 0.0
            alpha = candidate if _SIGMA1 <= candidate <= _SIGMA2 * alpha else 0.5 * alpha
            if alpha < _SMALLEST_STEP:
                return False
        dd = ordered.dot(direction, direction)
        self.f, self.g = problem.accept(alpha)
        # Spectral step ⟨s, s⟩/⟨s, r⟩ with s = α d and r = g_new − g (⟨d, g⟩ = slope).
        curv = ordered.dot(direction, self.g) - slope
        self.step = min(_STEP_MAX, max(_STEP_MIN, alpha * dd / curv)) if curv > 0 else _STEP_MAX
        self.history.append(self.f)
        mass = _AVERAGING * self.mass + 1.0
        self.average = (_AVERAGING * self.mass * self.average + self.f) / mass
        self.mass = mass
        return True


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
    """The best fixed w in hindsight: minimise F over the ball ‖w‖ ≤ ``radius`` (the
    comparator of the regret of Li et al., DOLA, Definition 2), with a certified bracket.

    ``x`` is a dense (N, d) float array or a scipy.sparse CSR matrix, ``y`` the labels in
    {−1, +1} (real targets for ``absolute``), ``weights`` the multiplicities c_k ≥ 0 and
    ``regularisation`` φ ≥ 0. Runs the spectral projected gradient method (Birgin et al. 2000)
    on F (logistic), on the Huber-smoothed absolute error with continuation in μ (absolute;
    slow when many residuals vanish at the optimum, e.g. ±1 targets on sparse data), or on
    Nesterov's smoothed hinge with continuation in μ interleaved with SPG on the Lagrangian
    dual (hinge;
    see the module docstring), until the certified gap ``value − lower_bound`` is at most
    ``tolerance · max(1, |value|)``, ``max_iterations`` iterations (of both solvers, over all
    stages) have run, or no solver can make progress at working precision; in the latter cases
    the bracket is still valid, only wider. ``start`` (projected onto the ball) warm-starts the
    primal solver. Rows with c_k = 0 are dropped (copying x) when they are at least a quarter
    of all rows. Every sum is order-defined (module docstring: the same result on any
    machine), and no BLAS runs.

    Raises ValueError for an unknown loss, radius ≤ 0, negative or non-finite weights,
    regularisation < 0, labels other than ±1, non-finite data, or mismatched shapes.
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
        w = project_to_ball(w, radius)

    total = ordered.total(weights)
    if total == 0.0:  # F ≡ 0
        return HindsightSolution(w=np.zeros(d), value=0.0, lower_bound=0.0, iterations=0)
    keep = weights > 0
    if np.count_nonzero(keep) < 0.75 * keep.size:  # drop the rows that do not count
        x, y, weights = x[keep], y[keep], weights[keep]
    if not sp.issparse(x):
        x = np.ascontiguousarray(x)  # rows for xᵀc; _DataTerm adds the columns for x @ w
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
    """The solvers on validated data (see :func:`hindsight_minimum`): the smoothed primal
    through its stages, then (hinge) the primal and the dual in a race."""
    data = _data_term(x, y, weights, loss, radius)
    reg = 0.5 * regularisation * ordered.total(weights)  # F = Σ c ℓ + reg ‖w‖²
    run = _SolverRun(data, radius, reg, tolerance, w, max_iterations)
    run.smooth_primal()
    if data.hinge and run.budget_left():
        run.race_dual()
    return run.result()


def _data_term(x, y: np.ndarray, weights: np.ndarray, loss: str, radius: float) -> _DataTerm:
    """The data term of F with its rounding slack: every term of the sums behind the bounds
    is at most c_k (1 + R‖x_k‖) in magnitude (plus |y_k| for residuals)."""
    data = _DataTerm(x, y, weights, loss)
    if sp.issparse(x):
        row_norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
    else:
        row_norms = ordered.row_norms(x)
    scale = 1.0 + radius * row_norms + (np.abs(y) if data.absolute else 0.0)
    data.slack = _ROUNDING * ordered.dot(weights, scale)
    return data


def _remaining(history: deque[float], stalled: bool, target: float) -> float:
    """Iterations a solver would need at its recent rate of progress to reach the gap
    ``target`` (``history``: log of its own gap after each of its recent iterations; 0 if
    unknown yet, ∞ once it stalled)."""
    if stalled:
        return math.inf
    if len(history) < 3:
        return 0.0
    rate = (history[0] - history[-1]) / (len(history) - 1)
    needed = history[-1] - math.log(target)
    return max(needed, 0.0) / rate if rate > 0 else math.inf


class _SolverRun:
    """One solve of F = Σ c ℓ + ``reg`` ‖w‖² on the ball of ``radius``: the bracket of both
    solvers, the smoothed primal solver, and the iterations spent of ``max_iterations``."""

    def __init__(
        self,
        data: _DataTerm,
        radius: float,
        reg: float,
        tolerance: float,
        w: np.ndarray,
        max_iterations: int,
    ) -> None:
        self.data, self.radius, self.reg, self.tolerance = data, radius, reg, tolerance
        self.bracket = _Bracket(tolerance)  # of both solvers
        self.primal_bracket = _Bracket(tolerance, parent=self.bracket)
        self.primal = _Primal(data, radius, reg, self.primal_bracket, w)
        self.primal_spg = _Spg(self.primal)
        self.iterations = 0
        self.max_iterations = max_iterations

    def budget_left(self) -> bool:
        """Whether the gap is not certified yet and iterations remain."""
        return not self.bracket.certified() and self.iterations < self.max_iterations

    def primal_step(self) -> bool:
        """One primal iteration, moving to the next smoothing stage when due."""
        primal, bracket = self.primal, self.bracket
        if primal.stage_done(bracket.target()):
            primal.advance(bracket.target())
            self.primal_spg.restart()
        while not self.primal_spg.iterate():
            mu = primal.mu
            if primal.last_stage(bracket.target()):
                return False
            primal.advance(bracket.target())
            if primal.mu == mu:  # no smaller μ to go to: stalled (never loop on one stage)
                return False
            self.primal_spg.restart()
        return True

    def smooth_primal(self) -> None:
        """The logistic loss and the first smoothing stage of the hinge, then the later
        smoothing stages of the absolute loss (primal only)."""
        while self.budget_left() and self.primal.mu in (0.0, 1.0):
            if self.primal.stage_done(self.bracket.target()):
                break
            if not self.primal_step():
                break
            self.iterations += 1
        while self.data.absolute and self.budget_left():
            if not self.primal_step():
                break
            self.iterations += 1

    def race_dual(self) -> None:
        """The hinge: the smoothed primal against SPG on the Lagrangian dual, the one ahead
        at its recent rate given ``_LEAD`` iterations to the other's one, until both stall or
        the budget is spent."""
        dual_bracket = _Bracket(self.tolerance, parent=self.bracket)
        multipliers = self.data.multipliers(self.primal.z, self.primal.mu)
        dual = _Dual(self.data, self.radius, self.reg, dual_bracket, multipliers)
        steps = (self.primal_step, _Spg(dual).iterate)
        own = (self.primal_bracket, dual_bracket)
        stalled = [False, False]
        # log(own gap) after each of a solver's recent iterations, for its rate of progress.
        logs = [deque([b.log_gap()], maxlen=_WINDOW + 1) for b in own]
        while self.budget_left() and not all(stalled):
            target = self.bracket.target()
            estimates = [_remaining(logs[m], stalled[m], target) for m in (0, 1)]
            lead = 0 if estimates[0] <= estimates[1] else 1
            clear = estimates[1 - lead] >= _CLEAR * estimates[lead]
            if self.reg == 0.0 and not stalled[0] and self.primal.interior():
                # The dual's points w(α) = Rv/‖v‖ lie on the sphere: no use for an interior
                # minimiser, which the smoothed primal finds.
                lead, clear = 0, True
            for method, count in ((lead, _LEAD if clear else 1), (1 - lead, 1)):
                for _ in range(count):
                    if stalled[method] or not self.budget_left():
                        break
                    if not steps[method]():
                        stalled[method] = True
                        break
                    self.iterations += 1
                    logs[method].append(own[method].log_gap())

    def result(self) -> HindsightSolution:
        """F at the best point, from freshly computed margins."""
        data, reg = self.data, self.reg
        assert self.bracket.w is not None
        w = self.bracket.w
        norm = ordered.norm(w)
        if norm > self.radius:  # rounding in the convex combinations
            w = w * (self.radius / norm)
        z = data.margins(w, out=np.empty(data.y.size))
        if data.hinge:
            value = data.true_hinge(z) + reg * ordered.dot(w, w)
        elif data.absolute:
            value = ordered.dot(data.weights, np.abs(z)) + reg * ordered.dot(w, w)
        else:
            value = data.evaluate(z, 0.0) + reg * ordered.dot(w, w)
        lower = min(self.bracket.lower, value)
        return HindsightSolution(w=w, value=value, lower_bound=lower, iterations=self.iterations)
