"""Stages 0 and 1: snapshot the call, then decide whether it may run (runtime.md §7.1-7.3).

:func:`create` freezes the call into a ``ToolExecution``; :func:`prepare` is the caller's
cancel point, check A, the pre-execute hooks, approval, the guards and check C.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Final

import trio

from ._approval import resolve_ask
from ._calls import ExecState, Stage, ToolCall, ToolExecution
from ._code_present import PresentationMode, collapse_result, collapses
from ._content import TextContent
from ._decisions import Allow, Ask, Deny
from ._definition import close_awaitable
from ._errors import ErrorCode
from ._json import freeze_json
from ._results import ErrorInfo, ToolError, ToolResult, aborted_result, error_result
from ._steps import (
    NeedsFinalize,
    NeedsFinish,
    ReadyToDispatch,
    fired,
    needs_finalize,
    needs_finish,
    ready_to_dispatch,
)

if TYPE_CHECKING:
    from ._registry import Registry
    from ._runtime import ToolRuntime

__all__ = ["create", "prepare", "prepare_now", "unhooked"]

_ALLOW: Final = Allow()
_CODE: Final = PresentationMode.CODE  # read from the class, an enum member is a slow lookup
_ARGS_NOT_LOSSLESS: Final = "tool execution arguments must be losslessly JSON-serializable"


# -- stage 0 ------------------------------------------------------------------------------


def create(runtime: ToolRuntime, call: ToolCall) -> ToolExecution:
    """Stage 0 (synchronous): snapshot the call into a frozen :class:`ToolExecution`.

    Resolves the tool visible now and captures its ``finalize_content``; snapshots the
    arguments with ``freeze_json``. Arguments that are not lossless JSON make the call a
    final result (``prepare`` returns it as :class:`NeedsFinish`).

    Raises:
        TypeError: ``call`` is not a ``ToolCall``, or ``runtime`` is not a ``ToolRuntime``.
        ValueError: ``call.scope`` belongs to another runtime.
    """
    if type(call) is not ToolCall:
        raise TypeError(f"execute() expects a ToolCall, got {type(call).__name__}")
    scope = call.scope
    if scope is not None and scope.runtime is not runtime:
        raise ValueError("scope belongs to a different runtime")
    try:
        registry = runtime._registry
    except AttributeError:
        raise TypeError(f"create() expects a ToolRuntime, got {type(runtime).__name__}") from None
    state = ExecState(runtime)
    registry.in_flight += 1  # until stage 4 (statistics())
    if (
        call.parent is None
        and (registry.declarations or registry.mode is _CODE)
        and collapses(registry, call.name, scope)
    ):
        # A model-direct call under Code Mode: it fails in prepare and captures no
        # finalizer (code-mode §2.5).
        state.collapsed = True
    else:
        defn = registry.resolve(call.name, scope)
        if defn is not None:
            state.finalizer = defn.finalize_content
    try:
        arguments = freeze_json(call.arguments)
    except TypeError:
        execution = ToolExecution._make(call, None, state)
        state.stage0_error = error_result(TypeError(_ARGS_NOT_LOSSLESS))
        return execution
    return ToolExecution._make(call, arguments, state)


# -- stage 1 ------------------------------------------------------------------------------


def unhooked(execution: ToolExecution) -> bool:
    """Whether stages 1 and 2 have no user code to run but the body.

    True for no scope, no stage-0 error, no collapse, and no pre-execute hook, guard or
    wrapper registered: ``ToolRuntime.execute()`` then runs them in its own frame (decision
    18), and the scheduler's lane takes :func:`prepare_now`.
    """
    state = execution._state
    if execution.scope is not None or state.stage0_error is not None or state.collapsed:
        return False
    owner = state.runtime._registry.global_owner
    fns = owner.fns
    return not owner.guards and not fns["pre"] and not fns["execute"]


def prepare_now(execution: ToolExecution) -> ReadyToDispatch | None:
    """Stage 1 without its cancel point, when it has nothing to run and check A passes.

    For a driver that has just passed a cancel point of its own (the scheduler's lane,
    decision 115): :func:`prepare`'s outcome, without a coroutine. A cancellation requested
    since that cancel point reaches the call at check D2, before its body, so it ends as it
    would have in :func:`prepare`. ``None`` when :func:`prepare` must run (and be awaited).
    """
    if (
        execution._state.stage != Stage.CREATED
        or execution.abort._aborted  # check A decides: prepare() finishes the call
        or not unhooked(execution)
    ):
        return None
    return ready_to_dispatch(execution._state, execution)


async def prepare(execution: ToolExecution) -> ReadyToDispatch | NeedsFinalize | NeedsFinish:
    """Stage 1: the caller's cancel point, check A, pre-execute, approval, guards, check C.

    Returns :class:`NeedsFinish` for a stage-0 failure and every final result of this stage,
    :class:`NeedsFinalize` for a denial or an abort noticed after pre-execute, and
    :class:`ReadyToDispatch` otherwise. ``trio.Cancelled`` propagates.
    """
    state = execution._state
    if state.stage != Stage.CREATED:
        raise RuntimeError("execution is not ready for prepare")
    state.stage = Stage.PREPARING
    try:
        # Set inside the try, so that nothing can leave it set (an exception at the `try`
        # line itself would skip the `finally`).
        state.active = True  # stage 1 runs: finish() refuses its call until it ends
        # The caller's own cancellation is noticed before check A (runtime.md §7.2 step 1).
        await trio.lowlevel.checkpoint_if_cancelled()
        if state.stage0_error is not None:
            return needs_finish(state, execution, state.stage0_error)
        abort = execution.abort
        if abort._aborted:  # check A
            return needs_finish(state, execution, aborted_result(False, (), abort._reason))
        if state.collapsed:  # before any policy (code-mode §2.5)
            return needs_finish(state, execution, collapse_result(execution.name))
        registry = state.runtime._registry
        scope = execution.scope
        if scope is None and not registry.global_owner.guards:
            hooks = registry.global_owner.fns["pre"]
            if not hooks:
                # Nothing can deny or await, so the Abort cannot have fired since check A.
                return ready_to_dispatch(state, execution)
        try:
            hooks = registry.hooks("pre", scope)
            decision = await _run_pre(hooks, 0, execution) if hooks else _ALLOW
            denial: str | None
            if type(decision) is Ask:
                denial, cancelled = await resolve_ask(
                    state.runtime.approval, execution, decision.reason
                )
                if cancelled and fired(abort):  # check B
                    return needs_finalize(
                        state, execution, aborted_result(False, (), abort._reason)
                    )
            elif type(decision) is Deny:
                denial = decision.reason
            else:
                denial = None
            if denial is None:
                denial = _evaluate_guards(registry, execution)
            if denial is not None:
                return needs_finalize(state, execution, _denial_result(denial))
            if fired(abort):  # check C
                return needs_finalize(state, execution, aborted_result(False, (), abort._reason))
        except Exception as exc:
            return needs_finish(state, execution, error_result(exc))
        return ready_to_dispatch(state, execution)
    finally:
        state.active = False


_DENIED_INFO: Final = ErrorInfo("ToolDeniedError", ErrorCode.TOOL_DENIED)


def _denial_result(reason: str) -> ToolResult:
    # error_result(ToolDeniedError(reason)), without the empty-message normalization: a
    # denial's message is its reason exactly as given, even "" (runtime.md §7.2 step 7).
    return ToolResult._trusted(
        is_error=True,
        content=(TextContent("Error: " + reason),),
        error=ToolError(reason, _DENIED_INFO),
    )


async def _run_pre(hooks: tuple[Any, ...], i: int, execution: ToolExecution) -> Any:
    if i == len(hooks):
        return _ALLOW
    decision = await hooks[i](execution, partial(_run_pre, hooks, i + 1, execution))
    kind = type(decision)
    if kind is not Allow and kind is not Deny and kind is not Ask:
        close_awaitable(decision)
        raise TypeError(
            f"tools/pre-execute hook returned {kind.__name__}; expected Allow, Deny or Ask"
        )
    return decision


def _evaluate_guards(registry: Registry, execution: ToolExecution) -> str | None:
    # Snapshot every table first: a guard registered or disposed during the walk takes
    # effect from the next call (the tables are copy-on-write tuples).
    scope = execution.scope
    tables = [registry.global_owner.guards]
    if scope is not None:
        tables.extend(owner.guards for owner in scope._chain)
    for table in tables:
        for guard in table:
            verdict = guard(execution)
            if verdict is None:
                continue
            if isinstance(verdict, str):
                return str(verdict)
            close_awaitable(verdict)
            raise TypeError(f"guard returned {type(verdict).__name__}; expected str or None")
    return None
