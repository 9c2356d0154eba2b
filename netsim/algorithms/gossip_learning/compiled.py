"""Gossip learning's models on the compiled exact core (:mod:`netsim.protocols.exact`): the
nodes' models and the messages' as arrays the kernel shares, the visits it makes
(:func:`netsim.learning.compiled_visit.visit_model`) and the ones it leaves to Python, the
rows it gathers written in the agent's order.

:class:`CompiledModels` takes the place of
:class:`~netsim.algorithms.gossip_learning.application.GossipLearningRule` once the core is
attached, with the same reading methods (:meth:`~CompiledModels.parameters_of`,
:meth:`~CompiledModels.accuracy_spread`): a model is a row of :attr:`~CompiledModels.params`
and its updates, visits and serial (the state it is: the nodes that never received a model
share the initial one, scored once as on SimPy).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netsim.algorithms.gossip_learning.rounds import GOSSIP_LEARNING_WALK, spread_row
from netsim.event_queue import GOSSIP_LEARNING, LEARNING_PART
from netsim.learning.compiled_visit import (
    AVERAGE,
    EVAL_INTS,
    EVAL_PARAMS,
    EVAL_ROWS,
    EVAL_TIMES,
    EVALUATE_EVERY,
    FREE,
    HINGE,
    IN_PYTHON,
    LAST_REFUSED,
    LEARNING_RATE,
    LEDGER_INTS,
    LEDGER_ROWS,
    LEDGER_TIMES,
    LOGISTIC,
    LOSS,
    MESSAGE_INTS,
    MESSAGE_PARAMS,
    META_SIZE,
    MODE,
    NEXT_SERIAL,
    NODE_UNIT,
    NON_FINITE,
    NON_FINITE_NOISE,
    RECORDS_PER_NODE,
    REFUSALS,
    REGULARISATION,
    SERIAL,
    SHARES,
    SPENT,
    UNIT,
    UPDATED,
    UPDATES,
    VISIT_EPSILONS,
    VISIT_INTS,
    VISIT_ROWS,
    VISIT_TIMES,
    VISITS,
)
from netsim.learning.models import LinearSVM, LogisticRegression, model_accuracies
from netsim.learning.state import ModelState

#: Rows gathered per block before Python writes them (visits and ledger charges; the
#: evaluations' block holds as many models, one every ``evaluate_every`` visits at most).
ROW_BLOCK = 4096
#: Fewer rows than this are written as Python values, as appended rows are (a visit left to
#: Python writes the rows gathered before it: often a handful, and an Arrow column of each
#: cost more than the visit).
FEW_ROWS = 256


class CompiledModels:
    """The models of gossip learning on the compiled core (module docstring)."""

    def __init__(self, rule: Any, core: Any) -> None:
        """``rule``: the run's :class:`~netsim.algorithms.gossip_learning.application.
        GossipLearningRule`, whose models (all the initial one, before the run) these arrays
        take over; ``core``: the attached :class:`~netsim.protocols.exact.core.ExactCore`."""
        self.rule, self.core = rule, core
        self.agent = agent = rule.agent
        self.sgd = sgd = agent.sgd
        self.accountant = sgd.accountant
        models = rule.models
        n = len(models)
        serials: dict[int, int] = {}
        node_ints = np.zeros((n, 3), dtype=np.int64)
        for node, state in enumerate(models):
            serial = serials.setdefault(id(state), len(serials))
            node_ints[node] = state.updates, state.visits, serial
        self.params = np.ascontiguousarray(np.stack([state.parameters for state in models]),
                                           dtype=np.float64)  # fmt: skip
        self.node_ints = node_ints
        d = self.params.shape[1]
        slots = core.in_flight[0].shape[0]
        self.message_params = np.zeros((slots, d))
        self.message_ints = np.zeros((slots, 2), dtype=np.int64)
        features = np.ascontiguousarray(sgd.x, dtype=np.float64).reshape(len(sgd.x), -1)
        labels = 2 * np.asarray(sgd.y, dtype=np.int64) - 1
        every = int(agent.evaluate_every)
        self.meta = meta = np.zeros(META_SIZE, dtype=np.int64)
        meta[NEXT_SERIAL] = len(serials)
        meta[MODE] = IN_PYTHON
        meta[LOSS] = HINGE if isinstance(sgd.model, LinearSVM) else LOGISTIC
        meta[UNIT] = NODE_UNIT if sgd.unit == "node" else 0
        meta[RECORDS_PER_NODE] = sgd.records_per_node
        meta[EVALUATE_EVERY] = every
        meta[AVERAGE] = rule.merge == "average"
        rates = np.zeros(2)
        rates[LEARNING_RATE], rates[REGULARISATION] = sgd.learning_rate, sgd.regularisation
        evaluations = ROW_BLOCK // every + 2
        self.arrays: tuple = (
            self.params, node_ints, self.message_params, self.message_ints, features, labels,
            np.ascontiguousarray(agent.rows, dtype=np.int64), sgd.cursor, self.accountant.uses,
            self.accountant.refused, np.zeros(self.accountant.records, dtype=np.bool_),
            np.zeros((2, d)), np.zeros(ROW_BLOCK), np.zeros((ROW_BLOCK, 5), dtype=np.int64),
            np.zeros(evaluations), np.zeros((evaluations, 2), dtype=np.int64),
            np.zeros((evaluations, d)), np.zeros(ROW_BLOCK), np.zeros((ROW_BLOCK, 2), np.int64),
            meta, rates, np.zeros(ROW_BLOCK),
        )  # fmt: skip
        self._check_shared()
        core.carry(GOSSIP_LEARNING, lambda: self.arrays)
        core.on_room(self.make_room)
        core.on_python_part(LEARNING_PART, self.python_visit)
        agent.sim.at_end(self.write_rows, first=True)

    def _check_shared(self) -> None:
        """The arrays the kernel changes in place are the accountant's and the step's own."""
        for array, dtype in ((self.sgd.cursor, np.int64), (self.accountant.uses, np.int64),
                             (self.accountant.refused, np.int64)):  # fmt: skip
            assert array.dtype == dtype and array.flags.c_contiguous

    # --- what the reading side asks (as GossipLearningRule) -----------------------------------

    def model_bytes(self) -> float:
        """The size of one model message: 8 bytes per parameter."""
        return 8.0 * self.params.shape[1]

    @property
    def models(self) -> list[ModelState]:
        """Each node's current model, as :class:`GossipLearningRule
        <netsim.algorithms.gossip_learning.application.GossipLearningRule>` holds them (one
        object per state: nodes holding the same state share it); built when asked."""
        states: dict[int, ModelState] = {}
        out = []
        for node, (updates, visits, serial) in enumerate(self.node_ints.tolist()):
            if serial not in states:
                states[serial] = ModelState(self.params[node].copy(), updates, visits)
            out.append(states[serial])
        return out

    def parameters_of(self, nodes: np.ndarray) -> list[np.ndarray]:
        """The current models' parameters of ``nodes``, one per node (copies)."""
        return [self.params[int(i)].copy() for i in nodes]

    def accuracy_spread(self, nodes: np.ndarray) -> tuple[object, ...]:
        """:meth:`GossipLearningRule.accuracy_spread
        <netsim.algorithms.gossip_learning.application.GossipLearningRule.accuracy_spread>`
        on the arrays: a state held by several nodes (the same serial) is scored once, the
        states in the order of their first holder."""
        nodes = np.asarray(nodes, dtype=np.int64)
        serials = self.node_ints[nodes, SERIAL]
        _, first, inverse = np.unique(serials, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # the unique states by first holder
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        holders = nodes[first[order]]
        agent = self.agent
        scores = model_accuracies(
            agent.sgd.model, [self.params[int(i)] for i in holders], agent.x_test, agent.y_test
        )
        accuracy = scores[rank[inverse.reshape(-1)]]
        visits = self.node_ints[nodes, VISITS].astype(np.float64)
        updates = self.node_ints[nodes, UPDATES].astype(np.float64)
        return spread_row(visits, updates, accuracy)

    # --- the kernel's returns -----------------------------------------------------------------

    def python_visit(self, node: int, slot: int) -> None:
        """The visit of the model in ``slot`` to ``node`` that the kernel left to Python: the
        agent's own step (:meth:`~netsim.learning.sgd_agent.SGDAgent.stepped` of the
        :meth:`~netsim.algorithms.gossip_learning.application.GossipLearningRule.merged`
        model), its rows gathered with the kernel's in their place (the kernel left room for
        them), its model kept in the arrays; then what the kernel may do from now on. What
        must precede the step is brought up to date first: the ledger's charges (the step may
        charge) and the last refusal (it may refuse)."""
        meta, arrays = self.meta, self.arrays
        if meta[LEDGER_ROWS]:
            self._write_charges()
        self._write_counters()
        ints = self.message_ints[slot]
        value = ModelState(self.message_params[slot].copy(), int(ints[UPDATES]), int(ints[VISITS]))
        local = ModelState(self.params[node].copy(), int(self.node_ints[node, UPDATES]),
                           int(self.node_ints[node, VISITS]))  # fmt: skip
        now = float(self.agent.sim.now)
        merged = self.rule.merged(value, local)
        new, updated, epsilon, data_row = self.agent.stepped(node, merged, now)
        self.params[node] = new.parameters
        self.node_ints[node] = new.updates, new.visits, meta[NEXT_SERIAL]
        meta[NEXT_SERIAL] += 1
        row = int(meta[VISIT_ROWS])
        arrays[VISIT_TIMES][row], arrays[VISIT_EPSILONS][row] = now, epsilon
        arrays[VISIT_INTS][row] = node, data_row, new.visits, new.updates, updated
        meta[VISIT_ROWS] = row + 1
        if new.visits % meta[EVALUATE_EVERY] == 0:
            row = int(meta[EVAL_ROWS])
            arrays[EVAL_TIMES][row] = now
            arrays[EVAL_INTS][row] = new.visits, new.updates
            arrays[EVAL_PARAMS][row] = new.parameters
            meta[EVAL_ROWS] = row + 1
        sgd = self.sgd
        charges = sgd.charges()
        if charges == "share":
            unit = node if sgd.unit == "node" else sgd.last_record
            arrays[SPENT][unit] = self.accountant.next_epsilon(unit) is None
        meta[MODE] = self._mode(charges)

    def _mode(self, charges: str | None) -> int:
        """What the kernel does with the visits from now on
        (:mod:`netsim.learning.compiled_visit`)."""
        sgd = self.sgd
        if sgd.batch != 1 or sgd.sampling != "cyclic":
            return IN_PYTHON
        if charges == "share":
            return SHARES
        model = sgd.model
        linear = type(model) in (LogisticRegression, LinearSVM) and model.classes == 2
        if charges == "free" and linear and sgd.clip is None:
            return FREE
        return IN_PYTHON

    def make_room(self) -> None:
        """Before an event: room in each block of rows (the gathered ones written when one
        is full), and a message slot for each of the core's (which it may have grown)."""
        slots = self.core.in_flight[0].shape[0]
        if slots > self.message_params.shape[0]:
            params = np.zeros((slots, self.params.shape[1]))
            ints = np.zeros((slots, 2), dtype=np.int64)
            old = self.message_params.shape[0]
            params[:old], ints[:old] = self.message_params, self.message_ints
            self.message_params, self.message_ints = params, ints
            arrays = list(self.arrays)
            arrays[MESSAGE_PARAMS], arrays[MESSAGE_INTS] = params, ints
            self.arrays = tuple(arrays)
        meta = self.meta
        if (
            meta[VISIT_ROWS] + 1 > self.arrays[VISIT_TIMES].size
            or meta[EVAL_ROWS] + 1 > self.arrays[EVAL_TIMES].size
            or meta[LEDGER_ROWS] + 1 > self.arrays[LEDGER_TIMES].size
        ):
            self.write_rows()

    def write_rows(self) -> None:
        """The rows gathered (the kernel's and the visits left to Python), to the agent's
        tables and the ledger in their order, and the kernel's counters to the agent's."""
        meta, arrays, agent = self.meta, self.arrays, self.agent
        rows = int(meta[VISIT_ROWS])
        if rows:
            times, ints = arrays[VISIT_TIMES], arrays[VISIT_INTS]
            columns = [
                times[:rows].copy(), np.full(rows, GOSSIP_LEARNING_WALK, dtype=np.int64),
                ints[:rows, 0].astype(np.int32), ints[:rows, 1].astype(np.int32),
                ints[:rows, 2].copy(), ints[:rows, 3].copy(), ints[:rows, 4].astype(np.bool_),
                arrays[VISIT_EPSILONS][:rows].copy(),
            ]  # fmt: skip
            if rows < FEW_ROWS:  # buffered as appended rows: no Arrow column for a few
                agent.visits_table.extend([column.tolist() for column in columns])
            else:
                agent.visits_table.extend_as_rows(columns)
            meta[VISIT_ROWS] = 0
        if meta[LEDGER_ROWS]:
            self._write_charges()
        evaluations = int(meta[EVAL_ROWS])
        if evaluations:
            times, ints = arrays[EVAL_TIMES], arrays[EVAL_INTS]
            agent.evaluated_many(
                times[:evaluations].copy(), GOSSIP_LEARNING_WALK, ints[:evaluations, 0].copy(),
                ints[:evaluations, 1].copy(), arrays[EVAL_PARAMS][:evaluations].copy(),
            )  # fmt: skip
            meta[EVAL_ROWS] = 0
        self._write_counters()

    def _write_charges(self) -> None:
        """The free charges the kernel gathered, to the ledger (:meth:`PrivacyLedger.keep_many
        <netsim.privacy.ledger.PrivacyLedger.keep_many>`)."""
        meta, arrays, sgd = self.meta, self.arrays, self.sgd
        charges = int(meta[LEDGER_ROWS])
        assert sgd.free_event is not None
        times, ints = arrays[LEDGER_TIMES], arrays[LEDGER_INTS]
        self.accountant.ledger.keep_many(times[:charges], ints[:charges, 0], ints[:charges, 1],
                                         sgd.free_event)  # fmt: skip
        meta[LEDGER_ROWS] = 0

    def _write_counters(self) -> None:
        """The kernel's counts since the last call, to the agent's and the step's, and its
        last refusal to the accountant's."""
        meta, agent, sgd = self.meta, self.agent, self.sgd
        agent.updates += int(meta[UPDATED])
        agent.refused += int(meta[REFUSALS])
        sgd.non_finite += int(meta[NON_FINITE])
        sgd.non_finite_noise += int(meta[NON_FINITE_NOISE])
        if meta[REFUSALS]:
            self.accountant.refused_as_spent(int(meta[LAST_REFUSED]))
        meta[UPDATED] = meta[REFUSALS] = meta[NON_FINITE] = meta[NON_FINITE_NOISE] = 0
