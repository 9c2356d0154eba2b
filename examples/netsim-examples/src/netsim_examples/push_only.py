"""A gossip engine: push-only gossip (no pull answers), event by event.

Every period each active node pushes its value to a random online neighbour, which merges it;
nothing is sent back, so an exchange costs one message instead of two. It reuses the built-in
engine's event-driven exchanges with their pull switched off, and keeps its period and message
size keys (``period``, ``message_size``); it runs in exact mode only.
"""

from __future__ import annotations

from typing import Literal

from netsim.api import BuildContext
from netsim.protocols.gossip import GossipConfig, PushPullGossip


class PushOnlyConfig(GossipConfig):  # GossipConfig: period, message_size, mode
    mode: Literal["exact"] = "exact"


class PushOnlyGossip(PushPullGossip):
    """Push gossip: the built-in exact engine without its pull."""

    Config = PushOnlyConfig

    @classmethod
    def build(cls, config: PushOnlyConfig, ctx: BuildContext) -> PushOnlyGossip:
        assert ctx.sim is not None and ctx.network is not None
        return cls(
            ctx.sim, ctx.network, period=config.period, message_size=config.message_size,
            pull=False, name=ctx.key,
        )  # fmt: skip
