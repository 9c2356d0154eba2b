"""Frozen records of what one noisy release spent (``docs/architecture.md``: privacy is
accounted, never assumed).

Every mechanism returns its noisy value together with a :class:`PrivacyEvent`. The event
states the guarantee honestly: ``"epsilon-DP"``, ``"(epsilon,delta)-DP"``, ``"none"`` (noise
was added but the mechanism is not differentially private, e.g. the L2 variant printed by
Hegedűs et al. for d > 1), ``"mutual-information"`` (a bound on the mutual information between
the private input and the release, in nats, as Zhang & Venkitasubramaniam measure privacy; no
DP guarantee) or ``"non-private"`` (no noise at all), and carries what an accountant needs:
sensitivity and its norm, ε, δ, the noise scale and dimension, the mutual-information
bound, and the event in Google's ``dp_accounting`` vocabulary that the mechanism declares for
tight (RDP / PLD) composition (``accounting``: e.g. ``GaussianDpEvent(σ/Δ)``; ``None`` when
the mechanism has none, and its releases are then composed by the basic sum only). The
mechanism declares it, as each of dp_accounting's frozen event classes names one mechanism:
nothing is inferred from the mechanism's name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from netsim.errors import InvalidPrivacyEventError, UnaccountableEventError
from netsim.lazy import lazy_module

if TYPE_CHECKING:
    import dp_accounting
else:
    dp_accounting = lazy_module("dp_accounting")

#: The neighbouring relation a release's guarantee is stated for (``docs/explanation/privacy.md``:
#: "Neighbours" under "Composition by RDP or PLD", and "Poisson subsampling within a shard"): data
#: sets that differ in one record's value (``replace-one``, netsim's default: Δ is the replace-one
#: distance, 2C for a gradient clipped to C), or in one record's presence (``add-remove``:
#: Poisson-subsampled releases, Δ = C).
Neighbours = Literal["replace-one", "add-remove"]
NEIGHBOURS: tuple[str, ...] = ("replace-one", "add-remove")
Guarantee = Literal["epsilon-DP", "(epsilon,delta)-DP", "mutual-information", "none", "non-private"]
Norm = Literal["L1", "L2"]


@dataclass(frozen=True)
class PrivacyEvent:
    """What one release spent.

    ``noise_scale`` is the Laplace scale b (per coordinate), the Gaussian σ, or the scale of
    the radial distribution, as named by ``mechanism``. ``epsilon`` / ``delta`` are the
    guarantee of this single release (0 for ``non-private``; for ``none`` the ε the caller
    asked for, which the mechanism does not deliver).
    """

    mechanism: str
    guarantee: Guarantee
    epsilon: float
    delta: float
    sensitivity: float
    norm: Norm
    noise_scale: float
    dimension: int
    mutual_information: float = 0.0
    #: The release in ``dp_accounting``'s vocabulary, declared by the mechanism (``None``:
    #: none, so only basic composition applies). It describes the noise, whatever the claim.
    accounting: dp_accounting.DpEvent | None = None
    #: The neighbouring relation the guarantee and ``sensitivity`` are stated for.
    neighbours: Neighbours = "replace-one"

    def __post_init__(self) -> None:
        problem = event_problem(self)
        if problem is not None:
            raise InvalidPrivacyEventError(f"invalid privacy event of {self.mechanism}: {problem}")

    @property
    def is_private(self) -> bool:
        """True when the release has a differential-privacy guarantee."""
        return self.guarantee in ("epsilon-DP", "(epsilon,delta)-DP")

    def dp_event(self) -> dp_accounting.DpEvent:
        """The event in Google's ``dp_accounting`` vocabulary, for RDP / PLD accounting: the
        one the mechanism declared in :attr:`accounting` (``NonPrivateDpEvent`` for a
        non-private release). A release whose mechanism declared none raises
        :class:`UnaccountableEventError`: it is accounted by basic composition only.
        """
        if self.guarantee == "non-private":
            return dp_accounting.NonPrivateDpEvent()
        if self.accounting is not None:
            return self.accounting
        raise UnaccountableEventError(
            f"{self.mechanism} ({self.guarantee}) declares no dp_accounting event, so it has no "
            "RDP/PLD representation: its releases are accounted by basic composition only"
        )

    def noise_multiplier(self) -> float:
        """Noise scale over sensitivity (∞ for a zero-sensitivity query)."""
        return math.inf if self.sensitivity == 0 else self.noise_scale / self.sensitivity


def event_problem(event: PrivacyEvent) -> str | None:
    """Why ``event`` states an impossible guarantee (``None``: it does not).

    Every comparison is written so that NaN fails it (``not x >= 0``, never ``x < 0``, which
    NaN passes). ε must be a number ≥ 0; it may be ∞ only for a release that claims no DP
    guarantee (``none``: a mechanism stating that its noise gives no finite ε), since an
    ε-DP or (ε, δ)-DP claim with ε = ∞ says nothing. δ is a probability in [0, 1). A DP claim
    for a release of positive sensitivity needs noise (a noise scale above 0). (ε = 0 is left
    to the audit: an accountant's placeholder events and composed Gaussian releases state ε
    per record, not per release.)
    """
    if not event.epsilon >= 0:
        return f"ε = {event.epsilon} (ε is a number ≥ 0)"
    if event.is_private and not math.isfinite(event.epsilon):
        return f"ε = {event.epsilon} under a claim of {event.guarantee} (a DP claim has a finite ε)"
    if not 0 <= event.delta < 1:
        return f"δ = {event.delta} (δ is in [0, 1))"
    if not event.mutual_information >= 0:
        return f"mutual-information bound {event.mutual_information} (a bound is ≥ 0)"
    if not (event.sensitivity >= 0 and event.noise_scale >= 0):
        return f"sensitivity {event.sensitivity}, noise scale {event.noise_scale} (each is ≥ 0)"
    if event.neighbours not in NEIGHBOURS:
        return f"neighbours {event.neighbours!r} (one of {', '.join(NEIGHBOURS)})"
    if event.dimension < 1:
        return f"dimension {event.dimension} (at least 1)"
    if event.is_private and event.sensitivity > 0 and event.noise_scale == 0:
        return (
            f"a {event.guarantee} claim (ε = {event.epsilon:g}) for a release of sensitivity "
            f"{event.sensitivity:g} with no noise (noise scale 0): a value released as it is "
            "is not differentially private at any ε"
        )
    return None
