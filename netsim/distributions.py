"""Duration distributions for link delays and churn session lengths.

Each distribution is a frozen, validated model (it appears in scenario files as e.g.
``{dist: lognormal, median: 7min, sigma: 1.5}``) that can draw samples from an explicit
``numpy.random.Generator`` and state its mean. Durations are in seconds.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
from pydantic import BeforeValidator, Field, model_validator

from netsim.fields import CheckedModel
from netsim.units import parse_duration

Duration = Annotated[float, BeforeValidator(parse_duration)]
PositiveDuration = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]


class _Dist(CheckedModel):
    @model_validator(mode="after")
    def _finite_mean(self) -> _Dist:
        # a Weibull shape of 1e-300 or a log-normal sigma of 40 is valid on its own, but its
        # mean (used to place churn and to check the scenario) overflows
        try:
            mean = self.mean()
        except OverflowError:
            mean = math.inf
        if not math.isfinite(mean):
            raise ValueError(
                "the mean of this distribution is not a finite duration; choose parameters "
                "with a finite mean (e.g. a larger Weibull shape or a smaller sigma)"
            )
        return self

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        raise NotImplementedError

    def mean(self) -> float:
        raise NotImplementedError


class Constant(_Dist):
    """Always ``value``."""

    dist: Literal["constant"]
    value: Duration

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        return np.full(size if size is not None else (), self.value)

    def mean(self) -> float:
        return self.value


class Uniform(_Dist):
    """Uniform on ``[low, high]``."""

    dist: Literal["uniform"]
    low: Duration
    high: Duration

    @model_validator(mode="after")
    def _ordered(self) -> Uniform:
        if self.high < self.low:
            raise ValueError(f"high ({self.high} s) must be >= low ({self.low} s)")
        return self

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        return rng.uniform(self.low, self.high, size)

    def mean(self) -> float:
        return 0.5 * (self.low + self.high)


class Exponential(_Dist):
    """Exponential with the given ``mean``."""

    dist: Literal["exponential"]
    mean_: PositiveDuration = Field(alias="mean")

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        return rng.exponential(self.mean_, size)

    def mean(self) -> float:
        return self.mean_


class LogNormal(_Dist):
    """Log-normal with the given ``median`` (= e^mu) and shape ``sigma`` (of the log)."""

    dist: Literal["lognormal"]
    median: PositiveDuration
    sigma: float = Field(ge=0)

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        return rng.lognormal(math.log(self.median), self.sigma, size)

    def mean(self) -> float:
        return self.median * math.exp(0.5 * self.sigma**2)


class Weibull(_Dist):
    """Weibull with ``shape`` k and ``scale`` λ: mean λ Γ(1 + 1/k)."""

    dist: Literal["weibull"]
    shape: float = Field(gt=0)
    scale: PositiveDuration

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        return self.scale * rng.weibull(self.shape, size)

    def mean(self) -> float:
        return self.scale * math.gamma(1.0 + 1.0 / self.shape)


Distribution = Annotated[
    Constant | Uniform | Exponential | LogNormal | Weibull, Field(discriminator="dist")
]
