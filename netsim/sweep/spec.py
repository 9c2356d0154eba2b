"""Sweep specifications: the ``sweep`` section of a scenario file, and the plan of runs it makes.

.. code-block:: yaml

    sweep:
      name: walk-grid                  # the sweep directory (default: the scenario's name)
      grid:                            # dotted scenario key -> values; the runs are the product
        walk.transfer_time: [100ms, 10s]
        walk.timeout:                  # derived values: computed from the point's scenario
          - "= walk.transfer_time + 10 * gossip.period"
          - "= walk.transfer_time + 100 * gossip.period"
        walk.kill_probability: {from: 0, to: 0.05, count: 2}
      derived:                         # keys computed at every point (not grid axes)
        metrics.sample_every: "= walk.transfer_time / 2"
      repetitions: 3

Every grid point × repetition is one run of the scenario with the point's values set. Its seed
is derived from the scenario's seed, the point's values and the repetition index (not from the
point's position), so extending a grid keeps the seeds — and the finished runs — of the points
it already had. Everything is checked, and every point's scenario validated, before any run.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from netsim.errors import ScenarioError, SweepError
from netsim.scenario.loader import parse_yaml, scenario_to_data, set_dotted, validate_scenario
from netsim.scenario.runner import run_id_for
from netsim.scenario.schema import Scenario
from netsim.sweep.expressions import dotted_get, evaluate, is_expression, is_missing, lookup_in
from netsim.units import parse_bandwidth, parse_duration, parse_size

SWEEP_KEY = "sweep"
SWEEP_KEYS = ("name", "grid", "derived", "repetitions")
RANGE_KEYS = ("from", "to", "step", "count", "scale")
MAX_RUNS = 1_000_000  # a typo in a range should not plan a billion runs


@dataclass(frozen=True)
class SweepSpec:
    """A validated ``sweep`` section: grid axes (key → raw values), derived keys, repetitions."""

    name: str
    grid: tuple[tuple[str, tuple[Any, ...]], ...]
    derived: tuple[tuple[str, str], ...]
    repetitions: int

    @property
    def parameters(self) -> tuple[str, ...]:
        """The dotted keys that can differ between runs: grid axes, then derived keys."""
        return tuple(key for key, _ in self.grid) + tuple(key for key, _ in self.derived)

    @property
    def points(self) -> int:
        return math.prod(len(values) for _, values in self.grid)


@dataclass(frozen=True)
class PlannedRun:
    """One run of a sweep: its grid point, repetition, seed and validated scenario."""

    run: int
    point: int
    repetition: int
    seed: int
    parameters: dict[str, Any]  # dotted key -> resolved value (durations in seconds)
    scenario: Scenario

    @property
    def run_id(self) -> str:
        return run_id_for(self.scenario)


@dataclass(frozen=True)
class SweepPlan:
    """A sweep file read and expanded: the spec, the base scenario and every run."""

    source: Path
    spec: SweepSpec
    base: Scenario
    runs: tuple[PlannedRun, ...]


# --- reading the section -----------------------------------------------------------------


def _range_values(spec: Mapping[str, Any], where: str) -> tuple[Any, ...]:
    """Values of a ``{from, to, step}`` or ``{from, to, count[, scale]}`` range (inclusive)."""
    unknown = sorted(set(spec) - set(RANGE_KEYS))
    if unknown:
        raise SweepError(
            f"{where}: unknown range key {unknown[0]!r}; a range has from, to and step, or "
            "from, to, count and optionally scale (linear or log)"
        )
    if "from" not in spec or "to" not in spec or ("step" in spec) == ("count" in spec):
        raise SweepError(f"{where}: a range needs from, to and exactly one of step or count")
    durations = any(isinstance(spec.get(k), str) for k in ("from", "to", "step"))
    try:
        convert = parse_duration if durations else float
        start, stop = convert(spec["from"]), convert(spec["to"])
    except (TypeError, ValueError) as exc:
        raise SweepError(f"{where}: from and to must be numbers or durations ({exc})") from None
    scale = spec.get("scale", "linear")
    if scale not in ("linear", "log"):
        raise SweepError(f"{where}.scale: {scale!r}; allowed values: linear, log")
    if "count" in spec:
        count = spec["count"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise SweepError(f"{where}.count: {count!r}; a count is an integer >= 1")
        if scale == "log":
            if start <= 0 or stop <= 0:
                raise SweepError(f"{where}: a log range needs from and to > 0")
            values = np.geomspace(start, stop, count)
        else:
            values = np.linspace(start, stop, count)
    else:
        if scale != "linear":
            raise SweepError(f"{where}: scale log needs count, not step")
        try:
            step = (parse_duration if durations else float)(spec["step"])
        except (TypeError, ValueError) as exc:
            raise SweepError(f"{where}.step: {exc}") from None
        if not step > 0 or stop < start:
            raise SweepError(f"{where}: a step range needs step > 0 and to >= from")
        count = math.floor((stop - start) / step + 1e-9) + 1
        if count > MAX_RUNS:
            raise SweepError(f"{where}: {count} values; at most {MAX_RUNS} runs per sweep")
        values = start + step * np.arange(count)
    integral = all(isinstance(spec[k], int) for k in ("from", "to", "step") if k in spec)
    if integral and "step" in spec:
        return tuple(int(v) for v in np.rint(values))
    return tuple(float(v) for v in values)


def _axis_values(raw: Any, where: str) -> tuple[Any, ...]:
    if isinstance(raw, Mapping):
        values = _range_values(raw, where)
    elif isinstance(raw, list):
        values = tuple(raw)
    else:
        raise SweepError(
            f"{where}: expected a list of values or a range {{from, to, step|count}}, got {raw!r}"
        )
    if not values:
        raise SweepError(f"{where}: no values; give at least one")
    for value in values:
        if isinstance(value, dict | list):
            raise SweepError(f"{where}: {value!r}; a grid value is a scalar or '= expression'")
    return values


def _check_key(key: object, resolved: Mapping[str, Any], where: str) -> str:
    if not isinstance(key, str) or not key or key.startswith(SWEEP_KEY):
        raise SweepError(f"{where}: {key!r} is not a dotted scenario key")
    if key == "seed":
        raise SweepError(
            f"{where}: seed cannot be swept; every run's seed is derived from the scenario's "
            "seed, its grid point and its repetition (use repetitions)"
        )
    found = dotted_get(resolved, key)
    if is_missing(found) or isinstance(found, Mapping):
        parent = key.rpartition(".")[0]
        section = dotted_get(resolved, parent) if parent else resolved
        if isinstance(found, Mapping):
            hint = f"{key} is a section; sweep one of its keys"
        elif parent and (is_missing(section) or section is None):
            hint = f"the scenario has no {parent} section"
        elif isinstance(section, Mapping):
            hint = f"keys of {parent or 'the scenario'}: {', '.join(section)}"
        else:
            hint = f"{parent} is not a section"
        raise SweepError(f"{where}: {key} is not a key of the scenario ({hint})")
    return key


def read_spec(
    section: object, resolved: Mapping[str, Any], *, source: str, default_name: str
) -> SweepSpec:
    """Validate a ``sweep`` section against the base scenario's resolved data."""
    where = f"{source}: sweep"
    if not isinstance(section, Mapping):
        raise SweepError(f"{where}: expected a mapping with keys {', '.join(SWEEP_KEYS)}")
    unknown = sorted(set(section) - set(SWEEP_KEYS))
    if unknown:
        raise SweepError(
            f"{where}.{unknown[0]}: unknown key; allowed keys here: {', '.join(SWEEP_KEYS)}"
        )
    name = section.get("name", default_name)
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        raise SweepError(f"{where}.name: {name!r}; a name is a non-empty file name")
    grid_raw = section.get("grid")
    if not isinstance(grid_raw, Mapping) or not grid_raw:
        raise SweepError(
            f"{where}.grid: the grid is empty; give at least one dotted key with a list of "
            "values, e.g. grid: {{nodes: [100, 1000]}}"
        )
    grid = tuple(
        (_check_key(key, resolved, f"{where}.grid"), _axis_values(raw, f"{where}.grid.{key}"))
        for key, raw in grid_raw.items()
    )
    derived_raw = section.get("derived", {}) or {}
    if not isinstance(derived_raw, Mapping):
        raise SweepError(f"{where}.derived: expected a mapping of dotted keys to '= expression'")
    derived = []
    for key, expression in derived_raw.items():
        _check_key(key, resolved, f"{where}.derived")
        if key in grid_raw:
            raise SweepError(f"{where}.derived.{key}: already a grid axis")
        if not is_expression(expression):
            raise SweepError(
                f"{where}.derived.{key}: {expression!r}; a derived value is a string "
                "'= expression', e.g. '= walk.transfer_time + 10 * gossip.period'"
            )
        derived.append((key, expression))
    repetitions = section.get("repetitions", 1)
    if isinstance(repetitions, bool) or not isinstance(repetitions, int) or repetitions < 1:
        raise SweepError(f"{where}.repetitions: {repetitions!r}; repetitions is an integer >= 1")
    spec = SweepSpec(name, grid, tuple(derived), repetitions)
    if spec.points * repetitions > MAX_RUNS:
        raise SweepError(f"{where}: {spec.points * repetitions} runs; at most {MAX_RUNS}")
    return spec


# --- expanding it ------------------------------------------------------------------------


def _set_key(data: dict[str, Any], key: str, value: Any, where: str) -> None:
    """Set a swept key (as ``--set`` does); its parents were checked to be sections."""
    blocked = set_dotted(data, key, value)
    if blocked is not None:
        raise SweepError(f"{where}: {blocked} is not a section, so {key} cannot be set")


def point_seed(base_seed: int, point_values: Mapping[str, Any], repetition: int) -> int:
    """The seed of one run: a SeedSequence over the base seed, a digest of the point's raw
    grid values (key order and all) and the repetition index, cut to [0, 2⁶³)."""
    canonical = json.dumps(list(point_values.items()), sort_keys=False, default=str)
    digest = int.from_bytes(hashlib.sha256(canonical.encode("utf-8")).digest()[:8], "big")
    words = np.random.SeedSequence(base_seed, spawn_key=(digest, repetition)).generate_state(
        2, np.uint32
    )
    return int((int(words[0]) << 32 | int(words[1])) & (2**63 - 1))


def _numeric_lookup(raw: Mapping[str, Any], fallback: Mapping[str, Any], where: str):
    """Dotted keys read from the point's raw data (units parsed: durations in seconds, sizes
    in bytes), falling back to the base scenario's resolved value for keys left at defaults.
    No intermediate validation: the base's other values may not fit the point's literals."""
    from_base = lookup_in(fallback, where=where)

    def lookup(key: str) -> Any:
        value = dotted_get(raw, key)
        if is_missing(value) or value is None:
            return from_base(key)
        if isinstance(value, str):
            for parse in (parse_duration, parse_size, parse_bandwidth):
                try:
                    return parse(value)
                except ValueError:
                    continue
        return value

    return lookup


def _resolve_point(
    data: dict[str, Any],
    base: Mapping[str, Any],
    point_values: Mapping[str, Any],
    spec: SweepSpec,
    *,
    source: str,
    base_dir: Path,
) -> tuple[Scenario, dict[str, Any]]:
    """The point's validated scenario and its parameter values (expressions computed)."""
    label = ", ".join(f"{k}={v!r}" for k, v in point_values.items())
    where = f"{source}: sweep point ({label})"
    raw = copy.deepcopy(data)
    for key, value in point_values.items():
        if not is_expression(value):
            _set_key(raw, key, value, where)
    later = [(k, v) for k, v in point_values.items() if is_expression(v)] + list(spec.derived)
    for key, expression in later:  # in order: a derived key may read an earlier one
        value = evaluate(expression, _numeric_lookup(raw, base, where), where=where)
        _set_key(raw, key, value, where)
    try:
        scenario = validate_scenario(raw, source=where, base_dir=base_dir)
    except ScenarioError as exc:
        raise SweepError(str(exc)) from None
    resolved = scenario_to_data(scenario)
    return scenario, {key: dotted_get(resolved, key) for key in spec.parameters}


def has_sweep(path: Path) -> bool:
    """True iff the (readable, valid YAML) scenario file has a ``sweep`` section."""
    try:
        data = parse_yaml(Path(path).read_text(encoding="utf-8"), source=str(path))
    except (OSError, UnicodeDecodeError, ScenarioError):
        return False
    return SWEEP_KEY in data


def plan_sweep(path: Path) -> SweepPlan:
    """Read a scenario file with a ``sweep`` section and expand it into its runs."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SweepError(f"{path}: sweep file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SweepError(f"{path}: cannot read the sweep file: {exc}") from None
    data = parse_yaml(text, source=str(path))
    if SWEEP_KEY not in data:
        raise SweepError(
            f"{path}: no sweep section; add 'sweep: {{grid: {{dotted.key: [values]}}, "
            "repetitions: N}}' (see scenarios/README.md)"
        )
    section = data.pop(SWEEP_KEY)
    base_dir = path.resolve().parent
    base = validate_scenario(data, source=str(path), base_dir=base_dir)
    if base.seed is None:
        raise SweepError(
            f"{path}: seed: a sweep needs the scenario's seed, from which every run's seed is "
            "derived (add e.g. 'seed: 1')"
        )
    resolved_base = scenario_to_data(base)
    spec = read_spec(section, resolved_base, source=str(path), default_name=base.name)
    runs = []
    keys = [key for key, _ in spec.grid]
    for point, combination in enumerate(itertools.product(*(v for _, v in spec.grid))):
        values = dict(zip(keys, combination, strict=True))
        scenario, parameters = _resolve_point(
            data, resolved_base, values, spec, source=str(path), base_dir=base_dir
        )
        for repetition in range(spec.repetitions):
            seed = point_seed(base.seed, values, repetition)
            runs.append(
                PlannedRun(
                    run=len(runs),
                    point=point,
                    repetition=repetition,
                    seed=seed,
                    parameters=parameters,
                    scenario=scenario.model_copy(update={"seed": seed}),
                )
            )
    return SweepPlan(path, spec, base, tuple(runs))
