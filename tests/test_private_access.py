"""No module touches another class's private attributes (``docs/architecture.md``): an
attribute whose name starts with one underscore is read or written only through ``self`` or
``cls`` (or ``super()``), or through a name of a class of the same module, or — for an
object of another class of its own module — where some class of the module defines that
attribute (``self._x = …``, ``_x = …`` in its body, or a method ``_x``). Everything else
(``network._next_delay`` in a module that defines no ``_next_delay``) is another class's
private state, reached from outside it: this test parses every module of ``netsim/`` and
fails on each such access.

Two kinds of access are outside the rule: the one module that writes SimPy's private fields,
``netsim/sim.py`` (its seam, ``docs/architecture.md``), and the accesses listed in
:data:`KNOWN` — found when the rule was written, in code other parts of the project own; each
names its module, and the test fails when one is gone (remove it from the list) as when a new
one appears.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "netsim"

#: The module allowed to touch SimPy's private fields (netsim's one seam with SimPy).
SEAM = {"netsim/sim.py"}

#: A named tuple's methods: public, underscored only so as not to clash with field names.
NAMED_TUPLE_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}

#: Accesses the rule found in code outside the exact core's files when it was written:
#: (module, ``receiver._attribute``) -> how many. To be removed by their owners.
KNOWN: dict[tuple[str, str], int] = {}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_here(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The module's class names, and the private attributes its classes define."""
    classes, attributes = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            classes.add(node.name)
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    attributes.add(item.name)
                targets = (
                    item.targets if isinstance(item, ast.Assign)
                    else [item.target] if isinstance(item, ast.AnnAssign) else []
                )  # fmt: skip
                for target in targets:
                    if isinstance(target, ast.Name):
                        attributes.add(target.id)
            for slot in _slots(node):
                attributes.add(slot)
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}:
                attributes.add(node.attr)
    return classes, {a for a in attributes if _private(a)}


def _slots(node: ast.ClassDef) -> list[str]:
    """The names a class's ``__slots__`` lists."""
    for item in node.body:
        if (
            isinstance(item, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in item.targets)
            and isinstance(item.value, ast.Tuple | ast.List)
        ):
            return [e.value for e in item.value.elts if isinstance(e, ast.Constant)]
    return []


def _receiver(node: ast.expr) -> str:
    """How the accessed object is written (a name, ``a.b``, a call)."""
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover
        return type(node).__name__


def violations(path: Path) -> list[tuple[str, str, int]]:
    """(module, ``receiver._attribute``, line) of every access the rule refuses in ``path``."""
    relative = path.relative_to(ROOT).as_posix()
    if relative in SEAM:
        return []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    classes, attributes = _defined_here(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        if node.attr in NAMED_TUPLE_API:
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in {"self", "cls", *classes}:
            continue
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "super"
        ):
            continue
        if node.attr in attributes:
            continue  # an object of a class of this module (``other._x`` in its own class)
        found.append((relative, f"{_receiver(value)}.{node.attr}", node.lineno))
    return found


def all_violations() -> list[tuple[str, str, int]]:
    return [v for path in sorted(PACKAGE.rglob("*.py")) for v in violations(path)]


def test_no_module_touches_another_class_private_attributes():
    found = Counter((module, access) for module, access, _line in all_violations())
    new = sorted(f"{m}: {a} ×{n}" for (m, a), n in found.items() if KNOWN.get((m, a)) != n)
    gone = sorted(f"{m}: {a}" for (m, a) in KNOWN if (m, a) not in found)
    assert not new, "private attributes of another class touched:\n" + "\n".join(new)
    assert not gone, "no longer found (remove them from KNOWN):\n" + "\n".join(gone)


def test_the_rule_finds_a_foreign_private_attribute(tmp_path):
    """The rule on a module of its own: ``network._next_delay`` refused, ``self._x``, an
    object of the module's own class and a class name allowed."""
    module = tmp_path / "netsim" / "probe.py"
    module.parent.mkdir()
    module.write_text(
        "class A:\n"
        "    def __init__(self):\n"
        "        self._x = 1\n"
        "    def same(self, other):\n"
        "        return other._x + A._y\n"
        "    _y = 2\n"
        "def f(network):\n"
        "    return network._next_delay\n",
        encoding="utf-8",
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert [access for _m, access, _l in violations(module)] == ["network._next_delay"]
    finally:
        ROOT = saved


if __name__ == "__main__":  # list them
    for module, access, line in all_violations():
        print(f"{module}:{line}: {access}")
