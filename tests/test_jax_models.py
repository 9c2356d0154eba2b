"""JAX models in the ``learning.model`` slot (``netsim/learning/jax_models.py``,
``docs/jax-models.md``): their gradients are the loss's (finite differences, and the numpy
models' at the same parameters), ``netsim check`` passes them and fails one whose gradient is
wrong, per-layer clipping bounds what they return, and they train privately on MNIST, the same
seed giving the same tables, in a walk and in gossip learning's rounds mode."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("jax", reason="JAX models need the jax extra: pip install 'netsim-ppml[jax]'")
pytest.importorskip("equinox", reason="JAX models need the jax extra")

import jax
import jax.numpy as jnp
from conftest import SHARED_DATA, require_shared

import netsim
from netsim.errors import ComponentError, NetsimError
from netsim.learning.jax_models import bucket, fan_in_uniform, require_jax
from netsim.registry import named_component
from netsim.testing import check_component

MNIST5K = SHARED_DATA / "mnist" / "mnist_5k.csv.gz"
HERE = "tests.test_jax_models"


def built(name: str, classes: int, features: int, **settings: object):
    model = named_component("model", name, settings=settings)
    model.setup(classes, features)
    return model


def batch(classes: int, features: int, rows: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, features))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x, np.arange(rows) % classes, rng


# --- factories named by the tests' scenarios (kind: jax, factory: tests.test_jax_models:…) ----


def softmax_regression(*, key, classes, features):
    """A pure function on a batch and its parameters (the Flax convention): multinomial
    logistic regression without bias, whose flat parameters are netsim's ``logreg``'s."""

    def apply(params, x):
        return x @ params["w"].T

    return apply, {"w": jnp.zeros((classes, features))}


@jax.custom_vjp
def _scaled(z):
    return z


def _scaled_forward(z):
    return z, None


def _scaled_backward(_, cotangent):
    return (1.01 * cotangent,)  # the gradient 1 % too large: what netsim check must catch


_scaled.defvjp(_scaled_forward, _scaled_backward)


def wrong_gradient(*, key, classes, features):
    """Softmax regression whose backward pass scales the gradient by 1.01."""

    def apply(params, x):
        return _scaled(x @ params["w"].T + params["b"])

    w = 0.1 * jax.random.normal(key, (classes, features))
    return apply, {"w": w, "b": jnp.zeros(classes)}


# --- gradients ------------------------------------------------------------------------------


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_jax_mlp_is_the_numpy_mlp_at_the_same_parameters(activation):
    """Same flat layout, same function: losses, per-example and batched gradients and
    predictions of jax_mlp equal those of mlp (float64, up to summation order)."""
    numpy_mlp = built("mlp", 3, 6, hidden=[5, 4], activation=activation)
    jax_mlp = built("jax_mlp", 3, 6, hidden=[5, 4], activation=activation)
    assert jax_mlp.size == numpy_mlp.size
    x, y, rng = batch(3, 6, 7)
    params = numpy_mlp.initial_parameters(rng) + 0.2 * rng.normal(size=numpy_mlp.size)
    np.testing.assert_allclose(jax_mlp.losses(params, x, y), numpy_mlp.losses(params, x, y),
                               rtol=1e-12)  # fmt: skip
    np.testing.assert_allclose(
        jax_mlp.per_example_gradients(params, x, y),
        numpy_mlp.per_example_gradients(params, x, y), rtol=1e-10, atol=1e-14,
    )  # fmt: skip
    many = params + 0.1 * rng.normal(size=(7, params.size))
    np.testing.assert_allclose(
        jax_mlp.batch_gradients(many, x, y),
        numpy_mlp.batch_gradients(many, x, y),
        rtol=1e-10,
        atol=1e-14,
    )
    assert np.array_equal(jax_mlp.predict(params, x), numpy_mlp.predict(params, x))


def test_a_pure_function_model_has_logreg_s_gradients():
    """The function form (apply on a batch, params a pytree) of softmax regression is netsim's
    multinomial logreg, gradient for gradient."""
    factory = built("jax", 3, 4, factory=f"{HERE}:softmax_regression")
    logreg = built("logreg", 3, 4)
    x, y, rng = batch(3, 4, 5)
    params = rng.normal(size=logreg.size)
    assert factory.size == logreg.size
    np.testing.assert_allclose(factory.per_example_gradients(params, x, y),
                               logreg.per_example_gradients(params, x, y), rtol=1e-12,
                               atol=1e-15)  # fmt: skip


@pytest.mark.parametrize("batching", ["vmap", "map"])
def test_jax_cnn_gradients_match_finite_differences(batching):
    model = built("jax_cnn", 3, 16, channels=[2], hidden=3, batching=batching)
    x, y, rng = batch(3, 16, 3)
    params = model.initial_parameters(rng)
    gradients = model.per_example_gradients(params, x, y)
    step = 1e-6
    for j in range(model.size):
        up, down = params.copy(), params.copy()
        up[j] += step
        down[j] -= step
        numeric = (model.losses(up, x, y) - model.losses(down, x, y)) / (2 * step)
        np.testing.assert_allclose(gradients[:, j], numeric, atol=1e-7)


def test_batches_are_padded_to_powers_of_two_without_changing_a_row():
    assert [bucket(n) for n in (1, 2, 3, 4, 5, 17)] == [1, 2, 4, 4, 8, 32]
    model = built("jax_mlp", 2, 3, hidden=[4])
    x, y, rng = batch(2, 3, 5)
    params = model.initial_parameters(rng)
    five = model.per_example_gradients(params, x, y)
    assert five.shape == (5, model.size) and five.flags.writeable
    assert np.array_equal(five[:3], model.per_example_gradients(params, x[:3], y[:3]))


def test_the_built_in_networks_draw_only_from_the_run_s_stream():
    model = built("jax_cnn", 10, 784)
    assert model.size == 26_698  # 80 + 1,168 conv; 784·32 + 32 and 32·10 + 10 dense
    first = model.initial_parameters(np.random.default_rng(3))
    assert np.array_equal(first, model.initial_parameters(np.random.default_rng(3)))
    assert not np.array_equal(first, model.initial_parameters(np.random.default_rng(4)))
    # Equinox's initialisation: the first convolution's 72 weights within ±1/√9
    assert np.abs(first[:72]).max() <= 1 / 3
    assert fan_in_uniform(((2, 3), (2,)), np.random.default_rng(0)).shape == (8,)


# --- netsim check ---------------------------------------------------------------------------


def test_netsim_check_passes_the_jax_models():
    # (the contract of jax_mlp and jax_cnn in a run is tests/test_contract.py's)
    for result in check_component("jax", keys={"factory": f"{HERE}:softmax_regression"}):
        assert result.ok, result.line()


def test_netsim_check_fails_a_gradient_one_percent_off():
    results = check_component("jax", keys={"factory": f"{HERE}:wrong_gradient"})
    failed = [result for result in results if not result.ok]
    # one failure per checked shape (binary, multi-class): the gradient check, nothing else
    assert len(failed) == 2 and all("finite differences" in result.check for result in failed)
    errors = [float(result.detail.rsplit(" ", 1)[1]) for result in failed]
    assert all(1e-3 < error <= 1e-2 for error in errors), errors


def test_a_factory_that_returns_something_else_is_refused():
    with pytest.raises(ComponentError, match="return an Equinox module"):
        built("jax", 2, 3, factory="builtins:dict")


def test_a_network_too_large_is_refused_from_its_shapes_before_any_array_is_made():
    """channels [100000, 100000] ended in a 671 GiB allocation traceback: the shapes are
    counted first (``filter_eval_shape``), and the run ends in one message."""
    with pytest.raises(NetsimError, match="the model has 90,157,900,362 parameters; at most"):
        built("jax_cnn", 10, 784, channels=[100_000, 100_000])


def test_without_jax_the_model_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "equinox", None)
    with pytest.raises(ComponentError, match=r"pip install 'netsim-ppml\[jax\]'"):
        require_jax()
    with pytest.raises(NetsimError, match="equinox is not installed"):
        named_component("model", "jax_mlp")


# --- per-layer clipping ---------------------------------------------------------------------


def test_layer_clip_bounds_each_array_and_the_whole():
    """Each of the L parameter arrays' part of a row is clipped to C/√L, so the row's norm is
    at most C; an array already inside is unchanged; the model declares the bound C."""
    clip = 0.05
    plain = built("jax_mlp", 3, 6, hidden=[5])
    clipped = built("jax_mlp", 3, 6, hidden=[5], layer_clip=clip)
    x, y, rng = batch(3, 6, 6)
    params = plain.initial_parameters(rng)
    raw = plain.per_example_gradients(params, x, y)
    out = clipped.per_example_gradients(params, x, y)
    limit = clip / np.sqrt(4)  # two weight matrices, two bias vectors
    clipped_any = False
    for start, shape in zip(np.cumsum([0, 30, 5, 15]), clipped.compiled.shapes, strict=True):
        at = slice(start, start + int(np.prod(shape)))
        norms = np.linalg.norm(raw[:, at], axis=1)
        assert (np.linalg.norm(out[:, at], axis=1) <= limit * (1 + 1e-12)).all()
        inside = norms <= limit
        assert np.array_equal(out[inside, at], raw[inside, at])
        scaled = raw[~inside, at] * (limit / norms[~inside])[:, None]
        np.testing.assert_allclose(out[~inside, at], scaled, rtol=1e-12)
        clipped_any |= bool((~inside).any())
    assert clipped_any
    assert (np.linalg.norm(out, axis=1) <= clip * (1 + 1e-12)).all()
    assert clipped.gradient_bound("L2") == clip and plain.gradient_bound("L2") is None
    assert clipped.curvature().lipschitz is None


# --- training on MNIST ----------------------------------------------------------------------


def mnist_walk(model: object, **learning: object) -> dict:
    """DP-SGD over an ideal walk on mnist5k: 90 nodes of 50 images, a visit the mean of 50
    clipped gradients, Gaussian noise z = 2, RDP (ε = 8, δ = 1e-5)."""
    return {
        "seed": 3,
        "nodes": 90,
        "duration": "360s",
        "topology": {"kind": "ring", "k": 2},
        "walk": {"kind": "ideal", "sampling": "without_replacement", "step_time": "1s",
                 "agent": {"kind": "sgd"}},
        "learning": {"dataset": {"name": "mnist5k", "path": str(require_shared(MNIST5K))},
                     "model": model, "records_per_node": 50, "batch": 50, "clip": 1.0,
                     "algorithm": "dp-sgd", "noise": {"kind": "gaussian", "noise_multiplier": 2.0},
                     "accounting": "rdp", "epsilon": 8.0, "delta": 1e-5, "evaluate_every": 90,
                     **learning},
    }  # fmt: skip


def final_accuracy(result) -> float:
    return float(result["accuracy"]["accuracy"].iloc[-1])


@pytest.mark.slow  # 11 s; test_a_small_jax_cnn_trains_privately_on_mnist runs by default
def test_jax_mlp_trains_privately_on_mnist_the_same_seed_the_same_tables():
    scenario = mnist_walk({"kind": "jax_mlp", "hidden": [32]}, learning_rate=1.0)
    scenario["duration"] = "100s"  # one pass over the 90 nodes, then its evaluation
    first, second = netsim.run(scenario), netsim.run(scenario)
    summary = first["learning_summary"].iloc[0]
    assert summary["guarantee"] == "(epsilon,delta)-DP" and summary["epsilon"] <= 8.0
    assert final_accuracy(first) > 0.3  # ten classes: chance is 0.1
    for table in first.tables:
        pd.testing.assert_frame_equal(first[table], second[table], check_exact=True)


def test_layer_clip_runs_privately_without_learning_clip():
    scenario = mnist_walk({"kind": "jax_mlp", "hidden": [32], "layer_clip": 1.0})
    del scenario["learning"]["clip"]
    scenario["duration"] = "90s"
    result = netsim.run(scenario)
    assert result["learning_summary"]["epsilon"].iloc[0] > 0
    unclipped = mnist_walk("jax_mlp")
    del unclipped["learning"]["clip"]
    with pytest.raises(NetsimError, match=r"cannot bound its per-example gradient"):
        netsim.run(unclipped)  # refused as the scenario is validated


@pytest.mark.slow
def test_jax_cnn_trains_privately_on_mnist():
    result = netsim.run(mnist_walk({"kind": "jax_cnn"}, learning_rate=1.0))
    assert final_accuracy(result) > 0.3


def test_a_small_jax_cnn_trains_privately_on_mnist():
    model = {"kind": "jax_cnn", "channels": [4, 8], "hidden": 0}
    result = netsim.run(mnist_walk(model, learning_rate=1.0))
    assert final_accuracy(result) > 0.2


def test_gossip_learning_rounds_mode_steps_jax_models_in_batches():
    """Rounds mode steps every reached node's model at once (batch_gradients vmapped over the
    models); the same seed gives the same tables."""
    scenario = {
        "seed": 2, "nodes": 100, "duration": "20s", "topology": {"kind": "k_out", "k": 10},
        "gossip_learning": {"period": "1s", "mode": "rounds"},
        "learning": {"dataset": {"name": "digits"}, "model": {"kind": "jax_mlp", "hidden": [8]},
                     "clip": 1.0, "algorithm": "dp-sgd-5", "noise": "k_norm_l2", "epsilon": 5.0,
                     "evaluate_every": 5},
    }  # fmt: skip
    first, second = netsim.run(scenario), netsim.run(scenario)
    for table in first.tables:
        pd.testing.assert_frame_equal(first[table], second[table], check_exact=True)
    assert 400 < first["learning_summary"]["updates"].iloc[0] <= 100 * 5  # dp-sgd-5's uses
