"""netsim.learning.online_data: generators, §6 pre-processing, node streams."""

from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import SHARED_DATA, require_shared
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from netsim.errors import DataError, NetsimError
from netsim.learning import online_data as od
from netsim.learning.datasets import Dataset, load_dataset
from netsim.learning.online_data import (
    SYNTHETIC,
    OnlineData,
    from_dataset,
    load_online_data,
    passes,
    row_norms,
    shard_rows,
    stream_rows,
    synthetic_ball,
    synthetic_sparse,
)

ADULT = SHARED_DATA / "uci" / "adult-complete-rows.csv"


def within(observed: float, expected: float, sd: float, k: float = 5.0) -> bool:
    """Whether ``observed`` is within ``k`` standard deviations ``sd`` of ``expected``."""
    return abs(observed - expected) <= k * sd


def binomial_sd(p: float, n: int) -> float:
    return math.sqrt(p * (1.0 - p) / n)


def all_x(data: OnlineData) -> np.ndarray | sp.csr_matrix:
    stack = sp.vstack if data.sparse else np.vstack
    return stack([data.x_train, data.x_test])


# ----------------------------------------------------------------------------------------------
# synthetic_ball


def test_ball_shapes_norms_and_split() -> None:
    data = synthetic_ball(examples=2_000, features=5, test_fraction=0.25, seed=3)
    assert data.name == "synthetic_ball"
    assert not data.sparse
    assert (data.features, data.n_train, data.n_test) == (5, 1_500, 500)
    assert data.x_train.dtype == np.float64 and data.x_train.flags.c_contiguous
    assert data.y_train.dtype == np.float64
    assert set(np.unique(np.concatenate([data.y_train, data.y_test]))) == {-1.0, 1.0}
    assert row_norms(all_x(data)).max() <= 1.0
    # The test split is the last rows of the generated sequence.
    made = od._ball(2_000, 5, 0.05, 3)
    np.testing.assert_array_equal(data.x_train, made.x[:1_500])
    np.testing.assert_array_equal(data.x_test, made.x[1_500:])
    np.testing.assert_array_equal(data.y_test, made.y[1_500:])
    assert "2,000 points" in data.source and "5-dimensional" in data.source
    assert "seed 3" in data.source and "last 500 rows" in data.source


def test_ball_defaults_are_the_papers_experiment() -> None:
    data = synthetic_ball()
    assert data.features == 10 and data.n_train + data.n_test == 100_000
    assert data.n_test == 25_000


@pytest.mark.parametrize("d", [1, 3, 10])
def test_ball_radius_law(d: int) -> None:
    """P(‖x‖ ≤ r) = r^d: uniform in the ball."""
    n = 40_000
    x = od._ball(n, d, 0.0, 11).x
    radius = row_norms(x)
    assert radius.max() <= 1.0
    # ‖x‖^d is uniform on [0, 1].
    assert stats.kstest(radius**d, "uniform").pvalue > 1e-4
    for r in (0.3, 0.5, 0.8, 0.9, 0.97):
        share = float(np.mean(radius <= r))
        assert within(share, r**d, binomial_sd(r**d, n) + 1e-12), (r, share)
    # Directions are isotropic: every coordinate has mean 0 and E[x_j²] = 1/(d + 2).
    second = 1.0 / (d + 2)
    for j in range(d):
        assert within(float(x[:, j].mean()), 0.0, math.sqrt(second / n))
        assert abs(float(np.mean(x[:, j] ** 2)) - second) < 0.05 * second


def test_ball_labels_are_a_hyperplane_with_flips() -> None:
    n, noise = 40_000, 0.1
    made = od._ball(n, 10, noise, 5)
    assert np.isclose(np.linalg.norm(made.normal), 1.0)
    clean = np.where(made.x @ made.normal >= 0, 1.0, -1.0)
    flipped = made.y != clean
    np.testing.assert_array_equal(flipped, made.flipped)
    assert within(float(flipped.mean()), noise, binomial_sd(noise, n))
    # A hyperplane through the centre of the ball splits it in halves.
    assert within(float(np.mean(clean > 0)), 0.5, binomial_sd(0.5, n))
    # Without noise, the labels are the hyperplane's.
    quiet = od._ball(n, 10, 0.0, 5)
    np.testing.assert_array_equal(quiet.y, clean)


def test_ball_is_deterministic_per_seed() -> None:
    a = synthetic_ball(examples=500, seed=7)
    b = synthetic_ball(examples=500, seed=7)
    c = synthetic_ball(examples=500, seed=8)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_train, b.y_train)
    np.testing.assert_array_equal(a.x_test, b.x_test)
    assert not np.array_equal(a.x_train, c.x_train)
    assert not np.array_equal(a.y_train, c.y_train)


# ----------------------------------------------------------------------------------------------
# synthetic_sparse


def test_sparse_structure() -> None:
    n, k = 3_000, 30
    data = synthetic_sparse(examples=n, features=5_000, nonzeros=k, relevant=100, seed=2)
    assert data.name == "synthetic_sparse" and data.sparse
    for x in (data.x_train, data.x_test):
        assert isinstance(x, sp.csr_matrix)
        assert x.dtype == np.float64 and x.has_sorted_indices
        assert x.shape[1] == 5_000
        np.testing.assert_array_equal(np.diff(x.indptr), k)
        rows = np.split(x.indices, x.indptr[1:-1])
        assert all(len(np.unique(r)) == k for r in rows)  # distinct features per row
        assert (x.data > 0).all()
        np.testing.assert_allclose(row_norms(x), 1.0, rtol=0, atol=1e-12)
    assert (data.n_train, data.n_test) == (2_250, 750)
    y = np.concatenate([data.y_train, data.y_test])
    assert set(np.unique(y)) == {-1.0, 1.0}
    assert within(float(np.mean(y > 0)), 0.5, binomial_sd(0.5, n))
    assert "3,000 rows × 5,000 features with 30 distinct" in data.source


def test_sparse_labels_balanced_by_the_median_then_flipped() -> None:
    n, noise, m = 20_000, 0.1, 100
    made = od._sparse(n, 2_000, 40, m, noise, 4)
    assert np.count_nonzero(made.normal) == m
    scores = made.x @ made.normal
    clean = np.where(scores >= made.threshold, 1.0, -1.0)
    assert abs(int(np.sum(clean > 0)) - n // 2) <= 1  # the median splits the rows in halves
    np.testing.assert_array_equal(made.y != clean, made.flipped)
    assert within(float(made.flipped.mean()), noise, binomial_sd(noise, n))
    assert np.mean(scores == 0) < 0.01  # the support is drawn by popularity: rows touch it


def test_sparse_popularity_law() -> None:
    """With one feature per row, the feature of rank r has probability log1p(1/(r+10))/Z."""
    n, d, seed = 200_000, 50, 9
    made = od._sparse(n, d, 1, 1, 0.0, seed)
    by_rank = np.random.default_rng(seed).permutation(d)  # the generator's first draw
    counts = np.bincount(made.x.indices, minlength=d)[by_rank]
    rank = np.arange(d)
    p = np.log1p(1.0 / (rank + 10.0)) / math.log((d + 10.0) / 10.0)
    assert math.isclose(p.sum(), 1.0)
    share = counts / n
    for r in range(d):
        assert within(share[r], p[r], binomial_sd(p[r], n)), (r, share[r], p[r])


def test_sparse_samplers_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rejection sampling and Gumbel top-k draw the same successive sampling distribution."""
    n, d, k = 20_000, 40, 10
    share = {}
    for ratio, seed in ((4, 1), (0, 2)):  # d <= 4k: Gumbel; ratio 0: always rejection
        monkeypatch.setattr(od, "_REJECTION_RATIO", ratio)
        x = od._sparse(n, d, k, 5, 0.0, seed).x
        np.testing.assert_array_equal(np.diff(x.indptr), k)
        by_rank = np.random.default_rng(seed).permutation(d)
        share[ratio] = np.bincount(x.indices, minlength=d)[by_rank] / n
    # Inclusion probabilities per popularity rank agree.
    f = (share[4] + share[0]) / 2
    sd = np.sqrt(2 * f * (1 - f) / n) + 1e-12
    assert (np.abs(share[4] - share[0]) <= 5 * sd).all()
    assert share[4][0] > share[4][-1]  # popular features occur more often


def test_sparse_all_features_in_every_row() -> None:
    data = synthetic_sparse(examples=50, features=8, nonzeros=8, relevant=8, seed=0)
    for x in (data.x_train, data.x_test):
        np.testing.assert_array_equal(x.indices, np.tile(np.arange(8), x.shape[0]))


def test_sparse_is_deterministic_per_seed() -> None:
    a = synthetic_sparse(examples=1_000, features=3_000, seed=5)
    b = synthetic_sparse(examples=1_000, features=3_000, seed=5)
    c = synthetic_sparse(examples=1_000, features=3_000, seed=6)
    for part in ("x_train", "x_test"):
        assert (getattr(a, part) != getattr(b, part)).nnz == 0
    np.testing.assert_array_equal(a.y_train, b.y_train)
    assert (a.x_train != c.x_train).nnz > 0


def test_sparse_labels_are_learnable() -> None:
    from sklearn.svm import LinearSVC

    data = synthetic_sparse(examples=20_000, features=2_000, relevant=100, seed=0)
    model = LinearSVC(C=1.0).fit(data.x_train, data.y_train)
    accuracy = model.score(data.x_test, data.y_test)
    assert accuracy > 0.75, accuracy  # chance is 0.5, the noiseless oracle 0.95


def test_sparse_real_sim_size_is_fast() -> None:
    # This process's CPU time, not the wall clock: the cost of the generation, whatever else
    # shares the cores (a parallel test run's other workers, their clusters and processes).
    start = time.process_time()
    data = synthetic_sparse(examples=72_309, features=20_958, nonzeros=50, seed=1)
    seconds = time.process_time() - start
    assert data.x_train.nnz + data.x_test.nnz == 72_309 * 50
    assert seconds < 5.0, seconds


# ----------------------------------------------------------------------------------------------
# from_dataset (Li et al.'s pre-processing, docs/papers.md)


def test_from_dataset_spambase() -> None:
    raw = load_dataset("spambase")
    data = from_dataset(raw)
    assert data.name == "spambase" and not data.sparse
    assert (data.n_train, data.n_test, data.features) == (raw.n_train, raw.n_test, raw.features)
    np.testing.assert_array_equal(data.y_train, np.where(raw.y_train == 1, 1.0, -1.0))
    np.testing.assert_array_equal(data.y_test, np.where(raw.y_test == 1, 1.0, -1.0))
    # Step 2: columns divided by their largest absolute training value.
    divisor = np.abs(raw.x_train).max(axis=0)
    used = divisor > 0
    columns = raw.x_train[:, used] / divisor[used]
    assert np.all(np.abs(columns).max(axis=0) == 1.0)
    # Step 3: only rows longer than 1 are scaled, to norm 1.
    length = row_norms(columns)
    expected = columns / np.maximum(length, 1.0)[:, None]
    np.testing.assert_allclose(data.x_train[:, used], expected, rtol=1e-12, atol=0)
    assert (data.x_train[:, ~used] == 0).all()
    assert row_norms(data.x_train).max() <= 1.0 + 1e-12
    assert row_norms(data.x_test).max() <= 1.0 + 1e-12
    test_columns = raw.x_test[:, used] / divisor[used]  # the training divisor
    expected_test = test_columns / np.maximum(row_norms(test_columns), 1.0)[:, None]
    np.testing.assert_allclose(data.x_test[:, used], expected_test, rtol=1e-12, atol=0)
    assert "spambase" in data.source and "largest absolute training value" in data.source


def test_from_dataset_hand_example() -> None:
    raw = Dataset(
        name="tiny",
        x_train=[[2.0, 0.0, -1.0], [-4.0, 0.0, 0.5], [0.0, 0.0, 0.0]],
        y_train=[0, 1, 1],
        x_test=[[8.0, 3.0, 0.0], [1.0, 0.0, 0.25]],
        y_test=[1, 0],
        class_names=("no", "yes"),
        source="hand-made",
        split="fixed",
    )
    data = from_dataset(raw)
    # Columns divided by 4, (all zero: set to 0), 1; then rows longer than 1 scaled.
    r = math.hypot(0.5, 1.0)
    np.testing.assert_allclose(
        data.x_train, [[0.5 / r, 0.0, -1.0 / r], [-1.0 / r, 0.0, 0.5 / r], [0.0, 0.0, 0.0]]
    )
    np.testing.assert_allclose(data.x_test, [[1.0, 0.0, 0.0], [0.25, 0.0, 0.25]])
    np.testing.assert_array_equal(data.y_train, [-1.0, 1.0, 1.0])
    np.testing.assert_array_equal(data.y_test, [1.0, -1.0])
    assert "'no' → −1" in data.source and "1 all-zero training columns" in data.source


def test_from_dataset_refuses_more_than_two_classes() -> None:
    with pytest.raises(DataError, match=r"'wine' has 3 classes .*binary") as info:
        from_dataset(load_dataset("wine"))
    assert isinstance(info.value, NetsimError)


def test_from_dataset_adult() -> None:
    path = require_shared(ADULT)
    data = load_online_data("adult", path=path)
    assert data.name == "adult" and not data.sparse
    assert data.n_train + data.n_test == 30_162  # the complete rows
    assert data.features > 100  # one-hot categoricals
    assert set(np.unique(data.y_train)) == {-1.0, 1.0}
    assert 0.2 < float(np.mean(data.y_train > 0)) < 0.3  # '>50K' is the minority
    assert row_norms(data.x_train).max() <= 1.0 + 1e-12
    assert row_norms(data.x_test).max() <= 1.0 + 1e-12
    assert np.abs(data.x_train).max() <= 1.0


# ----------------------------------------------------------------------------------------------
# OnlineData checks


def test_online_data_converts_and_canonicalises() -> None:
    x = np.asfortranarray(np.array([[0, 1], [1, 0]], dtype=np.int32))
    data = OnlineData("d", x, [1, -1], np.zeros((0, 2)), np.zeros(0), "s")
    assert data.x_train.dtype == np.float64 and data.x_train.flags.c_contiguous
    assert data.y_train.dtype == np.float64 and data.n_test == 0
    # Unsorted indices and duplicates are summed and sorted (without touching the input).
    raw = sp.csr_matrix(
        (np.array([0.3, 0.2, 0.2]), np.array([1, 0, 1]), np.array([0, 3])), shape=(1, 2)
    )
    sparse = OnlineData("s", raw, [1], sp.csr_array((0, 2)), [], "s")
    assert isinstance(sparse.x_train, sp.csr_matrix) and isinstance(sparse.x_test, sp.csr_matrix)
    np.testing.assert_array_equal(sparse.x_train.indices, [0, 1])
    np.testing.assert_allclose(sparse.x_train.data, [0.2, 0.5])
    np.testing.assert_array_equal(raw.indices, [1, 0, 1])


@pytest.mark.parametrize(
    ("x", "y", "message"),
    [
        ([[0.6, 0.8]], [0], r"y_train\[0\] is 0.0; labels must be -1.0 or \+1.0"),
        ([[0.6, 0.81]], [1], r"row 0 of x_train has L2 norm 1.00\d* > 1"),
        ([[np.nan, 0.0]], [1], "x_train holds NaN or infinite values"),
        ([0.5, 0.5], [1], r"x_train must have shape \(rows, features\)"),
        ([[0.5, 0.5]], [1, 1], "x_train has 1 rows but y_train has 2 labels"),
        ([[0.5, 0.5, 0.0]], [1], "3 training features but 2 test features"),
        (sp.csr_matrix([[0.5, 0.5]]), [1], "both be dense .* or both sparse"),
    ],
)
def test_online_data_refuses(x: object, y: object, message: str) -> None:
    with pytest.raises(DataError, match=message):
        OnlineData("bad", x, y, np.zeros((1, 2)), [1.0], "s")


def test_online_data_refuses_long_sparse_rows() -> None:
    x = sp.csr_matrix([[0.0, 0.0], [3.0, 4.0]])
    with pytest.raises(DataError, match="row 1 of x_test has L2 norm 5 > 1"):
        OnlineData("bad", sp.csr_matrix((1, 2)), [1], x, [1, -1], "s")


# ----------------------------------------------------------------------------------------------
# load_online_data


def test_load_synthetic_dispatch() -> None:
    data = load_online_data(
        "synthetic_ball", split_seed=4, options={"examples": 400, "features": 3}
    )
    direct = synthetic_ball(examples=400, features=3, seed=4, test_fraction=0.25)
    np.testing.assert_array_equal(data.x_train, direct.x_train)
    np.testing.assert_array_equal(data.y_test, direct.y_test)
    sparse = load_online_data(
        "synthetic_sparse",
        split_seed=2,
        test_fraction=0.5,
        options={"examples": 1e3, "features": 500, "nonzeros": 5, "relevant": 20},
    )
    assert sparse.sparse and (sparse.n_train, sparse.n_test, sparse.features) == (500, 500, 500)
    assert SYNTHETIC == ("synthetic_ball", "synthetic_sparse")


def test_load_builtin_dispatch() -> None:
    data = load_online_data("breast_cancer", split_seed=3, test_fraction=0.3)
    direct = from_dataset(load_dataset("breast_cancer", split_seed=3, test_fraction=0.3))
    np.testing.assert_array_equal(data.x_train, direct.x_train)
    np.testing.assert_array_equal(data.y_test, direct.y_test)


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        (
            "synthetic_ball",
            {"options": {"nonzeros": 5}},
            "'synthetic_ball': unknown option 'nonzeros'; the options are 'examples', "
            "'features', 'label_noise'",
        ),
        (
            "synthetic_sparse",
            {"options": {"seed": 5}},
            r"unknown option 'seed' \(give the seed as split_seed=, not as an option\); the "
            "options are 'examples', 'features', 'nonzeros', 'relevant', 'label_noise'",
        ),
        ("synthetic_ball", {"options": {"test_fraction": 0.5}}, "as test_fraction="),
        ("synthetic_ball", {"path": "x.csv"}, "is generated; do not give path="),
        ("synthetic_sparse", {"label": "y"}, "is generated; do not give label="),
        ("synthetic_ball", {"split_seed": -1}, "split_seed must be an integer >= 0, got -1"),
        ("spambase", {"options": {"examples": 5}}, "'spambase' takes no options"),
        ("covertype", {}, "unknown data set 'covertype'; .*'synthetic_ball'.*'spambase'"),
        (
            "synthetic_ball",
            {"options": {"examples": 1}},
            "synthetic_ball: examples must be an integer >= 2, got 1",
        ),
        (
            "synthetic_ball",
            {"options": {"examples": 2.5}},
            "examples must be an integer >= 2, got 2.5",
        ),
        (
            "synthetic_ball",
            {"options": {"features": True}},
            r"features must be an integer in \[1, 10000000\]",
        ),
        (
            "synthetic_ball",
            {"options": {"features": 0}},
            r"features must be an integer in \[1, 10000000\]",
        ),
        (
            "synthetic_sparse",
            {"options": {"features": 100, "nonzeros": 101}},
            r"nonzeros must be an integer in \[1, features\] = \[1, 100\], got 101",
        ),
        (
            "synthetic_sparse",
            {"options": {"features": 100, "relevant": 0}},
            r"relevant must be an integer in \[1, features\] = \[1, 100\], got 0",
        ),
        (
            "synthetic_sparse",
            {"options": {"features": 100, "relevant": 101}},
            r"relevant must be an integer in \[1, features\] = \[1, 100\], got 101",
        ),
        (
            "synthetic_ball",
            {"options": {"label_noise": 0.5}},
            r"label_noise must be a number in \[0, 0.5\)",
        ),
        (
            "synthetic_sparse",
            {"options": {"label_noise": -0.1}},
            r"label_noise must be a number in \[0, 0.5\)",
        ),
        ("synthetic_ball", {"test_fraction": 1.0}, r"test_fraction must be a number in \(0, 1\)"),
        (
            "synthetic_ball",
            {"test_fraction": 0.1, "options": {"examples": 4}},
            r"test_fraction 0.1 of 4 examples leaves 4 training and 0 test rows; each side "
            r"needs at least 1 row \(test_fraction in \[0.125, 0.875\) for 4 examples\)",
        ),
    ],
)
def test_load_refuses(name: str, kwargs: dict, message: str) -> None:
    with pytest.raises(DataError, match=message):
        load_online_data(name, **kwargs)


def test_load_refuses_multiclass_builtin() -> None:
    with pytest.raises(DataError, match=re.escape("'digits' has 10 classes")):
        load_online_data("digits")


# ----------------------------------------------------------------------------------------------
# shard_rows, stream_rows, passes


def test_shard_rows_hand_example() -> None:
    table, lengths = shard_rows(10, 3, seed=0)
    order = np.random.default_rng(0).permutation(10)
    assert table.dtype == np.int64 and lengths.dtype == np.int64
    np.testing.assert_array_equal(lengths, [4, 3, 3])
    np.testing.assert_array_equal(table[0], order[0::3])
    np.testing.assert_array_equal(table[1], [*order[1::3], -1])
    np.testing.assert_array_equal(table[2], [*order[2::3], -1])


@given(n=st.integers(1, 300), nodes=st.integers(1, 300), seed=st.integers(0, 2**32))
def test_shard_rows_cover_every_row_once(n: int, nodes: int, seed: int) -> None:
    if nodes > n:
        with pytest.raises(DataError, match=f"{nodes:,} nodes but only {n:,} training rows"):
            shard_rows(n, nodes, seed)
        return
    table, lengths = shard_rows(n, nodes, seed)
    assert table.shape == (nodes, lengths.max())
    assert lengths.min() >= 1 and lengths.max() - lengths.min() <= 1
    assert lengths.sum() == n
    used = np.concatenate([table[i, : lengths[i]] for i in range(nodes)])
    np.testing.assert_array_equal(np.sort(used), np.arange(n))
    for i in range(nodes):
        assert (table[i, lengths[i] :] == -1).all()
    again, _ = shard_rows(n, nodes, seed)
    np.testing.assert_array_equal(table, again)


def test_shard_rows_refuses() -> None:
    with pytest.raises(DataError, match="5 nodes but only 4 training rows"):
        shard_rows(4, 5, 0)
    with pytest.raises(DataError, match="shard_rows: nodes must be an integer >= 1, got 0"):
        shard_rows(4, 0, 0)


def test_stream_rows_wraps_around() -> None:
    table = np.array([[5, 2, 7], [1, 4, -1]])
    lengths = np.array([3, 2])
    both = np.array([0, 1])
    rows = stream_rows(table, lengths, 0, 2, both)
    assert rows.dtype == np.int64 and rows.shape == (2, 2)
    np.testing.assert_array_equal(rows, [[5, 2], [1, 4]])
    np.testing.assert_array_equal(stream_rows(table, lengths, 1, 2, both), [[7, 5], [1, 4]])
    np.testing.assert_array_equal(stream_rows(table, lengths, 2, 2, both), [[2, 7], [1, 4]])
    np.testing.assert_array_equal(stream_rows(table, lengths, 4, 1, both), [[2], [1]])
    np.testing.assert_array_equal(stream_rows(table, lengths, 0, 5, both[1:]), [[1, 4, 1, 4, 1]])
    np.testing.assert_array_equal(
        stream_rows(table, lengths, 1, 2, np.array([1, 0, 1])),
        [
            [1, 4],
            [7, 5],
            [1, 4],
        ],
    )
    assert stream_rows(table, lengths, 3, 2, np.array([], dtype=np.int64)).shape == (0, 2)


def test_stream_rows_refuses() -> None:
    table, lengths = np.array([[5, 2, 7], [1, 4, -1]]), np.array([3, 2])
    with pytest.raises(DataError, match=r"node ids must lie in \[0, 1\], got 0..2"):
        stream_rows(table, lengths, 0, 1, np.array([0, 2]))
    with pytest.raises(DataError, match="batch must be an integer >= 1, got 0"):
        stream_rows(table, lengths, 0, 0, np.array([0]))
    with pytest.raises(DataError, match="round_index must be an integer >= 0, got -1"):
        stream_rows(table, lengths, -1, 1, np.array([0]))
    with pytest.raises(DataError, match="table must have shape"):
        stream_rows(table, lengths[:1], 0, 1, np.array([0]))


def test_passes_hand_example() -> None:
    lengths = np.array([4, 3, 3])
    assert passes(lengths, rounds=5, batch=2) == 4  # 10 draws from 3 rows: ceil(10/3)
    assert passes(lengths, rounds=3, batch=1) == 1
    assert passes(lengths, rounds=4, batch=1) == 2
    assert passes(lengths, rounds=0, batch=3) == 0
    with pytest.raises(DataError, match="lengths must be a non-empty 1-D integer array"):
        passes(np.array([3, 0]), 1, 1)


def test_passes_counts_what_stream_rows_uses() -> None:
    table, lengths = shard_rows(23, 4, seed=1)
    rounds, batch = 7, 3
    nodes = np.arange(4)
    used = np.concatenate([stream_rows(table, lengths, t, batch, nodes).ravel() for t in range(7)])
    assert (used >= 0).all()  # never the -1 padding
    counts = np.bincount(used, minlength=23)
    assert counts.max() == passes(lengths, rounds, batch)
    assert counts.sum() == 4 * rounds * batch
