"""What a lane shares with its clients: the client protocol, the statistics snapshot, and the
small wait primitive the lane's tasks park on (see ``_lane``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, final

import attrs
import trio

from ._definition import ExecutionMode

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from ._calls import ToolCall, ToolExecution
    from ._results import ToolResult

__all__ = ["LaneClient", "LaneStatistics"]


class LaneClient(Protocol):
    """What a lane asks of the code that feeds it (a model batch, a Code Mode run).

    Every method is called from the lane's driver task, one at a time. An ``Exception``
    from one is the lane's internal failure (:attr:`Lane.failure`): nothing more starts or
    commits, and it is re-raised alone by the lane's owner.
    """

    def call_at(self, index: int) -> ToolCall:
        """The ``ToolCall`` of queue position ``index``: built once, the same object on
        every later call (a classifier sees the same arguments each time)."""
        ...

    def on_start(
        self, index: int, execution: ToolExecution, mode: ExecutionMode
    ) -> ToolResult | None:
        """The call at ``index`` was just created under ``mode``; no checkpoint since.

        Returns a result that finishes the call instead of preparing it (a refusal: no
        hook, guard or body runs), or ``None`` to go on.
        """
        ...

    def on_commit(
        self, index: int, result: ToolResult, mode: ExecutionMode | None
    ) -> Awaitable[None] | None:
        """The call at ``index`` was finished with ``result``: record it, in queue order.

        Returns an awaitable that the lane waits on before its next commit or start
        (backpressure), or ``None`` to go on at once. During the cancellation bookkeeping,
        which must not wait, a returned awaitable is closed instead.

        If it raises a non-``Exception`` (a sink's ``KeyboardInterrupt``), it must have
        recorded the commit first: the call is committed either way.
        """
        ...


@final
@attrs.frozen(kw_only=True)
class LaneStatistics:
    """A snapshot of a lane (like ``trio.Event.statistics()``).

    Attributes:
        calls: Calls in the queue so far.
        started: Calls started (created) so far.
        running: Dispatch stages in flight now.
        committed: Calls committed so far, by the lane (not counting calls its client
            recorded without starting them).
        group_mode: The mode of the group being run, or ``None`` between groups.
        aborted: Whether the lane's ``Abort`` has fired.
    """

    calls: int
    started: int
    running: int
    committed: int
    group_mode: ExecutionMode | None
    aborted: bool


class _Halt(Exception):
    """Internal: unwinds the driver after an internal failure was recorded elsewhere."""


@final
class _Waiter:
    """One parked task and a wake-up: cheaper than an Event per wait, no closure per park."""

    __slots__ = ("_task",)

    def __init__(self) -> None:
        self._task: trio.lowlevel.Task | None = None

    @trio.lowlevel.enable_ki_protection
    async def wait(self) -> None:
        self._task = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(self._abort)

    @trio.lowlevel.enable_ki_protection
    def _abort(self, raise_cancel: object) -> trio.lowlevel.Abort:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED

    @trio.lowlevel.enable_ki_protection
    def wake(self) -> None:
        task = self._task
        if task is not None:
            self._task = None
            trio.lowlevel.reschedule(task)


def _drop(pause: Awaitable[None] | None) -> None:
    """Close a client's wait that will not be awaited (no "never awaited" warning)."""
    close = getattr(pause, "close", None)
    if close is not None:
        close()
