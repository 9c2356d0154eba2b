"""Named, independent random streams derived from one root seed.

No global random state (``docs/architecture.md``, principle 2). Every component asks for its own
stream by name; the stream's seed is derived from the root seed and a stable hash of the name,
so adding a component (a new name) never changes the draws of the others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np


def stable_name_key(name: str) -> int:
    """A 64-bit integer derived from ``name`` that is the same on every platform and run."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "little")


def new_root_seed() -> int:
    """A fresh root seed from the operating system's entropy (recorded in the run directory)."""
    return int(np.random.SeedSequence().entropy % (2**63))


class RandomStreams:
    """Factory of ``numpy.random.Generator`` streams keyed by name.

    ``streams.get("churn")`` always returns the same generator object for the same name within
    one run, and generators for different names are statistically independent
    (``SeedSequence`` spawn keys).
    """

    def __init__(self, root_seed: int) -> None:
        if root_seed < 0:
            raise ValueError(f"seed must be >= 0, got {root_seed}")
        self.root_seed = int(root_seed)
        self._streams: dict[str, np.random.Generator] = {}

    def seed_sequence(self, name: str) -> np.random.SeedSequence:
        """The seed sequence behind stream ``name`` (for components that need several)."""
        return np.random.SeedSequence(entropy=self.root_seed, spawn_key=(stable_name_key(name),))

    def get(self, name: str) -> np.random.Generator:
        """The generator for ``name``, created on first use."""
        stream = self._streams.get(name)
        if stream is None:
            stream = np.random.Generator(np.random.PCG64(self.seed_sequence(name)))
            self._streams[name] = stream
        return stream

    def integer_seed(self, name: str) -> int:
        """A 32-bit integer seed for libraries that want one (networkx ``seed=``)."""
        return int(self.seed_sequence(name).generate_state(1, dtype=np.uint32)[0])


class BlockDraws:
    """Draws from one distribution of a stream, generated in blocks.

    A scalar draw from a numpy ``Generator`` costs microseconds; per-message code (link
    delays, peer choice) draws millions of them. Drawing ``block`` at a time and handing them
    out one by one is just as deterministic: the stream is consumed in the same order.
    """

    __slots__ = ("_block", "_buffer", "_draw", "_next")

    def __init__(self, draw: Callable[[int], np.ndarray], block: int = 4096) -> None:
        self._draw = draw
        self._block = block
        self._buffer: list[float] = []
        self._next = 0

    def __call__(self) -> float:
        if self._next >= len(self._buffer):
            self._buffer = self._draw(self._block).tolist()
            self._next = 0
        value = self._buffer[self._next]
        self._next += 1
        return value

    @property
    def block(self) -> int:
        """How many draws each block holds."""
        return self._block

    def remaining(self) -> np.ndarray:
        """The draws of the current block not handed out yet, in order (a compiled reader
        takes them over: the compiled exact core)."""
        return np.array(self._buffer[self._next :], dtype=np.float64)

    def next_block(self) -> np.ndarray:
        """The next block, drawn from the stream as this object would draw it (for a compiled
        reader that took the current block over with :meth:`remaining`)."""
        return np.asarray(self._draw(self._block), dtype=np.float64)

    def next_blocks(self, count: int) -> np.ndarray:
        """The next ``count`` blocks, drawn one after another exactly as :meth:`next_block`
        draws each (the same calls of the stream, so the same values in the same order,
        whatever the distribution): a compiled reader asks for many at once and returns to
        Python less often."""
        return np.concatenate([self.next_block() for _ in range(count)])

    def pick_where(self, items: list[int], flags: list[bool], tries: int) -> int:
        """Rejection sampling: up to ``tries`` times, draw u and take ``items[int(u ·
        len(items))]``; return the first item whose flag is set, or -1. Consumes exactly the
        draws that as many calls of this object would, with the loop on local variables
        (a peer choice makes several draws per message)."""
        count = len(items)
        buffer, position = self._buffer, self._next
        end = len(buffer)
        for _ in range(tries):
            if position >= end:
                buffer = self._buffer = self._draw(self._block).tolist()
                position, end = 0, len(buffer)
            item = items[int(buffer[position] * count)]
            position += 1
            if flags[item]:
                self._next = position
                return item
        self._next = position
        return -1
