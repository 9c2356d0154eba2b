"""Compiled exact Laplace noise: PCG64 words, a ziggurat exponential and a sign bit in one pass.

A DOLA round perturbs 10⁶ coordinates (Li et al., Alg. 1 at m = n = 1,000), so the cost per
Laplace variate decides the round time. ``Generator.laplace`` takes ≈ 44 ns a draw; numpy's
ziggurat exponential plus a separate sign pass ≈ 7 ns; this module ≈ 4–5 ns:

* the 64-bit words are those of the caller's ``numpy.random.PCG64`` (XSL-RR output of a
  128-bit LCG, O'Neill 2014), computed here in four interleaved lanes and the generator then
  advanced past the words used, so the stream stays the one the simulation's named stream
  owns and nothing global is used;
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
_LOW128 = 2**128 - 1


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


@njit(cache=True)
def _fill_words(lanes: np.ndarray, jump: np.ndarray, block: np.ndarray) -> None:
    """The next ``block.size`` (a multiple of 4) words of the stream, in order.

    Lane j holds the state that yields word j of the block; all four advance by four steps
    at once (multiplier M⁴ and increment c·(1 + M + M² + M³) in ``jump``), so the four 128-bit
    multiplies of a step are independent and overlap instead of waiting on each other."""
    h0, l0, h1, l1 = lanes[0, 0], lanes[0, 1], lanes[1, 0], lanes[1, 1]
    h2, l2, h3, l3 = lanes[2, 0], lanes[2, 1], lanes[3, 0], lanes[3, 1]
    mh, ml, ch, cl = jump[0], jump[1], jump[2], jump[3]
    for k in range(0, block.size, 4):
        block[k] = _output(h0, l0)
        block[k + 1] = _output(h1, l1)
        block[k + 2] = _output(h2, l2)
        block[k + 3] = _output(h3, l3)
        h0, l0 = _lcg128(h0, l0, mh, ml, ch, cl)
        h1, l1 = _lcg128(h1, l1, mh, ml, ch, cl)
        h2, l2 = _lcg128(h2, l2, mh, ml, ch, cl)
        h3, l3 = _lcg128(h3, l3, mh, ml, ch, cl)
    lanes[0, 0], lanes[0, 1], lanes[1, 0], lanes[1, 1] = h0, l0, h1, l1
    lanes[2, 0], lanes[2, 1], lanes[3, 0], lanes[3, 1] = h2, l2, h3, l3


@njit(inline="always")
def _unit_interval(word: np.uint64) -> float:
    """A uniform double in [0, 1) from the top 53 bits of a word (numpy's next_double)."""
    return np.float64(np.int64(word >> np.uint64(11))) * (1.0 / 9007199254740992.0)


_BLOCK = 512  # words generated ahead: 4 kB, stays in L1


@njit(inline="always")
def _attempt(word: np.uint64, width: np.ndarray) -> tuple[float, float, np.uint64, np.uint64]:
    """Sign, abscissa, 53-bit integer abscissa and layer of one word (numpy's bit layout)."""
    sign = 1.0 - 2.0 * np.float64(np.int64(word & np.uint64(1)))
    word >>= np.uint64(3)
    layer = word & np.uint64(0xFF)
    word >>= np.uint64(8)
    return sign, np.float64(np.int64(word)) * width[layer], word, layer  # < 2⁵³: exact


@njit(cache=True)
def _rare_case(
    x: float,
    layer: np.uint64,
    lanes: np.ndarray,
    jump: np.ndarray,
    block: np.ndarray,
    at: int,
    keep: np.ndarray,
    width: np.ndarray,
    density: np.ndarray,
    tail_start: float,
) -> tuple[float, float, int, int]:
    """Finish a draw whose first word fell outside the next layer up (≈ 1.1% of words):
    the tail (layer 0, r − log(1 − U)), the wedge test, or new attempts after a rejection.
    Returns (magnitude, sign of a new attempt or 0 for the first word's, next unused word of
    ``block``, how many times the block was refilled)."""
    sign = 0.0
    refills = 0
    while True:
        if at >= block.size:
            _fill_words(lanes, jump, block)
            at = 0
            refills += 1
        uniform = _unit_interval(block[at])
        at += 1
        if layer == 0:  # the tail beyond r, by memorylessness
            return tail_start - math.log1p(-uniform), sign, at, refills
        if (density[layer - 1] - density[layer]) * uniform + density[layer] < math.exp(-x):
            return x, sign, at, refills  # under the curve in the wedge
        if at >= block.size:  # rejected: a new attempt from the next word
            _fill_words(lanes, jump, block)
            at = 0
            refills += 1
        sign, x, word, layer = _attempt(block[at], width)
        at += 1
        if word < keep[layer]:
            return x, sign, at, refills


@njit(cache=True)
def _add_laplace(
    out: np.ndarray,
    source: np.ndarray,
    scale: float,
    lanes: np.ndarray,
    jump: np.ndarray,
    keep: np.ndarray,
    width: np.ndarray,
    density: np.ndarray,
    tail_start: float,
) -> int:
    """out[k] = source[k] + scale·S·E for every k (flat arrays); returns the words used.

    The common case is a straight loop: one word, one table lookup, one comparison. The
    rare cases are a call, so they do not slow the loop down (measured: a retry loop around
    every draw cost twice as much)."""
    block = np.empty(_BLOCK, dtype=np.uint64)
    at = _BLOCK
    used = 0
    for k in range(out.size):
        if at >= _BLOCK:
            _fill_words(lanes, jump, block)
            used += _BLOCK
            at = 0
        sign, x, word, layer = _attempt(block[at], width)
        at += 1
        if word >= keep[layer]:
            x, rare_sign, at, refills = _rare_case(
                x, layer, lanes, jump, block, at, keep, width, density, tail_start
            )
            sign = sign if rare_sign == 0.0 else rare_sign
            used += refills * _BLOCK
        out[k] = source[k] + scale * sign * x
    return used - _BLOCK + at  # the words of the last block that were not used are not spent


def _pair(value: int) -> tuple[int, int]:
    return value >> 64, value & _LOW64


def pcg64_lanes(bit_generator: np.random.PCG64) -> tuple[np.ndarray, np.ndarray]:
    """The four lane states (the states that yield the generator's next four words) and the
    four-step jump (M⁴, c·(1 + M + M² + M³)) of a numpy PCG64, which is left untouched."""
    inner = bit_generator.state["state"]
    state, increment = int(inner["state"]), int(inner["inc"])
    lanes = np.zeros((4, 2), dtype=np.uint64)
    for j in range(4):
        state = (state * _PCG_MULTIPLIER + increment) & _LOW128
        lanes[j] = _pair(state)
    multiplier, offset = 1, 0
    for _ in range(4):  # x ↦ M·x + c composed four times
        multiplier, offset = (
            (multiplier * _PCG_MULTIPLIER) & _LOW128,
            (offset * _PCG_MULTIPLIER + increment) & _LOW128,
        )
    jump = np.array([*_pair(multiplier), *_pair(offset)], dtype=np.uint64)
    return lanes, jump


def pcg64_words(bit_generator: np.random.PCG64, count: int) -> np.ndarray:
    """The generator's next ``count`` words, computed here; the generator is advanced past
    them (exactly where ``random_raw(count)`` would leave it)."""
    lanes, jump = pcg64_lanes(bit_generator)
    words = np.empty(-(-count // 4) * 4, dtype=np.uint64)
    _fill_words(lanes, jump, words)
    _advance(bit_generator, count)
    return words[:count]


def _advance(bit_generator: np.random.PCG64, words: int) -> None:
    """Advance by ``words`` draws, keeping a buffered 32-bit half as it was."""
    before = bit_generator.state
    bit_generator.advance(words)
    after = bit_generator.state
    after["has_uint32"], after["uinteger"] = before["has_uint32"], before["uinteger"]
    bit_generator.state = after


def add_laplace_pcg64(
    out: np.ndarray, source: np.ndarray, scale: float, bit_generator: np.random.PCG64
) -> None:
    """out = source + i.i.d. Laplace(0, scale) (flat, C-contiguous float64), the words drawn
    from ``bit_generator``, which is advanced past them."""
    lanes, jump = pcg64_lanes(bit_generator)
    used = _add_laplace(
        out, source, float(scale), lanes, jump, _KEEP, _WIDTH, _DENSITY, _TAIL_START
    )
    _advance(bit_generator, int(used))
