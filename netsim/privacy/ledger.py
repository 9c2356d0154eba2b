"""The privacy ledger: every charge a :class:`~netsim.privacy.accountant.PrivacyAccountant`
makes (which record, its use number, when, and the release's event), held in chunks or streamed
to the run's ``privacy_ledger`` table, and the two tables an accountant writes.

A round of a vectorised algorithm charges thousands of records with one event: the ledger
keeps them as one :class:`LedgerChunk` and repeats the event's fields over the records only
when it writes the table (:meth:`PrivacyLedger.columns`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa

from netsim.errors import PrivacyError
from netsim.lazy import lazy_module
from netsim.log import F64, I64, STR, EventLog, EventTable, TableSchema, string_runs
from netsim.privacy.events import PrivacyEvent

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

LEDGER_TABLE = TableSchema(
    name="privacy_ledger",
    columns=(
        ("time", F64),
        ("record", I64),
        ("use", I64),
        ("mechanism", STR),
        ("guarantee", STR),
        ("epsilon", F64),
        ("delta", F64),
        ("sensitivity", F64),
        ("norm", STR),
        ("noise_scale", F64),
        ("mutual_information", F64),
    ),
    description=(
        "Every privacy charge: when, which record, its use number, and the event (its "
        "mutual-information bound in nats for mutual-information releases, else 0)."
    ),
    role="ledger",
    time="time",
)
RECORDS_TABLE = TableSchema(
    name="privacy_records",
    columns=(
        ("record", I64),
        ("uses", I64),
        ("epsilon_spent", F64),
        ("delta_spent", F64),
        ("refused", I64),
        ("mutual_information_spent", F64),
    ),
    description=(
        "Per record at the end: uses, ε and δ spent (composed as the accountant's "
        "accounting says: basic sums, or for Gaussian releases under rdp/pld the composed ε at "
        "the budget δ, which is then the δ spent), how many releases "
        "were refused because the budget was spent, and the sum of the releases' "
        "mutual-information bounds in nats (releases with independent noise: the leakage "
        "of all of them together is at most the sum)."
    ),
    role="ledger",
)


def ledger_sink(log: EventLog, keep: Literal["charges", "totals"]) -> EventTable | None:
    """Where a run's accountant streams its ledger (:meth:`PrivacyAccountant.stream_ledger`):
    the run's ``privacy_ledger`` table, or nowhere with ``metrics.privacy_ledger: totals``."""
    return log.table(LEDGER_TABLE) if keep == "charges" else None


@dataclass(frozen=True)
class LedgerChunk:
    """Releases charged together: ``records[k]`` had its ``uses[k]``-th use at ``time`` (or
    at ``time[k]``: single charges of one event gathered, :meth:`PrivacyLedger.keep_one`)."""

    time: float | np.ndarray
    records: np.ndarray
    uses: np.ndarray
    event: PrivacyEvent


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """The int64 concatenation of ``parts`` (an empty array for none)."""
    return np.concatenate(parts).astype(np.int64, copy=False) if parts else np.zeros(0, np.int64)


def _times(chunks: list[LedgerChunk], sizes: np.ndarray) -> np.ndarray:
    """The time of every charge of ``chunks``: a chunk's one time repeated over its records,
    or its times (gathered single charges: an array). A scalar time may be a numpy scalar (an
    int64 clock), so the test is for the array, not for a Python number."""
    if not any(isinstance(chunk.time, np.ndarray) for chunk in chunks):
        return np.repeat(np.array([chunk.time for chunk in chunks], dtype=np.float64), sizes)
    parts = [
        chunk.time
        if isinstance(chunk.time, np.ndarray)
        else np.full(chunk.records.size, chunk.time, dtype=np.float64)
        for chunk in chunks
    ]
    return np.concatenate(parts)


class PrivacyLedger:
    """The charges of a run in order: held here as chunks, or streamed to a table every
    ``every_rows`` rows (:meth:`stream`), or not kept at all."""

    def __init__(self) -> None:
        self.chunks: list[LedgerChunk] = []
        #: Rows (records charged) in :attr:`chunks`.
        self.rows = 0
        self._sink: EventTable | None = None  # where the ledger streams (stream)
        self._keep_charges = True
        #: Whether some of the ledger has left memory (streamed, or not kept).
        self.streamed = False
        self._stream_every = 0
        # single charges of one event not yet sealed into a chunk (keep_one): a model's
        # visit charges one record, and a chunk of two arrays per visit cost more than the step
        self._single_event: PrivacyEvent | None = None
        self._single_times: list[float] = []
        self._single_records: list[int] = []
        self._single_uses: list[int] = []

    @property
    def streaming(self) -> bool:
        """Whether the charges go to a table as they are made."""
        return self._sink is not None

    def stream(self, table: EventTable | None, every_rows: int) -> None:
        """Append the charges to ``table`` every ``every_rows`` rows and drop them here, or
        (``table`` None) keep none from now on; what was charged before keeps its place."""
        self.flush()
        self._sink = table
        self._keep_charges = table is not None
        self._stream_every = every_rows
        if table is None:
            self.chunks, self.rows = [], 0
            self.streamed = True

    def keep(self, chunk: LedgerChunk) -> None:
        """Add the charges of ``chunk`` (streaming them when enough rows are held)."""
        if not self._keep_charges:
            return
        self._seal_singles()
        self.chunks.append(chunk)
        self.rows += chunk.records.size
        if self._sink is not None and self.rows >= self._stream_every:
            self.flush()

    def keep_one(self, time: float, record: int, use: int, event: PrivacyEvent) -> None:
        """Add one charge: ``record``'s ``use``-th use at ``time`` (as :meth:`keep` of a
        one-record chunk; consecutive single charges of the same event object are gathered
        into one chunk)."""
        if not self._keep_charges:
            return
        if event is not self._single_event:
            self._seal_singles()
            self._single_event = event
        self._single_times.append(time)
        self._single_records.append(record)
        self._single_uses.append(use)
        self.rows += 1
        if self._sink is not None and self.rows >= self._stream_every:
            self.flush()

    def keep_many(
        self, times: np.ndarray, records: np.ndarray, uses: np.ndarray, event: PrivacyEvent
    ) -> None:
        """:meth:`keep_one` of each charge in order (the ``i``-th: ``records[i]``'s
        ``uses[i]``-th use at ``times[i]``), streamed at the same rows as one call each would
        stream them: charges gathered by compiled code (:mod:`netsim.learning.compiled_visit`)."""
        if not self._keep_charges or not len(records):
            return
        if event is not self._single_event:
            self._seal_singles()
            self._single_event = event
        done, total = 0, len(records)
        while done < total:
            piece = total - done
            if self._sink is not None:
                piece = min(piece, max(self._stream_every - self.rows, 1))
            self._single_times.extend(times[done : done + piece].tolist())
            self._single_records.extend(records[done : done + piece].tolist())
            self._single_uses.extend(uses[done : done + piece].tolist())
            self.rows += piece
            done += piece
            if self._sink is not None and self.rows >= self._stream_every:
                self.flush()

    def _seal_singles(self) -> None:
        """Turn the gathered single charges into one chunk, in their place in the order."""
        if not self._single_records:
            return
        assert self._single_event is not None
        self.chunks.append(
            LedgerChunk(
                np.array(self._single_times, dtype=np.float64),
                np.array(self._single_records, dtype=np.int64),
                np.array(self._single_uses, dtype=np.int64),
                self._single_event,
            )
        )
        self._single_times, self._single_records, self._single_uses = [], [], []

    def flush(self) -> None:
        """Append the charges held here to the ledger table (if streaming) and drop them."""
        self._seal_singles()
        if self._sink is None or not self.chunks:
            return
        columns = self.columns()
        self._sink.extend([columns[name] for name in LEDGER_TABLE.column_names])
        self.chunks, self.rows = [], 0
        self.streamed = True

    def events_of(self, record: int) -> list[PrivacyEvent]:
        """The events charged to ``record``, in order (:class:`PrivacyError` once the ledger
        has left memory)."""
        if self.streamed:
            raise PrivacyError(
                "the ledger was streamed to the run's privacy_ledger table (or not kept); "
                "read the charges from there"
            )
        self._seal_singles()
        events: list[PrivacyEvent] = []
        for chunk in self.chunks:
            events.extend([chunk.event] * int(np.count_nonzero(chunk.records == record)))
        return events

    def frame(self) -> pd.DataFrame:
        """Every charge held here, in order."""
        columns = {
            name: values.to_pandas() if isinstance(values, pa.Array) else values
            for name, values in self.columns().items()
        }
        return pd.DataFrame(columns, columns=list(LEDGER_TABLE.column_names))

    def columns(self) -> dict[str, np.ndarray | pa.Array]:
        """The ledger column-wise; a chunk's scalar fields are repeated over its records.

        Text columns are Arrow arrays taken from their few distinct values: repeating Python
        strings over 10⁶ records and converting them cost more than a DOLA run's last rounds."""
        self._seal_singles()
        chunks = self.chunks
        sizes = np.array([chunk.records.size for chunk in chunks], dtype=np.int64)

        def repeated(values: list[Any], dtype: Any) -> np.ndarray:
            return np.repeat(np.array(values, dtype=dtype), sizes)

        def repeated_text(values: list[str]) -> pa.Array:
            # from its Arrow buffers: pa.array would import pandas into the run (40 MiB,
            # 0.3 s of CPU at the ledger's first flush)
            return string_runs(values, range(len(values)), sizes)

        columns: dict[str, np.ndarray | pa.Array] = {
            "time": _times(chunks, sizes),
            "record": _joined([chunk.records for chunk in chunks]),
            "use": _joined([chunk.uses for chunk in chunks]),
        }
        for name, dtype in LEDGER_TABLE.columns[3:]:
            values = [getattr(chunk.event, name) for chunk in chunks]
            columns[name] = repeated_text(values) if dtype == STR else repeated(values, np.float64)
        return columns

    def write(self, log: EventLog) -> None:
        """Append what is held here to the run's ``privacy_ledger`` table (when streaming, to
        the table it streams to)."""
        table = log.table(LEDGER_TABLE)
        if self._sink is None:
            columns = self.columns()
            table.extend([columns[name] for name in LEDGER_TABLE.column_names])
        else:
            self.flush()
