"""Tuning as a sweep: the ``select`` key of a sweep section chooses the best grid point by a
validation metric, reports that point's test result, and states what the choice cost in
privacy.

.. code-block:: yaml

    sweep:
      grid:
        learning.learning_rate: [0.3, 1, 3, 10]
        learning.clip: [0.1, 0.3, 1]
      select:
        metric: learning_summary.validation_accuracy   # the default; goal max (or min)
        report: learning_summary.test_accuracy         # the default
        privacy: random_trials                         # or unaccounted
        trials: {mean: 10, shape: 1}                   # random_trials: K ~ TNB(shape), E[K]
        validation_epsilon: 1.0                        # random_trials: the score's Laplace ε

Two ways to state the selection's privacy:

- ``unaccounted``: every grid point × repetition runs; the point with the best mean metric
  over its repetitions is chosen, and its report metric is given per repetition. Each run's
  own (ε, δ) holds for that run's model alone; the choice, which read the validation rows and
  every run's private training, is **not** counted, and the summary says so: tuning on
  private data can leak it (Papernot & Steinke 2022, §3).
- ``random_trials``: private selection by Papernot & Steinke, *Hyperparameter Tuning with
  Rényi Differential Privacy* (ICLR 2022), Alg. 1 / Thm. 2: a number of trials K is drawn from
  the truncated negative binomial distribution of ``shape`` η ≥ 0 and mean E[K] (η = 1:
  geometric, η = 0: logarithmic), each trial runs one grid point drawn uniformly at random
  (random search) at its own seed, and the trial with the best *noisy* score is released.
  The score is the validation accuracy plus Laplace noise of scale 1/(n_val · ε_val) (an
  accuracy changes by at most 1/n_val when one validation row is replaced), so each trial is
  DP for every record: a training record's loss is its run's (the score is a post-processing
  of the model), a validation record's is the Laplace mechanism's. The released trial's
  guarantee for each kind of record is dp-accounting's ``RepeatAndSelectDpEvent`` of that
  record's loss in one trial, under RDP, converted at the runs' δ; the worse of the two is the
  selection's (ε, δ). A trial's training loss is its worst record's: the Gaussian releases of
  its ``privacy_ledger`` composed (curves α/(2z²) add, Mironov 2017), the largest over the
  trials; every trial must spend the same privacy, so no privacy key may be a grid axis.

The choice is made from the finished runs (:func:`select_sweep`), written to
``selection.json`` in the sweep directory (atomically) and printed by ``netsim sweep``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from netsim.errors import SweepError, did_you_mean
from netsim.lazy import lazy_module

if TYPE_CHECKING:
    import pandas as pd
    import scipy.optimize as optimize
else:
    pd = lazy_module("pandas")
    optimize = lazy_module("scipy.optimize")

SELECT_KEYS = ("metric", "goal", "report", "privacy", "trials", "validation_epsilon")
TRIAL_KEYS = ("mean", "shape")
SELECTION_FILE = "selection.json"
#: Most trials a ``random_trials`` selection may draw (the distribution's tail is cut here:
#: with mean ≤ 1,000 the probability of more is below 1e-12 for every shape ≥ 0).
MAX_TRIALS = 10_000
#: Grid axes that would change what a trial spends (random_trials needs one per-trial loss).
PRIVACY_KEYS = (
    "learning.epsilon", "learning.delta", "learning.noise", "learning.algorithm",
    "learning.accounting", "learning.records_per_node", "learning.batch",
    "learning.privacy_unit", "learning.dataset", "learning.sampling", "nodes", "duration",
)  # fmt: skip
#: The spawn key of the stream that draws the trials (and, next, the scores' noise).
_SELECT_STREAM = 0x5E1EC7


@dataclass(frozen=True)
class SelectSpec:
    """A validated ``select`` key (see the module docstring)."""

    metric: str = "learning_summary.validation_accuracy"
    goal: Literal["max", "min"] = "max"
    report: str = "learning_summary.test_accuracy"
    privacy: Literal["unaccounted", "random_trials"] = "unaccounted"
    mean_trials: float | None = None
    shape: float | None = None
    validation_epsilon: float | None = None


def _metric_key(value: object, where: str) -> str:
    if not isinstance(value, str) or value.count(".") != 1 or not all(value.split(".")):
        raise SweepError(
            f"{where}: {value!r}; a metric is 'table.column' of a run's summary, e.g. "
            "learning_summary.validation_accuracy"
        )
    return value


def _positive(value: object, where: str, *, at_least: float = 0.0, strict: bool = True) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or (value <= at_least if strict else value < at_least):  # type: ignore[operator]
        bound = f"> {at_least:g}" if strict else f">= {at_least:g}"
        raise SweepError(f"{where}: {value!r}; expected a finite number {bound}")
    return float(value)  # type: ignore[arg-type]


def section_mapping(raw: object, allowed: Sequence[str], where: str) -> Mapping[str, Any]:
    """``raw`` as a mapping of the ``allowed`` keys only (a part of a sweep file), else one
    :class:`SweepError` naming ``where`` and the allowed keys."""
    if not isinstance(raw, Mapping):
        raise SweepError(f"{where}: expected a mapping with keys {', '.join(allowed)}")
    unknown = sorted(set(raw) - set(allowed), key=str)
    if unknown:
        near = did_you_mean(str(unknown[0]), allowed)
        raise SweepError(
            f"{where}.{unknown[0]}: unknown key{near}; allowed keys here: {', '.join(allowed)}"
        )
    return raw


def read_select(raw: object, grid_keys: Sequence[str], repetitions: int, where: str) -> SelectSpec:
    """Validate a sweep's ``select`` key (``grid_keys``: the grid's axes)."""
    raw = section_mapping(raw, SELECT_KEYS, where)
    metric = _metric_key(raw.get("metric", SelectSpec.metric), f"{where}.metric")
    report = _metric_key(raw.get("report", SelectSpec.report), f"{where}.report")
    goal = raw.get("goal", "max")
    if goal not in ("max", "min"):
        raise SweepError(f"{where}.goal: {goal!r}; the goal is max or min")
    privacy = raw.get("privacy")
    if privacy not in ("unaccounted", "random_trials"):
        raise SweepError(
            f"{where}.privacy: {privacy!r}; say what the selection costs: unaccounted (named "
            "so in the summary) or random_trials (Papernot & Steinke 2022, counted)"
        )
    if privacy == "unaccounted":
        for key in ("trials", "validation_epsilon"):
            if key in raw:
                raise SweepError(f"{where}.{key}: only for privacy random_trials")
        return SelectSpec(metric, goal, report, privacy)
    trials = raw.get("trials")
    if not isinstance(trials, Mapping) or set(trials) != set(TRIAL_KEYS):
        raise SweepError(
            f"{where}.trials: {trials!r}; random_trials needs trials: {{mean: E[K] >= 1, "
            "shape: η >= 0}} (the truncated negative binomial: 1 geometric, 0 logarithmic)"
        )
    mean = _positive(trials["mean"], f"{where}.trials.mean", at_least=1.0, strict=False)
    if mean > 1000:
        raise SweepError(f"{where}.trials.mean: {mean:g}; at most 1000 trials on average")
    shape = _positive(trials["shape"], f"{where}.trials.shape", strict=False)
    if "validation_epsilon" not in raw:
        raise SweepError(
            f"{where}.validation_epsilon: missing; random_trials adds Laplace noise to each "
            "trial's validation score so that the validation rows are protected too (e.g. 1.0)"
        )
    epsilon = _positive(raw["validation_epsilon"], f"{where}.validation_epsilon")
    if repetitions != 1:
        raise SweepError(
            f"{where}: random_trials draws its trials (each a grid point at its own seed); "
            f"remove sweep.repetitions ({repetitions})"
        )
    private = [k for k in grid_keys if any(k == p or k.startswith(p + ".") for p in PRIVACY_KEYS)]
    if private:
        raise SweepError(
            f"{where}: grid axis {private[0]} changes what a trial spends; random_trials "
            "needs every trial at one privacy cost (tune the step size, clip or model instead)"
        )
    return SelectSpec(metric, goal, report, privacy, mean, shape, epsilon)


# --- the number of trials --------------------------------------------------------------------


def tnb_mean(shape: float, gamma: float) -> float:
    """E[K] of the truncated negative binomial D_{η,γ} (Papernot & Steinke 2022, §2.2):
    η(1 − γ)/(γ(1 − γ^η)) for η > 0, (1/γ − 1)/ln(1/γ) for η = 0 (logarithmic)."""
    if shape == 0:
        return (1.0 / gamma - 1.0) / math.log(1.0 / gamma)
    return shape * (1.0 - gamma) / (gamma * -math.expm1(shape * math.log(gamma)))


def tnb_gamma(shape: float, mean: float) -> float:
    """The γ ∈ (0, 1) at which D_{η,γ} has mean ``mean`` (> 1; E[K] falls from ∞ to 1 as γ
    goes from 0 to 1), by Brent's method on ln γ."""
    if mean <= 1.0:
        return 1.0
    return math.exp(
        optimize.brentq(lambda t: tnb_mean(shape, math.exp(t)) - mean, -700.0, -1e-12, xtol=1e-14)
    )


def tnb_probabilities(shape: float, mean: float) -> np.ndarray:
    """P[K = k] for k = 1 … :data:`MAX_TRIALS` (index k − 1) of D_{η,γ}: proportional to
    (1 − γ)^k Π_{ℓ<k} (ℓ + η)/(ℓ + 1) (Papernot & Steinke 2022, §2.2; for η = 0 the product is
    read as 1/k), normalised over the support kept."""
    if mean <= 1.0:
        out = np.zeros(MAX_TRIALS)
        out[0] = 1.0
        return out
    gamma = tnb_gamma(shape, mean)
    k = np.arange(1, MAX_TRIALS + 1, dtype=np.float64)
    if shape == 0:
        log_weight = k * math.log1p(-gamma) - np.log(k)
    else:
        from scipy.special import gammaln

        log_weight = k * math.log1p(-gamma) + gammaln(k + shape) - gammaln(shape) - gammaln(k + 1)
    weight = np.exp(log_weight - log_weight.max())
    return weight / weight.sum()


def select_stream(base_seed: int) -> np.random.Generator:
    """The selection's own stream, from the sweep's base seed (no run's stream is touched)."""
    return np.random.default_rng(np.random.SeedSequence(base_seed, spawn_key=(_SELECT_STREAM,)))


def trial_stream(
    spec: SelectSpec, points: int, base_seed: int
) -> tuple[list[int], np.random.Generator]:
    """The grid points of the trials and the stream, left where it is after them (it draws
    the scores' noise next): K ~ D_{η,γ} (mean ``spec.mean_trials``), then K points uniformly
    at random with replacement (Papernot & Steinke 2022, Alg. 1: random search)."""
    assert spec.mean_trials is not None and spec.shape is not None
    rng = select_stream(base_seed)
    count = 1 + int(rng.choice(MAX_TRIALS, p=tnb_probabilities(spec.shape, spec.mean_trials)))
    return [int(p) for p in rng.integers(0, points, size=count)], rng


def draw_trials(spec: SelectSpec, points: int, base_seed: int) -> list[int]:
    """The grid points of the trials (:func:`trial_stream`)."""
    return trial_stream(spec, points, base_seed)[0]


# --- the choice ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    """What ``select`` chose, and what the choice cost (written as ``selection.json``)."""

    metric: str
    goal: str
    report: str
    privacy: str
    chosen_point: int
    chosen_parameters: dict[str, Any]
    chosen_runs: list[str]
    metric_value: float
    report_values: list[float]
    report_mean: float
    candidates: int
    runs: int
    statement: str
    epsilon: float | None = None
    delta: float | None = None
    trials: list[dict[str, Any]] | None = None

    def lines(self) -> list[str]:
        """What ``netsim sweep`` prints about the choice."""
        values = ", ".join(f"{v:.4f}" for v in self.report_values)
        setting = ", ".join(f"{k}={v}" for k, v in self.chosen_parameters.items())
        return [
            f"selected by {self.metric} ({self.goal}) among {self.candidates} "
            f"{'trials' if self.trials is not None else 'points'}: {setting}",
            f"{self.report} of the selected: {self.report_mean:.4f}"
            + (f" (runs: {values})" if len(self.report_values) > 1 else ""),
            f"selection privacy: {self.statement}",
        ]


def summary_value(tables: Mapping[str, pd.DataFrame], key: str, run: str) -> float:
    """The value of ``table.column`` in a run's one-row summary table."""
    table, column = key.split(".")
    frame = tables.get(table)
    if frame is None or column not in frame.columns or len(frame) != 1:
        raise SweepError(
            f"run {run}: has no one-row table {table} with column {column} to select by"
        )
    value = float(frame[column].iloc[0])
    if math.isnan(value):
        hint = " (set learning.dataset.validation_fraction)" if "validation" in column else ""
        raise SweepError(f"run {run}: {key} is NaN{hint}; nothing to select by")
    return value


def worst_observer_epsilon(tables: Mapping[str, pd.DataFrame]) -> float:
    """A run's worst per-observer ε (``privacy_summary.network_epsilon``; NaN without one)."""
    frame = tables.get("privacy_summary")
    if frame is None or "network_epsilon" not in frame.columns or frame.empty:
        return math.nan
    return float(frame["network_epsilon"].max())


def unequal_spend(runs: pd.DataFrame, chosen: int) -> str:
    """A clause for a statement when the grid's runs do not spend alike per observer (a
    learning rate past the contraction that amplification by iteration needs counts every
    contribution whole, so a grid over it changes the per-observer ε at a fixed noise); empty
    when they do, or when the runs state no per-observer ε."""
    if "observer_epsilon" not in runs.columns:
        return ""
    values = runs["observer_epsilon"].to_numpy(dtype=np.float64)
    if not np.isfinite(values).any():
        return ""
    low, high = float(np.nanmin(values)), float(np.nanmax(values))
    if high <= low * (1 + 1e-9):
        return ""
    mine = float(np.nanmax(runs.loc[runs["point"] == chosen, "observer_epsilon"]))
    return (
        f"; the points do not spend alike: the runs' worst per-observer ε ranges from "
        f"{low:.3g} to {high:.3g} (the chosen point's: {mine:.3g}), so compare each point's "
        "privacy_summary, not only its accuracy"
    )


def _best(values: Sequence[float], goal: str) -> int:
    """The index of the best value (the first of equals)."""
    array = np.asarray(values, dtype=np.float64)
    return int(np.argmax(array) if goal == "max" else np.argmin(array))


def select_unaccounted(
    spec: SelectSpec, runs: pd.DataFrame, parameters: Mapping[int, dict[str, Any]]
) -> Selection:
    """The point with the best mean metric over its repetitions (``runs``: one row per run
    with ``point``, ``run_id``, ``metric``, ``report``)."""
    by_point = runs.groupby("point", sort=True)
    means = by_point["metric"].mean()
    chosen = int(means.index[_best(means.tolist(), spec.goal)])
    rows = runs[runs["point"] == chosen]
    reports = [float(v) for v in rows["report"]]
    statement = (
        f"unaccounted: chosen among {len(means)} grid points ({len(runs)} runs) by "
        f"{spec.metric}; each run's own (ε, δ) holds for its model alone, and the choice, "
        "which read the validation rows and every run's private training, is not counted "
        "(tuning on private data can leak it: Papernot & Steinke 2022, §3)"
    ) + unequal_spend(runs, chosen)
    return Selection(
        spec.metric, spec.goal, spec.report, spec.privacy, chosen, parameters[chosen],
        [str(r) for r in rows["run_id"]], float(means.loc[chosen]), reports,
        float(np.mean(reports)), len(means), len(runs), statement,
    )  # fmt: skip


def worst_record_inverse_square(ledger: pd.DataFrame, run: str) -> float:
    """Σ 1/z² over the Gaussian releases of the record that has the largest (z = noise scale /
    sensitivity per release): the worst record's RDP curve is α/2 times it (Mironov 2017,
    Prop. 1 and 7). Runs whose ledger holds a release of another kind are refused."""
    # every Gaussian release is named gaussian_<how its σ was set>; its loss depends on z alone
    other = ledger[~ledger["mechanism"].str.startswith("gaussian")]
    if len(other):
        raise SweepError(
            f"run {run}: random_trials accounts Gaussian releases only; its ledger has "
            f"{other['mechanism'].iloc[0]!r} releases"
        )
    if not len(ledger):
        return 0.0
    inverse = (ledger["sensitivity"] / ledger["noise_scale"]) ** 2
    return float(inverse.groupby(ledger["record"]).sum().max())


def repeat_and_select_epsilon(event: Any, mean: float, shape: float, delta: float) -> float:
    """ε at ``delta`` of releasing the best of K ~ D_{shape} runs of ``event`` (dp-accounting's
    ``RepeatAndSelectDpEvent``: Papernot & Steinke 2022, Thm. 2, under RDP)."""
    import dp_accounting

    from netsim.privacy.composition import rdp_accountant

    accountant = rdp_accountant()
    accountant.compose(dp_accounting.dp_event.RepeatAndSelectDpEvent(event, mean, shape))
    return float(accountant.get_epsilon(delta))


def random_trials_privacy(
    spec: SelectSpec, inverse_square: float, delta: float
) -> tuple[float, float, float]:
    """(ε of the selection for a training record, for a validation record, the worse) at δ."""
    import dp_accounting

    assert spec.mean_trials is not None and spec.shape is not None
    assert spec.validation_epsilon is not None
    training = (
        dp_accounting.GaussianDpEvent(1.0 / math.sqrt(inverse_square))
        if inverse_square > 0
        else dp_accounting.NoOpDpEvent()
    )
    score = dp_accounting.LaplaceDpEvent(1.0 / spec.validation_epsilon)
    train_eps = repeat_and_select_epsilon(training, spec.mean_trials, spec.shape, delta)
    score_eps = repeat_and_select_epsilon(score, spec.mean_trials, spec.shape, delta)
    return train_eps, score_eps, max(train_eps, score_eps)


def select_random_trials(
    spec: SelectSpec,
    runs: pd.DataFrame,
    parameters: Mapping[int, dict[str, Any]],
    *,
    points: int,
    base_seed: int,
    validation_rows: int,
    inverse_square: float,
    delta: float,
) -> Selection:
    """The trial with the best noisy score (validation metric + Laplace(1/(n_val·ε_val)),
    drawn from the selection's stream after the trials), and the selection's (ε, δ)."""
    assert spec.validation_epsilon is not None
    drawn, rng = trial_stream(spec, points, base_seed)  # the noise follows the trials' draws
    if drawn != runs["point"].tolist():
        raise SweepError(
            f"the sweep's runs (points {runs['point'].tolist()}) are not the trials its seed "
            f"draws ({drawn}): was the sweep file changed after it ran?"
        )
    scale = 1.0 / (validation_rows * spec.validation_epsilon)
    noisy = runs["metric"].to_numpy() + rng.laplace(0.0, scale, size=len(runs))
    best = _best(noisy.tolist(), spec.goal)
    row = runs.iloc[best]
    train_eps, score_eps, epsilon = random_trials_privacy(spec, inverse_square, delta)
    statement = (
        f"(ε, δ) = ({epsilon:.4g}, {delta:g}) for every record, counted: {len(runs)} trials "
        f"(K drawn from the truncated negative binomial, shape {spec.shape:g}, mean "
        f"{spec.mean_trials:g}) of random grid points, the best by {spec.metric} + Laplace noise"
        f" of scale {scale:.3g} released (Papernot & Steinke 2022, Thm. 2, RDP; training "
        f"records ε = {train_eps:.4g}, validation records ε = {score_eps:.4g} with ε_val = "
        f"{spec.validation_epsilon:g} per trial)"
    )
    trials = [
        {"run_id": str(r.run_id), "point": int(r.point), "metric": float(r.metric),
         "noisy_score": float(s), "report": float(r.report)}
        for r, s in zip(runs.itertuples(), noisy, strict=True)
    ]  # fmt: skip
    point = int(row["point"])
    return Selection(
        spec.metric, spec.goal, spec.report, spec.privacy, point, parameters[point],
        [str(row["run_id"])], float(row["metric"]), [float(row["report"])],
        float(row["report"]), len(runs), len(runs), statement, epsilon, delta, trials,
    )  # fmt: skip


def write_selection(directory: Path, selection: Selection) -> Path:
    """``selection.json`` in the sweep directory, written atomically."""
    from netsim.storage import atomic_write_text

    path = Path(directory) / SELECTION_FILE
    text = json.dumps(asdict(selection), indent=2, sort_keys=False, default=str)
    atomic_write_text(path, text + "\n")
    return path


def select_sweep(
    plan: Any, directory: Path, load_tables: Callable[[Path], Mapping[str, pd.DataFrame]]
) -> Selection:
    """Choose among the runs of ``plan`` (a :class:`~netsim.sweep.spec.SweepPlan` with a
    ``select`` key) in its sweep ``directory``; every run must be complete. ``load_tables``
    reads a verified run directory's tables (:func:`netsim.analysis.load_run`, which the
    caller passes: the sweep layer does not read runs itself)."""
    from netsim.errors import NetsimError
    from netsim.storage import SWEEP_RUNS

    spec: SelectSpec = plan.spec.select
    rows, parameters, inverse_square = [], {}, 0.0
    for run in plan.runs:
        path = Path(directory) / SWEEP_RUNS / run.run_id
        try:
            tables = load_tables(path)
        except (NetsimError, OSError) as exc:
            raise SweepError(
                f"run {run.run_id} cannot be read ({exc}); a selection needs every run: run "
                "the sweep again to finish it"
            ) from None
        rows.append({
            "point": run.point, "run_id": run.run_id,
            "metric": summary_value(tables, spec.metric, run.run_id),
            "report": summary_value(tables, spec.report, run.run_id),
            "observer_epsilon": worst_observer_epsilon(tables),
        })  # fmt: skip
        parameters[run.point] = dict(run.parameters)
        if spec.privacy == "random_trials":
            ledger = tables.get("privacy_ledger")
            if ledger is None:
                raise SweepError(
                    f"run {run.run_id} has no privacy_ledger table; random_trials composes each "
                    "trial's releases from it (set metrics.privacy_ledger: charges)"
                )
            inverse_square = max(inverse_square, worst_record_inverse_square(ledger, run.run_id))
    runs = pd.DataFrame(rows)
    if spec.privacy == "unaccounted":
        return select_unaccounted(spec, runs, parameters)
    learning = plan.base.learning
    return select_random_trials(
        spec, runs, parameters, points=plan.spec.points, base_seed=int(plan.base.seed),
        validation_rows=validation_rows_of(plan.base), inverse_square=inverse_square,
        delta=float(learning.delta),
    )  # fmt: skip


def validation_rows_of(scenario: Any) -> int:
    """How many validation rows the learning section's data set has (> 0, or an error)."""
    from netsim.learning.sgd_agent import learning_data

    if scenario.learning is None:
        raise SweepError("random_trials selects learning runs: the scenario has no learning")
    rows = learning_data(scenario.learning, scenario.nodes).n_validation
    if rows < 1:
        raise SweepError(
            "random_trials scores each trial on the validation rows: set "
            "learning.dataset.validation_fraction"
        )
    return rows
