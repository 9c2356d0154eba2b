"""The walk's steps on the compiled exact core (netsim/protocols/walk/steps.py): they run in
the kernel, and only their rare parts (a lost or killed walk, one dropped, one with no online
neighbour) return to Python; tests/test_exact_core.py holds the tables to SimPy's."""

from __future__ import annotations

import collections
from pathlib import Path

import netsim.protocols.exact.core as core_module
from netsim.event_queue import WALK_PART
from netsim.log import EventLog
from netsim.scenario.build import build_run
from netsim.scenario.loader import load_scenario

REPO = Path(__file__).resolve().parents[1]


def test_the_walks_steps_return_to_python_for_their_rare_parts_only(monkeypatch):
    """A 4-minute walk with kills and lossy links: every step is a row of walk_steps, and
    the kernel returned for a step's Python part exactly as often as a walk was lost, killed
    or dropped (its ends but the superseded and abandoned ones, decided in Python)."""
    statuses: collections.Counter[int] = collections.Counter()
    kernel = core_module.run_events

    def counted(*arguments):
        status, now = kernel(*arguments)
        statuses[status] += 1
        return status, now

    monkeypatch.setattr(core_module, "run_events", counted)
    scenario = load_scenario(
        REPO / "scenarios/walk/reduced-drw100-d20-kill5.yaml", ["duration=4min", "links.loss=0.02"]
    )
    log = EventLog()
    built = build_run(scenario, log)
    built.sim.run(scenario.duration)
    log.close()
    tables = log.to_frames()
    assert built.exact_engine == "compiled"
    steps, ends = len(tables["walk_steps"]), tables["walk_ends"]
    reasons = ends["reason"].value_counts().to_dict()
    lost = int((tables["messages_lost"]["kind"] == "walk").sum())
    assert statuses[WALK_PART] == lost + reasons.get("killed", 0) + reasons.get("dropped", 0)
    assert (steps, statuses[WALK_PART]) == (23, 4)
