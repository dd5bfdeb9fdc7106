"""The heart of the ``run_code`` body: run one program with its sub-call lane.

:func:`run_code_body` is what the ``run_code`` definition's body awaits once the arguments
and the code runtime are checked (code-mode §3.3 steps 4 to 7): it opens the lane, awaits the
code runtime, settles the lane, and turns the outcome into the tool's value, or a failure
into :class:`~dsh_tools.CodeRunFailedError`. Cancellation ends in the lane's bookkeeping, so
that every accepted sub-call is committed once before ``Cancelled`` goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ._code_lane import SubCalls
from ._code_values import CodeRunOutcome
from ._decisions import UNSET
from ._errors import CodeRunFailedError, normalize_message
from ._exception_groups import is_cancellation, split_cancelled

if TYPE_CHECKING:
    from ._calls import ToolRunContext
    from ._code_values import CodeRunLimits, CodeRuntime
    from ._runtime import ToolRuntime

__all__ = ["run_code_body"]


@trio.lowlevel.enable_ki_protection
async def run_code_body(
    *,
    runtime: ToolRuntime,
    code_runtime: CodeRuntime,
    limits: CodeRunLimits,
    code: str,
    tools: tuple[str, ...],
    ctx: ToolRunContext,
) -> dict[str, object]:
    """Run ``code`` on ``code_runtime`` with its sub-calls driven by a lane of their own.

    Args:
        runtime: The runtime the sub-calls run in.
        code_runtime: The code runtime (already checked).
        limits: The run's limits, read once when the run starts.
        code: The program.
        tools: The bound names, sorted.
        ctx: The ``run_code`` call's context.

    Returns:
        ``{"logs": [...]}``, plus ``"result"`` when the program returned a value.

    Raises:
        CodeRunFailedError: the program failed, or the code runtime broke its contract
            (kind ``internal``).
        trio.Cancelled: the body was cancelled, after the bookkeeping (§5.6).
        BaseException: a ``KeyboardInterrupt``-like exception, alone, after the same
            bookkeeping.
    """
    sub_calls = SubCalls(runtime, ctx, limits, tools)
    lane = sub_calls.lane
    # The nursery is held as a manager object: the program's exception is never handed to
    # it (trio would cancel the lane natively and wrap what escapes in a group).
    nursery_cm = trio.open_nursery()
    nursery = await nursery_cm.__aenter__()
    lane.nursery = nursery
    nursery.start_soon(sub_calls.drive, name="dsh_tools.code_lane")
    returned: object = None
    raised: BaseException | None = None
    try:
        returned = await code_runtime.run(
            code, tools=tools, dispatch=sub_calls.dispatch, limits=limits
        )
    except BaseException as exc:
        raised = exc
    if raised is None or isinstance(raised, Exception):
        # The program has ended: the lane settles (queued calls refused, running ones
        # aborted, everything started committed) before the body goes on.
        sub_calls.settle()
    elif not is_cancellation(raised):
        # KeyboardInterrupt / SystemExit: cancel the lane natively, then the bookkeeping.
        lane.note_native(raised)
        nursery.cancel_scope.cancel()
    cancelled: trio.Cancelled | None = None
    try:
        await nursery_cm.__aexit__(None, None, None)
    except BaseException as exc:
        cancelled = split_cancelled(exc, lane.note_native)
    if not sub_calls.completed:
        sub_calls.bookkeep()
    if lane.native is not None:
        raise lane.native
    if lane.failure is not None:
        failure = lane.failure
        raise CodeRunFailedError.for_run("internal", normalize_message(failure)) from failure
    if raised is not None and is_cancellation(raised):
        raise raised
    if cancelled is not None:
        # Cancelled while the lane settled: one bare Cancelled for the owning scope.
        raise cancelled from None
    if raised is not None:
        if isinstance(raised, CodeRunFailedError):
            raise raised
        raise CodeRunFailedError.for_run("internal", normalize_message(raised)) from raised
    if not isinstance(returned, CodeRunOutcome):
        raise CodeRunFailedError.for_run(
            "internal", f"code runtime returned {type(returned).__name__}; expected CodeRunOutcome"
        )
    value: dict[str, object] = {"logs": list(returned.logs)}
    if returned.result is not UNSET:
        value["result"] = returned.result
    return value
