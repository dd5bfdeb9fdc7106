"""Storage and visibility: layers, restrictions, guards, hook tables and change notification.

A :class:`Registry` is the private state behind one ``ToolRuntime``. Each layer owner (the
global owner, and one per scope) holds its tools, restrictions, guards and hook entries in
copy-on-write tuples, so a stage's snapshot is O(1) and resolution is O(chain depth).
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any, Final, final

from ._code_present import RUN_CODE_NAME, PresentationMode, effective_mode
from ._definition import ToolDefinition
from ._disposer import Disposer
from ._errors import normalize_message

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ._scope import Scope

__all__ = [
    "EVENTS",
    "RUN_CODE_NAME",
    "Owner",
    "Registry",
    "Restriction",
    "check_callable",
    "is_async_callable",
]

logger = logging.getLogger("dsh_tools")

#: The hook tables every owner keeps, by the short key the pipeline uses (then Code Mode's
#: three events, see ``_code_events``).
EVENTS: Final = (
    "pre",
    "execute",
    "post",
    "result",
    "code_dispatch_start",
    "code_dispatch",
    "code_dispatch_log",
)

_EMPTY: tuple[Any, ...] = ()


@final
class Restriction:
    """One ``allow``/``deny`` filter over inherited tool names."""

    __slots__ = ("allow", "deny")

    def __init__(self, allow: frozenset[str] | None, deny: frozenset[str] | None) -> None:
        self.allow = allow
        self.deny = deny

    def admits(self, name: str) -> bool:
        allow = self.allow
        if allow is not None and name not in allow:
            return False
        deny = self.deny
        return deny is None or name not in deny


def _admitted(restrictions: tuple[Restriction, ...], name: str) -> bool:
    return all(r.admits(name) for r in restrictions)


@final
class Owner:
    """One layer and what hangs off it: the global owner, or one scope's."""

    __slots__ = ("entries", "fns", "guards", "layer", "presentation", "restrictions")

    def __init__(self) -> None:
        self.layer: dict[str, ToolDefinition] = {}
        #: The scope's active ``present_as`` declaration (code-mode §2.3), if any.
        self.presentation: PresentationMode | None = None
        self.restrictions: tuple[Restriction, ...] = ()
        self.guards: tuple[Callable[..., object], ...] = ()
        # Per event: (sequence number, fn) pairs and the bare fns, both copy-on-write.
        self.entries: dict[str, tuple[tuple[int, Callable[..., Any]], ...]] = dict.fromkeys(
            EVENTS, _EMPTY
        )
        self.fns: dict[str, tuple[Callable[..., Any], ...]] = dict.fromkeys(EVENTS, _EMPTY)


def check_callable(fn: object, method: str, *, sync: bool = False) -> None:
    """Registration checks for hooks, observers and guards."""
    if not callable(fn):
        raise TypeError(f"{method}() requires a callable")
    if sync and is_async_callable(fn):
        raise TypeError(f"{method}() requires a synchronous callable")


def is_async_callable(fn: object) -> bool:
    """Whether calling ``fn`` makes a coroutine: an ``async def`` (bound or not) or an object
    whose class defines ``async def __call__``."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - we want the class attribute
    return call is not None and inspect.iscoroutinefunction(call)


@final
class Registry:
    """The private state of one runtime: the global owner, observers and sequence counters."""

    __slots__ = (
        "change_observers",
        "declarations",
        "global_owner",
        "hook_version",
        "in_flight",
        "mode",
        "open_scopes",
        "run_code",
        "seq",
        "waits",
    )

    def __init__(self) -> None:
        self.global_owner = Owner()
        # Code Mode (code-mode §2): the runtime-wide mode, how many scopes hold a present_as
        # declaration (none: every view has the runtime's mode), and the runtime's one
        # run_code definition, set by the runtime once built.
        self.mode = PresentationMode.NATIVE
        self.declarations = 0
        self.run_code: ToolDefinition | None = None
        self.change_observers: tuple[Callable[[], object], ...] = ()
        self.seq = 0
        # Bumped on every hook table change; scopes cache their merged chains against it.
        self.hook_version = 0
        # For statistics(): updated where a scope opens or closes and where an execution is
        # created or finished, so that they cost no extra step per call.
        self.open_scopes = 0
        self.in_flight = 0
        #: Names of tools whose dispatch stage was seen waiting: the lane gives their calls
        #: a task each instead of a shared worker (decision 109). Only a hint.
        self.waits: set[str] = set()

    # -- resolution ---------------------------------------------------------------------

    def resolve(self, name: str, scope: Scope | None) -> ToolDefinition | None:
        """The definition of ``name`` visible from ``scope`` (runtime.md §5.2), O(depth).

        ``run_code`` lives in no layer: it is visible where the effective mode presents it.
        """
        if name == RUN_CODE_NAME:
            if effective_mode(self, scope) is PresentationMode.NATIVE:
                return None
            return self.run_code
        if scope is not None:
            # Nearest first: a restriction only filters what comes from farther layers.
            for owner in scope._chain_nearest_first:
                defn = owner.layer.get(name)
                if defn is not None:
                    return defn
                for restriction in owner.restrictions:
                    if not restriction.admits(name):
                        return None
        return self.global_owner.layer.get(name)

    def visible(self, scope: Scope | None) -> list[ToolDefinition]:
        """Every visible definition in view order (the full merge of runtime.md §5.2)."""
        if scope is None:
            return list(self.global_owner.layer.values())
        chain = scope._chain
        merged: dict[str, tuple[ToolDefinition, int]] = {
            name: (defn, 0) for name, defn in self.global_owner.layer.items()
        }
        for position, owner in enumerate(chain, 1):
            for name, defn in owner.layer.items():
                merged[name] = (defn, position)
        # filters[p] = the restrictions of every chain scope at position > p.
        depth = len(chain)
        filters: list[tuple[Restriction, ...]] = [()] * (depth + 1)
        acc: tuple[Restriction, ...] = ()
        for position in range(depth, 0, -1):
            filters[position] = acc
            acc = acc + chain[position - 1].restrictions
        filters[0] = acc
        return [defn for name, (defn, source) in merged.items() if _admitted(filters[source], name)]

    def restrictable(self, scope: Scope) -> set[str]:
        """Names registered globally or in a strict ancestor, ignoring every restriction."""
        names = set(self.global_owner.layer)
        for owner in scope._chain[:-1]:
            names.update(owner.layer)
        return names

    # -- hooks ----------------------------------------------------------------------------

    def hooks(self, event: str, scope: Scope | None) -> tuple[Callable[..., Any], ...]:
        """The hook chain for ``event`` as seen by a call in ``scope``, in registration order.

        O(1) when nothing changed since the last call from this scope; otherwise
        O(applicable entries + chain depth).
        """
        if scope is None:
            return self.global_owner.fns[event]
        cache = scope._hook_cache
        hit = cache.get(event)
        if hit is not None and hit[0] == self.hook_version:
            return hit[1]
        fns = self._merge(event, scope)
        cache[event] = (self.hook_version, fns)
        return fns

    def _merge(self, event: str, scope: Scope) -> tuple[Callable[..., Any], ...]:
        sources = [self.global_owner.entries[event]]
        sources.extend(owner.entries[event] for owner in scope._chain)
        nonempty = [s for s in sources if s]
        if not nonempty:
            return _EMPTY
        if len(nonempty) == 1:
            return tuple(fn for _, fn in nonempty[0])
        entries = sorted((e for s in nonempty for e in s), key=lambda e: e[0])
        return tuple(fn for _, fn in entries)

    def add_hook(
        self,
        owner: Owner,
        event: str,
        fn: Callable[..., Any],
        owned_by: dict[Disposer, None] | None,
    ) -> Disposer:
        self.seq += 1
        entry = (self.seq, fn)
        owner.entries[event] = (*owner.entries[event], entry)
        owner.fns[event] = (*owner.fns[event], fn)
        self.hook_version += 1

        def undo() -> None:
            remaining = tuple(e for e in owner.entries[event] if e is not entry)
            owner.entries[event] = remaining
            owner.fns[event] = tuple(f for _, f in remaining)
            self.hook_version += 1

        return Disposer._make(undo, owned_by)

    def add_guard(
        self, owner: Owner, fn: Callable[..., object], owned_by: dict[Disposer, None] | None
    ) -> Disposer:
        check_callable(fn, "guard", sync=True)
        # A wrapper object gives each registration its own identity, so registering the
        # same function twice yields two independently disposable entries.
        entry = _GuardEntry(fn)
        owner.guards = (*owner.guards, entry)

        def undo() -> None:
            owner.guards = tuple(g for g in owner.guards if g is not entry)

        return Disposer._make(undo, owned_by)

    # -- change notification ------------------------------------------------------------

    def add_change_observer(
        self, fn: Callable[[], object], owned_by: dict[Disposer, None] | None
    ) -> Disposer:
        check_callable(fn, "on_change", sync=True)
        entry = _ChangeEntry(fn)
        self.change_observers = (*self.change_observers, entry)

        def undo() -> None:
            self.change_observers = tuple(o for o in self.change_observers if o is not entry)

        return Disposer._make(undo, owned_by)

    def notify_strict(self) -> None:
        """Notify change observers; the first failure stops and propagates."""
        for observer in self.change_observers:
            observer()

    def notify_logged(self) -> None:
        """Notify change observers; failures are logged and the notification goes on."""
        for observer in self.change_observers:
            try:
                observer()
            except Exception as exc:
                logger.warning("tools/change observer failed: %s", normalize_message(exc))

    def apply_change(
        self,
        do: Callable[[], None],
        undo: Callable[[], None],
        owned_by: dict[Disposer, None] | None,
    ) -> Disposer:
        """Apply a visible change, notify, roll it back if an observer raises.

        The disposer is owned (by its scope) before the observers run, so an observer that
        closes the scope disposes this change too instead of leaving it behind.
        """
        do()

        def dispose() -> None:
            undo()
            self.notify_logged()

        disposer = Disposer._make(dispose, owned_by)
        try:
            self.notify_strict()
        except BaseException:
            disposer()  # the rollback (nothing more if a scope closed it meanwhile)
            raise
        return disposer

    # -- registration -------------------------------------------------------------------

    def register(
        self,
        owner: Owner,
        defn: object,
        *,
        scoped: bool,
        owned_by: dict[Disposer, None] | None,
    ) -> Disposer:
        if type(defn) is not ToolDefinition:
            raise TypeError(f"register() expects a ToolDefinition, got {type(defn).__name__}")
        name = defn.name
        if name == RUN_CODE_NAME:
            raise ValueError(
                'tool name "run_code" is reserved for the Code Mode presentation transport '
                "and cannot be registered or shadowed"
            )
        layer = owner.layer
        if name in layer:
            if scoped:
                raise ValueError(f'tool "{name}" is already registered in this scope')
            raise ValueError(
                f'tool "{name}" is already registered (for a per-scope variant, register '
                "through that scope instead)"
            )

        def do() -> None:
            layer[name] = defn

        def undo() -> None:
            if layer.get(name) is defn:
                del layer[name]

        return self.apply_change(do, undo, owned_by)

    def restrict(
        self,
        scope: Scope,
        allow: Iterable[str] | None,
        deny: Iterable[str] | None,
        owned_by: dict[Disposer, None],
    ) -> Disposer:
        if allow is None and deny is None:
            raise ValueError(
                "scope.restrict() is a no-op: pass allow= and/or deny= (an empty filter is "
                "almost always a materialized-empty-config bug)"
            )
        if isinstance(allow, str) or isinstance(deny, str):
            raise TypeError("scope.restrict() takes iterables of tool names, not a str")
        allow_names = _names(allow)
        deny_names = _names(deny)
        mentioned = [*(allow_names or ()), *(deny_names or ())]
        if RUN_CODE_NAME in mentioned:
            raise ValueError(
                "scope.restrict() cannot name reserved Code Mode presentation transport "
                '"run_code"; restrict end-capability tools instead'
            )
        known = self.restrictable(scope)
        unknown = list(dict.fromkeys(n for n in mentioned if n not in known))
        if unknown:
            quoted = ", ".join(f'"{n}"' for n in unknown)
            noun = "tools" if len(unknown) > 1 else "tool"
            listing = ", ".join(sorted(known)) if known else "(none)"
            raise ValueError(
                f"scope.restrict() names unknown inherited {noun} {quoted}; "
                f"known inherited tools: {listing}"
            )
        restriction = Restriction(
            None if allow_names is None else frozenset(allow_names),
            None if deny_names is None else frozenset(deny_names),
        )
        owner = scope._owner

        def do() -> None:
            owner.restrictions = (*owner.restrictions, restriction)

        def undo() -> None:
            owner.restrictions = tuple(r for r in owner.restrictions if r is not restriction)

        return self.apply_change(do, undo, owned_by)


def _names(names: Iterable[str] | None) -> list[str] | None:
    if names is None:
        return None
    # Consumed once, here: later changes to the caller's iterable have no effect.
    out = list(names)
    for name in out:
        if type(name) is not str:
            raise TypeError("scope.restrict() tool names must be str")
    return out


@final
class _GuardEntry:
    """One guard registration (its own identity, so duplicates dispose independently)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[..., object]) -> None:
        self.fn = fn

    def __call__(self, execution: object) -> object:
        return self.fn(execution)


@final
class _ChangeEntry:
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], object]) -> None:
        self.fn = fn

    def __call__(self) -> object:
        return self.fn()
