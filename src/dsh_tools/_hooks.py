"""The hook protocols: the five events of the runtime, and guards.

Each protocol's docstring is the event's documentation: ``python -m dsh_tools inspect
events`` prints it, with the signature of ``__call__``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar

if TYPE_CHECKING:
    from ._calls import ToolExecution
    from ._decisions import PostDecision, PreDecision
    from ._results import ToolResult

__all__ = [
    "CallNext",
    "ChangeObserver",
    "ExecuteWrapper",
    "Guard",
    "PostExecuteHook",
    "PreExecuteHook",
    "ResultObserver",
]

T = TypeVar("T")

#: What a waterfall hook receives last: await it to run the rest of the chain.
CallNext: TypeAlias = Callable[[], Awaitable[T]]


class PreExecuteHook(Protocol):
    """Allow, deny, or ask before dispatch.

    Event ``tools/pre-execute`` (waterfall). Runs after the arguments are snapshotted and
    before approval, guards and dispatch. Return ``await call_next()`` to delegate to later
    hooks (the default is ``Allow()``), or return ``Allow()``, ``Deny(reason)`` or
    ``Ask(reason)`` to decide. Anything else fails the call closed with a ``TypeError``.
    The ``Abort`` does not cancel this hook: watch ``execution.abort`` yourself.
    """

    async def __call__(
        self, execution: ToolExecution, call_next: CallNext[PreDecision]
    ) -> PreDecision: ...


class ExecuteWrapper(Protocol):
    """Wrap dispatch of an allowed call.

    Event ``tools/execute`` (waterfall). The place for timeouts, retries and metrics:
    ``await call_next()`` runs later wrappers and the tool body and returns its
    ``ToolResult``; a wrapper may call it more than once (a retry), open cancel scopes
    around it (a deadline), or short-circuit with its own ``ToolResult``. A success not
    produced by the body is rebuilt from its ``value`` and revalidated.
    """

    async def __call__(
        self, execution: ToolExecution, call_next: CallNext[ToolResult]
    ) -> ToolResult: ...


class PostExecuteHook(Protocol):
    """Accept, replace, or block a dispatched result.

    Event ``tools/post-execute`` (waterfall). Receives the frozen result of dispatch (or of
    a denial). Return ``await call_next()`` to delegate (the default is ``Accept()``),
    ``Accept(content=... | value=..., additional_contexts=...)`` to keep or replace, or
    ``Block(feedback)`` to turn the result into a failure.
    """

    async def __call__(
        self, execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision: ...


class ResultObserver(Protocol):
    """Observe each final, frozen result.

    Event ``tools/result`` (emit). Called synchronously, once per execution, with the very
    object ``execute()`` returns. A failure is logged at WARNING and changes nothing.
    """

    def __call__(self, execution: ToolExecution, result: ToolResult) -> None: ...


class ChangeObserver(Protocol):
    """The visible tool set changed.

    Event ``tools/change`` (emit). Called synchronously after every register and restrict
    and after each of their disposals; not filtered by scope. Raising during a registration
    rolls that registration back and propagates; during a disposal it is logged.
    """

    def __call__(self) -> None: ...


class Guard(Protocol):
    """A synchronous deny-only check: return ``None`` to abstain or a ``str`` to deny."""

    def __call__(self, execution: ToolExecution) -> str | None: ...
