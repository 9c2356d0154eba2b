"""``netsim verify``: whether every run of a run directory, a folder of runs or a sweep is
intact, by the checksums its manifest records (:func:`netsim.storage.check_run`).

Each run is ``ok`` (every file matches its manifest), ``unverified`` (its manifest records no
checksums: written before manifests recorded them, or stripped of them; only its tables' row
counts and columns could be checked, and they match; readers refuse it unless asked),
``damaged`` (with what is wrong), or, in a sweep, ``failed`` or ``missing`` (not run yet, or
interrupted). Only a set whose every run is ok verifies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netsim.analysis.collect import check_runs, load_sweep, run_status
from netsim.analysis.runs import scenario_checked
from netsim.errors import RunDirectoryError
from netsim.storage import (
    MANIFEST,
    PARTIAL_MARK,
    SCENARIO,
    SWEEP_MANIFEST,
    SWEEP_PLAN,
    RunCheck,
    check_run,
    complete_manifest,
    manifest_problem,
    name_foreign_files,
)

#: The states of :class:`Verdict`, in the order a summary counts them.
STATES: tuple[str, ...] = ("ok", "unverified", "damaged", "failed", "missing")
UNVERIFIED = (
    "written before manifests recorded checksums, or stripped of them: its tables' row counts "
    "and columns match its manifest, their bytes cannot be checked (collect, report and "
    "load_run read it only with --allow-unverified; 'netsim sweep' runs it again)"
)


@dataclass(frozen=True)
class Verdict:
    """One run's state (one of :data:`STATES`) and why it is not ok."""

    run_id: str
    directory: Path
    state: str
    reasons: tuple[str, ...] = ()


def _from_check(check: RunCheck) -> Verdict:
    reasons = tuple(check.reasons) if check.state == "damaged" else ()
    if check.state == "unverified":
        reasons = (UNVERIFIED,)
    return Verdict(check.run_id, check.directory, check.state, reasons)


def _looks_like_run(directory: Path) -> bool:
    """A directory with a manifest, a scenario or a table in it: a run (maybe damaged)."""
    if directory.name.startswith(".") or PARTIAL_MARK in directory.name:
        return False
    return (
        (directory / MANIFEST).exists()
        or (directory / SCENARIO).exists()
        or any(directory.glob("*.parquet"))
    )


def _verify_runs(directories: Sequence[Path]) -> list[Verdict]:
    manifests: dict[Path, Any] = {}
    for directory in directories:
        manifest = complete_manifest(directory)
        if manifest is not None:
            manifests[directory] = manifest
    checks = [
        scenario_checked(check_run(directory, manifests.get(directory)), manifests.get(directory))
        for directory in directories
    ]
    return [_from_check(check) for check in name_foreign_files(checks, manifests)]


def verify(path: Path) -> list[Verdict]:
    """The :class:`Verdict` of every run of ``path``: a sweep directory (every planned run), a
    run directory, or a folder of run directories (every sub-directory that holds a manifest,
    a scenario or a table). Raises :class:`RunDirectoryError` if ``path`` is none of these."""
    path = Path(path)
    if (path / SWEEP_MANIFEST).exists() or (path / SWEEP_PLAN).exists():
        source = load_sweep(path)
        checks = check_runs(source)
        verdicts = []
        for row in run_status(source, checks).itertuples(index=False):
            directory = source.run_directory(row.run_id)
            if row.status in ("complete", "damaged") and row.run_id in checks:
                verdicts.append(_from_check(checks[row.run_id]))
            elif row.status == "damaged":  # a directory without a complete manifest
                verdicts.append(Verdict(row.run_id, directory, "damaged", (row.error,)))
            elif row.status == "failed":
                verdicts.append(Verdict(row.run_id, directory, "failed", (row.error,)))
            elif (directory / MANIFEST).exists():  # a manifest that cannot be taken
                verdicts.append(
                    Verdict(row.run_id, directory, "damaged", (manifest_problem(directory),))
                )
            else:
                why = "not run yet, or interrupted ('netsim sweep' runs it)"
                verdicts.append(Verdict(row.run_id, directory, "missing", (why,)))
        return verdicts
    if not path.is_dir():
        why = "does not exist" if not path.exists() else "is a file, not a directory"
        raise RunDirectoryError(
            f"{path}: {why}; expected a run directory, a folder of runs or a sweep"
        )
    if (path / MANIFEST).exists():
        return _verify_runs([path])
    runs = sorted(d for d in path.iterdir() if d.is_dir() and _looks_like_run(d))
    if not runs:
        raise RunDirectoryError(
            f"{path}: no run in it (no manifest.json, scenario.yaml or table); expected a run "
            "directory, a folder of runs or a sweep"
        )
    return _verify_runs(runs)


def verdict_lines(verdicts: Sequence[Verdict]) -> list[str]:
    """One line per run (``state  run id: reasons``) and a summary line."""
    lines = []
    for verdict in verdicts:
        reasons = f": {'; '.join(verdict.reasons)}" if verdict.reasons else ""
        lines.append(f"{verdict.state:<10}  {verdict.run_id}{reasons}")
    counts = {state: sum(v.state == state for v in verdicts) for state in STATES}
    parts = ", ".join(f"{n} {state}" for state, n in counts.items() if n)
    lines.append(f"{len(verdicts)} run{'s' if len(verdicts) != 1 else ''}: {parts}")
    return lines
