"""The UCI data sets of the experiments: Spambase and Image Segmentation (bundled with netsim,
``data/README.md``), as Hegedűs, Berta and Jelasity (2016, §6.2, Table 1) used them, and Adult
(read from a path; Becker & Kohavi 1996), with its categorical columns one-hot encoded."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np

from netsim.contracts import LoadedData
from netsim.errors import DataError
from netsim.learning.datasets.base import (
    SHARED,
    UCI,
    BuiltinDataset,
    BuiltinDatasetConfig,
    given_path,
)
from netsim.learning.datasets.reading import (
    Table,
    bundled_file,
    numeric_columns,
    read_table,
    table_classes,
)

# The paper's test-set sizes (Table 1): Spambase 4,140/461, Segmentation 2,310/210.
SPAMBASE_TEST_ROWS = 461
SEGMENTATION_TEST_ROWS = 210

ADULT_NUMERIC = (
    "age",
    "fnlwgt",
    "education_num",
    "capital_gain",
    "capital_loss",
    "hr_per_week",
)
ADULT_CATEGORICAL = (
    "type_employer",
    "education",
    "marital",
    "occupation",
    "relationship",
    "race",
    "sex",
    "country",
)
ADULT_LABEL = "income"
ADULT_CLASSES = ("<=50K", ">50K")


class Spambase(BuiltinDataset):
    """UCI Spambase (4,601 e-mails, 57 features, class 1 = spam), bundled; split 4,140/461 as
    in the paper (Table 1) unless ``test_fraction`` is given."""

    class Config(BuiltinDatasetConfig):
        """Spambase is bundled: it takes no ``path`` and no ``label``."""

    needs_path = False
    comes_with = "is bundled with netsim"

    def test_rows(self, rows: int, test_fraction: float | None) -> tuple[int, str]:
        """The paper's 461 test rows, or ``test_fraction`` of ``rows`` when it is given."""
        if test_fraction is None:
            return SPAMBASE_TEST_ROWS, f"{SPAMBASE_TEST_ROWS} test rows, the paper's 4,140/461"
        return super().test_rows(rows, test_fraction)

    def load(self, path: Path | None, label: str | int | None) -> LoadedData:
        """The bundled ``spambase.data.gz``: 57 numeric columns, then the 0/1 label."""
        file = bundled_file("spambase.data.gz")
        table = read_table(file, header=False)
        d = len(table.rows[0]) - 1
        x = numeric_columns(table, range(d))
        y, names = table_classes(table, d, allowed=("0", "1"))
        source = (
            f"{file} (UCI Spambase: Hopkins, Reeber, Forman, Suermondt, Hewlett-Packard Labs "
            f"1999; {UCI}); class 1 = spam"
        )
        return LoadedData(x, y, source, classes=names, origin=str(file))


class Segmentation(BuiltinDataset):
    """UCI Image Segmentation, bundled: the 2,100 rows of ``segmentation.test`` split at random
    1,890/210. All 210 rows of UCI's ``segmentation.data`` also occur in ``segmentation.test``,
    so the paper's 2,310 training rows (both files) contained its test rows; here no test row is
    a training row."""

    class Config(BuiltinDatasetConfig):
        """Image Segmentation is bundled: it takes no ``path`` and no ``label``."""

    needs_path = False
    comes_with = "is bundled with netsim"

    def test_rows(self, rows: int, test_fraction: float | None) -> tuple[int, str]:
        """The paper's 210 test rows, or ``test_fraction`` of ``rows`` when it is given."""
        if test_fraction is None:
            return SEGMENTATION_TEST_ROWS, (
                f"{SEGMENTATION_TEST_ROWS} test rows as in the paper; segmentation.data is not "
                "used because all its rows also occur in segmentation.test"
            )
        return super().test_rows(rows, test_fraction)

    def load(self, path: Path | None, label: str | int | None) -> LoadedData:
        """``segmentation.test`` (2,100 rows; it contains every row of ``segmentation.data``):
        five preamble lines (the fourth names the features), then the class and 19 features."""
        file = bundled_file("segmentation.test.gz")
        table = read_table(file, header=False, skip=5)
        header = table.preamble[3] if table.preamble and len(table.preamble) > 3 else []
        if len(header) == len(table.rows[0]) - 1:  # line 4 names the features, not the class
            table.names = ["class", *(h.strip() for h in header)]
        x = numeric_columns(table, range(1, len(table.rows[0])))
        y, names = table_classes(table, 0)
        source = (
            f"{file} (UCI Image Segmentation: Vision Group, University of Massachusetts 1990; "
            f"{UCI})"
        )
        return LoadedData(x, y, source, classes=names, origin=str(file))


class Adult(BuiltinDataset):
    """UCI Adult (Becker & Kohavi 1996) without the rows with missing values, read from the CSV
    file ``path`` names: the numeric columns as they are, the categorical ones one-hot encoded
    (categories sorted, from the whole file); label ``income`` (``<=50K``, ``>50K``)."""

    class Config(BuiltinDatasetConfig):
        """Adult takes ``path``, the CSV file (header row, label column ``income``)."""

    test_fraction: ClassVar[float] = 0.1
    path_hint = (
        "the Adult CSV file with a header row and the label column 'income' "
        f"({SHARED}/uci/adult-complete-rows.csv next to the repository holds it)"
    )

    def load(self, path: Path | None, label: str | int | None) -> LoadedData:
        """The file's columns, in file order: numeric ones as they are, categorical ones as
        one 0/1 column per category."""
        file = given_path(path)
        known = (*ADULT_NUMERIC, *ADULT_CATEGORICAL, ADULT_LABEL)
        table = read_table(file, header=True, columns=known)
        assert table.names is not None
        index = {c: j for j, c in enumerate(table.names)}
        numeric = numeric_columns(table, [index[c] for c in ADULT_NUMERIC])
        blocks: list[np.ndarray] = []
        for name in table.names:
            j = index[name]
            if name in ADULT_NUMERIC:
                blocks.append(numeric[:, [ADULT_NUMERIC.index(name)]])
            elif name in ADULT_CATEGORICAL:
                blocks.append(_one_hot(table, j))
        y, names = table_classes(table, index[ADULT_LABEL], allowed=ADULT_CLASSES)
        source = (
            f"{file} (UCI Adult: Becker & Kohavi 1996, rows with missing values removed; "
            f"{UCI}); numeric columns as they are, {len(ADULT_CATEGORICAL)} categorical columns "
            "one-hot encoded (categories sorted, from the whole file)"
        )
        return LoadedData(np.hstack(blocks), y, source, classes=names, origin=str(file))


def _one_hot(table: Table, column: int) -> np.ndarray:
    """One 0/1 column per category of ``column`` of ``table`` (categories sorted); a missing
    value (empty or ``?``) is an error naming its line."""
    values = [row[column].strip() for row in table.rows]
    for i, value in enumerate(values):
        if not value or value == "?":
            raise DataError(
                f"{table.at(i, column)}: missing value {value!r}; every categorical cell "
                "needs a category"
            )
    categories, codes = np.unique(np.array(values), return_inverse=True)
    return np.eye(len(categories))[codes]
