"""The yardsticks printed beside every learning result: majority class and centralised model.

Principle 9 of ``docs/architecture.md`` ("no number without its yardstick"): an accuracy means
little until it is read beside what a constant classifier and a non-private model trained on
all the data reach on the same split — analysis/README.md reports gossip-learning cells on
Adult at 0.746,
exactly Adult's majority-class share, reading as learning. :func:`learning_baselines` is the
one place that computes both for a train/test split:

- **majority**: predict the training split's most frequent label (ties: the smallest label)
  for every test row; its test accuracy is that label's share of the test split;
- **centralised**: scikit-learn's :class:`~sklearn.linear_model.LogisticRegression` (L2
  penalty, C = 1, lbfgs; multinomial for more than two classes) fitted on the whole training
  split — the same pre-processed rows the decentralised learners hold, centralised and
  without noise — and its test accuracy.

Both are accuracies on the test split the learners are evaluated on. Callers pass the arrays
as the learners see them (after pre-processing and normalisation), dense or scipy CSR, with
labels in any encoding (±1, 0/1, K class indices). Results are cached by a content hash of the
four arrays, in-process and on disk (:mod:`netsim.learning.yardstick_cache`), so the many runs
of a sweep on one data set fit the model once (and import scikit-learn only then). The fit is
deterministic (lbfgs, a fixed ``random_state``); on the shipped
data sets it takes milliseconds (Spambase, Segmentation) to a few seconds (MNIST's 9,000 ×
784), and 0.1 s on sparse data of 15,000 rows × 47,236 features.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from netsim.lazy import lazy_module
from netsim.learning import yardstick_cache

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")

#: The inverse regularisation strength of the centralised model (scikit-learn's default).
CENTRALISED_C = 1.0
#: lbfgs iterations allowed; the shipped data sets converge in under 200.
CENTRALISED_MAX_ITER = 5_000
CENTRALISED_RANDOM_STATE = 0


@dataclass(frozen=True)
class LearningBaselines:
    """The two yardsticks of a learning result on one train/test split (principle 9 of
    ``docs/architecture.md``).

    ``majority`` and ``centralised`` are test accuracies (fractions of test rows classified
    correctly; NaN for an empty test split); ``model`` says what the centralised model is.
    """

    majority: float
    """Test accuracy of predicting the training set's most frequent class."""
    centralised: float
    """Test accuracy of a centralised non-private linear model trained on the whole training
    set."""
    model: str
    """What the centralised model is, e.g. ``"logistic regression (L2, C=1)"``."""


_CACHE: dict[str, LearningBaselines] = {}
_LOCK = threading.Lock()


def learning_baselines(x_train: Any, y_train: Any, x_test: Any, y_test: Any) -> LearningBaselines:
    """The majority-class and centralised non-private accuracies on a train/test split.

    ``x_*`` are dense arrays or scipy sparse matrices of shape (rows, features), ``y_*`` one
    label per row in any encoding. The majority class is the most frequent training label
    (the smallest of those tied). The centralised model is a :class:`LogisticRegression`
    (L2, C = :data:`CENTRALISED_C`, lbfgs, multinomial for K > 2) fitted on the whole training
    split; when the training split holds one class only, it predicts that class (as the
    majority does). Equal arrays give the same :class:`LearningBaselines` object (cached by
    content, see the module docstring).

    Raises:
        ValueError: an empty training split, or shapes that do not match.
    """
    y_tr = np.asarray(y_train).ravel()
    y_te = np.asarray(y_test).ravel()
    if len(y_tr) == 0:
        raise ValueError("learning_baselines: the training split is empty")
    check_split("learning_baselines", x_train, y_tr, x_test, y_te)
    key = content_key(x_train, y_tr, x_test, y_te)
    with _LOCK:
        found = _CACHE.get(key)
    if found is not None:
        return found
    result = yardstick_cache.cached(
        "baselines", disk_key(x_train, y_tr, x_test, y_te), LearningBaselines,
        lambda: _compute(x_train, y_tr, x_test, y_te),
    )  # fmt: skip
    with _LOCK:
        return _CACHE.setdefault(key, result)


def disk_key(x_train: Any, y_train: np.ndarray, x_test: Any, y_test: np.ndarray) -> str:
    """The key of the yardsticks of a split in the disk cache: the arrays' content, this
    module's code (which holds the model's settings) and the libraries that compute them."""
    return yardstick_cache.record_key(
        "baselines", (x_train, y_train, x_test, y_test), {}, (__name__,),
        ("numpy", "scipy", "scikit-learn"),
    )  # fmt: skip


def check_split(
    caller: str, x_train: Any, y_train: np.ndarray, x_test: Any, y_test: np.ndarray
) -> None:
    """Raise ``ValueError`` (naming ``caller``) when the rows and labels of a train/test split,
    or the two parts' features, do not match."""
    if x_train.shape[0] != len(y_train) or x_test.shape[0] != len(y_test):
        raise ValueError(
            f"{caller}: {x_train.shape[0]} training rows with {len(y_train)} labels, "
            f"{x_test.shape[0]} test rows with {len(y_test)} labels"
        )
    if len(y_test) and x_train.shape[1] != x_test.shape[1]:
        raise ValueError(
            f"{caller}: {x_train.shape[1]} training features but {x_test.shape[1]} test features"
        )


def clear_cache() -> None:
    """Forget every cached result (for tests and memory)."""
    with _LOCK:
        _CACHE.clear()


def _compute(
    x_train: Any, y_train: np.ndarray, x_test: Any, y_test: np.ndarray
) -> LearningBaselines:
    labels, counts = np.unique(y_train, return_counts=True)  # sorted: argmax takes the smallest
    majority_label = labels[int(np.argmax(counts))]
    model = (
        f"logistic regression (L2, C={CENTRALISED_C:g}, lbfgs"
        + (", multinomial" if len(labels) > 2 else "")
        + ")"
    )
    if len(y_test) == 0:
        return LearningBaselines(math.nan, math.nan, model)
    majority = float(np.mean(y_test == majority_label))
    if len(labels) < 2:
        return LearningBaselines(majority, majority, model)
    from sklearn.linear_model import LogisticRegression

    classifier = LogisticRegression(
        C=CENTRALISED_C,
        solver="lbfgs",
        max_iter=CENTRALISED_MAX_ITER,
        random_state=CENTRALISED_RANDOM_STATE,
    )
    classifier.fit(float_matrix(x_train), y_train)
    centralised = float(np.mean(classifier.predict(float_matrix(x_test)) == y_test))
    return LearningBaselines(majority, centralised, model)


def float_matrix(x: Any) -> Any:
    """``x`` as float64: CSR if sparse, a dense array otherwise."""
    if sp.issparse(x):
        return sp.csr_matrix(x, dtype=np.float64)
    return np.asarray(x, dtype=np.float64)


def content_key(x_train: Any, y_train: np.ndarray, x_test: Any, y_test: np.ndarray) -> str:
    """A hash of the four arrays' values, shapes and dtypes (a sparse matrix as its canonical
    CSR form, so equal matrices hash alike whatever their index order): the digests of
    :func:`netsim.learning.yardstick_cache.array_digest`, each array hashed once while it
    lives."""
    return ":".join(yardstick_cache.array_digest(a) for a in (x_train, y_train, x_test, y_test))
