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

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from netsim.algorithms.dola.config import DolaConfig
from netsim.algorithms.dpsgd.sgd import LearningConfig
from netsim.algorithms.gossip_learning.application import GossipLearningConfig
from netsim.algorithms.mi_ogd.config import MiOgdConfig
from netsim.distributions import Constant, Distribution, PositiveDuration
from netsim.fields import Bandwidth, CheckedModel, Name, Probability
from netsim.network.churn import AlwaysOn
from netsim.protocols.broadcast import BroadcastConfig
from netsim.protocols.gossip import GossipConfig
from netsim.registry import component_field


class StrictModel(CheckedModel):
    """A scenario section (see :class:`~netsim.fields.CheckedModel`)."""

    model_config = ConfigDict(populate_by_name=True)


# --- links ---------------------------------------------------------------------------------


class LinkFailureConfig(StrictModel):
    mean_up: PositiveDuration
    mean_down: PositiveDuration


class LinksConfig(StrictModel):
    delay: Distribution = Constant(dist="constant", value=0.0)
    bandwidth: Bandwidth | None = None
    loss: Probability = 0.0
    failure: LinkFailureConfig | None = None


class MetricsConfig(StrictModel):
    sample_every: PositiveDuration = 60.0
    # one privacy_ledger row per charge, or per-record totals only (privacy_records)
    privacy_ledger: Literal["charges", "totals"] = "charges"
    # tables to keep no rows of (high-rate tables of long runs, e.g. walk_steps)
    omit_tables: tuple[str, ...] = ()


#: Where components named by ``kind`` sit in a scenario, and the slots they may come from.
TopologyField = component_field("topology")
ChurnField = component_field("churn")
WalkField = component_field("walk")
ComponentsField = component_field("application", "protocol", "learner")


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
    dola: DolaConfig | None = None
    mi_ogd: MiOgdConfig | None = None
    components: dict[Name, ComponentsField] = Field(default_factory=dict)
    metrics: MetricsConfig = MetricsConfig()

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        from netsim.scenario.build import scenario_problems

        problem = scenario_problems(self)
        if problem is not None:
            raise ValueError(problem)
        return self
