"""One tidy long table from a sweep or from run directories, and statistics over repetitions.

:func:`collect` reads every complete run of a sweep directory (written by ``netsim sweep``),
a run directory, a folder of run directories or a list of them, and turns the metric tables
of each run (the tables its manifest declares as samples, rounds or summaries) into one
long table with **one row per run × metric sample**:

``run_id, run, point, repetition, seed, <one column per parameter>, table, metric,
time, round, series, value``

``time`` is in seconds and ``round`` a round number (both NaN when the table has none),
``series`` names a sub-series within a run (the walk id of ``accuracy``; "" otherwise) and
``value`` is the sample as a float (booleans as 0/1). The parameter columns are named by the
dotted scenario keys a sweep varied, or that runs were given with ``--set``, and hold each
run's resolved value. Failed runs and runs not (yet) complete are left out;
:func:`collect_status` lists every planned run with its status. A *damaged* run (a table
deleted, replaced, corrupted, or a manifest that disagrees with its tables: see
:func:`netsim.storage.check_run`) is never read: :func:`collect` refuses the whole set, naming
each damaged run and what is wrong with it. :func:`summarize` gives mean,
standard deviation and a Student t confidence interval of the mean over the repetitions of
each point.

A sweep directory holds ``sweep.json``, ``plan.parquet`` (one row per planned run),
``runs/<run id>/`` (run directories) and ``failures/<run id>.json``. Runs that are not a
sweep's are read as one: runs whose resolved scenarios differ only in the seed are the
repetitions of one point (:func:`load_sweep`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import yaml

from netsim import files
from netsim.analysis.runs import load_manifest, scenario_checked
from netsim.errors import RunDirectoryError
from netsim.lazy import lazy_module
from netsim.scenario.loader import dotted_value, parameter_value
from netsim.scenario.yamlfile import load_yaml
from netsim.storage import (
    MANIFEST,
    SCENARIO,
    SWEEP_FAILURES,
    SWEEP_MANIFEST,
    SWEEP_PLAN,
    SWEEP_RESULTS,
    SWEEP_RUNS,
    SWEEP_SUMMARY,
    UNVERIFIED_REASON,
    RunCheck,
    atomic_write_parquet,
    check_run,
    complete_manifest,
    is_complete_run,
    manifest_problem,
    name_foreign_files,
    read_record,
    read_table,
)

if TYPE_CHECKING:
    import pandas as pd
    import scipy.stats as stats
else:
    pd = lazy_module("pandas")
    stats = lazy_module("scipy.stats")

#: Columns of the plan (and of the long table) that identify a run; the parameters follow.
RUN_COLUMNS: tuple[str, ...] = ("run_id", "run", "point", "repetition", "seed")
#: Columns of the long table after the parameters.
SAMPLE_COLUMNS: tuple[str, ...] = ("table", "metric", "time", "round", "series", "value")
#: Columns of :func:`summarize` after the group keys.
STATISTIC_COLUMNS: tuple[str, ...] = ("n", "mean", "std", "ci_low", "ci_high")
STATUSES: tuple[str, ...] = ("complete", "damaged", "failed", "missing")

_PLAN_REQUIRED: tuple[str, ...] = ("run", "point", "repetition", "seed", "run_id")
_SWEEP_EXPECTED = (
    "a sweep directory (sweep.json and plan.parquet, as written by 'netsim sweep'), a "
    "complete run directory (manifest.json with status 'complete') or a folder of them"
)


# --- which tables are metric samples ----------------------------------------------------------


def privacy_summary(records: pd.DataFrame) -> pd.DataFrame:
    """One row summarising the per-record privacy ledger (``privacy_records``): the largest
    and mean ε spent by a record, the largest δ, the mean number of uses and all refusals."""
    return pd.DataFrame(
        {
            "epsilon_spent_max": [float(records["epsilon_spent"].max())],
            "epsilon_spent_mean": [float(records["epsilon_spent"].mean())],
            "delta_spent_max": [float(records["delta_spent"].max())],
            "uses_mean": [float(records["uses"].mean())],
            "refused_total": [float(records["refused"].sum())],
        }
    )


def walk_samples_without_sentinels(samples: pd.DataFrame) -> pd.DataFrame:
    """``walk_samples`` with ``oldest_steps`` NaN when no walk propagates (the table writes -1
    there, which is also a real step count: restarted walks count up from negative values)."""
    none = samples["oldest_walk"].to_numpy() < 0
    steps = samples["oldest_steps"].astype(float).mask(none)
    return samples.assign(oldest_steps=steps)


@dataclass(frozen=True)
class MetricTable:
    """How one event table becomes metric samples.

    ``time``, ``round`` and ``series`` name the table's index columns (None: it has none);
    ``metrics`` the columns that are samples, or None for every numeric or boolean column
    that is not an index column. ``prepare`` transforms the table read from the run (its
    table ``source``, default ``name``) before the samples are taken: a derived summary, or
    sentinel values made NaN.
    """

    name: str
    time: str | None = None
    round: str | None = None
    series: str | None = None
    metrics: tuple[str, ...] | None = None
    source: str | None = None
    prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None

    @property
    def file_table(self) -> str:
        """The run's table this one is read from."""
        return self.source or self.name

    @property
    def index_columns(self) -> tuple[str, ...]:
        return tuple(c for c in (self.time, self.round, self.series) if c is not None)

    @property
    def one_row(self) -> bool:
        """A summary table: one row per run, no time, round or series."""
        return not self.index_columns


#: How the tables of a run written before manifests recorded table schemas are read.
METRIC_TABLES: tuple[MetricTable, ...] = (
    MetricTable("samples", time="time"),
    # oldest_walk is a walk id (-1: none), not a quantity to average
    MetricTable(
        "walk_samples",
        time="time",
        metrics=("propagating", "suspended", "oldest_steps"),
        prepare=walk_samples_without_sentinels,
    ),
    MetricTable("accuracy", time="time", series="walk"),
    MetricTable("dola_rounds", time="time", round="round"),
    MetricTable("dola_regret", round="round"),
    MetricTable("mi_ogd_regret", round="round"),
    MetricTable("walk_summary"),
    MetricTable("learning_summary"),
    MetricTable("dola_summary"),
    MetricTable("mi_ogd_summary"),
    MetricTable(
        "privacy",
        metrics=(
            "epsilon_spent_max",
            "epsilon_spent_mean",
            "delta_spent_max",
            "uses_mean",
            "refused_total",
        ),
        source="privacy_records",
        prepare=privacy_summary,
    ),
)
METRIC_TABLES_BY_NAME: dict[str, MetricTable] = {t.name: t for t in METRIC_TABLES}

#: What a table needs before its samples are taken, by name (its sentinels made NaN).
PREPARATIONS: dict[str, Callable[[pd.DataFrame], pd.DataFrame]] = {
    "walk_samples": walk_samples_without_sentinels,
}
#: Roles of tables whose rows are metric samples (events, ledgers and static tables are not).
METRIC_ROLES = ("samples", "rounds", "summary")


def metric_tables(schemas: dict[str, Any] | None) -> tuple[MetricTable, ...]:
    """How each table of a run becomes samples, from the table schemas its manifest records
    (role, time, round and series columns, metrics); a run written before manifests held
    schemas is read with the built-in :data:`METRIC_TABLES`. The tables of every
    component reach the long table this way, a user's component's included; the walk's
    samples and the privacy ledger keep their preparation (sentinels; a derived summary)."""
    if schemas is None:
        return METRIC_TABLES
    specs = [
        MetricTable(
            name,
            time=schema.get("time"),
            round=schema.get("round"),
            series=schema.get("series"),
            metrics=tuple(schema["metrics"]) if schema.get("metrics") is not None else None,
            prepare=PREPARATIONS.get(name),
        )
        for name, schema in schemas.items()
        if schema.get("role") in METRIC_ROLES
    ]
    if "privacy_records" in schemas:
        specs.append(METRIC_TABLES_BY_NAME["privacy"])
    return tuple(specs)


# --- the sweep (or single run) being read ------------------------------------------------------


@dataclass(frozen=True)
class SweepSource:
    """A sweep directory, or run directories read as a sweep (see :func:`load_sweep`).

    ``plan`` has one row per planned run: :data:`RUN_COLUMNS` then the ``parameters``.
    ``directories`` maps the run ids of runs read from their own directories (not a sweep's)
    to those directories; ``path`` is then the folder results and reports go to (None for a
    list of runs, which has none).
    """

    path: Path | None
    name: str
    scenario: str
    parameters: tuple[str, ...]
    plan: pd.DataFrame
    single_run: bool
    directories: Mapping[str, Path] | None = None

    def run_directory(self, run_id: str) -> Path:
        """Where the run directory of ``run_id`` is (or would be)."""
        if self.directories is not None:
            return self.directories[run_id]
        assert self.path is not None  # a sweep has its directory
        return self.path / SWEEP_RUNS / run_id

    def failure_file(self, run_id: str) -> Path:
        """Where the failure record of ``run_id`` is (or would be)."""
        assert self.path is not None  # a sweep has its directory
        return self.path / SWEEP_FAILURES / f"{run_id}.json"


def _not_a_sweep(path: Path, why: str) -> RunDirectoryError:
    return RunDirectoryError(f"{path}: {why}; expected {_SWEEP_EXPECTED}")


def load_sweep(path: Path | Sequence[Path]) -> SweepSource:
    """Read the description and plan of what ``path`` is: a sweep directory, a run directory,
    a folder of run directories, or a list of any of these (the complete runs of each,
    :func:`complete_run_directories`, read together).

    Runs that are not a sweep's are grouped into points by their resolved scenario without
    its seed: runs of one configuration with different seeds are repetitions of one point.
    Their parameters are the keys their manifests record (``--set`` overrides, a sweep
    point's keys); a run not given one of them has its resolved scenario's value there.
    """
    if not isinstance(path, str | Path):
        runs = [run for p in path for run in complete_run_directories(Path(p))]
        return _load_runs(runs, folder=None)
    path = Path(path)
    has_sweep, has_plan = (path / SWEEP_MANIFEST).is_file(), (path / SWEEP_PLAN).is_file()
    if has_sweep or has_plan:
        if not (has_sweep and has_plan):
            missing = SWEEP_PLAN if has_sweep else SWEEP_MANIFEST
            raise _not_a_sweep(path, f"{missing} is missing")
        return _load_sweep_directory(path)
    if is_complete_run(path):
        return _load_runs([path], folder=path)
    if not path.exists():
        why = "does not exist"
    elif not path.is_dir():
        why = "is a file, not a directory"
    elif (path / MANIFEST).exists():  # a run directory whose manifest cannot be taken
        why = f"not a complete run directory ({manifest_problem(path)})"
    else:
        runs = folder_runs(path)
        if runs:
            return _load_runs(runs, folder=path)
        why = (
            "has no sweep.json, plan.parquet or manifest.json with status 'complete', and no "
            "complete run directory in it"
        )
    raise _not_a_sweep(path, why)


def complete_run_directories(path: Path) -> list[Path]:
    """The complete run directories ``path`` stands for in a list of paths: itself if it is
    one; the complete runs of a sweep directory (its ``runs/``) or of a folder of runs
    (in name order). Raises :class:`RunDirectoryError` when it holds none."""
    path = Path(path)
    if is_complete_run(path):
        return [path]
    if (path / SWEEP_MANIFEST).is_file() and (path / SWEEP_PLAN).is_file():
        folder = path / SWEEP_RUNS
    else:
        folder = path
    runs = folder_runs(folder) if folder.is_dir() else []
    if not runs:
        raise _not_a_sweep(path, "holds no complete run directory")
    return runs


def folder_runs(folder: Path) -> list[Path]:
    """The complete run directories in ``folder``, in name order. A run directory is renamed
    into place once complete, so a folder in it with a ``manifest.json`` that is not a
    complete one (truncated, nested past the reader's limit, rewritten) was damaged since:
    every such run is named in one :class:`RunDirectoryError`, never left out of a table
    without a word. Hidden folders (a sweep's staging and progress) are not runs."""
    runs, damaged = [], []
    for directory in sorted(folder.iterdir()):
        if directory.name.startswith(".") or not directory.is_dir():
            continue
        if is_complete_run(directory):
            runs.append(directory)
        elif (directory / MANIFEST).exists():
            damaged.append(directory)
    if damaged:
        lines = "\n".join(f"  - run {d.name} ({d}): {manifest_problem(d)}" for d in damaged)
        raise RunDirectoryError(
            f"{folder}: {len(damaged)} of {len(runs) + len(damaged)} runs are damaged and were "
            f"not read:\n{lines}\n'netsim verify {folder}' checks every run; run them again, "
            "or remove them"
        )
    return runs


def run_name(manifest: Mapping[str, Any]) -> str:
    """The name a run goes by: the one ``netsim run --name`` gave it, else its scenario's
    ``name`` (its run id is then ``<name>-seed<seed>-<hash>``)."""
    scenario = str(manifest.get("scenario_name", ""))
    run_id = str(manifest.get("run_id", scenario))
    default = f"{scenario}-seed{manifest.get('seed')}-{str(manifest.get('scenario_hash', ''))[:10]}"
    return scenario if run_id == default or not run_id else run_id


def _load_sweep_directory(path: Path) -> SweepSource:
    try:
        sweep = read_record(path / SWEEP_MANIFEST)
        plan = read_table(path / SWEEP_PLAN).to_pandas()
    except (OSError, ValueError, pa.ArrowException, RunDirectoryError) as exc:
        raise _not_a_sweep(path, f"sweep.json or plan.parquet is unreadable ({exc})") from None
    if not isinstance(sweep, dict) or not isinstance(sweep.get("parameters", []), list):
        raise _not_a_sweep(path, "sweep.json is not an object with a 'parameters' list")
    parameters = tuple(str(p) for p in sweep.get("parameters", []))
    missing = [c for c in (*_PLAN_REQUIRED, *parameters) if c not in plan.columns]
    if missing:
        raise _not_a_sweep(path, f"plan.parquet lacks the column(s) {', '.join(missing)}")
    clashing = [p for p in parameters if p in RUN_COLUMNS or p in SAMPLE_COLUMNS]
    if clashing:
        raise _not_a_sweep(path, f"parameter name(s) {', '.join(clashing)} clash with columns")
    if plan["run"].duplicated().any() or plan["run_id"].duplicated().any():
        raise _not_a_sweep(path, "plan.parquet lists a run number or run id twice")
    plan = plan[list(RUN_COLUMNS) + list(parameters)].sort_values("run", kind="stable")
    return SweepSource(
        path=path,
        name=str(sweep.get("name", path.name)),
        scenario=str(sweep.get("scenario", "")),
        parameters=parameters,
        plan=plan.reset_index(drop=True),
        single_run=False,
    )


def run_configuration(run_dir: Path) -> dict[str, Any]:
    """The resolved scenario of a run without its seed, as plain data."""
    file = run_dir / SCENARIO
    try:
        data = load_yaml(
            files.read_text(
                file, what="run's scenario", limit=files.MAX_RECORD_BYTES, error=RunDirectoryError
            )
        )
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise RunDirectoryError(f"{file}: cannot read the run's scenario ({exc})") from None
    if not isinstance(data, dict):
        raise RunDirectoryError(f"{file}: the run's scenario is not a mapping")
    data.pop("seed", None)
    return data


def _one_column_type(values: list[Any]) -> list[Any]:
    """A parameter column's values, as text if runs recorded different types for it (one
    Parquet column has one type)."""
    kinds = {type(v) for v in values if v is not None}
    if len(kinds) <= 1 or kinds <= {int, float}:
        return values
    return [None if v is None else str(v) for v in values]


#: A list of runs with more names than this is named by how many runs it has.
MAX_NAMES_IN_TITLE = 4


def _list_name(manifests: Sequence[Mapping[str, Any]]) -> str:
    """The name of a list of runs: their names, "a vs b" (:func:`run_name`), or "N runs"
    when there are more than :data:`MAX_NAMES_IN_TITLE`."""
    names = list(dict.fromkeys(run_name(m) for m in manifests))
    if len(names) > MAX_NAMES_IN_TITLE:
        return f"{len(manifests)} runs"
    return " vs ".join(names)


def _recorded_run_id(run_dir: Path, manifest: Mapping[str, Any]) -> str:
    """The run id a manifest records, else the directory's name (a run directory is named
    by its id): a manifest stripped to ``{"status": "complete"}`` is damaged, and it is
    named as such by the check that follows (:func:`refuse_damaged`), not a ``KeyError``."""
    recorded = manifest.get("run_id")
    return str(recorded) if isinstance(recorded, str) and recorded else run_dir.name


def _recorded_seed(manifest: Mapping[str, Any]) -> int:
    """The seed a manifest records (-1 when it records none: a damaged run, refused later)."""
    seed = manifest.get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else -1


def _load_runs(run_dirs: list[Path], *, folder: Path | None) -> SweepSource:
    """Complete run directories read as a sweep: one point per configuration (the resolved
    scenario without its seed), the repetitions numbered in the order given."""
    if not run_dirs:
        raise RunDirectoryError("no run directories given; expected " + _SWEEP_EXPECTED)
    manifests = [load_manifest(d) for d in run_dirs]
    directories: dict[str, Path] = {}
    for run_dir, manifest in zip(run_dirs, manifests, strict=True):
        run_id = _recorded_run_id(run_dir, manifest)
        if run_id in directories:
            raise RunDirectoryError(
                f"{run_dir}: run {run_id} is also {directories[run_id]}; give each run once"
            )
        directories[run_id] = run_dir
    parameters: dict[str, None] = {}
    for manifest in manifests:
        parameters.update(dict.fromkeys(sorted(manifest.get("parameters") or {})))
    clashing = [p for p in parameters if p in RUN_COLUMNS or p in SAMPLE_COLUMNS]
    if clashing:
        raise RunDirectoryError(
            f"{run_dirs[0]}: parameter name(s) {', '.join(clashing)} clash with columns"
        )
    points: dict[str, int] = {}
    repetitions: dict[int, int] = {}
    rows: dict[str, list[Any]] = {c: [] for c in (*RUN_COLUMNS, *parameters)}
    for run, (run_dir, manifest) in enumerate(zip(run_dirs, manifests, strict=True)):
        configuration = run_configuration(run_dir)
        canonical = json.dumps(configuration, sort_keys=True, default=str)
        point = points.setdefault(canonical, len(points))
        recorded = manifest.get("parameters") or {}
        rows["run_id"].append(_recorded_run_id(run_dir, manifest))
        rows["run"].append(run)
        rows["point"].append(point)
        rows["repetition"].append(repetitions.get(point, 0))
        rows["seed"].append(_recorded_seed(manifest))
        repetitions[point] = repetitions.get(point, 0) + 1
        for key in parameters:  # a key the run was not given: its scenario's value
            rows[key].append(
                recorded[key]
                if key in recorded
                else parameter_value(dotted_value(configuration, key))
            )
    plan = pd.DataFrame({key: _one_column_type(values) for key, values in rows.items()})
    plan = plan.astype(
        {"run_id": "str", "run": "int64", "point": "int64", "repetition": "int64", "seed": "int64"}
    )
    single = len(run_dirs) == 1 and folder == run_dirs[0]
    if single:
        name = str(manifests[0].get("scenario_name", run_dirs[0].name))
    else:
        name = folder.name if folder is not None else _list_name(manifests)
    return SweepSource(
        path=folder,
        name=name,
        scenario=str(run_dirs[0]) if single else "",
        parameters=tuple(parameters),
        plan=plan,
        single_run=single,
        directories=directories,
    )


# --- status -----------------------------------------------------------------------------------


def _failure_error(file: Path) -> str:
    """The error message of a failure record (a placeholder if it cannot be read)."""
    try:
        record = read_record(file)
    except (OSError, ValueError, RunDirectoryError):
        return "(failure record unreadable)"
    return str(record.get("error", "")) if isinstance(record, dict) else ""


def check_runs(source: SweepSource) -> dict[str, RunCheck]:
    """:func:`~netsim.storage.check_run` of every planned run whose directory holds a complete
    manifest, by run id; a damaged file that is another of these runs' is named as that run's."""
    manifests = {}
    for run_id in source.plan["run_id"]:
        directory = source.run_directory(str(run_id))
        manifest = complete_manifest(directory)
        if manifest is not None:
            manifests[directory] = manifest
    checks = [
        scenario_checked(check_run(directory, manifest), manifest)
        for directory, manifest in manifests.items()
    ]
    by_directory = {c.directory: c for c in name_foreign_files(checks, manifests)}
    return {
        str(run_id): by_directory[source.run_directory(str(run_id))]
        for run_id in source.plan["run_id"]
        if source.run_directory(str(run_id)) in by_directory
    }


def run_status(source: SweepSource, checks: Mapping[str, RunCheck] | None = None) -> pd.DataFrame:
    """:func:`collect_status` of an already loaded sweep (``checks``: its
    :func:`check_runs`, computed unless given)."""
    if checks is None:
        checks = check_runs(source)
    rows = []
    for run, point, repetition, run_id in source.plan[
        ["run", "point", "repetition", "run_id"]
    ].itertuples(index=False):
        failure = source.failure_file(run_id) if source.directories is None else None
        check = checks.get(str(run_id))
        failed = failure is not None and failure.is_file()
        # a complete run directory wins over an old failure record: the run was retried; a
        # failure record wins over a damaged directory: redoing the damaged run failed
        if check is not None and check.state != "damaged":
            status, error = "complete", ""
        elif failed:
            status, error = "failed", _failure_error(failure)
        elif check is not None:
            status, error = "damaged", "; ".join(check.reasons)
        elif source.run_directory(str(run_id)).is_dir():
            # a run directory is renamed into place once complete: one whose manifest is not
            # a complete one (truncated, nested too deep, rewritten) was damaged since
            status, error = "damaged", manifest_problem(source.run_directory(str(run_id)))
        else:
            status, error = "missing", ""
        rows.append((run, point, repetition, run_id, status, error))
    frame = pd.DataFrame(rows, columns=["run", "point", "repetition", "run_id", "status", "error"])
    return frame.astype({"run": "int64", "point": "int64", "repetition": "int64", "run_id": "str"})


def refuse_damaged(
    source: SweepSource,
    status: pd.DataFrame,
    checks: Mapping[str, RunCheck] | None = None,
    *,
    allow_unverified: bool = False,
) -> None:
    """Raise :class:`RunDirectoryError` naming every damaged run of ``status`` and what is
    wrong with it, and how to go on: a damaged run is never read as if it were complete. So is
    every unverified run (``checks``, the :func:`check_runs` the status was made from: a
    manifest without checksums), unless ``allow_unverified``: without checksums an edited
    table cannot be told from the one the run wrote."""
    damaged = status[status["status"] == "damaged"]
    unverified = [] if allow_unverified or checks is None else [
        run_id
        for run_id in status.loc[status["status"] == "complete", "run_id"]
        if checks[str(run_id)].state == "unverified"
    ]  # fmt: skip
    if damaged.empty and not unverified:
        return
    where = source.path if source.path is not None else "these runs"
    if source.directories is None:
        redo = (
            f"run the sweep again ('netsim sweep {source.scenario}' redoes damaged and "
            "unverified runs)"
        )
    else:
        redo = "run them again, or remove them"
    parts = []
    if not damaged.empty:
        lines = [
            f"  - run {row.run_id} ({source.run_directory(row.run_id)}): {row.error}"
            for row in damaged.itertuples(index=False)
        ]
        parts.append(
            f"{where}: {len(damaged)} of {len(status)} runs are damaged and were not read:\n"
            + "\n".join(lines)
        )
    if unverified:
        lines = [
            f"  - run {run_id} ({source.run_directory(run_id)}): {UNVERIFIED_REASON}"
            for run_id in unverified
        ]
        parts.append(
            f"{where}: {len(unverified)} of {len(status)} runs are unverified and were not "
            "read:\n" + "\n".join(lines)
        )
        redo += (
            "; to read unverified runs anyway, pass --allow-unverified (allow_unverified=True "
            "in Python)"
        )
    raise RunDirectoryError(
        "\n".join(parts) + f"\n'netsim verify {where}' checks every run; {redo}"
    )


def collect_status(path: Path) -> pd.DataFrame:
    """One row per planned run: ``run, point, repetition, run_id, status, error``.

    ``status`` is "complete" (its run directory is complete), "failed" (a failure record
    exists and the run directory is not complete; ``error`` is the recorded message) or
    "missing" (neither: not run yet, or interrupted). ``error`` is "" unless failed.
    """
    return run_status(load_sweep(path))


# --- the long table ---------------------------------------------------------------------------


def _value_columns(frame: pd.DataFrame, spec: MetricTable) -> list[str]:
    """The columns of ``frame`` that are samples: the declared ones that exist, else every
    numeric or boolean non-index column (text columns are not metrics)."""
    candidates = spec.metrics if spec.metrics is not None else tuple(frame.columns)
    return [
        column
        for column in candidates
        if column in frame.columns
        and column not in spec.index_columns
        and (
            pd.api.types.is_bool_dtype(frame[column])
            or pd.api.types.is_numeric_dtype(frame[column])
        )
    ]


def _index_values(frame: pd.DataFrame, column: str | None, file: Path) -> np.ndarray:
    if column is None:
        return np.full(len(frame), np.nan)
    if column not in frame.columns:
        raise RunDirectoryError(f"{file}: column {column!r} is missing")
    return frame[column].to_numpy(dtype=float)


def table_samples(frame: pd.DataFrame, spec: MetricTable, run: int, file: Path) -> pd.DataFrame:
    """The rows of one run's table as long samples (metric-major, table order within)."""
    if spec.prepare is not None:
        frame = spec.prepare(frame)
    metrics = _value_columns(frame, spec)
    rows = len(frame)
    if spec.series is None:
        series = np.full(rows, "", dtype=object)
    elif spec.series in frame.columns:
        series = frame[spec.series].astype(str).to_numpy(dtype=object)
    else:
        raise RunDirectoryError(f"{file}: column {spec.series!r} is missing")
    values = frame[metrics].astype(float).to_numpy().T.ravel() if metrics else np.empty(0)
    count = len(metrics)
    return pd.DataFrame(
        {
            "run": np.full(rows * count, run, dtype=np.int64),
            "table": np.full(rows * count, spec.name, dtype=object),
            "metric": np.repeat(np.array(metrics, dtype=object), rows),
            "time": np.tile(_index_values(frame, spec.time, file), count),
            "round": np.tile(_index_values(frame, spec.round, file), count),
            "series": np.tile(series, count),
            "value": values,
        }
    )


def _run_samples(run_dir: Path, run: int) -> list[pd.DataFrame]:
    """Long samples of every metric table one complete run has."""
    manifest = load_manifest(run_dir)
    tables = manifest.get("tables", {})
    pieces = []
    for spec in metric_tables(manifest.get("schemas")):
        if spec.file_table not in tables:
            continue
        file = run_dir / f"{spec.file_table}.parquet"
        try:
            frame = read_table(file).to_pandas()
        except (OSError, pa.ArrowException) as exc:
            raise RunDirectoryError(f"{file}: cannot read the table ({exc})") from None
        if frame.empty:
            continue  # no samples (and no derived summary of nothing)
        pieces.append(table_samples(frame, spec, run, file))
    return pieces


def _empty_samples() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run": pd.Series(dtype="int64"),
            "table": pd.Series(dtype="str"),
            "metric": pd.Series(dtype="str"),
            "time": pd.Series(dtype="float64"),
            "round": pd.Series(dtype="float64"),
            "series": pd.Series(dtype="str"),
            "value": pd.Series(dtype="float64"),
        }
    )


def long_table(source: SweepSource, status: pd.DataFrame) -> pd.DataFrame:
    """The long table of the complete runs of ``source`` (see the module docstring)."""
    complete = status.loc[status["status"] == "complete", ["run", "run_id"]]
    pieces = [_empty_samples()]
    for run, run_id in complete.itertuples(index=False):
        pieces.extend(_run_samples(source.run_directory(run_id), int(run)))
    samples = pd.concat(pieces, ignore_index=True)
    for column in ("table", "metric", "series"):
        samples[column] = samples[column].astype("str")
    # pandas sorts on several keys with a stable lexsort: equal keys keep their table order
    samples = samples.sort_values(
        ["run", "table", "metric", "series", "round", "time"], na_position="last"
    )
    long = samples.merge(source.plan, on="run", how="left", validate="many_to_one")
    order = [*RUN_COLUMNS, *source.parameters, *SAMPLE_COLUMNS]
    return long[order].reset_index(drop=True)


def pair_distance_samples(source: SweepSource, status: pd.DataFrame) -> pd.DataFrame:
    """Privacy per observer against distance, of the complete runs that state it: per run
    and hop count between observer and record, the mean ε of the single observers' pairs at
    that distance (``privacy_pairs``: metric ``epsilon``, the hops in ``round``), and the
    run's local ε (``privacy_summary``: metric ``local_epsilon``, no ``round``), as rows of
    the long table (:func:`summarize` reads them). Unreachable pairs and coalitions are
    left out."""
    complete = status.loc[status["status"] == "complete", ["run", "run_id"]]
    pieces = [_empty_samples()]
    for run, run_id in complete.itertuples(index=False):
        directory = source.run_directory(run_id)
        if "privacy_pairs" not in load_manifest(directory).get("tables", {}):
            continue
        try:
            pairs = read_table(directory / "privacy_pairs.parquet").to_pandas()
            summary = read_table(directory / "privacy_summary.parquet").to_pandas()
        except (OSError, pa.ArrowException) as exc:
            raise RunDirectoryError(f"{directory}: cannot read the privacy pairs ({exc})") from None
        pairs = pairs[(pairs["observer"] >= 0) & (pairs["distance"] >= 0)]
        if pairs.empty or summary.empty:
            continue
        by_distance = pairs.groupby("distance", sort=True)["epsilon"].mean()
        hops = by_distance.index.to_numpy(dtype=float)
        pieces.append(pd.DataFrame({
            "run": np.full(hops.size + 1, run, dtype=np.int64),
            "table": "privacy_pairs",
            "metric": ["epsilon"] * hops.size + ["local_epsilon"],
            "time": np.nan,
            "round": np.append(hops, np.nan),
            "series": "",
            "value": np.append(by_distance.to_numpy(dtype=float),
                               float(summary["local_epsilon"].iloc[0])),
        }))  # fmt: skip
    samples = pd.concat(pieces, ignore_index=True)
    return samples.merge(source.plan, on="run", how="left", validate="many_to_one")


def bound_audit_shares(source: SweepSource, status: pd.DataFrame) -> pd.DataFrame:
    """Per complete run that has a ``bound_audit`` table and per published bound in it: the
    pairs it covers, how many of them it puts below the exact loss and that share, and the
    worst exact ε beside the worst bound ε (columns ``run``, ``run_id``, ``bound``,
    ``pairs``, ``below``, ``share``, ``exact_epsilon``, ``bound_epsilon``)."""
    complete = status.loc[status["status"] == "complete", ["run", "run_id"]]
    rows = []
    for run, run_id in complete.itertuples(index=False):
        directory = source.run_directory(run_id)
        if "bound_audit" not in load_manifest(directory).get("tables", {}):
            continue
        try:
            audit = read_table(directory / "bound_audit.parquet").to_pandas()
        except (OSError, pa.ArrowException) as exc:
            raise RunDirectoryError(f"{directory}: cannot read the bound audit ({exc})") from None
        for bound, part in audit.groupby("bound", sort=True):
            below = int(part["below"].sum())
            rows.append((int(run), str(run_id), str(bound), len(part), below,
                         below / len(part) if len(part) else float("nan"),
                         float(part["exact_epsilon"].max()),
                         float(part["bound_epsilon"].max())))  # fmt: skip
    columns = ["run", "run_id", "bound", "pairs", "below", "share", "exact_epsilon",
               "bound_epsilon"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def _write_parquet(frame: pd.DataFrame, file: Path) -> None:
    """Write ``frame`` to ``file`` atomically: never a partial file that looks complete."""
    try:
        atomic_write_parquet(file, pa.Table.from_pandas(frame, preserve_index=False))
    except OSError as exc:
        raise RunDirectoryError(f"{file}: cannot write ({exc.strerror or exc})") from None


def collect(
    path: Path | Sequence[Path], *, write: bool | None = None, allow_unverified: bool = False
) -> pd.DataFrame:
    """The long table (one row per run × metric sample) of ``path``: a sweep directory, a
    run directory, a folder of run directories or a list of run directories
    (:func:`load_sweep`). Each row carries its run's parameters.

    ``write`` (default: unless ``path`` is a list) also writes the table to
    ``<path>/results.parquet`` and its :func:`summarize` to ``<path>/summary.parquet`` (each
    atomically); a list of runs has no directory to write to. Raises
    :class:`RunDirectoryError` if ``path`` is none of these, or if a run is damaged, or
    unverified (its manifest records no checksums) and not ``allow_unverified``
    (:func:`refuse_damaged`).
    """
    source = load_sweep(path)
    if write is None:
        write = source.path is not None
    elif write and source.path is None:
        raise RunDirectoryError(
            "collect(write=True): a list of run directories has no directory to write "
            "results.parquet to; collect a folder of runs or write the table yourself"
        )
    checks = check_runs(source)
    status = run_status(source, checks)
    refuse_damaged(source, status, checks, allow_unverified=allow_unverified)
    long = long_table(source, status)
    if write:
        assert source.path is not None
        _write_parquet(long, source.path / SWEEP_RESULTS)
        _write_parquet(summarize(long), source.path / SWEEP_SUMMARY)
    return long


def read_results(path: Path) -> pd.DataFrame:
    """The long table a previous :func:`collect` wrote to ``<path>/results.parquet``."""
    file = Path(path) / SWEEP_RESULTS
    if not file.exists():
        raise RunDirectoryError(f"{file}: no collected results (run collect first)")
    return read_table(file).to_pandas()


# --- statistics over repetitions ---------------------------------------------------------------


def parameter_columns(long: pd.DataFrame) -> list[str]:
    """The parameter columns of a long table: every column that is not a run or sample
    column (they lie between ``seed`` and ``table`` in a collected table)."""
    known = set(RUN_COLUMNS) | set(SAMPLE_COLUMNS)
    return [c for c in long.columns if c not in known]


def summarize(long: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Statistics over repetitions of each sample of a long table (see :func:`collect`).

    Rows are grouped by ``point``, the parameter columns, ``table``, ``metric``, ``series``,
    ``round`` and ``time`` (NaN keys form groups of their own), so the repetitions of one
    grid point that sampled the same metric at the same time or round are pooled. For each
    group: ``n`` the number of non-NaN values, their ``mean``, their sample standard deviation
    ``std`` (ddof = 1; NaN when n = 1; 0 when all values are equal, infinities included) and
    the two-sided Student t ``confidence`` interval of the mean, ``ci_low``/``ci_high`` =
    mean ∓ t_{(1+confidence)/2, n−1} · std / √n (equal to the mean when n = 1, NaN when n = 0).
    Only samples taken at the same time stamps pool: resample unaligned series first.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence}: must be in (0, 1)")
    required = ("point", "table", "metric", "series", "round", "time", "value")
    missing = [c for c in required if c not in long.columns]
    if missing:
        raise ValueError(f"summarize needs the column(s) {', '.join(missing)}")
    keys = ["point", *parameter_columns(long), "table", "metric", "series", "round", "time"]
    grouped = long.groupby(keys, dropna=False, sort=True)["value"]
    frame = grouped.agg(["count", "mean", "std", "min", "max"]).reset_index()
    n = frame["count"].to_numpy(dtype=np.int64)
    mean = frame["mean"].to_numpy(dtype=float)
    std = frame["std"].to_numpy(dtype=float)
    # equal values have no spread even when they are infinite (inf − inf would give NaN)
    std = np.where((n > 1) & (frame["min"] == frame["max"]).to_numpy(), 0.0, std)
    with np.errstate(invalid="ignore", divide="ignore"):
        quantile = stats.t.ppf(0.5 + confidence / 2.0, np.maximum(n - 1, 1))
        half = np.where(n > 1, quantile * std / np.sqrt(np.maximum(n, 1)), 0.0)
        half = np.where(std == 0.0, 0.0, half)  # 0 · inf stays 0
    frame = frame.drop(columns=["count", "min", "max"])
    frame.insert(len(keys), "n", n)
    frame["std"] = std
    frame["ci_low"] = mean - half
    frame["ci_high"] = mean + half
    return frame[[*keys, *STATISTIC_COLUMNS]]


def half_width(summary: pd.DataFrame) -> pd.Series:
    """Half the width of each row's confidence interval (0 when n = 1)."""
    return (summary["ci_high"] - summary["ci_low"]) / 2.0


def format_value(value: Any) -> str:
    """A parameter value as a person reads it (floats with up to 6 significant digits)."""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, float | np.floating):
        if math.isnan(value):
            return "nan"
        if float(value).is_integer() and abs(value) < 1e15:
            return str(int(value))  # 1000000, not 1e+06
        return f"{float(value):g}"
    return str(value)
