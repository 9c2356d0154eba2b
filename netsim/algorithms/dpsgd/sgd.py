"""DP-SGD on a random walk (Hegedűs, Berta, Jelasity 2016 §3): the ``sgd`` walk agent, whose
walk carries a model trained at every node it visits by the ``learning`` section
(:class:`~netsim.learning.sgd_agent.SGDAgent`, eq. 8 in :mod:`netsim.learning.private_sgd`,
where the choices the paper leaves open are listed).

The ``learning`` section is a building block shared with gossip learning, so it lives in
:mod:`netsim.learning`; its names are importable from here as well, as they were before (run
manifests and plugins name ``netsim.algorithms.dpsgd.sgd:SGDAgent``).
"""

from __future__ import annotations

from typing import Literal

from netsim.contracts import BuildContext, ComponentConfig, WalkAgent
from netsim.learning.private_sgd import PrivacyUnit, PrivateSGD, non_finite_explanation
from netsim.learning.sgd_agent import (
    ACCURACY_FIGURE,
    ACCURACY_TABLE,
    LEARNING_BASELINES,
    SUMMARY_TABLE,
    VISITS_TABLE,
    DatasetConfig,
    LearningConfig,
    SGDAgent,
    baseline_text,
    central_dp_accuracy,
    learning_data,
    mechanism,
)
from netsim.learning.state import ModelState

__all__ = [
    "ACCURACY_FIGURE",
    "ACCURACY_TABLE",
    "LEARNING_BASELINES",
    "SUMMARY_TABLE",
    "VISITS_TABLE",
    "DatasetConfig",
    "LearningConfig",
    "ModelState",
    "PrivacyUnit",
    "PrivateSGD",
    "SGDAgent",
    "SGDWalkAgent",
    "baseline_text",
    "central_dp_accuracy",
    "learning_data",
    "mechanism",
    "non_finite_explanation",
]


class SGDWalkAgent(WalkAgent):
    """The walk carries a model trained by (private) SGD as configured in ``learning``."""

    class Config(ComponentConfig):
        kind: Literal["sgd"] = "sgd"

    requires = {"learning": "data set, model, privacy budget"}  # noqa: RUF012

    def __init__(self, config: Config, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.learner: SGDAgent = ctx.require("learning")

    def initial_state(self) -> ModelState:
        return self.learner.initial_state()

    def visit(self, node: int, state: ModelState, steps: int, walk: int, now: float) -> ModelState:
        return self.learner.visit(node, state, steps, walk, now)
