"""``dsh_tools.testing.PipelineInvariants`` (runtime.md §15): P-060, P-061, P-062."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from dsh_tools import (
    Abort,
    Accept,
    Block,
    CallNext,
    Deny,
    JsonValue,
    PostDecision,
    PreDecision,
    TextContent,
    ToolCall,
    ToolError,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    error_result,
    lowlevel,
)
from dsh_tools.testing import PipelineInvariants
from tests.pipeline_helpers import (
    aborted_before_dispatch,
    denied,
    failure,
    observe,
    raw_tool,
    tool_call,
)


def _execution(
    runtime: ToolRuntime, *, name: str = "echo", call_id: str = "forged"
) -> ToolExecution:
    return lowlevel.create(runtime, ToolCall(call_id=call_id, name=name, arguments={}))


async def test_p060_real_traffic_has_no_violations() -> None:
    """P-060: success, denial, wrapper failure, pre-aborted (and more) → no violations."""
    runtime = ToolRuntime()
    invariants = PipelineInvariants()
    invariants.install(runtime)

    async def failing(args: JsonValue, ctx: ToolRunContext) -> object:
        raise RuntimeError("body failed")

    runtime.register(raw_tool())
    runtime.register(raw_tool("denied"))
    runtime.register(raw_tool("wrapped-failure"))
    runtime.register(raw_tool("failing", failing))
    runtime.register(raw_tool("blocked"))

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        if execution.name == "denied":
            return Deny("no")
        if execution.name == "pre-crash":
            raise RuntimeError("pre crashed")
        return await call_next()

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        result = await call_next()
        if execution.name == "wrapped-failure":
            raise RuntimeError("wrapper failed")
        return result

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        if execution.name == "blocked":
            return Block([TextContent("blocked")])
        return await call_next()

    runtime.on_pre_execute(pre)
    runtime.wrap_execute(wrap)
    runtime.on_post_execute(post)
    observed = observe(runtime)

    pre_aborted = Abort()
    pre_aborted.abort()
    calls = [
        tool_call(),
        tool_call("denied"),
        tool_call("wrapped-failure"),
        tool_call(abort=pre_aborted),
        tool_call("failing"),
        tool_call("blocked"),
        tool_call("pre-crash"),
        tool_call("missing"),
        tool_call(arguments={"text": {"a set"}}),
    ]
    for call in calls:
        await runtime.execute(call)
    with trio.move_on_after(0) as cancelled:
        await runtime.execute(tool_call())
    assert cancelled.cancelled_caught is True
    assert len(observed.results) == len(calls) + 1
    assert invariants.violations == []

    # The hooks really recorded that traffic: re-recording a seen stage is a repeat.
    success, denied, wrapped, aborted_call = observed.executions[:4]
    invariants.record("pre", success)
    invariants.record("post", denied, observed.results[1])
    invariants.record("execute", wrapped)
    invariants.record("result", aborted_call, observed.results[3])
    assert invariants.violations == [
        "repeated pre",
        "repeated post",
        "repeated execute",
        "repeated result",
    ]


async def test_p061_forged_illegal_sequences() -> None:
    """P-061: ``pre, pre``; ``execute`` without ``pre``; ``post`` without ``pre``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    result = error_result(RuntimeError("x"))

    repeated = PipelineInvariants()
    execution = _execution(runtime)
    repeated.record("pre", execution)
    assert repeated.violations == []
    repeated.record("pre", execution)
    assert repeated.violations == ["repeated pre"]

    orphan_execute = PipelineInvariants()
    orphan_execute.record("execute", _execution(runtime))
    assert orphan_execute.violations == ["execute without pre"]

    orphan_post = PipelineInvariants()
    orphan_post.record("post", _execution(runtime), result)
    assert orphan_post.violations == ["post without pre"]


async def test_p061_forged_legal_sequences() -> None:
    """P-061 (§15): every legal sequence passes, each on its own token."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    result = error_result(RuntimeError("x"))
    invariants = PipelineInvariants()
    for stages in (
        ["result"],
        ["pre", "result"],
        ["pre", "post", "result"],
        ["pre", "execute", "result"],
        ["pre", "execute", "post", "result"],
    ):
        execution = _execution(runtime)
        for stage in stages:
            invariants.record(stage, execution, result if stage in ("post", "result") else None)
    assert invariants.violations == []


async def test_p061_stage_after_the_result() -> None:
    """P-061 (§15): a stage after ``result`` is not a legal sequence."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    invariants = PipelineInvariants()
    execution = _execution(runtime)
    invariants.record("result", execution, error_result(RuntimeError("x")))
    invariants.record("pre", execution)
    assert len(invariants.violations) == 1


async def test_p062_result_with_an_empty_name_or_call_id() -> None:
    """P-062: a ``result`` for an execution with an empty ``name`` or ``call_id`` is a violation."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    result = ToolResult(is_error=False, value="v")
    for execution in (
        _execution(runtime, name=""),
        _execution(runtime, call_id=""),
    ):
        invariants = PipelineInvariants()
        invariants.record("result", execution, result)
        assert len(invariants.violations) == 1, invariants.violations

    control = PipelineInvariants()
    control.record("result", _execution(runtime), result)
    assert control.violations == []


async def test_p062_hook_receives_something_else() -> None:
    """P-062 (§15): a stage fed something other than a ``ToolExecution`` / ``ToolResult``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    not_an_execution = PipelineInvariants()
    not_an_execution.record("pre", {"call_id": "x", "name": "echo"})
    assert len(not_an_execution.violations) == 1

    not_a_result = PipelineInvariants()
    not_a_result.record("result", _execution(runtime), Accept())
    assert len(not_a_result.violations) == 1


_PRE = ("allow", "deny", "raise", "garbage")
_WRAP = ("delegate", "short-circuit", "raise")
_BODY = ("ok", "raise")
_POST = ("accept", "block", "raise")


def _model(
    pre: str, wrap: str, body: str, post: str, prefired: bool
) -> tuple[list[str], ToolResult]:
    """The stages a call should pass and its exact result, by runtime.md §7.2-§7.5, §7.8."""
    if prefired:
        return ["result"], aborted_before_dispatch()
    if pre == "raise":
        return ["pre", "result"], failure("pre failed")
    if pre == "garbage":
        return ["pre", "result"], failure(
            "tools/pre-execute hook returned int; expected Allow, Deny or Ask"
        )
    stages = ["pre"]
    if pre == "deny":
        dispatched = denied("denied")
    else:
        stages.append("execute")
        if wrap == "raise":
            return [*stages, "result"], failure("wrapper failed")
        if wrap == "short-circuit":
            dispatched = ToolResult(is_error=False, value="short", content=[TextContent("short")])
        elif body == "raise":
            dispatched = failure("body failed")
        else:
            dispatched = ToolResult(is_error=False, value="hi", content=[TextContent("hi")])
    stages.append("post")
    if post == "block":
        final = ToolResult(
            is_error=True, content=[TextContent("blocked")], error=ToolError("blocked")
        )
    elif post == "raise":
        final = failure("post failed")
    else:
        final = dispatched
    return [*stages, "result"], final


@pytest.mark.parametrize("prefired", [False, True])
@pytest.mark.parametrize("post", _POST)
@pytest.mark.parametrize("body", _BODY)
@pytest.mark.parametrize("wrap", _WRAP)
@pytest.mark.parametrize("pre", _PRE)
async def test_p060_every_hook_behaviour_follows_the_model(
    pre: str, wrap: str, body: str, post: str, prefired: bool
) -> None:
    """P-060: for every combination of hook behaviours, the stages and the result match a
    small model of §7 and ``PipelineInvariants`` records no violation."""
    runtime = ToolRuntime()
    invariants = PipelineInvariants()
    invariants.install(runtime)
    seen: list[str] = []

    async def tool_body(args: JsonValue, ctx: ToolRunContext) -> object:
        if body == "raise":
            raise RuntimeError("body failed")
        return args["text"]

    async def pre_hook(execution: ToolExecution, call_next: CallNext[PreDecision]) -> Any:
        seen.append("pre")
        if pre == "deny":
            return Deny("denied")
        if pre == "raise":
            raise RuntimeError("pre failed")
        if pre == "garbage":
            return 42
        return await call_next()

    async def wrapper(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        seen.append("execute")
        if wrap == "raise":
            raise RuntimeError("wrapper failed")
        if wrap == "short-circuit":
            return ToolResult(is_error=False, value="short")
        return await call_next()

    async def post_hook(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        seen.append("post")
        if post == "block":
            return Block([TextContent("blocked")])
        if post == "raise":
            raise RuntimeError("post failed")
        return await call_next()

    runtime.register(raw_tool(execute=tool_body))
    runtime.on_pre_execute(pre_hook)
    runtime.wrap_execute(wrapper)
    runtime.on_post_execute(post_hook)
    runtime.on_result(lambda execution, result: seen.append("result"))
    abort = Abort()
    if prefired:
        abort.abort()
    result = await runtime.execute(tool_call(abort=abort))
    expected_stages, expected_result = _model(pre, wrap, body, post, prefired)
    assert seen == expected_stages
    assert result == expected_result
    assert invariants.violations == []
