"""Linear classifiers trained by (private) SGD: logistic regression and the Pegasos SVM.

Hegedűs, Berta, Jelasity (2016) §2.1 and eqs. (9)–(10): binary logistic regression
(y ∈ {0, 1}) and the linear SVM with the hinge loss (y ∈ {−1, 1}, Pegasos); for more than two
classes, multinomial logistic regression (softmax) and the SVM with K hyperplanes
(Crammer & Singer). The gradients are those of
:func:`netsim.privacy.sensitivity.per_example_gradient`, whose sensitivity that module
certifies, so the noise is calibrated to exactly the function that is computed.

Weights are a vector of length d for two classes and a K×d matrix for K > 2 classes. Class
indices are 0..K−1 everywhere; :meth:`LinearModel.label` maps them to each loss's label set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from netsim.learning.losses import binary_label, loss_value, per_example_gradient
from netsim.privacy.sensitivity import Norm, sensitivity

ModelName = Literal["logreg", "svm"]
MODEL_NAMES: tuple[str, ...] = ("logreg", "svm")


@dataclass(frozen=True)
class LinearModel:
    """A linear classifier with ``classes`` classes over ``features`` features."""

    name: ModelName
    classes: int
    features: int

    def __post_init__(self) -> None:
        if self.name not in MODEL_NAMES:
            raise ValueError(f"unknown model {self.name!r}; use one of {', '.join(MODEL_NAMES)}")
        if self.classes < 2:
            raise ValueError(f"a classifier needs at least 2 classes, got {self.classes}")
        if self.features < 1:
            raise ValueError(f"a classifier needs at least 1 feature, got {self.features}")

    @property
    def binary(self) -> bool:
        return self.classes == 2

    @property
    def loss(self) -> str:
        """The loss of :mod:`netsim.privacy.sensitivity` this model trains."""
        if self.name == "logreg":
            return "logistic" if self.binary else "softmax"
        return "hinge" if self.binary else "multiclass_hinge"

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.features,) if self.binary else (self.classes, self.features)

    def zeros(self) -> np.ndarray:
        """The initial weights w₀ = 0."""
        return np.zeros(self.shape)

    def label(self, y: int) -> int:
        """Class index → the loss's label: −1 / +1 for a binary model, the index otherwise
        (:mod:`netsim.learning.losses`)."""
        return binary_label(y) if self.binary else int(y)

    def gradient(self, w: np.ndarray, x: np.ndarray, y: int) -> np.ndarray:
        """∇ℓ(w; x, y) for class index ``y`` (the shape of w)."""
        return per_example_gradient(self.loss, w, x, self.label(y))

    def loss_value(self, w: np.ndarray, x: np.ndarray, y: int) -> float:
        """ℓ(w; x, y) for class index ``y`` (:func:`netsim.learning.losses.loss_value`)."""
        return loss_value(self.loss, w, x, self.label(y))

    def predict(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Class indices for the rows of ``x`` (a binary model predicts 1 where w·x > 0)."""
        scores = x @ w.T
        if self.binary:
            return (scores > 0).astype(np.int64)
        return np.argmax(scores, axis=1)

    def accuracy(self, w: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
        """The fraction of rows classified correctly (Hegedűs et al. eq. 11)."""
        return float(np.mean(self.predict(w, x) == y))

    def sensitivity(self, norm: Norm, radius: float = 1.0) -> float:
        """Sensitivity of one gradient in ``norm`` for records with ‖x‖ ≤ ``radius`` in that
        norm (2R for the binary losses, §3.2; the multi-class bounds of
        :mod:`netsim.privacy.sensitivity`)."""
        return sensitivity(self.loss, radius=radius, norm=norm, classes=self.classes)
