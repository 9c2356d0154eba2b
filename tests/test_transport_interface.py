"""The transport is an interface (``netsim.contracts.Transport``), not the built-in class: a
plug-in transport that implements it without deriving from ``netsim.network.links.Network``
runs a gossip broadcast and the walk service (exact mode on SimPy: the compiled core runs
the built-in only), and one that leaves a method out is refused by name."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from netsim.contracts import BuildContext, ComponentConfig, Transport
from netsim.distributions import Constant
from netsim.errors import NetsimError
from netsim.network.links import BatchFate, LinkModel, Network
from netsim.scenario.loader import validate_scenario
from netsim.scenario.runner import run_in_memory


class PlainTransferConfig(ComponentConfig):
    """A fixed transfer time: the plug-in's only setting."""

    delay: float = 0.05


class PlainTransfer:
    """One message in flight (what a receiver reads of it)."""

    __slots__ = (
        "dst", "dst_epoch", "kind", "on_deliver", "on_lost", "payload", "sent_at", "src",
        "src_epoch",
    )  # fmt: skip

    def __init__(self, **fields: Any) -> None:
        for name, value in fields.items():
            setattr(self, name, value)


class PlainTransport(Transport):
    """Written to the interface alone: a fixed delay, a message lost only when an endpoint
    leaves before it arrives, peers drawn among the online neighbours by one draw."""

    Config = PlainTransferConfig

    def __init__(self, config: PlainTransferConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        assert ctx.sim is not None and ctx.topology is not None
        self.sim, self.topology, self.nodes = ctx.sim, ctx.topology, ctx.node_states
        self.delay = config.delay
        self.links = LinkModel(delay=Constant(dist="constant", value=config.delay))
        self.lossy = False
        self.sent = self.delivered = self.lost = 0

    def send(self, src, dst, *, kind, payload, on_deliver, on_lost=None, size=0.0,
             duration=None):  # fmt: skip
        epochs = self.nodes.epochs
        transfer = PlainTransfer(
            src=src, dst=dst, kind=kind, payload=payload, sent_at=self.sim.now,
            src_epoch=epochs[src], dst_epoch=epochs[dst], on_deliver=on_deliver,
            on_lost=on_lost,
        )  # fmt: skip
        self.sent += 1
        self.sim.call_later(self.delay if duration is None else duration, self._arrive, transfer)
        return transfer

    def _arrive(self, transfer: PlainTransfer) -> None:
        nodes = self.nodes
        ends = ((transfer.src, transfer.src_epoch, "source_offline"),
                (transfer.dst, transfer.dst_epoch, "target_offline"))  # fmt: skip
        for node, epoch, reason in ends:
            if nodes.epochs[node] != epoch or not nodes.is_online[node]:
                self.lost += 1
                if transfer.on_lost is not None:
                    transfer.on_lost(transfer, reason)
                return
        self.delivered += 1
        transfer.on_deliver(transfer)

    def send_batch(self, src, dst, *, kind, rng, window=0.0, size=None, links_up=False):
        count = int(src.size)
        self.sent += count
        self.delivered += count
        return BatchFate(np.zeros(count, bool), np.full(count, self.delay) if size else None)

    def deliver_reliably(self, count: int) -> None:
        self.sent += count
        self.delivered += count

    def random_online_neighbour(self, node: int, uniform: Any) -> int:
        online = self.nodes.is_online
        candidates = [v for v in self.topology.neighbours(node).tolist() if online[v]]
        return candidates[int(uniform() * len(candidates))] if candidates else -1

    def round_pairs(self, active, rng):
        nodes = np.flatnonzero(active)
        order = rng.permutation(nodes)
        initiators, peers = [], []
        for node in order.tolist():
            online = [v for v in self.topology.neighbours(node).tolist() if self.nodes.online[v]]
            if online:
                initiators.append(node)
                peers.append(online[int(rng.integers(len(online)))])
        initiators, peers = np.array(initiators, np.int64), np.array(peers, np.int64)
        return initiators, peers, peers[~active[peers]], nodes

    def links_down_at(self, src, dst, start, end):
        return np.full(int(src.size), np.nan)


CHURN = {
    "kind": "synthetic",
    "online": {"dist": "exponential", "mean": "10min"},
    "offline": {"dist": "exponential", "mean": "5min"},
}
PLUG_IN = {"kind": "tests.test_transport_interface:PlainTransport", "delay": 0.1}


def run(data: dict) -> tuple[Any, dict]:
    """The run of ``data`` in memory: what was built, and its tables."""
    return run_in_memory(validate_scenario(data, source="test", base_dir=None))


def test_the_plug_in_is_no_network() -> None:
    assert not issubclass(PlainTransport, Network)


def test_a_plug_in_transport_runs_a_gossip_broadcast() -> None:
    built, tables = run({
        "name": "plug-in-broadcast", "seed": 2, "nodes": 40, "duration": "10min",
        "topology": {"kind": "k_out", "k": 5}, "churn": CHURN, "links": PLUG_IN,
        "gossip": {"period": "1s"}, "broadcast": {"interval": "2min"},
    })  # fmt: skip
    assert built.exact_engine.startswith("simpy")
    broadcasts = tables["broadcasts"]
    assert len(broadcasts) > 0 and (broadcasts["final_coverage"] > 0.5).all()
    assert len(tables["broadcast_adoptions"]) > len(broadcasts)
    samples = tables["samples"]
    assert samples["messages_sent"].iloc[-1] > 0
    assert "messages_lost" not in tables  # the plug-in declares no table
    assert type(built.network).__name__ == "PlainTransport"
    assert not isinstance(built.network, Network)
    assert samples["messages_sent"].iloc[-1] == built.network.sent


def test_a_plug_in_transport_runs_the_walk_service() -> None:
    built, tables = run({
        "name": "plug-in-walk", "seed": 2, "nodes": 40, "duration": "10min",
        "topology": {"kind": "k_out", "k": 5}, "churn": CHURN, "links": PLUG_IN,
        "gossip": {"period": "1s"},
        "walk": {"kind": "service", "transfer_time": "1s", "timeout": "20s"},
    })  # fmt: skip
    steps = tables["walk_steps"]
    assert len(steps) > 100
    samples = tables["samples"]
    assert built.exact_engine.startswith("simpy")
    assert samples["messages_lost"].iloc[-1] == built.network.lost > 0  # churn lost some


def test_a_transport_missing_a_method_of_the_interface_is_refused() -> None:
    class Partial(Transport):
        def send(self, *args: Any, **kwargs: Any) -> None: ...

        def send_batch(self, *args: Any, **kwargs: Any) -> None: ...

    missing = sorted(Partial.__abstractmethods__)
    assert missing == ["deliver_reliably", "links_down_at", "random_online_neighbour",
                       "round_pairs"]  # fmt: skip
    with pytest.raises(NetsimError) as error:
        validate_scenario(
            {"nodes": 10, "duration": "1min", "topology": {"kind": "ring", "k": 2},
             "links": {"kind": "tests.test_wiring:LinklessTransport"}},
            source="t", base_dir=None,
        )  # fmt: skip
    assert re.search(r"does not implement deliver_reliably\(\)", str(error.value))
