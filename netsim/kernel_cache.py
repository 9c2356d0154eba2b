"""numba's disk cache of netsim's compiled kernels, dropped when a module a kernel inlines changes.

numba keys a cached kernel (``njit(cache=True)``) on its own source file only: the cache's
index holds that file's stamp, and a kernel whose file is unchanged is loaded from the cache.
But a kernel's machine code holds more than its own file: the compiled functions it calls
(numba inlines or links them), and the module-level constants it reads, which numba freezes
into the code, those imported from other modules too (``from netsim.network.links import
REJECTION_TRIES``). After an edit of one of those modules, or an upgrade that left the
kernel's own file's stamp as it was, the cache would silently run the old code.

:func:`kernel_sources` derives from a kernel's code which of netsim's files it holds, and
:func:`guard_kernels`, called at the end of every module that defines cached kernels, drops a
kernel's cache when the stamps (size, modification time) of those files changed since the
record kept beside the cache. Nothing is listed by hand: a new helper a kernel calls, or a new
constant it imports, is followed the next time the module is imported.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import logging
import re
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import CodeType, FunctionType, ModuleType

#: The netsim package's folder: only files inside it count as a kernel's sources.
PACKAGE = Path(__file__).resolve().parent

#: The kernels a guard dropped from the cache in this process (``module.qualified_name``), in
#: order: a first import on a machine drops every kernel (there is no record yet).
FLUSHED: list[str] = []

#: Every cached kernel a guard has checked in this process, ``module.qualified_name`` -> its
#: sources (:func:`kernel_sources`).
GUARDED: dict[str, frozenset[Path]] = {}

#: The dispatchers a guard has checked, by id (:func:`is_guarded`; held, so no id is reused).
_GUARDED_KERNELS: dict[int, object] = {}

_log = logging.getLogger(__name__)


def _python_function(value: object) -> FunctionType | None:
    """The Python function a numba dispatcher compiles (None for anything else)."""
    if isinstance(value, ModuleType | type):
        return None
    function = getattr(value, "py_func", None)
    return function if isinstance(function, FunctionType) else None


@cache
def _inside(path: str | None) -> Path | None:
    """``path`` resolved, if it is a file of the netsim package (else None)."""
    if not path:
        return None
    resolved = Path(path).resolve()
    return resolved if resolved.is_relative_to(PACKAGE) else None


def _module_name(path: Path) -> str:
    """The dotted name of the package's file ``path``."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_file(name: str) -> Path | None:
    """The file of the netsim module ``name`` (None outside the package or not a module)."""
    module = sys.modules.get(name)
    if module is not None:
        return _inside(getattr(module, "__file__", None))
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return _inside(spec.origin) if spec is not None else None


@cache
def _source(path: Path) -> str:
    """The text of the module in ``path`` (empty if it cannot be read)."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


#: A ``from … import …`` statement: its first line, and its following lines up to the
#: closing parenthesis of a parenthesised list.
_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+[\w.]+[ \t]+import\b(?:[^\n(]*\([^)]*\)|[^\n]*)", re.M)


@cache
def _from_imports(path: Path) -> dict[str, tuple[str, str]]:
    """The names the module in ``path`` binds with ``from … import``: bound name -> (the
    module imported from, the name there), read from its source. Only the import statements
    are parsed (a tenth of the time of the whole module, at every import of netsim); the
    whole module is parsed if one of them does not parse alone (a backslash continuation, a
    parenthesis in a comment)."""
    text = _source(path)
    try:
        trees = [ast.parse(match.group(0).strip()) for match in _FROM_IMPORT.finditer(text)]
    except SyntaxError:
        try:
            trees = [ast.parse(text)]
        except SyntaxError:
            return {}
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    names = {}
    for node in (node for tree in trees for node in ast.walk(tree)):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = node.module or ""
        if node.level:
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            source = f"{base}.{source}" if source else base
        for alias in node.names:
            names[alias.asname or alias.name] = (source, alias.name)
    return names


#: An assignment at a module's top level: its targets, and its value with the lines that
#: continue it (indented, or closing a bracket).
_ASSIGNMENT = re.compile(r"^([^\W\d][\w, ]*?)(?::[^=\n]*)?=(?!=)(.*(?:\n[ \t)\]}].*)*)", re.M)
#: A name in an expression (not an attribute: not after a dot).
_IDENTIFIER = re.compile(r"(?<![\w.])[^\W\d]\w*")


@cache
def _assignments(path: Path) -> dict[str, list[str]]:
    """The names the module in ``path`` assigns at its top level -> the text of each value
    assigned to them (a name in a docstring line that looks like an assignment only adds
    names to follow)."""
    values: dict[str, list[str]] = {}
    for match in _ASSIGNMENT.finditer(_source(path)):
        for target in match.group(1).split(","):
            values.setdefault(target.strip(), []).append(match.group(2))
    return values


def _constant(
    path: Path,
    namespace: dict,
    name: str,
    names: set[str],
    files: set[Path],
    seen: set[object],
) -> None:
    """Add the files the constant the module in ``path`` binds as ``name`` comes from: if it
    imported it (``from netsim.x import name``), ``netsim/x.py`` and where that module has it
    from; else what the names its assignment's value uses bring (a constant computed from
    an imported one: ``PEER_DRAWS = REJECTION_TRIES + 1``)."""
    if (path, name) in seen:
        return
    seen.add((path, name))
    origin = _from_imports(path).get(name)
    if origin is not None:
        source = _module_file(origin[0])
        if source is not None:
            files.add(source)
            module = sys.modules.get(origin[0])
            inner = vars(module) if module is not None else {}
            _constant(source, inner, origin[1], names, files, seen)
        return
    for value in _assignments(path).get(name, ()):
        for identifier in sorted(set(_IDENTIFIER.findall(value)) - {name}):
            if identifier in namespace:
                _follow(namespace[identifier], path, namespace, identifier, names, files, seen)


def _code_objects(code: CodeType) -> Iterator[CodeType]:
    """``code`` and the code objects nested in it (its inner functions)."""
    yield code
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            yield from _code_objects(constant)


def _collect(function: FunctionType, files: set[Path], seen: set[object]) -> None:
    """Add to ``files`` the netsim files whose code or constants numba compiles into
    ``function``: its own, and those of what its code names (:func:`kernel_sources`). A
    function outside the package (a benchmark's kernel) adds no file of its own (numba keys
    its cache on that file), but what it names from the package counts as for any other:
    a benchmark that inlines the event queue is compiled again when the queue changes."""
    if id(function) in seen:
        return
    seen.add(id(function))
    own = _inside(function.__code__.co_filename)
    if own is not None:
        files.add(own)
    else:
        own = Path(function.__code__.co_filename).resolve()
        if not own.is_file():  # code made at run time: no source to read its imports from
            return
    names = {name for code in _code_objects(function.__code__) for name in code.co_names}
    namespace = function.__globals__
    values = [(name, namespace[name]) for name in sorted(names) if name in namespace]
    for cell in function.__closure__ or ():
        try:
            values.append(("", cell.cell_contents))
        except ValueError:  # an empty cell
            continue
    for name, value in values:
        _follow(value, own, namespace, name, names, files, seen)


def _follow(
    value: object,
    path: Path,
    namespace: dict,
    name: str,
    names: set[str],
    files: set[Path],
    seen: set[object],
) -> None:
    """Add the files a value the code in ``path`` (whose globals are ``namespace``) names as
    ``name`` brings into a kernel: a compiled function's (recursively); a netsim module's,
    and what the attributes among ``names`` (those the code may read from it) bring; a
    netsim class's or function's module; a tuple's elements'; and for another value, where
    the constant comes from (:func:`_constant`)."""
    function = _python_function(value)
    if function is not None:
        _collect(function, files, seen)
    elif isinstance(value, ModuleType):
        module_file = _inside(getattr(value, "__file__", None))
        if module_file is None or id(value) in seen:
            return
        seen.add(id(value))
        files.add(module_file)
        attributes = vars(value)  # not getattr: a module's __getattr__ may import
        for attribute in sorted(names & attributes.keys()):
            _follow(attributes[attribute], module_file, attributes, attribute, names, files, seen)
    elif isinstance(value, type | FunctionType):
        module = sys.modules.get(getattr(value, "__module__", "") or "")
        defined = _inside(getattr(module, "__file__", None))
        if defined is not None:
            files.add(defined)
    else:
        if isinstance(value, tuple):
            for element in value:
                _follow(element, path, namespace, "", names, files, seen)
        if name:
            _constant(path, namespace, name, names, files, seen)


def kernel_sources(kernel: object) -> frozenset[Path]:
    """The netsim files whose code or constants numba compiles into ``kernel`` (a numba
    dispatcher), derived from its code: its own file; for every global name its code uses
    (and its inner functions', and its closure's values), a compiled function's file, followed
    recursively; a netsim module's file, and what the names the code may read from it bring;
    a netsim class's or function's module; for a constant the module imported with ``from
    netsim.x import name``, ``netsim/x.py`` (and where that has it from); and for a constant
    it computes, what the names of its assignment bring. Files outside the package are left
    out: numba compiles its own forms of numpy's functions, and drops its cache itself when
    its version changes."""
    function = _python_function(kernel)
    if function is None:
        raise TypeError(f"not a numba dispatcher: {kernel!r}")
    files: set[Path] = set()
    _collect(function, files, set())
    return frozenset(files)


def _cache_of(kernel: object) -> object | None:
    """``kernel``'s disk cache, None if it has none (compiled without ``cache=True``, or a
    numba without the attribute)."""
    cache = getattr(kernel, "_cache", None)
    return cache if getattr(cache, "cache_path", None) is not None else None


def cached_kernels(module: ModuleType) -> list[object]:
    """The cached numba dispatchers ``module`` defines: its globals', and those held in a
    dict, list or tuple it binds (kernels compiled by a factory, one per option set)."""
    found: dict[int, object] = {}
    for value in list(vars(module).values()):
        inside = value.values() if isinstance(value, dict) else value
        candidates = inside if isinstance(value, dict | list | tuple) else (value,)
        for candidate in candidates:
            function = _python_function(candidate)
            if (
                function is not None
                and function.__module__ == module.__name__
                and _cache_of(candidate) is not None
            ):
                found[id(candidate)] = candidate
    return list(found.values())


def _name(kernel: object) -> str:
    function = _python_function(kernel)
    return f"{function.__module__}.{function.__qualname__}"  # type: ignore[union-attr]


def _stamps(sources: frozenset[Path]) -> dict[str, list[int]]:
    """Each source's (size, modification time in ns), by its path inside the package."""
    stamps = {}
    for path in sorted(sources):
        try:
            status = path.stat()
        except OSError:
            continue
        stamps[path.relative_to(PACKAGE.parent).as_posix()] = [
            status.st_size,
            status.st_mtime_ns,
        ]
    return stamps


def _record_path(kernel: object, cache: object) -> Path:
    """The stamp record beside ``kernel``'s cache index (numba names the index after the
    file, the qualified name and the first line, as here)."""
    function = _python_function(kernel)
    code = function.__code__  # type: ignore[union-attr]
    stem = Path(code.co_filename).stem
    name = f"{stem}.{function.__qualname__}-{code.co_firstlineno}"  # type: ignore[union-attr]
    name = name.replace("<", "").replace(">", "")
    return Path(cache.cache_path) / f"{name}.sources"  # type: ignore[attr-defined]


def guard_kernel(kernel: object) -> bool:
    """Drop ``kernel``'s cached machine code if its sources' stamps differ from those recorded
    beside the cache (or none were), and record the current ones; True if it was dropped. A
    numba without a cache attribute, or a cache that cannot be written, is left as it is."""
    name = _name(kernel)
    sources = kernel_sources(kernel)
    GUARDED[name] = sources
    _GUARDED_KERNELS[id(kernel)] = kernel
    cache = _cache_of(kernel)
    if cache is None:
        return False
    stamps = _stamps(sources)
    try:
        record = _record_path(kernel, cache)
        text = json.dumps(stamps, sort_keys=True)
        old = record.read_text(encoding="utf-8") if record.exists() else None
        if old == text:
            return False
        cache.flush()  # type: ignore[attr-defined]
        record.write_text(text, encoding="utf-8")
    except (AttributeError, OSError):  # another numba, or a read-only cache
        return False
    FLUSHED.append(name)
    _log.debug("%s is compiled again: %s", name, _changes(old, stamps))
    return True


def _changes(old: str | None, stamps: dict[str, list[int]]) -> str:
    """Which sources changed, for the debug message."""
    if old is None:
        return "no record of its sources"
    try:
        before = json.loads(old)
    except ValueError:
        return "an unreadable record"
    changed = sorted(set(before) ^ set(stamps) | {p for p in stamps if before.get(p) != stamps[p]})
    return ", ".join(changed) + " changed"


def guard_kernels(module_name: str) -> None:
    """:func:`guard_kernel` for every cached kernel the module ``module_name`` defines
    (:func:`cached_kernels`); each such module calls it once, at its end."""
    for kernel in cached_kernels(sys.modules[module_name]):
        guard_kernel(kernel)


def is_guarded(kernel: object) -> bool:
    """Did a guard check ``kernel`` in this process?"""
    return _GUARDED_KERNELS.get(id(kernel)) is kernel


__all__ = [
    "FLUSHED",
    "GUARDED",
    "cached_kernels",
    "guard_kernel",
    "guard_kernels",
    "is_guarded",
    "kernel_sources",
]
