"""The simulation core's timers against simpy's own scheduling: the per-message paths of exact
mode schedule events themselves (issue 29), and must order them exactly as simpy would."""

import simpy
from simpy.events import NORMAL

from netsim.network.links import Transfer
from netsim.sim import Call, Simulation, schedule_now_plus


def test_schedule_now_plus_is_simpys_schedule():
    ours, theirs = simpy.Environment(initial_time=2.5), simpy.Environment(initial_time=2.5)
    for env, schedule in ((ours, schedule_now_plus), (theirs, None)):
        for delay in (0.5, 0.0, 0.5, 1.25):
            event = simpy.Event(env)
            if schedule is None:
                env.schedule(event, NORMAL, delay)
            else:
                schedule(env, event, delay)
    entries = [entry[:3] for entry in sorted(ours._queue)]
    assert entries == [entry[:3] for entry in sorted(theirs._queue)]
    assert entries[0] == (2.5, NORMAL, 1)


def test_timers_messages_and_ticks_fire_in_simpys_order():
    """Ties at one instant resolve by scheduling order, whichever way an event was scheduled:
    a simpy timeout, a Call, a transfer (its own event) or an inlined schedule."""
    sim = Simulation(seed=1)
    env = sim.env
    fired: list[str] = []
    env.timeout(1.0).callbacks.append(lambda _: fired.append("timeout"))
    sim.call_later(1.0, fired.append, "call")
    transfer = Transfer(0, 1, "push", None, 0.0, 0, 0, lambda t: fired.append("transfer"), None)
    transfer.env, transfer.callbacks = env, [lambda t: t.on_deliver(t)]
    schedule_now_plus(env, transfer, 1.0)
    later = Call(env, 0.5, fired.append, ("earlier",))
    assert later.callbacks
    env.run(until=2.0)
    assert fired == ["earlier", "timeout", "call", "transfer"]
