"""The batch driver: the ordered half of the scheduler (scheduler.md §3, §4, §6–§8).

One :class:`Driver` per batch. Its :meth:`Driver.drive` task does everything ordered
(classification, create, ``on_call``, prepare, commits, synthetic pairs, contexts); one
dispatch task per call that reaches dispatch runs that call's dispatch stage. The
decisions (what may start, what may commit) live in ``_plan``; the context manager and the
exception rules of the block live in ``_batch``.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import TYPE_CHECKING, TypeAlias, final

import trio

from dsh_tools import AbortError, ExecutionMode, ToolCall, ToolDeniedError, error_result
from dsh_tools.lowlevel import (
    NeedsFinalize,
    NeedsFinish,
    ReadyToDispatch,
    cancelled_result,
    create,
    dispatch,
    dispatch_in_abort_scope,
    finalize,
    finish,
    finished_result,
    prepare,
)

from ._calls import parse_arguments
from ._outcome import BatchOutcome, CommittedCall
from ._plan import BatchPlan, GroupPlan
from ._sinks import CallCommitted, CallStarted, ContextAccepted

if TYPE_CHECKING:
    import collections
    from collections.abc import Awaitable

    from dsh_tools import (
        Abort,
        ExecutionToken,
        Scope,
        ToolExecution,
        ToolResult,
        ToolRuntime,
        UserMessage,
    )

    from ._calls import ModelToolCall
    from ._sinks import Sink

__all__ = ["HELD_LIMIT", "Driver", "is_cancellation", "leaves"]

#: With ``keep_results=False``, how many committed calls may wait for a running iteration
#: before the driver waits for it to read (decision 35).
HELD_LIMIT = 1024

_log = logging.getLogger("dsh_sched")

_Step = NeedsFinalize | NeedsFinish
if TYPE_CHECKING:
    _Group: TypeAlias = GroupPlan[ToolExecution, _Step]


class _Halt(Exception):
    """Internal: unwinds the driver after an internal failure was recorded elsewhere."""


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


def leaves(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    pending = [exc]
    while pending:
        current = pending.pop()
        if isinstance(current, BaseExceptionGroup):
            pending.extend(reversed(current.exceptions))
        else:
            out.append(current)
    return out


def is_cancellation(exc: BaseException) -> bool:
    """``Cancelled``, or a group holding ``Cancelled`` and no other non-``Exception``.

    The same rule as the runtime's (runtime.md §8.4): such a group is native cancellation
    arriving through a hook's own nursery.
    """
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, Exception) or not isinstance(exc, BaseExceptionGroup):
        return False
    found = leaves(exc)
    return all(isinstance(leaf, (Exception, trio.Cancelled)) for leaf in found) and any(
        isinstance(leaf, trio.Cancelled) for leaf in found
    )


@final
class _Waiter:
    """One parked task and a wake-up: cheaper than an Event per wait, no closure per park."""

    __slots__ = ("_task",)

    def __init__(self) -> None:
        self._task: trio.lowlevel.Task | None = None

    async def wait(self) -> None:
        self._task = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(self._abort)

    def _abort(self, raise_cancel: object) -> trio.lowlevel.Abort:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED

    def wake(self) -> None:
        task = self._task
        if task is not None:
            self._task = None
            trio.lowlevel.reschedule(task)


@final
class Driver:
    """All state of one running batch, and the tasks that advance it.

    :class:`~dsh_sched.Batch` owns the nursery and the block's exceptions; everything else
    (the plan, the executions, the collected results and contexts, the first internal
    failure, the first native exception, the iteration buffer) lives here.
    """

    __slots__ = (
        "abort",
        "calls",
        "concluded",
        "context_owners",
        "contexts",
        "contexts_sent",
        "done",
        "ended",
        "failure",
        "final",
        "group",
        "group_mode",
        "held",
        "host_waiter",
        "inner",
        "iter_waiter",
        "keep",
        "max_parallel",
        "native",
        "number",
        "nursery",
        "parent",
        "pending_call",
        "pending_index",
        "plan",
        "reader_waiter",
        "results",
        "root_call_id",
        "runtime",
        "scope",
        "sink",
        "timeout",
        "timer_scope",
        "waiter",
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
        self.runtime = runtime
        self.calls = calls
        self.number = number
        self.scope = scope
        self.abort = abort
        self.max_parallel = max_parallel
        self.sink = sink
        self.parent = parent
        self.root_call_id = root_call_id
        self.keep = keep_results
        self.timeout = timeout
        #: The timer's scope (see time_out), made here so that a driver that ends before
        #: the timer task first runs still stops it.
        self.timer_scope: trio.CancelScope | None = None if timeout is None else trio.CancelScope()
        self.plan = BatchPlan(len(calls))
        self.group: _Group | None = None
        self.group_mode: ExecutionMode | None = None
        self.pending_index = -1
        self.pending_call: ToolCall | None = None
        self.nursery: trio.Nursery | None = None
        #: The nursery of wrapper-free dispatch tasks, opened inside the batch Abort's
        #: move_on_abort() scope (see _host); None until the first parallel group.
        self.inner: trio.Nursery | None = None
        self.host_waiter: _Waiter | None = None
        #: The first internal failure (§8); later ones are logged at DEBUG.
        self.failure: Exception | None = None
        #: The first KeyboardInterrupt/SystemExit-like exception (§9).
        self.native: BaseException | None = None
        #: The driver completed (by finishing or by abort); ``final`` is the outcome.
        self.done = False
        self.final: BatchOutcome | None = None
        #: Nothing more will be delivered to the iterator.
        self.ended = False
        self.results: list[CommittedCall] = []
        #: With keep_results=False, what the running iteration has not read yet; ``None``
        #: while no iteration runs, so nothing is held then.
        self.held: collections.deque[CommittedCall] | None = None
        #: The driver, parked until the iteration reads (keep_results=False backpressure).
        self.reader_waiter = _Waiter()
        self.iter_waiter = _Waiter()
        self.waiter = _Waiter()
        self.contexts: list[UserMessage] = []
        self.context_owners: list[int] = []
        self.contexts_sent = 0
        self.concluded = False

    def end_iteration(self) -> None:
        """Nothing more will be committed: wake the iterator so it can stop."""
        self.ended = True
        self.iter_waiter.wake()

    async def drive(self) -> None:
        # No exception escapes this task except cancellation (§9a): an Exception is the
        # internal failure, anything else native cancellation of the batch.
        try:
            await self._run()
        except _Halt:
            pass
        except Exception as exc:
            self.fail(exc)
        except BaseException as exc:
            if is_cancellation(exc):
                raise
            self.interrupt(exc)
            return
        finally:
            # Whatever ended the driver, the host of the shared-scope nursery may go: it
            # leaves once its running dispatch tasks have. So may the timer: once the
            # driver has ended, the batch has nothing left to time out.
            self._close_host()
            if self.timer_scope is not None:
                self.timer_scope.cancel()
        # Completed, or stopped by an internal failure: either way the batch delivers
        # nothing more, so the iteration can end now.
        self.end_iteration()

    async def _run(self) -> None:
        # A cancel point on every path, also for a batch that never reaches the runtime
        # (no calls, or an abort already fired): a caller cancelled before the batch ran
        # gets the §7 bookkeeping (synthetic pairs) and its Cancelled.
        await trio.lowlevel.checkpoint_if_cancelled()
        plan = self.plan
        abort = self.abort
        runtime = self.runtime
        while plan.pending():
            if abort.aborted:
                break
            index = plan.next
            tool_call = self._tool_call(index)
            mode = runtime.execution_mode(tool_call)
            exclusive = mode is not ExecutionMode.PARALLEL
            group: _Group = GroupPlan(
                index,
                plan.group_size(exclusive=exclusive),
                parallel=not exclusive,
                max_parallel=self.max_parallel,
            )
            if self.host_waiter is None and group.overlaps():
                # Bodies will run side by side: from now on they share one abort scope.
                # Starting its host is a checkpoint, and a task woken there may change the
                # registry: classify the head again, so that a call always starts under
                # the mode it was classified as with no checkpoint in between (§4.2).
                assert self.nursery is not None
                await self.nursery.start(self._host)
                continue
            self.group = group
            self.group_mode = mode
            await self._run_group(group, mode)
            plan.advance(group.to_start)
            self.group = None
            if group.observed_abort:
                break
        while not self._synthesize(bookkeeping=False):
            await self._wait_for_reader()
        self._deliver_contexts(bookkeeping=False)
        self.final = BatchOutcome(
            results=tuple(self.results) if self.keep else (),
            additional_contexts=tuple(self.contexts),
            concludes_turn=self.concluded,
            aborted=abort.aborted,
            abort_reason=abort.reason,
        )
        self.done = True

    def _tool_call(self, index: int) -> ToolCall:
        """The call's ToolCall, built once: a reclassified call keeps its arguments object."""
        if self.pending_index == index and self.pending_call is not None:
            return self.pending_call
        call = self.calls[index]
        arguments = call.arguments
        tool_call = ToolCall(
            call_id=call.call_id,
            name=call.name,
            arguments=parse_arguments(arguments) if isinstance(arguments, str) else arguments,
            scope=self.scope,
            abort=self.abort,
            parent=self.parent,
            root_call_id=self.root_call_id,
        )
        self.pending_index = index
        self.pending_call = tool_call
        return tool_call

    async def _run_group(self, group: _Group, mode: ExecutionMode) -> None:
        await self._fill(group, mode)
        while group.running:
            await self.waiter.wait()
            if self.failure is not None:
                raise _Halt
            if group.ready() is not None:
                await self._commit_ready(group, mode)
            await self._fill(group, mode)
        await self._commit_ready(group, mode)
        if not group.done():
            # A dispatch task ended without a result: it was cancelled (the caller's
            # scope, or the nursery after a native exception). The commits above may not
            # have reached a checkpoint, so deliver the cancellation here; the bookkeeping
            # then finishes the hole and everything after it.
            await trio.lowlevel.checkpoint_if_cancelled()
            raise AssertionError("unreachable: a dispatch ended without a result")

    async def _fill(self, group: _Group, mode: ExecutionMode) -> None:
        abort = self.abort
        while group.can_start():
            # A cancelled batch starts nothing more: deliver the cancellation now rather
            # than at the next call's prepare. (A cancel point, not a schedule point.)
            await trio.lowlevel.checkpoint_if_cancelled()
            # The abort check precedes every start, including a group's first (§6).
            if abort.aborted:
                group.stop(abort=True)
                return
            index = group.next_index()
            tool_call = self._tool_call(index)
            if group.needs_reclassification() and (
                self.runtime.execution_mode(tool_call) is not ExecutionMode.PARALLEL
            ):
                # A barrier found by live reclassification: no more starts; the running
                # calls drain and commit, and the outer loop classifies it again (§4.3).
                group.stop()
                return
            # No checkpoint between that classification and create(): the mode a call
            # starts under is the mode it was classified as.
            await self._start(group, index, tool_call, mode)
            if group.ready() is not None:  # most starts leave nothing to commit yet
                await self._commit_ready(group, mode)

    @trio.lowlevel.enable_ki_protection
    def _begin(
        self, group: _Group, index: int, tool_call: ToolCall, mode: ExecutionMode
    ) -> tuple[ToolExecution, int]:
        # create(), the plan's record and on_call as one step: a KeyboardInterrupt cannot
        # land between them, so a started call always has its on_call (§4.2 step 2).
        execution = create(self.runtime, tool_call)
        gi = group.started(execution)
        # The call is started: from here on it gets its result from the runtime or from
        # the cancellation bookkeeping, never a synthetic pair.
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
        return execution, gi

    async def _start(
        self, group: _Group, index: int, tool_call: ToolCall, mode: ExecutionMode
    ) -> None:
        execution, gi = self._begin(group, index, tool_call, mode)
        scope = self.scope
        if scope is not None and scope.closed:
            # Fail closed (decision 34): the scope's restrictions and guards are gone with
            # it, so nothing may run on its behalf any more.
            group.store(gi, NeedsFinish(execution, _scope_closed_result(scope)))
            return
        step = await prepare(execution)
        # A failure recorded while prepare was awaited leaves this call undispatched
        # (scheduler.md §13 example 5).
        if self.failure is not None:
            raise _Halt
        if isinstance(step, ReadyToDispatch):
            group.dispatching()
            # start_soon copies the driver's context now, after this call's prepare (§3).
            inner = self.inner
            if inner is not None and (shared := dispatch_in_abort_scope(step)) is not None:
                inner.start_soon(self._dispatch, group, gi, shared, name="dsh_sched.dispatch")
            else:
                assert self.nursery is not None
                self.nursery.start_soon(
                    self._dispatch, group, gi, dispatch(step), name="dsh_sched.dispatch"
                )
        else:
            group.store(gi, step)

    async def _dispatch(
        self, group: _Group, gi: int, stage: Awaitable[_Step | ReadyToDispatch]
    ) -> None:
        result: _Step | None = None
        try:
            outcome = await stage
            if type(outcome) is ReadyToDispatch:
                # A wrapper was registered before this task ran (its stage 2 start): the
                # call leaves the shared scope and is dispatched with its own scope, still
                # running as far as the group is concerned. The new task starts with this
                # task's context: the driver's after prepare.
                assert self.nursery is not None
                self.nursery.start_soon(
                    self._dispatch, group, gi, dispatch(outcome), name="dsh_sched.dispatch"
                )
                return
            result = outcome
        except Exception as exc:
            self.fail(exc)
        except BaseException as exc:
            if is_cancellation(exc):
                # The slot stays empty: the bookkeeping asks the runtime for the
                # cancelled result of this execution.
                group.dispatched(gi, None)
                self.waiter.wake()
                raise
            self.interrupt(exc)
        group.dispatched(gi, result)
        self.waiter.wake()

    async def _commit_ready(self, group: _Group, mode: ExecutionMode) -> None:
        # Head of line: only the first uncommitted call may commit; a fast later call's
        # result waits behind a slow earlier one.
        while (step := group.ready()) is not None:
            if isinstance(step, NeedsFinalize):
                try:
                    result = await finalize(step)
                except BaseException as exc:
                    self._commit_interrupted(group, mode, step, exc)
                    raise
                # A finalize that completed after a failure was recorded is not recorded.
                if self.failure is not None:
                    raise _Halt
                self._commit(group, mode, result)
            else:
                self._finish_and_commit(group, mode, step)
            if self.held is not None and len(self.held) >= HELD_LIMIT:
                await self._wait_for_reader()

    async def _wait_for_reader(self) -> None:
        """Backpressure (decision 35): with ``keep_results=False`` and an iteration running,
        at most :data:`HELD_LIMIT` committed calls wait for the reader; the driver parks
        until it has read (or stopped iterating), so a long batch holds bounded memory."""
        while (held := self.held) is not None and len(held) >= HELD_LIMIT:
            await self.reader_waiter.wait()
            if self.failure is not None:
                raise _Halt

    @trio.lowlevel.enable_ki_protection
    def _finish_and_commit(self, group: _Group, mode: ExecutionMode, step: NeedsFinish) -> None:
        try:
            result = finish(step.execution, step.result)
        except BaseException as exc:
            self._commit_interrupted(group, mode, step, exc)
            raise
        self._commit(group, mode, result)

    def _commit_interrupted(
        self, group: _Group, mode: ExecutionMode, step: _Step, exc: BaseException
    ) -> None:
        """A finalizer or a result observer raised ``exc``, a ``KeyboardInterrupt`` say, out of
        stage 4: the call is finished all the same, so commit the result it was finished
        with before ``exc`` goes on (an ``Exception`` is an internal failure: nothing more
        is committed, §8)."""
        if isinstance(exc, Exception):
            return
        result = finished_result(step.execution)
        if result is not None:
            self._commit(group, mode, result)

    @trio.lowlevel.enable_ki_protection
    def _commit(self, group: _Group, mode: ExecutionMode, result: ToolResult) -> None:
        # KI-protected so a KeyboardInterrupt cannot split a commit (finish, on_result,
        # delivery); the cursor moves first, so the bookkeeping never finishes it twice.
        index = group.commit_index()
        group.committed()
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
                if not isinstance(exc, Exception):
                    # Native cancellation from the sink: the call has had its one
                    # on_result, so complete its commit before propagating.
                    self._accept(index, call, result, mode, False)
                raise
        self._accept(index, call, result, mode, False)

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
            self.results.append(
                CommittedCall(index=index, call=call, result=result, synthetic=synthetic, mode=mode)
            )
            self.iter_waiter.wake()
        elif self.held is not None:
            self.held.append(
                CommittedCall(index=index, call=call, result=result, synthetic=synthetic, mode=mode)
            )
            self.iter_waiter.wake()

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
            self.note_native(exc)
            return None
        return exc

    def _synthesize(self, *, bookkeeping: bool) -> bool:
        """Record a synthetic pair for every call not started (§6 step 4).

        Returns ``False`` when it stopped early for the reader (see
        :meth:`_wait_for_reader`; never during the bookkeeping, which must not await).
        """
        plan = self.plan
        sink = self.sink
        # One object for every synthetic pair of this batch: the reason cannot change.
        result = _synthetic_result(self.abort.reason)
        number = self.number
        while (index := plan.take_unstarted()) is not None:
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

    @trio.lowlevel.enable_ki_protection
    def bookkeep(self) -> None:
        """Cancellation bookkeeping (§7): synchronous, so no shield is needed."""
        group = self.group
        if group is not None:
            mode = self.group_mode
            sink = self.sink
            for index, execution, step in group.uncommitted():
                group.committed()
                call = self.calls[index]
                try:
                    # Finished already when stage 4 itself was interrupted: keep that result.
                    result = finished_result(execution) or finish(
                        execution,
                        cancelled_result(execution, None if step is None else step.result),
                    )
                except Exception as exc:
                    # A runtime bug; the call is left without a result rather than faked.
                    _log.error("could not finish a cancelled call", exc_info=exc)
                    continue
                if sink is not None:
                    try:
                        sink.on_result(
                            CallCommitted(
                                batch=self.number,
                                index=index,
                                call=call,
                                result=result,
                                synthetic=False,
                            )
                        )
                    except BaseException as exc:
                        self._sink_error(exc, bookkeeping=True)
                self._accept(index, call, result, mode, False)
            self.plan.advance(group.to_start)
            self.group = None
        self._synthesize(bookkeeping=True)
        self._deliver_contexts(bookkeeping=True)

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

    # -- the shared abort scope (runtime.md §7.4's equivalent mechanism) -------------------

    async def _host(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold a nursery open inside the batch Abort's scope for wrapper-free dispatches.

        Firing the Abort cancels that one scope, and with it every body running in the
        nursery: no per-call cancel scope to create, enter, register and exit.
        """
        waiter = self.host_waiter = _Waiter()
        with self.abort.move_on_abort():
            async with trio.open_nursery() as inner:
                self.inner = inner
                task_status.started()
                try:
                    await waiter.wait()
                finally:
                    self.inner = None

    def _close_host(self) -> None:
        waiter = self.host_waiter
        if waiter is not None:
            waiter.wake()

    # -- failures -------------------------------------------------------------------------

    def fail(self, exc: Exception) -> None:
        """Record an internal failure (§8): the first is kept, later ones ignored."""
        if self.failure is None:
            self.failure = exc
            self.waiter.wake()
        else:
            _log.debug("ignoring a later internal failure", exc_info=exc)

    def note_native(self, exc: BaseException) -> None:
        if self.native is None:
            self.native = exc
        else:
            _log.error("ignoring %r after an earlier %r", exc, self.native)

    def interrupt(self, exc: BaseException) -> None:
        """A KeyboardInterrupt / SystemExit escaped a task: cancel the batch natively (§9)."""
        first = self.native is None
        self.note_native(exc)
        if first and self.nursery is not None:
            self.nursery.cancel_scope.cancel()
