"""The yardstick of exact mode: push-pull gossip written directly in SimPy, as a competent user
would write it in about a hundred lines (no framework, no tables, no checks of features the
links do not have).

    python -m benchmarks.plain_simpy                 # N = 10,000, 30% online, 300 rounds
    python -m benchmarks.plain_simpy --rounds 30     # a quick look

The workload is the fixed-online one of benchmarks/workloads.py: N nodes, a fixed random 30% of them
online for the whole run, 50 random out-neighbours per node, period Δ = 100 ms, every online node
starting one exchange per period at its own phase. An exchange is a push to a uniform random online
out-neighbour (rejection sampling) that arrives after a constant delay, merged there (the largest
value seen, a broadcast), and the pull answering it the same way. :func:`run_plain` returns the CPU
time per simulated round, the figure ``benchmarks.exact`` divides netsim's by.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass

import simpy

NODES = 10_000
ONLINE_FRACTION = 0.3
OUT_DEGREE = 50
PERIOD = 0.1
DELAY = 0.01


@dataclass
class PlainResult:
    """What one plain run did, and its CPU time."""

    rounds: int
    exchanges: int
    messages: int
    informed: int
    cpu_s: float

    @property
    def cpu_us_per_round(self) -> float:
        return 1e6 * self.cpu_s / self.rounds


class PlainGossip:
    """Push-pull gossip of the largest value seen, one SimPy process per online node."""

    def __init__(self, env: simpy.Environment, seed: int, nodes: int, online: float) -> None:
        self.env = env
        self.rng = random.Random(seed)
        self.neighbours = [self.rng.sample(range(nodes), OUT_DEGREE) for _ in range(nodes)]
        self.online = [self.rng.random() < online for _ in range(nodes)]
        self.value = [0] * nodes
        self.exchanges = 0
        self.messages = 0
        first = self.online.index(True)
        self.value[first] = 1  # the broadcast starts at one online node
        for node in range(nodes):
            if self.online[node]:
                env.process(self.gossip(node, self.rng.random() * PERIOD))

    def gossip(self, node: int, phase: float):
        yield self.env.timeout(phase)
        while True:
            peer = self.random_online_neighbour(node)
            if peer >= 0:
                self.exchanges += 1
                self.send(node, peer, self.value[node], pull=True)
            yield self.env.timeout(PERIOD)

    def random_online_neighbour(self, node: int) -> int:
        neighbours = self.neighbours[node]
        for _ in range(20):
            peer = neighbours[int(self.rng.random() * OUT_DEGREE)]
            if self.online[peer]:
                return peer
        return -1

    def send(self, src: int, dst: int, value: int, pull: bool) -> None:
        self.messages += 1
        event = self.env.timeout(DELAY)
        event.callbacks.append(lambda _event: self.receive(dst, src, value, pull))

    def receive(self, node: int, sender: int, value: int, answer: bool) -> None:
        if value > self.value[node]:
            self.value[node] = value
        if answer:
            self.send(node, sender, self.value[node], pull=False)


def run_plain(rounds: int, *, nodes: int = NODES, seed: int = 1) -> PlainResult:
    """Build and run the plain loop for ``rounds`` periods; CPU time of the run only."""
    env = simpy.Environment()
    gossip = PlainGossip(env, seed, nodes, ONLINE_FRACTION)
    started = time.process_time()
    env.run(until=rounds * PERIOD)
    cpu = time.process_time() - started
    return PlainResult(rounds, gossip.exchanges, gossip.messages, sum(gossip.value), cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300, help="simulated periods (300)")
    parser.add_argument("--nodes", type=int, default=NODES, help=f"nodes ({NODES})")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    result = run_plain(args.rounds, nodes=args.nodes)
    if args.json:
        print(json.dumps({"cpu_us_per_round": result.cpu_us_per_round, "rounds": result.rounds,
                          "messages": result.messages}))  # fmt: skip
        return
    print(
        f"plain SimPy push-pull: {args.nodes} nodes, {result.rounds} rounds, "
        f"{result.exchanges} exchanges, {result.messages} messages, {result.informed} informed: "
        f"{result.cpu_us_per_round:.0f} µs CPU per round"
    )


if __name__ == "__main__":
    main()
