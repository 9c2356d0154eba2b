"""YAML for scenario and sweep files, with bounds: a few bytes never become gigabytes.

``yaml.safe_load`` accepts what a hostile or mistaken file can do with YAML: aliases that
expand exponentially ("billion laughs": 1 KB becomes gigabytes once anything walks the
data), nesting deep enough to exhaust Python's stack, aliases that refer to themselves, and
duplicate keys of which the last silently wins (``nodes: 40`` … ``nodes: 4000``). The loader
here refuses each of them with the line and column, before any data is built.

It also reads no YAML 1.1 base-60 numbers: ``nodes: 1:00`` is the text ``"1:00"`` (which a
number field refuses, naming its key), never 60. (YAML 1.1 booleans — ``yes``, ``on`` — stay
booleans, which number fields refuse: :class:`netsim.fields.CheckedModel`.)
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode


class YamlBoundError(yaml.YAMLError):
    """Marker base: the file is valid YAML but breaks a bound of this loader."""


class BoundComposerError(YamlBoundError, ComposerError):
    """Too deep, too large once expanded, or a recursive alias."""


class DuplicateKeyError(YamlBoundError, ConstructorError):
    """A mapping gives a key twice."""


class BoundConstructorError(YamlBoundError, ConstructorError):
    """A value too large to construct (an integer of thousands of digits)."""


#: Deepest nesting of sections and lists a file may have (aliases included).
MAX_DEPTH = 64
#: Most values (scalars, lists, mappings) a file may hold once its aliases are expanded.
MAX_VALUES = 200_000

MERGE_TAG = "tag:yaml.org,2002:merge"
INT_TAG = "tag:yaml.org,2002:int"
FLOAT_TAG = "tag:yaml.org,2002:float"

#: YAML 1.1 integers as PyYAML's ``SafeLoader`` resolves them, without base 60 (``1:00``).
_INT = re.compile(
    r"""^(?:[-+]?0b[0-1_]+
    |[-+]?0[0-7_]+
    |[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?0x[0-9a-fA-F_]+)$""",
    re.X,
)
#: YAML 1.1 floats as PyYAML's ``SafeLoader`` resolves them, without base 60 (``1:30.5``).
_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)


class BoundedSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses duplicate keys, deep nesting and alias blow-up."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise BoundComposerError(
                    None,
                    None,
                    f"nesting deeper than {MAX_DEPTH} levels",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_data(self) -> Any:
        node = self.get_single_node()
        if node is None:
            return None
        check_expanded_size(node)
        return self.construct_document(node)

    def construct_yaml_int(self, node: ScalarNode) -> int:
        """An integer, refused with its line when it has more digits than Python converts
        (4,300): PyYAML would raise a bare ``ValueError``."""
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            digits = sum(c.isdigit() for c in str(node.value))
            raise BoundConstructorError(
                None,
                None,
                f"a {digits:,}-digit integer is out of range; numbers are at most 2**63 - 1 "
                "in magnitude",
                node.start_mark,
            ) from None

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag == MERGE_TAG:
                    continue  # merge keys ('<<') may be overridden, as YAML intends
                key = self.construct_object(key_node)
                if key in first_line:
                    raise DuplicateKeyError(
                        "while reading a mapping",
                        node.start_mark,
                        f"duplicate key {key!r} (first given on line {first_line[key]}); "
                        "a key may appear once",
                        key_node.start_mark,
                    )
                first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def check_expanded_size(root: Node) -> None:
    """Refuse a document whose aliases expand past :data:`MAX_VALUES` values or
    :data:`MAX_DEPTH` levels, or refer to a node that contains them.

    Walks the node graph once (an anchored node shared by many aliases is measured once), with
    an explicit stack: the nesting an alias chain creates must not exhaust Python's stack.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            children = _children(node)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            open_nodes.discard(key)
            if size[key] > MAX_VALUES or depth[key] > MAX_DEPTH:
                limit = (
                    f"more than {MAX_VALUES:,} values"
                    if size[key] > MAX_VALUES
                    else f"nesting deeper than {MAX_DEPTH} levels"
                )
                raise BoundComposerError(
                    None, None, f"aliases expand this value to {limit}", node.start_mark
                )
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise BoundComposerError(
                None, None, "an alias refers to a value containing it", node.start_mark
            )
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in size)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load_yaml(text: str) -> Any:
    """Parse one YAML document with :class:`BoundedSafeLoader` (raises ``yaml.YAMLError``)."""
    loader = BoundedSafeLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


BoundedSafeLoader.add_constructor(INT_TAG, BoundedSafeLoader.construct_yaml_int)
BoundedSafeLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (INT_TAG, FLOAT_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
BoundedSafeLoader.add_implicit_resolver(INT_TAG, _INT, list("-+0123456789"))
BoundedSafeLoader.add_implicit_resolver(FLOAT_TAG, _FLOAT, list("-+0123456789."))
