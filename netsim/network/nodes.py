"""Node online state, kept in arrays indexed by node id (``docs/architecture.md``: state as
arrays)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

NodeListener = Callable[[int], None]


class NodeStates:
    """Which nodes are online, and since when.

    ``epoch[i]`` counts how often node ``i`` went offline: a transfer that began in an earlier
    epoch of one of its endpoints has lost that endpoint, which is how the network decides
    losses in O(1) without tracking transfers per node. Nodes keep every other state while
    offline; components that care subscribe with :meth:`on_join` / :meth:`on_leave`.
    """

    def __init__(self, online: np.ndarray) -> None:
        self.online = np.array(online, dtype=bool)
        self.n = int(self.online.size)
        self.epoch = np.zeros(self.n, dtype=np.int64)
        # the same states as Python lists, for the event-by-event paths: reading one element
        # of a list is several times cheaper than reading a numpy scalar (docs/performance.md)
        self.is_online: list[bool] = self.online.tolist()
        self.epochs: list[int] = [0] * self.n
        self.last_leave = np.full(self.n, -np.inf)
        self.online_count = int(self.online.sum())
        self._join: list[NodeListener] = []
        self._leave: list[NodeListener] = []

    def on_join(self, listener: NodeListener) -> None:
        """Call ``listener(node)`` right after a node comes online."""
        self._join.append(listener)

    def on_leave(self, listener: NodeListener) -> None:
        """Call ``listener(node)`` right after a node goes offline."""
        self._leave.append(listener)

    def set_online(self, node: int, now: float) -> None:
        """Node ``node`` joins (no-op if it is online already)."""
        if self.is_online[node]:
            return
        self.online[node] = True
        self.is_online[node] = True
        self.online_count += 1
        for listener in self._join:
            listener(node)

    def set_offline(self, node: int, now: float) -> None:
        """Node ``node`` leaves (no-op if it is offline already)."""
        if not self.is_online[node]:
            return
        self.online[node] = False
        self.is_online[node] = False
        self.online_count -= 1
        self.epoch[node] += 1
        self.epochs[node] += 1
        self.last_leave[node] = now
        for listener in self._leave:
            listener(node)
