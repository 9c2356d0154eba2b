"""The Equinox networks behind the built-in JAX models ``jax_mlp`` and ``jax_cnn``
(:mod:`netsim.learning.jax_models`).

This module imports JAX and Equinox at its top, so only :mod:`netsim.learning.jax_models`
imports it, once it has checked that they are installed (``pip install 'netsim-ppml[jax]'``).
Each network maps one example (a vector of ``features`` entries) to the logits of the K
classes: Equinox's convention, under which the adapter vmaps over examples and over models.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp


def _activation(name: str) -> Callable[[jax.Array], jax.Array]:
    """``tanh`` or ``relu``, as the numpy ``mlp`` model names them."""
    return jnp.tanh if name == "tanh" else jax.nn.relu


class DenseNetwork(eqx.Module):
    """Fully connected layers, ``hidden`` widths of ``activation`` units then the logits.

    Its parameters flatten (``jax.flatten_util.ravel_pytree``) as each layer's weight matrix
    (outputs × inputs, row-major) then its biases, input layer first: the layout of the numpy
    ``mlp`` model (:class:`netsim.learning.models.MLP`), so the two compute the same function of
    the same flat vector."""

    layers: list[eqx.nn.Linear]
    activation: str = eqx.field(static=True)

    def __init__(
        self,
        *,
        key: jax.Array,
        classes: int,
        features: int,
        hidden: Sequence[int],
        activation: str,
    ) -> None:
        widths = (features, *hidden, classes)
        keys = jax.random.split(key, len(widths) - 1)
        self.layers = [
            eqx.nn.Linear(widths[i], widths[i + 1], key=keys[i]) for i in range(len(widths) - 1)
        ]
        self.activation = activation

    def __call__(self, x: jax.Array) -> jax.Array:
        act = _activation(self.activation)
        for layer in self.layers[:-1]:
            x = act(layer(x))
        return self.layers[-1](x)


def image_shape(features: int, image: Sequence[int] | None) -> tuple[int, int]:
    """(height, width) a row of ``features`` pixels is read as: ``image`` when given, a square
    when ``features`` is one (784 → 28 × 28), else one row of ``features`` pixels (tabular data
    then still runs, as a one-dimensional convolution)."""
    if image is not None:
        return int(image[0]), int(image[1])
    side = math.isqrt(features)
    return (side, side) if side * side == features else (1, features)


class ConvNetwork(eqx.Module):
    """A small convolutional network for images: ``channels`` 3 × 3 (``kernel``) convolutions of
    stride 2 with "same" padding and ReLU (each halves the image: 28 → 14 → 7), then a
    ``hidden`` layer of ReLU units (none when 0) and the logits. Strided convolutions stand in
    for pooling, so an image of any size (one pixel high, too) keeps a valid shape. The image
    is multiplied by √(height·width): netsim normalises a record to length 1, which leaves
    pixels of about 1/√features, and the initialisation assumes inputs of order 1 (without it
    the network barely learns in the steps a private run affords)."""

    convs: list[eqx.nn.Conv2d]
    dense: list[eqx.nn.Linear]
    shape: tuple[int, int] = eqx.field(static=True)

    def __init__(
        self,
        *,
        key: jax.Array,
        classes: int,
        features: int,
        channels: Sequence[int],
        kernel: int,
        hidden: int,
        image: Sequence[int] | None,
    ) -> None:
        self.shape = image_shape(features, image)
        keys = list(jax.random.split(key, len(channels) + 2))
        widths = (1, *channels)
        self.convs = [
            eqx.nn.Conv2d(widths[i], widths[i + 1], kernel, stride=2, padding="SAME",
                          key=keys[i])
            for i in range(len(channels))
        ]  # fmt: skip
        height, width = self.shape
        for _ in channels:
            height, width = -(-height // 2), -(-width // 2)  # "same" padding, stride 2: ⌈n/2⌉
        sizes = (widths[-1] * height * width, *([hidden] if hidden else []), classes)
        self.dense = [
            eqx.nn.Linear(sizes[i], sizes[i + 1], key=keys[len(channels) + i])
            for i in range(len(sizes) - 1)
        ]

    def __call__(self, x: jax.Array) -> jax.Array:
        # netsim normalises a record to norm 1, so a pixel is about 1/√features: rescaled to
        # pixels of mean square 1, as the convolutions' initialisation assumes
        h = x.reshape(1, *self.shape) * math.sqrt(self.shape[0] * self.shape[1])
        for conv in self.convs:
            h = jax.nn.relu(conv(h))
        h = h.ravel()
        for layer in self.dense[:-1]:
            h = jax.nn.relu(layer(h))
        return self.dense[-1](h)
