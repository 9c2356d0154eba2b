"""DOLA's released (covered) model, its equivalence with an independent DOLA written from the
paper, and the policy name of its privacy report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from netsim.algorithms.dola.config import DolaConfig
from netsim.algorithms.dola.learner import DolaLearner, ReleasePerPass
from netsim.learning.online_data import synthetic_ball
from netsim.scenario.loader import validate_scenario
from netsim.scenario.runner import run_in_memory, run_scenario

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analysis"))  # the scripts import their shared module by name

import dola_independent  # noqa: E402

#: A small DOLA run: 4 nodes on a ring, 6 rounds, 2 examples a round, Alg. 1 at ε = 1.
SMALL = {
    "name": "dola-small",
    "seed": 5,
    "nodes": 4,
    "duration": 6,
    "topology": {"kind": "ring", "k": 1},
    "dola": {
        "data": {"name": "synthetic_ball", "options": {"examples": 400, "features": 3}},
        "algorithm": "laplace",
        "epsilon": 1.0,
        "batch": 2,
        "strong_convexity": 1.0,
        "radius": 1.0,
        "regret_checkpoints": 0,
        "evaluate_every": 2,
    },
}


def small(**dola: object) -> object:
    spec = {**SMALL, "dola": {**SMALL["dola"], **dola}}
    return validate_scenario(spec, source="test", base_dir=None)


def test_the_released_model_accuracy_is_that_of_the_broadcast_values():
    """The released columns are the accuracies of the noisy broadcast values w̃ (their running
    average over rounds and nodes, their mean, node j's), computed here from the captured
    releases; the internal iterates give other accuracies (a mutation that reports the
    iterates as the released model fails)."""
    scenario = small(epsilon=0.3)
    capture = dola_independent.capture_run(scenario)
    x, y = capture.x_test, capture.y_test
    released = np.array(capture.released)
    iterates = np.array(capture.iterates)
    rounds = capture.tables["dola_rounds"]
    for _, row in rounds.iterrows():
        t = int(row["round"])
        assert row["accuracy_released_averaged"] == dola_independent.accuracy(
            released[:t].mean(axis=(0, 1)), x, y
        )
        assert row["accuracy_released_mean"] == dola_independent.accuracy(
            released[t - 1].mean(axis=0), x, y
        )
        assert row["accuracy_released_node"] == dola_independent.accuracy(released[t - 1, 0], x, y)
    summary = capture.tables["dola_summary"].iloc[0]
    final = rounds.iloc[-1]
    for column in ("averaged", "mean", "node"):
        assert summary[f"accuracy_released_{column}"] == final[f"accuracy_released_{column}"]
    # the released values are not the iterates, and neither are their accuracies
    assert np.abs(released - iterates).min() > 0
    internal = (
        rounds[["accuracy_averaged", "accuracy_mean", "accuracy_node"]].to_numpy(),
        rounds[
            ["accuracy_released_averaged", "accuracy_released_mean", "accuracy_released_node"]
        ].to_numpy(),
    )
    assert (internal[0] != internal[1]).sum() >= 6


def test_the_mixed_model_is_the_projected_mix_of_the_released_values():
    """mixed_models() is Proj_W(A_t w̃_{t−1}) in every round, computed here from the captured
    releases and A_t; the same from the iterates (A_t w_{t−1}, or this round's w_t) is far
    from it, so a mutation that builds the covered model from the internal iterates fails.
    The column accuracy_released_mixed_averaged is the accuracy of its running average, and
    the independent DOLA's releases give the same accuracy."""
    capture = dola_independent.capture_run(small(epsilon=0.3))
    released, iterates = np.array(capture.released), np.array(capture.iterates)
    mixed = np.array(capture.mixed)
    before = np.concatenate([np.zeros_like(released[:1]), released[:-1]])
    iterates_before = np.concatenate([np.zeros_like(iterates[:1]), iterates[:-1]])
    expected = np.array([
        dola_independent.project(a @ w, 1.0) for a, w in zip(capture.mixing, before, strict=True)
    ])  # fmt: skip
    np.testing.assert_allclose(mixed, expected, rtol=0, atol=1e-15)
    from_iterates = np.array([
        dola_independent.project(a @ w, 1.0)
        for a, w in zip(capture.mixing, iterates_before, strict=True)
    ])  # fmt: skip
    assert np.abs(mixed[1:] - from_iterates[1:]).max(axis=(1, 2)).min() > 1e-3
    assert np.abs(mixed - iterates).max(axis=(1, 2)).min() > 1e-3
    x, y = capture.x_test, capture.y_test
    for _, row in capture.tables["dola_rounds"].iterrows():
        t = int(row["round"])
        assert row["accuracy_released_mixed_averaged"] == dola_independent.accuracy(
            mixed[:t].mean(axis=(0, 1)), x, y
        )
    result = dola_independent.compare(capture, strong_convexity=1.0, radius=1.0)
    assert result.netsim_mixed == result.independent_mixed
    summary = capture.tables["dola_summary"].iloc[0]
    assert summary["accuracy_released_mixed_averaged"] == result.netsim_mixed


def test_the_mixed_model_uses_the_values_actually_received():
    """With link loss a node mixes the last value received from each neighbour (stale
    values): its mixed model is the projection of that amended mix, and an offline node
    keeps its last."""
    config = DolaConfig(data={"name": "synthetic_ball"}, algorithm="laplace", rounds=3,
                        strong_convexity=1.0, radius=0.5)  # fmt: skip
    data = synthetic_ball(examples=200, features=4, label_noise=0.1, seed=1)
    learner = DolaLearner(config, data, 3, shard_seed=1, rng=np.random.default_rng(0))
    ptr, idx = np.array([0, 2, 4, 5]), np.array([0, 1, 0, 1, 2], dtype=np.int32)
    val = np.array([0.5, 0.5, 0.5, 0.5, 1.0])
    learner.round(0, ptr, idx, val, np.arange(3))
    first = learner.released.copy()  # row 2 of A is e_2: node 2 mixes only its own value
    learner.round(1, ptr, idx, val, np.arange(3))
    kept = learner.mixed_models()[2].copy()
    np.testing.assert_allclose(kept, dola_independent.project(first[2:], 0.5)[0], rtol=1e-15)
    stale = np.full(4, 7.0)

    def correct(mixed: np.ndarray, nodes: np.ndarray) -> None:
        mixed[1] = stale

    learner.round(2, ptr, idx, val, np.array([0, 1]), correct=correct)
    mixed = learner.mixed_models()
    np.testing.assert_allclose(mixed[1], stale * 0.5 / np.linalg.norm(stale), rtol=1e-15)
    assert np.array_equal(mixed[2], kept)
    assert np.linalg.norm(mixed, axis=1).max() <= 0.5 * (1 + 1e-15)


def test_released_models_are_what_leaves_the_nodes():
    """Alg. 1: w̃ = w + σ (not the iterate); Alg. 2: the iterate is the release; Alg. 3: the
    iterate, computed from the mixed released duals; without noise: the iterate's copy."""
    data = synthetic_ball(examples=200, features=4, label_noise=0.1, seed=1)
    expected = {"laplace": "released", "gaussian": "weights", "sparse": "weights"}
    for algorithm, attribute in expected.items():
        config = DolaConfig(data={"name": "synthetic_ball"}, algorithm=algorithm, rounds=3,
                            strong_convexity=1.0, radius=1.0)  # fmt: skip
        learner = DolaLearner(config, data, 3, shard_seed=1, rng=np.random.default_rng(0))
        everyone = np.arange(3)
        ptr, idx, val = np.arange(4), everyone.astype(np.int32), np.ones(3)
        learner.round(0, ptr, idx, val, everyone)
        assert learner.released_models() is getattr(learner, attribute), algorithm
    assert not np.array_equal(learner.released, learner.weights)  # sparse: duals ϑ̃ ≠ w


def test_netsim_dola_equals_an_independent_dola_on_the_same_draws():
    """Li et al. Alg. 1 in plain numpy (analysis/dola_independent.py), fed the mixing
    matrices, examples and Laplace draws of a netsim run, gives the same iterates and releases
    in every round, the noise scale S(t)/ε = 2 α_t √n / (h ε) of every round, and the same
    test accuracies; the values at this seed are pinned."""
    capture = dola_independent.capture_run(small())
    assert len(capture.mixing) == len(capture.rows) == len(capture.noise) == 6
    assert capture.rows[0].shape == (4, 2)
    result = dola_independent.compare(capture, strong_convexity=1.0, radius=1.0)
    assert result.worst_iterate < 1e-14 and result.worst_released < 1e-14
    assert result.scale_error < 1e-14 and result.examples_once
    assert result.netsim_averaged == result.independent_averaged
    assert result.netsim_released == result.independent_released
    trace = dola_independent.independent_dola(
        capture.x_train, capture.y_train, capture.mixing, capture.rows, capture.noise,
        strong_convexity=1.0, radius=1.0,
    )  # fmt: skip
    np.testing.assert_allclose(np.array(capture.iterates), trace.iterates, rtol=0, atol=1e-15)
    np.testing.assert_allclose(
        capture.scales, [2 * np.sqrt(3) / (2 * t) for t in range(1, 7)], rtol=1e-15
    )
    np.testing.assert_allclose(
        trace.iterates[-1, 0], [-0.31742476955527954, 0.4846347604966686, 0.8150893598809362],
        rtol=1e-11,
    )  # fmt: skip


def test_without_noise_the_independent_dola_agrees_too():
    capture = dola_independent.capture_run(small(algorithm="non_private"))
    result = dola_independent.compare(capture, strong_convexity=1.0, radius=1.0)
    assert result.worst_iterate < 1e-14 and result.netsim_averaged == result.independent_averaged
    assert result.netsim_released == result.netsim_averaged  # nothing is perturbed


def test_recording_changes_nothing():
    """The capture's patches draw the same noise and give the same tables as a plain run."""
    capture = dola_independent.capture_run(small())
    plain = run_in_memory(small())[1]
    for name in ("dola_rounds", "dola_summary", "privacy_records"):
        assert capture.tables[name].equals(plain[name]), name


# --- the privacy report names DOLA's passes, not a DP-SGD policy ----------------------------


def test_the_manifest_names_one_release_per_example_per_pass(tmp_path):
    result = run_scenario(small(), out=tmp_path)
    report = json.loads((result.directory / "manifest.json").read_text())["privacy"]["dola"]
    assert report["policy"] == "dola: one release per example per pass (1 pass)"
    assert "sgd" not in report["policy"]
    assert report["spent_epsilon"] == 1.0 and report["uses"] == 4 * 6 * 2


def test_the_pass_policy_splits_the_budget_over_the_passes():
    policy = ReleasePerPass(3)
    assert policy.name == "dola: one release per example per pass (3 passes)"
    assert [policy.epsilon_for_use(1.5, use) for use in (1, 2, 3, 4)] == [0.5, 0.5, 0.5, None]
    # 60 rounds of 2 examples cycle through a node's ~75 rows twice
    run = small(max_passes=2)
    spec = run.model_dump(mode="json", exclude_none=True)
    spec["duration"] = 60.0
    tables = run_in_memory(validate_scenario(spec, source="test", base_dir=None))[1]
    assert tables["dola_summary"].iloc[0]["passes"] == 2
    assert tables["privacy_records"]["epsilon_spent"].max() == pytest.approx(1.0)


# --- the Adult study (research data from ../shared/data) -----------------------------------


@pytest.mark.slow
@pytest.mark.skipif(
    dola_independent.adult_path() is None,
    reason="UCI Adult is read from ../shared/data (research data, not shipped)",
)
def test_private_dola_on_adult_equals_the_independent_dola():
    """Adult at ε = 1, seed 1: the same iterates to rounding, ŵ_T 0.7115 and the released
    average 0.4934 (64 nodes, 400 rounds, noise 20,396 per coordinate at round 1)."""
    scenario = dola_independent.adult_scenario(1, 1.0)
    capture = dola_independent.capture_run(scenario)
    result = dola_independent.compare(
        capture, strong_convexity=scenario.dola.strong_convexity, radius=scenario.dola.radius
    )
    assert result.worst_iterate < 1e-13
    assert capture.scales[0] == pytest.approx(20396.078, rel=1e-7)
    assert result.netsim_averaged == result.independent_averaged == pytest.approx(0.7115, abs=1e-4)
    assert result.netsim_released == pytest.approx(0.4934, abs=1e-4)


def test_the_experiment_tables_label_the_iterates_and_the_released_model():
    """analysis/dola_experiments.py carries the released model's accuracy into its results
    and its tables, beside the iterates' and labelled (results without it keep the old
    tables, which analysis/README.md holds)."""
    import dola_experiments

    scenario = small(regret_checkpoints=2)
    tables = run_in_memory(scenario)[1]
    curves = dola_experiments.run_curves(tables, scenario)
    summary = tables["dola_summary"].iloc[0]
    assert (
        curves["final_accuracy_released_averaged"] == summary["accuracy_released_averaged"]
    ).all()
    for table in (dola_experiments.datasets_table(curves),
                  dola_experiments.regret_table(curves, ["algorithm"])):  # fmt: skip
        header, _, row = table.splitlines()[:3]
        cells = [c.strip() for c in header.split("|")]
        values = [c.strip() for c in row.split("|")]
        assert values[cells.index("accuracy ŵ_T (released)")] == (
            f"{summary['accuracy_released_averaged']:.3f}"
        )
        assert (
            values[cells.index("accuracy ŵ_T (iterates)")] == f"{summary['accuracy_averaged']:.3f}"
        )
    old = curves.drop(columns=[c for c in curves if "released" in c])
    assert "released" not in dola_experiments.datasets_table(old)
