"""The registry: definitions, registration, ``get``/``schemas``, disposers, change notifications.

runtime.md §3, §4, §5.1, §5.2 (global view) and §5.5. Conformance: R-001..R-024.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import subprocess
import sys
import textwrap
from typing import Any

import attrs
import pytest

from dsh_tools import (
    Disposer,
    JsonSchemaError,
    JsonValue,
    Output,
    TextContent,
    ToolDefinition,
    ToolExecution,
    ToolRunContext,
    ToolRuntime,
    ToolSchema,
    define_tool,
)
from tests.helpers import (
    ECHO_PARAMETERS,
    call,
    deep_equal,
    error_text,
    exactly,
    make_echo,
    nest,
    raw_tool,
    returning,
    run,
    text_output,
)

RUN_CODE_MESSAGE = (
    'tool name "run_code" is reserved for the Code Mode presentation transport and cannot be '
    "registered or shadowed"
)


class _ChangeLog:
    """A change observer that counts notifications (and optionally raises)."""

    def __init__(self) -> None:
        self.count = 0
        self.error: BaseException | None = None

    def __call__(self) -> None:
        self.count += 1
        if self.error is not None:
            raise self.error


def _disposed(disposer: Disposer) -> bool:
    """Read ``disposed`` through a call, so the type checker does not narrow it across calls."""
    return disposer.disposed


def _definition_kwargs(**overrides: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "name": "x",
        "description": "d",
        "parameters": {"type": "object"},
        "output": text_output(),
        "execute": returning("x"),
    }
    kwargs.update(overrides)
    return kwargs


# --------------------------------------------------------------------------- R-001..R-005


def test_r001_schemas_lists_one_schema_per_tool() -> None:
    """R-001: one ``ToolSchema`` with exactly ``name``, ``description``, ``parameters``."""
    runtime = ToolRuntime()
    echo = make_echo()
    runtime.register(echo)
    schemas = runtime.schemas()
    assert type(schemas) is list
    assert len(schemas) == 1
    (schema,) = schemas
    assert type(schema) is ToolSchema
    assert schema.name == "echo"
    assert schema.description == echo.description == "Echo the given text."
    assert schema.parameters == ECHO_PARAMETERS


def test_r002_tool_schema_exposes_only_name_description_parameters() -> None:
    """R-002: fields and ``to_json()`` are exactly ``name``, ``description``, ``parameters``."""
    assert [f.name for f in attrs.fields(ToolSchema)] == ["name", "description", "parameters"]
    runtime = ToolRuntime()
    runtime.register(make_echo())
    (schema,) = runtime.schemas()
    data = schema.to_json()
    assert data == {
        "name": "echo",
        "description": "Echo the given text.",
        "parameters": ECHO_PARAMETERS,
    }
    assert set(data) == {"name", "description", "parameters"}
    json.dumps(data)
    for hidden in (
        "execute",
        "output",
        "timeout",
        "is_concurrency_safe",
        "finalize_content",
        "present_call",
        "present_result",
    ):
        assert not hasattr(schema, hidden), hidden
        assert hidden not in data


def test_r003_schemas_returns_detached_copies() -> None:
    """R-003: mutating the list and ``parameters`` leaves later ``schemas()`` and ``get`` intact."""
    runtime = ToolRuntime()
    raw_parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }
    runtime.register(make_echo())
    runtime.register(raw_tool("raw", parameters=raw_parameters))

    first = runtime.schemas()
    echo_params = first[0].parameters
    raw_params = first[1].parameters
    assert type(echo_params) is dict
    assert type(echo_params["properties"]) is dict
    assert type(raw_params["required"]) is list
    assert raw_params is not raw_parameters
    echo_params["properties"]["text"]["type"] = "integer"
    echo_params["extra"] = True
    raw_params["required"].append("other")
    raw_params["properties"].clear()
    first.clear()

    again = runtime.schemas()
    assert [s.name for s in again] == ["echo", "raw"]
    assert again[0].parameters == ECHO_PARAMETERS
    assert again[1].parameters == {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }
    echo = runtime.get("echo")
    assert echo is not None
    assert echo.parameters == ECHO_PARAMETERS
    assert raw_parameters == {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }
    # every call hands out a new copy
    assert runtime.schemas()[1].parameters is not runtime.schemas()[1].parameters


def test_r004_schemas_with_5000_deep_one_of() -> None:
    """R-004: raw parameters with ``oneOf`` nested 5000 deep project without ``RecursionError``."""
    depth = 5000
    inner = nest(depth, {"type": "string"}, lambda node: {"oneOf": [node, {"type": "null"}]})
    parameters = {"type": "object", "properties": {"deep": inner}}
    runtime = ToolRuntime()
    runtime.register(raw_tool("deep", parameters=parameters))
    (schema,) = runtime.schemas()
    assert schema.parameters is not parameters
    assert deep_equal(schema.parameters, parameters, tuple_is_list=False)
    # detached all the way down: no node of the copy is a node of the original
    node, original = schema.parameters["properties"]["deep"], inner
    for _ in range(depth):
        assert node is not original
        assert type(node["oneOf"]) is list
        node, original = node["oneOf"][0], original["oneOf"][0]  # type: ignore[index]
    assert node == {"type": "string"}


def test_r005_non_lossless_raw_parameters_fail_at_projection() -> None:
    """R-005: ``float("nan")`` as a default → ``TypeError`` naming the tool at ``schemas()``."""
    runtime = ToolRuntime()
    parameters = {"type": "object", "properties": {"x": {"type": "number", "default": math.nan}}}
    runtime.register(raw_tool("lossy-schema", parameters=parameters))  # accepted: raw
    with pytest.raises(TypeError) as info:
        runtime.schemas()
    assert str(info.value) == (
        'tool "lossy-schema" parameters must be lossless JSON before schema projection'
    )


# ------------------------------------------------------------------ R-006, R-012, R-023, R-024


@pytest.mark.parametrize(
    "timeout", [0, 0.0, -1, -0.5, math.inf, -math.inf, math.nan, 10**400, -(10**400)]
)
def test_r006_timeout_out_of_range(timeout: float) -> None:
    """R-006: ``timeout`` ≤ 0, NaN or infinite → ``ValueError``."""
    message = 'tool "x" timeout must be a positive finite number'
    with pytest.raises(ValueError, match=exactly(message)):
        ToolDefinition(**_definition_kwargs(timeout=timeout))


@pytest.mark.parametrize("timeout", [True, False, "1", [1], 1j])
def test_r006_timeout_of_the_wrong_type(timeout: object) -> None:
    """R-006: ``timeout=True`` or ``"1"`` → ``TypeError`` with the same text."""
    with pytest.raises(TypeError) as info:
        ToolDefinition(**_definition_kwargs(timeout=timeout))
    assert str(info.value) == 'tool "x" timeout must be a positive finite number'


@pytest.mark.parametrize(
    ("timeout", "stored"), [(1, 1.0), (0.25, 0.25), (1e300, 1e300), (None, None)]
)
def test_r006_valid_timeout_is_stored_as_float(timeout: float | None, stored: float | None) -> None:
    """R-006 (§3): a valid ``timeout`` is stored as ``float(timeout)``; no upper bound."""
    defn = ToolDefinition(**_definition_kwargs(timeout=timeout))
    assert defn.timeout == stored
    assert type(defn.timeout) is type(stored)


def test_r012_definition_without_output() -> None:
    """R-012: ``output=None`` → ``TypeError`` with the exact text."""
    with pytest.raises(TypeError) as info:
        ToolDefinition(**_definition_kwargs(output=None))
    assert str(info.value) == (
        'tool "x" must declare output=Output(schema, render, presentation_meta=None)'
    )


@pytest.mark.parametrize(
    ("overrides", "exc_type", "message"),
    [
        ({"name": 5}, TypeError, "tool name must be a str"),
        ({"name": 5, "description": 5}, TypeError, "tool name must be a str"),
        ({"description": None}, TypeError, 'tool "x" description must be a str'),
        (
            {"description": None, "output": None},
            TypeError,
            'tool "x" description must be a str',
        ),
        (
            {"output": {"schema": {}}},
            TypeError,
            'tool "x" must declare output=Output(schema, render, presentation_meta=None)',
        ),
        (
            {"output": None, "execute": None},
            TypeError,
            'tool "x" must declare output=Output(schema, render, presentation_meta=None)',
        ),
        ({"execute": "run"}, TypeError, 'tool "x" execute must be callable'),
        (
            {"execute": None, "finalize_content": 1},
            TypeError,
            'tool "x" execute must be callable',
        ),
        ({"finalize_content": 1}, TypeError, 'tool "x" finalize_content must be callable or None'),
        ({"present_call": "f"}, TypeError, 'tool "x" present_call must be callable or None'),
        ({"present_result": 0}, TypeError, 'tool "x" present_result must be callable or None'),
        (
            {"present_result": 0, "is_concurrency_safe": None},
            TypeError,
            'tool "x" present_result must be callable or None',
        ),
        (
            {"is_concurrency_safe": None, "timeout": -1},
            TypeError,
            'tool "x" is_concurrency_safe must be a bool or callable',
        ),
    ],
)
def test_r012_definition_checks_in_order(
    overrides: dict[str, Any], exc_type: type[Exception], message: str
) -> None:
    """R-012 (§3): definition-time checks raise the first failure of the documented order."""
    with pytest.raises(exc_type) as info:
        ToolDefinition(**_definition_kwargs(**overrides))
    assert str(info.value) == message


def test_r012_definition_has_identity_semantics() -> None:
    """R-012 (§3): ``ToolDefinition`` is frozen with identity semantics (``eq=False``)."""
    a = ToolDefinition(**_definition_kwargs())
    b = ToolDefinition(**_definition_kwargs(execute=a.execute, output=a.output))
    assert a != b
    assert a == a
    with pytest.raises(AttributeError):
        a.name = "y"  # type: ignore[misc]


def test_r023_output_render_must_be_callable() -> None:
    """R-023: ``Output(render=1)`` → ``TypeError("output.render must be callable")``."""
    with pytest.raises(TypeError) as info:
        Output(schema={"type": "string"}, render=1)  # type: ignore[arg-type]
    assert str(info.value) == "output.render must be callable"


def test_r023_output_presentation_meta_must_be_callable_or_none() -> None:
    """R-023: ``Output(presentation_meta=1)`` → ``TypeError`` with the exact text."""
    with pytest.raises(TypeError) as info:
        Output(
            schema={"type": "string"},
            render=lambda a, v: [],
            presentation_meta=1,  # type: ignore[arg-type]
        )
    assert str(info.value) == "output.presentation_meta must be callable or None"


@pytest.mark.parametrize(
    "schema",
    [{"type": "strin"}, {"type": "string", "format": "uri"}, {"oneOf": [{}]}, "string", None],
)
def test_r023_output_schema_must_be_supported(schema: object) -> None:
    """R-023: an unsupported ``Output.schema`` → ``JsonSchemaError`` (a ``ValueError``)."""
    with pytest.raises(JsonSchemaError) as info:
        Output(schema=schema, render=lambda a, v: [])
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith("unsupported JSON Schema: ")


def test_r023_output_checks_in_order_and_freezes_the_schema() -> None:
    """R-023 (§3): render before presentation_meta before schema; the schema is frozen."""
    with pytest.raises(TypeError, match=r"^output\.render must be callable$"):
        Output(schema={"type": "bad"}, render=1, presentation_meta=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^output\.presentation_meta must be callable or None$"):
        Output(
            schema={"type": "bad"},
            render=lambda a, v: [],
            presentation_meta=1,  # type: ignore[arg-type]
        )
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}
    output = Output(schema=schema, render=lambda a, v: [])
    schema["properties"]["a"]["type"] = "integer"
    assert output.schema == {"type": "object", "properties": {"a": {"type": "string"}}}
    with pytest.raises(TypeError):
        output.schema["type"] = "array"


@pytest.mark.parametrize("flag", [42, None, "yes", 1.0])
def test_r024_is_concurrency_safe_must_be_bool_or_callable(flag: object) -> None:
    """R-024: ``is_concurrency_safe=42`` / ``None`` → ``TypeError`` with the exact text."""
    with pytest.raises(TypeError) as info:
        ToolDefinition(**_definition_kwargs(is_concurrency_safe=flag))
    assert str(info.value) == 'tool "x" is_concurrency_safe must be a bool or callable'


@pytest.mark.parametrize("flag", [True, False, lambda args: True])
def test_r024_bool_and_callable_classifiers_are_accepted(flag: object) -> None:
    """R-024 (§3): a ``bool`` or a callable is accepted and kept as given."""
    defn = ToolDefinition(**_definition_kwargs(is_concurrency_safe=flag))
    assert defn.is_concurrency_safe is flag


# --------------------------------------------------------------------------- R-007..R-011


def test_r007_duplicate_global_registration() -> None:
    """R-007: registering ``echo`` twice on the runtime → ``ValueError`` with the exact text."""
    runtime = ToolRuntime()
    echo = make_echo()
    runtime.register(echo)
    message = (
        'tool "echo" is already registered (for a per-scope variant, register through that '
        "scope instead)"
    )
    with pytest.raises(ValueError, match=exactly(message)):
        runtime.register(make_echo())
    with pytest.raises(ValueError, match="already registered"):
        runtime.register(echo)  # the same object too
    assert runtime.get("echo") is echo
    assert [s.name for s in runtime.schemas()] == ["echo"]


def test_r008_closing_a_scope_removes_its_registrations() -> None:
    """R-008: register through a scope, close it → ``get(name, scope)`` is ``None``."""
    runtime = ToolRuntime()
    scope = runtime.open_scope()
    tool = raw_tool("scoped")
    disposer = scope.register(tool)
    assert runtime.get("scoped", scope) is tool
    scope.close()
    assert scope.closed is True
    assert runtime.get("scoped", scope) is None
    assert runtime.get("scoped") is None
    assert disposer.disposed is True


def test_r009_disposer_is_idempotent() -> None:
    """R-009: the first call removes the tool, the second does nothing; ``disposed`` is ``True``."""
    runtime = ToolRuntime()
    changes = _ChangeLog()
    runtime.on_change(changes)
    disposer = runtime.register(make_echo())
    assert isinstance(disposer, Disposer)
    assert _disposed(disposer) is False
    assert changes.count == 1
    disposer()
    assert _disposed(disposer) is True
    assert runtime.get("echo") is None
    assert runtime.schemas() == []
    assert changes.count == 2
    disposer()
    assert disposer.disposed is True
    assert changes.count == 2
    # the name is free again, and the old disposer does not touch the new registration
    echo = make_echo()
    runtime.register(echo)
    disposer()
    assert runtime.get("echo") is echo


def test_r010_change_observer_failure_rolls_back_the_registration(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R-010: ``register`` raises the observer's exception; the name stays free."""
    caplog.set_level(logging.DEBUG, logger="dsh_tools")
    runtime = ToolRuntime()
    boom = RuntimeError("observer refused")
    changes = _ChangeLog()
    changes.error = boom
    runtime.on_change(changes)
    with pytest.raises(RuntimeError) as info:
        runtime.register(make_echo())
    assert info.value is boom
    assert runtime.get("echo") is None
    assert runtime.schemas() == []
    # the rollback notified again; its failure was logged, not raised
    assert changes.count == 2
    assert any(
        r.name == "dsh_tools" and "observer refused" in r.getMessage() for r in caplog.records
    )
    changes.error = None
    echo = make_echo()
    disposer = runtime.register(echo)
    assert runtime.get("echo") is echo
    assert disposer.disposed is False


def test_r010_first_raising_observer_stops_the_notification() -> None:
    """R-010 (§5.5): the first observer that raises stops the notification round."""
    runtime = ToolRuntime()
    calls: list[str] = []
    boom = ValueError("stop")

    def first() -> None:
        calls.append("first")
        if len(calls) == 1:
            raise boom

    def second() -> None:
        calls.append("second")

    runtime.on_change(first)
    runtime.on_change(second)
    with pytest.raises(ValueError, match=exactly("stop")) as info:
        runtime.register(make_echo())
    assert info.value is boom
    # round 1: first raises, second never hears it; round 2 (rollback): both hear it
    assert calls == ["first", "first", "second"]
    assert runtime.get("echo") is None


def test_r010_change_observer_failure_rolls_back_a_restriction() -> None:
    """R-010 (§5.5): the same rollback applies to ``restrict``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("g"))
    scope = runtime.open_scope()
    changes = _ChangeLog()
    runtime.on_change(changes)
    boom = RuntimeError("no")
    changes.error = boom
    with pytest.raises(RuntimeError) as info:
        scope.restrict(deny=["g"])
    assert info.value is boom
    changes.error = None
    assert runtime.get("g", scope) is not None
    assert [s.name for s in runtime.schemas(scope)] == ["g"]


def test_r011_exit_stack_tears_down_last_in_first_out() -> None:
    """R-011: disposers entered into an ``ExitStack`` are disposed LIFO (``b`` before ``a``)."""
    runtime = ToolRuntime()
    states: list[tuple[bool, bool]] = []
    runtime.on_change(lambda: states.append((runtime.get("a") is None, runtime.get("b") is None)))
    with contextlib.ExitStack() as stack:
        da = stack.enter_context(runtime.register(raw_tool("a")))
        db = stack.enter_context(runtime.register(raw_tool("b")))
        assert isinstance(da, Disposer)
        assert isinstance(db, Disposer)
        states.clear()
    # (a gone, b gone) after each disposal: b first
    assert states == [(False, True), (True, True)]
    assert da.disposed
    assert db.disposed


def _disposal_order(snapshots: list[frozenset[str]]) -> list[str]:
    order: list[str] = []
    for snapshot in snapshots:
        order.extend(sorted(snapshot - set(order)))
    return order


def test_r011_scope_close_tears_down_last_in_first_out() -> None:
    """R-011: registrations closed by ``scope.close()`` are disposed LIFO (``b`` before ``a``)."""
    runtime = ToolRuntime()
    runtime.register(raw_tool("g"))
    scope = runtime.open_scope()
    disposers = {
        "a": scope.register(raw_tool("a")),
        "r": scope.restrict(deny=["g"]),
        "b": scope.register(raw_tool("b")),
    }
    snapshots: list[frozenset[str]] = []

    def observe() -> None:
        snapshots.append(frozenset(k for k, d in disposers.items() if d.disposed))

    runtime.on_change(observe)
    scope.close()
    snapshots.append(frozenset(k for k, d in disposers.items() if d.disposed))
    assert len(snapshots) == 4  # three notifying disposals, plus the final state
    assert _disposal_order(snapshots) == ["b", "r", "a"]


def test_r011_disposer_as_context_manager() -> None:
    """R-011 (§4): ``__enter__`` returns the disposer, ``__exit__`` disposes, never suppresses."""
    runtime = ToolRuntime()
    with runtime.register(make_echo()) as disposer:
        assert isinstance(disposer, Disposer)
        assert runtime.get("echo") is not None
    assert disposer.disposed
    assert runtime.get("echo") is None

    with pytest.raises(KeyError), runtime.register(make_echo()) as inner:
        raise KeyError("propagates")
    assert inner.disposed
    assert runtime.get("echo") is None


# --------------------------------------------------------------------------- R-013..R-019


async def test_r013_define_tool_register_schemas_execute() -> None:
    """R-013: ``define_tool`` ``hello`` → register → ``schemas()`` → execute → ``hello:none``."""

    async def hello(args: Any, ctx: ToolRunContext) -> object:
        return f"hello:{args.get('name', 'none')}"

    parameters = {"type": "object", "properties": {"name": {"type": "string"}}}
    defn = define_tool(
        name="hello",
        description="Say hello.",
        parameters=parameters,
        output=text_output(),
        execute=hello,
    )
    assert isinstance(defn, ToolDefinition)
    runtime = ToolRuntime()
    runtime.register(defn)
    assert [s.to_json() for s in runtime.schemas()] == [
        {"name": "hello", "description": "Say hello.", "parameters": parameters}
    ]
    result = await run(runtime, "hello")
    assert not result.is_error, result
    assert result.value == "hello:none"
    assert result.content == (TextContent("hello:none"),)
    named = await run(runtime, "hello", {"name": "ann"})
    assert named.value == "hello:ann"


async def test_r014_raw_definition_with_mcp_style_schema() -> None:
    """R-014: a raw definition with an MCP-style JSON Schema is accepted and executes."""
    parameters = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "url": {"type": "string", "format": "uri", "minLength": 1},
            "mode": {"anyOf": [{"const": "a"}, {"const": "b"}]},
        },
        "required": ["url"],
        "additionalProperties": False,
    }
    seen: list[JsonValue] = []

    async def fetch(args: JsonValue, ctx: ToolRunContext) -> object:
        seen.append(args)
        return "fetched"

    runtime = ToolRuntime()
    runtime.register(raw_tool("fetch", fetch, parameters=parameters))
    (schema,) = runtime.schemas()
    assert schema.parameters == parameters
    result = await run(runtime, "fetch", {"url": "https://example.com"})
    assert not result.is_error, result
    assert result.content == (TextContent("fetched"),)
    assert seen == [{"url": "https://example.com"}]


def test_r015_get_returns_the_registered_object() -> None:
    """R-015: ``get("echo")`` is the very object registered."""
    runtime = ToolRuntime()
    echo = make_echo()
    runtime.register(echo)
    assert runtime.get("echo") is echo


def test_r016_get_unknown_returns_none() -> None:
    """R-016: ``get("nope")`` → ``None``."""
    runtime = ToolRuntime()
    runtime.register(make_echo())
    assert runtime.get("nope") is None
    assert runtime.get("Echo") is None


async def test_r017_raw_definitions_are_not_validated() -> None:
    """R-017: a raw tool called without a required argument still runs its body."""
    seen: list[JsonValue] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        seen.append(args)
        return "ran"

    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }
    runtime = ToolRuntime()
    runtime.register(raw_tool("needs-path", body, parameters=parameters))
    result = await run(runtime, "needs-path", {})
    assert not result.is_error, result
    assert result.value == "ran"
    assert seen == [{}]
    odd = await run(runtime, "needs-path", {"path": 5, "extra": [1]})
    assert odd.value == "ran"
    assert seen[1] == {"path": 5, "extra": (1,)}


@pytest.mark.parametrize(
    ("value", "type_name"),
    [({"name": "x"}, "dict"), (None, "NoneType"), ("echo", "str"), (ToolRuntime, "type")],
)
def test_r018_register_requires_a_definition(value: object, type_name: str) -> None:
    """R-018: ``register({"name": "x"})`` → ``TypeError`` ``… got dict`` (runtime and scope)."""
    runtime = ToolRuntime()
    scope = runtime.open_scope()
    for target in (runtime, scope):
        with pytest.raises(TypeError) as info:
            target.register(value)  # type: ignore[arg-type]
        assert str(info.value) == f"register() expects a ToolDefinition, got {type_name}"


def test_r019_run_code_is_reserved() -> None:
    """R-019: a tool named ``run_code`` cannot be registered, globally or in a scope."""
    runtime = ToolRuntime()
    scope = runtime.open_scope()
    child = runtime.open_scope(parent=scope)
    for target in (runtime, scope, child):
        with pytest.raises(ValueError, match=exactly(RUN_CODE_MESSAGE)):
            target.register(raw_tool("run_code"))
    assert runtime.get("run_code") is None
    assert runtime.get("run_code", child) is None
    assert runtime.schemas(child) == []


# --------------------------------------------------------------------------- R-020..R-022


def test_r020_change_notifications_are_counted_exactly() -> None:
    """R-020: one notification per register, restrict and each disposal; none for guards/hooks."""
    runtime = ToolRuntime()
    changes = _ChangeLog()
    runtime.on_change(changes)
    assert changes.count == 0

    d_global = runtime.register(raw_tool("g"))
    assert changes.count == 1
    scope = runtime.open_scope()
    assert changes.count == 1
    d_scoped = scope.register(raw_tool("s"))
    assert changes.count == 2
    d_restrict = scope.restrict(deny=["g"])
    assert changes.count == 3

    async def pre(execution: ToolExecution, call_next: Any) -> Any:
        return await call_next()

    async def wrap(execution: ToolExecution, call_next: Any) -> Any:
        return await call_next()

    async def post(execution: ToolExecution, result: Any, call_next: Any) -> Any:
        return await call_next()

    quiet: list[Disposer] = []
    for target in (runtime, scope):
        quiet.append(target.guard(lambda execution: None))
        quiet.append(target.on_pre_execute(pre))
        quiet.append(target.wrap_execute(wrap))
        quiet.append(target.on_post_execute(post))
        quiet.append(target.on_result(lambda execution, result: None))
        quiet.append(target.on_change(lambda: None))
    assert changes.count == 3
    for disposer in quiet:
        disposer()
    assert changes.count == 3

    d_restrict()
    assert changes.count == 4
    d_restrict()
    assert changes.count == 4
    d_scoped()
    assert changes.count == 5
    d_global()
    assert changes.count == 6

    empty = runtime.open_scope()
    empty.close()
    assert changes.count == 6
    busy = runtime.open_scope()
    busy.register(raw_tool("t"))
    busy.register(raw_tool("u"))
    assert changes.count == 8
    busy.close()
    assert changes.count == 10
    busy.close()
    assert changes.count == 10


def test_r021_change_observer_failure_during_disposal_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R-021: logged at WARNING on ``dsh_tools``; the disposal completes."""
    caplog.set_level(logging.WARNING, logger="dsh_tools")
    runtime = ToolRuntime()
    disposer = runtime.register(make_echo())
    changes = _ChangeLog()
    changes.error = RuntimeError("observer broke")
    runtime.on_change(changes)
    disposer()
    assert disposer.disposed
    assert runtime.get("echo") is None
    assert runtime.schemas() == []
    assert changes.count == 1
    warnings = [r for r in caplog.records if r.name == "dsh_tools" and r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == ["tools/change observer failed: observer broke"]


def test_r021_change_observer_failure_during_scope_close_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R-021: a failing observer during ``scope.close()`` does not stop the close."""
    caplog.set_level(logging.WARNING, logger="dsh_tools")
    runtime = ToolRuntime()
    scope = runtime.open_scope()
    scope.register(raw_tool("a"))
    scope.register(raw_tool("b"))
    changes = _ChangeLog()
    changes.error = ValueError("nope")
    runtime.on_change(changes)
    scope.close()
    assert scope.closed
    assert runtime.schemas(scope) == []
    assert changes.count == 2
    messages = [r.getMessage() for r in caplog.records if r.name == "dsh_tools"]
    assert messages == ["tools/change observer failed: nope"] * 2


_IMPORT_PROBE = textwrap.dedent(
    """
    import gc, json, sys, threading

    before_threads = threading.active_count()
    import dsh_tools
    tools_pulls_sched = "dsh_sched" in sys.modules
    import dsh_sched
    import dsh_tools.lowlevel, dsh_tools.policies, dsh_tools.testing

    import trio

    def instances(cls):
        return sum(1 for o in gc.get_objects() if type(o) is cls)

    try:
        trio.lowlevel.current_trio_token()
        trio_running = True
    except RuntimeError:
        trio_running = False

    print(json.dumps({
        "tools_pulls_sched": tools_pulls_sched,
        "threads": threading.active_count() - before_threads,
        "runtimes": instances(dsh_tools.ToolRuntime),
        "scopes": instances(dsh_tools.Scope),
        "definitions": instances(dsh_tools.ToolDefinition),
        "trio_running": trio_running,
    }))
    """
)


def test_r022_importing_creates_nothing() -> None:
    """R-022: importing ``dsh_tools`` and ``dsh_sched`` registers, creates and starts nothing."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    completed = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report == {
        "tools_pulls_sched": False,
        "threads": 0,
        "runtimes": 0,
        "scopes": 0,
        "definitions": 0,
        "trio_running": False,
    }


def test_r022_runtimes_are_independent() -> None:
    """R-022 (§1): no global registry: two runtimes share nothing."""
    first, second = ToolRuntime(), ToolRuntime()
    echo = make_echo()
    first.register(echo)
    assert second.get("echo") is None
    assert second.schemas() == []
    second.register(echo)  # the same definition may live in both
    assert first.get("echo") is second.get("echo") is echo


async def test_r016_unregistered_name_executes_as_unknown_tool() -> None:
    """R-016 (§7.4): executing an unregistered name fails with ``unknown tool``."""
    runtime = ToolRuntime()
    result = await runtime.execute(call("nope"))
    assert error_text(result) == 'Error: unknown tool "nope"'
