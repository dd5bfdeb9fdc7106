"""``examples/agent_loop.py`` end to end: the official SDK clients, under ``trio.run``, against
fake provider servers on 127.0.0.1 that reject any history the real APIs would reject.

A-009, A-023, A-026, A-027: the adapters' output, sent by the real clients, is accepted by a
server that checks pairing, ordering and content types the way the providers do.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.fake_providers import Call, Step, serve

if TYPE_CHECKING:
    from types import ModuleType

    from tests.fake_providers import FakeServer

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "agent_loop.py"
PROVIDERS = ["openai_chat", "openai_responses", "anthropic_messages"]
# The wait is cut by the turn timeout; the result names it (runtime.md §8.1).
#: Long enough for the second turn's calls to start on a loaded machine (the wait tool
#: sleeps 30 s, so the timeout always cuts it short).
TURN_TIMEOUT = 3.0
TIMEOUT_TEXT = f"Error: tool call aborted: batch timeout after {TURN_TIMEOUT:g} s"


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agent_loop_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = _load_example()


def _environment(provider: str, server: FakeServer) -> dict[str, str]:
    if provider == "anthropic_messages":
        return {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "test-key"}
    return {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test-key"}


def _three_turns(provider: str) -> list[Step]:
    # Anthropic sends arguments as an object, so its "broken" arguments are schema-invalid.
    broken = '{"a": "one", "b": 2}' if provider == "anthropic_messages" else '{"a": 1,'
    return [
        [
            Call("add", '{"a": 2, "b": 3}'),
            Call("add", broken),
            Call("nope"),
            Call("chart", '{"title": "sales"}'),
        ],
        [Call("note", '{"text": "check the totals"}'), Call("wait", '{"seconds": 30}')],
        [Call("finish", '{"summary": "5, and a chart"}')],
        "never requested: the finish tool concludes the turn",
    ]


def _run(
    provider: str, script: list[Step], monkeypatch: pytest.MonkeyPatch
) -> tuple[FakeServer, list[Any], list[str]]:
    lines: list[str] = []
    with serve(provider, script, max_requests=len(script), max_seconds=60) as server:
        for key, value in _environment(provider, server).items():
            monkeypatch.setenv(key, value)
        model = example.MODELS[provider]("fake-model")

        async def main() -> list[Any]:
            history: list[Any] = await example.run_agent(
                model,
                example.build_runtime(),
                "Add 2 and 3.",
                turn_timeout=TURN_TIMEOUT,
                show=lines.append,
            )
            return history

        history = trio.run(main)
    assert server.rejections == []
    return server, history, lines


def _results(provider: str, request: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """The tool results of the request's last turn (by call id) and what follows them."""
    if provider == "openai_chat":
        messages = request["messages"]
        last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
        after = messages[last + 1 :]
        tool = {m["tool_call_id"]: m["content"] for m in after if m["role"] == "tool"}
        return tool, [m for m in after if m["role"] != "tool"]
    if provider == "openai_responses":
        items = request["input"]
        last = max(i for i, m in enumerate(items) if m.get("type") == "function_call")
        after = items[last + 1 :]
        outputs = {m["call_id"]: m["output"] for m in after if m["type"] == "function_call_output"}
        return outputs, [m for m in after if m["type"] != "function_call_output"]
    (message,) = request["messages"][-1:]
    blocks = message["content"]
    results = {b["tool_use_id"]: b for b in blocks if b["type"] == "tool_result"}
    return results, [b for b in blocks if b["type"] != "tool_result"]


def _plain_text(result: Any) -> str:
    """The text parts of one rendered result, joined (any provider)."""
    if isinstance(result, dict):  # an Anthropic tool_result block
        result = result.get("content", [])
    if isinstance(result, str):
        return result
    return " ".join(part["text"] for part in result if "text" in part)


def _text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_three_turns_end_to_end_with_the_real_sdk(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A-009, A-023, A-026, A-027, A-031: parallel calls, broken arguments, an unknown tool,
    an image, a deferred context, a turn timeout and a concluding tool, all accepted."""
    server, history, lines = _run(provider, _three_turns(provider), monkeypatch)
    assert len(server.requests) == 3  # the concluding tool stops the loop
    assert lines[0] == "calling add, add, nope, chart"
    assert lines[1:5] == [
        "  add: 5",
        lines[2],
        '  nope: Error: unknown tool "nope"',
        "  chart: chart: sales",
    ]
    assert lines[2].startswith("  add: Error: invalid arguments: ")
    assert lines[5:] == [
        "calling note, wait",
        f"batch aborted: batch timeout after {TURN_TIMEOUT:g} s",
        "  note: noted",
        f"  wait: {TIMEOUT_TEXT}",
        "calling finish",
        "  finish: 5, and a chart",
        "turn concluded by a tool",
    ]
    # Turn 1, as the server received it in request 2: four results and the image.
    results, rest = _results(provider, server.requests[1])
    assert len(results) == 4
    texts = [_plain_text(r) for r in results.values()]
    assert texts[0] == "5"
    assert texts[1].startswith("Error: invalid arguments: ")
    assert texts[2] == 'Error: unknown tool "nope"'
    assert texts[3].startswith("chart: sales")
    image_anywhere = _text(results) + _text(rest)
    assert example.PIXEL_PNG in image_anywhere
    if provider == "openai_chat":
        assert rest[0]["content"][0]["text"].startswith("Images from tool call call_")
    # Turn 2 in request 3: the note, the timed-out wait, then the deferred context.
    results, rest = _results(provider, server.requests[2])
    assert [("noted" in _text(r), TIMEOUT_TEXT in _text(r)) for r in results.values()] == [
        (True, False),
        (False, True),
    ]
    assert "Note to self: check the totals" in _text(rest)
    # Turn 3 was answered in the history, though the model is not called again.
    assert "5, and a chart" in _text(history[-1])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_final_answer_ends_the_loop(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    script: list[Step] = [[Call("add", '{"a": 2, "b": 3}')], "The sum is 5."]
    server, _, lines = _run(provider, script, monkeypatch)
    assert len(server.requests) == 2
    assert lines == ["calling add", "  add: 5", "answer: The sum is 5."]


def test_the_example_runs_from_the_command_line() -> None:
    script: list[Step] = [[Call("add", '{"a": 2, "b": 3}')], "The sum is 5."]
    with serve("anthropic_messages", script, max_requests=2, max_seconds=60) as server:
        env = {**os.environ, **_environment("anthropic_messages", server)}
        done = subprocess.run(
            [sys.executable, str(EXAMPLE), "--provider", "anthropic_messages", "What is 2 + 3?"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["calling add", "  add: 5", "answer: The sum is 5."]
    assert server.rejections == []


def test_ctrl_c_aborts_the_batch_and_the_loop_goes_on() -> None:
    script: list[Step] = [[Call("wait", '{"seconds": 30}')], "stopped"]
    with serve("openai_chat", script, max_requests=2, max_seconds=60) as server:
        env = {**os.environ, **_environment("openai_chat", server)}
        process = subprocess.Popen(
            [sys.executable, str(EXAMPLE), "--provider", "openai_chat", "Wait."],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert process.stdout is not None
            # Printed once the Ctrl-C handler is installed, just before the batch starts.
            assert process.stdout.readline() == "calling wait\n"
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=30)
        finally:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    aborted, wait, answer = out.splitlines()
    assert aborted == "batch aborted: interrupted by the user"
    assert wait.startswith("  wait: Error: tool call aborted")
    assert wait.endswith(": interrupted by the user")
    assert answer == "answer: stopped"
    assert "interrupted by the user" in _text(server.requests[1]["messages"][-1])
    assert server.rejections == []


# -- the fake servers reject what the real APIs reject ----------------------------------------


def _chat_call(call_id: str) -> dict[str, Any]:
    function = {"name": "add", "arguments": "{}"}
    return {"id": call_id, "type": "function", "function": function}


CHAT_TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
ASSISTANT = {"role": "assistant", "content": None, "tool_calls": [_chat_call("a"), _chat_call("b")]}


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        ([{"role": "tool", "tool_call_id": "a", "content": "1"}], "missing tool message for b"),
        (
            [
                {"role": "tool", "tool_call_id": "a", "content": "1"},
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "b", "content": "1"},
            ],
            "must be followed by tool messages",
        ),
        (
            [
                {"role": "tool", "tool_call_id": "a", "content": "1"},
                {"role": "tool", "tool_call_id": "a", "content": "1"},
            ],
            "must respond to a preceding tool_calls id",
        ),
        (
            [
                {"role": "tool", "tool_call_id": "a", "content": "1"},
                {
                    "role": "tool",
                    "tool_call_id": "b",
                    "content": [{"type": "image_url", "image_url": {"url": "data:,"}}],
                },
            ],
            "tool message content must be text",
        ),
    ],
)
def test_fake_chat_server_rejects_bad_histories(tail: list[Any], reason: str) -> None:
    async def main(url: str) -> None:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
        messages = [{"role": "user", "content": "x"}, ASSISTANT, *tail]
        with pytest.raises(openai.BadRequestError, match=reason):
            await client.chat.completions.create(model="m", messages=messages, tools=CHAT_TOOLS)

    with serve("openai_chat", ["ok"], max_requests=1) as server:
        trio.run(main, server.url)
    assert len(server.rejections) == 1


def test_fake_responses_server_rejects_bad_histories() -> None:
    calls = [
        {"type": "function_call", "call_id": c, "name": "add", "arguments": "{}"} for c in "ab"
    ]
    output_a = {"type": "function_call_output", "call_id": "a", "output": "1"}
    cases = [
        ([*calls, output_a], "no tool output found for function call b"),
        ([output_a, *calls], "no function call found for call_id a"),
        ([*calls, output_a, output_a], "call_id a answered twice"),
        (
            [*calls, output_a, {**output_a, "call_id": "b", "output": [{"type": "input_image"}]}],
            "input_image needs a detail",
        ),
    ]
    tools = [{"type": "function", "name": "add", "parameters": {"type": "object"}, "strict": False}]

    async def main(url: str) -> None:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
        for items, reason in cases:
            with pytest.raises(openai.BadRequestError, match=reason):
                await client.responses.create(model="m", input=items, tools=tools)

    with serve("openai_responses", ["ok"] * 4, max_requests=4) as server:
        trio.run(main, server.url)
    assert len(server.rejections) == len(cases)


def test_fake_anthropic_server_rejects_bad_histories() -> None:
    uses = [{"type": "tool_use", "id": c, "name": "add", "input": {}} for c in "ab"]
    result_a = {"type": "tool_result", "tool_use_id": "a", "content": "1"}
    result_b = {**result_a, "tool_use_id": "b"}
    cases = [
        ([result_a], "exactly one tool_result"),
        (
            [{"type": "text", "text": "first"}, result_a, result_b],
            "tool_result blocks must come first",
        ),
        ([result_a, result_a, result_b], "exactly one tool_result"),
        (
            [result_a, result_b, {"type": "text", "text": ""}],
            "text content blocks must be non-empty",
        ),
    ]
    tools = [{"name": "add", "input_schema": {"type": "object"}}]

    async def main(url: str) -> None:
        client = anthropic.AsyncAnthropic(base_url=url, api_key="k", max_retries=0)
        for content, reason in cases:
            messages = [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": uses},
                {"role": "user", "content": content},
            ]
            with pytest.raises(anthropic.BadRequestError, match=reason):
                await client.messages.create(
                    model="m", max_tokens=10, messages=messages, tools=tools
                )

    with serve("anthropic_messages", ["ok"] * 4, max_requests=4) as server:
        trio.run(main, server.url)
    assert len(server.rejections) == len(cases)


def test_fake_server_is_bounded_in_requests() -> None:
    async def main(url: str) -> None:
        client = anthropic.AsyncAnthropic(base_url=url, api_key="k", max_retries=0)
        messages = [{"role": "user", "content": "x"}]
        tools = [{"name": "add", "input_schema": {"type": "object"}}]
        await client.messages.create(model="m", max_tokens=10, messages=messages, tools=tools)
        with pytest.raises(anthropic.BadRequestError, match="request limit reached"):
            await client.messages.create(model="m", max_tokens=10, messages=messages, tools=tools)

    with serve("anthropic_messages", ["ok", "ok"], max_requests=1) as server:
        trio.run(main, server.url)


def _readme_loop(provider: str) -> str:
    """The README's loop for ``provider``: the Chat loop with the provider's lines spliced in."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Use it with OpenAI / Anthropic", 1)[1].split("\n## ", 1)[0]
    chat, responses, messages = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    if provider == "openai_chat":
        return str(chat)
    start = chat.index("        response = await client.chat")
    end = chat.index("            return message.content\n") + len(
        "            return message.content\n"
    )
    code = chat[:start] + (responses if provider == "openai_responses" else messages) + chat[end:]
    code = code.replace("openai_chat as codec", f"{provider} as codec")
    if provider == "anthropic_messages":
        code = code.replace(
            "from openai import AsyncOpenAI", "from anthropic import AsyncAnthropic"
        )
        code = code.replace("AsyncOpenAI()", "AsyncAnthropic()")
    return str(code)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_readme_loops_run_against_the_fake_servers(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    namespace: dict[str, Any] = {}
    exec(_readme_loop(provider), namespace)
    script: list[Step] = [[Call("add", '{"a": 2, "b": 3}'), Call("chart", '{"title": "t"}')], "5"]
    with serve(provider, script, max_requests=2) as server:
        for key, value in _environment(provider, server).items():
            monkeypatch.setenv(key, value)
        answer = trio.run(namespace["agent"], example.build_runtime(), "Add 2 and 3.", "m")
    assert answer == "5"
    assert server.rejections == []
    assert len(server.requests) == 2
