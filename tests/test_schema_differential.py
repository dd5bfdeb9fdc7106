"""Differential test of the hand-written subset validator against ``jsonschema``.

Hypothesis generates schemas inside the supported subset (runtime.md §12.1) and values near
them; "no violation" must agree with ``Draft202012Validator(schema).is_valid(value)`` both
ways. Within the subset the two semantics coincide: ``2.0`` is an integer, a bool is not a
number, ``1 == 1.0`` but ``true != 1`` in ``enum``/``const``, objects are open unless
``additionalProperties`` is ``false``, and annotations never constrain.

The schema and value strategies here are also used by ``test_schema.py``.
"""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from dsh_tools import assert_supported_json_schema, freeze_json, thaw_json, validate_json_value
from tests.strategies import json_values

__all__ = ["near_values", "schemas", "valid_values"]

SCALAR_TYPES = ("string", "number", "integer", "boolean", "null")
# Property names include ones that are special elsewhere, and path-like characters.
PROPERTY_NAMES = st.sampled_from(["a", "b", "path", "__proto__", "__class__", "x.y", "é", ""])


def _no_negative_zero(x: float) -> float:
    return 0.0 if x == 0.0 else x


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


def _maybe_frozen(data: st.DataObject, value: Any) -> Any:
    return freeze_json(value) if data.draw(st.booleans()) else value


@settings(max_examples=500)
@given(st.data())
def test_validity_agrees_with_jsonschema(data: st.DataObject) -> None:
    schema = data.draw(SCHEMAS, label="schema")
    value = data.draw(st.one_of(near_values(schema), json_values(max_leaves=4)), label="value")
    assert_supported_json_schema(schema)
    oracle = Draft202012Validator(thaw_json(schema)).is_valid(thaw_json(value))
    ours = validate_json_value(_maybe_frozen(data, schema), _maybe_frozen(data, value))
    event(f"valid={oracle}")
    assert (not ours) == oracle, ours


@settings(max_examples=150)
@given(st.data())
def test_valid_values_agree_with_jsonschema(data: st.DataObject) -> None:
    # Guards the generator used by test_schema.py's H-054 property: what it calls valid,
    # the oracle calls valid too.
    schema = data.draw(DISJOINT_SCHEMAS, label="schema")
    value = data.draw(valid_values(schema), label="value")
    assert Draft202012Validator(schema).is_valid(value)
    assert validate_json_value(schema, value) == []
