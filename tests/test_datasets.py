"""Data-set loaders, splits, bad-input messages and the §6.2 pre-processing of netsim.learning."""

from __future__ import annotations

import gzip
import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_DATA, require_shared
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from netsim.errors import NetsimError
from netsim.learning.datasets import (
    BUILTIN,
    USER_FORMATS,
    DataError,
    Dataset,
    load_dataset,
    preprocess,
    vector_norms,
)

MNIST_DIR = SHARED_DATA / "mnist"
MNIST_IMAGES = MNIST_DIR / "t10k-images-idx3-ubyte.gz"
MNIST_LABELS = MNIST_DIR / "t10k-labels-idx1-ubyte.gz"
MNIST5K = MNIST_DIR / "mnist_5k.csv.gz"
ADULT = SHARED_DATA / "uci" / "adult-complete-rows.csv"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def where(path: Path, rest: str = "") -> str:
    """A ``match`` pattern: the file's path, then ``rest`` (a regular expression)."""
    return re.escape(str(path)) + rest


def all_rows(data: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Training and test rows together, sorted by the first feature (an id in the tests)."""
    x = np.vstack([data.x_train, data.x_test])
    y = np.concatenate([data.y_train, data.y_test])
    order = np.argsort(x[:, 0], kind="stable")
    return x[order], y[order]


# ----------------------------------------------------------------------------------------------
# Bundled data sets


def test_spambase_shapes_and_class_balance() -> None:
    data = load_dataset("spambase")
    assert data.name == "spambase"
    assert data.x_train.shape == (4140, 57) and data.x_test.shape == (461, 57)
    assert (data.n_train, data.n_test, data.features, data.classes) == (4140, 461, 57, 2)
    assert data.class_names == ("0", "1")
    assert data.x_train.dtype == np.float64 and data.y_train.dtype == np.int64
    # The whole file: 2,788 non-spam and 1,813 spam rows (60.6% / 39.4%).
    total = np.bincount(np.concatenate([data.y_train, data.y_test]))
    assert total.tolist() == [2788, 1813]
    share = np.bincount(data.y_train) / data.n_train
    assert abs(share[0] - 0.606) <= 0.03 and abs(share[1] - 0.394) <= 0.03
    assert "461" in data.split and "Hopkins" in data.source


def test_spambase_split_is_seeded() -> None:
    a = load_dataset("spambase", split_seed=3)
    b = load_dataset("spambase", split_seed=3)
    c = load_dataset("spambase", split_seed=4)
    for field in ("x_train", "y_train", "x_test", "y_test"):
        assert np.array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.x_test, c.x_test)
    # Both splits hold every row of the file exactly once.
    rows_a = np.vstack([a.x_train, a.x_test])
    rows_c = np.vstack([c.x_train, c.x_test])
    assert np.array_equal(np.sort(rows_a, axis=0), np.sort(rows_c, axis=0))


def test_spambase_test_fraction_rounds_to_nearest_count() -> None:
    data = load_dataset("spambase", test_fraction=0.5)  # 2300.5 -> 2301
    assert (data.n_train, data.n_test) == (2300, 2301)
    data = load_dataset("spambase", test_fraction=0.25)  # 1150.25 -> 1150
    assert data.n_test == 1150


def test_segmentation_split_has_no_test_row_in_training() -> None:
    data = load_dataset("segmentation")
    assert data.x_train.shape == (1890, 19) and data.x_test.shape == (210, 19)
    assert data.classes == 7
    assert data.class_names == (
        "BRICKFACE",
        "CEMENT",
        "FOLIAGE",
        "GRASS",
        "PATH",
        "SKY",
        "WINDOW",
    )
    # segmentation.test is balanced: 300 rows per class
    assert (np.bincount(data.y_train) + np.bincount(data.y_test)).tolist() == [300] * 7
    # 14 pairs of identical rows aside, no test row is a training row
    train_rows = {(*r, k) for r, k in zip(data.x_train.tolist(), data.y_train, strict=True)}
    shared = sum(
        (*r, k) in train_rows for r, k in zip(data.x_test.tolist(), data.y_test, strict=True)
    )
    assert shared <= 14
    assert (data.x_train[:, 2] == 9).all()  # REGION-PIXEL-COUNT is 9 everywhere
    assert "segmentation.test" in data.split
    assert load_dataset("segmentation", test_fraction=0.5).n_test == 1050


def test_segmentation_data_rows_all_occur_in_segmentation_test() -> None:
    """Why segmentation.data is not used: every one of its rows is in segmentation.test."""
    from netsim.learning.datasets.reading import bundled_file, numeric_columns, read_table

    def rows(filename):
        table = read_table(bundled_file(filename), header=False, skip=5)
        x = numeric_columns(table, range(1, len(table.rows[0])))
        return {(row[0], *values) for row, values in zip(table.rows, x.tolist(), strict=True)}

    small, large = rows("segmentation.data.gz"), rows("segmentation.test.gz")
    assert len(small) == 210 and small <= large


@pytest.mark.parametrize(
    ("name", "rows", "features", "classes"),
    [("digits", 1797, 64, 10), ("breast_cancer", 569, 30, 2), ("wine", 178, 13, 3)],
)
def test_sklearn_data_sets(name: str, rows: int, features: int, classes: int) -> None:
    data = load_dataset(name)
    n_test = int(np.floor(0.2 * rows + 0.5))
    assert data.x_train.shape == (rows - n_test, features)
    assert data.x_test.shape == (n_test, features)
    assert data.classes == classes
    assert data.y_train.min() >= 0 and data.y_train.max() < classes


# ----------------------------------------------------------------------------------------------
# Research-only data from ../shared/data


def test_mnist_t10k_split() -> None:
    require_shared(MNIST_IMAGES)
    require_shared(MNIST_LABELS)
    data = load_dataset("mnist", path=MNIST_DIR, split_seed=1)
    assert data.x_train.shape == (9000, 784) and data.x_test.shape == (1000, 784)
    assert data.classes == 10 and data.class_names == tuple("0123456789")
    x = np.vstack([data.x_train, data.x_test])
    assert x.min() == 0 and x.max() == 255 and (x == np.round(x)).all()
    assert "60,000" in data.split
    # The image file itself as path= works too.
    again = load_dataset("mnist", path=MNIST_IMAGES, split_seed=1)
    assert np.array_equal(again.y_test, data.y_test)


def test_mnist_truncated_or_corrupt_real_file(tmp_path: Path) -> None:
    require_shared(MNIST_IMAGES)
    require_shared(MNIST_LABELS)
    shutil.copy(MNIST_LABELS, tmp_path / MNIST_LABELS.name)
    images = tmp_path / MNIST_IMAGES.name
    raw = gzip.decompress(MNIST_IMAGES.read_bytes())
    images.write_bytes(gzip.compress(raw[: len(raw) // 2]))  # a valid gzip of half the file
    with pytest.raises(DataError, match=where(images, r": truncated idx file.*7,840,000")):
        load_dataset("mnist", path=tmp_path)
    images.write_bytes(MNIST_IMAGES.read_bytes()[:10_000])  # the gzip stream cut off
    with pytest.raises(DataError, match=where(images, ": truncated or corrupt gzip file")):
        load_dataset("mnist", path=tmp_path)


def test_mnist5k() -> None:
    require_shared(MNIST5K)
    data = load_dataset("mnist5k", path=MNIST_DIR)
    assert data.x_train.shape == (4500, 784) and data.x_test.shape == (500, 784)
    assert data.classes == 10
    both = np.concatenate([data.y_train, data.y_test])
    assert np.bincount(both).tolist() == [500] * 10
    assert load_dataset("mnist5k", path=MNIST5K).n_train == 4500


def test_adult_one_hot() -> None:
    require_shared(ADULT)
    data = load_dataset("adult", path=ADULT)
    assert data.classes == 2 and data.class_names == ("<=50K", ">50K")
    assert data.n_train + data.n_test == 30162 and data.n_test == 3016
    assert data.features > 14
    # 6 numeric columns plus 7+16+7+14+6+5+2+41 categories.
    assert data.features == 104
    x = np.vstack([data.x_train, data.x_test])
    assert x[:, 0].min() == 17 and x[:, 0].max() == 90  # age, kept as it is
    assert np.bincount(np.concatenate([data.y_train, data.y_test])).tolist() == [22654, 7508]


# ----------------------------------------------------------------------------------------------
# idx parsing on small synthetic files (always run)


def idx_pair(folder: Path, images: int = 6, side: int = 2) -> tuple[Path, Path]:
    folder.mkdir(exist_ok=True)
    pixels = (np.arange(images * side * side) % 256).astype(np.uint8)
    labels = (np.arange(images) % 3).astype(np.uint8)
    image_file = folder / "t10k-images-idx3-ubyte.gz"
    label_file = folder / "t10k-labels-idx1-ubyte.gz"
    image_file.write_bytes(
        gzip.compress(struct.pack(">4I", 2051, images, side, side) + pixels.tobytes())
    )
    label_file.write_bytes(gzip.compress(struct.pack(">2I", 2049, images) + labels.tobytes()))
    return image_file, label_file


def test_idx_synthetic_round_trip(tmp_path: Path) -> None:
    idx_pair(tmp_path)
    data = load_dataset("mnist", path=tmp_path, test_fraction=0.5)
    assert (data.n_train, data.n_test, data.features) == (3, 3, 4)
    assert data.classes == 10  # the digits 0..9, whether present or not
    x = np.vstack([data.x_train, data.x_test])
    assert sorted(x.ravel().tolist()) == list(range(24))


def test_idx_bad_magic(tmp_path: Path) -> None:
    images, labels = idx_pair(tmp_path)
    images.write_bytes(labels.read_bytes())
    with pytest.raises(DataError, match=where(images, r": bad idx magic number 2049.*2051")):
        load_dataset("mnist", path=tmp_path)


def test_idx_truncated_header(tmp_path: Path) -> None:
    _, labels = idx_pair(tmp_path)
    labels.write_bytes(gzip.compress(struct.pack(">I", 2049)))
    with pytest.raises(DataError, match=where(labels, r": truncated idx file: 4 bytes")):
        load_dataset("mnist", path=tmp_path)


def test_idx_label_count_mismatch(tmp_path: Path) -> None:
    _, labels = idx_pair(tmp_path)
    labels.write_bytes(gzip.compress(struct.pack(">2I", 2049, 2) + bytes([1, 2])))
    with pytest.raises(DataError, match=where(labels, r": 2 labels, but .* holds 6 images")):
        load_dataset("mnist", path=tmp_path)


def test_idx_missing_file(tmp_path: Path) -> None:
    _, labels = idx_pair(tmp_path)
    labels.unlink()
    with pytest.raises(DataError, match=where(labels, r": file not found.*shared/data/mnist")):
        load_dataset("mnist", path=tmp_path)


# ----------------------------------------------------------------------------------------------
# Users' files: csv and libsvm


def test_csv_string_labels_by_name(tmp_path: Path) -> None:
    rows = [(i, i * 0.5, ["dog", "cat", "emu"][i % 3]) for i in range(10)]
    text = "id,size,animal\n" + "".join(f"{i},{s},{a}\n" for i, s, a in rows)
    path = write(tmp_path / "animals.csv", text)
    data = load_dataset("csv", path=path, label="animal", test_fraction=0.3)
    assert (data.n_train, data.n_test, data.features) == (7, 3, 2)
    assert data.class_names == ("cat", "dog", "emu")
    x, y = all_rows(data)
    assert x.tolist() == [[i, i * 0.5] for i in range(10)]
    assert [data.class_names[k] for k in y] == [a for _, _, a in rows]
    assert "animals.csv" in data.source


def test_csv_numeric_labels_by_index(tmp_path: Path) -> None:
    # The label in the middle; numeric labels sort numerically, not as text.
    labels = [10, 9, -1, 10, 9, -1, 10.0, 9, -1, 10]
    text = "id,label,v\n" + "".join(f"{i},{lab},{2 * i}\n" for i, lab in enumerate(labels))
    path = write(tmp_path / "numbers.csv", text)
    data = load_dataset("csv", path=path, label=1, split_seed=7)
    assert data.class_names == ("-1", "9", "10")
    assert (data.n_train, data.n_test) == (8, 2)
    x, y = all_rows(data)
    assert x.tolist() == [[i, 2 * i] for i in range(10)]
    assert [float(data.class_names[k]) for k in y] == [float(v) for v in labels]


def test_csv_gzip_and_blank_lines(tmp_path: Path) -> None:
    text = "a,b,y\n1,2,x\n\n3,4,z\n5,6,x\n7,8,z\n\n"
    path = tmp_path / "small.csv.gz"
    path.write_bytes(gzip.compress(text.encode()))
    data = load_dataset("csv", path=path, label="y", test_fraction=0.5)
    assert (data.n_train, data.n_test) == (2, 2)


def test_libsvm_round_trip(tmp_path: Path) -> None:
    text = (
        "# a comment line\n"
        "+1 1:0.5 3:2\n"
        "-1 2:1.5\n"
        "+1 1:3 2:4 3:5 # trailing comment\n"
        "-1 3:7\n"
        "-1 1:9\n"
    )
    path = write(tmp_path / "data.svm", text)
    data = load_dataset("libsvm", path=path, test_fraction=0.4)
    assert data.class_names == ("-1", "1")
    assert (data.n_train, data.n_test, data.features) == (3, 2, 3)
    x = np.vstack([data.x_train, data.x_test])
    y = np.concatenate([data.y_train, data.y_test])
    expected = {
        ((0.5, 0.0, 2.0), 1),
        ((0.0, 1.5, 0.0), 0),
        ((3.0, 4.0, 5.0), 1),
        ((0.0, 0.0, 7.0), 0),
        ((9.0, 0.0, 0.0), 0),
    }
    assert {(tuple(r), int(k)) for r, k in zip(x.tolist(), y, strict=True)} == expected


# ----------------------------------------------------------------------------------------------
# Bad input: one DataError naming the file, line and column


def test_data_error_is_a_netsim_error() -> None:
    assert issubclass(DataError, NetsimError)


def test_each_builtin_name_is_one_loader_class_listed_once_in_the_registry() -> None:
    """The registry's lines are the one list of names: BUILTIN and USER_FORMATS are read from
    it (in its order), and every name is its own DatasetLoader class with its own Config."""
    from netsim.contracts import DatasetLoader
    from netsim.registry import REGISTRY

    netsim_names = [name for slot, name, _, origin in REGISTRY.entries()
                    if slot == "dataset" and origin == "netsim"]  # fmt: skip
    assert netsim_names == [*BUILTIN, *USER_FORMATS]
    classes = [REGISTRY.lookup(("dataset",), name)[0] for name in netsim_names]
    assert len(set(classes)) == len(classes)
    assert all(issubclass(cls, DatasetLoader) for cls in classes)
    assert len({cls.Config for cls in classes}) == len(classes)
    assert USER_FORMATS == ("csv", "libsvm")


def test_unknown_name_lists_the_allowed_names() -> None:
    with pytest.raises(DataError, match="unknown data set 'iris'") as info:
        load_dataset("iris")
    for name in BUILTIN + USER_FORMATS:
        assert repr(name) in str(info.value)


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        ("mnist", r"t10k-images-idx3-ubyte\.gz.*shared/data/mnist"),
        ("mnist5k", r"mnist_5k\.csv\.gz.*shared/data/mnist"),
        ("adult", r"'income'.*shared/data/uci/adult-complete-rows\.csv"),
        ("csv", "label="),
        ("libsvm", "LIBSVM"),
    ],
)
def test_path_required(name: str, pattern: str) -> None:
    with pytest.raises(DataError, match=f"data set '{name}' needs path=.*{pattern}"):
        load_dataset(name)


@pytest.mark.parametrize("name", ["spambase", "segmentation", "digits", "wine"])
def test_path_refused_for_bundled_sets(name: str, tmp_path: Path) -> None:
    with pytest.raises(DataError, match=f"'{name}' (is bundled|comes with).*do not give path="):
        load_dataset(name, path=tmp_path)


def test_label_refused_outside_csv_and_required_for_csv(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="label= is only for the 'csv' format"):
        load_dataset("spambase", label="y")
    path = write(tmp_path / "t.csv", "a,y\n1,0\n2,1\n")
    with pytest.raises(DataError, match=where(path, ": the 'csv' format needs label=")):
        load_dataset("csv", path=path)


@pytest.mark.parametrize("fraction", [0, 0.0, 1, 1.0, -0.1, 1.5, float("nan"), True, "0.2"])
def test_test_fraction_outside_unit_interval(fraction: object) -> None:
    with pytest.raises(DataError, match=r"test_fraction must be a number in \(0, 1\)"):
        load_dataset("wine", test_fraction=fraction)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [-1, 1.5, None])
def test_bad_split_seed(seed: object) -> None:
    with pytest.raises(DataError, match="split_seed must be a non-negative integer"):
        load_dataset("wine", split_seed=seed)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fraction", "pattern"),
    [(0.1, "leaves 3 training and 0 test rows"), (0.9, "leaves 0 training and 3 test rows")],
)
def test_split_leaving_an_empty_side(tmp_path: Path, fraction: float, pattern: str) -> None:
    path = write(tmp_path / "three.csv", "a,y\n1,p\n2,q\n3,p\n")
    with pytest.raises(DataError, match=where(path, f": test_fraction .*{pattern}.*at least 1")):
        load_dataset("csv", path=path, label="y", test_fraction=fraction)


CSV_CASES = [
    # (file content, label, expected message after the path)
    ("a,b,y\n1,2,p\n3,4\n5,6,q\n", "y", r":line 3: expected 3 columns .*found 2"),
    ("a,b,y\n1,2,p\n3,4,q,9\n", "y", r":line 3: expected 3 columns .*found 4"),
    ("a,b,y\n1,2,p\n3,4,q\n5,abc,p\n", "y", r":line 4, column 'b': 'abc' is not a number"),
    ("a,b,y\n,2,p\n3,4,q\n", "y", r":line 2, column 'a': empty cell"),
    ("a,b,y\n1,2,p\n3,NaN,q\n", "y", r":line 3, column 'b': 'NaN' is a missing value"),
    ("a,b,y\n1,2,p\n3,inf,q\n", "y", r":line 3, column 'b': 'inf' is not a finite number"),
    ("a,b,y\n1,2,p\n3,4,\n", "y", r":line 3, column 'y': empty label"),
    ("a,b,y\n1,2,1\n3,4,nan\n", "y", r":line 3, column 'y': missing label 'nan'"),
    ("a,b,y\n1,2,p\n3,4,p\n", "y", r": label column 'y': only 1 class \('p'\)"),
    ("a,b,y\n1,2,p\n3,4,q\n", "klass", r":line 1: no label column 'klass'; .*'a', 'b', 'y'"),
    ("a,b,y\n1,2,p\n3,4,q\n", 3, r": label column index 3 is out of range.*0\.\.2"),
    ("a,y,y\n1,2,p\n3,4,q\n", "y", r":line 1: column name 'y' occurs 2 times"),
    ("a,b,y\n", "y", r": no data rows after the header"),
    ("", "y", r": the file is empty"),
    ("\n\n  \n", "y", r": the file is empty"),
]


@pytest.mark.parametrize(("content", "label", "pattern"), CSV_CASES)
def test_bad_csv(tmp_path: Path, content: str, label: str | int, pattern: str) -> None:
    path = write(tmp_path / "bad.csv", content)
    with pytest.raises(DataError, match=where(path, pattern)):
        load_dataset("csv", path=path, label=label)


def test_csv_line_numbers_count_blank_lines(tmp_path: Path) -> None:
    path = write(tmp_path / "gaps.csv", "a,y\n\n1,p\n\n\n2,q\nx,p\n")
    with pytest.raises(DataError, match=where(path, ":line 7, column 'a': 'x' is not a number")):
        load_dataset("csv", path=path, label="y")


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.csv"
    with pytest.raises(DataError, match=where(missing, ": file not found")):
        load_dataset("csv", path=missing, label="y")
    with pytest.raises(DataError, match=where(tmp_path, ": is a directory")):
        load_dataset("csv", path=tmp_path, label="y")
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"a,y\n1,p\n2,caf\xe9\n")
    with pytest.raises(DataError, match=where(latin, ":line 3: not UTF-8 text")):
        load_dataset("csv", path=latin, label="y")
    broken = tmp_path / "broken.csv.gz"
    broken.write_bytes(gzip.compress(b"a,y\n" + b"1,p\n" * 1000)[:40])
    with pytest.raises(DataError, match=where(broken, ": truncated or corrupt gzip file")):
        load_dataset("csv", path=broken, label="y")


LIBSVM_CASES = [
    ("1 1:2\n-1 2:x\n", r":line 2: feature 2: 'x' is not a number"),
    ("1 1:2\n\n-1 2:nan\n", r":line 3: feature 2: 'nan' is a missing value"),
    ("1 1:2\nabc 2:1\n", r":line 2: label 'abc' is not a number"),
    ("1 1:2\n-1 3:1 2:1\n", r":line 2: feature index 2 after 3; indices must be increasing"),
    ("1 1:2\n-1 2=1\n", r":line 2: '2=1' is not <index>:<value>"),
    ("1 1:2\n1 2:1\n", r": the labels: only 1 class \('1'\)"),
    ("# nothing\n", r": no data rows"),
]


@pytest.mark.parametrize(("content", "pattern"), LIBSVM_CASES)
def test_bad_libsvm(tmp_path: Path, content: str, pattern: str) -> None:
    path = write(tmp_path / "bad.svm", content)
    with pytest.raises(DataError, match=where(path, pattern)):
        load_dataset("libsvm", path=path)


ADULT_HEADER = (
    "age,type_employer,fnlwgt,education,education_num,marital,occupation,relationship,race,"
    "sex,capital_gain,capital_loss,hr_per_week,country,income\n"
)
ADULT_ROW = "45,Private,1000,9th,5,Divorced,Sales,Husband,White,Male,0,0,40,Peru,{income}\n"


def adult_file(tmp_path: Path, *extra: str) -> Path:
    rows = [ADULT_ROW.format(income=i) for i in ("<=50K", ">50K", "<=50K", ">50K")]
    return write(tmp_path / "adult.csv", ADULT_HEADER + "".join(rows) + "".join(extra))


def test_adult_small_file(tmp_path: Path) -> None:
    path = adult_file(tmp_path, ADULT_ROW.replace("Peru", "Chile").format(income=">50K"))
    data = load_dataset("adult", path=path, test_fraction=0.4)
    assert (data.n_train, data.n_test) == (3, 2)
    assert data.features == 6 + 7 + 2  # one category in 7 columns, two countries
    x = np.vstack([data.x_train, data.x_test])
    # Column order of the file; country one-hot sorted: Chile, Peru.
    assert sorted(map(tuple, x[:, -2:].tolist())) == [(0, 1)] * 4 + [(1, 0)]
    assert (x[:, 0] == 45).all() and (x[:, 1] == 1).all() and (x[:, 2] == 1000).all()


def test_adult_bad_input(tmp_path: Path) -> None:
    path = adult_file(tmp_path, ADULT_ROW.replace("Peru", "?").format(income=">50K"))
    with pytest.raises(DataError, match=where(path, ":line 6, column 'country': missing value")):
        load_dataset("adult", path=path)
    path = adult_file(tmp_path, ADULT_ROW.format(income=">50K."))
    with pytest.raises(
        DataError, match=where(path, r":line 6, column 'income': label '>50K\.' is not one of")
    ):
        load_dataset("adult", path=path)
    path = adult_file(tmp_path, ADULT_ROW.replace("45", "forty").format(income=">50K"))
    with pytest.raises(DataError, match=where(path, ":line 6, column 'age': 'forty' is not a")):
        load_dataset("adult", path=path)
    path = write(tmp_path / "adult2.csv", ADULT_HEADER.replace("income", "salary") + "1\n")
    with pytest.raises(DataError, match=where(path, r":line 1: .*missing \['income'\]")):
        load_dataset("adult", path=path)


def test_mnist5k_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "mnist_5k.csv.gz"
    path.write_bytes(gzip.compress(b"0,1,2,3\n4,5,6,7\n8,9,x,1\n"))
    with pytest.raises(DataError, match=where(path, ":line 3, column 3: 'x' is not a number")):
        load_dataset("mnist5k", path=tmp_path)


# ----------------------------------------------------------------------------------------------
# Pre-processing (Hegedűs et al. 2016, §6.2)

NORMS = st.sampled_from(["L1", "L2"])


@st.composite
def datasets(draw: st.DrawFn) -> Dataset:
    d = draw(st.integers(1, 6))
    # magnitudes of 0 or at least 1e-6: a feature's training range then is 0 or above ~1e-22,
    # and a test value scaled by 1/range stays finite (a range of ~1e-308 overflows any float
    # times it, in the tests' own arithmetic: not a case real data sets reach)
    elements = st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False).map(
        lambda v: 0.0 if abs(v) < 1e-6 else v
    )
    x_train = draw(arrays(np.float64, (draw(st.integers(1, 15)), d), elements=elements))
    x_test = draw(arrays(np.float64, (draw(st.integers(1, 8)), d), elements=elements))
    return Dataset(
        name="random",
        x_train=x_train,
        y_train=np.arange(len(x_train)) % 2,
        x_test=x_test,
        y_test=np.arange(len(x_test)) % 2,
        class_names=("a", "b"),
        source="hypothesis",
        split="drawn",
    )


@settings(deadline=None, max_examples=60)
@given(datasets())
def test_minmax_maps_training_values_into_unit_interval(data: Dataset) -> None:
    before = data.x_train.copy()
    out = preprocess(data, normalisation="none", norm="L2")
    assert np.array_equal(data.x_train, before)  # the input is not modified
    assert out.x_train.min() >= 0.0 and out.x_train.max() <= 1.0
    constant = before.min(axis=0) == before.max(axis=0)
    assert (out.x_train[:, constant] == 0).all() and (out.x_test[:, constant] == 0).all()
    varying = ~constant
    assert (out.x_train[:, varying].min(axis=0) == 0).all()
    assert (out.x_train[:, varying].max(axis=0) == 1).all()
    assert (out.name, out.split, out.class_names) == (data.name, data.split, data.class_names)


@settings(deadline=None, max_examples=60)
@given(datasets(), NORMS)
@example(  # found by hypothesis: a test value 4 over a training span of the smallest normal
    data=Dataset(
        name="random",
        x_train=np.array([[np.finfo(float).tiny], [0.0]]),
        y_train=np.array([0, 1]),
        x_test=np.array([[4.0]]),
        y_test=np.array([0]),
        class_names=("a", "b"),
        source="hypothesis",
        split="drawn",
    ),
    norm="L1",
)
def test_local_normalisation_gives_unit_rows(data: Dataset, norm: str) -> None:
    out = preprocess(data, normalisation="local", norm=norm)  # type: ignore[arg-type]
    plain = preprocess(data, normalisation="none", norm=norm)  # type: ignore[arg-type]
    for scaled, reference in ((out.x_train, plain.x_train), (out.x_test, plain.x_test)):
        lengths = vector_norms(scaled, norm)  # type: ignore[arg-type]
        zero = (reference == 0).all(axis=1)
        assert np.allclose(lengths[~zero], 1.0, rtol=0, atol=1e-9)
        assert (scaled[zero] == 0).all()
    assert (vector_norms(out.x_train, norm) <= 1 + 1e-12).all()  # type: ignore[arg-type]


@settings(deadline=None, max_examples=60)
@given(datasets(), NORMS)
def test_global_normalisation_keeps_length_ratios(data: Dataset, norm: str) -> None:
    out = preprocess(data, normalisation="global", norm=norm)  # type: ignore[arg-type]
    plain = preprocess(data, normalisation="none", norm=norm)  # type: ignore[arg-type]
    before = vector_norms(plain.x_train, norm)  # type: ignore[arg-type]
    after = vector_norms(out.x_train, norm)  # type: ignore[arg-type]
    assert (after <= 1 + 1e-12).all()
    if before.max() == 0:  # every training feature constant: nothing to scale
        assert (out.x_train == 0).all()
        return
    assert after.max() == pytest.approx(1.0, abs=1e-12)
    assert np.allclose(after * before.max(), before, rtol=1e-12, atol=0)
    assert np.allclose(out.x_test * before.max(), plain.x_test, rtol=1e-12, atol=1e-300)


def small_dataset() -> Dataset:
    return Dataset(
        name="small",
        x_train=np.array([[0.0, 10.0, 5.0], [2.0, 20.0, 5.0]]),
        y_train=np.array([0, 1]),
        x_test=np.array([[1.0, 30.0, 7.0], [-2.0, 10.0, 5.0]]),
        y_test=np.array([1, 0]),
        class_names=("no", "yes"),
        source="test",
        split="by hand",
    )


def test_test_split_uses_training_min_and_max() -> None:
    data = small_dataset()
    out = preprocess(data, normalisation="none", norm="L1")
    assert out.x_train.tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]
    # min (0, 10, 5), max (2, 20, 5): outside [0, 1] stays, the constant feature becomes 0.
    assert out.x_test.tolist() == [[0.5, 2.0, 0.0], [-1.0, 0.0, 0.0]]
    local = preprocess(data, normalisation="local", norm="L1")
    assert local.x_train.tolist() == [[0.0, 0.0, 0.0], [0.5, 0.5, 0.0]]
    assert local.x_test.tolist() == [[0.2, 0.8, 0.0], [-1.0, 0.0, 0.0]]
    glob = preprocess(data, normalisation="global", norm="L2")
    root2 = np.sqrt(2.0)
    assert np.allclose(glob.x_train, [[0, 0, 0], [1 / root2, 1 / root2, 0]], rtol=1e-15)
    assert np.allclose(glob.x_test, [[0.5 / root2, 2 / root2, 0], [-1 / root2, 0, 0]])


def test_preprocess_real_spambase() -> None:
    data = preprocess(load_dataset("spambase"), normalisation="local", norm="L2")
    lengths = vector_norms(data.x_train, "L2")
    assert np.allclose(lengths[lengths > 0], 1.0, atol=1e-12)
    assert (lengths <= 1 + 1e-12).all()
    assert data.split == load_dataset("spambase").split


def test_vector_norms() -> None:
    x = np.array([[3.0, -4.0], [0.0, 0.0], [1e200, 1e200], [1e-200, 0.0]])
    assert vector_norms(x, "L1").tolist() == [7.0, 0.0, 2e200, 1e-200]
    l2 = vector_norms(x, "L2")
    assert l2[:2].tolist() == [5.0, 0.0]
    assert l2[2] == pytest.approx(np.sqrt(2) * 1e200, rel=1e-15)
    assert l2[3] == 1e-200
    assert float(vector_norms(np.array([3.0, 4.0]), "L2")) == 5.0


def test_preprocess_and_norm_arguments() -> None:
    data = small_dataset()
    with pytest.raises(DataError, match="normalisation must be 'local', 'global' or 'none'"):
        preprocess(data, normalisation="max", norm="L2")  # type: ignore[arg-type]
    with pytest.raises(DataError, match="norm must be 'L1' or 'L2', got 'Linf'"):
        preprocess(data, normalisation="local", norm="Linf")  # type: ignore[arg-type]
    with pytest.raises(DataError, match="norm must be 'L1' or 'L2'"):
        vector_norms(data.x_train, "l2")  # type: ignore[arg-type]


def test_dataset_checks_its_arrays() -> None:
    with pytest.raises(DataError, match="x_train must have shape"):
        Dataset("bad", np.zeros((3, 2)), np.zeros(2), np.zeros((1, 2)), np.zeros(1), ("a", "b"),
                "", "")  # fmt: skip
    with pytest.raises(DataError, match=r"class indices outside \[0, 2\)"):
        Dataset("bad", np.zeros((2, 2)), np.array([0, 2]), np.zeros((1, 2)), np.zeros(1),
                ("a", "b"), "", "")  # fmt: skip
    with pytest.raises(DataError, match="2 training features but 3 test features"):
        Dataset("bad", np.zeros((2, 2)), np.zeros(2), np.zeros((1, 3)), np.zeros(1), ("a", "b"),
                "", "")  # fmt: skip


def test_validation_split_is_drawn_from_training_rows_and_keeps_the_test_rows() -> None:
    """A validation part leaves the test rows of the same seed as they were and takes
    round(fraction · rows) of the others (spambase: 0.2 · 4,601 = 920.2 -> 920), disjoint
    from both, every row in exactly one part, in file order; without one it has no rows."""
    plain = load_dataset("spambase", split_seed=3)
    held = load_dataset("spambase", split_seed=3, validation_fraction=0.2)
    assert plain.n_validation == 0 and plain.x_validation.shape == (0, 57)
    assert np.array_equal(plain.x_test, held.x_test)
    assert np.array_equal(plain.y_test, held.y_test)
    assert (held.n_train, held.n_validation, held.n_test) == (3220, 920, 461)
    whole = [tuple(r) for r in plain.x_train.tolist()]
    parts = [tuple(r) for r in np.vstack([held.x_train, held.x_validation]).tolist()]
    assert sorted(whole) == sorted(parts)  # the training rows are split, none lost or repeated
    # each part keeps the file order: its rows are a subsequence of the unsplit training rows
    # (rows that occur once: Spambase repeats some)
    position = {row: i for i, row in enumerate(whole) if whole.count(row) == 1}
    for x in (held.x_train, held.x_validation):
        at = [position[tuple(r)] for r in x.tolist() if tuple(r) in position]
        assert at == sorted(at) and len(at) > 0.8 * len(x)
    again = load_dataset("spambase", split_seed=3, validation_fraction=0.2)
    assert np.array_equal(again.x_validation, held.x_validation)
    other = load_dataset("spambase", split_seed=4, validation_fraction=0.2)
    assert not np.array_equal(other.x_validation, held.x_validation)
    assert "920 (validation_fraction 0.2" in held.split


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, "0.2", True])
def test_validation_fraction_outside_the_unit_interval_is_refused(fraction: object) -> None:
    with pytest.raises(DataError, match=r"validation_fraction must be a number in \(0, 1\)"):
        load_dataset("wine", validation_fraction=fraction)  # type: ignore[arg-type]


def test_validation_fraction_that_leaves_no_training_row_is_refused() -> None:
    with pytest.raises(DataError, match=r"0.85 of 178 rows asks for 151 .* of the 142 that"):
        load_dataset("wine", validation_fraction=0.85)  # 36 test, 151 validation of 142


def test_validation_rows_are_preprocessed_as_the_test_rows() -> None:
    from netsim.learning.datasets import preprocess

    data = load_dataset("breast_cancer", validation_fraction=0.25)
    scaled = preprocess(data, normalisation="global", norm="L2")
    low, high = data.x_train.min(axis=0), data.x_train.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    minmax = np.where(high > low, (data.x_validation - low) / span, 0.0)
    longest = np.linalg.norm(np.where(high > low, (data.x_train - low) / span, 0.0), axis=1).max()
    assert np.allclose(scaled.x_validation, minmax / longest, rtol=1e-12, atol=0)
