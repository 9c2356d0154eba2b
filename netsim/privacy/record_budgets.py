"""Per-record budgets and ledgers: the checks and charges of releases (made by the
accountant, :mod:`netsim.privacy.accountant`, or elsewhere), the composition of a record's
charges (basic, advanced, or RDP/PLD for Gaussian releases: :mod:`netsim.privacy.tight`),
the guarantees they compose to and the run's tables. A record's budget is split over its
uses by its :mod:`~netsim.privacy.budgets` policy; an :class:`~netsim.privacy.budgets.
Admission` may admit uses in place of its own budget (:meth:`RecordBudgets.admit_by`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from netsim.errors import BudgetExhausted, PrivacyError
from netsim.lazy import lazy_module
from netsim.log import EventLog, EventTable
from netsim.privacy.budgets import Admission, BudgetPolicy, UntilSpent, accounting_problem
from netsim.privacy.composition import TIGHT_ACCOUNTINGS, Accounting, check_accounting
from netsim.privacy.events import PrivacyEvent
from netsim.privacy.ledger import RECORDS_TABLE, LedgerChunk, PrivacyLedger
from netsim.privacy.tight import PendingCharge, TightComposition

if TYPE_CHECKING:
    import dp_accounting
    import dp_accounting.pld as pld
    import dp_accounting.rdp as rdp
    import pandas as pd
else:
    dp_accounting = lazy_module("dp_accounting")
    pd = lazy_module("pandas")
    pld = lazy_module("dp_accounting.pld")
    rdp = lazy_module("dp_accounting.rdp")

# --- composition ---------------------------------------------------------------------------


def advanced_composition(
    epsilons: list[float], deltas: list[float], delta_slack: float
) -> tuple[float, float]:
    """Heterogeneous advanced composition (Dwork, Rothblum, Vadhan 2010; Kairouz et al. 2015):
    k releases (ε_i, δ_i) compose to (√(2 ln(1/δ') Σε_i²) + Σ ε_i (e^{ε_i} − 1), δ' + Σδ_i).
    The basic sum is never worse when it is smaller, so the minimum of the two is returned.
    """
    if not 0 < delta_slack < 1:
        raise ValueError(f"delta_slack must be in (0, 1), got {delta_slack}")
    eps = np.asarray(epsilons, dtype=float)
    basic = float(eps.sum())
    advanced = math.sqrt(2.0 * math.log(1.0 / delta_slack) * float((eps**2).sum())) + float(
        (eps * np.expm1(eps)).sum()
    )
    if basic <= advanced:
        return basic, float(np.sum(deltas))
    return advanced, delta_slack + float(np.sum(deltas))


@dataclass(frozen=True)
class PrivacySpent:
    """The (ε, δ) a run or record has spent so far; ``is_dp`` is False if any release had no DP
    guarantee (the per-release claim is :data:`netsim.privacy.events.Guarantee`)."""

    epsilon: float
    delta: float
    is_dp: bool


class RecordBudgets:
    """Budgets and ledgers of ``records`` disjoint records, each with budget (ε, δ): the
    checks and charges of releases made elsewhere, and the run's tables.
    :class:`PrivacyAccountant` adds the releases that draw their noise here and the guarantees
    the charges compose to.

    ``accounting`` chooses how a record's releases compose against its budget (see
    :class:`PrivacyAccountant`); under rdp/pld the composition state of each record is a
    :class:`~netsim.privacy.tight.TightComposition`, the charges are a
    :class:`~netsim.privacy.ledger.PrivacyLedger`.
    """

    def __init__(
        self,
        records: int,
        *,
        epsilon: float,
        delta: float = 0.0,
        policy: BudgetPolicy,
        accounting: Accounting = "basic",
        tolerance: float = 1e-9,
    ) -> None:
        if records < 1:
            raise ValueError(f"an accountant needs at least one record, got {records}")
        if policy.private and not (epsilon > 0 and math.isfinite(epsilon)):
            raise ValueError(f"the budget epsilon must be positive and finite, got {epsilon}")
        if not 0 <= delta < 1:
            raise ValueError(f"the budget delta must be in [0, 1), got {delta}")
        check_accounting(accounting)
        if isinstance(policy, UntilSpent) and accounting == "basic":
            raise PrivacyError(accounting_problem("gaussian", "dp-sgd", "basic"))
        self.records = records
        self.epsilon = epsilon
        self.delta = delta
        self.policy = policy
        # relative: k uses of ε/k sum to ε only up to rounding, which grows with ε (an
        # absolute 1e-12 let DP-SGD-k make only k − 1 uses for ε ≥ 1e5)
        self.tolerance = tolerance
        self.epsilon_limit = epsilon * (1.0 + tolerance)
        self.delta_limit = delta * (1.0 + tolerance)
        self.uses = np.zeros(records, dtype=np.int64)
        self.epsilon_spent = np.zeros(records)
        self.delta_spent = np.zeros(records)
        self.refused = np.zeros(records, dtype=np.int64)
        #: Why the last refused release was refused (None: none was).
        self.last_refusal: str | None = None
        self.mutual_information_spent = np.zeros(records)
        self.not_dp = np.zeros(records, dtype=bool)
        #: Every charge, in order (held in chunks, or streamed: :meth:`stream_ledger`).
        self.ledger = PrivacyLedger()
        self.accounting: str = accounting
        #: Whether Gaussian releases are composed by RDP/PLD (a private policy under them).
        self.tight = bool(policy.private and accounting in TIGHT_ACCOUNTINGS)
        #: Who admits a record's next Gaussian release at a fixed multiplier in place of its own
        #: composed budget (None: the budget; set by :meth:`admit_by`).
        self.admission: Admission | None = None
        #: Per record, its uses when a Gaussian release at ``_over_multiplier`` last passed its
        #: composed budget (−1: never): until they change it would again (charge_at_multiplier).
        self._over_at = np.full(records, -1, dtype=np.int64)
        self._over_multiplier = math.nan
        self._composition: TightComposition | None = None
        if self.tight:
            self._composition = TightComposition(
                records, accounting=accounting, epsilon=epsilon, delta=delta,
                epsilon_limit=self.epsilon_limit, delta_limit=self.delta_limit,
            )  # fmt: skip

    def admit_by(self, admission: Admission) -> None:
        """Let ``admission`` admit each record's next Gaussian release at a fixed noise
        multiplier in place of the record's own composed budget (the declared hook of
        :class:`~netsim.privacy.budgets.Admission`: the network budget's per-observer
        ceiling, :class:`~netsim.privacy.ceiling.LineageCeiling`). A refused use raises
        :class:`BudgetExhausted` with ``admission.refusal``; the record's composed spend is
        still kept, as its local-DP figure."""
        self.admission = admission

    @property
    def _composed(self) -> TightComposition:
        """The RDP/PLD state (only under tight accounting)."""
        assert self._composition is not None, "only under rdp/pld accounting"
        return self._composition

    @property
    def tight_mechanisms(self) -> set[str]:
        """Names of the mechanisms whose releases were composed by RDP/PLD."""
        return self._composition.tight_mechanisms if self._composition is not None else set()

    @property
    def basic_mechanisms(self) -> dict[str, str]:
        """Names of the mechanisms whose releases kept basic composition under rdp/pld, with
        the reason."""
        return self._composition.basic_mechanisms if self._composition is not None else {}

    def stream_ledger(self, table: EventTable | None, *, every_rows: int = 20_000) -> None:
        """Bound the ledger's memory for long runs.

        With ``table`` (the run's ``privacy_ledger``) the charges are appended to it every
        ``every_rows`` charged rows and dropped here, so memory stays flat in simulated time
        (an event table writes its rows to Parquet in chunks). A charge of one record held
        here costs about 870 bytes, so 20,000 rows are some 17 MB. With None no per-charge ledger
        is kept at all; the per-record totals (``privacy_records``) and every budget check
        are unchanged. Either way :meth:`record_events` and the methods built on it are no
        longer available: read the ledger table instead.
        """
        self.ledger.stream(table, every_rows)

    # --- charging --------------------------------------------------------------------------

    def _check_record(self, record: int) -> None:
        if not 0 <= record < self.records:
            raise ValueError(f"record {record} outside [0, {self.records - 1}]")

    def next_epsilon(self, record: int) -> float | None:
        """What the policy lets the next use of ``record`` spend (``None``: no more uses)."""
        self._check_record(record)
        eps = self.policy.epsilon_for_use(self.epsilon, int(self.uses[record]) + 1)
        if eps is None or (self.policy.private and eps <= 0):
            return None
        if self.epsilon_spent[record] + eps > self.epsilon_limit:
            return None
        return eps

    def _check_private(self, record: int, event: PrivacyEvent) -> None:
        """Refuse a non-private release of ``record`` under a private policy."""
        if self.policy.private and event.guarantee == "non-private":
            raise PrivacyError(f"record {record}: a non-private release under a private policy")

    def check(self, record: int, event: PrivacyEvent) -> None:
        """Raise :class:`BudgetExhausted` if charging ``event`` would exceed the budget."""
        self._check_record(record)
        self._check_private(record, event)
        if self.tight:
            pending = self._composed.evaluate(np.array([record]), np.ones(1, np.int64), event)
            self._composed.raise_if_over(pending)
            return
        eps_after = self.epsilon_spent[record] + event.epsilon
        delta_after = self.delta_spent[record] + event.delta
        if self.policy.private and not eps_after <= self.epsilon_limit:  # NaN is over
            raise BudgetExhausted(
                record,
                f"ε {event.epsilon:g} would bring it to {eps_after:g} > budget {self.epsilon:g}",
            )
        if not delta_after <= self.delta_limit:
            raise BudgetExhausted(
                record,
                f"δ {event.delta:g} would bring it to {delta_after:g} > budget {self.delta:g}",
            )

    def charge(self, record: int, event: PrivacyEvent, *, time: float = math.nan) -> None:
        """Record one release of ``record`` (validated first; state changes only if it fits)."""
        if self.tight:
            self._check_record(record)
            self._check_private(record, event)
            pending = self._composed.evaluate(np.array([record]), np.ones(1, np.int64), event)
            self._composed.raise_if_over(pending)
            self._commit(pending, event)
            self.ledger.keep(LedgerChunk(time, pending.records, self.uses[pending.records], event))
            return
        self.check(record, event)
        self.uses[record] += 1
        self.epsilon_spent[record] += event.epsilon
        self.delta_spent[record] += event.delta
        self.mutual_information_spent[record] += event.mutual_information
        self.not_dp[record] |= event.guarantee in ("none", "mutual-information")
        self.ledger.keep(
            LedgerChunk(
                time,
                np.array([record], dtype=np.int64),
                np.array([self.uses[record]], dtype=np.int64),
                event,
            )
        )

    def charge_free(self, record: int, event: PrivacyEvent, *, time: float = math.nan) -> None:
        """:meth:`charge` of a release that spends nothing under a non-private policy (the
        unlimited policy's ``no_noise`` event: ε = δ = 0, no mutual information): one more
        use of ``record`` and its ledger row, without the checks that cannot fail then. A
        caller charging the same event object again and again lets the ledger gather the
        rows (:meth:`~netsim.privacy.ledger.PrivacyLedger.keep_one`)."""
        spends = event.epsilon or event.delta or event.mutual_information
        if self.policy.private or event.guarantee != "non-private" or spends:
            raise PrivacyError(
                f"record {record}: charge_free needs a non-private policy and a release that "
                "spends nothing"
            )
        self._check_record(record)
        use = int(self.uses[record]) + 1
        self.uses[record] = use
        self.ledger.keep_one(time, record, use, event)

    def charge_batch(
        self,
        records: np.ndarray,
        event: PrivacyEvent,
        *,
        time: float = math.nan,
        ranks: np.ndarray | None = None,
    ) -> None:
        """Record one release ``event`` for each entry of ``records`` (a record listed twice is
        charged twice, as two uses). All or nothing: if any record would exceed its budget,
        :class:`BudgetExhausted` names the first such record and no state changes.
        ``ranks``, when the caller has them: each entry's number among the equal entries
        before it (spares a sort)."""
        records = np.asarray(records, dtype=np.int64).reshape(-1)
        if records.size == 0:
            return
        if records.min() < 0 or records.max() >= self.records:
            raise ValueError(f"records outside [0, {self.records - 1}]")
        if self.policy.private and event.guarantee == "non-private":
            raise PrivacyError("a non-private release under a private policy")
        if 4 * records.size >= self.records:  # dense: counting beats sorting
            every = np.bincount(records, minlength=self.records)
            unique = np.flatnonzero(every)
            counts = every[unique]
        else:
            unique, counts = np.unique(records, return_counts=True)
        if self.tight:
            pending = self._composed.evaluate(unique, counts, event)
            self._composed.raise_if_over(pending)
            use_numbers = self._use_numbers(records, unique, counts)
            self._commit(pending, event)
            self.ledger.keep(LedgerChunk(time, records.copy(), use_numbers, event))
            return
        self._charge_batch_basic(records, unique, counts, event, time, ranks)

    def _charge_batch_basic(
        self,
        records: np.ndarray,
        unique: np.ndarray,
        counts: np.ndarray,
        event: PrivacyEvent,
        time: float,
        ranks: np.ndarray | None = None,
    ) -> None:
        """:meth:`charge_batch` under basic composition: ``counts[k]`` releases of ``event``
        for record ``unique[k]``, the sums checked against the budget first."""
        eps_after = self.epsilon_spent[unique] + counts * event.epsilon
        delta_after = self.delta_spent[unique] + counts * event.delta
        over = ~(delta_after <= self.delta_limit)  # NaN is over
        if self.policy.private:
            over |= ~(eps_after <= self.epsilon_limit)
        if over.any():
            bad = int(np.argmax(over))
            raise BudgetExhausted(
                int(unique[bad]),
                f"{int(counts[bad])} release(s) of ε {event.epsilon:g}, δ {event.delta:g} "
                f"would exceed the budget ({self.epsilon:g}, {self.delta:g})",
            )
        if ranks is None:
            use_numbers = self._use_numbers(records, unique, counts)
        else:
            use_numbers = self.uses[records] + 1 + ranks
        self.uses[unique] += counts
        self.epsilon_spent[unique] = eps_after
        self.delta_spent[unique] = delta_after
        self.mutual_information_spent[unique] += counts * event.mutual_information
        if event.guarantee in ("none", "mutual-information"):
            self.not_dp[unique] = True
        self.ledger.keep(LedgerChunk(time, records.copy(), use_numbers, event))

    def _use_numbers(
        self, records: np.ndarray, unique: np.ndarray, counts: np.ndarray
    ) -> np.ndarray:
        """The use number of each entry of a batch: the record's uses before the batch plus
        its occurrence number within it."""
        if counts.max() == 1:
            return self.uses[records] + 1
        order = np.argsort(records, kind="stable")
        group_start = np.repeat(np.cumsum(counts) - counts, counts)
        occurrence = np.empty(records.size, dtype=np.int64)
        occurrence[order] = np.arange(records.size) - group_start
        return self.uses[records] + 1 + occurrence

    def _commit(self, pending: PendingCharge, event: PrivacyEvent) -> None:
        """Apply a validated ``pending`` charge of ``event`` under rdp/pld accounting."""
        records, counts = pending.records, pending.counts
        self.uses[records] += counts
        self.epsilon_spent[records] = pending.epsilon
        self.delta_spent[records] = pending.delta
        self._composed.commit(pending, event)
        self.mutual_information_spent[records] += counts * event.mutual_information
        if event.guarantee in ("none", "mutual-information"):
            self.not_dp[records] = True

    def count_refused(self, records: np.ndarray, reason: str) -> None:
        """Count one refused release of each entry of ``records`` (for the
        ``privacy_records`` table and the run's warning), ``reason`` being the last refusal."""
        np.add.at(self.refused, np.asarray(records, dtype=np.int64), 1)
        self.last_refusal = reason

    @property
    def composition(self) -> str:
        """How the releases charged so far were composed: ``basic``, ``rdp``, ``pld``, or
        ``rdp+basic`` / ``pld+basic`` when some were Gaussian and some not (before any
        release under rdp/pld: the accounting)."""
        if self._composition is None:
            return "basic"
        return self._composition.composition

    @property
    def neighbours(self) -> str:
        """The neighbouring relation the run's guarantee is stated for
        (``docs/explanation/privacy.md``, "Neighbours" under "Composition by RDP or PLD"):
        ``replace-one``, or ``add-remove`` once a Poisson-subsampled release was composed
        (:meth:`PrivacyAccountant.release_sampled`)."""
        sampled = self._composition is not None and bool(self._composition.sampled)
        return "add-remove" if sampled else "replace-one"

    @property
    def composition_reason(self) -> str:
        """A sentence for the run's summary and manifest on :attr:`composition`."""
        if not self.policy.private:
            return "no composition: a non-private policy adds no noise"
        if self._composition is None:
            return "basic composition: the sum of the releases' ε and δ (accounting: basic)"
        return self._composition.reason

    # --- tables ----------------------------------------------------------------------------

    def ledger_frame(self) -> pd.DataFrame:
        """Every charge, in order (the charges still held here when streaming)."""
        return self.ledger.frame()

    def records_frame(self) -> pd.DataFrame:
        """Per record: uses, ε and δ spent, refusals."""
        return pd.DataFrame(
            {
                "record": np.arange(self.records),
                "uses": self.uses,
                "epsilon_spent": self.epsilon_spent,
                "delta_spent": self.delta_spent,
                "refused": self.refused,
                "mutual_information_spent": self.mutual_information_spent,
            }
        )

    def write_tables(self, log: EventLog) -> None:
        """Append the ledger (what is left of it when streaming) and the per-record summary
        to a run's event log."""
        self.ledger.write(log)
        log.table(RECORDS_TABLE).extend(
            [
                np.arange(self.records),
                self.uses,
                self.epsilon_spent,
                self.delta_spent,
                self.refused,
                self.mutual_information_spent,
            ]
        )

    # --- guarantees per record --------------------------------------------------------------

    def record_guarantee(self, record: int) -> PrivacySpent:
        """Sequential composition of ``record``'s releases (basic, or RDP/PLD for its
        Gaussian releases under those accountings)."""
        self._check_record(record)
        return PrivacySpent(
            float(self.epsilon_spent[record]),
            float(self.delta_spent[record]),
            not bool(self.not_dp[record]),
        )

    def record_events(self, record: int) -> list[PrivacyEvent]:
        """The events charged to ``record``, in order."""
        self._check_record(record)
        return self.ledger.events_of(record)

    def record_advanced(self, record: int, delta_slack: float) -> PrivacySpent:
        """Advanced composition of ``record``'s releases (never worse than basic)."""
        events = self.record_events(record)
        eps, delta = advanced_composition(
            [e.epsilon for e in events], [e.delta for e in events], delta_slack
        )
        return PrivacySpent(eps, delta, not bool(self.not_dp[record]))

    def record_tight_epsilon(
        self, record: int, delta: float, method: Literal["rdp", "pld"] = "rdp"
    ) -> float:
        """ε at ``delta`` for ``record``'s releases from an RDP or PLD accountant.

        Both the accountant's ε and the basic sum (when its δ fits in ``delta``) are valid
        bounds, so the smaller is returned: RDP's conversion to (ε, δ) is looser than the
        basic bound for a single release (e.g. 1.09 vs 1.0 for one analytic-Gaussian (1, 1e-5)
        release), while it is far tighter for many.
        """
        events = self.record_events(record)
        if not events:
            return 0.0
        composed = dp_accounting.ComposedDpEvent([event.dp_event() for event in events])
        accountant = rdp.RdpAccountant() if method == "rdp" else pld.PLDAccountant()
        accountant.compose(composed)
        tight = float(accountant.get_epsilon(delta))
        if self.delta_spent[record] <= delta * (1.0 + self.tolerance):
            return min(tight, float(self.epsilon_spent[record]))
        return tight
