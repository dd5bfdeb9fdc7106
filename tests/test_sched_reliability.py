"""Reliability under hostile conditions: hooks that misuse the stage contract, a
``BaseException`` out of stage 4, a checkpoint between classifying and starting a call, a
scope closed mid-batch, and a long iterated batch (issue: "nothing lost, nothing
swallowed")."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import dsh_tools._lane_workers
from dsh_sched import (
    CallCommitted,
    CallStarted,
    ModelToolCall,
    RecordingSink,
    open_batch,
    run_tool_calls,
)
from dsh_sched._driver import HELD_LIMIT
from dsh_tools import (
    TOOL_DENIED,
    CallNext,
    ExecutionMode,
    PostDecision,
    PreDecision,
    ToolCall,
    ToolDefinition,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    lowlevel,
)
from tests.test_sched_fixtures import calls, output, text_of


def _tool(name: str, *, parallel: bool = True, body: Any = None) -> ToolDefinition:
    async def default(args: object, ctx: ToolRunContext) -> object:
        return ctx.call_id

    return ToolDefinition(
        name=name,
        description=name,
        parameters={},
        output=output(),
        execute=default if body is None else body,
        is_concurrency_safe=parallel,
    )


class Boom(BaseException):
    """A custom non-Exception, as a user's code may raise."""


# -- a BaseException out of stage 4 during a commit -------------------------------------


@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit, Boom])
@pytest.mark.parametrize("where", ["observer", "finalizer"])
@pytest.mark.parametrize("post_hook", [False, True, None], ids=["finish", "finalize", "final"])
async def test_a_base_exception_out_of_stage_4_still_commits_the_call(
    raised: type[BaseException], where: str, post_hook: bool | None
) -> None:
    """A result observer or ``finalize_content`` raising a ``BaseException`` while the batch
    commits a call: that call still gets its one ``on_result``, carrying the result it was
    finished with; every call gets one; the exception propagates bare."""
    runtime = ToolRuntime()
    fired: list[str] = []

    def finalizer(execution: ToolExecution, result: ToolResult) -> None:
        if where == "finalizer" and execution.call_id == "c2":
            fired.append("finalizer")
            raise raised()

    def observer(execution: ToolExecution, result: ToolResult) -> None:
        if where == "observer" and execution.call_id == "c2":
            fired.append("observer")
            raise raised()

    tool = _tool("t", parallel=False)
    runtime.register(
        ToolDefinition(
            name="t",
            description="t",
            parameters={},
            output=output(),
            execute=tool.execute,
            finalize_content=finalizer,
        )
    )
    runtime.on_result(observer)
    if post_hook is None:
        # A final result of stage 1 (a guard that raised): committed through finish() alone.
        def guard(execution: ToolExecution) -> str | None:
            if execution.call_id == "c2":
                raise RuntimeError("guard broke")
            return None

        runtime.guard(guard)
    if post_hook:

        async def post(
            execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
        ) -> PostDecision:
            return await call_next()

        runtime.on_post_execute(post)
    sink = RecordingSink()
    with pytest.raises(raised) as info:
        await run_tool_calls(runtime, calls("t:c1", "t:c2", "t:c3"), sink=sink)
    assert type(info.value) is raised  # bare, never in a group
    assert fired == [where]
    results = {e.call.call_id: e.result for e in sink.events if isinstance(e, CallCommitted)}
    starts = [e.call.call_id for e in sink.events if isinstance(e, CallStarted)]
    assert starts == ["c1", "c2", "c3"]
    assert sorted(results) == ["c1", "c2", "c3"]
    assert results["c1"].is_error is False
    # c2 was finished before the exception escaped: its result is the one it got.
    if post_hook is None:
        assert results["c2"].error is not None
        assert results["c2"].error.message == "guard broke"
    else:
        assert results["c2"].is_error is False
        assert results["c2"].value == "c2"
    # c3 never started: the native cancellation gives it a synthetic result.
    assert text_of(results["c3"]) == "Error: tool call aborted before dispatch"


# -- lowlevel.finish on a running execution ---------------------------------------------


@pytest.mark.parametrize("where", ["pre", "guard", "wrapper", "body", "post"])
async def test_finish_on_a_running_execution_is_refused(where: str) -> None:
    """Each execution is finished exactly once: a hook, guard, wrapper or body calling
    ``lowlevel.finish`` on its own call gets a ``RuntimeError``, and the observers are told
    one result, the pipeline's."""
    runtime = ToolRuntime()
    refusals: list[str] = []
    forged = ToolResult(is_error=False, value="forged")

    def attempt(execution: ToolExecution) -> None:
        try:
            lowlevel.finish(execution, forged)
        except RuntimeError as exc:
            refusals.append(str(exc))

    async def body(args: object, ctx: ToolRunContext) -> object:
        if where == "body":
            attempt(seen_executions[0])
        return "real"

    seen_executions: list[ToolExecution] = []

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        seen_executions.append(execution)
        if where == "pre":
            attempt(execution)
        return await call_next()

    def guard(execution: ToolExecution) -> str | None:
        if where == "guard":
            attempt(execution)
        return None

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        if where == "wrapper":
            attempt(execution)
        return await call_next()

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        if where == "post":
            attempt(execution)
        return await call_next()

    observed: list[ToolResult] = []
    runtime.register(_tool("t", body=body))
    runtime.on_pre_execute(pre)
    runtime.guard(guard)
    runtime.wrap_execute(wrap)
    runtime.on_post_execute(post)
    runtime.on_result(lambda execution, result: observed.append(result))
    outcome = await run_tool_calls(runtime, calls("t:c1"))
    assert len(refusals) == 1
    assert refusals[0].startswith("execution is still running")
    [committed] = outcome.results
    assert committed.result.value == "real"
    assert observed == [committed.result]


async def test_finish_on_a_running_execution_is_refused_in_execute_too() -> None:
    """The same through ``execute()``'s one-frame path (no hook at all): the body reaches its
    execution through ``ctx.execution``."""
    runtime = ToolRuntime()
    refusals: list[str] = []

    async def body(args: object, ctx: ToolRunContext) -> object:
        try:
            lowlevel.finish(ctx.execution, ToolResult(is_error=False, value="forged"))
        except RuntimeError as exc:
            refusals.append(str(exc))
        return "real"

    observed: list[ToolResult] = []
    runtime.register(_tool("t", body=body))
    runtime.on_result(lambda execution, result: observed.append(result))
    result = await runtime.execute(ToolCall(call_id="c", name="t"))
    assert len(refusals) == 1
    assert result.value == "real"
    assert observed == [result]


# -- no checkpoint between classifying and starting a call ------------------------------


async def test_a_call_starts_under_the_mode_it_was_classified_as(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """§4.2: the first overlapping group starts the shared-scope host without a checkpoint,
    so the head starts under the mode it was just classified as. The host, once it runs, is
    a task that turns the tool exclusive: a call started after that is classified again
    and starts alone."""
    runtime = ToolRuntime()
    parallel = [True]
    runtime.register(
        ToolDefinition(
            name="t",
            description="t",
            parameters={},
            output=output(),
            execute=_tool("t").execute,
            is_concurrency_safe=lambda arguments: parallel[0],
        )
    )
    real_host = dsh_tools._lane_workers.host_workers

    async def host_with_a_flip(*args: Any) -> None:
        # What another task running at the driver's first wait (a consumer fed by the
        # sink, say) may do.
        parallel[0] = False
        await real_host(*args)

    monkeypatch.setattr(dsh_tools._lane_workers, "host_workers", host_with_a_flip)
    sink = RecordingSink()
    outcome = await run_tool_calls(
        runtime, calls("t:c1", "t:c2", "t:c3"), sink=sink, max_parallel=2
    )
    # c1 and c2 fill the pool before the driver first waits; c3 starts after the flip.
    modes = [ExecutionMode.PARALLEL, ExecutionMode.PARALLEL, ExecutionMode.EXCLUSIVE]
    assert [e.mode for e in sink.events if isinstance(e, CallStarted)] == modes
    assert [c.mode for c in outcome.results] == modes
    assert not any(c.result.is_error for c in outcome.results)


# -- a scope closed while its batch runs ------------------------------------------------


async def test_a_scope_closed_mid_batch_fails_closed() -> None:
    """Decision 35: once the batch's scope is closed, its later calls get ``TOOL_DENIED``
    and no body runs, even for a tool the closed scope's restriction and guard denied."""
    runtime = ToolRuntime()
    ran: list[str] = []
    scope = runtime.open_scope(name="agent")

    async def closer(args: object, ctx: ToolRunContext) -> object:
        ran.append("closer")
        scope.close()
        return "closed"

    async def dangerous(args: object, ctx: ToolRunContext) -> object:
        ran.append("dangerous")
        return "done"

    runtime.register(_tool("dangerous", parallel=False, body=dangerous))
    scope.register(_tool("closer", parallel=False, body=closer))
    scope.restrict(deny=["dangerous"])
    scope.guard(lambda execution: "no" if execution.name == "dangerous" else None)
    sink = RecordingSink()
    outcome = await run_tool_calls(
        runtime, calls("closer:c1", "dangerous:c2"), scope=scope, sink=sink
    )
    assert ran == ["closer"]
    first, second = (c.result for c in outcome.results)
    assert first.value == "closed"
    assert second.error is not None
    assert second.error.info is not None
    assert second.error.info.code == TOOL_DENIED
    assert second.error.message == (
        'the batch\'s scope "agent" was closed before this call started; '
        "nothing runs in a closed scope's name"
    )
    assert not outcome.results[1].synthetic
    assert [e.mode for e in sink.events if isinstance(e, CallStarted)] == [
        ExecutionMode.EXCLUSIVE,
        ExecutionMode.EXCLUSIVE,
    ]


# -- a long iterated batch holds bounded memory -----------------------------------------


class AheadOfTheReader:
    """A sink that records, at each commit, how many committed calls the reader has not read."""

    def __init__(self) -> None:
        self.committed = 0
        self.read = 0
        self.ahead: list[int] = []

    def on_call(self, event: CallStarted) -> None:
        pass

    def on_result(self, event: CallCommitted) -> None:
        self.committed += 1
        self.ahead.append(self.committed - self.read)

    def on_context(self, event: object) -> None:
        pass


def _instant_calls(n: int) -> list[ModelToolCall]:
    return [ModelToolCall(call_id=f"c{i}", name="t", arguments="") for i in range(n)]


async def test_a_slow_reader_bounds_what_keep_results_false_holds() -> None:
    """Decision 36: with ``keep_results=False``, committed calls wait for a running
    iteration up to ``HELD_LIMIT``; then the driver waits for the reader, so a long batch
    of instant tools holds bounded memory whatever the consumer's pace."""
    runtime = ToolRuntime()
    runtime.register(_tool("t"))
    n = 3 * HELD_LIMIT + 7
    sink = AheadOfTheReader()
    async with open_batch(
        runtime, _instant_calls(n), keep_results=False, max_parallel=50, sink=sink
    ) as batch:
        async for item in batch:
            assert item.index == sink.read
            sink.read += 1
            for _ in range(3):  # a slow consumer: several rounds per item
                await trio.lowlevel.checkpoint()
    assert sink.read == sink.committed == n
    assert max(sink.ahead) <= HELD_LIMIT + 1
    assert batch.outcome is not None
    assert batch.outcome.results == ()


async def test_synthetic_pairs_wait_for_a_slow_reader_too() -> None:
    """Decision 36: a batch aborted before it starts gives every call a synthetic pair; with
    ``keep_results=False`` and an iteration running, those wait for the reader as well."""
    runtime = ToolRuntime()
    runtime.register(_tool("t"))
    n = 2 * HELD_LIMIT + 5
    sink = AheadOfTheReader()
    batch = open_batch(runtime, _instant_calls(n), keep_results=False, sink=sink)
    batch.abort.abort("before it started")
    async with batch:
        async for item in batch:
            assert item.synthetic
            sink.read += 1
            await trio.lowlevel.checkpoint()
    assert sink.read == sink.committed == n
    assert max(sink.ahead) <= HELD_LIMIT + 1


async def test_a_finalizer_interrupting_the_bookkeeping_still_leaves_every_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Found by the fuzz: the caller's cancellation, then the bookkeeping's ``finish`` runs a
    finalizer that raises a ``BaseException``: that call keeps the result it was finished
    with, every other call gets its result too, and that exception leaves the batch bare."""
    runtime = ToolRuntime()

    def finalizer(execution: ToolExecution, result: ToolResult) -> None:
        raise Boom()

    runtime.register(
        ToolDefinition(
            name="t",
            description="t",
            parameters={},
            output=output(),
            execute=_tool("t").execute,
            finalize_content=finalizer,
        )
    )

    async def slow_pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        await trio.sleep_forever()
        raise AssertionError("unreachable: cancelled while it sleeps")

    runtime.on_pre_execute(slow_pre)
    sink = RecordingSink()
    with pytest.raises(Boom), trio.move_on_after(1):
        await run_tool_calls(runtime, calls("t:c1", "t:c2"), sink=sink)
    committed = [e for e in sink.events if isinstance(e, CallCommitted)]
    assert [e.call.call_id for e in committed] == ["c1", "c2"]
    assert text_of(committed[0].result) == "Error: tool call aborted before dispatch"
    assert committed[1].synthetic


async def test_a_reader_that_stops_iterating_releases_the_driver() -> None:
    """Decision 36: a consumer that breaks out of ``async for`` while the driver waits for
    it (``HELD_LIMIT`` calls held) releases it: the batch runs to its end and holds nothing."""
    runtime = ToolRuntime()
    runtime.register(_tool("t"))
    n = 2 * HELD_LIMIT + 3
    sink = AheadOfTheReader()
    async with open_batch(
        runtime, _instant_calls(n), keep_results=False, max_parallel=50, sink=sink
    ) as batch:
        async for _ in batch:
            await trio.testing.wait_all_tasks_blocked()  # the driver is parked, held full
            assert sink.committed - sink.read >= HELD_LIMIT
            break
    assert sink.committed == n
    assert batch.outcome is not None
    assert batch.statistics().committed == n
