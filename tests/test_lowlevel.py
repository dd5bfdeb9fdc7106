"""The stage contract of ``dsh_tools.lowlevel`` (runtime.md §13): P-063, C-031 and the rules
every driver relies on (finish once, stages in order, ``NeedsFinish`` for final results,
``cancelled_result``)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from dsh_tools import (
    Abort,
    CallNext,
    Deny,
    ErrorInfo,
    JsonValue,
    PreDecision,
    TextContent,
    ToolCall,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    lowlevel,
)
from dsh_tools.lowlevel import NeedsFinalize, NeedsFinish, ReadyToDispatch
from tests.helpers import exactly
from tests.pipeline_helpers import (
    ARGS_NOT_LOSSLESS,
    aborted,
    aborted_before_dispatch,
    denied,
    failure,
    message,
    observe,
    raw_tool,
    tool_call,
)


def _denying(reason: str) -> Any:
    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        return Deny(reason)

    return pre


async def test_p063_stages_chain_to_the_observed_result() -> None:
    """P-063: each stage takes the previous state; ``finalize`` returns what observers got."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    observed = observe(runtime)
    call = tool_call(call_id="staged")
    execution = lowlevel.create(runtime, call)
    assert isinstance(execution, ToolExecution)
    assert execution.call_id == "staged"
    assert execution.root_call_id == "staged"
    assert execution.abort is call.abort
    assert execution.arguments == {"text": "hi"}

    ready = await lowlevel.prepare(execution)
    assert isinstance(ready, ReadyToDispatch)
    assert ready.execution is execution

    dispatched = await lowlevel.dispatch(ready)
    assert isinstance(dispatched, NeedsFinalize)
    assert dispatched.execution is execution
    assert dispatched.result.value == "hi"
    assert observed.results == []

    result = await lowlevel.finalize(dispatched)
    assert result.value == "hi"
    assert result.content == (TextContent("hi"),)
    assert observed.results == [result]
    assert observed.results[0] is result
    assert observed.executions[0] is execution


async def test_p063_dispatching_the_same_ready_state_twice() -> None:
    """P-063: the same ``ReadyToDispatch`` dispatched twice → ``execution is not ready for``."""
    runtime = ToolRuntime()
    runs: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        runs.append("body")
        return "ok"

    runtime.register(raw_tool(execute=body))
    execution = lowlevel.create(runtime, tool_call())
    ready = await lowlevel.prepare(execution)
    assert isinstance(ready, ReadyToDispatch)
    await lowlevel.dispatch(ready)
    with pytest.raises(RuntimeError) as info:
        await lowlevel.dispatch(ready)
    assert str(info.value).startswith("execution is not ready for")
    assert runs == ["body"]


async def test_stage_contract_prepare_twice() -> None:
    """§13: preparing an execution twice is out of order."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    execution = lowlevel.create(runtime, tool_call())
    await lowlevel.prepare(execution)
    with pytest.raises(RuntimeError) as info:
        await lowlevel.prepare(execution)
    assert str(info.value).startswith("execution is not ready for")


async def test_stage_contract_dispatch_after_finish() -> None:
    """§13: once finished, an execution cannot be dispatched."""
    runtime = ToolRuntime()
    runs: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        runs.append("body")  # pragma: no cover - must not run
        return "ok"  # pragma: no cover

    runtime.register(raw_tool(execute=body))
    execution = lowlevel.create(runtime, tool_call())
    ready = await lowlevel.prepare(execution)
    assert isinstance(ready, ReadyToDispatch)
    lowlevel.finish(execution, lowlevel.cancelled_result(execution))
    with pytest.raises(RuntimeError) as info:
        await lowlevel.dispatch(ready)
    assert str(info.value).startswith("execution is not ready for")
    assert runs == []


async def test_stage_contract_finalize_twice() -> None:
    """§13: finalizing the same state twice is out of order; the first result stands."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    execution = lowlevel.create(runtime, tool_call())
    ready = await lowlevel.prepare(execution)
    assert isinstance(ready, ReadyToDispatch)
    step = await lowlevel.dispatch(ready)
    assert isinstance(step, lowlevel.NeedsFinalize)
    first = await lowlevel.finalize(step)
    with pytest.raises(RuntimeError) as info:
        await lowlevel.finalize(step)
    assert str(info.value) == "execution is not ready for finalize"
    assert not first.is_error


async def test_stage_contract_finish_twice() -> None:
    """§13: a second ``finish`` raises ``RuntimeError("execution already finished")``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    observed = observe(runtime)
    execution = lowlevel.create(runtime, tool_call())
    step = await lowlevel.prepare(execution)
    assert isinstance(step, ReadyToDispatch)
    step2 = await lowlevel.dispatch(step)
    assert isinstance(step2, NeedsFinalize)
    result = await lowlevel.finalize(step2)
    with pytest.raises(RuntimeError) as info:
        lowlevel.finish(execution, result)
    assert str(info.value) == "execution already finished"
    assert observed.results == [result]


async def test_stage_contract_finish_twice_after_explicit_finish() -> None:
    """§13: ``finish`` then ``finish`` again; the observers were told once."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    observed = observe(runtime)
    execution = lowlevel.create(runtime, tool_call())
    first = lowlevel.finish(execution, lowlevel.cancelled_result(execution))
    assert first == aborted_before_dispatch()
    with pytest.raises(RuntimeError) as info:
        lowlevel.finish(execution, first)
    assert str(info.value) == "execution already finished"
    assert observed.results == [first]


async def test_stage_contract_stage0_failure_needs_finish() -> None:
    """§13: a stage-0 argument failure comes out of ``prepare`` as ``NeedsFinish``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    observed = observe(runtime)
    abort = Abort()
    abort.abort()
    execution = lowlevel.create(runtime, tool_call(arguments={"text": float("nan")}, abort=abort))
    assert execution.arguments is None
    step = await lowlevel.prepare(execution)
    assert isinstance(step, NeedsFinish)
    assert step.execution is execution
    assert step.result == failure(ARGS_NOT_LOSSLESS)
    result = lowlevel.finish(step.execution, step.result)
    assert result == failure(ARGS_NOT_LOSSLESS)
    assert observed.results == [result]


async def test_stage_contract_stage1_final_results_need_finish() -> None:
    """§13: a pre-fired ``Abort`` (check A) is final: ``NeedsFinish``, never post-execute."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    abort = Abort()
    abort.abort()
    execution = lowlevel.create(runtime, tool_call(abort=abort))
    step = await lowlevel.prepare(execution)
    assert isinstance(step, NeedsFinish)
    assert step.result == aborted_before_dispatch()


async def test_stage_contract_pre_hook_failure_needs_finish() -> None:
    """§13: a raising pre hook is a final result of stage 1: ``NeedsFinish``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        raise RuntimeError("policy crashed")

    runtime.on_pre_execute(pre)
    step = await lowlevel.prepare(lowlevel.create(runtime, tool_call()))
    assert isinstance(step, NeedsFinish)
    assert step.result == failure("policy crashed")


async def test_stage_contract_denial_needs_finalize() -> None:
    """§13: a denial is a post-result: ``prepare`` returns ``NeedsFinalize``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    runtime.on_pre_execute(_denying("not today"))
    step = await lowlevel.prepare(lowlevel.create(runtime, tool_call()))
    assert isinstance(step, NeedsFinalize)
    assert step.result == denied("not today")
    assert await lowlevel.finalize(step) == denied("not today")


async def test_stage_contract_wrapper_failure_needs_finish() -> None:
    """§13: ``dispatch`` returns ``NeedsFinish`` when a wrapper failed."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        raise RuntimeError("wrapper broke")

    runtime.wrap_execute(wrap)
    ready = await lowlevel.prepare(lowlevel.create(runtime, tool_call()))
    assert isinstance(ready, ReadyToDispatch)
    step = await lowlevel.dispatch(ready)
    assert isinstance(step, NeedsFinish)
    assert step.result == failure("wrapper broke")


async def test_stage_contract_stages_add_no_schedule_point() -> None:
    """§7, §13: the stages of a hook-free, never-awaiting call never yield to another task.

    A task started just before the stages can only run if they yield. trio runs each batch
    of runnable tasks in a random order, so one round would catch a yield only half of the
    time; twenty rounds miss one with a probability of about one in a million.
    """
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    other_ran: list[int] = []

    async def other(n: int) -> None:
        other_ran.append(n)

    async with trio.open_nursery() as nursery:
        for n in range(20):
            nursery.start_soon(other, n)
            execution = lowlevel.create(runtime, tool_call())
            ready = await lowlevel.prepare(execution)
            assert isinstance(ready, ReadyToDispatch)
            dispatched = await lowlevel.dispatch(ready)
            assert isinstance(dispatched, NeedsFinalize)
            result = await lowlevel.finalize(dispatched)
            assert result.value == "hi"
            assert other_ran == list(range(n))
            await trio.testing.wait_all_tasks_blocked()
            assert other_ran == list(range(n + 1))


def test_c031_stage_functions_name_a_wrong_argument_type() -> None:
    """``create`` with something that is not a runtime, and ``cancelled_result`` with a
    result that is not a ``ToolResult``, raise a ``TypeError`` naming what they got."""
    call = ToolCall(call_id="c1", name="echo", arguments={})
    with pytest.raises(TypeError, match=exactly("create() expects a ToolRuntime, got str")):
        lowlevel.create("runtime", call)  # type: ignore[arg-type]
    execution = lowlevel.create(ToolRuntime(), call)
    with pytest.raises(
        TypeError, match=exactly("cancelled_result() expects a ToolResult or None, got str")
    ):
        lowlevel.cancelled_result(execution, "x")  # type: ignore[arg-type]
    lowlevel.finish(execution, lowlevel.cancelled_result(execution))


async def test_c031_cancelled_result_of_an_error_is_that_error() -> None:
    """C-031: ``cancelled_result(execution, r)`` with ``r`` a denial is ``r`` itself."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    runtime.on_pre_execute(_denying("no way"))
    observed = observe(runtime)
    execution = lowlevel.create(runtime, tool_call())
    step = await lowlevel.prepare(execution)
    assert isinstance(step, NeedsFinalize)
    replacement = lowlevel.cancelled_result(execution, step.result)
    assert replacement is step.result
    assert lowlevel.finish(execution, replacement) == denied("no way")
    assert observed.results == [denied("no way")]


async def test_c031_cancelled_result_of_a_success_is_aborted_with_its_context() -> None:
    """C-031: with ``r`` a success carrying a deferred context → ``ABORTED`` with it."""
    runtime = ToolRuntime()
    deferred = message("d")

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.defer_context(deferred)
        return "ok"

    runtime.register(raw_tool(execute=body))
    observed = observe(runtime)
    execution = lowlevel.create(runtime, tool_call())
    ready = await lowlevel.prepare(execution)
    assert isinstance(ready, ReadyToDispatch)
    step = await lowlevel.dispatch(ready)
    assert isinstance(step, NeedsFinalize)
    assert step.result.is_error is False
    assert step.result.additional_contexts == (deferred,)
    replacement = lowlevel.cancelled_result(execution, step.result)
    assert replacement == aborted((deferred,))
    assert lowlevel.finish(execution, replacement) == aborted((deferred,))
    assert observed.results == [aborted((deferred,))]


async def test_c031_cancelled_result_without_a_result() -> None:
    """C-031 (§13): ``result=None`` before the body → ``ABORTED_BEFORE_DISPATCH``; after a
    stage-0 failure → that failure."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    fresh = lowlevel.create(runtime, tool_call())
    assert lowlevel.cancelled_result(fresh) == aborted_before_dispatch()
    prepared = lowlevel.create(runtime, tool_call())
    await lowlevel.prepare(prepared)
    assert lowlevel.cancelled_result(prepared) == aborted_before_dispatch()
    broken = lowlevel.create(runtime, tool_call(arguments={"text": {"a set"}}))
    assert lowlevel.cancelled_result(broken) == failure(ARGS_NOT_LOSSLESS)


async def test_c031_dispatch_cancelled_mid_body_keeps_the_deferred_contexts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C-031 (§13): a stage lets ``Cancelled`` propagate; ``cancelled_result`` then knows the
    body started and what it deferred; ``finish`` notifies the observers."""
    runtime = ToolRuntime()
    deferred = message("d")

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.defer_context(deferred)
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    finalized: list[ToolResult] = []

    def finalize(execution: ToolExecution, result: ToolResult) -> None:
        finalized.append(result)

    runtime.register(raw_tool(execute=body, finalize_content=finalize))
    observed = observe(runtime)
    execution = lowlevel.create(runtime, tool_call())
    ready = await lowlevel.prepare(execution)
    assert isinstance(ready, ReadyToDispatch)
    start = trio.current_time()
    with trio.move_on_after(2) as driver_scope:
        await lowlevel.dispatch(ready)
    assert driver_scope.cancelled_caught is True
    assert trio.current_time() == start + 2
    assert observed.results == []
    replacement = lowlevel.cancelled_result(execution)
    assert replacement == aborted((deferred,))
    result = lowlevel.finish(execution, replacement)
    assert observed.results == [result]
    assert finalized == [aborted((deferred,))]


async def test_c031_cancelled_result_info_is_the_abort_error() -> None:
    """C-031 (§8.1): the replacement carries ``AbortError`` info and the exact text."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    execution = lowlevel.create(runtime, tool_call())
    replacement = lowlevel.cancelled_result(execution)
    assert replacement.content == (TextContent("Error: tool call aborted before dispatch"),)
    assert replacement.error is not None
    assert replacement.error.message == "tool call aborted before dispatch"
    assert replacement.error.info == ErrorInfo("AbortError", "ABORTED_BEFORE_DISPATCH")


async def test_finished_result_is_none_until_stage_4_and_then_the_observed_result() -> None:
    """``lowlevel.finished_result``: ``None`` before stage 4, then the very result the
    observers received; a wrong argument type is a ``TypeError``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    observed = observe(runtime)
    execution = lowlevel.create(runtime, tool_call())
    assert lowlevel.finished_result(execution) is None
    step = await lowlevel.prepare(execution)
    assert isinstance(step, ReadyToDispatch)
    assert lowlevel.finished_result(execution) is None
    result = await lowlevel.finalize(await lowlevel.dispatch(step))  # type: ignore[arg-type]
    assert lowlevel.finished_result(execution) is result
    assert observed.results == [result]
    with pytest.raises(TypeError, match="finished_result\\(\\) expects a ToolExecution, got str"):
        lowlevel.finished_result("nope")  # type: ignore[arg-type]


async def test_the_hot_path_builds_the_step_values_the_constructors_build() -> None:
    # _steps builds ReadyToDispatch and NeedsFinalize without attrs' frozen __init__: the
    # same values, field for field, of the same (final) classes.
    from dsh_tools._calls import Stage
    from dsh_tools._steps import needs_finalize, ready_to_dispatch

    runtime = ToolRuntime()
    execution = lowlevel.create(runtime, ToolCall(call_id="c1", name="missing"))
    state = execution._state
    ready = ready_to_dispatch(state, execution)
    assert state.stage == Stage.READY
    assert type(ready) is ReadyToDispatch
    assert ready == ReadyToDispatch(execution)
    assert ready.execution is execution
    result = ToolResult(is_error=False, content=(TextContent("ok"),))
    step = needs_finalize(state, execution, result)
    assert state.stage == Stage.NEEDS_FINALIZE
    assert type(step) is NeedsFinalize
    assert step == NeedsFinalize(execution, result)
    assert (step.execution, step.result) == (execution, result)
