"""The component registry: which names a scenario's ``kind:`` may take, and their classes.

Built-in components are listed in :data:`BUILTIN` as ``name = module:Class`` entries, in the
form of the entry points through which installed packages add theirs (group
``netsim.components``, as networkx finds its backends), and both are loaded the same way: on
first use, by importing the class. A scenario may also name a class that is registered nowhere
as ``kind: package.module:Class``. A component's slot (topology, churn, walk agent, …) is the
interface it derives from (:mod:`netsim.contracts`); a name is unique within its slot.

Adding a built-in component is its own module plus one line here.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    create_model,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from netsim.component import SLOTS, Component, ComponentConfig
from netsim.component_sections import Declared, Section, section_order
from netsim.errors import ComponentError, did_you_mean

ENTRY_POINT_GROUP = "netsim.components"

#: The built-in components: name = module:Class, exactly as an entry point would give them.
BUILTIN: tuple[str, ...] = (
    "k_out = netsim.network.topology:KOut",
    "random_regular = netsim.network.topology:RandomRegular",
    "erdos_renyi = netsim.network.topology:ErdosRenyi",
    "watts_strogatz = netsim.network.topology:WattsStrogatz",
    "barabasi_albert = netsim.network.topology:BarabasiAlbert",
    "random_geometric = netsim.network.topology:RandomGeometric",
    "ring = netsim.network.topology:Ring",
    "complete = netsim.network.topology:Complete",
    "edge_list = netsim.network.topology:EdgeList",
    "links = netsim.network.links:Network",
    "samples = netsim.network.samples:SystemSampler",
    "gossip = netsim.protocols.gossip:PushPullEngine",
    "always_on = netsim.network.churn:AlwaysOn",
    "synthetic = netsim.network.churn:SyntheticChurnModel",
    "trace = netsim.network.churn:TraceReplay",
    "stunner = netsim.network.churn:StunnerReplay",
    "service = netsim.protocols.walk:RandomWalkService",
    "ideal = netsim.protocols.walk:IdealWalk",
    "visit_counter = netsim.protocols.walk:VisitCounter",
    "sgd = netsim.algorithms.dpsgd.sgd:SGDWalkAgent",
    "broadcast = netsim.protocols.broadcast:Broadcast",
    "gossip_learning = netsim.algorithms.gossip_learning.application:GossipLearning",
    "dola = netsim.algorithms.dola.rounds:DolaRounds",
    "mi_ogd = netsim.algorithms.mi_ogd.rounds:MiOgdRounds",
    "muffliato = netsim.algorithms.muffliato.averaging:MuffliatoAveraging",
    "dsgd = netsim.algorithms.dsgd.learner:DecentralisedSGD",
    "l1 = netsim.privacy.mechanisms:LaplaceMechanism",
    "l2_paper = netsim.privacy.mechanisms:PaperL2Mechanism",
    "k_norm_l2 = netsim.privacy.mechanisms:KNormL2Mechanism",
    "gaussian = netsim.privacy.mechanisms:GaussianMechanism",
    "logreg = netsim.learning.models:LogisticRegression",
    "svm = netsim.learning.models:LinearSVM",
    "mlp = netsim.learning.models:MLP",
    "jax = netsim.learning.jax_models:JaxFactoryModel",
    "jax_mlp = netsim.learning.jax_models:JaxMLP",
    "jax_cnn = netsim.learning.jax_models:JaxCNN",
    "spambase = netsim.learning.datasets.uci:Spambase",
    "segmentation = netsim.learning.datasets.uci:Segmentation",
    "adult = netsim.learning.datasets.uci:Adult",
    "mnist = netsim.learning.datasets.images:Mnist",
    "mnist5k = netsim.learning.datasets.images:Mnist5k",
    "digits = netsim.learning.datasets.scikit:Digits",
    "breast_cancer = netsim.learning.datasets.scikit:BreastCancer",
    "wine = netsim.learning.datasets.scikit:Wine",
    "csv = netsim.learning.datasets.files:CsvFile",
    "libsvm = netsim.learning.datasets.files:LibsvmFile",
)

#: Built-in classes that hold a scenario section but fill no slot a plugin could fill: the
#: ``learning`` section, the training problem (data, model, privacy budget) that walk agents
#: and gossip learning share, and the ``privacy`` section, the threat model. Each declares its
#: :class:`~netsim.component_sections.Section`.
SECTION_ONLY: tuple[str, ...] = (
    "netsim.learning.sgd_agent:SGDAgent",
    "netsim.privacy.threat:ThreatModel",
)

#: What each slot is called in messages.
SLOT_NAMES = {slot: title for slot, (_, title) in SLOTS.items()}

_REFERENCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@dataclass
class _Entry:
    """A registered name: where its class is, and the class once loaded."""

    name: str
    reference: str
    origin: str  # "netsim", the distribution of an entry point, or "scenario"
    cls: type[Component] | None = None
    config: type[ComponentConfig] | None = None
    error: str | None = None


def parse_entry(line: str) -> tuple[str, str]:
    """``name = module:Class`` → (name, reference)."""
    name, _, reference = line.partition("=")
    return name.strip(), reference.strip()


def import_reference(reference: str) -> Any:
    """The object a ``module:attribute`` reference names; :class:`ComponentError` if it
    cannot be imported."""
    if not _REFERENCE.match(reference):
        raise ComponentError(f"{reference!r} is not a class reference; write package.module:Class")
    module_name, _, attribute = reference.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ComponentError(f"{reference}: cannot import module {module_name!r}: {exc}") from None
    except Exception as exc:  # a plugin's own error at import time
        raise ComponentError(
            f"{reference}: importing module {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ComponentError(
                f"{reference}: module {module_name!r} has no attribute {attribute!r}"
            ) from None
    return target


def interface_problem(cls: Any) -> str | None:
    """Why ``cls`` is not a usable component class (``None`` if it is)."""
    interfaces = ", ".join(interface for interface, _ in SLOTS.values())
    if not isinstance(cls, type) or not issubclass(cls, Component):
        return (
            "is not a netsim component: derive it from one of netsim.api's interfaces "
            f"({interfaces})"
        )
    if cls.slot not in SLOT_NAMES:
        return f"derives from netsim.api.Component but from none of its interfaces ({interfaces})"
    config = getattr(cls, "Config", None)
    if not isinstance(config, type) or not issubclass(config, ComponentConfig):
        return "has a Config that is not a netsim.api.ComponentConfig subclass"
    if cls.slot == "walk" and "agent" not in config.model_fields:
        return (
            "has a Config without the 'agent' key every walk has (the walk agent it carries, "
            "walk.agent): derive its Config from netsim.api.WalkConfig"
        )
    if cls.slot == "gossip" and "period" not in config.model_fields:
        return (
            "has a Config without the 'period' key every gossip engine has (Δ, which the "
            "walks and applications wired to it read): declare period: PositiveDuration"
        )
    missing = sorted(cls.__abstractmethods__)
    if missing:
        methods = ", ".join(f"{method}()" for method in missing)
        return f"does not implement {methods} (required of a {SLOT_NAMES[cls.slot]})"
    return None


#: The config classes :func:`config_with_kind` made, by (the component's own config, name):
#: one class per pair in a process, so a config rebuilt from a pickle has the registry's class.
_WITH_KIND: dict[tuple[type[ComponentConfig], str], type[ComponentConfig]] = {}


def config_with_kind(config: type[ComponentConfig], name: str) -> type[ComponentConfig]:
    """``config`` with a ``kind`` key that takes exactly ``name`` (itself, when it declares
    ``kind: Literal[name]`` already).

    The class made here exists only at run time: its module has no attribute of its name (that
    is the component's own config), so pickle cannot find it by reference, and a scenario
    holding its instances could not be sent to another process (a sweep's workers). Its
    instances therefore pickle as "the config of (the component's own config, ``name``)" plus
    their fields (:func:`_rebuild_with_kind`), which any process that can import the component
    rebuilds; the component's own config is pickled by reference, like any class."""
    declared = config.model_fields.get("kind")
    if declared is not None and declared.annotation == Literal[name]:  # type: ignore[valid-type]
        return config
    made = _WITH_KIND.get((config, name))
    if made is None:
        made = create_model(  # type: ignore[call-overload]
            config.__name__,
            __base__=config,
            __module__=config.__module__,
            kind=(Literal[name], ...),  # type: ignore[valid-type]
        )
        made.__reduce_ex__ = _reduce_with_kind  # type: ignore[method-assign, assignment]
        made.__netsim_with_kind__ = (config, name)  # type: ignore[attr-defined]
        _WITH_KIND[config, name] = made
    return made  # type: ignore[no-any-return]


def _reduce_with_kind(self: ComponentConfig, protocol: Any) -> tuple[Any, ...]:
    """Pickle an instance of a :func:`config_with_kind` class by what rebuilds it."""
    config, name = type(self).__netsim_with_kind__  # type: ignore[attr-defined]
    return (_rebuild_with_kind, (config, name), self.__getstate__())


def _rebuild_with_kind(config: type[ComponentConfig], name: str) -> ComponentConfig:
    """An empty instance of ``config_with_kind(config, name)`` (pickle then sets its
    fields, as for any model: the values were validated where the scenario was read)."""
    cls = config_with_kind(config, name)
    return cls.__new__(cls)


@dataclass(frozen=True)
class SectionEntry:
    """A scenario section and the class that declares it: the section takes that class's
    config (``by_kind`` ``never`` or ``optional``) or names a component of ``slot`` by
    ``kind``; ``slot`` is empty for a class of :data:`SECTION_ONLY`. ``builtin`` is false for
    a plug-in's section (installed, or named in a scenario by ``kind: module:Class``)."""

    section: Section
    cls: type[Component]
    slot: str
    builtin: bool = True

    @property
    def key(self) -> str:
        return self.section.key


def _declaring_class(cls: type[Component]) -> type[Component]:
    """The class of ``cls``'s MRO whose own body declares its section (an interface's
    section is inherited by all its classes)."""
    return next(c for c in cls.__mro__ if "section" in vars(c))


def _check_slots(slots: Iterable[str]) -> None:
    """:class:`ComponentError` for a slot that is not one of :data:`SLOT_NAMES`."""
    for slot in slots:
        if slot not in SLOT_NAMES:
            raise ComponentError(
                f"unknown slot {slot!r}{did_you_mean(slot, SLOT_NAMES)}; the slots: "
                f"{', '.join(SLOT_NAMES)}"
            )


def _reference(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


class Registry:
    """Component names by slot, loaded lazily from :data:`BUILTIN` and the entry points."""

    def __init__(self, builtin: Iterable[str] = BUILTIN, *, entry_point_group: str | None =
                 ENTRY_POINT_GROUP) -> None:  # fmt: skip
        self._builtin = tuple(parse_entry(line)[1] for line in builtin)
        self._sections: dict[tuple[bool, tuple[str, ...]], dict[str, SectionEntry]] = {}
        self._pending: list[_Entry] = [
            _Entry(*parse_entry(line), origin="netsim") for line in builtin
        ]
        self._group = entry_point_group
        self._entry_points_read = entry_point_group is None
        self._by_slot: dict[str, dict[str, _Entry]] = {slot: {} for slot in SLOT_NAMES}
        self._failed: dict[str, _Entry] = {}  # name -> entry that could not be loaded
        #: (slot, name) registered by two classes -> the two references (an error only for
        #: a scenario that names it)
        self._clashes: dict[tuple[str, str], str] = {}

    # --- registration ---------------------------------------------------------------------

    def _add(self, entry: _Entry) -> None:
        assert entry.cls is not None
        slot = entry.cls.slot
        names = self._by_slot[slot]
        clash = self._clashes.get((slot, entry.name))
        existing = names.get(entry.name)
        if clash is not None or (existing is not None and existing.cls is not entry.cls):
            # the name means nothing now; only a scenario that uses it is refused (lookup)
            first = clash or f"{existing.reference} ({existing.origin})"  # type: ignore[union-attr]
            self._clashes[slot, entry.name] = f"{first} and {entry.reference} ({entry.origin})"
            names.pop(entry.name, None)
            return
        entry.config = config_with_kind(entry.cls.Config, entry.name)
        names[entry.name] = entry

    def _load(self, entry: _Entry) -> None:
        try:
            cls = import_reference(entry.reference)
        except ComponentError as exc:
            entry.error = str(exc)
            self._failed[entry.name] = entry
            return
        problem = interface_problem(cls)
        if problem is not None:
            entry.error = f"{entry.reference} {problem}"
            self._failed[entry.name] = entry
            return
        entry.cls = cls
        self._add(entry)

    def refresh_entry_points(self) -> None:
        """Read the entry-point group again (after a package was installed in this
        process, or a test put one on ``sys.path``); names already registered stay."""
        self._entry_points_read = self._group is None
        self._failed.clear()
        self._sections.clear()

    def _load_all(self) -> None:
        if not self._entry_points_read:
            self._entry_points_read = True
            for point in entry_points(group=self._group):
                origin = point.dist.name if point.dist is not None else "entry point"
                known = [names.get(point.name) for names in self._by_slot.values()]
                if any(e is not None and e.reference == point.value for e in known):
                    continue
                self._pending.append(_Entry(point.name, point.value, origin))
        while self._pending:
            self._load(self._pending.pop(0))

    # --- look-up --------------------------------------------------------------------------

    def names(self, slot: str) -> tuple[str, ...]:
        """The registered names of ``slot``, in registration order."""
        _check_slots((slot,))
        self._load_all()
        return tuple(self._by_slot[slot])

    def lookup(self, slots: tuple[str, ...], kind: str) -> tuple[type[Component],
                                                                type[ComponentConfig]]:  # fmt: skip
        """The class and config model of ``kind`` in one of ``slots``; a ``module:Class``
        reference is imported and registered under itself. :class:`ComponentError` says what
        is wrong and lists the names that are allowed."""
        _check_slots(slots)
        self._load_all()
        for slot in slots:
            clash = self._clashes.get((slot, kind))
            if clash is not None:
                raise ComponentError(
                    f"{kind!r} names two {SLOT_NAMES[slot]} components, {clash}: uninstall "
                    "one, or name the class as package.module:Class"
                )
            entry = self._by_slot[slot].get(kind)
            if entry is not None:
                assert entry.cls is not None and entry.config is not None
                return entry.cls, entry.config
        if ":" in kind:
            cls = import_reference(kind)
            problem = interface_problem(cls)
            if problem is not None:
                raise ComponentError(f"{kind} {problem}")
            if cls.slot not in slots:
                raise ComponentError(
                    f"{kind} is a {SLOT_NAMES[cls.slot]}; here a "
                    f"{' or '.join(SLOT_NAMES[s] for s in slots)} is expected"
                )
            self._add(_Entry(kind, kind, "scenario", cls))
            return self.lookup(slots, kind)
        failed = self._failed.get(kind)
        if failed is not None:
            raise ComponentError(f"{kind!r} is registered but cannot be loaded: {failed.error}")
        names = [name for slot in slots for name in self._by_slot[slot]]
        allowed = ", ".join(repr(name) for name in names)
        raise ComponentError(
            f"unknown value {kind!r}{did_you_mean(kind, names)}; allowed values: {allowed}, or "
            "a class as package.module:Class"
        )

    def sections(
        self, references: Iterable[str] = (), *, plugins: bool = True
    ) -> dict[str, SectionEntry]:
        """The scenario sections, by key, in build order
        (:func:`netsim.component_sections.section_order`): those the built-in classes declare,
        with ``plugins`` those of the installed components (entry points), and those of the
        classes ``references`` names (``module:Class``: a section a scenario names by its
        ``kind``). What the schema assembles its top-level keys from and the planner builds in
        that order. :class:`~netsim.errors.SectionError` names the declarations that clash
        (one key twice, an ``after`` naming no section, a circle)."""
        wanted = (plugins, tuple(dict.fromkeys(references)))
        found = self._sections.get(wanted)
        if found is None:
            classes = [import_reference(ref) for ref in (*self._builtin, *SECTION_ONLY)]
            builtin = len(classes)
            if plugins:
                self._load_all()
                classes += [
                    entry.cls
                    for names in self._by_slot.values()
                    for entry in names.values()
                    if entry.origin not in ("netsim", "scenario") and entry.cls is not None
                ]
            classes += [self.lookup(tuple(SLOT_NAMES), ref)[0] for ref in wanted[1]]
            entries: dict[type[Component], SectionEntry] = {}
            for index, cls in enumerate(classes):
                section = getattr(cls, "section", None)
                if section is None:
                    continue
                owner = _declaring_class(cls)
                is_builtin = index < builtin or owner.__module__.startswith("netsim.")
                entries.setdefault(owner, SectionEntry(section, owner, owner.slot, is_builtin))
            by_owner = {_reference(owner): entry for owner, entry in entries.items()}
            ordered = section_order([Declared(entry.section, by) for by, entry in by_owner.items()])
            found = {item.section.key: by_owner[item.by] for item in ordered}
            self._sections[wanted] = found
        return found

    def entries(self) -> list[tuple[str, str, str, str]]:
        """(slot, name, reference, origin) of every registered component, for listings."""
        self._load_all()
        return [
            (slot, entry.name, entry.reference, entry.origin)
            for slot, names in self._by_slot.items()
            for entry in names.values()
        ]


#: The registry scenarios are validated and built with.
REGISTRY = Registry()


# --- config fields that name a component ------------------------------------------------------


def _kind_error(kind_type: str, message: str, loc: tuple[str, ...], given: Any) -> ValidationError:
    return ValidationError.from_exception_data(
        "component",
        [InitErrorDetails(type=PydanticCustomError(kind_type, message), loc=loc, input=given)],
    )


def validate_component_config(
    value: Any, slots: tuple[str, ...], context: Any, registry: Registry | None = None
) -> ComponentConfig:
    """``value`` (plain data with a ``kind`` key) validated by the config model of the
    component it names in ``slots``; errors keep the path below the field."""
    registry = registry or REGISTRY
    if isinstance(value, ComponentConfig):
        return value
    if not isinstance(value, dict):
        raise _kind_error("component_mapping", "expected a mapping with a 'kind' key", (), value)
    kind = value.get("kind")
    if kind is None:
        allowed = ", ".join(repr(name) for slot in slots for name in registry.names(slot))
        raise _kind_error(
            "missing_kind", f"needs a 'kind' key; allowed values: {allowed}", (), value
        )
    if not isinstance(kind, str):
        raise _kind_error("unknown_kind", "kind must be a name", ("kind",), kind)
    try:
        _, config = registry.lookup(slots, kind)
    except ComponentError as exc:
        raise _kind_error("unknown_kind", str(exc), ("kind",), kind) from None
    return config.model_validate(value, context=context)


def component_field(*slots: str) -> Any:
    """The annotation of a config field that holds a component of one of ``slots``, given by
    its ``kind`` (a registered name or ``package.module:Class``)."""

    def validate(value: Any, info: ValidationInfo) -> Any:
        return validate_component_config(value, slots, info.context)

    return Annotated[Any, PlainValidator(validate), WithJsonSchema({"type": "object"})]


@dataclass(frozen=True)
class SectionDefault:
    """Marks a :func:`section_field`: the config model of the section when it names no
    ``kind`` (error messages list that model's keys)."""

    model: type[ComponentConfig]


def section_field(slot: str, default: type[ComponentConfig]) -> Any:
    """The annotation of a fixed section that holds the built-in component of ``slot`` (a
    mapping of ``default``'s keys, the ``links`` and ``gossip`` sections) or, with a
    ``kind`` key, any component of that slot (its settings validated by its own model)."""

    def validate(value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, dict) and "kind" not in value:
            return default.model_validate(value, context=info.context)
        return validate_component_config(value, (slot,), info.context)

    return Annotated[
        Any, PlainValidator(validate), WithJsonSchema({"type": "object"}), SectionDefault(default)
    ]


def own_section_field(entry: SectionEntry) -> Any:
    """The annotation of a plug-in's section read by its own config (``by_kind`` ``never``):
    a mapping of its keys, which may name the declaring class by ``kind`` (its registered
    name or ``package.module:Class``: how a scenario uses a plug-in that is not installed)."""
    owner = entry.cls

    def validate(value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, dict) or "kind" not in value:
            return owner.Config.model_validate(value, context=info.context)
        kind = value["kind"]
        if not isinstance(kind, str):
            raise _kind_error("unknown_kind", "kind must be a name", ("kind",), kind)
        try:
            cls, config = REGISTRY.lookup((owner.slot,), kind)
        except ComponentError as exc:
            raise _kind_error("unknown_kind", str(exc), ("kind",), kind) from None
        if cls is not owner:
            raise _kind_error(
                "unknown_kind",
                f"the {entry.key} section is {_reference(owner)}'s; its kind names that class "
                f"(or leave kind out), not {kind!r}",
                ("kind",),
                kind,
            )
        return config.model_validate(value, context=info.context)

    return Annotated[
        Any, PlainValidator(validate), WithJsonSchema({"type": "object"}),
        SectionDefault(owner.Config),
    ]  # fmt: skip


def component_name(*slots: str, also: tuple[str, ...] = ()) -> Any:
    """The annotation of a config field that names a component of one of ``slots`` by a plain
    string (a registered name or ``package.module:Class``), for components without settings
    such as noise mechanisms and data-set loaders; the names in ``also`` are accepted too (a
    section's own generators). An unknown name lists the allowed ones."""

    def validate(value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(f"expected a name, got {value!r}")
        if value in also:
            return value
        try:
            REGISTRY.lookup(slots, value)
        except ComponentError as exc:
            message = str(exc)
            if also and message.startswith("unknown value"):
                names = ", ".join(repr(name) for name in also)
                message = message.replace("allowed values: ", f"allowed values: {names}, ", 1)
            raise ValueError(message) from None
        return value

    return Annotated[str, AfterValidator(validate)]


def component_spec(slot: str) -> Any:
    """The annotation of a config field that names a component of ``slot`` either by a plain
    string (a registered name or ``package.module:Class``, kept as the string) or as a mapping
    with ``kind`` and the component's settings (validated by its ``Config``, errors at the
    user's key path): ``noise: k_norm_l2`` or ``noise: {kind: gaussian, calibration: classic}``.
    Build it with :func:`build_spec`; :func:`spec_kind` is its name."""
    by_name = component_name(slot)

    def validate(value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str):
            return _NAME_ADAPTERS.setdefault(slot, TypeAdapter(by_name)).validate_python(value)
        return validate_component_config(value, (slot,), info.context)

    return Annotated[
        Any,
        PlainValidator(validate),
        WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "object"}]}),
    ]


_NAME_ADAPTERS: dict[str, TypeAdapter[Any]] = {}


def spec_kind(spec: str | ComponentConfig) -> str:
    """The name of a :func:`component_spec` value (the string, or the mapping's ``kind``)."""
    return spec if isinstance(spec, str) else str(spec.kind)  # type: ignore[attr-defined]


def spec_class(slot: str, spec: str | ComponentConfig) -> type[Component]:
    """The component class of a :func:`component_spec` value."""
    cls, _ = REGISTRY.lookup((slot,), spec_kind(spec))
    return cls


def build_spec(slot: str, spec: str | ComponentConfig, ctx: Any = None) -> Component:
    """The component of a :func:`component_spec` value: a name built from its default
    config, a mapping from its own settings. ``ctx`` is ``None`` outside a run."""
    if isinstance(spec, str):
        return named_component(slot, spec, ctx)
    return spec_class(slot, spec).build(spec, ctx)


def named_component(
    slot: str, name: str, ctx: Any = None, settings: Mapping[str, Any] | None = None
) -> Component:
    """The component registered as ``name`` in ``slot`` (or ``package.module:Class``), built
    from its config with ``settings`` (default: none, for components named by a plain string,
    such as noise mechanisms and data-set loaders). ``ctx`` is ``None`` outside a run."""
    cls, config = REGISTRY.lookup((slot,), name)
    return cls.build(config(kind=name, **(settings or {})), ctx)


def component_class(config: ComponentConfig, slots: tuple[str, ...]) -> type[Component]:
    """The component class of a validated config (by its ``kind``)."""
    cls, _ = REGISTRY.lookup(slots, config.kind)  # type: ignore[attr-defined]
    return cls
