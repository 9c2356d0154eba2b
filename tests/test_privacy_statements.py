"""What a ``privacy_summary`` row states beside its ε: the conversion that produced every ε of
the row (``epsilon_conversion``: the exact Gaussian profile, or RDP converted at δ) and a
union bound over the accounted observers (``union_delta``, ``union_epsilon``), each checked
against an independent computation from the run's own ``privacy_pairs``."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from netsim.algorithms.dsgd.learner import DecentralisedSGD
from netsim.algorithms.muffliato.averaging import MuffliatoAveraging
from netsim.learning.sgd_agent import SGDAgent
from netsim.log import EventLog
from netsim.privacy.mechanisms import gaussian_epsilon, gaussian_epsilons
from netsim.privacy.threat import SUMMARY_TABLE, union_bound
from netsim.privacy.walk_pairwise import epsilons_of_slopes
from netsim.scenario.build import build_run
from netsim.scenario.loader import load_scenario, validate_scenario
from netsim.scenario.runner import run_in_memory

REPO = Path(__file__).resolve().parents[1]


def gaussian_tail(rho: np.ndarray, epsilon: float) -> np.ndarray:
    """P[L > ε] for the loss L ~ N(ρ, 2ρ) of a Gaussian view with μ² = 2ρ."""
    rho = np.asarray(rho, dtype=float)
    out = np.zeros(rho.size)
    positive = rho > 0
    out[positive] = norm.sf((epsilon - rho[positive]) / np.sqrt(2.0 * rho[positive]))
    return out


def chernoff_tail(rho: np.ndarray, epsilon: float) -> np.ndarray:
    """The Chernoff bound on P[L > ε] of a loss whose RDP curve is at most α·ρ."""
    rho = np.asarray(rho, dtype=float)
    out = np.zeros(rho.size)
    positive = rho > 0
    r = rho[positive]
    out[positive] = np.where(epsilon > r, np.exp(-((epsilon - r) ** 2) / (4.0 * r)), 1.0)
    return out


def independent_union(pairs: pd.DataFrame, epsilon: float, delta: float, tail) -> tuple:
    """(the worst unit's Σ over observers of the tails at ``epsilon``, the largest over units
    of the ε at which that unit's sum is ``delta``), by root finding unit by unit."""
    at_epsilon, roots = 0.0, 0.0
    for _, group in pairs.groupby("record"):
        rho = group["rho"].to_numpy(float)
        at_epsilon = max(at_epsilon, min(1.0, float(tail(rho, epsilon).sum())))
        total = lambda e, rho=rho: float(tail(rho, e).sum()) - delta  # noqa: E731
        if total(0.0) > 0:
            roots = max(roots, brentq(total, 0.0, 1e3, xtol=1e-13, rtol=1e-13))
    return at_epsilon, roots


def test_the_summary_schema_lists_the_new_columns_after_the_old_ones() -> None:
    names = [name for name, _ in SUMMARY_TABLE.columns]
    assert names[-3:] == ["epsilon_conversion", "union_delta", "union_epsilon"]
    for name in names[-3:]:
        assert name in SUMMARY_TABLE.description


def test_muffliato_states_the_exact_profile_and_the_union_over_its_sampled_observers() -> None:
    data = {
        "name": "statements", "seed": 3, "nodes": 40, "duration": "10s",
        "topology": {"kind": "random_regular", "degree": 4},
        "muffliato": {"period": "1s", "rounds": 6, "dimension": 2, "radius": 0.5},
        "privacy": {"model": "network", "observers": 12, "delta": 1e-4},
    }  # fmt: skip
    built = build_run(validate_scenario(data, source="test", base_dir=None), EventLog())
    built.sim.run(built.scenario.duration)
    tables = built.sim.log.to_frames()
    pairs, row = tables["privacy_pairs"], tables["privacy_summary"].iloc[0]
    assert row["epsilon_conversion"] == "gaussian_profile" and row["sampled_from"] == 40
    # every ε of the row is the exact profile of its μ, not RDP's conversion (which is larger)
    assert row["local_epsilon"] == gaussian_epsilon(1.0, 1.0, 1e-4)
    assert row["local_epsilon"] < epsilons_of_slopes(np.array([0.5]), 1e-4)[0] - 0.1
    np.testing.assert_allclose(pairs["epsilon"], gaussian_epsilons(2 * pairs["rho"], 1e-4),
                               rtol=1e-9)  # fmt: skip
    # the union bound: over the 12 sampled observers' pairs, by the Gaussian loss's own tail
    at_network, union_epsilon = independent_union(
        pairs, row["network_epsilon"], 1e-4, gaussian_tail
    )
    assert row["union_delta"] == pytest.approx(at_network, rel=1e-9)
    assert row["union_epsilon"] == pytest.approx(union_epsilon, rel=1e-8)
    assert row["network_epsilon"] < row["union_epsilon"]
    assert 1e-4 < row["union_delta"] < 1.0
    lines = MuffliatoAveraging.summary_lines(tables)
    text = " ".join(lines)
    assert "ε from the exact Gaussian privacy profile" in text
    assert "against the sampled observers at once (union bound)" in text
    assert f"ε = {row['union_epsilon']:.3g} at δ = 0.0001" in text


def test_the_walks_path_known_view_states_rdp_and_its_chernoff_union() -> None:
    path = REPO / "scenarios" / "privacy" / "walk-spambase.yaml"
    _, tables = run_in_memory(load_scenario(path, ("nodes=32", "duration=320s")))
    pairs, row = tables["privacy_pairs"], tables["privacy_summary"].iloc[0]
    delta = row["delta"]
    assert row["view"] == "path_known" and row["epsilon_conversion"] == "rdp"
    assert row["sampled_from"] == 0 and row["observers"] == 32
    # the pairs' ε are RDP's conversion of their slopes, above the Gaussian profile's
    np.testing.assert_array_equal(pairs["epsilon"], epsilons_of_slopes(pairs["rho"], delta))
    worst = pairs["rho"].max()
    assert gaussian_epsilon(1.0, math.sqrt(2 * worst), delta) < row["network_epsilon"] - 0.05
    at_network, union_epsilon = independent_union(
        pairs, row["network_epsilon"], delta, chernoff_tail
    )
    assert row["union_delta"] == pytest.approx(at_network, rel=1e-9)
    assert row["union_epsilon"] == pytest.approx(union_epsilon, rel=1e-8)
    text = " ".join(SGDAgent.summary_lines(tables))
    assert "ε converted from the RDP curve" in text
    assert "against every observer at once (union bound)" in text


def test_decentralised_sgd_states_the_exact_profile() -> None:
    data = {
        "name": "dsgd-statements", "seed": 5, "nodes": 8, "duration": "40s",
        "topology": {"kind": "ring", "k": 1},
        "dsgd": {"dataset": {"name": "breast_cancer"}, "records_per_node": 24, "batch": 6,
                 "clip": 1.0, "learning_rate": 0.5, "rounds": 12, "evaluate_every": 4,
                 "noise": {"kind": "local", "noise_multiplier": 1.0}},
        "privacy": {"model": "network"},
    }  # fmt: skip
    built = build_run(validate_scenario(data, source="test", base_dir=None), EventLog())
    built.sim.run(built.scenario.duration)
    tables = built.sim.log.to_frames()
    pairs, row = tables["privacy_pairs"], tables["privacy_summary"].iloc[0]
    assert row["epsilon_conversion"] == "gaussian_profile"
    finite = np.isfinite(pairs["rho"])
    np.testing.assert_allclose(
        pairs["epsilon"][finite], gaussian_epsilons(2 * pairs["rho"][finite], row["delta"]),
        rtol=1e-9,
    )  # fmt: skip
    at_network, union_epsilon = independent_union(
        pairs, row["network_epsilon"], row["delta"], gaussian_tail
    )
    assert row["union_delta"] == pytest.approx(at_network, rel=1e-9)
    assert row["union_epsilon"] == pytest.approx(union_epsilon, rel=1e-8)
    assert "ε from the exact Gaussian privacy profile" in " ".join(
        DecentralisedSGD.summary_lines(tables)
    )


@pytest.mark.parametrize("observers", [1, 7, 200])
def test_k_equal_gaussian_observers_of_one_unit_have_the_closed_form_union(observers) -> None:
    """K observers each with the Gaussian view μ² = 2ρ of one unit: Σ tails = K Φ((ρ − ε)/μ),
    so the union's ε at δ is ρ + μ Φ⁻¹(1 − δ/K), and at the pair's own ε the union's δ is K
    times its tail (not K times δ: the profile's δ is below the tail)."""
    rho, delta = 0.8, 1e-5
    mu = math.sqrt(2 * rho)
    union = union_bound(np.zeros(observers, np.int64), np.full(observers, rho), 3.0, delta,
                        "gaussian_profile")  # fmt: skip
    assert union["union_epsilon"] == pytest.approx(rho + mu * norm.isf(delta / observers),
                                                   rel=1e-8)  # fmt: skip
    assert union["union_delta"] == pytest.approx(min(1.0, observers * norm.sf((3.0 - rho) / mu)))
    revealed = union_bound(np.array([0, 1]), np.array([0.1, math.inf]), math.inf, delta, "rdp")
    assert revealed == {"union_delta": 1.0, "union_epsilon": math.inf}
