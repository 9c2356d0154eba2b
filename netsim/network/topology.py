"""Seeded topology builders returning compact adjacency arrays (CSR).

Every random builder takes an explicit ``numpy.random.Generator`` or integer seed; networkx
generators always get ``seed=`` (no global random state). A :class:`Topology` stores, for each node,
the sorted array of the nodes it may send to: for undirected graphs both directions are
present, for the paper's "k fixed random neighbours" (PeerSim's ``WireKOut``) only the k
chosen out-neighbours are, and a message's receiver can still answer its sender over the
same connection (the pull of push-pull gossip).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field, field_validator

from netsim import files
from netsim.contracts import ComponentConfig, TopologyBuilder
from netsim.errors import TopologyError
from netsim.fields import Probability, existing_file
from netsim.lazy import lazy_module

if TYPE_CHECKING:
    import networkx as nx
else:
    nx = lazy_module("networkx")


@dataclass(frozen=True, eq=False)
class Topology:
    """Neighbour lists of ``n`` nodes in CSR form: ``indices[indptr[i]:indptr[i+1]]``."""

    n: int
    indptr: np.ndarray
    indices: np.ndarray
    directed: bool

    def neighbours(self, node: int) -> np.ndarray:
        """The nodes ``node`` may send to, sorted."""
        return self.indices[self.indptr[node] : self.indptr[node + 1]]

    def degrees(self) -> np.ndarray:
        """Out-degree of every node."""
        return np.diff(self.indptr)

    @property
    def edge_count(self) -> int:
        """Number of links (undirected links counted once)."""
        total = int(self.indptr[-1])
        return total if self.directed else total // 2

    def to_networkx(self) -> nx.Graph:
        """The topology as a networkx (Di)Graph, for analysis."""
        graph: nx.Graph = nx.DiGraph() if self.directed else nx.Graph()
        graph.add_nodes_from(range(self.n))
        sources = np.repeat(np.arange(self.n), self.degrees())
        graph.add_edges_from(zip(sources.tolist(), self.indices.tolist(), strict=True))
        return graph

    def is_connected(self) -> bool:
        """Strong connectivity for directed topologies, connectivity otherwise."""
        if self.n == 0:
            return False
        graph = self.to_networkx()
        return nx.is_strongly_connected(graph) if self.directed else nx.is_connected(graph)

    @classmethod
    def from_edges(
        cls, n: int, sources: np.ndarray, targets: np.ndarray, *, directed: bool
    ) -> Topology:
        """Build from edge arrays; drops self-loops and duplicates, symmetrises if undirected."""
        sources = np.asarray(sources, dtype=np.int64)
        targets = np.asarray(targets, dtype=np.int64)
        if not directed:
            sources, targets = (
                np.concatenate([sources, targets]),
                np.concatenate([targets, sources]),
            )
        keep = sources != targets
        sources, targets = sources[keep], targets[keep]
        keys = np.sort(sources * n + targets)  # by (source, target)
        if keys.size:  # drop duplicates (np.unique hashes first: several times slower here)
            distinct = np.empty(keys.size, dtype=bool)
            distinct[0] = True
            np.not_equal(keys[1:], keys[:-1], out=distinct[1:])
            keys = keys[distinct]
        sources, targets = keys // n, keys % n
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(sources, minlength=n), out=indptr[1:])
        return cls(n=n, indptr=indptr, indices=targets.astype(np.int32), directed=directed)

    @classmethod
    def from_networkx(cls, graph: nx.Graph, n: int) -> Topology:
        """Build from a networkx graph whose nodes are 0..n-1."""
        edges = np.array(list(graph.edges()), dtype=np.int64).reshape(-1, 2)
        return cls.from_edges(n, edges[:, 0], edges[:, 1], directed=graph.is_directed())


def _check_n(n: int, minimum: int = 1) -> None:
    if n < minimum:
        raise TopologyError(f"a topology needs at least {minimum} node(s), got {n}")


def k_out(n: int, k: int, rng: np.random.Generator, *, undirected: bool = False) -> Topology:
    """Every node picks ``k`` distinct random other nodes as its fixed neighbours.

    This is the overlay of Hegedűs et al. §5.2 ("50 fixed random neighbours", PeerSim's
    ``WireKOut``). With ``undirected`` the links are made symmetric (degrees then vary, >= k).
    """
    _check_n(n, 2)
    if not 1 <= k <= n - 1:
        raise TopologyError(f"k_out: k must be in [1, n-1] = [1, {n - 1}], got {k}")
    targets = np.empty((n, k), dtype=np.int32)  # int32: 200 MB, not 400, at 10⁶ × 50
    for node in range(n):
        picks = rng.choice(n - 1, size=k, replace=False)
        targets[node] = picks + (picks >= node)  # skip the node itself
    if undirected:
        sources = np.repeat(np.arange(n), k)
        return Topology.from_edges(n, sources, targets.ravel(), directed=False)
    # distinct targets and no self-loops already: what from_edges would make is each row
    # sorted, built here without its int64 edge keys (1.2 GB of temporaries at 10⁶ × 50)
    targets.sort(axis=1)
    indptr = np.arange(n + 1, dtype=np.int64) * k
    return Topology(n=n, indptr=indptr, indices=targets.ravel(), directed=True)


def _from_networkx_call(name: str, n: int, build: object) -> Topology:
    try:
        graph = build()  # type: ignore[operator]
    except (nx.NetworkXError, ValueError) as exc:
        raise TopologyError(f"{name}: {exc}") from None
    return Topology.from_networkx(graph, n)


def random_regular(n: int, degree: int, seed: int) -> Topology:
    """Uniform random ``degree``-regular graph (networkx ``random_regular_graph``)."""
    _check_n(n)
    if degree >= n or (n * degree) % 2:
        raise TopologyError(
            f"random_regular: need degree < n and n*degree even, got n={n}, degree={degree}"
        )
    return _from_networkx_call(
        "random_regular", n, lambda: nx.random_regular_graph(degree, n, seed=seed)
    )


def erdos_renyi(n: int, p: float, seed: int) -> Topology:
    """G(n, p): every pair linked independently with probability ``p``."""
    _check_n(n)
    return _from_networkx_call("erdos_renyi", n, lambda: nx.fast_gnp_random_graph(n, p, seed=seed))


def watts_strogatz(n: int, k: int, p: float, seed: int) -> Topology:
    """Small world: ring lattice of ``k`` nearest neighbours, each link rewired with ``p``."""
    _check_n(n)
    if not 2 <= k < n:
        raise TopologyError(f"watts_strogatz: k must be in [2, n-1], got k={k}, n={n}")
    return _from_networkx_call(
        "watts_strogatz", n, lambda: nx.watts_strogatz_graph(n, k, p, seed=seed)
    )


def barabasi_albert(n: int, m: int, seed: int) -> Topology:
    """Preferential attachment: each new node links to ``m`` existing nodes."""
    _check_n(n)
    if not 1 <= m < n:
        raise TopologyError(f"barabasi_albert: m must be in [1, n-1], got m={m}, n={n}")
    return _from_networkx_call(
        "barabasi_albert", n, lambda: nx.barabasi_albert_graph(n, m, seed=seed)
    )


def random_geometric(n: int, radius: float, seed: int, *, dim: int = 2) -> Topology:
    """Nodes uniform in the unit cube; linked when closer than ``radius``."""
    _check_n(n)
    return _from_networkx_call(
        "random_geometric", n, lambda: nx.random_geometric_graph(n, radius, dim=dim, seed=seed)
    )


def ring(n: int, k: int = 1) -> Topology:
    """Ring lattice: every node linked to its ``k`` nearest nodes on each side."""
    _check_n(n, 2)
    if not 1 <= k <= (n - 1) // 2 and not (n == 2 and k == 1):
        raise TopologyError(f"ring: k must be in [1, (n-1)//2], got k={k}, n={n}")
    nodes = np.arange(n)
    sources = np.repeat(nodes, k)
    targets = (sources + np.tile(np.arange(1, k + 1), n)) % n
    return Topology.from_edges(n, sources, targets, directed=False)


def complete(n: int) -> Topology:
    """Every pair of nodes linked (one node alone: no link, e.g. DOLA's centralised case)."""
    _check_n(n, 1)
    # row i lists every j != i in increasing order: j' + (j' >= i) for j' in 0..n-2
    others = np.arange(n - 1, dtype=np.int32)[None, :]
    indices = (others + (others >= np.arange(n, dtype=np.int32)[:, None])).ravel()
    indptr = np.arange(n + 1, dtype=np.int64) * (n - 1)
    return Topology(n=n, indptr=indptr, indices=indices.astype(np.int32), directed=True)


def edge_list(path: Path, n: int, *, directed: bool = False) -> Topology:
    """Read ``source target`` pairs (whitespace or comma separated, ``#`` comments).

    Node ids must be integers in ``[0, n)``. Errors name the file and line.
    """
    path = Path(path)
    try:
        text = files.read_text(
            path, what="edge list", limit=files.MAX_EDGE_LIST_BYTES, error=TopologyError
        )
    except OSError as exc:
        raise TopologyError(f"{path}: cannot read edge list: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise TopologyError(f"{path}: not UTF-8 text; an edge list is a text file") from None
    sources: list[int] = []
    targets: list[int] = []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].replace(",", " ").strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) != 2:
            raise TopologyError(
                f"{path}:{line_no}: expected 2 fields 'source target', got {len(fields)}"
            )
        try:
            u, v = int(fields[0]), int(fields[1])
        except ValueError:
            raise TopologyError(
                f"{path}:{line_no}: node ids must be integers, got {line!r}"
            ) from None
        for node in (u, v):
            if not 0 <= node < n:
                raise TopologyError(
                    f"{path}:{line_no}: node id {node} outside [0, {n - 1}] (nodes: {n})"
                )
        sources.append(u)
        targets.append(v)
    if not sources:
        raise TopologyError(f"{path}: the edge list has no edges")
    return Topology.from_edges(n, np.array(sources), np.array(targets), directed=directed)


# --- the topology components -----------------------------------------------------------------
# Each builds its graph from the ``topology`` stream (networkx builders get a 32-bit seed drawn
# from it), so the same scenario and seed give the same overlay.


def _below_nodes(key: str, value: int, nodes: int) -> str | None:
    """Why ``topology.<key>`` = ``value`` is too large for ``nodes`` nodes (``None``: it is not)."""
    if value >= nodes:
        return f"topology.{key} ({value}) must be less than nodes ({nodes})"
    return None


#: Neighbour entries (a link counts once per direction) of a topology built with numpy
#: (``k_out``, ``ring``, ``complete``): 4 bytes each in the CSR lists, and a few times that in
#: the temporaries that build them, so 2·10⁸ entries are some 3 GB (10⁶ nodes × k_out 50 are
#: 5·10⁷); ``nodes: 10⁹`` or a complete graph of 10⁶ nodes ended in a MemoryError.
MAX_NEIGHBOUR_ENTRIES = 2 * 10**8
#: Links of a topology built by networkx: its graph holds each link in two dicts (some 200
#: bytes a link in all), so 2·10⁷ links are about 4 GB before the CSR lists are made.
MAX_NETWORKX_LINKS = 2 * 10**7
#: Coordinates of a random geometric graph (nodes × dim): networkx keeps each as a Python
#: float in a list per node, about 32 bytes, so 10⁷ are 320 MB and seconds to draw;
#: ``dim: 10⁹`` ended in a MemoryError.
MAX_GEOMETRIC_COORDINATES = 10**7


def _too_large(what: str, count: float, limit: int, change: str) -> str | None:
    """Why a topology of ``count`` ``what`` is too large to build (``None``: it is not)."""
    if count > limit:
        return (
            f"topology: about {count:.3g} {what}; at most {limit:.0e} (the overlay is built "
            f"in memory before the run): {change}"
        )
    return None


def _entries_problem(count: float, key: str) -> str | None:
    return _too_large(
        "neighbour entries (nodes × neighbours)", count, MAX_NEIGHBOUR_ENTRIES,
        f"use fewer nodes or a smaller {key}",
    )  # fmt: skip


def _links_problem(count: float, key: str) -> str | None:
    return _too_large("links", count, MAX_NETWORKX_LINKS, f"use fewer nodes or a smaller {key}")


class KOut(TopologyBuilder):
    """Every node picks k distinct random neighbours (the paper's "50 fixed neighbours")."""

    class Config(ComponentConfig):
        kind: Literal["k_out"] = "k_out"
        k: int = Field(ge=1)
        undirected: bool = False

    def build_topology(self, nodes: int) -> Topology:
        return k_out(nodes, self.config.k, self.ctx.stream(), undirected=self.config.undirected)

    @classmethod
    def problem(cls, config: Config, nodes: int) -> str | None:
        entries = float(nodes) * config.k * (2 if config.undirected else 1)
        return _below_nodes("k", config.k, nodes) or _entries_problem(entries, "topology.k")


class RandomRegular(TopologyBuilder):
    """A uniformly random d-regular undirected graph."""

    class Config(ComponentConfig):
        kind: Literal["random_regular"] = "random_regular"
        degree: int = Field(ge=1)

    def build_topology(self, nodes: int) -> Topology:
        return random_regular(nodes, self.config.degree, self.ctx.integer_seed())

    @classmethod
    def problem(cls, config: Config, nodes: int) -> str | None:
        d = config.degree
        if d >= nodes or (nodes * d) % 2:
            return (
                f"topology.degree ({d}) must be less than nodes ({nodes}) and nodes × degree "
                "must be even"
            )
        return _links_problem(nodes * d / 2, "topology.degree")


class ErdosRenyi(TopologyBuilder):
    """G(n, p): every undirected link independently with probability p."""

    class Config(ComponentConfig):
        kind: Literal["erdos_renyi"] = "erdos_renyi"
        p: Probability

    def build_topology(self, nodes: int) -> Topology:
        return erdos_renyi(nodes, self.config.p, self.ctx.integer_seed())

    @classmethod
    def problem(cls, config: Config, nodes: int) -> str | None:
        return _links_problem(config.p * nodes * (nodes - 1) / 2, "topology.p")


class WattsStrogatz(TopologyBuilder):
    """A ring lattice of k neighbours with links rewired with probability p."""

    class Config(ComponentConfig):
        kind: Literal["watts_strogatz"] = "watts_strogatz"
        k: int = Field(ge=2)
        p: Probability

    def build_topology(self, nodes: int) -> Topology:
        return watts_strogatz(nodes, self.config.k, self.config.p, self.ctx.integer_seed())

    @classmethod
    def problem(cls, config: Config, nodes: int) -> str | None:
        return _below_nodes("k", config.k, nodes) or _links_problem(
            float(nodes) * (config.k // 2), "topology.k"
        )


class BarabasiAlbert(TopologyBuilder):
    """Preferential attachment: each new node links to m existing ones."""

    class Config(ComponentConfig):
        kind: Literal["barabasi_albert"] = "barabasi_albert"
        m: int = Field(ge=1)

    def build_topology(self, nodes: int) -> Topology:
        return barabasi_albert(nodes, self.config.m, self.ctx.integer_seed())

    @classmethod
    def problem(cls, config: Config, nodes: int) -> str | None:
        return _below_nodes("m", config.m, nodes) or _links_problem(
            float(config.m) * (nodes - config.m), "topology.m"
        )


class RandomGeometric(TopologyBuilder):
    """Nodes uniform in the unit cube, linked within ``radius``."""

    class Config(ComponentConfig):
        kind: Literal["random_geometric"] = "random_geometric"
        radius: float = Field(gt=0)
        dim: int = Field(default=2, ge=1)

    def build_topology(self, nodes: int) -> Topology:
        return random_geometric(
            nodes, self.config.radius, self.ctx.integer_seed(), dim=self.config.dim
        )

    @classmethod
    def problem(cls, config: Config, nodes: int) -> str | None:
        d, r = config.dim, config.radius
        coordinates = _too_large(
            f"coordinates (nodes × dim = {nodes} × {d})", float(nodes) * d,
            MAX_GEOMETRIC_COORDINATES, "use fewer nodes or a smaller topology.dim",
        )  # fmt: skip
        if coordinates is not None:
            return coordinates
        # a pair is linked at most with the probability that the ball of the radius holds
        # the other node: its volume π^(d/2) r^d / Γ(d/2 + 1), at most 1
        log_ball = 0.5 * d * math.log(math.pi) + d * math.log(r) - math.lgamma(0.5 * d + 1)
        share = math.exp(min(log_ball, 0.0))
        return _links_problem(share * nodes * (nodes - 1) / 2, "topology.radius")


class Ring(TopologyBuilder):
    """Each node linked to its k nearest nodes on either side."""

    class Config(ComponentConfig):
        kind: Literal["ring"] = "ring"
        k: int = Field(default=1, ge=1)

    def build_topology(self, nodes: int) -> Topology:
        return ring(nodes, self.config.k)

    @classmethod
    def problem(cls, config: Config, nodes: int) -> str | None:
        if config.k > max((nodes - 1) // 2, 1):
            return f"topology.k ({config.k}) must be at most (nodes - 1) // 2 = {(nodes - 1) // 2}"
        return _entries_problem(2.0 * nodes * config.k, "topology.k")


class Complete(TopologyBuilder):
    """Every node linked to every other."""

    class Config(ComponentConfig):
        kind: Literal["complete"] = "complete"

    single_node_ok = True

    def build_topology(self, nodes: int) -> Topology:
        return complete(nodes)

    @classmethod
    def problem(cls, config: Config, nodes: int) -> str | None:
        return _too_large(
            "neighbour entries (nodes × (nodes − 1))", float(nodes) * (nodes - 1),
            MAX_NEIGHBOUR_ENTRIES, "use fewer nodes or a sparser topology",
        )  # fmt: skip


class EdgeList(TopologyBuilder):
    """Links read from a file of ``u v`` lines."""

    class Config(ComponentConfig):
        kind: Literal["edge_list"] = "edge_list"
        path: Path
        directed: bool = False

        _path = field_validator("path")(existing_file)

    single_node_ok = True

    def build_topology(self, nodes: int) -> Topology:
        return edge_list(self.config.path, nodes, directed=self.config.directed)
