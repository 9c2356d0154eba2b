"""Availability traces: the canonical interval format and the STUNner reader.

Canonical format
----------------
A table with three columns, ``node,start,end``: one row per *online* interval of a trace node,
times in seconds from the trace's origin (simulation time 0). ``node`` is any label (integer
or text). For each node the rows must be in time order and must not overlap (``start < end``,
``start >= 0``, and ``start >= end`` of the node's previous row); rows of different nodes may
interleave. A node is offline outside its intervals; a row ``node,,`` (empty start and end)
declares a node that is never online, so that it still counts. Intervals of one node that touch
(``end == next start``) are merged on replay. Stored as CSV with that header (``.csv``) or as
Parquet (``.parquet``) with those column names.

STUNner / Gossip Learning Framework format
------------------------------------------
One line per user-week segment, whitespace separated, no header: ``<userId> <firstOnline 0|1>
<segmentStart, Unix ms> <UTC offset hours> <d1> <d2> ...`` where the durations (ms) alternate online
/ offline starting with the state ``firstOnline`` (``docs/citations.md``, "The STUNner trace").
Hegedűs et al. (2016) §5.1 cut the users' traces into 2-day segments with a one-day overlap and gave
each simulated node its own segment; :func:`cut_segments` does that.
"""

from __future__ import annotations

import csv
import re
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from netsim import files
from netsim.errors import TraceError
from netsim.units import DAY, HOUR

CANONICAL_COLUMNS = ("node", "start", "end")
#: Latest time a trace may give, in seconds from its origin (about 317 years): a later time is
#: a mistake, and the per-hour statistics of such a span could not be held in memory.
MAX_TRACE_SECONDS = 1e10
#: Segments (trace nodes) a trace may be cut into: each is a labelled trace node made in a
#: Python loop (some 20 µs and 300 bytes), so 10⁷ are minutes and 3 GB; the STUNner trace's
#: 2-day segments are some 10⁵. A ``segment_step`` of 1e-6 s asked for 10¹² windows (a 9 TiB
#: array).
MAX_SEGMENTS = 10**7


def too_many_segments(source: str, count: float, length: float, step: float) -> TraceError:
    """The error of a segmentation into ``count`` > :data:`MAX_SEGMENTS` segments."""
    return TraceError(
        f"{source}: segments of {length:g} s every {step:g} s (segment_length, segment_step) "
        f"cut the trace into {count:.3g} segments; at most {MAX_SEGMENTS:.0e}: use a longer "
        "segment_step"
    )


#: Characters a node label may not hold (NUL and the other control characters).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def open_trace(path: Path, *, text: bool = True, newline: str | None = None):
    """Open the trace file ``path`` for streaming: a regular file of at most
    :data:`~netsim.files.MAX_TRACE_BYTES` (a FIFO or device is refused, not waited on)."""
    bound = {"what": "trace file", "limit": files.MAX_TRACE_BYTES, "error": TraceError}
    if text:
        return files.open_text(path, newline=newline, **bound)
    return files.open_regular(path, **bound)


def check_trace_exists(path: Path) -> None:
    """A trace path must exist (:func:`open_trace` says what is wrong with one that is not a
    regular file)."""
    if not path.exists():
        raise TraceError(f"{path}: trace file not found")


def _check_labels(labels: list[str], codes: np.ndarray, where: np.ndarray, path, unit) -> None:
    """Refuse a node label holding a control character (a NUL byte, a line break): it
    cannot be shown, and most likely comes from a damaged file."""
    for code, label in enumerate(labels):
        found = _CONTROL.search(label)
        if found is not None:
            rows = np.flatnonzero(codes == code)
            at = f":{unit} {where[rows[0]]}" if rows.size else ""
            raise TraceError(
                f"{path}{at}: node label {label!r} holds the control character "
                f"U+{ord(found.group()):04X}; a label is printable text"
            )


@dataclass(frozen=True, eq=False)
class IntervalTrace:
    """Online intervals of trace nodes in CSR form: node j owns rows offsets[j]:offsets[j+1].

    ``span`` is the length of time each trace node was observed (e.g. 2 days for a STUNner
    segment), or ``None`` when the trace does not say (then a node is offline after its last
    interval).
    """

    labels: tuple[str, ...]
    offsets: np.ndarray
    start: np.ndarray
    end: np.ndarray
    span: float | None = None
    source: str = "<memory>"

    @property
    def node_count(self) -> int:
        return len(self.labels)

    def intervals(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) arrays of trace node ``node``."""
        lo, hi = self.offsets[node], self.offsets[node + 1]
        return self.start[lo:hi], self.end[lo:hi]

    def node_index(self) -> np.ndarray:
        """The trace node of every interval row."""
        return np.repeat(np.arange(self.node_count), np.diff(self.offsets))

    def starting_at(self, start: float) -> IntervalTrace:
        """The trace from ``start`` seconds on, as time 0: intervals clipped at ``start`` and
        shifted, those that ended before it dropped, the span shortened (every trace node
        kept, so the assignment of trace nodes to nodes does not change)."""
        if start <= 0:
            return self
        end = self.end - start
        keep = end > 0
        counts = np.bincount(self.node_index()[keep], minlength=self.node_count)
        offsets = np.zeros(self.node_count + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        span = None if self.span is None else max(self.span - start, 0.0)
        return IntervalTrace(
            labels=self.labels,
            offsets=offsets,
            start=np.maximum(self.start[keep] - start, 0.0),
            end=end[keep],
            span=span,
            source=self.source,
        )

    @classmethod
    def from_pieces(
        cls,
        labels: list[str],
        starts: list[np.ndarray],
        ends: list[np.ndarray],
        counts: np.ndarray,
        *,
        span: float | None,
        source: str,
    ) -> IntervalTrace:
        """Assemble a trace from interval arrays in node order, ``counts[j]`` of them for
        node ``labels[j]`` (as the segment cutters produce them)."""
        offsets = np.zeros(len(labels) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return cls(
            labels=tuple(labels),
            offsets=offsets,
            start=np.concatenate(starts) if starts else np.zeros(0),
            end=np.concatenate(ends) if ends else np.zeros(0),
            span=span,
            source=source,
        )


class LabelCodes:
    """Trace-node labels in order of first appearance, each with its integer code."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.labels: list[str] = []

    def code(self, label: str) -> int:
        """The code of ``label``, assigned on first sight."""
        code = self.codes.get(label)
        if code is None:
            code = self.codes[label] = len(self.labels)
            self.labels.append(label)
        return code


def trace_from_rows(
    codes: np.ndarray,
    labels: list[str],
    start: np.ndarray,
    end: np.ndarray,
    where: np.ndarray,
    *,
    path: Path,
    unit: str,
    span: float | None = None,
) -> IntervalTrace:
    """Validate rows (node code, start, end) and pack them per node.

    ``where`` gives each row's line (or row) number for error messages, ``unit`` says which.
    """
    bad = np.flatnonzero(~(np.isfinite(start) & np.isfinite(end)))
    if bad.size:
        raise TraceError(f"{path}:{unit} {where[bad[0]]}: start and end must be finite numbers")
    bad = np.flatnonzero(start < 0)
    if bad.size:
        raise TraceError(
            f"{path}:{unit} {where[bad[0]]}: negative start {start[bad[0]]}; times are >= 0 s"
        )
    bad = np.flatnonzero(end > MAX_TRACE_SECONDS)
    if bad.size:
        raise TraceError(
            f"{path}:{unit} {where[bad[0]]}: time {end[bad[0]]:g} s is past the latest time a "
            f"trace may give, {MAX_TRACE_SECONDS:g} s (about 317 years after its origin)"
        )
    _check_labels(labels, codes, where, path, unit)
    bad = np.flatnonzero(end <= start)
    if bad.size:
        k = bad[0]
        raise TraceError(
            f"{path}:{unit} {where[k]}: interval end {end[k]} is not after its start {start[k]}"
        )
    order = np.argsort(codes, kind="stable")  # per node, rows keep file order
    codes_s, start_s, end_s, where_s = codes[order], start[order], end[order], where[order]
    same = codes_s[1:] == codes_s[:-1]
    # a row earlier than its predecessor also starts before the predecessor's end
    bad = np.flatnonzero(same & (start_s[1:] < end_s[:-1]))
    if bad.size:
        k = int(bad[np.argmin(where_s[bad + 1])])  # the first offending line of the file
        label = labels[codes_s[k + 1]]
        what = "is earlier than" if start_s[k + 1] < start_s[k] else "overlaps"
        raise TraceError(
            f"{path}:{unit} {where_s[k + 1]}: interval [{start_s[k + 1]}, {end_s[k + 1]}) of node "
            f"{label!r} {what} its previous interval [{start_s[k]}, {end_s[k]}) at {unit} "
            f"{where_s[k]}; each node's intervals must be in time order and must not overlap"
        )
    offsets = np.zeros(len(labels) + 1, dtype=np.int64)
    np.cumsum(np.bincount(codes, minlength=len(labels)), out=offsets[1:])
    return IntervalTrace(
        labels=tuple(labels),
        offsets=offsets,
        start=start_s.astype(np.float64),
        end=end_s.astype(np.float64),
        span=span,
        source=str(path),
    )


def read_canonical_trace(path: Path, *, any_extension: bool = False) -> IntervalTrace:
    """Read a canonical trace (``.csv`` or ``.parquet``); errors name the file and line / row.

    With ``any_extension`` a file of another name is read too: Parquet when it starts with the
    Parquet magic bytes, CSV otherwise.
    """
    path = Path(path)
    check_trace_exists(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet") and not any_extension:
        raise TraceError(f"{path}: unknown trace file type {path.suffix!r}; use .csv or .parquet")
    if suffix == ".parquet" or (suffix != ".csv" and _starts_with(path, b"PAR1")):
        return _read_canonical_parquet(path)
    try:
        fast = _read_canonical_csv_arrow(path)
        return fast if fast is not None else _read_canonical_csv(path)
    except UnicodeDecodeError:
        raise TraceError(f"{path}: not UTF-8 text; a canonical trace is a UTF-8 CSV") from None


def _starts_with(path: Path, magic: bytes) -> bool:
    with open_trace(path, text=False) as handle:
        return handle.read(len(magic)) == magic


def _read_canonical_csv_arrow(path: Path) -> IntervalTrace | None:
    """The canonical CSV read by pyarrow's streaming reader (about ten times faster than the
    line-by-line reader, in compact columns); None when the file is anything but a clean
    trace — then :func:`_read_canonical_csv` reads it again, and its error names the line.
    Both give the same trace for a clean file (labels stripped, in order of first sight)."""
    with open_trace(path, text=False) as handle:
        return _read_csv_arrow(path, handle)


def _read_csv_arrow(path: Path, handle) -> IntervalTrace | None:
    """:func:`_read_canonical_csv_arrow` on the opened file ``handle``."""
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    strings = {name: pa.string() for name in CANONICAL_COLUMNS}
    try:
        reader = pacsv.open_csv(
            handle,
            read_options=pacsv.ReadOptions(block_size=1 << 24),
            parse_options=pacsv.ParseOptions(ignore_empty_lines=False),
            convert_options=pacsv.ConvertOptions(
                column_types=strings, strings_can_be_null=False, include_columns=None
            ),
        )
        if tuple(reader.schema.names) != CANONICAL_COLUMNS:
            return None
        table = reader.read_all()
    except (pa.ArrowException, OSError, ValueError):
        return None
    if table.num_rows == 0:
        return None
    node = pc.utf8_trim_whitespace(table.column("node"))
    start_text = pc.utf8_trim_whitespace(table.column("start"))
    end_text = pc.utf8_trim_whitespace(table.column("end"))
    never = _blank(start_text) & _blank(end_text)
    if _blank(node).any():
        return None  # blank lines and empty labels: the line reader decides
    online = ~never
    mask = pa.Array.from_buffers(
        pa.bool_(), online.size, [None, pa.py_buffer(np.packbits(online, bitorder="little"))]
    )
    try:
        encoded = pc.dictionary_encode(node).combine_chunks()
        start = _values(pc.cast(pc.filter(start_text, mask), pa.float64()), np.float64)
        end = _values(pc.cast(pc.filter(end_text, mask), pa.float64()), np.float64)
    except (pa.ArrowException, ValueError):
        return None
    labels = encoded.dictionary.to_pylist()
    codes = _values(encoded.indices, np.int32).astype(np.int64)
    rows = np.flatnonzero(online)
    try:
        return trace_from_rows(codes[rows], labels, start, end, rows + 2, path=path, unit="line")
    except TraceError:
        return None  # the line reader names the line (this one cannot see quoted newlines)


def _values(column: pa.Array | pa.ChunkedArray, dtype: type[np.generic]) -> np.ndarray:
    """A numeric column's values as numpy, read from its Arrow buffer when it has no nulls
    (``to_numpy`` goes through pyarrow's pandas shim, which imports pandas, some 40 MiB, into
    a run that reads a trace; ``tests/test_footprint.py``)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    numpy_type = np.dtype(dtype)
    if array.null_count or array.type != pa.from_numpy_dtype(numpy_type):
        return np.asarray(array.to_numpy(zero_copy_only=False), dtype=numpy_type)
    return np.frombuffer(
        array.buffers()[1], dtype=numpy_type, count=len(array),
        offset=array.offset * numpy_type.itemsize,
    )  # fmt: skip


def _blank(text: pa.ChunkedArray) -> np.ndarray:
    """Which strings of ``text`` are empty."""
    import pyarrow.compute as pc

    return _values(pc.utf8_length(text), np.int32) == 0


def _read_canonical_csv(path: Path) -> IntervalTrace:
    # typed buffers, not Python lists: a large trace streams into compact arrays
    codes = array("q")
    names = LabelCodes()
    starts = array("d")
    ends = array("d")
    lines = array("q")
    with open_trace(path, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header) != CANONICAL_COLUMNS:
            raise TraceError(
                f"{path}:line 1: header must be 'node,start,end', got {','.join(header or [])!r}"
            )
        for row in reader:
            line = reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if len(row) != 3:
                raise TraceError(
                    f"{path}:line {line}: expected 3 columns (node,start,end), got {len(row)}"
                )
            label = row[0].strip()
            if not row[1].strip() and not row[2].strip():  # a node that is never online
                names.code(label)
                continue
            try:
                start, end = float(row[1]), float(row[2])
            except ValueError:
                raise TraceError(
                    f"{path}:line {line}: start and end must be numbers (seconds), got "
                    f"{row[1]!r}, {row[2]!r}"
                ) from None
            codes.append(names.code(label))
            starts.append(start)
            ends.append(end)
            lines.append(line)
    if not names.labels:
        raise TraceError(f"{path}: the trace has no nodes")
    return trace_from_rows(
        np.frombuffer(codes, dtype=np.int64),
        names.labels,
        np.frombuffer(starts, dtype=np.float64),
        np.frombuffer(ends, dtype=np.float64),
        np.frombuffer(lines, dtype=np.int64),
        path=path,
        unit="line",
    )


def _read_canonical_parquet(path: Path) -> IntervalTrace:
    try:
        with open_trace(path, text=False) as handle:
            table = pq.read_table(handle)
    except (pa.ArrowException, OSError) as exc:
        raise TraceError(f"{path}: not a readable Parquet file: {exc}") from None
    missing = [c for c in CANONICAL_COLUMNS if c not in table.column_names]
    if missing:
        raise TraceError(
            f"{path}: missing column(s) {missing}; a canonical trace has columns node, start, end"
        )
    if table.num_rows == 0:
        raise TraceError(f"{path}: the trace has no intervals")
    nodes = table.column("node").to_pylist()
    if None in nodes:
        raise TraceError(
            f"{path}:row {nodes.index(None)}: the node label is null; every row names its node"
        )
    try:
        start = table.column("start").to_numpy(zero_copy_only=False).astype(np.float64)
        end = table.column("end").to_numpy(zero_copy_only=False).astype(np.float64)
    except (pa.ArrowException, ValueError, TypeError):
        raise TraceError(f"{path}: columns start and end must be numeric seconds") from None
    silent = np.isnan(start) & np.isnan(end)  # null start and end: a never-online node
    names = LabelCodes()
    codes = np.array([names.code(str(node)) for node in nodes], dtype=np.int64)
    rows = np.flatnonzero(~silent)
    return trace_from_rows(
        codes[rows], names.labels, start[rows], end[rows], rows, path=path, unit="row"
    )


def write_canonical_trace(trace: IntervalTrace, path: Path) -> None:
    """Write ``trace`` in the canonical format (CSV or Parquet by extension), atomically."""
    from netsim.storage import atomic_write_bytes

    path = Path(path)
    nodes = np.asarray(trace.labels, dtype=object)[trace.node_index()]
    if path.suffix.lower() == ".parquet":
        silent = [trace.labels[j] for j in np.flatnonzero(np.diff(trace.offsets) == 0)]
        table = pa.table(
            {
                "node": pa.array(silent + nodes.tolist(), pa.string()),
                "start": pa.array([None] * len(silent) + trace.start.tolist(), pa.float64()),
                "end": pa.array([None] * len(silent) + trace.end.tolist(), pa.float64()),
            }
        )
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        atomic_write_bytes(path, sink.getvalue().to_pybytes())
        return
    rows = ["node,start,end"]
    silent = np.flatnonzero(np.diff(trace.offsets) == 0)
    rows.extend(f"{trace.labels[j]},," for j in silent.tolist())
    rows.extend(
        f"{node},{s!r},{e!r}"
        for node, s, e in zip(nodes, trace.start.tolist(), trace.end.tolist(), strict=True)
    )
    atomic_write_bytes(path, ("\n".join(rows) + "\n").encode("utf-8"))


# --- STUNner -----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class StunnerUser:
    """One user's whole record: online intervals and observed spans, Unix seconds."""

    user: str
    online_start: np.ndarray
    online_end: np.ndarray
    span_start: np.ndarray  # contiguous observed spans (consecutive lines merged)
    span_end: np.ndarray
    span_utc_offset: np.ndarray  # UTC offset (hours) on the first line of each span


#: Bounds of a STUNner line: UTC offsets in hours (real ones lie in [-12, 14]) and Unix
#: milliseconds (10**15 ms is in the year 33658; beyond it float seconds lose milliseconds).
MAX_UTC_OFFSET_H = 24.0
MAX_TRACE_MS = 10**15


def read_stunner_users(path: Path) -> list[StunnerUser]:
    """Parse a STUNner trace into per-user records (see :func:`_parse_stunner`)."""
    try:
        return _parse_stunner(Path(path))
    except UnicodeDecodeError:
        raise TraceError(f"{path}: not UTF-8 text; a STUNner trace is a text file") from None


def _parse_stunner(path: Path) -> list[StunnerUser]:
    """Parse a STUNner trace into per-user records (sorted by user id).

    Validation: at least 5 fields per line, ``firstOnline`` in {0, 1}, integer start (ms),
    numeric UTC offset, non-negative integer durations, and a user's lines in time order
    without overlap. Errors name the file and line.
    """
    path = Path(path)
    check_trace_exists(path)
    per_user: dict[str, list[tuple[int, int, float, np.ndarray, int]]] = {}
    with open_trace(path) as handle:
        for line_no, raw in enumerate(handle, start=1):
            fields = raw.split()
            if not fields:
                continue
            if len(fields) < 5:
                raise TraceError(
                    f"{path}:line {line_no}: expected '<user> <firstOnline 0|1> <start ms> "
                    f"<UTC offset h> <d1> ...' (at least 5 fields), got {len(fields)}"
                )
            user, first, start_text, offset_text = fields[:4]
            if first not in ("0", "1"):
                raise TraceError(
                    f"{path}:line {line_no}: firstOnline must be 0 or 1, got {first!r}"
                )
            try:
                start_ms = int(start_text)
                offset_h = float(offset_text)
                durations = np.array(fields[4:], dtype=np.int64)
            except (ValueError, OverflowError):
                raise TraceError(
                    f"{path}:line {line_no}: start and durations must be integers (ms) below "
                    "2**63 and the UTC offset a number of hours"
                ) from None
            if (durations < 0).any():
                raise TraceError(f"{path}:line {line_no}: negative duration; durations are >= 0 ms")
            if not -MAX_UTC_OFFSET_H <= offset_h <= MAX_UTC_OFFSET_H:  # also refuses NaN
                raise TraceError(
                    f"{path}:line {line_no}: UTC offset {offset_text!r}; an offset is a number of "
                    f"hours in [-{MAX_UTC_OFFSET_H}, {MAX_UTC_OFFSET_H}]"
                )
            # the line's end in ms, in Python integers: int64 sums would wrap silently
            if not 0 <= start_ms <= MAX_TRACE_MS - sum(int(d) for d in durations):
                raise TraceError(
                    f"{path}:line {line_no}: start {start_text} ms plus the durations ends past "
                    f"{MAX_TRACE_MS} ms (year 33658) or starts before 0; times are Unix ms"
                )
            per_user.setdefault(user, []).append(
                (start_ms, int(first), offset_h, durations, line_no)
            )
    if not per_user:
        raise TraceError(f"{path}: the trace has no lines")
    return [_stunner_user(path, user, per_user[user]) for user in sorted(per_user)]


def _stunner_user(
    path: Path, user: str, lines: list[tuple[int, int, float, np.ndarray, int]]
) -> StunnerUser:
    lines.sort(key=lambda item: item[0])
    on_start: list[np.ndarray] = []
    on_end: list[np.ndarray] = []
    spans: list[list[float]] = []
    prev_end_ms: int | None = None
    prev_line = 0
    for start_ms, first, offset_h, durations, line_no in lines:
        if prev_end_ms is not None and start_ms < prev_end_ms:
            raise TraceError(
                f"{path}:line {line_no}: segment of user {user!r} starts before the end of its "
                f"segment on line {prev_line}; a user's segments must not overlap"
            )
        bounds = start_ms + np.concatenate([[0], np.cumsum(durations)])
        first_online_index = 0 if first == 1 else 1
        on_start.append(bounds[first_online_index:-1:2])
        on_end.append(bounds[first_online_index + 1 :: 2])
        end_ms = int(bounds[-1])
        if spans and prev_end_ms == start_ms:
            spans[-1][1] = end_ms / 1000.0
        else:
            spans.append([start_ms / 1000.0, end_ms / 1000.0, offset_h])
        prev_end_ms, prev_line = end_ms, line_no
    starts = np.concatenate(on_start) / 1000.0
    ends = np.concatenate(on_end) / 1000.0
    keep = ends > starts  # zero-length online periods carry no availability
    starts, ends = _merge_touching(starts[keep], ends[keep])
    span_array = np.array(spans, dtype=np.float64).reshape(-1, 3)
    return StunnerUser(
        user=user,
        online_start=starts,
        online_end=ends,
        span_start=span_array[:, 0],
        span_end=span_array[:, 1],
        span_utc_offset=span_array[:, 2],
    )


def _merge_touching(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge sorted, non-overlapping intervals that touch (end == next start)."""
    if start.size < 2:
        return start, end
    new_run = np.concatenate([[True], start[1:] > end[:-1]])
    run_id = np.cumsum(new_run) - 1
    merged_end = np.full(int(run_id[-1]) + 1, -np.inf)
    np.maximum.at(merged_end, run_id, end)
    return start[new_run], merged_end


def cut_segments(
    users: list[StunnerUser],
    *,
    length: float = 2 * DAY,
    step: float = DAY,
    local_time: bool = False,
    source: str = "<memory>",
) -> IntervalTrace:
    """Cut users' records into windows of ``length`` every ``step`` (Hegedűs et al. §5.1).

    Windows lie wholly inside one observed span of a user and start at 00:00 UTC (the STUNner
    lines start at midnight UTC), or, with ``local_time``, at the user's local midnight using the
    UTC offset on the first line of the span (daylight-saving changes inside a span, at most an
    hour, are ignored). Each window becomes one trace node labelled ``user@start`` (Unix s);
    its intervals are clipped to the window and made relative to its start.
    """
    if length <= 0 or step <= 0:
        raise TraceError(f"{source}: segment length and step must be positive")
    labels: list[str] = []
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    counts: list[int] = []
    windows: list[tuple[StunnerUser, float, int]] = []
    total = 0.0
    for user in users:
        for span_start, span_end, offset_h in zip(
            user.span_start, user.span_end, user.span_utc_offset, strict=True
        ):
            first = span_start
            if local_time:
                # first local midnight at or after the span's start
                shift = (-offset_h * HOUR) % DAY
                first = span_start + ((shift - span_start) % DAY)
            # count windows in whole steps: a tolerance added to Unix seconds would vanish
            exact = np.floor((span_end - length - first) / step + 1e-9) + 1
            if exact <= 0:
                continue
            total += float(exact)
            if total > MAX_SEGMENTS:
                raise too_many_segments(source, total, length, step)
            windows.append((user, float(first), int(exact)))
    for user, first, count in windows:
        window_starts = first + step * np.arange(count)
        lo = np.searchsorted(user.online_end, window_starts, side="right")
        hi = np.searchsorted(user.online_start, window_starts + length, side="left")
        for w0, a, b in zip(window_starts.tolist(), lo.tolist(), hi.tolist(), strict=True):
            # STUNner times are whole milliseconds: rounding removes the float noise of
            # subtracting Unix seconds
            s = np.round(np.clip(user.online_start[a:b], w0, w0 + length) - w0, 3)
            e = np.round(np.clip(user.online_end[a:b], w0, w0 + length) - w0, 3)
            keep = e > s
            labels.append(f"{user.user}@{int(w0)}")
            starts.append(s[keep])
            ends.append(e[keep])
            counts.append(int(keep.sum()))
    if not labels:
        raise TraceError(f"{source}: no user was observed for a whole segment of {length} s")
    return IntervalTrace.from_pieces(
        labels, starts, ends, np.array(counts, dtype=np.int64), span=length, source=source
    )


def read_stunner_segments(
    path: Path, *, length: float = 2 * DAY, step: float = DAY, local_time: bool = False
) -> IntervalTrace:
    """Read a STUNner trace and cut it into segments (see :func:`cut_segments`)."""
    return cut_segments(
        read_stunner_users(path),
        length=length,
        step=step,
        local_time=local_time,
        source=str(path),
    )
