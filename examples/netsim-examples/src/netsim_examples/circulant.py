"""A topology: the circulant graph, node i linked to i ± s (mod N) for every offset s.

``offsets: [1]`` is a ring; ``[1, 2]`` a ring with chords to the second neighbours; adding a
long offset (``[1, 10]``) shortens every path, as in a small world, but deterministically.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from netsim.api import ComponentConfig, TopologyBuilder
from netsim.network.topology import Topology


class CirculantConfig(ComponentConfig):
    offsets: list[int] = Field(default=[1], min_length=1)


class Circulant(TopologyBuilder):
    """Undirected links i — i + s (mod N) for every s in ``offsets``."""

    Config = CirculantConfig

    @classmethod
    def problem(cls, config: CirculantConfig, nodes: int) -> str | None:
        bad = [s for s in config.offsets if not 1 <= s <= nodes // 2]
        if bad:
            return f"topology.offsets: {bad} not in [1, nodes // 2 = {nodes // 2}]"
        return None

    def build_topology(self, nodes: int) -> Topology:
        sources = np.tile(np.arange(nodes), len(self.config.offsets))
        targets = (sources + np.repeat(self.config.offsets, nodes)) % nodes
        return Topology.from_edges(nodes, sources, targets, directed=False)
