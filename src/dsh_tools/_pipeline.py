"""The execution pipeline, stage by stage (runtime.md §7, §8, §13).

``ToolRuntime.execute()`` is exactly :func:`create`, :func:`prepare`, :func:`dispatch`,
:func:`finalize` / :func:`finish` run back to back, and ``dsh_sched`` drives the same stages
through ``dsh_tools.lowlevel``. The stages add no schedule point of their own: only hooks,
approval and bodies yield (plus the cancel point at the start of :func:`prepare`).
"""

from __future__ import annotations

import inspect
import logging
from functools import partial
from typing import TYPE_CHECKING, Any, Final, final

import attrs
import trio

from ._approval import resolve_ask
from ._calls import ExecState, Stage, ToolCall, ToolExecution, ToolRunContext
from ._content import ImageContent, TextContent
from ._decisions import UNSET, Accept, Allow, Ask, Block, Deny
from ._definition import close_awaitable
from ._errors import ErrorCode, ToolNotFoundError, ToolOutputError, normalize_message
from ._json import freeze_json
from ._results import (
    ErrorInfo,
    ToolError,
    ToolResult,
    aborted_result,
    blocks_lossless,
    error_result,
    replace_content,
    replace_contexts,
    result_strings_lossless,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from ._abort import Abort
    from ._definition import ToolDefinition
    from ._registry import Registry
    from ._runtime import ToolRuntime

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
    "finish",
    "finished_result",
    "is_cancellation",
]

logger = logging.getLogger("dsh_tools")

_ALLOW: Final = Allow()
_ACCEPT: Final = Accept()
_ARGS_NOT_LOSSLESS: Final = "tool execution arguments must be losslessly JSON-serializable"
_RESULT_NOT_LOSSLESS: Final = "tool result must be losslessly JSON-serializable"


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


def _require(state: ExecState, stage: int, name: str) -> None:
    if state.stage != stage:
        raise RuntimeError(f"execution is not ready for {name}")


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
    state.active = True  # stage 1 runs: finish() refuses its call until it ends
    try:
        # The caller's own cancellation is noticed before check A (runtime.md §7.2 step 1).
        await trio.lowlevel.checkpoint_if_cancelled()
        if state.stage0_error is not None:
            return _needs_finish(state, execution, state.stage0_error)
        abort = execution.abort
        if abort._aborted:  # check A
            return _needs_finish(state, execution, aborted_result(False, (), abort._reason))
        registry = state.runtime._registry
        scope = execution.scope
        if scope is None and not registry.global_owner.guards:
            hooks = registry.global_owner.fns["pre"]
            if not hooks:
                # Nothing can deny or await, so the Abort cannot have fired since check A.
                state.stage = Stage.READY
                return ReadyToDispatch(execution)
        try:
            hooks = registry.hooks("pre", scope)
            decision = await _run_pre(hooks, 0, execution) if hooks else _ALLOW
            denial: str | None
            if type(decision) is Ask:
                denial, cancelled = await resolve_ask(
                    state.runtime.approval, execution, decision.reason
                )
                if cancelled and _fired(abort):  # check B
                    return _needs_finalize(
                        state, execution, aborted_result(False, (), abort._reason)
                    )
            elif type(decision) is Deny:
                denial = decision.reason
            else:
                denial = None
            if denial is None:
                denial = _evaluate_guards(registry, execution)
            if denial is not None:
                return _needs_finalize(state, execution, _denial_result(denial))
            if _fired(abort):  # check C
                return _needs_finalize(state, execution, aborted_result(False, (), abort._reason))
        except Exception as exc:
            return _needs_finish(state, execution, error_result(exc))
        state.stage = Stage.READY
        return ReadyToDispatch(execution)
    finally:
        state.active = False


def _fired(abort: Abort) -> bool:
    # A call, not an attribute: the abort may fire at any await, and a type checker must
    # not narrow it away between two checks.
    return abort._aborted


def _needs_finish(state: ExecState, execution: ToolExecution, result: ToolResult) -> NeedsFinish:
    state.stage = Stage.NEEDS_FINISH
    return NeedsFinish(execution, result)


def _needs_finalize(
    state: ExecState, execution: ToolExecution, result: ToolResult
) -> NeedsFinalize:
    state.stage = Stage.NEEDS_FINALIZE
    return NeedsFinalize(execution, result)


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


# -- stage 2 ------------------------------------------------------------------------------


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
    _require(state, Stage.READY, "dispatch")
    state.stage = Stage.DISPATCHING
    state.active = True
    try:
        hooks = state.runtime._registry.hooks("execute", execution.scope)
        if hooks:
            result = await _run_wrappers(hooks, 0, execution)
            result = _normalize(state, execution, result)
        else:
            # No wrapper: the body's result is final as it is, nothing to normalize.
            result = await _run_body(execution)
    except Exception as exc:
        # A wrapper failed (or normalization did): final, and the deferred contexts go.
        return _needs_finish(state, execution, error_result(exc))
    finally:
        state.ctx_active = state.active = False
    return _dispatched(state, execution, result)


def _dispatched(state: ExecState, execution: ToolExecution, result: ToolResult) -> NeedsFinalize:
    return _needs_finalize(state, execution, _dispatch_tail(state, execution, result))


def _dispatch_tail(state: ExecState, execution: ToolExecution, result: ToolResult) -> ToolResult:
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
    _require(state, Stage.READY, "dispatch")
    if state.runtime._registry.hooks("execute", execution.scope):
        return None
    state.stage = Stage.DISPATCHING
    return _dispatch_shared(state, execution)


async def _dispatch_shared(
    state: ExecState, execution: ToolExecution
) -> NeedsFinalize | NeedsFinish | ReadyToDispatch:
    """:func:`dispatch` with no wrapper and without the per-call scope, in one frame.

    The task's nursery scope is linked to the Abort, so a ``Cancelled`` out of the body
    while the Abort has fired is that scope's.
    """
    registry = state.runtime._registry
    scope = execution.scope
    if registry.hooks("execute", scope):
        # Stage 2 starts now, and a wrapper was registered since the driver chose this
        # path: hand the call back, still ready, for dispatch() outside the shared scope.
        state.stage = Stage.READY
        return ReadyToDispatch(execution)
    # Only while this frame runs (a coroutine never run leaves the call finishable).
    state.active = True
    abort = execution.abort
    try:
        # Check D1, then the live definition (as _run_body does).
        defn: Any = None if abort._aborted else registry.resolve(execution.name, scope)
        if defn is None:
            if _fired(abort):
                result = aborted_result(False, (), abort._reason)
            else:
                result = error_result(ToolNotFoundError(execution.name))
        else:
            # Check D2. The shared scope is cancelled only by the Abort, which check D1 just
            # saw unfired with no checkpoint since: only an enclosing scope can raise here.
            await trio.lowlevel.checkpoint_if_cancelled()
            state.body_started = True
            state.completed = False
            try:
                value = await defn.execute(execution.arguments, ToolRunContext._make(execution))
            except Exception as exc:
                # Kept even when the abort caused it: any error beats cancellation.
                result = error_result(exc)
            except trio.Cancelled:
                if not _fired(abort):
                    raise  # the caller's cancellation
                # What the per-call scope would have absorbed. (If the caller's scope is
                # cancelled too, its Cancelled reaches the driver at its next checkpoint, and
                # the cancellation bookkeeping turns this ABORTED into the same ABORTED.)
                result = aborted_result(True, (), abort._reason)
            except BaseExceptionGroup as group:
                if not _fired(abort):
                    raise
                # A body's own nursery: strip the Abort's Cancelled as a scope's exit would;
                # what remains is the body's error (decision 20), or propagates if it is
                # not an Exception.
                rest = group.split(trio.Cancelled)[1]
                if rest is None:
                    result = aborted_result(True, (), abort._reason)
                elif isinstance(rest, Exception):
                    result = error_result(rest)
                else:
                    raise rest from None
            else:
                result = _body_outcome(state, execution, defn, value)
    except Exception as exc:
        return _needs_finish(state, execution, error_result(exc))
    finally:
        state.ctx_active = state.active = False
    if state.deferred or _fired(abort):
        result = _dispatch_tail(state, execution, result)
    return _needs_finalize(state, execution, result)


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


_NO_VALUE: Final[Any] = object()


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
    result = await _run_body(execution)
    if state.canonical is None:
        state.canonical = [result]
    else:
        state.canonical.append(result)
    return result


def _body_outcome(
    state: ExecState, execution: ToolExecution, defn: ToolDefinition, value: object
) -> ToolResult:
    """Stage 2 after a body that returned ``value``: the success, then check E (§7.4 6)."""
    try:
        result = build_success(defn, execution, state, value)
    except ToolOutputError as exc:
        return error_result(exc)
    abort = execution.abort
    if _fired(abort):  # check E: returned after the Abort fired, so not completed
        return aborted_result(True, (), abort._reason)
    state.completed = True
    return result


async def _run_body(execution: ToolExecution) -> ToolResult:
    """Checks D1 and D2, the body in its per-call cancel scope, then check E."""
    state = execution._state
    abort = execution.abort
    if abort._aborted:  # check D1
        return aborted_result(False, (), abort._reason)
    defn = state.runtime._registry.resolve(execution.name, execution.scope)
    if defn is None:
        return error_result(ToolNotFoundError(execution.name))
    value = _NO_VALUE
    # The per-call cancel scope, linked to the Abort: what Abort.move_on_abort() does,
    # inlined because this is the hot path. No checkpoint since check D1, so the Abort cannot
    # have fired in between and registering the scope is enough.
    cancel_scope = trio.CancelScope()
    scopes = abort._scopes
    scopes[cancel_scope] = None
    try:
        with cancel_scope:
            # Check D2: an enclosing scope (a wrapper's, the caller's) already cancelled
            # raises here, before the body.
            await trio.lowlevel.checkpoint_if_cancelled()
            state.body_started = True
            # Only the body's last return counts (a wrapper may call call_next() again).
            state.completed = False
            try:
                value = await defn.execute(execution.arguments, ToolRunContext._make(execution))
            except Exception as exc:
                # Kept even when the abort caused it: any error beats cancellation.
                return error_result(exc)
    except Exception as exc:
        # The body's own nursery raised the Abort's Cancelled with errors, and the scope
        # took the Cancelled out of the group: the rest is the body's error (decision 20).
        return error_result(exc)
    finally:
        scopes.pop(cancel_scope, None)
    if value is _NO_VALUE:
        # The per-call scope absorbed the Cancelled the Abort caused.
        return aborted_result(True, (), abort._reason)
    return _body_outcome(state, execution, defn, value)


def _normalize(state: ExecState, execution: ToolExecution, result: ToolResult) -> ToolResult:
    if result.is_error or state.is_canonical(result):
        return result
    # A success the base did not produce (short-circuit, cache, evolve): rebuild it from its
    # value against the live definition; its content, meta and concludes_turn are ignored.
    defn = state.runtime._registry.resolve(execution.name, execution.scope)
    if defn is None:
        raise ToolNotFoundError(execution.name)
    rebuilt = build_success(defn, execution, state, result.value)
    return replace_contexts(rebuilt, result.additional_contexts)


def build_success(
    defn: ToolDefinition, execution: ToolExecution, state: ExecState, value: object
) -> ToolResult:
    """Build a success from a raw value (runtime.md §7.6).

    Raises:
        ToolOutputError: at the first failing step.
    """
    name = execution.name
    try:
        frozen = freeze_json(value)
    except TypeError:
        raise ToolOutputError(name, ["value is not lossless JSON"]) from None
    output = defn.output
    violations = output._validator.validate_frozen(frozen, "value")
    if violations:
        raise ToolOutputError(name, violations)
    arguments = execution.arguments
    try:
        blocks = output.render(arguments, frozen)
    except Exception as exc:
        raise ToolOutputError(name, [f"output.render failed: {normalize_message(exc)}"]) from exc
    content = _as_blocks(blocks)
    if content is None:
        close_awaitable(blocks)
        raise ToolOutputError(
            name,
            [
                f"output.render returned {type(blocks).__name__}; "
                "expected a sequence of content blocks"
            ],
        )
    if not blocks_lossless(content):
        raise ToolOutputError(name, ["output.render returned non-lossless JSON"])
    meta = None
    presentation_meta = output.presentation_meta
    if presentation_meta is not None and execution.parent is None:
        try:
            raw_meta = presentation_meta(arguments, frozen)
        except Exception as exc:
            raise ToolOutputError(
                name, [f"output.presentation_meta failed: {normalize_message(exc)}"]
            ) from exc
        if raw_meta is not None:
            try:
                meta = freeze_json(raw_meta)
            except TypeError:
                close_awaitable(raw_meta)
                raise ToolOutputError(
                    name, ["output.presentation_meta returned non-lossless JSON"]
                ) from None
    result = ToolResult._success(content, frozen, meta, state.concluded)
    # Every string of this result is checked above (its content) or frozen (value, meta):
    # stage 4 need not check this very object again.
    state.lossless = result
    return result


def _as_blocks(blocks: object) -> tuple[Any, ...] | None:
    """``blocks`` as a tuple of content blocks, or ``None`` if it is not a list/tuple of them."""
    kind = type(blocks)
    if kind is tuple:
        content: tuple[Any, ...] = blocks  # type: ignore[assignment]
    elif kind is list:
        content = tuple(blocks)  # type: ignore[arg-type]
    else:
        return None
    for block in content:
        if type(block) is not TextContent and type(block) is not ImageContent:
            return None
    return content


# -- execute() when nothing can intervene ------------------------------------------------


def unhooked(execution: ToolExecution) -> bool:
    """Whether :func:`execute` may run this execution's stages in its own frame.

    True for no scope, no stage-0 error, and no pre-execute hook, guard or wrapper
    registered: stages 1 and 2 then run no user code but the body.
    """
    if execution.scope is not None or execution._state.stage0_error is not None:
        return False
    owner = execution._state.runtime._registry.global_owner
    fns = owner.fns
    return not owner.guards and not fns["pre"] and not fns["execute"]


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
                result = _finish(execution, held)
        else:
            state.stage = Stage.PREPARING
            # The caller's own cancellation is noticed before check A (runtime.md §7.2 step
            # 1); nothing but the body runs after it, so it is check D2 as well.
            await trio.lowlevel.checkpoint_if_cancelled()
            if execution.abort._aborted:  # check A: final
                state.stage = Stage.NEEDS_FINISH
                result = _finish(execution, aborted_result(False, (), execution.abort._reason))
            else:
                # Stage 2 with no wrapper: _run_body's steps. No checkpoint since check A,
                # so check D1 cannot fire.
                state.stage = Stage.DISPATCHING
                state.active = True
                try:
                    defn: Any = runtime._registry.resolve(execution.name, None)
                    value: Any = _NO_VALUE
                    outcome: ToolResult | None = None  # the body's error result
                    final: ToolResult | None = None  # an error that skips post-execute
                    if defn is None:
                        outcome = error_result(ToolNotFoundError(execution.name))
                    else:
                        cancel_scope = trio.CancelScope()
                        scopes = execution.abort._scopes
                        scopes[cancel_scope] = None
                        try:
                            with cancel_scope:
                                state.body_started = True
                                try:
                                    value = await defn.execute(
                                        execution.arguments, ToolRunContext._make(execution)
                                    )
                                except Exception as exc:
                                    outcome = error_result(exc)
                        except Exception as exc:
                            # The rest of a group once the scope took its Cancelled: the
                            # body's error, as in _run_body (decision 20).
                            outcome = error_result(exc)
                        finally:
                            scopes.pop(cancel_scope, None)
                    if final is None:
                        try:
                            result = _unhooked_dispatch_result(
                                state, execution, defn, value, outcome
                            )
                        except Exception as exc:
                            final = error_result(exc)
                finally:
                    # Stage 2 is over, however it ended (dispatch() does the same).
                    state.ctx_active = state.active = False
                if final is not None:
                    state.stage = Stage.NEEDS_FINISH
                    result = _finish(execution, final)
                else:
                    held = result
                    state.stage = Stage.NEEDS_FINALIZE
                    if runtime._registry.global_owner.fns["post"]:
                        result = await finalize(NeedsFinalize(execution, result))
                    else:
                        # No post hook: check G would ask check F's question again, with
                        # nothing run since.
                        state.stage = Stage.FINALIZING
                        result = _finish(execution, result)
    except BaseException as exc:
        # Native cancellation: finish the call with its cancellation result (observers
        # run, no blocking), then let the same Cancelled go on. KeyboardInterrupt and
        # friends propagate at once, with no result.
        if is_cancellation(exc) and state.stage != Stage.FINISHED:
            _finish(execution, cancelled_result(execution, held))
        raise
    await trio.lowlevel.cancel_shielded_checkpoint()
    return result


def _unhooked_dispatch_result(
    state: ExecState,
    execution: ToolExecution,
    defn: ToolDefinition | None,
    value: object,
    outcome: ToolResult | None,
) -> ToolResult:
    """Stage 2's result in :func:`execute`'s unhooked path: the body's outcome (as
    :func:`_run_body` makes it), then contexts and check F (as :func:`dispatch`)."""
    if outcome is not None:
        result = outcome
    elif value is _NO_VALUE:
        # The per-call scope absorbed the Cancelled the Abort caused.
        result = aborted_result(True, (), execution.abort._reason)
    else:
        assert defn is not None
        result = _body_outcome(state, execution, defn, value)
    if state.deferred or execution.abort._aborted:
        result = _dispatch_tail(state, execution, result)
    return result


# -- stage 3 ------------------------------------------------------------------------------


async def finalize(step: NeedsFinalize) -> ToolResult:
    """Stage 3 (post-execute, check G) followed by stage 4 (:func:`finish`)."""
    if type(step) is not NeedsFinalize:
        raise TypeError(f"finalize() expects a NeedsFinalize, got {type(step).__name__}")
    execution = step.execution
    state = execution._state
    if state.stage != Stage.NEEDS_FINALIZE:
        raise RuntimeError("execution is not ready for finalize")
    state.stage = Stage.FINALIZING
    result = step.result
    registry = state.runtime._registry
    scope = execution.scope
    hooks = registry.global_owner.fns["post"] if scope is None else registry.hooks("post", scope)
    if hooks:
        state.active = True
        try:
            decision = await _run_post(hooks, 0, execution, result)
            result = _apply_post(state, execution, result, decision)
        except Exception as exc:
            # The error wins: no cancellation override (runtime.md §7.5 step 5).
            state.active = False
            return _finish(execution, error_result(exc))
        finally:
            state.active = False
    abort = execution.abort
    if abort._aborted and not result.is_error and not state.completed:  # check G
        result = aborted_result(state.body_started, result.additional_contexts, abort._reason)
    return _finish(execution, result)


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


# -- stage 4 ------------------------------------------------------------------------------


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
    return _finish(execution, result)


def _finish(execution: ToolExecution, result: ToolResult) -> ToolResult:
    # Stage 4 without the running check: for the stages themselves.
    state = execution._state
    if state.stage == Stage.FINISHED:
        raise RuntimeError("execution already finished")
    if type(result) is not ToolResult:
        raise TypeError(f"finish() expects a ToolResult, got {type(result).__name__}")
    state.stage = Stage.FINISHED
    state.ctx_active = False
    if result is not state.lossless and not result_strings_lossless(result):
        result = error_result(TypeError(_RESULT_NOT_LOSSLESS))
    # Recorded before user code runs: if a finalizer or an observer raises a BaseException
    # out of here, the driver still knows the call's result (finished_result()).
    state.final = result
    finalizer = state.finalizer
    if finalizer is not None:
        state.finalizer = None
        result = state.final = _run_finalizer(finalizer, execution, result)
    registry = state.runtime._registry
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
        content = _as_blocks(replacement)
        if content is None:
            close_awaitable(replacement)
            raise TypeError(
                f"finalize_content returned {type(replacement).__name__}; expected a sequence "
                "of content blocks or None"
            )
        if not blocks_lossless(content):
            raise TypeError(_RESULT_NOT_LOSSLESS)
        return replace_content(result, content)
    except Exception as exc:
        return error_result(exc)


def _notify(observer: Callable[..., Any], execution: ToolExecution, result: ToolResult) -> None:
    try:
        returned = observer(execution, result)
    except Exception as exc:
        message = normalize_message(exc)
    else:
        if returned is None or not inspect.isawaitable(returned):
            return
        close_awaitable(returned)
        message = "observer returned an awaitable; observers must be synchronous"
    logger.warning(
        'tool "%s" (%s): tools/result observer failed: %s',
        execution.name,
        execution.call_id,
        message,
    )


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


def is_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is native cancellation: ``trio.Cancelled``, or a group holding one
    and no non-``Exception`` other than ``Cancelled``."""
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, Exception) or not isinstance(exc, BaseExceptionGroup):
        return False
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        elif not isinstance(current, (Exception, trio.Cancelled)):
            return False
    return True
