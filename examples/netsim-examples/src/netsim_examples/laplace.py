"""A noise mechanism: the Laplace mechanism (Dwork, McSherry, Nissim, Smith 2006), written as
a plugin.

Each coordinate gets independent Laplace noise of scale b = Δ₁/ε, where Δ₁ is the L1
sensitivity: the release is ε-DP. Its events say so, and ``noise()`` lets netsim's audit (and
``netsim check``) test the claim empirically.
"""

from __future__ import annotations

import numpy as np

from netsim.api import Mechanism
from netsim.privacy.events import PrivacyEvent


class CoordinateLaplace(Mechanism):
    """ε-DP for L1 sensitivity: value + Laplace(Δ₁/ε) in every coordinate."""

    norm = "L1"

    def release(
        self, value: np.ndarray, *, sensitivity: float, epsilon: float, rng: np.random.Generator
    ) -> tuple[np.ndarray, PrivacyEvent]:
        value = np.asarray(value, dtype=float)
        scale = sensitivity / epsilon
        noisy = value + self.noise(1, value.size, scale, rng)[0].reshape(value.shape)
        event = PrivacyEvent(
            mechanism="coordinate_laplace", guarantee="epsilon-DP", epsilon=epsilon, delta=0.0,
            sensitivity=sensitivity, norm="L1", noise_scale=scale, dimension=value.size,
        )  # fmt: skip
        return noisy, event

    def noise(
        self, count: int, dimension: int, scale: float, rng: np.random.Generator
    ) -> np.ndarray:
        return rng.laplace(0.0, scale, size=(count, dimension))
