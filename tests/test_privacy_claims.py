"""Privacy claims are checked where they are made: an event that states an impossible
guarantee is refused as it is made, a run whose mechanism claims one stops with one message
naming the mechanism, DOLA refuses a mechanism that overspends as MI-OGD does, and
``netsim check`` fails three plugin mechanisms that lie (half the noise they declare, a
``release()`` that returns the raw value, a NaN ε) while netsim's own pass."""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle

import numpy as np
import pytest
import simpy

import netsim
from netsim.api import Mechanism
from netsim.cli import main
from netsim.errors import BudgetExhausted, InvalidPrivacyEventError, PrivacyError
from netsim.privacy.events import PrivacyEvent
from netsim.privacy.mechanisms import gaussian, k_norm_l2, k_norm_l2_noise
from netsim.testing import check_component
from tests.test_dola import BASE as DOLA_BASE
from tests.test_mi_ogd import BASE as MI_OGD_BASE

HERE = "tests.test_privacy_claims"


# --- three plugin mechanisms that lie ---------------------------------------------------------


class HalfNoiseGaussian(Mechanism):
    """Declares the analytic Gaussian's event, adds half of its noise."""

    guarantee = "(epsilon,delta)-DP"

    def release(self, value, *, sensitivity, epsilon, delta, rng):
        noisy, event = gaussian(
            value, sensitivity=sensitivity, epsilon=epsilon, delta=delta, rng=rng
        )
        return value + (noisy - value) / 2, event


class RawRelease(Mechanism):
    """Claims ε-DP with an honest ``noise()`` (the K-norm's), but releases the raw value."""

    def release(self, value, *, sensitivity, epsilon, rng):
        _, event = k_norm_l2(value, sensitivity=sensitivity, epsilon=epsilon, rng=rng)
        return np.array(value, dtype=np.float64), event

    def noise(self, count, dimension, scale, rng):
        return k_norm_l2_noise(count, dimension, scale, rng)


class NanClaim(Mechanism):
    """The K-norm mechanism whose events claim ε = NaN."""

    def release(self, value, *, sensitivity, epsilon, rng):
        noisy, event = k_norm_l2(value, sensitivity=sensitivity, epsilon=epsilon, rng=rng)
        return noisy, dataclasses.replace(event, epsilon=math.nan)


class Overspending(Mechanism):
    """K-norm noise for ε = 50, whatever share it is given (and it says so)."""

    def release(self, value, *, sensitivity, epsilon, rng):
        return k_norm_l2(value, sensitivity=sensitivity, epsilon=50.0, rng=rng)


# --- events ----------------------------------------------------------------------------------


def event(**changes: object) -> PrivacyEvent:
    fields = dict(mechanism="m", guarantee="epsilon-DP", epsilon=1.0, delta=0.0, sensitivity=1.0,
                  norm="L2", noise_scale=1.0, dimension=2)  # fmt: skip
    return PrivacyEvent(**{**fields, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"epsilon": math.nan}, "ε = nan"),
        ({"epsilon": -0.1}, "ε = -0.1"),
        ({"epsilon": math.inf}, "ε = inf under a claim of epsilon-DP"),
        ({"guarantee": "(epsilon,delta)-DP", "epsilon": math.inf, "delta": 1e-5}, "ε = inf"),
        ({"delta": math.nan}, "δ = nan"),
        ({"delta": 1.0}, "δ = 1.0"),
        ({"delta": -1e-9}, "δ = -1e-09"),
        ({"sensitivity": math.nan}, "sensitivity nan"),
        ({"noise_scale": math.nan}, "noise scale nan"),
        ({"mutual_information": math.nan}, "mutual-information bound nan"),
    ],
)
def test_an_event_that_states_an_impossible_guarantee_is_refused(changes, message):
    with pytest.raises(InvalidPrivacyEventError, match=message):
        event(**changes)


def test_an_infinite_epsilon_is_a_claim_of_no_guarantee_only():
    """A release whose noise gives no finite ε says ``none`` with ε = ∞ (the example
    package's fixed Gaussian does): allowed; an infinite noise scale too (DP-SGD-∞'s overflow)."""
    assert not event(guarantee="none", epsilon=math.inf).is_private
    assert event(noise_scale=math.inf).noise_scale == math.inf


def test_a_refusal_can_be_made_again_from_its_arguments():
    """SimPy re-raises a process's exception as type(exc)(*exc.args), pickle too."""
    refusal = BudgetExhausted(7, "ε 50 would bring it to 50 > budget 1")
    again = type(refusal)(*refusal.args)
    assert str(again) == str(refusal) == "record 7: ε 50 would bring it to 50 > budget 1"
    assert str(pickle.loads(pickle.dumps(refusal))) == str(refusal)
    env = simpy.Environment()

    def process(env):
        yield env.timeout(1)
        raise refusal

    env.process(process(env))
    with pytest.raises(BudgetExhausted, match="record 7: ε 50"):
        env.run()


# --- a run whose mechanism claims an impossible guarantee stops with one message --------------


def walk(noise: str) -> dict:
    return {
        "name": "claims", "seed": 2, "nodes": 30, "duration": "2min",
        "topology": {"kind": "ring", "k": 2},
        "learning": {"dataset": {"name": "spambase"}, "evaluate_every": 10,
                     "algorithm": "dp-sgd-2", "noise": noise},
        "walk": {"kind": "ideal", "agent": {"kind": "sgd"}},
    }  # fmt: skip


def dola(mechanism: str, algorithm: str = "laplace") -> dict:
    data = copy.deepcopy(DOLA_BASE)
    data["duration"] = 20
    data["dola"].update(algorithm=algorithm, epsilon=1.0, mechanism=mechanism)
    return data


def mi_ogd(mechanism: str) -> dict:
    data = copy.deepcopy(MI_OGD_BASE)
    data["duration"] = 30
    data["mi_ogd"].update(mechanism=mechanism, epsilon=1.0, eta=0.05)
    return data


NAN_CLAIM_MESSAGE = (
    rf"noise mechanism {HERE}:NanClaim claims an impossible guarantee, so its releases cannot "
    r"be accounted: invalid privacy event of k_norm_l2: ε = nan"
)


@pytest.mark.parametrize("scenario", [walk, dola, mi_ogd])
def test_a_run_whose_mechanism_claims_nan_epsilon_stops_naming_it(scenario):
    with pytest.raises(PrivacyError, match=NAN_CLAIM_MESSAGE):
        netsim.run(scenario(f"{HERE}:NanClaim"))


def test_the_cli_stops_such_a_run_with_one_message(tmp_path, capsys):
    path = tmp_path / "claims.yaml"
    path.write_text(__import__("yaml").safe_dump(walk(f"{HERE}:NanClaim")), encoding="utf-8")
    assert main(["run", str(path), "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"netsim: error: {path}: noise mechanism {HERE}:NanClaim claims")


# --- DOLA refuses an overspending mechanism as MI-OGD does ------------------------------------


@pytest.mark.parametrize("algorithm", ["laplace", "sparse", "gaussian"])
def test_dola_refuses_an_overspending_mechanism_and_says_so(algorithm):
    outcome = netsim.run(dola(f"{HERE}:Overspending", algorithm))
    (warning,) = outcome.warnings
    assert warning.startswith(f"dola: mechanism {HERE}:Overspending: the noise mechanism was "
                              "refused on every release: 320 of 320 node releases withheld")
    assert "ε 50" in warning and "no node released anything" in warning
    assert len(outcome["privacy_ledger"]) == 0  # nothing released, nothing charged
    assert outcome["privacy_records"]["refused"].sum() == 320
    assert outcome["privacy_records"]["epsilon_spent"].max() == 0


def test_mi_ogd_refuses_the_same_mechanism():
    (warning,) = netsim.run(mi_ogd(f"{HERE}:Overspending")).warnings
    assert "refused on every report: 30 reports" in warning


# --- netsim check fails the three liars and passes netsim's own ------------------------------


@pytest.mark.parametrize(
    ("cls", "check", "detail"),
    [
        (HalfNoiseGaussian, "the noise its release adds is the noise it declares",
         "adds noise of standard deviation"),
        (RawRelease, "a claim of epsilon-DP passes the privacy audit",
         "dimension 1: audited privacy loss of what release() returns"),
        (NanClaim, "it builds on a small network and runs", "ε = nan"),
    ],
)  # fmt: skip
def test_netsim_check_fails_a_mechanism_that_lies(cls, check, detail):
    results = {result.check: result for result in check_component(f"{HERE}:{cls.__name__}")}
    assert not results[check].ok and detail in results[check].detail, results[check]


def test_the_nan_claim_fails_the_claim_check_too():
    results = {r.check: r for r in check_component(NanClaim, audit_mechanism=False)}
    claim = results.get("its events claim no more than its class declares")
    assert claim is None or not claim.ok  # not reached when the run fails first
    from netsim.testing import claim_problem

    with pytest.raises(PrivacyError, match="ε = nan"):
        claim_problem(NanClaim(NanClaim.Config(), None))


def test_netsim_check_exits_1_on_the_raw_release(capsys):
    assert main(["check", f"{HERE}:RawRelease"]) == 1
    out = capsys.readouterr().out
    assert "failed  a claim of epsilon-DP passes the privacy audit: dimension 1" in out


@pytest.mark.parametrize("name", ["l1", "k_norm_l2", "l2_paper", "gaussian"])
def test_netsims_own_mechanisms_pass_every_mechanism_check(name):
    results = check_component(name, slot="mechanism")
    assert all(result.ok for result in results), [r.line() for r in results if not r.ok]
    checks = {result.check for result in results}
    assert "its events claim no more than its class declares" in checks
    assert "a claim of epsilon-DP passes the privacy audit" in checks


@pytest.mark.parametrize("epsilon", [0.0, 5e-324, 1.0])
def test_a_dp_claim_for_a_release_without_noise_is_refused(epsilon):
    """A release of positive sensitivity with no noise is not DP at any ε: a mechanism that
    returns the raw value and claims ε = 0 (or 5e-324) was trusted."""
    with pytest.raises(InvalidPrivacyEventError, match=r"with no noise \(noise scale 0\)"):
        PrivacyEvent("raw", "epsilon-DP", epsilon, 0.0, 1.0, "L1", 0.0, 3)
    # a release of sensitivity 0 needs no noise; a non-private one claims nothing
    PrivacyEvent("raw", "epsilon-DP", epsilon, 0.0, 0.0, "L1", 0.0, 3)
    PrivacyEvent("raw", "non-private", 0.0, 0.0, 1.0, "L1", 0.0, 3)


class _RawClaimingTinyEpsilon(Mechanism):
    norm = "L1"

    def release(self, value, *, sensitivity, epsilon, rng):
        event = PrivacyEvent("raw", "epsilon-DP", 5e-324, 0.0, sensitivity, "L1", 0.0, 1)
        return np.asarray(value, dtype=np.float64), event


def test_a_run_whose_mechanism_releases_raw_values_as_private_stops_with_one_message():
    mechanism = _RawClaimingTinyEpsilon(_RawClaimingTinyEpsilon.Config(), None)
    with pytest.raises(PrivacyError, match=r"claims an impossible guarantee.*with no noise"):
        mechanism.spend(np.zeros(1), sensitivity=1.0, epsilon=1.0, rng=np.random.default_rng(0))
