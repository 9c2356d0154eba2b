"""The ``learning`` section: the data set, model and privacy budget that models visiting the nodes
are trained with (Hegedűs, Berta, Jelasity 2016 §3, §6), shared by every algorithm that moves
models between nodes — the ``sgd`` walk agent and gossip learning reach it by the section name
(``requires = {"learning": ...}``), never by importing each other.

:class:`SGDAgent` holds one shard of the training split per node and applies
:class:`~netsim.learning.private_sgd.PrivateSGD` at every visit; it writes the visits, the
test accuracy of the models, the privacy ledger and the run's summary with its yardsticks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import Field, ValidationInfo, field_validator, model_validator

from netsim.contracts import (
    Baseline,
    BuildContext,
    Component,
    ComponentConfig,
    Curve,
    ExactRun,
    ExactSupport,
    FigureSpec,
    Model,
    Section,
)
from netsim.fields import resolved_path
from netsim.lazy import lazy_module
from netsim.learning.baselines import LearningBaselines, learning_baselines
from netsim.learning.central_dp import central_dp_baseline
from netsim.learning.datasets import (
    DataError,
    Dataset,
    load_dataset,
    preprocess,
    vector_norms,
)
from netsim.learning.models import (
    ModelSpec,
    build_model,
    check_model_fits,
    each_accuracy,
    model_test_accuracies,
)
from netsim.learning.observers import ObserverAccounting
from netsim.learning.private_sgd import (
    PrivacyUnit,
    PrivateSGD,
    Sampling,
    non_finite_explanation,
    sampling_problem,
)
from netsim.learning.state import ModelState
from netsim.log import BOOL, F64, I32, I64, STR, TableSchema
from netsim.privacy import mechanisms
from netsim.privacy.accountant import (
    LEDGER_TABLE,
    RECORDS_TABLE,
    PrivacyAccountant,
    accounting_problem,
    ledger_sink,
    policy_by_name,
)
from netsim.privacy.bounds import AUDIT_TABLE, audit_lines
from netsim.privacy.events import Guarantee
from netsim.privacy.mechanisms import MechanismSpec, delta_budget_problem
from netsim.privacy.threat import (
    LINEAGE_TABLE,
    VIEWS_TABLE,
    conversion_phrase,
    sample_phrase,
    trust_problem,
    union_phrase,
)
from netsim.privacy.threat import PAIRS_TABLE as PRIVACY_PAIRS_TABLE
from netsim.privacy.threat import SUMMARY_TABLE as PRIVACY_SUMMARY_TABLE
from netsim.registry import component_name, spec_class, spec_kind
from netsim.sim import Simulation

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

VISITS_TABLE = TableSchema(
    name="sgd_visits",
    columns=(
        ("time", F64),
        ("walk", I64),
        ("node", I32),
        ("row", I32),
        ("visits", I64),
        ("updates", I64),
        ("updated", BOOL),
        ("epsilon", F64),
    ),
    description=(
        "Every visit of a model to a node: the walk (−1 in gossip learning), the node and its "
        "training row (the first of the visit's mini-batch), the model's visits and updates "
        "after it, whether it was updated (False: the record's budget was spent) and the ε the "
        "update spent."
    ),
    time="time",
)

ACCURACY_TABLE = TableSchema(
    name="accuracy",
    columns=(
        ("time", F64),
        ("walk", I64),
        ("visits", I64),
        ("updates", I64),
        ("accuracy", F64),
    ),
    description=(
        "Test accuracy (Hegedűs et al. eq. 11) of a model every evaluate_every visits: the "
        "walk (−1 in gossip learning), the model's visits and updates."
    ),
    role="samples",
    time="time",
    series="walk",
)


SUMMARY_TABLE = TableSchema(
    name="learning_summary",
    columns=(
        ("visits", I64),
        ("updates", I64),
        ("refused", I64),
        ("epsilon", F64),
        ("delta", F64),
        ("guarantee", STR),
        ("majority_accuracy", F64),
        ("centralised_accuracy", F64),
        ("central_dp_accuracy", F64),
        ("privacy_unit", STR),
        ("composition", STR),
        ("test_accuracy", F64),
        ("validation_accuracy", F64),
    ),
    description=(
        "One row at the end: visits and updates over all models, visits refused for lack of "
        "budget, the run's guarantee by parallel composition over the records (the worst "
        "record's ε and δ; guarantee epsilon-DP, (epsilon,delta)-DP, none — some release had "
        "no DP guarantee, e.g. the paper's L2 noise, and ε is then only the paper's nominal "
        "value — or non-private), and the yardsticks of the accuracy on the same "
        "pre-processed split (netsim.learning.baselines, netsim.learning.central_dp): the "
        "test accuracy of predicting the training split's majority class, of a centralised "
        "non-private logistic regression trained on the whole training split, and of a "
        "centrally private one at the run's budget (ε, δ) per record (DP-GD with Gaussian "
        "noise and RDP for δ > 0, output perturbation for δ = 0; NaN for a run without a "
        "privacy budget); then what one budget protects (record or node) and how each "
        "record's releases were composed (basic, rdp, pld, or rdp+basic / pld+basic); last, the "
        "final models' mean test accuracy and their mean accuracy on the validation split "
        "(learning.dataset.validation_fraction; NaN without one): a walk's models at their "
        "last sample with the most visits (the accuracy table's last rows), gossip learning's "
        "evaluated nodes' models at the end of the run."
    ),
    role="summary",
)


#: The yardsticks of a learning figure (principle 9): dashed lines at the split's
#: majority-class and centralised non-private accuracy, read from ``learning_summary``.
LEARNING_BASELINES: tuple[Baseline, ...] = (
    Baseline("learning_summary", "majority_accuracy", "majority class"),
    Baseline("learning_summary", "centralised_accuracy", "centralised non-private"),
    Baseline("learning_summary", "central_dp_accuracy", "central DP at the run's (ε, δ)"),
)

#: Test accuracy against simulated time (Hegedűs et al. 2016, Figs. 4–7).
ACCURACY_FIGURE = FigureSpec(
    file="accuracy_vs_time.png",
    caption="test accuracy over time",
    sentence=(
        "Test accuracy of the learned models against simulated time, first averaged over "
        "the models (walks) evaluated in each time bin of a run; dashed, the accuracy of "
        "predicting the training split's majority class and of a centralised non-private "
        "logistic regression on the same split."
    ),
    title="Test accuracy",
    panels=(
        Curve(
            "accuracy",
            "accuracy",
            "time",
            "test accuracy (fraction correct)",
            baselines=LEARNING_BASELINES,
        ),
    ),
)


#: A registered data-set loader (:class:`~netsim.api.DatasetLoader`) or ``module:Class``.
DatasetName = component_name("dataset")
#: A registered noise mechanism (:class:`~netsim.api.Mechanism`) or ``module:Class`` by name.
MechanismName = component_name("mechanism")
#: The noise mechanism of a ``noise`` value (:func:`netsim.privacy.mechanisms.build_mechanism`).
mechanism = mechanisms.build_mechanism


class DatasetConfig(ComponentConfig):
    """A data set of :func:`netsim.learning.datasets.load_dataset`."""

    name: DatasetName
    path: Path | None = None
    label: str | int | None = None
    split_seed: int = Field(default=0, ge=0)
    test_fraction: float | None = Field(default=None, gt=0.0, lt=1.0)
    #: The share of all rows held out of training as the validation split (none by default):
    #: what a sweep's ``select`` tunes on, so the test rows are used once.
    validation_fraction: float | None = Field(default=None, gt=0.0, lt=1.0)

    @field_validator("path")
    @classmethod
    def _path(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return None if value is None else resolved_path(value, info)


class LearningConfig(ComponentConfig):
    """Differentially private SGD (Hegedűs et al. 2016 §3, eq. 8): one training record per
    node, node i holding a row of the training split."""

    dataset: DatasetConfig
    normalisation: Literal["local", "global", "none"] = "local"
    #: The model (:class:`~netsim.contracts.Model`): ``logreg``, ``svm``, ``mlp`` (with
    #: settings: ``{kind: mlp, hidden: [64]}``), a plugin's name or ``module:Class``.
    model: ModelSpec = "logreg"
    #: Clip each example's gradient to this norm (in the noise's norm) before the noise:
    #: one gradient's replace-one sensitivity is then 2·clip for any model (None: the
    #: model's own bound for normalised records; a model without one cannot run privately).
    clip: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    #: η_t = learning_rate/√t (Hegedűs et al. 2016 eq. 8 has 1).
    learning_rate: float = Field(default=1.0, gt=0.0, allow_inf_nan=False)
    algorithm: Annotated[str, Field(pattern=r"^(sgd|dp-sgd|dp-sgd-inf|dp-sgd-[1-9][0-9]*)$")] = (
        "dp-sgd-1"
    )
    #: How a record's uses compose against its budget: ``basic`` (the sum of ε and δ), or
    #: ``rdp`` / ``pld`` for Gaussian noise (Rényi DP or the privacy-loss distribution,
    #: dp-accounting; :mod:`netsim.privacy.composition`); other noise keeps the basic sum.
    accounting: Literal["basic", "rdp", "pld"] = "basic"
    #: Training records each node holds (its shard); node i holds rows i·r … i·r + r − 1 of
    #: a seeded permutation of the training split.
    records_per_node: int = Field(default=1, ge=1)
    #: Records one visit uses (the mean of their clipped gradients), at most records_per_node.
    batch: int = Field(default=1, ge=1)
    #: What one budget protects: a ``record`` (example-level DP; a batch of b records has
    #: sensitivity 2C/b and charges each) or a ``node`` (user-level DP: all of its records).
    privacy_unit: PrivacyUnit = "record"
    #: How a visit chooses the records of the node's shard: ``cyclic`` (the next ``batch``
    #: ones) or ``poisson`` (each with probability batch / records_per_node, accounted with
    #: amplification by subsampling under add/remove neighbours; netsim.learning.private_sgd).
    sampling: Sampling = "cyclic"
    noise: MechanismSpec = "k_norm_l2"
    epsilon: float = Field(default=1.0, gt=0.0, allow_inf_nan=False)
    #: The δ budget of a record, split over its uses as ε is (0: only mechanisms that spend
    #: no δ can run; a mechanism that spends δ is refused when the scenario is validated).
    delta: float = Field(default=0.0, ge=0.0, lt=1.0, allow_inf_nan=False)
    regularisation: float = Field(default=1e-4, ge=0.0, allow_inf_nan=False)
    evaluate_every: int = Field(default=100, ge=1)

    @model_validator(mode="after")
    def _delta_budget(self) -> LearningConfig:
        if self.batch > self.records_per_node:
            raise ValueError(
                f"learning.batch {self.batch} is more than learning.records_per_node "
                f"{self.records_per_node}: a visit uses records of the node it visits"
            )
        if self.algorithm != "sgd":
            problem = accounting_problem(self.noise, self.algorithm, self.accounting)
            if problem:
                raise ValueError(f"learning: {problem}")
            problem = delta_budget_problem(
                self.noise, self.delta, ("learning.noise", "learning.delta")
            )
            if problem:
                raise ValueError(problem)
            problem = sampling_problem(
                self.sampling, algorithm=self.algorithm, accounting=self.accounting,
                noise=self.noise, unit=self.privacy_unit, clip=self.clip,
            )  # fmt: skip
            if problem:
                raise ValueError(problem)
            if self.clip is None:
                cls = spec_class("model", self.model)
                settings = None if isinstance(self.model, str) else self.model
                if issubclass(cls, Model) and not cls.bounds_gradient(settings):
                    raise ValueError(
                        f"learning.model {spec_kind(self.model)} cannot bound its per-example "
                        f"gradient, so {self.algorithm} cannot calibrate its noise: set "
                        "learning.clip (e.g. 1.0) to clip every gradient to that norm, or run "
                        "algorithm sgd (no noise)"
                    )
        return self


def learning_data(config: LearningConfig, n: int) -> Dataset:
    """The data set of ``config``, pre-processed as Hegedűs et al. (2016) §6.2, checked to hold
    a record for each of the ``n`` nodes and, unnormalised, vectors of length at most 1."""
    data_config = config.dataset
    mechanism_norm = mechanism(config.noise).norm
    data = preprocess(
        load_dataset(
            data_config.name,
            path=data_config.path,
            label=data_config.label,
            split_seed=data_config.split_seed,
            test_fraction=data_config.test_fraction,
            validation_fraction=data_config.validation_fraction,
        ),
        normalisation=config.normalisation,
        norm=mechanism_norm,
    )
    r = config.records_per_node
    if data.n_train < n * r:
        held = "one record" if r == 1 else f"{r} records (learning.records_per_node)"
        raise DataError(
            f"learning.dataset: {data.name} has {data.n_train:,} training records but the "
            f"scenario has {n:,} nodes; every node holds {held}, so nodes must be at most "
            f"{data.n_train // r:,}"
        )
    if config.normalisation == "none":
        radius = float(vector_norms(data.x_train, mechanism_norm).max())
        if radius > 1.0 + 1e-9:
            raise DataError(
                f"learning.normalisation none: the longest training vector has {mechanism_norm} "
                f"length {radius:.3g} > 1, so the gradient sensitivity would not hold; use "
                "local or global"
            )
    return data


class SGDAgent(Component):
    """The ``learning`` section: node i holds training row ``rows[i]``; every visit of a model
    (by a walk, through the ``sgd`` walk agent, or by gossip learning) applies
    :class:`PrivateSGD`; test accuracy is sampled every ``evaluate_every`` visits of a model."""

    Config = LearningConfig
    section = Section("learning", after=("privacy",))
    tables = (
        VISITS_TABLE, ACCURACY_TABLE, SUMMARY_TABLE, LEDGER_TABLE, RECORDS_TABLE,
        PRIVACY_PAIRS_TABLE, PRIVACY_SUMMARY_TABLE, LINEAGE_TABLE, VIEWS_TABLE, AUDIT_TABLE,
    )  # fmt: skip
    figures = (ACCURACY_FIGURE,)
    optional: ClassVar[dict[str, str]] = {  # type: ignore[assignment]
        "privacy": "the threat model: with model network, the pairs per observer"
    }

    def __init__(
        self,
        sim: Simulation,
        sgd: PrivateSGD,
        *,
        rows: np.ndarray,
        x_test: np.ndarray,
        y_test: np.ndarray,
        evaluate_every: int,
        x_validation: np.ndarray | None = None,
        y_validation: np.ndarray | None = None,
        baselines: LearningBaselines | None = None,
        central_dp: Callable[[], float] | None = None,
    ) -> None:
        if evaluate_every < 1:
            raise ValueError(f"evaluate_every must be at least 1, got {evaluate_every}")
        self.sim = sim
        self.sgd = sgd
        self.rows = rows
        self.x_test = x_test
        self.y_test = y_test
        #: The validation split (no rows without one): scored beside the test split.
        self.x_validation = np.empty((0, x_test.shape[1])) if x_validation is None else x_validation
        self.y_validation = np.empty(0, dtype=np.int64) if y_validation is None else y_validation
        self.evaluate_every = evaluate_every
        #: The models the summary scores at the end, when the learner holds them (gossip
        #: learning sets it); otherwise the walks' last samples (:attr:`final_scores`).
        self.final_models: Callable[[], Sequence[np.ndarray]] | None = None
        #: (visits, [(test, validation accuracy) of each model sampled at those visits]): the
        #: samples with the most visits so far, as the accuracy table's final rows.
        self.final_scores: tuple[int, list[tuple[float, float]]] = (-1, [])
        #: The split's majority-class and centralised accuracies (principle 9); NaN if unknown.
        self.baselines = baselines or LearningBaselines(math.nan, math.nan, "")
        #: The central-DP yardstick's test accuracy, computed when the run ends (None: the run
        #: has no privacy budget, NaN in the summary).
        self.central_dp = central_dp
        self.visits_table = sim.log.table(VISITS_TABLE)
        self.accuracy_table = sim.log.table(ACCURACY_TABLE)
        self.updates = 0
        self.refused = 0
        self.warn: Callable[[str], None] | None = None  # set by build: the run's warnings
        #: Privacy per observer, when the threat model is the network (set by build).
        self.observed: ObserverAccounting | None = None
        #: The walk's fixed transition matrix, when it has one (an ideal walk along a static
        #: topology): the papers' path-secret closed form is then stated beside the run's.
        self.walk_law: Any = None

    @classmethod
    def build(cls, config: LearningConfig, ctx: BuildContext) -> SGDAgent:
        """One record per node (a seeded choice of training rows), the accountant and the
        private SGD of ``config`` (Hegedűs et al. 2016 §3, §6)."""
        assert ctx.sim is not None
        n = ctx.nodes
        data = learning_data(config, n)
        rows = ctx.stream("rows").permutation(data.n_train)[: n * config.records_per_node]
        model = build_model(config.model, data.classes, data.features, ctx)
        policy = policy_by_name("unlimited" if config.algorithm == "sgd" else config.algorithm)
        accountant = PrivacyAccountant(
            rows.size if config.privacy_unit == "record" else n,
            epsilon=config.epsilon,
            delta=config.delta,
            policy=policy,
            accounting=config.accounting,
        )
        accountant.stream_ledger(ledger_sink(ctx.sim.log, ctx.metrics.privacy_ledger))
        sgd = PrivateSGD(
            model,
            data.x_train[rows],
            data.y_train[rows],
            accountant,
            noise=mechanism(config.noise, ctx),
            regularisation=config.regularisation,
            rng=ctx.stream("noise"),
            initial=model.initial_parameters(ctx.stream("model")),
            clip=config.clip,
            learning_rate=config.learning_rate,
            records_per_node=config.records_per_node,
            batch=config.batch,
            unit=config.privacy_unit,
            sampling=config.sampling,
            sampling_rng=ctx.stream("sampling") if config.sampling == "poisson" else None,
        )
        agent = cls(
            ctx.sim,
            sgd,
            rows=rows,
            x_test=data.x_test,
            y_test=data.y_test,
            evaluate_every=config.evaluate_every,
            x_validation=data.x_validation,
            y_validation=data.y_validation,
            baselines=learning_baselines(data.x_train, data.y_train, data.x_test, data.y_test),
            central_dp=(
                partial(central_dp_accuracy, data, config.epsilon, config.delta)
                if policy.private
                else None
            ),
        )
        agent.warn = ctx.warn
        threat = ctx.find("privacy")
        if threat is not None and threat.network:
            agent.observed = ObserverAccounting(ctx.sim, sgd, threat, config, ctx)
        return agent

    @classmethod
    def check(cls, config: LearningConfig, ctx: BuildContext) -> None:
        """Privacy per observer (``privacy.model: network``) needs Gaussian noise at a noise
        multiplier fixed for the run."""
        threat = ctx.config_of("privacy")
        if threat is None or threat.model != "network":
            return
        problem = trust_problem(threat, "learning")
        if problem:
            raise ValueError(problem)
        need = (
            "privacy.model network accounts each observer's view of Gaussian releases at one "
            "noise multiplier (learning.noise gaussian, learning.accounting rdp or pld, "
            "learning.algorithm dp-sgd or dp-sgd-k)"
        )
        if config.algorithm in ("sgd", "dp-sgd-inf") or config.accounting == "basic":
            raise ValueError(f"{need}; got algorithm {config.algorithm}, accounting "
                             f"{config.accounting}")  # fmt: skip
        if config.sampling == "poisson":
            raise ValueError(
                "privacy.model network accounts each observer's view of a node's contributions"
                " as full Gaussian releases under replace-one neighbours; learning.sampling "
                "poisson is accounted under add/remove: use learning.sampling cyclic"
            )
        noise = mechanism(config.noise)
        if not noise.releases_at_multiplier():
            raise ValueError(f"{need}; {spec_kind(config.noise)} cannot release at one")
        if threat.budget == "network" and (
            config.algorithm != "dp-sgd"
            or (config.privacy_unit == "record" and config.records_per_node > 1)
        ):
            raise ValueError(
                "privacy.budget network uses each unit until some observer's loss would pass "
                "the budget: it needs learning.algorithm dp-sgd (no cap on uses, a fixed noise "
                "multiplier) and one unit per node (privacy_unit node, or records_per_node 1); "
                f"got algorithm {config.algorithm}, {config.records_per_node} records per node"
                f" with privacy_unit {config.privacy_unit}"
            )
        if threat.secret_paths and config.privacy_unit == "record" and config.records_per_node > 1:
            raise ValueError(
                "privacy.secret_paths estimates the papers' path-secret view, whose unit is a "
                "node's contribution: set learning.privacy_unit node (or records_per_node 1), "
                "or secret_paths 0"
            )

    @classmethod
    def check_inputs(cls, config: LearningConfig, ctx: BuildContext) -> None:
        data = learning_data(config, ctx.nodes)
        check_model_fits(config.model, data.classes, data.features, ctx, "learning.model")

    @classmethod
    def check_dependents(cls, config: LearningConfig, learners: list[str]) -> None:
        if not learners:
            raise ValueError(
                "learning is configured but nothing learns: set walk.agent.kind to sgd or add "
                "a gossip_learning section"
            )
        if len(learners) > 1:
            raise ValueError(
                f"{' and '.join(learners)} all train the models of the learning section in "
                "one scenario (their visits would spend the same privacy budgets): compare "
                "them as separate scenarios with the same learning section"
            )

    def initial_state(self) -> ModelState:
        state = self.sgd.initial_state()
        if self.observed is not None:
            state = replace(state, serial=self.observed.initial())
        return state

    def walks_by(self, transition: Any) -> None:
        """The models move by this fixed walk (:meth:`~netsim.contracts.WalkAgent.walks_by`)."""
        self.walk_law = transition

    def resimulated_by(self, paths: Callable[..., np.ndarray]) -> None:
        """How the walk's paths are re-simulated, for the path-secret estimate
        (:meth:`~netsim.contracts.WalkAgent.resimulated_by`)."""
        if self.observed is not None:
            self.observed.resimulate = paths

    def received(self, node: int, state: ModelState) -> None:
        """``node`` was handed ``state`` (a walk's arrival, kept or dropped there)."""
        if self.observed is not None:
            self.observed.received(node, state.serial)

    def continues(self, node: int, state: ModelState, carried: bool) -> bool:
        """Under a network budget, whether the ceiling lets a walk continue from ``state``
        again (:meth:`~netsim.contracts.WalkAgent.continues`)."""
        return self.observed is None or self.observed.continues(state.serial, carried)

    def accuracy(self, state: ModelState) -> float:
        return self.sgd.model.accuracy(state.parameters, self.x_test, self.y_test)

    def validation_accuracy(self, parameters: np.ndarray) -> float:
        """The accuracy of ``parameters`` on the validation split (NaN without one)."""
        if not self.y_validation.size:
            return math.nan
        return self.sgd.model.accuracy(parameters, self.x_validation, self.y_validation)

    def _keep_final_score(self, visits: int, test: float, parameters: np.ndarray) -> None:
        """Keep a sample of a model among the final ones when it has the most visits so far
        (the summary's test and validation accuracy are those samples' means)."""
        most, scores = self.final_scores
        if visits < most:
            return
        if visits > most:
            scores = []
            self.final_scores = (visits, scores)
        scores.append((test, self.validation_accuracy(parameters)))

    def final_accuracies(self) -> tuple[float, float]:
        """The summary's (test, validation) accuracy: the mean over the final models (those
        of :attr:`final_models`, or the samples of :attr:`final_scores`); NaN when none."""
        if self.final_models is not None:
            models = list(self.final_models())
            if not models:
                return math.nan, math.nan
            model, params = self.sgd.model, np.stack(models)
            test = float(np.mean(model_test_accuracies(model, params, self.x_test, self.y_test)))
            if not self.y_validation.size:
                return test, math.nan
            validation = model_test_accuracies(model, params, self.x_validation, self.y_validation)
            return test, float(np.mean(validation))
        scores = self.final_scores[1]
        if not scores:
            return math.nan, math.nan
        test, validation = np.mean(np.array(scores), axis=0)
        return float(test), float(validation)

    def visit(self, node: int, state: ModelState, steps: int, walk: int, now: float) -> ModelState:
        """Eq. (8) with the record of ``node`` (the next mini-batch of its shard): the step
        (:meth:`stepped`), its ``sgd_visits`` row and, every ``evaluate_every`` visits of the
        model, its ``accuracy`` row. Gossip learning on the compiled exact core makes the
        visits that are arithmetic over arrays with
        :func:`netsim.learning.compiled_visit.visit_model`, and the others with
        :meth:`stepped`, gathering their rows with the kernel's."""
        new, updated, epsilon, row = self.stepped(node, state, now)
        self.visits_table.append(now, walk, node, row, new.visits, new.updates, updated, epsilon)
        if new.visits % self.evaluate_every == 0:
            self.evaluated(now, walk, new.visits, new.updates, new.parameters)
        return new

    def stepped(
        self, node: int, state: ModelState, now: float
    ) -> tuple[ModelState, bool, float, int]:
        """The step of :meth:`visit` without its rows: the new model, whether it was updated,
        the ε the update spent (0 when refused) and the training row of the record used."""
        observed = self.observed
        if observed is not None:
            observed.visiting(node, state.serial)
        new, epsilon, updated = self.sgd.step(state, node, now)
        self.updates += updated
        self.refused += epsilon is None
        if observed is not None:
            new = observed.visited(node, state, new, updated, now)
        return new, updated, epsilon or 0.0, int(self.rows[self.sgd.last_record])

    def evaluated(
        self, now: float, walk: int, visits: int, updates: int, parameters: np.ndarray
    ) -> None:
        """The ``accuracy`` row of a model at its ``evaluate_every``-th visits: its test
        accuracy (Hegedűs et al. eq. 11), kept among the final scores when it has the most
        visits so far (unless :attr:`final_models` gives the final models: gossip learning)."""
        test = self.sgd.model.accuracy(parameters, self.x_test, self.y_test)
        self.accuracy_table.append(now, walk, visits, updates, test)
        if self.final_models is None:
            self._keep_final_score(visits, test, parameters)

    def exact_support(self, run: ExactRun) -> ExactSupport:
        """Beside the compiled exact core: the agent has no events of its own; what moves the
        models calls its visits (a walk's Python steps), or makes them compiled (gossip
        learning: :mod:`netsim.learning.compiled_visit`) over the agent's arrays."""
        return ExactSupport(True, role="beside")

    def evaluated_many(
        self, times: np.ndarray, walk: int, visits: np.ndarray, updates: np.ndarray,
        parameters: np.ndarray,
    ) -> None:  # fmt: skip
        """:meth:`evaluated` of each row in order (the models' accuracies computed together,
        the same numbers: :func:`~netsim.learning.models.each_accuracy`)."""
        if not len(times):
            return
        tests = each_accuracy(self.sgd.model, parameters, self.x_test, self.y_test)
        self.accuracy_table.extend(  # buffered as appended rows (a few a block of visits)
            [times.tolist(), [walk] * len(times), visits.tolist(), updates.tolist(), tests.tolist()]
        )
        if self.final_models is None:
            for k in range(len(times)):
                self._keep_final_score(int(visits[k]), float(tests[k]), parameters[k])

    def guarantee(self) -> tuple[float, float, Guarantee]:
        """The run's (ε, δ, kind) over all records (parallel composition, Hegedűs et al. §3)."""
        accountant = self.sgd.accountant
        if not accountant.policy.private:
            return 0.0, 0.0, "non-private"
        run = accountant.run_guarantee()
        if not run.is_dp:
            return run.epsilon, run.delta, "none"
        return run.epsilon, run.delta, "epsilon-DP" if run.delta == 0 else "(epsilon,delta)-DP"

    def privacy_accountant(self) -> PrivacyAccountant:
        return self.sgd.accountant

    def finish(self) -> None:
        accountant = self.sgd.accountant
        if self.refused and not (self.updates or self.sgd.non_finite) and self.warn is not None:
            reason = accountant.last_refusal or ""
            hint = ""
            if "δ" in reason and not self.sgd.mechanism.spends_delta():
                hint = (
                    f"; {type(self.sgd.mechanism).__name__} spends δ but does not declare it "
                    "(guarantee = '(epsilon,delta)-DP'), so learning.delta was not checked"
                )
            self.warn(
                f"the noise mechanism was refused on every use: {self.refused} visits and no "
                f"update (last refusal: {reason}){hint}; no model learned anything"
            )
        if self.sgd.non_finite and self.warn is not None:
            self.warn(
                f"{self.sgd.non_finite} updates were left out because the noisy step was not "
                f"finite ({non_finite_explanation(self.sgd, accountant.policy)}); their ε was "
                "spent and the model kept"
            )
        self.sgd.accountant.write_tables(self.sim.log)
        epsilon, delta, kind = self.guarantee()
        if self.observed is not None:
            steps = self.updates + self.refused + self.sgd.non_finite
            self.observed.write(delta, steps, self.walk_law)
        self.sim.log.table(SUMMARY_TABLE).append(
            self.updates + self.refused + self.sgd.non_finite,
            self.updates,
            self.refused,
            epsilon,
            delta,
            kind,
            self.baselines.majority,
            self.baselines.centralised,
            math.nan if self.central_dp is None else self.central_dp(),
            self.sgd.unit,
            accountant.composition,
            *self.final_accuracies(),
        )

    @classmethod
    def summary_lines(cls, tables: Mapping[str, pd.DataFrame]) -> list[str]:
        """Final test accuracy, updates and the privacy guarantee of a learning run."""
        summary = tables.get("learning_summary")
        if summary is None or not len(summary):
            return []
        row = summary.iloc[0]
        guarantee = {
            "non-private": "none (no noise)",
            "none": (
                f"no DP guarantee (e.g. the paper's L2 noise; nominal ε = {row['epsilon']:g}, "
                "not a guarantee)"
            ),
            "epsilon-DP": f"ε-DP with ε = {row['epsilon']:g}",
            "(epsilon,delta)-DP": f"(ε, δ)-DP with ε = {row['epsilon']:g}, δ = {row['delta']:g}",
        }.get(row["guarantee"], row["guarantee"])
        unit = row.get("privacy_unit", "record")
        composition = row.get("composition", "basic")
        how = f" ({composition} composition)" if row["guarantee"] != "non-private" else ""
        if "poisson" in composition:  # the Poisson guarantee is not replace-one
            how += " under add/remove neighbours (a record present or absent)"
        lines = [
            f"learning: {row['updates']} updates, {row['refused']} visits refused (budget spent); "
            f"privacy per {unit}: {guarantee}{how}"
        ]
        yardsticks = baseline_text(summary)
        validation = summary.iloc[0].get("validation_accuracy", math.nan)
        if not pd.isna(validation):
            lines.append(
                f"final models: test accuracy {summary.iloc[0]['test_accuracy']:.3f}, "
                f"validation accuracy {validation:.3f} (the split's validation rows)"
            )
        accuracy = tables.get("accuracy")
        if accuracy is not None and len(accuracy):
            last = accuracy[accuracy["visits"] == accuracy["visits"].max()]
            visits, accuracy_mean = last["visits"].iloc[0], last["accuracy"].mean()
            models = f" (mean of {len(last)} models)" if len(last) > 1 else ""
            lines.append(
                f"test accuracy after {visits} visits: {accuracy_mean:.3f}{models}"
                + (f"; {yardsticks}" if yardsticks else "")
            )
        elif yardsticks:
            lines.append(f"test accuracy: {yardsticks}")
        network = tables.get("privacy_summary")
        if network is not None and len(network):
            row = network.iloc[0]
            lines.append(
                f"privacy per observer ({row['view'].replace('_', ' ')}, δ = {row['delta']:g}): "
                f"worst pair ε = {row['network_epsilon']:.3g}, median {row['epsilon_median']:.3g},"
                f" 90th percentile {row['epsilon_p90']:.3g}; local ε = {row['local_epsilon']:.3g}"
                f" ({int(row['observers'])} observers{sample_phrase(row)}{conversion_phrase(row)})"
                f"{union_phrase(row)}"
            )
            if math.isfinite(row.get("closed_form_epsilon", math.nan)):
                lines.append(
                    "the papers' closed form for this walk (path secret): worst pair ε = "
                    f"{row['closed_form_epsilon']:.3g}"
                )
            estimate = network[network["view"] == "path_secret_estimate"]
            if len(estimate):
                row = estimate.iloc[0]
                lines.append(
                    f"path secret, estimated from {int(row['paths'])} re-simulated walks (not "
                    f"a bound): worst pair ε = {row['network_epsilon']:.3g} ± "
                    f"{row['network_epsilon_se']:.2g}, median {row['epsilon_median']:.3g}"
                )
        return [*lines, *audit_lines(tables.get("bound_audit"))]


def baseline_text(summary: pd.DataFrame) -> str:
    """The yardsticks of a ``learning_summary`` table as printed beside an accuracy
    (principle 9): "majority class 0.612, centralised non-private 0.907, central DP 0.879"
    ("" when the table predates them; no central DP for a run without a privacy budget)."""
    if not {"majority_accuracy", "centralised_accuracy"} <= set(summary.columns):
        return ""
    row = summary.iloc[0]
    text = (
        f"majority class {row['majority_accuracy']:.3f}, centralised non-private "
        f"{row['centralised_accuracy']:.3f}"
    )
    central = row.get("central_dp_accuracy", math.nan)
    if not pd.isna(central):
        text += f", central DP at the same (ε, δ) {central:.3f}"
    return text


def central_dp_accuracy(data: Dataset, epsilon: float, delta: float) -> float:
    """The central-DP yardstick's test accuracy on ``data``'s split at (ε, δ)
    (:func:`netsim.learning.central_dp.central_dp_baseline`; cached in-process)."""
    return central_dp_baseline(
        data.x_train, data.y_train, data.x_test, data.y_test, epsilon=epsilon, delta=delta
    ).accuracy
