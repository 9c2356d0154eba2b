"""The tables of analysis/README.md are generated from run directories, never typed: each
generated block equals what ``analysis/dola_experiments.py tables`` (DOLA),
``analysis/dola_accounting.py tables`` (DOLA's accounting), ``analysis/private_learning.py
tables``, ``analysis/network_privacy.py tables``, ``analysis/muffliato_averaging.py tables``
or ``analysis/walk_grid.py --readme`` and ``analysis/walk_java_rows.py --readme`` (the walk
service) write from the committed results (which those scripts reduced from the run
directories), and the DOLA results carry ε spent and the three yardsticks."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analysis"))  # the scripts import their shared module by name

import dola_accounting  # noqa: E402
import dola_experiments  # noqa: E402
import experiments  # noqa: E402
import muffliato_averaging  # noqa: E402
import network_privacy  # noqa: E402
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


#: The DOLA experiments whose tables show the central-DP yardstick.
CENTRAL_DP_TABLES = ("epsilon", "batch", "nodes", "topology", "datasets", "table3")


def test_every_dola_table_shows_the_central_dp_yardstick() -> None:
    tables = dola_experiments.generated_tables()
    for name in CENTRAL_DP_TABLES:
        table = tables[f"dola-{name}"]
        assert "majority class" in table and "central DP" in table.splitlines()[0], name


def test_a_typed_central_dp_number_is_found() -> None:
    text = experiments.README.read_text(encoding="utf-8")
    tables = dola_experiments.generated_tables()
    row = next(
        line for line in tables["dola-epsilon"].splitlines() if line.startswith("| laplace | 1 |")
    )
    cells = row.split(" | ")
    typed = " | ".join([*cells[:-1], "0.999 |"])
    assert typed != row
    tampered = text.replace(row, typed, 1)
    assert tampered != text
    assert experiments.with_tables(tampered, tables) == text


def test_every_private_dola_run_has_central_dp_at_its_stated_budget() -> None:
    yardsticks = dola_experiments.load_central_dp()
    for name in CENTRAL_DP_TABLES:
        results = pd.read_parquet(dola_experiments.results_file(name))
        curves = dola_experiments.with_central_dp(results, yardsticks, name)
        runs = curves.drop_duplicates(dola_experiments.RUN_KEY)
        private = runs["algorithm"] != "non_private"
        assert runs.loc[private, "central_dp_accuracy"].between(0, 1).all(), name
        assert runs.loc[~private, "central_dp_accuracy"].isna().all(), name
        of = yardsticks[yardsticks["experiment"] == name]
        # the stated ε of the run, and δ only for the Gaussian (Alg. 2): 1e-5 as the scenarios
        assert (of["stated_epsilon"] == of["epsilon"]).all(), name
        gaussian = of["algorithm"] == "gaussian"
        assert (of.loc[gaussian, "stated_delta"] == 1e-5).all(), name
        assert (of.loc[~gaussian, "stated_delta"] == 0).all(), name
    # one value per (data, ε, δ): computed once, on a split that does not depend on the seed
    per_key = yardsticks.groupby(["data", "stated_epsilon", "stated_delta"])
    assert (per_key["central_dp_accuracy"].nunique() == 1).all()
    assert set(yardsticks["dataset"]) == {"synthetic_ball", "adult", "spambase", "synthetic_sparse"}


def test_the_scripts_central_dp_is_what_dola_runs_record_on_their_own_split() -> None:
    # the accounting runs record central DP in their dola_summary (on the split the run
    # loaded); the script's yardstick for the same data and (ε, δ) must be the same number
    yardsticks = dola_experiments.load_central_dp()
    runs = dola_accounting.load_results(["synthetic"])
    for epsilon in (1.0, 0.1):
        recorded = runs[runs["epsilon"] == epsilon]["central_dp_accuracy"].unique()
        computed = yardsticks[
            (yardsticks["dataset"] == "synthetic_ball")
            & (yardsticks["stated_epsilon"] == epsilon)
            & (yardsticks["stated_delta"] == dola_accounting.DELTA)
        ]["central_dp_accuracy"].unique()
        assert len(recorded) == 1 and len(computed) == 1, epsilon
        assert computed[0] == recorded[0], epsilon


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


# --- DOLA's Gaussian releases composed by RDP or PLD (analysis/dola_accounting.py) -------------


@pytest.fixture(scope="module")
def accounting_tables() -> dict[str, str]:
    return dola_accounting.generated_tables()


def test_the_readme_dola_accounting_tables_are_the_generated_ones(
    accounting_tables: dict[str, str],
) -> None:
    text = experiments.README.read_text(encoding="utf-8")
    assert set(accounting_tables) == {"dola-accounting-sigma", "dola-accounting-accuracy"}
    for name in accounting_tables:
        assert f"<!-- generated: {name} -->" in text, name
    assert experiments.with_tables(text, accounting_tables) == text


def test_a_typed_number_in_a_dola_accounting_table_is_found(
    accounting_tables: dict[str, str],
) -> None:
    text = experiments.README.read_text(encoding="utf-8")
    for name in accounting_tables:
        # σ/Δ under RDP; the accuracy of ŵ_T
        column = {"dola-accounting-sigma": 4, "dola-accounting-accuracy": 6}[name]
        row = accounting_tables[name].splitlines()[3]
        cells = row.split(" | ")
        typed = " | ".join([*cells[:column], "0.999", *cells[column + 1 :]])
        assert typed != row, name
        tampered = text.replace(row, typed, 1)
        assert tampered != text, name
        assert experiments.with_tables(tampered, accounting_tables) == text, name


def test_every_dola_accounting_row_is_what_its_label_says() -> None:
    runs = dola_accounting.load_results()
    keys = ["experiment", "batch", "epsilon", "accounting"]
    assert (runs.groupby(keys)["seed"].nunique() == dola_accounting.DEFAULT_REPS).all()
    assert len(runs.groupby(keys)) == 2 * len(dola_accounting.BATCHES) * 2 * 3
    assert (runs["composition"] == runs["accounting"]).all()
    # every example spends at most the stated budget, and the tight accountings all of it
    assert (runs["epsilon_spent"] <= runs["epsilon"] * (1 + 1e-9)).all()
    assert (runs["delta_spent"] <= runs["delta"] * (1 + 1e-9)).all()
    tight = runs[runs["accounting"] != "basic"]
    assert (tight["epsilon_spent"] >= tight["epsilon"] * (1 - 1e-6)).all()
    # z is the calibration for the passes the run made
    for row in runs.drop_duplicates(["accounting", "epsilon", "passes"]).itertuples():
        if row.accounting == "basic":
            expected = dola_accounting.basic_multiplier(row.passes, row.epsilon, row.delta)
            assert row.noise_multiplier == pytest.approx(expected, rel=1e-9)
    # the three yardsticks on every run
    yardsticks = ["majority_accuracy", "centralised_accuracy", "central_dp_accuracy"]
    assert runs[yardsticks].notna().all().all()


# --- network DP of random-walk DP-SGD (analysis/network_privacy.py) ------------------------------


def test_the_readme_network_privacy_tables_are_the_generated_ones() -> None:
    text = experiments.README.read_text(encoding="utf-8")
    tables = network_privacy.generated_tables()
    assert set(tables) == {
        "network-privacy-adult-10", "network-privacy-adult-1", "network-privacy-adult-10-churn"
    }  # fmt: skip
    for name in tables:
        assert f"<!-- generated: {name} -->" in text, name
        assert "no results" not in tables[name]
    assert experiments.with_tables(text, tables) == text


def test_every_network_privacy_row_is_calibrated_as_its_label_says() -> None:
    """The local rows spend the budget by RDP over 13 uses; the closed-form rows' worst
    closed-form pair is the budget and their worst path-known pair above it (the observer
    knows the path); the rows calibrated on a pilot have the budget as their worst
    path-known pair (the same seed's walk); the ceiling rows end within the budget, near
    it, with a local ε past it; every other run's local ε is its noise's over 13 uses;
    on the static graphs every network row's accuracy lies above the local row's, and the
    closed-form rows' below central DP."""
    from netsim.privacy.composition import composed_epsilon

    runs = network_privacy.load_results()
    rows = {row.label: row for row in network_privacy.EVERY_ROW}
    for name in network_privacy.EXPERIMENTS:
        expected = {row.label for row in network_privacy.EXPERIMENT_ROWS[name]}
        assert set(runs.loc[runs["experiment"] == name, "row"]) == expected, name
    for (experiment, label), part in runs.groupby(["experiment", "row"]):
        target, delta = network_privacy.BUDGETS[experiment]
        row = rows[label]
        assert (part["delta"] == delta).all()
        if not row.network:
            assert part["local_epsilon"].to_numpy() == pytest.approx(target, rel=1e-6)
            continue
        if row.ceiling:  # no cap: used until some observer reaches the budget, past local
            assert (part["network_epsilon"] <= target * (1 + 1e-9)).all()
            assert (part["network_epsilon"] > 0.9 * target).all()
            assert (part["local_epsilon"] > target).all()
            continue
        for _, run in part.iterrows():
            uses = composed_epsilon(((run["noise_multiplier"], 13),), delta, "rdp")
            assert run["local_epsilon"] == pytest.approx(uses, rel=1e-6)
        if row.pilot is None:
            assert part["closed_form_epsilon"].to_numpy() == pytest.approx(target, rel=1e-6)
            assert (part["network_epsilon"] > part["closed_form_epsilon"]).all()
        else:
            assert part["network_epsilon"].to_numpy() == pytest.approx(target, rel=1e-6)
    # under churn the ceiling, on the walk service that restarts from copies, uses each
    # node more often than local DP (about 1.8 times the updates on every seed)
    churn = runs[runs["experiment"] == "adult-10-churn"].set_index(["row", "seed"])["updates"]
    for ceiling, local in (("network budget (ceiling), STUNner churn", "local, STUNner churn"),
                           ("network budget (ceiling), churn and 5% loss",
                            "local, churn and 5% loss")):  # fmt: skip
        assert (churn[ceiling] > 1.5 * churn[local]).all()
    mean = runs.groupby(["experiment", "row"])["final_accuracy"].mean()
    for experiment in ("adult-10", "adult-1"):
        central = runs.loc[runs["experiment"] == experiment, "central_dp_accuracy"].mean()
        local = mean[experiment, "local"]
        for row in network_privacy.ALL_ROWS[1:]:
            assert local < mean[experiment, row.label], (experiment, row.label)
            if row.pilot is None:
                assert mean[experiment, row.label] < central, (experiment, row.label)


def test_the_readme_muffliato_table_is_the_generated_one() -> None:
    text = experiments.README.read_text(encoding="utf-8")
    tables = muffliato_averaging.generated_tables()
    assert f"<!-- generated: {muffliato_averaging.NAME} -->" in text
    assert experiments.with_tables(text, tables) == text


def test_muffliatos_averaging_reproduces_the_papers_shape() -> None:
    """On every static graph a neighbour, which hears a node's noisy value in the first round,
    learns exactly the local-DP loss (1 at α = 2); two hops away a pair learns less, and the
    least loss beyond is below half of it; the averaging mixed (its RMS error below a tenth of
    the noise σ = 1). The exact view shows what a per-message bound cannot: on the hypercube,
    after as many rounds as its diameter, the antipode's value is revealed (loss 1 at 11
    hops). Under churn fewer than half the nodes are online (each seed). No pair learns more
    than the local loss."""
    runs = muffliato_averaging.load_results()
    distance = pd.read_parquet(muffliato_averaging.distance_file())
    assert set(runs["row"]) == {row.label for row in muffliato_averaging.ROWS}
    for row in muffliato_averaging.ROWS:
        part = runs[runs["row"] == row.label]
        assert len(part) == row.seeds
        mine = distance[distance["row"] == row.label]
        assert (mine["max"] <= 1 + 1e-9).all()
        if row.churn:
            assert (part["online_mean"] < 0.5 * part["nodes"]).all()
            continue
        assert part["loss_neighbours"].to_numpy() == pytest.approx(1.0, rel=1e-9)
        two = mine.loc[mine["distance"] == 2, "mean"].to_numpy()
        assert (two < 0.95).all()
        assert (part["loss_least"] < 0.5).all()
        assert (part["final_rmse"] < 0.1).all()
    cube = distance[(distance["row"] == "hypercube 2^11") & (distance["distance"] == 11)]
    assert cube["mean"].to_numpy() == pytest.approx(1.0, rel=1e-9)


# --- tuned on a validation split (analysis/tuned_learning.py) ----------------------------------


def test_the_readme_tuned_learning_table_is_the_generated_one() -> None:
    import tuned_learning

    text = experiments.README.read_text(encoding="utf-8")
    tables = tuned_learning.generated_tables()
    assert "<!-- generated: tuned-learning -->" in text
    assert experiments.with_tables(text, tables) == text
    runs = pd.read_parquet(tuned_learning.RESULTS)
    tuned = runs[runs["protocol"] == "unaccounted"]
    assert len(tuned) == 5 and tuned["test_accuracy"].mean() >= 0.79
    counted = runs[runs["protocol"] == "random-trials"]
    assert len(counted) == 5 and (counted["selection_epsilon"] > 1.0).all()


def test_the_readme_tuned_private_learning_table_is_the_generated_one() -> None:
    import tuned_private_learning

    text = experiments.README.read_text(encoding="utf-8")
    tables = tuned_private_learning.generated_tables()
    assert "<!-- generated: tuned-private-learning -->" in text
    assert experiments.with_tables(text, tables) == text
    # the block sits in the private-learning section, after the Adult tuning subsection
    assert (
        text.index("<!-- generated: tuned-learning -->")
        < text.index("<!-- generated: tuned-private-learning -->")
        < text.index("### Poisson subsampling within a shard")
    )


def test_every_tuned_private_learning_row_has_both_protocols_on_the_same_split() -> None:
    import tuned_private_learning

    runs = pd.read_parquet(tuned_private_learning.RESULTS)
    expected = {
        (name, row.label)
        for name in tuned_private_learning.EXPERIMENTS
        for row in tuned_private_learning.tuned_rows(name)
    }
    assert set(zip(runs["experiment"], runs["row"], strict=True)) == expected
    for (_, _, protocol), group in runs.groupby(["experiment", "row", "protocol"]):
        assert protocol in {"tuned", "untuned"}
        assert sorted(group["seed"]) == [1, 2, 3, 4, 5]
        assert group["validation_accuracy"].notna().all()
        # one setting per protocol: the chosen point, or the shipped η = 1
        assert group["learning_rate"].nunique() == 1
    untuned = runs[runs["protocol"] == "untuned"]
    assert (untuned["learning_rate"] == 1.0).all()


def test_the_yardsticks_the_tables_compute_are_stored() -> None:
    """The central-DP yardsticks the tables compute at a row's stated budget are committed,
    so the tables print without the data set."""
    stored = pd.read_parquet(experiments.YARDSTICKS)
    assert stored["key"].is_unique and stored["value"].between(0.5, 1.0).all()
    for name in network_privacy.EXPERIMENTS:
        epsilon, delta = network_privacy.BUDGETS[name]
        assert stored["key"].str.contains(f"ε={epsilon:g}, δ={delta:g}").any(), name


# --- the network-DP rows tuned on a validation split (analysis/tuned_network_privacy.py) ------


def test_the_readme_tuned_network_privacy_tables_are_the_generated_ones() -> None:
    import tuned_network_privacy

    text = experiments.README.read_text(encoding="utf-8")
    assert "<!-- generated: tuned-network-privacy -->" in text
    assert experiments.with_tables(text, tuned_network_privacy.generated_tables()) == text
    # the block follows the network-DP tables it tunes
    assert (
        text.index("<!-- generated: network-privacy-adult-10-churn -->")
        < text.index("<!-- generated: tuned-network-privacy -->")
        < text.index("### The ceiling on an 8-regular walk")
    )


def test_tuning_a_network_dp_row_changes_nothing_it_spends() -> None:
    """The step size and the clip of the grid leave the noise multiplier, the uses the budget
    admits and every observer's loss as they were at the same seed: against the shipped run
    for a row with a cap on uses, against the same row untuned on the same split for a
    ceiling row (the shipped ceiling rows predate the finer ceiling, which admits more uses).
    Each row has both protocols at seeds 1-3, the untuned one at the shipped (1, 0.4)."""
    import tuned_network_privacy

    runs = tuned_network_privacy.load_tuned()
    for (name, label), group in runs.groupby(["experiment", "row"]):
        assert label in {row.label for row in network_privacy.EXPERIMENT_ROWS[name]}
        for protocol in ("tuned", "untuned"):
            assert sorted(group.loc[group["protocol"] == protocol, "seed"]) == [1, 2, 3]
    untuned = runs[runs["protocol"] == "untuned"]
    assert (untuned["learning_rate"] == 1.0).all() and (untuned["clip"] == 0.4).all()
    ceiling = runs["row"].str.startswith("network budget (ceiling)")
    tuned = runs[(runs["protocol"] == "tuned") & ~ceiling]
    baselines = (
        (tuned, network_privacy.load_results()),
        (runs[(runs["protocol"] == "tuned") & ceiling], untuned[untuned["row"].isin(
            runs.loc[ceiling, "row"])]),
    )  # fmt: skip
    compared = 0
    for mine, theirs in baselines:
        both = mine.merge(theirs, on=["experiment", "row", "seed"], suffixes=("", "_base"))
        assert len(both) == len(mine)
        for column in ("noise_multiplier", "local_epsilon", "network_epsilon", "epsilon_median"):
            np.testing.assert_allclose(both[column], both[f"{column}_base"], rtol=1e-9)
        assert (both["updates"] == both["updates_base"]).all()
        compared += len(both)
    assert compared == (runs["protocol"] == "tuned").sum()
