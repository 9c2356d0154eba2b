"""A model: multinomial logistic regression on quadratic features, which separates the XOR
pattern (``xor`` data set) that no linear model can.

φ(x) = (x₁, …, x_d, x₁x₁, x₁x₂, …, x_dx_d, 1): the features, their pairwise products (i ≤ j)
and a constant; the scores are W φ(x) for a K × |φ| matrix W, the loss the cross-entropy
−log softmax(Wφ(x))_y. The loss is convex and smooth in W; its gradient (softmax − e_y) φ(x)ᵀ
has norm at most √2·‖φ(x)‖, which the model does not declare (``gradient_bound`` stays
``None``), so a private run needs ``learning.clip``, as for any model whose author has not
proved a bound.

Used in a scenario as ``learning.model: quadratic_logistic``.
"""

from __future__ import annotations

import numpy as np

from netsim.api import ComponentConfig, LossCurvature, Model


class QuadraticLogistic(Model):
    """Softmax regression on (x, x_i x_j for i ≤ j, 1); parameters start at 0."""

    class Config(ComponentConfig):
        pass

    def setup(self, classes: int, features: int) -> None:
        super().setup(classes, features)
        self.pairs = np.triu_indices(features)
        self.width = features + len(self.pairs[0]) + 1

    @property
    def size(self) -> int:
        return self.classes * self.width

    def features_of(self, x: np.ndarray) -> np.ndarray:
        """φ(x) for each row of ``x``."""
        products = x[:, self.pairs[0]] * x[:, self.pairs[1]]
        return np.hstack([x, products, np.ones((len(x), 1))])

    def _probabilities(self, params: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        phi = self.features_of(x)
        scores = phi @ params.reshape(self.classes, self.width).T
        scores -= scores.max(axis=1, keepdims=True)
        p = np.exp(scores)
        return p / p.sum(axis=1, keepdims=True), phi

    def initial_parameters(self, rng: np.random.Generator) -> np.ndarray:
        return np.zeros(self.size)

    def losses(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        p, _ = self._probabilities(params, x)
        return -np.log(p[np.arange(len(x)), y])

    def per_example_gradients(
        self, params: np.ndarray, x: np.ndarray, y: np.ndarray
    ) -> np.ndarray:
        p, phi = self._probabilities(params, x)
        p[np.arange(len(x)), y] -= 1.0  # softmax − e_y
        return (p[:, :, None] * phi[:, None, :]).reshape(len(x), -1)

    def predict(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        scores = self.features_of(x) @ params.reshape(self.classes, self.width).T
        return np.argmax(scores, axis=1).astype(np.int64)

    def curvature(self) -> LossCurvature:
        """Convex in W; ‖φ(x)‖² ≤ ‖x‖² + ‖x‖⁴ + 1 ≤ 3 for ‖x‖ ≤ 1, so β = 3/2 (the logits'
        Hessian has eigenvalues ≤ 1/2)."""
        return LossCurvature(convex=True, smoothness=1.5, lipschitz=None)
