"""The models of the ``learning.model`` slot: linear classifiers (logistic regression, the
Pegasos SVM) and a multi-layer perceptron, each a :class:`~netsim.contracts.Model` whose
parameters are one flat vector.

Hegedűs, Berta, Jelasity (2016) §2.1 and eqs. (9)–(10): binary logistic regression
(y ∈ {0, 1}) and the linear SVM with the hinge loss (y ∈ {−1, 1}, Pegasos); for more than two
classes, multinomial logistic regression (softmax) and the SVM with K hyperplanes
(Crammer & Singer). The gradients are those of
:func:`netsim.learning.sensitivity.per_example_gradient`, whose sensitivity that module
certifies, so the noise is calibrated to exactly the function that is computed.

:class:`LinearModel` is the arithmetic of the linear classifiers (weights a vector of length d
for two classes, a K×d matrix for K > 2); :class:`LogisticRegression` and :class:`LinearSVM`
are the slot's components around it, whose flat parameters are those weights in row-major
order. :class:`MLP` is a fully connected network with softmax cross-entropy, whose gradient
has no bound of its own: it runs privately only with ``learning.clip`` (Abadi et al. 2016,
per-example clipping).

Class indices are 0..K−1 everywhere; :meth:`LinearModel.label` maps them to each loss's label
set.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from netsim.compiled import njit
from netsim.contracts import BuildContext, ComponentConfig, LossCurvature, Model, check_model_size
from netsim.kernel_cache import guard_kernels
from netsim.learning.losses import (
    batch_gradient,
    binary_label,
    loss_value,
    per_example_gradient,
    record_gradient,
)
from netsim.learning.sensitivity import gradient_bound, sensitivity
from netsim.privacy.events import Norm
from netsim.registry import REGISTRY, build_spec, component_spec

ModelName = Literal["logreg", "svm"]
MODEL_NAMES: tuple[str, ...] = ("logreg", "svm")
#: Models scored at once by :func:`LinearModel.predict_many` (bounds the memory of a batch:
#: models × test rows × classes).
_BATCH_SCORES = 4_000_000
#: Scores per block of :func:`model_test_accuracies` (64 k doubles: half a megabyte).
_ACCURACY_BLOCK = 65_536


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
        """The loss of :mod:`netsim.learning.sensitivity` this model trains."""
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

    def predict_many(self, weights: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Class indices for the rows of ``x`` under each of ``weights`` (models × the
        weights' shape) → (models, rows), scored in batches of one matrix product each."""
        out = np.empty((len(weights), len(x)), dtype=np.int64)
        per_model = max(1, len(x) * (1 if self.binary else self.classes))
        batch = max(1, _BATCH_SCORES // per_model)
        for start in range(0, len(weights), batch):
            w = weights[start : start + batch]
            if self.binary:
                predicted = (x @ w.T > 0).astype(np.int64)  # (rows, m)
            else:
                scores = x @ w.reshape(-1, w.shape[-1]).T  # (rows, m·K)
                predicted = np.argmax(scores.reshape(len(x), len(w), -1), axis=2)
            out[start : start + len(w)] = predicted.T
        return out

    def binary_accuracies(self, weights: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """A binary model's accuracy under each of ``weights`` (models × features): the
        scores of :meth:`predict_many`, batch for batch the same matrix products, compared
        with 0 and counted against ``y`` (the mean of the agreement, a count over n either
        way), without the prediction arrays between."""
        correct = np.empty(len(weights), dtype=np.int64)
        batch = max(1, _BATCH_SCORES // max(1, len(x)))
        for start in range(0, len(weights), batch):
            w = weights[start : start + batch]
            correct[start : start + len(w)] = np.count_nonzero((x @ w.T > 0) == y[:, None], axis=0)
        return correct / len(y)

    def accuracy(self, w: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
        """The fraction of rows classified correctly (Hegedűs et al. eq. 11)."""
        return float(np.mean(self.predict(w, x) == y))

    def sensitivity(self, norm: Norm, radius: float = 1.0) -> float:
        """Sensitivity of one gradient in ``norm`` for records with ‖x‖ ≤ ``radius`` in that
        norm (2R for the binary losses, §3.2; the multi-class bounds of
        :mod:`netsim.learning.sensitivity`)."""
        return sensitivity(self.loss, radius=radius, norm=norm, classes=self.classes)


# --- the slot's components -------------------------------------------------------------------


class _LinearClassifier(Model):
    """A :class:`LinearModel` as a component of the model slot: the flat parameters are its
    weights (the K×d matrix in row-major order for K > 2 classes), starting at 0."""

    light_setup = True

    name: ClassVar[ModelName]
    #: ℓ'' bound of the loss in the margin (logistic 1/4; softmax: the logits' Hessian
    #: diag(p) − ppᵀ has eigenvalues ≤ 1/2); ``None`` for the non-smooth hinge losses.
    _smoothness: ClassVar[dict[bool, float | None]]

    class Config(ComponentConfig):
        pass

    def setup(self, classes: int, features: int) -> None:
        super().setup(classes, features)
        self.linear = LinearModel(self.name, classes, features)

    @property
    def size(self) -> int:
        return int(np.prod(self.linear.shape))

    def initial_parameters(self, rng: np.random.Generator) -> np.ndarray:
        """w₀ = 0 (no draw)."""
        return np.zeros(self.size)

    def weights(self, params: np.ndarray) -> np.ndarray:
        """The flat parameters as the linear model's weights (a view)."""
        return params.reshape(self.linear.shape)

    def losses(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        w = self.weights(params)
        return np.array([self.linear.loss_value(w, x[i], int(y[i])) for i in range(len(x))])

    def per_example_gradients(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """One gradient per row, each computed as :func:`per_example_gradient` computes a
        single record's (so a batch of one is bit for bit the paper's update)."""
        w = self.weights(params)
        out = np.empty((len(x), self.size))
        for i in range(len(x)):
            out[i] = self.linear.gradient(w, x[i], int(y[i])).ravel()
        return out

    def example_gradient(self, params: np.ndarray, x: np.ndarray, y: int) -> np.ndarray:
        """One record's gradient as :meth:`per_example_gradients` computes it, bit for bit,
        without its checks (:func:`~netsim.learning.losses.record_gradient`)."""
        linear = self.linear
        if linear.binary:
            return record_gradient(linear.loss, params, x, 2 * int(y) - 1)
        return linear.gradient(self.weights(params), x, int(y)).ravel()

    def batch_gradients(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Each model at its own record in one pass
        (:func:`~netsim.learning.losses.batch_gradient`)."""
        linear = self.linear
        labels = 2 * np.asarray(y, dtype=np.int64) - 1 if linear.binary else y
        weights = params.reshape(len(params), *linear.shape)
        return batch_gradient(linear.loss, weights, x, labels).reshape(len(params), -1)

    def predict(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        return self.linear.predict(self.weights(params), x)

    def accuracy(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
        """The fraction of rows of ``x`` classified as ``y`` (Hegedűs et al. 2016, eq. 11):
        for a binary model, :meth:`predict`'s scores x·w compared with 0 and counted, the
        same number as the mean of the predictions' agreement (a count over n either way)
        without the arrays between."""
        if self.linear.binary and len(y):
            return np.count_nonzero((x @ params > 0) == y) / len(y)
        return super().accuracy(params, x, y)

    def predict_many(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        return self.linear.predict_many(params.reshape(-1, *self.linear.shape), x)

    def gradient_bound(self, norm: str) -> float | None:
        return gradient_bound(self.linear.loss, radius=1.0, norm=norm, classes=self.classes)

    def sensitivity(self, norm: str) -> float | None:
        return self.linear.sensitivity(norm)  # type: ignore[arg-type]

    def curvature(self) -> LossCurvature:
        """Convex; smooth for the logistic losses (β = 1/4 binary, 1/2 softmax, for
        ‖x‖₂ ≤ 1); the hinge losses are not smooth."""
        return LossCurvature(
            convex=True,
            smoothness=self._smoothness[self.classes == 2],
            lipschitz=self.gradient_bound("L2"),
        )


class LogisticRegression(_LinearClassifier):
    """``logreg``: binary logistic regression, or multinomial (softmax) for K > 2 classes
    (Hegedűs et al. 2016, eq. 9)."""

    name = "logreg"
    _smoothness: ClassVar[dict[bool, float | None]] = {True: 0.25, False: 0.5}


class LinearSVM(_LinearClassifier):
    """``svm``: the Pegasos linear SVM (hinge loss), or Crammer–Singer's K hyperplanes for
    K > 2 classes (Hegedűs et al. 2016, eq. 10)."""

    name = "svm"
    _smoothness: ClassVar[dict[bool, float | None]] = {True: None, False: None}


class MLPConfig(ComponentConfig):
    """The ``mlp`` model's settings."""

    #: Widths of the hidden layers, input side first (``[]``: softmax regression).
    hidden: tuple[int, ...] = Field(default=(32,))
    #: The hidden layers' activation.
    activation: Literal["tanh", "relu"] = "tanh"

    def model_post_init(self, context: object, /) -> None:
        if any(width < 1 for width in self.hidden):
            raise ValueError(f"hidden: every layer needs at least 1 unit, got {self.hidden}")


class MLP(Model):
    """``mlp``: a fully connected network, ``hidden`` layers of ``activation`` units and a
    softmax output over the K classes (two outputs for a binary data set), trained on the
    cross-entropy loss. Parameters: each layer's weight matrix (outputs × inputs, row-major)
    then its biases, input layer first; weights start Glorot-uniform (Glorot & Bengio 2010)
    from the run's ``learning.model`` stream, biases at 0.

    Its gradient has no bound for a given record (it grows with the weights), so a private
    run needs ``learning.clip``; the loss is not convex.
    """

    Config = MLPConfig
    light_setup = True

    def __init__(self, config: MLPConfig, ctx: BuildContext | None) -> None:
        super().__init__(config, ctx)
        self.hidden = tuple(config.hidden)
        self.activation = config.activation

    def setup(self, classes: int, features: int) -> None:
        super().setup(classes, features)
        widths = (features, *self.hidden, classes)
        #: (rows, columns, offset of the weights, offset of the biases) of each layer
        self.layers: list[tuple[int, int, int, int]] = []
        offset = 0
        for fan_in, fan_out in itertools.pairwise(widths):
            self.layers.append((fan_out, fan_in, offset, offset + fan_out * fan_in))
            offset += fan_out * fan_in + fan_out
        self._size = offset

    @property
    def size(self) -> int:
        return self._size

    def initial_parameters(self, rng: np.random.Generator) -> np.ndarray:
        params = np.zeros(self._size)
        for rows, cols, w_at, _ in self.layers:
            limit = np.sqrt(6.0 / (rows + cols))
            params[w_at : w_at + rows * cols] = rng.uniform(-limit, limit, rows * cols)
        return params

    def _unpack(self, params: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        return [
            (params[w_at : w_at + rows * cols].reshape(rows, cols), params[b_at : b_at + rows])
            for rows, cols, w_at, b_at in self.layers
        ]

    def _act(self, z: np.ndarray) -> np.ndarray:
        return np.tanh(z) if self.activation == "tanh" else np.maximum(z, 0.0)

    def _act_derivative(self, z: np.ndarray, a: np.ndarray) -> np.ndarray:
        return 1.0 - a * a if self.activation == "tanh" else (z > 0).astype(np.float64)

    def _forward(
        self, params: np.ndarray, x: np.ndarray
    ) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
        """Pre-activations and activations of the hidden layers, and the output logits."""
        layers = self._unpack(params)
        zs, activations = [], [np.asarray(x, dtype=np.float64)]
        for w, b in layers[:-1]:
            z = activations[-1] @ w.T + b
            zs.append(z)
            activations.append(self._act(z))
        w, b = layers[-1]
        return zs, activations, activations[-1] @ w.T + b

    @staticmethod
    def _log_softmax(logits: np.ndarray) -> np.ndarray:
        top = logits.max(axis=1, keepdims=True)
        shifted = logits - top
        return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))

    def losses(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Cross-entropy −log softmax(f_θ(x))_y per row."""
        _, _, logits = self._forward(params, x)
        return -self._log_softmax(logits)[np.arange(len(x)), np.asarray(y, dtype=np.int64)]

    def per_example_gradients(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Back-propagation kept per example: the gradient of layer l's weights for row i is
        the outer product of its output error and its input, δ_l,i ⊗ a_{l−1},i."""
        layers = self._unpack(params)
        zs, activations, logits = self._forward(params, x)
        rows = len(x)
        delta = np.exp(self._log_softmax(logits))  # softmax(f) − e_y: the logits' gradient
        delta[np.arange(rows), np.asarray(y, dtype=np.int64)] -= 1.0
        out = np.empty((rows, self._size))
        for index in range(len(layers) - 1, -1, -1):
            out_rows, _, w_at, b_at = self.layers[index]
            a_in = activations[index]
            out[:, w_at:b_at] = (delta[:, :, None] * a_in[:, None, :]).reshape(rows, -1)
            out[:, b_at : b_at + out_rows] = delta
            if index > 0:
                w, _ = layers[index]
                delta = (delta @ w) * self._act_derivative(zs[index - 1], a_in)
        return out

    def batch_gradients(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Back-propagation of each model at its own record, all at once: the layers of
        :meth:`per_example_gradients` with a weight matrix per row (``einsum`` over the
        models)."""
        m = len(params)
        layers = [
            (params[:, w_at:b_at].reshape(m, rows, cols), params[:, b_at : b_at + rows])
            for rows, cols, w_at, b_at in self.layers
        ]
        zs, activations = [], [np.asarray(x, dtype=np.float64)]
        for w, b in layers[:-1]:
            z = np.einsum("mrc,mc->mr", w, activations[-1]) + b
            zs.append(z)
            activations.append(self._act(z))
        w, b = layers[-1]
        logits = np.einsum("mrc,mc->mr", w, activations[-1]) + b
        delta = np.exp(self._log_softmax(logits))
        delta[np.arange(m), np.asarray(y, dtype=np.int64)] -= 1.0
        out = np.empty((m, self._size))
        for index in range(len(layers) - 1, -1, -1):
            out_rows, _, w_at, b_at = self.layers[index]
            a_in = activations[index]
            out[:, w_at:b_at] = (delta[:, :, None] * a_in[:, None, :]).reshape(m, -1)
            out[:, b_at : b_at + out_rows] = delta
            if index > 0:
                w, _ = layers[index]
                delta = np.einsum("mr,mrc->mc", delta, w) * self._act_derivative(
                    zs[index - 1], a_in
                )
        return out

    def predict(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        _, _, logits = self._forward(params, x)
        return np.argmax(logits, axis=1).astype(np.int64)


#: The annotation of ``learning.model``: a registered model's name (``logreg``) or a mapping
#: with its settings (``{kind: mlp, hidden: [64]}``).
ModelSpec = component_spec("model")


def build_model(
    spec: str | ComponentConfig,
    classes: int,
    features: int,
    ctx: BuildContext | None = None,
    *,
    key: str = "learning.model",
) -> Model:
    """The model of a :data:`ModelSpec` value, set up for ``classes`` and ``features``; one
    message if it would not fit on the run's nodes (:func:`~netsim.contracts.check_model_size`;
    ``key`` names the slot in it)."""
    model = build_spec("model", spec, ctx)
    assert isinstance(model, Model)
    model.scenario_key, model.copies = key, (ctx.nodes if ctx is not None else 1)
    model.setup(classes, features)
    check_model_size(key, model.size, model.copies)
    return model


def check_model_fits(
    spec: str | ComponentConfig, classes: int, features: int, ctx: BuildContext, key: str
) -> None:
    """At validation: the model set up and its size checked, where its setup is light
    (:attr:`~netsim.contracts.Model.light_setup`); the others are checked when built."""
    name = spec if isinstance(spec, str) else spec.kind  # type: ignore[attr-defined]
    cls, _ = REGISTRY.lookup(("model",), name)
    if getattr(cls, "light_setup", False):
        build_model(spec, classes, features, ctx, key=key)


def each_accuracy(model: Model, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``model.accuracy`` of each row of ``params`` (models × size), the same numbers. A
    binary linear model's scores are one matrix-vector product per model in one call:
    numpy's ``matmul`` of the stack (x broadcast) hands each model to the same BLAS routine
    (``gemv``) with the same arguments as ``x @ w`` for one, so the scores are bit for bit
    those of :meth:`_LinearClassifier.accuracy` (``tests/test_models.py``)."""
    blasable = x.dtype == np.float64 and x.flags.c_contiguous and params.dtype == np.float64
    if isinstance(model, _LinearClassifier) and model.linear.binary and len(y) and blasable:
        params = np.ascontiguousarray(params)
        scores = np.broadcast_to(x, (len(params), *x.shape)) @ params[:, :, None]
        return np.count_nonzero((scores[:, :, 0] > 0) == y, axis=1) / len(y)
    return np.array([model.accuracy(p, x, y) for p in params], dtype=np.float64)


def model_accuracies(
    model: Model, params: list[np.ndarray], x: np.ndarray, y: np.ndarray
) -> np.ndarray:
    """The test accuracy of each of ``params`` (:meth:`Model.predict_many`)."""
    if not params:
        return np.zeros(0)
    if isinstance(model, _LinearClassifier) and model.linear.binary and len(y):
        return model.linear.binary_accuracies(np.stack(params), x, y)
    predicted = model.predict_many(np.stack(params), x)
    return np.mean(predicted == y[None, :], axis=1)


#: |fl32(w·x) − w·x| ≤ (d + 2)·u·Σ|w_j x_j| ≤ (d + 2)·u·‖w‖₂‖x‖₂ for u = 2⁻²⁴, the inputs
#: rounded to float32 and summed in any order (Higham 2002, eq. 3.5, γ_n ≈ n·u); this factor
#: per feature, with a margin, screens the float32 scores (:func:`model_test_accuracies`).
_FLOAT32_SCREEN = 1.01 * 2.0**-24
#: Norms outside this range are scored in float64 only (float32 under- or overflows there).
_FLOAT32_NORMS = (1e-30, 1e30)


@njit(cache=True)
def _count_correct(
    scores: np.ndarray,
    positive: np.ndarray,
    tolerance: np.ndarray,
    x_norm: np.ndarray,
    params: np.ndarray,
    x: np.ndarray,
) -> np.ndarray:
    """Correct predictions per model from float32 ``scores``: a score farther from 0 than
    its error bound (``tolerance[i]·x_norm[j]``) has the sign of the float64 product; the
    others are recomputed in float64."""
    models, rows = scores.shape
    correct = np.zeros(models, dtype=np.int64)
    for i in range(models):
        count = 0
        near = 0
        for j in range(rows):  # branch-free: vectorised
            score = scores[i, j]
            count += (score > 0.0) == positive[j]
            near += abs(score) <= tolerance[i] * x_norm[j]
        if near:  # rare: the row again, the scores near 0 in float64
            count = 0
            for j in range(rows):
                above = scores[i, j] > 0.0
                if abs(scores[i, j]) <= tolerance[i] * x_norm[j]:
                    exact = 0.0
                    for k in range(x.shape[1]):
                        exact += params[i, k] * x[j, k]
                    above = exact > 0.0
                count += above == positive[j]
        correct[i] = count
    return correct


def model_test_accuracies(
    model: Model, params: np.ndarray, x: np.ndarray, y: np.ndarray
) -> np.ndarray:
    """The test accuracy of each row of ``params`` (models × parameters) on ``x``, ``y``,
    as :meth:`Model.predict_many` gives it. For a binary linear model the scores params·xᵀ
    are computed in float32 (half the work of float64), in blocks small enough for the
    cache, and only those within the float32 error bound of 0 are recomputed in float64,
    so every prediction is the float64 one; the signs are counted against the labels."""
    if not (isinstance(model, _LinearClassifier) and model.linear.binary):
        return np.mean(model.predict_many(params, x) == y[None, :], axis=1)
    positive = np.asarray(y) == 1
    x_norm = np.linalg.norm(x, axis=1)
    w_norm = np.linalg.norm(params, axis=1)
    low, high = _FLOAT32_NORMS
    screened = (w_norm >= low) & (w_norm <= high)
    if not ((x_norm >= low) & (x_norm <= high)).all():
        screened[:] = False
    correct = np.empty(len(params), dtype=np.int64)
    tolerance = _FLOAT32_SCREEN * (x.shape[1] + 2) * w_norm
    x32 = x.astype(np.float32)
    block = max(1, _ACCURACY_BLOCK // max(1, len(x)))
    for start in range(0, len(params), block):
        w = params[start : start + block]
        with np.errstate(over="ignore", invalid="ignore"):  # such rows are not screened
            scores = w.astype(np.float32) @ x32.T
        at = slice(start, start + block)
        correct[at] = _count_correct(scores, positive, tolerance[at], x_norm, w, x)
    plain = np.flatnonzero(~screened)
    if plain.size:
        correct[plain] = np.count_nonzero((params[plain] @ x.T > 0) == positive, axis=1)
    return correct / len(y)


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
