"""Private SGD over walks and gossip learning (Hegedűs et al. 2016 §3, §6): models, agents,
budgets, and what a run reports."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression, SGDClassifier

from netsim.cli import main as cli_main
from netsim.learning.datasets import load_dataset, preprocess
from netsim.learning.models import LinearModel
from netsim.scenario.loader import validate_scenario
from netsim.scenario.runner import run_in_memory


def learning_scenario(
    *,
    nodes=200,
    steps=None,
    dataset=None,
    walk=None,
    gossip_learning=None,
    churn=None,
    **learning,
):
    """A scenario dict: an ideal walk of ``steps`` one-second steps with an SGD agent."""
    data = {
        "name": "learning-test",
        "seed": 3,
        "nodes": nodes,
        "duration": steps if steps is not None else 2 * nodes,
        "topology": {"kind": "k_out", "k": 10},
        "learning": {
            "dataset": dataset or {"name": "spambase"},
            "evaluate_every": 50,
            **learning,
        },
    }
    if gossip_learning is not None:
        data["gossip_learning"] = gossip_learning
    else:
        data["walk"] = walk or {
            "kind": "ideal",
            "sampling": "without_replacement",
            "agent": {"kind": "sgd"},
        }
    if churn is not None:
        data["churn"] = churn
    return data


def run(data):
    return run_in_memory(validate_scenario(data, source="test", base_dir=None))


# --- models ---------------------------------------------------------------------------------


def numeric_gradient(model, w, x, y, h=1e-6):
    grad = np.zeros_like(w)
    for index in np.ndindex(w.shape):
        up, down = w.copy(), w.copy()
        up[index] += h
        down[index] -= h
        grad[index] = (model.loss_value(up, x, y) - model.loss_value(down, x, y)) / (2 * h)
    return grad


@pytest.mark.parametrize(
    ("name", "classes"), [("logreg", 2), ("logreg", 4), ("svm", 2), ("svm", 4)]
)
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_gradients_match_finite_differences(name, classes, seed):
    rng = np.random.default_rng(seed)
    model = LinearModel(name, classes, 5)
    w = rng.normal(size=model.shape)
    x = rng.normal(size=5)
    y = int(rng.integers(classes))
    if model.loss in ("hinge", "multiclass_hinge"):
        # stay away from the kink, where the loss has no derivative
        scores = np.atleast_1d(w @ x)
        if model.loss == "hinge":
            margin = 1 - model.label(y) * float(scores[0])
        else:
            margin = 1 + np.delete(scores, y).max() - scores[y]
            runner_up = np.sort(np.delete(scores, y))
            if runner_up.size > 1 and runner_up[-1] - runner_up[-2] < 1e-3:
                return
        if abs(margin) < 1e-3:
            return
    assert np.allclose(model.gradient(w, x, y), numeric_gradient(model, w, x, y), atol=1e-5)


def test_binary_sensitivity_is_the_papers_two():
    assert LinearModel("logreg", 2, 57).sensitivity("L2") == 2.0
    assert LinearModel("svm", 2, 57).sensitivity("L1") == 2.0
    assert LinearModel("logreg", 7, 19).sensitivity("L2") == pytest.approx(2 * math.sqrt(2))


# --- SGD over an ideal walk -----------------------------------------------------------------


def test_non_private_sgd_on_spambase_is_close_to_scikit_learn():
    """Ten passes without noise over all 4,140 records reach scikit-learn's SGD within a few
    points (same data, local L2 normalisation, λ = 1e-4)."""
    data = learning_scenario(nodes=4140, steps=41_400, algorithm="sgd", evaluate_every=4140)
    _built, frames = run(data)
    ours = frames["accuracy"]["accuracy"].iloc[-1]
    prepared = preprocess(load_dataset("spambase"), normalisation="local", norm="L2")
    baseline = SGDClassifier(loss="log_loss", alpha=1e-4, random_state=0)
    reference = baseline.fit(prepared.x_train, prepared.y_train).score(
        prepared.x_test, prepared.y_test
    )
    assert reference > 0.88
    assert abs(ours - reference) < 0.04, (ours, reference)


def test_private_sgd_is_reproducible_at_a_fixed_seed():
    data = learning_scenario(algorithm="dp-sgd-5", noise="l2_paper")
    first = run(data)[1]
    second = run(data)[1]
    for table in ("accuracy", "sgd_visits", "privacy_ledger"):
        assert first[table].equals(second[table]), table
    # pinned: a change of these numbers is a change of the simulated algorithm
    accuracy = first["accuracy"]["accuracy"].round(6).tolist()
    assert accuracy[:3] == pytest.approx([0.611714, 0.626898, 0.585683])
    assert len(accuracy) == 7  # every 50 of 399 visits


def test_without_replacement_visits_every_node_once_per_pass():
    _built, frames = run(learning_scenario(nodes=150, steps=450))
    nodes = frames["sgd_visits"]["node"].to_numpy()
    assert nodes.size == 449  # steps at 1, 2, … < 450 s
    for start in (0, 150):
        assert sorted(nodes[start : start + 150].tolist()) == list(range(150))


def test_dp_sgd_1_updates_each_record_once_and_logs_the_refused_visits():
    _built, frames = run(
        learning_scenario(
            nodes=100,
            steps=400,
            algorithm="dp-sgd-1",
            walk={"kind": "ideal", "sampling": "with_replacement", "agent": {"kind": "sgd"}},
        )
    )
    visits = frames["sgd_visits"]
    updated = visits[visits["updated"]]
    assert updated["node"].is_unique  # one update per record
    refused = visits[~visits["updated"]]
    assert (refused["epsilon"] == 0).all() and len(refused) > 0
    assert set(refused["node"]) <= set(updated["node"])  # refused only after the one use
    summary = frames["learning_summary"].iloc[0]
    assert summary["updates"] == len(updated) and summary["refused"] == len(refused)
    assert summary["guarantee"] == "epsilon-DP" and summary["epsilon"] == pytest.approx(1.0)


@settings(max_examples=12, deadline=None)
@given(
    algorithm=st.sampled_from(["dp-sgd-1", "dp-sgd-3", "dp-sgd-5", "dp-sgd-inf"]),
    noise=st.sampled_from(["l1", "l2_paper", "k_norm_l2"]),
    sampling=st.sampled_from(["with_replacement", "without_replacement"]),
    epsilon=st.floats(0.05, 5.0),
    seed=st.integers(0, 1000),
)
def test_no_record_ever_exceeds_its_budget(algorithm, noise, sampling, epsilon, seed):
    data = learning_scenario(
        nodes=60,
        steps=500,
        dataset={"name": "digits"},
        algorithm=algorithm,
        noise=noise,
        epsilon=epsilon,
        walk={"kind": "ideal", "sampling": sampling, "agent": {"kind": "sgd"}},
    )
    data["seed"] = seed
    _built, frames = run(data)
    records = frames["privacy_records"]
    assert (records["epsilon_spent"] <= epsilon * (1 + 1e-9)).all()
    ledger = frames["privacy_ledger"]
    spent = ledger.groupby("record")["epsilon"].sum()
    assert np.allclose(
        spent.to_numpy(), records.set_index("record").loc[spent.index, "epsilon_spent"]
    )
    if algorithm != "dp-sgd-inf":
        k = int(algorithm.rsplit("-", 1)[1])
        assert (records["uses"] <= k).all()
        assert np.allclose(ledger["epsilon"], epsilon / k)
    expected = "none" if noise == "l2_paper" else "epsilon-DP"
    assert set(ledger["guarantee"]) == {expected}
    assert frames["learning_summary"]["guarantee"].iloc[0] == expected


def test_a_multiclass_model_learns_segmentation_without_noise():
    _built, frames = run(
        learning_scenario(
            nodes=1890,
            steps=5 * 1890,
            dataset={"name": "segmentation"},
            algorithm="sgd",
            model="svm",
            evaluate_every=1890,
        )
    )
    assert frames["accuracy"]["accuracy"].iloc[-1] > 0.75  # 7 classes: chance is 0.14


# --- over the walk service, and gossip learning ----------------------------------------------


def test_sgd_over_the_walk_service_with_churn_charges_one_accountant():
    data = learning_scenario(
        nodes=300,
        steps=900,
        algorithm="dp-sgd-5",
        noise="l2_paper",
        walk={
            "kind": "service",
            "transfer_time": 1.0,
            "timeout": 4.0,
            "kill_probability": 0.05,
            "agent": {"kind": "sgd"},
        },
        churn={
            "kind": "synthetic",
            "online": {"dist": "exponential", "mean": "5min"},
            "offline": {"dist": "exponential", "mean": "5min"},
        },
    )
    data["gossip"] = {"period": 0.25}
    _built, frames = run(data)
    visits = frames["sgd_visits"]
    assert visits["walk"].nunique() > 1  # kills force restarts from local copies
    records = frames["privacy_records"]
    assert (records["uses"] <= 5).all() and (records["epsilon_spent"] <= 1 + 1e-9).all()
    # every walk's visits are charged to the same records: the ledger has every update
    assert len(frames["privacy_ledger"]) == int(visits["updated"].sum())
    restarted = frames["walk_restarts"]
    assert (restarted["reason"] == "timeout").sum() > 0


def test_gossip_learning_spends_the_budgets_of_all_records_at_once():
    """N models in parallel: under DP-SGD-1 every record is used up within a few periods,
    and no model gets more than a handful of updates — the paper's case for one walk."""
    data = learning_scenario(
        nodes=200, steps=20, algorithm="dp-sgd-1", gossip_learning={"period": 1.0}
    )
    _built, frames = run(data)
    visits = frames["sgd_visits"]
    assert (visits["walk"] == -1).all()
    records = frames["privacy_records"]
    assert (records["uses"] <= 1).all()
    assert records["uses"].mean() > 0.95  # almost every record spent within 20 periods
    assert visits["updates"].max() <= 12
    walk = run(learning_scenario(nodes=200, steps=20, algorithm="dp-sgd-1"))[1]
    assert walk["sgd_visits"]["updates"].max() == 19  # one walk: every visit updates it


# --- yardsticks (principle 9 of docs/architecture.md) -----------------------------


def test_the_summary_carries_the_splits_majority_and_centralised_accuracy():
    """On the bundled Spambase split, learning_summary holds the test share of the training
    split's majority class and scikit-learn's logistic regression (C = 1) fitted on the whole
    pre-processed training split — each computed here independently."""
    _built, frames = run(learning_scenario(nodes=100, steps=50, noise="l1"))
    summary = frames["learning_summary"].iloc[0]
    data = preprocess(load_dataset("spambase"), normalisation="local", norm="L1")
    mode = np.bincount(data.y_train).argmax()
    assert summary["majority_accuracy"] == np.mean(data.y_test == mode)
    assert summary["majority_accuracy"] == pytest.approx(282 / 461)
    centralised = LogisticRegression(C=1.0, max_iter=5000).fit(data.x_train, data.y_train)
    assert summary["centralised_accuracy"] == centralised.score(data.x_test, data.y_test)
    assert summary["centralised_accuracy"] > summary["majority_accuracy"] + 0.2


def test_the_summary_lines_print_the_yardsticks_beside_the_accuracy():
    from netsim.learning.sgd_agent import SGDAgent

    _built, frames = run(learning_scenario(nodes=100, steps=120))
    lines = SGDAgent.summary_lines(frames)
    accuracy = next(line for line in lines if line.startswith("test accuracy after"))
    summary = frames["learning_summary"].iloc[0]
    assert f"majority class {summary['majority_accuracy']:.3f}" in accuracy
    assert f"centralised non-private {summary['centralised_accuracy']:.3f}" in accuracy


def gossip_run(nodes=60, steps=12, algorithm="sgd"):
    data = learning_scenario(
        nodes=nodes, steps=steps, algorithm=algorithm, gossip_learning={"period": 1.0}
    )
    data["metrics"] = {"sample_every": 4}
    return run(data)


def test_gossip_learning_records_the_spread_of_accuracy_across_models():
    """Every metrics.sample_every and at the end: mean, min, median and max test accuracy of
    every node's current model, as each model alone would score."""
    built, frames = gossip_run()
    spread = frames["gossip_learning_accuracy"]
    assert spread["time"].tolist() == [4.0, 8.0, 12.0]  # the last one at the end of the run
    assert (spread["models"] == 60).all()
    agent, models = built["learning"], built["gossip_learning"].models
    final = np.array([agent.accuracy(state) for state in models.models])
    last = spread.iloc[-1]
    assert last["accuracy_mean"] == pytest.approx(final.mean())
    assert last["accuracy_min"] == final.min() and last["accuracy_max"] == final.max()
    assert last["accuracy_median"] == np.median(final)
    assert last["visits_mean"] == pytest.approx(np.mean([m.visits for m in models.models]))
    assert last["accuracy_max"] > last["accuracy_min"]  # the models differ
    lines = type(built["gossip_learning"]).summary_lines(frames)
    assert "60 models at 12 s" in lines[0] and "majority class" in lines[0]


def test_gossip_learning_samples_models_from_its_own_stream(monkeypatch):
    """Past EVALUATED_MODELS nodes a fixed sample of nodes is evaluated, drawn from a stream
    of its own: every other table is unchanged."""
    import netsim.algorithms.gossip_learning.application as application

    reference, everyone = gossip_run(algorithm="dp-sgd-5")  # draws noise while running
    monkeypatch.setattr(application, "EVALUATED_MODELS", 25)
    built, sampled = gossip_run(algorithm="dp-sgd-5")
    assert (sampled["gossip_learning_accuracy"]["models"] == 25).all()
    assert len(set(built["gossip_learning"].evaluated.tolist())) == 25
    for table in ("sgd_visits", "privacy_records"):
        assert sampled[table].equals(everyone[table]), table
    for ours, theirs in zip(
        built["gossip_learning"].models.models,
        reference["gossip_learning"].models.models,
        strict=True,
    ):  # the same noise went into every model
        assert np.array_equal(ours.parameters, theirs.parameters)


@pytest.mark.parametrize("classes", [2, 4])
def test_batched_model_accuracies_match_one_model_at_a_time(classes):
    from netsim.learning.models import build_model, model_accuracies

    rng = np.random.default_rng(classes)
    linear = LinearModel("logreg", classes, 6)
    model = build_model("logreg", classes, 6)
    x, y = rng.normal(size=(50, 6)), rng.integers(0, classes, 50)
    weights = [rng.normal(size=linear.shape) for _ in range(7)]
    expected = [linear.accuracy(w, x, y) for w in weights]
    flat = [w.ravel() for w in weights]
    assert model_accuracies(model, flat, x, y).tolist() == expected


# --- bad input ------------------------------------------------------------------------------


def run_cli(tmp_path, capsys, text):
    path = tmp_path / "scenario.yaml"
    path.write_text(text, encoding="utf-8")
    code = cli_main(["run", str(path), "--out", str(tmp_path / "runs"), "-q"])
    return code, capsys.readouterr().err


BASE = """\
name: bad
seed: 1
nodes: {nodes}
duration: 10s
topology: {{kind: k_out, k: 1}}
walk: {{kind: ideal, agent: {{kind: sgd}}}}
learning:
  dataset: {dataset}
  epsilon: {epsilon}
"""


def test_more_nodes_than_records_is_refused(tmp_path, capsys):
    code, err = run_cli(tmp_path, capsys, BASE.format(nodes=200, dataset="{name: wine}", epsilon=1))
    assert code == 2
    assert "learning.dataset" in err and "142 training records" in err and "200 nodes" in err
    assert "Traceback" not in err


def test_run_prints_accuracy_and_the_guarantee(tmp_path, capsys):
    path = tmp_path / "scenario.yaml"
    text = BASE.format(nodes=20, dataset="{name: wine}", epsilon=0.5)
    path.write_text(text + "  noise: k_norm_l2\n  evaluate_every: 3\n", encoding="utf-8")
    assert cli_main(["run", str(path), "--out", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "privacy per record: ε-DP with ε = 0.5" in out and "test accuracy after 9 visits" in out


def test_validate_reads_the_data_set_too(tmp_path, capsys):
    path = tmp_path / "scenario.yaml"
    path.write_text(BASE.format(nodes=200, dataset="{name: wine}", epsilon=1), encoding="utf-8")
    assert cli_main(["validate", str(path)]) == 2
    assert "142 training records" in capsys.readouterr().err


def test_non_positive_epsilon_is_refused(tmp_path, capsys):
    code, err = run_cli(tmp_path, capsys, BASE.format(nodes=20, dataset="{name: wine}", epsilon=0))
    assert code == 2 and "learning.epsilon" in err and "Traceback" not in err


def test_a_bad_data_file_names_file_and_line(tmp_path, capsys):
    csv = tmp_path / "data.csv"
    csv.write_text("a,b,label\n1,2,x\n3,4,y\n5,oops,x\n", encoding="utf-8")
    dataset = f"{{name: csv, path: {csv}, label: label}}"
    code, err = run_cli(tmp_path, capsys, BASE.format(nodes=2, dataset=dataset, epsilon=1))
    assert code == 2 and "data.csv" in err and "line 4" in err and "Traceback" not in err
    csv.write_text("a,b,label\n1,2,x\n3,4\n", encoding="utf-8")
    code, err = run_cli(tmp_path, capsys, BASE.format(nodes=2, dataset=dataset, epsilon=1))
    assert code == 2 and "line 3" in err
    dataset = f"{{name: csv, path: {csv}, label: nope}}"
    csv.write_text("a,b,label\n1,2,x\n3,4,y\n", encoding="utf-8")
    code, err = run_cli(tmp_path, capsys, BASE.format(nodes=2, dataset=dataset, epsilon=1))
    assert code == 2 and "nope" in err and "label" in err


def test_learning_without_a_learner_is_refused(tmp_path, capsys):
    text = BASE.format(nodes=20, dataset="{name: wine}", epsilon=1).replace(
        "walk: {kind: ideal, agent: {kind: sgd}}", "walk: {kind: ideal}"
    )
    code, err = run_cli(tmp_path, capsys, text)
    assert code == 2 and "nothing learns" in err


def test_dp_sgd_inf_past_a_thousand_uses_keeps_the_model_finite_and_says_so():
    """The t-th use of a record under DP-SGD-∞ spends ε·2^−t: past about 1,000 uses the noise
    scale overflows. Such a step is left out (its ε spent), the model stays finite, the
    summary still counts every visit, and the run warns; past about 1,075 uses ε_t is 0 and
    the record refuses."""
    data = learning_scenario(
        nodes=2,
        steps=2400,
        algorithm="dp-sgd-inf",
        noise="k_norm_l2",
        walk={"kind": "ideal", "sampling": "with_replacement", "agent": {"kind": "sgd"}},
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # NaN weights warn in the matmul
        built, frames = run({**data, "topology": {"kind": "complete"}})
    visits, summary = frames["sgd_visits"], frames["learning_summary"].iloc[0]
    assert np.isfinite(frames["accuracy"]["accuracy"]).all()
    left_out = visits[~visits["updated"] & (visits["epsilon"] > 0)]
    refused = visits[visits["epsilon"] == 0]
    assert len(left_out) > 0 and len(refused) > 0
    assert summary["visits"] == len(visits) == 2399  # a step a second from t = 1 s
    assert summary["updates"] == visits["updated"].sum()
    assert summary["refused"] == len(refused)
    assert any(f"{len(left_out)} updates were left out" in w for w in built.warnings)
    records = frames["privacy_records"]
    assert (records["epsilon_spent"] <= 1.0).all()


# --- the validation split in the summary ----------------------------------------------------


def test_walk_summary_scores_the_last_samples_on_test_and_validation_rows():
    """With learning.dataset.validation_fraction the summary's test accuracy is the mean of
    the accuracy table's rows with the most visits, and its validation accuracy the same
    models' accuracy on the validation rows, computed here from the data set independently."""
    dataset = {"name": "spambase", "validation_fraction": 0.25}
    built, frames = run(learning_scenario(nodes=300, steps=300, dataset=dataset, algorithm="sgd"))
    summary, accuracy = frames["learning_summary"].iloc[0], frames["accuracy"]
    last = accuracy[accuracy["visits"] == accuracy["visits"].max()]
    assert summary["test_accuracy"] == last["accuracy"].mean()
    data = preprocess(
        load_dataset("spambase", validation_fraction=0.25), normalisation="local", norm="L2"
    )
    assert built["learning"].x_validation.shape == (1150, 57)
    assert np.array_equal(built["learning"].x_validation, data.x_validation)
    lines = type(built["learning"]).summary_lines(frames)
    assert f"validation accuracy {summary['validation_accuracy']:.3f}" in "\n".join(lines)
    assert 0.6 < summary["validation_accuracy"] < 1.0
    # without a validation split: the same test rows, NaN for validation, no such line
    _built, plain = run(learning_scenario(nodes=300, steps=300, algorithm="sgd"))
    assert math.isnan(plain["learning_summary"].iloc[0]["validation_accuracy"])
    assert plain["learning_summary"].iloc[0]["test_accuracy"] > 0.6


@pytest.mark.parametrize("mode", ["exact", "rounds"])
def test_gossip_summary_scores_the_evaluated_models_at_the_end(mode):
    """Gossip learning: the summary's test accuracy is the final spread row's mean and its
    validation accuracy the same models' mean on the validation rows."""
    data = learning_scenario(
        nodes=60, steps=12, algorithm="sgd", gossip_learning={"period": 1.0, "mode": mode},
        dataset={"name": "spambase", "validation_fraction": 0.2},
    )  # fmt: skip
    data["metrics"] = {"sample_every": 4}
    built, frames = run(data)
    summary = frames["learning_summary"].iloc[0]
    last = frames["gossip_learning_accuracy"].iloc[-1]
    assert summary["test_accuracy"] == pytest.approx(last["accuracy_mean"], abs=1e-12)
    agent, models = built["learning"], built["gossip_learning"].models
    params = models.parameters_of(np.arange(60))
    expected = np.mean(
        [agent.sgd.model.accuracy(w, agent.x_validation, agent.y_validation) for w in params]
    )
    assert summary["validation_accuracy"] == pytest.approx(expected, abs=1e-12)
