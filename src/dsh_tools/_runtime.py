"""``ToolRuntime``: registration, views and ``execute()``."""

from __future__ import annotations

from typing import TYPE_CHECKING, final

from ._calls import ToolCall
from ._definition import ExecutionMode, ToolDefinition, ToolSchema, classify
from ._json import freeze_json, thaw_json
from ._pipeline import execute
from ._registry import Registry, check_callable
from ._scope import Scope
from ._statistics import RuntimeStatistics, runtime_statistics

if TYPE_CHECKING:
    from ._approval import ApprovalService
    from ._code_events import (
        CodeDispatchLogHook,
        CodeDispatchObserver,
        CodeDispatchStartObserver,
    )
    from ._disposer import Disposer
    from ._hooks import (
        ChangeObserver,
        ExecuteWrapper,
        Guard,
        PostExecuteHook,
        PreExecuteHook,
        ResultObserver,
    )

__all__ = ["ToolRuntime"]


def _check_scope(runtime: ToolRuntime, scope: object) -> Scope | None:
    if scope is None:
        return None
    if type(scope) is not Scope:
        raise TypeError(f"scope must be a Scope or None, got {type(scope).__name__}")
    if scope.runtime is not runtime:
        raise ValueError("scope belongs to a different runtime")
    return scope


@final
class ToolRuntime:
    """The tool runtime: an explicit registry of tools, scopes, guards and hooks.

    There is no global instance: create one per application (or per test). Registration is
    synchronous and may happen before ``trio.run``; :meth:`execute` runs inside trio. A
    runtime and its scopes are not thread-safe.

    Args:
        approval: The service that resolves ``Ask`` decisions (a plain attribute, read at
            ask time, so it may be assigned later).

    Example:
        >>> runtime = ToolRuntime()
        >>> runtime.register(echo)  # doctest: +SKIP
        >>> result = await runtime.execute(ToolCall(call_id="c1", name="echo"))  # doctest: +SKIP
    """

    __slots__ = ("_registry", "approval")

    def __init__(self, *, approval: ApprovalService | None = None) -> None:
        self.approval = approval
        self._registry = Registry()

    def __repr__(self) -> str:
        return f"<ToolRuntime with {len(self._registry.global_owner.layer)} global tools>"

    def open_scope(self, *, parent: Scope | None = None, name: str | None = None) -> Scope:
        """Open a scope (an agent, a preset, a sub-agent), created at once; ``with`` is optional.

        Raises:
            TypeError: ``parent`` is not a ``Scope``/``None`` or ``name`` not a ``str``/``None``.
            ValueError: ``parent`` belongs to a different runtime.
            RuntimeError: ``parent`` is closed.
        """
        if parent is not None and type(parent) is not Scope:
            raise TypeError(f"parent must be a Scope or None, got {type(parent).__name__}")
        if name is not None and type(name) is not str:
            raise TypeError(f"name must be a str or None, got {type(name).__name__}")
        if parent is not None:
            if parent.runtime is not self:
                raise ValueError("parent scope belongs to a different runtime")
            if parent.closed:
                raise RuntimeError("scope is closed")
        return Scope._make(self, self._registry, parent, name)

    def register(self, defn: ToolDefinition) -> Disposer:
        """Register a tool in the global layer, visible to every scope that does not hide it.

        Raises:
            TypeError: ``defn`` is not a ``ToolDefinition``.
            ValueError: the name is ``run_code`` or already registered globally.
        """
        return self._registry.register(
            self._registry.global_owner, defn, scoped=False, owned_by=None
        )

    def guard(self, fn: Guard) -> Disposer:
        """Add a global synchronous deny-only guard: ``fn(execution)`` returns ``None`` or a reason.

        Raises:
            TypeError: ``fn`` is not callable, or is a coroutine function.
        """
        return self._registry.add_guard(self._registry.global_owner, fn, None)

    def on_pre_execute(self, fn: PreExecuteHook) -> Disposer:
        """Add a global ``tools/pre-execute`` waterfall hook (sees every call)."""
        check_callable(fn, "on_pre_execute")
        return self._registry.add_hook(self._registry.global_owner, "pre", fn, None)

    def wrap_execute(self, fn: ExecuteWrapper) -> Disposer:
        """Add a global ``tools/execute`` wrapper around dispatch (timeouts, retries, metrics)."""
        check_callable(fn, "wrap_execute")
        return self._registry.add_hook(self._registry.global_owner, "execute", fn, None)

    def on_post_execute(self, fn: PostExecuteHook) -> Disposer:
        """Add a global ``tools/post-execute`` waterfall hook."""
        check_callable(fn, "on_post_execute")
        return self._registry.add_hook(self._registry.global_owner, "post", fn, None)

    def on_result(self, fn: ResultObserver) -> Disposer:
        """Add a global synchronous ``tools/result`` observer of every final result."""
        check_callable(fn, "on_result", sync=True)
        return self._registry.add_hook(self._registry.global_owner, "result", fn, None)

    def on_change(self, fn: ChangeObserver) -> Disposer:
        """Add a synchronous ``tools/change`` observer, called when the visible tool set changes."""
        return self._registry.add_change_observer(fn, None)

    def on_code_dispatch_start(self, fn: CodeDispatchStartObserver) -> Disposer:
        """Add a global synchronous ``tools/code-dispatch-start`` observer (a Code Mode
        sub-call started)."""
        check_callable(fn, "on_code_dispatch_start", sync=True)
        return self._registry.add_hook(self._registry.global_owner, "code_dispatch_start", fn, None)

    def on_code_dispatch(self, fn: CodeDispatchObserver) -> Disposer:
        """Add a global synchronous ``tools/code-dispatch`` observer (a Code Mode sub-call
        settled)."""
        check_callable(fn, "on_code_dispatch", sync=True)
        return self._registry.add_hook(self._registry.global_owner, "code_dispatch", fn, None)

    def on_code_dispatch_log(self, fn: CodeDispatchLogHook) -> Disposer:
        """Add a global ``tools/code-dispatch-log`` waterfall hook (rewrites what the
        ``tools/code-dispatch`` event carries)."""
        check_callable(fn, "on_code_dispatch_log")
        return self._registry.add_hook(self._registry.global_owner, "code_dispatch_log", fn, None)

    def statistics(self) -> RuntimeStatistics:
        """A frozen snapshot of the runtime (see :class:`RuntimeStatistics`).

        Example:
            >>> runtime = ToolRuntime()
            >>> runtime.statistics().executions_in_flight
            0
        """
        return runtime_statistics(self._registry)

    def get(self, name: str, scope: Scope | None = None) -> ToolDefinition | None:
        """Return the definition of ``name`` visible from ``scope`` (or globally), or ``None``.

        Raises:
            TypeError: ``scope`` is not a ``Scope``/``None``.
            ValueError: ``scope`` belongs to a different runtime.
        """
        return self._registry.resolve(name, _check_scope(self, scope))

    def schemas(self, scope: Scope | None = None) -> list[ToolSchema]:
        """Return one new :class:`ToolSchema` per visible tool, in view order.

        ``parameters`` is a detached plain copy each time.

        Raises:
            TypeError: a scope of the wrong type, or a tool whose parameters are not lossless
                JSON (``tool "<name>" parameters must be lossless JSON before schema
                projection``).
            ValueError: ``scope`` belongs to a different runtime.
        """
        out = []
        for defn in self._registry.visible(_check_scope(self, scope)):
            try:
                parameters = thaw_json(freeze_json(defn.parameters))
            except TypeError:
                raise TypeError(
                    f'tool "{defn.name}" parameters must be lossless JSON before schema projection'
                ) from None
            out.append(
                ToolSchema(name=defn.name, description=defn.description, parameters=parameters)
            )
        return out

    def execution_mode(self, call: ToolCall) -> ExecutionMode:
        """Classify a call as ``PARALLEL`` or ``EXCLUSIVE`` (never raises for tool reasons).

        An unknown tool or ``is_concurrency_safe=False`` is ``EXCLUSIVE``; ``True`` is
        ``PARALLEL``; a classifier is called with the raw ``call.arguments`` and must return
        exactly ``True`` for ``PARALLEL``.
        """
        if type(call) is not ToolCall:
            raise TypeError(f"execution_mode() expects a ToolCall, got {type(call).__name__}")
        scope = call.scope
        defn = self._registry.resolve(
            call.name, None if scope is None else _check_scope(self, scope)
        )
        return classify(defn, call.arguments)

    #: Run one call through the whole pipeline (defined with the stages it drives).
    execute = execute
