"""The network budget's ceiling on an 8-regular walk: what it admits beside local DP.

    python analysis/network_ceiling.py run       # about a minute: six runs, in memory
    python analysis/network_ceiling.py tables [--readme]

``scenarios/privacy/walk-spambase.yaml`` (512 nodes of an 8-regular graph, Spambase, a
Metropolis walk of 5,120 steps) with the node as the privacy unit and a fixed noise
multiplier z = 5 (``learning.algorithm: dp-sgd``, RDP), at three budgets (ε at δ = 10⁻⁵): each
budget as local DP (``privacy.budget: local``, each node's releases compose to ε) and as the
network budget (``privacy.budget: network``, :mod:`netsim.privacy.ceiling`: each node is
used until some node or coalition would learn more than ε about it, stretches an observer has
not received in pooled as the path-known accountant pools them). Each run is one row of
``analysis/results/network-ceiling.parquet``: uses admitted, visits refused, the worst pair's
path-known ε, the local ε of the most-used node, the final test accuracy.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
from experiments import write_readme_tables

from netsim.scenario.loader import load_scenario
from netsim.scenario.runner import run_in_memory

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "scenarios" / "privacy" / "walk-spambase.yaml"
RESULTS = REPO / "analysis" / "results" / "network-ceiling.parquet"
NAME = "network-ceiling"
NOISE_MULTIPLIER = 5.0
#: ε at δ = 10⁻⁵: one use (ε 0.79) fits 1, two (1.16) do not; five fit 2; ten fit 4.
EPSILONS = (1.0, 2.0, 4.0)
BUDGETS = ("local", "network")


def run_row(epsilon: float, budget: str) -> dict[str, object]:
    """One run of the base scenario at ``epsilon`` under ``budget``, reduced to a row."""
    overrides = (
        "learning.privacy_unit=node",
        f"learning.noise={{kind: gaussian, noise_multiplier: {NOISE_MULTIPLIER}}}",
        f"learning.epsilon={epsilon}",
        "privacy.model=network",
        f"privacy.budget={budget}",
    )
    _, tables = run_in_memory(load_scenario(BASE, overrides))
    learning = tables["learning_summary"].iloc[0]
    privacy = tables["privacy_summary"].iloc[0]
    return {
        "epsilon": epsilon, "budget": budget, "uses": int(learning["updates"]),
        "refused": int(learning["refused"]), "network_epsilon": float(privacy["network_epsilon"]),
        "local_epsilon": float(privacy["local_epsilon"]),
        "accuracy": float(learning["test_accuracy"]),
    }  # fmt: skip


def run() -> None:
    """Every budget, local and network, into :data:`RESULTS`."""
    rows = [run_row(e, b) for e in EPSILONS for b in BUDGETS]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(RESULTS, index=False)


def generated_tables() -> dict[str, str]:
    """The Markdown table of :data:`RESULTS`, keyed by its README block."""
    frame = pd.read_parquet(RESULTS)
    lines = [
        "| ε | budget | uses admitted | visits refused | worst pair ε | local ε | accuracy |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in frame.itertuples():
        lines.append(
            f"| {row.epsilon:g} | {row.budget} | {row.uses:,} | {row.refused:,} | "
            f"{row.network_epsilon:.3g} | {row.local_epsilon:.3g} | {row.accuracy:.3f} |"
        )
    return {NAME: "\n".join(lines)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("run", "tables"))
    parser.add_argument("--readme", action="store_true", help="write the README block")
    args = parser.parse_args(argv)
    if args.command == "run":
        run()
    tables = generated_tables()
    if args.command == "tables" and args.readme:
        write_readme_tables(tables)
    else:
        print("\n\n".join(tables.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
