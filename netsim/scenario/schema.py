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

from typing import Any, Literal

from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from netsim.algorithms.dola.config import DolaConfig
from netsim.algorithms.dpsgd.sgd import LearningConfig
from netsim.algorithms.gossip_learning.application import GossipLearningConfig
from netsim.algorithms.mi_ogd.config import MiOgdConfig
from netsim.distributions import PositiveDuration
from netsim.fields import CheckedModel, Name
from netsim.network.churn import AlwaysOn
from netsim.network.links import LinkFailureConfig, LinksConfig
from netsim.protocols.broadcast import BroadcastConfig
from netsim.protocols.gossip import GossipConfig
from netsim.registry import component_field, section_field
from netsim.scenario.build import INSTANCE_SLOTS

__all__ = ["LinkFailureConfig", "LinksConfig", "MetricsConfig", "Scenario", "StrictModel"]


class StrictModel(CheckedModel):
    """A scenario section (see :class:`~netsim.fields.CheckedModel`)."""

    model_config = ConfigDict(populate_by_name=True)


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
ComponentsField = component_field(*INSTANCE_SLOTS)
#: The ``links`` and ``gossip`` sections: the built-in transport and gossip engine, or with a
#: ``kind`` key any component of their slot.
LinksField = section_field("transport", LinksConfig)
GossipField = section_field("gossip", GossipConfig)
#: The key of a ``components`` entry that wires it to other instances (role → instance name).
USES = "uses"


class Scenario(StrictModel):
    """A whole run: network, churn, protocols, metrics.

    Every part of a run is a named component instance: the fixed sections (``links``,
    ``gossip``, ``walk``, ``dola``, …) are instances named by their section, and
    ``components`` holds more, each by its own name. An entry of ``components`` may wire
    itself to chosen instances with ``uses`` (role → instance name, e.g. ``{gossip:
    fast_gossip}``); a role it does not wire is filled by the section of that name. The
    wiring is kept apart from the entry's settings (:attr:`wiring`)."""

    name: Name = "scenario"
    description: str = ""
    seed: int | None = Field(default=None, ge=0, lt=2**63)
    nodes: int = Field(ge=1)
    duration: PositiveDuration
    topology: TopologyField
    links: LinksField = LinksConfig()
    churn: ChurnField = AlwaysOn.Config()
    gossip: GossipField | None = None
    broadcast: BroadcastConfig | None = None
    walk: WalkField | None = None
    learning: LearningConfig | None = None
    gossip_learning: GossipLearningConfig | None = None
    dola: DolaConfig | None = None
    mi_ogd: MiOgdConfig | None = None
    components: dict[Name, ComponentsField] = Field(default_factory=dict)
    metrics: MetricsConfig = MetricsConfig()
    _wiring: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def wiring(self) -> dict[str, Any]:
        """The ``uses`` of each ``components`` entry that has one, by entry name, as written
        (checked with the rest of the scenario by :func:`~netsim.scenario.build.wiring`)."""
        return self._wiring

    @model_validator(mode="wrap")
    @classmethod
    def _wired_and_consistent(cls, data: Any, handler: Any) -> Scenario:
        wiring: dict[str, Any] = {}
        if isinstance(data, dict) and isinstance(data.get("components"), dict):
            entries = {}
            for name, entry in data["components"].items():
                if isinstance(entry, dict) and USES in entry:
                    entry = dict(entry)
                    wiring[name] = entry.pop(USES)
                entries[name] = entry
            data = {**data, "components": entries}
        scenario = handler(data)
        if wiring:
            scenario._wiring = wiring
        from netsim.scenario.build import scenario_problems

        problem = scenario_problems(scenario)
        if problem is not None:
            raise ValueError(problem)
        return scenario
