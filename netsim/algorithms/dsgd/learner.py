"""Decentralised SGD with gossip averaging on the simulated network (``docs/papers.md``,
"Decentralised SGD, correlated noise and trust models"), recording
the run's view as a linear system for :mod:`netsim.privacy.linear`.

**The round: step, then average** — the order of D-PSGD (Lian et al. 2017), Muffliato-SGD
(Cyffers et al. 2022) and DECOR (Allouah et al. 2024, Alg. 1; its code labels the noisy local
step "step t + ½" and the gossip "step t + 1"); MFDL's messages (Bellet et al. 2026) are sent
after the step as well. At round t (1-based) every online node i

1. takes the mean ḡ_i of the clipped per-example gradients (L2 norm ≤ C) of its batch at its
   model θ_i — batch k mod (records_per_node // b) of its shard at its k-th step, cyclically;
2. steps: h_i = θ_i − η_t (ḡ_i + λθ_i + n_i), the ℓ2 term λθ_i outside the clip (it depends
   on no record), n_i the policy's gradient noise (:mod:`netsim.algorithms.dsgd.noise`);
3. sends h_i (+ ξ_ij, Zip-DL) to each topology neighbour j that is online, through the
   transport: a link is used only when both its messages arrived (as in Muffliato's
   averaging);
4. averages: θ_j ← W_t[j, j] h_j + Σ_i W_t[j, i] m_{i→j}, W_t the Metropolis–Hastings weights
   of the links used (doubly stochastic).

An offline node keeps its model, takes no step and adds no noise. Every node starts at the
same θ₀ (drawn once from the stream ``model``). In ``mode: rounds`` the messages take no time;
in ``mode: exact`` each takes its transfer time and step 4 happens at ``deadline`` over the
links whose two messages arrived by then (a late message is seen, not averaged). With
``gossip_rounds`` k > 1, steps 3–4 repeat k times, the step and its noise in the first.

**The linear view.** Each round appends a :class:`~netsim.privacy.linear.LinearRound` to
:attr:`DecentralisedSGD.linear` in that module's conventions: ``step`` η_t (0 for a node that
did not step), ``noise_std`` σ·C/b and ``sensitivity`` 2C/b (record) or 2C (node) in gradient
units, ``batch`` the shard batch used, every message sent with its fate, DECOR's secrets and
Zip-DL's message noise (model units, ``zero_sum``). With λ > 0 the state a step starts from is
scaled by c_i = 1 − η_tλ, which the module's model (h = x + y) does not have: the round is then
recorded as ``mixing`` W_t·diag(c), ``step`` η_t/c_i and message noise over c_i — the same
models, and messages that are c_i times the recorded ones (a known scale: the same view). With
λ = 0 (the default) ``mixing`` is W_t itself.

**Tables.** ``dsgd_rounds``: one row per round (online nodes, links used, messages lost, the
correlated noise left uncancelled, consensus, and every ``evaluate_every`` rounds and at the
last the training loss and test accuracy of the online nodes' average model and the mean of
their own models'). ``dsgd_summary``: one row at the end (each node's and the average model's
test accuracy beside the majority-class, centralised non-private and central-DP yardsticks on
the same split, and the noise). With a network ``privacy`` section, the accounting of
:mod:`netsim.algorithms.dsgd.privacy`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from netsim.algorithms.dsgd import calibration, privacy
from netsim.algorithms.dsgd.config import CorrelatedNoise, DsgdConfig
from netsim.algorithms.dsgd.mafalda import StepPlan
from netsim.algorithms.dsgd.noise import NoisePolicy, noise_policy
from netsim.contracts import (
    Baseline,
    BuildContext,
    Curve,
    FigureSpec,
    RoundLearner,
    Section,
)
from netsim.errors import DataError
from netsim.lazy import lazy_module
from netsim.learning.baselines import learning_baselines
from netsim.learning.datasets import Dataset, load_dataset, preprocess
from netsim.learning.models import build_model, check_model_fits, model_test_accuracies
from netsim.learning.sensitivity import clip_rows
from netsim.learning.sgd_agent import central_dp_accuracy
from netsim.log import F64, I64, STR, TableSchema
from netsim.privacy.bounds import AUDIT_TABLE, audit_lines
from netsim.privacy.linear import LinearRound, LinearRun
from netsim.privacy.pairwise import metropolis_from_edges
from netsim.privacy.threat import (
    PAIRS_TABLE,
    conversion_phrase,
    hops_from,
    sample_phrase,
    sampled_from,
    union_phrase,
)
from netsim.privacy.threat import SUMMARY_TABLE as PRIVACY_SUMMARY_TABLE

if TYPE_CHECKING:
    import pandas as pd
    import scipy.sparse as sp
else:
    pd = lazy_module("pandas")
    sp = lazy_module("scipy.sparse")

#: The δ of every pair's ε when the privacy section names none.
DEFAULT_DELTA = 1e-5

#: The training loss of the average model is the mean over about this many of the nodes'
#: records (every k-th of the shards, so every node's shard has its share): an estimate that
#: costs the same at any scale.
LOSS_RECORDS = 4096

ROUNDS_TABLE = TableSchema(
    name="dsgd_rounds",
    columns=(
        ("round", I64),
        ("time", F64),
        ("online", I64),
        ("links", I64),
        ("lost", I64),
        ("uncancelled", F64),
        ("consensus", F64),
        ("loss", F64),
        ("accuracy", F64),
        ("node_accuracy", F64),
    ),
    description=(
        "One row per round of decentralised SGD (1-based round t): online nodes (each took "
        "a step), links used (both messages delivered), messages lost, the correlated noise "
        "left uncancelled in the network's sum (gradient units: DECOR, the L2 norm of the "
        "sum over the nodes that stepped of their pairwise noise Σ_j v_ij, non-zero when a "
        "neighbour was offline; Zip-DL, the L2 norm of Σ W_t[j, i] ξ_ij over the messages "
        "used, over η_t, non-zero when weights differ or a message was lost; 0 otherwise), "
        "consensus (the RMS L2 distance of the online nodes' models to their mean, after "
        "averaging), and every dsgd.evaluate_every rounds and at the last (NaN otherwise) "
        "the mean training loss (on every k-th of the nodes' records, at most 4,096), the "
        "test accuracy of the online nodes' average model and the mean of the online nodes' "
        "own models' test accuracies."
    ),
    role="rounds",
    time="time",
    round="round",
)

SUMMARY_TABLE = TableSchema(
    name="dsgd_summary",
    columns=(
        ("rounds", I64),
        ("node_accuracy", F64),
        ("average_accuracy", F64),
        ("majority_accuracy", F64),
        ("centralised_accuracy", F64),
        ("consensus", F64),
        ("noise", STR),
        ("noise_multiplier", F64),
        ("correlated_multiplier", F64),
        ("message_multiplier", F64),
        ("clip", F64),
        ("batch", I64),
        ("learning_rate", F64),
        ("unit", STR),
        ("sensitivity", F64),
        ("calibration", F64),
        ("central_dp_accuracy", F64),
        ("node_validation_accuracy", F64),
        ("average_validation_accuracy", F64),
    ),
    description=(
        "One row at the end of decentralised SGD: rounds run; test accuracy, the mean over "
        "all nodes of each node's model's and that of the average of all nodes' models; the "
        "yardsticks on the same pre-processed split (netsim.learning.baselines): predicting "
        "the training split's majority class, and a centralised non-private logistic "
        "regression on the whole training split; the final consensus (RMS distance of all "
        "models to their mean); the noise kind and its multipliers σ (independent), σ_cor "
        "(DECOR's pairs) and Zip-DL's message multiplier (in units of C/b; NaN where the "
        "kind has none; after dsgd.calibrate, the scaled ones); the clip C, batch b, step "
        "size η, privacy unit and the sensitivity of one step's mean clipped gradient to it "
        "(2C/b or 2C); the factor dsgd.calibrate scaled every multiplier by (NaN: none); and "
        "central DP's test accuracy on the same split at the worst accounted pair's (ε, δ) "
        "(netsim.learning.central_dp; NaN without a network privacy section); last, the "
        "nodes' and the average model's accuracy on the validation split "
        "(dsgd.dataset.validation_fraction; NaN without one)."
    ),
    role="summary",
)

BASELINES = (
    Baseline("dsgd_summary", "majority_accuracy", "majority class"),
    Baseline("dsgd_summary", "centralised_accuracy", "centralised non-private"),
    Baseline("dsgd_summary", "central_dp_accuracy", "central DP at the worst pair's ε"),
)

ACCURACY_FIGURE = FigureSpec(
    file="dsgd_accuracy.png",
    caption="decentralised SGD: test accuracy by round",
    sentence=(
        "Test accuracy of the online nodes' average model against the round, at the rounds "
        "evaluated; dashed, the majority class and a centralised non-private logistic "
        "regression on the same split."
    ),
    title="Decentralised SGD",
    panels=(
        Curve("dsgd_rounds", "accuracy", "round", "test accuracy", baselines=BASELINES),
        Curve("dsgd_rounds", "consensus", "round", "consensus (RMS distance to the mean)"),
    ),
)


@dataclass(frozen=True)
class Sent:
    """What a round sent, for its averaging: the round, who was online and stepped, the step
    size and decay, each node's batch, gradient, noise and state after its step, and every
    message's ends, loss and lateness (forth over the links, then back)."""

    t: int
    online: np.ndarray
    stepped: np.ndarray
    rate: float
    decay: float
    batch: np.ndarray
    gradient: np.ndarray
    noise: Any
    h: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    lost: np.ndarray
    late: np.ndarray
    #: The gossip pass of the round (0: the one carrying the step's noise and message noise).
    gossip_pass: int = 0


def undirected_links(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every link of a CSR neighbour list once, as (smaller, larger) node pairs, sorted."""
    sources = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    low, high = np.minimum(sources, indices), np.maximum(sources, indices)
    keep = low != high
    pairs = np.unique(np.stack([low[keep], high[keep]], axis=1), axis=0)
    return pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64)


def dsgd_data(config: DsgdConfig, n: int) -> Dataset:
    """The data set of ``config``, min–max scaled and normalised in L2 (the clip's norm),
    checked to hold ``records_per_node`` training records for each of the ``n`` nodes."""
    where = config.dataset
    data = preprocess(
        load_dataset(
            where.name, path=where.path, label=where.label, split_seed=where.split_seed,
            test_fraction=where.test_fraction, validation_fraction=where.validation_fraction,
        ),
        normalisation=config.normalisation,
        norm="L2",
    )  # fmt: skip
    need = n * config.records_per_node
    if data.n_train < need:
        raise DataError(
            f"dsgd.dataset: {data.name} has {data.n_train:,} training records but {n:,} nodes "
            f"of {config.records_per_node:,} records (dsgd.records_per_node) need {need:,}: "
            f"lower records_per_node to at most {data.n_train // n:,} or use fewer nodes"
        )
    return data


class DecentralisedSGD(RoundLearner):
    """Decentralised SGD with gossip averaging and a noise policy (the ``dsgd`` section)."""

    Config = DsgdConfig
    section = Section("dsgd", after=("muffliato",))
    tables = (
        ROUNDS_TABLE, SUMMARY_TABLE, privacy.UNITS_TABLE, PAIRS_TABLE, PRIVACY_SUMMARY_TABLE,
        AUDIT_TABLE,
    )  # fmt: skip
    figures = (ACCURACY_FIGURE,)
    optional: ClassVar[dict[str, str]] = {  # type: ignore[assignment]
        "privacy": "the threat model: with model network, the observers the run's linear "
        "view is accounted for (dsgd.account_privacy)"
    }

    def __init__(self, config: DsgdConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        assert ctx.sim is not None and ctx.network is not None
        self.sim, self.network = ctx.sim, ctx.network
        topology = self.network.topology
        n = self.n = topology.n
        data = dsgd_data(config, n)
        r, b = config.records_per_node, config.batch
        rows = ctx.stream("rows").permutation(data.n_train)[: n * r]
        #: Node i's shard: rows i·r … i·r + r − 1 of these.
        self.x, self.y = data.x_train[rows], data.y_train[rows]
        self.x_test, self.y_test = data.x_test, data.y_test
        self.model = build_model(config.model, data.classes, data.features, ctx, key="dsgd.model")
        start = self.model.initial_parameters(ctx.stream("model"))
        self.theta = np.tile(start, (n, 1))
        self.dimension = start.size
        #: Steps each node has taken.
        self.steps = np.zeros(n, dtype=np.int64)
        self.offsets = np.arange(b)
        self.link_a, self.link_b = undirected_links(topology.indptr, topology.indices)
        self.threat = ctx.find("privacy")
        #: The factor dsgd.calibrate scaled the noise by (NaN: not calibrated).
        self.calibration = math.nan
        #: The noise the run adds: dsgd.noise, scaled when calibrated.
        self.noise = config.noise
        if config.calibrate is not None:
            self.calibration = self.calibrate(config.calibrate.epsilon, config.calibrate.delta)
            self.noise = config.scaled_noise(self.calibration)
        self.policy: NoisePolicy = noise_policy(
            self.noise, n=n, dimension=self.dimension, scale=config.gradient_scale,
            link_a=self.link_a, link_b=self.link_b, rounds=self.total_rounds,
            streams=ctx.stream, plan=self.step_plan(),
        )  # fmt: skip
        self.loss_rng = ctx.stream("loss")
        #: The run as a linear system (netsim.privacy.linear), one LinearRound per round.
        self.linear = LinearRun(n, temporal=self.policy.temporal)
        #: W_t of every round (the Metropolis–Hastings weights of the links used).
        self.mixing: list[sp.csr_matrix] = []
        #: Test hook: a list to append each round's inputs to (gradients, noise, secrets,
        #: message noise), or None (the default: nothing kept).
        self.trace: list[dict[str, Any]] | None = None
        self.baselines = learning_baselines(data.x_train, data.y_train, data.x_test, data.y_test)
        self.data = data
        every = -(-self.x.shape[0] // LOSS_RECORDS)
        self.loss_x, self.loss_y = self.x[::every], self.y[::every]
        self.warn = ctx.warn
        self.rounds_table = self.sim.log.table(ROUNDS_TABLE)
        self.consensus = math.nan
        #: Links used and messages lost over a round's gossip passes, and its uncancelled noise.
        self.pass_links = self.pass_lost = 0
        self.uncancelled = 0.0

    def calibrate(self, epsilon: float, delta: float) -> float:
        """The factor that gives the planned run's worst accounted pair (ε, δ)
        (:mod:`netsim.algorithms.dsgd.calibration`)."""
        shape = noise_policy(
            self.config.noise, n=self.n, dimension=self.dimension,
            scale=self.config.gradient_scale, link_a=self.link_a, link_b=self.link_b,
            rounds=self.total_rounds, streams=lambda name: np.random.default_rng(0),
            plan=self.step_plan(),
        )  # fmt: skip
        planned = calibration.planned_run(
            self.config, shape, self.n, self.link_a, self.link_b, self.total_rounds
        )
        worst = calibration.worst_mu_squared(planned, self.threat, self.config.unit)
        return calibration.calibration_factor(worst, epsilon, delta)

    def step_plan(self) -> StepPlan:
        """The planned steps as MAFALDA's workload reads them: each round's step size and
        decay, the gossip passes, and how often a privacy unit's batch comes back (every
        step for ``unit: node``)."""
        config = self.config
        rates = tuple(config.rate(t) for t in range(1, self.total_rounds + 1))
        return StepPlan(
            rates=rates,
            decays=tuple(1.0 - rate * config.regularisation for rate in rates),
            gossip_rounds=config.gossip_rounds,
            interval=config.batches if config.unit == "record" else 1,
        )

    @classmethod
    def build(cls, config: DsgdConfig, ctx: BuildContext) -> DecentralisedSGD:
        return cls(config, ctx)

    @classmethod
    def check(cls, config: DsgdConfig, ctx: BuildContext) -> None:
        problem = config.rounds_problem("dsgd", ctx.duration)
        if problem is not None:
            raise ValueError(problem)
        if isinstance(config.noise, CorrelatedNoise):
            problem = config.noise.rows_problem(config.rounds_in(ctx.duration))
            if problem is not None:
                raise ValueError(problem)
        threat = ctx.config_of("privacy")
        if threat is not None and threat.model == "network" and threat.trust != "pndp":
            for key in ("observers", "links"):
                if getattr(threat, key):
                    raise ValueError(
                        f"privacy.{key} chooses observers of what they receive (trust pndp); "
                        f"under trust {threat.trust} the observer sees every message: leave "
                        f"privacy.{key} out (coalitions are still accounted)"
                    )
        if threat is not None and threat.model == "network" and threat.budget == "network":
            raise ValueError(
                "privacy.budget network bounds the uses of the learning section's records; "
                "dsgd uses every record on its schedule and spends no budget: use "
                "privacy.budget local"
            )

    @classmethod
    def check_inputs(cls, config: DsgdConfig, ctx: BuildContext) -> None:
        data = dsgd_data(config, ctx.nodes)
        check_model_fits(config.model, data.classes, data.features, ctx, "dsgd.model")

    # --- one round ----------------------------------------------------------------------------

    def gradients(self, stepped: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The mean clipped gradient of each node of ``stepped`` at its model, on its next
        batch (one batched call of the model over every node's records), and the batch index
        each used."""
        config = self.config
        b = config.batch
        batch = self.steps[stepped] % config.batches
        first = stepped * config.records_per_node + batch * b
        records = (first[:, None] + self.offsets[None, :]).ravel()
        params = np.repeat(self.theta[stepped], b, axis=0)
        per_example = self.model.batch_gradients(params, self.x[records], self.y[records])
        clipped = clip_rows(per_example, config.clip, "L2")
        return clipped.reshape(stepped.size, b, self.dimension).mean(axis=1), batch

    def round(self, t: int) -> None:
        """Round ``t``: every online node steps and sends its state to its online neighbours;
        the nodes then average (at once in rounds mode, at the deadline in exact mode) over
        the links whose two messages arrived."""
        config, n = self.config, self.n
        online = self.network.nodes.online.copy()
        stepped = np.flatnonzero(online)
        rate = config.rate(t)
        decay = 1.0 - rate * config.regularisation
        gradient = np.zeros_like(self.theta)
        batch = np.full(n, -1, dtype=np.int64)
        if stepped.size:
            gradient[stepped], batch[stepped] = self.gradients(stepped)
        noise = self.policy.gradient_noise(stepped, self.steps)
        h = self.theta.copy()
        if stepped.size:
            direction = gradient[stepped] + noise.total[stepped]
            h[stepped] = decay * self.theta[stepped] - rate * direction
        # messages: each link with both ends online carries one message each way
        both = online[self.link_a] & online[self.link_b]
        forth_src, forth_dst = self.link_a[both], self.link_b[both]
        src = np.concatenate([forth_src, forth_dst])
        dst = np.concatenate([forth_dst, forth_src])
        lost, late = self.send(forth_src, forth_dst)
        self.steps[stepped] += 1
        sent = Sent(t, online, stepped, rate, decay, batch, gradient, noise, h, src, dst, lost,
                    late)  # fmt: skip
        delay = config.averaging_delay
        if delay == 0.0:
            self.average(sent)
            for gossip_pass in range(1, config.gossip_rounds):
                self.average(self.gossip_pass(t, gossip_pass))
        else:
            self.sim.call_later(delay, self.average, sent)

    def gossip_pass(self, t: int, gossip_pass: int) -> Sent:
        """A further averaging pass of round ``t`` (``dsgd.gossip_rounds``): no step and no
        noise, the online nodes' current models sent over the links between online nodes."""
        online = self.network.nodes.online.copy()
        both = online[self.link_a] & online[self.link_b]
        forth_src, forth_dst = self.link_a[both], self.link_b[both]
        lost, late = self.send(forth_src, forth_dst)
        none = np.zeros(0, dtype=np.int64)
        return Sent(
            t, online, none, self.config.rate(t), 1.0, np.full(self.n, -1, dtype=np.int64),
            np.zeros_like(self.theta), None, self.theta.copy(),
            np.concatenate([forth_src, forth_dst]), np.concatenate([forth_dst, forth_src]),
            lost, late, gossip_pass,
        )  # fmt: skip

    def send(self, forth_src: np.ndarray, forth_dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Send a round's messages both ways over the links (forth_src[k], forth_dst[k]), forth
        then back: whether each is lost (the transport decides) and, in exact mode, whether it
        arrives after the deadline (its transfer time: links.delay plus the model's size over
        links.bandwidth, a float64 a parameter)."""
        count = 2 * int(forth_src.size)
        lost, late = np.zeros(count, dtype=bool), np.zeros(count, dtype=bool)
        if not forth_src.size:
            return lost, late
        exact = self.config.mode == "exact"
        if not (self.network.lossy or exact):
            self.network.deliver_reliably(count)
            return lost, late
        deadline = self.config.averaging_delay
        size = 8.0 * self.dimension if exact else None
        send = self.network.send_batch
        fates = [
            send(a, b, kind="dsgd", rng=self.loss_rng, window=deadline, size=size)
            for a, b in ((forth_src, forth_dst), (forth_dst, forth_src))
        ]
        lost = np.concatenate([fate.lost for fate in fates])
        if exact:
            late = np.concatenate([fate.delays for fate in fates]) > deadline  # type: ignore[misc]
        return lost, late

    def average(self, sent: Sent) -> None:
        """Average over the links whose two messages arrived in time and whose two ends are
        online (in exact mode, at the deadline); a node in no such link keeps its state."""
        config, n = self.config, self.n
        src, dst, h, noise, rate = sent.src, sent.dst, sent.h, sent.noise, sent.rate
        online_now = self.network.nodes.online
        received = ~sent.lost & online_now[dst]
        arrived = received & ~sent.late
        half = sent.src.size // 2
        used = arrived[:half] & arrived[half:] & online_now[src[:half]] & online_now[dst[:half]]
        used_a, used_b = src[:half][used], dst[:half][used]
        weights = metropolis_from_edges(n, used_a, used_b)
        mixed = weights @ h
        noisy = sent.gossip_pass == 0
        message_std = self.policy.message_std(rate) if noisy else 0.0
        shares = self.policy.message_noise(src, message_std) if message_std > 0 else None
        uncancelled = 0.0
        if noisy and noise.pairwise is not None:
            uncancelled = float(np.linalg.norm(noise.pairwise[sent.stepped].sum(axis=0)))
        per_message = np.zeros(src.size)
        if shares is not None:
            xi, per_message = shares
            at = np.asarray(weights[dst, src]).ravel() if src.size else np.zeros(0)
            spread = sp.csr_matrix((at, (dst, np.arange(src.size))), shape=(n, src.size))
            reached = np.asarray(spread @ xi)
            mixed += reached
            uncancelled = float(np.linalg.norm(reached.sum(axis=0))) / rate
        self.theta = mixed
        if noisy:
            self.uncancelled = uncancelled
        self._record(sent.t, sent.online, sent.stepped, rate, sent.decay, sent.batch, weights,
                     src, dst, ~received, per_message, noisy=noisy)  # fmt: skip
        self.pass_links += int(used_a.size)
        self.pass_lost += int(sent.lost.sum())
        if self.trace is not None and noisy:
            self.trace.append({
                "online": sent.online, "gradient": sent.gradient,
                "independent": noise.independent, "pairwise": noise.pairwise,
                "secrets": noise.secrets,
                "message_noise": None if shares is None else shares[0], "h": h,
            })  # fmt: skip
        if sent.gossip_pass < config.gossip_rounds - 1:
            return  # the round's row follows its last pass
        self.consensus = rms_to_mean(self.theta[online_now])
        loss = accuracy = node_accuracy = math.nan
        t = sent.t
        if t % config.evaluate_every == 0 or t == self.total_rounds:
            loss, accuracy, node_accuracy = self.evaluate(online_now)
        self.rounds_table.append(
            t, self.sim.now - config.averaging_delay, int(sent.online.sum()), self.pass_links,
            self.pass_lost, self.uncancelled, self.consensus, loss, accuracy, node_accuracy,
        )  # fmt: skip
        self.pass_links = self.pass_lost = 0

    def _record(
        self, t: int, online: np.ndarray, stepped: np.ndarray, rate: float, decay: float,
        batch: np.ndarray, weights: sp.csr_matrix, src: np.ndarray, dst: np.ndarray,
        lost: np.ndarray, per_message: np.ndarray, *, noisy: bool = True,
    ) -> None:  # fmt: skip
        """Append round ``t`` (one gossip pass of it) to :attr:`linear` (see the module
        docstring for λ > 0); a pass after the first (``noisy`` false) has no secrets."""
        config, n = self.config, self.n
        took = np.zeros(n, dtype=bool)
        took[stepped] = True
        scale = np.where(took, decay, 1.0)
        mixing = weights if decay == 1.0 else (weights @ sp.diags(scale)).tocsr()
        policy = self.policy
        secrets: dict[str, Any] = {}
        if policy.secret_std > 0 and noisy:
            count = self.link_a.size
            secrets = {
                "secret_a": self.link_a, "secret_b": self.link_b,
                "secret_std": np.full(count, policy.secret_std),
                "secret_a_added": took[self.link_a], "secret_b_added": took[self.link_b],
            }  # fmt: skip
        message: dict[str, Any] = {}
        if policy.message_std(rate) > 0 and noisy:
            message = {"message_std": per_message / scale[src], "zero_sum": True}
        self.mixing.append(weights)
        self.linear.rounds.append(LinearRound(
            mixing=mixing,
            step=np.where(took, rate / scale, 0.0),
            noise_std=np.where(took, policy.std, 0.0),
            sensitivity=np.where(took, config.sensitivity, 0.0),
            batch=batch,
            sent_src=src, sent_dst=dst, delivered=~lost,
            **secrets, **message,
        ))  # fmt: skip

    # --- evaluation ---------------------------------------------------------------------------

    def evaluate(self, online: np.ndarray) -> tuple[float, float, float]:
        """The training loss and test accuracy of the online nodes' average model, and the
        mean test accuracy of their own models (NaN when nobody is online)."""
        if not online.any():
            return math.nan, math.nan, math.nan
        average = self.theta[online].mean(axis=0)
        loss = float(np.mean(self.model.losses(average, self.loss_x, self.loss_y)))
        nodes = model_test_accuracies(self.model, self.theta[online], self.x_test, self.y_test)
        return loss, self.model.accuracy(average, self.x_test, self.y_test), float(np.mean(nodes))

    def finish(self) -> None:
        """:meth:`account_privacy`, then the summary row with central DP at the worst pair's
        (ε, δ) beside it."""
        epsilon, delta = self.account_privacy()
        central = math.nan
        if math.isfinite(epsilon) and epsilon > 0:
            central = central_dp_accuracy(self.data, epsilon, delta)
        config, noise = self.config, self.noise
        accuracies = model_test_accuracies(self.model, self.theta, self.x_test, self.y_test)
        average = self.model.accuracy(self.theta.mean(axis=0), self.x_test, self.y_test)
        validation = (math.nan, math.nan)
        x_val, y_val = self.data.x_validation, self.data.y_validation
        if y_val.size:
            validation = (
                float(np.mean(model_test_accuracies(self.model, self.theta, x_val, y_val))),
                self.model.accuracy(self.theta.mean(axis=0), x_val, y_val),
            )
        self.sim.log.table(SUMMARY_TABLE).append(
            self.round_index, float(np.mean(accuracies)), average,
            self.baselines.majority, self.baselines.centralised, rms_to_mean(self.theta),
            noise.kind,
            float(noise.noise_multiplier) if noise.kind != "none" else math.nan,
            float(getattr(noise, "correlated_multiplier", math.nan)),
            float(getattr(noise, "message_multiplier", math.nan)),
            config.clip, config.batch, config.learning_rate, config.unit, config.sensitivity,
            self.calibration, central, *validation,
        )  # fmt: skip

    def account_privacy(self) -> tuple[float, float]:
        """What each observer of the ``privacy`` section (model network) learned, from the
        run's linear view (:attr:`linear`) under its ``trust``: ``linear_pairs``,
        ``privacy_pairs``, ``privacy_summary`` and the ``bound_audit``
        (:mod:`netsim.algorithms.dsgd.privacy`). Returns the worst pair's (ε, δ) (NaN, NaN
        without a network threat model)."""
        threat = self.threat
        if threat is None or not threat.network:
            return math.nan, math.nan
        config, noise = self.config, self.noise
        delta = threat.delta_for(DEFAULT_DELTA)
        accounted = privacy.account(self.linear, threat, config.unit)
        topology = self.network.topology
        hops = hops_from(topology.indptr, topology.indices, threat.observers)
        linear, pairs = privacy.unit_rows(
            self.linear, accounted, hops, threat.observers, delta, config.unit
        )
        log = self.sim.log
        log.table(privacy.UNITS_TABLE).extend(linear)
        log.table(PAIRS_TABLE).extend(pairs)
        summary = privacy.summary(
            self.linear,
            accounted,
            threat.config.trust,
            delta,
            config.unit,
            linear[6],
            linear[8],
            sampled=sampled_from(self.n, threat.observers),
            pairs=pairs,
        )
        log.table(PRIVACY_SUMMARY_TABLE).append(*summary)
        setting = privacy.Setting(noise.kind, self.link_a, self.link_b, delta)
        rows = privacy.audit_rows(self.linear, threat, accounted, setting, config.unit)
        if rows:
            columns = [list(column) for column in zip(*rows, strict=True)]
            log.table(AUDIT_TABLE).extend(columns)
        worst = float(linear[6].max(initial=0.0))
        return worst, delta

    @classmethod
    def summary_lines(cls, tables: Mapping[str, pd.DataFrame]) -> list[str]:
        """The final accuracies beside their yardsticks."""
        summary = tables.get("dsgd_summary")
        if summary is None or not len(summary):
            return []
        row = summary.iloc[0]
        lines = [
            f"dsgd ({row['noise']} noise, {int(row['rounds'])} rounds): test accuracy "
            f"{row['node_accuracy']:.3f} (mean of the nodes' models), {row['average_accuracy']:.3f}"
            f" (their average); majority class {row['majority_accuracy']:.3f}, centralised "
            f"non-private {row['centralised_accuracy']:.3f}"
            + (f", central DP at the worst pair's ε {row['central_dp_accuracy']:.3f}"
               if math.isfinite(row["central_dp_accuracy"]) else "")
        ]  # fmt: skip
        validation = row.get("average_validation_accuracy", math.nan)
        if not pd.isna(validation):
            lines.append(
                f"validation accuracy {row['node_validation_accuracy']:.3f} (nodes' models), "
                f"{validation:.3f} (their average)"
            )
        privacy = tables.get("privacy_summary")
        if privacy is not None and len(privacy):
            p = privacy.iloc[0]
            lines.append(
                f"privacy ({p['view']}) at δ = {p['delta']:g}: worst pair ε = "
                f"{p['network_epsilon']:.3g}, median {p['epsilon_median']:.3g}; local DP ε = "
                f"{p['local_epsilon']:.3g} ({int(p['pairs'])} pairs, {int(p['observers'])} "
                f"observers{sample_phrase(p)}{conversion_phrase(p)}){union_phrase(p)}"
            )
        return [*lines, *audit_lines(tables.get("bound_audit"))]


def rms_to_mean(models: np.ndarray) -> float:
    """The root mean square L2 distance of the rows of ``models`` to their mean (NaN for
    none)."""
    if not len(models):
        return math.nan
    centred = models - models.mean(axis=0)
    return float(np.sqrt((centred**2).sum(axis=1).mean()))
