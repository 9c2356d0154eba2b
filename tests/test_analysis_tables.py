"""The tables of analysis/README.md are generated from run directories, never typed: each
generated block equals what ``analysis/dola_experiments.py figures`` (DOLA) or
``analysis/walk_grid.py --readme`` and ``analysis/walk_java_rows.py --readme`` (the walk
service) write from the committed results (which those scripts reduced from the run
directories), and the DOLA results carry ε spent and the yardsticks (issue 26)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analysis"))  # the scripts import their shared module by name

import dola_experiments  # noqa: E402
import experiments  # noqa: E402
import private_learning  # noqa: E402
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


# --- private learning at ε = 1 (analysis/private_learning.py) ---------------------------------


def _private_learning_runs() -> pd.DataFrame:
    return private_learning.load_results()


def test_the_readme_private_learning_tables_are_the_generated_ones() -> None:
    text = experiments.README.read_text(encoding="utf-8")
    tables = private_learning.generated_tables(_private_learning_runs())
    assert set(tables) == {
        "private-learning-spambase", "private-learning-adult", "private-learning-gossip",
        "private-learning-margin",
    }  # fmt: skip
    for name in tables:
        assert f"<!-- generated: {name} -->" in text, name
    assert experiments.with_tables(text, tables) == text


def test_a_typed_number_in_a_private_learning_table_is_found() -> None:
    text = experiments.README.read_text(encoding="utf-8")
    tables = private_learning.generated_tables(_private_learning_runs())
    row = next(
        line for line in tables["private-learning-adult"].splitlines() if "rdp | 1 / 1" in line
    )
    cells = row.split(" | ")
    accuracy = next(i for i, cell in enumerate(cells) if " ± " in cell and "(" in cell)
    typed = " | ".join([*cells[:accuracy], "0.999 ± 0.001 (5)", *cells[accuracy + 1 :]])
    tampered = text.replace(row, typed, 1)
    assert tampered != text
    assert experiments.with_tables(tampered, tables) == text
    margin = tables["private-learning-margin"]
    retyped = text.replace(margin, margin.replace("±", "+/-"), 1)
    assert retyped != text
    assert experiments.with_tables(retyped, tables) == text


def test_every_private_learning_row_is_what_its_label_says() -> None:
    runs = _private_learning_runs()
    assert (runs.groupby(["experiment", "row"])["seed"].nunique() >= 5).all()
    private = runs[runs["mechanism"] != "none"]
    guaranteed = private[private["guarantee"] != "none"]
    # every guaranteed row spends at most its budget per record; the paper's L2 has none
    assert (guaranteed["epsilon_spent"] <= guaranteed["epsilon"] * (1 + 1e-9)).all()
    assert (guaranteed["delta_spent"] <= guaranteed["delta"] * (1 + 1e-9)).all()
    assert (private["epsilon"] == 1.0).all()
    assert set(private[private["guarantee"] == "none"]["mechanism"]) == {"l2_paper"}
    gaussian = private[private["mechanism"] == "gaussian"]
    assert (gaussian["delta"] == 1e-5).all()
    assert (private[private["mechanism"] != "gaussian"]["delta"] == 0).all()
    assert set(gaussian["composition"]) <= {"rdp", "basic"}
    assert (gaussian["composition"] == gaussian["accounting"]).all()
    # the three yardsticks on every run (central DP only where there is a budget)
    assert runs[["majority_accuracy", "centralised_accuracy"]].notna().all().all()
    assert private["central_dp_accuracy"].notna().all()
    assert runs[runs["mechanism"] == "none"]["central_dp_accuracy"].isna().all()
    # a walk makes ten passes over its nodes; a shard of r records is stepped on whole (b = r)
    walks = runs[runs["learner"] == "walk"]
    assert ((walks["visits"] + 1) // walks["nodes"] == private_learning.PASSES).all()
    assert (walks["records_per_node"] == walks["batch"]).all()


def test_the_margin_is_the_difference_of_the_means_with_its_standard_error() -> None:
    runs = pd.DataFrame(
        {
            "experiment": "adult",
            "row": ["a"] * 3 + ["b"] * 3,
            "seed": [1, 2, 3] * 2,
            "final_accuracy": [0.70, 0.72, 0.74, 0.60, 0.66, 0.63],
        }
    )
    found = private_learning.margin(runs, "adult", "a", "b")
    assert found.difference == pytest.approx(0.72 - 0.63)
    # Welch: sqrt(s_a^2/3 + s_b^2/3) with s_a^2 = 4e-4, s_b^2 = 9e-4
    assert found.standard_error == pytest.approx((4e-4 / 3 + 9e-4 / 3) ** 0.5)
    # paired: differences 0.10, 0.06, 0.11, s.d. 0.0264575 / sqrt(3)
    assert found.paired_standard_error == pytest.approx(0.02645751311 / 3**0.5)
    assert found.n == (3, 3)
