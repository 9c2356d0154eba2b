"""Reading data files: bytes (gunzipped when gzip), UTF-8 text, and comma-separated tables
whose every row remembers the (1-based) line it starts on, so that a bad cell is named by file,
line and column (:class:`Table`)."""

from __future__ import annotations

import csv
import io
import itertools
import math
import operator
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from netsim import files
from netsim.errors import DataError
from netsim.learning.datasets.base import listing, numbered_classes


def read_bytes(path: Path) -> bytes:
    """The bytes of ``path``, gunzipped when they start with the gzip magic number: a regular
    file of at most :data:`~netsim.files.MAX_DATA_BYTES`, before and after gunzipping."""
    bound = {"what": "data file", "limit": files.MAX_DATA_BYTES, "error": DataError}
    try:
        data = files.read_bytes(path, **bound)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read the file: {exc.strerror or exc}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = files.gunzip(path, data, **bound)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataError(f"{path}: truncated or corrupt gzip file ({exc})") from None
    return data


def read_text(path: Path) -> str:
    """The text of ``path`` (see :func:`read_bytes`), which must be UTF-8 and not empty."""
    data = read_bytes(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"{path}:line {line}: not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise DataError(f"{path}: the file is empty")
    return text


@dataclass
class Table:
    """The rows of a delimited text file, each with the (1-based) line it starts on."""

    path: Path
    names: list[str] | None
    rows: list[list[str]]
    lines: list[int]
    header_line: int = 0
    preamble: list[list[str]] | None = None

    def column(self, j: int) -> str:
        """How messages name column ``j`` (0-based): by header name, else 1-based number."""
        if self.names is not None:
            return f"column {self.names[j]!r}"
        return f"column {j + 1}"

    def at(self, i: int, j: int | None = None) -> str:
        """``path:line N`` (and the column) of row ``i``, for messages."""
        where = f"{self.path}:line {self.lines[i]}"
        return where if j is None else f"{where}, {self.column(j)}"


def read_table(
    path: Path, *, header: bool, skip: int = 0, columns: Sequence[str] | None = None
) -> Table:
    """Parse ``path`` as comma-separated rows, skipping ``skip`` leading lines and blank lines.

    With ``header`` the first row (after ``skip``) names the columns; ``columns`` (if given) are
    the names it must hold, once each, in any order. Every row must have as many columns as the
    header (or, without one, as the first row).
    """
    text = read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[list[str]] = []
    lines: list[int] = []
    names: list[str] | None = None
    preamble: list[list[str]] = []
    header_line = 0
    previous = 0
    try:
        for record in reader:
            start, previous = previous + 1, reader.line_num
            if start <= skip:
                preamble.append(record)
                continue
            if not record or (len(record) == 1 and not record[0].strip()):
                continue
            if header and names is None:
                names = [c.strip() for c in record]
                header_line = start
                if columns is not None:
                    _check_header(path, start, names, columns)
                continue
            rows.append(record)
            lines.append(start)
    except csv.Error as exc:
        raise DataError(f"{path}:line {reader.line_num}: not valid CSV: {exc}") from None
    if not rows:
        what = "no data rows after the header" if names is not None else "no data rows"
        raise DataError(f"{path}: {what}")
    expected = len(names) if names is not None else len(rows[0])
    counts = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    bad = np.flatnonzero(counts != expected)
    if bad.size:
        i = int(bad[0])
        basis = (
            f"as in the header on line {header_line}"
            if names is not None
            else f"as in the first row, line {lines[0]}"
        )
        raise DataError(
            f"{path}:line {lines[i]}: expected {expected} columns ({basis}), found {counts[i]}"
        )
    return Table(path, names, rows, lines, header_line, preamble)


def _check_header(path: Path, line: int, names: list[str], columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in names]
    unexpected = [c for c in names if c not in columns]
    repeated = sorted({c for c in names if names.count(c) > 1})
    if missing or unexpected or repeated:
        raise DataError(
            f"{path}:line {line}: the header must name the columns {listing(columns)} once "
            f"each, in any order; missing {missing}, unexpected {unexpected}, repeated {repeated}"
        )


def numeric_columns(table: Table, columns: Sequence[int]) -> np.ndarray:
    """The cells of ``columns`` as a float64 array (rows, len(columns)); every cell a number."""
    n, k = len(table.rows), len(columns)
    if k == 0:
        return np.zeros((n, 0))
    if k == 1:
        flat: Iterable[str] = map(operator.itemgetter(columns[0]), table.rows)
    else:
        flat = itertools.chain.from_iterable(map(operator.itemgetter(*columns), table.rows))
    try:
        values = np.fromiter(map(float, flat), dtype=np.float64, count=n * k).reshape(n, k)
    except ValueError:
        values = None
    if values is not None:
        bad = np.flatnonzero(~np.isfinite(values).all(axis=1))
        if not bad.size:
            return values
        start = int(bad[0])
    else:
        start = 0
    for i in range(start, n):
        row = table.rows[i]
        for j in columns:
            cell = row[j]
            problem = not_a_number(cell)
            if problem:
                raise DataError(f"{table.at(i, j)}: {problem}; feature columns must be numeric")
    raise AssertionError("a cell failed to convert but none was found")  # pragma: no cover


def not_a_number(cell: str) -> str | None:
    """Why ``cell`` is not a finite number, or None when it is one."""
    if not cell.strip():
        return "empty cell (a missing value)"
    try:
        value = float(cell)
    except ValueError:
        return f"{cell.strip()!r} is not a number"
    if math.isnan(value):
        return f"{cell.strip()!r} is a missing value (NaN)"
    if math.isinf(value):
        return f"{cell.strip()!r} is not a finite number"
    return None


def table_classes(
    table: Table, column: int, *, allowed: Sequence[str] | None = None
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Class indices and names of the labels in ``column`` of ``table`` (see
    :func:`~netsim.learning.datasets.base.numbered_classes`)."""
    raw = [row[column] for row in table.rows]
    origin = f"{table.path}: label {table.column(column)}"
    return numbered_classes(raw, lambda i: table.at(i, column), origin, allowed=allowed)


def bundled_file(filename: str) -> Path:
    """The path of ``filename`` among the data files bundled with netsim (``data/README.md``)."""
    return Path(str(resources.files("netsim.learning") / "data" / filename))
