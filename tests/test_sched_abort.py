"""Abort of a batch (scheduler.md §6): S-014..S-018, S-030, S-036, §13 example 3."""

from __future__ import annotations

import pytest
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
    sleeping_tool,
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


# -- issue: agent-loop semantics (S-046..S-050) ------------------------------------------


async def test_s046_a_body_done_before_the_abort_keeps_its_success(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """S-046: ``[slow, fast]``, ``fast`` returns at 0.05 s, the batch Abort fires at 0.3 s:
    ``fast`` keeps its success though its commit waited behind ``slow``; ``slow`` is
    ``ABORTED`` with the reason in its text."""
    runtime = ToolRuntime()
    runtime.register(sleeping_tool("slow", 5.0))
    runtime.register(sleeping_tool("fast", 0.05))
    abort = Abort()
    sink = RecordingSink()
    async with trio.open_nursery() as nursery:
        run = start_batch(nursery, runtime, calls("slow:c1", "fast:c2"), abort=abort, sink=sink)
        await trio.sleep(0.3)
        abort.abort("turn timeout after 0.3 s")
    assert trio.current_time() == 0.3
    outcome = run.outcome
    assert outcome is not None
    slow, fast = (c.result for c in outcome.results)
    assert fast.is_error is False
    assert fast.value == "fast"
    assert code(slow) == ABORTED
    assert text_of(slow) == "Error: tool call aborted: turn timeout after 0.3 s"
    assert [c.synthetic for c in outcome.results] == [False, False]
    # The sink saw the same: the kept success, in model order.
    committed = [e for e in sink.events if isinstance(e, CallCommitted)]
    assert [e.result for e in committed] == [slow, fast]


async def test_s047_timeout_aborts_the_turn_and_keeps_every_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """S-047: ``timeout=0.3``, one call sleeping 5 s and an exclusive call after it: the
    batch returns at 0.3 s (virtual) with its outcome, the reason in every text."""
    runtime = ToolRuntime()
    runtime.register(sleeping_tool("sleepy", 5.0))
    runtime.register(sleeping_tool("write", 0.01, parallel=False))
    abort = Abort()
    outcome = await run_tool_calls(
        runtime, calls("sleepy:c1", "write:c2"), abort=abort, timeout=0.3
    )
    assert trio.current_time() == 0.3
    assert abort.aborted  # the Abort the caller passed in is the one that fired
    assert outcome.aborted
    assert outcome.abort_reason == "batch timeout after 0.3 s"
    sleepy, write = outcome.results
    assert text_of(sleepy.result) == "Error: tool call aborted: batch timeout after 0.3 s"
    assert code(sleepy.result) == ABORTED
    assert write.synthetic
    assert text_of(write.result) == (
        "Error: tool call aborted before dispatch: batch timeout after 0.3 s"
    )
    assert code(write.result) == ABORTED_BEFORE_DISPATCH


async def test_s047_timeout_counts_from_entering_the_batch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """S-047 (§2.1): the deadline is trio's clock from the moment the batch starts, and an
    integral timeout is written without a fraction (``format(t, "g")``)."""
    runtime = ToolRuntime()
    runtime.register(sleeping_tool("sleepy", 50.0))
    await trio.sleep(7)
    batch = open_batch(runtime, calls("sleepy:c1"), timeout=2)
    await trio.sleep(1)  # validation happened above; the clock starts on entering
    async with batch:
        pass
    assert trio.current_time() == 10
    assert batch.outcome is not None
    assert batch.outcome.abort_reason == "batch timeout after 2 s"


async def test_s048_timeout_validation() -> None:
    """S-048: ``True`` and ``"1"`` are ``TypeError``; ``0``, ``-1``, NaN and infinity are
    ``ValueError``; the message is exact and nothing starts."""
    runtime = ToolRuntime()
    sink = RecordingSink()
    cases: list[tuple[object, type[Exception]]] = [
        (True, TypeError),
        ("1", TypeError),
        (0, ValueError),
        (-1, ValueError),
        (float("nan"), ValueError),
        (float("inf"), ValueError),
    ]
    for bad, error in cases:
        with pytest.raises(error) as info:
            await run_tool_calls(runtime, calls("t:c1"), sink=sink, timeout=bad)  # type: ignore[arg-type]
        assert str(info.value) == "timeout must be a positive number or None"
        with pytest.raises(error):
            open_batch(runtime, calls("t:c1"), timeout=bad)  # type: ignore[arg-type]
    assert sink.events == []


async def test_s049_a_batch_that_ends_in_time_is_never_aborted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """S-049: a batch that ends before its ``timeout`` (and one without any) is not
    aborted; the timer leaves with the batch, which returns as soon as its calls are done."""
    runtime = ToolRuntime()
    runtime.register(sleeping_tool("quick", 0.1))
    abort = Abort()
    outcome = await run_tool_calls(runtime, calls("quick:c1", "quick:c2"), abort=abort, timeout=60)
    assert trio.current_time() == 0.1  # not held open until the deadline
    assert not abort.aborted
    assert (outcome.aborted, outcome.abort_reason) == (False, None)
    assert [c.result.is_error for c in outcome.results] == [False, False]
    await trio.sleep(100)
    assert not abort.aborted  # the timer is gone: nothing fires later
    plain = await run_tool_calls(runtime, calls("quick:c1"))
    assert (plain.aborted, plain.abort_reason) == (False, None)


async def test_s050_the_abort_reason_reaches_the_outcome_and_synthetic_results() -> None:
    """S-050: ``abort.abort("user pressed Ctrl-C")`` during a batch: the outcome names the
    reason and the synthetic results carry it."""
    runtime = ToolRuntime()
    gates = Gates()
    runtime.register(gated_tool("x", parallel=False, steps=[], gates=gates))
    abort = Abort()
    async with trio.open_nursery() as nursery:
        run = start_batch(nursery, runtime, calls("x:c1", "x:c2"), abort=abort)
        await wait_blocked()
        abort.abort("user pressed Ctrl-C")
    outcome = run.outcome
    assert outcome is not None
    assert outcome.abort_reason == "user pressed Ctrl-C"
    first, second = outcome.results
    assert text_of(first.result) == "Error: tool call aborted: user pressed Ctrl-C"
    assert second.synthetic
    assert second.result.error is not None
    assert second.result.error.message == "tool call aborted before dispatch: user pressed Ctrl-C"
