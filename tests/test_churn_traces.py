"""Churn schedules, trace formats and the STUNner reader."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.distributions import Exponential, LogNormal
from netsim.errors import ScenarioError
from netsim.log import EventLog
from netsim.network import churn
from netsim.network.nodes import NodeStates
from netsim.sim import Simulation
from netsim.traces.intervals import (
    cut_segments,
    read_canonical_trace,
    read_stunner_segments,
    read_stunner_users,
    write_canonical_trace,
)
from netsim.units import DAY


def replay(schedule, horizon):
    sim = Simulation(seed=0, log=EventLog())
    nodes = NodeStates(schedule.initially_online)
    churn.ChurnReplay(sim, nodes, schedule)
    sim.run(horizon)
    return sim.log.to_frames()["churn"], nodes


def intervals_from_churn_table(frame, horizon):
    """Rebuild (node, start, end) from a churn table (every node starts offline)."""
    rows = []
    for node, group in frame.sort_values(["node", "time"], kind="stable").groupby("node"):
        start = None
        for time, online in zip(group["time"], group["online"], strict=True):
            if online:
                start = time
            else:
                rows.append((node, start, time))
                start = None
        if start is not None:
            rows.append((node, start, horizon))
    return sorted(rows)


def write_csv(path, rows):
    path.write_text("node,start,end\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows))
    return path


def test_trace_replay_reproduces_every_interval_exactly(tmp_path):
    rows = [("a", 0, 10.5), ("a", 20, 30), ("b", 5, 6), ("c", 0, 100), ("b", 6, 9), ("b", 50, 70)]
    trace = read_canonical_trace(write_csv(tmp_path / "t.csv", rows))
    schedule, picks = churn.from_trace(trace, 3, 60.0, np.random.default_rng(0), "in_order")
    assert picks.tolist() == [0, 1, 2]
    frame, nodes = replay(schedule, 60.0)
    got = intervals_from_churn_table(frame, 60.0)
    # b's touching intervals merge; what lies beyond the horizon is cut
    assert got == [(0, 0.0, 10.5), (0, 20.0, 30.0), (1, 5.0, 9.0), (1, 50.0, 60.0), (2, 0.0, 60.0)]
    assert nodes.online.tolist() == [False, True, True]


def test_the_streaming_csv_reader_and_the_line_reader_read_the_same_trace(tmp_path):
    """pyarrow reads clean files; the line reader reads the rest and names the bad line."""
    from netsim.errors import TraceError
    from netsim.traces import intervals

    text = "node,start,end\n a ,0,10.5\nb,5,6\nquiet,,\na,20,3e1\nb , 6 ,9\nc,0,100\n"
    (tmp_path / "t.csv").write_text(text)
    fast = intervals._read_canonical_csv_arrow(tmp_path / "t.csv")
    slow = intervals._read_canonical_csv(tmp_path / "t.csv")
    assert fast is not None and fast.labels == slow.labels == ("a", "b", "quiet", "c")
    for name in ("offsets", "start", "end"):
        assert np.array_equal(getattr(fast, name), getattr(slow, name))
    for bad, line in (
        (text + "\nd,1,2\n", None),  # a blank line: the line reader, which skips it
        (text + "d,1,x\n", 8),
        (text + "d,5,1\n", 8),
        (text + "a,1,2\n", 8),  # earlier than a's last interval
        (text + "d,1\n", 8),
        (text + "d,,2\n", 8),
    ):
        (tmp_path / "bad.csv").write_text(bad)
        assert intervals._read_canonical_csv_arrow(tmp_path / "bad.csv") is None
        if line is None:
            assert read_canonical_trace(tmp_path / "bad.csv").labels[-1] == "d"
        else:
            with pytest.raises(TraceError, match=f"bad.csv:line {line}: "):
                read_canonical_trace(tmp_path / "bad.csv")


def test_a_replay_can_start_partway_into_the_trace(tmp_path):
    """churn.start_at: the run's time 0 is 15 s into the trace; intervals that ended before
    it are gone, the one under way is cut, every trace node keeps its place."""
    rows = [("a", 0, 10.5), ("a", 20, 30), ("b", 5, 6), ("c", 0, 100), ("b", 6, 9), ("b", 50, 70)]
    trace = read_canonical_trace(write_csv(tmp_path / "t.csv", rows))
    later = trace.starting_at(15.0)
    assert later.labels == trace.labels and later.span is None
    # c's interval under way at 15 s is cut to start at 0 (not at -15), a's (0, 10.5) and
    # b's (5, 6), (6, 9) ended before it and are gone
    np.testing.assert_array_equal(later.offsets, [0, 1, 2, 3])
    np.testing.assert_array_equal(later.start, [5.0, 35.0, 0.0])
    np.testing.assert_array_equal(later.end, [15.0, 55.0, 85.0])
    assert dataclasses.replace(trace, span=120.0).starting_at(15.0).span == 105.0
    schedule, _ = churn.from_trace(later, 3, 60.0, np.random.default_rng(0), "in_order")
    frame, _ = replay(schedule, 60.0)
    assert intervals_from_churn_table(frame, 60.0) == [
        (0, 5.0, 15.0), (1, 35.0, 55.0), (2, 0.0, 60.0)
    ]  # fmt: skip
    assert trace.starting_at(0.0) is trace
    assert trace.starting_at(200.0).start.size == 0


def test_start_at_is_a_scenario_key_and_past_the_trace_it_warns(tmp_path):
    from netsim.scenario.build import check_inputs
    from netsim.scenario.loader import validate_scenario
    from netsim.scenario.runner import run_in_memory

    path = write_csv(tmp_path / "t.csv", [("a", 0, 10.5), ("a", 20, 30), ("b", 5, 600)])
    scenario = validate_scenario(
        {"nodes": 2, "duration": 60, "topology": {"kind": "complete"},
         "churn": {"kind": "trace", "path": str(path), "assign": "in_order", "start_at": "15s"},
         "seed": 1},
        source="test", base_dir=None,
    )  # fmt: skip
    _, tables = run_in_memory(scenario)
    online = tables["churn"].groupby("node")["time"].apply(list).to_dict()
    assert online == {0: [5.0, 15.0], 1: [0.0]}
    late_churn = scenario.churn.model_copy(update={"start_at": 900.0})
    late = scenario.model_copy(update={"churn": late_churn})
    with pytest.raises(ScenarioError, match=r"churn.start_at: 900 s is at or after the end"):
        check_inputs(late)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(0.1, 20.0), min_size=0, max_size=12), min_size=1, max_size=6))
def test_replay_of_random_interval_sets(gaps_per_node):
    """Alternating gaps/lengths per node: the replayed churn table gives them back."""
    nodes_, starts, ends = [], [], []
    for node, gaps in enumerate(gaps_per_node):
        t = 0.0
        for k in range(0, len(gaps) - 1, 2):
            t += gaps[k]
            nodes_.append(node)
            starts.append(t)
            ends.append(t + gaps[k + 1])
            t += gaps[k + 1]
    horizon = 1000.0
    schedule = churn.schedule_from_intervals(
        len(gaps_per_node), np.array(nodes_, dtype=int), np.array(starts), np.array(ends), horizon
    )
    frame, _ = replay(schedule, horizon)
    got = intervals_from_churn_table(frame, horizon)
    expected = sorted(zip(nodes_, starts, ends, strict=True))
    assert [g[0] for g in got] == [e[0] for e in expected]
    assert np.allclose([g[1:] for g in got], [e[1:] for e in expected]) if got else not expected
    b_nodes, b_start, b_end = schedule.online_intervals(horizon)
    assert sorted(zip(b_nodes.tolist(), b_start.tolist(), b_end.tolist(), strict=True)) == got


def test_trace_assignment_resamples_when_more_nodes_than_trace_nodes():
    rng = np.random.default_rng(1)
    picks = churn.assign_trace_nodes(10, 25, rng, "random")
    assert sorted(picks[:10].tolist()) == list(range(10))  # every trace node once first
    assert picks.min() >= 0 and picks.max() < 10 and len(picks) == 25
    fewer = churn.assign_trace_nodes(10, 4, np.random.default_rng(1), "random")
    assert len(set(fewer.tolist())) == 4
    assert churn.assign_trace_nodes(3, 7, rng, "in_order").tolist() == [0, 1, 2, 0, 1, 2, 0]


def test_synthetic_churn_online_fraction_matches_the_renewal_model():
    online = LogNormal(dist="lognormal", median=600.0, sigma=1.0)
    offline = Exponential(dist="exponential", mean=1800.0)
    n, horizon = 3000, 2 * DAY
    schedule = churn.synthetic(
        n, horizon, online=online, offline=offline, rng=np.random.default_rng(7)
    )
    _nodes, start, end = schedule.online_intervals(horizon)
    fraction = (end - start).sum() / (n * horizon)
    expected = online.mean() / (online.mean() + offline.mean())
    # ~ n·horizon/cycle ≈ 150k periods: the time-average is tight; 3% relative is generous
    assert fraction == pytest.approx(expected, rel=0.03)
    # started in equilibrium: the initial online fraction is the stationary one too
    p0 = schedule.initially_online.mean()
    assert abs(p0 - expected) < 5 * math.sqrt(expected * (1 - expected) / n)
    assert np.all(np.diff(schedule.time) >= 0)


def test_diurnal_modulation_puts_more_nodes_online_around_the_peak():
    online = Exponential(dist="exponential", mean=1200.0)
    offline = Exponential(dist="exponential", mean=2400.0)
    n, horizon, peak = 2000, 2 * DAY, 20 * 3600.0
    schedule = churn.synthetic(
        n,
        horizon,
        online=online,
        offline=offline,
        rng=np.random.default_rng(2),
        diurnal_amplitude=0.6,
        diurnal_peak=peak,
    )
    _nodes, start, end = schedule.online_intervals(horizon)

    def online_at(t):
        return int(((start <= t) & (end > t)).sum())

    at_peak = np.mean([online_at(DAY + peak + d) for d in (-1800, 0, 1800)])
    at_trough = np.mean([online_at(DAY + peak - DAY / 2 + d) for d in (-1800, 0, 1800)])
    assert at_peak > 1.5 * at_trough


def test_canonical_round_trip_csv_and_parquet(tmp_path):
    rows = [("x", 0.0, 1.25), ("y", 3.0, 4.0), ("x", 2.0, 2.5), ("7", 0.5, 9.0)]
    trace = read_canonical_trace(write_csv(tmp_path / "a.csv", rows))
    assert trace.labels == ("x", "y", "7")
    for suffix in (".csv", ".parquet"):
        path = tmp_path / f"copy{suffix}"
        write_canonical_trace(trace, path)
        again = read_canonical_trace(path)
        assert again.labels == trace.labels
        assert np.array_equal(again.offsets, trace.offsets)
        assert np.array_equal(again.start, trace.start)
        assert np.array_equal(again.end, trace.end)


def test_stunner_reader_on_a_small_fixture(tmp_path):
    day_ms = 86_400_000
    hour = 3_600_000
    path = tmp_path / "s.txt"
    # user u: 3 days in two lines (2 days + 1 day), starting online; user v: 1 day only
    path.write_text(
        f"u 1 0 2 {hour} {47 * hour}\n"
        f"u 0 {2 * day_ms} 2 {day_ms - hour} {hour}\n"
        f"v 0 0 -5 {12 * hour} {12 * hour}\n"
    )
    users = read_stunner_users(path)
    assert [u.user for u in users] == ["u", "v"]
    u = users[0]
    assert u.online_start.tolist() == [0.0, (3 * day_ms - hour) / 1000]
    assert u.online_end.tolist() == [hour / 1000, 3 * day_ms / 1000]
    assert u.span_start.tolist() == [0.0] and u.span_end.tolist() == [3 * DAY]
    segments = cut_segments(users, length=2 * DAY, step=DAY)
    # u has 2 windows ([0,2d), [1d,3d)); v is observed for 1 day only: none
    assert segments.labels == ("u@0", "u@86400")
    s0, e0 = segments.intervals(0)
    s1, e1 = segments.intervals(1)
    assert s0.tolist() == [0.0] and e0.tolist() == [3600.0]
    assert s1.tolist() == [2 * DAY - 3600.0] and e1.tolist() == [2 * DAY]
    local = cut_segments(users, length=2 * DAY, step=DAY, local_time=True)
    # UTC+2: the first local midnight is 22:00 UTC; only [22h, 2d22h) fits in 3 days
    assert local.labels == ("u@79200",)


def test_stunner_real_trace_matches_published_figures(stunner_trace):
    """SOURCES.md: 776 users, 4,334 lines, online share ≈ 23%, sessions median ≈ 7 min,
    mean ≈ 59 min."""
    users = read_stunner_users(stunner_trace)
    assert len(users) == 776
    lines = sum(1 for line in stunner_trace.read_text().splitlines() if line.strip())
    assert lines == 4334
    online = sum(float((u.online_end - u.online_start).sum()) for u in users)
    observed = sum(float((u.span_end - u.span_start).sum()) for u in users)
    assert online / observed == pytest.approx(0.23, abs=0.005)
    sessions = np.concatenate([u.online_end - u.online_start for u in users])
    assert np.median(sessions) / 60 == pytest.approx(7.0, abs=0.5)
    assert sessions.mean() / 60 == pytest.approx(59.0, abs=1.0)
    # independent of the reader: online durations sit at even positions when firstOnline = 1
    raw_online_ms = raw_sessions = 0
    for line in stunner_trace.read_text().splitlines():
        fields = line.split()
        durations = [int(d) for d in fields[4:]][0 if fields[1] == "1" else 1 :: 2]
        raw_online_ms += sum(durations)
        raw_sessions += sum(1 for d in durations if d > 0)
    assert online == pytest.approx(raw_online_ms / 1000, rel=1e-12)
    # sessions that continue across two lines are merged into one
    assert raw_sessions - lines <= sessions.size <= raw_sessions
    segments = read_stunner_segments(stunner_trace)
    assert segments.node_count == 27_241
    assert segments.span == 2 * DAY
    share = float((segments.end - segments.start).sum()) / (segments.node_count * 2 * DAY)
    assert share == pytest.approx(0.23, abs=0.005)


def test_stunner_replay_online_fraction_and_sessions(stunner_trace):
    """Replaying segments on 2,000 nodes: the churn table's online time and session count
    equal those of the assigned segments."""
    segments = read_stunner_segments(stunner_trace)
    n, horizon = 2000, 2 * DAY
    schedule, picks = churn.from_trace(segments, n, horizon, np.random.default_rng(11))
    frame, _ = replay(schedule, horizon)
    got = intervals_from_churn_table(frame, horizon)
    online_time = sum(e - s for _, s, e in got)
    expected_time = sum(
        float((segments.intervals(p)[1] - segments.intervals(p)[0]).sum()) for p in picks
    )
    assert online_time == pytest.approx(expected_time, rel=1e-9)
    merged_counts = pd.Series([g[0] for g in got]).value_counts()
    assert merged_counts.sum() <= sum(segments.intervals(p)[0].size for p in picks)
    assert online_time / (n * horizon) == pytest.approx(0.23, abs=0.02)


def test_never_online_nodes_survive_a_round_trip(tmp_path):
    path = write_csv(tmp_path / "t.csv", [("a", 0, 5), ("b", "", ""), ("c", 1, 2)])
    trace = read_canonical_trace(path)
    assert trace.labels == ("a", "b", "c") and trace.intervals(1)[0].size == 0
    for suffix in (".csv", ".parquet"):
        copy = tmp_path / f"copy{suffix}"
        write_canonical_trace(trace, copy)
        again = read_canonical_trace(copy)
        assert sorted(again.labels) == ["a", "b", "c"]
        assert again.start.tolist() == [0.0, 1.0] and again.end.tolist() == [5.0, 2.0]
