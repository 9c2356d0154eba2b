"""A model's visit as compiled code, for gossip learning on the compiled exact core
(:mod:`netsim.protocols.exact`): the model a gossip message carries, and what its receiver
does with it — eq. (8) at its record (Hegedűs, Berta, Jelasity 2016, Alg. 1 with the step of
§3: w ← w − η_t (λ w + g̃), η_t = η / √t), or a use its budget refuses.

:func:`visit_model` is the compiled twin of :meth:`netsim.learning.sgd_agent.SGDAgent.visit`
for the visits whose whole work is arithmetic over arrays (``tests/test_exact_twins.py``):

- under the unlimited policy (plain SGD, no noise), with the binary logistic or hinge loss,
  one record per visit and no clipping: the record's gradient, the free charge of its use
  (:meth:`~netsim.privacy.record_budgets.RecordBudgets.charge_free`, its ledger row) and the
  update of :meth:`~netsim.learning.private_sgd.PrivateSGD._updated`;
- under a policy that gives each use a share of ε (DP-SGD-k), one record per visit, once the
  record's budget has no share left: the refused use
  (:meth:`~netsim.privacy.record_budgets.RecordBudgets.refuse_spent`), which leaves the model
  as it was;

and returns ``False`` for every other visit — a release with noise, a mini-batch, Poisson
sampling, clipping, another model — which Python makes through the agent itself
(:meth:`netsim.algorithms.gossip_learning.compiled.CompiledModels.python_visit`), its rows
gathered with the kernel's in their place in the order. The arithmetic is numpy's, operation
for operation, so the models are the same bit for bit:

- w·x is ``np.dot`` of two contiguous float64 vectors, which numba hands to the same BLAS
  routine (``ddot``) that numpy's ``w @ x`` calls;
- σ is :func:`netsim.learning.losses._sigmoid` with the C library's ``exp``, as Python's
  ``math.exp``;
- the update is computed element by element in numpy's order, ((λ·w) + g̃)·η subtracted from
  w, and numba contracts no multiply-add into a fused one without ``fastmath``
  (``tests/test_compiled_visit.py`` holds each on random inputs; the table digests of the
  gossip-learning cases on both engines hold whole runs).

The rows a visit writes (``sgd_visits``, the ``accuracy`` evaluations every
``evaluate_every`` visits, the ledger's charges) are gathered in arrays in the order the
agent appends them and written by Python; the evaluations' accuracy is computed there, by the
agent's own code, from the model kept with the row.
"""

from __future__ import annotations

import math

import numpy as np

from netsim.compiled import njit
from netsim.kernel_cache import guard_kernels

#: The ``learning`` tuple the core's kernel carries (positions): each node's model (weights,
#: and its updates, visits and serial: which state it is, for scoring each once), the model
#: each message slot carries (weights; updates, visits), the training features and the loss's
#: ±1 labels, each record's row in the data set, each node's cursor in its shard, the
#: accountant's uses and refusals per unit, whether a unit's budget has no share left,
#: scratch rows, the rows gathered (visits: times and node, row, visits, updates, updated;
#: evaluations: times, visits and updates, weights; ledger charges: times, unit and use), the
#: integer settings and counters (``meta``), the float settings, and the visits' ε (0 for
#: the kernel's; a visit left to Python writes its row here too, in its place).
(
    NODE_PARAMS, NODE_INTS, MESSAGE_PARAMS, MESSAGE_INTS, FEATURES, LABELS, DATA_ROWS, CURSOR,
    USES, REFUSED, SPENT, SCRATCH, VISIT_TIMES, VISIT_INTS, EVAL_TIMES, EVAL_INTS, EVAL_PARAMS,
    LEDGER_TIMES, LEDGER_INTS, META, RATES, VISIT_EPSILONS,
) = range(22)  # fmt: skip
#: Columns of ``NODE_INTS`` (``MESSAGE_INTS`` has the first two).
UPDATES, VISITS, SERIAL = 0, 1, 2
#: ``meta`` entries: rows gathered in each block, the next serial, the agent's counters since
#: Python last read them (updates, refusals, steps left out as not finite, of those with a
#: release not finite), the last unit refused, what the kernel does (:data:`IN_PYTHON` …), the
#: loss (:data:`LOGISTIC` or :data:`HINGE`), the privacy unit (:data:`NODE_UNIT`: the node),
#: records per node, the evaluation period in visits, merge by averaging (1).
(
    VISIT_ROWS, EVAL_ROWS, LEDGER_ROWS, NEXT_SERIAL, UPDATED, REFUSALS, NON_FINITE,
    NON_FINITE_NOISE, LAST_REFUSED, MODE, LOSS, UNIT, RECORDS_PER_NODE, EVALUATE_EVERY, AVERAGE,
) = range(15)  # fmt: skip
META_SIZE = 15
#: ``rates`` entries: the learning rate η and the regularisation λ.
LEARNING_RATE, REGULARISATION = 0, 1
#: What the kernel does with a visit: every visit in Python (the first visit, before the
#: accountant says how it charges, and every configuration without a compiled form), the
#: unlimited policy's step (:data:`FREE`), a share policy's refusal of a spent unit
#: (:data:`SHARES`).
IN_PYTHON, FREE, SHARES = 0, 1, 2
LOGISTIC, HINGE = 0, 1
RECORD_UNIT, NODE_UNIT = 0, 1


@njit(cache=True, inline="always")
def sigmoid(z: float) -> float:
    """σ(z) = 1 / (1 + e^{−z}) as :func:`netsim.learning.losses._sigmoid` computes it."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@njit(cache=True, inline="always")
def record_gradient(loss: int, w: np.ndarray, x: np.ndarray, y: int, out: np.ndarray) -> None:
    """The binary loss's gradient at one record into ``out``, as
    :func:`netsim.learning.losses.record_gradient` computes it: logistic −y σ(−y w·x) x
    (σ(w·x) x for y = −1, −σ(−w·x) x for y = +1); hinge −y x where y w·x < 1, else 0."""
    z = np.dot(w, x)
    if loss == LOGISTIC:
        scale = sigmoid(z) if y == -1 else -sigmoid(-z)
        for i in range(x.size):
            out[i] = scale * x[i]
    elif y * z < 1.0:
        scale = -float(y)
        for i in range(x.size):
            out[i] = scale * x[i]
    else:
        for i in range(x.size):
            out[i] = 0.0


@njit(cache=True, inline="always")
def sgd_update(
    w: np.ndarray, gradient: np.ndarray, eta: float, regularisation: float, out: np.ndarray
) -> bool:
    """Eq. (8)'s step w − η (λ w + g̃) into ``out`` and whether every weight of it is finite
    (:meth:`netsim.learning.private_sgd.PrivateSGD._updated`, which keeps the old model when
    one is not)."""
    finite = True
    for i in range(w.size):
        value = w[i] - eta * (regularisation * w[i] + gradient[i])
        out[i] = value
        finite = finite and math.isfinite(value)
    return finite


@njit(cache=True, inline="always")
def carry_model(slot: int, src: int, learning: tuple) -> None:
    """The model ``src`` sends in the message in ``slot``, taken now
    (:meth:`netsim.algorithms.gossip_learning.application.GossipLearningRule.outgoing`: the
    node's current model; a copy here, as the models are never changed in place)."""
    node_params, node_ints = learning[NODE_PARAMS], learning[NODE_INTS]
    message_params, message_ints = learning[MESSAGE_PARAMS], learning[MESSAGE_INTS]
    for i in range(node_params.shape[1]):
        message_params[slot, i] = node_params[src, i]
    message_ints[slot, UPDATES] = node_ints[src, UPDATES]
    message_ints[slot, VISITS] = node_ints[src, VISITS]


@njit(cache=True, inline="always")
def visit_model(slot: int, node: int, now: float, learning: tuple) -> bool:
    """Compiled twin of :meth:`netsim.learning.sgd_agent.SGDAgent.visit` for the model in
    ``slot`` received by ``node`` (after the merge of
    :meth:`~netsim.algorithms.gossip_learning.application.GossipLearningRule.merged`): the
    new model becomes the node's, its rows are gathered. Returns ``False``, having changed
    nothing, when the visit is Python's (the module docstring says which)."""
    meta = learning[META]
    mode = meta[MODE]
    if mode == IN_PYTHON:
        return False
    r = meta[RECORDS_PER_NODE]
    cursor = learning[CURSOR]
    start = cursor[node]
    record = node * r + start if r > 1 else node
    unit = node if meta[UNIT] == NODE_UNIT else record
    spent = learning[SPENT][unit]
    if mode == SHARES and not spent:
        return False  # a release with noise: Python's
    if r > 1:
        cursor[node] = (start + 1) % r
    node_params, node_ints = learning[NODE_PARAMS], learning[NODE_INTS]
    message_params, message_ints = learning[MESSAGE_PARAMS], learning[MESSAGE_INTS]
    scratch = learning[SCRATCH]
    w, gradient = scratch[0], scratch[1]
    updates, visits = message_ints[slot, UPDATES], message_ints[slot, VISITS]
    if meta[AVERAGE] > 0:  # (value.parameters + local.parameters) / 2.0, the older's age
        for i in range(w.size):
            w[i] = (message_params[slot, i] + node_params[node, i]) / 2.0
        updates = max(updates, node_ints[node, UPDATES])
        visits = max(visits, node_ints[node, VISITS])
    else:
        for i in range(w.size):
            w[i] = message_params[slot, i]
    out = node_params[node]
    updated = False
    if mode == SHARES:  # refuse_spent: counted, nothing drawn or charged
        learning[REFUSED][unit] += 1
        meta[REFUSALS] += 1
        meta[LAST_REFUSED] = unit
        for i in range(w.size):
            out[i] = w[i]
    else:  # the unlimited policy: the gradient, its free charge, eq. (8)
        record_gradient(meta[LOSS], w, learning[FEATURES][record], learning[LABELS][record],
                        gradient)  # fmt: skip
        uses = learning[USES]
        uses[unit] += 1
        row = meta[LEDGER_ROWS]  # the ledger keeps it or not (PrivacyLedger.keep_many)
        learning[LEDGER_TIMES][row] = now
        learning[LEDGER_INTS][row, 0], learning[LEDGER_INTS][row, 1] = unit, uses[unit]
        meta[LEDGER_ROWS] = row + 1
        t = updates + 1
        rates = learning[RATES]
        eta = rates[LEARNING_RATE] / math.sqrt(t)
        if sgd_update(w, gradient, eta, rates[REGULARISATION], out):
            updates, updated = t, True
            meta[UPDATED] += 1
        else:
            meta[NON_FINITE] += 1
            for i in range(w.size):
                if not math.isfinite(gradient[i]):
                    meta[NON_FINITE_NOISE] += 1
                    break
            for i in range(w.size):
                out[i] = w[i]
    visits += 1
    node_ints[node, UPDATES], node_ints[node, VISITS] = updates, visits
    node_ints[node, SERIAL] = meta[NEXT_SERIAL]
    meta[NEXT_SERIAL] += 1
    row = meta[VISIT_ROWS]
    learning[VISIT_TIMES][row] = now
    learning[VISIT_EPSILONS][row] = 0.0
    visit_ints = learning[VISIT_INTS]
    visit_ints[row, 0], visit_ints[row, 1] = node, learning[DATA_ROWS][record]
    visit_ints[row, 2], visit_ints[row, 3], visit_ints[row, 4] = visits, updates, updated
    meta[VISIT_ROWS] = row + 1
    if visits % meta[EVALUATE_EVERY] == 0:
        row = meta[EVAL_ROWS]
        learning[EVAL_TIMES][row] = now
        learning[EVAL_INTS][row, 0], learning[EVAL_INTS][row, 1] = visits, updates
        eval_params = learning[EVAL_PARAMS]
        for i in range(w.size):
            eval_params[row, i] = out[i]
        meta[EVAL_ROWS] = row + 1
    return True


@njit(cache=True, inline="always")
def learning_room(learning: tuple) -> bool:
    """Whether each block of rows has room for one more visit's."""
    meta = learning[META]
    return (
        meta[VISIT_ROWS] < learning[VISIT_TIMES].size
        and meta[EVAL_ROWS] < learning[EVAL_TIMES].size
        and meta[LEDGER_ROWS] < learning[LEDGER_TIMES].size
    )


def no_learning() -> tuple:
    """The ``learning`` tuple of a run without gossip learning (empty arrays of its types)."""
    f1, f2 = np.zeros(0), np.zeros((0, 1))
    i1, i2 = np.zeros(0, dtype=np.int64), np.zeros((0, 3), dtype=np.int64)
    return (
        f2, i2, f2, i2, f2, i1, i1, i1, i1, i1, np.zeros(0, dtype=np.bool_), f2, f1, i2, f1, i2,
        f2, f1, i2, np.zeros(META_SIZE, dtype=np.int64), np.zeros(2), f1,
    )  # fmt: skip


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
