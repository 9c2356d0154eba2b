"""MI-private OGD on the simulated network: a learner node and user nodes exchanging messages.

Every ``period`` the learner (if online) picks an online user uniformly at random and sends it
the current w_t (a message of 8·d bytes through the network). The user takes its next example
as its loss f_t, computes its perturbed report on its own side
(:func:`~netsim.algorithms.mi_ogd.learner.user_report`) and sends it back; the learner applies
it when it arrives. With the default links (no delay, no loss) this is the paper's synchronous
protocol. With delays a report can arrive after the learner has applied others: it is applied
anyway, and its staleness (the learner's updates since w_t was sent) is logged. A lost model
costs the round; a lost report costs the update (the user's loss still counts: it played).

Tables: ``mi_ogd_rounds`` (one row per round a user played), ``mi_ogd_regret`` (regret at
checkpoints against the best fixed w in hindsight, next to the theorems' bound) and
``mi_ogd_summary``; the privacy accountant's ledger records every report's leakage bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from netsim.algorithms.mi_ogd.config import MiOgdConfig
from netsim.algorithms.mi_ogd.learner import (
    LazyProjectionOGD,
    MiOgdProblem,
    Report,
    Stream,
    max_loss,
    synthetic_regression,
    user_gradient,
    user_report,
)
from netsim.contracts import BuildContext, Curve, FigureSpec, RoundLearner, Section
from netsim.errors import BudgetExhausted, ScenarioError
from netsim.lazy import lazy_module
from netsim.learning.datasets import MAX_FEATURES
from netsim.learning.hindsight import checkpoint_rounds
from netsim.learning.online_data import (
    check_generated_size,
    integer_option,
    load_online_data,
    shard_rows,
)
from netsim.learning.regret import hindsight_at_checkpoints
from netsim.log import F64, I64, STR, TableSchema
from netsim.network.links import Transfer
from netsim.privacy.accountant import (
    LEDGER_TABLE,
    RECORDS_TABLE,
    KUses,
    PrivacyAccountant,
    Unlimited,
    ledger_sink,
)
from netsim.privacy.mechanisms import build_mechanism

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

ROUNDS_TABLE = TableSchema(
    name="mi_ogd_rounds",
    columns=(
        ("round", I64),
        ("sent_at", F64),
        ("user", I64),
        ("example", I64),
        ("loss", F64),
        ("applied_at", F64),
        ("staleness", I64),
        ("leakage", F64),
    ),
    description=(
        "One row per round in which a user played: 1-based round t, when w_t was sent, the "
        "user node, its example (training row), its loss f_t at the point it played (w_t, or "
        "w_t + δe_t in the bandit setting), when the learner applied the report (NaN: lost), "
        "the learner's updates between sending w_t and applying it, and the report's "
        "mutual-information bound C in nats."
    ),
    role="events",
    time="sent_at",
    round="round",
)
REGRET_TABLE = TableSchema(
    name="mi_ogd_regret",
    columns=(
        ("round", I64),
        ("played", I64),
        ("cumulative_loss", F64),
        ("hindsight_loss", F64),
        ("hindsight_gap", F64),
        ("regret", F64),
        ("bound", F64),
    ),
    description=(
        "Regret Σ_s≤t f_s(w_s) − min_{‖u‖≤B} Σ_s≤t f_s(u) over the rounds played up to round t "
        "(hindsight_loss is the solver's value, an upper bound on the minimum, so regret is a "
        "lower bound; hindsight_gap is its certified distance), and the theorems' bound for "
        "that many played rounds at the run's η (and δ)."
    ),
    role="rounds",
    round="round",
    scaled_by=(("hindsight_gap", "hindsight_loss"),),
)
SUMMARY_TABLE = TableSchema(
    name="mi_ogd_summary",
    columns=(
        ("setting", STR),
        ("loss", STR),
        ("dimension", I64),
        ("sigma", F64),
        ("eta", F64),
        ("smoothing", F64),
        ("rounds", I64),
        ("played", I64),
        ("applied", I64),
        ("regret", F64),
        ("bound", F64),
        ("leakage_per_report", F64),
        ("leakage_max_per_example", F64),
        ("composition", STR),
    ),
    description=(
        "One row: the configuration, rounds scheduled, played and applied, the final regret "
        "and bound, C per report and the largest total leakage of one example (nats); last, "
        "how the accountant composed the reports of a mechanism (mi_ogd.accounting: basic, "
        "rdp or pld, PrivacyAccountant.composition; 'none' for the Gaussian channel, which "
        "is accounted in nats)."
    ),
    role="summary",
)


#: MI-OGD's regret figure in ``netsim report``.
REGRET_FIGURE = FigureSpec(
    file="mi_ogd_regret_vs_round.png",
    caption="MI-OGD regret",
    sentence=(
        "Regret of mutual-information-private online gradient descent over the rounds "
        "played up to round t (a lower bound, as for DOLA), and dashed the regret bound of "
        "the theorem for the configuration (the table's bound column)."
    ),
    title="MI-private OGD: regret",
    panels=(
        Curve(
            "mi_ogd_regret",
            "regret",
            "round",
            "regret (loss units)",
            reference="bound",
            reference_label="bound (theorem)",
        ),
    ),
    log_x_over_decades=2.0,
)


class MiOgdRounds(RoundLearner):
    """The learner node, the user nodes and their rounds over the network (the ``mi_ogd``
    section)."""

    Config = MiOgdConfig
    section = Section("mi_ogd", after=("dola",))
    figures = (REGRET_FIGURE,)
    tables = (ROUNDS_TABLE, REGRET_TABLE, SUMMARY_TABLE, LEDGER_TABLE, RECORDS_TABLE)

    def __init__(
        self, config: MiOgdConfig, ctx: BuildContext, problem: MiOgdProblem, stream: Stream
    ) -> None:
        super().__init__(config, ctx)
        assert ctx.sim is not None and ctx.network is not None
        sim, network = ctx.sim, ctx.network
        n = network.nodes.n
        self.sim = sim
        self.network = network
        self.problem = problem
        self.stream = stream
        self.learner_node = config.learner
        self.learner = LazyProjectionOGD(problem)
        self.users = np.delete(np.arange(n, dtype=np.int64), config.learner)
        self.table, self.lengths = shard_rows(
            stream.x.shape[0], self.users.size, ctx.integer_seed("shards")
        )
        self.position = np.zeros(self.users.size, dtype=np.int64)
        self.pick_rng = ctx.stream("users")
        self.noise_rng = ctx.stream("noise")
        #: The registered mechanism of ``mi_ogd.mechanism`` (None: the Gaussian channel).
        self.mechanism = (
            None if config.mechanism is None else build_mechanism(config.mechanism, ctx)
        )
        if self.mechanism is None:
            self.accountant = PrivacyAccountant(
                stream.x.shape[0], epsilon=math.inf, policy=Unlimited()
            )
        else:
            assert config.epsilon is not None  # validated
            self.accountant = PrivacyAccountant(
                stream.x.shape[0], epsilon=config.epsilon, delta=config.delta,
                policy=KUses(config.uses), accounting=config.accounting,
            )  # fmt: skip
        self.refused = 0
        self.accountant.stream_ledger(ledger_sink(sim.log, ctx.metrics.privacy_ledger))
        self.checkpoints = checkpoint_rounds(problem.rounds, config.regret_checkpoints)
        self.rows: list[list[object]] = []  # one per round played, as ROUNDS_TABLE
        self.table_rows = sim.log.table(ROUNDS_TABLE)
        self.skipped = 0

    def privacy_accountant(self) -> PrivacyAccountant:
        return self.accountant

    @classmethod
    def build(cls, config: MiOgdConfig, ctx: BuildContext) -> MiOgdRounds:
        problem, stream = mi_ogd_parts(config, ctx.duration)
        return cls(config, ctx, problem, stream)

    @classmethod
    def check_inputs(cls, config: MiOgdConfig, ctx: BuildContext) -> None:
        mi_ogd_parts(config, ctx.duration)

    @classmethod
    def check(cls, config: MiOgdConfig, ctx: BuildContext) -> None:
        if ctx.nodes < 2:
            raise ValueError("mi_ogd needs at least 2 nodes: a learner and a user")
        problem = config.section_problem("mi_ogd", "learner", ctx)
        if problem is not None:
            raise ValueError(problem)

    def round(self, t: int) -> None:
        online = self.network.nodes.online
        if not online[self.learner_node]:
            self.skipped += 1
            return
        candidates = np.flatnonzero(online[self.users])
        if candidates.size == 0:
            self.skipped += 1
            return
        k = int(candidates[self.pick_rng.integers(candidates.size)])
        user = int(self.users[k])
        w = self.learner.w.copy()
        self.network.send(
            self.learner_node, user, kind="mi_ogd.model",
            payload=(t, k, w, self.learner.updates, self.sim.now),
            on_deliver=self._at_user, size=8.0 * w.size,
        )  # fmt: skip

    def _at_user(self, transfer: Transfer) -> None:
        """The encryption layer runs at the user: its loss, its report, the privacy charge."""
        t, k, w, updates, sent_at = transfer.payload
        example = int(self.table[k, self.position[k] % self.lengths[k]])
        self.position[k] += 1
        stream = self.stream
        if self.mechanism is None:
            report = user_report(self.problem, w, stream.x[example], float(stream.y[example]),
                                 self.noise_rng)  # fmt: skip
            self.accountant.charge(example, report.event, time=self.sim.now)
        else:
            report, loss = self._mechanism_report(w, example)
            if report is None:  # refused: the user played but reports nothing
                self.refused += 1
                self.rows.append([t, sent_at, int(transfer.dst), example, loss, math.nan, -1,
                                  0.0])  # fmt: skip
                return
        row = [t, sent_at, int(transfer.dst), example, report.loss, math.nan, -1,
               report.event.mutual_information]  # fmt: skip
        self.rows.append(row)
        self.network.send(
            transfer.dst, self.learner_node, kind="mi_ogd.report",
            payload=(report.vector, updates, row), on_deliver=self._at_learner,
            size=8.0 * report.vector.size,
        )  # fmt: skip

    def _mechanism_report(self, w: np.ndarray, example: int) -> tuple[Report | None, float]:
        """The user's report perturbed by the section's mechanism and charged to its
        example (None when the example's budget refuses it), and the user's loss."""
        assert self.mechanism is not None
        stream = self.stream
        z, played, loss = user_gradient(
            self.problem, w, stream.x[example], float(stream.y[example]), self.noise_rng
        )
        try:
            noisy, event = self.accountant.release(
                example, z, mechanism=self.mechanism,
                sensitivity=self.problem.report_sensitivity(self.mechanism.norm),
                rng=self.noise_rng, time=self.sim.now,
            )  # fmt: skip
        except BudgetExhausted:
            return None, loss
        return Report(noisy, played, loss, event), loss

    def _at_learner(self, transfer: Transfer) -> None:
        vector, updates, row = transfer.payload
        row[5] = self.sim.now
        row[6] = self.learner.updates - updates
        self.learner.apply(vector)

    def finish(self) -> None:
        """Regret at the checkpoints, the tables and the privacy ledger."""
        problem = self.problem
        config = problem.config
        log = self.sim.log
        for row in self.rows:
            self.table_rows.append(*row)
        regret_table = log.table(REGRET_TABLE)
        # by round: with link delays, users may play in another order than the rounds'
        order = sorted(range(len(self.rows)), key=lambda k: self.rows[k][0])
        played_round = np.array([self.rows[k][0] for k in order], dtype=np.int64)
        examples = np.array([self.rows[k][3] for k in order], dtype=np.int64)
        losses = np.cumsum([self.rows[k][4] for k in order])
        regret = bound = math.nan
        minima = hindsight_at_checkpoints(
            self.checkpoints,
            [int(np.searchsorted(played_round, t, side="right")) for t in self.checkpoints],
            examples, self.stream.x, self.stream.y, loss=config.loss, radius=config.radius,
        )  # fmt: skip
        for minimum in minima:
            t, played, solution = minimum.round, minimum.played, minimum.solution
            regret = float(losses[played - 1]) - solution.value
            bound = _bound(problem, played)
            regret_table.append(int(t), played, float(losses[played - 1]), solution.value,
                                solution.value - solution.lower_bound, regret, bound)  # fmt: skip
        self.accountant.write_tables(log)
        applied = sum(1 for row in self.rows if not math.isnan(row[5]))
        if self.refused and not applied_or_sent(self.rows, self.refused):
            self.ctx.warn(
                f"the noise mechanism was refused on every report: {self.refused} reports "
                f"(last refusal: {self.accountant.last_refusal}); the learner learned nothing"
            )
        sigma = config.sigma if self.mechanism is None else math.nan
        log.table(SUMMARY_TABLE).append(
            config.setting, config.loss, problem.dimension, sigma, problem.step,
            problem.delta if config.setting == "bandit" else math.nan, problem.rounds,
            len(self.rows), applied, regret, bound, problem.leakage(),
            float(self.accountant.mutual_information_spent.max()),
            "none" if self.mechanism is None else self.accountant.composition,
        )  # fmt: skip

    @classmethod
    def summary_lines(cls, tables: Mapping[str, pd.DataFrame]) -> list[str]:
        """Rounds, regret against its bound, and the leakage of an MI-private OGD run."""
        summary = tables.get("mi_ogd_summary")
        if summary is None or not len(summary):
            return []
        row = summary.iloc[0]
        records = tables.get("privacy_records")
        if math.isnan(row["sigma"]) and records is not None and len(records):
            noise = "noise by a mechanism"
            privacy = (
                f"mi_ogd privacy per example: ε = {records['epsilon_spent'].max():.4g}, "
                f"δ = {records['delta_spent'].max():.3g} spent "
                f"({row.get('composition', 'basic')} composition), {records['refused'].sum()} "
                "reports refused"
            )
        else:
            noise = f"σ = {row['sigma']:g}"
            privacy = (
                f"mi_ogd leakage: {row['leakage_per_report']:.4g} nats per report, at most "
                f"{row['leakage_max_per_example']:.4g} nats per example"
            )
        return [
            f"mi_ogd: {row['setting']} information, {row['loss']} loss, d = {row['dimension']}, "
            f"{noise}; {row['played']} of {row['rounds']} rounds played, "
            f"{row['applied']} reports applied; regret {row['regret']:.4g} (bound "
            f"{row['bound']:.4g})",
            privacy,
        ]


def applied_or_sent(rows: list[list[object]], refused: int) -> bool:
    """Whether some report of ``rows`` was not refused (``refused`` of them were)."""
    return len(rows) > refused


def _bound(problem: MiOgdProblem, played: int) -> float:
    """The theorems' bound for ``played`` rounds at the run's η and δ."""
    fixed = problem.config.model_copy(update={"eta": problem.step, "smoothing": problem.delta})
    return replace(problem, config=fixed, rounds=played).regret_bound()


REGRESSION_OPTIONS = {"examples": 10_000, "dimension": 1, "noise": 0.1, "scale": 0.5}


def mi_ogd_parts(section: MiOgdConfig, duration: float) -> tuple[MiOgdProblem, Stream]:
    """The configuration and the users' examples of an ``mi_ogd`` section."""
    data = section.data
    if data.name == "synthetic_regression":
        unknown = sorted(set(data.options) - set(REGRESSION_OPTIONS))
        if unknown:
            raise ScenarioError(
                f"mi_ogd.data.options: unknown option(s) {', '.join(unknown)}; "
                f"synthetic_regression takes {', '.join(REGRESSION_OPTIONS)}"
            )
        options = {**REGRESSION_OPTIONS, **data.options}
        where = "mi_ogd.data.options"
        # integers, bounded before anything of that size is allocated
        examples = integer_option(where, "examples", options["examples"], 1)
        dimension = integer_option(where, "dimension", options["dimension"], 1, MAX_FEATURES)
        check_generated_size(where, examples, dimension, "dimension")
        if options["noise"] < 0:
            raise ScenarioError(f"{where}: noise must be >= 0, got {options['noise']:g}")
        stream = synthetic_regression(
            examples=examples,
            dimension=dimension,
            noise=float(options["noise"]),
            scale=float(options["scale"]),
            seed=data.split_seed,
        )
    else:
        loaded = load_online_data(
            data.name, path=data.path, label=data.label, split_seed=data.split_seed,
            options=data.options,
        )  # fmt: skip
        if loaded.sparse:
            raise ScenarioError(
                f"mi_ogd.data: {data.name} is sparse; MI-private OGD here takes dense data"
            )
        stream = Stream(loaded.x_train, loaded.y_train, loaded.source)
    rounds = section.rounds_in(duration)
    lipschitz = 1.0  # every example has ‖x‖ ≤ 1 (checked below), so every loss is 1-Lipschitz
    if stream.lipschitz > lipschitz + 1e-9:
        raise ScenarioError(
            f"mi_ogd.data: the longest example has norm {stream.lipschitz:.4g} > 1; the "
            "leakage and regret bounds assume L = 1"
        )
    base = MiOgdProblem(section, stream.dimension, rounds, lipschitz)
    reach = section.radius + (base.delta if section.setting == "bandit" else 0.0)
    y_max = float(np.abs(stream.y).max())
    config = replace(base, max_loss=max_loss(section.loss, reach, lipschitz, y_max))
    return config, stream
