"""Compile the rounds-mode kernels ahead of time into an extension module (``netsim compile``).

numba's ``numba.pycc.CC`` compiles each kernel of :data:`netsim.aot_exports.EXPORTS`, for the
argument types of its sample arguments, into one extension module that needs numpy only (it
carries numba's runtime and helpers in C), placed in :func:`netsim.compiled.aot_folder` with
a ``manifest.json``: the exported names and the kernels they are, and the SHA-256 of every
source file numba compiled into them (:func:`netsim.kernel_cache.kernel_sources`), so that an
edit makes the module stale (:func:`netsim.compiled.stale_sources`) and the run falls back to
numba's JIT until it is compiled again.

Each export is a one-line function that calls the kernel's numba dispatcher: numba compiles
the kernel with its own options (``error_model="numpy"``, inlined helpers), as the JIT does,
and links it in; the export's own code only converts the arguments. The compilation runs in
a child process (:func:`compile_kernels`) with numba's disk cache pointed at an empty folder,
since a kernel loaded from that cache is machine code that cannot be linked into a module,
and with :data:`netsim.compiled.AOT_VARIABLE` off, so the kernels are numba's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from netsim.compiled import AOT_VARIABLE, MANIFEST, MODULE_NAME, ROOT, aot_folder, file_digest
from netsim.errors import NetsimError


class CompileError(NetsimError):
    """The kernels could not be compiled ahead of time (no C compiler, a numba without
    ``numba.pycc``); runs use numba's JIT."""


def _resolve(path: str) -> Any:
    """The kernel ``module:attribute`` or ``module:attribute[key, key]`` names."""
    import importlib

    module_name, _, attribute = path.partition(":")
    name, _, key = attribute.partition("[")
    value = getattr(importlib.import_module(module_name), name)
    if key:
        value = value[tuple(part.strip() == "True" for part in key.rstrip("]").split(","))]
    return value


def _wrapper(kernel: Any, arity: int) -> Any:
    """A function of ``arity`` arguments that returns ``kernel``'s result (what is exported:
    the kernel itself is compiled by its dispatcher, with its own options)."""
    names = ", ".join(f"a{i}" for i in range(arity))
    namespace: dict[str, Any] = {"kernel": kernel}
    exec(f"def export({names}):\n    return kernel({names})\n", namespace)
    return namespace["export"]


def build(folder: Path) -> dict[str, Any]:
    """Compile the exports into ``folder`` (in this process: numba is imported) and write
    its manifest; returns the manifest."""
    import numba
    from numba.pycc import CC

    from netsim.aot_exports import EXPORTS, call_checks
    from netsim.compiled import kernel_key
    from netsim.kernel_cache import kernel_sources

    cc = CC(MODULE_NAME)
    cc.output_dir = str(folder)
    cc.target_cpu = "host"  # as numba's JIT compiles (the same results on any processor)
    cc.verbose = False
    exports, checks = {}, {}
    sources = {ROOT / "netsim" / p for p in ("aot_exports.py", "aot.py", "compiled.py")}
    for name, (path, samples) in EXPORTS.items():
        kernel = _resolve(path)
        arguments = samples()
        signature = tuple(numba.typeof(value) for value in arguments)
        cc.export(name, signature)(_wrapper(kernel, len(arguments)))
        exports[name] = kernel_key(kernel.py_func)
        checks[name] = (len(arguments), call_checks(arguments))
        sources |= kernel_sources(kernel)
    cc.compile()
    built = [p.name for p in folder.iterdir() if p.name.startswith(MODULE_NAME + ".")]
    manifest = {
        "file": built[0],
        "exports": exports,
        "checks": checks,
        "sources": {p.relative_to(ROOT).as_posix(): file_digest(p) for p in sorted(sources)},
        "numba": numba.__version__,
        "python": sys.version.split()[0],
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), "utf-8")
    return manifest


def compile_kernels(folder: Path | None = None) -> tuple[Path, float]:
    """Compile the kernels ahead of time into ``folder`` (default :func:`aot_folder`) in a
    child process, replacing what was there only once the new module is complete; the
    folder and the child's CPU seconds. Raises :class:`CompileError` if it fails."""
    folder = aot_folder() if folder is None else folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=folder.parent))
    numba_cache = Path(tempfile.mkdtemp(prefix="netsim-aot-numba-"))
    env = {**os.environ, AOT_VARIABLE: "0", "NUMBA_CACHE_DIR": str(numba_cache)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    before = os.times()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "netsim.aot", str(staging)],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        after = os.times()
        if done.returncode != 0:
            raise CompileError(
                f"compiling the kernels ahead of time failed:\n{done.stderr[-3000:]}"
            )
        old = folder.with_name(f".old-{folder.name}-{time.time_ns()}")
        if folder.exists():
            folder.rename(old)
        staging.rename(folder)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(numba_cache, ignore_errors=True)
    cpu = (after.children_user + after.children_system) - (
        before.children_user + before.children_system
    )
    return folder, cpu


__all__ = ["CompileError", "build", "compile_kernels"]

if __name__ == "__main__":  # the child of compile_kernels
    build(Path(sys.argv[1]))
