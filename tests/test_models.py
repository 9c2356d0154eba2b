"""The model slot (``learning.model``): the built-in models' gradients, the checks every model
gets from ``netsim check``, clipping, and the MLP learning what a linear model cannot."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import netsim
from netsim.errors import ScenarioError
from netsim.learning.models import MLP, LinearModel, build_model
from netsim.testing import check_component

SPAMBASE_WALK = {
    "name": "spambase-models",
    "seed": 1,
    "nodes": 4140,
    "duration": "8280s",  # two passes
    "topology": {"kind": "ring", "k": 2},
    "walk": {"kind": "ideal", "sampling": "without_replacement", "step_time": "1s",
             "agent": {"kind": "sgd"}},
    "learning": {"dataset": {"name": "spambase"}, "algorithm": "sgd", "evaluate_every": 4140},
    "metrics": {"sample_every": "1h"},
}  # fmt: skip


def spambase(**learning: object) -> dict:
    return {**SPAMBASE_WALK, "learning": {**SPAMBASE_WALK["learning"], **learning}}


def final_accuracy(result: netsim.api.RunOutcome) -> float:
    accuracy = result["accuracy"]
    return float(accuracy[accuracy["visits"] == accuracy["visits"].max()]["accuracy"].mean())


@pytest.mark.parametrize(("name", "classes"), [("logreg", 2), ("logreg", 4), ("svm", 2),
                                               ("svm", 3)])  # fmt: skip
def test_the_linear_models_give_the_papers_gradient_bit_for_bit(name, classes):
    rng = np.random.default_rng(classes)
    linear = LinearModel(name, classes, 7)
    model = build_model(name, classes, 7)
    x, y = rng.normal(size=(5, 7)), rng.integers(0, classes, 5)
    w = rng.normal(size=linear.shape)
    gradients = model.per_example_gradients(w.ravel(), x, y)
    for i in range(5):
        assert np.array_equal(gradients[i], linear.gradient(w, x[i], int(y[i])).ravel())
    assert model.sensitivity("L2") == linear.sensitivity("L2")
    assert model.predict(w.ravel(), x).tolist() == linear.predict(w, x).tolist()


def test_the_linear_models_state_their_curvature():
    assert build_model("logreg", 2, 3).curvature().smoothness == 0.25
    assert build_model("logreg", 3, 3).curvature().smoothness == 0.5
    svm = build_model("svm", 2, 3).curvature()
    assert svm.convex and svm.smoothness is None and svm.lipschitz == 1.0
    mlp = build_model("mlp", 2, 3).curvature()
    assert not mlp.convex and mlp.lipschitz is None


class SteepGradientMLP(MLP):
    """An MLP whose gradient is 1 % too large (a mutation ``netsim check`` must catch)."""

    def per_example_gradients(self, params, x, y):
        return 1.01 * super().per_example_gradients(params, x, y)


class UnseededMLP(MLP):
    """An MLP that draws its initial weights from fresh entropy, not from the run's stream."""

    def initial_parameters(self, rng):
        return super().initial_parameters(np.random.default_rng())


class FlatPredictionMLP(MLP):
    def predict(self, params, x):
        return super().predict(params, x)[:, None]


@pytest.mark.parametrize(
    ("cls", "failed"),
    [
        (SteepGradientMLP, "its gradients match finite differences"),
        (UnseededMLP, "the same seed gives"),
        (FlatPredictionMLP, "its shapes"),
    ],
)
def test_netsim_check_catches_a_broken_model(cls, failed, monkeypatch):
    import sys
    import types

    module = types.ModuleType("broken_models")
    setattr(module, cls.__name__, cls)
    monkeypatch.setitem(sys.modules, "broken_models", module)
    cls.__module__ = "broken_models"
    results = check_component(f"broken_models:{cls.__name__}")
    assert any(not r.ok and r.check.startswith(failed) for r in results), [
        r.line() for r in results
    ]
    assert all(r.ok for r in check_component("mlp"))


@settings(max_examples=40, deadline=None)
@given(
    clip=st.floats(0.01, 10.0),
    scale=st.floats(0.1, 100.0),
    seed=st.integers(0, 2**31),
)
def test_clipping_bounds_every_gradient_that_reaches_the_noise(clip, scale, seed):
    from netsim.learning.private_sgd import PrivateSGD
    from netsim.privacy.accountant import PrivacyAccountant, policy_by_name
    from netsim.privacy.mechanisms import build_mechanism

    rng = np.random.default_rng(seed)
    model = build_model("mlp", 3, 4)
    x, y = rng.normal(size=(6, 4)), rng.integers(0, 3, 6)
    accountant = PrivacyAccountant(6, epsilon=1.0, policy=policy_by_name("dp-sgd-1"))
    sgd = PrivateSGD(
        model, x, y, accountant, noise=build_mechanism("k_norm_l2"), regularisation=0.0,
        rng=rng, initial=scale * rng.normal(size=model.size), clip=clip,
    )  # fmt: skip
    assert sgd.sensitivity == 2 * clip
    for record in range(6):
        gradient = sgd.gradient(sgd.initial, record)
        rows = slice(record, record + 1)
        raw = model.per_example_gradients(sgd.initial, x[rows], y[rows])
        assert np.linalg.norm(gradient) <= clip * (1 + 1e-12)
        if np.linalg.norm(raw) <= clip:  # inside the ball: left as it is
            assert np.array_equal(gradient, raw[0])


def test_a_private_run_of_a_model_without_a_gradient_bound_needs_clip():
    with pytest.raises(ScenarioError, match=r"learning\.model mlp cannot bound .* learning\.clip"):
        netsim.run(spambase(model="mlp", algorithm="dp-sgd-1"))


def test_the_ledger_states_the_clipped_sensitivity():
    result = netsim.run(
        {**spambase(model={"kind": "mlp", "hidden": [8]}, algorithm="dp-sgd-1", clip=0.5),
         "duration": "100s"}
    )  # fmt: skip
    ledger = result["privacy_ledger"]
    assert len(ledger) == 99 and (ledger["sensitivity"] == 1.0).all()  # steps at 1 s … 99 s


def test_an_mlp_learns_spambase_above_the_linear_model():
    # two passes at the paper's step sizes, seed 1: exact values (a fixed seed's numbers)
    linear = final_accuracy(netsim.run(spambase()))
    mlp = final_accuracy(netsim.run(spambase(model={"kind": "mlp", "hidden": [32]})))
    assert mlp > linear + 0.02, (mlp, linear)
