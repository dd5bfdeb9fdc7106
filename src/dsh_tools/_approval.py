"""Approval: how an ``Ask`` decision is resolved (runtime.md §9)."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, Protocol, final

import attrs

from ._abort import Abort
from ._scope import Scope

if TYPE_CHECKING:
    from ._calls import ToolExecution

__all__ = ["ApprovalOutcome", "ApprovalRequest", "ApprovalService", "resolve_ask"]


class ApprovalOutcome(enum.Enum):
    """What the approval service decided."""

    ALLOWED_ONCE = "allowed-once"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    UNAVAILABLE = "unavailable"


@final
@attrs.frozen(kw_only=True)
class ApprovalRequest:
    """What the approval service is asked: which tool, for which call, and why."""

    scope: Scope
    tool_name: str
    call_id: str
    reason: str | None
    abort: Abort


class ApprovalService(Protocol):
    """Resolves ``Ask`` decisions, e.g. by asking a human. Awaited in the caller's task."""

    async def request(self, request: ApprovalRequest) -> ApprovalOutcome:
        """Decide on one request; watch ``request.abort`` to give up when the call aborts."""
        ...


async def resolve_ask(
    service: ApprovalService | None, execution: ToolExecution, reason: str | None
) -> tuple[str | None, bool]:
    """Resolve an ``Ask`` into ``(denial reason or None, cancelled)``.

    Raises whatever the service raises, and ``TypeError`` for an outcome outside
    :class:`ApprovalOutcome`.
    """
    name = execution.name
    if service is None:
        return (
            reason if reason is not None else f'tool "{name}" requires approval (not yet supported)'
        ), False
    scope = execution.scope
    if scope is None:
        return (
            f'tool "{name}" requires approval, but the call has no scope to route it through',
            False,
        )
    outcome: Any = await service.request(
        ApprovalRequest(
            scope=scope,
            tool_name=name,
            call_id=execution.call_id,
            reason=reason,
            abort=execution.abort,
        )
    )
    if outcome is ApprovalOutcome.ALLOWED_ONCE:
        return None, False
    if outcome is ApprovalOutcome.REJECTED:
        return f'the user rejected tool "{name}"', False
    if outcome is ApprovalOutcome.CANCELLED:
        return f'approval for tool "{name}" was cancelled', True
    if outcome is ApprovalOutcome.UNAVAILABLE:
        return f'tool "{name}" requires approval, but no approval channel is available', False
    raise TypeError(f"unreachable variant in ApprovalOutcome: {outcome!r}")
