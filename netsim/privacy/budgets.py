"""Budget policies and admission: how a record's budget is split over its uses (Hegedűs et
al. 2016 §3.1: DP-SGD-1, DP-SGD-k, DP-SGD-∞, dp-sgd until spent, and the non-private
baseline), which policies a scenario's noise and accounting can run, and the declared hook
through which something other than a record's own budget admits its next use (the network
budget's per-observer ceiling, :class:`~netsim.privacy.ceiling.LineageCeiling`).

The accountant (:mod:`netsim.privacy.accountant`) asks the policy for each use's share and,
when an :class:`Admission` is set (:meth:`~netsim.privacy.record_budgets.RecordBudgets.admit_by`),
asks it instead of the record's composed budget; it keeps the charges and states the
guarantees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from netsim.component import ComponentConfig
from netsim.contracts import Mechanism
from netsim.privacy.composition import TIGHT_ACCOUNTINGS
from netsim.registry import spec_class, spec_kind


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


# --- admission: who admits a use in place of the record's own budget ----------------------


class Admission(Protocol):
    """What admits a record's next Gaussian release at a fixed noise multiplier in place of
    its own composed budget (the accountant's :meth:`~netsim.privacy.record_budgets.
    RecordBudgets.admit_by` hook): under ``privacy.budget: network`` the per-observer
    ceiling (:class:`~netsim.privacy.ceiling.LineageCeiling`), which then states the
    guarantee; the record's composed spend is still kept, as its local-DP figure."""

    #: Why :meth:`admits` refuses: the refusal's reason in the run's warning.
    refusal: str

    def admits(self, record: int) -> bool:
        """Whether ``record`` may make its next use now."""
        ...
