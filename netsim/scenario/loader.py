"""Reading scenario files: YAML → overrides → validated :class:`Scenario`, with clear errors."""

from __future__ import annotations

import hashlib
import json
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from netsim import files
from netsim.errors import ComponentError, NetsimError, ScenarioError, did_you_mean
from netsim.fields import BOOLEAN_FOR_NUMBER
from netsim.registry import REGISTRY, SLOT_NAMES, SectionDefault
from netsim.scenario.schema import Scenario, scenario_model
from netsim.scenario.yamlfile import YamlBoundError, load_yaml


def load_scenario(path: Path, overrides: Iterable[str] = ()) -> Scenario:
    """Read, override (``dotted.key=value``) and validate the scenario file ``path``; a
    ``sweep`` section is left out (the file's base scenario is what ``netsim run`` runs)."""
    path = Path(path)
    try:
        text = read_scenario_text(path)
    except FileNotFoundError:
        raise ScenarioError(f"{path}: scenario file not found") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            f"{path}: not UTF-8 text (byte {exc.start}); a scenario is a UTF-8 YAML file"
        ) from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read scenario file: {exc.strerror}") from None
    data = parse_yaml(text, source=str(path))
    data.pop("sweep", None)  # read by netsim sweep (netsim.sweep.spec); a run is the base case
    data = apply_overrides(data, overrides, source=str(path))
    return validate_scenario(data, source=str(path), base_dir=path.resolve().parent)


def read_scenario_text(path: Path, what: str = "scenario file") -> str:
    """The text of a scenario or sweep file: a regular file of at most
    :data:`~netsim.files.MAX_SCENARIO_BYTES` (a FIFO or device is refused, not waited on)."""
    return files.read_text(path, what=what, limit=files.MAX_SCENARIO_BYTES, error=ScenarioError)


def parse_yaml(text: str, *, source: str) -> dict[str, Any]:
    """Bounded safe YAML (:mod:`netsim.scenario.yamlfile`: no duplicate keys, no alias
    blow-up, bounded nesting) with errors that name the line and column."""
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        kind = "refused YAML" if isinstance(exc, YamlBoundError) else "YAML syntax error"
        raise ScenarioError(f"{source}{where}: {kind}: {problem}") from None
    if data is None:
        raise ScenarioError(f"{source}: the scenario is empty")
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario is a mapping of keys, got {type(data).__name__}")
    return data


def apply_overrides(data: dict[str, Any], overrides: Iterable[str], *, source: str) -> dict:
    """Apply ``dotted.key=value`` overrides; values are parsed as YAML scalars or lists."""
    result = json.loads(json.dumps(data, default=str))  # deep copy of plain data
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ScenarioError(f"--set {item!r}: expected dotted.key=value, e.g. nodes=500")
        try:
            value = load_yaml(raw) if raw.strip() else ""
        except yaml.YAMLError:
            raise ScenarioError(f"--set {item!r}: the value is not valid YAML") from None
        blocked = set_dotted(result, key.strip(), value)
        if blocked is not None:
            raise ScenarioError(f"--set {item!r}: {blocked} is not a section in {source}")
    return result


def set_dotted(data: dict[str, Any], key: str, value: Any) -> str | None:
    """Set ``a.b.c`` = ``value`` in nested plain data, creating missing (or null) sections.
    Returns None, or the dotted prefix that holds a value that is not a section (nothing is
    set then)."""
    parts = key.split(".")
    target = data
    for depth, part in enumerate(parts[:-1]):
        child = target.get(part)
        if child is None:
            child = target[part] = {}
        if not isinstance(child, dict):
            return ".".join(parts[: depth + 1])
        target = child
    target[parts[-1]] = value
    return None


def validate_scenario(data: dict[str, Any], *, source: str, base_dir: Path | None) -> Scenario:
    """Validate plain data into a :class:`Scenario` (of its sections: :func:`scenario_model`);
    one message lists every problem."""
    try:
        model = scenario_model(data)
    except ComponentError as exc:  # a plug-in section that cannot be read, or sections clash
        raise ScenarioError(f"{source}: invalid scenario:\n  - {exc}") from None
    try:
        return model.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as exc:
        problems = [_describe(error, data, model) for error in exc.errors(include_url=False)]
        lines = "\n".join(f"  - {problem}" for problem in problems)
        raise ScenarioError(f"{source}: invalid scenario:\n{lines}") from None


def _user_path(loc: tuple[Any, ...], data: Any) -> tuple[list[str], list[Any]]:
    """Split pydantic's error location into the user's key path and the full path with tags.

    Pydantic inserts the tag of a discriminated union (e.g. ``k_out``) into the location; it is
    not a key of the user's data, so it is left out of the path shown to the user.
    """
    shown: list[str] = []
    current = data
    for element in loc:
        if isinstance(current, dict) and element in current:
            shown.append(str(element))
            current = current[element]
        elif isinstance(current, list) and isinstance(element, int) and element < len(current):
            shown.append(f"[{element}]")
            current = current[element]
        elif isinstance(element, str) and element not in {"function-after", "function-before"}:
            # a missing key, or a union tag: keep missing keys, drop tags
            if not isinstance(current, dict) or element not in _tags(current):
                shown.append(element)
    return shown, list(loc)


def _tags(mapping: dict[str, Any]) -> set[str]:
    return {str(mapping.get(key)) for key in ("kind", "dist") if key in mapping}


def _model_at(loc: list[Any], data: Any = None, top: Any = Scenario) -> type[BaseModel] | None:
    """The model class that holds the last element of ``loc`` below the scenario model
    ``top`` (tags resolve unions; a field that names a component by ``kind`` resolves through
    the registry with the user's data)."""
    model: Any = top
    current = data
    for element in loc[:-1]:
        current = current.get(element) if isinstance(current, dict) else None
        default = None
        if isinstance(model, type) and issubclass(model, BaseModel):
            field = model.model_fields.get(str(element))
            if field is None:
                return None
            default = _section_default([*field.metadata, field.annotation])
            model = _strip_optional(field.annotation)
        elif typing.get_origin(model) is dict:
            model = _strip_optional(typing.get_args(model)[1])
        else:
            model = _union_member(model, element)
            if model is None:
                return None
            continue
        if model is Any and isinstance(current, dict):
            kind = current.get("kind")
            model = default if kind is None and default else _component_config(kind)
    model = _strip_optional(model)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _section_default(items: list[Any]) -> type[BaseModel] | None:
    """The model of a section of a built-in component when it names no ``kind``
    (:func:`~netsim.registry.section_field`), found in a field's metadata or annotation."""
    stack = list(items)
    while stack:
        item = stack.pop()
        if isinstance(item, SectionDefault):
            return item.model
        if typing.get_origin(item) is typing.Annotated:
            stack.extend(getattr(item, "__metadata__", ()))
            stack.append(typing.get_args(item)[0])
        elif typing.get_origin(item) in (typing.Union, types.UnionType):
            stack.extend(typing.get_args(item))
    return None


def _component_config(kind: Any) -> type[BaseModel] | None:
    """The config model of the component registered (in any slot) as ``kind``."""
    if not isinstance(kind, str):
        return None
    try:
        return REGISTRY.lookup(tuple(SLOT_NAMES), kind)[1]
    except NetsimError:
        return None


def _strip_optional(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _strip_optional(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return _strip_optional(members[0])
    return annotation


def _union_member(annotation: Any, tag: Any) -> Any:
    annotation = _strip_optional(annotation)
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return annotation if isinstance(annotation, type) else None
    for member in typing.get_args(annotation):
        for key in ("kind", "dist"):
            field = getattr(member, "model_fields", {}).get(key)
            if field is not None and tag in typing.get_args(field.annotation):
                return member
    return None


def _describe(error: dict[str, Any], data: dict[str, Any], top: Any = Scenario) -> str:
    shown, full = _user_path(error["loc"], data)
    where = ".".join(shown).replace(".[", "[") or "(top level)"
    kind = error["type"]
    if kind == "extra_forbidden":
        model = _model_at(full, data, top)
        if model is None:
            return f"{where}: unknown key; allowed keys here: see scenarios/README.md"
        keys = [field.alias or name for name, field in model.model_fields.items()]
        near = did_you_mean(str(full[-1]), keys) if full else ""
        return f"{where}: unknown key{near}; allowed keys here: {', '.join(keys)}"
    if kind == "missing":
        return f"{where}: required key is missing"
    if kind in ("unknown_kind", "missing_kind", "component_mapping"):
        return f"{where}: {error['msg']}"
    if kind == BOOLEAN_FOR_NUMBER:  # raised by the section: its message is the key's
        key = error.get("ctx", {}).get("key")
        return f"{where}.{key}: {error['msg']}" if shown else f"{key}: {error['msg']}"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        ctx = error.get("ctx", {})
        expected = ctx.get("expected_tags")
        key = str(ctx.get("discriminator", "'kind'")).strip("'")
        if expected is None:  # no tag given at all
            member_tags = _all_tags(full, top)
            expected = ", ".join(member_tags) if member_tags else "see scenarios/README.md"
            return f"{where}: needs a '{key}' key; allowed values: {expected}"
        return f"{where}.{key}: unknown value {ctx.get('tag')!r}; allowed values: {expected}"
    message = str(error["msg"])
    message = message.removeprefix("Value error, ")
    if not shown:  # a check across several keys: its message names them
        return message
    if kind not in ("value_error", "assertion_error") and "input" in error:
        given = error["input"]
        if not isinstance(given, dict | list):
            message += f" (got {given!r})"
    return f"{where}: {message}"


def _all_tags(loc: list[Any], top: Any = Scenario) -> list[str]:
    model: Any = top
    for element in loc:
        if isinstance(model, type) and issubclass(model, BaseModel):
            field = model.model_fields.get(str(element))
            if field is None:
                return []
            model = field.annotation
        else:
            model = _union_member(model, element)
    union = _strip_optional(model)
    tags: list[str] = []
    for member in typing.get_args(union):
        for key in ("kind", "dist"):
            field = getattr(member, "model_fields", {}).get(key)
            if field is not None:
                tags.extend(repr(t) for t in typing.get_args(field.annotation))
    return tags


def scenario_to_data(scenario: Scenario) -> dict[str, Any]:
    """Plain data (JSON types) of a scenario: durations in seconds, paths absolute. An empty
    ``components`` section is left out (so scenarios without one keep their hash)."""
    data = scenario.model_dump(mode="json", by_alias=True)
    if not data.get("components"):
        data.pop("components", None)
    for key, entry in scenario.declared_sections.items():  # a plug-in's, left out
        if not entry.builtin and data.get(key) is None:
            data.pop(key, None)
    for key, uses in scenario.wiring.items():  # kept apart from the settings
        section, _, name = key.partition(".")
        (data[section][name] if name else data[section])["uses"] = uses
    return data


def override_keys(overrides: Iterable[str]) -> tuple[str, ...]:
    """The dotted keys of ``dotted.key=value`` overrides, in order, each once."""
    keys: dict[str, None] = {}
    for item in overrides:
        key, sep, _ = item.partition("=")
        if sep and key.strip():
            keys[key.strip()] = None
    return tuple(keys)


def parameter_value(value: Any) -> Any:
    """A parameter as tables hold it: a scalar as it is, a section or a list as canonical
    JSON text (so one column has one type)."""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def dotted_value(data: Any, key: str) -> Any:
    """The value at dotted ``key`` (``a.b.c``) of nested plain data; None when absent."""
    for part in key.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


def resolved_parameters(scenario: Scenario, keys: Iterable[str]) -> dict[str, Any]:
    """The resolved value of each dotted key in ``scenario`` (durations in seconds, as
    :func:`scenario_to_data`; a key the scenario does not have is None)."""
    data = scenario_to_data(scenario)
    return {key: parameter_value(dotted_value(data, key)) for key in keys}


def override_parameters(scenario: Scenario, overrides: Iterable[str]) -> dict[str, Any]:
    """What a run made with ``dotted.key=value`` overrides records as its parameters: each
    overridden key's resolved value, the seed left out (a run records it on its own)."""
    keys = [key for key in override_keys(overrides) if key != "seed"]
    return resolved_parameters(scenario, keys)


def scenario_to_yaml(scenario: Scenario) -> str:
    """The resolved scenario as YAML (re-loadable with :func:`load_scenario`)."""
    header = "# Resolved scenario: durations in seconds, sizes in bytes, bandwidth in bytes/s.\n"
    return header + yaml.safe_dump(scenario_to_data(scenario), sort_keys=False)


#: Keys added after runs existed, at the value that keeps what runs did before: left out of
#: the hash there, so a run made before the key existed keeps its id (and a resumed sweep
#: does not run it again). A key added later with a default belongs here.
HASH_NEUTRAL_DEFAULTS: dict[tuple[str, ...], Any] = {
    ("metrics", "privacy_ledger"): "charges",
    ("metrics", "omit_tables"): [],
    ("churn", "start_at"): 0.0,
    ("churn", "fallback", "start_at"): 0.0,
    ("dola", "data", "validation"): None,
    ("learning", "delta"): 0.0,
    ("learning", "clip"): None,
    ("learning", "learning_rate"): 1.0,
    ("learning", "accounting"): "basic",
    ("learning", "records_per_node"): 1,
    ("learning", "batch"): 1,
    ("learning", "privacy_unit"): "record",
    ("learning", "sampling"): "cyclic",
    ("learning", "dataset", "validation_fraction"): None,
    ("dsgd", "dataset", "validation_fraction"): None,
    ("dola", "mechanism"): None,
    ("dola", "accounting"): "basic",
    ("mi_ogd", "accounting"): "basic",
    ("mi_ogd", "mechanism"): None,
    ("mi_ogd", "epsilon"): None,
    ("mi_ogd", "delta"): 0.0,
    ("mi_ogd", "uses"): 1,
    ("walk", "cycle"): None,
    ("gossip_learning", "mode"): "exact",
    ("gossip_learning", "merge"): "none",
    ("muffliato",): None,
    ("muffliato", "acceleration"): "none",
    ("dsgd",): None,
    ("privacy",): None,
    ("privacy", "trust"): "pndp",
    ("privacy", "secret_paths"): 0,
    ("privacy", "budget"): "local",
    ("privacy", "links"): [],
}


#: A data file's digest in the hash, by (path, size, modification time, inode): each file is
#: read once per process however many runs of a sweep name it.
_FILE_DIGESTS: dict[tuple[str, int, int, int], str] = {}


def content_digest(path: Path) -> str:
    """What stands for the file ``path`` in a run's identity: ``sha256:<hex>`` of its bytes (a
    directory: of its files' relative names and digests, in name order), or
    ``missing:<file name>`` when there is nothing there. Where the file lives (the checkout,
    a symlinked ``../shared``) is not part of it."""
    try:
        info = path.stat()
    except OSError:
        return f"missing:{path.name}"
    key = (str(path), info.st_size, info.st_mtime_ns, info.st_ino)
    if key in _FILE_DIGESTS:
        return _FILE_DIGESTS[key]
    digest = hashlib.sha256()
    if path.is_dir():
        for file in sorted(f for f in path.rglob("*") if f.is_file()):
            digest.update(f"{file.relative_to(path).as_posix()}\0{content_digest(file)}\0".encode())
    else:
        try:
            with open(path, "rb") as handle:
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
        except OSError:  # a FIFO, a device, unreadable: validation or the run says why
            return f"missing:{path.name}"
    _FILE_DIGESTS[key] = f"sha256:{digest.hexdigest()}"
    return _FILE_DIGESTS[key]


def _path_locations(value: Any, where: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Path]]:
    """Where a model dump (python mode) holds a path, and the path."""
    if isinstance(value, Path):
        return [(where, value)]
    if isinstance(value, dict):
        items: Iterable[tuple[Any, Any]] = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return []
    return [found for key, item in items for found in _path_locations(item, (*where, key))]


def identity_data(scenario: Scenario) -> dict[str, Any]:
    """What identifies a run's configuration: the resolved scenario (seed included) with each
    file path replaced by its :func:`content_digest` (so a run's id is the same in every
    checkout, whether ``../shared`` is a symlink or not), without the keys at a value of
    :data:`HASH_NEUTRAL_DEFAULTS` and without the ``kind`` of a section that names its built-in
    component (a section that takes a ``kind`` optionally: named by that kind, the section is
    the same configuration as without it, so the same run id)."""
    data = scenario_to_data(scenario)
    for where, path in _path_locations(scenario.model_dump(mode="python", by_alias=True)):
        parent: Any = data
        for key in where[:-1]:
            parent = parent[key] if isinstance(parent, dict | list) else None
        if isinstance(parent, dict) and where[-1] in parent:
            parent[where[-1]] = content_digest(path)
        elif isinstance(parent, list) and isinstance(where[-1], int):
            parent[where[-1]] = content_digest(path)
    for (*sections, key), neutral in HASH_NEUTRAL_DEFAULTS.items():
        parent = dotted_value(data, ".".join(sections)) if sections else data
        if isinstance(parent, dict) and key in parent and parent[key] == neutral:
            del parent[key]
    sections = scenario.declared_sections.items()
    optional_kind = [k for k, e in sections if e.section.by_kind == "optional"]
    for section in optional_kind:  # the built-in is registered under the section's name
        if isinstance(data.get(section), dict) and data[section].get("kind") == section:
            del data[section]["kind"]
    return data


def data_hash(data: Any) -> str:
    """SHA-256 of canonical JSON of plain ``data`` (sorted keys, no spaces)."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def scenario_hash(scenario: Scenario) -> str:
    """SHA-256 of the scenario's :func:`identity_data`: identifies a run's configuration."""
    return data_hash(identity_data(scenario))


def scenario_file_problem(directory: Path, manifest: Mapping[str, Any]) -> str | None:
    """Why a run directory's ``scenario.yaml`` is not the scenario its manifest says it ran
    (its :func:`scenario_hash` differs from the manifest's ``scenario_hash``: the file was
    edited or replaced, even with its checksum recomputed), or None. A file that cannot be
    read as a scenario here, or one naming a data file absent from this checkout (its bytes
    are part of the hash), is not judged: None."""
    from netsim.errors import NetsimError
    from netsim.storage import SCENARIO

    recorded = manifest.get("scenario_hash")
    if not isinstance(recorded, str):
        return None
    try:
        identity = identity_data(load_scenario(Path(directory) / SCENARIO))
    except (NetsimError, OSError, ValueError):
        return None
    if "missing:" in json.dumps(identity):  # a data file absent here: its bytes are unknown
        return None
    found = data_hash(identity)
    if found == recorded:
        return None
    return (
        f"{SCENARIO} is not the scenario the run was made from: its hash {found[:10]} differs "
        f"from the manifest's scenario_hash {recorded[:10]} (the file was edited or replaced)"
    )
