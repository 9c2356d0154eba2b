"""MI-private OGD's leakage calibration (Zhang & Venkitasubramaniam): the Gaussian-channel
bounds of Theorems 1 and 3 on the mutual information between a user's report and its perturbed
release, and the perturbation itself (event guarantee ``mutual-information``: not ε-DP).
"""

from __future__ import annotations

import math

import numpy as np

from netsim.privacy.events import PrivacyEvent
from netsim.privacy.mechanisms import as_vector


def gaussian_channel_capacity(dimension: int, power: float, sigma: float) -> float:
    """C = (d/2) ln(1 + P/(dσ²)) nats: the capacity of a d-dimensional Gaussian channel with
    noise N(0, σ² I) and input power E‖z‖² ≤ P, which bounds the mutual information between a
    report of that power and its perturbed release (Zhang & Venkitasubramaniam, Theorems 1
    and 3); ∞ for σ = 0 unless P = 0."""
    if dimension < 1 or power < 0 or sigma < 0:
        raise ValueError("leakage needs dimension >= 1, power >= 0, sigma >= 0")
    if sigma == 0:
        return math.inf if power > 0 else 0.0
    return 0.5 * dimension * math.log1p(power / (dimension * sigma**2))


def gaussian_channel_leakage(dimension: int, lipschitz: float, sigma: float) -> float:
    """Theorem 1 (full information): the capacity for a subgradient, P = L²."""
    if lipschitz < 0:
        raise ValueError("leakage needs dimension >= 1, L >= 0, sigma >= 0")
    return gaussian_channel_capacity(dimension, lipschitz**2, sigma)


def bandit_leakage(
    dimension: int, max_loss: float, smoothing: float, lipschitz: float, sigma: float
) -> float:
    """Theorem 3 (bandit, Alg. 2): the capacity for the estimate z = (d/δ) f e, whose power is
    at most P = d²(F/δ + L)² (F = max f, δ the smoothing radius)."""
    if smoothing <= 0:
        raise ValueError(f"the bandit smoothing radius δ must be positive, got {smoothing}")
    if max_loss < 0 or lipschitz < 0:
        raise ValueError("leakage needs dimension >= 1, F >= 0, L >= 0, sigma >= 0")
    power = (dimension * (max_loss / smoothing + lipschitz)) ** 2
    return gaussian_channel_capacity(dimension, power, sigma)


def mutual_information_report(
    report: np.ndarray,
    *,
    power_bound: float,
    sigma: float,
    rng: np.random.Generator,
    mechanism: str = "gaussian_mi",
) -> tuple[np.ndarray, PrivacyEvent]:
    """Zhang & Venkitasubramaniam's encryption layer: ``report`` + N(0, σ² I), with the bound
    C = (d/2) ln(1 + P/(d σ²)) nats on I(input; release) for a report whose squared norm is at
    most ``power_bound`` = P (Theorem 1: P = L² for a subgradient; Theorem 3: P = d²(F/δ + L)²
    for the bandit estimate). σ = 0 releases the report itself (no bound: ``non-private``)."""
    if sigma < 0:
        raise ValueError(f"sigma must be >= 0, got {sigma}")
    x = as_vector(report)
    if sigma == 0:
        return x.copy(), PrivacyEvent(
            "none", "non-private", 0.0, 0.0, math.sqrt(power_bound), "L2", 0.0, x.size,
            math.inf,
        )  # fmt: skip
    bound = gaussian_channel_capacity(x.size, power_bound, sigma)
    noisy = x + rng.standard_normal(x.size) * sigma
    return noisy, PrivacyEvent(
        mechanism, "mutual-information", 0.0, 0.0, math.sqrt(power_bound), "L2", sigma,
        x.size, bound,
    )  # fmt: skip
