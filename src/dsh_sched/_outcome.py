"""The batch's value objects: ``CommittedCall`` and ``BatchOutcome`` (scheduler.md §2)."""

from __future__ import annotations

from typing import Any, final

import attrs

from dsh_tools import ExecutionMode, ToolResult, UserMessage

from ._calls import ModelToolCall

__all__ = ["BatchOutcome", "BatchStatistics", "CommittedCall"]


class _CommittedSlots:
    """:class:`CommittedCall`'s slots, writable: :func:`committed_call` fills them.

    The driver builds a ``CommittedCall`` per committed call. A frozen attrs class writes
    each field through ``object.__setattr__``; so ``CommittedCall`` takes its slots from
    this plain class (attrs reuses a base's slots), and :func:`committed_call` builds an
    instance of it with plain stores, then makes it a ``CommittedCall`` by assigning its
    ``__class__`` (the layouts are the same). ``dsh_tools`` builds its per-call values so.
    """

    __slots__ = ("__weakref__", "call", "index", "mode", "result", "synthetic")


@final
@attrs.frozen(kw_only=True)
class CommittedCall(_CommittedSlots):
    """One call's committed result, as the batch iterator and the outcome report it.

    Attributes:
        index: The call's position in the batch (model order).
        call: The model's call.
        result: Its final result.
        synthetic: ``True`` when the scheduler recorded it without starting the call.
        mode: The mode the call started under; ``None`` when synthetic.
    """

    index: int
    call: ModelToolCall
    result: ToolResult
    synthetic: bool
    mode: ExecutionMode | None


if vars(CommittedCall).get("__slots__") != ():  # pragma: no cover - attrs reuses the base's
    raise TypeError("CommittedCall must take all its slots from _CommittedSlots")


def committed_call(
    index: int, call: ModelToolCall, result: ToolResult, synthetic: bool, mode: ExecutionMode | None
) -> CommittedCall:
    """``CommittedCall(...)`` for the driver, which builds one per committed call, without
    the class call and the frozen class's setters (see :class:`_CommittedSlots`)."""
    self: Any = _CommittedSlots()
    self.index = index
    self.call = call
    self.result = result
    self.synthetic = synthetic
    self.mode = mode
    self.__class__ = CommittedCall
    return self  # type: ignore[no-any-return]


@final
@attrs.frozen(kw_only=True)
class BatchOutcome:
    """What a finished batch returns.

    Attributes:
        results: Exactly one :class:`CommittedCall` per call, in model order; ``()`` with
            ``keep_results=False``.
        additional_contexts: Every committed result's contexts, in commit order.
        concludes_turn: The OR of ``concludes_turn`` over the committed results.
        aborted: Whether the batch ``Abort`` had fired when the batch ended.
        abort_reason: That ``Abort``'s reason (``"batch timeout after 0.3 s"`` for the
            batch's own ``timeout=``); ``None`` when the batch was not aborted.
    """

    results: tuple[CommittedCall, ...]
    additional_contexts: tuple[UserMessage, ...]
    concludes_turn: bool
    aborted: bool
    abort_reason: object = None


@final
@attrs.frozen(kw_only=True)
class BatchStatistics:
    """A snapshot of a running batch, from :meth:`Batch.statistics` (like trio's
    ``Event.statistics()``): data to read, not live state.

    Attributes:
        calls: Calls in the batch.
        started: Calls started so far (created; each has its ``on_call``).
        running: Dispatch stages (wrappers and bodies) in flight now.
        committed: Calls with a committed result so far, synthetic ones included.
        synthetic: Synthetic results so far (calls never started: an abort or a
            cancellation).
        group_mode: The mode of the group the batch is running (``PARALLEL`` for a pool,
            ``EXCLUSIVE`` for a barrier), or ``None`` between groups and once it is over.
        aborted: Whether the batch ``Abort`` has fired.

    Example:
        >>> BatchStatistics(calls=3, started=2, running=1, committed=1, synthetic=0,
        ...                 group_mode=None, aborted=False).running
        1
    """

    calls: int
    started: int
    running: int
    committed: int
    synthetic: int
    group_mode: ExecutionMode | None
    aborted: bool
