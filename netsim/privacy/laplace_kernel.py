"""Compiled exact Laplace noise: PCG64 words, a ziggurat exponential and a sign bit in one pass.

A DOLA round perturbs 10⁶ coordinates (Li et al., Alg. 1 at m = n = 1,000), so the cost per
Laplace variate decides the round time. ``Generator.laplace`` takes ≈ 44 ns a draw; numpy's
ziggurat exponential plus a separate sign pass ≈ 7 ns; this module ≈ 4–5 ns:

* the 64-bit words are those of the caller's ``numpy.random.PCG64`` (XSL-RR output of a
  128-bit LCG, O'Neill 2014), computed here with a 128-bit multiply and the generator's state
  written back after the last word used, so the stream stays the one the simulation's named
  stream owns and nothing global is used;
* each word gives a standard exponential by the ziggurat of Marsaglia & Tsang (2000, J. Stat.
  Softw. 5(8)) with 256 layers — bits 11–63 the abscissa, bits 3–10 the layer, as numpy's
  ``random_standard_exponential`` uses them — and bit 0 the sign; the rare wedge and tail
  cases take further words and are exact (rejection, and r − log(1 − U) in the tail);
* Laplace(0, b) = b·S·E with S = ±1 fair and E ~ Exp(1) independent: exactly Laplace.

The draws differ from numpy's ``standard_exponential`` on the same stream (the sign takes a
bit of each word, and the tables are computed here), not the law.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

_LAYERS = 256
_TAIL_START = 7.69711747013104972  # r of Marsaglia & Tsang (2000) for the exponential, 256 layers
_LAYER_AREA = 3.949659822581572e-3  # v: the common area of every layer
_MANTISSA = 2.0**53

_PCG_MULTIPLIER = 0x2360ED051FC65DA44385DF649FCCF645  # numpy's PCG64 (pcg64.h)
_LOW64 = 2**64 - 1


def exponential_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ziggurat tables (k, w, f) for Exp(1) with 256 layers and 53-bit abscissae.

    Layer i > 0 spans [0, x_i) with x_{i−1} = −log(v/x_i + e^{−x_i}) (equal areas v), x_255 = r;
    layer 0 is the base strip of width v/f(r) whose part beyond r is the tail (Marsaglia &
    Tsang 2000, §2). An abscissa u·w[i] (u a 53-bit integer) is accepted at once when
    u < k[i], i.e. when it lies inside the next layer up; f[i] = e^{−x_i}.
    """
    keep = np.zeros(_LAYERS, np.uint64)
    width = np.zeros(_LAYERS)
    density = np.zeros(_LAYERS)
    x = _TAIL_START
    base = _LAYER_AREA / math.exp(-x)
    keep[0] = np.uint64(x / base * _MANTISSA)
    width[0] = base / _MANTISSA
    width[-1] = x / _MANTISSA
    density[0] = 1.0
    density[-1] = math.exp(-x)
    upper = x
    for i in range(_LAYERS - 2, 0, -1):
        x = -math.log(_LAYER_AREA / x + math.exp(-x))
        keep[i + 1] = np.uint64(x / upper * _MANTISSA)
        upper = x
        density[i] = math.exp(-x)
        width[i] = x / _MANTISSA
    return keep, width, density


_KEEP, _WIDTH, _DENSITY = exponential_tables()


@intrinsic
def _lcg128(typingctx, high, low, multiplier_high, multiplier_low, increment_high, increment_low):
    """(high, low)·(multiplier) + (increment) mod 2¹²⁸, as a (high, low) pair of uint64.

    Written in LLVM IR on 128-bit integers, which compiles to three machine multiplies; numba
    has no 128-bit type, and emulating the product with 32-bit halves costs seven."""
    u64 = types.uint64
    signature = types.UniTuple(u64, 2)(u64, u64, u64, u64, u64, u64)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        wide = ir.IntType(128)
        shift = ir.Constant(wide, 64)

        def join(high_half, low_half):  # type: ignore[no-untyped-def]
            return builder.or_(
                builder.shl(builder.zext(high_half, wide), shift), builder.zext(low_half, wide)
            )

        product = builder.mul(join(args[0], args[1]), join(args[2], args[3]))
        result = builder.add(product, join(args[4], args[5]))
        halves = (
            builder.trunc(builder.lshr(result, shift), ir.IntType(64)),
            builder.trunc(result, ir.IntType(64)),
        )
        return context.make_tuple(builder, sig.return_type, halves)

    return signature, codegen


@njit(inline="always")
def _output(high: np.uint64, low: np.uint64) -> np.uint64:
    """PCG64's XSL-RR output of a state: (high ⊕ low) rotated right by the top 6 bits."""
    folded = high ^ low
    rotation = high >> np.uint64(58)
    return (folded >> rotation) | (folded << ((np.uint64(64) - rotation) & np.uint64(63)))


@njit(inline="always")
def _next_word(
    high: np.uint64, low: np.uint64, constants: np.ndarray
) -> tuple[np.uint64, np.uint64, np.uint64]:
    """One PCG64 step: the new state (high, low) and its output word. ``constants`` holds
    (multiplier high, multiplier low, increment high, increment low): arguments, not globals,
    which numba would fold into slower code."""
    high, low = _lcg128(high, low, constants[0], constants[1], constants[2], constants[3])
    return high, low, _output(high, low)


@njit(cache=True)
def _fill_words(state: np.ndarray, constants: np.ndarray, out: np.ndarray) -> None:
    """The next ``out.size`` words of the PCG64 whose state is ``state`` (advanced)."""
    high, low = state[0], state[1]
    for k in range(out.size):
        high, low, out[k] = _next_word(high, low, constants)
    state[0], state[1] = high, low


@njit(inline="always")
def _unit_interval(word: np.uint64) -> float:
    """A uniform double in [0, 1) from the top 53 bits of a word (numpy's next_double)."""
    return np.float64(np.int64(word >> np.uint64(11))) * (1.0 / 9007199254740992.0)


@njit(inline="always")
def _attempt(word: np.uint64, width: np.ndarray) -> tuple[float, float, np.uint64, np.uint64]:
    """Sign, abscissa, 53-bit integer abscissa and layer of one word (numpy's bit layout)."""
    sign = 1.0 - 2.0 * np.float64(np.int64(word & np.uint64(1)))
    word >>= np.uint64(3)
    layer = word & np.uint64(0xFF)
    word >>= np.uint64(8)
    return sign, np.float64(np.int64(word)) * width[layer], word, layer  # < 2⁵³: exact


@njit(cache=True)
def _add_laplace(
    out: np.ndarray,
    source: np.ndarray,
    scale: float,
    state: np.ndarray,
    constants: np.ndarray,
    keep: np.ndarray,
    width: np.ndarray,
    density: np.ndarray,
    tail_start: float,
) -> None:
    """out[k] = source[k] + scale·S·E for every k (flat arrays), the words from ``state``.

    The LCG step of the next draw does not wait for this draw's table lookups, so the two
    overlap; generating the words ahead in blocks, or in four interleaved lanes, was slower
    (measured)."""
    high, low = state[0], state[1]
    for k in range(out.size):
        while True:
            high, low, word = _next_word(high, low, constants)
            sign, x, integer, layer = _attempt(word, width)
            if integer < keep[layer]:  # inside the next layer up: ≈ 98.9% of words
                break
            high, low, word = _next_word(high, low, constants)
            uniform = _unit_interval(word)
            if layer == 0:  # the tail beyond r, by memorylessness
                x = tail_start - math.log1p(-uniform)
                break
            if (density[layer - 1] - density[layer]) * uniform + density[layer] < math.exp(-x):
                break  # under the curve in the wedge; otherwise a new attempt
        out[k] = source[k] + scale * sign * x
    state[0], state[1] = high, low


def _pair(value: int) -> tuple[int, int]:
    return value >> 64, value & _LOW64


def _pcg64_arrays(bit_generator: np.random.PCG64) -> tuple[np.ndarray, np.ndarray]:
    """The LCG state (high, low) and the constants (M, increment) of a numpy PCG64."""
    inner = bit_generator.state["state"]
    state = np.array(_pair(int(inner["state"])), dtype=np.uint64)
    constants = np.array([*_pair(_PCG_MULTIPLIER), *_pair(int(inner["inc"]))], dtype=np.uint64)
    return state, constants


def _store(bit_generator: np.random.PCG64, state: np.ndarray) -> None:
    """Write the LCG state back (a buffered 32-bit half stays as it was)."""
    full = bit_generator.state
    full["state"]["state"] = (int(state[0]) << 64) | int(state[1])
    bit_generator.state = full


def pcg64_words(bit_generator: np.random.PCG64, count: int) -> np.ndarray:
    """The generator's next ``count`` words, computed here; the generator is advanced past
    them (exactly where ``random_raw(count)`` would leave it)."""
    state, constants = _pcg64_arrays(bit_generator)
    words = np.empty(count, dtype=np.uint64)
    _fill_words(state, constants, words)
    _store(bit_generator, state)
    return words


def add_laplace_pcg64(
    out: np.ndarray, source: np.ndarray, scale: float, bit_generator: np.random.PCG64
) -> None:
    """out = source + i.i.d. Laplace(0, scale) (flat, C-contiguous float64), the words drawn
    from ``bit_generator``, which is advanced past them."""
    state, constants = _pcg64_arrays(bit_generator)
    _add_laplace(out, source, float(scale), state, constants, _KEEP, _WIDTH, _DENSITY, _TAIL_START)
    _store(bit_generator, state)
