"""What every data set is: a :class:`Dataset` split, and :class:`BuiltinDataset`, the base of the
loaders netsim registers (one class per data set or file format, each under its own name in
:data:`netsim.registry.BUILTIN`, the one list of their names).

A built-in loader says in class attributes what it takes (a path or none, a label column or
none), its default share of test rows and where its file lives; :meth:`BuiltinDataset.
check_arguments` turns them into the messages :func:`~netsim.learning.datasets.load_dataset`
raises. Class labels are numbered here (:func:`numbered_classes`): sorted, numerically when every
label is a number.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from netsim.contracts import ComponentConfig, DatasetLoader
from netsim.errors import DataError

#: Most values (rows × features, as float64: 8 GB) a data set may hold once densified; a
#: LIBSVM file past it is refused before its rows are made dense.
MAX_DATA_VALUES = 10**9
#: Most features a data set may have (a LIBSVM feature index is at most this; the generated
#: data sets' ``features`` too).
MAX_FEATURES = 10**7

UCI = "Dua & Graff, UCI Machine Learning Repository, CC BY 4.0"
SHARED = "../shared/data"  # where this project keeps the data that is not bundled


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
    """A labelled data set split into a training, a test and (optionally) a validation part.

    ``x_*`` are float64 arrays of shape (rows, features); ``y_*`` are int64 class indices in
    ``[0, classes)``; ``class_names[k]`` is the original label of class ``k`` as text. ``source``
    says where the data came from (files, citation) and ``split`` in one sentence which split was
    used. The validation part (``x_validation``, ``y_validation``) holds the rows a researcher
    tunes on, so that the test rows are used once; without one it has no rows (``None`` is
    made an empty part). The constructor checks the shapes and converts the arrays to those
    dtypes. Instances compare by identity (``eq=False``): the fields are arrays.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    class_names: tuple[str, ...]
    source: str
    split: str
    x_validation: np.ndarray | None = None
    y_validation: np.ndarray | None = None

    def __post_init__(self) -> None:
        names = tuple(str(c) for c in self.class_names)
        object.__setattr__(self, "class_names", names)
        if self.x_validation is None or self.y_validation is None:
            object.__setattr__(self, "x_validation", np.empty((0, np.shape(self.x_train)[1])))
            object.__setattr__(self, "y_validation", np.empty(0, dtype=np.int64))
        for part in ("train", "test", "validation"):
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

    @property
    def n_validation(self) -> int:
        """The number of validation rows (0 without a validation part)."""
        return len(self.y_validation)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------
# The built-in loaders


class BuiltinDatasetConfig(ComponentConfig):
    """A built-in data set has no settings of its own: the scenario's data-set section passes
    ``path`` and ``label`` to it, and ``split_seed`` and ``test_fraction`` to the split."""


class BuiltinDataset(DatasetLoader):
    """Base of the data sets netsim ships or reads from known files and of the ``csv`` /
    ``libsvm`` formats: each subclass is one of them, registered under its name (see
    :func:`~netsim.learning.datasets.load_dataset`)."""

    Config = BuiltinDatasetConfig
    #: Where the data comes from when the loader reads no path (``needs_path`` False), for the
    #: message that refuses one: "is bundled with netsim", "comes with scikit-learn".
    comes_with: ClassVar[str] = ""
    #: What ``path`` must name, for the message that asks for it.
    path_hint: ClassVar[str] = ""
    #: Whether the loader takes ``label`` (the label column of a user's file).
    takes_label: ClassVar[bool] = False
    #: Whether the loader reads a user's own file in a format (``csv``, ``libsvm``) rather
    #: than one known data set.
    user_format: ClassVar[bool] = False

    @property
    def name(self) -> str:
        """The name the loader is registered (or was named) under."""
        return str(self.config.kind)  # type: ignore[attr-defined]

    def check_arguments(self, path: Path | None, label: str | int | None) -> None:
        """Refuse ``label`` unless the loader takes one, and ``path`` unless it needs one (or
        its absence when it does), naming what the data set is and what to give."""
        name = self.name
        if label is not None and not self.takes_label:
            raise DataError(
                f"label= is only for the 'csv' format (got label={label!r} for {name!r}); the "
                "other data sets know their label"
            )
        if not self.needs_path:
            if path is not None:
                raise DataError(
                    f"data set {name!r} {self.comes_with}; do not give path= (got {path})"
                )
        elif path is None:
            raise DataError(f"data set {name!r} needs path=: {self.path_hint}")

    def describe_split(self, rows: int, test_rows: int, how: str, split_seed: int) -> str:
        """The sentence that says how the ``rows`` were split (``how``: the test share)."""
        return random_split_sentence(rows, test_rows, how, split_seed)


def random_split_sentence(rows: int, test_rows: int, how: str, split_seed: int) -> str:
    """The sentence of a random split of ``rows`` rows, ``test_rows`` of them for testing."""
    return (
        f"Random split (numpy default_rng seed {split_seed}, {how}) of the {rows:,} rows into "
        f"{rows - test_rows:,} training and {test_rows:,} test rows, each side in file order."
    )


def given_path(path: Path | None) -> Path:
    """``path``, or the empty path when none was given (a loader that needs one has refused
    its absence in ``check_arguments`` already)."""
    return path if path is not None else Path()


@functools.cache
def registered_loaders() -> tuple[tuple[str, type[BuiltinDataset]], ...]:
    """(name, class) of every data-set loader netsim registers, in the order of
    :data:`netsim.registry.BUILTIN` (the one list of their names)."""
    from netsim.registry import BUILTIN, import_reference, parse_entry

    found = []
    for line in BUILTIN:
        name, reference = parse_entry(line)
        if reference.startswith(f"{__package__}."):
            found.append((name, import_reference(reference)))
    return tuple(found)


def registered_names(*, user_formats: bool) -> tuple[str, ...]:
    """The names of netsim's built-in data sets (``user_formats`` False) or of the formats of
    users' own files (True), from the registry."""
    return tuple(name for name, cls in registered_loaders() if cls.user_format == user_formats)


# ----------------------------------------------------------------------------------------------
# Class labels


def listing(names: Sequence[str]) -> str:
    """``names`` quoted and separated by commas, for messages."""
    return ", ".join(repr(n) for n in names)


def label_text(value: float) -> str:
    """A numeric label as text: without a trailing ``.0`` when it is a whole number."""
    return str(int(value)) if value.is_integer() else repr(value)


def numbered_classes(
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
            raise DataError(f"{where(i)}: label {text!r} is not one of {listing(allowed)}")
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
        names = tuple(label_text(float(v)) for v in values)
    else:
        names = tuple(sorted(set(labels)))
        code = {c: k for k, c in enumerate(names)}
        y = np.fromiter((code[s] for s in labels), dtype=np.int64, count=len(labels))
    if len(names) < 2:
        raise DataError(
            f"{origin}: only {len(names)} class ({listing(names)}); a classification data set "
            "needs at least 2"
        )
    return y.astype(np.int64), names
