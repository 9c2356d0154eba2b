"""DP-SGD on a random walk (Hegedűs, Berta, Jelasity 2016 §3): the ``sgd`` walk agent, whose
walk carries a model trained at every node it visits by the ``learning`` section
(:class:`~netsim.learning.sgd_agent.SGDAgent`, eq. 8 in :mod:`netsim.learning.private_sgd`,
where the choices the paper leaves open are listed).

The ``learning`` section is a building block shared with gossip learning, so it lives in
:mod:`netsim.learning`; its names are importable from here as well, as they were before (run
manifests and plugins name ``netsim.algorithms.dpsgd.sgd:SGDAgent``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from netsim.contracts import BuildContext, ComponentConfig, ExactRun, ExactSupport, WalkAgent

# The names this module held before the learning section moved to netsim.learning, importable
# from here as before (``X as X``: re-exported, and documented where they live).
from netsim.learning.private_sgd import PrivacyUnit as PrivacyUnit
from netsim.learning.private_sgd import PrivateSGD as PrivateSGD
from netsim.learning.private_sgd import non_finite_explanation as non_finite_explanation
from netsim.learning.sgd_agent import ACCURACY_FIGURE as ACCURACY_FIGURE
from netsim.learning.sgd_agent import ACCURACY_TABLE as ACCURACY_TABLE
from netsim.learning.sgd_agent import LEARNING_BASELINES as LEARNING_BASELINES
from netsim.learning.sgd_agent import SUMMARY_TABLE as SUMMARY_TABLE
from netsim.learning.sgd_agent import VISITS_TABLE as VISITS_TABLE
from netsim.learning.sgd_agent import DatasetConfig as DatasetConfig
from netsim.learning.sgd_agent import LearningConfig as LearningConfig
from netsim.learning.sgd_agent import SGDAgent
from netsim.learning.sgd_agent import baseline_text as baseline_text
from netsim.learning.sgd_agent import central_dp_accuracy as central_dp_accuracy
from netsim.learning.sgd_agent import learning_data as learning_data
from netsim.learning.sgd_agent import mechanism as mechanism
from netsim.learning.state import ModelState


class SGDWalkAgent(WalkAgent):
    """The walk carries a model trained by (private) SGD as configured in ``learning``."""

    class Config(ComponentConfig):
        kind: Literal["sgd"] = "sgd"

    requires = {"learning": "data set, model, privacy budget"}  # noqa: RUF012

    def __init__(self, config: Config, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.learner: SGDAgent = ctx.require("learning")

    def exact_support(self, run: ExactRun) -> ExactSupport:
        """Beside the compiled core: the walk's steps stay Python's with this agent (its visit
        is the learning section's), and it has no events of its own."""
        return ExactSupport(True, role="beside")

    def initial_state(self) -> ModelState:
        return self.learner.initial_state()

    def visit(self, node: int, state: ModelState, steps: int, walk: int, now: float) -> ModelState:
        return self.learner.visit(node, state, steps, walk, now)

    def received(self, node: int, state: ModelState) -> None:
        self.learner.received(node, state)

    def continues(self, node: int, state: ModelState, carried: bool) -> bool:
        return self.learner.continues(node, state, carried)

    def walks_by(self, transition: Any) -> None:
        self.learner.walks_by(transition)

    def resimulated_by(self, paths: Callable[..., Any]) -> None:
        self.learner.resimulated_by(paths)
