"""Trace formats: detection, FTA reading / writing, STUNner writing, conversion, segmentation."""

import tracemalloc

import numpy as np
import pytest
from conftest import SHARED_DATA, require_shared

from netsim.errors import TraceError
from netsim.traces.formats import (
    FTA_COLUMNS,
    FtaTrace,
    convert_trace,
    detect_format,
    read_fta_trace,
    read_trace,
    segment_trace,
    write_fta_trace,
    write_stunner_trace,
)
from netsim.traces.intervals import (
    read_canonical_trace,
    read_stunner_segments,
    write_canonical_trace,
)
from netsim.units import DAY

FTA_TRACE = SHARED_DATA / "traces" / "fta-lanl" / "event_trace.tab"
FTA_HEADER = "\t".join(FTA_COLUMNS)

# node -> intervals; starts at 0 for "a", later for the others, all on whole milliseconds,
# no two intervals of a node touch (STUNner merges touching intervals)
ROWS = {
    "a": [(0.0, 10.5), (20.0, 30.25), (31.0, 100.0)],
    "b": [(5.0, 6.0), (6.5, 9.001), (50.0, 70.0)],
    "n17": [(0.125, 86400.0)],
    "42": [(3600.0, 7200.5)],
}


def write_csv(path, rows):
    text = "node,start,end\n"
    text += "".join(f"{node},{s!r},{e!r}\n" for node, ivs in rows.items() for s, e in ivs)
    path.write_text(text)
    return path


def as_dict(trace):
    """label -> list of (start, end) floats."""
    out = {}
    for node, label in enumerate(trace.labels):
        starts, ends = trace.intervals(node)
        out[label] = list(zip(starts.tolist(), ends.tolist(), strict=True))
    return out


def fta_line(event_id, node, kind, start, stop, *, reason=0):
    return f"{event_id}\t0\t{node}\t3\t{node}.0\t{kind}\t{start}\t{stop}\t{reason}"


def write_fta(path, lines):
    path.write_text(FTA_HEADER + "\n" + "\n".join(lines) + "\n")
    return path


# --- round trips -------------------------------------------------------------------------


def test_canonical_fta_canonical_round_trip(tmp_path):
    trace = read_canonical_trace(write_csv(tmp_path / "t.csv", ROWS))
    write_fta_trace(trace, tmp_path / "t.tab")
    back = read_fta_trace(tmp_path / "t.tab")
    assert isinstance(back, FtaTrace)
    assert back.origin == 0.0
    assert as_dict(back) == ROWS
    # the gaps are written as unavailable events: a before nothing (starts at 0), b from 0
    lines = (tmp_path / "t.tab").read_text().splitlines()
    assert lines[0].split("\t") == list(FTA_COLUMNS)
    b_events = [line.split("\t") for line in lines[1:] if line.split("\t")[2] == "b"]
    assert [(f[5], f[6], f[7]) for f in b_events] == [
        ("0", "0", "5"),
        ("1", "5", "6"),
        ("0", "6", "6.5"),
        ("1", "6.5", "9.001"),
        ("0", "9.001", "50"),
        ("1", "50", "70"),
    ]
    assert [int(line.split("\t")[0]) for line in lines[1:]] == list(range(len(lines) - 1))
    write_canonical_trace(back, tmp_path / "back.csv")
    assert as_dict(read_canonical_trace(tmp_path / "back.csv")) == ROWS


def test_fta_origin_restores_unix_times(tmp_path):
    rows = {"7": [(0.0, 100.0), (160.5, 400.0)], "9": [(50.0, 60.0)]}
    trace = read_canonical_trace(write_csv(tmp_path / "t.csv", rows))
    write_fta_trace(trace, tmp_path / "t.tab", origin=1_100_000_000)
    text = (tmp_path / "t.tab").read_text()
    assert "\t1100000160.5\t" in text
    back = read_fta_trace(tmp_path / "t.tab")
    assert back.origin == 1_100_000_000
    assert back.event_count == 5  # 3 available, gap of 7, leading gap of 9
    assert as_dict(back) == rows
    # FTA -> FTA keeps the Unix times
    convert_trace(tmp_path / "t.tab", tmp_path / "again.tab")
    assert (tmp_path / "again.tab").read_text() == text


def test_fta_writer_keeps_nodes_without_intervals_and_the_span(tmp_path):
    from netsim.traces.intervals import IntervalTrace

    trace = IntervalTrace(
        labels=("x", "y"),
        offsets=np.array([0, 1, 1]),
        start=np.array([2.0]),
        end=np.array([3.0]),
        span=10.0,
    )
    write_fta_trace(trace, tmp_path / "t.tab")
    events = [line.split("\t") for line in (tmp_path / "t.tab").read_text().splitlines()[1:]]
    assert [(f[2], f[5], f[6], f[7]) for f in events] == [
        ("x", "0", "0", "2"),
        ("x", "1", "2", "3"),
        ("x", "0", "3", "10"),
        ("y", "0", "0", "10"),
    ]
    back = read_fta_trace(tmp_path / "t.tab")
    assert back.labels == ("x", "y")
    assert as_dict(back) == {"x": [(2.0, 3.0)], "y": []}


def test_canonical_stunner_canonical_round_trip(tmp_path):
    trace = read_canonical_trace(write_csv(tmp_path / "t.csv", ROWS))
    write_stunner_trace(trace, tmp_path / "t.txt", start_ms=1_400_000_000_000, utc_offset=2)
    lines = (tmp_path / "t.txt").read_text().splitlines()
    by_label = {line.split()[0]: line.split() for line in lines}
    # a is online at 0: firstOnline 1, durations alternate and end with the last interval
    assert by_label["a"] == "a 1 1400000000000 2 10500 9500 10250 750 69000".split()
    assert by_label["b"][:5] == "b 0 1400000000000 2 5000".split()
    assert detect_format(tmp_path / "t.txt") == "stunner"
    back = read_trace(tmp_path / "t.txt")
    assert back.span is None
    assert as_dict(back) == ROWS  # labels come back sorted, intervals exactly


def test_stunner_writer_rounds_to_ms_and_covers_the_span(tmp_path):
    from netsim.traces.intervals import IntervalTrace

    trace = IntervalTrace(
        labels=("u", "v"),
        offsets=np.array([0, 2, 2]),
        start=np.array([1.0004, 2.0]),
        end=np.array([2.0001, 3.0]),  # touch after rounding: merged
        span=5.0,
    )
    write_stunner_trace(trace, tmp_path / "t.txt")
    assert (tmp_path / "t.txt").read_text().splitlines() == [
        "u 0 0 0 1000 2000 2000",
        "v 0 0 0 5000",
    ]


def test_labels_with_whitespace_are_rejected(tmp_path):
    from netsim.traces.intervals import IntervalTrace

    trace = IntervalTrace(
        labels=("a b",), offsets=np.array([0, 1]), start=np.array([0.0]), end=np.array([1.0])
    )
    with pytest.raises(TraceError, match="whitespace"):
        write_stunner_trace(trace, tmp_path / "t.txt")
    with pytest.raises(TraceError, match="whitespace"):
        write_fta_trace(trace, tmp_path / "t.tab")
    assert not (tmp_path / "t.txt").exists() and not (tmp_path / "t.tab").exists()


def test_canonical_csv_parquet_round_trip(tmp_path):
    csv_path = write_csv(tmp_path / "t.csv", ROWS)
    written = convert_trace(csv_path, tmp_path / "t.parquet")
    assert as_dict(written) == ROWS
    assert as_dict(read_canonical_trace(tmp_path / "t.parquet")) == ROWS
    convert_trace(tmp_path / "t.parquet", tmp_path / "back.csv")
    assert as_dict(read_canonical_trace(tmp_path / "back.csv")) == ROWS


def test_real_stunner_round_trip(tmp_path, stunner_trace):
    head = stunner_trace.read_text().splitlines()[:50]
    src = tmp_path / "head.txt"
    src.write_text("\n".join(head) + "\n")
    original = read_trace(src)
    assert original.node_count == len({line.split()[0] for line in head})
    assert original.start.size > 100
    convert_trace(src, tmp_path / "c.csv")
    canonical = read_canonical_trace(tmp_path / "c.csv")
    assert as_dict(canonical) == as_dict(original)
    convert_trace(tmp_path / "c.csv", tmp_path / "back.txt")
    back = read_trace(tmp_path / "back.txt", "stunner")
    assert as_dict(back) == as_dict(original)
    # segmenting through read_trace is read_stunner_segments
    segments = read_trace(src, segment=True)
    reference = read_stunner_segments(src)
    assert segments.labels == reference.labels
    assert np.array_equal(segments.start, reference.start)
    assert np.array_equal(segments.end, reference.end)


# --- the real FTA file -------------------------------------------------------------------


def test_real_fta_file():
    path = require_shared(FTA_TRACE)
    tracemalloc.start()
    try:
        trace = read_fta_trace(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 * 2**20  # streaming: a few MB for a 4 MB file
    assert trace.node_count == 3_577
    assert trace.event_count == 43_325
    assert trace.start.size == 19_874  # the event_type 1 (available) events
    assert trace.origin == 800_920_500  # 1995-05-19 21:55 UTC
    assert trace.span is None
    assert trace.start.min() >= 0
    assert np.all(trace.end > trace.start)
    for node in range(trace.node_count):
        starts, ends = trace.intervals(node)
        assert np.all(starts[1:] >= ends[:-1])
    # availability is the long state: median available event ≈ 280 h
    assert np.median(trace.end - trace.start) > 100 * 3600
    assert detect_format(path) == "fta"


# --- segmentation ------------------------------------------------------------------------


def test_segmentation_of_canonical_trace(tmp_path):
    rows = {"a": [(0.0, 10.0), (20.0, 50.0), (60.0, 100.0)], "b": [(5.0, 30.0)]}
    path = write_csv(tmp_path / "t.csv", rows)
    trace = read_trace(path, segment=True, segment_length=40, segment_step=20)
    assert trace.span == 40
    assert as_dict(trace) == {
        "a@0": [(0.0, 10.0), (20.0, 40.0)],
        "a@20": [(0.0, 30.0)],
        "a@40": [(0.0, 10.0), (20.0, 40.0)],
        "a@60": [(0.0, 40.0)],
        # b's record [0, 30) is shorter than one window: no segment
    }
    short = read_trace(path, segment=True, segment_length=10, segment_step=10.5)
    assert [label for label in short.labels if label.startswith("b")] == ["b@0", "b@10.5"]
    assert as_dict(short)["b@10.5"] == [(0.0, 10.0)]
    with pytest.raises(TraceError, match="positive"):
        read_trace(path, segment=True, segment_length=0)
    with pytest.raises(TraceError, match="whole segment"):
        read_trace(path, segment=True, segment_length=2 * DAY)
    with pytest.raises(TraceError, match="local_time applies only"):
        read_trace(path, local_time=True)


def test_segmentation_uses_a_known_span():
    from netsim.traces.intervals import IntervalTrace

    trace = IntervalTrace(
        labels=("x",), offsets=np.array([0, 1]), start=np.array([1.0]), end=np.array([2.0]), span=6
    )
    assert as_dict(segment_trace(trace, length=3, step=3)) == {"x@0": [(1.0, 2.0)], "x@3": []}


def test_fta_segmentation_and_conversion(tmp_path):
    path = write_fta(
        tmp_path / "t.tab",
        [
            fta_line(0, 5, 0, 1000, 1010),
            fta_line(1, 5, 1, 1010, 1030),
            fta_line(2, 5, 0, 1030, 1040),
            fta_line(3, 5, 1, 1040, 1070),
            fta_line(0, 6, 0, 1020, 1020),
        ],
    )
    trace = read_fta_trace(path)
    assert as_dict(trace) == {"5": [(10.0, 30.0), (40.0, 70.0)], "6": []}
    written = convert_trace(
        path, tmp_path / "s.csv", segment=True, segment_length=40, segment_step=30
    )
    assert as_dict(written) == {"5@0": [(10.0, 30.0)], "5@30": [(10.0, 40.0)]}
    assert as_dict(read_canonical_trace(tmp_path / "s.csv")) == as_dict(written)


def test_fta_segments_lie_inside_the_time_each_node_was_observed(tmp_path):
    """A node that joined late gets no windows before its first event (the FTA LANL trace:
    9,086,372 segments of 2 days when every node's record began at the trace's start,
    1,474,302 inside the observed times)."""
    path = write_fta(
        tmp_path / "t.tab",
        [
            fta_line(0, "a", 1, 1000, 1200),
            fta_line(1, "b", 0, 1120, 1150),
            fta_line(2, "b", 1, 1150, 1200),
        ],
    )
    trace = read_fta_trace(path)
    assert trace.observed_start.tolist() == [0.0, 120.0]
    assert trace.observed_end.tolist() == [200.0, 200.0]
    segments = segment_trace(trace, length=40, step=30)
    assert as_dict(segments) == {
        **{f"a@{w}": [(0.0, 40.0)] for w in (0, 30, 60, 90, 120, 150)},
        "b@120": [(30.0, 40.0)],
        "b@150": [(0.0, 40.0)],
    }


# --- detection ---------------------------------------------------------------------------


def test_detect_format(tmp_path, stunner_trace):
    csv_path = write_csv(tmp_path / "t.csv", ROWS)
    assert detect_format(csv_path) == "canonical"
    trace = read_canonical_trace(csv_path)
    write_canonical_trace(trace, tmp_path / "t.parquet")
    assert detect_format(tmp_path / "t.parquet") == "canonical"
    write_fta_trace(trace, tmp_path / "t.tab")
    assert detect_format(tmp_path / "t.tab") == "fta"
    assert detect_format(stunner_trace) == "stunner"
    # by content under other names
    (tmp_path / "canon.dat").write_text("\n" + csv_path.read_text())
    assert detect_format(tmp_path / "canon.dat") == "canonical"
    (tmp_path / "canon2.dat").write_text(csv_path.read_text())
    assert as_dict(read_trace(tmp_path / "canon2.dat")) == ROWS
    (tmp_path / "fta.dat").write_text((tmp_path / "t.tab").read_text())
    assert detect_format(tmp_path / "fta.dat") == "fta"
    (tmp_path / "pq.bin").write_bytes((tmp_path / "t.parquet").read_bytes())
    assert detect_format(tmp_path / "pq.bin") == "canonical"
    assert as_dict(read_trace(tmp_path / "pq.bin")) == ROWS
    (tmp_path / "s").write_text("\n\nu1 0 1396656000000 2 1000 2000\n")
    assert detect_format(tmp_path / "s") == "stunner"


@pytest.mark.parametrize(
    "content",
    [b"hello world\n", b"", b"\x89PNG\r\n\x1a\n\x00\x00", b"u1 2 0 0 5\n", b"node;start;end\n"],
)
def test_detect_format_rejects_garbage(tmp_path, content):
    path = tmp_path / "garbage.dat"
    path.write_bytes(content)
    with pytest.raises(TraceError) as info:
        detect_format(path)
    message = str(info.value)
    assert str(path) in message
    assert "canonical, stunner, fta" in message


def test_unknown_formats_and_missing_files(tmp_path):
    with pytest.raises(TraceError, match="not found"):
        detect_format(tmp_path / "nope.txt")
    path = write_csv(tmp_path / "t.csv", ROWS)
    with pytest.raises(TraceError, match="allowed: canonical, stunner, fta"):
        read_trace(path, "json")  # type: ignore[arg-type]
    with pytest.raises(TraceError, match=r"extension '\.json'"):
        convert_trace(path, tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()
    convert_trace(path, tmp_path / "t.json", to_format="fta")
    assert detect_format(tmp_path / "t.json") == "fta"


# --- FTA validation ----------------------------------------------------------------------


GOOD = [
    fta_line(0, 1, 0, 100, 110),
    fta_line(1, 1, 1, 110, 200),
    fta_line(0, 2, 1, 150, 300),
]


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("0\t0\t3\t3\t3.0\t1\t400\t500", r"line 5: expected 9 tab-separated columns.*got 8"),
        (fta_line(0, 3, 1, "4o0", 500), r"line 5: event_start_time and event_stop_time must be"),
        (fta_line(0, 3, 1, 400, "nan"), r"line 5: event_start_time and event_stop_time must be"),
        (fta_line("x", 3, 1, 400, 500), r"line 5: event_id must be an integer, got 'x'"),
        (fta_line(0, 3, 2, 400, 500), r"line 5: event_type must be 1 \(available\) or 0"),
        (fta_line(0, 3, 0, 500, 400), r"line 5: event_stop_time 400 is before event_start_time"),
        (fta_line(2, 1, 1, 190, 250), r"line 5: interval .* of node '1' overlaps its previous"),
        (fta_line(2, 1, 1, 0, 50), r"line 5: interval .* of node '1' is earlier than its previous"),
    ],
)
def test_fta_validation_names_the_line(tmp_path, bad_line, message):
    path = write_fta(tmp_path / "bad.tab", [*GOOD, bad_line, fta_line(0, 4, 1, 1, 2)])
    with pytest.raises(TraceError, match=message) as info:
        read_fta_trace(path)
    assert str(info.value).startswith(f"{path}:line 5: ")


def test_fta_overlap_reports_the_first_bad_line(tmp_path):
    lines = [*GOOD, fta_line(2, 2, 1, 250, 260), fta_line(2, 1, 1, 199, 205)]
    path = write_fta(tmp_path / "bad.tab", lines)
    with pytest.raises(TraceError, match=r"bad\.tab:line 5: .* node '2' overlaps .* at line 4"):
        read_fta_trace(path)


def test_fta_header_and_empty_files(tmp_path):
    path = tmp_path / "nohead.tab"
    path.write_text("\n".join(GOOD) + "\n")
    with pytest.raises(
        TraceError, match=r"nohead\.tab:line 1: expected the FTA event_trace header"
    ):
        read_fta_trace(path)
    path = tmp_path / "empty.tab"
    path.write_text(FTA_HEADER + "\n\n")
    with pytest.raises(TraceError, match="no events"):
        read_fta_trace(path)
    path = tmp_path / "blank.tab"
    path.write_text("")
    with pytest.raises(TraceError, match="empty file"):
        read_fta_trace(path)


def test_fta_reader_accepts_the_lanl_layout(tmp_path):
    # space-separated header, blank fields between doubled tabs, padded numbers
    path = tmp_path / "lanl.tab"
    path.write_text(
        "event_id  component_id node_id  platform_id   node_name     event_type   "
        "event_start_time     event_stop_time  event_end_reason\n"
        "    0\t       0\t     655\t    3\t       10.000\t         0\t   \t\t1099755300\t"
        "   \t\t1099906200\t       \t8000\n"
        "    1\t       0\t     655\t    3\t       10.000\t         1\t   \t\t1099906200\t"
        "   \t\t1112096400\t       \t4022\n"
    )
    trace = read_fta_trace(path)
    assert trace.origin == 1099755300
    assert trace.event_count == 2
    assert as_dict(trace) == {"655": [(150900.0, 12341100.0)]}
