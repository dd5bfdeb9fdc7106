"""Sinks: where a batch reports its calls, results and contexts (scheduler.md §5)."""

from __future__ import annotations

from typing import Protocol, final

import attrs

from dsh_tools import ExecutionMode, ExecutionToken, ToolResult, UserMessage

from ._calls import ModelToolCall

__all__ = ["CallCommitted", "CallStarted", "ContextAccepted", "RecordingSink", "Sink"]


@final
@attrs.frozen(kw_only=True)
class CallStarted:
    """A call was started (or, when ``synthetic``, is about to get a synthetic result).

    Attributes:
        batch: The process-unique batch number (a counter starting at 1).
        index: The call's position in the batch (model order).
        call: The model's call.
        mode: The mode it started under; ``None`` when synthetic.
        token: The execution's token, which hooks and observers also see; ``None`` when
            synthetic.
        synthetic: ``True`` for a call the scheduler never started (abort or cancellation).
    """

    batch: int
    index: int
    call: ModelToolCall
    mode: ExecutionMode | None
    token: ExecutionToken | None
    synthetic: bool


@final
@attrs.frozen(kw_only=True)
class CallCommitted:
    """A call's final result was committed, in model order.

    Attributes:
        batch: The batch number.
        index: The call's position in the batch.
        call: The model's call (its ``call_id`` even if post-execute replaced the content).
        result: The final result: for a started call, the object the runtime's result
            observers received.
        synthetic: ``True`` for a result recorded by the scheduler without the runtime.
    """

    batch: int
    index: int
    call: ModelToolCall
    result: ToolResult
    synthetic: bool


@final
@attrs.frozen(kw_only=True)
class ContextAccepted:
    """An additional context of a committed result, delivered after the batch's last result.

    Attributes:
        batch: The batch number.
        index: The position of the call whose result carried the context.
        call: That call.
        message: The context message.
    """

    batch: int
    index: int
    call: ModelToolCall
    message: UserMessage


class Sink(Protocol):
    """Receives a batch's events, synchronously, from the batch's driver task only.

    A sink never sees two events at once. An exception it raises is an internal failure of
    the batch (scheduler.md §8), except during cancellation bookkeeping (§7), where it is
    logged and the bookkeeping goes on.
    """

    def on_call(self, event: CallStarted) -> None:
        """A call started (or a synthetic call is reported); precedes its ``on_result``."""

    def on_result(self, event: CallCommitted) -> None:
        """A call's result was committed; these come in model order."""

    def on_context(self, event: ContextAccepted) -> None:
        """A context is delivered; all come after the batch's last ``on_result``."""


@final
@attrs.define(eq=False)
class RecordingSink:
    """A sink that appends every event to :attr:`events`, in order.

    Example:
        >>> sink = RecordingSink()
        >>> sink.events
        []
    """

    events: list[CallStarted | CallCommitted | ContextAccepted] = attrs.field(factory=list)

    def on_call(self, event: CallStarted) -> None:
        """Append ``event``."""
        self.events.append(event)

    def on_result(self, event: CallCommitted) -> None:
        """Append ``event``."""
        self.events.append(event)

    def on_context(self, event: ContextAccepted) -> None:
        """Append ``event``."""
        self.events.append(event)
