"""The batch's value objects: ``CommittedCall`` and ``BatchOutcome`` (scheduler.md §2)."""

from __future__ import annotations

from typing import final

import attrs

from dsh_tools import ExecutionMode, ToolResult, UserMessage

from ._calls import ModelToolCall

__all__ = ["BatchOutcome", "BatchStatistics", "CommittedCall"]


@final
@attrs.frozen(kw_only=True, init=False)
class CommittedCall:
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

    def __init__(
        self,
        *,
        index: int,
        call: ModelToolCall,
        result: ToolResult,
        synthetic: bool,
        mode: ExecutionMode | None,
    ) -> None:
        # By hand, with the slots' own setters: attrs' frozen __init__ goes through
        # object.__setattr__ for every field.
        _SET_INDEX(self, index)
        _SET_CALL(self, call)
        _SET_RESULT(self, result)
        _SET_SYNTHETIC(self, synthetic)
        _SET_MODE(self, mode)


def committed_call(
    index: int, call: ModelToolCall, result: ToolResult, synthetic: bool, mode: ExecutionMode | None
) -> CommittedCall:
    """``CommittedCall(...)`` for the driver, which builds one per committed call: its
    ``__init__`` called as a function, without the class call (a type call that packs the
    keywords into a dict for ``__init__``)."""
    self: CommittedCall = _new(CommittedCall)
    _init(self, index=index, call=call, result=result, synthetic=synthetic, mode=mode)
    return self


_new = object.__new__
_init = CommittedCall.__init__
_SET_INDEX, _SET_CALL, _SET_RESULT, _SET_SYNTHETIC, _SET_MODE = (
    vars(CommittedCall)[name].__set__ for name in ("index", "call", "result", "synthetic", "mode")
)


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
