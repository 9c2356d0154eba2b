"""The network budget (``privacy.budget: network``, :mod:`netsim.privacy.ceiling`): a unit is
used until some observer's composed loss would pass the budget. Whatever the walk does, no
pair of the run's path-known accountant passes it; a run admits more uses than local DP would;
and what cannot follow one chain of models is refused."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import netsim
from netsim.errors import ScenarioError, SimulationError
from netsim.privacy.ceiling import LineageCeiling
from netsim.privacy.walk_pairwise import epsilons_of_slopes, path_known_slopes, slope_for_epsilon
from netsim.scenario.loader import validate_scenario
from tests.test_walk_network_privacy import SERVICE_UNDER_CHURN, gossip_learning, scenario

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


class _Lineage:
    """A lineage built by hand, each state made with the ceiling's consent, and the real
    path-known slopes of it."""

    def __init__(self, ceiling: LineageCeiling, nodes: int) -> None:
        self.ceiling, self.nodes = ceiling, nodes
        self.columns: dict[str, list] = {k: [] for k in ("parent", "unit", "shift", "noise_std")}
        self.receptions: dict[int, list[int]] = {}

    def receive(self, node: int, state: int) -> None:
        self.ceiling.received(node, state)
        self.receptions.setdefault(node, []).append(state)

    def make(
        self, parent: int, node: int, unit: int = -1, shift: float = 1.0, sigma: float = 4.0
    ) -> int:
        """``node`` makes a state from ``parent`` (−1: a root), with noise ``sigma`` and, if
        ``unit`` ≥ 0 is admitted, a contribution of displacement ``shift`` (a refused one
        adds neither)."""
        ceiling = self.ceiling
        if unit < 0:
            shift = 0.0
        if parent >= 0:
            ceiling.visiting(node, parent)
            self.receptions.setdefault(node, []).append(parent)
        if unit >= 0 and not ceiling.admits(unit):
            unit, shift, sigma = -1, 0.0, 0.0
        serial = len(self.columns["parent"])
        ceiling.made(serial, parent, unit, shift, sigma)
        for name, value in zip(self.columns, (parent, unit, shift, sigma), strict=True):
            self.columns[name].append(value)
        return serial

    def slopes(
        self, coalitions: Sequence[list[int]] = (), amplified: bool = True,
        links: Sequence[np.ndarray] = (),
    ) -> np.ndarray:  # fmt: skip
        """The path-known slopes of every node, then of each coalition, then of each link
        eavesdropper (the states that crossed it: an observer with no members), against
        each unit."""
        arrays = {name: np.array(values) for name, values in self.columns.items()}
        views = [[v] for v in range(self.nodes)] + list(coalitions)
        return path_known_slopes(
            **arrays, owner=arrays["unit"], units=self.nodes, amplified=amplified,
            receptions=[
                np.array([s for m in members for s in self.receptions.get(m, [])],
                         dtype=np.int64)
                for members in views
            ] + list(links),
            coalitions=views + [[] for _ in links],
        )  # fmt: skip

    def uses(self, unit: int) -> int:
        return sum(u == unit for u in self.columns["unit"])


def _walk(visits, etas, z, ceiling) -> _Lineage:
    """A chain of models along ``visits``: each visited node receives the latest state and,
    if the ceiling admits its unit, contributes a step of displacement η and noise η·z."""
    walk = _Lineage(ceiling, ceiling.nodes)
    latest = walk.make(-1, -1, sigma=0.0)
    for node, eta in zip(visits, etas, strict=True):
        latest = walk.make(latest, node, unit=node, shift=eta, sigma=eta * z)
    return walk


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
    st.booleans(),
)
def test_no_pair_passes_the_budget_whatever_the_walk(n, steps, seed, z, epsilon, amplified,
                                                     collude, eavesdrop, bursty):  # fmt: skip
    """Any sequence of visits (uniform over n nodes, 200 to 800 steps; ``bursty``: half of
    them back and forth between two nodes, so that short stretches pool with long ones),
    step sizes and noise, with or without amplification, a coalition and two link
    eavesdroppers: every pair (the coalition's and the links' too) of the path-known
    accountant over the resulting chain is within the budget slope. The ceiling keeps no row
    for a link: its ends cover it (:class:`~netsim.privacy.ceiling.LineageCeiling`)."""
    rng = np.random.default_rng(seed)
    visits = rng.integers(0, n, steps)
    if bursty:
        visits = np.where(rng.random(steps) < 0.5, np.arange(steps) % 2, visits)
    visits = visits.tolist()
    etas = (1.0 / np.sqrt(1.0 + rng.integers(0, 4, steps))).tolist()
    coalitions = [list(range(max(2, n // 2)))] if collude else []
    links = [[0, 1], [1, 2]] if eavesdrop else []
    budget = slope_for_epsilon(epsilon, 1e-5)
    ceiling = LineageCeiling(n, np.arange(n), coalitions, budget, 1 / (2 * z * z), amplified)
    walk = _walk(visits, etas, z, ceiling)
    # state i is made by visit i − 1 and sent to the node of visit i: a link sees it when
    # those are its two ends
    crossed = [
        np.array([i for i in range(1, steps) if {visits[i - 1], visits[i]} == set(ends)],
                 dtype=np.int64)
        for ends in links
    ]  # fmt: skip
    slopes = walk.slopes(coalitions, amplified, crossed)
    assert slopes.max() <= budget * (1 + 1e-9)
    # not by refusing everything: the first use is admitted when one release fits the budget
    if 1 / (2 * z * z) <= budget:
        assert walk.columns["unit"][1] == visits[0]


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


def _branching_walk(n, steps, seed, z, ceiling, restart, drop, older) -> tuple[_Lineage, int]:
    """A walk service's lineage, driven at random: live walks are delivered to uniform nodes
    (1 in 20 is lost on the way; a node drops the arriving walk with probability ``drop``,
    keeping it as its copy), a node that keeps one visits its older copy with probability
    ``older`` and, with probability ``restart`` per step, a uniform node restarts from its
    copy; every branch asks the ceiling first (and is not made if refused). Returns the
    lineage and how many branches were refused."""
    rng = np.random.default_rng(seed)
    walk = _Lineage(ceiling, n)
    root = walk.make(-1, -1, sigma=0.0)
    copies = [root] * n
    walks = [root]  # the state each live walk carries, not yet delivered
    refused = 0
    for _ in range(steps):
        if rng.random() < restart or not walks:
            node = int(rng.integers(n))
            if ceiling.continues(copies[node], copies[node] in walks):
                walks.append(copies[node])
            else:
                refused += 1
            continue
        state = walks.pop(int(rng.integers(len(walks))))
        if rng.random() < 0.05:
            continue  # lost on the way: nobody received it
        node = int(rng.integers(n))
        walk.receive(node, state)
        if rng.random() < drop:
            copies[node] = state
            continue  # dropped there
        base = state
        if copies[node] != state and rng.random() < older:
            if ceiling.continues(copies[node], copies[node] in walks):
                base = copies[node]
            else:
                refused += 1
        eta = 1.0 / np.sqrt(1.0 + rng.integers(0, 4))
        child = walk.make(base, node, unit=node, shift=eta, sigma=eta * z)
        copies[node] = child
        walks.append(child)
    return walk, refused


@settings(max_examples=60, deadline=None)
@given(
    st.integers(3, 20),
    st.integers(300, 1500),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.6, 1.0, 2.0]),
    st.sampled_from([0.5, 2.0, 8.0]),
    st.sampled_from([0.01, 0.05, 0.2]),
    st.booleans(),
    st.booleans(),
)
def test_no_pair_passes_the_budget_whatever_the_branches(n, steps, seed, z, epsilon, restart,
                                                         amplified, collude):  # fmt: skip
    """A lineage that branches — restarts from local copies, visits of older copies, several
    walks at once, walks lost and dropped — with the ceiling asked before each use and each
    branch: every pair (and a coalition's) of the path-known accountant, with its closure
    under lowest common ancestors, is within the budget slope."""
    coalitions = [list(range(max(2, n // 2)))] if collude else []
    budget = slope_for_epsilon(epsilon, 1e-5)
    ceiling = LineageCeiling(n, np.arange(n), coalitions, budget, 1 / (2 * z * z), amplified)
    walk, _ = _branching_walk(n, steps, seed, z, ceiling, restart, 0.5, 0.3)
    assert walk.slopes(coalitions, amplified).max() <= budget * (1 + 1e-9)


def test_the_branching_walk_is_used_and_branches() -> None:
    """The property above is not met by refusing everything: on 20 nodes at z = 3, ε = 8,
    with a restart at 1% of the steps, 5% of the walks dropped and 10% of the visits of an
    older copy, the ceiling admits 565 uses where local DP admits 440 (22 per unit), makes
    hundreds of branches, and the worst pair's loss is most of the budget."""
    budget = slope_for_epsilon(8.0, 1e-5)
    contribution = 1 / 18
    ceiling = LineageCeiling(20, np.arange(20), [], budget, contribution, True)
    walk, _ = _branching_walk(20, 6000, 7, 3.0, ceiling, 0.01, 0.05, 0.1)
    slopes = walk.slopes()
    local = 20 * int(budget / contribution)
    assert sum(u >= 0 for u in walk.columns["unit"]) > 1.2 * local
    assert int(ceiling.cut[: ceiling.states].sum()) > 100
    assert 0.5 * budget < slopes.max() <= budget * (1 + 1e-9)


def _contributions_with_copies(walk: _Lineage, rounds: int, makers: list[int], restart: bool):
    """Node 0 contributes every 23 states; the next state is made by one of ``makers`` in
    turn, which keeps it as its copy, the one after by one of nodes 7 to 11 in turn, then 20
    by node 12. With ``restart``, after node 0's next contribution a walk restarts from the
    previous copy (if the ceiling consents), node 1 receiving on both branches."""
    tip = walk.make(-1, 12)
    copies, restarts = [], 0
    for k in range(rounds):
        tip = walk.make(tip, 0, unit=0)
        tip = walk.make(tip, makers[k % len(makers)])
        copies.append(tip)
        tip = walk.make(tip, 7 + k % 5)
        for _ in range(20):
            tip = walk.make(tip, 12)
        if restart and len(copies) >= 2:
            walk.receive(1, tip)
            if walk.ceiling.continues(copies[-2], False):
                restarts += 1
                walk.receive(1, walk.make(copies[-2], 12))
    return tip, copies, restarts


@pytest.mark.parametrize("makers", [[2, 3, 4, 5, 6], [2]])
def test_a_restart_behind_a_closed_stretch_is_charged(makers: list[int]) -> None:
    """After each of node 0's contributions but the first, a walk restarts from the copy
    kept just after its previous one: the path-known accountant gives node 1 (on both
    branches) that copy, so each contribution reaches it after two noisy steps, though its
    stretch was long when it closed. The ceiling charges the cut to the closed stretch and
    keeps what the maker saw before it: every observer's real loss stays within the budget,
    and the worst reaches most of it (the rest is the reserve of node 0's open stretch).
    With five makers node 1's branches bind; with one, the maker's first sights do."""
    budget = slope_for_epsilon(4.0, 1e-5)
    walk = _Lineage(LineageCeiling(13, np.arange(13), [], budget, 1 / 32, True), 13)
    _, _, restarts = _contributions_with_copies(walk, 60, makers, restart=True)
    slopes = walk.slopes()
    assert 0.7 * budget < slopes[:, 0].max() <= budget * (1 + 1e-9)
    assert restarts > 40
    assert walk.uses(0) < 60


def test_cuts_past_the_budget_are_refused() -> None:
    """Node 0 is used until its budget is spent, with no branch; then walks restart from
    every copy kept after its contributions, node 1 receiving on both branches. Each restart
    would give node 1 one more contribution after two noisy steps: the ceiling makes them
    until the budget would pass and refuses the rest, and node 1's real loss stays within
    the budget."""
    budget = slope_for_epsilon(4.0, 1e-5)
    walk = _Lineage(LineageCeiling(13, np.arange(13), [], budget, 1 / 32, True), 13)
    tip, copies, _ = _contributions_with_copies(walk, 60, [2, 3, 4, 5, 6], restart=False)
    used = walk.uses(0)
    walk.receive(1, tip)
    made = [walk.ceiling.continues(kept, False) for kept in copies[: used - 1]]
    for kept, admitted in zip(copies, made, strict=False):
        if admitted:
            walk.receive(1, walk.make(kept, 12))
    assert walk.slopes()[1, 0] <= budget * (1 + 1e-9)
    assert 20 < used < 60
    assert not all(made)


def test_the_ceiling_refuses_an_unconsented_branch_and_an_unadmitted_use() -> None:
    """A protocol that branches without asking (a second child, or a reception of a state
    that has a child) is a bug the ceiling reports; so is a contribution not admitted."""
    ceiling = LineageCeiling(3, np.arange(3), [], 10.0, 0.1, True)
    ceiling.made(0, -1, -1, 0.0, 0.0)
    ceiling.visiting(1, 0)
    assert ceiling.admits(1)
    ceiling.made(1, 0, 1, 1.0, 1.0)
    with pytest.raises(SimulationError, match="without the ceiling's consent"):
        ceiling.made(2, 0, -1, 0.0, 0.0)
    ceiling = LineageCeiling(3, np.arange(3), [], 10.0, 0.1, True)
    ceiling.made(0, -1, -1, 0.0, 0.0)
    ceiling.visiting(1, 0)
    ceiling.made(1, 0, -1, 0.0, 0.0)
    with pytest.raises(SimulationError, match="without the ceiling's consent"):
        ceiling.received(2, 0)
    assert ceiling.continues(0, False)  # asked, the root (no contribution above) is free
    ceiling.received(2, 0)
    ceiling.made(2, 0, -1, 0.0, 0.0)
    # a unit's second contribution must have been admitted (its last stretch is charged)
    ceiling = LineageCeiling(3, np.arange(3), [], 10.0, 0.1, True)
    ceiling.made(0, -1, -1, 0.0, 0.0)
    ceiling.visiting(1, 0)
    assert ceiling.admits(1)
    ceiling.made(1, 0, 1, 1.0, 1.0)
    ceiling.visiting(1, 1)
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
        (_with_budget(gossip_learning()), r"budget"),
    ],
)  # fmt: skip
def test_a_network_budget_that_cannot_be_kept_is_refused(data: dict, match: str) -> None:
    with pytest.raises(ScenarioError, match=match):
        validate_scenario(data, source="test", base_dir=None)


@pytest.mark.parametrize("walk", [{"kill_probability": 0.05}, {"preset": "authors"}])
def test_the_walk_service_under_churn_keeps_the_budget_for_every_node(walk: dict) -> None:
    """The walk service under churn, its walks lost (5% killed per step) or run as the
    authors' code runs it, and restarted from local copies: a lineage that branches. Under
    the network budget every unit is used more often than under the local one, and every
    node's loss — all 60, re-accounted from the run's lineage and views, not only the 20
    observers sampled for the pairs — and the coalition's stay within ε = 8."""
    runs = {}
    for budget in ("local", "network"):
        data = _with_budget(SERVICE_UNDER_CHURN, budget=budget)
        data["walk"] = {**data["walk"], **walk}
        runs[budget] = netsim.run(data).tables
    tables = runs["network"]
    local, network = (runs[b]["learning_summary"].iloc[0] for b in ("local", "network"))
    assert network["updates"] > 1.2 * local["updates"]
    assert network["epsilon"] > 8.0  # the local-DP spend, past the budget
    assert (tables["walk_restarts"]["reason"] == "timeout").any()
    lineage, views = tables["privacy_lineage"], tables["privacy_views"]
    parent = lineage["parent"].to_numpy()
    assert np.bincount(parent[parent >= 0]).max() >= 2  # it branched
    observers = [[v] for v in range(60)] + [[0, 1, 2]]
    slopes = path_known_slopes(
        parent=parent, unit=lineage["unit"].to_numpy(), owner=lineage["owner"].to_numpy(),
        shift=lineage["shift"].to_numpy(), noise_std=lineage["noise_std"].to_numpy(),
        receptions=[views.loc[views["node"].isin(m), "state"].to_numpy() for m in observers],
        coalitions=observers, units=60, amplified=True,
    )  # fmt: skip
    assert float(epsilons_of_slopes(slopes.max(), 1e-5)) <= 8.0
    assert tables["privacy_pairs"]["epsilon"].max() > 6.0  # used up to it, not far below
    # a branch the budget cannot take is not made, and the claim counts it
    claim = tables["privacy_summary"]["claim"].iloc[0]
    assert ("refused" in claim) == (walk.get("preset") == "authors")


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


def test_on_an_8_regular_walk_the_pooled_ceiling_admits_more_than_local_dp() -> None:
    """Spambase on 512 nodes of an 8-regular graph, the node as unit, z = 5, ε = 2 at δ =
    10⁻⁵: local DP admits each node about five uses (2,493 in all); the ceiling, pooling the
    stretches an observer has not received in, admits 4,625 (the per-stretch ceiling it
    refines admitted 4,253), and every pair stays within ε = 2."""
    runs = {}
    for budget in ("local", "network"):
        data = yaml.safe_load((SCENARIOS / "privacy" / "walk-spambase.yaml").read_text())
        data["learning"] = {**data["learning"], "privacy_unit": "node", "epsilon": 2.0,
                            "noise": {"kind": "gaussian", "noise_multiplier": 5.0}}
        data = _with_budget(data, budget=budget)
        runs[budget] = netsim.run(data).tables
    local, network = (runs[b]["learning_summary"].iloc[0] for b in ("local", "network"))
    assert network["updates"] > 1.8 * local["updates"]
    assert network["updates"] > 4400  # the per-stretch ceiling: 4,253
    summary = runs["network"]["privacy_summary"].iloc[0]
    assert 1.9 < summary["network_epsilon"] <= 2.0 < summary["local_epsilon"]
