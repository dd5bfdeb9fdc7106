"""The supported JSON Schema subset (runtime.md §12.1): ``assert_supported_json_schema``.

The walk is iterative (a schema nested 5000 levels deep must work) and collects every
violation before raising, so a tool author fixes a schema in one round trip.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from ._errors import JsonSchemaError
from ._json import FrozenDict, _int_ok, freeze_json, is_lossless_str

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["SCHEMA_TYPES", "assert_supported_json_schema", "is_json_scalar", "scalar_matches"]

#: The values ``"type"`` may take, in the order the violation text lists them.
SCHEMA_TYPES: Final = ("array", "boolean", "integer", "null", "number", "object", "string")
_TYPE_SET: Final = frozenset(SCHEMA_TYPES)
_TYPE_PROBLEM: Final = '"type" must be one of ' + ", ".join(f'"{t}"' for t in SCHEMA_TYPES)

_OBJECT_KEYWORDS: Final = ("properties", "required", "additionalProperties")
_ARRAY_KEYWORDS: Final = ("items",)
_ANNOTATIONS: Final = ("description", "title", "default", "examples")
_KNOWN: Final = frozenset(
    ("type", "oneOf", "enum", "const", *_OBJECT_KEYWORDS, *_ARRAY_KEYWORDS, *_ANNOTATIONS)
)
# Keywords that would constrain the node alongside "oneOf"; the subset keeps a "oneOf" node
# a pure choice so that "exactly one branch matches" is the node's whole meaning.
_NOT_WITH_ONE_OF: Final = frozenset(("type", "enum", "const", *_OBJECT_KEYWORDS, "items"))

# A JSON pointer is built lazily as a linked chain ``(parent, token)`` ending in ``"#"``:
# rendering every pointer eagerly would cost O(depth²) on a 5000-deep schema.
_Pointer: TypeAlias = "str | tuple[_Pointer, str]"


def _render_pointer(ptr: _Pointer) -> str:
    tokens: list[str] = []
    while isinstance(ptr, tuple):
        ptr, token = ptr
        tokens.append(token)
    tokens.append(ptr)
    return "/".join(reversed(tokens))


def _escape(token: str) -> str:
    # RFC 6901: "~" and "/" inside a reference token are escaped as "~0" and "~1".
    return token.replace("~", "~0").replace("/", "~1")


def _is_dict(node: object) -> bool:
    t = type(node)
    return t is dict or t is FrozenDict


def _is_list(node: object) -> bool:
    t = type(node)
    return t is list or t is tuple


def is_json_scalar(value: Any) -> bool:
    """Return whether ``value`` is a lossless JSON scalar (``None``, bool, number, str)."""
    t = type(value)
    if t is str:
        return is_lossless_str(value)
    if t is int:
        return _int_ok(value)
    if t is float:
        return math.isfinite(value) and not (value == 0.0 and math.copysign(1.0, value) < 0)
    return value is None or t is bool


def scalar_matches(value: Any, type_name: str) -> bool:
    """Return whether the JSON scalar ``value`` is an instance of the JSON type ``type_name``.

    ``number`` accepts ints and floats, ``integer`` ints and integral floats; a bool is
    neither.
    """
    t = type(value)
    if type_name == "string":
        return t is str
    if type_name == "number":
        return t is int or t is float
    if type_name == "integer":
        return t is int or (t is float and value.is_integer())
    if type_name == "boolean":
        return t is bool
    if type_name == "null":
        return value is None
    # "array" and "object": a scalar never matches.
    return False


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _is_lossless(value: object) -> bool:
    try:
        freeze_json(value)
    except TypeError:
        return False
    return True


def assert_supported_json_schema(schema: object) -> None:
    """Check that ``schema`` lies inside the supported JSON Schema subset (§12.1).

    Nodes may be ``dict`` or :class:`FrozenDict`, lists ``list`` or ``tuple``, so a frozen
    schema is checked as it is. The walk is iterative. A sub-schema object used at several
    places is fine; one that contains itself is reported as ``cycle``.

    Args:
        schema: The schema to check.

    Raises:
        JsonSchemaError: listing every violation, each ``<pointer>: <problem>`` with a JSON
            pointer from ``#``, in document order.

    Example:
        >>> assert_supported_json_schema({"type": "string", "pattern": "x"})
        Traceback (most recent call last):
        ...
        dsh_tools._errors.JsonSchemaError: unsupported JSON Schema: #: unknown keyword "pattern"
    """
    violations = list(_walk(schema))
    if violations:
        raise JsonSchemaError(violations)


# Stack entries: (node, pointer) to check a node, or (_EXIT, id) once its subtree is done.
_EXIT: Final = object()


def _walk(root: object) -> Iterator[str]:
    on_path: set[int] = set()
    # Nodes whose whole subtree has been checked. A shared sub-schema is checked (and its
    # problems reported) once, at its first pointer: walking a DAG of shared nodes again at
    # every occurrence could take exponential time.
    done: set[int] = set()
    stack: list[tuple[Any, Any]] = [(root, "#")]
    while stack:
        node, ptr = stack.pop()
        if node is _EXIT:
            on_path.discard(ptr)
            done.add(ptr)
            continue
        if not _is_dict(node):
            yield f"{_render_pointer(ptr)}: schema must be an object"
            continue
        key = id(node)
        if key in on_path:
            yield f"{_render_pointer(ptr)}: cycle"
            continue
        if key in done:
            continue
        problems, children = _check_node(node, ptr)
        if problems:
            where = _render_pointer(ptr)
            for problem in problems:
                yield f"{where}: {problem}"
        on_path.add(key)
        stack.append((_EXIT, key))
        stack.extend(reversed(children))


def _check_node(node: dict[Any, Any], ptr: _Pointer) -> tuple[list[str], list[tuple[Any, Any]]]:
    """Return the node's own problems (in key order) and its sub-schemas (in document order)."""
    problems: list[str] = []
    children: list[tuple[Any, Any]] = []
    declared: Any = node.get("type")
    type_valid = type(declared) is str and declared in _TYPE_SET
    # With an invalid "type" the intended type is unknown, so placement problems are not
    # reported for that node (the "type" problem is).
    placement_known = type_valid or "type" not in node
    for k, v in node.items():
        if type(k) is not str or k not in _KNOWN:
            problems.append(f'unknown keyword "{k}"')
        elif k == "type":
            if not type_valid:
                problems.append(_TYPE_PROBLEM)
        elif k in _OBJECT_KEYWORDS or k in _ARRAY_KEYWORDS:
            wanted = "object" if k in _OBJECT_KEYWORDS else "array"
            if placement_known and declared != wanted:
                problems.append(f'keyword "{k}" requires type "{wanted}"')
            _check_structural(k, v, ptr, problems, children)
        elif k == "oneOf":
            problems.extend(
                f'"oneOf" cannot be combined with "{other}"'
                for other in node
                if other in _NOT_WITH_ONE_OF
            )
            if not _is_list(v) or len(v) < 2:
                problems.append('"oneOf" must list at least two schemas')
            if _is_list(v):
                base = (ptr, "oneOf")
                children.extend((branch, (base, str(i))) for i, branch in enumerate(v))
        elif k == "enum":
            if not _is_list(v) or not v or not all(is_json_scalar(x) for x in v):
                problems.append('"enum" must be a non-empty list of scalars')
            elif type_valid:
                problems.extend(
                    f'"enum" value {_dumps(x)} does not match type "{declared}"'
                    for x in v
                    if not scalar_matches(x, declared)
                )
        elif k == "const":
            if not is_json_scalar(v):
                problems.append('"const" must be a scalar')
            elif type_valid and not scalar_matches(v, declared):
                problems.append(f'"const" value {_dumps(v)} does not match type "{declared}"')
        elif k in ("description", "title"):
            if type(v) is not str or not is_lossless_str(v):
                problems.append(f'annotation "{k}" must be a string')
        elif k == "default":
            if not _is_lossless(v):
                problems.append('annotation "default" must be lossless JSON')
        elif not _is_list(v) or not _is_lossless(v):  # "examples", the last known keyword
            problems.append('annotation "examples" must be a list of lossless JSON')
    return problems, children


def _check_structural(
    k: str,
    v: Any,
    ptr: _Pointer,
    problems: list[str],
    children: list[tuple[Any, Any]],
) -> None:
    if k == "properties":
        if not _is_dict(v):
            problems.append('"properties" must be an object of schemas')
            return
        if not all(type(name) is str and is_lossless_str(name) for name in v):
            problems.append('"properties" must be an object of schemas')
        base = (ptr, "properties")
        children.extend((sub, (base, _escape(str(name)))) for name, sub in v.items())
    elif k == "required":
        if (
            not _is_list(v)
            or not all(type(name) is str and is_lossless_str(name) for name in v)
            or len(set(v)) != len(v)
        ):
            problems.append('"required" must be a list of unique strings')
    elif k == "additionalProperties":
        if type(v) is not bool:
            problems.append('"additionalProperties" must be true or false')
    else:  # "items"
        children.append((v, (ptr, "items")))
