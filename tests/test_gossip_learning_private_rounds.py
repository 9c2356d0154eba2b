"""Private gossip learning in rounds mode under RDP/PLD (Hegedűs, Berta, Jelasity 2016 Alg. 1
with Gaussian noise composed per record, Mironov 2017): the round's batched charges are the
releases of exact mode one after the other, its noise is the noise the ledger charges, what it
cannot run is refused when the run is built, and its accuracy curve is exact mode's (what
rounds mode approximates is listed in netsim/protocols/rounds.py)."""

from __future__ import annotations

import numpy as np
import pandas.testing as pd_testing
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.algorithms.gossip_learning.rounds import arrival_ranks
from netsim.errors import BudgetExhausted
from netsim.privacy.accountant import PrivacyAccountant, policy_by_name
from netsim.privacy.mechanisms import build_mechanism
from netsim.registry import REGISTRY

RECORDS = 6


def gaussian(**settings: object):
    """The registered ``gaussian`` mechanism with ``settings`` as a scenario gives them."""
    _, config = REGISTRY.lookup(("mechanism",), "gaussian")
    return build_mechanism(config(kind="gaussian", **settings))


# --- the batched charge is the releases one after the other ---------------------------------


@settings(max_examples=60, deadline=None)
@given(
    rounds=st.lists(
        st.lists(st.integers(0, RECORDS - 1), min_size=1, max_size=14), min_size=1, max_size=5
    ),
    accounting=st.sampled_from(["rdp", "pld"]),
    # (policy, fixed noise multiplier): the composed budget binds, the k of DP-SGD-k binds
    # (calibrated, or a multiplier with room for more than k uses)
    policy=st.sampled_from([("dp-sgd", 1.3), ("dp-sgd-3", None), ("dp-sgd-2", 6.0)]),
    epsilon=st.sampled_from([1.0, 2.5, 6.0]),
)
def test_a_rounds_charges_are_exact_modes_releases_one_after_the_other(
    rounds: list[list[int]], accounting: str, policy: tuple[str, float | None], epsilon: float
) -> None:
    """Each round's arrivals (records, repeated when a node receives several models) charged
    at once by ``charge_at_multiplier`` leave every table of the accountant as releasing them
    one after the other does (``_release_at_multiplier``, exact mode's path): the ledger row
    for row, the records' uses, composed ε and refusals, the last refusal's reason."""
    name, fixed = policy
    mechanism = gaussian() if fixed is None else gaussian(noise_multiplier=fixed)
    budget = {"epsilon": epsilon, "delta": 1e-5, "accounting": accounting}
    one_by_one = PrivacyAccountant(RECORDS, policy=policy_by_name(name), **budget)
    at_once = PrivacyAccountant(RECORDS, policy=policy_by_name(name), **budget)
    rng = np.random.default_rng(0)
    multiplier = at_once.noise_multiplier_for(mechanism)
    assert multiplier is not None
    _, event = mechanism.release_at_multiplier(
        np.zeros(3), sensitivity=2.0, noise_multiplier=multiplier, delta=1e-5, rng=rng
    )
    counts = np.zeros(RECORDS, dtype=np.int64)
    for time, batch in enumerate(rounds):
        for record in batch:
            try:
                one_by_one.release(
                    record, np.zeros(3), mechanism=mechanism, sensitivity=2.0, rng=rng,
                    time=float(time),
                )  # fmt: skip
            except BudgetExhausted:
                pass
        records = np.array(batch, dtype=np.int64)
        ranks, _ = arrival_ranks(records, counts)
        admitted = at_once.charge_at_multiplier(records, ranks, event, time=float(time))
        for record in set(batch):  # once refused, a record is refused for the whole round
            assert (np.diff(admitted[records == record].astype(int)) <= 0).all()
    pd_testing.assert_frame_equal(at_once.ledger_frame(), one_by_one.ledger_frame())
    pd_testing.assert_frame_equal(at_once.records_frame(), one_by_one.records_frame())
    assert at_once.last_refusal == one_by_one.last_refusal
    assert at_once.composition == one_by_one.composition
