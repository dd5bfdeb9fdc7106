"""Recording a batch as a trace: its sink events, hook spans, body spans and notifications.

What the recorder keeps is checked by :func:`~dsh_sched.testing.check_trace`
(``_trace_checker``), and drawn by :func:`~dsh_sched.testing.render_timeline`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias, final

import attrs
import trio

from dsh_tools import (
    CodeDispatch,
    CodeDispatchStart,
    ExecutionMode,
    ExecutionToken,
    ToolCall,
    ToolDefinition,
    ToolResult,
)

if TYPE_CHECKING:
    from dsh_tools import (
        CallNext,
        Disposer,
        JsonValue,
        PostDecision,
        PreDecision,
        ToolExecution,
        ToolRunContext,
        ToolRuntime,
    )

    from ._sinks import CallCommitted, CallStarted, ContextAccepted, Sink

__all__ = [
    "SINK_KINDS",
    "SUB_CALL_KINDS",
    "SubCallStart",
    "TraceEvent",
    "TraceKind",
    "TraceRecorder",
    "sub_call_mode",
]

TraceKind: TypeAlias = Literal[
    "call",
    "result",
    "context",
    "pre_start",
    "pre_end",
    "post_start",
    "post_end",
    "body_start",
    "body_end",
    "observed",
    "sub_call",
    "sub_result",
]

SINK_KINDS = frozenset({"call", "result", "context"})

#: The kinds that record Code Mode sub-calls (``tools/code-dispatch-start`` and
#: ``tools/code-dispatch``); they carry the sub-call's token, never a batch index.
SUB_CALL_KINDS = frozenset({"sub_call", "sub_result"})


@final
@attrs.frozen(kw_only=True)
class SubCallStart:
    """The detail of a ``sub_call`` trace event: a Code Mode sub-call started.

    Attributes:
        event: The ``tools/code-dispatch-start`` record.
        mode: How the sub-call classifies (``runtime.execution_mode`` of its call, asked
            when the start was observed, with no checkpoint since the lane's own decision).
    """

    event: CodeDispatchStart
    mode: ExecutionMode


@final
@attrs.frozen(kw_only=True)
class TraceEvent:
    """One thing that happened during a batch.

    Attributes:
        kind: ``call``, ``result``, ``context`` (sink events); ``pre_start``/``pre_end``,
            ``post_start``/``post_end`` (hook spans), ``body_start``/``body_end`` (body
            spans), ``observed`` (a result observer notification), ``sub_call`` /
            ``sub_result`` (a Code Mode sub-call started / settled).
        batch: The batch number for sink events; ``None`` for hook and body events.
        index: The call's position for sink events; ``None`` for hook and body events.
        token: The execution token (``None`` for synthetic calls); ties hook and body
            events to the ``call`` event that carries the same token.
        time: ``trio.current_time()`` when it was recorded.
        detail: The sink event (``CallStarted``/``CallCommitted``/``ContextAccepted``),
            the observed ``ToolResult``, for ``body_end`` how the body ended
            (``"returned"``, ``"raised"``, ``"cancelled"``), a :class:`SubCallStart` for
            ``sub_call`` and the ``CodeDispatch`` record for ``sub_result``; ``None``
            otherwise.
    """

    kind: TraceKind
    batch: int | None
    index: int | None
    token: ExecutionToken | None
    time: float
    detail: object = None


def sub_call_mode(runtime: ToolRuntime, event: CodeDispatchStart) -> ExecutionMode:
    """How a Code Mode sub-call classifies, asked from its start event.

    The lane classifies a sub-call and starts it with no checkpoint in between, and the
    start event follows with none either, so this is the mode it started under (for
    classifiers that depend only on the call).
    """
    execution = event.execution
    call = ToolCall(
        call_id=event.sub_call_id,
        name=event.name,
        arguments=event.arguments,
        scope=execution.scope,
        parent=execution.parent,
    )
    return runtime.execution_mode(call)


@final
class TraceRecorder:
    """Records a batch's sink events, hook spans, body spans and result notifications.

    Installs, on ``runtime``, one global pre-execute hook, one post-execute hook, one
    result observer and the two Code Mode sub-call observers; register it before other hooks
    so that its spans are outermost. Use
    it as the batch's sink: it records every event, then forwards it to ``sink``. Tool
    bodies are recorded only for definitions passed through :meth:`instrument`.

    Args:
        runtime: The runtime to observe.
        sink: A sink to forward every event to, after recording it.

    Example:
        >>> import trio
        >>> from dsh_tools import ToolRuntime, tool
        >>> from dsh_sched import ModelToolCall, run_tool_calls
        >>> from dsh_sched.testing import TraceRecorder, check_trace
        >>> @tool
        ... async def ping() -> str:
        ...     '''Answer pong.'''
        ...     return "pong"
        >>> runtime = ToolRuntime()
        >>> recorder = TraceRecorder(runtime)
        >>> _ = runtime.register(recorder.instrument(ping))
        >>> calls = [ModelToolCall(call_id="c1", name="ping", arguments="")]
        >>> async def main():
        ...     return await run_tool_calls(runtime, calls, sink=recorder)
        >>> outcome = trio.run(main)
        >>> check_trace(recorder.events, max_parallel=10, outcome=outcome)
        >>> [event.kind for event in recorder.events]  # doctest: +NORMALIZE_WHITESPACE
        ['call', 'pre_start', 'pre_end', 'body_start', 'body_end', 'post_start', 'post_end',
         'observed', 'result']
    """

    def __init__(self, runtime: ToolRuntime, *, sink: Sink | None = None) -> None:
        self.events: list[TraceEvent] = []
        self._sink = sink
        self._tokens: dict[tuple[int, int], ExecutionToken] = {}
        self._disposers: list[Disposer] = [
            runtime.on_pre_execute(self._pre),
            runtime.on_post_execute(self._post),
            runtime.on_result(self._observed),
            runtime.on_code_dispatch_start(self._sub_call),
            runtime.on_code_dispatch(self._sub_result),
        ]
        self._runtime = runtime

    def close(self) -> None:
        """Remove the recorder's hooks from the runtime (idempotent)."""
        for dispose in reversed(self._disposers):
            dispose()

    def _record(
        self,
        kind: TraceKind,
        token: ExecutionToken | None,
        detail: object = None,
        *,
        batch: int | None = None,
        index: int | None = None,
    ) -> None:
        self.events.append(
            TraceEvent(
                kind=kind,
                batch=batch,
                index=index,
                token=token,
                time=trio.current_time(),
                detail=detail,
            )
        )

    async def _pre(self, execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        self._record("pre_start", execution.token)
        try:
            return await call_next()
        finally:
            self._record("pre_end", execution.token)

    async def _post(
        self, execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        self._record("post_start", execution.token)
        try:
            return await call_next()
        finally:
            self._record("post_end", execution.token)

    def _observed(self, execution: ToolExecution, result: ToolResult) -> None:
        self._record("observed", execution.token, result)

    def _sub_call(self, event: CodeDispatchStart) -> None:
        mode = sub_call_mode(self._runtime, event)
        self._record("sub_call", event.execution.token, SubCallStart(event=event, mode=mode))

    def _sub_result(self, event: CodeDispatch) -> None:
        self._record("sub_result", event.execution.token, event)

    def instrument(self, defn: ToolDefinition) -> ToolDefinition:
        """Return a copy of ``defn`` whose body records ``body_start`` and ``body_end``.

        Args:
            defn: The definition to copy.

        Returns:
            A new definition, identical except for its ``execute``.
        """
        original = defn.execute
        record = self._record

        async def execute(args: JsonValue, ctx: ToolRunContext) -> object:
            token = ctx.token
            record("body_start", token)
            ending = "raised"
            try:
                value = await original(args, ctx)
            except trio.Cancelled:
                ending = "cancelled"
                raise
            else:
                ending = "returned"
            finally:
                record("body_end", token, ending)
            return value

        copy: ToolDefinition = attrs.evolve(defn, execute=execute)
        return copy

    def on_call(self, event: CallStarted) -> None:
        """Record a ``call`` event, then forward it."""
        if event.token is not None:
            self._tokens[event.batch, event.index] = event.token
        self._record("call", event.token, event, batch=event.batch, index=event.index)
        if self._sink is not None:
            self._sink.on_call(event)

    def on_result(self, event: CallCommitted) -> None:
        """Record a ``result`` event (with the token of its ``call``), then forward it."""
        token = self._tokens.pop((event.batch, event.index), None)
        self._record("result", token, event, batch=event.batch, index=event.index)
        if self._sink is not None:
            self._sink.on_result(event)

    def on_context(self, event: ContextAccepted) -> None:
        """Record a ``context`` event, then forward it."""
        self._record("context", None, event, batch=event.batch, index=event.index)
        if self._sink is not None:
            self._sink.on_context(event)
