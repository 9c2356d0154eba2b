"""Run a scenario into a run directory (or in memory).

The run directory ``<out>/<run id>/`` holds ``scenario.yaml`` (resolved, with the seed actually
used), one ``<table>.parquet`` per event table and ``manifest.json``. It is assembled in a
hidden staging directory and published with a rename once complete (see
:mod:`netsim.storage`), so an interrupted run never leaves a directory that looks complete.
The run id is ``<name>-seed<seed>-<first 10 hex digits of the scenario hash>``: the same
scenario and seed always give the same id and byte-identical tables. A run may be given a
readable id instead (``netsim run --name``); publishing it never replaces another run: the
name is claimed (:func:`netsim.storage.claim_run_name`) before the run starts, so a second
writer of the same name at the same time is refused instead of replacing the first.

The manifest records each file's SHA-256, size and row count (``files``: see
:func:`netsim.storage.check_run`) and the run's ``parameters``: the resolved value of every
key the run was given on top of its scenario file (``--set`` overrides, or a sweep point's
keys), which :func:`netsim.analysis.load_run` and :func:`netsim.analysis.collect` put on
every row.
"""

from __future__ import annotations

import dataclasses
import platform
import re
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from traceback import walk_tb
from types import TracebackType
from typing import TYPE_CHECKING, Any

from netsim.compiled import kernels_engine
from netsim.errors import (
    NetsimError,
    PluginFailure,
    RunDirectoryError,
    RunTimeoutError,
    ScenarioError,
)
from netsim.lazy import lazy_module
from netsim.learning import yardstick_cache
from netsim.log import EventLog
from netsim.rng import new_root_seed
from netsim.scenario.build import BuiltRun, ExactEngine, build_run
from netsim.scenario.loader import scenario_hash, scenario_to_yaml
from netsim.scenario.plan import class_reference
from netsim.scenario.schema import Scenario
from netsim.signals import RunTimedOut, TimeLimit, wall_clock_limit
from netsim.sim import Simulation
from netsim.storage import (
    FILES,
    MANIFEST,
    MANIFEST_FORMAT,
    MANIFEST_FORMAT_KEY,
    SCENARIO,
    atomic_write_text,
    claim_run_name,
    complete_manifest,
    file_records,
    partial_directory,
    publish_directory,
    write_json,
)
from netsim.version import __version__

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

RECORDED_PACKAGES = ("simpy", "networkx", "numpy", "pandas", "pyarrow", "pyyaml", "pydantic")
#: What a readable run id may be: a directory name that is not hidden (staging is hidden).
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=+-]{0,199}")


@dataclass(frozen=True)
class RunResult:
    """A finished run: where it is and what it was."""

    directory: Path
    run_id: str
    scenario: Scenario
    manifest: dict[str, Any]
    warnings: tuple[str, ...]


def with_seed(scenario: Scenario, seed: int | None = None) -> Scenario:
    """``scenario`` with its seed fixed: ``seed`` if given, else its own, else a fresh one."""
    if seed is not None:
        if not 0 <= seed < 2**63:
            raise ScenarioError(f"--seed {seed}: a seed is an integer in [0, 2^63)")
        return scenario.model_copy(update={"seed": seed})
    if scenario.seed is not None:
        return scenario
    return scenario.model_copy(update={"seed": new_root_seed()})


def run_id_for(scenario: Scenario) -> str:
    """The deterministic id of a seeded scenario's run."""
    return f"{scenario.name}-seed{scenario.seed}-{scenario_hash(scenario)[:10]}"


def check_run_name(name: str) -> str:
    """``name`` if it can be a readable run id, else a :class:`ScenarioError` saying why."""
    if not RUN_NAME.fullmatch(name):
        raise ScenarioError(
            f"--name {name!r}: a run name is 1 to 200 letters, digits and . _ = + -, "
            "starting with a letter or digit (it becomes the run directory's name)"
        )
    return name


def _check_named_target(final: Path, scenario: Scenario) -> None:
    """A named run replaces only itself (the same scenario and seed): refuse a directory
    that holds another run, or something that is not a run."""
    if not final.exists():
        return
    manifest = complete_manifest(final)
    if manifest is None:
        raise RunDirectoryError(
            f"{final}: exists and is not a complete run directory; choose another --name or "
            "remove it"
        )
    if (manifest.get("scenario_hash"), manifest.get("seed")) != (
        scenario_hash(scenario),
        scenario.seed,
    ):
        raise RunDirectoryError(
            f"{final}: holds another run (scenario {manifest.get('scenario_name')!r}, seed "
            f"{manifest.get('seed')}); choose another --name or remove it"
        )


def package_versions() -> dict[str, str]:
    """Versions of the packages a run depends on, for the manifest."""
    found = {}
    for name in RECORDED_PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def run_scenario(
    scenario: Scenario,
    *,
    out: Path,
    progress: Callable[[float], None] | None = None,
    parameters: Mapping[str, object] | None = None,
    name: str | None = None,
    time_limit: float | None = None,
    engine: ExactEngine = "auto",
) -> RunResult:
    """Run ``scenario`` and publish its run directory under ``out``.

    ``parameters`` (dotted key → resolved value) go to the manifest; ``name`` is a readable
    run id instead of the scenario-and-seed one (see the module docstring); ``time_limit``
    (wall-clock seconds) stops a run that takes longer with a :class:`RunTimeoutError` (see
    :func:`simulate`). ``engine`` runs exact mode's events (:data:`ExactEngine`; the
    manifest's ``exact_engine`` says which did).
    """
    scenario = with_seed(scenario)
    run_id = run_id_for(scenario) if name is None else check_run_name(name)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise RunDirectoryError(f"{out}: the output location exists and is not a directory")
    final = out / run_id
    if name is None:  # the id names the scenario and seed: a concurrent twin writes the same
        return _run_into(scenario, final, progress, parameters, time_limit, engine)
    with claim_run_name(final):  # a second writer of the name stops here, before it runs
        _check_named_target(final, scenario)
        return _run_into(scenario, final, progress, parameters, time_limit, engine)


def _run_into(
    scenario: Scenario,
    final: Path,
    progress: Callable[[float], None] | None,
    parameters: Mapping[str, object] | None,
    time_limit: float | None,
    engine: ExactEngine,
) -> RunResult:
    """Run the seeded ``scenario`` in a staging directory and publish it as ``final``."""
    run_id, out = final.name, final.parent
    try:
        staging = partial_directory(final)
    except OSError as exc:
        raise RunDirectoryError(f"{out}: cannot create a run directory: {exc.strerror}") from None
    try:
        log = EventLog(staging)
        started = time.perf_counter()
        yardstick_cache.start_recording()
        built = simulate(scenario, log, progress=progress, time_limit=time_limit, engine=engine)
        wall = time.perf_counter() - started
        yardsticks = yardstick_cache.recorded_uses()
        built.warnings.extend(
            f"yardstick cache: the {use.kind} record {use.key[:12]}… was refused ({use.why}); "
            "its yardstick was computed again"
            for use in yardsticks
            if use.source == "replaced"
        )
        counts = log.close()
        atomic_write_text(staging / SCENARIO, scenario_to_yaml(scenario))
        manifest = {
            "status": "complete",
            MANIFEST_FORMAT_KEY: MANIFEST_FORMAT,
            "run_id": run_id,
            "scenario_name": scenario.name,
            "scenario_hash": scenario_hash(scenario),
            "seed": scenario.seed,
            "parameters": dict(parameters or {}),
            "simulated_seconds": scenario.duration,
            "wall_time_seconds": round(wall, 3),
            # what ran exact mode's events: compiled, simpy: <why>, or rounds (same tables)
            "exact_engine": built.exact_engine,
            # what ran the compiled kernels: compiled ahead of time, or numba and why
            "kernels": kernels_engine(),
            "tables": counts,
            # the bytes as published (the staging directory is renamed, not copied)
            FILES: file_records(staging, counts),
            "schemas": log.schemas(),
            "components": scenario.plan.references(),
            # instances whose tables carry their name (absent when none do)
            **({"table_prefixes": p} if (p := scenario.plan.table_prefixes()) else {}),
            "warnings": built.warnings,
            # which yardsticks came from the cache (read), were computed, or replaced a
            # refused record, under which key (absent when the run has none)
            **({"yardsticks": [dataclasses.asdict(u) for u in yardsticks]} if yardsticks else {}),
            "privacy": privacy_reports(built),
            "netsim_version": __version__,
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "packages": package_versions(),
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        write_json(staging / MANIFEST, manifest)  # last: its presence marks completion
        publish_directory(staging, final)
    except OSError as exc:  # the inputs were read at validation: this is writing the run
        shutil.rmtree(staging, ignore_errors=True)
        raise RunDirectoryError(
            f"{final}: the run failed on a file operation ({exc.strerror or exc}); nothing was kept"
        ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return RunResult(final, run_id, scenario, manifest, tuple(built.warnings))


def simulate(
    scenario: Scenario,
    log: EventLog,
    *,
    progress: Callable[[float], None] | None = None,
    time_limit: float | None = None,
    engine: ExactEngine = "auto",
) -> BuiltRun:
    """Build the seeded ``scenario`` and run it to its end, writing to ``log``; exact mode's
    events on ``engine`` (:data:`~netsim.scenario.build.ExactEngine`).

    A run still going after ``time_limit`` seconds of wall time is stopped: a
    :class:`RunTimeoutError` saying how far it got (and in which component, when a plugin's
    code was running). An exception a component that is not netsim's own raised (while built
    or running) becomes one :class:`PluginFailure` naming its scenario key and class, with
    the exception as its cause (its traceback kept for the plugin's author). Anything else,
    an interrupt included, goes through unchanged.
    """
    limit = TimeLimit(time_limit)
    sims: list[Simulation] = []  # the clock, once built: how far a stopped run got
    try:
        with wall_clock_limit(limit):
            built = build_run(scenario, log, engine=engine)
            sims.append(built.sim)
            built.sim.run(scenario.duration, progress=progress)
    except BaseException as exc:
        failure = _failure(exc, scenario, limit, sims[0].now if sims else None)
        if failure is None:
            raise
        raise failure from exc
    return built


def _failure(
    exc: BaseException, scenario: Scenario, limit: TimeLimit, now: float | None
) -> NetsimError | None:
    """What ``exc``, which ended a run of ``scenario``, is to its user (None: itself)."""
    if not isinstance(exc, Exception | RunTimedOut):
        return None  # an interrupt, SIGTERM, a worker's exit
    culprit = None
    for raised in reversed(exception_chain(exc)):  # the original first: SimPy re-raises a copy
        culprit = plugin_at_fault(scenario, raised.__traceback__)
        if culprit is not None:
            break
    if limit.passed:  # also when compiled code turned the timeout into another error
        where = "while building it" if now is None else f"at {now:g} s of {scenario.duration:g} s"
        running = "" if culprit is None else f", in {culprit[0]} ({class_reference(culprit[1])})"
        return RunTimeoutError(
            f"the run did not finish within its time limit of {limit.seconds:g} s of wall "
            f"time; it was stopped {where} simulated{running}"
        )
    if culprit is None or isinstance(exc, NetsimError):
        return None
    key, cls = culprit
    return PluginFailure(f"{key} ({class_reference(cls)}) raised {type(exc).__name__}: {exc}")


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, outermost first
    (SimPy re-raises a copy of a callback's exception from the original, whose traceback
    holds the frames that raised it)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def plugin_at_fault(scenario: Scenario, trace: TracebackType | None) -> tuple[str, type] | None:
    """The component of ``scenario`` that is not netsim's own whose code was running at the
    innermost frame of ``trace`` that belongs to one, as (scenario key, class): a frame of
    a method of its instance, else a frame of its package's code. None when no plugin's
    code was running (netsim's own code raised)."""
    plugins = {
        key: cls
        for key, cls in (*scenario.plan.classes().items(), *nested_components(scenario))
        if cls.__module__.split(".")[0] != "netsim"
    }
    if not plugins:
        return None
    for frame, _ in reversed(list(walk_tb(trace))):
        owner = frame.f_locals.get("self")
        module = str(frame.f_globals.get("__name__", ""))
        for key, cls in plugins.items():
            if isinstance(owner, cls):
                return key, cls
        for key, cls in plugins.items():
            if module.split(".")[0] == cls.__module__.split(".")[0]:
                return key, cls
    return None


def nested_components(scenario: Scenario) -> list[tuple[str, type]]:
    """(scenario key, class) of the components a section names in its settings — a noise
    mechanism, a model, a data-set loader (``learning.noise: my_pkg:Noise``) — by a registered
    name or a ``module:Class`` reference, so that a plugin there is blamed by name too."""
    from netsim.component import Component, ComponentConfig
    from netsim.registry import REGISTRY, SLOT_NAMES

    found: list[tuple[str, type]] = []

    def visit(key: str, value: Any) -> None:
        kind = getattr(value, "kind", None) if isinstance(value, ComponentConfig) else value
        if isinstance(kind, str) and kind:
            for slot in SLOT_NAMES:
                try:
                    cls, _ = REGISTRY.lookup((slot,), kind)
                except (NetsimError, ImportError, AttributeError, ValueError):
                    continue  # not a component of this slot (or no component): look on
                if isinstance(cls, type) and issubclass(cls, Component):
                    found.append((key, cls))
                break
        if isinstance(value, ComponentConfig):
            for name in type(value).model_fields:
                if name != "kind":
                    visit(f"{key}.{name}", getattr(value, name))

    for key, config in scenario.plan.configs().items():
        if isinstance(config, ComponentConfig):
            for name in type(config).model_fields:
                if name != "kind":
                    visit(f"{key}.{name}", getattr(config, name))
    return found


def privacy_reports(built: BuiltRun) -> dict[str, object]:
    """Per component with a privacy accountant: its budget and the guarantee it reached."""
    reports = {}
    for key, component in built.components.items():
        accountant = component.privacy_accountant()
        if accountant is not None:
            reports[key] = accountant.report()
    return reports


def run_in_memory(
    scenario: Scenario, *, engine: ExactEngine = "auto"
) -> tuple[BuiltRun, dict[str, pd.DataFrame]]:
    """Run ``scenario`` without touching the disk; returns the built run and its tables."""
    scenario = with_seed(scenario)
    log = EventLog()
    built = simulate(scenario, log, engine=engine)
    log.close()
    return built, log.to_frames()
