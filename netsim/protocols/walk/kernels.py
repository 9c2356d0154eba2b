"""Compiled per-round kernels of the random walk service in ``rounds`` mode.

At the paper's scale (Hegedűs et al. 2016 §5.2: N = 10,000, Δ = 100 ms, 2 days) a run has 1.7
million gossip rounds over about 2,300 online nodes each. Done with numpy, the sequential merge
of a round's pushes needs several batches of a dozen array calls each, and their fixed cost, not
the arithmetic, dominates (profiled with ``python -m benchmarks.walk_rounds``). These kernels do
one round's exchanges and its timeout scan in one compiled loop each (numba), with exactly the
semantics described in :mod:`netsim.protocols.rounds`.

:func:`should_replace` is the one definition of Alg. 2 line 14 on arrays; :func:`replaces`
states it on scalars (property-tested to agree) and the kernels run it compiled
(:data:`replaces_compiled`). The exchange kernel is compiled once per option set
(:data:`EXCHANGE_KERNELS`), so options that are off cost nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netsim.compiled import njit
from netsim.kernel_cache import guard_kernels


def should_replace(
    steps: Any, age: Any, new_steps: Any, new_age: Any, delta: float, ties_more: bool = False
) -> Any:
    """Alg. 2 line 14: does an incoming update (new_steps, new_age) replace (steps, age)?

    Replace if it reports more steps and is either young while the local one is not older
    than it, or younger than the local one; or if it reports no more steps but is live while
    the local one has timed out, or younger by more than δ. With ``ties_more`` an equal step
    count takes the "more steps" branch, as in the authors' implementation (the
    ``replace_rule: authors`` option); the paper's line 14 has a strict ``<``. Works
    elementwise on numpy arrays and, compiled, on scalars.
    """
    more = (steps < new_steps) | (ties_more & (steps == new_steps))
    return (more & (((age <= new_age) & (new_age < delta)) | (age > new_age))) | (
        ~more & (((age >= delta) & (delta > new_age)) | (age > new_age + delta))
    )


def replaces(
    steps: int, age: float, new_steps: int, new_age: float, delta: float, ties_more: bool = False
) -> bool:
    """:func:`should_replace` on Python scalars, with the same result for every input: the
    array form's ``&`` and ``|`` of booleans are ``and`` and ``or``, which stop at the first
    deciding comparison (exact mode evaluates line 14 once per message; docs/performance.md)."""
    if steps < new_steps or (ties_more and steps == new_steps):
        return (age <= new_age and new_age < delta) or age > new_age
    return (age >= delta and delta > new_age) or age > new_age + delta


#: :func:`replaces` compiled (numba compiles the same source): the round kernels' line 14. Its
#: ``and``/``or`` stop at the deciding comparison, which in a round of 6,000 merges is some
#: 10 µs less than the array form's every comparison (docs/performance.md).
replaces_compiled = njit(cache=True)(replaces)


#: One node's ``rwprop`` and timeout state as a 32-byte record, so that a node's state is one
#: cache line: the round kernels touch thousands of random nodes per round, and with one array
#: per field each touch costs five cache misses instead of one.
PROP_RECORD = np.dtype(
    {
        "names": ["steps", "id", "origin", "fired", "special"],
        "formats": ["i8", "i8", "f8", "i4", "?"],
        "offsets": [0, 8, 16, 24, 28],
        "itemsize": 32,
    }
)


#: An age within this many seconds below i·δ counts as having reached i·δ. Simulated times are
#: sums of floating-point periods, so an age meant to be exactly i·δ (an update created on the
#: round grid, checked 11 rounds later for δ = 11Δ) is often a few ulps short: 1.0999999… s
#: for 1.1 s, and ⌊age/δ⌋ then fires the timeout a round late. Two simulated days of 0.1 s
#: rounds drift by 5.6·10⁻⁶ s in all, and an age spans far fewer rounds, so 1 µs covers the
#: rounding; it is 10⁻⁴ of the smallest round (Δ = 10 ms), so no timeout fires a round early.
AGE_TOLERANCE = 1e-6


@njit(cache=True, error_model="numpy")
def timeout_circle(age: float, delta: float) -> int:
    """The last i with i·δ ≤ age (up to :data:`AGE_TOLERANCE`): how many update timeouts an
    update of this age has passed.

    The one definition both modes use, so that a circle is never counted twice or skipped
    between the kernels and Python.
    """
    reached = age + AGE_TOLERANCE
    if reached < delta:  # most ages are (a merged update is young): no division
        return 0
    return int(np.floor(reached / delta))


@njit(cache=True, error_model="numpy")
def adopted_circles(same: bool, fired: int, age: float, delta: float) -> int:
    """The timeout circles counted as handled at a node that adopts an update of this age.

    A new update: the circles it already passed elsewhere (choice 4 of
    :mod:`netsim.protocols.walk`). The update the node already holds (re-adopted, only under
    ``replace_rule: authors``): the circles fired here stay fired unless the adopted age is
    younger than they are, so no circle is skipped or fired twice for one age.
    """
    passed = timeout_circle(age, delta)
    return min(fired, passed) if same else passed


@njit(cache=True, error_model="numpy")
def _receive(
    prop: np.ndarray,
    node: int,
    value: Any,
    now: float,
    timeout: float,
    authors_rule: bool,
    error: float,
) -> None:
    """``onReceiveRWProps`` at ``node`` of the ``rwprop`` record ``value``: line 14 with
    accept-once by id (§4.4), or the authors' rule (no accept-once, ties count as more steps);
    an adopted age gets ``error`` added (clamped at 0)."""
    local = prop[node]
    same = value.id == local.id
    if value.special or (same and not authors_rule):
        return  # the bootstrap update carries nothing; a known id is never taken again
    age = now - value.origin
    if local.special or replaces_compiled(
        local.steps, now - local.origin, value.steps, age, timeout, authors_rule
    ):
        age = max(age + error, 0.0)
        local.fired = adopted_circles(same and not local.special, local.fired, age, timeout)
        local.steps = value.steps
        local.id = value.id
        local.origin = now - age
        local.special = False


def _exchange_source(authors_rule: bool, age_errors: bool) -> Any:
    """One round's push-pull kernel with the options as compile-time constants (numba freezes
    a closure's variables): an option that is off costs nothing (docs/performance.md)."""

    def exchange(
        initiators: np.ndarray,
        peers: np.ndarray,
        pull_lost: np.ndarray,
        now: float,
        timeout: float,
        prop: np.ndarray,
        errors: np.ndarray,
    ) -> None:
        m = initiators.size
        sent = np.empty(m, dtype=prop.dtype)
        for k in range(m):
            sent[k] = prop[initiators[k]]
        for k in range(m):
            error = errors[k] if age_errors else 0.0
            _receive(prop, peers[k], sent[k], now, timeout, authors_rule, error)
        for k in range(m):
            sent[k] = prop[peers[k]]
        every_answer = pull_lost.size == 0
        for k in range(m):
            if every_answer or not pull_lost[k]:
                error = errors[m + k] if age_errors else 0.0
                _receive(prop, initiators[k], sent[k], now, timeout, authors_rule, error)

    return exchange


#: The compiled kernel of each option set, (replace_rule is authors, age errors) -> kernel.
EXCHANGE_KERNELS = {
    (authors, noisy): njit(cache=True, error_model="numpy")(_exchange_source(authors, noisy))
    for authors in (False, True)
    for noisy in (False, True)
}


def exchange_round(
    initiators: np.ndarray,
    peers: np.ndarray,
    pull_lost: np.ndarray,
    now: float,
    timeout: float,
    prop: np.ndarray,
    authors_rule: bool,
    errors: np.ndarray,
) -> None:
    """One round of push-pull for the walk service's ``rwprop`` records (``PROP_RECORD``),
    in place.

    Initiator k pushes its value from the start of the round to ``peers[k]``; pushes are
    merged one after another in the round's order. Then every initiator whose pull answer was
    not lost merges its peer's value as it stood after all pushes (the peer answers after
    merging, as in exact mode). An empty ``pull_lost`` means no answer was lost.
    ``errors`` (empty: none) holds the age error of push k at ``k`` and of pull k at
    ``m + k``, added to the age if the message is adopted. Runs the kernel compiled for
    this option set (:data:`EXCHANGE_KERNELS`).
    """
    kernel = EXCHANGE_KERNELS[bool(authors_rule), errors.size > 0]
    kernel(initiators, peers, pull_lost, now, timeout, prop, errors)


@njit(cache=True, error_model="numpy")
def due_timeouts(
    active: np.ndarray, prop: np.ndarray, now: float, timeout: float
) -> tuple[np.ndarray, np.ndarray]:
    """The ``active`` nodes (an increasing list) whose non-bootstrap update's age reached a new
    multiple i·δ, and that i.

    Returns ``(nodes, circles)``: ``circles[k]`` = ⌊age/δ⌋ > ``prop[nodes[k]].fired``.
    """
    nodes = np.empty(active.size, dtype=np.int64)
    circles = np.empty(active.size, dtype=np.int64)
    count = 0
    for node in active:
        record = prop[node]
        if record.special:
            continue
        circle = timeout_circle(now - record.origin, timeout)
        if circle > record.fired:
            nodes[count] = node
            circles[count] = circle
            count += 1
    return nodes[:count], circles[:count]


# --- the authors' gossip cycle (docs/walk-variants.md, "The authors' code") -------

#: A node's gossip buffer in the authors' cycle (``rwpropNC`` of their ``SoloWalkerProtocol``):
#: an ``rwprop`` record and how many merges made it.
BUFFER_RECORD = np.dtype(
    {
        "names": ["steps", "id", "origin", "merges", "special"],
        "formats": ["i8", "i8", "f8", "i4", "?"],
        "offsets": [0, 8, 16, 24, 28],
        "itemsize": 32,
    }
)


@njit(cache=True)
def authors_takes(
    steps: int,
    age: float,
    update: int,
    merges: int,
    new_steps: int,
    new_age: float,
    new_update: int,
    new_merges: int,
    delta: float,
) -> bool:
    """Whether the authors' merge (``mergeProp`` of their ``SoloWalkerProtocol``) takes the
    received record: line 14 of Alg. 2 with an equal step count as "more steps" and an equal
    age as "younger", or the same update merged at least two times fewer (C3 of
    ``docs/walk-variants.md``)."""
    if steps <= new_steps:
        if (age < new_age and new_age < delta) or age >= new_age:
            return True
    elif age >= new_age + delta or (age < new_age + delta and age >= delta and new_age < delta):
        return True
    return update == new_update and merges > new_merges + 1


@njit(cache=True)
def authors_merge_buffer(
    buffer: np.ndarray,
    node: int,
    steps: int,
    update: int,
    origin: float,
    merges: int,
    special: bool,
    now: float,
    delta: float,
    error: float,
) -> None:
    """``buffer[node] = mergeProp(buffer[node], received)``; an adopted age gets ``error``."""
    if special:
        return  # no update: never taken over a record (the authors' default record)
    local = buffer[node]
    age = now - origin
    if local.special or authors_takes(
        local.steps, now - local.origin, local.id, local.merges, steps, age, update, merges, delta
    ):
        local.steps = steps
        local.id = update
        local.origin = now - (age + error)
        local.merges = merges + 1
        local.special = False


@njit(cache=True)
def authors_merge_visible(
    prop: np.ndarray,
    merges: np.ndarray,
    node: int,
    steps: int,
    update: int,
    origin: float,
    received_merges: int,
    special: bool,
    now: float,
    delta: float,
    error: float,
) -> None:
    """``rwprop = mergeProp(rwprop, received)`` at ``node`` (C3 of ``docs/walk-variants.md``),
    in place: the node's visible record (``prop``, its merge count in ``merges``) takes the
    received one, whose age gets ``error``, if :func:`authors_takes` says so."""
    if special:
        return  # no update: never taken over a record (the authors' default record)
    visible = prop[node]
    age = now - origin
    if visible.special or authors_takes(
        visible.steps, now - visible.origin, visible.id, merges[node], steps, age, update,
        received_merges, delta,
    ):  # fmt: skip
        visible.steps = steps
        visible.id = update
        visible.origin = now - (age + error)
        merges[node] = received_merges + 1
        visible.special = False


@njit(cache=True)
def authors_timeout_check(
    prop: np.ndarray, node: int, local_steps: int, guarded: bool, now: float, delta: float
) -> int:
    """The authors' timeout check at ``node`` (C2.3–4 of ``docs/walk-variants.md``), in
    place: its visible update (``prop``, whose ``fired`` field holds the node's counter as
    i − 1) fires when its age reaches i·δ, and the node restarts unless ``guarded`` (it
    forwards the walk that made its update) or the update has more than i steps over its
    local copy (``local_steps``); i advances either way, and goes back to 1 when the age is
    below δ. Returns the i to restart at, 0 for none. The cycle runs it before each exchange,
    and the service when a node comes back online."""
    visible = prop[node]
    age = now - visible.origin
    restart = 0
    if not visible.special and visible.steps >= 0:
        circle = visible.fired + 1
        if age + AGE_TOLERANCE >= circle * delta:
            if not guarded and visible.steps - local_steps <= circle:
                restart = circle
            visible.fired = circle
    if age + AGE_TOLERANCE < delta:
        visible.fired = 0
    return restart


@njit(cache=True)
def authors_exchange(
    prop: np.ndarray,
    merges: np.ndarray,
    buffer: np.ndarray,
    u: int,
    p: int,
    now: float,
    delta: float,
    push_error: float,
    pull_error: float,
    own_error: float,
) -> None:
    """Node ``u``'s exchange with ``p`` in the authors' cycle (C2.5 of
    ``docs/walk-variants.md``), in place: the push of u's visible record into p's buffer, the
    pull of p's visible record into u's buffer, the merge of u's buffer into its visible
    record (an unchanged buffer is taken back too), and the buffer made a copy of it; each
    merge adds its error to an age it adopts."""
    visible = prop[u]
    authors_merge_buffer(
        buffer, p, visible.steps, visible.id, visible.origin, merges[u], visible.special,
        now, delta, push_error,
    )  # fmt: skip
    other = prop[p]
    authors_merge_buffer(
        buffer, u, other.steps, other.id, other.origin, merges[p], other.special,
        now, delta, pull_error,
    )  # fmt: skip
    held = buffer[u]
    authors_merge_visible(
        prop, merges, u, held.steps, held.id, held.origin, held.merges, held.special,
        now, delta, own_error,
    )  # fmt: skip
    held.steps = visible.steps
    held.id = visible.id
    held.origin = visible.origin
    held.merges = merges[u]
    held.special = visible.special


@njit(cache=True)
def in_index_order(
    initiators: np.ndarray, peers: np.ndarray, peer_of: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A round's pairs with the initiators (distinct node ids) in increasing order, each with
    its peer: the order of the authors' cycle (C1). A scatter into ``peer_of`` (one entry per
    node, all -1, and left so) and one pass over it, instead of sorting: at 2,300 initiators a
    stable argsort took half of a round of the authors' cycle (docs/walk-variants.md)."""
    m = initiators.size
    for k in range(m):
        peer_of[initiators[k]] = peers[k]
    ordered = np.empty(m, dtype=np.int64)
    their_peers = np.empty(m, dtype=np.int64)
    j = 0
    for node in range(peer_of.size):
        peer = peer_of[node]
        if peer >= 0:
            ordered[j] = node
            their_peers[j] = peer
            peer_of[node] = -1
            j += 1
    return ordered, their_peers


@njit(cache=True, error_model="numpy")
def authors_cycle(
    initiators: np.ndarray,
    peers: np.ndarray,
    prop: np.ndarray,
    merges: np.ndarray,
    buffer: np.ndarray,
    rw_steps: np.ndarray,
    guarded: np.ndarray,
    errors: np.ndarray,
    now: float,
    delta: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One gossip cycle of the authors' code (``nextCycle``, C2 of ``docs/walk-variants.md``)
    for every initiator in the given order, each with its peer.

    Per initiator u, on ``prop`` (the visible ``rwprop``, whose ``fired`` field holds the
    node's timeout counter as i − 1) and ``buffer`` (``rwpropNC``): the timeout check on u's
    visible record before its exchange (:func:`authors_timeout_check`, with ``guarded[u]``
    and the local copy's ``rw_steps[u]``), then its exchange (:func:`authors_exchange`).
    Merge k of initiator position j adds ``errors[3 j + k]`` to an adopted age (empty:
    none). Returns the restarts in order: (nodes, i, the timed-out update's id and steps).
    """
    m = initiators.size
    restart_nodes = np.empty(m, dtype=np.int64)
    restart_circles = np.empty(m, dtype=np.int64)
    restart_updates = np.empty(m, dtype=np.int64)
    restart_steps = np.empty(m, dtype=np.int64)
    restarts = 0
    noisy = errors.size > 0
    for j in range(m):
        u = initiators[j]
        circle = authors_timeout_check(prop, u, rw_steps[u], guarded[u], now, delta)
        if circle:
            restart_nodes[restarts] = u
            restart_circles[restarts] = circle
            restart_updates[restarts] = prop[u].id
            restart_steps[restarts] = prop[u].steps
            restarts += 1
        if noisy:
            authors_exchange(
                prop, merges, buffer, u, peers[j], now, delta,
                errors[3 * j], errors[3 * j + 1], errors[3 * j + 2],
            )  # fmt: skip
        else:
            authors_exchange(prop, merges, buffer, u, peers[j], now, delta, 0.0, 0.0, 0.0)
    return (
        restart_nodes[:restarts],
        restart_circles[:restarts],
        restart_updates[:restarts],
        restart_steps[:restarts],
    )


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
