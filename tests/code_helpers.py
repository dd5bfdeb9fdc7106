"""Shared building blocks for the Code Mode lane tests (``test_code_*``).

A "program" is a :class:`~dsh_tools.testing.ScriptedCodeRuntime` script. :func:`code_runtime`
builds a runtime that can run it: one ``run_code`` tool whose body hands the script to the
lane, exactly as the real ``run_code`` body does after its argument checks.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from dsh_tools import (
    Abort,
    JsonValue,
    Output,
    Scope,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    define_tool,
)
from dsh_tools._code_run import run_code_body
from dsh_tools.code import CodeRunLimits, CodeRunOutcome, Dispatch
from dsh_tools.testing import ScriptedCodeRuntime

__all__ = ["RUN", "Script", "code_runtime", "run_program", "tool"]

#: The name the tests call the program tool by.
RUN = "run_prog"

Script = Callable[[Dispatch, tuple[str, ...], CodeRunLimits], Awaitable[CodeRunOutcome]]

_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"logs": {"type": "array", "items": {"type": "string"}}, "result": {}},
    "required": ["logs"],
    "additionalProperties": False,
}


def _render(args: object, value: Any) -> list[TextContent]:
    return [TextContent(json.dumps(value, default=list))]


def code_runtime(
    script: Script,
    *,
    max_parallel_sub_calls: int = 10,
    limits: CodeRunLimits | None = None,
) -> tuple[ToolRuntime, ScriptedCodeRuntime]:
    """A runtime with a program tool that runs ``script`` through the sub-call lane."""
    runtime = ToolRuntime()
    scripted = ScriptedCodeRuntime(script)
    run_limits = CodeRunLimits() if limits is None else limits

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        assert isinstance(args, dict)
        names = tuple(sorted(s.name for s in runtime.schemas(ctx.scope) if s.name != RUN))
        return await run_code_body(
            runtime=runtime,
            code_runtime=scripted,
            limits=run_limits,
            code=args["code"],
            tools=names,
            ctx=ctx,
        )

    runtime.register(
        define_tool(
            name=RUN,
            description="Run a program.",
            parameters={
                "type": "object",
                "properties": {"code": {"type": "string"}},
                "required": ["code"],
            },
            output=Output(schema=_OUTPUT_SCHEMA, render=_render),
            execute=body,
        )
    )
    _MAX[id(runtime)] = max_parallel_sub_calls
    return runtime, scripted


# Until the presentation branch (which adds ToolRuntime(max_parallel_sub_calls=)) is merged.
_MAX: dict[int, int] = {}
if not hasattr(ToolRuntime, "max_parallel_sub_calls"):
    setattr(  # noqa: B010
        ToolRuntime, "max_parallel_sub_calls", property(lambda self: _MAX.get(id(self), 10))
    )


async def run_program(
    runtime: ToolRuntime,
    *,
    call_id: str = "c1",
    scope: Scope | None = None,
    abort: Abort | None = None,
    code: str = "pass",
) -> ToolResult:
    """Execute the program tool once, as a model-direct call."""
    return await runtime.execute(
        ToolCall(
            call_id=call_id,
            name=RUN,
            arguments={"code": code},
            scope=scope,
            abort=Abort() if abort is None else abort,
        )
    )


Body = Callable[[JsonValue, ToolRunContext], Awaitable[object]]


def tool(
    name: str,
    body: Body,
    *,
    parallel: bool = True,
    render: Callable[[Any, Any], list[Any]] | None = None,
) -> ToolDefinition:
    """A tool with free-form arguments whose value is rendered as its JSON text."""
    return define_tool(
        name=name,
        description=f"The {name} tool.",
        parameters={"type": "object"},
        output=Output(schema={}, render=render or _render),
        execute=body,
        is_concurrency_safe=parallel,
    )


async def sleep_then(seconds: float, value: object) -> object:
    await trio.sleep(seconds)
    return value
