"""The ``mi_ogd`` section: MI-private OGD's one config (Zhang & Venkitasubramaniam; names
follow the paper). Every key is validated here, before anything runs; the learner reads this
same frozen object through its :class:`~netsim.algorithms.mi_ogd.learner.MiOgdProblem`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from netsim.api import RoundsConfig
from netsim.learning.online_data import SYNTHETIC, StreamDataConfig
from netsim.registry import component_name

Setting = Literal["full", "bandit"]
Loss = Literal["absolute", "hinge", "logistic"]


#: The section's own generators, a registered data-set loader or ``module:Class``.
DataName = component_name("dataset", also=("synthetic_regression", *SYNTHETIC))


class MiOgdDataConfig(StreamDataConfig):
    """The users' examples: ``synthetic_regression`` or a binary data set as DOLA reads it."""

    name: DataName


class MiOgdConfig(RoundsConfig):
    """MI-private OGD (Zhang & Venkitasubramaniam): a learner node and user nodes."""

    data: MiOgdDataConfig = MiOgdDataConfig(name="synthetic_regression")
    setting: Setting = "full"
    loss: Loss = "absolute"
    sigma: float = Field(default=1.0, allow_inf_nan=False)
    radius: float = Field(default=1.0, allow_inf_nan=False)
    eta: float | None = None
    smoothing: float | None = None
    learner: int = Field(default=0, ge=0)
    regret_checkpoints: int = Field(default=20, ge=0)

    @model_validator(mode="after")
    def _runnable(self) -> MiOgdConfig:
        problems = []
        if not self.sigma >= 0:
            problems.append(
                f"sigma must be >= 0, got {self.sigma}: it is the standard deviation of the "
                "noise each user adds (0 = no privacy)"
            )
        if not self.radius > 0:
            problems.append(f"radius B must be positive, got {self.radius}: S = {{‖w‖ ≤ B}}")
        if self.smoothing is not None and not self.smoothing > 0:
            problems.append(
                f"smoothing δ must be positive in the bandit setting, got {self.smoothing}: "
                "the user evaluates its loss at w + δe and the estimate divides by δ"
            )
        if self.eta is not None and not self.eta > 0:
            problems.append(f"eta must be positive, got {self.eta}")
        if problems:
            raise ValueError("; ".join(problems))
        if self.setting == "full" and self.smoothing is not None:
            raise ValueError("smoothing δ is for the bandit setting (setting: bandit)")
        if self.loss != "absolute" and self.data.name == "synthetic_regression":
            raise ValueError(
                f"loss {self.loss} needs labels ±1; synthetic_regression has real targets "
                "(use loss absolute, or a binary data set)"
            )
        return self
