"""MFDL's accounting figure (Bellet, Cyffers, Frey, Gaudel, Lerévérend, Taïani, *Unified Privacy
Guarantees for Decentralized Learning via Matrix Factorization*, ICLR 2026, arXiv 2510.17480),
reproduced with netsim's exact accountant.

    python analysis/mfdl_accounting.py run       # the table, the summary, and the figure
    python analysis/mfdl_accounting.py tables    # print the table from analysis/results
    python analysis/mfdl_accounting.py figures   # draw analysis/figures/mfdl_accounting.png

The authors' figure (``dimiarbre/MFDL``, ``MFDL/simulations/muffliato_accounting.py``,
``main()`` and ``plot_privacy_loss_multiple_graphs``): Muffliato-SGD's messages over T = 10
steps, σ = 1, sensitivity 1, every step using every node's data (participation interval 1:
user-level), one attacker (node 0), and each other node's Rényi divergence at α = 2 against the
hops between it and the attacker, by their matrix-factorisation accounting ("MF") and by the
corrected Muffliato bound. Two of their graphs, built as their ``utils.get_graph`` builds them:

- ``florentine``: ``nx.florentine_families_graph()`` (15 nodes, in the order
  ``nx.to_numpy_array`` gives; node 0 is Acciaiuoli, whose only neighbour is Medici);
- ``erdos``: n = 100, p = ln n / n, seed 42: ``nx.erdos_renyi_graph(n, p, seed=1000·42 +
  tries)`` for tries = 0, 1, … until connected (``utils.get_erdos_renyi_graph``).

Both get a self-loop at every node (``get_graph`` adds them), and the communication matrix is
``utils.get_communication_matrix``'s default: the adjacency with those self-loops, each row
divided by its sum — W[i, j] = 1/(deg i + 1) on i's closed neighbourhood. It is row-stochastic,
not doubly stochastic (nor symmetric); the accounting does not need it to be.

Their message model (``workloads_generator.build_DL_workload`` with ``initial_power`` 0 and
``build_projection_workload``): node w's message at step t is Σ_{s≤t} W^{t−s}[w, :](g_s + z_s),
z_s ~ N(0, I) independent; the attacker sees the messages of its closed neighbourhood at every
step and knows its own inputs. In netsim this is a :class:`~netsim.privacy.linear.LinearRun`
whose every round has ``step`` 1, ``noise_std`` 1, ``sensitivity`` 1 and ``batch`` 0 for every
node, and a delivered message along every directed edge (w → v for W[v, w] > 0, w ≠ v):
then h^t = W h^{t−1} + y^t, the same messages. :func:`netsim_losses` accounts it against
``pndp_view(run, [0])`` with ``unit="node"``; the Rényi divergence at α is α·μ²/2.

MFDL's number, computed here as their code describes it (restated, not copied): B the rows of
the (nT × nT) block lower-triangular workload (block (t, s) = W^{t−s}) that the attacker sees,
plus one row e_{(t, 0)} per step for its own inputs; X = B⁺B with ``numpy.linalg.pinv``'s
default cut (1e-15 of the largest singular value); for node u, K = X restricted to u's T
inputs and the loss α·Σ|K|/2 (``compute_cyclic_repetitions_1node``). This is netsim's μ² by
another route: conditioning on the attacker's noise, or adding its inputs as observed rows,
leaves the same projection on the other nodes' inputs. Two things could separate them. The
rank cut: MFDL's B holds the attacker's own messages, each a combination of the messages it
received the step before and its own input, so B has T singular values at about 1e-21 of the
largest, which ``pinv``'s cut drops; the next is 0.25 of the largest on both graphs, so any
cut between 1e-15 and 0.2 gives the same projection. netsim's view leaves out the messages the
attacker sends (it knows them) and is well conditioned (least singular value about 0.35 of
the largest; netsim's cut is ``RANK_TOLERANCE`` = 1e-10). And the sum when K has negative
entries: Σ|K| bounds the worst case over the uses' directions, and netsim reports the same
Σ|K| flagged as a bound (``exact`` False), the aligned ΣK being below the worst case then.
For those units this script also gives an interval for the worst case: at least the largest
dᵀKd over sign vectors d (a feasible choice of directions), at most λ_max(K)·T (K ≼ I, so
never above local DP, T). Σ|K| can exceed local DP: it does for Medici on Florentine.

The third number is the corrected Muffliato bound as MFDL computes it
(:func:`netsim.privacy.bounds.mfdl_corrected_muffliato`). On both graphs its sum before the
clip is above T for every node (at least 15.4 on Florentine and 11.3 on Erdős–Rényi): with
(W^s)[u, w] to the first power, each neighbour's term tends to 1/(n π_w), of order one, as W^s
tends to 1πᵀ, so the (T − s)-weighted sum passes T whatever the distance, and the bound is the
local-DP loss at every distance.

Results: ``analysis/results/mfdl_accounting.csv``, per graph and per distance from the attacker
(1 and up), the mean, least and largest of the three numbers, the nodes, how many have a K with
negative entries, how many the corrected bound puts below netsim's number, and the largest
|netsim − MFDL|. ``analysis/figures/mfdl_accounting.png`` draws it.
"""

from __future__ import annotations

import argparse
import io
import itertools
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import scipy.sparse as sp
from experiments import guarded, write_readme_tables

from netsim.analysis.figures import save_figure
from netsim.errors import NetsimError
from netsim.plotting import pyplot
from netsim.privacy.bounds import mfdl_corrected_muffliato
from netsim.privacy.linear import SIGN_TOLERANCE, LinearRound, LinearRun, pndp_view, view_losses
from netsim.storage import atomic_write_bytes

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "analysis" / "results" / "mfdl_accounting.csv"
FIGURE = REPO / "analysis" / "figures" / "mfdl_accounting.png"
#: MFDL's ``main()``: steps (nb_repetitions × participation_interval 1), Rényi order, noise
#: standard deviation, sensitivity and attacker.
STEPS = 10
ORDER = 2.0
SIGMA = 1.0
SENSITIVITY = 1.0
ATTACKER = 0
#: The graphs, in drawing order, with the names MFDL's figure gives them.
GRAPHS = {"florentine": "Florentine (15 nodes)", "erdos": "Erdős–Rényi (100 nodes)"}
ERDOS_NODES = 100
ERDOS_SEED = 42
#: ``utils.get_erdos_renyi_graph``'s ``total_nb_tries``: the seed stride and the tries allowed.
ERDOS_TRIES = 1000


def mfdl_graph(name: str) -> nx.Graph:
    """The graph ``name`` as MFDL's ``utils.get_graph`` builds it (module docstring), with a
    self-loop at every node."""
    if name == "florentine":
        graph = nx.florentine_families_graph()
    elif name == "erdos":
        p = math.log(ERDOS_NODES) / ERDOS_NODES
        for tries in range(ERDOS_TRIES):
            graph = nx.erdos_renyi_graph(ERDOS_NODES, p, seed=ERDOS_TRIES * ERDOS_SEED + tries)
            if nx.is_connected(graph):
                break
        else:
            raise NetsimError(f"no connected Erdős–Rényi graph in {ERDOS_TRIES} tries")
    else:
        raise NetsimError(f"unknown graph {name!r}: one of {', '.join(GRAPHS)}")
    graph = nx.convert_node_labels_to_integers(graph)
    graph.add_edges_from((i, i) for i in range(graph.number_of_nodes()))
    return graph


def communication_matrix(graph: nx.Graph) -> np.ndarray:
    """MFDL's ``utils.get_communication_matrix`` default: the adjacency (self-loops included)
    with each row divided by its sum."""
    adjacency = nx.to_numpy_array(graph)
    return adjacency / adjacency.sum(axis=1, keepdims=True)


def linear_run(weights: np.ndarray, steps: int = STEPS) -> LinearRun:
    """MFDL's message model as a netsim run: every node steps with unit step, noise and
    sensitivity each round, and every directed edge carries a delivered message."""
    n = weights.shape[0]
    dst, src = np.nonzero((weights > 0) & ~np.eye(n, dtype=bool))
    mixing = sp.csr_matrix(weights)
    ones = np.ones(n)
    rounds = [
        LinearRound(mixing=mixing, step=ones, noise_std=SIGMA * ones,
                    sensitivity=SENSITIVITY * ones, batch=np.zeros(n, np.int64),
                    sent_src=src, sent_dst=dst, delivered=np.ones(src.size, bool))
        for _ in range(steps)
    ]  # fmt: skip
    return LinearRun(n, rounds)


def netsim_losses(weights: np.ndarray, steps: int = STEPS) -> pd.DataFrame:
    """netsim's loss of every node's data (user-level) against the attacker: ``mu_squared`` and
    whether it is exact."""
    run = linear_run(weights, steps)
    losses = view_losses(run, pndp_view(run, [ATTACKER]), unit="node")
    return pd.DataFrame(
        {"node": losses.node, "mu_squared": losses.mu_squared, "exact": losses.exact}
    )


def mfdl_losses(weights: np.ndarray, steps: int = STEPS) -> pd.DataFrame:
    """MFDL's accounting restated (module docstring): per node other than the attacker, its
    K = (B⁺B)[u's inputs, u's inputs] with numpy's default pseudo-inverse, μ² = Σ|K|, the
    aligned ΣK, K's least entry, and for a K with negative entries the worst case's interval
    (largest dᵀKd over sign vectors, λ_max(K)·T)."""
    n = weights.shape[0]
    workload = np.zeros((n * steps, n * steps))
    for lag in range(steps):
        power = np.linalg.matrix_power(weights, lag)
        for start in range(steps - lag):
            row, column = (start + lag) * n, start * n
            workload[row : row + n, column : column + n] = power
    seen = np.flatnonzero(weights[ATTACKER] > 0)  # its closed neighbourhood, itself included
    rows = (np.arange(steps)[:, None] * n + seen[None, :]).ravel()
    own = np.zeros((steps, n * steps))
    own[np.arange(steps), np.arange(steps) * n + ATTACKER] = 1.0
    observed = np.vstack([workload[rows], own])
    projection = np.linalg.pinv(observed) @ observed
    signs = np.array(list(itertools.product((-1.0, 1.0), repeat=steps)))
    records = []
    for node in range(n):
        if node == ATTACKER:
            continue
        uses = np.arange(steps) * n + node
        gram = projection[np.ix_(uses, uses)]
        floor = -SIGN_TOLERANCE * float(np.diag(gram).max())
        negative = bool(gram.min() < floor)
        records.append({
            "node": node, "mfdl_mu_squared": float(np.abs(gram).sum()),
            "aligned_mu_squared": float(gram.sum()), "k_min": float(gram.min()),
            "negative_k": negative,
            "worst_low": float(np.einsum("ks,st,kt->k", signs, gram, signs).max())
            if negative else math.nan,
            "worst_high": float(np.linalg.eigvalsh(gram).max() * steps) if negative else math.nan,
        })  # fmt: skip
    return pd.DataFrame(records)


def account_graph(name: str, steps: int = STEPS) -> pd.DataFrame:
    """The core: one row per node other than the attacker of graph ``name``, with its hops
    from the attacker and the three Rényi divergences at α = :data:`ORDER` (``netsim``,
    ``mfdl``, ``muffliato``), netsim's ``exact`` flag and MFDL's K's sign (:func:`mfdl_losses`)."""
    graph = mfdl_graph(name)
    weights = communication_matrix(graph)
    frame = netsim_losses(weights, steps).merge(mfdl_losses(weights, steps), on="node")
    hops = nx.single_source_shortest_path_length(graph, ATTACKER)
    frame.insert(0, "graph", name)
    frame.insert(2, "distance", [hops[int(u)] for u in frame["node"]])
    frame["netsim"] = ORDER * frame["mu_squared"] / 2.0
    frame["mfdl"] = ORDER * frame["mfdl_mu_squared"] / 2.0
    frame["muffliato"] = mfdl_corrected_muffliato(
        weights, frame["node"].to_numpy(), ATTACKER, steps, ORDER, SIGMA, SENSITIVITY
    )
    return frame


def by_distance(frame: pd.DataFrame) -> pd.DataFrame:
    """Per graph and distance: mean, least and largest of the three divergences, the nodes, how
    many have a K with negative entries, how many the corrected bound puts below netsim, and the
    largest |netsim − MFDL|."""
    rows = []
    for (graph, distance), part in frame.groupby(["graph", "distance"], sort=False):
        row: dict[str, object] = {"graph": graph, "distance": int(distance), "nodes": len(part)}
        for key in ("netsim", "mfdl", "muffliato"):
            row[f"{key}_mean"] = float(part[key].mean())
            row[f"{key}_min"] = float(part[key].min())
            row[f"{key}_max"] = float(part[key].max())
        row["negative_k"] = int(part["negative_k"].sum())
        row["netsim_bound"] = int((~part["exact"]).sum())
        row["muffliato_below_netsim"] = int((part["muffliato"] < part["netsim"]).sum())
        row["max_abs_diff"] = float((part["netsim"] - part["mfdl"]).abs().max())
        rows.append(row)
    return (
        pd.DataFrame(rows)
        .sort_values(["graph", "distance"], key=_graph_order)
        .reset_index(drop=True)
    )


def _graph_order(column: pd.Series) -> pd.Series:
    order = list(GRAPHS)
    return column.map(order.index) if column.name == "graph" else column


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per graph: nodes, the largest |netsim − MFDL|, the units with a K with negative entries,
    and the share of nodes whose corrected Muffliato bound is below netsim's loss."""
    rows = []
    for graph, part in frame.groupby("graph", sort=False):
        rows.append({
            "graph": graph, "nodes": len(part),
            "max_abs_diff": float((part["netsim"] - part["mfdl"]).abs().max()),
            "negative_k": int(part["negative_k"].sum()),
            "netsim_bound": int((~part["exact"]).sum()),
            "muffliato_below_netsim": float((part["muffliato"] < part["netsim"]).mean()),
            "muffliato_below_exact": float(
                (part["muffliato"] < part["netsim"])[part["exact"]].mean()),
        })  # fmt: skip
    return pd.DataFrame(rows)


def compute(steps: int = STEPS) -> pd.DataFrame:
    """Every graph's per-node rows (:func:`account_graph`)."""
    return pd.concat([account_graph(name, steps) for name in GRAPHS], ignore_index=True)


def write_table(table: pd.DataFrame, path: Path = RESULTS) -> Path:
    """Write the per-distance table to the CSV ``path`` atomically (a temporary file in the same
    directory, then ``os.replace``)."""
    buffer = io.StringIO()
    table.to_csv(buffer, index=False, float_format="%.10g")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buffer.getvalue().encode())
    return path


def load_table(path: Path = RESULTS) -> pd.DataFrame:
    if not path.is_file():
        raise NetsimError(f"no results at {path}: run `mfdl_accounting.py run` first")
    return pd.read_csv(path)


def markdown_table(table: pd.DataFrame) -> str:
    """The per-distance table as Markdown: mean [least, largest] of each divergence."""
    lines = [
        f"Rényi divergence at α = {ORDER:g} of a node's data (user-level, T = {STEPS} steps, "
        f"σ = {SIGMA:g}, sensitivity {SENSITIVITY:g}) against attacker {ATTACKER}: mean "
        "[least, largest] over the nodes at each distance. Local DP is "
        f"{ORDER * STEPS * SENSITIVITY**2 / (2 * SIGMA**2):g}.",
        "",
        "| graph | hops | nodes | netsim (exact; min(Σ\\|K\\|, λ_max·T) where K < 0) "
        "| MFDL (pinv, Σ\\|K\\|) | corrected Muffliato | K < 0 | bound < netsim "
        "| max \\|netsim − MFDL\\| |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table.itertuples(index=False):
        cells = [
            f"{getattr(row, f'{key}_mean'):.4g} [{getattr(row, f'{key}_min'):.4g}, "
            f"{getattr(row, f'{key}_max'):.4g}]"
            for key in ("netsim", "mfdl", "muffliato")
        ]
        lines.append(
            f"| {row.graph} | {row.distance} | {row.nodes} | {' | '.join(cells)} | "
            f"{row.negative_k} | {row.muffliato_below_netsim} | {row.max_abs_diff:.2g} |"
        )
    return "\n".join(lines)


def report(frame: pd.DataFrame) -> str:
    """The per-graph summary and every unit whose K has negative entries."""
    lines = ["", "Per graph:"]
    for row in summary(frame).itertuples(index=False):
        lines.append(
            f"  {row.graph}: {row.nodes} nodes; largest |netsim − MFDL| {row.max_abs_diff:.2g}; "
            f"{row.negative_k} with negative K entries ({row.netsim_bound} flagged as a bound "
            f"by netsim); corrected Muffliato below netsim for {row.muffliato_below_netsim:.1%} "
            f"of the nodes, below an exact loss for {row.muffliato_below_exact:.1%}"
        )
    negative = frame[frame["negative_k"]]
    if len(negative):
        lines += ["", "Units with negative K entries (MFDL reports Σ|K|, netsim the smaller of "
                  "Σ|K| and λ_max·T; the worst case lies in "
                  "[largest over sign vectors, λ_max·T]):"]  # fmt: skip
        for row in negative.itertuples(index=False):
            lines.append(
                f"  {row.graph} node {row.node} ({row.distance} hops): Σ|K| = "
                f"{row.mfdl_mu_squared:.4g}, ΣK = {row.aligned_mu_squared:.4g}, least entry "
                f"{row.k_min:.3g}; worst case in [{row.worst_low:.4g}, {row.worst_high:.4g}]; "
                f"corrected Muffliato {row.muffliato:.4g}"
            )
    return "\n".join(lines)


def draw(table: pd.DataFrame | None = None, out: Path = FIGURE) -> Path:
    """The divergence at α = 2 against the hops from the attacker, log scale: per graph a solid
    line for netsim's (mean, with the least–largest band), a dashed one for the corrected
    Muffliato bound, and hollow markers for MFDL's number; local DP as the grey band. Where
    netsim's number is Σ|K| (K with negative entries) a note says it is a bound."""
    table = load_table() if table is None else table
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(8.5, 5.2))
    markers = ("o", "s", "D", "^")
    for index, (name, label) in enumerate(GRAPHS.items()):
        part = table[table["graph"] == name].sort_values("distance")
        if part.empty:
            continue
        color = f"C{index}"
        hops = part["distance"].to_numpy()
        axis.plot(hops, part["netsim_mean"], "-", color=color, lw=2,
                  label=f"{label}: netsim exact (mean)")  # fmt: skip
        axis.fill_between(hops, part["netsim_min"], part["netsim_max"], color=color, alpha=0.15,
                          lw=0)  # fmt: skip
        # dashes offset per graph: where the bounds coincide (clipped at local DP) both show
        axis.plot(hops, part["muffliato_mean"], color=color, lw=2,
                  ls=(6 * index, (6, 6 * (len(GRAPHS) - 1))),
                  label=f"{label}: corrected Muffliato (MFDL's code)")  # fmt: skip
        axis.plot(hops, part["mfdl_mean"], markers[index % len(markers)], color=color, ms=9,
                  mfc="none", mew=1.5, ls="none", label=f"{label}: MFDL's number")  # fmt: skip
    local = ORDER * STEPS * SENSITIVITY**2 / (2 * SIGMA**2)
    axis.axhline(local, color="grey", lw=4, alpha=0.35, zorder=0, label=f"local DP ({local:g})")
    bounds = table[table["netsim_bound"] > 0]
    for hops, part in bounds.groupby("distance"):
        units = ", ".join(f"{GRAPHS[g].split(' ')[0]} {k}" for g, k in
                          zip(part["graph"], part["netsim_bound"], strict=True))  # fmt: skip
        axis.annotate(
            f"K with negative entries ({units} units): MFDL gives Σ|K|, "
            "netsim min(Σ|K|, λ_max·T): bounds",
            (hops, float(part["netsim_max"].max())),
            xytext=(14, -24),
            textcoords="offset points",
            fontsize=8,
            arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.8},
        )
    axis.set_yscale("log")
    axis.set_xlabel("shortest-path distance from the attacker (hops)")
    axis.set_ylabel(f"Rényi divergence at α = {ORDER:g}")
    axis.xaxis.get_major_locator().set_params(integer=True)
    axis.set_title(
        f"MFDL's accounting figure: Muffliato-SGD messages, T = {STEPS}, σ = {SIGMA:g}, "
        f"user-level, attacker {ATTACKER}",
        fontsize=10,
    )
    axis.grid(True, which="major", alpha=0.3)
    axis.legend(fontsize=8, loc="lower left")
    figure.tight_layout()
    return save_figure(figure, out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("run", help=f"compute, write {RESULTS.relative_to(REPO)}, draw the figure")
    tables = commands.add_parser("tables", help=f"print the table from {RESULTS.relative_to(REPO)}")
    tables.add_argument("--readme", action="store_true", help="write it into analysis/README.md")
    commands.add_parser("figures", help=f"draw {FIGURE.relative_to(REPO)}")
    args = parser.parse_args(argv)

    def act() -> int:
        if args.command == "run":
            frame = compute()
            table = by_distance(frame)
            print(write_table(table))
            print(markdown_table(table))
            print(report(frame))
            print(draw(table))
            return 0
        if args.command == "tables":
            if args.readme:
                write_readme_tables({"mfdl-accounting": markdown_table(load_table())})
            else:
                print(markdown_table(load_table()))
            return 0
        print(draw())
        return 0

    return guarded(Path(sys.argv[0]).name, act)


if __name__ == "__main__":
    sys.exit(main())
