"""``Scope``: a per-agent (or per-preset) layer of tools, restrictions, guards and hooks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, final

from ._code_present import present_as
from ._registry import Owner, Registry, check_callable
from ._statistics import ScopeStatistics, scope_statistics

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from types import TracebackType

    from ._code_events import (
        CodeDispatchLogHook,
        CodeDispatchObserver,
        CodeDispatchStartObserver,
    )
    from ._code_present import PresentationMode
    from ._definition import ToolDefinition
    from ._disposer import Disposer
    from ._hooks import (
        ChangeObserver,
        ExecuteWrapper,
        Guard,
        PostExecuteHook,
        PreExecuteHook,
        ResultObserver,
    )
    from ._runtime import ToolRuntime

__all__ = ["Scope"]

_CLOSED = "scope is closed"


@final
class Scope:
    """A scope opened from a runtime with ``runtime.open_scope(parent=...)``.

    Scopes form chains, parent first. A scope owns a layer of tools (which shadow farther
    layers), restrictions over the tools it inherits, guards and hooks; ``close()`` disposes
    all of them. A closed scope stays a valid ``scope`` argument: it contributes nothing.

    Example:
        >>> with runtime.open_scope(name="agent") as scope:  # doctest: +SKIP
        ...     scope.register(my_tool)
        ...     scope.restrict(deny=["shell"])
    """

    __slots__ = (
        "_chain",
        "_chain_nearest_first",
        "_children",
        "_hook_cache",
        "_owner",
        "_registrations",
        "_registry",
        "closed",
        "name",
        "parent",
        "runtime",
    )

    name: str | None
    parent: Scope | None
    runtime: ToolRuntime
    closed: bool
    _registry: Registry
    _owner: Owner
    _chain: tuple[Owner, ...]
    _chain_nearest_first: tuple[Owner, ...]
    _hook_cache: dict[str, tuple[int, tuple[Callable[..., Any], ...]]]
    _children: list[Scope]
    _registrations: dict[Disposer, None]

    def __init__(self) -> None:
        raise TypeError("Scope has no public constructor; use runtime.open_scope()")

    @classmethod
    def _make(
        cls, runtime: ToolRuntime, registry: Registry, parent: Scope | None, name: str | None
    ) -> Scope:
        self = object.__new__(cls)
        #: The scope's name, for humans.
        self.name = name
        #: The parent scope, or ``None`` for a top-level scope.
        self.parent = parent
        #: The runtime this scope belongs to.
        self.runtime = runtime
        #: Whether :meth:`close` has been called.
        self.closed = False
        self._registry = registry
        self._owner = Owner()
        chain: tuple[Owner, ...] = (
            (self._owner,) if parent is None else (*parent._chain, self._owner)
        )
        self._chain = chain
        self._chain_nearest_first = tuple(reversed(chain))
        self._hook_cache = {}
        self._children = []
        self._registrations = {}
        if parent is not None:
            parent._children.append(self)
        registry.open_scopes += 1
        return self

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        return f"<Scope {self.name!r}{state}>"

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(_CLOSED)

    def register(self, defn: ToolDefinition) -> Disposer:
        """Register a tool in this scope's layer; it shadows an inherited tool of that name.

        Raises:
            RuntimeError: the scope is closed.
            TypeError: ``defn`` is not a ``ToolDefinition``.
            ValueError: the name is ``run_code`` or already registered in this scope.
        """
        self._check_open()
        return self._registry.register(self._owner, defn, scoped=True, owned_by=self._registrations)

    def restrict(
        self, *, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None
    ) -> Disposer:
        """Filter the tools this scope inherits (its own tools are never filtered).

        Restrictions intersect. A deny-only filter admits inherited tools registered later;
        an allow filter excludes them. The iterables are consumed at the call.

        Raises:
            RuntimeError: the scope is closed.
            ValueError: neither filter given, ``run_code`` named, or a name that is not an
                inherited tool (the message lists the known ones).
            TypeError: a filter is a ``str`` or holds a non-``str``.
        """
        self._check_open()
        return self._registry.restrict(self, allow, deny, self._registrations)

    def present_as(self, mode: PresentationMode | str) -> Disposer:
        """Declare how this scope and its descendants present their tools (Code Mode).

        The declaration overrides the runtime's ``mode`` (and an ancestor's declaration)
        until disposed or the scope closes. Change observers are notified as for
        :meth:`register`: one that raises rolls the declaration back.

        Raises:
            RuntimeError: the scope is closed.
            TypeError: ``mode`` is neither a ``PresentationMode`` nor a ``str``.
            ValueError: ``mode`` is not ``"native"``, ``"code"`` or ``"both"``, or this scope
                already has an active declaration.

        Example:
            >>> with runtime.open_scope(name="coder") as scope:  # doctest: +SKIP
            ...     scope.present_as("code")
        """
        return present_as(self, mode)

    def guard(self, fn: Guard) -> Disposer:
        """Add a synchronous deny-only guard for calls in this scope and its descendants.

        ``fn(execution)`` returns ``None`` to abstain or a ``str`` reason to deny.
        """
        self._check_open()
        return self._registry.add_guard(self._owner, fn, self._registrations)

    def on_pre_execute(self, fn: PreExecuteHook) -> Disposer:
        """Add a ``tools/pre-execute`` waterfall hook for calls in this scope and below."""
        self._check_open()
        check_callable(fn, "on_pre_execute")
        return self._registry.add_hook(self._owner, "pre", fn, self._registrations)

    def wrap_execute(self, fn: ExecuteWrapper) -> Disposer:
        """Add a ``tools/execute`` wrapper around dispatch for calls in this scope and below."""
        self._check_open()
        check_callable(fn, "wrap_execute")
        return self._registry.add_hook(self._owner, "execute", fn, self._registrations)

    def on_post_execute(self, fn: PostExecuteHook) -> Disposer:
        """Add a ``tools/post-execute`` waterfall hook for calls in this scope and below."""
        self._check_open()
        check_callable(fn, "on_post_execute")
        return self._registry.add_hook(self._owner, "post", fn, self._registrations)

    def on_result(self, fn: ResultObserver) -> Disposer:
        """Add a synchronous ``tools/result`` observer for calls in this scope and below."""
        self._check_open()
        check_callable(fn, "on_result", sync=True)
        return self._registry.add_hook(self._owner, "result", fn, self._registrations)

    def on_change(self, fn: ChangeObserver) -> Disposer:
        """Add a synchronous ``tools/change`` observer (hears every layer; owned by this scope)."""
        self._check_open()
        return self._registry.add_change_observer(fn, self._registrations)

    def on_code_dispatch_start(self, fn: CodeDispatchStartObserver) -> Disposer:
        """Add a synchronous ``tools/code-dispatch-start`` observer for Code Mode sub-calls
        in this scope and below."""
        self._check_open()
        check_callable(fn, "on_code_dispatch_start", sync=True)
        return self._registry.add_hook(self._owner, "code_dispatch_start", fn, self._registrations)

    def on_code_dispatch(self, fn: CodeDispatchObserver) -> Disposer:
        """Add a synchronous ``tools/code-dispatch`` observer for Code Mode sub-calls in
        this scope and below."""
        self._check_open()
        check_callable(fn, "on_code_dispatch", sync=True)
        return self._registry.add_hook(self._owner, "code_dispatch", fn, self._registrations)

    def on_code_dispatch_log(self, fn: CodeDispatchLogHook) -> Disposer:
        """Add a ``tools/code-dispatch-log`` waterfall hook for Code Mode sub-calls in this
        scope and below."""
        self._check_open()
        check_callable(fn, "on_code_dispatch_log")
        return self._registry.add_hook(self._owner, "code_dispatch_log", fn, self._registrations)

    def close(self) -> None:
        """Close the scope (idempotent).

        Marks it closed, closes its child scopes (most recently opened first), then disposes
        its remaining registrations last-in, first-out. Calls in flight are not interrupted.
        """
        if self.closed:
            return
        self.closed = True
        self._registry.open_scopes -= 1
        for child in reversed(list(self._children)):
            child.close()
        self._children.clear()
        for disposer in reversed(list(self._registrations)):
            disposer()
        if self.parent is not None and self in self.parent._children:
            self.parent._children.remove(self)

    def statistics(self) -> ScopeStatistics:
        """A frozen snapshot of what this scope itself holds (see :class:`ScopeStatistics`).

        Example:
            >>> from dsh_tools import ToolRuntime
            >>> with ToolRuntime().open_scope(name="agent") as scope:
            ...     scope.statistics().tools
            0
        """
        return scope_statistics(self)

    def __enter__(self) -> Scope:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
