"""Conformance group P: the execution pipeline and its hooks (runtime.md §6, §7).

Approval (P-006..P-014) lives in ``test_approval.py``, the ``PipelineInvariants`` items
(P-060..P-062) in ``test_invariants.py`` and the staged contract (P-063) in
``test_lowlevel.py``.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import attrs
import pytest

from dsh_tools import (
    UNSET,
    Accept,
    Allow,
    Ask,
    Block,
    CallNext,
    Deny,
    ErrorInfo,
    HarnessError,
    JsonValue,
    PostDecision,
    PreDecision,
    TextContent,
    ToolCall,
    ToolError,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    UserMessage,
)
from tests.helpers import exactly
from tests.pipeline_helpers import (
    IMAGE,
    assignment_error,
    denied,
    failure,
    item_assignment_error,
    message,
    observe,
    raw_tool,
    render_json,
    tool_call,
)

if TYPE_CHECKING:
    from collections.abc import Coroutine

# --------------------------------------------------------------------------- order (P-001..P-005)


async def test_p001_pre_and_post_hooks_wrap_call_next() -> None:
    """P-001: a pre and a post hook logging around ``call_next()`` run pre, then post."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    log: list[str] = []

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        log.append("pre:before")
        decision = await call_next()
        log.append("pre:after")
        return decision

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        log.append("post:before")
        decision = await call_next()
        log.append("post:after")
        return decision

    runtime.on_pre_execute(pre)
    runtime.on_post_execute(post)
    result = await runtime.execute(tool_call())
    assert log == ["pre:before", "pre:after", "post:before", "post:after"]
    assert result.value == "hi"
    assert not result.is_error


async def test_p002_stage_log_with_a_wrapper() -> None:
    """P-002: pre, execute:before, dispatch, execute:after, post."""
    runtime = ToolRuntime()
    log: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        log.append("dispatch")
        return "ok"

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        log.append("pre")
        return await call_next()

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        log.append("execute:before")
        result = await call_next()
        log.append("execute:after")
        return result

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        log.append("post")
        return await call_next()

    runtime.register(raw_tool(execute=body))
    runtime.on_pre_execute(pre)
    runtime.wrap_execute(wrap)
    runtime.on_post_execute(post)
    result = await runtime.execute(tool_call())
    assert log == ["pre", "execute:before", "dispatch", "execute:after", "post"]
    assert result.value == "ok"


async def test_p003_first_registered_wrapper_is_outermost() -> None:
    """P-003: two wrappers nest in registration order, the first registered outermost."""
    runtime = ToolRuntime()
    log: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        log.append("body")
        return "ok"

    def make_wrapper(label: str) -> Any:
        async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
            log.append(f"{label}:before")
            result = await call_next()
            log.append(f"{label}:after")
            return result

        return wrap

    runtime.register(raw_tool(execute=body))
    runtime.wrap_execute(make_wrapper("first"))
    runtime.wrap_execute(make_wrapper("second"))
    await runtime.execute(tool_call())
    assert log == ["first:before", "second:before", "body", "second:after", "first:after"]


async def test_p004_deny_gives_an_exact_frozen_denial() -> None:
    """P-004: ``Deny("denied by policy")``: ``Error: denied by policy``, no info, frozen."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    seen: list[ToolResult] = []
    assignment_failures: list[Exception | None] = []

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        return Deny("denied by policy")

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        seen.append(result)
        assignment_failures.append(assignment_error(result, "is_error", False))
        return await call_next()

    runtime.on_pre_execute(pre)
    runtime.on_post_execute(post)
    result = await runtime.execute(tool_call())
    assert result == denied("denied by policy")
    assert result.content == (TextContent("Error: denied by policy"),)
    assert result.error is not None
    assert result.error.info == ErrorInfo("ToolDeniedError", "TOOL_DENIED")
    assert seen == [denied("denied by policy")]
    assert len(assignment_failures) == 1
    assert isinstance(assignment_failures[0], attrs.exceptions.FrozenInstanceError)
    assert seen[0].is_error is True


async def test_p005_deny_enters_no_wrapper() -> None:
    """P-005: after a ``Deny`` no wrapper is entered and the body does not run."""
    runtime = ToolRuntime()
    log: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        log.append("body")
        return "ok"

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        return Deny("no")

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        log.append("wrapper")
        return await call_next()

    runtime.register(raw_tool(execute=body))
    runtime.on_pre_execute(pre)
    runtime.wrap_execute(wrap)
    result = await runtime.execute(tool_call())
    assert log == []
    assert result == denied("no")


# ------------------------------------------------------------- post-execute (P-015..P-026, P-036)


def _length_meta(args: JsonValue, value: JsonValue) -> JsonValue:
    return {"length": len(value)}


def _post_returning(decision: PostDecision) -> Any:
    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        return decision

    return post


async def test_p015_accept_content_replaces_content_only() -> None:
    """P-015: ``Accept(content=[...])`` replaces the content; value and meta are kept."""
    runtime = ToolRuntime()
    runtime.register(raw_tool(presentation_meta=_length_meta))
    runtime.on_post_execute(_post_returning(Accept(content=[TextContent("replaced")])))
    result = await runtime.execute(tool_call())
    assert result.content == (TextContent("replaced"),)
    assert result.is_error is False
    assert result.error is None
    assert result.value == "hi"
    assert result.meta == {"length": 2}


async def test_p016_block_turns_the_result_into_the_feedback() -> None:
    """P-016: ``Block(feedback=[...])`` makes an error whose content is the feedback."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    runtime.on_post_execute(_post_returning(Block(feedback=[TextContent("not allowed")])))
    result = await runtime.execute(tool_call())
    assert result.is_error is True
    assert result.content == (TextContent("not allowed"),)


async def test_p017_accept_value_recomputes_content_meta_and_attaches_contexts() -> None:
    """P-017: ``Accept(value=...)`` re-renders content and meta; its contexts are attached."""
    runtime = ToolRuntime()
    runtime.register(raw_tool(presentation_meta=_length_meta))
    context = message("from post")
    runtime.on_post_execute(_post_returning(Accept(value="hello", additional_contexts=[context])))
    result = await runtime.execute(tool_call())
    assert result.is_error is False
    assert result.value == "hello"
    assert result.content == (TextContent("hello"),)
    assert result.meta == {"length": 5}
    assert result.additional_contexts == (context,)
    attached = result.additional_contexts[0]
    assert attached.role == "user"
    assert isinstance(attached.id, str)
    assert attached.id
    assert attached.content == (TextContent("from post"),)
    assert attached.source == {"kind": "tool"}
    [context_json] = result.to_json()["additional_contexts"]
    assert set(context_json) == {"id", "role", "content", "source"}
    assert context_json["role"] == "user"
    assert context_json["id"] == attached.id


async def test_p018_accept_with_value_and_content_fails_inside_the_hook() -> None:
    """P-018: building ``Accept(value=..., content=...)`` in a post hook fails the call."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        return Accept(value="v", content=[TextContent("c")])

    runtime.on_post_execute(post)
    result = await runtime.execute(tool_call())
    assert result == failure(
        "tools/post-execute accept decision cannot replace both value and content"
    )


async def test_p019_accept_with_a_schema_invalid_value() -> None:
    """P-019: an ``Accept(value=...)`` the output schema rejects → ``INVALID_TOOL_OUTPUT``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    runtime.on_post_execute(_post_returning(Accept(value=1)))
    result = await runtime.execute(tool_call())
    assert result == failure(
        'tool "echo" returned invalid output: "value" must be a string',
        ErrorInfo("ToolOutputError", "INVALID_TOOL_OUTPUT"),
    )
    assert result.value is None


async def test_p020_block_is_exactly_a_failure_with_the_feedback() -> None:
    """P-020: ``Block([TextContent("blocked by policy")])`` → exactly that failure."""
    runtime = ToolRuntime()
    runtime.register(raw_tool(presentation_meta=_length_meta))
    runtime.on_post_execute(_post_returning(Block([TextContent("blocked by policy")])))
    result = await runtime.execute(tool_call())
    assert result == ToolResult(
        is_error=True,
        content=(TextContent("blocked by policy"),),
        error=ToolError("blocked by policy"),
    )
    assert result.error is not None
    assert result.error.info is None
    assert result.value is None
    assert result.meta is None


async def test_p021_value_replacement_without_contexts() -> None:
    """P-021: ``Accept(value=...)`` with no contexts leaves none and re-renders the content."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    runtime.on_post_execute(_post_returning(Accept(value="swapped")))
    result = await runtime.execute(tool_call())
    assert result.additional_contexts == ()
    assert result.content == (TextContent("swapped"),)
    assert result.value == "swapped"


async def test_p022_empty_block_uses_the_default_message() -> None:
    """P-022: ``Block([])`` → message ``tool result blocked by post-execute policy``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    runtime.on_post_execute(_post_returning(Block([])))
    result = await runtime.execute(tool_call())
    assert result.is_error is True
    assert result.content == ()
    assert result.error == ToolError("tool result blocked by post-execute policy")


@pytest.mark.parametrize(
    ("feedback", "expected"),
    [
        ([IMAGE], "[image content]"),
        ([TextContent("a"), IMAGE], "a\n[image content]"),
    ],
)
async def test_p023_block_message_names_non_text_blocks(
    feedback: list[TextContent], expected: str
) -> None:
    """P-023: non-text feedback blocks appear as ``[<type> content]``, joined by newlines."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    runtime.on_post_execute(_post_returning(Block(feedback)))
    result = await runtime.execute(tool_call())
    assert result.is_error is True
    assert result.content == tuple(feedback)
    assert result.error == ToolError(expected)


async def test_p024_accept_value_on_a_failed_result() -> None:
    """P-024: replacing the value of a failed result is itself a failure."""
    runtime = ToolRuntime()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        raise RuntimeError("exploded")

    runtime.register(raw_tool(execute=body))
    runtime.on_post_execute(_post_returning(Accept(value="x")))
    result = await runtime.execute(tool_call())
    assert result == failure("tools/post-execute cannot replace the value of a failed result")


async def test_p025_tool_disposed_during_post_then_value_replaced() -> None:
    """P-025: the value replacement re-resolves the tool live → ``UNKNOWN_TOOL``."""
    runtime = ToolRuntime()
    disposer = runtime.register(raw_tool())

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        disposer()
        return Accept(value="late")

    runtime.on_post_execute(post)
    result = await runtime.execute(tool_call())
    assert result == failure('unknown tool "echo"', ErrorInfo("ToolNotFoundError", "UNKNOWN_TOOL"))


async def test_p026_accept_value_none_means_json_null() -> None:
    """P-026: ``Accept(value=None)`` replaces the value with ``null``; ``Accept()`` keeps it."""
    assert Accept().value is UNSET
    assert Accept(value=None).value is None

    runtime = ToolRuntime()
    runtime.register(raw_tool(schema={}, render=render_json))
    decisions: list[PostDecision] = [Accept(value=None)]

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        return decisions.pop()

    runtime.on_post_execute(post)
    replaced = await runtime.execute(tool_call())
    assert replaced.is_error is False
    assert replaced.value is None
    assert replaced.content == (TextContent("null"),)

    decisions.append(Accept())
    kept = await runtime.execute(tool_call())
    assert kept.value == "hi"
    assert kept.content == (TextContent('"hi"'),)


async def test_p036_block_attaches_its_own_contexts() -> None:
    """P-036: ``Block(..., additional_contexts=(m,))`` attaches ``m``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    context = message("why it was blocked")
    runtime.on_post_execute(
        _post_returning(Block([TextContent("no")], additional_contexts=(context,)))
    )
    result = await runtime.execute(tool_call())
    assert result.is_error is True
    assert result.additional_contexts == (context,)


async def test_p037_accept_attaches_its_contexts() -> None:
    """P-037: ``Accept(additional_contexts=(m,))`` attaches ``m`` and keeps the result."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    context = message("note")
    runtime.on_post_execute(_post_returning(Accept(additional_contexts=(context,))))
    result = await runtime.execute(tool_call())
    assert result.is_error is False
    assert result.value == "hi"
    assert result.additional_contexts == (context,)


# ------------------------------------------------------------------ wrappers (P-027..P-030, ...)


async def test_p027_wrapper_failure_with_meta_and_contexts_is_kept_exactly() -> None:
    """P-027: a failure returned by a wrapper keeps its error, content, meta and contexts."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    context = message("wrapper context")
    authored = ToolResult(
        is_error=True,
        content=(TextContent("Error: custom"), IMAGE),
        error=ToolError("custom", ErrorInfo("CustomError", "CUSTOM")),
        meta={"attempts": 3},
        additional_contexts=(context,),
    )

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        await call_next()
        return authored

    runtime.wrap_execute(wrap)
    observed = observe(runtime)
    result = await runtime.execute(tool_call())
    assert result == authored
    assert observed.results == [authored]


async def test_p028_wrapper_disposes_the_tool_then_returns_a_success() -> None:
    """P-028: normalizing the wrapper's success finds the tool gone → final ``UNKNOWN_TOOL``."""
    runtime = ToolRuntime()
    disposer = runtime.register(raw_tool())
    post_calls: list[ToolResult] = []

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        disposer()
        return ToolResult(is_error=False, value="cached")

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        post_calls.append(result)
        return await call_next()

    runtime.wrap_execute(wrap)
    runtime.on_post_execute(post)
    result = await runtime.execute(tool_call())
    assert result == failure('unknown tool "echo"', ErrorInfo("ToolNotFoundError", "UNKNOWN_TOOL"))
    assert post_calls == []


async def test_p029_presentation_meta_only_for_top_level_calls() -> None:
    """P-029: ``presentation_meta`` runs for a top-level call, not for a nested one."""
    runtime = ToolRuntime()
    runtime.register(raw_tool(presentation_meta=_length_meta))
    observed = observe(runtime)
    top = await runtime.execute(tool_call())
    assert top.meta == {"length": 2}
    parent_token = observed.executions[0].token

    nested = await runtime.execute(tool_call(parent=parent_token))
    assert nested.meta is None
    assert nested.value == "hi"
    assert nested.content == (TextContent("hi"),)
    assert observed.executions[1].parent is parent_token


@pytest.mark.parametrize("block_nested", [False, True])
async def test_p030_conclude_turn_forwarded_by_a_composite(block_nested: bool) -> None:
    """P-030: a nested ``conclude_turn()`` forwarded by a composite; blocked → not forwarded."""
    runtime = ToolRuntime()
    nested_results: list[ToolResult] = []

    async def inner(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.conclude_turn()
        return "inner"

    async def composite(args: JsonValue, ctx: ToolRunContext) -> object:
        nested = await runtime.execute(
            ToolCall(call_id=f"{ctx.call_id}:inner", name="inner", parent=ctx.token)
        )
        nested_results.append(nested)
        if nested.concludes_turn:
            ctx.conclude_turn()
        return "composite"

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        if block_nested and execution.name == "inner":
            return Block([TextContent("nested call blocked")])
        return await call_next()

    runtime.register(raw_tool("inner", inner))
    runtime.register(raw_tool("composite", composite))
    runtime.on_post_execute(post)
    result = await runtime.execute(tool_call("composite"))
    [nested] = nested_results
    assert result.is_error is False
    assert result.value == "composite"
    if block_nested:
        assert nested.is_error is True
        assert nested.concludes_turn is False
        assert result.concludes_turn is False
    else:
        assert nested.concludes_turn is True
        assert result.concludes_turn is True


# -------------------------------------------------------------- finalizers (P-031..P-035)


class _Finalizer:
    """A ``finalize_content`` that counts its calls and answers with a fixed function."""

    def __init__(self, answer: Any) -> None:
        self.calls: list[ToolResult] = []
        self._answer = answer

    def __call__(self, execution: ToolExecution, result: ToolResult) -> object:
        self.calls.append(result)
        return self._answer(result)


async def test_p031_finalizer_captured_at_creation_survives_disposal() -> None:
    """P-031: a tool disposed mid-call still gets its finalizer; the pre hook's error is kept."""
    runtime = ToolRuntime()

    def answer(result: ToolResult) -> object:
        assert result.error is not None
        return [TextContent(f"finalized: {result.error.message}")]

    finalizer = _Finalizer(answer)
    disposer = runtime.register(raw_tool(finalize_content=finalizer))

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        disposer()
        raise HarnessError("policy failed", "POLICY_FAILED")

    runtime.on_pre_execute(pre)
    result = await runtime.execute(tool_call())
    assert len(finalizer.calls) == 1
    assert runtime.get("echo") is None
    assert result == ToolResult(
        is_error=True,
        content=(TextContent("finalized: policy failed"),),
        error=ToolError("policy failed", ErrorInfo("HarnessError", "POLICY_FAILED")),
    )


async def test_p032_finalizer_returning_none_keeps_the_content() -> None:
    """P-032: a finalizer returning ``None`` for an empty echo keeps ``(TextContent(""),)``."""
    runtime = ToolRuntime()
    finalizer = _Finalizer(lambda result: None)
    runtime.register(raw_tool(finalize_content=finalizer))
    result = await runtime.execute(tool_call(arguments={}))
    assert result.is_error is False
    assert result.content == (TextContent(""),)
    assert result.value == ""
    assert finalizer.calls == [result]


async def test_p033_finalizer_that_raises() -> None:
    """P-033: a raising finalizer turns the result into exactly its error; called once."""
    runtime = ToolRuntime()

    def answer(result: ToolResult) -> object:
        raise RuntimeError("finalizer violated its total contract")

    finalizer = _Finalizer(answer)
    runtime.register(raw_tool(finalize_content=finalizer))
    result = await runtime.execute(tool_call())
    assert result == ToolResult(
        is_error=True,
        content=(TextContent("Error: finalizer violated its total contract"),),
        error=ToolError("finalizer violated its total contract"),
    )
    assert len(finalizer.calls) == 1


async def test_p034_finalizer_truncates_an_output_error() -> None:
    """P-034: non-lossless ``presentation_meta``; the finalizer cuts the text to 32 chars."""
    runtime = ToolRuntime()

    def truncate(result: ToolResult) -> object:
        [block] = result.content
        assert isinstance(block, TextContent)
        return [TextContent(block.text[:32])]

    finalizer = _Finalizer(truncate)
    runtime.register(
        raw_tool(
            "throwing-meta",
            presentation_meta=lambda args, value: {"x": float("nan")},
            finalize_content=finalizer,
        )
    )
    result = await runtime.execute(tool_call("throwing-meta"))
    full_message = (
        'tool "throwing-meta" returned invalid output: '
        "output.presentation_meta returned non-lossless JSON"
    )
    assert len(finalizer.calls) == 1
    assert finalizer.calls[0].content == (TextContent(f"Error: {full_message}"),)
    assert result.is_error is True
    assert result.content == (TextContent(f"Error: {full_message}"[:32]),)
    [block] = result.content
    assert isinstance(block, TextContent)
    assert len(block.text) == 32
    assert block.text.startswith('Error: tool "throwing-meta"')
    assert result.error == ToolError(
        full_message, ErrorInfo("ToolOutputError", "INVALID_TOOL_OUTPUT")
    )


async def test_p035_finalizer_returning_a_str() -> None:
    """P-035: a finalizer returning a ``str`` → error result; it is not called again."""
    runtime = ToolRuntime()
    finalizer = _Finalizer(lambda result: "not blocks")
    runtime.register(raw_tool(finalize_content=finalizer))
    result = await runtime.execute(tool_call())
    assert result == failure(
        "finalize_content returned str; expected a sequence of content blocks or None"
    )
    assert len(finalizer.calls) == 1


async def test_p035_finalizer_returning_a_coroutine() -> None:
    """P-035: a finalizer returning a coroutine → error result; coroutine closed; one call."""
    runtime = ToolRuntime()
    made: list[Coroutine[Any, Any, object]] = []

    async def never_awaited() -> object:
        return [TextContent("async finalizer")]  # pragma: no cover - must never run

    def answer(result: ToolResult) -> object:
        coroutine = never_awaited()
        made.append(coroutine)
        return coroutine

    finalizer = _Finalizer(answer)
    runtime.register(raw_tool(finalize_content=finalizer))
    result = await runtime.execute(tool_call())
    assert result == failure(
        "finalize_content returned coroutine; expected a sequence of content blocks or None"
    )
    assert len(finalizer.calls) == 1
    [coroutine] = made
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED


# ------------------------------------------------------------------ contexts (P-038..P-040)


async def test_p038_contexts_from_body_wrapper_and_post_in_order() -> None:
    """P-038: deferred ``d``, wrapper ``w``, post ``p`` → ``(d, w, p)``."""
    runtime = ToolRuntime()
    deferred, from_wrapper, from_post = message("d"), message("w"), message("p")

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.defer_context(deferred)
        return "ok"

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        result = await call_next()
        return attrs.evolve(result, additional_contexts=(*result.additional_contexts, from_wrapper))

    runtime.register(raw_tool(execute=body))
    runtime.wrap_execute(wrap)
    runtime.on_post_execute(_post_returning(Accept(additional_contexts=(from_post,))))
    result = await runtime.execute(tool_call())
    assert result.is_error is False
    assert result.value == "ok"
    assert result.additional_contexts == (deferred, from_wrapper, from_post)


async def test_p039_body_defers_then_raises() -> None:
    """P-039: a body that defers a context and then raises keeps the context."""
    runtime = ToolRuntime()
    deferred = message("before the crash")

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.defer_context(deferred)
        raise RuntimeError("exploded")

    runtime.register(raw_tool(execute=body))
    result = await runtime.execute(tool_call())
    assert result == failure("exploded", contexts=(deferred,))


async def test_p040_block_drops_the_deferred_contexts() -> None:
    """P-040: a block replaces the deferred contexts with its own: ``(b,)`` only."""
    runtime = ToolRuntime()
    deferred, from_block = message("d"), message("b")

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.defer_context(deferred)
        return "ok"

    runtime.register(raw_tool(execute=body))
    runtime.on_post_execute(
        _post_returning(Block([TextContent("blocked")], additional_contexts=(from_block,)))
    )
    result = await runtime.execute(tool_call())
    assert result.is_error is True
    assert result.additional_contexts == (from_block,)


# ------------------------------------------------------ wrappers and errors (P-041..P-048, P-056)


async def test_p041_wrapper_sees_a_normalized_failure() -> None:
    """P-041: ``call_next()`` hands the wrapper the normalized failure of a raising body."""
    runtime = ToolRuntime()
    seen: list[ToolResult] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        raise HarnessError("kaboom", "BOOM")

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        result = await call_next()
        seen.append(result)
        return result

    runtime.register(raw_tool(execute=body))
    runtime.wrap_execute(wrap)
    result = await runtime.execute(tool_call())
    expected = failure("kaboom", ErrorInfo("HarnessError", "BOOM"))
    assert seen == [expected]
    assert result == expected


async def test_p042_dispatched_success_is_immutable_for_wrappers_and_post() -> None:
    """P-042: a wrapper and a post hook cannot mutate the success or its value."""
    runtime = ToolRuntime()
    attempts: dict[str, list[Exception | None]] = {}

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        return {"items": [1, 2]}

    def try_mutations(where: str, result: ToolResult) -> None:
        attempts[where] = [
            assignment_error(result, "value", {"items": []}),
            item_assignment_error(result.value, "items", []),
            item_assignment_error(result.value["items"], 0, 99),
        ]

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        result = await call_next()
        try_mutations("wrapper", result)
        return result

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        try_mutations("post", result)
        return await call_next()

    runtime.register(raw_tool(execute=body, schema={"type": "object"}, render=render_json))
    runtime.wrap_execute(wrap)
    runtime.on_post_execute(post)
    result = await runtime.execute(tool_call())
    assert set(attempts) == {"wrapper", "post"}
    for errors in attempts.values():
        assert isinstance(errors[0], attrs.exceptions.FrozenInstanceError)
        assert isinstance(errors[1], TypeError)
        assert isinstance(errors[2], TypeError)
    assert result.value == {"items": (1, 2)}


async def test_p043_post_execute_receives_the_body_failure() -> None:
    """P-043: a raising body's failure goes through post-execute."""
    runtime = ToolRuntime()
    seen: list[ToolResult] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        raise ValueError("bad input")

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        seen.append(result)
        return await call_next()

    runtime.register(raw_tool(execute=body))
    runtime.on_post_execute(post)
    result = await runtime.execute(tool_call())
    assert [r.is_error for r in seen] == [True]
    assert seen == [failure("bad input")]
    assert result == failure("bad input")


async def test_p044_wrapper_short_circuit_success_is_rebuilt_from_its_value() -> None:
    """P-044: a short-circuit success is re-rendered from ``value``; its content is ignored."""
    runtime = ToolRuntime()
    body_runs: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        body_runs.append("body")
        return "from body"

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        return ToolResult(
            is_error=False, value="cached", content=(TextContent("wrapper-authored"),)
        )

    runtime.register(raw_tool(execute=body))
    runtime.wrap_execute(wrap)
    result = await runtime.execute(tool_call())
    assert body_runs == []
    assert result.is_error is False
    assert result.value == "cached"
    assert result.content == (TextContent("cached"),)


async def test_p045_cached_success_of_another_tool_is_revalidated() -> None:
    """P-045: a success cached from ``counter`` fails ``echo``'s output schema, final."""
    runtime = ToolRuntime()
    cache: list[ToolResult] = []
    echo_runs: list[str] = []
    post_names: list[str] = []

    async def counter(args: JsonValue, ctx: ToolRunContext) -> object:
        return 7

    async def echo(args: JsonValue, ctx: ToolRunContext) -> object:
        echo_runs.append("echo")
        return "echo"

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        if cache:
            return cache[0]
        result = await call_next()
        cache.append(result)
        return result

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        post_names.append(execution.name)
        return await call_next()

    runtime.register(raw_tool("counter", counter, schema={"type": "integer"}, render=render_json))
    runtime.register(raw_tool("echo", echo))
    runtime.wrap_execute(wrap)
    runtime.on_post_execute(post)
    counted = await runtime.execute(tool_call("counter"))
    assert counted.value == 7
    result = await runtime.execute(tool_call("echo"))
    assert result == failure(
        'tool "echo" returned invalid output: "value" must be a string',
        ErrorInfo("ToolOutputError", "INVALID_TOOL_OUTPUT"),
    )
    assert echo_runs == []
    assert post_names == ["counter"]


async def test_p046_wrapper_authored_success_keeps_its_contexts() -> None:
    """P-046: the contexts of a wrapper-authored success survive the rebuild."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    context = message("from the wrapper")

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        return ToolResult(is_error=False, value="cached", additional_contexts=(context,))

    runtime.wrap_execute(wrap)
    result = await runtime.execute(tool_call())
    assert result.is_error is False
    assert result.value == "cached"
    assert result.additional_contexts == (context,)


@pytest.mark.parametrize("delegate", [True, False])
async def test_p047_wrapper_authored_concludes_turn_is_ignored(delegate: bool) -> None:
    """P-047: ``concludes_turn=True`` from a wrapper (evolved or authored) ends up ``False``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        if delegate:
            return attrs.evolve(await call_next(), concludes_turn=True)
        return ToolResult(is_error=False, value="cached", concludes_turn=True)

    runtime.wrap_execute(wrap)
    result = await runtime.execute(tool_call())
    assert result.is_error is False
    assert result.concludes_turn is False


async def test_p048_wrapper_raises() -> None:
    """P-048: a raising wrapper: exact failure, no post-execute, deferred contexts dropped."""
    runtime = ToolRuntime()
    post_calls: list[ToolResult] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.defer_context(message("dropped"))
        return "ok"

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        await call_next()
        raise RuntimeError("wrapper broke")

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        post_calls.append(result)
        return await call_next()

    runtime.register(raw_tool(execute=body))
    runtime.wrap_execute(wrap)
    runtime.on_post_execute(post)
    result = await runtime.execute(tool_call())
    assert result == ToolResult(
        is_error=True,
        content=(TextContent("Error: wrapper broke"),),
        error=ToolError("wrapper broke"),
    )
    assert result.additional_contexts == ()
    assert post_calls == []


async def test_p056_wrapper_calls_call_next_twice() -> None:
    """P-056: a retrying wrapper runs the body twice; both deferred contexts kept in order."""
    runtime = ToolRuntime()
    runs: list[int] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        runs.append(len(runs) + 1)
        ctx.defer_context(message(f"run {len(runs)}"))
        return f"attempt {len(runs)}"

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        await call_next()
        return await call_next()

    runtime.register(raw_tool(execute=body))
    runtime.wrap_execute(wrap)
    result = await runtime.execute(tool_call())
    assert runs == [1, 2]
    assert result.value == "attempt 2"
    assert [m.content for m in result.additional_contexts] == [
        (TextContent("run 1"),),
        (TextContent("run 2"),),
    ]


_KEPT_CALL_NEXT = (
    "a tools/execute wrapper's call_next() was called after the call's dispatch stage "
    "ended; call it (as often as needed) before the wrapper returns"
)


async def test_p056_a_call_next_kept_past_the_dispatch_stage_runs_no_body() -> None:
    """P-056's ``call_next`` may run the body many times, but only during the call's
    dispatch stage: one kept and called from a post hook, or after ``execute()`` returned,
    raises instead of running the body of a call that is over."""
    runtime = ToolRuntime()
    runs: list[int] = []
    kept: list[CallNext[ToolResult]] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        runs.append(1)
        return "ok"

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        kept.append(call_next)
        return await call_next()

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        await kept[0]()
        raise AssertionError("unreachable: the kept call_next raises")

    runtime.register(raw_tool(execute=body))
    runtime.wrap_execute(wrap)
    with runtime.on_post_execute(post):
        result = await runtime.execute(tool_call())
    assert runs == [1]
    assert result == failure(_KEPT_CALL_NEXT)
    kept.clear()
    result = await runtime.execute(tool_call())
    assert result.value == "ok"
    with pytest.raises(RuntimeError, match=exactly(_KEPT_CALL_NEXT)):
        await kept[0]()
    assert runs == [1, 1]


# -------------------------------------------------------- hook failures (P-049..P-055)


async def test_p049_pre_hook_raises() -> None:
    """P-049: a raising pre hook gives the exact failure; post-execute does not run."""
    runtime = ToolRuntime()
    log: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        log.append("body")
        return "ok"

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        raise RuntimeError("pre hook broke")

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        log.append("post")
        return await call_next()

    runtime.register(raw_tool(execute=body))
    runtime.on_pre_execute(pre)
    runtime.on_post_execute(post)
    result = await runtime.execute(tool_call())
    assert result == ToolResult(
        is_error=True,
        content=(TextContent("Error: pre hook broke"),),
        error=ToolError("pre hook broke"),
    )
    assert log == []


async def test_p050_post_hook_raises() -> None:
    """P-050: a raising post hook gives the exact failure."""
    runtime = ToolRuntime()
    runtime.register(raw_tool(presentation_meta=_length_meta))

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        raise RuntimeError("post hook broke")

    runtime.on_post_execute(post)
    result = await runtime.execute(tool_call())
    assert result == ToolResult(
        is_error=True,
        content=(TextContent("Error: post hook broke"),),
        error=ToolError("post hook broke"),
    )


async def test_p051_pre_hook_raises_a_harness_error() -> None:
    """P-051: ``HarnessError("denied", "DENIED")`` from a pre hook keeps its info."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        raise HarnessError("denied", "DENIED")

    runtime.on_pre_execute(pre)
    result = await runtime.execute(tool_call())
    assert result == failure("denied", ErrorInfo("HarnessError", "DENIED"))


@pytest.mark.parametrize(
    ("returned", "type_name"),
    [(None, "NoneType"), ("allow", "str"), ({"kind": "allow"}, "dict")],
)
async def test_p052_pre_hook_returns_garbage(returned: object, type_name: str) -> None:
    """P-052: a non-decision from a pre hook fails closed: no guard, body or post."""
    runtime = ToolRuntime()
    log: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        log.append("body")
        return "ok"

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> Any:
        return returned

    def guard(execution: ToolExecution) -> str | None:
        log.append("guard")
        return None

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        log.append("post")
        return await call_next()

    runtime.register(raw_tool(execute=body))
    runtime.on_pre_execute(pre)
    runtime.guard(guard)
    runtime.on_post_execute(post)
    result = await runtime.execute(tool_call())
    assert result == failure(
        f"tools/pre-execute hook returned {type_name}; expected Allow, Deny or Ask"
    )
    assert log == []


async def test_p053_outer_pre_hook_sees_the_inner_type_error() -> None:
    """P-053: the inner hook's bad return reaches the outer hook as a ``TypeError``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    caught: list[BaseException] = []

    async def outer(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        try:
            return await call_next()
        except TypeError as exc:
            caught.append(exc)
            return Deny("outer caught it")

    async def inner(execution: ToolExecution, call_next: CallNext[PreDecision]) -> Any:
        return 42

    runtime.on_pre_execute(outer)
    runtime.on_pre_execute(inner)
    result = await runtime.execute(tool_call())
    assert [str(exc) for exc in caught] == [
        "tools/pre-execute hook returned int; expected Allow, Deny or Ask"
    ]
    assert result == denied("outer caught it")


async def test_p054_post_hook_returns_none() -> None:
    """P-054: ``None`` from a post hook is an error result."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> Any:
        return None

    runtime.on_post_execute(post)
    result = await runtime.execute(tool_call())
    assert result == failure("tools/post-execute hook returned NoneType; expected Accept or Block")


async def test_p055_wrapper_returns_none() -> None:
    """P-055: ``None`` from a wrapper is a final error; post-execute does not run."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    post_calls: list[ToolResult] = []

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> Any:
        await call_next()
        return None

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        post_calls.append(result)
        return await call_next()

    runtime.wrap_execute(wrap)
    runtime.on_post_execute(post)
    result = await runtime.execute(tool_call())
    assert result == failure("tools/execute wrapper returned NoneType; expected ToolResult")
    assert post_calls == []


# ------------------------------------------------------ the run context and decisions (P-057..59)


async def test_p057_run_context_is_inactive_after_the_call() -> None:
    """P-057: ``defer_context``/``conclude_turn`` after the call raise ``RuntimeError``."""
    runtime = ToolRuntime()
    kept: list[ToolRunContext] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        kept.append(ctx)
        return "ok"

    runtime.register(raw_tool(execute=body))
    result = await runtime.execute(tool_call())
    [ctx] = kept
    with pytest.raises(RuntimeError) as deferred:
        ctx.defer_context(message("too late"))
    assert str(deferred.value) == "tool call context is no longer active"
    with pytest.raises(RuntimeError) as concluded:
        ctx.conclude_turn()
    assert str(concluded.value) == "tool call context is no longer active"
    assert result.additional_contexts == ()
    assert result.concludes_turn is False


async def test_p057_run_context_is_inactive_once_dispatch_ended() -> None:
    """P-057 (§2.4): the context is already inactive while post-execute runs."""
    runtime = ToolRuntime()
    kept: list[ToolRunContext] = []
    errors: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        kept.append(ctx)
        return "ok"

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        try:
            kept[0].defer_context(message("from post, via the body's context"))
        except RuntimeError as exc:
            errors.append(str(exc))
        return await call_next()

    runtime.register(raw_tool(execute=body))
    runtime.on_post_execute(post)
    result = await runtime.execute(tool_call())
    assert errors == ["tool call context is no longer active"]
    assert result.additional_contexts == ()


async def test_p058_defer_context_requires_a_user_message() -> None:
    """P-058: ``ctx.defer_context("text")`` raises ``TypeError``."""
    runtime = ToolRuntime()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        try:
            ctx.defer_context("text")  # type: ignore[arg-type]
        except TypeError as exc:
            return str(exc)
        return "accepted a str"

    runtime.register(raw_tool(execute=body))
    result = await runtime.execute(tool_call())
    assert result.value == "defer_context() expects a UserMessage"
    assert result.additional_contexts == ()


_NOT_A_STR: Any = 1
_A_STR_NOT_BLOCKS: Any = "x"


@pytest.mark.parametrize(
    ("build", "text"),
    [
        (lambda: Deny(_NOT_A_STR), "Deny reason must be a str"),
        (lambda: Ask(_NOT_A_STR), "Ask reason must be a str or None"),
        (lambda: Block(_A_STR_NOT_BLOCKS), "Block feedback must be a sequence of content blocks"),
        (
            lambda: Accept(value=1, content=[TextContent("x")]),
            "tools/post-execute accept decision cannot replace both value and content",
        ),
    ],
)
def test_p059_decision_construction_errors(build: Any, text: str) -> None:
    """P-059: ``Deny(1)``, ``Ask(1)``, ``Block("x")`` (and P-018's conflict) raise ``TypeError``."""
    with pytest.raises(TypeError) as info:
        build()
    assert str(info.value) == text


def test_p059_valid_decisions() -> None:
    """P-059 (§6): the valid forms construct, positionally where the spec allows it."""
    assert Deny("").reason == ""
    assert Ask().reason is None
    assert Ask("why").reason == "why"
    assert Block([TextContent("a")]).feedback == (TextContent("a"),)
    assert Allow() == Allow()
    context = UserMessage(content=[TextContent("m")])
    assert Block([], additional_contexts=[context]).additional_contexts == (context,)
