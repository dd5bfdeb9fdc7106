"""Stage 3: the ``tools/post-execute`` hooks and check G (runtime.md §7.5)."""

from __future__ import annotations

from functools import partial
from typing import Any, Final

from ._calls import ExecState, Stage, ToolExecution
from ._content import TextContent
from ._decisions import UNSET, Accept, Block
from ._definition import close_awaitable
from ._errors import ToolNotFoundError
from ._results import (
    ToolError,
    ToolResult,
    aborted_result,
    error_result,
    replace_content,
    replace_contexts,
)
from ._stage_finish import finish_unchecked
from ._steps import NeedsFinalize
from ._success import build_success

__all__ = ["finalize", "finalize_now"]

_ACCEPT: Final = Accept()


async def finalize(step: NeedsFinalize) -> ToolResult:
    """Stage 3 (post-execute, check G) followed by stage 4 (:func:`finish`)."""
    done = finalize_now(step)  # the whole of it when no post-execute hook applies
    if done is not None:
        return done
    execution = step.execution
    state = execution._state
    state.stage = Stage.FINALIZING
    result = step.result
    try:
        state.active = True
        hooks = state.runtime._registry.hooks("post", execution.scope)
        decision = await _run_post(hooks, 0, execution, result)
        result = _apply_post(state, execution, result, decision)
    except Exception as exc:
        # The error wins: no cancellation override (runtime.md §7.5 step 5).
        state.active = False
        return finish_unchecked(execution, error_result(exc))
    finally:
        state.active = False
    return _check_g_and_finish(state, execution, result)


def finalize_now(step: NeedsFinalize) -> ToolResult | None:
    """:func:`finalize` without a coroutine when no post-execute hook applies; ``None`` when
    one does (the stage is left to :func:`finalize`, to be awaited).

    Raises:
        TypeError: ``step`` is not a ``NeedsFinalize``.
        RuntimeError: the execution is not ready for finalize.
    """
    if type(step) is not NeedsFinalize:
        raise TypeError(f"finalize() expects a NeedsFinalize, got {type(step).__name__}")
    execution = step.execution
    state = execution._state
    if state.stage != Stage.NEEDS_FINALIZE:
        raise RuntimeError("execution is not ready for finalize")
    scope = execution.scope
    registry = state.runtime._registry
    if registry.global_owner.fns["post"] if scope is None else registry.hooks("post", scope):
        return None
    state.stage = Stage.FINALIZING
    return _check_g_and_finish(state, execution, step.result)


def _check_g_and_finish(
    state: ExecState, execution: ToolExecution, result: ToolResult
) -> ToolResult:
    abort = execution.abort
    if abort._aborted and not result.is_error and not state.completed:  # check G
        result = aborted_result(state.body_started, result.additional_contexts, abort._reason)
    return finish_unchecked(execution, result)


async def _run_post(
    hooks: tuple[Any, ...], i: int, execution: ToolExecution, result: ToolResult
) -> Any:
    if i == len(hooks):
        return _ACCEPT
    decision = await hooks[i](
        execution, result, partial(_run_post, hooks, i + 1, execution, result)
    )
    kind = type(decision)
    if kind is not Accept and kind is not Block:
        close_awaitable(decision)
        raise TypeError(
            f"tools/post-execute hook returned {kind.__name__}; expected Accept or Block"
        )
    return decision


def _apply_post(
    state: ExecState, execution: ToolExecution, result: ToolResult, decision: Accept | Block
) -> ToolResult:
    if type(decision) is Block:
        feedback = decision.feedback
        texts = [
            block.text if type(block) is TextContent else f"[{block.type} content]"
            for block in feedback
        ]
        message = "\n".join(texts) or "tool result blocked by post-execute policy"
        return ToolResult._trusted(
            is_error=True,
            content=feedback,
            error=ToolError(message),
            additional_contexts=decision.additional_contexts,
        )
    assert type(decision) is Accept
    merged = result.additional_contexts + decision.additional_contexts
    if decision.value is not UNSET:
        if result.is_error:
            raise TypeError("tools/post-execute cannot replace the value of a failed result")
        defn = state.runtime._registry.resolve(execution.name, execution.scope)
        if defn is None:
            raise ToolNotFoundError(execution.name)
        return replace_contexts(build_success(defn, execution, state, decision.value), merged)
    if decision.content is not UNSET:
        content: Any = decision.content
        return replace_contexts(replace_content(result, content), merged)
    return replace_contexts(result, merged)
