"""Native cancellation, KeyboardInterrupt and internal failure (scheduler.md §7, §8, §9, §9a).

S-019, S-020, S-040, S-044 and §13 example 5. Bodies and hooks block on gates; the test
cancels, interrupts or fails the batch at a chosen moment and checks what was recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

import dsh_tools._lane
from dsh_sched import CallCommitted, CallStarted, RecordingSink, open_batch, run_tool_calls
from dsh_sched.testing import TraceRecorder, check_trace
from dsh_tools import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    Abort,
    CallNext,
    Deny,
    PostDecision,
    PreDecision,
    ToolDefinition,
    ToolExecution,
    ToolResult,
    ToolRuntime,
    lowlevel,
    tool,
)
from dsh_tools._lane_workers import SPAWNS
from tests.helpers import raw_tool
from tests.test_sched_fixtures import Gates, StepSink, calls, gated_tool, output, text_of

wait_blocked = trio.testing.wait_all_tasks_blocked


Proceed = Callable[[], Awaitable[Any]]


def patch_dispatch(
    monkeypatch: pytest.MonkeyPatch,
    stage: Callable[[lowlevel.ReadyToDispatch, Proceed], Awaitable[Any]],
) -> None:
    """Route the driver's dispatch stages through ``stage(step, proceed)``, a stage bug.

    Both of the driver's paths: ``dispatch`` (a per-call scope) and the shared-scope
    ``dispatch_in_abort_scope``; ``proceed()`` runs the real stage of that path.
    """
    real = lowlevel.dispatch
    real_shared = lowlevel.dispatch_in_abort_scope

    async def per_call(step: lowlevel.ReadyToDispatch) -> Any:
        return await stage(step, lambda: real(step))

    def shared(step: lowlevel.ReadyToDispatch) -> Awaitable[Any]:
        def proceed() -> Awaitable[Any]:
            coro = real_shared(step)
            assert coro is not None  # these tests register no wrapper
            return coro

        return stage(step, proceed)

    monkeypatch.setattr(dsh_tools._lane, "dispatch", per_call)
    monkeypatch.setattr(dsh_tools._lane, "dispatch_in_abort_scope", shared)


def code(result: ToolResult | None) -> str | None:
    if result is None or result.error is None or result.error.info is None:
        return None
    return result.error.info.code


class FailOn:
    """A sink that logs like StepSink and raises ``error`` on one chosen event, once."""

    def __init__(self, steps: list[str], kind: str, call_id: str, error: BaseException) -> None:
        self.inner = StepSink(steps)
        self.kind = kind
        self.call_id = call_id
        self.error = error
        self.raised = 0

    def _maybe(self, kind: str, call_id: str) -> None:
        if (kind, call_id) == (self.kind, self.call_id) and not self.raised:
            self.raised += 1
            raise self.error

    def on_call(self, event: Any) -> None:
        self.inner.on_call(event)
        self._maybe("call", event.call.call_id)

    def on_result(self, event: Any) -> None:
        self.inner.on_result(event)
        self._maybe("result", event.call.call_id)

    def on_context(self, event: Any) -> None:
        self.inner.on_context(event)
        self._maybe("context", "")


async def test_s019_example5_sink_failure_while_a_sibling_runs() -> None:
    steps: list[str] = []
    sink_steps: list[str] = []
    observed: list[str] = []
    gates = Gates()
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=steps, gates=gates, contexts=1))
    runtime.register(gated_tool("bad", parallel=True, steps=steps, gates=gates, fail="late"))
    runtime.on_result(lambda execution, result: observed.append(execution.call_id))
    boom = RuntimeError("sink exploded")
    sink = FailOn(sink_steps, "result", "c1", boom)
    outcome_box: list[object] = []
    async with trio.open_nursery() as nursery:

        async def go() -> None:
            with pytest.raises(RuntimeError) as info:
                await run_tool_calls(
                    runtime, calls("r:c1", "bad:c2", "r:c3"), max_parallel=2, sink=sink
                )
            outcome_box.append(info.value)

        nursery.start_soon(go)
        await wait_blocked()
        gates.release("c1")
        await wait_blocked()
        # The failure is recorded; c2 still runs, so the batch has not returned.
        assert outcome_box == []
        assert "c3 start" not in steps
        gates.release("c2")  # a later sibling failure (a tool error) is ignored
    assert outcome_box == [boom]  # the very object, not a group
    assert sink_steps == ["call c1", "call c2", "result c1"]  # no c3, no synthetic, no context
    assert observed == ["c1"]  # no observer call for c2 or c3
    assert sink.raised == 1


async def test_s019_a_later_internal_failure_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two dispatch stages raise (a stage bug); the first failure is the one raised."""
    first, second = RuntimeError("first"), RuntimeError("second")
    gates = Gates()

    async def buggy_dispatch(step: lowlevel.ReadyToDispatch, proceed: Proceed) -> Any:
        call_id = step.execution.call_id
        await gates.wait(call_id)
        if call_id == "c1":
            raise first
        if call_id == "c2":
            raise second
        return await proceed()

    patch_dispatch(monkeypatch, buggy_dispatch)
    steps: list[str] = []
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=steps))
    async with trio.open_nursery() as nursery:
        box: list[BaseException] = []

        async def go() -> None:
            try:
                await run_tool_calls(runtime, calls("r:c1", "r:c2", "r:c3"), max_parallel=2)
            except RuntimeError as exc:
                box.append(exc)

        nursery.start_soon(go)
        await wait_blocked()
        gates.release("c1")
        await wait_blocked()
        assert box == []  # c2's dispatch still runs: no return yet
        gates.release("c2")
    assert box == [first]


async def test_example5_failure_during_prepare_leaves_the_call_undispatched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """§13 example 5's ordering rule: a failure recorded while a prepare was awaited."""
    bug = RuntimeError("dispatch stage bug")
    gates = Gates()

    async def buggy_dispatch(step: lowlevel.ReadyToDispatch, proceed: Proceed) -> Any:
        if step.execution.call_id == "c1":
            await gates.wait("bug")
            raise bug
        return await proceed()

    patch_dispatch(monkeypatch, buggy_dispatch)
    steps: list[str] = []
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=steps))
    prepared: list[str] = []

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        if execution.call_id == "c2":
            await gates.wait("pre c2")
        decision = await call_next()
        prepared.append(execution.call_id)
        return decision

    runtime.on_pre_execute(pre)
    sink = RecordingSink()
    async with trio.open_nursery() as nursery:
        box: list[BaseException] = []

        async def go() -> None:
            try:
                await run_tool_calls(runtime, calls("r:c1", "r:c2"), sink=sink)
            except RuntimeError as exc:
                box.append(exc)

        nursery.start_soon(go)
        await wait_blocked()
        gates.release("bug")  # c1's dispatch fails while the driver awaits c2's prepare
        await wait_blocked()
        gates.release("pre c2")
    assert prepared == ["c1", "c2"]  # the awaited prepare finished...
    assert steps == []  # ...but nothing was dispatched after the failure
    assert box == [bug]
    assert [type(e).__name__ for e in sink.events] == ["CallStarted", "CallStarted"]


async def test_a_failure_while_the_driver_lets_its_tasks_run_stops_the_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """§13 example 5's rule at the pause after every few task starts (decision 113): a
    dispatch stage that fails while the driver lets the tasks it started run leaves every
    later call unstarted."""
    runtime = ToolRuntime()

    @tool(name="r", is_concurrency_safe=True)
    async def waits() -> str:
        """Wait a moment."""
        await trio.lowlevel.checkpoint()
        return "ok"

    runtime.register(waits)
    await run_tool_calls(runtime, calls("r:w0", "r:w1"), max_parallel=2)
    assert runtime._registry.waits == {"r"}  # from now on, a task per call
    bug = RuntimeError("dispatch stage bug")

    async def buggy_dispatch(step: lowlevel.ReadyToDispatch, proceed: Proceed) -> Any:
        if step.execution.call_id == "c0":
            raise bug
        return await proceed()

    patch_dispatch(monkeypatch, buggy_dispatch)
    sink = RecordingSink()
    names = [f"r:c{i}" for i in range(SPAWNS + 5)]
    with pytest.raises(RuntimeError) as caught:
        await run_tool_calls(runtime, calls(*names), max_parallel=len(names), sink=sink)
    assert caught.value is bug
    started = [e.call.call_id for e in sink.events if isinstance(e, CallStarted)]
    assert started == [f"c{i}" for i in range(SPAWNS)]


async def test_failure_during_finalize_leaves_that_commit_unrecorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """§8 step 4: a commit whose finalize was running completes, but is not recorded."""
    bug = RuntimeError("dispatch stage bug")
    gates = Gates()

    async def buggy_dispatch(step: lowlevel.ReadyToDispatch, proceed: Proceed) -> Any:
        if step.execution.call_id == "c2":
            await gates.wait("bug")
            raise bug
        return await proceed()

    patch_dispatch(monkeypatch, buggy_dispatch)
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=[]))
    finalized: list[str] = []

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        await gates.wait(f"post {execution.call_id}")
        finalized.append(execution.call_id)
        return await call_next()

    runtime.on_post_execute(post)
    runtime.on_result(lambda execution, result: finalized.append(f"observed {execution.call_id}"))
    sink = RecordingSink()
    box: list[BaseException] = []

    async def go() -> None:
        try:
            await run_tool_calls(runtime, calls("r:c1", "r:c2"), sink=sink)
        except RuntimeError as exc:
            box.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(go)
        await wait_blocked()  # the driver awaits c1's finalize (its post hook)
        gates.release("bug")
        await wait_blocked()
        gates.release("post c1")
    assert box == [bug]
    assert finalized == ["c1", "observed c1"]  # the finalize completed inside the runtime
    assert [type(e).__name__ for e in sink.events] == ["CallStarted", "CallStarted"]


async def test_s020_cancellation_mid_batch_commits_started_calls_without_post() -> None:
    steps: list[str] = []
    sink_steps: list[str] = []
    post_seen: list[str] = []
    observed: dict[str, ToolResult] = {}
    gates = Gates()
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=steps, gates=gates, contexts=1))
    runtime.register(gated_tool("bad", parallel=True, steps=steps, fail="body failed"))
    runtime.register(gated_tool("wrapped", parallel=True, steps=steps))
    runtime.register(gated_tool("w", parallel=False, steps=steps))

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        if execution.call_id == "c3":
            return Deny("not you")
        return await call_next()

    async def wrapper(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        if execution.name == "wrapped":
            raise RuntimeError("wrapper failed")
        return await call_next()

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        post_seen.append(execution.call_id)
        return await call_next()

    runtime.on_pre_execute(pre)
    runtime.wrap_execute(wrapper)
    runtime.on_post_execute(post)
    runtime.on_result(lambda execution, result: observed.__setitem__(execution.call_id, result))
    batch_calls = calls("r:c1", "bad:c2", "r:c3", "wrapped:c4", "r:c5", "w:c6")
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def go() -> None:
                async with open_batch(
                    runtime, batch_calls, max_parallel=4, sink=StepSink(sink_steps)
                ) as batch:
                    box.append(batch)

            box: list[Any] = []
            nursery.start_soon(go)
            await wait_blocked()
            assert sorted(s for s in steps if s.endswith("start")) == [
                "c1 start",
                "c2 start",
                "c5 start",
            ]
            scope.cancel()
    assert scope.cancelled_caught  # one bare Cancelled reached its owner; no group escaped
    (batch,) = box
    assert batch.outcome is None
    assert post_seen == []  # c1 blocked the line: no post-execute ran, none runs now
    assert sink_steps[:6] == ["call c1", "call c2", "call c3", "call c4", "call c5", "result c1"]
    assert sink_steps[6:] == [
        "result c2",
        "result c3",
        "result c4",
        "result c5",
        "call c6",
        "result c6",
        "context c1:0",
        "context c5:0",
    ]
    assert code(observed["c1"]) == ABORTED  # body started
    assert text_of(observed["c2"]) == "Error: body failed"  # a body error is kept
    assert text_of(observed["c3"]) == "Error: not you"  # a denial is kept
    assert text_of(observed["c4"]) == "Error: wrapper failed"  # a wrapper failure is kept
    assert code(observed["c5"]) == ABORTED
    assert "c6" not in observed  # synthetic


async def test_s020_iterator_gets_bookkeeping_results_in_another_task() -> None:
    steps: list[str] = []
    gates = Gates()
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=steps, gates=gates))
    got: list[tuple[str, str | None, bool]] = []
    with trio.CancelScope() as outer:
        async with trio.open_nursery() as nursery:
            batch = open_batch(runtime, calls("r:c1", "r:c2", "r:c3"), max_parallel=2)

            async def consume() -> None:
                with trio.CancelScope(shield=True):
                    async for committed in batch:
                        got.append(
                            (committed.call.call_id, code(committed.result), committed.synthetic)
                        )

            async def run_block() -> None:
                async with batch:
                    nursery.start_soon(consume)
                    await trio.sleep_forever()

            nursery.start_soon(run_block)
            await wait_blocked()
            outer.cancel()
    assert got == [
        ("c1", ABORTED, False),
        ("c2", ABORTED, False),
        ("c3", ABORTED_BEFORE_DISPATCH, True),
    ]


async def test_s044_cancellation_during_prepare_still_records_the_started_call() -> None:
    gates = Gates()
    runtime = ToolRuntime()
    recorder = TraceRecorder(runtime)
    steps: list[str] = []
    runtime.register(recorder.instrument(gated_tool("r", parallel=True, steps=steps)))

    async def slow_pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        if execution.call_id == "c2":
            await gates.wait("never")
        return await call_next()

    runtime.on_pre_execute(slow_pre)
    observed: dict[str, ToolResult] = {}
    runtime.on_result(lambda execution, result: observed.__setitem__(execution.call_id, result))
    sink = RecordingSink()
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: run_tool_calls(
                    runtime, calls("r:c1", "r:c2", "r:c3"), sink=_Both(sink, recorder)
                )
            )
            await wait_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    events = [
        (type(e).__name__, e.call.call_id, e.synthetic)
        for e in sink.events
        if isinstance(e, CallStarted | CallCommitted)
    ]
    assert events == [
        ("CallStarted", "c1", False),
        ("CallStarted", "c2", False),
        ("CallCommitted", "c1", False),
        ("CallCommitted", "c2", False),
        ("CallStarted", "c3", True),
        ("CallCommitted", "c3", True),
    ]
    c2 = sink.events[3]
    assert isinstance(c2.result, ToolResult)  # type: ignore[union-attr]
    assert code(c2.result) == ABORTED_BEFORE_DISPATCH  # type: ignore[union-attr]
    assert c2.result is observed["c2"]  # type: ignore[union-attr]
    check_trace(recorder.events, max_parallel=10)


class _Both:
    """Forward every event to two sinks."""

    def __init__(self, *sinks: Any) -> None:
        self.sinks = sinks

    def on_call(self, event: Any) -> None:
        for sink in self.sinks:
            sink.on_call(event)

    def on_result(self, event: Any) -> None:
        for sink in self.sinks:
            sink.on_result(event)

    def on_context(self, event: Any) -> None:
        for sink in self.sinks:
            sink.on_context(event)


async def test_s040_keyboard_interrupt_in_a_body_cancels_the_batch_natively() -> None:
    steps: list[str] = []
    gates = Gates()
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=steps, gates=gates))

    async def interrupting(args: object, ctx: Any) -> object:
        steps.append("ki start")
        await gates.wait("ki")
        raise KeyboardInterrupt

    runtime.register(
        ToolDefinition(
            name="ki",
            description="ki",
            parameters={},
            output=output(),
            execute=interrupting,
            is_concurrency_safe=True,
        )
    )
    sink = RecordingSink()
    batch = open_batch(runtime, calls("r:c1", "ki:c2", "r:c3", "r:c4"), max_parallel=3, sink=sink)

    async def block() -> None:
        async with batch:
            await wait_blocked()
            assert sorted(steps) == ["c1 start", "c3 start", "ki start"]
            gates.release("ki")
            await trio.sleep_forever()  # the block is cancelled natively too

    with pytest.raises(KeyboardInterrupt) as info:
        await block()
    assert type(info.value) is KeyboardInterrupt  # alone, not in a group
    assert not batch.abort.aborted
    assert batch.outcome is None
    assert sorted(steps) == ["c1 end", "c1 start", "c3 end", "c3 start", "ki start"]
    results = [e for e in sink.events if type(e).__name__ == "CallCommitted"]
    assert [(e.call.call_id, code(e.result), e.synthetic) for e in results] == [  # type: ignore[union-attr]
        ("c1", ABORTED, False),
        ("c2", ABORTED, False),
        ("c3", ABORTED, False),
        ("c4", ABORTED_BEFORE_DISPATCH, True),
    ]


async def test_s040_interrupt_racing_a_sibling_completion_still_records_every_call() -> None:
    """The interrupt may land after a sibling's completion woke the driver, which then
    commits with no checkpoint; the driver must still notice the call left without a
    result. Trio randomizes the order of that race, so it is run many times."""

    async def first(args: object, ctx: Any) -> object:
        # Completing wakes the driver and, in the same scheduling batch, the interrupter.
        gates.release("second")
        return "first"

    async def second(args: object, ctx: Any) -> object:
        await gates.wait("second")
        raise KeyboardInterrupt

    for _ in range(32):
        gates = Gates()
        runtime = ToolRuntime()
        for name, body in (("first", first), ("second", second)):
            runtime.register(
                ToolDefinition(
                    name=name,
                    description=name,
                    parameters={},
                    output=output(),
                    execute=body,
                    is_concurrency_safe=True,
                )
            )
        sink = RecordingSink()
        with pytest.raises(KeyboardInterrupt):
            await run_tool_calls(runtime, calls("first:c1", "second:c2"), sink=sink)
        results = [e for e in sink.events if isinstance(e, CallCommitted)]
        assert [(e.call.call_id, code(e.result)) for e in results] == [
            ("c1", None),
            ("c2", ABORTED),
        ]


async def test_keyboard_interrupt_from_the_block_is_native_cancellation() -> None:
    steps: list[str] = []
    gates = Gates()
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=steps, gates=gates))
    sink = RecordingSink()
    batch = open_batch(runtime, calls("r:c1", "r:c2"), max_parallel=1, sink=sink)
    interrupt = KeyboardInterrupt()

    async def block() -> None:
        async with batch:
            await wait_blocked()
            raise interrupt

    with pytest.raises(KeyboardInterrupt) as info:
        await block()
    assert info.value is interrupt
    assert not batch.abort.aborted
    assert steps == ["c1 start", "c1 end"]  # drained by native cancellation
    assert [
        (type(e).__name__, e.synthetic)
        for e in sink.events
        if isinstance(e, CallStarted | CallCommitted)
    ] == [
        ("CallStarted", False),
        ("CallCommitted", False),
        ("CallStarted", True),
        ("CallCommitted", True),
    ]


async def test_keyboard_interrupt_from_a_sink_completes_the_commit_first() -> None:
    steps: list[str] = []
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=steps, contexts=1))
    sink_steps: list[str] = []
    sink = FailOn(sink_steps, "result", "c1", KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        await run_tool_calls(runtime, calls("r:c1", "r:c2", "r:c3"), max_parallel=1, sink=sink)
    # c1's on_result happened (and raised): its commit completed (its context is delivered)
    # and it is not reported twice; c2 and c3 never started and get synthetic pairs.
    assert sink_steps == [
        "call c1",
        "result c1",
        "call c2",
        "result c2",
        "call c3",
        "result c3",
        "context c1:0",
    ]
    assert [getattr(e, "synthetic", None) for e in sink.inner.events] == [
        False,
        False,
        True,
        True,
        True,
        True,
        None,
    ]
    assert steps == ["c1 start", "c1 end"]
    assert sink_steps.count("result c1") == 1


async def test_sink_failure_during_bookkeeping_is_logged_and_bookkeeping_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    steps: list[str] = []
    gates = Gates()
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=steps, gates=gates))
    sink_steps: list[str] = []
    sink = FailOn(sink_steps, "result", "c1", RuntimeError("bookkeeping sink error"))
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: run_tool_calls(runtime, calls("r:c1", "r:c2"), max_parallel=1, sink=sink)
            )
            await wait_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    assert sink_steps == ["call c1", "result c1", "call c2", "result c2"]
    assert any(
        r.levelno == logging.ERROR and r.name == "dsh_sched" and "bookkeeping" in r.getMessage()
        for r in caplog.records
    )


async def test_block_error_after_an_internal_failure_raises_the_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    steps: list[str] = []
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=steps))
    failure = RuntimeError("sink")
    sink = FailOn([], "result", "c1", failure)
    batch = open_batch(runtime, calls("r:c1"), sink=sink)

    async def block() -> None:
        async with batch:
            await wait_blocked()
            raise ValueError("block")

    with pytest.raises(RuntimeError, match="sink") as info:
        await block()
    assert info.value is failure
    assert batch.outcome is None
    assert any("superseded" in r.getMessage() for r in caplog.records)


async def test_internal_failure_after_a_block_error_raises_the_block_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gates = Gates()
    steps: list[str] = []
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=steps, gates=gates))
    sink = FailOn([], "result", "c1", RuntimeError("sink"))
    block_error = ValueError("block")

    async def block() -> None:
        async with open_batch(runtime, calls("r:c1"), sink=sink):
            await wait_blocked()
            raise block_error

    with pytest.raises(ValueError, match="block") as info:
        await block()
    assert info.value is block_error
    assert any("internal failure after the block raised" in r.getMessage() for r in caplog.records)


async def test_internal_failure_and_cancellation_raise_the_failure() -> None:
    steps: list[str] = []
    gates = Gates()
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=steps, gates=gates))
    failure = RuntimeError("sink")
    sink = FailOn([], "result", "c1", failure)
    box: list[BaseException] = []
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def go() -> None:
                try:
                    await run_tool_calls(runtime, calls("r:c1", "r:c2"), sink=sink)
                except RuntimeError as exc:
                    box.append(exc)

            nursery.start_soon(go)
            await wait_blocked()
            gates.release("c1")  # the failure happens while c2 runs
            await wait_blocked()
            scope.cancel()
    assert box == [failure]


async def test_run_tool_calls_is_a_cancel_point_even_with_nothing_to_run() -> None:
    with trio.CancelScope() as scope:
        scope.cancel()
        await run_tool_calls(ToolRuntime(), [])
    assert scope.cancelled_caught


async def test_a_caller_cancelled_before_the_batch_gets_synthetic_pairs() -> None:
    """§7 from the start: nothing is started, every call still gets exactly one result."""
    steps: list[str] = []
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=steps))
    sink = RecordingSink()
    with trio.CancelScope() as scope:
        scope.cancel()
        await run_tool_calls(runtime, calls("r:c1", "r:c2"), sink=sink)
    assert scope.cancelled_caught
    assert steps == []
    assert [
        (type(e).__name__, e.synthetic)
        for e in sink.events
        if isinstance(e, CallStarted | CallCommitted)
    ] == [
        ("CallStarted", True),
        ("CallCommitted", True),
        ("CallStarted", True),
        ("CallCommitted", True),
    ]


def register_body(runtime: ToolRuntime, name: str, body: Any) -> None:
    runtime.register(
        ToolDefinition(
            name=name,
            description=name,
            parameters={},
            output=output(),
            execute=body,
            is_concurrency_safe=True,
        )
    )


async def test_native_exception_wins_over_an_earlier_internal_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gates = Gates()
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=[], gates=gates))

    async def interrupting(args: object, ctx: Any) -> object:
        await gates.wait("exit")
        raise SystemExit(3)

    register_body(runtime, "exit", interrupting)
    sink = FailOn([], "result", "c1", RuntimeError("sink"))
    box: list[BaseException] = []

    async def go() -> None:
        try:
            await run_tool_calls(runtime, calls("r:c1", "exit:c2"), sink=sink)
        except SystemExit as exc:
            box.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(go)
        await wait_blocked()
        gates.release("c1")  # the internal failure
        await wait_blocked()
        gates.release("exit")  # then a native exception in a draining body
    assert [type(e) for e in box] == [SystemExit]
    assert any("superseded" in r.getMessage() for r in caplog.records)


async def test_only_the_first_native_exception_propagates(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gates = Gates()
    runtime = ToolRuntime()
    first = SystemExit("first")

    async def exits(args: object, ctx: Any) -> object:
        await gates.wait("go")
        raise first

    async def interrupts(args: object, ctx: Any) -> object:
        await gates.wait("go")
        await trio.lowlevel.cancel_shielded_checkpoint()  # always after the first
        raise KeyboardInterrupt

    register_body(runtime, "exits", exits)
    register_body(runtime, "interrupts", interrupts)
    batch = open_batch(runtime, calls("exits:c1", "interrupts:c2"))

    async def block() -> None:
        async with batch:
            await wait_blocked()
            gates.release("go")
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                # A block that turns the native cancellation into its own interrupt:
                # the task's exception came first and is the one raised.
                raise KeyboardInterrupt from None

    with pytest.raises(SystemExit) as info:
        await block()
    assert info.value is first
    messages = [r.getMessage() for r in caplog.records]
    assert any("ignoring KeyboardInterrupt()" in m for m in messages)
    assert any("from the block superseded" in m for m in messages)


async def test_hook_nursery_group_with_cancelled_and_an_error_is_cancellation() -> None:
    """S-020 with a pre hook whose own nursery raises Cancelled alongside an error."""
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=[]))

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        async def cleanup_fails() -> None:
            try:
                await trio.sleep_forever()
            finally:
                raise ValueError("cleanup failed")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            nursery.start_soon(cleanup_fails)
        return await call_next()

    runtime.on_pre_execute(pre)
    sink = RecordingSink()
    raised: list[BaseException] = []
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def go() -> None:
                try:
                    await run_tool_calls(runtime, calls("r:c1", "r:c2"), sink=sink)
                except BaseException as exc:
                    raised.append(exc)
                    raise

            nursery.start_soon(go)
            await wait_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    assert [type(e) for e in raised] == [trio.Cancelled]  # bare, not a group
    results = [e for e in sink.events if isinstance(e, CallCommitted)]
    assert [(e.call.call_id, code(e.result), e.synthetic) for e in results] == [
        ("c1", ABORTED_BEFORE_DISPATCH, False),
        ("c2", ABORTED_BEFORE_DISPATCH, True),
    ]


@pytest.mark.parametrize(
    ("kind", "call_id", "expected"),
    [
        # A synthetic pair's on_call raises: the pair is completed, then the interrupt.
        ("call", "c2", ["call c1", "result c1", "call c2", "result c2", "call c3", "result c3"]),
        # An on_context raises: the remaining contexts are still delivered.
        ("context", "", ["call c1", "result c1", "call c2", "result c2", "call c3", "result c3"]),
    ],
)
async def test_keyboard_interrupt_from_a_sink_outside_commits(
    kind: str, call_id: str, expected: list[str]
) -> None:
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=False, steps=[], contexts=2))
    abort = Abort()

    def fire(execution: ToolExecution, result: ToolResult) -> None:
        abort.abort()  # after c1: c2 and c3 get synthetic pairs

    runtime.on_result(fire)
    sink_steps: list[str] = []
    sink = FailOn(sink_steps, kind, call_id, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        await run_tool_calls(runtime, calls("r:c1", "r:c2", "r:c3"), sink=sink, abort=abort)
    assert sink_steps[:6] == expected
    assert sink_steps[6:] == ["context c1:0", "context c1:1"]
    assert sink.raised == 1


async def test_keyboard_interrupt_from_a_sink_during_bookkeeping_is_kept() -> None:
    gates = Gates()
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=[], gates=gates))
    sink_steps: list[str] = []
    sink = FailOn(sink_steps, "result", "c1", KeyboardInterrupt())
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def go() -> None:
                with pytest.raises(KeyboardInterrupt):
                    await run_tool_calls(runtime, calls("r:c1", "r:c2"), sink=sink)

            nursery.start_soon(go)
            await wait_blocked()
            scope.cancel()
    # The bookkeeping went on after the sink's interrupt, which then propagated.
    assert sink_steps == ["call c1", "call c2", "result c1", "result c2"]


async def test_runtime_bug_in_finish_during_bookkeeping_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken_finish(execution: ToolExecution, result: ToolResult) -> ToolResult:
        raise RuntimeError("execution already finished")

    monkeypatch.setattr(dsh_tools._lane, "finish", broken_finish)
    gates = Gates()
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=[], gates=gates))
    sink_steps: list[str] = []
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: run_tool_calls(runtime, calls("r:c1", "r:c2"), sink=StepSink(sink_steps))
            )
            await wait_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    # Nothing is faked for the calls the runtime could not finish.
    assert sink_steps == ["call c1", "call c2"]
    assert any("could not finish a cancelled call" in r.getMessage() for r in caplog.records)


async def test_s019_a_sink_failing_on_a_synthetic_result_is_the_internal_failure() -> None:
    """§8 with an abort fired before the batch: every call gets only a synthetic pair; the
    sink raising on the first synthetic ``on_result`` is the batch's internal failure,
    raised alone, and nothing after that pair is reported."""
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=[]))
    abort = Abort()
    abort.abort("before the batch")
    boom = RuntimeError("sink failed on a synthetic result")
    sink_steps: list[str] = []
    sink = FailOn(sink_steps, "result", "c1", boom)
    with pytest.raises(RuntimeError) as info:
        await run_tool_calls(runtime, calls("r:c1", "r:c2"), abort=abort, sink=sink)
    assert info.value is boom
    assert sink_steps == ["call c1", "result c1"]


async def test_s044_a_sink_interrupting_on_a_synthetic_result_completes_that_pair() -> None:
    """§9 with an abort fired before the batch: a ``KeyboardInterrupt`` from the sink's
    synthetic ``on_result`` propagates once that call's commit is complete; the later
    calls get their synthetic pairs from the bookkeeping, exactly one each."""
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=[]))
    abort = Abort()
    abort.abort("before the batch")
    sink_steps: list[str] = []
    sink = FailOn(sink_steps, "result", "c1", KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        await run_tool_calls(runtime, calls("r:c1", "r:c2"), abort=abort, sink=sink)
    assert sink_steps == ["call c1", "result c1", "call c2", "result c2"]


class OnCall:
    """A :class:`StepSink` (``inner``) that runs ``act()`` at the ``on_call`` of ``call_id``."""

    def __init__(self, call_id: str, act: Callable[[], object]) -> None:
        self.inner = StepSink([])
        self.call_id = call_id
        self.act = act

    def on_call(self, event: Any) -> None:
        self.inner.on_call(event)
        if event.call.call_id == self.call_id:
            self.act()

    def on_result(self, event: Any) -> None:
        self.inner.on_result(event)

    def on_context(self, event: Any) -> None:
        self.inner.on_context(event)

    def committed(self) -> list[CallCommitted]:
        return [event for event in self.inner.events if isinstance(event, CallCommitted)]


async def _allow(execution: ToolExecution, call_next: Any) -> PreDecision:
    return await call_next()  # type: ignore[no-any-return]


@pytest.mark.parametrize("hook", [None, "pre", "post"])
async def test_a_sink_cancelling_the_caller_as_a_call_starts_stops_it_before_its_body(
    hook: str | None,
) -> None:
    """Decision 115: with nothing for stage 1 to run, the lane skips ``prepare``'s cancel
    point; a cancellation requested right after the driver's own one (here by the sink, at
    the second call's ``on_call``) still reaches every started call before its body, and
    the batch records what it records when ``prepare`` runs (a pre-execute hook), and when
    ``finalize`` runs for its post-execute hook."""
    runtime = ToolRuntime()
    ran: list[str] = []

    async def body(args: object, ctx: Any) -> object:
        ran.append(ctx.call_id)
        return "ok"

    runtime.register(raw_tool("r", body, is_concurrency_safe=True))
    if hook == "pre":
        runtime.on_pre_execute(_allow)
    elif hook == "post":

        async def accept(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
            return await call_next()

        runtime.on_post_execute(accept)
    scope = trio.CancelScope()
    sink = OnCall("c2", scope.cancel)
    with scope:
        await run_tool_calls(runtime, calls("r:c1", "r:c2", "r:c3"), max_parallel=3, sink=sink)
    assert scope.cancelled_caught
    assert ran == []
    assert sink.inner.steps == [
        "call c1",
        "call c2",
        "result c1",
        "result c2",
        "call c3",
        "result c3",
    ]
    assert [(code(event.result), event.synthetic) for event in sink.committed()] == [
        (ABORTED_BEFORE_DISPATCH, False),
        (ABORTED_BEFORE_DISPATCH, False),
        (ABORTED_BEFORE_DISPATCH, True),
    ]


@pytest.mark.parametrize("hooked", [False, True])
async def test_a_sink_cancelling_the_caller_as_an_unknown_tool_call_starts_aborts_it(
    hooked: bool,
) -> None:
    """Decision 115: a cancellation requested before dispatch wins over an unknown tool's
    error, whether stage 1 is skipped (no hook) or awaited (a pre-execute hook): check D2
    comes before the tool's lookup fails. (A review found the skipped stage 1 giving
    ``UNKNOWN_TOOL`` here before D2 moved.)"""
    runtime = ToolRuntime()
    if hooked:
        runtime.on_pre_execute(_allow)
    scope = trio.CancelScope()
    sink = OnCall("c1", scope.cancel)
    with scope:
        await run_tool_calls(runtime, calls("nope:c1"), sink=sink)
    assert scope.cancelled_caught
    assert [code(event.result) for event in sink.committed()] == [ABORTED_BEFORE_DISPATCH]


@pytest.mark.parametrize("hooked", [False, True])
async def test_an_abort_fired_as_a_call_starts_ends_it_before_post_execute(hooked: bool) -> None:
    """Decision 115: the lane's synchronous stage 1 still makes check A. An Abort fired by
    the sink at a call's ``on_call`` ends that call in stage 1 (``ABORTED_BEFORE_DISPATCH``,
    final: the post-execute hook does not see it), as ``prepare`` does with a pre-execute
    hook registered; the calls after it are never started."""
    runtime = ToolRuntime()
    ran: list[str] = []
    posted: list[str] = []

    async def body(args: object, ctx: Any) -> object:
        ran.append(ctx.call_id)
        return "ok"

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        posted.append(execution.call_id)
        return await call_next()

    runtime.register(raw_tool("r", body, is_concurrency_safe=True))
    runtime.on_post_execute(post)
    if hooked:
        runtime.on_pre_execute(_allow)
    abort = Abort()
    sink = OnCall("c1", abort.abort)
    outcome = await run_tool_calls(runtime, calls("r:c1", "r:c2"), abort=abort, sink=sink)
    assert outcome.aborted
    assert (ran, posted) == ([], [])
    assert [(code(event.result), event.synthetic) for event in sink.committed()] == [
        (ABORTED_BEFORE_DISPATCH, False),
        (ABORTED_BEFORE_DISPATCH, True),
    ]
