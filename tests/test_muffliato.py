"""Muffliato's Gaussian gossip averaging as a scenario section: the averaging keeps the sum,
uses only links whose ends are online and whose messages arrive, and its privacy tables hold
each observer's exact loss for the mixing the run really did (netsim/privacy/pairwise.py)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import netsim
from netsim.algorithms.muffliato.averaging import MuffliatoAveraging
from netsim.errors import ScenarioError
from netsim.log import EventLog
from netsim.privacy.mechanisms import gaussian_epsilon
from netsim.privacy.pairwise import pairwise_epsilons
from netsim.scenario.build import build_run, check_inputs
from netsim.scenario.loader import validate_scenario


def scenario(**changes: object) -> dict:
    data: dict = {
        "name": "muffliato-test", "seed": 3, "nodes": 40, "duration": "10s",
        "topology": {"kind": "random_regular", "degree": 4},
        "muffliato": {"period": "1s", "rounds": 6, "dimension": 2, "radius": 0.5},
    }  # fmt: skip
    data.update(changes)
    return data


def test_every_round_keeps_the_sum_of_the_values_under_churn_and_loss() -> None:
    """W_t is doubly stochastic whatever the round's links (offline nodes and unused links
    leave their rows to the diagonal): the sum of the noisy values is the same after every
    round, and only links between online nodes are used."""
    data = scenario(
        links={"loss": 0.2},
        churn={
            "kind": "synthetic",
            "online": {"dist": "exponential", "mean": "5s"},
            "offline": {"dist": "exponential", "mean": "5s"},
        },
    )
    built = build_run(validate_scenario(data, source="test", base_dir=None), EventLog())
    averaging = built["muffliato"]
    start = averaging.state.sum(axis=0).copy()
    online_then: list[np.ndarray] = []
    original = averaging.round

    def round_seeing_who_is_online(t: int) -> None:
        online_then.append(built.network.nodes.online.copy())
        original(t)

    averaging.round = round_seeing_who_is_online
    built.sim.run(built.scenario.duration)
    np.testing.assert_allclose(averaging.state.sum(axis=0), start, rtol=0, atol=1e-9)
    for weights in averaging.mixing:
        np.testing.assert_allclose(np.asarray(weights.sum(axis=0)).ravel(), 1.0, atol=1e-12)
        np.testing.assert_allclose(np.asarray(weights.sum(axis=1)).ravel(), 1.0, atol=1e-12)
    assert len(averaging.mixing) == 6
    for weights, online in zip(averaging.mixing, online_then, strict=True):
        rows, columns = (weights - sp.diags(weights.diagonal())).nonzero()
        assert online[rows].all() and online[columns].all()
        assert (~online).any()  # churn: someone is offline


def test_the_pairs_are_each_observers_exact_loss_for_the_runs_mixing() -> None:
    result = netsim.run(scenario())
    pairs, summary = result.tables["privacy_pairs"], result.tables["privacy_summary"].iloc[0]
    assert len(pairs) == 40 * 39 and summary["pairs"] == len(pairs)
    noise = result.tables["muffliato_summary"].iloc[0]
    sigma, sensitivity = noise["sigma"], noise["sensitivity"]
    assert summary["view"] == "gaussian_exact" and summary["claim"].startswith("exact")
    assert sensitivity == 1.0 and sigma == 1.0
    local = gaussian_epsilon(sigma, sensitivity, 1e-5)
    assert summary["local_epsilon"] == pytest.approx(local)
    # neighbours are heard in the first round: local DP; on average the loss falls with the
    # hops between observer and record
    neighbours = pairs[pairs["distance"] == 1]
    np.testing.assert_allclose(neighbours["epsilon"], local)
    np.testing.assert_allclose(neighbours["local_share"], 1.0)
    assert summary["network_epsilon"] == pytest.approx(pairs["epsilon"].max())
    assert summary["epsilon_median"] == pytest.approx(pairs["epsilon"].median())
    assert (pairs.groupby("distance")["epsilon"].mean().diff().dropna() <= 1e-9).all()


def test_the_tables_are_the_accountant_applied_to_the_rounds_that_ran() -> None:
    built = build_run(validate_scenario(scenario(links={"loss": 0.3}), source="test",
                                        base_dir=None), EventLog())  # fmt: skip
    built.sim.run(built.scenario.duration)
    averaging = built["muffliato"]
    tables = built.sim.log.to_frames()
    expected = pairwise_epsilons(averaging.mixing, sigma=1.0, sensitivity=1.0, delta=1e-5,
                                 observers=[0, 7])  # fmt: skip
    got = tables["privacy_pairs"].set_index(["observer", "record"])
    for row in expected.itertuples():
        assert got.loc[(row.observer, row.record), "epsilon"] == pytest.approx(row.epsilon)
    # a link is used when both its messages arrive: (1 − 0.3)² of the 80 links, every round
    rounds = tables["muffliato_rounds"]
    trials = 80 * len(rounds)
    share = rounds["links"].sum() / trials
    assert abs(share - 0.7**2) <= 4 * np.sqrt(0.49 * 0.51 / trials)
    samples = tables["samples"].iloc[-1]
    assert samples["messages_lost"] > 0


def test_with_every_message_lost_nothing_mixes_and_nobody_learns() -> None:
    tables = netsim.run(scenario(links={"loss": 1.0})).tables
    rounds = tables["muffliato_rounds"]
    assert (rounds["links"] == 0).all()
    assert rounds["rmse"].nunique() == 1  # nothing averaged
    pairs = tables["privacy_pairs"]
    assert (pairs["local_share"] == 0).all() and (pairs["epsilon"] == 0).all()


def test_noise_too_small_for_any_budget_is_stated_as_infinite_loss() -> None:
    """σ = 1e-300 Δ: every pair's ε is infinite; the summary says so (median and 90th
    percentile infinite, not NaN) and states no central yardstick, where it used to end in a
    traceback."""
    muffliato = {"period": "1s", "rounds": 6, "dimension": 2, "radius": 0.5,
                 "noise_multiplier": 1e-300}  # fmt: skip
    tables = netsim.run(scenario(muffliato=muffliato)).tables
    summary = tables["privacy_summary"].iloc[0]
    stated = summary[["network_epsilon", "epsilon_median", "epsilon_p90"]].astype(float)
    assert np.isinf(stated).all()
    assert np.isnan(tables["muffliato_summary"]["central_rmse"].iloc[0])


def test_chebyshev_acceleration_on_a_disconnected_topology_is_refused_in_one_message(
    tmp_path,
) -> None:
    muffliato = {"period": "1s", "rounds": 6, "dimension": 2, "radius": 0.5,
                 "acceleration": "chebyshev"}  # fmt: skip
    data = scenario(topology={"kind": "ring", "k": 1}, muffliato=muffliato)
    netsim.run(data)  # connected: runs
    edges = tmp_path / "two-triangles.txt"
    edges.write_text("0 1\n1 2\n0 2\n3 4\n4 5\n3 5\n", encoding="utf-8")
    pieces = {"kind": "edge_list", "path": str(edges)}
    disconnected = scenario(nodes=6, topology=pieces, muffliato=muffliato)
    with pytest.raises(ScenarioError, match="needs a connected topology: this one has 2 comp"):
        netsim.run(disconnected)
    # netsim validate finds it too, before anything runs
    with pytest.raises(ScenarioError, match="needs a connected topology: this one has 2 comp"):
        check_inputs(validate_scenario(disconnected, source="test", base_dir=None))


def test_observers_are_sampled_at_scale_and_required_past_it() -> None:
    tables = netsim.run(scenario(muffliato={"period": "1s", "rounds": 3, "observers": 5})).tables
    assert tables["privacy_pairs"]["observer"].nunique() == 5
    # the worst pair is the worst over the sample, and the summary says so
    nodes = validate_scenario(scenario(), source="test", base_dir=None).nodes
    assert tables["privacy_summary"]["sampled_from"].tolist() == [nodes]
    lines = MuffliatoAveraging.summary_lines(tables)
    assert f"the worst over the sampled observers (privacy.observers) of {nodes:,} nodes" in (
        "\n".join(lines)
    )
    every = netsim.run(scenario(muffliato={"period": "1s", "rounds": 3})).tables
    assert every["privacy_summary"]["sampled_from"].tolist() == [0]
    assert "sampled" not in "\n".join(MuffliatoAveraging.summary_lines(every))
    with pytest.raises(ScenarioError, match=r"muffliato\.observers"):
        validate_scenario(scenario(nodes=2500), source="test", base_dir=None)


@pytest.mark.parametrize("name", ["averaging", "averaging-churn"])
def test_the_guides_figures_are_those_of_the_shipped_scenarios(name: str) -> None:
    """The privacy core guide's table of the two shipped Muffliato scenarios is what they
    produce (docs/guide/privacy-core.md)."""
    from pathlib import Path

    from netsim.scenario.loader import load_scenario

    repo = Path(__file__).resolve().parents[1]
    row = next(
        line
        for line in (repo / "docs" / "guide" / "privacy-core.md").read_text().splitlines()
        if line.startswith(f"| `{name}.yaml`")
    )  # fmt: skip
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    median, p90 = (float(x) for x in cells[1].split("/"))
    worst, rmse, curator = float(cells[2].split()[0]), float(cells[3]), float(cells[4])
    summary = netsim.run(load_scenario(repo / "scenarios" / "muffliato" / f"{name}.yaml"))
    got = summary.tables["privacy_summary"].iloc[0]
    errors = summary.tables["muffliato_summary"].iloc[0]
    assert (median, p90) == (round(got["epsilon_median"], 2), round(got["epsilon_p90"], 2))
    assert worst == round(got["network_epsilon"], 2)
    assert rmse == round(errors["final_rmse"], 3)
    assert curator == round(errors["central_rmse"], 4)


def test_chebyshev_acceleration_mixes_faster_and_is_accounted_on_its_own_states() -> None:
    """On a ring (a slow mixer), the accelerated rounds end closer to the mean after the same
    rounds. On a 4-regular graph of 60 nodes, 3 rounds, the pairs are those of the
    accelerated states (pairwise_epsilons with the run's γ over the run's mixing). They equal
    plain gossip's: an observer that hears the same neighbours every round sees rows of
    polynomials of W of the same degrees either way, so the same row space (the accelerated
    messages themselves differ: tests/test_pairwise_privacy.py)."""
    from netsim.algorithms.muffliato.averaging import topology_gap, undirected_links
    from netsim.privacy.pairwise import chebyshev_gamma, metropolis_from_edges

    def averaging(**muffliato: object) -> dict:
        return {"period": "1s", "rounds": 6, "dimension": 2, "radius": 0.5, **muffliato}

    ring = {"kind": "ring", "k": 2}
    plain = netsim.run(scenario(topology=ring)).tables["muffliato_rounds"]
    fast = netsim.run(scenario(topology=ring, muffliato=averaging(acceleration="chebyshev")))
    assert fast.tables["muffliato_rounds"]["rmse"].iloc[-1] < plain["rmse"].iloc[-1]

    data = scenario(nodes=60, muffliato=averaging(rounds=3, acceleration="chebyshev"))
    tables = netsim.run(data).tables
    built = build_run(validate_scenario(data, source="test", base_dir=None), EventLog())
    topology = built["muffliato"].network.topology
    a, b = undirected_links(topology.indptr, topology.indices)
    gamma = chebyshev_gamma(topology_gap(60, a, b))
    mixing = [metropolis_from_edges(60, a, b)] * 3  # no churn, no loss: every link, each round
    common = {"sigma": 1.0, "sensitivity": 1.0, "delta": 1e-5, "observers": range(60)}
    expected = pairwise_epsilons(mixing, acceleration=gamma, **common)
    unaccelerated = pairwise_epsilons(mixing, **common)
    got = tables["privacy_pairs"]
    np.testing.assert_allclose(got["epsilon"], expected["epsilon"], rtol=1e-9)
    np.testing.assert_allclose(got["epsilon"], unaccelerated["epsilon"], rtol=1e-7, atol=1e-9)


def test_the_privacy_sections_observers_coalitions_and_delta_are_accounted() -> None:
    """With a privacy section of model network, Muffliato accounts its threat model: every
    node (its observers), the coalition {0, 1, 2} as observer −1 knowing its members' values,
    at its δ. The pairs are the exact accountant's for the rounds that ran, and the coalition
    learns about each record at least what its most-informed member learns alone."""
    data = scenario(links={"loss": 0.2})
    data["privacy"] = {"model": "network", "coalitions": [[0, 1, 2]], "delta": 1e-3}
    built = build_run(validate_scenario(data, source="test", base_dir=None), EventLog())
    built.sim.run(built.scenario.duration)
    averaging = built["muffliato"]
    tables = built.sim.log.to_frames()
    pairs = tables["privacy_pairs"]
    expected = pairwise_epsilons(averaging.mixing, sigma=1.0, sensitivity=1.0, delta=1e-3,
                                 coalitions=[[0, 1, 2]])  # fmt: skip
    np.testing.assert_array_equal(pairs["observer"], expected["observer"])
    np.testing.assert_allclose(pairs["epsilon"], expected["epsilon"], rtol=1e-12)
    coalition = pairs[pairs["observer"] == -1].set_index("record")["epsilon"]
    assert len(coalition) == 37 and (pairs.loc[pairs["observer"] == -1, "distance"] == -1).all()
    members = pairs[pairs["observer"].isin([0, 1, 2])].groupby("record")["epsilon"].max()
    assert (coalition >= members.loc[coalition.index] - 1e-9).all()
    assert (coalition > members.loc[coalition.index] + 1e-6).any()  # strictly more for some
    summary = tables["privacy_summary"].iloc[0]
    assert summary["delta"] == 1e-3 and summary["observers"] == 41
    assert summary["local_epsilon"] == pytest.approx(gaussian_epsilon(1.0, 1.0, 1e-3))


@pytest.mark.parametrize(
    ("privacy", "muffliato", "match"),
    [
        ({"model": "network"}, {"observers": 5}, r"privacy\.observers only"),
        ({"model": "network", "budget": "network"}, {}, r"privacy\.budget local"),
        ({"model": "network", "observers": 41}, {}, r"privacy\.observers"),
        ({"model": "network", "links": [[0, 1]]}, {}, r"give the link as a coalition"),
    ],
)
def test_muffliato_and_a_privacy_section_that_disagree_are_refused(
    privacy: dict, muffliato: dict, match: str
) -> None:
    data = scenario(privacy=privacy)
    data["muffliato"] = {**data["muffliato"], **muffliato}
    with pytest.raises(ScenarioError, match=match):
        validate_scenario(data, source="test", base_dir=None)
