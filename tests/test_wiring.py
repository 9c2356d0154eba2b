"""A scenario as named component instances wired by name: the transport,
the gossip engine and the observers are instances like the others, a scenario may hold several
of a kind, ``uses`` wires an instance to chosen ones, and every message goes through a
transport. Scenarios written before all this keep their run ids and tables."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import pandas as pd
import pytest

from netsim.component import ComponentConfig
from netsim.contracts import Component, NetworkProtocol, Transport
from netsim.errors import ComponentError, ScenarioError
from netsim.protocols.gossip import PushPullGossip
from netsim.registry import REGISTRY, Registry
from netsim.scenario.build import check_inputs
from netsim.scenario.loader import scenario_hash, scenario_to_yaml, validate_scenario
from netsim.scenario.runner import run_in_memory, run_scenario
from netsim.scenario.yamlfile import load_yaml

BASE: dict[str, Any] = {
    "name": "wiring",
    "seed": 5,
    "nodes": 60,
    "duration": "10min",
    "topology": {"kind": "k_out", "k": 6},
    "churn": {
        "kind": "synthetic",
        "online": {"dist": "exponential", "mean": "5min"},
        "offline": {"dist": "exponential", "mean": "1min"},
    },
    "links": {"delay": {"dist": "uniform", "low": "10ms", "high": "50ms"}, "loss": 0.01},
    "gossip": {"period": "1s"},
    "walk": {"kind": "service", "transfer_time": "100ms", "timeout": "20s"},
}
#: A second walk on its own gossip engine and its own transport, observed by its own sampler.
SECOND_WALK: dict[str, Any] = {
    "lan": {"kind": "links", "delay": {"dist": "constant", "value": "5ms"}, "loss": 0.02},
    "slow_gossip": {"kind": "gossip", "period": "5s", "uses": {"transport": "lan"}},
    "second_walk": {
        "kind": "service",
        "transfer_time": "50ms",
        "timeout": "1min",
        "uses": {"gossip": "slow_gossip", "transport": "lan"},
    },
    "lan_samples": {
        "kind": "samples",
        "every": "2min",
        "uses": {"gossip": "slow_gossip", "transport": "lan"},
    },
}


def scenario(**sections: Any) -> Any:
    return validate_scenario({**BASE, **sections}, source="test", base_dir=None)


def problem(**sections: Any) -> str:
    with pytest.raises(ScenarioError) as caught:
        scenario(**sections)
    return str(caught.value)


@pytest.fixture(scope="module")
def two_walks() -> tuple[Any, dict[str, pd.DataFrame]]:
    return run_in_memory(scenario(components=SECOND_WALK))


@pytest.fixture(scope="module")
def one_walk() -> dict[str, pd.DataFrame]:
    return run_in_memory(scenario())[1]


def test_the_fixed_sections_are_instances_wired_by_default():
    parts = {part.key: part for part in scenario().plan.parts}
    assert list(parts) == ["links", "gossip", "walk.agent", "walk", "samples"]
    assert parts["links"].cls.slot == "transport" and parts["gossip"].cls.slot == "gossip"
    assert parts["samples"].cls.slot == "observer"
    assert dict(parts["walk"].uses) == {
        "gossip": "gossip", "transport": "links", "walk.agent": "walk.agent",
    }  # fmt: skip
    assert dict(parts["samples"].uses) == {"gossip": "gossip", "transport": "links"}


def test_a_second_walk_on_its_own_engine_and_transport_runs_beside_the_first(two_walks):
    built, tables = two_walks
    walk, second = built["walk"], built["components.second_walk"]
    assert walk is not second
    assert built["components.slow_gossip"] is not built["gossip"]
    # each instance is wired to what its uses names
    assert second.network is built["components.lan"] and walk.network is built["links"]
    assert built["components.slow_gossip"].period == 5.0
    # the second walk's tables carry its name; both walks moved
    assert len(tables["walk_steps"]) > 0 and len(tables["second_walk.walk_steps"]) > 0
    assert "second_walk.walk_summary" in tables and "lan.messages_lost" in tables
    # its sampler counts the second transport's messages, not the first's
    lan, first = tables["lan_samples.samples"], tables["samples"]
    assert list(lan["time"]) == [0.0, 120.0, 240.0, 360.0, 480.0, 600.0]
    assert lan["messages_sent"].iloc[-1] == built["components.lan"].sent > 0
    assert first["messages_sent"].iloc[-1] == built["links"].sent
    assert lan["gossip_exchanges"].iloc[-1] == built["components.slow_gossip"].exchanges


def test_adding_an_instance_on_its_own_transport_changes_no_other_table(two_walks, one_walk):
    # every instance draws from its own streams and sends through its own transport, so the
    # first walk, its gossip, the first transport's losses and the samples are as without
    _, tables = two_walks
    assert set(one_walk) < set(tables)
    for name, frame in one_walk.items():
        pd.testing.assert_frame_equal(frame, tables[name], check_exact=True, obj=name)


def test_two_broadcasts_share_one_gossip_engine():
    components = {"rumour": {"kind": "broadcast", "interval": "1min", "start": "30s"}}
    built, tables = run_in_memory(
        scenario(broadcast={"interval": "2min"}, components=components, walk=None)
    )
    assert built["gossip"].rules == [built["broadcast"], built["components.rumour"]]
    first, second = tables["broadcasts"], tables["rumour.broadcasts"]
    assert len(first) and len(second)
    assert first["start"].iloc[0] == 0.0 and second["start"].iloc[0] == 30.0


def test_wiring_round_trips_through_the_resolved_scenario_and_keeps_run_ids(tmp_path):
    wired = scenario(components=SECOND_WALK)
    again = validate_scenario(load_yaml(scenario_to_yaml(wired)), source="resolved", base_dir=None)
    assert again.wiring == wired.wiring and scenario_hash(again) == scenario_hash(wired)
    # uses is part of the run's identity
    rewired = {**SECOND_WALK, "lan_samples": {**SECOND_WALK["lan_samples"], "uses": {}}}
    assert scenario_hash(scenario(components=rewired)) != scenario_hash(wired)
    # the built-in transport and gossip engine named by kind are the sections without kind
    plain = scenario()
    named = scenario(
        links={**BASE["links"], "kind": "links"}, gossip={**BASE["gossip"], "kind": "gossip"}
    )
    assert scenario_hash(named) == scenario_hash(plain)
    result = run_scenario(named, out=tmp_path)
    assert result.run_id == f"wiring-seed5-{scenario_hash(plain)[:10]}"
    assert result.manifest["components"]["links"] == "netsim.network.links:Network"


@pytest.mark.parametrize(
    ("uses", "message"),
    [
        ({"gossip": "nowhere"}, "components.second_walk.uses.gossip: no other instance is named "
         "'nowhere'; the instances: gossip, lan, lan_samples, links, samples, second_walk, "
         "slow_gossip, walk"),
        ({"gosip": "slow_gossip"}, "components.second_walk.uses.gosip: components.second_walk "
         "(kind service) has no such role; its roles: gossip, privacy, transport"),
        ({"gossip": "lan"}, "components.second_walk.uses.gossip: components.lan (kind links) is "
         "a transport, not a gossip engine"),
        ({"transport": "slow_gossip"}, "components.second_walk.uses.transport: "
         "components.slow_gossip (kind gossip) is a gossip engine, not a transport"),
        ("lan", "components.second_walk.uses: a mapping of role to instance name"),
    ],
)  # fmt: skip
def test_wiring_that_cannot_be_honoured_is_a_validation_error_naming_the_key(uses, message):
    components = {**SECOND_WALK, "second_walk": {**SECOND_WALK["second_walk"], "uses": uses}}
    assert message in problem(components=components)


def test_a_name_of_both_a_section_and_an_entry_is_refused_when_wired():
    components = {
        "gossip": {"kind": "gossip", "period": "5s"},
        "w": {"kind": "broadcast", "interval": "1min", "uses": {"gossip": "gossip"}},
    }
    assert "names both the gossip section and the components entry 'gossip'" in problem(
        components=components
    )


class NeedsA(NetworkProtocol):
    """A protocol that uses another instance in the role ``peer`` (a plugin's own role)."""

    requires: ClassVar[dict[str, str]] = {"peer": "it reads its peer's state"}  # type: ignore[assignment]

    def __init__(self, config: Any, ctx: Any) -> None:
        super().__init__(config, ctx)
        self.peer = ctx.require("peer") if ctx.sim is not None else None

    def start(self) -> None:
        return None


def test_instances_are_built_after_what_they_use_and_circles_are_refused():
    ref = f"{__name__}:NeedsA"
    later = {"a": {"kind": ref, "uses": {"peer": "b"}}, "b": {"kind": ref, "uses": {"peer": "c"}},
             "c": {"kind": "broadcast", "interval": "1min"}}  # fmt: skip
    keys = [part.key for part in scenario(components=later).plan.parts]
    assert keys.index("components.c") < keys.index("components.b") < keys.index("components.a")
    built, _ = run_in_memory(scenario(components=later))
    assert built["components.a"].peer is built["components.b"]
    circle = {"a": {"kind": ref, "uses": {"peer": "b"}}, "b": {"kind": ref, "uses": {"peer": "a"}}}
    assert "is circular" in problem(components=circle)
    assert "components.a (kind " in problem(components={"a": {"kind": ref}})  # no peer section


def test_a_walk_agent_travels_with_its_walk_and_its_uses():
    components = {"w2": {"kind": "ideal", "agent": {"kind": "visit_counter"}}}
    parts = {part.key: part for part in scenario(components=components).plan.parts}
    assert parts["components.w2"].uses["walk.agent"] == "components.w2.agent"
    assert parts["components.w2.agent"].table_prefix == "w2."
    _, tables = run_in_memory(scenario(components=components))
    assert "w2.walk_visits" in tables and tables["w2.walk_visits"]["visits"].sum() > 0


def test_omit_tables_names_an_instance_table_by_its_full_name():
    components = {"w2": {"kind": "ideal"}}
    metrics = {"omit_tables": ["w2.walk_steps"]}
    _, tables = run_in_memory(scenario(components=components, metrics=metrics))
    assert len(tables["w2.walk_steps"]) == 0 and len(tables["walk_steps"]) > 0
    unknown = scenario(components=components, metrics={"omit_tables": ["w3.walk_steps"]})
    with pytest.raises(ScenarioError, match=r"w3\.walk_steps is not a table .* w2\.walk_steps"):
        check_inputs(unknown)


def test_dola_sends_every_value_through_the_transport_even_on_ideal_links():
    data = {
        "name": "dola", "seed": 3, "nodes": 20, "duration": "20s",
        "topology": {"kind": "random_regular", "degree": 4},
        "dola": {"period": "1s", "data": {"name": "synthetic_ball",
                                          "options": {"examples": 2000, "features": 3}}},
    }  # fmt: skip
    built, tables = run_in_memory(validate_scenario(data, source="dola", base_dir=None))
    mixing = tables["dola_mixing"]
    # one message per directed link of each round's A_t, all delivered within the round
    assert built.network.sent == built.network.delivered == 2 * int(mixing["links"].sum()) > 0
    assert tables["samples"]["messages_sent"].iloc[-1] == built.network.sent


def test_a_second_observer_of_the_same_kind_writes_its_own_table():
    extra = {"extra": {"kind": "samples", "every": "5min"}}
    built, tables = run_in_memory(scenario(components=extra))
    for key in ("links", "gossip", "samples", "components.extra"):
        assert isinstance(built[key], Component)
    assert list(tables["extra.samples"]["time"]) == [0.0, 300.0, 600.0]
    assert list(tables["samples"]["time"]) == [60.0 * i for i in range(11)]


def test_every_shipped_scenario_keeps_its_run_id():
    """The ids recorded from the commit before the scenario became named instances
    (``tests/scenario_ids.py``); scenarios that need absent ``../shared`` data are skipped."""
    import json

    from tests.scenario_ids import RECORD, scenario_ids

    recorded = json.loads(RECORD.read_text(encoding="utf-8"))
    ids = scenario_ids()
    assert set(ids) == set(recorded)
    checked = {name: value for name, value in ids.items() if value is not None}
    assert len(checked) >= 30
    changed = sorted(name for name, value in checked.items() if value != recorded[name])
    assert not changed, changed


def test_the_report_draws_a_second_instance_s_figures_from_its_own_tables(tmp_path):
    from netsim.analysis.report import write_report

    components = {"w2": {"kind": "service", "transfer_time": "100ms", "timeout": "30s"}}
    result = run_scenario(scenario(components=components, duration="3min"), out=tmp_path)
    assert result.manifest["table_prefixes"] == {
        "components.w2": "w2.", "components.w2.agent": "w2.",
    }  # fmt: skip
    page = write_report(tmp_path).read_text(encoding="utf-8")
    assert (tmp_path / "report" / "w2.walk_counts.png").is_file()
    assert (tmp_path / "report" / "walk_counts.png").is_file()
    assert "w2: Random walks" in page or "w2.walk_counts.png" in page


# --- a component reads only what it is wired to; interfaces say what they need ----------------


def _walk_on_engine(period: str, timeout: str, section: str | None) -> dict[str, Any]:
    data = {key: value for key, value in BASE.items() if key not in ("walk", "gossip")}
    if section is not None:
        data["gossip"] = {"period": section}
    data["components"] = {
        "engine": {"kind": "gossip", "period": period},
        "w": {"kind": "service", "transfer_time": "100ms", "timeout": timeout,
              "uses": {"gossip": "engine"}},
    }  # fmt: skip
    return data


def test_a_walk_wired_to_an_engine_runs_without_a_gossip_section():
    data = {**_walk_on_engine("1s", "100s", None), "duration": "1min"}
    built = validate_scenario(data, source="test", base_dir=None)
    assert check_inputs(built) == []
    _, tables = run_in_memory(built)
    assert len(tables["walk_samples"]) > 0


@pytest.mark.parametrize(
    ("engine", "section", "warned"), [("10s", "1s", True), ("1s", "100s", False)]
)
def test_a_walk_s_timeout_warning_reads_the_period_of_the_engine_it_is_wired_to(
    engine, section, warned
):
    """transfer_time + Δ·log2(60) with the wired engine's Δ: 59.2 s at 10 s (above the 20 s
    timeout), 6.0 s at 1 s (below it), whatever the gossip section's period."""
    warnings = check_inputs(scenario_from(_walk_on_engine(engine, "20s", section)))
    assert bool(warnings) == warned, warnings
    if warned:
        (warning,) = warnings
        assert warning.startswith("components.w: timeout δ = 20 s is less than transfer_time + "
                                  "components.engine.period × log2(nodes) = 59.1689 s")  # fmt: skip


def scenario_from(data: dict[str, Any]) -> Any:
    return validate_scenario(data, source="test", base_dir=None)


class PeriodlessEngine(PushPullGossip):
    """A plugin gossip engine whose Config has no period."""

    class Config(ComponentConfig):
        message_size: float = 64.0


class LinklessTransport(Transport):
    """A transport with only the interface's send methods (not derived from the built-in
    Network): the rest of the interface is missing."""

    def send(self, src, dst, *, kind, payload, on_deliver, on_lost=None, size=0.0,
             duration=None):  # fmt: skip
        on_deliver(payload)

    def send_batch(self, *args, **kwargs):
        raise NotImplementedError


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"gossip": {"kind": "tests.test_wiring:PeriodlessEngine"}},
         r"gossip\.kind: tests\.test_wiring:PeriodlessEngine has a Config without the 'period' "
         r"key every gossip engine has"),
        ({"links": {"kind": "tests.test_wiring:LinklessTransport"}},
         r"links\.kind: tests\.test_wiring:LinklessTransport does not implement "
         r"deliver_reliably\(\), links_down_at\(\), random_online_neighbour\(\), "
         r"round_pairs\(\)"),
    ],
)  # fmt: skip
def test_an_engine_without_period_and_a_transport_missing_methods_fail_validation(section, message):
    assert re.search(message, problem(**section)), problem(**section)


def test_a_name_two_packages_register_invalidates_only_the_scenarios_that_use_it(monkeypatch):
    """Two packages registering the same name: a scenario naming it is refused under the key
    that names it; every other scenario is valid."""
    registry = Registry(builtin=(
        "ring = netsim.network.topology:Ring",
        "ring = netsim.network.topology:Complete",
        "k_out = netsim.network.topology:KOut",
    ), entry_point_group=None)  # fmt: skip
    assert registry.lookup(("topology",), "k_out")[0].__name__ == "KOut"
    with pytest.raises(ComponentError, match=r"'ring' names two topology components, "
                       r"netsim\.network\.topology:Ring \(netsim\) and "
                       r"netsim\.network\.topology:Complete \(netsim\)"):  # fmt: skip
        registry.lookup(("topology",), "ring")
    # the run's registry: a clash on a mechanism's name
    REGISTRY.names("mechanism")
    monkeypatch.setitem(REGISTRY._clashes, ("mechanism", "l1"), "a:L1 (pkg_a) and b:L1 (pkg_b)")
    monkeypatch.delitem(REGISTRY._by_slot["mechanism"], "l1")
    learning = {"dataset": {"name": "spambase"}, "algorithm": "dp-sgd-2"}
    clash = problem(walk={"kind": "ideal", "agent": {"kind": "sgd"}},
                    learning={**learning, "noise": "l1"})  # fmt: skip
    assert "learning.noise: 'l1' names two noise mechanism components, a:L1 (pkg_a)" in clash
    assert "topology" not in clash
    scenario(walk={"kind": "ideal", "agent": {"kind": "sgd"}},
             learning={**learning, "noise": "k_norm_l2"})  # fmt: skip
