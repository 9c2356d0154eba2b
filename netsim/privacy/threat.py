"""The ``privacy`` section: whom a run's privacy is stated against
(``docs/explanation/privacy.md``, "Threat models"), and the tables every per-observer accountant
writes.

- ``model: local`` (the default): every release is public; each record's releases compose in
  the learning section's ledger (``privacy_records``), as without this section.
- ``model: network``: each node sees only the messages it receives (Cyffers & Bellet 2022).
  The run then also states, per (observer, record) pair, what the observer learned
  (``privacy_pairs``) and the worst pair beside the local figure (``privacy_summary``).
  ``observers`` chooses whom to account (every node, or a uniform sample); ``coalitions``
  adds colluding sets of nodes, each observing the union of its members' views; ``links``
  adds eavesdroppers, each seeing the models sent over one link.

``budget`` says what the learning section's (ε, δ) bounds: each record's local-DP spend
(``local``, the default: the network view then states what each observer could learn from the
run that happened, beside the local figure), or each observer's (``network``: the threat
model is the ceiling, :mod:`netsim.privacy.ceiling`; a record is used for as long as no node
or coalition would learn more than the budget, so it may be used more often than local DP
allows). ``budget: network`` is an explicit key, not implied by ``model: network``, so that a
run made before it existed keeps its meaning and its id.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from netsim.contracts import BuildContext, Component, ComponentConfig, Section
from netsim.lazy import lazy_module
from netsim.log import F64, I64, STR, TableSchema

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

#: Accounting every observer of a larger network is left to a sample: the pairs table grows as
#: the square of the nodes (4.2 million rows at 2,048, the network-DP papers' scale).
MAX_ALL_OBSERVERS = 2048

PAIRS_TABLE = TableSchema(
    name="privacy_pairs",
    columns=(
        ("observer", I64),
        ("record", I64),
        ("distance", I64),
        ("local_share", F64),
        ("rho", F64),
        ("epsilon", F64),
    ),
    description=(
        "What an observer learned about a record (a privacy unit) from the messages it "
        "received: the observer (a node; -1-k for the k-th coalition; -1-K-j for the j-th "
        "link eavesdropper after K coalitions), hops between the observer and the record's "
        "node on the topology (-1: not connected, a coalition or a link), "
        "the RDP slope as a share of the record's local-DP slope (1: as if every release "
        "were public, 0: never reached the observer), the RDP slope (rho(alpha) = alpha * "
        "rho) and epsilon at the run's delta, by the conversion privacy_summary's "
        "epsilon_conversion names (the exact Gaussian profile or RDP's)."
    ),
    role="ledger",
    metrics=("local_share", "rho", "epsilon"),
)

SUMMARY_TABLE = TableSchema(
    name="privacy_summary",
    columns=(
        ("view", STR),
        ("claim", STR),
        ("observers", I64),
        ("pairs", I64),
        ("delta", F64),
        ("local_epsilon", F64),
        ("network_epsilon", F64),
        ("epsilon_median", F64),
        ("epsilon_p90", F64),
        ("closed_form_epsilon", F64),
        ("paths", I64),
        ("network_epsilon_se", F64),
        ("sampled_from", I64),
        ("epsilon_conversion", STR),
        ("union_delta", F64),
        ("union_epsilon", F64),
    ),
    description=(
        "One row: the observers' view (gaussian_exact: gossip averaging, linear in the "
        "noise; path_known: a walk whose realised path the observer is assumed to know), "
        "what is claimed (exact, or an RDP bound and how it was obtained), the observers "
        "and pairs accounted, delta, the local epsilon (the worst record with every release "
        "public), the network epsilon (the worst pair), the pairs' median and 90th "
        "percentile, and for a walk on a static topology the worst pair of the papers' "
        "path-secret closed form for a walk as long as the run's (NaN otherwise). The view "
        "path_secret_estimate is the papers' path-secret sum estimated from walk paths "
        "re-simulated on the run's churn schedule: paths is their number (0 for the other "
        "views) and network_epsilon_se the standard error of its worst pair's epsilon (NaN "
        "for the other views). sampled_from: the nodes a sample of single observers was "
        "drawn from (privacy.observers), 0 when every node is an observer; the worst pair is "
        "then the worst over the sample, not over every node. Each pair's epsilon holds at "
        "delta on its own (one observer and one unit). epsilon_conversion: how every epsilon "
        "of the row (the pairs', local_epsilon, closed_form_epsilon) was obtained at delta: "
        "gaussian_profile (the exact privacy profile of the Gaussian mechanism the view is, "
        "Balle & Wang 2018 Thm 8) or rdp (an RDP curve converted by dp-accounting's "
        "conversion, Canonne, Kamath & Steinke 2020 Prop. 12; looser than the profile, e.g. "
        "4.73 against 4.38 for one Gaussian release of noise multiplier 1 at delta 1e-5). "
        "union_delta and union_epsilon: a union bound over every accounted observer "
        "(coalitions and links included; over the sample when sampled_from > 0), for the "
        "worst unit: the probability that some observer's privacy loss about the unit "
        "exceeds network_epsilon (at most the sum over observers of each pair's loss tail), "
        "and the smallest epsilon at which that sum is delta; with probability 1 - that, "
        "no accounted observer's loss exceeds it."
    ),
    role="summary",
)


LINEAGE_TABLE = TableSchema(
    name="privacy_lineage",
    columns=(
        ("state", I64),
        ("parent", I64),
        ("unit", I64),
        ("owner", I64),
        ("shift", F64),
        ("noise_std", F64),
        ("holder", I64),
    ),
    description=(
        "Every model state the run made (privacy.views: true): the state it was made from "
        "(-1: an initial model), the privacy unit whose gradient made it and that unit's node "
        "(-1: none, e.g. a refused visit), how far the unit could move it (eta * sensitivity), "
        "the standard deviation of the noise the step added (eta * sigma) and the node whose "
        "visit made it, who sends it on (-1: an initial model)."
    ),
    role="ledger",
)

VIEWS_TABLE = TableSchema(
    name="privacy_views",
    columns=(("time", F64), ("node", I64), ("state", I64)),
    description=(
        "Every model state a node received (privacy.views: true): a walk's arrival, kept or "
        "dropped, and the state a node updated (its local copy or the arriving walk)."
    ),
    role="events",
    time="time",
)


#: Most coalitions and link eavesdroppers a run accounts (each is one more observer whose
#: view is composed for every unit, as a single observer's is, up to MAX_ALL_OBSERVERS).
MAX_COALITIONS = 1024
MAX_LINKS = MAX_ALL_OBSERVERS
#: Most members all coalitions together list.
MAX_COALITION_MEMBERS = 100_000
#: Most walk paths the path-secret estimate re-simulates (each as long as the run's walk).
MAX_SECRET_PATHS = 100_000


class ThreatModelConfig(ComponentConfig):
    """Whom the run's privacy is stated against (``docs/explanation/privacy.md``, "Threat
    models")."""

    #: ``local``: every release public (the learning section's ledger). ``network``: each node
    #: sees only what it receives, and the run states the pairs per observer.
    model: Literal["local", "network"] = "local"
    #: How many observers to account, drawn uniformly (every node when not given, up to
    #: 2,048 nodes).
    observers: int | None = Field(default=None, ge=1)
    #: Colluding sets of nodes, each observing the union of its members' views.
    coalitions: list[list[int]] = Field(default_factory=list, max_length=MAX_COALITIONS)
    #: Link eavesdroppers: each [a, b] sees every model sent over the link between a and b,
    #: either way, and knows no record (a walk's or gossip learning's models).
    links: list[list[int]] = Field(default_factory=list, max_length=MAX_LINKS)
    #: The δ every pair's ε is stated at (default: the learning section's δ, or 10⁻⁵).
    delta: float | None = Field(default=None, gt=0.0, lt=1.0, allow_inf_nan=False)
    #: Also write the views the accountant read: ``privacy_lineage`` (every model state) and
    #: ``privacy_views`` (who received which), large tables, to re-account a run offline.
    views: bool = False
    #: A walk DP-SGD run also states the papers' path-secret view estimated from this many
    #: walk paths re-simulated on the run's own churn schedule and visit times (a second
    #: ``privacy_summary`` row, ``path_secret_estimate``; 0: none). An estimate, not a bound.
    secret_paths: int = Field(default=0, ge=0, le=MAX_SECRET_PATHS)
    #: What the learning section's (ε, δ) bounds. ``local``: each record's releases as if all
    #: were public (its ledger). ``network``: what any node or coalition learns from the
    #: models it receives — a record is used until some observer's composed loss would pass
    #: the budget (:mod:`netsim.privacy.ceiling`; a walk DP-SGD run, algorithm dp-sgd).
    budget: Literal["local", "network"] = "local"
    #: What an observer of a protocol accounted as a linear system (the ``dsgd`` section;
    #: :mod:`netsim.privacy.linear`) sees and knows. ``pndp`` (pairwise network DP, the
    #: default): each observer the messages it receives, knowing its own noise and the secrets
    #: it shares. ``secldp`` (Allouah et al. 2024): every message, by an eavesdropper on every
    #: link (with each coalition as curious users); a secret shared by two users outside the
    #: coalition stays hidden. ``ldp``: every message public and every noise but the node's own
    #: known (the local-DP baseline).
    trust: Literal["pndp", "secldp", "ldp"] = "pndp"

    @model_validator(mode="after")
    def _network_budget(self) -> ThreatModelConfig:
        if self.budget == "network" and self.model != "network":
            raise ValueError(
                "privacy.budget network bounds what each observer receives: set "
                "privacy.model network (model local has no observers to bound)"
            )
        return self

    @field_validator("coalitions")
    @classmethod
    def _coalitions(cls, value: list[list[int]]) -> list[list[int]]:
        members_in_all = sum(len(members) for members in value)
        if members_in_all > MAX_COALITION_MEMBERS:
            raise ValueError(
                f"the coalitions list {members_in_all:,} members in all; at most "
                f"{MAX_COALITION_MEMBERS:,} (each coalition's view is the union of its members')"
            )
        for k, members in enumerate(value):
            if len(members) < 2 or len(set(members)) != len(members) or min(members) < 0:
                raise ValueError(
                    f"coalition {k} ({members}) must list at least two distinct nodes "
                    "(0-based ids); one node alone is an observer"
                )
        return value

    @field_validator("links")
    @classmethod
    def _links(cls, value: list[list[int]]) -> list[list[int]]:
        for k, ends in enumerate(value):
            if len(ends) != 2 or ends[0] == ends[1] or min(ends) < 0:
                raise ValueError(
                    f"link {k} ({ends}) must name its two ends, two distinct nodes (0-based ids)"
                )
        return value


class ThreatModel(Component):
    """The ``privacy`` section: the threat model the components that account per observer
    read through ``optional`` (the learning section, for a walk's or gossip learning's models;
    Muffliato's averaging)."""

    Config = ThreatModelConfig
    section = Section("privacy", after=("churn",))

    def __init__(self, config: ThreatModelConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.n = ctx.nodes
        self.observers = (
            sample_observers(self.n, config.observers, ctx.stream("observers"))
            if config.model == "network"
            else np.zeros(0, dtype=np.int64)
        )

    @classmethod
    def build(cls, config: ThreatModelConfig, ctx: BuildContext) -> ThreatModel:
        return cls(config, ctx)

    @classmethod
    def check(cls, config: ThreatModelConfig, ctx: BuildContext) -> None:
        if config.model == "local":
            return
        problem = observers_problem(
            "privacy", config.observers, ctx.nodes, MAX_ALL_OBSERVERS,
            "the pairs table grows as the square of the nodes",
        )  # fmt: skip
        if problem is not None:
            raise ValueError(problem)
        for key, groups in (("coalitions", config.coalitions), ("links", config.links)):
            for k, members in enumerate(groups):
                if max(members) >= ctx.nodes:
                    raise ValueError(
                        f"privacy.{key}[{k}] names node {max(members)}, but nodes are 0 to "
                        f"{ctx.nodes - 1}"
                    )

    @property
    def network(self) -> bool:
        return self.config.model == "network"

    def coalitions(self) -> list[list[int]]:
        """Every accounted view: each observer alone, then each coalition."""
        return [[int(v)] for v in self.observers] + [list(c) for c in self.config.coalitions]

    def links(self) -> list[list[int]]:
        """Every link eavesdropper's two ends."""
        return [list(ends) for ends in self.config.links]

    def observer_ids(self) -> np.ndarray:
        """The ``observer`` column of each view of :meth:`coalitions`, then of :meth:`links`
        (−1−k for the k-th coalition, then the links in order after them)."""
        k = len(self.config.coalitions) + len(self.config.links)
        return np.concatenate([self.observers, -1 - np.arange(k, dtype=np.int64)])

    def delta_for(self, default: float) -> float:
        return self.config.delta if self.config.delta is not None else default


def trust_problem(threat: ThreatModelConfig | None, section: str) -> str | None:
    """Why ``privacy.trust`` does not fit ``section``, whose accountant states pairwise network
    DP only (None if it fits): SecLDP and local DP are views of the linear accountant."""
    if threat is None or threat.model != "network" or threat.trust == "pndp":
        return None
    return (
        f"privacy.trust {threat.trust}: the {section} section accounts what each observer "
        "receives (pairwise network DP, trust pndp); secldp and ldp are accounted for "
        "decentralised SGD (the dsgd section)"
    )


def sample_observers(n: int, count: int | None, rng: np.random.Generator) -> np.ndarray:
    """The accounted observers: every node (``count`` None), or a uniform sample of
    ``count`` nodes drawn from ``rng`` (sorted)."""
    if count is None:
        return np.arange(n, dtype=np.int64)
    return np.sort(rng.choice(n, count, replace=False)).astype(np.int64)


def observers_problem(key: str, count: int | None, nodes: int, limit: int, why: str) -> str | None:
    """Why ``<key>.observers`` = ``count`` does not fit a run of ``nodes`` (None if it does):
    every node is accounted only up to ``limit`` nodes (``why``), and a sample is at most
    the nodes."""
    if count is None and nodes > limit:
        return (
            f"{key}.observers: accounting all {nodes:,} nodes as observers is left to a sample "
            f"above {limit:,} nodes ({why}); give a sample size"
        )
    if count is not None and count > nodes:
        return f"{key}.observers ({count}) must be at most nodes ({nodes})"
    return None


def sampled_from(nodes: int, observers: np.ndarray) -> int:
    """The ``sampled_from`` of a ``privacy_summary`` row: ``nodes`` when the single observers
    are a sample of them, 0 when every node is one."""
    return int(nodes) if np.asarray(observers).size < nodes else 0


def sample_phrase(row: Any) -> str:
    """ ", worst over a sample of k of the n nodes" when a summary row's observers were a
    sample ("" otherwise, and for rows written before the column)."""
    nodes = row.get("sampled_from", 0) if hasattr(row, "get") else 0
    if not nodes or pd.isna(nodes):
        return ""
    return f"; the worst over the sampled observers (privacy.observers) of {int(nodes):,} nodes"


def pair_quantiles(epsilons: np.ndarray) -> tuple[float, float, float]:
    """(worst, median, 90th percentile) of the pairs' ε (0, NaN, NaN without pairs)."""
    if not epsilons.size:
        return 0.0, float("nan"), float("nan")
    quantiles = np.quantile(epsilons, [0.5, 0.9])
    if not np.isnan(epsilons).any():
        # interpolating between two infinite pairs gives inf − inf: the quantile is infinite
        quantiles = np.where(np.isnan(quantiles), np.inf, quantiles)
    median, p90 = quantiles
    return float(epsilons.max()), float(median), float(p90)


def hops_from(indptr: np.ndarray, indices: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """Hop distances (sources × nodes; −1 where unreachable) over a CSR neighbour list."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import shortest_path

    n = indptr.size - 1
    sources = np.asarray(sources, dtype=np.int64)
    if indices.size >= n * (n - 1) and n > 1:  # complete: one hop (a BFS would cost n³)
        adjacency = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(n, n))
        adjacency.setdiag(0)
        if adjacency.nnz == n * (n - 1):
            hops = np.ones((sources.size, n), dtype=np.int64)
            hops[np.arange(sources.size), sources] = 0
            return hops
    adjacency = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(n, n))
    hops = shortest_path(adjacency, directed=False, unweighted=True, indices=sources)
    return np.where(np.isfinite(hops), hops, -1).astype(np.int64)


#: The columns of a ``privacy_summary`` row that only an estimated view fills.
ESTIMATE_DEFAULTS: dict[str, Any] = {"paths": 0, "network_epsilon_se": float("nan")}


def summary_row(**values: Any) -> tuple[Any, ...]:
    """A ``privacy_summary`` row from its columns by name (every column required but those
    of :data:`ESTIMATE_DEFAULTS`, for a bound or an exact view)."""
    values = {**ESTIMATE_DEFAULTS, **values}
    return tuple(values[name] for name, _ in SUMMARY_TABLE.columns)


#: The ``epsilon_conversion`` of a ``privacy_summary`` row, and what each says: how the row's
#: ε (every pair's, the local and the closed form) was obtained from its mechanism at δ.
CONVERSIONS: dict[str, str] = {
    "gaussian_profile": "ε from the exact Gaussian privacy profile",
    "rdp": "ε converted from the RDP curve (looser than a Gaussian's exact profile)",
}


def conversion_phrase(row: Any) -> str:
    """How a summary row's ε were obtained, "; ε from …" (:data:`CONVERSIONS`; "" for rows
    written before the column)."""
    name = row.get("epsilon_conversion") if hasattr(row, "get") else None
    if not isinstance(name, str) or not name:
        return ""
    return f"; {CONVERSIONS.get(name, name)}"


def union_phrase(row: Any) -> str:
    """A summary row's union bound, "; against every observer at once (union bound): ε = …
    at δ = …, or ε = … at δ = …" ("" for rows written before the columns)."""
    if not hasattr(row, "get"):
        return ""
    union_delta, union_epsilon = row.get("union_delta"), row.get("union_epsilon")
    if union_delta is None or union_epsilon is None or pd.isna(union_delta):
        return ""
    sampled = row.get("sampled_from", 0)
    whom = "the sampled observers" if sampled and not pd.isna(sampled) else "every observer"
    return (
        f"; against {whom} at once (union bound): ε = {union_epsilon:.3g} at δ = "
        f"{row['delta']:g}, or ε = {row['network_epsilon']:.3g} at δ = {union_delta:.2g}"
    )


def loss_tails(rho: np.ndarray, epsilon: float, conversion: str) -> np.ndarray:
    """P[L > ``epsilon``] for each pair's privacy loss L (an upper bound where ``rho`` is one),
    from its RDP slope ``rho`` (ρ(α) = α·rho): for ``gaussian_profile`` the view is the
    Gaussian mechanism of μ² = 2·rho, whose loss is N(rho, 2·rho), so the tail is
    Φ(μ/2 − ε/μ) exactly; for ``rdp`` only the curve is known, and Markov's inequality on
    e^{(α−1)L} (E = e^{(α−1)D_α} ≤ e^{(α−1)α·rho}) at the best α gives
    exp(−(ε − rho)²/(4·rho)) for ε ≥ rho (1 below). 0 where rho is 0, 1 where it is ∞."""
    from scipy.special import ndtr

    rho = np.asarray(rho, dtype=np.float64)
    tails = np.where(np.isinf(rho), 1.0, 0.0)
    positive = (rho > 0) & np.isfinite(rho)
    r = rho[positive]
    if conversion == "gaussian_profile":
        mu = np.sqrt(2.0 * r)
        tails[positive] = ndtr(mu / 2.0 - epsilon / mu)
    elif conversion == "rdp":
        tails[positive] = np.where(epsilon > r, np.exp(-((epsilon - r) ** 2) / (4.0 * r)), 1.0)
    else:
        raise ValueError(f"unknown epsilon conversion {conversion!r}")
    return tails


def union_bound(
    record: np.ndarray, rho: np.ndarray, network_epsilon: float, delta: float, conversion: str
) -> dict[str, float]:
    """The ``union_delta`` and ``union_epsilon`` of a ``privacy_summary`` row from its pairs
    (``record``: each pair's unit, ``rho``: its RDP slope; every accounted observer's pairs).

    A pair's (ε, δ) holds for its one observer; δ is not the probability that the guarantee
    fails, so adding the pairs' δ (observers × δ) states nothing about all observers at once.
    What adds is a probability: the tail P[L_o > ε] of observer o's privacy loss about the
    unit (:func:`loss_tails`; the loss is at most ε except with that probability, which
    makes the view (ε, tail)-DP). By the union bound, for a unit u, P[some observer's loss
    exceeds ε] ≤ Σ_o P[L_{o,u} > ε]: with probability at least 1 − that sum, no accounted
    observer (coalitions and link eavesdroppers included) learns more than ε about u, and
    each is (ε, that sum)-DP. ``union_delta``: the largest sum over units at
    ``network_epsilon`` (at most 1); ``union_epsilon``: the smallest ε at which the largest
    sum is ``delta`` (bisection to 1e-9 relative; ∞ when a unit is revealed). Both are over
    the accounted observers only: with a sample of them, a node outside it is not in the
    sum. One pass over the pairs per bisection step (each tail in closed form)."""
    record = np.asarray(record, dtype=np.int64)
    rho = np.asarray(rho, dtype=np.float64)
    if not rho.size:
        return {"union_delta": 0.0, "union_epsilon": 0.0}
    if np.isinf(rho).any():
        return {"union_delta": 1.0, "union_epsilon": math.inf}
    units, index = np.unique(record, return_inverse=True)

    def worst(epsilon: float) -> float:
        tails = loss_tails(rho, epsilon, conversion)
        sums = np.bincount(index, weights=tails, minlength=units.size)
        return float(sums.max(initial=0.0))

    union_delta = min(worst(network_epsilon), 1.0) if math.isfinite(network_epsilon) else 0.0
    low, high = 0.0, max(float(network_epsilon), 1.0) if math.isfinite(network_epsilon) else 1.0
    if worst(low) <= delta:
        return {"union_delta": union_delta, "union_epsilon": 0.0}
    while worst(high) > delta:
        low, high = high, 2.0 * high
    while high - low > 1e-9 * high:
        middle = 0.5 * (low + high)
        if worst(middle) > delta:
            low = middle
        else:
            high = middle
    return {"union_delta": union_delta, "union_epsilon": high}
