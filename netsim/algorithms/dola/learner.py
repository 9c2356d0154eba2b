"""DOLA: differentially private distributed online learning (Li et al.) on the simulated network.

m nodes each hold a shard of a binary data stream. Every round (one SimPy process acting on
all nodes at once) the online nodes mix their neighbours' released values with a doubly
stochastic A_t (:mod:`netsim.algorithms.dola.mixing`), take a (mini-batch) subgradient step of the
hinge or logistic loss on their next examples, project onto the L2 ball of radius R and
release a perturbed value:

===============  ==============================================  ===========================
algorithm        update and release                              privacy (per example)
===============  ==============================================  ===========================
``laplace``      arXiv Alg. 1 / TKDE Alg. 1: b = A w̃;            ε-DP: Laplace(S(t)/ε),
                 w ← Proj[b − α g(b)]; release w̃ = w + σ         S(t) = 2 α_t √n L / h
``gaussian``     TKDE Alg. 2: w̃ ← Proj[b − α (g(b) + σ)]         J² as printed (ε' recorded)
                                                                 or analytic (ε, δ)-DP; with
                                                                 ``accounting`` rdp/pld, σ =
                                                                 z·2L/h composed to (ε, δ)
``sparse``       TKDE Alg. 3: p = A ϑ̃;                           ε-DP as ``laplace``
                 w = Proj[soft(p, α_t ρ)]; ϑ = w − α g(w);
                 release ϑ̃ = ϑ + σ
``non_private``  Alg. 1 without noise (as any algorithm          none (baseline)
                 at ε = ∞)
===============  ==============================================  ===========================

Mini-batch (arXiv Alg. 2, TKDE Alg. 4): each node averages the subgradients of ``batch``
examples per round, dividing the sensitivity by h. Step sizes α_t = 1/(λt) (strongly convex)
or 1/(2√t) (convex). Every noise draw goes through :mod:`netsim.privacy.mechanisms` and is
charged to the examples it protects in a :class:`~netsim.privacy.accountant.PrivacyAccountant`
(one record per training example; an example is used once per pass over its node's shard).
Under ``accounting: basic`` each of an example's k releases spends (ε/k, δ/k); under ``rdp`` or
``pld`` Gaussian releases (Alg. 2's own noise, or a Gaussian ``mechanism``) get σ_t = z·Δ_t with
z calibrated so that k of them compose to (ε, δ), and the accountant composes them so; DOLA's
Laplace releases are pure ε-DP and keep the basic sum (the accountant's ``composition`` says so).

Choices where the papers are silent or inconsistent (see ``scenarios/README.md``):

- **Round 0** mixes the data-independent start w = 0 without noise (nothing to protect).
- **The regulariser φ of Alg. 4** is applied at b_t (post-processing of released values), not
  at the un-noised previous iterate as printed: the printed form carries the previous round's
  examples into this release, which parallel composition does not cover.
- **Churn.** An offline node skips the round: no example, no loss, no release, state kept;
  its row of A_t is e_i. A node online but without a used link only takes its local step.
- **Late or lost values** (only with link loss, delays longer than the round, or link
  failures; the papers assume none, and so does the default): a node uses the last value it
  received from that neighbour and logs its staleness; with none received yet, the weight
  moves to its own value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from netsim.algorithms.dola import calibration, kernels
from netsim.algorithms.dola.budget import (
    LIPSCHITZ,
    DolaBudget,
    ReleasePerPass,
    budget_exceeded,
    printed_gaussian_overspends,
)
from netsim.algorithms.dola.config import DolaConfig
from netsim.errors import DolaConfigError
from netsim.learning import ordered
from netsim.learning.online_data import OnlineData, passes, shard_rows, stream_rows
from netsim.privacy import mechanisms
from netsim.privacy.events import PrivacyEvent

#: The budget's names, where they were defined before the budget had a module of its own.
__all__ = [
    "LIPSCHITZ",
    "LOSS_CODES",
    "DolaBudget",
    "DolaLearner",
    "ReleasePerPass",
    "RoundReport",
    "budget_exceeded",
    "printed_gaussian_overspends",
]

LOSS_CODES = {"hinge": kernels.HINGE, "logistic": kernels.LOGISTIC}
_EMPTY_INT = np.zeros(0, dtype=np.int32)
_EMPTY_FLOAT = np.zeros(0)
#: The mixing arguments of the step kernel: A_t's CSR arrays (empty: read the mixed values)
#: and the released values w̃.
_Mixing = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
#: What a round's update and release return: the loss at the regret node's iterate, the
#: release's privacy event (None: nothing to charge) and whether it is charged already.
_StepOutcome = tuple[float, PrivacyEvent | None, bool]


@dataclass(frozen=True)
class _RoundStep:
    """One round's inputs to its update and release: the online nodes, their examples, the
    step size α_t, the mixing arguments, w_t^j before the step, whether every node is online
    (whole arrays, no gathers) and the simulated time."""

    nodes: np.ndarray
    rows: np.ndarray
    alpha: float
    mixing: _Mixing
    observer: np.ndarray
    everyone: bool
    time: float


@dataclass(frozen=True)
class RoundReport:
    """What one round did, for the metrics table."""

    round: int
    online: int
    loss_at_node: float
    event: PrivacyEvent | None


class DolaLearner:
    """The state of m DOLA nodes and one synchronous round of the chosen algorithm.

    ``weights`` (m × n) are the iterates w_t^i a node predicts with; ``released`` are the values
    its neighbours mix (w̃ for Alg. 1, the same array as ``weights`` for Alg. 2, ϑ̃ for
    Alg. 3). ``regret_node`` is the node j whose iterate the regret is measured at.
    """

    def __init__(
        self,
        config: DolaConfig,
        data: OnlineData,
        nodes: int,
        *,
        rounds: int | None = None,
        shard_seed: int,
        rng: np.random.Generator,
        regret_node: int = 0,
    ) -> None:
        if not 0 <= regret_node < nodes:
            raise DolaConfigError(f"regret_node must be in [0, {nodes - 1}], got {regret_node}")
        self.config = config
        if rounds is None:
            if config.rounds is None:
                raise DolaConfigError("the number of rounds T is needed (config.rounds or rounds=)")
            rounds = config.rounds
        self.rounds = rounds  # T
        self.data = data
        self.m = nodes
        self.n = data.features
        self.rng = rng
        self.regret_node = regret_node
        self.loss_code = LOSS_CODES[config.loss]
        self.table, self.lengths = shard_rows(data.n_train, nodes, shard_seed)
        shortest = int(self.lengths.min())
        if config.batch > shortest:
            raise DolaConfigError(
                f"batch {config.batch} is larger than the smallest node's local data "
                f"({shortest} examples of {data.n_train:,} over {nodes} nodes)"
            )
        self.passes = passes(self.lengths, self.rounds, config.batch)
        if config.private and self.passes > config.max_passes:
            raise DolaConfigError(budget_exceeded(config, self.passes, self.rounds, shortest))
        #: Each release's share, the mechanism, the noise multiplier and the accountant.
        self.budget = budget = DolaBudget(
            config, records=data.n_train, dimension=self.n, passes=self.passes,
            rounds=self.rounds, rng=rng,
        )  # fmt: skip
        self.release_epsilon, self.release_delta = budget.release_epsilon, budget.release_delta
        self.mechanism, self.noise_multiplier = budget.mechanism, budget.noise_multiplier
        self.accountant = budget.accountant
        self.weights = np.zeros((nodes, self.n))
        self.weight_sum = np.zeros(self.n)  # Σ_i w_i, kept by the step kernel
        if config.algorithm == "gaussian":
            self.released = self.weights
        else:
            self.released = np.zeros((nodes, self.n))
        self._mixed = np.zeros((nodes, self.n))
        #: Proj_W(b_t^i) of every node (kept for offline nodes): see :meth:`mixed_models`
        self.mixed_projected = np.zeros((nodes, self.n))
        self._next = (
            np.zeros((nodes, self.n)) if config.algorithm in ("gaussian", "sparse") else None
        )
        self.steps = np.zeros(nodes, dtype=np.int64)
        self.used_rows: list[np.ndarray] = []
        x = data.x_train
        if data.sparse:
            self._dense = np.zeros((0, self.n))
            self._csr = (x.data, x.indices.astype(np.int64), x.indptr.astype(np.int64))
        else:
            self._dense = x
            self._csr = (np.zeros(0), np.zeros(0, np.int64), np.zeros(1, np.int64))
        self.labels = data.y_train
        #: The training data as the kernels take it: dense rows, CSR arrays, labels, loss.
        self._examples = (self._dense, *self._csr, self.labels, self.loss_code)

    @property
    def refused_releases(self) -> int:
        """Node releases of ``dola.mechanism`` the accountant refused (not published)."""
        return self.budget.refused_releases

    @property
    def charged_releases(self) -> int:
        """Node releases of ``dola.mechanism`` the accountant charged."""
        return self.budget.charged_releases

    def gaussian_event(self, t: int) -> PrivacyEvent:
        """Alg. 2's event (and σ) for the release made with step α_t."""
        return self.budget.gaussian_event(t)

    # --- one round -------------------------------------------------------------------------

    def round(
        self,
        t: int,
        matrix_ptr: np.ndarray,
        matrix_idx: np.ndarray,
        matrix_val: np.ndarray,
        online: np.ndarray,
        *,
        time: float = math.nan,
        correct: Callable[[np.ndarray, np.ndarray], None] | None = None,
    ) -> RoundReport:
        """Round ``t`` (0-based) with A_{t+1} given as CSR arrays; ``online`` are the node ids
        taking part. ``correct(mixed, nodes)`` may amend the mixed values (stale values).
        Returns the loss Σ_i f_t^i(w_t^j) of the online nodes at the regret node's iterate.
        Phases: examples, mix (:meth:`_mix`), update and release (``_<algorithm>_step``, as
        in the module docstring's table), charge (:meth:`_charge`)."""
        config = self.config
        nodes = np.asarray(online, dtype=np.int64)
        alpha = config.alpha(t + 1)
        # each node walks its own shard from its own position: offline rounds skip no data
        rows = stream_rows(self.table, self.lengths, self.steps[nodes], config.batch, nodes)
        self.used_rows.append(rows.reshape(-1))
        observer = self.weights[self.regret_node].copy()  # w_t^j before this round's step
        mixing = self._mix(matrix_ptr, matrix_idx, matrix_val, nodes, correct)
        step = _RoundStep(nodes, rows, alpha, mixing, observer, nodes.size == self.m, time)
        if config.algorithm in ("laplace", "non_private"):
            loss_at_node, event, charged = self._laplace_step(step)
        elif config.algorithm == "gaussian":
            loss_at_node, event, charged = self._gaussian_step(step)
        else:
            loss_at_node, event, charged = self._sparse_step(step)
        event = self._charge(step, event, charged)
        self.steps[nodes] += 1
        return RoundReport(t, int(nodes.size), loss_at_node, event)

    def _mix(
        self,
        matrix_ptr: np.ndarray,
        matrix_idx: np.ndarray,
        matrix_val: np.ndarray,
        nodes: np.ndarray,
        correct: Callable[[np.ndarray, np.ndarray], None] | None,
    ) -> _Mixing:
        """b_t = A_t w̃ of the online nodes into ``_mixed`` (amended by ``correct``), and its
        projection for :meth:`mixed_models` (not for ``sparse``); returns the mixing
        arguments of the step kernel (empty when it is to read ``_mixed``)."""
        config = self.config
        if correct is not None or config.algorithm == "sparse":
            kernels.mix_rows(matrix_ptr, matrix_idx, matrix_val, self.released, nodes, self._mixed)
            if correct is not None:
                correct(self._mixed, nodes)
            mixing = (_EMPTY_INT, _EMPTY_INT, _EMPTY_FLOAT, self.released)
        else:  # mixed inside the step kernel
            mixing = (matrix_ptr, matrix_idx, matrix_val, self.released)
            # b_t for mixed_models, before the released values change (the kernel mixes
            # again on the fly and does not read this copy)
            kernels.mix_rows(matrix_ptr, matrix_idx, matrix_val, self.released, nodes, self._mixed)
        if config.algorithm != "sparse":
            kernels.project_rows(self._mixed, nodes, config.radius, self.mixed_projected)
        return mixing

    def _laplace_step(self, step: _RoundStep) -> _StepOutcome:
        """Alg. 1 (``laplace``, ``non_private``): w ← Proj[b − α g(b)], then the release."""
        config = self.config
        loss_at_node = kernels.gradient_steps(
            *step.mixing, self._mixed, step.nodes, step.rows, *self._examples, step.alpha,
            config.regularisation, config.radius, np.zeros((0, self.n)), self.weights,
            step.observer, self.weights, self.weight_sum,
        )  # fmt: skip
        block = self.weights if step.everyone else self.weights[step.nodes]
        return (loss_at_node, *self._release_laplace(step, block))

    def _release_laplace(
        self, step: _RoundStep, block: np.ndarray
    ) -> tuple[PrivacyEvent | None, bool]:
        """Alg. 1's release w̃ = w + σ of the new iterates ``block`` (by the section's
        mechanism, or Laplace(S(t)/ε)); w̃ = w when non-private. Returns the event and
        whether it is charged already (a mechanism's; None when refused)."""
        config, nodes = self.config, step.nodes
        if config.private and nodes.size and self.mechanism is not None:
            noisy, event = self.budget.mechanism_rows(
                block, self.budget.output_sensitivity(step.alpha)
            )
            if self.budget.admitted(step.rows, event, step.time):
                self.released[nodes] = noisy
                return event, True
            return None, True
        if config.private and nodes.size:
            target = self.released if step.everyone else block
            event = calibration.dola_laplace_rows(
                block, alpha=step.alpha, lipschitz=LIPSCHITZ, epsilon=self.release_epsilon,
                rng=self.rng, batch=config.batch, out=target,
            )  # fmt: skip
            if not step.everyone:
                self.released[nodes] = target
            return event, False
        self.released[nodes] = block
        return None, False

    def _gaussian_step(self, step: _RoundStep) -> _StepOutcome:
        """Alg. 2: w̃ ← Proj[b − α (g(b) + σ)], the iterates being the releases."""
        config, nodes = self.config, step.nodes
        noise, event, charged = self._gaussian_noise(step)
        assert self._next is not None
        loss_at_node = kernels.gradient_steps(
            *step.mixing, self._mixed, nodes, step.rows, *self._examples, step.alpha,
            config.regularisation, config.radius, noise, self._next, step.observer,
            self.weights, self.weight_sum,
        )  # fmt: skip
        if event is not None and charged and not self.budget.admitted(step.rows, event, step.time):
            # the iterates are the releases: a refused round's nodes do not step
            self.weight_sum -= (self._next[nodes] - self.weights[nodes]).sum(axis=0)
            event = None
        else:
            self.weights[nodes] = self._next[nodes]
        return loss_at_node, event, charged

    def _gaussian_noise(self, step: _RoundStep) -> tuple[np.ndarray, PrivacyEvent | None, bool]:
        """Alg. 2's gradient noise σ per online node (the section's mechanism, σ = z·2L/h
        under rdp/pld accounting, or Alg. 2's calibration), its event, and whether the event
        is a mechanism's (charged when the step is admitted)."""
        config, nodes = self.config, step.nodes
        noise = np.zeros((nodes.size if config.private else 0, self.n))
        if nodes.size and config.private and self.mechanism is not None:
            noise, event = self.budget.mechanism_rows(noise, self.budget.gradient_sensitivity())
            return noise, event, True
        if nodes.size and config.private and self.noise_multiplier is not None:
            event = calibration.dola_gaussian_rows_at_multiplier(
                noise, sensitivity=2.0 * LIPSCHITZ / config.batch,
                noise_multiplier=self.noise_multiplier, delta=config.delta,
                accounting=config.accounting, rng=self.rng,
            )  # fmt: skip
            return noise, event, False
        if nodes.size and config.private:
            event = calibration.dola_gaussian_rows(
                noise, alpha=step.alpha, lipschitz=LIPSCHITZ, rounds=self.rounds,
                epsilon=self.release_epsilon, delta=self.release_delta, rng=self.rng,
                batch=config.batch, calibration=config.calibration,
            )  # fmt: skip
            return noise, event, False
        return noise, None, False

    def _sparse_step(self, step: _RoundStep) -> _StepOutcome:
        """Alg. 3: w = Proj[soft(p, α_t ρ)]; ϑ = w − α g(w); release ϑ̃ = ϑ + σ (the last
        releases stand when a mechanism's is refused)."""
        config, nodes = self.config, step.nodes
        assert self._next is not None
        kernels.sparse_dual_steps(
            self._mixed, nodes, step.rows, *self._examples, step.alpha,
            step.alpha * config.sparsity, config.regularisation, config.radius, self.weights,
            self._next,
        )  # fmt: skip
        loss_at_node = self._loss(self.weights[self.regret_node], step.rows)
        self.weight_sum = self.weights.sum(axis=0)
        block = self._next if step.everyone else self._next[nodes]
        event: PrivacyEvent | None = None
        charged = False
        if nodes.size and config.private and self.mechanism is not None:
            block, event = self.budget.mechanism_rows(
                block, self.budget.output_sensitivity(step.alpha)
            )
            charged = True
            if not self.budget.admitted(step.rows, event, step.time):
                block, event = self.released[nodes], None  # the last releases stand
        elif nodes.size and config.private:
            event = calibration.dola_laplace_rows(
                block, alpha=step.alpha, lipschitz=LIPSCHITZ, epsilon=self.release_epsilon,
                rng=self.rng, batch=config.batch,
            )  # fmt: skip
        self.released[nodes] = block
        return loss_at_node, event, charged

    def _charge(
        self, step: _RoundStep, event: PrivacyEvent | None, charged: bool
    ) -> PrivacyEvent | None:
        """Charge the round's release to the examples it used (unless a mechanism's was
        charged already); a non-private round records a no-noise event."""
        if not self.config.private and step.nodes.size:
            event = mechanisms.no_noise(np.zeros(self.n))[1]
        if event is not None and not charged:
            self.accountant.charge_batch(step.rows.reshape(-1), event, time=step.time)
        return event

    def _loss(self, w: np.ndarray, rows: np.ndarray) -> float:
        return float(kernels.batch_loss(w, rows, *self._examples, self.config.regularisation))

    # --- metrics ---------------------------------------------------------------------------

    def mean_weights(self) -> np.ndarray:
        """w̄_t = (1/m) Σ_i w_i from the running sum (no pass over the iterates)."""
        return self.weight_sum / self.m

    def released_models(self) -> np.ndarray:
        """The (m × n) models the nodes' released values determine: the model of each node
        that the privacy guarantee covers (Li et al., arXiv and TKDE Alg. 1–3).

        Each release is ε-DP for the examples of its round (Lemma 2 of TKDE): it is a
        function of the values released before (the mixed point b, or the mixed duals p),
        one round's fresh examples and fresh noise. Any function of released values is
        post-processing, so these models, and averages of them over nodes and rounds, carry
        the run's guarantee. The internal iterate w_{t+1}^i = Proj[b_t^i − α g(b_t^i; ξ_t^i)]
        of Alg. 1 depends on node i's last example ξ_t^i without noise, so a model built from
        the iterates (ŵ_T, w̄_T, w_T^j) is not covered: the noise is added only to the copy
        that leaves the node.

        ``laplace``: the broadcast w̃_t^i = w_t^i + σ_t^i (Alg. 1 line 7); ``gaussian``: w̃_t^i,
        which is the iterate itself (Alg. 2 perturbs the gradient before the step); ``sparse``:
        w_t^i = Proj[soft(p_t^i)], computed from the mixed released duals ϑ̃ only (Alg. 3);
        ``non_private``: the broadcast value, which is the iterate (no guarantee to cover).
        Offline nodes keep their last released value."""
        return self.weights if self.config.algorithm == "sparse" else self.released

    def mixed_models(self) -> np.ndarray:
        """The (m × n) models Proj_W(b_t^i): each node's mix of the values its neighbours
        released, projected onto W, i.e. the point its round-t step starts from (Li et al.,
        arXiv and TKDE Alg. 1 line 5, Alg. 2; with ``correct``, the mix of the last values
        received). b_t^i = Σ_j a_ij(t) w̃_{t−1}^j is a function of released values and A_t,
        which depends on the schedule and the links, not on the data, so Proj_W(b_t^i) and
        its averages over nodes and rounds are post-processing and carry the run's guarantee,
        as :meth:`released_models` does. Unlike w̃, it lies in W: the noise of the early
        releases (S(t)/ε ∝ 1/t) is averaged over the neighbours and then cut to norm R, so it
        does not swamp an average over rounds. ``sparse``: the model Proj[soft(p_t^i)] of
        the mixed released duals (:meth:`released_models`). Offline nodes keep their last."""
        return self.weights if self.config.algorithm == "sparse" else self.mixed_projected

    def resum(self) -> None:
        """Recompute Σ_i w_i exactly (the running sum drifts by rounding over many rounds)."""
        self.weight_sum = self.weights.sum(axis=0)

    def consensus(self) -> float:
        """Σ_i ‖w_i − w̄‖² (TKDE Fig. 6c: the nodes approach each other)."""
        centred = self.weights - ordered.column_means(self.weights)
        return ordered.sum_squares(centred)

    def sparsity_of(self, w: np.ndarray) -> float:
        """Fraction of exactly zero weights."""
        return float(np.count_nonzero(w == 0.0)) / w.size
