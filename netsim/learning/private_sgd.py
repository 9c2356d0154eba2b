"""Differentially private SGD at one record: the update a visiting model receives.

Hegedűs, Berta, Jelasity (2016) §3, eq. (8): a model visiting a node that holds one record
(x, y) is updated as

    w_{t+1} = w_t − η_t (λ w_t + ∇ℓ(w_t; x, y) + N_t),   η_t = t^(−1/2),  λ = 10⁻⁴,

where N_t is the noise of the record's t-th use and the budget policy decides its ε
(:mod:`netsim.privacy.accountant`: DP-SGD-1, DP-SGD-k, DP-SGD-∞, or plain SGD without noise).
Every release goes through one :class:`~netsim.privacy.accountant.PrivacyAccountant` per run,
whose records are the nodes (one record per node): visits to different records compose in
parallel, visits to the same record sequentially — whichever walk or gossip message brings the
model, so parallel walks burn the same budgets. A visit to a record with no budget left leaves
the model unchanged and is logged as such.

Choices where the paper is silent:

- *t* counts the updates a model has received (not its visits), so a model that crosses
  spent records keeps its learning rate.
- A model's *visits* count every node it was at (with or without an update); accuracy is
  sampled every ``evaluate_every`` visits of a model, which is the x-axis of the paper's
  Fig. 4–7 ("updates", up to ten times the data set size: walk steps, §6.3).
- The noise is added to the gradient of the flat parameter vector (a K×d matrix for K
  classes is one vector of K·d coordinates, as in the sensitivity bounds).
- Any model of the ``learning.model`` slot (:class:`~netsim.contracts.Model`) can be trained.
  With ``learning.clip: C`` each example's gradient is clipped to norm C in the noise's norm
  before the noise is added (Abadi et al. 2016), so one gradient's replace-one sensitivity is
  2C whatever the model; without it the sensitivity is the model's own bound for normalised
  records (2R for the linear models, §3.2), and a model without one (the MLP) is refused for
  private runs.
- η_t = ``learning_rate``/√t (the paper's η_t = t^(−1/2) at the default 1).

How a visit chooses its records within the node's shard (``learning.sampling``):

- ``cyclic`` (the default): the next ``batch`` records of the shard, cycling; the release is
  their mean, replace-one sensitivity 2C/b, and every use is one full Gaussian release.
- ``poisson``: every record of the shard is taken independently with probability
  q = batch / records_per_node (draws from a stream of its own), and the release is the sum
  of the taken records' clipped gradients divided by the expected batch size b, plus
  Gaussian noise (Abadi et al. 2016, Alg. 1; an empty sample releases noise only). Every
  record of the shard is charged ``PoissonSampledDpEvent(q, GaussianDpEvent(z))``
  (:meth:`~netsim.privacy.accountant.PrivacyAccountant.release_sampled`) under add/remove
  neighbours: a record's presence changes the sum by at most C, so the sensitivity is C/b
  and σ = z·C/b. The amplification is that of the sampling within a shard only: which node
  a walk or a gossip message visits is never counted as sampling
  (``docs/explanation/privacy.md``, "No subsampling amplification from the walk").
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from netsim.component import ComponentConfig
from netsim.contracts import Mechanism, Model
from netsim.errors import BudgetExhausted
from netsim.learning.sensitivity import clip_rows
from netsim.learning.state import ModelState
from netsim.privacy.accountant import BudgetPolicy, Halving, PrivacyAccountant
from netsim.privacy.events import Norm, PrivacyEvent
from netsim.privacy.mechanisms import no_noise
from netsim.registry import spec_class

#: What one privacy budget protects (``docs/explanation/privacy.md``, "The privacy unit"): a
#: training record, or all of a node's records.
PrivacyUnit = Literal["record", "node"]
#: How a visit chooses the records of the node's shard it uses (see the module docstring).
Sampling = Literal["cyclic", "poisson"]
SAMPLINGS: tuple[str, ...] = ("cyclic", "poisson")


def sampling_problem(
    sampling: str,
    *,
    algorithm: str,
    accounting: str,
    noise: str | ComponentConfig,
    clip: float | None,
    unit: str,
) -> str:
    """Why ``learning.sampling`` cannot run with the rest of the learning section ("" when
    it can). Poisson subsampling is accounted as the amplified Gaussian of dp-accounting
    (``PoissonSampledDpEvent``), which needs RDP or PLD composition at a noise multiplier
    (the basic sum of shares would claim no amplification, and a share-calibrated noise has
    no subsampled curve), clipping (C bounds one record's add/remove contribution whatever
    the model) and the record as unit (sampling a node's records says nothing about a
    replacement of its whole shard, and the node is in every visit to it)."""
    if sampling not in SAMPLINGS:
        return f"learning.sampling must be one of {', '.join(SAMPLINGS)}, got {sampling!r}"
    if sampling == "cyclic" or algorithm == "sgd":
        return ""
    cls = spec_class("mechanism", noise)
    noise_at_multiplier = issubclass(cls, Mechanism) and cls.releases_at_multiplier()
    fixed_multiplier = getattr(noise, "noise_multiplier", None) is not None
    need = "learning.sampling poisson"
    if unit != "record":
        return (
            f"{need} amplifies the privacy of a record by the secrecy of its being taken; with "
            f"learning.privacy_unit {unit} every visit to the node uses its data, so nothing "
            "is amplified: set learning.privacy_unit record, or learning.sampling cyclic"
        )
    if accounting not in ("rdp", "pld"):
        return (
            f"{need} is accounted with amplification by subsampling "
            "(PoissonSampledDpEvent), which basic composition cannot express: set "
            "learning.accounting rdp (or pld), or learning.sampling cyclic"
        )
    if not noise_at_multiplier:
        return (
            f"{need} needs Gaussian noise at a noise multiplier (learning.noise gaussian), "
            "the mechanism whose subsampled privacy dp-accounting composes"
        )
    if algorithm == "dp-sgd-inf" and not fixed_multiplier:
        return (
            f"{need} with algorithm dp-sgd-inf needs a fixed noise multiplier (noise: {{kind: "
            "gaussian, noise_multiplier: z}}): its halving shares of ε have no subsampled "
            "calibration; or choose dp-sgd-<k> or dp-sgd"
        )
    if clip is None:
        return (
            f"{need} needs learning.clip: the clipping norm C bounds what one record's "
            "presence adds to the sum (its add/remove sensitivity)"
        )
    return ""


class PrivateSGD:
    """Eq. (8) at one record, with the noise and the budget of the accountant."""

    def __init__(
        self,
        model: Model,
        x: np.ndarray,
        y: np.ndarray,
        accountant: PrivacyAccountant,
        *,
        noise: Mechanism,
        regularisation: float,
        rng: np.random.Generator,
        initial: np.ndarray,
        clip: float | None = None,
        learning_rate: float = 1.0,
        records_per_node: int = 1,
        batch: int = 1,
        unit: PrivacyUnit = "record",
        sampling: Sampling = "cyclic",
        sampling_rng: np.random.Generator | None = None,
    ) -> None:
        if not 1 <= batch <= records_per_node or x.shape[0] % records_per_node:
            raise ValueError(
                f"need 1 <= batch ({batch}) <= records_per_node ({records_per_node}) and whole "
                f"shards ({x.shape[0]} rows)"
            )
        nodes = x.shape[0] // records_per_node
        units = x.shape[0] if unit == "record" else nodes
        if y.shape[0] != x.shape[0] or accountant.records != units:
            raise ValueError(
                f"need one accountant record per {unit}: {x.shape[0]} rows in shards of "
                f"{records_per_node}, {accountant.records} accountant records"
            )
        if sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {', '.join(SAMPLINGS)}, got {sampling!r}")
        if sampling == "poisson" and (sampling_rng is None or unit != "record"):
            raise ValueError("Poisson sampling needs its own random stream and the record as unit")
        self.records_per_node = records_per_node
        self.batch = batch
        self.unit: PrivacyUnit = unit
        self.sampling: Sampling = sampling
        #: The probability q = b/r that a visit takes each record of the shard (poisson).
        self.sampling_rate = batch / records_per_node
        self.sampling_rng = sampling_rng
        #: Where each node's next visit starts in its shard (it cycles through its records).
        self.cursor = np.zeros(nodes, dtype=np.int64)
        #: The first record the last :meth:`step` used.
        self.last_record = 0
        #: The labels as Python ints (a visit reads one; indexing a list is cheaper).
        self.labels: list[int] = [int(label) for label in y]
        self.model = model
        self.x = x
        self.y = y
        self.accountant = accountant
        self.mechanism = noise
        self.norm: Norm = noise.norm  # type: ignore[assignment]
        #: The clipping norm C (in the noise's norm), or None: the model's own bound.
        self.clip = clip
        sensitivity = 2.0 * clip if clip is not None else model.sensitivity(self.norm)
        if sensitivity is None and accountant.policy.private:
            raise ValueError(
                f"{type(model).__name__} cannot bound its per-example gradient: a private run "
                "needs learning.clip"
            )
        #: One gradient's replace-one sensitivity (0 for an unbounded model without noise).
        self.sensitivity = 0.0 if sensitivity is None else sensitivity
        self.initial = initial
        self.learning_rate = learning_rate
        self.regularisation = regularisation
        self.rng = rng
        #: The unlimited policy's release (the gradient unchanged, ε = 0), made once: every
        #: visit charges it through the accountant's cheap path (None under a private policy).
        self.free_event = None if accountant.policy.private else no_noise(initial)[1]
        self._shares: bool | None = None  # see _by_share
        #: Updates left out because the noisy step was not finite (see :meth:`step`).
        self.non_finite = 0
        #: Of those, the ones whose released (noisy) gradient itself was not finite.
        self.non_finite_noise = 0

    def _by_share(self) -> bool:
        """Whether the accountant gives this run's releases a share of ε per use (so a use
        with no share left is refused before anything is computed), worked out at the first
        visit: the policy and mechanism are the run's, and asking earlier would move the
        accountant's refusal of a policy it cannot serve from the first release to the build."""
        if self._shares is None:
            private = self.accountant.policy.private
            self._shares = private and self.accountant.noise_multiplier_for(self.mechanism) is None
        return self._shares

    def charges(self) -> str | None:
        """How a one-record visit charges its use, once known: ``free`` (the unlimited
        policy's :meth:`~netsim.privacy.record_budgets.RecordBudgets.charge_free`), ``share``
        (a share of ε per use, refused without a draw when none is left), ``composed`` (a
        release at a noise multiplier, refused by composition), or ``None`` before the first
        visit of a private run (which works it out: :meth:`_by_share`)."""
        if self.free_event is not None:
            return "free"
        if self._shares is None:
            return None
        return "share" if self._shares else "composed"

    def initial_state(self) -> ModelState:
        return ModelState(self.initial, 0, 0)

    def gradient(self, parameters: np.ndarray, records: int | np.ndarray) -> np.ndarray:
        """The gradient of the loss of ``records`` (one, or the mean over a mini-batch) at
        ``parameters``, each example's clipped to norm C in the noise's norm when
        ``learning.clip`` is set (Abadi et al. 2016, Alg. 1)."""
        rows = slice(records, records + 1) if isinstance(records, int) else records
        gradients = self.model.per_example_gradients(parameters, self.x[rows], self.y[rows])
        if self.clip is not None:
            gradients = clip_rows(gradients, self.clip, self.norm)
        return gradients[0] if len(gradients) == 1 else gradients.mean(axis=0)

    def visit_records(self, node: int) -> np.ndarray:
        """The ``batch`` records of ``node``'s shard this visit uses: the next ones in the
        shard's order, cycling (so every record of a node is used once before any twice)."""
        r = self.records_per_node
        start = int(self.cursor[node])
        self.cursor[node] = (start + self.batch) % r
        return node * r + (start + np.arange(self.batch)) % r

    def sample_records(self, node: int) -> np.ndarray:
        """The records of ``node``'s shard a Poisson visit takes: each independently with
        probability q = batch / records_per_node (one uniform draw per record of the shard
        from the sampling stream, so the other streams are unchanged). The sample's size is
        Binomial(r, q), possibly 0."""
        assert self.sampling_rng is not None
        r = self.records_per_node
        taken = self.sampling_rng.random(r) < self.sampling_rate
        return node * r + np.flatnonzero(taken)

    def _poisson_step(
        self, state: ModelState, node: int, now: float
    ) -> tuple[ModelState, float | None, bool]:
        """:meth:`step` with Poisson sampling: the sum of the taken records' clipped
        gradients over the expected batch size b (zero for an empty sample, which releases
        noise only), charged to every record of the shard (Abadi et al. 2016, Alg. 1)."""
        w = state.parameters
        r = self.records_per_node
        shard = node * r + np.arange(r)
        taken = self.sample_records(node)
        self.last_record = int(taken[0]) if taken.size else int(shard[0])
        total = np.zeros_like(w)
        if taken.size:
            gradients = self.model.per_example_gradients(w, self.x[taken], self.y[taken])
            if self.clip is not None:
                gradients = clip_rows(gradients, self.clip, self.norm)
            total = gradients.sum(axis=0)
        value = total / self.batch
        accountant = self.accountant
        try:
            if not accountant.policy.private:  # the baseline: no noise, every record one use
                noisy, event = accountant.release_batch(
                    shard, value, mechanism=self.mechanism, sensitivity=0.0, rng=self.rng,
                    time=now,
                )  # fmt: skip
            else:
                assert self.clip is not None  # sampling_problem: poisson needs learning.clip
                noisy, event = accountant.release_sampled(
                    shard, value, sampling_rate=self.sampling_rate, mechanism=self.mechanism,
                    sensitivity=self.clip / self.batch, rng=self.rng, time=now,
                )  # fmt: skip
        except BudgetExhausted:
            return ModelState(w, state.updates, state.visits + 1), None, False
        return self._updated(state, noisy, event.epsilon)

    def _release(
        self, node: int, records: np.ndarray, gradient: np.ndarray, now: float
    ) -> tuple[np.ndarray, PrivacyEvent]:
        """The noisy gradient, charged to the privacy unit: the node (its whole shard may
        differ, so one gradient's sensitivity), or each record of the batch (one record
        differs: the mean's sensitivity is that over the batch size)."""
        accountant, options = self.accountant, {"mechanism": self.mechanism, "rng": self.rng}
        if self.unit == "node":
            return accountant.release(
                node, gradient, sensitivity=self.sensitivity, time=now, **options
            )
        return accountant.release_batch(
            records, gradient, sensitivity=self.sensitivity / records.size, time=now, **options
        )

    def step(
        self, state: ModelState, node: int, now: float
    ) -> tuple[ModelState, float | None, bool]:
        """The model after visiting ``node`` (a step on the next mini-batch of its shard: its
        one record by default), the ε spent (``None``: no budget left) and whether the model
        was updated.

        A noisy step that is not finite leaves the model as it was (the ε is spent all the
        same): under DP-SGD-∞ the t-th use of a record spends ε·2^−t, so past about a
        thousand uses the noise scale Δ/ε_t overflows and one such step would turn every
        later model into NaN. :attr:`non_finite` counts them (:attr:`non_finite_noise` those
        whose released gradient was not finite); the run warns
        (:func:`non_finite_explanation` says why under the run's policy).
        """
        w = state.parameters
        if self.sampling == "poisson":
            return self._poisson_step(state, node, now)
        if self.batch == 1:
            return self._step_one(state, node, now)
        records = self.visit_records(node)
        self.last_record = int(records[0])
        try:
            noisy, event = self._release(node, records, self.gradient(w, records), now)
        except BudgetExhausted:
            return ModelState(w, state.updates, state.visits + 1), None, False
        return self._updated(state, noisy, event.epsilon)

    def _step_one(
        self, state: ModelState, node: int, now: float
    ) -> tuple[ModelState, float | None, bool]:
        """:meth:`step` with one record per visit, without the per-call overhead of arrays
        of one entry (the same arithmetic, so bit for bit the same model): the record's
        gradient (:meth:`~netsim.contracts.Model.example_gradient`) and, under the unlimited
        policy, the accountant's cheap charge. Gossip learning on the compiled exact core
        makes the free steps and the refused uses with
        :func:`netsim.learning.compiled_visit.visit_model`."""
        w = state.parameters
        r = self.records_per_node
        record = node
        if r > 1:
            start = int(self.cursor[node])
            self.cursor[node] = (start + 1) % r
            record = node * r + start
        self.last_record = record
        unit = node if self.unit == "node" else record
        if self._by_share() and self.accountant.refuse_spent(unit):
            # refused before any draw, as release would refuse it: no gradient needed (most
            # DP-SGD-1 visits after the first cycles)
            return ModelState(w, state.updates, state.visits + 1), None, False
        gradient = self.model.example_gradient(w, self.x[record], self.labels[record])
        if self.clip is not None:
            gradient = clip_rows(gradient[None, :], self.clip, self.norm)[0]
        if self.free_event is not None:
            self.accountant.charge_free(unit, self.free_event, time=now)
            return self._updated(state, gradient, 0.0)
        try:
            noisy, event = self.accountant.release(
                unit, gradient, mechanism=self.mechanism, sensitivity=self.sensitivity,
                rng=self.rng, time=now,
            )  # fmt: skip
        except BudgetExhausted:
            return ModelState(w, state.updates, state.visits + 1), None, False
        return self._updated(state, noisy, event.epsilon)

    def _updated(
        self, state: ModelState, noisy: np.ndarray, epsilon: float
    ) -> tuple[ModelState, float, bool]:
        """Eq. (8) with the released gradient ``noisy`` (a step that is not finite is left
        out: see :meth:`step`); compiled, with the record's gradient:
        :func:`netsim.learning.compiled_visit.sgd_update` and
        :func:`netsim.learning.compiled_visit.record_gradient`."""
        w = state.parameters
        t = state.updates + 1
        eta = self.learning_rate / math.sqrt(t)
        with np.errstate(over="ignore", invalid="ignore"):  # checked right below
            updated = w - eta * (self.regularisation * w + noisy)
        if not np.isfinite(updated).all():
            self.non_finite += 1
            self.non_finite_noise += not np.isfinite(noisy).all()
            return ModelState(w, state.updates, state.visits + 1), epsilon, False
        return ModelState(updated, t, state.visits + 1), epsilon, True


def non_finite_explanation(sgd: PrivateSGD, policy: BudgetPolicy) -> str:
    """Why :meth:`PrivateSGD.step` found steps that were not finite, as far as the run shows:
    under DP-SGD-∞ the t-th use spends ε·2^−t, so the noise scale Δ/ε_t overflows past about
    1,000 uses; under any other policy a released gradient that is not finite means a noise
    scale Δ/ε that overflows (an ε per use too small for the sensitivity) or a mechanism that
    releases ±∞ or NaN; a finite release means the step η(λw + g̃) itself diverged."""
    noise, diverged = sgd.non_finite_noise, sgd.non_finite - sgd.non_finite_noise
    parts = []
    if noise and isinstance(policy, Halving):
        parts.append(
            f"{noise} with noise that overflowed: under dp-sgd-inf the t-th use of a record "
            "spends ε·2^-t, so the noise scale Δ/ε_t overflows past about 1,000 uses"
        )
    elif noise:
        parts.append(
            f"{noise} with a released gradient that was not finite under {policy.name}: a "
            f"noise scale Δ/ε that overflows (sensitivity Δ = {sgd.sensitivity:g}; an ε per "
            f"use too small for it) or a mechanism ({type(sgd.mechanism).__name__}) that "
            "releases ±inf or NaN"
        )
    if diverged:
        parts.append(
            f"{diverged} with a finite release whose step diverged: the model overflowed "
            f"(learning rate {sgd.learning_rate:g}; a smaller learning.learning_rate, or "
            "learning.clip, keeps it finite)"
        )
    return "; ".join(parts)
