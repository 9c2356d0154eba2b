"""Compiled exact Laplace noise: SFC64 words in lanes, a ziggurat exponential and a sign bit.

A DOLA round perturbs 10⁶ coordinates (Li et al., Alg. 1 at m = n = 1,000), so the cost per
Laplace variate decides the round time. ``Generator.laplace`` takes ≈ 44 ns a draw; one
sequential generator feeding a ziggurat ≈ 4.5 ns (the generator's dependency chain and the
ziggurat's branches do not overlap well); this module ≈ 3 ns, in blocks of ``BLOCK`` draws:

1. **Words.** ``LANES`` independent SFC64 generators (Doty-Humphrey's small fast chaotic
   generator, numpy's ``SFC64``) step side by side, which the compiler turns into vector
   instructions: word j·LANES + l of a block is lane l's j-th word. Each call seeds the lanes
   afresh from the caller's generator (three of its raw words per lane, then numpy's own SFC64
   seeding: counter 1 and twelve discarded outputs), so the noise is a function of the
   caller's named stream and nothing global is used.
2. **Fast pass.** Each word gives a standard exponential by the ziggurat of Marsaglia & Tsang
   (2000, J. Stat. Softw. 5(8)) with 256 layers — bits 11–63 the abscissa, bits 3–10 the
   layer, as numpy's ``random_standard_exponential`` uses them — and bit 0 the sign. The
   abscissa is kept when it lies inside the next layer up (≈ 98% of words); one branch-free
   pass writes every entry and notes the others.
3. **The rest.** A noted entry continues the same ziggurat attempt from its word — wedge test or
   tail, and new attempts while rejected — with words of one more SFC64 stream; its sign stays
   the first word's bit 0, which is independent of the bits that decide the magnitude.

Every entry is therefore one complete ziggurat draw on words of its own, so it is exactly
Exp(1), and Laplace(0, b) = b·S·E with S = ±1 fair and independent of E (not an approximation).
"""

from __future__ import annotations

import math

import numpy as np

from netsim.compiled import njit
from netsim.kernel_cache import guard_kernels

LANES = 16  # SFC64 generators stepped side by side (the vector width times four)
BLOCK = 2048  # words per block (16 KiB); 1,024 and 4,096 measured no faster
_STREAMS = LANES + 1  # the lanes and the stream that finishes the rejected attempts
_SEED_DISCARD = 12  # numpy's sfc64_set_seed: counter 1, then twelve outputs thrown away

_LAYERS = 256
_TAIL_START = 7.69711747013104972  # r of Marsaglia & Tsang (2000) for the exponential, 256 layers
_LAYER_AREA = 3.949659822581572e-3  # v: the common area of every layer
_MANTISSA = 2.0**53


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


@njit(inline="always")
def _sfc64_step(
    a: np.uint64, b: np.uint64, c: np.uint64, counter: np.uint64
) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64, np.uint64]:
    """One SFC64 step (numpy's sfc64_next): the new state (a, b, c, counter) and the word."""
    word = a + b + counter
    rotated = (c << np.uint64(24)) | (c >> np.uint64(40))
    return (
        b ^ (b >> np.uint64(11)),
        c + (c << np.uint64(3)),
        rotated + word,
        counter + np.uint64(1),
        word,
    )


@njit(inline="always")
def _fill_block(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, counter: np.ndarray, block: np.ndarray
) -> None:
    """block[j·L + l] = the j-th next word of lane l (L = a.size; block.size a multiple of L).

    The lanes are separate 1-D arrays, not rows of one: the compiler then knows they do not
    overlap and steps them in vector registers."""
    lanes = a.size
    for j in range(block.size // lanes):
        for lane in range(lanes):
            a[lane], b[lane], c[lane], counter[lane], block[j * lanes + lane] = _sfc64_step(
                a[lane], b[lane], c[lane], counter[lane]
            )


@njit(cache=True)
def _lane_words(state: np.ndarray, blocks: int) -> np.ndarray:
    """``blocks`` blocks of words from the lanes whose states are the columns of ``state``
    (rows a, b, c, counter), which are advanced."""
    a, b, c, counter = state[0].copy(), state[1].copy(), state[2].copy(), state[3].copy()
    words = np.empty(blocks * BLOCK, np.uint64)
    for k in range(blocks):
        _fill_block(a, b, c, counter, words[k * BLOCK : (k + 1) * BLOCK])
    state[0], state[1], state[2], state[3] = a, b, c, counter
    return words


@njit(inline="always")
def _fast_pass(
    out: np.ndarray,
    source: np.ndarray,
    words: np.ndarray,
    signed: np.ndarray,
    keep: np.ndarray,
    width: np.ndarray,
    missed: np.ndarray,
    saved: np.ndarray,
) -> int:
    """out[k] = source[k] ± scale·(the abscissa of words[k]) for every k; the positions of the
    words whose abscissa is not inside the next layer up go to ``missed[:count]`` and their
    source values to ``saved[:count]`` (``out`` may be ``source``); returns the count.
    Branch-free: a position is always written, the count grows by the test."""
    count = 0
    for k in range(out.size):
        word = words[k]
        integer = word >> np.uint64(11)
        layer = (word >> np.uint64(3)) & np.uint64(0xFF)
        value = source[k]
        missed[count] = k
        saved[count] = value
        count += integer >= keep[layer]
        out[k] = value + signed[word & np.uint64(1)] * (
            np.float64(np.int64(integer)) * width[layer]
        )
    return count


@njit(inline="always")
def _unit_interval(word: np.uint64) -> float:
    """A uniform double in [0, 1) from the top 53 bits of a word (numpy's next_double)."""
    return np.float64(np.int64(word >> np.uint64(11))) * (1.0 / 9007199254740992.0)


@njit(inline="always")
def _finish_exponential(
    word: np.uint64,
    spare: np.ndarray,
    keep: np.ndarray,
    width: np.ndarray,
    density: np.ndarray,
    tail_start: float,
) -> float:
    """The Exp(1) of a ziggurat draw whose first attempt, ``word``, missed the fast region:
    the wedge test (or the tail r − log(1 − U) beyond r, by memorylessness) with a fresh
    uniform, and new attempts while rejected, the words from the SFC64 state ``spare``."""
    a, b, c, counter = spare[0], spare[1], spare[2], spare[3]
    while True:
        integer = word >> np.uint64(11)
        layer = (word >> np.uint64(3)) & np.uint64(0xFF)
        x = np.float64(np.int64(integer)) * width[layer]  # < 2⁵³: exact
        if integer < keep[layer]:
            break
        a, b, c, counter, fresh = _sfc64_step(a, b, c, counter)
        uniform = _unit_interval(fresh)
        if layer == 0:
            x = tail_start - math.log1p(-uniform)
            break
        if (density[layer - 1] - density[layer]) * uniform + density[layer] < math.exp(-x):
            break  # under the curve in the wedge; otherwise a new attempt
        a, b, c, counter, word = _sfc64_step(a, b, c, counter)
    spare[0], spare[1], spare[2], spare[3] = a, b, c, counter
    return x


@njit(cache=True)
def _add_laplace(
    out: np.ndarray,
    source: np.ndarray,
    scale: float,
    state: np.ndarray,
    keep: np.ndarray,
    width: np.ndarray,
    density: np.ndarray,
    tail_start: float,
) -> None:
    """out[k] = source[k] + scale·S·E for every k (flat arrays). ``state`` holds the SFC64
    states as columns (rows a, b, c, counter): the first LANES columns are the lanes, the
    last finishes the rejected attempts. The tables are arguments, not globals, which numba
    would fold into slower code."""
    signed = np.array([scale, -scale])  # ±scale: the same product as scale·S·E, exactly
    lanes = state.shape[1] - 1
    a, b = state[0, :lanes].copy(), state[1, :lanes].copy()
    c, counter = state[2, :lanes].copy(), state[3, :lanes].copy()
    spare = state[:, lanes].copy()
    block = np.empty(BLOCK, np.uint64)
    missed = np.empty(BLOCK + 1, np.int64)  # one more: the last position is always written
    saved = np.empty(BLOCK + 1)
    for start in range(0, out.size, BLOCK):
        stop = min(start + BLOCK, out.size)
        _fill_block(a, b, c, counter, block)
        words = block[: stop - start]
        target, origin = out[start:stop], source[start:stop]
        for q in range(_fast_pass(target, origin, words, signed, keep, width, missed, saved)):
            k = missed[q]
            word = words[k]
            magnitude = _finish_exponential(word, spare, keep, width, density, tail_start)
            target[k] = saved[q] + signed[word & np.uint64(1)] * magnitude
    state[0, :lanes], state[1, :lanes], state[2, :lanes], state[3, :lanes] = a, b, c, counter
    state[:, lanes] = spare


@njit(cache=True)
def _warm_up(state: np.ndarray, steps: int) -> None:
    """Advance every SFC64 state (a column of ``state``) by ``steps`` discarded words."""
    for column in range(state.shape[1]):
        a, b, c, counter = state[0, column], state[1, column], state[2, column], state[3, column]
        for _ in range(steps):
            a, b, c, counter, _word = _sfc64_step(a, b, c, counter)
        state[0, column], state[1, column], state[2, column], state[3, column] = a, b, c, counter


def seed_streams(rng: np.random.Generator, streams: int = _STREAMS) -> np.ndarray:
    """SFC64 states (rows a, b, c, counter; one column per stream) seeded from ``rng``:
    three raw words per stream, then numpy's SFC64 seeding (counter 1, twelve outputs
    discarded). Column l is then exactly a ``numpy.random.SFC64`` whose state was set to
    (a, b, c, 1) and which has produced twelve words."""
    seeds = rng.bit_generator.random_raw(3 * streams).reshape(3, streams)
    state = np.vstack([seeds, np.ones((1, streams), np.uint64)])
    _warm_up(state, _SEED_DISCARD)
    return state


def lane_words(rng: np.random.Generator, blocks: int) -> np.ndarray:
    """The words the lanes seeded from ``rng`` give for ``blocks`` blocks, in block order
    (for tests: lane l's words are entries l, l + LANES, …)."""
    state = seed_streams(rng)
    return _lane_words(state[:, :LANES].copy(), blocks)


def add_laplace(
    out: np.ndarray, source: np.ndarray, scale: float, rng: np.random.Generator
) -> None:
    """out = source + i.i.d. Laplace(0, scale) (flat, C-contiguous float64 arrays of one size;
    ``out`` may be ``source``), the lanes seeded from ``rng``."""
    state = seed_streams(rng)
    _add_laplace(out, source, float(scale), state, _KEEP, _WIDTH, _DENSITY, _TAIL_START)


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
