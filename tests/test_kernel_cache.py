"""numba's disk cache of netsim's kernels is dropped when a module a kernel inlines changes
(:mod:`netsim.kernel_cache`): the modules are derived from the kernels' code, every cached
kernel of the package is guarded, and an edit of a module in a copy of the package drops
exactly the kernels that hold its code or constants, and no other."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from numba.core.caching import NullCache
from numba.core.dispatcher import Dispatcher

import netsim
from netsim.kernel_cache import PACKAGE, is_guarded, kernel_sources

#: The files the exact core's kernel holds: its own, the queue and the shared layout, each
#: component's compiled handlers (the transport's, the gossip engine's, the broadcast's
#: adoption and coverage check, the walk's cycle) and the links' constants (the rejection
#: tries, the loss reasons).
EXACT_CORE_SOURCES = {
    "netsim/protocols/exact/kernel.py",
    "netsim/event_queue.py",
    "netsim/network/links.py",
    "netsim/network/links_exact.py",
    "netsim/protocols/gossip_exact.py",
    "netsim/protocols/broadcast.py",
    "netsim/protocols/walk/compiled.py",
    "netsim/protocols/walk/kernels.py",
}


def _relative(paths: frozenset[Path]) -> set[str]:
    return {path.relative_to(PACKAGE.parent).as_posix() for path in paths}


def _package_copy(tmp_path: Path) -> Path:
    """A copy of the netsim package (without its bytecode) in ``tmp_path``; its folder."""
    shutil.copytree(PACKAGE, tmp_path / "netsim", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _run(code: str, root: Path, cache: Path, *args: str) -> str:
    """``code`` run by a fresh interpreter that imports netsim from ``root`` and keeps numba's
    cache in ``cache``; its output."""
    env = {**os.environ, "PYTHONPATH": str(root), "NUMBA_CACHE_DIR": str(cache)}
    env.pop("NUMBA_DISABLE_JIT", None)
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_exact_cores_kernel_holds_the_modules_it_inlines() -> None:
    """Derived from its code: the modules whose compiled functions it calls, and the links'
    module, whose constants it imports; not the errors' module, which its module imports
    for Python code only. A helper that reads a constant computed from an imported one
    (``PEER_DRAWS = REJECTION_TRIES + 1``) holds the module it was imported from."""
    from netsim.protocols.exact import core, kernel

    sources = _relative(kernel_sources(kernel.run_events))
    assert sources >= EXACT_CORE_SOURCES
    assert "netsim/errors.py" not in sources
    assert "netsim/protocols/exact/core.py" not in sources  # the Python side
    assert "SimulationError" in vars(core)  # imported by the core's Python side only
    assert "netsim/network/links.py" in _relative(kernel_sources(kernel.what_is_missing))


def test_a_kernel_outside_the_package_holds_the_package_modules_it_inlines() -> None:
    """A benchmark's kernel (``benchmarks/hold.py`` inlines the event queue's push and pop)
    is compiled again when the queue changes: its sources are the package files it inlines,
    not its own file (numba's cache keys on that one)."""
    from benchmarks import hold

    sources = _relative(kernel_sources(hold._hold))
    assert "netsim/event_queue.py" in sources
    assert not any(path.startswith("benchmarks/") for path in sources)


def _package_modules() -> list[str]:
    """Every module of the package (not ``netsim.__main__``, which runs the command line)."""
    found = pkgutil.walk_packages(netsim.__path__, "netsim.")
    return sorted(module.name for module in found if not module.name.endswith("__main__"))


def _cached_dispatchers(module: object) -> list[Dispatcher]:
    """The numba dispatchers with a disk cache that ``module`` binds, directly or in a dict,
    list or tuple."""
    found = []
    for value in vars(module).values():
        inside = value.values() if isinstance(value, dict) else value
        for candidate in inside if isinstance(value, dict | list | tuple) else (value,):
            if isinstance(candidate, Dispatcher) and not isinstance(candidate._cache, NullCache):
                found.append(candidate)
    return found


def test_every_cached_kernel_of_the_package_is_guarded() -> None:
    """Every module of the package imported: each cached dispatcher it binds (the exact
    core's kernel made by its ``kernel`` wrapper, the walk's exchange kernels held in a dict)
    was checked by a guard."""
    kernels = []  # (module, dispatcher): a module may bind several of one name
    for name in _package_modules():
        module = importlib.import_module(name)
        kernels += [(name, dispatcher) for dispatcher in _cached_dispatchers(module)]
    from netsim.protocols.exact import kernel
    from netsim.protocols.walk import kernels as walk_kernels

    found = {id(dispatcher) for _name, dispatcher in kernels}
    assert id(kernel.run_events) in found
    assert {id(kernel) for kernel in walk_kernels.EXCHANGE_KERNELS.values()} <= found
    unguarded = sorted(
        f"{name}:{kernel.py_func.__qualname__}"
        for name, kernel in kernels
        if not is_guarded(kernel)
    )
    assert not unguarded, f"cached kernels without a guard: {unguarded}"


#: Run in a copy of the package: imports the modules with cached kernels (argv[1]), then
#: edits one after another each file some kernel holds that is not its own, and the files in
#: argv[2]: appends a comment, imports the modules again (netsim's purged first) and notes the
#: kernels the guards dropped.
EDITS = textwrap.dedent(
    """
    import importlib, json, sys

    modules, extra = json.loads(sys.argv[1]), json.loads(sys.argv[2])

    def imported():
        for name in [name for name in sys.modules if name.split(".")[0] == "netsim"]:
            del sys.modules[name]
        for name in modules:
            importlib.import_module(name)
        return sys.modules["netsim.kernel_cache"]

    guard = imported()
    root = guard.PACKAGE.parent
    assert root.samefile("."), root  # the copy's package
    kernels = {}
    for name in modules:
        for kernel in guard.cached_kernels(sys.modules[name]):
            code = kernel.py_func.__code__
            own = guard.Path(code.co_filename).relative_to(root).as_posix()
            paths = [path.relative_to(root).as_posix() for path in guard.kernel_sources(kernel)]
            name = kernel.py_func.__module__ + "." + kernel.py_func.__qualname__
            kernels[name] = [own, sorted(paths)]
    first = sorted(set(guard.FLUSHED))
    flushed = {"": sorted(set(imported().FLUSHED))}
    foreign = {path for own, paths in kernels.values() for path in paths if path != own}
    for edited in sorted(foreign) + extra:
        with open(root / edited, "a", encoding="utf-8") as file:
            file.write("# edited\\n")
        flushed[edited] = sorted(set(imported().FLUSHED))
    print(json.dumps({"kernels": kernels, "first": first, "flushed": flushed}))
    """
)


def _kernel_modules() -> list[str]:
    """The modules that guard their kernels (they call the guard at their end)."""
    return sorted(
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for path in PACKAGE.rglob("*.py")
        if "\nguard_kernels(__name__)" in path.read_text(encoding="utf-8")
    )


def test_an_edit_of_an_inlined_module_drops_exactly_the_kernels_holding_it(tmp_path) -> None:
    """In a copy of the package, with a cache of its own: the first import drops every kernel
    (no stamps recorded yet), a second import none. Then each file some kernel holds that is
    not its own (the links' constants, the queue, the broadcast's and the walk's modules),
    edited one after another, drops exactly the kernels whose derived sources hold it: the
    links' module the exact core's kernel among them. The errors' module, which the exact
    core imports for its Python code only, drops none."""
    modules = _kernel_modules()
    assert "netsim.protocols.exact.kernel" in modules
    assert len(modules) >= 10
    root = _package_copy(tmp_path / "copy")
    errors = "netsim/errors.py"
    output = _run(EDITS, root, tmp_path / "numba", json.dumps(modules), json.dumps([errors]))
    result = json.loads(output)
    kernels, flushed = result["kernels"], result["flushed"]
    assert "netsim.protocols.exact.kernel.run_events" in kernels
    assert result["first"] == sorted(kernels)
    assert flushed.pop("") == []
    assert flushed.pop(errors) == []
    assert not any(errors in paths for _own, paths in kernels.values())
    assert set(flushed) >= EXACT_CORE_SOURCES - {"netsim/protocols/exact/kernel.py"}
    for edited, dropped in flushed.items():
        holding = sorted(name for name, (_own, paths) in kernels.items() if edited in paths)
        assert dropped == holding, edited
    assert "netsim.protocols.exact.kernel.run_events" in flushed["netsim/network/links.py"]


#: A kernel of a module that inlines a function and a constant of another module.
PROBE_CONSTANTS = """
from numba import njit

STEP = 1


@njit(inline="always")
def helper(x):
    return x + STEP
"""
PROBE_KERNEL = """
from numba import njit

from netsim._probe_constants import STEP, helper
from netsim.kernel_cache import guard_kernels


@njit(cache=True)
def probe(x):
    return helper(x) * 10 + STEP


guard_kernels(__name__)
"""
#: The probe's result and how many times it was loaded from numba's cache.
PROBE_RUN = (
    "from netsim._probe_kernel import probe; print(probe(1), sum(probe.stats.cache_hits.values()))"
)


def test_a_fresh_process_runs_the_edited_inlined_module(tmp_path) -> None:
    """A kernel compiled and cached, loaded from the cache by the next process; after an
    edit of the module it inlines a function and a constant from (not of its own file), the
    next process runs the new code: 2·10 + 1, then 3·10 + 2."""
    root = tmp_path / "copy"
    (root / "netsim").mkdir(parents=True)
    for name in ("__init__.py", "version.py", "kernel_cache.py"):
        shutil.copy(PACKAGE / name, root / "netsim" / name)
    constants = root / "netsim" / "_probe_constants.py"
    constants.write_text(PROBE_CONSTANTS, encoding="utf-8")
    (root / "netsim" / "_probe_kernel.py").write_text(PROBE_KERNEL, encoding="utf-8")
    cache = tmp_path / "numba"
    assert _run(PROBE_RUN, root, cache).split() == ["21", "0"]
    assert _run(PROBE_RUN, root, cache).split() == ["21", "1"]  # from the cache
    constants.write_text(PROBE_CONSTANTS.replace("STEP = 1", "STEP = 2"), encoding="utf-8")
    assert _run(PROBE_RUN, root, cache).split() == ["32", "0"]
