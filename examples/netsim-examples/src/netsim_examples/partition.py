"""A transport: the built-in links, plus a network partition for a while.

During ``[start, end)`` every message between the nodes below ``split`` and the others is lost
(reason ``partition`` in ``messages_lost``); outside it, and within each side, the links behave
as the built-in ``links`` transport with the same keys. It derives from the built-in transport,
so everything protocols call on a transport keeps working; it only adds a cause of loss.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field, model_validator

from netsim.api import BuildContext
from netsim.distributions import Duration
from netsim.network.links import BatchFate, LinksConfig, Network, Transfer

PARTITION = "partition"


class PartitionConfig(LinksConfig):  # LinksConfig: delay, bandwidth, loss, failure
    split: int = Field(ge=1)
    start: Duration = 0.0
    end: Duration = float("inf")

    @model_validator(mode="after")
    def _ordered(self) -> PartitionConfig:
        if self.end <= self.start:
            raise ValueError("end must be after start")
        return self


class PartitionedLinks(Network):
    """The built-in links cut in two (nodes below ``split`` and the rest) during a window."""

    Config = PartitionConfig

    @classmethod
    def build(cls, config: PartitionConfig, ctx: BuildContext) -> PartitionedLinks:
        network = super().build(config, ctx)
        assert isinstance(network, PartitionedLinks)
        network.split, network.window = config.split, (config.start, config.end)
        return network

    def cut(self) -> bool:
        """Whether the partition is in force now."""
        start, end = self.window
        return start <= self.sim.now < end

    def send(self, src: int, dst: int, **options: Any) -> Transfer:
        transfer = super().send(src, dst, **options)
        crossing = (src < self.split) != (dst < self.split)
        if crossing and transfer.doom_reason is None and self.cut():
            transfer.doom_reason, transfer.doom_time = PARTITION, self.sim.now
        return transfer

    def send_batch(self, src: np.ndarray, dst: np.ndarray, **options: Any) -> BatchFate:
        fate = super().send_batch(src, dst, **options)
        if self.cut():
            crossing = ~fate.lost & ((src < self.split) != (dst < self.split))
            count = int(crossing.sum())
            if count:  # counted as delivered by the built-in links: lost after all
                self.delivered -= count
                self.lost += count
                fate.lost[crossing] = True
                now = self.sim.now
                self.lost_table.extend([[now] * count, [now] * count,
                                        [options["kind"]] * count, src[crossing].tolist(),
                                        dst[crossing].tolist(), [PARTITION] * count])  # fmt: skip
        return fate
