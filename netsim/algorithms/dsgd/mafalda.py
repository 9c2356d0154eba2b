"""MAFALDA-SGD's temporal noise correlation (Bellet, Cyffers, Frey, Gaudel, Lerévérend, Taïani,
ICLR 2026, arXiv 2510.17480; code ``dimiarbre/MFDL``): the lower-triangular matrix M with which
every node correlates its own noise over its steps, chosen to minimise the noise left in the
nodes' models after averaging at a fixed sensitivity.

**The objective.** Node i's k-th step adds η_k·(M z)_k, z i.i.d. per step. After round τ (step,
then average, ``docs/explanation/linear-accountant.md``) the models carry
Σ_{s ≤ τ} Φ(τ, s) e_i η_s (M z)_s with Φ(τ, s) = W^{g(τ−s+1)} times the regularisation's decay
of rounds s+1 … τ (W the planned graph's Metropolis–Hastings weights, g gossip passes a round):
MFDL's post-averaging workload ``build_DL_workload(..., initial_power=1)``. Its squared
Frobenius norm summed over the nodes and rounds is tr(G·X⁻¹), X = CᵀC, C = M⁻¹, with the
workload's Gram

    G[s, t] = η_s η_t Σ_{τ ≥ max(s, t)} c(τ, s) c(τ, t) Σ_λ λ^{g(2τ − s − t + 2)}

over W's eigenvalues λ (W is symmetric, so ⟨W^a, W^b⟩_F = tr W^{a+b}); MFDL builds the
nT × nT workload and sums its n Grams (``build_local_DL_gram_workload``), which is this.

**The constraints** (MFDL's ``MatrixFactorizer``, after Choquette-Choo et al.'s multi-epoch
factorisation): a record of batch group β is used at the steps k ≡ β (mod r/b), its
participation class. X_kl = 0 for two different steps of one class and X's diagonal sums to 1
over each class, so every record's sensitivity of C·G, the square root of the
largest sum of absolute entries of X over a class's steps, is exactly 1.
``unit: node`` makes every step one class: X is diagonal, and the optimum adds no temporal
correlation. The problem is convex (tr(G X⁻¹) on the positive definite cone, an affine set);
netsim solves it by L-BFGS projected on the affine set with a backtracking line search that
keeps X positive definite, to a projected gradient of 10⁻⁸ of the objective.

**Where netsim differs from MFDL's code.** MFDL hands its optimiser the surrogate workload
L = chol(P G P) (P reverses time) and minimises tr(X⁻¹ LᵀL). The factor whose Gram is G is
U = P Lᵀ P (UᵀU = G); LᵀL = P U Uᵀ P is G for the centralised prefix-sum workload, on which
MFDL's code checks it, but not for the decentralised one (on the Florentine families at T = 8
they differ by 3.1 where G's largest entry is 24.3), so MFDL's optimiser minimises another
objective. netsim minimises
tr(G X⁻¹) itself, MFDL's stated objective; ``analysis/mafalda.py`` measures the gap.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from netsim.algorithms.dsgd.config import MAFALDA_MAX_ROUNDS
from netsim.lazy import lazy_module
from netsim.privacy.pairwise import metropolis_from_edges

if TYPE_CHECKING:
    import scipy.linalg as la
else:
    la = lazy_module("scipy.linalg")

#: The projected gradient's largest entry, relative to the objective, at which the optimum is
#: reached.
GRADIENT_TOLERANCE = 1e-8
#: L-BFGS iterations before giving up (the problem is convex: it converges long before).
MAX_ITERATIONS = 20_000
#: L-BFGS memory.
MEMORY = 12


@dataclass(frozen=True)
class StepPlan:
    """What the workload depends on besides the graph: per round t = 1 … T its step size η_t
    and the regularisation's decay 1 − η_t λ of the models, the gossip passes a round, and
    the participation interval r/b (a record's batch group comes back every that many
    steps; 1 for ``unit: node``, whose every record may change at every step)."""

    rates: tuple[float, ...]
    decays: tuple[float, ...]
    gossip_rounds: int
    interval: int


def workload_gram(eigenvalues: np.ndarray, plan: StepPlan) -> np.ndarray:
    """G (T × T, module docstring) of the post-averaging workload, from the eigenvalues of W."""
    rounds = len(plan.rates)
    rates = np.asarray(plan.rates, dtype=np.float64)
    decays = np.asarray(plan.decays, dtype=np.float64)
    lam = np.asarray(eigenvalues, dtype=np.float64) ** plan.gossip_rounds
    # S[k] = Σ_λ λ^k for k = 0 … 2T
    powers = np.cumprod(np.vstack([np.ones_like(lam), np.tile(lam, (2 * rounds, 1))]), axis=0)
    power_sums = powers.sum(axis=1)
    steps = np.arange(rounds)
    gram = np.zeros((rounds, rounds))
    # c(τ, s) = Π_{r=s+1}^{τ} decay_r: running products, one τ at a time
    carried = np.zeros(rounds)
    for tau in range(rounds):
        carried[:tau] *= decays[tau]
        carried[tau] = 1.0
        past = steps[: tau + 1]
        exponent = 2 * tau - past[:, None] - past[None, :] + 2
        weight = carried[past] * rates[past]
        gram[: tau + 1, : tau + 1] += np.outer(weight, weight) * power_sums[exponent]
    return gram


def participation_classes(rounds: int, interval: int) -> np.ndarray:
    """Each step's participation class: k mod ``interval``."""
    return np.arange(rounds) % interval


def _project(direction: np.ndarray, classes: np.ndarray, same: np.ndarray) -> np.ndarray:
    """``direction`` (symmetric) projected on the constraints' tangent space: zero between two
    steps of one class, and a diagonal that sums to zero over each class."""
    out = np.where(same, 0.0, direction)
    diagonal = np.diag(direction)
    sums = np.bincount(classes, diagonal)
    sizes = np.bincount(classes)
    out[np.diag_indices_from(out)] = diagonal - (sums / sizes)[classes]
    return out


def _onto_constraints(x: np.ndarray, classes: np.ndarray, same: np.ndarray) -> np.ndarray:
    """``x`` projected on the affine set itself (zero between two steps of one class, each
    class's diagonal summing to 1), so rounding in the steps never accumulates into the
    sensitivity."""
    out = np.where(same, 0.0, x)
    diagonal = np.diag(out)
    sums = np.bincount(classes, diagonal)
    sizes = np.bincount(classes)
    out[np.diag_indices_from(out)] = diagonal + ((1.0 - sums) / sizes)[classes]
    return out


def _objective(x: np.ndarray, gram: np.ndarray) -> tuple[float, np.ndarray] | None:
    """(tr(G X⁻¹), −X⁻¹ G X⁻¹), or None if X is not positive definite."""
    try:
        factor = la.cho_factor(x, lower=True, check_finite=False)
    except la.LinAlgError:
        return None
    solved = la.cho_solve(factor, gram, check_finite=False)  # X⁻¹ G
    value = float(np.trace(solved))
    gradient = -la.cho_solve(factor, solved.T, check_finite=False)  # −X⁻¹ G X⁻¹ (symmetric)
    gradient = (gradient + gradient.T) / 2.0
    return value, gradient


def optimal_gram(gram: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """X* = argmin tr(G X⁻¹) over positive definite X with X_kl = 0 for k ≠ l of one class
    and each class's diagonal summing to 1 (module docstring), by L-BFGS on the affine set.
    Starts from the scaled identity (one over the size of the step's class on the diagonal)."""
    rounds = gram.shape[0]
    classes = np.asarray(classes, dtype=np.int64)
    same = (classes[:, None] == classes[None, :]) & ~np.eye(rounds, dtype=bool)
    sizes = np.bincount(classes)
    x = np.diag(1.0 / sizes[classes])
    evaluated = _objective(x, gram)
    if evaluated is None:
        raise ValueError("the scaled identity is not positive definite")
    value, gradient = evaluated
    gradient = _project(gradient, classes, same)
    history: History = []
    for _ in range(MAX_ITERATIONS):
        if np.abs(gradient).max() <= GRADIENT_TOLERANCE * max(value, 1e-300):
            return x
        direction = -_two_loop(gradient, history)
        slope = float(np.sum(direction * gradient))
        if slope >= 0:  # not a descent direction: restart from the gradient
            history.clear()
            direction, slope = -gradient, -float(np.sum(gradient * gradient))
        step, accepted = 1.0, None
        for _ in range(60):
            candidate = _onto_constraints(x + step * direction, classes, same)
            trial = _objective(candidate, gram)
            if trial is not None and trial[0] <= value + 1e-4 * step * slope:
                accepted = (candidate, trial)
                break
            step *= 0.5
        if accepted is None:
            if not history:
                return x  # no progress possible at machine precision
            history.clear()
            continue
        candidate, (new_value, new_gradient) = accepted
        new_gradient = _project(new_gradient, classes, same)
        moved, changed = candidate - x, new_gradient - gradient
        curvature = float(np.sum(moved * changed))
        # a pair whose curvature is lost in rounding would make the inverse Hessian blow up
        if curvature > 1e-10 * math.sqrt(float(np.sum(moved**2)) * float(np.sum(changed**2))):
            history.append((moved, changed, 1.0 / curvature))
            if len(history) > MEMORY:
                history.pop(0)
        x, value, gradient = candidate, new_value, new_gradient
    raise RuntimeError(f"MAFALDA's optimisation did not converge in {MAX_ITERATIONS} iterations")


History = list[tuple[np.ndarray, np.ndarray, float]]


def _two_loop(gradient: np.ndarray, history: History) -> np.ndarray:
    """L-BFGS's two-loop recursion (Nocedal & Wright, Algorithm 7.4): H·gradient."""
    q = gradient.copy()
    alphas = []
    for moved, changed, rho in reversed(history):
        alpha = rho * float(np.sum(moved * q))
        alphas.append(alpha)
        q -= alpha * changed
    if history:
        moved, changed, _ = history[-1]
        q *= float(np.sum(moved * changed)) / float(np.sum(changed * changed))
    for (moved, changed, rho), alpha in zip(history, reversed(alphas), strict=True):
        beta = rho * float(np.sum(changed * q))
        q += (alpha - beta) * moved
    return q


def encoder(x: np.ndarray) -> np.ndarray:
    """C lower triangular with CᵀC = X (the Cholesky factor of X with time reversed, as
    MFDL's ``get_factorization``)."""
    flipped = x[::-1, ::-1]
    lower = np.linalg.cholesky(flipped)
    return np.ascontiguousarray(lower.T[::-1, ::-1])


def noise_matrix(x: np.ndarray) -> np.ndarray:
    """M = C⁻¹: node's k-th step adds Σ_m M[k, m] z_m (lower triangular, like C)."""
    c = encoder(x)
    return la.solve_triangular(c, np.eye(c.shape[0]), lower=True, check_finite=False)


def mafalda_matrix(n: int, link_a: np.ndarray, link_b: np.ndarray, plan: StepPlan) -> np.ndarray:
    """MAFALDA-SGD's M for the planned graph (the links {link_a[k], link_b[k]} with
    Metropolis–Hastings weights) and ``plan`` (module docstring)."""
    rounds = len(plan.rates)
    if rounds > MAFALDA_MAX_ROUNDS:
        raise ValueError(
            f"dsgd.noise.matrix mafalda optimises a {rounds} × {rounds} correlation: at most "
            f"{MAFALDA_MAX_ROUNDS} rounds (use anti_pgd or an explicit matrix for longer runs)"
        )
    return _cached_matrix(
        n, np.asarray(link_a, dtype=np.int64).tobytes(),
        np.asarray(link_b, dtype=np.int64).tobytes(), plan,
    )  # fmt: skip


@functools.lru_cache(maxsize=8)
def _cached_matrix(n: int, link_a: bytes, link_b: bytes, plan: StepPlan) -> np.ndarray:
    """:func:`mafalda_matrix`, computed once per graph and plan (calibration builds the
    policy twice)."""
    weights = metropolis_from_edges(
        n, np.frombuffer(link_a, dtype=np.int64), np.frombuffer(link_b, dtype=np.int64)
    )
    eigenvalues = np.linalg.eigvalsh(weights.toarray())  # W is exactly symmetric
    gram = workload_gram(eigenvalues, plan)
    x = optimal_gram(gram, participation_classes(len(plan.rates), plan.interval))
    matrix = noise_matrix(x)
    matrix.setflags(write=False)
    return matrix


def sensitivity(x: np.ndarray, classes: np.ndarray) -> float:
    """MFDL's sensitivity of C·G under cyclic participation: the square root of the largest
    sum of absolute entries of X over one class's steps
    (exact when X has no negative entry within a class)."""
    classes = np.asarray(classes)
    worst = max(
        float(np.abs(x[np.ix_(classes == k, classes == k)]).sum()) for k in np.unique(classes)
    )
    return math.sqrt(worst)
