"""The scenario schema: typed, frozen, validated configuration.

The core sections (``nodes``, ``duration``, ``links``, ``gossip``, ``metrics``) are defined
here; every part a scenario names with ``kind:`` (topology, churn, walk, walk agent, the
entries of ``components``) is validated by the config model of the component registered under
that name (:mod:`netsim.registry`), and the fixed sections of built-in components
(``broadcast``, ``learning``, ``gossip_learning``, ``dola``, ``mi_ogd``) by their components'
models. Every key, unit and default is documented in ``scenarios/README.md``; a test checks
that the two agree. Durations accept ``100ms``, ``1.5s``, ``10min``, ``2h``, ``2d`` (bare
numbers are seconds), sizes ``64B`` / ``1MB``, bandwidths ``100kbit/s``. Relative file paths
are resolved against the scenario file's directory and must exist.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from netsim.algorithms.dpsgd.sgd import LearningConfig
from netsim.algorithms.gossip_learning.application import GossipLearningConfig
from netsim.api import RoundsConfig
from netsim.distributions import Constant, Distribution, PositiveDuration
from netsim.fields import Bandwidth, Name, Probability, resolved_path
from netsim.learning.datasets import BUILTIN, USER_FORMATS
from netsim.learning.online_data import SYNTHETIC
from netsim.network.churn import AlwaysOn
from netsim.protocols.broadcast import BroadcastConfig
from netsim.protocols.gossip import GossipConfig
from netsim.registry import component_field


class StrictModel(BaseModel):
    """Unknown keys are errors; instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


# --- links ---------------------------------------------------------------------------------


class LinkFailureConfig(StrictModel):
    mean_up: PositiveDuration
    mean_down: PositiveDuration


class LinksConfig(StrictModel):
    delay: Distribution = Constant(dist="constant", value=0.0)
    bandwidth: Bandwidth | None = None
    loss: Probability = 0.0
    failure: LinkFailureConfig | None = None


# --- the online learners' sections -----------------------------------------------------------


class StreamDataConfig(StrictModel):
    """What the online learners' data sections share: a file, label column, seed, options."""

    path: Path | None = None
    label: str | int | None = None
    split_seed: int = Field(default=0, ge=0)
    options: dict[str, float] = Field(default_factory=dict)

    @field_validator("path")
    @classmethod
    def _path(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return None if value is None else resolved_path(value, info)


class DolaDataConfig(StreamDataConfig):
    """DOLA's binary data stream: a generator of :mod:`netsim.learning.online_data` or a data
    set of the loader, pre-processed as Li et al. (SPEC §6)."""

    name: Literal[SYNTHETIC + BUILTIN + USER_FORMATS]  # type: ignore[valid-type]
    test_fraction: float | None = Field(default=None, gt=0.0, lt=1.0)


class DolaMixingConfig(StrictModel):
    """How A_t is drawn: each online node talks to ``count`` (if > 0) or a ``fraction`` of its
    online neighbours per round; ``time_invariant`` uses one A on every link instead."""

    fraction: float = Field(default=0.5, gt=0.0, le=1.0)
    count: int = Field(default=0, ge=0)
    time_invariant: bool = False
    window: int = Field(default=10, ge=1)


class DolaSection(RoundsConfig):
    """DOLA (Li et al.): private distributed online learning in synchronous rounds."""

    data: DolaDataConfig
    algorithm: Literal["laplace", "gaussian", "sparse", "non_private"] = "laplace"
    loss: Literal["hinge", "logistic"] = "hinge"
    epsilon: float = 1.0
    delta: float = 1e-5
    calibration: Literal["printed", "analytic"] = "printed"
    batch: int = 1
    step: Literal["strongly_convex", "convex"] = "strongly_convex"
    strong_convexity: float = Field(default=1.0, allow_inf_nan=False)
    regularisation: float = Field(default=0.0, allow_inf_nan=False)
    radius: float = Field(default=1.0, allow_inf_nan=False)
    sparsity: float = Field(default=0.0, allow_inf_nan=False)
    mixing: DolaMixingConfig = DolaMixingConfig()
    regret_node: int = Field(default=0, ge=0)
    regret_checkpoints: int = Field(default=20, ge=0)
    evaluate_every: int = Field(default=10, ge=1)

    @model_validator(mode="after")
    def _runnable(self) -> DolaSection:
        from netsim.algorithms.dola.learner import DolaConfigError, dola_config

        try:
            dola_config(self, rounds=self.rounds or 1)
        except DolaConfigError as exc:
            raise ValueError(str(exc)) from None
        return self


class MiOgdDataConfig(StreamDataConfig):
    """The users' examples: ``synthetic_regression`` or a binary data set as DOLA reads it."""

    name: Literal[("synthetic_regression", *SYNTHETIC, *BUILTIN, *USER_FORMATS)]  # type: ignore[valid-type]


class MiOgdSection(RoundsConfig):
    """MI-private OGD (Zhang & Venkitasubramaniam): a learner node and user nodes."""

    data: MiOgdDataConfig = MiOgdDataConfig(name="synthetic_regression")
    setting: Literal["full", "bandit"] = "full"
    loss: Literal["absolute", "hinge", "logistic"] = "absolute"
    sigma: float = Field(default=1.0, allow_inf_nan=False)
    radius: float = Field(default=1.0, allow_inf_nan=False)
    eta: float | None = None
    smoothing: float | None = None
    learner: int = Field(default=0, ge=0)
    regret_checkpoints: int = Field(default=20, ge=0)

    @model_validator(mode="after")
    def _runnable(self) -> MiOgdSection:
        from netsim.algorithms.mi_ogd.learner import MiOgdConfig, MiOgdConfigError

        try:
            MiOgdConfig(
                dimension=1, rounds=1, setting=self.setting, loss=self.loss, sigma=self.sigma,
                radius=self.radius, eta=self.eta, smoothing=self.smoothing,
            )  # fmt: skip
        except MiOgdConfigError as exc:
            raise ValueError(str(exc)) from None
        if self.setting == "full" and self.smoothing is not None:
            raise ValueError("smoothing δ is for the bandit setting (setting: bandit)")
        if self.loss != "absolute" and self.data.name == "synthetic_regression":
            raise ValueError(
                f"loss {self.loss} needs labels ±1; synthetic_regression has real targets "
                "(use loss absolute, or a binary data set)"
            )
        return self


class MetricsConfig(StrictModel):
    sample_every: PositiveDuration = 60.0


#: Where components named by ``kind`` sit in a scenario, and the slots they may come from.
TopologyField = component_field("topology")
ChurnField = component_field("churn")
WalkField = component_field("walk")
ComponentsField = component_field("application", "learner")


class Scenario(StrictModel):
    """A whole run: network, churn, protocols, metrics."""

    name: Name = "scenario"
    description: str = ""
    seed: int | None = Field(default=None, ge=0, lt=2**63)
    nodes: int = Field(ge=1)
    duration: PositiveDuration
    topology: TopologyField
    links: LinksConfig = LinksConfig()
    churn: ChurnField = AlwaysOn.Config()
    gossip: GossipConfig | None = None
    broadcast: BroadcastConfig | None = None
    walk: WalkField | None = None
    learning: LearningConfig | None = None
    gossip_learning: GossipLearningConfig | None = None
    dola: DolaSection | None = None
    mi_ogd: MiOgdSection | None = None
    components: dict[Name, ComponentsField] = Field(default_factory=dict)
    metrics: MetricsConfig = MetricsConfig()

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        from netsim.scenario.build import scenario_problems

        problem = scenario_problems(self)
        if problem is not None:
            raise ValueError(problem)
        return self
