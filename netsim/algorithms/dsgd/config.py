"""The ``dsgd`` section: decentralised SGD with gossip averaging (``docs/papers.md``,
"Decentralised SGD, correlated noise and trust models"), its data, model, step and noise.

Every key is validated here, before anything runs; :class:`~netsim.algorithms.dsgd.learner.
DecentralisedSGD` reads this same frozen object. The noise is a sub-config chosen by ``kind``
(``none``, ``local``, ``decor``, ``zip``, ``correlated``); each kind's keys are its own, so a
key of another kind is an error.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from netsim.contracts import RoundsConfig
from netsim.distributions import PositiveDuration
from netsim.fields import CheckedModel
from netsim.learning.models import ModelSpec
from netsim.learning.sgd_agent import DatasetConfig

#: The noise kinds, in the order error messages list them.
#: The longest run MAFALDA's correlation is optimised for (each optimiser iteration solves
#: T × T systems: T = 100 takes seconds, 1,000 minutes).
MAFALDA_MAX_ROUNDS = 1_000

NOISE_KINDS = ("none", "local", "decor", "zip", "correlated")


#: Most averaging passes a dsgd round may take (``gossip_rounds``).
MAX_GOSSIP_ROUNDS = 1000


class NoNoise(CheckedModel):
    """``none``: no noise (non-private decentralised SGD, Lian et al. 2017)."""

    kind: Literal["none"] = "none"

    @property
    def noise_multiplier(self) -> float:
        return 0.0


class LocalNoise(CheckedModel):
    """``local``: every step adds independent N(0, (σ·C/b)² I) to the node's mean clipped
    gradient (Muffliato-SGD, Cyffers et al. 2022; the local-DP baseline)."""

    kind: Literal["local"] = "local"
    #: σ: the noise's standard deviation in units of C/b (one clipped gradient over the batch).
    noise_multiplier: float = Field(gt=0.0)


class DecorNoise(CheckedModel):
    """``decor``: pairwise-cancelling noise (DECOR, Allouah et al. 2024). Every linked pair
    {i, j} of the topology draws one v ~ N(0, (σ_cor·C/b)² I) per round from a stream both ends
    share; the smaller id adds +v and the larger −v to its gradient, for every topology
    neighbour whether or not it is online (a node does not know), plus independent
    N(0, (σ·C/b)² I). The pairs cancel in the network's sum when both ends step; an offline
    neighbour's share is left uncancelled."""

    kind: Literal["decor"] = "decor"
    #: σ: the independent part, in units of C/b (0: pairwise noise only).
    noise_multiplier: float = Field(default=0.0, ge=0.0)
    #: σ_cor: each pair's secret, in units of C/b.
    correlated_multiplier: float = Field(gt=0.0)


class ZipNoise(CheckedModel):
    """``zip``: zero-sum message noise (Zip-DL, Biswas et al. 2025). Every message i → j of a
    round carries h_i + ξ_ij, and one sender's ξ of the round sum to zero: ξ = s·√(m/(m−1))·
    (z − mean z) over its m messages, z i.i.d. N(0, 1) per message and coordinate, so that
    each share has standard deviation s (the m/(m−1) factor of Zip-DL's code,
    ``decentralizepy`` ``ZeroSumSharing``); s = ``message_multiplier``·C/b·η_t in model units.
    Plus independent gradient noise N(0, (σ·C/b)² I)."""

    kind: Literal["zip"] = "zip"
    #: The per-message share's standard deviation, in units of C/b times the step size.
    message_multiplier: float = Field(gt=0.0)
    #: σ: independent gradient noise in units of C/b (0 in Zip-DL).
    noise_multiplier: float = Field(default=0.0, ge=0.0)


class CorrelatedNoise(CheckedModel):
    """``correlated``: temporally correlated noise (MFDL / MAFALDA-SGD, Bellet et al. 2026):
    a node's k-th step adds Σ_m M[k, m] z_m, z_m i.i.d. N(0, (σ·C/b)² I) per node. ``matrix``:
    ``identity`` (= local), ``anti_pgd`` (z_k − z_{k−1}), ``mafalda`` (MAFALDA-SGD: the M
    that minimises the noise left in the models after averaging on the planned graph, at
    sensitivity 1 under the run's cyclic participation; :mod:`netsim.algorithms.dsgd.mafalda`)
    or an explicit lower-triangular matrix as a list of rows (row k may stop after its
    diagonal entry), with at least as many rows as the run has rounds."""

    kind: Literal["correlated"] = "correlated"
    noise_multiplier: float = Field(gt=0.0)
    matrix: Literal["identity", "anti_pgd", "mafalda"] | list[list[float]] = "anti_pgd"

    @field_validator("matrix")
    @classmethod
    def _lower_triangular(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value
        if not value:
            raise ValueError("an explicit matrix needs at least one row")
        size = len(value)
        for k, row in enumerate(value):
            if len(row) > size:
                raise ValueError(
                    f"row {k} has {len(row)} entries but the matrix has {size} rows: give a "
                    "square lower-triangular matrix (or each row up to its diagonal)"
                )
            if any(x != 0 for x in row[k + 1 :]):
                raise ValueError(
                    f"row {k} has a non-zero entry right of its diagonal: the matrix must be "
                    "lower triangular (a step's noise uses only the draws of its own and "
                    "earlier steps)"
                )
        return value

    def temporal(self, rounds: int) -> np.ndarray | None:
        """M as a square (rounds × rounds) lower-triangular array (None for ``identity``:
        independent steps). ``mafalda`` depends on the graph: its noise policy computes it."""
        if self.matrix == "identity":
            return None
        if self.matrix == "mafalda":
            raise ValueError("MAFALDA's matrix depends on the graph: see noise.Correlated")
        if self.matrix == "anti_pgd":
            return np.eye(rounds) - np.eye(rounds, k=-1)
        assert isinstance(self.matrix, list)
        out = np.zeros((rounds, rounds))
        for k, row in enumerate(self.matrix[:rounds]):
            out[k, : min(len(row), rounds)] = row[:rounds]
        return out

    def rows_problem(self, rounds: int) -> str | None:
        """Why the explicit matrix cannot serve ``rounds`` rounds, or MAFALDA's be optimised
        for them (None if it can)."""
        if self.matrix == "mafalda" and rounds > MAFALDA_MAX_ROUNDS:
            return (
                f"dsgd.noise.matrix mafalda optimises a {rounds} × {rounds} correlation: at "
                f"most {MAFALDA_MAX_ROUNDS} rounds (anti_pgd or an explicit matrix serve "
                "longer runs)"
            )
        if isinstance(self.matrix, list) and len(self.matrix) < rounds:
            return (
                f"dsgd.noise.matrix has {len(self.matrix)} rows but the run has {rounds} "
                "rounds: a node may step once per round, and its k-th step uses row k"
            )
        return None


def _noise_by_name(value: Any) -> Any:
    """``noise: none`` (or another kind's name alone) as ``{kind: none}``."""
    return {"kind": value} if isinstance(value, str) else value


#: The ``noise`` key: one of the kinds, chosen by ``kind``.
NoiseConfig = Annotated[
    NoNoise | LocalNoise | DecorNoise | ZipNoise | CorrelatedNoise, Field(discriminator="kind")
]


class CalibrateConfig(CheckedModel):
    """``dsgd.calibrate``: the target (ε, δ) of the worst accounted pair of the planned run."""

    epsilon: float = Field(gt=0.0, allow_inf_nan=False)
    delta: float = Field(gt=0.0, lt=1.0, allow_inf_nan=False)


class DsgdConfig(RoundsConfig):
    """Decentralised SGD with gossip averaging: every ``period`` each online node takes one
    step on the mean of its batch's clipped per-example gradients plus its noise, then the
    online nodes average over the links whose two messages arrived (Metropolis–Hastings
    weights), ``rounds`` times."""

    #: The data set (as the ``learning`` section names one): ``name``, ``path``, ``label``,
    #: ``split_seed``, ``test_fraction``.
    dataset: DatasetConfig
    #: Features min–max scaled on the training split, then each row to unit L2 length
    #: (``local``), all rows by the longest (``global``) or not (``none``).
    normalisation: Literal["local", "global", "none"] = "local"
    #: The model slot: ``logreg``, ``svm``, ``mlp`` (``{kind: mlp, hidden: [64]}``), a
    #: plugin's name or ``module:Class``.
    model: ModelSpec = "logreg"
    #: Training records per node (its shard): node i holds rows i·r … i·r + r − 1 of a seeded
    #: permutation of the training split.
    records_per_node: int = Field(default=1, ge=1)
    #: b: records per step. A node's k-th step uses batch k mod (records_per_node // b) of its
    #: shard, in order; b must divide records_per_node.
    batch: int = Field(default=1, ge=1)
    #: C: every per-example gradient is clipped to L2 norm C.
    clip: float = Field(gt=0.0)
    #: η: the step size (η_t = η, or η/√t at round t with ``schedule: inverse_sqrt``).
    learning_rate: float = Field(default=0.1, gt=0.0)
    schedule: Literal["constant", "inverse_sqrt"] = "constant"
    #: λ: ℓ2 regularisation, λθ added to the clipped mean gradient (outside the clip: it
    #: depends on no record).
    regularisation: float = Field(default=0.0, ge=0.0)
    #: The noise policy (``kind``: none, local, decor, zip, correlated) and its multipliers.
    noise: NoiseConfig = Field(default_factory=NoNoise)
    #: The privacy unit: a ``record`` (replace-one sensitivity 2C/b of a step) or a ``node``
    #: (all its records: 2C).
    unit: Literal["record", "node"] = "record"
    #: Test accuracy and training loss every this many rounds (and at the last).
    evaluate_every: int = Field(default=10, ge=1)
    #: Scale every multiplier of ``noise`` by the one factor that gives the worst accounted
    #: pair of the planned run (every node online, every link used) this (ε, δ), under the
    #: privacy section's trust and observers (local DP without one); the multipliers given
    #: fix the noise's shape (DECOR's σ_cor/σ). None: the multipliers as given.
    calibrate: CalibrateConfig | None = None
    #: ``rounds``: a round's messages take no time (their loss and link failures are decided
    #: at the round's instant). ``exact``: each message takes its transfer time through the
    #: transport (links.delay, plus its size over links.bandwidth), and the nodes average at
    #: ``deadline`` after the round's start over the links whose two messages arrived by then
    #: and whose two ends are still online; a late message is dropped by its receiver.
    mode: Literal["rounds", "exact"] = "rounds"
    #: Exact mode: how long after a round's start the nodes average (default: the period).
    deadline: PositiveDuration | None = None
    #: Averaging passes a round (rounds mode): the step and its noise go with the first, the
    #: others average the models again over the links up (Muffliato-GD's gossip between
    #: gradient steps). Each pass's messages go through the transport. At most
    #: :data:`MAX_GOSSIP_ROUNDS` (a slip of a few zeros should end in a message, not a run of
    #: days: each pass is a product over every link).
    gossip_rounds: int = Field(default=1, ge=1, le=MAX_GOSSIP_ROUNDS)

    @field_validator("noise", mode="before")
    @classmethod
    def _noise_name(cls, value: Any) -> Any:
        return _noise_by_name(value)

    @model_validator(mode="after")
    def _runnable(self) -> DsgdConfig:
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def problems(self) -> list[str]:
        """Why this configuration cannot run (empty when it can)."""
        out = []
        if self.records_per_node % self.batch:
            out.append(
                f"dsgd.batch ({self.batch}) must divide dsgd.records_per_node "
                f"({self.records_per_node}): a node's k-th step uses batch k mod "
                "(records_per_node // batch) of its shard"
            )
        if self.deadline is not None and self.mode != "exact":
            out.append("dsgd.deadline is when exact mode averages: set dsgd.mode exact, or "
                       "leave deadline out")  # fmt: skip
        if self.deadline is not None and self.deadline > self.period * (1 + 1e-12):
            out.append(
                f"dsgd.deadline ({self.deadline:g} s) must be at most dsgd.period "
                f"({self.period:g} s): a round averages before the next one starts"
            )
        if self.gossip_rounds > 1 and self.mode == "exact":
            out.append("dsgd.gossip_rounds > 1 runs in rounds mode: exact mode averages once a "
                       "round, at its deadline")  # fmt: skip
        if self.calibrate is not None and self.noise.kind == "none":
            out.append("dsgd.calibrate scales the noise's multipliers: give dsgd.noise a kind "
                       "with noise (local, decor, zip or correlated)")  # fmt: skip
        if isinstance(self.noise, CorrelatedNoise) and self.rounds is not None:
            problem = self.noise.rows_problem(self.rounds)
            if problem:
                out.append(problem)
        return out

    def scaled_noise(self, factor: float) -> NoiseConfig:
        """``noise`` with every multiplier times ``factor``."""
        update = {key: getattr(self.noise, key) * factor
                  for key in ("noise_multiplier", "correlated_multiplier", "message_multiplier")
                  if key in type(self.noise).model_fields}  # fmt: skip
        return self.noise.model_copy(update=update)

    @property
    def averaging_delay(self) -> float:
        """How long after a round's start the nodes average (0 in rounds mode)."""
        if self.mode == "rounds":
            return 0.0
        return self.period if self.deadline is None else self.deadline

    @property
    def batches(self) -> int:
        """Batches per shard: records_per_node // batch."""
        return self.records_per_node // self.batch

    def rate(self, t: int) -> float:
        """η_t at round t ≥ 1."""
        if self.schedule == "inverse_sqrt":
            return self.learning_rate / math.sqrt(t)
        return self.learning_rate

    @property
    def gradient_scale(self) -> float:
        """C/b: the noise unit (one clipped gradient's share of the batch mean)."""
        return self.clip / self.batch

    @property
    def sensitivity(self) -> float:
        """How far one privacy unit moves a step's mean clipped gradient: 2C/b for a record
        (replace-one), 2C for a node (every record of the batch may change)."""
        return 2.0 * self.clip if self.unit == "node" else 2.0 * self.gradient_scale
