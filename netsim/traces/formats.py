"""Trace formats: detection, the Failure Trace Archive reader / writer, a STUNner writer, and
conversion between the canonical, STUNner and FTA formats.

Formats
-------
``canonical``
    ``node,start,end`` online intervals in seconds from 0 (CSV or Parquet), see
    :mod:`netsim.traces.intervals`.
``stunner``
    One line per user segment, ``<user> <firstOnline 0|1> <start, Unix ms> <UTC offset h> d1 d2
    ...`` with durations in ms alternating online / offline (``docs/citations.md``, "The STUNner
    trace").
``fta``
    The Failure Trace Archive ``event_trace`` table: a header line ``event_id component_id
    node_id platform_id node_name event_type event_start_time event_stop_time event_end_reason``
    then one tab-separated line per event, times in Unix seconds. ``event_type`` 1 means the
    node was AVAILABLE during ``[event_start_time, event_stop_time)``, 0 UNAVAILABLE (FTA
    convention). The LANL trace (``docs/citations.md``, "The LANL availability trace"; read from
    ``../shared/data/traces/fta-lanl`` by the tests, never committed) agrees: its type-1 events
    last 280 h at the median (19,874 events, 4,043 node-years in all) and end with a failure
    code in ``event_end_reason``, its type-0 events last 58 min at the median (23,451 events,
    16 node-years) and all end with reason 8000; read that way the median node is available
    99.94% of its observed time, as expected of an HPC cluster.

Reading FTA
-----------
:func:`read_fta_trace` streams the file. Only type-1 (available) events become intervals; the
node label is the ``node_id`` text. Times become seconds after the earliest
``event_start_time`` of any event in the file, which is kept as :attr:`FtaTrace.origin`
(Unix s). Every node named by any event is a trace node, also one that is never available (it
then has no intervals; 951 of the 3,577 LANL nodes have a single unavailable event and nothing
else). Unavailable events are validated but otherwise dropped: what a node did before its first
or after its last available interval is not kept, and ``span`` is ``None``. Available events of
zero length carry no availability and are dropped (the LANL file has none; it has 122
zero-length unavailable events). Fields are separated by tabs; blank fields between doubled
tabs, which the LANL file has, are ignored, and a line without tabs is split on whitespace (the
LANL header is space separated). ``node_id`` may be any token (netsim writes trace labels
there); the other id columns, ``event_type`` and ``event_end_reason`` must be integers.

Writing FTA
-----------
:func:`write_fta_trace` writes, per node, an available (type 1) event for every interval and an
unavailable (type 0) event for every gap: before the first interval when it starts after 0,
between intervals, and after the last one up to ``trace.span`` when the span is known. A node
without intervals gets one unavailable event ``[0, span)``, or ``[0, 0]`` when the span is
unknown, so that it survives the round trip. So reading back a written trace gives the same
intervals (the earliest event then starts at ``origin``). Event ids run 0, 1, 2, ... over the
whole file (the LANL file numbers the events of each node from 0 instead).
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import numpy as np

from netsim.errors import TraceError
from netsim.storage import atomic_write_text
from netsim.traces.intervals import (
    CANONICAL_COLUMNS,
    IntervalTrace,
    LabelCodes,
    check_trace_exists,
    open_trace,
    read_canonical_trace,
    read_stunner_segments,
    read_stunner_users,
    trace_from_rows,
    write_canonical_trace,
)
from netsim.units import DAY

TraceFormat = Literal["canonical", "stunner", "fta"]
TRACE_FORMATS: tuple[str, ...] = get_args(TraceFormat)

FTA_COLUMNS = (
    "event_id",
    "component_id",
    "node_id",
    "platform_id",
    "node_name",
    "event_type",
    "event_start_time",
    "event_stop_time",
    "event_end_reason",
)
FTA_AVAILABLE = 1
FTA_UNAVAILABLE = 0

_EXTENSIONS: dict[str, TraceFormat] = {".csv": "canonical", ".parquet": "canonical", ".tab": "fta"}
_WRITE_EXTENSIONS: dict[str, TraceFormat] = {**_EXTENSIONS, ".txt": "stunner"}
_SNIFF_LIMIT = 1 << 16  # bytes of a line looked at when sniffing


@dataclass(frozen=True, eq=False)
class FtaTrace(IntervalTrace):
    """An :class:`IntervalTrace` read from an FTA file.

    ``origin`` is the Unix time (s) that became time 0 (the earliest ``event_start_time``);
    ``event_count`` the number of events read, available and unavailable;
    ``observed_start`` and ``observed_end`` per node the first event's start and the last
    event's stop (s from the origin): the time the node was observed, up or down, outside
    which segmenting cuts no windows.
    """

    origin: float = 0.0
    event_count: int = 0
    observed_start: np.ndarray | None = None
    observed_end: np.ndarray | None = None


def _allowed() -> str:
    return ", ".join(TRACE_FORMATS)


def _check_format(fmt: str, what: str) -> TraceFormat:
    if fmt not in TRACE_FORMATS:
        raise TraceError(f"{what}: unknown trace format {fmt!r}; allowed: {_allowed()}")
    return fmt  # type: ignore[return-value]


# --- detection ---------------------------------------------------------------------------


def detect_format(path: Path) -> TraceFormat:
    """The format of the trace file ``path``: by extension, else by its first non-empty line.

    ``.csv`` / ``.parquet`` are canonical and ``.tab`` is FTA. Otherwise a Parquet file (magic
    ``PAR1``) or a first line ``node,start,end`` is canonical, a first line starting with
    ``event_id`` is FTA, and a first line of at least 5 whitespace-separated fields whose second
    is 0 or 1 is STUNner.
    """
    path = Path(path)
    check_trace_exists(path)
    known = _EXTENSIONS.get(path.suffix.lower())
    if known is not None:
        return known
    with open_trace(path, text=False) as handle:
        if handle.read(4) == b"PAR1":
            return "canonical"
        handle.seek(0)
        first = b""
        while True:
            raw = handle.readline(_SNIFF_LIMIT)
            if not raw:
                break
            if raw.strip():
                first = raw
                break
    try:
        line = first.decode("utf-8-sig").strip()
    except UnicodeDecodeError:
        line = ""
    fields = line.split()
    if fields and fields[0] == "event_id":
        return "fta"
    if tuple(part.strip() for part in line.split(",")) == CANONICAL_COLUMNS:
        return "canonical"
    if len(fields) >= 5 and fields[1] in ("0", "1"):
        return "stunner"
    shown = line[:60] + ("..." if len(line) > 60 else "")
    raise TraceError(
        f"{path}: cannot tell the trace format from the extension {path.suffix!r} or the first "
        f"line {shown!r}; allowed formats: {_allowed()} (canonical: .csv/.parquet or header "
        "'node,start,end'; fta: .tab or header starting 'event_id'; stunner: lines "
        "'<user> <0|1> <start ms> <UTC offset> <d1> ...')"
    )


# --- FTA ---------------------------------------------------------------------------------


def _fta_fields(raw: str) -> list[str]:
    if "\t" in raw:
        return [field for field in (part.strip() for part in raw.split("\t")) if field]
    return raw.split()


def read_fta_trace(path: Path) -> FtaTrace:
    """Stream an FTA ``event_trace`` file into the available intervals of its nodes.

    See the module docstring for the reading. Errors name the file and line: a missing or
    different header, a wrong number of columns, non-numeric fields, an ``event_type`` other
    than 0 / 1, a stop time before its start, and available intervals of a node that are not in
    time order or overlap.
    """
    path = Path(path)
    check_trace_exists(path)
    try:
        return _read_fta(path)
    except UnicodeDecodeError:
        raise TraceError(f"{path}: not UTF-8 text; an FTA event trace is a text file") from None


def _read_fta(path: Path) -> FtaTrace:
    """Stream the FTA file ``path`` (see :func:`read_fta_trace`): the header, then one
    validated event per line, gathered in file order."""
    rows = _FtaRows()
    header_seen = False
    with open_trace(path) as handle:
        for line_no, raw in enumerate(handle, start=1):
            fields = _fta_fields(raw)
            if not fields:
                continue
            if not header_seen:
                if tuple(fields) != FTA_COLUMNS:
                    raise TraceError(
                        f"{path}:line {line_no}: expected the FTA event_trace header "
                        f"{' '.join(FTA_COLUMNS)!r}, got {raw.strip()[:120]!r}"
                    )
                header_seen = True
                continue
            node, event_type, start, stop = _fta_event(path, line_no, fields)
            rows.add(node, event_type, start, stop, line_no)
    if not header_seen:
        raise TraceError(f"{path}: empty file; expected an FTA event_trace header and events")
    if rows.events == 0:
        raise TraceError(f"{path}: the trace has no events")
    return rows.trace(path)


def _fta_event(path: Path, line_no: int, fields: list[str]) -> tuple[str, int, float, float]:
    """The node, event type, start and stop time of the event line ``line_no`` split into
    ``fields``, checked: the column count, integer ids, finite times in order, type 0 or 1."""
    if len(fields) != len(FTA_COLUMNS):
        raise TraceError(
            f"{path}:line {line_no}: expected {len(FTA_COLUMNS)} tab-separated columns "
            f"({' '.join(FTA_COLUMNS)}), got {len(fields)}"
        )
    event_id, component, node, platform, _name, kind, start_text, stop_text, reason = fields
    for column, text in (
        ("event_id", event_id),
        ("component_id", component),
        ("platform_id", platform),
        ("event_type", kind),
        ("event_end_reason", reason),
    ):
        try:
            int(text)
        except ValueError:
            raise TraceError(
                f"{path}:line {line_no}: {column} must be an integer, got {text!r}"
            ) from None
    try:
        start, stop = float(start_text), float(stop_text)
    except ValueError:
        start = stop = math.nan
    if not (math.isfinite(start) and math.isfinite(stop)):
        raise TraceError(
            f"{path}:line {line_no}: event_start_time and event_stop_time must be "
            f"numbers (Unix seconds), got {start_text!r}, {stop_text!r}"
        )
    if stop < start:
        raise TraceError(
            f"{path}:line {line_no}: event_stop_time {stop_text} is before "
            f"event_start_time {start_text}"
        )
    event_type = int(kind)
    if event_type not in (FTA_AVAILABLE, FTA_UNAVAILABLE):
        raise TraceError(
            f"{path}:line {line_no}: event_type must be {FTA_AVAILABLE} (available) or "
            f"{FTA_UNAVAILABLE} (unavailable), got {kind!r}"
        )
    return node, event_type, start, stop


class _FtaRows:
    """The events of an FTA file as they are read: the available intervals (node code, start,
    end, line), each node's observed period, the earliest start (``origin``) and the count."""

    def __init__(self) -> None:
        self.names = LabelCodes()
        self.codes = array("q")
        self.starts = array("d")
        self.ends = array("d")
        self.lines = array("q")
        self.observed_start = array("d")  # per node code
        self.observed_end = array("d")
        self.origin = math.inf
        self.events = 0

    def add(self, node: str, event_type: int, start: float, stop: float, line_no: int) -> None:
        """Count a validated event; keep it as an interval when available and not empty."""
        self.events += 1
        self.origin = min(self.origin, start)
        code = self.names.code(node)
        if code == len(self.observed_start):  # a node seen for the first time
            self.observed_start.append(start)
            self.observed_end.append(stop)
        else:
            self.observed_start[code] = min(self.observed_start[code], start)
            self.observed_end[code] = max(self.observed_end[code], stop)
        if event_type == FTA_AVAILABLE and stop > start:
            self.codes.append(code)
            self.starts.append(start)
            self.ends.append(stop)
            self.lines.append(line_no)

    def trace(self, path: Path) -> FtaTrace:
        """The trace of the events read, times in seconds after ``origin``."""
        origin = self.origin
        packed = trace_from_rows(
            np.frombuffer(self.codes, dtype=np.int64),
            self.names.labels,
            np.frombuffer(self.starts, dtype=np.float64) - origin,
            np.frombuffer(self.ends, dtype=np.float64) - origin,
            np.frombuffer(self.lines, dtype=np.int64),
            path=path,
            unit="line",
        )
        return FtaTrace(
            labels=packed.labels,
            offsets=packed.offsets,
            start=packed.start,
            end=packed.end,
            span=None,
            source=packed.source,
            origin=float(origin),
            event_count=self.events,
            observed_start=np.frombuffer(self.observed_start, dtype=np.float64) - origin,
            observed_end=np.frombuffer(self.observed_end, dtype=np.float64) - origin,
        )


def _number(value: float) -> str:
    """An integer when ``value`` is whole, else the shortest exact decimal."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _check_labels(trace: IntervalTrace, path: Path, what: str) -> None:
    for label in trace.labels:
        if not label or label != "".join(label.split()):
            raise TraceError(
                f"{path}: node label {label!r} is empty or contains whitespace; the {what} "
                "format separates fields by whitespace"
            )


def write_fta_trace(trace: IntervalTrace, path: Path, *, origin: float = 0.0) -> None:
    """Write ``trace`` as an FTA ``event_trace`` file (tab separated), atomically.

    Times are ``origin`` + the trace's seconds. See the module docstring for the events written.
    """
    path = Path(path)
    _check_labels(trace, path, "FTA")
    out = ["\t".join(FTA_COLUMNS)]
    event_id = 0

    def event(label: str, kind: int, start: float, stop: float) -> None:
        nonlocal event_id
        out.append(
            f"{event_id}\t0\t{label}\t0\t{label}\t{kind}\t{_number(origin + start)}\t"
            f"{_number(origin + stop)}\t0"
        )
        event_id += 1

    for node, label in enumerate(trace.labels):
        starts, ends = trace.intervals(node)
        starts_l, ends_l = starts.tolist(), ends.tolist()
        if not starts_l:
            event(label, FTA_UNAVAILABLE, 0.0, trace.span or 0.0)
            continue
        if starts_l[0] > 0:
            event(label, FTA_UNAVAILABLE, 0.0, starts_l[0])
        for k, (start, end) in enumerate(zip(starts_l, ends_l, strict=True)):
            event(label, FTA_AVAILABLE, start, end)
            following = starts_l[k + 1] if k + 1 < len(starts_l) else trace.span
            if following is not None and following > end:
                event(label, FTA_UNAVAILABLE, end, following)
    atomic_write_text(path, "\n".join(out) + "\n")


# --- STUNner -----------------------------------------------------------------------------


def write_stunner_trace(
    trace: IntervalTrace, path: Path, *, start_ms: int = 0, utc_offset: float = 0
) -> None:
    """Write ``trace`` in the STUNner format, one line per trace node, atomically.

    A node's line covers ``[0, span)`` (``trace.span``, or the node's last interval end when the
    span is unknown) with durations in whole ms, rounded; intervals that touch after rounding
    are merged and intervals that round to nothing vanish. Every line starts at ``start_ms``
    (Unix ms) with UTC offset ``utc_offset`` (hours).
    """
    path = Path(path)
    _check_labels(trace, path, "STUNner")
    out: list[str] = []
    for node, label in enumerate(trace.labels):
        starts, ends = trace.intervals(node)
        s = np.rint(starts * 1000.0).astype(np.int64)
        e = np.rint(ends * 1000.0).astype(np.int64)
        keep = e > s
        s, e = s[keep], e[keep]
        if trace.span is not None:
            span_ms = round(trace.span * 1000.0)
        else:
            span_ms = int(e[-1]) if e.size else 0
        if e.size and e[-1] > span_ms:
            raise TraceError(
                f"{path}: node {label!r} is online until {e[-1] / 1000} s, after the trace "
                f"span {trace.span} s"
            )
        if s.size > 1:  # merge intervals that touch
            new_run = np.concatenate([[True], s[1:] > e[:-1]])
            last_of_run = np.concatenate([new_run[1:], [True]])
            s, e = s[new_run], e[last_of_run]
        bounds = np.empty(2 * s.size + 2, dtype=np.int64)
        bounds[0] = 0
        bounds[1:-1:2] = s
        bounds[2:-1:2] = e
        bounds[-1] = span_ms
        first_online = 1 if s.size and s[0] == 0 else 0
        if first_online:
            bounds = bounds[1:]  # the leading offline period has length 0
        durations = np.diff(bounds)
        if durations.size > 1 and durations[-1] == 0:
            durations = durations[:-1]  # no trailing offline period
        fields = " ".join(map(str, durations.tolist())) or "0"
        out.append(f"{label} {first_online} {int(start_ms)} {_number(utc_offset)} {fields}")
    atomic_write_text(path, "\n".join(out) + "\n" if out else "")


def _stunner_whole_users(path: Path) -> IntervalTrace:
    """One trace node per user, times relative to the user's first observed time.

    STUNner times are whole ms, but :func:`read_stunner_users` gives Unix seconds, where a
    float64 resolves only ~2e-7 s; rounding the differences to whole ms makes them exact.
    """

    def relative(times: np.ndarray, origin: float) -> np.ndarray:
        return np.rint((times - origin) * 1000.0) / 1000.0

    users = read_stunner_users(path)
    counts = [user.online_start.size for user in users]
    offsets = np.zeros(len(users) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    empty = np.zeros(0)
    return IntervalTrace(
        labels=tuple(user.user for user in users),
        offsets=offsets,
        start=np.concatenate([empty] + [relative(u.online_start, u.span_start[0]) for u in users]),
        end=np.concatenate([empty] + [relative(u.online_end, u.span_start[0]) for u in users]),
        span=None,
        source=str(path),
    )


# --- segmentation and dispatch -----------------------------------------------------------


#: Segments :func:`segment_trace` may make: each is a labelled trace node, some 300 bytes at
#: the peak (11.6 million took 3.2 GB and 12 s), so 2·10⁷ are about 6 GB; records 317 years
#: long cut every day are 115,000 segments a node.
MAX_WHOLE_TRACE_SEGMENTS = 2 * 10**7


def segment_trace(
    trace: IntervalTrace, *, length: float = 2 * DAY, step: float = DAY
) -> IntervalTrace:
    """Cut each node's record into windows of ``length`` every ``step``.

    A node's record is the time it was observed when the trace says (an FTA trace: from its
    first event to its last, up or down), else ``[0, trace.span)``, or ``[0, last interval
    end)`` when the span is unknown; windows start at multiples of ``step`` and lie wholly
    inside it (an FTA node that joined the system in year 6 gets no windows before). Each
    window becomes a trace node labelled ``node@start`` (start in s, an integer when whole)
    with its intervals clipped to the window and made relative to its start; the result's
    span is ``length``.
    """
    if not (length > 0 and step > 0):
        raise TraceError(f"{trace.source}: segment length and step must be positive")
    labels: list[str] = []
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    total = 0
    observed_start = getattr(trace, "observed_start", None)
    observed_end = getattr(trace, "observed_end", None)
    for node, label in enumerate(trace.labels):
        on_start, on_end = trace.intervals(node)
        if observed_start is not None and observed_end is not None:
            first = math.ceil(observed_start[node] / step - 1e-9)
            record = float(observed_end[node])
        else:
            first = 0
            record = trace.span if trace.span is not None else (on_end[-1] if on_end.size else 0.0)
        count = int(np.floor((record - length) / step + 1e-9)) + 1 - first
        if count <= 0:
            continue
        total += count
        if total > MAX_WHOLE_TRACE_SEGMENTS:
            raise TraceError(
                f"{trace.source}: segments of {length:g} s every {step:g} s cut the trace into "
                f"more than {MAX_WHOLE_TRACE_SEGMENTS:.0e} segments (the records are too long): "
                "convert a shorter part of it"
            )
        window_starts = step * (first + np.arange(count))
        # rows lo[w]:hi[w] of the node meet window w; expand them into (window, row) pairs
        lo = np.searchsorted(on_end, window_starts, side="right")
        hi = np.searchsorted(on_start, window_starts + length, side="left")
        pieces = hi - lo
        window = np.repeat(np.arange(count), pieces)
        first_piece = np.cumsum(pieces) - pieces
        row = lo[window] + np.arange(window.size) - first_piece[window]
        w0 = window_starts[window]
        s = np.clip(on_start[row], w0, w0 + length) - w0
        e = np.clip(on_end[row], w0, w0 + length) - w0
        keep = e > s
        labels.extend(f"{label}@{_number(w)}" for w in window_starts.tolist())
        starts.append(s[keep])
        ends.append(e[keep])
        counts.append(np.bincount(window[keep], minlength=count))
    if not labels:
        raise TraceError(f"{trace.source}: no node was observed for a whole segment of {length} s")
    return IntervalTrace.from_pieces(
        labels, starts, ends, np.concatenate(counts), span=length, source=trace.source
    )


def read_trace(
    path: Path,
    fmt: TraceFormat | None = None,
    *,
    segment: bool = False,
    segment_length: float = 2 * DAY,
    segment_step: float = DAY,
    local_time: bool = False,
) -> IntervalTrace:
    """Read a trace in any format (``fmt``, or :func:`detect_format`).

    STUNner without ``segment``: one trace node per user covering the user's whole record,
    times relative to the user's first observed time, span ``None``; with ``segment``:
    :func:`~netsim.traces.intervals.read_stunner_segments` (``local_time`` applies there only).
    Canonical and FTA with ``segment``: :func:`segment_trace`.
    """
    path = Path(path)
    fmt = detect_format(path) if fmt is None else _check_format(fmt, str(path))
    if fmt == "stunner":
        if segment:
            return read_stunner_segments(
                path, length=segment_length, step=segment_step, local_time=local_time
            )
        return _stunner_whole_users(path)
    if local_time:
        raise TraceError(
            f"{path}: local_time applies only to segmenting a STUNner trace (it has UTC offsets); "
            f"this trace is {fmt}"
        )
    trace = (
        read_canonical_trace(path, any_extension=True)
        if fmt == "canonical"
        else read_fta_trace(path)
    )
    if segment:
        return segment_trace(trace, length=segment_length, step=segment_step)
    return trace


def _output_format(path: Path, fmt: str | None) -> TraceFormat:
    if fmt is not None:
        return _check_format(fmt, str(path))
    known = _WRITE_EXTENSIONS.get(path.suffix.lower())
    if known is None:
        raise TraceError(
            f"{path}: cannot tell the output format from the extension {path.suffix!r}; use "
            ".csv or .parquet (canonical), .tab (fta) or .txt (stunner), or give the format "
            f"({_allowed()})"
        )
    return known


def write_trace(trace: IntervalTrace, path: Path, fmt: TraceFormat | None = None) -> None:
    """Write ``trace`` in ``fmt`` or the format of the extension of ``path``.

    An :class:`FtaTrace` written as FTA keeps its origin (its Unix times).
    """
    path = Path(path)
    fmt = _output_format(path, fmt)
    if fmt == "canonical":
        write_canonical_trace(trace, path)
    elif fmt == "fta":
        write_fta_trace(trace, path, origin=getattr(trace, "origin", 0.0))
    else:
        write_stunner_trace(trace, path)


def convert_trace(
    src: Path,
    dst: Path,
    *,
    from_format: TraceFormat | None = None,
    to_format: TraceFormat | None = None,
    segment: bool = False,
    **segment_options: float | bool,
) -> IntervalTrace:
    """Read ``src`` (see :func:`read_trace`) and write it to ``dst`` (see :func:`write_trace`).

    ``segment_options`` are ``segment_length``, ``segment_step`` and ``local_time`` of
    :func:`read_trace`. Returns the trace written.
    """
    unknown = set(segment_options) - {"segment_length", "segment_step", "local_time"}
    if unknown:
        raise TypeError(f"convert_trace: unknown option(s) {sorted(unknown)}")
    to_format = _output_format(Path(dst), to_format)
    trace = read_trace(src, from_format, segment=segment, **segment_options)  # type: ignore[arg-type]
    write_trace(trace, dst, to_format)
    return trace
