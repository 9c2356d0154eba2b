"""The regret comparator at checkpoints (netsim.learning.regret), shared by DOLA and MI-OGD."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.learning.hindsight import hindsight_minimum
from netsim.learning.regret import hindsight_at_checkpoints


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 2))
    y = np.where(rng.random(6) < 0.5, -1.0, 1.0)
    return x, y


def test_skips_checkpoints_that_played_nothing_and_counts_the_prefix():
    x, y = _data()
    examples = np.array([4, 1, 4, 0, 5], dtype=np.int64)
    minima = list(
        hindsight_at_checkpoints(
            np.array([1, 2, 5]), [0, 2, 5], examples, x, y, loss="logistic", radius=1.0
        )
    )
    assert [(int(m.round), m.played) for m in minima] == [(2, 2), (5, 5)]
    for minimum in minima:
        weights = np.bincount(examples[: minimum.played], minlength=6).astype(float)
        cold = hindsight_minimum(x, y, weights, loss="logistic", radius=1.0)
        gap = max(
            cold.value - cold.lower_bound, minimum.solution.value - minimum.solution.lower_bound
        )
        assert minimum.solution.value == pytest.approx(cold.value, abs=2 * gap + 1e-12)


def test_multiplicities_are_divided_by_the_examples_per_loss():
    x, y = _data()
    examples = np.array([0, 0, 3, 2], dtype=np.int64)
    (minimum,) = hindsight_at_checkpoints(
        [1], [4], examples, x, y, loss="logistic", radius=1.0, per_example=2
    )
    direct = hindsight_minimum(
        x, y, np.bincount(examples, minlength=6) / 2, loss="logistic", radius=1.0
    )
    assert minimum.solution.value == direct.value
    assert np.array_equal(minimum.solution.w, direct.w)
