"""The unlimited policy's cheap charge: ``PrivacyAccountant.charge_free`` (one use of a record
for a release that spends nothing) and ``PrivacyLedger.keep_one`` (consecutive single charges
of one event gathered into one chunk whose times are an array) keep exactly the ledger, the
per-record table and the report the ordinary ``charge`` of the same event keeps — held,
streamed, not kept, interleaved with other charges — and refuse what ``charge`` refuses."""

from __future__ import annotations

import math

import numpy as np
import pandas.testing as pd_testing
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from netsim.errors import BudgetExhausted, PrivacyError
from netsim.log import EventLog
from netsim.privacy.accountant import LEDGER_TABLE, KUses, PrivacyAccountant, Unlimited
from netsim.privacy.events import PrivacyEvent
from netsim.privacy.mechanisms import no_noise

RECORDS = 6
#: The unlimited policy's release, and a second one (another object: the ledger starts a new
#: chunk when the event changes).
FREE = no_noise(np.zeros(3))[1]
OTHER_FREE = no_noise(np.zeros(5))[1]
#: A release that spends ε (accepted by ``charge`` under the unlimited policy).
SPENDING = PrivacyEvent("laplace", "epsilon-DP", 0.5, 0.0, 1.0, "L1", 2.0, 1)

times = st.one_of(
    st.none(),  # the default time, NaN
    st.floats(0.0, 1e6, allow_nan=False),
    st.integers(0, 10**6),
    st.integers(0, 10**6).map(np.int64),  # a numpy scalar, as a simulator's clock may give
)
#: (kind, record or records, time): "free" and "free2" are charge_free on one side and
#: charge on the other; the rest are the same ordinary charge on both sides.
operations = st.lists(
    st.tuples(
        st.sampled_from(["free", "free", "free", "free2", "charge", "spend", "batch"]),
        st.lists(st.integers(0, RECORDS - 1), min_size=1, max_size=4),
        times,
    ),
    max_size=40,
)


def accountant(accounting: str = "basic") -> PrivacyAccountant:
    return PrivacyAccountant(RECORDS, epsilon=1.0, policy=Unlimited(), accounting=accounting)


def apply(target: PrivacyAccountant, ops, *, free: bool) -> None:
    """Make the charges of ``ops`` (``free``: the free ones through ``charge_free``)."""
    for kind, records, time in ops:
        when = {} if time is None else {"time": time}
        if kind in ("free", "free2"):
            event = FREE if kind == "free" else OTHER_FREE
            charge = target.charge_free if free else target.charge
            charge(records[0], event, **when)
        elif kind == "charge":
            target.charge(records[0], FREE, **when)
        elif kind == "spend":
            target.charge(records[0], SPENDING, **when)
        else:
            target.charge_batch(np.array(records), FREE, **when)


def assert_same_accountants(free: PrivacyAccountant, ordinary: PrivacyAccountant) -> None:
    pd_testing.assert_frame_equal(free.ledger_frame(), ordinary.ledger_frame())
    pd_testing.assert_frame_equal(free.records_frame(), ordinary.records_frame())
    assert free.report() == ordinary.report()
    for record in range(RECORDS):
        assert free.next_epsilon(record) == ordinary.next_epsilon(record)
        assert free.record_guarantee(record) == ordinary.record_guarantee(record)


@settings(max_examples=150)
@given(ops=operations, accounting=st.sampled_from(["basic", "rdp"]))
@example(ops=[("free", [1], 1.0), ("free", [2], None), ("charge", [1], 2.0), ("free", [1], 3)],
         accounting="basic")  # fmt: skip
def test_free_charges_keep_the_ledger_an_ordinary_charge_keeps(ops, accounting):
    free, ordinary = accountant(accounting), accountant(accounting)
    for _ in range(2):  # reading the ledger seals the gathered charges; then charging on
        apply(free, ops, free=True)
        apply(ordinary, ops, free=False)
        for record in range(RECORDS):  # read before the frames (which seal what is gathered)
            assert free.record_events(record) == ordinary.record_events(record)
        assert_same_accountants(free, ordinary)
        assert free.ledger.rows == ordinary.ledger.rows == len(free.ledger_frame())


@settings(max_examples=100)
@given(ops=operations, every_rows=st.integers(1, 9), streamed_after=st.integers(0, 40))
def test_a_streamed_ledger_of_free_charges_writes_the_ordinary_rows(
    ops, every_rows, streamed_after
):
    """Streamed every few rows (from the start, or after some charges were held), the run's
    ``privacy_ledger`` table holds the rows of an unstreamed ledger of ordinary charges, and
    never more than a flush's worth plus one batch is held in memory."""
    plain = accountant()
    apply(plain, ops, free=False)
    tables = []
    for free in (True, False):
        streamed, log = accountant(), EventLog()
        apply(streamed, ops[:streamed_after], free=free)
        streamed.stream_ledger(log.table(LEDGER_TABLE), every_rows=every_rows)
        held = []
        for op in ops[streamed_after:]:
            apply(streamed, [op], free=free)
            held.append(streamed.ledger.rows)
        streamed.write_tables(log)
        assert max(held, default=0) < every_rows + 4
        tables.append(log.to_frames())
    for frames in tables:
        pd_testing.assert_frame_equal(frames["privacy_ledger"], plain.ledger_frame())
        pd_testing.assert_frame_equal(frames["privacy_records"], plain.records_frame())


@settings(max_examples=40)
@given(ops=operations)
def test_free_charges_without_a_ledger_still_count_the_uses(ops):
    free, ordinary = accountant(), accountant()
    for target in (free, ordinary):
        target.stream_ledger(None)
    apply(free, ops, free=True)
    apply(ordinary, ops, free=False)
    pd_testing.assert_frame_equal(free.records_frame(), ordinary.records_frame())
    assert free.report() == ordinary.report()
    assert free.ledger.rows == ordinary.ledger.rows == 0
    assert len(free.ledger_frame()) == 0
    with pytest.raises(PrivacyError, match="streamed"):
        free.record_events(0)


def test_free_charges_past_any_budget_are_taken_as_charge_takes_them():
    """The unlimited policy allows any number of uses (ε 0 each, nothing to refuse): a record
    charged 1,000 times past its budget ε = 1, δ = 0 by either path has 1,000 uses, none
    refused, and its next use is still allowed at ε 0."""
    free, ordinary = accountant(), accountant()
    for use in range(1000):
        free.charge_free(0, FREE, time=float(use))
        ordinary.charge(0, FREE, time=float(use))
    assert_same_accountants(free, ordinary)
    assert free.uses[0] == 1000 and free.refused.sum() == 0 and free.next_epsilon(0) == 0.0
    assert free.ledger_frame()["use"].tolist() == list(range(1, 1001))
    assert free.report()["differentially_private"] is False


def test_charge_free_refuses_what_charge_refuses_and_changes_nothing():
    """A private policy refuses the non-private release either way; a record outside the
    accountant is refused either way; and a release that spends something is not free (the
    ordinary charge takes it under the unlimited policy, charge_free refuses it). Refused:
    no use, no ledger row."""
    private_free = PrivacyAccountant(RECORDS, epsilon=1.0, policy=KUses(2))
    private_ordinary = PrivacyAccountant(RECORDS, epsilon=1.0, policy=KUses(2))
    with pytest.raises(PrivacyError):
        private_ordinary.charge(0, FREE, time=1.0)
    with pytest.raises(PrivacyError):
        private_free.charge_free(0, FREE, time=1.0)
    assert_same_accountants(private_free, private_ordinary)
    free, ordinary = accountant(), accountant()
    for record in (-1, RECORDS):
        with pytest.raises(ValueError, match="outside"):
            ordinary.charge(record, FREE)
        with pytest.raises(ValueError, match="outside"):
            free.charge_free(record, FREE)
    assert_same_accountants(free, ordinary)
    for spends in (SPENDING, PrivacyEvent("none", "non-private", 0.0, 1e-9, 0.0, "L2", 0.0, 3)):
        with pytest.raises(PrivacyError, match="spends nothing"):
            free.charge_free(0, spends)
    assert free.uses.sum() == 0 and len(free.ledger_frame()) == 0


def test_a_charge_at_a_numpy_time_is_written_at_that_time():
    """Times given as numpy scalars (an int64 clock, a float32) are written as the floats
    they are, whether the ledger holds only ordinary charges or gathered free ones too."""
    given_times = [np.int64(3), np.float32(0.5), 2, 2.5, math.nan]
    for free in (False, True):
        target = accountant()
        for record, time in enumerate(given_times):
            target.charge(record, FREE, time=time)
            if free:
                target.charge_free(record, FREE, time=time)
        frame = target.ledger_frame()
        expected = [float(t) for t in given_times for _ in range(1 + free)]
        np.testing.assert_array_equal(frame["time"].to_numpy(), np.array(expected))


@settings(max_examples=40, deadline=None)
@given(uses=st.integers(1, 3), visits=st.lists(st.integers(0, RECORDS - 1), max_size=25))
def test_refuse_spent_refuses_exactly_what_release_refuses_before_drawing(uses, visits) -> None:
    """DP-SGD-k's visits after a record's k-th use are refused up front (no gradient computed):
    the same refusals, counts and reason as :meth:`release` gives, and no draw."""
    fast, slow = (
        PrivacyAccountant(RECORDS, epsilon=1.0, policy=KUses(uses)) for _ in range(2)
    )
    fast_rng, slow_rng = np.random.default_rng(3), np.random.default_rng(3)
    for record in visits:
        value = np.ones(3)
        try:
            slow.release(record, value, mechanism="laplace", sensitivity=1.0, rng=slow_rng)
            slow_refused = False
        except BudgetExhausted as refusal:
            slow_refused, reason = True, refusal.message
        fast_refused = fast.refuse_spent(record)
        assert fast_refused == slow_refused
        if fast_refused:
            assert fast.last_refusal == reason == slow.last_refusal
        else:
            fast.release(record, value, mechanism="laplace", sensitivity=1.0, rng=fast_rng)
    np.testing.assert_array_equal(fast.refused, slow.refused)
    np.testing.assert_array_equal(fast.uses, slow.uses)
    assert fast_rng.random() == slow_rng.random()  # no draw for a refused visit
