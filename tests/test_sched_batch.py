"""open_batch / Batch / run_tool_calls: validation, iteration and the block (scheduler.md §2, §9).

S-007, S-027, S-028, S-029, S-035, S-039, S-041, S-043.
"""

from __future__ import annotations

import gc
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from dsh_sched import (
    DEFAULT_MAX_PARALLEL,
    Batch,
    BatchOutcome,
    BatchStatistics,
    CommittedCall,
    ModelToolCall,
    RecordingSink,
    open_batch,
    run_tool_calls,
)
from dsh_tools import (
    Abort,
    ExecutionMode,
    ExecutionToken,
    Output,
    TextContent,
    ToolDefinition,
    ToolExecution,
    ToolRunContext,
    ToolRuntime,
)
from tests.test_sched_fixtures import (
    Gates,
    StepSink,
    calls,
    exactly,
    gated_tool,
    ids,
    output,
)

wait_blocked = trio.testing.wait_all_tasks_blocked


def simple_runtime(steps: list[str] | None = None, gates: Gates | None = None) -> ToolRuntime:
    runtime = ToolRuntime()
    runtime.register(
        gated_tool("r", parallel=True, steps=[] if steps is None else steps, gates=gates)
    )
    return runtime


# -- validation (§2.1) --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "error"),
    [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError), ("2", TypeError)],
)
def test_s007_max_parallel_must_be_a_positive_integer(value: Any, error: type) -> None:
    sink = RecordingSink()
    with pytest.raises(error, match=exactly("max_parallel must be a positive integer")):
        open_batch(ToolRuntime(), calls("r:c1"), max_parallel=value, sink=sink)
    assert sink.events == []


async def test_s007_run_tool_calls_validates_before_any_event() -> None:
    sink = RecordingSink()
    with pytest.raises(ValueError, match="max_parallel"):
        await run_tool_calls(ToolRuntime(), calls("r:c1"), max_parallel=0, sink=sink)
    assert sink.events == []


def test_calls_must_be_model_tool_calls() -> None:
    with pytest.raises(
        TypeError, match=exactly("calls must contain ModelToolCall objects, got dict")
    ):
        open_batch(ToolRuntime(), [{"call_id": "c"}])  # type: ignore[list-item]


def test_calls_are_materialized_once() -> None:
    consumed: list[int] = []

    def generate() -> Any:
        for i in range(2):
            consumed.append(i)
            yield ModelToolCall(call_id=f"c{i}", name="r", arguments="")

    open_batch(ToolRuntime(), generate())
    assert consumed == [0, 1]


def test_s035_scope_of_another_runtime() -> None:
    other = ToolRuntime()
    with pytest.raises(ValueError, match=exactly("scope belongs to a different runtime")):
        open_batch(ToolRuntime(), [], scope=other.open_scope())


def test_s035_sink_without_the_methods() -> None:
    with pytest.raises(
        TypeError, match=exactly("sink must provide on_call, on_result and on_context")
    ):
        open_batch(ToolRuntime(), [], sink=object())  # type: ignore[arg-type]


class _AsyncCall:
    async def __call__(self, event: object) -> None:
        pass  # pragma: no cover - refused before any event


class _PlainSink:
    def on_call(self, event: object) -> None:
        pass  # pragma: no cover - refused before any event

    def on_result(self, event: object) -> None:
        pass  # pragma: no cover

    def on_context(self, event: object) -> None:
        pass  # pragma: no cover


@pytest.mark.parametrize("method", ["on_call", "on_result", "on_context"])
@pytest.mark.parametrize("form", ["async def", "async __call__"])
def test_s035_a_sink_with_an_async_method_is_refused(method: str, form: str) -> None:
    """Sink methods are called synchronously (scheduler.md §5): an async one would return
    a coroutine nobody awaits and every event would be lost, so it is refused up front
    (decision 5 does the same for hooks that must be synchronous)."""
    sink = _PlainSink()
    if form == "async def":

        async def handler(event: object) -> None:
            pass  # pragma: no cover - refused before any event

        setattr(sink, method, handler)
    else:
        setattr(sink, method, _AsyncCall())
    with pytest.raises(TypeError) as info:
        open_batch(ToolRuntime(), [], sink=sink)
    assert str(info.value).startswith(f"sink.{method} is async; sink methods are called")


@pytest.mark.parametrize("calls_value", [None, 5])
def test_s035_calls_that_are_not_iterable(calls_value: object) -> None:
    message = (
        f"calls must be an iterable of ModelToolCall objects, got {type(calls_value).__name__}"
    )
    with pytest.raises(TypeError, match=exactly(message)):
        open_batch(ToolRuntime(), calls_value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"scope": "s"}, TypeError, "scope must be a Scope or None"),
        ({"abort": object()}, TypeError, "abort must be an Abort or None"),
        ({"parent": "x"}, TypeError, "parent must be an ExecutionToken or None"),
        ({"root_call_id": 5}, TypeError, "root_call_id must be a str or None"),
        ({"keep_results": "no"}, TypeError, "keep_results must be a bool"),
    ],
)
async def test_s043_invalid_options_raise_before_any_event(
    options: dict[str, Any], error: type, message: str
) -> None:
    sink = RecordingSink()
    with pytest.raises(error, match=exactly(message)):
        await run_tool_calls(simple_runtime(), calls("r:c1"), sink=sink, **options)
    assert sink.events == []


async def test_an_abort_of_a_subclass_is_refused_before_any_event() -> None:
    # Exact types, as ToolCall requires: the driver builds every call's ToolCall from the
    # batch's options without checking them again, so a subclass fails here, named.
    class MyAbort(Abort):  # type: ignore[misc]
        pass

    sink = RecordingSink()
    with pytest.raises(TypeError, match=exactly("abort must be an Abort or None")):
        await run_tool_calls(simple_runtime(), calls("r:c1"), sink=sink, abort=MyAbort())
    assert sink.events == []


def test_validation_order_is_the_spec_order() -> None:
    # max_parallel is checked before the calls, the calls before the scope, and so on.
    with pytest.raises(TypeError, match="max_parallel"):
        open_batch(ToolRuntime(), [1], max_parallel=True, scope="s")  # type: ignore[list-item, arg-type]
    with pytest.raises(TypeError, match="calls must"):
        open_batch(ToolRuntime(), [1], scope="s")  # type: ignore[list-item, arg-type]
    with pytest.raises(TypeError, match="scope must"):
        open_batch(ToolRuntime(), [], scope="s", abort="a")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="abort must"):
        open_batch(ToolRuntime(), [], abort="a", sink=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sink must"):
        open_batch(ToolRuntime(), [], sink=object(), parent="p")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="parent must"):
        open_batch(ToolRuntime(), [], parent="p", root_call_id=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="root_call_id must"):
        open_batch(ToolRuntime(), [], root_call_id=1, keep_results=1)  # type: ignore[arg-type]


def test_runtime_must_be_a_tool_runtime() -> None:
    with pytest.raises(TypeError, match="runtime must be a ToolRuntime, got object"):
        open_batch(object(), [])  # type: ignore[arg-type]


async def test_calls_run_in_the_given_scope() -> None:
    runtime = ToolRuntime()
    scope = runtime.open_scope(name="agent")
    scope.register(gated_tool("mine", parallel=True, steps=[]))
    outcome = await run_tool_calls(runtime, calls("mine:c1"), scope=scope)
    assert not outcome.results[0].result.is_error
    unscoped = await run_tool_calls(runtime, calls("mine:c1"))
    assert unscoped.results[0].result.is_error  # not visible without the scope


def test_batch_has_no_public_constructor() -> None:
    with pytest.raises(TypeError, match="no public constructor"):
        Batch()


def test_default_max_parallel_is_ten() -> None:
    assert DEFAULT_MAX_PARALLEL == 10


# -- run_tool_calls and the outcome -------------------------------------------------------


async def test_run_tool_calls_returns_one_committed_call_per_call() -> None:
    outcome = await run_tool_calls(simple_runtime(), calls("r:c1", "r:c2", "r:c1"))
    assert isinstance(outcome, BatchOutcome)
    assert [c.index for c in outcome.results] == [0, 1, 2]
    assert ids(outcome.results) == ["c1", "c2", "c1"]  # duplicate ids are fine: by position
    assert all(isinstance(c, CommittedCall) for c in outcome.results)
    assert [c.result.content for c in outcome.results] == [
        (TextContent("c1"),),
        (TextContent("c2"),),
        (TextContent("c1"),),
    ]


async def test_s043_parent_and_root_call_id_reach_every_sub_call() -> None:
    seen: list[ToolExecution] = []
    runtime = ToolRuntime()

    async def leaf(args: Any, ctx: ToolRunContext) -> object:
        seen.append(ctx.execution)
        return "leaf"

    leaf_output = Output(
        schema={},
        render=lambda args, value: [TextContent(str(value))],
        presentation_meta=lambda args, value: {"shown": True},
    )
    runtime.register(
        ToolDefinition(
            name="leaf",
            description="leaf",
            parameters={},
            output=leaf_output,
            execute=leaf,
            is_concurrency_safe=True,
        )
    )
    sub_results: list[Any] = []

    async def composite(args: Any, ctx: ToolRunContext) -> object:
        outcome = await run_tool_calls(
            runtime,
            calls("leaf:s1", "leaf:s2"),
            parent=ctx.token,
            root_call_id=ctx.root_call_id,
        )
        sub_results.extend(c.result for c in outcome.results)
        return "composite"

    runtime.register(
        ToolDefinition(
            name="composite", description="c", parameters={}, output=leaf_output, execute=composite
        )
    )
    outcome = await run_tool_calls(runtime, calls("composite:top"))
    parent = outcome.results[0]
    assert parent.result.meta == {"shown": True}
    assert len(seen) == 2
    assert {e.root_call_id for e in seen} == {"top"}
    assert all(isinstance(e.parent, ExecutionToken) for e in seen)
    assert len({e.parent for e in seen}) == 1
    assert [r.meta for r in sub_results] == [None, None]  # nested calls: no presentation_meta


async def test_s041_keep_results_false_keeps_no_committed_calls() -> None:
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=[], contexts=1, conclude=True))
    sink_steps: list[str] = []
    abort = Abort()
    async with open_batch(
        runtime, calls("r:c1", "r:c2"), keep_results=False, sink=StepSink(sink_steps), abort=abort
    ) as batch:
        seen = [c.call.call_id async for c in batch]
    outcome = batch.outcome
    assert outcome is not None
    assert outcome.results == ()
    assert seen == ["c1", "c2"]  # the iterator still gets every committed call
    assert sink_steps == [
        "call c1",
        "call c2",
        "result c1",
        "result c2",
        "context c1:0",
        "context c2:0",
    ]
    assert len(outcome.additional_contexts) == 2
    assert outcome.concludes_turn
    assert not outcome.aborted


async def test_s041_keep_results_false_holds_nothing_while_nobody_iterates() -> None:
    async with open_batch(simple_runtime(), calls("r:c1", "r:c2"), keep_results=False) as batch:
        await wait_blocked()  # the batch finished while nobody iterated
        late = [c async for c in batch]
    assert late == []
    assert batch.outcome is not None
    assert batch.outcome.results == ()


# -- iteration (§9) -----------------------------------------------------------------------


async def test_s027_iteration_yields_committed_calls_in_model_order_as_they_commit() -> None:
    steps: list[str] = []
    gates = Gates()
    runtime = simple_runtime(steps, gates)
    got: list[str] = []

    async def consume(batch: Batch) -> None:
        async for committed in batch:
            got.append(committed.call.call_id)

    async with (
        open_batch(runtime, calls("r:c1", "r:c2", "r:c3")) as batch,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(consume, batch)
        await wait_blocked()
        gates.release("c2")
        await wait_blocked()
        assert got == []  # c2 waits behind c1
        gates.release("c1")
        await wait_blocked()
        assert got == ["c1", "c2"]
        assert batch.outcome is None  # set only after the block
        gates.release("c3")
    assert got == ["c1", "c2", "c3"]
    assert batch.outcome is not None
    assert ids(batch.outcome.results) == got


async def test_iteration_includes_synthetic_results() -> None:
    abort = Abort()
    abort.abort()
    async with open_batch(simple_runtime(), calls("r:c1", "r:c2"), abort=abort) as batch:
        got = [(c.call.call_id, c.synthetic, c.mode) async for c in batch]
    assert got == [("c1", True, None), ("c2", True, None)]


async def test_s028_break_out_of_the_iteration_then_leave_the_block() -> None:
    steps: list[str] = []
    gates = Gates()
    runtime = simple_runtime(steps, gates)
    async with open_batch(runtime, calls("r:c1", "r:c2", "r:c3")) as batch:
        gates.release("c1")
        async for committed in batch:
            assert committed.call.call_id == "c1"
            break
        gates.release("c2", "c3")
    # Leaving the block waited for the batch: the outcome is complete.
    assert batch.outcome is not None
    assert ids(batch.outcome.results) == ["c1", "c2", "c3"]
    assert sorted(steps) == sorted(f"c{i} {e}" for i in (1, 2, 3) for e in ("start", "end"))


async def test_a_new_iteration_after_break_starts_from_the_first_held_call() -> None:
    async with open_batch(simple_runtime(), calls("r:c1", "r:c2")) as batch:
        async for _ in batch:
            break
        gc.collect()  # the broken iterator is gone (CPython frees it at once anyway)
        again = [c.call.call_id async for c in batch]
    assert again == ["c1", "c2"]


async def test_s039_a_second_concurrent_iteration_raises() -> None:
    gates = Gates()
    async with open_batch(simple_runtime(gates=gates), calls("r:c1")) as batch:
        first = batch.__aiter__()
        with pytest.raises(RuntimeError, match=exactly("batch is already being iterated")):
            batch.__aiter__()
        gates.release("c1")
        assert [c.call.call_id async for c in first] == ["c1"]
        # The first iteration is exhausted: a new one may run.
        assert [c.call.call_id async for c in batch] == ["c1"]


async def test_s039_concurrent_consumers_in_two_tasks() -> None:
    gates = Gates()
    errors: list[BaseException] = []

    async def consume(batch: Batch) -> None:
        try:
            async for _ in batch:
                pass
        except RuntimeError as exc:
            errors.append(exc)

    async with (
        open_batch(simple_runtime(gates=gates), calls("r:c1")) as batch,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(consume, batch)
        await wait_blocked()
        nursery.start_soon(consume, batch)
        await wait_blocked()
        gates.release("c1")
    assert [str(e) for e in errors] == ["batch is already being iterated"]


async def test_iterator_close_releases_the_iteration() -> None:
    async with open_batch(simple_runtime(), calls("r:c1")) as batch:
        iterator = batch.__aiter__()
        await iterator.aclose()  # type: ignore[attr-defined]
        iterator.close()  # type: ignore[attr-defined]  # idempotent
        with pytest.raises(StopAsyncIteration):
            await iterator.__anext__()
        assert [c.call.call_id async for c in batch] == ["c1"]


async def test_iterating_before_entering_raises() -> None:
    batch = open_batch(simple_runtime(), calls("r:c1"))
    with pytest.raises(RuntimeError, match="first"):
        batch.__aiter__()


async def test_a_batch_is_entered_once() -> None:
    batch = open_batch(simple_runtime(), [])
    async with batch:
        pass
    with pytest.raises(RuntimeError, match="entered only once"):
        async with batch:
            pass


async def test_iteration_ends_after_an_internal_failure() -> None:
    class Failing:
        def on_call(self, event: Any) -> None:
            pass

        def on_result(self, event: Any) -> None:
            raise RuntimeError("sink")

        def on_context(self, event: Any) -> None:
            pass

    got: list[str] = []
    batch = open_batch(simple_runtime(), calls("r:c1", "r:c2"), sink=Failing())

    async def iterate() -> None:
        async with batch:
            async for committed in batch:
                got.append(committed.call.call_id)

    with pytest.raises(RuntimeError, match="sink"):
        await iterate()
    assert got == []
    assert batch.outcome is None


# -- the block (§9, §9a) ------------------------------------------------------------------


async def test_s029_block_error_aborts_and_propagates_unwrapped() -> None:
    steps: list[str] = []
    gates = Gates()
    sink_steps: list[str] = []
    runtime = simple_runtime(steps, gates)
    error = ValueError("the block failed")
    batch = open_batch(
        runtime, calls("r:c1", "r:c2", "r:c3"), max_parallel=2, sink=StepSink(sink_steps)
    )

    async def block() -> None:
        async with batch:
            await wait_blocked()
            raise error

    with pytest.raises(ValueError, match="the block failed") as info:
        await block()
    assert info.value is error
    assert batch.abort.aborted
    assert batch.abort.reason is error
    # Bookkeeping completed: started calls drained and committed, the rest synthetic.
    assert sink_steps == ["call c1", "call c2", "result c1", "result c2", "call c3", "result c3"]
    assert batch.outcome is not None
    assert batch.outcome.aborted
    assert [c.synthetic for c in batch.outcome.results] == [False, False, True]


async def test_block_exception_group_propagates_as_that_group() -> None:
    group = ExceptionGroup("mine", [ValueError("a")])
    with pytest.raises(ExceptionGroup) as info:
        async with open_batch(simple_runtime(), calls("r:c1")):
            raise group
    assert info.value is group


async def test_batch_repr_names_its_number_and_size() -> None:
    batch = open_batch(simple_runtime(), calls("r:c1", "r:c2"))
    assert repr(batch).startswith("<Batch #")
    assert repr(batch).endswith(" of 2 calls>")


async def test_batch_numbers_are_process_unique_and_increasing() -> None:
    sink = RecordingSink()
    await run_tool_calls(simple_runtime(), calls("r:c1"), sink=sink)
    await run_tool_calls(simple_runtime(), calls("r:c1"), sink=sink)
    numbers = [e.batch for e in sink.events]
    assert numbers[0] == numbers[1]
    assert numbers[2] == numbers[3] > numbers[0]


async def test_context_variables_set_by_hooks_reach_later_dispatch_tasks() -> None:
    """§3: a dispatch task starts with a copy of the driver's context after its prepare."""
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: list[tuple[str, str]] = []
    runtime = ToolRuntime()

    async def body(args: Any, ctx: ToolRunContext) -> object:
        seen.append((ctx.call_id, var.get()))
        var.set("changed by a body")  # stays in this dispatch task
        return "ok"

    runtime.register(
        ToolDefinition(
            name="t",
            description="t",
            parameters={},
            output=output(),
            execute=body,
            is_concurrency_safe=True,
        )
    )

    async def pre(execution: ToolExecution, call_next: Any) -> Any:
        if execution.call_id == "c1":
            var.set("set by c1's pre hook")
        return await call_next()

    runtime.on_pre_execute(pre)
    await run_tool_calls(runtime, calls("t:c1", "t:c2"))
    assert sorted(seen) == [("c1", "set by c1's pre hook"), ("c2", "set by c1's pre hook")]


async def test_block_cancelled_group_propagates_as_the_blocks_own_group() -> None:
    """§9: a group raised by the block's own code propagates as that group."""
    gates = Gates()
    seen: list[BaseException] = []
    batch = open_batch(simple_runtime(gates=gates), calls("r:c1"))

    async def block() -> None:
        async with batch, trio.open_nursery() as inner:
            inner.start_soon(trio.sleep_forever)
            await trio.sleep_forever()

    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def go() -> None:
                try:
                    await block()
                except BaseException as exc:
                    seen.append(exc)
                    raise

            nursery.start_soon(go)
            await wait_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    (raised,) = seen
    assert isinstance(raised, BaseExceptionGroup)
    assert all(isinstance(e, trio.Cancelled) for e in raised.exceptions)
    assert batch.outcome is None


async def test_statistics_is_a_snapshot_of_the_batch() -> None:
    """``Batch.statistics()``: a frozen snapshot before, during and after the batch; calls
    started, running, committed, synthetic, the group's mode, aborted."""
    gates = Gates()
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=[], gates=gates))
    runtime.register(gated_tool("w", parallel=False, steps=[], gates=gates))
    batch = open_batch(runtime, calls("r:c1", "r:c2", "w:c3", "r:c4"), max_parallel=2)
    assert batch.statistics() == BatchStatistics(
        calls=4, started=0, running=0, committed=0, synthetic=0, group_mode=None, aborted=False
    )
    async with batch:
        await trio.testing.wait_all_tasks_blocked()
        during = batch.statistics()
        assert during == BatchStatistics(
            calls=4,
            started=2,
            running=2,
            committed=0,
            synthetic=0,
            group_mode=ExecutionMode.PARALLEL,
            aborted=False,
        )
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            during.running = 0  # type: ignore[misc]
        gates.release("c1")
        await trio.testing.wait_all_tasks_blocked()
        assert (batch.statistics().committed, batch.statistics().running) == (1, 1)
        batch.abort.abort("enough")
    after = batch.statistics()
    assert after == BatchStatistics(
        calls=4, started=2, running=0, committed=4, synthetic=2, group_mode=None, aborted=True
    )


def test_the_driver_builds_each_committed_call_as_the_constructor_does() -> None:
    # The driver builds one per committed call with _outcome.committed_call: the keyword
    # constructor's value, field for field.
    from dsh_sched import CommittedCall, ModelToolCall
    from dsh_sched._outcome import committed_call
    from dsh_tools import ExecutionMode, TextContent, ToolResult

    call = ModelToolCall(call_id="c1", name="echo", arguments="{}")
    result = ToolResult(is_error=False, content=(TextContent("ok"),))
    for synthetic, mode in ((False, ExecutionMode.PARALLEL), (True, None)):
        built = committed_call(3, call, result, synthetic, mode)
        assert type(built) is CommittedCall
        assert built == CommittedCall(
            index=3, call=call, result=result, synthetic=synthetic, mode=mode
        )
        assert (built.call, built.result) == (call, result)
