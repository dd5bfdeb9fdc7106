"""The execution pipeline, stage by stage (runtime.md §7, §8, §13): where each step lives.

``ToolRuntime.execute()`` is exactly :func:`create`, :func:`prepare`, :func:`dispatch`,
:func:`finalize` / :func:`finish` run back to back, and ``dsh_sched`` drives the same stages
through ``dsh_tools.lowlevel``. The stages add no schedule point of their own: only hooks,
approval and bodies yield (plus the cancel point at the start of :func:`prepare`). A driver
with nothing for stage 1 or 3 to run may take :func:`prepare_now` and :func:`finalize_now`,
their synchronous forms (decision 115).

The story of one call, module by module:

- stage 0, ``_stage_prepare.create``: snapshot the call (arguments frozen as lossless JSON);
- stage 1, ``_stage_prepare.prepare``: the caller's cancel point, check A, pre-execute
  hooks, approval, guards, check C;
- stage 2, ``_stage_dispatch.dispatch`` (or ``dispatch_in_abort_scope``): the
  ``tools/execute`` wrappers around the body step, ``_body.run_body``, which **validates
  the arguments** (definitions from ``define_tool``/``@tool``) and then awaits the body;
  ``_body.body_outcome`` turns its value into a success (``_success.build_success``);
- stage 3, ``_stage_finalize.finalize``: post-execute hooks, check G;
- stage 4, ``_stage_finish.finish``: lossless check, ``finalize_content``, result observers.

The values handed from stage to stage are in ``_steps``; ``_execute.execute`` chains the
stages, running stages 1 and 2 in its own frame when nothing can intervene (decision 18).
"""

from __future__ import annotations

from ._execute import execute
from ._stage_dispatch import dispatch, dispatch_in_abort_scope
from ._stage_finalize import finalize, finalize_now
from ._stage_finish import cancelled_result, finish, finished_result, is_cancellation
from ._stage_prepare import create, prepare, prepare_now
from ._steps import NeedsFinalize, NeedsFinish, ReadyToDispatch

__all__ = [
    "NeedsFinalize",
    "NeedsFinish",
    "ReadyToDispatch",
    "cancelled_result",
    "create",
    "dispatch",
    "dispatch_in_abort_scope",
    "execute",
    "finalize",
    "finalize_now",
    "finish",
    "finished_result",
    "is_cancellation",
    "prepare",
    "prepare_now",
]
