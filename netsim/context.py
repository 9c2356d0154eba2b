"""What a component is built with: the :class:`BuildContext` (the run-wide values, its
random streams and tables, and the instances it is wired to, nothing else of the scenario),
the ``metrics`` section's config, and the protocols of the building blocks' objects it reads
(:class:`Overlay`, :class:`OnlineStates`, :class:`OnlineSchedule`, :class:`ChurnProgress`).

The bottom of the contract layer with :mod:`netsim.component_sections`
(``docs/architecture.md``): it imports only the foundation. Import these names from
:mod:`netsim.contracts` (or, in a plugin, :mod:`netsim.api`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
from pydantic import ConfigDict

from netsim.distributions import PositiveDuration
from netsim.fields import CheckedModel
from netsim.log import EventTable, TableSchema

if TYPE_CHECKING:
    from netsim.rng import RandomStreams
    from netsim.sim import Simulation

__all__ = [
    "BuildContext",
    "ChurnProgress",
    "MetricsConfig",
    "OnlineSchedule",
    "OnlineStates",
    "Overlay",
]


class MetricsConfig(CheckedModel):
    """The scenario's ``metrics`` section: what every component samples and keeps, run-wide."""

    model_config = ConfigDict(populate_by_name=True)

    sample_every: PositiveDuration = 60.0
    # one privacy_ledger row per charge, or per-record totals only (privacy_records)
    privacy_ledger: Literal["charges", "totals"] = "charges"
    # tables to keep no rows of (high-rate tables of long runs, e.g. walk_steps)
    omit_tables: tuple[str, ...] = ()


class Overlay(Protocol):
    """The run's overlay as a component reads it: who can send to whom, as compressed sparse
    rows (:class:`netsim.network.topology.Topology` implements it)."""

    n: int
    indptr: np.ndarray
    indices: np.ndarray
    directed: bool

    def neighbours(self, node: int) -> np.ndarray: ...

    def degrees(self) -> np.ndarray: ...


class OnlineStates(Protocol):
    """Who is online, and each node's session count (its epoch), as arrays by node id
    (:class:`netsim.network.nodes.NodeStates` implements it)."""

    is_online: np.ndarray
    epochs: np.ndarray


class OnlineSchedule(Protocol):
    """When each node is online: its state at time 0 and every later transition, sorted by
    time (:class:`netsim.network.churn.ChurnSchedule` implements it)."""

    initially_online: np.ndarray
    time: np.ndarray
    node: np.ndarray
    online: np.ndarray


class ChurnProgress(Protocol):
    """The run's churn replay as a component reads it
    (:class:`netsim.network.churn.ChurnReplay` implements it): the transitions applied so far
    and the whole schedule it replays."""

    transitions_applied: int
    schedule: OnlineSchedule


@dataclass
class BuildContext:
    """What a component is given when it is built, and what it may see of the run.

    ``key`` is where the component sits in the scenario (``walk``, ``walk.agent``,
    ``components.averaging``); its random streams are namespaced by it, so adding a component
    never changes another's draws. Of the scenario it sees the run-wide values (``nodes``,
    ``duration``, ``metrics``), its own config (given to it) and the instances it is wired to
    (:meth:`require`, :meth:`find`, their configs by :meth:`config_of`), nothing else.
    ``sim`` and ``network`` are ``None`` while ``netsim validate`` checks a scenario without
    running it (only topology and churn components are built then), and while a scenario is
    checked (:meth:`Component.check`: then nothing is built).
    """

    key: str
    #: N: the number of nodes (node ids are 0..N−1).
    nodes: int
    #: The run's length in simulated seconds.
    duration: float
    streams: RandomStreams | None
    warnings: list[str]
    #: The scenario's ``metrics`` section (``sample_every``, ``privacy_ledger``, …).
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    sim: Simulation | None = None
    #: The transport the component sends through (a :class:`netsim.contracts.Transport`).
    network: Any = None
    topology: Overlay | None = None
    #: Whom the component is wired to: each role it declares (a key of its ``requires`` or
    #: ``optional``, ``transport``) → the key of the instance that fills it, as the plan
    #: resolved it (the instance its ``uses`` names, else the section of the role's name).
    uses: Mapping[str, str] = field(default_factory=dict)
    #: The validated config of each instance the component is wired to, by key (what it may
    #: read of them while validating, when they are not built: :meth:`config_of`).
    configs: Mapping[str, Any] = field(default_factory=dict)
    #: The run's node states (who is online), for the transport built on them.
    node_states: OnlineStates | None = None
    #: The run's churn replay (``transitions_applied`` counts the joins and leaves so far).
    churn: ChurnProgress | None = None
    #: The instances built so far, by key (given by the build, not kept): the context keeps
    #: only those of :attr:`uses`, which :meth:`require` and :meth:`find` return.
    built: InitVar[Mapping[str, Any] | None] = None

    def __post_init__(self, built: Mapping[str, Any] | None) -> None:
        wired = set(self.uses.values())
        self._wired: dict[str, Any] = {k: v for k, v in (built or {}).items() if k in wired}

    def stream(self, name: str | None = None) -> np.random.Generator:
        """The component's random stream ``<key>.<name>`` (``<key>`` itself without a name)."""
        assert self.streams is not None, "a scenario's checks draw nothing"
        return self.streams.get(self.stream_name(name))

    def integer_seed(self, name: str | None = None) -> int:
        """A 32-bit seed from the stream ``<key>.<name>``, for libraries that want one."""
        assert self.streams is not None, "a scenario's checks draw nothing"
        return self.streams.integer_seed(self.stream_name(name))

    def stream_name(self, name: str | None = None) -> str:
        return self.key if name is None else f"{self.key}.{name}"

    def require(self, name: str) -> Any:
        """The built component this one is wired to in the role ``name`` (``gossip``,
        ``learning``, …): the instance its ``uses`` names, else the scenario section of that
        name. It is built before this one when this component lists it in ``requires``."""
        component = self.find(name)
        if component is None:
            raise KeyError(f"{self.key}: component {name!r} is not built (list it in requires)")
        return component

    def find(self, name: str) -> Any:
        """Like :meth:`require`, but ``None`` when the scenario has no such instance (for the
        roles a component lists in ``optional``). A role the component does not declare
        (``requires``, ``optional``, ``transport``) finds nothing: a component sees only
        what it is wired to."""
        key = self.uses.get(name)
        return None if key is None else self._wired.get(key)

    def config_of(self, name: str) -> Any:
        """The config of the instance this component is wired to in the role ``name`` (the
        one its ``uses`` names, else the scenario section of that name), ``None`` when there
        is none: what it may read of that instance while the scenario is validated."""
        key = self.uses.get(name)
        return None if key is None else self.configs.get(key)

    def table(self, schema: TableSchema) -> EventTable:
        """The run's event table of ``schema`` (declare it in the component's ``tables``)."""
        assert self.sim is not None, "tables are written while running, not while validating"
        return self.sim.log.table(schema)

    def warn(self, message: str) -> None:
        """A warning shown after the run and kept in the run's manifest."""
        self.warnings.append(f"{self.key}: {message}")


# The instances built so far are an argument of the constructor, not an attribute: a
# component reaches another only through require() and find() (dataclasses leave an InitVar's
# default on the class).
del BuildContext.built
