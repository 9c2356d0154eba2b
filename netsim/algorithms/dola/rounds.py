"""DOLA rounds over the simulated network: churn, links, mixing, metrics and regret.

One SimPy process runs a round every ``period``: it takes the nodes online at that moment,
draws A_t over the links usable in the round
(:class:`~netsim.algorithms.dola.mixing.MixingSchedule`), delivers the released values — all of
them on time by default, as the papers assume; with link loss, delays longer than the round or
link failures some arrive late or never, and the stale rule of
:mod:`netsim.algorithms.dola.learner` applies — and lets :class:`DolaLearner` update every
node.

Tables: ``dola_rounds`` (every ``evaluate_every`` rounds and the last: loss, consensus,
sparsity, accuracies, noise), ``dola_mixing`` (Assumption 2 per round), ``dola_regret``
(regret at checkpoints against the best fixed w in hindsight), ``dola_summary`` (one row), and
the privacy accountant's ``privacy_ledger`` / ``privacy_records``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from netsim.algorithms.dola.config import DolaConfig
from netsim.algorithms.dola.learner import DolaLearner
from netsim.algorithms.dola.mixing import (
    MIXING_TABLE,
    MixingMatrix,
    MixingSchedule,
    check_round,
    union_components,
)
from netsim.contracts import Baseline, BuildContext, Curve, FigureSpec, RoundLearner, Section
from netsim.distributions import Constant
from netsim.lazy import lazy_module
from netsim.learning import ordered
from netsim.learning.baselines import learning_baselines
from netsim.learning.central_dp import central_dp_baseline
from netsim.learning.hindsight import checkpoint_rounds
from netsim.learning.online_data import OnlineData, hold_out, load_online_data
from netsim.learning.regret import hindsight_at_checkpoints
from netsim.log import F64, I64, STR, TableSchema
from netsim.network.topology import Topology
from netsim.privacy.accountant import (
    LEDGER_TABLE,
    RECORDS_TABLE,
    PrivacyAccountant,
    ledger_sink,
)

if TYPE_CHECKING:
    import pandas as pd
    import scipy.sparse as sp
else:
    pd = lazy_module("pandas")
    sp = lazy_module("scipy.sparse")

ROUNDS_TABLE = TableSchema(
    name="dola_rounds",
    columns=(
        ("round", I64),
        ("time", F64),
        ("online", I64),
        ("cumulative_loss", F64),
        ("average_loss", F64),
        ("consensus", F64),
        ("sparsity_node", F64),
        ("sparsity_mean", F64),
        ("accuracy_averaged", F64),
        ("accuracy_mean", F64),
        ("accuracy_node", F64),
        ("noise_scale", F64),
        ("stale_values", I64),
        ("max_staleness", I64),
        ("accuracy_released_averaged", F64),
        ("accuracy_released_mean", F64),
        ("accuracy_released_node", F64),
        ("accuracy_released_mixed_averaged", F64),
    ),
    description=(
        "DOLA every dola.evaluate_every rounds (1-based round t) and after the last: online "
        "nodes; Σ_s≤t Σ_i f_s^i(w_s^j) at the regret node j and its mean per round; "
        "consensus Σ_i ‖w_i − w̄‖²; fraction of zero weights at node j and over all nodes; "
        "test accuracy of the internal iterates, which the privacy guarantee does not "
        "cover (a node's iterate depends on its last examples without noise): the running "
        "average ŵ_t = (1/t) Σ_s w̄_s (the stochastic-optimisation conversion), w̄_t and "
        "w_t^j; the noise scale of the round's releases (Laplace b, Gaussian σ; 0 when "
        "non-private); stale values used since the last row and the largest staleness in "
        "rounds; and the test accuracy of the released models, which the guarantee covers "
        "(post-processing of released values; DolaLearner.released_models: w̃ = w + σ for "
        "Alg. 1): their running average (1/t) Σ_s (1/m) Σ_i w̃_s^i, their mean (1/m) Σ_i "
        "w̃_t^i and node j's w̃_t^j; last, the test accuracy of the running average "
        "(1/t) Σ_s (1/m) Σ_i Proj_W(b_s^i) of the nodes' projected mixes of released values, "
        "also covered (DolaLearner.mixed_models)."
    ),
    role="rounds",
    time="time",
    round="round",
)
REGRET_TABLE = TableSchema(
    name="dola_regret",
    columns=(
        ("round", I64),
        ("cumulative_loss", F64),
        ("hindsight_loss", F64),
        ("hindsight_gap", F64),
        ("regret", F64),
        ("average_regret", F64),
        ("average_regret_per_node", F64),
    ),
    description=(
        "Regret R_D(t) = Σ_s≤t Σ_i f_s^i(w_s^j) − min_{‖w‖≤R} Σ_s≤t Σ_i f_s^i(w) at the "
        "regret node j (Li et al., Def. 2) at checkpoint rounds t; hindsight_loss is the "
        "solver's value (an upper bound on the minimum, so regret is a lower bound) and "
        "hindsight_gap its certified distance to the minimum; average_regret = R_D/t, and "
        "per node R_D/(t·m)."
    ),
    role="rounds",
    round="round",
    scaled_by=(("hindsight_gap", "hindsight_loss"),),
)
SUMMARY_TABLE = TableSchema(
    name="dola_summary",
    columns=(
        ("algorithm", STR),
        ("nodes", I64),
        ("rounds", I64),
        ("epsilon", F64),
        ("delta", F64),
        ("batch", I64),
        ("regret", F64),
        ("average_regret", F64),
        ("accuracy_averaged", F64),
        ("accuracy_mean", F64),
        ("accuracy_node", F64),
        ("sparsity_node", F64),
        ("consensus", F64),
        ("guarantee", STR),
        ("epsilon_spent_max", F64),
        ("delta_spent_max", F64),
        ("passes", I64),
        ("majority_accuracy", F64),
        ("centralised_accuracy", F64),
        ("accuracy_released_averaged", F64),
        ("accuracy_released_mean", F64),
        ("accuracy_released_node", F64),
        ("accuracy_released_mixed_averaged", F64),
        ("composition", STR),
        ("central_dp_accuracy", F64),
    ),
    description=(
        "One row per DOLA run: configuration, final regret and average regret (NaN without "
        "checkpoints), final test accuracies of the internal iterates (ŵ_T, w̄_T, w_T^j: not "
        "covered by the privacy guarantee) and sparsity, consensus, and the privacy "
        "guarantee per example (composed over its uses as dola.accounting says; 'none' if "
        "any release had no DP guarantee, 'non-private' for the baseline): epsilon and delta "
        "are the stated budget per example, epsilon_spent_max and delta_spent_max what the "
        "ledger spent (under rdp/pld the composed ε of the Gaussian releases at the budget "
        "δ, which is then the δ spent); and "
        "the yardsticks on the same split (netsim.learning.baselines): the test accuracy of "
        "the training majority class and of centralised non-private logistic regression; last, "
        "the final test accuracies of the released models, which the guarantee covers (as "
        "in dola_rounds: the running average of the nodes' mean released model, that mean, "
        "and node j's released model), and of the running average of the nodes' mean "
        "projected mix Proj_W(b) of released values (also covered); last, how the "
        "accountant composed the releases: basic, rdp or pld (PrivacyAccountant.composition; "
        "DOLA's Laplace releases stay basic under rdp/pld); and the third yardstick, the test "
        "accuracy of centrally private logistic regression on the same split at the stated "
        "budget (ε, δ) per example (netsim.learning.central_dp; NaN for a non-private run)."
    ),
    role="summary",
)


#: DOLA's figures in ``netsim report`` (Li et al.: accuracy and regret by round).
FIGURES = (
    FigureSpec(
        file="dola_accuracy_vs_round.png",
        caption="DOLA test accuracy by round",
        sentence=(
            "Test accuracy of DOLA's running average ŵ_t = (1/t) Σ w̄_s against the round t, "
            "beside the majority class and a centralised non-private model (dashed)."
        ),
        title="DOLA: test accuracy of the averaged iterate",
        panels=(
            Curve(
                "dola_rounds",
                "accuracy_averaged",
                "round",
                "test accuracy (fraction correct)",
                baselines=(
                    Baseline("dola_summary", "majority_accuracy", "majority class"),
                    Baseline("dola_summary", "centralised_accuracy", "centralised non-private"),
                    Baseline("dola_summary", "central_dp_accuracy", "central DP at the same ε"),
                ),
            ),
        ),
    ),
    FigureSpec(
        file="dola_regret_vs_round.png",
        caption="DOLA average regret per node",
        sentence=(
            "DOLA's average regret per node R_D(t)/(t·m) at the regret checkpoints (a lower "
            "bound: the hindsight minimum is a solver's upper bound)."
        ),
        title="DOLA: average regret per node",
        panels=(
            Curve(
                "dola_regret",
                "average_regret_per_node",
                "round",
                "average regret per node (loss units)",
            ),
        ),
        log_x_over_decades=2.0,
    ),
)


def accuracies(models: list[np.ndarray], x: object, y: np.ndarray) -> list[float]:
    """For each model w: the share of test examples with sign(⟨w, x⟩) = y (a zero margin
    counts as +1); one pass over the test data for all of them."""
    if y.size == 0:
        return [math.nan] * len(models)
    stacked = np.vstack(models)
    if sp.issparse(x):
        margins = np.asarray(x @ stacked.T)
    else:  # order-defined: a sign must not depend on the machine's BLAS
        margins = ordered.scores(np.ascontiguousarray(x, dtype=np.float64), stacked)
    correct = np.where(margins >= 0, 1.0, -1.0) == y[:, None]
    return [float(v) for v in correct.mean(axis=0)]


@dataclass
class _Pending:
    """Values that arrive after their round ended: entry k goes to the cache at
    ``arrival[k]``, unless a newer value got there first."""

    arrival: np.ndarray
    entries: np.ndarray
    values: np.ndarray
    sent_round: int


class DolaRounds(RoundLearner):
    """DOLA over the simulated network (the ``dola`` section): each round draws A_t, delivers
    the released values and lets its :class:`DolaLearner` update every online node."""

    Config = DolaConfig
    section = Section("dola", after=("gossip_learning",))
    figures = FIGURES
    tables = (ROUNDS_TABLE, MIXING_TABLE, REGRET_TABLE, SUMMARY_TABLE, LEDGER_TABLE,
              RECORDS_TABLE)  # fmt: skip

    def __init__(
        self,
        config: DolaConfig,
        ctx: BuildContext,
        learner: DolaLearner,
        schedule: MixingSchedule,
    ) -> None:
        super().__init__(config, ctx)
        assert ctx.sim is not None and ctx.network is not None
        sim = ctx.sim
        self.sim = sim
        self.network = ctx.network
        self.learner = learner
        learner.accountant.stream_ledger(ledger_sink(sim.log, ctx.metrics.privacy_ledger))
        self.schedule = schedule
        self.checkpoints = checkpoint_rounds(learner.rounds, config.regret_checkpoints)
        self.rng = ctx.stream("mixing")
        self.fate_rng = ctx.stream("links")
        self.cumulative = 0.0
        self.cumulative_at: list[float] = []
        self.averaged = np.zeros(learner.n)
        # Σ_s (1/m) Σ_i of the released models: the averaged model the guarantee covers
        self.released_averaged = np.zeros(learner.n)
        # Σ_s (1/m) Σ_i Proj_W(b_s^i): covered too, and bounded by R
        self.mixed_averaged = np.zeros(learner.n)
        self.window_matrices: list[sp.csr_matrix] = []
        self.window_online = np.zeros(learner.m, dtype=bool)
        self.stale_used = 0
        self.max_staleness = 0
        self.last_scale = 0.0
        links = self.network.links
        #: Whether links fail (up/down periods): each round then checks the links it uses.
        self.links_fail = links.mean_up is not None and links.mean_down is not None
        self.ideal = links.loss == 0 and not self.links_fail and self._delay_fits()
        self.cache: np.ndarray | None = None
        self.cache_round: np.ndarray | None = None
        self.pending: list[_Pending] = []
        self.rounds_table = sim.log.table(ROUNDS_TABLE)
        self.mixing_table = sim.log.table(MIXING_TABLE)

    @classmethod
    def build(cls, config: DolaConfig, ctx: BuildContext) -> DolaRounds:
        assert ctx.network is not None
        topology = ctx.network.topology
        if ctx.nodes > 1 and not topology.is_connected():
            ctx.warn(
                "the topology is not connected, so the union of the round graphs never is "
                "(Li et al., Assumption 2(4)); the components learn separately"
            )
        learner, schedule = dola_parts(
            config, ctx.duration, ctx.nodes, topology, ctx.integer_seed("shards"),
            ctx.stream("noise"),
        )  # fmt: skip
        return cls(config, ctx, learner, schedule)

    @classmethod
    def check_inputs(cls, config: DolaConfig, ctx: BuildContext) -> None:
        assert ctx.topology is not None
        dola_parts(
            config, ctx.duration, ctx.nodes, ctx.topology, ctx.integer_seed("shards"),
            np.random.default_rng(0),
        )  # fmt: skip

    @classmethod
    def check(cls, config: DolaConfig, ctx: BuildContext) -> None:
        problem = config.section_problem("dola", "regret_node", ctx)
        if problem is not None:
            raise ValueError(problem)

    def _delay_fits(self) -> bool:
        """True when every value surely arrives within its round (constant delay ≤ period)."""
        links = self.network.links
        return (
            isinstance(links.delay, Constant)
            and links.delay.value <= self.config.period
            and links.bandwidth is None
        )

    # --- a round ---------------------------------------------------------------------------

    def privacy_accountant(self) -> PrivacyAccountant:
        return self.learner.accountant

    def round(self, t: int) -> None:
        learner = self.learner
        now = self.sim.now
        online = self.network.nodes.online.copy()
        usable = self._usable_links(online, now) if self.links_fail else None
        mixing = self.schedule.draw(online, self.rng, usable)
        a = mixing.matrix
        nodes = np.flatnonzero(online)
        correct = None
        if self.ideal:
            self._send_ideal(a)
        else:
            correct = self._deliver(a, online, now)
        report = learner.round(t - 1, a.indptr, a.indices, a.data, nodes, time=now, correct=correct)
        if nodes.size:
            self.cumulative += report.loss_at_node
        self.cumulative_at.append(self.cumulative)
        self.averaged += learner.mean_weights()
        self.released_averaged += ordered.column_means(learner.released_models())
        self.mixed_averaged += ordered.column_means(learner.mixed_models())
        if report.event is not None:
            self.last_scale = report.event.noise_scale
        self._log_mixing(mixing, online, now)
        if t % self.config.evaluate_every == 0 or t == learner.rounds:
            self._log_round(now, int(nodes.size))

    def _usable_links(self, online: np.ndarray, now: float) -> np.ndarray:
        """Links that stay up through the round (checked per link: only with link failures)."""
        schedule = self.schedule
        usable = np.ones(schedule.indices.size, dtype=bool)
        sources, targets = schedule.sources, schedule.indices
        candidates = np.flatnonzero((sources < targets) & online[sources] & online[targets])
        # each link's up/down process is advanced lazily by its own draws: one check per link
        # that could be used, in a fixed order
        down = self.network.links_down_at(
            sources[candidates], targets[candidates], now, now + self.config.period
        )
        up = np.isnan(down)
        usable[candidates] = up
        usable[schedule.reverse[candidates]] = up
        return usable

    def _released_pairs(self, a: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(receivers, senders, CSR positions) of the values sent this round: every entry
        (i, j) of A_t off its diagonal, in A_t's order (node i receives j's released value)."""
        ptr, idx = a.indptr, a.indices
        receivers = np.repeat(np.arange(self.learner.m), np.diff(ptr))
        off = np.flatnonzero(idx != receivers)
        return receivers[off], idx[off].astype(np.int64), off

    def _send_ideal(self, a: sp.csr_matrix) -> None:
        """Send this round's values over links that lose nothing and deliver within the
        round: through the transport all the same, which counts them (it draws nothing for
        such links, so the values and every table but the message counters are as without)."""
        receivers, senders, _ = self._released_pairs(a)
        self.network.send_batch(
            senders, receivers, kind="dola", rng=self.fate_rng,
            size=8.0 * self.learner.n, links_up=True,
        )  # fmt: skip

    def _deliver(
        self, a: sp.csr_matrix, online: np.ndarray, now: float
    ) -> Callable[[np.ndarray, np.ndarray], None] | None:
        """Decide the fate of every value sent this round; return the correction that swaps
        missing values for the last ones received (or the node's own value)."""
        network = self.network
        learner = self.learner
        schedule = self.schedule
        n = learner.n
        if self.cache is None:
            self.cache = np.zeros((schedule.indices.size, n))
            self.cache_round = np.full(schedule.indices.size, -1, dtype=np.int64)
        assert self.cache_round is not None
        self._apply_arrivals(now)
        # the receiving node i of CSR entry e = (i, j) gets j's value; entries in A_t's order
        receivers, senders, off = self._released_pairs(a)
        weights = a.data[off]
        entries = schedule.entries(receivers, senders)
        # the transport counts and logs; a late value arrives after its round. A_t uses only
        # links _usable_links found up through the round.
        fate = network.send_batch(
            senders, receivers, kind="dola", rng=self.fate_rng, size=8.0 * n, links_up=True
        )
        lost, delays = fate.lost, fate.delays
        assert delays is not None
        late = ~lost & (delays > self.config.period)
        fresh = ~lost & ~late
        values = learner.released
        self.cache[entries[fresh]] = values[senders[fresh]]
        sent_round = self.round_index - 1  # 0-based, as the learner counts
        self.cache_round[entries[fresh]] = sent_round
        if late.any():  # cached when they arrive, if still the newest
            self.pending.append(
                _Pending(now + delays[late], entries[late], values[senders[late]], sent_round)
            )
        missing = ~fresh
        miss_entries = entries[missing]
        miss_rows = receivers[missing]
        miss_senders = senders[missing]
        miss_weights = weights[missing]
        have = self.cache_round[miss_entries] >= 0
        if have.any():
            staleness = sent_round - self.cache_round[miss_entries[have]]
            self.stale_used += int(have.sum())
            self.max_staleness = max(self.max_staleness, int(staleness.max()))
        cache = self.cache

        def correct(mixed: np.ndarray, nodes: np.ndarray) -> None:
            # mixed_i used a_ij v_j for missing values: replace by the cached value or v_i
            replacement = np.where(have[:, None], cache[miss_entries], values[miss_rows])
            delta = miss_weights[:, None] * (replacement - values[miss_senders])
            np.add.at(mixed, miss_rows, delta)

        return correct if missing.any() else None

    def _apply_arrivals(self, now: float) -> None:
        assert self.cache is not None and self.cache_round is not None
        keep = []
        for item in self.pending:  # one item per earlier round with late values, oldest first
            due = item.arrival <= now
            newer = due & (self.cache_round[item.entries] < item.sent_round)
            self.cache[item.entries[newer]] = item.values[newer]
            self.cache_round[item.entries[newer]] = item.sent_round
            if not due.all():
                keep.append(_Pending(item.arrival[~due], item.entries[~due],
                                     item.values[~due], item.sent_round))  # fmt: skip
        self.pending = keep

    # --- logging ---------------------------------------------------------------------------

    def _log_mixing(self, mixing: MixingMatrix, online: np.ndarray, now: float) -> None:
        check = check_round(mixing, online)
        self.window_matrices.append(mixing.matrix)
        self.window_online |= online
        window_checked = len(self.window_matrices) == self.config.mixing.window
        window_components = -1
        if window_checked:
            window_components = union_components(self.window_matrices, self.window_online)
            self.window_matrices = []
            self.window_online = np.zeros_like(self.window_online)
        self.mixing_table.append(
            self.round_index, now, int(online.sum()), mixing.links, check.eta,
            check.row_sum_error, check.column_sum_error, check.components,
            window_checked, window_components,
        )  # fmt: skip

    def _log_round(self, now: float, online: int) -> None:
        learner = self.learner
        data = learner.data
        w_node = learner.weights[learner.regret_node]
        learner.resum()
        mean = learner.mean_weights()
        self.rounds_table.append(
            self.round_index, now, online, self.cumulative, self.cumulative / self.round_index,
            learner.consensus(), learner.sparsity_of(w_node),
            learner.sparsity_of(learner.weights),
            *accuracies([self.averaged / self.round_index, mean, w_node], data.x_test, data.y_test),
            self.last_scale, self.stale_used, self.max_staleness,
            *self._released_accuracies(self.round_index),
        )  # fmt: skip
        self.stale_used = 0

    def _released_accuracies(self, done: int) -> list[float]:
        """Test accuracy of the released models after ``done`` rounds (what the privacy
        guarantee covers, :meth:`DolaLearner.released_models`): the running average
        (1/t) Σ_s (1/m) Σ_i ṽ_s^i, the mean (1/m) Σ_i ṽ_t^i, the regret node's ṽ_t^j and
        the running average (1/t) Σ_s (1/m) Σ_i Proj_W(b_s^i) of the projected mixes
        (:meth:`DolaLearner.mixed_models`)."""
        learner = self.learner
        released = learner.released_models()
        models = [
            self.released_averaged / max(done, 1),
            ordered.column_means(released),
            released[learner.regret_node],
            self.mixed_averaged / max(done, 1),
        ]
        return accuracies(models, learner.data.x_test, learner.data.y_test)

    def finish(self) -> None:
        """Regret at the checkpoints, the summary row and the privacy tables."""
        learner = self.learner
        config = learner.config
        log = self.sim.log
        regret_table = log.table(REGRET_TABLE)
        done = self.round_index
        regret = math.nan
        if done and learner.used_rows:
            counts_by_round = [r.size for r in learner.used_rows]
            flat = np.concatenate(learner.used_rows)
            ends = np.cumsum(counts_by_round)
            checkpoints = self.checkpoints[self.checkpoints <= done]
            minima = hindsight_at_checkpoints(
                checkpoints, [int(ends[t - 1]) for t in checkpoints], flat,
                learner.data.x_train, learner.data.y_train, loss=config.loss,
                radius=config.radius, regularisation=config.regularisation,
                per_example=config.batch,
            )  # fmt: skip
            for minimum in minima:
                t, solution = minimum.round, minimum.solution
                cumulative = self.cumulative_at[t - 1]
                regret = cumulative - solution.value
                regret_table.append(
                    int(t), cumulative, solution.value, solution.value - solution.lower_bound,
                    regret, regret / t, regret / (t * learner.m),
                )  # fmt: skip
        accountant = learner.accountant
        accountant.write_tables(log)
        if learner.refused_releases:
            self.ctx.warn(refusal_warning(learner))
        run = accountant.run_guarantee()
        if not config.private:
            guarantee = "non-private"
        elif not run.is_dp:
            guarantee = "none"
        elif run.delta > 0:
            guarantee = f"(ε, δ)-DP with ε = {run.epsilon:.4g}, δ = {run.delta:.3g}"
        else:
            guarantee = f"ε-DP with ε = {run.epsilon:.4g}"
        data = learner.data
        w_node = learner.weights[learner.regret_node]
        yardsticks = learning_baselines(data.x_train, data.y_train, data.x_test, data.y_test)
        log.table(SUMMARY_TABLE).append(
            config.algorithm, learner.m, done,
            config.epsilon if config.private else math.inf,
            config.delta if config.spends_delta else 0.0, config.batch,
            regret, regret / done if done else math.nan,
            *accuracies(
                [self.averaged / max(done, 1), learner.weights.mean(axis=0), w_node],
                data.x_test, data.y_test,
            ),
            learner.sparsity_of(w_node), learner.consensus(), guarantee,
            run.epsilon, run.delta, learner.passes, yardsticks.majority, yardsticks.centralised,
            *self._released_accuracies(done), accountant.composition,
            central_dp_baseline(
                data.x_train, data.y_train, data.x_test, data.y_test, epsilon=config.epsilon,
                delta=config.delta if config.spends_delta else 0.0,
            ).accuracy if config.private else math.nan,
        )  # fmt: skip

    @classmethod
    def summary_lines(cls, tables: Mapping[str, pd.DataFrame]) -> list[str]:
        """Regret, accuracy and the privacy guarantee of a DOLA run."""
        summary = tables.get("dola_summary")
        if summary is None or not len(summary):
            return []
        row = summary.iloc[0]
        stated_delta = f", δ = {row['delta']:g}" if row["delta"] > 0 else ""
        composition = row.get("composition", "basic")
        how = f", {composition} composition" if row["guarantee"] != "non-private" else ""
        lines = [
            f"dola: {row['algorithm']}, {row['nodes']} nodes, {row['rounds']} rounds, batch "
            f"{row['batch']}; average regret R/T {row['average_regret']:.4g} "
            f"({row['average_regret'] / row['nodes']:.4g} per node)",
            f"dola test accuracy of the internal iterates (not covered by the privacy "
            f"guarantee): averaged iterate {row['accuracy_averaged']:.3f}, mean model "
            f"{row['accuracy_mean']:.3f}, regret node {row['accuracy_node']:.3f}; sparsity "
            f"{row['sparsity_node']:.1%}",
            *released_line(row),
            f"dola yardsticks on the same split: majority class {row['majority_accuracy']:.3f}, "
            f"centralised non-private logistic regression {row['centralised_accuracy']:.3f}"
            + central_dp_text(row),
            f"dola privacy per example: {row['guarantee']} (stated budget ε = "
            f"{row['epsilon']:g}{stated_delta}{how})",
        ]
        return lines


def central_dp_text(row: pd.Series) -> str:
    """ ", central DP at the same (ε, δ) 0.824" (nothing for a non-private run, or a run
    recorded before the column)."""
    central = row.get("central_dp_accuracy", math.nan)
    return "" if pd.isna(central) else f", central DP at the same (ε, δ) {central:.3f}"


def released_line(row: pd.Series) -> list[str]:
    """The summary line of the released models' accuracies (none for a run recorded before
    they were)."""
    if "accuracy_released_averaged" not in row.index:
        return []
    return [
        f"dola test accuracy of the released models (covered by the guarantee): averaged "
        f"{row['accuracy_released_averaged']:.3f}, mean {row['accuracy_released_mean']:.3f}, "
        f"regret node {row['accuracy_released_node']:.3f}"
        + (
            f", averaged projected mix Proj_W(b) {row['accuracy_released_mixed_averaged']:.3f}"
            if "accuracy_released_mixed_averaged" in row.index
            else ""
        )
    ]


def dola_data(section: DolaConfig) -> OnlineData:
    """The data stream of a ``dola`` section (loaded sets pre-processed as Li et al. describe)."""
    data = section.data
    loaded = load_online_data(
        data.name,
        path=data.path,
        label=data.label,
        split_seed=data.split_seed,
        test_fraction=data.test_fraction,
        options=data.options,
    )
    if data.validation is None:
        return loaded
    return hold_out(loaded, data.validation, data.split_seed)


def refusal_warning(learner: DolaLearner) -> str:
    """What a run whose ``dola.mechanism`` was refused says: how many node releases were
    withheld (a release that would take its examples past their budget is not published,
    as MI-OGD refuses a report), and why."""
    assert learner.mechanism is not None
    every = "every release" if not learner.charged_releases else "some releases"
    return (
        f"mechanism {learner.mechanism.config.kind}: the noise mechanism was refused on "
        f"{every}: {learner.refused_releases} of "
        f"{learner.refused_releases + learner.charged_releases} node releases withheld (last "
        f"refusal: {learner.accountant.last_refusal}); a release may spend ε/passes = "
        f"{learner.release_epsilon:g}"
        + ("; no node released anything" if not learner.charged_releases else "")
    )


def dola_parts(
    section: DolaConfig,
    duration: float,
    nodes: int,
    topology: Topology,
    shard_seed: int,
    rng: np.random.Generator,
) -> tuple[DolaLearner, MixingSchedule]:
    """The learner (data, shards, accountant) and the mixing schedule of a ``dola`` section;
    raises the configuration's errors (batch > local data, isolated nodes, ...)."""
    learner = DolaLearner(
        section, dola_data(section), nodes, rounds=section.rounds_in(duration),
        shard_seed=shard_seed, rng=rng, regret_node=section.regret_node,
    )  # fmt: skip
    mixing = section.mixing
    schedule = MixingSchedule(
        topology, fraction=mixing.fraction, count=mixing.count,
        time_invariant=mixing.time_invariant,
    )  # fmt: skip
    return learner, schedule
