"""Building blocks for the pipeline, approval, cancellation and lowlevel tests (public API only).

Import as ``from tests.pipeline_helpers import ...``. The expected results here spell the
specification's exact texts out literally (runtime.md §7, §8.1) instead of asking the library
to build them, so a wrong text in the library cannot make its own expectation pass.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import trio

from dsh_tools import (
    Abort,
    ContentBlock,
    ErrorInfo,
    ImageContent,
    JsonValue,
    Output,
    Scope,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolError,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    UserMessage,
)

__all__ = [
    "ABORTED_BEFORE_TEXT",
    "ABORTED_TEXT",
    "ARGS_NOT_LOSSLESS",
    "IMAGE",
    "Body",
    "Observed",
    "aborted",
    "aborted_before_dispatch",
    "assignment_error",
    "echo_body",
    "failing_nursery_body",
    "failure",
    "item_assignment_error",
    "message",
    "observe",
    "raw_tool",
    "render_json",
    "render_text",
    "run_into",
    "tool_call",
]

Body = Callable[[JsonValue, ToolRunContext], Awaitable[object]]

ABORTED_TEXT = "tool call aborted"
ABORTED_BEFORE_TEXT = "tool call aborted before dispatch"
ARGS_NOT_LOSSLESS = "tool execution arguments must be losslessly JSON-serializable"

#: A one-pixel PNG is not needed: the runtime never decodes image data.
IMAGE = ImageContent("aGVsbG8=", "image/png")

_call_ids: Iterator[int] = itertools.count(1)


async def echo_body(args: JsonValue, ctx: ToolRunContext) -> object:
    """The body of the conformance fixture ``echo``: ``args.get("text", "")``."""
    return args.get("text", "")


def render_text(args: JsonValue, value: JsonValue) -> Sequence[ContentBlock]:
    """Render a string value as one text block."""
    return [TextContent(value)]


def render_json(args: JsonValue, value: JsonValue) -> Sequence[ContentBlock]:
    """Render any value as one text block holding its compact JSON."""
    return [TextContent(json.dumps(value, separators=(",", ":")))]


def raw_tool(
    name: str = "echo",
    execute: Body = echo_body,
    *,
    schema: JsonValue = None,
    render: Callable[[JsonValue, JsonValue], Sequence[ContentBlock]] = render_text,
    presentation_meta: Callable[[JsonValue, JsonValue], JsonValue] | None = None,
    finalize_content: Any = None,
    timeout: float | None = None,
) -> ToolDefinition:
    """A raw definition shaped like ``echo``: string output unless ``schema`` says otherwise."""
    return ToolDefinition(
        name=name,
        description=f"The {name} tool.",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        output=Output(
            schema={"type": "string"} if schema is None else schema,
            render=render,
            presentation_meta=presentation_meta,
        ),
        execute=execute,
        finalize_content=finalize_content,
        timeout=timeout,
    )


def tool_call(
    name: str = "echo",
    arguments: object = None,
    *,
    abort: Abort | None = None,
    scope: Scope | None = None,
    call_id: str | None = None,
    parent: Any = None,
) -> ToolCall:
    """A call with a fresh ``call_id``; ``arguments=None`` means ``{"text": "hi"}``."""
    return ToolCall(
        call_id=f"call-{next(_call_ids)}" if call_id is None else call_id,
        name=name,
        arguments={"text": "hi"} if arguments is None else arguments,
        scope=scope,
        abort=Abort() if abort is None else abort,
        parent=parent,
    )


def failing_nursery_body(
    error: Callable[[], BaseException], deferred: UserMessage | None = None
) -> Body:
    """A body that defers ``deferred`` (if given), then parks in its own nursery next to a
    child that turns its ``Cancelled`` into ``error()``: cancelling the body makes its
    nursery raise that error in a group with the ``Cancelled``."""

    async def child(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            task_status.started()
            await trio.sleep_forever()
        except trio.Cancelled:
            raise error() from None

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        if deferred is not None:
            ctx.defer_context(deferred)
        async with trio.open_nursery() as nursery:
            await nursery.start(child)
            await trio.sleep(math.inf)  # typed to return, unlike sleep_forever()
        raise AssertionError("unreachable: the nursery raises")

    return body


def message(text: str) -> UserMessage:
    """A context message holding one text block."""
    return UserMessage(content=[TextContent(text)])


def failure(
    text: str, info: ErrorInfo | None = None, contexts: tuple[UserMessage, ...] = ()
) -> ToolResult:
    """The exact failure the runtime builds for ``text`` (content ``Error: <text>``)."""
    return ToolResult(
        is_error=True,
        content=(TextContent(f"Error: {text}"),),
        error=ToolError(text, info),
        additional_contexts=contexts,
    )


def _with_reason(text: str, reason: str | None) -> str:
    return text if not reason else f"{text}: {reason}"


def aborted(contexts: tuple[UserMessage, ...] = (), *, reason: str | None = None) -> ToolResult:
    """The exact ``ABORTED`` result of runtime.md §8.1 (the body had started), with the
    ``Abort``'s ``reason`` appended when it is a non-empty ``str``."""
    return failure(_with_reason(ABORTED_TEXT, reason), ErrorInfo("AbortError", "ABORTED"), contexts)


def aborted_before_dispatch(
    contexts: tuple[UserMessage, ...] = (), *, reason: str | None = None
) -> ToolResult:
    """The exact ``ABORTED_BEFORE_DISPATCH`` result of runtime.md §8.1, with ``reason``."""
    return failure(
        _with_reason(ABORTED_BEFORE_TEXT, reason),
        ErrorInfo("AbortError", "ABORTED_BEFORE_DISPATCH"),
        contexts,
    )


def denied(reason: str, contexts: tuple[UserMessage, ...] = ()) -> ToolResult:
    """The exact denial result of runtime.md §7.2 step 7 (``TOOL_DENIED``)."""
    return ToolResult(
        is_error=True,
        content=(TextContent(f"Error: {reason}"),),
        error=ToolError(reason, ErrorInfo("ToolDeniedError", "TOOL_DENIED")),
        additional_contexts=contexts,
    )


class Observed:
    """A ``tools/result`` observer that records what it is told (and when, in virtual time)."""

    def __init__(self) -> None:
        self.executions: list[ToolExecution] = []
        self.results: list[ToolResult] = []
        self.times: list[float] = []

    def __call__(self, execution: ToolExecution, result: ToolResult) -> None:
        self.executions.append(execution)
        self.results.append(result)
        self.times.append(trio.current_time())


def observe(runtime: ToolRuntime) -> Observed:
    """Install a recording global result observer."""
    observed = Observed()
    runtime.on_result(observed)
    return observed


async def run_into(runtime: ToolRuntime, call: ToolCall, results: list[ToolResult]) -> None:
    """Execute ``call`` and append its result (a task body for ``nursery.start_soon``)."""
    results.append(await runtime.execute(call))


def assignment_error(obj: object, attribute: str, value: object) -> Exception | None:
    """Try ``obj.<attribute> = value``; return what it raised, or ``None``."""
    try:
        setattr(obj, attribute, value)
    except Exception as exc:
        return exc
    return None


def item_assignment_error(container: Any, key: object, value: object) -> Exception | None:
    """Try ``container[key] = value``; return what it raised, or ``None``."""
    try:
        container[key] = value
    except Exception as exc:
        return exc
    return None
