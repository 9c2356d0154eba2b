"""Reading files with bounds: only regular files, and never more bytes than a kind allows.

A path can name something that is not a file: a FIFO (reading it waits for a writer, for
ever), a device (``/dev/zero`` never ends), a directory. And a regular file can be far larger
than anything netsim should read. Every file netsim reads is opened here: the open does not
block (``O_NONBLOCK``, so a FIFO is seen and refused instead of waited on), the opened file
must be a regular file, and its size must be within the bound of its kind, each stated in the
message that refuses it:

==========================  ===========================================================
scenario and sweep files     :data:`MAX_SCENARIO_BYTES` (YAML; also the parameter files
                             of ``netsim trace synth``)
edge lists                   :data:`MAX_EDGE_LIST_BYTES`
churn traces                 :data:`MAX_TRACE_BYTES`
data sets                    :data:`MAX_DATA_BYTES` (on disk, and again once gunzipped)
run-directory records        :data:`MAX_RECORD_BYTES` (``manifest.json``, ``sweep.json``,
                             failure records, a run's ``scenario.yaml``)
run-directory tables         :data:`MAX_TABLE_BYTES` (the Parquet tables of runs and sweeps)
==========================  ===========================================================
"""

from __future__ import annotations

import fcntl
import io
import os
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from netsim.errors import NetsimError

MiB = 1 << 20
GiB = 1 << 30
#: A scenario or sweep file (YAML holds at most 200,000 values anyway).
MAX_SCENARIO_BYTES = 64 * MiB
#: A topology's edge list (``topology.kind: edge_list``).
MAX_EDGE_LIST_BYTES = 1 * GiB
#: A churn trace (canonical CSV or Parquet, STUNner, FTA); the STUNner trace is ~0.4 GiB.
MAX_TRACE_BYTES = 4 * GiB
#: A data set file (CSV, LIBSVM, idx), before and after gunzipping.
MAX_DATA_BYTES = 2 * GiB
#: A JSON or YAML record netsim writes next to its tables.
MAX_RECORD_BYTES = 64 * MiB
#: One Parquet table of a run or a sweep.
MAX_TABLE_BYTES = 64 * GiB

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def size_text(size: int) -> str:
    """A byte count as a person reads it (``64 MiB``, ``3.2 GiB``, ``512 bytes``)."""
    if size < 1024:
        return f"{size} bytes"
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value.is_integer() else f"{value:.1f} {unit}"
    raise AssertionError  # pragma: no cover


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def open_regular(
    path: Path, *, what: str, limit: int, error: type[NetsimError] = NetsimError
) -> BinaryIO:
    """Open ``path`` for reading in binary if it is a regular file of at most ``limit``
    bytes; else raise ``error`` naming the path, what it is and the bound (``what`` names the
    kind of file in the message, e.g. "scenario file").

    A missing or unreadable path raises the ``OSError`` of ``open`` (callers word those).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(
                f"{path}: is {_kind(info.st_mode)}, not a regular file; a {what} must be a "
                "regular file"
            )
        check_size(path, info.st_size, what=what, limit=limit, error=error)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_text(
    path: Path,
    *,
    what: str,
    limit: int,
    error: type[NetsimError] = NetsimError,
    newline: str | None = None,
) -> io.TextIOWrapper:
    """:func:`open_regular` as UTF-8 text, for readers that stream line by line."""
    handle = open_regular(path, what=what, limit=limit, error=error)
    return io.TextIOWrapper(handle, encoding="utf-8", newline=newline)


def check_size(
    path: Path, size: int, *, what: str, limit: int, error: type[NetsimError] = NetsimError
) -> None:
    """Refuse ``size`` bytes of ``path`` when more than ``limit``, naming the bound."""
    if size > limit:
        raise error(
            f"{path}: {size_text(size)}; a {what} may be at most {size_text(limit)} (netsim "
            "refuses larger files rather than read them)"
        )


#: Longest file name (one path component) the common Linux and macOS file systems accept, in
#: bytes of its UTF-8 encoding (``NAME_MAX``).
MAX_FILE_NAME_BYTES = 255


def file_name_problem(name: str) -> str | None:
    """Why the file system would refuse ``name`` as the name of a file or directory it is to
    create (a NUL, a ``/``, more than :data:`MAX_FILE_NAME_BYTES` bytes), or why netsim does
    (control characters, which terminals and messages would print as something else, and a
    leading ``.``: hidden, and ``.`` and ``..`` name other directories); None if it may be one.
    """
    if not name:
        return "it is empty"
    if "\0" in name:
        return "it contains a NUL character"
    if "/" in name:
        return "it contains '/'"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "it contains a control character"
    if name.startswith("."):
        return "it starts with '.'"
    encoded = name.encode("utf-8", errors="surrogatepass")
    if len(encoded) > MAX_FILE_NAME_BYTES:
        return f"it is {len(encoded)} bytes long in UTF-8"
    return None


def read_bytes(
    path: Path, *, what: str, limit: int, error: type[NetsimError] = NetsimError
) -> bytes:
    """The bytes of the regular file ``path`` (see :func:`open_regular`); a file that grows
    past ``limit`` while it is read is refused too."""
    with open_regular(path, what=what, limit=limit, error=error) as handle:
        data = handle.read(limit + 1)
    check_size(path, len(data), what=what, limit=limit, error=error)
    return data


def read_text(path: Path, *, what: str, limit: int, error: type[NetsimError] = NetsimError) -> str:
    """:func:`read_bytes` decoded as UTF-8 (``UnicodeDecodeError`` for callers to word)."""
    return read_bytes(path, what=what, limit=limit, error=error).decode("utf-8")


#: Most decompressed bytes :func:`gunzip` asks zlib for at a time.
GUNZIP_PIECE = 1 * MiB
#: Most decompressed bytes :func:`gunzip` keeps before it knows the total: past this it only
#: counts, and decompresses again once the total is known to be within the bound, so refusing a
#: gzip bomb never holds more than this much of its output (the data sets netsim ships and
#: reads, MNIST among them, inflate to less, so they are decompressed once).
GUNZIP_KEEP = 16 * MiB


def gunzip(
    path: Path, data: bytes, *, what: str, limit: int, error: type[NetsimError] = NetsimError
) -> bytes:
    """The gzip ``data`` of ``path`` decompressed, refused once it passes ``limit`` bytes (a
    small file can expand a thousandfold: 2.3 MB of zeros inflate to 2.3 GiB).

    The bound is applied as the stream inflates, :data:`GUNZIP_PIECE` bytes at a time: output
    up to :data:`GUNZIP_KEEP` bytes is kept and returned; a larger output is only counted, and
    decompressed a second time once its size is known to be within ``limit``. Raises
    ``zlib.error`` or ``EOFError`` for a corrupt or truncated stream.
    """
    kept: list[bytes] | None = []
    size = 0
    for piece in _inflated_pieces(data):
        size += len(piece)
        if size > limit:
            raise error(
                f"{path}: more than {size_text(limit)} once decompressed; a {what} may be at "
                f"most {size_text(limit)}"
            )
        if kept is not None and size <= GUNZIP_KEEP:
            kept.append(piece)
        else:
            kept = None  # too large to keep: count the rest, then decompress again
    if kept is not None:
        return b"".join(kept)
    return b"".join(_inflated_pieces(data))


def _inflated_pieces(data: bytes) -> Iterator[bytes]:
    """The decompressed bytes of every gzip member of ``data`` in order (as ``gzip.decompress``
    reads them), in pieces of at most :data:`GUNZIP_PIECE` bytes."""
    inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    pending = data
    while True:
        piece = inflate.decompress(pending, GUNZIP_PIECE)
        if piece:
            yield piece
        pending = inflate.unconsumed_tail
        if inflate.eof:
            if not inflate.unused_data:
                return
            pending = inflate.unused_data  # a second gzip member follows
            inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        elif not pending and not piece:  # input used up, no output left: no end marker
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
