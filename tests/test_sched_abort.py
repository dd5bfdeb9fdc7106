"""Abort of a batch (scheduler.md §6): S-014..S-018, S-030, S-036, §13 example 3."""

from __future__ import annotations

import trio
import trio.testing

from dsh_sched import (
    CallCommitted,
    CallStarted,
    ModelToolCall,
    RecordingSink,
    open_batch,
    run_tool_calls,
)
from dsh_tools import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    Abort,
    CallNext,
    PostDecision,
    PreDecision,
    ToolDefinition,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
)
from tests.test_sched_fixtures import (
    Gates,
    StepSink,
    calls,
    gated_tool,
    ids,
    output,
    start_batch,
    text_of,
)

wait_blocked = trio.testing.wait_all_tasks_blocked


def code(result: ToolResult) -> str | None:
    error = result.error
    return None if error is None or error.info is None else error.info.code


class Spy:
    """Counts every runtime involvement: hooks, guards, finalizers, observers, bodies."""

    def __init__(self, runtime: ToolRuntime) -> None:
        self.seen: list[str] = []

        async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
            self.seen.append(f"pre {execution.call_id}")
            return await call_next()

        async def post(
            execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
        ) -> PostDecision:
            self.seen.append(f"post {execution.call_id}")
            return await call_next()

        def guard(execution: ToolExecution) -> str | None:
            self.seen.append(f"guard {execution.call_id}")
            return None

        def observe(execution: ToolExecution, result: ToolResult) -> None:
            self.seen.append(f"observed {execution.call_id}")

        runtime.on_pre_execute(pre)
        runtime.on_post_execute(post)
        runtime.guard(guard)
        runtime.on_result(observe)

    def finalizer(self, execution: ToolExecution, result: ToolResult) -> None:
        self.seen.append(f"finalize {execution.call_id}")


async def test_s014_s030_abort_before_the_batch_gives_only_synthetic_pairs() -> None:
    runtime = ToolRuntime()
    spy = Spy(runtime)
    steps: list[str] = []

    async def body(args: object, ctx: ToolRunContext) -> object:
        steps.append("body")
        return "x"

    runtime.register(
        ToolDefinition(
            name="t",
            description="t",
            parameters={},
            output=output(),
            execute=body,
            finalize_content=spy.finalizer,
            is_concurrency_safe=True,
        )
    )
    abort = Abort()
    abort.abort("stop")
    sink = RecordingSink()
    outcome = await run_tool_calls(runtime, calls("t:c1", "t:c2"), abort=abort, sink=sink)
    assert spy.seen == []  # no hook, guard, finalizer or observer
    assert steps == []
    assert [
        (type(e).__name__, e.call.call_id, e.synthetic)
        for e in sink.events
        if isinstance(e, CallStarted | CallCommitted)
    ] == [
        ("CallStarted", "c1", True),
        ("CallCommitted", "c1", True),
        ("CallStarted", "c2", True),
        ("CallCommitted", "c2", True),
    ]
    assert outcome.aborted
    for committed in outcome.results:
        assert committed.synthetic
        assert committed.mode is None
        result = committed.result
        assert result.is_error
        assert text_of(result) == "Error: tool call aborted before dispatch: stop"
        assert result.error is not None
        assert result.error.message == "tool call aborted before dispatch: stop"
        assert result.error.info is not None
        assert (result.error.info.name, result.error.info.code) == (
            "AbortError",
            "ABORTED_BEFORE_DISPATCH",
        )
    started = [e for e in sink.events if type(e).__name__ == "CallStarted"]
    assert all(e.mode is None and e.token is None for e in started)  # type: ignore[union-attr]


async def test_s015_abort_during_pre_execute_lets_that_call_finish_preparing() -> None:
    runtime = ToolRuntime()
    steps: list[str] = []
    runtime.register(gated_tool("t", parallel=True, steps=steps))
    abort = Abort()
    observed: list[str] = []
    post_seen: list[str] = []

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        if execution.call_id == "c1":
            abort.abort("during pre")
            await trio.lowlevel.checkpoint()
        return await call_next()

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        post_seen.append(execution.call_id)
        return await call_next()

    runtime.on_pre_execute(pre)
    runtime.on_post_execute(post)
    runtime.on_result(lambda execution, result: observed.append(execution.call_id))
    outcome = await run_tool_calls(runtime, calls("t:c1", "t:c2"), abort=abort)
    assert steps == []  # nothing dispatched
    first, second = outcome.results
    assert not first.synthetic
    assert code(first.result) == ABORTED_BEFORE_DISPATCH
    assert post_seen == ["c1"]  # check C: post-result, post-execute ran
    assert observed == ["c1"]  # c2 is synthetic: no observer
    assert second.synthetic
    assert code(second.result) == ABORTED_BEFORE_DISPATCH
    assert outcome.aborted


async def test_s016_example3_abort_after_two_started() -> None:
    """§13 example 3: four ``r`` calls, ``max_parallel=2``, abort after r1 and r2 started."""
    steps: list[str] = []
    sink_steps: list[str] = []
    gates = Gates()
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=steps, gates=gates, contexts=1))
    runtime.register(gated_tool("bad", parallel=True, steps=steps, gates=gates, fail="boom"))
    abort = Abort()
    async with trio.open_nursery() as nursery:
        run = start_batch(
            nursery,
            runtime,
            calls("r:c1", "bad:c2", "r:c3", "r:c4"),
            abort=abort,
            max_parallel=2,
            sink=StepSink(sink_steps),
        )
        await wait_blocked()
        assert sink_steps == ["call c1", "call c2"]
        abort.abort("user pressed stop")
    assert sink_steps == [
        "call c1",
        "call c2",
        "result c1",
        "result c2",
        "call c3",
        "result c3",
        "call c4",
        "result c4",
        "context c1:0",
    ]
    outcome = run.outcome
    assert outcome is not None
    assert outcome.aborted
    assert ids(outcome.results) == ["c1", "c2", "c3", "c4"]
    c1, c2, c3, c4 = (c.result for c in outcome.results)
    assert code(c1) == ABORTED  # its success became ABORTED (body cancelled)
    assert c2.is_error
    assert code(c2) == ABORTED  # the body was cancelled before it could raise
    assert [c.synthetic for c in outcome.results] == [False, False, True, True]
    assert code(c3) == code(c4) == ABORTED_BEFORE_DISPATCH
    # The abort replacement keeps the contexts the body deferred (runtime.md §8.3).
    assert [text_of(r) for r in (c1,)] == ["Error: tool call aborted: user pressed stop"]
    assert outcome.abort_reason == "user pressed stop"
    assert (
        text_of(c3)
        == text_of(c4)
        == ("Error: tool call aborted before dispatch: user pressed stop")
    )
    assert [m.content for m in outcome.additional_contexts] == [
        m.content for m in c1.additional_contexts
    ]
    assert len(outcome.additional_contexts) == 1


async def test_s016_an_error_decided_before_the_abort_stays_an_error() -> None:
    steps: list[str] = []
    runtime = ToolRuntime()
    runtime.register(gated_tool("bad", parallel=True, steps=steps, fail="boom"))
    gates = Gates()
    runtime.register(gated_tool("r", parallel=True, steps=steps, gates=gates))
    abort = Abort()
    async with trio.open_nursery() as nursery:
        run = start_batch(
            nursery,
            runtime,
            calls("r:c1", "bad:c2", "r:c3", "r:c4"),
            abort=abort,
            max_parallel=2,
        )
        await wait_blocked()
        # c2 failed at once and freed its slot for c3; c1 still blocks the line.
        assert sorted(steps) == ["c1 start", "c2 end", "c2 start", "c3 start"]
        abort.abort()
    assert run.outcome is not None
    c1, c2, c3, c4 = run.outcome.results
    assert code(c1.result) == ABORTED
    assert text_of(c2.result) == "Error: boom"  # errors stay errors
    assert code(c3.result) == ABORTED
    assert not c3.synthetic
    assert c4.synthetic


async def test_s017_barrier_after_an_aborted_parallel_group_never_runs() -> None:
    steps: list[str] = []
    gates = Gates()
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=steps, gates=gates))
    runtime.register(gated_tool("w", parallel=False, steps=steps, gates=gates))
    abort = Abort()
    async with trio.open_nursery() as nursery:
        run = start_batch(nursery, runtime, calls("r:c1", "w:c2"), abort=abort)
        await wait_blocked()
        abort.abort()
    assert "c2 start" not in steps
    assert run.outcome is not None
    barrier = run.outcome.results[1]
    assert barrier.synthetic
    assert code(barrier.result) == ABORTED_BEFORE_DISPATCH


async def test_s018_body_firing_the_batch_abort_gets_aborted_and_later_calls_synthetic() -> None:
    async def body(args: object, ctx: ToolRunContext) -> object:
        ctx.abort.abort("done here")
        return "fine"

    runtime = ToolRuntime()
    runtime.register(
        ToolDefinition(name="stop", description="s", parameters={}, output=output(), execute=body)
    )
    steps: list[str] = []
    runtime.register(gated_tool("r", parallel=False, steps=steps))
    outcome = await run_tool_calls(runtime, calls("stop:c1", "r:c2", "r:c3"))
    first, *rest = outcome.results
    assert code(first.result) == ABORTED
    assert not first.synthetic
    assert all(c.synthetic for c in rest)
    assert steps == []
    assert outcome.aborted


async def test_s036_every_execution_shares_the_batch_abort() -> None:
    seen: list[Abort] = []

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        seen.append(execution.abort)
        return await call_next()

    runtime = ToolRuntime()
    steps: list[str] = []
    runtime.register(gated_tool("r", parallel=True, steps=steps))
    runtime.register(gated_tool("w", parallel=False, steps=steps))
    runtime.on_pre_execute(pre)
    async with open_batch(runtime, calls("r:c1", "w:c2", "r:c3")) as batch:
        pass
    assert len(seen) == 3
    assert all(a is batch.abort for a in seen)
    given = Abort()
    seen.clear()
    async with open_batch(runtime, calls("r:c1"), abort=given) as batch:
        assert batch.abort is given
    assert seen == [given]


async def test_outcome_aborted_is_false_without_an_abort() -> None:
    steps: list[str] = []
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=steps))
    outcome = await run_tool_calls(runtime, [ModelToolCall(call_id="c", name="r", arguments="")])
    assert not outcome.aborted
    assert not outcome.results[0].synthetic
