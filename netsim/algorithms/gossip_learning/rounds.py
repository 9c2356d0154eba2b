"""Gossip learning in rounds (``gossip_learning.mode: rounds``): one array-batched round over
an (N × d) parameter matrix (Hegedűs, Berta, Jelasity 2016 Alg. 1; eq. 8 row by row).

Every Δ the round-based gossip engine (:class:`~netsim.protocols.rounds.RoundGossip`, push
only; its rounds at (k + ½)Δ) pairs every online node with a random online neighbour, in a
random order; each pushed model (the one its sender holds at its turn in that order:
:func:`chain_levels`) is stepped with the receiver's record through the model slot's
:meth:`~netsim.contracts.Model.batch_gradients`, its noise drawn in blocks, and the accountant
is charged once per round with exact mode's refusals, in arrival order:

- under basic accounting, one block and one
  :meth:`~netsim.privacy.accountant.RecordBudgets.charge_batch` per share of ε
  (:meth:`~netsim.contracts.Mechanism.noise` at scale Δ/ε): the t-th use of a record in
  arrival order gets the policy's t-th share, none past its cap;
- under ``accounting: rdp`` or ``pld`` (Gaussian noise at the run's noise multiplier z: fixed
  for ``dp-sgd``, calibrated to k uses for ``dp-sgd-<k>``), one block of N(0, σ²I) at
  σ = z·Δ and one :meth:`~netsim.privacy.accountant.PrivacyAccountant.charge_at_multiplier`:
  a record's uses are composed by RDP (Mironov 2017) or PLD one at a time, as exact mode's
  releases compose them, and a use that would take its record past the budget is refused,
  as are the record's later arrivals that round. The ledger and records tables mean what
  exact mode's mean (tests/test_gossip_learning_private_rounds.py checks the batched charges
  against exact mode's releases one after the other, and the accuracy curve against exact
  mode's with a paired test that sees a lag of 0.007).

What this approximates is listed in :mod:`netsim.protocols.rounds`.

Rounds mode runs the basic-composition policies (sgd, dp-sgd-k, dp-sgd-1, dp-sgd-inf) with a
mechanism that draws its noise in blocks (``l1``, ``l2_paper``, ``k_norm_l2``), and under rdp
or pld ``gaussian`` with dp-sgd or dp-sgd-k, one record per visit; anything else (another
noise under rdp/pld, DP-SGD-∞'s halving shares of Gaussian noise, ``batch`` > 1, the
network threat model) is refused when the run is built.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from functools import cache
from typing import Any, ClassVar

import numpy as np
from threadpoolctl import ThreadpoolController

from netsim.compiled import njit
from netsim.errors import ScenarioError
from netsim.kernel_cache import guard_kernels
from netsim.learning.models import model_test_accuracies
from netsim.learning.private_sgd import PrivateSGD
from netsim.learning.sensitivity import clip_rows
from netsim.learning.sgd_agent import SGDAgent
from netsim.privacy.events import PrivacyEvent
from netsim.privacy.mechanisms import GaussianMechanism, gaussian_noise

#: The walk id gossip-learning visits are logged with (models are not walks).
GOSSIP_LEARNING_WALK = -1


@cache
def _thread_pools() -> ThreadpoolController:
    """The process's native thread pools (found once: the scan takes milliseconds)."""
    return ThreadpoolController()


def one_blas_thread() -> AbstractContextManager[Any]:
    """BLAS on one thread for a round's products (a few hundred models at a time): on more
    threads they cost several times the CPU, the threads waiting on each other (measured on
    Spambase: 47 instead of 2 ms a cycle with the other core busy)."""
    return _thread_pools().limit(limits=1, user_api="blas")


@njit(cache=True)
def arrival_ranks(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each entry of ``keys``, how many equal entries come before it (0 for the first),
    and whether it is the last of its key. ``counts`` is a zeroed scratch array indexed by
    key (left zeroed): one pass instead of a sort."""
    n = keys.size
    ranks = np.empty(n, dtype=np.int64)
    for i in range(n):
        ranks[i] = counts[keys[i]]
        counts[keys[i]] += 1
    last = np.empty(n, dtype=np.bool_)
    for i in range(n):
        last[i] = ranks[i] == counts[keys[i]] - 1
    for i in range(n):
        counts[keys[i]] = 0
    return ranks, last


@njit(cache=True)
def chain_levels(
    senders: np.ndarray, targets: np.ndarray, latest: np.ndarray, average: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The order of a round's sends as dependencies: send k carries the model its sender holds
    at its turn — the output of ``held[k]``, the latest earlier arrival at the sender (−1: its
    model at the start of the round) — and with ``average`` meets the receiver's current model,
    the output of ``local[k]``, the latest earlier arrival at the receiver (−1: likewise).
    ``level[k]`` (≥ 1) is one more than the levels it depends on, so the sends of one level can
    be stepped together once the levels below are. ``latest`` is a scratch array indexed by
    node, all −1 (left so)."""
    m = senders.size
    held = np.empty(m, dtype=np.int64)
    local = np.full(m, -1, dtype=np.int64)
    level = np.empty(m, dtype=np.int64)
    for k in range(m):
        j = latest[senders[k]]
        held[k] = j
        depth = 1 if j < 0 else level[j] + 1
        if average:
            i = latest[targets[k]]
            local[k] = i
            if i >= 0 and level[i] + 1 > depth:
                depth = level[i] + 1
        level[k] = depth
        latest[targets[k]] = k
    for k in range(m):
        latest[targets[k]] = -1
    return held, local, level


@njit(cache=True)
def gather_held(
    batch: np.ndarray,
    nodes: np.ndarray,
    source: np.ndarray,
    position: np.ndarray,
    start: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    round_out: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The models ``nodes[k]`` hold at their turn, for the arrivals k of ``batch``, with their
    updates, visits and scores: row ``position[source[k]]`` of ``round_out`` (this round's
    outputs so far: models, updates, visits, scores, in level order) where an arrival came
    earlier in the round, else the node's row of ``start`` (the models as the round began);
    in one pass."""
    parameters, updates, visits, accuracy = start
    new, new_updates, new_visits, new_accuracy = round_out
    size = batch.size
    params = np.empty((size, parameters.shape[1]))
    age = np.empty(size, dtype=np.int64)
    seen = np.empty(size, dtype=np.int64)
    score = np.empty(size)
    for i in range(size):
        k = batch[i]
        j = source[k]
        if j >= 0:
            row = position[j]
            params[i, :] = new[row, :]
            age[i], seen[i], score[i] = new_updates[row], new_visits[row], new_accuracy[row]
        else:
            node = nodes[k]
            params[i, :] = parameters[node, :]
            age[i], seen[i], score[i] = updates[node], visits[node], accuracy[node]
    return params, age, seen, score


@njit(cache=True)
def descend(
    w: np.ndarray, g: np.ndarray, eta: np.ndarray, regularisation: float, out: np.ndarray
) -> bool:
    """Eq. (8) row by row, out[i] = w[i] − η_i(λ·w[i] + g[i]) (the operations of
    :meth:`~netsim.learning.private_sgd.PrivateSGD.step`, in its order), in one pass; whether
    every entry is finite."""
    check = 0.0
    for i in range(w.shape[0]):
        for j in range(w.shape[1]):
            value = w[i, j] - eta[i] * (regularisation * w[i, j] + g[i, j])
            out[i, j] = value
            check += value - value  # 0 for a finite value, NaN otherwise
    return check == 0.0


@njit(cache=True)
def keep_last(
    targets: np.ndarray,
    last: np.ndarray,
    new: np.ndarray,
    updates: np.ndarray,
    visits: np.ndarray,
    accuracy: np.ndarray,
    node_parameters: np.ndarray,
    node_updates: np.ndarray,
    node_visits: np.ndarray,
    node_accuracy: np.ndarray,
    rows: np.ndarray,
) -> None:
    """Each node's model becomes its last arrival's (Alg. 1: the received model, stepped,
    replaces the local one), with its updates, visits and score; in place, in one pass.
    Arrival i's model is row ``rows[i]`` of ``new``."""
    for i in range(targets.size):
        if last[i]:
            node = targets[i]
            node_parameters[node, :] = new[rows[i], :]
            node_updates[node] = updates[i]
            node_visits[node] = visits[i]
            node_accuracy[node] = accuracy[i]


def gaussian_release(sgd: PrivateSGD) -> PrivacyEvent:
    """The event of every release of a rounds-mode run under rdp/pld accounting: Gaussian
    noise at the noise multiplier z the accountant gives the run's policy (fixed for
    ``dp-sgd``, calibrated to k uses for ``dp-sgd-<k>``), σ = z·Δ (Mironov 2017 composes
    these per record), made once from a zero vector and a scratch generator; refused for
    any other noise or policy, whose noise rounds mode cannot draw in blocks."""
    accountant = sgd.accountant
    mechanism = sgd.mechanism
    multiplier = accountant.noise_multiplier_for(mechanism)
    if multiplier is None or not isinstance(mechanism, GaussianMechanism):
        raise ScenarioError(
            f"gossip_learning.mode rounds under learning.accounting {accountant.accounting} "
            "runs Gaussian noise at a noise multiplier (learning.noise gaussian with "
            "learning.algorithm dp-sgd or dp-sgd-<k>); got noise "
            f"{type(mechanism).__name__} with algorithm {accountant.policy.name}: use "
            "gossip_learning.mode exact, or accounting basic with l1, l2_paper or k_norm_l2"
        )
    with mechanism.claims_checked():
        _, event = mechanism.release_at_multiplier(
            np.zeros(sgd.initial.size), sensitivity=sgd.sensitivity,
            noise_multiplier=multiplier, delta=accountant.delta, rng=np.random.default_rng(0),
        )  # fmt: skip
    return event


class GossipLearningRounds:
    """The fused round rule of gossip learning: the models of all nodes as one matrix."""

    round_form: ClassVar[str] = "fused"

    def __init__(self, agent: SGDAgent, n: int, *, merge: str = "none") -> None:
        sgd = agent.sgd
        accountant = sgd.accountant
        if sgd.batch != 1:
            raise ScenarioError("gossip_learning.mode rounds needs learning.batch 1")
        if sgd.sampling != "cyclic":  # its fused round takes each node's next record
            raise ScenarioError("gossip_learning.mode rounds needs learning.sampling cyclic")
        d = sgd.initial.size
        scratch = np.random.default_rng(0)
        #: Under rdp/pld: the event of every release (Gaussian at the run's noise multiplier),
        #: whose σ = z·Δ the noise is drawn at; None: a share of ε per use (basic accounting).
        self._gaussian = gaussian_release(sgd) if accountant.tight else None
        blocks = not accountant.policy.private or accountant.tight
        if not blocks and sgd.mechanism.noise(1, d, 1.0, scratch) is None:
            raise ScenarioError(
                f"gossip_learning.mode rounds needs noise drawn in blocks; "
                f"{type(sgd.mechanism).__name__} cannot (use l1, l2_paper or k_norm_l2)"
            )
        self.agent = agent
        self.merge = merge
        self.parameters = np.tile(sgd.initial, (n, 1))
        self.updates = np.zeros(n, dtype=np.int64)
        self.visits = np.zeros(n, dtype=np.int64)
        #: The test accuracy of each node's current model, NaN until it is evaluated (a model
        #: that no step changed is not evaluated again: the same weights, the same score).
        self.accuracy = np.full(n, math.nan)
        self.labels = np.asarray(sgd.y)
        #: Work arrays of a round (its outputs in level order, the records' features, the
        #: steps of a level with refusals), reused: a fresh N × d array each round costs its
        #: page faults again.
        self._new = np.empty_like(self.parameters)
        self._features = np.empty((n, sgd.x.shape[1]))
        self._stepped = np.empty_like(self.parameters)
        #: Zeroed scratch arrays for :func:`arrival_ranks`, by node and by record, and the
        #: all −1 one of :func:`chain_levels`.
        self._node_counts = np.zeros(n, dtype=np.int64)
        self._latest = np.full(n, -1, dtype=np.int64)
        self._unit_counts = np.zeros(accountant.records, dtype=np.int64)
        #: Events of the shares of ε made so far (by ε): one per share, charged in batches.
        self._events: dict[float, object] = {}

    # --- the round --------------------------------------------------------------------------

    def round_exchange(
        self, initiators: np.ndarray, peers: np.ndarray, pull_lost: np.ndarray
    ) -> None:
        """Initiator k, in the round's order, pushes the model it holds at its turn to
        ``peers[k]``, which steps it with its record (see :mod:`netsim.protocols.rounds`)."""
        if initiators.size == 0:
            return
        with one_blas_thread():
            self._exchange(initiators, peers)

    def _exchange(self, senders: np.ndarray, targets: np.ndarray) -> None:
        """:meth:`round_exchange` of a non-empty round: the records, the charges and the
        chains of the round's order, then the sends level by level (:func:`chain_levels`),
        each level's models stepped together, and every node's model its last arrival's.
        The outputs are kept in level order (a level is a contiguous block, written in place
        by the step); ``position[k]`` is arrival k's row."""
        ranks, last = arrival_ranks(targets, self._node_counts)
        records, units = self._records(targets, ranks)
        epsilon, allowed = self._charge(units, ranks if units is targets else None)
        average = self.merge == "average"
        held, local, level = chain_levels(senders, targets, self._latest, average)
        m = targets.size
        order = np.argsort(level, kind="stable")
        position = np.empty(m, dtype=np.int64)
        position[order] = np.arange(m)
        bounds = np.cumsum(np.bincount(level))
        new = self._new[:m]
        updates = np.empty(m, dtype=np.int64)
        visits = np.empty(m, dtype=np.int64)
        updated = np.empty(m, dtype=np.int64)
        accuracy = np.empty(m)
        start = (self.parameters, self.updates, self.visits, self.accuracy)
        round_out = (new, updates, visits, accuracy)
        for depth in range(1, bounds.size):
            low, high = int(bounds[depth - 1]), int(bounds[depth])
            batch = order[low:high]
            arrived = gather_held(batch, senders, held, position, start, round_out)
            params, age, seen, score = arrived
            if average:
                mine = gather_held(batch, targets, local, position, start, round_out)
                params = (params + mine[0]) / 2.0
                age, seen = np.maximum(age, mine[1]), np.maximum(seen, mine[2])
            changed = self._step(
                params, age, records[batch], epsilon[batch], allowed[batch], new[low:high]
            )
            updated[low:high] = changed
            updates[low:high] = age + changed
            visits[low:high] = seen + 1
            # a model no step changed keeps its score (an averaged one is new: scored anew)
            accuracy[low:high] = math.nan if average else np.where(changed, math.nan, score)
        updates, visits, updated = updates[position], visits[position], updated[position]
        accuracy = accuracy[position]
        self._log(targets, records, (new, position), visits, updates, updated, epsilon,
                  allowed, accuracy)  # fmt: skip
        keep_last(
            targets, last, new, updates, visits, accuracy,
            self.parameters, self.updates, self.visits, self.accuracy, position,
        )  # fmt: skip

    def round_tick(self, active: np.ndarray) -> None:
        return None

    def _records(self, targets: np.ndarray, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The record each arrival uses (a node's shard cycled in arrival order: ``ranks`` is
        each arrival's number at its node) and the accountant's unit it charges (that record,
        or the node)."""
        sgd = self.agent.sgd
        r = sgd.records_per_node
        if r == 1:
            records = targets
        else:
            records = targets * r + (sgd.cursor[targets] + ranks) % r
            np.add.at(sgd.cursor, targets, 1)
            sgd.cursor[targets] %= r
        return records, (targets if sgd.unit == "node" else records)

    def _charge(self, units: np.ndarray, ranks: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The ε each arrival spends and whether it was allowed: the policy's share for the
        unit's use number in arrival order (``ranks``: each arrival's number at its unit, when
        known); one ``charge_batch`` per share, the refused counted (as exact mode's
        refusals)."""
        sgd = self.agent.sgd
        accountant = sgd.accountant
        now = self.agent.sim.now
        if ranks is None:
            ranks, _ = arrival_ranks(units, self._unit_counts)
        if not accountant.policy.private:
            accountant.charge_batch(units, sgd.free_event, time=now, ranks=ranks)
            return np.zeros(units.size), np.ones(units.size, dtype=bool)
        if self._gaussian is not None:
            allowed = accountant.charge_at_multiplier(units, ranks, self._gaussian, time=now)
            return np.where(allowed, self._gaussian.epsilon, 0.0), allowed
        use = accountant.uses[units] + 1 + ranks
        epsilon = np.full(units.size, math.nan)
        lowest = int(use.min())
        for offset in np.flatnonzero(np.bincount(use - lowest)):
            share = accountant.policy.epsilon_for_use(accountant.epsilon, lowest + int(offset))
            if share is not None and share > 0:
                epsilon[use == lowest + offset] = share
        # a share that would pass the budget (basic sum) is refused as exact mode refuses it
        spent = accountant.epsilon_spent[units] + np.nan_to_num(epsilon)
        allowed = ~np.isnan(epsilon) & (spent <= accountant.epsilon_limit)
        shares = np.unique(epsilon[allowed])
        for share in shares:
            group = allowed & (epsilon == share)
            # the arrivals' ranks are their ranks within the batch only when it is all of them
            whole = shares.size == 1 and bool(allowed.all())
            accountant.charge_batch(
                units[group], self._event(float(share)), time=now, ranks=ranks if whole else None
            )
        if not allowed.all():
            refused = units[~allowed]
            accountant.count_refused(
                refused,
                f"budget spent ({accountant.policy.name}, {int(accountant.uses[refused[-1]])} "
                "uses)",
            )
        return np.where(allowed, epsilon, 0.0), allowed

    def _event(self, share: float) -> object:
        """The mechanism's event for a release at ``share`` (made once per share, from a
        zero vector and a scratch generator: only the event is kept, never that noise)."""
        event = self._events.get(share)
        if event is None:
            sgd = self.agent.sgd
            accountant = sgd.accountant
            _, event = sgd.mechanism.spend(
                np.zeros(sgd.initial.size), sensitivity=sgd.sensitivity, epsilon=share,
                delta=accountant.delta_for_use(share), rng=np.random.default_rng(0),
            )  # fmt: skip
            self._events[share] = event
        return event

    def _step(
        self,
        params: np.ndarray,
        updates: np.ndarray,
        records: np.ndarray,
        epsilon: np.ndarray,
        allowed: np.ndarray,
        out: np.ndarray,
    ) -> np.ndarray:
        """Eq. (8) for the allowed arrivals (the others keep the model): the model slot's
        batched gradients, clipped when ``learning.clip`` is set, noise in blocks per share;
        a step that is not finite keeps the model (its ε spent), counted as exact mode does.
        The models are written to ``out``; returned: 1 where a step was taken."""
        sgd = self.agent.sgd
        every = bool(allowed.all())
        rows = np.arange(allowed.size) if every else np.flatnonzero(allowed)
        if rows.size == 0:
            out[:] = params
            return np.zeros(params.shape[0], dtype=np.int64)
        w = params if every else params[rows]
        at = records if every else records[rows]
        x = np.take(sgd.x, at, axis=0, out=self._features[: rows.size])
        g = sgd.model.batch_gradients(w, x, self.labels[at])
        if sgd.clip is not None:
            g = clip_rows(g, sgd.clip, sgd.norm)
        if sgd.accountant.policy.private:
            self._add_noise(g, epsilon if every else epsilon[rows])
        eta = sgd.learning_rate / np.sqrt(updates[rows] + 1.0)
        stepped = out if every else self._stepped[: rows.size]
        if descend(w, g, eta, sgd.regularisation, stepped):
            finite = np.ones(rows.size, dtype=bool)
        else:
            finite = np.isfinite(stepped).all(axis=1)
            sgd.non_finite += int((~finite).sum())
            sgd.non_finite_noise += int((~np.isfinite(g).all(axis=1) & ~finite).sum())
        if every and finite.all():
            return np.ones(params.shape[0], dtype=np.int64)
        kept = np.ones(params.shape[0], dtype=bool)
        kept[rows[finite]] = False
        if every:  # out holds the steps: put back the models whose step was not finite
            out[kept] = params[kept]
        else:
            out[:] = params
            out[rows[finite]] = stepped[finite]
        return (~kept).astype(np.int64)

    def _add_noise(self, g: np.ndarray, shares: np.ndarray) -> None:
        """Add the mechanism's noise at scale Δ/ε to each row of ``g``, one block per share;
        under rdp/pld N(0, σ²I) at the release's σ = z·Δ to every row, in one block."""
        sgd = self.agent.sgd
        if self._gaussian is not None:
            g += gaussian_noise(g.shape[0], g.shape[1], self._gaussian.noise_scale, sgd.rng)
            return
        for share in np.unique(shares):
            at = shares == share
            scale = sgd.sensitivity / share
            g[at] += sgd.mechanism.noise(int(at.sum()), g.shape[1], scale, sgd.rng)

    def _log(
        self,
        targets: np.ndarray,
        records: np.ndarray,
        new: tuple[np.ndarray, np.ndarray],
        visits: np.ndarray,
        updates: np.ndarray,
        updated: np.ndarray,
        epsilon: np.ndarray,
        allowed: np.ndarray,
        accuracy: np.ndarray,
    ) -> None:
        """The round's ``sgd_visits`` rows (column-wise), the agent's counters, and the
        ``accuracy`` rows of the models whose visits reached a multiple of evaluate_every:
        those not scored yet (``accuracy`` NaN) in one matrix product, their scores written
        back into ``accuracy``. ``new``: the round's models, and each arrival's row of them."""
        agent = self.agent
        now = agent.sim.now
        count = targets.size
        agent.updates += int(updated.sum())
        agent.refused += count - int(np.count_nonzero(allowed))
        agent.visits_table.extend([
            np.full(count, now), np.full(count, GOSSIP_LEARNING_WALK, dtype=np.int64),
            targets.astype(np.int32), agent.rows[records].astype(np.int32), visits, updates,
            updated.astype(bool), epsilon,
        ])  # fmt: skip
        due = np.flatnonzero(visits % agent.evaluate_every == 0)
        if due.size:
            unknown = due[np.isnan(accuracy[due])]
            if unknown.size:
                models, position = new
                accuracy[unknown] = self._accuracies(models[position[unknown]])
            agent.accuracy_table.extend([
                np.full(due.size, now), np.full(due.size, GOSSIP_LEARNING_WALK, dtype=np.int64),
                visits[due], updates[due], accuracy[due],
            ])  # fmt: skip

    def _accuracies(self, params: np.ndarray) -> np.ndarray:
        """The test accuracy of each row of ``params`` (one matrix product)."""
        agent = self.agent
        return model_test_accuracies(agent.sgd.model, params, agent.x_test, agent.y_test)

    # --- what the section reads -------------------------------------------------------------

    def model_bytes(self) -> float:
        """The size of one model message: 8 bytes per parameter."""
        return 8.0 * self.parameters.shape[1]

    def parameters_of(self, nodes: np.ndarray) -> list[np.ndarray]:
        """The current models' parameters of ``nodes``, one per node."""
        return list(self.parameters[nodes])

    def accuracy_spread(self, nodes: np.ndarray) -> tuple[object, ...]:
        """A ``gossip_learning_accuracy`` row (without the time) for the models of ``nodes``:
        the test accuracies of those not scored since they last changed in one matrix
        product (the others' scores are those of the same weights)."""
        accuracy = self.accuracy[nodes]
        unknown = np.flatnonzero(np.isnan(accuracy))
        if unknown.size:
            with one_blas_thread():
                accuracy[unknown] = self._accuracies(self.parameters[nodes[unknown]])
            self.accuracy[nodes[unknown]] = accuracy[unknown]
        return spread_row(self.visits[nodes], self.updates[nodes], accuracy)


def spread_row(visits: np.ndarray, updates: np.ndarray, accuracy: np.ndarray) -> tuple[object, ...]:
    """A ``gossip_learning_accuracy`` row without its time, from the evaluated models' visits,
    updates and test accuracies (one entry per node): how many, the mean visits and updates,
    and the mean, minimum, median and maximum accuracy (every engine's models)."""
    return (
        int(accuracy.size),
        float(visits.mean()),
        float(updates.mean()),
        float(accuracy.mean()),
        float(accuracy.min()),
        float(np.median(accuracy)),
        float(accuracy.max()),
    )


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
