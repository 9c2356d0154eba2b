"""The synthetic smartphone churn model: fit, generate, parameters, the shipped trace."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from netsim.errors import TraceError
from netsim.scenario.loader import validate_scenario
from netsim.scenario.runner import run_in_memory
from netsim.traces.intervals import IntervalTrace, read_canonical_trace, read_stunner_segments
from netsim.traces.synth import (
    _hourly_profile,
    fit_stunner,
    generate_trace,
    kaplan_meier_log_quantiles,
    load_params,
    periods,
    save_params,
)
from netsim.units import DAY

REPO = Path(__file__).resolve().parents[1]

SHIPPED = REPO / "traces" / "stunner-synthetic.csv"
SHIPPED_PARAMS = REPO / "traces" / "stunner-synthetic-params.json"


def test_kaplan_meier_recovers_exponential_lengths_under_censoring():
    rng = np.random.default_rng(0)
    lengths = rng.exponential(10.0, 20_000)
    windows = rng.uniform(0, 20.0, lengths.size)  # heavy censoring
    observed = np.minimum(lengths, windows)
    event = lengths <= windows
    quantiles = np.exp(kaplan_meier_log_quantiles(observed, event))
    for level in (0.25, 0.5, 0.75):
        expected = -10.0 * math.log(1 - level)
        assert quantiles[int(level * 100)] == pytest.approx(expected, rel=0.05)
    # ignoring the censoring would be badly biased
    assert np.median(observed[event]) < 0.75 * -10.0 * math.log(0.5)


def test_periods_start_inside_the_window_and_cut_ones_are_censored():
    trace = IntervalTrace(
        ("a", "b"), np.array([0, 2, 3]), np.array([0.0, 5.0, 2.0]), np.array([3.0, 10.0, 4.0]), 10.0
    )
    found = periods(trace)
    assert found.online.tolist() == [5.0, 2.0]  # [0, 3) starts at 0: not a sample
    assert found.online_event.tolist() == [False, True]  # [5, 10) is cut by the window
    assert found.offline.tolist() == [2.0, 6.0]  # a: 3→5; b: 4→10 (cut)
    assert found.offline_event.tolist() == [True, False]


def test_parameters_round_trip_and_bad_files(tmp_path):
    params = load_params(SHIPPED_PARAMS)
    save_params(params, tmp_path / "p.json")
    assert load_params(tmp_path / "p.json") == params
    data = json.loads(SHIPPED_PARAMS.read_text())
    del data["hourly_stretch"]
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(TraceError, match="missing keys \\['hourly_stretch'\\]"):
        load_params(tmp_path / "bad.json")
    with pytest.raises(TraceError, match="not found"):
        load_params(tmp_path / "absent.json")


def test_shipped_trace_is_regenerated_exactly_from_its_parameters(tmp_path):
    """traces/README.md: 2,000 nodes, 2 days, seed 1."""
    params = load_params(SHIPPED_PARAMS)
    trace = generate_trace(params, nodes=2000, duration=2 * DAY, rng=np.random.default_rng(1))
    shipped = read_canonical_trace(SHIPPED)
    assert trace.node_count == shipped.node_count == 2000
    assert np.array_equal(trace.start, shipped.start)
    assert np.array_equal(trace.end, shipped.end)


def synthetic_vs(real, synthetic):
    a, b = periods(real), periods(synthetic)
    d_on = stats.ks_2samp(a.online[a.online_event], b.online[b.online_event]).statistic
    d_off = stats.ks_2samp(a.offline[a.offline_event], b.offline[b.offline_event]).statistic
    frac = lambda t: float((t.end - t.start).sum() / (t.node_count * 2 * DAY))  # noqa: E731
    profile_gap = np.abs(_hourly_profile(real, 2 * DAY) - _hourly_profile(synthetic, 2 * DAY))
    return d_on, d_off, frac(real), frac(synthetic), float(profile_gap.max())


def test_synthetic_trace_matches_the_stunner_segments(stunner_trace):
    """Tolerances: online fraction within 0.02; every hour of the daily profile within 0.05;
    two-sample Kolmogorov–Smirnov statistic D ≤ 0.15 on the complete online and offline
    lengths (the hourly stretch that reproduces the daily rhythm distorts lengths by design,
    so the lengths are not identical, but close)."""
    params = fit_stunner(stunner_trace)
    segments = read_stunner_segments(stunner_trace)
    synthetic = generate_trace(params, nodes=5000, duration=2 * DAY, rng=np.random.default_rng(7))
    d_on, d_off, real_frac, syn_frac, profile_gap = synthetic_vs(segments, synthetic)
    assert abs(real_frac - syn_frac) <= 0.02
    assert profile_gap <= 0.05
    assert d_on <= 0.15 and d_off <= 0.15
    # and the shipped trace is such a trace
    shipped = read_canonical_trace(SHIPPED)
    shipped = IntervalTrace(shipped.labels, shipped.offsets, shipped.start, shipped.end, 2 * DAY)
    d_on, d_off, real_frac, shipped_frac, profile_gap = synthetic_vs(segments, shipped)
    assert abs(real_frac - shipped_frac) <= 0.02 and profile_gap <= 0.06
    assert d_on <= 0.15 and d_off <= 0.15


def test_a_missing_stunner_file_falls_back_to_the_shipped_trace(tmp_path):
    data = {
        "name": "fallback",
        "seed": 3,
        "nodes": 50,
        "duration": "10min",
        "topology": {"kind": "k_out", "k": 5},
        "churn": {
            "kind": "stunner",
            "path": str(tmp_path / "absent.txt"),
            "fallback": {"kind": "trace", "path": str(SHIPPED)},
        },
    }
    built, tables = run_in_memory(validate_scenario(data, source="<t>", base_dir=None))
    assert any("absent" in w and "fallback" in w for w in built.warnings)
    assert tables["trace_assignment"]["trace_node"].str.startswith("synthetic-").all()
    del data["churn"]["fallback"]
    with pytest.raises(Exception, match="file not found"):
        validate_scenario(data, source="<t>", base_dir=None)
