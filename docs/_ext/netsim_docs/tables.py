"""The event-table reference, read from every :class:`~netsim.log.TableSchema` in netsim.

Schemas are found in two places, so that a new table cannot be missed: module-level
``TableSchema`` constants of every netsim module, and the tables every registered component
declares (``tables``, or ``table_schemas(config)`` for a table whose columns depend on the
config, as the broadcast's thresholds do; it is asked with the config's defaults).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType

from netsim.log import TableSchema
from netsim_docs.markdown import code, link, prose, slug, table, target

#: Modules not imported while looking for schemas: importing them has effects.
SKIP_MODULES = ("netsim.__main__",)
#: The order of the page: the run's own tables first, the papers' algorithms last.
LAYERS = ("netsim.scenario", "netsim.network", "netsim.protocols", "netsim.privacy")


@dataclass
class FoundTable:
    """One table and where it was found: the constant defining it, the components writing it."""

    schema: TableSchema
    constants: list[str] = field(default_factory=list)
    components: list[str] = field(default_factory=list)


def netsim_modules() -> Iterator[ModuleType]:
    """Every module of the netsim package, imported."""
    import netsim

    yield netsim
    for info in pkgutil.walk_packages(netsim.__path__, prefix="netsim."):
        if info.name not in SKIP_MODULES:
            yield importlib.import_module(info.name)


def defined_constants(module: ModuleType) -> Iterator[tuple[str, TableSchema]]:
    """(name, schema) of the ``TableSchema`` constants ``module`` defines (not imports)."""
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return
    for name, value in vars(module).items():
        if isinstance(value, TableSchema) and re.search(
            rf"^{re.escape(name)}\s*(:[^=]*)?=\s*TableSchema\(", source, re.MULTILINE
        ):
            yield name, value


def component_schemas() -> Iterator[tuple[str, TableSchema]]:
    """(slot and name, schema) of every table netsim's own components declare."""
    from netsim.registry import REGISTRY

    for slot, name, _, origin in REGISTRY.entries():
        if origin != "netsim":
            continue  # installed plugins are the environment's, not netsim's documentation
        cls, config = REGISTRY.lookup((slot,), name)
        # the defaults, unvalidated: required keys do not decide which tables there are
        schemas = cls.table_schemas(config.model_construct(kind=name))
        for schema in (*cls.tables, *schemas):
            yield f"{name} ({slot.replace('_', ' ')})", schema


def find_tables() -> dict[str, FoundTable]:
    """Every table schema in netsim by table name, in the order first found."""
    found: dict[str, FoundTable] = {}

    def entry_of(schema: TableSchema) -> FoundTable:
        entry = found.setdefault(schema.name, FoundTable(schema))
        if entry.schema.columns != schema.columns:
            raise ValueError(f"two different schemas are called {schema.name!r}")
        return entry

    for module in netsim_modules():
        for name, schema in defined_constants(module):
            entry_of(schema).constants.append(f"{module.__name__}.{name}")
    for component, schema in component_schemas():
        entry = entry_of(schema)
        if component not in entry.components:
            entry.components.append(component)
    return dict(sorted(found.items(), key=lambda item: layer(item[1])))


def layer(entry: FoundTable) -> int:
    """Where a table's module sits, from the run's own tables to the papers' algorithms."""
    where = entry.constants[0] if entry.constants else ""
    for index, prefix in enumerate(LAYERS):
        if where.startswith(prefix):
            return index
    return len(LAYERS)


def read_as(schema: TableSchema) -> str:
    """How ``collect`` and ``report`` read the table: its role and special columns."""
    facts = [f"role {code(schema.role)}"]
    for what in ("time", "round", "series"):
        column = getattr(schema, what)
        if column is not None:
            facts.append(f"{what} column {code(column)}")
    if schema.metrics is not None:
        facts.append("metrics " + ", ".join(code(metric) for metric in schema.metrics))
    return "; ".join(facts)


def render_table(entry: FoundTable) -> str:
    """The section of one table: description, how it is read, who writes it, its columns."""
    schema = entry.schema
    parts = [
        target(slug("table", schema.name)),
        f"## {code(schema.name)}\n",
        prose(schema.description) + "\n",
        f"Read as: {read_as(schema)}.\n",
    ]
    if entry.components:
        parts.append("Declared by: " + ", ".join(code(c) for c in entry.components) + ".\n")
    if entry.constants:
        parts.append("Schema: " + ", ".join(code(c) for c in entry.constants) + ".\n")
    if schema.name == "broadcasts":
        parts.append(
            "One `t<100·θ>` column per threshold θ of `broadcast.thresholds`; the columns "
            "below are those of the default thresholds.\n"
        )
    rows = [[code(name), code(str(dtype))] for name, dtype in schema.columns]
    parts.append(table(["column", "type"], rows))
    return "\n".join(parts)


def render() -> str:
    """The whole event-table reference page."""
    found = find_tables()
    overview = [
        [link(code(name), slug("table", name)), code(entry.schema.role),
         prose(entry.schema.description)]
        for name, entry in found.items()
    ]  # fmt: skip
    parts = [
        "# Event tables\n",
        "Generated from every `TableSchema` in netsim when the site is built. A run directory "
        "holds one Parquet file per table its components register, even when it is empty; "
        "columns are never null. A table's role decides how `netsim.analysis.collect` and "
        "`netsim report` read it. The meaning of each column is explained in "
        "[Scenario files](../scenario-files.md#event-tables).\n",
        table(["table", "role", "description"], overview),
        *(render_table(entry) for entry in found.values()),
    ]
    return "\n".join(parts)
