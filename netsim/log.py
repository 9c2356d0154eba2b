"""Event-log tables with fixed schemas, written to Parquet in chunks and atomically.

Logs are tables (``docs/architecture.md``, principle 6). Each event kind has a
:class:`TableSchema`; a component registers the tables it writes with :meth:`EventLog.table` and
appends rows positionally in schema order. Rows are buffered and flushed as Parquet row groups
to ``<name>.parquet.tmp``; :meth:`EventLog.close` renames each finished file into place, so a
run that is interrupted never leaves a ``.parquet`` file that looks complete.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from netsim.errors import SimulationError
from netsim.lazy import lazy_module
from netsim.storage import fsync_file

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

F64 = pa.float64()
I64 = pa.int64()
I32 = pa.int32()
BOOL = pa.bool_()
STR = pa.string()


#: What a table's rows are, which decides how ``collect`` and ``report`` read it:
#: ``events`` (one row per thing that happened), ``samples`` (the state at sampling times),
#: ``rounds`` (one row per round or checkpoint), ``summary`` (one row for the run),
#: ``ledger`` (privacy accounting), ``static`` (a fact of the set-up, e.g. an assignment).
TABLE_ROLES = ("events", "samples", "rounds", "summary", "ledger", "static")


@dataclass(frozen=True)
class TableSchema:
    """The fixed schema of one event table: its name, columns (in order) and meaning, and how
    it is read — its role, the columns that hold simulated time, the round and a series id
    within a run, and the columns that are metrics (default: every other numeric column)."""

    name: str
    columns: tuple[tuple[str, pa.DataType], ...]
    description: str
    role: str = "events"
    time: str | None = None
    round: str | None = None
    series: str | None = None
    metrics: tuple[str, ...] | None = None
    #: (column, reference) pairs: the column is a small difference of quantities of the
    #: reference column's size (a solver's certified gap), so the reproducibility contract
    #: compares it across machines relative to the reference's magnitude, not its own
    #: (``docs/reproducibility.md``).
    scaled_by: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.role not in TABLE_ROLES:
            raise ValueError(f"table {self.name}: role {self.role!r} is not one of {TABLE_ROLES}")
        names = {name for name, _ in self.columns}
        scaled = [column for pair in self.scaled_by for column in pair]
        for column in (self.time, self.round, self.series, *(self.metrics or ()), *scaled):
            if column is not None and column not in names:
                raise ValueError(f"table {self.name}: no column {column!r}")

    def describe(self) -> dict[str, object]:
        """The schema as plain data (for the run's manifest)."""
        return {
            "columns": [[name, str(dtype)] for name, dtype in self.columns],
            "description": self.description,
            "role": self.role,
            "time": self.time,
            "round": self.round,
            "series": self.series,
            "metrics": list(self.metrics) if self.metrics is not None else None,
            "scaled_by": dict(self.scaled_by),
        }

    def arrow_schema(self) -> pa.Schema:
        """The schema as pyarrow sees it."""
        return pa.schema([pa.field(name, dtype, nullable=False) for name, dtype in self.columns])

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)


def string_runs(labels: Sequence[str], codes: Sequence[int], counts: Sequence[int]) -> pa.Array:
    """A string column made of runs: ``counts[i]`` copies of ``labels[codes[i]]``, in order.

    Built from its Arrow buffers (offsets and characters) rather than by ``take`` on the
    labels: a few runs a round (a broadcast's adoptions: origin, pushes, pulls) then cost one
    pass over the rows, and the run never imports ``pyarrow.compute``, whose first use costs
    some 0.2 CPU seconds (``benchmarks/broadcast_rounds.py``)."""
    encoded = [label.encode() for label in labels]
    lengths = np.array([len(label) for label in encoded], dtype=np.int32)
    codes_array = np.asarray(codes, dtype=np.intp)
    counts_array = np.asarray(counts, dtype=np.intp)
    rows = int(counts_array.sum())
    offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(np.repeat(lengths[codes_array], counts_array), out=offsets[1:])
    runs = zip(codes, counts, strict=True)
    characters = b"".join([encoded[code] * count for code, count in runs])
    return pa.StringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(characters))


def parquet_options(schema: TableSchema) -> dict[str, object]:
    """How a table's Parquet file is encoded, by column type (the values do not depend on it).

    Integer columns (node ids, counters, update numbers) are delta-encoded, strings and floats
    dictionary-encoded (labels and times repeat), and only the time and round columns carry
    min/max statistics (what a reader filters row groups by). On a broadcast's adoptions table
    this writes a row in 24 ns instead of pyarrow's default 45 ns, at the same 4.7 bytes a row
    (``benchmarks/broadcast_rounds.py``): dictionary attempts and statistics on every
    column were most of the cost of a run directory."""
    integers = [name for name, dtype in schema.columns if pa.types.is_integer(dtype)]
    keyed = [column for column in (schema.time, schema.round) if column is not None]
    return {
        "use_dictionary": [
            name
            for name, dtype in schema.columns
            if pa.types.is_string(dtype) or pa.types.is_floating(dtype)
        ],
        "column_encoding": dict.fromkeys(integers, "DELTA_BINARY_PACKED"),
        "write_statistics": keyed or False,
    }


#: The numpy type of each fixed-width numeric type a table's column has.
_NUMPY_TYPES: dict[pa.DataType, np.dtype] = {
    F64: np.dtype(np.float64),
    I64: np.dtype(np.int64),
    I32: np.dtype(np.int32),
}
#: The integers a float64 holds exactly (Arrow's safe cast refuses the others).
_EXACT_FLOAT_INTEGERS = 2**53


def _arrow_column(values: Iterable[object], dtype: pa.DataType) -> pa.Array:
    """One column of ``dtype`` from an Arrow array, a numpy array or any iterable."""
    if isinstance(values, pa.Array):
        return values if values.type == dtype else values.cast(dtype)
    listed = values if isinstance(values, np.ndarray) else list(values)
    built = _from_buffers(listed, dtype)
    if built is not None:
        return built
    return pa.array(listed, type=dtype)


def _from_buffers(values: np.ndarray | list[object], dtype: pa.DataType) -> pa.Array | None:
    """The column ``pa.array(values, type=dtype)`` makes, built from its Arrow buffers: the
    same values, the same buffers (a numpy array of the column's type is shared, not copied,
    as ``pa.array`` shares it); None where this does not apply (values of another kind, or out
    of the type's range: ``pa.array`` then converts them or says why not).

    ``pa.array`` first asks pandas whether the values are a pandas array, which imports
    pandas (some 40 MiB resident) into every run that writes a table; this leaves pandas to
    what reads the tables (``tests/test_footprint.py``)."""
    if pa.types.is_string(dtype):
        return _strings(values)
    try:
        array = values if isinstance(values, np.ndarray) else np.array(values)
    except (ValueError, TypeError, OverflowError):
        return None
    if array.ndim != 1:
        return None
    if dtype == BOOL:
        if array.dtype != np.bool_ and array.size:
            return None
        bits = np.packbits(array.astype(np.bool_), bitorder="little")
        return pa.Array.from_buffers(dtype, array.size, [None, pa.py_buffer(bits)])
    target = _NUMPY_TYPES.get(dtype)
    if target is None:
        return None
    if array.size and array.dtype != target:
        if array.dtype.kind not in ("i", "u") and not (
            array.dtype.kind == "f" and target.kind == "f"
        ):
            return None
        if array.dtype.kind in ("i", "u"):
            low, high = int(array.min()), int(array.max())
            bounds = (
                (-_EXACT_FLOAT_INTEGERS, _EXACT_FLOAT_INTEGERS)
                if target.kind == "f"
                else (int(np.iinfo(target).min), int(np.iinfo(target).max))
            )
            if low < bounds[0] or high > bounds[1]:
                return None
    array = np.ascontiguousarray(array, dtype=target)
    return pa.Array.from_buffers(dtype, array.size, [None, pa.py_buffer(array)])


def _strings(values: np.ndarray | list[object]) -> pa.Array | None:
    """A string column from Python strings, as its offsets and characters (None for anything
    else, or more characters than 32-bit offsets reach)."""
    if isinstance(values, np.ndarray) or not all(type(value) is str for value in values):
        return None
    encoded = [value.encode() for value in values]  # type: ignore[union-attr]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(value) for value in encoded], out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        return None
    characters = b"".join(encoded)
    return pa.StringArray.from_buffers(
        len(encoded), pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(characters)
    )


class EventTable:
    """Row buffer of one table; rows are appended positionally, in schema order.

    Without a directory the sealed row groups stay in memory as Arrow batches until they
    hold ``memory_bytes``; from then on they go to a spill file in the temporary directory
    ``spill`` gives and :meth:`to_arrow` reads them back, so a long run kept in memory has a
    flat footprint (a broadcast with a new update every round writes 1,800 adoptions a round:
    260 MB of Arrow in 3,000 rounds, ``benchmarks/broadcast_rounds.py``). A spill file is Arrow
    IPC, uncompressed: the batches' buffers as they are, about 4 ns a row against Parquet's 24
    (a file that lives as long as the log needs no encoding).
    """

    def __init__(
        self,
        schema: TableSchema,
        directory: Path | None,
        chunk_rows: int,
        *,
        memory_bytes: int = 2**62,
        spill: Callable[[], Path] | None = None,
    ) -> None:
        self.schema = schema
        self._arrow_schema = schema.arrow_schema()
        self._columns: list[list[object]] = [[] for _ in schema.columns]  # rows not yet sealed
        self._chunks: list[list[pa.Array]] = [[] for _ in schema.columns]  # sealed, in order
        self._directory = directory
        self._chunk_rows = chunk_rows
        self._writer: pq.ParquetWriter | None = None
        self._batches: list[pa.RecordBatch] = []  # in-memory mode only
        self._held_bytes = 0  # of the batches held in memory
        self._memory_bytes = memory_bytes
        self._spill = spill
        self._spill_writer: pa.ipc.RecordBatchFileWriter | None = None
        self._spilled: list[Path] = []  # finished spill files, in row order
        self.rows = 0
        self._buffered = 0

    def append(self, *values: object) -> None:
        """Append one row; ``values`` follow the schema's column order."""
        for column, value in zip(self._columns, values, strict=True):
            column.append(value)
        self.rows += 1
        self._buffered += 1
        if self._buffered >= self._chunk_rows:
            self.flush()

    def extend(self, columns: Iterable[Iterable[object]]) -> None:
        """Append many rows given column-wise (e.g. numpy arrays from a vectorised round).

        Numpy and Arrow columns are converted to Arrow at once: going through Python objects
        cost more than the simulation itself for tables that grow by thousands of rows a round
        (the ledger). Columns that are all Python lists are buffered like appended rows."""
        columns = list(columns)
        if len(columns) != len(self.schema.columns):
            raise SimulationError(f"table {self.schema.name}: {len(columns)} columns given")
        if all(isinstance(values, list) for values in columns):
            # Python lists join the rows appended one by one, converted when sealed: a few
            # dozen rows a round (a broadcast's adoptions) would otherwise cost one Arrow
            # conversion per column per round, 50 µs a round (docs/performance.md)
            added = len(columns[0])
            if any(len(values) != added for values in columns):
                raise SimulationError(f"table {self.schema.name}: columns of unequal length")
            for column, values in zip(self._columns, columns, strict=True):
                column.extend(values)
            self._added(added)
            return
        self._seal_rows()
        arrays = [
            _arrow_column(values, dtype)
            for values, (_, dtype) in zip(columns, self.schema.columns, strict=True)
        ]
        added = len(arrays[0]) if arrays else 0
        if any(len(array) != added for array in arrays):
            raise SimulationError(f"table {self.schema.name}: columns of unequal length")
        for chunks, array in zip(self._chunks, arrays, strict=True):
            chunks.append(array)
        self._added(added)

    def extend_as_rows(self, columns: Sequence[Sequence[object]]) -> None:
        """Append many rows given column-wise (numpy or Arrow columns, all of one length) in
        the row groups that as many :meth:`append` calls make: a group is written every
        ``chunk_rows`` rows, so the file is the same whichever way its rows came (the compiled
        exact core writes the rows the SimPy path appends one by one)."""
        rows = len(columns[0])
        done = 0
        while done < rows:
            piece = min(rows - done, self._chunk_rows - self._buffered)
            self.extend([values[done : done + piece] for values in columns])
            done += piece

    def _added(self, rows: int) -> None:
        """Count ``rows`` new rows; write a row group once enough are buffered."""
        self.rows += rows
        self._buffered += rows
        if self._buffered >= self._chunk_rows:
            self.flush()

    def _seal_rows(self) -> None:
        """Move the rows appended one by one into the Arrow chunks (keeps the row order)."""
        if self._columns and self._columns[0]:
            for chunks, values, (_, dtype) in zip(
                self._chunks, self._columns, self.schema.columns, strict=True
            ):
                chunks.append(_arrow_column(values, dtype))
            self._columns = [[] for _ in self.schema.columns]

    def _take_batch(self) -> pa.RecordBatch:
        self._seal_rows()
        arrays = [
            chunks[0] if len(chunks) == 1 else pa.concat_arrays(chunks) for chunks in self._chunks
        ]
        self._chunks = [[] for _ in self.schema.columns]
        self._buffered = 0
        return pa.RecordBatch.from_arrays(arrays, schema=self._arrow_schema)

    @property
    def tmp_path(self) -> Path:
        assert self._directory is not None
        return self._directory / f"{self.schema.name}.parquet.tmp"

    @property
    def final_path(self) -> Path:
        assert self._directory is not None
        return self._directory / f"{self.schema.name}.parquet"

    def flush(self) -> None:
        """Write buffered rows as a row group (or keep them in memory without a directory)."""
        if self._buffered == 0:
            return
        batch = self._take_batch()
        if self._directory is None:
            self._batches.append(batch)
            self._held_bytes += batch.nbytes
            if self._held_bytes > self._memory_bytes and self._spill is not None:
                self._spill_batches(self._spill)
            return
        if self._writer is None:
            self._writer = self._open_writer()
        self._writer.write_batch(batch)

    def _spill_batches(self, spill: Callable[[], Path]) -> None:
        """Move the batches held in memory to the open spill file (opened if need be)."""
        if self._spill_writer is None:
            path = spill() / f"{self.schema.name}.{len(self._spilled)}.arrow"
            self._spilled.append(path)
            self._spill_writer = pa.ipc.new_file(str(path), self._arrow_schema)
        for batch in self._batches:
            self._spill_writer.write_batch(batch)
        self._batches = []
        self._held_bytes = 0

    def _open_writer(self) -> pq.ParquetWriter:
        return pq.ParquetWriter(self.tmp_path, self._arrow_schema, **parquet_options(self.schema))

    def close(self) -> None:
        """Flush and, with a directory, atomically publish ``<name>.parquet``."""
        self.flush()
        if self._directory is None:
            return
        if self._writer is None:  # an empty table still gets a file with its schema
            self._writer = self._open_writer()
        self._writer.close()
        self._writer = None
        fsync_file(self.tmp_path)  # the data is on disk before the name says it is complete
        os.replace(self.tmp_path, self.final_path)

    def to_arrow(self) -> pa.Table:
        """The rows written so far (in-memory mode) as one Arrow table."""
        if self._directory is not None:
            raise SimulationError("to_arrow() is for in-memory logs; read the Parquet file")
        self.flush()
        if self._spill_writer is not None:  # finish the spill file; later rows start another
            self._spill_writer.close()
            self._spill_writer = None
        parts = [pa.ipc.open_file(pa.OSFile(str(path))).read_all() for path in self._spilled]
        held = pa.Table.from_batches(self._batches, schema=self._arrow_schema)
        return pa.concat_tables([*parts, held]) if parts else held


class OmittedTable(EventTable):
    """A table the scenario chose not to keep (``metrics.omit_tables``): rows are dropped as
    they come; the file is still written, with its schema and no rows."""

    def append(self, *values: object) -> None:
        return None

    def extend(self, columns: Iterable[Iterable[object]]) -> None:
        return None


class EventLog:
    """All event tables of one run.

    With ``directory`` the tables stream to Parquet there; without it they stay in memory and
    :meth:`to_frames` returns them (handy in notebooks and tests) — up to ``memory_bytes`` of
    Arrow data per table, beyond which a table's rows spill to an Arrow IPC file in a
    temporary directory that lives as long as the log (:class:`EventTable`). A table holds at most
    ``chunk_rows`` rows before writing them as a row group: rows appended one by one are
    Python objects until then (about 30 bytes a value), so 65,536 rows bound a high-rate
    table to some 20 MB (``benchmarks/memory.py``).
    """

    def __init__(
        self,
        directory: Path | None = None,
        *,
        chunk_rows: int = 65_536,
        memory_bytes: int = 16 * 2**20,
    ) -> None:
        self.directory = directory
        self.chunk_rows = chunk_rows
        self.memory_bytes = memory_bytes
        self._spill_directory: Path | None = None
        self.tables: dict[str, EventTable] = {}
        self.closed = False
        self.omitted: frozenset[str] = frozenset()

    def omit(self, names: Iterable[str]) -> None:
        """Keep no rows of the tables ``names`` (before the components register them)."""
        self.omitted = frozenset(names)

    def table(self, schema: TableSchema) -> EventTable:
        """Register ``schema`` (idempotent for the same schema) and return its table."""
        existing = self.tables.get(schema.name)
        if existing is not None:
            if existing.schema != schema:
                raise SimulationError(f"two different schemas for table {schema.name!r}")
            return existing
        kind = OmittedTable if schema.name in self.omitted else EventTable
        table = kind(
            schema, self.directory, self.chunk_rows, memory_bytes=self.memory_bytes,
            spill=self._spill_here,
        )  # fmt: skip
        self.tables[schema.name] = table
        return table

    def _spill_here(self) -> Path:
        """The log's temporary spill directory, made at the first spill and removed with the
        log (or at exit)."""
        if self._spill_directory is None:
            self._spill_directory = Path(tempfile.mkdtemp(prefix="netsim-log-"))
            weakref.finalize(self, shutil.rmtree, self._spill_directory, ignore_errors=True)
        return self._spill_directory

    def prefixed(self, prefix: str) -> PrefixedLog:
        """A view of this log in which every table is named ``<prefix><table>`` (what an
        instance writes when another instance of the run writes tables of the same names)."""
        return PrefixedLog(self, prefix)

    def schemas(self) -> dict[str, dict[str, object]]:
        """Every registered table's schema as plain data, by name."""
        return {name: table.schema.describe() for name, table in sorted(self.tables.items())}

    def close(self) -> dict[str, int]:
        """Finish every table; returns the row count per table."""
        for table in self.tables.values():
            table.close()
        self.closed = True
        return {name: table.rows for name, table in sorted(self.tables.items())}

    def to_frames(self) -> dict[str, pd.DataFrame]:
        """In-memory mode: every table as a pandas DataFrame."""
        return {name: table.to_arrow().to_pandas() for name, table in sorted(self.tables.items())}


class PrefixedLog:
    """An :class:`EventLog` as one component instance sees it when its tables are renamed:
    :meth:`table` registers ``schema`` under ``<prefix><name>`` in the run's log."""

    def __init__(self, log: EventLog, prefix: str) -> None:
        self.log = log
        self.prefix = prefix

    def table(self, schema: TableSchema) -> EventTable:
        """The run's table of ``schema`` under this instance's name."""
        return self.log.table(dataclasses.replace(schema, name=self.prefix + schema.name))

    def __getattr__(self, name: str) -> object:
        return getattr(self.log, name)
