"""An empirical privacy audit: estimate the privacy loss of a mechanism from samples.

For two neighbouring inputs x₀ = 0 and x₁ = v (‖v‖ = Δ in the mechanism's norm), draw many
outputs under each and compare the probabilities of regions (balls): an ε-DP mechanism
satisfies P₀(S) ≤ e^ε P₁(S) for every region S, so ``|ln(P₀(S)/P₁(S))|`` estimates a lower bound
on its privacy loss. The standard error of the log ratio of two counts c₀, c₁ is about
√(1/c₀ + 1/c₁) (delta method), which gives the tolerance of a test.

    python -m netsim.privacy.audit        # prints the audit table for d = 1, 2, 5
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netsim.privacy import mechanisms
from netsim.privacy.mechanisms import NoiseFn

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
    v = np.zeros(dimension)
    v[0] = 1.0  # unit in both L1 and L2
    out_0 = noise_fn(samples, dimension, scale, rng)
    out_1 = v + noise_fn(samples, dimension, scale, rng)
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
