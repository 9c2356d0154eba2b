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
  many nodes' steps at once) vmaps over the models, each at its own record. ``batching: map``
  computes them with ``jax.lax.map`` instead (``jax_cnn``'s default: on CPU, vmap of a
  convolution's gradient is a grouped convolution, several times slower than the loop).
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
from typing import Any, Literal

import numpy as np
from pydantic import Field

from netsim.contracts import (
    BuildContext,
    ComponentConfig,
    LossCurvature,
    Model,
    check_model_size,
)
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


def _is_parameter(leaf: Any, jax: ModuleType) -> bool:
    """Whether ``leaf`` is a floating array (or the shape of one, under ``eval_shape``)."""
    kinds = (jax.Array, np.ndarray, jax.ShapeDtypeStruct)
    return isinstance(leaf, kinds) and bool(jax.numpy.issubdtype(leaf.dtype, jax.numpy.floating))


def as_network(made: Any, jax: ModuleType) -> Network:
    """What a factory returned as a :class:`Network`: an Equinox module (called on one
    example; its floating arrays are the parameters, ``eqx.partition``) or a pair
    ``(apply, params)`` of a pure function called on a batch (rows, features) → (rows, K)
    and its parameter pytree. The arrays may be shapes (``eqx.filter_eval_shape``)."""
    import equinox as eqx

    if isinstance(made, eqx.Module):
        params, static = eqx.partition(made, lambda leaf: _is_parameter(leaf, jax))

        def apply_module(p: Any, x: Any) -> Any:
            return eqx.combine(p, static)(x)

        return Network(apply_module, params)
    if isinstance(made, tuple) and len(made) == 2 and callable(made[0]):
        batched, params = made

        def apply_function(p: Any, x: Any) -> Any:
            return batched(p, x[None, :])[0]  # a batch of one: the Flax convention

        leaves = jax.tree.leaves(params)
        if not leaves or not all(_is_parameter(leaf, jax) for leaf in leaves):
            raise ComponentError(
                "a JAX model's parameters must be a pytree of floating arrays (at least one); "
                f"got {[str(getattr(leaf, 'dtype', type(leaf).__name__)) for leaf in leaves]}"
            )
        return Network(apply_function, params)
    raise ComponentError(
        f"a JAX model's factory returned {type(made).__name__}; return an Equinox module "
        "(called on one example) or a pair (apply, params) with apply(params, x) -> logits "
        "for a batch x of shape (rows, features)"
    )


@dataclass(frozen=True)
class Compiled:
    """The jit-compiled functions of one network shape, on the flat parameter vector, and
    the shapes of its parameter arrays (in the flat vector's order)."""

    shapes: tuple[tuple[int, ...], ...]
    losses: Callable[..., Any]
    gradients: Callable[..., Any]
    batch_gradients: Callable[..., Any]
    predict: Callable[..., Any]

    @property
    def size(self) -> int:
        return sum(math.prod(shape) for shape in self.shapes)


def clip_leaves(tree: Any, bound: float, jax: ModuleType) -> Any:
    """Each array of ``tree`` scaled to L2 norm at most ``bound`` (per-layer clipping,
    Abadi et al. 2016 §3.1): with ``bound`` = C/√L over L arrays the whole has norm ≤ C."""
    jnp = jax.numpy

    def clip(leaf: Any) -> Any:
        norm = jnp.sqrt(jnp.sum(leaf * leaf))
        return leaf * jnp.minimum(1.0, bound / jnp.maximum(norm, jnp.finfo(leaf.dtype).tiny))

    return jax.tree.map(clip, tree)


def compile_network(
    network: Network,
    classes: int,
    features: int,
    layer_clip: float | None,
    jax: ModuleType,
    batching: str = "vmap",
) -> Compiled:
    """The slot's functions of ``network`` (its parameters may be shapes only): the
    cross-entropy −log softmax(f_θ(x))_y per example, its gradient ``jax.vmap(jax.grad(loss))``
    over the rows (JAX documentation, "Per-example gradients"), over the models for
    :meth:`JaxModel.batch_gradients`, and the argmax of the logits, all jit-compiled on the
    flat float64 parameters (``jax.flatten_util.ravel_pytree``'s layout)."""
    from jax.flatten_util import ravel_pytree

    jnp = jax.numpy
    # float64 zeros of the parameters' shapes: the layout of the flat vector, whatever dtype
    # the network was made in
    zeros = jax.tree.map(lambda leaf: np.zeros(leaf.shape), network.params)
    logits = jax.eval_shape(network.apply, zeros, jnp.zeros(features))
    if tuple(logits.shape) != (classes,):
        raise ComponentError(
            f"a JAX model's network returns logits of shape {tuple(logits.shape)} for one "
            f"example of {features} features; expected ({classes},), one per class"
        )
    _, unravel = ravel_pytree(zeros)
    shapes = tuple(tuple(leaf.shape) for leaf in jax.tree.leaves(zeros))
    per_leaf = None if layer_clip is None else layer_clip / math.sqrt(len(shapes))

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

    if batching == "vmap":
        gradients = jax.vmap(example_gradient, in_axes=(None, 0, 0))
        batch_gradients = jax.vmap(example_gradient, in_axes=(0, 0, 0))
    else:
        # one example after another in one compiled loop: on CPU, vmap turns a convolution's
        # per-example gradient into a grouped convolution, several times slower than the loop
        def gradients(theta: Any, x: Any, y: Any) -> Any:
            return jax.lax.map(lambda row: example_gradient(theta, *row), (x, y))

        def batch_gradients(theta: Any, x: Any, y: Any) -> Any:
            return jax.lax.map(lambda row: example_gradient(*row), (theta, x, y))

    return Compiled(
        shapes=shapes,
        losses=jax.jit(jax.vmap(example_loss, in_axes=(None, 0, 0))),
        gradients=jax.jit(gradients),
        batch_gradients=jax.jit(batch_gradients),
        predict=jax.jit(jax.vmap(predict, in_axes=(None, 0))),
    )


_COMPILED: dict[tuple[type, str, int, int], Compiled] = {}


class JaxModelConfig(ComponentConfig):
    """The settings every JAX model takes."""

    #: Clip each parameter array's part of a per-example gradient to layer_clip/√L (L arrays),
    #: so the whole has L2 norm ≤ layer_clip: the model then declares that bound and runs
    #: privately without learning.clip (None: no clipping of its own).
    layer_clip: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    #: How a batch's per-example gradients are computed: ``vmap`` (vectorised, JAX's
    #: per-example recipe) or ``map`` (jax.lax.map: one example after another in one compiled
    #: loop; faster for convolutions on CPU).
    batching: Literal["vmap", "map"] = "vmap"


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
        """Compile the network's functions for this shape (its shapes only are made, by
        ``eqx.filter_eval_shape``: running a network's initialisation op by op would compile
        each of its random draws)."""
        import equinox as eqx

        super().setup(classes, features)
        cache = (type(self), self.config.model_dump_json(), classes, features)
        compiled = _COMPILED.get(cache)
        if compiled is None:
            made = eqx.filter_eval_shape(self.network, self.jax.random.key(0))
            network = as_network(made, self.jax)
            # the shapes only so far: refuse a network too large before any array is made
            size = sum(math.prod(leaf.shape) for leaf in self.jax.tree.leaves(network.params))
            check_model_size(self.scenario_key, size, self.copies)
            compiled = compile_network(network, classes, features, self.layer_clip, self.jax,
                                        self.config.batching)  # fmt: skip
            if len(_COMPILED) >= _COMPILED_LIMIT:
                _COMPILED.pop(next(iter(_COMPILED)))
            _COMPILED[cache] = compiled
        self.compiled = compiled

    @property
    def size(self) -> int:
        return self.compiled.size

    def initial_parameters(self, rng: np.random.Generator) -> np.ndarray:
        """The network the factory makes from a JAX key seeded by one draw of ``rng`` (JAX's
        default generator, threefry, gives the same numbers on every platform), flattened."""
        key = self.jax.random.key(int(rng.integers(0, 2**32)))
        leaves = self.jax.tree.leaves(as_network(self.network(key), self.jax).params)
        shapes = tuple(tuple(leaf.shape) for leaf in leaves)
        if shapes != self.compiled.shapes:
            raise ComponentError(
                f"a JAX model's network has parameter arrays of shapes {shapes} for one key "
                f"and {self.compiled.shapes} for another: its shape must not depend on the key"
            )
        return np.concatenate([np.ravel(np.asarray(leaf, dtype=np.float64)) for leaf in leaves])

    def _padded(self, function: Callable[..., Any], shared: tuple[np.ndarray, ...],
                *rows: np.ndarray) -> np.ndarray:  # fmt: skip
        """``function(*shared, *rows)`` with each of ``rows`` padded to :func:`bucket` rows
        (copies of its first row), the padding dropped from the result (a new numpy array)."""
        n = len(rows[0])
        padded = bucket(n)
        if padded != n:
            rows = tuple(np.concatenate([r, np.repeat(r[:1], padded - n, axis=0)]) for r in rows)
        return np.array(np.asarray(function(*shared, *rows))[:n])  # a copy of n rows only

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


def fan_in_uniform(shapes: tuple[tuple[int, ...], ...], rng: np.random.Generator) -> np.ndarray:
    """Flat parameters of layers given as (weight, bias) shape pairs, in order: each layer's
    weights and biases uniform in ±1/√fan_in, fan_in = the weight's size over its outputs
    (inputs × kernel size for a convolution): Equinox's default initialisation (and
    PyTorch's), drawn from ``rng`` so the run's ``learning.model`` stream decides it."""
    parts = []
    for weight, bias in zip(shapes[0::2], shapes[1::2], strict=True):
        limit = 1.0 / math.sqrt(math.prod(weight[1:]))
        parts.append(rng.uniform(-limit, limit, math.prod(weight)))
        parts.append(rng.uniform(-limit, limit, math.prod(bias)))
    return np.concatenate(parts)


class _BuiltinJaxModel(JaxModel):
    """A built-in network (:mod:`netsim.learning.jax_networks`): layers of a weight and a
    bias each, initialised with numpy (:func:`fan_in_uniform`)."""

    def initial_parameters(self, rng: np.random.Generator) -> np.ndarray:
        """Equinox's initialisation from ``rng`` (:func:`fan_in_uniform`; making the network
        in JAX would compile each of its random draws, seconds on a small machine)."""
        return fan_in_uniform(self.compiled.shapes, rng)


class JaxMLPConfig(JaxModelConfig, MLPConfig):
    """The ``jax_mlp`` model's settings: those of ``mlp`` and ``layer_clip``."""


class JaxMLP(_BuiltinJaxModel):
    """``jax_mlp``: the fully connected network of ``mlp`` in Equinox
    (:class:`~netsim.learning.jax_networks.DenseNetwork`: the same flat layout, so the same
    function of the same parameters), initialised as Equinox does (:func:`fan_in_uniform`)."""

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
    #: ``map`` by default: vmap of a convolution's gradient is several times slower on CPU.
    batching: Literal["vmap", "map"] = "map"

    def model_post_init(self, context: object, /) -> None:
        if any(width < 1 for width in self.channels):
            raise ValueError(f"channels: every convolution needs at least 1, got {self.channels}")
        if self.image is not None and min(self.image) < 1:
            raise ValueError(f"image: height and width must be at least 1, got {self.image}")


class JaxCNN(_BuiltinJaxModel):
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

    #: ``package.module:function``, called as ``factory(key=…, classes=K, features=d,
    #: **options)``; it returns an Equinox module or a pair (apply, params).
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
