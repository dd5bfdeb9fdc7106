"""``open_batch`` / ``Batch`` / ``run_tool_calls``: the public face of the scheduler.

``Batch`` is a class with ``__aenter__``/``__aexit__`` (scheduler.md §9a is normative: not an
``@asynccontextmanager``). It owns the nursery and decides which single exception leaves the
block; the ordered work happens in the lane (``dsh_tools.lowlevel.Lane``), driven for a
model batch by ``_driver.Driver``.
"""

from __future__ import annotations

import collections
import itertools
import logging
import weakref
from typing import TYPE_CHECKING, final

import trio

from dsh_tools import Abort, ExecutionToken, Scope, ToolRuntime
from dsh_tools.lowlevel import is_cancellation, split_cancelled

from ._batch_args import validate
from ._batch_iter import BatchIterator
from ._driver import Driver

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

    from ._calls import ModelToolCall
    from ._outcome import BatchOutcome, BatchStatistics, CommittedCall
    from ._sinks import Sink

__all__ = ["DEFAULT_MAX_PARALLEL", "Batch", "open_batch", "run_tool_calls"]

#: The default bound on a parallel group's running dispatch stages.
DEFAULT_MAX_PARALLEL = 10

_log = logging.getLogger("dsh_sched")

# Process-unique batch numbers (scheduler.md §5): they only group one process run's events.
_batch_numbers = itertools.count(1)


def open_batch(
    runtime: ToolRuntime,
    calls: Iterable[ModelToolCall],
    *,
    scope: Scope | None = None,
    abort: Abort | None = None,
    max_parallel: int = DEFAULT_MAX_PARALLEL,
    sink: Sink | None = None,
    parent: ExecutionToken | None = None,
    root_call_id: str | None = None,
    keep_results: bool = True,
    timeout: float | None = None,
) -> Batch:
    """Prepare a batch of the model's tool calls; ``async with`` runs it.

    Entering opens the batch's nursery and starts the driver; leaving waits for the batch
    to finish and sets :attr:`Batch.outcome`. Iterate the batch inside the block to get
    each :class:`CommittedCall` as it is committed. The arguments are validated now,
    before anything is entered (scheduler.md §2.1).

    Args:
        runtime: The runtime that executes the calls.
        calls: The calls of one assistant message, in model order (materialized once).
        scope: The scope every call runs in (``None``: the global view).
        abort: The batch ``Abort``, shared by every call; a fresh one if ``None``.
        max_parallel: The most dispatch stages of one parallel group running at once.
        sink: Receives ``on_call`` / ``on_result`` / ``on_context`` events.
        parent: Passed to every call's ``ToolCall.parent`` (a composite tool's token).
        root_call_id: Passed to every call's ``ToolCall.root_call_id``.
        keep_results: ``False`` keeps no :class:`CommittedCall` in the outcome.
        timeout: Seconds (trio's clock, from entering the batch) after which the batch
            ``Abort`` fires with the reason ``"batch timeout after <timeout> s"`` if calls
            are still uncommitted. Every call still gets its result and the batch its
            outcome; prefer it to ``trio.move_on_after``, which cancels the batch natively
            and leaves no outcome.

    Returns:
        The :class:`Batch`, an async context manager.

    Raises:
        TypeError: An argument has the wrong type (for example ``timeout=True``).
        ValueError: ``max_parallel < 1``, ``scope`` belongs to another runtime, or
            ``timeout`` is not a finite number above zero.

    Example:
        >>> async def turn(runtime, calls):  # doctest: +SKIP
        ...     async with open_batch(runtime, calls) as batch:
        ...         async for committed in batch:
        ...             print(committed.index, committed.result.is_error)
        ...     return batch.outcome
    """
    materialized = validate(
        runtime,
        calls,
        scope,
        abort,
        max_parallel,
        sink,
        parent,
        root_call_id,
        keep_results,
        timeout,
    )
    driver = Driver(
        runtime,
        materialized,
        number=next(_batch_numbers),
        scope=scope,
        abort=abort if abort is not None else Abort(),
        max_parallel=max_parallel,
        sink=sink,
        parent=parent,
        root_call_id=root_call_id,
        keep_results=keep_results,
        timeout=timeout,
    )
    return Batch._create(driver)


@trio.lowlevel.enable_ki_protection
async def run_tool_calls(
    runtime: ToolRuntime,
    calls: Iterable[ModelToolCall],
    *,
    scope: Scope | None = None,
    abort: Abort | None = None,
    max_parallel: int = DEFAULT_MAX_PARALLEL,
    sink: Sink | None = None,
    parent: ExecutionToken | None = None,
    root_call_id: str | None = None,
    keep_results: bool = True,
    # The specification's name (scheduler.md §2): unlike trio.fail_after around the call,
    # it aborts the batch, so every call still gets its result and the batch its outcome.
    timeout: float | None = None,  # noqa: ASYNC109
) -> BatchOutcome:
    """Run a batch of the model's tool calls and return its outcome.

    Parallel-safe calls run in a bounded rolling pool, every other call runs alone, and
    exactly one result per call is committed in model order. Exactly
    ``async with open_batch(...) as b: pass`` followed by ``return b.outcome``.

    Args:
        runtime: The runtime that executes the calls.
        calls: The calls, in model order.
        scope: See :func:`open_batch`.
        abort: See :func:`open_batch`.
        max_parallel: See :func:`open_batch`.
        sink: See :func:`open_batch`.
        parent: See :func:`open_batch`.
        root_call_id: See :func:`open_batch`.
        keep_results: See :func:`open_batch`.
        timeout: See :func:`open_batch`: bounds the turn, keeping finished work and
            giving every call a result whose text names the timeout.

    Returns:
        The :class:`BatchOutcome`.

    Raises:
        TypeError: Invalid arguments (scheduler.md §2.1).
        ValueError: Invalid arguments (scheduler.md §2.1).
        Exception: The first internal failure (a sink or a ``lowlevel`` stage raised),
            re-raised alone (scheduler.md §8).

    Example:
        >>> outcome = await run_tool_calls(runtime, calls, timeout=30)  # doctest: +SKIP
        >>> outcome.aborted, outcome.abort_reason  # doctest: +SKIP
        (True, 'batch timeout after 30 s')
    """
    batch = open_batch(
        runtime,
        calls,
        scope=scope,
        abort=abort,
        max_parallel=max_parallel,
        sink=sink,
        parent=parent,
        root_call_id=root_call_id,
        keep_results=keep_results,
        timeout=timeout,
    )
    async with batch:
        pass
    outcome = batch.outcome
    if outcome is None:  # pragma: no cover - every path without an outcome raises
        raise AssertionError("unreachable: a batch ended without an outcome or an exception")
    return outcome


@final
class Batch:
    """A running batch of tool calls; created by :func:`open_batch`, used with ``async with``.

    Attributes:
        abort: The batch's ``Abort`` (the one given, or a fresh one). Firing it stops new
            starts, drains started calls and gives the rest synthetic results.
        outcome: The :class:`BatchOutcome` once the batch has finished; stays ``None`` after
            an internal failure, a cancellation or a ``KeyboardInterrupt``/``SystemExit``.
    """

    __slots__ = ("_driver", "_entered", "_iter_ref", "_nursery_cm", "abort", "outcome")

    abort: Abort
    outcome: BatchOutcome | None
    _driver: Driver
    _entered: bool
    _nursery_cm: AbstractAsyncContextManager[trio.Nursery] | None
    _iter_ref: weakref.ref[BatchIterator] | None

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError("Batch has no public constructor; use open_batch(...)")

    @classmethod
    def _create(cls, driver: Driver) -> Batch:
        self = object.__new__(cls)
        self._driver = driver
        self.abort = driver.abort
        self.outcome = None
        self._entered = False
        self._nursery_cm = None
        self._iter_ref = None
        return self

    def __repr__(self) -> str:
        return f"<Batch #{self._driver.number} of {len(self._driver.calls)} calls>"

    # -- the context manager (scheduler.md §9, §9a) ---------------------------------------

    @trio.lowlevel.enable_ki_protection
    async def __aenter__(self) -> Batch:
        if self._entered:
            raise RuntimeError("a batch can be entered only once")
        self._entered = True
        # Held as a manager object, not through @asynccontextmanager: __aexit__ must never
        # hand the block's exception to the nursery (§9a), and an async generator holding a
        # nursery open across ``yield`` would do exactly that.
        nursery_cm = trio.open_nursery()
        nursery = await nursery_cm.__aenter__()
        self._nursery_cm = nursery_cm
        self._driver.nursery = nursery
        driver = self._driver
        nursery.start_soon(driver.drive, name="dsh_sched.driver")
        if driver.timeout is not None:
            # The deadline counts from entering the batch (scheduler.md §2.1).
            nursery.start_soon(
                driver.time_out, trio.current_time() + driver.timeout, name="dsh_sched.timeout"
            )
        return self

    @trio.lowlevel.enable_ki_protection
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        driver = self._driver
        nursery = driver.nursery
        assert nursery is not None
        assert self._nursery_cm is not None
        # Whichever of the block's exception and an internal failure came first is raised,
        # the other logged (§9): what has been recorded so far is "first".
        failure_before_block = driver.failure
        native_before_block = driver.native
        block_native: BaseException | None = None
        block_cancelled = False
        if exc is None:
            pass
        elif isinstance(exc, Exception):
            # Abort, don't cancel: started calls drain and commit, the rest are synthetic.
            self.abort.abort(exc)
        elif is_cancellation(exc):
            # The enclosing scope was cancelled (or we cancelled the nursery after a
            # KeyboardInterrupt in a task): the tasks see the same cancellation.
            block_cancelled = True
        else:
            # KeyboardInterrupt / SystemExit from the block: native cancellation of the
            # batch, so bodies and hooks get Cancelled and drain; the Abort is not fired.
            block_native = exc
            nursery.cancel_scope.cancel()

        # The block's exception is never handed to the nursery (§9a): trio would cancel
        # every task natively and wrap what escapes in a group.
        cancelled: trio.Cancelled | None = None
        try:
            await self._nursery_cm.__aexit__(None, None, None)
        except BaseException as nursery_exc:
            # The batch's tasks let nothing but cancellation escape, but trio may add a
            # KeyboardInterrupt delivered to the task waiting in the nursery's exit.
            cancelled = split_cancelled(nursery_exc, driver.note_native)

        if not driver.done and driver.failure is None:
            # The driver was cut short by cancellation (the caller's, or ours after a
            # native exception): one result per call, synchronously, no shield needed (§7).
            driver.bookkeep()
        driver.end_iteration()
        # Read after the bookkeeping: a finalizer or an observer may raise a
        # KeyboardInterrupt-like exception while it finishes a call (decision 38).
        native = native_before_block or block_native or driver.native

        failure = driver.failure
        if native is not None:
            if failure is not None:
                _log.error("internal failure superseded by %r", native, exc_info=failure)
            if native is exc:
                return False
            if block_native is not None:
                _log.error("%r from the block superseded by %r", block_native, native)
            raise native
        if isinstance(exc, Exception):
            if failure is not None:
                if failure_before_block is not None:
                    _log.error("exception of the batch block superseded", exc_info=exc)
                    raise failure
                _log.error("internal failure after the block raised", exc_info=failure)
            else:
                # The abort bookkeeping ran to completion: the batch has its outcome.
                self.outcome = driver.final
            return False
        if failure is not None:
            # Raised alone, as the original object; a pending cancellation is delivered
            # again at the caller's next checkpoint.
            raise failure
        if block_cancelled:
            # The block's own Cancelled (or its own group of them) propagates as it is.
            return False
        if cancelled is not None:
            # One bare Cancelled, so the owning scope sees the cancellation alone.
            raise cancelled from None
        self.outcome = driver.final
        return False

    def statistics(self) -> BatchStatistics:
        """A frozen snapshot of the batch's counters: calls, started, running, committed,
        synthetic, the current group's mode and whether it was aborted.

        Cheap, and valid at any time, before entering, while it runs and after it ended.

        Example:
            >>> async def watch(batch):  # doctest: +SKIP
            ...     stats = batch.statistics()
            ...     print(f"{stats.committed}/{stats.calls} done, {stats.running} running")
        """
        return self._driver.statistics()

    # -- iteration (scheduler.md §9) ------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[CommittedCall]:
        """Iterate the committed calls in model order, as they are committed.

        Single consumer: while an iteration runs (its iterator is alive and not exhausted),
        another raises ``RuntimeError("batch is already being iterated")``. With
        ``keep_results=True`` an iteration starts from the first committed call; with
        ``keep_results=False`` from the next one committed.

        Raises:
            RuntimeError: Another iteration is running, or the batch was not entered.
        """
        if not self._entered:
            raise RuntimeError("enter the batch with 'async with open_batch(...)' first")
        ref = self._iter_ref
        if ref is not None and ref() is not None:
            raise RuntimeError("batch is already being iterated")
        iterator = BatchIterator(self._driver, self)
        self._iter_ref = weakref.ref(iterator, self._iterator_gone)
        if not self._driver.keep:
            self._driver.held = collections.deque()
        return iterator

    def _release(self, iterator: BatchIterator) -> None:
        # Only the claiming iterator can be open (a second one is refused while it is
        # alive), so the iterator closing now is the one holding the claim.
        self._iter_ref = None
        self._driver.held = None
        self._driver.wake_driver()

    def _iterator_gone(self, ref: weakref.ref[BatchIterator]) -> None:
        # A consumer that broke out of ``async for`` dropped its iterator: the iteration
        # is over, and with keep_results=False nothing is held for it any more.
        if self._iter_ref is ref:
            self._iter_ref = None
            self._driver.held = None
            self._driver.wake_driver()
