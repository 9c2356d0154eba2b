"""What each observer of a decentralised SGD run learned, from the run's own messages
(:mod:`netsim.privacy.linear`; ``docs/explanation/linear-accountant.md``), and the published
bounds of the same run beside it (the bound audit).

The ``privacy`` section says who observes (``observers``, ``coalitions``, ``links``) and what
they are trusted with (``trust``):

- ``pndp``: each sampled observer, each coalition and each link eavesdropper sees the messages
  it receives (a link's: both ways), knowing its own noise and secrets;
- ``secldp``: an eavesdropper of every message (observer −1−K−L after the K coalitions and L
  links), and each coalition with it (−1−k), the secrets of pairs outside the coalition hidden;
- ``ldp``: every message public, every noise but the unit's node's own known (observer −1−K−L).

Units are records of one batch group of a node (``dsgd.unit: record``; unit id node·G + group
with G groups a node) or nodes (``unit: node``; unit id = node).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from netsim.log import BOOL, F64, I64, TableSchema
from netsim.privacy.bounds import (
    BELOW_TOLERANCE,
    decor_epsilon,
    decor_secldp_slope,
    mfdl_corrected_muffliato_observers,
)
from netsim.privacy.linear import (
    LinearRun,
    UnitLosses,
    View,
    capped_by_local,
    epsilon_of,
    increment_losses,
    increments_apply,
    ldp_view,
    local_mu_squared,
    pndp_view,
    secldp_view,
    view_losses,
)
from netsim.privacy.pairwise import metropolis_from_edges
from netsim.privacy.threat import ThreatModel, pair_quantiles, summary_row, union_bound

UNITS_TABLE = TableSchema(
    name="linear_pairs",
    columns=(
        ("observer", I64),
        ("node", I64),
        ("group", I64),
        ("distance", I64),
        ("mu", F64),
        ("rho", F64),
        ("epsilon", F64),
        ("local_share", F64),
        ("exact", BOOL),
    ),
    description=(
        "What each observer learned about each privacy unit, from the run's messages as a "
        "linear system: the observer (a node; -1-k the k-th coalition, then the link "
        "eavesdroppers; under trust secldp or ldp, -1-K-L the observer of every message), the "
        "unit's node and batch group (-1: all of the node's records), hops from the observer "
        "to the node (-1 for the others), mu (the view is mu-GDP; inf: revealed without "
        "noise), the RDP slope rho = mu^2/2 (rho(alpha) = alpha * rho), epsilon at the run's "
        "delta (exact Gaussian profile), mu^2 as a share of the unit's local-DP mu^2, and "
        "whether mu is exact (false: a bound, the uses' Gram having negative entries)."
    ),
    role="ledger",
    metrics=("mu", "rho", "epsilon", "local_share"),
)


@dataclass(frozen=True)
class Accounted:
    """The losses of every accounted view: one :class:`UnitLosses` per observer id."""

    observers: list[int]
    losses: list[UnitLosses]


def observer_views(run: LinearRun, threat: ThreatModel) -> list[tuple[int, View | None, list[int]]]:
    """(observer id, view, coalition) of every accounted view under ``threat``'s trust; the
    view is None where the revealed increments account it (every message seen)."""
    trust = threat.config.trust
    coalitions = [list(c) for c in threat.config.coalitions]
    links = threat.links()
    everyone = -1 - len(coalitions) - len(links)
    if trust == "pndp":
        views: list[tuple[int, View | None, list[int]]] = [
            (int(v), pndp_view(run, [int(v)]), [int(v)]) for v in threat.observers
        ]
        views += [(-1 - k, pndp_view(run, c), c) for k, c in enumerate(coalitions)]
        views += [
            (-1 - len(coalitions) - j, link_view(run, a, b), []) for j, (a, b) in enumerate(links)
        ]
        return views
    if trust == "secldp":
        direct = increments_apply(run)
        views = [(everyone, None if direct else secldp_view(run, []), [])]
        views += [
            (-1 - k, None if direct else secldp_view(run, c), c) for k, c in enumerate(coalitions)
        ]
        return views
    return [(everyone, None, [])]


def link_view(run: LinearRun, a: int, b: int) -> View:
    """An eavesdropper on the link between ``a`` and ``b``: every message sent over it, either
    way; it knows no noise."""
    rows = [
        np.flatnonzero(
            ((r.sent_src == a) & (r.sent_dst == b)) | ((r.sent_src == b) & (r.sent_dst == a))
        )
        for r in run.rounds
    ]
    return View(rows, np.zeros(0, np.int64))


def account(run: LinearRun, threat: ThreatModel, unit: str) -> Accounted:
    """Every accounted view's unit losses (:func:`observer_views`), each bound capped at the
    unit's local-DP loss (:func:`~netsim.privacy.linear.capped_by_local`)."""
    trust = threat.config.trust
    observers, losses = [], []
    local = local_mu_squared(run, unit)
    for observer, view, coalition in observer_views(run, threat):
        if trust == "ldp" and increments_apply(run):
            losses.append(increment_losses(run, unit=unit, every_local=True))
        elif trust == "ldp":
            parts = [view_losses(run, ldp_view(run, node), unit=unit) for node in range(run.n)]
            losses.append(concatenate(parts))
        elif view is None:
            losses.append(increment_losses(run, coalition, unit=unit))
        else:
            losses.append(view_losses(run, view, unit=unit))
        losses[-1] = capped_by_local(losses[-1], local)
        observers.append(observer)
    return Accounted(observers, losses)


def concatenate(parts: Sequence[UnitLosses]) -> UnitLosses:
    """One :class:`UnitLosses` of several."""
    return UnitLosses(*(np.concatenate([getattr(p, key) for p in parts])
                        for key in ("node", "group", "mu_squared", "exact")))  # fmt: skip


@dataclass(frozen=True)
class Setting:
    """What the published bounds need to know of a run: the noise kind, the topology's links
    and the δ of the run's ε (the noise scales and sensitivity are read from the run)."""

    noise: str
    link_a: np.ndarray
    link_b: np.ndarray
    delta: float


def scales(run: LinearRun) -> tuple[float, float, float]:
    """The independent noise, the secrets' noise and the sensitivity of the run's first step
    (constant over a dsgd run), in gradient units."""
    for this in run.rounds:
        stepped = np.flatnonzero(this.step != 0)
        if stepped.size:
            node = stepped[0]
            secret = float(this.secret_std[0]) if this.secret_std.size else 0.0
            return float(this.noise_std[node]), secret, float(this.sensitivity[node])
    return 0.0, 0.0, 0.0


def audit_rows(
    run: LinearRun, threat: ThreatModel, accounted: Accounted, setting: Setting, unit: str
) -> list[tuple]:
    """The ``bound_audit`` rows: each accounted (observer, node unit) pair beside the
    published bound that claims to cover it, where one does — DECOR's accountant for the
    observer of every message (trust secldp, decor noise), Muffliato-SGD's corrected Thm 11
    for single observers (trust pndp, local noise, every node stepping and every link used
    each round)."""
    sigma, sigma_cor, sensitivity = scales(run)
    if unit != "node" or sigma <= 0:
        return []
    n, trust = run.n, threat.config.trust
    uses = np.zeros(n)
    for this in run.rounds:
        uses += (this.step != 0) & (this.sensitivity > 0)
    rows: list[tuple] = []
    everyone = -1 - len(threat.config.coalitions) - len(threat.config.links)
    alpha = 2.0  # Muffliato's bound is linear in α: its slope is the value over α
    corrected: dict[int, np.ndarray] = {}
    if trust == "pndp" and setting.noise == "local" and static(run, setting.link_a,
                                                               setting.link_b):  # fmt: skip
        singles = [observer for observer in accounted.observers if observer >= 0]
        full = metropolis_from_edges(n, setting.link_a, setting.link_b)
        values = mfdl_corrected_muffliato_observers(
            full, singles, len(run.rounds), alpha, sigma, sensitivity
        )
        corrected = dict(zip(singles, values, strict=True))
    for observer, losses in zip(accounted.observers, accounted.losses, strict=True):
        if trust == "secldp" and setting.noise == "decor" and observer == everyone:
            per_round = decor_secldp_slope(
                setting.link_a, setting.link_b, n, sigma=sigma, sigma_cor=sigma_cor,
                sensitivity=sensitivity,
            )  # fmt: skip
            slopes = per_round * uses[losses.node]
            epsilons = [decor_epsilon(float(x), setting.delta) for x in slopes]
            name = "decor_secldp"
        elif observer in corrected:
            slopes = corrected[observer][losses.node] / alpha
            epsilons = [epsilon_of(2.0 * float(x), setting.delta) for x in slopes]
            name = "muffliato_sgd_corrected"
        else:
            continue
        exact = losses.mu_squared / 2.0
        for k in range(losses.node.size):
            below = bool(slopes[k] < exact[k] * (1.0 - BELOW_TOLERANCE))
            rows.append((observer, int(losses.node[k]), name, float(exact[k]),
                         float(slopes[k]), epsilon_of(float(losses.mu_squared[k]), setting.delta),
                         float(epsilons[k]), below))  # fmt: skip
    return rows


def static(run: LinearRun, link_a: np.ndarray, link_b: np.ndarray) -> bool:
    """Whether every round stepped every node and used every link (the published bounds'
    setting)."""
    full = metropolis_from_edges(run.n, link_a, link_b)
    return all(bool(np.all(r.step != 0)) and abs(r.mixing - full).max() < 1e-12 for r in run.rounds)


def unit_rows(
    run: LinearRun, accounted: Accounted, hops: np.ndarray, observers: np.ndarray, delta: float,
    unit: str,
) -> tuple[list[np.ndarray], list[np.ndarray]]:  # fmt: skip
    """The ``linear_pairs`` columns and the ``privacy_pairs`` columns of every accounted pair
    (``hops``: observers × nodes, from :func:`netsim.privacy.threat.hops_from` for the single
    observers ``observers``)."""
    local = local_mu_squared(run, unit)
    groups = 1 + max((int(r.batch.max(initial=-1)) for r in run.rounds), default=0)
    pieces: dict[str, list[np.ndarray]] = {key: [] for key in (
        "observer", "node", "group", "distance", "mu2", "exact", "base")}  # fmt: skip
    for observer, losses in zip(accounted.observers, accounted.losses, strict=True):
        size = losses.node.size
        distance = np.full(size, -1, dtype=np.int64)
        if observer >= 0:
            row = int(np.searchsorted(observers, observer))
            distance = hops[row, losses.node].astype(np.int64)
        pieces["observer"].append(np.full(size, observer, dtype=np.int64))
        pieces["node"].append(losses.node)
        pieces["group"].append(losses.group)
        pieces["distance"].append(distance)
        pieces["mu2"].append(losses.mu_squared)
        pieces["exact"].append(losses.exact)
        pieces["base"].append(np.array([local.get((int(u), int(g)), math.nan) for u, g in
                                        zip(losses.node, losses.group, strict=True)]))  # fmt: skip
    joined = {key: np.concatenate(parts) if parts else np.zeros(0) for key, parts in pieces.items()}
    mu2 = joined["mu2"].astype(float)
    epsilon = np.array([epsilon_of(float(m), delta) for m in mu2])
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(joined["base"] > 0, mu2 / joined["base"], math.nan)
    record = joined["node"].astype(np.int64)
    if unit == "record":
        record = record * groups + joined["group"].astype(np.int64)
    linear = [joined["observer"].astype(np.int64), joined["node"].astype(np.int64),
              joined["group"].astype(np.int64), joined["distance"].astype(np.int64),
              np.sqrt(mu2), mu2 / 2.0, epsilon, share, joined["exact"].astype(bool)]  # fmt: skip
    pairs = [joined["observer"].astype(np.int64), record, joined["distance"].astype(np.int64),
             share, mu2 / 2.0, epsilon]  # fmt: skip
    return linear, pairs


def summary(
    run: LinearRun, accounted: Accounted, trust: str, delta: float, unit: str, epsilons: np.ndarray,
    exact: np.ndarray, sampled: int = 0, pairs: Sequence[np.ndarray] | None = None,
) -> tuple:  # fmt: skip
    """The ``privacy_summary`` row: the trust model's view, whether every pair is exact, the
    local ε of the worst unit and the pairs' worst, median and 90th percentile (``sampled``:
    the nodes a sample of observers was drawn from, 0 when every node is one), every ε by the
    exact Gaussian profile, and the union bound over the observers of ``pairs`` (the
    ``privacy_pairs`` columns of :func:`unit_rows`: its units and RDP slopes)."""
    local = local_mu_squared(run, unit)
    local_epsilon = max((epsilon_of(m, delta) for m in local.values()), default=0.0)
    network, median, p90 = pair_quantiles(epsilons)
    bounds = int((~exact).sum())
    claim = ("exact: the view is linear in the Gaussian noise" if bounds == 0 else
             f"exact but for {bounds} of {exact.size} pairs, bounds: their uses' Gram has "
             "negative entries (the smaller of sum |K| and lambda_max * uses)")  # fmt: skip
    return summary_row(
        view=f"linear_{trust}", claim=claim, observers=len(accounted.observers),
        pairs=int(epsilons.size), delta=delta, local_epsilon=local_epsilon,
        network_epsilon=network, epsilon_median=median, epsilon_p90=p90,
        closed_form_epsilon=math.nan,
        sampled_from=sampled, epsilon_conversion="gaussian_profile",
        **union_bound(
            pairs[1] if pairs is not None else np.zeros(0, np.int64),
            pairs[4] if pairs is not None else np.zeros(0), network, delta, "gaussian_profile",
        ),
    )  # fmt: skip
