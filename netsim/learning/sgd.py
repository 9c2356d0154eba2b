"""Differentially private SGD as an agent of a random walk or of gossip learning.

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
- The noise is added to the gradient of the flattened weights (a K×d matrix for K classes is
  one vector of K·d coordinates, as in the sensitivity bounds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netsim.learning.models import LinearModel
from netsim.log import BOOL, F64, I32, I64, STR, TableSchema
from netsim.privacy.accountant import BudgetExhausted, PrivacyAccountant
from netsim.privacy.sensitivity import Norm
from netsim.sim import Simulation

#: Noise name in scenarios → (mechanism of the accountant, the norm of its sensitivity).
NOISES: dict[str, tuple[str, Norm]] = {
    "l1": ("laplace", "L1"),  # i.i.d. Laplace coordinates: ε-DP for L1 sensitivity
    "l2_paper": ("l2_laplace_radius", "L2"),  # §2.3 as printed: not ε-DP for d > 1
    "k_norm_l2": ("k_norm_l2", "L2"),  # Gamma(d) radius: ε-DP for L2 sensitivity
}

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
        "training row, the model's visits and updates after it, whether it was updated (False: "
        "the record's budget was spent) and the ε the update spent."
    ),
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
    ),
    description=(
        "One row at the end: visits and updates over all models, visits refused for lack of "
        "budget, and the run's guarantee by parallel composition over the records (the worst "
        "record's ε and δ; guarantee epsilon-DP, (epsilon,delta)-DP, none — some release had "
        "no DP guarantee, e.g. the paper's L2 noise — or non-private)."
    ),
)


@dataclass(frozen=True, eq=False)
class ModelState:
    """What a walk carries: the weights and how many visits and updates made them.

    Never modified in place (nodes' local copies share these objects, see ``WalkAgent``).
    """

    weights: np.ndarray
    updates: int
    visits: int


class PrivateSGD:
    """Eq. (8) at one record, with the noise and the budget of the accountant."""

    def __init__(
        self,
        model: LinearModel,
        x: np.ndarray,
        y: np.ndarray,
        accountant: PrivacyAccountant,
        *,
        noise: str,
        regularisation: float,
        rng: np.random.Generator,
    ) -> None:
        if noise not in NOISES:
            raise ValueError(f"unknown noise {noise!r}; use one of {', '.join(NOISES)}")
        if x.shape[0] != accountant.records or y.shape[0] != accountant.records:
            raise ValueError(
                f"need one record per accountant record: {x.shape[0]} rows, "
                f"{accountant.records} records"
            )
        self.model = model
        self.x = x
        self.y = y
        self.accountant = accountant
        self.mechanism, self.norm = NOISES[noise]
        self.sensitivity = model.sensitivity(self.norm)
        self.regularisation = regularisation
        self.rng = rng

    def initial_state(self) -> ModelState:
        return ModelState(self.model.zeros(), 0, 0)

    def step(self, state: ModelState, record: int, now: float) -> tuple[ModelState, float | None]:
        """The model after visiting ``record``, and the ε spent (``None``: no budget left)."""
        w = state.weights
        gradient = self.model.gradient(w, self.x[record], int(self.y[record]))
        try:
            noisy, event = self.accountant.release(
                record,
                gradient.ravel(),
                mechanism=self.mechanism,
                sensitivity=self.sensitivity,
                rng=self.rng,
                time=now,
            )
        except BudgetExhausted:
            return ModelState(w, state.updates, state.visits + 1), None
        t = state.updates + 1
        eta = 1.0 / math.sqrt(t)
        updated = w - eta * (self.regularisation * w + noisy.reshape(w.shape))
        return ModelState(updated, t, state.visits + 1), event.epsilon


class SGDAgent:
    """A :class:`~netsim.protocols.walk.WalkAgent` (and gossip learning's update): node i
    holds training row ``rows[i]``; every visit applies :class:`PrivateSGD`; test accuracy is
    sampled every ``evaluate_every`` visits of a model."""

    def __init__(
        self,
        sim: Simulation,
        sgd: PrivateSGD,
        *,
        rows: np.ndarray,
        x_test: np.ndarray,
        y_test: np.ndarray,
        evaluate_every: int,
    ) -> None:
        if evaluate_every < 1:
            raise ValueError(f"evaluate_every must be at least 1, got {evaluate_every}")
        self.sim = sim
        self.sgd = sgd
        self.rows = rows
        self.x_test = x_test
        self.y_test = y_test
        self.evaluate_every = evaluate_every
        self.visits_table = sim.log.table(VISITS_TABLE)
        self.accuracy_table = sim.log.table(ACCURACY_TABLE)
        self.updates = 0
        self.refused = 0

    def initial_state(self) -> ModelState:
        return self.sgd.initial_state()

    def accuracy(self, state: ModelState) -> float:
        return self.sgd.model.accuracy(state.weights, self.x_test, self.y_test)

    def visit(self, node: int, state: ModelState, steps: int, walk: int, now: float) -> ModelState:
        """Eq. (8) with the record of ``node`` (the record index is the node id)."""
        new, epsilon = self.sgd.step(state, node, now)
        updated = epsilon is not None
        self.updates += updated
        self.refused += not updated
        self.visits_table.append(
            now, walk, node, int(self.rows[node]), new.visits, new.updates, updated, epsilon or 0.0
        )
        if new.visits % self.evaluate_every == 0:
            self.accuracy_table.append(now, walk, new.visits, new.updates, self.accuracy(new))
        return new

    def guarantee(self) -> tuple[float, float, str]:
        """The run's (ε, δ, kind) over all records (parallel composition, Hegedűs et al. §3)."""
        accountant = self.sgd.accountant
        if not accountant.policy.private:
            return 0.0, 0.0, "non-private"
        run = accountant.run_guarantee()
        if not run.is_dp:
            return run.epsilon, run.delta, "none"
        return run.epsilon, run.delta, "epsilon-DP" if run.delta == 0 else "(epsilon,delta)-DP"

    def finish(self) -> None:
        self.sgd.accountant.write_tables(self.sim.log)
        epsilon, delta, kind = self.guarantee()
        self.sim.log.table(SUMMARY_TABLE).append(
            self.updates + self.refused, self.updates, self.refused, epsilon, delta, kind
        )
