"""The ideal walk: a walk that never fails (for learning experiments, Hegedűs et al. §6)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from netsim.contracts import BuildContext, Walk, WalkAgent
from netsim.errors import ScenarioError
from netsim.lazy import lazy_module
from netsim.privacy.pairwise import metropolis_from_edges
from netsim.protocols.walk.config import IdealWalkConfig
from netsim.protocols.walk.resimulate import path_resimulator
from netsim.protocols.walk.tables import SAMPLES_TABLE, STEPS_TABLE, WALK_FIGURE
from netsim.sim import Simulation

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")


class IdealWalk(Walk):
    """A walk that never fails (for learning experiments, Hegedűs et al. §6).

    Every ``step_time`` it moves to the next node: uniform with replacement, or following
    random permutations of the nodes, a new one each time all nodes were visited (without
    replacement, §3.1), or along the topology's links from the node it is at — to a uniform
    neighbour (``neighbour``: the simple random walk) or by the Metropolis–Hastings weights
    1/(1 + max(d_u, d_v)) per link, staying put with the rest (``metropolis``: the lazy,
    doubly stochastic walk of Cyffers, Bellet, Upadhyay 2024). The first node is uniform.
    It ignores churn and the network's delays and losses.
    """

    figures = (WALK_FIGURE,)
    optional = {  # noqa: RUF012
        "privacy": "the threat model: a path-secret estimate re-simulates a neighbour walk"
    }

    Config = IdealWalkConfig
    tables = (STEPS_TABLE, SAMPLES_TABLE)

    def __init__(
        self,
        sim: Simulation,
        n: int,
        agent: WalkAgent,
        *,
        step_time: float,
        replacement: bool = True,
        sample_every: float = 60.0,
        name: str = "walk",
        transitions: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self.sim = sim
        self.n = n
        self.agent = agent
        self.step_time = step_time
        self.replacement = replacement
        self._rng = sim.streams.get(f"{name}.ideal")
        self._order: list[int] = []
        #: Along the topology: (indptr, neighbours, cumulative probabilities) per node.
        self.transitions = transitions
        self.node = -1
        self.state = agent.initial_state()
        self.steps = 0
        self.steps_table = sim.log.table(STEPS_TABLE)
        self.samples_table = sim.log.table(SAMPLES_TABLE)
        sim.every(step_time, self._step)
        sim.every(sample_every, self._sample, first=0.0)

    @classmethod
    def build(cls, config: IdealWalkConfig, ctx: BuildContext) -> IdealWalk:
        assert ctx.sim is not None
        cls.check_inputs(config, ctx)
        transitions = None
        agent = ctx.require("walk.agent")
        if config.sampling in ("neighbour", "metropolis"):
            assert ctx.topology is not None
            law = overlay_transitions(
                ctx.topology.indptr, ctx.topology.indices, config.sampling == "metropolis"
            )
            agent.walks_by(law)
            if config.sampling == "neighbour":  # a uniform neighbour: the service's rule
                topology = ctx.topology
                agent.resimulated_by(path_resimulator(topology.indptr, topology.indices))
            transitions = (
                law.indptr.astype(np.int64),
                law.indices.astype(np.int64),
                row_cumulative(law),
            )
        return cls(
            ctx.sim,
            ctx.nodes,
            agent,
            step_time=config.step_time,
            replacement=config.sampling == "with_replacement",
            sample_every=config.sample_every or ctx.metrics.sample_every,
            name=ctx.key,
            transitions=transitions,
        )

    @classmethod
    def check(cls, config: IdealWalkConfig, ctx: BuildContext) -> None:
        threat = ctx.config_of("privacy")
        if threat is not None and threat.secret_paths and config.sampling != "neighbour":
            raise ValueError(
                "privacy.secret_paths re-simulates walks that move to a uniform online "
                f"neighbour; this ideal walk moves otherwise (walk.sampling {config.sampling}): "
                "use sampling neighbour, or secret_paths 0 (a metropolis walk states the "
                "papers' closed form without it)"
            )
        problem = cls._lonely_nodes(config, ctx)
        if problem is not None:
            raise ValueError(problem)

    @classmethod
    def _lonely_nodes(cls, config: IdealWalkConfig, ctx: BuildContext) -> str | None:
        """Why a walk along the topology could not leave some node (``None``: it can)."""
        if config.sampling in ("neighbour", "metropolis") and ctx.topology is not None:
            lonely = np.flatnonzero(ctx.topology.degrees() == 0)
            if lonely.size:
                return (
                    f"walk.sampling {config.sampling}: {lonely.size} node(s) (e.g. node "
                    f"{lonely[0]}) have no neighbour in the topology; the walk could not leave "
                    "them"
                )
        return None

    @classmethod
    def check_inputs(cls, config: IdealWalkConfig, ctx: BuildContext) -> None:
        """The topology is built here (not when :meth:`check` runs): a walk along it needs
        every node to have a neighbour (an isolated node ended the run in an IndexError)."""
        problem = cls._lonely_nodes(config, ctx)
        if problem is not None:
            raise ScenarioError(problem)

    def next_node(self) -> int:
        """The next node to visit."""
        if self.transitions is not None:
            indptr, neighbours, cumulative = self.transitions
            if self.node < 0:
                self.node = int(self._rng.integers(self.n))
                return self.node
            lo, hi = indptr[self.node], indptr[self.node + 1]
            draw = self._rng.random()
            at = lo + int(np.searchsorted(cumulative[lo:hi], draw, side="right"))
            self.node = int(neighbours[min(at, hi - 1)])
            return self.node
        if self.replacement:
            return int(self._rng.integers(self.n))
        if not self._order:
            self._order = self._rng.permutation(self.n).tolist()[::-1]
        return self._order.pop()

    def _step(self) -> None:
        node = self.next_node()
        self.steps += 1
        now = self.sim.env.now
        self.state = self.agent.visit(node, self.state, self.steps, 0, now)
        self.steps_table.append(now, 0, self.steps, node)

    def _sample(self) -> None:
        self.samples_table.append(self.sim.env.now, 1, 0, 0, self.steps)


def overlay_transitions(indptr: np.ndarray, indices: np.ndarray, metropolis: bool) -> sp.csr_matrix:
    """A walk's next-node law along an overlay (CSR neighbour lists, taken both ways), rows
    sorted: a uniform neighbour, or the Metropolis–Hastings weights with the node itself
    holding the rest (:func:`netsim.privacy.pairwise.metropolis_from_edges`)."""
    n = indptr.size - 1
    sources = np.repeat(np.arange(n), np.diff(indptr))
    low, high = np.minimum(sources, indices), np.maximum(sources, indices)
    keep = low != high
    pairs = np.unique(np.stack([low[keep], high[keep]], axis=1), axis=0)
    weights = metropolis_from_edges(n, pairs[:, 0], pairs[:, 1]).tocsr()
    if not metropolis:  # the simple walk: every link of the node alike, no staying put
        weights.setdiag(0.0)
        weights.eliminate_zeros()
        weights.data[:] = 1.0
        degree = np.diff(weights.indptr)
        weights.data /= np.repeat(degree, degree)
    weights.sort_indices()
    return weights


def row_cumulative(law: sp.csr_matrix) -> np.ndarray:
    """Each row's cumulative probabilities, for drawing the next node by one uniform."""
    cumulative = np.empty_like(law.data)
    for node in range(law.shape[0]):  # once, at build
        lo, hi = law.indptr[node], law.indptr[node + 1]
        cumulative[lo:hi] = np.cumsum(law.data[lo:hi])
    return cumulative
