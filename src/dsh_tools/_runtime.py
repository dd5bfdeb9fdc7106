"""``ToolRuntime``: registration, views and ``execute()``."""

from __future__ import annotations

from typing import TYPE_CHECKING, final

from ._calls import ToolCall
from ._code_present import (
    CodeModePrompt,
    PresentationMode,
    check_code_runtime,
    classify_call,
    code_mode_prompt,
    coerce_mode,
    effective_mode,
)
from ._code_tool import build_run_code
from ._code_values import CodeRunLimits, CodeRuntime, require_code_limits, require_code_runtime
from ._definition import ExecutionMode, ToolDefinition, ToolSchema
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
        mode: How tools are presented to a model by default (Code Mode): ``NATIVE``, ``CODE``
            or ``BOTH``, or its value as a ``str``. A scope may declare its own with
            :meth:`Scope.present_as`.
        code_runtime: What runs ``run_code`` programs (a plain attribute, read when needed,
            so it may be assigned later); required under ``CODE`` and ``BOTH`` by
            :meth:`schemas`, :meth:`code_mode_prompt` and ``run_code`` itself.
        code_limits: The limits of one ``run_code`` run (a plain attribute, read when a run
            starts); ``None`` gives ``CodeRunLimits()``.
        max_parallel_sub_calls: How many tool calls of one program may run at once.

    Raises:
        TypeError: a mode of the wrong type, an invalid ``code_runtime`` or
            ``code_limits``, or a non-``int`` ``max_parallel_sub_calls``.
        ValueError: an unknown mode, or ``max_parallel_sub_calls < 1``.

    Example:
        >>> runtime = ToolRuntime()
        >>> runtime.register(echo)  # doctest: +SKIP
        >>> result = await runtime.execute(ToolCall(call_id="c1", name="echo"))  # doctest: +SKIP
    """

    __slots__ = ("_max_parallel_sub_calls", "_registry", "approval", "code_limits", "code_runtime")

    code_runtime: CodeRuntime | None
    code_limits: CodeRunLimits

    def __init__(
        self,
        *,
        approval: ApprovalService | None = None,
        mode: PresentationMode | str = PresentationMode.NATIVE,
        code_runtime: CodeRuntime | None = None,
        code_limits: CodeRunLimits | None = None,
        max_parallel_sub_calls: int = 10,
    ) -> None:
        presentation = coerce_mode(mode)
        if code_runtime is not None:
            require_code_runtime(code_runtime)
        if code_limits is not None:
            require_code_limits(code_limits)
        if type(max_parallel_sub_calls) is not int:
            raise TypeError("max_parallel_sub_calls must be a positive integer")
        if max_parallel_sub_calls < 1:
            raise ValueError("max_parallel_sub_calls must be a positive integer")
        self.approval = approval
        self.code_runtime = code_runtime
        self.code_limits = CodeRunLimits() if code_limits is None else code_limits
        self._max_parallel_sub_calls = max_parallel_sub_calls
        self._registry = registry = Registry()
        registry.mode = presentation
        registry.run_code = build_run_code()

    @property
    def mode(self) -> PresentationMode:
        """The runtime-wide presentation mode (the constructor's ``mode``), read-only."""
        return self._registry.mode

    @property
    def max_parallel_sub_calls(self) -> int:
        """How many tool calls of one ``run_code`` program may run at once, read-only."""
        return self._max_parallel_sub_calls

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

        ``run_code`` is the runtime's one ``run_code`` definition where the effective mode is
        ``CODE`` or ``BOTH``, else ``None``.

        Raises:
            TypeError: ``scope`` is not a ``Scope``/``None``.
            ValueError: ``scope`` belongs to a different runtime.
        """
        return self._registry.resolve(name, _check_scope(self, scope))

    def schemas(self, scope: Scope | None = None) -> list[ToolSchema]:
        """Return one new :class:`ToolSchema` per visible tool, in view order.

        ``parameters`` is a detached plain copy each time. Under Code Mode the effective mode
        of ``scope`` decides: ``CODE`` gives exactly ``[run_code]``, ``BOTH`` the native list
        then ``run_code``; both check the code runtime first.

        Raises:
            TypeError: a scope of the wrong type, a tool whose parameters are not lossless
                JSON (``tool "<name>" parameters must be lossless JSON before schema
                projection``), or an invalid code runtime.
            ValueError: ``scope`` belongs to a different runtime.
            RuntimeError: ``CODE`` or ``BOTH`` with no code runtime, or one whose language has
                no SDK renderer.
        """
        checked = _check_scope(self, scope)
        registry = self._registry
        mode = effective_mode(registry, checked)
        if mode is not PresentationMode.NATIVE:
            check_code_runtime(self, mode)
        run_code = registry.run_code
        assert run_code is not None  # set by the constructor
        definitions = [run_code] if mode is PresentationMode.CODE else registry.visible(checked)
        if mode is PresentationMode.BOTH:
            definitions.append(run_code)
        out = []
        for defn in definitions:
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
        exactly ``True`` for ``PARALLEL``. A top-level call that Code Mode collapses (any
        tool but ``run_code`` where the effective mode is ``CODE``) is ``EXCLUSIVE``.
        """
        if type(call) is not ToolCall:
            raise TypeError(f"execution_mode() expects a ToolCall, got {type(call).__name__}")
        scope = call.scope
        if scope is not None:
            _check_scope(self, scope)
        return classify_call(self._registry, call)

    def code_mode_prompt(self, scope: Scope | None = None) -> CodeModePrompt:
        """The Code Mode parts of a system prompt for ``scope``'s effective mode.

        ``NATIVE``: both parts empty (no code runtime needed). ``CODE``: the code-only rule
        and the SDK of the tools visible from ``scope``. ``BOTH``: the SDK only. Registers
        nothing and notifies nobody; an unchanged tool set gives the same text.

        Raises:
            TypeError: a scope of the wrong type, or an invalid code runtime.
            ValueError: ``scope`` belongs to a different runtime.
            RuntimeError: ``CODE`` or ``BOTH`` with no code runtime, or one whose language has
                no SDK renderer.

        Example:
            >>> ToolRuntime().code_mode_prompt()
            CodeModePrompt(rule='', sdk='')
        """
        return code_mode_prompt(self, _check_scope(self, scope))

    #: Run one call through the whole pipeline (defined with the stages it drives).
    execute = execute
