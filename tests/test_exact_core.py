"""The compiled exact core (netsim.protocols.exact) against SimPy, the reference: the same
scenario and seed give identical tables on both engines, event for event.

Each check runs a scenario twice, once with every exact-mode event on SimPy (``engine="simpy"``)
and once on the compiled core, and compares every table exactly (values, order, types). The
property test draws small scenarios with everything the core runs: churn, random loss, drawn
and constant delays with and without bandwidth, silent gossip, the broadcast, and the walk
service (timeouts and restarts, kills, walks lost in transfer and parked by churn).
"""

from __future__ import annotations

import hashlib
import json
from contextlib import nullcontext
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsim.log import EventLog
from netsim.protocols.gossip import PushPullGossip
from netsim.scenario.build import build_run
from netsim.scenario.loader import load_scenario, validate_scenario
from netsim.scenario.runner import run_scenario
from tests.table_digests import CASES, run_case

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"


def run_both(scenario):
    """Run ``scenario`` on SimPy and on the compiled core: each engine's label, Python-side
    counters and tables."""
    results = {}
    for engine in ("simpy", "auto"):
        log = EventLog()
        built = build_run(scenario, log, engine=engine)
        built.sim.run(scenario.duration)
        log.close()
        gossip = built.get("gossip")
        counters = (
            built.network.sent, built.network.delivered, built.network.lost,
            gossip.exchanges if gossip is not None else None,
            gossip.active.tolist() if gossip is not None else None,
        )  # fmt: skip
        results[engine] = (built.exact_engine, counters, log.to_frames())
    return results["simpy"], results["auto"]


def assert_same_tables(reference: dict[str, pd.DataFrame], other: dict[str, pd.DataFrame]):
    assert sorted(reference) == sorted(other)
    for name, frame in reference.items():
        pd.testing.assert_frame_equal(frame, other[name], check_exact=True, obj=name)


@pytest.mark.parametrize(
    ("scenario", "overrides"),
    [
        ("walk/reduced-drw1-d10-kill5.yaml", ["duration=4min"]),
        ("walk/reduced-drw100-d20-kill5.yaml", ["duration=4min", "links.loss=0.02"]),
    ],
)
def test_the_walk_service_is_identical_on_both_engines(scenario, overrides):
    scenario = load_scenario(REPO / "scenarios" / scenario, overrides)
    (_, simpy_counts, simpy_tables), (engine, counts, tables) = run_both(scenario)
    assert engine == "compiled"
    assert counts == simpy_counts
    assert_same_tables(simpy_tables, tables)
    assert len(tables["walk_restarts"]) > 3 and len(tables["walk_ends"]) > 2


#: The cases of tests/table_digests.py whose exact-mode events the compiled core runs (the
#: others are rounds mode, or have a part without a compiled form: the authors' cycle, the
#: ideal walk, privacy per observer, DOLA and MI-OGD).
COMPILED_CASES = (
    "quickstart",
    "walk/reduced-drw1-d10-kill0",
    "walk/reduced-drw100-d20-kill5",
    "learning/spambase-gossip-learning",
)


@pytest.mark.parametrize("case", sorted(CASES))
def test_shipped_scenarios_are_identical_on_both_engines(case):
    """Every reference case of tests/table_digests.py: on the compiled core where it applies,
    the digest of every table equals SimPy's (and the reference's: test_table_digests)."""
    auto = run_case(case, "auto")
    assert (auto["exact_engine"] == "compiled") == (case in COMPILED_CASES), auto["exact_engine"]
    if case not in COMPILED_CASES:
        return
    simpy = run_case(case, "simpy")
    assert simpy["exact_engine"] == "simpy: asked for"
    assert auto["tables"] == simpy["tables"]


def test_quickstart_is_identical_on_both_engines():
    scenario = load_scenario(QUICKSTART, ["duration=90min"])
    (simpy_engine, simpy_counts, simpy_tables), (engine, counts, tables) = run_both(scenario)
    assert simpy_engine == "simpy: asked for"
    assert engine == "compiled"
    assert counts == simpy_counts
    assert_same_tables(simpy_tables, tables)
    assert len(tables["broadcast_adoptions"]) > 1000
    assert len(tables["messages_lost"]) > 10  # churn loses messages in flight


def test_run_directories_are_byte_identical(tmp_path):
    """The published files, not only their values: the rows reach each table in the row
    groups the SimPy path's appends make, so every Parquet file has the same bytes."""
    scenario = load_scenario(QUICKSTART, ["duration=1h"])
    manifests = {}
    for engine in ("simpy", "auto"):
        result = run_scenario(scenario, out=tmp_path / engine, engine=engine)
        manifests[engine] = json.loads((result.directory / "manifest.json").read_text())
        digests = {
            path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(result.directory.glob("*.parquet"))
        }
        manifests[engine]["digests"] = digests
    assert manifests["simpy"]["exact_engine"] == "simpy: asked for"
    assert manifests["auto"]["exact_engine"] == "compiled"
    assert manifests["simpy"]["digests"] == manifests["auto"]["digests"]
    assert manifests["simpy"]["files"] == manifests["auto"]["files"]


def small_scenario(draw) -> dict:
    """A small scenario of parts the compiled core runs, drawn by hypothesis."""
    nodes = draw(st.integers(4, 40))
    period = draw(st.sampled_from([0.5, 1.0, 2.0]))
    delay = draw(
        st.sampled_from(
            [
                {"dist": "constant", "value": 0.1},
                {"dist": "constant", "value": 0.0},
                {"dist": "constant", "value": 0.25},
                {"dist": "uniform", "low": 0.05, "high": 0.8},
                {"dist": "exponential", "mean": 0.3},
            ]
        )
    )
    links: dict = {"delay": delay, "loss": draw(st.sampled_from([0.0, 0.0, 0.1, 0.4]))}
    if draw(st.booleans()):
        links["bandwidth"] = "1KB/s"
    if draw(st.integers(0, 9)) == 0:  # no compiled form: both runs are SimPy's, as they say
        links["failure"] = {"mean_up": "20s", "mean_down": "3s"}
    churn = draw(
        st.sampled_from(
            [
                {"kind": "always_on"},
                {
                    "kind": "synthetic",
                    "online": {"dist": "exponential", "mean": "20s"},
                    "offline": {"dist": "exponential", "mean": "10s"},
                },
                {
                    "kind": "synthetic",
                    "online": {"dist": "exponential", "mean": "4s"},
                    "offline": {"dist": "exponential", "mean": "6s"},
                },
            ]
        )
    )
    data = {
        "name": "small",
        "seed": draw(st.integers(0, 2**31)),
        "nodes": nodes,
        "duration": draw(st.sampled_from([15.0, 40.0])),
        "topology": draw(
            st.sampled_from(
                [
                    {"kind": "k_out", "k": min(3, nodes - 1)},
                    {"kind": "complete"},
                    {"kind": "ring"},
                ]
            )
        ),
        "churn": churn,
        "links": links,
        "gossip": {"period": period, "message_size": "100B"},
        "metrics": {"sample_every": 3.0},
    }
    application = draw(st.sampled_from(["none", "broadcast", "walk", "walk"]))
    if application == "broadcast":
        data["broadcast"] = {
            "interval": draw(st.sampled_from([1.0, 3.0, 7.0])),
            "start": draw(st.sampled_from([0.0, 0.5, 2.0])),
        }
    elif application == "walk":  # timeouts, restarts, kills, lost and parked walks
        data["walk"] = {
            "kind": "service",
            "transfer_time": draw(st.sampled_from([period, 0.25, 0.5])),
            "timeout": draw(st.sampled_from([2.0, 3.0, 5.5])),
            "kill_probability": draw(st.sampled_from([0.0, 0.05, 0.3])),
            "start": draw(st.sampled_from([0.0, 1.0])),
            "bootstrap_update": draw(st.booleans()),
            "sample_every": 2.0,
        }
    return data


def phases_on_a_grid():
    """Every node's gossip phase rounded to a quarter period: with periods, delays, sampling
    and broadcast intervals that are multiples of 1/4 s, events of different nodes and
    sources then fall on the same instants exactly, so the order of simultaneous events —
    SimPy's (priority, insertion id) — decides every table."""
    start = PushPullGossip.start

    def start_on_grid(engine: PushPullGossip) -> None:
        engine.phase[:] = np.floor(engine.phase / engine.period * 4) * engine.period / 4
        start(engine)

    return mock.patch.object(PushPullGossip, "start", start_on_grid)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(st.data())
def test_small_scenarios_are_identical_on_both_engines(data):
    scenario_data = data.draw(st.composite(small_scenario)())
    scenario = validate_scenario(scenario_data, source="hypothesis", base_dir=None)
    with phases_on_a_grid() if data.draw(st.booleans(), label="on a grid") else nullcontext():
        (_, simpy_counts, simpy_tables), (engine, counts, tables) = run_both(scenario)
    if "failure" in scenario_data["links"]:
        assert engine == "simpy: links.failure has no compiled form"
    else:
        assert engine == "compiled", engine
    assert counts == simpy_counts
    assert_same_tables(simpy_tables, tables)


@pytest.mark.parametrize(
    ("scenario", "overrides", "why"),
    [
        ("quickstart.yaml", ["links.failure.mean_up=30min", "links.failure.mean_down=2min"],
         "simpy: links.failure has no compiled form"),
        ("quickstart.yaml", ["gossip.mode=rounds"], "rounds"),
        ("walk/reduced-drw1-d10-kill5.yaml", ["walk.replace_rule=authors"],
         "simpy: the walk's cycle has a compiled form for walk.cycle: netsim, the paper's "
         "replace rule and exact ages only"),
        ("walk/reduced-drw1-d10-kill5.yaml", ["walk.preset=authors"],
         "simpy: a gossip engine on a common grid has no compiled form"),
    ],
)  # fmt: skip
def test_what_the_core_does_not_run_runs_on_simpy(scenario, overrides, why):
    scenario = load_scenario(REPO / "scenarios" / scenario, ["duration=10min", *overrides])
    built = build_run(scenario, EventLog())
    assert built.exact_engine == why
    assert built.sim.env.core is None


def test_a_run_on_the_core_stops_at_its_time_limit():
    """The kernel hands back to Python every EVENTS_PER_CALL events, so a signal (an
    interrupt, the wall-clock limit) takes effect even when SimPy has no event for a long
    while: here none but the end of a run of 10 simulated hours."""
    import time

    from netsim.errors import RunTimeoutError
    from netsim.scenario.runner import simulate

    scenario = validate_scenario(
        {
            "name": "long",
            "seed": 1,
            "nodes": 2000,
            "duration": "10h",
            "topology": {"kind": "k_out", "k": 10},
            "links": {"delay": {"dist": "constant", "value": 0.01}},
            "gossip": {"period": 0.1},
            "metrics": {"sample_every": "10h"},
        },
        source="test",
        base_dir=None,
    )
    started = time.perf_counter()
    with pytest.raises(RunTimeoutError):
        simulate(scenario, EventLog(), time_limit=1.0)
    assert time.perf_counter() - started < 10  # the whole run would take minutes


def test_the_core_refills_its_draws_in_ever_larger_runs_of_the_same_values():
    """The core takes a stream's draws over and refills them itself, each time twice the
    blocks of the time before (few returns to Python): its reader hands out the values the
    stream's own draws would, in order, for every run of blocks."""
    from netsim.event_queue import PEER_AT
    from netsim.rng import BlockDraws

    scenario = validate_scenario(
        {
            "name": "refills",
            "seed": 1,
            "nodes": 300,
            "duration": "2s",
            "topology": {"kind": "k_out", "k": 10},
            "links": {"delay": {"dist": "constant", "value": 0.01}},
            "gossip": {"period": 0.1},
        },
        source="test",
        base_dir=None,
    )
    built = build_run(scenario, EventLog())
    built.sim.run(scenario.duration)
    core = built.sim.env.core
    assert core is not None
    one_at_a_time = BlockDraws(np.random.default_rng(3).random, block=7)
    expected = [one_at_a_time() for _ in range(7 * 300)]
    reader = core.take_draws(PEER_AT, BlockDraws(np.random.default_rng(3).random, block=7))
    with mock.patch.object(core, "refill", wraps=core.refill) as refill:
        assert [reader() for _ in range(7 * 300)] == expected
    assert refill.call_count <= 9  # 300 blocks: 1 + 2 + 4 + … + 256, not 300 refills
