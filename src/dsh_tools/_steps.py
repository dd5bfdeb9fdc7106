"""What one pipeline stage hands the next: the step values and their bookkeeping.

Each stage returns one of :class:`ReadyToDispatch`, :class:`NeedsFinalize` or
:class:`NeedsFinish`, and moves the execution's private stage marker with it, so that a
driver can only run the stage the call is ready for (runtime.md §13).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import attrs

from ._calls import Stage, ToolExecution
from ._results import ToolResult
from ._slots import slot_setter

if TYPE_CHECKING:
    from ._abort import Abort
    from ._calls import ExecState

__all__ = [
    "NeedsFinalize",
    "NeedsFinish",
    "ReadyToDispatch",
    "fired",
    "needs_finalize",
    "needs_finish",
    "require",
]


@final
@attrs.frozen
class ReadyToDispatch:
    """Stage 1 allowed the call: hand it to :func:`dispatch`."""

    execution: ToolExecution


@final
@attrs.frozen
class NeedsFinalize:
    """A result that still goes through post-execute: hand it to :func:`finalize`."""

    execution: ToolExecution
    result: ToolResult


@final
@attrs.frozen
class NeedsFinish:
    """A final result that skips post-execute: hand it to :func:`finish`."""

    execution: ToolExecution
    result: ToolResult


def require(state: ExecState, stage: int, name: str) -> None:
    """Refuse to run stage ``name`` unless the execution is at ``stage``."""
    if state.stage != stage:
        raise RuntimeError(f"execution is not ready for {name}")


def fired(abort: Abort) -> bool:
    """Whether ``abort`` has fired.

    A call, not an attribute: the abort may fire at any await, and a type checker must not
    narrow it away between two checks.
    """
    return abort._aborted


def needs_finish(state: ExecState, execution: ToolExecution, result: ToolResult) -> NeedsFinish:
    """End a stage with a final result: stage 4 comes next."""
    state.stage = Stage.NEEDS_FINISH
    return NeedsFinish(execution, result)


def needs_finalize(state: ExecState, execution: ToolExecution, result: ToolResult) -> NeedsFinalize:
    """End a stage with a result that goes through post-execute: stage 3 comes next."""
    state.stage = Stage.NEEDS_FINALIZE
    # NeedsFinalize(execution, result) without attrs' frozen __setattr__: the hot path.
    step = _new(NeedsFinalize)
    _SET_FINALIZE_EXECUTION(step, execution)
    _SET_FINALIZE_RESULT(step, result)
    return step


def ready_to_dispatch(state: ExecState, execution: ToolExecution) -> ReadyToDispatch:
    """End stage 1 with the call allowed: stage 2 comes next."""
    state.stage = Stage.READY
    step = _new(ReadyToDispatch)
    _SET_READY_EXECUTION(step, execution)
    return step


_new = object.__new__
_SET_FINALIZE_EXECUTION = slot_setter(NeedsFinalize, "execution")
_SET_FINALIZE_RESULT = slot_setter(NeedsFinalize, "result")
_SET_READY_EXECUTION = slot_setter(ReadyToDispatch, "execution")
