"""Whether a run's exact mode can run on the compiled core: every component is asked
(:meth:`netsim.component.Component.exact_support`, as networkx asks a backend ``can_run``), the
roles they answer are checked to fit the core (one transport, at most one gossip engine
carrying at most one application), and then each attaches itself
(:meth:`~netsim.component.Component.attach_core`), the transport first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from netsim.contracts import ExactRun, ExactSupport
from netsim.protocols.exact.core import ExactCore

if TYPE_CHECKING:
    from netsim.component import Component
    from netsim.sim import Simulation

#: Why a run with nothing for the core to run stays on SimPy: not worth telling the terminal.
NOTHING_TO_RUN = (
    "no gossip engine: the compiled core runs the events of a gossip engine and what it carries"
)


@dataclass(frozen=True)
class ExactPlan:
    """The components of a run that can run compiled, by the role each answered."""

    transport: Any
    gossip: Any
    attach_order: tuple[Any, ...]


def answer(key: str, component: Component, run: ExactRun) -> ExactSupport:
    """``component``'s answer, asked only of a class that answers itself: a subclass of a
    component that answers must answer again (its methods may differ from the compiled
    handlers)."""
    if "exact_support" not in type(component).__dict__:
        return ExactSupport(
            False,
            f"{key} ({type(component).__name__}) has no compiled form: its class does not "
            "answer exact_support",
        )
    return component.exact_support(run)


def exact_plan(components: Mapping[str, Component]) -> ExactPlan | str:
    """The run's components by role when every one can run beside the compiled core, else
    why not: :data:`NOTHING_TO_RUN` without a gossip engine (a ``gossip`` section or a
    protocol that ``runs_gossip``; the components are not asked),
    else the first component's reason, in build order, then the roles' fit."""
    if not any(
        component.slot == "gossip" or getattr(component, "runs_gossip", False)
        for component in components.values()
    ):
        return NOTHING_TO_RUN  # whatever the others answer: nothing would run compiled
    run = ExactRun(components)
    roles: dict[str, list[Any]] = {}
    for key, component in components.items():
        support = answer(key, component, run)
        if not support.ok:
            return support.reason
        roles.setdefault(support.role, []).append(component)
    transports, gossips = roles.get("transport", []), roles.get("gossip", [])
    if len(transports) != 1 or len(gossips) > 1:
        return "the compiled core runs one transport and at most one gossip engine"
    if not gossips:
        return NOTHING_TO_RUN
    if len(roles.get("carried", [])) > 1:
        return "the compiled core carries one broadcast or walk service in gossip messages"
    transport, gossip = transports[0], gossips[0]
    if getattr(gossip, "network", transport) is not transport:
        return "a gossip engine on another transport"
    others = tuple(c for c in components.values() if c is not transport)
    return ExactPlan(transport, gossip, (transport, *others))


def attach_exact_core(sim: Simulation, components: Mapping[str, Component]) -> str | None:
    """Run exact mode's hottest events on the compiled core when every component can
    (:func:`exact_plan`); returns why not otherwise (then SimPy runs them all)."""
    plan = exact_plan(components)
    if isinstance(plan, str):
        return plan
    core = ExactCore(sim, plan.transport)
    for component in plan.attach_order:
        component.attach_core(core)
    core.start()
    return None
