"""The network budget (``privacy.budget: network``, :mod:`netsim.privacy.ceiling`): a unit is
used until some observer's composed loss would pass the budget. Whatever the walk does, no
pair of the run's path-known accountant passes it; a run admits more uses than local DP would;
and what cannot follow one chain of models is refused."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import netsim
from netsim.errors import ScenarioError, SimulationError
from netsim.privacy.ceiling import ChainCeiling
from netsim.privacy.walk_pairwise import epsilons_of_slopes, path_known_slopes, slope_for_epsilon
from netsim.scenario.loader import validate_scenario
from tests.test_walk_network_privacy import SERVICE_UNDER_CHURN, gossip_learning, scenario


def _walk(visits, etas, z, ceiling):
    """A chain of models along ``visits``: each visited node receives the latest state and,
    if the ceiling admits its unit, contributes a step of displacement η and noise η·z."""
    parent, unit, owner, shift, noise = [-1], [-1], [-1], [0.0], [0.0]
    receptions: dict[int, list[int]] = {}
    ceiling.made(0, -1, -1, 0.0, 0.0)
    for node, eta in zip(visits, etas, strict=True):
        latest = len(parent) - 1
        ceiling.received(node, latest)
        receptions.setdefault(node, []).append(latest)
        admitted = ceiling.admits(node)
        made = (node, node, eta, eta * z) if admitted else (-1, -1, 0.0, 0.0)
        ceiling.made(latest + 1, latest, made[0], made[2], made[3])
        parent.append(latest)
        for column, value in zip((unit, owner, shift, noise), made, strict=True):
            column.append(value)
    arrays = {
        "parent": np.array(parent), "unit": np.array(unit), "owner": np.array(owner),
        "shift": np.array(shift), "noise_std": np.array(noise),
    }  # fmt: skip
    return arrays, receptions


@settings(max_examples=60, deadline=None)
@given(
    st.integers(3, 30),
    st.integers(200, 800),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.6, 1.0, 2.0, 4.0]),
    st.sampled_from([0.5, 2.0, 8.0]),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_no_pair_passes_the_budget_whatever_the_walk(n, steps, seed, z, epsilon, amplified,
                                                     collude, eavesdrop):  # fmt: skip
    """Any sequence of visits (uniform over n nodes, 200 to 800 steps), step sizes and
    noise, with or without amplification, a coalition and two link eavesdroppers: every pair
    (the coalition's and the links' too) of the path-known accountant over the resulting
    chain is within the budget slope. The ceiling keeps no row for a link: its ends cover it
    (:class:`~netsim.privacy.ceiling.ChainCeiling`)."""
    rng = np.random.default_rng(seed)
    visits = rng.integers(0, n, steps).tolist()
    etas = (1.0 / np.sqrt(1.0 + rng.integers(0, 4, steps))).tolist()
    coalitions = [list(range(max(2, n // 2)))] if collude else []
    links = [[0, 1], [1, 2]] if eavesdrop else []
    budget = slope_for_epsilon(epsilon, 1e-5)
    ceiling = ChainCeiling(n, np.arange(n), coalitions, budget, 1 / (2 * z * z), amplified)
    arrays, receptions = _walk(visits, etas, z, ceiling)
    views = [[v] for v in range(n)] + coalitions
    # state i is made by visit i − 1 and sent to the node of visit i: a link sees it when
    # those are its two ends
    crossed = [
        np.array([i for i in range(1, steps) if {visits[i - 1], visits[i]} == set(ends)],
                 dtype=np.int64)
        for ends in links
    ]  # fmt: skip
    slopes = path_known_slopes(
        **arrays, receptions=[
            np.array([s for m in members for s in receptions.get(m, [])], dtype=np.int64)
            for members in views
        ] + crossed,
        coalitions=views + [[] for _ in links], units=n, amplified=amplified,
    )  # fmt: skip
    assert slopes.max() <= budget * (1 + 1e-9)
    # not by refusing everything: the first use is admitted when one release fits the budget
    if 1 / (2 * z * z) <= budget:
        assert arrays["unit"][1] == visits[0]


def test_a_network_budget_admits_more_uses_than_local_dp_and_holds() -> None:
    """The base walk (40 nodes, z = 1.5, (8, 10⁻⁵), 2,000 steps, a coalition of three):
    under the local budget each record stops when its own releases compose to ε = 8 (200
    updates); under the network budget it goes on until some node would learn 8 about it
    (621 updates, local ε 17.7, worst pair 7.89) — more than three times the updates, a local
    ε far past the budget, and every pair (and the coalition) of the run within it."""
    runs = {}
    for budget in ("local", "network"):
        data = scenario(duration="2000s")
        data["privacy"] = {"model": "network", "budget": budget, "coalitions": [[0, 1, 2]]}
        runs[budget] = netsim.run(data).tables
    local, network = (runs[b]["learning_summary"].iloc[0] for b in ("local", "network"))
    assert network["updates"] > 3 * local["updates"]
    assert local["epsilon"] <= 8.0 < network["epsilon"]  # the guarantee stated: local ε
    pairs = runs["network"]["privacy_pairs"]
    assert pairs["epsilon"].max() <= 8.0
    assert (pairs["observer"] < 0).any()  # the coalition is accounted and within it too
    summary = runs["network"]["privacy_summary"].iloc[0]
    assert summary["network_epsilon"] > 7.0  # the ceiling is reached, not far below it
    assert "privacy.budget network" in summary["claim"]
    assert summary["local_epsilon"] == pytest.approx(network["epsilon"])


def test_the_ceiling_refuses_a_branching_lineage_and_an_unadmitted_use() -> None:
    ceiling = ChainCeiling(3, np.arange(3), [], 10.0, 0.1, True)
    ceiling.made(0, -1, -1, 0.0, 0.0)
    ceiling.received(1, 0)
    ceiling.made(1, 0, 1, 1.0, 1.0)
    with pytest.raises(SimulationError, match="one chain"):
        ceiling.made(2, 0, -1, 0.0, 0.0)
    with pytest.raises(SimulationError, match="one chain"):
        ceiling.received(2, 0)
    # a unit's second contribution must have been admitted (its last stretch is charged)
    ceiling = ChainCeiling(3, np.arange(3), [], 10.0, 0.1, True)
    ceiling.made(0, -1, -1, 0.0, 0.0)
    ceiling.received(1, 0)
    assert ceiling.admits(1)
    ceiling.made(1, 0, 1, 1.0, 1.0)
    ceiling.received(1, 1)
    with pytest.raises(SimulationError, match="without being admitted"):
        ceiling.made(2, 1, 1, 1.0, 1.0)


def _with_budget(data: dict, **changes: object) -> dict:
    data = copy.deepcopy(data)
    data["privacy"] = {**data.get("privacy", {}), "model": "network", "budget": "network",
                       **changes}  # fmt: skip
    return data


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (_with_budget(scenario(), model="local"), r"privacy\.model network"),
        (_with_budget(scenario(learning={"algorithm": "dp-sgd-5", "noise": "gaussian"})),
         r"learning\.algorithm dp-sgd"),
        (_with_budget(scenario(learning={"records_per_node": 4, "batch": 4,
                                         "privacy_unit": "record"})), r"one unit per node"),
        (_with_budget(SERVICE_UNDER_CHURN), r"restarts"),
        (_with_budget(gossip_learning()), r"budget"),
    ],
)  # fmt: skip
def test_a_network_budget_that_cannot_be_kept_is_refused(data: dict, match: str) -> None:
    with pytest.raises(ScenarioError, match=match):
        validate_scenario(data, source="test", base_dir=None)


def test_the_budget_is_stated_at_the_threat_models_delta() -> None:
    """``privacy.delta`` (10⁻³ here, looser than the learning section's 10⁻⁵) is the δ the
    ceiling's ε is stated at: the worst pair at that δ is within the budget, and more uses
    are admitted than at 10⁻⁵."""
    updates = {}
    for delta in (None, 1e-3):
        data = _with_budget(scenario(duration="1500s"), delta=delta)
        tables = netsim.run(data).tables
        updates[delta] = tables["learning_summary"]["updates"].iloc[0]
        summary = tables["privacy_summary"].iloc[0]
        assert summary["delta"] == (delta or 1e-5)
        assert summary["network_epsilon"] <= 8.0
    assert updates[1e-3] > updates[None]
    assert float(epsilons_of_slopes(slope_for_epsilon(8.0, 1e-3), 1e-3)) <= 8.0
