"""The JSON Schema subset and its validator (runtime.md §12.1, §12.2; conformance H group)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_tools import (
    FrozenDict,
    JsonSchemaError,
    Output,
    TextContent,
    ToolDefinition,
    assert_supported_json_schema,
    freeze_json,
    validate_args,
    validate_json_value,
)
from tests.helpers import nest
from tests.strategies import DISJOINT_SCHEMAS, json_values, valid_values

TYPE_PROBLEM = (
    '"type" must be one of "array", "boolean", "integer", "null", "number", "object", "string"'
)


def violations(schema: object) -> list[str]:
    """The violations ``assert_supported_json_schema`` raises (``[]`` when it accepts)."""
    try:
        assert_supported_json_schema(schema)
    except JsonSchemaError as exc:
        error = exc
    else:
        return []
    assert str(error) == "unsupported JSON Schema: " + "; ".join(error.violations)
    assert error.violations, "a JsonSchemaError lists at least one violation"
    return list(error.violations)


def obj(properties: dict[str, Any], *, required: list[str] | None = None, **kw: Any) -> Any:
    schema: dict[str, Any] = {"type": "object", "properties": properties, **kw}
    if required is not None:
        schema["required"] = required
    return schema


STR = {"type": "string"}


# --------------------------------------------------------------------------- §12.2 validation


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (None, "null"),
        ("nope", "text that is not valid JSON (Expecting value: line 1 column 1)"),
        ([], "an array"),
        ((), "an array"),
        (3, "a number"),
        (True, "a boolean"),
        (1.5, "a number"),
        ('"x"', "a string"),
        (
            '{"path": "notes.md"',
            "text that is not valid JSON (Expecting ',' delimiter: line 1 column 20)",
        ),
        (
            "{bad",
            "text that is not valid JSON "
            "(Expecting property name enclosed in double quotes: line 1 column 2)",
        ),
        ("NaN", "text that is not valid JSON (invalid constant NaN: line 1 column 1)"),
        (
            '{"a": [1, -Infinity]}',
            "text that is not valid JSON (invalid constant -Infinity: line 1 column 11)",
        ),
        ("[" * 100_000, "text that is not valid JSON (nesting too deep: line 1 column 1)"),
    ],
)
def test_h010_validate_args_non_object(args: object, what: str) -> None:
    """H-010 (§12.2): at the top level, the object violation says what arrived, with the JSON
    parser's message and position for text that does not parse."""
    schema = obj({"path": STR}, required=["path"])
    assert validate_args(schema, args) == [f'"arguments" must be an object, got {what}']


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"a": 1, "a": 2}', 'duplicate key "a": line 1 column 10'),
        ('{"a": {"k": 1},\n "b": {"k": 1, "k": 2}}', 'duplicate key "k": line 2 column 16'),
        ('[{"x": "\\"", "x": 0}]', 'duplicate key "x": line 1 column 14'),
        ('{"é": 1, "\\u00e9": 2}', 'duplicate key "é": line 1 column 10'),
    ],
)
def test_a_key_given_twice_is_not_valid_json(text: str, where: str) -> None:
    """Decision (one value per key): a repeated key makes argument text invalid, and the
    message names the key and where its second occurrence starts."""
    assert validate_args({"type": "object"}, text) == [
        f'"arguments" must be an object, got text that is not valid JSON ({where})'
    ]


def test_nested_object_violations_keep_the_plain_message() -> None:
    """§12.2: only the top level says what arrived; nested paths keep the plain text."""
    schema = obj({"opts": {"type": "object"}}, required=[])
    assert validate_args(schema, {"opts": "x"}) == ['"opts" must be an object']
    assert validate_json_value({"type": "object"}, 3, path="v") == ['"v" must be an object']


def test_h010_validate_args_valid() -> None:
    schema = obj({"path": STR}, required=["path"])
    assert validate_args(schema, {"path": "/tmp"}) == []
    assert validate_args(schema, freeze_json({"path": "/tmp"})) == []


def test_h011_missing_required() -> None:
    schema = obj({"path": STR}, required=["path"])
    assert validate_args(schema, {}) == ['missing required property "path"']


def test_h012_extra_keys_on_open_root() -> None:
    schema = obj({"path": STR}, required=["path"])
    assert validate_args(schema, {"path": "p", "extra": [1, {"x": None}]}) == []


def test_h013_default_is_not_applied() -> None:
    schema = obj({"n": {"type": "integer", "default": 3}})
    args: dict[str, Any] = {}
    assert validate_args(schema, args) == []
    assert args == {}  # validation never fills in a default


def test_h014_wrong_scalar_types() -> None:
    schema = obj({"s": STR, "n": {"type": "number"}, "b": {"type": "boolean"}})
    assert validate_args(schema, {"s": 1, "n": "1", "b": 0}) == [
        '"s" must be a string',
        '"n" must be a number',
        '"b" must be a boolean',
    ]


def test_h014_every_type_message() -> None:
    cases = {
        "string": "a string",
        "number": "a number",
        "integer": "an integer",
        "boolean": "a boolean",
        "null": "null",
        "object": "an object",
        "array": "an array",
    }
    for type_name, text in cases.items():
        wrong = None if type_name != "null" else 0
        assert validate_json_value({"type": type_name}, wrong, path="v") == [f'"v" must be {text}']


def test_h015_enum_violation() -> None:
    schema = obj({"color": {"type": "string", "enum": ["red", "green"]}})
    assert validate_args(schema, {"color": "blue"}) == ['"color" must be one of ["red","green"]']
    assert validate_args(schema, {"color": "red"}) == []


def test_h016_numeric_enum() -> None:
    schema = obj({"n": {"type": "integer", "enum": [1, 2]}})
    assert validate_args(schema, {"n": 3}) == ['"n" must be one of [1,2]']
    # JSON equality: 2.0 is 2, but true is not 1.
    assert validate_args(schema, {"n": 2.0}) == []
    assert validate_args(obj({"n": {"enum": [1, 2]}}), {"n": True}) == ['"n" must be one of [1,2]']


def test_h016_enum_value_not_matching_type() -> None:
    assert violations({"type": "integer", "enum": [1, "two"]}) == [
        '#: "enum" value "two" does not match type "integer"'
    ]
    with pytest.raises(JsonSchemaError):
        validate_json_value({"type": "integer", "enum": [1, "two"]}, 1)


def test_h017_unknown_type() -> None:
    assert violations({"type": "date"}) == [f"#: {TYPE_PROBLEM}"]
    with pytest.raises(JsonSchemaError, match="unsupported JSON Schema: #: "):
        validate_args({"type": "date"}, {})


def test_h018_nested_object_violations() -> None:
    schema = obj(
        {
            "config": obj({"host": STR}, required=["host"]),
            "bag": {"type": "object"},
        }
    )
    assert validate_args(schema, {"config": {}, "bag": []}) == [
        'missing required property "config.host"',
        '"bag" must be an object',
    ]


def test_h019_array_violations() -> None:
    schema = obj({"tags": {"type": "array", "items": STR}})
    assert validate_args(schema, {"tags": ["a", 1]}) == ['"tags[1]" must be a string']
    assert validate_args(schema, {"tags": "a"}) == ['"tags" must be an array']


def test_h020_array_of_objects() -> None:
    server = obj({"host": STR}, required=["host"])
    schema = obj({"servers": {"type": "array", "items": server}})
    args = {"servers": [{"host": "a"}, {"port": 1}]}
    assert validate_args(schema, args) == ['missing required property "servers[1].host"']


def test_h042_validation_roots() -> None:
    assert validate_json_value({"type": "string"}, "x", path="value") == []
    assert validate_json_value({"type": "string"}, 1, path="value") == ['"value" must be a string']
    assert validate_json_value({"type": "array", "items": STR}, ["a", 2], path="value") == [
        '"value[1]" must be a string'
    ]
    assert validate_json_value(obj({"a": STR}), {"a": 1}, path="value") == [
        '"value.a" must be a string'
    ]
    assert validate_json_value({"type": "null"}, None, path="value") == []
    assert validate_json_value({"type": "null"}, 0) == ['"arguments" must be null']


def test_h043_non_finite_and_number_kinds() -> None:
    schema = obj({"n": {"type": "number"}, "i": {"type": "integer"}})
    assert validate_args(schema, {"n": math.nan, "i": math.inf}) == [
        '"n" must be a finite JSON number',
        '"i" must be a finite JSON number',
    ]
    # A non-finite number gets only that message, whatever the declared type.
    assert validate_json_value({"type": "string"}, -math.inf, path="x") == [
        '"x" must be a finite JSON number'
    ]
    assert validate_args(schema, {"n": True, "i": False}) == [
        '"n" must be a number',
        '"i" must be an integer',
    ]
    assert validate_args(schema, {"n": 1, "i": 2.0}) == []
    assert validate_args(schema, {"i": 2.5}) == ['"i" must be an integer']


def test_h044_enum_and_const_together() -> None:
    schema = {"type": "string", "enum": ["a", "b"], "const": "a"}
    assert validate_json_value(schema, "a", path="v") == []
    assert validate_json_value(schema, "b", path="v") == ['"v" must be "a"']
    assert validate_json_value(schema, "c", path="v") == [
        '"v" must be one of ["a","b"]',
        '"v" must be "a"',
    ]


def test_h044_failed_type_check_skips_enum_and_const() -> None:
    schema = {"type": "string", "enum": ["a"], "const": "a"}
    assert validate_json_value(schema, 1, path="v") == ['"v" must be a string']


def test_h045_non_json_data() -> None:
    schema = obj({"tags": {"type": "array", "items": STR}, "s": STR})
    assert validate_args(schema, {"tags": ["a", {1, 2}], "s": b"x"}) == [
        '"tags[1]" must be a lossless JSON value',
        '"s" must be a lossless JSON value',
    ]
    assert validate_args(schema, {1: "x"}) == ['"arguments" must be a lossless JSON value']


@pytest.mark.parametrize(
    "bad",
    [
        -0.0,
        "\ud800",
        10**5000,
        FrozenDict,
        object(),
        {"k": 1}.keys(),
        iter(()),
        {"\udc00": 1},
    ],
    ids=[
        "negative-zero",
        "surrogate",
        "huge-int",
        "type",
        "object",
        "dict-keys",
        "iterator",
        "surrogate-key",
    ],
)
def test_h045_non_lossless_values_only_get_the_lossless_message(bad: object) -> None:
    for schema in ({}, {"type": "string"}, {"enum": [1]}, {"oneOf": [{}, STR]}):
        assert validate_json_value(schema, bad, path="x") == ['"x" must be a lossless JSON value']


def test_h045_non_lossless_values_nested_under_typed_nodes() -> None:
    schema = obj(
        {
            "s": STR,
            "n": {"type": "number"},
            "i": {"type": "integer"},
            "any": {},
            "xs": {"type": "array", "items": {"type": "number"}},
        }
    )
    value = {"s": "ok\udfff", "n": -0.0, "i": 10**5000, "any": "\ud800", "xs": [1, -0.0]}
    assert validate_args(schema, value) == [
        '"s" must be a lossless JSON value',
        '"n" must be a lossless JSON value',
        '"i" must be a lossless JSON value',
        '"any" must be a lossless JSON value',
        '"xs[1]" must be a lossless JSON value',
    ]


def test_h045_cyclic_data() -> None:
    loop: list[object] = []
    loop.append(loop)
    assert validate_json_value({}, loop, path="x") == ['"x[0]" must be a lossless JSON value']
    d: dict[str, object] = {}
    d["me"] = d
    assert validate_args({"type": "object"}, d) == ['"me" must be a lossless JSON value']


def test_h045_cyclic_data_inside_a_one_of_branch() -> None:
    loop: list[object] = []
    loop.append(loop)
    schema = {"oneOf": [{"type": "array"}, {"type": "null"}]}
    assert validate_json_value(schema, loop, path="x") == [
        '"x" must match exactly one oneOf branch (matched 0)'
    ]


def test_h045_shared_data_is_not_a_cycle() -> None:
    shared = [1, 2]
    assert validate_json_value({}, [shared, shared, {"a": shared}]) == []


def test_h046_array_items_in_index_order() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    assert validate_json_value(schema, ["a", 1, None, 2.5], path="xs") == [
        '"xs[0]" must be an integer',
        '"xs[2]" must be an integer',
        '"xs[3]" must be an integer',
    ]


def test_h047_overlapping_one_of() -> None:
    schema = {"oneOf": [{"type": "number"}, {"type": "integer"}]}
    assert validate_json_value(schema, 2, path="n") == [
        '"n" must match exactly one oneOf branch (matched 2)'
    ]
    assert validate_json_value(schema, 2.5, path="n") == []
    assert validate_json_value(schema, "x", path="n") == [
        '"n" must match exactly one oneOf branch (matched 0)'
    ]


def test_h047_one_of_with_structured_branches() -> None:
    a = obj({"kind": {"const": "a"}}, required=["kind"])
    b = obj({"kind": {"const": "b"}, "n": {"type": "integer"}}, required=["kind", "n"])
    schema = {"oneOf": [a, b]}
    assert validate_json_value(schema, {"kind": "a"}, path="v") == []
    assert validate_json_value(schema, {"kind": "b", "n": 1}, path="v") == []
    assert validate_json_value(schema, {"kind": "b"}, path="v") == [
        '"v" must match exactly one oneOf branch (matched 0)'
    ]


def test_h048_empty_schema() -> None:
    for value in (None, True, 0, 1.5, "s", [1, [2]], {"a": {"b": None}}, freeze_json([{}])):
        assert validate_json_value({}, value) == []
    assert validate_json_value({}, {1, 2}, path="v") == ['"v" must be a lossless JSON value']
    assert validate_json_value({}, {"a": [1, {2}]}, path="v") == [
        '"v.a[1]" must be a lossless JSON value'
    ]


def test_object_violation_order() -> None:
    # Missing required (in "required" order), then declared properties (in "properties"
    # order), then undeclared keys (in value order).
    schema = obj(
        {"a": STR, "b": STR},
        required=["z", "a", "y"],
        additionalProperties=False,
    )
    value = {"q": 1, "b": 2, "p": 3, "a": 4}
    assert validate_args(schema, value) == [
        'missing required property "z"',
        'missing required property "y"',
        '"a" must be a string',
        '"b" must be a string',
        '"q" is not a declared property (additionalProperties: false)',
        '"p" is not a declared property (additionalProperties: false)',
    ]


def test_open_object_checks_undeclared_values_for_losslessness() -> None:
    schema = obj({"a": STR})
    assert validate_args(schema, {"a": "x", "b": [1, math.nan]}) == [
        '"b[1]" must be a finite JSON number'
    ]


def test_paths_start_at_the_given_root() -> None:
    schema = {"type": "array", "items": obj({"k": STR})}
    assert validate_json_value(schema, [{"k": 1}]) == ['"[0].k" must be a string']
    assert validate_json_value(schema, [{"k": 1}], path="value") == [
        '"value[0].k" must be a string'
    ]


def test_h030_special_property_names() -> None:
    schema = obj({"__class__": STR, "__proto__": {"type": "integer"}}, required=["__proto__"])
    assert violations(schema) == []
    assert validate_args(schema, {"__class__": "x", "__proto__": 1}) == []
    assert validate_args(schema, {"__class__": 1}) == [
        'missing required property "__proto__"',
        '"__class__" must be a string',
    ]


def test_h029_deep_one_of_schema() -> None:
    schema = nest(5000, {"type": "null"}, lambda s: {"oneOf": [s, {"type": "string"}]})
    assert violations(schema) == []
    assert validate_json_value(schema, None) == []
    assert validate_json_value(schema, 1, path="v") == [
        '"v" must match exactly one oneOf branch (matched 0)'
    ]
    assert validate_json_value(freeze_json(schema), None) == []


def test_h029_deep_items_schema_and_data() -> None:
    schema = nest(5000, {"type": "integer"}, lambda s: {"type": "array", "items": s})
    data = nest(5000, "x", lambda v: [v])
    assert violations(schema) == []
    (violation,) = validate_json_value(schema, data)
    assert violation == '"' + "[0]" * 5000 + '" must be an integer'
    assert validate_json_value({}, data) == []
    assert validate_json_value({}, freeze_json(data)) == []


def test_deep_invalid_schema_is_reported_with_its_pointer() -> None:
    schema = nest(5000, {"type": "nope"}, lambda s: {"type": "array", "items": s})
    assert violations(schema) == ["#" + "/items" * 5000 + f": {TYPE_PROBLEM}"]


# --------------------------------------------------------------------------- §12.1 the subset


def test_h028_cycle() -> None:
    schema: dict[str, Any] = {"type": "object"}
    schema["properties"] = {"self": schema}
    assert violations(schema) == ["#/properties/self: cycle"]
    branch: dict[str, Any] = {"type": "array"}
    branch["items"] = {"oneOf": [branch, STR]}
    assert violations(branch) == ["#/items/oneOf/0: cycle"]


def test_h032_every_keyword_and_root_type_accepted() -> None:
    for type_name in ("string", "number", "integer", "boolean", "null", "array", "object"):
        assert violations({"type": type_name}) == []
    full = {
        "type": "object",
        "title": "T",
        "description": "D",
        "default": {"a": [1]},
        "examples": [{"a": "x"}, None],
        "properties": {
            "s": {"type": "string", "enum": ["a", "b"], "const": "a"},
            "n": {"type": "number", "enum": [1, 2.5]},
            "i": {"type": "integer", "const": 2.0},
            "b": {"type": "boolean", "const": True},
            "z": {"type": "null", "enum": [None]},
            "xs": {"type": "array", "items": {"type": "string"}},
            "u": {"oneOf": [{"type": "string"}, {"type": "null"}], "description": "maybe"},
            "e": {"enum": [1, "a", None, True]},
            "c": {"const": 1.5},
            "any": {},
        },
        "required": ["s"],
        "additionalProperties": False,
    }
    assert violations(full) == []
    assert violations(freeze_json(full)) == []


def test_h034_non_dict_node_unknown_type_list_type() -> None:
    assert violations([]) == ["#: schema must be an object"]
    assert violations(True) == ["#: schema must be an object"]
    assert violations(obj({"a": "string"})) == ["#/properties/a: schema must be an object"]
    assert violations({"type": "float"}) == [f"#: {TYPE_PROBLEM}"]
    assert violations({"type": ["string", "null"]}) == [f"#: {TYPE_PROBLEM}"]


def test_h035_one_of_rules() -> None:
    assert violations({"oneOf": [STR]}) == ['#: "oneOf" must list at least two schemas']
    assert violations({"oneOf": STR}) == ['#: "oneOf" must list at least two schemas']
    assert violations({"type": "string", "oneOf": [STR, {"type": "null"}]}) == [
        '#: "oneOf" cannot be combined with "type"'
    ]
    assert violations({"oneOf": [STR, {"type": "null"}], "enum": ["a"], "const": "a"}) == [
        '#: "oneOf" cannot be combined with "enum"',
        '#: "oneOf" cannot be combined with "const"',
    ]


def test_h036_unknown_and_misplaced_keywords() -> None:
    assert violations({"type": "string", "pattern": "^a"}) == ['#: unknown keyword "pattern"']
    assert violations({"type": "object", "items": STR}) == [
        '#: keyword "items" requires type "array"'
    ]
    assert violations({"properties": {}}) == ['#: keyword "properties" requires type "object"']
    assert violations({"type": "array", "required": []}) == [
        '#: keyword "required" requires type "object"'
    ]


def test_h037_all_violations_at_once() -> None:
    schema = {
        "type": "object",
        "pattern": "x",
        "properties": {"a": {"type": "str"}, "b": {"type": "array", "items": 5}},
        "required": "a",
    }
    assert violations(schema) == [
        '#: unknown keyword "pattern"',
        '#: "required" must be a list of unique strings',
        f"#/properties/a: {TYPE_PROBLEM}",
        "#/properties/b/items: schema must be an object",
    ]


def test_h038_object_keyword_values() -> None:
    assert violations({"type": "object", "properties": [STR]}) == [
        '#: "properties" must be an object of schemas'
    ]
    assert violations({"type": "object", "required": ["a", "a"]}) == [
        '#: "required" must be a list of unique strings'
    ]
    assert violations({"type": "object", "required": ["a", 1]}) == [
        '#: "required" must be a list of unique strings'
    ]
    assert violations({"type": "object", "additionalProperties": {}}) == [
        '#: "additionalProperties" must be true or false'
    ]
    assert violations({"type": "object", "additionalProperties": 0}) == [
        '#: "additionalProperties" must be true or false'
    ]


def test_h038_non_string_property_names() -> None:
    assert violations({"type": "object", "properties": {1: {"type": "x"}}}) == [
        '#: "properties" must be an object of schemas',
        f"#/properties/1: {TYPE_PROBLEM}",
    ]


def test_h039_enum_and_const_values() -> None:
    assert violations({"type": "string", "enum": ["a", 1, None]}) == [
        '#: "enum" value 1 does not match type "string"',
        '#: "enum" value null does not match type "string"',
    ]
    assert violations({"type": "integer", "enum": [1, 2.5, True]}) == [
        '#: "enum" value 2.5 does not match type "integer"',
        '#: "enum" value true does not match type "integer"',
    ]
    assert violations({"type": "boolean", "const": 0}) == [
        '#: "const" value 0 does not match type "boolean"'
    ]
    assert violations({"type": "array", "const": 1}) == [
        '#: "const" value 1 does not match type "array"'
    ]
    assert violations({"enum": []}) == ['#: "enum" must be a non-empty list of scalars']
    assert violations({"enum": [[1]]}) == ['#: "enum" must be a non-empty list of scalars']
    assert violations({"enum": [math.nan]}) == ['#: "enum" must be a non-empty list of scalars']
    assert violations({"const": {"a": 1}}) == ['#: "const" must be a scalar']


def test_h040_annotations() -> None:
    assert violations({"description": 1, "title": None}) == [
        '#: annotation "description" must be a string',
        '#: annotation "title" must be a string',
    ]
    assert violations({"default": math.nan}) == ['#: annotation "default" must be lossless JSON']
    assert violations({"examples": "x"}) == [
        '#: annotation "examples" must be a list of lossless JSON'
    ]
    assert violations({"examples": [{1, 2}]}) == [
        '#: annotation "examples" must be a list of lossless JSON'
    ]


def test_h041_shared_sub_schema() -> None:
    shared = {"type": "string"}
    schema = obj({"a": shared, "b": {"type": "array", "items": shared}})
    assert violations(schema) == []
    assert validate_args(schema, {"a": 1, "b": ["x", 2]}) == [
        '"a" must be a string',
        '"b[1]" must be a string',
    ]


def test_h041_shared_dag_is_checked_in_linear_time() -> None:
    # 2**200 paths through 200 shared levels: only walking each node once can finish.
    schema = nest(200, {"type": "null"}, lambda s: {"oneOf": [s, s]})
    assert violations(schema) == []


def test_shared_invalid_sub_schema_is_reported_once_at_its_first_pointer() -> None:
    shared = {"type": "text"}
    assert violations(obj({"a": shared, "b": shared})) == [f"#/properties/a: {TYPE_PROBLEM}"]


def test_pointer_escaping() -> None:
    schema = obj({"a/b": {"type": "x"}, "c~d": {"pattern": "."}})
    assert violations(schema) == [
        f"#/properties/a~1b: {TYPE_PROBLEM}",
        '#/properties/c~0d: unknown keyword "pattern"',
    ]


def test_h057_frozen_schema() -> None:
    plain = {
        "type": "object",
        "properties": {
            "kind": {"enum": ["a", "b"]},
            "u": {"oneOf": [STR, {"type": "null"}]},
            "xs": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["kind", "xs"],
        "examples": [{"kind": "a", "xs": []}],
    }
    frozen = freeze_json(plain)
    assert type(frozen) is FrozenDict
    assert type(frozen["required"]) is tuple
    assert violations(frozen) == []
    for args in ({}, {"kind": "c", "u": 1, "xs": [1, "2"]}, {"kind": "a", "xs": [1]}):
        expected = validate_args(plain, args)
        assert validate_args(frozen, args) == expected
        assert validate_args(frozen, freeze_json(args)) == expected
        assert validate_json_value(frozen, freeze_json(args), path="value") == (
            validate_json_value(plain, args, path="value")
        )
    assert validate_args(frozen, {}) == [
        'missing required property "kind"',
        'missing required property "xs"',
    ]


def test_h057_output_freezes_its_schema_raw_definition_keeps_parameters() -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    output = Output(schema=schema, render=lambda args, value: [TextContent("x")])
    assert type(output.schema) is FrozenDict
    assert output.schema == freeze_json(schema)
    parameters = {"type": "object"}

    async def body(args: object, ctx: object) -> object:
        return ["x"]

    defn = ToolDefinition(
        name="t", description="d", parameters=parameters, output=output, execute=body
    )
    assert defn.parameters is parameters


def test_h057_frozen_schema_rejections_use_the_same_texts() -> None:
    bad = {"type": "object", "required": ["a", "a"], "properties": {"a": {"type": "x"}}}
    assert violations(freeze_json(bad)) == violations(bad)


def test_only_exact_dict_and_list_types_are_schema_nodes() -> None:
    class MyDict(dict[str, Any]):
        pass

    assert violations(MyDict(type="string")) == ["#: schema must be an object"]


def test_many_frozen_schemas_validate_correctly() -> None:
    # More distinct frozen schemas than any compile cache would keep: results stay right.
    schemas = [freeze_json({"type": "integer", "enum": [i]}) for i in range(1500)]
    for i, schema in enumerate(schemas):
        assert validate_json_value(schema, i) == []
    assert validate_json_value(schemas[0], 1, path="v") == ['"v" must be one of [0]']
    assert validate_json_value(schemas[0], 0) == []


def test_validate_json_value_rejects_a_bad_schema() -> None:
    with pytest.raises(JsonSchemaError) as info:
        validate_json_value({"type": "string", "minLength": 1}, "x")
    assert info.value.violations == ('#: unknown keyword "minLength"',)
    assert isinstance(info.value, ValueError)


# --------------------------------------------------------------------------- properties

# Mostly JSON, with non-JSON leaves and keys mixed in at any depth.
_BAD_LEAVES = st.one_of(
    st.sampled_from([math.nan, -math.inf, -0.0, "\ud800", b"x", 1j, frozenset(), object]),
    # Built lazily: Hypothesis reprs its strategies, and this int has no repr.
    st.builds(lambda: 10**5000),
)
NEAR_JSON = st.recursive(
    st.one_of(json_values(max_leaves=3), _BAD_LEAVES),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 2)), children, max_size=3),
    ),
    max_leaves=8,
)


@given(value=NEAR_JSON)
def test_h053_validate_args_is_total(value: object) -> None:
    schema = obj({"a": STR, "b": {"type": "array", "items": {}}}, required=["a"])
    result = validate_args(schema, value)
    assert isinstance(result, list)
    assert all(isinstance(v, str) for v in result)
    if not isinstance(value, dict | FrozenDict):
        assert len(result) == 1
        assert result[0].startswith('"arguments" must be an object, got ') or result[0] in (
            '"arguments" must be a lossless JSON value',
            '"arguments" must be a finite JSON number',
        )


@given(data=st.data())
def test_h053_validate_json_value_is_total_for_generated_schemas(data: st.DataObject) -> None:
    schema = data.draw(DISJOINT_SCHEMAS)
    value = data.draw(NEAR_JSON)
    assert all(isinstance(v, str) for v in validate_json_value(schema, value, path="v"))


@given(data=st.data())
def test_h054_generated_arguments_validate(data: st.DataObject) -> None:
    params = data.draw(DISJOINT_SCHEMAS.map(lambda s: obj({"p": s}, required=["p"])))
    args = data.draw(valid_values(params))
    assert validate_args(params, args) == []
    assert validate_args(freeze_json(params), freeze_json(args)) == []


@given(data=st.data())
def test_h055_dropping_a_required_key_is_a_violation(data: st.DataObject) -> None:
    inner = data.draw(DISJOINT_SCHEMAS)
    params = obj({"p": inner, "q": STR}, required=["p", "q"])
    args = dict(data.draw(valid_values(params)))
    dropped = data.draw(st.sampled_from(["p", "q"]))
    del args[dropped]
    result = validate_args(params, args)
    assert f'missing required property "{dropped}"' in result


@given(value=json_values().filter(lambda v: not isinstance(v, dict)))
def test_h056_non_object_top_level_is_rejected(value: object) -> None:
    [message] = validate_args({"type": "object"}, value)
    assert message.startswith('"arguments" must be an object, got ')
    assert validate_args(obj({}, required=[]), freeze_json(value)) == [message]


@given(value=json_values())
def test_frozen_and_plain_data_validate_alike(value: object) -> None:
    schema = {"type": "array", "items": obj({"a": {"type": "integer"}}, required=["a"])}
    assert validate_json_value(schema, value) == validate_json_value(schema, freeze_json(value))
