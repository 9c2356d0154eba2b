"""Gossip learning (Hegedűs, Berta, Jelasity 2016, Alg. 1; Ormándi, Hegedűs, Jelasity 2013).

Every Δ each online node sends its current model to a random online neighbour; the receiver
updates the model with its own record (eq. 8, through the same
:class:`~netsim.learning.sgd_agent.SGDAgent` as the walks) and keeps it as its current
model. It is push-only gossip
(:class:`~netsim.protocols.gossip.PushPullGossip` with ``pull=False``), so timing, churn and
transfer times are those of the network: a model of K·d weights is sent as 8·K·d bytes.

With N nodes there are N models in flight, each a walk of its own — and every one of them
spends the budgets of the records it visits in the same per-record accountant, which is why
the paper argues for a single walk under differential privacy (§3.1).

The models differ widely (each has seen a few records), so one number hides them: besides
the ``accuracy`` table of the learning section (a model every ``evaluate_every`` of its
visits), every ``metrics.sample_every`` and at the end of the run the current models of a
fixed set of nodes — all nodes, or :data:`EVALUATED_MODELS` of them drawn once from the
stream ``<key>.evaluation`` when there are more — are evaluated on the test split, and
``gossip_learning_accuracy`` records the mean, minimum, median and maximum accuracy across
them (analysis/README.md, "Gossip learning spends every budget at once": the most-visited
model alone read 0.746 on Adult, its majority-class share,
while the models spread over 0.15). Its figure draws the mean with the minimum and maximum
and the split's majority-class and centralised yardsticks (principle 9).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from netsim.algorithms.gossip_learning.compiled import CompiledModels
from netsim.algorithms.gossip_learning.rounds import (
    GOSSIP_LEARNING_WALK,
    GossipLearningRounds,
    spread_row,
)
from netsim.contracts import (
    BuildContext,
    ComponentConfig,
    Curve,
    ExactRun,
    ExactSupport,
    FigureSpec,
    NetworkProtocol,
    Section,
)
from netsim.distributions import PositiveDuration
from netsim.lazy import lazy_module
from netsim.learning.models import model_accuracies
from netsim.learning.sgd_agent import LEARNING_BASELINES, SGDAgent, baseline_text
from netsim.learning.state import ModelState
from netsim.log import F64, I64, TableSchema
from netsim.network.links import Transfer
from netsim.protocols.gossip import PushPullGossip
from netsim.protocols.rounds import RoundGossip

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

#: At most this many nodes' models are evaluated at each evaluation (a fixed sample when the
#: network has more nodes): all 4,140 models of Spambase take 8 ms.
EVALUATED_MODELS = 5000

ACCURACY_SPREAD_TABLE = TableSchema(
    name="gossip_learning_accuracy",
    columns=(
        ("time", F64),
        ("models", I64),
        ("visits_mean", F64),
        ("updates_mean", F64),
        ("accuracy_mean", F64),
        ("accuracy_min", F64),
        ("accuracy_median", F64),
        ("accuracy_max", F64),
    ),
    description=(
        "Every metrics.sample_every and at the end: the current models of a fixed set of "
        "nodes (all, or 5,000 drawn once) evaluated on the test split — how many, their mean "
        "visits and updates, and the mean, minimum, median and maximum test accuracy across "
        "them."
    ),
    role="samples",
    time="time",
)

#: The spread of the models' test accuracy over time, with the split's yardsticks.
ACCURACY_SPREAD_FIGURE = FigureSpec(
    file="gossip_learning_accuracy.png",
    caption="gossip learning: test accuracy across models over time",
    sentence=(
        "Mean test accuracy across the nodes' current models against simulated time, with "
        "the lowest and highest model's (dotted) and, dashed, the accuracy of predicting the "
        "training split's majority class and of a centralised non-private logistic regression "
        "on the same split."
    ),
    title="Gossip learning: test accuracy across models",
    panels=(
        Curve(
            "gossip_learning_accuracy",
            "accuracy_mean",
            "time",
            "test accuracy (fraction correct)",
            spread=("accuracy_min", "accuracy_max"),
            spread_label="lowest / highest model",
            baselines=LEARNING_BASELINES,
        ),
    ),
)


class GossipLearningRule:
    """Alg. 1 as a push-only gossip rule: a node's value is its current model."""

    def __init__(self, agent: SGDAgent, n: int, *, merge: str = "none") -> None:
        self.agent = agent
        self.merge = merge
        self.models: list[ModelState] = [agent.initial_state()] * n

    def outgoing(self, node: int) -> ModelState:
        """``node``'s current model (its compiled twin:
        :func:`netsim.learning.compiled_visit.carry_model`)."""
        return self.models[node]

    def incoming(self, node: int, value: Any, sender: int, transfer: Transfer | None) -> None:
        """The received model, updated with ``node``'s record, becomes ``node``'s model
        (:meth:`received`)."""
        self.models[node] = self.received(node, value, self.models[node])

    def received(self, node: int, value: ModelState, local: ModelState) -> ModelState:
        """``node``'s new model when it receives ``value`` holding ``local``: the
        :meth:`merged` model updated with ``node``'s record. On the compiled exact core,
        :func:`netsim.learning.compiled_visit.visit_model` makes the visits that are
        arithmetic over arrays."""
        value = self.merged(value, local)
        return self.agent.visit(node, value, 0, GOSSIP_LEARNING_WALK, self.agent.sim.now)

    def merged(self, value: ModelState, local: ModelState) -> ModelState:
        """The model a node visits when it receives ``value`` holding ``local``: ``value``
        (Alg. 1), or with ``merge: average`` the two averaged (Ormándi et al. 2013, the merge
        variant, its age the older's); compiled in
        :func:`netsim.learning.compiled_visit.visit_model`."""
        if self.merge != "average":
            return value
        return ModelState(
            (value.parameters + local.parameters) / 2.0,
            max(value.updates, local.updates),
            max(value.visits, local.visits),
        )

    def exact_support(self, run: ExactRun) -> ExactSupport:
        """Carried by the compiled exact core's gossip (:mod:`netsim.learning.compiled_visit`)
        unless privacy is accounted per observer, which follows every model's lineage in
        Python."""
        if self.agent.observed is not None:
            return ExactSupport(
                False,
                "gossip learning under privacy.model network follows each model's lineage in "
                "Python: it has no compiled form",
            )
        return ExactSupport(True, role="carried")

    def model_bytes(self) -> float:
        """The size of one model message: 8 bytes per parameter."""
        return 8.0 * self.models[0].parameters.size

    def parameters_of(self, nodes: np.ndarray) -> list[np.ndarray]:
        """The current models' parameters of ``nodes``, one per node."""
        return [self.models[int(i)].parameters for i in nodes]

    def accuracy_spread(self, nodes: np.ndarray) -> tuple[object, ...]:
        """A ``gossip_learning_accuracy`` row (without the time) for the models of ``nodes``
        (a model held by several nodes is scored once and counted for each)."""
        states = [self.models[int(i)] for i in nodes]
        unique = {id(s): s for s in states}  # insertion order: the first holder's
        index = {key: k for k, key in enumerate(unique)}
        agent = self.agent
        scores = model_accuracies(
            agent.sgd.model, [s.parameters for s in unique.values()], agent.x_test, agent.y_test
        )
        accuracy = scores[[index[id(s)] for s in states]]
        visits = np.fromiter((s.visits for s in states), dtype=np.float64, count=len(states))
        updates = np.fromiter((s.updates for s in states), dtype=np.float64, count=len(states))
        return spread_row(visits, updates, accuracy)


class GossipLearningConfig(ComponentConfig):
    """Gossip learning (Hegedűs et al. Alg. 1): every period each online node sends its model
    to a random online neighbour, which updates it with its record and keeps it."""

    period: PositiveDuration
    #: ``exact``: event-driven push gossip; ``rounds``: one array-batched round every period
    #: (:mod:`netsim.algorithms.gossip_learning.rounds`; what it approximates is listed in
    #: :mod:`netsim.protocols.rounds`).
    mode: Literal["exact", "rounds"] = "exact"
    #: ``none``: the received model, stepped, replaces the local one (Alg. 1); ``average``:
    #: it is first averaged with the local one (the merge variant of Ormándi et al. 2013).
    merge: Literal["none", "average"] = "none"


class GossipLearning(NetworkProtocol):
    """The ``gossip_learning`` section: its own push-only gossip carrying the models."""

    runs_gossip = True

    Config = GossipLearningConfig
    section = Section("gossip_learning", after=("walk",))
    requires = {"learning": "data set, model, privacy budget"}  # noqa: RUF012
    optional = {"privacy": "the threat model: with model network, the pairs per observer"}  # noqa: RUF012
    tables = (ACCURACY_SPREAD_TABLE,)
    figures = (ACCURACY_SPREAD_FIGURE,)

    def __init__(self, config: GossipLearningConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        assert ctx.sim is not None and ctx.network is not None
        agent = ctx.require("learning")
        self.models: GossipLearningRule | GossipLearningRounds | CompiledModels
        #: Rounds mode: the run's exact mode is then ``rounds`` (its manifest's
        #: ``exact_engine``), as with a ``gossip`` section in rounds mode.
        self.round_based = config.mode == "rounds"
        self.engine: PushPullGossip | RoundGossip
        if config.mode == "rounds":
            self.models = GossipLearningRounds(agent, ctx.nodes, merge=config.merge)
            self.engine = RoundGossip(
                ctx.sim, ctx.network, period=config.period,
                message_size=self.models.model_bytes(), name=ctx.key, pull=False,
            )  # fmt: skip
        else:
            self.models = GossipLearningRule(agent, ctx.nodes, merge=config.merge)
            self.engine = PushPullGossip(
                ctx.sim, ctx.network, period=config.period,
                message_size=self.models.model_bytes(), pull=False, name=ctx.key,
            )  # fmt: skip
        self.engine.register(self.models)
        n = ctx.nodes
        if n > EVALUATED_MODELS:  # its own stream: no other component's draws change
            sample = ctx.stream("evaluation").choice(n, EVALUATED_MODELS, replace=False)
            self.evaluated = np.sort(sample)
        else:
            self.evaluated = np.arange(n)
        self.sample_every = float(ctx.metrics.sample_every)
        self.spread_table = ctx.table(ACCURACY_SPREAD_TABLE)
        self.last_evaluation = -1.0
        # the learning summary scores the evaluated nodes' final models (test, validation)
        agent.final_models = lambda: self.models.parameters_of(self.evaluated)

    # --- the compiled exact core ------------------------------------------------------------

    def exact_support(self, run: ExactRun) -> ExactSupport:
        """Compiled: its push gossip's ticks and messages (the engine's answer), the models
        they carry and the visits that are arithmetic over arrays
        (:mod:`netsim.learning.compiled_visit`); SimPy under privacy per observer."""
        assert isinstance(self.engine, PushPullGossip)  # rounds mode is not asked (round_based)
        support = self.engine.exact_support(run)
        if not support.ok:
            return support
        return ExactSupport(True, role="gossip")

    def attach_core(self, core: Any) -> None:
        """Hand the core the engine's ticks and the models (:class:`CompiledModels`): the
        kernel carries them and makes the visits it can, and returns the others to Python."""
        assert isinstance(self.engine, PushPullGossip)
        assert isinstance(self.models, GossipLearningRule)
        self.engine.attach_core(core)
        self.models = CompiledModels(self.models, core)

    def start(self) -> None:
        if isinstance(self.engine, RoundGossip):
            # at (k + ½)Δ: the mean instant of exact mode's k-th sends (netsim.protocols.rounds)
            self.engine.start(first=self.config.period / 2)
        else:
            self.engine.start()
        assert self.ctx.sim is not None
        self.ctx.sim.every(self.sample_every, self.evaluate)

    def evaluate(self) -> None:
        """One ``gossip_learning_accuracy`` row: the evaluated nodes' current models."""
        assert self.ctx.sim is not None
        now = self.ctx.sim.now
        self.spread_table.append(now, *self.models.accuracy_spread(self.evaluated))
        self.last_evaluation = now

    def finish(self) -> None:
        assert self.ctx.sim is not None
        if self.ctx.sim.now > self.last_evaluation:
            self.evaluate()

    @classmethod
    def check(cls, config: GossipLearningConfig, ctx: BuildContext) -> None:
        threat = ctx.config_of("privacy")
        if threat is not None and threat.model == "network":
            if config.mode == "rounds":
                raise ValueError(
                    "privacy.model network follows every model gossip learning sends; rounds "
                    "mode steps them in batches without their lineage: use gossip_learning.mode "
                    "exact"
                )
            if config.merge != "none":
                raise ValueError(
                    "privacy.model network accounts models that descend from one model each; "
                    f"gossip_learning.merge {config.merge} averages two: use merge none"
                )
            if threat.budget == "network":
                raise ValueError(
                    "privacy.budget network admits each use and each branch of a walk's models; "
                    "gossip learning resends every model it keeps, so nearly every state would "
                    "be a branch: use privacy.budget local (the pairs per observer are still "
                    "stated)"
                )
            if threat.secret_paths:
                raise ValueError(
                    "privacy.secret_paths re-simulates one random walk's path; gossip learning "
                    "moves many models at once: set it to 0 (the pairs with the path known are "
                    "still stated)"
                )

    @classmethod
    def summary_lines(cls, tables: Mapping[str, pd.DataFrame]) -> list[str]:
        """The spread of the models' final test accuracy, beside the yardsticks."""
        spread = tables.get("gossip_learning_accuracy")
        if spread is None or not len(spread):
            return []
        row = spread.iloc[-1]
        summary = tables.get("learning_summary")
        yardsticks = baseline_text(summary) if summary is not None and len(summary) else ""
        return [
            f"gossip learning: test accuracy of {int(row['models'])} models at "
            f"{row['time']:g} s: mean {row['accuracy_mean']:.3f}, median "
            f"{row['accuracy_median']:.3f}, range {row['accuracy_min']:.3f}–"
            f"{row['accuracy_max']:.3f}" + (f"; {yardsticks}" if yardsticks else "")
        ]
