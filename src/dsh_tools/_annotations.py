"""Python annotations to JSON Schema, for ``@tool`` (runtime.md §12.4).

Only the documented mapping is supported; anything else raises :class:`UnsupportedAnnotation`
naming the innermost annotation that has no JSON Schema form, and ``@tool`` turns it into its
``TypeError``.
"""

from __future__ import annotations

import contextlib
import enum
import types
import typing
from typing import Annotated, Any, Final, Literal, Union

import attrs

from ._convert import converter
from ._json import freeze_json
from ._schema_validate import validate_json_value

__all__ = ["UnsupportedAnnotation", "json_default", "schema_for"]

_NONE_TYPE: Final = type(None)
_SCALARS: Final[dict[object, str]] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    _NONE_TYPE: "null",
    None: "null",
}
# The JSON type of a Literal value or Enum value, by its exact Python type.
_VALUE_TYPES: Final[dict[type, str]] = {
    str: "string",
    int: "integer",
    bool: "boolean",
    _NONE_TYPE: "null",
}


class UnsupportedAnnotation(Exception):
    """An annotation has no JSON Schema form; ``annotation`` is the offending part."""

    def __init__(self, annotation: object) -> None:
        super().__init__(annotation)
        self.annotation = annotation


def json_default(value: object) -> Any:
    """Return ``value`` unstructured with the package converter, as lossless plain JSON.

    Raises:
        TypeError: the unstructured value is not lossless JSON.
    """
    plain = converter.unstructure(value)
    freeze_json(plain)  # raises TypeError when it is not lossless
    return plain


def schema_for(annotation: object) -> dict[str, Any]:
    """Return the JSON Schema of a resolved annotation (a fresh plain ``dict``).

    Raises:
        UnsupportedAnnotation: some part of ``annotation`` has no mapping.
    """
    return _schema(annotation, ())


def _schema(tp: Any, active: tuple[type, ...]) -> dict[str, Any]:
    # Recursion follows the nesting of the annotation as written, which is shallow; attrs
    # classes on the way are tracked, since a class that contains itself has no finite
    # schema in the subset (there is no "$ref").
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Annotated:
        schema = _schema(args[0], active)
        texts = [m for m in tp.__metadata__ if type(m) is str]
        if texts:
            schema["description"] = texts[0]
        return schema
    if tp is Any or tp is object:
        return {}
    if _hashable(tp) and tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    if origin is Union or origin is types.UnionType:
        return _optional(tp, args, active)
    if origin is Literal:
        return _enum(tp, args, with_type=True)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp, [member.value for member in tp], with_type=False)
    if tp is list:
        return {"type": "array"}
    if origin is list and len(args) == 1:
        return {"type": "array", "items": _schema(args[0], active)}
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": _schema(args[0], active)}
    if origin is dict and len(args) == 2 and args[0] is str:
        # The subset cannot constrain the values of an open object, but the value type must
        # still be one that structures, so it is mapped (and checked) and then dropped.
        _schema(args[1], active)
        return {"type": "object"}
    if isinstance(tp, type) and attrs.has(tp):
        return _attrs_schema(tp, active)
    raise UnsupportedAnnotation(tp)


def _hashable(tp: object) -> bool:
    try:
        hash(tp)
    except TypeError:
        return False
    return True


def _optional(tp: Any, args: tuple[Any, ...], active: tuple[type, ...]) -> dict[str, Any]:
    others = [a for a in args if a is not _NONE_TYPE]
    if len(others) != 1 or len(args) != 2:
        raise UnsupportedAnnotation(tp)
    inner = _schema(others[0], active)
    if not validate_json_value(inner, None):
        # T already accepts null (Any, a Literal with None): a oneOf with null would then
        # match twice and reject null, so T's schema is kept as it is.
        return inner
    return {"oneOf": [inner, {"type": "null"}]}


def _enum(tp: Any, values: Any, *, with_type: bool) -> dict[str, Any]:
    values = list(values)
    kinds = set()
    for value in values:
        kind = _VALUE_TYPES.get(type(value))
        if kind is None:
            raise UnsupportedAnnotation(tp)
        try:
            freeze_json(value)  # e.g. an int over the digit limit, a lone surrogate
        except TypeError:
            raise UnsupportedAnnotation(tp) from None
        kinds.add(kind)
    if not values:
        raise UnsupportedAnnotation(tp)
    schema: dict[str, Any] = {}
    if with_type and len(kinds) == 1:
        schema["type"] = kinds.pop()
    schema["enum"] = values
    return schema


def _attrs_schema(cls: type, active: tuple[type, ...]) -> dict[str, Any]:
    if cls in active:
        raise UnsupportedAnnotation(cls)
    active = (*active, cls)
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:  # an unresolvable forward reference
        raise UnsupportedAnnotation(cls) from exc
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in attrs.fields(cls):
        if not field.init:
            continue  # cattrs neither reads nor writes it
        # Classes made by attrs.make_class have no __annotations__; their fields carry types.
        annotation = hints.get(field.name, field.type)
        if annotation is None or isinstance(annotation, str):
            raise UnsupportedAnnotation(cls)
        if not _hashable(annotation):
            # cattrs looks up a field's hooks by its type, so every call would fail to
            # structure or unstructure the class (e.g. Annotated metadata that is a dict).
            raise UnsupportedAnnotation(annotation)
        schema = _schema(annotation, active)
        default = field.default
        if default is attrs.NOTHING:
            required.append(field.name)
        elif not isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            # A field default is documentation for the model; one that is not lossless
            # JSON is simply not shown (the class still applies it).
            with contextlib.suppress(TypeError):
                schema["default"] = json_default(default)
        properties[field.name] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out
