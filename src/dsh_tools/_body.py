"""The tool body, run in one place (runtime.md §7.4 steps 4-6).

Every path of stage 2 runs a tool through :func:`run_body`: the per-call path of
:func:`~dsh_tools._stage_dispatch.dispatch` (:func:`run_body_in_own_scope`, also the
default of the wrapper chain), the scheduler's shared abort scope
(``dispatch_in_abort_scope``, decision 17) and ``execute()``'s one-frame path (decision
18). :func:`run_body` validates the arguments, awaits the body and turns what the body
raised into a result; :func:`body_outcome` turns what it returned into one. What differs
between the paths is only the scope that the ``Abort`` cancels: a cancel scope of the
call's own, entered around :func:`run_body`, or one scope shared by many calls, whose
``Cancelled`` :func:`run_body` absorbs itself (``shared=True``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, final

import trio

from ._calls import ToolRunContext
from ._errors import ToolArgsError, ToolNotFoundError, ToolOutputError
from ._results import ToolResult, aborted_result, error_result
from ._steps import fired
from ._success import build_success

if TYPE_CHECKING:
    from ._calls import ExecState, ToolExecution
    from ._definition import ToolDefinition

__all__ = ["NO_VALUE", "Failed", "body_outcome", "run_body", "run_body_in_own_scope"]

#: What a per-call cancel scope leaves when it absorbed the ``Abort``'s ``Cancelled``.
NO_VALUE: Final[Any] = object()


@final
class Failed:
    """The body did not return a value: the result that stands for it."""

    __slots__ = ("result",)

    def __init__(self, result: ToolResult) -> None:
        self.result = result


async def run_body(
    state: ExecState, execution: ToolExecution, defn: ToolDefinition, shared: bool
) -> object:
    """Validate the arguments, then await the body: the pipeline's one body step.

    Returns the body's value, or a :class:`Failed` holding the error result of a failure
    (argument validation's ``ToolArgsError`` included: validation is the first step of the
    body). With ``shared=True`` the caller runs in the scheduler's shared abort scope: a
    ``Cancelled`` (or a group holding one) caused by the ``Abort`` is absorbed here, as a
    per-call scope would absorb it, and gives ``ABORTED``. Otherwise the ``Cancelled``
    propagates to the caller's per-call scope.
    """
    state.body_started = True
    # Only the body's last return counts (a wrapper may call call_next() again).
    state.completed = False
    arguments = execution.arguments
    try:
        ctx = ToolRunContext._make(execution)
        schema = defn._arguments_schema
        if schema is not None:
            # Argument validation (define_tool, @tool), first step of the body: every
            # violation of the parameters schema, as the body's INVALID_ARGS error.
            violations = schema.validate_frozen(arguments, "")
            if violations:
                raise ToolArgsError(violations)
        return await defn._body(arguments, ctx)
    except Exception as exc:
        # Kept even when the abort caused it: any error beats cancellation.
        return Failed(error_result(exc))
    except trio.Cancelled:
        abort = execution.abort
        if not shared or not fired(abort):
            raise  # for the per-call scope, or the caller's own cancellation
        # What the per-call scope would have absorbed. (If the caller's scope is cancelled
        # too, its Cancelled reaches the driver at its next checkpoint, and the cancellation
        # bookkeeping turns this ABORTED into the same ABORTED.)
        return Failed(aborted_result(True, (), abort._reason))
    except BaseExceptionGroup as group:
        abort = execution.abort
        if not shared or not fired(abort):
            raise
        # A body's own nursery: strip the Abort's Cancelled as a scope's exit would; what
        # remains is the body's error (decision 20), or propagates if it is not an Exception.
        rest = group.split(trio.Cancelled)[1]
        if rest is None:
            return Failed(aborted_result(True, (), abort._reason))
        if isinstance(rest, Exception):
            return Failed(error_result(rest))
        raise rest from None


def body_outcome(
    state: ExecState, execution: ToolExecution, defn: ToolDefinition | None, value: object
) -> ToolResult:
    """Stage 2's result from what :func:`run_body` left: a failure, an abort or a value.

    A value becomes a success (runtime.md §7.6), then check E (§7.4 step 6). Raises what
    an unexpected failure of that raises (the stage makes it a final result).
    """
    if type(value) is Failed:
        return value.result
    abort = execution.abort
    if value is NO_VALUE:
        # The per-call scope absorbed the Cancelled the Abort caused.
        return aborted_result(True, (), abort._reason)
    assert defn is not None  # a value comes only from a definition's body
    try:
        result = build_success(defn, execution, state, value)
    except ToolOutputError as exc:
        return error_result(exc)
    if fired(abort):  # check E: returned after the Abort fired, so not completed
        return aborted_result(True, (), abort._reason)
    state.completed = True
    return result


async def run_body_in_own_scope(execution: ToolExecution) -> ToolResult:
    """Checks D1 and D2, then :func:`run_body` in the call's own cancel scope."""
    state = execution._state
    abort = execution.abort
    if abort._aborted:  # check D1
        return aborted_result(False, (), abort._reason)
    defn = state.runtime._registry.resolve(execution.name, execution.scope)
    # Check D2: an enclosing scope (a wrapper's, the caller's) already cancelled raises here,
    # before the body, and before an unknown tool's error: a cancellation requested before
    # dispatch wins either way (decision 115). It does not yield otherwise, so the Abort
    # cannot fire before the scope below is registered.
    await trio.lowlevel.checkpoint_if_cancelled()
    if defn is None:
        return error_result(ToolNotFoundError(execution.name))
    value: object = NO_VALUE
    # The per-call cancel scope, linked to the Abort: what Abort.move_on_abort() does,
    # inlined because this is the hot path. No checkpoint since check D1, so the Abort cannot
    # have fired in between and registering the scope is enough.
    cancel_scope = trio.CancelScope()
    scopes = abort._scopes
    scopes[cancel_scope] = None
    try:
        with cancel_scope:
            value = await run_body(state, execution, defn, False)
    except Exception as exc:
        # The body's own nursery raised the Abort's Cancelled with errors, and the scope
        # took the Cancelled out of the group: the rest is the body's error (decision 20).
        return error_result(exc)
    finally:
        scopes.pop(cancel_scope, None)
    return body_outcome(state, execution, defn, value)
