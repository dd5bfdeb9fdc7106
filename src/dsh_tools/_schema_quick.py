"""Quick acceptors of frozen values for the commonest schemas (runtime.md §12.2).

``CompiledSchema.validate_frozen`` first asks the acceptor of its schema, if it has one:
a bare ``type``, no constraint, or a flat object of such properties (what ``@tool`` derives
from scalar parameters) accepts a valid frozen value with type tests alone. An acceptor
never accepts an invalid value; it may reject a valid one, which the full walk then
accepts, so the violations reported are always the full walk's.
"""

from __future__ import annotations

from typing import Any, Final

from ._json import FrozenDict

__all__ = ["quick_predicate"]

_ANNOTATIONS: Final = frozenset({"description", "title", "default", "examples"})
_FLOAT_OR_INT: Final = (int, float)
_QUICK_TYPES: Final[dict[str, Any]] = {
    # For frozen values only: objects are FrozenDicts, arrays tuples, floats finite.
    "string": lambda v: type(v) is str,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "integer": lambda v: type(v) is int or (type(v) is float and v.is_integer()),
    "number": lambda v: type(v) in _FLOAT_OR_INT,
    "object": lambda v: type(v) is FrozenDict,
    "array": lambda v: type(v) is tuple,
}


# The exact types a frozen value of a bare ``type`` schema may have: a property of a flat
# object is accepted with one type test. An integral float for "integer" is valid but left to
# the full walk (an acceptor may reject valid values: the full walk then decides).
_FLAT_TYPES: Final[dict[str, frozenset[type]]] = {
    "string": frozenset((str,)),
    "boolean": frozenset((bool,)),
    "null": frozenset((type(None),)),
    "integer": frozenset((int,)),
    "number": frozenset((int, float)),
    "object": frozenset((FrozenDict,)),
    "array": frozenset((tuple,)),
}
_OBJECT_CONSTRAINTS: Final = frozenset(("type", "properties", "required", "additionalProperties"))
_ANY_TYPE: Final[Any] = None  # a property schema with no constraint: every frozen value
_UNDECLARED: Final[Any] = object()


def _constraints(schema: dict[str, Any]) -> list[str]:
    return [key for key in schema if key not in _ANNOTATIONS]


#: How deep a schema's quick acceptor may nest (it recurses along the schema, not the
#: value): deeper schemas have none, and take the full walk.
_QUICK_DEPTH: Final = 16


def quick_predicate(schema: object) -> Any:
    """A fast acceptor of frozen values, or ``None`` when the schema has none.

    Schemas with no constraint or only ``type`` are decided with one test; a string ``enum``
    with a set lookup; an object (``properties``, ``required``, ``additionalProperties``)
    with one pass over its keys, and an array (``items``) with one pass over its items,
    each property or item by its own acceptor. An acceptor never accepts an invalid value;
    it may reject a valid one, which the full walk then accepts (the caller always falls
    back to it).
    """
    return _quick(schema, 0)


def _quick(schema: object, depth: int) -> Any:
    if not isinstance(schema, dict) or depth > _QUICK_DEPTH:
        return None
    constraints = _constraints(schema)
    if not constraints:
        return lambda v: True  # a frozen value is lossless JSON, all that {} asks
    kind: Any = schema.get("type")
    if constraints == ["type"]:
        return _QUICK_TYPES.get(kind)
    if sorted(constraints) == ["enum", "type"] and kind == "string":
        values = frozenset(schema["enum"])
        return lambda v: type(v) is str and v in values
    if kind == "object" and _OBJECT_CONSTRAINTS.issuperset(constraints):
        return _quick_object(schema, depth)
    if kind == "array" and sorted(constraints) == ["items", "type"]:
        return _quick_array(schema["items"], depth)
    return None


def _check(schema: dict[str, Any], depth: int) -> Any:
    """How a property or an item is accepted: ``None`` (anything), a set of exact types,
    a nested acceptor, or ``_UNDECLARED`` when the schema has no acceptor."""
    sub_constraints = _constraints(schema)
    if not sub_constraints:
        return _ANY_TYPE
    if sub_constraints == ["type"] and schema["type"] in _FLAT_TYPES:
        return _FLAT_TYPES[schema["type"]]
    quick = _quick(schema, depth + 1)
    return _UNDECLARED if quick is None else quick


def _quick_array(items: Any, depth: int) -> Any:
    check = _check(items, depth)
    if check is _UNDECLARED:
        return None
    if check is None:
        return lambda v: type(v) is tuple
    if type(check) is frozenset:
        types = check
        return lambda v: type(v) is tuple and types.issuperset(map(type, v))
    return lambda v: type(v) is tuple and all(check(x) for x in v)


def _quick_object(schema: dict[str, Any], depth: int) -> Any:
    declared: dict[str, Any] = {}
    for name, sub in schema.get("properties", {}).items():
        check = _check(sub, depth)
        if check is _UNDECLARED:
            return None
        declared[name] = check
    required = frozenset(schema.get("required", ()))
    closed = schema.get("additionalProperties") is False

    def quick(v: object) -> bool:
        if type(v) is not FrozenDict or not v.keys() >= required:
            return False
        for key, x in v.items():
            check = declared.get(key, _UNDECLARED)
            if check is _UNDECLARED:
                if closed:
                    return False
            elif check is None:
                continue
            elif type(check) is frozenset:
                if type(x) not in check:
                    return False
            elif not check(x):
                return False
        return True

    return quick
