"""Stage 4 and the cancellation results: the one way a call ends (runtime.md §7.7, §8.4).

:func:`finish` checks the result is lossless, runs ``finalize_content`` once and notifies
the result observers; :func:`finish_unchecked` is the same for the stages themselves,
without refusing a call whose stage is still running.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any

from ._calls import Stage, ToolExecution
from ._definition import close_awaitable
from ._errors import normalize_message
from ._exception_groups import is_cancellation
from ._results import (
    ToolResult,
    aborted_result,
    blocks_lossless,
    error_result,
    replace_content,
    result_strings_lossless,
)
from ._success import RESULT_NOT_LOSSLESS, as_blocks

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "cancelled_result",
    "finish",
    "finish_unchecked",
    "finished_result",
    "is_cancellation",
    "observer_failure",
]

logger = logging.getLogger("dsh_tools")


def finish(execution: ToolExecution, result: ToolResult) -> ToolResult:
    """Stage 4 (synchronous): lossless check, ``finalize_content`` once, result observers.

    Returns the final result: the very object the observers received.

    Raises:
        RuntimeError: ``execution already finished``; or the execution is still running a
            stage (a hook, guard, wrapper or body called ``finish`` on its own call, which
            the pipeline will finish itself).
        TypeError: ``result`` is not a ``ToolResult``.
    """
    state = execution._state
    if state.active:
        raise RuntimeError(
            "execution is still running; only its driver may finish it, once the stage "
            "it is in has returned (a hook, guard, wrapper or body cannot finish its own call)"
        )
    return finish_unchecked(execution, result)


def finish_unchecked(execution: ToolExecution, result: ToolResult) -> ToolResult:
    # Stage 4 without the running check: for the stages themselves.
    state = execution._state
    if state.stage == Stage.FINISHED:
        raise RuntimeError("execution already finished")
    if type(result) is not ToolResult:
        raise TypeError(f"finish() expects a ToolResult, got {type(result).__name__}")
    state.stage = Stage.FINISHED
    state.ctx_active = False
    registry = state.runtime._registry
    registry.in_flight -= 1  # counted since stage 0 (statistics())
    if result is not state.lossless and not result_strings_lossless(result):
        result = error_result(TypeError(RESULT_NOT_LOSSLESS))
    # Recorded before user code runs: if a finalizer or an observer raises a BaseException
    # out of here, the driver still knows the call's result (finished_result()).
    state.final = result
    finalizer = state.finalizer
    if finalizer is not None:
        state.finalizer = None
        result = state.final = _run_finalizer(finalizer, execution, result)
    scope = execution.scope
    observers = (
        registry.global_owner.fns["result"] if scope is None else registry.hooks("result", scope)
    )
    for observer in observers:
        _notify(observer, execution, result)
    return result


def finished_result(execution: ToolExecution) -> ToolResult | None:
    """The result ``execution`` was finished with, or ``None`` if it is not finished.

    A finalizer or a result observer may raise a ``BaseException`` (``KeyboardInterrupt``,
    ``SystemExit``) out of :func:`finish`: the execution is finished by then, and a driver
    that must record one result per call reads it here rather than finishing it again.

    Raises:
        TypeError: ``execution`` is not a ``ToolExecution``.
    """
    if type(execution) is not ToolExecution:
        raise TypeError(
            f"finished_result() expects a ToolExecution, got {type(execution).__name__}"
        )
    return execution._state.final


def _run_finalizer(
    finalizer: Callable[..., Any], execution: ToolExecution, result: ToolResult
) -> ToolResult:
    try:
        replacement = finalizer(execution, result)
        if replacement is None:
            return result
        content = as_blocks(replacement)
        if content is None:
            close_awaitable(replacement)
            raise TypeError(
                f"finalize_content returned {type(replacement).__name__}; expected a sequence "
                "of content blocks or None"
            )
        if not blocks_lossless(content):
            raise TypeError(RESULT_NOT_LOSSLESS)
        return replace_content(result, content)
    except Exception as exc:
        return error_result(exc)


def _notify(observer: Callable[..., Any], execution: ToolExecution, result: ToolResult) -> None:
    message = observer_failure(observer, execution, result)
    if message is not None:
        logger.warning(
            'tool "%s" (%s): tools/result observer failed: %s',
            execution.name,
            execution.call_id,
            message,
        )


def observer_failure(observer: Callable[..., Any], *args: object) -> str | None:
    """Call a synchronous observer; return the text to log if it failed, else ``None``.

    An ``Exception`` it raises, or an awaitable it returns (closed here), is a failure;
    anything else propagates.
    """
    try:
        returned = observer(*args)
    except Exception as exc:
        return normalize_message(exc)
    if returned is None or not inspect.isawaitable(returned):
        return None
    close_awaitable(returned)
    return "observer returned an awaitable; observers must be synchronous"


# -- cancellation -------------------------------------------------------------------------


def cancelled_result(execution: ToolExecution, result: ToolResult | None = None) -> ToolResult:
    """The result of a call cut short by native cancellation (runtime.md §8.4).

    ``result`` itself when it is an error (with ``result=None``: the stage-0 error, if the
    arguments failed); otherwise ``ABORTED`` if the body started, else
    ``ABORTED_BEFORE_DISPATCH``, carrying ``result``'s contexts if given, else the contexts
    deferred so far.

    Raises:
        TypeError: ``result`` is neither a ``ToolResult`` nor ``None``.
    """
    state = execution._state
    if result is not None:
        if type(result) is not ToolResult:
            raise TypeError(
                f"cancelled_result() expects a ToolResult or None, got {type(result).__name__}"
            )
        if result.is_error:
            return result
        return aborted_result(
            state.body_started, result.additional_contexts, execution.abort._reason
        )
    if state.stage0_error is not None:
        return state.stage0_error
    return aborted_result(state.body_started, state.deferred_contexts(), execution.abort._reason)
