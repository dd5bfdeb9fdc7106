"""Checks shared by the three ``write_results`` (integrations §2.3).

Every call of a turn must get exactly one result before a provider accepts the history, so
the committed results are checked against the turn before anything is rendered.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeAlias

from dsh_tools import thaw_json

from .._outcome import BatchOutcome, CommittedCall
from .._sinks import CallCommitted
from ._turn import ToolTurn

if TYPE_CHECKING:
    from dsh_tools import FrozenDict, ToolResult, UserMessage

__all__ = ["Committed", "contexts_of", "echoed", "results_in_order"]

#: What ``write_results`` accepts as the committed results of a turn.
Committed: TypeAlias = BatchOutcome | Iterable[CommittedCall | CallCommitted]

_COMMITTED_TYPES = (CommittedCall, CallCommitted)


def _bad_committed(value: object) -> TypeError:
    return TypeError(
        "committed must be a BatchOutcome or an iterable of CommittedCall or CallCommitted, "
        f"got {type(value).__name__}"
    )


def results_in_order(provider: str, turn: object, committed: object) -> list[ToolResult]:
    """Check ``committed`` against ``turn`` and return one result per call, in model order.

    Raises:
        TypeError: ``turn`` is not a ``ToolTurn``; ``committed`` or an item of it has
            another type.
        ValueError: the turn was read by another adapter; an item belongs to another turn;
            a call has two results or none.
    """
    if type(turn) is not ToolTurn:
        raise TypeError(f"write_results() expects a ToolTurn, got {type(turn).__name__}")
    if turn.provider != provider:
        raise ValueError(
            f"ToolTurn was read by {turn.provider}; use dsh_sched.adapters.{turn.provider}"
        )
    calls = turn.calls
    if type(committed) is BatchOutcome:
        results = committed.results
        # The usual case, checked in one pass: the outcome of exactly this turn's calls.
        if len(results) == len(calls) and all(
            item.index == index and item.call is call
            for index, (item, call) in enumerate(zip(results, calls, strict=True))
        ):
            return [item.result for item in results]
        items: Iterable[object] = results
    else:
        try:
            items = iter(committed)  # type: ignore[call-overload]
        except TypeError:
            raise _bad_committed(committed) from None
    count = len(calls)
    slots: list[ToolResult | None] = [None] * count
    for item in items:
        if type(item) not in _COMMITTED_TYPES:
            raise _bad_committed(item)
        index: int = item.index  # type: ignore[attr-defined]
        call = item.call  # type: ignore[attr-defined]
        if not 0 <= index < count or (call is not calls[index] and call != calls[index]):
            raise ValueError(f"result for call {index} does not belong to this turn")
        if slots[index] is not None:
            raise ValueError(f'more than one result for call {index} (id "{calls[index].call_id}")')
        slots[index] = item.result  # type: ignore[attr-defined]
    for index, result in enumerate(slots):
        if result is None:
            raise ValueError(
                f'no result for call {index} (id "{calls[index].call_id}"): '
                "every tool call needs exactly one result"
            )
    return slots  # type: ignore[return-value]


def contexts_of(results: Iterable[ToolResult]) -> list[UserMessage]:
    """Every result's additional contexts, in commit order (which is model order)."""
    return [message for result in results for message in result.additional_contexts]


def echoed(echo: FrozenDict) -> dict[str, object]:
    """A call's echo as fresh plain JSON keys for its result entry."""
    thawed = thaw_json(echo)
    assert type(thawed) is dict  # a FrozenDict thaws to a dict
    return thawed
