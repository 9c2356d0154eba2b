"""Calibrated noise mechanisms. Each takes an explicit ``rng`` and returns (noisy value, event).

Guarantees, stated per release (Δ is the sensitivity in the named norm):

========================  ===================  ==============================================
mechanism                 guarantee            noise
========================  ===================  ==============================================
``laplace``               ε-DP (L1 Δ)          i.i.d. Laplace(0, Δ/ε) per coordinate
``l2_laplace_radius``     **not ε-DP, d > 1**  uniform direction, length ~ Laplace(0, Δ/ε)
                          (ε-DP when d = 1)    (Hegedűs et al. 2016 §2.3, as printed)
``k_norm_l2``             ε-DP (L2 Δ)          uniform direction, radius ~ Gamma(d, Δ/ε):
                                               density ∝ exp(−ε‖z‖₂/Δ) (Hardt & Talwar 2010)
``gaussian`` (classic)    (ε, δ)-DP, ε < 1     σ = Δ √(2 ln(1.25/δ)) / ε (Dwork & Roth, Thm A.1)
``gaussian`` (analytic)   (ε, δ)-DP, any ε     smallest σ with δ(σ) ≤ δ (Balle & Wang 2018)
``laplace_dola``          ε-DP (L1 Δ = S(t))   Laplace(0, S(t)/ε), S(t) = 2 α_t √n L / h
                                               (Li et al., Alg. 1 and mini-batch variant)
``gaussian_dola_printed`` per-release (ε', δ)  N(0, J² I), J² as printed in Li et al. TKDE
                          with ε' computed     Alg. 2; the event records the ε' the noise
                          from σ (see below)   really gives per release, not the claim
``dola_laplace_rows``     as ``laplace_dola``  the same, for all nodes of a round at once
``dola_gaussian_rows``    as above, or         J² as printed (ε' recorded), or σ from the
                          (ε, δ)-DP analytic   analytic Gaussian for (ε, δ) per release
========================  ===================  ==============================================

The row mechanisms draw Laplace noise as E·S, E ~ Exp(1) by a ziggurat and S = ±1 from a random
bit: the same law as ``Generator.laplace`` (exactly, not approximately) at about a fourteenth of
its cost (``netsim.privacy.laplace_kernel``: SFC64 lanes seeded from the caller's generator),
which matters when a round perturbs 10⁶ coordinates.

Why the paper's L2 variant is not ε-DP for d > 1: its output density at distance r from the
true value is ∝ exp(−εr/Δ) / r^(d−1) (a one-dimensional radius spread over a sphere of area
∝ r^(d−1)), unbounded near the true value, so the likelihood ratio between two neighbouring
inputs is unbounded. The K-norm density ∝ exp(−ε‖z‖/Δ) needs the Gamma(d, Δ/ε) radius.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import numpy as np
from scipy.special import log_ndtr, ndtr

from netsim.privacy import laplace_kernel
from netsim.privacy.events import PrivacyEvent

NoiseFn = Callable[[int, int, float, np.random.Generator], np.ndarray]


def _check(epsilon: float, sensitivity: float) -> None:
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be positive and finite, got {epsilon}")
    if not (sensitivity >= 0 and math.isfinite(sensitivity)):
        raise ValueError(f"sensitivity must be >= 0 and finite, got {sensitivity}")


def _check_delta(delta: float) -> None:
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")


def _as_vector(value: np.ndarray | float) -> np.ndarray:
    return np.atleast_1d(np.asarray(value, dtype=np.float64))


def uniform_directions(count: int, dimension: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` uniform random unit vectors in R^d (rows; normalised standard normals)."""
    z = rng.standard_normal((count, dimension))
    norms = np.linalg.norm(z, axis=1, keepdims=True)
    while (norms == 0).any():  # probability zero, but never divide by it
        bad = norms[:, 0] == 0
        z[bad] = rng.standard_normal((int(bad.sum()), dimension))
        norms = np.linalg.norm(z, axis=1, keepdims=True)
    return z / norms


# The noise generators below draw ``count`` noise vectors at once; the mechanisms draw one
# (count 1) and the privacy audit (netsim.privacy.audit) draws many with the same code.


def laplace_noise(count: int, dimension: int, scale: float, rng: np.random.Generator) -> np.ndarray:
    """i.i.d. Laplace(0, scale) coordinates."""
    return rng.laplace(0.0, scale, (count, dimension))


def add_laplace_noise(
    out: np.ndarray,
    scale: float,
    rng: np.random.Generator,
    *,
    source: np.ndarray | None = None,
) -> None:
    """Set ``out`` to ``source`` (default: ``out`` itself) plus i.i.d. Laplace(0, ``scale``)
    noise in every entry; both C-contiguous float64 arrays of one shape. Each variate is an
    Exp(1) magnitude with a fair random sign, drawn in compiled code from SFC64 lanes seeded
    from ``rng`` (:mod:`netsim.privacy.laplace_kernel`)."""
    source = out if source is None else source
    for a in (out, source):
        if not (a.dtype == np.float64 and a.flags.c_contiguous):
            raise ValueError("add_laplace_noise needs C-contiguous float64 arrays")
    if source.shape != out.shape:
        raise ValueError(f"source shape {source.shape} differs from out shape {out.shape}")
    laplace_kernel.add_laplace(out.reshape(-1), source.reshape(-1), scale, rng)


def fast_laplace_noise(
    count: int, dimension: int, scale: float, rng: np.random.Generator
) -> np.ndarray:
    """i.i.d. Laplace(0, scale) coordinates drawn as signed exponentials (same law as
    :func:`laplace_noise`, different draws)."""
    out = np.zeros((count, dimension))
    add_laplace_noise(out, scale, rng)
    return out


def l2_laplace_radius_noise(
    count: int, dimension: int, scale: float, rng: np.random.Generator
) -> np.ndarray:
    """Uniform direction times a Laplace(0, scale) length (the paper's L2 variant)."""
    lengths = rng.laplace(0.0, scale, (count, 1))
    return lengths * uniform_directions(count, dimension, rng)


def k_norm_l2_noise(
    count: int, dimension: int, scale: float, rng: np.random.Generator
) -> np.ndarray:
    """Uniform direction times a Gamma(d, scale) radius: density ∝ exp(−‖z‖₂/scale)."""
    radii = rng.gamma(dimension, scale, (count, 1))
    return radii * uniform_directions(count, dimension, rng)


def gaussian_noise(
    count: int, dimension: int, scale: float, rng: np.random.Generator
) -> np.ndarray:
    """i.i.d. N(0, scale²) coordinates."""
    return rng.normal(0.0, scale, (count, dimension))


def _add_noise(x: np.ndarray, noise: NoiseFn, scale: float, rng: np.random.Generator) -> np.ndarray:
    """``x`` plus one draw of ``noise`` at ``scale`` (a copy of ``x`` when the scale is 0)."""
    return x + noise(1, x.size, scale, rng)[0] if scale > 0 else x.copy()


def laplace(
    value: np.ndarray | float, *, sensitivity: float, epsilon: float, rng: np.random.Generator
) -> tuple[np.ndarray, PrivacyEvent]:
    """ε-DP for L1 sensitivity Δ: adds Laplace(0, Δ/ε) to every coordinate (Dwork et al. 2006)."""
    _check(epsilon, sensitivity)
    x = _as_vector(value)
    scale = sensitivity / epsilon
    noisy = _add_noise(x, laplace_noise, scale, rng)
    return noisy, PrivacyEvent(
        "laplace", "epsilon-DP", epsilon, 0.0, sensitivity, "L1", scale, x.size
    )


def l2_laplace_radius(
    value: np.ndarray | float, *, sensitivity: float, epsilon: float, rng: np.random.Generator
) -> tuple[np.ndarray, PrivacyEvent]:
    """The L2 noise of Hegedűs et al. (2016) §2.3 as printed: a uniform random direction with a
    Laplace(0, Δ/ε)-distributed length. **Not ε-DP when d > 1** (see the module docstring); the
    event says so (guarantee ``none``). For d = 1 it is the Laplace mechanism.
    """
    _check(epsilon, sensitivity)
    x = _as_vector(value)
    scale = sensitivity / epsilon
    noisy = _add_noise(x, l2_laplace_radius_noise, scale, rng)
    guarantee = "epsilon-DP" if x.size == 1 else "none"
    return noisy, PrivacyEvent(
        "l2_laplace_radius", guarantee, epsilon, 0.0, sensitivity, "L2", scale, x.size
    )


def k_norm_l2(
    value: np.ndarray | float, *, sensitivity: float, epsilon: float, rng: np.random.Generator
) -> tuple[np.ndarray, PrivacyEvent]:
    """ε-DP for L2 sensitivity Δ: noise with density ∝ exp(−ε‖z‖₂/Δ), i.e. a uniform direction
    and a Gamma(d, Δ/ε) radius (the K-norm mechanism of Hardt & Talwar 2010 for the L2 ball).
    """
    _check(epsilon, sensitivity)
    x = _as_vector(value)
    scale = sensitivity / epsilon
    noisy = _add_noise(x, k_norm_l2_noise, scale, rng)
    return noisy, PrivacyEvent(
        "k_norm_l2", "epsilon-DP", epsilon, 0.0, sensitivity, "L2", scale, x.size
    )


# --- Gaussian ------------------------------------------------------------------------------


def classic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """σ = Δ √(2 ln(1.25/δ)) / ε, (ε, δ)-DP for ε < 1 (Dwork & Roth 2014, Thm A.1)."""
    _check(epsilon, sensitivity)
    _check_delta(delta)
    if epsilon >= 1:
        raise ValueError(
            f"the classic Gaussian calibration needs epsilon < 1 (got {epsilon}); use the "
            "analytic calibration"
        )
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def gaussian_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """The exact δ(ε) of the Gaussian mechanism (Balle & Wang 2018, Thm 8):
    Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ)."""
    if sensitivity == 0:
        return 0.0
    if sigma <= 0:
        return 1.0
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    return max(float(ndtr(a - b) - math.exp(epsilon + log_ndtr(-a - b))), 0.0)


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """The smallest σ with δ(σ) ≤ δ at ε (Balle & Wang 2018, analytic Gaussian mechanism).

    δ(σ) decreases in σ, so a bisection on log σ finds it to 1e-12 relative precision.
    """
    _check(epsilon, sensitivity)
    _check_delta(delta)
    if sensitivity == 0:
        return 0.0
    low, high = sensitivity * 1e-6, sensitivity
    while gaussian_delta(high, sensitivity, epsilon) > delta:
        high *= 2.0
    while gaussian_delta(low, sensitivity, epsilon) <= delta:
        low /= 2.0
    for _ in range(200):
        mid = math.sqrt(low * high)
        if gaussian_delta(mid, sensitivity, epsilon) > delta:
            low = mid
        else:
            high = mid
        if high / low - 1 < 1e-12:
            break
    return high


def gaussian_epsilon(sigma: float, sensitivity: float, delta: float) -> float:
    """The smallest ε with δ(ε) ≤ δ for noise σ (inverse of the privacy profile)."""
    _check_delta(delta)
    if sensitivity == 0:
        return 0.0
    if gaussian_delta(sigma, sensitivity, 0.0) <= delta:
        return 0.0
    low, high = 0.0, 1.0
    while gaussian_delta(sigma, sensitivity, high) > delta:
        high *= 2.0
        if high > 1e6:
            return math.inf
    for _ in range(200):
        mid = 0.5 * (low + high)
        if gaussian_delta(sigma, sensitivity, mid) > delta:
            low = mid
        else:
            high = mid
        if high - low < 1e-12 * max(high, 1.0):
            break
    return high


def gaussian(
    value: np.ndarray | float,
    *,
    sensitivity: float,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    calibration: Literal["classic", "analytic"] = "analytic",
) -> tuple[np.ndarray, PrivacyEvent]:
    """(ε, δ)-DP for L2 sensitivity Δ: adds N(0, σ² I) with σ from ``calibration``."""
    if calibration == "classic":
        sigma = classic_gaussian_sigma(sensitivity, epsilon, delta)
    elif calibration == "analytic":
        sigma = analytic_gaussian_sigma(sensitivity, epsilon, delta)
    else:
        raise ValueError(f"calibration must be 'classic' or 'analytic', got {calibration!r}")
    x = _as_vector(value)
    noisy = _add_noise(x, gaussian_noise, sigma, rng)
    return noisy, PrivacyEvent(
        f"gaussian_{calibration}",
        "(epsilon,delta)-DP",
        epsilon,
        delta,
        sensitivity,
        "L2",
        sigma,
        x.size,
    )


# --- DOLA (Li et al.) ----------------------------------------------------------------------


def dola_sensitivity(alpha: float, dimension: int, lipschitz: float, batch: int = 1) -> float:
    """S(t) = 2 α_t √n L / h: the L1 sensitivity of a DOLA update (Li et al., Lemma 1; the
    mini-batch variant averages h gradients). ‖·‖₁ ≤ √n ‖·‖₂ turns the L2 bound 2α_t L on the
    difference of two gradient steps into this L1 bound."""
    if alpha <= 0 or dimension < 1 or lipschitz < 0 or batch < 1:
        raise ValueError("DOLA sensitivity needs alpha > 0, dimension >= 1, L >= 0, batch >= 1")
    return 2.0 * alpha * math.sqrt(dimension) * lipschitz / batch


def dola_laplace(
    value: np.ndarray,
    *,
    alpha: float,
    lipschitz: float,
    epsilon: float,
    rng: np.random.Generator,
    batch: int = 1,
) -> tuple[np.ndarray, PrivacyEvent]:
    """Li et al. Alg. 1 output perturbation: Laplace(0, μ) per coordinate, μ = S(t)/ε (ε-DP)."""
    x = _as_vector(value)
    sensitivity = dola_sensitivity(alpha, x.size, lipschitz, batch)
    noisy, event = laplace(x, sensitivity=sensitivity, epsilon=epsilon, rng=rng)
    return noisy, PrivacyEvent(
        "laplace_dola", event.guarantee, epsilon, 0.0, sensitivity, "L1", event.noise_scale, x.size
    )


def dola_gaussian_variance(
    alpha: float, dimension: int, lipschitz: float, rounds: int, epsilon: float, delta: float
) -> float:
    """J² = 4 α_t² n L² T log(T/δ) log(1/δ) / ε², as printed in Li et al. (TKDE 2018, Alg. 2)."""
    _check(epsilon, lipschitz)
    _check_delta(delta)
    if rounds < 1 or alpha <= 0:
        raise ValueError("J² needs rounds >= 1 and alpha > 0")
    return (
        4.0
        * alpha**2
        * dimension
        * lipschitz**2
        * rounds
        * math.log(rounds / delta)
        * math.log(1.0 / delta)
        / epsilon**2
    )


def dola_gaussian(
    gradient: np.ndarray,
    *,
    alpha: float,
    lipschitz: float,
    rounds: int,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, PrivacyEvent]:
    """Li et al. Alg. 2 gradient perturbation with J² as printed: g + N(0, J² I).

    The noise is added to a gradient whose L2 sensitivity is 2L; the event records the ε this
    σ = J really gives per release at δ (exact Gaussian privacy profile), which can be far above
    the ε the formula was asked for, because J² carries the factor α_t² although the noise is
    added before the step size multiplies the gradient.
    """
    g = _as_vector(gradient)
    sigma, event = dola_gaussian_sigma(
        alpha=alpha, dimension=g.size, lipschitz=lipschitz, rounds=rounds, epsilon=epsilon,
        delta=delta,
    )  # fmt: skip
    return _add_noise(g, gaussian_noise, sigma, rng), event


def dola_laplace_rows(
    values: np.ndarray,
    *,
    alpha: float,
    lipschitz: float,
    epsilon: float,
    rng: np.random.Generator,
    batch: int = 1,
    out: np.ndarray | None = None,
) -> PrivacyEvent:
    """Li et al. Alg. 1 / Alg. 3 / mini-batch output perturbation for all nodes of a round:
    writes ``values`` plus Laplace(0, μ) in every entry to ``out`` (default: ``values``, in
    place), rows = releases (one per node), μ = S(t)/ε, S(t) = 2 α_t √n L / h (arXiv Lemma 1
    and Lemma 7). Returns each row's event (ε-DP for one example of the batch behind it)."""
    if values.ndim != 2:
        raise ValueError("dola_laplace_rows perturbs a (releases, dimension) array")
    dimension = values.shape[1]
    sensitivity = dola_sensitivity(alpha, dimension, lipschitz, batch)
    _check(epsilon, sensitivity)
    scale = sensitivity / epsilon
    add_laplace_noise(values if out is None else out, scale, rng, source=values)
    return PrivacyEvent(
        "laplace_dola", "epsilon-DP", epsilon, 0.0, sensitivity, "L1", scale, dimension
    )


def dola_gaussian_sigma(
    *,
    alpha: float,
    dimension: int,
    lipschitz: float,
    rounds: int,
    epsilon: float,
    delta: float,
    batch: int = 1,
    calibration: Literal["printed", "analytic"] = "printed",
) -> tuple[float, PrivacyEvent]:
    """σ of Li et al. (TKDE) Alg. 2's gradient noise and the event of one release.

    The perturbed quantity is the (mini-batch mean) gradient, whose L2 sensitivity to one
    example is 2L/h. ``printed``: σ = J/h with J² = 4 α_t² n L² T log(T/δ) log(1/δ)/ε² as
    printed; the event records the ε' that σ really gives per release at δ (exact Gaussian
    privacy profile; guarantee ``none`` if no finite ε' exists). ``analytic``: the smallest σ
    that makes each release (ε, δ)-DP (Balle & Wang 2018); each example is used in one release,
    so by parallel composition the run is (ε, δ)-DP per example.
    """
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    sensitivity = 2.0 * lipschitz / batch
    guarantee: Literal["(epsilon,delta)-DP", "none"] = "(epsilon,delta)-DP"
    if calibration == "printed":
        j2 = dola_gaussian_variance(alpha, dimension, lipschitz, rounds, epsilon, delta)
        sigma = math.sqrt(j2) / batch
        actual = gaussian_epsilon(sigma, sensitivity, delta)
        if math.isfinite(actual):
            epsilon = actual
        else:
            guarantee = "none"
    elif calibration == "analytic":
        sigma = analytic_gaussian_sigma(sensitivity, epsilon, delta)
    else:
        raise ValueError(f"calibration must be 'printed' or 'analytic', got {calibration!r}")
    event = PrivacyEvent(
        f"gaussian_dola_{calibration}", guarantee, epsilon, delta, sensitivity, "L2", sigma,
        dimension,
    )  # fmt: skip
    return sigma, event


def dola_gaussian_rows(
    gradients: np.ndarray,
    *,
    alpha: float,
    lipschitz: float,
    rounds: int,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    batch: int = 1,
    calibration: Literal["printed", "analytic"] = "printed",
) -> PrivacyEvent:
    """Li et al. (TKDE) Alg. 2 for all nodes of a round: adds N(0, σ² I) to every row of
    ``gradients`` **in place**, σ from :func:`dola_gaussian_sigma`; returns each row's event."""
    if gradients.ndim != 2:
        raise ValueError("dola_gaussian_rows perturbs a (releases, dimension) array")
    sigma, event = dola_gaussian_sigma(
        alpha=alpha,
        dimension=gradients.shape[1],
        lipschitz=lipschitz,
        rounds=rounds,
        epsilon=epsilon,
        delta=delta,
        batch=batch,
        calibration=calibration,
    )
    gradients += rng.standard_normal(gradients.shape) * sigma
    return event


# --- mutual information (Zhang & Venkitasubramaniam) ---------------------------------------


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
    x = _as_vector(report)
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


def no_noise(value: np.ndarray | float) -> tuple[np.ndarray, PrivacyEvent]:
    """The non-private baseline: the value unchanged, recorded as such."""
    x = _as_vector(value)
    return x.copy(), PrivacyEvent("none", "non-private", 0.0, 0.0, 0.0, "L2", 0.0, x.size)
