"""The batch driver: a model batch as a client of the lane (scheduler.md §3, §4, §6–§8).

One :class:`Driver` per batch. The ordered pool itself (classification, starts, the rolling
pool, barriers, head-of-line commits, the cancellation bookkeeping of started calls) is the
lane's, in ``dsh_tools.lowlevel``; the driver adds what is about a model's batch: building
each ``ToolCall`` from the model's argument text, the sink's events, the synthetic pairs of
calls never started, contexts, the outcome, the iteration buffer and the batch timeout. The
context manager and the exception rules of the block live in ``_batch``.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import TYPE_CHECKING, final

import trio

from dsh_tools import AbortError, ToolCall, ToolDeniedError, error_result
from dsh_tools.lowlevel import Lane, is_cancellation, unchecked_tool_call

from ._calls import call_arguments, has_classifier
from ._outcome import BatchOutcome, BatchStatistics, CommittedCall, committed_call
from ._sinks import CallCommitted, CallStarted, ContextAccepted

if TYPE_CHECKING:
    import collections
    from collections.abc import Awaitable

    from dsh_tools import (
        Abort,
        ExecutionMode,
        ExecutionToken,
        Scope,
        ToolExecution,
        ToolResult,
        ToolRuntime,
        UserMessage,
    )

    from ._calls import ModelToolCall
    from ._sinks import Sink

__all__ = ["HELD_LIMIT", "Driver"]

#: With ``keep_results=False``, how many committed calls may wait for a running iteration
#: before the driver waits for it to read (decision 36).
HELD_LIMIT = 1024

_log = logging.getLogger("dsh_sched")


@cache
def _plain_synthetic_result() -> ToolResult:
    # Immutable, so one object serves every synthetic pair of every batch with no reason.
    return error_result(AbortError("ABORTED_BEFORE_DISPATCH"))


def _synthetic_result(reason: object) -> ToolResult:
    """``ABORTED_BEFORE_DISPATCH`` with the batch Abort's reason in its texts (§6 step 4)."""
    if isinstance(reason, str) and reason:
        return error_result(AbortError("ABORTED_BEFORE_DISPATCH", reason))
    return _plain_synthetic_result()


def _scope_closed_result(scope: Scope) -> ToolResult:
    name = "" if scope.name is None else f' "{scope.name}"'
    return error_result(
        ToolDeniedError(
            f"the batch's scope{name} was closed before this call started; "
            "nothing runs in a closed scope's name"
        )
    )


@final
class Driver:
    """One running batch: the lane's client, and what the batch adds to it.

    :class:`~dsh_sched.Batch` owns the nursery and the block's exceptions; the lane owns the
    ordered pool; everything about the model's batch (its calls, sink, synthetic pairs,
    contexts, outcome, iteration buffer, timeout) lives here.
    """

    __slots__ = (
        "abort",
        "bookkeeping",
        "calls",
        "concluded",
        "context_owners",
        "contexts",
        "contexts_sent",
        "done",
        "ended",
        "final",
        "held",
        "iter_parked",
        "iter_waiter",
        "keep",
        "lane",
        "number",
        "parent",
        "pending_call",
        "pending_frozen",
        "pending_index",
        "reader_parked",
        "reader_waiter",
        "results",
        "root_call_id",
        "scope",
        "sink",
        "synthetic",
        "timeout",
        "timer_scope",
    )

    def __init__(
        self,
        runtime: ToolRuntime,
        calls: tuple[ModelToolCall, ...],
        *,
        number: int,
        scope: Scope | None,
        abort: Abort,
        max_parallel: int,
        sink: Sink | None,
        parent: ExecutionToken | None,
        root_call_id: str | None,
        keep_results: bool,
        timeout: float | None = None,
    ) -> None:
        self.calls = calls
        self.number = number
        self.scope = scope
        self.abort = abort
        self.sink = sink
        self.parent = parent
        self.root_call_id = root_call_id
        self.keep = keep_results
        self.timeout = timeout
        #: The timer's scope (see time_out), made here so that a driver that ends before
        #: the timer task first runs still stops it.
        self.timer_scope: trio.CancelScope | None = None if timeout is None else trio.CancelScope()
        self.lane = Lane(runtime, self, abort=abort, max_parallel=max_parallel, calls=len(calls))
        self.pending_index = -1
        self.pending_call: ToolCall | None = None
        #: Its text arguments were parsed straight into their snapshot (see call_at).
        self.pending_frozen = False
        #: The batch completed (by finishing or by abort); ``final`` is the outcome.
        self.done = False
        self.final: BatchOutcome | None = None
        #: The cancellation bookkeeping runs: sink failures are logged, not raised (§7).
        self.bookkeeping = False
        #: Nothing more will be delivered to the iterator.
        self.ended = False
        self.results: list[CommittedCall] = []
        #: With keep_results=False, what the running iteration has not read yet; ``None``
        #: while no iteration runs, so nothing is held then.
        self.held: collections.deque[CommittedCall] | None = None
        #: The driver, parked until the iteration reads (keep_results=False backpressure).
        # trio's own parking lots: one task parks in each (the driver, the iterator).
        self.reader_waiter = trio.lowlevel.ParkingLot()
        self.iter_waiter = trio.lowlevel.ParkingLot()
        # Whether a task is parked in each (checked per commit instead of the lot's len()).
        self.reader_parked = False
        self.iter_parked = False
        self.contexts: list[UserMessage] = []
        self.context_owners: list[int] = []
        self.contexts_sent = 0
        self.concluded = False
        #: Synthetic pairs recorded so far.
        self.synthetic = 0

    # The lane's state, as the batch reads it.

    @property
    def failure(self) -> Exception | None:
        """The first internal failure (§8), if any."""
        return self.lane.failure

    @property
    def native(self) -> BaseException | None:
        """The first ``KeyboardInterrupt``-like exception (§9), if any."""
        return self.lane.native

    @property
    def nursery(self) -> trio.Nursery | None:
        """The batch's nursery (the lane starts its tasks there)."""
        return self.lane.nursery

    @nursery.setter
    def nursery(self, nursery: trio.Nursery) -> None:
        self.lane.nursery = nursery

    def note_native(self, exc: BaseException) -> None:
        self.lane.note_native(exc)

    def wake_reader(self) -> None:
        """Wake the iterator if it is parked waiting for a commit."""
        if self.iter_parked:
            self.iter_parked = False
            self.iter_waiter.unpark_all()

    def wake_driver(self) -> None:
        """Wake the driver if it is parked waiting for the iterator (backpressure)."""
        if self.reader_parked:
            self.reader_parked = False
            self.reader_waiter.unpark_all()

    def end_iteration(self) -> None:
        """Nothing more will be committed: wake the iterator so it can stop."""
        self.ended = True
        self.wake_reader()

    @trio.lowlevel.enable_ki_protection
    async def drive(self) -> None:
        # No exception escapes this task except cancellation (§9a): the lane records an
        # Exception as the internal failure and anything else as native cancellation.
        lane = self.lane
        try:
            if not await lane.run():
                if lane.failure is None:
                    return  # interrupted: the batch's exit does the bookkeeping
            else:
                try:
                    while not self._synthesize(bookkeeping=False):
                        await self._wait_for_reader()
                    self._deliver_contexts(bookkeeping=False)
                except Exception as exc:
                    lane.fail(exc)
                except BaseException as exc:
                    if is_cancellation(exc):
                        raise
                    lane.interrupt(exc)
                    return
                else:
                    self.final = BatchOutcome(
                        results=tuple(self.results) if self.keep else (),
                        additional_contexts=tuple(self.contexts),
                        concludes_turn=self.concluded,
                        aborted=self.abort.aborted,
                        abort_reason=self.abort.reason,
                    )
                    self.done = True
        finally:
            # Once the driver has ended, the batch has nothing left to time out.
            if self.timer_scope is not None:
                self.timer_scope.cancel()
        # Completed, or stopped by an internal failure: either way the batch delivers
        # nothing more, so the iteration can end now.
        self.end_iteration()

    def statistics(self) -> BatchStatistics:
        """The batch's counters as a frozen snapshot (see :meth:`Batch.statistics`)."""
        lane = self.lane.statistics()
        return BatchStatistics(
            calls=len(self.calls),
            started=lane.started,
            running=lane.running,
            committed=lane.committed + self.synthetic,
            synthetic=self.synthetic,
            group_mode=lane.group_mode,
            aborted=lane.aborted,
        )

    @trio.lowlevel.enable_ki_protection
    def bookkeep(self) -> None:
        """Cancellation bookkeeping (§7): synchronous, so no shield is needed."""
        self.bookkeeping = True
        self.lane.bookkeep()
        self._synthesize(bookkeeping=True)
        self._deliver_contexts(bookkeeping=True)

    # -- the lane's client ----------------------------------------------------------------

    def call_at(self, index: int) -> ToolCall:
        """The call's ToolCall, built once: a reclassified call keeps its arguments object
        (unless it is a snapshot no classifier has seen; see :func:`call_arguments`)."""
        pending = self.pending_call
        again = self.pending_index == index
        runtime = self.lane.runtime
        if (
            again
            and pending is not None
            and not (self.pending_frozen and has_classifier(runtime, pending.name, self.scope))
        ):
            return pending
        call = self.calls[index]
        arguments, frozen = call_arguments(runtime, self.scope, call, may_freeze=not again)
        # Every field's type was checked once (the batch's arguments, ModelToolCall's own).
        tool_call = unchecked_tool_call(
            call.call_id,
            call.name,
            arguments,
            self.scope,
            self.abort,
            self.root_call_id,
            self.parent,
        )
        self.pending_index = index
        self.pending_call = tool_call
        self.pending_frozen = frozen
        return tool_call

    def on_start(
        self, index: int, execution: ToolExecution, mode: ExecutionMode
    ) -> ToolResult | None:
        sink = self.sink
        if sink is not None:
            sink.on_call(
                CallStarted(
                    batch=self.number,
                    index=index,
                    call=self.calls[index],
                    mode=mode,
                    token=execution.token,
                    synthetic=False,
                )
            )
        scope = self.scope
        if scope is not None and scope.closed:
            # Fail closed (decision 35): the scope's restrictions and guards are gone with
            # it, so nothing may run on its behalf any more.
            return _scope_closed_result(scope)
        return None

    def on_commit(
        self, index: int, result: ToolResult, mode: ExecutionMode | None
    ) -> Awaitable[None] | None:
        call = self.calls[index]
        sink = self.sink
        if sink is not None:
            try:
                sink.on_result(
                    CallCommitted(
                        batch=self.number, index=index, call=call, result=result, synthetic=False
                    )
                )
            except BaseException as exc:
                if self.bookkeeping:
                    self._sink_error(exc, bookkeeping=True)
                elif not isinstance(exc, Exception):
                    # Native cancellation from the sink: the call has had its one
                    # on_result, so complete its commit before propagating.
                    self._accept(index, call, result, mode, False)
                    raise
                else:
                    raise
        self._accept(index, call, result, mode, False)
        held = self.held
        if held is not None and len(held) >= HELD_LIMIT:
            return self._wait_for_reader()
        return None

    async def _wait_for_reader(self) -> None:
        """Backpressure (decision 36): with ``keep_results=False`` and an iteration running,
        at most :data:`HELD_LIMIT` committed calls wait for the reader; the driver parks
        until it has read (or stopped iterating), so a long batch holds bounded memory."""
        while (held := self.held) is not None and len(held) >= HELD_LIMIT:
            self.reader_parked = True
            await self.reader_waiter.park()
            if self.lane.failure is not None:
                return

    def _accept(
        self,
        index: int,
        call: ModelToolCall,
        result: ToolResult,
        mode: ExecutionMode | None,
        synthetic: bool,
    ) -> None:
        contexts = result.additional_contexts
        if contexts:
            self.contexts.extend(contexts)
            self.context_owners.extend([index] * len(contexts))
        if result.concludes_turn:
            self.concluded = True
        # Nothing is built per call when nobody keeps or reads it (README "cost").
        if self.keep:
            self.results.append(committed_call(index, call, result, synthetic, mode))
            self.wake_reader()
        elif self.held is not None:
            self.held.append(committed_call(index, call, result, synthetic, mode))
            self.wake_reader()

    # -- synthetic pairs, contexts, bookkeeping (scheduler.md §6, §7) ---------------------

    def _sink_error(self, exc: BaseException, *, bookkeeping: bool) -> BaseException | None:
        """Handle a sink exception outside the hot commit path.

        Returns a native exception to raise once the current step is complete; re-raises an
        ``Exception`` unless this is the bookkeeping, where it is logged (§7).
        """
        if isinstance(exc, Exception):
            if not bookkeeping:
                raise exc
            _log.error("sink failed during cancellation bookkeeping", exc_info=exc)
            return None
        if bookkeeping:
            self.lane.note_native(exc)
            return None
        return exc

    def _synthesize(self, *, bookkeeping: bool) -> bool:
        """Record a synthetic pair for every call not started (§6 step 4).

        Returns ``False`` when it stopped early for the reader (see
        :meth:`_wait_for_reader`; never during the bookkeeping, which must not await).
        """
        lane = self.lane
        sink = self.sink
        # One object for every synthetic pair of this batch: the reason cannot change.
        result = _synthetic_result(self.abort.reason)
        number = self.number
        while (index := lane.take_unstarted()) is not None:
            self.synthetic += 1
            call = self.calls[index]
            interrupted: BaseException | None = None
            if sink is not None:
                try:
                    sink.on_call(
                        CallStarted(
                            batch=number,
                            index=index,
                            call=call,
                            mode=None,
                            token=None,
                            synthetic=True,
                        )
                    )
                except BaseException as exc:
                    interrupted = self._sink_error(exc, bookkeeping=bookkeeping)
                try:
                    sink.on_result(
                        CallCommitted(
                            batch=number, index=index, call=call, result=result, synthetic=True
                        )
                    )
                except BaseException as exc:
                    interrupted = interrupted or self._sink_error(exc, bookkeeping=bookkeeping)
            self._accept(index, call, result, None, True)
            if interrupted is not None:
                raise interrupted
            if not bookkeeping and (held := self.held) is not None and len(held) >= HELD_LIMIT:
                return False
        return True

    def _deliver_contexts(self, *, bookkeeping: bool) -> None:
        sink = self.sink
        if sink is None:
            return
        contexts = self.contexts
        owners = self.context_owners
        while self.contexts_sent < len(contexts):
            i = self.contexts_sent
            self.contexts_sent = i + 1
            index = owners[i]
            try:
                sink.on_context(
                    ContextAccepted(
                        batch=self.number,
                        index=index,
                        call=self.calls[index],
                        message=contexts[i],
                    )
                )
            except BaseException as exc:
                if self._sink_error(exc, bookkeeping=bookkeeping) is not None:
                    raise

    # -- the batch timeout (scheduler.md §2.1) --------------------------------------------

    @trio.lowlevel.enable_ki_protection
    async def time_out(self, deadline: float) -> None:
        """Fire the batch Abort at ``deadline`` unless the driver has ended by then.

        KI-protected: a KeyboardInterrupt is delivered to an unprotected task instead, never
        to this one, whose only job is a sleep.
        """
        assert self.timer_scope is not None
        assert self.timeout is not None
        with self.timer_scope:
            await trio.sleep_until(deadline)
            self.abort.abort(f"batch timeout after {format(self.timeout, 'g')} s")
