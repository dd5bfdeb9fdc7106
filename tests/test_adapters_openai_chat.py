"""``dsh_sched.adapters.openai_chat`` (integrations §2.5)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dsh_sched import run_tool_calls
from dsh_sched.adapters import ProviderFormatError, ToolTurn
from dsh_sched.adapters import openai_chat as chat
from dsh_tools import FrozenDict, TextContent, ToolRuntime
from tests.adapter_helpers import PNG, adapter_runtime, answer, golden
from tests.helpers import ECHO_PARAMETERS, error_text, exactly, make_echo


def message(*tool_calls: object, **fields: object) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(tool_calls), **fields}


def function_call(call_id: str, name: str, arguments: object) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_a002_tools_for_echo() -> None:
    runtime = ToolRuntime()
    runtime.register(make_echo())
    assert chat.tools(runtime.schemas()) == [
        {
            "type": "function",
            "function": {
                "name": "echo",
                "description": "Echo the given text.",
                "parameters": ECHO_PARAMETERS,
                "strict": False,
            },
        }
    ]


async def test_a009_three_calls_keep_their_exact_argument_text() -> None:
    runtime = adapter_runtime()
    msg = message(
        function_call("call_1", "echo", '{"text":"hi"}'),
        function_call("call_2", "echo", ""),
        function_call("call_3", "echo", "{bad"),
    )
    turn = chat.read_calls(msg)
    assert turn.provider == "openai_chat"
    assert [(c.call_id, c.name, c.arguments) for c in turn.calls] == [
        ("call_1", "echo", '{"text":"hi"}'),
        ("call_2", "echo", ""),
        ("call_3", "echo", "{bad"),
    ]
    assert turn.echo == ()
    outcome = await answer(runtime, turn)
    results = [c.result for c in outcome.results]
    assert [r.is_error for r in results] == [False, False, True]
    assert results[0].value == "hi"
    assert results[1].value == ""  # "" is {} (S-024)
    assert error_text(results[2]).startswith(
        'Error: invalid arguments: "arguments" must be an object'
    )


def test_a010_empty_turns_custom_entries_and_typeless_entries() -> None:
    variants: list[dict[str, object]] = [{}, {"tool_calls": None}, {"tool_calls": []}]
    for tool_calls in variants:
        turn = chat.read_calls({"role": "assistant", "content": "hi", **tool_calls})
        assert turn.calls == ()
    custom = {"id": "c0", "type": "custom", "custom": {"name": "grammar", "input": "x"}}
    turn = chat.read_calls(message(custom, function_call("c1", "echo", "{}")))
    assert [c.call_id for c in turn.calls] == ["c1"]
    typeless = {"id": "c2", "function": {"name": "echo", "arguments": "{}"}}
    assert [c.call_id for c in chat.read_calls(message(typeless)).calls] == ["c2"]


@pytest.mark.parametrize(
    ("msg", "text"),
    [
        ({"role": "user", "tool_calls": []}, 'openai_chat: role must be "assistant"'),
        (
            {"role": "assistant"} | {"tool_calls": {}},
            "openai_chat: tool_calls must be a list, got dict",
        ),
        (message("x"), "openai_chat: tool_calls[0] must be a JSON object, got str"),
        (
            message(function_call("", "echo", "{}")),
            "openai_chat: tool_calls[0].id must be a non-empty string",
        ),
        (
            message({"id": "c", "type": "function"}),
            "openai_chat: tool_calls[0].function must be a JSON object, got NoneType",
        ),
        (
            message(function_call("c", "echo", 5)),
            "openai_chat: tool_calls[0].function.arguments must be a string or a JSON object, "
            "got int",
        ),
        (
            message(function_call("c", "", "{}")),
            "openai_chat: tool_calls[0].function.name must be a non-empty string",
        ),
        (
            message(function_call("c", "echo", None)),
            "openai_chat: tool_calls[0].function.arguments must be a string or a JSON object, "
            "got NoneType",
        ),
        (
            message(function_call("c", "echo", {"x": {1, 2}})),
            "openai_chat: tool_calls[0].function.arguments must be a JSON object, got a value "
            "that is not JSON",
        ),
    ],
)
def test_a011_malformed_messages(msg: object, text: str) -> None:
    with pytest.raises(ProviderFormatError, match=exactly(text)):
        chat.read_calls(msg)


def test_a011_first_problem_in_document_order() -> None:
    msg = message(function_call("c", "echo", "{}"), "x", function_call("", "echo", "{}"))
    with pytest.raises(ProviderFormatError, match=r"tool_calls\[1\] must be a JSON object"):
        chat.read_calls(msg)


def test_a012_duplicate_ids() -> None:
    msg = message(
        function_call("a", "echo", "{}"),
        function_call("b", "echo", "{}"),
        function_call("a", "echo", "{}"),
    )
    with pytest.raises(
        ProviderFormatError,
        match=exactly("openai_chat: tool_calls[2].id repeats the id of tool_calls[0]"),
    ):
        chat.read_calls(msg)


async def test_a013_arguments_as_a_json_object() -> None:
    runtime = adapter_runtime()
    arguments = {"text": "hé", "n": 1}
    turn = chat.read_calls(message(function_call("c", "echo", arguments)))
    (call,) = turn.calls
    assert type(call.arguments) is FrozenDict
    assert call.arguments == arguments
    arguments["text"] = "changed"
    assert call.arguments["text"] == "hé"
    outcome = await answer(runtime, turn)
    assert outcome.results[0].result.value == "hé"


async def test_a013_a_non_lossless_object_becomes_text_the_runtime_answers() -> None:
    runtime = adapter_runtime()
    turn = chat.read_calls(message(function_call("c", "echo", {"x": float("nan")})))
    assert turn.calls[0].arguments == '{"x":NaN}'
    outcome = await answer(runtime, turn)
    assert outcome.results[0].result.is_error


def test_a015_reading_leaves_the_golden_input_unchanged() -> None:
    msg = golden("openai_chat")
    before = copy.deepcopy(msg)
    turn = chat.read_calls(msg)
    assert msg == before
    msg["tool_calls"][0]["function"]["arguments"] = "{}"
    msg["tool_calls"].clear()
    assert [c.call_id for c in turn.calls] == ["call_1", "call_3", "call_4"]
    assert turn.calls[0].arguments == '{"text":"hi"}'


async def test_a022_tool_messages_one_per_call_in_model_order() -> None:
    runtime = adapter_runtime()
    # A Deny("no") from a pre-execute hook answers the last call.
    from dsh_tools import Deny

    async def deny_blocked(execution: Any, call_next: Any) -> Any:
        return Deny("no") if execution.arguments.get("deny") else await call_next()

    runtime.on_pre_execute(deny_blocked)
    msg = message(
        function_call("a", "echo", '{"text":"hi"}'),
        function_call("b", "two", "{}"),
        function_call("c", "empty", "{}"),
        function_call("d", "echo", '{"deny":true}'),
    )
    turn = chat.read_calls(msg)
    out = chat.write_results(turn, await answer(runtime, turn))
    assert out == [
        {"role": "tool", "tool_call_id": "a", "content": "hi"},
        {
            "role": "tool",
            "tool_call_id": "b",
            "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}],
        },
        {"role": "tool", "tool_call_id": "c", "content": ""},
        {"role": "tool", "tool_call_id": "d", "content": "Error: no"},
    ]


async def test_a023_images_follow_up_after_every_tool_message_then_contexts() -> None:
    runtime = adapter_runtime()
    msg = message(
        function_call("a", "echo", '{"text":"hi"}'),
        function_call("b", "img", "{}"),
        function_call("c", "ctx", "{}"),
    )
    turn = chat.read_calls(msg)
    out = chat.write_results(turn, await answer(runtime, turn))
    assert out == [
        {"role": "tool", "tool_call_id": "a", "content": "hi"},
        {
            "role": "tool",
            "tool_call_id": "b",
            "content": [
                {"type": "text", "text": "chart"},
                {"type": "text", "text": "[image 1: sent in the next user message]"},
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "noted"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Images from tool call b, in order:"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "remember this"}]},
    ]


async def test_a024_placeholder_images_and_a_bad_images_option() -> None:
    runtime = adapter_runtime()
    turn = chat.read_calls(
        message(function_call("b", "img", "{}"), function_call("c", "ctx", "{}"))
    )
    outcome = await answer(runtime, turn)
    out = chat.write_results(turn, outcome, images="placeholder")
    assert out == [
        {
            "role": "tool",
            "tool_call_id": "b",
            "content": [
                {"type": "text", "text": "chart"},
                {"type": "text", "text": "[image omitted: image/png]"},
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "noted"},
        {"role": "user", "content": [{"type": "text", "text": "remember this"}]},
    ]
    with pytest.raises(ValueError, match=exactly('images must be "follow_up" or "placeholder"')):
        chat.write_results(turn, outcome, images="inline")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=exactly('images must be "follow_up" or "placeholder"')):
        chat.context_messages(outcome.additional_contexts, images="inline")  # type: ignore[arg-type]


def test_context_messages_render_images_per_mode() -> None:
    from dsh_tools import ImageContent, UserMessage

    contexts = [
        UserMessage(
            content=[
                TextContent("a"),
                ImageContent(PNG, "image/png"),
                ImageContent("x", "image/bmp"),
            ]
        ),
        UserMessage(content=[]),
    ]
    url = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    bmp = {"type": "text", "text": "[image omitted: unsupported type image/bmp]"}
    assert chat.context_messages(contexts) == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, url, bmp]}
    ]
    assert chat.context_messages(contexts, images="placeholder") == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "text", "text": "[image omitted: image/png]"},
                bmp,
            ],
        }
    ]


async def test_a025_unsupported_image_type_is_text() -> None:
    runtime = adapter_runtime()
    turn = chat.read_calls(message(function_call("b", "bmp", "{}")))
    out = chat.write_results(turn, await answer(runtime, turn))
    assert out == [
        {
            "role": "tool",
            "tool_call_id": "b",
            "content": "[image omitted: unsupported type image/bmp]",
        }
    ]


def test_a035_a_message_that_is_not_an_object() -> None:
    with pytest.raises(
        ProviderFormatError, match=exactly("openai_chat: message must be a JSON object, got str")
    ):
        chat.read_calls("text")


async def test_write_results_renders_golden_turn_in_model_order() -> None:
    runtime = adapter_runtime()
    turn = chat.read_calls(golden("openai_chat"))
    outcome = await run_tool_calls(runtime, turn.calls)
    out = chat.write_results(turn, outcome)
    assert [m.get("tool_call_id") for m in out] == ["call_1", "call_3", "call_4", None]
    assert out[2]["content"] == 'Error: unknown tool "nope"'
    assert isinstance(turn, ToolTurn)
