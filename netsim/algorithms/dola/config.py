"""The ``dola`` section: DOLA's one config (Li et al.; names follow the papers).

Every key is validated here, before anything runs; the learner
(:class:`~netsim.algorithms.dola.learner.DolaLearner`) and the round component
(:class:`~netsim.algorithms.dola.rounds.DolaRounds`) read this same frozen object.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, model_validator

from netsim.contracts import ComponentConfig, RoundsConfig
from netsim.learning.online_data import SYNTHETIC, StreamDataConfig
from netsim.privacy.mechanisms import MechanismSpec, delta_budget_problem
from netsim.registry import component_name, spec_class

Algorithm = Literal["laplace", "gaussian", "sparse", "non_private"]


#: The section's own generators, a registered data-set loader or ``module:Class``.
DataName = component_name("dataset", also=SYNTHETIC)


class DolaDataConfig(StreamDataConfig):
    """DOLA's binary data stream: a generator of :mod:`netsim.learning.online_data` or a data
    set of the loader, pre-processed as Li et al. describe (``docs/papers.md``)."""

    name: DataName
    test_fraction: float | None = Field(default=None, gt=0.0, lt=1.0)
    #: Hold out this fraction of the training split as the evaluation set (the test split is
    #: then not used): for choosing R and λ by validation, never on the test set.
    validation: float | None = Field(default=None, gt=0.0, lt=1.0)


class DolaMixingConfig(ComponentConfig):
    """How A_t is drawn: each online node talks to ``count`` (if > 0) or a ``fraction`` of its
    online neighbours per round; ``time_invariant`` uses one A on every link instead."""

    fraction: float = Field(default=0.5, gt=0.0, le=1.0)
    count: int = Field(default=0, ge=0)
    time_invariant: bool = False
    window: int = Field(default=10, ge=1)


class DolaConfig(RoundsConfig):
    """DOLA (Li et al.): private distributed online learning in synchronous rounds."""

    data: DolaDataConfig
    algorithm: Algorithm = "laplace"
    loss: Literal["hinge", "logistic"] = "hinge"
    epsilon: float = Field(default=1.0, allow_inf_nan=True)  # .inf: no noise
    delta: float = 1e-5
    calibration: Literal["printed", "analytic"] = "analytic"
    #: How an example's releases compose against its budget (ε, δ): ``basic`` gives each of
    #: its ``passes`` releases (ε/passes, δ/passes) (sequential composition); ``rdp`` or
    #: ``pld`` compose its Gaussian releases by Rényi DP or their privacy-loss distribution
    #: (dp-accounting; :mod:`netsim.privacy.composition`), with σ_t = z·Δ_t and z calibrated so
    #: that ``passes`` releases compose to (ε, δ) exactly. Laplace releases keep the basic sum.
    accounting: Literal["basic", "rdp", "pld"] = "basic"
    #: A registered noise mechanism for every release instead of the algorithm's own noise
    #: (None: Laplace for laplace and sparse, the calibrated Gaussian for gaussian). It gets
    #: each release's sensitivity in its norm and its share (ε, δ) of the budget
    #: (``docs/components.md``, "Noise mechanisms").
    mechanism: MechanismSpec | None = None
    batch: int = 1
    max_passes: int = Field(default=1, ge=1)
    step: Literal["strongly_convex", "convex"] = "strongly_convex"
    # λ of α_t = 1/(λt) and the ball radius R: the papers fix neither. The defaults were chosen
    # by validation on a held-out fifth of the training rows of Adult, Spambase and breast
    # cancer, never on their test sets (analysis/README.md, "DOLA's R and λ"): with R = 1 every
    # pre-processed row has ‖x‖ = 1 and the hinge's minimiser in the ball predicts one class.
    strong_convexity: float = Field(default=0.001, allow_inf_nan=False)
    regularisation: float = Field(default=0.0, allow_inf_nan=False)
    radius: float = Field(default=30.0, allow_inf_nan=False)
    sparsity: float = Field(default=0.0, allow_inf_nan=False)
    mixing: DolaMixingConfig = DolaMixingConfig()
    regret_node: int = Field(default=0, ge=0)
    regret_checkpoints: int = Field(default=20, ge=0)
    evaluate_every: int = Field(default=10, ge=1)

    @model_validator(mode="after")
    def _runnable(self) -> DolaConfig:
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def problems(self) -> list[str]:
        """Why this configuration cannot run (empty when it can)."""
        out = []
        if not self.epsilon > 0:  # also refuses NaN; ε = ∞ means no noise
            out.append(
                f"epsilon must be positive, got {self.epsilon}: it is the privacy budget of "
                "one release, and the noise scale is proportional to 1/ε (ε = .inf, or "
                "algorithm non_private, for no noise)"
            )
        elif self.epsilon < 1e-100:
            # ε² divides the printed calibration: 1e-300 squared is 0 (a ZeroDivisionError)
            out.append(
                f"epsilon must be at least 1e-100, got {self.epsilon:g}: the noise scale is "
                "proportional to 1/ε and the printed calibration divides by ε²"
            )
        if self.mechanism is not None:
            out.extend(self._mechanism_problems())
        elif self.algorithm == "gaussian" and not 0 < self.delta < 1:
            out.append(
                f"delta must be in (0, 1) for the Gaussian mechanism, got {self.delta}: it is "
                "the probability with which the ε bound may fail"
            )
        if self.accounting != "basic" and self.private:
            out.extend(self._accounting_problems())
        if self.batch < 1:
            out.append(f"batch must be at least 1, got {self.batch}")
        if self.step == "strongly_convex" and not self.strong_convexity > 0:
            out.append(
                "the strongly convex step 1/(λt) needs strong_convexity λ > 0, got "
                f"{self.strong_convexity}; use step: convex (1/(2√t)) for λ = 0"
            )
        if not self.radius > 0:
            out.append(f"radius R must be positive, got {self.radius}")
        if self.regularisation < 0 or self.sparsity < 0:
            out.append("regularisation φ and sparsity ρ must be >= 0")
        return out

    def _accounting_problems(self) -> list[str]:
        """Why ``accounting`` rdp/pld cannot calibrate this section's noise (empty: it can)."""
        own_gaussian = self.mechanism is None and self.algorithm == "gaussian"
        if own_gaussian and self.calibration == "printed":
            return [
                f"calibration printed is the J² noise of Li et al.'s Alg. 2; accounting "
                f"{self.accounting} calibrates σ so that an example's releases compose to "
                "(epsilon, delta): leave calibration out, or set accounting: basic"
            ]
        return []

    def _mechanism_problems(self) -> list[str]:
        assert self.mechanism is not None
        if self.algorithm == "non_private":
            return [
                "mechanism adds noise but algorithm non_private adds none: leave mechanism "
                "out, or choose algorithm laplace, gaussian or sparse"
            ]
        if self.algorithm == "gaussian" and self.calibration == "printed":
            return [
                "calibration printed is the J² noise of Li et al.'s Alg. 2; with a mechanism "
                "the mechanism calibrates the noise: leave calibration out"
            ]
        problem = delta_budget_problem(self.mechanism, self.delta, ("mechanism", "delta"))
        return [problem] if problem else []

    @property
    def spends_delta(self) -> bool:
        """Whether the releases spend δ: the algorithm's own Gaussian, or a mechanism that
        spends δ (``delta`` is then the budget of an example, else unused)."""
        if not self.private:
            return False
        if self.mechanism is None:
            return self.algorithm == "gaussian"
        return bool(spec_class("mechanism", self.mechanism).spends_delta())  # type: ignore[attr-defined]

    @property
    def private(self) -> bool:
        """Whether releases are perturbed (a finite ε and not the non-private baseline)."""
        return self.algorithm != "non_private" and math.isfinite(self.epsilon)

    def alpha(self, t: int) -> float:
        """α_t for t ≥ 1: 1/(λt) or 1/(2√t) (Li et al., Theorem 2)."""
        if self.step == "strongly_convex":
            return 1.0 / (self.strong_convexity * t)
        return 1.0 / (2.0 * math.sqrt(t))
