"""What the experiment scripts of ``analysis/`` share: running tasks in worker processes into
one results file per experiment, and the ``run`` / ``figures`` command line."""

from __future__ import annotations

import argparse
import io
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from netsim.storage import atomic_write_bytes


def run_experiments(
    names: Sequence[str],
    jobs: int,
    *,
    tasks: Callable[[str], list[Any]],
    run_one: Callable[[Any], pd.DataFrame],
    results: Callable[[str], Path],
    chunksize: int = 1,
) -> None:
    """For each experiment: its tasks in ``jobs`` processes, the non-empty frames they return
    concatenated and written (atomically, once all are done) to ``results(name)``."""
    for name in names:
        started = time.perf_counter()
        todo = tasks(name)
        with ProcessPoolExecutor(jobs) as pool:
            frames = [f for f in pool.map(run_one, todo, chunksize=chunksize) if not f.empty]
        buffer = io.BytesIO()
        pd.concat(frames, ignore_index=True).to_parquet(buffer, index=False)
        path = results(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, buffer.getvalue())
        print(f"{name}: {len(todo)} runs in {time.perf_counter() - started:.0f} s")


def experiment_main(
    description: str,
    experiments: Sequence[str],
    run: Callable[[list[str], int], None],
    draw: Callable[[], None],
    argv: list[str] | None = None,
) -> int:
    """``run [--jobs N] [--only NAME ...]`` or ``figures``."""
    parser = argparse.ArgumentParser(description=description)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run the experiments")
    run_parser.add_argument("--jobs", type=int, default=2)
    run_parser.add_argument("--only", nargs="+", choices=experiments, default=list(experiments))
    commands.add_parser("figures", help="draw the figures from analysis/results")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.only, args.jobs)
    else:
        draw()
    return 0
