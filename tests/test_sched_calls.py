"""ModelToolCall and parse_arguments (scheduler.md §2, §2.1, §2.2; S-024, S-042)."""

from __future__ import annotations

import math
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_sched import ModelToolCall, parse_arguments, run_tool_calls
from dsh_tools import FrozenDict, JsonValue, ToolRunContext, ToolRuntime, define_tool
from tests.helpers import text_output


def test_s024_empty_arguments_parse_to_a_new_empty_dict() -> None:
    first = parse_arguments("")
    second = parse_arguments("")
    assert first == {}
    assert type(first) is dict
    assert first is not second


def test_s024_valid_json_object_is_parsed() -> None:
    assert parse_arguments('{"a":1}') == {"a": 1}


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("[1, 2]", [1, 2]),
        ('"x"', "x"),
        ("3", 3),
        ("true", True),
        ("null", None),
        ("1e400", math.inf),
    ],
)
def test_s024_any_json_value_is_parsed(raw: str, value: object) -> None:
    assert parse_arguments(raw) == value


@pytest.mark.parametrize("raw", ["{bad", "NaN", "Infinity", "-Infinity", '{"a": NaN}', " ", "{}x"])
def test_s024_malformed_or_rejected_constant_returns_the_raw_string(raw: str) -> None:
    assert parse_arguments(raw) is raw


def test_s024_nesting_too_deep_for_the_parser_returns_the_raw_string() -> None:
    raw = "[" * 100_000 + "]" * 100_000
    assert parse_arguments(raw) is raw


def test_s024_integer_beyond_the_digit_limit_returns_the_raw_string() -> None:
    raw = "1" * 10_000
    assert parse_arguments(raw) is raw


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=10,
    )
)
def test_s024_round_trips_json_text(value: Any) -> None:
    import json

    assert parse_arguments(json.dumps(value)) == value


def _reference_parse(raw: str) -> object:
    """scheduler.md §2.2 spelled out with the standard library's own entry point."""
    import json

    def reject(name: str) -> object:
        raise ValueError(name)

    if raw == "":
        return {}
    try:
        return json.loads(raw, parse_constant=reject)
    except (ValueError, RecursionError):
        return raw


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
    max_leaves=8,
)
_AROUND = st.sampled_from(["", " ", "\n", "\t ", "x", "}", ",", "\ufeff", "1", '"'])


@given(_JSON_VALUES, _AROUND, _AROUND, st.booleans())
def test_s024_parses_exactly_as_json_loads_does(
    value: Any, before: str, after: str, truncate: bool
) -> None:
    """The scanner fast path gives json.loads' answer, whitespace, trailing data, rejected
    constants (infinite floats dump as Infinity) and truncated text included."""
    import json

    raw = before + json.dumps(value) + after
    if truncate:
        raw = raw[: len(raw) // 2]
    expected = _reference_parse(raw)
    got = parse_arguments(raw)
    if expected is raw:
        assert got is raw
    else:
        assert got == expected
        assert type(got) is type(expected)


def test_model_tool_call_keeps_str_arguments_unchanged() -> None:
    raw = '{"a": 1}'
    call = ModelToolCall(call_id="c1", name="t", arguments=raw)
    assert call.arguments is raw


def test_s042_mapping_arguments_are_frozen_at_construction() -> None:
    source: dict[str, Any] = {"tags": ["a"], "n": 1}
    call = ModelToolCall(call_id="c1", name="t", arguments=source)
    assert isinstance(call.arguments, FrozenDict)
    assert call.arguments == {"tags": ("a",), "n": 1}
    source["tags"].append("b")
    assert call.arguments["tags"] == ("a",)


def test_s042_frozen_mapping_is_kept_as_is() -> None:
    frozen = FrozenDict({"a": 1})
    assert ModelToolCall(call_id="c", name="t", arguments=frozen).arguments is frozen


def test_s042_non_lossless_mapping_raises_type_error() -> None:
    with pytest.raises(TypeError, match="not lossless JSON"):
        ModelToolCall(call_id="c", name="t", arguments={"x": math.nan})


def test_s042_int_arguments_raise_type_error() -> None:
    with pytest.raises(TypeError, match="arguments must be a str or a mapping, got int"):
        ModelToolCall(call_id="c", name="t", arguments=5)  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["call_id", "name"])
def test_call_id_and_name_must_be_str(field: str) -> None:
    fields: dict[str, Any] = {"call_id": "c", "name": "t", "arguments": ""}
    fields[field] = 1
    with pytest.raises(TypeError, match=f"ModelToolCall {field} must be a str, got int"):
        ModelToolCall(**fields)


def test_model_tool_call_is_frozen_keyword_only_and_comparable() -> None:
    call = ModelToolCall(call_id="c", name="t", arguments="")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        call.name = "u"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ModelToolCall("c", "t", "")  # type: ignore[call-arg]
    assert call == ModelToolCall(call_id="c", name="t", arguments="")
    assert hash(call) == hash(ModelToolCall(call_id="c", name="t", arguments=""))


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("{bad", "Expecting property name enclosed in double quotes: line 1 column 2"),
        ("NaN", "invalid constant NaN: line 1 column 1"),
        ('{"path": "notes.md"', "Expecting ',' delimiter: line 1 column 20"),
        ('{"path": "a.md", "path": "b.md"}', 'duplicate key "path": line 1 column 18'),
    ],
)
async def test_s024_a_define_tool_tool_explains_text_that_is_not_json(raw: str, why: str) -> None:
    """S-024 (§2.2) and H-010: text that does not parse reaches the tool as it is, and the
    tool's argument message tells the model what was wrong and where."""
    runtime = ToolRuntime()

    async def read(args: JsonValue, ctx: ToolRunContext) -> object:
        raise AssertionError("unreachable: the arguments are invalid")

    runtime.register(
        define_tool(
            name="read",
            description="read a file",
            parameters={"type": "object", "properties": {"path": {"type": "string"}}},
            output=text_output(),
            execute=read,
        )
    )
    outcome = await run_tool_calls(
        runtime, [ModelToolCall(call_id="c1", name="read", arguments=raw)]
    )
    [committed] = outcome.results
    assert committed.result.error is not None
    assert committed.result.error.message == (
        f'invalid arguments: "arguments" must be an object, got text that is not valid JSON ({why})'
    )


def test_a_key_given_twice_keeps_the_raw_text() -> None:
    """Decision (one value per key): a repeated key, at any depth, is not JSON for dsh-trio."""
    for raw in ('{"a": 1, "a": 2}', '[{"k": {"x": 1, "x": 1}}]'):
        assert parse_arguments(raw) is raw
    assert parse_arguments('{"a": {"a": 1}, "b": [{"a": 2}]}') == {"a": {"a": 1}, "b": [{"a": 2}]}


# -- the ToolCall's arguments: a snapshot straight from the text, when nobody sees the parse --


def _raw_tool(name: str, classifier: object) -> Any:
    from dsh_tools import ToolDefinition
    from tests.helpers import returning

    return ToolDefinition(
        name=name,
        description=name,
        parameters={},
        output=text_output(),
        execute=returning("ok"),
        is_concurrency_safe=classifier,  # type: ignore[arg-type]
    )


_TEXT = '{"paths": ["a", "b"], "opts": {"deep": [1, 2.5]}}'


def test_s024_text_is_parsed_into_its_snapshot_when_no_classifier_sees_it() -> None:
    from dsh_sched._calls import call_arguments
    from dsh_tools import freeze_json

    runtime = ToolRuntime()
    runtime.register(_raw_tool("plain", True))
    runtime.register(_raw_tool("judged", lambda args: True))
    for name in ("plain", "missing"):
        call = ModelToolCall(call_id="c", name=name, arguments=_TEXT)
        arguments, frozen = call_arguments(runtime, None, call, may_freeze=True)
        assert frozen
        assert type(arguments) is FrozenDict
        assert arguments == freeze_json(parse_arguments(_TEXT))
        assert call_arguments(runtime, None, call, may_freeze=False) == (
            parse_arguments(_TEXT),
            False,
        )
    judged = ModelToolCall(call_id="c", name="judged", arguments=_TEXT)
    arguments, frozen = call_arguments(runtime, None, judged, may_freeze=True)
    assert (type(arguments), type(arguments["paths"]), frozen) == (dict, list, False)  # type: ignore[index]
    for text, parsed in (("", {}), ("1e400", math.inf), ("{bad", "{bad")):
        call = ModelToolCall(call_id="c", name="plain", arguments=text)
        assert call_arguments(runtime, None, call, may_freeze=True) == (parsed, False)
    mapping = ModelToolCall(call_id="c", name="plain", arguments={"a": [1]})
    assert call_arguments(runtime, None, mapping, may_freeze=True) == (mapping.arguments, False)
    assert call_arguments(runtime, None, mapping, may_freeze=True)[0] is mapping.arguments


async def test_s045_a_raw_classifier_gets_the_parsed_value_through_a_batch() -> None:
    """S-045, M-008: a raw classifier is called with the parsed text (a dict holding
    lists), and the body with the snapshot, as before the snapshot came from the text."""
    seen: list[object] = []

    def classifier(args: object) -> bool:
        seen.append(args)
        return True

    runtime = ToolRuntime()
    runtime.register(_raw_tool("judged", classifier))
    runtime.register(_raw_tool("plain", True))
    calls = [
        ModelToolCall(call_id=f"c{i}", name=n, arguments=_TEXT)
        for i, n in enumerate(("judged", "plain", "judged"))
    ]
    outcome = await run_tool_calls(runtime, calls)
    assert not any(c.result.is_error for c in outcome.results)
    assert seen
    assert all(type(a) is dict and type(a["paths"]) is list for a in seen)


async def test_s045_a_snapshot_no_classifier_saw_gives_way_to_the_parsed_value() -> None:
    """S-045: a call parsed into its snapshot while its tool had no classifier, then
    classified again after the tool was replaced by one with a classifier, gets the parsed
    value, and keeps that object for every later classification."""
    from dsh_sched._driver import Driver
    from dsh_tools import Abort

    runtime = ToolRuntime()
    dispose = runtime.register(_raw_tool("t", True))
    calls = (ModelToolCall(call_id="c", name="t", arguments=_TEXT),)
    driver = Driver(
        runtime,
        calls,
        number=1,
        scope=None,
        abort=Abort(),
        max_parallel=1,
        sink=None,
        parent=None,
        root_call_id=None,
        keep_results=True,
    )
    first = driver.call_at(0)
    assert type(first.arguments) is FrozenDict
    assert driver.call_at(0) is first  # still nothing to see it
    dispose()
    runtime.register(_raw_tool("t", lambda args: True))
    second = driver.call_at(0)
    assert type(second.arguments) is dict
    assert second.arguments == parse_arguments(_TEXT)
    assert driver.call_at(0) is second
