"""The base of every component, below the registry: :class:`ComponentConfig`, the figure
specifications a component declares (:class:`FigureSpec`, :class:`Curve`, :class:`Baseline`)
and :class:`Component` itself, with the table of slots (:data:`SLOTS`) the interfaces of
:mod:`netsim.contracts` fill. What a component is built with (:class:`BuildContext`) is
:mod:`netsim.context`; the scenario sections a class declares (:class:`Section`) and their
order are :mod:`netsim.component_sections`.

This is netsim's contract layer (``docs/architecture.md``): it imports only the foundation and
those two modules, so :mod:`netsim.registry` can build on it and :mod:`netsim.contracts` on
both. Import these names from :mod:`netsim.contracts` (or, in a plugin, :mod:`netsim.api`);
they are defined here only so the registry needs no interface.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

from pydantic import ConfigDict

from netsim.component_sections import Section as Section

# the build context's names, importable from here as before (documented in netsim.context)
from netsim.context import BuildContext as BuildContext
from netsim.context import ChurnProgress as ChurnProgress
from netsim.context import MetricsConfig as MetricsConfig
from netsim.context import OnlineSchedule as OnlineSchedule
from netsim.context import OnlineStates as OnlineStates
from netsim.context import Overlay as Overlay
from netsim.fields import CheckedModel
from netsim.log import TableSchema

#: A class that leaves :attr:`Component.round_form` to its methods.
_UNDECLARED = object()

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "EXACT_ROLES",
    "ROUND_FORMS",
    "SLOTS",
    "Baseline",
    "Component",
    "ComponentConfig",
    "Curve",
    "ExactRun",
    "ExactSupport",
    "FigureSpec",
    "PrivacyReport",
    "round_form",
]

#: Every slot a component can fill: slot → (its interface in :mod:`netsim.contracts`, what it
#: is called in messages). The interfaces declare the same (``slot``, ``slot_title``);
#: ``tests/test_layers.py`` checks that they agree.
SLOTS: dict[str, tuple[str, str]] = {
    "topology": ("TopologyBuilder", "topology"),
    "churn": ("ChurnModel", "churn model"),
    "application": ("GossipApplication", "gossip application"),
    "protocol": ("NetworkProtocol", "protocol"),
    "walk": ("Walk", "walk"),
    "walk_agent": ("WalkAgent", "walk agent"),
    "learner": ("RoundLearner", "round learner"),
    "mechanism": ("Mechanism", "noise mechanism"),
    "dataset": ("DatasetLoader", "data-set loader"),
    "model": ("Model", "model"),
    "transport": ("Transport", "transport"),
    "gossip": ("GossipEngine", "gossip engine"),
    "observer": ("Observer", "observer"),
}


class ComponentConfig(CheckedModel):
    """Base of every component's ``Config``: unknown keys are errors; instances are frozen.

    A registered component's config also has a ``kind`` key holding its registered name (or
    the ``module:Class`` reference it was named by); the registry adds it when the class does
    not declare one.
    """

    # NaN and ±∞ are refused in every number field (a field that means something by ∞ says so)
    model_config = ConfigDict(populate_by_name=True)


class PrivacyReport(Protocol):
    """What the run's manifest reads of a component's privacy accountant
    (:class:`netsim.privacy.accountant.PrivacyAccountant` implements it)."""

    def report(self) -> dict[str, Any]: ...


class Baseline(NamedTuple):
    """A horizontal dashed line in a :class:`Curve`'s panel at the value of ``column`` of the
    one-row table ``table`` of the runs (their mean when the figure has several runs), named
    ``label`` in the legend — e.g. a learning result's yardsticks (principle 9)::

        Baseline("learning_summary", "majority_accuracy", "majority class")

    A plain ``(table, column, label)`` tuple works the same. Runs without the column draw no
    line."""

    table: str
    column: str
    label: str


#: What a :class:`Curve` can be drawn against.
CURVE_AXES = ("time", "round", "point")


@dataclass(frozen=True)
class Curve:
    """One metric of one table against ``axis`` (``time``, ``round`` or ``point``) in one
    panel of a figure."""

    table: str
    metric: str
    axis: str
    ylabel: str
    #: Another metric of the table drawn dashed in the same panel (e.g. a theorem's bound),
    #: named in the legend by ``reference_label``.
    reference: str | None = None
    reference_label: str = ""
    #: Two more metrics of the table (low, high), drawn dotted in each line's colour around
    #: it (e.g. the lowest and highest model's accuracy), named by ``spread_label``.
    spread: tuple[str, str] | None = None
    spread_label: str = ""
    #: Horizontal dashed lines read from other tables of the runs (:class:`Baseline`).
    baselines: tuple[Baseline, ...] = ()

    def __post_init__(self) -> None:
        # ``netsim report`` indexes a table's rows by its declared time or round column, or
        # by grid point: another axis would stop the report with a traceback, so it is
        # refused where the figure is declared
        if self.axis not in CURVE_AXES:
            raise ValueError(
                f"curve {self.table}.{self.metric}: axis {self.axis!r} is not one of "
                f"{', '.join(CURVE_AXES)} (a table's declared time or round column, or the "
                "sweep's grid point)"
            )


@dataclass(frozen=True)
class FigureSpec:
    """A figure ``netsim report`` draws when the runs have its tables: its file, caption, the
    sentence under it, its title and its panels (drawn top to bottom)."""

    file: str
    caption: str
    sentence: str
    title: str
    panels: tuple[Curve, ...]
    log_x_over_decades: float | None = None  # log-scaled x when x spans more decades
    xlabel: str | None = None  # default: "time (<unit of the runs' duration>)" or "round"


#: The two forms of round support (``gossip.mode: rounds``) and the methods each implements:
#: ``fused`` does its own exchanges (:class:`~netsim.protocols.rounds.FusedRoundRule`),
#: ``batched`` has the engine merge its values (:class:`~netsim.protocols.rounds.RoundRule`).
ROUND_FORMS: dict[str, tuple[str, ...]] = {
    "fused": ("round_exchange", "round_tick"),
    "batched": ("round_values", "round_relevant", "round_merge", "round_tick"),
}


def round_form(rule: Any) -> str | None:
    """The round form of a component class (its declared :attr:`Component.round_form`) or of
    any other gossip rule (read from the methods it has): ``fused``, ``batched`` or ``None``
    (exact mode only)."""
    if (isinstance(rule, type) and issubclass(rule, Component)) or isinstance(rule, Component):
        return rule.round_form
    return _form_of_methods(rule)


def _form_of_methods(rule: Any) -> str | None:
    for form, methods in ROUND_FORMS.items():
        if all(hasattr(rule, method) for method in methods):
            return form
    return None


#: What the compiled exact core does with a component that can run beside it
#: (:attr:`ExactSupport.role`): ``transport`` — its compiled handlers decide every message's
#: fate (one per run); ``gossip`` — its ticks and exchanges are compiled (at most one);
#: ``carried`` — an application whose values gossip messages carry, merged by compiled
#: handlers (at most one); ``beside`` — its events stay SimPy events, merged into the core's
#: order, and read the components' state between the core's events.
EXACT_ROLES = ("transport", "gossip", "carried", "beside")


@dataclass(frozen=True)
class ExactSupport:
    """A component's answer to :meth:`Component.exact_support`: whether it can run beside
    the compiled exact core, its ``role`` there (:data:`EXACT_ROLES`) when it can, and why not
    (``reason``, a phrase the run prints) when it cannot."""

    ok: bool
    reason: str = ""
    role: str = "beside"

    def __post_init__(self) -> None:
        if self.ok and self.role not in EXACT_ROLES:
            raise ValueError(f"an exact role is one of {', '.join(EXACT_ROLES)}, not {self.role!r}")
        if not self.ok and not self.reason:
            raise ValueError("an ExactSupport that says no says why (reason)")


@dataclass(frozen=True)
class ExactRun:
    """What a component is asked :meth:`Component.exact_support` about: the run's built
    components by key (in build order)."""

    components: Mapping[str, Component]


class Component(ABC):  # noqa: B024  (the interfaces below declare the abstract methods)
    """Base of every component (see the module docstring). The interfaces below mark what
    their components must implement as abstract methods, so a class that leaves one out is
    named by the registry (and cannot be instantiated)."""

    #: The slot this kind of component fills (set by the interface classes below).
    slot: ClassVar[str] = ""
    #: What the slot is called in messages.
    slot_title: ClassVar[str] = ""
    #: The component's settings; subclasses replace it with their own model.
    Config: ClassVar[type[ComponentConfig]] = ComponentConfig
    #: Every table the component writes.
    tables: ClassVar[tuple[TableSchema, ...]] = ()
    #: The scenario section this class is the shorthand of (:mod:`netsim.component_sections`; a
    #: built-in's, or an installed plug-in's), inherited by the classes of an interface that
    #: declares one.
    section: ClassVar[Section | None] = None
    #: Scenario sections this component needs → why (shown when the section is missing).
    #: Each is a role the scenario may wire to another instance (``uses``).
    requires: ClassVar[Mapping[str, str]] = {}
    #: Roles the component uses when the scenario has them (``ctx.find``) → what for.
    optional: ClassVar[Mapping[str, str]] = {}
    #: Figures of its tables for ``netsim report`` (a table without one gets a generic figure).
    figures: ClassVar[tuple[FigureSpec, ...]] = ()
    #: The round support a component that gossips declares (``gossip.mode: rounds``): one of
    #: :data:`ROUND_FORMS` or ``None`` (exact mode only). A class that does not declare it
    #: gets the form of the methods it implements, once, when it is created; one that
    #: declares a form must implement its methods.
    round_form: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = cls.__dict__.get("round_form", _UNDECLARED)
        if declared is _UNDECLARED:
            cls.round_form = _form_of_methods(cls)
        elif declared is not None:
            missing = [m for m in ROUND_FORMS.get(declared, ("?",)) if not hasattr(cls, m)]
            if declared not in ROUND_FORMS or missing:
                raise TypeError(
                    f"{cls.__qualname__} declares round_form {declared!r} but "
                    + (
                        f"does not implement {', '.join(missing)}"
                        if declared in ROUND_FORMS
                        else f"the forms are {', '.join(map(repr, ROUND_FORMS))}"
                    )
                )

    def __init__(self, config: ComponentConfig, ctx: BuildContext) -> None:
        self.config = config
        self.ctx = ctx

    @classmethod
    def build(cls, config: Any, ctx: BuildContext) -> Component:
        """Make the component of ``config`` (override to build something else)."""
        return cls(config, ctx)

    @classmethod
    def table_schemas(cls, config: Any) -> tuple[TableSchema, ...]:
        """The tables a component of ``config`` writes (``tables`` unless they depend on the
        config, e.g. one column per configured threshold)."""
        return cls.tables

    @classmethod
    def check(cls, config: Any, ctx: BuildContext) -> None:
        """Raise ``ValueError`` naming the keys when ``config`` cannot work in the run ``ctx``
        describes (called while the scenario is validated, before anything is built: ``ctx``
        has the run-wide values and the configs of the instances the component is wired to;
        e.g. a node id beyond ``ctx.nodes``)."""
        return None

    @classmethod
    def check_dependents(cls, config: Any, dependents: list[str]) -> None:
        """Raise ``ValueError`` when the components that require this one's scenario section
        (``dependents``: their labels, in build order) cannot share it, e.g. none or two of
        them train the models of the ``learning`` section (called after :meth:`check`)."""
        return None

    @classmethod
    def check_inputs(cls, config: Any, ctx: BuildContext) -> None:
        """Read and check what a component of ``config`` reads from files or derives from its
        parameters, without running (``netsim validate`` calls it, so it finds every error a
        run would); raise a :class:`~netsim.errors.NetsimError` naming the key. ``ctx`` has the
        topology but no simulation."""
        return None

    @classmethod
    def summary_lines(cls, tables: Mapping[str, pd.DataFrame]) -> list[str]:
        """Lines for the summary ``netsim run`` prints, from a finished run's ``tables``
        (none by default; one-row tables are listed by ``netsim report`` anyway)."""
        return []

    def exact_support(self, run: ExactRun) -> ExactSupport:
        """Can this component run in exact mode beside the compiled exact core
        (:mod:`netsim.protocols.exact`), and if not, why (as a networkx backend answers
        ``can_run``)? Asked once the run is built, of every component; a run whose components
        all answer yes runs its hottest events compiled, and otherwise every event on SimPy (the
        reference), saying why once on the terminal and in the manifest's ``exact_engine``.

        Only a class that answers itself is asked (a subclass of a component that answers must
        answer again: its methods may differ from the compiled handlers). The answer's ``role``
        says what the core does with it (:data:`EXACT_ROLES`): a component whose events stay
        SimPy events and read the state between the core's events (an observer, an agent)
        answers ``ExactSupport(True, role="beside")`` and needs nothing more; one whose handlers
        are compiled hands them over in :meth:`attach_core`. By default: no compiled form."""
        return ExactSupport(False, "it has no compiled form (Component.exact_support)")

    def attach_core(self, core: Any) -> None:
        """Hand this component's events, state and draws to the compiled exact core ``core``
        (called once, after every component answered :meth:`exact_support` yes, in build
        order; the transport first). A component answering ``beside`` has nothing to hand
        over."""
        return None

    def start(self) -> None:
        """Called once every component is built, in build order (schedule first events)."""
        return None

    def finish(self) -> None:
        """Called once when the run reaches its end (write end-of-run tables)."""
        return None

    def privacy_accountant(self) -> PrivacyReport | None:
        """The accountant of a component that releases data about records: the run's
        manifest states the budget it was given and the guarantee it reached."""
        return None
