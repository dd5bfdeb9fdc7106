"""What one pipeline stage hands the next: the step values and their bookkeeping.

Each stage returns one of :class:`ReadyToDispatch`, :class:`NeedsFinalize` or
:class:`NeedsFinish`, and moves the execution's private stage marker with it, so that a
driver can only run the stage the call is ready for (runtime.md §13).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, final

import attrs

from ._calls import Stage, ToolExecution
from ._results import ToolResult
from ._slots import sealable

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


class _ReadySlots:
    """:class:`ReadyToDispatch`'s slot, writable: :func:`ready_to_dispatch` fills it."""

    __slots__ = ("__weakref__", "execution")


class _StepSlots:
    """:class:`NeedsFinalize`'s slots, writable: :func:`needs_finalize` fills them."""

    __slots__ = ("__weakref__", "execution", "result")


@final
@sealable
@attrs.frozen
class ReadyToDispatch(_ReadySlots):
    """Stage 1 allowed the call: hand it to :func:`dispatch`."""

    execution: ToolExecution


@final
@sealable
@attrs.frozen
class NeedsFinalize(_StepSlots):
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
    # NeedsFinalize(execution, result) without attrs' frozen __setattr__ (see _slots).
    step: Any = _StepSlots()
    step.execution = execution
    step.result = result
    step.__class__ = NeedsFinalize
    return step  # type: ignore[no-any-return]


def ready_to_dispatch(state: ExecState, execution: ToolExecution) -> ReadyToDispatch:
    """End stage 1 with the call allowed: stage 2 comes next."""
    state.stage = Stage.READY
    step: Any = _ReadySlots()
    step.execution = execution
    step.__class__ = ReadyToDispatch
    return step  # type: ignore[no-any-return]
