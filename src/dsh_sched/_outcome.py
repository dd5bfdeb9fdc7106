"""The batch's value objects: ``CommittedCall`` and ``BatchOutcome`` (scheduler.md §2)."""

from __future__ import annotations

from typing import final

import attrs

from dsh_tools import ExecutionMode, ToolResult, UserMessage

from ._calls import ModelToolCall

__all__ = ["BatchOutcome", "CommittedCall"]


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
        # By hand, with the slots' own setters: one is built per committed call, and
        # attrs' frozen __init__ goes through object.__setattr__ for every field.
        _SET_INDEX(self, index)
        _SET_CALL(self, call)
        _SET_RESULT(self, result)
        _SET_SYNTHETIC(self, synthetic)
        _SET_MODE(self, mode)


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
