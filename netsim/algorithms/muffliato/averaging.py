"""Muffliato's Gaussian gossip averaging on the simulated network, with its privacy accounted
per observer from the rounds the run really did (Cyffers, Even, Bellet, Massoulié, NeurIPS
2022; ``docs/papers.md``).

At the start every node draws its private vector uniformly from the L2 ball of ``radius`` and
adds N(0, σ²I) to it, once. Every ``period`` the online nodes average over the links that are
up: each link whose two ends are online carries one message each way (through the transport:
per-message loss and link failures apply, and a link either of whose messages is lost is not
used in that round by either end, as an exchange confirmed both ways would be), and the used
links' Metropolis–Hastings weights give the round's W_t, so x ← W_t x. An offline node keeps
its value and rejoins the averaging when it comes back.

At the end, :func:`~netsim.privacy.pairwise.pairwise_epsilons` turns the W_t of the run into
each accounted observer's exact (ε, δ) for every other node's value: what that observer
learns from the messages it received (network DP: ``docs/papers.md``, "Network DP: pairwise
privacy of Gaussian gossip averaging").

Tables: ``muffliato_rounds`` (one row per round: online nodes, links used, the RMS distance of
the online nodes' values to the true mean), ``privacy_pairs`` (observer, record, hops apart,
the record's leverage in the view as its share of local DP, RDP slope, ε), ``privacy_summary``
(:mod:`netsim.privacy.threat`: local ε, network ε — the worst pair —, the pairs' median and
90th percentile) and ``muffliato_summary`` (noise, last error, and the central yardstick: the
error of a trusted curator releasing the mean at the network ε).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from netsim.algorithms.muffliato.config import MAX_ALL_OBSERVERS, MuffliatoConfig
from netsim.contracts import BuildContext, RoundLearner, Section
from netsim.errors import ScenarioError
from netsim.lazy import lazy_module
from netsim.log import F64, I64, TableSchema
from netsim.privacy.bounds import (
    AUDIT_TABLE,
    BELOW_TOLERANCE,
    audit_lines,
    muffliato_message_sums,
)
from netsim.privacy.linear import LinearRound, LinearRun
from netsim.privacy.mechanisms import analytic_gaussian_sigma, gaussian_epsilon
from netsim.privacy.pairwise import chebyshev_gamma, metropolis_from_edges, pairwise_epsilons
from netsim.privacy.threat import (
    PAIRS_TABLE,
    conversion_phrase,
    observers_problem,
    pair_quantiles,
    sample_observers,
    sample_phrase,
    sampled_from,
    summary_row,
    trust_problem,
    union_bound,
    union_phrase,
)
from netsim.privacy.threat import SUMMARY_TABLE as PRIVACY_SUMMARY_TABLE

if TYPE_CHECKING:
    import pandas as pd
    import scipy.sparse as sp
    import scipy.sparse.csgraph as csgraph
else:
    pd = lazy_module("pandas")
    sp = lazy_module("scipy.sparse")
    csgraph = lazy_module("scipy.sparse.csgraph")

#: Most values (nodes × dimension) an averaging holds: 400 MB a copy, and a round keeps a
#: few (values, noise, mixed).
MAX_VALUES = 50_000_000

ROUNDS_TABLE = TableSchema(
    name="muffliato_rounds",
    columns=(("round", I64), ("time", F64), ("online", I64), ("links", I64), ("rmse", F64)),
    description=(
        "One row per averaging round: 1-based round, time, online nodes, links used (both "
        "messages delivered), and the root mean square L2 distance of the online nodes' "
        "values to the mean of the true (noiseless) values after the round."
    ),
    role="rounds",
    time="time",
    round="round",
)

SUMMARY_TABLE = TableSchema(
    name="muffliato_summary",
    columns=(
        ("sigma", F64),
        ("sensitivity", F64),
        ("final_rmse", F64),
        ("central_rmse", F64),
    ),
    description=(
        "One row: the noise each node adds and the sensitivity, the last round's RMS error, "
        "and the central yardstick: the expected L2 error of the mean released by a trusted "
        "curator with the analytic Gaussian at the network epsilon (privacy_summary)."
    ),
    role="summary",
)


def undirected_links(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every link of a CSR neighbour list once, as (smaller, larger) node pairs."""
    sources = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    low, high = np.minimum(sources, indices), np.maximum(sources, indices)
    keep = low != high
    pairs = np.unique(np.stack([low[keep], high[keep]], axis=1), axis=0)
    return pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64)


class MuffliatoAveraging(RoundLearner):
    """Gaussian gossip averaging over the links up, accounted per observer (the
    ``muffliato`` section)."""

    Config = MuffliatoConfig
    section = Section("muffliato", after=("mi_ogd",))
    tables = (ROUNDS_TABLE, PAIRS_TABLE, PRIVACY_SUMMARY_TABLE, SUMMARY_TABLE, AUDIT_TABLE)
    optional: ClassVar[dict[str, str]] = {  # type: ignore[assignment]
        "privacy": "the threat model: with model network, its observers, coalitions and delta"
    }

    @classmethod
    def check_inputs(cls, config: MuffliatoConfig, ctx: BuildContext) -> None:
        """Chebyshev acceleration is tuned by the whole topology's spectral gap: a
        disconnected topology is refused here, so ``netsim validate`` finds it as ``run``
        would (:func:`connected_gap`)."""
        if config.acceleration == "chebyshev" and ctx.topology is not None:
            topology = ctx.topology
            connected_gap(topology.n, *undirected_links(topology.indptr, topology.indices))

    def __init__(self, config: MuffliatoConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        assert ctx.sim is not None and ctx.network is not None
        self.sim, self.network = ctx.sim, ctx.network
        topology = self.network.topology
        self.n = topology.n
        self.link_a, self.link_b = undirected_links(topology.indptr, topology.indices)
        self.values = uniform_ball(self.n, config.dimension, config.radius, ctx.stream("values"))
        noise = ctx.stream("noise").normal(0.0, config.sigma, self.values.shape)
        self.state = self.values + noise
        self.previous: np.ndarray | None = None
        #: γ of Chebyshev acceleration (None: plain gossip), from the whole topology.
        self.gamma = (
            chebyshev_gamma(connected_gap(self.n, self.link_a, self.link_b))
            if config.acceleration == "chebyshev"
            else None
        )
        self.loss_rng = ctx.stream("loss")
        threat = ctx.find("privacy")
        if threat is not None and threat.network:
            # the scenario's threat model: its observers, coalitions and δ
            self.observers = threat.observers
            self.coalitions = [list(c) for c in threat.config.coalitions]
            self.delta = threat.delta_for(config.delta)
        else:
            self.observers = sample_observers(self.n, config.observers, ctx.stream("observers"))
            self.coalitions = []
            self.delta = config.delta
        self.mixing: list[sp.csr_matrix] = []
        self.rmse = math.nan
        self.rounds_table = self.sim.log.table(ROUNDS_TABLE)

    @classmethod
    def build(cls, config: MuffliatoConfig, ctx: BuildContext) -> MuffliatoAveraging:
        return cls(config, ctx)

    @classmethod
    def check(cls, config: MuffliatoConfig, ctx: BuildContext) -> None:
        problem = config.rounds_problem("muffliato", ctx.duration)
        if problem is not None:
            raise ValueError(problem)
        values = ctx.nodes * config.dimension
        if values > MAX_VALUES:
            raise ValueError(
                f"muffliato.dimension {config.dimension:,} at {ctx.nodes:,} nodes is "
                f"{values:,} values, {8 * values / 2**30:.1f} GiB a copy; at most "
                f"{MAX_VALUES:,} (nodes × dimension), for the values and their noise to fit"
            )
        threat = ctx.config_of("privacy")
        problem = trust_problem(threat, "muffliato")
        if problem:
            raise ValueError(problem)
        if threat is not None and threat.model == "network":
            if config.observers is not None:
                raise ValueError(
                    "muffliato.observers and the privacy section both choose the observers: "
                    "give privacy.observers only (the privacy section's model network is the "
                    "run's threat model)"
                )
            if threat.links:
                raise ValueError(
                    "privacy.links: Muffliato accounts nodes and coalitions, not link "
                    "eavesdroppers (a coalition of the link's two ends sees at least what it "
                    "carries): give the link as a coalition"
                )
            if threat.budget == "network":
                raise ValueError(
                    "privacy.budget network bounds the uses of the learning section's records; "
                    "Muffliato adds its noise once and uses nothing again: use privacy.budget "
                    "local"
                )
            count = threat.observers
        else:
            count = config.observers
        problem = observers_problem(
            "privacy" if threat is not None and threat.model == "network" else "muffliato",
            count, ctx.nodes, MAX_ALL_OBSERVERS, "one SVD of the observer's view per node",
        )  # fmt: skip
        if problem is not None:
            raise ValueError(problem)

    def round(self, t: int) -> None:
        """One averaging round over the links whose ends are online and whose two messages
        arrive."""
        online = self.network.nodes.online
        both = online[self.link_a] & online[self.link_b]
        src, dst = self.link_a[both], self.link_b[both]
        if src.size:
            if self.network.lossy:
                forth = self.network.send_batch(src, dst, kind="muffliato", rng=self.loss_rng)
                back = self.network.send_batch(dst, src, kind="muffliato", rng=self.loss_rng)
                used = ~(forth.lost | back.lost)
                src, dst = src[used], dst[used]
            else:
                self.network.deliver_reliably(2 * int(src.size))
        weights = metropolis_from_edges(self.n, src, dst)
        mixed = weights @ self.state
        if self.gamma is not None and self.previous is not None:
            mixed = self.gamma * mixed + (1.0 - self.gamma) * self.previous
        self.previous, self.state = self.state, mixed
        self.mixing.append(weights)
        truth = self.values.mean(axis=0)
        errors = ((self.state[online] - truth) ** 2).sum(axis=1)
        self.rmse = float(np.sqrt(errors.mean())) if errors.size else math.nan
        self.rounds_table.append(t, self.sim.now, int(online.sum()), int(src.size), self.rmse)

    def linear_run(self) -> LinearRun:
        """The rounds that ran as a run of the linear accountant
        (:mod:`netsim.privacy.linear`): one input at round 0, the noisy value (sensitivity Δ,
        noise σ), then only averaging; round t's messages are the neighbours' states over the
        links it used. Its pairs equal ``privacy_pairs`` (``tests/test_linear_accountant.py``).
        Like ``privacy_pairs``, it leaves out a message that arrived over a link left unused
        because the other way's message was lost: under loss both understate what the
        receiver saw."""
        run = LinearRun(self.n)
        ones = np.ones(self.n)
        for t, weights in enumerate(self.mixing):
            links = sp.coo_matrix(weights)
            off = links.row != links.col
            src, dst = links.col[off].astype(np.int64), links.row[off].astype(np.int64)
            run.rounds.append(LinearRound(
                mixing=sp.csr_matrix(weights), step=ones * (t == 0),
                noise_std=ones * self.config.sigma, sensitivity=ones * self.config.sensitivity,
                batch=np.zeros(self.n, np.int64), sent_src=src, sent_dst=dst,
                delivered=np.ones(src.size, bool), gamma=self.gamma if t > 0 else None,
            ))  # fmt: skip
        return run

    def finish(self) -> None:
        """The pairwise accounting of the rounds that ran, and the summary."""
        config = self.config
        log = self.sim.log
        # the first round runs at time 0, so there is always at least one W_t
        pairs = pairwise_epsilons(
            self.mixing, sigma=config.sigma, sensitivity=config.sensitivity,
            delta=self.delta, observers=self.observers, acceleration=self.gamma,
            coalitions=self.coalitions,
        )  # fmt: skip
        adjacency = sp.csr_matrix(
            (np.ones(self.link_a.size), (self.link_a, self.link_b)), shape=(self.n, self.n)
        )
        hops = csgraph.shortest_path(
            adjacency, directed=False, unweighted=True, indices=self.observers
        )
        observer = pairs["observer"].to_numpy(np.int64)
        record = pairs["record"].to_numpy(np.int64)
        # the observers are sorted: each pair's row of ``hops`` by binary search (a coalition,
        # observer −1−k, has no distance: −1)
        single = observer >= 0
        distance = np.full(observer.size, -1, dtype=np.int64)
        found = hops[np.searchsorted(self.observers, observer[single]), record[single]]
        distance[single] = np.where(np.isfinite(found), found, -1).astype(np.int64)
        log.table(PAIRS_TABLE).extend([
            observer, record, distance,
            pairs["leverage"].to_numpy(float), pairs["rho"].to_numpy(float),
            pairs["epsilon"].to_numpy(float),
        ])  # fmt: skip
        self.audit_bounds(pairs)
        epsilons = pairs["epsilon"].to_numpy(float)
        local = gaussian_epsilon(config.sigma, config.sensitivity, self.delta)
        network, median, p90 = pair_quantiles(epsilons)
        log.table(PRIVACY_SUMMARY_TABLE).append(*summary_row(
            view="gaussian_exact", claim="exact: the view is linear in the Gaussian noise",
            observers=int(self.observers.size) + len(self.coalitions), pairs=int(epsilons.size),
            delta=self.delta,
            local_epsilon=local, network_epsilon=network, epsilon_median=median,
            epsilon_p90=p90, closed_form_epsilon=math.nan,
            sampled_from=sampled_from(self.n, self.observers),
            epsilon_conversion="gaussian_profile",
            **union_bound(record, pairs["rho"].to_numpy(float), network, self.delta,
                          "gaussian_profile"),
        ))  # fmt: skip
        central = math.nan  # no curator's noise matches an infinite (or zero) network ε
        if 0 < network < math.inf:
            curator = analytic_gaussian_sigma(config.sensitivity / self.n, network, self.delta)
            central = curator * math.sqrt(config.dimension)
        log.table(SUMMARY_TABLE).append(config.sigma, config.sensitivity, self.rmse, central)

    def audit_bounds(self, pairs: pd.DataFrame) -> None:
        """The ``bound_audit`` rows: each single observer's pairs beside Muffliato's
        per-message sum as its authors' code computes it
        (:func:`netsim.privacy.bounds.muffliato_message_sums`), the Gaussian profile of its
        slope as its ε. Acceleration changes the messages, which the sum does not follow: no
        rows then."""
        if self.gamma is not None:
            return
        single = pairs[pairs["observer"] >= 0]
        observers = np.unique(single["observer"].to_numpy(np.int64))
        if not observers.size:
            return
        config = self.config
        sums = muffliato_message_sums(self.mixing, observers, config.sigma, config.sensitivity)
        observer = single["observer"].to_numpy(np.int64)
        record = single["record"].to_numpy(np.int64)
        bound = sums[np.searchsorted(observers, observer), record]
        exact = single["rho"].to_numpy(float)
        epsilon = [gaussian_epsilon(1.0, math.sqrt(2.0 * b), self.delta) for b in bound]
        self.sim.log.table(AUDIT_TABLE).extend([
            observer, record, ["muffliato_message_sum"] * observer.size, exact, bound,
            single["epsilon"].to_numpy(float), epsilon, bound < exact * (1.0 - BELOW_TOLERANCE),
        ])  # fmt: skip

    @classmethod
    def summary_lines(cls, tables: Mapping[str, pd.DataFrame]) -> list[str]:
        """The averaging error and the privacy per observer."""
        summary, errors = tables.get("privacy_summary"), tables.get("muffliato_summary")
        if summary is None or not len(summary) or errors is None or not len(errors):
            return []
        row, error = summary.iloc[0], errors.iloc[0]
        return [
            f"muffliato: RMS error {error['final_rmse']:.4g} after the last round (a curator "
            f"at the network ε: {error['central_rmse']:.4g})",
            f"privacy per observer at δ = {row['delta']:g}: worst pair ε = "
            f"{row['network_epsilon']:.3g}, median {row['epsilon_median']:.3g}, 90th percentile "
            f"{row['epsilon_p90']:.3g}; local DP ε = {row['local_epsilon']:.3g} "
            f"({int(row['pairs'])} pairs, {int(row['observers'])} observers"
            f"{sample_phrase(row)}{conversion_phrase(row)}){union_phrase(row)}",
            *audit_lines(tables.get("bound_audit")),
        ]


def topology_gap(n: int, link_a: np.ndarray, link_b: np.ndarray) -> float:
    """The spectral gap (second smallest eigenvalue of I − W) of the whole topology's
    Metropolis–Hastings weights."""
    from scipy.sparse.linalg import eigsh

    weights = metropolis_from_edges(n, link_a, link_b)
    if n <= 2000:
        values = np.linalg.eigvalsh(weights.toarray())
        return float(1.0 - values[-2])
    values = eigsh(weights, k=2, which="LA", return_eigenvectors=False)
    return float(1.0 - np.sort(values)[0])


def connected_gap(n: int, link_a: np.ndarray, link_b: np.ndarray) -> float:
    """:func:`topology_gap`, refused in one message when the topology is not connected
    (Chebyshev acceleration is tuned by a gap that is then 0)."""
    from scipy.sparse.csgraph import connected_components

    adjacency = sp.csr_matrix((np.ones(link_a.size), (link_a, link_b)), shape=(n, n))
    components = int(connected_components(adjacency, directed=False)[0])
    if components > 1:
        raise ScenarioError(
            f"muffliato.acceleration chebyshev needs a connected topology: this one has "
            f"{components} components (its spectral gap is 0); use acceleration: none or a "
            "connected topology"
        )
    return topology_gap(n, link_a, link_b)


def uniform_ball(count: int, dimension: int, radius: float, rng: np.random.Generator) -> np.ndarray:
    """``count`` points uniform in the L2 ball of ``radius`` in ``dimension`` dimensions."""
    directions = rng.normal(size=(count, dimension))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    lengths = radius * rng.random(count) ** (1.0 / dimension)
    return directions * lengths[:, None]
