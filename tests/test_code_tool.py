"""The ``run_code`` tool: its definition, durable content and the first steps of its body.

code-mode §3.1-§3.3 (steps 1-3; the lane's steps are ``test_code_lane``'s), with runs
through the real sub-call lane and ``ScriptedCodeRuntime``.
Conformance: L-008, L-011, L-016, L-045..L-049, L-052, L-072.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from dsh_sched import ModelToolCall, run_tool_calls
from dsh_tools import (
    Abort,
    Accept,
    Block,
    ErrorInfo,
    ExecutionMode,
    FrozenDict,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolExecution,
    ToolResult,
    ToolRuntime,
    thaw_json,
)
from dsh_tools.code import CodeRunLimits, CodeRunOutcome, ToolCallError
from dsh_tools.testing import ScriptedCodeRuntime
from tests.helpers import call, error_text, make_echo, nest, raw_tool, run

if TYPE_CHECKING:
    from dsh_tools import CallNext, PostDecision
    from dsh_tools.code import Dispatch

OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"logs": {"type": "array", "items": {"type": "string"}}, "result": {}},
    "required": ["logs"],
    "additionalProperties": False,
}
ARGS = {"code": "return 1", "description": "Return one"}


def run_code_of(runtime: ToolRuntime) -> ToolDefinition:
    defn = runtime.get("run_code")
    assert defn is not None
    return defn


def render(value: dict[str, Any]) -> str:
    """The durable text of ``value`` as the definition renders it."""
    blocks = run_code_of(ToolRuntime(mode="both")).output.render(
        FrozenDict(ARGS), FrozenDict(value)
    )
    assert len(blocks) == 1
    block = blocks[0]
    assert isinstance(block, TextContent)
    return block.text


class Recorder:
    """A scripted code runtime that records what each run was given."""

    def __init__(self, outcome: CodeRunOutcome | None = None) -> None:
        self.tools: list[tuple[str, ...]] = []
        self.limits: list[CodeRunLimits] = []
        self.outcome = CodeRunOutcome(logs=["ran"]) if outcome is None else outcome
        self.runtime = ScriptedCodeRuntime(self.script)

    async def script(
        self, dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits
    ) -> CodeRunOutcome:
        self.tools.append(tools)
        self.limits.append(limits)
        return self.outcome


# -- the definition ----------------------------------------------------------------------------


def test_l072_the_definition() -> None:
    runtime = ToolRuntime(mode="code")
    defn = run_code_of(runtime)
    assert defn.name == "run_code"
    assert thaw_json(defn.output.schema) == OUTPUT_SCHEMA
    assert defn.output.presentation_meta is None
    assert defn.is_concurrency_safe is False
    assert defn.timeout is None
    assert defn.finalize_content is None
    assert defn.present_result is None
    # One object per runtime, whatever the mode; another runtime has its own.
    assert runtime.get("run_code") is defn
    other = run_code_of(ToolRuntime(mode="code"))
    assert other is not defn
    native = ToolRuntime()
    assert native.get("run_code") is None
    native_scope = native.open_scope()
    native_scope.present_as("both")
    assert run_code_of_scope(native, native_scope) is run_code_of_scope(native, native_scope)
    assert run_code_of_scope(native, native_scope) is not defn


def run_code_of_scope(runtime: ToolRuntime, scope: Any) -> ToolDefinition:
    defn = runtime.get("run_code", scope)
    assert defn is not None
    return defn


async def test_l072_arguments_are_validated() -> None:
    recorder = Recorder()
    runtime = ToolRuntime(mode="code", code_runtime=recorder.runtime)
    result = await run(runtime, "run_code", {"description": "no code"})
    assert error_text(result) == 'Error: invalid arguments: missing required property "code"'
    assert result.error is not None
    assert result.error.info == ErrorInfo("ToolArgsError", "INVALID_ARGS")
    result = await run(runtime, "run_code", {"code": 1, "description": "x"})
    assert result.is_error
    assert recorder.tools == []


def test_l016_description_and_parameters_do_not_depend_on_the_code_runtime() -> None:
    a = run_code_of(ToolRuntime(mode="code", code_runtime=Recorder().runtime))
    b = run_code_of(
        ToolRuntime(mode="code", code_runtime=ScriptedCodeRuntime(Recorder().script, language="ts"))
    )
    c = run_code_of(ToolRuntime(mode="both"))
    assert a.description == b.description == c.description
    assert a.description.startswith("Run a Python program that calls the tools declared")
    assert a.parameters == b.parameters == c.parameters
    assert thaw_json(a.parameters)["required"] == ["code", "description"]


def test_l046_present_call() -> None:
    defn = run_code_of(ToolRuntime(mode="code"))
    assert defn.present_call is not None
    presented = defn.present_call({"code": "print(1)", "description": "Print one"})
    assert presented == {"title": "Print one", "raw_input": "print(1)"}
    assert type(presented) is dict
    assert defn.present_call({"code": "print(1)"}) is None
    assert defn.present_call({"code": 1, "description": "x"}) is None
    assert defn.present_call({"code": {1}, "description": "x"}) is None
    assert defn.present_result is None


# -- durable content ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"logs": ["a", "b"]}, "a\nb"),
        ({"logs": [], "result": "raw\ntext"}, "raw\ntext"),
        ({"logs": ["x"], "result": {"k": [1, 2]}}, 'x\n{\n  "k": [\n    1,\n    2\n  ]\n}'),
        ({"logs": []}, "(run_code completed with no output)"),
        ({"logs": [], "result": None}, "null"),
        ({"logs": [], "result": {}}, "{}"),
        ({"logs": [], "result": []}, "[]"),
        ({"logs": [], "result": True}, "true"),
        ({"logs": [], "result": 1.5}, "1.5"),
        ({"logs": [], "result": "é\u2028"}, "é\u2028"),
        ({"logs": [], "result": ["é", {"ü": []}]}, '[\n  "é",\n  {\n    "ü": []\n  }\n]'),
        (
            {"logs": ["a"], "result": {"x": {}, "y": [1]}},
            'a\n{\n  "x": {},\n  "y": [\n    1\n  ]\n}',
        ),
    ],
)
def test_l048_durable_content_examples(value: dict[str, Any], text: str) -> None:
    assert render(value) == text


def test_l048_shallow_results_render_as_json_dumps_indent_2() -> None:
    values: list[object] = [
        {"a": [1, 2.5, None, True, False, 's\n"q"'], "b": {"c": [], "d": {}}},
        [[[]], [{}], [[1]]],
        {"long": list(range(12)), "text": "日本"},
    ]
    for value in values:
        assert render({"logs": [], "result": value}) == json.dumps(
            value, ensure_ascii=False, indent=2
        )


def test_l048_indentation_is_capped_at_ten_spaces() -> None:
    text = render({"logs": [], "result": {"a": {"b": {"c": {"d": {"e": {"f": [1]}}}}}}})
    lines = text.split("\n")
    assert len(lines) == 15
    indents = [len(line) - len(line.lstrip(" ")) for line in lines]
    assert indents == [0, 2, 4, 6, 8, 10, 10, 10, 10, 10, 8, 6, 4, 2, 0]
    assert lines[6] == '          "f": ['
    assert lines[7] == "          1"


def test_l048_a_5000_deep_result_renders_without_recursion_errors() -> None:
    deep = nest(5000, 1, lambda node: {"k": [node]})
    text = render({"logs": ["start"], "result": deep})
    lines = text.split("\n")
    assert lines[0] == "start"
    assert lines[1] == "{"
    assert len(lines) == 1 + 2 * (2 * 5000) + 1
    assert max(len(line) - len(line.lstrip(" ")) for line in lines) == 10
    assert lines[-1] == "}"
    assert text.count('"k": [') == 5000


# -- the body's checks -------------------------------------------------------------------------


async def test_l045_run_code_without_a_code_runtime() -> None:
    runtime = ToolRuntime(mode="code")
    result = await run(runtime, "run_code", ARGS)
    assert error_text(result) == (
        'Error: mode "code" requires a code runtime: pass code_runtime= to ToolRuntime, '
        "or present the tools natively"
    )
    assert result.error is not None
    assert result.error.info is None
    scope = runtime.open_scope()
    scope.present_as("both")
    result = await run(runtime, "run_code", ARGS, scope=scope)
    assert error_text(result).startswith('Error: mode "both" requires a code runtime')


async def test_the_body_checks_the_code_runtime_and_the_limits_at_use() -> None:
    recorder = Recorder()
    runtime = ToolRuntime(mode="code", code_runtime=recorder.runtime)
    runtime.code_runtime = ScriptedCodeRuntime(recorder.script, language="typescript")
    result = await run(runtime, "run_code", ARGS)
    assert error_text(result) == (
        'Error: no SDK renderer for code runtime language "typescript" (known: "python")'
    )
    runtime.code_runtime = object()  # type: ignore[assignment]
    result = await run(runtime, "run_code", ARGS)
    assert error_text(result) == "Error: code_runtime must provide language: str and async run()"
    runtime.code_runtime = recorder.runtime
    runtime.code_limits = {}  # type: ignore[assignment]
    result = await run(runtime, "run_code", ARGS)
    assert error_text(result) == "Error: code_limits must be a CodeRunLimits, got dict"
    assert result.error is not None
    assert result.error.info is None
    assert recorder.tools == []
    # Read when the run starts.
    limits = CodeRunLimits(max_sub_calls=3)
    runtime.code_limits = limits
    assert not (await run(runtime, "run_code", ARGS)).is_error
    assert recorder.limits == [limits]


@pytest.mark.parametrize("description", ["", "   ", "\n\t"])
async def test_l047_a_blank_description_is_an_argument_error(description: str) -> None:
    recorder = Recorder()
    runtime = ToolRuntime(mode="code", code_runtime=recorder.runtime)
    result = await run(runtime, "run_code", {"code": "return 1", "description": description})
    assert error_text(result) == (
        "Error: invalid arguments: invalid description: expected a non-empty string"
    )
    assert result.error is not None
    assert result.error.info == ErrorInfo("ToolArgsError", "INVALID_ARGS")
    assert recorder.tools == []
    assert recorder.runtime.codes == []


async def test_l047_the_description_is_checked_before_the_code_runtime() -> None:
    runtime = ToolRuntime(mode="code")
    result = await run(runtime, "run_code", {"code": "return 1", "description": " "})
    assert "invalid description" in error_text(result)


async def test_l052_run_code_whose_abort_fired_before_execute() -> None:
    recorder = Recorder()
    runtime = ToolRuntime(mode="code", code_runtime=recorder.runtime)
    abort = Abort()
    abort.abort()
    result = await runtime.execute(
        ToolCall(call_id="c", name="run_code", arguments=ARGS, abort=abort)
    )
    assert result.error is not None
    assert result.error.info == ErrorInfo("AbortError", "ABORTED_BEFORE_DISPATCH")
    assert recorder.runtime.codes == []


# -- bound names and runs through the lane ----------------------------------------------------


def bound_runtime(mode: str) -> tuple[ToolRuntime, Recorder]:
    recorder = Recorder()
    runtime = ToolRuntime(mode=mode, code_runtime=recorder.runtime)
    for name in ("zeta", "Beta", "alpha", "émoji", "a.b", "_x"):
        runtime.register(raw_tool(name))
    return runtime, recorder


@pytest.mark.parametrize("mode", ["code", "both"])
async def test_l011_bound_names_are_sorted_by_code_point_without_run_code(mode: str) -> None:
    runtime, recorder = bound_runtime(mode)
    result = await run(runtime, "run_code", ARGS)
    assert not result.is_error, result
    assert recorder.tools == [("Beta", "_x", "a.b", "alpha", "zeta", "émoji")]
    assert "run_code" not in runtime.code_mode_prompt().sdk.split("```python")[1]


async def test_l011_a_program_cannot_call_run_code() -> None:
    seen: list[str] = []

    async def script(
        dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits
    ) -> CodeRunOutcome:
        try:
            await dispatch("run_code", {})
        except ToolCallError as exc:
            seen.append(f"{exc.tool_name}: {exc}")
        return CodeRunOutcome()

    runtime = ToolRuntime(mode="both", code_runtime=ScriptedCodeRuntime(script))
    result = await run(runtime, "run_code", ARGS)
    assert not result.is_error, result
    assert seen == ['run_code: unknown tool "run_code"']


async def test_l008_bound_names_follow_restrictions() -> None:
    runtime, recorder = bound_runtime("code")
    scope = runtime.open_scope()
    restriction = scope.restrict(allow=[])
    await run(runtime, "run_code", ARGS, scope=scope)
    restriction()
    scope.restrict(deny=["zeta", "alpha"])
    await run(runtime, "run_code", ARGS, scope=scope)
    scope.register(raw_tool("own"))
    await run(runtime, "run_code", ARGS, scope=scope)
    assert recorder.tools == [
        (),
        ("Beta", "_x", "a.b", "émoji"),
        ("Beta", "_x", "a.b", "own", "émoji"),
    ]


async def test_bound_names_are_read_once_when_the_run_starts() -> None:
    runtime = ToolRuntime(mode="code")
    runtime.register(make_echo())
    seen: list[object] = []

    async def script(
        dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits
    ) -> CodeRunOutcome:
        runtime.register(raw_tool("late"))
        seen.append(tools)
        try:
            await dispatch("late", {})
        except ToolCallError as exc:
            seen.append(str(exc))
        seen.append(await dispatch("echo", {"text": "hi"}))
        return CodeRunOutcome(logs=["done"], result={"n": [1]})

    runtime.code_runtime = ScriptedCodeRuntime(script)
    result = await run(runtime, "run_code", ARGS)
    assert seen[0] == ("echo",)
    assert seen[1] == 'unknown tool "late"'
    assert seen[2] == "hi"
    assert not result.is_error
    assert result.content == (TextContent('done\n{\n  "n": [\n    1\n  ]\n}'),)
    assert result.value == {"logs": ("done",), "result": {"n": (1,)}}
    assert result.meta is None


async def test_a_run_with_no_output() -> None:
    recorder = Recorder(CodeRunOutcome())
    runtime = ToolRuntime(mode="code", code_runtime=recorder.runtime)
    result = await run(runtime, "run_code", ARGS)
    assert result.value == {"logs": ()}
    assert result.content == (TextContent("(run_code completed with no output)"),)


async def test_l049_a_post_hook_replaces_run_codes_content() -> None:
    recorder = Recorder(CodeRunOutcome(logs=["x" * 1000]))
    runtime = ToolRuntime(mode="code", code_runtime=recorder.runtime)

    async def spill(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        if execution.name == "run_code":
            return Accept(content=[TextContent("preview: xxx… (1000 characters)")])
        return await call_next()

    runtime.on_post_execute(spill)
    result = await run(runtime, "run_code", ARGS)
    assert result.content == (TextContent("preview: xxx… (1000 characters)"),)
    assert result.to_json()["content"] == [
        {"type": "text", "text": "preview: xxx… (1000 characters)"}
    ]
    blocked = ToolRuntime(mode="code", code_runtime=recorder.runtime)

    async def block(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        return Block("no")

    blocked.on_post_execute(block)
    assert (await run(blocked, "run_code", ARGS)).is_error


async def test_run_code_through_run_tool_calls_under_code() -> None:
    recorder = Recorder()
    runtime = ToolRuntime(mode="code", code_runtime=recorder.runtime)
    runtime.register(raw_tool("beta", is_concurrency_safe=True))
    assert runtime.execution_mode(call("run_code", ARGS)) is ExecutionMode.EXCLUSIVE
    outcome = await run_tool_calls(
        runtime,
        [
            ModelToolCall(call_id="c1", name="run_code", arguments=json.dumps(ARGS)),
            ModelToolCall(call_id="c2", name="beta", arguments="{}"),
        ],
    )
    first, second = outcome.results
    assert first.result.content == (TextContent("ran"),)
    assert first.mode is ExecutionMode.EXCLUSIVE
    assert second.mode is ExecutionMode.EXCLUSIVE
    assert error_text(second.result).startswith('Error: unknown tool "beta": only `run_code`')
    assert recorder.tools == [("beta",)]
