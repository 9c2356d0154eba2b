"""Mutual-information-private online gradient descent (Zhang & Venkitasubramaniam, ICASSP 2018).

A learner runs lazy-projection online gradient descent (their Alg. 1, lines 5–8):

    θ_{t+1} = θ_t − z̃_t   (θ_1 = 0),     w_{t+1} = Proj_S(η θ_{t+1}),   S = {‖w‖₂ ≤ B},

on reports z̃_t that users compute **on their own side** (the encryption layer):

- full information (Alg. 1): z̃_t = z_t + v_t with z_t ∈ ∂f_t(w_t), v_t ~ N(0, σ² I); the
  leakage I(f_t; z̃_t) is below C = (d/2) ln(1 + L²/(dσ²)) nats (Theorem 1);
- bandit (Alg. 2, after Flaxman et al. 2005): the user evaluates its loss once, at the point
  w_t + δ e_t with e_t uniform on the unit sphere, and reports z̃_t = (d/δ) f_t(w_t + δ e_t) e_t
  + v_t, an unbiased gradient estimate of the smoothed loss f̂(w) = E f(w + δ e) plus noise;
  C = (d/2) ln(1 + d (F/δ + L)²/σ²) with F = max f (Theorem 3).

Regret bounds: B √((L² + dσ²) T) with η = B/√((L² + dσ²) T) (Theorem 2); O(T^{3/4}) with
η ∝ T^{−3/4}, δ ∝ T^{−1/4} in the bandit setting (Theorem 4, whose printed bound has F/η where
F/δ is meant). Losses: absolute error ``|⟨w, x⟩ − y|`` (the paper's experiment), hinge and
logistic (labels ±1), all L-Lipschitz in w with L = max ‖x‖.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netsim.algorithms.mi_ogd import calibration
from netsim.algorithms.mi_ogd.config import Loss, MiOgdConfig
from netsim.errors import MiOgdConfigError
from netsim.learning import ordered
from netsim.learning.hindsight import project_to_ball
from netsim.learning.losses import loss_value
from netsim.learning.losses import per_example_gradient as subgradient
from netsim.learning.online_data import unit_ball_points
from netsim.privacy import mechanisms
from netsim.privacy.events import PrivacyEvent

project = project_to_ball  # S = {‖w‖ ≤ B}


def unit_sphere(dimension: int, rng: np.random.Generator) -> np.ndarray:
    """e uniform on the unit sphere of R^d (a normalised Gaussian)."""
    return mechanisms.uniform_directions(1, dimension, rng)[0]


@dataclass(frozen=True)
class MiOgdProblem:
    """One MI-private OGD run: the section's config and what the data and the run length fix —
    the dimension d, the horizon T, the Lipschitz constant L and the largest loss F."""

    config: MiOgdConfig
    dimension: int
    rounds: int
    lipschitz: float = 1.0
    max_loss: float = 2.0

    def __post_init__(self) -> None:
        if self.dimension < 1 or self.rounds < 1:
            raise MiOgdConfigError("dimension and rounds must be at least 1")

    @property
    def step(self) -> float:
        """η: as configured, or the theorems' choice for the horizon T."""
        if self.config.eta is not None:
            return self.config.eta
        d, lip, t = self.dimension, self.lipschitz, self.rounds
        if self.config.setting == "full":  # Theorem 2
            return self.config.radius / math.sqrt((lip**2 + d * self.config.sigma**2) * t)
        # Theorem 4: η ∝ T^(−3/4), scaled so that B²/(2η) and (η/2)·T·d²(F/δ)² balance
        return self.config.radius / (d * (self.max_loss + lip)) * t ** (-0.75)

    @property
    def delta(self) -> float:
        """δ of the bandit estimate: as configured, or T^(−1/4) · B (Theorem 4)."""
        if self.config.smoothing is not None:
            return self.config.smoothing
        return self.config.radius * self.rounds ** (-0.25)

    def power_bound(self) -> float:
        """P ≥ E‖z_t‖²: L² (full information) or d²(F/δ + L)² (bandit, eq. 7)."""
        if self.config.setting == "full":
            return self.lipschitz**2
        return (self.dimension * (self.max_loss / self.delta + self.lipschitz)) ** 2

    def report_sensitivity(self, norm: str) -> float:
        """The sensitivity of a report z (‖z‖₂ ≤ √P) to its example, for a mechanism
        (``mi_ogd.mechanism``): 2√P in L2, √d times that in L1 (‖·‖₁ ≤ √d ‖·‖₂)."""
        l2 = 2.0 * math.sqrt(self.power_bound())
        return l2 * math.sqrt(self.dimension) if norm == "L1" else l2

    def leakage(self) -> float:
        """C in nats: Theorem 1 or Theorem 3, the channel capacity at the report's power
        bound (∞ for σ = 0; NaN when a mechanism perturbs the reports)."""
        if self.config.mechanism is not None:
            return math.nan
        return calibration.gaussian_channel_capacity(
            self.dimension, self.power_bound(), self.config.sigma
        )

    def regret_bound(self) -> float:
        """Theorem 2's B²/(2η) + (η/2) T (L² + dσ²) (full information; = B√((L²+dσ²)T) at
        the default η), or Theorem 4's B²/(2η) + (η/2) T (d²(F/δ + L)² + dσ²) + 3 T L δ: both
        B²/(2η) + (η/2) T (P + dσ²), plus the smoothing bias in the bandit setting. NaN when
        a mechanism perturbs the reports (the theorems assume the Gaussian channel)."""
        if self.config.mechanism is not None:
            return math.nan
        eta, t, d = self.step, self.rounds, self.dimension
        radius, sigma = self.config.radius, self.config.sigma
        bound = radius**2 / (2 * eta) + eta / 2 * t * (self.power_bound() + d * sigma**2)
        if self.config.setting == "bandit":
            bound += 3 * t * self.lipschitz * self.delta
        return bound


@dataclass(frozen=True)
class Report:
    """What a user sends back: the perturbed report, the point its loss was taken at, the
    loss, and the privacy event of the release."""

    vector: np.ndarray
    played: np.ndarray
    loss: float
    event: PrivacyEvent


def user_gradient(
    problem: MiOgdProblem, w: np.ndarray, x: np.ndarray, y: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, float]:
    """The user's report before noise, the point it played and its loss (Alg. 1 lines 1–3,
    Alg. 2 lines 1–6)."""
    if problem.config.setting == "full":
        played = w
        loss = loss_value(problem.config.loss, w, x, y)
        z = subgradient(problem.config.loss, w, x, y)
    else:
        e = unit_sphere(problem.dimension, rng)
        played = w + problem.delta * e
        loss = loss_value(problem.config.loss, played, x, y)
        z = (problem.dimension / problem.delta) * loss * e
    return z, played, loss


def user_report(
    problem: MiOgdProblem, w: np.ndarray, x: np.ndarray, y: float, rng: np.random.Generator
) -> Report:
    """The encryption layer at the user (Alg. 1 lines 1–4, Alg. 2 lines 1–7)."""
    z, played, loss = user_gradient(problem, w, x, y, rng)
    mechanism = "gaussian_mi" if problem.config.setting == "full" else "gaussian_mi_bandit"
    noisy, event = calibration.mutual_information_report(
        z,
        power_bound=problem.power_bound(),
        sigma=problem.config.sigma,
        rng=rng,
        mechanism=mechanism,
    )
    return Report(noisy, played, loss, event)


class LazyProjectionOGD:
    """The learner: θ ← θ − z̃, w = Proj_S(η θ) (Alg. 1 lines 5–8)."""

    def __init__(self, problem: MiOgdProblem) -> None:
        self.problem = problem
        self.theta = np.zeros(problem.dimension)
        self.w = np.zeros(problem.dimension)
        self.updates = 0

    def apply(self, report: np.ndarray) -> None:
        """One update with a user's report."""
        self.theta -= report
        self.w = project(self.problem.step * self.theta, self.problem.config.radius)
        self.updates += 1


@dataclass(frozen=True, eq=False)
class Stream:
    """The users' examples: ``x`` (N, d) dense with ‖x‖ ≤ 1, ``y`` real (regression) or ±1."""

    x: np.ndarray
    y: np.ndarray
    source: str

    @property
    def dimension(self) -> int:
        return int(self.x.shape[1])

    @property
    def lipschitz(self) -> float:
        """L = max ‖x‖: every loss here is L-Lipschitz in w."""
        return float(ordered.row_norms(self.x).max())


def synthetic_regression(
    *, examples: int, dimension: int, noise: float, scale: float, seed: int
) -> Stream:
    """Points uniform in the unit ball of R^d (as DOLA's synthetic data), y = ⟨w*, x⟩ +
    N(0, noise²) for a w* of norm ``scale`` in a uniform direction. The paper gives no data for
    its linear-regression experiment; this is ours."""
    rng = np.random.default_rng(seed)
    w_star = scale * unit_sphere(dimension, rng)
    points = unit_ball_points(examples, dimension, rng)
    y = ordered.matvec_new(points, w_star) + noise * rng.standard_normal(points.shape[0])
    source = (
        f"{points.shape[0]:,} points uniform in the unit ball of R^{dimension}, y = <w*, x> + "
        f"N(0, {noise:g}²), ‖w*‖ = {scale:g} (seed {seed})"
    )
    return Stream(points, y, source)


def max_loss(loss: Loss, reach: float, lipschitz: float, y_max: float) -> float:
    """F = max f over ‖w‖ ≤ reach (the ball plus the bandit's δ) for ‖x‖ ≤ L, ``|y|`` ≤ y_max."""
    if loss == "absolute":
        return reach * lipschitz + y_max
    if loss == "hinge":
        return 1.0 + reach * lipschitz
    return float(np.logaddexp(0.0, reach * lipschitz))
