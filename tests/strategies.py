"""Hypothesis strategies shared by the tests: JSON values, near-JSON values and results.

Every strategy builds values through the public constructors, so a generated ``ToolResult``
is one that any user (or the runtime) could have built.
"""

from __future__ import annotations

import base64
import collections
import decimal
import enum
import math
import sys
from typing import Any

import attrs
from hypothesis import strategies as st

from dsh_tools import (
    ContentBlock,
    ErrorInfo,
    FrozenDict,
    ImageContent,
    TextContent,
    ToolError,
    ToolResult,
    UserMessage,
    freeze_json,
)

__all__ = [
    "content_blocks",
    "error_infos",
    "failed_results",
    "frozen_json_values",
    "image_contents",
    "json_scalars",
    "json_values",
    "maybe_json_values",
    "spec_accepts",
    "successful_results",
    "text_contents",
    "tool_errors",
    "tool_results",
    "user_messages",
]


# --------------------------------------------------------------------------- JSON values


def _no_negative_zero(x: float) -> float:
    return 0.0 if x == 0.0 else x


def json_scalars() -> st.SearchStrategy[Any]:
    """Lossless JSON scalars: ``None``, bools, ints, finite floats (never ``-0.0``), strs."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**128), max_value=2**128),
        st.floats(allow_nan=False, allow_infinity=False).map(_no_negative_zero),
        st.text(max_size=12),  # hypothesis never generates surrogates in text() by default
    )


def json_values(*, max_leaves: int = 25) -> st.SearchStrategy[Any]:
    """Plain (mutable) JSON values: scalars, ``list`` and ``dict`` with ``str`` keys."""
    return st.recursive(
        json_scalars(),
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(st.text(max_size=6), children, max_size=4),
        ),
        max_leaves=max_leaves,
    )


def frozen_json_values(*, max_leaves: int = 25) -> st.SearchStrategy[Any]:
    """Frozen JSON values (tuples and ``FrozenDict``), made by ``freeze_json``."""
    return json_values(max_leaves=max_leaves).map(freeze_json)


# --------------------------------------------------------------------------- near-JSON values


class _Color(enum.Enum):
    RED = "red"


class _Level(enum.IntEnum):
    LOW = 1


class _Str(str):
    __slots__ = ()


class _Int(int):
    __slots__ = ()


class _Float(float):
    __slots__ = ()


class _List(list[Any]):
    pass


class _Tuple(tuple[Any, ...]):
    __slots__ = ()


class _Dict(dict[str, Any]):
    pass


@attrs.frozen
class _Point:
    x: int = 0


_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)


def _surrogate_text() -> st.SearchStrategy[str]:
    return st.builds(
        lambda a, s, b: a + s + b, st.text(max_size=3), _SURROGATES, st.text(max_size=3)
    )


def _huge_int() -> int:
    """An int with more decimal digits than the default limit (its repr raises: keep it lazy)."""
    return 10**5000


def _bad_scalars() -> st.SearchStrategy[Any]:
    """Leaves that ``freeze_json`` must reject (runtime.md §2.1)."""
    return st.one_of(
        st.sampled_from([math.nan, math.inf, -math.inf, -0.0]),
        _surrogate_text(),
        st.builds(_huge_int),
        st.sampled_from(
            [
                _Color.RED,
                _Level.LOW,
                _Str("s"),
                _Int(1),
                _Float(1.5),
                b"bytes",
                bytearray(b"x"),
                1j,
                decimal.Decimal("1.5"),
                _Point(),
            ]
        ),
        st.builds(set),
        st.builds(frozenset),
        st.builds(lambda: lambda: None),
        st.builds(collections.OrderedDict),
        st.builds(_Dict),
        st.builds(_List),
        st.builds(_Tuple),
    )


def maybe_json_values() -> st.SearchStrategy[Any]:
    """Values that are mostly JSON, sometimes with one or more non-lossless parts.

    Includes tuples and ``FrozenDict`` (both accepted) and dicts with non-``str`` or
    surrogate keys (rejected). No cycles: those are tested by example.
    """
    leaves = st.one_of(json_scalars(), json_scalars(), _bad_scalars())
    keys = st.one_of(
        st.text(max_size=4),
        st.text(max_size=4),
        _surrogate_text(),
        st.integers(0, 3),
        st.none(),
        st.tuples(st.text(max_size=2)),
    )
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=3),
            st.lists(children, max_size=3).map(tuple),
            st.dictionaries(keys, children, max_size=3),
            st.dictionaries(st.text(max_size=4), json_values(max_leaves=4), max_size=3).map(
                FrozenDict
            ),
        ),
        max_leaves=12,
    )


def _lossless_str(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def spec_accepts(value: object) -> bool:
    """A reference reading of runtime.md §2.1 (recursive; fine for generated sizes).

    Exact types only (``bool`` aside); ``FrozenDict`` is trusted as frozen by construction.
    """
    t = type(value)
    if value is None or t is bool:
        return True
    if t is str:
        return _lossless_str(value)  # type: ignore[arg-type]
    if t is int:
        if sys.get_int_max_str_digits() == 0:
            return True
        try:
            str(value)  # raises ValueError above the digit limit
        except ValueError:
            return False
        return True
    if t is float:
        f: float = value  # type: ignore[assignment]
        return math.isfinite(f) and not (f == 0.0 and math.copysign(1.0, f) < 0)
    if t is FrozenDict:
        return True
    if t is list or t is tuple:
        return all(spec_accepts(item) for item in value)  # type: ignore[attr-defined]
    if t is dict:
        d: dict[object, object] = value  # type: ignore[assignment]
        return all(type(k) is str and _lossless_str(k) for k in d) and all(
            spec_accepts(v) for v in d.values()
        )
    return False


# --------------------------------------------------------------------------- results


def text_contents() -> st.SearchStrategy[TextContent]:
    return st.builds(TextContent, st.text(max_size=20))


def image_contents() -> st.SearchStrategy[ImageContent]:
    return st.builds(
        ImageContent,
        st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode("ascii")),
        st.sampled_from(["image/png", "image/jpeg", "image/webp"]),
    )


def content_blocks() -> st.SearchStrategy[ContentBlock]:
    return st.one_of(text_contents(), image_contents())


def _sources() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.just({"kind": "tool"}),
        st.dictionaries(st.text(max_size=6), json_values(max_leaves=4), max_size=3),
    )


def user_messages() -> st.SearchStrategy[UserMessage]:
    def build(content: list[ContentBlock], source: object | None, id_: str | None) -> UserMessage:
        kwargs: dict[str, Any] = {"content": content}
        if source is not None:
            kwargs["source"] = source
        if id_ is not None:
            kwargs["id"] = id_
        return UserMessage(**kwargs)

    return st.builds(
        build,
        st.lists(content_blocks(), max_size=3),
        st.none() | _sources(),
        st.none() | st.text(min_size=1, max_size=10),
    )


def error_infos() -> st.SearchStrategy[ErrorInfo]:
    return st.builds(
        ErrorInfo,
        st.sampled_from(["HarnessError", "ToolNotFoundError", "AbortError"]) | st.text(),
        st.sampled_from(["UNKNOWN_TOOL", "ABORTED", "ENOSPC"]) | st.text(),
    )


def tool_errors() -> st.SearchStrategy[ToolError]:
    return st.builds(ToolError, st.text(max_size=20), st.none() | error_infos())


def _meta() -> st.SearchStrategy[Any]:
    return st.none() | json_values(max_leaves=6)


def successful_results() -> st.SearchStrategy[ToolResult]:
    return st.builds(
        ToolResult,
        is_error=st.just(False),
        content=st.lists(content_blocks(), max_size=3),
        value=json_values(max_leaves=8),
        meta=_meta(),
        additional_contexts=st.lists(user_messages(), max_size=2),
        concludes_turn=st.booleans(),
    )


def failed_results() -> st.SearchStrategy[ToolResult]:
    return st.builds(
        ToolResult,
        is_error=st.just(True),
        content=st.lists(content_blocks(), max_size=3),
        error=tool_errors(),
        meta=_meta(),
        additional_contexts=st.lists(user_messages(), max_size=2),
    )


def tool_results() -> st.SearchStrategy[ToolResult]:
    """Any valid ``ToolResult`` (success or failure)."""
    return st.one_of(successful_results(), failed_results())


# -- JSON Schemas of the supported subset (runtime.md §12.1) and values near them -----------

SCALAR_TYPES = ("string", "number", "integer", "boolean", "null")
# Property names include ones that are special elsewhere, and path-like characters.
PROPERTY_NAMES = st.sampled_from(["a", "b", "path", "__proto__", "__class__", "x.y", "é", ""])


def scalars_of(type_name: str) -> st.SearchStrategy[Any]:
    """Small JSON scalars of one JSON type (small ranges, so that enums get hit)."""
    if type_name == "string":
        return st.text(alphabet="ab", max_size=2)
    if type_name == "integer":
        return st.one_of(st.integers(-3, 3), st.integers(-3, 3).map(float))
    if type_name == "number":
        return st.one_of(
            st.integers(-3, 3),
            st.sampled_from([0.5, -1.5, 2.0, 1e300]),
            st.floats(-4, 4, allow_nan=False).map(_no_negative_zero),
        )
    if type_name == "boolean":
        return st.booleans()
    return st.none()


ANY_SCALAR = st.one_of(*(scalars_of(t) for t in SCALAR_TYPES))
# Small arbitrary JSON, cheaper to draw than a recursive strategy.
JUNK = st.one_of(
    ANY_SCALAR,
    st.lists(ANY_SCALAR, max_size=2),
    st.lists(ANY_SCALAR, max_size=2).map(tuple),
    st.dictionaries(PROPERTY_NAMES, ANY_SCALAR, max_size=2),
)


@st.composite
def _annotations(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(st.sets(st.sampled_from(["description", "title", "default", "examples"])))
    out: dict[str, Any] = {}
    for key in sorted(keys):
        if key in ("description", "title"):
            out[key] = draw(st.text(max_size=5))
        elif key == "default":
            out[key] = draw(JUNK)
        else:
            out[key] = draw(st.lists(JUNK, max_size=2))
    return out


@st.composite
def _leaf_schemas(draw: st.DrawFn, type_name: str | None = None) -> dict[str, Any]:
    if type_name in ("object", "array"):
        return {"type": type_name, **draw(_annotations())}
    if type_name is not None:
        shape = draw(st.sampled_from(["type", "type+enum", "type+const"]))
    else:
        shape = draw(
            st.sampled_from(
                ["type", "type+enum", "type+const", "any", "enum", "const", "container"]
            )
        )
    schema: dict[str, Any] = {}
    if shape.startswith("type"):
        t = draw(st.sampled_from(SCALAR_TYPES)) if type_name is None else type_name
        schema["type"] = t
        if shape == "type+enum":
            schema["enum"] = draw(st.lists(scalars_of(t), min_size=1, max_size=3))
        elif shape == "type+const":
            schema["const"] = draw(scalars_of(t))
    elif shape == "enum":
        schema["enum"] = draw(st.lists(ANY_SCALAR, min_size=1, max_size=3))
    elif shape == "const":
        schema["const"] = draw(ANY_SCALAR)
    elif shape == "container":
        schema["type"] = draw(st.sampled_from(["object", "array"]))
    schema.update(draw(_annotations()))
    return schema


# Type classes for disjoint oneOf branches: "integer" values are numbers too, so the two
# share one class.
_TYPE_CLASSES = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean"}
_TYPE_CLASSES.update(null="null", object="object", array="array")


@st.composite
def _objects_schemas(draw: st.DrawFn, depth: int, disjoint: bool) -> dict[str, Any]:
    props = draw(st.dictionaries(PROPERTY_NAMES, _schema(depth - 1, disjoint), max_size=3))
    schema: dict[str, Any] = {"type": "object"}
    if draw(st.booleans()) or props:
        schema["properties"] = props
    names = list(props)
    if not disjoint:
        names.append("zz")  # a required name with no property schema
    required = draw(st.lists(st.sampled_from(names), unique=True) if names else st.just([]))
    if draw(st.booleans()) or required:
        schema["required"] = required
    if draw(st.booleans()):
        schema["additionalProperties"] = draw(st.booleans())
    return schema


@st.composite
def _array_schemas(draw: st.DrawFn, depth: int, disjoint: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array"}
    if draw(st.booleans()):
        schema["items"] = draw(_schema(depth - 1, disjoint))
    return schema


@st.composite
def _one_of_schemas(draw: st.DrawFn, depth: int, disjoint: bool) -> dict[str, Any]:
    if disjoint:
        # Typed branches of different type classes: a value made for one branch can match
        # no other, so "exactly one" holds for generated valid values. A drawn child of the
        # wrong class is swapped for a leaf of the wanted type.
        wanted = draw(
            st.lists(
                st.sampled_from(sorted(_TYPE_CLASSES)),
                min_size=2,
                max_size=3,
                unique_by=_TYPE_CLASSES.__getitem__,
            )
        )
        branches = []
        for t in wanted:
            child = draw(_schema(depth - 1, disjoint))
            if child.get("type") != t:
                child = draw(_leaf_schemas(t))
            branches.append(child)
    else:
        branches = draw(st.lists(_schema(depth - 1, disjoint), min_size=2, max_size=3))
    schema: dict[str, Any] = {"oneOf": branches}
    schema.update(draw(_annotations()))
    return schema


def _schema(depth: int, disjoint: bool) -> st.SearchStrategy[Any]:
    if depth <= 0:
        return _leaf_schemas()
    return st.one_of(
        _leaf_schemas(),
        _objects_schemas(depth, disjoint),
        _array_schemas(depth, disjoint),
        _one_of_schemas(depth, disjoint),
    )


def schemas(*, disjoint: bool = False, max_depth: int = 3) -> st.SearchStrategy[Any]:
    """Plain schemas inside the supported subset, any root, nested at most ``max_depth``.

    With ``disjoint=True`` every generated schema is satisfiable by :func:`valid_values`:
    ``oneOf`` branches have different types and ``required`` names are declared.
    """
    return _schema(max_depth, disjoint)


def _values(schema: dict[str, Any], *, near: bool) -> st.SearchStrategy[Any]:
    """Values for ``schema``; with ``near``, each level may also be dropped or replaced."""
    junk = JUNK
    if "oneOf" in schema:
        made = st.one_of(*(_values(b, near=near) for b in schema["oneOf"]))
    elif "const" in schema:
        made = st.just(schema["const"])
    elif "enum" in schema:
        made = st.sampled_from(schema["enum"])
    else:
        t = schema.get("type")
        if t is None:
            made = JUNK
        elif t == "object":
            made = _objects(schema, near=near)
        elif t == "array":
            items = schema.get("items")
            made = st.lists(
                junk if items is None else _values(items, near=near),
                max_size=3,
            )
        else:
            made = scalars_of(t)
    if near:
        return st.one_of(made, made, made, junk, ANY_SCALAR)
    return made


def _objects(schema: dict[str, Any], *, near: bool) -> st.SearchStrategy[Any]:
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    fixed = {n: _values(props.get(n, {}), near=near) for n in required if not near}
    optional = {n: _values(s, near=near) for n, s in props.items() if near or n not in required}
    if near:
        optional.update({n: JUNK for n in required if n not in props})
    base = st.fixed_dictionaries(fixed, optional=optional)
    if schema.get("additionalProperties") is False and not near:
        return base
    # Undeclared keys: never a declared name, whose value would then be unconstrained.
    undeclared = st.text(alphabet="cd", min_size=1, max_size=2).filter(lambda k: k not in props)
    extra = st.dictionaries(undeclared, JUNK, max_size=2)
    return st.builds(lambda a, b: {**b, **a}, base, extra)


def valid_values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values that satisfy a schema from ``schemas(disjoint=True)``."""
    return _values(schema, near=False)


def near_values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values near ``schema``: mostly conforming, with dropped keys and replaced parts."""
    return _values(schema, near=True)


SCHEMAS = schemas()
DISJOINT_SCHEMAS = schemas(disjoint=True)
