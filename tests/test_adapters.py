"""What the three adapters share: ``ToolTurn``, ``ProviderFormatError``, tool export, the
result checks of ``write_results`` and the output's JSON shape (integrations §2.1–§2.4)."""

from __future__ import annotations

import copy
import json
import pickle
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

import dsh_sched.adapters
from dsh_sched import (
    CallCommitted,
    CommittedCall,
    ModelToolCall,
    RecordingSink,
    open_batch,
    run_tool_calls,
)
from dsh_sched.adapters import (
    IMAGE_MIME_TYPES,
    ProviderFormatError,
    ToolTurn,
    anthropic_messages,
    openai_chat,
    openai_responses,
)
from dsh_tools import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    FrozenDict,
    JsonValue,
    ToolRunContext,
    ToolRuntime,
    ToolSchema,
    define_tool,
)
from tests.adapter_helpers import adapter_runtime, calls
from tests.helpers import exactly, make_echo, raw_tool, text_output

if TYPE_CHECKING:
    from types import ModuleType

ADAPTERS: dict[str, ModuleType] = {
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "anthropic_messages": anthropic_messages,
}
PROVIDERS = list(ADAPTERS)


def schema(name: str, parameters: object, description: str = "d") -> ToolSchema:
    return ToolSchema(name=name, description=description, parameters=parameters)


CLOSED = {
    "type": "object",
    "properties": {"a": {"type": "string"}, "b": {"type": "array", "items": {"type": "integer"}}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


def test_public_names_are_pinned() -> None:
    assert dsh_sched.adapters.__all__ == ["IMAGE_MIME_TYPES", "ProviderFormatError", "ToolTurn"]
    for module in ADAPTERS.values():
        assert module.__all__ == ["context_messages", "read_calls", "tools", "write_results"]
        for name in module.__all__:
            assert getattr(module, name).__doc__
    assert ToolTurn.__doc__
    assert ProviderFormatError.__doc__
    assert IMAGE_MIME_TYPES == ("image/png", "image/jpeg", "image/gif", "image/webp")
    assert getattr(ToolTurn, "__final__", False)


def test_a001_adapters_work_without_the_sdks() -> None:
    """A-001: with openai, anthropic and mcp unimportable, the adapters still work."""
    script = """
import sys
for blocked in ("openai", "anthropic", "mcp"):
    sys.modules[blocked] = None  # makes "import openai" raise ImportError
import trio
import dsh_sched
import dsh_tools
from dsh_sched import run_tool_calls
from dsh_sched.adapters import anthropic_messages, openai_chat, openai_responses
from tests.helpers import make_echo

runtime = dsh_tools.ToolRuntime()
runtime.register(make_echo())
for codec, output in (
    (openai_chat, {"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "echo", "arguments": "{}"}}]}),
    (openai_responses, [
        {"type": "function_call", "call_id": "c", "name": "echo", "arguments": "{}"}]),
    (anthropic_messages, [{"type": "tool_use", "id": "c", "name": "echo", "input": {}}]),
):
    codec.tools(runtime.schemas())
    turn = codec.read_calls(output)
    outcome = trio.run(run_tool_calls, runtime, turn.calls)
    assert len(codec.write_results(turn, outcome)) == 1
loaded = [m for m in ("openai", "anthropic", "mcp", "pydantic") if sys.modules.get(m) is not None]
assert loaded == [], loaded
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr
    # Importing the packages does not import the adapters (R-022 still holds).
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, dsh_sched, dsh_tools; "
            "print(sorted(m for m in sys.modules if m.startswith('dsh_sched.adapters')))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.strip() == "[]", done.stderr


def test_a003_flat_responses_entry_and_anthropic_entry_and_strict_true() -> None:
    runtime = ToolRuntime()
    runtime.register(make_echo())
    (echo,) = runtime.schemas()
    assert openai_responses.tools([echo]) == [
        {
            "type": "function",
            "name": "echo",
            "description": "Echo the given text.",
            "parameters": echo.parameters,
            "strict": False,
        }
    ]
    assert anthropic_messages.tools([echo]) == [
        {"name": "echo", "description": "Echo the given text.", "input_schema": echo.parameters}
    ]
    closed = schema("closed", CLOSED)
    assert openai_chat.tools([closed], strict=True)[0]["function"]["strict"] is True  # type: ignore[index]
    assert openai_responses.tools([closed], strict=True)[0]["strict"] is True
    assert anthropic_messages.tools([closed], strict=True) == [
        {"name": "closed", "description": "d", "input_schema": CLOSED, "strict": True}
    ]


def test_a004_empty_description_is_left_out() -> None:
    bare = schema("bare", {"type": "object"}, description="")
    assert openai_chat.tools([bare]) == [
        {
            "type": "function",
            "function": {"name": "bare", "parameters": {"type": "object"}, "strict": False},
        }
    ]
    assert "description" not in openai_responses.tools([bare])[0]
    assert anthropic_messages.tools([bare]) == [
        {"name": "bare", "input_schema": {"type": "object"}}
    ]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("name", ["fs.read", "a" * 65, "", "a\n"])
def test_a005_names_outside_the_provider_charset(provider: str, name: str) -> None:
    message = (
        f'tool "{name}" cannot be exported to {provider}: names must match ^[a-zA-Z0-9_-]{{1,64}}$'
    )
    with pytest.raises(ValueError, match=exactly(message)):
        ADAPTERS[provider].tools([schema(name, {"type": "object"})])
    assert ADAPTERS[provider].tools([schema("a" * 64, {"type": "object"})])


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("parameters", [{}, {"type": "string"}, None, ["type", "object"]])
def test_a006_parameters_must_be_an_object_schema(provider: str, parameters: object) -> None:
    if isinstance(parameters, dict):
        # A raw definition (as an MCP source registers) is not checked at registration.
        runtime = ToolRuntime()
        runtime.register(raw_tool("raw", parameters=parameters))
        schemas = runtime.schemas()
    else:
        schemas = [schema("raw", parameters)]
    message = (
        f'tool "raw" cannot be exported to {provider}: '
        'parameters must be a JSON Schema object with "type": "object"'
    )
    with pytest.raises(ValueError, match=exactly(message)):
        ADAPTERS[provider].tools(schemas)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a007_strict_problems(provider: str) -> None:
    tools = ADAPTERS[provider].tools
    runtime = ToolRuntime()
    runtime.register(make_echo())
    cases = [
        (runtime.schemas()[0], '#: "additionalProperties" must be false'),
        (
            schema(
                "x",
                {
                    "type": "object",
                    "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "null"}]}},
                    "required": ["x"],
                    "additionalProperties": False,
                },
            ),
            '#/properties/x: "oneOf" is not supported',
        ),
        (
            schema("x", {**CLOSED, "required": ["a"]}),
            '#: property "b" must be listed in "required"',
        ),
        (
            schema(
                "x",
                {
                    "type": "object",
                    "properties": {
                        "a/b~": {"type": "object", "properties": {}},
                        "z": {"oneOf": [{"type": "string"}, {"type": "null"}]},
                    },
                    "required": ["a/b~", "z"],
                    "additionalProperties": False,
                },
            ),
            '#/properties/a~1b~0: "additionalProperties" must be false',
        ),
        (
            schema(
                "x",
                {
                    "type": "object",
                    "properties": {"l": {"type": "array", "items": {"type": "object"}}},
                    "required": ["l"],
                    "additionalProperties": False,
                },
            ),
            '#/properties/l/items: "additionalProperties" must be false',
        ),
    ]
    for item, problem in cases:
        with pytest.raises(
            ValueError,
            match=exactly(f'tool "{item.name}" cannot be exported with strict=True: {problem}'),
        ):
            tools([item], strict=True)
        assert tools([item])  # non-strict export takes it


def test_a007_strict_walk_is_iterative_and_skips_non_schema_nodes() -> None:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        node = {
            "type": "object",
            "properties": {"n": node, "t": True},
            "required": ["n", "t"],
            "additionalProperties": False,
        }
    assert openai_chat.tools([schema("deep", node)], strict=True)


def test_a008_entries_hold_the_detached_parameters_and_refuse_other_items() -> None:
    runtime = ToolRuntime()
    runtime.register(make_echo())
    for provider, module in ADAPTERS.items():
        entry = module.tools(runtime.schemas())[0]
        parameters = _parameters(provider, entry)
        parameters["properties"]["text"]["type"] = "integer"
        parameters["mutated"] = True
        assert runtime.schemas()[0].parameters == {
            "type": "object",
            "properties": {"text": {"type": "string"}},
        }
        with pytest.raises(TypeError, match=exactly("tools() expects ToolSchema items, got dict")):
            module.tools([{"name": "echo"}])


def _parameters(provider: str, entry: Any) -> Any:
    if provider == "openai_chat":
        return entry["function"]["parameters"]
    return entry["input_schema" if provider == "anthropic_messages" else "parameters"]


def test_a034_provider_format_error() -> None:
    error = ProviderFormatError("openai_chat", "tool_calls[0].id", "must be a non-empty string")
    assert isinstance(error, ValueError)
    assert (error.provider, error.path, error.problem) == (
        "openai_chat",
        "tool_calls[0].id",
        "must be a non-empty string",
    )
    assert str(error) == "openai_chat: tool_calls[0].id must be a non-empty string"
    for clone in (pickle.loads(pickle.dumps(error)), copy.copy(error), copy.deepcopy(error)):
        assert type(clone) is ProviderFormatError
        assert str(clone) == str(error)
        assert (clone.provider, clone.path, clone.problem) == (
            error.provider,
            error.path,
            error.problem,
        )


def test_a036_tool_turn_validators() -> None:
    call = ModelToolCall(call_id="c", name="echo", arguments="{}")
    with pytest.raises(
        ValueError,
        match=exactly(
            'ToolTurn.provider must be one of "openai_chat", "openai_responses", '
            '"anthropic_messages"'
        ),
    ):
        ToolTurn(provider="x", calls=[call])
    with pytest.raises(
        ValueError, match=exactly("ToolTurn.echo must be empty or have one entry per call")
    ):
        ToolTurn(provider="openai_responses", calls=[call], echo=[{}, {}])
    with pytest.raises(
        TypeError, match=exactly("ToolTurn.calls must contain ModelToolCall objects")
    ):
        ToolTurn(provider="openai_chat", calls=["c"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=exactly("ToolTurn.echo must contain JSON objects")):
        ToolTurn(provider="openai_chat", calls=[call], echo=["x"])  # type: ignore[list-item]
    echo = {"caller": {"type": "program", "caller_id": "p"}}
    turn = ToolTurn(provider="openai_responses", calls=(c for c in [call]), echo=[echo])
    assert turn.calls == (call,)
    assert type(turn.echo[0]) is FrozenDict
    echo["caller"]["caller_id"] = "changed"
    assert turn.echo[0]["caller"]["caller_id"] == "p"


# -- write_results: the checks every adapter shares (I§2.3) --------------------------------


def _turn(provider: str, *names: str) -> ToolTurn:
    return ToolTurn(provider=provider, calls=calls(*names))


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a029_results_must_match_the_turn_exactly(provider: str) -> None:
    module = ADAPTERS[provider]
    runtime = adapter_runtime()
    turn = _turn(provider, "echo", "echo", "echo")
    outcome = await run_tool_calls(runtime, turn.calls)
    items = list(outcome.results)
    with pytest.raises(TypeError, match=exactly("write_results() expects a ToolTurn, got list")):
        module.write_results(list(turn.calls), outcome)
    other = next(p for p in PROVIDERS if p != provider)
    with pytest.raises(
        ValueError,
        match=exactly(f"ToolTurn was read by {other}; use dsh_sched.adapters.{other}"),
    ):
        module.write_results(_turn(other, "echo"), outcome)
    bad_type = (
        "committed must be a BatchOutcome or an iterable of CommittedCall or CallCommitted, got "
    )
    with pytest.raises(TypeError, match=exactly(bad_type + "str")):
        module.write_results(turn, ["x"])
    with pytest.raises(TypeError, match=exactly(bad_type + "int")):
        module.write_results(turn, 5)
    unkept = await run_tool_calls(runtime, turn.calls, keep_results=False)
    missing_0 = 'no result for call 0 (id "c0"): every tool call needs exactly one result'
    with pytest.raises(ValueError, match=exactly(missing_0)):
        module.write_results(turn, unkept)
    missing_1 = 'no result for call 1 (id "c1"): every tool call needs exactly one result'
    with pytest.raises(ValueError, match=exactly(missing_1)):
        module.write_results(turn, [items[0], items[2]])
    with pytest.raises(ValueError, match=exactly('more than one result for call 1 (id "c1")')):
        module.write_results(turn, [items[0], items[1], items[1], items[2]])
    foreign_turn = ToolTurn(provider=provider, calls=calls("echo", "two"))
    foreign = await run_tool_calls(runtime, foreign_turn.calls)
    with pytest.raises(ValueError, match=exactly("result for call 1 does not belong to this turn")):
        module.write_results(turn, [items[0], foreign.results[1], items[2]])
    short = ToolTurn(provider=provider, calls=turn.calls[:2])
    with pytest.raises(ValueError, match=exactly("result for call 2 does not belong to this turn")):
        module.write_results(short, outcome)
    # An equal call (not the same object) belongs to the turn: turns can be rebuilt.
    rebuilt = ToolTurn(provider=provider, calls=calls("echo", "echo", "echo"))
    assert module.write_results(rebuilt, outcome) == module.write_results(turn, outcome)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a028_contexts_false_and_context_messages(provider: str) -> None:
    module = ADAPTERS[provider]
    runtime = adapter_runtime()
    turn = _turn(provider, "ctx", "echo", "ctx")
    outcome = await run_tool_calls(runtime, turn.calls)
    with_contexts = module.write_results(turn, outcome)
    without = module.write_results(turn, outcome, contexts=False)
    contexts = module.context_messages(outcome.additional_contexts)
    if provider == "anthropic_messages":
        (message,) = with_contexts
        (bare,) = without
        (context,) = contexts
        assert message["content"] == [*bare["content"], *context["content"]]
        assert module.context_messages([]) == []
    else:
        assert with_contexts == [*without, *contexts]
        assert len(contexts) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a030_cancelled_batch_answers_every_call_once(provider: str) -> None:
    module = ADAPTERS[provider]
    runtime = adapter_runtime()
    parked: list[str] = []

    async def park(args: JsonValue, ctx: ToolRunContext) -> object:
        parked.append(ctx.call_id)
        await trio.sleep_forever()

    runtime.register(
        define_tool(
            name="park",
            description="Wait forever.",
            parameters={"type": "object"},
            output=text_output(),
            execute=park,
            is_concurrency_safe=True,
        )
    )
    turn = _turn(provider, "park", "park", "echo", "echo")
    sink = RecordingSink()
    with trio.CancelScope() as cancel_scope:
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                await run_tool_calls(runtime, turn.calls, sink=sink)

            nursery.start_soon(run)
            await trio.testing.wait_all_tasks_blocked()
            assert sorted(parked) == ["c0", "c1"]
            cancel_scope.cancel()
    committed = [e for e in sink.events if isinstance(e, CallCommitted)]
    codes = [c.result.error.info.code for c in committed if c.result.error and c.result.error.info]
    assert codes == [ABORTED, ABORTED, ABORTED_BEFORE_DISPATCH, ABORTED_BEFORE_DISPATCH]
    out = module.write_results(turn, committed)
    text = json.dumps(out)
    for call_id in ("c0", "c1", "c2", "c3"):
        assert text.count(f'"{call_id}"') == 1
    if provider == "anthropic_messages":
        assert [b.get("is_error") for b in out[0]["content"]] == [True] * 4


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a031_concluding_the_turn_changes_no_output(provider: str) -> None:
    module = ADAPTERS[provider]
    runtime = adapter_runtime()
    concluding = await run_tool_calls(runtime, calls("echo", "finish"))
    assert concluding.concludes_turn
    plain = ToolRuntime()
    plain.register(make_echo())
    plain.register(
        define_tool(
            name="finish",
            description="Not concluding.",
            parameters={"type": "object"},
            output=text_output(),
            execute=_done,
        )
    )
    ordinary = await run_tool_calls(plain, calls("echo", "finish"))
    assert not ordinary.concludes_turn
    turn = _turn(provider, "echo", "finish")
    assert module.write_results(turn, concluding) == module.write_results(turn, ordinary)
    assert "conclu" not in json.dumps(module.write_results(turn, concluding))


async def _done(args: JsonValue, ctx: ToolRunContext) -> object:
    return "done"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a033_outputs_are_fresh_plain_json(provider: str) -> None:
    module = ADAPTERS[provider]
    runtime = adapter_runtime()
    turn = _turn(provider, "echo", "img", "two", "ctx", "bmp", "nope", "blocked")
    outcome = await run_tool_calls(runtime, turn.calls)
    before = [c.result.to_json() for c in outcome.results]
    out = module.write_results(turn, outcome)
    assert json.loads(json.dumps(out, ensure_ascii=False)) == out
    _mutate_everything(out)
    assert [c.result.to_json() for c in outcome.results] == before
    assert module.write_results(turn, outcome) != out


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_write_results_takes_the_batch_iterator_items(provider: str) -> None:
    """A-029: CommittedCall items from ``open_batch`` iteration are accepted like the outcome."""
    module = ADAPTERS[provider]
    runtime = adapter_runtime()
    turn = _turn(provider, "echo", "img")
    seen: list[CommittedCall] = []
    async with open_batch(runtime, turn.calls) as batch:
        async for item in batch:
            seen.append(item)
    assert module.write_results(turn, reversed(seen)) == module.write_results(turn, batch.outcome)


def _mutate_everything(value: object) -> None:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
            node["mutated"] = True
        elif isinstance(node, list):
            stack.extend(node)
            node.append("mutated")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_export_takes_any_mapping_and_checks_hand_built_schemas(provider: str) -> None:
    """A-005, A-006: the per-schema checks also cover schemas the runtime did not build."""
    tools = ADAPTERS[provider].tools
    assert tools([]) == []
    frozen = FrozenDict(type="object")
    (entry,) = tools([schema("x", frozen, description="")])
    assert _parameters(provider, entry) is frozen
    odd = ToolSchema(name=5, description="", parameters={"type": "object"})  # type: ignore[arg-type]
    message = f'tool "5" cannot be exported to {provider}: names must match ^[a-zA-Z0-9_-]{{1,64}}$'
    with pytest.raises(ValueError, match=exactly(message)):
        tools([odd])
    comma = f'tool "a,b" cannot be exported to {provider}: names must match ^[a-zA-Z0-9_-]{{1,64}}$'
    with pytest.raises(ValueError, match=exactly(comma)):
        tools([schema("a", {"type": "object"}), schema("a,b", {"type": "object"})])
    for bad in ("", "b" * 65, "a b", "é"):
        with pytest.raises(ValueError, match="names must match"):
            tools([schema("a", {"type": "object"}), schema(bad, {"type": "object"})])
    # Checks run per schema in order: the first schema's problem is the one reported.
    with pytest.raises(ValueError, match="parameters must be"):
        tools([schema("first", {}), schema("bad name", {"type": "object"})])


def test_read_turns_equal_turns_built_through_the_validators() -> None:
    """A-036: a turn from read_calls is an ordinary ToolTurn, equal to one built by hand."""
    caller = {"type": "program", "caller_id": "p"}
    output = [
        {"type": "function_call", "call_id": "a", "name": "echo", "arguments": "{}"},
        {
            "type": "function_call",
            "call_id": "b",
            "name": "echo",
            "arguments": "{}",
            "caller": caller,
        },
    ]
    turn = openai_responses.read_calls(output)
    by_hand = ToolTurn(
        provider="openai_responses", calls=list(turn.calls), echo=[{}, {"caller": caller}]
    )
    assert turn == by_hand
    assert hash(turn) == hash(by_hand)
    assert repr(turn) == repr(by_hand)
    assert type(turn.calls) is tuple
    assert type(turn.echo) is tuple


def test_a036_a_frozen_echo_entry_is_kept_as_is() -> None:
    call = ModelToolCall(call_id="c", name="echo", arguments="{}")
    entry = FrozenDict(toolset_name="t")
    assert ToolTurn(provider="anthropic_messages", calls=[call], echo=[entry]).echo[0] is entry


def test_a014_every_shape_of_a_call_reads_to_the_same_turn() -> None:
    """A-010, A-013, A-014: the plain JSON the APIs send and its variants (typeless entries,
    SDK-style items, ``caller: null``, an arguments object) give equal calls."""
    function = {"name": "echo", "arguments": '{"text":"hi"}'}
    chat_forms = [
        {"id": "a", "type": "function", "function": function},
        {"id": "a", "function": function},
        {"id": "a", "type": "function", "function": {**function, "arguments": {"text": "hi"}}},
    ]
    turns = [openai_chat.read_calls({"role": "assistant", "tool_calls": [f]}) for f in chat_forms]
    assert [t.calls[0].call_id for t in turns] == ["a", "a", "a"]
    assert turns[0] == turns[1]
    assert turns[2].calls[0].arguments == {"text": "hi"}
    item = {"type": "function_call", "call_id": "a", "name": "echo", "arguments": "{}"}
    plain = openai_responses.read_calls([item])
    assert openai_responses.read_calls([{**item, "caller": None}]) == plain
    assert openai_responses.read_calls([{"id": "x"}, item]) == plain  # an item without type
