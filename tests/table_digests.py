"""Before/after check of a change, under netsim's reproducibility contract: every table of
every shipped scenario at a fixed seed.

A refactor must change no number. This script runs each shipped scenario (shortened with
overrides so that the whole set takes minutes, not days) at a fixed seed, in memory, and
compares every table with the reference recorded in ``tests/reference_tables/`` under the
contract of :mod:`netsim.analysis.reproducibility`: row counts, columns and types and every
non-floating-point column identical, floating-point columns within the contract's tolerance.
It also says whether a table is byte-identical to the reference (a SHA-256 over the exact
values, pandas' per-row hash of the raw bits, so 0.1 + 0.2 and 0.3 differ), which the same
machine and library versions must give.

    python -m tests.table_digests --write   # record the references (on the commit before)
    python -m tests.table_digests           # compare with them (after)
    python -m tests.table_digests --only quickstart dola/synthetic
    python -m tests.table_digests --second-machine   # the same, as another machine computes
    python -m tests.table_digests --engine simpy     # exact mode's events all on SimPy

``--second-machine`` reruns the comparison in a child process that computes as another x86-64
machine would: another OpenBLAS kernel (``OPENBLAS_CORETYPE=Sandybridge``), numpy's AVX-512
loops switched off (``NPY_DISABLE_CPU_FEATURES``) and numba compiling for a generic CPU
(``NUMBA_CPU_NAME=generic``, on its JIT: ``NETSIM_AOT=0``).

``tests/table_digests.json`` holds each table's digest; ``tests/reference_tables/<case>/``
its values (Parquet); ``tests/test_table_digests.py`` checks a fast subset in the default test
run, also as a second machine. The churn of the ``paper-*`` walk scenarios falls back to the
shipped synthetic trace where the research-only STUNner file is absent: the digest records
which one a run used, and a comparison skips runs whose data differ.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from netsim.analysis.reproducibility import table_differences

REPO = Path(__file__).resolve().parents[1]
DIGESTS = Path(__file__).with_name("table_digests.json")
REFERENCES = Path(__file__).with_name("reference_tables")
SEED = 7

#: Shipped scenario (relative to ``scenarios/``) → overrides that keep its run short. Every
#: configuration of the walk grid is covered in both gossip modes through two representative
#: files per mode; the other grid files differ from these only in parameter values.
CASES: dict[str, tuple[str, ...]] = {
    "quickstart": ("duration=40min",),
    "quickstart#rounds": ("gossip.mode=rounds",),
    "quickstart#rounds-lossy": (
        "gossip.mode=rounds",
        "links.loss=0.05",
        "links.failure.mean_up=30min",
        "links.failure.mean_down=2min",
    ),
    "walk/reduced-drw1-d10-kill0": ("duration=3min",),
    "walk/reduced-drw100-d20-kill5": ("duration=3min",),
    "walk/reduced-drw1-d10-kill5#rounds": ("duration=10min", "gossip.mode=rounds"),
    "walk/reduced-drw100-d100-kill0#rounds": ("duration=10min", "gossip.mode=rounds"),
    "walk/paper-drw1-d10-kill5#rounds": ("duration=4min", "gossip.mode=rounds"),
    # the shipped synthetic trace: the case runs (and is checked) wherever the tests run
    "walk/reduced-drw100-d20-kill5#rounds-authors-cycle": (
        "duration=20min",
        "gossip.mode=rounds",
        "walk.preset=authors",
        "walk.cycle=authors",
        "churn={kind: trace, path: ../../traces/stunner-synthetic.csv}",
    ),
    # the authors' cycle in exact mode (every node's cycle at k·Δ in index order)
    "walk/reduced-drw1-d10-kill5#exact-authors": (
        "duration=3min",
        "walk.preset=authors",
        "churn={kind: trace, path: ../../traces/stunner-synthetic.csv}",
    ),
    "walk/reduced-sweep": ("duration=5min",),
    "learning/spambase": ("duration=3000s",),
    "learning/segmentation": ("duration=1500s",),
    "learning/mnist": ("duration=1500s", "nodes=2000"),
    "learning/spambase-gossip-learning": ("duration=30s",),
    "learning/spambase-service-stunner": ("duration=10min",),
    "privacy/walk-spambase": ("nodes=64", "duration=640s"),
    # the threat model's other parts: the ceiling, a coalition, a link, the path-secret estimate
    "privacy/walk-spambase#ceiling": (
        "nodes=64",
        "duration=640s",
        "learning.privacy_unit=node",
        "walk.sampling=neighbour",
        "privacy.budget=network",
        "privacy.coalitions=[[2, 3]]",
        "privacy.links=[[0, 1]]",
        "privacy.secret_paths=16",
    ),
    "dola/synthetic": ("duration=120s",),
    "mi_ogd/regression": ("duration=300s",),
}

#: The cases the default test run checks (a few seconds each).
FAST_CASES: tuple[str, ...] = (
    "quickstart",
    "walk/reduced-drw1-d10-kill5#rounds",
    "walk/reduced-drw100-d20-kill5",
    "walk/reduced-drw100-d20-kill5#rounds-authors-cycle",
    "walk/reduced-drw1-d10-kill5#exact-authors",
    "learning/spambase-gossip-learning",
    "privacy/walk-spambase#ceiling",
    "dola/synthetic",
    "mi_ogd/regression",
)


def frame_digest(frame: pd.DataFrame) -> dict[str, object]:
    """Row count, columns with dtypes, and a SHA-256 of the exact values of ``frame``."""
    hashes = pd.util.hash_pandas_object(frame, index=False).to_numpy()
    return {
        "rows": len(frame),
        "columns": [f"{name}:{dtype}" for name, dtype in frame.dtypes.items()],
        "sha256": hashlib.sha256(hashes.tobytes()).hexdigest(),
    }


def case_directory(case: str) -> Path:
    """Where the reference tables of ``case`` are kept."""
    return REFERENCES / case.replace("/", "__").replace("#", "--")


def run_case(case: str, engine: str = "auto") -> dict[str, object]:
    """Run one case in memory (exact mode's events on ``engine``): its tables, their digests
    and schemas' ``scaled_by``, and which engine ran exact mode."""
    from netsim.scenario.loader import load_scenario
    from netsim.scenario.runner import run_in_memory

    file = case.split("#")[0]
    path = REPO / "scenarios" / f"{file}.yaml"
    scenario = load_scenario(path, CASES[case])
    scenario = scenario.model_copy(update={"seed": SEED})
    built, frames = run_in_memory(scenario, engine=engine)
    churn = getattr(scenario, "churn", None)
    trace = getattr(churn, "path", None)
    if trace is not None and not Path(trace).is_file() and getattr(churn, "fallback", None):
        trace = churn.fallback.path
    schemas = built.sim.log.schemas()
    return {
        "churn_source": Path(trace).name if trace is not None else None,
        "tables": {name: frame_digest(frame) for name, frame in sorted(frames.items())},
        "scaled_by": {name: schemas[name].get("scaled_by", {}) for name in sorted(frames)},
        "frames": frames,
        "exact_engine": built.exact_engine,
    }


def write_references(case: str, now: dict[str, object]) -> None:
    """Record the tables of ``case`` as Parquet (replacing the old ones)."""
    directory = case_directory(case)
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    for name, frame in now["frames"].items():
        table = pa.Table.from_pandas(frame, preserve_index=False)
        pq.write_table(table, directory / f"{name}.parquet", compression="zstd")


def compare(case: str, recorded: dict, now: dict) -> tuple[list[str], list[str]]:
    """Differences beyond the contract between the recorded tables and the current ones
    (first list; empty: the contract holds) and the tables that are within the contract but
    not byte-identical (second list)."""
    if recorded.get("churn_source") != now.get("churn_source"):
        return [], []  # different input data (research-only trace present on one machine only)
    problems: list[str] = []
    inexact: list[str] = []
    old_tables, new_tables = recorded["tables"], now["tables"]
    for name in sorted(set(old_tables) | set(new_tables)):
        old, new = old_tables.get(name), new_tables.get(name)
        if old is None:
            problems.append(f"{case}: new table {name}")
        elif new is None:
            problems.append(f"{case}: table {name} is no longer written")
        elif old != new:
            kept = _old_columns_kept(old, now["frames"][name])
            if kept is not None:  # new columns only: the old ones must still be identical
                if kept != old:
                    problems.append(f"{case}: table {name}: its old columns changed")
                else:
                    inexact.append(f"{name} (new columns, the old ones identical)")
                continue
            if old["columns"] != new["columns"] or old["rows"] != new["rows"]:
                what = [key for key in ("rows", "columns") if old[key] != new[key]]
                problems.append(f"{case}: table {name} differs in {', '.join(what)}")
                continue
            reference = pd.read_parquet(case_directory(case) / f"{name}.parquet")
            found = table_differences(
                name, reference, now["frames"][name], recorded.get("scaled_by", {}).get(name)
            )
            problems.extend(f"{case}: {problem}" for problem in found)
            if not found:
                inexact.append(name)
    return problems, inexact


def _old_columns_kept(old: dict, frame: pd.DataFrame) -> dict[str, object] | None:
    """The digest of ``frame`` restricted to the recorded columns when it has the recorded
    rows and every recorded column (name and type) plus new ones: a change may add columns,
    such as a new yardstick, as long as every old column is unchanged. None otherwise."""
    names = [column.split(":", 1)[0] for column in old["columns"]]
    if len(frame) != old["rows"] or not set(names) < set(frame.columns):
        return None
    return frame_digest(frame[names])


def second_machine_environment() -> dict[str, str]:
    """The environment in which this machine computes as another x86-64 machine would: another
    OpenBLAS kernel, numpy without its AVX-512 loops, numba for a generic CPU (on other
    architectures only the last; the JIT, not kernels compiled ahead of time for this CPU)."""
    env = dict(os.environ, NUMBA_CPU_NAME="generic", NETSIM_AOT="0")
    if platform.machine().lower() in ("x86_64", "amd64"):
        env["OPENBLAS_CORETYPE"] = "Sandybridge"
        try:
            from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
        except ImportError:  # a numpy without these: leave its dispatch as it is
            return env
        wide = [
            feature
            for feature in __cpu_dispatch__
            if __cpu_features__.get(feature) and ("AVX512" in feature or feature == "X86_V4")
        ]
        if wide:
            env["NPY_DISABLE_CPU_FEATURES"] = " ".join(wide)
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="record the references")
    parser.add_argument("--only", nargs="+", metavar="CASE", help="these cases only")
    parser.add_argument(
        "--second-machine",
        action="store_true",
        help="compare in a child process that computes as another x86-64 machine would",
    )
    parser.add_argument(
        "--engine",
        choices=("auto", "simpy"),
        default="auto",
        help="what runs exact mode's events (auto: the compiled core where it applies)",
    )
    args = parser.parse_args(argv)
    cases = args.only or list(CASES)
    if args.second_machine:
        command = [sys.executable, "-m", "tests.table_digests", "--only", *cases,
                   "--engine", args.engine]  # fmt: skip
        return subprocess.run(command, cwd=REPO, env=second_machine_environment()).returncode
    recorded = json.loads(DIGESTS.read_text()) if DIGESTS.is_file() else {}
    problems: list[str] = []
    for case in cases:
        started = time.perf_counter()
        now = run_case(case, args.engine)
        wall = time.perf_counter() - started
        if args.write:
            write_references(case, now)
            recorded[case] = {
                key: value for key, value in now.items() if key not in ("frames", "exact_engine")
            }
            print(f"{case}: {len(now['tables'])} tables recorded ({wall:.1f} s)")
            continue
        if case not in recorded:
            problems.append(f"{case}: no recorded digest")
            continue
        found, inexact = compare(case, recorded[case], now)
        problems.extend(found)
        if found:
            verdict = "DIFFERS"
        elif inexact:
            verdict = f"within the contract, not byte-identical: {', '.join(inexact)}"
        else:
            verdict = "identical"
        print(f"{case}: {verdict} ({wall:.1f} s; exact mode: {now['exact_engine']})")
    if args.write:
        DIGESTS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
        return 0
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
