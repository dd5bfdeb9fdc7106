"""Results, content, messages, errors and their durable JSON form.

runtime.md §2.2, §2.5, §2.6 and §7.6.

Conformance: J-001..J-019, J-024..J-026, J-032, plus Hypothesis round trips of every value
class (``ToolResult``, ``ToolError``, ``ErrorInfo``, ``TextContent``, ``ImageContent``,
``UserMessage``) through ``to_json()`` / ``ToolResult.from_json()``.
"""

from __future__ import annotations

import copy
import json
import math
import pickle
import uuid
from typing import TYPE_CHECKING, Any

import attrs
import pytest
from hypothesis import given

from dsh_tools import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    CODE_RUN_FAILED,
    INVALID_ARGS,
    INVALID_TOOL_OUTPUT,
    TOOL_DENIED,
    TOOL_TIMEOUT,
    UNKNOWN_TOOL,
    AbortError,
    Block,
    CallNext,
    CodeRunFailedError,
    ContentBlock,
    ErrorCode,
    ErrorInfo,
    FrozenDict,
    HarnessError,
    ImageContent,
    JsonValue,
    Output,
    PostDecision,
    TextContent,
    ToolArgsError,
    ToolError,
    ToolExecution,
    ToolNotFoundError,
    ToolOutputError,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    ToolTimeoutError,
    UserMessage,
    error_result,
    thaw_json,
)
from tests.helpers import error_text, exactly, make_echo, raw_tool, returning, run
from tests.strategies import (
    content_blocks,
    error_infos,
    tool_errors,
    tool_results,
    user_messages,
)

if TYPE_CHECKING:
    from collections.abc import Callable

JSON_KEYS = {"is_error", "content", "error", "meta", "additional_contexts", "concludes_turn"}


class QuotaError(HarnessError):
    """A user subclass keeping the ``(message, code)`` constructor (module level: picklable)."""


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("cannot print me")


def _normalized(data: object) -> Any:
    """The JSON text form of ``data``, parsed back (tuples become lists)."""
    return json.loads(json.dumps(data, ensure_ascii=False, allow_nan=False))


def _block_json(block: ContentBlock) -> dict[str, str]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    return {"type": "image", "data": block.data, "mime_type": block.mime_type}


def _message_json(message: UserMessage) -> dict[str, Any]:
    return {
        "id": message.id,
        "role": "user",
        "content": [_block_json(b) for b in message.content],
        "source": thaw_json(message.source),
    }


def _output(
    *,
    schema: object = None,
    render: Callable[[JsonValue, JsonValue], Any] | None = None,
    presentation_meta: Callable[[JsonValue, JsonValue], Any] | None = None,
) -> Output:
    return Output(
        schema={"type": "string"} if schema is None else schema,
        render=(lambda args, value: [TextContent(value)]) if render is None else render,
        presentation_meta=presentation_meta,
    )


def _observed(runtime: ToolRuntime) -> list[tuple[ToolExecution, ToolResult]]:
    seen: list[tuple[ToolExecution, ToolResult]] = []

    def observer(execution: ToolExecution, result: ToolResult) -> None:
        seen.append((execution, result))

    runtime.on_result(observer)
    return seen


def _output_error(name: str, violation: str) -> str:
    return f'Error: tool "{name}" returned invalid output: {violation}'


INVALID_OUTPUT_INFO = ErrorInfo("ToolOutputError", "INVALID_TOOL_OUTPUT")


# --------------------------------------------------------------------------- J-001..J-003


async def test_j001_echo_success_is_the_object_the_observer_received() -> None:
    """J-001: success with content, ``is_error=False`` and value; the observer got ``is``."""
    runtime = ToolRuntime()
    runtime.register(make_echo())
    seen = _observed(runtime)
    result = await run(runtime, "echo", {"text": "hello"})
    assert result.is_error is False
    assert result.content == (TextContent("hello"),)
    assert result.value == "hello"
    assert result.error is None
    assert result.meta is None
    assert result.additional_contexts == ()
    assert result.concludes_turn is False
    assert len(seen) == 1
    assert seen[0][1] is result


async def test_j002_presentation_meta_sets_meta() -> None:
    """J-002: ``presentation_meta`` set → ``meta`` on the success, frozen."""
    runtime = ToolRuntime()
    runtime.register(
        raw_tool(
            "meta",
            returning("abc"),
            output=_output(
                presentation_meta=lambda args, value: {"length": len(value), "args": args}
            ),
        )
    )
    result = await run(runtime, "meta", {"x": [1]})
    assert not result.is_error, result
    assert result.meta == {"length": 3, "args": {"x": (1,)}}
    assert type(result.meta) is FrozenDict
    assert _normalized(result.to_json())["meta"] == {"length": 3, "args": {"x": [1]}}


async def test_j002_presentation_meta_returning_none_means_no_meta() -> None:
    """J-002 (§7.6 step 4): ``presentation_meta`` returning ``None`` → no meta."""
    runtime = ToolRuntime()
    runtime.register(
        raw_tool("meta", returning("abc"), output=_output(presentation_meta=lambda a, v: None))
    )
    result = await run(runtime, "meta")
    assert not result.is_error, result
    assert result.meta is None
    assert "meta" not in result.to_json()


async def test_j003_no_presentation_meta_means_no_meta_key() -> None:
    """J-003: no ``presentation_meta`` → ``meta is None``; ``to_json()`` has no ``meta`` key."""
    runtime = ToolRuntime()
    runtime.register(make_echo())
    result = await run(runtime, "echo", {"text": "x"})
    assert result.meta is None
    data = result.to_json()
    assert "meta" not in data
    assert "value" not in data


# --------------------------------------------------------------------------- J-004..J-011


async def test_j004_presentation_meta_returning_a_function_is_invalid_output() -> None:
    """J-004: error text starts ``Error:``, info ``ToolOutputError``; the observer sees it."""
    runtime = ToolRuntime()
    runtime.register(
        raw_tool(
            "meta", returning("abc"), output=_output(presentation_meta=lambda a, v: lambda: None)
        )
    )
    seen = _observed(runtime)
    result = await run(runtime, "meta")
    assert error_text(result).startswith("Error:")
    assert error_text(result) == _output_error(
        "meta", "output.presentation_meta returned non-lossless JSON"
    )
    assert result.error is not None
    assert result.error.info == INVALID_OUTPUT_INFO
    assert result.value is None
    assert [r.is_error for _, r in seen] == [True]


@pytest.mark.parametrize(
    "make_value",
    [
        pytest.param(lambda: {1, 2}, id="set"),
        pytest.param(lambda: math.nan, id="nan"),
        pytest.param(lambda: type("Sub", (dict,), {})(a=1), id="dict-subclass"),
        pytest.param(lambda: {"nested": [math.inf]}, id="nested-inf"),
    ],
)
async def test_j005_non_lossless_value_is_invalid_output(make_value: Callable[[], object]) -> None:
    """J-005: a set, NaN or dict subclass → ``INVALID_TOOL_OUTPUT``: value is not lossless JSON."""
    runtime = ToolRuntime()
    runtime.register(
        raw_tool("bad", returning(make_value()), output=_output(schema={}, render=lambda a, v: []))
    )
    result = await run(runtime, "bad")
    assert error_text(result) == _output_error("bad", "value is not lossless JSON")
    assert result.error == ToolError(
        'tool "bad" returned invalid output: value is not lossless JSON', INVALID_OUTPUT_INFO
    )
    assert result.value is None


async def test_j006_value_violating_the_output_schema() -> None:
    """J-006: body returns ``1`` for a string output schema → ``"value" must be a string``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("num", returning(1)))
    result = await run(runtime, "num")
    assert error_text(result) == _output_error("num", '"value" must be a string')
    assert result.error is not None
    assert result.error.info == INVALID_OUTPUT_INFO


async def test_j007_render_raising_is_one_failed_call() -> None:
    """J-007: ``output.render`` raises → one failed call, ``output.render failed: <message>``."""

    def render(args: JsonValue, value: JsonValue) -> list[ContentBlock]:
        raise RuntimeError("render exploded")

    runtime = ToolRuntime()
    runtime.register(raw_tool("r", returning("fine"), output=_output(render=render)))
    seen = _observed(runtime)
    result = await run(runtime, "r")
    assert error_text(result) == _output_error("r", "output.render failed: render exploded")
    assert result.error is not None
    assert result.error.info == INVALID_OUTPUT_INFO
    assert result.value is None
    assert len(seen) == 1
    assert seen[0][1] is result


async def test_j008_presentation_meta_raising() -> None:
    """J-008: ``presentation_meta`` raises → ``output.presentation_meta failed: <message>``."""

    def meta(args: JsonValue, value: JsonValue) -> JsonValue:
        raise ValueError("meta exploded")

    runtime = ToolRuntime()
    runtime.register(raw_tool("m", returning("ok"), output=_output(presentation_meta=meta)))
    result = await run(runtime, "m")
    assert error_text(result) == _output_error(
        "m", "output.presentation_meta failed: meta exploded"
    )
    assert result.value is None
    assert result.meta is None


@pytest.mark.parametrize(
    ("render", "violation"),
    [
        pytest.param(
            lambda a, v: "just text",
            "output.render returned str; expected a sequence of content blocks",
            id="str",
        ),
        pytest.param(
            lambda a, v: None,
            "output.render returned NoneType; expected a sequence of content blocks",
            id="none",
        ),
        pytest.param(
            lambda a, v: [TextContent("bad \ud800")],
            "output.render returned non-lossless JSON",
            id="surrogate",
        ),
        pytest.param(
            lambda a, v: (ImageContent("aGk=", "image/\udfff"),),
            "output.render returned non-lossless JSON",
            id="surrogate-image",
        ),
    ],
)
async def test_j009_render_returning_bad_content(
    render: Callable[[JsonValue, JsonValue], Any], violation: str
) -> None:
    """J-009: a ``str`` → ``returned str; expected…``; an unpaired surrogate → non-lossless."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("r", returning("ok"), output=_output(render=render)))
    result = await run(runtime, "r")
    assert error_text(result) == _output_error("r", violation)
    assert result.error is not None
    assert result.error.info == INVALID_OUTPUT_INFO


async def test_j009_render_may_return_a_tuple() -> None:
    """J-009 (§7.6 step 3): a list or a tuple of blocks is accepted."""
    runtime = ToolRuntime()
    runtime.register(
        raw_tool("r", returning("ok"), output=_output(render=lambda a, v: (TextContent(v),)))
    )
    result = await run(runtime, "r")
    assert result.content == (TextContent("ok"),)


@pytest.mark.parametrize(
    "meta",
    [
        pytest.param({"x": math.inf}, id="inf"),
        pytest.param({"x": {1}}, id="set"),
        pytest.param([-0.0], id="negative-zero"),
    ],
)
async def test_j010_presentation_meta_returning_non_lossless(meta: object) -> None:
    """J-010: ``presentation_meta`` returns ``{"x": inf}`` → ``returned non-lossless JSON``."""
    runtime = ToolRuntime()
    runtime.register(
        raw_tool("m", returning("ok"), output=_output(presentation_meta=lambda a, v: meta))
    )
    result = await run(runtime, "m")
    assert error_text(result) == _output_error(
        "m", "output.presentation_meta returned non-lossless JSON"
    )


async def test_j011_block_feedback_with_unpaired_surrogate() -> None:
    """J-011: block feedback text with a surrogate → ``tool result must be losslessly…``."""

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        return Block([TextContent("bad \ud800 feedback")])

    runtime = ToolRuntime()
    runtime.register(make_echo())
    runtime.on_post_execute(post)
    seen = _observed(runtime)
    result = await run(runtime, "echo", {"text": "x"})
    assert error_text(result) == "Error: tool result must be losslessly JSON-serializable"
    assert result.error == ToolError("tool result must be losslessly JSON-serializable")
    assert seen[0][1] is result
    json.dumps(result.to_json(), ensure_ascii=False).encode("utf-8")


async def test_j011_body_deferring_a_non_lossless_context() -> None:
    """J-011 (§7.7 step 1): a context block with a surrogate fails the lossless check too."""

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.defer_context(UserMessage(content=[TextContent("\udc00")]))
        return "ok"

    runtime = ToolRuntime()
    runtime.register(raw_tool("t", body))
    result = await run(runtime, "t")
    assert error_text(result) == "Error: tool result must be losslessly JSON-serializable"
    assert result.error is not None
    assert result.error.info is None


# --------------------------------------------------------------------------- J-012..J-017


def _raising(exc: BaseException) -> Callable[[JsonValue, ToolRunContext], Any]:
    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        raise exc

    return body


async def test_j012_unknown_tool_and_plain_exception() -> None:
    """J-012: unknown tool → ``UNKNOWN_TOOL`` info; ``RuntimeError("exploded")`` → no info."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("boom", _raising(RuntimeError("exploded"))))

    unknown = await run(runtime, "nope")
    assert error_text(unknown) == 'Error: unknown tool "nope"'
    assert unknown.error == ToolError(
        'unknown tool "nope"', ErrorInfo("ToolNotFoundError", "UNKNOWN_TOOL")
    )

    exploded = await run(runtime, "boom")
    assert error_text(exploded) == "Error: exploded"
    assert exploded.error == ToolError("exploded")
    assert exploded.error.info is None
    assert exploded.value is None


async def test_j013_exception_whose_str_raises() -> None:
    """J-013: ``__str__`` raises → ``Error: <unprintable thrown value>``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("t", _raising(_Unprintable())))
    result = await run(runtime, "t")
    assert error_text(result) == "Error: <unprintable thrown value>"
    assert result.error == ToolError("<unprintable thrown value>")


class _Markup(str):
    """A ``str`` subclass, as ``markupsafe.Markup`` or ``numpy.str_`` are."""


class _MarkupMessage(Exception):
    def __str__(self) -> str:
        return _Markup("marked up")


async def test_j013_exception_whose_str_is_a_str_subclass() -> None:
    """J-013: ``str(e)`` succeeds with a ``str`` subclass: its text is the message, as a
    plain ``str`` (not an internal error about the message's type)."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("t", _raising(_MarkupMessage())))
    result = await run(runtime, "t")
    assert error_text(result) == "Error: marked up"
    assert result.error == ToolError("marked up")
    assert result.error is not None
    assert type(result.error.message) is str


def test_j014_tool_not_found_error() -> None:
    """J-014: a ``HarnessError`` with code ``UNKNOWN_TOOL`` and the exact message."""
    exc = ToolNotFoundError("ghost")
    assert isinstance(exc, HarnessError)
    assert isinstance(exc, Exception)
    assert exc.code == "UNKNOWN_TOOL"
    assert str(exc) == 'unknown tool "ghost"'
    result = error_result(exc)
    assert result.error == ToolError(
        'unknown tool "ghost"', ErrorInfo("ToolNotFoundError", "UNKNOWN_TOOL")
    )
    assert result.error.info is not None
    assert result.error.info.name == "ToolNotFoundError"
    with_hint = ToolNotFoundError("ghost", "try the parent scope")
    assert str(with_hint) == 'unknown tool "ghost": try the parent scope'


@pytest.mark.parametrize(
    ("exc", "message", "code"),
    [
        (ToolArgsError(["a", "b"]), "invalid arguments: a; b", "INVALID_ARGS"),
        (
            ToolOutputError("t", ["x", "y"]),
            'tool "t" returned invalid output: x; y',
            "INVALID_TOOL_OUTPUT",
        ),
        (ToolTimeoutError(0.1), "tool call timed out after 0.1s", "TOOL_TIMEOUT"),
        (ToolTimeoutError(2), "tool call timed out after 2.0s", "TOOL_TIMEOUT"),
        (AbortError("ABORTED"), "tool call aborted", "ABORTED"),
        (
            AbortError("ABORTED_BEFORE_DISPATCH"),
            "tool call aborted before dispatch",
            "ABORTED_BEFORE_DISPATCH",
        ),
        (CodeRunFailedError("it broke"), "it broke", "CODE_RUN_FAILED"),
        (HarnessError("disk full", "ENOSPC"), "disk full", "ENOSPC"),
    ],
)
def test_j014_error_classes_set_message_and_code(
    exc: HarnessError, message: str, code: str
) -> None:
    """J-014 (§2.6): every library error class sets its own code and exact message."""
    assert isinstance(exc, HarnessError)
    assert str(exc) == message
    assert exc.code == code
    assert error_result(exc).error == ToolError(message, ErrorInfo(type(exc).__name__, code))


def test_j014_tool_args_error_keeps_its_violations() -> None:
    """J-014 (§2.6): ``ToolArgsError.violations`` is a tuple."""
    assert ToolArgsError(["a", "b"]).violations == ("a", "b")
    assert ToolOutputError("t", ["v"]).violations == ("v",)


def test_j014_abort_error_rejects_other_codes() -> None:
    """J-014 (§2.6): ``AbortError`` with any code but the two abort codes → ``ValueError``."""
    with pytest.raises(ValueError):  # noqa: PT011 - the message is not specified
        AbortError("UNKNOWN_TOOL")


def test_j014_error_codes() -> None:
    """J-014 (§2.6): ``ErrorCode`` lists the eight codes, in the specification's order;
    constants of the same names exist."""
    assert issubclass(ErrorCode, str)
    expected = [
        "UNKNOWN_TOOL",
        "INVALID_ARGS",
        "INVALID_TOOL_OUTPUT",
        "TOOL_TIMEOUT",
        "ABORTED",
        "ABORTED_BEFORE_DISPATCH",
        "TOOL_DENIED",
        "CODE_RUN_FAILED",
    ]
    assert [m.name for m in ErrorCode] == expected
    assert all(ErrorCode[name] == name for name in expected)
    constants = [
        UNKNOWN_TOOL,
        INVALID_ARGS,
        INVALID_TOOL_OUTPUT,
        TOOL_TIMEOUT,
        ABORTED,
        ABORTED_BEFORE_DISPATCH,
        TOOL_DENIED,
        CODE_RUN_FAILED,
    ]
    assert constants == expected


async def test_j015_empty_message_uses_the_class_name() -> None:
    """J-015: ``TimeoutError()`` → ``Error: TimeoutError``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("t", _raising(TimeoutError())))
    result = await run(runtime, "t")
    assert error_text(result) == "Error: TimeoutError"
    assert result.error == ToolError("TimeoutError")


async def test_j016_harness_error_carries_its_code() -> None:
    """J-016: ``HarnessError("disk full", "ENOSPC")`` → its message, info ``HarnessError``/code."""
    exc = HarnessError("disk full", "ENOSPC")
    assert str(exc) == "disk full"
    assert exc.code == "ENOSPC"
    runtime = ToolRuntime()
    runtime.register(raw_tool("t", _raising(exc)))
    result = await run(runtime, "t")
    assert error_text(result) == "Error: disk full"
    assert result.error == ToolError("disk full", ErrorInfo("HarnessError", "ENOSPC"))


class _IntCode(HarnessError):
    def __init__(self) -> None:
        super().__init__("int code", "X")
        self.code = 7  # type: ignore[assignment]


class _RaisingCode(HarnessError):
    @property
    def code(self) -> str:
        raise RuntimeError("no code")

    @code.setter
    def code(self, value: str) -> None:
        pass


@pytest.mark.parametrize(
    ("exc", "message"),
    [(_IntCode(), "int code"), (_RaisingCode("raising code", "X"), "raising code")],
)
def test_j016_harness_error_without_a_readable_str_code_has_no_info(
    exc: HarnessError, message: str
) -> None:
    """J-016 (§2.6): info only when ``code`` is a ``str`` and reading it does not raise."""
    assert error_result(exc).error == ToolError(message)


async def test_j017_user_subclass_info_name() -> None:
    """J-017: ``class QuotaError(HarnessError)`` → info name ``QuotaError``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("t", _raising(QuotaError("over quota", "QUOTA"))))
    result = await run(runtime, "t")
    assert error_text(result) == "Error: over quota"
    assert result.error == ToolError("over quota", ErrorInfo("QuotaError", "QUOTA"))


async def test_j012_exception_group_becomes_an_error_result() -> None:
    """J-012 (§2.6): an ``ExceptionGroup`` is an ``Exception`` and becomes an error result."""
    group = ExceptionGroup("several", [ValueError("a"), KeyError("b")])
    runtime = ToolRuntime()
    runtime.register(raw_tool("t", _raising(group)))
    result = await run(runtime, "t")
    assert error_text(result) == f"Error: {group}"
    assert result.error == ToolError(str(group))


async def test_j012_keyboard_interrupt_propagates_without_a_result() -> None:
    """J-012 (§2.6): non-``Exception`` errors propagate unchanged; no observer sees a result."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("t", _raising(KeyboardInterrupt())))
    seen = _observed(runtime)
    with pytest.raises(KeyboardInterrupt):
        await run(runtime, "t")
    assert seen == []


# --------------------------------------------------------------------------- J-018 / J-019


def test_j018_to_json_exact_form() -> None:
    """J-018: the durable form: ``value`` never written; empty/``None`` fields omitted."""
    message = UserMessage(content=[TextContent("ctx")], source={"kind": "hook"}, id="m-1")
    success = ToolResult(
        is_error=False,
        content=[TextContent("hi"), ImageContent("aGk=", "image/png")],
        value={"secret": 1},
        meta={"m": [1]},
        additional_contexts=[message],
        concludes_turn=True,
    )
    assert _normalized(success.to_json()) == {
        "is_error": False,
        "content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "aGk=", "mime_type": "image/png"},
        ],
        "meta": {"m": [1]},
        "additional_contexts": [
            {
                "id": "m-1",
                "role": "user",
                "content": [{"type": "text", "text": "ctx"}],
                "source": {"kind": "hook"},
            }
        ],
        "concludes_turn": True,
    }
    minimal = ToolResult(is_error=False, value="dropped")
    assert _normalized(minimal.to_json()) == {"is_error": False, "content": []}
    failure = ToolResult(is_error=True, content=[TextContent("Error: x")], error=ToolError("x"))
    assert _normalized(failure.to_json()) == {
        "is_error": True,
        "content": [{"type": "text", "text": "Error: x"}],
        "error": {"message": "x"},
    }
    coded = error_result(HarnessError("x", "C"))
    assert _normalized(coded.to_json())["error"] == {
        "message": "x",
        "info": {"name": "HarnessError", "code": "C"},
    }


@given(tool_results())
def test_j018_every_result_round_trips(result: ToolResult) -> None:
    """J-018: ``from_json(r.to_json()) == attrs.evolve(r, value=None)``, also via JSON text."""
    data = result.to_json()
    assert "value" not in data
    assert set(data) <= JSON_KEYS
    assert {"is_error", "content"} <= set(data)
    assert ("meta" in data) == (result.meta is not None)
    assert ("additional_contexts" in data) == bool(result.additional_contexts)
    assert ("concludes_turn" in data) == result.concludes_turn
    assert ("error" in data) == result.is_error
    if result.error is not None:
        assert ("info" in data["error"]) == (result.error.info is not None)
    expected = attrs.evolve(result, value=None)
    assert ToolResult.from_json(data) == expected
    assert ToolResult.from_json(_normalized(data)) == expected
    json.dumps(data, ensure_ascii=False, allow_nan=False).encode("utf-8")


@given(tool_results())
def test_j018_from_json_builds_deeply_frozen_results(result: ToolResult) -> None:
    """J-018 (§2.5): a parsed result is as immutable as a constructed one."""
    back = ToolResult.from_json(_normalized(result.to_json()))
    assert type(back.content) is tuple
    assert type(back.additional_contexts) is tuple
    for message in back.additional_contexts:
        assert type(message.content) is tuple
        assert type(message.source) is FrozenDict
    if back.meta is not None:
        assert not isinstance(back.meta, list)
        assert type(back.meta) is not dict
    with pytest.raises(AttributeError):
        back.is_error = not back.is_error  # type: ignore[misc]


async def test_j018_runtime_results_round_trip() -> None:
    """J-018: results the runtime produces (success with meta/contexts, failures) round-trip."""

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.defer_context(UserMessage(content=[TextContent("note")], source={"kind": "test"}))
        ctx.conclude_turn()
        return {"rich": [1, 2.5, None]}

    runtime = ToolRuntime()
    runtime.register(
        raw_tool(
            "rich",
            body,
            output=_output(
                schema={},
                render=lambda a, v: [TextContent("rendered"), ImageContent("aGk=", "image/png")],
                presentation_meta=lambda a, v: {"n": 1},
            ),
        )
    )
    runtime.register(make_echo())
    runtime.register(raw_tool("boom", _raising(HarnessError("disk full", "ENOSPC"))))
    seen = _observed(runtime)
    for name, args in [("rich", {}), ("echo", {"text": "é"}), ("boom", {}), ("missing", {})]:
        await run(runtime, name, args)
    assert len(seen) == 4
    assert seen[0][1].concludes_turn is True
    assert seen[0][1].meta == {"n": 1}
    for _, result in seen:
        data = result.to_json()
        assert "value" not in data
        assert ToolResult.from_json(_normalized(data)) == attrs.evolve(result, value=None)


_VALID = {"is_error": False, "content": [{"type": "text", "text": "hi"}]}


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({**_VALID, "surprise": 1}, id="unknown-top-level-key"),
        pytest.param(
            {"is_error": False, "content": [{"type": "text", "text": "hi", "x": 1}]},
            id="unknown-block-key",
        ),
        pytest.param({"is_error": "yes", "content": []}, id="is_error-str"),
        pytest.param({"is_error": 0, "content": []}, id="is_error-int"),
        pytest.param({"is_error": False, "content": [{"type": "text", "text": 5}]}, id="text-int"),
        pytest.param({"is_error": False, "content": "hi"}, id="content-str"),
        pytest.param({"is_error": False, "content": [{"type": "video"}]}, id="unknown-block"),
        pytest.param({"is_error": False, "content": [{"text": "hi"}]}, id="block-without-type"),
        pytest.param({**_VALID, "concludes_turn": "yes"}, id="concludes_turn-str"),
        pytest.param({**_VALID, "concludes_turn": 1}, id="concludes_turn-int"),
        pytest.param({"content": []}, id="missing-is_error"),
        pytest.param({"is_error": True, "content": [], "error": {"message": 5}}, id="message-int"),
        pytest.param(
            {"is_error": True, "content": [], "error": {"message": "m", "extra": 1}},
            id="unknown-error-key",
        ),
        pytest.param(
            {"is_error": True, "content": [], "error": {"message": "m", "info": {"name": "N"}}},
            id="info-without-code",
        ),
        pytest.param(
            {
                "is_error": True,
                "content": [],
                "error": {"message": "m", "info": {"name": "N", "code": 5}},
            },
            id="info-code-int",
        ),
        pytest.param(
            {
                **_VALID,
                "additional_contexts": [
                    {"id": "m", "role": "user", "content": [{"type": "text", "text": 1}]}
                ],
            },
            id="context-text-int",
        ),
        pytest.param(
            {
                **_VALID,
                "additional_contexts": [
                    {"id": 5, "role": "user", "content": [], "source": {"kind": "tool"}}
                ],
            },
            id="context-id-int",
        ),
        pytest.param(
            {
                **_VALID,
                "additional_contexts": [
                    {"id": "m", "role": "user", "content": [], "source": {}, "extra": 1}
                ],
            },
            id="unknown-context-key",
        ),
    ],
)
def test_j019_from_json_rejects_unknown_keys_and_wrong_types(data: dict[str, Any]) -> None:
    """J-019: ``ValueError("invalid tool result JSON: …")`` chained from the cattrs error."""
    with pytest.raises(ValueError, match=r"^invalid tool result JSON: ") as info:
        ToolResult.from_json(data)
    assert info.value.__cause__ is not None


@pytest.mark.parametrize("data", [[], "text", None, 5])
def test_j019_from_json_rejects_non_objects(data: object) -> None:
    """J-019: a top-level value that is not an object is a wrong type."""
    with pytest.raises(ValueError, match=r"^invalid tool result JSON: "):
        ToolResult.from_json(data)  # type: ignore[arg-type]


def test_j019_from_json_rejects_invariant_violations() -> None:
    """J-019/J-024: JSON of a failed result without an error cannot build a result."""
    with pytest.raises(ValueError):  # noqa: PT011 - either the JSON or the §2.5 message
        ToolResult.from_json({"is_error": True, "content": []})


# --------------------------------------------------------------------------- J-024..J-026


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"is_error": True}, "a failed ToolResult needs an error"),
        (
            {"is_error": False, "error": ToolError("x")},
            "a successful ToolResult cannot carry an error",
        ),
        (
            {"is_error": True, "error": ToolError("x"), "value": 1},
            "a failed ToolResult cannot carry a value",
        ),
        (
            {"is_error": True, "error": ToolError("x"), "value": False},
            "a failed ToolResult cannot carry a value",
        ),
        (
            {"is_error": True, "error": ToolError("x"), "concludes_turn": True},
            "a failed ToolResult cannot conclude the turn",
        ),
    ],
)
def test_j024_result_invariants(kwargs: dict[str, Any], message: str) -> None:
    """J-024: constructor invariants raise ``ValueError`` with the §2.5 messages."""
    with pytest.raises(ValueError, match=exactly(message)):
        ToolResult(**kwargs)


def test_j024_converters_freeze_every_field() -> None:
    """J-024 (§2.5): sequences become tuples; ``value`` and ``meta`` go through ``freeze_json``."""
    message = UserMessage(content=[TextContent("c")])
    result = ToolResult(
        is_error=False,
        content=[TextContent("a")],
        value={"v": [1]},
        meta=[{"m": []}],
        additional_contexts=[message],
    )
    assert result.content == (TextContent("a"),)
    assert type(result.content) is tuple
    assert type(result.value) is FrozenDict
    assert result.value == {"v": (1,)}
    assert result.meta == ({"m": ()},)
    assert type(result.additional_contexts) is tuple
    assert result.additional_contexts[0] is message
    with pytest.raises(TypeError, match=r"^not lossless JSON"):
        ToolResult(is_error=False, value={1, 2})
    with pytest.raises(TypeError, match=r"^not lossless JSON"):
        ToolResult(is_error=False, meta={"x": math.nan})
    with pytest.raises(AttributeError):
        result.value = 2  # type: ignore[misc]


def test_j025_content_and_message_values() -> None:
    """J-025 (§2.2): constructors, defaults, ``role``; fields type-checked; frozen."""
    text = TextContent("hi")
    image = ImageContent("aGk=", "image/png")
    assert (text.text, image.data, image.mime_type) == ("hi", "aGk=", "image/png")
    assert ImageContent(data="aGk=", mime_type="image/png") == image
    message = UserMessage(content=[text, image])
    assert message.role == "user"
    assert message.content == (text, image)
    assert type(message.content) is tuple
    assert message.source == {"kind": "tool"}
    assert type(message.source) is FrozenDict
    assert uuid.UUID(message.id).version == 4
    assert str(uuid.UUID(message.id)) == message.id
    assert UserMessage(content=[text]).id != UserMessage(content=[text]).id
    custom = UserMessage(content=(), source={"kind": "hook", "tags": ["a"]}, id="fixed")
    assert custom.source == {"kind": "hook", "tags": ("a",)}
    assert custom.id == "fixed"
    for value in (text, image, message):
        with pytest.raises(AttributeError):
            value.id = "x"  # type: ignore[misc, union-attr]


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(
            lambda: TextContent(5),  # type: ignore[arg-type]
            id="text-int",
        ),
        pytest.param(
            lambda: ImageContent(b"aGk=", "image/png"),  # type: ignore[arg-type]
            id="image-bytes",
        ),
        pytest.param(
            lambda: ImageContent("aGk=", None),  # type: ignore[arg-type]
            id="mime-none",
        ),
        pytest.param(lambda: UserMessage(content=["text"]), id="content-str-item"),
        pytest.param(
            lambda: UserMessage(content=[TextContent("a")], id=5),  # type: ignore[arg-type]
            id="id-int",
        ),
        pytest.param(
            lambda: UserMessage(content=[TextContent("a")], source={"s": {1}}), id="source-set"
        ),
    ],
)
def test_j025_constructors_check_field_types(build: Callable[[], object]) -> None:
    """J-025 (§2.2): constructors check field types (``TypeError``)."""
    with pytest.raises(TypeError):
        build()


def test_j025_json_of_content_and_messages() -> None:
    """J-025: ``{"type":"text",…}``, ``{"type":"image",…}``, messages with ``role`` ``"user"``."""
    message = UserMessage(content=[ImageContent("AAAA", "image/jpeg")], id="ctx-1")
    result = ToolResult(
        is_error=False,
        content=[TextContent("t"), ImageContent("aGk=", "image/png")],
        additional_contexts=[message],
    )
    data = _normalized(result.to_json())
    assert data["content"] == [
        {"type": "text", "text": "t"},
        {"type": "image", "data": "aGk=", "mime_type": "image/png"},
    ]
    assert data["additional_contexts"] == [
        {
            "id": "ctx-1",
            "role": "user",
            "content": [{"type": "image", "data": "AAAA", "mime_type": "image/jpeg"}],
            "source": {"kind": "tool"},
        }
    ]


def test_j026_error_result_of_a_harness_error() -> None:
    """J-026: content ``Error: x``, ``ToolError("x", ErrorInfo("HarnessError", "C"))``."""
    result = error_result(HarnessError("x", "C"))
    assert result.is_error is True
    assert result.content == (TextContent("Error: x"),)
    assert result.error == ToolError("x", ErrorInfo("HarnessError", "C"))
    assert result.value is None
    assert result.meta is None
    assert result.additional_contexts == ()
    assert result.concludes_turn is False


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (RuntimeError("plain"), "plain"),
        (ValueError(), "ValueError"),
        (_Unprintable(), "<unprintable thrown value>"),
    ],
)
def test_j026_error_result_normalizes_other_exceptions(exc: Exception, message: str) -> None:
    """J-026 (§2.5-§2.6): plain exceptions carry no info; the message is normalized."""
    result = error_result(exc)
    assert result.content == (TextContent(f"Error: {message}"),)
    assert result.error == ToolError(message, None)


def test_j026_tool_error_and_error_info_positional_forms() -> None:
    """J-026 (README conventions): ``ToolError(message, info=None)``, ``ErrorInfo(name, code)``."""
    info = ErrorInfo("N", "C")
    assert (info.name, info.code) == ("N", "C")
    assert ToolError("m") == ToolError("m", None) == ToolError(message="m", info=None)
    assert ToolError("m", info).info is info
    assert ToolError("m") != ToolError("m", info)


# --------------------------------------------------------------------------- J-032


_ERRORS: list[HarnessError] = [
    HarnessError("disk full", "ENOSPC"),
    ToolNotFoundError("ghost"),
    ToolNotFoundError("ghost", "reachable from scope a"),
    ToolArgsError(['missing required property "path"', '"n" must be an integer']),
    ToolOutputError("t", ["value is not lossless JSON"]),
    ToolTimeoutError(0.25),
    ToolTimeoutError(3),
    AbortError("ABORTED"),
    AbortError("ABORTED_BEFORE_DISPATCH"),
    CodeRunFailedError("code run failed (syntax): bad"),
    QuotaError("over quota", "QUOTA"),
]


@pytest.mark.parametrize("exc", _ERRORS, ids=lambda e: f"{type(e).__name__}-{e.code}")
@pytest.mark.parametrize(
    "clone",
    [
        pytest.param(lambda e: pickle.loads(pickle.dumps(e)), id="pickle"),
        pytest.param(lambda e: pickle.loads(pickle.dumps(e, protocol=0)), id="pickle-0"),
        pytest.param(copy.copy, id="copy"),
        pytest.param(copy.deepcopy, id="deepcopy"),
    ],
)
def test_j032_errors_pickle_and_copy(
    exc: HarnessError, clone: Callable[[HarnessError], HarnessError]
) -> None:
    """J-032: same type, message, ``code`` and attributes (``violations`` …)."""
    twin = clone(exc)
    assert twin is not exc
    assert type(twin) is type(exc)
    assert str(twin) == str(exc)
    assert twin.code == exc.code
    assert vars(twin) == vars(exc)
    if isinstance(exc, ToolArgsError | ToolOutputError):
        assert twin.violations == exc.violations  # type: ignore[attr-defined]
    assert error_result(twin) == error_result(exc)


# --------------------------------------------------------------------------- round trips


@given(content_blocks())
def test_j025_content_block_round_trip(block: ContentBlock) -> None:
    """J-025/J-018: every ``TextContent``/``ImageContent`` survives the durable form."""
    result = ToolResult(is_error=False, content=[block])
    data = _normalized(result.to_json())
    assert data["content"] == [_block_json(block)]
    (back,) = ToolResult.from_json(data).content
    assert back == block
    assert type(back) is type(block)


@given(user_messages())
def test_j025_user_message_round_trip(message: UserMessage) -> None:
    """J-025/J-018: every ``UserMessage`` (id, role, content, source) survives the durable form."""
    result = ToolResult(is_error=False, additional_contexts=[message])
    data = _normalized(result.to_json())
    assert data["additional_contexts"] == [_message_json(message)]
    (back,) = ToolResult.from_json(data).additional_contexts
    assert back == message
    assert back.role == "user"
    assert back.id == message.id


@given(tool_errors())
def test_j018_tool_error_round_trip(error: ToolError) -> None:
    """J-018: every ``ToolError`` (with or without info) survives the durable form."""
    result = ToolResult(
        is_error=True, content=[TextContent("Error: " + error.message)], error=error
    )
    data = _normalized(result.to_json())
    expected: dict[str, Any] = {"message": error.message}
    if error.info is not None:
        expected["info"] = {"name": error.info.name, "code": error.info.code}
    assert data["error"] == expected
    assert ToolResult.from_json(data).error == error


@given(error_infos())
def test_j018_error_info_round_trip(info: ErrorInfo) -> None:
    """J-018: every ``ErrorInfo`` survives the durable form."""
    result = ToolResult(is_error=True, error=ToolError("m", info))
    data = _normalized(result.to_json())
    assert data["error"]["info"] == {"name": info.name, "code": info.code}
    back = ToolResult.from_json(data).error
    assert back is not None
    assert back.info == info
