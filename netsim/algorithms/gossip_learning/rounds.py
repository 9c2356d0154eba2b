"""Gossip learning in rounds (``gossip_learning.mode: rounds``): one array-batched round over
an (N × d) parameter matrix (Hegedűs, Berta, Jelasity 2016 Alg. 1; eq. 8 row by row).

Every Δ the round-based gossip engine (:class:`~netsim.protocols.rounds.RoundGossip`, push
only) pairs every online node with a random online neighbour; each pushed model (its sender's
at the start of the round) is stepped with the receiver's record through the model slot's
:meth:`~netsim.contracts.Model.batch_gradients`, its noise drawn in blocks (one block per
share of ε: :meth:`~netsim.contracts.Mechanism.noise` at scale Δ/ε), and the accountant is
charged once per round per share (:meth:`~netsim.privacy.accountant.RecordBudgets.charge_batch`)
with the policy's refusals: the t-th use of a record in arrival order gets the policy's t-th
share, none past its cap. What this approximates is listed in :mod:`netsim.protocols.rounds`.

Rounds mode runs the basic-composition policies (sgd, dp-sgd-k, dp-sgd-1, dp-sgd-inf) with a
mechanism that draws its noise in blocks (``l1``, ``l2_paper``, ``k_norm_l2``) and one record
per visit; anything else is refused when the run is built.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from netsim.errors import ScenarioError
from netsim.learning.sensitivity import clip_rows
from netsim.learning.sgd_agent import SGDAgent

#: The walk id gossip-learning visits are logged with (models are not walks).
GOSSIP_LEARNING_WALK = -1


def occurrences(keys: np.ndarray) -> np.ndarray:
    """For each entry of ``keys``, how many equal entries come before it (0 for the first)."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    counts = np.diff(np.r_[starts, keys.size])
    out = np.empty(keys.size, dtype=np.int64)
    out[order] = np.arange(keys.size) - np.repeat(starts, counts)
    return out


def last_of_each(keys: np.ndarray) -> np.ndarray:
    """Positions of the last occurrence of every distinct entry of ``keys``."""
    _, first_from_end = np.unique(keys[::-1], return_index=True)
    return keys.size - 1 - first_from_end


class GossipLearningRounds:
    """The fused round rule of gossip learning: the models of all nodes as one matrix."""

    round_form: ClassVar[str] = "fused"

    def __init__(self, agent: SGDAgent, n: int, *, merge: str = "none") -> None:
        sgd = agent.sgd
        accountant = sgd.accountant
        if sgd.batch != 1:
            raise ScenarioError("gossip_learning.mode rounds needs learning.batch 1")
        if accountant.tight:
            raise ScenarioError(
                "gossip_learning.mode rounds runs basic accounting only (learning.accounting)"
            )
        d = sgd.initial.size
        scratch = np.random.default_rng(0)
        if accountant.policy.private and sgd.mechanism.noise(1, d, 1.0, scratch) is None:
            raise ScenarioError(
                f"gossip_learning.mode rounds needs noise drawn in blocks; "
                f"{type(sgd.mechanism).__name__} cannot (use l1, l2_paper or k_norm_l2)"
            )
        self.agent = agent
        self.merge = merge
        self.parameters = np.tile(sgd.initial, (n, 1))
        self.updates = np.zeros(n, dtype=np.int64)
        self.visits = np.zeros(n, dtype=np.int64)
        self.labels = np.asarray(sgd.y)
        #: Events of the shares of ε made so far (by ε): one per share, charged in batches.
        self._events: dict[float, object] = {}

    # --- the round --------------------------------------------------------------------------

    def round_exchange(
        self, initiators: np.ndarray, peers: np.ndarray, pull_lost: np.ndarray
    ) -> None:
        """Initiator k pushes its model to ``peers[k]``, which steps it with its record and
        keeps it (the last arrival of the round kept; see :mod:`netsim.protocols.rounds`)."""
        if initiators.size == 0:
            return
        senders, targets = initiators, peers
        params = self.parameters[senders]
        updates, visits = self.updates[senders], self.visits[senders]
        if self.merge == "average":
            params = (params + self.parameters[targets]) / 2.0
            updates = np.maximum(updates, self.updates[targets])
            visits = np.maximum(visits, self.visits[targets])
        records, units = self._records(targets)
        epsilon, allowed = self._charge(units)
        new, updated = self._step(params, updates, records, epsilon, allowed)
        new_updates = updates + updated
        new_visits = visits + 1
        keep = last_of_each(targets)
        self.parameters[targets[keep]] = new[keep]
        self.updates[targets[keep]] = new_updates[keep]
        self.visits[targets[keep]] = new_visits[keep]
        self._log(targets, records, new, new_visits, new_updates, updated, epsilon, allowed)

    def round_tick(self, active: np.ndarray) -> None:
        return None

    def _records(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The record each arrival uses (a node's shard cycled in arrival order) and the
        accountant's unit it charges (that record, or the node)."""
        sgd = self.agent.sgd
        r = sgd.records_per_node
        if r == 1:
            records = targets.copy()
        else:
            occurrence = occurrences(targets)
            records = targets * r + (sgd.cursor[targets] + occurrence) % r
            np.add.at(sgd.cursor, targets, 1)
            sgd.cursor[targets] %= r
        return records, (targets if sgd.unit == "node" else records)

    def _charge(self, units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ε each arrival spends and whether it was allowed: the policy's share for the
        unit's use number in arrival order; one ``charge_batch`` per share, the refused
        counted (as exact mode's refusals)."""
        sgd = self.agent.sgd
        accountant = sgd.accountant
        now = self.agent.sim.now
        if not accountant.policy.private:
            accountant.charge_batch(units, sgd.free_event, time=now)
            return np.zeros(units.size), np.ones(units.size, dtype=bool)
        use = accountant.uses[units] + 1 + occurrences(units)
        epsilon = np.full(units.size, math.nan)
        for value in np.unique(use):
            share = accountant.policy.epsilon_for_use(accountant.epsilon, int(value))
            if share is not None and share > 0:
                epsilon[use == value] = share
        # a share that would pass the budget (basic sum) is refused as exact mode refuses it
        spent = accountant.epsilon_spent[units] + np.nan_to_num(epsilon)
        allowed = ~np.isnan(epsilon) & (spent <= accountant.epsilon_limit)
        for share in np.unique(epsilon[allowed]):
            group = allowed & (epsilon == share)
            accountant.charge_batch(units[group], self._event(float(share)), time=now)
        if (~allowed).any():
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
    ) -> tuple[np.ndarray, np.ndarray]:
        """Eq. (8) for the allowed arrivals (the others keep the model): the model slot's
        batched gradients, clipped when ``learning.clip`` is set, noise in blocks per share;
        a step that is not finite keeps the model (its ε spent), counted as exact mode does."""
        sgd = self.agent.sgd
        every = bool(allowed.all())
        rows = np.arange(allowed.size) if every else np.flatnonzero(allowed)
        if rows.size == 0:
            return params, np.zeros(params.shape[0], dtype=np.int64)
        w = params if every else params[rows]
        g = sgd.model.batch_gradients(w, sgd.x[records[rows]], self.labels[records[rows]])
        if sgd.clip is not None:
            g = clip_rows(g, sgd.clip, sgd.norm)
        if sgd.accountant.policy.private:
            shares = epsilon[rows]
            for share in np.unique(shares):
                at = shares == share
                scale = sgd.sensitivity / share
                g[at] += sgd.mechanism.noise(int(at.sum()), w.shape[1], scale, sgd.rng)
        eta = sgd.learning_rate / np.sqrt(updates[rows] + 1.0)
        with np.errstate(over="ignore", invalid="ignore"):
            stepped = w - eta[:, None] * (sgd.regularisation * w + g)
            finite = np.isfinite(stepped).all(axis=1)
            sgd.non_finite += int((~finite).sum())
            sgd.non_finite_noise += int((~np.isfinite(g).all(axis=1) & ~finite).sum())
        if every and finite.all():
            return stepped, np.ones(params.shape[0], dtype=np.int64)
        new = params.copy()
        new[rows[finite]] = stepped[finite]
        updated = np.zeros(params.shape[0], dtype=np.int64)
        updated[rows[finite]] = 1
        return new, updated

    def _log(
        self,
        targets: np.ndarray,
        records: np.ndarray,
        new: np.ndarray,
        visits: np.ndarray,
        updates: np.ndarray,
        updated: np.ndarray,
        epsilon: np.ndarray,
        allowed: np.ndarray,
    ) -> None:
        """The round's ``sgd_visits`` rows (column-wise), the agent's counters, and the
        ``accuracy`` rows of the models whose visits reached a multiple of evaluate_every
        (one matrix product)."""
        agent = self.agent
        now = agent.sim.now
        count = targets.size
        agent.updates += int(updated.sum())
        agent.refused += int((~allowed).sum())
        agent.visits_table.extend([
            np.full(count, now), np.full(count, GOSSIP_LEARNING_WALK, dtype=np.int64),
            targets.astype(np.int32), agent.rows[records].astype(np.int32), visits, updates,
            updated.astype(bool), epsilon,
        ])  # fmt: skip
        due = np.flatnonzero(visits % agent.evaluate_every == 0)
        if due.size:
            predicted = agent.sgd.model.predict_many(new[due], agent.x_test)
            accuracy = np.mean(predicted == agent.y_test[None, :], axis=1)
            agent.accuracy_table.extend([
                np.full(due.size, now), np.full(due.size, GOSSIP_LEARNING_WALK, dtype=np.int64),
                visits[due], updates[due], accuracy,
            ])  # fmt: skip

    # --- what the section reads -------------------------------------------------------------

    def model_bytes(self) -> float:
        """The size of one model message: 8 bytes per parameter."""
        return 8.0 * self.parameters.shape[1]

    def accuracy_spread(self, nodes: np.ndarray) -> tuple[object, ...]:
        """A ``gossip_learning_accuracy`` row (without the time) for the models of ``nodes``:
        their test accuracies in one matrix product."""
        agent = self.agent
        predicted = agent.sgd.model.predict_many(self.parameters[nodes], agent.x_test)
        accuracy = np.mean(predicted == agent.y_test[None, :], axis=1)
        return (
            int(nodes.size),
            float(self.visits[nodes].mean()),
            float(self.updates[nodes].mean()),
            float(accuracy.mean()),
            float(accuracy.min()),
            float(np.median(accuracy)),
            float(accuracy.max()),
        )
