"""The contract every registered component keeps (one test over all of them, as networkx tests
every graph generator with ``create_using``). The checks are :mod:`netsim.testing`'s, the ones
``netsim check`` runs on any component and plugin authors run in their tests:

- it builds from its default config (or the example below, for the keys it requires) on a
  small network, and runs;
- the same seed gives identical tables;
- a run writes only tables its components declare (plus the network's own);
- ``finish()`` is called exactly once per built component;
- a gossip application or walk that declares round support runs in round mode and agrees with
  its exact mode on a tiny scenario;
- a noise mechanism that claims ε-DP passes the empirical privacy audit, and the audit catches
  a mechanism that claims it falsely.

A component registered without an example for its required keys, or with round support but no
agreement measure below, fails ``test_every_registered_component_is_covered``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from netsim.api import Mechanism, supports_rounds
from netsim.privacy.mechanisms import (
    gaussian,
    l2_laplace_radius,
    l2_laplace_radius_noise,
    laplace,
)
from netsim.registry import REGISTRY, named_component
from netsim.testing import (
    assert_component_contract,
    audited_loss,
    check_component,
    claim_problem,
    contract_scenario,
    declared_noise_problem,
    mechanism_claim,
    round_mode_means,
)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
REPO = Path(__file__).resolve().parents[1]


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


# --- the example keys of each registered component (its own keys its defaults lack) ---------

Keys = Callable[[Path], dict[str, Any]]


def _keys(**keys: Any) -> Keys:
    return lambda tmp: dict(keys)


def _none(tmp: Path) -> dict[str, Any]:
    return {}


EXAMPLES: dict[tuple[str, str], Keys] = {
    ("topology", "k_out"): _keys(k=3),
    ("topology", "random_regular"): _keys(degree=4),
    ("topology", "erdos_renyi"): _keys(p=0.4),
    ("topology", "watts_strogatz"): _keys(k=4, p=0.2),
    ("topology", "barabasi_albert"): _keys(m=2),
    ("topology", "random_geometric"): _keys(radius=0.6),
    ("topology", "ring"): _none,
    ("topology", "complete"): _none,
    ("topology", "edge_list"): lambda tmp: {
        "path": str(_write(tmp / "edges.txt", "".join(f"{i} {(i + 1) % 12}\n" for i in range(12))))
    },
    ("churn", "always_on"): _none,
    ("churn", "synthetic"): _keys(
        online={"dist": "exponential", "mean": "30s"},
        offline={"dist": "exponential", "mean": "30s"},
    ),
    ("churn", "trace"): _keys(path=str(REPO / "traces" / "stunner-synthetic.csv")),
    ("churn", "stunner"): lambda tmp: {"path": str(_stunner(tmp))},
    ("application", "broadcast"): _keys(interval="20s"),
    ("protocol", "gossip_learning"): _keys(period="1s"),
    ("walk", "service"): _keys(transfer_time="1s", timeout="20s"),
    ("walk", "ideal"): _none,
    ("walk_agent", "visit_counter"): _none,
    ("walk_agent", "sgd"): _none,
    ("learner", "dola"): _keys(
        data={"name": "synthetic_ball", "options": {"examples": 600, "features": 3}},
        max_passes=4,  # a short run of many rounds over small shards
    ),
    ("learner", "mi_ogd"): _none,
    ("learner", "muffliato"): _none,
    ("learner", "dsgd"): _keys(
        dataset={"name": "breast_cancer"}, clip=1.0, records_per_node=4, batch=2
    ),
    ("mechanism", "l1"): _none,
    ("mechanism", "l2_paper"): _none,
    ("mechanism", "k_norm_l2"): _none,
    ("mechanism", "gaussian"): _none,
    ("model", "logreg"): _none,
    ("model", "svm"): _none,
    ("model", "mlp"): _keys(hidden=[6]),
    # small networks: the finite-difference check takes two losses per parameter
    ("model", "jax_mlp"): _keys(hidden=[6]),
    ("model", "jax_cnn"): _keys(channels=[2, 3], hidden=4),
    # an Equinox module class is a factory: called with key, classes, features and the options
    ("model", "jax"): _keys(
        factory="netsim.learning.jax_networks:DenseNetwork",
        options={"hidden": [4], "activation": "relu"},
    ),
    ("dataset", "spambase"): _none,
    ("dataset", "segmentation"): _none,
    ("dataset", "digits"): _none,
    ("dataset", "breast_cancer"): _none,
    ("dataset", "wine"): _none,
    ("dataset", "adult"): lambda tmp: {"path": str(_shared("uci/adult-complete-rows.csv"))},
    ("dataset", "mnist"): lambda tmp: {"path": str(_shared("mnist"))},
    ("dataset", "mnist5k"): lambda tmp: {"path": str(_shared("mnist"))},
    ("dataset", "csv"): lambda tmp: {"path": str(_csv(tmp)), "label": "label"},
    ("dataset", "libsvm"): lambda tmp: {"path": str(_libsvm(tmp))},
    ("transport", "links"): _keys(
        delay={"dist": "uniform", "low": "10ms", "high": "90ms"}, loss=0.05
    ),
    ("gossip", "gossip"): _keys(period="2s"),
    ("observer", "samples"): _keys(every="10s"),
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
    assert set(names) <= set(EXAMPLES), sorted(set(names) - set(EXAMPLES))
    for slot, name in names:
        cls, _ = REGISTRY.lookup((slot,), name)
        if supports_rounds(cls):
            assert (slot, name) in AGREEMENT, (slot, name)


@pytest.mark.parametrize(("slot", "name"), sorted(EXAMPLES))
def test_component_contract(slot, name, tmp_path):
    if name.startswith("jax"):
        pytest.importorskip("jax", reason="JAX models need the jax extra")
    # the privacy audit of mechanisms is its own test below
    assert_component_contract(name, slot=slot, keys=EXAMPLES[slot, name](tmp_path),
                              audit_mechanism=False)  # fmt: skip


@pytest.mark.parametrize(("slot", "name"), sorted(AGREEMENT))
def test_round_mode_agrees_with_exact_mode(slot, name, tmp_path):
    table, metric, allowance = AGREEMENT[slot, name]
    cls, _ = REGISTRY.lookup((slot,), name)
    data = contract_scenario(slot, name, EXAMPLES[slot, name](tmp_path), cls=cls)
    means = round_mode_means(data, table, metric)
    assert np.isfinite(means["exact"]) and np.isfinite(means["rounds"])
    assert abs(means["exact"] - means["rounds"]) <= allowance, means


# --- mechanisms: the guarantee they claim is the one they give ------------------------------


@pytest.mark.parametrize("name", [n for s, n in sorted(EXAMPLES) if s == "mechanism"])
def test_a_mechanism_that_claims_epsilon_dp_passes_the_audit(name):
    mechanism = named_component("mechanism", name)
    assert isinstance(mechanism, Mechanism)
    for dimension in (1, 2):
        if mechanism_claim(mechanism, dimension) != "epsilon-DP":
            continue
        assert mechanism.noise(1, dimension, 1.0, np.random.default_rng(0)) is not None
        assert audited_loss(mechanism.noise, dimension, seed=dimension) <= 1.0


@pytest.mark.parametrize("name", [n for s, n in sorted(EXAMPLES) if s == "mechanism"])
def test_a_mechanisms_events_claim_no_more_than_its_class_declares(name):
    """An ε-DP class makes ε-DP events that spend no δ; an (ε, δ)-DP class spends at most its
    share of δ (netsim.testing.claim_problem, which netsim check runs on any mechanism)."""
    mechanism = named_component("mechanism", name)
    assert isinstance(mechanism, Mechanism)
    assert claim_problem(mechanism) is None


@pytest.mark.parametrize("name", [n for s, n in sorted(EXAMPLES) if s == "mechanism"])
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
    """:func:`netsim.testing.declared_noise_problem` as an assertion."""
    problem = declared_noise_problem(mechanism)
    assert problem is None, problem


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


class _NoiseOnlyWhereChecked(Mechanism):
    """Adds the L1 Laplace noise its claim needs at Δ = 1, ε = 1 only, where the other checks
    look, and releases the raw value (claiming ε-DP all the same) everywhere else."""

    norm = "L1"

    def release(self, value, *, sensitivity, epsilon, rng):
        noisy, event = laplace(value, sensitivity=sensitivity, epsilon=epsilon, rng=rng)
        if (sensitivity, epsilon) == (1.0, 1.0):
            return noisy, event
        return np.asarray(value, dtype=np.float64).copy(), event


def test_netsim_check_probes_release_at_other_sensitivities_and_budgets():
    results = {result.check: result for result in check_component(_NoiseOnlyWhereChecked)}
    probe = results["its releases are calibrated at every (Δ, ε) probed"]
    assert not probe.ok
    assert "at Δ = 0.5, ε = 1 it adds no noise, yet claims epsilon-DP" in probe.detail
    honest = check_component(named_component("mechanism", "l1").__class__)
    assert all(result.ok for result in honest), [r for r in honest if not r.ok]


class _FalseClaim(Mechanism):
    """A mechanism that claims ε-DP for the paper's L2 noise (which is not ε-DP for d > 1)."""

    def release(self, value, *, sensitivity, epsilon, rng):
        noisy, event = l2_laplace_radius(value, sensitivity=sensitivity, epsilon=epsilon, rng=rng)
        return noisy, event.__class__(**{**event.__dict__, "guarantee": "epsilon-DP"})

    def noise(self, count, dimension, scale, rng):
        return l2_laplace_radius_noise(count, dimension, scale, rng)


def test_the_audit_catches_a_false_claim():
    mechanism = _FalseClaim(_FalseClaim.Config(), None)
    assert mechanism_claim(mechanism, 2) == "epsilon-DP"
    assert audited_loss(mechanism.noise, 2, seed=7) > 1.0
    # and so does the public check (netsim check, netsim.testing) of the same class
    results = {result.check: result for result in check_component(_FalseClaim)}
    audit = results["a claim of epsilon-DP passes the privacy audit"]
    assert not audit.ok and "dimension 2: audited privacy loss" in audit.detail
    assert all(result.ok for check, result in results.items() if "audit" not in check)
