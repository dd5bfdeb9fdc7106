"""Stage 2: the ``tools/execute`` wrappers around the tool body (runtime.md §7.4).

:func:`dispatch` runs the wrapper chain (or, with no wrapper, the body directly) with the
body in a cancel scope of the call's own; :func:`dispatch_in_abort_scope` runs a
wrapper-free call in a scope shared with the other calls of its ``Abort`` (decision 17).
Both run the body through the one body step of ``_body``, which validates the arguments
first.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from ._body import body_outcome, run_body, run_body_in_own_scope
from ._calls import ExecState, Stage, ToolExecution
from ._definition import close_awaitable
from ._errors import ToolNotFoundError
from ._results import ToolResult, aborted_result, error_result, replace_contexts
from ._steps import (
    NeedsFinalize,
    NeedsFinish,
    ReadyToDispatch,
    fired,
    needs_finalize,
    needs_finish,
    ready_to_dispatch,
    require,
)
from ._success import build_success

if TYPE_CHECKING:
    from collections.abc import Coroutine

__all__ = ["dispatch", "dispatch_in_abort_scope", "dispatch_tail", "normalize"]


async def dispatch(step: ReadyToDispatch) -> NeedsFinalize | NeedsFinish:
    """Stage 2: the ``tools/execute`` wrappers around the tool body.

    Returns :class:`NeedsFinalize` with the dispatch result (contexts attached, check F
    applied), or :class:`NeedsFinish` when a wrapper failed. ``trio.Cancelled`` of an outer
    scope propagates; the ``Abort`` never cancels a wrapper.
    """
    if type(step) is not ReadyToDispatch:
        raise TypeError(f"dispatch() expects a ReadyToDispatch, got {type(step).__name__}")
    execution = step.execution
    state = execution._state
    require(state, Stage.READY, "dispatch")
    state.stage = Stage.DISPATCHING
    try:
        state.active = True
        hooks = state.runtime._registry.hooks("execute", execution.scope)
        if hooks:
            result = await _run_wrappers(hooks, 0, execution)
            result = normalize(state, execution, result)
        else:
            # No wrapper: the body's result is final as it is, nothing to normalize.
            result = await run_body_in_own_scope(execution)
    except Exception as exc:
        # A wrapper failed (or normalization did): final, and the deferred contexts go.
        return needs_finish(state, execution, error_result(exc))
    finally:
        state.ctx_active = state.active = False
    return _dispatched(state, execution, result)


def _dispatched(state: ExecState, execution: ToolExecution, result: ToolResult) -> NeedsFinalize:
    return needs_finalize(state, execution, dispatch_tail(state, execution, result))


def dispatch_tail(state: ExecState, execution: ToolExecution, result: ToolResult) -> ToolResult:
    """The end of stage 2 once the wrapper chain returned: contexts, then check F."""
    deferred = state.deferred
    if deferred:
        result = replace_contexts(result, (*deferred, *result.additional_contexts))
    abort = execution.abort
    if abort._aborted and not result.is_error and not state.completed:  # check F
        result = aborted_result(state.body_started, result.additional_contexts, abort._reason)
    return result


def dispatch_in_abort_scope(
    step: ReadyToDispatch,
) -> Coroutine[Any, Any, NeedsFinalize | NeedsFinish | ReadyToDispatch] | None:
    """Stage 2 for a driver that runs many calls of one ``Abort`` under one cancel scope.

    The per-call cancel scope of :func:`dispatch` exists so that firing the ``Abort``
    cancels the body and only the body. A driver that runs the dispatch stages of many calls
    sharing one ``Abort`` can instead run them as tasks of a nursery opened inside
    ``abort.move_on_abort()``: firing the ``Abort`` then cancels all of their bodies with one
    scope (runtime.md §7.4 allows this equivalent mechanism). That is only sound when no
    ``tools/execute`` wrapper applies, because wrappers must never see a ``Cancelled``
    caused by the ``Abort``.

    So this returns ``None`` when a wrapper applies to the call: use :func:`dispatch` for
    it. Otherwise it returns the stage-2 coroutine. Await it in a task started in a nursery
    that was opened directly inside ``step.execution.abort.move_on_abort()``, and do not
    checkpoint in that task after it returns. Stage 2 starts when the coroutine runs, and
    reads the wrapper list then: if a wrapper was registered in between, it dispatches
    nothing and returns a ``ReadyToDispatch`` for the same execution, to be run with
    :func:`dispatch` outside that scope. When the ``Abort``'s ``Cancelled`` ends the body,
    the coroutine absorbs it on behalf of the shared scope and returns the ``ABORTED``
    result, as :func:`dispatch` would; every other outcome (checks D1, D2, E, F, errors,
    the caller's cancellation propagating) is :func:`dispatch`'s too.

    Example (``keep`` awaits a stage and stores what it returns):
        >>> async def run_all(steps, abort):  # doctest: +SKIP
        ...     async with trio.open_nursery() as outer:
        ...         with abort.move_on_abort():
        ...             async with trio.open_nursery() as shared:
        ...                 for step in steps:
        ...                     stage = dispatch_in_abort_scope(step)
        ...                     if stage is None:  # a wrapper applies: its own scope
        ...                         outer.start_soon(keep, dispatch(step))
        ...                     else:  # keep() hands a returned step to dispatch() in outer
        ...                         shared.start_soon(keep, stage)

    Raises:
        TypeError: ``step`` is not a ``ReadyToDispatch``.
        RuntimeError: the execution is not ready for dispatch.
    """
    if type(step) is not ReadyToDispatch:
        raise TypeError(
            f"dispatch_in_abort_scope() expects a ReadyToDispatch, got {type(step).__name__}"
        )
    execution = step.execution
    state = execution._state
    require(state, Stage.READY, "dispatch")
    if state.runtime._registry.hooks("execute", execution.scope):
        return None
    state.stage = Stage.DISPATCHING
    return _dispatch_shared(state, execution)


async def _dispatch_shared(
    state: ExecState, execution: ToolExecution
) -> NeedsFinalize | NeedsFinish | ReadyToDispatch:
    """:func:`dispatch` with no wrapper and without the per-call scope.

    The task's nursery scope is linked to the Abort, so a ``Cancelled`` out of the body
    while the Abort has fired is that scope's: :func:`run_body` absorbs it (``shared``).
    """
    registry = state.runtime._registry
    scope = execution.scope
    if registry.hooks("execute", scope):
        # Stage 2 starts now, and a wrapper was registered since the driver chose this
        # path: hand the call back, still ready, for dispatch() outside the shared scope.
        return ready_to_dispatch(state, execution)
    abort = execution.abort
    try:
        # Only while this frame runs (a coroutine never run leaves the call finishable).
        state.active = True
        # Check D1, then the live definition (as run_body_in_own_scope does).
        defn: Any = None if abort._aborted else registry.resolve(execution.name, scope)
        if defn is None and fired(abort):
            result = aborted_result(False, (), abort._reason)
        else:
            # Check D2, for an unknown tool too (decision 115). The shared scope is cancelled
            # only by the Abort, which check D1 just saw unfired with no checkpoint since:
            # only an enclosing scope can raise here.
            await trio.lowlevel.checkpoint_if_cancelled()
            if defn is None:
                result = error_result(ToolNotFoundError(execution.name))
            else:
                value = await run_body(state, execution, defn, True)
                result = body_outcome(state, execution, defn, value)
    except Exception as exc:
        return needs_finish(state, execution, error_result(exc))
    finally:
        state.ctx_active = state.active = False
    if state.deferred or fired(abort):
        result = dispatch_tail(state, execution, result)
    return needs_finalize(state, execution, result)


async def _run_wrappers(hooks: tuple[Any, ...], i: int, execution: ToolExecution) -> ToolResult:
    if i == len(hooks):
        return await _base(execution)
    result = await hooks[i](execution, partial(_run_wrappers, hooks, i + 1, execution))
    if type(result) is not ToolResult:
        close_awaitable(result)
        raise TypeError(
            f"tools/execute wrapper returned {type(result).__name__}; expected ToolResult"
        )
    return result


async def _base(execution: ToolExecution) -> ToolResult:
    """The default of the wrapper chain; its results are canonical for normalization."""
    state = execution._state
    if state.stage != Stage.DISPATCHING:
        # A call_next kept by a wrapper and called later (from a post hook, another task,
        # after execute() returned): the body belongs to its call's dispatch stage.
        raise RuntimeError(
            "a tools/execute wrapper's call_next() was called after the call's dispatch "
            "stage ended; call it (as often as needed) before the wrapper returns"
        )
    result = await run_body_in_own_scope(execution)
    if state.canonical is None:
        state.canonical = [result]
    else:
        state.canonical.append(result)
    return result


def normalize(state: ExecState, execution: ToolExecution, result: ToolResult) -> ToolResult:
    if result.is_error or state.is_canonical(result):
        return result
    # A success the base did not produce (short-circuit, cache, evolve): rebuild it from its
    # value against the live definition; its content, meta and concludes_turn are ignored.
    defn = state.runtime._registry.resolve(execution.name, execution.scope)
    if defn is None:
        raise ToolNotFoundError(execution.name)
    rebuilt = build_success(defn, execution, state, result.value)
    return replace_contexts(rebuilt, result.additional_contexts)
