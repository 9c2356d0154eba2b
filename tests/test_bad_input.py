"""Every user error ends in one clear message, never a traceback.

The command line prints ``netsim: error: <message>`` on stderr and exits with status 2; the
message names the file and the key path or line, and what is allowed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas.testing as pd_testing
import pytest
from conftest import SUBPROCESS_HANG_LIMIT

from netsim.cli import EXIT_USER_ERROR, main
from netsim.errors import TraceError
from netsim.scenario.schema import Scenario
from netsim.traces.intervals import read_canonical_trace, read_stunner_users

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"

BASE = """\
name: bad-input
seed: 1
nodes: 10
duration: 1min
topology: {kind: k_out, k: 3}
"""

TOPOLOGY_KINDS = (
    "'k_out', 'random_regular', 'erdos_renyi', 'watts_strogatz', 'barabasi_albert', "
    "'random_geometric', 'ring', 'complete', 'edge_list'"
)
TOP_LEVEL_KEYS = (
    ", ".join(Scenario.model_fields)  # the top-level keys, in the schema's order
)


def cli_error(capsys: pytest.CaptureFixture[str], *argv: object) -> str:
    """Run ``netsim *argv`` and check it failed as a user error; return stderr."""
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    err = captured.err
    assert code == EXIT_USER_ERROR == 2, err
    assert err.startswith("netsim: error: "), err
    assert err.count("netsim: error:") == 1, err
    assert "Traceback" not in err
    assert captured.out == ""
    return err


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def run_error(capsys: pytest.CaptureFixture[str], tmp_path: Path, scenario: Path) -> str:
    """``netsim run`` that must fail as a user error and leave nothing under ``--out``."""
    out = tmp_path / "runs"
    err = cli_error(capsys, "run", scenario, "--out", out, "-q")
    leftovers = list(out.iterdir()) if out.exists() else []
    assert leftovers == [], leftovers
    return err


# --- scenario files ------------------------------------------------------------------------

SCENARIO_CASES = [
    pytest.param(
        BASE + "links: {loss: [0.1\n",
        [":7:1: YAML syntax error: expected ',' or ']', but got '<stream end>'"],
        id="yaml-syntax",
    ),
    pytest.param(
        "name: t\nnodes: [1, 2\nduration: 1min\n",
        [":3:9: YAML syntax error: expected ',' or ']', but got ':'"],
        id="yaml-syntax-mid-file",
    ),
    pytest.param(
        BASE + "nodes: 4000\n",
        [
            ":6:1: refused YAML: duplicate key 'nodes' (first given on line 3); a key may appear "
            "once"
        ],
        id="duplicate-key",
    ),
    pytest.param(
        BASE + "links: {loss: 0.1, loss: 0.2}\n",
        [":6:20: refused YAML: duplicate key 'loss' (first given on line 6)"],
        id="duplicate-nested-key",
    ),
    pytest.param(
        BASE
        + "x0: &x0 [a, a, a, a, a, a, a, a, a, a]\n"
        + "".join(
            f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 10)}]\n" for i in range(1, 9)
        ),  # 10⁹ values once expanded, from 700 bytes
        [": refused YAML: aliases expand this value to more than 200,000 values"],
        id="billion-laughs",
    ),
    pytest.param(
        BASE + "links: " + "[" * 10_000 + "]" * 10_000 + "\n",
        [":6:71: refused YAML: nesting deeper than 64 levels"],
        id="deep-nesting",
    ),
    pytest.param(
        BASE + "links: &self {loss: *self}\n",
        [":6:8: refused YAML: an alias refers to a value containing it"],
        id="recursive-alias",
    ),
    pytest.param(
        BASE + "links: {loss: .nan}\n",
        ["  - links.loss: Input should be a finite number (got nan)"],
        id="nan",
    ),
    pytest.param(
        BASE + "churn:\n  kind: synthetic\n  online: {dist: lognormal, median: 1min, sigma: .inf}\n"
        "  offline: {dist: weibull, scale: 1min, shape: 1e-300}\n",
        [
            "  - churn.online.sigma: Input should be a finite number (got inf)",
            "  - churn.offline: the mean of this distribution is not a finite duration",
        ],
        id="infinite-or-overflowing-distribution",
    ),
    pytest.param(
        BASE.replace("nodes: 10", "nodes: 2.5"),
        ["  - nodes: Input should be a valid integer, got a number with a fractional part"],
        id="fractional-integer",
    ),
    pytest.param(
        BASE.replace("duration: 1min", "duration: 1" + "0" * 400),
        ["  - duration: a 401-digit integer is out of range; numbers are at most 2**63 - 1"],
        id="huge-integer",
    ),
    pytest.param(
        BASE.replace("nodes: 10", "nodes: 1" + "0" * 5000),
        [
            ":3:8: refused YAML: a 5,001-digit integer is out of range; numbers are at most "
            "2**63 - 1 in magnitude"
        ],
        id="integer-too-long-to-read",
    ),  # more digits than Python converts: PyYAML raised a bare ValueError
    pytest.param("", [": the scenario is empty"], id="empty-file"),
    pytest.param("# only a comment\n", [": the scenario is empty"], id="only-comment"),
    pytest.param("- a\n- b\n", [": a scenario is a mapping of keys, got list"], id="top-list"),
    pytest.param(
        BASE + "nodez: 5\n",
        [
            ": invalid scenario:\n",
            f"  - nodez: unknown key (did you mean 'nodes'?); allowed keys here: {TOP_LEVEL_KEYS}",
        ],
        id="unknown-top-level-key",
    ),
    pytest.param(
        BASE.replace("k: 3}", "k: 3, zz: 1}"),
        ["  - topology.zz: unknown key; allowed keys here: kind, k, undirected"],
        id="unknown-nested-key",
    ),
    pytest.param(
        BASE.replace("nodes: 10", "nodes: many"),
        [
            "  - nodes: Input should be a valid integer, unable to parse string as an integer "
            "(got 'many')"
        ],
        id="wrong-type",
    ),
    pytest.param(
        BASE.replace("duration: 1min", "duration: -5s"),
        ["  - duration: duration '-5s' is negative; it must be >= 0"],
        id="negative-duration",
    ),
    pytest.param(
        BASE.replace("duration: 1min", "duration: 10xs"),
        ["  - duration: unknown time unit 'xs' in '10xs'; allowed units: us, ms, s, min, h, d"],
        id="unknown-time-unit",
    ),
    pytest.param(
        BASE + "links: {loss: 1.5}\n",
        ["  - links.loss: Input should be less than or equal to 1 (got 1.5)"],
        id="probability-above-1",
    ),
    pytest.param(
        BASE + "links: {loss: -0.1}\n",
        ["  - links.loss: Input should be greater than or equal to 0 (got -0.1)"],
        id="probability-below-0",
    ),
    pytest.param(
        BASE.replace("kind: k_out", "kind: star"),
        [f"  - topology.kind: unknown value 'star'; allowed values: {TOPOLOGY_KINDS}"],
        id="unknown-topology-kind",
    ),
    pytest.param(
        BASE.replace("kind: k_out, ", ""),
        [f"  - topology: needs a 'kind' key; allowed values: {TOPOLOGY_KINDS}"],
        id="missing-kind",
    ),
    pytest.param(
        BASE.replace("duration: 1min\n", ""),
        ["  - duration: required key is missing"],
        id="missing-duration",
    ),
    pytest.param(
        BASE.replace("k: 3", "k: 10"),
        ["topology.k (10) must be less than nodes (10)"],
        id="k-out-k-not-below-nodes",
    ),
    pytest.param(
        BASE + "broadcast: {interval: 1min}\n",
        ["broadcast needs a gossip section (it spreads updates by gossip)"],
        id="broadcast-without-gossip",
    ),
    pytest.param(
        BASE
        + "churn:\n  kind: synthetic\n"
        + "  online: {dist: constant, value: 1h}\n"
        + "  offline: {dist: constant, value: 1h}\n"
        + "  diurnal: {amplitude: 0.3, peak: 1d}\n",
        ["  - churn.diurnal.peak: peak is a time of day: it must be less than 1d"],
        id="diurnal-peak-1d",
    ),
    pytest.param(
        BASE + "gossip: {period: 1s, message_size: 64QB}\n",
        ["  - gossip.message_size: unknown size unit 'QB' in '64QB'; allowed units: B, KB,"],
        id="unknown-size-unit",
    ),
]


@pytest.mark.parametrize(("text", "expected"), SCENARIO_CASES)
@pytest.mark.parametrize("command", ["validate", "run"])
def test_bad_scenario_file(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    command: str,
    text: str,
    expected: list[str],
) -> None:
    scenario = write(tmp_path / "my-scenario.yaml", text)
    if command == "run":
        err = run_error(capsys, tmp_path, scenario)
    else:
        err = cli_error(capsys, "validate", scenario)
    assert err.startswith(f"netsim: error: {scenario}"), err
    for fragment in expected:
        assert fragment in err, err


def test_every_problem_is_reported_in_one_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = BASE.replace("nodes: 10", "nodes: many").replace("kind: k_out", "kind: star")
    scenario = write(tmp_path / "two.yaml", text + "zz: 1\n")
    err = cli_error(capsys, "validate", scenario)
    assert err.startswith(f"netsim: error: {scenario}: invalid scenario:\n"), err
    assert "  - nodes: Input should be a valid integer" in err
    assert "  - topology.kind: unknown value 'star'" in err
    assert "  - zz: unknown key; allowed keys here: name," in err


def test_missing_trace_file_names_resolved_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scenario = write(tmp_path / "s.yaml", BASE + "churn: {kind: trace, path: nope.csv}\n")
    err = cli_error(capsys, "validate", scenario)
    resolved = (tmp_path / "nope.csv").resolve()
    assert err.startswith(f"netsim: error: {scenario}: invalid scenario:\n"), err
    assert f"  - churn.path: file not found: {resolved}" in err


def test_missing_scenario_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"
    err = cli_error(capsys, "validate", missing)
    assert err == f"netsim: error: {missing}: scenario file not found\n"
    err = cli_error(capsys, "run", missing, "--out", tmp_path / "runs")
    assert err == f"netsim: error: {missing}: scenario file not found\n"


def test_scenario_path_is_a_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = cli_error(capsys, "validate", tmp_path)
    assert err == (
        f"netsim: error: {tmp_path}: is a directory, not a regular file; a scenario file must "
        "be a regular file\n"
    )


def test_set_without_equals(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    scenario = write(tmp_path / "s.yaml", BASE)
    err = cli_error(capsys, "validate", scenario, "--set", "nodes")
    assert err == "netsim: error: --set 'nodes': expected dotted.key=value, e.g. nodes=500\n"


def test_set_scalar_as_section(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    scenario = write(tmp_path / "s.yaml", BASE)
    err = cli_error(capsys, "validate", scenario, "--set", "nodes.x=1")
    assert err == f"netsim: error: --set 'nodes.x=1': nodes is not a section in {scenario}\n"


def test_set_value_is_validated_like_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scenario = write(tmp_path / "s.yaml", BASE)
    err = cli_error(capsys, "validate", scenario, "--set", "gossip.period=3parsecs")
    assert "  - gossip.period: unknown time unit 'parsecs' in '3parsecs'; allowed units:" in err


def test_validate_quickstart(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", str(QUICKSTART)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err == ""
    assert captured.out == f"{QUICKSTART}: valid scenario 'quickstart' (1000 nodes, 14400 s)\n"


# --- canonical trace files -----------------------------------------------------------------

TRACE_CASES = [
    pytest.param(
        "id,start,end\n0,0,10\n",
        "line 1: header must be 'node,start,end', got 'id,start,end'",
        id="wrong-header",
    ),
    pytest.param(
        "node,start,end\n0,0,10\n\n1,0,10,5\n",
        "line 4: expected 3 columns (node,start,end), got 4",
        id="wrong-column-count",
    ),
    pytest.param(
        "node,start,end\n0,0,10\n1,abc,10\n",
        "line 3: start and end must be numbers (seconds), got 'abc', '10'",
        id="non-numeric-time",
    ),
    pytest.param(
        "node,start,end\n0,0,10\n1,-1,10\n",
        "line 3: negative start -1.0; times are >= 0 s",
        id="negative-start",
    ),
    pytest.param(
        "node,start,end\n0,0,10\n1,10,10\n",
        "line 3: interval end 10.0 is not after its start 10.0",
        id="end-equals-start",
    ),
    pytest.param(
        "node,start,end\n0,0,10\n1,0,10\n1,30,20\n",
        "line 4: interval end 20.0 is not after its start 30.0",
        id="end-before-start",
    ),
    pytest.param(
        "node,start,end\n0,100,200\n1,0,10\n0,20,50\n",
        "line 4: interval [20.0, 50.0) of node '0' is earlier than its previous interval "
        "[100.0, 200.0) at line 2; each node's intervals must be in time order and must not "
        "overlap",
        id="out-of-time-order",
    ),
    pytest.param(
        "node,start,end\n0,0,100\n1,0,10\n1,20,30\n0,50,150\n",
        "line 5: interval [50.0, 150.0) of node '0' overlaps its previous interval "
        "[0.0, 100.0) at line 2; each node's intervals must be in time order and must not "
        "overlap",
        id="overlapping-intervals",
    ),
]


@pytest.mark.parametrize(("text", "expected"), TRACE_CASES)
def test_bad_canonical_trace_read_directly(tmp_path: Path, text: str, expected: str) -> None:
    trace = write(tmp_path / "trace.csv", text)
    with pytest.raises(TraceError) as info:
        read_canonical_trace(trace)
    assert str(info.value) == f"{trace}:{expected}"


@pytest.mark.parametrize(("text", "expected"), TRACE_CASES)
def test_bad_canonical_trace_in_scenario(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, expected: str
) -> None:
    write(tmp_path / "trace.csv", text)
    scenario = write(tmp_path / "s.yaml", BASE + "churn: {kind: trace, path: trace.csv}\n")
    err = run_error(capsys, tmp_path, scenario)
    assert err == f"netsim: error: {(tmp_path / 'trace.csv').resolve()}:{expected}\n"


def test_canonical_trace_missing_or_wrong_type(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="trace file not found"):
        read_canonical_trace(tmp_path / "absent.csv")
    other = write(tmp_path / "trace.tsv", "node\tstart\tend\n")
    with pytest.raises(TraceError) as info:
        read_canonical_trace(other)
    assert str(info.value) == f"{other}: unknown trace file type '.tsv'; use .csv or .parquet"


def test_canonical_trace_reports_first_bad_line_in_file_order(tmp_path: Path) -> None:
    # node B's line 4 overlaps its line 3; node A's line 6 is out of order: report line 4
    trace = write(
        tmp_path / "trace.csv", "node,start,end\nA,0,10\nB,0,10\nB,5,6\nA,100,200\nA,20,50\n"
    )
    with pytest.raises(TraceError) as info:
        read_canonical_trace(trace)
    assert str(info.value).startswith(f"{trace}:line 4: interval [5.0, 6.0) of node 'B'")


# --- STUNner trace files -------------------------------------------------------------------

GOOD_STUNNER_LINE = "u1 1 0 0 1000 2000\n"

STUNNER_CASES = [
    pytest.param(
        GOOD_STUNNER_LINE + "\nu2 1 0 0\n",
        "line 3: expected '<user> <firstOnline 0|1> <start ms> <UTC offset h> <d1> ...' "
        "(at least 5 fields), got 4",
        id="too-few-fields",
    ),
    pytest.param(
        GOOD_STUNNER_LINE + "u2 2 0 0 10\n",
        "line 2: firstOnline must be 0 or 1, got '2'",
        id="first-online-not-0-1",
    ),
    pytest.param(
        GOOD_STUNNER_LINE + "u2 1 0 0 10 1.5\n",
        "line 2: start and durations must be integers (ms) below 2**63 and the UTC offset a "
        "number of hours",
        id="non-integer-duration",
    ),
    pytest.param(
        GOOD_STUNNER_LINE + "u2 1 0 0 10 " + "9" * 20 + "\n",
        "line 2: start and durations must be integers (ms) below 2**63 and the UTC offset a "
        "number of hours",
        id="duration-beyond-64-bits",
    ),
    pytest.param(
        GOOD_STUNNER_LINE + "u2 1 9223372036854775000 0 10 5000\n",
        "line 2: start 9223372036854775000 ms plus the durations ends past 1000000000000000 ms "
        "(year 33658) or starts before 0; times are Unix ms",
        id="end-beyond-year-33658",
    ),
    pytest.param(
        GOOD_STUNNER_LINE + "u2 1 0 nan 10 5\n",
        "line 2: UTC offset 'nan'; an offset is a number of hours in [-24.0, 24.0]",
        id="nan-utc-offset",
    ),
    pytest.param(
        GOOD_STUNNER_LINE + "u2 1 0 0 10 -5\n",
        "line 2: negative duration; durations are >= 0 ms",
        id="negative-duration",
    ),
    pytest.param(
        GOOD_STUNNER_LINE + "u2 1 0 0 10\nu1 0 2000 0 500\n",
        "line 3: segment of user 'u1' starts before the end of its segment on line 1; a user's "
        "segments must not overlap",
        id="overlapping-segments",
    ),
]


@pytest.mark.parametrize(("text", "expected"), STUNNER_CASES)
def test_bad_stunner_trace(tmp_path: Path, text: str, expected: str) -> None:
    trace = write(tmp_path / "stunner.txt", text)
    with pytest.raises(TraceError) as info:
        read_stunner_users(trace)
    assert str(info.value) == f"{trace}:{expected}"


def test_bad_stunner_trace_in_scenario(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write(tmp_path / "stunner.txt", GOOD_STUNNER_LINE + "u2 2 0 0 10\n")
    scenario = write(tmp_path / "s.yaml", BASE + "churn: {kind: stunner, path: stunner.txt}\n")
    err = run_error(capsys, tmp_path, scenario)
    resolved = (tmp_path / "stunner.txt").resolve()
    assert err == f"netsim: error: {resolved}:line 2: firstOnline must be 0 or 1, got '2'\n"


# --- edge-list topologies ------------------------------------------------------------------

EDGE_LIST_CASES = [
    pytest.param("0 1\n1 2 3\n", "2: expected 2 fields 'source target', got 3", id="three-fields"),
    pytest.param(
        "0 1\n# a comment\n1 x\n", "3: node ids must be integers, got '1 x'", id="non-integer-id"
    ),
    pytest.param(
        "0 1\n\n1,2\n3 10\n", "4: node id 10 outside [0, 9] (nodes: 10)", id="id-not-below-nodes"
    ),
]


@pytest.mark.parametrize(("text", "expected"), EDGE_LIST_CASES)
def test_bad_edge_list(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, expected: str
) -> None:
    write(tmp_path / "edges.txt", text)
    scenario = write(
        tmp_path / "s.yaml",
        BASE.replace("{kind: k_out, k: 3}", "{kind: edge_list, path: edges.txt}"),
    )
    err = run_error(capsys, tmp_path, scenario)
    assert err == f"netsim: error: {(tmp_path / 'edges.txt').resolve()}:{expected}\n"


# --- regressions: bugs found while writing these tests ---


NOT_UTF8 = b"\xff\xfe not utf-8\n"
NOT_UTF8_CASES = [
    # (file name, its bytes, scenario text)
    pytest.param("s.yaml", BASE.encode() + b"description: " + NOT_UTF8, BASE, id="scenario"),
    pytest.param(
        "t.csv",
        b"node,start,end\n" + NOT_UTF8,
        BASE + "churn: {kind: trace, path: t.csv}\n",
        id="trace",
    ),
    pytest.param("u.txt", NOT_UTF8, BASE + "churn: {kind: stunner, path: u.txt}\n", id="stunner"),
    pytest.param(
        "e.txt",
        b"0 1\n" + NOT_UTF8,
        BASE.replace("{kind: k_out, k: 3}", "{kind: edge_list, path: e.txt}"),
        id="edge_list",
    ),
]


@pytest.mark.parametrize(("name", "data", "text"), NOT_UTF8_CASES)
def test_file_that_is_not_utf8(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, data: bytes, text: str
) -> None:
    scenario = write(tmp_path / "s.yaml", text)
    (tmp_path / name).write_bytes(data)  # may overwrite the scenario itself
    err = run_error(capsys, tmp_path, scenario)
    assert name in err


def test_negative_seed_option(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    scenario = write(tmp_path / "s.yaml", BASE)
    out = tmp_path / "runs"
    err = cli_error(capsys, "run", scenario, "--out", out, "--seed", "-1")
    assert err == "netsim: error: --seed -1: a seed is an integer in [0, 2^63)\n"


def test_out_is_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    scenario = write(tmp_path / "s.yaml", BASE)
    not_a_directory = write(tmp_path / "runs", "")
    err = cli_error(capsys, "run", scenario, "--out", not_a_directory)
    assert str(not_a_directory) in err


def test_impossible_topology_names_the_scenario(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scenario = write(
        tmp_path / "s.yaml",
        BASE.replace("{kind: k_out, k: 3}", "{kind: random_regular, degree: 3}").replace(
            "nodes: 10", "nodes: 11"
        ),
    )
    err = run_error(capsys, tmp_path, scenario)
    assert err == (
        f"netsim: error: {scenario}: invalid scenario:\n"
        "  - topology.degree (3) must be less than nodes (11) and nodes × degree must be even\n"
    )


# --- the random walk service ---------------------------------------------------------------

WALK = BASE + "gossip: {period: 100ms}\n"

WALK_CASES = [
    pytest.param(
        WALK + "walk: {kind: service, transfer_time: 2s, timeout: 1s}\n",
        "  - walk: timeout δ (1 s) must be at least transfer_time δ_rw (2 s): an update is not "
        "overwritten for δ_rw on average (Hegedűs et al. §5.2)",
        id="timeout-below-transfer-time",
    ),
    pytest.param(
        BASE + "gossip: {period: 0s}\nwalk: {kind: service, transfer_time: 1s, timeout: 2s}\n",
        "  - gossip.period: Input should be greater than 0 (got '0s')",
        id="non-positive-gossip-period",
    ),
    pytest.param(
        WALK + "walk: {kind: service, transfer_time: 1s, timeout: 2s, kill_probability: 1.2}\n",
        "  - walk.kill_probability: Input should be less than or equal to 1 (got 1.2)",
        id="kill-probability-above-1",
    ),
    pytest.param(
        BASE + "walk: {kind: service, transfer_time: 1s, timeout: 2s}\n",
        "walk (kind service) needs a gossip section",
        id="walk-without-gossip",
    ),
]


@pytest.mark.parametrize(("text", "expected"), WALK_CASES)
def test_bad_walk_scenario(capsys: pytest.CaptureFixture[str], tmp_path: Path, text, expected):
    scenario = write(tmp_path / "s.yaml", text)
    err = cli_error(capsys, "validate", scenario)
    assert expected in err


def test_walk_on_a_topology_with_a_lonely_node(capsys, tmp_path: Path) -> None:
    write(tmp_path / "edges.txt", "0 1\n1 2\n")  # node 3 has no neighbour
    text = (
        BASE.replace("nodes: 10", "nodes: 4").replace(
            "{kind: k_out, k: 3}", "{kind: edge_list, path: edges.txt}"
        )
        + "gossip: {period: 100ms}\nwalk: {kind: service, transfer_time: 1s, timeout: 2s}\n"
    )
    scenario = write(tmp_path / "s.yaml", text)
    err = cli_error(capsys, "validate", scenario)
    assert err == (
        f"netsim: error: {scenario}: walk: 1 node(s) (e.g. node 3) have no neighbour in the "
        "topology; a walk reaching them could never be forwarded\n"
    )


def test_small_timeout_is_warned_about(capsys, tmp_path: Path) -> None:
    scenario = write(
        tmp_path / "s.yaml", WALK + "walk: {kind: service, transfer_time: 1s, timeout: 1.1s}\n"
    )
    assert main(["validate", str(scenario)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("netsim: warning: walk: timeout δ = 1.1 s is less than")


# --- runs too large to build ---------------------------------------------------------------

HUGE = BASE + (
    "churn:\n"
    "  kind: synthetic\n"
    "  online: {dist: exponential, mean: 10min}\n"
    "  offline: {dist: exponential, mean: 10min}\n"
    "metrics: {sample_every: 1us}\n"
)


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_run_too_large_is_refused_before_anything_is_built(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    """duration 1e15 s used to hang validate (it built the churn schedule) and sample_every
    1 µs to hang the run; both are refused from the parameters alone."""
    scenario = write(tmp_path / "huge.yaml", HUGE.replace("duration: 1min", "duration: 1e15s"))
    if command == "run":
        err = run_error(capsys, tmp_path, scenario)
    else:
        err = cli_error(capsys, command, scenario)
    assert "the run would be too large:" in err
    assert "  - metrics.sample_every: about 1e+21 sample rows over duration 1e+15 s" in err
    assert "  - churn: about 1.67e+13 on/off transitions for 10 nodes" in err


def test_a_long_exact_mode_run_is_warned_about(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = BASE.replace("duration: 1min", "duration: 2d").replace("nodes: 10", "nodes: 10000")
    path = write(tmp_path / "long.yaml", text + "gossip: {period: 100ms}\n")
    assert main(["validate", str(path)]) == 0
    err = capsys.readouterr().err
    assert "netsim: warning: gossip: about 3.46e+10 messages in exact mode" in err


def test_a_run_with_almost_nobody_online_is_warned_about(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A trace whose replayed window is (almost) all offline used to report 'online nodes:
    mean 0 (0%)' without a word."""
    trace = write(tmp_path / "late.csv", "node,start,end\n0,86400,90000\n1,0,0.3\n")
    text = BASE.replace("nodes: 10", "nodes: 2").replace("k: 3", "k: 1")
    scenario = write(tmp_path / "s.yaml", text + f"churn: {{kind: trace, path: {trace}}}\n")
    assert main(["validate", str(scenario)]) == 0
    err = capsys.readouterr().err
    assert "netsim: warning: churn: nodes are online 0.25% of the time over the run's 60 s" in err


def test_omitted_tables_keep_no_rows_and_unknown_names_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from netsim.scenario.loader import validate_scenario
    from netsim.scenario.runner import run_in_memory

    walk = {
        "name": "omit", "seed": 2, "nodes": 30, "duration": "2min",
        "topology": {"kind": "k_out", "k": 5}, "gossip": {"period": "1s"},
        "walk": {"kind": "service", "transfer_time": "1s", "timeout": "20s"},
    }  # fmt: skip
    full = run_in_memory(validate_scenario(walk, source="t", base_dir=None))[1]
    walk["metrics"] = {"omit_tables": ["walk_steps"]}
    lean = run_in_memory(validate_scenario(walk, source="t", base_dir=None))[1]
    assert len(full["walk_steps"]) == 119 and len(lean["walk_steps"]) == 0
    assert list(lean["walk_steps"].columns) == list(full["walk_steps"].columns)
    for name in ("walk_summary", "walk_samples", "samples"):
        pd_testing.assert_frame_equal(lean[name], full[name])
    text = BASE + "metrics: {omit_tables: [walk_steps]}\n"
    err = cli_error(capsys, "validate", write(tmp_path / "s.yaml", text))
    assert "metrics.omit_tables: walk_steps is not a table of this scenario; its tables: " in err


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            "{examples: 1" + "0" * 30 + ", features: 3}",
            "  - dola.data.options.examples: a 31-digit integer is out of range",
        ),
        (
            "{examples: 1000000000000, features: 3}",
            "synthetic_ball: examples × features = 1,000,000,000,000 × 3 values; at most "
            "1,000,000,000 (8 GB): generate fewer examples",
        ),
    ],
)
def test_data_options_too_large_are_refused_before_anything_is_made(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, options: str, expected: str
) -> None:
    text = BASE.replace("topology: {kind: k_out, k: 3}", "topology: {kind: complete}") + (
        f"dola:\n  period: 1s\n  data: {{name: synthetic_ball, options: {options}}}\n"
    )
    err = cli_error(capsys, "validate", write(tmp_path / "s.yaml", text))
    assert expected in err


# --- files that are not regular files, or too large; sizes bounded before allocation ------


def netsim_subprocess(
    *argv: object, timeout: float = SUBPROCESS_HANG_LIMIT
) -> subprocess.CompletedProcess[str]:
    """``python -m netsim *argv`` in a child process that must end within ``timeout`` seconds
    (for inputs that used to hang or to read without end: a regression fails, not hangs)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "netsim", *map(str, argv)],
        capture_output=True, text=True, timeout=timeout, env=env, check=False,
    )  # fmt: skip


def test_a_scenario_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    """validate used to wait for a writer for ever (still waiting at 60 s)."""
    fifo = tmp_path / "scenario.yaml"
    os.mkfifo(fifo)
    for command in ("validate", "run", "sweep"):
        done = netsim_subprocess(command, fifo)
        assert done.returncode == 2, done.stderr
        assert done.stderr == (
            f"netsim: error: {fifo}: is a FIFO (named pipe), not a regular file; a "
            f"{'sweep' if command == 'sweep' else 'scenario'} file must be a regular file\n"
        )


MI_OGD = BASE.replace("topology: {kind: k_out, k: 3}", "topology: {kind: complete}") + (
    "mi_ogd:\n  period: 1s\n"
)


def test_a_data_path_that_is_a_device_is_refused(tmp_path: Path) -> None:
    """A data path pointing at /dev/zero used to read gigabytes."""
    scenario = write(tmp_path / "s.yaml", MI_OGD + "  data: {name: libsvm, path: /dev/zero}\n")
    done = netsim_subprocess("validate", scenario)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "netsim: error: /dev/zero: is a character device, not a regular file; a data file "
        "must be a regular file\n"
    )


def test_files_larger_than_their_bound_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bounds are stated in the message (small bounds here: the real ones are GiB)."""
    import gzip

    from netsim import files

    scenario = write(tmp_path / "s.yaml", BASE)
    monkeypatch.setattr(files, "MAX_SCENARIO_BYTES", 64)
    err = cli_error(capsys, "validate", scenario)
    assert err == (
        f"netsim: error: {scenario}: {len(BASE)} bytes; a scenario file may be at most 64 bytes "
        "(netsim refuses larger files rather than read them)\n"
    )
    monkeypatch.undo()
    bomb = tmp_path / "bomb.csv.gz"  # 8 KiB that expand past the bound
    bomb.write_bytes(gzip.compress(b"0" * 4_000_000))
    monkeypatch.setattr(files, "MAX_DATA_BYTES", 1_000_000)
    text = MI_OGD + f"  loss: hinge\n  data: {{name: csv, path: {bomb}, label: 0}}\n"
    err = cli_error(capsys, "validate", write(tmp_path / "s.yaml", text))
    assert err == (
        f"netsim: error: {bomb}: more than 976.6 KiB once decompressed; a data file may be at "
        "most 976.6 KiB\n"
    )


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            "{name: synthetic_regression, options: {dimension: 1e9}}",
            "mi_ogd.data.options: dimension must be an integer in [1, 10000000], got 1000000000.0",
            id="dimension-1e9",  # used to allocate gigabytes for 30 s
        ),
        pytest.param(
            "{name: synthetic_regression, options: {examples: 2000000, dimension: 1000}}",
            "mi_ogd.data.options: examples × dimension = 2,000,000 × 1,000 values; at most "
            "1,000,000,000 (8 GB): generate fewer examples",
            id="examples-times-dimension",
        ),
        pytest.param(
            "{name: synthetic_regression, options: {examples: 2.5}}",
            "mi_ogd.data.options: examples must be an integer >= 1, got 2.5",
            id="fractional-examples",  # passed validate, failed in run
        ),
    ],
)
def test_mi_ogd_data_options_are_bounded_integers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data: str, expected: str
) -> None:
    scenario = write(tmp_path / "s.yaml", MI_OGD + f"  data: {data}\n")
    err = cli_error(capsys, "validate", scenario)
    assert err == f"netsim: error: {scenario}: {expected}\n"


def test_a_libsvm_feature_index_is_bounded_before_rows_are_made_dense(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An index of 2·10⁹ used to end in an allocation traceback."""
    data = write(tmp_path / "big.svm", "1 1:0.5\n-1 2000000000:1\n")
    scenario = write(
        tmp_path / "s.yaml", MI_OGD + f"  loss: hinge\n  data: {{name: libsvm, path: {data}}}\n"
    )
    err = cli_error(capsys, "validate", scenario)
    assert err == (
        f"netsim: error: {data}:line 2: feature index 2,000,000,000 is above 10,000,000, the "
        "most features a data set may have\n"
    )
    write(data, "1 1:0.5\n-1 " + "9" * 30 + ":1\n")  # past 64 bits: an OverflowError before
    err = cli_error(capsys, "validate", scenario)
    assert f"{data}:line 2: feature index {int('9' * 30):,} is above 10,000,000" in err


def test_a_derived_value_too_long_to_parse(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """100,000 unary minus signs used to end in a MemoryError."""
    text = BASE + (
        "gossip: {period: 1s}\nsweep:\n  grid:\n    nodes: [10]\n  derived:\n"
        f'    gossip.period: "= {"-" * 100_000}1"\n'
    )
    err = cli_error(capsys, "sweep", write(tmp_path / "s.yaml", text), "--out", tmp_path)
    assert "is 100,001 characters long; an expression may have at most 1,000" in err
    deep = text.replace("-" * 100_000, "-" * 990)
    err = cli_error(capsys, "sweep", write(tmp_path / "s.yaml", deep), "--out", tmp_path)
    assert "nests too deeply to be computed" in err


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        pytest.param(
            "late.csv",
            "node,start,end\n0,0,1e300\n",
            ":line 2: time 1e+300 s is past the latest time a trace may give, 1e+10 s (about "
            "317 years after its origin)",
            id="time-1e300",  # trace info ended in 'Maximum allowed size exceeded'
        ),
        pytest.param(
            "nul.csv",
            "node,start,end\na\x00b,0,10\nc,0,5\n",
            ":line 2: node label 'a\\x00b' holds the control character U+0000; a label is "
            "printable text",
            id="nul-in-label",
        ),
    ],
)
def test_trace_values_that_cannot_be_shown_or_held(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, content: str, expected: str
) -> None:
    trace = write(tmp_path / name, content)
    err = cli_error(capsys, "trace", "info", trace)
    assert err == f"netsim: error: {trace}{expected}\n"
    scenario = write(tmp_path / "s.yaml", BASE + f"churn: {{kind: trace, path: {trace}}}\n")
    err = cli_error(capsys, "validate", scenario)
    assert f"{trace}{expected}" in err


def test_a_null_node_label_in_a_parquet_trace(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    trace = tmp_path / "t.parquet"
    pq.write_table(pa.table({"node": ["a", None], "start": [0.0, 0.0], "end": [10.0, 5.0]}), trace)
    err = cli_error(capsys, "trace", "info", trace)
    assert err == (
        f"netsim: error: {trace}:row 1: the node label is null; every row names its node\n"
    )


def test_a_start_at_past_the_trace_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """churn.start_at: 1e300s used to be only warned about."""
    trace = write(tmp_path / "t.csv", "node,start,end\n0,0,100\n1,0,50\n")
    text = BASE.replace("nodes: 10", "nodes: 2").replace("k: 3", "k: 1")
    scenario = write(
        tmp_path / "s.yaml", text + f"churn: {{kind: trace, path: {trace}, start_at: 1e300s}}\n"
    )
    err = cli_error(capsys, "validate", scenario)
    assert err == (
        f"netsim: error: {scenario}: churn.start_at: 1e+300 s is at or after the end of the last "
        f"online interval of {trace} (100 s), so every node would stay offline; start_at must "
        "be less than 100 s\n"
    )
