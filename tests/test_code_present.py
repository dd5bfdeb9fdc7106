"""Code Mode presentation: modes, ``present_as``, views, the collapse and the prompt parts.

code-mode §2 (and the runtime.md sections it amends: §4, §5.2, §5.5, §7.1, §7.2, §10).
Conformance: L-001..L-004, L-006..L-009, L-013, L-014, L-018, L-055..L-064, L-066..L-071.
"""

from __future__ import annotations

import ast
import logging
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

import dsh_tools
from dsh_sched import ModelToolCall, run_tool_calls
from dsh_tools import (
    Abort,
    CodeModePrompt,
    ErrorInfo,
    ExecutionMode,
    Output,
    PresentationMode,
    ToolCall,
    ToolDefinition,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    ToolSchema,
)
from dsh_tools.code import CodeRunLimits, CodeRunOutcome
from dsh_tools.lowlevel import NeedsFinish, cancelled_result, create, finish, prepare
from dsh_tools.testing import PipelineInvariants
from tests.helpers import call, error_text, exactly, make_echo, nest, raw_tool, run

if TYPE_CHECKING:
    from dsh_tools import CallNext, JsonValue, PostDecision, PreDecision

UNKNOWN_INFO = ErrorInfo("ToolNotFoundError", "UNKNOWN_TOOL")
RULE = (
    "`run_code` is the only tool you can call directly — a tool call naming any other tool "
    "fails. Reach every tool the SDK declares below from inside the program."
)
RUN_CODE_DESCRIPTION = (
    "Run a Python program that calls the tools declared in the SDK. The program is the body of "
    "an async function: call a tool with `await tools.<name>(...)`, run independent calls at "
    "the same time with `asyncio.gather(...)` after `import asyncio`, `print()` what you want "
    "to read, and `return` a JSON value. You get back the printed lines and the returned value."
)
RUN_CODE_PARAMETERS = {
    "type": "object",
    "properties": {
        "code": {
            "type": "string",
            "description": (
                "The body of an async Python function. It can use await, return, print(), "
                "tools and ToolCallError."
            ),
        },
        "description": {
            "type": "string",
            "description": "What the program does, in 5 to 10 words, shown to the user.",
        },
    },
    "required": ["code", "description"],
}
RUN_CODE_SCHEMA = ToolSchema(
    name="run_code", description=RUN_CODE_DESCRIPTION, parameters=RUN_CODE_PARAMETERS
)


def collapsed_text(name: str) -> str:
    return (
        f'Error: unknown tool "{name}": only `run_code` is callable directly — call `{name}` '
        "from inside a `run_code` program instead"
    )


class FakeCodeRuntime:
    """A valid code runtime that records its runs and returns a fixed outcome."""

    def __init__(self, language: str = "python") -> None:
        self.language = language
        self.runs: list[tuple[str, tuple[str, ...]]] = []

    async def run(
        self, code: str, *, tools: tuple[str, ...], dispatch: Any, limits: CodeRunLimits
    ) -> CodeRunOutcome:
        self.runs.append((code, tools))
        return CodeRunOutcome(logs=["ran"])


def code_runtime(**options: Any) -> ToolRuntime:
    """A runtime with a valid Python code runtime and the tools ``echo`` and ``beta``."""
    runtime = ToolRuntime(code_runtime=FakeCodeRuntime(), **options)
    runtime.register(make_echo())
    runtime.register(raw_tool("beta"))
    return runtime


def names(runtime: ToolRuntime, scope: dsh_tools.Scope | None = None) -> list[str]:
    return [s.name for s in runtime.schemas(scope)]


# -- modes and the constructor ---------------------------------------------------------------


def test_l066_presentation_mode_is_a_str_enum_accepted_by_value() -> None:
    assert issubclass(PresentationMode, str)
    assert [(m.name, m.value) for m in PresentationMode] == [
        ("NATIVE", "native"),
        ("CODE", "code"),
        ("BOTH", "both"),
    ]
    assert ToolRuntime(mode="code").mode is PresentationMode.CODE
    assert ToolRuntime(mode=PresentationMode.BOTH).mode is PresentationMode.BOTH
    with pytest.raises(ValueError, match=exactly('mode must be one of "native", "code", "both"')):
        ToolRuntime(mode="fast")
    with pytest.raises(TypeError, match=exactly("mode must be a PresentationMode, got int")):
        ToolRuntime(mode=1)  # type: ignore[arg-type]
    with ToolRuntime().open_scope() as scope:
        scope.present_as("both")
        with pytest.raises(ValueError, match='mode must be one of "native", "code", "both"'):
            ToolRuntime().open_scope().present_as("CODE")
        with pytest.raises(
            TypeError, match=exactly("mode must be a PresentationMode, got NoneType")
        ):
            ToolRuntime().open_scope().present_as(None)  # type: ignore[arg-type]


def test_l069_constructor_checks_and_defaults() -> None:
    with pytest.raises(
        TypeError, match=exactly("code_runtime must provide language: str and async run()")
    ):
        ToolRuntime(code_runtime=object())  # type: ignore[arg-type]

    class SyncRun:
        language = "python"

        def run(self) -> None: ...

    with pytest.raises(TypeError, match="code_runtime must provide"):
        ToolRuntime(code_runtime=SyncRun())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=exactly("code_limits must be a CodeRunLimits, got dict")):
        ToolRuntime(code_limits={})  # type: ignore[arg-type]
    runtime = ToolRuntime()
    assert runtime.mode is PresentationMode.NATIVE
    assert runtime.code_runtime is None
    assert runtime.code_limits == CodeRunLimits()
    assert runtime.max_parallel_sub_calls == 10
    limits = CodeRunLimits(wall_seconds=3)
    fake = FakeCodeRuntime()
    runtime = ToolRuntime(code_runtime=fake, code_limits=limits, max_parallel_sub_calls=3)
    assert runtime.code_runtime is fake
    assert runtime.code_limits is limits
    assert runtime.max_parallel_sub_calls == 3
    # code_runtime and code_limits are plain attributes; mode and the cap are read-only.
    runtime.code_runtime = None
    runtime.code_limits = CodeRunLimits()
    with pytest.raises(AttributeError):
        runtime.mode = PresentationMode.CODE  # type: ignore[misc]
    with pytest.raises(AttributeError):
        runtime.max_parallel_sub_calls = 4  # type: ignore[misc]


def test_l069_constructor_checks_run_in_order() -> None:
    # The mode first, then the code runtime, the limits and the cap.
    with pytest.raises(ValueError, match="mode must be"):
        ToolRuntime(mode="x", code_runtime=object(), max_parallel_sub_calls=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="code_runtime must"):
        ToolRuntime(code_runtime=object(), code_limits={}, max_parallel_sub_calls=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="code_limits must"):
        ToolRuntime(code_limits={}, max_parallel_sub_calls=0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cap", "error"), [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError)]
)
def test_l055_max_parallel_sub_calls_must_be_a_positive_integer(
    cap: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match=exactly("max_parallel_sub_calls must be a positive integer")):
        ToolRuntime(max_parallel_sub_calls=cap)  # type: ignore[arg-type]


def test_l056_defaults_native_and_code_without_a_cap() -> None:
    runtime = ToolRuntime(mode="code", code_runtime=FakeCodeRuntime())
    assert runtime.max_parallel_sub_calls == 10
    assert runtime.get("run_code") is not None
    assert names(runtime) == ["run_code"]
    native = ToolRuntime()
    assert native.mode is PresentationMode.NATIVE
    assert native.get("run_code") is None
    assert native.code_mode_prompt() == CodeModePrompt(rule="", sdk="")


def test_construction_needs_no_code_runtime_in_any_mode() -> None:
    """code-mode §2.2: the code runtime is read when it is needed, so it may come later."""
    runtime = ToolRuntime(mode="code")
    runtime.register(make_echo())
    with pytest.raises(RuntimeError, match="requires a code runtime"):
        runtime.schemas()
    runtime.code_runtime = FakeCodeRuntime()
    assert names(runtime) == ["run_code"]


# -- views -------------------------------------------------------------------------------------


def test_l001_native_shows_every_tool_and_no_run_code() -> None:
    runtime = ToolRuntime()
    runtime.register(make_echo())
    runtime.register(raw_tool("beta"))
    assert names(runtime) == ["echo", "beta"]
    assert runtime.get("run_code") is None
    assert runtime.code_mode_prompt() == CodeModePrompt(rule="", sdk="")
    assert runtime.execution_mode(call("echo")) is ExecutionMode.EXCLUSIVE


def test_l002_code_shows_only_run_code_and_the_sdk_declares_the_others() -> None:
    runtime = code_runtime(mode="code")
    schemas = runtime.schemas()
    assert schemas == [RUN_CODE_SCHEMA]
    assert schemas[0].parameters == RUN_CODE_PARAMETERS
    assert type(schemas[0].parameters) is dict  # a detached plain copy
    assert runtime.schemas()[0].parameters is not schemas[0].parameters
    sdk = runtime.code_mode_prompt().sdk
    assert "async def echo(self" in sdk
    assert "async def beta(self" in sdk
    assert "run_code(" not in sdk
    assert sdk == dsh_tools._code_sdk.render_python_sdk([runtime.get("beta"), runtime.get("echo")])  # type: ignore[list-item]


def test_l003_code_prompt_parts() -> None:
    prompt = code_runtime(mode="code").code_mode_prompt()
    assert prompt.rule == RULE
    assert prompt.sdk
    assert prompt.text == RULE + "\n\n" + prompt.sdk


def test_l004_l007_both_lists_native_schemas_then_run_code() -> None:
    runtime = code_runtime(mode="both")
    schemas = runtime.schemas()
    assert [s.name for s in schemas] == ["echo", "beta", "run_code"]
    assert schemas[-1] == RUN_CODE_SCHEMA
    prompt = runtime.code_mode_prompt()
    assert prompt.rule == ""
    assert "async def echo(self" in prompt.sdk
    assert "async def beta(self" in prompt.sdk
    assert prompt.text == prompt.sdk
    assert runtime.get("echo") is not None
    assert runtime.get("run_code") is not None
    # Direct calls are allowed under BOTH: classification is runtime.md §10's.
    assert runtime.execution_mode(call("echo")) is ExecutionMode.EXCLUSIVE
    parallel = raw_tool("par", is_concurrency_safe=True)
    runtime.register(parallel)
    assert runtime.execution_mode(call("par")) is ExecutionMode.PARALLEL


def test_l006_code_mode_prompt_has_no_side_effects() -> None:
    runtime = code_runtime(mode="code")
    changes: list[str] = []
    runtime.on_change(lambda: changes.append("change"))
    first = runtime.code_mode_prompt()
    second = runtime.code_mode_prompt()
    assert first == second
    assert first.text == second.text
    assert changes == []
    assert [s.name for s in runtime.schemas()] == ["run_code"]
    assert runtime.statistics().tools == 2


def test_l008_restrictions_never_hide_run_code_and_filter_the_sdk() -> None:
    for mode in ("code", "both"):
        runtime = code_runtime(mode=mode)
        scope = runtime.open_scope()
        restriction = scope.restrict(allow=[])
        assert runtime.get("run_code", scope) is runtime.get("run_code")
        assert names(runtime, scope) == ["run_code"]
        assert "echo" not in runtime.code_mode_prompt(scope).sdk
        restriction()
        assert "async def echo(self" in runtime.code_mode_prompt(scope).sdk
        scope.restrict(deny=["beta"])
        sdk = runtime.code_mode_prompt(scope).sdk
        assert "async def echo(self" in sdk
        assert "beta" not in sdk
        expected = ["run_code"] if mode == "code" else ["echo", "run_code"]
        assert names(runtime, scope) == expected


def test_l009_get_run_code_is_one_object_globally_and_from_a_scope() -> None:
    runtime = code_runtime(mode="code")
    scope = runtime.open_scope()
    child = runtime.open_scope(parent=scope)
    defn = runtime.get("run_code")
    assert isinstance(defn, ToolDefinition)
    assert runtime.get("run_code", scope) is defn
    assert runtime.get("run_code", child) is defn
    # The presentation is agnostic for other names.
    assert runtime.get("echo", scope) is runtime.get("echo")


def test_l013_code_and_both_need_a_code_runtime() -> None:
    runtime = ToolRuntime(mode="code")
    message = (
        'mode "{}" requires a code runtime: pass code_runtime= to ToolRuntime, '
        "or present the tools natively"
    )
    with pytest.raises(RuntimeError, match=exactly(message.format("code"))):
        runtime.schemas()
    with pytest.raises(RuntimeError, match=exactly(message.format("code"))):
        runtime.code_mode_prompt()
    scope = runtime.open_scope()
    scope.present_as("both")
    with pytest.raises(RuntimeError, match=exactly(message.format("both"))):
        runtime.schemas(scope)
    with pytest.raises(RuntimeError, match=exactly(message.format("both"))):
        runtime.code_mode_prompt(scope)


def test_l014_a_code_runtime_of_another_language_has_no_sdk_renderer() -> None:
    runtime = ToolRuntime(mode="code", code_runtime=FakeCodeRuntime("typescript"))
    message = 'no SDK renderer for code runtime language "typescript" (known: "python")'
    with pytest.raises(RuntimeError, match=exactly(message)):
        runtime.schemas()
    with pytest.raises(RuntimeError, match=exactly(message)):
        runtime.code_mode_prompt()
    # Read at use: the definition itself is language-free (L-016).
    defn = runtime.get("run_code")
    assert defn is not None
    assert defn.description == RUN_CODE_DESCRIPTION


def test_code_runtime_check_refuses_a_runtime_made_invalid_later() -> None:
    """code-mode §2.7 row 2: the attribute is read at use, and checked again there."""
    runtime = ToolRuntime(mode="both", code_runtime=FakeCodeRuntime())
    runtime.code_runtime = object()  # type: ignore[assignment]
    message = "code_runtime must provide language: str and async run()"
    with pytest.raises(TypeError, match=exactly(message)):
        runtime.schemas()
    with pytest.raises(TypeError, match=exactly(message)):
        runtime.code_mode_prompt()


def test_views_check_the_scope_argument() -> None:
    runtime = code_runtime(mode="code")
    with pytest.raises(TypeError, match="scope must be a Scope or None, got str"):
        runtime.code_mode_prompt("agent")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=exactly("scope belongs to a different runtime")):
        runtime.code_mode_prompt(ToolRuntime().open_scope())


# -- present_as --------------------------------------------------------------------------------


def test_l059_present_as_code_on_one_scope_of_a_native_runtime() -> None:
    runtime = code_runtime()
    scope = runtime.open_scope()
    scope.present_as(PresentationMode.CODE)
    assert names(runtime, scope) == ["run_code"]
    assert runtime.execution_mode(call("beta", scope=scope)) is ExecutionMode.EXCLUSIVE
    assert names(runtime) == ["echo", "beta"]
    assert runtime.get("run_code") is None
    assert runtime.code_mode_prompt() == CodeModePrompt(rule="", sdk="")
    assert runtime.code_mode_prompt(scope).rule == RULE


async def test_l059_direct_calls_in_a_code_scope_are_collapsed() -> None:
    runtime = code_runtime()
    scope = runtime.open_scope()
    scope.present_as("code")
    result = await run(runtime, "echo", {"text": "hi"}, scope=scope)
    assert error_text(result) == collapsed_text("echo")
    global_result = await run(runtime, "echo", {"text": "hi"})
    assert global_result.content[0] == dsh_tools.TextContent("hi")


async def test_l060_a_child_inherits_present_as_and_a_sibling_does_not() -> None:
    runtime = code_runtime()
    parallel = raw_tool("par", is_concurrency_safe=True)
    runtime.register(parallel)
    parent = runtime.open_scope(name="parent")
    parent.present_as("code")
    child = runtime.open_scope(parent=parent)
    sibling = runtime.open_scope()
    assert runtime.execution_mode(call("par", scope=child)) is ExecutionMode.EXCLUSIVE
    assert runtime.execution_mode(call("par", scope=sibling)) is ExecutionMode.PARALLEL
    assert names(runtime, child) == ["run_code"]
    assert names(runtime, sibling) == ["echo", "beta", "par"]
    assert error_text(await run(runtime, "par", scope=child)) == collapsed_text("par")
    assert not (await run(runtime, "par", scope=sibling)).is_error
    # A nearer declaration wins over an inherited one.
    child.present_as("native")
    assert names(runtime, child) == ["echo", "beta", "par"]
    assert runtime.execution_mode(call("par", scope=child)) is ExecutionMode.PARALLEL


async def test_l061_a_native_scope_sees_no_run_code() -> None:
    runtime = code_runtime(mode="code")
    scope = runtime.open_scope()
    scope.present_as("native")
    assert runtime.get("run_code", scope) is None
    result = await run(runtime, "run_code", {"code": "return 1", "description": "x"}, scope=scope)
    assert error_text(result) == 'Error: unknown tool "run_code"'
    assert result.error is not None
    assert result.error.info == UNKNOWN_INFO
    native = ToolRuntime(code_runtime=FakeCodeRuntime())
    result = await run(native, "run_code", {"code": "return 1", "description": "x"})
    assert error_text(result) == 'Error: unknown tool "run_code"'
    assert native.code_runtime.runs == []  # type: ignore[union-attr]


def test_l062_present_as_native_in_a_code_runtime_needs_no_code_runtime() -> None:
    runtime = ToolRuntime(mode="code")
    runtime.register(make_echo())
    scope = runtime.open_scope()
    scope.present_as("native")
    assert runtime.code_mode_prompt(scope) == CodeModePrompt(rule="", sdk="")
    assert names(runtime, scope) == ["echo"]
    assert runtime.execution_mode(call("echo", scope=scope)) is ExecutionMode.EXCLUSIVE


def test_l063_the_disposer_restores_the_inherited_mode() -> None:
    runtime = code_runtime(mode="both")
    scope = runtime.open_scope()
    dispose = scope.present_as("code")
    assert names(runtime, scope) == ["run_code"]
    dispose()
    assert dispose.disposed
    assert names(runtime, scope) == ["echo", "beta", "run_code"]
    # A declaration equal to the inherited mode is still a declaration.
    again = scope.present_as("both")
    with pytest.raises(ValueError, match="conflicts"):
        scope.present_as("native")
    again()
    scope.present_as("native")
    assert names(runtime, scope) == ["echo", "beta"]


@pytest.mark.parametrize(
    ("first", "second"), [("code", "both"), ("code", "code"), ("both", "native")]
)
def test_l064_a_second_declaration_in_one_scope_conflicts(first: str, second: str) -> None:
    scope = ToolRuntime().open_scope()
    scope.present_as(first)
    with pytest.raises(
        ValueError,
        match=exactly(
            f'scope.present_as("{second}") conflicts with "{first}" already declared for this '
            "scope; one composition selects one presentation"
        ),
    ):
        scope.present_as(second)
    assert scope.runtime.code_mode_prompt is not None


def test_l064_the_bad_mode_is_checked_before_the_conflict() -> None:
    scope = ToolRuntime().open_scope()
    scope.present_as("code")
    with pytest.raises(ValueError, match=exactly('mode must be one of "native", "code", "both"')):
        scope.present_as("fast")


def test_l067_present_as_is_a_scope_method_only() -> None:
    runtime = ToolRuntime()
    assert not hasattr(runtime, "present_as")
    scope = runtime.open_scope()
    scope.close()
    with pytest.raises(RuntimeError, match=exactly("scope is closed")):
        scope.present_as("code")
    # The closed check comes before the mode check.
    with pytest.raises(RuntimeError, match=exactly("scope is closed")):
        scope.present_as(1)  # type: ignore[arg-type]


def test_l068_present_as_notifies_change_observers_and_rolls_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime = code_runtime()
    seen: list[list[str]] = []
    scope = runtime.open_scope()
    runtime.on_change(lambda: seen.append(names(runtime, scope)))
    dispose = scope.present_as("code")
    assert seen == [["run_code"]]
    dispose()
    assert seen == [["run_code"], ["echo", "beta"]]
    dispose()
    assert len(seen) == 2

    refuse = [True]

    def refusing() -> None:
        if refuse[0]:
            raise RuntimeError("observer refused")

    runtime.on_change(refusing)
    with pytest.raises(RuntimeError, match="observer refused"):
        scope.present_as("code")
    # Rolled back: the effective mode is unchanged, and a new declaration is accepted.
    assert names(runtime, scope) == ["echo", "beta"]
    assert seen[-1] == ["echo", "beta"]
    refuse[0] = False
    scope.present_as("code")
    assert names(runtime, scope) == ["run_code"]
    # During a disposal, observer failures are logged and the disposal completes.
    refuse[0] = True
    caplog.set_level(logging.WARNING, logger="dsh_tools")
    scope.close()
    assert names(runtime, scope) == ["echo", "beta"]
    assert "tools/change observer failed: observer refused" in caplog.text


def test_l018_closing_the_declaring_scope_restores_the_view() -> None:
    runtime = code_runtime()
    changes: list[str] = []
    runtime.on_change(lambda: changes.append("change"))
    scope = runtime.open_scope()
    child = runtime.open_scope(parent=scope)
    scope.present_as("code")
    assert runtime.get("run_code", child) is not None
    assert runtime.code_mode_prompt(child).rule == RULE
    scope.close()
    assert changes == ["change", "change"]
    assert runtime.get("run_code", scope) is None
    assert runtime.get("run_code", child) is None
    assert runtime.code_mode_prompt(scope) == CodeModePrompt(rule="", sdk="")
    assert runtime.code_mode_prompt(child) == CodeModePrompt(rule="", sdk="")
    assert scope.statistics().tools == 0


def test_l018_disposing_present_as_in_a_code_runtime() -> None:
    runtime = code_runtime(mode="native")
    scope = runtime.open_scope()
    dispose = scope.present_as("both")
    assert runtime.get("run_code", scope) is not None
    dispose()
    assert runtime.get("run_code", scope) is None
    assert runtime.code_mode_prompt(scope).text == ""


def test_an_observer_that_closes_the_scope_disposes_the_declaration() -> None:
    runtime = code_runtime()
    scope = runtime.open_scope()
    runtime.on_change(scope.close)
    dispose = scope.present_as("code")
    assert dispose.disposed
    assert names(runtime, scope) == ["echo", "beta"]


# -- the collapse ------------------------------------------------------------------------------


def recording_runtime(steps: list[str], **options: Any) -> ToolRuntime:
    """A CODE runtime whose tool ``t`` and every hook record what ran."""
    runtime = ToolRuntime(mode="code", code_runtime=FakeCodeRuntime(), **options)

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        steps.append("body")
        return "t"

    def finalizer(execution: ToolExecution, result: ToolResult) -> None:
        steps.append("finalize_content")

    runtime.register(attrs.evolve(raw_tool("t", body), finalize_content=finalizer))

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        steps.append("pre")
        return await call_next()

    async def wrapper(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        steps.append("wrapper")
        return await call_next()

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        steps.append("post")
        return await call_next()

    def guard(execution: ToolExecution) -> None:
        steps.append("guard")

    runtime.on_pre_execute(pre)
    runtime.wrap_execute(wrapper)
    runtime.on_post_execute(post)
    runtime.guard(guard)
    runtime.on_result(lambda execution, result: steps.append(f"result:{result.is_error}"))
    return runtime


async def test_l057_a_model_direct_call_under_code_fails_before_any_policy() -> None:
    steps: list[str] = []
    runtime = recording_runtime(steps)
    result = await run(runtime, "t")
    assert result.is_error
    assert error_text(result) == collapsed_text("t")
    assert result.error is not None
    assert result.error.message == collapsed_text("t").removeprefix("Error: ")
    assert result.error.info == UNKNOWN_INFO
    assert result.error.info.code == dsh_tools.UNKNOWN_TOOL
    assert steps == ["result:True"]
    # An unknown name collapses too, with the same text.
    assert error_text(await run(runtime, "nope")) == collapsed_text("nope")


async def test_l057_collapse_on_the_unhooked_path() -> None:
    """No hook, guard or scope: execute()'s own frame still collapses the call."""
    runtime = ToolRuntime(mode="code", code_runtime=FakeCodeRuntime())
    ran: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ran.append("body")
        return "t"

    runtime.register(raw_tool("t", body))
    result = await run(runtime, "t")
    assert error_text(result) == collapsed_text("t")
    assert ran == []


async def test_l057_collapse_through_run_tool_calls() -> None:
    steps: list[str] = []
    runtime = recording_runtime(steps)
    calls = [
        ModelToolCall(call_id="c1", name="t", arguments="{}"),
        ModelToolCall(call_id="c2", name="t", arguments="{}"),
    ]
    invariants = PipelineInvariants()
    invariants.install(runtime)
    outcome = await run_tool_calls(runtime, calls)
    assert invariants.violations == []
    assert [c.mode for c in outcome.results] == [ExecutionMode.EXCLUSIVE] * 2
    assert [c.synthetic for c in outcome.results] == [False, False]
    assert [error_text(c.result) for c in outcome.results] == [collapsed_text("t")] * 2
    assert steps == ["result:True", "result:True"]


async def test_l057_a_batch_with_a_parent_is_not_collapsed() -> None:
    steps: list[str] = []
    runtime = recording_runtime(steps)
    token = create(runtime, call("t")).token
    outcome = await run_tool_calls(
        runtime, [ModelToolCall(call_id="c1", name="t", arguments="{}")], parent=token
    )
    assert not outcome.results[0].result.is_error
    assert "body" in steps


async def test_l058_a_fired_abort_wins_over_the_collapse() -> None:
    steps: list[str] = []
    runtime = recording_runtime(steps)
    abort = Abort()
    abort.abort("stop")
    result = await runtime.execute(ToolCall(call_id="c", name="t", abort=abort))
    assert result.error is not None
    assert result.error.info == ErrorInfo("AbortError", "ABORTED_BEFORE_DISPATCH")
    # Non-lossless arguments win over both.
    result = await runtime.execute(
        ToolCall(call_id="c", name="t", arguments={"x": {1, 2}}, abort=abort)
    )
    assert error_text(result) == (
        "Error: tool execution arguments must be losslessly JSON-serializable"
    )
    result = await runtime.execute(ToolCall(call_id="c", name="t", arguments={"x": float("nan")}))
    assert error_text(result) == (
        "Error: tool execution arguments must be losslessly JSON-serializable"
    )
    assert "body" not in steps
    assert "pre" not in steps


async def test_l070_collapse_details_through_the_stages() -> None:
    steps: list[str] = []
    runtime = recording_runtime(steps)
    execution = create(runtime, call("t"))
    # Before prepare: the collapse is no stage-0 error.
    assert cancelled_result(execution).error.info == ErrorInfo(  # type: ignore[union-attr]
        "AbortError", "ABORTED_BEFORE_DISPATCH"
    )
    step = await prepare(execution)
    assert type(step) is NeedsFinish
    assert error_text(step.result) == collapsed_text("t")
    assert cancelled_result(execution).error.info.code == "ABORTED_BEFORE_DISPATCH"  # type: ignore[union-attr]
    result = finish(execution, step.result)
    assert result is step.result
    assert steps == ["result:True"]


async def test_l070_a_cancelled_caller_gets_aborted_before_dispatch() -> None:
    steps: list[str] = []
    runtime = recording_runtime(steps)
    seen: list[ToolResult] = []
    runtime.on_result(lambda execution, result: seen.append(result))
    with trio.CancelScope() as cancel_scope:
        cancel_scope.cancel()
        with pytest.raises(trio.Cancelled):
            await run(runtime, "t")
    assert cancel_scope.cancelled_caught is False
    assert len(seen) == 1
    assert seen[0].error is not None
    assert seen[0].error.info == ErrorInfo("AbortError", "ABORTED_BEFORE_DISPATCH")
    assert "body" not in steps


async def test_l070_nested_calls_are_never_collapsed() -> None:
    steps: list[str] = []
    runtime = recording_runtime(steps)
    parent = create(runtime, call("outer")).token
    nested = ToolCall(call_id="n", name="t", parent=parent)
    assert runtime.execution_mode(nested) is ExecutionMode.EXCLUSIVE
    result = await runtime.execute(nested)
    assert not result.is_error
    assert steps == ["pre", "guard", "wrapper", "body", "post", "finalize_content", "result:False"]
    # A top-level call of the same name: the finalizer is never called.
    steps.clear()
    await run(runtime, "t")
    assert steps == ["result:True"]


def test_execution_mode_under_code() -> None:
    runtime = ToolRuntime(mode="code", code_runtime=FakeCodeRuntime())
    runtime.register(raw_tool("par", is_concurrency_safe=True))
    assert runtime.execution_mode(call("par")) is ExecutionMode.EXCLUSIVE
    assert runtime.execution_mode(call("run_code")) is ExecutionMode.EXCLUSIVE
    assert runtime.execution_mode(call("nope")) is ExecutionMode.EXCLUSIVE
    token = create(runtime, call("x")).token
    nested = ToolCall(call_id="n", name="par", parent=token)
    assert runtime.execution_mode(nested) is ExecutionMode.PARALLEL


async def test_run_code_itself_is_not_collapsed() -> None:
    runtime = ToolRuntime(mode="code")
    result = await run(runtime, "run_code", {"code": "return 1", "description": "one"})
    # It reached its body, which checks the code runtime.
    assert error_text(result).startswith('Error: mode "code" requires a code runtime')


# -- the prompt value --------------------------------------------------------------------------


def test_l071_code_mode_prompt_is_frozen_and_joins_its_parts() -> None:
    prompt = CodeModePrompt(rule="r", sdk="s")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        prompt.rule = "x"  # type: ignore[misc]
    assert prompt.text == "r\n\ns"
    assert CodeModePrompt(rule="", sdk="s").text == "s"
    assert CodeModePrompt(rule="r", sdk="").text == "r"
    assert CodeModePrompt(rule="", sdk="").text == ""
    with pytest.raises(TypeError):
        CodeModePrompt("r", "s")  # type: ignore[call-arg]
    assert CodeModePrompt(rule="a", sdk="b") == CodeModePrompt(rule="a", sdk="b")


# -- the SDK in the prompt ---------------------------------------------------------------------


def fenced_code(sdk: str) -> str:
    preamble, _, rest = sdk.partition("\n\n```python\n")
    assert preamble.startswith("A `run_code` program is the body of an async Python function.")
    assert rest.endswith("```\n")
    return rest.removesuffix("```\n")


@pytest.mark.parametrize("mode", ["code", "both"])
def test_l015_a_python_code_runtime_gets_the_python_sdk(mode: str) -> None:
    sdk = code_runtime(mode=mode).code_mode_prompt().sdk
    code = fenced_code(sdk)
    ast.parse(code)
    assert "class EchoArgs(TypedDict):" in code
    assert "class Tools:" in code
    assert code.endswith("\n\ntools: Tools\n")


def test_l012_the_sdk_is_byte_identical_for_an_unchanged_tool_set() -> None:
    first = ToolRuntime(mode="code", code_runtime=FakeCodeRuntime())
    second = ToolRuntime(mode="code", code_runtime=FakeCodeRuntime())
    tools = [make_echo(), raw_tool("beta"), raw_tool("alpha")]
    for defn in tools:
        first.register(defn)
    for defn in reversed(tools):
        second.register(defn)
    text = first.code_mode_prompt().text
    assert text == first.code_mode_prompt().text
    assert text == second.code_mode_prompt().text
    assert text.index("async def alpha") < text.index("async def beta") < text.index("def echo")


def test_l005_a_5000_deep_output_schema_in_the_prompt() -> None:
    runtime = ToolRuntime(mode="both", code_runtime=FakeCodeRuntime())
    deep = nest(5000, {"type": "string"}, lambda node: {"type": "array", "items": node})
    runtime.register(raw_tool("deep", output=Output(schema=deep, render=lambda args, value: [])))
    code = fenced_code(runtime.code_mode_prompt().sdk)
    ast.parse(code)
    # Depths 0 to 32 render; the node at depth 33 is Any.
    assert "list[" * 33 + "Any" + "]" * 33 in code
    assert "list[" * 34 not in code


# -- every view reads one effective mode -----------------------------------------------------

_MODES = [None, "native", "code", "both"]


@given(
    runtime_mode=st.sampled_from(["native", "code", "both"]),
    parents=st.lists(st.integers(min_value=-1, max_value=6), min_size=1, max_size=7),
    declared=st.lists(st.sampled_from(_MODES), min_size=7, max_size=7),
    closed=st.sets(st.integers(min_value=0, max_value=6), max_size=2),
)
def test_views_agree_with_a_model_of_the_effective_mode(
    runtime_mode: str, parents: list[int], declared: list[str | None], closed: set[int]
) -> None:
    """L-059, L-060, L-063: a random scope tree with random declarations (some scopes
    closed); ``get``, ``schemas``, ``execution_mode`` and the prompt all follow the nearest
    active declaration, else the runtime's mode."""
    runtime = ToolRuntime(mode=runtime_mode, code_runtime=FakeCodeRuntime())
    runtime.register(raw_tool("par", is_concurrency_safe=True))
    scopes: list[dsh_tools.Scope] = []
    parent_of: list[int | None] = []
    for i, p in enumerate(parents):
        parent = None if p < 0 or p >= i else p
        parent_of.append(parent)
        scopes.append(runtime.open_scope(parent=None if parent is None else scopes[parent]))
        if declared[i] is not None:
            scopes[i].present_as(declared[i])  # type: ignore[arg-type]
    for i in sorted(closed):
        if i < len(scopes):
            scopes[i].close()

    def is_closed(i: int) -> bool:
        # Closing a scope closes its descendants.
        node: int | None = i
        while node is not None:
            if node in closed:
                return True
            node = parent_of[node]
        return False

    def model(i: int) -> str:
        node: int | None = i
        while node is not None:
            if declared[node] is not None and not is_closed(node):
                return declared[node]  # type: ignore[return-value]
            node = parent_of[node]
        return runtime_mode

    for i, scope in enumerate(scopes):
        mode = model(i)
        assert (runtime.get("run_code", scope) is not None) == (mode != "native")
        expected = {"native": ["par"], "code": ["run_code"], "both": ["par", "run_code"]}[mode]
        assert names(runtime, scope) == expected
        parallel = runtime.execution_mode(call("par", scope=scope)) is ExecutionMode.PARALLEL
        assert parallel == (mode != "code")
        prompt = runtime.code_mode_prompt(scope)
        assert (prompt.rule == RULE) == (mode == "code")
        assert (prompt.sdk != "") == (mode != "native")
