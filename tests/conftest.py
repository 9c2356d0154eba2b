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


@pytest.fixture(scope="session", autouse=True)
def _private_yardstick_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The yardsticks' disk cache (netsim.learning.yardstick_cache) in a directory of this test
    session, never the user's: the tests (and the processes they start) still use a cache."""
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
