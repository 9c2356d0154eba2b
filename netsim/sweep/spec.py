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
      zip:                             # paired keys: one axis of the product, i-th with i-th
        learning.noise: [gaussian, k_norm_l2]
        learning.accounting: [rdp, basic]
      derived:                         # keys computed at every point (not grid axes)
        metrics.sample_every: "= walk.transfer_time / 2"
      repetitions: 3

The points are the product of the grid's axes and of each ``zip`` block, whose lists (of
equal length) pair their values one by one: the block above adds two points per grid point,
(gaussian, rdp) and (k_norm_l2, basic), not four. ``zip`` may also be a list of such blocks,
each its own axis. Every point × repetition is one run of the scenario with the point's
values set. Its seed
is derived from the scenario's seed, the point's values and the repetition index (not from the
point's position), so extending a grid keeps the seeds — and the finished runs — of the points
it already had. Everything is checked, and every point's scenario validated, before any run.

A sweep that is not a grid — a list of runs, each with its own overrides and its own seed —
is planned in code with :func:`plan_points` from a base scenario (plain data or a file) and
:class:`SweepPoint` objects; :func:`~netsim.sweep.execute.run_sweep` runs either plan.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from netsim.errors import ScenarioError, SweepError
from netsim.files import MAX_FILE_NAME_BYTES, file_name_problem
from netsim.scenario.loader import (
    parameter_value,
    parse_yaml,
    read_scenario_text,
    scenario_to_data,
    set_dotted,
    validate_scenario,
)
from netsim.scenario.runner import run_id_for
from netsim.scenario.schema import Scenario
from netsim.sweep.expressions import (
    dotted_get,
    evaluate,
    is_expression,
    is_missing,
    lookup_in,
    nearest_keys,
)
from netsim.sweep.selection import SelectSpec, draw_trials, read_select, section_mapping
from netsim.units import parse_bandwidth, parse_duration, parse_size

SWEEP_KEY = "sweep"
SWEEP_KEYS = ("name", "grid", "zip", "derived", "repetitions", "select")
RANGE_KEYS = ("from", "to", "step", "count", "scale")
#: Most runs a sweep plans (a typo in a range should not plan a billion runs). Every point's
#: scenario is validated before any run starts, at 0.5-2.6 ms a point (measured: 10,000 points
#: of a one-section scenario in ~5 s, of the walk paper's scenario with two expressions in
#: 26 s), so a cap of 100,000 meant minutes of validation before the first run.
MAX_RUNS = 10_000


#: One axis of a sweep's product: its keys, and its values as rows (one value per key): a grid
#: key alone with one row per value, or a ``zip`` block's keys with their values paired.
Axis = tuple[tuple[str, ...], tuple[tuple[Any, ...], ...]]


@dataclass(frozen=True)
class SweepSpec:
    """A validated ``sweep`` section: grid axes (key → raw values), ``zip`` blocks (paired
    keys, each block one axis), derived keys, repetitions."""

    name: str
    grid: tuple[tuple[str, tuple[Any, ...]], ...]
    derived: tuple[tuple[str, str], ...]
    repetitions: int
    # Set only by plan_points (listed points, no grid): the keys the points override, and
    # how many distinct points there are (runs whose scenarios differ only in the seed).
    overridden: tuple[str, ...] = ()
    listed_points: int | None = None
    #: The ``select`` key: how the best point is chosen and its privacy stated
    #: (:mod:`netsim.sweep.selection`); None: no selection.
    select: SelectSpec | None = None
    #: The ``zip`` blocks, each one axis of the product after the grid's (:data:`Axis`).
    zipped: tuple[Axis, ...] = ()

    @property
    def axes(self) -> tuple[Axis, ...]:
        """The axes of the product, the first varying slowest: each grid key, then each
        ``zip`` block."""
        grid = tuple(((key,), tuple((value,) for value in values)) for key, values in self.grid)
        return grid + self.zipped

    @property
    def swept(self) -> tuple[str, ...]:
        """The keys the axes set: the grid's, then each ``zip`` block's."""
        return tuple(key for keys, _ in self.axes for key in keys)

    @property
    def parameters(self) -> tuple[str, ...]:
        """The dotted keys that can differ between runs: grid axes, ``zip`` keys, then
        derived keys (for listed points: every key a point overrides)."""
        return self.swept + tuple(key for key, _ in self.derived) + self.overridden

    @property
    def points(self) -> int:
        if self.listed_points is not None:
            return self.listed_points
        return math.prod(len(rows) for _, rows in self.axes)

    def point_values(self) -> list[dict[str, Any]]:
        """Every point's raw values (swept key → value as written), in point order: the
        product of :attr:`axes`, the last varying fastest."""
        keys = self.swept
        return [
            dict(zip(keys, (value for row in rows for value in row), strict=True))
            for rows in itertools.product(*(rows for _, rows in self.axes))
        ]


@dataclass(frozen=True)
class PlannedRun:
    """One run of a sweep: its grid point, repetition, seed and validated scenario."""

    run: int
    point: int
    repetition: int
    seed: int
    parameters: dict[str, Any]  # dotted key -> resolved value (durations in seconds)
    scenario: Scenario
    label: str = ""  # listed points: the point's label

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
    # The text kept as sweep.yaml when the plan was not read from a sweep file (plan_points);
    # None: the file at ``source`` is copied.
    source_text: str | None = None


@dataclass(frozen=True)
class SweepPoint:
    """One listed run of :func:`plan_points`: the base scenario with ``overrides`` set, run
    with exactly ``seed``.

    ``overrides`` maps dotted keys to values, as ``--set`` does (``{"dola.epsilon": 0.1}``); a
    value may be a mapping that replaces a whole section (``{"topology": {"kind":
    "complete"}}``). They are set in their order. ``label`` names the point in messages and in
    ``plan.parquet``.
    """

    overrides: Mapping[str, Any]
    seed: int
    label: str = ""


# --- reading the section -----------------------------------------------------------------


def _range_bounds(spec: Mapping[str, Any], where: str) -> tuple[float, float, bool]:
    """A range's keys checked, and its ``from`` and ``to`` (seconds when any of from, to or
    step is a duration text, which the third value says)."""
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
    return start, stop, durations


def _counted_range(count: object, start: float, stop: float, scale: str, where: str) -> np.ndarray:
    """``count`` values from ``start`` to ``stop``, evenly or (``scale: log``) geometrically
    spaced."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise SweepError(f"{where}.count: {count!r}; a count is an integer >= 1")
    if count > MAX_RUNS:  # before anything of that size is made
        raise SweepError(f"{where}: {count} values; at most {MAX_RUNS} runs per sweep")
    if scale == "log":
        if start <= 0 or stop <= 0:
            raise SweepError(f"{where}: a log range needs from and to > 0")
        return np.geomspace(start, stop, count)
    return np.linspace(start, stop, count)


def _stepped_range(
    raw_step: object, start: float, stop: float, durations: bool, scale: str, where: str
) -> np.ndarray:
    """``start``, ``start + step``, … up to ``stop`` (within 1e-9 steps), linear only."""
    if scale != "linear":
        raise SweepError(f"{where}: scale log needs count, not step")
    try:
        step = (parse_duration if durations else float)(raw_step)
    except (TypeError, ValueError) as exc:
        raise SweepError(f"{where}.step: {exc}") from None
    if not step > 0 or stop < start:
        raise SweepError(f"{where}: a step range needs step > 0 and to >= from")
    # a subnormal step makes the quotient infinite (math.floor raised OverflowError), so the
    # count is compared as a float before it is made an integer
    exact = (stop - start) / step + 1e-9
    if exact >= MAX_RUNS:  # floor(exact) + 1 > MAX_RUNS
        shown = (
            f"{math.floor(exact) + 1}"
            if exact < 1e15
            else (f"about {exact:.3g}" if math.isfinite(exact) else "infinitely many")
        )
        raise SweepError(f"{where}: {shown} values; at most {MAX_RUNS} runs per sweep")
    count = math.floor(exact) + 1
    return start + step * np.arange(count)


def _range_values(spec: Mapping[str, Any], where: str) -> tuple[Any, ...]:
    """Values of a ``{from, to, step}`` or ``{from, to, count[, scale]}`` range (inclusive)."""
    start, stop, durations = _range_bounds(spec, where)
    scale = spec.get("scale", "linear")
    if scale not in ("linear", "log"):
        raise SweepError(f"{where}.scale: {scale!r}; allowed values: linear, log")
    if "count" in spec:
        values = _counted_range(spec["count"], start, stop, scale, where)
    else:
        values = _stepped_range(spec["step"], start, stop, durations, scale, where)
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
        near = [] if isinstance(found, Mapping) else nearest_keys(resolved, key)
        if near:
            hint = f"did you mean {' or '.join(near)}? {hint}"
        raise SweepError(f"{where}: {key} is not a key of the scenario ({hint})")
    return key


def read_spec(
    section: object, resolved: Mapping[str, Any], *, source: str, default_name: str
) -> SweepSpec:
    """Validate a ``sweep`` section against the base scenario's resolved data."""
    where = f"{source}: sweep"
    section = section_mapping(section, SWEEP_KEYS, where)
    name = _check_sweep_name(section.get("name", default_name), f"{where}.name")
    grid_raw = section.get("grid")
    has_zip = section.get("zip") is not None
    if not isinstance(grid_raw, Mapping) or not (grid_raw or has_zip):
        if not (grid_raw is None and has_zip):
            raise SweepError(
                f"{where}.grid: the grid is empty; give at least one dotted key with a list "
                "of values, e.g. grid: {nodes: [100, 1000]} (or paired keys in a zip block)"
            )
        grid_raw = {}
    grid = tuple(
        (_check_key(key, resolved, f"{where}.grid"), _axis_values(raw, f"{where}.grid.{key}"))
        for key, raw in grid_raw.items()
    )
    zipped = _read_zip(section.get("zip"), resolved, grid_raw, f"{where}.zip")
    zip_keys = {key for keys, _ in zipped for key in keys}
    derived_raw = section.get("derived", {}) or {}
    if not isinstance(derived_raw, Mapping):
        raise SweepError(f"{where}.derived: expected a mapping of dotted keys to '= expression'")
    derived = []
    for key, expression in derived_raw.items():
        _check_key(key, resolved, f"{where}.derived")
        if key in grid_raw:
            raise SweepError(f"{where}.derived.{key}: already a grid axis")
        if key in zip_keys:
            raise SweepError(f"{where}.derived.{key}: already a key of a zip block")
        if not is_expression(expression):
            raise SweepError(
                f"{where}.derived.{key}: {expression!r}; a derived value is a string "
                "'= expression', e.g. '= walk.transfer_time + 10 * gossip.period'"
            )
        derived.append((key, expression))
    repetitions = section.get("repetitions", 1)
    if isinstance(repetitions, bool) or not isinstance(repetitions, int) or repetitions < 1:
        raise SweepError(f"{where}.repetitions: {repetitions!r}; repetitions is an integer >= 1")
    select = None
    swept = [key for key, _ in grid] + [key for keys, _ in zipped for key in keys]
    if "select" in section:
        select = read_select(section["select"], swept, repetitions, f"{where}.select")
    spec = SweepSpec(name, grid, tuple(derived), repetitions, select=select, zipped=zipped)
    if spec.points * repetitions > MAX_RUNS:
        raise SweepError(f"{where}: {spec.points * repetitions} runs; at most {MAX_RUNS}")
    return spec


def _read_zip_block(
    block: object, resolved: Mapping[str, Any], taken: Mapping[str, str], where: str
) -> Axis:
    """One ``zip`` block: dotted key → list (or range) of values, every list of one length,
    paired i-th with i-th. ``taken`` maps the keys already swept to where (grid or an earlier
    block); one of them here is an error."""
    if not isinstance(block, Mapping) or not block:
        raise SweepError(
            f"{where}: expected a mapping of dotted keys to lists of equal length, e.g. zip: "
            "{learning.noise: [gaussian, k_norm_l2], learning.accounting: [rdp, basic]}"
        )
    columns: dict[str, tuple[Any, ...]] = {}
    for key, raw in block.items():
        _check_key(key, resolved, where)
        if key in taken:
            raise SweepError(
                f"{where}.{key}: already swept in {taken[key]}; a key is swept in the grid or "
                "in one zip block, not both"
            )
        columns[key] = _axis_values(raw, f"{where}.{key}")
    lengths = {len(values) for values in columns.values()}
    if len(lengths) > 1:
        counts = ", ".join(f"{key} has {len(values)}" for key, values in columns.items())
        raise SweepError(
            f"{where}: the lists of a zip block pair their values one by one, so they must have "
            f"equal lengths: {counts}"
        )
    return tuple(columns), tuple(zip(*columns.values(), strict=True))


def _read_zip(
    raw: object, resolved: Mapping[str, Any], grid: Mapping[str, Any], where: str
) -> tuple[Axis, ...]:
    """The ``zip`` key: one block (a mapping) or a list of blocks, each one axis."""
    if raw is None:
        return ()
    blocks = raw if isinstance(raw, list) else [raw]
    if not blocks:
        raise SweepError(f"{where}: an empty list; give a zip block of dotted keys")
    taken = {key: "the grid" for key in grid}
    axes = []
    for index, block in enumerate(blocks):
        block_where = f"{where}[{index}]" if isinstance(raw, list) else where
        axis = _read_zip_block(block, resolved, taken, block_where)
        taken.update({key: f"sweep.zip[{index}]" for key in axis[0]})
        axes.append(axis)
    return tuple(axes)


# --- expanding it ------------------------------------------------------------------------


def _check_sweep_name(name: object, where: str) -> str:
    """A sweep's name, which names its directory: refused here, before any run, when the file
    system would refuse it later (:func:`~netsim.files.file_name_problem`)."""
    problem = "it is not a string" if not isinstance(name, str) else file_name_problem(name)
    if problem is not None:
        raise SweepError(
            f"{where}: {name!r}: {problem}; a sweep's name names its directory: 1 to "
            f"{MAX_FILE_NAME_BYTES} bytes of UTF-8 without '/', NUL or control characters, not "
            "starting with '.'"
        )
    assert isinstance(name, str)
    return name


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
        data = parse_yaml(read_scenario_text(Path(path)), source=str(path))
    except (OSError, UnicodeDecodeError, ScenarioError):
        return False
    return SWEEP_KEY in data


def _read_yaml_file(path: Path, what: str) -> dict[str, Any]:
    """The plain data of the YAML file ``path`` (``what`` names it in messages)."""
    try:
        text = read_scenario_text(path, what)
    except FileNotFoundError:
        raise SweepError(f"{path}: {what} not found") from None
    except ScenarioError as exc:  # not a regular file, or too large
        raise SweepError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SweepError(f"{path}: cannot read the {what}: {exc}") from None
    return parse_yaml(text, source=str(path))


def plan_sweep(path: Path) -> SweepPlan:
    """Read a scenario file with a ``sweep`` section and expand it into its runs."""
    path = Path(path)
    data = _read_yaml_file(path, "sweep file")
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
    point_values = spec.point_values()
    # every point × repetition, or (random_trials) the drawn trials, each at its own seed
    if spec.select is not None and spec.select.privacy == "random_trials":
        schedule = list(enumerate(draw_trials(spec.select, spec.points, base.seed)))
    else:
        schedule = [(p * spec.repetitions + r, p) for p in range(spec.points)
                    for r in range(spec.repetitions)]  # fmt: skip
    resolved: dict[int, tuple[Scenario, dict[str, Any]]] = {}
    runs: list[PlannedRun] = []
    uses = [0] * spec.points
    for _, point in schedule:
        values = point_values[point]
        if point not in resolved:
            resolved[point] = _resolve_point(
                data, resolved_base, values, spec, source=str(path), base_dir=base_dir
            )
        scenario, parameters = resolved[point]
        repetition, uses[point] = uses[point], uses[point] + 1
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


# --- listed points -----------------------------------------------------------------------


def _check_override_key(key: object, where: str) -> str:
    """A dotted key a listed point may set (its value is checked by validating the point)."""
    if not isinstance(key, str) or not key or not all(key.split(".")):
        raise SweepError(f"{where}: {key!r} is not a dotted scenario key")
    if key == "seed":
        raise SweepError(f"{where}: give the run's seed as the point's seed, not as an override")
    if key.split(".")[0] == SWEEP_KEY:
        raise SweepError(f"{where}: {key} is not a scenario key")
    return key


def _check_point_seed(seed: object, where: str) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise SweepError(f"{where}: seed {seed!r}; a seed is an integer in [0, 2^63)")
    return seed


def _parameter_cell(value: Any) -> Any:
    """A parameter value as ``plan.parquet`` holds it: a scalar as it is, a section or a list
    as canonical JSON text, an absent key as None."""
    return None if is_missing(value) else parameter_value(value)


def _one_type_per_key(rows: list[dict[str, Any]], keys: Sequence[str]) -> None:
    """Make every parameter column one type (numbers may mix): else all its values as text."""
    for key in keys:
        kinds = {type(row[key]) for row in rows if row[key] is not None}
        if len(kinds) > 1 and not kinds <= {int, float}:
            for row in rows:
                if row[key] is not None and not isinstance(row[key], str):
                    row[key] = json.dumps(row[key], default=str)


def _listed_source_text(
    name: str, source: Path, data: Mapping[str, Any], points: Sequence[SweepPoint]
) -> str:
    """``sweep.yaml`` of a plan of listed points: the base scenario and every point."""
    record = {
        "name": name,
        "base": data,
        "points": [{"label": p.label, "seed": p.seed, "set": dict(p.overrides)} for p in points],
    }
    plain = json.loads(json.dumps(record, default=str))  # plain YAML types only
    header = (
        f"# Sweep {name}, planned by netsim.sweep.plan_points from {source}: the base scenario "
        "and every listed point (its overrides, set in order, and its seed).\n"
    )
    return header + yaml.safe_dump(plain, sort_keys=False, allow_unicode=True)


def _read_listed_base(
    base: Mapping[str, Any] | Path, source: Path | None, base_dir: Path | None
) -> tuple[dict[str, Any], Path, Path | None]:
    """The base scenario of :func:`plan_points` as plain data (a copy, without a ``sweep``
    section), the name it goes by, and the directory its relative paths are read from."""
    if isinstance(base, Mapping):
        data = copy.deepcopy(dict(base))
        source = Path(source) if source is not None else Path("<data>")
    else:
        path = Path(base)
        data = _read_yaml_file(path, "scenario file")
        source = Path(source) if source is not None else path
        base_dir = path.resolve().parent if base_dir is None else base_dir
    data.pop(SWEEP_KEY, None)
    return data, source, base_dir


def _point_scenario(
    data: Mapping[str, Any],
    point: object,
    index: int,
    source: Path,
    base_dir: Path | None,
    keys: list[str],
) -> tuple[int, Scenario, str]:
    """Listed point ``index``: its seed, its validated scenario (``data`` with its overrides
    set in order) and how messages name it; adds the keys it overrides to ``keys``."""
    if not isinstance(point, SweepPoint) or not isinstance(point.label, str):
        raise SweepError(
            f"{source}: sweep point {index}: {point!r} is not a SweepPoint with a text label"
        )
    where = f"{source}: point {index}" + (f" ({point.label})" if point.label else "")
    seed = _check_point_seed(point.seed, where)
    if not isinstance(point.overrides, Mapping):
        raise SweepError(f"{where}: overrides must map dotted keys to values")
    raw = copy.deepcopy(data)
    for key, value in point.overrides.items():
        _set_key(raw, _check_override_key(key, where), copy.deepcopy(value), where)
        if key not in keys:
            keys.append(key)
    raw["seed"] = seed
    try:
        scenario = validate_scenario(raw, source=where, base_dir=base_dir)
    except ScenarioError as exc:
        raise SweepError(str(exc)) from None
    return seed, scenario, where


class _ListedRuns:
    """The runs of listed points as they are planned: a point number per resolved scenario
    without its seed (in order of appearance), repetitions per point, and the run ids seen
    (two points with the same scenario and seed are an error)."""

    def __init__(self) -> None:
        self.configurations: dict[str, int] = {}  # resolved scenario without seed -> point
        self.repetitions: list[int] = []  # runs so far per point
        self.run_ids: dict[str, int] = {}
        self.runs: list[PlannedRun] = []
        self.resolved: list[dict[str, Any]] = []

    def add(self, index: int, seed: int, scenario: Scenario, label: str, where: str) -> None:
        """Plan run ``index`` (its parameters are set once every point's keys are known)."""
        run_id = run_id_for(scenario)
        if run_id in self.run_ids:
            raise SweepError(
                f"{where}: the same scenario and seed as point {self.run_ids[run_id]} (run "
                f"{run_id}); give the points different overrides or seeds"
            )
        self.run_ids[run_id] = index
        resolved = scenario_to_data(scenario)
        unseeded = {key: value for key, value in resolved.items() if key != "seed"}
        configuration = json.dumps(unseeded, sort_keys=True, separators=(",", ":"))
        number = self.configurations.setdefault(configuration, len(self.configurations))
        if number == len(self.repetitions):
            self.repetitions.append(0)
        self.runs.append(
            PlannedRun(
                run=index,
                point=number,
                repetition=self.repetitions[number],
                seed=seed,
                parameters={},
                scenario=scenario,
                label=label,
            )
        )
        self.repetitions[number] += 1
        self.resolved.append(resolved)


def plan_points(
    base: Mapping[str, Any] | Path,
    points: Sequence[SweepPoint],
    *,
    name: str | None = None,
    base_dir: Path | None = None,
    source: Path | None = None,
) -> SweepPlan:
    """Plan a sweep of listed runs: ``base`` with each point's overrides set, run with exactly
    the point's seed (not a derived one). The plan runs with
    :func:`~netsim.sweep.execute.run_sweep`, like a grid's.

    ``base`` is a scenario as plain data (durations as ``"10s"`` or seconds) or a scenario
    file (its ``sweep`` section, if any, is ignored). ``name`` is the sweep directory's name
    (default: the base scenario's name). Relative paths in the scenario are read from
    ``base_dir`` (default: a file's directory; for plain data the current directory).
    ``source`` names the base in messages and ``sweep.json`` (default: the file, or
    ``<data>``); ``sweep.yaml`` records the base and every point.

    ``plan.runs[i]`` is ``points[i]``. Runs whose scenarios differ only in the seed form one
    point (``point``, numbered in order of appearance), and ``repetition`` counts them. The
    run ids are the usual ``<scenario name>-seed<seed>-<hash>``; two points with the same
    scenario and seed are an error. The parameters are every key a point overrides, with the
    resolved value at each run (sections as JSON text). Every point's scenario is validated
    before this returns.
    """
    data, source, base_dir = _read_listed_base(base, source, base_dir)
    where_sweep = f"{source}: sweep"
    base_scenario = validate_scenario(copy.deepcopy(data), source=str(source), base_dir=base_dir)
    name = _check_sweep_name(base_scenario.name if name is None else name, f"{where_sweep} name")
    if not points:
        raise SweepError(f"{where_sweep} {name}: no points; give at least one SweepPoint")
    if len(points) > MAX_RUNS:
        raise SweepError(f"{where_sweep} {name}: {len(points)} runs; at most {MAX_RUNS}")
    keys: list[str] = []
    listed = _ListedRuns()
    for index, point in enumerate(points):
        seed, scenario, where = _point_scenario(data, point, index, source, base_dir, keys)
        listed.add(index, seed, scenario, point.label, where)
    rows = [{key: _parameter_cell(dotted_get(r, key)) for key in keys} for r in listed.resolved]
    _one_type_per_key(rows, keys)
    runs = [
        dataclasses.replace(run, parameters=row) for run, row in zip(listed.runs, rows, strict=True)
    ]
    repetitions = listed.repetitions
    spec = SweepSpec(
        name, (), (), max(repetitions), overridden=tuple(keys), listed_points=len(repetitions)
    )
    text = _listed_source_text(name, source, data, points)
    return SweepPlan(source, spec, base_scenario, tuple(runs), source_text=text)
