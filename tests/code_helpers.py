"""Shared building blocks for the Code Mode lane tests (``test_code_*``).

A "program" is a :class:`~dsh_tools.testing.ScriptedCodeRuntime` script. :func:`code_runtime`
builds a Code Mode runtime that runs it when the model calls ``run_code``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from dsh_tools import (
    Abort,
    CodeDispatch,
    CodeDispatchStart,
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
from dsh_tools.code import CodeRunLimits, CodeRunOutcome, Dispatch, ToolCallError
from dsh_tools.testing import ScriptedCodeRuntime

__all__ = ["RUN", "Script", "Trace", "code_runtime", "gather", "run_program", "submit", "tool"]

#: The tool the model calls.
RUN = "run_code"

Script = Callable[[Dispatch, tuple[str, ...], CodeRunLimits], Awaitable[CodeRunOutcome]]


def code_runtime(
    script: Script,
    *,
    max_parallel_sub_calls: int = 10,
    limits: CodeRunLimits | None = None,
) -> tuple[ToolRuntime, ScriptedCodeRuntime]:
    """A Code Mode runtime (mode ``code``) whose code runtime plays ``script``."""
    scripted = ScriptedCodeRuntime(script)
    runtime = ToolRuntime(
        mode="code",
        code_runtime=scripted,
        code_limits=limits,
        max_parallel_sub_calls=max_parallel_sub_calls,
    )
    return runtime, scripted


async def run_program(
    runtime: ToolRuntime,
    *,
    call_id: str = "c1",
    scope: Scope | None = None,
    abort: Abort | None = None,
    code: str = "pass",
    root_call_id: str | None = None,
) -> ToolResult:
    """Execute ``run_code`` once, as a model-direct call."""
    return await runtime.execute(
        ToolCall(
            call_id=call_id,
            name=RUN,
            arguments={"code": code, "description": "A test program."},
            scope=scope,
            abort=Abort() if abort is None else abort,
            root_call_id=root_call_id,
        )
    )


Body = Callable[[JsonValue, ToolRunContext], Awaitable[object]]


def _render(args: object, value: Any) -> list[TextContent]:
    return [TextContent(json.dumps(value, default=list))]


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


async def submit(
    nursery: trio.Nursery, dispatch: Dispatch, name: str, args: object, out: list[object]
) -> None:
    """Call ``dispatch`` from a new task of ``nursery``; its value (or ``ToolCallError``)
    is appended to ``out``. Returns once the call was submitted."""

    async def one(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            out.append(await dispatch(name, args))
        except ToolCallError as exc:
            out.append(exc)

    await nursery.start(one)


async def gather(dispatch: Dispatch, calls: list[tuple[str, object]]) -> list[object]:
    """Submit ``calls`` in order, each from a task of its own, and wait for them all.

    Each entry of the result is the call's value, or the ``ToolCallError`` it raised.
    """
    out: list[object] = [None] * len(calls)

    async def one(
        i: int,
        name: str,
        args: object,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        try:
            out[i] = await dispatch(name, args)
        except ToolCallError as exc:
            out[i] = exc

    async with trio.open_nursery() as nursery:
        for i, (name, args) in enumerate(calls):
            # start() returns once the task has called dispatch: acceptance follows this order.
            await nursery.start(one, i, name, args)
    return out


class Trace:
    """Records tool bodies (start/end with virtual times) and the code-dispatch events."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.running = 0
        self.peak = 0
        self.starts: list[CodeDispatchStart] = []
        self.settles: list[CodeDispatch] = []

    def install(self, runtime: ToolRuntime) -> None:
        runtime.on_code_dispatch_start(self._start)
        runtime.on_code_dispatch(self._settle)

    def _start(self, event: CodeDispatchStart) -> None:
        self.starts.append(event)
        self.events.append(("S", event.sub_call_id))

    def _settle(self, event: CodeDispatch) -> None:
        self.settles.append(event)
        self.events.append(("D", event.sub_call_id, event.is_error))

    def body(self, seconds: float = 1.0, *, fail: str | None = None) -> Body:
        async def body(args: JsonValue, ctx: ToolRunContext) -> object:
            self.events.append(("start", ctx.call_id, trio.current_time()))
            self.running += 1
            self.peak = max(self.peak, self.running)
            try:
                await trio.sleep(seconds)
            finally:
                self.running -= 1
                self.events.append(("end", ctx.call_id, trio.current_time()))
            if fail is not None:
                raise RuntimeError(fail)
            return args

        return body

    def kinds(self, *kinds: str) -> list[tuple[Any, ...]]:
        """The events of these kinds, times dropped."""
        return [e[:2] if e[0] in ("start", "end") else e for e in self.events if e[0] in kinds]
