"""The staged pipeline: the documented contract between ``dsh_tools`` and its drivers.

``ToolRuntime.execute()`` is exactly these stages run in order, followed by one schedule
point. A driver (such as ``dsh_sched``) holds the state each stage returns and hands it to
the next one, so a type checker catches a stage called with the wrong state::

    execution = create(runtime, call)
    step = await prepare(execution)
    if isinstance(step, ReadyToDispatch):
        step = await dispatch(step)
    if isinstance(step, NeedsFinalize):
        result = await finalize(step)
    else:
        result = finish(step.execution, step.result)

A driver that runs many calls sharing one ``Abort`` side by side may run the dispatch
stages that no wrapper applies to under one cancel scope linked to that ``Abort``, instead
of one scope per call: see :func:`dispatch_in_abort_scope`.

On ``trio.Cancelled`` (or an exception group holding one, runtime.md §8.4) a driver calls
``finish(execution, cancelled_result(execution, r))`` with ``r`` the result of the last
state it holds, if any. Each execution is finished exactly once; :func:`finished_result`
tells a driver the result of one that is finished (for example when a result observer raised
``KeyboardInterrupt`` out of :func:`finish`), so that it can record it instead.
"""

from ._pipeline import (
    NeedsFinalize,
    NeedsFinish,
    ReadyToDispatch,
    cancelled_result,
    create,
    dispatch,
    dispatch_in_abort_scope,
    finalize,
    finish,
    finished_result,
    prepare,
)

__all__ = [
    "NeedsFinalize",
    "NeedsFinish",
    "ReadyToDispatch",
    "cancelled_result",
    "create",
    "dispatch",
    "dispatch_in_abort_scope",
    "finalize",
    "finish",
    "finished_result",
    "prepare",
]
