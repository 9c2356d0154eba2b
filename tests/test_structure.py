"""netsim's code stays in pieces a reader can hold: no class of ``netsim/`` over
:data:`MAX_CLASS_LINES` lines and no function over :data:`MAX_FUNCTION_LINES` lines, except
compiled kernels (numba's ``@njit`` functions, and those of a module's own decorator that
compiles with numba, such as the exact core's ``@kernel``: a kernel is one loop the compiler
sees whole, ``docs/architecture.md``, principle 4), and no module but ``netsim/sim.py``
touches SimPy's private fields. Run it as a script for the figures::

    python -m tests.test_structure      # the largest classes and functions, SimPy's fields
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "netsim"
MAX_CLASS_LINES = 450
MAX_FUNCTION_LINES = 80
#: SimPy's private fields (its event queue, event ids and clock): written only by the seam.
SIMPY_PRIVATE = re.compile(r"\benv\._(queue|eid|now)\b|\._env\._(queue|eid|now)\b")
SIMPY_SEAM = PACKAGE / "sim.py"


NUMBA = re.compile(r"\b(njit|jit)\b")


def compiling_decorators(tree: ast.Module) -> set[str]:
    """The module's own decorators that compile what they decorate: its top-level functions
    that call numba's ``njit``/``jit`` on their argument (``netsim.protocols.exact_core``'s
    ``kernel``)."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.args.args:
            calls = [c for c in ast.walk(node) if isinstance(c, ast.Call)]
            if any(NUMBA.search(ast.unparse(call.func)) for call in calls):
                found.add(node.name)
    return found


def _compiled(node: ast.AST, compilers: set[str] = frozenset()) -> bool:  # type: ignore[assignment]
    """A numba kernel: decorated with ``njit``/``jit`` in any spelling, or with one of the
    module's ``compilers`` (:func:`compiling_decorators`)."""
    decorators = getattr(node, "decorator_list", [])
    names = {ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in decorators}
    return bool(names & compilers) or any(NUMBA.search(ast.unparse(d)) for d in decorators)


def definitions(package: Path = PACKAGE) -> Iterator[tuple[str, str, int, bool]]:
    """(kind, ``path:qualified name``, lines, compiled) of every class and function."""

    def visit(
        node: ast.AST, path: str, prefix: str, compiled: bool, compilers: set[str]
    ) -> Iterator[tuple]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                inner = compiled or _compiled(child, compilers)
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                lines = child.end_lineno - child.lineno + 1  # type: ignore[operator]
                yield kind, f"{path}:{name}", lines, inner
                yield from visit(child, path, f"{name}.", inner, compilers)
            else:
                yield from visit(child, path, prefix, compiled, compilers)

    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = str(path.relative_to(package.parent))
        yield from visit(tree, where, "", False, compiling_decorators(tree))


def too_long(package: Path = PACKAGE) -> list[str]:
    """The classes and (non-kernel) functions over the limits, longest first."""
    found = []
    for kind, name, lines, compiled in definitions(package):
        limit = MAX_CLASS_LINES if kind == "class" else MAX_FUNCTION_LINES
        if lines > limit and not compiled:
            found.append((lines, f"{kind} {name}: {lines} lines (at most {limit})"))
    return [text for _, text in sorted(found, reverse=True)]


def simpy_private_uses(package: Path = PACKAGE) -> list[str]:
    """Lines outside the seam that touch SimPy's private fields."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if path == SIMPY_SEAM:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if SIMPY_PRIVATE.search(line.split("#", 1)[0]):
                found.append(f"{path.relative_to(package.parent)}:{number}: {line.strip()}")
    return found


def test_no_class_or_function_is_too_long():
    assert not too_long(), "split these:\n" + "\n".join(too_long())


def test_only_the_seam_touches_simpys_private_fields():
    found = simpy_private_uses()
    assert not found, "use netsim.sim.Environment (schedule_at, now):\n" + "\n".join(found)


def test_the_checks_see_what_they_name(tmp_path):
    """The checks themselves: a long function, a long kernel, a long function of a module's
    own compiling decorator, a long function of a decorator that compiles nothing, a private
    field."""
    package = tmp_path / "netsim"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (package / "a.py").write_text(
        f"from numba import njit\n\ndef long():\n{body}\n\n@njit(cache=True)\n"
        f"def kernel():\n{body}\n\ndef peek(env):\n    return env._now\n"
    )
    (package / "b.py").write_text(
        "from numba import njit\n\ndef compiled(f):\n    return njit(cache=True)(f)\n\n"
        "def logged(f):\n    return f\n\n"
        f"@compiled\ndef fast():\n{body}\n\n@logged\ndef slow():\n{body}\n"
    )
    limit = MAX_FUNCTION_LINES
    assert too_long(package) == [
        f"function netsim/b.py:slow: {limit + 1} lines (at most {limit})",
        f"function netsim/a.py:long: {limit + 1} lines (at most {limit})",
    ]
    line = 2 * MAX_FUNCTION_LINES + 9  # the last line of the file
    assert simpy_private_uses(package) == [f"netsim/a.py:{line}: return env._now"]


def main() -> None:
    items = sorted(definitions(), key=lambda item: -item[2])
    for kind in ("class", "function"):
        largest = [item for item in items if item[0] == kind and not item[3]][:5]
        print(f"largest {kind}es:" if kind == "class" else "longest functions:")
        for _, name, lines, _ in largest:
            print(f"  {lines:5d}  {name}")
    print("over the limits:", len(too_long()))
    for line in too_long():
        print("  " + line)
    print("SimPy private fields outside netsim/sim.py:", len(simpy_private_uses()))


if __name__ == "__main__":
    sys.exit(main())
