"""The per-record state of tight composition: with ``accounting`` ``rdp`` or ``pld`` a
record's Gaussian releases (events that declare a ``GaussianDpEvent``, or a
``PoissonSampledDpEvent`` of one) are composed by Rényi DP (Mironov 2017; Mironov, Talwar &
Zhang 2019 for the sampled ones) or by their privacy-loss distribution (dp-accounting's
``PLDAccountant``) and converted to ε at the budget δ; its other releases keep the basic
sum, whose δ comes off the δ the Gaussian part is converted at
(:mod:`netsim.privacy.composition` computes the curves).

:class:`TightComposition` evaluates a charge before anything changes (a
:class:`PendingCharge`), says why it is refused, and applies it; the
:class:`~netsim.privacy.accountant.PrivacyAccountant` keeps the totals every accounting has.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np

from netsim.errors import BudgetExhausted
from netsim.lazy import lazy_module
from netsim.privacy.composition import (
    RDP_ORDERS,
    Release,
    SampledSignature,
    pld_epsilon_sampled,
    rdp_epsilons,
    sampled_gaussian_rdp_curve,
)
from netsim.privacy.events import PrivacyEvent

if TYPE_CHECKING:
    import dp_accounting
else:
    dp_accounting = lazy_module("dp_accounting")


@dataclass(frozen=True)
class PendingCharge:
    """What charging some records would make of their state under rdp/pld accounting (one
    entry per record of ``records``), computed before anything changes."""

    records: np.ndarray
    counts: np.ndarray
    epsilon: np.ndarray  # composed ε after the charge
    delta: np.ndarray  # δ spent after the charge
    basic_epsilon: np.ndarray
    basic_delta: np.ndarray
    tight_uses: np.ndarray
    history: np.ndarray  # RDP curves (rdp) or multiplier counts (pld) after the charge
    over: np.ndarray  # bool: past the budget

    def rows(self, keep: np.ndarray) -> PendingCharge:
        """The charge of the records where ``keep`` is True only (the others left out)."""
        return PendingCharge(*(getattr(self, field.name)[keep] for field in fields(self)))


#: A placeholder event for a budget check of Gaussian releases at a given multiplier.
NO_EVENT = PrivacyEvent("gaussian_multiplier", "(epsilon,delta)-DP", 0.0, 0.0, 1.0, "L2", 1.0, 1)


def gaussian_multiplier(event: PrivacyEvent) -> float | None:
    """σ/Δ of an event that declares a ``GaussianDpEvent`` (None: any other event)."""
    declared = event.accounting
    if isinstance(declared, dp_accounting.GaussianDpEvent):
        return float(declared.noise_multiplier)
    return None


def gaussian_release(event: PrivacyEvent) -> Release | None:
    """(q, z) of an event that declares ``GaussianDpEvent(z)`` (q = 1) or
    ``PoissonSampledDpEvent(q, GaussianDpEvent(z))`` (None: any other event)."""
    declared = event.accounting
    if isinstance(declared, dp_accounting.GaussianDpEvent):
        return 1.0, float(declared.noise_multiplier)
    if isinstance(declared, dp_accounting.PoissonSampledDpEvent) and isinstance(
        declared.event, dp_accounting.GaussianDpEvent
    ):
        return float(declared.sampling_probability), float(declared.event.noise_multiplier)
    return None


def basic_reason(mechanism: str, guarantee: str, accounting: str) -> str:
    """Why releases of ``mechanism`` with ``guarantee`` keep basic composition under
    ``accounting``."""
    tight = accounting.upper()
    if guarantee == "epsilon-DP":
        return f"{mechanism} is pure ε-DP, which {tight} does not tighten here"
    if guarantee in ("none", "mutual-information"):
        return f"{mechanism} has no DP guarantee ({guarantee}), so there is nothing to compose"
    return f"{mechanism} declares no GaussianDpEvent, which {tight} would need"


class TightComposition:
    """The RDP/PLD side of ``records`` records' budgets (ε, δ): per record its basic part
    (releases without a ``GaussianDpEvent``) and its Gaussian history, RDP curves over
    :data:`~netsim.privacy.composition.RDP_ORDERS` (rdp) or counts per release (q, z) (pld:
    q = 1 unsampled, q < 1 Poisson-subsampled); and which mechanisms were composed which
    way."""

    def __init__(
        self,
        records: int,
        *,
        accounting: str,
        epsilon: float,
        delta: float,
        epsilon_limit: float,
        delta_limit: float,
    ) -> None:
        self.records = records
        self.accounting = accounting
        self.epsilon, self.delta = epsilon, delta
        self.epsilon_limit, self.delta_limit = epsilon_limit, delta_limit
        self.basic_epsilon = np.zeros(records)
        self.basic_delta = np.zeros(records)
        self.tight_uses = np.zeros(records, dtype=np.int64)
        self.rdp = np.zeros((records, RDP_ORDERS.size) if accounting == "rdp" else (0, 0))
        #: The releases (q, z) of the PLD counts' columns, in order of first use.
        self.multipliers: list[Release] = []
        self.counts = np.zeros((records if accounting == "pld" else 0, 0), dtype=np.int64)
        #: Names of the mechanisms composed by RDP/PLD, and of the others with their reason.
        self.tight_mechanisms: set[str] = set()
        self.basic_mechanisms: dict[str, str] = {}
        #: The sampling rates q of the Poisson-subsampled releases composed (add/remove
        #: adjacency; empty: none was).
        self.sampled: set[float] = set()

    def evaluate(
        self,
        records: np.ndarray,
        counts: np.ndarray,
        event: PrivacyEvent,
        multiplier: float | None = None,
        sampling_rate: float = 1.0,
    ) -> PendingCharge:
        """The state of distinct ``records`` after ``counts`` more releases like ``event``
        (or, with ``multiplier`` and no event, Gaussian releases at that σ/Δ, Poisson-
        subsampled at ``sampling_rate`` when it is below 1), and whether it would pass the
        budget. Nothing changes here."""
        release = gaussian_release(event) if multiplier is None else (sampling_rate, multiplier)
        multiplier = None if release is None else release[1]
        tight_uses = self.tight_uses[records]
        basic_epsilon = self.basic_epsilon[records]
        basic_delta = self.basic_delta[records]
        if multiplier is None:
            basic_epsilon = basic_epsilon + counts * event.epsilon
            basic_delta = basic_delta + counts * event.delta
        else:
            tight_uses = tight_uses + counts
        # the δ the Gaussian part is converted at: the budget less the basic part's δ
        target = np.maximum(self.delta - basic_delta, 0.0)
        history, tight_epsilon = self._composed(records, counts, release, target)
        epsilon = np.where(tight_uses > 0, tight_epsilon, 0.0) + basic_epsilon
        delta = np.where(tight_uses > 0, self.delta, basic_delta)
        over = (epsilon > self.epsilon_limit) | (basic_delta > self.delta_limit)
        return PendingCharge(
            records, counts, epsilon, delta, basic_epsilon, basic_delta, tight_uses, history, over
        )

    def _composed(
        self,
        records: np.ndarray,
        counts: np.ndarray,
        release: Release | None,
        target: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The Gaussian history of ``records`` after ``counts`` more releases ``release``
        (q, z) (None: no Gaussian release) and its ε at the ``target`` δ."""
        if self.accounting == "rdp":
            history = self.rdp[records]  # a copy (fancy indexing): added to in place
            if release is not None:
                history += counts[:, None] * sampled_gaussian_rdp_curve(*release)
            # one δ for all (the usual case): the conversion's order terms once, not per row
            uniform = target.size > 1 and bool((target == target[0]).all())
            return history, rdp_epsilons(history, target[:1] if uniform else target)
        if release is not None:
            column = self._multiplier_column(release)
        history = self.counts[records]
        if release is not None:
            history[:, column] += counts  # fancy indexing copied the rows
        return history, self._pld_epsilons(history, target)

    def _multiplier_column(self, release: Release) -> int:
        """The column of ``release`` (q, z) in the PLD counts (added, all zeros, when new)."""
        try:
            return self.multipliers.index(release)
        except ValueError:
            self.multipliers.append(release)
            self.counts = np.hstack([self.counts, np.zeros((self.records, 1), np.int64)])
            return len(self.multipliers) - 1

    def _signature(self, counts: np.ndarray) -> SampledSignature:
        """A record's Gaussian history for PLD from its row of counts per release."""
        return tuple(sorted((self.multipliers[j], int(counts[j])) for j in np.flatnonzero(counts)))

    def _pld_epsilons(self, counts: np.ndarray, target: np.ndarray) -> np.ndarray:
        """PLD ε of each row of ``counts`` at its ``target`` δ, one dp-accounting
        computation per distinct history (:func:`~netsim.privacy.composition.pld_epsilon_sampled`,
        the unsampled ``pld_epsilon`` when every q is 1, caches them across calls)."""
        if counts.shape[0] == 1:
            return np.array([pld_epsilon_sampled(self._signature(counts[0]), float(target[0]))])
        if (target == target[0]).all():
            distinct, inverse = np.unique(counts, axis=0, return_inverse=True)
            values = np.array(
                [pld_epsilon_sampled(self._signature(row), float(target[0])) for row in distinct]
            )
            return values[inverse.reshape(-1)]
        pairs = zip(counts, target, strict=True)
        return np.array([pld_epsilon_sampled(self._signature(row), float(t)) for row, t in pairs])

    def raise_if_over(self, pending: PendingCharge) -> None:
        """:class:`BudgetExhausted` naming the first record ``pending`` takes past its
        budget."""
        if not pending.over.any():
            return
        bad = int(np.argmax(pending.over))
        record, count = int(pending.records[bad]), int(pending.counts[bad])
        uses = f"{count} more release(s)" if count > 1 else "the release"
        if pending.basic_delta[bad] > self.delta_limit:
            raise BudgetExhausted(
                record,
                f"{uses} would bring δ to {pending.basic_delta[bad]:g} > budget {self.delta:g}",
            )
        raise BudgetExhausted(
            record,
            f"{uses} would bring the composed ε ({self.accounting}, at δ {self.delta:g}) to "
            f"{pending.epsilon[bad]:g} > budget {self.epsilon:g}",
        )

    def refusal(self, pending: PendingCharge) -> str:
        """The reason :meth:`raise_if_over` gives, without the record."""
        try:
            self.raise_if_over(pending)
        except BudgetExhausted as exc:
            return str(exc).removeprefix(f"record {int(pending.records[0])}: ")
        return ""

    def commit(self, pending: PendingCharge, event: PrivacyEvent) -> None:
        """Apply the composition state of a validated ``pending`` charge of ``event``."""
        records = pending.records
        self.basic_epsilon[records] = pending.basic_epsilon
        self.basic_delta[records] = pending.basic_delta
        self.tight_uses[records] = pending.tight_uses
        if self.accounting == "rdp":
            self.rdp[records] = pending.history
        else:
            self.counts[records] = pending.history
        release = gaussian_release(event)
        if release is not None:
            self.tight_mechanisms.add(event.mechanism)
            if release[0] < 1.0 or event.neighbours == "add-remove":
                self.sampled.add(release[0])
        elif event.mechanism not in self.basic_mechanisms:
            self.basic_mechanisms[event.mechanism] = basic_reason(
                event.mechanism, event.guarantee, self.accounting
            )

    @property
    def composition(self) -> str:
        """``rdp`` / ``pld``, ``rdp+basic`` / ``pld+basic`` when some releases were Gaussian
        and some not, ``basic`` when none was (before any release: the accounting)."""
        if self.basic_mechanisms and not self.tight_mechanisms:
            return "basic"
        sampled = "+poisson" if self.sampled else ""
        return self.accounting + sampled + ("+basic" if self.basic_mechanisms else "")

    @property
    def reason(self) -> str:
        """A sentence for the run's summary and manifest on :attr:`composition`."""
        parts = []
        if self.tight_mechanisms or not self.basic_mechanisms:
            names = ", ".join(sorted(self.tight_mechanisms)) or "Gaussian releases"
            parts.append(
                f"{self.accounting.upper()} composition of {names} per record, converted to ε "
                f"at the budget δ {self.delta:g}"
            )
        if self.sampled:
            rates = ", ".join(f"{rate:g}" for rate in sorted(self.sampled))
            parts.append(
                f"Poisson subsampling of each node's shard at q = {rates}: every record of a "
                "visited shard charged one PoissonSampledDpEvent(q, GaussianDpEvent(σ/C)), "
                "under add/remove neighbours (a record present or absent), not replace-one"
            )
        if self.basic_mechanisms:
            parts.append(
                "basic composition: " + "; ".join(self.basic_mechanisms[name]
                                                  for name in sorted(self.basic_mechanisms))
            )  # fmt: skip
        return "; ".join(parts)
