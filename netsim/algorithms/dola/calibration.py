"""DOLA's privacy calibration (Li et al., arXiv 2017 and TKDE 2018): the sensitivity S(t) of
an update and the noise of each algorithm's releases, through :mod:`netsim.privacy.mechanisms`.

====================================  ====================  ========================================
mechanism                             guarantee             noise
====================================  ====================  ========================================
``laplace_dola``                      ε-DP (L1 Δ = S(t))    Laplace(0, S(t)/ε), S(t) = 2 α_t √n L /
                                                            h (Li et al., Alg. 1 and mini-batch
                                                            variant)
``gaussian_dola_printed``             per-release (ε', δ)   N(0, J² I), J² as printed in Li et al.
                                      with ε' computed      TKDE Alg. 2; the event records the ε'
                                      from σ (see below)    the noise really gives per release, not
                                                            the claim
``dola_laplace_rows``                 as ``laplace_dola``   the same, for all nodes of a round at
                                                            once
``dola_gaussian_rows``                as above, or          J² as printed (ε' recorded), or σ from
                                      (ε, δ)-DP analytic    the analytic Gaussian for (ε, δ) per
                                                            release
``dola_gaussian_rows_at_multiplier``  (ε, δ) per example,   σ_t = z·Δ_t, z calibrated so that an
                                      composed by RDP or    example's k releases compose to exactly
                                      PLD (``accounting``)  (ε, δ) (``calibrated_noise_multiplier``)
====================================  ====================  ========================================

The row functions perturb all nodes of a round at once (rows = releases, one per node).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from netsim.privacy.events import PrivacyEvent
from netsim.privacy.mechanisms import (
    add_laplace_noise,
    add_noise,
    analytic_gaussian_sigma,
    as_vector,
    check_budget,
    check_delta,
    gaussian_dp_event,
    gaussian_epsilon,
    gaussian_noise,
    laplace,
    laplace_dp_event,
    single_release_epsilon,
)


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
    x = as_vector(value)
    sensitivity = dola_sensitivity(alpha, x.size, lipschitz, batch)
    noisy, event = laplace(x, sensitivity=sensitivity, epsilon=epsilon, rng=rng)
    return noisy, PrivacyEvent(
        "laplace_dola", event.guarantee, epsilon, 0.0, sensitivity, "L1", event.noise_scale,
        x.size, accounting=event.accounting,
    )  # fmt: skip


def dola_gaussian_variance(
    alpha: float, dimension: int, lipschitz: float, rounds: int, epsilon: float, delta: float
) -> float:
    """J² = 4 α_t² n L² T log(T/δ) log(1/δ) / ε², as printed in Li et al. (TKDE 2018, Alg. 2)."""
    check_budget(epsilon, lipschitz)
    check_delta(delta)
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
    g = as_vector(gradient)
    sigma, event = dola_gaussian_sigma(
        alpha=alpha, dimension=g.size, lipschitz=lipschitz, rounds=rounds, epsilon=epsilon,
        delta=delta,
    )  # fmt: skip
    return add_noise(g, gaussian_noise, sigma, rng), event


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
    check_budget(epsilon, sensitivity)
    scale = sensitivity / epsilon
    add_laplace_noise(values if out is None else out, scale, rng, source=values)
    return PrivacyEvent(
        "laplace_dola", "epsilon-DP", epsilon, 0.0, sensitivity, "L1", scale, dimension,
        accounting=laplace_dp_event(scale, sensitivity),
    )  # fmt: skip


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
        dimension, accounting=gaussian_dp_event(sigma, sensitivity),
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


def scale_at_multiplier(noise_multiplier: float, sensitivity: float) -> tuple[float, float]:
    """(σ, Δ') with Δ' ≥ Δ = ``sensitivity`` (by at most a few ulps) and σ/Δ' equal to z =
    ``noise_multiplier`` to the last bit, so that σ ≥ z·Δ up to rounding (a sensitivity is
    an upper bound: a larger one stays one).

    DOLA's output perturbation has a new Δ_t every round, and for some Δ no float σ has
    σ/Δ = z exactly. Releases whose declared σ/Δ differ in the last bit are composed by PLD
    as distinct multipliers, each with its own pessimistic discretisation, which states an
    example's ε some 1e-8 above the budget its z was calibrated to (in the accountant and in
    a rebuild from the ledger); with one multiplier it is composed as calibrated."""
    bound = sensitivity
    if sensitivity <= 0:
        return noise_multiplier * sensitivity, sensitivity
    for _ in range(16):
        sigma = noise_multiplier * bound
        for candidate in (sigma, float(np.nextafter(sigma, math.inf))):
            if candidate / bound == noise_multiplier:
                return candidate, bound
        bound = float(np.nextafter(bound, math.inf))
    raise ArithmeticError(f"no σ with σ/Δ = {noise_multiplier!r} near Δ = {sensitivity!r}")


def dola_gaussian_rows_at_multiplier(
    values: np.ndarray,
    *,
    sensitivity: float,
    noise_multiplier: float,
    delta: float,
    accounting: str,
    rng: np.random.Generator,
) -> PrivacyEvent:
    """Adds N(0, σ² I), σ = ``noise_multiplier``·``sensitivity`` (to the last bit:
    :func:`scale_at_multiplier`, whose Δ' the event records), to every row of ``values``
    **in place** (rows = releases, one per node: Li et al. TKDE Alg. 2's gradient noise, or
    a Gaussian output perturbation of Alg. 1/3) and returns each row's event: it declares
    ``GaussianDpEvent(z)`` for the accountant's RDP/PLD composition and states the ε this
    release alone gives at the budget δ (exact privacy profile, Balle & Wang 2018, Thm 8)."""
    if values.ndim != 2:
        raise ValueError("dola_gaussian_rows_at_multiplier perturbs a (releases, dimension) array")
    if not (noise_multiplier > 0 and math.isfinite(noise_multiplier)):
        raise ValueError(f"noise_multiplier must be positive and finite, got {noise_multiplier}")
    check_delta(delta)
    sigma, sensitivity = scale_at_multiplier(noise_multiplier, sensitivity)
    spent = single_release_epsilon(noise_multiplier, delta) if sensitivity > 0 else 0.0
    values += rng.standard_normal(values.shape) * sigma
    return PrivacyEvent(
        f"gaussian_dola_{accounting}", "(epsilon,delta)-DP", spent, delta, sensitivity, "L2",
        sigma, values.shape[1], accounting=gaussian_dp_event(sigma, sensitivity),
    )  # fmt: skip
