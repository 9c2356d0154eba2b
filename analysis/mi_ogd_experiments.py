"""Run the experiments of Zhang & Venkitasubramaniam (MI-private OGD) and draw them.

    python analysis/mi_ogd_experiments.py run [--jobs 2 | --scheduler ADDRESS] [--out DIR]
                                              [--only NAME ...]
    python analysis/mi_ogd_experiments.py figures

All runs go through ``scenarios/mi_ogd/regression.yaml``: a learner and 100 users on the
simulated network, absolute-error linear regression on points of the unit ball
(d = L = B = 1 unless said otherwise), one user per one-second round.

- ``fig3``: regret against rounds of the private run (σ² = 1, so every report leaks at most
  ½ ln 2 nats) and of the non-private one (σ = 0), T = 1,000, 20 seeds, with the bound
  B²/(2η) + (η/2) t (L² + dσ²) of Theorem 2 at the η tuned for T (the paper's Fig. 3).
- ``fig4``: the privacy–regret trade-off at d = B = 1, T = 25: mean regret over 200 seeds
  against the leakage bound C(σ) = ½ ln(1 + 1/σ²), σ swept (the paper's Fig. 4).
- ``bandit``: final regret of the bandit variant (Alg. 2, η ∝ T^(−3/4), δ ∝ T^(−1/4)) and of
  full information for T = 100 … 10,000, 10 seeds each, with the fitted growth exponents.

Each experiment is a sweep of :mod:`netsim.sweep` (:func:`plan`: one listed point per
configuration and seed, each run with exactly that seed). ``run`` runs it on ``--jobs`` local
processes or a Dask cluster into the sweep directory ``<--out>/mi-ogd-<experiment>/`` (default
``analysis/sweeps``; runs already complete there are kept, so ``run`` resumes), reduces the
run directories into ``analysis/results/mi-ogd-<experiment>.parquet`` (atomically);
``figures`` draws ``analysis/figures/mi-ogd-*.png`` and prints the numbers.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from experiments import SweepRunner, describe, experiment_main, run_experiments

from netsim.analysis import load_run, load_run_scenario
from netsim.analysis.figures import save_figure
from netsim.plotting import pyplot
from netsim.scenario.loader import load_scenario
from netsim.scenario.schema import Scenario
from netsim.sweep import SweepPlan, SweepPoint, plan_points

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "scenarios" / "mi_ogd" / "regression.yaml"
RESULTS = REPO / "analysis" / "results"
FIGURES = REPO / "analysis" / "figures"
EXPERIMENTS = ("fig3", "fig4", "bandit")


def base_spec() -> dict[str, Any]:
    """The base scenario as a plain dictionary."""
    return load_scenario(BASE).model_dump(mode="json", exclude_none=True)


def _point(rounds: int, seed: int, **mi: Any) -> SweepPoint:
    """A run of ``rounds`` rounds with the ``mi_ogd`` keys ``mi`` set."""
    overrides = {"duration": float(rounds), **{f"mi_ogd.{k}": v for k, v in mi.items()}}
    return SweepPoint(overrides, seed, describe(overrides))


def points(name: str) -> list[SweepPoint]:
    """Every run of experiment ``name``: overrides of the base scenario and a seed."""
    if name == "fig3":
        return [_point(1000, seed, sigma=sigma) for sigma in (0.0, 1.0) for seed in range(1, 21)]
    if name == "fig4":
        return [
            _point(25, seed, sigma=sigma, regret_checkpoints=1)
            for sigma in (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
            for seed in range(1, 201)
        ]
    if name == "bandit":
        return [
            _point(rounds, seed, setting=setting, regret_checkpoints=1)
            for setting in ("bandit", "full")
            for rounds in (100, 316, 1000, 3162, 10000)
            for seed in range(1, 11)
        ]
    raise SystemExit(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")


def plan(name: str, overrides: dict[str, Any] | None = None) -> SweepPlan:
    """The sweep ``mi-ogd-<name>`` (every point validated). ``overrides`` are set at every
    point after its own (e.g. ``{"duration": 20.0}`` for a short check)."""
    listed = points(name)
    if overrides:
        listed = [SweepPoint({**p.overrides, **overrides}, p.seed, p.label) for p in listed]
    return plan_points(base_spec(), listed, name=f"mi-ogd-{name}", base_dir=REPO, source=BASE)


def labels(name: str, scenario: Scenario) -> dict[str, Any]:
    """The columns that tell the runs of experiment ``name`` apart, read from a run's
    scenario: σ (fig3, fig4), or the setting and the horizon T in rounds (bandit)."""
    mi_ogd = scenario.mi_ogd
    assert mi_ogd is not None, f"{scenario.name}: not an MI-OGD scenario"
    if name == "bandit":
        return {"setting": mi_ogd.setting, "T": mi_ogd.rounds_in(scenario.duration)}
    return {"sigma": mi_ogd.sigma}


def reduce_run(name: str, directory: Path) -> pd.DataFrame:
    """The regret rows of one run directory, with its labels, seed and leakage per report."""
    tables = load_run(directory, parameters=False)
    scenario = load_run_scenario(directory)
    regret = tables["mi_ogd_regret"].drop(columns="run_id")
    summary = tables["mi_ogd_summary"].iloc[0]
    for key, value in labels(name, scenario).items():
        regret[key] = value
    regret["seed"] = scenario.seed
    regret["leakage"] = summary["leakage_per_report"]
    return regret


def results_file(name: str) -> Path:
    return RESULTS / f"mi-ogd-{name}.parquet"


def run(names: list[str], runner: SweepRunner) -> int:
    """Run the sweeps of ``names`` and write one results file per experiment; returns the
    number of failed runs."""
    return run_experiments(names, runner, plan=plan, reduce=reduce_run, results=results_file)


def final_rows(data: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The last checkpoint (round T) of every run."""
    last = data.groupby([*keys, "seed"])["round"].transform("max")
    return data[data["round"] == last]


def draw() -> None:
    plt = pyplot()
    fig3 = results_file("fig3")
    if fig3.is_file():
        data = pd.read_parquet(fig3)
        fig, ax = plt.subplots(figsize=(6.6, 4.4))
        for sigma, group in data.groupby("sigma"):
            stats = group.groupby("round")["regret"].agg(["mean", "std"])
            label = "non-private (σ = 0)" if sigma == 0 else f"σ² = {sigma**2:g} (C = ½ ln 2 nats)"
            (line,) = ax.plot(stats.index, stats["mean"], lw=1.5, label=label)
            low, high = stats["mean"] - stats["std"], stats["mean"] + stats["std"]
            ax.fill_between(stats.index, low, high, alpha=0.2, color=line.get_color())
            bound = group.groupby("round")["bound"].first()
            ax.plot(bound.index, bound, "--", lw=1, color=line.get_color(),
                    label=f"bound, {'σ = 0' if sigma == 0 else 'σ² = 1'}")  # fmt: skip
            final = stats.iloc[-1]
            print(
                f"fig3 σ = {sigma:g}: regret at T = {stats.index[-1]}: {final['mean']:.2f} ± "
                f"{final['std']:.2f}, bound {bound.iloc[-1]:.2f}"
            )
        ax.set_xlabel("round t")
        ax.set_ylabel("regret Σ f_t(w_t) − min_u Σ f_t(u) (absolute-error units)")
        ax.set_title("MI-private OGD vs non-private, d = L = B = 1, T = 1,000 (mean ± sd, 20 runs)",
                     fontsize=9)  # fmt: skip
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        print("wrote", save_figure(fig, FIGURES / "mi-ogd-fig3-regret.png").relative_to(REPO))
    fig4 = results_file("fig4")
    if fig4.is_file():
        data = final_rows(pd.read_parquet(fig4), ["sigma"])
        stats = data.groupby("sigma").agg(
            regret=("regret", "mean"), sd=("regret", "std"), n=("regret", "size"),
            leakage=("leakage", "first"), bound=("bound", "first"),
        )  # fmt: skip
        stats["se"] = stats["sd"] / np.sqrt(stats["n"])
        fig, ax = plt.subplots(figsize=(6.6, 4.4))
        finite = stats[np.isfinite(stats["leakage"])]
        ax.errorbar(finite["leakage"], finite["regret"], yerr=2 * finite["se"], fmt="o-",
                    label="mean regret ± 2 s.e. (200 runs)")  # fmt: skip
        ax.plot(finite["leakage"], finite["bound"], "s--", label="bound B√((L² + dσ²)T)")
        if 0.0 in stats.index:
            ax.axhline(stats.loc[0.0, "regret"], color="grey", ls=":",
                       label="non-private (σ = 0, C = ∞)")  # fmt: skip
        for sigma, row in finite.iterrows():
            ax.annotate(f"σ={sigma:g}", (row["leakage"], row["regret"]),
                        textcoords="offset points", xytext=(4, 4), fontsize=7)  # fmt: skip
        ax.set_xlabel("leakage bound C = ½ ln(1 + 1/σ²) per report (nats)")
        ax.set_ylabel("regret after T = 25 rounds (absolute-error units)")
        ax.set_title("Privacy–regret trade-off, d = B = 1, T = 25", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        print("wrote", save_figure(fig, FIGURES / "mi-ogd-fig4-tradeoff.png").relative_to(REPO))
        print(stats[["leakage", "regret", "se", "bound"]].round(4).to_string())
    bandit = results_file("bandit")
    if bandit.is_file():
        data = final_rows(pd.read_parquet(bandit), ["setting", "T"])
        fig, ax = plt.subplots(figsize=(6.6, 4.4))
        for setting, group in data.groupby("setting"):
            stats = group.groupby("T")["regret"].agg(["mean", "std"])
            slope, _ = np.polyfit(np.log(stats.index), np.log(stats["mean"]), 1)
            (line,) = ax.loglog(stats.index, stats["mean"], "o-",
                                label=f"{setting}: regret ∝ T^{slope:.2f}")  # fmt: skip
            bound = group.groupby("T")["bound"].first()
            ax.loglog(bound.index, bound, "--", color=line.get_color(), lw=1,
                      label=f"{setting}: bound")  # fmt: skip
            print(f"{setting}: fitted exponent {slope:.3f}; regret "
                  + ", ".join(f"T={t}: {m:.1f}" for t, m in stats["mean"].items()))  # fmt: skip
        ax.set_xlabel("horizon T (rounds)")
        ax.set_ylabel("regret after T rounds (absolute-error units)")
        ax.set_title("Regret growth, σ² = 1, d = 1 (mean of 10 runs)", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
        fig.tight_layout()
        print("wrote", save_figure(fig, FIGURES / "mi-ogd-bandit-growth.png").relative_to(REPO))


def main(argv: list[str] | None = None) -> int:
    return experiment_main(__doc__.splitlines()[0], EXPERIMENTS, run, draw, argv)


if __name__ == "__main__":
    sys.exit(main())
