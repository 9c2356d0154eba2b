"""Third-party modules imported on first use: ``pd = lazy_module("pandas")`` binds a stand-in
that imports pandas the first time one of its attributes is read.

A run in rounds mode needs numpy, numba, simpy and pyarrow (its tables); pandas, scipy.stats,
networkx and dp_accounting cost some 120 MiB of resident memory between them and are needed only
by the components, the analyses and the topologies that call them. A module that names one of
them at its top imports it through :func:`lazy_module` (and for type checkers under
``if TYPE_CHECKING:``), so importing netsim, building a run and running it load only what that
run calls (``tests/test_footprint.py`` keeps the import floor; ``docs/performance.md`` gives
the figures).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule(ModuleType):
    """Stands for the module ``name`` until an attribute is read; then imports it and keeps each
    attribute read (a module's attributes are its functions, classes and submodules). A
    :class:`~types.ModuleType`, so that what walks a module's globals for functions
    (:func:`netsim.kernel_cache.cached_kernels`) passes it by without importing it."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__dict__["_lazy_name"] = name

    def _module(self) -> ModuleType:
        return importlib.import_module(self.__dict__["_lazy_name"])

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(self._module(), attribute)
        self.__dict__[attribute] = value
        return value

    def __dir__(self) -> list[str]:
        return dir(self._module())

    def __repr__(self) -> str:
        return f"<lazy module {self.__dict__['_lazy_name']!r}>"


def lazy_module(name: str) -> Any:
    """A stand-in for the module ``name`` (``"pandas"``, ``"scipy.sparse"``) that imports it when
    an attribute is first read: ``sys.modules`` holds it only once it is used."""
    return LazyModule(name)
