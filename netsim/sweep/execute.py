"""Running a sweep: every planned run into its own run directory, on local processes or Dask.

The sweep directory ``<out>/<sweep name>/`` holds:

======================  =========================================================================
``sweep.yaml``          the sweep file as given, or the base and points of
                        :func:`~netsim.sweep.spec.plan_points` (provenance)
``sweep.json``          name, parameters, repetitions, planned / complete / failed counts, status
``plan.parquet``        one row per run: run, point, repetition, seed, run_id, parameter values
``runs/<run_id>/``      complete run directories, published atomically by ``run_scenario``
``failures/<id>.json``  the error and traceback of each run that failed
======================  =========================================================================

A run is done when ``runs/<run_id>`` is a complete run directory whose manifest carries the
hash of the run's resolved scenario and whose files match their checksums; a run an earlier
netsim made under another id (its id hashed absolute data paths) is found by its resolved
scenario and renamed (:func:`adopt_earlier_runs`); starting the sweep again runs only the
others, so a sweep killed half-way resumes, and a run interrupted half-way left only a
hidden staging directory, never a directory that looks complete. A failing run is recorded
and does not stop the others.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import re
import shutil
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal, NoReturn, Protocol

import pyarrow as pa

from netsim.errors import NetsimError, SweepError
from netsim.progress import PROGRESS_DIR, RunProgressWriter, SweepProgress
from netsim.scenario.build import fallback_reason, fallbacks_untold
from netsim.scenario.loader import (
    load_scenario,
    parameter_value,
    read_scenario_text,
    scenario_file_problem,
    scenario_hash,
)
from netsim.scenario.runner import run_scenario
from netsim.scenario.schema import Scenario
from netsim.signals import raise_if_stopping, request_stop
from netsim.storage import (
    MANIFEST,
    PARTIAL_MARK,
    RETIRED_MARK,
    SCENARIO,
    SWEEP_FAILURES,
    SWEEP_MANIFEST,
    SWEEP_PLAN,
    SWEEP_RUNS,
    SWEEP_SOURCE,
    atomic_write_parquet,
    atomic_write_text,
    check_run,
    complete_manifest,
    write_json,
)
from netsim.sweep.expressions import is_missing
from netsim.sweep.spec import PlannedRun, SweepPlan


@dataclass(frozen=True)
class RunTask:
    """What a worker needs for one run (picklable: plain values and the scenario model)."""

    run: int
    run_id: str
    scenario: Scenario
    runs_dir: str
    parameters: dict[str, Any] = field(default_factory=dict)  # for the run's manifest
    time_limit: float | None = None  # wall-clock seconds (--run-timeout)


@dataclass(frozen=True)
class RunOutcome:
    """How one run ended."""

    run: int
    run_id: str
    status: Literal["complete", "failed"]
    error: str = ""
    traceback: str = ""
    #: Why a complete run's exact mode ran on SimPy, not the compiled core (its manifest's
    #: ``exact_engine``: :func:`~netsim.scenario.build.fallback_reason`), or "".
    fallback: str = ""


def execute_task(task: RunTask) -> RunOutcome:
    """Run one task into its run directory. An error becomes a failed outcome (so one bad
    run does not stop the sweep); an interrupt propagates, after ``run_scenario`` removed its
    staging directory."""
    writer = RunProgressWriter(
        Path(task.runs_dir) / PROGRESS_DIR, task.run_id, task.scenario.duration
    )
    try:
        with fallbacks_untold():  # the sweep tells each reason once, not each worker
            result = run_scenario(
                task.scenario, out=Path(task.runs_dir), parameters=task.parameters,
                progress=writer, time_limit=task.time_limit,
            )  # fmt: skip
    except Exception as exc:  # any failure of a run is recorded, not raised
        raise_if_stopping()  # unless it is a stop that compiled code turned into an error
        return RunOutcome(
            task.run, task.run_id, "failed", f"{type(exc).__name__}: {exc}", traceback.format_exc()
        )
    finally:
        writer.remove()
    raise_if_stopping()  # not on to the next task: the pool sends its SIGTERM only once
    fallback = fallback_reason(str(result.manifest.get("exact_engine", "")))
    return RunOutcome(task.run, task.run_id, "complete", fallback=fallback or "")


@dataclass(frozen=True)
class PickledTask:
    """A :class:`RunTask` as bytes, for a worker in another process: the parent pickles it
    (a scenario that cannot be pickled is one :class:`SweepError` before any run), and the
    worker unpickles it inside :func:`execute_pickled`, so a component module the worker
    cannot import fails that run with a message instead of killing the worker."""

    run: int
    run_id: str
    payload: bytes


def pickled_tasks(tasks: list[RunTask]) -> list[PickledTask]:
    """``tasks`` as :class:`PickledTask`; :class:`SweepError` naming the run if one does not
    pickle (e.g. a component config holding an open file or a lambda)."""
    pickled = []
    for task in tasks:
        try:
            payload = pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # PicklingError, TypeError, AttributeError: all one message
            raise SweepError(
                f"run {task.run} ({task.run_id}) cannot be sent to a worker process: its "
                f"scenario does not pickle ({type(exc).__name__}: {exc}); every value of a "
                "component's Config must be picklable (or run the sweep with --workers 1)"
            ) from None
        pickled.append(PickledTask(task.run, task.run_id, payload))
    return pickled


def execute_pickled(task: PickledTask) -> RunOutcome:
    """:func:`execute_task` of a task pickled by the parent (in a worker process). An orphaned
    worker (its parent sweep is gone: the signal that should have ended it was lost) takes
    no task, and sends no result, but exits quietly."""
    if not _parent_alive():
        _exit_quietly(signal.SIGTERM)
    try:
        unpickled = pickle.loads(task.payload)
    except Exception as exc:  # e.g. a component's module that is not importable here
        return RunOutcome(
            task.run, task.run_id, "failed",
            f"the worker cannot read the run's scenario ({type(exc).__name__}: {exc}); every "
            "component's module must be importable on every worker",
            traceback.format_exc(),
        )  # fmt: skip
    outcome = execute_task(unpickled)
    if not _parent_alive():
        _exit_quietly(signal.SIGTERM)
    return outcome


class Backend(Protocol):
    """Runs tasks somewhere and yields their outcomes as they finish."""

    description: str

    def run(self, tasks: list[RunTask]) -> Iterator[RunOutcome]: ...


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _worker_started() -> None:
    """Pool workers leave Ctrl-C to the parent (which stops them) and unwind on SIGTERM, so
    ``run_scenario`` removes a half-written run's staging directory. A worker whose parent
    dies (killed: it could not stop its pool) gets SIGTERM too and exits quietly, instead of
    running the tasks still queued for it, publishing their runs and printing a
    ``BrokenPipeError`` traceback on sending a result nobody reads. A worker whose parent
    died while it was starting exits here, before it takes a task."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_on_term)
    _terminate_with_parent()
    if not _parent_alive():
        _exit_quietly(signal.SIGTERM)


def _terminate_with_parent() -> None:
    """SIGTERM this process as soon as its parent is gone: by the kernel on Linux
    (``PR_SET_PDEATHSIG``), and elsewhere by a thread that waits on the parent's sentinel
    (a pipe that reads end-of-file once the parent has exited; the parent's pid would not
    do: a worker started after its parent died sees its new parent's pid)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux
        pass
    parent = multiprocessing.parent_process()
    if parent is None:  # not a worker process (a test calls this in the main process)
        return

    def watch() -> None:
        parent.join()
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="netsim-orphan-watch", daemon=True).start()


def _exit_quietly(signum: int) -> NoReturn:
    """End an orphaned worker: nobody reads what it would print while it winds down."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    # recorded as well as raised: raised inside compiled code it may not propagate
    request_stop(partial(SystemExit, 128 + signum))
    raise AssertionError("request_stop raises")  # pragma: no cover


def _exit_on_term(signum: int, frame: object) -> None:
    if not _parent_alive():
        _exit_quietly(signum)
    # recorded as well as raised: raised inside compiled code it may not propagate
    request_stop(partial(SystemExit, 128 + signum))


def _parent_alive() -> bool:
    """Whether the process that started this one still runs (a pool worker's sweep)."""
    parent = multiprocessing.parent_process()
    return parent is None or parent.is_alive()


#: The warning filter the resource tracker is started with (``-W``; see
#: :func:`start_quiet_resource_tracker`).
RESOURCE_TRACKER_QUIET = "ignore:resource_tracker:UserWarning"


def start_quiet_resource_tracker() -> None:
    """Start multiprocessing's resource tracker, if this process has none yet, without its
    warning about semaphores left behind. A spawned pool's locks are named semaphores that the
    tracker unlinks when their process dies without doing so itself: a sweep killed with
    SIGKILL, or stopped while its pool starts. The tracker cleans up, but first prints "There
    appear to be N leaked semaphore objects" on the terminal, after the sweep's own message;
    nothing is left behind, so the warning is silenced for the tracker alone (the option is
    passed on its command line and removed before any worker starts)."""
    from multiprocessing import resource_tracker

    added = RESOURCE_TRACKER_QUIET not in sys.warnoptions
    if added:
        sys.warnoptions.append(RESOURCE_TRACKER_QUIET)
    try:
        resource_tracker.ensure_running()
    finally:
        if added:
            sys.warnoptions.remove(RESOURCE_TRACKER_QUIET)


class ProcessPool:
    """A local pool of ``workers`` processes (started fresh: no state inherited); with one
    worker the runs go in this process, one after another."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise SweepError(f"--workers {workers}: the number of worker processes is >= 1")
        self.workers = workers
        self.description = f"{workers} local process{'es' if workers > 1 else ''}"

    def run(self, tasks: list[RunTask]) -> Iterator[RunOutcome]:
        if self.workers == 1 or len(tasks) <= 1:
            for task in tasks:
                yield execute_task(task)
            return
        pickled = pickled_tasks(tasks)
        context = multiprocessing.get_context("spawn")
        start_quiet_resource_tracker()
        pool = context.Pool(min(self.workers, len(tasks)), initializer=_worker_started)
        finished = False
        try:
            yield from pool.imap_unordered(execute_pickled, pickled, chunksize=1)
            finished = True
        finally:
            if finished:
                pool.close()
            else:  # interrupted: SIGTERM the workers; each removes its staging directory
                pool.terminate()
            pool.join()


#: A Dask scheduler address: [protocol://]host:port (IPv6 hosts in brackets).
SCHEDULER_ADDRESS = re.compile(
    r"(?:(?:tcp|tls|ws|wss|ucx)://)?(?:\[[0-9a-fA-F:.]+\]|[\w.-]+):\d{1,5}"
)


class DaskCluster:
    """The workers of a running Dask distributed scheduler (``pip install 'netsim-ppml[dask]'``).
    Workers must see the same file system paths (the sweep directory, data and traces)."""

    def __init__(self, address: str, *, timeout: float = 5.0) -> None:
        try:
            from distributed import Client
        except ImportError:
            raise SweepError(
                "--scheduler needs dask.distributed; install it with "
                "pip install 'netsim-ppml[dask]'"
            ) from None
        if not SCHEDULER_ADDRESS.fullmatch(address):
            # checked here: a Client made from a malformed address fails, and then prints a
            # traceback of its own when the interpreter exits
            raise SweepError(
                f"--scheduler {address!r}: not a scheduler address; give the address 'dask "
                "scheduler' prints, e.g. tcp://127.0.0.1:8786 (or host:port)"
            )
        try:
            self.client = Client(address, timeout=timeout, set_as_default=False)
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            raise SweepError(
                f"--scheduler {address}: cannot reach the Dask scheduler "
                f"({type(exc).__name__}: {exc}); start one with 'dask scheduler' or give the "
                "address it prints, e.g. tcp://127.0.0.1:8786"
            ) from None
        workers = len(self.client.scheduler_info().get("workers", {}))
        self.description = f"Dask scheduler {address} ({workers} workers)"

    def run(self, tasks: list[RunTask]) -> Iterator[RunOutcome]:
        from distributed import as_completed

        try:
            pickled = pickled_tasks(tasks)
        except SweepError:
            self.client.close()
            raise
        futures = self.client.map(
            execute_pickled, pickled, key=[f"netsim-{task.run_id}" for task in tasks], pure=False
        )
        by_key = {future.key: task for future, task in zip(futures, tasks, strict=True)}
        try:
            with self.client.as_current():  # as_completed looks for the current client
                finished = as_completed(futures)
            for future in finished:
                try:
                    yield future.result()
                except Exception as exc:  # a lost worker fails its run only
                    task = by_key[future.key]
                    yield RunOutcome(
                        task.run, task.run_id, "failed", f"{type(exc).__name__}: {exc}"
                    )
        finally:
            self.client.cancel([f for f in futures if not f.done()])
            self.client.close()


# --- the sweep directory -----------------------------------------------------------------


@dataclass(frozen=True)
class SweepResult:
    """A sweep that ran to its end (some runs may have failed)."""

    directory: Path
    progress: SweepProgress
    failures: tuple[RunOutcome, ...]


def manifest_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A point's parameters as a run's manifest records them (JSON values; None: absent)."""
    return {
        key: None if is_missing(value) else parameter_value(value)
        for key, value in parameters.items()
    }


def sweep_directory(plan: SweepPlan, out: Path) -> Path:
    return Path(out) / plan.spec.name


def plan_table(plan: SweepPlan) -> pa.Table:
    """``plan.parquet``: run, point, repetition, seed, run_id (then label, for a plan of
    listed points), then one column per parameter."""
    columns: dict[str, list[Any]] = {
        "run": [r.run for r in plan.runs],
        "point": [r.point for r in plan.runs],
        "repetition": [r.repetition for r in plan.runs],
        "seed": [r.seed for r in plan.runs],
        "run_id": [r.run_id for r in plan.runs],
    }
    if plan.spec.listed_points is not None:
        columns["label"] = [r.label for r in plan.runs]
    for key in plan.spec.parameters:
        columns[key] = [r.parameters[key] for r in plan.runs]
    return pa.table(columns)


def is_done(run: PlannedRun, runs_dir: Path) -> bool:
    """True iff the run's directory is complete, was made from exactly its scenario, and is
    verified (:func:`~netsim.storage.check_run`: every file matches the checksums its
    manifest records; a deleted, swapped or corrupted table is run again, not taken for
    done, and so is a run whose manifest records no checksums to check it by)."""
    directory = runs_dir / run.run_id
    manifest = complete_manifest(directory)
    return (
        manifest is not None
        and manifest.get("scenario_hash") == scenario_hash(run.scenario)
        and check_run(directory, manifest).state == "ok"
        and scenario_file_problem(directory, manifest) is None
    )


def adopt_earlier_runs(plan: SweepPlan, runs_dir: Path) -> list[str]:
    """Give the finished runs of an earlier netsim, whose ids hashed absolute data paths, the
    ids of ``plan``: a complete, verified run directory under another name whose resolved
    scenario (its ``scenario.yaml``) has the hash and seed of a planned run not done yet is
    renamed to that run's id, its manifest's ``run_id`` and ``scenario_hash`` made current
    (the old id kept as ``earlier_run_id``). Returns the adopted directories' old names."""
    planned = {run.run_id for run in plan.runs}
    waiting = {
        (scenario_hash(run.scenario), run.seed): run
        for run in plan.runs
        if not (runs_dir / run.run_id).exists()
    }
    adopted: list[str] = []
    if not waiting or not runs_dir.is_dir():
        return adopted
    for directory in sorted(runs_dir.iterdir()):
        name = directory.name
        if name in planned or name.startswith(".") or PARTIAL_MARK in name or RETIRED_MARK in name:
            continue
        manifest = complete_manifest(directory)
        if manifest is None or not (directory / SCENARIO).is_file():
            continue
        try:  # its data must be where it was when it ran (the content is what is hashed)
            stored = load_scenario(directory / SCENARIO)
        except NetsimError:
            continue
        run = waiting.get((scenario_hash(stored), stored.seed))
        if run is None or check_run(directory, manifest).state != "ok":
            continue
        manifest.update(
            run_id=run.run_id, scenario_hash=scenario_hash(run.scenario), earlier_run_id=name
        )
        write_json(directory / MANIFEST, manifest)  # then the name: a retry finds it again
        os.rename(directory, runs_dir / run.run_id)
        del waiting[(scenario_hash(run.scenario), run.seed)]
        adopted.append(name)
    return adopted


def _write_manifest(directory: Path, plan: SweepPlan, progress: SweepProgress, status: str):
    write_json(
        directory / SWEEP_MANIFEST,
        {
            "name": plan.spec.name,
            "scenario": str(plan.source),
            "parameters": list(plan.spec.parameters),
            "grid": [key for key, _ in plan.spec.grid],
            **({"zip": [list(keys) for keys, _ in plan.spec.zipped]} if plan.spec.zipped else {}),
            "repetitions": plan.spec.repetitions,
            "points": plan.spec.points,
            "runs": progress.total,
            "complete": progress.already_done + progress.complete,
            "failed": progress.failed,
            "status": status,
        },
    )


def _prepare_directory(plan: SweepPlan, directory: Path) -> tuple[Path, Path]:
    """Create the sweep directory's run and failure folders and write the sweep's source and
    plan; returns the two folders. A directory that cannot be written is a SweepError."""
    runs_dir, failures_dir = directory / SWEEP_RUNS, directory / SWEEP_FAILURES
    try:
        for path in (runs_dir, failures_dir):
            path.mkdir(parents=True, exist_ok=True)
        source = plan.source_text
        if source is None:  # read from a sweep file: keep it as given
            source = read_scenario_text(plan.source, "sweep file")
        atomic_write_text(directory / SWEEP_SOURCE, source)
        atomic_write_parquet(directory / SWEEP_PLAN, plan_table(plan))
    except OSError as exc:
        raise SweepError(
            f"{directory}: cannot create the sweep directory ({exc.strerror or exc}); give "
            "--out a directory you can write to"
        ) from None
    return runs_dir, failures_dir


def _record_outcome(
    outcome: RunOutcome,
    by_number: Mapping[int, PlannedRun],
    failures_dir: Path,
    state: SweepProgress,
    failures: list[RunOutcome],
) -> None:
    """Count a finished run in ``state``: a complete one clears its failure record, a failed
    one joins ``failures`` and gets its record (error and traceback) in ``failures_dir``."""
    record = failures_dir / f"{outcome.run_id}.json"
    if outcome.status == "complete":
        state.complete += 1
        if outcome.fallback:
            state.fallbacks[outcome.fallback] = state.fallbacks.get(outcome.fallback, 0) + 1
        record.unlink(missing_ok=True)
        return
    state.failed += 1
    failures.append(outcome)
    planned = by_number[outcome.run]
    write_json(
        record,
        {
            "run_id": outcome.run_id,
            "run": outcome.run,
            "point": planned.point,
            "repetition": planned.repetition,
            "error": outcome.error,
            "traceback": outcome.traceback,
        },
    )


def _follow_outcomes(
    outcomes: Iterator[RunOutcome],
    plan: SweepPlan,
    directory: Path,
    failures_dir: Path,
    state: SweepProgress,
    progress: Callable[[SweepProgress], None] | None,
) -> list[RunOutcome]:
    """Record each run as it finishes and keep ``sweep.json`` and ``progress`` current;
    returns the failed runs. Stops the workers on the way out (an interrupt too) and then
    removes their progress files."""
    failures: list[RunOutcome] = []
    by_number = {r.run: r for r in plan.runs}  # a plan may hold a subset of run numbers
    try:
        for outcome in outcomes:
            _record_outcome(outcome, by_number, failures_dir, state, failures)
            _write_manifest(directory, plan, state, "incomplete")
            if progress is not None:
                progress(state)
    finally:  # the workers stop first (an interrupt), then their progress files go
        close = getattr(outcomes, "close", None)
        if close is not None:
            close()
        shutil.rmtree(directory / SWEEP_RUNS / PROGRESS_DIR, ignore_errors=True)
    return failures


def run_sweep(
    plan: SweepPlan,
    *,
    out: Path,
    backend: Backend,
    progress: Callable[[SweepProgress], None] | None = None,
    time_limit: float | None = None,
) -> SweepResult:
    """Run every planned run that is not done yet; record failures; keep ``sweep.json``
    current after every run (status ``complete`` only when every run is). A run still going
    after ``time_limit`` seconds of wall time is stopped and recorded as failed, with the
    reason, and the sweep goes on."""
    directory = sweep_directory(plan, Path(out).resolve())  # workers may not share our cwd
    runs_dir, failures_dir = _prepare_directory(plan, directory)
    adopt_earlier_runs(plan, runs_dir)  # a sweep directory from before portable run ids
    pending = [run for run in plan.runs if not is_done(run, runs_dir)]
    state = SweepProgress(
        len(plan.runs), len(plan.runs) - len(pending), started=time.perf_counter()
    )
    _write_manifest(directory, plan, state, "incomplete")
    # progress files of runs an earlier, stopped invocation left behind
    shutil.rmtree(runs_dir / PROGRESS_DIR, ignore_errors=True)
    if progress is not None:
        progress(state)
    tasks = [
        RunTask(
            r.run,
            r.run_id,
            r.scenario,
            str(runs_dir),
            manifest_parameters(r.parameters),
            time_limit,
        )
        for r in pending
    ]
    outcomes = backend.run(tasks)
    failures = _follow_outcomes(outcomes, plan, directory, failures_dir, state, progress)
    _write_manifest(directory, plan, state, "complete" if state.failed == 0 else "incomplete")
    return SweepResult(directory, state, tuple(sorted(failures, key=lambda o: o.run)))


def default_workers() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def backend_for(scheduler: str | None, workers: int | None) -> Backend:
    """The Dask cluster at ``scheduler``, or else ``workers`` local processes (default: the
    cores this process may use)."""
    if scheduler is not None:
        return DaskCluster(scheduler)
    return ProcessPool(workers if workers is not None else default_workers())
