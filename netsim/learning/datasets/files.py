"""Users' own files, in two formats: ``csv`` (a header row, one label column named by ``label``,
every other column numeric) and ``libsvm`` (LIBSVM / svmlight, read with scikit-learn's
``load_svmlight_file`` and densified, within :data:`~netsim.learning.datasets.base.
MAX_FEATURES` and :data:`~netsim.learning.datasets.base.MAX_DATA_VALUES`)."""

from __future__ import annotations

import io
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np

from netsim.contracts import LoadedData
from netsim.errors import DataError
from netsim.learning.datasets.base import (
    MAX_DATA_VALUES,
    MAX_FEATURES,
    BuiltinDataset,
    BuiltinDatasetConfig,
    given_path,
    label_text,
    listing,
    numbered_classes,
)
from netsim.learning.datasets.reading import (
    not_a_number,
    numeric_columns,
    read_bytes,
    read_table,
    table_classes,
)


class CsvFile(BuiltinDataset):
    """A user's CSV file: a header row, the label column ``label`` names (by name or 0-based
    index), every other column a numeric feature."""

    class Config(BuiltinDatasetConfig):
        """The ``csv`` format takes ``path`` (the file) and ``label`` (its label column)."""

    path_hint = "the CSV file (a header row; give label= as well)"
    takes_label = True
    user_format = True

    def load(self, path: Path | None, label: str | int | None) -> LoadedData:
        """The feature columns and the label column of the file."""
        return _load_user_csv(given_path(path), label)


class LibsvmFile(BuiltinDataset):
    """A user's LIBSVM / svmlight file (``<label> [qid:<n>] <index>:<value> ...`` per line),
    made dense."""

    class Config(BuiltinDatasetConfig):
        """The ``libsvm`` format takes ``path``, the file."""

    path_hint = "the LIBSVM / svmlight file"
    user_format = True

    def load(self, path: Path | None, label: str | int | None) -> LoadedData:
        """The file's rows, densified, and their labels."""
        return _load_libsvm(given_path(path))


def _load_user_csv(path: Path, label: str | int | None) -> LoadedData:
    """The columns of the CSV file ``path`` other than ``label``, and its labels."""
    if label is None:
        raise DataError(
            f"{path}: the 'csv' format needs label= (the label column's name or 0-based index)"
        )
    table = read_table(path, header=True)
    assert table.names is not None
    names = table.names
    columns = f"the columns are {listing(names)} (or give a 0-based index 0..{len(names) - 1})"
    if isinstance(label, str):
        hits = [j for j, c in enumerate(names) if c == label.strip()]
        if not hits:
            raise DataError(
                f"{path}:line {table.header_line}: no label column {label!r}; {columns}"
            )
        if len(hits) > 1:
            raise DataError(
                f"{path}:line {table.header_line}: column name {label!r} occurs {len(hits)} "
                f"times (indices {hits}); give the label column's 0-based index"
            )
        column = hits[0]
    elif isinstance(label, Integral) and not isinstance(label, bool):
        if not 0 <= int(label) < len(names):
            raise DataError(f"{path}: label column index {label} is out of range; {columns}")
        column = int(label)
    else:
        raise DataError(f"{path}: label= must be a column name or a 0-based index, got {label!r}")
    features = [j for j in range(len(names)) if j != column]
    if not features:
        raise DataError(f"{path}: the label column is the only column; no features")
    x = numeric_columns(table, features)
    y, classes = table_classes(table, column)
    source = f"{path} (user CSV file, label {table.column(column)})"
    return LoadedData(x, y, source, classes=classes, origin=str(path))


def _load_libsvm(path: Path) -> LoadedData:
    """The rows of the LIBSVM file ``path``, densified, and their labels."""
    from sklearn.datasets import load_svmlight_file

    data = read_bytes(path)
    try:
        matrix, target = load_svmlight_file(io.BytesIO(data))
    except (ValueError, OverflowError) as exc:
        _diagnose_libsvm(path, data)
        raise DataError(f"{path}: not a valid LIBSVM / svmlight file: {exc}") from None
    _check_dense_size(path, matrix, data)
    x = np.asarray(matrix.toarray(), dtype=np.float64)
    if not (np.isfinite(x).all() and np.isfinite(target).all()):
        _diagnose_libsvm(path, data)
        raise DataError(f"{path}: NaN or infinite values")  # pragma: no cover
    if len(target) == 0:
        raise DataError(f"{path}: no data rows (only blank or comment lines)")
    y, names = numbered_classes(
        [label_text(float(v)) for v in target],
        lambda i: f"{path}: data row {i + 1}",
        f"{path}: the labels",
    )
    source = f"{path} (user LIBSVM / svmlight file, read with sklearn load_svmlight_file)"
    return LoadedData(x, y, source, classes=names, origin=str(path))


def _check_dense_size(path: Path, matrix: Any, data: bytes) -> None:
    """Refuse a LIBSVM file whose largest feature index, or whose rows × features once made
    dense, pass :data:`MAX_FEATURES` or :data:`MAX_DATA_VALUES` (before allocating them)."""
    rows, columns = matrix.shape
    if columns > MAX_FEATURES:
        _diagnose_libsvm(path, data)  # names the line of an index past the bound
        raise DataError(
            f"{path}: {columns:,} features (one column per feature index: rows are made "
            f"dense); at most {MAX_FEATURES:,}"
        )
    if rows * columns > MAX_DATA_VALUES:
        raise DataError(
            f"{path}: {rows:,} rows × {columns:,} features = {rows * columns:,} values once "
            f"made dense; at most {MAX_DATA_VALUES:,} (8 GB)"
        )


def _diagnose_libsvm(path: Path, data: bytes) -> None:
    """Raise a DataError naming the first malformed line of a LIBSVM file, if one is found."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"{path}:line {line}: not UTF-8 text (byte {exc.start})") from None
    form = "a LIBSVM line is '<label> [qid:<n>] <index>:<value> ...' with increasing indices"
    for n, raw in enumerate(text.splitlines(), 1):
        tokens = raw.split("#", 1)[0].split()
        if not tokens:
            continue
        problem = not_a_number(tokens[0])
        if problem:
            raise DataError(f"{path}:line {n}: label {problem}; {form}")
        previous = -1
        for position, token in enumerate(tokens[1:]):
            key, colon, value = token.partition(":")
            if position == 0 and key == "qid" and value.isdigit():
                continue
            if not colon or not key.isdigit():
                raise DataError(f"{path}:line {n}: {token!r} is not <index>:<value>; {form}")
            problem = not_a_number(value)
            if problem:
                raise DataError(f"{path}:line {n}: feature {key}: {problem}; {form}")
            if int(key) <= previous:
                raise DataError(
                    f"{path}:line {n}: feature index {key} after {previous}; indices must be "
                    f"increasing; {form}"
                )
            previous = int(key)
            if previous > MAX_FEATURES:
                raise DataError(
                    f"{path}:line {n}: feature index {previous:,} is above {MAX_FEATURES:,}, "
                    "the most features a data set may have"
                )
