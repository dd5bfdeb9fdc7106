"""The lane (``dsh_tools.lowlevel.Lane``): one ordered pool for every client.

``dsh_sched``'s model batches are one client (tested through ``run_tool_calls`` everywhere
else); these tests drive it as a second client would, with a queue that grows while the lane
runs (code-mode §5): the same rolling pool, barriers and head-of-line commits.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from dsh_tools import (
    Abort,
    ExecutionMode,
    Output,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
)
from dsh_tools.lowlevel import Lane, LaneStatistics


def _sleeper(name: str, *, parallel: bool, log: list[str]) -> ToolDefinition:
    async def body(args: object, ctx: ToolRunContext) -> object:
        log.append(f"{ctx.call_id} start")
        await trio.sleep(1.0)
        log.append(f"{ctx.call_id} end")
        return ctx.call_id

    return ToolDefinition(
        name=name,
        description=name,
        parameters={},
        output=Output(schema={}, render=lambda args, value: [TextContent(str(value))]),
        execute=body,
        is_concurrency_safe=parallel,
    )


class QueueClient:
    """A minimal second client: calls appended as a program would dispatch them."""

    def __init__(self, abort: Abort) -> None:
        self.abort = abort
        self.calls: list[ToolCall] = []
        self.events: list[str] = []
        self.results: dict[int, ToolResult] = {}

    def add(self, name: str) -> None:
        n = len(self.calls)
        self.calls.append(ToolCall(call_id=f"s{n}", name=name, abort=self.abort))

    def call_at(self, index: int) -> ToolCall:
        return self.calls[index]

    def on_start(
        self, index: int, execution: ToolExecution, mode: ExecutionMode
    ) -> ToolResult | None:
        self.events.append(f"start {index} {mode.value}")
        return None

    def on_commit(self, index: int, result: ToolResult, mode: ExecutionMode | None) -> None:
        self.events.append(f"commit {index}")
        self.results[index] = result


async def test_an_open_queue_grows_while_the_lane_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Calls appended while a parallel group runs join its rolling pool; an exclusive call
    waits for everything before it; commits stay in queue order; run() ends on close()."""
    runtime = ToolRuntime()
    log: list[str] = []
    runtime.register(_sleeper("r", parallel=True, log=log))
    runtime.register(_sleeper("w", parallel=False, log=log))
    abort = Abort()
    client = QueueClient(abort)
    lane = Lane(runtime, client, abort=abort, max_parallel=4, open_queue=True)
    done: list[bool] = []
    async with trio.open_nursery() as nursery:
        lane.nursery = nursery

        async def drive() -> None:
            done.append(await lane.run())

        nursery.start_soon(drive)
        await trio.testing.wait_all_tasks_blocked()
        assert lane.statistics() == LaneStatistics(
            calls=0, started=0, running=0, committed=0, group_mode=None, aborted=False
        )
        client.add("r")
        lane.extend()
        await trio.sleep(0.5)
        client.add("r")  # joins the running parallel group
        lane.extend()
        await trio.sleep(0.1)
        stats = lane.statistics()
        assert (stats.calls, stats.started, stats.running) == (2, 2, 2)
        assert stats.group_mode is ExecutionMode.PARALLEL
        client.add("w")
        client.add("r")
        lane.extend(2)
        await trio.sleep(10)
        lane.close()
    assert done == [True]
    assert trio.current_time() == pytest.approx(0.5 + 0.1 + 10)
    assert log[:4] == ["s0 start", "s1 start", "s0 end", "s1 end"]
    assert log[4:] == ["s2 start", "s2 end", "s3 start", "s3 end"]
    assert [e for e in client.events if e.startswith("commit")] == [
        "commit 0",
        "commit 1",
        "commit 2",
        "commit 3",
    ]
    assert "start 2 exclusive" in client.events
    assert [client.results[i].value for i in range(4)] == ["s0", "s1", "s2", "s3"]
    assert lane.statistics().committed == 4
    assert lane.take_unstarted() is None


async def test_an_aborted_lane_leaves_its_unstarted_calls_to_the_client(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Once the Abort fires nothing more starts: run() returns, started calls are
    committed by the runtime's rules, and the client claims the rest."""
    runtime = ToolRuntime()
    log: list[str] = []
    runtime.register(_sleeper("w", parallel=False, log=log))
    abort = Abort()
    client = QueueClient(abort)
    for _ in range(3):
        client.add("w")
    lane = Lane(runtime, client, abort=abort, max_parallel=4, calls=3)
    async with trio.open_nursery() as nursery:
        lane.nursery = nursery
        nursery.start_soon(lane.run)
        await trio.sleep(0.5)
        abort.abort("stop")
    assert log == ["s0 start"]
    assert client.results[0].error is not None
    assert client.results[0].error.message == "tool call aborted: stop"
    assert [lane.take_unstarted(), lane.take_unstarted(), lane.take_unstarted()] == [1, 2, None]
    assert lane.statistics().aborted


class _Raising(QueueClient):
    def __init__(self, abort: Abort, error: BaseException) -> None:
        super().__init__(abort)
        self.error = error

    def on_commit(self, index: int, result: ToolResult, mode: ExecutionMode | None) -> None:
        super().on_commit(index, result, mode)
        raise self.error


@pytest.mark.parametrize("error", [RuntimeError("client bug"), KeyboardInterrupt()])
async def test_the_bookkeeping_goes_on_when_the_client_raises(
    error: BaseException, autojump_clock: trio.testing.MockClock
) -> None:
    """The bookkeeping gives every started call its result even if the client raises while
    recording one: an Exception is logged, anything else kept as the lane's native one."""
    runtime = ToolRuntime()
    log: list[str] = []
    runtime.register(_sleeper("r", parallel=True, log=log))
    abort = Abort()
    client = _Raising(abort, error)
    client.add("r")
    client.add("r")
    lane = Lane(runtime, client, abort=abort, max_parallel=4, calls=2)
    with trio.move_on_after(0.5):
        async with trio.open_nursery() as nursery:
            lane.nursery = nursery
            nursery.start_soon(lane.run)
    lane.bookkeep()
    assert [e for e in client.events if e.startswith("commit")] == ["commit 0", "commit 1"]
    assert all(r.error is not None for r in client.results.values())
    assert (lane.native is error) == isinstance(error, KeyboardInterrupt)
    lane.bookkeep()  # nothing left: a second call does nothing
    assert len(client.results) == 2
