"""The single random walk service (Hegedűs, Berta, Jelasity 2016, Alg. 2 and §4.2–4.4).

A random walk is a token carrying an opaque state (e.g. a model) from node to node. Walk
progress is broadcast with push-pull gossip as ``rwprop`` = (steps, id, age); the update
timeout δ triggers restarts from local copies; the replace rule of line 14 and the
accept-once rule of §4.4 decide which update a node keeps.

Node state lives in arrays indexed by node id:

- ``rwprop``, held by the service's cycle strategy: ``prop_steps``, ``prop_id``, and
  ``prop_origin``, the update's virtual creation time on the node's clock (arrival time − age
  on arrival), so that age() = now − origin: ages accumulate the time an update spends on
  nodes and on links, so no synchronised clocks are needed (§4.1). ``prop_special`` marks
  the bootstrap update that never times out. These are views of one record array, ``prop``
  (one record per node), which the compiled rounds-mode kernels of
  :mod:`netsim.protocols.walk.kernels` work on; exact mode, which reads one node at a time,
  holds them as Python lists instead, and sends (steps, id, origin, special) — the age when
  sent is the message's send time − origin.
- ``rw``: ``rw_steps`` and ``rw_state`` (the local copy of the best walk that visited the node).

Choices where the paper leaves room (each is tested in ``tests/test_walk.py``):

1. *Walk identity.* The paper has no walk ids. Here a walk gets a fresh id when it is started
   (bootstrap) or restarted, and keeps it while it is forwarded; since walks move hot-potato,
   one id is one token. When a node forwards its local copy instead of the arriving walk
   (line 30 after line 27 kept an older copy with more steps), the token keeps its id and
   takes the copy's steps and state.
2. *Alive.* A walk is *propagating* while it is in transfer or held for forwarding by an
   online node; it is *suspended* while its holder is offline (it may resume, see 5). The
   "number of walks propagating concurrently" (§5.2, Fig. 2–3) counts propagating walks; its
   time average is integrated exactly over every change, not sampled.
3. *The bootstrap update* (never times out) is replaced by any real update: its only purpose is
   to keep nodes from restarting before the first walk's updates arrive (§4.4).
4. *Timeouts.* ``onUpdateTimeout(i)`` fires when the local update's age reaches i·δ; a node that
   adopts an update already older than δ waits for the next multiple. A node that is still
   trying to forward its own local copy does not start a second walk on a timeout: its
   ``forwardRandomWalk()`` is already running. Only active nodes (online and having heard fresh
   gossip since they rejoined) time out.
5. *Rejoining.* A suspended walk is resumed when its holder, back online, receives its first
   fresh gossip message — if the walk is still the leader, i.e. its step count is at least the
   node's (fresh) ``rwprop.steps``; otherwise it ends ("abandoned"). Receiving a walk does not
   count as the fresh gossip message (§4.4 speaks of gossip).
6. *Kills* (§5.3 stress test) happen on arrival, before the step is counted.
7. *Retries.* A failed transfer is retried at once with a new random online neighbour while
   forwarding is still necessary (no fresher live update with a larger step count); with no
   online neighbour the node tries again after ``retry_interval``.

Where the authors' published implementation differs from the paper (accept-once and ties in
line 14, an age error at each adoption, the starter's step-0 update, and their gossip cycle
and walk handling) are options, :class:`WalkVariant`, described in ``docs/walk-variants.md``;
``preset: authors`` selects all of them.

The package:

- :mod:`~netsim.protocols.walk.service`: the service core, :class:`RandomWalkService` (tokens,
  forwarding, churn, ``rw``), with its bookkeeping in :mod:`~netsim.protocols.walk.ledger`,
  its tables in :mod:`~netsim.protocols.walk.tables` and its token in
  :mod:`~netsim.protocols.walk.tokens`;
- :mod:`~netsim.protocols.walk.cycle`: the cycle strategy's interface
  (:class:`~netsim.protocols.walk.cycle.WalkCycle`) and one strategy per mode, each owning its
  ``rwprop`` and its timeouts: ``cycle_exact`` (per-node timers), ``cycle_rounds`` (a scan
  per round) and ``cycle_authors`` (the authors' cycle, its tick check and buffers);
- :mod:`~netsim.protocols.walk.config`: the sections' configs and the presets;
- :mod:`~netsim.protocols.walk.ideal` (:class:`IdealWalk`) and
  :mod:`~netsim.protocols.walk.agents` (:class:`VisitCounter`);
- :mod:`~netsim.protocols.walk.kernels`: the compiled kernels of rounds mode and of the
  authors' cycle.
"""

from netsim.protocols.walk.agents import VISITS_TABLE, VisitCounter
from netsim.protocols.walk.config import (
    AgentField,
    IdealWalkConfig,
    WalkServiceConfig,
    WalkVariant,
)
from netsim.protocols.walk.cycle import NO_AGE_ERRORS
from netsim.protocols.walk.ideal import IdealWalk
from netsim.protocols.walk.service import RandomWalkService
from netsim.protocols.walk.tables import (
    ENDS_TABLE,
    RESTARTS_TABLE,
    SAMPLES_TABLE,
    STEPS_TABLE,
    SUMMARY_TABLE,
    WALK_FIGURE,
)
from netsim.protocols.walk.tokens import WALK, WalkToken

__all__ = [
    "ENDS_TABLE",
    "NO_AGE_ERRORS",
    "RESTARTS_TABLE",
    "SAMPLES_TABLE",
    "STEPS_TABLE",
    "SUMMARY_TABLE",
    "VISITS_TABLE",
    "WALK",
    "WALK_FIGURE",
    "AgentField",
    "IdealWalk",
    "IdealWalkConfig",
    "RandomWalkService",
    "VisitCounter",
    "WalkServiceConfig",
    "WalkToken",
    "WalkVariant",
]
