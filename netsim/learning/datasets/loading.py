"""Loading a data set by name: the registered loader reads it, its classes are numbered, and it is
split at random into training, test and (optionally) validation rows
(``numpy.random.default_rng(split_seed)``, never the global random state; each part keeps the
file order of its rows)."""

from __future__ import annotations

import math
from numbers import Integral, Real
from pathlib import Path

import numpy as np

from netsim.contracts import DatasetLoader, LoadedData
from netsim.errors import ComponentError, DataError
from netsim.learning.datasets.base import (
    BuiltinDataset,
    Dataset,
    label_text,
    listing,
    numbered_classes,
    random_split_sentence,
    registered_names,
)

Numbered = tuple[np.ndarray, np.ndarray, tuple[str, ...], str, str]
"""features, class indices, class names, the file to name in split errors, source."""


def load_dataset(
    name: str,
    *,
    path: Path | str | None = None,
    label: str | int | None = None,
    split_seed: int = 0,
    test_fraction: float | None = None,
    validation_fraction: float | None = None,
) -> Dataset:
    """Load the data set ``name`` (one of :data:`~netsim.learning.datasets.BUILTIN` or
    :data:`~netsim.learning.datasets.USER_FORMATS`), split.

    ``path`` is required for ``adult`` (the CSV file), ``mnist`` (the directory holding
    ``t10k-images-idx3-ubyte.gz`` and ``t10k-labels-idx1-ubyte.gz``), ``mnist5k``
    (``mnist_5k.csv.gz`` or its directory), ``csv`` and ``libsvm`` (the file), and refused for
    the others. ``label`` (the label column's name or 0-based index) is required for ``csv`` and
    refused for the others. ``split_seed`` seeds the random split; ``test_fraction`` (in (0, 1))
    overrides the default share of test rows, rounded to the nearest whole row count;
    ``validation_fraction`` (in (0, 1)) holds that share of all rows out of the training part as
    a validation part (:func:`validation_rows`; none by default), so the test rows are those of
    the same seed without one. The
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
    if validation_fraction is not None:
        _check_fraction(validation_fraction, "validation_fraction", "tuning")
    loader = dataset_loader(name)
    file = Path(path) if path is not None else None
    loader.check_arguments(file, label)
    x, y, classes, origin, source = _numbered(name, loader.load(file, label))
    test, validation, split = _split_rows(
        loader, len(y), origin, int(split_seed), test_fraction, validation_fraction
    )
    train = ~test & ~validation
    return Dataset(
        name=name,
        x_train=x[train],
        y_train=y[train],
        x_test=x[test],
        y_test=y[test],
        class_names=classes,
        source=source,
        split=split,
        x_validation=x[validation],
        y_validation=y[validation],
    )


def _split_rows(
    loader: DatasetLoader,
    n: int,
    origin: str,
    split_seed: int,
    test_fraction: float | None,
    validation_fraction: float | None,
) -> tuple[np.ndarray, np.ndarray, str]:
    """Which of ``n`` rows are test rows and which validation rows (boolean masks), drawn by
    ``numpy.random.default_rng(split_seed)`` (the test rows first), and the sentence that
    says so."""
    n_test, how = loader.test_rows(n, test_fraction)
    if n_test < 1 or n - n_test < 1:
        raise DataError(
            f"{origin}: {how} of {n} rows leaves {n - n_test} training and {n_test} test rows; "
            "each side needs at least 1 row"
        )
    rng = np.random.default_rng(split_seed)
    test = np.zeros(n, dtype=bool)
    test[rng.permutation(n)[:n_test]] = True
    describe = (
        loader.describe_split if isinstance(loader, BuiltinDataset) else random_split_sentence
    )
    split = describe(n, n_test, how, split_seed)
    validation = np.zeros(n, dtype=bool)
    if validation_fraction is not None:
        validation = validation_rows(rng, test, validation_fraction, origin)
        split += (
            f" Of the training rows, {int(validation.sum()):,} (validation_fraction "
            f"{float(validation_fraction):g} of all rows, drawn next from the same seed) are "
            "the validation split, in file order."
        )
    return test, validation, split


def validation_rows(
    rng: np.random.Generator, test: np.ndarray, fraction: float, origin: str
) -> np.ndarray:
    """Which rows form the validation split: ``fraction`` of all rows (rounded to the nearest
    row), drawn from the rows that are not ``test`` by the split's own generator ``rng`` after
    the test rows were drawn, so a validation part never changes which rows are tested and
    the training part is what is left.

    Raises:
        DataError: the fraction leaves no validation row or no training row.
    """
    n = test.size
    rest = np.flatnonzero(~test)
    n_validation = math.floor(fraction * n + 0.5)
    if n_validation < 1 or rest.size - n_validation < 1:
        raise DataError(
            f"{origin}: validation_fraction {fraction:g} of {n} rows asks for {n_validation} "
            f"validation rows of the {rest.size} that are not test rows; the training and the "
            "validation part each need at least 1 row"
        )
    chosen = np.zeros(n, dtype=bool)
    chosen[rest[rng.permutation(rest.size)[:n_validation]]] = True
    return chosen


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
        formats = listing(registered_names(user_formats=True))
        raise DataError(
            f"unknown data set {name!r}; the registered data sets are "
            f"{listing(dataset_names())} (users' own files load with {formats}: "
            "give path=, and label= for csv), or a loader class as package.module:Class"
        ) from None
    assert isinstance(loader, DatasetLoader)
    return loader


def _numbered(name: str, loaded: LoadedData) -> Numbered:
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
    y, classes = numbered_classes(
        [label_text(float(v)) if isinstance(v, Real) else str(v) for v in labels.tolist()],
        lambda i: f"{where}, row {i + 1}",
        where,
    )
    return x, y, classes, origin, loaded.source


def _check_fraction(
    fraction: object, key: str = "test_fraction", purpose: str = "testing"
) -> None:
    """Refuse a ``test_fraction`` (or ``validation_fraction``) that is not a number in (0, 1)."""
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, Real)
        or not 0.0 < float(fraction) < 1.0
    ):
        raise DataError(
            f"{key} must be a number in (0, 1) (the share of rows held out for "
            f"{purpose}), got {fraction!r}"
        )
