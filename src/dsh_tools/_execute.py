"""``ToolRuntime.execute()``: the stages back to back (runtime.md §13).

With nothing that can intervene (no scope, no pre-execute hook, guard or wrapper), the
steps of stages 1 and 2 run in ``execute()``'s own frame rather than in the stage
functions' (decision 18); the body still runs through the one body step of ``_body``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from ._body import NO_VALUE, Failed, body_outcome, run_body
from ._calls import Stage, ToolExecution
from ._errors import ToolNotFoundError
from ._results import ToolResult, aborted_result, error_result
from ._stage_dispatch import dispatch, dispatch_tail
from ._stage_finalize import finalize
from ._stage_finish import cancelled_result, finish_unchecked, is_cancellation
from ._stage_prepare import create, prepare, unhooked
from ._steps import NeedsFinalize, ReadyToDispatch

if TYPE_CHECKING:
    from ._calls import ToolCall
    from ._runtime import ToolRuntime

__all__ = ["execute"]


async def execute(runtime: ToolRuntime, call: ToolCall) -> ToolResult:
    """Run one call through the whole pipeline and return its frozen result.

    Never raises for tool outcomes: failures become error results with stable codes.
    A trio checkpoint on every path. If the caller's own cancel scope is cancelled,
    the result observers still receive the call's result (``ABORTED`` or
    ``ABORTED_BEFORE_DISPATCH`` unless an error was already decided) and then
    ``trio.Cancelled`` propagates.

    Raises:
        TypeError: ``call`` is not a ``ToolCall``.
        ValueError: ``call.scope`` belongs to a different runtime.
    """
    # This is ToolRuntime.execute: the stages back to back (runtime.md §13), then one
    # schedule point. When nothing can intervene (unhooked()), the steps of stages 1-4 run
    # in this frame rather than in the stage functions' own (decision 18).
    execution = create(runtime, call)
    state = execution._state
    held: ToolResult | None = None
    try:
        if not unhooked(execution):
            step = await prepare(execution)
            if type(step) is ReadyToDispatch:
                step = await dispatch(step)
            held = step.result
            if type(step) is NeedsFinalize:
                result = await finalize(step)
            else:
                result = finish_unchecked(execution, held)
        else:
            state.stage = Stage.PREPARING
            # The caller's own cancellation is noticed before check A (runtime.md §7.2 step
            # 1); nothing but the body runs after it, so it is check D2 as well.
            await trio.lowlevel.checkpoint_if_cancelled()
            if execution.abort._aborted:  # check A: final
                state.stage = Stage.NEEDS_FINISH
                result = finish_unchecked(
                    execution, aborted_result(False, (), execution.abort._reason)
                )
            else:
                # Stage 2 with no wrapper, as run_body_in_own_scope runs it. No checkpoint
                # since check A, so check D1 cannot fire.
                state.stage = Stage.DISPATCHING
                final: ToolResult | None = None  # an error that skips post-execute
                try:
                    state.active = True
                    defn: Any = runtime._registry.resolve(execution.name, None)
                    value: object = NO_VALUE
                    if defn is None:
                        value = _not_found(execution)
                    else:
                        # The call's own cancel scope, linked to the Abort (as in
                        # run_body_in_own_scope, inlined: one frame fewer on the hot path).
                        cancel_scope = trio.CancelScope()
                        scopes = execution.abort._scopes
                        scopes[cancel_scope] = None
                        try:
                            with cancel_scope:
                                value = await run_body(state, execution, defn, False)
                        except Exception as exc:
                            # The rest of a group once the scope took its Cancelled: the
                            # body's error (decision 20).
                            value = _failed(exc)
                        finally:
                            scopes.pop(cancel_scope, None)
                    try:
                        # The body's outcome, then contexts and check F (as dispatch()).
                        result = body_outcome(state, execution, defn, value)
                        if state.deferred or execution.abort._aborted:
                            result = dispatch_tail(state, execution, result)
                    except Exception as exc:
                        # A bug past the body: final, as dispatch() makes it.
                        final = error_result(exc)
                finally:
                    # Stage 2 is over, however it ended (dispatch() does the same).
                    state.ctx_active = state.active = False
                if final is not None:
                    state.stage = Stage.NEEDS_FINISH
                    result = finish_unchecked(execution, final)
                else:
                    held = result
                    state.stage = Stage.NEEDS_FINALIZE
                    if runtime._registry.global_owner.fns["post"]:
                        result = await finalize(NeedsFinalize(execution, result))
                    else:
                        # No post hook: check G would ask check F's question again, with
                        # nothing run since.
                        state.stage = Stage.FINALIZING
                        result = finish_unchecked(execution, result)
    except BaseException as exc:
        # Native cancellation: finish the call with its cancellation result (observers
        # run, no blocking), then let the same Cancelled go on. KeyboardInterrupt and
        # friends propagate at once, with no result.
        if is_cancellation(exc) and state.stage != Stage.FINISHED:
            finish_unchecked(execution, cancelled_result(execution, held))
        raise
    await trio.lowlevel.cancel_shielded_checkpoint()
    return result


def _not_found(execution: ToolExecution) -> Failed:
    return Failed(error_result(ToolNotFoundError(execution.name)))


def _failed(exc: Exception) -> Failed:
    return Failed(error_result(exc))
