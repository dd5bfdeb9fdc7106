"""``Abort`` itself (runtime.md §2.3): conformance items C-027, C-028, C-029 and C-032."""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing

from dsh_tools import (
    Abort,
    Allow,
    CallNext,
    JsonValue,
    PreDecision,
    ToolCall,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
)
from tests.pipeline_helpers import (
    aborted,
    aborted_before_dispatch,
    assignment_error,
    observe,
    raw_tool,
    run_into,
    tool_call,
)


def test_abort_created_outside_trio_is_not_aborted() -> None:
    """C-027 (§2.3): ``Abort()`` works outside ``trio.run`` and starts un-aborted."""
    abort = Abort()
    assert (abort.aborted, abort.reason) == (False, None)
    abort.abort("outside trio")
    assert (abort.aborted, abort.reason) == (True, "outside trio")


async def test_c027_first_reason_is_kept_and_wait_returns() -> None:
    """C-027: ``abort("a")`` then ``abort("b")``: reason ``"a"``; ``wait()`` returns."""
    abort = Abort()
    abort.abort("a")
    abort.abort("b")
    assert abort.aborted is True
    assert abort.reason == "a"
    with trio.testing.assert_checkpoints():
        await abort.wait()


async def test_c027_abort_without_reason() -> None:
    """C-027 (§2.3): the default reason is ``None``; a later reason does not replace it."""
    abort = Abort()
    abort.abort()
    abort.abort("later")
    assert abort.aborted is True
    assert abort.reason is None


async def test_c027_wait_wakes_at_the_abort_time(autojump_clock: trio.testing.MockClock) -> None:
    """C-027 (§2.3): every ``wait()``-er wakes when the abort fires, not before."""
    abort = Abort()
    woke: list[tuple[str, float]] = []

    async def waiter(label: str) -> None:
        await abort.wait()
        woke.append((label, trio.current_time()))

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter, "first")
        nursery.start_soon(waiter, "second")
        await trio.sleep(3)
        assert woke == []
        abort.abort("stop")
    assert sorted(woke) == [("first", start + 3), ("second", start + 3)]


async def test_c028_one_abort_cancels_three_running_bodies() -> None:
    """C-028: one ``Abort`` shared by three running calls cancels all three bodies."""
    runtime = ToolRuntime()
    started: list[str] = []
    cancelled: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        started.append(ctx.call_id)
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(ctx.call_id)
            raise

    runtime.register(raw_tool(execute=body))
    abort = Abort()
    results: list[ToolResult] = []
    async with trio.open_nursery() as nursery:
        for n in range(3):
            call = tool_call(abort=abort, call_id=f"shared-{n}")
            nursery.start_soon(run_into, runtime, call, results)
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(started) == ["shared-0", "shared-1", "shared-2"]
        assert cancelled == []
        abort.abort("stop all")
    assert sorted(cancelled) == ["shared-0", "shared-1", "shared-2"]
    assert results == [aborted(reason="stop all")] * 3


async def test_c029_default_abort_is_fresh_and_execution_is_frozen() -> None:
    """C-029: a ``ToolCall`` without ``abort`` gets a fresh one; ``execution.abort`` is frozen."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    observed = observe(runtime)
    first = ToolCall(call_id="a", name="echo", arguments={"text": "x"})
    second = ToolCall(call_id="b", name="echo", arguments={"text": "y"})
    assert isinstance(first.abort, Abort)
    assert first.abort is not second.abort
    assert first.abort.aborted is False
    assert first.abort.reason is None

    result = await runtime.execute(first)
    assert result.value == "x"
    [execution] = observed.executions
    assert execution.abort is first.abort
    failed = assignment_error(execution, "abort", Abort())
    assert isinstance(failed, attrs.exceptions.FrozenInstanceError)
    assert execution.abort is first.abort
    assert isinstance(
        assignment_error(first, "abort", Abort()), attrs.exceptions.FrozenInstanceError
    )


async def test_c032_move_on_abort_fired_during_the_block(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C-032: fired during the block: it ends at the abort time with ``cancelled_caught``."""
    abort = Abort()
    start = trio.current_time()
    ended: list[float] = []

    async def fire_later() -> None:
        await trio.sleep(2)
        abort.abort()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fire_later)
        with abort.move_on_abort() as scope:
            assert isinstance(scope, trio.CancelScope)
            await trio.sleep(10)
        ended.append(trio.current_time())
    assert ended == [start + 2]
    assert scope.cancel_called is True
    assert scope.cancelled_caught is True


async def test_c032_move_on_abort_fired_before_the_block(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C-032: fired before: the block ends at its first checkpoint."""
    abort = Abort()
    abort.abort()
    start = trio.current_time()
    reached: list[str] = []
    with abort.move_on_abort() as scope:
        reached.append("before the first checkpoint")
        await trio.sleep(10)
        reached.append("after the first checkpoint")  # pragma: no cover - must not run
    assert reached == ["before the first checkpoint"]
    assert trio.current_time() == start
    assert scope.cancelled_caught is True


async def test_c032_move_on_abort_never_fired(autojump_clock: trio.testing.MockClock) -> None:
    """C-032: never fired: the block runs to completion, ``cancel_called`` stays ``False``."""
    abort = Abort()
    start = trio.current_time()
    with abort.move_on_abort() as scope:
        await trio.sleep(3)
    assert trio.current_time() == start + 3
    assert scope.cancel_called is False
    assert scope.cancelled_caught is False
    # Leaving the block unregistered its scope: a later abort leaves it alone (§2.3).
    abort.abort()
    assert scope.cancel_called is False


async def test_c032_move_on_abort_does_not_absorb_an_outer_cancellation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C-032 (§2.3): like ``move_on_after``, only its own cancellation is absorbed there."""
    abort = Abort()
    start = trio.current_time()
    with trio.move_on_after(1) as outer:
        with abort.move_on_abort() as inner:
            await trio.sleep(10)
        pytest.fail("the outer deadline must end the outer block")  # pragma: no cover
    assert trio.current_time() == start + 1
    assert outer.cancelled_caught is True
    assert inner.cancelled_caught is False


async def test_c032_pre_hook_uses_move_on_abort(autojump_clock: trio.testing.MockClock) -> None:
    """C-032: a pre hook's ``move_on_abort`` sleep ends at the abort time → before dispatch."""
    runtime = ToolRuntime()
    body_runs: list[str] = []
    hook_ended: list[float] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        body_runs.append("body")  # pragma: no cover - must not run
        return "ok"  # pragma: no cover

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        with execution.abort.move_on_abort():
            await trio.sleep(10)
        hook_ended.append(trio.current_time())
        return Allow()

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        body_runs.append("wrapper")  # pragma: no cover - check C stops before dispatch
        return await call_next()  # pragma: no cover

    runtime.register(raw_tool(execute=body))
    runtime.on_pre_execute(pre)
    runtime.wrap_execute(wrap)
    observed = observe(runtime)
    abort = Abort()
    start = trio.current_time()
    results: list[ToolResult] = []

    async def fire_later() -> None:
        await trio.sleep(4)
        abort.abort()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_into, runtime, tool_call(abort=abort), results)
        nursery.start_soon(fire_later)
    assert results == [aborted_before_dispatch()]
    assert hook_ended == [start + 4]
    assert observed.times == [start + 4]
    assert body_runs == []
