"""A tour of dsh_tools in one file: tools, a scope, a restriction, a guard, hooks, results.

Run it with ``python examples/quickstart.py``. Every call prints its frozen result in the
durable JSON form (what a session log or a model message would carry).
"""

from __future__ import annotations

import json

import trio

from dsh_tools import (
    Abort,
    CallNext,
    Deny,
    JsonValue,
    Output,
    PreDecision,
    Scope,
    TextContent,
    ToolCall,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    define_tool,
)
from dsh_tools.policies import install_timeout_policy


async def add(args: JsonValue, ctx: ToolRunContext) -> int:
    total: int = args["a"] + args["b"]
    return total


async def slow(args: JsonValue, ctx: ToolRunContext) -> str:
    await trio.sleep(10)
    return "finished"


ADD = define_tool(
    name="add",
    description="Add two integers.",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
    output=Output(schema={"type": "integer"}, render=lambda args, value: [TextContent(str(value))]),
    execute=add,
    is_concurrency_safe=True,
)

SLOW = define_tool(
    name="slow",
    description="Take ten seconds, unless aborted or timed out.",
    parameters={"type": "object"},
    output=Output(schema={"type": "string"}, render=lambda args, value: [TextContent(value)]),
    execute=slow,
    timeout=0.5,
)


def show(label: str, result: ToolResult) -> None:
    print(f"{label:<30} {json.dumps(result.to_json(), ensure_ascii=False)}")


async def audit(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
    """A global pre-execute hook: log every call, then delegate."""
    print(f"  pre-execute: {execution.name} {json.dumps(execution.arguments)}")
    return await call_next()


async def timing(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
    """A global wrapper around dispatch: time the body."""
    started = trio.current_time()
    result = await call_next()
    print(f"  dispatch of {execution.name} took {trio.current_time() - started:.2f}s")
    return result


async def no_thirteen(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
    """A scoped pre-execute hook: deny one argument value, delegate otherwise."""
    if execution.arguments.get("a") == 13:
        return Deny("13 is unlucky")
    return await call_next()


def no_negatives(execution: ToolExecution) -> str | None:
    """A guard: deny-only, synchronous, and no hook can override it."""
    values = execution.arguments.values()
    if any(isinstance(v, int) and v < 0 for v in values):
        return "negative numbers are not allowed"
    return None


async def main() -> None:
    runtime = ToolRuntime()
    runtime.register(ADD)
    runtime.register(SLOW)
    install_timeout_policy(runtime)
    runtime.on_pre_execute(audit)
    runtime.wrap_execute(timing)

    async def run(label: str, name: str, scope: Scope | None = None, **arguments: object) -> None:
        call = ToolCall(call_id=label, name=name, arguments=arguments, scope=scope)
        show(label, await runtime.execute(call))

    # One agent's scope: it may use `add` only, never with a negative number, never with 13.
    with runtime.open_scope(name="calculator-agent") as agent:
        agent.restrict(allow=["add"])
        agent.guard(no_negatives)
        agent.on_pre_execute(no_thirteen)
        await run("add 2+3", "add", agent, a=2, b=3)
        await run("add -1+3 (guard)", "add", agent, a=-1, b=3)
        await run("add 13+1 (denied by hook)", "add", agent, a=13, b=1)
        await run("add with bad arguments", "add", agent, a="two")
        await run("slow (restricted away)", "slow", agent)

    await run("unknown tool", "nope")
    await run("slow (timeout policy)", "slow")

    abort = Abort()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_abort_soon, abort)
        call = ToolCall(call_id="aborted", name="slow", abort=abort)
        show("slow (aborted mid-body)", await runtime.execute(call))
    call = ToolCall(call_id="too-late", name="add", arguments={"a": 1, "b": 1}, abort=abort)
    show("add (aborted before start)", await runtime.execute(call))


async def _abort_soon(abort: Abort) -> None:
    await trio.sleep(0.1)
    abort.abort("user pressed stop")


if __name__ == "__main__":
    trio.run(main)
