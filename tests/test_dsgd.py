"""Decentralised SGD with gossip averaging (the ``dsgd`` section): the config refuses what cannot
run, the rounds are mini-batch gradient descent when the averaging is exact, each noise policy
adds what it says (DECOR's secrets cancel when every node steps and not when a neighbour is
offline, Zip-DL's shares sum to zero per sender, anti-PGD differences its draws), and the
linear view the run records (netsim.privacy.linear) reproduces the models it computed."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import yaml

import netsim
from netsim.errors import ScenarioError
from netsim.learning.sensitivity import clip_rows
from netsim.log import EventLog
from netsim.privacy.linear import (
    account_views,
    ldp_view,
    local_mu_squared,
    pndp_view,
    secldp_view,
)
from netsim.scenario.build import build_run
from netsim.scenario.loader import validate_scenario

REPO = Path(__file__).resolve().parents[1]
ADULT = REPO.parent / "shared" / "data" / "uci" / "adult-complete-rows.csv"

CHURN = {
    "kind": "synthetic",
    "online": {"dist": "exponential", "mean": "6s"},
    "offline": {"dist": "exponential", "mean": "3s"},
}


def scenario(dsgd: dict[str, Any] | None = None, **changes: Any) -> dict[str, Any]:
    """A small run on breast cancer (bundled with scikit-learn): 8 nodes of a ring."""
    section = {
        "dataset": {"name": "breast_cancer"}, "records_per_node": 24, "batch": 6,
        "clip": 1.0, "learning_rate": 0.5, "rounds": 12, "evaluate_every": 4,
    }  # fmt: skip
    section.update(dsgd or {})
    data: dict[str, Any] = {
        "name": "dsgd-test", "seed": 5, "nodes": 8, "duration": "40s",
        "topology": {"kind": "ring", "k": 1}, "dsgd": section,
    }  # fmt: skip
    data.update(changes)
    return data


def built(data: dict[str, Any], trace: bool = True) -> tuple[Any, Any, dict[str, pd.DataFrame]]:
    """Build and run ``data``; the learner (its trace kept) and the tables."""
    run = build_run(validate_scenario(data, source="test", base_dir=None), EventLog())
    learner = run["dsgd"]
    if trace:
        learner.trace = []
    run.sim.run(run.scenario.duration)
    return run, learner, run.sim.log.to_frames()


def problem(data: dict[str, Any]) -> str:
    with pytest.raises(ScenarioError) as caught:
        validate_scenario(data, source="test", base_dir=None)
    return str(caught.value)


# --- config -----------------------------------------------------------------------------------


def test_a_batch_that_does_not_divide_the_shard_is_refused() -> None:
    message = problem(scenario({"records_per_node": 10, "batch": 4}))
    assert "dsgd.batch (4) must divide dsgd.records_per_node (10)" in message


def test_an_unknown_noise_kind_lists_the_kinds() -> None:
    message = problem(scenario({"noise": {"kind": "laplace"}}))
    assert "laplace" in message
    for kind in ("none", "local", "decor", "zip", "correlated"):
        assert repr(kind) in message


CORRELATED = {"kind": "correlated", "noise_multiplier": 1}


@pytest.mark.parametrize(
    ("noise", "needle"),
    [
        ({"kind": "local"}, "noise_multiplier"),  # required
        ({"kind": "local", "noise_multiplier": 0}, "greater than 0"),
        ({"kind": "decor", "noise_multiplier": 1.0}, "correlated_multiplier"),
        ({"kind": "decor", "correlated_multiplier": 1, "message_multiplier": 1}, "message_mult"),
        ({**CORRELATED, "matrix": [[1, 1], [0, 1]]}, "lower triangular"),
        ({**CORRELATED, "matrix": [[1], [-1, 1]]}, "has 2 rows but the run has 12 rounds"),
        ({**CORRELATED, "matrix": "toeplitz"}, "anti_pgd"),
    ],
)
def test_each_noise_kind_refuses_bad_keys(noise: dict[str, Any], needle: str) -> None:
    assert needle in problem(scenario({"noise": noise}))


def test_the_clip_is_required_and_positive() -> None:
    section = scenario()
    del section["dsgd"]["clip"]
    assert "clip" in problem(section)
    assert "greater than 0" in problem(scenario({"clip": 0}))


def test_an_explicit_matrix_too_short_for_the_run_is_refused_when_rounds_come_from_duration():
    data = scenario(
        {"noise": {"kind": "correlated", "noise_multiplier": 1, "matrix": [[1]]}}, duration="20s"
    )
    del data["dsgd"]["rounds"]
    assert "has 1 rows but the run has 20 rounds" in problem(data)


def test_noise_by_name_and_shards_too_large_for_the_data() -> None:
    validate_scenario(scenario({"noise": "none"}), source="test", base_dir=None)
    from netsim.algorithms.dsgd.learner import dsgd_data
    from netsim.errors import DataError

    config = validate_scenario(scenario({"records_per_node": 60}), source="test",
                               base_dir=None).dsgd  # fmt: skip
    with pytest.raises(DataError, match="records_per_node"):
        dsgd_data(config, 8)


# --- the rounds -------------------------------------------------------------------------------


def test_on_a_complete_graph_without_noise_the_nodes_follow_minibatch_gradient_descent() -> None:
    """Metropolis–Hastings weights on K_n are 1/n: one round averages exactly, so every node
    holds θ − η (mean over all nodes' batches of the clipped gradients + λθ), the centralised
    mini-batch step on the union of the batches."""
    _, learner, tables = built(
        scenario({"regularisation": 0.01, "rounds": 8, "clip": 0.05}, topology={"kind": "complete"})
    )
    config = learner.config
    theta = np.zeros(learner.dimension)
    n, b, r = 8, config.batch, config.records_per_node
    for k in range(8):
        batch = k % (r // b)
        rows = (np.arange(n)[:, None] * r + batch * b + np.arange(b)[None, :]).ravel()
        grads = clip_rows(
            learner.model.per_example_gradients(theta, learner.x[rows], learner.y[rows]),
            config.clip,
            "L2",
        )
        theta = theta - config.learning_rate * (grads.mean(axis=0) + 0.01 * theta)
    np.testing.assert_allclose(learner.theta, np.tile(theta, (n, 1)), rtol=0, atol=1e-12)
    assert (tables["dsgd_rounds"]["consensus"] < 1e-12).all()
    # the clip was active: the step is not the unclipped gradient's
    assert np.abs(theta).max() > 0


def test_the_mixing_is_doubly_stochastic_on_the_links_used_under_churn_and_loss() -> None:
    _, learner, tables = built(scenario(links={"loss": 0.2}, churn=CHURN))
    rounds = tables["dsgd_rounds"]
    assert len(learner.mixing) == len(rounds) == 12
    assert rounds["lost"].sum() > 0 and (rounds["online"] < 8).any()
    for weights, record, trace in zip(learner.mixing, learner.linear.rounds, learner.trace,
                                      strict=True):  # fmt: skip
        np.testing.assert_allclose(np.asarray(weights.sum(axis=0)).ravel(), 1.0, atol=1e-12)
        np.testing.assert_allclose(np.asarray(weights.sum(axis=1)).ravel(), 1.0, atol=1e-12)
        off = weights - sp.diags(weights.diagonal())
        rows, columns = off.nonzero()
        assert trace["online"][rows].all() and trace["online"][columns].all()
        # a link is used only when both its messages were delivered
        delivered = set(zip(record.sent_src[record.delivered].tolist(),
                            record.sent_dst[record.delivered].tolist(), strict=True))  # fmt: skip
        for i, j in zip(rows.tolist(), columns.tolist(), strict=True):
            assert (i, j) in delivered and (j, i) in delivered
        # offline nodes took no step and kept their model
        assert ((record.step != 0) == trace["online"]).all()
        assert (record.batch[~trace["online"]] == -1).all()


EXACT = {"mode": "exact", "deadline": "0.5s", "period": "1s"}
DELAYED = {"loss": 0.15, "delay": {"dist": "uniform", "low": "0.1s", "high": "0.9s"}}


@pytest.mark.parametrize("mode", ["rounds", "exact"])
def test_the_recorded_view_reproduces_the_models(mode: str) -> None:
    """Rebuild θ round by round from the LinearRun alone (mixing, step, secrets, messages) and
    the inputs the trace kept (clipped gradients, independent noise, secrets, message noise):
    x' = M (x − step (g + n)) + Σ_messages M[j, i] ξ_ij / c_i (netsim.privacy.linear's model),
    for DECOR and Zip-DL with regularisation (mixing W·diag(c)) and temporally correlated noise,
    under churn and loss; in exact mode with transfer times, some messages arriving after the
    deadline."""
    for noise, regularisation in (
        ({"kind": "decor", "noise_multiplier": 0.5, "correlated_multiplier": 3.0}, 0.05),
        ({"kind": "zip", "message_multiplier": 2.0, "noise_multiplier": 0.3}, 0.02),
        ({"kind": "correlated", "noise_multiplier": 1.0}, 0.0),
    ):
        section = {"noise": noise, "regularisation": regularisation}
        links = {"loss": 0.15}
        if mode == "exact":
            section |= EXACT
            links = DELAYED
        data = scenario(section, links=links, churn=CHURN)
        _, learner, _ = built(data)
        eta = learner.config.learning_rate
        x = np.zeros_like(learner.theta)
        for record, trace in zip(learner.linear.rounds, learner.trace, strict=True):
            took = record.step != 0
            pairwise = np.zeros_like(x)
            if record.secret_std.size:
                # the secrets as recorded: +v at the smaller end, −v at the larger, when it stepped
                v = trace["secrets"]
                np.add.at(pairwise, record.secret_a, v * record.secret_a_added[:, None])
                np.add.at(pairwise, record.secret_b, -v * record.secret_b_added[:, None])
                np.testing.assert_allclose(pairwise, trace["pairwise"], atol=1e-12)
                np.testing.assert_allclose(record.secret_std, 3.0 * 1.0 / 6)
            noise_in = trace["independent"] + pairwise
            h = x - record.step[:, None] * (trace["gradient"] + noise_in)
            nxt = record.mixing @ h
            if trace["message_noise"] is not None:
                c = np.where(took, 1.0 - eta * regularisation, 1.0)
                w = np.asarray(record.mixing[record.sent_dst, record.sent_src]).ravel()
                xi = trace["message_noise"] / c[record.sent_src][:, None]
                np.add.at(nxt, record.sent_dst, w[:, None] * xi)
                assert record.zero_sum and record.message_std is not None
            x = nxt
        np.testing.assert_allclose(x, learner.theta, rtol=1e-10, atol=1e-12)
        if regularisation:
            c = 1.0 - eta * regularisation
            for weights, record in zip(learner.mixing, learner.linear.rounds, strict=True):
                scale = np.where(record.step != 0, c, 1.0)
                np.testing.assert_allclose((weights @ sp.diags(scale)).toarray(),
                                           record.mixing.toarray(), atol=1e-15)  # fmt: skip


def test_the_accountant_reads_the_recorded_run() -> None:
    """The LinearRun is what netsim.privacy.linear takes: local DP's μ² is the sum over a unit's
    uses of (2C/b ÷ σC/b)² (σ = 2), and an observer's view of its neighbours costs them no more."""
    data = scenario({"noise": {"kind": "local", "noise_multiplier": 2.0}, "rounds": 4,
                     "records_per_node": 12})  # fmt: skip
    _, learner, _ = built(data, trace=False)
    rounds = learner.linear.rounds
    assert all((r.sensitivity[r.step != 0] == 2.0 / 6).all() for r in rounds)
    local = local_mu_squared(learner.linear)
    # two batches per shard, four rounds: each record is used twice, (2C/b ÷ 2C/b)² = 1 per use
    assert set(local.values()) == {2.0}
    views = [(0, pndp_view(learner.linear, [0])), (1, ldp_view(learner.linear, 3))]
    pairs = account_views(learner.linear, views, delta=1e-5)
    shares = pairs["local_share"][np.isfinite(pairs["local_share"])]
    assert shares.size and (shares <= 1 + 1e-9).all()
    ldp = pairs["observer"] == 1
    np.testing.assert_allclose(pairs["local_share"][ldp], 1.0, rtol=1e-9)


@pytest.mark.parametrize(
    "noise",
    [
        {"kind": "decor", "noise_multiplier": 1.0, "correlated_multiplier": 5.0},
        {"kind": "zip", "message_multiplier": 1.0, "noise_multiplier": 1.0},
        {"kind": "correlated", "noise_multiplier": 1.0},
    ],
)
def test_the_accountant_takes_every_noise_kinds_view(noise: dict[str, Any]) -> None:
    """Secrets, zero-sum messages and temporal correlation as recorded are views the
    accountant can solve: finite losses; with independent steps (DECOR, Zip-DL) none above the
    local-DP loss of the unit's own noise (the LDP view of a node is exactly that)."""
    data = scenario({"noise": noise, "rounds": 4, "records_per_node": 12, "regularisation": 0.1},
                    links={"loss": 0.2}, churn=CHURN)  # fmt: skip
    _, learner, _ = built(data, trace=False)
    run = learner.linear
    views = [(0, pndp_view(run, [0])), (-1, secldp_view(run, [2, 3])), (5, ldp_view(run, 5))]
    pairs = account_views(run, views, delta=1e-5)
    assert pairs["node"].size and np.isfinite(pairs["mu_squared"]).all()
    assert (pairs["mu_squared"] >= 0).all()
    if noise["kind"] != "correlated":
        shares = pairs["local_share"][np.isfinite(pairs["local_share"])]
        assert (shares <= 1 + 1e-9).all()
        np.testing.assert_allclose(pairs["local_share"][pairs["observer"] == 5], 1.0, rtol=1e-9)


def test_decor_secrets_as_recorded_cancel_in_what_an_eavesdropper_sees() -> None:
    """SecLDP's eavesdropper sees every message and no secret: with no independent noise the
    secrets cancel in the sum of the messages, which reveals the gradients' sum (μ = ∞ for every
    record); with independent noise the loss is finite and below local DP's."""
    for sigma, revealed in ((0.0, True), (0.5, False)):
        noise = {"kind": "decor", "noise_multiplier": sigma, "correlated_multiplier": 5.0}
        _, learner, _ = built(scenario({"noise": noise, "rounds": 3}), trace=False)
        run = learner.linear
        pairs = account_views(run, [(-1, secldp_view(run, []))], delta=1e-5)
        assert pairs["node"].size == 8 * 3  # each node's three batches of its four
        assert np.isinf(pairs["mu_squared"]).all() == revealed
        if not revealed:
            assert np.isfinite(pairs["mu_squared"]).all()
            assert (pairs["local_share"] < 1.0).all()


def test_the_node_unit_records_the_whole_batch_as_its_sensitivity() -> None:
    _, learner, tables = built(scenario({"unit": "node", "noise": {"kind": "local",
                                         "noise_multiplier": 1.0}}), trace=False)  # fmt: skip
    record = learner.linear.rounds[0]
    assert (record.sensitivity == 2.0).all() and (record.noise_std == 1.0 / 6).all()
    assert tables["dsgd_summary"]["sensitivity"].iloc[0] == 2.0


# --- the noise policies -----------------------------------------------------------------------


def test_decor_secrets_cancel_when_every_node_steps() -> None:
    data = scenario({"noise": {"kind": "decor", "noise_multiplier": 0.0,
                               "correlated_multiplier": 10.0}})  # fmt: skip
    _, learner, tables = built(data)
    assert (tables["dsgd_rounds"]["uncancelled"] <= 1e-12).all()
    for trace in learner.trace:
        assert np.abs(trace["pairwise"]).max() > 1.0  # each node's share is large
        np.testing.assert_allclose(trace["pairwise"].sum(axis=0), 0.0, atol=1e-12)
        assert not trace["independent"].any()


def test_decor_secrets_are_left_uncancelled_by_an_offline_neighbour() -> None:
    data = scenario({"noise": {"kind": "decor", "noise_multiplier": 1.0,
                               "correlated_multiplier": 10.0}, "rounds": 20},
                    churn={**CHURN, "online": {"dist": "exponential", "mean": "40s"},
                           "offline": {"dist": "exponential", "mean": "2s"}})  # fmt: skip
    _, learner, tables = built(data)
    rounds = tables["dsgd_rounds"]
    a, b = learner.link_a, learner.link_b
    cut = 0
    for trace, value in zip(learner.trace, rounds["uncancelled"], strict=True):
        online = trace["online"]
        half = (online[a] != online[b]).any()  # a link with one end online
        if half:
            cut += 1
            assert value > 1e-3
            expected = np.linalg.norm(trace["pairwise"][online].sum(axis=0))
            assert value == pytest.approx(expected)
        else:
            assert value <= 1e-12
    assert 0 < cut < len(rounds)


def test_decor_draws_do_not_depend_on_who_is_online() -> None:
    """The pairs' secrets come from their own stream, one per link per round in link order:
    with or without churn, round t's secrets are the same."""
    noise = {"kind": "decor", "correlated_multiplier": 2.0}
    _, still, _ = built(scenario({"noise": noise}))
    _, moving, _ = built(scenario({"noise": noise}, churn=CHURN))
    for one, other in zip(still.trace, moving.trace, strict=True):
        np.testing.assert_array_equal(one["secrets"], other["secrets"])


def test_zip_shares_sum_to_zero_per_sender() -> None:
    data = scenario({"noise": {"kind": "zip", "message_multiplier": 5.0}, "rounds": 40,
                     "schedule": "inverse_sqrt"}, links={"loss": 0.2})  # fmt: skip
    _, learner, tables = built(data)
    shares = []
    for t, (record, trace) in enumerate(zip(learner.linear.rounds, learner.trace, strict=True)):
        xi = trace["message_noise"]
        sums = np.zeros((8, learner.dimension))
        np.add.at(sums, record.sent_src, xi)
        np.testing.assert_allclose(sums, 0.0, atol=1e-12)
        # on a ring every sender has two messages: each share is s·√2·(z − mean z)
        s = 5.0 * (1.0 / 6) * 0.5 / np.sqrt(t + 1)
        np.testing.assert_allclose(record.message_std, s * np.sqrt(2.0))
        shares.append(xi / s)
    # each share has standard deviation s (Zip-DL's m/(m−1) correction); a sender's two
    # shares are ±, so N draws hold N/2 independent ones: the standard error is about √(1/N)
    pooled = np.concatenate(shares).ravel()
    assert abs(pooled.std() - 1.0) < 5 * np.sqrt(1.0 / pooled.size)
    # equal weights (1/3 on the ring) cancel the shares in the network's sum; a lost message
    # leaves its sender's other share there
    rounds = tables["dsgd_rounds"]
    assert (rounds["lost"] > 0).any() and (rounds["lost"] == 0).any()
    assert (rounds.loc[rounds["lost"] > 0, "uncancelled"] > 1e-6).all()
    assert (rounds.loc[rounds["lost"] == 0, "uncancelled"] < 1e-12).all()


def test_local_noise_has_the_variance_it_claims() -> None:
    """Each stepping node's noise is N(0, (σC/b)² I): the sample variance of every coordinate
    drawn is (σC/b)² within five standard errors (√(2/N) relative, N the draws)."""
    data = scenario({"noise": {"kind": "local", "noise_multiplier": 3.0}, "rounds": 20},
                    churn=CHURN)  # fmt: skip
    _, learner, _ = built(data)
    draws = np.concatenate([t["independent"][t["online"]] for t in learner.trace]).ravel()
    std = 3.0 * 1.0 / 6
    assert draws.size > 1000
    variance = float(np.mean(draws**2))
    assert abs(variance / std**2 - 1.0) < 5 * np.sqrt(2.0 / draws.size)
    assert abs(draws.mean()) < 5 * std / np.sqrt(draws.size)
    offline = np.concatenate([t["independent"][~t["online"]] for t in learner.trace])
    assert offline.size and not offline.any()


def test_anti_pgd_noise_is_the_difference_of_the_identitys_draws() -> None:
    """The same seed draws the same z: a node's k-th anti-PGD noise is z_k − z_{k−1}, the
    identity's k-th noise minus its (k−1)-th; an explicit matrix equal to it is the same run."""
    noise: dict[str, Any] = {"kind": "correlated", "noise_multiplier": 1.0}
    _, identity, _ = built(scenario({"noise": {**noise, "matrix": "identity"}}, churn=CHURN))
    _, anti, tables = built(scenario({"noise": {**noise, "matrix": "anti_pgd"}}, churn=CHURN))
    assert anti.linear.temporal is not None and identity.linear.temporal is None
    for node in range(8):
        z = [t["independent"][node] for t in identity.trace if t["online"][node]]
        got = [t["independent"][node] for t in anti.trace if t["online"][node]]
        expected = [z[0]] + [z[k] - z[k - 1] for k in range(1, len(z))]
        np.testing.assert_allclose(np.array(got), np.array(expected), rtol=0, atol=1e-15)
    explicit = (np.eye(12) - np.eye(12, k=-1)).tolist()
    again = built(scenario({"noise": {**noise, "matrix": explicit}}, churn=CHURN), trace=False)[2]
    pd.testing.assert_frame_equal(tables["dsgd_rounds"], again["dsgd_rounds"])


# --- runs -------------------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_tables() -> None:
    noise = {"kind": "zip", "message_multiplier": 1.0, "noise_multiplier": 0.5}
    data = scenario({"noise": noise}, links={"loss": 0.1}, churn=CHURN)
    first = netsim.run(data).tables
    second = netsim.run(data).tables
    for name in ("dsgd_rounds", "dsgd_summary"):
        pd.testing.assert_frame_equal(first[name], second[name])
    other = netsim.run({**data, "seed": 6}).tables["dsgd_rounds"]
    assert not other["consensus"].equals(first["dsgd_rounds"]["consensus"])


def test_the_tables_evaluate_on_schedule_beside_their_yardsticks() -> None:
    result = netsim.run(scenario({"rounds": 10, "evaluate_every": 4}))
    rounds, summary = result.tables["dsgd_rounds"], result.tables["dsgd_summary"].iloc[0]
    evaluated = rounds.loc[rounds["accuracy"].notna(), "round"].tolist()
    assert evaluated == [4, 8, 10]
    assert rounds["loss"].notna().tolist() == rounds["accuracy"].notna().tolist()
    assert summary["rounds"] == 10 and summary["noise"] == "none"
    assert 0.5 < summary["majority_accuracy"] < summary["centralised_accuracy"] <= 1.0
    assert 0.0 <= summary["node_accuracy"] <= 1.0
    from netsim.algorithms.dsgd.learner import DecentralisedSGD

    (line,) = DecentralisedSGD.summary_lines(result.tables)
    assert line.startswith("dsgd (none noise, 10 rounds): test accuracy")


def test_without_a_network_privacy_section_no_pair_is_accounted() -> None:
    plain = netsim.run(scenario())
    assert "linear_pairs" not in plain.tables or not len(plain.tables["linear_pairs"])


DECOR = {"kind": "decor", "noise_multiplier": 1.0, "correlated_multiplier": 4.0}


@pytest.mark.parametrize("unit", ["record", "node"])
def test_the_pairs_under_pndp_are_the_linear_accountants(unit: str) -> None:
    """Each sampled observer's pairs are netsim.privacy.linear's view of the recorded run,
    written to linear_pairs and privacy_pairs, with hops and the summary's worst pair."""
    from netsim.privacy.linear import pndp_view, view_losses

    data = scenario({"noise": DECOR, "unit": unit},
                    privacy={"model": "network", "observers": 3, "delta": 1e-6})  # fmt: skip
    run, learner, tables = built(data, trace=False)
    pairs, units = tables["privacy_pairs"], tables["linear_pairs"]
    assert len(pairs) == len(units) and set(units["observer"]) == set(run["privacy"].observers)
    for observer in set(units["observer"]):
        expected = view_losses(learner.linear, pndp_view(learner.linear, [observer]), unit=unit)
        mine = units[units["observer"] == observer]
        np.testing.assert_allclose(mine["mu"] ** 2, expected.mu_squared, rtol=1e-12)
        assert (mine["node"] != observer).all()
    ring = np.minimum(
        np.abs(units["node"] - units["observer"]), 8 - np.abs(units["node"] - units["observer"])
    )
    assert (units["distance"] == ring).all()
    summary = tables["privacy_summary"].iloc[0]
    assert summary["view"] == "linear_pndp" and summary["delta"] == 1e-6
    central = tables["dsgd_summary"].iloc[0]["central_dp_accuracy"]
    assert 0.0 < central <= 1.0  # central DP at the worst pair's (ε, δ), beside the run
    assert summary["network_epsilon"] == pytest.approx(pairs["epsilon"].max())
    assert summary["local_epsilon"] >= summary["network_epsilon"]


def test_secldp_is_accounted_by_increments_with_decors_bound_beside_it() -> None:
    """Every node online, no loss: the eavesdropper's pairs equal DECOR's accountant's slope
    (exact on a static graph, where its max over nodes is every node's on a ring), and DECOR's
    ε (its RDP conversion) is above the exact Gaussian profile's."""
    data = scenario({"noise": DECOR, "unit": "node"},
                    privacy={"model": "network", "trust": "secldp"})  # fmt: skip
    _, _, tables = built(data, trace=False)
    audit = tables["bound_audit"]
    assert set(audit["bound"]) == {"decor_secldp"} and len(audit) == 8
    np.testing.assert_allclose(audit["exact_rho"], audit["bound_rho"], rtol=1e-9)
    assert not audit["below"].any()
    assert (audit["bound_epsilon"] > audit["exact_epsilon"]).all()
    assert tables["privacy_summary"].iloc[0]["view"] == "linear_secldp"


def test_under_churn_decors_static_bound_still_holds() -> None:
    """DECOR as written adds every topology neighbour's secret: an offline neighbour leaves
    it one-sided, extra noise on the online end. A round's covariance over the online nodes is
    then the static Σ's principal submatrix, whose inverse's diagonal is below Σ⁻¹'s, so the
    static accountant still covers every unit under churn, with slack (the exact loss is
    strictly below it for some unit)."""
    data = scenario({"noise": DECOR, "unit": "node", "rounds": 30},
                    privacy={"model": "network", "trust": "secldp"}, churn=CHURN,
                    duration="40s")  # fmt: skip
    _, _, tables = built(data, trace=False)
    audit = tables["bound_audit"]
    assert not audit["below"].any(), audit
    assert (audit["exact_rho"] < 0.9 * audit["bound_rho"]).any()


def test_local_dp_is_each_units_uses_composed() -> None:
    data = scenario({"noise": DECOR, "unit": "node"}, privacy={"model": "network", "trust": "ldp"})
    _, _, tables = built(data, trace=False)
    units = tables["linear_pairs"]
    assert len(units) == 8
    np.testing.assert_allclose(units["local_share"], 1.0, rtol=1e-12)


def test_pndp_with_local_noise_on_a_static_ring_is_audited_against_muffliato_sgd() -> None:
    data = scenario({"noise": {"kind": "local", "noise_multiplier": 2.0}, "unit": "node"},
                    privacy={"model": "network", "observers": 2})  # fmt: skip
    _, _, tables = built(data, trace=False)
    audit = tables["bound_audit"]
    assert set(audit["bound"]) == {"muffliato_sgd_corrected"} and len(audit) == 2 * 7
    assert (audit["bound_rho"] > 0).all()


def test_the_local_scenario_runs_without_shared_data() -> None:
    path = REPO / "scenarios" / "dsgd" / "local-synthetic.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["duration"], data["dsgd"]["rounds"] = "40s", 40
    result = netsim.run(validate_scenario(data, source=str(path), base_dir=path.parent))
    rounds = result.tables["dsgd_rounds"]
    assert len(rounds) == 40 and (rounds["online"] < 16).any()
    assert result.tables["dsgd_summary"]["average_accuracy"].iloc[0] > 0.7


@pytest.mark.skipif(not ADULT.is_file(), reason=f"UCI Adult is not at {ADULT} (../shared/data)")
def test_decor_on_adult_learns_beyond_the_majority_class() -> None:
    path = REPO / "scenarios" / "dsgd" / "decor-adult.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["duration"], data["dsgd"]["rounds"] = "300s", 300
    result = netsim.run(validate_scenario(data, source=str(path), base_dir=path.parent))
    summary = result.tables["dsgd_summary"].iloc[0]
    assert summary["average_accuracy"] > summary["majority_accuracy"] + 0.03
    assert (result.tables["dsgd_rounds"]["uncancelled"] <= 1e-12).all()


@pytest.mark.parametrize(
    ("noise", "trust"),
    [(DECOR, "pndp"), (DECOR, "secldp"), ({"kind": "local", "noise_multiplier": 1.0}, "ldp")],
)
def test_calibration_meets_the_target_on_a_run_that_goes_as_planned(noise, trust) -> None:
    """Every node online and every message delivered: the worst accounted pair of the run is
    the target ε, and the multipliers keep their ratio."""
    target = {"epsilon": 2.0, "delta": 1e-5}
    privacy = {"model": "network", "trust": trust, "delta": 1e-5}
    if trust == "pndp":
        privacy["observers"] = 3
    data = scenario({"noise": noise, "unit": "node", "calibrate": target}, privacy=privacy)
    _, _, tables = built(data, trace=False)
    assert tables["privacy_summary"].iloc[0]["network_epsilon"] == pytest.approx(2.0, rel=1e-6)
    summary = tables["dsgd_summary"].iloc[0]
    assert summary["noise_multiplier"] == pytest.approx(
        summary["calibration"] * noise["noise_multiplier"]
    )
    if noise["kind"] == "decor":
        assert summary["correlated_multiplier"] == pytest.approx(4.0 * summary["calibration"])


def test_calibration_needs_noise_to_scale() -> None:
    assert "give dsgd.noise a kind" in problem(
        scenario({"calibrate": {"epsilon": 1.0, "delta": 1e-5}})
    )


def test_exact_mode_without_transfer_times_is_rounds_mode() -> None:
    """Zero delay and no churn: every message arrives at once, so averaging at the deadline
    gives the rounds mode's tables."""
    rounds = netsim.run(scenario({"noise": DECOR}))
    exact = netsim.run(scenario({"noise": DECOR, **EXACT}))
    for name in ("dsgd_rounds", "dsgd_summary"):
        pd.testing.assert_frame_equal(rounds.tables[name], exact.tables[name])


def test_in_exact_mode_a_message_after_the_deadline_is_not_averaged() -> None:
    """Transfer times uniform in [0.1, 0.9] s and a 0.5 s deadline: about half the messages are
    late, so a link (both messages in time) is used about a quarter of the time; a late message
    is not lost (the transport delivered it) and its receiver saw it."""
    delay = {"dist": "uniform", "low": "0.1s", "high": "0.9s"}
    data = scenario({"noise": DECOR, **EXACT, "rounds": 30}, links={"delay": delay})
    _, learner, tables = built(data, trace=False)
    rounds = tables["dsgd_rounds"]
    links = len(learner.link_a) * len(rounds)
    assert rounds["lost"].sum() == 0
    share = rounds["links"].sum() / links
    assert (
        0.25 - 4 * math.sqrt(0.25 * 0.75 / links)
        < share
        < 0.25 + 4 * math.sqrt(0.25 * 0.75 / links)
    )
    assert all(r.delivered.all() for r in learner.linear.rounds)
    assert (rounds["time"] == np.arange(len(rounds)) * 1.0).all()


def test_a_deadline_needs_exact_mode_and_fits_in_a_period() -> None:
    assert "set dsgd.mode exact" in problem(scenario({"deadline": "0.5s"}))
    assert "must be at most dsgd.period" in problem(
        scenario({"mode": "exact", "deadline": "2s", "period": "1s"})
    )


def test_observers_are_refused_where_the_observer_sees_every_message() -> None:
    for trust in ("secldp", "ldp"):
        message = problem(scenario(privacy={"model": "network", "trust": trust, "observers": 2}))
        assert "privacy.observers chooses observers of what they receive" in message


def test_gossip_rounds_average_again_without_noise_and_are_accounted() -> None:
    """Three passes a round: the recorded run has three linear rounds per round, the step in
    the first only, and the calibrated target still holds for the run that goes as planned."""
    target = {"epsilon": 2.0, "delta": 1e-5}
    privacy = {"model": "network", "observers": 2, "delta": 1e-5}
    three = scenario({"noise": DECOR, "unit": "node", "calibrate": target, "gossip_rounds": 3},
                     privacy=privacy)  # fmt: skip
    _, learner, tables = built(three, trace=False)
    rounds = learner.linear.rounds
    assert len(rounds) == 3 * 12 and len(tables["dsgd_rounds"]) == 12
    assert all((r.step != 0).any() == (k % 3 == 0) for k, r in enumerate(rounds))
    assert tables["privacy_summary"].iloc[0]["network_epsilon"] == pytest.approx(2.0, rel=1e-6)
    assert tables["dsgd_rounds"]["links"].iloc[0] == 3 * 8  # a ring of 8, three passes
    assert "gossip_rounds > 1 runs in rounds mode" in problem(
        scenario({"gossip_rounds": 2, **EXACT})
    )


def test_the_summary_scores_the_final_models_on_the_validation_split() -> None:
    """With dsgd.dataset.validation_fraction the summary's validation columns are the final
    models' accuracy on the validation rows, computed here from the learner's own models."""
    data = scenario({"dataset": {"name": "breast_cancer", "validation_fraction": 0.2}})
    _run, learner, frames = built(data, trace=False)
    row = frames["dsgd_summary"].iloc[0]
    x, y = learner.data.x_validation, learner.data.y_validation
    assert len(y) == round(0.2 * 569)
    own = np.mean([learner.model.accuracy(theta, x, y) for theta in learner.theta])
    assert row["node_validation_accuracy"] == pytest.approx(own, abs=1e-12)
    assert row["average_validation_accuracy"] == learner.model.accuracy(
        learner.theta.mean(axis=0), x, y
    )
    _run, _learner, plain = built(scenario(), trace=False)
    assert math.isnan(plain["dsgd_summary"].iloc[0]["average_validation_accuracy"])
