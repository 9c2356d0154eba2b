"""A scenario is a plan of instances computed once (``netsim/scenario/plan.py``): the sections
are the built-ins' declared shorthands, every section may carry ``uses``, and a component sees
only its config, the run-wide values and the instances it is wired to."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

import netsim.scenario.plan as plan_module
from netsim.component import BuildContext, Section
from netsim.contracts import Component, ComponentConfig, NetworkProtocol
from netsim.errors import ComponentError, ScenarioError
from netsim.registry import REGISTRY, Registry
from netsim.scenario.estimate import estimate_run_size
from netsim.scenario.loader import scenario_hash, scenario_to_data, validate_scenario
from netsim.scenario.runner import run_in_memory
from netsim.scenario.schema import Scenario

BASE: dict[str, Any] = {
    "name": "plan",
    "seed": 3,
    "nodes": 40,
    "duration": "2min",
    "topology": {"kind": "k_out", "k": 5},
    "links": {"delay": {"dist": "constant", "value": "20ms"}},
}
#: A walk whose gossip engine is a ``components`` entry: the scenario has no gossip section.
ENGINE_IN_COMPONENTS: dict[str, Any] = {
    "walk": {"kind": "service", "transfer_time": "100ms", "timeout": "20s",
             "uses": {"gossip": "fast"}},
    "components": {"fast": {"kind": "gossip", "period": "2s"}},
}  # fmt: skip


def scenario(**sections: Any) -> Any:
    return validate_scenario({**BASE, **sections}, source="test", base_dir=None)


def problem(**sections: Any) -> str:
    with pytest.raises(ScenarioError) as caught:
        scenario(**sections)
    return str(caught.value)


def test_the_top_level_keys_are_the_core_keys_and_the_declared_sections():
    sections = list(REGISTRY.sections())
    assert sections == [
        "topology", "links", "churn", "privacy", "learning", "gossip", "broadcast",
        "walk", "gossip_learning", "dola", "mi_ogd", "muffliato", "dsgd",
    ]  # fmt: skip
    core = ["name", "description", "seed", "nodes", "duration"]
    assert list(Scenario.model_fields) == [*core, *sections, "components", "metrics"]
    for key, entry in REGISTRY.sections().items():  # each after what it names
        assert all(sections.index(name) < sections.index(key) for name in entry.section.after)


class _FirstLinks(Component):
    section = Section("links")


class _SecondLinks(Component):
    section = Section("links")


def test_two_built_ins_declaring_one_section_is_an_error():
    registry = Registry(
        (f"a = {__name__}:_FirstLinks", f"b = {__name__}:_SecondLinks"), entry_point_group=None
    )
    with pytest.raises(ComponentError, match="the section 'links' is declared by both"):
        registry.sections()


def test_the_plan_is_computed_once_per_run(monkeypatch):
    calls: list[str] = []
    original = plan_module.plan_scenario

    def counting(scenario: Any) -> Any:
        calls.append(scenario.name)
        return original(scenario)

    monkeypatch.setattr(plan_module, "plan_scenario", counting)
    import netsim.scenario.schema as schema

    monkeypatch.setattr(schema, "plan_scenario", counting)
    wired = scenario(gossip={"period": "1s"}, walk={"kind": "ideal"})
    assert calls == ["plan"]
    run_in_memory(wired)
    assert calls == ["plan"]  # the build, the runner and the tables read wired.plan


def test_a_walk_section_wired_to_an_engine_in_components_runs():
    wired = scenario(**ENGINE_IN_COMPONENTS)
    assert wired.gossip is None
    walk = wired.plan.part("walk")
    assert walk.uses["gossip"] == "components.fast"
    built, tables = run_in_memory(wired)
    assert built["walk"].gossip is built["components.fast"]
    assert tables["walk_steps"].shape[0] > 0
    # the run-size estimate counts that engine's exact-mode messages: 2 per node per period
    assert estimate_run_size(wired).exact_gossip_messages == pytest.approx(2 * 40 * 120 / 2)


def test_a_sections_uses_is_kept_apart_and_round_trips():
    wired = scenario(**ENGINE_IN_COMPONENTS)
    assert wired.wiring == {"walk": {"gossip": "fast"}}
    assert "uses" not in type(wired.walk).model_fields
    data = scenario_to_data(wired)
    assert data["walk"]["uses"] == {"gossip": "fast"}
    again = validate_scenario(data, source="again", base_dir=None)
    assert again.wiring == wired.wiring and scenario_hash(again) == scenario_hash(wired)
    plain = {"kind": "service", "transfer_time": "100ms", "timeout": "20s"}
    unwired = scenario(walk=plain, gossip={"period": "2s"})
    by_name = scenario(walk={**plain, "uses": {"gossip": "gossip"}}, gossip={"period": "2s"})
    assert scenario_hash(by_name) != scenario_hash(unwired)  # written wiring is configuration
    assert by_name.plan.part("walk").uses == unwired.plan.part("walk").uses


def test_a_sections_uses_names_only_its_roles_and_other_instances():
    walk = {"kind": "service", "transfer_time": "100ms", "timeout": "20s"}
    assert problem(walk={**walk, "uses": {"dola": "x"}}, gossip={"period": "1s"}).endswith(
        "walk.uses.dola: walk (kind service) has no such role; its roles: gossip, privacy, "
        "transport"
    )
    assert "walk.uses.gossip: no other instance is named 'nowhere'" in problem(
        walk={**walk, "uses": {"gossip": "nowhere"}}
    )
    assert "walk.uses.gossip: links is a transport, not a gossip engine" in problem(
        walk={**walk, "uses": {"gossip": "links"}}, gossip={"period": "1s"}
    )
    assert "churn.uses: the churn section builds the network" in problem(
        churn={"kind": "always_on", "uses": {"transport": "links"}}
    )


class Peeker(NetworkProtocol):
    """Looks for instances it did not declare, and records what its check saw."""

    seen: ClassVar[dict[str, Any]] = {}
    optional: ClassVar[dict[str, str]] = {"gossip": "to read its period"}

    class Config(ComponentConfig):
        pass

    @classmethod
    def check(cls, config: Any, ctx: BuildContext) -> None:
        cls.seen.update(
            scenario=hasattr(ctx, "scenario"), nodes=ctx.nodes, duration=ctx.duration,
            gossip=ctx.config_of("gossip"), walk=ctx.config_of("walk"), configs=set(ctx.configs),
        )  # fmt: skip

    def __init__(self, config: Any, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.found = {role: ctx.find(role) for role in ("gossip", "walk", "links")}

    def start(self) -> None:
        return None


def test_a_component_sees_only_what_it_is_wired_to():
    Peeker.seen.clear()
    wired = scenario(
        gossip={"period": "3s"}, walk={"kind": "ideal"},
        components={"peek": {"kind": f"{__name__}:Peeker"}},
    )  # fmt: skip
    seen = Peeker.seen
    assert seen["scenario"] is False
    assert (seen["nodes"], seen["duration"]) == (40, 120.0)
    assert seen["gossip"].period == 3.0 and seen["walk"] is None  # walk: not one of its roles
    assert seen["configs"] == {"gossip", "links"}
    built, _ = run_in_memory(wired)
    found = built["components.peek"].found
    assert found["gossip"] is built["gossip"] and found["walk"] is None
    assert found["links"] is None  # its transport is reached as the role "transport"
    assert not hasattr(built["components.peek"].ctx, "scenario")


def test_isolated_nodes_are_warned_of_whichever_instance_gossips():
    """The warning follows the plan's gossip engines, not the gossip section alone."""
    sparse = {"kind": "erdos_renyi", "p": 0.02}
    wired = scenario(
        topology=sparse, broadcast={"interval": "1min", "uses": {"gossip": "fast"}},
        components={"fast": {"kind": "gossip", "period": "2s"}},
    )  # fmt: skip
    assert wired.gossip is None
    built, _ = run_in_memory(wired)
    assert any("have no neighbour and cannot gossip" in w for w in built.warnings)
    quiet, _ = run_in_memory(scenario(topology=sparse))
    assert not any("cannot gossip" in w for w in quiet.warnings)


def test_a_copy_that_changes_a_section_is_planned_again():
    wired = scenario(gossip={"period": "1s"}, walk={"kind": "ideal"})
    assert wired.model_copy(update={"seed": 9}).plan is wired.plan  # the seed plans nothing
    slower = wired.model_copy(update={"gossip": wired.gossip.model_copy(update={"period": 4.0})})
    assert slower.plan.part("gossip").config.period == 4.0
    assert wired.plan.part("gossip").config.period == 1.0


def test_a_section_with_a_uses_key_of_its_own_keeps_it():
    """``mi_ogd.uses`` is how many reports an example may feed: not wiring."""
    mi_ogd = {"learner": 0, "rounds": 10, "uses": 2, "mechanism": "l1", "epsilon": 1.0, "eta": 0.05}
    planned = scenario(mi_ogd=mi_ogd)
    assert planned.mi_ogd.uses == 2 and planned.wiring == {}


class _Probe(NetworkProtocol):
    """Records the context it is built with."""

    requires: ClassVar[dict[str, str]] = {"gossip": "to see what it is wired to"}
    contexts: ClassVar[list[BuildContext]] = []

    def __init__(self, config: ComponentConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        _Probe.contexts.append(ctx)

    def start(self) -> None:
        return None


def test_a_context_holds_only_the_instances_it_is_wired_to():
    wired = scenario(
        gossip={"period": "1s"},
        walk={"kind": "service", "transfer_time": "1s", "timeout": "10s"},
        components={"probe": {"kind": f"{__name__}:_Probe"}},
    )
    _Probe.contexts.clear()
    built, _ = run_in_memory(wired)
    (ctx,) = _Probe.contexts
    assert ctx.require("gossip") is built.components["gossip"]
    assert ctx.find("walk") is None  # not one of its roles
    assert not hasattr(ctx, "built")  # the instances built so far are not handed over
    held = [
        item
        for value in vars(ctx).values()
        if isinstance(value, dict)
        for item in value.values()
        if isinstance(item, Component)
    ]
    # its roles: gossip and its transport (links); not the walk, its agent, the sampler
    assert {id(item) for item in held} == {id(built.components[k]) for k in ("gossip", "links")}
