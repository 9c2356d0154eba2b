"""The walk's bound audit: the papers' path-secret closed form (``walk_path_secret``) beside
the exact Gaussian loss of an observer that knows the realised path
(:func:`netsim.privacy.walk_pairwise.path_known_exact_mu_squared`), checked by hand, by
simulation, against the path-known bounds it must never exceed, and on the shipped
scenario."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import netsim
from netsim.analysis.report import write_report
from netsim.learning.sgd_agent import SGDAgent
from netsim.log import EventLog
from netsim.privacy.linear import epsilon_of
from netsim.privacy.mechanisms import gaussian_epsilons
from netsim.privacy.walk_pairwise import (
    epsilons_of_slopes,
    path_known_exact_mu_squared,
    path_known_slopes,
    path_secret_slopes,
)
from netsim.protocols.walk.ideal import overlay_transitions
from netsim.scenario.build import build_run

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "scenarios" / "privacy" / "walk-spambase.yaml"


def exact(lineage: dict, received: list[int], observer: int, units: int) -> tuple:
    """(μ², exact) of every unit against one observer of a hand-made lineage."""
    mu2, flags = path_known_exact_mu_squared(
        **lineage, receptions=[np.asarray(received)], observers=[observer], units=units
    )
    return mu2[0], flags[0]


def lineage_of(parent, unit, shift, noise_std, holder) -> dict:
    return {
        "parent": np.asarray(parent, dtype=np.int64),
        "unit": np.asarray(unit, dtype=np.int64),
        "shift": np.asarray(shift, dtype=float),
        "noise_std": np.asarray(noise_std, dtype=float),
        "holder": np.asarray(holder, dtype=np.int64),
    }


# ----- 1. by hand -----------------------------------------------------------------------------


def test_a_chain_seen_once_is_one_gaussian_release_of_the_noise_since_the_contribution() -> None:
    """u → a → v: u's contribution (shift s) then the noises σ1 (u's) and σ2 (a's), received
    only at v: μ²_u = s²/(σ1² + σ2²); a's contribution is hidden by both noises too (v does
    not see u's state), μ²_a = s_a²/(σ1² + σ2²)."""
    s, s_a, sigma1, sigma2 = 0.7, 0.3, 1.1, 1.9
    # state 0: the initial model; 1: u's visit; 2: a's visit; v (node 2) receives 2
    lineage = lineage_of([-1, 0, 1], [-1, 0, 1], [0, s, s_a], [0, sigma1, sigma2], [-1, 0, 1])
    mu2, flags = exact(lineage, [2], observer=2, units=3)
    assert mu2[0] == pytest.approx(s**2 / (sigma1**2 + sigma2**2), rel=1e-12)
    assert mu2[1] == pytest.approx(s_a**2 / (sigma1**2 + sigma2**2), rel=1e-12)
    assert mu2[2] == 0.0 and flags.all()


def test_two_receptions_give_the_gaussian_of_their_two_by_two_covariance() -> None:
    """u, then v's own visit (its noise σv known to it, removed), then a: v receives u's state
    (to update it) and a's. Σ = [[σ1², σ1²], [σ1², σ1² + σ2²]], u moves both by s, a the
    second by s_a: μ² = mᵀΣ⁻¹m, solved here with numpy."""
    s, s_v, s_a, sigma1, sigma_v, sigma2 = 0.6, 0.5, 0.4, 1.3, 0.9, 1.7
    lineage = lineage_of(
        [-1, 0, 1, 2], [-1, 0, 2, 1], [0, s, s_v, s_a], [0, sigma1, sigma_v, sigma2],
        [-1, 0, 2, 1],
    )  # fmt: skip
    mu2, flags = exact(lineage, [1, 3, 1], observer=2, units=3)
    cov = np.array([[sigma1**2, sigma1**2], [sigma1**2, sigma1**2 + sigma2**2]])
    for unit, shift in ((0, np.array([s, s])), (1, np.array([0.0, s_a]))):
        assert mu2[unit] == pytest.approx(shift @ np.linalg.solve(cov, shift), rel=1e-10)
    assert flags[:2].all()
    # had v not known its own noise, both would see less
    forgetful = dict(lineage, holder=np.array([-1, 0, 5, 1]))
    mu2_forgetful, _ = exact(forgetful, [1, 3], observer=2, units=3)
    assert mu2_forgetful[0] < mu2[0] and mu2_forgetful[1] < mu2[1]


def test_a_branch_seen_on_both_sides_without_where_it_parts() -> None:
    """u's state branches into a's and b's visits (a restart from a copy); v receives both
    branches, not u's state. Σ = [[σ1² + σ2², σ1²], [σ1², σ1² + σ3²]]: u's shift (s, s) is
    exact; w contributing once on each branch has a Gram with a negative entry, so its μ² is
    netsim's bound min(Σ|K|, λ_max·2), not exact."""
    s, t2, t3, sigma1, sigma2, sigma3 = 0.8, 0.5, 0.6, 1.2, 0.7, 1.4
    # units: 0 = u, 1 = w; nodes a = 3, b = 4 hold w's visits (w's records live there)
    lineage = lineage_of([-1, 0, 1, 1], [-1, 0, 1, 1], [0, s, t2, t3],
                         [0, sigma1, sigma2, sigma3], [-1, 0, 3, 4])  # fmt: skip
    mu2, flags = exact(lineage, [2, 3], observer=9, units=2)
    cov = np.array([[sigma1**2 + sigma2**2, sigma1**2], [sigma1**2, sigma1**2 + sigma3**2]])
    inverse = np.linalg.inv(cov)
    m_u = np.array([s, s])
    assert mu2[0] == pytest.approx(m_u @ inverse @ m_u, rel=1e-10) and flags[0]
    gram = inverse * np.outer([t2, t3], [t2, t3])
    assert gram[0, 1] < 0
    bound = min(np.abs(gram).sum(), np.linalg.eigvalsh(gram)[-1] * 2)
    assert mu2[1] == pytest.approx(bound, rel=1e-10) and not flags[1]
    # two uses anti-aligned attain Σ|K|: the bound is the worst case here
    assert bound == pytest.approx(np.abs(gram).sum(), rel=1e-12)


def test_a_contribution_seen_without_noise_is_revealed() -> None:
    """v receives a state and its child made without noise (a record of a mini-batch before
    the batch's noise): the contribution between them is seen exactly, μ² = ∞."""
    lineage = lineage_of([-1, 0, 1], [-1, 0, 1], [0, 0.5, 0.5], [0, 1.0, 0.0], [-1, 3, 4])
    mu2, flags = exact(lineage, [1, 2], observer=9, units=2)
    assert mu2[0] == pytest.approx(0.25, rel=1e-12)
    assert math.isinf(mu2[1]) and flags[1]


# ----- 2. by simulation -----------------------------------------------------------------------


def test_the_mahalanobis_distance_of_simulated_views_is_the_exact_loss() -> None:
    """A small tree (a chain with a branch, the observer's own visit on it): the states v
    receives are drawn forward through the lineage, v subtracts the noise it added itself,
    under u's gradients 0 and aligned at full shift; the squared Mahalanobis distance of the
    two means (simulated covariance) is μ²_u within six standard errors (the estimator's
    variance 8μ²/N from the means, its bias 2k/N, and the covariance estimate's relative
    error √(2k/N))."""
    #        0 ── 1(u) ── 2(x) ── 3(v) ── 4(u) ── 5(y)        v receives 1, 3 (its visit) and 5
    #                       └── 6(u) ── 7(z)                   and 7 (the branch)
    parent = [-1, 0, 1, 2, 3, 4, 2, 6]
    unit = [-1, 0, 1, 2, 0, 3, 0, 4]
    shift = [0, 0.9, 0.4, 0.5, 0.7, 0.4, 0.6, 0.3]
    noise = [0, 1.0, 0.8, 1.1, 1.2, 0.9, 0.7, 1.3]
    holder = [-1, 10, 11, 12, 10, 13, 10, 14]  # u = node 10, v = node 12
    lineage = lineage_of(parent, unit, shift, noise, holder)
    received = [1, 2, 5, 7]  # v received 2 to update it; 3 it made itself
    mu2, flags = exact(lineage, received, observer=12, units=5)
    assert flags[0] and 0 < mu2[0] < math.inf

    rng = np.random.default_rng(20240607)
    samples = 400_000

    def views(gradient: float) -> np.ndarray:
        value = np.zeros((samples, len(parent)))
        known = np.zeros((samples, len(parent)))
        for x in range(1, len(parent)):
            z = noise[x] * rng.standard_normal(samples)
            step = z + (shift[x] * gradient if unit[x] == 0 else 0.0)
            value[:, x] = value[:, parent[x]] + step
            known[:, x] = known[:, parent[x]] + (z if holder[x] == 12 else 0.0)
        return (value - known)[:, received]

    zero, moved = views(0.0), views(1.0)
    difference = moved.mean(axis=0) - zero.mean(axis=0)
    covariance = (np.cov(zero, rowvar=False) + np.cov(moved, rowvar=False)) / 2.0
    distance = float(difference @ np.linalg.solve(covariance, difference))
    k = len(received)
    tolerance = 6.0 * (math.sqrt(8.0 * mu2[0] / samples) + mu2[0] * math.sqrt(2.0 * k / samples))
    assert abs(distance - 2.0 * k / samples - mu2[0]) < tolerance, (distance, mu2[0], tolerance)


# ----- 3. never above the path-known bounds ---------------------------------------------------


@st.composite
def lineages(draw: st.DrawFn) -> tuple[dict, np.ndarray, list[int], int, int]:
    """A random lineage tree of up to 24 states (mostly chains, some branches, refused visits
    without a contribution), nodes 0..5 each holding one unit, and one observer's receptions."""
    states = draw(st.integers(2, 24))
    nodes = 6
    parent, unit, shift, noise, holder = [-1], [-1], [0.0], [0.0], [-1]
    for x in range(1, states):
        branch = draw(st.booleans()) and draw(st.booleans())
        parent.append(draw(st.integers(0, x - 1)) if branch else x - 1)
        node = draw(st.integers(0, nodes - 1))
        holder.append(node)
        if draw(st.integers(0, 4)) == 0:  # a refused visit: no contribution, no noise
            unit.append(-1)
            shift.append(0.0)
            noise.append(0.0)
        else:
            unit.append(node)
            shift.append(draw(st.floats(0.05, 2.0)))
            noise.append(draw(st.floats(0.2, 3.0)))
    observer = draw(st.integers(0, nodes - 1))
    received = draw(st.lists(st.integers(0, states - 1), min_size=1, max_size=8))
    # a node that makes a state received the one it updated
    received += [parent[x] for x in range(1, states) if holder[x] == observer and parent[x] >= 0]
    lineage = lineage_of(parent, unit, shift, noise, holder)
    return lineage, np.asarray(received), [observer], observer, nodes


@settings(max_examples=300, deadline=None)
@given(lineages())
def test_the_exact_loss_is_never_above_the_path_known_bounds(case: tuple) -> None:
    """Each contribution that reaches v is one Gaussian release and v's view is their
    post-processing, so the exact μ² is at most the path-known figure without amplification
    (``amplified=False``: slope s²/(2σ²) per contribution, μ² = 2·slope); the amplified one
    (amplification by iteration holds for the linear, contractive updates of this view)
    bounds it too. Where netsim's rule gives a bound (a branched view whose Gram has a
    negative entry, never a chain), the bound min(Σ|K|, λ_max·uses) is not the worst case
    over the gradients' directions and can exceed both with three uses or more: only exact
    pairs are compared."""
    lineage, received, coalition, observer, nodes = case
    mu2, flags = path_known_exact_mu_squared(
        **lineage, receptions=[received], observers=[observer], units=nodes
    )
    arrays = {key: lineage[key] for key in ("parent", "unit", "shift", "noise_std")}
    common = dict(**arrays, owner=lineage["unit"], receptions=[received],
                  coalitions=[coalition], units=nodes)  # fmt: skip
    plain = 2.0 * path_known_slopes(**common, amplified=False)[0]
    amplified = 2.0 * path_known_slopes(**common, amplified=True)[0]
    others = np.arange(nodes) != observer
    exact_pairs = others & flags[0]
    assert (mu2[0][exact_pairs] <= plain[exact_pairs] * (1 + 1e-9) + 1e-12).all()
    assert (mu2[0][exact_pairs] <= amplified[exact_pairs] * (1 + 1e-9) + 1e-12).all()
    assert (mu2[0][others] >= 0).all() and np.isfinite(mu2[0][others]).all()
    parent = lineage["parent"]
    if (parent == np.arange(parent.size) - 1).all():  # a chain: its increments independent
        assert flags[0].all()


def test_gaussian_epsilons_are_the_exact_profiles_epsilon() -> None:
    """Every pair's ε at once, as :func:`netsim.privacy.linear.epsilon_of` gives it one by
    one (its bisection stops within 1e-12 of the larger of ε and 1), 0 and ∞ included."""
    rng = np.random.default_rng(5)
    mu2 = np.concatenate([[0.0, 1e-14, 1e-9, math.inf, 1e4, 2e12],
                          rng.random(400) * 3, 10 ** rng.uniform(-10, 6, 400)])  # fmt: skip
    for delta in (1e-5, 1e-2, 0.4):
        fast = gaussian_epsilons(mu2, delta)
        slow = np.array([epsilon_of(float(m), delta) for m in mu2])
        assert np.array_equal(np.isinf(fast), np.isinf(slow))
        assert np.array_equal(fast == 0, slow == 0)
        finite = np.isfinite(slow)
        gap = np.abs(fast[finite] - slow[finite]) / np.maximum(slow[finite], 1.0)
        assert gap.max() <= 2e-12


# ----- 4. the shipped scenario ----------------------------------------------------------------

SMALL = ("nodes=64", "duration=640s", "learning.privacy_unit=node", "privacy.views=true")


def test_the_shipped_walk_writes_its_bound_audit_and_the_report_shows_it(tmp_path: Path) -> None:
    """``privacy/walk-spambase.yaml`` on 64 nodes with the node as unit (where the closed form
    is stated): one ``walk_path_secret`` row per single-observer pair of ``privacy_pairs``,
    finite; the bound is the closed form's slope for u → v; the exact side is the path-known
    view re-derived offline from the lineage and receptions the run wrote (``privacy.views``),
    never above the amplified path-known pair; the run summary and ``netsim report`` say it."""
    outcome = netsim.run(SHIPPED, overrides=SMALL, out=tmp_path)
    tables = outcome.tables
    audit, pairs = tables["bound_audit"], tables["privacy_pairs"]
    single = pairs[pairs["observer"] >= 0]
    assert len(audit) == len(single) == 64 * 63
    assert (audit["bound"] == "walk_path_secret").all()
    numbers = audit[["exact_rho", "bound_rho", "exact_epsilon", "bound_epsilon"]].to_numpy()
    assert np.isfinite(numbers).all() and (numbers >= 0).all()
    merged = audit.merge(single, on=["observer", "record"], validate="one_to_one")
    assert (merged["exact_rho"] <= merged["rho"] * (1 + 1e-9)).all()
    assert audit["below"].equals(audit["bound_rho"] < audit["exact_rho"] * (1 - 1e-9))

    # the bound: the closed form of the walk's law, as privacy_summary states its worst pair
    built = build_run(outcome.scenario, EventLog())
    law = overlay_transitions(*built["learning"].observed.topology, True)
    uses = int(tables["privacy_records"]["uses"].max())
    slopes = path_secret_slopes(law, len(tables["sgd_visits"]), 1 / (2 * 2.0**2),
                                contributions=uses)  # fmt: skip
    observer, record = audit["observer"].to_numpy(), audit["record"].to_numpy()
    np.testing.assert_allclose(audit["bound_rho"], slopes[record, observer], rtol=1e-12)
    np.testing.assert_allclose(
        audit["bound_epsilon"], epsilons_of_slopes(slopes[record, observer], 1e-5), rtol=1e-12
    )
    summary = tables["privacy_summary"].iloc[0]
    assert audit["bound_epsilon"].max() == pytest.approx(summary["closed_form_epsilon"])

    # the exact side, from the lineage and the receptions the run wrote
    lineage, views = tables["privacy_lineage"], tables["privacy_views"]
    observers = np.arange(64)
    mu2, _ = path_known_exact_mu_squared(
        parent=lineage["parent"].to_numpy(), unit=lineage["unit"].to_numpy(),
        shift=lineage["shift"].to_numpy(), noise_std=lineage["noise_std"].to_numpy(),
        holder=lineage["holder"].to_numpy(),
        receptions=[views.loc[views["node"] == v, "state"].to_numpy() for v in observers],
        observers=observers, units=64,
    )  # fmt: skip
    np.testing.assert_allclose(audit["exact_rho"], mu2[observer, record] / 2.0, rtol=1e-12)
    assert (audit["exact_rho"] > 0).mean() > 0.9

    lines = SGDAgent.summary_lines(tables)
    assert any(line.startswith("bound audit: walk_path_secret") for line in lines)
    assert outcome.directory is not None
    markdown = write_report(outcome.directory).read_text(encoding="utf-8")
    section = markdown[markdown.index("## Bound audit") :]
    assert "walk_path_secret" in section and "path stays secret" in section


def test_no_audit_where_the_closed_form_is_not_stated() -> None:
    """The shipped scenario as it is (8 records a node, the record as unit): no closed form,
    so no ``bound_audit`` rows."""
    tables = netsim.run(SHIPPED, overrides=("nodes=64", "duration=640s")).tables
    assert np.isnan(tables["privacy_summary"]["closed_form_epsilon"].iloc[0])
    assert len(tables.get("bound_audit", [])) == 0


def test_the_bound_is_the_closed_form_from_the_unit_to_the_observer() -> None:
    """On an irregular graph the simple walk's closed form is not symmetric (u contributes
    T·π_u times, and π follows the degree): each row's bound is the slope of the unit's node
    u towards the observer v, [u, v], not [v, u]."""
    data = {
        "name": "walk-bound-audit", "seed": 4, "nodes": 30, "duration": "600s",
        "topology": {"kind": "k_out", "k": 3},
        "walk": {"kind": "ideal", "sampling": "neighbour", "step_time": "1s",
                 "agent": {"kind": "sgd"}},
        "learning": {
            "dataset": {"name": "spambase"}, "model": "logreg", "clip": 1.0,
            "learning_rate": 0.5, "algorithm": "dp-sgd", "privacy_unit": "node",
            "noise": {"kind": "gaussian", "noise_multiplier": 1.5}, "accounting": "rdp",
            "epsilon": 8.0, "delta": 1e-5, "evaluate_every": 600,
        },
        "privacy": {"model": "network"},
    }  # fmt: skip
    outcome = netsim.run(data)
    tables = outcome.tables
    audit = tables["bound_audit"]
    assert len(audit) == 30 * 29
    built = build_run(outcome.scenario, EventLog())
    law = overlay_transitions(*built["learning"].observed.topology, False)
    uses = int(tables["privacy_records"]["uses"].max())
    slopes = path_secret_slopes(
        law, len(tables["sgd_visits"]), 1 / (2 * 1.5**2), contributions=uses
    )
    observer, record = audit["observer"].to_numpy(), audit["record"].to_numpy()
    assert not np.allclose(slopes[record, observer], slopes[observer, record], rtol=1e-3)
    np.testing.assert_allclose(audit["bound_rho"], slopes[record, observer], rtol=1e-12)
