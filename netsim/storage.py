"""Atomic file writes and the layout of a run directory.

A run directory holds ``scenario.yaml`` (the resolved scenario, with the seed actually used),
one ``<table>.parquet`` per event table, and ``manifest.json``. A run is built in a hidden
sibling directory ``.<name>.partial-<pid>`` and renamed into place only when every file is
written, with the manifest last; so a directory without ``.partial`` in its name and with a
manifest whose ``status`` is ``complete`` is a complete run, and nothing else is.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

MANIFEST = "manifest.json"
SCENARIO = "scenario.yaml"
# a sweep directory (netsim.sweep writes it, netsim.analysis.collect reads it)
SWEEP_MANIFEST = "sweep.json"
SWEEP_SOURCE = "sweep.yaml"
SWEEP_PLAN = "plan.parquet"
SWEEP_RUNS = "runs"
SWEEP_FAILURES = "failures"
SWEEP_RESULTS = "results.parquet"
SWEEP_SUMMARY = "summary.parquet"
PARTIAL_MARK = ".partial-"
RETIRED_MARK = ".old-"
PUBLISH_ATTEMPTS = 5


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:  # name the file asked for, not the temporary one
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    try:
        os.chmod(tmp, 0o666 & ~_current_umask())  # mkstemp makes 0600; act like open()
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fsync_file(path: Path) -> None:
    """Flush ``path``'s data to the disk (before it is renamed into place)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_parquet(path: Path, table: pa.Table) -> None:
    """Write an Arrow table as Parquet, atomically (see :func:`atomic_write_bytes`)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())


def atomic_write_text(path: Path, text: str) -> None:
    """Text flavour of :func:`atomic_write_bytes` (UTF-8)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """Atomically write ``payload`` as indented, key-sorted JSON."""
    atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")


def _process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (a staging directory's owner)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def remove_stale_staging(final: Path) -> None:
    """Remove the staging (``.partial-<pid>``) and retired (``.old-<pid>``) siblings of
    ``final`` left by runs that were killed: their process no longer exists."""
    parent = final.parent
    if not parent.is_dir():
        return
    for mark in (PARTIAL_MARK, RETIRED_MARK):
        for path in parent.glob(f".{final.name}{mark}*"):
            pid_text = path.name.rsplit(mark, 1)[1].split("-")[0]
            if pid_text.isdigit() and not _process_alive(int(pid_text)):
                shutil.rmtree(path, ignore_errors=True)


def partial_directory(final: Path) -> Path:
    """Create and return the hidden staging directory for the run directory ``final``
    (removing what killed runs of it left behind)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(final)
    staging = final.parent / f".{final.name}{PARTIAL_MARK}{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    return staging


def publish_directory(staging: Path, final: Path) -> None:
    """Move a finished staging directory to ``final``, replacing an older run there.

    Two processes may publish the same run at once (the same scenario and seed into one
    ``--out``): a rename onto a directory another process just published fails, and the
    move is tried again. A run id names the scenario and seed, whose tables are the same byte
    for byte, so if the other process keeps winning, its complete run stands and ours is
    dropped.
    """
    for attempt in range(PUBLISH_ATTEMPTS):
        retired = final.parent / f".{final.name}{RETIRED_MARK}{os.getpid()}-{attempt}"
        if final.exists():
            try:
                os.replace(final, retired)
            except FileNotFoundError:
                pass  # another process moved it first
        try:
            os.replace(staging, final)
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        finally:
            shutil.rmtree(retired, ignore_errors=True)
    if not is_complete_run(final):
        raise OSError(errno.EEXIST, f"{final}: could not publish the run (kept being replaced)")
    shutil.rmtree(staging, ignore_errors=True)


def complete_manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest of a published run whose manifest says it completed, else None."""
    directory = Path(directory)
    if PARTIAL_MARK in directory.name:
        return None
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("status") != "complete":
        return None
    return manifest


def table_problem(directory: Path, name: str, rows: object, schema: object) -> str | None:
    """Why the table ``name`` of a run directory does not match its manifest (its row count
    ``rows`` and its ``schema`` as :meth:`~netsim.log.TableSchema.describe` gives it), or None.

    Reads only the Parquet footer, so checking every table of a sweep on resume is cheap.
    """
    file = Path(directory) / f"{name}.parquet"
    try:
        metadata = pq.read_metadata(file)
        columns = list(metadata.schema.to_arrow_schema().names)
    except FileNotFoundError:
        return f"table file {file.name} is missing"
    except (OSError, ValueError, pa.ArrowException) as exc:
        return f"{file.name} is not a readable Parquet file ({exc})"
    if metadata.num_rows != rows:
        return f"{file.name} has {metadata.num_rows} rows; the manifest says {rows}"
    expected = schema.get("columns") if isinstance(schema, dict) else None
    if isinstance(expected, list) and columns != [column[0] for column in expected]:
        return (
            f"{file.name} has the columns {', '.join(columns)}; table {name} has "
            f"{', '.join(str(column[0]) for column in expected)}"
        )
    return None


def run_problems(directory: Path, manifest: dict[str, Any]) -> list[str]:
    """Every table of a complete-looking run that does not match its manifest."""
    tables = manifest.get("tables")
    schemas = manifest.get("schemas") or {}
    if not isinstance(tables, dict):
        return ["the manifest lists no tables"]
    problems = []
    for name, rows in tables.items():
        problem = table_problem(directory, name, rows, schemas.get(name))
        if problem is not None:
            problems.append(problem)
    return problems


def is_complete_run(directory: Path) -> bool:
    """True iff ``directory`` is a published run whose manifest says it completed."""
    return complete_manifest(directory) is not None
