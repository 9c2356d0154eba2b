"""The component contract, for any component: netsim's own (``tests/test_contract.py``) and
yours (as scikit-learn's ``check_estimator`` and networkx's backend test suite).

:func:`check_component` hosts a component — a registered name or a class, given as the class
or as ``package.module:Class`` — in a small scenario made for its slot and checks that

- it is a usable component of its slot (it derives from an interface, implements its abstract
  methods, its ``Config`` is a ``ComponentConfig``; a walk's has the ``agent`` key);
- the scenario validates, with the component's default config or the keys you give;
- it builds on a small network and the run ends;
- ``finish()`` is called exactly once per built component;
- the run writes only tables its components declare (plus the network's own);
- the same seed gives identical tables;
- a component of the gossip engine with round support (a gossip application, the walk service)
  also runs with ``gossip.mode: rounds`` (and, given an ``agreement`` measure, its rounds agree
  with its exact mode on a tiny scenario);
- a noise mechanism's events claim no more than its class's ``guarantee``
  (:func:`claim_problem`); an (ε, δ)-DP mechanism adds the noise its event declares
  (:func:`declared_noise_problem`); a claim of ε-DP passes the empirical privacy audit
  (:mod:`netsim.privacy.audit`) of ``noise()`` and of what ``release()`` returns
  (:func:`release_audited_loss`), which catches a false claim.

In pytest::

    from netsim.testing import assert_component_contract

    def test_my_walk_keeps_the_contract():
        assert_component_contract("my_package.walk:MyWalk", keys={"step_time": "2s"})

From the shell: ``netsim check my_walk --set step_time=2s`` prints each check with ``ok`` or
``failed`` (exit status 0 when every check passed, 1 if one failed).

The agreement of rounds mode with exact mode is also a check of a whole scenario
(:func:`check_agreement`, ``netsim check my_scenario.yaml --agreement broadcasts.t90 --within
1.5``): the scenario runs with ``gossip.mode`` exact and rounds over a few seeds, and the mean of
one metric must agree within the allowance the researcher states for rounds mode's documented
approximations (messages take no time; news spreads in whole rounds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from netsim.contracts import Component, Mechanism, Model, supports_rounds
from netsim.errors import ComponentError, NetsimError, ScenarioError, did_you_mean
from netsim.lazy import lazy_module
from netsim.registry import REGISTRY, SLOT_NAMES, import_reference, interface_problem

if TYPE_CHECKING:
    import dp_accounting
    import pandas as pd
else:
    dp_accounting = lazy_module("dp_accounting")
    pd = lazy_module("pandas")

__all__ = [
    "BASE_SCENARIO",
    "CheckResult",
    "ContractError",
    "UnknownMetricError",
    "assert_component_contract",
    "audited_loss",
    "check_agreement",
    "check_component",
    "claim_problem",
    "contract_scenario",
    "declared_noise_problem",
    "mechanism_checks",
    "mechanism_claim",
    "mechanism_release",
    "metric_values",
    "probed_release_problem",
    "release_audited_loss",
    "resolve_component",
    "round_mode_means",
]

#: Tables the run writes for its churn (not a component of the scenario).
NETWORK_TABLES = frozenset({"churn", "trace_assignment"})

#: The small scenario every component is hosted in (a ring of 12 nodes, two minutes).
BASE_SCENARIO: Mapping[str, Any] = {
    "name": "contract",
    "seed": 11,
    "nodes": 12,
    "duration": "2min",
    "topology": {"kind": "ring", "k": 2},
}
#: The sections added for a component that requires them (``requires``).
GOSSIP: Mapping[str, Any] = {"period": "1s"}
LEARNING: Mapping[str, Any] = {
    "dataset": {"name": "spambase"},
    "algorithm": "dp-sgd-inf",
    "evaluate_every": 20,
}
SECTIONS: Mapping[str, Mapping[str, Any]] = {"gossip": GOSSIP, "learning": LEARNING}

#: Samples of the privacy audit of a mechanism that claims ε-DP.
AUDIT_SAMPLES = 200_000


class UnknownMetricError(NetsimError):
    """The agreement check names a table the run did not write, or a column it lacks."""


class ContractError(NetsimError, AssertionError):
    """A component that does not keep the contract (:func:`assert_component_contract`): an
    ``AssertionError``, so pytest reports it as a failed test."""


@dataclass(frozen=True)
class CheckResult:
    """One check of the contract: what it checks, whether it passed, and why not."""

    check: str
    ok: bool
    detail: str = ""

    def line(self) -> str:
        """``ok      <check>`` or ``failed  <check>: <detail>``."""
        if self.ok:
            return f"ok      {self.check}" + (f" ({self.detail})" if self.detail else "")
        return f"failed  {self.check}: {self.detail}"


def resolve_component(
    component: str | type[Component], slot: str | None = None
) -> list[tuple[str, str, type[Component]]]:
    """(slot, kind, class) of ``component``: a class, ``package.module:Class`` or a name
    registered in some slot (``slot`` picks one when a name is registered in several).
    :class:`~netsim.errors.ComponentError` if it is none of these."""
    slots = (slot,) if slot is not None else tuple(SLOT_NAMES)
    if slot is not None and slot not in SLOT_NAMES:
        raise ComponentError(
            f"unknown slot {slot!r}{did_you_mean(slot, SLOT_NAMES)}; the slots: "
            f"{', '.join(SLOT_NAMES)}"
        )
    if isinstance(component, type):
        return [(getattr(component, "slot", ""), _reference(component), component)]
    if ":" in component:
        cls = import_reference(component)
        return [(getattr(cls, "slot", ""), component, cls)]
    found = [
        (s, component, REGISTRY.lookup((s,), component)[0])
        for s in slots
        if component in REGISTRY.names(s)
    ]
    if not found:
        try:  # the registry's own message: a package that cannot be loaded, or a clash
            REGISTRY.lookup(slots, component)
        except ComponentError as exc:
            if not str(exc).startswith(f"unknown value {component!r}"):
                raise ComponentError(str(exc)) from None
        names = [name for s in slots for name in REGISTRY.names(s)]
        raise ComponentError(
            f"unknown value {component!r}{did_you_mean(component, names)}; registered "
            f"components: {', '.join(repr(n) for n in names)}, or a class as "
            "package.module:Class"
        )
    return found


def _reference(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def contract_scenario(
    slot: str,
    kind: str,
    keys: Mapping[str, Any] | None = None,
    sections: Mapping[str, Any] | None = None,
    cls: type[Component] | None = None,
) -> dict[str, Any]:
    """The small scenario (plain data) hosting the component ``kind`` of ``slot`` with its
    ``keys``: as its section's ``kind`` (topology, churn, walk, walk.agent, a
    ``components`` entry) or by name (a mechanism as ``learning.noise``, a data-set loader as
    ``learning.dataset.name``, with ``keys`` in the data-set section). Sections its class
    requires are added; ``sections`` replace or add top-level keys last."""
    keys = dict(keys or {})
    data: dict[str, Any] = dict(BASE_SCENARIO)
    required = set(cls.requires) if cls is not None else set()
    if slot == "topology":
        data["topology"] = {"kind": kind, **keys}
    elif slot == "churn":
        data["churn"] = {"kind": kind, **keys}
    elif slot == "walk":
        data["walk"] = {"kind": kind, "agent": {"kind": "visit_counter"}, **keys}
    elif slot == "walk_agent":
        data["walk"] = {"kind": "ideal", "agent": {"kind": kind, **keys}}
    elif slot in ("application", "protocol", "learner", "observer"):
        data["components"] = {"x": {"kind": kind, **keys}}
    elif slot in ("transport", "gossip"):
        # as the links or gossip section, carrying a broadcast's messages
        data["links" if slot == "transport" else "gossip"] = {"kind": kind, **keys}
        data.setdefault("gossip", dict(GOSSIP))
        data["broadcast"] = {"interval": "20s"}
    elif slot == "mechanism":
        # an (ε, δ) mechanism needs a δ budget, or every use is refused
        delta = {"delta": 1e-5} if cls is not None and cls.spends_delta() else {}
        noise: Any = {"kind": kind, **keys} if keys else kind  # its settings, if any
        data["learning"] = {**LEARNING, "algorithm": "dp-sgd-2", "noise": noise, **delta}
        data["walk"] = {"kind": "ideal", "agent": {"kind": "sgd"}}
    elif slot == "dataset":
        data["learning"] = {**LEARNING, "dataset": {"name": kind, **keys}}
        data["walk"] = {"kind": "ideal", "agent": {"kind": "sgd"}}
    elif slot == "model":
        # trained privately with clipping (any model can then run), carried by an ideal walk
        model: Any = {"kind": kind, **keys} if keys else kind
        data["learning"] = {**LEARNING, "algorithm": "dp-sgd-2", "model": model, "clip": 1.0}
        data["walk"] = {"kind": "ideal", "agent": {"kind": "sgd"}}
    else:
        raise ComponentError(f"unknown slot {slot!r}")
    for section in sorted(required):
        if section in SECTIONS and section not in data:
            data[section] = dict(SECTIONS[section])
    data.update(sections or {})
    return data


@contextmanager
def _counting_finish(classes: set[type]) -> Iterator[dict[int, int]]:
    """Count ``finish()`` calls per built component of ``classes`` (restored afterwards)."""
    calls: dict[int, int] = {}
    originals = {cls: cls.__dict__.get("finish") for cls in classes}
    resolved = {cls: cls.finish for cls in classes}  # before any is replaced (subclasses)
    for cls in classes:
        original = resolved[cls]

        def counted(self: Component, _original: Any = original) -> None:
            calls[id(self)] = calls.get(id(self), 0) + 1
            _original(self)

        cls.finish = counted  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        for cls, original in originals.items():
            if original is None:
                del cls.finish
            else:
                cls.finish = original  # type: ignore[method-assign]


def _run(data: Mapping[str, Any], seed: int | None = None) -> tuple[Any, dict[str, pd.DataFrame]]:
    from netsim.scenario.loader import validate_scenario
    from netsim.scenario.runner import run_in_memory

    if seed is not None:
        data = {**data, "seed": seed}
    scenario = validate_scenario(dict(data), source="contract", base_dir=None)
    return run_in_memory(scenario)


def _error(exc: BaseException) -> str:
    text = str(exc).strip().replace("\n", " ")
    return text if isinstance(exc, NetsimError) else f"{type(exc).__name__}: {text}"


def check_component(
    component: str | type[Component],
    *,
    slot: str | None = None,
    keys: Mapping[str, Any] | None = None,
    sections: Mapping[str, Any] | None = None,
    agreement: tuple[str, str, float] | None = None,
    audit_mechanism: bool = True,
    agreement_seeds: int = 3,
) -> list[CheckResult]:
    """Every check of the contract on ``component`` (a class, ``package.module:Class`` or a
    registered name; ``slot`` picks one of several registrations), in order; a check that
    cannot run because an earlier one failed is not listed.

    ``keys`` are the component's own keys when its defaults are not enough (``{"k": 3}``);
    ``sections`` replace or add top-level scenario keys (e.g. ``{"gossip": {"period":
    "5s"}}``). ``agreement`` = (table, metric, allowance) for a component with round support:
    the mean of ``metric`` over three seeds agrees between ``gossip.mode`` exact and rounds
    within ``allowance`` (over ``agreement_seeds`` seeds; a component without round support
    fails it). Raises :class:`~netsim.errors.ComponentError` only when ``component`` names
    nothing (an unknown name, a module that does not import)."""
    if (
        isinstance(agreement_seeds, bool)
        or not isinstance(agreement_seeds, int)
        or agreement_seeds < 1
    ):
        raise NetsimError(f"agreement_seeds {agreement_seeds!r}: a number of seeds >= 1")
    results: list[CheckResult] = []
    seeds = tuple(range(1, agreement_seeds + 1))
    for found_slot, kind, cls in resolve_component(component, slot):
        results.extend(_check_one(found_slot, kind, cls, keys, sections,
                                  (agreement, seeds), audit_mechanism))  # fmt: skip
    return results


def _check_one(
    slot: str,
    kind: str,
    cls: type[Component],
    keys: Mapping[str, Any] | None,
    sections: Mapping[str, Any] | None,
    asked: tuple[tuple[str, str, float] | None, tuple[int, ...]],
    audit_mechanism: bool,
) -> list[CheckResult]:
    from netsim.scenario.loader import validate_scenario

    agreement, seeds = asked
    title = SLOT_NAMES.get(slot, "component")
    results: list[CheckResult] = []
    problem = interface_problem(cls)
    name = f"{kind} is a usable {title}"
    results.append(CheckResult(name, problem is None, "" if problem is None else problem))
    if problem is not None:
        return results
    data = contract_scenario(slot, kind, keys, sections, cls)
    try:
        scenario = validate_scenario(dict(data), source="contract", base_dir=None)
        parts = scenario.plan.parts
    except Exception as exc:  # every failure is a failed check
        hint = "" if keys else "; give the keys it requires (--set KEY=VALUE, or keys=)"
        results.append(CheckResult("a small scenario with it validates", False, _error(exc) + hint))
        return results
    results.append(CheckResult("a small scenario with it validates", True))
    classes = {part.cls for part in parts}
    try:
        with _counting_finish(classes) as calls:
            built, tables = _run(data)
    except Exception as exc:
        results.append(CheckResult("it builds on a small network and runs", False, _error(exc)))
        return results
    results.append(CheckResult("it builds on a small network and runs", True))
    counts = {key: calls.get(id(c), 0) for key, c in built.components.items()}
    unfinished = ", ".join(f"{key}: {n} calls" for key, n in counts.items() if n != 1)
    results.append(
        CheckResult("finish() is called exactly once per built component", not unfinished,
                    unfinished)
    )  # fmt: skip
    declared = set(NETWORK_TABLES)
    for part in parts:
        declared |= {table.name for table in part.table_schemas()}
    undeclared = sorted(set(tables) - declared)
    results.append(
        CheckResult(
            "it writes only the tables its components declare",
            not undeclared,
            f"undeclared: {', '.join(undeclared)}" if undeclared else "",
        )
    )
    results.append(_same_seed_same_tables(data, tables))
    if "gossip" in cls.requires and supports_rounds(cls):
        results.append(_runs_in_rounds(data))
        if agreement is not None:
            results.append(_round_agreement(data, agreement, seeds))
    elif agreement is not None:
        results.append(
            CheckResult(
                _agreement_check(*agreement), False,
                "it has no rounds mode to compare: it declares no round support or does not "
                "run on the gossip engine (requires no gossip)",
            )
        )  # fmt: skip
    if issubclass(cls, Mechanism):
        results.extend(mechanism_checks(kind, slot, keys, audit=audit_mechanism))
    if issubclass(cls, Model):
        results.extend(model_checks(kind, keys))
    return results


def _same_seed_same_tables(
    data: Mapping[str, Any], tables: Mapping[str, pd.DataFrame]
) -> CheckResult:
    check = "the same seed gives identical tables"
    try:
        _, again = _run(data)
    except Exception as exc:
        return CheckResult(check, False, f"a second run failed: {_error(exc)}")
    if set(again) != set(tables):
        return CheckResult(check, False, f"tables {sorted(tables)} then {sorted(again)}")
    for table, frame in tables.items():
        try:
            pd.testing.assert_frame_equal(frame, again[table], check_exact=True, obj=table)
        except AssertionError as exc:
            return CheckResult(check, False, str(exc).splitlines()[0])
    return CheckResult(check, True)


def _runs_in_rounds(data: Mapping[str, Any]) -> CheckResult:
    check = "it runs with gossip.mode rounds (it declares round support)"
    gossip = {**data.get("gossip", GOSSIP), "mode": "rounds"}
    try:
        _run({**data, "gossip": gossip})
    except Exception as exc:
        return CheckResult(check, False, _error(exc))
    return CheckResult(check, True)


#: The two gossip modes the agreement check compares.
MODES = ("exact", "rounds")


def metric_values(tables: Mapping[str, pd.DataFrame], table: str, metric: str) -> pd.Series:
    """Column ``metric`` of ``table`` in a run's ``tables``; a :class:`NetsimError` naming the
    nearest table or column when there is no such one."""
    if table not in tables:
        raise UnknownMetricError(
            f"the run wrote no table {table!r}{did_you_mean(table, tables)}; its tables: "
            f"{', '.join(sorted(tables))}"
        )
    columns = [str(column) for column in tables[table].columns]
    if metric not in columns:
        raise UnknownMetricError(
            f"table {table} has no column {metric!r}{did_you_mean(metric, columns)}; its "
            f"columns: {', '.join(columns)}"
        )
    return tables[table][metric]


def _mode_samples(
    run: Callable[[str, int], Mapping[str, pd.DataFrame]],
    table: str,
    metric: str,
    seeds: Sequence[int],
) -> dict[str, list[pd.Series]]:
    """``metric`` of ``table`` in each gossip mode at each seed (``run(mode, seed)``: the
    tables of one run)."""
    return {
        mode: [metric_values(run(mode, seed), table, metric).dropna() for seed in seeds]
        for mode in MODES
    }


def _tiny_mode_runs(data: Mapping[str, Any]) -> Callable[[str, int], dict[str, pd.DataFrame]]:
    """The runs of the agreement check on a tiny scenario (60 nodes, 5 minutes, k_out with
    k = 6) made from ``data``."""
    data = {**data, "nodes": 60, "duration": "5min", "topology": {"kind": "k_out", "k": 6}}

    def run(mode: str, seed: int) -> dict[str, pd.DataFrame]:
        return _run({**data, "gossip": {**data.get("gossip", GOSSIP), "mode": mode}}, seed)[1]

    return run


def round_mode_means(
    data: Mapping[str, Any], table: str, metric: str, seeds: tuple[int, ...] = (1, 2, 3)
) -> dict[str, float]:
    """The mean of ``metric`` of ``table`` over ``seeds`` in each gossip mode, on a tiny
    scenario (60 nodes, 5 minutes, k_out with k = 6) made from ``data``."""
    samples = _mode_samples(_tiny_mode_runs(data), table, metric, seeds)
    return {mode: float(pd.concat(values).mean()) for mode, values in samples.items()}


def _agreement_check(table: str, metric: str, allowance: float) -> str:
    return f"its rounds agree with its exact mode ({table}.{metric} within {allowance:g})"


def _agreement_result(
    samples: Mapping[str, list[pd.Series]], table: str, metric: str, allowance: float
) -> CheckResult:
    """Pass iff the means of the two modes' pooled values are finite and differ by at most
    ``allowance``; the detail gives each mean with the standard error of the seeds' means."""
    means = {mode: float(pd.concat(values).mean()) for mode, values in samples.items()}
    errors = {}
    for mode, values in samples.items():
        per_seed = np.array([v.mean() for v in values], dtype=np.float64)
        errors[mode] = (
            float(per_seed.std(ddof=1) / math.sqrt(per_seed.size))
            if per_seed.size > 1
            else math.nan
        )
    difference = abs(means["exact"] - means["rounds"])
    ok = all(math.isfinite(v) for v in means.values()) and difference <= allowance
    seeds = len(samples["exact"])
    detail = (
        f"exact {means['exact']:.6g} ± {errors['exact']:.2g}, rounds {means['rounds']:.6g} ± "
        f"{errors['rounds']:.2g} over {seeds} seeds, ± the standard error of the seeds' means; "
        f"difference {difference:.3g} {'<=' if ok else '>'} {allowance:g}"
    )
    return CheckResult(_agreement_check(table, metric, allowance), ok, detail)


def _round_agreement(
    data: Mapping[str, Any], agreement: tuple[str, str, float], seeds: tuple[int, ...] = (1, 2, 3)
) -> CheckResult:
    table, metric, allowance = agreement
    try:
        samples = _mode_samples(_tiny_mode_runs(data), table, metric, seeds)
    except Exception as exc:
        return CheckResult(_agreement_check(table, metric, allowance), False, _error(exc))
    return _agreement_result(samples, table, metric, allowance)


def check_agreement(
    path: str | Path,
    table: str,
    metric: str,
    allowance: float,
    *,
    seeds: int = 3,
    overrides: Sequence[str] = (),
) -> list[CheckResult]:
    """The agreement of rounds mode with exact mode on the scenario file ``path`` as it is
    (with ``overrides``, ``dotted.key=value`` as ``--set`` takes them): it runs with
    ``gossip.mode`` exact and rounds at ``seeds`` seeds (the scenario's seed and the next ones),
    and the mean of ``metric`` of ``table`` over each mode's runs must differ by at most
    ``allowance`` (what the approximations of rounds mode may move it by: news spreads in
    whole rounds, messages take no time; ``tests/test_rounds.py`` holds the shipped walk to
    such allowances). Two checks: the scenario runs in both modes, and they agree. Raises a
    :class:`~netsim.errors.NetsimError` for a scenario that does not validate, has no
    ``gossip`` section, or wrote no such table or column."""
    from netsim.scenario.loader import load_scenario
    from netsim.scenario.runner import run_in_memory

    path = Path(path)
    base = load_scenario(path, overrides)
    if getattr(base, "gossip", None) is None:
        raise ScenarioError(
            f"{path}: no gossip section; the agreement check runs the scenario with gossip.mode "
            "exact and rounds (rounds mode is the gossip engine's)"
        )
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 2:
        raise NetsimError(f"--seeds {seeds!r}: the agreement check needs at least 2 seeds")
    first = base.seed if base.seed is not None else 1
    chosen = tuple(range(first, first + seeds))
    runs_check = f"it runs with gossip.mode exact and rounds (seeds {chosen[0]} to {chosen[-1]})"

    def run(mode: str, seed: int) -> dict[str, pd.DataFrame]:
        scenario = load_scenario(path, [*overrides, f"gossip.mode={mode}", f"seed={seed}"])
        return run_in_memory(scenario)[1]

    try:
        samples = _mode_samples(run, table, metric, chosen)
    except UnknownMetricError as exc:
        raise UnknownMetricError(f"{path}: {table}.{metric}: {exc}") from None
    except Exception as exc:  # a failure of a run is a failed check
        return [CheckResult(runs_check, False, _error(exc))]
    return [CheckResult(runs_check, True), _agreement_result(samples, table, metric, allowance)]


# --- models: gradients, shapes, determinism --------------------------------------------------

#: The shapes a model is checked on: (classes, features, batch rows).
MODEL_SHAPES: tuple[tuple[int, int, int], ...] = ((2, 5, 4), (3, 4, 3))
#: Finite differences: the step, and the relative error allowed against the model's gradient.
FINITE_DIFFERENCE_STEP = 1e-6
FINITE_DIFFERENCE_TOLERANCE = 1e-4


def _model_batch(
    classes: int, features: int, rows: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.random.Generator]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, features))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1, keepdims=True))  # ‖x‖₂ ≤ 1, as normalised
    return x, np.arange(rows) % classes, rng


def _gradient_error(model: Model, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    """The largest relative error of ``per_example_gradients`` against central finite
    differences of ``losses`` (every parameter, every row)."""
    gradients = model.per_example_gradients(params, x, y)
    worst = 0.0
    step = FINITE_DIFFERENCE_STEP
    for j in range(params.size):
        up, down = params.copy(), params.copy()
        up[j] += step
        down[j] -= step
        numeric = (model.losses(up, x, y) - model.losses(down, x, y)) / (2 * step)
        scale = np.maximum(1.0, np.abs(numeric))
        worst = max(worst, float(np.max(np.abs(gradients[:, j] - numeric) / scale)))
    return worst


#: The largest difference allowed between a model's batched forms (``batch_gradients``,
#: ``step_many``) and its per-example gradients, relative to the row's largest entry (at
#: least 1): another summation order moves the checked shapes' gradients by about 1e-15, a
#: wrong override (another model's record, a wrong sign) by a whole entry.
BATCHED_TOLERANCE = 1e-9


def _largest_error(got: np.ndarray, expected: np.ndarray) -> float:
    """max |got − expected| over each row's max(1, max |expected|) (inf for a wrong shape)."""
    if np.shape(got) != np.shape(expected):
        return math.inf
    scale = np.maximum(1.0, np.abs(expected).max(axis=1, keepdims=True))
    return float(np.max(np.abs(got - expected) / scale))


def _batched_checks(
    model: Model, params: np.ndarray, x: np.ndarray, y: np.ndarray, where: str
) -> list[CheckResult]:
    """The batched forms against ``per_example_gradients``: ``example_gradient`` bit for bit,
    ``batch_gradients`` (one model per record, each its own parameters) and ``step_many``
    (eq. 8 of each model, Hegedűs et al. 2016) within :data:`BATCHED_TOLERANCE`."""
    rows = len(x)
    one = [model.per_example_gradients(params, x[k : k + 1], y[k : k + 1])[0] for k in range(rows)]
    same = all(
        np.array_equal(model.example_gradient(params, x[k], int(y[k])), one[k]) for k in range(rows)
    )
    rng = np.random.default_rng(rows)
    many = params + 0.3 * rng.normal(size=(rows, params.size))
    single = np.vstack(
        [model.per_example_gradients(many[k], x[k : k + 1], y[k : k + 1]) for k in range(rows)]
    )
    gradients = _largest_error(model.batch_gradients(many, x, y), single)
    rates, noise = rng.uniform(0.1, 1.0, rows), rng.normal(size=many.shape)
    stepped = model.step_many(many, x, y, rates, regularisation=0.1, noise=noise)
    step = _largest_error(stepped, many - rates[:, None] * (0.1 * many + single + noise))
    return [
        CheckResult(f"its one-record gradient is its per-example gradient, bit for bit ({where})",
                    same),
        CheckResult(f"its batched gradients are each model's per-example gradient ({where})",
                    gradients <= BATCHED_TOLERANCE, f"largest relative error {gradients:.2e}"),
        CheckResult(f"its batched step is each model's SGD step, eq. (8) ({where})",
                    step <= BATCHED_TOLERANCE, f"largest relative error {step:.2e}"),
    ]  # fmt: skip


def model_checks(kind: str, keys: Mapping[str, Any] | None = None) -> list[CheckResult]:
    """The checks of a model (:class:`~netsim.contracts.Model`) beyond a run: for binary and
    multi-class data, the shapes of what it returns, its per-example gradients against
    central finite differences of its losses, a batch's gradients equal to the rows' one at a
    time, the same results from the same seed, and its batched forms (one record, many models,
    a step of each) equal to its per-example gradients."""
    from netsim.registry import named_component

    results: list[CheckResult] = []
    for classes, features, rows in MODEL_SHAPES:
        where = f"{classes} classes, {features} features"
        try:
            model = named_component("model", kind, settings=keys)
            assert isinstance(model, Model)
            model.setup(classes, features)
            x, y, rng = _model_batch(classes, features, rows, seed=classes)
            params = model.initial_parameters(rng)
            params = params + 0.3 * rng.normal(size=params.shape)  # away from a symmetric start
            shapes = {
                "initial_parameters": (np.shape(params), (model.size,)),
                "losses": (np.shape(model.losses(params, x, y)), (rows,)),
                "per_example_gradients": (
                    np.shape(model.per_example_gradients(params, x, y)), (rows, model.size)
                ),
                "predict": (np.shape(model.predict(params, x)), (rows,)),
            }  # fmt: skip
            wrong = [f"{name} {got} (expected {want})" for name, (got, want) in shapes.items()
                     if tuple(got) != want]  # fmt: skip
            predicted = model.predict(params, x)
            if not wrong and not np.all((predicted >= 0) & (predicted < classes)):
                wrong.append(f"predict returns classes outside [0, {classes})")
            results.append(CheckResult(f"its shapes ({where})", not wrong, "; ".join(wrong)))
            error = _gradient_error(model, params, x, y)
            results.append(
                CheckResult(
                    f"its gradients match finite differences of its losses ({where})",
                    error <= FINITE_DIFFERENCE_TOLERANCE,
                    f"largest relative error {error:.2e}",
                )
            )
            batch = model.per_example_gradients(params, x, y)
            single = np.vstack(
                [model.per_example_gradients(params, x[i : i + 1], y[i : i + 1]) for i in
                 range(rows)]
            )  # fmt: skip
            results.append(
                CheckResult(
                    f"a batch's gradients are its rows' ({where})",
                    bool(np.allclose(batch, single, rtol=1e-12, atol=1e-14)),
                )
            )
            again = named_component("model", kind, settings=keys)
            assert isinstance(again, Model)
            again.setup(classes, features)
            same = np.array_equal(
                model.initial_parameters(np.random.default_rng(5)),
                again.initial_parameters(np.random.default_rng(5)),
            ) and np.array_equal(batch, again.per_example_gradients(params, x, y))
            results.append(CheckResult(f"the same seed gives the same model ({where})", same))
            results.extend(_batched_checks(model, params, x, y, where))
        except Exception as exc:
            results.append(CheckResult(f"it runs as a model ({where})", False, _error(exc)))
    return results


# --- mechanisms: the guarantee they claim is the one they give ------------------------------

#: Draws of one release whose spread is compared with the noise its event declares.
DECLARED_NOISE_DRAWS = 40_000
#: Allowed relative error of that spread: the standard deviation of 40,000 draws is within
#: about 0.35 % of σ (1/√(2n)), so 3 % is over eight standard errors.
DECLARED_NOISE_TOLERANCE = 0.03
#: Releases of each neighbouring input in the audit of ``release()`` (one call each), and the
#: radius of its regions (larger than the noise audit's: fewer samples).
RELEASE_AUDIT_SAMPLES = 50_000
RELEASE_AUDIT_RADIUS = 0.1
#: A region is usable when one of its counts reaches this (a count of 0 is taken as 1, so a
#: region that one input never reaches bounds the loss from below without dividing by 0).
AUDIT_MINIMUM_COUNT = 30


def mechanism_release(
    mechanism: Mechanism, value: np.ndarray, seed: int = 0
) -> tuple[np.ndarray, Any]:
    """One release of ``value`` at Δ = 1 with the share (ε, δ) = (1, 1e-5) (δ only if the
    mechanism spends δ)."""
    return mechanism.spend(
        value, sensitivity=1.0, epsilon=1.0, delta=1e-5, rng=np.random.default_rng(seed)
    )


def mechanism_claim(mechanism: Mechanism, dimension: int) -> str:
    """The guarantee ``mechanism``'s event claims for a release of ``dimension`` at ε = 1 (and
    δ = 1e-5 if it spends δ)."""
    return str(mechanism_release(mechanism, np.zeros(dimension))[1].guarantee)


def _loss_lower_bound(rows: list[Any]) -> float:
    """The largest privacy loss of the audit's regions minus 4 standard errors, over the
    regions where one input's count reaches :data:`AUDIT_MINIMUM_COUNT` (a count of 0 is
    taken as 1: a region the other input never reaches, as a release of the raw value makes,
    is a loss of at least ln(count) − 4·√(1 + 1/count))."""
    bounds = []
    for row in rows:
        c0, c1 = max(row.count_0, 1), max(row.count_1, 1)
        if max(c0, c1) < AUDIT_MINIMUM_COUNT:
            continue
        bounds.append(abs(math.log(c0 / c1)) - 4 * math.sqrt(1 / c0 + 1 / c1))
    return max(bounds, default=-math.inf)


def audited_loss(
    noise: Callable[..., np.ndarray], dimension: int, seed: int, samples: int = AUDIT_SAMPLES
) -> float:
    """The largest privacy loss the empirical audit of a ``noise()`` function finds at ε = 1,
    minus 4 standard errors (above 1: the noise is not ε-DP at ε = 1)."""
    from netsim.privacy.audit import audit

    rows = audit(
        noise, dimension=dimension, epsilon=1.0, samples=samples,
        rng=np.random.default_rng(seed), radius=0.05,
    )  # fmt: skip
    return _loss_lower_bound(rows)


def release_audited_loss(
    mechanism: Mechanism, dimension: int, seed: int, samples: int = RELEASE_AUDIT_SAMPLES
) -> float:
    """The largest privacy loss the empirical audit finds in what ``mechanism.spend`` (its
    ``release()``) returns for the neighbours x₀ = 0 and x₁ = e₁ at Δ = 1, ε = 1 (``samples``
    releases of each), minus 4 standard errors: above 1, the releases are not ε-DP at ε = 1,
    whatever ``noise()`` says."""
    from netsim.privacy.audit import neighbour, region_losses

    rng = np.random.default_rng(seed)
    v = neighbour(dimension)
    outputs = []
    for x in (np.zeros(dimension), v):
        rows = np.empty((samples, dimension))
        for i in range(samples):
            noisy, _ = mechanism.spend(x.copy(), sensitivity=1.0, epsilon=1.0, delta=1e-5, rng=rng)
            rows[i] = np.asarray(noisy, dtype=np.float64).reshape(dimension)
        outputs.append(rows)
    regions = region_losses(outputs[0], outputs[1], v, radius=RELEASE_AUDIT_RADIUS)
    return _loss_lower_bound(regions)


def claim_problem(mechanism: Mechanism) -> str | None:
    """Why ``mechanism``'s events claim more than its class's ``guarantee`` declares (``None``:
    they do not), in dimensions 1 and 5: an ε-DP class makes ε-DP events that spend no δ, an
    (ε, δ)-DP class DP events that spend at most their share of δ (1e-5 here)."""
    for dimension in (1, 5):
        event = mechanism_release(mechanism, np.zeros(dimension))[1]
        if mechanism.guarantee == "epsilon-DP" and not (
            event.guarantee == "epsilon-DP" and event.delta == 0
        ):
            return (
                f"the class declares epsilon-DP, but a release of dimension {dimension} claims "
                f"{event.guarantee} with δ = {event.delta:g}"
            )
        if mechanism.guarantee == "(epsilon,delta)-DP" and not (
            event.guarantee in ("epsilon-DP", "(epsilon,delta)-DP", "none") and event.delta <= 1e-5
        ):
            return (
                f"a release of dimension {dimension} given δ = 1e-5 claims {event.guarantee} "
                f"with δ = {event.delta:g}"
            )
    return None


#: The (Δ, ε) a release is probed at besides Δ = 1, ε = 1 (a mechanism that adds its noise
#: only where it is checked releases raw values everywhere else).
RELEASE_PROBES: tuple[tuple[float, float], ...] = ((0.5, 1.0), (4.0, 1.0), (1.0, 0.25), (2.0, 8.0))
#: Releases of zeros at each probe (each of :data:`PROBE_DIMENSION` coordinates): many
#: releases, so that a mechanism whose whole vector shares one random radius is measured too.
PROBE_RELEASES = 200
PROBE_DIMENSION = 20


def _release_spread(
    mechanism: Mechanism, sensitivity: float, epsilon: float, seed: int
) -> tuple[float, Any]:
    """The spread of :data:`PROBE_RELEASES` releases of zeros at (Δ, ε), and the last event."""
    rng = np.random.default_rng(seed)
    rows, event = [], None
    for _ in range(PROBE_RELEASES):
        noisy, event = mechanism.spend(
            np.zeros(PROBE_DIMENSION), sensitivity=sensitivity, epsilon=epsilon, delta=1e-5,
            rng=rng,
        )  # fmt: skip
        rows.append(np.asarray(noisy, dtype=np.float64).reshape(-1))
    return float(np.std(np.concatenate(rows))), event


def probed_release_problem(mechanism: Mechanism) -> str | None:
    """Why ``mechanism``'s releases at the (Δ, ε) of :data:`RELEASE_PROBES` do not look
    calibrated to what they claim (``None``: they do). Releases of zeros that claim DP must
    add noise (a spread above 0), and their spread times the ε they claim over Δ — constant
    for Laplace and K-norm noise, within a factor of about 1.2 for the Gaussian here — must be
    within a factor of 5 of its value at Δ = 1, ε = 1. A mechanism may claim another ε than
    the share it was given (one of fixed noise claims what its noise gives; the accountant
    refuses a claim past the budget), but not noise it does not add. A mechanism that claims
    no guarantee has no calibration to hold it to."""
    if mechanism.guarantee == "none":
        return None
    base, event = _release_spread(mechanism, 1.0, 1.0, 0)
    if not base > 0:
        return "a release at Δ = 1, ε = 1 adds no noise"
    reference = base * event.epsilon if event.is_private else math.nan
    for index, (sensitivity, epsilon) in enumerate(RELEASE_PROBES, start=1):
        spread, event = _release_spread(mechanism, sensitivity, epsilon, index)
        if not event.is_private:
            continue
        if not spread > 0:
            return (
                f"at Δ = {sensitivity:g}, ε = {epsilon:g} it adds no noise, yet claims "
                f"{event.guarantee} with ε = {event.epsilon:g}"
            )
        ratio = spread * event.epsilon / sensitivity
        if (
            event.epsilon > 0
            and reference > 0
            and not (0.2 * reference <= ratio <= 5.0 * reference)
        ):
            return (
                f"at Δ = {sensitivity:g}, ε = {epsilon:g} its noise has spread {spread:.3g} "
                f"and it claims ε = {event.epsilon:g}; noise calibrated as at Δ = 1, ε = 1 "
                f"would have a spread of about {reference * sensitivity / event.epsilon:.3g}"
            )
    return None


def declared_noise_problem(mechanism: Mechanism) -> str | None:
    """Why the noise an (ε, δ)-DP ``mechanism`` adds is not the noise its event declares, or
    its claim is more than that noise gives (``None``: neither). One release of
    :data:`DECLARED_NOISE_DRAWS` zeros at Δ = 1, ε = 1, δ = 1e-5: its spread must be the
    declared ``GaussianDpEvent``'s σ (or √2·b of a ``LaplaceDpEvent``) within
    :data:`DECLARED_NOISE_TOLERANCE`, and the exact privacy profile of that noise at the stated
    ε (Balle & Wang 2018, Thm. 8, for the Gaussian; ε = Δ/b for the Laplace) at most the
    stated δ."""
    from netsim.privacy.mechanisms import gaussian_delta

    noisy, event = mechanism_release(mechanism, np.zeros(DECLARED_NOISE_DRAWS))
    if not event.is_private:
        return None  # it claims no DP guarantee: nothing to check against
    declared = event.accounting
    spread = float(np.std(np.asarray(noisy, dtype=np.float64)))
    if isinstance(declared, dp_accounting.GaussianDpEvent):
        expected = declared.noise_multiplier
        name = f"GaussianDpEvent({expected:g})"
        if not abs(spread - expected) <= DECLARED_NOISE_TOLERANCE * expected:
            return _spread_problem(name, expected, spread)
        profile = gaussian_delta(expected, 1.0, event.epsilon)
        if not profile <= event.delta * (1 + 1e-6):
            return (
                f"it claims ({event.epsilon:g}, {event.delta:g})-DP, but the declared Gaussian "
                f"gives δ = {profile:.3g} at ε = {event.epsilon:g}"
            )
    elif isinstance(declared, dp_accounting.LaplaceDpEvent):
        scale = declared.noise_multiplier
        name, expected = f"LaplaceDpEvent({scale:g})", math.sqrt(2) * scale
        if not abs(spread - expected) <= DECLARED_NOISE_TOLERANCE * expected:
            return _spread_problem(name, expected, spread)
        if not 1.0 / scale <= event.epsilon * (1 + 1e-9):
            return f"it claims ε = {event.epsilon:g}, but the declared Laplace gives {1 / scale:g}"
    else:
        return (
            f"it claims {event.guarantee} but declares no Gaussian or Laplace dp_accounting "
            f"event (accounting = {declared!r}), so its noise cannot be checked against its "
            "claim: declare GaussianDpEvent(σ/Δ) or LaplaceDpEvent(b/Δ)"
        )
    return None


def _spread_problem(declared: str, expected: float, spread: float) -> str:
    return (
        f"it declares {declared} (standard deviation {expected:.4g} at Δ = 1) but its release "
        f"adds noise of standard deviation {spread:.4g} ({DECLARED_NOISE_DRAWS:,} draws; "
        f"allowed ±{DECLARED_NOISE_TOLERANCE:.0%})"
    )


def mechanism_checks(
    kind: str, slot: str, keys: Mapping[str, Any] | None = None, audit: bool = True
) -> list[CheckResult]:
    """The checks of a noise mechanism beyond a run: its events claim no more than its class
    declares (:func:`claim_problem`); an (ε, δ)-DP mechanism adds the noise its event declares
    (:func:`declared_noise_problem`); and, unless ``audit`` is false (it takes seconds), a
    claim of ε-DP passes the empirical privacy audit of ``noise()`` (when implemented) and of
    what ``release()`` returns."""
    from netsim.registry import named_component

    checks: list[tuple[str, Callable[[Mechanism], str | None]]] = [
        ("its events claim no more than its class declares", claim_problem),
        ("the noise its release adds is the noise it declares", declared_noise_problem),
        ("its releases are calibrated at every (Δ, ε) probed", probed_release_problem),
    ]
    results = []
    for check, problem_of in checks:
        try:
            mechanism = named_component(slot, kind, settings=keys)
            assert isinstance(mechanism, Mechanism)
            if problem_of is declared_noise_problem and not mechanism.spends_delta():
                continue  # an ε-DP claim is audited instead
            problem = problem_of(mechanism)
        except Exception as exc:
            problem = _error(exc)
        results.append(CheckResult(check, problem is None, problem or ""))
    if audit:
        results.append(_audit(kind, slot, keys))
    return results


def _audit(kind: str, slot: str, keys: Mapping[str, Any] | None = None) -> CheckResult:
    from netsim.registry import named_component

    check = "a claim of epsilon-DP passes the privacy audit"
    try:
        mechanism = named_component(slot, kind, settings=keys)
        assert isinstance(mechanism, Mechanism)
        audited = []
        for dimension in (1, 2):
            if mechanism_claim(mechanism, dimension) != "epsilon-DP":
                continue
            if mechanism.noise(1, dimension, 1.0, np.random.default_rng(0)) is not None:
                loss = audited_loss(mechanism.noise, dimension, seed=dimension)
                if loss > 1.0:
                    return CheckResult(
                        check, False,
                        f"dimension {dimension}: audited privacy loss {loss:.3f} > ε = 1 (minus "
                        "4 standard errors): the noise is not epsilon-DP",
                    )  # fmt: skip
            loss = release_audited_loss(mechanism, dimension, seed=dimension)
            if loss > 1.0:
                return CheckResult(
                    check, False,
                    f"dimension {dimension}: audited privacy loss of what release() returns "
                    f"{loss:.3f} > ε = 1 (minus 4 standard errors): the releases are not "
                    "epsilon-DP",
                )  # fmt: skip
            audited.append(dimension)
    except Exception as exc:
        return CheckResult(check, False, _error(exc))
    if not audited:
        return CheckResult(check, True, "it claims no epsilon-DP: nothing to audit")
    return CheckResult(check, True, f"noise() and release(), dimensions "
                       f"{', '.join(map(str, audited))}")  # fmt: skip


def assert_component_contract(component: str | type[Component], **options: Any) -> None:
    """:func:`check_component` in a test: raise :class:`ContractError` (an ``Exception``,
    which pytest reports as a failure) listing every failed check."""
    results = check_component(component, **options)
    failed = [result for result in results if not result.ok]
    if failed:
        lines = "\n".join(f"  {result.line()}" for result in failed)
        raise ContractError(f"{component} does not keep the component contract:\n{lines}")
