"""The lane: one ordered pool of calls driven through the stage contract.

A lane starts the calls of a queue in order, one at a time, in one driver task; runs the
dispatch stages of parallel-safe calls side by side in a bounded rolling pool and every other
call alone as a barrier; and commits results in queue order, head of line (scheduler.md §3,
§4; code-mode §5.3, §5.4). It exists once and serves every client: ``dsh_sched``'s model
batches (a queue fixed up front) and Code Mode's sub-calls (a queue that grows while a
program runs). What a client adds (where calls come from, events, what happens to calls
never started, the outcome) goes through :class:`LaneClient`.

The decisions are plain data in ``_lane_plan``; this module owns the awaits. Its tasks are
KI-protected: trio delivers a ``KeyboardInterrupt`` arriving in them to the main task at its
next checkpoint, which then cancels the lane natively (decision 37).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypeAlias, final

import trio

from ._code_present import classify_call
from ._definition import ExecutionMode
from ._lane_client import LaneClient, LaneStatistics, _drop, _Halt, _Waiter
from ._lane_plan import GroupPlan, QueuePlan
from ._lane_workers import BURST, SPAWNS, Workers, start_host
from ._pipeline import (
    NeedsFinalize,
    NeedsFinish,
    ReadyToDispatch,
    cancelled_result,
    create,
    dispatch,
    dispatch_in_abort_scope,
    finalize,
    finalize_now,
    finish,
    finished_result,
    is_cancellation,
    prepare,
    prepare_now,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from ._abort import Abort
    from ._calls import ToolCall, ToolExecution
    from ._results import ToolResult
    from ._runtime import ToolRuntime

__all__ = ["Lane", "LaneClient", "LaneStatistics"]


_log = logging.getLogger("dsh_tools")

_Step: TypeAlias = NeedsFinalize | NeedsFinish
if TYPE_CHECKING:
    _Group: TypeAlias = GroupPlan[ToolExecution, _Step]


@final
class Lane:
    """One ordered pool of calls (see the module docstring); driven by :meth:`run`.

    Args:
        runtime: The runtime that executes the calls.
        client: Where calls come from and where results go.
        abort: The ``Abort`` every call shares; once it fires nothing more starts.
        max_parallel: The most dispatch stages of one parallel group running at once.
        calls: How many calls the queue holds; with ``open_queue=True``, how many so far.
        open_queue: The queue grows with :meth:`extend` until :meth:`close`.

    Set :attr:`nursery` before :meth:`run`: the lane starts its dispatch tasks (and the
    host of its shared abort scope) there.
    """

    __slots__ = (
        "abort",
        "client",
        "failure",
        "group",
        "group_mode",
        "host_waiter",
        "max_parallel",
        "native",
        "nursery",
        "plan",
        "runtime",
        "taken",
        "waiter",
        "workers",
    )

    def __init__(
        self,
        runtime: ToolRuntime,
        client: LaneClient,
        *,
        abort: Abort,
        max_parallel: int,
        calls: int = 0,
        open_queue: bool = False,
    ) -> None:
        self.runtime = runtime
        self.client = client
        self.abort = abort
        self.max_parallel = max_parallel
        self.plan = QueuePlan(calls, closed=not open_queue)
        self.group: _Group | None = None
        self.group_mode: ExecutionMode | None = None
        self.nursery: trio.Nursery | None = None
        #: The workers of wrapper-free dispatch stages, in a nursery inside the Abort's
        #: move_on_abort() scope (see host_workers); None until the first overlapping group.
        self.workers: Workers | None = None
        self.host_waiter: _Waiter | None = None
        #: The first internal failure (scheduler.md §8); later ones are logged at DEBUG.
        self.failure: Exception | None = None
        #: The first KeyboardInterrupt/SystemExit-like exception (scheduler.md §9).
        self.native: BaseException | None = None
        self.waiter = _Waiter()
        #: Calls claimed through take_unstarted (never started): the plan's cursor moved past
        #: them, so the statistics subtract them.
        self.taken = 0

    # -- the queue ------------------------------------------------------------------------

    def extend(self, count: int = 1) -> None:
        """Append ``count`` calls to an open queue (the client supplies each one's ``ToolCall``)."""
        plan = self.plan
        end = plan.n
        plan.extend(count)
        group = self.group
        if group is not None and group.parallel and group.start + group.size == end:
            group.grow(count)
        self.waiter.wake()

    def close(self) -> None:
        """No call joins an open queue any more: :meth:`run` returns once it is drained."""
        self.plan.close()
        self.waiter.wake()

    def take_unstarted(self) -> int | None:
        """Claim the next call the lane never started (after :meth:`run`, or in the
        bookkeeping); ``None`` when none is left."""
        index = self.plan.take_unstarted()
        if index is not None:
            self.taken += 1
        return index

    def statistics(self) -> LaneStatistics:
        """A frozen snapshot of the lane's counters (derived from the plan: nothing is
        counted per call for it)."""
        group = self.group
        # Every call before the plan's cursor was started and committed in an earlier group,
        # or claimed by take_unstarted.
        done = self.plan.next - self.taken
        return LaneStatistics(
            calls=self.plan.n,
            started=done + (0 if group is None else group.to_start),
            running=0 if group is None else group.running,
            committed=done + (0 if group is None else group.to_commit),
            group_mode=self.group_mode if group is not None else None,
            aborted=self.abort.aborted,
        )

    # -- the ordered loop (scheduler.md §4.1) ---------------------------------------------

    @trio.lowlevel.enable_ki_protection
    async def run(self) -> bool:
        """Drive the queue until it is drained (and closed) or the ``Abort`` stops it.

        Returns ``True`` when the ordered loop ended (every started call committed; calls
        never started are the client's, through :meth:`take_unstarted`), ``False`` when
        an internal failure or a ``KeyboardInterrupt``-like exception stopped it (see
        :attr:`failure`, :attr:`native`). Only cancellation propagates.
        """
        try:
            await self._run()
        except _Halt:
            return False
        except Exception as exc:
            self.fail(exc)
            return False
        except BaseException as exc:
            if is_cancellation(exc):
                raise
            self.interrupt(exc)
            return False
        finally:
            # However the loop ended, the host of the shared-scope nursery may go: it leaves
            # once its running dispatch tasks have.
            self.close_host()
        return True

    async def _run(self) -> None:
        # A cancel point on every path, also for a lane that never reaches the runtime (no
        # calls, or an abort already fired): a caller cancelled before the lane ran gets
        # the bookkeeping and its Cancelled.
        await trio.lowlevel.checkpoint_if_cancelled()
        plan = self.plan
        abort = self.abort
        registry = self.runtime._registry
        client = self.client
        while True:
            if not plan.pending():
                if plan.closed:
                    return
                await self.waiter.wait()  # an open queue: wait for a call or the close
                continue
            if abort._aborted:
                return
            index = plan.next
            tool_call = client.call_at(index)
            mode = classify_call(registry, tool_call)
            exclusive = mode is not ExecutionMode.PARALLEL
            group: _Group = GroupPlan(
                index,
                plan.group_size(exclusive=exclusive),
                parallel=not exclusive,
                max_parallel=self.max_parallel,
            )
            if self.host_waiter is None and group.overlaps():
                # Bodies will run side by side: from now on they share one abort scope.
                assert self.nursery is not None
                start_host(self, self.nursery)
            self.group = group
            self.group_mode = mode
            await self._run_group(group, mode)
            plan.advance(group.to_start)
            self.group = None
            if group.observed_abort:
                return

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
        abort, registry = self.abort, self.runtime._registry
        while group.can_start():
            # A cancelled lane starts nothing more: deliver the cancellation now rather
            # than at the next call's prepare. (A cancel point, not a schedule point.)
            await trio.lowlevel.checkpoint_if_cancelled()
            # The abort check precedes every start, including a group's first (§6).
            if abort._aborted:
                group.stop(abort=True)
                return
            index = group.next_index()
            tool_call = self.client.call_at(index)
            if group.needs_reclassification() and (
                classify_call(registry, tool_call) is not ExecutionMode.PARALLEL
            ):
                # A barrier found by live reclassification: no more starts; the running
                # calls drain and commit, and the outer loop classifies it again (§4.3).
                group.stop()
                return
            # No checkpoint between that classification and create(): the mode a call
            # starts under is the mode it was classified as.
            execution, gi, refusal = self._begin(group, index, tool_call, mode)
            if refusal is not None:
                group.store(gi, NeedsFinish(execution, refusal))
            else:
                # Stage 1 without a coroutine when it has nothing to run: the cancel
                # point above is its caller's cancel point (decision 115).
                step = prepare_now(execution) or await prepare(execution)
                # A failure recorded while prepare was awaited leaves this call
                # undispatched (scheduler.md §13 example 5).
                if self.failure is not None:
                    raise _Halt
                self._launch(group, gi, step)
            if group.ready() is not None:  # most starts leave nothing to commit yet
                await self._commit_ready(group, mode)
            if (workers := self.workers) is None:
                continue
            if len(workers.jobs) >= BURST:  # let the workers run the queue (decision 110)
                return
            if workers.fresh >= SPAWNS:  # let the new tasks start waiting (decision 113)
                while workers.fresh:
                    await self.waiter.wait()
                if self.failure is not None:
                    raise _Halt

    # -- starting (scheduler.md §4.2) ------------------------------------------------------

    @trio.lowlevel.enable_ki_protection
    def _begin(
        self, group: _Group, index: int, tool_call: ToolCall, mode: ExecutionMode
    ) -> tuple[ToolExecution, int, ToolResult | None]:
        # create(), the plan's record and the client's start event as one step: a
        # KeyboardInterrupt cannot land between them, so a started call is always known.
        execution = create(self.runtime, tool_call)
        gi = group.started(execution)
        # The call is started: from here on it gets its result from the runtime or from
        # the cancellation bookkeeping, never from the client.
        refusal = self.client.on_start(index, execution, mode)
        return execution, gi, refusal

    def _launch(
        self, group: _Group, gi: int, step: ReadyToDispatch | NeedsFinalize | NeedsFinish
    ) -> None:
        """Start the dispatch stage of a prepared call, or keep what prepare ended it with."""
        if not isinstance(step, ReadyToDispatch):
            group.store(gi, step)
            return
        group.dispatching()
        # The stage runs in a copy of the driver's context taken now, after its prepare (§3).
        workers = self.workers
        if workers is not None and (shared := dispatch_in_abort_scope(step)) is not None:
            workers.run(step.execution.name, self._dispatch, group, gi, shared)
            return
        assert self.nursery is not None  # a wrapper applies, or no call runs beside it
        if workers is not None:
            workers.spawn(self.nursery, self._dispatch, group, gi, dispatch(step))
        else:
            self.nursery.start_soon(
                self._dispatch, group, gi, dispatch(step), name="dsh_tools.dispatch"
            )

    @trio.lowlevel.enable_ki_protection
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
                    self._dispatch, group, gi, dispatch(outcome), name="dsh_tools.dispatch"
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

    # -- committing (scheduler.md §4.2) ----------------------------------------------------

    async def _commit_ready(self, group: _Group, mode: ExecutionMode) -> None:
        # Head of line: only the first uncommitted call may commit; a fast later call's
        # result waits behind a slow earlier one.
        while (step := group.ready()) is not None:
            if isinstance(step, NeedsFinalize):
                try:
                    result = finalize_now(step) or await finalize(step)
                except BaseException as exc:
                    self._commit_interrupted(group, mode, step, exc)
                    raise
                # A finalize that completed after a failure was recorded is not recorded.
                if self.failure is not None:
                    raise _Halt
                pause = self._commit(group, mode, result)
            else:
                pause = self._finish_and_commit(group, mode, step)
            if pause is not None:
                await pause
                if self.failure is not None:
                    raise _Halt

    @trio.lowlevel.enable_ki_protection
    def _finish_and_commit(
        self, group: _Group, mode: ExecutionMode, step: NeedsFinish
    ) -> Awaitable[None] | None:
        try:
            result = finish(step.execution, step.result)
        except BaseException as exc:
            self._commit_interrupted(group, mode, step, exc)
            raise
        return self._commit(group, mode, result)

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
            _drop(self._commit(group, mode, result))  # the exception goes on: no wait

    @trio.lowlevel.enable_ki_protection
    def _commit(
        self, group: _Group, mode: ExecutionMode, result: ToolResult
    ) -> Awaitable[None] | None:
        # KI-protected so a KeyboardInterrupt cannot split a commit; the cursor moves first,
        # so the bookkeeping never finishes it twice.
        index = group.commit_index()
        group.committed()
        return self.client.on_commit(index, result, mode)

    # -- cancellation bookkeeping (scheduler.md §7) ---------------------------------------

    @trio.lowlevel.enable_ki_protection
    def bookkeep(self) -> None:
        """Give every started, uncommitted call its cancellation result, in queue order.

        Synchronous (no shield needed): call it once the lane's tasks have ended, after a
        cancellation or a ``KeyboardInterrupt``. An ``Exception`` from the client is logged
        and the bookkeeping goes on; anything else is noted in :attr:`native`.
        """
        group = self.group
        if group is None:
            return
        mode = self.group_mode
        client = self.client
        for index, execution, step in group.uncommitted():
            group.committed()
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
            except BaseException as exc:
                # A finalizer or an observer raised a KeyboardInterrupt-like exception out of
                # stage 4: the call is finished all the same (decision 38); record it, and
                # let the batch's owner raise the exception once the bookkeeping is done.
                self.note_native(exc)
                finished = finished_result(execution)
                if finished is None:  # pragma: no cover - stage 4 records before user code
                    continue
                result = finished
            try:
                _drop(client.on_commit(index, result, mode))  # the bookkeeping never waits
            except Exception as exc:
                _log.error("recording a cancelled call failed", exc_info=exc)
            except BaseException as exc:
                self.note_native(exc)
        self.plan.advance(group.to_start)
        self.group = None

    # -- the shared abort scope (runtime.md §7.4's equivalent mechanism) -------------------

    def close_host(self) -> None:
        """Let the shared-scope host leave (once its running dispatch tasks have); one that
        has not run yet (a group ended with no wait) leaves without waiting."""
        if (workers := self.workers) is not None:
            workers.closed = True
        if (waiter := self.host_waiter) is not None:
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
        """Record a ``KeyboardInterrupt``-like exception; the first one is kept."""
        if self.native is None:
            self.native = exc
        else:
            _log.error("ignoring %r after an earlier %r", exc, self.native)

    def interrupt(self, exc: BaseException) -> None:
        """A KeyboardInterrupt / SystemExit escaped a task: cancel the lane natively (§9)."""
        first = self.native is None
        self.note_native(exc)
        if first and self.nursery is not None:
            self.nursery.cancel_scope.cancel()
