"""The data sets that come with scikit-learn (its bundled copies of UCI data sets): Digits
(8 × 8 images), Breast Cancer Wisconsin (diagnostic) and Wine, each read with its
``sklearn.datasets.load_*`` function."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np

from netsim.contracts import LoadedData
from netsim.learning.datasets.base import BuiltinDataset, BuiltinDatasetConfig


class ScikitLearnDataset(BuiltinDataset):
    """A data set read with the scikit-learn function :attr:`function` (no path, no label)."""

    #: The name of the ``sklearn.datasets`` function that returns the data set.
    function: ClassVar[str] = ""
    needs_path = False
    comes_with = "comes with scikit-learn"

    def load(self, path: Path | None, label: str | int | None) -> LoadedData:
        """The data set's features, class indices and class names, as scikit-learn gives them."""
        from sklearn import datasets as skd

        bunch = getattr(skd, self.function)()
        target = np.asarray(bunch.target, dtype=np.int64)
        names = tuple(str(t) for t in bunch.target_names)
        source = (
            f"sklearn.datasets.{self.function}() (scikit-learn's bundled copy of the UCI data set)"
        )
        x = np.asarray(bunch.data, dtype=np.float64)
        return LoadedData(x, target, source, classes=names, origin=self.name)


class Digits(ScikitLearnDataset):
    """UCI optical recognition of handwritten digits: 1,797 images of 8 × 8 pixels, 10 classes."""

    class Config(BuiltinDatasetConfig):
        """Digits comes with scikit-learn: it takes no ``path`` and no ``label``."""

    function = "load_digits"


class BreastCancer(ScikitLearnDataset):
    """UCI Breast Cancer Wisconsin (diagnostic): 569 tumours, 30 features, 2 classes."""

    class Config(BuiltinDatasetConfig):
        """Breast Cancer comes with scikit-learn: it takes no ``path`` and no ``label``."""

    function = "load_breast_cancer"


class Wine(ScikitLearnDataset):
    """UCI Wine: 178 wines from three cultivars, 13 chemical features."""

    class Config(BuiltinDatasetConfig):
        """Wine comes with scikit-learn: it takes no ``path`` and no ``label``."""

    function = "load_wine"
