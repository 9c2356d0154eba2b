"""The Python API pages: one page per public package or module, with an autodoc section for
each of its modules, so a module added to a package appears without editing the site."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator

from netsim_docs.markdown import code, fenced, rst

#: The packages and modules listed first in the index; every other public module of netsim
#: follows in alphabetical order, so a new one gets its page without editing this list.
FIRST = (
    "netsim",
    "netsim.api",
    "netsim.registry",
    "netsim.errors",
    "netsim.scenario",
    "netsim.sweep",
    "netsim.analysis",
    "netsim.network",
    "netsim.protocols",
    "netsim.privacy",
    "netsim.traces",
    "netsim.learning",
    "netsim.algorithms",
)
#: Modules left out: running them has effects.
SKIP = ("netsim.__main__",)


def public_units() -> list[str]:
    """The pages of the API: :data:`FIRST`, then netsim's other top-level modules and
    packages (not private ones, nor those in :data:`SKIP`)."""
    import netsim

    others = sorted(
        f"netsim.{info.name}"
        for info in pkgutil.iter_modules(netsim.__path__)
        if not info.name.startswith("_") and f"netsim.{info.name}" not in (*FIRST, *SKIP)
    )
    return [*FIRST, *others]


def submodules(name: str) -> Iterator[str]:
    """``name`` and, for a package, every module below it (not ``netsim`` itself, whose
    packages have their own pages)."""
    yield name
    module = importlib.import_module(name)
    if name == "netsim" or not hasattr(module, "__path__"):
        return
    for info in pkgutil.walk_packages(module.__path__, prefix=f"{name}."):
        if info.name not in SKIP:
            yield info.name


def automodule(name: str, members: bool) -> str:
    """An autodoc directive for one module. A package's own page shows its docstring only:
    its ``__init__`` re-exports names its modules define, which would be documented twice."""
    # autodoc writes reST, so the directive must be parsed as reST, not by MyST
    options = "\n   :members:" if members else ""
    return rst(f".. automodule:: {name}{options}")


def page(name: str) -> str:
    """The page of one public package or module."""
    names = list(submodules(name))
    parts = [f"# {code(name)}\n", automodule(name, members=not is_package(name))]
    for module in names[1:]:
        parts += [f"## {code(module)}\n", automodule(module, members=not is_package(module))]
    return "\n".join(parts)


def is_package(name: str) -> bool:
    return hasattr(importlib.import_module(name), "__path__")


def index() -> str:
    """The API index page: a toctree of the package pages."""
    entries = "\n".join(public_units())
    return "\n".join([
        "# Python API\n",
        "Generated with autodoc from the docstrings when the site is built. `netsim.api` holds "
        "the interfaces a component implements and `netsim.run`; `netsim.analysis` loads run "
        "and sweep directories into pandas.\n",
        fenced(f":maxdepth: 1\n\n{entries}", "{toctree}"),
    ])  # fmt: skip


def pages() -> dict[str, str]:
    """File name → content of every API page, the index included."""
    return {"index.md": index(), **{f"{name}.md": page(name) for name in public_units()}}
