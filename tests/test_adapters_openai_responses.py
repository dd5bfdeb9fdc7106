"""``dsh_sched.adapters.openai_responses`` (integrations §2.6)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dsh_sched.adapters import ProviderFormatError
from dsh_sched.adapters import openai_responses as responses
from dsh_tools import FrozenDict, ImageContent, TextContent, UserMessage
from tests.adapter_helpers import PNG, adapter_runtime, answer, golden
from tests.helpers import exactly


def function_call(
    call_id: str, name: str, arguments: object = "{}", **extra: object
) -> dict[str, Any]:
    return {
        "id": f"fc_{call_id}",
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        **extra,
    }


def test_a016_only_function_calls_keyed_by_call_id() -> None:
    output = golden("openai_responses")["output"]
    turn = responses.read_calls(output)
    assert turn.provider == "openai_responses"
    assert [(c.call_id, c.name, c.arguments) for c in turn.calls] == [
        ("call_a", "echo", '{"text":"hi"}'),
        ("call_b", "img", "{}"),
        ("call_c", "nope", "{bad"),
    ]
    # The item ids (fc_...) are neither read nor needed.
    assert all(not c.call_id.startswith("fc_") for c in turn.calls)


async def test_a017_caller_is_echoed_into_the_output_item() -> None:
    runtime = adapter_runtime()
    caller = {"type": "program", "caller_id": "prog_1"}
    output = [
        function_call("a", "echo", caller=caller),
        function_call("b", "echo", caller=None),
        function_call("c", "echo"),
    ]
    turn = responses.read_calls(output)
    assert turn.echo == (FrozenDict(caller=caller), FrozenDict(), FrozenDict())
    out = responses.write_results(turn, await answer(runtime, turn))
    assert out == [
        {"type": "function_call_output", "call_id": "a", "output": "", "caller": caller},
        {"type": "function_call_output", "call_id": "b", "output": ""},
        {"type": "function_call_output", "call_id": "c", "output": ""},
    ]
    assert list(out[0]) == ["type", "call_id", "output", "caller"]
    assert type(out[0]["caller"]) is dict
    assert out[0]["caller"] is not output[0]["caller"]


def test_a018_missing_call_id_non_list_output_and_a_whole_response() -> None:
    output = [function_call("a", "echo"), {"id": "fc_2", "type": "function_call", "name": "echo"}]
    with pytest.raises(
        ProviderFormatError,
        match=exactly("openai_responses: output[1].call_id must be a non-empty string"),
    ):
        responses.read_calls(output)
    with pytest.raises(
        ProviderFormatError, match=exactly("openai_responses: output must be a list, got str")
    ):
        responses.read_calls("text")
    with pytest.raises(
        ProviderFormatError, match=exactly("openai_responses: output must be a list, got NoneType")
    ):
        responses.read_calls({"id": "resp_1"})
    whole = golden("openai_responses")
    assert responses.read_calls(whole) == responses.read_calls(whole["output"])


@pytest.mark.parametrize(
    ("output", "text"),
    [
        ([5], "output[0] must be a JSON object, got int"),
        ([function_call("a", "")], "output[0].name must be a non-empty string"),
        (
            [function_call("a", "echo", 5)],
            "output[0].arguments must be a string or a JSON object, got int",
        ),
        (
            [function_call("a", "echo", caller="x")],
            "output[0].caller must be a JSON object, got str",
        ),
        (
            [function_call("a", "echo", caller={"n": float("inf")})],
            "output[0].caller must be a JSON object, got a value that is not JSON",
        ),
    ],
)
def test_a018_other_malformed_items(output: object, text: str) -> None:
    with pytest.raises(ProviderFormatError, match=exactly(f"openai_responses: {text}")):
        responses.read_calls(output)


def test_a012_duplicate_call_ids() -> None:
    output = [function_call("x", "echo"), function_call("y", "echo"), function_call("x", "echo")]
    with pytest.raises(
        ProviderFormatError,
        match=exactly("openai_responses: output[2].call_id repeats the id of output[0]"),
    ):
        responses.read_calls(output)


def test_a015_reading_leaves_the_golden_input_unchanged() -> None:
    whole = golden("openai_responses")
    before = copy.deepcopy(whole)
    turn = responses.read_calls(whole)
    assert whole == before
    whole["output"][3]["caller"]["caller_id"] = "changed"
    assert turn.echo[0] == {"caller": {"type": "program", "caller_id": "prog_1"}}


async def test_a026_outputs_with_images_then_context_messages() -> None:
    runtime = adapter_runtime()
    turn = responses.read_calls(
        [
            function_call("a", "echo", '{"text":"hi"}'),
            function_call("b", "img"),
            function_call("c", "ctx"),
        ]
    )
    out = responses.write_results(turn, await answer(runtime, turn))
    assert out == [
        {"type": "function_call_output", "call_id": "a", "output": "hi"},
        {
            "type": "function_call_output",
            "call_id": "b",
            "output": [
                {"type": "input_text", "text": "chart"},
                {
                    "type": "input_image",
                    "image_url": f"data:image/png;base64,{PNG}",
                    "detail": "auto",
                },
            ],
        },
        {"type": "function_call_output", "call_id": "c", "output": "noted"},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "remember this"}],
        },
    ]


async def test_a025_unsupported_image_and_multi_text_outputs() -> None:
    runtime = adapter_runtime()
    turn = responses.read_calls([function_call("a", "bmp"), function_call("b", "two")])
    out = responses.write_results(turn, await answer(runtime, turn))
    assert out == [
        {
            "type": "function_call_output",
            "call_id": "a",
            "output": "[image omitted: unsupported type image/bmp]",
        },
        {
            "type": "function_call_output",
            "call_id": "b",
            "output": [
                {"type": "input_text", "text": "first"},
                {"type": "input_text", "text": "second"},
            ],
        },
    ]


def test_context_messages_leave_out_empty_contexts() -> None:
    contexts = [
        UserMessage(content=[ImageContent(PNG, "image/gif")]),
        UserMessage(content=[]),
    ]
    assert responses.context_messages(contexts) == [
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_image",
                    "image_url": f"data:image/gif;base64,{PNG}",
                    "detail": "auto",
                }
            ],
        }
    ]
    assert responses.context_messages([UserMessage(content=[TextContent("")])]) == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ""}]}
    ]


def test_a_single_image_output_is_a_list() -> None:
    """A-026: only a single *text* part collapses to a string."""
    from dsh_sched import CommittedCall, ModelToolCall
    from dsh_sched.adapters import ToolTurn
    from dsh_tools import ToolResult

    call = ModelToolCall(call_id="a", name="img", arguments="{}")
    turn = ToolTurn(provider="openai_responses", calls=[call])
    result = ToolResult(is_error=False, content=[ImageContent(PNG, "image/webp")])
    committed = [CommittedCall(index=0, call=call, result=result, synthetic=False, mode=None)]
    out = responses.write_results(turn, committed)
    assert out[0]["output"] == [
        {"type": "input_image", "image_url": f"data:image/webp;base64,{PNG}", "detail": "auto"}
    ]
