"""The event log's storage: Parquet encodings chosen by column type, string columns built from
runs, in-memory tables that spill to a temporary file past their memory allowance, and the
rounds-mode broadcast's block-wise adoptions. None of it may change a value: every test
compares what is read back with what was appended."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.log import (
    BOOL,
    F64,
    I32,
    I64,
    STR,
    EventLog,
    TableSchema,
    parquet_options,
    string_runs,
)
from netsim.protocols.broadcast import ADOPTIONS_TABLE, VIA_LABELS, RoundAdoptions

SCHEMA = TableSchema(
    name="things",
    columns=(("time", F64), ("node", I32), ("count", I64), ("label", STR), ("flag", BOOL)),
    description="a test table",
    time="time",
)


def fill(log: EventLog, rows: int, *, start: int = 0) -> None:
    """``rows`` rows, appended one by one and then column-wise (both paths of the table)."""
    table = log.table(SCHEMA)
    half = rows // 2
    for i in range(start, start + half):
        table.append(0.25 * i, i % 97, i * i, f"label{i % 3}", i % 2 == 0)
    index = np.arange(start + half, start + rows)
    table.extend(
        [0.25 * index, (index % 97).astype(np.int32), index * index,
         [f"label{i % 3}" for i in index], index % 2 == 0]
    )  # fmt: skip


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40)), min_size=0, max_size=30))
def test_a_string_column_of_runs_is_the_labels_repeated_in_order(runs) -> None:
    labels = ("origin", "gossip_push", "", "ünïcode")
    codes = [code for code, _ in runs]
    counts = [count for _, count in runs]
    expected = [labels[code] for code, count in runs for _ in range(count)]
    column = string_runs(labels, codes, counts)
    assert column.type == pa.string()
    assert column.to_pylist() == expected
    column.validate(full=True)


def test_parquet_encodings_follow_the_column_types(tmp_path: Path) -> None:
    options = parquet_options(SCHEMA)
    assert options["column_encoding"] == {
        "node": "DELTA_BINARY_PACKED",
        "count": "DELTA_BINARY_PACKED",
    }
    assert options["use_dictionary"] == ["time", "label"]
    assert options["write_statistics"] == ["time"]
    log = EventLog(tmp_path)
    fill(log, 1000)
    log.close()
    metadata = pq.ParquetFile(tmp_path / "things.parquet").metadata.row_group(0)
    chunks = {metadata.column(i).path_in_schema: metadata.column(i) for i in range(5)}
    assert "DELTA_BINARY_PACKED" in chunks["node"].encodings
    assert "DELTA_BINARY_PACKED" in chunks["count"].encodings
    assert chunks["label"].has_dictionary_page and chunks["time"].has_dictionary_page
    assert chunks["time"].is_stats_set and not chunks["node"].is_stats_set
    assert chunks["time"].statistics.min == 0.0 and chunks["time"].statistics.max == 249.75


def test_a_run_directory_reads_back_what_the_memory_log_holds(tmp_path: Path) -> None:
    on_disk, in_memory = EventLog(tmp_path, chunk_rows=100), EventLog(chunk_rows=100)
    for log in (on_disk, in_memory):
        fill(log, 1234)
        log.close()
    read = pq.read_table(tmp_path / "things.parquet")
    assert read.schema == SCHEMA.arrow_schema()
    pd.testing.assert_frame_equal(read.to_pandas(), in_memory.to_frames()["things"])


def test_a_table_past_its_memory_allowance_spills_and_reads_back_every_row() -> None:
    kept = EventLog(chunk_rows=64)
    spilling = EventLog(chunk_rows=64, memory_bytes=2_000)
    for log in (kept, spilling):
        fill(log, 1000)
    table = spilling.tables["things"]
    assert table._spilled, "2,000 bytes hold fewer than 1,000 rows: the table must have spilled"
    assert table._held_bytes <= 2_000
    # read in the middle of the run, then more rows: they go to a second spill file
    pd.testing.assert_frame_equal(
        kept.tables["things"].to_arrow().to_pandas(), table.to_arrow().to_pandas()
    )
    for log in (kept, spilling):
        fill(log, 700, start=1000)
        log.close()
    assert len(table._spilled) == 2
    expected, got = kept.to_frames()["things"], spilling.to_frames()["things"]
    assert len(got) == 1700
    pd.testing.assert_frame_equal(expected, got)
    assert spilling.tables["things"].to_arrow().schema == SCHEMA.arrow_schema()


def test_the_spill_directory_goes_with_the_log() -> None:
    log = EventLog(chunk_rows=64, memory_bytes=1_000)
    fill(log, 500)
    log.close()
    directory = log._spill_directory
    assert directory is not None and any(directory.iterdir())
    del log
    gc.collect()
    assert not directory.exists()


def test_a_log_that_fits_in_memory_makes_no_spill_directory() -> None:
    log = EventLog()
    fill(log, 5000)
    log.close()
    assert log._spill_directory is None and not log.tables["things"]._spilled


@settings(max_examples=60, deadline=None)
@given(
    rounds=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30), st.booleans()), max_size=25),
    block_rows=st.integers(1, 40),
)
def test_round_adoptions_write_every_row_in_order_whatever_the_blocks(rounds, block_rows) -> None:
    """Block size, growth past the capacity and the flush points change no row: the table
    equals the rows added, each round's pushes before its pulls, origins on their own."""
    log = EventLog(chunk_rows=7)
    adoptions = RoundAdoptions(log.table(ADOPTIONS_TABLE), block_rows=block_rows)
    expected: list[tuple] = []
    rng = np.random.default_rng(len(rounds) + block_rows)
    for k, (pushes, pulls, origin) in enumerate(rounds):
        size = pushes + pulls
        columns = tuple(rng.integers(0, 10**6, size) for _ in range(4))
        kinds = (
            [VIA_LABELS[0]] * size if origin else [VIA_LABELS[1]] * pushes + [VIA_LABELS[2]] * pulls
        )
        adoptions.add(0.1 * k, columns, pushes, origin=origin)  # type: ignore[arg-type]
        expected += [
            (0.1 * k, *(int(column[i]) for column in columns), kinds[i]) for i in range(size)
        ]
    adoptions.flush()
    log.close()
    frame = log.to_frames()["broadcast_adoptions"]
    assert [tuple(row) for row in frame.itertuples(index=False)] == expected
