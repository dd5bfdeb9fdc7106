"""A stateful model test of layers, scopes, restrictions, guards and disposals.

A Hypothesis ``RuleBasedStateMachine`` drives a ``ToolRuntime`` and a plain-Python model of
runtime.md §5 side by side: registrations (global and scoped), nested scopes opened and
closed, restrictions (allow/deny, empty included), guards and disposals. After every step it
checks, for the global context and every scope ever opened (closed ones included), that
``get``, ``schemas`` (names, order, descriptions) and ``execution_mode`` agree with the
model's view (merge, then source-layer filtering, §5.2), and that change notifications were
counted exactly (§5.5).

Conformance: R-007..R-011, R-020, V-001..V-007, V-010, V-011, V-013..V-016, V-018,
V-039..V-041, M-002, M-003, M-010 — each checked over generated histories.
"""

from __future__ import annotations

import itertools
from typing import Literal, TypeAlias

import attrs
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    invariant,
    multiple,
    rule,
)

from dsh_tools import (
    Disposer,
    ExecutionMode,
    Scope,
    ToolCall,
    ToolDefinition,
    ToolExecution,
    ToolRuntime,
)
from tests.helpers import exactly, raw_tool

NAMES = ("a", "b", "c", "d")
NEVER_REGISTERED = "zz"
RESTRICT_NAMES = (*NAMES, NEVER_REGISTERED)


@attrs.define(eq=False)
class Registration:
    """One registration the model knows about (a tool, a restriction or a guard)."""

    kind: Literal["tool", "restriction", "guard"]
    owner: ModelScope | None
    disposer: Disposer
    name: str = ""
    defn: ToolDefinition | None = None
    allow: frozenset[str] | None = None
    deny: frozenset[str] | None = None
    active: bool = True

    def admits(self, name: str) -> bool:
        return (self.allow is None or name in self.allow) and (
            self.deny is None or name not in self.deny
        )


@attrs.define(eq=False)
class ModelScope:
    handle: Scope
    parent: ModelScope | None
    label: str
    registrations: list[Registration] = attrs.Factory(list)
    children: list[ModelScope] = attrs.Factory(list)
    closed: bool = False

    def chain(self) -> list[ModelScope]:
        """Farthest ancestor first, this scope last."""
        chain: list[ModelScope] = []
        node: ModelScope | None = self
        while node is not None:
            chain.append(node)
            node = node.parent
        chain.reverse()
        return chain

    def active(self, kind: str) -> list[Registration]:
        return [r for r in self.registrations if r.active and r.kind == kind]


_Registered: TypeAlias = "Registration | MultipleResults[Registration]"


def _guard(execution: ToolExecution) -> str | None:
    return None


class RegistryMachine(RuleBasedStateMachine):
    scopes: Bundle[ModelScope] = Bundle("scopes")
    registrations: Bundle[Registration] = Bundle("registrations")

    def __init__(self) -> None:
        super().__init__()
        self.runtime = ToolRuntime()
        self.global_registrations: list[Registration] = []
        self.all_scopes: list[ModelScope] = []
        self.expected_changes = 0
        self.changes = 0
        self.runtime.on_change(self._count_change)
        self._tags = itertools.count()

    def _count_change(self) -> None:
        self.changes += 1

    # ------------------------------------------------------------------ the model

    def _global_tools(self) -> list[Registration]:
        return [r for r in self.global_registrations if r.active and r.kind == "tool"]

    def model_view(self, scope: ModelScope | None) -> dict[str, ToolDefinition]:
        """Merge then filter by source layer (runtime.md §5.2)."""
        merged: dict[str, tuple[ToolDefinition, int]] = {}
        for reg in self._global_tools():
            assert reg.defn is not None
            merged[reg.name] = (reg.defn, -1)
        if scope is None:
            return {name: defn for name, (defn, _) in merged.items()}
        chain = scope.chain()
        for index, layer in enumerate(chain):
            for reg in layer.active("tool"):
                assert reg.defn is not None
                merged[reg.name] = (reg.defn, index)  # an existing key keeps its position
        visible: dict[str, ToolDefinition] = {}
        for name, (defn, source) in merged.items():
            filters = [r for s in chain[source + 1 :] for r in s.active("restriction")]
            if all(f.admits(name) for f in filters):
                visible[name] = defn
        return visible

    def restrictable(self, scope: ModelScope) -> set[str]:
        names = {r.name for r in self._global_tools()}
        for ancestor in scope.chain()[:-1]:
            names.update(r.name for r in ancestor.active("tool"))
        return names

    def _dispose_in_model(self, reg: Registration) -> None:
        if reg.active:
            reg.active = False
            if reg.kind != "guard":
                self.expected_changes += 1

    def _close_in_model(self, scope: ModelScope) -> None:
        if scope.closed:
            return
        scope.closed = True
        for child in reversed(scope.children):
            self._close_in_model(child)
        for reg in reversed(scope.registrations):
            self._dispose_in_model(reg)

    def _new_tool(self, name: str, safe: bool) -> ToolDefinition:
        return raw_tool(name, description=f"{name}#{next(self._tags)}", is_concurrency_safe=safe)

    # ------------------------------------------------------------------ rules

    @rule(target=registrations, name=st.sampled_from(NAMES), safe=st.booleans())
    def register_global(self, name: str, safe: bool) -> _Registered:
        defn = self._new_tool(name, safe)
        if any(r.name == name for r in self._global_tools()):
            with pytest.raises(ValueError, match="is already registered"):
                self.runtime.register(defn)
            return multiple()
        disposer = self.runtime.register(defn)
        reg = Registration("tool", None, disposer, name=name, defn=defn)
        self.global_registrations.append(reg)
        self.expected_changes += 1
        return reg

    @rule(
        target=registrations,
        scope=scopes,
        name=st.sampled_from(NAMES),
        safe=st.booleans(),
    )
    def register_scoped(self, scope: ModelScope, name: str, safe: bool) -> _Registered:
        defn = self._new_tool(name, safe)
        if scope.closed:
            with pytest.raises(RuntimeError, match=exactly("scope is closed")):
                scope.handle.register(defn)
            return multiple()
        if any(r.name == name for r in scope.active("tool")):
            with pytest.raises(ValueError, match="already registered in this scope"):
                scope.handle.register(defn)
            return multiple()
        disposer = scope.handle.register(defn)
        reg = Registration("tool", scope, disposer, name=name, defn=defn)
        scope.registrations.append(reg)
        self.expected_changes += 1
        return reg

    @rule(target=scopes, parent=st.none() | scopes)
    def open_scope(self, parent: ModelScope | None) -> ModelScope | MultipleResults[ModelScope]:
        label = f"s{len(self.all_scopes)}"
        if parent is not None and parent.closed:
            with pytest.raises(RuntimeError, match=exactly("scope is closed")):
                self.runtime.open_scope(parent=parent.handle, name=label)
            return multiple()
        parent_handle = None if parent is None else parent.handle
        handle = self.runtime.open_scope(parent=parent_handle, name=label)
        scope = ModelScope(handle, parent, label)
        if parent is not None:
            parent.children.append(scope)
        self.all_scopes.append(scope)
        return scope

    @rule(scope=scopes)
    def close_scope(self, scope: ModelScope) -> None:
        scope.handle.close()
        self._close_in_model(scope)

    @rule(
        target=registrations,
        scope=scopes,
        allow=st.none() | st.lists(st.sampled_from(RESTRICT_NAMES), max_size=3),
        deny=st.none() | st.lists(st.sampled_from(RESTRICT_NAMES), max_size=3),
    )
    def restrict(
        self, scope: ModelScope, allow: list[str] | None, deny: list[str] | None
    ) -> _Registered:
        if scope.closed:
            with pytest.raises(RuntimeError, match=exactly("scope is closed")):
                scope.handle.restrict(allow=allow, deny=deny)
            return multiple()
        if allow is None and deny is None:
            with pytest.raises(ValueError, match=r"^scope\.restrict\(\) is a no-op"):
                scope.handle.restrict(allow=allow, deny=deny)
            return multiple()
        known = self.restrictable(scope)
        unknown = list(dict.fromkeys(n for n in (allow or []) + (deny or []) if n not in known))
        if unknown:
            noun = "tools" if len(unknown) > 1 else "tool"
            quoted = ", ".join(f'"{n}"' for n in unknown)
            listed = ", ".join(sorted(known)) or "(none)"
            expected = (
                f"scope.restrict() names unknown inherited {noun} {quoted}; "
                f"known inherited tools: {listed}"
            )
            with pytest.raises(ValueError, match=exactly(expected)):
                scope.handle.restrict(allow=allow, deny=deny)
            return multiple()
        disposer = scope.handle.restrict(allow=allow, deny=deny)
        reg = Registration(
            "restriction",
            scope,
            disposer,
            allow=None if allow is None else frozenset(allow),
            deny=None if deny is None else frozenset(deny),
        )
        scope.registrations.append(reg)
        self.expected_changes += 1
        return reg

    @rule(target=registrations, scope=st.none() | scopes)
    def add_guard(self, scope: ModelScope | None) -> _Registered:
        if scope is None:
            reg = Registration("guard", None, self.runtime.guard(_guard))
            self.global_registrations.append(reg)
            return reg
        if scope.closed:
            with pytest.raises(RuntimeError, match=exactly("scope is closed")):
                scope.handle.guard(_guard)
            return multiple()
        reg = Registration("guard", scope, scope.handle.guard(_guard))
        scope.registrations.append(reg)
        return reg

    @rule(reg=registrations)
    def dispose(self, reg: Registration) -> None:
        reg.disposer()
        self._dispose_in_model(reg)
        assert reg.disposer.disposed is True

    # ------------------------------------------------------------------ invariants

    @invariant()
    def views_match_the_model(self) -> None:
        contexts: list[ModelScope | None] = [None, *self.all_scopes]
        for context in contexts:
            handle = None if context is None else context.handle
            expected = self.model_view(context)
            for name in (*NAMES, NEVER_REGISTERED):
                assert self.runtime.get(name, handle) is expected.get(name), (context, name)
                call = ToolCall(call_id="probe", name=name, scope=handle)
                defn = expected.get(name)
                want = (
                    ExecutionMode.PARALLEL
                    if defn is not None and defn.is_concurrency_safe is True
                    else ExecutionMode.EXCLUSIVE
                )
                assert self.runtime.execution_mode(call) is want, (context, name)
            schemas = self.runtime.schemas(handle)
            assert [s.name for s in schemas] == list(expected), context
            assert [s.description for s in schemas] == [d.description for d in expected.values()]

    @invariant()
    def scopes_report_their_state(self) -> None:
        for scope in self.all_scopes:
            assert scope.handle.closed is scope.closed, scope.label
            assert scope.handle.name == scope.label
            assert scope.handle.parent is (None if scope.parent is None else scope.parent.handle)

    @invariant()
    def disposers_report_their_state(self) -> None:
        regs = self.global_registrations + [r for s in self.all_scopes for r in s.registrations]
        for reg in regs:
            assert reg.disposer.disposed is (not reg.active)

    @invariant()
    def change_notifications_are_exact(self) -> None:
        assert self.changes == self.expected_changes


RegistryMachine.TestCase.settings = settings(stateful_step_count=40)
TestRegistryMachine = RegistryMachine.TestCase
