"""``ToolRuntime.execution_mode(call)``: classification of a call (runtime.md §10, §12.3-§12.4).

Conformance: M-001..M-011.
"""

from __future__ import annotations

import enum
import inspect
import logging
from typing import TYPE_CHECKING, Any

import pytest

from dsh_tools import (
    ExecutionMode,
    FrozenDict,
    Output,
    TextContent,
    ToolCall,
    ToolRunContext,
    ToolRuntime,
    define_tool,
    tool,
)
from tests.helpers import call, mode, raw_tool, text_output

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

PARALLEL = ExecutionMode.PARALLEL
EXCLUSIVE = ExecutionMode.EXCLUSIVE

MODE_PARAMETERS = {
    "type": "object",
    "properties": {"mode": {"type": "string", "enum": ["read", "write"]}},
    "required": ["mode"],
}


def test_m001_classifier_returning_true_is_parallel() -> None:
    """M-001: a classifier returning ``True`` → ``PARALLEL``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("t", is_concurrency_safe=lambda args: True))
    assert mode(runtime, "t") is PARALLEL
    assert mode(runtime, "t", {"anything": [1]}) is PARALLEL


def test_m002_default_and_false_are_exclusive() -> None:
    """M-002: ``is_concurrency_safe=False`` (the default) → ``EXCLUSIVE``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("explicit", is_concurrency_safe=False))
    runtime.register(
        define_tool(
            name="default",
            description="d",
            parameters={"type": "object"},
            output=text_output(),
            execute=_body,
        )
    )
    assert runtime.get("default") is not None
    assert runtime.get("default").is_concurrency_safe is False  # type: ignore[union-attr]
    assert mode(runtime, "explicit") is EXCLUSIVE
    assert mode(runtime, "default") is EXCLUSIVE
    runtime.register(raw_tool("true", is_concurrency_safe=True))
    assert mode(runtime, "true") is PARALLEL


def test_m003_unknown_or_restricted_away_tool_is_exclusive() -> None:
    """M-003: an unknown tool, or one hidden by a restriction → ``EXCLUSIVE``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("safe", is_concurrency_safe=True))
    assert mode(runtime, "nope") is EXCLUSIVE
    assert mode(runtime, "safe") is PARALLEL
    restrictions: list[dict[str, list[str]]] = [{"allow": []}, {"deny": ["safe"]}]
    for restriction in restrictions:
        scope = runtime.open_scope()
        scope.restrict(**restriction)
        assert mode(runtime, "safe", scope=scope) is EXCLUSIVE
        assert mode(runtime, "safe", scope=runtime.open_scope(parent=scope)) is EXCLUSIVE
    visible = runtime.open_scope()
    assert mode(runtime, "safe", scope=visible) is PARALLEL


def test_m003_disposed_and_scope_closed_tools_are_exclusive() -> None:
    """M-003 (§10): classification reads the live view."""
    runtime = ToolRuntime()
    disposer = runtime.register(raw_tool("safe", is_concurrency_safe=True))
    scope = runtime.open_scope()
    scope.register(raw_tool("local", is_concurrency_safe=True))
    assert mode(runtime, "local", scope=scope) is PARALLEL
    disposer()
    scope.close()
    assert mode(runtime, "safe") is EXCLUSIVE
    assert mode(runtime, "local", scope=scope) is EXCLUSIVE


def test_m004_classifier_reads_the_arguments() -> None:
    """M-004: ``args["mode"] == "read"`` → ``PARALLEL`` for read, ``EXCLUSIVE`` for write."""
    runtime = ToolRuntime()
    runtime.register(
        raw_tool("io", is_concurrency_safe=lambda args: args["mode"] == "read")  # type: ignore[index]
    )
    assert mode(runtime, "io", {"mode": "read"}) is PARALLEL
    assert mode(runtime, "io", {"mode": "write"}) is EXCLUSIVE


async def _body(args: Any, ctx: ToolRunContext) -> object:
    return "ran"


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param({}, id="missing"),
        pytest.param({"mode": 5}, id="wrong-type"),
        pytest.param({"mode": "delete"}, id="not-in-enum"),
        pytest.param("not an object", id="not-an-object"),
        pytest.param({"mode": {1, 2}}, id="not-json"),
    ],
)
def test_m005_define_tool_classifier_not_called_for_invalid_arguments(arguments: object) -> None:
    """M-005: ``EXCLUSIVE``, no exception, the user classifier not called."""
    seen: list[object] = []

    def classify(args: FrozenDict) -> object:
        seen.append(args)
        return True

    runtime = ToolRuntime()
    runtime.register(
        define_tool(
            name="io",
            description="d",
            parameters=MODE_PARAMETERS,
            output=text_output(),
            execute=_body,
            is_concurrency_safe=classify,
        )
    )
    assert mode(runtime, "io", arguments) is EXCLUSIVE
    assert seen == []
    assert mode(runtime, "io", {"mode": "read"}) is PARALLEL
    assert seen == [{"mode": "read"}]


@pytest.mark.parametrize(
    "error",
    [ValueError("classifier broke"), KeyError("mode"), RuntimeError()],
)
def test_m006_raw_classifier_raising_is_exclusive(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    """M-006: a raw classifier that raises → ``EXCLUSIVE``, no exception; logged at DEBUG."""
    caplog.set_level(logging.DEBUG, logger="dsh_tools")

    def classify(args: object) -> object:
        raise error

    runtime = ToolRuntime()
    runtime.register(raw_tool("t", is_concurrency_safe=classify))
    assert mode(runtime, "t") is EXCLUSIVE
    assert any(r.name == "dsh_tools" and r.levelno == logging.DEBUG for r in caplog.records)


async def _coroutine_true() -> bool:
    return True


class _Truthy:
    def __bool__(self) -> bool:
        return True


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: "yes", id="str"),
        pytest.param(lambda: 1, id="one"),
        pytest.param(lambda: 1.0, id="float"),
        pytest.param(lambda: [True], id="list"),
        pytest.param(lambda: _Truthy(), id="truthy-object"),
        pytest.param(lambda: ExecutionMode.PARALLEL, id="mode-member"),
        pytest.param(lambda: None, id="none"),
        pytest.param(_coroutine_true, id="coroutine"),
    ],
)
def test_m007_anything_but_exactly_true_is_exclusive(make: Callable[[], object]) -> None:
    """M-007: ``"yes"``, ``1`` or a coroutine → ``EXCLUSIVE`` (the coroutine is closed)."""
    produced: list[object] = []

    def classify(args: object) -> object:
        value = make()
        produced.append(value)
        return value

    runtime = ToolRuntime()
    runtime.register(raw_tool("t", is_concurrency_safe=classify))
    try:
        assert mode(runtime, "t") is EXCLUSIVE
        assert len(produced) == 1
        if inspect.iscoroutine(produced[0]):
            assert inspect.getcoroutinestate(produced[0]) == inspect.CORO_CLOSED
    finally:
        for value in produced:
            if inspect.iscoroutine(value):
                value.close()


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param({"mode": "read"}, id="dict"),
        pytest.param(["raw", "list"], id="list"),
        pytest.param({"s": {1, 2}}, id="non-json"),
        pytest.param("string", id="str"),
    ],
)
def test_m008_raw_classifier_receives_the_call_arguments_object(arguments: object) -> None:
    """M-008: a raw classifier receives ``call.arguments`` itself (``is``), not a snapshot."""
    received: list[object] = []

    def classify(args: object) -> object:
        received.append(args)
        return True

    runtime = ToolRuntime()
    runtime.register(raw_tool("t", is_concurrency_safe=classify))
    the_call = ToolCall(call_id="c", name="t", arguments=arguments)
    assert runtime.execution_mode(the_call) is PARALLEL
    assert len(received) == 1
    assert received[0] is arguments
    assert the_call.arguments is arguments


def test_m009_execution_mode_members() -> None:
    """M-009: exactly ``PARALLEL`` (``"parallel"``) and ``EXCLUSIVE`` (``"exclusive"``)."""
    assert issubclass(ExecutionMode, enum.Enum)
    assert [(m.name, m.value) for m in ExecutionMode] == [
        ("PARALLEL", "parallel"),
        ("EXCLUSIVE", "exclusive"),
    ]
    assert ExecutionMode("parallel") is PARALLEL
    assert ExecutionMode("exclusive") is EXCLUSIVE


def test_m010_classification_follows_the_call_scope() -> None:
    """M-010: a scope shadowing a global parallel-safe tool with an exclusive one."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("t", is_concurrency_safe=True))
    exclusive_scope = runtime.open_scope()
    exclusive_scope.register(raw_tool("t", is_concurrency_safe=False))
    below = runtime.open_scope(parent=exclusive_scope)
    parallel_again = runtime.open_scope(parent=below)
    parallel_again.register(raw_tool("t", is_concurrency_safe=lambda args: True))
    assert mode(runtime, "t") is PARALLEL
    assert mode(runtime, "t", scope=runtime.open_scope()) is PARALLEL
    assert mode(runtime, "t", scope=exclusive_scope) is EXCLUSIVE
    assert mode(runtime, "t", scope=below) is EXCLUSIVE
    assert mode(runtime, "t", scope=parallel_again) is PARALLEL


def _counting_body(calls: list[object]) -> Callable[..., Coroutine[Any, Any, object]]:
    async def body(args: Any, ctx: ToolRunContext) -> object:
        calls.append(args)
        return "ran"

    return body


@pytest.mark.parametrize("safe", [True, False])
def test_m011_bool_flag_on_every_kind_of_definition(safe: bool) -> None:
    """M-011: ``True`` → ``PARALLEL`` for every call, invalid arguments included, nothing called."""
    calls: list[object] = []
    expected = PARALLEL if safe else EXCLUSIVE

    @tool(is_concurrency_safe=safe)
    async def decorated(path: str) -> str:
        """Read a path."""
        calls.append(path)
        return path

    runtime = ToolRuntime()
    runtime.register(raw_tool("raw", _counting_body(calls), is_concurrency_safe=safe))
    runtime.register(
        define_tool(
            name="defined",
            description="d",
            parameters=MODE_PARAMETERS,
            output=text_output(),
            execute=_counting_body(calls),
            is_concurrency_safe=safe,
        )
    )
    runtime.register(decorated)
    assert runtime.get("decorated") is decorated
    for name in ("raw", "defined", "decorated"):
        definition = runtime.get(name)
        assert definition is not None
        assert definition.is_concurrency_safe is safe
        for arguments in ({}, {"mode": "read"}, {"path": 5}, {"mode": 1, "x": [2]}, "garbage"):
            assert mode(runtime, name, arguments) is expected
    assert calls == []


def test_m011_tool_decorator_callable_classifier_validates_first() -> None:
    """M-011/M-005 (§12.4): ``@tool`` callable classifiers see validated arguments only."""
    seen: list[object] = []

    def classify(args: FrozenDict) -> object:
        seen.append(args)
        return args["path"].startswith("/tmp")

    @tool(is_concurrency_safe=classify)
    async def reader(path: str) -> str:
        """Read a path."""
        return path

    runtime = ToolRuntime()
    runtime.register(reader)
    assert mode(runtime, "reader", {"path": "/tmp/x"}) is PARALLEL
    assert mode(runtime, "reader", {"path": "/etc"}) is EXCLUSIVE
    assert mode(runtime, "reader", {"path": 5}) is EXCLUSIVE
    assert mode(runtime, "reader", {}) is EXCLUSIVE
    assert seen == [{"path": "/tmp/x"}, {"path": "/etc"}]


def test_m011_decorated_tool_defaults_to_exclusive() -> None:
    """M-011 (§12.4): ``@tool`` without ``is_concurrency_safe`` → ``EXCLUSIVE``."""

    @tool
    async def plain(x: int) -> int:
        """Return x."""
        return x

    runtime = ToolRuntime()
    runtime.register(plain)
    assert mode(runtime, "plain", {"x": 1}) is EXCLUSIVE


async def test_m011_parallel_define_tool_still_fails_invalid_arguments_at_dispatch() -> None:
    """M-011 (§12.3): ``PARALLEL`` without validation; the call then fails ``INVALID_ARGS``."""
    calls: list[object] = []
    runtime = ToolRuntime()
    runtime.register(
        define_tool(
            name="defined",
            description="d",
            parameters=MODE_PARAMETERS,
            output=Output(schema={"type": "string"}, render=lambda a, v: [TextContent(v)]),
            execute=_counting_body(calls),
            is_concurrency_safe=True,
        )
    )
    bad = call("defined", {"mode": 5})
    assert runtime.execution_mode(bad) is PARALLEL
    result = await runtime.execute(bad)
    assert result.is_error
    assert result.error is not None
    assert result.error.info is not None
    assert result.error.info.code == "INVALID_ARGS"
    assert calls == []


def test_m006_classification_never_raises_for_tool_reasons() -> None:
    """M-006 (§10): a classifier raising a ``BaseException``-free error never escapes."""

    def classify(args: object) -> object:
        return args["missing"]  # type: ignore[index]

    runtime = ToolRuntime()
    runtime.register(raw_tool("t", is_concurrency_safe=classify))
    assert runtime.execution_mode(call("t", {"present": 1})) is EXCLUSIVE
    assert runtime.execution_mode(call("t", [1])) is EXCLUSIVE
