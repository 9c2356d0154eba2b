"""The scenario schema: typed, frozen, validated configuration (DESIGN principle 7).

Every key, unit and default is documented in ``scenarios/README.md``; a test checks that the
two agree. Durations accept ``100ms``, ``1.5s``, ``10min``, ``2h``, ``2d`` (bare numbers are
seconds), sizes ``64B`` / ``1MB``, bandwidths ``100kbit/s``. Relative file paths are resolved
against the scenario file's directory and must exist.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from netsim.distributions import Constant, Distribution, Duration, PositiveDuration
from netsim.learning.datasets import BUILTIN, USER_FORMATS
from netsim.learning.online_data import SYNTHETIC
from netsim.protocols.broadcast import threshold_column
from netsim.units import DAY, parse_bandwidth, parse_size

Probability = Annotated[float, Field(ge=0.0, le=1.0)]
Size = Annotated[float, BeforeValidator(parse_size)]
Bandwidth = Annotated[float, BeforeValidator(parse_bandwidth)]
Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=80)]


class StrictModel(BaseModel):
    """Unknown keys are errors; instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _resolved_path(value: Path, info: ValidationInfo) -> Path:
    base = (info.context or {}).get("base_dir")
    path = Path(value).expanduser()
    if not path.is_absolute() and base is not None:
        path = Path(base) / path
    return path.resolve()


def _existing_file(value: Path, info: ValidationInfo) -> Path:
    path = _resolved_path(value, info)
    if not path.is_file():
        raise ValueError(f"file not found: {path}")
    return path


# --- topology ------------------------------------------------------------------------------


class KOutTopology(StrictModel):
    """Every node picks k distinct random neighbours (the paper's "50 fixed neighbours")."""

    kind: Literal["k_out"]
    k: int = Field(ge=1)
    undirected: bool = False


class RandomRegularTopology(StrictModel):
    kind: Literal["random_regular"]
    degree: int = Field(ge=1)


class ErdosRenyiTopology(StrictModel):
    kind: Literal["erdos_renyi"]
    p: Probability


class WattsStrogatzTopology(StrictModel):
    kind: Literal["watts_strogatz"]
    k: int = Field(ge=2)
    p: Probability


class BarabasiAlbertTopology(StrictModel):
    kind: Literal["barabasi_albert"]
    m: int = Field(ge=1)


class RandomGeometricTopology(StrictModel):
    kind: Literal["random_geometric"]
    radius: float = Field(gt=0)
    dim: int = Field(default=2, ge=1)


class RingTopology(StrictModel):
    kind: Literal["ring"]
    k: int = Field(default=1, ge=1)


class CompleteTopology(StrictModel):
    kind: Literal["complete"]


class EdgeListTopology(StrictModel):
    kind: Literal["edge_list"]
    path: Path
    directed: bool = False

    _path = field_validator("path")(_existing_file)


TopologyConfig = Annotated[
    KOutTopology
    | RandomRegularTopology
    | ErdosRenyiTopology
    | WattsStrogatzTopology
    | BarabasiAlbertTopology
    | RandomGeometricTopology
    | RingTopology
    | CompleteTopology
    | EdgeListTopology,
    Field(discriminator="kind"),
]

# --- links ---------------------------------------------------------------------------------


class LinkFailureConfig(StrictModel):
    mean_up: PositiveDuration
    mean_down: PositiveDuration


class LinksConfig(StrictModel):
    delay: Distribution = Constant(dist="constant", value=0.0)
    bandwidth: Bandwidth | None = None
    loss: Probability = 0.0
    failure: LinkFailureConfig | None = None


# --- churn ---------------------------------------------------------------------------------


class AlwaysOnChurn(StrictModel):
    kind: Literal["always_on"]


class DiurnalConfig(StrictModel):
    amplitude: float = Field(ge=0.0, lt=1.0)
    peak: Duration = 0.0

    @field_validator("peak")
    @classmethod
    def _time_of_day(cls, value: float) -> float:
        if value >= DAY:
            raise ValueError("peak is a time of day: it must be less than 1d")
        return value


class SyntheticChurn(StrictModel):
    kind: Literal["synthetic"]
    online: Distribution
    offline: Distribution
    diurnal: DiurnalConfig | None = None

    @model_validator(mode="after")
    def _positive_means(self) -> SyntheticChurn:
        for key in ("online", "offline"):
            if getattr(self, key).mean() <= 0:
                raise ValueError(f"{key} periods must have a positive mean length")
        return self


class TraceChurn(StrictModel):
    kind: Literal["trace"]
    path: Path
    assign: Literal["random", "in_order"] = "random"

    _path = field_validator("path")(_existing_file)


class StunnerChurn(StrictModel):
    """Replay of the STUNner trace; ``fallback`` replaces it where the research-only file is
    absent (e.g. the shipped synthetic trace fitted to it)."""

    kind: Literal["stunner"]
    path: Path
    segment_length: PositiveDuration = 2 * DAY
    segment_step: PositiveDuration = DAY
    local_time: bool = False
    assign: Literal["random", "in_order"] = "random"
    fallback: TraceChurn | None = None

    _path = field_validator("path")(_resolved_path)

    @model_validator(mode="after")
    def _file_or_fallback(self) -> StunnerChurn:
        if not self.path.is_file() and self.fallback is None:
            raise ValueError(f"path: file not found: {self.path} (and no fallback is given)")
        return self


ChurnConfig = Annotated[
    AlwaysOnChurn | SyntheticChurn | TraceChurn | StunnerChurn, Field(discriminator="kind")
]

# --- protocols and metrics -----------------------------------------------------------------


class GossipConfig(StrictModel):
    period: PositiveDuration
    message_size: Size = 64.0
    mode: Literal["exact", "rounds"] = "exact"


class BroadcastConfig(StrictModel):
    interval: PositiveDuration
    start: Duration = 0.0
    thresholds: tuple[Annotated[float, Field(gt=0.0, le=1.0)], ...] = (0.5, 0.9, 0.99, 1.0)

    @field_validator("thresholds")
    @classmethod
    def _distinct(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value:
            raise ValueError("give at least one threshold")
        if len({threshold_column(t) for t in value}) != len(value):
            raise ValueError(
                "thresholds must be distinct as percentages with 6 significant digits "
                "(each becomes a column such as t90)"
            )
        return tuple(sorted(value))


class VisitCounterAgent(StrictModel):
    """Counts visits per node (the walk carries no state)."""

    kind: Literal["visit_counter"]


class SGDWalkAgent(StrictModel):
    """The walk carries a model trained by (private) SGD as configured in ``learning``."""

    kind: Literal["sgd"]


WalkAgentConfig = Annotated[VisitCounterAgent | SGDWalkAgent, Field(discriminator="kind")]


class DatasetConfig(StrictModel):
    """A data set of :func:`netsim.learning.datasets.load_dataset`."""

    name: Literal[BUILTIN + USER_FORMATS]  # type: ignore[valid-type]  # the loader's names
    path: Path | None = None
    label: str | int | None = None
    split_seed: int = Field(default=0, ge=0)
    test_fraction: float | None = Field(default=None, gt=0.0, lt=1.0)

    @field_validator("path")
    @classmethod
    def _path(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return None if value is None else _resolved_path(value, info)


class LearningConfig(StrictModel):
    """Differentially private SGD (Hegedűs et al. 2016 §3, eq. 8): one training record per
    node, node i holding a row of the training split."""

    dataset: DatasetConfig
    normalisation: Literal["local", "global", "none"] = "local"
    model: Literal["logreg", "svm"] = "logreg"
    algorithm: Annotated[str, Field(pattern=r"^(sgd|dp-sgd-inf|dp-sgd-[1-9][0-9]*)$")] = "dp-sgd-1"
    noise: Literal["l1", "l2_paper", "k_norm_l2"] = "k_norm_l2"
    epsilon: float = Field(default=1.0, gt=0.0, allow_inf_nan=False)
    regularisation: float = Field(default=1e-4, ge=0.0, allow_inf_nan=False)
    evaluate_every: int = Field(default=100, ge=1)


class GossipLearningConfig(StrictModel):
    """Gossip learning (Hegedűs et al. Alg. 1): every period each online node sends its model
    to a random online neighbour, which updates it with its record and keeps it."""

    period: PositiveDuration


class WalkServiceConfig(StrictModel):
    """The single random walk service (Hegedűs et al. Alg. 2) over the simulated network."""

    kind: Literal["service"]
    transfer_time: PositiveDuration
    timeout: PositiveDuration
    kill_probability: Probability = 0.0
    start: Duration = 0.0
    retry_interval: PositiveDuration | None = None
    sample_every: PositiveDuration | None = None
    agent: WalkAgentConfig = VisitCounterAgent(kind="visit_counter")

    @model_validator(mode="after")
    def _timeout_covers_a_transfer(self) -> WalkServiceConfig:
        if self.timeout < self.transfer_time:
            raise ValueError(
                f"timeout δ ({self.timeout:g} s) must be at least transfer_time δ_rw "
                f"({self.transfer_time:g} s): an update is not overwritten for δ_rw on average "
                "(Hegedűs et al. §5.2)"
            )
        return self


class IdealWalkConfig(StrictModel):
    """A walk that never fails: the next node uniformly, with or without replacement."""

    kind: Literal["ideal"]
    sampling: Literal["with_replacement", "without_replacement"] = "with_replacement"
    step_time: PositiveDuration = 1.0
    sample_every: PositiveDuration | None = None
    agent: WalkAgentConfig = VisitCounterAgent(kind="visit_counter")


WalkConfig = Annotated[WalkServiceConfig | IdealWalkConfig, Field(discriminator="kind")]


class StreamDataConfig(StrictModel):
    """What the online learners' data sections share: a file, label column, seed, options."""

    path: Path | None = None
    label: str | int | None = None
    split_seed: int = Field(default=0, ge=0)
    options: dict[str, float] = Field(default_factory=dict)

    @field_validator("path")
    @classmethod
    def _path(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return None if value is None else _resolved_path(value, info)


class DolaDataConfig(StreamDataConfig):
    """DOLA's binary data stream: a generator of :mod:`netsim.learning.online_data` or a data
    set of the loader, pre-processed as Li et al. (SPEC §6)."""

    name: Literal[SYNTHETIC + BUILTIN + USER_FORMATS]  # type: ignore[valid-type]
    test_fraction: float | None = Field(default=None, gt=0.0, lt=1.0)


class RoundsSection(StrictModel):
    """A round-based learner: a round every ``period``, T = ``rounds`` of them."""

    period: PositiveDuration = 1.0
    rounds: int | None = Field(default=None, ge=1)

    def rounds_in(self, duration: float) -> int:
        """T: the configured rounds, or as many periods as fit in ``duration``."""
        return self.rounds or max(math.floor(duration / self.period + 1e-9), 1)

    def rounds_problem(self, key: str, duration: float) -> str | None:
        """Why the configured rounds do not fit in ``duration`` (``None`` if they do)."""
        if self.rounds is None or self.rounds * self.period <= duration * (1 + 1e-12):
            return None
        return (
            f"{key}.rounds ({self.rounds}) × {key}.period ({self.period:g} s) is longer than "
            f"duration ({duration:g} s); lengthen the run or leave rounds out (it defaults to "
            "duration / period)"
        )


class DolaMixingConfig(StrictModel):
    """How A_t is drawn: each online node talks to ``count`` (if > 0) or a ``fraction`` of its
    online neighbours per round; ``time_invariant`` uses one A on every link instead."""

    fraction: float = Field(default=0.5, gt=0.0, le=1.0)
    count: int = Field(default=0, ge=0)
    time_invariant: bool = False
    window: int = Field(default=10, ge=1)


class DolaSection(RoundsSection):
    """DOLA (Li et al.): private distributed online learning in synchronous rounds."""

    data: DolaDataConfig
    algorithm: Literal["laplace", "gaussian", "sparse", "non_private"] = "laplace"
    loss: Literal["hinge", "logistic"] = "hinge"
    epsilon: float = 1.0
    delta: float = 1e-5
    calibration: Literal["printed", "analytic"] = "printed"
    batch: int = 1
    step: Literal["strongly_convex", "convex"] = "strongly_convex"
    strong_convexity: float = Field(default=1.0, allow_inf_nan=False)
    regularisation: float = Field(default=0.0, allow_inf_nan=False)
    radius: float = Field(default=1.0, allow_inf_nan=False)
    sparsity: float = Field(default=0.0, allow_inf_nan=False)
    mixing: DolaMixingConfig = DolaMixingConfig()
    regret_node: int = Field(default=0, ge=0)
    regret_checkpoints: int = Field(default=20, ge=0)
    evaluate_every: int = Field(default=10, ge=1)

    @model_validator(mode="after")
    def _runnable(self) -> DolaSection:
        from netsim.learning.dola import DolaConfigError, dola_config

        try:
            dola_config(self, rounds=self.rounds or 1)
        except DolaConfigError as exc:
            raise ValueError(str(exc)) from None
        return self


class MiOgdDataConfig(StreamDataConfig):
    """The users' examples: ``synthetic_regression`` or a binary data set as DOLA reads it."""

    name: Literal[("synthetic_regression", *SYNTHETIC, *BUILTIN, *USER_FORMATS)]  # type: ignore[valid-type]


class MiOgdSection(RoundsSection):
    """MI-private OGD (Zhang & Venkitasubramaniam): a learner node and user nodes."""

    data: MiOgdDataConfig = MiOgdDataConfig(name="synthetic_regression")
    setting: Literal["full", "bandit"] = "full"
    loss: Literal["absolute", "hinge", "logistic"] = "absolute"
    sigma: float = Field(default=1.0, allow_inf_nan=False)
    radius: float = Field(default=1.0, allow_inf_nan=False)
    eta: float | None = None
    smoothing: float | None = None
    learner: int = Field(default=0, ge=0)
    regret_checkpoints: int = Field(default=20, ge=0)

    @model_validator(mode="after")
    def _runnable(self) -> MiOgdSection:
        from netsim.learning.mi_ogd import MiOgdConfig, MiOgdConfigError

        try:
            MiOgdConfig(
                dimension=1, rounds=1, setting=self.setting, loss=self.loss, sigma=self.sigma,
                radius=self.radius, eta=self.eta, smoothing=self.smoothing,
            )  # fmt: skip
        except MiOgdConfigError as exc:
            raise ValueError(str(exc)) from None
        if self.setting == "full" and self.smoothing is not None:
            raise ValueError("smoothing δ is for the bandit setting (setting: bandit)")
        if self.loss != "absolute" and self.data.name == "synthetic_regression":
            raise ValueError(
                f"loss {self.loss} needs labels ±1; synthetic_regression has real targets "
                "(use loss absolute, or a binary data set)"
            )
        return self


class MetricsConfig(StrictModel):
    sample_every: PositiveDuration = 60.0


class Scenario(StrictModel):
    """A whole run: network, churn, protocols, metrics."""

    name: Name = "scenario"
    description: str = ""
    seed: int | None = Field(default=None, ge=0, lt=2**63)
    nodes: int = Field(ge=1)
    duration: PositiveDuration
    topology: TopologyConfig
    links: LinksConfig = LinksConfig()
    churn: ChurnConfig = AlwaysOnChurn(kind="always_on")
    gossip: GossipConfig | None = None
    broadcast: BroadcastConfig | None = None
    walk: WalkConfig | None = None
    learning: LearningConfig | None = None
    gossip_learning: GossipLearningConfig | None = None
    dola: DolaSection | None = None
    mi_ogd: MiOgdSection | None = None
    metrics: MetricsConfig = MetricsConfig()

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if self.broadcast is not None and self.gossip is None:
            raise ValueError("broadcast needs a gossip section (it spreads updates by gossip)")
        if self.gossip is not None and self.gossip.mode == "rounds" and self.links.failure:
            raise ValueError(
                "gossip.mode rounds does not model per-link failures (links.failure); use "
                "gossip.mode exact, or remove links.failure"
            )
        if isinstance(self.walk, WalkServiceConfig) and self.gossip is None:
            raise ValueError(
                "walk (kind service) needs a gossip section: walk progress is broadcast by "
                "push-pull gossip with period Δ = gossip.period"
            )
        walk_learns = self.walk is not None and isinstance(self.walk.agent, SGDWalkAgent)
        learners = walk_learns or self.gossip_learning is not None
        if learners and self.learning is None:
            raise ValueError(
                "walk.agent kind sgd and gossip_learning need a learning section (data set, "
                "model, privacy budget)"
            )
        if self.learning is not None and not learners:
            raise ValueError(
                "learning is configured but nothing learns: set walk.agent.kind to sgd or add "
                "a gossip_learning section"
            )
        if self.gossip_learning is not None and walk_learns:
            raise ValueError(
                "gossip_learning and a learning walk (walk.agent kind sgd) in one scenario: "
                "compare them as two scenarios with the same learning section"
            )
        if self.dola is not None:
            if self.dola.regret_node >= self.nodes:
                raise ValueError(
                    f"dola.regret_node ({self.dola.regret_node}) must be a node id below nodes "
                    f"({self.nodes})"
                )
            too_long = self.dola.rounds_problem("dola", self.duration)
            if too_long:
                raise ValueError(too_long)
        if self.mi_ogd is not None:
            if self.nodes < 2:
                raise ValueError("mi_ogd needs at least 2 nodes: a learner and a user")
            if self.mi_ogd.learner >= self.nodes:
                raise ValueError(
                    f"mi_ogd.learner ({self.mi_ogd.learner}) must be a node id below nodes "
                    f"({self.nodes})"
                )
            too_long = self.mi_ogd.rounds_problem("mi_ogd", self.duration)
            if too_long:
                raise ValueError(too_long)
        problem = topology_problem(self.topology, self.nodes)
        if problem is not None:
            raise ValueError(problem)
        return self


def topology_problem(topology: TopologyConfig, n: int) -> str | None:
    """Why ``topology`` cannot be built on ``n`` nodes, or ``None`` if it can."""
    if n < 2 and not isinstance(topology, EdgeListTopology | CompleteTopology):
        return f"nodes: a {topology.kind} topology needs at least 2 nodes, got {n}"
    match topology:
        case KOutTopology(k=k) if k >= n:
            return f"topology.k ({k}) must be less than nodes ({n})"
        case RandomRegularTopology(degree=d) if d >= n or (n * d) % 2:
            return (
                f"topology.degree ({d}) must be less than nodes ({n}) and nodes × degree must "
                "be even"
            )
        case WattsStrogatzTopology(k=k) if k >= n:
            return f"topology.k ({k}) must be less than nodes ({n})"
        case BarabasiAlbertTopology(m=m) if m >= n:
            return f"topology.m ({m}) must be less than nodes ({n})"
        case RingTopology(k=k) if k > max((n - 1) // 2, 1):
            return f"topology.k ({k}) must be at most (nodes - 1) // 2 = {(n - 1) // 2}"
    return None
