"""The central-DP yardstick: calibration, clipping, noise, tuning on training rows only.

Statistical tolerances: a test accuracy on m rows has a binomial standard error of at most
√(0.25/m) (0.023 on Spambase's 461 test rows); two accuracies from independent noise differ
by more than 3√(2·0.25/m) = 0.099 with probability below 0.3 %. A sample variance of N
independent Gaussian draws has relative standard error √(2/N).
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp

from netsim.learning import central_dp
from netsim.learning.baselines import learning_baselines
from netsim.learning.datasets import load_dataset, preprocess
from tests.conftest import SHARED_DATA, require_shared


@pytest.fixture(scope="module")
def spambase():
    return preprocess(load_dataset("spambase"), normalisation="local", norm="L2")


@pytest.fixture(scope="module")
def small_spambase(spambase):
    """600 training and 200 test rows of Spambase (fast enough to train many times; the
    shipped file is sorted by class, hence a random subset)."""
    rng = np.random.default_rng(0)
    train = np.sort(rng.choice(spambase.n_train, 600, replace=False))
    test = np.sort(rng.choice(spambase.n_test, 200, replace=False))
    return (
        spambase.x_train[train], spambase.y_train[train],
        spambase.x_test[test], spambase.y_test[test],
    )  # fmt: skip


def rdp_epsilon(noise_multiplier: float, steps: int, delta: float) -> float:
    """ε at δ of ``steps`` Gaussian mechanisms, straight from dp-accounting."""
    accountant = rdp.RdpAccountant()
    accountant.compose(
        dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(noise_multiplier), steps)
    )
    return float(accountant.get_epsilon(delta))


@pytest.mark.parametrize(
    ("epsilon", "delta", "steps"),
    [(0.1, 1e-5, 50), (1.0, 1e-5, 200), (10.0, 1e-6, 50), (1.0, 1e-3, 1), (3.0, 1e-5, 1000)],
)
def test_noise_multiplier_composes_to_the_stated_budget(epsilon, delta, steps):
    z = central_dp.noise_multiplier(epsilon, delta, steps)
    assert rdp_epsilon(z, steps, delta) <= epsilon * (1 + 1e-9)
    # and it is the smallest such z: 0.1 % less noise overspends
    assert rdp_epsilon(z * 0.999, steps, delta) > epsilon


def test_a_result_states_a_calibration_that_composes_to_its_budget(small_spambase):
    result = central_dp.central_dp_baseline(*small_spambase, epsilon=1.0, delta=1e-5)
    assert result.steps is not None and result.noise_multiplier is not None
    assert result.noise_multiplier == central_dp.noise_multiplier(1.0, 1e-5, result.steps)
    assert rdp_epsilon(result.noise_multiplier, result.steps, 1e-5) == pytest.approx(1.0, abs=1e-4)
    assert result.sensitivity == 2 * result.clip  # replace-one
    assert result.method.startswith("DP-GD") and f"C={result.clip:g}" in result.method


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("clip", [0.01, 0.3, 5.0])
def test_clipping_bounds_every_per_example_gradient(classes, clip):
    rng = np.random.default_rng(classes)
    x = rng.normal(size=(60, 4)) * rng.uniform(0.1, 3.0, size=(60, 1))
    y = rng.integers(0, classes, 60)
    weights = rng.normal(scale=5.0, size=(5, 1 if classes == 2 else classes))
    clipped = central_dp.clipped_gradients(x, y, weights, clip)
    raw = central_dp.clipped_gradients(x, y, weights, math.inf)
    norms = np.linalg.norm(clipped.reshape(60, -1), axis=1)
    raw_norms = np.linalg.norm(raw.reshape(60, -1), axis=1)
    assert norms.max() <= clip * (1 + 1e-12)
    # a gradient within the clip is left as it is, a longer one keeps its direction
    within = raw_norms <= clip
    np.testing.assert_allclose(clipped[within], raw[within], rtol=1e-12)
    scaled = raw[~within] * (clip / raw_norms[~within])[:, None, None]
    np.testing.assert_allclose(clipped[~within], scaled, rtol=1e-10)
    # the training step sums exactly these: one noiseless step from 0 is −lr·Σ/n
    step = central_dp.noisy_gradient_descent(
        x, y, classes, clip=clip, learning_rate=0.7, steps=1, noise_multiplier=0.0,
        rng=np.random.default_rng(0),
    )  # fmt: skip
    at_zero = central_dp.clipped_gradients(x, y, np.zeros_like(weights), clip)
    np.testing.assert_allclose(step, -0.7 * at_zero.sum(axis=0) / 60, rtol=1e-12, atol=1e-15)


def test_gradient_descent_adds_gaussian_noise_of_the_calibrated_scale():
    """One step from 0 is −lr(S + ξ)/n with ξ ~ N(0, (2Cz)²I): the spread of 300 steps' (15
    coordinates each, N = 4,500) must match σ² within 5√(2/N) = 10.5 %. Without noise (σ = 0)
    or with half of it, this fails."""
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=(20, 4)), rng.integers(0, 3, 20)
    clip, z, lr, n = 0.5, 3.0, 2.0, 20
    kwargs = dict(clip=clip, learning_rate=lr, steps=1, noise_multiplier=z)
    exact = central_dp.noisy_gradient_descent(x, y, 3, **kwargs | {"noise_multiplier": 0.0},
                                              rng=np.random.default_rng(0))  # fmt: skip
    noise = np.array([
        (exact - central_dp.noisy_gradient_descent(x, y, 3, **kwargs,
                                                   rng=np.random.default_rng(s))) * n / lr
        for s in range(300)
    ])  # fmt: skip
    sigma = 2 * clip * z
    assert abs(noise.mean()) < 5 * sigma / math.sqrt(noise.size)
    assert noise.var() / sigma**2 == pytest.approx(1.0, abs=5 * math.sqrt(2 / noise.size))


def test_output_perturbation_adds_k_norm_noise_of_the_calibrated_scale():
    """‖b‖ ~ Gamma(d, Δ/ε): mean dΔ/ε, standard deviation √d·Δ/ε; 400 draws."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = (x[:, 0] + 0.3 * rng.normal(size=50) > 0).astype(int)
    minimiser = central_dp.regularised_minimiser(x, y, 2, 0.01)
    sensitivity = central_dp.output_perturbation_sensitivity(x, 2, 0.01)
    radius = math.sqrt(1 + central_dp.INTERCEPT_FEATURE**2)
    exact = 2 * radius / (50 * 0.01)
    assert sensitivity == pytest.approx(exact * (1 + 2 * central_dp.MINIMISER_TOLERANCE))
    norms = np.array([
        np.linalg.norm(central_dp.output_perturbation(
            minimiser, sensitivity=sensitivity, epsilon=2.0, rng=np.random.default_rng(s)
        ) - minimiser)
        for s in range(400)
    ])  # fmt: skip
    d, scale = minimiser.size, sensitivity / 2.0
    assert norms.mean() == pytest.approx(d * scale, abs=5 * math.sqrt(d) * scale / 20)


def test_the_minimiser_is_certified_within_its_tolerance(small_spambase):
    x, y = small_spambase[0], small_spambase[1]
    weights = central_dp.regularised_minimiser(x, y, 2, 1e-3)
    _, gradient = central_dp._objective(weights.ravel(), x, y[:, None].astype(float), 1e-3)
    bound = np.linalg.norm(gradient) / 1e-3  # ‖w − w*‖ by 1e-3-strong convexity
    assert bound <= central_dp.MINIMISER_TOLERANCE * central_dp.minimiser_sensitivity(x, 2, 1e-3)


@pytest.mark.parametrize("delta", [1e-5, 0.0])
def test_accuracy_rises_with_epsilon_and_reaches_the_non_private_model(spambase, delta):
    split = (spambase.x_train, spambase.y_train, spambase.x_test, spambase.y_test)
    accuracy = {
        eps: central_dp.central_dp_baseline(*split, epsilon=eps, delta=delta).accuracy
        for eps in (0.01, 1.0, 1000.0)
    }
    m = spambase.n_test
    margin = 3 * math.sqrt(2 * 0.25 / m)  # two independent accuracies (module docstring)
    assert accuracy[0.01] + margin < accuracy[1000.0]
    assert accuracy[0.01] - margin <= accuracy[1.0] <= accuracy[1000.0] + margin
    centralised = learning_baselines(*split).centralised
    assert accuracy[1000.0] >= centralised - 3 * math.sqrt(centralised * (1 - centralised) / m)


@pytest.mark.parametrize("delta", [1e-5, 0.0])
def test_deterministic_and_cached(small_spambase, delta, monkeypatch):
    monkeypatch.setenv("NETSIM_CACHE_DIR", "off")  # computed twice, not read from disk
    central_dp.clear_cache()
    first = central_dp.central_dp_baseline(*small_spambase, epsilon=1.0, delta=delta)
    central_dp.clear_cache()
    second = central_dp.central_dp_baseline(*small_spambase, epsilon=1.0, delta=delta)
    assert first == second and first is not second
    again = central_dp.central_dp_baseline(
        *(np.array(a, copy=True) for a in small_spambase), epsilon=1.0, delta=delta
    )
    assert again is second
    if delta > 0:  # (output perturbation's seed is checked by its noise test; it is slower)
        other_seed = central_dp.central_dp_baseline(*small_spambase, epsilon=1, delta=delta, seed=1)
        assert other_seed != second


@pytest.mark.parametrize("delta", [1e-5, 0.0])
def test_test_rows_are_never_used_for_tuning(small_spambase, delta):
    x_train, y_train, x_test, y_test = small_spambase
    rng = np.random.default_rng(0)
    scrambled = (x_train, y_train, rng.permutation(x_test), 1 - y_test)
    chosen = central_dp.central_dp_baseline(*small_spambase, epsilon=1.0, delta=delta)
    other = central_dp.central_dp_baseline(*scrambled, epsilon=1.0, delta=delta)

    def tuned(r):
        return (r.regularisation, r.clip, r.learning_rate, r.steps, r.validation_accuracy)

    assert tuned(other) == tuned(chosen)
    assert other.accuracy != chosen.accuracy  # the test rows are scored


def test_labels_in_any_encoding_and_refusals(small_spambase):
    x_train, y_train, x_test, y_test = small_spambase
    plain = central_dp.central_dp_baseline(*small_spambase, epsilon=1.0, delta=1e-5)
    signed = central_dp.central_dp_baseline(
        x_train, 2 * y_train - 1, x_test, 2 * y_test - 1, epsilon=1.0, delta=1e-5
    )
    assert signed.accuracy == plain.accuracy
    with pytest.raises(ValueError, match="epsilon"):
        central_dp.central_dp_baseline(*small_spambase, epsilon=0.0, delta=1e-5)
    with pytest.raises(ValueError, match="delta"):
        central_dp.central_dp_baseline(*small_spambase, epsilon=1.0, delta=1.0)
    with pytest.raises(ValueError, match="2 classes"):
        central_dp.central_dp_baseline(
            x_train, np.zeros_like(y_train), x_test, y_test, epsilon=1.0, delta=1e-5
        )
    with pytest.raises(ValueError, match="labels"):
        central_dp.central_dp_baseline(x_train, y_train[:-1], x_test, y_test, epsilon=1, delta=0)


@pytest.mark.slow
def test_adult_matches_an_independent_measurement():
    """An independent re-implementation (its own split) measured DP-GD at (1, 1e-5) on Adult at
    0.826 ± 0.001; within 3 binomial standard errors of netsim's 3,016 test rows (±0.02)."""
    path = require_shared(SHARED_DATA / "uci" / "adult-complete-rows.csv")
    data = preprocess(load_dataset("adult", path=path), normalisation="local", norm="L2")
    result = central_dp.central_dp_baseline(
        data.x_train, data.y_train, data.x_test, data.y_test, epsilon=1.0, delta=1e-5
    )
    assert result.accuracy == pytest.approx(0.826, abs=3 * math.sqrt(0.826 * 0.174 / 3016))
