"""``dsh_sched.adapters.anthropic_messages`` (integrations §2.7)."""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any

import pytest

from dsh_sched import JsonlSessionLog, run_tool_calls
from dsh_sched.adapters import ProviderFormatError
from dsh_sched.adapters import anthropic_messages as anthropic
from dsh_tools import FrozenDict, ImageContent, TextContent, UserMessage
from tests.adapter_helpers import PNG, adapter_runtime, answer, golden
from tests.helpers import exactly

if TYPE_CHECKING:
    from pathlib import Path


def assistant(*blocks: object) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def tool_use(call_id: str, name: str, input: object = None, **extra: object) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": call_id,
        "name": name,
        "input": {} if input is None else input,
        **extra,
    }


async def test_a019_input_becomes_the_arguments_mapping_exactly(tmp_path: Path) -> None:
    runtime = adapter_runtime()
    turn = anthropic.read_calls(
        assistant(tool_use("toolu_1", "echo", {"b": 1, "a": 2.0, "s": "é"}))
    )
    (call,) = turn.calls
    assert type(call.arguments) is FrozenDict
    assert list(call.arguments) == ["b", "a", "s"]
    assert type(call.arguments["a"]) is float
    assert type(call.arguments["b"]) is int
    assert call.arguments == {"b": 1, "a": 2.0, "s": "é"}
    log_path = tmp_path / "session.jsonl"
    with JsonlSessionLog(log_path) as log:
        await run_tool_calls(runtime, turn.calls, sink=log)
    lines = [json.loads(line) for line in log_path.read_text("utf-8").splitlines()]
    (logged,) = [line for line in lines if line.get("type") == "tool/call"]
    assert logged["data"]["arguments"] == {"b": 1, "a": 2.0, "s": "é"}
    assert '"arguments":{"b":1,"a":2.0,"s":"é"}' in log_path.read_text("utf-8")


async def test_a020_malformed_input_and_content() -> None:
    runtime = adapter_runtime()
    with pytest.raises(
        ProviderFormatError,
        match=exactly("anthropic_messages: content[0].input must be a JSON object, got str"),
    ):
        anthropic.read_calls(assistant(tool_use("t", "echo", "x")))
    turn = anthropic.read_calls(assistant(tool_use("t", "echo", {"x": -0.0})))
    outcome = await answer(runtime, turn)
    result = outcome.results[0].result
    assert result.is_error
    assert "tool execution arguments must be losslessly JSON-serializable" in str(result.content[0])
    assert anthropic.read_calls({"role": "assistant", "content": "just text"}).calls == ()
    with pytest.raises(
        ProviderFormatError,
        match=exactly("anthropic_messages: content must be a string or a list, got NoneType"),
    ):
        anthropic.read_calls({"role": "assistant", "content": None})
    with pytest.raises(
        ProviderFormatError, match=exactly('anthropic_messages: role must be "assistant"')
    ):
        anthropic.read_calls({"role": "user", "content": []})


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ([None], "content[0] must be a JSON object, got NoneType"),
        ([tool_use("", "echo")], "content[0].id must be a non-empty string"),
        ([{**tool_use("t", "echo"), "name": 5}], "content[0].name must be a non-empty string"),
        (
            [tool_use("t", "echo", toolset_name=3)],
            "content[0].toolset_name must be a non-empty string",
        ),
        (
            [tool_use("t", "echo", {"x": {1}})],
            "content[0].input must be a JSON object, got a value that is not JSON",
        ),
    ],
)
def test_a020_other_malformed_blocks(content: object, text: str) -> None:
    with pytest.raises(ProviderFormatError, match=exactly(f"anthropic_messages: {text}")):
        anthropic.read_calls(content)


def test_a012_duplicate_ids() -> None:
    content = [tool_use("x", "echo"), {"type": "text", "text": "t"}, tool_use("x", "echo")]
    with pytest.raises(
        ProviderFormatError,
        match=exactly("anthropic_messages: content[2].id repeats the id of content[0]"),
    ):
        anthropic.read_calls(content)


async def test_a021_only_tool_use_blocks_and_the_toolset_name_echo() -> None:
    runtime = adapter_runtime()
    msg = assistant(
        {"type": "thinking", "thinking": "hm", "signature": "s"},
        {"type": "text", "text": "calling"},
        {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}},
        tool_use("t1", "echo", {"text": "hi"}),
        tool_use("t2", "echo", {"text": "yo"}, toolset_name="t"),
    )
    turn = anthropic.read_calls(msg)
    assert [c.call_id for c in turn.calls] == ["t1", "t2"]
    assert turn.echo == (FrozenDict(), FrozenDict(toolset_name="t"))
    (out,) = anthropic.write_results(turn, await answer(runtime, turn))
    content: Any = out["content"]
    assert content[1] == {
        "type": "tool_result",
        "tool_use_id": "t2",
        "content": [{"type": "text", "text": "yo"}],
        "toolset_name": "t",
    }
    assert list(content[1])[-1] == "toolset_name"
    assert "toolset_name" not in content[0]


async def test_a027_one_user_message_results_first_then_contexts() -> None:
    runtime = adapter_runtime()
    turn = anthropic.read_calls(
        [
            tool_use("t1", "echo", {"text": "hi"}),
            tool_use("t2", "img"),
            tool_use("t3", "ctx"),
            tool_use("t4", "nope"),
            tool_use("t5", "blocked"),
        ]
    )
    out = anthropic.write_results(turn, await answer(runtime, turn))
    assert out == [
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "text", "text": "hi"}],
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": [
                        {"type": "text", "text": "chart"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                        },
                    ],
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "t3",
                    "content": [{"type": "text", "text": "noted"}],
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "t4",
                    "content": [{"type": "text", "text": 'Error: unknown tool "nope"'}],
                    "is_error": True,
                },
                {"type": "tool_result", "tool_use_id": "t5", "is_error": True},
                {"type": "text", "text": "remember this"},
            ],
        }
    ]


async def test_a025_unsupported_image_and_empty_text_blocks() -> None:
    runtime = adapter_runtime()
    turn = anthropic.read_calls([tool_use("t1", "bmp"), tool_use("t2", "echo", {"text": ""})])
    (out,) = anthropic.write_results(turn, await answer(runtime, turn))
    assert out["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [{"type": "text", "text": "[image omitted: unsupported type image/bmp]"}],
        },
        {"type": "tool_result", "tool_use_id": "t2"},
    ]


def test_a028_context_messages_and_empty_turns() -> None:
    assert anthropic.context_messages([UserMessage(content=[TextContent("")])]) == []
    assert anthropic.context_messages(
        [
            UserMessage(content=[ImageContent(PNG, "image/jpeg")]),
            UserMessage(content=[TextContent("b")]),
        ]
    ) == [
        {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG},
                },
                {"type": "text", "text": "b"},
            ],
        }
    ]
    empty = anthropic.read_calls({"role": "assistant", "content": "done"})
    assert anthropic.write_results(empty, []) == []


def test_a035_a_message_that_is_not_an_object() -> None:
    with pytest.raises(
        ProviderFormatError,
        match=exactly("anthropic_messages: message must be a JSON object, got str"),
    ):
        anthropic.read_calls("text")


def test_a015_reading_leaves_the_golden_input_unchanged() -> None:
    msg = golden("anthropic_messages")
    before = copy.deepcopy(msg)
    turn = anthropic.read_calls(msg)
    assert msg == before
    msg["content"][3]["input"]["text"] = "changed"
    assert turn.calls[0].arguments == {"text": "hi"}
    assert [c.call_id for c in turn.calls] == ["toolu_1", "toolu_2", "toolu_3"]
