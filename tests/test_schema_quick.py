"""The per-call fast path of output validation agrees with the full validator."""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import freeze_json
from dsh_tools._schema_quick import _QUICK_DEPTH
from dsh_tools._schema_validate import CompiledSchema
from tests.strategies import json_values, near_values, schemas, valid_values

_TYPES = ("string", "boolean", "null", "integer", "number", "object", "array")
_LEAF_SCHEMAS: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.just({}),
    st.just({"description": "anything"}),
    st.sampled_from(_TYPES).map(lambda t: {"type": t, "title": "t"}),
)


@st.composite
def _flat_object_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """Objects whose properties are leaf schemas: what ``@tool`` makes of scalar parameters."""
    properties = draw(st.dictionaries(st.sampled_from("abcd"), _LEAF_SCHEMAS, max_size=4))
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = draw(st.lists(st.sampled_from("abcde"), unique=True, max_size=3))
    if required:
        schema["required"] = required
    additional = draw(st.sampled_from([None, True, False]))
    if additional is not None:
        schema["additionalProperties"] = additional
    return schema


_QUICK_SCHEMAS: st.SearchStrategy[dict[str, Any]] = st.one_of(_LEAF_SCHEMAS, _flat_object_schemas())


@settings(max_examples=300)
@given(st.data())
def test_validate_frozen_equals_validate_on_frozen_values(data: st.DataObject) -> None:
    schema: Any = data.draw(st.one_of(_QUICK_SCHEMAS, schemas()))
    value = data.draw(
        st.one_of(valid_values(schema), near_values(schema), json_values()), label="value"
    )
    try:
        frozen = freeze_json(value)
    except TypeError:
        return  # the pipeline only validates values that froze
    compiled = CompiledSchema(schema)
    assert compiled.validate_frozen(frozen, "value") == compiled.validate(frozen, "value")


def test_quick_types_accept_exactly_their_type() -> None:
    cases = {
        "string": ("s", 1),
        "boolean": (True, 1),
        "null": (None, 0),
        "integer": (2.0, 2.5),
        "number": (1.5, True),
        "object": (freeze_json({"a": 1}), ()),
        "array": ((1,), freeze_json({})),
    }
    for type_name, (good, bad) in cases.items():
        compiled = CompiledSchema({"type": type_name})
        assert compiled.validate_frozen(good) == [], type_name
        assert compiled.validate_frozen(bad, "v") == compiled.validate(bad, "v") != [], type_name


@settings(max_examples=400)
@given(st.data())
def test_the_flat_object_acceptor_decides_what_the_walk_decides(data: st.DataObject) -> None:
    """It never accepts an invalid value, and rejects a valid one only for an integral
    float under "integer" (valid, but left to the full walk)."""
    schema = data.draw(_flat_object_schemas(), label="schema")
    value = data.draw(
        st.one_of(valid_values(schema), near_values(schema), json_values()), label="value"
    )
    try:
        frozen = freeze_json(value)
    except TypeError:
        return
    compiled = CompiledSchema(schema)
    quick = compiled._quick
    assert quick is not None
    valid = compiled.validate(frozen) == []
    integral_float = isinstance(frozen, dict) and any(
        type(frozen.get(name)) is float and sub.get("type") == "integer"
        for name, sub in schema["properties"].items()
    )
    assert quick(frozen) == (valid and not integral_float)


def test_the_acceptor_takes_nested_objects_arrays_and_string_enums() -> None:
    leaf = {"type": "string"}
    taken = [
        {"type": "object"},
        {"type": "object", "properties": {"a": leaf, "b": {}}, "required": ["a"]},
        {"type": "object", "properties": {"a": leaf}, "additionalProperties": False},
        {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}},
        {"type": "object", "properties": {"a": {"type": "string", "enum": ["x"]}}},
        {"type": "object", "properties": {"a": {"type": "array", "items": leaf}}},
        {"type": "array", "items": {}},
        {"type": "array", "items": {"type": "array", "items": leaf}},
    ]
    for schema in taken:
        assert CompiledSchema(schema)._quick is not None, schema
    left_to_the_walk = [
        {"type": "object", "properties": {"a": {"enum": ["x"]}}},
        {"type": "object", "properties": {"a": {"oneOf": [leaf, {"type": "null"}]}}},
        {"type": "array", "items": {"oneOf": [leaf, {"type": "null"}]}},
        {"type": "integer", "enum": [1]},
    ]
    for schema in left_to_the_walk:
        assert CompiledSchema(schema)._quick is None, schema


def test_a_schema_nested_too_deep_has_no_acceptor() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(_QUICK_DEPTH + 2):
        schema = {"type": "array", "items": schema}
    assert CompiledSchema(schema)._quick is None
    assert CompiledSchema(schema["items"]["items"])._quick is not None


@settings(max_examples=400)
@given(st.data())
def test_an_acceptor_never_accepts_an_invalid_value(data: st.DataObject) -> None:
    schema: Any = data.draw(schemas(), label="schema")
    value = data.draw(
        st.one_of(valid_values(schema), near_values(schema), json_values()), label="value"
    )
    try:
        frozen = freeze_json(value)
    except TypeError:
        return
    compiled = CompiledSchema(schema)
    if compiled._quick is not None and compiled._quick(frozen):
        assert compiled.validate(frozen) == []


def test_a_nested_acceptor_on_chosen_values() -> None:
    schema = {
        "type": "object",
        "properties": {
            "filters": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "op": {"type": "string", "enum": ["eq", "lt"]},
                        "value": {"type": "string"},
                        "any": {},
                    },
                    "required": ["op"],
                    "additionalProperties": False,
                },
            },
            "tags": {"type": "array", "items": {"type": "string"}},
            "raw": {"type": "array", "items": {}},
        },
    }
    compiled = CompiledSchema(schema)
    quick = compiled._quick
    assert quick is not None
    accepted = [
        {"filters": [{"op": "eq", "value": "v", "any": [1]}, {"op": "lt"}], "tags": ["a"]},
        {"raw": [1, "x", None]},
        {},
    ]
    for value in accepted:
        assert quick(freeze_json(value)), value
    rejected = [
        {"filters": [{"op": "gt"}]},  # not in the enum
        {"filters": [{"op": 1}]},
        {"filters": [{"value": "v"}]},  # "op" missing
        {"filters": [{"op": "eq", "extra": 1}]},  # undeclared
        {"filters": {"op": "eq"}},  # not an array
        {"tags": ["a", 1]},
        {"raw": {"a": 1}},
    ]
    for value in rejected:
        frozen = freeze_json(value)
        assert not quick(frozen), value
        assert compiled.validate_frozen(frozen) == compiled.validate(frozen) != [], value


def test_the_acceptor_never_takes_an_unfrozen_object() -> None:
    compiled = CompiledSchema({"type": "object", "properties": {"a": {"type": "string"}}})
    assert compiled._quick is not None
    assert not compiled._quick({"a": "x"})
    assert compiled.validate_frozen({"a": 1}, "") == ['"a" must be a string']


def test_the_flat_object_acceptor_on_chosen_values() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "x": {"type": "number"}, "s": {"type": "string"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    compiled = CompiledSchema(schema)
    quick = compiled._quick
    assert quick is not None
    accepted = [{"n": 1}, {"n": 1, "x": 2.5, "s": ""}, {"n": 10**30, "x": 3}]
    for value in accepted:
        assert quick(freeze_json(value)), value
    rejected = [
        {"n": 2.5},  # invalid
        {"n": True},  # invalid: a bool is not an integer
        {"n": 1, "x": False},  # invalid
        {"n": 1, "s": None},  # invalid
        {"x": 1},  # invalid: "n" is missing
        {"n": 1, "extra": 1},  # invalid: undeclared
        {"n": 2.0},  # valid, decided by the full walk
    ]
    for value in rejected:
        assert not quick(freeze_json(value)), value
    assert compiled.validate_frozen(freeze_json({"n": 2.0})) == []


def test_a_nested_acceptor_gives_way_near_the_recursion_limit() -> None:
    """With little recursion left, a nested acceptor's recursion would overflow: the full
    walk (iterative) decides instead, with the same answer. Each recursion limit just
    above the current depth is tried: wherever the walk alone still fits,
    ``validate_frozen`` answers as it does, and at some of them the acceptor overflowed."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(8):
        schema = {"type": "array", "items": {"type": "object", "properties": {"a": schema}}}
    compiled = CompiledSchema(schema)
    quick = compiled._quick
    assert quick is not None
    value: Any = "x"
    for _ in range(8):
        value = [{"a": value}]
    good = freeze_json(value)
    bad = freeze_json(json.loads(json.dumps(value).replace('"x"', "1")))
    expected = {id(good): [], id(bad): compiled.validate(bad)}
    assert expected[id(bad)] != []

    def attempt(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except RecursionError:
            return RecursionError

    limit = sys.getrecursionlimit()
    depth = len(traceback.extract_stack())
    overflowed = 0
    try:
        for extra in range(120):
            for frozen in (good, bad):
                try:
                    sys.setrecursionlimit(depth + extra)
                except RecursionError:
                    continue  # below the current depth (C calls count too)
                # Through one more frame, as validate_frozen calls validate.
                walked = attempt(lambda f: compiled.validate(f), frozen)
                accepted = attempt(quick, frozen)
                answer = attempt(compiled.validate_frozen, frozen)
                sys.setrecursionlimit(limit)
                if walked is not RecursionError:
                    assert walked == expected[id(frozen)]
                    assert answer == walked
                    overflowed += accepted is RecursionError
    finally:
        sys.setrecursionlimit(limit)
    assert overflowed > 0
