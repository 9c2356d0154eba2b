"""The learning yardsticks (netsim.learning.baselines): majority class and centralised model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from netsim.learning.baselines import LearningBaselines, clear_cache, learning_baselines


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_cache()
    yield
    clear_cache()


def separable(n: int = 200, d: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Points labelled by the sign of a fixed hyperplane, 0 / 1 labels, 70 % ones."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    score = x @ np.arange(1.0, d + 1)
    return x, (score > np.quantile(score, 0.3)).astype(int)


def test_majority_is_the_training_mode_share_of_the_test_split():
    x = np.zeros((5, 2))
    y_train = np.array([2, 2, 7, 7, 7])  # mode 7
    y_test = np.array([7, 2, 2, 2])  # one of four is a 7
    result = learning_baselines(x, y_train, np.zeros((4, 2)), y_test)
    assert isinstance(result, LearningBaselines)
    assert result.majority == 0.25


def test_a_tie_goes_to_the_smallest_label():
    x = np.zeros((4, 1))
    result = learning_baselines(
        x, np.array([1, -1, 1, -1]), np.zeros((3, 1)), np.array([-1, -1, 1])
    )
    assert result.majority == pytest.approx(2 / 3)


def test_the_centralised_model_beats_the_majority_on_separable_data():
    x, y = separable()
    result = learning_baselines(x[:150], y[:150], x[150:], y[150:])
    assert result.majority == pytest.approx(np.mean(y[150:] == 1))
    assert result.centralised > result.majority + 0.15
    assert result.centralised >= 0.9
    assert "logistic regression" in result.model


def test_labels_in_any_encoding_give_the_same_accuracies():
    x, y = separable()
    zero_one = learning_baselines(x[:150], y[:150], x[150:], y[150:])
    plus_minus = learning_baselines(x[:150], 2 * y[:150] - 1, x[150:], 2 * y[150:] - 1)
    assert (zero_one.majority, zero_one.centralised) == (
        plus_minus.majority,
        plus_minus.centralised,
    )


def test_sparse_and_dense_give_the_same_result():
    x, y = separable(d=8)
    x[np.abs(x) < 0.7] = 0.0  # mostly zeros
    dense = learning_baselines(x[:150], y[:150], x[150:], y[150:])
    sparse = learning_baselines(sp.csr_matrix(x[:150]), y[:150], sp.csr_matrix(x[150:]), y[150:])
    assert sparse.majority == dense.majority
    assert sparse.centralised == pytest.approx(dense.centralised, abs=1 / 50)


def test_several_classes():
    rng = np.random.default_rng(3)
    centres = np.array([[0.0, 4.0], [4.0, 0.0], [-4.0, -4.0]])
    y = rng.integers(0, 3, size=300)
    x = centres[y] + rng.normal(size=(300, 2))
    result = learning_baselines(x[:200], y[:200], x[200:], y[200:])
    counts = np.bincount(y[:200], minlength=3)
    assert result.majority == pytest.approx(np.mean(y[200:] == np.argmax(counts)))
    assert result.centralised > 0.95
    assert "multinomial" in result.model


def test_deterministic_without_the_cache(monkeypatch):
    monkeypatch.setenv("NETSIM_CACHE_DIR", "off")  # computed twice, not read from disk
    x, y = separable(seed=5)
    first = learning_baselines(x[:120], y[:120], x[120:], y[120:])
    clear_cache()
    second = learning_baselines(x[:120], y[:120], x[120:], y[120:])
    assert first is not second
    assert first == second


def test_the_cache_returns_the_same_object_for_equal_arrays():
    x, y = separable(seed=6)
    first = learning_baselines(x[:120], y[:120], x[120:], y[120:])
    again = learning_baselines(x[:120].copy(), y[:120].copy(), x[120:].copy(), y[120:].copy())
    assert again is first
    other = learning_baselines(x[:121], y[:121], x[121:], y[121:])
    assert other is not first


def test_an_empty_test_split_gives_nan():
    x, y = separable()
    result = learning_baselines(x, y, np.zeros((0, x.shape[1])), np.zeros(0, dtype=int))
    assert math.isnan(result.majority) and math.isnan(result.centralised)


def test_one_training_class_predicts_it():
    result = learning_baselines(
        np.ones((3, 2)), np.array([4, 4, 4]), np.ones((2, 2)), np.array([4, 1])
    )
    assert result.majority == result.centralised == 0.5


def test_mismatched_shapes_are_refused():
    with pytest.raises(ValueError, match="labels"):
        learning_baselines(np.zeros((3, 2)), np.array([0, 1]), np.zeros((1, 2)), np.array([0]))
    with pytest.raises(ValueError, match="empty"):
        learning_baselines(np.zeros((0, 2)), np.array([]), np.zeros((1, 2)), np.array([0]))
