"""The ``muffliato`` section: private values, their noise, the averaging rounds and which
observers are accounted (Cyffers, Even, Bellet, Massoulié, NeurIPS 2022)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from netsim.contracts import RoundsConfig

#: Accounting every observer of a larger network costs one SVD per node: sample instead.
MAX_ALL_OBSERVERS = 2000


class MuffliatoConfig(RoundsConfig):
    """Gaussian gossip averaging: every node holds a private vector in the L2 ball of
    ``radius`` (drawn uniformly), adds N(0, σ²I) to it once with σ = ``noise_multiplier`` ×
    the sensitivity 2·``radius`` (replace-one: two values of the ball are at most a diameter
    apart), then the online nodes average over the links up for ``rounds`` rounds, one every
    ``period``. ``observers``: how many observers the pairwise accounting covers (drawn
    uniformly; all nodes when not given, up to 2,000 nodes); ``delta``: the δ at which every
    pair's ε is stated."""

    dimension: int = Field(default=1, ge=1)
    #: The accountant squares Δ = 2·radius and σ = noise_multiplier·Δ: 1e300 overflowed
    #: (OverflowError) and a radius of 1e-300 gave Δ² = 0 (ZeroDivisionError), so the radius
    #: is in [1e-50, 1e50] and the multiplier at most 1e50 (a tiny multiplier is stated as an
    #: infinite loss).
    radius: float = Field(default=1.0, ge=1e-50, le=1e50, allow_inf_nan=False)
    noise_multiplier: float = Field(default=1.0, gt=0.0, le=1e50, allow_inf_nan=False)
    delta: float = Field(default=1e-5, gt=0.0, lt=1.0, allow_inf_nan=False)
    observers: int | None = Field(default=None, ge=1)
    #: ``chebyshev``: x_{t+1} = γ W_t x_t + (1 − γ) x_{t−1} with γ from the spectral gap of
    #: the whole topology's Metropolis–Hastings weights (Muffliato Alg. 1); ``none``: x ← W_t x.
    acceleration: Literal["none", "chebyshev"] = "none"

    @property
    def sensitivity(self) -> float:
        """Δ: how far apart two neighbouring values can be (the ball's diameter)."""
        return 2.0 * self.radius

    @property
    def sigma(self) -> float:
        """σ: the standard deviation of the noise each node adds once."""
        return self.noise_multiplier * self.sensitivity
