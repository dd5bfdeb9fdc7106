"""Calls, executions, tokens and run contexts (runtime.md §2.4): construction and misuse."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import attrs
import pytest

from dsh_tools import (
    Abort,
    ExecutionToken,
    JsonValue,
    ToolCall,
    ToolExecution,
    ToolRunContext,
    ToolRuntime,
    UserMessage,
    lowlevel,
)
from dsh_tools.testing import PipelineInvariants
from tests.helpers import raw_tool


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("call_id", 1, "ToolCall.call_id must be a str, got int"),
        ("name", None, "ToolCall.name must be a str, got NoneType"),
        ("root_call_id", 5, "ToolCall.root_call_id must be a str or None, got int"),
        ("scope", "agent", "ToolCall.scope must be a Scope or None, got str"),
        ("abort", True, "ToolCall.abort must be an Abort, got bool"),
        ("parent", "token", "ToolCall.parent must be an ExecutionToken or None, got str"),
    ],
)
def test_tool_call_validators_name_the_field(field: str, value: object, message: str) -> None:
    fields: dict[str, Any] = {"call_id": "c1", "name": "echo", field: value}
    with pytest.raises(TypeError) as info:
        ToolCall(**fields)
    assert str(info.value) == message


def test_an_unchecked_tool_call_is_the_checked_one() -> None:
    # lowlevel.unchecked_tool_call is ToolCall() minus the checks, field for field.
    runtime = ToolRuntime()
    scope = runtime.open_scope()
    abort = Abort()
    arguments = {"a": 1}
    fields: dict[str, Any] = {
        "call_id": "c1",
        "name": "echo",
        "arguments": arguments,
        "scope": scope,
        "abort": abort,
        "root_call_id": "root",
        "parent": None,
    }
    unchecked = lowlevel.unchecked_tool_call(**fields)
    assert type(unchecked) is ToolCall
    assert unchecked == ToolCall(**fields)
    assert unchecked.arguments is arguments
    assert unchecked.abort is abort


def test_tool_call_defaults() -> None:
    first = ToolCall(call_id="c1", name="echo")
    second = ToolCall(call_id="c1", name="echo")
    assert first.arguments == {}
    assert first.arguments is not second.arguments
    assert first.abort is not second.abort
    assert not first.abort.aborted
    assert first.scope is None
    assert first.root_call_id is None
    assert first.parent is None


def test_runtime_only_classes_have_no_public_constructor() -> None:
    with pytest.raises(TypeError, match="runtime mints tokens"):
        ExecutionToken()
    with pytest.raises(TypeError, match="created by the runtime only"):
        ToolExecution()
    with pytest.raises(TypeError, match="created by the runtime only"):
        ToolRunContext()


async def test_execution_token_is_opaque_hashable_and_not_picklable() -> None:
    runtime = ToolRuntime()
    first = lowlevel.create(runtime, ToolCall(call_id="a", name="x"))
    second = lowlevel.create(runtime, ToolCall(call_id="b", name="x"))
    assert first.token != second.token
    assert len({first.token, second.token, first.token}) == 2
    assert repr(first.token).startswith("<ExecutionToken #")
    assert int(repr(second.token)[17:-1]) == int(repr(first.token)[17:-1]) + 1
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(first.token)
    lowlevel.finish(first, lowlevel.cancelled_result(first))
    lowlevel.finish(second, lowlevel.cancelled_result(second))


async def test_execution_fields_root_call_id_and_identity() -> None:
    runtime = ToolRuntime()
    parent = lowlevel.create(runtime, ToolCall(call_id="outer", name="x"))
    abort = Abort()
    call = ToolCall(call_id="inner", name="x", arguments=[1], abort=abort, parent=parent.token)
    execution = lowlevel.create(runtime, call)
    assert execution.call_id == "inner"
    assert execution.root_call_id == "inner"  # defaults to call_id
    assert execution.arguments == (1,)
    assert execution.abort is abort
    assert execution.parent is parent.token
    assert execution != copy.copy(execution)  # executions compare by identity
    assert execution == execution
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        execution.name = "y"  # type: ignore[misc]
    rooted = lowlevel.create(runtime, ToolCall(call_id="c", name="x", root_call_id="root"))
    assert rooted.root_call_id == "root"
    for e in (parent, execution, rooted):
        lowlevel.finish(e, lowlevel.cancelled_result(e))


async def test_run_context_mirrors_the_execution() -> None:
    seen: dict[str, object] = {}

    async def body(args: JsonValue, ctx: ToolRunContext) -> str:
        execution = ctx.execution
        seen.update(
            same=(
                ctx.call_id == execution.call_id
                and ctx.root_call_id == execution.root_call_id
                and ctx.name == execution.name
                and ctx.arguments is execution.arguments
                and ctx.scope is execution.scope
                and ctx.parent is execution.parent
                and ctx.abort is execution.abort
                and ctx.token is execution.token
            ),
            repr=repr(ctx),
        )
        return "ok"

    runtime = ToolRuntime()
    runtime.register(raw_tool("t", body))
    with runtime.open_scope(name="s") as scope:
        result = await runtime.execute(
            ToolCall(call_id="c9", name="t", arguments={"k": 1}, scope=scope, root_call_id="r")
        )
    assert not result.is_error
    assert seen["same"] is True
    assert str(seen["repr"]).startswith("<ToolRunContext 't' call_id='c9' <ExecutionToken #")


async def test_defer_context_rejects_non_messages_even_when_active() -> None:
    errors: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> str:
        try:
            ctx.defer_context({"role": "user"})  # type: ignore[arg-type]
        except TypeError as exc:
            errors.append(str(exc))
        ctx.defer_context(UserMessage(content=()))
        return "ok"

    runtime = ToolRuntime()
    runtime.register(raw_tool("t", body))
    result = await runtime.execute(ToolCall(call_id="c", name="t"))
    assert errors == ["defer_context() expects a UserMessage"]
    assert len(result.additional_contexts) == 1


def test_reprs_are_informative() -> None:
    runtime = ToolRuntime()
    runtime.register(raw_tool("t"))
    assert repr(runtime) == "<ToolRuntime with 1 global tools>"
    scope = runtime.open_scope(name="agent")
    assert repr(scope) == "<Scope 'agent'>"
    disposer = scope.register(raw_tool("mine"))
    assert repr(disposer) == "<Disposer active>"
    scope.close()
    assert repr(scope) == "<Scope 'agent' closed>"
    assert repr(disposer) == "<Disposer disposed>"
    abort = Abort()
    assert repr(abort) == "<Abort not aborted>"
    abort.abort("stop")
    assert repr(abort) == "<Abort aborted, reason='stop'>"


def test_execution_mode_and_execute_reject_non_calls() -> None:
    runtime = ToolRuntime()
    with pytest.raises(TypeError, match="execution_mode\\(\\) expects a ToolCall, got dict"):
        runtime.execution_mode({"name": "x"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="execute\\(\\) expects a ToolCall, got str"):
        lowlevel.create(runtime, "x")  # type: ignore[arg-type]


def test_open_scope_argument_types() -> None:
    runtime = ToolRuntime()
    with pytest.raises(TypeError, match="parent must be a Scope or None, got str"):
        runtime.open_scope(parent="root")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="name must be a str or None, got int"):
        runtime.open_scope(name=3)  # type: ignore[arg-type]


async def test_pipeline_invariants_install_disposes_every_hook() -> None:
    runtime = ToolRuntime()
    runtime.register(raw_tool("t"))
    invariants = PipelineInvariants()
    dispose = invariants.install(runtime)
    with pytest.raises(ValueError, match="unknown stage 'dispatch'"):
        invariants.record("dispatch", object())
    dispose()
    assert dispose.disposed
    dispose()  # idempotent
    executions: list[ToolExecution] = []
    runtime.on_result(lambda execution, result: executions.append(execution))
    result = await runtime.execute(ToolCall(call_id="c", name="t"))
    # Had the hooks stayed, this forged record would be the call's second "result".
    invariants.record("result", executions[0], result)
    assert invariants.violations == []


async def test_stages_reject_the_wrong_state_type() -> None:
    runtime = ToolRuntime()
    execution = lowlevel.create(runtime, ToolCall(call_id="c", name="x"))
    with pytest.raises(TypeError, match="dispatch\\(\\) expects a ReadyToDispatch, got ToolCall"):
        await lowlevel.dispatch(ToolCall(call_id="c", name="x"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="finalize\\(\\) expects a NeedsFinalize, got NoneType"):
        await lowlevel.finalize(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="finish\\(\\) expects a ToolResult, got str"):
        lowlevel.finish(execution, "done")  # type: ignore[arg-type]
    # A rejected finish leaves the execution unfinished.
    lowlevel.finish(execution, lowlevel.cancelled_result(execution))


async def test_render_returning_a_list_of_non_blocks_is_invalid_output() -> None:
    from dsh_tools import Output, ToolDefinition

    async def body(args: JsonValue, ctx: ToolRunContext) -> str:
        return "v"

    runtime = ToolRuntime()
    runtime.register(
        ToolDefinition(
            name="t",
            description="d",
            parameters={},
            output=Output(schema={}, render=lambda args, value: [{"type": "text"}]),  # type: ignore[list-item]
            execute=body,
        )
    )
    result = await runtime.execute(ToolCall(call_id="c", name="t"))
    assert result.error is not None
    assert result.error.message == (
        'tool "t" returned invalid output: output.render returned list; '
        "expected a sequence of content blocks"
    )


async def test_finalizer_returning_non_lossless_blocks_fails_the_result() -> None:
    from dsh_tools import Output, TextContent, ToolDefinition, ToolError

    async def body(args: JsonValue, ctx: ToolRunContext) -> str:
        return "v"

    calls: list[int] = []

    def finalize(execution: ToolExecution, result: object) -> list[TextContent]:
        calls.append(1)
        return [TextContent("bad \ud800")]

    runtime = ToolRuntime()
    runtime.register(
        ToolDefinition(
            name="t",
            description="d",
            parameters={},
            output=Output(schema={}, render=lambda args, value: [TextContent(value)]),
            execute=body,
            finalize_content=finalize,
        )
    )
    result = await runtime.execute(ToolCall(call_id="c", name="t"))
    assert result.error == ToolError("tool result must be losslessly JSON-serializable")
    assert calls == [1]
