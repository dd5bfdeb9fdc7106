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

:class:`Lane` is that driver, once for every client: an ordered pool of calls (a rolling
pool of parallel-safe calls, exclusive calls alone as barriers, commits in queue order) over
a queue fixed up front (``dsh_sched``'s model batches) or growing while it runs (Code Mode's
sub-calls). Its client (:class:`LaneClient`) says where calls come from and records what
they become.

On ``trio.Cancelled`` (or an exception group holding one, runtime.md §8.4) a driver calls
``finish(execution, cancelled_result(execution, r))`` with ``r`` the result of the last
state it holds, if any. Each execution is finished exactly once; :func:`finished_result`
tells a driver the result of one that is finished (for example when a result observer raised
``KeyboardInterrupt`` out of :func:`finish`), so that it can record it instead.
"""

from ._calls import unchecked_tool_call
from ._exception_groups import leaves as exception_leaves
from ._exception_groups import split_cancelled
from ._json_text import parse_frozen_json_text, parse_json_text
from ._lane import Lane, LaneClient, LaneStatistics
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
    is_cancellation,
    prepare,
)
from ._registry import is_async_callable

__all__ = [
    "Lane",
    "LaneClient",
    "LaneStatistics",
    "NeedsFinalize",
    "NeedsFinish",
    "ReadyToDispatch",
    "cancelled_result",
    "create",
    "dispatch",
    "dispatch_in_abort_scope",
    "exception_leaves",
    "finalize",
    "finish",
    "finished_result",
    "is_async_callable",
    "is_cancellation",
    "parse_frozen_json_text",
    "parse_json_text",
    "prepare",
    "split_cancelled",
    "unchecked_tool_call",
]
