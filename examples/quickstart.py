"""A tour of dsh_tools in one file: tools, a scope, a restriction, a guard, hooks, results.

Run it with ``python examples/quickstart.py``. Every call prints its frozen result in the
durable JSON form (what a session log or a model message would carry).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

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
from dsh_tools.examples import file_tools
from dsh_tools.policies import install_timeout_policy


async def slow(args: JsonValue, ctx: ToolRunContext) -> str:
    await trio.sleep(10)
    return "finished"


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


async def read_only(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
    """A scoped pre-execute hook: this agent may look, not touch."""
    if execution.name in ("write_file", "delete_file"):
        return Deny("this agent is read-only")
    return await call_next()


def no_secrets(execution: ToolExecution) -> str | None:
    """A guard: deny-only, synchronous, and no hook can override it."""
    path = execution.arguments.get("path", "")
    if isinstance(path, str) and path.endswith(".secret"):
        return f'"{path}" is a secret'
    return None


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="dsh-quickstart-") as tmp:
        await tour(Path(tmp))


async def tour(workspace: Path) -> None:
    runtime = ToolRuntime()
    for definition in file_tools(workspace):
        runtime.register(definition)
    runtime.register(SLOW)
    install_timeout_policy(runtime)
    runtime.on_pre_execute(audit)
    runtime.wrap_execute(timing)
    print(f"workspace: {workspace}")
    print("tools:", ", ".join(schema.name for schema in runtime.schemas()))

    async def run(label: str, name: str, scope: Scope | None = None, **arguments: object) -> None:
        call = ToolCall(call_id=label, name=name, arguments=arguments, scope=scope)
        show(label, await runtime.execute(call))

    await run("write notes.txt", "write_file", path="notes.txt", content="remember the milk")
    await run("write key.secret", "write_file", path="key.secret", content="hunter2")

    # One agent's scope: read-only (a hook), no secrets (a guard), no `slow` (a restriction).
    with runtime.open_scope(name="reader-agent") as agent:
        agent.restrict(deny=["slow"])
        agent.guard(no_secrets)
        agent.on_pre_execute(read_only)
        await run("read notes.txt", "read_file", agent, path="notes.txt")
        await run("list the workspace", "list_dir", agent)
        await run("read key.secret (guard)", "read_file", agent, path="key.secret")
        await run("write (denied by hook)", "write_file", agent, path="x.txt", content="x")
        await run("read ../etc (outside)", "read_file", agent, path="../etc/passwd")
        await run("read with bad arguments", "read_file", agent, max_bytes="all")
        await run("slow (restricted away)", "slow", agent)

    await run("unknown tool", "nope")
    await run("slow (timeout policy)", "slow")

    abort = Abort()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_abort_soon, abort)
        call = ToolCall(call_id="aborted", name="slow", abort=abort)
        show("slow (aborted mid-body)", await runtime.execute(call))
    call = ToolCall(call_id="too-late", name="list_dir", abort=abort)
    show("list (aborted before start)", await runtime.execute(call))


async def _abort_soon(abort: Abort) -> None:
    await trio.sleep(0.1)
    abort.abort("user pressed stop")


if __name__ == "__main__":
    trio.run(main)
