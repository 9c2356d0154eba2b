"""The compiled step (:mod:`netsim.learning.step_kernels`) is numpy's arithmetic bit for bit:
the record gradients of the binary linear losses and eq. (8)'s update, on any float64 input,
and a visit goes through it."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from netsim.learning import losses, step_kernels
from netsim.learning.losses import _sigmoid, compiled_pair

FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)
FINITE = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, width=64)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and np.array_equal(a.view(np.int64), b.view(np.int64))


def numpy_gradient(loss: str, w: np.ndarray, x: np.ndarray, y: int) -> np.ndarray:
    """The gradient as :func:`netsim.learning.losses.record_gradient` wrote it in numpy."""
    if loss == "logistic":
        z = float(w @ x)
        return (_sigmoid(z) if y == -1 else -_sigmoid(-z)) * x
    return -float(y) * x if y * float(w @ x) < 1.0 else np.zeros_like(x)


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
    kernel = getattr(step_kernels, f"{loss}_gradient")
    assert same_bits(kernel(w, x, y), numpy_gradient(loss, w, x, y))
    assert same_bits(losses.record_gradient(loss, w, x, y), numpy_gradient(loss, w, x, y))


def test_the_compiled_gradient_sums_w_dot_x_as_numpys_blas_does():
    """On the data sets' dimensions (Spambase 57, Adult 104, MNIST 784) a dot product summed
    in another order differs in its last bits for most random vectors: the compiled gradient
    must give numpy's bits on every one."""
    rng = np.random.default_rng(0)
    for n in (57, 104, 784):
        for _ in range(50):
            w, x = rng.standard_normal(n), rng.standard_normal(n)
            for y in (-1, 1):
                for loss in ("logistic", "hinge"):
                    kernel = getattr(step_kernels, f"{loss}_gradient")
                    assert same_bits(kernel(w, x, y), numpy_gradient(loss, w, x, y))
            x = x / abs(float(w @ x))  # near the hinge's kink: y w·x about ±1
            for y in (-1, 1):
                assert same_bits(
                    step_kernels.hinge_gradient(w, x, y), numpy_gradient("hinge", w, x, y)
                )


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
    updated, finite = step_kernels.sgd_update(w, gradient, eta, regularisation)
    assert same_bits(updated, expected)
    assert finite == bool(np.isfinite(expected).all())


def test_the_sigmoid_is_the_python_ones_at_its_branches_and_tails():
    for z in (0.0, -0.0, 1e-300, -1e-300, 0.5, -0.5, 36.0, -36.0, 709.0, -709.0, 745.0, -746.0):
        assert step_kernels.sigmoid(z) == _sigmoid(z) or (
            math.isnan(_sigmoid(z)) and math.isnan(step_kernels.sigmoid(z))
        )


def test_only_contiguous_float64_vectors_of_one_length_take_the_compiled_path():
    a = np.ones(6)
    assert compiled_pair(a, np.zeros(6))
    assert not compiled_pair(a, np.zeros(6, dtype=np.float32))
    assert not compiled_pair(a[::2], np.zeros(3))
    assert not compiled_pair(a, np.zeros(5))
    assert not compiled_pair(a.reshape(2, 3), np.zeros((2, 3)))


def test_a_private_step_goes_through_the_compiled_functions_and_gives_numpys_model(
    monkeypatch,
):
    """DP-SGD-1 on a logistic model: each visit's gradient and update are the compiled
    calls (counted here), and the model after three visits is the one numpy's expressions
    give from the same released gradients."""
    from netsim.learning import private_sgd
    from netsim.learning.models import build_model
    from netsim.learning.private_sgd import PrivateSGD
    from netsim.learning.state import ModelState
    from netsim.privacy.accountant import PrivacyAccountant, policy_by_name
    from netsim.privacy.mechanisms import build_mechanism

    calls = {"gradient": 0, "update": 0}
    gradient, update = step_kernels.logistic_gradient, step_kernels.sgd_update

    def counted_gradient(*args):
        calls["gradient"] += 1
        return gradient(*args)

    def counted_update(*args):
        calls["update"] += 1
        return update(*args)

    # where the visit's code finds them (the lazy modules of losses and private_sgd)
    monkeypatch.setattr(losses.step_kernels, "logistic_gradient", counted_gradient)
    monkeypatch.setattr(private_sgd.step_kernels, "sgd_update", counted_update)
    released = []
    rng = np.random.default_rng(3)
    model = build_model("logreg", 2, 4)
    x, y = rng.normal(size=(3, 4)) / 4, np.array([0, 1, 1])
    accountant = PrivacyAccountant(3, epsilon=1.0, policy=policy_by_name("dp-sgd-1"))
    release = accountant.release

    def recorded_release(*args, **kwargs):
        noisy, event = release(*args, **kwargs)
        released.append(noisy.copy())
        return noisy, event

    monkeypatch.setattr(accountant, "release", recorded_release)
    sgd = PrivateSGD(
        model, x, y, accountant, noise=build_mechanism("k_norm_l2"), regularisation=1e-4,
        rng=np.random.default_rng(5), initial=np.zeros(model.size),
    )  # fmt: skip
    state = ModelState(np.zeros(model.size), 0, 0)
    expected = np.zeros(model.size)
    for node in range(3):
        state, _epsilon, updated = sgd.step(state, node, float(node))
        assert updated
        eta = sgd.learning_rate / math.sqrt(node + 1)
        expected = expected - eta * (1e-4 * expected + released[node])
    assert calls == {"gradient": 3, "update": 3}
    assert same_bits(state.parameters, expected)
