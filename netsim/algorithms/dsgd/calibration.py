"""Calibration before the run (``dsgd.calibrate``): the one factor by which every noise
multiplier of ``dsgd.noise`` is scaled so that the worst accounted pair of the planned run
meets a target (ε, δ).

The planned run is the run the scenario describes when nothing fails: every node online every
round, every topology link used both ways with Metropolis–Hastings weights in each of the
round's gossip passes, every message delivered. It is accounted exactly as the run will be
(:mod:`netsim.algorithms.dsgd.privacy`: the privacy section's trust and observers; without a
network privacy section, local DP of every unit). Scaling all noise by c scales every view's
covariance by c², so every unit's μ² by 1/c²: c = μ_worst(1) / μ*, with μ* the sensitivity at
which a Gaussian mechanism of unit noise has exactly ε at δ (Balle & Wang 2018). The run that
happens may differ (churn, loss): its own accounting says what it spent.
"""

from __future__ import annotations

import math

import numpy as np

from netsim.algorithms.dsgd import privacy
from netsim.algorithms.dsgd.config import DsgdConfig
from netsim.algorithms.dsgd.noise import NoisePolicy
from netsim.privacy.linear import LinearRound, LinearRun, local_mu_squared
from netsim.privacy.mechanisms import analytic_gaussian_sigma
from netsim.privacy.pairwise import metropolis_from_edges
from netsim.privacy.threat import ThreatModel


def planned_run(
    config: DsgdConfig,
    policy: NoisePolicy,
    n: int,
    link_a: np.ndarray,
    link_b: np.ndarray,
    rounds: int,
) -> LinearRun:
    """The run as planned (module docstring), recorded as the learner records a run."""
    weights = metropolis_from_edges(n, link_a, link_b)
    src = np.concatenate([link_a, link_b])
    dst = np.concatenate([link_b, link_a])
    sent = np.bincount(src, minlength=n)
    run = LinearRun(n, temporal=policy.temporal)
    everyone = np.ones(n, dtype=bool)
    for t in range(1, rounds + 1):
        rate = config.rate(t)
        decay = 1.0 - rate * config.regularisation
        mixing = weights if decay == 1.0 else (weights * decay).tocsr()
        secrets: dict = {}
        if policy.secret_std > 0:
            secrets = {
                "secret_a": link_a, "secret_b": link_b,
                "secret_std": np.full(link_a.size, policy.secret_std),
                "secret_a_added": everyone[link_a], "secret_b_added": everyone[link_b],
            }  # fmt: skip
        message: dict = {}
        if policy.message_std(rate) > 0:
            per_message = np.where(sent[src] > 1, policy.message_std(rate), 0.0)
            message = {"message_std": per_message / decay, "zero_sum": True}
        run.rounds.append(LinearRound(
            mixing=mixing, step=np.full(n, rate / decay), noise_std=np.full(n, policy.std),
            sensitivity=np.full(n, config.sensitivity),
            batch=np.full(n, (t - 1) % config.batches, dtype=np.int64),
            sent_src=src, sent_dst=dst, delivered=np.ones(src.size, dtype=bool),
            **secrets, **message,
        ))  # fmt: skip
        for _ in range(1, config.gossip_rounds):  # further passes: averaging only
            run.rounds.append(LinearRound(
                mixing=weights, step=np.zeros(n), noise_std=np.zeros(n),
                sensitivity=np.zeros(n), batch=np.full(n, -1, dtype=np.int64),
                sent_src=src, sent_dst=dst, delivered=np.ones(src.size, dtype=bool),
            ))  # fmt: skip
    return run


def worst_mu_squared(run: LinearRun, threat: ThreatModel | None, unit: str) -> float:
    """The largest μ² of any accounted pair of ``run`` under ``threat`` (local DP without a
    network threat model)."""
    if threat is None or not threat.network:
        return max(local_mu_squared(run, unit).values(), default=0.0)
    accounted = privacy.account(run, threat, unit)
    return max((float(losses.mu_squared.max(initial=0.0)) for losses in accounted.losses),
               default=0.0)  # fmt: skip


def target_mu(epsilon: float, delta: float) -> float:
    """μ*: the sensitivity at which a Gaussian mechanism of unit noise has exactly ε at δ."""
    return 1.0 / analytic_gaussian_sigma(1.0, epsilon, delta)


def calibration_factor(worst: float, epsilon: float, delta: float) -> float:
    """c with μ_worst / c = μ*: the factor every multiplier is scaled by."""
    if math.isinf(worst):
        raise ValueError(
            "dsgd.calibrate: in the planned run some observer sees a unit without noise (its "
            "view has no noise the observer does not know), so no scaling can reach the "
            "target; add independent noise (noise_multiplier > 0)"
        )
    if worst <= 0:
        raise ValueError("dsgd.calibrate: no observer learns anything in the planned run")
    return math.sqrt(worst) / target_mu(epsilon, delta)
