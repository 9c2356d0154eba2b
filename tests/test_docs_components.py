"""docs/components.md's worked example of every slot is true: each scenario block runs (with the
example package installed as the tests install it) and writes the tables its first line names,
and each code block is an excerpt of the example package's file its heading names."""

from __future__ import annotations

import re

import pytest
import yaml

import netsim
from tests.test_components import EXAMPLE, REPO, example_paths  # noqa: F401  (a fixture)

GUIDE = REPO / "docs" / "components.md"
SECTION = "## 5. One worked example per slot"
SOURCES = EXAMPLE / "src" / "netsim_examples"
#: The slots that get a worked example (protocols have gossip learning in netsim),
#: and the transport, gossip engine and observer slots of its named instances.
SLOTS = {
    "Walk", "Walk agent", "Gossip application", "Churn model", "Topology", "Noise mechanism",
    "Data set", "Round learner", "Transport", "Gossip engine", "Observer", "Model",
}  # fmt: skip


def examples() -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Slot heading → (source file, [(language, code)]) of the worked examples section."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    found = {}
    for part in section.split("\n### ")[1:]:
        heading, body = part.split("\n", 1)
        slot = heading.split(":", 1)[0]
        source = re.search(r"\(`(\w+\.py)`\)", heading)
        assert source, heading
        blocks = re.findall(r"```(\w+)\n(.*?)```", body, flags=re.S)
        found[slot] = (source.group(1), blocks)
    return found


def test_every_slot_has_a_worked_example_with_a_scenario():
    found = examples()
    assert set(found) == SLOTS
    for slot, (source, blocks) in found.items():
        assert (SOURCES / source).is_file(), source
        assert [lang for lang, _ in blocks].count("yaml") == 1, slot


def test_the_code_blocks_are_the_example_package_code():
    for slot, (source, blocks) in examples().items():
        code = (SOURCES / source).read_text(encoding="utf-8")
        for lang, block in blocks:
            if lang == "python":
                assert block in code, f"{slot}: a block is not in {source}"


@pytest.mark.parametrize("slot", sorted(SLOTS))
def test_the_scenario_of_each_slot_runs_and_writes_its_tables(example_paths, slot):  # noqa: F811
    _, blocks = examples()[slot]
    text = next(block for lang, block in blocks if lang == "yaml")
    first = text.splitlines()[0]
    named = re.findall(r"`(\w+)`", first)
    assert named, first
    result = netsim.run({"seed": 1, **yaml.safe_load(text)})
    for table in named:
        assert table in result.tables and len(result[table]) > 0, (slot, table)
    if slot == "Noise mechanism":
        assert set(result["privacy_ledger"]["mechanism"]) == {"coordinate_laplace"}
    if slot == "Transport":
        assert "partition" in set(result["messages_lost"]["reason"])
    if slot == "Model":
        assert (result["privacy_ledger"]["sensitivity"] == 2.0).all()
    if slot == "Data set":
        summary = result["learning_summary"].iloc[0]
        assert 0 <= summary["majority_accuracy"] <= 1
