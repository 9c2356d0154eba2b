"""The privacy accountant: releases that draw their noise under a record's budget, and the
guarantees the run's charges compose to.

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

Three modules, one seam each: :mod:`netsim.privacy.budgets` holds the budget policies (how a
record's ε is split over its uses) and the :class:`~netsim.privacy.budgets.Admission` hook
(what admits a use in place of the record's own budget: the network budget's ceiling);
:class:`~netsim.privacy.record_budgets.RecordBudgets` checks and charges releases and writes
the tables; :class:`PrivacyAccountant` here adds the releases that draw their noise under the
budget policy and the guarantees. The charges are kept by
:class:`~netsim.privacy.ledger.PrivacyLedger` (which streams them to the ``privacy_ledger``
table), the RDP/PLD state of each record by :class:`~netsim.privacy.tight.TightComposition`.
The names of the first two are importable from here as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from netsim.component import ComponentConfig
from netsim.contracts import Mechanism
from netsim.errors import BudgetExhausted as BudgetExhausted
from netsim.errors import PrivacyError
from netsim.privacy import mechanisms
from netsim.privacy.budgets import Admission as Admission
from netsim.privacy.budgets import BudgetPolicy as BudgetPolicy
from netsim.privacy.budgets import Halving as Halving
from netsim.privacy.budgets import KUses as KUses
from netsim.privacy.budgets import SingleUse as SingleUse
from netsim.privacy.budgets import Unlimited as Unlimited
from netsim.privacy.budgets import UntilSpent, uses_cap
from netsim.privacy.budgets import accounting_problem as accounting_problem
from netsim.privacy.budgets import policy_by_name as policy_by_name
from netsim.privacy.composition import (
    calibrated_noise_multiplier,
    check_accounting,
    check_sampling_rate,
    poisson_sampled_event,
)
from netsim.privacy.events import PrivacyEvent
from netsim.privacy.ledger import LEDGER_TABLE as LEDGER_TABLE
from netsim.privacy.ledger import RECORDS_TABLE as RECORDS_TABLE
from netsim.privacy.ledger import LedgerChunk
from netsim.privacy.ledger import ledger_sink as ledger_sink
from netsim.privacy.record_budgets import PrivacySpent
from netsim.privacy.record_budgets import RecordBudgets as RecordBudgets
from netsim.privacy.record_budgets import advanced_composition as advanced_composition
from netsim.privacy.tight import NO_EVENT, basic_reason, gaussian_multiplier, gaussian_release
from netsim.registry import spec_class, spec_kind

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
            if self.admission is not None and not self.admission.admits(int(record)):
                self._refuse_all(records, self.admission.refusal)
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

    def refused_as_spent(self, record: int) -> None:
        """Say that the last use refused was of ``record``, whose policy had no share of ε
        left (:meth:`refuse_spent`'s reason), after compiled code counted the refusals in
        :attr:`refused` (gossip learning on the compiled exact core:
        :mod:`netsim.learning.compiled_visit`)."""
        self.last_refusal = self._spent_reason(record)

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
