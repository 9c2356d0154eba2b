"""The ``mi_ogd`` section: MI-private OGD's one config (Zhang & Venkitasubramaniam; names
follow the paper). Every key is validated here, before anything runs; the learner reads this
same frozen object through its :class:`~netsim.algorithms.mi_ogd.learner.MiOgdProblem`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from netsim.contracts import RoundsConfig
from netsim.learning.online_data import SYNTHETIC, StreamDataConfig
from netsim.privacy.mechanisms import MechanismSpec, delta_budget_problem
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
    #: A registered noise mechanism for the users' reports instead of the Gaussian channel of
    #: σ (None: the paper's N(0, σ² I), accounted in nats). With one, every report is a
    #: differentially private release of sensitivity 2√P (``docs/components.md``, "Noise
    #: mechanisms"), charged to its example against the budget ``epsilon`` (and ``delta``),
    #: which an example may spend over at most ``uses`` reports (ε/uses, δ/uses each; later
    #: reports of it are refused and not sent).
    mechanism: MechanismSpec | None = None
    epsilon: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    delta: float = Field(default=0.0, ge=0.0, lt=1.0, allow_inf_nan=False)
    uses: int = Field(default=1, ge=1)
    #: How an example's reports compose against its budget: ``basic`` (ε/uses, δ/uses each),
    #: or ``rdp`` / ``pld`` for a Gaussian mechanism: σ = z·2√P with z calibrated so that
    #: ``uses`` reports compose to (ε, δ) by Rényi DP or the privacy-loss distribution
    #: (dp-accounting; :mod:`netsim.privacy.composition`). Other mechanisms keep the basic sum.
    accounting: Literal["basic", "rdp", "pld"] = "basic"

    @model_validator(mode="after")
    def _runnable(self) -> MiOgdConfig:
        problems = self._mechanism_problems()
        if not self.sigma >= 0:
            problems.append(
                f"sigma must be >= 0, got {self.sigma}: it is the standard deviation of the "
                "noise each user adds (0 = no privacy)"
            )
        elif 0 < self.sigma < 1e-150:
            # σ² must be a positive float: 1e-300 squared is 0, and the channel's capacity
            # P/(dσ²) ended in a ZeroDivisionError
            problems.append(
                f"sigma must be 0 (no privacy) or at least 1e-150, got {self.sigma:g}: its "
                "square σ² is the noise's variance"
            )
        if not self.radius > 0:
            problems.append(f"radius B must be positive, got {self.radius}: S = {{‖w‖ ≤ B}}")
        elif self.radius > 1e150:
            # B² enters the regret bound: 1e300 squared overflowed (an OverflowError)
            problems.append(f"radius B must be at most 1e150, got {self.radius:g}: B² is used")
        if self.smoothing is not None and 0 < self.smoothing < 1e-50:
            # the bandit estimate divides by δ and its power bound by δ²: 1e-300 overflowed
            problems.append(
                f"smoothing δ must be at least 1e-50, got {self.smoothing:g}: the estimate "
                "divides by it"
            )
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

    def _mechanism_problems(self) -> list[str]:
        # by value, not by the keys given: a resolved scenario (a run's scenario.yaml, a sweep's
        # base) holds every key at its default and must validate again
        if self.mechanism is None:
            budget = [
                key
                for key, given in (
                    ("delta", self.delta != 0.0),
                    ("epsilon", self.epsilon is not None),
                    ("uses", self.uses != 1),
                    ("accounting", self.accounting != "basic"),
                )
                if given
            ]
            if budget:
                return [
                    f"{', '.join(budget)}: the budget of a mechanism's releases; without "
                    "mechanism the reports carry the Gaussian channel's noise σ (in nats)"
                ]
            return []
        out = []
        if self.epsilon is None:
            out.append("mechanism needs epsilon, the ε budget of an example over its reports")
        if self.eta is None:
            out.append(
                "mechanism needs eta: the theorems' step η assumes the Gaussian channel of σ"
            )
        if self.sigma != MiOgdConfig.model_fields["sigma"].default:
            out.append("sigma is the Gaussian channel's noise; with mechanism, leave it out")
        problem = delta_budget_problem(self.mechanism, self.delta, ("mechanism", "delta"))
        return [*out, problem] if problem else out
