"""netsim's layers, enforced: no import circle among netsim's modules, and no import that runs up
the declared layers (``docs/architecture.md`` draws them), module by module here and package by
package with import-linter (the contracts in ``pyproject.toml``, ``[tool.importlinter]``).

The import graph is read from the source with :mod:`ast`, imports inside functions included
(a deferred import is still a dependency: it only hides a circle from the interpreter), and so
are imports under ``if TYPE_CHECKING:`` (an annotation that names a class of a higher layer is
a dependency all the same). ``from netsim.x import y`` is an edge to ``netsim.x.y`` when that is
a module, else to ``netsim.x``; a module's implicit import of its parent packages is not an
edge. The only imports left out are those the import-linter contracts ignore (each line there
says what removes it; import-linter fails on a line whose import is gone). Run it as a script
for the numbers::

    python -m tests.test_layers                      # circles, upward imports, and which
    python -m tests.test_layers --no-type-checking   # the same without TYPE_CHECKING imports
    python -m tests.test_layers --all                # without leaving out the contract's ignores
"""

from __future__ import annotations

import ast
import contextlib
import io
import sys
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "netsim"

#: The layers, bottom first. A module may import from its own layer and the layers below it,
#: never from one above; within a layer any import is allowed as long as it closes no circle.
#: A module belongs to the first layer with a prefix that names it or one of its packages.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "netsim.version",
            "netsim.errors",
            "netsim.units",
            "netsim.fields",
            "netsim.files",
            "netsim.rng",
            "netsim.progress",
            "netsim.storage",
            "netsim.log",
            "netsim.sim",
            "netsim.signals",
            "netsim.distributions",
            "netsim.plotting",
            "netsim.event_queue",
            "netsim.kernel_cache",
            "netsim.compiled",
            "netsim.installation",
            "netsim.lazy",
        ),
    ),
    (
        "contracts",
        (
            "netsim.context",
            "netsim.component_sections",
            "netsim.component",
            "netsim.registry",
            "netsim.contracts",
        ),
    ),
    # The building blocks in order: traces below the network, privacy below learning (which
    # holds the losses and their gradients' sensitivity, and the shared model state).
    ("traces and privacy", ("netsim.traces", "netsim.privacy")),
    ("network and learning", ("netsim.network", "netsim.learning")),
    ("protocols", ("netsim.protocols",)),
    ("algorithms", ("netsim.algorithms",)),
    ("scenario", ("netsim.scenario",)),
    ("analysis", ("netsim.analysis", "netsim.sweep")),
    # netsim compile and the kernels it exports (which import the protocols' kernels).
    (
        "commands",
        ("netsim.testing", "netsim.cli", "netsim.__main__", "netsim.aot", "netsim.aot_exports"),
    ),
    # The facade: netsim.run / load_run / collect, and netsim.api's old names for plugins.
    ("facade", ("netsim.api", "netsim")),
)

#: The contracts' configuration (import-linter reads the same file).
PYPROJECT = ROOT / "pyproject.toml"


def ignored_imports(path: Path = PYPROJECT) -> frozenset[tuple[str, str]]:
    """(importer, imported) of every import an import-linter contract ignores: the known
    violations still to remove (import-linter fails on a line whose import is gone)."""
    config = tomllib.loads(path.read_text(encoding="utf-8"))
    lines = (
        line
        for contract in config["tool"]["importlinter"]["contracts"]
        for line in contract.get("ignore_imports", ())
    )
    return frozenset(tuple(part.strip() for part in line.split("->")) for line in lines)


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package, by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return skip


def _targets(name: str, node: ast.Import | ast.ImportFrom, known: dict[str, Path]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        candidates = [alias.name for alias in node.names]
    else:
        if node.level:
            base = name.split(".")
            if not known[name].name == "__init__.py":
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        candidates = [
            f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source
            for alias in node.names
        ]
    for target in candidates:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target:
            yield target


def import_graph(
    package: Path = PACKAGE,
    *,
    type_checking: bool = True,
    ignored: Iterable[tuple[str, str]] = (),
) -> nx.DiGraph:
    """importer → imported, over the package's modules: with the imports under
    ``if TYPE_CHECKING:`` unless ``type_checking`` is False, without the ``ignored`` pairs."""
    known = modules(package)
    left_out = set(ignored)
    graph = nx.DiGraph()
    for name, path in known.items():
        graph.add_node(name)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = set() if type_checking else _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in skip:
                continue
            for target in _targets(name, node, known):
                if target == name or name.startswith(target + ".") or (name, target) in left_out:
                    continue
                graph.add_edge(name, target, line=node.lineno)
    return graph


def netsim_graph() -> nx.DiGraph:
    """netsim's import graph as the tests check it: TYPE_CHECKING imports counted, the
    contract's ignored imports left out."""
    return import_graph(ignored=ignored_imports())


def layer_of(module: str) -> int:
    """The index of the module's layer (bottom 0)."""
    best: tuple[int, int] | None = None  # (prefix length, layer): the longest prefix wins
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), index)
    if best is None:
        raise LookupError(f"{module} is in no layer: add it to tests/test_layers.py LAYERS")
    return best[1]


def circles(graph: nx.DiGraph) -> list[set[str]]:
    """The import circles: strongly connected components of more than one module."""
    return [c for c in nx.strongly_connected_components(graph) if len(c) > 1]


def upward(graph: nx.DiGraph) -> list[tuple[str, str]]:
    """Imports from a module into a higher layer."""
    return sorted((a, b) for a, b in graph.edges if layer_of(b) > layer_of(a))


def test_every_module_has_a_layer():
    for module in modules():
        layer_of(module)


def test_no_import_circle():
    graph = netsim_graph()
    found = [sorted(c) for c in circles(graph)]
    assert not found, f"import circles among netsim's modules: {found}"


def test_no_upward_import():
    graph = netsim_graph()
    bad = [
        f"{a} (line {graph.edges[a, b]['line']}, layer {LAYERS[layer_of(a)][0]}) imports {b} "
        f"(layer {LAYERS[layer_of(b)][0]})"
        for a, b in upward(graph)
    ]
    assert not bad, "imports up the layers:\n" + "\n".join(bad)


def test_the_facade_is_imported_by_nothing_inside_netsim():
    graph = netsim_graph()
    importers = sorted(a for a, _ in graph.in_edges("netsim.api"))
    assert importers == ["netsim"], importers  # only netsim.run's lazy hook in __init__


def test_the_check_sees_a_circle_and_an_upward_import(tmp_path):
    """The check itself: a deferred upward import is both a circle and a violation."""
    package = tmp_path / "netsim"
    (package / "network").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "network" / "__init__.py").write_text("")
    (package / "network" / "links.py").write_text(
        "def f():\n    from netsim.scenario.build import x\n"
    )
    (package / "scenario").mkdir()
    (package / "scenario" / "__init__.py").write_text("")
    (package / "scenario" / "build.py").write_text("from ..network import links\nx = 1\n")
    graph = import_graph(package)
    pair = ["netsim.network.links", "netsim.scenario.build"]
    assert [sorted(c) for c in circles(graph)] == [pair]
    assert upward(graph) == [("netsim.network.links", "netsim.scenario.build")]
    ignored = import_graph(package, ignored=[("netsim.network.links", "netsim.scenario.build")])
    assert circles(ignored) == [] and upward(ignored) == []


def test_the_check_counts_type_checking_imports(tmp_path):
    """An import under ``if TYPE_CHECKING:`` is an edge (and an upward one here), unless the
    graph is asked to leave such imports out."""
    package = tmp_path / "netsim"
    (package / "traces").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "traces" / "__init__.py").write_text("")
    (package / "traces" / "synth.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from netsim.network.churn import ChurnReplay\n"
    )
    (package / "network").mkdir()
    (package / "network" / "__init__.py").write_text("")
    (package / "network" / "churn.py").write_text("from netsim.traces import synth\n")
    pair = ("netsim.traces.synth", "netsim.network.churn")
    assert upward(import_graph(package)) == [pair]
    assert len(circles(import_graph(package))) == 1
    assert upward(import_graph(package, type_checking=False)) == []


def test_the_package_contracts_hold(monkeypatch):
    """import-linter's contracts (``pyproject.toml``): the layers at package granularity, the
    algorithm packages independent of each other, no circle among a package's children; with
    TYPE_CHECKING imports counted. Fails with import-linter's report of the broken ones."""
    from importlinter.cli import lint_imports

    monkeypatch.chdir(ROOT)  # import-linter finds netsim from the working directory
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        status = lint_imports(config_filename=str(PYPROJECT), no_cache=True, no_logo=True)
    assert status == 0, report.getvalue()


def test_the_slot_table_below_the_registry_matches_the_interfaces():
    from netsim.component import SLOTS
    from netsim.contracts import INTERFACES

    assert {i.slot: (i.__name__, i.slot_title) for i in INTERFACES} == SLOTS


def test_old_import_names_keep_working():
    import netsim
    import netsim.api as api
    from netsim import contracts

    for name in contracts.__all__:
        assert getattr(api, name) is getattr(contracts, name)
    assert netsim.run is api.run and netsim.load_run is api.load_run
    assert netsim.collect is api.collect


def main() -> None:
    graph = import_graph(
        type_checking="--no-type-checking" not in sys.argv,
        ignored=() if "--all" in sys.argv else ignored_imports(),
    )
    found = circles(graph)
    print(f"modules: {graph.number_of_nodes()}, imports: {graph.number_of_edges()}")
    print(f"import circles: {len(found)}, modules in circles: {sum(len(c) for c in found)}")
    for circle in found:
        print("  circle:", ", ".join(sorted(circle)))
    up = upward(graph)
    print(f"upward imports: {len(up)}")
    for a, b in up:
        print(f"  {a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})")


if __name__ == "__main__":
    sys.exit(main())
