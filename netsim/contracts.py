"""netsim's contracts: the interfaces a component implements and its build context, the low
module every package may import (``docs/architecture.md`` draws the layers). Plugins may import
the same names from :mod:`netsim.api`, the facade, which adds :func:`netsim.run`.

Every part of a run that a scenario names with ``kind:`` is a **component**: a class with

- ``Config``: its own frozen pydantic model, the only description of its settings (unknown keys
  are errors, every error keeps the user's key path);
- ``tables``: the :class:`~netsim.log.TableSchema` of every table it writes;
- ``requires``: the scenario sections it needs (``gossip``, ``learning``, ...), each with the
  reason shown when it is missing; each is a *role* a scenario may fill with another instance
  by name (``uses``), and ``ctx.require(role)`` returns the instance that fills it;
- ``build(config, ctx)`` (by default ``cls(config, ctx)``), ``start()`` after every component
  is built, and ``finish()`` once at the end of the run.

The slot a component fills is given by the interface it derives from — :class:`TopologyBuilder`,
:class:`ChurnModel`, :class:`GossipApplication`, :class:`NetworkProtocol`, :class:`Walk`,
:class:`WalkAgent`, :class:`RoundLearner`, :class:`Mechanism`, :class:`DatasetLoader`,
:class:`Transport`, :class:`GossipEngine`, :class:`Observer` — and
it is registered under a name (:mod:`netsim.registry`): by netsim for the built-ins, by the
``netsim.components`` entry-point group for installed packages, or named in YAML as
``kind: package.module:Class``. ``docs/components.md`` walks through writing one.

A minimal walk agent that counts how often each node is visited::

    class Visits(WalkAgent):
        tables = (VISITS,)

        def __init__(self, config, ctx):
            super().__init__(config, ctx)
            self.visits = np.zeros(ctx.nodes, dtype=np.int64)

        def initial_state(self):
            return None

        def visit(self, node, state, steps, walk, now):
            self.visits[node] += 1
            return state

        def finish(self):
            self.ctx.table(VISITS).extend([range(self.visits.size), self.visits])
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Protocol

import numpy as np
from pydantic import Field, PlainValidator, ValidationInfo, WithJsonSchema

from netsim.component import (
    ROUND_FORMS,
    SLOTS,
    Baseline,
    BuildContext,
    ChurnProgress,
    Component,
    ComponentConfig,
    Curve,
    ExactRun,
    ExactSupport,
    FigureSpec,
    MetricsConfig,
    OnlineStates,
    Overlay,
    PrivacyReport,
    Section,
    round_form,
)
from netsim.distributions import PositiveDuration
from netsim.errors import DataError, InvalidPrivacyEventError, PrivacyError
from netsim.registry import REGISTRY, validate_component_config

__all__ = [
    "INTERFACES",
    "ROUND_FORMS",
    "SLOTS",
    "Baseline",
    "BuildContext",
    "ChurnModel",
    "ChurnProgress",
    "Component",
    "ComponentConfig",
    "Curve",
    "DatasetLoader",
    "Delivery",
    "ExactRun",
    "ExactSupport",
    "FigureSpec",
    "GossipApplication",
    "GossipEngine",
    "LoadedData",
    "LossCurvature",
    "Mechanism",
    "MetricsConfig",
    "Model",
    "NetworkProtocol",
    "Observer",
    "ObserverConfig",
    "OnlineSchedule",
    "OnlineStates",
    "Overlay",
    "PrivacyReport",
    "Release",
    "RoundLearner",
    "RoundsConfig",
    "Section",
    "TopologyBuilder",
    "Transport",
    "Walk",
    "WalkAgent",
    "WalkConfig",
    "round_form",
    "supports_rounds",
]


class OnlineSchedule(Protocol):
    """When each node is online, decided before the run: who starts online, then one row per
    change (:class:`netsim.network.churn.ChurnSchedule` implements it)."""

    initially_online: np.ndarray
    time: np.ndarray
    node: np.ndarray
    online: np.ndarray

    def online_fraction(self, horizon: float) -> float: ...


class Delivery(Protocol):
    """A message as its receiver sees it (:class:`netsim.network.links.Transfer` implements
    it): sender, receiver, kind, payload and when it was sent."""

    src: int
    dst: int
    kind: str
    payload: Any
    sent_at: float


class Release(Protocol):
    """What a mechanism says about one noisy release
    (:class:`netsim.privacy.events.PrivacyEvent` implements it): the guarantee it really gives
    and its parameters, which the accountant checks and charges."""

    mechanism: str
    guarantee: str
    epsilon: float
    delta: float
    sensitivity: float
    noise_scale: float
    dimension: int


class TopologyBuilder(Component):
    """Builds the overlay: who can send to whom (:class:`~netsim.network.topology.Topology`).

    Built while validating too; draw only from ``ctx.stream()``."""

    slot = "topology"
    slot_title = "topology"
    section = Section("topology", by_kind="always", required=True)
    #: Whether the topology can be built on a single node.
    single_node_ok: ClassVar[bool] = False

    @abstractmethod
    def build_topology(self, nodes: int) -> Overlay:
        """The overlay on ``nodes`` nodes."""

    @classmethod
    def problem(cls, config: Any, nodes: int) -> str | None:
        """Why ``config`` cannot be built on ``nodes`` nodes (``None`` if it can)."""
        return None


class ChurnModel(Component):
    """Decides when each node is online, as one :class:`~netsim.network.churn.ChurnSchedule`
    built before the run (churn costs O(transitions) when replayed).

    Built while validating too; draw only from ``ctx.stream()``. A model that replays trace
    nodes sets ``trace_labels`` (one label per simulated node) for the ``trace_assignment``
    table."""

    slot = "churn"
    slot_title = "churn model"
    trace_labels: np.ndarray | None = None

    @abstractmethod
    def schedule(self, nodes: int, horizon: float) -> OnlineSchedule:
        """When each of ``nodes`` nodes is online until ``horizon``."""

    @classmethod
    def expected_transitions(cls, config: ComponentConfig, nodes: int, horizon: float) -> float:
        """About how many on/off transitions :meth:`schedule` will make, known before it is
        built (``netsim validate`` refuses a scenario whose schedule would not fit in memory).
        0 when the model cannot tell or is bounded by its input (a trace)."""
        return 0.0


class GossipApplication(Component):
    """An application of the push-pull gossip of the ``gossip`` section (Hegedűs et al. 2016,
    Alg. 2 lines 6–11): the engine asks it for the value a node sends and gives it what a node
    receives.

    Exact (event-driven) mode needs :meth:`outgoing` and :meth:`incoming`. Round mode
    (``gossip.mode: rounds``) is a declared capability: implement ``round_values``,
    ``round_relevant``, ``round_merge`` and ``round_tick`` (see
    :class:`~netsim.protocols.rounds.RoundRule`), or ``round_exchange`` and ``round_tick``
    (:class:`~netsim.protocols.rounds.FusedRoundRule`), and the class's ``round_form``
    (``"batched"`` or ``"fused"``, :data:`ROUND_FORMS`) says which; a class that does not
    declare it gets the form of the methods it has. A scenario asking for rounds with an
    application of neither form is a validation error.
    """

    slot = "application"
    slot_title = "gossip application"
    requires: ClassVar[Mapping[str, str]] = {"gossip": "it spreads values by push-pull gossip"}

    @classmethod
    def build(cls, config: Any, ctx: BuildContext) -> Component:
        app = cls(config, ctx)
        ctx.require("gossip").register(app)
        return app

    @abstractmethod
    def outgoing(self, node: int) -> Any:
        """The value ``node`` sends now (a snapshot: never modify it later in place)."""

    @abstractmethod
    def incoming(self, node: int, value: Any, sender: int, transfer: Delivery) -> None:
        """Merge ``value`` that ``node`` received from ``sender``."""


def supports_rounds(cls: type) -> bool:
    """Whether a component class declares round support (:attr:`Component.round_form`), in
    either form; a class of another kind, whether it has the methods of one."""
    return round_form(cls) is not None


def _walk_agent_config(value: Any, info: ValidationInfo) -> Any:
    """The ``agent`` key of a walk: a walk agent named by ``kind``."""
    return validate_component_config(value, ("walk_agent",), info.context)


def _visit_counter() -> Any:
    """The default walk agent, found by its registered name (the visit counter)."""
    cls, _ = REGISTRY.lookup(("walk_agent",), "visit_counter")
    return cls.Config()


class WalkConfig(ComponentConfig):
    """Base of a :class:`Walk`'s ``Config``: the ``agent`` key names the walk agent it
    carries (``walk.agent``, built before the walk; the visit counter when not given).

    netsim reads ``agent`` of every walk section, so a walk's ``Config`` must have it: the
    registry refuses a walk whose ``Config`` does not (derive it from this class)."""

    agent: Annotated[
        Any, PlainValidator(_walk_agent_config), WithJsonSchema({"type": "object"})
    ] = Field(default_factory=_visit_counter)


class Walk(Component):
    """A random walk over the network carrying a :class:`WalkAgent` (the ``walk`` section).

    The walk decides where it goes next and when; the agent it carries
    (``ctx.require("walk.agent")``) decides what happens at each visit: the walk calls
    ``agent.visit(node, state, steps, walk, now)`` and carries the state it returns. A walk
    that chooses its next hop itself (e.g. Metropolis–Hastings) is a :class:`Walk`, not a
    :class:`WalkAgent`. Its ``Config`` derives from :class:`WalkConfig`."""

    slot = "walk"
    slot_title = "walk"
    section = Section("walk", after=("gossip", "learning"), by_kind="always")
    Config: ClassVar[type[ComponentConfig]] = WalkConfig


class WalkAgent(Component):
    """What a walk carries and does at each visit (the ``walk.agent`` section)."""

    slot = "walk_agent"
    slot_title = "walk agent"

    def initial_state(self) -> Any:
        """The walk state every node's local copy starts with."""
        return None

    @abstractmethod
    def visit(self, node: int, state: Any, steps: int, walk: int, now: float) -> Any:
        """Update ``state`` at ``node`` (the walk's ``steps``-th step); return the new state.

        Return a new object and never modify ``state`` in place: nodes' local copies share
        state objects (every node starts with the same initial state, and a node's copy is
        the very object the walk carried), which keeps 10⁴ copies of a model affordable."""

    def received(self, node: int, state: Any) -> None:
        """``state`` arrived at ``node`` (optional: called on every arrival, before the node
        decides to keep, forward or drop the walk, when the agent overrides it — e.g. to
        account what each node saw)."""
        return None

    def continues(self, node: int, state: Any, carried: bool) -> bool:
        """Whether a walk may continue from ``state`` again at ``node`` — a restart from its
        local copy, or its visit of an older copy than the walk that arrived — when that
        state was handed on before (optional: a privacy ceiling may refuse the branch; the
        walk service then does not restart from the copy, or the node continues the walk
        that arrived). ``carried``: another walk carries ``state`` still."""
        return True

    def walks_by(self, transition: Any) -> None:
        """The walk moves by this fixed transition matrix (scipy sparse, row-stochastic: an
        ideal walk along a static topology), told once when it is built (optional: for
        accountants with closed forms on a known walk)."""
        return None

    def resimulated_by(self, paths: Callable[..., np.ndarray]) -> None:
        """The walk's paths can be re-simulated on a churn schedule:
        ``paths(schedule, step_times, count, rng)`` gives ``count`` paths (a count × steps
        array of the nodes visited) of walks that move as this walk moves, at the visit times
        ``step_times`` (:func:`netsim.protocols.walk.resimulate.resimulated_walk_paths`, for
        a walk that forwards to an online neighbour by the transport's rule), told once when
        the walk is built (optional: for the path-secret estimate of
        ``privacy.secret_paths``)."""
        return None


class NetworkProtocol(Component):
    """A protocol that runs its own processes on the network (e.g. gossip learning, whose
    push-only gossip carries models): :meth:`start` schedules them on ``ctx.sim`` and they
    send through ``ctx.network``, the transport that decides every message's fate."""

    slot = "protocol"
    slot_title = "protocol"
    #: Whether it runs a gossip engine of its own, which the compiled exact core may run
    #: (it then answers ``exact_support`` with the role ``gossip``).
    runs_gossip: ClassVar[bool] = False

    @abstractmethod
    def start(self) -> None:
        """Schedule the protocol's first events (called once every component is built)."""


class Mechanism(Component):
    """A noise mechanism: perturbs a value of bounded sensitivity and says what guarantee the
    release really has (named where a scenario chooses noise: ``learning.noise``,
    ``dola.mechanism``, ``mi_ogd.mechanism``), either by name (``noise: k_norm_l2``) or with
    its settings (``noise: {kind: gaussian, calibration: classic}``), which its ``Config``
    validates like any component's.

    :attr:`guarantee` states what every release of the mechanism claims: ``epsilon-DP``
    (it spends ε only), ``(epsilon,delta)-DP`` (it spends ε and δ: :meth:`release` then takes
    ``delta``, the share of the δ budget it may spend, and a scenario must give the algorithm
    a δ budget) or ``none`` (no DP guarantee in general). :meth:`release` returns the noisy
    value and a :class:`~netsim.privacy.events.PrivacyEvent` whose ``guarantee`` is the one the
    noise gives, not the one asked for, and whose ``accounting`` is the release in Google's
    ``dp_accounting`` vocabulary (e.g. ``GaussianDpEvent(σ/Δ)``; ``None``: composed by the basic
    sum only). ``norm`` is the norm the sensitivity is measured in (the data are normalised in
    it). A mechanism that implements :meth:`noise` (the noise alone) can be audited
    empirically (:mod:`netsim.privacy.audit`); the contract test audits every registered
    mechanism that claims ε-DP, and checks the declared ``dp_accounting`` event of one that
    claims (ε, δ)-DP against its noise and its claim.

    Algorithms call :meth:`spend` (one release) or :meth:`release_rows` (one release per row
    of an array, as DOLA perturbs every node of a round at once), which pass ``delta`` only to
    a mechanism that spends δ, so a mechanism written for ε alone needs nothing more.
    """

    slot = "mechanism"
    slot_title = "noise mechanism"
    #: The norm of the sensitivity: ``L1`` or ``L2``.
    norm: ClassVar[str] = "L2"
    #: What every release claims: ``epsilon-DP``, ``(epsilon,delta)-DP`` or ``none``.
    guarantee: ClassVar[str] = "epsilon-DP"

    @abstractmethod
    def release(
        self, value: np.ndarray, *, sensitivity: float, epsilon: float, rng: np.random.Generator
    ) -> tuple[np.ndarray, Release]:
        """``value`` plus noise calibrated to ``sensitivity`` / ``epsilon``, and its event
        (a mechanism that spends δ takes ``delta`` too)."""

    @classmethod
    def spends_delta(cls) -> bool:
        """Whether the releases spend δ (the guarantee is ``(epsilon,delta)-DP``)."""
        return cls.guarantee == "(epsilon,delta)-DP"

    def spend(
        self,
        value: np.ndarray,
        *,
        sensitivity: float,
        epsilon: float,
        delta: float = 0.0,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, Release]:
        """One release with the share (ε, δ) of a budget: ``delta`` goes to the mechanism
        only when it spends δ, and must then be positive."""
        if not self.spends_delta():
            with self.claims_checked():
                return self.release(value, sensitivity=sensitivity, epsilon=epsilon, rng=rng)
        if not 0 < delta < 1:
            raise PrivacyError(
                f"{type(self).__name__} is (epsilon,delta)-DP and needs a share of a δ budget "
                f"in (0, 1), got δ = {delta:g}: give the algorithm a δ budget"
            )
        with self.claims_checked():
            return self.release(  # type: ignore[call-arg]
                value, sensitivity=sensitivity, epsilon=epsilon, delta=delta, rng=rng
            )

    @contextmanager
    def claims_checked(self) -> Iterator[None]:
        """Turn an impossible claim of a release (a :class:`PrivacyEvent` refused as made: ε
        NaN, δ ≥ 1, …) into one :class:`~netsim.errors.PrivacyError` naming the mechanism,
        which stops the run: nothing it released can be accounted."""
        try:
            yield
        except InvalidPrivacyEventError as exc:
            raise PrivacyError(
                f"noise mechanism {_kind(self)} claims an impossible guarantee, so its "
                f"releases cannot be accounted: {exc}"
            ) from None

    def release_rows(
        self,
        values: np.ndarray,
        *,
        sensitivity: float,
        epsilon: float,
        delta: float = 0.0,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, Release]:
        """Every row of ``values`` (releases × dimension) released on its own with the same
        sensitivity and share: the noisy rows and the event of each row (rows whose events
        differ are an error). By default :meth:`spend` row by row; override to vectorise."""
        rows = np.asarray(values, dtype=np.float64)
        if rows.ndim != 2 or rows.shape[0] < 1:
            raise ValueError("release_rows needs a (releases, dimension) array of >= 1 row")
        out = np.empty_like(rows)
        first = None
        for i in range(rows.shape[0]):
            noisy, event = self.spend(
                rows[i], sensitivity=sensitivity, epsilon=epsilon, delta=delta, rng=rng
            )
            out[i] = noisy
            if first is None:
                first = event
            elif event != first:
                raise ValueError(
                    f"{type(self).__name__}: the releases of one batch have different events "
                    f"({first} and {event}); override release_rows"
                )
        assert first is not None
        return out, first

    def noise(
        self, count: int, dimension: int, scale: float, rng: np.random.Generator
    ) -> np.ndarray | None:
        """``count`` noise vectors of ``dimension`` at ``scale`` = Δ/ε (``None``: not
        available, so the mechanism cannot be audited)."""
        return None

    # --- optional: Gaussian noise at a noise multiplier, for RDP / PLD accounting ----------

    def release_at_multiplier(
        self,
        value: np.ndarray,
        *,
        sensitivity: float,
        noise_multiplier: float,
        delta: float,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, Release]:
        """``value`` plus N(0, (z·Δ)² I) for ``noise_multiplier`` z, with an event that
        declares ``GaussianDpEvent(z)`` and states the release's own ε at ``delta``.

        Optional: a mechanism that implements it (:meth:`releases_at_multiplier`) lets an
        accountant under ``accounting: rdp`` or ``pld`` choose the noise for a record's
        composed budget (DP-SGD-k) or release at the scenario's fixed multiplier (``dp-sgd``);
        any other mechanism is given a share of ε per use and composed by the basic sum."""
        raise PrivacyError(f"{type(self).__name__} cannot release at a noise multiplier")

    @classmethod
    def releases_at_multiplier(cls) -> bool:
        """Whether the mechanism implements :meth:`release_at_multiplier`."""
        return cls.release_at_multiplier is not Mechanism.release_at_multiplier

    def fixed_noise_multiplier(self) -> float | None:
        """The noise multiplier σ/Δ the settings fix (None: calibrated per release)."""
        return None


def _kind(component: Component) -> str:
    """The name the scenario gave ``component`` (its config's ``kind``), or its class's."""
    return str(getattr(component.config, "kind", None) or type(component).__name__)


@dataclass(frozen=True)
class LoadedData:
    """What a :class:`DatasetLoader` reads: one example per row of ``x`` (numeric, finite),
    its label in ``labels`` (numbers or text: netsim numbers the classes), and a sentence
    naming the source for the run's summary.

    A loader that numbers the classes itself gives their names in ``classes`` (``labels`` are
    then indices into it), and may name in ``origin`` the file a split error should point at.
    """

    x: np.ndarray
    labels: np.ndarray
    source: str
    classes: tuple[str, ...] | None = None
    origin: str | None = None


class DatasetLoader(Component):
    """Reads a labelled data set; netsim splits it (``split_seed``, ``test_fraction``), numbers
    its classes and pre-processes it for the algorithm that uses it. Named where a scenario
    names a data set (``learning.dataset.name``, ``dola.data.name``, ``mi_ogd.data.name``);
    the section's ``path`` and ``label`` keys are passed on."""

    slot = "dataset"
    slot_title = "data-set loader"
    #: The share of test rows when the scenario gives no ``test_fraction``.
    test_fraction: ClassVar[float] = 0.2
    #: Whether the loader needs a ``path`` (and refuses one when False).
    needs_path: ClassVar[bool] = True

    def check_arguments(self, path: Path | None, label: str | int | None) -> None:
        """Refuse the ``path`` or ``label`` the loader does not take, before reading: by
        default a path exactly when :attr:`needs_path`."""
        name = getattr(self.config, "kind", type(self).__name__)
        if path is None and self.needs_path:
            raise DataError(f"data set {name!r} needs path=")
        if path is not None and not self.needs_path:
            raise DataError(f"data set {name!r} reads no file; do not give path= (got {path})")

    def test_rows(self, rows: int, test_fraction: float | None) -> tuple[int, str]:
        """How many of ``rows`` go to the test split, and how to say so: ``test_fraction`` of
        them (:attr:`test_fraction` when ``None``), rounded to the nearest row."""
        fraction = self.test_fraction if test_fraction is None else test_fraction
        return math.floor(fraction * rows + 0.5), f"test_fraction {fraction:g}"

    @abstractmethod
    def load(self, path: Path | None, label: str | int | None) -> LoadedData:
        """Read the data set (raise :class:`~netsim.errors.DataError` naming the file, line
        and what is allowed when it is malformed)."""


@dataclass(frozen=True)
class LossCurvature:
    """What a model's per-example loss ℓ(θ; x, y) is as a function of the parameters θ, for
    records with ‖x‖₂ ≤ ``radius``: whether it is convex, its smoothness β (‖∇ℓ(θ) − ∇ℓ(θ′)‖ ≤
    β‖θ − θ′‖; ``None``: not smooth or not known) and its Lipschitz constant L (‖∇ℓ‖ ≤ L;
    ``None``: unbounded). Privacy amplification by iteration needs a convex, smooth loss
    (Feldman, Mironov, Talwar, Thakurta 2018; ``docs/explanation/privacy.md``)."""

    convex: bool
    smoothness: float | None
    lipschitz: float | None


#: Most parameters a model may have: 800 MB a float64 copy, and a step makes a gradient per
#: record of a batch as well.
MAX_MODEL_PARAMETERS = 10**8
#: Most parameters the nodes may hold together (nodes × size: 8 GB as float64), as a node
#: keeps its own model under gossip learning and a restarting walk keeps its copies.
MAX_HELD_PARAMETERS = 10**9


def check_model_size(key: str, size: int, nodes: int) -> None:
    """Refuse a model of ``size`` parameters (the slot at ``key``) that would not fit, on its
    own (:data:`MAX_MODEL_PARAMETERS`) or once on each of ``nodes`` nodes
    (:data:`MAX_HELD_PARAMETERS`), in one message, before any array of that size is made."""
    from netsim.errors import ScenarioError

    if size > MAX_MODEL_PARAMETERS:
        raise ScenarioError(
            f"{key}: the model has {size:,} parameters; at most {MAX_MODEL_PARAMETERS:,} "
            "(800 MB a copy): make its layers narrower"
        )
    if nodes * size > MAX_HELD_PARAMETERS:
        raise ScenarioError(
            f"{key}: {size:,} parameters on each of {nodes:,} nodes are {nodes * size:,} in "
            f"all; at most {MAX_HELD_PARAMETERS:,} (8 GB): a smaller model or fewer nodes"
        )


class Model(Component):
    """A model trained by (private) SGD: the ``learning.model`` slot, named
    (``model: logreg``) or with its settings (``model: {kind: mlp, hidden: [64]}``).

    The parameters are one flat float64 vector of :attr:`size` entries; the model knows the
    data's shape after :meth:`setup`. It gives per-example losses and gradients for a batch of
    records (one row of the result per record: DP-SGD clips each row before adding noise),
    predictions, and what its loss is (:meth:`curvature`). A model that can bound its own
    per-example gradient for records of norm at most 1 says so in :meth:`gradient_bound`;
    the others run privately only with clipping (``learning.clip``), which bounds any model's
    gradient. ``docs/components.md`` walks through writing one; ``netsim check`` checks its
    gradients against finite differences, its shapes and its determinism.

    Class indices are 0..K−1 everywhere (``y`` holds them as integers).
    """

    slot = "model"
    slot_title = "model"
    #: Whether :meth:`setup` makes no array of the model's size and compiles nothing, so that
    #: ``netsim validate`` sets the model up to check its size (:func:`check_model_size`);
    #: a model that does not say so is checked when the run builds it.
    light_setup: ClassVar[bool] = False
    #: The scenario key the model was built from, for messages (``build_model`` sets it).
    scenario_key: str = "learning.model"
    #: How many copies the run may hold, one per node (``build_model`` sets it).
    copies: int = 1

    def setup(self, classes: int, features: int) -> None:
        """Fix the data's shape: ``classes`` ≥ 2 classes over ``features`` features (called
        once, before any other method)."""
        if classes < 2 or features < 1:
            raise DataError(
                f"a model needs at least 2 classes and 1 feature, got {classes} and {features}"
            )
        self.classes = classes
        self.features = features

    @property
    @abstractmethod
    def size(self) -> int:
        """The number of parameters (the length of the flat vector)."""

    @abstractmethod
    def initial_parameters(self, rng: np.random.Generator) -> np.ndarray:
        """θ₀ (a new array of :attr:`size` entries; draw only from ``rng``)."""

    @abstractmethod
    def losses(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """ℓ(θ; x_i, y_i) for each row of ``x`` (shape (rows,))."""

    @abstractmethod
    def per_example_gradients(
        self, params: np.ndarray, x: np.ndarray, y: np.ndarray
    ) -> np.ndarray:
        """∇_θ ℓ(θ; x_i, y_i) for each row of ``x``: shape (rows, :attr:`size`)."""

    @abstractmethod
    def predict(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The predicted class index of each row of ``x`` (int64, shape (rows,))."""

    def predict_many(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Predictions of several models at once: ``params`` (models, size) → (models, rows).
        By default one :meth:`predict` per model; override to batch."""
        return np.stack([self.predict(p, x) for p in params]) if len(params) else np.zeros(
            (0, len(x)), dtype=np.int64
        )

    def example_gradient(self, params: np.ndarray, x: np.ndarray, y: int) -> np.ndarray:
        """∇_θ ℓ(θ; x, y) at one record ``x`` (shape (features,)): a vector of :attr:`size`
        entries, bit for bit row 0 of :meth:`per_example_gradients` on that record. By
        default that call; override to skip its per-call overhead (one visit of a model)."""
        rows = np.asarray(x, dtype=np.float64)[None, :]
        return self.per_example_gradients(params, rows, np.array([y], dtype=np.int64))[0]

    def batch_gradients(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Many models, each at its own record: row k is ∇_θ ℓ(params[k]; x[k], y[k]), for
        ``params`` (models, size), ``x`` (models, features), ``y`` (models,) → (models, size).
        By default one :meth:`per_example_gradients` call per model; override to batch."""
        out = np.empty((len(params), self.size))
        for k in range(len(params)):
            out[k] = self.per_example_gradients(params[k], x[k : k + 1], y[k : k + 1])[0]
        return out

    def step_many(
        self,
        params: np.ndarray,
        x: np.ndarray,
        y: np.ndarray,
        learning_rates: np.ndarray | float,
        *,
        regularisation: float = 0.0,
        noise: np.ndarray | None = None,
    ) -> np.ndarray:
        """One SGD step of each of many models at its own record (Hegedűs et al. 2016 eq. 8
        row by row): θ_k − η_k (λ θ_k + ∇ℓ(θ_k; x_k, y_k) + N_k), from
        :meth:`batch_gradients` (a new (models, size) array)."""
        gradients = self.batch_gradients(params, x, y)
        if noise is not None:
            gradients = gradients + noise
        rates = np.asarray(learning_rates, dtype=np.float64).reshape(-1, 1)
        return params - rates * (regularisation * params + gradients)

    def accuracy(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
        """The fraction of rows of ``x`` classified as ``y`` (Hegedűs et al. 2016, eq. 11)."""
        return float(np.mean(self.predict(params, x) == y))

    def gradient_bound(self, norm: str) -> float | None:
        """A bound G on ‖∇ℓ(θ; x, y)‖ in ``norm`` (``L1`` or ``L2``) for every θ and every
        record with ‖x‖ ≤ 1 in that norm (``None``: the model cannot bound it, so a private
        run needs ``learning.clip``)."""
        return None

    @classmethod
    def bounds_gradient(cls, config: ComponentConfig | None) -> bool:
        """Whether a model built from ``config`` (``None``: the defaults) declares a bound in
        :meth:`gradient_bound`, so that a private run can calibrate its noise without
        ``learning.clip`` (asked when the scenario is validated, before any model is built). By
        default, whether the class overrides :meth:`gradient_bound`; a model whose bound
        depends on its settings (a clip of its own) answers from ``config``."""
        return cls.gradient_bound is not Model.gradient_bound

    def sensitivity(self, norm: str) -> float | None:
        """The replace-one sensitivity of one unclipped per-example gradient in ``norm``:
        2G for the bound G of :meth:`gradient_bound` (``None`` without one)."""
        bound = self.gradient_bound(norm)
        return None if bound is None else 2.0 * bound

    def curvature(self) -> LossCurvature:
        """Convexity, smoothness and Lipschitz constant of the loss for ‖x‖₂ ≤ 1 (by default:
        nothing known)."""
        return LossCurvature(convex=False, smoothness=None, lipschitz=self.gradient_bound("L2"))


class RoundsConfig(ComponentConfig):
    """A round-based learner's timing: a round every ``period``, T = ``rounds`` of them."""

    period: PositiveDuration = 1.0
    rounds: int | None = Field(default=None, ge=1)

    def rounds_in(self, duration: float) -> int:
        """T: the configured rounds, or as many periods as fit in ``duration``."""
        return self.rounds or max(math.floor(duration / self.period + 1e-9), 1)

    def section_problem(self, key: str, node_field: str, ctx: BuildContext) -> str | None:
        """Why the section ``key`` does not fit the run ``ctx`` describes: its node
        ``node_field`` is no node id, or its rounds do not fit in the run (``None`` if it
        fits)."""
        node = getattr(self, node_field)
        if node >= ctx.nodes:
            return f"{key}.{node_field} ({node}) must be a node id below nodes ({ctx.nodes})"
        return self.rounds_problem(key, ctx.duration)

    def rounds_problem(self, key: str, duration: float) -> str | None:
        """Why the configured rounds do not fit in ``duration`` (``None`` if they do)."""
        if self.rounds is None or self.rounds * self.period <= duration * (1 + 1e-12):
            return None
        return (
            f"{key}.rounds ({self.rounds}) × {key}.period ({self.period:g} s) is longer than "
            f"duration ({duration:g} s); lengthen the run or leave rounds out (it defaults to "
            "duration / period)"
        )


class RoundLearner(Component):
    """A learner that acts on many nodes in synchronous rounds (the shape of DOLA and
    MI-private OGD): one SimPy process calls :meth:`round` at time 0 and every ``period``
    after, ``rounds`` times (as many as fit in the run when not given).

    A subclass's ``Config`` derives from :class:`RoundsConfig`."""

    slot = "learner"
    slot_title = "round learner"

    def __init__(self, config: Any, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.round_index = 0

    @property
    def total_rounds(self) -> int:
        return self.config.rounds_in(self.ctx.duration)

    def start(self) -> None:
        assert self.ctx.sim is not None
        self.ctx.sim.every(self.config.period, self._next_round, first=0.0)

    def _next_round(self) -> None:
        if self.round_index >= self.total_rounds:
            return
        self.round_index += 1
        self.round(self.round_index)

    @abstractmethod
    def round(self, t: int) -> None:
        """Round ``t`` (1-based) at the current simulated time."""


class Transport(Component):
    """What carries every message between nodes (the ``links`` section; the built-in is
    :class:`~netsim.network.links.Network`, registered as ``links``): everything protocols,
    walks, gossip engines, learners and observers call on the transport they are wired to
    (``ctx.network``), and nothing else. A transport need not derive from the built-in: one
    that implements this interface runs every built-in protocol (the compiled exact core
    runs only the built-in, so exact mode then runs on SimPy).

    It is built before every other component, on the run's topology and node states
    (``ctx.topology``, ``ctx.node_states``), and exposes them as :attr:`topology` and
    :attr:`nodes`. It sends one message at a time (:meth:`send`, event-driven) or a round's
    messages at once (:meth:`send_batch`, :meth:`deliver_reliably`), chooses peers
    (:meth:`random_online_neighbour` event by event, :meth:`round_pairs` for a round), says
    whether and when links fail (:attr:`lossy`, :attr:`links`, :meth:`links_down_at`), and
    counts ``sent``, ``delivered`` and ``lost`` (the ``samples`` table reads them)."""

    slot = "transport"
    slot_title = "transport"
    #: The overlay it runs over (``ctx.topology``).
    topology: Overlay
    #: The node states it runs over (``ctx.node_states``: ``online``, ``is_online``,
    #: ``epoch``, ``on_join``/``on_leave``, as :class:`~netsim.network.nodes.NodeStates`).
    nodes: Any
    #: The link model (``delay``: a distribution, ``bandwidth``, ``loss``, and ``mean_up`` /
    #: ``mean_down``, None without link failures: :class:`~netsim.network.links.LinkModel`);
    #: a round learner reads it to know whether every value arrives within its round.
    links: Any
    #: Whether a message between online nodes can be lost (random loss or link failures);
    #: without, a round's batch needs no fate drawn (:meth:`deliver_reliably`).
    lossy: bool = False
    sent: int = 0
    delivered: int = 0
    lost: int = 0

    @abstractmethod
    def send(
        self,
        src: int,
        dst: int,
        *,
        kind: str,
        payload: Any,
        on_deliver: Any,
        on_lost: Any = None,
        size: float = 0.0,
        duration: float | None = None,
    ) -> Any:
        """Start one transfer; ``on_deliver(transfer)`` runs at ``dst`` when it arrives,
        ``on_lost(transfer, reason)`` at ``src`` when it does not."""  # fmt: skip

    @abstractmethod
    def send_batch(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        *,
        kind: str,
        rng: np.random.Generator,
        window: float = 0.0,
        size: float | None = None,
        links_up: bool = False,
    ) -> Any:
        """Send message k from ``src[k]`` to ``dst[k]`` for every k, now; return each
        message's fate (lost, and its delay when ``size`` is given)."""  # fmt: skip

    @abstractmethod
    def deliver_reliably(self, count: int) -> None:
        """Count a batch of ``count`` messages between online nodes on links that cannot lose
        them (:attr:`lossy` false): all sent and delivered."""

    @abstractmethod
    def random_online_neighbour(self, node: int, uniform: Any) -> int:
        """A uniform random online neighbour of ``node``, or -1 if none is online, drawn from
        ``uniform`` (a :class:`~netsim.rng.BlockDraws` of U[0, 1), the caller's stream). The
        built-in's rule (:func:`netsim.network.links.online_neighbour`) is what the walk's
        path-secret estimate re-simulates."""

    @abstractmethod
    def round_pairs(
        self, active: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A gossip round's (initiators, peers, inactive peers, active nodes): every ``active``
        node in uniformly random order with a uniform random online neighbour (nodes with
        none left out), the chosen peers that are not ``active`` (with repeats), and the
        active nodes in increasing order."""

    @abstractmethod
    def links_down_at(
        self, src: np.ndarray, dst: np.ndarray, start: float, end: float
    ) -> np.ndarray:
        """For each pair: when its link is or goes down during ``[start, end)``, NaN if it
        stays up (always NaN without link failures)."""


class GossipEngine(Component):
    """The engine that runs push-pull gossip for the applications registered with it (the
    ``gossip`` section; the built-in is :class:`~netsim.protocols.gossip.PushPullEngine`,
    registered as ``gossip``, which runs event by event or in rounds by ``gossip.mode``).

    Applications :meth:`register` while the run is built, and the engine begins its exchanges
    in :meth:`start`. It keeps ``period`` (Δ), ``active`` (the nodes taking part: online and
    heard a fresh message since they last joined), ``exchanges`` (a counter the ``samples``
    table reads) and ``round_based`` (whether its applications get round calls)."""

    slot = "gossip"
    slot_title = "gossip engine"
    round_based: ClassVar[bool] = False
    exchanges: int = 0

    @abstractmethod
    def register(self, rule: Any) -> None:
        """Add an application: its values travel in every message, in registration order."""

    @abstractmethod
    def on_activate(self, listener: Any) -> None:
        """Call ``listener(node)`` when a rejoined node hears its first fresh message."""

    @property
    @abstractmethod
    def active_count(self) -> int:
        """How many nodes take part in the gossip now."""


class ObserverConfig(ComponentConfig):
    """Base of an :class:`Observer`'s ``Config``: how often it observes."""

    every: PositiveDuration = 60.0


class Observer(Component):
    """Reads the state of the run at fixed times and writes what it sees: every ``every``
    seconds from time 0, and once more at the end of the run (the built-in ``samples``
    observer writes the ``samples`` table every ``metrics.sample_every``). It is started
    after every other component, so it sees their first events' effects in the order they
    were scheduled. Its ``Config`` derives from :class:`ObserverConfig`; what it reads it
    names in ``requires`` (or ``optional``) and gets with ``ctx.require`` (``ctx.find``)."""

    slot = "observer"
    slot_title = "observer"
    Config: ClassVar[type[ComponentConfig]] = ObserverConfig

    def start(self) -> None:
        assert self.ctx.sim is not None
        self.ctx.sim.every(self.config.every, self.observe, first=0.0)  # type: ignore[attr-defined]

    def finish(self) -> None:
        self.observe()

    @abstractmethod
    def observe(self) -> None:
        """Record what the run looks like now (``ctx.sim.now``)."""


#: The interfaces a component derives from, one per slot.
INTERFACES: tuple[type[Component], ...] = (
    TopologyBuilder, ChurnModel, GossipApplication, NetworkProtocol, Walk, WalkAgent,
    RoundLearner, Mechanism, DatasetLoader, Transport, GossipEngine, Observer, Model,
)  # fmt: skip
