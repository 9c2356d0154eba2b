"""How much less noise DOLA's (ε, δ) releases need when an example's releases are composed by
RDP or PLD (``dola.accounting``) instead of splitting the budget, and what it buys in accuracy.

    python analysis/dola_accounting.py sigma
    python analysis/dola_accounting.py accuracy --scenario scenarios/dola/synthetic.yaml \\
        [--seeds 1-5] [--epsilon 1 0.1] [--batch 1 8] [--max-passes 10]

``sigma`` tabulates z = σ/Δ for k releases per example at (ε, δ): ``basic`` (each release
(ε/k, δ/k), analytic Gaussian of Balle & Wang 2018), ``advanced`` (the best of basic and
advanced composition, Dwork, Rothblum & Vadhan 2010, with δ/2 of slack and the releases at
(ε₀, δ/(2k))), ``rdp`` and ``pld`` (:func:`netsim.privacy.composition.calibrated_noise_multiplier`).
``accuracy`` runs a DOLA scenario with ``algorithm: gaussian`` (Li et al. TKDE Alg. 2) under each
accounting and reports the test accuracy of ŵ_T and of the covered running averages of the
released models and of the projected mixes (``dola_summary``), mean ± s.d. over seeds.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

from scipy.optimize import brentq

from netsim.privacy.composition import calibrated_noise_multiplier
from netsim.privacy.mechanisms import analytic_gaussian_sigma
from netsim.scenario.loader import load_scenario
from netsim.scenario.runner import run_in_memory

ACCOUNTINGS = ("basic", "rdp", "pld")
COLUMNS = ("accuracy_averaged", "accuracy_released_averaged", "accuracy_released_mixed_averaged")


def advanced_multiplier(k: int, epsilon: float, delta: float) -> float:
    """σ/Δ for k releases under the better of basic and advanced composition (Dwork, Rothblum
    & Vadhan 2010): ε = √(2k ln(1/δ')) ε₀ + k ε₀ (e^{ε₀} − 1) with δ' = δ/2, releases at
    (ε₀, δ/(2k)) by the analytic Gaussian."""
    basic = analytic_gaussian_sigma(1.0, epsilon / k, delta / k)
    if k == 1:
        return basic
    slack = delta / 2

    def excess(e0: float) -> float:
        return math.sqrt(2 * k * math.log(1 / slack)) * e0 + k * e0 * math.expm1(e0) - epsilon

    e0 = brentq(excess, 1e-12, epsilon)
    return min(basic, analytic_gaussian_sigma(1.0, e0, delta / (2 * k)))


def sigma_table(epsilons: list[float], delta: float, uses: list[int]) -> None:
    print("eps\tk\tbasic\tadvanced\trdp\tpld\trdp/basic\tpld/basic\tpld/advanced")
    for epsilon in epsilons:
        for k in uses:
            basic = analytic_gaussian_sigma(1.0, epsilon / k, delta / k)
            advanced = advanced_multiplier(k, epsilon, delta)
            rdp = calibrated_noise_multiplier(k, epsilon, delta, "rdp")
            pld = calibrated_noise_multiplier(k, epsilon, delta, "pld")
            print(f"{epsilon:g}\t{k}\t{basic:.4g}\t{advanced:.4g}\t{rdp:.4g}\t{pld:.4g}\t"
                  f"{rdp / basic:.3f}\t{pld / basic:.3f}\t{pld / advanced:.3f}")  # fmt: skip


def accuracy(scenario: Path, seeds: list[int], epsilons: list[float], batches: list[int],
             max_passes: int) -> None:  # fmt: skip
    print("batch\tpasses\teps\taccounting\tz\t" + "\t".join(COLUMNS) + "\tseconds")
    for batch in batches:
        for epsilon in epsilons:
            for accounting in ACCOUNTINGS:
                values: dict[str, list[float]] = {c: [] for c in COLUMNS}
                start = time.time()
                z = passes = math.nan
                for seed in seeds:
                    overrides = (
                        f"seed={seed}", "dola.algorithm=gaussian", f"dola.epsilon={epsilon}",
                        "dola.delta=1e-5", f"dola.batch={batch}", f"dola.accounting={accounting}",
                        f"dola.max_passes={max_passes}", "dola.regret_checkpoints=0",
                    )  # fmt: skip
                    _, tables = run_in_memory(load_scenario(scenario, overrides))
                    summary = tables["dola_summary"].iloc[0]
                    ledger = tables["privacy_ledger"]
                    z = float((ledger["noise_scale"] / ledger["sensitivity"]).iloc[0])
                    passes = int(summary["passes"])
                    for column in COLUMNS:
                        values[column].append(float(summary[column]))
                cells = [
                    f"{statistics.mean(v):.4f}±{statistics.stdev(v) if len(v) > 1 else 0:.4f}"
                    for v in values.values()
                ]
                print(f"{batch}\t{passes}\t{epsilon:g}\t{accounting}\t{z:.4g}\t"
                      + "\t".join(cells) + f"\t{time.time() - start:.0f}", flush=True)


def seed_range(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sig = sub.add_parser("sigma")
    sig.add_argument("--epsilon", type=float, nargs="+", default=[1.0, 0.1])
    sig.add_argument("--delta", type=float, default=1e-5)
    sig.add_argument("--uses", type=int, nargs="+", default=[1, 2, 3, 5, 7, 10, 20])
    acc = sub.add_parser("accuracy")
    acc.add_argument("--scenario", type=Path, default=Path("scenarios/dola/synthetic.yaml"))
    acc.add_argument("--seeds", type=seed_range, default=seed_range("1-5"))
    acc.add_argument("--epsilon", type=float, nargs="+", default=[1.0, 0.1])
    acc.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    acc.add_argument("--max-passes", type=int, default=10)
    args = parser.parse_args(argv)
    if args.command == "sigma":
        sigma_table(args.epsilon, args.delta, args.uses)
    else:
        accuracy(args.scenario, args.seeds, args.epsilon, args.batch, args.max_passes)


if __name__ == "__main__":
    main(sys.argv[1:])
