"""netsim's facade: :func:`run` runs a scenario from Python and returns its tables,
:func:`load_run` reads a run directory, :func:`collect` the tidy table of a sweep or of runs —
and, for plugins, every name of the component contract (:mod:`netsim.contracts`) under its old
import path, so ``from netsim.api import WalkAgent`` keeps working.

This is the top of netsim's layers (``docs/architecture.md``): it may import anything, and
nothing inside netsim imports it (``tests/test_layers.py`` checks both), apart from the lazy
``netsim.run`` of ``netsim/__init__.py``. The runner and analysis are imported on first use, so
a plugin that imports its interfaces from here stays light.

Every part of a run that a scenario names with ``kind:`` is a **component**: a class deriving
from one of the interfaces — :class:`TopologyBuilder`, :class:`ChurnModel`,
:class:`GossipApplication`, :class:`NetworkProtocol`, :class:`Walk`, :class:`WalkAgent`,
:class:`RoundLearner`, :class:`Mechanism`, :class:`Model`, :class:`DatasetLoader` — described in
:mod:`netsim.contracts`; ``docs/components.md`` walks through writing one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netsim import contracts
from netsim.contracts import *  # noqa: F403 - the contract's names under their old import path
from netsim.log import TableSchema as TableSchema  # re-exported (in __all__)

if TYPE_CHECKING:
    import pandas as pd

    from netsim.scenario.schema import Scenario

#: The facade's own names.
_OWN_NAMES = ("RunOutcome", "TableSchema", "collect", "load_run", "run")


def _export_order(name: str) -> tuple[bool, bool, str]:
    """Constants first, then classes, then functions, each alphabetically (the order of the
    API page, which autodoc takes from ``__all__``)."""
    return (not name.isupper(), not name[0].isupper(), name)


#: Every name of the component contract (:data:`netsim.contracts.__all__`, imported above)
#: and the facade's own.
__all__ = sorted([*contracts.__all__, *_OWN_NAMES], key=_export_order)


@dataclass(frozen=True)
class RunOutcome:
    """A finished run: its tables as DataFrames, where it is written (``None`` in memory), its
    resolved scenario, manifest and warnings."""

    tables: Mapping[str, pd.DataFrame]
    directory: Path | None
    scenario: Scenario
    manifest: Mapping[str, Any]
    warnings: tuple[str, ...]

    def __getitem__(self, table: str) -> pd.DataFrame:
        return self.tables[table]


def run(
    scenario: Scenario | str | Path | Mapping[str, Any],
    *,
    seed: int | None = None,
    overrides: Iterable[str] = (),
    out: str | Path | None = None,
) -> RunOutcome:
    """Run a scenario — a file path, plain data (a dict as in YAML) or a validated
    :class:`~netsim.scenario.schema.Scenario` — and return its tables.

    ``overrides`` are ``dotted.key=value`` strings as ``--set`` takes them; ``seed`` replaces
    the scenario's. With ``out`` the run directory is published under it (as ``netsim run``
    does, its manifest recording the overrides' resolved values as the run's parameters) and
    the tables are read back from it; without, the run stays in memory.
    """
    from netsim.analysis.runs import load_run
    from netsim.scenario.loader import (
        apply_overrides,
        load_scenario,
        override_parameters,
        scenario_to_data,
        validate_scenario,
    )
    from netsim.scenario.runner import run_in_memory, run_scenario, with_seed
    from netsim.scenario.schema import Scenario as ScenarioModel

    overrides = tuple(overrides)
    if isinstance(scenario, str | Path):
        resolved = load_scenario(Path(scenario), overrides)
    elif isinstance(scenario, ScenarioModel) and not overrides:
        resolved = scenario
    else:
        plain = scenario_to_data(scenario) if isinstance(scenario, ScenarioModel) else scenario
        data = apply_overrides(dict(plain), overrides, source="<scenario data>")
        resolved = validate_scenario(data, source="<scenario data>", base_dir=Path.cwd())
    resolved = with_seed(resolved, seed)
    if out is None:
        built, frames = run_in_memory(resolved)
        manifest = {"status": "complete", "seed": resolved.seed, "warnings": built.warnings}
        return RunOutcome(frames, None, resolved, manifest, tuple(built.warnings))
    parameters = override_parameters(resolved, overrides)
    result = run_scenario(resolved, out=Path(out), parameters=parameters)
    return RunOutcome(
        load_run(result.directory), result.directory, result.scenario, result.manifest,
        result.warnings,
    )  # fmt: skip


def load_run(
    path: str | Path, *, parameters: bool = True, allow_unverified: bool = False
) -> dict[str, pd.DataFrame]:
    """Every event table of a complete run directory, as DataFrames
    (:func:`netsim.analysis.runs.load_run`; a run without checksums only with
    ``allow_unverified``)."""
    from netsim.analysis.runs import load_run as load

    return load(Path(path), parameters=parameters, allow_unverified=allow_unverified)


def collect(
    path: str | Path | Iterable[str | Path],
    *,
    write: bool | None = None,
    allow_unverified: bool = False,
) -> pd.DataFrame:
    """The tidy long table of a sweep directory, a run directory, a folder of runs or a list of
    run directories (:func:`netsim.analysis.collect.collect`, which says what ``write`` and
    ``allow_unverified`` do)."""
    from netsim.analysis.collect import collect as tidy

    where = Path(path) if isinstance(path, str | Path) else [Path(p) for p in path]
    return tidy(where, write=write, allow_unverified=allow_unverified)
