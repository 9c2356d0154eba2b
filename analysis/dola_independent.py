"""An independent DOLA in plain numpy, fed netsim's own draws, and private DOLA on Adult.

    python analysis/dola_independent.py compare [--seed S] [--epsilon E]
    python analysis/dola_independent.py adult [--seeds 1-20] [--epsilon 1 0.1]

:func:`independent_dola` is Li et al.'s ε-DP DOLA (arXiv 2017 and TKDE 2018, Alg. 1) written
from the paper, not from netsim: every round t = 1, …, T each node i mixes the released values,
b^i = Σ_j a_ij(t) w̃^j, takes a hinge subgradient step at b^i on its example(s),
w^i = Proj_W[b^i − α_t g^i] with α_t = 1/(λt) and W the L2 ball of radius R, and releases
w̃^i = w^i + σ^i, σ^i ~ Laplace(S(t)/ε) per coordinate, S(t) = 2 α_t √n L / h. It takes netsim's
mixing matrices A_t, the rows each node used and the Laplace draws as inputs, captured from a
netsim run by :func:`capture_run` (patches around :meth:`MixingSchedule.draw`,
:func:`calibration.dola_laplace_rows` and :meth:`DolaLearner.round` that record and change
nothing), so the two can be compared round by round: with the same draws their iterates agree
to floating-point rounding (``compare``). ``adult`` runs private DOLA on UCI Adult
(``scenarios/dola/adult.yaml`` with ``algorithm: laplace``) over many seeds, checks the
independent iterates on every run, and reports the test accuracy of ŵ_T (the internal
iterates) and of the released models' average (what the guarantee covers) as mean ± s.d. and
standard error.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy import stats

from netsim.algorithms.dola import calibration
from netsim.algorithms.dola.learner import DolaLearner
from netsim.algorithms.dola.mixing import MixingSchedule
from netsim.scenario.loader import load_scenario
from netsim.scenario.runner import run_in_memory
from netsim.scenario.schema import Scenario

REPO = Path(__file__).resolve().parents[1]
ADULT_SCENARIO = REPO / "scenarios" / "dola" / "adult.yaml"
#: The shared research data: beside the repository, or beside the worktrees' directory.
DATA_DIRECTORIES = (REPO.parent / "shared" / "data", REPO.parent.parent / "shared" / "data")
ADULT_FILE = Path("uci") / "adult-complete-rows.csv"
#: The other implementation's private ŵ_T on Adult (mean, s.d., seeds) at ε = 1 and 0.1.
OTHER_IMPLEMENTATION = {1.0: (0.727, 0.024, 9), 0.1: (0.677, 0.071, 9)}


def adult_path() -> Path | None:
    """UCI Adult's complete rows in the shared research data, or None when absent."""
    for directory in DATA_DIRECTORIES:
        if (directory / ADULT_FILE).is_file():
            return directory / ADULT_FILE
    return None


# --- Li et al. Alg. 1 in plain numpy --------------------------------------------------------


def laplace_scale(alpha: float, dimension: int, epsilon: float, batch: int = 1) -> float:
    """μ = S(t)/ε with S(t) = 2 α_t √n L / h and L = 1 (Li et al., Lemma 1 and Alg. 1)."""
    return 2.0 * alpha * math.sqrt(dimension) / (batch * epsilon)


def project(w: np.ndarray, radius: float) -> np.ndarray:
    """Each row of ``w`` projected onto the L2 ball of radius R."""
    norms = np.linalg.norm(w, axis=1, keepdims=True)
    return w * np.minimum(1.0, radius / np.maximum(norms, 1e-300))


def hinge_subgradients(b: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(1/h) Σ_k ∂ max(0, 1 − y_k⟨b^i, x_k⟩) for each node i: x is (m, h, n), y is (m, h);
    the subgradient −y x where the margin is below 1, else 0."""
    margins = y * np.einsum("mhn,mn->mh", x, b)
    slopes = np.where(margins < 1.0, -y, 0.0) / y.shape[1]
    return np.einsum("mh,mhn->mn", slopes, x)


@dataclass
class Trace:
    """Every round's iterates w_t (T, m, n) and released values w̃_t (T, m, n)."""

    iterates: np.ndarray
    released: np.ndarray


def independent_dola(
    x: np.ndarray,
    y: np.ndarray,
    mixing: list[np.ndarray],
    rows: list[np.ndarray],
    noise: list[np.ndarray],
    *,
    strong_convexity: float,
    radius: float,
) -> Trace:
    """Li et al. Alg. 1 with hinge loss from w_0 = w̃_0 = 0: round t = 1, …, T mixes with
    ``mixing[t-1]`` (dense m × m), steps node i on the examples ``rows[t-1][i]`` with
    α_t = 1/(λt), projects on the ball of radius R and adds ``noise[t-1]`` (m × n; zeros for
    no noise) to release."""
    m, n = noise[0].shape
    released = np.zeros((m, n))
    iterates_by_round, released_by_round = [], []
    for t, (a, used, sigma) in enumerate(zip(mixing, rows, noise, strict=True), start=1):
        alpha = 1.0 / (strong_convexity * t)
        b = a @ released
        g = hinge_subgradients(b, x[used], y[used])
        w = project(b - alpha * g, radius)
        released = w + sigma
        iterates_by_round.append(w)
        released_by_round.append(released)
    return Trace(np.array(iterates_by_round), np.array(released_by_round))


def averaged_model(by_round: np.ndarray) -> np.ndarray:
    """ŵ_T = (1/T) Σ_t (1/m) Σ_i v_t^i of per-round values (T, m, n)."""
    return by_round.mean(axis=(0, 1))


def accuracy(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    """Share of examples with sign⟨w, x⟩ = y (a zero margin counts as +1, as netsim's)."""
    return float(np.mean(np.where(x @ w >= 0, 1.0, -1.0) == y))


# --- capturing netsim's draws ---------------------------------------------------------------


@dataclass
class Capture:
    """What one netsim DOLA run drew and computed, round by round, and its tables."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    mixing: list[np.ndarray] = field(default_factory=list)
    rows: list[np.ndarray] = field(default_factory=list)
    noise: list[np.ndarray] = field(default_factory=list)
    scales: list[float] = field(default_factory=list)
    release_epsilon: float = math.inf
    iterates: list[np.ndarray] = field(default_factory=list)
    released: list[np.ndarray] = field(default_factory=list)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


def _dense(x: Any) -> np.ndarray:
    return np.asarray(x.toarray() if sp.issparse(x) else x, dtype=np.float64)


@contextmanager
def recording(capture: Capture) -> Iterator[None]:
    """Record every A_t, Laplace draw and round of the DOLA runs inside (all nodes online:
    the rows and noise are per node)."""
    draw, laplace_rows, step = MixingSchedule.draw, calibration.dola_laplace_rows, DolaLearner.round

    def recorded_draw(self: MixingSchedule, *args: Any, **kwargs: Any) -> Any:
        mixing = draw(self, *args, **kwargs)
        capture.mixing.append(mixing.matrix.toarray())
        return mixing

    def recorded_laplace(values: np.ndarray, *, out: np.ndarray | None = None, **kw: Any) -> Any:
        # the same generator calls on a zero array: the noise alone, bit for bit (the kernel
        # writes source + term), then added as the kernel would add it
        noise = np.zeros_like(values)
        event = laplace_rows(noise, **kw)
        np.add(values, noise, out=values if out is None else out)
        capture.noise.append(noise)
        capture.scales.append(event.noise_scale)
        return event

    def recorded_round(self: DolaLearner, *args: Any, **kwargs: Any) -> Any:
        if not capture.rows:
            data = self.data
            capture.x_train, capture.y_train = _dense(data.x_train), data.y_train
            capture.x_test, capture.y_test = _dense(data.x_test), data.y_test
            capture.release_epsilon = self.release_epsilon
        report = step(self, *args, **kwargs)
        if report.online != self.m:
            raise RuntimeError("the capture assumes every node online in every round")
        capture.rows.append(self.used_rows[-1].reshape(self.m, -1).copy())
        capture.iterates.append(self.weights.copy())
        capture.released.append(self.released.copy())
        return report

    with (
        mock.patch.object(MixingSchedule, "draw", recorded_draw),
        mock.patch.object(calibration, "dola_laplace_rows", recorded_laplace),
        mock.patch.object(DolaLearner, "round", recorded_round),
    ):
        yield


def capture_run(scenario: Scenario) -> Capture:
    """Run ``scenario`` (a ``dola`` run with Alg. 1 or no noise) in memory, recording it."""
    capture = Capture(np.zeros((0, 0)), np.zeros(0), np.zeros((0, 0)), np.zeros(0))
    with recording(capture):
        capture.tables = run_in_memory(scenario)[1]
    if not capture.noise:  # non-private: the released values are the iterates
        capture.noise = [np.zeros_like(w) for w in capture.iterates]
    return capture


@dataclass(frozen=True)
class Comparison:
    """netsim against the independent implementation on the same draws."""

    worst_iterate: float  # max over rounds of max |Δw| / max |w|
    worst_released: float
    scale_error: float  # max relative |μ_netsim − μ_independent|
    netsim_averaged: float  # test accuracy of netsim's ŵ_T (dola_summary)
    independent_averaged: float
    netsim_released: float  # test accuracy of the released models' average (dola_summary)
    independent_released: float
    noise_ks_pvalue: float  # Kolmogorov–Smirnov of σ/μ against Laplace(0, 1), all draws
    examples_once: bool  # no example used twice within a pass, none by two nodes


def compare(capture: Capture, *, strong_convexity: float, radius: float) -> Comparison:
    """Replay ``capture`` through :func:`independent_dola` and compare round by round."""
    trace = independent_dola(
        capture.x_train, capture.y_train, capture.mixing, capture.rows, capture.noise,
        strong_convexity=strong_convexity, radius=radius,
    )  # fmt: skip
    ours, theirs = np.array(capture.iterates), trace.iterates
    scale = np.abs(ours).max(axis=(1, 2))
    worst_iterate = float((np.abs(ours - theirs).max(axis=(1, 2)) / scale).max())
    released = np.array(capture.released)
    worst_released = float(
        (np.abs(released - trace.released).max(axis=(1, 2))
         / np.abs(released).max(axis=(1, 2))).max()
    )  # fmt: skip
    n = capture.x_train.shape[1]
    batch = capture.rows[0].shape[1]
    expected = [
        laplace_scale(1.0 / (strong_convexity * t), n, capture.release_epsilon, batch)
        for t in range(1, len(capture.scales) + 1)
    ]
    scale_error = float(np.max(np.abs(np.array(capture.scales) / expected - 1.0), initial=0.0))
    summary = capture.tables["dola_summary"].iloc[0]
    x, y = capture.x_test, capture.y_test
    return Comparison(
        worst_iterate, worst_released, scale_error,
        float(summary["accuracy_averaged"]), accuracy(averaged_model(theirs), x, y),
        float(summary["accuracy_released_averaged"]),
        accuracy(averaged_model(trace.released), x, y),
        noise_pvalue(capture), examples_used_once(capture),
    )  # fmt: skip


def noise_pvalue(capture: Capture) -> float:
    """The captured draws, each divided by its round's μ, against Laplace(0, 1) (KS test;
    NaN without noise): the inputs netsim fed both implementations have the stated law."""
    if not capture.scales:
        return math.nan
    standard = np.concatenate([
        (sigma / mu).reshape(-1) for sigma, mu in zip(capture.noise, capture.scales, strict=True)
    ])  # fmt: skip
    return float(stats.kstest(standard, stats.laplace.cdf).pvalue)


def examples_used_once(capture: Capture) -> bool:
    """Whether no training example was used twice within the run's first pass: the disjoint
    samples of Li et al.'s parallel composition (each node walks its own shard)."""
    used = np.concatenate([rows.reshape(-1) for rows in capture.rows])
    return bool(np.unique(used).size == used.size)


# --- the Adult study ------------------------------------------------------------------------


def adult_scenario(seed: int, epsilon: float | None, overrides: tuple[str, ...] = ()) -> Scenario:
    """``scenarios/dola/adult.yaml`` with Alg. 1 at ``epsilon`` (None: non-private) and
    ``seed``, reading Adult from the shared research data."""
    path = adult_path()
    if path is None:
        raise SystemExit("UCI Adult not found in ../shared/data (research data, not shipped)")
    private = () if epsilon is None else ("dola.algorithm=laplace", f"dola.epsilon={epsilon}")
    scenario = load_scenario(
        ADULT_SCENARIO, (f"dola.data.path={path}", f"seed={seed}", *private, *overrides)
    )
    return scenario


def seeds_argument(text: str) -> list[int]:
    """``1-20`` or ``1,2,5``."""
    if "-" in text:
        first, last = text.split("-")
        return list(range(int(first), int(last) + 1))
    return [int(s) for s in text.split(",")]


def adult_study(
    epsilons: list[float], seeds: list[int], overrides: tuple[str, ...] = ()
) -> pd.DataFrame:
    """One row per (ε, seed): netsim's and the independent accuracies, agreement, run time;
    ``overrides`` (``dotted.key=value``) change the scenario (e.g. the mixing)."""
    rows = []
    for epsilon in epsilons:
        for seed in seeds:
            scenario = adult_scenario(seed, epsilon, overrides)
            section = scenario.dola
            start = time.perf_counter()
            capture = capture_run(scenario)
            seconds = time.perf_counter() - start
            result = compare(
                capture, strong_convexity=section.strong_convexity, radius=section.radius
            )
            summary = capture.tables["dola_summary"].iloc[0]
            rows.append({
                "epsilon": epsilon, "seed": seed, "seconds": seconds,
                "internal_averaged": result.netsim_averaged,
                "internal_mean": float(summary["accuracy_mean"]),
                "released_averaged": result.netsim_released,
                "released_mean": float(summary["accuracy_released_mean"]),
                "independent_averaged": result.independent_averaged,
                "independent_released": result.independent_released,
                "worst_iterate": result.worst_iterate, "scale_error": result.scale_error,
                "noise_ks_pvalue": result.noise_ks_pvalue, "examples_once": result.examples_once,
                "majority": float(summary["majority_accuracy"]),
            })  # fmt: skip
            print(
                f"ε = {epsilon:g} seed {seed}: ŵ_T {result.netsim_averaged:.4f} (independent "
                f"{result.independent_averaged:.4f}), released {result.netsim_released:.4f}, "
                f"max rel. iterate diff {result.worst_iterate:.1e}, {seconds:.1f} s",
                flush=True,
            )
    return pd.DataFrame(rows)


def study_table(results: pd.DataFrame) -> str:
    """Markdown: per ε, mean ± s.d. (n) and standard error of ŵ_T and the released average,
    and Welch's t against the other implementation's ŵ_T."""
    lines = [
        "| ε | n | ŵ_T (internal) | s.e. | released average | s.e. | w̄_T (internal) "
        "| released mean | other impl. ŵ_T | Welch t, p | s per run |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for epsilon, runs in results.groupby("epsilon", sort=False):
        internal, released = runs["internal_averaged"], runs["released_averaged"]
        n = len(runs)
        cells = [f"{epsilon:g}", str(n)]
        for values in (internal, released):
            cells += [f"{values.mean():.3f} ± {values.std():.3f}", f"{values.std() / n**0.5:.3f}"]
        cells += [f"{runs['internal_mean'].mean():.3f}", f"{runs['released_mean'].mean():.3f}"]
        other = OTHER_IMPLEMENTATION.get(float(epsilon))
        if other is None:
            cells += ["—", "—"]
        else:
            welch = stats.ttest_ind_from_stats(
                internal.mean(), internal.std(), n, other[0], other[1], other[2],
                equal_var=False,
            )  # fmt: skip
            cells += [f"{other[0]:.3f} ± {other[1]:.3f} ({other[2]})",
                      f"{welch.statistic:.2f}, {welch.pvalue:.2g}"]  # fmt: skip
        cells.append(f"{runs['seconds'].mean():.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("compare", help="one Adult run against the independent DOLA")
    one.add_argument("--seed", type=int, default=1)
    one.add_argument("--epsilon", type=float, default=1.0)
    study = commands.add_parser("adult", help="private ŵ_T on Adult over seeds")
    study.add_argument("--seeds", type=seeds_argument, default=list(range(1, 21)))
    study.add_argument("--epsilon", type=float, nargs="+", default=[1.0, 0.1])
    study.add_argument("--out", type=Path, help="write the per-run results here (CSV)")
    study.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="override a scenario key (e.g. dola.mixing.fraction=1.0); repeatable",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.command == "compare":
        scenario = adult_scenario(args.seed, args.epsilon)
        capture = capture_run(scenario)
        print(compare(
            capture, strong_convexity=scenario.dola.strong_convexity,
            radius=scenario.dola.radius,
        ))  # fmt: skip
        return 0
    results = adult_study(args.epsilon, args.seeds, tuple(args.set))
    if args.out is not None:
        results.to_csv(args.out, index=False)
    disagree = results[
        (results["internal_averaged"] != results["independent_averaged"])
        | (results["worst_iterate"] > 1e-9)
        | (results["scale_error"] > 1e-12)
        | ~results["examples_once"]
    ]
    print()
    print(study_table(results))
    print(f"\nruns where the independent DOLA disagrees: {len(disagree)} of {len(results)}")
    smallest = results["noise_ks_pvalue"].min()
    print(f"smallest KS p-value of the noise against Laplace: {smallest:.3g}")
    return 1 if len(disagree) else 0


if __name__ == "__main__":
    sys.exit(main())
