"""Private learning end to end: DP-SGD with clipping and Gaussian noise composed by RDP or PLD
as the budget's ceiling, shards of records per node (example- or user-level privacy), and the
central-DP yardstick beside every private result."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest

import netsim
from netsim.errors import ScenarioError
from netsim.privacy.composition import calibrated_noise_multiplier, composed_epsilon_from_ledger

#: A short ideal walk on Spambase: 300 nodes, one record each, 3 passes.
WALK = {
    "name": "private-walk",
    "seed": 3,
    "nodes": 300,
    "duration": "900s",
    "topology": {"kind": "ring", "k": 2},
    "walk": {"kind": "ideal", "sampling": "without_replacement", "step_time": "1s",
             "agent": {"kind": "sgd"}},
    "learning": {"dataset": {"name": "spambase"}, "algorithm": "dp-sgd-5", "noise": "gaussian",
                 "epsilon": 1.0, "delta": 1e-5, "accounting": "rdp", "evaluate_every": 300},
    "metrics": {"sample_every": "10min"},
}  # fmt: skip


def walk(**learning: object) -> dict:
    return {**WALK, "learning": {**WALK["learning"], **learning}}


@pytest.mark.parametrize("accounting", ["rdp", "pld"])
def test_dp_sgd_k_spends_at_most_the_budget_as_dp_accounting_composes_the_ledger(accounting):
    result = netsim.run({**walk(accounting=accounting), "duration": "1800s"})  # 6 passes
    records = result["privacy_records"].set_index("record")
    assert (records["uses"] == 5).all()  # DP-SGD-5: the sixth pass is refused
    rebuilt = composed_epsilon_from_ledger(result["privacy_ledger"], 1e-5, accounting)
    np.testing.assert_allclose(records["epsilon_spent"], rebuilt.loc[records.index], rtol=1e-9)
    # the noise was calibrated so that the five uses compose to the budget, not a fifth each
    assert records["epsilon_spent"].max() <= 1.0 + 1e-9
    assert records["epsilon_spent"].min() > 1.0 - 1e-6
    summary = result["learning_summary"].iloc[0]
    assert summary["composition"] == accounting and summary["epsilon"] <= 1.0 + 1e-9
    z = calibrated_noise_multiplier(5, 1.0, 1e-5, accounting)
    ledger = result["privacy_ledger"]
    np.testing.assert_allclose(ledger["noise_scale"] / ledger["sensitivity"], z, rtol=1e-12)


def test_basic_composition_of_the_same_gaussian_pays_for_every_use():
    rdp = netsim.run(walk())["privacy_ledger"]
    basic = netsim.run(walk(accounting="basic"))["privacy_ledger"]
    # basic gives each use (ε/5, δ/5): far more noise than five uses composed by RDP
    assert (basic["noise_scale"] / rdp["noise_scale"]).min() > 1.5


def test_dp_sgd_with_a_fixed_noise_multiplier_uses_a_record_while_rdp_allows():
    z = 15.0
    result = netsim.run(
        {**walk(algorithm="dp-sgd", noise={"kind": "gaussian", "noise_multiplier": z}),
         "duration": "6000s"}
    )  # fmt: skip
    allowed = 0
    while True:  # the most uses of σ/Δ = z that dp-accounting composes within (1, 1e-5)
        accountant = dp_accounting.rdp.RdpAccountant()
        accountant.compose(dp_accounting.GaussianDpEvent(z), allowed + 1)
        if accountant.get_epsilon(1e-5) > 1.0:
            break
        allowed += 1
    assert allowed > 5
    assert (result["privacy_records"]["uses"] == allowed).all()


@pytest.mark.parametrize(
    ("learning", "key"),
    [
        ({"algorithm": "dp-sgd", "accounting": "basic"}, "accounting rdp or pld"),
        ({"algorithm": "dp-sgd"}, "fixed noise multiplier"),
        ({"records_per_node": 2, "batch": 3}, "learning.batch 3 is more than"),
    ],
)
def test_private_learning_settings_that_cannot_run_are_one_message(learning, key):
    with pytest.raises(ScenarioError, match=key):
        netsim.run(walk(**learning))


@pytest.mark.parametrize("unit", ["record", "node"])
def test_a_mini_batch_of_a_nodes_shard_is_charged_to_its_privacy_unit(unit):
    result = netsim.run(
        {**walk(records_per_node=4, batch=2, privacy_unit=unit, clip=0.5, accounting="basic",
                algorithm="dp-sgd-2"),
         "nodes": 50, "duration": "201s"}  # visits at 1 s … 200 s
    )  # fmt: skip
    ledger, records = result["privacy_ledger"], result["privacy_records"]
    summary = result["learning_summary"].iloc[0]
    assert summary["privacy_unit"] == unit
    if unit == "record":
        # 200 visits of 2 records: every record of the 200 used twice, each charged with the
        # mean's sensitivity 2C/b
        assert len(records) == 200 and (records["uses"] == 2).all()
        assert len(ledger) == 2 * 200 and np.allclose(ledger["sensitivity"], 2 * 0.5 / 2)
    else:
        # user-level: a node's whole shard may differ, so one gradient's 2C per release
        assert len(records) == 50 and (records["uses"] == 2).all()
        assert np.allclose(ledger["sensitivity"], 2 * 0.5)
    visits = result["sgd_visits"]
    assert visits["updated"].sum() == summary["updates"]


def test_every_private_summary_has_the_central_dp_yardstick_and_a_plain_run_has_none():
    private = netsim.run(walk())["learning_summary"].iloc[0]
    plain = netsim.run(walk(algorithm="sgd"))["learning_summary"].iloc[0]
    assert private["majority_accuracy"] < private["central_dp_accuracy"]
    assert private["central_dp_accuracy"] <= private["centralised_accuracy"] + 0.02
    assert math.isnan(plain["central_dp_accuracy"])
    from netsim.learning.sgd_agent import SGDAgent

    lines = SGDAgent.summary_lines({"learning_summary": netsim.run(walk())["learning_summary"]})
    assert "(rdp composition)" in lines[0]
    assert "central DP at the same (ε, δ)" in lines[-1]
