"""The best fixed model in hindsight (netsim.learning.hindsight): minima against analytic values,
brute force and scipy, the certified bracket, and input checks."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from netsim.learning.hindsight import (
    HindsightSolution,
    checkpoint_rounds,
    hindsight_minimum,
    objective,
)
from netsim.learning.losses import BINARY_LOSSES as LOSSES
from netsim.learning.losses import loss_derivative, loss_values

TOL = 1e-6
MARGIN_LOSSES = tuple(loss for loss in LOSSES if loss != "absolute")  # labels ±1


def allowed_gap(value: float, tolerance: float = TOL) -> float:
    return tolerance * max(1.0, abs(value))


def assert_certified(sol: HindsightSolution, tolerance: float = TOL) -> None:
    assert sol.lower_bound <= sol.value
    assert sol.value - sol.lower_bound <= allowed_gap(sol.value, tolerance)


def classification_data(rng, n, d, noise=0.5):
    x = rng.normal(size=(n, d))
    y = np.sign(x @ rng.normal(size=d) + noise * rng.normal(size=n))
    y[y == 0] = 1.0
    return x, y


# --- losses ---------------------------------------------------------------------------------


def test_losses_are_stable_and_match_their_derivatives():
    z = np.array([-1000.0, -30.0, -1.0, 0.0, 0.5, 1.0, 2.0, 30.0, 1000.0])
    hinge = loss_values("hinge", z)
    np.testing.assert_array_equal(hinge, np.maximum(0.0, 1.0 - z))
    np.testing.assert_array_equal(loss_derivative("hinge", z), np.where(z < 1, -1.0, 0.0))
    logistic = loss_values("logistic", z)
    assert np.all(np.isfinite(logistic))
    assert logistic[0] == pytest.approx(1000.0) and logistic[-1] == pytest.approx(0.0, abs=1e-300)
    np.testing.assert_allclose(logistic[2:7], np.log1p(np.exp(-z[2:7])), rtol=1e-14)
    h = 1e-6
    numeric = (loss_values("logistic", z + h) - loss_values("logistic", z - h)) / (2 * h)
    np.testing.assert_allclose(loss_derivative("logistic", z), numeric, rtol=1e-6, atol=1e-12)


# --- 1. analytic 1-D hinge --------------------------------------------------------------------


@pytest.mark.parametrize("k, j", [(3, 1), (7, 2), (10, 9)])
@pytest.mark.parametrize("radius", [0.25, 0.9, 1.0, 1.5, 10.0])
def test_one_dimensional_hinge_has_the_analytic_minimum(k, j, radius):
    # k copies of (x = 1, y = +1) and j of (x = 1, y = −1): F(w) = k(1 − w)₊ + j(1 + w)₊,
    # minimised at w = 1 with value 2j if R ≥ 1, else at w = R with value k(1 − R) + j(1 + R).
    x = np.ones((k + j, 1))
    y = np.r_[np.ones(k), -np.ones(j)]
    sol = hindsight_minimum(x, y, np.ones(k + j), loss="hinge", radius=radius)
    if radius >= 1:
        w_star, best = 1.0, 2.0 * j
    else:
        w_star, best = radius, k * (1 - radius) + j * (1 + radius)
    assert abs(sol.w[0] - w_star) <= 1e-4
    assert sol.value == pytest.approx(best, rel=TOL, abs=TOL)
    assert sol.lower_bound <= best <= sol.value
    assert_certified(sol)
    # The same problem as two weighted rows.
    weighted = hindsight_minimum(
        np.ones((2, 1)), np.array([1.0, -1.0]), np.array([k, j], float), loss="hinge", radius=radius
    )
    assert weighted.value == pytest.approx(best, rel=TOL, abs=TOL)
    assert weighted.lower_bound <= best


# --- 2. 2-D hinge against brute force -----------------------------------------------------------


@pytest.mark.parametrize(
    "seed, radius, regularisation", [(0, 2.0, 0.0), (1, 0.7, 0.0), (2, 3.0, 0.05)]
)
def test_two_dimensional_hinge_against_a_polar_grid(seed, radius, regularisation):
    rng = np.random.default_rng(seed)
    x, y = classification_data(rng, 40, 2, noise=1.0)
    weights = rng.integers(1, 4, size=40).astype(float)
    sol = hindsight_minimum(
        x, y, weights, loss="hinge", radius=radius, regularisation=regularisation
    )
    # F on a fine polar grid of the disc, its boundary included; every grid value is ≥ min F.
    theta = np.linspace(0.0, 2 * np.pi, 1440, endpoint=False)
    circle = np.stack([np.cos(theta), np.sin(theta)], axis=-1)
    signed_x = y[:, None] * x
    grid_min = math.inf
    for r in np.linspace(0.0, radius, 401):  # one circle at a time: little memory
        values = np.maximum(0.0, 1.0 - r * (circle @ signed_x.T)) @ weights
        values += 0.5 * regularisation * weights.sum() * r * r
        grid_min = min(grid_min, float(values.min()))
    assert sol.value <= grid_min + allowed_gap(sol.value)
    assert sol.lower_bound <= grid_min
    assert np.linalg.norm(sol.w) <= radius * (1 + 1e-12)
    assert sol.value == pytest.approx(
        objective(sol.w, x, y, weights, "hinge", regularisation), rel=1e-12
    )
    assert_certified(sol)


# --- 3. logistic against scipy ----------------------------------------------------------------


def logistic_problem(seed=3, n=200, d=5):
    rng = np.random.default_rng(seed)
    x, y = classification_data(rng, n, d, noise=0.3)
    weights = rng.integers(1, 3, size=n).astype(float)
    return x, y, weights


@pytest.mark.parametrize("regularisation", [0.0, 0.01])
def test_logistic_with_an_active_ball_matches_slsqp(regularisation):
    x, y, weights = logistic_problem()
    radius = 0.3

    def f(w):
        return objective(w, x, y, weights, "logistic", regularisation)

    def grad(w):
        z = y * (x @ w)
        return x.T @ (weights * y * loss_derivative("logistic", z)) + (
            regularisation * weights.sum() * w
        )

    ref = minimize(
        f,
        np.zeros(5),
        jac=grad,
        method="SLSQP",
        constraints=[{"type": "ineq", "fun": lambda w: radius**2 - w @ w, "jac": lambda w: -2 * w}],
        options={"ftol": 1e-12, "maxiter": 500},
    )
    assert ref.success
    sol = hindsight_minimum(
        x, y, weights, loss="logistic", radius=radius, regularisation=regularisation
    )
    assert np.linalg.norm(sol.w) == pytest.approx(radius, rel=1e-6)  # the ball is active
    assert sol.value == pytest.approx(ref.fun, rel=1e-6)
    assert sol.lower_bound <= ref.fun * (1 + 1e-12)
    assert_certified(sol)


@pytest.mark.parametrize("regularisation", [0.0, 0.01])
def test_logistic_with_an_inactive_ball_matches_lbfgs(regularisation):
    x, y, weights = logistic_problem()
    ref = minimize(
        lambda w: objective(w, x, y, weights, "logistic", regularisation),
        np.zeros(5),
        jac=lambda w: (
            x.T @ (weights * y * loss_derivative("logistic", y * (x @ w)))
            + regularisation * weights.sum() * w
        ),
        method="L-BFGS-B",
        options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10_000},
    )
    radius = 10.0 * np.linalg.norm(ref.x)
    sol = hindsight_minimum(
        x, y, weights, loss="logistic", radius=radius, regularisation=regularisation
    )
    assert np.linalg.norm(sol.w) < 0.5 * radius
    assert sol.value == pytest.approx(ref.fun, rel=1e-6)
    assert sol.lower_bound <= ref.fun * (1 + 1e-12)
    np.testing.assert_allclose(sol.w, ref.x, rtol=1e-2, atol=1e-3)
    assert_certified(sol)


# --- 4. weights are multiplicities ------------------------------------------------------------


@pytest.mark.parametrize("loss", MARGIN_LOSSES)
def test_weights_act_as_repeated_rows(loss):
    rng = np.random.default_rng(4)
    x, y = classification_data(rng, 60, 4)
    counts = rng.integers(0, 4, size=60)
    repeated_x, repeated_y = np.repeat(x, counts, axis=0), np.repeat(y, counts)
    kwargs = {"loss": loss, "radius": 1.5, "regularisation": 0.02}
    weighted = hindsight_minimum(x, y, counts.astype(float), **kwargs)
    repeated = hindsight_minimum(repeated_x, repeated_y, np.ones(len(repeated_y)), **kwargs)
    assert weighted.value == pytest.approx(repeated.value, rel=3 * TOL)
    # φ > 0 makes the minimiser unique, so the points agree too.
    np.testing.assert_allclose(weighted.w, repeated.w, atol=2e-2)
    w = rng.normal(size=4)
    assert objective(w, x, y, counts.astype(float), loss, 0.02) == pytest.approx(
        objective(w, repeated_x, repeated_y, np.ones(len(repeated_y)), loss, 0.02), rel=1e-12
    )
    # Duplicated rows are the same as weight 2.
    doubled = hindsight_minimum(np.vstack([x, x]), np.r_[y, y], np.ones(120), **kwargs)
    twice = hindsight_minimum(x, y, np.full(60, 2.0), **kwargs)
    assert doubled.value == pytest.approx(twice.value, rel=3 * TOL)


def test_zero_weights_give_the_zero_model():
    x, y, _ = logistic_problem(n=10)
    sol = hindsight_minimum(x, y, np.zeros(10), loss="hinge", radius=1.0, regularisation=0.1)
    np.testing.assert_array_equal(sol.w, np.zeros(5))
    assert sol.value == 0.0 and sol.lower_bound == 0.0


# --- 5. sparse input --------------------------------------------------------------------------


@pytest.mark.parametrize("loss", MARGIN_LOSSES)
@pytest.mark.parametrize("radius", [0.5, 5.0])
def test_csr_input_gives_the_dense_answer(loss, radius):
    rng = np.random.default_rng(5)
    x = sp.random(300, 30, density=0.2, format="csr", random_state=6)
    y = np.sign(x @ rng.normal(size=30) + 0.1 * rng.normal(size=300))
    y[y == 0] = 1.0
    weights = rng.integers(1, 3, size=300).astype(float)
    kwargs = {"loss": loss, "radius": radius, "regularisation": 0.01}
    sparse = hindsight_minimum(x, y, weights, **kwargs)
    dense = hindsight_minimum(x.toarray(), y, weights, **kwargs)
    assert sparse.value == pytest.approx(dense.value, rel=3 * TOL)
    assert objective(sparse.w, x, y, weights, loss, 0.01) == pytest.approx(
        objective(sparse.w, x.toarray(), y, weights, loss, 0.01), rel=1e-12
    )
    assert_certified(sparse)
    assert_certified(dense)


# --- 6. invariants ----------------------------------------------------------------------------


@st.composite
def small_problems(draw):
    n = draw(st.integers(1, 25))
    d = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * draw(st.sampled_from([0.1, 1.0, 10.0]))
    y = rng.choice([-1.0, 1.0], size=n)
    weights = rng.integers(0, 4, size=n).astype(float)
    loss = draw(st.sampled_from(MARGIN_LOSSES))
    radius = draw(st.sampled_from([0.05, 0.5, 1.0, 3.0, 20.0]))
    regularisation = draw(st.sampled_from([0.0, 0.001, 0.1, 1.0]))
    return x, y, weights, loss, radius, regularisation, rng


@settings(max_examples=40)
@given(small_problems())
def test_the_bracket_holds_on_random_problems(problem):
    x, y, weights, loss, radius, regularisation, rng = problem
    limit = 5000
    sol = hindsight_minimum(
        x,
        y,
        weights,
        loss=loss,
        radius=radius,
        regularisation=regularisation,
        max_iterations=limit,
    )
    assert np.linalg.norm(sol.w) <= radius * (1 + 1e-12)
    assert sol.lower_bound <= sol.value
    assert sol.value == pytest.approx(
        objective(sol.w, x, y, weights, loss, regularisation), rel=1e-9, abs=1e-12
    )
    # The solver stops early only with a certificate. (A few badly conditioned hinge problems,
    # e.g. rows of norm ~20 with an interior optimum, need more than 5000 iterations; their
    # bracket must still hold, below.)
    if sol.iterations < limit:
        assert_certified(sol)
    gap = max(allowed_gap(sol.value), sol.value - sol.lower_bound)
    # Feasible points: the origin, random points of the ball and of its sphere.
    d = x.shape[1]
    points = rng.normal(size=(64, d))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    points *= radius * np.r_[np.ones(16), rng.random(48) ** (1 / d)][:, None]
    points = np.vstack([np.zeros(d), points])
    for p in points:
        f = objective(p, x, y, weights, loss, regularisation)
        assert sol.lower_bound <= f
        assert sol.value <= f + gap


def test_typical_small_problems_are_certified_within_the_default_budget():
    rng = np.random.default_rng(8)
    for _ in range(60):
        n, d = rng.integers(1, 40), rng.integers(1, 6)
        x, y = rng.normal(size=(n, d)), rng.choice([-1.0, 1.0], size=n)
        weights = rng.integers(0, 4, size=n).astype(float)
        for loss in MARGIN_LOSSES:
            sol = hindsight_minimum(
                x,
                y,
                weights,
                loss=loss,
                radius=float(rng.choice([0.1, 1.0, 10.0])),
                regularisation=float(rng.choice([0.0, 0.01, 1.0])),
            )
            assert_certified(sol)


def test_an_iteration_limit_still_returns_an_honest_bracket():
    rng = np.random.default_rng(7)
    x, y = classification_data(rng, 500, 6)
    weights = np.ones(500)
    exact = hindsight_minimum(x, y, weights, loss="hinge", radius=5.0)
    for limit in (0, 1, 5):
        cut = hindsight_minimum(x, y, weights, loss="hinge", radius=5.0, max_iterations=limit)
        assert cut.iterations <= limit
        assert math.isfinite(cut.lower_bound)
        assert cut.lower_bound <= exact.value + allowed_gap(exact.value)
        assert exact.lower_bound - allowed_gap(exact.value) <= cut.value


def test_a_warm_start_at_the_minimiser_finishes_at_once():
    x, y, weights = logistic_problem()
    cold = hindsight_minimum(x, y, weights, loss="logistic", radius=0.3, regularisation=0.01)
    warm = hindsight_minimum(
        x, y, weights, loss="logistic", radius=0.3, regularisation=0.01, start=cold.w * 10
    )  # the start is projected onto the ball: onto the minimiser, on its boundary
    # the cold start needs iterations; from the minimiser the certified gap is already within
    # the tolerance, so none run (a start that is ignored runs the cold start's 2)
    assert cold.iterations == 2 and warm.iterations == 0
    np.testing.assert_allclose(warm.w, cold.w, rtol=1e-12)
    assert warm.value == pytest.approx(cold.value, rel=3 * TOL)


# --- 7. bad input -----------------------------------------------------------------------------


def test_bad_input_is_rejected_with_what_is_allowed():
    x, y, weights = logistic_problem(n=10)
    call = {"loss": "hinge", "radius": 1.0}
    allowed = "known losses: logistic, hinge, absolute"
    with pytest.raises(ValueError, match=f"unknown loss 'squared'; {allowed}"):
        hindsight_minimum(x, y, weights, loss="squared", radius=1.0)
    for radius in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="radius must be finite and > 0"):
            hindsight_minimum(x, y, weights, loss="hinge", radius=radius)
    with pytest.raises(ValueError, match=r"weights \(multiplicities\) must be finite and ≥ 0"):
        hindsight_minimum(x, y, np.r_[-1.0, weights[1:]], **call)
    with pytest.raises(ValueError, match=r"weights must have shape \(10,\)"):
        hindsight_minimum(x, y, weights[:-1], **call)
    with pytest.raises(ValueError, match=r"y must have shape \(10,\)"):
        hindsight_minimum(x, y[:-1], weights, **call)
    with pytest.raises(ValueError, match="labels y must be −1 or \\+1"):
        hindsight_minimum(x, np.where(y > 0, 1.0, 0.0), weights, **call)
    with pytest.raises(ValueError, match="x must be a 2-D"):
        hindsight_minimum(x[:, 0], y, weights, **call)
    with pytest.raises(ValueError, match="x must contain only finite values"):
        hindsight_minimum(np.where(x > 1, np.nan, x), y, weights, **call)
    with pytest.raises(ValueError, match="regularisation must be finite and ≥ 0"):
        hindsight_minimum(x, y, weights, regularisation=-0.1, **call)
    with pytest.raises(ValueError, match=r"start must have shape \(5,\)"):
        hindsight_minimum(x, y, weights, start=np.zeros(4), **call)
    with pytest.raises(ValueError, match="tolerance must be finite and > 0"):
        hindsight_minimum(x, y, weights, tolerance=0.0, **call)
    with pytest.raises(ValueError, match="max_iterations must be an integer ≥ 0"):
        hindsight_minimum(x, y, weights, max_iterations=-1, **call)
    with pytest.raises(ValueError, match="unknown loss"):
        objective(np.zeros(5), x, y, weights, "squared")
    with pytest.raises(ValueError, match=r"w must have shape \(5,\)"):
        objective(np.zeros(3), x, y, weights, "hinge")
    with pytest.raises(ValueError, match="unknown loss"):
        loss_values("squared", np.zeros(3))


# --- absolute error (regression targets) ----------------------------------------------------


def regression_data(rng, n, d, noise=0.1):
    x = rng.normal(size=(n, d))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]
    return x, x @ rng.normal(size=d) * 0.5 + noise * rng.normal(size=n)


@pytest.mark.parametrize("radius", [0.1, 1.0])
def test_absolute_error_in_one_dimension_matches_a_fine_grid(radius):
    rng = np.random.default_rng(3)
    x, y = regression_data(rng, 400, 1)
    weights = rng.integers(1, 4, size=400).astype(float)
    sol = hindsight_minimum(x, y, weights, loss="absolute", radius=radius)
    assert_certified(sol)
    grid = np.linspace(-radius, radius, 400_001)
    values = np.abs(np.outer(grid, x[:, 0]) - y) @ weights
    assert sol.lower_bound <= values.min() + 1e-9
    assert sol.value <= values.min() + allowed_gap(values.min())


def test_absolute_error_matches_slsqp_with_the_ball_active():
    rng = np.random.default_rng(4)
    x, y = regression_data(rng, 300, 4)
    y = y * 4  # a target far outside the ball: the constraint is active
    weights = np.ones(300)
    sol = hindsight_minimum(x, y, weights, loss="absolute", radius=0.5, regularisation=0.01)
    assert_certified(sol)

    def smooth(w):  # the minimum is away from kinks only generically; check values instead
        return objective(w, x, y, weights, "absolute", 0.01)

    best = minimize(smooth, np.zeros(4), method="SLSQP",
                    constraints=[{"type": "ineq", "fun": lambda w: 0.25 - w @ w}])  # fmt: skip
    assert sol.value <= best.fun + allowed_gap(best.fun)
    assert loss_values("absolute", np.array([-2.0, 0.5])).tolist() == [2.0, 0.5]
    assert loss_derivative("absolute", np.array([-2.0, 0.5])).tolist() == [-1.0, 1.0]


@settings(max_examples=25)
@given(st.integers(0, 2**32 - 1), st.integers(1, 4), st.sampled_from([0.2, 1.0, 5.0]))
def test_absolute_error_bracket_holds(seed, d, radius):
    rng = np.random.default_rng(seed)
    x, y = regression_data(rng, 30, d)
    weights = rng.integers(0, 3, size=30).astype(float)
    sol = hindsight_minimum(x, y, weights, loss="absolute", radius=radius)
    assert np.linalg.norm(sol.w) <= radius * (1 + 1e-12)
    points = rng.normal(size=(32, d))
    points *= radius * rng.random(32)[:, None] ** (1 / d) / np.linalg.norm(points, axis=1)[:, None]
    for p in np.vstack([np.zeros(d), points]):
        f = objective(p, x, y, weights, "absolute")
        assert sol.lower_bound <= f
        assert sol.value <= f + max(allowed_gap(sol.value), sol.value - sol.lower_bound)


@settings(max_examples=300, deadline=None)
@given(rounds=st.integers(1, 3000), count=st.integers(1, 60_000))
def test_checkpoints_are_the_rounded_geometric_grid_without_making_it(rounds, count):
    """regret_checkpoints 10¹² ran out of memory making a grid of 10¹² points: past
    rounds·ln(rounds) + 1 points the grid holds every round, given without making it."""
    grid = np.unique(np.round(np.geomspace(1, rounds, count)).astype(np.int64))
    np.testing.assert_array_equal(checkpoint_rounds(rounds, count), np.union1d(grid, [rounds]))


def test_a_trillion_checkpoints_are_every_round():
    np.testing.assert_array_equal(checkpoint_rounds(1000, 10**12), np.arange(1, 1001))
