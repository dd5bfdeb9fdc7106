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


def quick_predicate(schema: object) -> Any:
    """A fast acceptor of frozen values, or ``None`` when the schema has none.

    Schemas with no constraint or only ``type`` are decided with one test; a flat object
    (``properties`` whose schemas are of that kind, ``required``, ``additionalProperties``)
    with one pass over its keys. An acceptor never accepts an invalid value; it may reject
    a valid one, which the full walk then accepts (the caller always falls back to it).
    """
    if not isinstance(schema, dict):  # pragma: no cover - a checked schema is a mapping
        return None
    constraints = _constraints(schema)
    if not constraints:
        return lambda v: True  # a frozen value is lossless JSON, all that {} asks
    if constraints == ["type"]:
        return _QUICK_TYPES.get(schema["type"])
    if schema.get("type") == "object" and _OBJECT_CONSTRAINTS.issuperset(constraints):
        return _quick_flat_object(schema)
    return None


def _quick_flat_object(schema: dict[str, Any]) -> Any:
    declared: dict[str, frozenset[type] | None] = {}
    for name, sub in schema.get("properties", {}).items():
        if not isinstance(sub, dict):  # pragma: no cover - checked sub-schemas are mappings
            return None
        sub_constraints = _constraints(sub)
        if not sub_constraints:
            declared[name] = _ANY_TYPE
        elif sub_constraints == ["type"] and sub["type"] in _FLAT_TYPES:
            declared[name] = _FLAT_TYPES[sub["type"]]
        else:
            return None
    required = frozenset(schema.get("required", ()))
    closed = schema.get("additionalProperties") is False

    def quick(v: object) -> bool:
        if type(v) is not FrozenDict or not v.keys() >= required:
            return False
        for key, x in v.items():
            types = declared.get(key, _UNDECLARED)
            if types is _UNDECLARED:
                if closed:
                    return False
            elif types is not None and type(x) not in types:
                return False
        return True

    return quick
