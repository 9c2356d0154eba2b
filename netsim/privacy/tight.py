"""The per-record state of tight composition: with ``accounting`` ``rdp`` or ``pld`` a
record's Gaussian releases (events that declare a ``GaussianDpEvent``) are composed by Rényi DP
(Mironov 2017) or by their privacy-loss distribution (dp-accounting's ``PLDAccountant``) and
converted to ε at the budget δ; its other releases keep the basic sum, whose δ comes off the δ
the Gaussian part is converted at (:mod:`netsim.privacy.composition` computes the curves).

:class:`TightComposition` evaluates a charge before anything changes (a
:class:`PendingCharge`), says why it is refused, and applies it; the
:class:`~netsim.privacy.accountant.PrivacyAccountant` keeps the totals every accounting has.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import dp_accounting
import numpy as np

from netsim.errors import BudgetExhausted
from netsim.privacy.composition import (
    RDP_ORDERS,
    Signature,
    gaussian_rdp_curve,
    pld_epsilon,
    rdp_epsilons,
)
from netsim.privacy.events import PrivacyEvent


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
    :data:`~netsim.privacy.composition.RDP_ORDERS` (rdp) or counts per noise multiplier
    (pld); and which mechanisms were composed which way."""

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
        self.multipliers: list[float] = []
        self.counts = np.zeros((records if accounting == "pld" else 0, 0), dtype=np.int64)
        #: Names of the mechanisms composed by RDP/PLD, and of the others with their reason.
        self.tight_mechanisms: set[str] = set()
        self.basic_mechanisms: dict[str, str] = {}

    def evaluate(
        self,
        records: np.ndarray,
        counts: np.ndarray,
        event: PrivacyEvent,
        multiplier: float | None = None,
    ) -> PendingCharge:
        """The state of distinct ``records`` after ``counts`` more releases like ``event``
        (or, with ``multiplier`` and no event, Gaussian releases at that σ/Δ), and whether
        it would pass the budget. Nothing changes here."""
        if multiplier is None:
            multiplier = gaussian_multiplier(event)
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
        history, tight_epsilon = self._composed(records, counts, multiplier, target)
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
        multiplier: float | None,
        target: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The Gaussian history of ``records`` after ``counts`` more releases at
        ``multiplier`` (None: no Gaussian release) and its ε at the ``target`` δ."""
        if self.accounting == "rdp":
            history = self.rdp[records]  # a copy (fancy indexing): added to in place
            if multiplier is not None:
                history += counts[:, None] * gaussian_rdp_curve(multiplier)
            # one δ for all (the usual case): the conversion's order terms once, not per row
            uniform = target.size > 1 and bool((target == target[0]).all())
            return history, rdp_epsilons(history, target[:1] if uniform else target)
        if multiplier is not None:
            column = self._multiplier_column(multiplier)
        history = self.counts[records]
        if multiplier is not None:
            history[:, column] += counts  # fancy indexing copied the rows
        return history, self._pld_epsilons(history, target)

    def _multiplier_column(self, multiplier: float) -> int:
        """The column of ``multiplier`` in the PLD counts (added, all zeros, when new)."""
        try:
            return self.multipliers.index(multiplier)
        except ValueError:
            self.multipliers.append(multiplier)
            self.counts = np.hstack([self.counts, np.zeros((self.records, 1), np.int64)])
            return len(self.multipliers) - 1

    def _signature(self, counts: np.ndarray) -> Signature:
        """A record's Gaussian history for PLD from its row of counts per multiplier."""
        return tuple(sorted((self.multipliers[j], int(counts[j])) for j in np.flatnonzero(counts)))

    def _pld_epsilons(self, counts: np.ndarray, target: np.ndarray) -> np.ndarray:
        """PLD ε of each row of ``counts`` at its ``target`` δ, one dp-accounting
        computation per distinct history (:func:`~netsim.privacy.composition.pld_epsilon`
        caches them across calls)."""
        if counts.shape[0] == 1:
            return np.array([pld_epsilon(self._signature(counts[0]), float(target[0]))])
        if (target == target[0]).all():
            distinct, inverse = np.unique(counts, axis=0, return_inverse=True)
            values = np.array(
                [pld_epsilon(self._signature(row), float(target[0])) for row in distinct]
            )
            return values[inverse.reshape(-1)]
        pairs = zip(counts, target, strict=True)
        return np.array([pld_epsilon(self._signature(row), float(t)) for row, t in pairs])

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
        if gaussian_multiplier(event) is not None:
            self.tight_mechanisms.add(event.mechanism)
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
        return self.accounting + ("+basic" if self.basic_mechanisms else "")

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
        if self.basic_mechanisms:
            parts.append(
                "basic composition: " + "; ".join(self.basic_mechanisms[name]
                                                  for name in sorted(self.basic_mechanisms))
            )  # fmt: skip
        return "; ".join(parts)
