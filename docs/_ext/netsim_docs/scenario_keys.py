"""The scenario-key reference, read from the pydantic models that validate a scenario.

Every table row comes from a model field: its key (the alias where there is one), its type
(with netsim's unit parsers named as units), its default and the constraints declared on it.
Checks made by model validators are not visible here; the prose of ``scenarios/README.md``
states them. The models are found as ``tests/test_docs.py`` finds them: the
:class:`~netsim.scenario.schema.Scenario` schema, the fixed sections of
:mod:`netsim.scenario.build` and every component registered by netsim itself.
"""

from __future__ import annotations

import inspect
import json
import math
import types
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from netsim_docs.markdown import code, docstring, link, rst, slug, table, target

#: netsim's unit parsers (``BeforeValidator`` functions) and the unit they make of a number.
UNIT_PARSERS = {"parse_duration": "duration", "parse_size": "size", "parse_bandwidth": "bandwidth"}
#: Plain Python types as a scenario author sees them.
PLAIN_TYPES = {
    int: "integer",
    float: "number",
    str: "text",
    bool: "boolean",
    type(None): "`null`",
}
#: Where a scenario names a component of each slot (as docs/components.md's table says).
SLOT_PLACES = {
    "topology": "topology.kind",
    "churn": "churn.kind",
    "walk": "walk.kind, components.<name>.kind",
    "walk_agent": "walk.agent.kind",
    "application": "components.<name>.kind",
    "protocol": "components.<name>.kind",
    "learner": "components.<name>.kind",
    "transport": "links.kind, components.<name>.kind",
    "gossip": "gossip.kind, components.<name>.kind",
    "observer": "components.<name>.kind",
    "mechanism": "learning.noise",
    "dataset": "learning.dataset.name, dola.data.name, mi_ogd.data.name",
}
#: Base classes whose docstrings describe every model, not one section.
GENERIC_BASES = ("BaseModel", "CheckedModel", "StrictModel", "ComponentConfig")


#: The reference label and the title of the page of each documented model.
Labels = dict[type, tuple[str, str]]


@dataclass
class ModelPage:
    """One model documented under a heading: where it sits and what to say about it."""

    label: str
    title: str
    model: type[BaseModel]
    level: int
    owner: type | None = None  # the component class whose config this is, if any
    skip: tuple[str, ...] = ()  # keys the heading already states (a component's kind)
    see: str = ""  # the label of the page that documents the same component already
    children: list[ModelPage] = field(default_factory=list)


# --- reading annotations -----------------------------------------------------------------------


def flat_metadata(items: Sequence[Any]) -> list[Any]:
    """``items`` with every :class:`FieldInfo` replaced by its own metadata."""
    flat: list[Any] = []
    for item in items:
        flat.extend(item.metadata if isinstance(item, FieldInfo) else [item])
    return flat


def unwrap(annotation: Any, metadata: Sequence[Any] = ()) -> tuple[Any, list[Any]]:
    """The type under any ``Annotated`` layers, and all their metadata."""
    found = list(metadata)
    while typing.get_origin(annotation) is typing.Annotated:
        annotation, *extra = typing.get_args(annotation)
        found.extend(flat_metadata(extra))
    return annotation, flat_metadata(found)


def is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (Union, types.UnionType)


def is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def closure_value(function: Any, name: str) -> Any:
    """A variable the closure ``function`` was made with (``None`` if there is none)."""
    try:
        return inspect.getclosurevars(function).nonlocals.get(name)
    except (TypeError, ValueError):
        return None


def validator_kind(metadata: Sequence[Any]) -> str | None:
    """What a validator in ``metadata`` makes of the value: a unit, or a component."""
    for item in metadata:
        function = getattr(item, "func", None)
        name = getattr(function, "__name__", "")
        qualname = getattr(function, "__qualname__", "")
        if name in UNIT_PARSERS:
            return UNIT_PARSERS[name]
        slots = closure_value(function, "slots") if function is not None else None
        if qualname.startswith("section_field."):
            slot = closure_value(function, "slot")
            return "mapping, or mapping with `kind`: " + slot_link(slot)
        if slots and qualname.startswith("component_field."):
            return "mapping with `kind`: " + " or ".join(slot_link(slot) for slot in slots)
        if slots and qualname.startswith("component_name."):
            also = closure_value(function, "also") or ()
            names = [*(code(name) for name in also), *(slot_link(slot) for slot in slots)]
            return "name: " + " or ".join(names)
    return None


def slot_link(slot: str) -> str:
    """A link to the components of ``slot``."""
    from netsim.registry import SLOT_NAMES

    return link(SLOT_NAMES.get(slot, slot), slug("slot", slot))


def type_text(annotation: Any, metadata: Sequence[Any], labels: Labels) -> str:
    """The type of a field as a scenario author writes it, with links to nested sections."""
    annotation, metadata = unwrap(annotation, metadata)
    special = validator_kind(metadata)
    if special is not None:
        return special
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin is Literal:
        return "one of " + ", ".join(code(value) for value in arguments)
    if is_union(annotation):
        members = [a for a in arguments if a is not type(None)]
        texts = list(dict.fromkeys(type_text(a, (), labels) for a in members))
        if all(is_model(a) for a in members) and len(members) > 1:
            text = "one of " + ", ".join(texts)
        else:
            text = " or ".join(texts)
        return text + (" or `null`" if len(members) < len(arguments) else "")
    if origin in (tuple, list):
        return "list of " + type_text(arguments[0], (), labels) if arguments else "list"
    if origin is dict:
        key, value = arguments
        return f"mapping of {type_text(key, (), labels)} to {type_text(value, (), labels)}"
    if annotation is Any:
        return "any value"
    if is_model(annotation):
        label, title = labels.get(annotation, ("", ""))
        return f"mapping ({link(title, label)})" if label else "mapping"
    if annotation in PLAIN_TYPES:
        return PLAIN_TYPES[annotation]
    if isinstance(annotation, type):
        return "path" if annotation.__name__.endswith("Path") else annotation.__name__
    return str(annotation)


def number(value: object) -> str:
    """A bound as people write it: 2^63 rather than its 19 digits."""
    if isinstance(value, int) and value > 2**32 and (value & (value - 1)) == 0:
        return f"2^{value.bit_length() - 1}"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def constraint_texts(metadata: Sequence[Any]) -> list[str]:
    """The declared constraints in ``metadata``: bounds, lengths, patterns, infinities."""
    texts = []
    for item in metadata:
        if isinstance(item, annotated_types.Gt):
            texts.append(f"> {number(item.gt)}")
        elif isinstance(item, annotated_types.Ge):
            texts.append(f"≥ {number(item.ge)}")
        elif isinstance(item, annotated_types.Lt):
            texts.append(f"< {number(item.lt)}")
        elif isinstance(item, annotated_types.Le):
            texts.append(f"≤ {number(item.le)}")
        elif isinstance(item, annotated_types.MinLen):
            texts.append(f"at least {item.min_length} long")
        elif isinstance(item, annotated_types.MaxLen):
            texts.append(f"at most {item.max_length} long")
        if getattr(item, "pattern", None):
            texts.append(f"matches {code(item.pattern)}")
        if getattr(item, "allow_inf_nan", None) is True:
            texts.append("`.inf` allowed")
    return texts


def constraints(annotation: Any, metadata: Sequence[Any]) -> str:
    """The constraints of a field, including those on the items of a list or mapping."""
    annotation, metadata = unwrap(annotation, metadata)
    texts = constraint_texts(metadata)
    members = typing.get_args(annotation) if is_union(annotation) else ()
    for member in members:
        texts += constraint_texts(unwrap(member)[1])
    origin = typing.get_origin(annotation)
    arguments = [a for a in typing.get_args(annotation) if a is not Ellipsis]
    names = ("key", "value") if origin is dict else ("item",) * len(arguments)
    if origin in (tuple, list, dict):
        for name, argument in zip(names, arguments, strict=True):
            inner = constraints(argument, ())
            if inner:
                texts.append(f"each {name}: {inner}")
    return "; ".join(dict.fromkeys(texts))


def default_text(info: FieldInfo) -> str:
    """A field's default as YAML-like text, or **required**."""
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return "**required**"
    else:
        value = info.default
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True)
    elif isinstance(value, tuple):
        value = list(value)
    if isinstance(value, float) and math.isinf(value):
        return code(".inf")
    return code(json.dumps(value, ensure_ascii=False, default=str))


# --- the pages ---------------------------------------------------------------------------------


def field_rows(page: ModelPage, labels: Labels) -> list[list[str]]:
    rows = []
    for name, info in page.model.model_fields.items():
        key = info.alias or name
        if key in page.skip:
            continue
        rows.append([
            code(key),
            type_text(info.annotation, info.metadata, labels),
            default_text(info),
            constraints(info.annotation, info.metadata),
            info.description or "",
        ])  # fmt: skip
    return rows


def model_docstring(model: type[BaseModel]) -> str:
    """The docstring of ``model`` or of the nearest base that is not a generic one."""
    for cls in model.__mro__:
        if cls.__name__ in GENERIC_BASES:
            return ""
        text = docstring(cls)
        if text:
            return text
    return ""


def nested_models(model: type[BaseModel]) -> Iterator[tuple[str, type[BaseModel]]]:
    """(key, model) of every field of ``model`` that holds one nested section (not a union
    of variants, which is documented once on its own)."""
    from netsim.registry import SectionDefault

    for name, info in model.model_fields.items():
        annotation, metadata = unwrap(info.annotation, info.metadata)
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if is_union(annotation) and len(members) == 1:
            annotation, metadata = unwrap(members[0], metadata)
        default = next((m.model for m in metadata if isinstance(m, SectionDefault)), None)
        if default is not None:  # a section of a built-in component, or another by kind
            annotation = default
        if is_model(annotation):
            yield info.alias or name, annotation


def variant_models(model: type[BaseModel]) -> Iterator[type[BaseModel]]:
    """Models that are variants of a union in some field of ``model`` (distributions)."""
    for info in model.model_fields.values():
        annotation = unwrap(info.annotation)[0]
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if is_union(annotation) and len(members) > 1 and all(is_model(a) for a in members):
            yield from members


def section_page(path: str, model: type[BaseModel], level: int, owner: type | None) -> ModelPage:
    """The page of the section at ``path`` and, below it, of its nested sections."""
    page = ModelPage(slug("key", path), code(path), model, level, owner)
    for key, nested in nested_models(model):
        page.children.append(section_page(f"{path}.{key}", nested, level + 1, None))
    return page


def all_pages() -> tuple[list[tuple[str, str, list[ModelPage]]], Labels]:
    """Every documented model, grouped into (heading, introduction, pages), and the label of
    each model for links."""
    from netsim.registry import REGISTRY, SLOT_NAMES
    from netsim.scenario.schema import Scenario

    fixed = {  # the sections that take their declaring class's config (the rest name a kind)
        key: entry.cls
        for key, entry in REGISTRY.sections().items()
        if entry.section.by_kind != "always"
    }
    top = ModelPage("key-scenario", "", Scenario, 2)  # its table goes right under the group
    sections = [
        section_page(key, nested, 3, fixed.get(key)) for key, nested in nested_models(Scenario)
    ]
    variants: list[type[BaseModel]] = []
    for page in iter_pages(sections):
        variants += [v for v in variant_models(page.model) if v not in variants]
    variant_pages = []
    for variant in variants:
        tag_key, tag = next(
            (info.alias or name, typing.get_args(info.annotation)[0])
            for name, info in variant.model_fields.items()
            if typing.get_origin(info.annotation) is Literal
        )
        title = f"{code(f'{tag_key}: {tag}')}"
        variant_pages.append(
            ModelPage(slug("variant", tag_key, tag), title, variant, 3, skip=(tag_key,))
        )
    # one page per class: several names may share one (the data-set loaders)
    by_class: dict[tuple[str, type], list[tuple[str, type[BaseModel]]]] = {}
    for slot, name, _, origin in REGISTRY.entries():
        if origin != "netsim":
            continue  # installed plugins are the environment's, not netsim's documentation
        cls, config = REGISTRY.lookup((slot,), name)
        by_class.setdefault((slot, cls), []).append((name, config))
    by_slot: dict[str, list[ModelPage]] = {}
    for (slot, cls), named in by_class.items():
        name, config = named[0]
        title = ", ".join(code(name) for name, _ in named)
        page = ModelPage(slug("component", slot, name), title, config, 4, cls, ("kind",))
        section = next((key for key, owner in fixed.items() if owner is cls), None)
        if section is not None:  # also a fixed section: its keys are documented there
            page.see = slug("key", section)
            by_slot.setdefault(slot, []).append(page)
            continue
        for key, nested in nested_models(config):
            page.children.append(section_page(f"{name}.{key}", nested, 5, None))
        by_slot.setdefault(slot, []).append(page)
    slot_pages = []
    for slot, pages in by_slot.items():
        place = SLOT_PLACES.get(slot, "")
        title = f"{SLOT_NAMES[slot].capitalize()} components" + (
            f" ({code(place)})" if place else ""
        )
        slot_page = ModelPage(slug("slot", slot), title, BaseModel, 3, children=pages)
        slot_pages.append(slot_page)
    groups = [
        ("Top level", "The keys of a scenario file.", [top]),
        ("Sections", "Each mapping-valued key of the top level, with its nested sections.",
         sections),
        ("Variants", "The variants of a key that takes one of several mappings, chosen by its "
         "tag key (the duration distributions of `links.delay`, `churn.online` and "
         "`churn.offline`).", variant_pages),
        ("Components", "Every component netsim registers, by slot: the `kind` (or name) that "
         "selects it and its own keys. Installed packages add theirs to the same slots.",
         slot_pages),
    ]  # fmt: skip
    labels: Labels = {}
    for _, _, pages in groups:
        for page in iter_pages(pages):
            if page.model is not BaseModel:
                labels.setdefault(page.model, (page.label, page.title))
    return groups, labels


def iter_pages(pages: Sequence[ModelPage]) -> Iterator[ModelPage]:
    for page in pages:
        yield page
        yield from iter_pages(page.children)


def render_page(page: ModelPage, labels: Labels) -> list[str]:
    """The heading, docstrings and key table of ``page``, then those of its children."""
    parts = [target(page.label)]
    if page.title:
        parts.append(f"{'#' * page.level} {page.title}\n")
    if page.see:
        parts.append(
            f"Component class {code(qualified(page.owner or object))}; its keys are those of "
            f"the {link('section', page.see)} of the same name, plus `kind`.\n"
        )
    elif page.model is not BaseModel:  # BaseModel marks a heading that only groups children
        if page.owner is not None:
            parts.append(f"Component class {api_link(page.owner)}.\n")
            owner_doc = docstring(page.owner)
            if owner_doc:
                parts.append(docstring_block(owner_doc, page.owner))
        config_doc = model_docstring(page.model)
        if config_doc and config_doc != docstring(page.owner or object):
            parts.append(f"Config {api_link(page.model)}:\n")
            parts.append(docstring_block(config_doc, page.model))
        rows = field_rows(page, labels)
        if rows:
            header = ["key", "type", "default", "constraints", "description"]
            if not any(row[-1] for row in rows):
                header, rows = header[:-1], [row[:-1] for row in rows]
            parts.append(table(header, rows))
        else:
            parts.append("No keys of its own.\n")
    for child in page.children:
        parts += render_page(child, labels)
    return parts


def qualified(obj: type) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def api_link(obj: type) -> str:
    """A link to the class in the Python API pages (plain code where autodoc skipped it)."""
    return f"{{py:class}}`{qualified(obj)}`"


def docstring_block(text: str, owner: type) -> str:
    """A docstring as reST, read in its class's module so that short references such as
    ``:class:`PushPullGossip``` resolve as they do in the API pages."""
    return rst(f".. currentmodule:: {owner.__module__}\n\n{text}")


def render() -> str:
    """The whole scenario-key reference page."""
    groups, labels = all_pages()
    parts = [
        "# Scenario keys\n",
        "Generated from the pydantic models that validate a scenario, when the site is built, "
        "so it always matches the code. It lists each key's type, default and the constraints "
        "declared on the field. Defaults are shown as validated: durations in seconds, sizes in "
        "bytes, bandwidths in bytes per second. Rules that span several keys, the units and "
        "the meaning of each key are explained in [Scenario files](../scenario-files.md).\n",
    ]
    for heading, introduction, pages in groups:
        parts += [f"## {heading}\n", introduction + "\n"]
        for page in pages:
            parts += render_page(page, labels)
    return "\n".join(parts)
