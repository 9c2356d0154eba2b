"""The contract every registered component keeps (one test over all of them, as networkx tests
every graph generator with ``create_using``):

- it builds from its default config (or the example below, for the keys it requires) on a
  small network, and runs;
- the same seed gives identical tables;
- a run writes only tables its components declare (plus the network's own);
- ``finish()`` is called exactly once per built component;
- a gossip application or walk that declares round support agrees with its exact mode on a
  tiny scenario;
- a noise mechanism that claims ε-DP passes the empirical privacy audit, and the audit catches
  a mechanism that claims it falsely.

A component registered without an example for its required keys, or with round support but no
agreement measure below, fails ``test_every_registered_component_is_covered``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dp_accounting
import numpy as np
import pandas as pd
import pytest

from netsim.api import Component, Mechanism, supports_rounds
from netsim.privacy.audit import audit
from netsim.privacy.mechanisms import (
    gaussian,
    gaussian_delta,
    l2_laplace_radius,
    l2_laplace_radius_noise,
)
from netsim.registry import REGISTRY, named_component
from netsim.scenario.build import scenario_parts
from netsim.scenario.loader import validate_scenario
from netsim.scenario.runner import run_in_memory

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
REPO = Path(__file__).resolve().parents[1]

#: Tables the network itself writes (not a component of the scenario).
NETWORK_TABLES = {"samples", "churn", "messages_lost", "trace_assignment"}

BASE: dict[str, Any] = {
    "name": "contract",
    "seed": 11,
    "nodes": 12,
    "duration": "2min",
    "topology": {"kind": "ring", "k": 2},
}
GOSSIP = {"period": "1s"}
LEARNING = {
    "dataset": {"name": "spambase"},
    "algorithm": "dp-sgd-inf",
    "evaluate_every": 20,
}


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _stunner(tmp: Path) -> Path:
    hour, day = 3_600_000, 86_400_000
    return _write(
        tmp / "stunner.txt",
        f"u 1 0 2 {hour} {47 * hour}\nv 0 0 -5 {12 * hour} {12 * hour}\n"
        f"w 1 {day} 1 {3 * hour} {hour} {20 * hour}\n",
    )


def _csv(tmp: Path) -> Path:
    rng = np.random.default_rng(0)
    x = rng.random((40, 3))
    rows = "\n".join(f"{a:.4f},{b:.4f},{c:.4f},{int(a > 0.5)}" for a, b, c in x)
    return _write(tmp / "data.csv", "a,b,c,label\n" + rows + "\n")


def _libsvm(tmp: Path) -> Path:
    rng = np.random.default_rng(1)
    lines = [
        f"{1 if rng.random() > 0.5 else -1} 1:{rng.random():.4f} 2:{rng.random():.4f}"
        for _ in range(40)
    ]
    return _write(tmp / "data.svm", "\n".join(lines) + "\n")


def _shared(relative: str) -> Path:
    path = SHARED / relative
    if not path.exists():
        pytest.skip(f"{path} is research-only data read from ../shared/data, which is absent")
    return path


# --- how each registered component is hosted in a small scenario ---------------------------

Host = Callable[[str, Path], dict[str, Any]]


def _with(**sections: Any) -> dict[str, Any]:
    return {**BASE, **sections}


def _topology(keys: dict[str, Any]) -> Host:
    return lambda name, tmp: _with(topology={"kind": name, **keys})


def _churn(keys: Callable[[Path], dict[str, Any]]) -> Host:
    return lambda name, tmp: _with(churn={"kind": name, **keys(tmp)})


def _component(keys: dict[str, Any], **sections: Any) -> Host:
    return lambda name, tmp: _with(components={"x": {"kind": name, **keys}}, **sections)


def _walk(keys: dict[str, Any], **sections: Any) -> Host:
    return lambda name, tmp: _with(
        walk={"kind": name, "agent": {"kind": "visit_counter"}, **keys}, **sections
    )


def _walk_agent(**sections: Any) -> Host:
    return lambda name, tmp: _with(walk={"kind": "ideal", "agent": {"kind": name}}, **sections)


def _mechanism(name: str, tmp: Path) -> dict[str, Any]:
    cls, _ = REGISTRY.lookup(("mechanism",), name)
    delta = {"delta": 1e-5} if cls.spends_delta() else {}  # type: ignore[attr-defined]
    return _with(
        learning={**LEARNING, "algorithm": "dp-sgd-2", "noise": name, **delta},
        walk={"kind": "ideal", "agent": {"kind": "sgd"}},
    )


def _dataset(path: Callable[[Path], dict[str, Any]]) -> Host:
    def host(name: str, tmp: Path) -> dict[str, Any]:
        dataset = {"name": name, **path(tmp)}
        return _with(
            learning={**LEARNING, "dataset": dataset},
            walk={"kind": "ideal", "agent": {"kind": "sgd"}},
        )

    return host


def _none(tmp: Path) -> dict[str, Any]:
    return {}


HOSTS: dict[tuple[str, str], Host] = {
    ("topology", "k_out"): _topology({"k": 3}),
    ("topology", "random_regular"): _topology({"degree": 4}),
    ("topology", "erdos_renyi"): _topology({"p": 0.4}),
    ("topology", "watts_strogatz"): _topology({"k": 4, "p": 0.2}),
    ("topology", "barabasi_albert"): _topology({"m": 2}),
    ("topology", "random_geometric"): _topology({"radius": 0.6}),
    ("topology", "ring"): _topology({}),
    ("topology", "complete"): _topology({}),
    ("topology", "edge_list"): lambda name, tmp: _with(
        topology={
            "kind": name,
            "path": str(
                _write(tmp / "edges.txt", "".join(f"{i} {(i + 1) % 12}\n" for i in range(12)))
            ),
        }
    ),
    ("churn", "always_on"): _churn(_none),
    ("churn", "synthetic"): _churn(
        lambda tmp: {
            "online": {"dist": "exponential", "mean": "30s"},
            "offline": {"dist": "exponential", "mean": "30s"},
        }
    ),
    ("churn", "trace"): _churn(
        lambda tmp: {"path": str(REPO / "traces" / "stunner-synthetic.csv")}
    ),
    ("churn", "stunner"): _churn(lambda tmp: {"path": str(_stunner(tmp))}),
    ("application", "broadcast"): _component({"interval": "20s"}, gossip=GOSSIP),
    ("protocol", "gossip_learning"): _component({"period": "1s"}, learning=LEARNING),
    ("walk", "service"): _walk({"transfer_time": "1s", "timeout": "20s"}, gossip=GOSSIP),
    ("walk", "ideal"): _walk({}),
    ("walk_agent", "visit_counter"): _walk_agent(),
    ("walk_agent", "sgd"): _walk_agent(learning=LEARNING),
    ("learner", "dola"): _component(
        {
            "data": {"name": "synthetic_ball", "options": {"examples": 600, "features": 3}},
            "max_passes": 4,  # a short run of many rounds over small shards
        }
    ),
    ("learner", "mi_ogd"): _component({}),
    ("mechanism", "l1"): _mechanism,
    ("mechanism", "l2_paper"): _mechanism,
    ("mechanism", "k_norm_l2"): _mechanism,
    ("mechanism", "gaussian"): _mechanism,
    ("dataset", "spambase"): _dataset(_none),
    ("dataset", "segmentation"): _dataset(_none),
    ("dataset", "digits"): _dataset(_none),
    ("dataset", "breast_cancer"): _dataset(_none),
    ("dataset", "wine"): _dataset(_none),
    ("dataset", "adult"): _dataset(
        lambda tmp: {"path": str(_shared("uci/adult-complete-rows.csv"))}
    ),
    ("dataset", "mnist"): _dataset(lambda tmp: {"path": str(_shared("mnist"))}),
    ("dataset", "mnist5k"): _dataset(lambda tmp: {"path": str(_shared("mnist"))}),
    ("dataset", "csv"): _dataset(lambda tmp: {"path": str(_csv(tmp)), "label": "label"}),
    ("dataset", "libsvm"): _dataset(lambda tmp: {"path": str(_libsvm(tmp))}),
}

#: For components with round support: a tiny scenario's table, the metric whose mean must agree
#: between the modes, and the allowance (the documented approximations of rounds mode: messages
#: take no time, so news spreads in whole rounds).
AGREEMENT: dict[tuple[str, str], tuple[str, str, float]] = {
    ("application", "broadcast"): ("broadcasts", "t90", 1.5),  # seconds: a round and a half
    ("walk", "service"): ("walk_samples", "propagating", 0.1),  # concurrent walks
}


def registered() -> list[tuple[str, str]]:
    return [(slot, name) for slot, name, _, origin in REGISTRY.entries() if origin == "netsim"]


def test_every_registered_component_is_covered():
    names = registered()
    assert set(names) <= set(HOSTS), sorted(set(names) - set(HOSTS))
    for slot, name in names:
        cls, _ = REGISTRY.lookup((slot,), name)
        if supports_rounds(cls):
            assert (slot, name) in AGREEMENT, (slot, name)


def _run(data: dict[str, Any], seed: int = 11) -> tuple[Any, dict[str, pd.DataFrame]]:
    scenario = validate_scenario({**data, "seed": seed}, source="contract", base_dir=None)
    return run_in_memory(scenario)


def _finish_counter(monkeypatch: pytest.MonkeyPatch, classes: set[type]) -> Counter:
    calls: Counter = Counter()
    for cls in classes:
        original = cls.finish

        def counted(self: Component, _original: Any = original) -> None:
            calls[id(self)] += 1
            _original(self)

        monkeypatch.setattr(cls, "finish", counted)
    return calls


@pytest.mark.parametrize(("slot", "name"), sorted(HOSTS))
def test_component_contract(slot, name, tmp_path, monkeypatch):
    data = HOSTS[slot, name](name, tmp_path)
    scenario = validate_scenario(data, source="contract", base_dir=None)
    parts = scenario_parts(scenario)
    calls = _finish_counter(monkeypatch, {part.cls for part in parts})
    built, tables = run_in_memory(scenario)
    # finish once per built component
    for key, component in built.components.items():
        assert calls[id(component)] == 1, key
    # only declared tables
    declared = set(NETWORK_TABLES)
    for part in parts:
        declared |= {table.name for table in part.cls.table_schemas(part.config)}
    assert set(tables) <= declared, sorted(set(tables) - declared)
    # same seed, same tables
    _, again = run_in_memory(validate_scenario(data, source="contract", base_dir=None))
    assert set(again) == set(tables)
    for table, frame in tables.items():
        pd.testing.assert_frame_equal(frame, again[table], check_exact=True, obj=table)


@pytest.mark.parametrize(("slot", "name"), sorted(AGREEMENT))
def test_round_mode_agrees_with_exact_mode(slot, name, tmp_path):
    table, metric, allowance = AGREEMENT[slot, name]
    data = HOSTS[slot, name](name, tmp_path)
    data = {**data, "nodes": 60, "duration": "5min", "topology": {"kind": "k_out", "k": 6}}
    means = {}
    for mode in ("exact", "rounds"):
        values = [
            _run({**data, "gossip": {**GOSSIP, "mode": mode}}, seed)[1][table][metric]
            for seed in (1, 2, 3)
        ]
        means[mode] = float(pd.concat(values).dropna().mean())
    assert math.isfinite(means["exact"]) and math.isfinite(means["rounds"])
    assert abs(means["exact"] - means["rounds"]) <= allowance, means


# --- mechanisms: the guarantee they claim is the one they give ------------------------------

AUDIT_SAMPLES = 200_000


def _release(mechanism: Mechanism, value: np.ndarray, seed: int = 0) -> tuple[np.ndarray, Any]:
    """One release at Δ = 1 with the share (ε, δ) = (1, 1e-5) (δ only if it spends δ)."""
    return mechanism.spend(
        value, sensitivity=1.0, epsilon=1.0, delta=1e-5, rng=np.random.default_rng(seed)
    )


def _claim(mechanism: Mechanism, dimension: int) -> str:
    event = _release(mechanism, np.zeros(dimension))[1]
    # the events never claim more than the class states, nor spend δ it does not declare
    if mechanism.guarantee == "epsilon-DP":
        assert event.guarantee == "epsilon-DP" and event.delta == 0, event
    elif mechanism.guarantee == "(epsilon,delta)-DP":
        assert event.guarantee in ("epsilon-DP", "(epsilon,delta)-DP"), event
        assert event.delta <= 1e-5, event
    return event.guarantee


def _audited_loss(noise: Callable[..., np.ndarray], dimension: int, seed: int) -> float:
    """The largest audited privacy loss at ε = 1, minus 4 standard errors."""
    rows = audit(
        noise, dimension=dimension, epsilon=1.0, samples=AUDIT_SAMPLES,
        rng=np.random.default_rng(seed), radius=0.05,
    )  # fmt: skip
    usable = [row for row in rows if row.count_0 >= 30 and row.count_1 >= 30]
    return max(row.loss - 4 * row.standard_error for row in usable)


@pytest.mark.parametrize("name", [n for s, n in sorted(HOSTS) if s == "mechanism"])
def test_a_mechanism_that_claims_epsilon_dp_passes_the_audit(name):
    mechanism = named_component("mechanism", name)
    assert isinstance(mechanism, Mechanism)
    for dimension in (1, 2):
        if _claim(mechanism, dimension) != "epsilon-DP":
            continue
        assert mechanism.noise(1, dimension, 1.0, np.random.default_rng(0)) is not None
        assert _audited_loss(mechanism.noise, dimension, seed=dimension) <= 1.0


@pytest.mark.parametrize("name", [n for s, n in sorted(HOSTS) if s == "mechanism"])
def test_a_mechanism_that_claims_epsilon_delta_dp_declares_the_noise_it_adds(name):
    """An (ε, δ)-DP mechanism declares its dp_accounting event; the event's noise is the
    noise the release adds (standard deviation of 40,000 draws), and its exact privacy profile
    at the stated ε is at most the stated δ."""
    mechanism = named_component("mechanism", name)
    assert isinstance(mechanism, Mechanism)
    if mechanism.guarantee != "(epsilon,delta)-DP":
        return
    check_declared_noise(mechanism)


def check_declared_noise(mechanism: Mechanism) -> None:
    noisy, event = _release(mechanism, np.zeros(40_000))
    declared = event.dp_event()
    if isinstance(declared, dp_accounting.GaussianDpEvent):
        sigma = declared.noise_multiplier  # Δ = 1
        assert noisy.std() == pytest.approx(sigma, rel=0.03)
        assert gaussian_delta(sigma, 1.0, event.epsilon) <= event.delta * (1 + 1e-6)
    elif isinstance(declared, dp_accounting.LaplaceDpEvent):
        scale = declared.noise_multiplier
        assert noisy.std() == pytest.approx(math.sqrt(2) * scale, rel=0.03)
        assert 1.0 / scale <= event.epsilon * (1 + 1e-9)
    else:
        pytest.fail(f"{event.mechanism}: declare a Gaussian or Laplace dp_accounting event")


class _Undernoised(Mechanism):
    """Declares the analytic Gaussian's event but adds half of its noise."""

    guarantee = "(epsilon,delta)-DP"

    def release(self, value, *, sensitivity, epsilon, delta, rng):
        noisy, event = gaussian(
            value, sensitivity=sensitivity, epsilon=epsilon, delta=delta, rng=rng
        )
        return value + (noisy - value) / 2, event


def test_the_declared_noise_check_catches_too_little_noise():
    with pytest.raises(AssertionError):
        check_declared_noise(_Undernoised(_Undernoised.Config(), None))


class _FalseClaim(Mechanism):
    """A mechanism that claims ε-DP for the paper's L2 noise (which is not ε-DP for d > 1)."""

    def release(self, value, *, sensitivity, epsilon, rng):
        noisy, event = l2_laplace_radius(value, sensitivity=sensitivity, epsilon=epsilon, rng=rng)
        return noisy, event.__class__(**{**event.__dict__, "guarantee": "epsilon-DP"})

    def noise(self, count, dimension, scale, rng):
        return l2_laplace_radius_noise(count, dimension, scale, rng)


def test_the_audit_catches_a_false_claim():
    mechanism = _FalseClaim(_FalseClaim.Config(), None)
    assert _claim(mechanism, 2) == "epsilon-DP"
    assert _audited_loss(mechanism.noise, 2, seed=7) > 1.0
