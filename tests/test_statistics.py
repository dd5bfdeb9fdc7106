"""``ToolRuntime.statistics()`` and ``Scope.statistics()``: frozen snapshots (issue 12).

Not part of the specification's conformance groups: trio's ``statistics()`` habit.
"""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing

from dsh_sched import ModelToolCall, run_tool_calls
from dsh_tools import (
    Abort,
    CallNext,
    FrozenDict,
    JsonValue,
    PreDecision,
    RuntimeStatistics,
    ScopeStatistics,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    lowlevel,
)
from tests.pipeline_helpers import raw_tool, tool_call

EVENTS = ("tools/pre-execute", "tools/execute", "tools/post-execute", "tools/result")


def hooks(pre: int = 0, execute: int = 0, post: int = 0, result: int = 0) -> FrozenDict:
    return FrozenDict(dict(zip(EVENTS, (pre, execute, post, result), strict=True)))


async def pre_hook(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
    return await call_next()


async def wrapper(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
    return await call_next()


def test_a_fresh_runtime_has_nothing() -> None:
    stats = ToolRuntime().statistics()
    assert stats == RuntimeStatistics(
        tools=0,
        guards=0,
        hooks_per_event=hooks(),
        change_observers=0,
        open_scopes=0,
        executions_in_flight=0,
    )


def test_runtime_counts_its_own_layer_and_tables_and_forgets_what_is_disposed() -> None:
    runtime = ToolRuntime()
    disposers = [
        runtime.register(raw_tool("a")),
        runtime.register(raw_tool("b")),
        runtime.guard(lambda execution: None),
        runtime.on_pre_execute(pre_hook),
        runtime.wrap_execute(wrapper),
        runtime.wrap_execute(wrapper),
        runtime.on_result(lambda execution, result: None),
        runtime.on_change(lambda: None),
    ]
    scope = runtime.open_scope()
    scope.register(raw_tool("c"))  # a scope's tool is not the global layer's
    scope.on_change(lambda: None)  # ... but every change observer is the runtime's
    stats = runtime.statistics()
    assert (stats.tools, stats.guards, stats.change_observers) == (2, 1, 2)
    assert stats.hooks_per_event == hooks(pre=1, execute=2, result=1)
    for dispose in disposers:
        dispose()
    scope.close()
    assert runtime.statistics() == ToolRuntime().statistics()


def test_open_scopes_counts_nested_scopes_until_they_close() -> None:
    runtime = ToolRuntime()
    outer = runtime.open_scope(name="outer")
    inner = runtime.open_scope(parent=outer, name="inner")
    other = runtime.open_scope(name="other")
    assert runtime.statistics().open_scopes == 3
    assert outer.statistics().open_children == 1
    outer.close()  # closes inner too
    assert runtime.statistics().open_scopes == 1
    assert inner.closed
    outer.close()  # idempotent: counted once
    inner.close()
    assert runtime.statistics().open_scopes == 1
    with other:
        pass
    assert runtime.statistics().open_scopes == 0


def test_scope_statistics_count_the_scopes_own_layer_only() -> None:
    runtime = ToolRuntime()
    runtime.register(raw_tool("global"))
    runtime.on_pre_execute(pre_hook)
    parent = runtime.open_scope()
    parent.register(raw_tool("p"))
    scope = runtime.open_scope(parent=parent)
    scope.register(raw_tool("a"))
    scope.register(raw_tool("b"))
    scope.restrict(deny=["global"])
    scope.guard(lambda execution: None)
    scope.wrap_execute(wrapper)
    scope.on_post_execute(lambda execution, result, call_next: call_next())
    assert scope.statistics() == ScopeStatistics(
        tools=2,
        restrictions=1,
        guards=1,
        hooks_per_event=hooks(execute=1, post=1),
        open_children=0,
        closed=False,
    )
    assert parent.statistics().tools == 1
    assert parent.statistics().hooks_per_event == hooks()
    scope.close()
    assert scope.statistics() == ScopeStatistics(
        tools=0, restrictions=0, guards=0, hooks_per_event=hooks(), open_children=0, closed=True
    )
    assert parent.statistics().open_children == 0


def test_snapshots_are_frozen_values() -> None:
    runtime = ToolRuntime()
    scope = runtime.open_scope()
    stats = runtime.statistics()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        stats.tools = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        stats.hooks_per_event["tools/result"] = 1
    # A snapshot does not follow the runtime.
    runtime.register(raw_tool())
    assert stats.tools == 0
    assert runtime.statistics().tools == 1
    # Equal snapshots are equal and hash alike (usable as keys, as trio's statistics are).
    assert hash(scope.statistics()) == hash(scope.statistics())
    assert {scope.statistics(): 1}[scope.statistics()] == 1


async def test_executions_in_flight_counts_calls_from_create_to_finish() -> None:
    runtime = ToolRuntime()
    release = trio.Event()
    seen: list[int] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        seen.append(runtime.statistics().executions_in_flight)
        await release.wait()
        return "done"

    runtime.register(raw_tool("slow", body))
    runtime.register(raw_tool())
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(runtime.execute, tool_call("slow"))
        await trio.testing.wait_all_tasks_blocked()
        assert runtime.statistics().executions_in_flight == 3
        # A call with a pre hook, through the staged path, counts the same way.
        runtime.on_pre_execute(pre_hook)
        await runtime.execute(tool_call())
        assert runtime.statistics().executions_in_flight == 3
        release.set()
    assert seen == [1, 2, 3]
    assert runtime.statistics().executions_in_flight == 0


async def test_executions_in_flight_through_the_lowlevel_stages() -> None:
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    execution = lowlevel.create(runtime, tool_call())
    assert runtime.statistics().executions_in_flight == 1
    step = await lowlevel.prepare(execution)
    assert isinstance(step, lowlevel.ReadyToDispatch)
    step2 = await lowlevel.dispatch(step)
    assert isinstance(step2, lowlevel.NeedsFinalize)
    assert runtime.statistics().executions_in_flight == 1
    await lowlevel.finalize(step2)
    assert runtime.statistics().executions_in_flight == 0
    # A second finish is refused and does not count the call twice.
    with pytest.raises(RuntimeError, match="already finished"):
        lowlevel.finish(execution, step2.result)
    assert runtime.statistics().executions_in_flight == 0


async def test_executions_in_flight_returns_to_zero_on_every_ending(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Stage-0 failures, aborts, denials, unknown tools and cancelled calls all finish."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())

    async def parked(args: JsonValue, ctx: ToolRunContext) -> object:
        await trio.sleep_forever()

    runtime.register(raw_tool("parked", parked))
    fired = Abort()
    fired.abort("stop")
    await runtime.execute(tool_call(arguments={"x": float("nan")}))  # not lossless
    await runtime.execute(tool_call(abort=fired))
    await runtime.execute(tool_call("missing"))
    with trio.move_on_after(1):
        await runtime.execute(tool_call("parked"))
    dispose = runtime.guard(lambda execution: "no")
    await runtime.execute(tool_call())
    dispose()
    assert runtime.statistics().executions_in_flight == 0


async def test_a_scheduled_batch_leaves_nothing_in_flight(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The scheduler drives the lowlevel stages: every call of a batch is finished, the
    aborted ones included."""
    runtime = ToolRuntime()
    abort = Abort()
    peak: list[int] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        peak.append(runtime.statistics().executions_in_flight)
        await trio.sleep(1)
        return "ok"

    async def firing(args: JsonValue, ctx: ToolRunContext) -> object:
        await trio.sleep(0.5)
        abort.abort("enough")
        return "ok"

    runtime.register(attrs.evolve(raw_tool("slow", body), is_concurrency_safe=True))
    runtime.register(attrs.evolve(raw_tool("fire", firing), is_concurrency_safe=True))

    def calls() -> list[ModelToolCall]:
        return [ModelToolCall(call_id=f"c{i}", name="slow", arguments="{}") for i in range(4)]

    outcome = await run_tool_calls(runtime, calls(), max_parallel=4)
    assert len(outcome.results) == 4
    assert max(peak) == 4
    assert runtime.statistics().executions_in_flight == 0
    batch = [*calls(), ModelToolCall(call_id="f", name="fire", arguments="{}")]
    aborted = await run_tool_calls(runtime, batch, max_parallel=5, abort=abort)
    # Every call ends ABORTED (the firing one returned after its own abort: check E).
    codes = [
        c.result.error.info.code for c in aborted.results if c.result.error and c.result.error.info
    ]
    assert codes == ["ABORTED"] * 5
    assert runtime.statistics().executions_in_flight == 0
