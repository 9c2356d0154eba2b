"""The walk's steps on the compiled exact core (:mod:`netsim.protocols.exact`): a walk's
arrival, its step and its forwarding to the next node run in compiled code; the rare rest of a
step (a lost or killed walk, one dropped, one with no online neighbour) returns to Python.

On SimPy a walk's transfer is a :class:`~netsim.network.links.Transfer` whose completion runs
:meth:`RandomWalkService.on_receive_random_walk
<netsim.protocols.walk.service.RandomWalkService.on_receive_random_walk>` and
:meth:`WalkCycle.receive <netsim.protocols.walk.cycle.WalkCycle.receive>` (Hegedűs et al.
2016, Alg. 2 lines 25–31), and the forward
:meth:`~netsim.protocols.walk.service.RandomWalkService.send`. On the core the transfer is a
message slot of the core (kind ``walk``, the walk's id its value) and :func:`arrive` is the
compiled twin of those methods: the kill draw, the step, the local copy, the new update
(:func:`netsim.protocols.walk.compiled.store`), the agent's visit, the ``walk_steps`` row and
:func:`forward`. The walks' step counts, holders and updates live in arrays by walk id
(:class:`WalkSteps`); the tokens Python holds read and write them (:class:`CoreToken`), so
Python code that handles the rare rest sees what the compiled steps did.

Covered: the walk service on the core's cycle (:mod:`netsim.protocols.walk.compiled`) with the
trivial agent (:class:`~netsim.protocols.walk.agents.VisitCounter`, whose state is None and
whose visit counts); another agent's steps stay Python (its visit is Python code).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from netsim.compiled import njit
from netsim.event_queue import (
    DST,
    KILL_AT,
    KILL_PROBABILITY,
    LOSS_AT,
    PEER_AT,
    SRC,
    SRC_EPOCH,
    VALUE,
    WALK_KIND,
    WALK_PART,
    WALK_PEER_AT,
    WALK_TRANSFER,
)
from netsim.kernel_cache import guard_kernels
from netsim.network.links import online_neighbour
from netsim.network.links_exact import PEER_DRAWS, send_for
from netsim.protocols.walk.agents import VisitCounter
from netsim.protocols.walk.compiled import (
    ID,
    MAX_STEPS,
    ORIGIN,
    ROWS,
    RW_STEPS,
    SPECIAL,
    STEP_COUNT,
    STEP_INTS,
    STEP_META,
    STEP_TIMES,
    STEPS,
    TOKEN_HOLDER,
    TOKEN_RESTART,
    TOKEN_STEPS,
    TOKEN_UPDATE,
    UPDATE_IDS,
    VISITS,
    CompiledCycle,
    store,
)
from netsim.protocols.walk.tokens import WALK, WalkToken

#: What a walk's arrival leaves to Python (``counters[PENDING_CIRCLE]`` at a
#: :data:`~netsim.event_queue.WALK_PART` return): nothing (the step ran whole), the lost
#: transfer (``on_transfer_lost``), the kill, the drop (line 30), the forward of a holder
#: offline (suspended), the wait for an online neighbour (the retry).
STEPPED, LOST_WALK, KILLED, DROPPED, OFFLINE, NO_PEER = -1, 0, 1, 2, 3, 4
#: ``walk_steps`` rows gathered before they are written.
STEP_ROWS = 4096


@njit(cache=True, inline="always")
def forward(
    walk_id: int, node: int, now: float, normal: int, network: tuple, settings: np.ndarray,
    counters: np.ndarray, draws: tuple, in_flight: tuple, queue: tuple,
) -> int:  # fmt: skip
    """Compiled twin of :meth:`netsim.protocols.walk.service.RandomWalkService.send`: a random
    online neighbour of the holder ``node`` (the transport's rule on the walk's peer draws),
    and the walk sent to it with the fixed transfer time δ_rw (the message's value: the walk's
    id). Returns the neighbour, or -1 (none online: nothing sent)."""
    peer, at = online_neighbour(network[0], network[1], network[2], node, draws[3],
                                counters[WALK_PEER_AT])  # fmt: skip
    counters[WALK_PEER_AT] = at
    if peer < 0:
        return -1
    slot = send_for(node, peer, int(settings[WALK_KIND]), settings[WALK_TRANSFER], now, normal,
                    network, settings, counters, draws, in_flight, queue)  # fmt: skip
    in_flight[0][slot, VALUE] = walk_id
    return peer


@njit(cache=True, inline="always")
def arrive(
    slot: int, delivered: bool, now: float, delta: float, normal: int, network: tuple,
    settings: np.ndarray, counters: np.ndarray, draws: tuple, in_flight: tuple, queue: tuple,
    walk: tuple, active: np.ndarray,
) -> int:  # fmt: skip
    """Compiled twin of
    :meth:`netsim.protocols.walk.service.RandomWalkService.on_receive_random_walk` and
    :meth:`netsim.protocols.walk.cycle.WalkCycle.receive` (with the trivial agent's
    :meth:`~netsim.protocols.walk.agents.VisitCounter.visit` and the ledger's
    :meth:`~netsim.protocols.walk.ledger.WalkLedger.step`): the walk in ``slot`` completed
    (``delivered``, or lost); the kill draw; the step at the receiver, its local copy, a new
    update (Alg. 2 lines 25–31, the forced timeout of §4.4), the visit, the row, and the
    forward (:func:`forward`). Returns what is left to Python (:data:`STEPPED`: nothing)."""
    if not delivered:
        return LOST_WALK
    messages = in_flight[0]
    w, node = messages[slot, VALUE], messages[slot, DST]
    kill = settings[KILL_PROBABILITY]
    if kill > 0:
        draw = draws[4][counters[KILL_AT]]
        counters[KILL_AT] += 1
        if draw < kill:
            return KILLED
    token_steps, rw, restart = walk[TOKEN_STEPS], walk[RW_STEPS], walk[TOKEN_RESTART]
    walk[TOKEN_HOLDER][w] = node
    token_steps[w] += 1
    forced = restart[w] >= 0 and restart[w] == walk[ID][node]
    if rw[node] < token_steps[w]:
        rw[node] = token_steps[w]
    timed_out = not walk[SPECIAL][node] and now - walk[ORIGIN][node] >= delta
    if not (walk[STEPS][node] < rw[node] or timed_out or forced):
        return DROPPED
    steps = rw[node]
    token_steps[w] = steps
    ids, meta = walk[UPDATE_IDS], walk[STEP_META]
    update = ids[0]
    ids[0] += 1
    store(node, steps, update, 0.0, now, delta, walk, active, queue, normal)
    walk[TOKEN_UPDATE][w] = update
    walk[VISITS][node] += 1
    restart[w] = -1
    row = meta[ROWS]
    walk[STEP_TIMES][row] = now
    ints = walk[STEP_INTS]
    ints[row, 0], ints[row, 1], ints[row, 2] = w, steps, node
    meta[ROWS] = row + 1
    meta[STEP_COUNT] += 1
    meta[MAX_STEPS] = max(meta[MAX_STEPS], steps)
    if not network[2][node]:
        return OFFLINE
    if forward(w, node, now, normal, network, settings, counters, draws, in_flight, queue) < 0:
        return NO_PEER
    return STEPPED


@njit(cache=True)
def forward_from_python(
    walk_id: int, node: int, now: float, normal: int, network: tuple, settings: np.ndarray,
    counters: np.ndarray, draws: tuple, in_flight: tuple, queue: tuple,
) -> int:  # fmt: skip
    """:func:`forward` for Python callers (a walk launched, resumed or retried)."""
    return forward(walk_id, node, now, normal, network, settings, counters, draws, in_flight,
                   queue)  # fmt: skip


class _SharedField:
    """A token's field held in one of the compiled steps' arrays (:class:`WalkSteps`), at the
    token's walk id: what Python reads is what the core's steps wrote."""

    def __init__(self, array: str) -> None:
        self.array = array

    def __get__(self, token: CoreToken | None, owner: type | None = None) -> Any:
        if token is None:
            return self
        return int(getattr(token._arrays, self.array)[token.walk])

    def __set__(self, token: CoreToken, value: int) -> None:
        getattr(token._arrays, self.array)[token.walk] = value


class CoreToken(WalkToken):
    """A walk's token whose step count, holder, restarted update and update are the compiled
    steps' arrays (:class:`WalkSteps`): Python reads what the core's steps did."""

    steps = _SharedField("token_steps")  # type: ignore[assignment]
    holder = _SharedField("token_holder")  # type: ignore[assignment]
    restart_of = _SharedField("token_restart")  # type: ignore[assignment]
    update = _SharedField("token_update")  # type: ignore[assignment]

    def __init__(self, steps: WalkSteps, *fields: Any) -> None:
        self._arrays = steps
        steps.make_room_for(int(fields[0]))
        super().__init__(*fields)


class LostWalk(NamedTuple):
    """What ``on_transfer_lost`` reads of a walk's transfer the core lost."""

    payload: WalkToken
    src: int
    src_epoch: int


class WalkSteps:
    """The compiled steps' Python side: the walks' arrays, the rows they gather, the forward
    from Python, and the rare rest of a step (:data:`LOST_WALK` …) run by the service."""

    def __init__(self, service: Any, core: Any, cycle: CompiledCycle) -> None:
        self.service, self.core, self.cycle = service, core, cycle
        capacity = 64
        self.token_steps = np.zeros(capacity, dtype=np.int64)
        self.token_holder = np.zeros(capacity, dtype=np.int64)
        self.token_restart = np.zeros(capacity, dtype=np.int64)
        self.token_update = np.zeros(capacity, dtype=np.int64)
        self.visits = service.agent.visits
        self.times = np.zeros(STEP_ROWS)
        self.ints = np.zeros((STEP_ROWS, 3), dtype=np.int64)
        self.meta = np.zeros(3, dtype=np.int64)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The step arrays of the walk's tuple (:data:`~netsim.protocols.walk.compiled.TOKEN_STEPS`
        on)."""
        return (
            self.token_steps, self.token_holder, self.token_restart, self.token_update,
            self.visits, self.times, self.ints, self.meta, self.service.next_update,
        )  # fmt: skip

    def new_token(self, *fields: Any) -> CoreToken:
        """A walk's token on the arrays (the service's token factory)."""
        return CoreToken(self, *fields)

    def make_room_for(self, walk: int) -> None:
        """Room in the walks' arrays for walk id ``walk``."""
        capacity = self.token_steps.size
        if walk < capacity:
            return
        for name in ("token_steps", "token_holder", "token_restart", "token_update"):
            old = getattr(self, name)
            grown = np.zeros(max(2 * capacity, walk + 1), dtype=np.int64)
            grown[:capacity] = old
            setattr(self, name, grown)

    def forward(self, token: WalkToken) -> None:
        """``forwardRandomWalk`` by Python code at an online holder: :func:`forward`, or the
        service's wait for an online neighbour."""
        core = self.core
        core.before_python_send((WALK_PEER_AT - PEER_AT, LOSS_AT - PEER_AT), PEER_DRAWS)
        peer = forward_from_python(
            token.walk, token.holder, float(self.service.sim.env.now), core.normal,
            core.network_arrays, core.settings, core.counters, tuple(core.draws),
            core.in_flight, core.queue.arrays(),
        )  # fmt: skip
        core.after_python_send()
        if peer < 0:
            self.service.wait_for_peer(token)
        else:
            token.status = "transfer"

    def python_part(self, slot: int, part: int) -> None:
        """The rest of a walk's step the core returned for (:data:`LOST_WALK` …), as the
        service's Python code does it."""
        service = self.service
        messages = self.core.in_flight[0]
        token = service.propagating[int(messages[slot, VALUE])]
        node = int(messages[slot, DST])
        if part == LOST_WALK:
            lost = LostWalk(token, int(messages[slot, SRC]), int(messages[slot, SRC_EPOCH]))
            service.on_transfer_lost(lost, "")
        elif part == KILLED:
            service.end(token, node, "killed")
        elif part == DROPPED:
            service.end(token, node, "dropped")
        elif part == OFFLINE:
            service.forward(token)  # the holder is offline: suspended
        else:
            service.wait_for_peer(token)

    def make_room(self) -> None:
        """Room for an event's row (the gathered rows written when the block is nearly
        full)."""
        if self.meta[ROWS] + 2 > STEP_ROWS:
            self.write()

    def write(self) -> None:
        """The gathered rows to ``walk_steps`` (in the row groups as many appends make), and
        the steps counted to the ledger's counts."""
        rows = int(self.meta[ROWS])
        ledger = self.service.ledger
        ledger.counts["steps"] += int(self.meta[STEP_COUNT])
        ledger.max_steps = max(ledger.max_steps, int(self.meta[MAX_STEPS]))
        self.meta[STEP_COUNT] = 0
        if rows:
            ints = self.ints[:rows]
            ledger.steps_table.extend_as_rows([
                self.times[:rows].copy(), ints[:, 0].copy(), ints[:, 1].copy(),
                ints[:, 2].astype(np.int32),
            ])  # fmt: skip
        self.meta[ROWS] = 0


guard_kernels(__name__)  # recompiled when a module these kernels inline changed


def steps_compiled(service: Any) -> bool:
    """Whether the walk's steps can run in the core: the trivial agent only (another agent's
    visit is Python code), and no walk launched yet."""
    return type(service.agent) is VisitCounter and not service.propagating


def attach_steps(service: Any, core: Any, cycle: CompiledCycle, peers: Any, kills: Any) -> None:
    """Run the walk's steps in ``core`` (:func:`arrive`): its messages a kind of the core's,
    the walk's peer and kill draws (``peers``, ``kills``) the core's blocks, the tokens on
    arrays, the rows written before the components finish, the rest of a step to Python."""
    steps = WalkSteps(service, core, cycle)
    cycle.steps = steps
    service.new_token = steps.new_token
    settings = core.settings
    settings[WALK_KIND] = core.message_kind(WALK)
    settings[WALK_TRANSFER] = service.transfer_time
    settings[KILL_PROBABILITY] = service.kill_probability
    core.take_draws(WALK_PEER_AT, peers)
    core.take_draws(KILL_AT, kills)
    core.on_room(steps.make_room)
    core.on_python_part(WALK_PART, steps.python_part)
    service.sim.at_end(steps.write, first=True)
