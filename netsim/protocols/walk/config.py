"""The walk sections' configs and presets: the service's (:class:`WalkServiceConfig`), the
rules a preset selects (:class:`WalkVariant`; ``paper``: Hegedűs et al. 2016 Alg. 2 as
written, ``authors``: their published implementation, ``docs/walk-variants.md``) and the
ideal walk's (:class:`IdealWalkConfig`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from netsim.contracts import BuildContext, ComponentConfig
from netsim.distributions import Duration, PositiveDuration
from netsim.errors import ScenarioError
from netsim.fields import Probability
from netsim.protocols.walk.agents import VisitCounter
from netsim.registry import component_field

#: The walk agent of a walk section (the visit counter when none is named).
AgentField = component_field("walk_agent")


class WalkServiceConfig(ComponentConfig):
    """The single random walk service (Hegedűs et al. Alg. 2) over the simulated network."""

    kind: Literal["service"] = "service"
    transfer_time: PositiveDuration
    timeout: PositiveDuration
    kill_probability: Probability = 0.0
    start: Duration = 0.0
    retry_interval: PositiveDuration | None = None
    sample_every: PositiveDuration | None = None
    agent: AgentField = VisitCounter.Config()
    preset: Literal["paper", "authors"] = "paper"
    replace_rule: Literal["paper", "authors"] | None = None
    #: At most 10⁹ s (32 years): the error is of the order of a gossip period, and past
    #: about 10¹⁶ s adding δ to an age no longer changes it in floating point, so the
    #: timeouts of one instant repeat without end (1e17 hung the run).
    age_error: Duration | None = Field(default=None, le=1e9)
    bootstrap_update: bool | None = None
    cycle: Literal["netsim", "authors"] | None = None

    def variant(self, gossip_period: float) -> WalkVariant:
        """The protocol rules this section asks for: each option as given, else its preset's
        value (``paper``: Alg. 2 as written, exact ages; ``authors``: the authors' published
        implementation, with an age error of width Δ = ``gossip_period``)."""
        authors = self.preset == "authors"
        return WalkVariant(
            replace_rule=self.replace_rule or self.preset,
            age_error=(
                self.age_error
                if self.age_error is not None
                else (gossip_period if authors else 0.0)
            ),
            bootstrap_update=(
                self.bootstrap_update if self.bootstrap_update is not None else not authors
            ),
            cycle=self.cycle or "netsim",
        )

    @model_validator(mode="before")
    @classmethod
    def _authors_preset_runs_the_authors_cycle(cls, data: Any) -> Any:
        """``preset: authors`` runs the authors' cycle unless ``cycle`` says otherwise. The
        choice is written into the resolved scenario, so a run's id tells which rules made it
        (runs of the preset from before the cycle existed resolve to new ids)."""
        if isinstance(data, Mapping) and data.get("preset") == "authors":
            if data.get("cycle") is None:
                data = {**data, "cycle": "authors"}
        return data

    @model_validator(mode="after")
    def _timeout_covers_a_transfer(self) -> WalkServiceConfig:
        if self.timeout < self.transfer_time:
            raise ValueError(
                f"timeout δ ({self.timeout:g} s) must be at least transfer_time δ_rw "
                f"({self.transfer_time:g} s): an update is not overwritten for δ_rw on average "
                "(Hegedűs et al. §5.2)"
            )
        return self


@dataclass(frozen=True)
class WalkVariant:
    """The three rules where the paper (Hegedűs et al. 2016) and its authors' published
    implementation differ (see ``docs/walk-variants.md``).

    - ``replace_rule``: ``paper`` is Alg. 2 line 14 with §4.4's accept-once by id;
      ``authors`` accepts an update it already holds again and lets an equal step count take
      line 14's "more steps" branch.
    - ``age_error``: width w of the error U[−w/2, +w/2] added to an update's age each time a
      node adopts it (§4.1: measured ages carry "some error"); 0 = exact ages.
    - ``bootstrap_update``: the starter broadcasts an update with step count 0 (§4.4); without
      it, nobody times out until the first walk's first step creates an update.
    - ``cycle``: ``authors`` runs the walk as the authors' code runs it (C1–C7 of
      ``docs/walk-variants.md``; the default of ``preset: authors``). Gossip: each node's
      cycle checks its timeout before its exchange, with one counter per node; pushes go into
      the peer's buffer; every merge (of its own buffer too) draws the age error; the same
      update is taken back when merged two times fewer; rounds mode runs the nodes in index
      order, exact mode each node's cycle at its own tick, both without link time. Walks: a
      walk is kept as the local copy only when it is forwarded, and an update made from the
      local copy carries the copy's id; a restarted walk forces its restart id for its whole
      life; only the walk that made a node's update keeps it from restarting; a walk is held
      for δ_rw and handed over if its target is then online, else held again; a node back
      online runs its cycle, pulls, and resends the walks it parked. Its merges are the
      authors' own (``replace_rule`` does not apply to them); ``age_error`` is their error's
      width.
    """

    replace_rule: Literal["paper", "authors"] = "paper"
    age_error: float = 0.0
    bootstrap_update: bool = True
    cycle: Literal["netsim", "authors"] = "netsim"


#: The rules of the ``paper`` preset: Alg. 2 as written, exact ages.
PAPER_RULES = WalkVariant()


class IdealWalkConfig(ComponentConfig):
    """A walk that never fails: the next node uniformly, with or without replacement, or a
    neighbour on the topology (uniformly, or by Metropolis–Hastings weights)."""

    kind: Literal["ideal"] = "ideal"
    sampling: Literal["with_replacement", "without_replacement", "neighbour", "metropolis"] = (
        "with_replacement"
    )
    step_time: PositiveDuration = 1.0
    sample_every: PositiveDuration | None = None
    agent: AgentField = VisitCounter.Config()


def service_config_of(arguments: Mapping[str, Any], variant: WalkVariant) -> WalkServiceConfig:
    """The config of a walk service made in code, not from a scenario: its constructor's
    ``arguments`` (transfer time, timeout, start, kill probability, retry interval, sample
    interval) and the rules of ``variant``, unvalidated (the constructor's values are used
    as given)."""
    return WalkServiceConfig.model_construct(
        **arguments,
        replace_rule=variant.replace_rule,
        age_error=variant.age_error,
        bootstrap_update=variant.bootstrap_update,
        cycle=variant.cycle,
    )


def check_cycle_engine(config: WalkServiceConfig, gossip: object, built_in: bool) -> None:
    """The authors' cycle runs on the built-in gossip engine's ticks (``built_in``): refuse
    ``walk.cycle: authors`` on any other engine."""
    if config.cycle == "authors" and not built_in:
        raise ScenarioError(
            "walk.cycle: authors (the default of walk.preset: authors) runs the authors' "
            f"cycle on the built-in gossip engine's ticks; the gossip section names "
            f"{type(gossip).__name__}: use the built-in engine, or walk.cycle: netsim"
        )


def check_service_inputs(config: WalkServiceConfig, ctx: BuildContext) -> None:
    """Reject a topology the walk cannot cross; warn about a timeout shorter than the
    time its updates need to spread (Hegedűs et al. 2016 §5.2: δ ≥ δ_rw + 10Δ)."""
    assert ctx.topology is not None
    lonely = np.flatnonzero(ctx.topology.degrees() == 0)
    if lonely.size:
        raise ScenarioError(
            f"walk: {lonely.size} node(s) (e.g. node {lonely[0]}) have no neighbour in the "
            "topology; a walk reaching them could never be forwarded"
        )
    # the engine it is wired to (a components entry, or the gossip section), not the
    # section by name: every engine's config has a period (netsim.registry checks it)
    gossip = ctx.config_of("gossip")
    if gossip is None:
        raise ScenarioError(f"{ctx.key} needs a gossip engine: a gossip section, or uses")
    if config.cycle == "authors":
        if ctx.network is not None and ctx.network.lossy:
            raise ScenarioError(
                "walk.cycle: authors (the default of walk.preset: authors) models the "
                "authors' code, whose gossip loses nothing: links.loss must be 0 and "
                "links.failure absent, or set walk.cycle: netsim for netsim's own cycle"
            )
    spread = config.transfer_time + gossip.period * math.log2(max(ctx.nodes, 2))
    if config.timeout < spread:
        engine = ctx.uses.get("gossip", "gossip")
        ctx.warn(
            f"timeout δ = {config.timeout:g} s is less than transfer_time + {engine}.period "
            f"× log2(nodes) = {spread:g} s; updates may time out before the gossip spreads "
            "them, so expect many restarts (the paper's smallest δ is δ_rw + 10Δ)"
        )
