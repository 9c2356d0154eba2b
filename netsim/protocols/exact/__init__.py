"""The compiled exact core: exact mode's hottest events — a node's gossip tick, a message's
completion with its epoch and loss checks, the broadcast's adoption, the walk's ``rwprop``
merge and timeout timer — run by one numba kernel in SimPy's order, with SimPy kept for
everything else.

Exact mode on SimPy costs some 1.5 µs per event in SimPy's own loop and as much again in the
handlers. Here those events live in a compiled event queue (:mod:`netsim.event_queue`, plus
two first-in-first-out lanes for events queued in time order) and are handled by compiled
code over the components' array state. Everything else — churn transitions, the broadcast's
new updates, the walks themselves, observers, progress, the end of the run — stays a SimPy
event. Where an event has a Python part (a timeout that may restart a walk, activation
listeners) the kernel returns for it, and SimPy's next event is looked up again afterwards.

The package is the core only:

- :mod:`~netsim.protocols.exact.support`: the question every component answers
  (:meth:`netsim.component.Component.exact_support`), the roles' fit, the attaching;
- :mod:`~netsim.protocols.exact.core`: the Python side — the queue merged with SimPy's, the
  blocks of draws, the message slots, the rows, the counters, the Python parts of events;
- :mod:`~netsim.protocols.exact.kernel`: the kernel — the queue, the bound, the dispatch.

Each component's compiled handlers live beside it and are attached by its public
``attach_core``: the transport's in :mod:`netsim.network.links_exact`, the gossip engine's in
:mod:`netsim.protocols.gossip_exact`, the broadcast's one adoption (the same code in every
engine) in :mod:`netsim.protocols.broadcast`, the walk's in
:mod:`netsim.protocols.walk.compiled`. Each Python method with a compiled twin names it in
its docstring, and ``tests/test_exact_twins.py`` fails when one of a pair changes alone.

**Same events, same order.** Both queues order by SimPy's key (time, priority, insertion id)
and share one insertion counter, so every event gets the id it would get on SimPy. Before
SimPy processes an event, the kernel processes every compiled event whose key is smaller
(:meth:`ExactCore.advance <netsim.protocols.exact.core.ExactCore.advance>`, called by
:meth:`netsim.sim.Environment.step`): the merged order is SimPy's order.

**Same draws.** The random words come from the same named streams in the same blocks
(``<gossip>.peers``, ``<links>.delay``, ``<links>.loss``: :class:`~netsim.rng.BlockDraws`
draws 4,096 at a time): the kernel reads the current block and returns to Python for the next
one before an event could run out.

**Same floats and rows.** Every instant is computed as the SimPy path computes it; rows are
gathered in arrays in the SimPy path's order and written in the row groups its one-by-one
appends make (:meth:`netsim.log.EventTable.extend_as_rows`). Python state that other
components read (message counters, the engine's exchanges) is brought up to date whenever the
kernel returns, that is before every SimPy event.

Like every cached kernel of netsim, the kernel is compiled again when a module whose code or
constants it inlines changes (:mod:`netsim.kernel_cache`). ``tests/test_exact_core.py`` holds
the two engines to identical tables; which engine ran is in the run's manifest
(``exact_engine``), and a run that falls back says why once on the terminal.
"""

from __future__ import annotations

from netsim.protocols.exact.support import NOTHING_TO_RUN, attach_exact_core, exact_plan

__all__ = ["NOTHING_TO_RUN", "attach_exact_core", "exact_plan"]
