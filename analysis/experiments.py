"""What the experiment scripts of ``analysis/`` share: running an experiment as a sweep of
:mod:`netsim.sweep`, reducing its run directories into one results table, and the
``run`` / ``figures`` command line.

An experiment is a :class:`~netsim.sweep.SweepPlan` of listed points (a base scenario, and per
run its overrides and its own seed: :func:`netsim.sweep.plan_points`). :func:`run_plan` runs
it with :func:`netsim.sweep.run_sweep` on ``--jobs`` local processes or the Dask cluster at
``--scheduler`` into ``<--out>/<sweep name>/`` (default ``analysis/sweeps``). A run already
complete there is not run again, so an interrupted ``run`` resumes where it stopped.
:func:`run_experiments` then reduces every run directory, in plan order, into the results
table ``analysis/results/<name>.parquet`` (written atomically). An experiment with a failed
run writes no table: its errors are in the sweep's ``failures/``, and running it again retries
exactly the failed runs.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from netsim.analysis.collect import load_sweep, run_status
from netsim.errors import NetsimError
from netsim.network.churn import FALLBACK_WARNING
from netsim.progress import SweepProgress
from netsim.storage import (
    MANIFEST,
    SWEEP_FAILURES,
    SWEEP_PLAN,
    SWEEP_RUNS,
    atomic_write_bytes,
    atomic_write_text,
    is_complete_run,
)
from netsim.sweep import SweepPlan
from netsim.sweep.execute import Backend, backend_for, is_done, run_sweep

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "analysis" / "sweeps"
#: The analysis README, whose ``<!-- generated: NAME -->`` blocks the scripts write.
README = REPO / "analysis" / "README.md"
DEFAULT_JOBS = 2
PROGRESS_EVERY = 50  # runs between progress lines
EXIT_FAILED = 1
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class SweepRunner:
    """Where the sweeps go (``out``) and what runs them: ``jobs`` local processes, or the
    workers of the Dask scheduler at ``scheduler``."""

    out: Path = DEFAULT_OUT
    jobs: int = DEFAULT_JOBS
    scheduler: str | None = None

    def backend(self) -> Backend:
        """A fresh backend for one sweep (a Dask client is closed when its sweep ends)."""
        return backend_for(self.scheduler, self.jobs)


def edge_list_file(edges: Iterable[tuple[int, int]], path: Path) -> Path:
    """``path``, written once with one ``a b`` line per edge (a topology's ``edge_list``
    file; a run's identity holds its bytes, not where it lives)."""
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, "".join(f"{a} {b}\n" for a, b in edges))
    return path


def describe(overrides: Mapping[str, Any]) -> str:
    """A point's label from its overrides: ``key=value, ...`` (sections as compact JSON)."""

    def show(value: Any) -> str:
        if isinstance(value, Mapping | list):
            return json.dumps(value, separators=(",", ":"), default=str)
        return str(value)

    return ", ".join(f"{key}={show(value)}" for key, value in overrides.items()) or "base"


def _progress_printer(name: str) -> Callable[[SweepProgress], None]:
    """Prints a line every :data:`PROGRESS_EVERY` finished runs and at the last one."""

    def report(state: SweepProgress) -> None:
        if state.finished % PROGRESS_EVERY == 0 or state.finished == state.total:
            print(
                f"{name}: {state.finished}/{state.total} runs, {state.elapsed:.0f} s",
                flush=True,
            )

    return report


def run_plan(plan: SweepPlan, runner: SweepRunner) -> tuple[list[Path], int]:
    """Run the runs of ``plan`` that are not complete yet. Returns the run directories of the
    complete runs in plan order, and the number of runs that failed."""
    backend = runner.backend()
    name = plan.spec.name
    print(f"{name}: {len(plan.runs)} runs on {backend.description}", flush=True)
    result = run_sweep(plan, out=runner.out, backend=backend, progress=_progress_printer(name))
    state = result.progress
    print(
        f"{name}: {state.complete} ran, {state.already_done} were already complete, "
        f"{state.failed} failed ({state.elapsed:.0f} s); sweep directory {result.directory}",
        flush=True,
    )
    for failure in result.failures:
        print(f"  run {failure.run} ({failure.run_id}) failed: {failure.error}", file=sys.stderr)
    if result.failures:
        print(
            f"{name}: errors and tracebacks in {result.directory / SWEEP_FAILURES}; run the "
            "same command again to retry the failed runs",
            file=sys.stderr,
        )
    runs_dir = result.directory / SWEEP_RUNS
    done = [runs_dir / run.run_id for run in plan.runs if is_done(run, runs_dir)]
    return done, state.failed


def reduce_runs(
    directories: Sequence[Path], reduce: Callable[[Path], pd.DataFrame]
) -> pd.DataFrame:
    """The non-empty frames ``reduce`` makes of each run directory, concatenated in order."""
    frames = [frame for frame in map(reduce, directories) if not frame.empty]
    if not frames:
        raise NetsimError("no run gave any rows: nothing to write")
    return pd.concat(frames, ignore_index=True)


def write_results(frame: pd.DataFrame, path: Path) -> Path:
    """Write ``frame`` to the Parquet file ``path`` atomically (no index)."""
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buffer.getvalue())
    return path


def load_result_tables(
    names: Sequence[str], results_file: Callable[[str], Path], script: str
) -> pd.DataFrame:
    """The per-run tables of the experiments ``names`` that exist (``results_file(name)``),
    concatenated in experiment order; one message naming ``script``'s ``run`` command when
    none does."""
    frames = [pd.read_parquet(results_file(n)) for n in names if results_file(n).is_file()]
    if not frames:
        folder = results_file(names[0]).parent if names else "analysis/results"
        raise NetsimError(f"no results in {folder}: run `{script} run` first")
    return pd.concat(frames, ignore_index=True)


def run_experiments(
    names: Sequence[str],
    runner: SweepRunner,
    *,
    plan: Callable[[str], SweepPlan],
    reduce: Callable[[str, Path], pd.DataFrame],
    results: Callable[[str], Path],
) -> int:
    """For each experiment: its sweep run (resuming), its run directories reduced and the
    table written to ``results(name)``; an experiment with failed runs writes none. Returns
    the number of failed runs."""
    failed = 0
    for name in names:
        started = time.perf_counter()
        sweep = plan(name)
        directories, failures = run_plan(sweep, runner)
        failed += failures
        if failures:
            print(f"{name}: {failures} runs failed; {results(name)} not written", file=sys.stderr)
            continue
        table = reduce_runs(directories, functools.partial(reduce, name))
        path = write_results(table, results(name))
        print(f"{name}: {len(directories)} runs in {time.perf_counter() - started:.0f} s: {path}")
    return failed


def planned_label(directory: Path, sweep: str) -> str:
    """The label the sweep's ``plan.parquet`` gives the point a run directory of it ran
    (``sweep`` names the kind of sweep in the error when the directory is not one's run)."""
    plan_file = directory.parent.parent / SWEEP_PLAN
    if not plan_file.is_file():
        raise NetsimError(f"{directory}: not a run of a {sweep} sweep (no {plan_file})")
    planned = pd.read_parquet(plan_file, columns=["run_id", "label"]).set_index("run_id")
    return str(planned.loc[directory.name, "label"])


def run_directories(paths: Sequence[Path]) -> list[Path]:
    """Run directories as given, with a sweep directory replaced by its complete runs in plan
    order."""
    found: list[Path] = []
    for path in paths:
        if is_complete_run(path):
            found.append(path)
            continue
        source = load_sweep(path)  # a clear error if it is neither
        status = run_status(source)
        complete = status[status["status"] == "complete"]["run_id"]
        found.extend(source.run_directory(run_id) for run_id in complete)
    return found


def add_runner_arguments(parser: argparse.ArgumentParser) -> None:
    """``--jobs N`` or ``--scheduler ADDRESS``, and ``--out DIR``."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--jobs", type=int, help=f"local worker processes (default {DEFAULT_JOBS})")
    where.add_argument(
        "--scheduler", metavar="ADDRESS", help="run on a Dask cluster, e.g. tcp://host:8786"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="parent of the sweep directories (default analysis/sweeps); runs there resume",
    )


def runner_from(args: argparse.Namespace) -> SweepRunner:
    """The :class:`SweepRunner` of parsed :func:`add_runner_arguments`."""
    if args.out.exists() and not args.out.is_dir():
        raise NetsimError(f"--out {args.out}: exists and is not a directory")
    jobs = DEFAULT_JOBS if args.jobs is None else args.jobs
    if jobs < 1:
        raise NetsimError(f"--jobs {jobs}: the number of worker processes is >= 1")
    return SweepRunner(out=args.out, jobs=jobs, scheduler=args.scheduler)


def guarded(program: str, action: Callable[[], int]) -> int:
    """Run ``action``: a user error prints one line (exit 2), Ctrl-C says how to resume."""
    try:
        return action()
    except NetsimError as exc:
        print(f"{program}: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print(
            f"{program}: interrupted; finished runs are kept, and the same command resumes",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


def experiment_main(
    description: str,
    experiments: Sequence[str],
    run: Callable[[list[str], SweepRunner], int],
    draw: Callable[[], None],
    argv: list[str] | None = None,
    tables: Callable[[bool], None] | None = None,
) -> int:
    """``run [--jobs N | --scheduler ADDRESS] [--out DIR] [--only NAME ...]``, ``figures``, and
    with ``tables`` given ``tables [--readme]`` (it prints the tables from analysis/results and
    with ``--readme`` writes them into analysis/README.md). ``run`` returns the number of
    failed runs (exit status 1 if any)."""
    parser = argparse.ArgumentParser(description=description)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run the experiments (resumes)")
    add_runner_arguments(run_parser)
    run_parser.add_argument("--only", nargs="+", choices=experiments, default=list(experiments))
    commands.add_parser("figures", help="draw the figures from analysis/results")
    if tables is not None:
        tables_parser = commands.add_parser("tables", help="print the tables of analysis/results")
        tables_parser.add_argument(
            "--readme", action="store_true", help="write them into analysis/README.md"
        )
    args = parser.parse_args(argv)
    program = Path(sys.argv[0]).name

    def act() -> int:
        if args.command == "run":
            return EXIT_FAILED if run(args.only, runner_from(args)) else 0
        if args.command == "tables" and tables is not None:
            tables(args.readme)
            return 0
        draw()
        return 0

    return guarded(program, act)


def tuning_main(
    program: str,
    description: str,
    experiments: Sequence[str],
    run: Callable[[list[str], SweepRunner, int], int],
    tables: Callable[[], Mapping[str, str]],
    *,
    default_only: Sequence[str],
    count_option: str,
    count_default: int,
    argv: list[str] | None = None,
) -> int:
    """The command line of a tuning script: ``run [--jobs N | --scheduler ADDRESS] [--out DIR]
    [--only NAME ...] [--<count_option> K]`` runs (or resumes) the sweeps and selects, ``tables
    [--readme]`` prints the generated tables (``--readme``: into analysis/README.md)."""
    parser = argparse.ArgumentParser(description=description)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run (or resume) the sweeps and select")
    add_runner_arguments(run_parser)
    run_parser.add_argument("--only", nargs="+", choices=experiments, default=list(default_only))
    run_parser.add_argument(
        f"--{count_option}",
        dest="count",
        metavar=count_option.upper(),
        type=int,
        default=count_default,
        help="seeds per row",
    )
    tables_parser = commands.add_parser("tables", help="print the table")
    tables_parser.add_argument("--readme", action="store_true", help="write it into the README")
    args = parser.parse_args(argv)
    if args.command == "run":
        return guarded(program, lambda: run(args.only, runner_from(args), args.count))
    return guarded(program, lambda: (show_tables(tables(), args.readme), 0)[1])


def mean_sd(values: pd.Series) -> str:
    """``mean ± s.d. (n)`` of accuracies."""
    return f"{values.mean():.3f} ± {values.std():.3f} ({values.count()})"


# --- scripts that reduce a sweep to a per-run table ------------------------------------------


def per_run_table_parser(description: str, sweep_help: str) -> argparse.ArgumentParser:
    """The command line of a script that reduces a sweep's runs to a per-run table: the sweep
    directory or ``--runs`` (a per-run table it wrote), ``--results`` and ``--readme``; see
    :func:`parse_per_run_table_arguments`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("sweep", type=Path, nargs="?", help=sweep_help)
    parser.add_argument("--runs", type=Path, help="a per-run table this script wrote, instead")
    parser.add_argument("--results", type=Path, default=REPO / "analysis" / "results")
    parser.add_argument(
        "--readme", action="store_true", help="rewrite the tables that rest on it (README, docs)"
    )
    return parser


def replayed_fallback_trace(run_dir: Path) -> bool:
    """Did the run replay its STUNner replay's fallback trace (``../shared/data`` absent) rather
    than the STUNner trace? Its manifest keeps the warning the replay gave."""
    manifest = json.loads((run_dir / MANIFEST).read_text(encoding="utf-8"))
    return any(FALLBACK_WARNING in str(w) for w in manifest.get("warnings", ()))


def read_per_run_table(path: Path, columns: Sequence[str]) -> pd.DataFrame:
    """A per-run table a script wrote (``--runs``), with the ``columns`` it reads back; a
    missing file, another file or a table without them is a :class:`NetsimError` naming it."""
    if not path.is_file():
        raise NetsimError(f"{path}: no such file (a per-run table this script wrote)")
    try:
        runs = pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise NetsimError(f"{path}: not a per-run table of this script ({exc})") from None
    missing = [c for c in columns if c not in runs]
    if missing:
        raise NetsimError(f"{path}: not a per-run table of this script: no {', '.join(missing)}")
    return runs


def parse_per_run_table_arguments(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None
) -> argparse.Namespace:
    """The arguments of a :func:`per_run_table_parser`: exactly one of the sweep and ``--runs``."""
    args = parser.parse_args(argv)
    if (args.sweep is None) == (args.runs is None):
        parser.error("give either a sweep directory or --runs")
    return args


# --- tables generated into analysis/README.md -------------------------------------------------


def with_tables(text: str, tables: Mapping[str, str]) -> str:
    """``text`` with each block between ``<!-- generated: NAME -->`` and ``<!-- /generated
    -->`` replaced by the table NAME (blocks of tables not given are left as they are)."""
    for name, table in tables.items():
        start, end = f"<!-- generated: {name} -->", "<!-- /generated -->"
        if start not in text:
            continue
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{start}\n{table}\n{end}{tail}"
    return text


def show_tables(generated: Mapping[str, str], readme: bool) -> None:
    """Print the generated tables, or with ``readme`` write them into analysis/README.md (an
    experiment script's ``tables [--readme]``)."""
    if readme:
        write_readme_tables(generated)
    else:
        print("\n\n".join(generated.values()))


def write_readme_tables(tables: Mapping[str, str], readme: Path = README) -> bool:
    """Rewrite the generated blocks ``tables`` names in ``readme`` (atomically); whether the
    file changed."""
    text = readme.read_text(encoding="utf-8")
    updated = with_tables(text, tables)
    if updated == text:
        return False
    atomic_write_text(readme, updated)
    print(f"updated the generated tables of {readme.relative_to(REPO)}: {', '.join(tables)}")
    return True


#: Yardsticks the tables compute from a data set rather than read from runs (the central-DP
#: accuracy at a row's stated budget), kept so that the tables need no data to be printed.
YARDSTICKS = REPO / "analysis" / "results" / "yardsticks.parquet"


def stored_yardstick(key: str, compute: Callable[[], float]) -> float:
    """The yardstick ``key`` as :data:`YARDSTICKS` holds it, or ``compute()``d and added
    (atomically) when it holds none: the value a table prints is the committed one, the same
    in every checkout, whether or not the data set is there."""
    table = (
        pd.read_parquet(YARDSTICKS)
        if YARDSTICKS.is_file()
        else pd.DataFrame({"key": pd.Series(dtype=str), "value": pd.Series(dtype=float)})
    )
    found = table.loc[table["key"] == key, "value"]
    if len(found):
        return float(found.iloc[0])
    value = float(compute())
    table = pd.concat([table, pd.DataFrame({"key": [key], "value": [value]})], ignore_index=True)
    write_results(table.sort_values("key", ignore_index=True), YARDSTICKS)
    return value


def t_half_width(values: pd.Series) -> float:
    """The half width of the 95% Student t interval of the mean of ``values`` (seeds; 0 for
    one value)."""
    from scipy import stats

    if len(values) < 2:
        return 0.0
    return float(stats.t.ppf(0.975, len(values) - 1) * values.std() / math.sqrt(len(values)))


def mean_interval(values: pd.Series) -> str:
    """The mean, with its 95% Student t interval over seeds when there are several (three
    significant digits; "—" for a value that is not finite)."""

    def number(value: float) -> str:
        return "—" if not math.isfinite(value) else f"{value:.3g}"

    mean = float(values.mean())
    if len(values) < 2:
        return number(mean)
    half = t_half_width(values)
    return f"{number(mean)} [{number(mean - half)}, {number(mean + half)}]"
