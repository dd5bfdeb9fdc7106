"""Shared workers for dispatch stages that never wait (decision 109; scheduler.md §3, §4).

The lane runs the dispatch stage of a wrapper-free parallel call in a shared worker task
unless its tool is known to wait. These tests show what a user can observe of that: each
stage still sees its own copy of the driver's context taken after its call's prepare; a
stage that waits never holds up the stages queued behind it; a tool seen waiting gets a
task per call from then on; cancellation of queued stages gives every call its one
result; and the :class:`Workers` queue itself runs every stage it was given, also when
stages are cancelled.
"""

from __future__ import annotations

import contextvars
import types
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

import dsh_tools._lane_workers
from dsh_sched import ModelToolCall, run_tool_calls
from dsh_tools import (
    CallNext,
    Deny,
    ErrorCode,
    PreDecision,
    ToolExecution,
    ToolRuntime,
    tool,
)
from dsh_tools._lane_workers import BURST, SPAWNS, Workers

if TYPE_CHECKING:
    from collections.abc import Coroutine, Generator

#: Set by a pre-execute hook to the call's id; read by the bodies.
current_call: contextvars.ContextVar[str] = contextvars.ContextVar("current_call", default="-")
#: Set by the bodies, to show a body's change stays in its own context.
scratch: contextvars.ContextVar[str] = contextvars.ContextVar("scratch", default="clean")


def _calls(name: str, count: int, prefix: str = "c") -> list[ModelToolCall]:
    return [ModelToolCall(call_id=f"{prefix}{i}", name=name, arguments="{}") for i in range(count)]


class _Sink:
    """Notes each start and each commit in ``events``."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def on_call(self, event: Any) -> None:
        self.events.append(f"call {event.call.call_id}")

    def on_result(self, event: Any) -> None:
        self.events.append(f"result {event.call.call_id}")

    def on_context(self, event: Any) -> None:
        pass


def _runtime(seen: list[tuple[str, trio.lowlevel.Task, str, str]]) -> ToolRuntime:
    runtime = ToolRuntime()

    @tool(name="quick", is_concurrency_safe=True)
    async def quick() -> str:
        """Return at once."""
        seen.append((current_call.get(), trio.lowlevel.current_task(), scratch.get(), "quick"))
        scratch.set("dirty")
        return "ok"

    @tool(name="slow", is_concurrency_safe=True)
    async def slow() -> str:
        """Wait a second."""
        seen.append((current_call.get(), trio.lowlevel.current_task(), scratch.get(), "slow"))
        await trio.sleep(1)
        return "slept"

    runtime.register(quick)
    runtime.register(slow)
    return runtime


async def test_stages_that_never_wait_share_one_task_and_keep_their_own_context() -> None:
    seen: list[tuple[str, trio.lowlevel.Task, str, str]] = []
    runtime = _runtime(seen)

    async def mark(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        current_call.set(execution.call_id)
        return await call_next()

    runtime.on_pre_execute(mark)
    outcome = await run_tool_calls(runtime, _calls("quick", 30), max_parallel=30)
    assert [c.result.is_error for c in outcome.results] == [False] * 30
    # Each body saw the value its own call's prepare left in the driver's context, and
    # none saw what an earlier body in the same task had set.
    assert [(call, dirt) for call, _, dirt, _ in seen] == [(f"c{i}", "clean") for i in range(30)]
    assert len({task for _, task, _, _ in seen}) == 1
    assert current_call.get() == "-"  # the hook ran in the driver's task, not the caller's
    assert runtime._registry.waits == set()


class _Spawns(trio.abc.Instrument):
    """Counts the tasks spawned while it is installed."""

    def __init__(self) -> None:
        self.count = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.count += 1


async def test_the_host_runs_the_stages_queued_before_it_first_ran() -> None:
    """Decision 114: starting the shared-scope host is not a checkpoint, and the host itself
    runs the stages the driver queued before it first ran: a batch of calls that never wait
    costs two tasks (the driver and the host), not a third for a worker."""
    seen: list[tuple[str, trio.lowlevel.Task, str, str]] = []
    runtime = _runtime(seen)
    spawns = _Spawns()
    trio.lowlevel.add_instrument(spawns)
    try:
        outcome = await run_tool_calls(runtime, _calls("quick", 10), max_parallel=10)
    finally:
        trio.lowlevel.remove_instrument(spawns)
    assert [c.result.value for c in outcome.results] == ["ok"] * 10
    assert spawns.count == 2
    (host,) = {task for _, task, _, _ in seen}
    assert host.coro.cr_code is dsh_tools._lane_workers.host_workers.__code__


async def test_a_group_whose_calls_never_dispatch_lets_the_host_go_before_it_ran(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Every call of an overlapping group ends in prepare, with no wait: the lane is done
    (and lets the host go) before the host first ran, and the host leaves without waiting
    for a wake-up that already happened."""
    seen: list[tuple[str, trio.lowlevel.Task, str, str]] = []
    runtime = _runtime(seen)

    async def deny(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        return Deny("not now")

    runtime.on_pre_execute(deny)
    with trio.fail_after(60):  # a host left waiting would hold the batch open for good
        outcome = await run_tool_calls(runtime, _calls("quick", 3), max_parallel=3)
    codes = [
        c.result.error.info.code for c in outcome.results if c.result.error and c.result.error.info
    ]
    assert codes == [ErrorCode.TOOL_DENIED] * 3
    assert seen == []


async def test_a_stage_that_waits_never_holds_up_the_stages_queued_behind_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[tuple[str, trio.lowlevel.Task, str, str]] = []
    runtime = _runtime(seen)
    finished: list[tuple[str, float]] = []

    class Sink:
        def on_call(self, event: Any) -> None:
            pass

        def on_result(self, event: Any) -> None:
            finished.append((event.call.call_id, trio.current_time()))

        def on_context(self, event: Any) -> None:
            pass

    calls = [
        ModelToolCall(call_id="s0", name="slow", arguments="{}"),
        *_calls("quick", 3, "q"),
        ModelToolCall(call_id="s1", name="slow", arguments="{}"),
        *_calls("quick", 3, "r"),
    ]
    start = trio.current_time()
    outcome = await run_tool_calls(runtime, calls, max_parallel=8, sink=Sink())
    assert [c.result.value for c in outcome.results] == ["slept"] + ["ok"] * 3 + ["slept"] + [
        "ok"
    ] * 3
    # Both sleeps overlapped the quick bodies and each other: one second in all.
    assert trio.current_time() - start == pytest.approx(1.0)
    assert all(t == pytest.approx(start + 1.0) for _, t in finished)
    # Every body ran before either sleep ended. The first slow body kept its worker and a
    # new worker took over the queue; the second slow call, of a tool now known to wait,
    # got a task of its own (which ran next) and that worker went on with the quick ones.
    assert [name for *_, name in seen] == ["slow"] + ["quick"] * 6 + ["slow"]
    tasks = [task for _, task, _, _ in seen]
    assert len(set(tasks)) == 3
    assert tasks[1:7] == [tasks[1]] * 6
    assert runtime._registry.waits == {"slow"}

    # From now on a call of "slow" gets a task of its own at once.
    seen.clear()
    outcome = await run_tool_calls(runtime, _calls("slow", 4), max_parallel=4)
    assert [c.result.value for c in outcome.results] == ["slept"] * 4
    assert len({task for _, task, _, _ in seen}) == 4


async def test_cancelling_a_batch_with_queued_stages_gives_each_call_one_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[tuple[str, trio.lowlevel.Task, str, str]] = []
    runtime = _runtime(seen)
    results: list[tuple[str, str | None]] = []

    class Sink:
        def on_call(self, event: Any) -> None:
            pass

        def on_result(self, event: Any) -> None:
            error = event.result.error
            code = None if error is None or error.info is None else error.info.code
            results.append((event.call.call_id, code))

        def on_context(self, event: Any) -> None:
            pass

    calls = [ModelToolCall(call_id="s0", name="slow", arguments="{}"), *_calls("quick", 5)]
    with trio.move_on_after(0.5):
        await run_tool_calls(runtime, calls, max_parallel=6, sink=Sink())
    # Every body ran once (the quick ones behind the slow one in the queue); the slow one
    # was cancelled, and the cancellation bookkeeping gave every uncommitted call its one
    # ABORTED result, as it does when each stage has a task of its own.
    assert sorted(call for call, *_ in seen) == ["-"] * 6
    assert [name for *_, name in seen] == ["slow"] + ["quick"] * 5
    assert results == [("s0", ErrorCode.ABORTED)] + [(f"c{i}", ErrorCode.ABORTED) for i in range(5)]


async def test_cancelled_stages_hand_the_queue_on_and_every_stage_runs() -> None:
    ran: list[str] = []

    async def stage(label: str, *, cancel: bool = False) -> None:
        ran.append(label)
        if cancel:
            await trio.lowlevel.checkpoint_if_cancelled()

    waits: set[str] = set()
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            workers = Workers(nursery, waits, lambda: None)
            scope.cancel()
            for label in ("a", "b", "c"):
                workers.submit(contextvars.copy_context(), stage(label, cancel=True), label)
            workers.submit(contextvars.copy_context(), stage("d"), "d")
    # Each cancelled stage yielded before its Cancelled, handing the queue to a new worker
    # (four in all), so the cancellation out of "a" did not keep "b", "c" and "d" from
    # running; a cancellation being delivered does not mark a tool as one that waits.
    assert scope.cancelled_caught
    assert ran == ["a", "b", "c", "d"]
    assert waits == set()
    assert workers.last == 4
    assert workers.drainer == 0


async def test_a_worker_whose_stage_waits_hands_the_queue_to_a_new_one() -> None:
    order: list[str] = []
    gate = trio.Event()

    async def waits_for_gate() -> None:
        order.append("wait-start")
        await gate.wait()
        order.append("wait-end")

    async def opens_gate() -> None:
        order.append("open")
        gate.set()

    async with trio.open_nursery() as nursery:
        workers = Workers(nursery, set(), lambda: None)
        context = contextvars.copy_context
        workers.submit(context(), waits_for_gate(), "waiter")
        workers.submit(context(), opens_gate(), "opener")
    assert order == ["wait-start", "open", "wait-end"]
    assert workers.waits == {"waiter"}
    assert workers.last == 2
    assert workers.drainer == 0


@types.coroutine
def _trap() -> Generator[str, object, object]:
    """Yield to whoever steps the coroutine, as a trio trap does."""
    return (yield "trap")


def _suspended_worker(stage: Coroutine[Any, Any, None]) -> Any:
    """A worker stepped by hand (inside a trio task), suspended at ``stage``'s first trap."""
    workers = Workers(None, set(), lambda: None)  # never spawns: one job
    workers.jobs.append((contextvars.copy_context(), stage, "stage"))
    worker: Any = workers._work(0)
    assert worker.send(None) == "trap"
    assert workers.waits == {"stage"}
    return worker


async def test_a_throw_into_a_worker_reaches_its_waiting_stage() -> None:
    seen: list[object] = []

    async def catches() -> None:
        try:
            await _trap()
        except ValueError as exc:
            seen.append(exc)

    async def raises() -> None:
        try:
            await _trap()
        finally:
            seen.append("finally")

    # The stage handles what was thrown and returns: the worker ends with it.
    with pytest.raises(StopIteration):
        _suspended_worker(catches()).throw(ValueError("in"))
    # The stage lets it through: the worker ends with it.
    with pytest.raises(KeyError):
        _suspended_worker(raises()).throw(KeyError("out"))
    # Closing the worker closes the stage.
    _suspended_worker(raises()).close()
    assert [type(x) for x in seen] == [ValueError, str, str]


async def test_a_large_group_commits_as_the_workers_finish_bursts() -> None:
    """Decision 110: with more than a burst of stages queued, the driver lets the workers
    run them before it starts more, so results commit as they come and few calls are in
    flight however large the group."""
    seen: list[tuple[str, trio.lowlevel.Task, str, str]] = []
    runtime = _runtime(seen)
    events: list[str] = []

    count = 3 * BURST + 5
    outcome = await run_tool_calls(
        runtime, _calls("quick", count), max_parallel=count, sink=_Sink(events)
    )
    assert [c.result.value for c in outcome.results] == ["ok"] * count
    # A burst of starts, then its results, then the next burst ...
    expected: list[str] = []
    for first in range(0, count, BURST):
        ids = [f"c{i}" for i in range(first, min(count, first + BURST))]
        expected += [f"call {i}" for i in ids] + [f"result {i}" for i in ids]
    assert events == expected


async def test_a_burst_of_stages_that_all_wait_does_not_stall_the_starts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[tuple[str, trio.lowlevel.Task, str, str]] = []
    runtime = _runtime(seen)
    count = 2 * BURST + 3
    start = trio.current_time()
    outcome = await run_tool_calls(runtime, _calls("slow", count), max_parallel=count)
    assert [c.result.value for c in outcome.results] == ["slept"] * count
    # Every body slept at once: the first waiting stage woke the paused driver.
    assert trio.current_time() - start == pytest.approx(1.0)
    assert len({task for _, task, _, _ in seen}) == count


async def test_started_tasks_reach_their_first_wait_every_few_starts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Decision 113: after every few dispatch tasks it starts, the driver lets them run to
    their first wait before it starts more, so the first bodies begin waiting while later
    calls are still being started (the batch ends sooner), and every call still gets its
    one result in order."""
    seen: list[tuple[str, trio.lowlevel.Task, str, str]] = []
    runtime = _runtime(seen)
    await run_tool_calls(runtime, _calls("slow", 2, prefix="w"))  # now known to wait
    assert runtime._registry.waits == {"slow"}
    events: list[str] = []

    @tool(name="slow2", is_concurrency_safe=True)
    async def slow2() -> str:
        """Note the start, then wait a second."""
        events.append(f"body {current_call.get()}")
        await trio.sleep(1)
        return "slept"

    async def mark(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        current_call.set(execution.call_id)
        return await call_next()

    runtime.register(slow2)
    runtime.on_pre_execute(mark)
    await run_tool_calls(runtime, _calls("slow2", 2, prefix="w"))
    events.clear()
    count = 3 * SPAWNS + 3
    start = trio.current_time()
    outcome = await run_tool_calls(
        runtime, _calls("slow2", count), max_parallel=count, sink=_Sink(events)
    )
    assert [c.result.value for c in outcome.results] == ["slept"] * count
    assert trio.current_time() - start == pytest.approx(1.0)
    # Starts in bursts of SPAWNS, each burst's bodies (in trio's order) beginning before the
    # next burst's starts; then the results, in model order.
    position = 0
    for first in range(0, count, SPAWNS):
        ids = [f"c{i}" for i in range(first, min(count, first + SPAWNS))]
        assert events[position : position + len(ids)] == [f"call {i}" for i in ids]
        position += len(ids)
        assert sorted(events[position : position + len(ids)]) == sorted(f"body {i}" for i in ids)
        position += len(ids)
    assert events[position:] == [f"result c{i}" for i in range(count)]
