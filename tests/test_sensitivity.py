"""Per-example gradient sensitivity: bounds hold on random cases, are tight, gradients are exact."""

from __future__ import annotations

import math

import numpy as np
import pytest

from netsim.learning.losses import per_example_gradient
from netsim.learning.sensitivity import clip_rows, gradient_bound, sensitivity

BINARY = ("logistic", "hinge", "absolute")
MULTICLASS = ("softmax", "multiclass_hinge")
NORMS = ("L1", "L2")
SCALES = (0.1, 1.0, 10.0)
CASES = 2_000
TOL = 1e-9


def norm_of(a: np.ndarray, norm: str) -> float:
    """The norm of the flattened array, computed independently of the module."""
    flat = np.ravel(a)
    return float(np.abs(flat).sum()) if norm == "L1" else math.sqrt(float(flat @ flat))


def random_x(rng: np.random.Generator, d: int, radius: float, norm: str) -> np.ndarray:
    """A random x with ‖x‖ ≤ radius: on the sphere half of the time, sparse a quarter of it."""
    while True:
        v = rng.standard_normal(d)
        if rng.random() < 0.25:
            v[rng.random(d) < 0.5] = 0.0
        n = norm_of(v, norm)
        if n > 0:
            break
    length = radius if rng.random() < 0.5 else radius * rng.random()
    return v * (length / n)


def random_label(rng: np.random.Generator, loss: str, classes: int, scale: float) -> float | int:
    if loss in ("logistic", "hinge"):
        return int(rng.choice([-1, 1]))
    if loss == "absolute":
        return float(rng.normal(0.0, scale))
    return int(rng.integers(classes))


# --- the bounds themselves --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("loss", "norm", "factor"),
    [
        ("logistic", "L1", 1.0),
        ("logistic", "L2", 1.0),
        ("hinge", "L1", 1.0),
        ("hinge", "L2", 1.0),
        ("absolute", "L1", 1.0),
        ("absolute", "L2", 1.0),
        ("softmax", "L1", 2.0),
        ("softmax", "L2", math.sqrt(2.0)),
        ("multiclass_hinge", "L1", 2.0),
        ("multiclass_hinge", "L2", math.sqrt(2.0)),
    ],
)
def test_bound_values(loss: str, norm: str, factor: float) -> None:
    classes = (2, 3, 10) if loss in MULTICLASS else (2,)
    for k in classes:
        for radius in (0.5, 1.0, 3.0):
            g = gradient_bound(loss, radius=radius, norm=norm, classes=k)
            assert g == pytest.approx(factor * radius, rel=1e-15)
            assert sensitivity(loss, radius=radius, norm=norm, classes=k) == 2.0 * g


# --- 1. the bounds hold on random cases -------------------------------------------------------


def _random_batch(
    rng: np.random.Generator, loss: str, norm: str, classes: int, radius: float
) -> tuple[np.ndarray, ...]:
    """All random draws of :func:`_random_cases` at once (the loop then only computes)."""
    d_max, n = 5, CASES
    dims = rng.integers(1, d_max + 1, n)
    scales = np.asarray(SCALES)[np.arange(n) % len(SCALES)]
    w_shape = (n, classes, d_max) if loss in MULTICLASS else (n, d_max)
    w = rng.standard_normal(w_shape) * scales.reshape((n,) + (1,) * (len(w_shape) - 1))
    x = rng.standard_normal((n, 2, d_max))
    sparse = (rng.random((n, 2, 1)) < 0.25) & (rng.random((n, 2, d_max)) < 0.5)
    unused = np.arange(d_max) >= dims[:, None, None]  # only the first d coordinates are used
    x[sparse | unused] = 0.0
    x[:, :, 0] = np.where(np.all(x == 0.0, axis=2), 1.0, x[:, :, 0])  # never all zero
    lengths = np.where(rng.random((n, 2)) < 0.5, radius, radius * rng.random((n, 2)))
    norms = np.abs(x).sum(axis=2) if norm == "L1" else np.linalg.norm(x, axis=2)
    x *= (lengths / norms)[:, :, None]
    if loss in ("logistic", "hinge"):
        y = rng.choice([-1, 1], size=(n, 2))
    elif loss == "absolute":  # comparable to w·x, so both signs of w·x − y occur
        y = rng.normal(0.0, 1.0, (n, 2)) * (scales * radius)[:, None]
    else:
        y = rng.integers(classes, size=(n, 2))
    return dims, w, x, y


def _random_cases(loss: str, norm: str, classes: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    radius = 1.3
    bound = gradient_bound(loss, radius=radius, norm=norm, classes=classes)
    delta = sensitivity(loss, radius=radius, norm=norm, classes=classes)
    dims, ws, xs, ys = _random_batch(rng, loss, norm, classes, radius)
    worst_single = worst_pair = 0.0
    for case in range(CASES):
        d = int(dims[case])
        w = ws[case, ..., :d]
        x1, x2 = xs[case, 0, :d], xs[case, 1, :d]
        assert norm_of(x1, norm) <= radius + TOL and norm_of(x2, norm) <= radius + TOL
        y1, y2 = ys[case].tolist()
        g1 = per_example_gradient(loss, w, x1, y1)
        g2 = per_example_gradient(loss, w, x2, y2)
        assert g1.shape == w.shape
        n1, n2, n12 = norm_of(g1, norm), norm_of(g2, norm), norm_of(g1 - g2, norm)
        assert n1 <= bound + TOL, (case, n1, bound)
        assert n2 <= bound + TOL, (case, n2, bound)
        assert n12 <= delta + TOL, (case, n12, delta)
        worst_single = max(worst_single, n1, n2)
        worst_pair = max(worst_pair, n12)
    # The random cases exercise the bound, not just a corner far below it.
    assert worst_single >= 0.9 * bound
    assert worst_pair >= 0.75 * delta


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("loss", BINARY)
def test_random_cases_binary(loss: str, norm: str) -> None:
    _random_cases(loss, norm, 2, seed=10 * BINARY.index(loss) + NORMS.index(norm))


@pytest.mark.parametrize("classes", [2, 3, 10])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("loss", MULTICLASS)
def test_random_cases_multiclass(loss: str, norm: str, classes: int) -> None:
    _random_cases(
        loss,
        norm,
        classes,
        seed=100 * (1 + MULTICLASS.index(loss)) + 10 * classes + NORMS.index(norm),
    )


def test_logistic_antipodal_pair_is_not_the_worst_case() -> None:
    """x and −x at the same w differ by at most R for logistic regression (the coefficients add
    to 1 − y₁ − y₂), so the tight pair needs an orthogonal component (see the docstring)."""
    rng = np.random.default_rng(5)
    radius = 1.0
    for _ in range(500):
        w = rng.normal(0.0, 10.0, 3)
        x = random_x(rng, 3, radius, "L2")
        y1, y2 = (int(v) for v in rng.choice([-1, 1], size=2))
        g1 = per_example_gradient("logistic", w, x, y1)
        g2 = per_example_gradient("logistic", w, -x, y2)
        assert norm_of(g1 - g2, "L2") <= radius + TOL


# --- 2. tightness -----------------------------------------------------------------------------


def _pair_with_equal_scores(
    radius: float, norm: str, c: float, d: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x₁, x₂ of norm R (in ``norm``) far apart, and a unit-score direction v with v·x₁ = v·x₂ = 1.

    L2: x₁ = R e₀, x₂ = R(−c e₀ + √(1 − c²) e₁), ‖x₁ − x₂‖₂ = R√(2 + 2c).
    L1: x₁ = R e₀, x₂ = R e₁, ‖x₁ − x₂‖₁ = 2R.
    """
    x1 = np.zeros(d)
    x2 = np.zeros(d)
    x1[0] = radius
    v = np.zeros(d)
    if norm == "L2":
        s = math.sqrt(1.0 - c * c)
        x2[0], x2[1] = -c * radius, s * radius
        v[0], v[1] = 1.0 / radius, (1.0 + c) / (s * radius)
    else:
        x2[1] = radius
        v[0] = v[1] = 1.0 / radius
    assert norm_of(x1, norm) == pytest.approx(radius)
    assert norm_of(x2, norm) == pytest.approx(radius)
    assert float(v @ x1) == pytest.approx(1.0) and float(v @ x2) == pytest.approx(1.0)
    return x1, x2, v


@pytest.mark.parametrize("norm", NORMS)
def test_tight_logistic(norm: str) -> None:
    radius = 1.7
    x1, x2, v = _pair_with_equal_scores(radius, norm, c=0.9999, d=3)
    w = 40.0 * v  # w·x₁ = w·x₂ = 40: σ − 0 = 1 − 4e−18 on both
    diff = per_example_gradient("logistic", w, x1, -1) - per_example_gradient("logistic", w, x2, -1)
    delta = sensitivity("logistic", radius=radius, norm=norm)
    assert delta * 0.999 <= norm_of(diff, norm) <= delta
    # With y = 1 and w·x → −∞ the mirror pair is just as tight.
    diff = per_example_gradient("logistic", -w, x1, 1) - per_example_gradient("logistic", -w, x2, 1)
    assert norm_of(diff, norm) >= 0.999 * delta


@pytest.mark.parametrize("norm", NORMS)
def test_tight_hinge_attained(norm: str) -> None:
    rng = np.random.default_rng(1)
    radius = 2.5
    x = random_x(rng, 4, radius, norm)
    x *= radius / norm_of(x, norm)
    w = np.zeros(4)  # |w·x| < 1: both margins violated
    diff = per_example_gradient("hinge", w, x, 1) - per_example_gradient("hinge", w, -x, 1)
    delta = sensitivity("hinge", radius=radius, norm=norm)
    assert norm_of(diff, norm) == pytest.approx(delta, rel=1e-12)
    assert norm_of(diff, norm) >= 0.999 * delta


@pytest.mark.parametrize("norm", NORMS)
def test_tight_absolute_attained(norm: str) -> None:
    rng = np.random.default_rng(2)
    radius = 0.8
    x = random_x(rng, 4, radius, norm)
    x *= radius / norm_of(x, norm)
    w = rng.normal(0.0, 1.0, 4)
    wx = float(w @ x)
    # Same x, labels on both sides of w·x.
    diff = per_example_gradient("absolute", w, x, wx - 1.0) - per_example_gradient(
        "absolute", w, x, wx + 1.0
    )
    delta = sensitivity("absolute", radius=radius, norm=norm)
    assert norm_of(diff, norm) == pytest.approx(delta, rel=1e-12)
    # Antipodal pair at w = 0 with the same label.
    diff = per_example_gradient("absolute", np.zeros(4), x, 1.0) - per_example_gradient(
        "absolute", np.zeros(4), -x, 1.0
    )
    assert norm_of(diff, norm) >= 0.999 * delta


def _multiclass_weights(classes: int, d: int, v: np.ndarray, big: float) -> np.ndarray:
    """Zero except row b = K − 1, whose score is ``big`` on both inputs of the pair."""
    w = np.zeros((classes, d))
    w[classes - 1] = big * v
    return w


@pytest.mark.parametrize("classes", [2, 3, 10])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("loss", MULTICLASS)
def test_tight_multiclass_construction(loss: str, norm: str, classes: int) -> None:
    """y₁ = y₂ = 0, all probability (or the max competitor) on class K − 1 for both inputs."""
    radius = 1.2
    x1, x2, v = _pair_with_equal_scores(radius, norm, c=0.999, d=3)
    w = _multiclass_weights(classes, 3, v, big=20.0)  # p_b ≥ 1 − 1e−8
    diff = per_example_gradient(loss, w, x1, 0) - per_example_gradient(loss, w, x2, 0)
    delta = sensitivity(loss, radius=radius, norm=norm, classes=classes)
    got = norm_of(diff, norm)
    assert 0.99 * delta <= got <= delta + TOL
    if loss == "multiclass_hinge":
        # Exact values: 2√2·R·√((1 + c)/2) in L2, 4R in L1.
        expected = delta * math.sqrt((1.0 + 0.999) / 2.0) if norm == "L2" else delta
        assert got == pytest.approx(expected, rel=1e-12)
    else:
        assert got < delta  # the softmax supremum is not attained


@pytest.mark.parametrize("classes", [2, 3, 10])
@pytest.mark.parametrize("norm", NORMS)
def test_multiclass_hinge_attains_supremum(norm: str, classes: int) -> None:
    """At W = 0 every margin is violated: x and −x with one label give exactly 2√2·R / 4R."""
    rng = np.random.default_rng(3)
    radius = 0.7
    x = random_x(rng, 5, radius, norm)
    x *= radius / norm_of(x, norm)
    w = np.zeros((classes, 5))
    for y in range(classes):
        diff = per_example_gradient("multiclass_hinge", w, x, y) - per_example_gradient(
            "multiclass_hinge", w, -x, y
        )
        delta = sensitivity("multiclass_hinge", radius=radius, norm=norm, classes=classes)
        assert norm_of(diff, norm) == pytest.approx(delta, rel=1e-12)


# --- 3. gradients against finite differences ----------------------------------------------------


def _loss(loss: str, w: np.ndarray, x: np.ndarray, y: float | int) -> float:
    if loss == "logistic":
        z = float(w @ x)
        return float(np.logaddexp(0.0, -y * z))
    if loss == "hinge":
        return max(0.0, 1.0 - y * float(w @ x))
    if loss == "absolute":
        return abs(float(w @ x) - y)
    s = w @ x
    if loss == "softmax":
        return float(np.logaddexp.reduce(s) - s[y])
    return max(0.0, 1.0 + float(np.max(np.delete(s, y))) - float(s[y]))


def _away_from_kink(loss: str, w: np.ndarray, x: np.ndarray, y: float | int) -> bool:
    gap = 1e-3
    if loss == "hinge":
        return abs(1.0 - y * float(w @ x)) > gap
    if loss == "absolute":
        return abs(float(w @ x) - y) > gap
    if loss == "multiclass_hinge":
        s = w @ x
        others = np.sort(np.delete(s, y))
        return abs(1.0 + others[-1] - s[y]) > gap and others[-1] - others[-2] > gap
    return True


def _finite_difference(loss: str, w: np.ndarray, x: np.ndarray, y: float | int) -> np.ndarray:
    h = 1e-6
    grad = np.zeros_like(w)
    for i in np.ndindex(w.shape):
        wp, wm = w.copy(), w.copy()
        wp[i] += h
        wm[i] -= h
        grad[i] = (_loss(loss, wp, x, y) - _loss(loss, wm, x, y)) / (2.0 * h)
    return grad


@pytest.mark.parametrize("loss", BINARY + MULTICLASS)
def test_gradient_matches_finite_differences(loss: str) -> None:
    rng = np.random.default_rng(7)
    d, classes = 4, 4
    checked = 0
    while checked < 40:
        scale = SCALES[checked % 2]  # 0.1 and 1: unsaturated, so the comparison is informative
        shape = (classes, d) if loss in MULTICLASS else (d,)
        w = rng.normal(0.0, scale, shape)
        x = rng.normal(0.0, 1.0, d)
        y = random_label(rng, loss, classes, 1.0)
        if not _away_from_kink(loss, w, x, y):
            continue
        expected = _finite_difference(loss, w, x, y)
        # atol covers components that are 0 up to the finite difference's rounding (~1e-10).
        np.testing.assert_allclose(
            per_example_gradient(loss, w, x, y), expected, rtol=1e-5, atol=1e-8
        )
        checked += 1


def test_gradient_conventions_at_kinks() -> None:
    x = np.array([1.0, 2.0])
    w = np.array([1.0, 0.0])  # w·x = 1
    assert np.array_equal(per_example_gradient("hinge", w, x, 1), np.zeros(2))  # y w·x = 1
    assert np.array_equal(per_example_gradient("hinge", w, x, -1), x)  # y w·x = −1 < 1
    assert np.array_equal(per_example_gradient("absolute", w, x, 1.0), np.zeros(2))
    wm = np.zeros((3, 2))
    wm[0] = [1.0, 0.0]  # scores (1, 0, 0): y = 0 has margin exactly 0, not violated
    assert np.array_equal(per_example_gradient("multiclass_hinge", wm, x, 0), np.zeros((3, 2)))
    # y = 2: competitors 0 (score 1) and 1 (score 0) → k* = 0.
    g = per_example_gradient("multiclass_hinge", wm, x, 2)
    assert np.array_equal(g, np.array([x, np.zeros(2), -x]))
    # Ties: at W = 0 with y = 1 the smallest competing index, 0, is k*.
    g = per_example_gradient("multiclass_hinge", np.zeros((3, 2)), x, 1)
    assert np.array_equal(g, np.array([x, -x, np.zeros(2)]))


def test_logistic_gradient_is_accurate_when_saturated() -> None:
    x = np.array([1.0, -1.0])
    w = np.array([30.0, -30.0])  # w·x = 60
    g = per_example_gradient("logistic", w, x, 1)  # −σ(−60) x, not 0
    assert np.allclose(g, -math.exp(-60.0) / (1.0 + math.exp(-60.0)) * x, rtol=1e-12, atol=0)
    assert np.all(np.isfinite(per_example_gradient("logistic", 1e5 * w, x, -1)))


# --- 4. clip_rows -----------------------------------------------------------------------------


@pytest.mark.parametrize("norm", NORMS)
def test_clip_rows(norm: str) -> None:
    rng = np.random.default_rng(9)
    radius = 1.5
    x = rng.normal(0.0, 1.0, (300, 6))
    x *= (rng.uniform(0.0, 2.0 * radius, 300) / np.array([norm_of(r, norm) for r in x]))[:, None]
    x[0] = 0.0
    x[1] *= radius / norm_of(x[1], norm)  # exactly on the sphere
    original = x.copy()
    out = clip_rows(x, radius, norm)
    assert np.array_equal(x, original)  # input not modified
    assert out is not x and out.shape == x.shape
    norms_in = np.array([norm_of(r, norm) for r in x])
    norms_out = np.array([norm_of(r, norm) for r in out])
    outside = norms_in > radius
    assert 50 < outside.sum() < 250  # both kinds of rows are present
    np.testing.assert_allclose(norms_out[outside], radius, rtol=1e-12)
    assert np.array_equal(out[~outside], x[~outside])
    # Directions preserved: each clipped row is a positive multiple of the original.
    ratio = out[outside] / x[outside]
    expected = np.broadcast_to((radius / norms_in[outside])[:, None], ratio.shape)
    np.testing.assert_allclose(ratio, expected, rtol=1e-12)
    assert np.all(norms_out <= radius * (1 + 1e-12))


def test_clip_rows_integer_input_and_copy() -> None:
    x = np.array([[3, 4], [0, 1]])
    out = clip_rows(x, 1.0, "L2")
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 1.0]])
    assert np.array_equal(x, [[3, 4], [0, 1]])
    y = np.array([[0.1, 0.2]], dtype=np.float32)
    out32 = clip_rows(y, 1.0, "L1")
    assert out32.dtype == np.float32 and out32 is not y
    out32[0, 0] = 9.0
    assert y[0, 0] == np.float32(0.1)


# --- 5. bad arguments -------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [gradient_bound, sensitivity])
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"loss": "logistic", "radius": 1.0, "norm": "L3"}, "norm must be 'L1' or 'L2'"),
        ({"loss": "logistic", "radius": 1.0, "norm": "l2"}, "norm must be 'L1' or 'L2'"),
        ({"loss": "logistic", "radius": 0.0, "norm": "L2"}, "radius must be positive"),
        ({"loss": "hinge", "radius": -1.0, "norm": "L1"}, "radius must be positive"),
        ({"loss": "hinge", "radius": math.nan, "norm": "L1"}, "radius must be positive"),
        ({"loss": "hinge", "radius": math.inf, "norm": "L1"}, "radius must be positive"),
        (
            {"loss": "softmax", "radius": 1.0, "norm": "L2", "classes": 1},
            "classes must be at least 2",
        ),
        (
            {"loss": "multiclass_hinge", "radius": 1.0, "norm": "L1", "classes": 0},
            "classes must be at least 2",
        ),
        (
            {"loss": "logistic", "radius": 1.0, "norm": "L2", "classes": 10},
            "'logistic' is binary",
        ),
        (
            {"loss": "squared", "radius": 1.0, "norm": "L2"},
            "unknown loss 'squared'; known losses: logistic, hinge, absolute, softmax, "
            "multiclass_hinge",
        ),
    ],
)
def test_bad_bound_arguments(fn, kwargs: dict, message: str) -> None:
    kwargs = dict(kwargs)
    loss = kwargs.pop("loss")
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        fn(loss, **kwargs)


@pytest.mark.parametrize(
    ("loss", "w", "x", "y", "message"),
    [
        ("logistic", np.zeros(2), np.ones(2), 0, "needs y in"),
        ("hinge", np.zeros(2), np.ones(2), 0, "needs y in"),
        ("absolute", np.zeros(2), np.ones(2), math.nan, "finite real y"),
        ("hinge", np.zeros(3), np.ones(2), 1, "vectors of one length"),
        ("logistic", np.zeros((2, 2)), np.ones(2), 1, "vectors of one length"),
        ("softmax", np.zeros(2), np.ones(2), 0, "shape"),
        ("softmax", np.zeros((3, 2)), np.ones(3), 0, "shape"),
        ("softmax", np.zeros((3, 2)), np.ones(2), 3, "integer class"),
        ("multiclass_hinge", np.zeros((3, 2)), np.ones(2), 1.5, "integer class"),
        ("multiclass_hinge", np.zeros((1, 2)), np.ones(2), 0, "at least 2"),
        ("squared", np.zeros(2), np.ones(2), 0, "unknown loss"),
    ],
)
def test_bad_gradient_arguments(loss, w, x, y, message) -> None:
    with pytest.raises(ValueError, match=message):
        per_example_gradient(loss, w, x, y)


@pytest.mark.parametrize(
    ("x", "radius", "norm", "message"),
    [
        (np.ones((2, 2)), 1.0, "Linf", "norm must be 'L1' or 'L2'"),
        (np.ones((2, 2)), 0.0, "L2", "radius must be positive"),
        (np.ones(3), 1.0, "L2", "2-D array"),
    ],
)
def test_bad_clip_arguments(x, radius, norm, message) -> None:
    with pytest.raises(ValueError, match=message):
        clip_rows(x, radius, norm)
