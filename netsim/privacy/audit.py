"""An empirical privacy audit: estimate the privacy loss of a mechanism from samples.

For two neighbouring inputs x₀ = 0 and x₁ = v (‖v‖ = Δ in the mechanism's norm), draw many
outputs under each and compare the probabilities of regions (balls): an ε-DP mechanism
satisfies P₀(S) ≤ e^ε P₁(S) for every region S, so ``|ln(P₀(S)/P₁(S))|`` estimates a lower bound
on its privacy loss. The standard error of the log ratio of two counts c₀, c₁ is about
√(1/c₀ + 1/c₁) (delta method), which gives the tolerance of a test.

    python -m netsim.privacy.audit        # prints the audit table for d = 1, 2, 5

For (ε, δ) mechanisms composed over many uses, :func:`threshold_epsilon_lower_bound` turns a
threshold test's error rates, with Clopper–Pearson intervals, into a lower bound on ε at δ
that holds with a stated confidence (``docs/explanation/privacy.md``, "A threshold test that
can fail"): it must stay below the accounted ε.
:func:`poisson_gaussian_scores` draws one Poisson-subsampled Gaussian release under
add/remove neighbours for the same test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from netsim.lazy import lazy_module
from netsim.privacy import mechanisms
from netsim.privacy.mechanisms import NoiseFn

if TYPE_CHECKING:
    import scipy.stats as stats
else:
    stats = lazy_module("scipy.stats")

NOISE: dict[str, tuple[NoiseFn, str]] = {
    "laplace": (mechanisms.laplace_noise, "L1"),
    "l2_laplace_radius": (mechanisms.l2_laplace_radius_noise, "L2"),
    "k_norm_l2": (mechanisms.k_norm_l2_noise, "L2"),
    "laplace_fast": (mechanisms.fast_laplace_noise, "L1"),
}


@dataclass(frozen=True)
class RegionLoss:
    """One region of the audit: its centre (as a multiple of v), counts and log ratio."""

    centre: float
    count_0: int
    count_1: int
    loss: float
    standard_error: float


def audit(
    mechanism: str | NoiseFn,
    *,
    dimension: int,
    epsilon: float,
    samples: int,
    rng: np.random.Generator,
    radius: float = 0.05,
    centres: tuple[float, ...] = (-0.5, 0.0, 0.5, 1.0, 1.5),
) -> list[RegionLoss]:
    """Privacy loss of ``mechanism`` (sensitivity 1) over balls of ``radius`` around c·v:
    a name of :data:`NOISE`, or a noise function such as a
    :meth:`~netsim.api.Mechanism.noise` method."""
    noise_fn = NOISE[mechanism][0] if isinstance(mechanism, str) else mechanism
    scale = 1.0 / epsilon
    v = neighbour(dimension)
    out_0 = noise_fn(samples, dimension, scale, rng)
    out_1 = v + noise_fn(samples, dimension, scale, rng)
    return region_losses(out_0, out_1, v, radius=radius, centres=centres)


def neighbour(dimension: int) -> np.ndarray:
    """x₁ = v = e₁, the neighbour of x₀ = 0 at distance 1 in both L1 and L2."""
    v = np.zeros(dimension)
    v[0] = 1.0
    return v


def region_losses(
    out_0: np.ndarray,
    out_1: np.ndarray,
    v: np.ndarray,
    *,
    radius: float,
    centres: tuple[float, ...] = (-0.5, 0.0, 0.5, 1.0, 1.5),
) -> list[RegionLoss]:
    """The privacy loss over balls of ``radius`` around c·v of the releases ``out_0`` of x₀ = 0
    and ``out_1`` of x₁ = v (rows are releases): whatever produced them, noise added by
    :func:`audit` or a mechanism's own ``release``."""
    results = []
    for c in centres:
        centre = c * v
        c0 = int((np.linalg.norm(out_0 - centre, axis=1) <= radius).sum())
        c1 = int((np.linalg.norm(out_1 - centre, axis=1) <= radius).sum())
        if c0 == 0 or c1 == 0:
            loss, se = math.inf, math.inf
        else:
            loss = abs(math.log(c0 / c1))
            se = math.sqrt(1.0 / c0 + 1.0 / c1)
        results.append(RegionLoss(c, c0, c1, loss, se))
    return results


# --- a threshold test with Clopper–Pearson bounds (docs/explanation/privacy.md) -------------


def clopper_pearson(count: int, trials: int, alpha: float) -> tuple[float, float]:
    """The exact two-sided (1 − ``alpha``) interval of a binomial proportion from ``count``
    successes in ``trials`` (Clopper & Pearson 1934: Beta quantiles)."""
    low = 0.0 if count == 0 else float(stats.beta.ppf(alpha / 2, count, trials - count + 1))
    high = (
        1.0 if count == trials else float(stats.beta.ppf(1 - alpha / 2, count + 1, trials - count))
    )
    return low, high


def threshold_epsilon_lower_bound(
    scores_0: np.ndarray,
    scores_1: np.ndarray,
    thresholds: np.ndarray,
    *,
    delta: float,
    alpha: float,
) -> float:
    """A lower bound on ε at ``delta``, holding with probability ≥ 1 − ``alpha``, from a
    threshold test on a statistic of a mechanism's output under two neighbouring inputs
    (``scores_0`` under x₀, ``scores_1`` under x₁, where x₁ tends to score higher).

    (ε, δ)-DP bounds every event E: P₀(E) ≤ e^ε P₁(E) + δ, so for E = {score ≤ τ}
    ε ≥ ln((P₀(E) − δ) / P₁(E)) (and symmetrically for {score > τ} with the inputs
    swapped; Kairouz, Oh & Viswanath 2015; Jagielski, Ullman & Oprea 2020). P₀ is bounded
    below and P₁ above by Clopper–Pearson intervals, with a Bonferroni split of ``alpha``
    over the thresholds and both tails; the largest bound over them is returned (0 if none
    is positive)."""
    n0, n1 = scores_0.size, scores_1.size
    sorted_0, sorted_1 = np.sort(scores_0), np.sort(scores_1)
    level = alpha / (2 * len(thresholds))  # each bound below is one-sided at this level
    best = 0.0
    for tau in thresholds:
        below_0 = int(np.searchsorted(sorted_0, tau, side="right"))
        below_1 = int(np.searchsorted(sorted_1, tau, side="right"))
        for big, n_big, small, n_small in (
            (below_0, n0, below_1, n1),  # E = {score ≤ τ}: likelier under x₀
            (n1 - below_1, n1, n0 - below_0, n0),  # E = {score > τ}: likelier under x₁
        ):
            p_big = clopper_pearson(big, n_big, 2 * level)[0] - delta
            p_small = clopper_pearson(small, n_small, 2 * level)[1]
            if p_big > 0 and p_small > 0:
                best = max(best, math.log(p_big / p_small))
    return best


def composed_gaussian_scores(
    uses: int,
    noise_multiplier: float,
    *,
    value: float,
    samples: int,
    rng: np.random.Generator,
    chunk: int = 200_000,
) -> np.ndarray:
    """``samples`` draws of the sum of ``uses`` Gaussian releases of the scalar ``value``
    (sensitivity 1, σ = ``noise_multiplier``), each release drawn by
    :func:`netsim.privacy.mechanisms.gaussian_noise`: the sum is the likelihood-ratio
    statistic of k Gaussian releases of one record, so a threshold on it is the most
    powerful test between two neighbouring values (Neyman–Pearson)."""
    out = np.empty(samples)
    for start in range(0, samples, chunk):
        count = min(chunk, samples - start)
        noise = mechanisms.gaussian_noise(count, uses, noise_multiplier, rng)
        out[start : start + count] = uses * value + noise.sum(axis=1)
    return out


def poisson_gaussian_scores(
    sampling_rate: float,
    noise_multiplier: float,
    *,
    present: bool,
    samples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``samples`` draws of one Poisson-subsampled Gaussian release of a scalar sum (Abadi
    et al. 2016, Alg. 1) under add/remove neighbours: the record of value 1 (sensitivity 1,
    σ = ``noise_multiplier``) is absent, or ``present`` and taken with probability
    ``sampling_rate`` (a uniform draw below q, as a Poisson visit takes a record). Its
    likelihood ratio, ln(1 − q + q·e^{(2x − 1)/(2σ²)}), grows with the release x, so a
    threshold on x is the most powerful test between the two (Neyman–Pearson)."""
    taken = rng.random(samples) < sampling_rate if present else np.zeros(samples, dtype=bool)
    return taken + mechanisms.gaussian_noise(samples, 1, noise_multiplier, rng)[:, 0]


def main() -> None:
    """Print the audit table (ε = 1, 400,000 samples per input)."""
    rng = np.random.default_rng(20261121)
    print("mechanism            d   region  count0  count1  loss    s.e.   (ε = 1)")
    for mechanism in NOISE:
        for dimension in (1, 2, 5):
            radius = 0.05 if dimension <= 2 else 1.0
            for row in audit(
                mechanism, dimension=dimension, epsilon=1.0, samples=400_000, rng=rng, radius=radius
            ):
                print(
                    f"{mechanism:20s} {dimension:2d}  {row.centre:5.1f}v  {row.count_0:6d}  "
                    f"{row.count_1:6d}  {row.loss:5.2f}  {row.standard_error:5.2f}"
                )


if __name__ == "__main__":
    main()
