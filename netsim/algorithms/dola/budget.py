"""DOLA's privacy budget (Li et al.): the share of the stated (ε, δ) each release may spend,
the noise mechanism of ``dola.mechanism`` (or DOLA's own noise), the noise multiplier under
``accounting`` rdp/pld, the accountant of the examples, and the sensitivities of what a round
releases. :class:`~netsim.algorithms.dola.learner.DolaLearner` takes its releases' budget from
here; what a round computes stays there."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netsim.algorithms.dola import calibration
from netsim.algorithms.dola.config import DolaConfig
from netsim.errors import BudgetExhausted, DolaConfigError
from netsim.privacy import mechanisms
from netsim.privacy.accountant import PrivacyAccountant, Unlimited
from netsim.privacy.composition import (
    TIGHT_ACCOUNTINGS,
    calibrated_noise_multiplier,
    composed_epsilon,
)
from netsim.privacy.events import PrivacyEvent

#: L, the Lipschitz constant of the hinge and logistic losses on examples in the unit ball
#: (every DOLA data stream is normalised to ‖x‖ ≤ 1).
LIPSCHITZ = 1.0


@dataclass(frozen=True)
class ReleasePerPass:
    """DOLA's budget policy: an example enters one release per pass over its node's shard
    (the perturbed value its node broadcasts in the round that uses it; Li et al., TKDE
    Lemma 2 and the parallel composition over disjoint samples), and each of the ``passes``
    releases spends ε/passes (sequential composition). The split is that of the DP-SGD-k
    policy of :mod:`netsim.privacy.accountant`, but DOLA makes passes over data, not DP-SGD
    updates, and the manifest's policy name says so."""

    passes: int
    private: bool = True

    def __post_init__(self) -> None:
        if self.passes < 1:
            raise DolaConfigError(f"an example is used in at least one pass, got {self.passes}")

    @property
    def name(self) -> str:
        plural = "es" if self.passes > 1 else ""
        return f"dola: one release per example per pass ({self.passes} pass{plural})"

    def epsilon_for_use(self, budget: float, use: int) -> float | None:
        """ε/passes for each of the first ``passes`` uses, then none."""
        return budget / self.passes if use <= self.passes else None


def budget_exceeded(config: DolaConfig, used: int, rounds: int, shortest: int) -> str:
    """Why a run that would use an example ``used`` times is refused: ``epsilon`` (and
    ``delta``) is the budget of an example over the whole run, so k passes over a node's shard
    leave each release ε/k (sequential composition), and the scenario must allow that many
    passes (``max_passes``)."""
    share = f"ε = {config.epsilon / used:g}"
    if config.spends_delta:
        share += f", δ = {config.delta / used:g}"
    return (
        f"T·batch = {rounds}·{config.batch} exceeds the smallest node's data ({shortest} "
        f"examples), so an example would be used {used} times (passes) and each release could "
        f"spend only {share} of the stated budget epsilon = {config.epsilon:g}; lower rounds "
        f"or batch, or allow it with max_passes: {used}"
    )


def printed_gaussian_overspends(config: DolaConfig, spent: float, delta: float, passes: int) -> str:
    """Why ``calibration: printed`` is refused when its noise gives a release more than its
    share of the stated budget (principle 5 of ``docs/architecture.md``: a run never spends more
    than it states)."""
    share = config.epsilon / passes
    over = f" over {passes} passes" if passes > 1 else ""
    return (
        f"dola.calibration printed: J² as printed in Li et al. (TKDE 2018, Alg. 2) gives a release "
        f"ε' = {spent:.4g} at δ = {delta:g}, more than its share {share:g} of the stated "
        f"budget epsilon = {config.epsilon:g} per example{over} ({spent / share:.3g}×: J² "
        f"carries α_t² although the noise is added before the step multiplies it); use "
        f"calibration: analytic, which solves σ so that every release is ({share:g}, "
        f"{delta:g})-DP"
    )


class DolaBudget:
    """The privacy budget of a DOLA run of ``rounds`` rounds whose examples (``records`` of
    dimension ``dimension``) are each used in ``passes`` passes: each release's share
    (``release_epsilon``, ``release_delta``: sequential composition over the passes), the
    mechanism, the noise multiplier, the accountant, and the releases it admitted and
    refused. Draws from ``rng`` (the learner's stream) in the learner's order."""

    def __init__(
        self, config: DolaConfig, *, records: int, dimension: int, passes: int, rounds: int,
        rng: np.random.Generator,
    ) -> None:  # fmt: skip
        self.config = config
        self.n = dimension
        self.records = records
        self.passes = passes
        self.rounds = rounds
        self.rng = rng
        # each release's share of the stated budget (sequential composition over the passes)
        self.release_epsilon = config.epsilon / passes
        self.release_delta = (config.delta if config.spends_delta else 0.0) / passes
        #: The registered mechanism of ``dola.mechanism`` (None: the algorithm's own noise).
        self.mechanism = (
            None if config.mechanism is None else mechanisms.build_mechanism(config.mechanism)
        )
        #: z = σ/Δ of every Gaussian release under accounting rdp/pld (None: basic, or noise
        #: that is not Gaussian, which keeps its share ε/passes per release)
        self.noise_multiplier = self._noise_multiplier()
        self.accountant = self._accountant()
        #: Node releases of ``dola.mechanism`` the accountant refused (not published), and
        #: those it charged.
        self.refused_releases = 0
        self.charged_releases = 0

    def _noise_multiplier(self) -> float | None:
        """z = σ/Δ of the releases under ``accounting`` rdp or pld when they are Gaussian (the
        algorithm's own Alg. 2 noise, or a mechanism that releases at a multiplier): the
        mechanism's fixed one, else the smallest z whose ``passes`` releases per example
        compose to (ε, δ) (:func:`~netsim.privacy.composition.calibrated_noise_multiplier`).
        A fixed z that composes past the budget is refused here, before the run."""
        config = self.config
        if not config.private or config.accounting not in TIGHT_ACCOUNTINGS:
            return None
        if self.mechanism is None:
            if config.algorithm != "gaussian":
                return None  # DOLA's own Laplace is pure ε-DP: basic composition
        elif not self.mechanism.releases_at_multiplier():
            return None
        fixed = None if self.mechanism is None else self.mechanism.fixed_noise_multiplier()
        if fixed is None:
            return calibrated_noise_multiplier(
                self.passes, config.epsilon, config.delta, config.accounting
            )
        spent = composed_epsilon(((fixed, self.passes),), config.delta, config.accounting)
        if spent > config.epsilon * (1.0 + 1e-9):
            raise DolaConfigError(
                f"mechanism.noise_multiplier {fixed:g}: {self.passes} release(s) per example "
                f"compose ({config.accounting}) to ε = {spent:.4g} at δ = {config.delta:g}, "
                f"more than the stated budget epsilon = {config.epsilon:g}; raise it or leave "
                "it out (the noise is then calibrated to the budget)"
            )
        return fixed

    def _accountant(self) -> PrivacyAccountant:
        """One record per training example with the stated budget (ε, δ), used at most
        ``passes`` times with ε/passes (and δ/passes) each. The printed Gaussian calibration is
        refused if its noise would give a release more than that share."""
        config = self.config
        records = self.records
        if not config.private:
            return PrivacyAccountant(records, epsilon=math.inf, policy=Unlimited())
        delta = config.delta if config.spends_delta else 0.0
        if (
            self.mechanism is None
            and config.algorithm == "gaussian"
            and (config.calibration == "printed")
        ):
            worst = max(self.gaussian_event(t).epsilon for t in range(1, self.rounds + 1))
            if not worst <= self.release_epsilon * (1.0 + 1e-12):
                raise DolaConfigError(
                    printed_gaussian_overspends(config, worst, self.release_delta, self.passes)
                )
        return PrivacyAccountant(
            records, epsilon=config.epsilon, delta=delta, policy=ReleasePerPass(self.passes),
            accounting=config.accounting,
        )  # fmt: skip

    def gaussian_event(self, t: int) -> PrivacyEvent:
        """Alg. 2's event (and σ) for the release made with step α_t."""
        config = self.config
        return calibration.dola_gaussian_sigma(
            alpha=config.alpha(t),
            dimension=self.n,
            lipschitz=LIPSCHITZ,
            rounds=self.rounds,
            epsilon=self.release_epsilon,
            delta=self.release_delta,
            batch=config.batch,
            calibration=config.calibration,
        )[1]

    # --- a registered mechanism (dola.mechanism) -------------------------------------------

    def admitted(self, rows: np.ndarray, event: PrivacyEvent, time: float) -> bool:
        """Charge the round's releases of the mechanism to the examples of ``rows``, or count
        them refused (as MI-OGD refuses a report) when the mechanism spent more than the
        examples' budget allows: a refused release is not published."""
        records = rows.reshape(-1)
        try:
            self.accountant.charge_batch(records, event, time=time)
        except BudgetExhausted as exc:
            self.accountant.count_refused(records, str(exc))
            self.refused_releases += rows.shape[0]
            return False
        self.charged_releases += rows.shape[0]
        return True

    def _in_norm(self, l2: float) -> float:
        """A sensitivity bounded in L2 as the mechanism's norm needs it (‖·‖₁ ≤ √n ‖·‖₂)."""
        assert self.mechanism is not None
        return l2 * math.sqrt(self.n) if self.mechanism.norm == "L1" else l2

    def output_sensitivity(self, alpha: float) -> float:
        """The sensitivity of a released iterate (laplace, sparse): 2 α_t L / h in L2 (Li et
        al., Lemma 1), √n times that in L1 (= S(t))."""
        return self._in_norm(2.0 * alpha * LIPSCHITZ / self.config.batch)

    def gradient_sensitivity(self) -> float:
        """The sensitivity of a perturbed (mini-batch mean) gradient (gaussian): 2L/h in L2."""
        return self._in_norm(2.0 * LIPSCHITZ / self.config.batch)

    def mechanism_rows(
        self, rows: np.ndarray, sensitivity: float
    ) -> tuple[np.ndarray, PrivacyEvent]:
        """``rows`` (one release per node) perturbed by the section's mechanism with each
        release's share (ε, δ), and each row's event."""
        assert self.mechanism is not None
        if self.noise_multiplier is not None:
            return self._mechanism_rows_at_multiplier(rows, sensitivity)
        return self.mechanism.release_rows(
            rows, sensitivity=sensitivity, epsilon=self.release_epsilon,
            delta=self.release_delta, rng=self.rng,
        )  # fmt: skip

    def _mechanism_rows_at_multiplier(
        self, rows: np.ndarray, sensitivity: float
    ) -> tuple[np.ndarray, PrivacyEvent]:
        """``rows`` plus N(0, (z·Δ_t)² I) each (accounting rdp/pld), and each row's event.

        The noise a mechanism's ``release_at_multiplier`` adds (its contract: N(0, (z·Δ)² I)),
        drawn here for all of the round's nodes at once and at a σ_t whose σ_t/Δ_t is z to
        the last bit (:func:`~netsim.algorithms.dola.calibration.scale_at_multiplier`), so
        every release of a run declares the one multiplier the budget was calibrated for."""
        assert self.mechanism is not None and self.noise_multiplier is not None
        noisy = np.array(rows, dtype=np.float64)
        event = calibration.dola_gaussian_rows_at_multiplier(
            noisy, sensitivity=sensitivity, noise_multiplier=self.noise_multiplier,
            delta=self.config.delta, accounting=self.config.accounting, rng=self.rng,
        )  # fmt: skip
        return noisy, event
