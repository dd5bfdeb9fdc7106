"""``statistics()`` snapshots of a runtime and of a scope (trio's ``Event.statistics()`` habit).

Every figure is read from what the registry already keeps, or from a counter updated where
the state changes anyway (opening or closing a scope, creating or finishing an execution),
so taking no snapshot costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

import attrs

from ._json import FrozenDict

if TYPE_CHECKING:
    from ._registry import Owner, Registry
    from ._scope import Scope

__all__ = ["RuntimeStatistics", "ScopeStatistics", "runtime_statistics", "scope_statistics"]

#: The hook tables by their public event names (the keys of ``hooks_per_event``).
_EVENT_NAMES: Final = (
    ("tools/pre-execute", "pre"),
    ("tools/execute", "execute"),
    ("tools/post-execute", "post"),
    ("tools/result", "result"),
)


@final
@attrs.frozen(kw_only=True)
class RuntimeStatistics:
    """A snapshot of a ``ToolRuntime``, from :meth:`ToolRuntime.statistics`.

    Attributes:
        tools: Tools registered in the global layer (each scope's own layer is in its
            :class:`ScopeStatistics`).
        guards: Guards registered on the runtime itself.
        hooks_per_event: Hooks registered on the runtime itself, by event name
            (``tools/pre-execute``, ``tools/execute``, ``tools/post-execute``,
            ``tools/result``).
        change_observers: ``on_change`` observers, the scopes' included.
        open_scopes: Scopes opened from the runtime and not closed yet, nested ones included.
        executions_in_flight: Executions created (by ``execute()``, the scheduler or a
            ``lowlevel`` driver) and not finished yet. An execution a ``lowlevel`` driver
            drops without finishing it stays counted.

    Example:
        >>> from dsh_tools import ToolRuntime
        >>> runtime = ToolRuntime()
        >>> scope = runtime.open_scope(name="agent")
        >>> stats = runtime.statistics()
        >>> (stats.tools, stats.open_scopes, stats.executions_in_flight)
        (0, 1, 0)
        >>> stats.hooks_per_event["tools/pre-execute"]
        0
    """

    tools: int
    guards: int
    hooks_per_event: FrozenDict
    change_observers: int
    open_scopes: int
    executions_in_flight: int


@final
@attrs.frozen(kw_only=True)
class ScopeStatistics:
    """A snapshot of one ``Scope``'s own layer, from :meth:`Scope.statistics`.

    Counts what the scope itself holds, not what it inherits from its parents.

    Attributes:
        tools: Tools registered in the scope's own layer.
        restrictions: ``restrict()`` filters in force on the scope.
        guards: Guards registered on the scope.
        hooks_per_event: Hooks registered on the scope, by event name (as in
            :class:`RuntimeStatistics`).
        open_children: Child scopes opened from this one and not closed yet (direct
            children only).
        closed: Whether the scope is closed (a closed scope holds nothing).

    Example:
        >>> from dsh_tools import ToolRuntime
        >>> runtime = ToolRuntime()
        >>> scope = runtime.open_scope(name="agent")
        >>> _ = scope.guard(lambda execution: None)
        >>> stats = scope.statistics()
        >>> (stats.tools, stats.guards, stats.closed)
        (0, 1, False)
    """

    tools: int
    restrictions: int
    guards: int
    hooks_per_event: FrozenDict
    open_children: int
    closed: bool


def _hook_counts(owner: Owner) -> FrozenDict:
    fns = owner.fns
    return FrozenDict._from_frozen((name, len(fns[key])) for name, key in _EVENT_NAMES)


def runtime_statistics(registry: Registry) -> RuntimeStatistics:
    """The snapshot behind ``ToolRuntime.statistics()``."""
    owner = registry.global_owner
    return RuntimeStatistics(
        tools=len(owner.layer),
        guards=len(owner.guards),
        hooks_per_event=_hook_counts(owner),
        change_observers=len(registry.change_observers),
        open_scopes=registry.open_scopes,
        executions_in_flight=registry.in_flight,
    )


def scope_statistics(scope: Scope) -> ScopeStatistics:
    """The snapshot behind ``Scope.statistics()``."""
    owner = scope._owner
    return ScopeStatistics(
        tools=len(owner.layer),
        restrictions=len(owner.restrictions),
        guards=len(owner.guards),
        hooks_per_event=_hook_counts(owner),
        open_children=len(scope._children),
        closed=scope.closed,
    )
