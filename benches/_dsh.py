"""The dsh-trio side of the benches: tools, hooks, runtimes and calls.

Every dsh scenario uses the same arguments (``{"a": 1, "b": "x"}``, given to the scheduler
as the model's raw JSON text) so that the configurations differ only in what they turn on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Final

from dsh_sched import BatchOutcome, ModelToolCall
from dsh_tools import (
    CallNext,
    JsonValue,
    Output,
    PostDecision,
    PreDecision,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    tool,
)

__all__ = [
    "ARGUMENTS_JSON",
    "check_outcome",
    "check_results",
    "model_calls",
    "noop_body",
    "raw_tool",
    "runtime_with",
    "tool_calls",
    "validated_sync_tool",
    "validated_tool",
]

#: The model's raw argument text for every bench call.
ARGUMENTS_JSON: Final = '{"a": 1, "b": "x"}'
_OK_CONTENT: Final = (TextContent("ok"),)
_OUTPUT: Final = Output(schema={"type": "string"}, render=lambda args, value: _OK_CONTENT)

Body = Callable[[JsonValue, ToolRunContext], Awaitable[object]]


async def noop_body(args: JsonValue, ctx: ToolRunContext | None) -> str:
    """The no-op tool body: returns ``"ok"`` without yielding."""
    return "ok"


def raw_tool(
    name: str = "noop", body: Body = noop_body, *, parallel: bool = True
) -> ToolDefinition:
    """A raw ("MCP-style") definition: no argument validation, a prebuilt one-block content."""
    return ToolDefinition(
        name=name,
        description="A bench tool.",
        parameters={"type": "object"},
        output=_OUTPUT,
        execute=body,
        is_concurrency_safe=parallel,
    )


@tool(name="noop", is_concurrency_safe=True)
async def _validated_noop(a: int, b: str) -> str:
    """Do nothing with two validated arguments."""
    return "ok"


def validated_tool() -> ToolDefinition:
    """The ``@tool`` no-op: arguments validated against ``{a: integer, b: string}`` and
    structured, the value rendered by ``@tool``'s default renderer."""
    return _validated_noop


@tool(name="noop", is_concurrency_safe=True, blocking=False)
def _validated_sync_noop(a: int, b: str) -> str:
    """Do nothing with two validated arguments (a plain def, run inline)."""
    return "ok"


def validated_sync_tool() -> ToolDefinition:
    """The synchronous ``@tool`` no-op (``blocking=False``): validated like
    :func:`validated_tool`, its body called inline."""
    return _validated_sync_noop


async def _pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
    return await call_next()


async def _wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
    return await call_next()


async def _post(
    execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
) -> PostDecision:
    return await call_next()


def _observe(execution: ToolExecution, result: ToolResult) -> None:
    return None


def runtime_with(*tools: ToolDefinition, hooks: bool = False) -> ToolRuntime:
    """A runtime with ``tools`` registered globally and, if ``hooks``, one delegating pre
    hook, one delegating wrapper, one delegating post hook and one no-op observer."""
    runtime = ToolRuntime()
    for definition in tools:
        runtime.register(definition)
    if hooks:
        runtime.on_pre_execute(_pre)
        runtime.wrap_execute(_wrap)
        runtime.on_post_execute(_post)
        runtime.on_result(_observe)
    return runtime


def model_calls(n: int, name: str = "noop", *, start: int = 0) -> tuple[ModelToolCall, ...]:
    """``n`` calls of ``name`` as the model sends them (raw JSON argument text)."""
    return tuple(
        ModelToolCall(call_id=f"c{i}", name=name, arguments=ARGUMENTS_JSON)
        for i in range(start, start + n)
    )


def tool_calls(n: int, name: str = "noop") -> list[ToolCall]:
    """``n`` runtime-level calls for ``runtime.execute`` (arguments already parsed)."""
    return [ToolCall(call_id=f"c{i}", name=name, arguments={"a": 1, "b": "x"}) for i in range(n)]


def check_outcome(n: int) -> Callable[[object], None]:
    """A check that a batch outcome holds ``n`` successful results."""

    def check(value: object) -> None:
        if not isinstance(value, BatchOutcome):
            raise TypeError(f"expected a BatchOutcome, got {type(value).__name__}")
        _check_results([c.result for c in value.results], n)

    return check


def check_results(n: int) -> Callable[[object], None]:
    """A check that a list holds ``n`` successful ``ToolResult``s."""

    def check(value: object) -> None:
        if not isinstance(value, list):
            raise TypeError(f"expected a list of results, got {type(value).__name__}")
        _check_results(value, n)

    return check


def _check_results(results: Sequence[object], n: int) -> None:
    if len(results) != n:
        raise AssertionError(f"expected {n} results, got {len(results)}")
    for result in results:
        if not isinstance(result, ToolResult) or result.is_error:
            raise AssertionError(f"a bench call failed: {result!r}")
