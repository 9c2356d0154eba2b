"""The simulation core's timers against simpy's own scheduling: the per-message paths of exact
mode push their events onto simpy's queue themselves, and must order them exactly
as simpy would order a timeout scheduled at the same moment."""

import numpy as np
from simpy.events import NORMAL

from netsim.distributions import Constant
from netsim.log import EventLog
from netsim.network import topology as t
from netsim.network.links import LinkModel, Network
from netsim.network.nodes import NodeStates
from netsim.protocols.gossip import PushPullGossip
from netsim.sim import Simulation


def test_a_message_is_queued_as_a_simpy_timeout_of_its_duration():
    """Network.send pushes the transfer itself: same time, priority and next event id as a
    timeout made instead of it, so ties at one instant resolve by the order of scheduling."""
    sim = Simulation(seed=1, log=EventLog())
    env = sim.env
    links = LinkModel(delay=Constant(dist="constant", value=1.0))
    network = Network(sim, t.complete(2), NodeStates(np.ones(2, dtype=bool)), links)
    fired: list[str] = []
    env.timeout(1.0).callbacks.append(lambda _: fired.append("timeout before"))
    transfer = network.send(
        0, 1, kind="push", payload=None, on_deliver=lambda _: fired.append("message")
    )
    env.timeout(1.0).callbacks.append(lambda _: fired.append("timeout after"))
    sim.call_later(0.5, fired.append, "earlier")
    assert next(entry[:2] for entry in env._queue if entry[3] is transfer) == (1.0, NORMAL)
    env.run(until=2.0)
    assert fired == ["earlier", "timeout before", "message", "timeout after"]


def test_a_gossip_tick_is_queued_again_as_a_simpy_timeout_of_one_period():
    """A node's tick event is pushed again one period on at each tick: it keeps its place
    among timeouts scheduled before and after it, period after period."""
    sim = Simulation(seed=1, log=EventLog())
    env = sim.env
    network = Network(sim, t.complete(2), NodeStates(np.array([True, False])), LinkModel())
    gossip = PushPullGossip(sim, network, period=1.0)
    gossip.start()
    phase = float(gossip.phase[0])
    order: list[str] = []
    original = gossip._tick

    def tick(event):
        order.append("tick")
        original(event)

    gossip._tick_callbacks = (tick,)
    tick_event = next(entry[3] for entry in env._queue)
    tick_event.callbacks = gossip._tick_callbacks
    for k in range(3):  # a timeout at each tick instant, scheduled before the tick re-queues
        env.timeout(phase + k + 1.0).callbacks.append(lambda _, k=k: order.append(f"t{k}"))
    env.run(until=phase + 3.5)
    # every timeout was scheduled before the tick re-queued itself for that instant
    assert order == ["tick", "t0", "tick", "t1", "tick", "t2", "tick"]


def test_the_simpy_seam_refuses_a_simpy_it_was_not_written_for(monkeypatch):
    """netsim.sim writes SimPy 4's queue directly: another major version, or an environment
    without the queue, event-id counter or clock it writes, is one clear error at start-up."""
    import pytest
    import simpy

    from netsim.errors import SimulationError
    from netsim.sim import Environment, check_simpy

    check_simpy(Environment())  # the installed SimPy holds
    monkeypatch.setattr(simpy, "__version__", "5.0.0")
    with pytest.raises(SimulationError, match=r"SimPy 5\.0\.0 is installed.*simpy>=4\.1,<5"):
        Environment()
    monkeypatch.undo()

    class Reworked(simpy.Environment):
        def __init__(self) -> None:
            super().__init__()
            del self._queue
            self._eid = 0

    with pytest.raises(SimulationError, match=r"no event-queue list \(_queue\); .* no event-id"):
        check_simpy(Reworked())


def test_schedule_at_orders_events_as_simpy_schedule_does():
    """An event queued at an exact instant keeps its place among timeouts of that instant by
    the order of scheduling, and a higher priority value runs after them."""
    from netsim.sim import LATE, Environment

    env = Environment()
    fired: list[str] = []

    def event(name: str):
        made = env.event()
        made._ok, made._value = True, None
        made.callbacks.append(lambda _: fired.append(name))
        return made

    env.timeout(1.0).callbacks.append(lambda _: fired.append("timeout before"))
    env.schedule_at(event("late"), 1.0, LATE)
    env.schedule_at(event("exact"), 1.0)
    env.timeout(1.0).callbacks.append(lambda _: fired.append("timeout after"))
    env.run(until=2.0)
    assert fired == ["timeout before", "exact", "timeout after", "late"]
