"""Scenario sections open to plug-ins: a section ordered by the names it comes after, a
plug-in's section used from YAML when it is installed (an entry point) and when the scenario
names its class (``tally: {kind: package.module:Class}``), and the clashes between
declarations refused by name in one message (``netsim/component_sections.py``)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import netsim
from netsim.component_sections import Declared, Section, SectionError, section_order
from netsim.errors import ScenarioError, nearest_names
from netsim.registry import BUILTIN, REGISTRY, Registry
from netsim.scenario.loader import scenario_to_data, validate_scenario

REPO = Path(__file__).resolve().parents[1]
PLUGIN = "tests.section_plugin"

#: The build order of the built-in sections before they were ordered by name (by integers).
BUILT_IN_ORDER = [
    "topology", "links", "churn", "privacy", "learning", "gossip", "broadcast",
    "walk", "gossip_learning", "dola", "mi_ogd", "muffliato", "dsgd",
]  # fmt: skip


def tally_scenario(**tally: object) -> dict:
    return {
        "name": "tally",
        "seed": 5,
        "nodes": 20,
        "duration": 60.0,
        "topology": {"kind": "ring", "k": 2},
        "tally": {"period": 10.0, "scale": 2.0, **tally},
    }


def test_the_built_in_sections_keep_their_build_order():
    assert list(REGISTRY.sections(plugins=False)) == BUILT_IN_ORDER


def test_a_section_comes_after_the_names_it_gives_and_ties_go_by_name():
    def declared(key: str, *after: str) -> Declared:
        return Declared(Section(key, after=after), f"m:{key}")

    items = [declared("c", "a"), declared("b", "a"), declared("a"), declared("z"),
             declared("d", "z")]  # fmt: skip
    assert [item.section.key for item in section_order(items)] == ["a", "b", "c", "z", "d"]
    # the order of discovery does not matter
    assert section_order(items[::-1]) == section_order(items)


def test_a_section_named_by_its_class_builds_and_runs():
    result = netsim.run(tally_scenario(kind=f"{PLUGIN}:Tally"))
    tally = result["tally"]
    assert tally["round"].tolist() == [1, 2, 3, 4, 5, 6]
    assert (tally["online"] == 40.0).all()  # 20 nodes always on, times scale 2


def test_a_plug_in_section_is_built_after_what_it_names():
    data = tally_scenario(kind=f"{PLUGIN}:Tally")
    data["learning"] = {"dataset": {"name": "spambase"}, "evaluate_every": 20}
    data["walk"] = {"kind": "ideal", "agent": {"kind": "sgd"}}
    scenario = validate_scenario(data, source="test", base_dir=None)
    sections = list(scenario.declared_sections)
    assert sections.index("tally") > sections.index("learning")
    assert [key for key in sections if key != "tally"] == BUILT_IN_ORDER
    keys = [part.key for part in scenario.plan.parts]
    assert keys.index("tally") > keys.index("learning")


def test_a_plug_in_section_keeps_its_kind_and_travels_to_other_processes():
    scenario = validate_scenario(tally_scenario(kind=f"{PLUGIN}:Tally"), source="t", base_dir=None)
    data = scenario_to_data(scenario)
    assert data["tally"]["kind"] == f"{PLUGIN}:Tally" and data["tally"]["scale"] == 2.0
    again = validate_scenario(data, source="again", base_dir=None)
    assert scenario_to_data(again) == data
    copy = pickle.loads(pickle.dumps(scenario))  # a sweep's workers get it pickled
    assert type(copy) is type(scenario) and scenario_to_data(copy) == data
    assert [p.key for p in copy.plan.parts] == [p.key for p in scenario.plan.parts]


def test_a_scenario_without_plug_in_sections_is_unchanged():
    plain = validate_scenario(
        {"nodes": 5, "duration": 10.0, "topology": {"kind": "ring", "k": 2}},
        source="t", base_dir=None,
    )  # fmt: skip
    assert list(plain.declared_sections) == BUILT_IN_ORDER
    assert "tally" not in scenario_to_data(plain)


def test_an_installed_plug_in_s_section_works_from_yaml(tmp_path):
    site = tmp_path / "site"
    info = site / "tally_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tally-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[netsim.components]\ntally = {PLUGIN}:Tally\n")
    scenario = tmp_path / "tally.yaml"
    scenario.write_text(json.dumps(tally_scenario()))  # JSON is YAML; the section has no kind
    script = textwrap.dedent(f"""
        import json, netsim
        from netsim.registry import REGISTRY
        result = netsim.run({str(scenario)!r})
        print(json.dumps([list(REGISTRY.sections()), result["tally"]["online"].tolist()]))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    sections, online = json.loads(done.stdout.strip().splitlines()[-1])
    assert "tally" in sections and [s for s in sections if s != "tally"] == BUILT_IN_ORDER
    assert online == [40.0] * 6


def problem(data: dict) -> str:
    with pytest.raises(ScenarioError) as caught:
        validate_scenario(data, source="s.yaml", base_dir=None)
    return str(caught.value)


def test_two_classes_declaring_one_section_are_named_in_one_message():
    registry = Registry(
        (*BUILTIN, f"a = {PLUGIN}:Tally", f"b = {PLUGIN}:SecondTally"), entry_point_group=None
    )
    with pytest.raises(SectionError) as caught:
        registry.sections()
    assert (
        f"the section 'tally' is declared by both {PLUGIN}:Tally and {PLUGIN}:SecondTally"
        in str(caught.value)
    )


def test_a_plug_in_cannot_take_a_built_in_section():
    registry = Registry((*BUILTIN, f"x = {PLUGIN}:FakeLinks"), entry_point_group=None)
    with pytest.raises(SectionError) as caught:
        registry.sections()
    assert (
        f"the section 'links' is declared by both netsim.network.links:Network and "
        f"{PLUGIN}:FakeLinks" in str(caught.value)
    )


def test_an_after_naming_no_section_is_refused_with_the_nearest_name():
    message = problem(tally_scenario(kind=f"{PLUGIN}:Misplaced") | {})
    assert "tally" in message  # the key names a class of another section
    data = tally_scenario(kind=f"{PLUGIN}:Tally")
    data["misplaced"] = {"kind": f"{PLUGIN}:Misplaced", "period": 10.0}
    message = problem(data)
    assert (
        f"{PLUGIN}:Misplaced puts the section 'misplaced' after 'lerning', which no class "
        "declares (did you mean 'learning' or 'gossip_learning'?)" in message
    )


def test_sections_each_after_the_other_are_refused_naming_both():
    data = tally_scenario(kind=f"{PLUGIN}:Tally")
    data["egg"] = {"kind": f"{PLUGIN}:Egg", "period": 10.0}
    data["hen"] = {"kind": f"{PLUGIN}:Hen", "period": 10.0}
    message = problem(data)
    assert "'egg' (after hen), 'hen' (after egg) are each after another" in message
    assert f"{PLUGIN}:Egg" in message and f"{PLUGIN}:Hen" in message


def test_a_class_without_that_section_cannot_be_named_as_one():
    data = tally_scenario(kind=f"{PLUGIN}:NoSection")
    assert "tests.section_plugin:NoSection declares no section" in problem(data)
    data = tally_scenario(kind=f"{PLUGIN}:Egg")  # a class of another section
    assert f"tally: {PLUGIN}:Egg declares the section 'egg', so it cannot be" in problem(data)
    assert "tally.kind: " in problem(tally_scenario(kind=f"{PLUGIN}:Absent"))


def test_an_unknown_section_key_is_answered_with_the_nearest():
    data = {"nodes": 5, "duration": 10.0, "topology": {"kind": "ring", "k": 2},
            "gosip": {"period": 1.0}}  # fmt: skip
    message = problem(data)
    assert "gosip: unknown key (did you mean 'gossip'?); allowed keys here: name," in message


def test_nearest_names():
    assert nearest_names("gosip", ["gossip", "walk", "gossip_learning"]) == ["gossip"]
    assert nearest_names("Dola", ["dola", "dsgd"]) == ["dola"]
    assert nearest_names("zzz", ["dola"]) == []


def test_the_registry_answers_an_unknown_name_or_slot_with_the_nearest():
    from netsim.errors import ComponentError

    with pytest.raises(ComponentError) as caught:
        REGISTRY.lookup(("topology",), "k_outt")
    assert "unknown value 'k_outt' (did you mean 'k_out'?); allowed values: 'k_out'," in str(
        caught.value
    )
    with pytest.raises(ComponentError, match=r"unknown slot 'wlak' \(did you mean 'walk'"):
        REGISTRY.names("wlak")
    with pytest.raises(ComponentError, match=r"unknown slot 'topolgy'.*; the slots: topology,"):
        REGISTRY.lookup(("topolgy",), "ring")
    message = problem(tally_scenario(kind=f"{PLUGIN}:Tally") | {"walk": {"kind": "idael"}})
    assert "walk.kind: unknown value 'idael' (did you mean 'ideal'?)" in message
