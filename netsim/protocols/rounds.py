"""Push-pull gossip in rounds: the vectorised mode for paper-scale runs.

Every Δ one SimPy process acts on all nodes that take part in gossip at once: each picks a
uniform random online neighbour, pushes its value and pulls the neighbour's, and the rules
merge with numpy. Walk transfers, churn and agents stay event-driven on the same clock.

What the mode approximates, and why it is faithful for what the papers measure:

- *Message delays shorter than Δ are ignored*: every exchange of a round completes at the
  round's instant, so values arrive with the age they left with. Gossip messages are "a few
  dozen bytes" (Hegedűs et al. §4.3) whose delays are small against Δ = 100 ms and against
  the update timeout δ ≥ δ_rw + 10Δ; the broadcast still needs O(log N) rounds.
- *Order within a round*: nodes exchange in a random order. Pushes to the same node are merged
  one after the other in that order (in batches: the first push to every target, then the
  second, …), then every initiator merges the answer to its pull, which carries the peer's
  value after the pushes it received — as in exact mode, where the peer answers after merging.
  In exact mode an exchange may use a value learnt earlier in the same period; here each
  exchange uses values from the start of the round or, for pulls, after its pushes, so news
  moves at most two hops per round (push and pull), and in exact mode a little faster.
- *Timeouts and restarts* are evaluated once per round for all nodes (so at most Δ late; an
  update created on the round grid times out exactly at i·δ when δ is a multiple of Δ, since
  an age within 1 µs of i·δ counts as reaching it: ``netsim.protocols.walk.kernels.AGE_TOLERANCE``).
- *Gossip learning* (push only): the round's sends are taken one after the other in the
  round's (random) order, like the ticks of exact mode's period: a node sends the model it
  holds at its turn — the last one it received earlier in the round, else its own from the
  start of the round — so a model moves along a chain of hops within a round as exact mode's
  do within a period (Spambase, 300 nodes, Δ = 1 s, 8 seeds: 18.7 updates per model at 20 s
  against exact mode's 19.2; with one hop a round it was 11.7). The receiver steps it with its
  record (used once per arrival in that order: budget uses, shard cursor), keeps the last
  arrival's model, and with ``merge: average`` first averages each arrival with the model it
  holds then. Its rounds fall at (k + ½)Δ, k ≥ 0: round k stands for exact mode's sends at
  kΔ + φ_i, φ_i ~ U[0, Δ) (their mean instant), so a model sampled at t has been through as
  many sends as in exact mode. With rounds at kΔ, k ≥ 1, as the other applications', a sample
  at t saw one round fewer (the sample comes first at a tie, its timeout being the older):
  on Breast Cancer (455 nodes, SGD, a sample every 2 s for 40 s) the models had 0.9 fewer
  updates at a sample and rounds mode trailed exact mode by 0.010 in mean accuracy over 3
  seeds (lower at 17 of 20 samples), by 0.005 ± 0.003 over 8; at (k + ½)Δ the difference
  was +0.002 ± 0.003 (8 seeds). The sends are computed level by level (``chain_levels`` in
  ``netsim/algorithms/gossip_learning/rounds.py``: a send is one level above the sends whose
  outputs it carries), each level's models stepped together. What remains approximated:
  messages take no time, and the order is drawn anew each round where exact mode's nodes keep
  their phase in the period.
- *Losses*: the peer is online by construction; the transport decides the fate of every push
  and pull (:meth:`~netsim.network.links.Network.send_batch`): the optional per-message loss
  probability applies to each, and with link failures an exchange over a link that is down at
  the round's instant is lost (its push, so its pull too), as an exact-mode message sent over
  a down link is.

How it runs: the peer choice is one compiled pass (:func:`~netsim.network.links.pair_online`
over the :class:`~netsim.network.links.OnlineNeighbourIndex`). A rule either supplies
vectorised values and merges (:class:`RoundRule`; the pushes to one node are then merged in
batches by rank, :func:`by_rank`) or does a whole round's exchanges itself
(:class:`FusedRoundRule`: the round-kernel form, in which a compiled kernel does the round:
the walk service's in :mod:`netsim.protocols.walk.kernels`, one per option set, and the
broadcast's :func:`~netsim.protocols.broadcast.broadcast_round`); both follow the order
described above, and the kernels are property-tested against plain-Python statements of it
(``tests/test_round_kernels.py``).

``tests/test_rounds.py`` checks that the two modes agree statistically on what the papers
measure (broadcast times, concurrent walks, restarts, walk progress).
"""

from __future__ import annotations

from functools import partial
from typing import Protocol

import numpy as np

from netsim.contracts import Transport, round_form
from netsim.protocols.gossip import PULL, PUSH, PushPullEngine, grid_instant
from netsim.sim import Simulation


class RoundRule(Protocol):
    """What a protocol plugs into round-based gossip: vectorised value and merge."""

    def round_values(self, nodes: np.ndarray) -> tuple[np.ndarray, ...]:
        """The values ``nodes`` send (arrays aligned with ``nodes``)."""

    def round_relevant(self, senders: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """False where ``senders``' values certainly cannot change ``targets`` (a cheap filter:
        in steady state most exchanges carry what the target already has)."""

    def round_merge(
        self, targets: np.ndarray, values: tuple[np.ndarray, ...], senders: np.ndarray, via: str
    ) -> None:
        """Merge ``values`` into ``targets`` (distinct nodes)."""

    def round_tick(self, active: np.ndarray) -> None:
        """After the round's exchanges (e.g. evaluate timeouts); ``active`` lists the nodes
        that took part in gossip at the start of the round, in increasing order."""


class FusedRoundRule(Protocol):
    """A rule that does a whole round's pushes and pulls itself (e.g. in a compiled kernel),
    with the semantics of the module docstring."""

    def round_exchange(
        self, initiators: np.ndarray, peers: np.ndarray, pull_lost: np.ndarray
    ) -> None:
        """Initiator k pushes to and pulls from ``peers[k]``, in this order of k; the pull
        answer is lost where ``pull_lost``."""

    def round_tick(self, active: np.ndarray) -> None:
        """After the round's exchanges (e.g. evaluate timeouts); ``active`` lists the nodes
        that took part in gossip at the start of the round, in increasing order."""


def by_rank(targets: np.ndarray, scratch: np.ndarray) -> list[np.ndarray]:
    """Split positions into batches in which every target occurs at most once, keeping order:
    batch r holds the r-th occurrence of each target.

    ``scratch`` is an integer array indexed by node id (its contents are overwritten): writing
    positions in reverse order leaves the earliest position of each target in it, without
    sorting.
    """
    batches = []
    remaining = np.arange(targets.size)
    while remaining.size:
        nodes = targets[remaining]
        scratch[nodes[::-1]] = remaining[::-1]
        first = scratch[nodes] == remaining
        batches.append(remaining[first])
        remaining = remaining[~first]
    return batches


class RoundGossip(PushPullEngine):
    """Round-based push-pull gossip among active online nodes (see the module docstring)."""

    round_based = True

    def __init__(
        self,
        sim: Simulation,
        network: Transport,
        rules: list[RoundRule | FusedRoundRule] | None = None,
        *,
        period: float,
        message_size: float = 64.0,
        name: str = "gossip",
        pull: bool = True,
    ) -> None:
        """With ``rules`` the rounds begin at once; without, applications :meth:`register`
        and :meth:`start` begins them. ``pull=False``: push only (every pull answer lost,
        none sent)."""
        super().__init__(sim, network, period=period, message_size=message_size, name=name)
        self.pull = pull
        self._exchanges: list = []
        self._peer_rng = sim.streams.get(f"{name}.peers")
        self._loss_rng = sim.streams.get(f"{name}.loss")
        self._scratch = np.zeros(network.nodes.n, dtype=np.int64)
        self.rounds = 0
        self._round_at = 0.0  # the latest round's instant
        if rules is not None:
            for rule in rules:
                self.register(rule)
            self.start()

    def start(self, *, first: float | None = None) -> None:
        """Begin the rounds: every period from ``first`` after now (default: one period)."""
        # a fused rule does its own exchanges; the others are merged here in batches
        self._exchanges = [
            rule.round_exchange if round_form(rule) == "fused" else partial(self._exchange, rule)
            for rule in self.rules
        ]
        offset = 0.0 if first is None else first - self.period
        self._round_at = self.sim.env.now + offset  # the rounds' grid, a period before the first
        self.sim.every(self.period, self._round, first=first)

    def cycle_instant(self, when: float) -> float | None:
        """The round instant ``when`` falls on, as the rounds' clock reaches it (see the
        base class)."""
        return grid_instant(self._round_at, self.period, when)

    def _drop_lost(
        self, initiators: np.ndarray, peers: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Let the transport decide the fate of the round's pushes, then of the pull answers
        (per-message loss, links down at the round's instant): drop the exchanges whose push
        is lost (the initiator then pulls nothing either) and mark the lost pull answers."""
        network = self.network
        push_lost = network.send_batch(initiators, peers, kind=PUSH, rng=self._loss_rng).lost
        initiators, peers = initiators[~push_lost], peers[~push_lost]
        if not self.pull:
            return initiators, peers, np.ones(initiators.size, dtype=bool)
        pull_lost = network.send_batch(peers, initiators, kind=PULL, rng=self._loss_rng).lost
        return initiators, peers, pull_lost

    def _round(self) -> None:
        self._round_at = self.sim.env.now
        self.rounds += 1
        initiators, peers, asleep, active = self.network.round_pairs(self.active, self._peer_rng)
        count = int(initiators.size)
        if count == 0:
            return
        self.exchanges += count
        network = self.network
        if network.lossy:
            initiators, peers, pull_lost = self._drop_lost(initiators, peers)
            asleep = peers[~self.active[peers]]  # only peers whose push arrived wake up
        else:
            pull_lost = np.zeros(count, dtype=bool) if self.pull else np.ones(count, dtype=bool)
            network.deliver_reliably((2 if self.pull else 1) * count)
        for exchange in self._exchanges:
            exchange(initiators, peers, pull_lost)
        if asleep.size:
            for node in sorted(set(asleep.tolist())):  # few; np.unique costs ms here
                self._activate(node)
        for rule in self.rules:
            rule.round_tick(active)

    def _exchange(
        self, rule: RoundRule, initiators: np.ndarray, peers: np.ndarray, pull_lost: np.ndarray
    ) -> None:
        # pushes, in the round's order; several pushes to one peer are merged one by one
        # with the values the senders had at the start of the round
        relevant = np.flatnonzero(rule.round_relevant(initiators, peers))
        senders, targets = initiators[relevant], peers[relevant]
        values = rule.round_values(senders)
        for batch in by_rank(targets, self._scratch):
            pushed = tuple(value[batch] for value in values)
            rule.round_merge(targets[batch], pushed, senders[batch], PUSH)
        # pulls: each initiator merges its peer's value after the pushes
        answered = ~pull_lost
        senders, targets = peers[answered], initiators[answered]
        relevant = rule.round_relevant(senders, targets)
        senders, targets = senders[relevant], targets[relevant]
        if targets.size:
            rule.round_merge(targets, rule.round_values(senders), senders, PULL)
