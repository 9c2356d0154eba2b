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

Each data set and format is one loader class (a :class:`~netsim.contracts.DatasetLoader`),
registered under its name in :data:`netsim.registry.BUILTIN`, the one list of the names;
:data:`BUILTIN` and :data:`USER_FORMATS` here are read from it. The modules: :mod:`.base` (the
:class:`Dataset` and the loaders' base class), :mod:`.reading` (files and tables), :mod:`.uci`
(spambase, segmentation, adult), :mod:`.images` (mnist, mnist5k), :mod:`.scikit` (digits,
breast_cancer, wine), :mod:`.files` (csv, libsvm), :mod:`.loading` (:func:`load_dataset`) and
:mod:`.preprocess` (:func:`preprocess`).

Splits that are drawn at random use ``numpy.random.default_rng(split_seed)`` (never the global
random state) and keep the file order of the rows on each side. Every mistake in a file ends in
one :class:`DataError` whose message names the file and the line (1-based, header lines
included), column or key at fault and what is allowed.
"""

from __future__ import annotations

from netsim.errors import DataError
from netsim.learning.datasets.base import (
    MAX_DATA_VALUES,
    MAX_FEATURES,
    BuiltinDataset,
    Dataset,
    TrainTestSplit,
    registered_names,
)
from netsim.learning.datasets.loading import dataset_loader, dataset_names, load_dataset
from netsim.learning.datasets.preprocess import preprocess, vector_norms
from netsim.learning.datasets.uci import SEGMENTATION_TEST_ROWS, SPAMBASE_TEST_ROWS

BUILTIN: tuple[str, ...] = registered_names(user_formats=False)
"""The names of the built-in data sets."""

USER_FORMATS: tuple[str, ...] = registered_names(user_formats=True)
"""The names under which users' own files load (with ``path=``)."""

__all__ = [
    "BUILTIN",
    "MAX_DATA_VALUES",
    "MAX_FEATURES",
    "SEGMENTATION_TEST_ROWS",
    "SPAMBASE_TEST_ROWS",
    "USER_FORMATS",
    "BuiltinDataset",
    "DataError",
    "Dataset",
    "TrainTestSplit",
    "dataset_loader",
    "dataset_names",
    "load_dataset",
    "preprocess",
    "vector_norms",
]
