"""Compiling a checked JSON Schema into a node graph for the validator (runtime.md §12.2).

Each keyword is read once here, at compile time, and turned into plain attributes (accepted
kinds, enum keys, messages, child nodes) so that validating a value looks nothing up.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final, final

from ._json import FrozenDict, _int_ok, is_lossless_str
from ._schema_check import SCHEMA_TYPES

__all__ = [
    "ANY",
    "ARRAY",
    "BOOL",
    "FLOAT",
    "INT",
    "NONFINITE",
    "NONJSON",
    "NULL",
    "OBJECT",
    "SCALAR_TYPES",
    "STR",
    "Node",
    "compile_nodes",
    "kind_of",
    "scalar_key",
]

# Shallow kinds of a value. Negative kinds are not JSON at this node.
NONJSON: Final = -1
NONFINITE: Final = -2
NULL: Final = 0
BOOL: Final = 1
INT: Final = 2
FLOAT: Final = 3
STR: Final = 4
OBJECT: Final = 5
ARRAY: Final = 6

# Per declared type: the accepted kinds and the violation suffix. "integer" also accepts an
# integral float, checked separately.
_TYPE_KINDS: Final[dict[str, frozenset[int]]] = {
    "string": frozenset((STR,)),
    "number": frozenset((INT, FLOAT)),
    "integer": frozenset((INT,)),
    "boolean": frozenset((BOOL,)),
    "null": frozenset((NULL,)),
    "object": frozenset((OBJECT,)),
    "array": frozenset((ARRAY,)),
}
_TYPE_MESSAGES: Final[dict[str, str]] = {
    "string": "must be a string",
    "number": "must be a number",
    "integer": "must be an integer",
    "boolean": "must be a boolean",
    "null": "must be null",
    "object": "must be an object",
    "array": "must be an array",
}
assert set(_TYPE_KINDS) == set(SCHEMA_TYPES) == set(_TYPE_MESSAGES)

_INF: Final = math.inf


def kind_of(value: Any, frozen: bool) -> int:
    """Classify ``value`` shallowly; ``frozen`` means it came out of ``freeze_json``."""
    t = type(value)
    if t is str:
        if frozen or value.isascii() or is_lossless_str(value):
            return STR
        return NONJSON
    if t is int:
        return INT if frozen or _int_ok(value) else NONJSON
    if t is bool:
        return BOOL
    if t is float:
        if frozen:
            return FLOAT
        if value != value or value == _INF or value == -_INF:
            return NONFINITE
        # freeze_json rejects -0.0 (it does not survive every JSON parser), so it is not
        # lossless here either.
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return NONJSON
        return FLOAT
    if value is None:
        return NULL
    if t is FrozenDict:
        return OBJECT
    if t is dict:
        for key in value:
            if type(key) is not str or not (key.isascii() or is_lossless_str(key)):
                return NONJSON
        return OBJECT
    if t is list or t is tuple:
        return ARRAY
    return NONJSON


def scalar_key(value: object, kind: int) -> object:
    # JSON equality for enum/const: 1 == 1.0, but true != 1 (Python would say it is).
    if kind in (INT, FLOAT):
        return (INT, value)
    if kind >= OBJECT:
        return (kind, id(value))  # never equal to a scalar key
    return (kind, value)


@final
class Node:
    """One compiled schema node. ``None`` fields mean "no such constraint"."""

    __slots__ = (
        "closed",
        "const_key",
        "const_message",
        "declared",
        "enum_keys",
        "enum_message",
        "fast",
        "integer",
        "items",
        "kinds",
        "one_of",
        "properties",
        "property_names",
        "required",
        "scalar_branches",
        "type_message",
    )

    def __init__(self) -> None:
        self.kinds: frozenset[int] | None = None
        self.integer = False
        self.type_message = ""
        self.enum_keys: frozenset[object] | None = None
        self.enum_message = ""
        self.const_key: object = None
        self.const_message: str | None = None
        self.one_of: tuple[Node, ...] | None = None
        # Objects: ``declared`` is true for "type": "object" (only then do the object keywords
        # exist); properties in declaration order.
        self.declared = False
        self.properties: tuple[tuple[str, Node], ...] = ()
        self.property_names: frozenset[str] = frozenset()
        self.required: tuple[str, ...] = ()
        self.closed = False
        self.items: Node | None = None
        # Fast paths, set once the node is complete. ``fast``: the Python types a value may
        # have to be accepted outright when it is known to be lossless (a node that only
        # constrains a scalar type, or nothing). ``scalar_branches``: every oneOf branch is
        # such a typed scalar node, so matches are counted without validating branches.
        self.fast: frozenset[type] | None = None
        self.scalar_branches = False


# Python types of scalars, and their kinds, for the ``fast`` accept path.
SCALAR_TYPES: Final[frozenset[type]] = frozenset((str, int, float, bool, type(None)))
_SCALAR_KINDS: Final = frozenset((NULL, BOOL, INT, FLOAT, STR))
_PY_KINDS: Final[dict[type, int]] = {
    str: STR,
    int: INT,
    float: FLOAT,
    bool: BOOL,
    type(None): NULL,
}


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def compile_nodes(schema: object) -> Node:
    """Compile a schema that passed ``assert_supported_json_schema`` and return its root.

    Each schema object becomes exactly one node (shared sub-schemas stay shared), so the
    compiled graph is the schema's DAG. Nodes are allocated on discovery and filled in
    place, which needs no particular visiting order and no recursion.
    """
    nodes: dict[int, Node] = {}

    def node_for(schema_node: Any, pending: list[Any]) -> Node:
        found = nodes.get(id(schema_node))
        if found is None:
            found = nodes[id(schema_node)] = Node()
            pending.append(schema_node)
        return found

    pending: list[Any] = []
    root = node_for(schema, pending)
    while pending:
        s = pending.pop()
        n = nodes[id(s)]
        declared = s.get("type")
        if declared is not None:
            n.kinds = _TYPE_KINDS[declared]
            n.integer = declared == "integer"
            n.type_message = _TYPE_MESSAGES[declared]
        if "enum" in s:
            values = s["enum"]
            n.enum_keys = frozenset(scalar_key(v, kind_of(v, True)) for v in values)
            n.enum_message = f"must be one of {_dumps(list(values))}"
        if "const" in s:
            v = s["const"]
            n.const_key = scalar_key(v, kind_of(v, True))
            n.const_message = f"must be {_dumps(v)}"
        if "oneOf" in s:
            n.one_of = tuple(node_for(b, pending) for b in s["oneOf"])
        if declared == "object":
            n.declared = True
            props = s.get("properties", {})
            n.properties = tuple((k, node_for(v, pending)) for k, v in props.items())
            n.property_names = frozenset(props)
            n.required = tuple(s.get("required", ()))
            n.closed = s.get("additionalProperties") is False
        elif declared == "array" and "items" in s:
            n.items = node_for(s["items"], pending)
    for n in nodes.values():
        if n.enum_keys is None and n.const_message is None and n.one_of is None:
            if n.kinds is None:
                n.fast = SCALAR_TYPES
            elif n.kinds <= _SCALAR_KINDS:
                n.fast = frozenset(t for t, k in _PY_KINDS.items() if k in n.kinds)
    for n in nodes.values():
        if n.one_of is not None:
            n.scalar_branches = all(b.fast is not None and b.kinds for b in n.one_of)
    return root


# The node of ``{}``: used for values no sub-schema constrains (items without "items",
# undeclared keys of an open object), which must still be lossless JSON.
ANY: Final = Node()
