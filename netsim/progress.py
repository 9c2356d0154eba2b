"""Progress on a terminal: a run's simulated clock, and a sweep that advances within runs.

Both bars are tqdm's (rate, elapsed and remaining wall time come with it). A run's bar counts
simulated seconds and shows the simulated clock; a sweep's bar counts runs, fractions
included: every worker writes how far its run is into a small file under
``<sweep>/runs/.progress/`` (at most once a second), and the bar reads them twice a second.
Files are used because they reach the parent from local processes and Dask workers alike
(a sweep's workers share its directory already).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tqdm import tqdm

from netsim.units import format_duration

#: Where a sweep's workers write how far their runs are (inside ``<sweep>/runs/``; hidden, so
#: nothing takes it for a run directory).
PROGRESS_DIR = ".progress"
#: Wall seconds between two writes of one run's progress file, and between two reads.
WRITE_EVERY = 1.0
READ_EVERY = 0.5


def terminal_size(stream: TextIO) -> dict[str, int]:
    """tqdm's ``ncols`` and ``nrows`` for the terminal ``stream`` writes to, 80 × 24 where it
    reports no size (tqdm would otherwise draw nothing)."""
    try:
        columns, rows = os.get_terminal_size(stream.fileno())
    except (OSError, ValueError, AttributeError):
        columns, rows = 0, 0
    return {"ncols": columns if columns > 0 else 80, "nrows": rows if rows > 0 else 24}


class RunProgressBar:
    """A run's progress in simulated seconds, with the simulated clock, the speed (simulated
    seconds per wall second) and the wall time left."""

    def __init__(self, duration: float, stream: TextIO) -> None:
        self.duration = duration
        self.bar = tqdm(
            total=duration,
            file=stream,
            unit="sim s",
            desc=self._clock(0.0),
            **terminal_size(stream),
            leave=False,
            bar_format="{desc}{percentage:3.0f}%|{bar}| [{elapsed}<{remaining}, {rate_fmt}]",
        )

    def _clock(self, now: float) -> str:
        done = format_duration(now) if now > 0 else "0s"
        return f"{done} of {format_duration(self.duration)} simulated "

    def __call__(self, now: float) -> None:
        self.bar.set_description_str(self._clock(now), refresh=False)
        self.bar.update(min(now, self.duration) - self.bar.n)

    def close(self) -> None:
        self.bar.close()


class RunProgressWriter:
    """In a sweep's worker: the progress callback of one run, writing the fraction simulated
    to ``<directory>/<run id>`` at most every :data:`WRITE_EVERY` wall seconds."""

    def __init__(self, directory: Path, run_id: str, duration: float) -> None:
        self.file = directory / run_id
        self.duration = duration
        self.last = 0.0

    def __call__(self, now: float) -> None:
        wall = time.monotonic()
        if wall - self.last < WRITE_EVERY:
            return
        self.last = wall
        fraction = min(now / self.duration, 1.0) if self.duration > 0 else 1.0
        with contextlib.suppress(OSError):  # progress is a display: never fail a run on it
            self.file.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.file.with_name(f".{self.file.name}.{os.getpid()}")
            temporary.write_text(json.dumps({"fraction": fraction}), encoding="utf-8")
            os.replace(temporary, self.file)

    def remove(self) -> None:
        """The run ended (its count moves to the finished runs)."""
        self.file.unlink(missing_ok=True)


def running_fractions(directory: Path) -> dict[str, float]:
    """The fraction simulated of every run a worker reports as running under ``directory``."""
    found: dict[str, float] = {}
    try:
        files = [f for f in directory.iterdir() if not f.name.startswith(".")]
    except OSError:
        return found
    for file in files:
        try:
            found[file.name] = float(json.loads(file.read_text(encoding="utf-8"))["fraction"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being replaced, or just removed
    return found


@dataclass
class SweepProgress:
    """Counts while a sweep runs (passed to the progress callback after every run)."""

    total: int
    already_done: int
    complete: int = 0
    failed: int = 0
    started: float = 0.0
    #: Each reason the runs of this invocation ran exact mode on SimPy, not the compiled
    #: core, and how many runs did (the sweep tells each once: ``netsim sweep``).
    fallbacks: dict[str, int] = field(default_factory=dict)

    @property
    def finished(self) -> int:
        return self.already_done + self.complete + self.failed

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started


class SweepProgressBar:
    """A sweep's progress in runs: finished runs plus the fractions of the running ones,
    redrawn twice a second by a background thread (so wall time and the estimate move
    between runs), with the number of runs complete and failed."""

    def __init__(self, stream: TextIO, progress_dir: Path) -> None:
        self.progress_dir = progress_dir
        self.state: SweepProgress | None = None
        self.lock = threading.Lock()
        self.bar = tqdm(
            total=1,
            file=stream,
            unit="run",
            desc="starting ",
            **terminal_size(stream),
            leave=False,
            bar_format="{desc}{percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]",
        )
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._poll, name="sweep-progress", daemon=True)
        self.thread.start()

    def __call__(self, state: SweepProgress) -> None:
        """After every run: the counts of finished and failed runs."""
        with self.lock:
            self.state = state
            self.bar.total = state.total
        self._draw()

    def _poll(self) -> None:
        while not self.stopped.wait(READ_EVERY):
            self._draw()

    def _draw(self) -> None:
        with self.lock:
            state = self.state
            if state is None:
                return
            running = running_fractions(self.progress_dir)
            position = min(state.finished + sum(running.values()), state.total)
            failed = f", {state.failed} failed" if state.failed else ""
            self.bar.set_description_str(
                f"{state.finished}/{state.total} runs{failed}, {len(running)} running ",
                refresh=False,
            )
            self.bar.n = position
            self.bar.refresh()

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()
        self.bar.close()
