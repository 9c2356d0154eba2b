"""What a run will create, estimated from the scenario before anything is built.

``netsim validate`` used to build the whole churn schedule, so ``duration: 1e15s`` hung it,
and ``sample_every: 1us`` validated and then hung the run. These estimates come from the
parameters alone, so a scenario past a limit is refused (or warned about) at once, naming
the key to change.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from netsim.errors import ScenarioError
from netsim.protocols.gossip import round_mode
from netsim.registry import component_class

if TYPE_CHECKING:
    from netsim.scenario import schema as s

#: Rows of periodic samples a run may write, over all ``sample_every`` keys (each row is
#: written and kept; 10⁸ rows are gigabytes).
MAX_SAMPLE_ROWS = 10**8
#: Churn transitions a schedule may hold (16 bytes each, built before the run starts).
MAX_CHURN_TRANSITIONS = 5 * 10**8
#: Gossip exchanges (two messages each) a run may make over all engines, in either mode:
#: 10¹² are some 14 hours on the compiled exact core and at least hours in rounds mode (a
#: million nodes gossiping every second for five days); ``gossip.period: 1e-300`` validated and
#: then hung the run.
MAX_GOSSIP_MESSAGES = 10**12
#: Steps a walk may take (``duration`` over ``step_time`` or ``transfer_time``): each is an
#: event of some microseconds and a row of ``walk_steps``, so 10⁸ are hours and gigabytes, as
#: for samples (the walk paper's two days at 100 ms are
#: 1.7·10⁶); ``walk.step_time: 1us`` validated and then ran for days.
MAX_WALK_STEPS = 10**8
#: Rounds a round-based instance (``dola``, ``mi_ogd``, ``muffliato``, ``dsgd``,
#: ``gossip_learning``) may run, ``rounds`` or ``duration`` over ``period``: each is at least
#: tens of microseconds of numpy over the nodes, so 10⁸ are hours (the shipped scenarios run
#: at most a few thousand); ``dola.period: 1e-300`` ended in an OverflowError and
#: ``gossip_learning.period: 1e-300`` validated and then hung the run.
MAX_ROUNDS = 10**8
#: Gossip messages past which exact mode is warned about (on SimPy about a microsecond of
#: Python per event: 10⁹ messages are hours; the compiled exact core takes some 50 ns per
#: message, and rounds mode does the same exchanges in vectorised rounds).
WARN_EXACT_MESSAGES = 10**9


@dataclass(frozen=True)
class RunSize:
    """Expected counts of what a run creates."""

    sample_rows: dict[str, float]  # per sample_every key
    churn_transitions: float
    exact_gossip_messages: float
    gossip_messages: float = 0.0  # exact and rounds mode
    walk_steps: dict[str, float] | None = None  # per walk instance key
    rounds: dict[str, float] | None = None  # per round-based instance key


def _sample_every_keys(data: Any, prefix: str = "") -> Iterator[tuple[str, float]]:
    """Every ``sample_every`` key of the scenario with a value (seconds), by dotted path."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            path = f"{prefix}{key}"
            if key == "sample_every" and isinstance(value, int | float) and value > 0:
                yield path, float(value)
            else:
                yield from _sample_every_keys(value, f"{path}.")


def estimate_run_size(scenario: s.Scenario) -> RunSize:
    """Expected sample rows, churn transitions and exact-mode gossip messages."""
    duration = scenario.duration
    data = scenario.model_dump(by_alias=True)
    rows = {key: duration / every + 1.0 for key, every in _sample_every_keys(data)}
    churn = scenario.churn
    transitions = component_class(churn, ("churn",)).expected_transitions(
        churn, scenario.nodes, duration
    )
    # an observer of ``components`` samples every ``every``; a broadcast writes a row of
    # ``broadcasts`` (and tracks coverage) for every update it starts
    for part in scenario.plan.parts:
        config = part.config
        observer = part.cls.slot == "observer" and part.in_components  # not metrics'
        every = getattr(config, "every", None) if observer else None
        if isinstance(every, int | float) and every > 0:
            rows[f"{part.key}.every"] = duration / every + 1.0
        interval = (
            getattr(config, "interval", None)
            if part.key == "broadcast" or (getattr(config, "kind", None) == "broadcast")
            else None
        )
        if isinstance(interval, int | float) and interval > 0:
            start = float(getattr(config, "start", 0.0) or 0.0)
            rows[f"{part.key}.interval"] = max(duration - start, 0.0) / interval + 1.0
    messages = exact = 0.0
    for engine in scenario.plan.of_slot("gossip"):  # the gossip section's and any entry's
        count = 2.0 * scenario.nodes * duration / engine.config.period
        messages += count
        if not round_mode(engine.config):
            exact += count
    steps: dict[str, float] = {}
    for walk in scenario.plan.of_slot("walk"):
        step = getattr(walk.config, "step_time", None) or getattr(
            walk.config, "transfer_time", None
        )
        if isinstance(step, int | float) and step > 0:
            key = "step_time" if hasattr(walk.config, "step_time") else "transfer_time"
            steps[f"{walk.key}.{key}"] = duration / step
        # a walk whose holder has no online neighbour tries again every retry_interval, an
        # event each time: 1e-300 s (or 1 µs) under churn hung the run
        retry = getattr(walk.config, "retry_interval", None)
        if isinstance(retry, int | float) and retry > 0:
            steps[f"{walk.key}.retry_interval"] = duration / retry
    rounds: dict[str, float] = {}
    for part in scenario.plan.parts:
        period = getattr(part.config, "period", None)
        if part.cls.slot == "gossip" or not isinstance(period, int | float) or period <= 0:
            continue  # a gossip engine's messages are counted above
        given = getattr(part.config, "rounds", None)
        planned = given if isinstance(given, int) else duration / period
        rounds[f"{part.key}.{'rounds' if isinstance(given, int) else 'period'}"] = planned
    return RunSize(rows, transitions, exact, messages, steps, rounds)


def check_run_size(scenario: s.Scenario, warnings: list[str]) -> RunSize:
    """Refuse a scenario whose run would not fit (:data:`MAX_SAMPLE_ROWS`,
    :data:`MAX_CHURN_TRANSITIONS`); warn about a very long exact-mode run."""
    size = estimate_run_size(scenario)
    problems = []
    total_rows = sum(size.sample_rows.values())
    if total_rows > MAX_SAMPLE_ROWS:
        worst = max(size.sample_rows, key=size.sample_rows.__getitem__)
        problems.append(
            f"{worst}: about {size.sample_rows[worst]:.3g} sample rows over duration "
            f"{scenario.duration:g} s ({total_rows:.3g} over all sample_every keys); at most "
            f"{MAX_SAMPLE_ROWS:.0e}: sample less often or run shorter"
        )
    if size.churn_transitions > MAX_CHURN_TRANSITIONS:
        problems.append(
            f"churn: about {size.churn_transitions:.3g} on/off transitions for {scenario.nodes} "
            f"nodes over duration {scenario.duration:g} s; at most {MAX_CHURN_TRANSITIONS:.0e} "
            "(the schedule is built before the run): use longer periods, fewer nodes or a "
            "shorter duration"
        )
    if size.gossip_messages > MAX_GOSSIP_MESSAGES:
        problems.append(
            f"gossip: about {size.gossip_messages:.3g} gossip messages over duration "
            f"{scenario.duration:g} s ({scenario.nodes} nodes); at most "
            f"{MAX_GOSSIP_MESSAGES:.0e}: use a longer gossip period, fewer nodes or a shorter "
            "duration"
        )
    for key, steps in (size.walk_steps or {}).items():
        if steps > MAX_WALK_STEPS:
            problems.append(
                f"{key}: about {steps:.3g} walk steps over duration {scenario.duration:g} s; "
                f"at most {MAX_WALK_STEPS:.0e}: use a longer {key.rsplit('.', 1)[1]} or a "
                "shorter duration"
            )
    for key, count in (size.rounds or {}).items():
        if count > MAX_ROUNDS:
            problems.append(
                f"{key}: about {count:.3g} rounds over duration {scenario.duration:g} s; at "
                f"most {MAX_ROUNDS:.0e}: use fewer rounds, a longer period or a shorter duration"
            )
    if problems:
        raise ScenarioError(
            "the run would be too large:\n" + "\n".join(f"  - {p}" for p in problems)
        )
    if size.exact_gossip_messages > WARN_EXACT_MESSAGES:
        hours = size.exact_gossip_messages * 1e-6 / 3600
        warnings.append(
            f"gossip: about {size.exact_gossip_messages:.3g} messages in exact mode, roughly "
            f"{math.ceil(hours)} hour(s) or more on SimPy and some 20 times less on the compiled "
            "core (the manifest's exact_engine says which ran); gossip.mode: rounds runs the "
            "same exchanges far faster still (see its documented approximations)"
        )
    return size
