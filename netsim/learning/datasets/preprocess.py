"""Pre-processing as Hegedűs, Berta and Jelasity (2016, §6.2) did: min–max scaling of every
feature with the training split's range, then every example normalised, each vector to unit
length (*local*) or all by the length of the longest training vector (*global*), in the L1 or L2
norm of the noise distribution in use."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import numpy as np

from netsim.errors import DataError
from netsim.learning.datasets.base import Dataset


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
       and validation splits, whose values may therefore fall outside [0, 1] (they are left so).
    2. ``normalisation="local"``: every vector, training, test and validation, is scaled to
       unit length in ``norm`` (zero vectors stay zero). ``"global"``: every vector is divided
       by the largest training vector length in ``norm``, so that the longest training vector
       has length 1 and the ratios of lengths are kept (an all-zero training split is left as
       it is). ``"none"``: only step 1 (``norm`` is then not used).

    After ``local`` or ``global`` every training row has length at most 1 (up to rounding,
    1e-12) in ``norm``. The result keeps ``name``, ``class_names``, ``source`` and ``split`` of
    ``data`` (``split`` describes the split, not the pre-processing) and new feature arrays.

    Raises:
        DataError: an unknown ``normalisation`` or ``norm``, or non-finite feature values.
    """
    if normalisation not in ("local", "global", "none"):
        raise DataError(f"normalisation must be 'local', 'global' or 'none', got {normalisation!r}")
    _check_norm(norm)
    parts = (("x_train", data.x_train), ("x_test", data.x_test))
    for part, x in (*parts, ("x_validation", data.x_validation)):
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
    validation = minmax(data.x_validation)
    if normalisation == "local":
        train, test = _unit_rows(train, norm), _unit_rows(test, norm)
        validation = _unit_rows(validation, norm)
    elif normalisation == "global":
        longest = float(vector_norms(train, norm).max()) if len(train) else 0.0
        if longest > 0:
            train, test, validation = train / longest, test / longest, validation / longest
    return replace(data, x_train=train, x_test=test, x_validation=validation)


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
