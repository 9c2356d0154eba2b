"""A disk cache of the learning yardsticks, so that a sweep computes each one once per data set.

Every learning run prints its accuracy beside yardsticks computed on the same train/test split
(principle 9 of ``docs/architecture.md``): the majority class and a centralised non-private
model (:mod:`netsim.learning.baselines`) and central DP training at the run's budget
(:mod:`netsim.learning.central_dp`). They depend on the split only, yet each run is a fresh
process, so without this cache every run of a sweep fits them again (and imports scikit-learn to
do so) — a second or more per run on data sets the runs themselves cross in milliseconds.

**Where.** Records are small JSON files in ``<cache directory>/yardsticks/``. The cache
directory is ``$NETSIM_CACHE_DIR`` when that is set, else ``$XDG_CACHE_HOME/netsim``, else
``~/.cache/netsim`` (:func:`cache_directory`). ``NETSIM_CACHE_DIR=off`` (or empty) turns the
cache off: every yardstick is computed. ``netsim cache clear`` (or deleting the directory)
empties it; nothing else depends on it.

**Keys.** A record's key (:func:`record_key`) is a SHA-256 of everything that decides its value:
the content of the four arrays (:func:`array_digest`: values, shapes, dtypes — not their file
or their name), the yardstick's parameters (ε, δ, seed), the source code of the modules that
compute it, the versions of the libraries it calls (numpy, scipy, scikit-learn, dp-accounting),
the Python version and the machine (architecture, CPU model and the environment variables that
choose numpy's and BLAS's kernels, :data:`KERNEL_VARIABLES`). A change to any of them is a new
key, so a stale record is never read; old records are just left behind.

**Values** are the yardstick's dataclass, field by field; floats are written as JSON numbers
with Python's shortest round-tripping ``repr`` (and ``NaN``/``Infinity``), so a value read back
is bit for bit the one computed. A record carries the SHA-256 of its kind, key and value
(:func:`record_checksum`). A record is refused, computed again and rewritten when it is not a
regular file (a link, a FIFO, a device), is larger than :data:`MAX_RECORD_BYTES`, cannot be
read, does not parse, does not hold the fields and types of its dataclass, does not match its
checksum, or holds an accuracy outside [0, 1] (:func:`read_record`). Every lookup is recorded
(:func:`recorded_uses`), and a run's manifest lists them under ``yardsticks``: each
yardstick's kind and key and whether it was read from the cache, computed, or replaced a
refused record (with why; the run warns of those). ``netsim cache clear`` deletes only regular
record files and refuses a ``yardsticks`` folder that is a symbolic link. Writes go
through a temporary file and a rename (:func:`netsim.storage.atomic_write_text`): concurrent
workers computing the same key each write a whole, equal file and the last rename wins; a
reader sees a whole file or none. A cache directory that cannot be written is skipped silently
(the value is computed, the run is not affected).

**Hashing** 160 MB of training and test matrices (20,000 × 1,000 dense) takes about 0.08 s;
:func:`array_digest` remembers each array's digest for the life of the array object (a weak
reference), so the yardsticks of one run hash each array once. That memo assumes what the
data sets promise: an array is not written in place once made.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import stat
import sys
import threading
import types
import typing
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from netsim.errors import NetsimError
from netsim.lazy import lazy_module
from netsim.storage import atomic_write_text

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")

#: The environment variable naming the cache directory ("off" or empty: no cache).
CACHE_DIR_VARIABLE = "NETSIM_CACHE_DIR"
#: Values of :data:`CACHE_DIR_VARIABLE` that turn the cache off (compared case-insensitively).
DISABLED_VALUES = ("", "off")
#: The subdirectory of the cache directory that holds the yardsticks' records.
YARDSTICKS = "yardsticks"
#: The layout of a record; a record of another format is ignored. Format 2 records carry the
#: SHA-256 of their kind, key and value (:func:`record_checksum`).
RECORD_FORMAT = 2
#: Most bytes a record may have (a yardstick's record is about 1 KiB): a larger file is not
#: read, so a record that is a device, a huge file or a pipe cannot stall or exhaust a run.
MAX_RECORD_BYTES = 64 * 1024
#: The fields of a yardstick that are accuracies: a fraction in [0, 1], or NaN (no test rows).
ACCURACY_FIELDS = ("accuracy", "validation_accuracy", "majority", "centralised")

T = TypeVar("T")


def cache_directory() -> Path | None:
    """The netsim cache directory, or None when ``$NETSIM_CACHE_DIR`` turns the cache off
    (module docstring, "Where")."""
    chosen = os.environ.get(CACHE_DIR_VARIABLE)
    if chosen is not None:
        if chosen.strip().lower() in DISABLED_VALUES:
            return None
        return Path(chosen).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"  # the XDG rule
    return base / "netsim"


def clear_directory(directory: Path | None = None) -> int:
    """Delete the yardsticks' records under ``directory`` (default :func:`cache_directory`);
    the number of files deleted. Other files in the directory are left alone, and so is
    anything a symbolic link leads to: a ``yardsticks`` folder that is a link is refused
    (:class:`~netsim.errors.NetsimError`), and only regular ``*.json`` files are deleted."""
    directory = cache_directory() if directory is None else directory
    if directory is None:
        return 0
    folder = directory / YARDSTICKS
    if folder.is_symlink():
        raise NetsimError(
            f"{folder}: is a symbolic link; netsim cache clear does not follow it (it would "
            "delete the files where it leads): remove the link yourself"
        )
    if not folder.is_dir():
        return 0
    removed = 0
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.endswith(".json") and entry.is_file(follow_symlinks=False):
                Path(entry.path).unlink(missing_ok=True)
                removed += 1
    return removed


# --- keys ------------------------------------------------------------------------------------


class _Memo:
    """Digests of live array objects by ``id``, each entry dropped when its array is."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: dict[int, tuple[weakref.ref[Any], tuple[Any, ...], str]] = {}

    def get(self, array: Any, layout: tuple[Any, ...]) -> str | None:
        with self.lock:
            entry = self.entries.get(id(array))
        if entry is None or entry[0]() is not array or entry[1] != layout:
            return None
        return entry[2]

    def put(self, array: Any, layout: tuple[Any, ...], digest: str) -> None:
        key = id(array)

        def forget(_: weakref.ref[Any]) -> None:
            with self.lock:
                if key in self.entries and self.entries[key][0]() is None:
                    del self.entries[key]

        try:
            reference = weakref.ref(array, forget)
        except TypeError:  # an object without weak references: not remembered
            return
        with self.lock:
            self.entries[key] = (reference, layout, digest)


_MEMO = _Memo()


def array_digest(array: Any) -> str:
    """SHA-256 of an array's values, shape and dtype: a dense array as C-ordered bytes, a
    scipy sparse matrix as its canonical float64 CSR form (equal matrices hash alike whatever
    their index order or explicit zeros), labels of dtype object by their ``repr``.

    Remembered per array object while it lives (module docstring, "Hashing"); an array whose
    shape, dtype, strides or data buffer changed is hashed again."""
    layout = _layout(array)
    found = _MEMO.get(array, layout)
    if found is not None:
        return found
    digest = hashlib.sha256()
    if sp.issparse(array):
        csr = sp.csr_matrix(array, dtype=np.float64, copy=True)  # the caller's matrix stays
        csr.sum_duplicates()
        csr.sort_indices()
        csr.eliminate_zeros()
        digest.update(f"sparse{csr.shape}".encode())
        for part in (csr.indptr.astype(np.int64), csr.indices.astype(np.int64), csr.data):
            digest.update(np.ascontiguousarray(part))  # its buffer, not a copy
    else:
        dense = np.asarray(array)
        digest.update(f"dense{dense.dtype.str}{dense.shape}".encode())
        if dense.dtype == object:
            digest.update(repr(dense.tolist()).encode())
        else:
            digest.update(np.ascontiguousarray(dense))
    result = digest.hexdigest()
    _MEMO.put(array, layout, result)
    return result


def _layout(array: Any) -> tuple[Any, ...]:
    """What identifies an array object's memory: its type, shape, dtype, strides and buffer
    address (for a sparse matrix, those of its parts)."""
    if sp.issparse(array):
        parts = [getattr(array, name, None) for name in ("data", "indices", "indptr", "row", "col")]
        return (type(array), array.shape, *(_layout(p) for p in parts if p is not None))
    if isinstance(array, np.ndarray):
        return (type(array), array.shape, array.dtype.str, array.strides,
                array.__array_interface__["data"][0])  # fmt: skip
    return (type(array), id(array))


@functools.cache
def _source_digest(module: str) -> str:
    """SHA-256 of a module's source file (the code that computes a yardstick)."""
    path = getattr(sys.modules[module], "__file__", None)
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else module


@functools.cache
def _package_version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


#: Environment variables that choose the numerical kernels numpy and its BLAS run (a value
#: computed under other kernels may differ in its last bits, see ``docs/reproducibility.md``).
KERNEL_VARIABLES = (
    "OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES", "NPY_ENABLE_CPU_FEATURES", "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS", "NUMBA_CPU_NAME",
)  # fmt: skip


@functools.cache
def _processor() -> str:
    """The CPU's model name (Linux), else what :func:`platform.processor` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor()


def _machine() -> dict[str, str]:
    """What decides the floating-point kernels a computation runs: the architecture, the CPU
    model and the environment variables of :data:`KERNEL_VARIABLES` that are set (a cache
    directory shared by several machines keeps one record per kind of machine)."""
    chosen = {name: os.environ[name] for name in KERNEL_VARIABLES if name in os.environ}
    return {"architecture": platform.machine(), "processor": _processor(), **chosen}


def record_key(
    kind: str,
    arrays: Sequence[Any],
    parameters: Mapping[str, Any],
    modules: Sequence[str],
    packages: Sequence[str],
) -> str:
    """The cache key of yardstick ``kind`` on ``arrays`` (x_train, y_train, x_test, y_test)
    with ``parameters`` (JSON values; floats by their exact repr), computed by the code of
    ``modules`` (imported module names) with the libraries ``packages`` (distribution names)."""
    described = {
        "kind": kind,
        "format": RECORD_FORMAT,
        "arrays": [array_digest(a) for a in arrays],
        "parameters": dict(parameters),
        "code": {m: _source_digest(m) for m in modules},
        "packages": {p: _package_version(p) for p in packages},
        "python": platform.python_version(),
        "machine": _machine(),
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


# --- records ---------------------------------------------------------------------------------


def record_path(directory: Path, kind: str, key: str) -> Path:
    """Where the record of ``kind`` under ``key`` lives."""
    return directory / YARDSTICKS / f"{kind}-{key}.json"


@dataclasses.dataclass(frozen=True)
class CacheUse:
    """What one yardstick of a run came from: ``read`` (the cache's record), ``computed``
    (no record, or the cache is off) or ``replaced`` (a record was there but refused:
    ``why``; computed again and rewritten)."""

    kind: str
    key: str
    source: str
    why: str = ""


_USES: list[CacheUse] = []
_USES_LOCK = threading.Lock()


def start_recording() -> None:
    """Forget the uses recorded so far (a run starts: :func:`recorded_uses` then gives its)."""
    with _USES_LOCK:
        _USES.clear()


def recorded_uses() -> list[CacheUse]:
    """The yardsticks looked up since :func:`start_recording`, in order."""
    with _USES_LOCK:
        return list(_USES)


def _record_use(use: CacheUse) -> None:
    with _USES_LOCK:
        _USES.append(use)


def cached(kind: str, key: str, cls: type[T], compute: Callable[[], T]) -> T:
    """The value of dataclass ``cls`` stored under ``key``, or ``compute()`` — stored for the
    next time — when there is none, it is refused (:func:`read_record`), or the cache is off.
    Each lookup is recorded (:func:`recorded_uses`): a run's manifest says which of its
    yardsticks came from the cache, under which key, and which records were refused."""
    directory = cache_directory()
    if directory is None:
        _record_use(CacheUse(kind, key, "computed", "the cache is off"))
        return compute()
    path = record_path(directory, kind, key)
    found, why = read_record(path, kind, key, cls)
    if found is not None:
        _record_use(CacheUse(kind, key, "read"))
        return found
    _record_use(CacheUse(kind, key, "computed" if why == "missing" else "replaced", why))
    value = compute()
    store_record(path, kind, key, value)
    return value


def load_record(path: Path, kind: str, key: str, cls: type[T]) -> T | None:
    """The value stored at ``path``, or None when :func:`read_record` refuses it."""
    return read_record(path, kind, key, cls)[0]


def _bounded_text(path: Path) -> tuple[str | None, str]:
    """The text of the regular file ``path`` of at most :data:`MAX_RECORD_BYTES`, or None
    and why not. Opened without following a link and without blocking (a FIFO is refused
    before it is waited on), and read no further than the limit."""
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        return None, f"unreadable ({exc.strerror})"
    if not stat.S_ISREG(status.st_mode):
        return None, "not a regular file"
    if status.st_size > MAX_RECORD_BYTES:
        return None, f"{status.st_size:,} bytes, more than a record's {MAX_RECORD_BYTES:,}"
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        return None, f"unreadable ({exc.strerror})"
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            return None, "not a regular file"
        data = file.read(MAX_RECORD_BYTES + 1)
    if len(data) > MAX_RECORD_BYTES:
        return None, f"more than a record's {MAX_RECORD_BYTES:,} bytes"
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError:
        return None, "not UTF-8"


def record_checksum(kind: str, key: str, value: Mapping[str, Any]) -> str:
    """The SHA-256 a record carries of its kind, key and value (canonical JSON): a record
    damaged or edited by hand without it no longer matches."""
    canonical = json.dumps(
        {"kind": kind, "key": key, "value": value}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def read_record(path: Path, kind: str, key: str, cls: type[T]) -> tuple[T | None, str]:
    """The value stored at ``path`` and "", or None and why it is refused: missing, not a
    regular file, larger than :data:`MAX_RECORD_BYTES`, unreadable, not JSON, of another
    format, kind or key, a checksum that does not match (:func:`record_checksum`), not exactly
    the fields and types of ``cls``, or an accuracy outside [0, 1]."""
    text, why = _bounded_text(path)
    if text is None:
        return None, why
    try:
        record = json.loads(text)
    except ValueError:
        return None, "not JSON"
    if not isinstance(record, dict) or (
        record.get("format"),
        record.get("kind"),
        record.get("key"),
    ) != (RECORD_FORMAT, kind, key):
        return None, "of another format, kind or key"
    value = record.get("value")
    if not isinstance(value, dict) or not _fits(cls, value):
        return None, f"not the fields and types of {cls.__name__}"
    if record.get("sha256") != record_checksum(kind, key, value):
        return None, "its checksum does not match its contents"
    implausible = [
        name for name in ACCURACY_FIELDS
        if isinstance(value.get(name), float) and not (
            math.isnan(value[name]) or 0.0 <= value[name] <= 1.0
        )
    ]  # fmt: skip
    if implausible:
        return None, f"{implausible[0]} {value[implausible[0]]!r} is not a fraction in [0, 1]"
    return cls(**value), ""


def store_record(path: Path, kind: str, key: str, value: Any) -> None:
    """Write ``value`` (a dataclass) as the record of ``kind`` under ``key`` with its
    checksum, atomically; a directory that cannot be written is skipped."""
    fields = dataclasses.asdict(value)
    text = json.dumps(
        {"format": RECORD_FORMAT, "kind": kind, "key": key, "value": fields,
         "sha256": record_checksum(kind, key, fields)},
        indent=1,
    )  # fmt: skip
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text + "\n")
    except OSError:
        pass  # a read-only or full cache costs the next run a recomputation, nothing more


def _fits(cls: type, value: dict[str, Any]) -> bool:
    """Whether ``value`` holds exactly the fields of dataclass ``cls``, each of its type
    (an int is not taken for a float, nor a bool for an int)."""
    fields = {f.name for f in dataclasses.fields(cls)}
    if set(value) != fields:
        return False
    hints = typing.get_type_hints(cls)
    return all(_is_instance(value[name], hints[name]) for name in fields)


def _is_instance(item: Any, hint: Any) -> bool:
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    return any((item is None) if kind is type(None) else (type(item) is kind) for kind in allowed)
