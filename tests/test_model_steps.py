"""The model slot's batched steps: ``example_gradient`` (one record: bit for bit the
per-example gradient), ``batch_gradients`` (many models, each at its own record) and
``step_many`` (Hegedűs et al. 2016 eq. 8 row by row) of the built-in models; the defaults a
model that implements only the required methods gets; ``netsim check`` of them.

The batched gradients sum their dot products in another order than the per-example ones
(``einsum`` against ``@``), so they agree up to rounding. The tolerances below are derived
from the standard bound on a dot product of n terms computed in any order,
``|fl(w·x) − w·x| ≤ γ_n Σ|w_i x_i|`` with γ_n = nu/(1 − nu) and u = 2⁻⁵³ (Higham, *Accuracy
and Stability of Numerical Algorithms*, 2nd ed., eq. 3.5), so two orders differ by at most
2γ_n Σ|w_i x_i|; that difference is carried through each loss's derivative by its Lipschitz
constant and the elementwise operations add a few u each. Each bound is doubled (second-order
terms, a few ulps of exp / expit / tanh).
"""

from __future__ import annotations

import copy
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from netsim.contracts import Model
from netsim.learning.models import MLP, LinearSVM, LogisticRegression, MLPConfig, build_model
from netsim.learning.private_sgd import PrivateSGD
from netsim.learning.state import ModelState
from netsim.privacy.accountant import PrivacyAccountant, Unlimited
from netsim.privacy.mechanisms import build_mechanism
from netsim.testing import model_checks

#: The unit roundoff of float64.
U = 2.0**-53
#: The methods a model of the slot may override to batch (the rest are required).
BATCHED = ("example_gradient", "batch_gradients", "step_many")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "netsim-examples" / "src"
QUADRATIC = "netsim_examples.quadratic_logistic:QuadraticLogistic"
#: How the checks of the batched forms that ``netsim check`` adds begin.
BATCHED_CHECKS = ("its one-record gradient", "its batched")
LINEAR = [("logreg", 2), ("logreg", 3), ("svm", 2), ("svm", 4)]


def gamma(n: int) -> float:
    """γ_n = nu/(1 − nu): the relative error bound of a sum of n products."""
    return n * U / (1.0 - n * U)


def interface_only(model: Model) -> Model:
    """``model`` with the interface's own ``example_gradient``, ``batch_gradients`` and
    ``step_many`` (built from its ``per_example_gradients``), as a plugin that implements only
    the required methods gets them."""
    cls = type(model)
    defaults = type(
        f"Default{cls.__name__}", (cls,), {name: getattr(Model, name) for name in BATCHED}
    )
    clone = copy.copy(model)
    clone.__class__ = defaults
    return clone


def per_example_rows(model: Model, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row k: model k's per-example gradient at record k, one call per model."""
    return np.vstack(
        [model.per_example_gradients(params[k], x[k : k + 1], y[k : k + 1]) for k in range(len(x))]
    )


def eq8(params: np.ndarray, gradients: np.ndarray, rates: np.ndarray, regularisation: float):
    """m separate SGD steps, θ_k − η_k (λ θ_k + g_k), each as ``PrivateSGD`` writes it."""
    return np.vstack(
        [
            params[k] - rates[k] * (regularisation * params[k] + gradients[k])
            for k in range(len(params))
        ]
    )


# --- linear models -----------------------------------------------------------------------------


def linear_slack(model: Model, params: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Per model, 2γ_d max_k Σ_j |w_kj x_j|: how far two summation orders can put a score."""
    w = params.reshape(len(x), -1, x.shape[1])
    slack = 2.0 * gamma(x.shape[1]) * np.abs(w * x[:, None, :]).sum(axis=2).max(axis=1)
    return np.where(quarters(params) & quarters(x), 0.0, slack)


def quarters(values: np.ndarray) -> np.ndarray:
    """Per row, whether every entry is a multiple of 1/4 of magnitude at most 8: the products
    of two such are multiples of 1/16 below 64, so a sum of a few of them is exact in float64
    in any order (both computations then see the same score, even at a kink)."""
    return np.all((values * 4.0 == np.round(values * 4.0)) & (np.abs(values) <= 8.0), axis=1)


def smooth_linear_tolerance(model: Model, params: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Entry bound on |batched − per-example| for the logistic and softmax losses: the scores
    differ by at most the slack s; the coefficient (σ, or softmax − e_y) is 1/4- resp.
    1/2-Lipschitz in the ∞-norm, so it differs by ≤ s/2 plus rounding of exp, the sum of K
    terms and a division ((K + 3)u per order); times |x_j| and the product's u. Doubled."""
    k = model.classes
    coefficient = linear_slack(model, params, x) / 2.0 + 2.0 * (k + 4) * U
    width = params.shape[1] // x.shape[1]
    return 2.0 * np.tile(np.abs(x), (1, width)) * coefficient[:, None]


def hinge_subgradients(model: Model, w: np.ndarray, x: np.ndarray, y: int, slack: float):
    """The hinge subgradients a computation of the scores off by at most ``slack`` may pick at
    (w, x, y): several only near a kink (the margin at 1, or a tie for the largest other
    class)."""
    if model.classes == 2:
        sign = 2 * y - 1
        margin = sign * float(w @ x)
        candidates = []
        if margin < 1.0 + slack:
            candidates.append(-float(sign) * x)
        if margin >= 1.0 - slack:
            candidates.append(np.zeros_like(x))
        return candidates
    weights = w.reshape(model.classes, -1)
    scores = weights @ x
    others = scores.copy()
    others[y] = -np.inf
    top = others.max()
    candidates = []
    if 1.0 + top - scores[y] <= 2.0 * slack:
        candidates.append(np.zeros(w.size))
    if 1.0 + top - scores[y] > -2.0 * slack:
        for k in np.flatnonzero(others >= top - 2.0 * slack):
            grad = np.zeros_like(weights)
            grad[k], grad[y] = x, -x
            candidates.append(grad.ravel())
    return candidates


@st.composite
def linear_cases(draw, name: str, classes: int):
    """A linear model, m parameter vectors, m records and labels; entries from hypothesis
    (zeros, ties and exact margins included)."""
    m, d = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    model = build_model(name, classes, d)
    # small exact values put margins exactly at the hinge's kink and scores in exact ties
    exact = st.sampled_from([0.0, 1.0, -1.0, 0.5, -0.5, 2.0])
    values = st.floats(-8.0, 8.0, allow_nan=False, allow_subnormal=False)
    values = draw(st.sampled_from([exact, values, st.one_of(exact, values)]))
    params = draw(hnp.arrays(np.float64, (m, model.size), elements=values))
    x = draw(hnp.arrays(np.float64, (m, d), elements=values))
    y = np.array(draw(st.lists(st.integers(0, classes - 1), min_size=m, max_size=m)))
    return model, params, x, y


@pytest.mark.parametrize(("name", "classes"), LINEAR)
@settings(max_examples=60)
@given(data=st.data())
def test_a_linear_models_record_gradient_is_its_per_example_gradient_bit_for_bit(
    name, classes, data
):
    model, params, x, y = data.draw(linear_cases(name, classes))
    batch = model.per_example_gradients(params[0], x, y)
    for k in range(len(x)):
        got = model.example_gradient(params[0], x[k], int(y[k]))
        assert got.shape == (model.size,)
        assert np.array_equal(got, batch[k])
        assert np.array_equal(
            interface_only(model).example_gradient(params[0], x[k], y[k]), batch[k]
        )


@pytest.mark.parametrize(("name", "classes"), LINEAR)
@settings(max_examples=80)
@given(data=st.data())
def test_a_linear_models_batch_gradients_are_each_models_per_example_gradient(name, classes, data):
    model, params, x, y = data.draw(linear_cases(name, classes))
    single = per_example_rows(model, params, x, y)
    assert np.array_equal(interface_only(model).batch_gradients(params, x, y), single)
    batched = model.batch_gradients(params, x, y)
    assert batched.shape == single.shape
    if name == "logreg":
        assert np.all(np.abs(batched - single) <= smooth_linear_tolerance(model, params, x))
        return
    # the hinge losses: the same subgradient bit for bit, or another one only at a kink
    slack = linear_slack(model, params, x)
    for k in range(len(x)):
        if np.array_equal(batched[k], single[k]):
            continue
        candidates = hinge_subgradients(model, params[k], x[k], int(y[k]), float(slack[k]))
        assert len(candidates) > 1, f"model {k} is at no kink"
        assert any(np.array_equal(batched[k], c) for c in candidates)


def test_the_hinge_losses_take_the_same_side_of_every_kink_in_every_form():
    """At a margin of exactly 1 (binary), exactly 0 (Crammer–Singer) and a tie for the largest
    other class, computed exactly in any order: the strict inequality (no step at the kink)
    and the first of the tied classes, in the per-example, one-record and batched forms."""
    binary = build_model("svm", 2, 2)
    params = np.array([[1.0, 0.5], [-1.0, -0.5], [1.0, 0.25]])
    x, y = np.array([[0.5, 1.0], [0.5, 1.0], [0.5, 1.0]]), np.array([1, 0, 1])
    expected = np.array([[0.0, 0.0], [0.0, 0.0], [-0.5, -1.0]])  # margins 1, 1, 0.75
    multi = build_model("svm", 3, 2)
    w_tie = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])  # scores (1, 1, 0): classes 0, 1 tie
    w_edge = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]])  # 1 + 1 − 2 = 0: not violated
    multi_params = np.vstack([w_tie.ravel(), w_edge.ravel()])
    multi_x, multi_y = np.array([[1.0, 1.0], [1.0, 0.0]]), np.array([2, 2])
    multi_expected = np.array([[1.0, 1.0, 0.0, 0.0, -1.0, -1.0], np.zeros(6)])
    for model, p, xs, ys, want in (
        (binary, params, x, y, expected),
        (multi, multi_params, multi_x, multi_y, multi_expected),
    ):
        assert np.array_equal(per_example_rows(model, p, xs, ys), want)
        assert np.array_equal(model.batch_gradients(p, xs, ys), want)
        for k in range(len(xs)):
            assert np.array_equal(model.example_gradient(p[k], xs[k], int(ys[k])), want[k])


# --- the MLP -------------------------------------------------------------------------------


def mlp_tolerance(model: MLP, params: np.ndarray, x: np.ndarray, y: int) -> np.ndarray | None:
    """Entry bound on |batched − per-example| of one MLP's gradient at one record: a running
    bound D on the difference of every intermediate between two summation orders, carried
    forward (D_z = 2γ_{n+1}(|W||a| + |b|) + |W| D_a; tanh is 1-Lipschitz, plus 2u|a|) and
    backward (the logits' softmax − e_y is 1/2-Lipschitz in ∞-norm; δ_{l−1} = (δ_l W) ⊙ f′
    with f′ = 1 − a² or the ReLU step), then doubled. ``None`` when a ReLU input is within
    its bound of 0 (the two orders may then take different sides of the kink)."""
    layers = model._unpack(params)
    acts, bounds = [x], [np.zeros_like(x)]
    zs = []
    for index, (w, b) in enumerate(layers):
        z = w @ acts[-1] + b
        dz = 2.0 * gamma(w.shape[1] + 1) * (np.abs(w) @ np.abs(acts[-1]) + np.abs(b))
        dz += np.abs(w) @ bounds[-1]
        zs.append((z, dz))
        if index == len(layers) - 1:
            break
        if model.activation == "relu" and np.any((np.abs(z) <= dz) & (dz > 0)):
            return None
        a = model._act(z)
        acts.append(a)
        bounds.append(dz + 2.0 * U * np.abs(a))
    logits, dlogits = zs[-1]
    delta = np.exp(logits - logits.max())
    delta /= delta.sum()
    delta[y] -= 1.0
    ddelta = np.full(model.classes, 0.5 * dlogits.max() + 2.0 * (model.classes + 6) * U)
    out = np.empty(model.size)
    for index in range(len(layers) - 1, -1, -1):
        rows, _, w_at, b_at = model.layers[index]
        a_in, da_in = np.abs(acts[index]), bounds[index]
        d_weights = np.outer(ddelta, a_in) + np.outer(np.abs(delta), da_in + 2.0 * U * a_in)
        out[w_at:b_at] = d_weights.ravel()
        out[b_at : b_at + rows] = ddelta
        if index > 0:
            w = layers[index][0]
            v = delta @ w
            dv = 2.0 * gamma(rows) * (np.abs(delta) @ np.abs(w)) + ddelta @ np.abs(w)
            slope = model._act_derivative(zs[index - 1][0], acts[index])
            dslope = np.zeros_like(slope)
            if model.activation == "tanh":
                dslope = 2.0 * a_in * da_in + da_in**2 + 4.0 * U
            delta = v * slope
            ddelta = dv * np.abs(slope) + np.abs(v) * dslope + 2.0 * U * np.abs(delta)
    return 2.0 * out


@st.composite
def mlp_cases(draw):
    """An MLP (0–2 hidden layers, tanh or ReLU), m models drawn Glorot-uniform and scaled, m
    records and labels (numpy draws from a hypothesis seed)."""
    hidden = tuple(draw(st.lists(st.integers(1, 6), max_size=2)))
    model = MLP(MLPConfig(hidden=hidden, activation=draw(st.sampled_from(["tanh", "relu"]))), None)
    classes, features, m = draw(st.integers(2, 4)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    model.setup(classes, features)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.floats(0.1, 10.0))
    params = scale * np.vstack([model.initial_parameters(rng) for _ in range(m)])
    params += 0.1 * scale * rng.normal(size=params.shape)  # biases too
    x = draw(st.floats(0.1, 10.0)) * rng.normal(size=(m, features))
    return model, params, x, rng.integers(0, classes, m)


@settings(max_examples=80)
@given(case=mlp_cases())
def test_the_mlps_batch_gradients_are_each_models_per_example_gradient(case):
    model, params, x, y = case
    tolerances = [mlp_tolerance(model, params[k], x[k], int(y[k])) for k in range(len(x))]
    assume(all(t is not None for t in tolerances))
    single = per_example_rows(model, params, x, y)
    assert np.array_equal(interface_only(model).batch_gradients(params, x, y), single)
    batched = model.batch_gradients(params, x, y)
    assert batched.shape == single.shape
    assert np.all(np.abs(batched - single) <= np.vstack(tolerances))
    for k in range(len(x)):  # the record's gradient: the interface's, one row of one call
        assert np.array_equal(model.example_gradient(params[k], x[k], int(y[k])), single[k])


def test_the_mlp_tolerance_is_tight_enough_to_see_a_wrong_layer():
    """The derived bound is far below a real mistake: 1e-12 of the gradient's scale."""
    model = MLP(MLPConfig(hidden=(5, 3)), None)
    model.setup(3, 4)
    rng = np.random.default_rng(2)
    params = np.vstack([model.initial_parameters(rng) for _ in range(4)])
    x, y = rng.normal(size=(4, 4)), np.array([0, 1, 2, 0])
    tolerance = np.vstack([mlp_tolerance(model, params[k], x[k], int(y[k])) for k in range(4)])
    scale = np.abs(per_example_rows(model, params, x, y)).max()
    assert tolerance.max() < 1e-12 * scale


# --- step_many: eq. (8) of each model --------------------------------------------------------


def all_models() -> list[Model]:
    models = [build_model(name, classes, 4) for name, classes in LINEAR]
    for hidden, activation in (((5,), "tanh"), ((4, 3), "relu")):
        mlp = MLP(MLPConfig(hidden=hidden, activation=activation), None)
        mlp.setup(3, 4)
        models.append(mlp)
    return models


MODELS = all_models()


def gradient_tolerance(model: Model, params, x, y) -> np.ndarray:
    """The entry bounds above for ``model``'s batched gradients (0: bit for bit)."""
    if isinstance(model, MLP):
        return np.vstack([mlp_tolerance(model, params[k], x[k], int(y[k])) for k in range(len(x))])
    if model.linear.loss in ("logistic", "softmax"):
        return smooth_linear_tolerance(model, params, x)
    return np.zeros_like(params)  # random draws: no hinge at a kink


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"{type(m).__name__}-{m.classes}")
@settings(max_examples=25)
@given(
    seed=st.integers(0, 2**32 - 1),
    m=st.integers(1, 7),
    regularisation=st.sampled_from([0.0, 1e-3, 0.5]),
    noisy=st.booleans(),
    per_model_rates=st.booleans(),
)
@example(seed=0, m=3, regularisation=0.5, noisy=True, per_model_rates=True)
def test_step_many_is_m_separate_sgd_updates(
    model, seed, m, regularisation, noisy, per_model_rates
):
    """Row k of ``step_many`` is θ_k − η_k (λ θ_k + ∇ℓ(θ_k; x_k, y_k) + N_k): bit for bit from
    ``batch_gradients``' row k, and (the interface's default) bit for bit from the per-example
    gradient; the fast one within its gradient's tolerance carried through the update."""
    rng = np.random.default_rng(seed)
    params = rng.normal(size=(m, model.size))
    x, y = rng.normal(size=(m, 4)), rng.integers(0, model.classes, m)
    noise = 0.3 * rng.normal(size=params.shape) if noisy else None
    rates = rng.uniform(0.05, 1.0, m) if per_model_rates else np.full(m, 0.25)
    given_rates = rates if per_model_rates else 0.25
    added = np.zeros_like(params) if noise is None else noise
    options = {"regularisation": regularisation, "noise": noise}
    before = params.copy()

    stepped = model.step_many(params, x, y, given_rates, **options)
    batched = model.batch_gradients(params, x, y)
    assert np.array_equal(stepped, eq8(params, batched + added, rates, regularisation))
    single = per_example_rows(model, params, x, y)
    default = interface_only(model).step_many(params, x, y, given_rates, **options)
    assert np.array_equal(default, eq8(params, single + added, rates, regularisation))
    # the fast step against m separate ones: |Δg| carried by η, plus u per operation
    size = np.abs(params) + rates[:, None] * (
        np.abs(regularisation * params) + np.abs(single) + np.abs(added)
    )
    allowed = rates[:, None] * gradient_tolerance(model, params, x, y) + 8.0 * U * size
    assert np.all(np.abs(stepped - default) <= allowed)
    assert np.array_equal(params, before)  # a new array: the models given are left as they were


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"{type(m).__name__}-{m.classes}")
def test_step_many_makes_the_steps_a_walks_visits_make(model):
    """Exact mode's visit (``PrivateSGD.step``, unlimited policy: the one-record path) of m
    models at m records, one at a time, is ``step_many`` at η_t = 1/√t: bit for bit with the
    interface's default, within the gradient tolerance with the fast one."""
    m = 5
    rng = np.random.default_rng(7)
    params = rng.normal(size=(m, model.size))
    x, y = rng.normal(size=(m, 4)), rng.integers(0, model.classes, m)
    updates = np.array([0, 1, 4, 9, 15])
    sgd = PrivateSGD(
        model, x, y, PrivacyAccountant(m, epsilon=1.0, policy=Unlimited()),
        noise=build_mechanism("k_norm_l2"), regularisation=0.01, rng=rng, initial=params[0],
    )  # fmt: skip
    visited = []
    for k in range(m):
        state, epsilon, updated = sgd.step(ModelState(params[k], int(updates[k]), 0), k, float(k))
        assert (epsilon, updated, state.updates) == (0.0, True, updates[k] + 1)
        visited.append(state.parameters)
    rates = 1.0 / np.sqrt(updates + 1)
    default = interface_only(model).step_many(params, x, y, rates, regularisation=0.01)
    assert np.array_equal(np.vstack(visited), default)
    fast = model.step_many(params, x, y, rates, regularisation=0.01)
    allowed = rates[:, None] * gradient_tolerance(model, params, x, y) + 8.0 * U * (
        np.abs(params) + np.abs(default)
    )
    assert np.all(np.abs(fast - default) <= allowed)
    assert sgd.accountant.uses.tolist() == [1] * m


# --- a plugin that implements only the required methods ---------------------------------------


@pytest.fixture
def examples_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield
    for name in [name for name in sys.modules if name.startswith("netsim_examples")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.mark.parametrize("classes", [2, 3])
def test_a_plugin_with_only_the_required_methods_gets_working_defaults(classes, examples_on_path):
    model = build_model(QUADRATIC, classes, 3)
    assert not any(name in type(model).__dict__ for name in BATCHED)
    rng = np.random.default_rng(classes)
    m = 6
    params, x, y = rng.normal(size=(m, model.size)), rng.normal(size=(m, 3)), np.arange(m) % classes
    single = per_example_rows(model, params, x, y)
    for k in range(m):
        assert np.array_equal(model.example_gradient(params[k], x[k], int(y[k])), single[k])
    assert np.array_equal(model.batch_gradients(params, x, y), single)
    noise, rates = rng.normal(size=params.shape), rng.uniform(0.1, 1.0, m)
    stepped = model.step_many(params, x, y, rates, regularisation=0.1, noise=noise)
    assert np.array_equal(stepped, eq8(params, single + noise, rates, 0.1))
    assert all(result.ok for result in model_checks(QUADRATIC)), [
        r.line() for r in model_checks(QUADRATIC) if not r.ok
    ]


# --- netsim check: a wrong batched override fails -------------------------------------------


class SwappedBatchMLP(MLP):
    """An MLP whose batched gradients pair each model with the next model's record."""

    def batch_gradients(self, params, x, y):
        return super().batch_gradients(params, np.roll(x, 1, axis=0), np.roll(y, 1))


class OffLabelLogReg(LogisticRegression):
    """Logistic regression whose one-record gradient reads the next class."""

    def example_gradient(self, params, x, y):
        return super().example_gradient(params, x, (int(y) + 1) % self.classes)


class RoundedLogReg(LogisticRegression):
    """Logistic regression whose one-record gradient is right to 1e-15 only (not bit for bit)."""

    def example_gradient(self, params, x, y):
        return super().example_gradient(params, x, y) * (1.0 + 4 * U)


class AscentSVM(LinearSVM):
    """A linear SVM whose batched step climbs the regularisation term."""

    def step_many(self, params, x, y, learning_rates, *, regularisation=0.0, noise=None):
        return super().step_many(params, x, y, learning_rates, regularisation=-regularisation,
                                 noise=noise)  # fmt: skip


@pytest.mark.parametrize(
    ("cls", "failed"),
    [
        (SwappedBatchMLP, "its batched gradients"),
        (OffLabelLogReg, "its one-record gradient"),
        (RoundedLogReg, "its one-record gradient"),
        (AscentSVM, "its batched step"),
    ],
)
def test_netsim_check_catches_a_wrong_batched_override(cls, failed, monkeypatch):
    module = types.ModuleType("wrong_batched_models")
    setattr(module, cls.__name__, cls)
    monkeypatch.setitem(sys.modules, "wrong_batched_models", module)
    monkeypatch.setattr(cls, "__module__", "wrong_batched_models")
    results = model_checks(f"wrong_batched_models:{cls.__name__}")
    broken = [r for r in results if not r.ok]
    assert any(r.check.startswith(failed) for r in broken), [r.line() for r in results]
    assert all(r.check.startswith(BATCHED_CHECKS) for r in broken)  # the other checks still pass


@pytest.mark.parametrize("kind", ["logreg", "svm", "mlp"])
def test_the_built_in_models_pass_the_batched_checks(kind):
    results = model_checks(kind)
    batched = [r for r in results if r.check.startswith(BATCHED_CHECKS)]
    assert len(batched) == 6 and all(r.ok for r in results), [r.line() for r in results]
