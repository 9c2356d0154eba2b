"""Shared fixtures: where the research-only data lives, and small scenario builders."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# No per-example deadline: speed is measured by the benchmarks, not by tests, and the first
# call of a compiled (numba) kernel on a fresh checkout includes its compilation.
settings.register_profile("netsim", deadline=None)
settings.load_profile("netsim")

# The kernels run on numba's JIT in the tests and the processes they start, whatever the user
# compiled ahead of time (``netsim compile``): the tests of that path (tests/test_aot.py) build
# their own module and turn it on in their child processes.
os.environ.setdefault("NETSIM_AOT", "0")

#: The options of pytest-xdist that pyproject.toml's addopts gives (``-n auto --maxprocesses 4
#: --dist loadfile``), each taking one value.
XDIST_OPTIONS = (("-n", "--numprocesses"), ("--maxprocesses",), ("--dist",))

#: cgroup v2's CPU quota of this process's group: "max" or "<quota> <period>" (microseconds).
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """Without pytest-xdist (``-p no:xdist``, or not installed) the worker options of addopts are
    accepted and ignored, and the run stays in this process, rather than pytest refusing them
    as unknown. (A conftest's option is known when addopts is parsed: this file is an initial
    conftest, in testpaths.)"""
    if pluginmanager.has_plugin("xdist"):
        return
    group = parser.getgroup("xdist", "pytest-xdist is not loaded: its options are ignored")
    for names in XDIST_OPTIONS:
        # _addoption, as pytest-xdist itself does: addoption refuses lowercase short options.
        group._addoption(*names, dest=f"ignored_{names[-1].lstrip('-')}", help="ignored")


def usable_cores() -> int:
    """The cores this process may run on: those its CPU affinity allows, fewer if its cgroup's
    quota (a container's ``--cpus``) grants fewer whole cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    try:
        quota, period = CGROUP_CPU_MAX.read_text(encoding="utf-8").split()
        if quota != "max":
            cores = min(cores, max(1, int(quota) // int(period)))
    except (OSError, ValueError):  # no cgroup v2, or a quota it does not write as expected
        pass
    return cores


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """What ``-n auto`` means: one worker per usable core (:func:`usable_cores`; pytest-xdist
    would count the machine's physical cores, all of a container's host's among them), unless
    PYTEST_XDIST_AUTO_NUM_WORKERS says how many. ``--maxprocesses`` caps either."""
    given = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "")
    return int(given) if given.isdigit() else usable_cores()


@pytest.fixture(scope="session", autouse=True)
def _private_yardstick_cache(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """The yardsticks' disk cache (netsim.learning.yardstick_cache) in a directory of this test
    session, never the user's: the tests (and the processes they start) still use a cache.
    The workers of a parallel run (pytest-xdist) share one, in the session's directory above
    their own, as the tests of a run in one process do: a yardstick is computed once, whichever
    worker needs it first (the cache's writes are atomic renames, safe between processes)."""
    if hasattr(request.config, "workerinput"):  # a worker of pytest-xdist
        directory = tmp_path_factory.getbasetemp().parent / "netsim-cache"
        directory.mkdir(exist_ok=True)
    else:
        directory = tmp_path_factory.mktemp("netsim-cache")
    before = os.environ.get("NETSIM_CACHE_DIR")
    os.environ["NETSIM_CACHE_DIR"] = str(directory)
    yield directory
    if before is None:
        os.environ.pop("NETSIM_CACHE_DIR", None)
    else:
        os.environ["NETSIM_CACHE_DIR"] = before


#: The wall-clock limit of a test's child process (``python -m netsim …``, a shell block of the
#: docs): there only to end a hang, so generous enough that a loaded machine (two cores busy
#: with an experiment, a first run compiling netsim's kernels) never reaches it. A test asserts
#: how long something takes only where that is what it checks, never through this limit.
SUBPROCESS_HANG_LIMIT = 600

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
STUNNER_TRACE = SHARED_DATA / "traces" / "stunner" / "peersim_session_100.txt"


@pytest.fixture(scope="session")
def aot_kernels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for ``NETSIM_AOT_DIR`` holding the kernels compiled ahead of time
    (``netsim compile``, :mod:`netsim.aot`), built once per session (some 15 s of CPU)."""
    from netsim.aot import compile_kernels
    from netsim.compiled import aot_folder

    root = tmp_path_factory.mktemp("netsim-aot")
    compile_kernels(root / aot_folder().name)
    return root


def require_shared(path: Path) -> Path:
    """Skip the calling test, saying why, when a file of ../shared/data is not available."""
    if not path.is_file():
        pytest.skip(
            f"data file {path} is absent (research-only or large data is read from "
            "../shared/data and never committed)"
        )
    return path


@pytest.fixture
def stunner_trace() -> Path:
    return require_shared(STUNNER_TRACE)
