"""What the anchored benchmarks share: where the outside anchors are, where their builds go,
the machine's description and load, and the spread of paired figures.

The anchors (``../shared/bench`` beside the checkout, or where ``NETSIM_BENCH_ANCHORS`` says)
are PeerSim 1.0.5 with its push-pull benchmark (``peersim/``) and a C hold model
(``c/hold.c``): code the benchmarks build and run themselves, never a constant taken from
another machine or day (:mod:`benchmarks.peersim`, :mod:`benchmarks.hold`). Their builds go
to :func:`build_root`, outside the repository.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path

from benchmarks import REPO

#: The environment variable naming the anchors' folder, when it is not ``../shared/bench``.
ANCHORS_VARIABLE = "NETSIM_BENCH_ANCHORS"


def anchors_folder() -> Path:
    """The anchors' folder: ``$NETSIM_BENCH_ANCHORS``, else ``../shared/bench`` beside the
    checkout."""
    given = os.environ.get(ANCHORS_VARIABLE)
    return Path(given) if given else REPO.parent / "shared" / "bench"


def build_root() -> Path:
    """Where anchors are built: ``$XDG_CACHE_HOME/netsim/bench`` (``~/.cache/netsim/bench``),
    outside the repository."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "netsim" / "bench"


def missing(paths: Iterable[Path], tools: Iterable[str]) -> str | None:
    """Why an anchor cannot run here (the first path or tool absent), or None."""
    for path in paths:
        if not path.exists():
            return f"{path} is absent"
    for tool in tools:
        if shutil.which(tool) is None:
            return f"{tool} is not on the PATH"
    return None


def sources_digest(paths: Sequence[Path]) -> str:
    """A short digest of ``paths``' contents: a build is redone when a source changes."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def cpu_model() -> str:
    """The processor's model name (Linux ``/proc/cpuinfo``, as ``lscpu`` shows it), else what
    :mod:`platform` reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def machine_line() -> str:
    """The machine: architecture, processor model, cores, Python."""
    return (
        f"machine: {platform.machine()}, {cpu_model()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages (``os.getloadavg``), or ``unknown``."""
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def spread(values: Sequence[float], digits: int = 2) -> str:
    """``median [min–max]`` of ``values``."""
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:.{digits}f} [{low:.{digits}f}–{high:.{digits}f}]"


def paired_ratios(numerators: Sequence[float], denominators: Sequence[float]) -> list[float]:
    """The quotient within each pair: both figures measured one after the other."""
    return [a / b for a, b in zip(numerators, denominators, strict=True)]
