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
========================  ===================  ==============================================

The paper-specific calibrations live with their algorithms
(:mod:`netsim.algorithms.dola.calibration`, :mod:`netsim.algorithms.mi_ogd.calibration`) and call
these mechanisms. :func:`add_laplace_noise` draws Laplace noise as E·S, E ~ Exp(1) by a ziggurat
and S = ±1 from a random bit: the same law as ``Generator.laplace`` (exactly, not
approximately) at about a fourteenth of its cost (``netsim.privacy.laplace_kernel``: SFC64
lanes seeded from the caller's generator), which matters when a round perturbs 10⁶
coordinates.

Why the paper's L2 variant is not ε-DP for d > 1: its output density at distance r from the
true value is ∝ exp(−εr/Δ) / r^(d−1) (a one-dimensional radius spread over a sphere of area
∝ r^(d−1)), unbounded near the true value, so the likelihood ratio between two neighbouring
inputs is unbounded. The K-norm density ∝ exp(−ε‖z‖/Δ) needs the Gamma(d, Δ/ε) radius.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np
from pydantic import Field

from netsim.contracts import BuildContext, ComponentConfig, Mechanism
from netsim.lazy import lazy_module
from netsim.privacy import laplace_kernel
from netsim.privacy.events import PrivacyEvent
from netsim.registry import build_spec, component_spec, spec_class, spec_kind

if TYPE_CHECKING:
    import dp_accounting
    import scipy.special as special
else:
    dp_accounting = lazy_module("dp_accounting")
    special = lazy_module("scipy.special")

NoiseFn = Callable[[int, int, float, np.random.Generator], np.ndarray]


def check_budget(epsilon: float, sensitivity: float) -> None:
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be positive and finite, got {epsilon}")
    if not (sensitivity >= 0 and math.isfinite(sensitivity)):
        raise ValueError(f"sensitivity must be >= 0 and finite, got {sensitivity}")


def check_delta(delta: float) -> None:
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")


def as_vector(value: np.ndarray | float) -> np.ndarray:
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


def laplace_dp_event(scale: float, sensitivity: float) -> dp_accounting.DpEvent:
    """What a Laplace(0, ``scale``) release of L1 sensitivity Δ is in ``dp_accounting``:
    ``LaplaceDpEvent(b/Δ)`` (``NoOpDpEvent`` for Δ = 0: it reveals nothing)."""
    if sensitivity == 0:
        return dp_accounting.NoOpDpEvent()
    return dp_accounting.LaplaceDpEvent(noise_multiplier=scale / sensitivity)


def gaussian_dp_event(sigma: float, sensitivity: float) -> dp_accounting.DpEvent:
    """What an N(0, σ² I) release of L2 sensitivity Δ is in ``dp_accounting``:
    ``GaussianDpEvent(σ/Δ)`` (``NoOpDpEvent`` for Δ = 0)."""
    if sensitivity == 0:
        return dp_accounting.NoOpDpEvent()
    return dp_accounting.GaussianDpEvent(noise_multiplier=sigma / sensitivity)


def add_noise(x: np.ndarray, noise: NoiseFn, scale: float, rng: np.random.Generator) -> np.ndarray:
    """``x`` plus one draw of ``noise`` at ``scale`` (a copy of ``x`` when the scale is 0)."""
    return x + noise(1, x.size, scale, rng)[0] if scale > 0 else x.copy()


def laplace(
    value: np.ndarray | float, *, sensitivity: float, epsilon: float, rng: np.random.Generator
) -> tuple[np.ndarray, PrivacyEvent]:
    """ε-DP for L1 sensitivity Δ: adds Laplace(0, Δ/ε) to every coordinate (Dwork et al. 2006)."""
    check_budget(epsilon, sensitivity)
    x = as_vector(value)
    scale = sensitivity / epsilon
    noisy = add_noise(x, laplace_noise, scale, rng)
    return noisy, PrivacyEvent(
        "laplace", "epsilon-DP", epsilon, 0.0, sensitivity, "L1", scale, x.size,
        accounting=laplace_dp_event(scale, sensitivity),
    )  # fmt: skip


def l2_laplace_radius(
    value: np.ndarray | float, *, sensitivity: float, epsilon: float, rng: np.random.Generator
) -> tuple[np.ndarray, PrivacyEvent]:
    """The L2 noise of Hegedűs et al. (2016) §2.3 as printed: a uniform random direction with a
    Laplace(0, Δ/ε)-distributed length. **Not ε-DP when d > 1** (see the module docstring); the
    event says so (guarantee ``none``). For d = 1 it is the Laplace mechanism.
    """
    check_budget(epsilon, sensitivity)
    x = as_vector(value)
    scale = sensitivity / epsilon
    noisy = add_noise(x, l2_laplace_radius_noise, scale, rng)
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
    check_budget(epsilon, sensitivity)
    x = as_vector(value)
    scale = sensitivity / epsilon
    noisy = add_noise(x, k_norm_l2_noise, scale, rng)
    return noisy, PrivacyEvent(
        "k_norm_l2", "epsilon-DP", epsilon, 0.0, sensitivity, "L2", scale, x.size
    )


# --- Gaussian ------------------------------------------------------------------------------


def classic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """σ = Δ √(2 ln(1.25/δ)) / ε, (ε, δ)-DP for ε < 1 (Dwork & Roth 2014, Thm A.1)."""
    check_budget(epsilon, sensitivity)
    check_delta(delta)
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
    return max(float(special.ndtr(a - b) - math.exp(epsilon + special.log_ndtr(-a - b))), 0.0)


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """The smallest σ with δ(σ) ≤ δ at ε (Balle & Wang 2018, analytic Gaussian mechanism).

    δ(σ) decreases in σ, so a bisection on log σ finds it to 1e-12 relative precision.
    """
    check_budget(epsilon, sensitivity)
    check_delta(delta)
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
    check_delta(delta)
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


def gaussian_epsilons(mu_squared: np.ndarray, delta: float) -> np.ndarray:
    """:func:`netsim.privacy.linear.epsilon_of` of every entry of ``mu_squared`` at once: ε at
    ``delta`` of the Gaussian mechanism of sensitivity μ = √μ² and unit noise, the root of its
    exact privacy profile δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) (Balle & Wang 2018, Thm 8;
    :func:`~netsim.privacy.mechanisms.gaussian_delta`), 0 where δ(0) ≤ ``delta`` and ``inf``
    past 10⁶ as :func:`~netsim.privacy.mechanisms.gaussian_epsilon` gives them. The root is
    found for all entries together by Newton's method (δ′(ε) = −e^ε Φ(−μ/2 − ε/μ)) kept
    inside a bracket that bisection shrinks where a step leaves it, to 1e-13 relative: the
    one-by-one bisection's ε to within its 1e-12 (``tests/test_walk_bound_audit.py``); for
    the 10⁵ pairs of a walk's bound audit at some 40 µs each one by one."""
    check_delta(delta)
    mu2 = np.asarray(mu_squared, dtype=np.float64)
    flat = mu2.reshape(-1)
    out = np.where(np.isinf(flat), math.inf, 0.0)
    mu = np.sqrt(np.maximum(flat, 0.0))

    def excess(m: np.ndarray, epsilon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """δ(ε) − delta and −δ′(ε)."""
        a, b = m / 2.0, epsilon / m
        tail = np.exp(epsilon + special.log_ndtr(-a - b))
        return np.maximum(special.ndtr(a - b) - tail, 0.0) - delta, tail

    at = np.flatnonzero((mu > 0) & np.isfinite(flat))
    at = at[excess(mu[at], np.zeros(at.size))[0] > 0]
    m = mu[at]
    low, high = np.zeros(at.size), np.ones(at.size)
    growing = excess(m, high)[0] > 0
    while growing.any():  # a bracket: δ(low) > delta ≥ δ(high)
        low[growing] = high[growing]
        high[growing] *= 2.0
        growing &= high <= 1e6
        growing[growing] = excess(m[growing], high[growing])[0] > 0
    beyond = high > 1e6
    epsilon = low.copy()
    active = np.flatnonzero(~beyond)
    for _ in range(200):
        if not active.size:
            break
        e = epsilon[active]
        value, slope = excess(m[active], e)
        above = value > 0
        low[active[above]] = e[above]
        high[active[~above]] = e[~above]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            step = np.where(slope > 0, value / slope, math.inf)
        guess = e + step
        lo, hi = low[active], high[active]
        inside = (guess > lo) & (guess < hi)
        guess = np.where(inside, guess, 0.5 * (lo + hi))
        epsilon[active] = guess
        done = (np.abs(guess - e) < 1e-13 * np.maximum(guess, 1.0)) | (
            hi - lo < 1e-13 * np.maximum(hi, 1.0)
        )
        active = active[~done]
    out[at] = np.where(beyond, math.inf, epsilon)
    return out.reshape(mu2.shape)


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
    x = as_vector(value)
    noisy = add_noise(x, gaussian_noise, sigma, rng)
    return noisy, PrivacyEvent(
        f"gaussian_{calibration}",
        "(epsilon,delta)-DP",
        epsilon,
        delta,
        sensitivity,
        "L2",
        sigma,
        x.size,
        accounting=gaussian_dp_event(sigma, sensitivity),
    )


@functools.lru_cache(maxsize=4096)
def single_release_epsilon(noise_multiplier: float, delta: float) -> float:
    """ε at ``delta`` of one Gaussian release with σ/Δ = ``noise_multiplier`` (the exact
    privacy profile, :func:`gaussian_epsilon`; cached: a run releases at few multipliers)."""
    return gaussian_epsilon(noise_multiplier, 1.0, delta)


def gaussian_at_multiplier(
    value: np.ndarray | float,
    *,
    sensitivity: float,
    noise_multiplier: float,
    delta: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, PrivacyEvent]:
    """``value`` plus N(0, σ² I) with σ = ``noise_multiplier``·Δ, the noise an RDP or PLD
    accountant calibrated for a record's composed budget (Abadi et al. 2016 §3.1). The event
    declares ``GaussianDpEvent(σ/Δ)`` and states what this release alone gives at the budget
    δ ``delta``: ε of the exact privacy profile (Balle & Wang 2018, Thm 8)."""
    if not (noise_multiplier > 0 and math.isfinite(noise_multiplier)):
        raise ValueError(f"noise_multiplier must be positive and finite, got {noise_multiplier}")
    if not (sensitivity >= 0 and math.isfinite(sensitivity)):
        raise ValueError(f"sensitivity must be >= 0 and finite, got {sensitivity}")
    check_delta(delta)
    x = as_vector(value)
    sigma = noise_multiplier * sensitivity
    spent = single_release_epsilon(sigma / sensitivity, delta) if sensitivity > 0 else 0.0
    guarantee: Literal["(epsilon,delta)-DP", "none"] = (
        "(epsilon,delta)-DP" if math.isfinite(spent) else "none"
    )
    noisy = add_noise(x, gaussian_noise, sigma, rng)
    return noisy, PrivacyEvent(
        "gaussian_multiplier", guarantee, spent, delta, sensitivity, "L2", sigma, x.size,
        accounting=gaussian_dp_event(sigma, sensitivity),
    )  # fmt: skip


def no_noise(value: np.ndarray | float) -> tuple[np.ndarray, PrivacyEvent]:
    """The non-private baseline: the value unchanged, recorded as such."""
    x = as_vector(value)
    return x.copy(), PrivacyEvent("none", "non-private", 0.0, 0.0, 0.0, "L2", 0.0, x.size)


# --- the registered noise mechanisms (``learning.noise``) --------------------------------------


class _NoiseOfThisModule(Mechanism):
    """A registered mechanism made of one release function of this module and the noise
    function it draws from (which the empirical audit samples)."""

    release_function: ClassVar[Callable[..., tuple[np.ndarray, PrivacyEvent]]]
    noise_function: ClassVar[NoiseFn]

    def release(
        self, value: np.ndarray, *, sensitivity: float, epsilon: float, rng: np.random.Generator
    ) -> tuple[np.ndarray, PrivacyEvent]:
        return self.release_function(value, sensitivity=sensitivity, epsilon=epsilon, rng=rng)

    def noise(
        self, count: int, dimension: int, scale: float, rng: np.random.Generator
    ) -> np.ndarray:
        return self.noise_function(count, dimension, scale, rng)


class LaplaceMechanism(_NoiseOfThisModule):
    """``l1``: i.i.d. Laplace(0, Δ/ε) coordinates; ε-DP for L1 sensitivity Δ."""

    norm = "L1"
    release_function = staticmethod(laplace)
    noise_function = staticmethod(laplace_noise)


class PaperL2Mechanism(_NoiseOfThisModule):
    """``l2_paper``: Hegedűs et al. (2016) §2.3 as printed, a uniform direction with a
    Laplace(0, Δ/ε) length; **not ε-DP for d > 1** (its events say ``none``)."""

    norm = "L2"
    guarantee = "none"
    release_function = staticmethod(l2_laplace_radius)
    noise_function = staticmethod(l2_laplace_radius_noise)


class KNormL2Mechanism(_NoiseOfThisModule):
    """``k_norm_l2``: density ∝ exp(−ε‖z‖₂/Δ) (uniform direction, Gamma(d, Δ/ε) radius; Hardt
    & Talwar 2010); ε-DP for L2 sensitivity Δ."""

    norm = "L2"
    release_function = staticmethod(k_norm_l2)
    noise_function = staticmethod(k_norm_l2_noise)


class GaussianConfig(ComponentConfig):
    """The ``gaussian`` mechanism's settings: how σ is chosen for a release's share (ε, δ)."""

    #: ``analytic``: the smallest σ with δ(σ) ≤ δ at ε (Balle & Wang 2018, any ε);
    #: ``classic``: σ = Δ √(2 ln(1.25/δ)) / ε (Dwork & Roth, Thm A.1; ε < 1 only).
    calibration: Literal["analytic", "classic"] = "analytic"
    #: A fixed σ/Δ instead of a calibrated σ: each release then states the ε this σ really
    #: gives at its δ (the exact privacy profile), which the accountant charges (and refuses
    #: when it exceeds what is left of the budget).
    #: At most 1e50: σ = z·Δ is squared in the accounting, and z = 1e300 overflowed there
    #: (an OverflowError in the run); 1e50 already makes every release pure noise.
    noise_multiplier: float | None = Field(default=None, gt=0.0, le=1e50, allow_inf_nan=False)


class GaussianMechanism(Mechanism):
    """``gaussian``: N(0, σ² I), (ε, δ)-DP for L2 sensitivity Δ, σ calibrated to each
    release's share (ε, δ) (``calibration``) or fixed at ``noise_multiplier``·Δ. Its events
    declare ``GaussianDpEvent(σ/Δ)`` for tight composition."""

    Config = GaussianConfig
    norm = "L2"
    guarantee = "(epsilon,delta)-DP"

    def release(  # type: ignore[override]
        self,
        value: np.ndarray,
        *,
        sensitivity: float,
        epsilon: float,
        delta: float,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, PrivacyEvent]:
        config: GaussianConfig = self.config  # type: ignore[assignment]
        if config.noise_multiplier is None:
            return gaussian(
                value, sensitivity=sensitivity, epsilon=epsilon, delta=delta, rng=rng,
                calibration=config.calibration,
            )  # fmt: skip
        check_budget(epsilon, sensitivity)
        check_delta(delta)
        x = as_vector(value)
        sigma = config.noise_multiplier * sensitivity
        spent = gaussian_epsilon(sigma, sensitivity, delta) if sensitivity > 0 else 0.0
        guarantee: Literal["(epsilon,delta)-DP", "none"] = (
            "(epsilon,delta)-DP" if math.isfinite(spent) else "none"
        )
        noisy = add_noise(x, gaussian_noise, sigma, rng)
        return noisy, PrivacyEvent(
            "gaussian_fixed", guarantee, spent, delta, sensitivity, "L2", sigma, x.size,
            accounting=gaussian_dp_event(sigma, sensitivity),
        )  # fmt: skip

    def fixed_noise_multiplier(self) -> float | None:
        """``noise_multiplier`` of the settings (None: σ is calibrated)."""
        config: GaussianConfig = self.config  # type: ignore[assignment]
        return config.noise_multiplier

    def release_at_multiplier(
        self,
        value: np.ndarray,
        *,
        sensitivity: float,
        noise_multiplier: float,
        delta: float,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, PrivacyEvent]:
        return gaussian_at_multiplier(
            value, sensitivity=sensitivity, noise_multiplier=noise_multiplier, delta=delta,
            rng=rng,
        )  # fmt: skip


# --- a mechanism named in a scenario --------------------------------------------------------

#: The annotation of a scenario key naming a noise mechanism: a registered name or
#: ``module:Class`` (``noise: k_norm_l2``), or a mapping with its settings
#: (``noise: {kind: gaussian, calibration: classic}``).
MechanismSpec = component_spec("mechanism")


def build_mechanism(spec: str | ComponentConfig, ctx: BuildContext | None = None) -> Mechanism:
    """The noise mechanism of a :data:`MechanismSpec` value: a name built with its default
    settings, a mapping with its own (``ctx`` is ``None`` outside a run)."""
    built = build_spec("mechanism", spec, ctx)
    assert isinstance(built, Mechanism)
    return built


def delta_budget_problem(spec: str | ComponentConfig, delta: float, keys: tuple[str, str]) -> str:
    """Why the mechanism ``spec`` cannot run with the δ budget ``delta`` ("" when it can): a
    mechanism that spends δ would be refused on every use without one. ``keys`` name the
    mechanism's key and the budget's in the message."""
    cls = spec_class("mechanism", spec)
    if not (issubclass(cls, Mechanism) and cls.spends_delta()) or 0 < delta < 1:
        return ""
    return (
        f"{keys[0]} {spec_kind(spec)} is (epsilon,delta)-DP: every release spends δ, but "
        f"{keys[1]} (the δ budget of a record) is {delta:g}, so every use would be refused; "
        f"set {keys[1]} to the δ a record may spend (e.g. 1e-5, well below 1/records) or "
        "choose an ε-DP mechanism (k_norm_l2, l1)"
    )
