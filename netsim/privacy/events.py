"""Frozen records of what one noisy release spent (``docs/architecture.md``: privacy is
accounted, never assumed).

Every mechanism returns its noisy value together with a :class:`PrivacyEvent`. The event
states the guarantee honestly: ``"epsilon-DP"``, ``"(epsilon,delta)-DP"``, ``"none"`` (noise
was added but the mechanism is not differentially private, e.g. the L2 variant printed by
Hegedűs et al. for d > 1), ``"mutual-information"`` (a bound on the mutual information between
the private input and the release, in nats, as Zhang & Venkitasubramaniam measure privacy; no
DP guarantee) or ``"non-private"`` (no noise at all), and carries what an accountant needs:
sensitivity and its norm, ε, δ, the noise scale and dimension, and the mutual-information
bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import dp_accounting

from netsim.errors import UnaccountableEventError

Guarantee = Literal["epsilon-DP", "(epsilon,delta)-DP", "mutual-information", "none", "non-private"]
Norm = Literal["L1", "L2"]


@dataclass(frozen=True)
class PrivacyEvent:
    """What one release spent.

    ``noise_scale`` is the Laplace scale b (per coordinate), the Gaussian σ, or the scale of
    the radial distribution, as named by ``mechanism``. ``epsilon`` / ``delta`` are the
    guarantee of this single release (0 for ``non-private``; for ``none`` the ε the caller
    asked for, which the mechanism does not deliver).
    """

    mechanism: str
    guarantee: Guarantee
    epsilon: float
    delta: float
    sensitivity: float
    norm: Norm
    noise_scale: float
    dimension: int
    mutual_information: float = 0.0

    def __post_init__(self) -> None:
        if self.epsilon < 0 or self.delta < 0 or self.delta >= 1:
            raise ValueError(f"invalid privacy event: ε={self.epsilon}, δ={self.delta}")
        if not self.mutual_information >= 0:
            raise ValueError(f"invalid mutual-information bound {self.mutual_information}")
        if self.sensitivity < 0 or self.noise_scale < 0 or self.dimension < 1:
            raise ValueError("invalid privacy event: negative sensitivity or scale, or d < 1")

    @property
    def is_private(self) -> bool:
        """True when the release has a differential-privacy guarantee."""
        return self.guarantee in ("epsilon-DP", "(epsilon,delta)-DP")

    def dp_event(self) -> dp_accounting.DpEvent:
        """The event in Google's ``dp_accounting`` vocabulary, for RDP / PLD accounting.

        Gaussian releases become ``GaussianDpEvent(σ / Δ₂)``; Laplace releases with L1
        sensitivity become ``LaplaceDpEvent(b / Δ₁)``. Releases without a DP guarantee cannot be
        accounted and raise :class:`UnaccountableEventError`.
        """
        if self.guarantee == "non-private":
            return dp_accounting.NonPrivateDpEvent()
        if self.mechanism.startswith("gaussian") and self.norm == "L2" and self.sensitivity > 0:
            return dp_accounting.GaussianDpEvent(
                noise_multiplier=self.noise_scale / self.sensitivity
            )
        if self.mechanism.startswith("laplace") and self.norm == "L1" and self.sensitivity > 0:
            return dp_accounting.LaplaceDpEvent(
                noise_multiplier=self.noise_scale / self.sensitivity
            )
        raise UnaccountableEventError(
            f"{self.mechanism} ({self.guarantee}) has no RDP/PLD representation; "
            "use basic composition"
        )

    def noise_multiplier(self) -> float:
        """Noise scale over sensitivity (∞ for a zero-sensitivity query)."""
        return math.inf if self.sensitivity == 0 else self.noise_scale / self.sensitivity
