"""Privacy per observer of the models the ``learning`` section trains (``privacy.model:
network``): the lineage of the models and who received them, the pairs and summary written
from it (:mod:`netsim.privacy.walk_pairwise`: path known; the papers' path-secret closed form
and its estimate under churn), and the per-observer ceiling of ``privacy.budget: network``
(:mod:`netsim.privacy.ceiling`). :class:`~netsim.learning.sgd_agent.SGDAgent` holds one
:class:`ObserverAccounting` when the scenario's threat model is the network.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from netsim.contracts import BuildContext
from netsim.learning.private_sgd import PrivateSGD
from netsim.learning.state import ModelState
from netsim.privacy.bounds import AUDIT_TABLE, BELOW_TOLERANCE
from netsim.privacy.ceiling import LineageCeiling
from netsim.privacy.lineage import Lineage
from netsim.privacy.mechanisms import gaussian_epsilons
from netsim.privacy.threat import (
    LINEAGE_TABLE,
    MAX_ALL_OBSERVERS,
    VIEWS_TABLE,
    ThreatModel,
    hops_from,
    pair_quantiles,
    sampled_from,
    summary_row,
    union_bound,
)
from netsim.privacy.threat import PAIRS_TABLE as PRIVACY_PAIRS_TABLE
from netsim.privacy.threat import SUMMARY_TABLE as PRIVACY_SUMMARY_TABLE
from netsim.privacy.walk_pairwise import (
    epsilons_of_slopes,
    path_known_exact_mu_squared,
    path_known_slopes,
    path_secret_exposure,
    path_secret_slopes,
    slope_for_epsilon,
)
from netsim.sim import Simulation


class ObserverAccounting:
    """What each observer received of the models, and what it learned (module docstring)."""

    def __init__(
        self, sim: Simulation, sgd: PrivateSGD, threat: ThreatModel, config: Any,
        ctx: BuildContext,
    ) -> None:  # fmt: skip
        """Keep the lineage of the models and who received them, for the pairs per observer
        (:mod:`netsim.privacy.walk_pairwise`, path known). Amplification by iteration is
        claimed when every update map is contractive: a convex loss, β-smooth (a clipped GLM
        gradient is the gradient of a convex surrogate no less smooth), and η ≤ 2/(β + λ) at
        the largest step size, η₁ = learning_rate."""
        self.sim, self.sgd = sim, sgd
        self.threat = threat
        self.lineage = Lineage()
        #: The topology's neighbour lists (hops between observer and record).
        self.topology: tuple[np.ndarray, np.ndarray] | None = (
            (ctx.topology.indptr, ctx.topology.indices) if ctx.topology is not None else None
        )
        multiplier = self.sgd.accountant.noise_multiplier_for(self.sgd.mechanism)
        assert multiplier is not None  # checked with the scenario
        self.noise_multiplier = multiplier
        #: One contribution's RDP slope seen at once, Δ²/(2σ²) = 1/(2z²).
        self.contribution_slope = 1.0 / (2.0 * multiplier**2)
        units = self.sgd.accountant.records
        #: The node of each privacy unit.
        self.owner = np.arange(units) // (1 if sgd.unit == "node" else sgd.records_per_node)
        curvature = self.sgd.model.curvature()
        beta = curvature.smoothness
        self.amplified = bool(
            curvature.convex
            and beta is not None
            and config.learning_rate * (beta + config.regularisation) <= 2.0
        )
        #: With ``privacy.budget: network``: the per-observer ceiling that admits each use.
        self.ceiling: LineageCeiling | None = None
        if threat.config.budget == "network":
            self._enforce_network_budget(threat, config)
        #: With ``privacy.secret_paths``: the time of every visit, the run's churn schedule
        #: and the stream its walk paths are re-simulated from (the path-secret estimate).
        self.step_times: list[float] | None = None
        self.online_schedule: Any = None
        self.secret_rng: np.random.Generator | None = None
        #: How the walk's paths are re-simulated (told by the walk:
        #: :meth:`~netsim.contracts.WalkAgent.resimulated_by`); None: the walk does not say.
        self.resimulate: Callable[..., np.ndarray] | None = None
        self.warn = ctx.warn
        if threat.config.secret_paths:
            assert ctx.churn is not None
            self.step_times = []
            self.online_schedule = ctx.churn.schedule
            self.secret_rng = ctx.stream("secret_paths")

    def initial(self) -> int:
        """The serial of an initial model."""
        return self._made(-1, -1, -1, 0.0, 0.0, -1)

    def received(self, node: int, serial: int) -> None:
        """``node`` was handed state ``serial`` (a walk's arrival, kept or dropped there)."""
        self.lineage.received(node, serial, self.sim.now)
        if self.ceiling is not None:
            self.ceiling.received(node, serial)

    def visiting(self, node: int, serial: int) -> None:
        """``node`` is about to update state ``serial`` (the ceiling learns who holds it)."""
        if self.ceiling is not None:
            self.ceiling.visiting(node, serial)

    def continues(self, serial: int, carried: bool) -> bool:
        """Whether a walk may continue from state ``serial`` again (a restart from a local
        copy, a node's visit of its older copy): under a network budget, the ceiling's
        decision (:meth:`~netsim.privacy.ceiling.LineageCeiling.continues`); ``carried``:
        another walk carries it still."""
        return self.ceiling is None or self.ceiling.continues(serial, carried)

    def _enforce_network_budget(self, threat: ThreatModel, config: Any) -> None:
        """The learning section's (ε, δ) as every observer's ceiling
        (:class:`~netsim.privacy.ceiling.LineageCeiling`): the accountant asks it before each
        use in place of the record's own budget."""
        accountant = self.sgd.accountant
        delta = threat.delta_for(config.delta)
        self.ceiling = LineageCeiling(
            nodes=int(self.owner.max()) + 1, owner=self.owner,
            coalitions=threat.config.coalitions,
            budget_slope=slope_for_epsilon(config.epsilon, delta),
            contribution_slope=self.contribution_slope, amplified=self.amplified,
            refusal=(
                f"privacy.budget network: some node, coalition or link would learn more than "
                f"ε = {config.epsilon:g} at δ = {delta:g} from the models it receives"
            ),
        )  # fmt: skip
        accountant.admit_by(self.ceiling)

    def visited(
        self, node: int, state: ModelState, new: ModelState, updated: bool, now: float
    ) -> ModelState:
        """The visit in the lineage: ``node`` received ``state`` and made ``new`` from it,
        moving it by at most η·Δ for its unit, with noise η·z·Δ (Hegedűs et al. eq. 8 with
        η = learning_rate/√t)."""
        lineage = self.lineage
        lineage.received(node, state.serial, self.sim.now)
        if self.step_times is not None:
            self.step_times.append(now)
        if not updated:
            return replace(new, serial=self._made(state.serial, -1, -1, 0.0, 0.0, node))
        sgd = self.sgd
        eta = sgd.learning_rate / math.sqrt(new.updates)
        if sgd.unit == "node" or sgd.batch == 1:
            unit = node if sgd.unit == "node" else sgd.last_record
            shift = eta * sgd.sensitivity
            noise = shift * self.noise_multiplier
            return replace(new, serial=self._made(state.serial, unit, node, shift, noise, node))
        # a mini-batch of b records, each moving the mean by at most η·Δ/b: one state per
        # record, the noise (z·Δ/b) on the last, so every record's stretch includes it
        r, b = sgd.records_per_node, sgd.batch
        first = sgd.last_record - node * r
        records = node * r + (first + np.arange(b)) % r
        shift = eta * sgd.sensitivity / b
        serial = state.serial
        for record in records[:-1]:
            serial = lineage.made(serial, int(record), node, shift, 0.0, node)
        noise = shift * self.noise_multiplier
        return replace(new, serial=lineage.made(serial, int(records[-1]), node, shift, noise,
                                                node))  # fmt: skip

    def _made(
        self, parent: int, unit: int, owner: int, shift: float, noise: float, holder: int
    ) -> int:
        """A state in the lineage, made at node ``holder`` (and in the ceiling's chain, under
        a network budget)."""
        serial = self.lineage.made(parent, unit, owner, shift, noise, holder)
        if self.ceiling is not None:
            self.ceiling.made(serial, parent, unit, shift, noise)
        return serial

    def write(self, delta: float, steps: int, walk_law: Any) -> None:
        """``privacy_pairs`` and ``privacy_summary``: the path-known view of every accounted
        observer (coalition, link eavesdropper) of every unit, from the lineage
        (:mod:`netsim.privacy.walk_pairwise`). A link eavesdropper receives what crossed its
        link and knows no record. ``steps``: the run's visits; ``walk_law``: the walk's fixed
        transition matrix, if it has one (the papers' closed form is then stated too)."""
        threat, lineage = self.threat, self.lineage
        delta = threat.delta_for(delta)
        units = self.sgd.accountant.records
        coalitions = threat.coalitions()
        links = threat.links()
        receptions = lineage.receptions(coalitions)
        slopes = path_known_slopes(
            **lineage.arrays(),
            receptions=receptions + lineage.transfers(links),
            coalitions=coalitions + [[] for _ in links], units=units, amplified=self.amplified,
        )  # fmt: skip
        # divided, not multiplied by contribution_slope: the same floats as before
        local_slope = lineage.contributions(units) / (2.0 * self.noise_multiplier**2)
        observers = threat.observer_ids()
        owner = self.owner
        keep = np.ones(slopes.shape, dtype=bool)
        for k, members in enumerate(coalitions):
            keep[k, np.isin(owner, members)] = False  # a member's own records
        rows, record = np.nonzero(keep)
        rho = slopes[rows, record]
        epsilon = epsilons_of_slopes(rho, delta)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(local_slope[record] > 0, rho / local_slope[record], 0.0)
        distance = np.full(rows.size, -1, dtype=np.int64)
        single = observers[rows] >= 0
        if self.topology is not None and single.any():
            sources = threat.observers
            hops = hops_from(*self.topology, sources)
            at = np.searchsorted(sources, observers[rows][single])
            distance[single] = hops[at, owner[record[single]]]
        log = self.sim.log
        log.table(PRIVACY_PAIRS_TABLE).extend(
            [observers[rows], record, distance, share, rho, epsilon]
        )
        if threat.config.views:
            made = lineage.arrays()
            log.table(LINEAGE_TABLE).extend(
                [np.arange(lineage.states), made["parent"], made["unit"], made["owner"],
                 made["shift"], made["noise_std"], lineage.holders()]
            )  # fmt: skip
            log.table(VIEWS_TABLE).extend(list(lineage.views()))
        local = float(epsilons_of_slopes(local_slope.max(initial=0.0), delta))
        network, median, p90 = pair_quantiles(epsilon)
        closed_form, closed_slopes = self._closed_form(units, delta, steps, walk_law)
        if closed_slopes is not None:
            self._write_bound_audit(delta, closed_slopes, receptions)
        claim = (
            "RDP bound: amplification by iteration (contractive updates)"
            if self.amplified
            else "RDP bound: each contribution that reaches the observer is one Gaussian release"
        )
        if self.ceiling is not None:
            claim += "; the learning section's budget bounds every pair (privacy.budget network"
            refused = self.ceiling.refused
            claim += f"; {refused} branch{'es' if refused > 1 else ''} refused)" if refused else ")"
        self.sim.log.table(PRIVACY_SUMMARY_TABLE).append(*summary_row(
            view="path_known", claim=claim, observers=len(coalitions) + len(links),
            pairs=int(rho.size),
            delta=delta, local_epsilon=local, network_epsilon=network, epsilon_median=median,
            epsilon_p90=p90, closed_form_epsilon=closed_form,
            sampled_from=sampled_from(self.threat.n, self.threat.observers),
            epsilon_conversion="rdp", **union_bound(record, rho, network, delta, "rdp"),
        ))  # fmt: skip
        if self.step_times is not None and self.resimulate is None:
            self.warn(
                "privacy.secret_paths: the walk does not say how its paths are re-simulated "
                "(WalkAgent.resimulated_by), so no path_secret_estimate row is written"
            )
        elif self.step_times is not None:
            self._write_secret_estimate(delta, local, closed_form)

    def _write_secret_estimate(self, delta: float, local: float, closed_form: float) -> None:
        """The ``path_secret_estimate`` row of ``privacy_summary``: the papers' path-secret
        sum (Cyffers, Bellet, Upadhyay 2024) estimated from ``privacy.secret_paths`` walks
        re-simulated on the run's churn schedule at the run's visit times
        (:func:`~netsim.privacy.walk_pairwise.path_secret_exposure`; the walk re-simulates
        them: :meth:`~netsim.contracts.WalkAgent.resimulated_by`), every node contributing
        at most as often as the most-used unit did (under a network budget, as often as it
        did). Single observers only; the standard error is that of the worst pair, carried to
        ε to first order."""
        threat, lineage = self.threat, self.lineage
        assert self.resimulate is not None
        count = threat.config.secret_paths
        observers = threat.observers
        paths = self.resimulate(
            self.online_schedule, np.asarray(self.step_times), count, self.secret_rng
        )
        units = self.sgd.accountant.records
        uses = lineage.contributions(units)
        # the mechanism's rule for how often a node contributes: the cap every node may reach
        # under a local budget; under the ceiling, which stops each unit on its own path, the
        # uses each unit made
        cap = uses if self.ceiling is not None else int(uses.max(initial=0))
        mean, standard_error = path_secret_exposure(paths, cap, observers, units)
        slope = self.contribution_slope
        keep = np.ones(mean.shape, dtype=bool)
        keep[np.arange(observers.size), observers] = False
        rho = slope * mean[keep]
        record = np.nonzero(keep)[1]
        epsilon = epsilons_of_slopes(rho, delta)
        network, median, p90 = pair_quantiles(epsilon)
        spread = math.nan
        if rho.size:
            worst = int(np.argmax(epsilon))
            above = slope * (mean[keep][worst] + standard_error[keep][worst])
            spread = float(epsilons_of_slopes(above, delta)) - network
        self.sim.log.table(PRIVACY_SUMMARY_TABLE).append(*summary_row(
            view="path_secret_estimate",
            claim=(
                "estimate, not a bound: the papers' path-secret sum over walk paths "
                "re-simulated on the run's churn schedule and visit times"
            ),
            observers=int(observers.size), pairs=int(rho.size), delta=delta,
            local_epsilon=local, network_epsilon=network, epsilon_median=median,
            epsilon_p90=p90, closed_form_epsilon=closed_form, paths=count,
            network_epsilon_se=spread, sampled_from=sampled_from(threat.n, observers),
            epsilon_conversion="rdp", **union_bound(record, rho, network, delta, "rdp"),
        ))  # fmt: skip

    def _closed_form(
        self, units: int, delta: float, steps: int, walk_law: Any
    ) -> tuple[float, np.ndarray | None]:
        """The worst pair of the papers' path-secret closed form for this run's walk
        (:func:`~netsim.privacy.walk_pairwise.path_secret_slopes`: as many steps as the run's
        visits, every node contributing as often as the most-used unit did), when the walk
        has a fixed law, the unit is the node (or one record per node) and the network is at
        most :data:`~netsim.privacy.threat.MAX_ALL_OBSERVERS` nodes; NaN otherwise. With it,
        the closed form's slopes (nodes × nodes, [u, v] of u's unit against v) when there
        were steps and contributions, else None."""
        law, sgd, lineage = walk_law, self.sgd, self.lineage
        if law is None or law.shape[0] > MAX_ALL_OBSERVERS:
            return math.nan, None
        if sgd.unit == "record" and sgd.records_per_node > 1:
            return math.nan, None
        uses = int(lineage.contributions(units).max(initial=0))
        if steps < 1 or uses == 0:
            return 0.0, None
        slopes = path_secret_slopes(law, steps, self.contribution_slope, contributions=uses)
        return float(epsilons_of_slopes(slopes.max(), delta)), slopes

    def _write_bound_audit(
        self, delta: float, closed_slopes: np.ndarray, receptions: list[np.ndarray]
    ) -> None:
        """The ``bound_audit`` rows of the walk (bound ``walk_path_secret``): every accounted
        pair of a single observer v and a unit u of another node, the papers' path-secret
        closed form for u → v beside the exact Gaussian loss of v's view when v knows the
        realised path (:func:`~netsim.privacy.walk_pairwise.path_known_exact_mu_squared`,
        from the lineage; not the amplified bound of ``privacy_pairs``). The closed form is
        per single node: no rows for coalitions or link eavesdroppers. The bound's ε is the
        walk's RDP conversion of its slope, as ``closed_form_epsilon``; the exact ε the
        Gaussian profile, as the other audits (:func:`~netsim.privacy.linear.epsilon_of`,
        for every pair at once)."""
        lineage = self.lineage
        nodes = self.threat.observers  # the first views of ``receptions``, one node each
        if not nodes.size:
            return
        made = lineage.arrays()
        mu_squared, _ = path_known_exact_mu_squared(
            parent=made["parent"], unit=made["unit"], shift=made["shift"],
            noise_std=made["noise_std"], holder=lineage.holders(),
            receptions=receptions[: nodes.size], observers=nodes,
            units=self.sgd.accountant.records,
        )  # fmt: skip
        owner = self.owner
        rows, record = np.nonzero(owner[None, :] != nodes[:, None])
        observer = node = nodes[rows]
        exact_mu2 = mu_squared[rows, record]
        exact = exact_mu2 / 2.0
        bound = closed_slopes[owner[record], node]
        self.sim.log.table(AUDIT_TABLE).extend([
            observer, record, ["walk_path_secret"] * record.size, exact, bound,
            gaussian_epsilons(exact_mu2, delta),
            epsilons_of_slopes(bound, delta), bound < exact * (1.0 - BELOW_TOLERANCE),
        ])  # fmt: skip
