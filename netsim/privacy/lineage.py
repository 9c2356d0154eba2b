"""The lineage of the models a run's walks carry, and who received which: the views a
per-observer accountant reads (:func:`netsim.privacy.walk_pairwise.path_known_slopes`;
``docs/papers.md``, "Network DP of a random walk: path known and path secret").

Every model state gets a serial number when it is made; the lineage keeps, for each, the state
it was made from, the privacy unit whose gradient made it, that unit's node, how far the unit
could move it (η·Δ) and the noise the step added (η·σ). A node that is handed a state, or
updates one, is recorded as receiving it. A walk restarted from a node's local copy carries a
state that node made or received, so the restarted branch hangs from it; a copy that is never
handed on leaks nothing further.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class _Column:
    """A growable typed array (amortised doubling)."""

    def __init__(self, dtype: type, capacity: int = 1024) -> None:
        self.data = np.empty(capacity, dtype=dtype)
        self.size = 0

    def append(self, value: float) -> None:
        if self.size == self.data.size:
            self.data = np.concatenate([self.data, np.empty_like(self.data)])
        self.data[self.size] = value
        self.size += 1

    def view(self) -> np.ndarray:
        return self.data[: self.size]


class Lineage:
    """States made and states received, in the order they happened."""

    def __init__(self) -> None:
        self._parent = _Column(np.int64)
        self._unit = _Column(np.int64)
        self._owner = _Column(np.int64)
        self._shift = _Column(np.float64)
        self._noise = _Column(np.float64)
        self._holder = _Column(np.int64)
        self._receiver = _Column(np.int64)
        self._received = _Column(np.int64)
        self._time = _Column(np.float64)

    @property
    def states(self) -> int:
        return self._parent.size

    def made(
        self, parent: int, unit: int, owner: int, shift: float, noise_std: float, holder: int = -1
    ) -> int:
        """Record a state made from ``parent`` (−1: an initial model) by ``unit`` of node
        ``owner`` (−1, −1 and zeros: no contribution) at node ``holder`` (the node whose visit
        made it, and who sends it on; −1: an initial model); returns its serial."""
        self._parent.append(parent)
        self._unit.append(unit)
        self._owner.append(owner)
        self._shift.append(shift)
        self._noise.append(noise_std)
        self._holder.append(holder)
        return self._parent.size - 1

    def received(self, node: int, serial: int, time: float) -> None:
        """``node`` was handed (or updated) state ``serial`` at ``time``."""
        self._receiver.append(node)
        self._received.append(serial)
        self._time.append(time)

    def views(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(time, node, state) of every reception, in the order they happened."""
        return self._time.view(), self._receiver.view(), self._received.view()

    def arrays(self) -> dict[str, np.ndarray]:
        """The lineage as :func:`~netsim.privacy.walk_pairwise.path_known_slopes` reads it."""
        return {
            "parent": self._parent.view(),
            "unit": self._unit.view(),
            "owner": self._owner.view(),
            "shift": self._shift.view(),
            "noise_std": self._noise.view(),
        }

    def receptions(self, coalitions: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """The states each coalition's members received (one array per coalition)."""
        receivers, states = self._receiver.view(), self._received.view()
        order = np.argsort(receivers, kind="stable")
        by_node, sorted_states = receivers[order], states[order]
        out = []
        for members in coalitions:
            parts = []
            for node in members:
                lo, hi = np.searchsorted(by_node, [node, node + 1])
                parts.append(sorted_states[lo:hi])
            out.append(np.concatenate(parts) if parts else np.zeros(0, np.int64))
        return out

    def holders(self) -> np.ndarray:
        """The node that made each state (−1: an initial model)."""
        return self._holder.view()

    def transfers(self, links: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """The states that crossed each link (a, b), either way: a reception by one end of a
        state the other end made (a state is sent on by the node whose visit made it)."""
        receivers, states = self._receiver.view(), self._received.view()
        holders = self._holder.view()[states]
        out = []
        for a, b in links:
            crossed = ((holders == a) & (receivers == b)) | ((holders == b) & (receivers == a))
            out.append(states[crossed])
        return out

    def contributions(self, units: int) -> np.ndarray:
        """How many contributions each unit made (states with that unit and a shift)."""
        unit, shift = self._unit.view(), self._shift.view()
        used = (unit >= 0) & (shift > 0)
        return np.bincount(unit[used], minlength=units)
