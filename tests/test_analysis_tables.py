"""The tables of analysis/README.md are generated from run directories, never typed: each
generated block equals what ``analysis/dola_experiments.py figures`` (DOLA) or
``analysis/walk_grid.py --readme`` and ``analysis/walk_java_rows.py --readme`` (the walk
service) write from the committed results (which those scripts reduced from the run
directories), and the DOLA results carry ε spent and the yardsticks (issue 26)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analysis"))  # the scripts import their shared module by name

import dola_experiments  # noqa: E402
import experiments  # noqa: E402
import walk_grid  # noqa: E402
import walk_java_rows  # noqa: E402


def test_the_readme_dola_tables_are_the_generated_ones() -> None:
    text = experiments.README.read_text(encoding="utf-8")
    tables = dola_experiments.generated_tables()
    assert {"dola-tuning", "dola-epsilon", "dola-batch", "dola-datasets", "dola-table3"} <= set(
        tables
    )
    for name in tables:
        assert f"<!-- generated: {name} -->" in text, name
    assert experiments.with_tables(text, tables) == text


def test_a_typed_number_in_a_generated_table_is_found() -> None:
    text = experiments.README.read_text(encoding="utf-8")
    tables = dola_experiments.generated_tables()
    tampered = text.replace("| 0.831 ± 0.001 |", "| 0.846 ± 0.001 |", 1)
    assert tampered != text
    assert experiments.with_tables(tampered, tables) == text


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


def test_the_readme_walk_tables_are_the_generated_ones() -> None:
    text = experiments.README.read_text(encoding="utf-8")
    tables = {**walk_grid.generated_tables(), **walk_java_rows.generated_tables()}
    assert set(tables) == {
        "walk-paper-fig2", "walk-paper-fig3", "walk-age-error", "walk-authors-age-error",
        "walk-java-rows",
    }  # fmt: skip
    for name in tables:
        assert f"<!-- generated: {name} -->" in text, name
    assert experiments.with_tables(text, tables) == text


def test_a_typed_number_in_a_walk_table_is_found() -> None:
    text = experiments.README.read_text(encoding="utf-8")
    tables = walk_java_rows.generated_tables()
    typed = "| netsim, rounds | 8 | 1.002 ± 0.001 |"
    assert typed in tables["walk-java-rows"]
    tampered = text.replace(typed, "| netsim, rounds | 8 | 1.000 ± 0.001 |", 1)
    assert tampered != text
    assert experiments.with_tables(tampered, tables) == text


def test_the_walk_variants_page_shows_the_generated_java_comparison() -> None:
    text = walk_java_rows.WALK_VARIANTS.read_text(encoding="utf-8")
    runs = experiments.read_per_run_table(walk_java_rows.RESULTS, walk_java_rows.COLUMNS)
    tables = walk_java_rows.docs_tables(runs)
    assert "<!-- generated: walk-java-rows-table -->" in text
    assert "| | netsim, rounds | 8 | 1.002 ± 0.001 |" in tables["walk-java-rows-table"]
    assert experiments.with_tables(text, tables) == text
