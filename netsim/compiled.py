"""The seam between netsim's compiled kernels and numba: ``from netsim.compiled import njit``.

numba, imported and initialised, is some 120 MiB of a rounds run's resident memory: 61 MiB to
import it (llvmlite, a bit of scipy) and 60 MiB at the first call of a cached kernel (its
compiler and the typing of every builtin; docs/performance.md, "Footprint"). The kernels a
rounds-mode walk run calls from Python (:mod:`netsim.aot_exports`) can instead be compiled
ahead of time into an extension module (``netsim compile``, :mod:`netsim.aot`), kept in the
user's cache folder (``$NETSIM_AOT_DIR``, else ``$XDG_CACHE_HOME/netsim/aot`` or
``~/.cache/netsim/aot``, in a subfolder named after the numba, numpy and Python versions and the
processor: :func:`aot_folder`). Such a module needs numpy only.

When that module is there and was compiled from the kernels' current sources (its
``manifest.json`` holds each source file's SHA-256), :func:`njit` does not import numba: it
returns a :class:`Kernel`, which runs the exported function when the kernel has one and the
call's arguments have the types it was compiled for (:func:`_argument_check`). Anything else (a
kernel without an exported form, a call with other argument types) imports numba and turns every
kernel into numba's JIT dispatcher (:func:`use_jit`): module globals, and the dicts, lists and
tuples a module binds, are replaced, so compiled code calling compiled code sees dispatchers.
Without the module, or with a stale one, :func:`njit` is ``numba.njit``, as before;
:data:`STATE` says why, and the manifest of a run says which ran (``kernels``,
:func:`kernels_engine`). ``NETSIM_AOT=0`` turns the compiled module off.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

#: The environment variable that turns the compiled module off (``0``, ``off``, ``no``).
AOT_VARIABLE = "NETSIM_AOT"
#: The environment variable naming the folder of compiled modules.
AOT_DIR_VARIABLE = "NETSIM_AOT_DIR"
#: The compiled module's name (and file stem).
MODULE_NAME = "netsim_aot_kernels"
#: The record of what a compiled module holds, beside it.
MANIFEST = "manifest.json"
#: The netsim package's parent: a manifest's source paths are relative to it.
ROOT = Path(__file__).resolve().parent.parent

#: What this process runs the kernels on: ``module``, the compiled module (None without one);
#: ``jit``, whether numba's JIT was brought in; ``reason``, why the compiled module is not
#: used, or why numba was imported beside it (None if neither happened).
STATE: dict[str, Any] = {"module": None, "exports": {}, "checks": {}, "jit": False, "reason": None}

#: How a call's argument must look to run an exported function: (position, what, expected,
#: dimensions). ``what`` is the position in the tuple the argument is for an array in a tuple,
#: :data:`ARRAY` for an array argument (``expected`` its dtype, :func:`dtype_of`), :data:`TUPLE`
#: for a tuple (the last field its length), :data:`SCALAR` for a scalar (``expected`` the name
#: of the sample's Python type). ``netsim compile`` writes each export's checks into the
#: manifest (:func:`netsim.aot_exports.call_checks`), so a run reads them without importing
#: the exports' modules.
Check = tuple[int, int, Any, int]
ARRAY, TUPLE, SCALAR = -1, -2, -3

#: The scalar types a call may pass where the export takes a float, an int or a truth value:
#: those numba's JIT gives the same machine type (float64, int64, boolean), and a Python or
#: numpy int for a float (converted exactly, as numba converts it at its first operation with
#: a float). Anything else (a numpy float32 or int32, a bool for an int) runs on the JIT.
SCALAR_TYPES: dict[str, tuple[type, ...]] = {
    "float": (float, np.float64, int, np.int64),
    "int": (int, np.int64),
    "bool": (bool, np.bool_),
}

#: Every :class:`Kernel` made in this process, in order.
_KERNELS: list[Kernel] = []


def aot_directory() -> Path:
    """The folder holding compiled modules: ``$NETSIM_AOT_DIR``, else ``$XDG_CACHE_HOME/netsim/
    aot``, else ``~/.cache/netsim/aot`` (beside numba's cache, ``netsim/__init__.py``)."""
    chosen = os.environ.get(AOT_DIR_VARIABLE)
    if chosen:
        return Path(chosen).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "netsim" / "aot"


def _processor() -> str:
    """The processor's model and flags (what the compiled code may use), read without numba."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    wanted = ("model name", "flags", "Features", "CPU part")
    lines = {line.split(":")[0].strip(): line for line in text.splitlines() if ":" in line}
    return "\n".join(lines.get(key, "") for key in wanted) + platform.machine()


def _version(distribution: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "absent"


def aot_folder() -> Path:
    """The compiled module's folder for this machine: named after a digest of the numba,
    numpy and Python versions and the processor (a module built elsewhere is not loaded)."""
    environment = "\n".join(
        (_version("numba"), np.__version__, sys.version, platform.platform(), _processor())
    )
    return aot_directory() / hashlib.sha256(environment.encode()).hexdigest()[:16]


def file_digest(path: Path) -> str:
    """The SHA-256 of a file's bytes (empty if it cannot be read)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def stale_sources(sources: dict[str, str]) -> list[str]:
    """The sources (paths relative to netsim's parent folder -> SHA-256) whose bytes differ
    now: a module compiled from them is stale."""
    return sorted(path for path, digest in sources.items() if file_digest(ROOT / path) != digest)


def kernel_key(function: Callable) -> str:
    """A kernel's name across processes: ``module:qualified name``, and the values its closure
    holds (one kernel per option set: ``EXCHANGE_KERNELS``)."""
    key = f"{function.__module__}:{function.__qualname__}"
    cells = getattr(function, "__closure__", None) or ()
    if cells:
        key += repr(tuple(cell.cell_contents for cell in cells))
    return key


def _load(folder: Path) -> tuple[ModuleType | None, dict[str, str], str | None]:
    """The compiled module in ``folder``, its exports (kernel key -> name in the module), and
    why it cannot be used (None if it can)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, {}, f"no compiled kernels in {folder} (netsim compile builds them)"
    stale = stale_sources(manifest.get("sources", {}))
    if stale:
        return None, {}, f"the compiled kernels are stale: {', '.join(stale)} changed"
    path = folder / manifest.get("file", "")
    loader = importlib.machinery.ExtensionFileLoader(MODULE_NAME, str(path))
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path, loader=loader)
    try:
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        loader.exec_module(module)
    except (ImportError, OSError) as exc:
        return None, {}, f"the compiled kernels cannot be loaded: {exc}"
    exports = {key: name for name, key in manifest.get("exports", {}).items()}
    missing = [name for name in exports.values() if not hasattr(module, name)]
    if missing:
        return None, {}, f"the compiled kernels lack {', '.join(missing)}"
    checks = manifest.get("checks", {})
    if any(name not in checks for name in exports.values()):
        return None, {}, "the compiled kernels' manifest has no argument checks (netsim compile)"
    STATE["checks"] = {
        name: (arity, tuple(tuple(check) for check in listed))
        for name, (arity, listed) in checks.items()
    }
    return module, exports, None


def _decide() -> None:
    """Load the compiled module unless it is turned off, absent or stale (:data:`STATE`)."""
    if os.environ.get(AOT_VARIABLE, "").strip().lower() in ("0", "off", "no", "false"):
        STATE["reason"] = f"{AOT_VARIABLE}={os.environ[AOT_VARIABLE]}"
        return
    module, exports, reason = _load(aot_folder())
    STATE.update(module=module, exports=exports, reason=reason)


class Kernel:
    """A kernel while numba is not imported: calls the compiled module's function when the
    kernel has one and the call's arrays match the types it was compiled for; otherwise
    brings in numba (:func:`use_jit`) and calls the kernel's JIT dispatcher. Attributes other
    than the function's (``py_func``, ``__name__``, …) are the dispatcher's."""

    def __init__(self, function: Callable, options: dict[str, Any]) -> None:
        self.py_func = function
        self.options = options
        self.dispatcher: Any = None
        self.__name__ = function.__name__
        self.__qualname__ = function.__qualname__
        self.__module__ = function.__module__
        self.__doc__ = function.__doc__
        self.key = kernel_key(function)
        module = STATE["module"]
        name = STATE["exports"].get(self.key)
        self.exported = getattr(module, name) if module is not None and name else None

    def _arguments_match(self, args: tuple[Any, ...]) -> bool:
        """Are the call's arguments those the export was compiled for? The first call makes
        the check (:func:`_argument_check`) and keeps it."""
        arity, checks = STATE["checks"][STATE["exports"][self.key]]
        self._arguments_match = _argument_check(checks, arity)  # type: ignore[method-assign]
        return self._arguments_match(args)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.exported is not None and not kwargs and self._arguments_match(args):
            return self.exported(*args)
        if self.dispatcher is None:
            why = "has no compiled form" if self.exported is None else "was called with other types"
            use_jit(f"{self.key} {why}")
        return self.dispatcher(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # kernel_cache asks for ``_cache``: not compiled by numba yet
            raise AttributeError(name)
        if self.dispatcher is None:
            use_jit(f"{self.key}.{name} was read")
        return getattr(self.dispatcher, name)

    def __repr__(self) -> str:
        return f"<kernel {self.key} ({'compiled' if self.exported else 'not compiled'})>"


def _argument_check(
    checks: tuple[tuple[int, int, Any, int], ...], arity: int
) -> Callable[[tuple[Any, ...]], bool]:
    """A function telling whether a call's arguments are those an export was compiled for
    (:data:`Check`): ``arity`` arguments, each array of its dtype and
    dimensions and C-contiguous (the export's unboxing checks only the item size), each tuple
    of its length, each scalar of a type the JIT types the same. One expression, written out
    for the export's arguments: a loop over the checks costs twice as much a call."""
    namespace: dict[str, Any] = {"ndarray": np.ndarray}
    parts = [f"len(a) == {arity}"]
    for k, (position, inner, expected, ndim) in enumerate(checks):
        if inner == SCALAR:
            namespace[f"t{k}"] = SCALAR_TYPES[expected]
            parts.append(f"type(a[{position}]) in t{k}")
        elif inner == TUPLE:
            parts.append(f"type(a[{position}]) is tuple and len(a[{position}]) == {ndim}")
        else:
            value = f"a[{position}]" + (f"[{inner}]" if inner >= 0 else "")
            namespace[f"d{k}"] = dtype_of(expected)
            parts.append(
                f"type({value}) is ndarray and ({value}.dtype is d{k} or {value}.dtype == d{k})"
                f" and {value}.ndim == {ndim} and {value}.flags.c_contiguous"
            )
    return eval("lambda a: " + " and ".join(parts), namespace)


def dtype_of(description: Any) -> np.dtype:
    """The dtype a manifest's check describes (numpy's ``.npy`` description, as
    ``numpy.lib.format.dtype_to_descr`` writes it; a structured one's fields as lists)."""
    from numpy.lib.format import descr_to_dtype

    if isinstance(description, list):
        description = [tuple(field) for field in description]
    return descr_to_dtype(description)


class _PRange:
    """Stands for ``numba.prange`` until numba is imported (then replaced by it)."""

    def __call__(self, *args: int) -> range:
        return range(*args)


#: The stand-in itself, for the sweep to recognise.
_PRANGE = _PRange()


def __getattr__(name: str) -> Any:
    """``prange``: numba's when numba runs the kernels (no compiled module, or the JIT brought
    in), else the stand-in. Looked up when a kernel module imports it, so that a module
    compiled by numba never sees the stand-in (numba cannot type it), and numba is imported
    only by a module that compiles with it in any case."""
    if name != "prange":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if STATE["module"] is None or STATE["jit"]:
        import numba

        return numba.prange
    return _PRANGE


def njit(function: Callable | None = None, **options: Any) -> Any:
    """``numba.njit``, or without importing numba a :class:`Kernel` when the compiled module
    is loaded and numba's JIT has not been brought in yet: ``@njit(cache=True)``,
    ``njit(cache=True)(f)`` and ``@njit`` as numba takes them."""
    if STATE["module"] is None or STATE["jit"]:
        import numba

        return numba.njit(function, **options) if function else numba.njit(**options)

    def wrap(inner: Callable) -> Kernel:
        kernel = Kernel(inner, options)
        _KERNELS.append(kernel)
        return kernel

    return wrap(function) if function is not None else wrap


def _replace(value: Any, numba_prange: Any) -> Any:
    """``value`` with a :class:`Kernel` turned into its dispatcher (in a dict or list in
    place; a tuple rebuilt), :data:`prange` into numba's."""
    if isinstance(value, Kernel):
        return value.dispatcher
    if value is _PRANGE:
        return numba_prange
    if isinstance(value, dict):
        for key, item in list(value.items()):
            if isinstance(item, Kernel):
                value[key] = item.dispatcher
    elif isinstance(value, list):
        value[:] = [item.dispatcher if isinstance(item, Kernel) else item for item in value]
    elif isinstance(value, tuple) and any(isinstance(item, Kernel) for item in value):
        return tuple(item.dispatcher if isinstance(item, Kernel) else item for item in value)
    return value


def use_jit(reason: str) -> None:
    """Bring in numba's JIT: every :class:`Kernel` gets its dispatcher (numba's disk cache
    as usual), netsim's modules bind the dispatchers instead, and later kernels are numba's
    from the start. ``reason`` goes to :data:`STATE` (the run's manifest)."""
    if STATE["jit"]:
        return
    import numba

    from netsim.kernel_cache import guard_kernels

    STATE["jit"] = True
    STATE["reason"] = reason
    for kernel in _KERNELS:
        kernel.dispatcher = numba.njit(**kernel.options)(kernel.py_func)
    for name, module in list(sys.modules.items()):
        ours = name == "netsim" or name.startswith("netsim.")
        if ours and name != __name__ and module is not None:  # not this module's stand-ins
            namespace = vars(module)
            for attribute, value in list(namespace.items()):
                new = _replace(value, numba.prange)
                if new is not value:
                    namespace[attribute] = new
    globals()["prange"] = numba.prange  # for the modules imported from now on
    for name in sorted({kernel.py_func.__module__ for kernel in _KERNELS}):
        if name in sys.modules:
            guard_kernels(name)


def kernels_engine() -> str:
    """What ran this process's kernels, for a run's manifest: ``compiled ahead of time``,
    ``numba`` with why the compiled module is not used, or both with why numba was needed."""
    if STATE["module"] is not None:
        return "compiled ahead of time" + (f", numba: {STATE['reason']}" if STATE["jit"] else "")
    return f"numba: {STATE['reason']}" if STATE["reason"] else "numba"


_decide()

__all__ = [
    "AOT_DIR_VARIABLE",
    "AOT_VARIABLE",
    "STATE",
    "Kernel",
    "aot_directory",
    "aot_folder",
    "kernel_key",
    "kernels_engine",
    "njit",
    "prange",  # noqa: F822 (the module's __getattr__ gives it)
    "stale_sources",
    "use_jit",
]
