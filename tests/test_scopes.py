"""Scopes, views, restrictions, guards, observers and scoped hooks.

runtime.md §4, §5.2-§5.5, §6 (scoping, order, registration checks), §7.1, §7.3, §7.7.
Conformance: V-001..V-044.
"""

from __future__ import annotations

import inspect
import logging
import re
from typing import TYPE_CHECKING, Any

import attrs
import pytest

from dsh_tools import (
    Abort,
    Allow,
    CallNext,
    Disposer,
    ErrorInfo,
    ExecutionToken,
    FrozenDict,
    Guard,
    HarnessError,
    JsonValue,
    PostDecision,
    PreDecision,
    PreExecuteHook,
    Scope,
    TextContent,
    ToolCall,
    ToolError,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    error_result,
)
from tests.helpers import call, error_text, exactly, make_echo, raw_tool, run

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

DENIED_INFO = ErrorInfo("ToolDeniedError", "TOOL_DENIED")
UNKNOWN_INFO = ErrorInfo("ToolNotFoundError", "UNKNOWN_TOOL")
NOT_LOSSLESS = "tool execution arguments must be losslessly JSON-serializable"


def _names(runtime: ToolRuntime, scope: Scope | None = None) -> list[str]:
    return [s.name for s in runtime.schemas(scope)]


def _counting_tool(name: str, calls: list[str]) -> Any:
    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        calls.append(ctx.call_id)
        return name

    return raw_tool(name, body)


def _restrict_error(runtime: ToolRuntime, scope: Scope, **kwargs: Any) -> str:
    with pytest.raises(ValueError, match=r"^scope\.restrict\(\) ") as info:
        scope.restrict(**kwargs)
    return str(info.value)


async def _pass_pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
    return await call_next()


# --------------------------------------------------------------------------- V-001..V-004


async def test_v001_scoped_tool_is_visible_only_in_its_scope() -> None:
    """V-001: visible and executable only in A (and below); elsewhere ``unknown tool``."""
    runtime = ToolRuntime()
    a = runtime.open_scope(name="A")
    b = runtime.open_scope(name="B")
    below_a = runtime.open_scope(parent=a)
    mine = raw_tool("mine")
    a.register(mine)

    assert runtime.get("mine", a) is mine
    assert runtime.get("mine", below_a) is mine
    assert runtime.get("mine", b) is None
    assert runtime.get("mine") is None
    assert _names(runtime, a) == ["mine"]
    assert _names(runtime, b) == []
    assert _names(runtime) == []

    ok = await run(runtime, "mine", scope=a)
    assert not ok.is_error, ok
    assert ok.value == "mine"
    for scope in (b, None):
        failed = await run(runtime, "mine", scope=scope)
        assert error_text(failed) == 'Error: unknown tool "mine"'
        assert failed.error == ToolError('unknown tool "mine"', UNKNOWN_INFO)


@pytest.mark.parametrize("global_first", [True, False], ids=["global-first", "scope-first"])
async def test_v002_scope_shadows_a_global_in_place(global_first: bool) -> None:
    """V-002: each view dispatches its own definition; listed once, at the global's position."""
    runtime = ToolRuntime()
    scope = runtime.open_scope()
    global_dup = raw_tool("dup", description="global dup")
    scoped_dup = raw_tool("dup", description="scoped dup")

    def register_globals() -> None:
        runtime.register(raw_tool("first"))
        runtime.register(global_dup)
        runtime.register(raw_tool("last"))

    def register_scoped() -> None:
        scope.register(scoped_dup)
        scope.register(raw_tool("own"))

    if global_first:
        register_globals()
        register_scoped()
    else:
        register_scoped()
        register_globals()

    assert runtime.get("dup") is global_dup
    assert runtime.get("dup", scope) is scoped_dup
    assert _names(runtime) == ["first", "dup", "last"]
    assert _names(runtime, scope) == ["first", "dup", "last", "own"]
    assert [s.description for s in runtime.schemas(scope)][1] == "scoped dup"

    global_result = await run(runtime, "dup")
    scoped_result = await run(runtime, "dup", scope=scope)
    assert not global_result.is_error
    assert not scoped_result.is_error
    # tell the two apart by the definition the execution resolved to
    seen: list[object] = []

    def guard(execution: ToolExecution) -> str | None:
        seen.append(runtime.get(execution.name, execution.scope))
        return None

    runtime.guard(guard)
    await run(runtime, "dup")
    await run(runtime, "dup", scope=scope)
    assert seen == [global_dup, scoped_dup]


async def test_v002_each_view_runs_its_own_body() -> None:
    """V-002: the dispatched body is the one of the view's definition."""
    runtime = ToolRuntime()
    scope = runtime.open_scope()
    global_calls: list[str] = []
    scoped_calls: list[str] = []
    runtime.register(_counting_tool("dup", global_calls))
    scope.register(_counting_tool("dup", scoped_calls))
    plain = await runtime.execute(call("dup", call_id="plain"))
    scoped = await runtime.execute(call("dup", scope=scope, call_id="scoped"))
    assert not plain.is_error
    assert not scoped.is_error
    assert global_calls == ["plain"]
    assert scoped_calls == ["scoped"]


def test_v003_duplicate_name_within_one_scope() -> None:
    """V-003: ``ValueError`` ``tool "x" is already registered in this scope``."""
    runtime = ToolRuntime()
    scope = runtime.open_scope()
    first = raw_tool("x")
    scope.register(first)
    with pytest.raises(ValueError, match=exactly('tool "x" is already registered in this scope')):
        scope.register(raw_tool("x"))
    assert runtime.get("x", scope) is first
    # another scope, or the global layer, may still use the name
    runtime.open_scope().register(raw_tool("x"))
    runtime.register(raw_tool("x"))


def test_v004_closing_a_scope_removes_its_registrations() -> None:
    """V-004: ``get`` → ``None``; ``schemas(scope)`` shows only inherited tools."""
    runtime = ToolRuntime()
    g = raw_tool("g")
    runtime.register(g)
    runtime.register(raw_tool("h"))
    scope = runtime.open_scope()
    scope.register(raw_tool("own"))
    scope.register(raw_tool("g"))  # a shadow
    scope.restrict(deny=["h"])
    assert _names(runtime, scope) == ["g", "own"]
    scope.close()
    assert runtime.get("own", scope) is None
    assert runtime.get("g", scope) is g
    assert _names(runtime, scope) == ["g", "h"]


# --------------------------------------------------------------------------- V-005..V-019


async def test_v005_allow_restriction_hides_unlisted_inherited() -> None:
    """V-005: unlisted inherited tools hidden (``UNKNOWN_TOOL``); own tools stay; others not."""
    runtime = ToolRuntime()
    a = raw_tool("a")
    runtime.register(a)
    runtime.register(raw_tool("b"))
    scope = runtime.open_scope()
    own = raw_tool("own")
    scope.register(own)
    child = runtime.open_scope(parent=scope)
    sibling = runtime.open_scope()
    scope.restrict(allow=["a"])

    assert _names(runtime, scope) == ["a", "own"]
    assert _names(runtime, child) == ["a", "own"]
    assert runtime.get("a", scope) is a
    assert runtime.get("own", scope) is own
    assert runtime.get("b", scope) is None
    assert runtime.get("b", child) is None
    assert _names(runtime, sibling) == ["a", "b"]
    assert _names(runtime) == ["a", "b"]

    hidden = await run(runtime, "b", scope=scope)
    assert error_text(hidden) == 'Error: unknown tool "b"'
    assert hidden.error is not None
    assert hidden.error.info == UNKNOWN_INFO
    assert not (await run(runtime, "b", scope=sibling)).is_error
    assert not (await run(runtime, "own", scope=scope)).is_error


def test_v006_later_globals_under_deny_and_allow() -> None:
    """V-006: a later global shows under deny-only, not allow; later local tools show in both."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("x"))
    deny_only = runtime.open_scope()
    allow = runtime.open_scope()
    deny_only.restrict(deny=["x"])
    allow.restrict(allow=["x"])

    late = raw_tool("late")
    runtime.register(late)
    assert runtime.get("late", deny_only) is late
    assert runtime.get("late", allow) is None
    assert _names(runtime, deny_only) == ["late"]
    assert _names(runtime, allow) == ["x"]

    for scope in (deny_only, allow):
        local = raw_tool("local")
        scope.register(local)
        assert runtime.get("local", scope) is local
    assert _names(runtime, deny_only) == ["late", "local"]
    assert _names(runtime, allow) == ["x", "local"]


@pytest.mark.parametrize("dispose_first", [True, False], ids=["lift-allow", "lift-deny"])
def test_v007_restrictions_intersect_and_dispose_independently(dispose_first: bool) -> None:
    """V-007: two restrictions intersect; disposing one keeps the other in force."""
    runtime = ToolRuntime()
    for name in ("a", "b", "c"):
        runtime.register(raw_tool(name))
    scope = runtime.open_scope()
    allow = scope.restrict(allow=["a", "b"])
    deny = scope.restrict(deny=["b"])
    assert _names(runtime, scope) == ["a"]
    if dispose_first:
        allow()
        assert _names(runtime, scope) == ["a", "c"]
    else:
        deny()
        assert _names(runtime, scope) == ["a", "b"]
    assert allow.disposed is dispose_first
    assert deny.disposed is not dispose_first


def test_v008_restrict_copies_its_iterables() -> None:
    """V-008: mutating the list passed to ``restrict`` later has no effect; consumed once."""
    runtime = ToolRuntime()
    for name in ("a", "b", "c"):
        runtime.register(raw_tool(name))
    scope = runtime.open_scope()
    allow = ["a", "b"]
    deny = ["b"]
    scope.restrict(allow=allow, deny=deny)
    allow.append("c")
    deny.clear()
    assert _names(runtime, scope) == ["a"]

    other = runtime.open_scope()
    other.restrict(allow=(name for name in ["a", "c"]))  # a one-shot iterator
    assert _names(runtime, other) == ["a", "c"]


def test_v009_restrict_without_arguments() -> None:
    """V-009: neither ``allow`` nor ``deny`` → ``ValueError`` with the exact text."""
    runtime = ToolRuntime()
    scope = runtime.open_scope()
    message = _restrict_error(runtime, scope)
    assert message == (
        "scope.restrict() is a no-op: pass allow= and/or deny= (an empty filter is almost "
        "always a materialized-empty-config bug)"
    )
    assert _restrict_error(runtime, scope, allow=None, deny=None) == message


def test_v009_empty_iterables_are_valid() -> None:
    """V-009 (§5.3): ``allow=[]`` hides every inherited tool; ``deny=[]`` hides nothing."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("g"))
    nothing = runtime.open_scope()
    nothing.restrict(allow=[])
    nothing.register(raw_tool("own"))
    assert _names(runtime, nothing) == ["own"]
    everything = runtime.open_scope()
    everything.restrict(deny=[])
    assert _names(runtime, everything) == ["g"]


def test_v010_own_tools_are_not_restrictable() -> None:
    """V-010: naming the scope's own tool → ``… names unknown inherited tool "local"``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("g"))
    scope = runtime.open_scope()
    scope.register(raw_tool("local"))
    message = _restrict_error(runtime, scope, allow=["local"])
    assert message.startswith('scope.restrict() names unknown inherited tool "local"')
    assert message == (
        'scope.restrict() names unknown inherited tool "local"; known inherited tools: g'
    )
    # a child may restrict its parent's tool
    child = runtime.open_scope(parent=scope)
    child.restrict(deny=["local"])
    assert _names(runtime, child) == ["g"]


def test_v011_unknown_names_are_listed() -> None:
    """V-011: a typo; two unknown names; nothing inherited."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("real"))
    scope = runtime.open_scope()
    assert _restrict_error(runtime, scope, allow=["reall"]) == (
        'scope.restrict() names unknown inherited tool "reall"; known inherited tools: real'
    )
    assert _restrict_error(runtime, scope, deny=["ghost", "wraith"]) == (
        'scope.restrict() names unknown inherited tools "ghost", "wraith"; '
        "known inherited tools: real"
    )
    lonely = ToolRuntime().open_scope()
    assert _restrict_error(lonely.runtime, lonely, deny=["x"]) == (
        'scope.restrict() names unknown inherited tool "x"; known inherited tools: (none)'
    )
    assert _names(runtime, scope) == ["real"]  # nothing was applied


def test_v011_unknown_names_deduplicated_allow_first_known_sorted() -> None:
    """V-011 (§5.3): unknown names once, ``allow`` first; known names sorted by code point."""
    runtime = ToolRuntime()
    for name in ("b", "a", "B", "é"):
        runtime.register(raw_tool(name))
    parent = runtime.open_scope()
    parent.register(raw_tool("p"))
    child = runtime.open_scope(parent=parent)
    child.register(raw_tool("own"))
    message = _restrict_error(
        runtime, child, allow=["zz", "a", "yy", "zz"], deny=["yy", "xx", "own"]
    )
    assert message == (
        'scope.restrict() names unknown inherited tools "zz", "yy", "xx", "own"; '
        "known inherited tools: B, a, b, p, é"
    )


def test_v012_there_is_no_runtime_level_restrict() -> None:
    """V-012: ``ToolRuntime`` has no ``restrict`` attribute."""
    assert not hasattr(ToolRuntime, "restrict")
    assert not hasattr(ToolRuntime(), "restrict")


def test_v013_child_restricts_a_parent_tool() -> None:
    """V-013: hidden in the child; the parent's view is unchanged."""
    runtime = ToolRuntime()
    parent = runtime.open_scope()
    p = raw_tool("p")
    parent.register(p)
    child = runtime.open_scope(parent=parent)
    child.restrict(deny=["p"])
    assert runtime.get("p", child) is None
    assert _names(runtime, child) == []
    assert runtime.get("p", parent) is p
    assert _names(runtime, parent) == ["p"]
    grandchild = runtime.open_scope(parent=child)
    assert runtime.get("p", grandchild) is None


def test_v014_child_with_allow_keeps_its_own_tools() -> None:
    """V-014: a child with ``allow=[...]`` still sees its own tools, registered before or after."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("g"))
    runtime.register(raw_tool("h"))
    parent = runtime.open_scope()
    child = runtime.open_scope(parent=parent)
    before = raw_tool("before")
    child.register(before)
    child.restrict(allow=["g"])
    after = raw_tool("after")
    child.register(after)
    assert runtime.get("before", child) is before
    assert runtime.get("after", child) is after
    assert _names(runtime, child) == ["g", "before", "after"]


def test_v015_ancestor_restriction_applies_to_every_descendant() -> None:
    """V-015: an ancestor restricting a global hides it in every descendant."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("g"))
    runtime.register(raw_tool("keep"))
    ancestor = runtime.open_scope()
    child = runtime.open_scope(parent=ancestor)
    grandchild = runtime.open_scope(parent=child)
    ancestor.restrict(deny=["g"])
    for scope in (ancestor, child, grandchild):
        assert runtime.get("g", scope) is None
        assert _names(runtime, scope) == ["keep"]
    assert runtime.get("g") is not None


def test_v016_restriction_never_hides_its_own_scope_tools() -> None:
    """V-016: an ancestor with ``allow=["g"]`` keeps its ``own`` tool visible, also below it."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("g"))
    runtime.register(raw_tool("h"))
    ancestor = runtime.open_scope()
    child = runtime.open_scope(parent=ancestor)
    grandchild = runtime.open_scope(parent=child)
    ancestor.restrict(allow=["g"])
    own = raw_tool("own")
    ancestor.register(own)
    below = raw_tool("below")
    child.register(below)
    for scope in (ancestor, child, grandchild):
        assert runtime.get("own", scope) is own
        assert runtime.get("h", scope) is None
    assert _names(runtime, ancestor) == ["g", "own"]
    assert _names(runtime, grandchild) == ["g", "own", "below"]


def test_v016_restriction_filters_by_source_layer() -> None:
    """V-016 (§5.2): a descendant's shadow of a hidden global is visible below the restriction."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("g"))
    ancestor = runtime.open_scope()
    ancestor.restrict(deny=["g"])
    child = runtime.open_scope(parent=ancestor)
    shadow = raw_tool("g")
    child.register(shadow)
    assert runtime.get("g", ancestor) is None
    assert runtime.get("g", child) is shadow
    assert runtime.get("g", runtime.open_scope(parent=child)) is shadow


@pytest.mark.parametrize("key", ["allow", "deny"])
def test_v017_run_code_cannot_be_restricted(key: str) -> None:
    """V-017: naming ``run_code`` → ``ValueError`` with the exact text."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("g"))
    scope = runtime.open_scope()
    message = _restrict_error(runtime, scope, **{key: ["g", "run_code", "ghost"]})
    assert message == (
        'scope.restrict() cannot name reserved Code Mode presentation transport "run_code"; '
        "restrict end-capability tools instead"
    )


def test_v018_restricting_an_already_hidden_name_is_accepted() -> None:
    """V-018: a name hidden by an ancestor's restriction may be named again."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("g"))
    runtime.register(raw_tool("h"))
    parent = runtime.open_scope()
    parent.restrict(deny=["g"])
    child = runtime.open_scope(parent=parent)
    assert isinstance(child.restrict(allow=["g", "h"]), Disposer)
    assert isinstance(child.restrict(deny=["g"]), Disposer)
    assert runtime.get("g", child) is None
    assert _names(runtime, child) == ["h"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"allow": "read"}, "scope.restrict() takes iterables of tool names, not a str"),
        ({"deny": "read"}, "scope.restrict() takes iterables of tool names, not a str"),
        (
            {"allow": ["read"], "deny": "x"},
            "scope.restrict() takes iterables of tool names, not a str",
        ),
        ({"allow": [1]}, "scope.restrict() tool names must be str"),
        ({"deny": ["read", None]}, "scope.restrict() tool names must be str"),
        ({"allow": [1, "run_code"]}, "scope.restrict() tool names must be str"),
    ],
)
def test_v019_restrict_argument_types(kwargs: dict[str, Any], message: str) -> None:
    """V-019: ``allow="read"`` / ``allow=[1]`` → ``TypeError`` with the exact texts."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("read"))
    scope = runtime.open_scope()
    with pytest.raises(TypeError) as info:
        scope.restrict(**kwargs)
    assert str(info.value) == message
    assert _names(runtime, scope) == ["read"]


# --------------------------------------------------------------------------- V-020..V-029


async def test_v020_scoped_pre_hook_sees_its_scope_and_descendants_only() -> None:
    """V-020: not other scopes, not scope-less calls."""
    runtime = ToolRuntime()
    runtime.register(make_echo())
    scope = runtime.open_scope()
    child = runtime.open_scope(parent=scope)
    sibling = runtime.open_scope()
    seen: list[str] = []

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        seen.append(execution.call_id)
        return await call_next()

    scope.on_pre_execute(pre)
    for call_id, target in [("none", None), ("own", scope), ("child", child), ("sib", sibling)]:
        result = await runtime.execute(call("echo", {"text": "x"}, scope=target, call_id=call_id))
        assert not result.is_error, result
    assert seen == ["own", "child"]


async def test_v021_no_hook_overrides_a_guard() -> None:
    """V-021: an allow hook registered before a scoped denying guard → denied, body not run."""
    runtime = ToolRuntime()
    body_calls: list[str] = []
    runtime.register(_counting_tool("t", body_calls))
    scope = runtime.open_scope()

    async def allow(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        return Allow()

    runtime.on_pre_execute(allow)
    scope.on_pre_execute(allow)
    scope.guard(lambda execution: "guard says no")
    result = await run(runtime, "t", scope=scope)
    assert error_text(result) == "Error: guard says no"
    assert result.error == ToolError("guard says no", DENIED_INFO)
    assert body_calls == []


async def test_v022_guard_sees_frozen_arguments() -> None:
    """V-022: ``execution.arguments`` is a ``FrozenDict``; item assignment raises ``TypeError``."""
    runtime = ToolRuntime()
    runtime.register(make_echo())
    outcomes: list[object] = []

    def guard(execution: ToolExecution) -> str | None:
        arguments = execution.arguments
        outcomes.append(type(arguments))
        try:
            arguments["text"] = "changed"
        except TypeError:
            outcomes.append("TypeError")
        return None

    runtime.guard(guard)
    result = await run(runtime, "echo", {"text": "original"})
    assert outcomes == [FrozenDict, "TypeError"]
    assert result.value == "original"


async def test_v023_same_guard_twice_disposers_are_independent() -> None:
    """V-023: each disposer removes only its own registration; closing removes the rest."""
    runtime = ToolRuntime()
    runtime.register(make_echo())
    scope = runtime.open_scope()
    calls: list[str] = []

    def guard(execution: ToolExecution) -> str | None:
        calls.append(execution.call_id)
        return None

    first = scope.guard(guard)
    second = scope.guard(guard)
    third = scope.guard(guard)

    async def count() -> int:
        calls.clear()
        await run(runtime, "echo", scope=scope)
        return len(calls)

    assert await count() == 3
    second()
    assert await count() == 2
    second()
    assert await count() == 2
    first()
    assert await count() == 1
    scope.close()
    assert third.disposed
    assert await count() == 0  # a closed scope stays a valid call scope


async def test_v024_first_string_from_a_guard_denies() -> None:
    """V-024: first global guard abstains, second denies → ``Error: global denial``."""
    runtime = ToolRuntime()
    body_calls: list[str] = []
    runtime.register(_counting_tool("t", body_calls))
    order: list[str] = []

    def abstain(execution: ToolExecution) -> str | None:
        order.append("abstain")
        return None

    def deny(execution: ToolExecution) -> str | None:
        order.append("deny")
        return "global denial"

    def never(execution: ToolExecution) -> str | None:
        order.append("never")
        return None

    runtime.guard(abstain)
    runtime.guard(deny)
    runtime.guard(never)
    result = await run(runtime, "t")
    assert error_text(result) == "Error: global denial"
    assert result.error == ToolError("global denial", DENIED_INFO)
    assert body_calls == []
    assert order == ["abstain", "deny"]


async def test_v024_guard_order_global_then_ancestors_then_scope() -> None:
    """V-024 (§7.3): global guards first, then chain scopes farthest first."""
    runtime = ToolRuntime()
    runtime.register(make_echo())
    parent = runtime.open_scope()
    child = runtime.open_scope(parent=parent)
    order: list[str] = []

    def guard(label: str) -> Guard:
        def check(execution: ToolExecution) -> str | None:
            order.append(label)
            return None

        return check

    child.guard(guard("child"))
    parent.guard(guard("parent"))
    runtime.guard(guard("global-1"))
    runtime.open_scope().guard(guard("unrelated"))
    runtime.guard(guard("global-2"))
    result = await run(runtime, "echo", scope=child)
    assert not result.is_error, result
    assert order == ["global-1", "global-2", "parent", "child"]


async def test_v025_guard_registered_during_evaluation_runs_from_the_next_call() -> None:
    """V-025: the new guard does not run in that pass (``first``); next call ``first, late``."""
    runtime = ToolRuntime()
    runtime.register(make_echo())
    order: list[str] = []

    def late(execution: ToolExecution) -> str | None:
        order.append("late")
        return None

    def first(execution: ToolExecution) -> str | None:
        order.append("first")
        if len(order) == 1:
            runtime.guard(late)
        return None

    runtime.guard(first)
    await run(runtime, "echo")
    assert order == ["first"]
    order.clear()
    order.append("marker")
    await run(runtime, "echo")
    assert order == ["marker", "first", "late"]


async def test_v026_guard_table_is_snapshotted_when_evaluation_starts() -> None:
    """V-026: the disposed next guard still runs in that pass; then only the replacement runs."""
    runtime = ToolRuntime()
    runtime.register(make_echo())
    scope = runtime.open_scope()
    order: list[str] = []
    disposers: dict[str, Disposer] = {}

    def replacement(execution: ToolExecution) -> str | None:
        order.append("replacement")
        return None

    def second(execution: ToolExecution) -> str | None:
        order.append("second")
        return None

    def first(execution: ToolExecution) -> str | None:
        order.append("first")
        disposers["first"]()
        disposers["second"]()
        scope.guard(replacement)
        return None

    disposers["first"] = scope.guard(first)
    disposers["second"] = scope.guard(second)
    await run(runtime, "echo", scope=scope)
    assert order == ["first", "second"]
    order.clear()
    await run(runtime, "echo", scope=scope)
    assert order == ["replacement"]


async def test_v027_empty_string_denies() -> None:
    """V-027: a guard returning ``""`` denies with error text ``Error: ``."""
    runtime = ToolRuntime()
    body_calls: list[str] = []
    runtime.register(_counting_tool("t", body_calls))
    runtime.guard(lambda execution: "")
    result = await run(runtime, "t")
    assert error_text(result) == "Error: "
    assert result.error == ToolError("", DENIED_INFO)
    assert body_calls == []


async def _never_awaited() -> None:
    raise AssertionError("unreachable: this coroutine must be closed, not run")


@pytest.mark.parametrize(
    ("make", "type_name"),
    [
        pytest.param(lambda: 0, "int", id="zero"),
        pytest.param(lambda: False, "bool", id="false"),
        pytest.param(lambda: [], "list", id="list"),
        pytest.param(_never_awaited, "coroutine", id="coroutine"),
    ],
)
async def test_v028_guard_returning_something_else_is_a_final_error(
    make: Callable[[], object], type_name: str
) -> None:
    """V-028: ``guard returned <type>; expected str or None``; coroutine closed; no post."""
    runtime = ToolRuntime()
    body_calls: list[str] = []
    runtime.register(_counting_tool("t", body_calls))
    returned: list[object] = []
    post_calls: list[str] = []

    def guard(execution: ToolExecution) -> Any:
        value = make()
        returned.append(value)
        return value

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        post_calls.append(execution.call_id)
        return await call_next()

    runtime.guard(guard)
    runtime.on_post_execute(post)
    try:
        result = await run(runtime, "t")
        message = f"guard returned {type_name}; expected str or None"
        assert error_text(result) == f"Error: {message}"
        assert result.error == ToolError(message)
        assert body_calls == []
        assert post_calls == []
        if inspect.iscoroutine(returned[0]):
            assert inspect.getcoroutinestate(returned[0]) == inspect.CORO_CLOSED
    finally:
        for value in returned:
            if inspect.iscoroutine(value):
                value.close()


async def _async_guard(execution: ToolExecution) -> str | None:
    return None


async def _async_result_observer(execution: ToolExecution, result: ToolResult) -> None:
    return None


async def _async_change_observer() -> None:
    return None


@pytest.mark.parametrize(
    ("method", "fn"),
    [
        ("guard", _async_guard),
        ("on_result", _async_result_observer),
        ("on_change", _async_change_observer),
    ],
)
def test_v029_sync_only_registrations_reject_coroutine_functions(
    method: str, fn: Callable[..., Coroutine[Any, Any, Any]]
) -> None:
    """V-029: ``<method>() requires a synchronous callable`` (runtime and scope)."""
    runtime = ToolRuntime()
    scope = runtime.open_scope()
    for target in (runtime, scope):
        with pytest.raises(TypeError) as info:
            getattr(target, method)(fn)
        assert str(info.value) == f"{method}() requires a synchronous callable"


@pytest.mark.parametrize(
    "method",
    ["guard", "on_pre_execute", "wrap_execute", "on_post_execute", "on_result", "on_change"],
)
@pytest.mark.parametrize("value", [None, 1, "fn"])
def test_v029_registrations_require_a_callable(method: str, value: object) -> None:
    """V-029 (§5.4, §6): a non-callable → ``<method>() requires a callable``."""
    runtime = ToolRuntime()
    scope = runtime.open_scope()
    for target in (runtime, scope):
        with pytest.raises(TypeError) as info:
            getattr(target, method)(value)
        assert str(info.value) == f"{method}() requires a callable"


# --------------------------------------------------------------------------- V-030..V-038


async def test_v030_one_execution_and_token_per_call() -> None:
    """V-030: one token shared by every stage of a call; distinct tokens across calls."""
    runtime = ToolRuntime()
    stages: list[tuple[str, ToolExecution]] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        stages.append(("body", ctx.execution))
        assert ctx.token is ctx.execution.token
        assert ctx.call_id == ctx.execution.call_id
        return "ok"

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        stages.append(("pre", execution))
        return await call_next()

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        stages.append(("wrap", execution))
        return await call_next()

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        stages.append(("post", execution))
        return await call_next()

    def guard(execution: ToolExecution) -> str | None:
        stages.append(("guard", execution))
        return None

    def observer(execution: ToolExecution, result: ToolResult) -> None:
        stages.append(("result", execution))

    runtime.register(raw_tool("t", body))
    runtime.on_pre_execute(pre)
    runtime.wrap_execute(wrap)
    runtime.on_post_execute(post)
    runtime.guard(guard)
    runtime.on_result(observer)

    tokens: list[ExecutionToken] = []
    for call_id in ("c1", "c2"):
        stages.clear()
        await runtime.execute(call("t", call_id=call_id))
        assert [s for s, _ in stages] == ["pre", "guard", "wrap", "body", "post", "result"]
        executions = {id(e) for _, e in stages}
        assert len(executions) == 1  # the very same execution object everywhere
        execution = stages[0][1]
        assert execution.call_id == call_id
        assert execution.root_call_id == call_id
        assert execution.name == "t"
        assert isinstance(execution.token, ExecutionToken)
        assert re.fullmatch(r"<ExecutionToken #\d+>", repr(execution.token))
        tokens.append(execution.token)
    assert tokens[0] != tokens[1]
    assert len(set(tokens)) == 2
    assert hash(tokens[0]) == hash(tokens[0])


async def test_v031_hooks_see_a_frozen_copy_of_the_arguments() -> None:
    """V-031: not the caller's object; the caller's dict is unchanged and still mutable."""
    runtime = ToolRuntime()
    runtime.register(make_echo())
    seen: list[JsonValue] = []

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        seen.append(execution.arguments)
        return await call_next()

    runtime.on_pre_execute(pre)
    arguments: dict[str, Any] = {"text": "hi", "nested": {"list": [1]}}
    the_call = call("echo", arguments)
    await runtime.execute(the_call)
    (frozen,) = seen
    assert frozen is not arguments
    assert type(frozen) is FrozenDict
    assert frozen == {"text": "hi", "nested": {"list": (1,)}}
    assert the_call.arguments is arguments
    assert arguments == {"text": "hi", "nested": {"list": [1]}}
    assert type(arguments["nested"]["list"]) is list
    arguments["text"] = "mutable"
    arguments["nested"]["list"].append(2)
    assert frozen == {"text": "hi", "nested": {"list": (1,)}}


async def test_v032_arguments_are_snapshotted_before_any_hook() -> None:
    """V-032: a pre hook mutating the caller's dict changes neither the execution nor the body."""
    runtime = ToolRuntime()
    body_args: list[JsonValue] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        body_args.append(args)
        return "ok"

    runtime.register(raw_tool("t", body))
    arguments: dict[str, Any] = {"path": "/safe", "items": [1]}
    seen: list[JsonValue] = []

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        arguments["path"] = "/etc/passwd"
        arguments["items"].append(2)
        arguments["new"] = True
        seen.append(execution.arguments)
        return await call_next()

    def guard(execution: ToolExecution) -> str | None:
        seen.append(execution.arguments)
        return None

    runtime.on_pre_execute(pre)
    runtime.guard(guard)
    await run(runtime, "t", arguments)
    expected = {"path": "/safe", "items": (1,)}
    assert seen == [expected, expected]
    assert body_args == [expected]
    assert arguments["path"] == "/etc/passwd"


async def test_v033_scoped_result_observer_sees_denied_and_allowed_calls() -> None:
    """V-033: a scoped result observer sees both a guard-denied and an allowed call."""
    runtime = ToolRuntime()
    runtime.register(make_echo())
    scope = runtime.open_scope()
    seen: list[tuple[str, bool]] = []
    scope.on_result(lambda execution, result: seen.append((execution.call_id, result.is_error)))
    scope.guard(lambda execution: "no" if execution.arguments.get("text") == "deny" else None)
    await runtime.execute(call("echo", {"text": "deny"}, scope=scope, call_id="denied"))
    await runtime.execute(call("echo", {"text": "ok"}, scope=scope, call_id="allowed"))
    await runtime.execute(call("echo", {"text": "ok"}, call_id="scope-less"))
    assert seen == [("denied", True), ("allowed", False)]


class _Opaque:
    pass


@attrs.define
class _Attrs:
    x: int = 1


def _datetime() -> object:
    import datetime

    return datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)


def _ordered() -> object:
    import collections

    return collections.OrderedDict(a=1)


_BAD_ARGUMENTS: list[Any] = [
    pytest.param(lambda: {"s": {1, 2}}, id="set"),
    pytest.param(lambda: {"a": _Attrs()}, id="attrs"),
    pytest.param(_ordered, id="ordered-dict"),
    pytest.param(lambda: {"when": _datetime()}, id="datetime"),
    pytest.param(lambda: {("a",): 1}, id="tuple-key"),
    pytest.param(lambda: {"n": float("nan")}, id="nan"),
    pytest.param(lambda: _Opaque(), id="object"),
]


@attrs.frozen
class _Outcome:
    result: ToolResult
    call: ToolCall
    hooks: list[str]
    body_calls: list[str]
    global_seen: list[tuple[ToolExecution, ToolResult]]
    scoped_seen: list[tuple[ToolExecution, ToolResult]]


async def _run_non_lossless(make: Callable[[], object], *, scoped: bool) -> _Outcome:
    """Run one call whose arguments are not lossless, with every kind of hook installed."""
    runtime = ToolRuntime()
    body_calls: list[str] = []
    runtime.register(_counting_tool("t", body_calls))
    scope = runtime.open_scope()
    hooks: list[str] = []

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        hooks.append("pre")
        return await call_next()

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        hooks.append("wrap")
        return await call_next()

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        hooks.append("post")
        return await call_next()

    def guard(execution: ToolExecution) -> str | None:
        hooks.append("guard")
        return None

    for target in (runtime, scope):
        target.on_pre_execute(pre)
        target.wrap_execute(wrap)
        target.on_post_execute(post)
        target.guard(guard)

    # a parent token, taken from a real earlier execution
    tokens: list[ExecutionToken] = []
    probe = runtime.on_result(lambda execution, result: tokens.append(execution.token))
    await run(runtime, "t", scope=scope)
    probe()
    assert hooks == ["pre", "pre", "guard", "guard", "wrap", "wrap", "post", "post"]
    assert len(body_calls) == 1
    hooks.clear()
    body_calls.clear()

    global_seen: list[tuple[ToolExecution, ToolResult]] = []
    scoped_seen: list[tuple[ToolExecution, ToolResult]] = []
    runtime.on_result(lambda e, r: global_seen.append((e, r)))
    scope.on_result(lambda e, r: scoped_seen.append((e, r)))

    arguments = make()
    the_call = ToolCall(
        call_id="bad-args",
        name="t",
        arguments=arguments,
        scope=scope if scoped else None,
        abort=Abort(),
        parent=tokens[0],
    )
    result = await runtime.execute(the_call)
    assert the_call.arguments is arguments  # the caller's object is never modified
    return _Outcome(result, the_call, hooks, body_calls, global_seen, scoped_seen)


def _check_non_lossless(outcome: _Outcome) -> None:
    assert outcome.hooks == []
    assert outcome.body_calls == []
    assert error_text(outcome.result) == f"Error: {NOT_LOSSLESS}"
    assert outcome.result.error == ToolError(NOT_LOSSLESS)
    assert outcome.result.error.info is None
    assert len(outcome.global_seen) == 1
    for execution, seen_result in outcome.global_seen + outcome.scoped_seen:
        assert seen_result is outcome.result
        assert execution.arguments is None
        assert execution.abort is outcome.call.abort
        assert execution.parent is outcome.call.parent
        assert execution.call_id == "bad-args"
        assert execution.scope is outcome.call.scope


@pytest.mark.parametrize("make", _BAD_ARGUMENTS)
async def test_v034_non_lossless_arguments_fail_before_any_hook(
    make: Callable[[], object],
) -> None:
    """V-034: exact error; no hook, no body; one notification with ``arguments is None``."""
    outcome = await _run_non_lossless(make, scoped=True)
    _check_non_lossless(outcome)
    assert len(outcome.scoped_seen) == 1


@pytest.mark.parametrize("make", _BAD_ARGUMENTS)
async def test_v035_scope_less_call_still_notifies_global_observers(
    make: Callable[[], object],
) -> None:
    """V-035: with a scope-less call, global observers are still notified once."""
    outcome = await _run_non_lossless(make, scoped=False)
    _check_non_lossless(outcome)
    assert outcome.scoped_seen == []


async def test_v036_observers_receive_frozen_values() -> None:
    """V-036: a frozen execution, frozen arguments, a frozen result and frozen content."""
    runtime = ToolRuntime()
    runtime.register(make_echo())
    seen: list[tuple[ToolExecution, ToolResult]] = []
    runtime.on_result(lambda e, r: seen.append((e, r)))
    await run(runtime, "echo", {"text": "hi", "extra": [{"k": 1}]})
    ((execution, result),) = seen
    with pytest.raises(AttributeError):
        execution.name = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        execution.arguments = {}  # type: ignore[misc]
    assert type(execution.arguments) is FrozenDict
    assert type(execution.arguments["extra"]) is tuple
    assert type(execution.arguments["extra"][0]) is FrozenDict
    with pytest.raises(TypeError):
        execution.arguments["text"] = "x"
    with pytest.raises(AttributeError):
        result.is_error = True  # type: ignore[misc]
    assert type(result.content) is tuple
    with pytest.raises(AttributeError):
        result.content[0].text = "x"  # type: ignore[misc, union-attr]


class _BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")


async def test_v037_result_observer_failures_are_contained(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """V-037: raising, unprintable and coroutine-returning observers: logged, outcome unchanged."""
    caplog.set_level(logging.WARNING, logger="dsh_tools")
    runtime = ToolRuntime()
    runtime.register(make_echo())
    coroutines: list[Coroutine[Any, Any, None]] = []
    after: list[ToolResult] = []

    def raising(execution: ToolExecution, result: ToolResult) -> None:
        raise ValueError("observer exploded")

    def unprintable(execution: ToolExecution, result: ToolResult) -> None:
        raise _BadStr()

    def returns_coroutine(execution: ToolExecution, result: ToolResult) -> Any:
        coroutine = _async_change_observer()
        coroutines.append(coroutine)
        return coroutine

    runtime.on_result(raising)
    runtime.on_result(unprintable)
    runtime.on_result(returns_coroutine)
    runtime.on_result(lambda e, r: after.append(r))
    try:
        result = await runtime.execute(call("echo", {"text": "fine"}, call_id="c1"))
        assert not result.is_error, result
        assert result.value == "fine"
        assert result.content == (TextContent("fine"),)
        assert after == [result]
        assert after[0] is result
        assert inspect.getcoroutinestate(coroutines[0]) == inspect.CORO_CLOSED
        warnings = [
            r.getMessage()
            for r in caplog.records
            if r.name == "dsh_tools" and r.levelno == logging.WARNING
        ]
        prefix = 'tool "echo" (c1): tools/result observer failed: '
        assert warnings == [
            prefix + "observer exploded",
            prefix + "<unprintable thrown value>",
            prefix + "observer returned an awaitable; observers must be synchronous",
        ]
    finally:
        for coroutine in coroutines:
            coroutine.close()


async def test_v038_observers_see_the_wrapper_replacement() -> None:
    """V-038: after a wrapper replaced the failure, observers see the wrapper's failure."""

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        raise RuntimeError("original failure")

    runtime = ToolRuntime()
    runtime.register(raw_tool("t", body))
    replacement = error_result(HarnessError("replaced by wrapper", "WRAPPED"))

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        inner = await call_next()
        assert inner.is_error
        return replacement

    runtime.wrap_execute(wrap)
    seen: list[ToolResult] = []
    runtime.on_result(lambda e, r: seen.append(r))
    result = await run(runtime, "t")
    assert seen == [result]
    assert seen[0] is result
    assert error_text(result) == "Error: replaced by wrapper"
    assert result.error == ToolError("replaced by wrapper", ErrorInfo("HarnessError", "WRAPPED"))


# --------------------------------------------------------------------------- V-039..V-044


def test_v039_close_closes_children_first_then_own_registrations_lifo() -> None:
    """V-039: children closed first (most recent first, recursively), own registrations LIFO."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("g"))
    parent = runtime.open_scope(name="parent")
    disposers: dict[str, Disposer] = {}
    disposers["p-first"] = parent.register(raw_tool("p1"))
    older = runtime.open_scope(parent=parent, name="older")
    disposers["older"] = older.register(raw_tool("o"))
    grandchild = runtime.open_scope(parent=older, name="grandchild")
    disposers["grandchild"] = grandchild.register(raw_tool("gc"))
    newer = runtime.open_scope(parent=parent, name="newer")
    disposers["newer"] = newer.register(raw_tool("n"))
    disposers["p-restrict"] = parent.restrict(deny=["g"])
    disposers["p-last"] = parent.register(raw_tool("p2"))

    snapshots: list[frozenset[str]] = []

    def snapshot() -> None:
        snapshots.append(frozenset(k for k, d in disposers.items() if d.disposed))

    runtime.on_change(snapshot)
    parent.close()
    snapshot()
    assert len(snapshots) == len(disposers) + 1
    order: list[str] = []
    for taken in snapshots:
        new = taken - set(order)
        assert len(new) <= 1, snapshots
        order.extend(new)
    assert order == ["newer", "grandchild", "older", "p-last", "p-restrict", "p-first"]
    assert all(s.closed for s in (parent, older, grandchild, newer))

    snapshots.clear()
    parent.close()  # idempotent: nothing happens
    newer.close()
    assert snapshots == []
    assert _names(runtime, parent) == ["g"]


@pytest.mark.parametrize("closed", ["the scope", "its parent"])
@pytest.mark.parametrize("change", ["register", "restrict"])
def test_v039_a_change_observer_closing_the_scope_disposes_the_new_registration(
    closed: str, change: str
) -> None:
    """V-039 (§4: close "disposes its remaining registrations"): an ``on_change`` observer
    that closes the scope while it is notified of that scope's new registration. The
    registration is owned before the observers run, so the close disposes it as well."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("inherited"))
    parent = runtime.open_scope(name="parent")
    scope = runtime.open_scope(parent=parent, name="child")
    target = scope if closed == "the scope" else parent
    fired: list[bool] = []

    def close_once() -> None:
        if not fired:
            fired.append(True)
            target.close()

    runtime.on_change(close_once)
    if change == "register":
        disposer = scope.register(raw_tool("x"))
    else:
        disposer = scope.restrict(deny=["inherited"])
    assert fired == [True]
    assert scope.closed
    assert disposer.disposed
    assert runtime.get("x", scope) is None
    assert scope._owner.layer == {}
    assert scope._owner.restrictions == ()


def test_v039_scope_attributes_and_with_block() -> None:
    """V-039 (§4): ``name``, ``parent``, ``runtime``, ``closed``; ``with`` closes on exit."""
    runtime = ToolRuntime()
    with runtime.open_scope(name="outer") as outer:
        assert isinstance(outer, Scope)
        inner = runtime.open_scope(parent=outer)
        assert (outer.name, outer.parent, outer.runtime, outer.closed) == (
            "outer",
            None,
            runtime,
            False,
        )
        assert (inner.name, inner.parent, inner.runtime) == (None, outer, runtime)
        outer.register(raw_tool("t"))
    assert outer.closed
    assert inner.closed
    assert runtime.get("t", outer) is None

    with pytest.raises(KeyError), runtime.open_scope() as failing:
        raise KeyError("not suppressed")
    assert failing.closed


@pytest.mark.parametrize(
    "action",
    [
        pytest.param(lambda s: s.register(raw_tool("t")), id="register"),
        pytest.param(lambda s: s.register("not a definition"), id="register-bad-type"),
        pytest.param(lambda s: s.register(raw_tool("run_code")), id="register-run-code"),
        pytest.param(lambda s: s.restrict(deny=["g"]), id="restrict"),
        pytest.param(lambda s: s.restrict(), id="restrict-no-op"),
        pytest.param(lambda s: s.restrict(allow="g"), id="restrict-str"),
        pytest.param(lambda s: s.guard(lambda e: None), id="guard"),
        pytest.param(lambda s: s.on_pre_execute(_pass_pre), id="on_pre_execute"),
        pytest.param(lambda s: s.wrap_execute(_pass_pre), id="wrap_execute"),
        pytest.param(lambda s: s.on_post_execute(_pass_pre), id="on_post_execute"),
        pytest.param(lambda s: s.on_result(lambda e, r: None), id="on_result"),
        pytest.param(lambda s: s.on_change(lambda: None), id="on_change"),
        pytest.param(lambda s: s.runtime.open_scope(parent=s), id="open_scope"),
    ],
)
def test_v040_closed_scope_refuses_registrations(action: Callable[[Scope], object]) -> None:
    """V-040: any registration through a closed scope, or opening a child → ``scope is closed``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("g"))
    scope = runtime.open_scope()
    scope.close()
    with pytest.raises(RuntimeError) as info:
        action(scope)
    assert str(info.value) == "scope is closed"


async def test_v041_closed_scope_stays_a_valid_scope_argument() -> None:
    """V-041: a closed scope works as ``ToolCall.scope`` and in ``get``; it contributes nothing."""
    runtime = ToolRuntime()
    g = raw_tool("g")
    runtime.register(g)
    parent = runtime.open_scope()
    p = raw_tool("p")
    parent.register(p)
    scope = runtime.open_scope(parent=parent)
    scope.register(raw_tool("own"))
    scope.register(raw_tool("g"))  # shadow
    scope.restrict(deny=["p"])
    assert _names(runtime, scope) == ["g", "own"]
    scope.close()

    assert runtime.get("g", scope) is g
    assert runtime.get("p", scope) is p  # the restriction is gone with the scope
    assert runtime.get("own", scope) is None
    assert _names(runtime, scope) == ["g", "p"]
    ok = await run(runtime, "g", scope=scope)
    assert not ok.is_error, ok
    gone = await run(runtime, "own", scope=scope)
    assert error_text(gone) == 'Error: unknown tool "own"'
    assert runtime.execution_mode(call("g", scope=scope)).value == "exclusive"


def test_v042_scope_has_no_public_constructor() -> None:
    """V-042: ``Scope()`` directly → ``TypeError``."""
    with pytest.raises(TypeError):
        Scope()


def test_v042_foreign_scopes_are_usage_errors() -> None:
    """V-042: a parent from another runtime; ``get``/``schemas``/``execution_mode`` with one."""
    runtime = ToolRuntime()
    other = ToolRuntime()
    foreign = other.open_scope()
    with pytest.raises(ValueError, match=exactly("parent scope belongs to a different runtime")):
        runtime.open_scope(parent=foreign)
    for action in (
        lambda: runtime.get("x", foreign),
        lambda: runtime.schemas(foreign),
        lambda: runtime.execution_mode(call("x", scope=foreign)),
    ):
        with pytest.raises(ValueError, match=exactly("scope belongs to a different runtime")):
            action()


@pytest.mark.parametrize("bad", ["scope", 1, object()])
def test_v042_non_scope_arguments_are_type_errors(bad: object) -> None:
    """V-042 (§4): a non-``Scope`` scope, parent or name → ``TypeError``."""
    runtime = ToolRuntime()
    with pytest.raises(TypeError):
        runtime.get("x", bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        runtime.schemas(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        runtime.open_scope(parent=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        runtime.open_scope(name=1)  # type: ignore[arg-type]


async def test_v042_execute_rejects_foreign_scopes_and_non_calls() -> None:
    """V-042 (§4): ``execute`` raises for a foreign ``call.scope`` and a non-``ToolCall``."""
    runtime = ToolRuntime()
    runtime.register(make_echo())
    foreign = ToolRuntime().open_scope()
    with pytest.raises(ValueError, match=exactly("scope belongs to a different runtime")):
        await runtime.execute(call("echo", scope=foreign))
    with pytest.raises(TypeError) as type_info:
        await runtime.execute({"name": "echo"})  # type: ignore[arg-type]
    assert str(type_info.value) == "execute() expects a ToolCall, got dict"


def test_v043_change_observers_are_unfiltered() -> None:
    """V-043: an observer registered through scope A hears B's registration; A owns its disposal."""
    runtime = ToolRuntime()
    a = runtime.open_scope()
    b = runtime.open_scope()
    heard: list[str] = []
    a.on_change(lambda: heard.append("a-observer"))
    b.register(raw_tool("t"))
    assert heard == ["a-observer"]
    runtime.register(raw_tool("g"))
    b.restrict(deny=["g"])
    assert heard == ["a-observer"] * 3
    a.close()  # disposes the observer; A had no tools, so nothing to notify
    assert heard == ["a-observer"] * 3
    b.register(raw_tool("u"))
    assert heard == ["a-observer"] * 3


async def test_v044_global_and_scoped_hooks_form_one_chain_in_registration_order() -> None:
    """V-044: alternately registered global and scoped pre hooks: first registered is outermost."""
    runtime = ToolRuntime()
    runtime.register(make_echo())
    scope = runtime.open_scope()
    other = runtime.open_scope()
    log: list[str] = []

    def hook(label: str) -> PreExecuteHook:
        async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
            log.append(f"{label}:before")
            decision = await call_next()
            log.append(f"{label}:after")
            return decision

        return pre

    runtime.on_pre_execute(hook("g1"))
    scope.on_pre_execute(hook("s1"))
    other.on_pre_execute(hook("other"))
    runtime.on_pre_execute(hook("g2"))
    scope.on_pre_execute(hook("s2"))
    result = await run(runtime, "echo", scope=scope)
    assert not result.is_error, result
    assert log == [
        "g1:before",
        "s1:before",
        "g2:before",
        "s2:before",
        "s2:after",
        "g2:after",
        "s1:after",
        "g1:after",
    ]
    log.clear()
    await run(runtime, "echo")
    assert log == ["g1:before", "g2:before", "g2:after", "g1:after"]
