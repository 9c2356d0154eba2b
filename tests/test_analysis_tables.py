"""The tables of analysis/README.md are generated from run directories, never typed: each
generated block equals what ``analysis/dola_experiments.py figures`` writes from the committed
results (which ``run`` reduced from the run directories), and the results carry ε spent and
the yardsticks (issue 26)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analysis"))  # the scripts import their shared module by name

import dola_experiments  # noqa: E402


def test_the_readme_dola_tables_are_the_generated_ones() -> None:
    text = dola_experiments.README.read_text(encoding="utf-8")
    tables = dola_experiments.generated_tables()
    assert {"dola-tuning", "dola-epsilon", "dola-batch", "dola-datasets", "dola-table3"} <= set(
        tables
    )
    for name in tables:
        assert f"<!-- generated: {name} -->" in text, name
    assert dola_experiments.with_tables(text, tables) == text


def test_a_typed_number_in_a_generated_table_is_found() -> None:
    text = dola_experiments.README.read_text(encoding="utf-8")
    tables = dola_experiments.generated_tables()
    tampered = text.replace("| 0.831 ± 0.001 |", "| 0.846 ± 0.001 |", 1)
    assert tampered != text
    assert dola_experiments.with_tables(tampered, tables) == text


def test_every_private_dola_result_spends_at_most_its_stated_epsilon() -> None:
    for name in ("tuning", "epsilon", "batch", "nodes", "topology", "datasets", "table3"):
        results = pd.read_parquet(dola_experiments.results_file(name))
        private = results[results["algorithm"] != "non_private"]
        assert (private["epsilon_spent"] <= private["epsilon"] * (1 + 1e-9)).all(), name
        assert results[["majority_accuracy", "centralised_accuracy"]].notna().all().all(), name


def test_the_validated_defaults_are_the_studys_choice() -> None:
    from netsim.algorithms.dola.config import DolaConfig

    _, best = dola_experiments.tuning_table(dola_experiments._load("tuning"))
    fields = DolaConfig.model_fields
    assert best == {
        "radius": fields["radius"].default,
        "strong_convexity": fields["strong_convexity"].default,
    }
