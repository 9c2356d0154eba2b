"""Tight composition of Gaussian releases per record: Rényi DP and privacy-loss distributions.

The accountant (:mod:`netsim.privacy.accountant`) composes a record's Gaussian releases with
these functions when a run asks for ``accounting: rdp`` or ``pld``
(``docs/explanation/privacy.md``, "Composition by RDP or PLD"):

- **RDP** (Mironov 2017): a Gaussian release N(0, σ²I) of L2 sensitivity Δ has the Rényi
  curve ρ(α) = α/(2z²), z = σ/Δ (Prop. 7); curves of one record add (Prop. 1) and are
  converted to (ε, δ) once, at the budget δ, as dp-accounting's ``RdpAccountant`` does
  (Canonne, Kamath & Steinke 2020, Prop. 12, over :data:`RDP_ORDERS`). The accountant keeps
  one curve per record, a (records × orders) array, and :func:`rdp_epsilons` converts many
  rows at once: the same arithmetic as ``dp_accounting.rdp.compute_epsilon``, vectorised.
- **PLD** (Koskela, Jälkö & Honkela 2020; Doroshenko et al. 2022, dp-accounting's
  ``PLDAccountant``): numerically near-exact. A record's ε depends only on the multiset of
  its noise multipliers (its *signature*), which most records share, so
  :func:`pld_epsilon` is cached by signature.

Neighbours: netsim's Δ is the largest L2 distance between a release's values on two data
sets that differ in one record's value (replace-one, e.g. 2C for a gradient clipped to C;
``docs/explanation/privacy.md``, "Neighbours" under "Composition by RDP or PLD"). A Gaussian
release's privacy loss between such neighbours is that of a shift by Δ, which is what
dp-accounting composes for ``GaussianDpEvent(σ/Δ)`` under its default relation
(``ADD_OR_REMOVE_ONE``, a shift by one unit of the multiplier). Its ``REPLACE_ONE`` would shift
by 2Δ, counting the replacement twice, so the accountants here keep the default.
No amplification by subsampling is claimed for a walk's or gossip's choice of nodes (not
Poisson samples: ``docs/explanation/privacy.md``, "No subsampling amplification from the
walk"): every such use is one full Gaussian release.

**Poisson subsampling within a node's shard** (``learning.sampling: poisson``) is the one
exception: each record of the visited shard is taken independently with probability q and
the release is Abadi et al.'s (2016, Alg. 1) noisy sum. Every record of the shard is then
charged ``PoissonSampledDpEvent(q, GaussianDpEvent(z))`` (its taking is secret), whose RDP
curve is the sampled Gaussian's (Mironov, Talwar & Zhang 2019) and whose PLD is the mixture
pair of dp-accounting. dp-accounting's ``RdpAccountant`` composes that event only under
``ADD_OR_REMOVE_ONE`` (or ``REPLACE_SPECIAL``); its ``PLDAccountant`` also has a
``REPLACE_ONE`` pair. So that the two accountings state one guarantee, a Poisson release is
accounted under **add/remove** adjacency (a record present or absent, the DP-SGD papers'
unit): the sum's sensitivity is C (not 2C) and z = σ/C. Such releases are *keyed* by
(q, z) (:data:`Release`); q = 1 is the unsampled ``GaussianDpEvent(z)``, exactly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, Literal

import numpy as np

from netsim.errors import PrivacyError
from netsim.lazy import lazy_module
from netsim.privacy import mechanisms
from netsim.privacy.events import PrivacyEvent

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

Accounting = Literal["basic", "rdp", "pld"]
ACCOUNTINGS: tuple[str, ...] = ("basic", "rdp", "pld")
TIGHT_ACCOUNTINGS: tuple[str, ...] = ("rdp", "pld")

#: The Rényi orders of every RDP computation: dp-accounting's default grid (1.1 … 1024),
#: ``rdp_privacy_accountant.DEFAULT_RDP_ORDERS``, written out so that importing this module does
#: not import dp-accounting (tests/test_footprint.py checks that the two agree).
RDP_ORDERS: np.ndarray = np.array(
    [1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024],
    dtype=np.float64,
)
RDP_ORDERS.setflags(write=False)

#: The ledger's name of a Poisson-subsampled Gaussian release (its sensitivity column is the
#: add/remove one; :func:`composed_epsilon_from_ledger`).
POISSON_MECHANISM = "gaussian_poisson"

#: A record's Gaussian history for PLD: ((noise multiplier, uses), ...), sorted by multiplier.
Signature = tuple[tuple[float, int], ...]
#: One kind of Gaussian release: (sampling rate q, noise multiplier z); q = 1 is unsampled.
Release = tuple[float, float]
#: A record's history of Gaussian releases, sampled or not, for PLD: ((release, uses), ...),
#: sorted by release.
SampledSignature = tuple[tuple[Release, int], ...]


def check_accounting(accounting: str) -> None:
    """Raise ValueError unless ``accounting`` is ``basic``, ``rdp`` or ``pld``."""
    if accounting not in ACCOUNTINGS:
        raise ValueError(f"accounting must be one of {', '.join(ACCOUNTINGS)}, got {accounting!r}")


def rdp_accountant() -> rdp.RdpAccountant:
    """A fresh ``RdpAccountant`` over :data:`RDP_ORDERS` (default neighbouring relation: see
    the module docstring)."""
    return rdp.RdpAccountant(orders=RDP_ORDERS.tolist())


def pld_accountant() -> pld.PLDAccountant:
    """A fresh ``PLDAccountant`` (default discretisation 1e-4, pessimistic estimates)."""
    return pld.PLDAccountant()


def gaussian_event(noise_multiplier: float) -> dp_accounting.DpEvent:
    """``GaussianDpEvent(z)``, or ``NoOpDpEvent`` for z = ∞ (a query of sensitivity 0)."""
    if math.isinf(noise_multiplier):
        return dp_accounting.NoOpDpEvent()
    return dp_accounting.GaussianDpEvent(noise_multiplier)


@contextlib.contextmanager
def quiet_dropped_orders() -> Iterator[None]:
    """Silence dp-accounting's warning for a Rényi order whose sampled-Gaussian series does
    not converge: it drops that order (ε is then the minimum over the others, still an upper
    bound), and a calibration, which probes many multipliers, would print it by the
    dozen."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def check_sampling_rate(sampling_rate: float) -> None:
    """Raise ValueError unless ``sampling_rate`` is a probability in (0, 1]."""
    if not 0 < sampling_rate <= 1:
        raise ValueError(f"a sampling rate must be in (0, 1], got {sampling_rate}")


def sampled_gaussian_event(sampling_rate: float, noise_multiplier: float) -> dp_accounting.DpEvent:
    """``PoissonSampledDpEvent(q, GaussianDpEvent(z))``: a Gaussian release of a sum over a
    Poisson sample that takes each record with probability q (Abadi et al. 2016, Alg. 1),
    under add/remove adjacency. For q = 1 the unsampled :func:`gaussian_event` itself, so
    that a sample of the whole shard is accounted exactly as one release of it (dp-accounting
    would otherwise build the PLD of q = 1 another way, a few 1e-6 apart)."""
    check_sampling_rate(sampling_rate)
    if sampling_rate == 1.0 or math.isinf(noise_multiplier):
        return gaussian_event(noise_multiplier)
    return dp_accounting.PoissonSampledDpEvent(sampling_rate, gaussian_event(noise_multiplier))


@functools.lru_cache(maxsize=1024)
def _sampled_rdp_curve(sampling_rate: float, noise_multiplier: float) -> np.ndarray:
    event = sampled_gaussian_event(sampling_rate, noise_multiplier)
    with quiet_dropped_orders():
        curve = rdp_accountant().compose(event).rdp
    curve.setflags(write=False)
    return curve


def sampled_gaussian_rdp_curve(sampling_rate: float, noise_multiplier: float) -> np.ndarray:
    """The RDP curve over :data:`RDP_ORDERS` of one Poisson-subsampled Gaussian release
    (Mironov, Talwar & Zhang 2019, Sampled Gaussian Mechanism, as dp-accounting computes it
    under add/remove adjacency); :func:`gaussian_rdp_curve` for q = 1. Read-only."""
    if sampling_rate == 1.0:
        return gaussian_rdp_curve(noise_multiplier)
    return _sampled_rdp_curve(float(sampling_rate), float(noise_multiplier))


@functools.lru_cache(maxsize=1024)
def _gaussian_rdp_curve(noise_multiplier: float) -> np.ndarray:
    curve = rdp_accountant().compose(gaussian_event(noise_multiplier)).rdp
    curve.setflags(write=False)
    return curve


def gaussian_rdp_curve(noise_multiplier: float) -> np.ndarray:
    """The RDP curve over :data:`RDP_ORDERS` of one Gaussian release with σ/Δ = z, as
    dp-accounting computes it (α/(2z²), Mironov 2017 Prop. 7; zeros for z = ∞). Read-only."""
    return _gaussian_rdp_curve(float(noise_multiplier))


# The conversion's terms that depend on the order alone: ln(1 − 1/α) − ln(α)/(α − 1) and
# 1/(α − 1), for α > 1.01 (∞ and 0 elsewhere: compute_epsilon skips those orders).
_USABLE = RDP_ORDERS > 1.01
_OFFSET = np.where(
    _USABLE, np.log1p(-1.0 / RDP_ORDERS) - np.log(RDP_ORDERS) / (RDP_ORDERS - 1.0), np.inf
)
_SLOPE = np.where(_USABLE, 1.0 / (RDP_ORDERS - 1.0), 0.0)


def rdp_epsilons(curves: np.ndarray, delta: np.ndarray | float) -> np.ndarray:
    """ε at ``delta`` of each row of ``curves`` (rows × :data:`RDP_ORDERS`): row by row the
    conversion of ``dp_accounting.rdp.compute_epsilon`` (Canonne, Kamath & Steinke 2020,
    Prop. 12: min over α of ρ(α) + ln(1 − 1/α) − ln(δα)/(α − 1), for α > 1.01; 0 at an order
    where the KL bound δ² > 1 − e^{−ρ} already gives ε = 0, or ρ < 0; ∞ for δ = 0 unless
    the curve is 0), with the terms of the order alone computed once."""
    curves = np.asarray(curves, dtype=np.float64)
    if curves.ndim == 1:
        curves = curves[None, :]
    deltas = np.asarray(delta, dtype=np.float64).reshape(-1)
    if deltas.size == 1:  # one δ for every row: one row of the order terms
        one = float(deltas[0])
        eps = curves + (_OFFSET - math.log(one) * _SLOPE if one > 0 else np.inf)
        threshold: np.ndarray | float = -math.log1p(-one * one)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            eps = curves + (_OFFSET - np.log(deltas)[:, None] * _SLOPE)
        threshold = -np.log1p(-(deltas * deltas))[:, None]
    best = np.maximum(eps.min(axis=1), 0.0)
    # δ² + expm1(−ρ) > 0 ⟺ ρ < −ln(1 − δ²); with ρ < 0 too, one such order makes ε = 0
    best[(curves < threshold).any(axis=1)] = 0.0
    zero_delta = deltas == 0  # (ε, 0)-DP only for a zero curve (compute_epsilon's first case)
    if zero_delta.any():
        rows = zero_delta if deltas.size > 1 else slice(None)
        best[rows] = np.where((curves[rows] == 0).all(axis=1), 0.0, np.inf)
    return best


@functools.lru_cache(maxsize=65536)
def pld_epsilon(signature: Signature, delta: float) -> float:
    """ε at ``delta`` of Gaussian releases with the multipliers and counts of ``signature``,
    from dp-accounting's ``PLDAccountant`` (cached: records with one history share it)."""
    if not signature:
        return 0.0
    if delta <= 0:
        return math.inf
    accountant = pld_accountant()
    for noise_multiplier, count in signature:
        accountant.compose(gaussian_event(noise_multiplier), count)
    return float(accountant.get_epsilon(delta))


@functools.lru_cache(maxsize=65536)
def pld_epsilon_sampled(signature: SampledSignature, delta: float) -> float:
    """ε at ``delta`` of the Gaussian releases, Poisson-subsampled or not, with the
    (q, z) and counts of ``signature``, from dp-accounting's ``PLDAccountant`` (cached).
    A signature whose releases are all unsampled is :func:`pld_epsilon`'s, to the bit."""
    if all(rate == 1.0 for (rate, _), _ in signature):
        return pld_epsilon(tuple((z, count) for (_, z), count in signature), delta)
    if delta <= 0:
        return math.inf
    accountant = pld_accountant()
    for (rate, noise_multiplier), count in signature:
        accountant.compose(sampled_gaussian_event(rate, noise_multiplier), count)
    return float(accountant.get_epsilon(delta))


def poisson_sampled_event(event: PrivacyEvent, sampling_rate: float) -> PrivacyEvent:
    """``event``, a Gaussian release at a noise multiplier z of a sum whose add/remove
    sensitivity is its ``sensitivity`` (C, or C/b after dividing by the expected batch b),
    restated as the release of a Poisson sample taking each record with probability q
    (Abadi et al. 2016, Alg. 1): named :data:`POISSON_MECHANISM`, declaring
    :func:`sampled_gaussian_event` (q, z), under add/remove neighbours, with the ε this one
    release gives at its δ (dp-accounting's PLD; the exact Gaussian profile for q = 1)."""
    release = event.accounting
    if not isinstance(release, dp_accounting.GaussianDpEvent):
        raise PrivacyError(
            f"{event.mechanism} declares {type(release).__name__}, not a GaussianDpEvent: only "
            "Gaussian releases can be Poisson-subsampled here"
        )
    z = float(release.noise_multiplier)
    epsilon = event.epsilon
    if sampling_rate < 1.0 and event.sensitivity > 0:
        epsilon = pld_epsilon_sampled((((sampling_rate, z), 1),), event.delta)
    return dataclasses.replace(
        event,
        mechanism=POISSON_MECHANISM,
        epsilon=epsilon,
        accounting=sampled_gaussian_event(sampling_rate, z),
        neighbours="add-remove",
    )


def rdp_epsilon_of(signature: Signature, delta: float) -> float:
    """ε at ``delta`` of the Gaussian releases of ``signature`` from dp-accounting's own
    ``RdpAccountant`` over :data:`RDP_ORDERS` (the reference :func:`rdp_epsilons` matches)."""
    if not signature:
        return 0.0
    accountant = rdp_accountant()
    for noise_multiplier, count in signature:
        accountant.compose(gaussian_event(noise_multiplier), count)
    return float(accountant.get_epsilon(delta))


def composed_epsilon(signature: Signature, delta: float, accounting: str) -> float:
    """ε at ``delta`` of the Gaussian releases of ``signature`` under ``accounting``
    (``rdp`` or ``pld``), as dp-accounting's accountant of that name states it."""
    if accounting == "rdp":
        return rdp_epsilon_of(signature, delta)
    if accounting == "pld":
        return pld_epsilon(signature, delta)
    raise ValueError(f"composed_epsilon needs accounting rdp or pld, got {accounting!r}")


def composed_sampled_epsilon(signature: SampledSignature, delta: float, accounting: str) -> float:
    """:func:`composed_epsilon` of releases keyed by (q, z): Poisson-subsampled Gaussians
    (add/remove adjacency) beside unsampled ones, as dp-accounting's accountant states it."""
    if all(rate == 1.0 for (rate, _), _ in signature):
        unsampled = tuple((z, count) for (_, z), count in signature)
        return composed_epsilon(unsampled, delta, accounting)
    if accounting == "pld":
        return pld_epsilon_sampled(signature, delta)
    if accounting != "rdp":
        raise ValueError(f"composed_epsilon needs accounting rdp or pld, got {accounting!r}")
    accountant = rdp_accountant()
    with quiet_dropped_orders():
        for (rate, noise_multiplier), count in signature:
            accountant.compose(sampled_gaussian_event(rate, noise_multiplier), count)
    return float(accountant.get_epsilon(delta))


@functools.lru_cache(maxsize=256)
def calibrated_noise_multiplier(
    uses: int, epsilon: float, delta: float, accounting: str, sampling_rate: float = 1.0
) -> float:
    """The smallest noise multiplier z = σ/Δ (to 1e-9 relative) whose ``uses`` Gaussian
    releases compose to at most (``epsilon``, ``delta``) under ``accounting`` (``rdp`` or
    ``pld``): DP-SGD-k's noise, calibrated to the composed budget rather than to a share of
    it (Abadi et al. 2016 §3.1). ``dp_accounting.calibrate_dp_mechanism`` (Brent's method,
    never returning a z whose ε exceeds the target) on ``SelfComposedDpEvent(
    GaussianDpEvent(z), uses)``, within a bracket found by doubling; the accountant checks
    the same ε, so k uses of z are never refused for want of budget. With ``sampling_rate``
    q < 1 the releases are Poisson-subsampled (:func:`sampled_gaussian_event`, add/remove
    adjacency, Δ = C): k uses of ``PoissonSampledDpEvent(q, GaussianDpEvent(z))``.

    The z returned also fits when the k releases are composed as a whole, one after another
    (:func:`whole_epsilon`), as a fresh accountant fed the run's releases one by one composes
    them: under PLD that is another discretisation than the k-fold self-composition the
    search uses (each release's loss discretised, then the k convolved), and lands above it,
    some 2e-8 at k = 2 (ε = 0.5, δ = 10⁻⁵) and 1e-6 at k = 100. z is then stepped up until both
    compositions are at most ``epsilon`` (:func:`fitted_as_a_whole`; a relative step of
    about that excess, 1e-8 to 1e-6 of z)."""
    if uses < 1:
        raise ValueError(f"uses must be >= 1, got {uses}")
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be positive and finite, got {epsilon}")
    mechanisms.check_delta(delta)
    if accounting not in TIGHT_ACCOUNTINGS:
        raise ValueError(f"calibration needs accounting rdp or pld, got {accounting!r}")
    check_sampling_rate(sampling_rate)

    def fits(z: float) -> bool:
        return composed_sampled_epsilon((((sampling_rate, z), uses),), delta, accounting) <= epsilon

    # PLD is never looser than RDP, so its z lies below RDP's: a narrow bracket for the
    # slower accountant
    high = (
        1.0
        if accounting == "rdp"
        else calibrated_noise_multiplier(uses, epsilon, delta, "rdp", sampling_rate)
    )
    low = high / 2.0
    while not fits(high):
        low, high = high, high * 2.0
        if high > 1e9:
            raise PrivacyError(f"no noise multiplier below 1e9 gives ({epsilon:g}, {delta:g})")
    while fits(low):
        low, high = low / 2.0, low
        if low < 1e-9:
            return high
    fresh = rdp_accountant if accounting == "rdp" else pld_accountant
    with quiet_dropped_orders():
        z = float(
            dp_accounting.calibrate_dp_mechanism(
                fresh,
                lambda z: dp_accounting.SelfComposedDpEvent(
                    sampled_gaussian_event(sampling_rate, z), uses
                ),
                epsilon,
                delta,
                dp_accounting.ExplicitBracketInterval(low, high),
                tol=1e-9 * high,
            )
        )
    z = z if fits(z) else high  # calibrate_dp_mechanism's ε never exceeds the target
    return fitted_as_a_whole(z, uses, epsilon, delta, accounting, sampling_rate)


def whole_epsilon(
    noise_multiplier: float, uses: int, delta: float, accounting: str, sampling_rate: float = 1.0
) -> float:
    """ε at ``delta`` of ``uses`` Gaussian releases at ``noise_multiplier`` (Poisson-subsampled
    at ``sampling_rate`` < 1) composed as a whole by a fresh dp-accounting accountant: one
    ``ComposedDpEvent`` of the releases, each composed after the other (under PLD each
    release's privacy-loss distribution is discretised on its own and the results convolved,
    not one release's self-composed)."""
    accountant = rdp_accountant() if accounting == "rdp" else pld_accountant()
    release = sampled_gaussian_event(sampling_rate, noise_multiplier)
    with quiet_dropped_orders():
        accountant.compose(dp_accounting.ComposedDpEvent([release] * uses))
    return float(accountant.get_epsilon(delta))


def fitted_as_a_whole(
    noise_multiplier: float,
    uses: int,
    epsilon: float,
    delta: float,
    accounting: str,
    sampling_rate: float = 1.0,
) -> float:
    """``noise_multiplier``, stepped up until its ``uses`` releases compose to at most
    ``epsilon`` both self-composed (:func:`composed_sampled_epsilon`, what the accountant
    checks) and as a whole (:func:`whole_epsilon`). ε falls about as 1/z, so each step
    multiplies z by the excess ratio (and 1 + 1e-9); the z given is returned unchanged when it
    fits (one release, and RDP, whose curves add exactly, always do but for round-off)."""
    z = noise_multiplier
    for _ in range(64):
        spent = max(
            composed_sampled_epsilon((((sampling_rate, z), uses),), delta, accounting),
            whole_epsilon(z, uses, delta, accounting, sampling_rate) if uses > 1 else 0.0,
        )
        if spent <= epsilon:
            return z
        z *= (spent / epsilon) * (1.0 + 1e-9)
    raise PrivacyError(
        f"no noise multiplier near {noise_multiplier:g} composes {uses} releases to at most "
        f"({epsilon:g}, {delta:g}) as a whole"
    )


def ledger_multipliers(ledger: pd.DataFrame) -> np.ndarray:
    """σ/Δ of each ledger row (∞ where the sensitivity is 0: such a release reveals nothing)."""
    sensitivity = ledger["sensitivity"].to_numpy(dtype=np.float64)
    scale = ledger["noise_scale"].to_numpy(dtype=np.float64)
    positive = sensitivity > 0
    return np.where(positive, scale / np.where(positive, sensitivity, 1.0), np.inf)


def composed_epsilon_from_ledger(
    ledger: pd.DataFrame,
    delta: float,
    accounting: str,
    *,
    gaussian_mechanisms: Collection[str] | None = None,
    sampling_rate: float | None = None,
) -> pd.Series:
    """ε per record rebuilt from a ``privacy_ledger`` table with dp-accounting's own
    accountants, independently of :class:`~netsim.privacy.accountant.PrivacyAccountant`.

    Rows of a Gaussian mechanism (``gaussian_mechanisms``, by default every mechanism whose
    name begins with ``gaussian``: netsim's Gaussian events; the accountant lists the ones it
    composed tightly in its report's ``tight_mechanisms``) are composed as
    ``GaussianDpEvent(noise_scale / sensitivity)`` by a fresh ``RdpAccountant`` (over
    :data:`RDP_ORDERS`) or ``PLDAccountant`` and converted at ``delta`` minus the record's
    other rows' δ; the other rows add their ε (basic composition). Rows of
    :data:`POISSON_MECHANISM` (a Poisson-subsampled release, add/remove adjacency) are
    composed as ``PoissonSampledDpEvent(sampling_rate, GaussianDpEvent(noise_scale /
    sensitivity))``: the run's q = batch / records_per_node, which the ledger does not hold,
    so such a ledger needs ``sampling_rate``. Under ``basic`` every row adds its ε. Indexed
    by record (records without a row are absent)."""
    check_accounting(accounting)
    if accounting == "basic":
        return ledger.groupby("record")["epsilon"].sum().rename("epsilon")
    names = ledger["mechanism"].astype(str)
    if gaussian_mechanisms is None:
        tight = names.str.startswith("gaussian").to_numpy()
    else:
        tight = names.isin(list(gaussian_mechanisms)).to_numpy()
    sampled = (names == POISSON_MECHANISM).to_numpy()
    if sampled.any() and sampling_rate is None:
        raise PrivacyError(
            f"the ledger has {POISSON_MECHANISM} rows (Poisson-subsampled releases): give "
            "composed_epsilon_from_ledger the run's sampling_rate (batch / records_per_node)"
        )
    frame = pd.DataFrame(
        {
            "record": ledger["record"].to_numpy(),
            "rate": np.where(sampled, sampling_rate or 1.0, 1.0),
            "multiplier": ledger_multipliers(ledger),
            "tight": tight | sampled,
            "epsilon": ledger["epsilon"].to_numpy(dtype=np.float64),
            "delta": ledger["delta"].to_numpy(dtype=np.float64),
        }
    )
    fresh = {"rdp": rdp_accountant, "pld": pld_accountant}[accounting]
    by_history: dict[tuple[SampledSignature, float], float] = {}  # records sharing a history
    result = {}
    for record, rows in frame.groupby("record", sort=True):
        gaussian = rows.loc[rows["tight"]].value_counts(["rate", "multiplier"]).sort_index()
        signature = tuple(((float(q), float(z)), int(n)) for (q, z), n in gaussian.items())
        other = rows[~rows["tight"]]
        target = delta - float(other["delta"].sum())
        key = (signature, target)
        if key not in by_history:
            accountant = fresh()
            with quiet_dropped_orders():
                for (rate, noise_multiplier), count in signature:
                    accountant.compose(sampled_gaussian_event(rate, noise_multiplier), count)
            by_history[key] = (
                0.0 if not signature
                else float(accountant.get_epsilon(target)) if target > 0 else math.inf
            )  # fmt: skip
        result[int(record)] = by_history[key] + float(other["epsilon"].sum())  # type: ignore[call-overload]
    return pd.Series(result, name="epsilon", dtype=np.float64).rename_axis("record")
