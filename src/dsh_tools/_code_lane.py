"""The sub-call lane of one ``run_code`` execution: Code Mode as a client of the lane.

A program's tool calls arrive through :meth:`SubCalls.dispatch` while it runs; each accepted
call joins an open queue of the one lane (``_lane.Lane``), which starts, pools, orders and
commits it exactly as it does a model batch's calls (code-mode §5). What this module adds is
what is about a program: acceptance and its refusals, the sub-call ids, the
``tools/code-dispatch*`` events, carrying contexts and ``conclude_turn`` to the ``run_code``
call, the program's waiting tasks, settlement and the cancellation bookkeeping.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, final

import attrs
import trio

from ._abort import Abort
from ._calls import ToolCall
from ._code_events import (
    CODE_DISPATCH,
    CODE_DISPATCH_LOG,
    CODE_DISPATCH_START,
    CodeDispatch,
    CodeDispatchStart,
    code_hooks,
    emit_code_dispatch,
    emit_code_dispatch_start,
    logged_content,
)
from ._code_values import CODE_MODE_SOURCE, ToolCallError
from ._content import ImageContent, UserMessage
from ._json import freeze_json
from ._lane import Lane
from ._lane_client import _Waiter

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

    from ._calls import ToolExecution, ToolRunContext
    from ._code_values import CodeRunLimits
    from ._definition import ExecutionMode
    from ._json import JsonValue
    from ._results import ToolResult
    from ._runtime import ToolRuntime

__all__ = ["ABORTED_REASON", "SETTLED_REASON", "SubCalls"]

#: Why calls are refused once the program has ended (code-mode §5.5) ...
SETTLED_REASON = "run_code settled"
#: ... or once ``run_code`` was cancelled (§5.6).
ABORTED_REASON = "run_code aborted"

_NOT_LOSSLESS_PREFIX = "not lossless JSON: "


@final
class _SubCall:
    """One accepted call: its ``ToolCall`` and the program's task waiting for it."""

    __slots__ = ("call", "error", "execution", "resolved", "value", "waiter")

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        #: Set when the lane starts it (every committed call was started).
        self.execution: ToolExecution | None = None
        self.waiter = _Waiter()
        self.resolved = False
        self.value: JsonValue = None
        self.error: ToolCallError | None = None

    def resolve(self, value: JsonValue, error: ToolCallError | None) -> None:
        # A waiter whose task was cancelled is gone: the outcome is simply dropped.
        self.value = value
        self.error = error
        self.resolved = True
        self.waiter.wake()


@final
class SubCalls:
    """The lane client of one ``run_code`` execution (code-mode §5).

    Args:
        runtime: The runtime (its ``max_parallel_sub_calls`` is read now).
        ctx: The ``run_code`` call's context: the sub-calls' scope, parent and ids, and
            where their contexts and ``conclude_turn`` go.
        limits: The run's limits (``max_sub_calls`` is enforced here).
        tools: The bound names: the only names a program may call.

    Set :attr:`lane`'s ``nursery`` and start :meth:`drive` in it, hand :meth:`dispatch`
    to the code runtime, then :meth:`settle` when ``run`` has ended (or
    :meth:`bookkeep` after a cancellation, once the nursery has exited).
    """

    __slots__ = (
        "abort",
        "accepted",
        "bookkeeping",
        "bound",
        "completed",
        "ctx",
        "lane",
        "max_sub_calls",
        "over",
        "registry",
        "sub_calls",
    )

    def __init__(
        self,
        runtime: ToolRuntime,
        ctx: ToolRunContext,
        limits: CodeRunLimits,
        tools: Iterable[str],
    ) -> None:
        self.ctx = ctx
        self.registry = runtime._registry
        self.bound = frozenset(tools)
        self.max_sub_calls = limits.max_sub_calls
        #: The run Abort: one per execution, shared by its sub-calls (never the outer one).
        self.abort = Abort()
        self.lane = Lane(
            runtime,
            self,
            abort=self.abort,
            max_parallel=runtime.max_parallel_sub_calls,
            open_queue=True,
        )
        self.accepted = 0
        #: Accepted calls not yet resolved, by queue index (= number - 1).
        self.sub_calls: dict[int, _SubCall] = {}
        #: Why new calls are refused: ``None`` while the program runs.
        self.over: str | None = None
        #: The cancellation bookkeeping runs: commits must not wait.
        self.bookkeeping = False
        #: The lane's loop ended normally and every call is resolved.
        self.completed = False

    # -- acceptance (code-mode §5.1) ------------------------------------------------------

    async def dispatch(self, name: str, args: object) -> JsonValue:
        """Submit one tool call of the program and wait for its value (the ``Dispatch``).

        A checkpoint on every path. Cancelling the waiting task never withdraws an
        accepted call: the lane still starts (or abandons) and commits it.

        Raises:
            ToolCallError: the call was refused, or the sub-call failed.
        """
        # A task cancelled before it calls submits nothing.
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            call = self._accept(name, args)
        except ToolCallError:
            await trio.lowlevel.checkpoint()
            raise
        sub_call = _SubCall(call)
        self.sub_calls[self.accepted - 1] = sub_call
        self.lane.extend()
        await sub_call.waiter.wait()
        if sub_call.error is not None:
            raise sub_call.error
        return sub_call.value

    def _accept(self, name: str, args: object) -> ToolCall:
        if self.over is not None:
            raise ToolCallError(name, _abandoned(self.over, name))
        if name not in self.bound:
            raise ToolCallError(name, f'unknown tool "{name}"')
        try:
            arguments = freeze_json(args)
        except TypeError as exc:
            reason = str(exc).removeprefix(_NOT_LOSSLESS_PREFIX)
            raise ToolCallError(name, f"tool arguments must be lossless JSON ({reason})") from None
        if self.accepted >= self.max_sub_calls:
            raise ToolCallError(
                name, f"run_code sub-call limit reached ({self.max_sub_calls} calls)"
            )
        self.accepted += 1
        ctx = self.ctx
        return ToolCall(
            call_id=f"{ctx.call_id}:code:{self.accepted}",
            name=name,
            arguments=arguments,
            scope=ctx.scope,
            abort=self.abort,
            root_call_id=ctx.root_call_id,
            parent=ctx.token,
        )

    # -- the lane's client ----------------------------------------------------------------

    def call_at(self, index: int) -> ToolCall:
        """The accepted call at queue position ``index`` (built once, at acceptance)."""
        return self.sub_calls[index].call

    def on_start(
        self, index: int, execution: ToolExecution, mode: ExecutionMode
    ) -> ToolResult | None:
        """Emit ``tools/code-dispatch-start`` (no checkpoint since ``create``)."""
        self.sub_calls[index].execution = execution
        ctx = self.ctx
        observers = code_hooks(self.registry, ctx.scope, CODE_DISPATCH_START)
        if observers:  # nobody listens: no record is built
            emit_code_dispatch_start(observers, CodeDispatchStart(**_fields(ctx, execution)))
        return None

    def on_commit(
        self, index: int, result: ToolResult, mode: ExecutionMode | None
    ) -> Awaitable[None] | None:
        """Commit a sub-call (§5.4): the log waterfall, then :meth:`_record` it.

        The bookkeeping must not wait, so it logs the content as it is (§5.6).
        """
        sub_call = self.sub_calls.pop(index)
        if not self.bookkeeping:
            hooks = code_hooks(self.registry, self.ctx.scope, CODE_DISPATCH_LOG)
            if hooks:
                return self._log_and_record(hooks, sub_call, result)
        self._record(sub_call, result, None)
        return None

    async def _log_and_record(
        self, hooks: tuple[Callable[..., Any], ...], sub_call: _SubCall, result: ToolResult
    ) -> None:
        event = self._event(sub_call, result)
        content = event.content
        try:
            content = await logged_content(hooks, event)
        finally:
            # Cancelled while a log hook awaited: the call is committed all the same.
            if content is not event.content:
                event = attrs.evolve(event, content=content)
            self._record(sub_call, result, event)

    def _event(self, sub_call: _SubCall, result: ToolResult) -> CodeDispatch:
        execution = sub_call.execution
        assert execution is not None
        return CodeDispatch(
            **_fields(self.ctx, execution),
            is_error=result.is_error,
            content=result.content,
            result=result,
        )

    def _record(self, sub_call: _SubCall, result: ToolResult, event: CodeDispatch | None) -> None:
        """Emit ``tools/code-dispatch`` (``event``, or one with the result's own content),
        carry contexts and ``conclude_turn`` to the ``run_code`` call, and resolve the
        program's waiting task."""
        ctx = self.ctx
        try:
            observers = code_hooks(self.registry, ctx.scope, CODE_DISPATCH)
            if observers:
                emit_code_dispatch(observers, event or self._event(sub_call, result))
        finally:
            # A KeyboardInterrupt from an observer: the commit is completed first.
            for message in result.additional_contexts:
                ctx.defer_context(message)
            error = result.error
            if error is None:
                if any(type(block) is ImageContent for block in result.content):
                    ctx.defer_context(UserMessage(content=result.content, source=CODE_MODE_SOURCE))
                if result.concludes_turn:
                    ctx.conclude_turn()
                sub_call.resolve(result.value, None)
            else:
                sub_call.resolve(None, ToolCallError(sub_call.call.name, error.message))

    # -- the driver, settlement and bookkeeping (§5.5, §5.6) ------------------------------

    @trio.lowlevel.enable_ki_protection
    async def drive(self) -> None:
        """The lane's driver task: run the lane, then refuse what it never started."""
        lane = self.lane
        if await lane.run():
            self._refuse_unstarted()
            self.completed = True
        elif lane.failure is not None and lane.nursery is not None:
            # An internal failure: nothing more starts or commits, so the program must not
            # wait for its calls; stop it (the bookkeeping then finishes what was started).
            lane.nursery.cancel_scope.cancel()

    def settle(self) -> None:
        """The program has ended: refuse new calls, abort running ones (§5.5).

        The lane then commits everything started and :meth:`drive` refuses the queue.
        """
        self._stop(SETTLED_REASON)

    @trio.lowlevel.enable_ki_protection
    def bookkeep(self) -> None:
        """After a cancellation (once the lane's tasks have ended): finish every started,
        uncommitted sub-call with its cancelled result and refuse the rest (§5.6)."""
        self._stop(ABORTED_REASON)
        self.bookkeeping = True
        self.lane.bookkeep()
        self._refuse_unstarted()

    def _stop(self, reason: str) -> None:
        if self.over is None:
            self.over = reason
        self.lane.close()
        self.abort.abort(reason)

    def _refuse_unstarted(self) -> None:
        reason = self.over
        assert reason is not None
        lane = self.lane
        while (index := lane.take_unstarted()) is not None:
            sub_call = self.sub_calls.pop(index)
            name = sub_call.call.name
            sub_call.resolve(None, ToolCallError(name, _abandoned(reason, name)))


def _abandoned(reason: str, name: str) -> str:
    return f"run_code run is over ({reason}); {name} tool call abandoned"


def _fields(ctx: ToolRunContext, execution: ToolExecution) -> dict[str, Any]:
    """The fields both code-dispatch records share (code-mode §6.1)."""
    return {
        "root_call_id": ctx.root_call_id,
        "parent_call_id": ctx.call_id,
        "sub_call_id": execution.call_id,
        "name": execution.name,
        "arguments": execution.arguments,
        "execution": execution,
    }
