"""``define_tool``: definitions whose arguments are validated (runtime.md §12.3).

Conformance: H-004, H-013, H-021..H-024, H-033, and the define_tool parts of M-005, M-011.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Coroutine
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from dsh_tools import (
    INVALID_ARGS,
    Accept,
    CallNext,
    ErrorInfo,
    ExecutionMode,
    FrozenDict,
    JsonSchemaError,
    Output,
    PostDecision,
    TextContent,
    ToolArgsError,
    ToolCall,
    ToolDefinition,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    define_tool,
    error_result,
    freeze_json,
    thaw_json,
    validate_args,
)
from tests.helpers import call, error_text, mode, run, text_output
from tests.strategies import DISJOINT_SCHEMAS, near_values, valid_values

PATH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
}

Body = Callable[[FrozenDict, ToolRunContext], Coroutine[Any, Any, object]]


def recording_body(seen: list[object], value: object = "ok") -> Body:
    """A body that records the arguments object it receives and returns ``value``."""

    async def body(args: FrozenDict, ctx: ToolRunContext) -> object:
        seen.append(args)
        return value

    return body


def make(
    parameters: Any = PATH_PARAMETERS,
    execute: Body | None = None,
    *,
    name: str = "t",
    output: Output | None = None,
    **options: Any,
) -> ToolDefinition:
    return define_tool(
        name=name,
        description="a test tool",
        parameters=parameters,
        output=text_output() if output is None else output,
        execute=recording_body([]) if execute is None else execute,
        **options,
    )


async def test_h004_upper_casing_tool() -> None:
    """H-004: ``schemas()`` includes ``required``; the value is ``"HELLO"``."""

    async def upper(args: FrozenDict, ctx: ToolRunContext) -> object:
        return args["text"].upper()

    parameters = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }
    runtime = ToolRuntime()
    runtime.register(make(parameters, upper, name="upper"))
    (schema,) = runtime.schemas()
    assert schema.parameters == parameters
    assert schema.parameters["required"] == ["text"]
    result = await run(runtime, "upper", {"text": "hello"})
    assert not result.is_error, result
    assert result.value == "HELLO"
    assert result.content == (TextContent("HELLO"),)


async def test_h013_default_is_not_filled_in() -> None:
    """H-013: a property with a ``default`` omitted by the caller stays absent."""
    seen: list[object] = []
    parameters = {"type": "object", "properties": {"n": {"type": "integer", "default": 3}}}
    runtime = ToolRuntime()
    runtime.register(make(parameters, recording_body(seen)))
    result = await run(runtime, "t", {})
    assert not result.is_error, result
    assert seen == [{}]


async def test_h021_bad_arguments_fail_before_the_body() -> None:
    """H-021: ``Error: invalid arguments: missing required property "path"``."""
    seen: list[object] = []
    runtime = ToolRuntime()
    runtime.register(make(execute=recording_body(seen)))
    result = await run(runtime, "t", {})
    assert error_text(result) == 'Error: invalid arguments: missing required property "path"'
    assert result.error is not None
    assert result.error.message == 'invalid arguments: missing required property "path"'
    assert result.error.info == ErrorInfo("ToolArgsError", "INVALID_ARGS")
    assert seen == []


async def test_h021_the_public_execute_still_validates_when_awaited_directly() -> None:
    """H-021: the pipeline validates in its own body step (decision 64), and the
    definition's public ``execute`` keeps validating for code that awaits it directly."""
    seen: list[object] = []
    defn = make(execute=recording_body(seen))
    runtime = ToolRuntime()
    runtime.register(defn)
    ctx_holder: list[ToolRunContext] = []

    async def capture(args: FrozenDict, ctx: ToolRunContext) -> object:
        ctx_holder.append(ctx)
        return "ok"

    runtime.register(make(execute=capture, name="ctx"))
    await run(runtime, "ctx", {"path": "p"})
    with pytest.raises(ToolArgsError, match='missing required property "path"'):
        await defn.execute(FrozenDict({}), ctx_holder[0])
    assert await defn.execute(FrozenDict({"path": "p"}), ctx_holder[0]) == "ok"
    assert seen == [{"path": "p"}]


async def test_h021_evolving_a_validating_definition() -> None:
    """H-021: ``attrs.evolve`` with another ``execute`` gives a raw definition (the new body
    runs unchecked, as before decision 64); any other change keeps the validation."""
    seen: list[object] = []
    defn = make(execute=recording_body(seen))
    renamed = attrs.evolve(defn, name="renamed")
    replaced = attrs.evolve(defn, name="replaced", execute=recording_body(seen, "raw"))
    runtime = ToolRuntime()
    runtime.register(renamed)
    runtime.register(replaced)
    result = await run(runtime, "renamed", {})
    assert result.error is not None
    assert result.error.info == ErrorInfo("ToolArgsError", "INVALID_ARGS")
    assert seen == []
    result = await run(runtime, "replaced", {})
    assert not result.is_error
    assert seen == [{}]


async def test_h021_every_violation_is_reported() -> None:
    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["path"],
        "additionalProperties": False,
    }
    runtime = ToolRuntime()
    runtime.register(make(parameters))
    result = await run(runtime, "t", {"n": "1", "x": 0})
    assert error_text(result) == (
        "Error: invalid arguments: "
        'missing required property "path"; "n" must be an integer; '
        '"x" is not a declared property (additionalProperties: false)'
    )


async def test_h021_non_object_arguments() -> None:
    runtime = ToolRuntime()
    runtime.register(make())
    result = await run(runtime, "t", ["path"])
    assert error_text(result) == (
        'Error: invalid arguments: "arguments" must be an object, got an array'
    )


async def test_h021_invalid_arguments_go_through_post_execute() -> None:
    """§7.8: ``define_tool`` validation failures are dispatch results, so post-execute sees them."""
    seen: list[ToolResult] = []

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        seen.append(result)
        return Accept()

    runtime = ToolRuntime()
    runtime.register(make())
    runtime.on_post_execute(post)
    result = await run(runtime, "t", {"path": 1})
    assert [r.error.info for r in seen if r.error is not None] == [
        ErrorInfo("ToolArgsError", "INVALID_ARGS")
    ]
    assert error_text(result) == 'Error: invalid arguments: "path" must be a string'


def test_h022_tool_args_error() -> None:
    """H-022: code, violations and message of ``ToolArgsError``."""
    exc = ToolArgsError(["a", "b"])
    assert exc.code == INVALID_ARGS == "INVALID_ARGS"
    assert exc.violations == ("a", "b")
    assert str(exc) == "invalid arguments: a; b"
    result = error_result(exc)
    assert result.error is not None
    assert result.error.info == ErrorInfo("ToolArgsError", "INVALID_ARGS")
    assert error_text(result) == "Error: invalid arguments: a; b"


async def test_h022_tool_args_error_raised_by_a_body() -> None:
    async def body(args: FrozenDict, ctx: ToolRunContext) -> object:
        raise ToolArgsError(["a", "b"])

    runtime = ToolRuntime()
    runtime.register(make(execute=body))
    result = await run(runtime, "t", {"path": "p"})
    assert error_text(result) == "Error: invalid arguments: a; b"
    assert result.error is not None
    assert result.error.info == ErrorInfo("ToolArgsError", "INVALID_ARGS")


def test_h023_timeout_stored() -> None:
    """H-023: ``timeout=2.5`` is stored; omitted gives ``None``."""
    assert make(timeout=2.5).timeout == 2.5
    assert make(timeout=3).timeout == 3.0
    assert type(make(timeout=3).timeout) is float
    assert make().timeout is None


@pytest.mark.parametrize("timeout", [0, -1, math.inf, -math.inf, math.nan, 0.0])
def test_h023_timeout_out_of_range(timeout: float) -> None:
    with pytest.raises(
        ValueError, match=r"^define_tool\(x\): timeout must be a positive finite number$"
    ):
        make(name="x", timeout=timeout)


@pytest.mark.parametrize("timeout", ["1", True, [1]])
def test_h023_timeout_of_the_wrong_type(timeout: object) -> None:
    with pytest.raises(TypeError) as info:
        make(name="x", timeout=timeout)
    assert str(info.value) == "define_tool(x): timeout must be a positive finite number"


def test_h024_presenters_attached_and_validated() -> None:
    """H-024: presenters are attached, ``None`` when omitted, soft on invalid arguments."""
    calls: list[tuple[str, FrozenDict]] = []

    def present_call(args: FrozenDict) -> object:
        calls.append(("call", args))
        return f"reading {args['path']}"

    def present_result(args: FrozenDict, result: ToolResult) -> object:
        calls.append(("result", args))
        return {"path": args["path"], "error": result.is_error}

    defn = make(present_call=present_call, present_result=present_result)
    assert defn.present_call is not None
    assert defn.present_result is not None
    ok = ToolResult(is_error=False, value="x")
    assert defn.present_call({"path": "/a"}) == "reading /a"
    assert defn.present_result({"path": "/a"}, ok) == {"path": "/a", "error": False}
    assert calls == [("call", {"path": "/a"}), ("result", {"path": "/a"})]
    # The presenters see the frozen arguments.
    assert all(type(args) is FrozenDict for _, args in calls)
    calls.clear()
    for invalid in ({}, {"path": 1}, "nope", {"path": {1}}):
        assert defn.present_call(invalid) is None
        assert defn.present_result(invalid, ok) is None
    assert calls == []
    plain = make()
    assert plain.present_call is None
    assert plain.present_result is None


def test_h033_parameters_need_an_object_root() -> None:
    """H-033: ``#: parameters must have "type": "object"``; any root for ``Output.schema``."""
    for parameters in ({"type": "string"}, {}, {"oneOf": [{"type": "object"}, {"type": "null"}]}):
        with pytest.raises(JsonSchemaError) as info:
            make(parameters)
        assert info.value.violations == ('#: parameters must have "type": "object"',)
        assert (
            str(info.value) == 'unsupported JSON Schema: #: parameters must have "type": "object"'
        )
    for root in ({"type": "string"}, {"type": "array"}, {"type": "null"}, {}):
        output = Output(schema=root, render=lambda args, value: [TextContent("x")])
        assert make(output=output).output is output


def test_h033_unsupported_parameters_list_every_violation() -> None:
    with pytest.raises(JsonSchemaError) as info:
        make({"type": "string", "pattern": "x"})
    assert info.value.violations == (
        '#: parameters must have "type": "object"',
        '#: unknown keyword "pattern"',
    )
    with pytest.raises(JsonSchemaError) as info:
        make({"type": "object", "properties": {"a": {"type": "str"}}})
    assert len(info.value.violations) == 1
    assert info.value.violations[0].startswith('#/properties/a: "type" must be one of')
    with pytest.raises(JsonSchemaError) as info:
        make(None)
    assert info.value.violations == ("#: schema must be an object",)


def test_checks_run_in_the_documented_order() -> None:
    """§12.3: timeout, then parameters, then the ``ToolDefinition`` checks."""
    with pytest.raises(ValueError, match="timeout"):
        make({"type": "string"}, timeout=-1)
    with pytest.raises(JsonSchemaError):
        make({"type": "string"}, execute="not callable")  # type: ignore[arg-type]
    with pytest.raises(TypeError) as info:
        make(execute="not callable")  # type: ignore[arg-type]
    assert str(info.value) == 'tool "t" execute must be callable'
    with pytest.raises(TypeError) as info:
        make(present_call=5)
    assert str(info.value) == 'tool "t" present_call must be callable or None'
    with pytest.raises(TypeError) as info:
        make(is_concurrency_safe=None)
    assert str(info.value) == 'tool "t" is_concurrency_safe must be a bool or callable'
    with pytest.raises(TypeError, match=r"^tool name must be a str$"):
        make(name=5)  # type: ignore[arg-type]


async def test_valid_arguments_pass_through_unchanged() -> None:
    seen: list[object] = []
    contexts: list[object] = []

    async def body(args: FrozenDict, ctx: ToolRunContext) -> object:
        seen.append(args)
        contexts.append(ctx.arguments)
        return "ok"

    runtime = ToolRuntime()
    runtime.register(make(execute=body))
    result = await run(runtime, "t", {"path": "p", "extra": [1]})
    assert not result.is_error, result
    (args,) = seen
    assert args is contexts[0]  # the execution's frozen arguments, not a copy
    assert type(args) is FrozenDict
    assert args == {"path": "p", "extra": (1,)}


async def test_parameters_are_frozen_at_definition_time() -> None:
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }
    defn = make(parameters)
    assert type(defn.parameters) is FrozenDict
    assert thaw_json(defn.parameters) == parameters
    # Later changes to the caller's dict change neither validation nor the projection.
    parameters["required"].append("other")
    parameters["properties"]["path"]["type"] = "integer"
    runtime = ToolRuntime()
    runtime.register(defn)
    assert runtime.schemas()[0].parameters["required"] == ["path"]
    assert not (await run(runtime, "t", {"path": "p"})).is_error


async def test_frozen_parameters_are_accepted() -> None:
    runtime = ToolRuntime()
    runtime.register(make(freeze_json(PATH_PARAMETERS)))
    assert not (await run(runtime, "t", {"path": "p"})).is_error
    assert (await run(runtime, "t", {})).is_error


def test_m005_classifier_sees_only_valid_frozen_arguments() -> None:
    """M-005: invalid arguments → ``EXCLUSIVE``, no exception, classifier not called."""
    seen: list[object] = []

    def classify(args: FrozenDict) -> object:
        seen.append(args)
        return args["path"].startswith("/tmp")

    runtime = ToolRuntime()
    runtime.register(make(is_concurrency_safe=classify))
    for invalid in ({}, {"path": 3}, None, "x", {"path": {1, 2}}, {"path": math.nan}):
        assert mode(runtime, "t", invalid) is ExecutionMode.EXCLUSIVE
    assert seen == []
    assert mode(runtime, "t", {"path": "/tmp/a"}) is ExecutionMode.PARALLEL
    assert mode(runtime, "t", {"path": "/etc"}) is ExecutionMode.EXCLUSIVE
    assert seen == [{"path": "/tmp/a"}, {"path": "/etc"}]
    assert all(type(args) is FrozenDict for args in seen)


async def test_m011_true_and_false_flags_stay_bools() -> None:
    """M-011: ``True`` → ``PARALLEL`` for every call, nothing called; ``False`` → ``EXCLUSIVE``."""
    seen: list[object] = []
    runtime = ToolRuntime()
    runtime.register(make(execute=recording_body(seen), name="p", is_concurrency_safe=True))
    runtime.register(make(name="e", is_concurrency_safe=False))
    assert runtime.get("p") is not None
    assert runtime.get("p").is_concurrency_safe is True  # type: ignore[union-attr]
    assert runtime.get("e").is_concurrency_safe is False  # type: ignore[union-attr]
    for arguments in ({}, {"path": 1}, "garbage", {"path": "ok"}):
        assert mode(runtime, "p", arguments) is ExecutionMode.PARALLEL
        assert mode(runtime, "e", arguments) is ExecutionMode.EXCLUSIVE
    result = await runtime.execute(call("p", {"path": 1}))
    assert result.error is not None
    assert result.error.info == ErrorInfo("ToolArgsError", "INVALID_ARGS")
    assert seen == []


@given(data=st.data())
def test_execution_agrees_with_validate_args(data: st.DataObject) -> None:
    """Property: a call succeeds exactly when ``validate_args`` finds nothing, else it fails
    with exactly those violations; the body sees the arguments it was given."""
    inner = data.draw(DISJOINT_SCHEMAS, label="inner")
    parameters = {"type": "object", "properties": {"p": inner}, "required": ["p"]}
    arguments = data.draw(
        st.one_of(valid_values(parameters), near_values(parameters)), label="arguments"
    )
    expected = validate_args(parameters, arguments)
    seen: list[object] = []
    runtime = ToolRuntime()
    runtime.register(make(parameters, recording_body(seen)))
    result = trio.run(runtime.execute, ToolCall(call_id="c", name="t", arguments=arguments))
    if expected:
        assert result.error is not None
        assert result.error.message == str(ToolArgsError(expected))
        assert seen == []
    else:
        assert not result.is_error, result
        assert seen == [freeze_json(arguments)]
