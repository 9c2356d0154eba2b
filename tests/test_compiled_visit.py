"""Gossip learning's visit on the compiled exact core (netsim.learning.compiled_visit) is the
agent's, bit for bit: its arithmetic on any float64 input, the accuracies its rows carry, the
ledger charges it gathers, and whole runs of every configuration on both engines (the kernel's
visits, and the ones it leaves to Python, in their place)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from netsim.contracts import ExactRun
from netsim.learning import compiled_visit
from netsim.learning.losses import _sigmoid, record_gradient
from netsim.learning.models import LinearModel, build_model, each_accuracy, model_accuracies
from netsim.log import EventLog
from netsim.privacy.ledger import LEDGER_TABLE, PrivacyLedger
from netsim.privacy.mechanisms import no_noise
from netsim.scenario.build import build_run
from netsim.scenario.loader import load_scenario
from tests.test_exact_core import assert_same_tables

REPO = Path(__file__).resolve().parents[1]
GOSSIP_LEARNING = REPO / "scenarios" / "learning" / "spambase-gossip-learning.yaml"
FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)
FINITE = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, width=64)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and np.array_equal(a.view(np.int64), b.view(np.int64))


def compiled_gradient(loss: str, w: np.ndarray, x: np.ndarray, y: int) -> np.ndarray:
    out = np.full_like(x, np.nan)
    code = compiled_visit.LOGISTIC if loss == "logistic" else compiled_visit.HINGE
    compiled_visit.record_gradient(code, w, x, y, out)
    return out


@st.composite
def vector_pairs(draw, elements=FINITE):
    n = draw(st.integers(1, 80))
    w = draw(arrays(np.float64, n, elements=elements))
    x = draw(arrays(np.float64, n, elements=elements))
    return w, x


@settings(max_examples=300, deadline=None)
@given(vector_pairs(), st.sampled_from([-1, 1]), st.sampled_from(["logistic", "hinge"]))
def test_the_compiled_gradient_is_numpys_bit_for_bit(pair, y, loss):
    w, x = pair
    assert same_bits(compiled_gradient(loss, w, x, y), record_gradient(loss, w, x, y))


def test_the_compiled_gradient_sums_w_dot_x_as_numpys_blas_does():
    """On the data sets' dimensions (Spambase 57, Adult 104, MNIST 784) a dot product summed
    in another order differs in its last bits for most random vectors: the compiled gradient
    must give numpy's bits on every one, and near the hinge's kink."""
    rng = np.random.default_rng(0)
    for n in (57, 104, 784):
        for _ in range(50):
            w, x = rng.standard_normal(n), rng.standard_normal(n)
            for y in (-1, 1):
                for loss in ("logistic", "hinge"):
                    assert same_bits(compiled_gradient(loss, w, x, y),
                                     record_gradient(loss, w, x, y))  # fmt: skip
            x = x / abs(float(w @ x))  # y w·x about ±1
            for y in (-1, 1):
                assert same_bits(compiled_gradient("hinge", w, x, y),
                                 record_gradient("hinge", w, x, y))  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    vector_pairs(FLOATS),
    st.floats(min_value=1e-6, max_value=10.0),
    st.sampled_from([0.0, 1e-4, 0.5]),
)
def test_the_compiled_update_is_numpys_bit_for_bit_and_says_whether_it_is_finite(
    pair, eta, regularisation
):
    w, gradient = pair
    with np.errstate(over="ignore", invalid="ignore"):
        expected = w - eta * (regularisation * w + gradient)
    out = np.empty_like(w)
    finite = compiled_visit.sgd_update(w, gradient, eta, regularisation, out)
    assert same_bits(out, expected)
    assert finite == bool(np.isfinite(expected).all())


def test_the_sigmoid_is_the_python_ones_at_its_branches_and_tails():
    for z in (0.0, -0.0, 1e-300, -1e-300, 0.5, -0.5, 36.0, -36.0, 709.0, -709.0, 745.0, -746.0):
        assert compiled_visit.sigmoid(z) == _sigmoid(z)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.integers(1, 70), st.integers(1, 30), st.integers(0, 2**32 - 1))
def test_accuracies_computed_together_are_each_models_own(rows, features, models, seed):
    """each_accuracy (a stack of matrix-vector products) and model_accuracies (one matrix
    product, counted) give each model's ``accuracy`` exactly, and that is the mean of its
    predictions' agreement, as the model slot's default computes it."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, features)) * rng.uniform(0.01, 100)
    y = rng.integers(0, 2, rows)
    params = rng.standard_normal((models, features))
    params[0] = 0.0  # every score 0: predicted 0
    model = build_model("logreg", 2, features)
    one_by_one = np.array([model.accuracy(p, x, y) for p in params])
    by_predictions = np.array([float(np.mean(model.predict(p, x) == y)) for p in params])
    assert same_bits(one_by_one, by_predictions)
    assert same_bits(each_accuracy(model, params, x, y), one_by_one)
    assert same_bits(model_accuracies(model, list(params), x, y),
                     np.mean(model.predict_many(params, x) == y[None, :], axis=1))  # fmt: skip
    assert same_bits(LinearModel("logreg", 2, features).binary_accuracies(params, x, y),
                     model_accuracies(model, list(params), x, y))  # fmt: skip


@pytest.mark.parametrize("stream_every", [0, 3, 7, 1000])
def test_charges_kept_together_are_the_charges_kept_one_by_one(stream_every):
    """keep_many streams at the rows keep_one would, into the same table."""
    event, other = no_noise(np.zeros(3))[1], no_noise(np.zeros(3))[1]
    times, records, uses = np.arange(20.0), np.arange(20) % 6, np.arange(20) // 6 + 1
    tables = []
    for together in (False, True):
        log = EventLog()
        ledger = PrivacyLedger()
        if stream_every:
            ledger.stream(log.table(LEDGER_TABLE), stream_every)
        ledger.keep_one(-1.0, 5, 1, other)
        if together:
            ledger.keep_many(times[:13], records[:13], uses[:13], event)
            ledger.keep_many(times[13:], records[13:], uses[13:], event)
        else:
            for k in range(20):
                ledger.keep_one(float(times[k]), int(records[k]), int(uses[k]), event)
        ledger.write(log)
        log.close()
        tables.append(log.to_frames()[LEDGER_TABLE.name])
    assert len(tables[0]) == 21
    pd.testing.assert_frame_equal(tables[0], tables[1], check_exact=True)


def test_charges_kept_together_are_dropped_when_the_ledger_keeps_none():
    ledger = PrivacyLedger()
    ledger.stream(None, 0)
    event = no_noise(np.zeros(2))[1]
    ledger.keep_many(np.zeros(3), np.arange(3), np.ones(3, dtype=np.int64), event)
    assert ledger.rows == 0 and not ledger.chunks


def run_both(
    overrides: list[str], path: Path = GOSSIP_LEARNING
) -> tuple[tuple[str, dict], tuple[str, dict]]:
    results = []
    for engine in ("simpy", "auto"):
        scenario = load_scenario(path, overrides)
        log = EventLog()
        built = build_run(scenario, log, engine=engine)
        built.sim.run(scenario.duration)
        log.close()
        results.append((built.exact_engine, log.to_frames()))
    return results[0], results[1]


#: Each configuration of gossip learning, with which of the kernel's paths it takes: the free
#: step (SGD), the refused use (DP-SGD-k), every visit in Python (clipping, mini-batches,
#: Poisson sampling, composed accounting), the merge by averaging, the node as unit, the
#: hinge loss, shards of several records, churn.
CONFIGURATIONS = {
    "sgd": ["learning.algorithm=sgd"],
    "dp-sgd-1": [],
    "dp-sgd-3, node unit, 4 records a node": [
        "learning.algorithm=dp-sgd-3", "learning.privacy_unit=node",
        "learning.records_per_node=4", "nodes=1000",
    ],
    "sgd, svm, merge by averaging": [
        "learning.algorithm=sgd", "learning.model=svm", "gossip_learning.merge=average",
    ],
    "sgd clipped (Python)": ["learning.algorithm=sgd", "learning.clip=0.5"],
    "dp-sgd-2, mini-batches (Python)": [
        "learning.algorithm=dp-sgd-2", "learning.records_per_node=4", "learning.batch=2",
        "nodes=1000",
    ],
    "dp-sgd-3, gaussian, rdp (refused by composition, Python)": [
        "learning.algorithm=dp-sgd-3", "learning.noise={kind: gaussian}",
        "learning.accounting=rdp", "learning.delta=1e-5",
    ],
    "sgd under churn, lossy links": [
        "learning.algorithm=sgd", "links.loss=0.1",
        "churn={kind: synthetic, online: {dist: exponential, mean: 5s}, "
        "offline: {dist: exponential, mean: 3s}}",
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CONFIGURATIONS))
def test_gossip_learning_is_identical_on_both_engines(name):
    overrides = ["duration=12s", "nodes=600", "metrics.sample_every=4s",
                 *CONFIGURATIONS[name]]  # fmt: skip
    (simpy_engine, simpy_tables), (engine, tables) = run_both(overrides)
    assert simpy_engine == "simpy: asked for"
    assert engine == "compiled", engine
    assert_same_tables(simpy_tables, tables)
    visits = tables["sgd_visits"]
    assert len(visits) > 1000 and len(tables["accuracy"]) > 50
    if name == "dp-sgd-1":
        assert visits["updated"].any() and not visits["updated"].all()


def test_gossip_learning_per_observer_runs_on_simpy_and_says_why():
    """Privacy per observer follows every model's lineage in Python: the run is SimPy's (the
    threat model has no compiled form), and gossip learning's own answer says why too."""
    scenario = load_scenario(GOSSIP_LEARNING, [
        "duration=3s", "nodes=100", "learning.algorithm=dp-sgd-3",
        "learning.noise={kind: gaussian}", "learning.accounting=rdp", "learning.delta=1e-5",
        "privacy={model: network, budget: local}",
    ])  # fmt: skip
    built = build_run(scenario, EventLog())
    assert built.exact_engine.startswith("simpy: privacy (ThreatModel) has no compiled form")
    rule = built.get("gossip_learning").models
    answer = rule.exact_support(ExactRun(built.components))
    assert not answer.ok
    assert answer.reason == (
        "gossip learning under privacy.model network follows each model's lineage in Python: "
        "it has no compiled form"
    )


def test_nan_models_stay_identical():
    """A learning rate that overflows: the steps left out as not finite, on both engines."""
    (_, simpy_tables), (engine, tables) = run_both(
        ["duration=6s", "nodes=300", "learning.algorithm=sgd", "learning.learning_rate=1e308"]
    )
    assert engine == "compiled"
    assert_same_tables(simpy_tables, tables)
    assert (~tables["sgd_visits"]["updated"]).any()  # steps left out


def test_the_walk_service_with_the_sgd_agent_is_identical_on_both_engines():
    """DP-SGD-5 on the walk service (its steps Python's, the agent's visits beside the
    core's gossip and timers) under the shipped synthetic churn trace."""
    scenario_path = REPO / "scenarios" / "learning" / "spambase-service-stunner.yaml"
    overrides = ["duration=80s", "nodes=1500", "gossip.mode=exact",
                 "churn={kind: trace, path: ../../traces/stunner-synthetic.csv}"]  # fmt: skip
    (simpy_engine, simpy_tables), (engine, tables) = run_both(overrides, scenario_path)
    assert (simpy_engine, engine) == ("simpy: asked for", "compiled")
    assert_same_tables(simpy_tables, tables)
    assert len(tables["sgd_visits"]) > 50 and len(tables["walk_restarts"]) > 0


def test_gossip_learning_in_rounds_mode_says_rounds():
    scenario = load_scenario(GOSSIP_LEARNING, ["duration=3s", "nodes=100",
                                               "gossip_learning.mode=rounds"])  # fmt: skip
    assert build_run(scenario, EventLog()).exact_engine == "rounds"
