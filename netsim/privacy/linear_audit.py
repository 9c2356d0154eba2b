"""An empirical audit of the linear accountant that can fail (``docs/explanation/privacy.md``,
"A threshold test that can fail"; ``docs/explanation/linear-accountant.md``, "Checks"): run the
protocol model of :mod:`netsim.privacy.linear` many times on two neighbouring data sets, record
what one observer receives, and turn a threshold test on the most powerful statistic into a
lower bound on ε that holds with a stated confidence
(:func:`netsim.privacy.audit.threshold_epsilon_lower_bound`). The accounted ε must stay above
it; an accountant that claims too little (noise it assumes but the run did not add, a secret it
thinks hidden that the observer holds) is caught when the lower bound passes its ε.

The simulation follows the model exactly: each round every node that stepped adds η(g + n) to
its state, with n its independent noise plus ± each secret it added, every message is the
sender's state after its step, and the states mix by W_r. The observer's own noise and the
secrets it holds are drawn once and kept across samples (it knows them); everything else is
drawn afresh. The two data sets differ in one node's gradients, by the sensitivity at every
use, in one direction (aligned: the worst case where the uses' Gram has no negative entry).
Temporally correlated noise (anti-PGD, MAFALDA) is simulated from its draws; runs with
per-message noise or acceleration are not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netsim.privacy.audit import threshold_epsilon_lower_bound
from netsim.privacy.linear import LinearRun, increments_apply


def sample_received(
    run: LinearRun,
    observer: int,
    target: int,
    *,
    shift: float,
    samples: int,
    rng: np.random.Generator,
    noise_scale: float = 1.0,
    fixed: np.random.Generator | None = None,
) -> np.ndarray:
    """``samples`` draws of every message ``observer`` receives (rows × samples), the target
    node's gradients moved by ``shift`` × its sensitivity at each use. ``noise_scale``
    multiplies every noise (0.5: the run with half the noise its record says). The observer's
    own noise and its secrets come from ``fixed`` (drawn once per call), the rest from ``rng``."""
    if not increments_apply(run) and not _temporal_only(run):
        raise ValueError("the audit simulates runs without per-message noise or acceleration")
    fixed = fixed if fixed is not None else np.random.default_rng(0)
    state = np.zeros((run.n, samples))
    seen = []
    index = run.step_index() if run.temporal is not None else None
    draws: list[np.ndarray] = []  # the independent draws z of each round (temporal runs)
    for r, this in enumerate(run.rounds):
        noise = rng.normal(size=(run.n, samples)) * this.noise_std[:, None]
        noise[observer] = fixed.normal() * this.noise_std[observer]
        if index is not None:
            noise = _correlated(run, index, r, noise, draws)
        if this.secret_std.size:
            secret = rng.normal(size=(this.secret_std.size, samples)) * this.secret_std[:, None]
            mine = (this.secret_a == observer) | (this.secret_b == observer)
            secret[mine] = (fixed.normal(size=int(mine.sum())) * this.secret_std[mine])[:, None]
            np.add.at(noise, this.secret_a, secret * this.secret_a_added[:, None])
            np.subtract.at(noise, this.secret_b, secret * this.secret_b_added[:, None])
        gradient = np.zeros((run.n, 1))
        gradient[target] = shift * this.sensitivity[target]
        h = state + this.step[:, None] * (gradient + noise_scale * noise)
        received = this.sent_src[this.delivered & (this.sent_dst == observer)]
        seen.append(h[received])
        state = this.mixing @ h
    return np.concatenate(seen)


def _temporal_only(run: LinearRun) -> bool:
    """A temporally correlated run with no per-message noise and no acceleration."""
    return run.temporal is not None and all(
        r.gamma is None and (r.message_std is None or not np.any(r.message_std > 0))
        for r in run.rounds
    )


def _correlated(
    run: LinearRun, index: np.ndarray, r: int, fresh: np.ndarray, draws: list[np.ndarray]
) -> np.ndarray:
    """Round ``r``'s noise of a temporally correlated run: node j at its k-th step adds
    Σ_m temporal[k, m] z_{j,m}, z_{j,m} the draw of the round of its m-th step (``fresh``
    this round's draws, appended to ``draws``)."""
    assert run.temporal is not None
    draws.append(fresh)
    out = np.zeros_like(fresh)
    for j in np.flatnonzero(index[r] >= 0):
        k = int(index[r, j])
        rounds = np.flatnonzero(index[: r + 1, j] >= 0)  # the rounds of j's steps 0 … k
        for m, past in enumerate(rounds):
            if run.temporal[k, m] != 0:
                out[j] += run.temporal[k, m] * draws[past][j]
    return out


@dataclass(frozen=True)
class AuditResult:
    """The audit's lower bound on ε (at ``delta``, holding with probability 1 − ``alpha``)
    and the samples it used per data set."""

    epsilon_lower: float
    samples: int
    delta: float
    alpha: float


def audit_pair(
    run: LinearRun,
    observer: int,
    target: int,
    *,
    delta: float,
    samples: int = 400_000,
    training: int = 50_000,
    alpha: float = 0.05,
    noise_scale: float = 1.0,
    seed: int = 0,
) -> AuditResult:
    """A lower bound on ε of ``observer``'s view of ``target``'s node unit: the statistic is
    the linear discriminant wᵀv, w = Σ̂⁻¹(μ̂₁ − μ̂₀) estimated on ``training`` samples of each
    data set (for two Gaussians of one covariance the likelihood ratio is monotone in it),
    then thresholded on ``samples`` fresh ones per data set."""
    rng = np.random.default_rng(seed)
    fixed_seed = int(rng.integers(2**63))

    def draw(shift: float, count: int) -> np.ndarray:
        return sample_received(
            run, observer, target, shift=shift, samples=count, rng=rng,
            noise_scale=noise_scale, fixed=np.random.default_rng(fixed_seed),
        )  # fmt: skip

    zero, one = draw(0.0, training), draw(1.0, training)
    covariance = 0.5 * (np.cov(zero) + np.cov(one))
    direction = np.linalg.lstsq(covariance, one.mean(axis=1) - zero.mean(axis=1), rcond=None)[0]
    scores_0 = direction @ draw(0.0, samples)
    scores_1 = direction @ draw(1.0, samples)
    thresholds = np.quantile(np.concatenate([scores_0, scores_1]), np.linspace(0.5, 0.9999, 60))
    bound = threshold_epsilon_lower_bound(scores_0, scores_1, thresholds, delta=delta, alpha=alpha)
    return AuditResult(bound, samples, delta, alpha)
