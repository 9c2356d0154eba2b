"""An (ε, δ)-DP noise mechanism with a setting: Gaussian noise of a fixed σ.

``noise: {kind: fixed_gaussian, sigma: 4.0}`` adds N(0, σ² I) to every release, whatever
budget share the algorithm offers, and states the ε this σ really gives at the share of δ it
was given (the exact privacy profile of the Gaussian mechanism, Balle & Wang 2018, Thm 8):
an honest claim the accountant charges, and refuses when it exceeds what is left of a
record's budget. Its events declare ``GaussianDpEvent(σ/Δ)``, so tight (RDP / PLD)
composition applies.

The guarantee is (ε, δ)-DP for L2 sensitivity Δ: ``guarantee`` says so, which makes netsim
give the mechanism a share of the algorithm's δ budget (``learning.delta``) and refuse a
scenario that has none.
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
from pydantic import Field

from netsim.api import BuildContext, ComponentConfig, Mechanism
from netsim.privacy.events import PrivacyEvent
from netsim.privacy.mechanisms import gaussian_epsilon


class FixedGaussianConfig(ComponentConfig):
    #: The standard deviation of the noise of every coordinate (in the value's units).
    sigma: float = Field(gt=0.0, allow_inf_nan=False)


class FixedGaussian(Mechanism):
    """N(0, σ² I) with σ fixed by the scenario; (ε, δ)-DP with ε from the exact profile."""

    Config = FixedGaussianConfig
    norm = "L2"
    guarantee = "(epsilon,delta)-DP"

    def __init__(self, config: FixedGaussianConfig, ctx: BuildContext | None) -> None:
        super().__init__(config, ctx)
        self.sigma = config.sigma

    def release(self, value, *, sensitivity, epsilon, delta, rng):
        x = np.atleast_1d(np.asarray(value, dtype=np.float64))
        spent = gaussian_epsilon(self.sigma, sensitivity, delta)  # what σ gives at δ
        noisy = x + rng.normal(0.0, self.sigma, x.size)
        return noisy, PrivacyEvent(
            mechanism="fixed_gaussian",
            guarantee="(epsilon,delta)-DP" if math.isfinite(spent) else "none",
            epsilon=spent,
            delta=delta,
            sensitivity=sensitivity,
            norm="L2",
            noise_scale=self.sigma,
            dimension=x.size,
            accounting=(
                dp_accounting.GaussianDpEvent(self.sigma / sensitivity)
                if sensitivity > 0
                else dp_accounting.NoOpDpEvent()
            ),
        )
