"""Before/after check of a refactor: a digest of every table of every shipped scenario.

A refactor must change no number. This script runs each shipped scenario (shortened with
overrides so that the whole set takes minutes, not days) at a fixed seed, in memory, and
records for every table its row count, its columns with their types, and a SHA-256 over the
exact values (pandas' per-row hash of the raw bits, so 0.1 + 0.2 and 0.3 differ).

    python -m tests.table_digests --write   # record the digests (on the commit before)
    python -m tests.table_digests           # compare with the recorded ones (after)
    python -m tests.table_digests --only quickstart dola/synthetic

``tests/table_digests.json`` holds the recorded digests; ``tests/test_table_digests.py``
checks a fast subset in the default test run. The churn of the ``paper-*`` walk scenarios
falls back to the shipped synthetic trace where the research-only STUNner file is absent:
the digest records which one a run used, and a comparison skips runs whose data differ.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
DIGESTS = Path(__file__).with_name("table_digests.json")
SEED = 7

#: Shipped scenario (relative to ``scenarios/``) → overrides that keep its run short. Every
#: configuration of the walk grid is covered in both gossip modes through two representative
#: files per mode; the other grid files differ from these only in parameter values.
CASES: dict[str, tuple[str, ...]] = {
    "quickstart": ("duration=40min",),
    "walk/reduced-drw1-d10-kill0": ("duration=3min",),
    "walk/reduced-drw100-d20-kill5": ("duration=3min",),
    "walk/reduced-drw1-d10-kill5#rounds": ("duration=10min", "gossip.mode=rounds"),
    "walk/reduced-drw100-d100-kill0#rounds": ("duration=10min", "gossip.mode=rounds"),
    "walk/paper-drw1-d10-kill5#rounds": ("duration=4min", "gossip.mode=rounds"),
    "walk/reduced-sweep": ("duration=5min",),
    "learning/spambase": ("duration=3000s",),
    "learning/segmentation": ("duration=1500s",),
    "learning/mnist": ("duration=1500s", "nodes=2000"),
    "learning/spambase-gossip-learning": ("duration=30s",),
    "learning/spambase-service-stunner": ("duration=10min",),
    "dola/synthetic": ("duration=120s",),
    "mi_ogd/regression": ("duration=300s",),
}

#: The cases the default test run checks (a few seconds each).
FAST_CASES: tuple[str, ...] = (
    "quickstart",
    "walk/reduced-drw1-d10-kill5#rounds",
    "walk/reduced-drw100-d20-kill5",
    "learning/spambase-gossip-learning",
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


def run_case(case: str) -> dict[str, object]:
    """Run one case in memory and digest its tables."""
    from netsim.scenario.loader import load_scenario
    from netsim.scenario.runner import run_in_memory

    file = case.split("#")[0]
    path = REPO / "scenarios" / f"{file}.yaml"
    scenario = load_scenario(path, CASES[case])
    scenario = scenario.model_copy(update={"seed": SEED})
    _, frames = run_in_memory(scenario)
    churn = getattr(scenario, "churn", None)
    trace = getattr(churn, "path", None)
    if trace is not None and not Path(trace).is_file() and getattr(churn, "fallback", None):
        trace = churn.fallback.path
    return {
        "churn_source": Path(trace).name if trace is not None else None,
        "tables": {name: frame_digest(frame) for name, frame in sorted(frames.items())},
    }


def compare(case: str, recorded: dict, now: dict) -> list[str]:
    """Differences between a recorded digest and the current one (empty: identical)."""
    if recorded.get("churn_source") != now.get("churn_source"):
        return []  # different input data (research-only trace present on one machine only)
    problems = []
    old_tables, new_tables = recorded["tables"], now["tables"]
    for name in sorted(set(old_tables) | set(new_tables)):
        old, new = old_tables.get(name), new_tables.get(name)
        if old is None:
            problems.append(f"{case}: new table {name}")
        elif new is None:
            problems.append(f"{case}: table {name} is no longer written")
        elif old != new:
            what = [key for key in ("rows", "columns", "sha256") if old[key] != new[key]]
            problems.append(f"{case}: table {name} differs in {', '.join(what)}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="record the digests")
    parser.add_argument("--only", nargs="+", metavar="CASE", help="these cases only")
    args = parser.parse_args(argv)
    cases = args.only or list(CASES)
    recorded = json.loads(DIGESTS.read_text()) if DIGESTS.is_file() else {}
    problems: list[str] = []
    for case in cases:
        started = time.perf_counter()
        now = run_case(case)
        wall = time.perf_counter() - started
        if args.write:
            recorded[case] = now
            print(f"{case}: {len(now['tables'])} tables recorded ({wall:.1f} s)")
            continue
        if case not in recorded:
            problems.append(f"{case}: no recorded digest")
            continue
        found = compare(case, recorded[case], now)
        problems.extend(found)
        print(f"{case}: {'DIFFERS' if found else 'identical'} ({wall:.1f} s)")
    if args.write:
        DIGESTS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
        return 0
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
