"""The adapters against the official SDKs' own types (integrations §2, A-014 and A-032).

The SDKs are test-only dependencies (the ``dev`` extra): SDK response objects built from the
golden JSON must read exactly like the JSON, and every output the adapters write must
validate, with no key dropped or unknown, against the SDK's request ``TypedDict``s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from dsh_sched import run_tool_calls
from dsh_sched.adapters import anthropic_messages, openai_chat, openai_responses
from tests.adapter_helpers import adapter_runtime, golden

if TYPE_CHECKING:
    from types import ModuleType

pydantic = pytest.importorskip("pydantic")
chat_types = pytest.importorskip("openai.types.chat")
responses_types = pytest.importorskip("openai.types.responses")
anthropic_types = pytest.importorskip("anthropic.types")

# Every fixture tool, so each rendering rule appears in some output.
EXTRA_TOOLS = ("two", "empty", "bmp", "ctx", "blocked", "finish")


def _strict(tp: object) -> Any:
    return pydantic.TypeAdapter(tp)


def _check(adapter: Any, value: object) -> None:
    # A TypedDict validator drops the keys its type does not declare, so comparing the
    # validated value with the input catches an unknown key as well as a wrong type.
    validated = adapter.validate_python(value)
    assert _plain(validated) == value


def _plain(value: object) -> object:
    # TypeAdapter returns TypedDicts as dicts and Iterable[...] fields as lazy iterators,
    # which validate their items only while being consumed.
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or hasattr(value, "__next__"):
        return [_plain(v) for v in value]  # type: ignore[attr-defined]
    return value


def _sdk_objects() -> list[tuple[ModuleType, object, object]]:
    chat_dict = golden("openai_chat")
    response_dict = golden("openai_responses")
    message_dict = golden("anthropic_messages")
    response = responses_types.Response.model_validate(response_dict)
    return [
        (openai_chat, chat_dict, chat_types.ChatCompletionMessage.model_validate(chat_dict)),
        (openai_responses, response_dict, response),
        (openai_responses, response_dict["output"], response.output),
        (openai_responses, response_dict["output"], list(response.output)),
        (anthropic_messages, message_dict, anthropic_types.Message.model_validate(message_dict)),
        (
            anthropic_messages,
            message_dict["content"],
            anthropic_types.Message.model_validate(message_dict).content,
        ),
    ]


@pytest.mark.parametrize(("module", "as_dict", "as_sdk"), _sdk_objects())
def test_a014_sdk_objects_read_like_their_json(
    module: ModuleType, as_dict: object, as_sdk: object
) -> None:
    from_sdk = module.read_calls(as_sdk)
    assert from_sdk == module.read_calls(as_dict)
    assert from_sdk.calls  # the golden inputs hold calls


def test_a014_responses_caller_survives_the_sdk_round_trip() -> None:
    response = responses_types.Response.model_validate(golden("openai_responses"))
    turn = openai_responses.read_calls(response)
    assert turn.echo[0] == {"caller": {"type": "program", "caller_id": "prog_1"}}
    assert turn.echo[1:] == ({}, {})


async def _outputs(module: ModuleType, provider: str) -> list[list[dict[str, object]]]:
    runtime = adapter_runtime()
    turn = module.read_calls(golden(provider))
    outcome = await run_tool_calls(runtime, turn.calls)
    outputs = [
        module.write_results(turn, outcome),
        module.write_results(turn, outcome, contexts=False),
    ]
    extra = module.read_calls(_extra_output(provider))
    extra_outcome = await run_tool_calls(runtime, extra.calls)
    outputs.append(module.write_results(extra, extra_outcome))
    if module is openai_chat:
        outputs.append(module.write_results(turn, outcome, images="placeholder"))
    return outputs


def _extra_output(provider: str) -> object:
    if provider == "openai_chat":
        return {
            "role": "assistant",
            "tool_calls": [
                {"id": f"x{i}", "type": "function", "function": {"name": n, "arguments": "{}"}}
                for i, n in enumerate(EXTRA_TOOLS)
            ],
        }
    if provider == "openai_responses":
        return [
            {"type": "function_call", "call_id": f"x{i}", "name": n, "arguments": "{}"}
            for i, n in enumerate(EXTRA_TOOLS)
        ]
    return [
        {"type": "tool_use", "id": f"x{i}", "name": n, "input": {}, "toolset_name": "t"}
        for i, n in enumerate(EXTRA_TOOLS)
    ]


async def test_a032_chat_outputs_validate_against_the_sdk_types() -> None:
    message = _strict(chat_types.ChatCompletionMessageParam)
    for output in await _outputs(openai_chat, "openai_chat"):
        for item in output:
            _check(message, item)
    tool = _strict(chat_types.ChatCompletionFunctionToolParam)
    for entry in openai_chat.tools(adapter_runtime().schemas()):
        _check(tool, entry)


async def test_a032_responses_outputs_validate_against_the_sdk_types() -> None:
    item_type = _strict(responses_types.ResponseInputItemParam)
    for output in await _outputs(openai_responses, "openai_responses"):
        for item in output:
            _check(item_type, item)
    tool = _strict(responses_types.FunctionToolParam)
    for entry in openai_responses.tools(adapter_runtime().schemas()):
        _check(tool, entry)


async def test_a032_anthropic_outputs_validate_against_the_sdk_types() -> None:
    message = _strict(anthropic_types.MessageParam)
    for output in await _outputs(anthropic_messages, "anthropic_messages"):
        for item in output:
            _check(message, item)
    tool = _strict(anthropic_types.ToolParam)
    for entry in anthropic_messages.tools(adapter_runtime().schemas(), strict=False):
        _check(tool, entry)


def test_the_type_oracle_catches_unknown_keys_and_wrong_types() -> None:
    message = _strict(chat_types.ChatCompletionMessageParam)
    with pytest.raises(AssertionError):
        _check(message, {"role": "tool", "tool_call_id": "a", "content": "x", "bogus": 1})
    with pytest.raises(pydantic.ValidationError):
        _check(message, {"role": "tool", "tool_call_id": "a", "content": [{"type": "image_url"}]})
    anthropic_message = _strict(anthropic_types.MessageParam)
    with pytest.raises(AssertionError):
        _check(
            anthropic_message,
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "x": 1}]},
        )
