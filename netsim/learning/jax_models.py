"""Models written in JAX in the ``learning.model`` slot: an Equinox module, or a pure function
``apply(params, x) -> logits`` with its initial parameters (Flax's ``module.apply`` and
``module.init`` are one), as a :class:`~netsim.contracts.Model`.

``jax`` takes a factory of the researcher's, ``{kind: jax, factory: "pkg.mod:make", options:
{...}}``; ``jax_mlp`` and ``jax_cnn`` are built-in networks (:mod:`netsim.learning.jax_networks`).
JAX is an optional extra: this module imports without it, and a JAX model that is built
without it stops the run with one :class:`~netsim.errors.ComponentError` naming
``pip install 'netsim-ppml[jax]'``.

How the slot's methods are computed (``docs/jax-models.md``):

- The parameters are netsim's one flat float64 vector: the network's parameter pytree
  flattened by ``jax.flatten_util.ravel_pytree`` (leaves in pytree order, each row-major).
  64-bit JAX is switched on (``jax_enable_x64``) when the first JAX model is built, so the
  losses and gradients are float64 as every other model's, the finite-difference check of
  ``netsim check`` holds at its 1e-4, and a run is deterministic on one platform (same seed,
  same bytes; another platform may round differently, as for numpy's BLAS).
- The loss is the softmax cross-entropy of the logits. Per-example gradients are
  ``jax.vmap(jax.grad(loss))`` over the rows (JAX documentation, "Automatic vectorization" and
  "Per-example gradients"), jit-compiled; :meth:`~JaxModel.batch_gradients` (rounds mode:
  many nodes' steps at once) vmaps over the models, each at its own record.
- A batch is padded to the next power of two rows (copies of its first row, dropped from the
  result), so a run whose batch sizes vary (rounds mode steps the nodes a round reaches)
  compiles a handful of shapes, not one per size.
- The loss is not convex and its gradient has no bound, so a private run clips
  (``learning.clip``: the whole per-example gradient to norm C, Abadi et al. 2016 Alg. 1).
  ``layer_clip: C`` clips each parameter array's part of a per-example gradient to C/√L
  (L arrays), so the whole has norm at most C (the per-layer clipping Abadi et al. 2016 §3.1
  mention, with McMahan et al. 2018's equal split of C over the layers); the model then
  declares the bound C and runs privately without ``learning.clip``. What it returns is then
  the clipped gradient, not the loss's: ``netsim check`` compares gradients with finite
  differences, so check a model without ``layer_clip``.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
from pydantic import Field

from netsim.contracts import BuildContext, ComponentConfig, LossCurvature, Model
from netsim.errors import ComponentError, DataError
from netsim.learning.models import MLPConfig
from netsim.registry import import_reference

#: What installs JAX and Equinox (the ``jax`` extra of pyproject.toml).
JAX_EXTRA = "pip install 'netsim-ppml[jax]'"
#: Compiled models kept per (class, settings, classes, features): a run builds its model once,
#: but tests and sweeps in one process build the same one again (compiling costs seconds).
_COMPILED_LIMIT = 16


def require_jax() -> ModuleType:
    """JAX, with 64-bit floats switched on (netsim's parameters are float64);
    :class:`~netsim.errors.ComponentError` naming the extra when JAX or Equinox is missing."""
    try:
        import equinox  # noqa: F401  (the built-in networks and Equinox modules need it)
        import jax
    except ImportError as exc:
        raise ComponentError(
            f"JAX models need jax and equinox ({exc.name} is not installed): {JAX_EXTRA}"
        ) from None
    # process-wide, by JAX's design: arrays made after this default to float64 (the flat
    # parameters and the data are float64 already, so the models compute in float64)
    jax.config.update("jax_enable_x64", True)
    return jax


def bucket(rows: int) -> int:
    """The padded size of a batch of ``rows`` (≥ 1): the next power of two."""
    return 1 << max(rows - 1, 0).bit_length()


@dataclass(frozen=True)
class Network:
    """A network as the adapter uses it: ``apply(params, x)`` → the logits of one example
    ``x`` (shape (features,)) under the parameter pytree ``params``."""

    apply: Callable[[Any, Any], Any]
    params: Any


def as_network(made: Any, jax: ModuleType) -> Network:
    """What a factory returned as a :class:`Network`: an Equinox module (called on one
    example; its inexact arrays are the parameters, ``eqx.partition``) or a pair
    ``(apply, params)`` of a pure function called on a batch (rows, features) → (rows, K)
    and its parameter pytree. Floating leaves become float64."""
    import equinox as eqx

    if isinstance(made, eqx.Module):
        params, static = eqx.partition(made, eqx.is_inexact_array)

        def apply_module(p: Any, x: Any) -> Any:
            return eqx.combine(p, static)(x)

        network = Network(apply_module, params)
    elif isinstance(made, tuple) and len(made) == 2 and callable(made[0]):
        batched = made[0]

        def apply_function(p: Any, x: Any) -> Any:
            return batched(p, x[None, :])[0]  # a batch of one: the Flax convention

        network = Network(apply_function, made[1])
    else:
        raise ComponentError(
            f"a JAX model's factory returned {type(made).__name__}; return an Equinox module "
            "(called on one example) or a pair (apply, params) with apply(params, x) -> logits "
            "for a batch x of shape (rows, features)"
        )
    leaves = jax.tree.leaves(network.params)
    if not leaves or not all(jax.numpy.issubdtype(leaf.dtype, jax.numpy.floating)
                             for leaf in leaves):  # fmt: skip
        raise ComponentError(
            "a JAX model's parameters must be a pytree of floating arrays (at least one); got "
            f"{[str(getattr(leaf, 'dtype', type(leaf).__name__)) for leaf in leaves]}"
        )
    params = jax.tree.map(lambda leaf: jax.numpy.asarray(leaf, jax.numpy.float64), network.params)
    return Network(network.apply, params)


@dataclass(frozen=True)
class Compiled:
    """The jit-compiled functions of one network shape, on the flat parameter vector."""

    size: int
    leaves: int
    losses: Callable[..., Any]
    gradients: Callable[..., Any]
    batch_gradients: Callable[..., Any]
    predict: Callable[..., Any]


def clip_leaves(tree: Any, bound: float, jax: ModuleType) -> Any:
    """Each array of ``tree`` scaled to L2 norm at most ``bound`` (per-layer clipping,
    Abadi et al. 2016 §3.1): with ``bound`` = C/√L over L arrays the whole has norm ≤ C."""
    jnp = jax.numpy

    def clip(leaf: Any) -> Any:
        norm = jnp.sqrt(jnp.sum(leaf * leaf))
        return leaf * jnp.minimum(1.0, bound / jnp.maximum(norm, jnp.finfo(leaf.dtype).tiny))

    return jax.tree.map(clip, tree)


def compile_network(
    network: Network, classes: int, features: int, layer_clip: float | None, jax: ModuleType
) -> Compiled:
    """The slot's functions of ``network``: the cross-entropy −log softmax(f_θ(x))_y per
    example, its gradient ``jax.vmap(jax.grad(loss))`` over the rows (JAX documentation,
    "Per-example gradients"), over the models for :meth:`JaxModel.batch_gradients`, and the
    argmax of the logits, all jit-compiled on the flat parameters."""
    from jax.flatten_util import ravel_pytree

    jnp = jax.numpy
    logits = jax.eval_shape(network.apply, network.params, jnp.zeros(features))
    if tuple(logits.shape) != (classes,):
        raise ComponentError(
            f"a JAX model's network returns logits of shape {tuple(logits.shape)} for one "
            f"example of {features} features; expected ({classes},), one per class"
        )
    flat, unravel = ravel_pytree(network.params)
    leaves = len(jax.tree.leaves(network.params))
    per_leaf = None if layer_clip is None else layer_clip / math.sqrt(leaves)

    def loss(tree: Any, x: Any, y: Any) -> Any:
        return -jax.nn.log_softmax(network.apply(tree, x))[y]

    def example_loss(theta: Any, x: Any, y: Any) -> Any:
        return loss(unravel(theta), x, y)

    def example_gradient(theta: Any, x: Any, y: Any) -> Any:
        # the gradient of the pytree, then flattened: the same vector as the gradient of the
        # flat parameters (unravel's transpose is ravel), with the arrays at hand to clip
        gradient = jax.grad(loss)(unravel(theta), x, y)
        if per_leaf is not None:
            gradient = clip_leaves(gradient, per_leaf, jax)
        return ravel_pytree(gradient)[0]

    def predict(theta: Any, x: Any) -> Any:
        return jnp.argmax(network.apply(unravel(theta), x))

    return Compiled(
        size=int(flat.size),
        leaves=leaves,
        losses=jax.jit(jax.vmap(example_loss, in_axes=(None, 0, 0))),
        gradients=jax.jit(jax.vmap(example_gradient, in_axes=(None, 0, 0))),
        batch_gradients=jax.jit(jax.vmap(example_gradient, in_axes=(0, 0, 0))),
        predict=jax.jit(jax.vmap(predict, in_axes=(None, 0))),
    )


_COMPILED: dict[tuple[type, str, int, int], Compiled] = {}


class JaxModelConfig(ComponentConfig):
    """The settings every JAX model takes."""

    #: Clip each parameter array's part of a per-example gradient to layer_clip/√L (L arrays),
    #: so the whole has L2 norm ≤ layer_clip: the model then declares that bound and runs
    #: privately without learning.clip (None: no clipping of its own).
    layer_clip: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)


class JaxModel(Model):
    """A network written in JAX as a model of the slot: a subclass says which network
    (:meth:`network`); this class computes everything else with JAX (module docstring)."""

    Config = JaxModelConfig

    def __init__(self, config: JaxModelConfig, ctx: BuildContext | None) -> None:
        super().__init__(config, ctx)
        self.jax = require_jax()
        self.layer_clip = config.layer_clip

    @abstractmethod
    def network(self, key: Any) -> Any:
        """The network for the data's shape (``self.classes``, ``self.features``) with its
        parameters drawn from the JAX key ``key``: an Equinox module or ``(apply, params)``
        (:func:`as_network`)."""

    def setup(self, classes: int, features: int) -> None:
        super().setup(classes, features)
        cache = (type(self), self.config.model_dump_json(), classes, features)
        compiled = _COMPILED.get(cache)
        if compiled is None:
            network = as_network(self.network(self.jax.random.key(0)), self.jax)
            compiled = compile_network(network, classes, features, self.layer_clip, self.jax)
            if len(_COMPILED) >= _COMPILED_LIMIT:
                _COMPILED.pop(next(iter(_COMPILED)))
            _COMPILED[cache] = compiled
        self.compiled = compiled

    @property
    def size(self) -> int:
        return self.compiled.size

    def initial_parameters(self, rng: np.random.Generator) -> np.ndarray:
        """The network's parameters drawn from a JAX key seeded by one draw of ``rng`` (JAX's
        default generator, threefry, gives the same numbers on every platform), flattened."""
        from jax.flatten_util import ravel_pytree

        key = self.jax.random.key(int(rng.integers(0, 2**32)))
        flat, _ = ravel_pytree(as_network(self.network(key), self.jax).params)
        if flat.size != self.size:
            raise ComponentError(
                f"a JAX model's network has {flat.size} parameters for one key and {self.size} "
                "for another: its shape must not depend on the key"
            )
        return np.array(flat, dtype=np.float64)

    def _padded(self, function: Callable[..., Any], shared: tuple[np.ndarray, ...],
                *rows: np.ndarray) -> np.ndarray:  # fmt: skip
        """``function(*shared, *rows)`` with each of ``rows`` padded to :func:`bucket` rows
        (copies of its first row), the padding dropped from the result (a new numpy array)."""
        n = len(rows[0])
        padded = bucket(n)
        if padded != n:
            rows = tuple(np.concatenate([r, np.repeat(r[:1], padded - n, axis=0)]) for r in rows)
        return np.array(function(*shared, *rows))[:n]

    def losses(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Cross-entropy −log softmax(f_θ(x))_y per row."""
        if len(x) == 0:
            return np.zeros(0)
        return self._padded(self.compiled.losses, (_floats(params),), _floats(x), _labels(y))

    def per_example_gradients(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``vmap(grad(loss))`` over the rows (each array clipped when ``layer_clip`` is set)."""
        if len(x) == 0:
            return np.zeros((0, self.size))
        gradients = self.compiled.gradients
        return self._padded(gradients, (_floats(params),), _floats(x), _labels(y))

    def batch_gradients(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Row k: ∇ℓ(params[k]; x[k], y[k]), the gradient vmapped over the models."""
        if len(params) == 0:
            return np.zeros((0, self.size))
        gradients = self.compiled.batch_gradients
        return self._padded(gradients, (), _floats(params), _floats(x), _labels(y))

    def predict(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The argmax of the logits per row."""
        if len(x) == 0:
            return np.zeros(0, dtype=np.int64)
        predicted = self._padded(self.compiled.predict, (_floats(params),), _floats(x))
        return predicted.astype(np.int64)

    def gradient_bound(self, norm: str) -> float | None:
        """With ``layer_clip`` C: C in L2, and √size·C in L1 (‖g‖₁ ≤ √n‖g‖₂); else none."""
        if self.layer_clip is None:
            return None
        return self.layer_clip if norm == "L2" else math.sqrt(self.size) * self.layer_clip

    @classmethod
    def bounds_gradient(cls, config: ComponentConfig | None) -> bool:
        """Only with ``layer_clip`` set."""
        return getattr(config, "layer_clip", None) is not None

    def curvature(self) -> LossCurvature:
        """Not convex, no known smoothness or Lipschitz constant (a bound from ``layer_clip``
        bounds what is returned, not the loss's gradient)."""
        return LossCurvature(convex=False, smoothness=None, lipschitz=None)


def _floats(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def _labels(y: np.ndarray) -> np.ndarray:
    return np.asarray(y, dtype=np.int64)


# --- the slot's JAX components ---------------------------------------------------------------


class JaxMLPConfig(JaxModelConfig, MLPConfig):
    """The ``jax_mlp`` model's settings: those of ``mlp`` and ``layer_clip``."""


class JaxMLP(JaxModel):
    """``jax_mlp``: the fully connected network of ``mlp`` in Equinox
    (:class:`~netsim.learning.jax_networks.DenseNetwork`: the same flat layout, so the same
    function of the same parameters), initialised by Equinox (uniform in ±1/√fan_in)."""

    Config = JaxMLPConfig

    def network(self, key: Any) -> Any:
        from netsim.learning.jax_networks import DenseNetwork

        config = self.config
        return DenseNetwork(key=key, classes=self.classes, features=self.features,
                            hidden=config.hidden, activation=config.activation)  # fmt: skip


class JaxCNNConfig(JaxModelConfig):
    """The ``jax_cnn`` model's settings."""

    #: Output channels of each convolution (stride 2: each halves the image), input side first.
    channels: tuple[int, ...] = Field(default=(8, 16), min_length=1)
    #: The convolutions' kernel size (square).
    kernel: int = Field(default=3, ge=1)
    #: Units of the ReLU layer between the convolutions and the logits (0: none).
    hidden: int = Field(default=32, ge=0)
    #: (height, width) of an image (default: a square, 784 → 28 × 28, else one row).
    image: tuple[int, int] | None = None

    def model_post_init(self, context: object, /) -> None:
        if any(width < 1 for width in self.channels):
            raise ValueError(f"channels: every convolution needs at least 1, got {self.channels}")
        if self.image is not None and min(self.image) < 1:
            raise ValueError(f"image: height and width must be at least 1, got {self.image}")


class JaxCNN(JaxModel):
    """``jax_cnn``: a small convolutional network for images such as MNIST's 28 × 28
    (:class:`~netsim.learning.jax_networks.ConvNetwork`: strided 3 × 3 convolutions of 8 and 16
    channels, 32 ReLU units, the logits; about 26,700 parameters on MNIST)."""

    Config = JaxCNNConfig

    def setup(self, classes: int, features: int) -> None:
        image = self.config.image
        if image is not None and image[0] * image[1] != features:
            raise DataError(
                f"jax_cnn: image {image[0]} × {image[1]} has {image[0] * image[1]} pixels but "
                f"the data set has {features} features"
            )
        super().setup(classes, features)

    def network(self, key: Any) -> Any:
        from netsim.learning.jax_networks import ConvNetwork

        config = self.config
        return ConvNetwork(key=key, classes=self.classes, features=self.features,
                           channels=config.channels, kernel=config.kernel,
                           hidden=config.hidden, image=config.image)  # fmt: skip


class JaxFactoryConfig(JaxModelConfig):
    """The ``jax`` model's settings: a factory of yours and its options."""

    #: ``package.module:function`` called as factory(key=…, classes=K, features=d,
    #: **options); it returns an Equinox module or a pair (apply, params).
    factory: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
    #: Keyword arguments of the factory (plain values, as YAML gives them).
    options: dict[str, Any] = Field(default_factory=dict)


class JaxFactoryModel(JaxModel):
    """``jax``: the network a factory of yours makes (``{kind: jax, factory:
    "pkg.mod:make", options: {width: 64}}``): an Equinox module, called on one example, or a
    pair ``(apply, params)`` of a pure function on a batch and its parameter pytree (a Flax
    module's ``(module.apply, module.init(key, x))``)."""

    Config = JaxFactoryConfig

    def __init__(self, config: JaxFactoryConfig, ctx: BuildContext | None) -> None:
        super().__init__(config, ctx)
        self.factory = import_reference(config.factory)
        if not callable(self.factory):
            raise ComponentError(f"learning.model.factory {config.factory} is not callable")

    def network(self, key: Any) -> Any:
        return self.factory(key=key, classes=self.classes, features=self.features,
                            **self.config.options)  # fmt: skip
