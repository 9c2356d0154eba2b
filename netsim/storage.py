"""Atomic file writes, the layout of a run directory, and the check that a run is intact.

A run directory holds ``scenario.yaml`` (the resolved scenario, with the seed actually used),
one ``<table>.parquet`` per event table, and ``manifest.json``. A run is built in a hidden
sibling directory ``.<name>.partial-<pid>`` and renamed into place only when every file is
written, with the manifest last; so a directory without ``.partial`` in its name and with a
manifest whose ``status`` is ``complete`` is a complete run, and nothing else is.

The manifest's ``files`` records the SHA-256, the size in bytes and (for a table) the row count
of every file of the run as published (:func:`file_records`). :func:`check_run` compares a run
with it: a missing table, a table whose bytes changed (corrupted, or another run's), and a
manifest whose row counts disagree with the tables make the run *damaged*. So does a run whose
listings disagree: every table on disk (``*.parquet``) and every table of the manifest's
``schemas`` must be in its ``tables`` and ``files``, a run lists at least one table, and a
table's name is a plain name (:data:`TABLE_NAME`), never a path into another directory. A
manifest of format 2 or later (:data:`MANIFEST_FORMAT`) without ``files`` is damaged too: that
format always records them. A run whose manifest has no ``files`` (written before manifests
recorded them, or stripped of them) is *unverified*: only its tables' footers (row counts and
columns) are checked, and readers refuse it unless asked to read unverified runs.

Records (manifests, ``sweep.json``, failure records) are read bounded: at most
:data:`~netsim.files.MAX_RECORD_BYTES` and :data:`MAX_RECORD_DEPTH` levels of nesting.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from netsim import files
from netsim.errors import NetsimError, RunDirectoryError

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
#: The manifest key that records each file's sha256, size and (tables) row count.
FILES = "files"
#: The manifest key that says which layout of manifest a run was written with.
MANIFEST_FORMAT_KEY = "manifest_format"
#: The layout netsim writes: 2 = ``files`` (checksums) always recorded; manifests without the
#: key are older (format 1: ``files`` recorded since checksums were introduced, or not at all).
MANIFEST_FORMAT = 2
#: How deeply a run record (a manifest, ``sweep.json``) may nest lists and objects; netsim's
#: own nest at most 5 levels.
MAX_RECORD_DEPTH = 64
#: What a table's name may be: a plain file name stem (an instance's prefix has a dot), never
#: a path (no ``/``, and not ``.`` or ``..``).
TABLE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=+-]{0,199}")
#: Files ``collect`` and ``netsim collect`` write into a run directory read on its own: not tables.
COLLECTED_FILES = (SWEEP_RESULTS, SWEEP_SUMMARY)
#: Why a run without checksums is not read (unless asked): what ``verify`` and the readers say.
UNVERIFIED_REASON = (
    f"its manifest records no checksums (no {FILES!r}: written before manifests recorded them, "
    "or stripped of them), so its tables' bytes cannot be checked"
)
PARTIAL_MARK = ".partial-"
RETIRED_MARK = ".old-"
CLAIM_MARK = ".claim"
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


def json_depth(value: Any) -> int:
    """How deeply ``value`` (parsed JSON) nests lists and objects (a scalar: 0), walked without
    recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _too_deep(path: Path) -> RunDirectoryError:
    return RunDirectoryError(
        f"{path}: nests lists or objects more than {MAX_RECORD_DEPTH} levels deep; a run "
        f"record nests at most {MAX_RECORD_DEPTH} (netsim refuses deeper records rather than "
        "read them)"
    )


@contextmanager
def claim_run_name(final: Path) -> Iterator[None]:
    """Hold the name of the run directory ``final`` for one writer while the block runs.

    The claim is an exclusive ``flock`` on the hidden file ``.<name>.claim`` beside it, taken
    without waiting: a second writer of the same name gets a :class:`RunDirectoryError` at
    once, before it runs. The kernel drops the lock when its process dies, so a killed run
    leaves no claim that blocks the next one. The file is removed while the lock is held; a
    writer that opened it just before, and then locks the removed file, sees that the path no
    longer names what it locked and tries again.
    """
    path = final.parent / f".{final.name}{CLAIM_MARK}"
    while True:
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise RunDirectoryError(
                f"{final.parent}: cannot create a run directory: {exc.strerror}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip()
            os.close(fd)
            by = f" (pid {holder})" if holder.isdigit() else ""
            raise RunDirectoryError(
                f"{final}: another netsim run{by} is writing a run of this name now; choose "
                "another --name, or wait for it to finish"
            ) from None
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fd).st_ino:
            break
        os.close(fd)  # we locked a file its last holder had removed: claim the new one
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        yield
    finally:
        path.unlink(missing_ok=True)  # still locked: nobody can hold a claim on it
        os.close(fd)


def read_record(path: Path) -> Any:
    """The JSON of a record netsim wrote (a manifest, ``sweep.json``, a failure record): a
    regular file of at most :data:`~netsim.files.MAX_RECORD_BYTES` nesting at most
    :data:`MAX_RECORD_DEPTH` levels. Raises ``OSError``, ``ValueError`` (not JSON) or
    :class:`RunDirectoryError` (not a regular file, too large, too deep)."""
    text = files.read_text(
        path, what="run record", limit=files.MAX_RECORD_BYTES, error=RunDirectoryError
    )
    try:
        record = json.loads(text)
    except RecursionError:  # the parser gave up first: deeper than Python's recursion limit
        raise _too_deep(path) from None
    if json_depth(record) > MAX_RECORD_DEPTH:  # deep enough to break code that walks it
        raise _too_deep(path)
    return record


def open_table(path: Path) -> BinaryIO:
    """Open a run's or a sweep's Parquet table: a regular file of at most
    :data:`~netsim.files.MAX_TABLE_BYTES` (a FIFO in its place is refused, not waited on)."""
    return files.open_regular(
        path, what="table", limit=files.MAX_TABLE_BYTES, error=RunDirectoryError
    )


def read_table(path: Path) -> pa.Table:
    """The Parquet table at ``path`` (see :func:`open_table`)."""
    with open_table(path) as handle:
        return pq.read_table(handle)


def complete_manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest of a published run whose manifest says it completed, else None."""
    directory = Path(directory)
    if PARTIAL_MARK in directory.name:
        return None
    try:
        manifest = read_record(directory / MANIFEST)
    except (OSError, ValueError, NetsimError):
        return None
    if not isinstance(manifest, dict) or manifest.get("status") != "complete":
        return None
    return manifest


def manifest_problem(directory: Path) -> str:
    """Why ``directory`` has no complete manifest (:func:`complete_manifest` gave None)."""
    file = Path(directory) / MANIFEST
    try:
        manifest = read_record(file)
    except FileNotFoundError:
        return f"no {MANIFEST} with status 'complete'"
    except RunDirectoryError as exc:  # not a regular file, too large, too deep
        return f"{MANIFEST} {str(exc).removeprefix(f'{file}: ')}"
    except (OSError, ValueError) as exc:
        return f"{MANIFEST} cannot be read as JSON ({exc})"
    if not isinstance(manifest, dict) or manifest.get("status") != "complete":
        return f"no {MANIFEST} with status 'complete'"
    return f"the run directory's name marks a staging directory ({PARTIAL_MARK})"


def table_problem(directory: Path, name: str, rows: object, schema: object) -> str | None:
    """Why the table ``name`` of a run directory does not match its manifest (its row count
    ``rows`` and its ``schema`` as :meth:`~netsim.log.TableSchema.describe` gives it), or None.

    Reads only the Parquet footer, so checking every table of a sweep on resume is cheap.
    """
    file = Path(directory) / f"{name}.parquet"
    try:
        with open_table(file) as handle:
            metadata = pq.read_metadata(handle)
        columns = list(metadata.schema.to_arrow_schema().names)
    except FileNotFoundError:
        return f"table file {file.name} is missing"
    except RunDirectoryError as exc:  # not a regular file, or too large
        return f"{file.name} {str(exc).removeprefix(f'{file}: ')}"
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


def is_complete_run(directory: Path) -> bool:
    """True iff ``directory`` is a published run whose manifest says it completed."""
    return complete_manifest(directory) is not None


# --- checksums ---------------------------------------------------------------------------------


def file_digest(path: Path) -> tuple[str, int]:
    """The SHA-256 (hex) and the size in bytes of the file ``path``, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    size = 0
    with open_table(path) as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def file_records(directory: Path, tables: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """The manifest's ``files``: for every table (name → rows) and for ``scenario.yaml``, the
    SHA-256 and size of the file in ``directory`` as it will be published, and a table's rows.
    Only reads the files: their bytes are what the run wrote."""
    records: dict[str, dict[str, Any]] = {}
    for name, rows in sorted(tables.items()):
        digest, size = file_digest(Path(directory) / f"{name}.parquet")
        records[f"{name}.parquet"] = {"sha256": digest, "bytes": size, "rows": rows}
    digest, size = file_digest(Path(directory) / SCENARIO)
    records[SCENARIO] = {"sha256": digest, "bytes": size}
    return records


RunState = Literal["ok", "unverified", "damaged"]


@dataclass(frozen=True)
class RunCheck:
    """What :func:`check_run` found in one run directory.

    ``state`` is ``ok`` (every file matches the manifest's checksums), ``unverified`` (a run
    from before manifests recorded checksums, whose table footers match its manifest) or
    ``damaged``; ``problems`` says what is wrong, one entry per file (``file``, ``text``);
    ``found`` is the SHA-256 of each file whose bytes differ from its record (to recognise
    another run's table)."""

    directory: Path
    run_id: str
    state: RunState
    problems: tuple[tuple[str, str], ...] = ()
    found: Mapping[str, str] | None = None

    @property
    def reasons(self) -> list[str]:
        """The problems as sentences."""
        return [text for _, text in self.problems]


def check_run(directory: Path, manifest: Mapping[str, Any] | None = None) -> RunCheck:
    """Compare a run directory with its manifest (read unless given): see the module
    docstring. Reads every file of the run once (SHA-256) besides the table footers."""
    directory = Path(directory)
    if manifest is None:
        manifest = complete_manifest(directory)
    if manifest is None:
        return RunCheck(
            directory, directory.name, "damaged", ((MANIFEST, manifest_problem(directory)),)
        )
    run_id = str(manifest.get("run_id", directory.name))
    tables = manifest.get("tables")
    if not isinstance(tables, dict) or not tables:
        why = "the manifest lists no tables (every run writes some)"
        return RunCheck(directory, run_id, "damaged", ((MANIFEST, why),))
    records = manifest.get(FILES)
    problems = listing_problems(directory, manifest)
    if any(file == MANIFEST for file, _ in problems):  # names that are paths: nothing is read
        return RunCheck(directory, run_id, "damaged", tuple(problems))
    schemas = manifest.get("schemas") or {}
    for name, rows in tables.items():
        problem = table_problem(directory, name, rows, schemas.get(name))
        if problem is not None:
            problems.append((f"{name}.parquet", problem))
    if records is None:
        written = manifest.get(MANIFEST_FORMAT_KEY)
        if isinstance(written, int) and written >= MANIFEST_FORMAT:
            problems.append((MANIFEST, (
                f"the manifest has no {FILES!r} (checksums), though a manifest of format "
                f"{written} always records them (it was stripped of them)"
            )))  # fmt: skip
        return RunCheck(directory, run_id, "damaged" if problems else "unverified", tuple(problems))
    if not isinstance(records, dict):
        problems.append((MANIFEST, f"the manifest's {FILES!r} is not a mapping"))
        return RunCheck(directory, run_id, "damaged", tuple(problems))
    expected = [f"{name}.parquet" for name in tables] + [SCENARIO]
    for file in sorted(set(records) - set(expected)):
        problems.append((file, f"{file} has a checksum in the manifest but is not in its tables"))
    found: dict[str, str] = {}
    missing = {file for file, text in problems if text.endswith("is missing")}
    for file in expected:
        if file in missing:
            continue
        problem = _record_problem(directory, file, records.get(file), tables, found)
        if problem is not None:
            problems.append((file, problem))
    return RunCheck(directory, run_id, "damaged" if problems else "ok", tuple(problems), found)


def _bad_names(names: Iterable[object], *, suffix: str = "") -> list[str]:
    """The names among ``names`` that are not a plain table name (with ``suffix``)."""
    return [
        repr(name.removesuffix(suffix) if isinstance(name, str) and suffix else name)
        for name in names
        if not (
            isinstance(name, str)
            and name.endswith(suffix)
            and TABLE_NAME.fullmatch(name.removesuffix(suffix) if suffix else name)
        )
    ]


def listing_problems(directory: Path, manifest: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Where the manifest's listings disagree with each other or with the disk: a table name
    that is not a plain name (a problem of :data:`MANIFEST`: no file is read then), a table
    with a schema but not in ``tables``, a ``*.parquet`` in the directory the manifest does not
    list (each a problem of its file)."""
    tables = manifest.get("tables") or {}
    schemas = manifest.get("schemas")
    records = manifest.get(FILES)
    problems: list[tuple[str, str]] = []
    bad = _bad_names(tables)
    if isinstance(schemas, dict):
        bad += _bad_names(schemas)
    if isinstance(records, dict):
        bad += _bad_names((f for f in records if f != SCENARIO), suffix=".parquet")
    if bad:
        names = ", ".join(dict.fromkeys(bad))
        return [(MANIFEST, (
            f"the manifest names the table(s) {names}; a table's name is a plain name (letters, "
            "digits and _ . = + -, not starting with a dot), never a path"
        ))]  # fmt: skip
    if schemas is not None and not isinstance(schemas, dict):
        problems.append((MANIFEST, "the manifest's 'schemas' is not a mapping"))
    for name in sorted(schemas or {}):
        if name not in tables:
            problems.append((f"{name}.parquet", (
                f"table {name} has a schema in the manifest but is not in its tables (a table "
                "dropped from the manifest)"
            )))  # fmt: skip
    collected = set(COLLECTED_FILES)
    for file in sorted(directory.glob("*.parquet")):
        if file.stem not in tables and file.name not in collected:
            problems.append((file.name, (
                f"{file.name} is in the run directory but not in the manifest's tables (a "
                "table dropped from the manifest, or a file put there)"
            )))  # fmt: skip
    return problems


def _record_problem(
    directory: Path,
    file: str,
    record: object,
    tables: Mapping[str, Any],
    found: dict[str, str],
) -> str | None:
    """Why ``file`` does not match its ``record`` in the manifest's ``files`` (its SHA-256 goes
    to ``found`` when its bytes differ), or None."""
    if not isinstance(record, dict) or not isinstance(record.get("sha256"), str):
        return f"the manifest records no checksum of {file}"
    name = file.removesuffix(".parquet")
    if file != SCENARIO and record.get("rows") != tables.get(name):
        return (
            f"the manifest contradicts itself about {file}: {tables.get(name)} rows in its "
            f"tables, {record.get('rows')} in its files"
        )
    try:
        digest, size = file_digest(directory / file)
    except FileNotFoundError:
        return f"{file} is missing"
    except RunDirectoryError as exc:
        return f"{file} {str(exc).removeprefix(f'{directory / file}: ')}"
    except OSError as exc:
        return f"{file} cannot be read ({exc.strerror or exc})"
    if digest == record["sha256"]:
        return None
    found[file] = digest
    recorded = record.get("bytes")
    if size != recorded:
        shown = f"{recorded:,}" if isinstance(recorded, int) else repr(recorded)
        return (
            f"{file} is {size:,} bytes; the manifest records {shown} bytes (the file was "
            "replaced or cut short)"
        )
    return f"{file} does not match the SHA-256 the manifest records (its bytes were changed)"


def name_foreign_files(checks: Iterable[RunCheck], manifests: Mapping[Path, Any]) -> list[RunCheck]:
    """``checks`` with each damaged file that is byte for byte a file another of
    ``manifests`` records (run directory → manifest) named as that run's: a table copied or
    moved from one run into another."""
    owners: dict[str, tuple[str, str]] = {}
    for directory, manifest in manifests.items():
        records = manifest.get(FILES) if isinstance(manifest, dict) else None
        if isinstance(records, dict):
            for file, record in records.items():
                if isinstance(record, dict) and isinstance(record.get("sha256"), str):
                    run_id = str(manifest.get("run_id", Path(directory).name))
                    owners.setdefault(record["sha256"], (run_id, file))
    named = []
    for check in checks:
        problems = list(check.problems)
        for i, (file, _) in enumerate(problems):
            owner = owners.get((check.found or {}).get(file, ""))
            if owner is not None and owner[0] != check.run_id:
                problems[i] = (
                    file,
                    f"{file} is the {owner[1]} of run {owner[0]} (its SHA-256 is the one that "
                    "run's manifest records), not this run's",
                )
        named.append(
            RunCheck(check.directory, check.run_id, check.state, tuple(problems), check.found)
        )
    return named
