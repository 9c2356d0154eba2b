"""Per-record privacy accounting: budgets, policies, composition, and a ledger.

A *record* is what one privacy budget protects: a node's data point or a node's local data
set. Each record has a ledger of the releases that used it. Composition (Hegedűs et al. 2016
§3.1; Dwork & Roth 2014 §3.5):

- *sequential* within a record: the basic sum of ε and δ, or advanced composition for (ε, δ);
- *parallel* across disjoint records: the run is (max ε, max δ)-DP over records;
- *tight* for Gaussian releases, as the ceiling itself: with ``accounting="rdp"`` or
  ``"pld"`` a record's Gaussian releases are composed by Rényi DP (Mironov 2017) or its
  privacy-loss distribution (dp-accounting's ``PLDAccountant``), and the budget is checked
  against the composed ε at the budget δ (:mod:`netsim.privacy.composition`); releases of
  other mechanisms keep the basic sum. ``record_tight_epsilon`` states the tight ε of a basic
  run after the fact, to compare.

The accountant validates before it changes state: a charge that would take a record past its
budget raises :class:`BudgetExhausted` and leaves every ledger as it was.

:class:`RecordBudgets` checks and charges releases and writes the tables;
:class:`PrivacyAccountant` adds the releases that draw their noise under the budget policy and
the guarantees. The
charges are kept by :class:`~netsim.privacy.ledger.PrivacyLedger` (which streams them to the
``privacy_ledger`` table), the RDP/PLD state of each record by
:class:`~netsim.privacy.tight.TightComposition`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, Protocol

import dp_accounting
import numpy as np
import pandas as pd
from dp_accounting import pld, rdp

from netsim.component import ComponentConfig
from netsim.contracts import Mechanism
from netsim.errors import BudgetExhausted, PrivacyError
from netsim.log import EventLog, EventTable
from netsim.privacy import mechanisms
from netsim.privacy.composition import (
    TIGHT_ACCOUNTINGS,
    Accounting,
    calibrated_noise_multiplier,
    check_accounting,
    check_sampling_rate,
    poisson_sampled_event,
)
from netsim.privacy.events import PrivacyEvent
from netsim.privacy.ledger import LEDGER_TABLE as LEDGER_TABLE
from netsim.privacy.ledger import RECORDS_TABLE, LedgerChunk, PrivacyLedger
from netsim.privacy.ledger import ledger_sink as ledger_sink
from netsim.privacy.tight import (
    NO_EVENT,
    PendingCharge,
    TightComposition,
    basic_reason,
    gaussian_multiplier,
    gaussian_release,
)
from netsim.registry import spec_class, spec_kind

# --- budget policies (Hegedűs et al. 2016 §3.1) --------------------------------------------


class BudgetPolicy(Protocol):
    """How a record's budget ε is split over its uses."""

    name: str
    private: bool

    def epsilon_for_use(self, budget: float, use: int) -> float | None:
        """ε for the ``use``-th use (1-based), or ``None`` when no further use is allowed."""


@dataclass(frozen=True)
class SingleUse:
    """DP-SGD-1: one use with the whole budget."""

    name: str = "dp-sgd-1"
    private: bool = True

    def epsilon_for_use(self, budget: float, use: int) -> float | None:
        return budget if use == 1 else None


@dataclass(frozen=True)
class KUses:
    """DP-SGD-k: at most k uses with ε/k each."""

    k: int
    private: bool = True

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"DP-SGD-k needs k >= 1, got {self.k}")

    @property
    def name(self) -> str:
        return f"dp-sgd-{self.k}"

    def epsilon_for_use(self, budget: float, use: int) -> float | None:
        return budget / self.k if use <= self.k else None


@dataclass(frozen=True)
class Halving:
    """DP-SGD-∞: the t-th use spends ε/2^t, so any number of uses stays below ε."""

    name: str = "dp-sgd-inf"
    private: bool = True

    def epsilon_for_use(self, budget: float, use: int) -> float | None:
        return math.ldexp(budget, -use)  # exact ε·2^-t, no overflow of 2**t


@dataclass(frozen=True)
class Unlimited:
    """The non-private baseline (plain SGD): no noise, any number of uses."""

    name: str = "unlimited"
    private: bool = False

    def epsilon_for_use(self, budget: float, use: int) -> float | None:
        return 0.0


@dataclass(frozen=True)
class UntilSpent:
    """dp-sgd: no cap on uses; a record is used for as long as its composed spend (RDP or PLD
    of Gaussian releases at a fixed noise multiplier) stays within the budget, so the
    accounting decides how many updates a run gets (Abadi et al. 2016 §3.1, with the moments
    accountant's successor). Needs ``accounting`` rdp or pld and a fixed noise multiplier."""

    name: str = "dp-sgd"
    private: bool = True

    def epsilon_for_use(self, budget: float, use: int) -> float | None:
        return budget  # no share: the composed spend decides


def uses_cap(policy: BudgetPolicy) -> int | None:
    """How many uses the policy allows a record (None: no fixed number)."""
    if isinstance(policy, SingleUse):
        return 1
    if isinstance(policy, KUses):
        return policy.k
    return None


def policy_by_name(name: str) -> BudgetPolicy:
    """``dp-sgd-1``, ``dp-sgd-<k>``, ``dp-sgd-inf``, ``dp-sgd`` or ``unlimited``."""
    if name == "dp-sgd":
        return UntilSpent()
    if name == "dp-sgd-1":
        return SingleUse()
    if name == "dp-sgd-inf":
        return Halving()
    if name == "unlimited":
        return Unlimited()
    if name.startswith("dp-sgd-") and name[7:].isdigit():
        return KUses(int(name[7:]))
    raise ValueError(
        f"unknown budget policy {name!r}; use dp-sgd-1, dp-sgd-<k>, dp-sgd-inf, dp-sgd or unlimited"
    )


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


Release = Callable[..., tuple[np.ndarray, PrivacyEvent]]
MECHANISMS: dict[str, Release] = {
    "laplace": mechanisms.laplace,
    "l2_laplace_radius": mechanisms.l2_laplace_radius,
    "k_norm_l2": mechanisms.k_norm_l2,
    "gaussian": mechanisms.gaussian,
}


def composition_for(mechanism: str | ComponentConfig, accounting: str) -> tuple[str, str]:
    """How an accountant with ``accounting`` will compose the releases of the mechanism
    ``mechanism`` (a scenario's ``noise`` value), and why: ``("rdp" | "pld" | "basic",
    reason)``. Known before the run, for its summary; the accountant's own
    :attr:`PrivacyAccountant.composition` says what it did."""
    check_accounting(accounting)
    cls = spec_class("mechanism", mechanism)
    assert issubclass(cls, Mechanism)
    if accounting == "basic":
        return "basic", "basic composition: the sum of the releases' ε and δ (accounting: basic)"
    if cls.releases_at_multiplier():
        return accounting, (
            f"{accounting.upper()} composition of {spec_kind(mechanism)}'s Gaussian releases, "
            "converted at the budget δ"
        )
    return "basic", "basic composition: " + basic_reason(
        spec_kind(mechanism), cls.guarantee, accounting
    )


def accounting_problem(mechanism: str | ComponentConfig, algorithm: str, accounting: str) -> str:
    """Why the noise ``mechanism`` (a scenario's ``noise`` value) cannot run the budget policy
    ``algorithm`` (``dp-sgd-<k>``, ``dp-sgd``, ...) under ``accounting`` ("" when it can):
    ``dp-sgd`` uses a record until its composed spend reaches the budget, which needs RDP or
    PLD composition (under the basic sum each use would spend a fixed share, and nothing
    would say how many) and a Gaussian mechanism with a fixed noise multiplier (nothing else
    fixes the noise of each use)."""
    if accounting not in ("basic", *TIGHT_ACCOUNTINGS):
        return f"accounting {accounting!r} is not one of basic, rdp, pld"
    if algorithm != "dp-sgd":
        return ""
    if accounting == "basic":
        return (
            "algorithm dp-sgd uses a record for as long as its composed spend stays within the "
            "budget, which needs accounting rdp or pld (under basic composition every use "
            "would spend a fixed share of ε); set accounting: rdp (or pld), or choose "
            "dp-sgd-<k>"
        )
    cls = spec_class("mechanism", mechanism)
    multiplier = getattr(mechanism, "noise_multiplier", None)
    if not (issubclass(cls, Mechanism) and cls.releases_at_multiplier()) or multiplier is None:
        return (
            f"algorithm dp-sgd needs Gaussian noise at a fixed noise multiplier (noise: "
            f"{{kind: gaussian, noise_multiplier: 1.1}}), got noise {spec_kind(mechanism)} "
            "without one: the multiplier fixes each use's noise and the accounting the "
            "number of uses; or choose dp-sgd-<k>, whose noise is calibrated to k uses"
        )
    return ""


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
        #: composed budget (None: the budget): a per-observer ceiling
        #: (:class:`~netsim.privacy.ceiling.LineageCeiling`), which then states the guarantee;
        #: the record's composed spend is still kept, as its local-DP figure.
        self.admission: Callable[[int], bool] | None = None
        #: Why :attr:`admission` refuses (the refusal's reason in the run's warning).
        self.admission_refusal = ""
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
        """The neighbouring relation the run's guarantee is stated for (SPEC §8.1):
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


class PrivacyAccountant(RecordBudgets):
    """Budgets and ledgers of ``records`` disjoint records, each with budget (ε, δ), the
    releases that spend them (:meth:`release`, :meth:`release_batch`) and the guarantees they
    compose to.

    ``accounting`` chooses how a record's releases compose against its budget: ``basic``
    (the sum of ε and of δ), or ``rdp`` / ``pld``: the record's Gaussian releases (events that
    declare a ``GaussianDpEvent``) are composed by Rényi DP or by their privacy-loss
    distribution and converted to ε at the budget δ, and a release is refused when that ε
    would pass the budget ε. Releases of other mechanisms keep the basic sum (their ε adds
    to the composed one, their δ comes off the δ the Gaussian part is converted at);
    :attr:`composition` and :attr:`composition_reason` say which composition was used.
    Under rdp/pld a record with at least one Gaussian release reports ``delta_spent`` = the
    budget δ, the δ at which its ``epsilon_spent`` is stated.
    """

    def noise_multiplier_for(
        self, mechanism: str | Release | Mechanism, sampling_rate: float = 1.0
    ) -> float | None:
        """The noise multiplier σ/Δ :meth:`release` gives ``mechanism`` under rdp/pld: its
        fixed one, or for DP-SGD-k the one calibrated so that k uses compose to the budget
        (ε, δ) exactly (:func:`~netsim.privacy.composition.calibrated_noise_multiplier`;
        k uses of the Poisson-subsampled Gaussian at ``sampling_rate`` q < 1, for
        :meth:`release_sampled`). None: the mechanism is given a share of ε per use instead
        (basic accounting, a mechanism that cannot release at a multiplier, or DP-SGD-∞)."""
        if not self.tight:
            return None
        at_multiplier = (isinstance(mechanism, str) and mechanism == "gaussian") or (
            isinstance(mechanism, Mechanism) and mechanism.releases_at_multiplier()
        )
        fixed = mechanism.fixed_noise_multiplier() if isinstance(mechanism, Mechanism) else None
        if isinstance(self.policy, UntilSpent) and (not at_multiplier or fixed is None):
            name = (
                mechanism
                if isinstance(mechanism, str)
                else getattr(mechanism, "__name__", type(mechanism).__name__)
            )
            raise PrivacyError(
                f"policy dp-sgd needs Gaussian noise at a fixed noise multiplier (noise: "
                f"{{kind: gaussian, noise_multiplier: z}}), got {name}"
                + (" without one" if at_multiplier else "")
            )
        if not at_multiplier:
            return None
        if not 0 < self.delta < 1:
            raise PrivacyError(
                f"Gaussian noise under {self.accounting} accounting needs a δ budget in (0, 1), "
                f"got δ = {self.delta:g}: give the algorithm a δ budget"
            )
        if fixed is not None:
            return fixed
        cap = uses_cap(self.policy)
        if cap is None:
            return None
        if sampling_rate == 1.0:  # the unsampled calibration, called as it always was
            return calibrated_noise_multiplier(cap, self.epsilon, self.delta, self.accounting)
        return calibrated_noise_multiplier(
            cap, self.epsilon, self.delta, self.accounting, sampling_rate
        )

    def _release_at_multiplier(
        self,
        records: np.ndarray,
        value: np.ndarray | float,
        *,
        mechanism: str | Mechanism,
        multiplier: float,
        sensitivity: float,
        rng: np.random.Generator,
        time: float,
        sampling_rate: float | None = None,
    ) -> tuple[np.ndarray, PrivacyEvent]:
        """A Gaussian release at σ/Δ = ``multiplier`` charged as one use to each of the
        distinct ``records``, validated against the composed budget before any noise is
        drawn. With ``sampling_rate`` q the release is of a Poisson sample of ``records``
        (:meth:`release_sampled`): each is charged ``PoissonSampledDpEvent(q, ·)`` under
        add/remove neighbours, ``sensitivity`` being the add/remove one."""
        for record in records:
            self._check_record(int(record))
            if self.policy.epsilon_for_use(self.epsilon, int(self.uses[record]) + 1) is None:
                self._refuse_all(
                    records,
                    f"budget spent ({self.policy.name}, {int(self.uses[record])} uses)",
                )
            if self.admission is not None and not self.admission(int(record)):
                self._refuse_all(records, self.admission_refusal)
        # the local budget refuses unless an admission decides in its place
        local = self.admission is None
        one = np.ones(records.size, np.int64)
        expected: float | None = None
        rate = 1.0 if sampling_rate is None else sampling_rate
        if sensitivity > 0:
            expected = multiplier * sensitivity / sensitivity  # the event's σ/Δ
            pending = self._composed.evaluate(
                records, one, NO_EVENT, multiplier=expected, sampling_rate=rate
            )
            if local and pending.over.any():
                self._refuse_all(records, self._composed.refusal(pending))
        if isinstance(mechanism, Mechanism):
            with mechanism.claims_checked():
                noisy, event = mechanism.release_at_multiplier(
                    mechanisms.as_vector(value), sensitivity=sensitivity,
                    noise_multiplier=multiplier, delta=self.delta, rng=rng,
                )  # fmt: skip
        else:
            noisy, event = mechanisms.gaussian_at_multiplier(
                value, sensitivity=sensitivity, noise_multiplier=multiplier, delta=self.delta,
                rng=rng,
            )  # fmt: skip
        if sampling_rate is not None:
            event = poisson_sampled_event(event, sampling_rate)
        if expected is None or gaussian_release(event) != (rate, expected):
            pending = self._composed.evaluate(records, one, event)  # what it really declared
            if local and pending.over.any():
                self._refuse_all(records, self._composed.refusal(pending))
        self._commit(pending, event)
        self.ledger.keep(LedgerChunk(time, pending.records, self.uses[pending.records], event))
        return noisy, event

    def charge_at_multiplier(
        self,
        records: np.ndarray,
        ranks: np.ndarray,
        event: PrivacyEvent,
        *,
        time: float = math.nan,
    ) -> np.ndarray:
        """Charge one Gaussian release like ``event`` (a noise multiplier σ/Δ declared as a
        ``GaussianDpEvent``) to each entry of ``records``, in the order given, as
        :meth:`_release_at_multiplier` charges them one after the other; the caller draws the
        noise of the entries admitted. ``ranks[i]``: how many equal entries come before
        entry i. An entry is refused (counted, nothing charged) when the policy has no use
        left for its record or when the use would take the record's composed ε (RDP, Mironov
        2017; or PLD) past the budget, and then so is every later entry of that record: its
        state no longer changes, so one after the other each would be refused again. The
        r-th entries of all records are evaluated and committed together, one use at a time
        per record, so each record's state is built as the single releases build it. The
        admitted entries are one ledger chunk, in the order given. Returns whether each
        entry was admitted."""
        multiplier = gaussian_multiplier(event)
        if not self.tight or multiplier is None or self.admission is not None:
            raise PrivacyError(
                "charge_at_multiplier charges Gaussian releases under rdp/pld accounting "
                f"against the records' own budgets; got accounting {self.accounting}, "
                f"{event.mechanism} events" + (", an admission" if self.admission else "")
            )
        records = np.asarray(records, dtype=np.int64).reshape(-1)
        admitted = np.zeros(records.size, dtype=bool)
        if records.size == 0:
            return admitted
        if records.min() < 0 or records.max() >= self.records:
            raise ValueError(f"records outside [0, {self.records - 1}]")
        if multiplier != self._over_multiplier:
            self._over_at[:], self._over_multiplier = -1, multiplier
        before = self.uses[records]
        blocked = np.zeros(self.records, dtype=bool)  # refused earlier in this batch
        for rank in range(int(ranks.max()) + 1):
            entries = np.flatnonzero(ranks == rank)
            units = records[entries]
            uses = self.uses[units]
            # a record found over its budget at these uses is over again: no need to compose
            live = ~blocked[units] & (self._over_at[units] != uses) & self._has_share(uses + 1)
            candidates = entries[live]
            blocked[units[~live]] = True
            if candidates.size == 0:
                continue
            pending = self._composed.evaluate(
                records[candidates], np.ones(candidates.size, np.int64), NO_EVENT,
                multiplier=multiplier,
            )  # fmt: skip
            fits = ~pending.over
            over = records[candidates[~fits]]
            self._over_at[over] = self.uses[over]
            self._commit(pending.rows(fits) if over.size else pending, event)
            admitted[candidates[fits]] = True
            blocked[over] = True
        use_numbers = before[admitted] + ranks[admitted] + 1
        self.ledger.keep(LedgerChunk(time, records[admitted], use_numbers, event))
        if not admitted.all():
            last = int(records[np.flatnonzero(~admitted)[-1]])
            self.count_refused(records[~admitted], self._refusal_of(last, multiplier))
        return admitted

    def _has_share(self, uses: np.ndarray) -> np.ndarray:
        """Whether the policy allows a use numbered ``uses`` (1-based), entry by entry."""
        numbers, inverse = np.unique(uses, return_inverse=True)
        share = [self.policy.epsilon_for_use(self.epsilon, int(use)) is not None for use in numbers]
        return np.array(share, dtype=bool)[inverse.reshape(-1)]

    def _refusal_of(self, record: int, multiplier: float) -> str:
        """Why :meth:`_release_at_multiplier` refuses the next release of ``record`` now."""
        if self.policy.epsilon_for_use(self.epsilon, int(self.uses[record]) + 1) is None:
            return self._spent_reason(record)
        one = np.ones(1, np.int64)
        pending = self._composed.evaluate(np.array([record]), one, NO_EVENT, multiplier=multiplier)
        return self._composed.refusal(pending)

    def delta_for_use(self, epsilon: float) -> float:
        """The share of the δ budget a use that spends ``epsilon`` of the ε budget may spend:
        the same fraction, δ·ε_use/ε. So the policies split δ as they split ε: DP-SGD-1 gives
        its one use δ, DP-SGD-k δ/k per use, DP-SGD-∞ δ/2^t to the t-th use (0 without a δ
        budget or under the unlimited policy)."""
        if not self.policy.private or self.delta == 0 or not math.isfinite(self.epsilon):
            return 0.0
        return self.delta * epsilon / self.epsilon

    def release(
        self,
        record: int,
        value: np.ndarray | float,
        *,
        mechanism: str | Release | Mechanism,
        sensitivity: float,
        rng: np.random.Generator,
        time: float = math.nan,
        **options: Any,
    ) -> tuple[np.ndarray, PrivacyEvent]:
        """Spend the policy's next ε (and δ) of ``record`` on ``value`` with ``mechanism``, in
        one call.

        ``accountant.release(17, gradient, mechanism="k_norm_l2", sensitivity=2.0, rng=rng)``
        under DP-SGD-5 adds K-norm noise calibrated to ε/5 and charges record 17, or raises
        :class:`BudgetExhausted` (counted in ``refused``) when record 17 has no budget left or
        the release would take it past its budget (a mechanism with a fixed noise may spend
        more than the share it was given). Under the unlimited policy the value is returned
        unchanged (non-private baseline). ``mechanism`` is a :class:`~netsim.api.Mechanism`
        component (given the share :meth:`delta_for_use` of δ when it spends δ), a name of
        :data:`MECHANISMS` or a release function with their signature; ``options`` go to the
        latter two (``calibration`` for the Gaussian, which spends the share of δ too).
        """
        if isinstance(mechanism, str) and mechanism not in MECHANISMS:
            raise ValueError(f"unknown mechanism {mechanism!r}; known: {', '.join(MECHANISMS)}")
        multiplier = self.noise_multiplier_for(mechanism)
        if multiplier is not None:
            assert isinstance(mechanism, (str, Mechanism))
            return self._release_at_multiplier(
                np.array([record], dtype=np.int64), value, mechanism=mechanism,
                multiplier=multiplier, sensitivity=sensitivity, rng=rng, time=time,
            )  # fmt: skip
        eps = self.next_epsilon(record)
        if eps is None:
            self._refuse(record, self._spent_reason(record))
        noisy, event = self._noise_for_share(value, mechanism, sensitivity, eps, rng, options)
        try:
            self.check(record, event)
        except BudgetExhausted as exc:
            self._refuse(record, str(exc).removeprefix(f"record {record}: "))
        self.charge(record, event, time=time)
        return noisy, event

    def _noise_for_share(
        self,
        value: np.ndarray | float,
        mechanism: str | Release | Mechanism,
        sensitivity: float,
        epsilon: float,
        rng: np.random.Generator,
        options: dict[str, Any],
    ) -> tuple[np.ndarray, PrivacyEvent]:
        """``value`` released with the share ``epsilon`` of the budget (and its share of δ,
        :meth:`delta_for_use`, for a mechanism that spends δ); unchanged under the unlimited
        policy. ``options`` go to a release function (not to a component)."""
        if not self.policy.private:
            return mechanisms.no_noise(value)
        if isinstance(mechanism, Mechanism):
            return mechanism.spend(
                mechanisms.as_vector(value), sensitivity=sensitivity, epsilon=epsilon,
                delta=self.delta_for_use(epsilon), rng=rng,
            )  # fmt: skip
        if mechanism == "gaussian":
            options.setdefault("delta", self.delta_for_use(epsilon))
        release = MECHANISMS[mechanism] if isinstance(mechanism, str) else mechanism
        return release(value, sensitivity=sensitivity, epsilon=epsilon, rng=rng, **options)

    def _spent_reason(self, record: int) -> str:
        return f"budget spent ({self.policy.name}, {int(self.uses[record])} uses)"

    def refuse_spent(self, record: int) -> bool:
        """Whether the policy has no share of ε left for the next use of ``record``; if so,
        the use is counted as refused, as :meth:`release` refuses it — before it draws or
        charges anything — so a caller may skip the work the release would have needed (the
        gradient of a DP-SGD-1 visit after the record's first). For releases given a share
        of ε (:meth:`noise_multiplier_for` None); the others are refused by composition."""
        if self.next_epsilon(record) is not None:
            return False
        self.refused[record] += 1
        self.last_refusal = self._spent_reason(record)
        return True

    def _refuse(self, record: int, reason: str) -> NoReturn:
        """Count a refused release of ``record`` and raise :class:`BudgetExhausted`."""
        self.refused[record] += 1
        self.last_refusal = reason
        raise BudgetExhausted(record, reason)

    def _refuse_all(self, records: np.ndarray, reason: str) -> NoReturn:
        """Count a refused release of each of ``records`` and raise :class:`BudgetExhausted`
        naming the first (``reason`` may name another: the record of the pending charge)."""
        self.count_refused(records, reason)
        first = int(records[0])
        raise BudgetExhausted(first, reason.removeprefix(f"record {first}: "))

    def release_batch(
        self,
        records: np.ndarray,
        value: np.ndarray,
        *,
        mechanism: str | Release | Mechanism,
        sensitivity: float,
        rng: np.random.Generator,
        time: float = math.nan,
    ) -> tuple[np.ndarray, PrivacyEvent]:
        """One release of ``value`` computed from several distinct ``records`` (a
        mini-batch), charged as one use to each of them, all or nothing: if any record has
        no budget left for it, nothing is drawn or charged, each is counted as refused and
        :class:`BudgetExhausted` is raised. ``sensitivity`` is the value's sensitivity to one
        record (e.g. 2C/b for the mean of b gradients clipped to C). Under a split policy the
        release spends the smallest of the records' next shares. A single record is
        :meth:`release`."""
        records = np.asarray(records, dtype=np.int64).reshape(-1)
        if records.size == 1:
            return self.release(
                int(records[0]), value, mechanism=mechanism, sensitivity=sensitivity, rng=rng,
                time=time,
            )  # fmt: skip
        if np.unique(records).size != records.size:
            raise ValueError("release_batch needs distinct records")
        multiplier = self.noise_multiplier_for(mechanism)
        if multiplier is not None:
            assert isinstance(mechanism, (str, Mechanism))
            return self._release_at_multiplier(
                records, value, mechanism=mechanism, multiplier=multiplier,
                sensitivity=sensitivity, rng=rng, time=time,
            )  # fmt: skip
        shares = [self.next_epsilon(int(record)) for record in records]
        if any(share is None for share in shares):
            spent = int(records[[share is None for share in shares]][0])
            self._refuse_all(
                records, f"budget spent ({self.policy.name}, {int(self.uses[spent])} uses)"
            )
        eps = min(share for share in shares if share is not None)
        noisy, event = self._noise_for_share(value, mechanism, sensitivity, eps, rng, {})
        try:
            self.charge_batch(records, event, time=time)
        except BudgetExhausted as exc:
            self._refuse_all(records, str(exc))
        return noisy, event

    def release_sampled(
        self,
        records: np.ndarray,
        value: np.ndarray,
        *,
        sampling_rate: float,
        mechanism: str | Mechanism,
        sensitivity: float,
        rng: np.random.Generator,
        time: float = math.nan,
    ) -> tuple[np.ndarray, PrivacyEvent]:
        """One Gaussian release of ``value``, computed from a Poisson sample of the distinct
        ``records`` that took each with probability ``sampling_rate`` q (Abadi et al. 2016,
        Alg. 1: the sum of the taken records' clipped gradients over the expected batch
        size), charged as one use of ``PoissonSampledDpEvent(q, GaussianDpEvent(z))`` to
        *every* one of ``records``, taken or not (which were taken is secret), all or
        nothing (:class:`BudgetExhausted` as :meth:`release_batch`).

        The guarantee is under add/remove neighbours (dp-accounting's ``RdpAccountant``
        composes a ``PoissonSampledDpEvent`` under no other), so ``sensitivity`` is the
        value's add/remove one (C/b for a sum of gradients clipped to C divided by b), and
        the events say ``neighbours="add-remove"``. Needs rdp or pld accounting and a
        mechanism released at a noise multiplier: its fixed one, or DP-SGD-k's calibrated
        for k uses of the subsampled Gaussian (:meth:`noise_multiplier_for`)."""
        check_sampling_rate(sampling_rate)
        records = np.asarray(records, dtype=np.int64).reshape(-1)
        if np.unique(records).size != records.size:
            raise ValueError("release_sampled needs distinct records")
        multiplier = self.noise_multiplier_for(mechanism, sampling_rate) if self.tight else None
        if multiplier is None:
            raise PrivacyError(
                "a Poisson-subsampled release is accounted by RDP or PLD at a noise "
                f"multiplier: got accounting {self.accounting}, policy {self.policy.name} and "
                "a mechanism without one (learning.sampling poisson needs accounting rdp or "
                "pld and Gaussian noise)"
            )
        return self._release_at_multiplier(
            records, value, mechanism=mechanism, multiplier=multiplier, sensitivity=sensitivity,
            rng=rng, time=time, sampling_rate=sampling_rate,
        )  # fmt: skip

    def report(self) -> dict[str, object]:
        """The budget per record and the guarantee the run reached, as plain data (for the
        run's manifest; None where a number is infinite)."""
        run = self.run_guarantee()

        def number(value: float) -> float | None:
            return float(value) if math.isfinite(value) else None

        guaranteed = run.is_dp
        return {
            "policy": self.policy.name,
            # what the scenario states (a ceiling per record) and what the ledger spent
            "stated_epsilon": number(self.epsilon) if self.policy.private else None,
            "stated_delta": number(self.delta),
            # a release without a DP guarantee (the paper's L2 noise, a mutual-information
            # bound) spends no ε that could be read as one: its ε is the nominal one asked for
            "spent_epsilon": number(run.epsilon) if guaranteed else None,
            "nominal_epsilon": None if guaranteed else number(run.epsilon),
            "spent_delta": number(run.delta),
            "accounting": self.accounting,
            "neighbours": self.neighbours,
            "composition": self.composition,
            "composition_reason": self.composition_reason,
            "tight_mechanisms": sorted(self.tight_mechanisms),
            "differentially_private": bool(self.policy.private and run.is_dp),
            "mutual_information": number(float(self.mutual_information_spent.max())),
            "records": int(self.records),
            "uses": int(self.uses.sum()),
            "refused": int(self.refused.sum()),
        }

    def run_guarantee(self) -> PrivacySpent:
        """Parallel composition over disjoint records: the worst record's guarantee (basic,
        or composed by RDP/PLD under those accountings)."""
        return PrivacySpent(
            float(self.epsilon_spent.max()),
            float(self.delta_spent.max()),
            not bool(self.not_dp.any()),
        )
