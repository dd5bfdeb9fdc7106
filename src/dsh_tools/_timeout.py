"""The timeout policy: a ``tools/execute`` wrapper that enforces ``ToolDefinition.timeout``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ._errors import ToolTimeoutError
from ._results import error_result

if TYPE_CHECKING:
    from ._calls import ToolExecution
    from ._disposer import Disposer
    from ._hooks import CallNext
    from ._results import ToolResult
    from ._runtime import ToolRuntime

__all__ = ["install_timeout_policy"]


def install_timeout_policy(runtime: ToolRuntime) -> Disposer:
    """Enforce each tool's ``timeout`` with a trio deadline around dispatch.

    Registers one global ``wrap_execute`` hook. For a call whose visible definition has a
    ``timeout``, it runs the rest of the wrapper chain and the body under
    ``trio.move_on_after(timeout)`` and returns ``TOOL_TIMEOUT`` when *its own* deadline
    ended the call; a caller's deadline, an outer wrapper's, or an ``Abort`` that fired first
    is never reported as a timeout. The deadline covers wrappers registered after the policy
    plus the body, never pre- or post-execute: register it before a retry wrapper to bound
    all attempts together, after it to bound each attempt.

    Returns:
        The disposer that removes the policy.

    Example:
        >>> dispose = install_timeout_policy(runtime)  # doctest: +SKIP
    """

    async def enforce_timeout(
        execution: ToolExecution, call_next: CallNext[ToolResult]
    ) -> ToolResult:
        defn = runtime.get(execution.name, execution.scope)
        timeout = None if defn is None else defn.timeout
        if timeout is None:
            return await call_next()
        try:
            with trio.move_on_after(timeout) as deadline:
                result = await call_next()
        except Exception:
            if not deadline.cancelled_caught:
                raise
            # A group raised with our deadline's Cancelled (a body's own nursery, as its
            # children failed while being cancelled): our scope took the Cancelled out and
            # the rest escaped. Like a body turning our Cancelled into an error (T-006),
            # the call timed out.
            return error_result(ToolTimeoutError(timeout))
        # Ours if our scope absorbed the Cancelled, or if the body swallowed it and returned
        # after our deadline fired (unless the caller's Abort is what ended it).
        if deadline.cancelled_caught or (deadline.cancel_called and not execution.abort.aborted):
            return error_result(ToolTimeoutError(timeout))
        return result

    return runtime.wrap_execute(enforce_timeout)
