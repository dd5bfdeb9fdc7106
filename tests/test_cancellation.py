"""Conformance group C: cancellation by the ``Abort`` and natively by trio (runtime.md §8).

``Abort`` itself (C-027, C-028, C-029, C-032) is tested in ``test_abort.py`` and
``lowlevel.cancelled_result`` (C-031) in ``test_lowlevel.py``.

Interleavings are explicit: a task runs the call, ``wait_all_tasks_blocked()`` lets it reach
the point under test, and only then does the test fire the abort. Timed cases run on the
autojump clock and assert exact virtual times.
"""

from __future__ import annotations

import pickle
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from dsh_tools import (
    ABORTED_BEFORE_DISPATCH,
    TOOL_DENIED,
    Abort,
    AbortError,
    Accept,
    Allow,
    ApprovalOutcome,
    ApprovalRequest,
    Ask,
    Block,
    CallNext,
    Deny,
    ErrorInfo,
    ExecutionToken,
    FrozenDict,
    HarnessError,
    JsonValue,
    PostDecision,
    PreDecision,
    TextContent,
    ToolArgsError,
    ToolCall,
    ToolError,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
)
from dsh_tools.policies import install_timeout_policy
from tests.helpers import error_text, make_echo
from tests.pipeline_helpers import (
    ARGS_NOT_LOSSLESS,
    aborted,
    aborted_before_dispatch,
    assignment_error,
    denied,
    failing_nursery_body,
    failure,
    item_assignment_error,
    message,
    observe,
    raw_tool,
    run_into,
    tool_call,
)


async def execute_and_abort_when_blocked(runtime: ToolRuntime, call: ToolCall) -> ToolResult:
    """Start ``call``, let it block where the test parks it, then fire its ``Abort``."""
    results: list[ToolResult] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_into, runtime, call, results)
        await trio.testing.wait_all_tasks_blocked()
        call.abort.abort()
    [result] = results
    return result


class Stages:
    """Records which stages of a call ran: body, post hooks (with their input), finalizer."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.post_inputs: list[ToolResult] = []
        self.finalized: list[ToolResult] = []

    async def body(self, args: JsonValue, ctx: ToolRunContext) -> object:
        self.log.append("body")
        return args["text"]

    async def post(
        self, execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        self.log.append("post")
        self.post_inputs.append(result)
        return await call_next()

    async def wrap(self, execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        self.log.append("wrapper")
        return await call_next()

    def finalize(self, execution: ToolExecution, result: ToolResult) -> None:
        self.finalized.append(result)


def make_runtime(stages: Stages, body: Any = None) -> ToolRuntime:
    """A runtime with ``echo`` (``body`` or the recording one), a recording post hook and
    a counting finalizer."""
    runtime = ToolRuntime()
    runtime.register(
        raw_tool(execute=stages.body if body is None else body, finalize_content=stages.finalize)
    )
    runtime.on_post_execute(stages.post)
    return runtime


async def captured_cancelled() -> trio.Cancelled:
    """A real ``trio.Cancelled`` instance (it has no public constructor)."""
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            return exc
    raise AssertionError("unreachable: the checkpoint must raise")


# ------------------------------------------------ the Abort during hooks (C-001..C-011)


async def test_c001_abort_while_pre_hook_waits_then_allows() -> None:
    """C-001: ``Allow()`` after the abort → ``ABORTED_BEFORE_DISPATCH``; no body; post runs."""
    stages = Stages()
    runtime = make_runtime(stages)

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        stages.log.append("pre:waiting")
        await execution.abort.wait()
        stages.log.append("pre:allow")
        return Allow()

    runtime.on_pre_execute(pre)
    runtime.wrap_execute(stages.wrap)
    result = await execute_and_abort_when_blocked(runtime, tool_call())
    assert result == aborted_before_dispatch()
    assert stages.log == ["pre:waiting", "pre:allow", "post"]
    assert stages.post_inputs == [aborted_before_dispatch()]


@pytest.mark.parametrize("hook", ["pre", "wrapper"])
async def test_c001_c004_abort_does_not_cancel_a_sleeping_hook(
    hook: str, autojump_clock: trio.testing.MockClock
) -> None:
    """C-001 / C-004 (§8.3): hooks run outside the per-call scope, so an abort fired while a
    hook sleeps does not cut the sleep short; the call is then ``ABORTED_BEFORE_DISPATCH``."""
    stages = Stages()
    runtime = make_runtime(stages)
    slept: list[float] = []

    async def nap() -> None:
        await trio.sleep(3)
        slept.append(trio.current_time())

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        if hook == "pre":
            await nap()
        return await call_next()

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        if hook == "wrapper":
            await nap()
        return await call_next()

    runtime.on_pre_execute(pre)
    runtime.wrap_execute(wrap)
    abort = Abort()
    start = trio.current_time()
    results: list[ToolResult] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_into, runtime, tool_call(abort=abort), results)
        await trio.sleep(1)
        abort.abort()
    assert slept == [start + 3]
    assert trio.current_time() == start + 3
    assert results == [aborted_before_dispatch()]
    assert stages.log == ["post"]


async def test_c002_deny_after_the_abort_is_kept() -> None:
    """C-002: a ``Deny`` returned after the abort is the result, exactly (no info)."""
    stages = Stages()
    runtime = make_runtime(stages)

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        await execution.abort.wait()
        return Deny("refused while stopping")

    runtime.on_pre_execute(pre)
    result = await execute_and_abort_when_blocked(runtime, tool_call())
    assert result == denied("refused while stopping")
    assert stages.log == ["post"]


async def test_c003_pre_hook_raises_after_the_abort() -> None:
    """C-003: a pre hook raising after the abort → ``Error: gate interrupted``."""
    stages = Stages()
    runtime = make_runtime(stages)

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        await execution.abort.wait()
        raise RuntimeError("gate interrupted")

    runtime.on_pre_execute(pre)
    result = await execute_and_abort_when_blocked(runtime, tool_call())
    assert result == failure("gate interrupted")
    assert stages.log == []
    assert stages.finalized == [result]


async def test_c004_abort_while_wrapper_waits_before_call_next() -> None:
    """C-004: check D1 turns the wrapper's late ``call_next()`` into ``ABORTED_BEFORE_DISPATCH``."""
    stages = Stages()
    runtime = make_runtime(stages)
    wrapper_saw: list[ToolResult] = []

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        await execution.abort.wait()
        result = await call_next()
        wrapper_saw.append(result)
        return result

    runtime.wrap_execute(wrap)
    result = await execute_and_abort_when_blocked(runtime, tool_call())
    assert result == aborted_before_dispatch()
    assert wrapper_saw == [aborted_before_dispatch()]
    assert stages.post_inputs == [aborted_before_dispatch()]
    assert stages.log == ["post"]


async def test_c005_wrapper_calls_call_next_in_its_own_cancelled_scope() -> None:
    """C-005: check D2 raises before the body; the wrapper's own scope absorbs it."""
    stages = Stages()
    runtime = make_runtime(stages)
    scopes: list[trio.CancelScope] = []

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        with trio.CancelScope() as scope:
            scopes.append(scope)
            scope.cancel()
            await call_next()
            stages.log.append("call_next returned")  # pragma: no cover - must not run
        return ToolResult(is_error=False, value="fallback")

    runtime.wrap_execute(wrap)
    result = await runtime.execute(tool_call())
    [scope] = scopes
    assert scope.cancelled_caught is True
    assert stages.log == ["post"]
    assert result.is_error is False
    assert result.value == "fallback"


async def test_c006_wrapper_short_circuits_with_a_success_after_the_abort() -> None:
    """C-006: check F: a short-circuit success after the abort → before dispatch, contexts kept."""
    stages = Stages()
    runtime = make_runtime(stages)
    from_wrapper = message("w")

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        await execution.abort.wait()
        return ToolResult(is_error=False, value="cached", additional_contexts=(from_wrapper,))

    runtime.wrap_execute(wrap)
    result = await execute_and_abort_when_blocked(runtime, tool_call())
    assert result == aborted_before_dispatch((from_wrapper,))
    # Check F ran before post-execute: the post hook already saw the replacement.
    assert stages.post_inputs == [aborted_before_dispatch((from_wrapper,))]
    assert stages.log == ["post"]


async def test_c007_abort_while_wrapper_waits_after_the_body() -> None:
    """C-007: the body returned its success before the abort; a wrapper still running after
    it does not turn it into ``ABORTED`` (a completed success, §8.3): the success is kept,
    with the body's deferred context, and post-execute sees it."""
    stages = Stages()
    deferred = message("d")

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        stages.log.append("body")
        ctx.defer_context(deferred)
        return "ok"

    runtime = make_runtime(stages, body)
    wrapper_saw: list[ToolResult] = []

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        result = await call_next()
        wrapper_saw.append(result)
        await execution.abort.wait()
        return result

    runtime.wrap_execute(wrap)
    call = tool_call()
    result = await execute_and_abort_when_blocked(runtime, call)
    assert call.abort.aborted
    expected = ToolResult(is_error=False, value="ok", content=[TextContent("ok")])
    assert [r.is_error for r in wrapper_saw] == [False]
    assert result == attrs.evolve(expected, additional_contexts=(deferred,))
    assert stages.post_inputs == [attrs.evolve(expected, additional_contexts=(deferred,))]
    assert stages.log == ["body", "post"]


async def test_c008_abort_while_post_hook_waits() -> None:
    """C-008: a completed success accepted by a post hook after the abort is kept, with the
    contexts ``(d, p)`` (check G leaves a completed success alone)."""
    stages = Stages()
    deferred, from_post = message("d"), message("p")

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.defer_context(deferred)
        return "ok"

    runtime = make_runtime(stages, body)

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        await execution.abort.wait()
        return Accept(additional_contexts=(from_post,))

    runtime.on_post_execute(post)
    call = tool_call()
    result = await execute_and_abort_when_blocked(runtime, call)
    assert call.abort.aborted
    expected = ToolResult(is_error=False, value="ok", content=[TextContent("ok")])
    assert result == attrs.evolve(expected, additional_contexts=(deferred, from_post))
    assert [r.is_error for r in stages.post_inputs] == [False]


async def test_c008_check_g_aborts_a_short_circuit_success_after_the_post_hooks() -> None:
    """C-008, check G: a success the body did not complete (a wrapper's short-circuit) is
    replaced after post-execute when the abort fired while a post hook waited: before
    dispatch (the body never started), with the contexts gathered so far."""
    stages = Stages()
    runtime = make_runtime(stages)
    from_wrapper, from_post = message("w"), message("p")

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        return ToolResult(is_error=False, value="cached", additional_contexts=(from_wrapper,))

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        await execution.abort.wait()
        return Accept(additional_contexts=(from_post,))

    runtime.wrap_execute(wrap)
    runtime.on_post_execute(post)
    result = await execute_and_abort_when_blocked(runtime, tool_call())
    assert result == aborted_before_dispatch((from_wrapper, from_post))
    assert [r.value for r in stages.post_inputs] == ["cached"]


async def test_c009_wrapper_raises_after_the_abort() -> None:
    """C-009: a wrapper's ``WRAPPER_FAILURE`` after the abort is kept; body not run."""
    stages = Stages()
    runtime = make_runtime(stages)

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        await execution.abort.wait()
        raise HarnessError("wrapper failed", "WRAPPER_FAILURE")

    runtime.wrap_execute(wrap)
    result = await execute_and_abort_when_blocked(runtime, tool_call())
    assert result == failure("wrapper failed", ErrorInfo("HarnessError", "WRAPPER_FAILURE"))
    assert stages.log == []


async def test_c010_body_turns_the_cancellation_into_its_own_error() -> None:
    """C-010: a body converting ``Cancelled`` into ``TOOL_FAILURE`` keeps that error."""
    stages = Stages()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            raise HarnessError("tool failed", "TOOL_FAILURE") from None

    runtime = make_runtime(stages, body)
    result = await execute_and_abort_when_blocked(runtime, tool_call())
    expected = failure("tool failed", ErrorInfo("HarnessError", "TOOL_FAILURE"))
    assert result == expected
    assert stages.post_inputs == [expected]


@pytest.mark.parametrize("hooks", ["none", "post", "post and wrapper"])
async def test_c010_a_body_nursery_failing_as_the_abort_cancels_it_is_the_bodys_error(
    hooks: str,
) -> None:
    """C-010, decision 20: the body's own nursery raises the Abort's ``Cancelled`` together
    with a child's error. The per-call scope takes its ``Cancelled``; the rest of the group
    is the body's error, handled like any body error: a wrapper receives it as a result,
    post-execute runs on it and the deferred context is kept."""
    stages = Stages()
    deferred = message("d")
    wrapper_saw: list[ToolResult] = []

    body = failing_nursery_body(lambda: HarnessError("cleanup failed", "TOOL_FAILURE"), deferred)
    runtime = ToolRuntime()
    runtime.register(raw_tool(execute=body))
    if hooks != "none":
        runtime.on_post_execute(stages.post)
    if hooks == "post and wrapper":

        async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
            result = await call_next()
            wrapper_saw.append(result)
            return result

        runtime.wrap_execute(wrap)
    result = await execute_and_abort_when_blocked(runtime, tool_call())
    assert result.is_error
    assert result.additional_contexts == (deferred,)
    assert error_text(result).startswith("Error: Exceptions from Trio nursery")
    assert stages.post_inputs == ([] if hooks == "none" else [result])
    # The deferred context joins after the wrapper chain (runtime.md §7.4).
    assert [r.error for r in wrapper_saw] == ([result.error] if hooks == "post and wrapper" else [])


async def test_c011_post_hook_raises_after_the_abort() -> None:
    """C-011: a post hook's ``POST_FAILURE`` after the abort is kept."""
    stages = Stages()
    runtime = make_runtime(stages)

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        await execution.abort.wait()
        raise HarnessError("post failed", "POST_FAILURE")

    runtime.on_post_execute(post)
    result = await execute_and_abort_when_blocked(runtime, tool_call())
    assert result == failure("post failed", ErrorInfo("HarnessError", "POST_FAILURE"))


# ------------------------------------------------------- the Abort during the body (C-012..)


async def test_c012_abort_cancels_the_body_not_the_wrapper() -> None:
    """C-012: the body gets the per-call ``Cancelled``; the wrapper's scope is untouched."""
    stages = Stages()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            stages.log.append("body:cancelled")
            raise

    runtime = make_runtime(stages, body)
    scopes: list[trio.CancelScope] = []

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        with trio.CancelScope() as scope:
            scopes.append(scope)
            result = await call_next()
        stages.log.append("wrapper:after")
        return result

    runtime.wrap_execute(wrap)
    result = await execute_and_abort_when_blocked(runtime, tool_call())
    assert result == aborted()
    [scope] = scopes
    assert scope.cancel_called is False
    assert scope.cancelled_caught is False
    assert stages.log == ["body:cancelled", "wrapper:after", "post"]


async def test_c013_post_hook_after_an_abort_runs_with_the_callers_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C-013: post-execute is not cancelled, sees the caller's ``Abort`` and deadline."""
    stages = Stages()
    abort = Abort()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.abort.abort("stop")
        await trio.sleep(50)
        return "unreachable"  # pragma: no cover - the sleep is cancelled

    runtime = make_runtime(stages, body)
    post_seen: list[tuple[bool, float, float]] = []

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        with trio.move_on_after(10):
            return await call_next()
        raise AssertionError("unreachable: the wrapper deadline must not fire")

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        deadline = trio.current_effective_deadline()
        await trio.sleep(1)
        post_seen.append((execution.abort is abort, deadline, trio.current_time()))
        return await call_next()

    runtime.wrap_execute(wrap)
    runtime.on_post_execute(post)
    start = trio.current_time()
    with trio.move_on_after(100):
        caller_deadline = trio.current_effective_deadline()
        result = await runtime.execute(tool_call(abort=abort))
    assert caller_deadline == start + 100
    assert post_seen == [(True, caller_deadline, start + 1)]
    assert result == aborted(reason="stop")
    assert trio.current_time() == start + 1


async def test_c014_body_ignoring_cancellation_delays_execute(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C-014: a body shielding itself for 5 s delays ``execute()`` by 5 s; ``ABORTED`` + context."""
    stages = Stages()
    deferred = message("d")

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.defer_context(deferred)
        with trio.CancelScope(shield=True):
            await trio.sleep(5)
        stages.log.append(f"body:done@{trio.current_time() - start}")
        return "finished anyway"

    runtime = make_runtime(stages, body)
    observed = observe(runtime)
    abort = Abort()
    start = trio.current_time()
    results: list[ToolResult] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_into, runtime, tool_call(abort=abort), results)
        await trio.sleep(1)
        abort.abort()
        assert results == []
    assert trio.current_time() == start + 5
    assert observed.times == [start + 5]
    assert results == [aborted((deferred,))]
    assert stages.log == ["body:done@5.0", "post"]


async def test_c015_pre_fired_abort_runs_nothing(autojump_clock: trio.testing.MockClock) -> None:
    """C-015: a pre-fired ``Abort``: no hook, body or post; one exact notification."""
    stages = Stages()
    runtime = make_runtime(stages)

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        stages.log.append("pre")
        return await call_next()

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        stages.log.append("wrapper")
        return await call_next()

    def guard(execution: ToolExecution) -> str | None:
        stages.log.append("guard")
        return None

    runtime.on_pre_execute(pre)
    runtime.wrap_execute(wrap)
    runtime.guard(guard)
    observed = observe(runtime)
    arguments: dict[str, Any] = {"text": "hi", "tags": ["a", "b"]}
    abort = Abort()
    abort.abort("before")
    start = trio.current_time()
    result = await runtime.execute(tool_call(arguments=arguments, abort=abort))

    assert trio.current_time() == start
    assert result == aborted_before_dispatch(reason="before")
    assert stages.log == []
    assert len(observed.results) == 1
    assert observed.results[0] is result
    assert stages.finalized == [result]

    [execution] = observed.executions
    assert isinstance(execution.token, ExecutionToken)
    assert execution.abort is abort
    frozen_error = assignment_error(execution, "name", "other")
    assert isinstance(frozen_error, attrs.exceptions.FrozenInstanceError)
    assert isinstance(execution.arguments, FrozenDict)
    assert execution.arguments is not arguments
    assert execution.arguments == {"text": "hi", "tags": ("a", "b")}
    assert isinstance(item_assignment_error(execution.arguments, "text", "x"), TypeError)
    arguments["text"] = "changed"
    arguments["tags"].append("c")
    assert execution.arguments == {"text": "hi", "tags": ("a", "b")}


async def test_c016_argument_failure_beats_a_pre_fired_abort() -> None:
    """C-016: non-lossless arguments win over a pre-fired ``Abort``; one notification."""
    stages = Stages()
    runtime = make_runtime(stages)
    observed = observe(runtime)
    abort = Abort()
    abort.abort()
    result = await runtime.execute(tool_call(arguments={"text": {1, 2}}, abort=abort))
    assert result == failure(ARGS_NOT_LOSSLESS)
    assert result.error is not None
    assert result.error.info is None
    assert observed.results == [result]
    assert observed.results[0] is result
    assert observed.executions[0].arguments is None
    assert stages.log == []


# ------------------------------------------------------------- approval and abort (C-017, C-018)


async def test_c017_abort_while_approval_pending_then_allowed() -> None:
    """C-017: approval allows after the abort fired → check C: ``ABORTED_BEFORE_DISPATCH``."""
    stages = Stages()
    release = trio.Event()

    class SlowApproval:
        async def request(self, request: ApprovalRequest) -> ApprovalOutcome:
            stages.log.append("approval:pending")
            await release.wait()
            return ApprovalOutcome.ALLOWED_ONCE

    runtime = make_runtime(stages)
    runtime.approval = SlowApproval()

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        return Ask("review")

    runtime.on_pre_execute(pre)
    runtime.wrap_execute(stages.wrap)
    call = tool_call(scope=runtime.open_scope())
    results: list[ToolResult] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_into, runtime, call, results)
        await trio.testing.wait_all_tasks_blocked()
        assert stages.log == ["approval:pending"]
        call.abort.abort()
        await trio.testing.wait_all_tasks_blocked()
        assert results == []
        release.set()
    assert results == [aborted_before_dispatch()]
    assert stages.log == ["approval:pending", "post"]


async def test_c018_approval_cancelled_and_abort_fired() -> None:
    """C-018: check B: ``CANCELLED`` with the abort fired → before dispatch, through post."""
    stages = Stages()

    class CancellingApproval:
        async def request(self, request: ApprovalRequest) -> ApprovalOutcome:
            request.abort.abort("user pressed stop")
            return ApprovalOutcome.CANCELLED

    runtime = make_runtime(stages)
    runtime.approval = CancellingApproval()

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        return Ask()

    runtime.on_pre_execute(pre)
    runtime.wrap_execute(stages.wrap)
    result = await runtime.execute(tool_call(scope=runtime.open_scope()))
    assert result == aborted_before_dispatch(reason="user pressed stop")
    assert stages.post_inputs == [aborted_before_dispatch(reason="user pressed stop")]
    assert stages.log == ["post"]


# ----------------------------------------------------------------- successes after abort (C-019)


async def test_c019_uncooperative_body_success_becomes_aborted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C-019: a body that ignores the abort and returns a success → ``ABORTED`` (check E)."""
    stages = Stages()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        with trio.CancelScope(shield=True):
            await trio.sleep(2)
        return "done"

    runtime = make_runtime(stages, body)
    wrapper_saw: list[ToolResult] = []

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        result = await call_next()
        wrapper_saw.append(result)
        return result

    runtime.wrap_execute(wrap)
    abort = Abort()
    start = trio.current_time()
    results: list[ToolResult] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_into, runtime, tool_call(abort=abort), results)
        await trio.sleep(1)
        abort.abort()
    assert trio.current_time() == start + 2
    assert wrapper_saw == [aborted()]
    assert results == [aborted()]


async def test_c019_body_that_fires_the_abort_and_returns() -> None:
    """C-019: a body returning a success with no checkpoint after the abort → ``ABORTED``."""
    stages = Stages()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.abort.abort("self-inflicted")
        return "done"

    runtime = make_runtime(stages, body)
    result = await runtime.execute(tool_call())
    assert result == aborted(reason="self-inflicted")
    assert stages.post_inputs == [aborted(reason="self-inflicted")]


# -------------------------------------------------------- errors beat cancellation (C-020)


async def test_c020_invalid_tool_output_after_the_abort_is_kept(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C-020: ``INVALID_TOOL_OUTPUT`` produced after the abort (uncooperative body) is kept."""
    stages = Stages()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        with trio.CancelScope(shield=True):
            await trio.sleep(2)
        return 1

    runtime = make_runtime(stages, body)
    abort = Abort()
    results: list[ToolResult] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_into, runtime, tool_call(abort=abort), results)
        await trio.sleep(1)
        abort.abort()
    assert results == [
        failure(
            'tool "echo" returned invalid output: "value" must be a string',
            ErrorInfo("ToolOutputError", "INVALID_TOOL_OUTPUT"),
        )
    ]


async def test_c020_invalid_args_raised_after_the_abort_is_kept() -> None:
    """C-020: an ``INVALID_ARGS`` error raised by the body after the abort is kept."""
    stages = Stages()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            raise ToolArgsError(['missing required property "path"']) from None

    runtime = make_runtime(stages, body)
    result = await execute_and_abort_when_blocked(runtime, tool_call())
    assert result == failure(
        'invalid arguments: missing required property "path"',
        ErrorInfo("ToolArgsError", "INVALID_ARGS"),
    )


async def test_c020_define_tool_invalid_args_survive_a_later_abort() -> None:
    """C-020: ``define_tool`` validation's ``INVALID_ARGS`` is kept when the abort follows."""
    runtime = ToolRuntime()
    runtime.register(make_echo())
    post_inputs: list[ToolResult] = []

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        result = await call_next()
        execution.abort.abort("after validation")
        return result

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        post_inputs.append(result)
        return await call_next()

    runtime.wrap_execute(wrap)
    runtime.on_post_execute(post)
    call = tool_call(arguments={"text": 5})
    result = await runtime.execute(call)
    expected = failure(
        'invalid arguments: "text" must be a string', ErrorInfo("ToolArgsError", "INVALID_ARGS")
    )
    assert call.abort.aborted is True
    assert post_inputs == [expected]
    assert result == expected


async def test_c020_tool_timeout_after_the_abort_is_kept(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C-020 (§11): abort first; the shielded cleanup outlasts the deadline → ``TOOL_TIMEOUT``."""
    stages = Stages()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await trio.sleep(2)
            raise

    runtime = ToolRuntime()
    runtime.register(raw_tool(execute=body, timeout=1))
    runtime.on_post_execute(stages.post)
    install_timeout_policy(runtime)
    abort = Abort()
    start = trio.current_time()
    results: list[ToolResult] = []

    async def fire_later() -> None:
        await trio.sleep(0.5)
        abort.abort()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_into, runtime, tool_call(abort=abort), results)
        nursery.start_soon(fire_later)
    expected = failure(
        "tool call timed out after 1.0s", ErrorInfo("ToolTimeoutError", "TOOL_TIMEOUT")
    )
    assert results == [expected]
    assert stages.post_inputs == [expected]
    assert trio.current_time() == start + 2.5


# ---------------------------------------------------- native cancellation of the caller (§8.4)


class NativeCancel:
    """Runs ``execute()`` under a caller deadline and records how it ended."""

    def __init__(self, runtime: ToolRuntime) -> None:
        self.runtime = runtime
        self.order: list[str] = []
        self.observed = observe(runtime)
        runtime.on_result(lambda execution, result: self.order.append("observer"))
        self.returned: list[ToolResult] = []
        self.raised: list[BaseException] = []

    async def run(self, call: ToolCall, *, deadline: float = 1) -> trio.CancelScope:
        with trio.move_on_after(deadline) as caller:
            try:
                self.returned.append(await self.runtime.execute(call))
            except BaseException as exc:
                self.order.append("raised")
                self.raised.append(exc)
                raise
        return caller


async def test_c021_caller_cancelled_during_body(autojump_clock: trio.testing.MockClock) -> None:
    """C-021: ``Cancelled`` propagates; observers got ``ABORTED`` first; finalizer once; no post."""
    stages = Stages()
    body_cancelled: list[float] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        try:
            await trio.sleep_forever()
        finally:
            body_cancelled.append(trio.current_time())

    runtime = make_runtime(stages, body)
    native = NativeCancel(runtime)
    start = trio.current_time()
    caller = await native.run(tool_call())
    assert caller.cancelled_caught is True
    assert native.returned == []
    assert [type(exc) for exc in native.raised] == [trio.Cancelled]
    assert native.order == ["observer", "raised"]
    assert native.observed.results == [aborted()]
    assert native.observed.times == [start + 1]
    assert body_cancelled == [start + 1]
    assert stages.finalized == [aborted()]
    assert stages.log == []


async def test_c021_caller_cancelled_in_a_wrapper_after_the_body(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C-021 (§8.4): stage 2 unfinished → ``ABORTED`` with the deferred contexts so far."""
    stages = Stages()
    deferred = message("d")

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.defer_context(deferred)
        return "ok"

    runtime = make_runtime(stages, body)

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        await call_next()
        await trio.sleep_forever()

    runtime.wrap_execute(wrap)
    native = NativeCancel(runtime)
    caller = await native.run(tool_call())
    assert caller.cancelled_caught is True
    assert native.observed.results == [aborted((deferred,))]
    assert stages.finalized == [aborted((deferred,))]
    assert stages.log == []


async def test_c022_caller_cancelled_while_pre_hook_waits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C-022: ``Cancelled`` propagates; observers got ``ABORTED_BEFORE_DISPATCH``; no body."""
    stages = Stages()
    runtime = make_runtime(stages)

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        stages.log.append("pre")
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    runtime.on_pre_execute(pre)
    native = NativeCancel(runtime)
    start = trio.current_time()
    caller = await native.run(tool_call(), deadline=3)
    assert caller.cancelled_caught is True
    assert [type(exc) for exc in native.raised] == [trio.Cancelled]
    assert native.order == ["observer", "raised"]
    assert native.observed.results == [aborted_before_dispatch()]
    assert native.observed.times == [start + 3]
    assert stages.finalized == [aborted_before_dispatch()]
    assert stages.log == ["pre"]


async def test_c022_caller_cancelled_while_approval_pending(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C-022 (§9): native cancellation propagates through a pending approval request."""
    stages = Stages()

    class StuckApproval:
        async def request(self, request: ApprovalRequest) -> ApprovalOutcome:
            await trio.sleep_forever()
            raise AssertionError("unreachable")

    runtime = make_runtime(stages)
    runtime.approval = StuckApproval()

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        return Ask()

    runtime.on_pre_execute(pre)
    native = NativeCancel(runtime)
    caller = await native.run(tool_call(scope=runtime.open_scope()))
    assert caller.cancelled_caught is True
    assert native.observed.results == [aborted_before_dispatch()]
    assert stages.log == []


async def test_c022_cancelled_group_from_a_hook_nursery(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C-022 (§8.4): ``Cancelled`` inside a group from a hook's own nursery: the group is
    re-raised and observers got ``ABORTED_BEFORE_DISPATCH``."""
    stages = Stages()
    runtime = make_runtime(stages)

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            await trio.sleep_forever()
        raise AssertionError("unreachable")

    runtime.on_pre_execute(pre)
    native = NativeCancel(runtime)
    caller = await native.run(tool_call())
    assert caller.cancelled_caught is True
    [raised] = native.raised
    assert isinstance(raised, BaseExceptionGroup)
    assert all(isinstance(exc, trio.Cancelled) for exc in raised.exceptions)
    assert native.observed.results == [aborted_before_dispatch()]
    assert stages.log == []


async def test_c023_caller_already_cancelled() -> None:
    """C-023: no hook runs; observers get ``ABORTED_BEFORE_DISPATCH``; ``Cancelled`` raised."""
    stages = Stages()
    runtime = make_runtime(stages)

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        stages.log.append("pre")  # pragma: no cover - must not run
        return await call_next()  # pragma: no cover

    runtime.on_pre_execute(pre)

    def guard(execution: ToolExecution) -> str | None:
        stages.log.append("guard")  # pragma: no cover - must not run
        return None  # pragma: no cover

    runtime.guard(guard)
    observed = observe(runtime)
    raised: list[BaseException] = []
    with trio.CancelScope() as caller:
        caller.cancel()
        try:
            await runtime.execute(tool_call())
        except trio.Cancelled as exc:
            raised.append(exc)
            raise
    assert caller.cancelled_caught is True
    assert len(raised) == 1
    assert observed.results == [aborted_before_dispatch()]
    assert stages.finalized == [aborted_before_dispatch()]
    assert stages.log == []


async def test_c024_caller_cancelled_during_post_keeps_the_context(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C-024: cancelled during post-execute → observers get ``ABORTED`` with the context."""
    stages = Stages()
    deferred = message("d")

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.defer_context(deferred)
        return "ok"

    runtime = make_runtime(stages, body)

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        stages.log.append("slow post")
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    runtime.on_post_execute(post)
    native = NativeCancel(runtime)
    caller = await native.run(tool_call())
    assert caller.cancelled_caught is True
    assert [type(exc) for exc in native.raised] == [trio.Cancelled]
    assert native.observed.results == [aborted((deferred,))]
    assert stages.finalized == [aborted((deferred,))]
    assert stages.log == ["post", "slow post"]


async def test_c025_wrapper_deadline_is_not_native_cancellation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C-025: a wrapper's own ``move_on_after`` expiring → ``execute()`` returns its result."""
    stages = Stages()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    runtime = make_runtime(stages, body)

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        with trio.move_on_after(1):
            return await call_next()
        return ToolResult(is_error=False, value="fallback")

    runtime.wrap_execute(wrap)
    observed = observe(runtime)
    start = trio.current_time()
    result = await runtime.execute(tool_call())
    assert trio.current_time() == start + 1
    assert result.is_error is False
    assert result.value == "fallback"
    assert observed.results == [result]
    assert stages.log == ["post"]


@pytest.mark.parametrize("where", ["body", "pre"])
async def test_c026_keyboard_interrupt_propagates(where: str) -> None:
    """C-026: ``KeyboardInterrupt`` propagates: no result, no observers, no post."""
    stages = Stages()
    interrupt = KeyboardInterrupt()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        raise interrupt

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        if where == "pre":
            raise interrupt
        return await call_next()

    runtime = make_runtime(stages, body)
    runtime.on_pre_execute(pre)
    observed = observe(runtime)
    with pytest.raises(KeyboardInterrupt) as info:
        await runtime.execute(tool_call())
    assert info.value is interrupt
    assert observed.results == []
    assert stages.finalized == []
    assert stages.log == []


@pytest.mark.parametrize("reason", ["body error", "denial"])
async def test_c030_caller_cancelled_during_post_on_an_error(
    reason: str, autojump_clock: trio.testing.MockClock
) -> None:
    """C-030: an error result stays that error under native cancellation of post-execute."""
    stages = Stages()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        raise RuntimeError("exploded")

    runtime = make_runtime(stages, body)

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        return Deny("no") if reason == "denial" else Allow()

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        stages.log.append("post:start")
        await trio.sleep_forever()

    runtime.on_pre_execute(pre)
    runtime.on_post_execute(post)
    native = NativeCancel(runtime)
    caller = await native.run(tool_call())
    expected = denied("no") if reason == "denial" else failure("exploded")
    assert caller.cancelled_caught is True
    assert [type(exc) for exc in native.raised] == [trio.Cancelled]
    assert native.observed.results == [expected]
    assert stages.finalized == [expected]
    assert stages.log == ["post", "post:start"]


# ----------------------------------------------------------------- checkpoints (C-033)


def _c033_call(lossless: bool, prefired: bool) -> ToolCall:
    abort = Abort()
    if prefired:
        abort.abort()
    arguments: object = {"text": "hi"} if lossless else {"text": b"bytes"}
    return tool_call(arguments=arguments, abort=abort)


def _c033_expected_error(lossless: bool, prefired: bool, cancelled: bool) -> ToolResult | None:
    """The error result C-033 expects, or ``None`` for the plain success."""
    if not lossless:
        return failure(ARGS_NOT_LOSSLESS)
    if prefired or cancelled:
        return aborted_before_dispatch()
    return None


@pytest.mark.parametrize("prefired", [False, True], ids=["no-abort", "pre-fired-abort"])
@pytest.mark.parametrize("lossless", [True, False], ids=["lossless", "non-lossless-args"])
async def test_c033_execute_is_always_a_checkpoint(lossless: bool, prefired: bool) -> None:
    """C-033: a hook-free, never-awaiting call (and a stage-0 failure) still checkpoints."""
    stages = Stages()
    runtime = ToolRuntime()
    runtime.register(raw_tool(execute=stages.body))
    observed = observe(runtime)
    with trio.testing.assert_checkpoints():
        result = await runtime.execute(_c033_call(lossless, prefired))
    expected = _c033_expected_error(lossless, prefired, cancelled=False)
    if expected is None:
        assert result.is_error is False
        assert result.value == "hi"
    else:
        assert result == expected
    assert observed.results == [result]
    assert stages.log == (["body"] if lossless and not prefired else [])


@pytest.mark.parametrize("prefired", [False, True], ids=["no-abort", "pre-fired-abort"])
@pytest.mark.parametrize("lossless", [True, False], ids=["lossless", "non-lossless-args"])
async def test_c033_cancelled_caller_is_checked_before_check_a(
    lossless: bool, prefired: bool
) -> None:
    """C-033: in an already-cancelled scope ``Cancelled`` is raised (before check A)."""
    stages = Stages()
    runtime = ToolRuntime()
    runtime.register(raw_tool(execute=stages.body))
    observed = observe(runtime)
    call = _c033_call(lossless, prefired)
    returned: list[ToolResult] = []
    with trio.CancelScope() as caller:
        caller.cancel()
        returned.append(await runtime.execute(call))
    assert caller.cancelled_caught is True
    assert returned == []
    assert observed.results == [_c033_expected_error(lossless, prefired, cancelled=True)]
    assert stages.log == []


# ------------------------------------------------------------ BaseException groups (C-034)


@pytest.mark.parametrize("with_cancelled", [False, True], ids=["ki-only", "ki-and-cancelled"])
@pytest.mark.parametrize("where", ["pre", "wrapper", "body", "post"])
async def test_c034_group_with_keyboard_interrupt_propagates(
    where: str, with_cancelled: bool
) -> None:
    """C-034: a group holding ``KeyboardInterrupt`` propagates unchanged; no result, no observer."""
    members: list[BaseException] = [KeyboardInterrupt()]
    if with_cancelled:
        members.append(await captured_cancelled())
    group = BaseExceptionGroup("hook task group", members)
    stages = Stages()

    def maybe_raise(here: str) -> None:
        if here == where:
            raise group

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        maybe_raise("body")
        return "ok"

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        maybe_raise("pre")
        return await call_next()

    async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        maybe_raise("wrapper")
        return await call_next()

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        maybe_raise("post")
        return await call_next()

    runtime = ToolRuntime()
    runtime.register(raw_tool(execute=body, finalize_content=stages.finalize))
    runtime.on_pre_execute(pre)
    runtime.wrap_execute(wrap)
    runtime.on_post_execute(post)
    observed = observe(runtime)
    with pytest.raises(BaseExceptionGroup) as info:
        await runtime.execute(tool_call())
    assert info.value is group
    assert observed.results == []
    assert stages.finalized == []


# ---------------------------------------- agent-loop semantics (C-035..C-039, runtime.md §8)


async def test_c035_a_block_still_applies_to_a_completed_success() -> None:
    """C-035: the body returned its success, then the Abort fired while a post hook awaited;
    the hook's ``Block`` applies as usual (post-execute runs on a completed success)."""
    runtime = ToolRuntime()
    runtime.register(raw_tool(execute=lambda args, ctx: _returning("ok")))

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        assert result.is_error is False
        await execution.abort.wait()
        return Block([TextContent("withheld by policy")])

    runtime.on_post_execute(post)
    call = tool_call()
    result = await execute_and_abort_when_blocked(runtime, call)
    assert call.abort.aborted
    assert result == ToolResult(
        is_error=True,
        content=[TextContent("withheld by policy")],
        error=ToolError("withheld by policy"),
    )


async def _returning(value: object) -> object:
    return value


async def _sleeping_body(args: JsonValue, ctx: ToolRunContext) -> object:
    await trio.sleep_forever()
    raise AssertionError("unreachable: the body sleeps until cancelled")


async def test_c036_the_abort_reason_is_appended_to_both_texts() -> None:
    """C-036: ``abort.abort("turn timeout after 0.3 s")`` while a body sleeps gives
    ``... aborted: <reason>``; a call made with the same pre-fired Abort gives
    ``... aborted before dispatch: <reason>``; codes unchanged; ``AbortError.reason``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool(execute=_sleeping_body))
    reason = "turn timeout after 0.3 s"
    call = tool_call()
    running = await execute_and_abort_when_blocked_with(runtime, call, reason)
    assert running == failure(f"tool call aborted: {reason}", ErrorInfo("AbortError", "ABORTED"))
    assert running.content == (TextContent(f"Error: tool call aborted: {reason}"),)
    later = await runtime.execute(tool_call(abort=call.abort))
    assert later.content == (TextContent(f"Error: tool call aborted before dispatch: {reason}"),)
    assert later.error == ToolError(
        f"tool call aborted before dispatch: {reason}",
        ErrorInfo("AbortError", "ABORTED_BEFORE_DISPATCH"),
    )
    exc = AbortError("ABORTED", reason)
    assert (exc.reason, exc.code, str(exc)) == (reason, "ABORTED", f"tool call aborted: {reason}")
    copied = pickle.loads(pickle.dumps(exc))
    assert (type(copied), copied.reason, str(copied)) == (AbortError, reason, str(exc))


async def execute_and_abort_when_blocked_with(
    runtime: ToolRuntime, call: ToolCall, reason: object
) -> ToolResult:
    """:func:`execute_and_abort_when_blocked` with a chosen reason."""
    results: list[ToolResult] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_into, runtime, call, results)
        await trio.testing.wait_all_tasks_blocked()
        call.abort.abort(reason)
    [result] = results
    return result


@pytest.mark.parametrize(
    "reason",
    [None, "", ValueError("x"), "\ud800 lone surrogate"],
    ids=["none", "empty", "an object", "not lossless text"],
)
async def test_c037_other_reasons_leave_the_texts_as_they_are(reason: object) -> None:
    """C-037: ``abort()``, ``abort("")``, ``abort(ValueError("x"))`` give the texts of §8.1
    exactly, nothing appended (and text no result can carry is not appended either)."""
    runtime = ToolRuntime()
    runtime.register(raw_tool(execute=_sleeping_body))
    call = tool_call()
    assert await execute_and_abort_when_blocked_with(runtime, call, reason) == aborted()
    assert await runtime.execute(tool_call(abort=call.abort)) == aborted_before_dispatch()
    assert str(AbortError("ABORTED", reason)) == "tool call aborted"
    assert AbortError("ABORTED_BEFORE_DISPATCH", reason).reason is reason


async def test_c038_a_success_returned_after_the_abort_is_not_completed() -> None:
    """C-038: a body that ignores cancellation and returns after ``abort.abort("r")`` did
    not complete before the abort (check E): ``Error: tool call aborted: r``."""
    runtime = ToolRuntime()

    async def stubborn(args: JsonValue, ctx: ToolRunContext) -> object:
        with trio.CancelScope(shield=True):
            await ctx.abort.wait()
        return "late"

    runtime.register(raw_tool(execute=stubborn))
    result = await execute_and_abort_when_blocked_with(runtime, tool_call(), "r")
    assert result == aborted(reason="r")


async def test_c038_only_the_bodys_last_return_counts() -> None:
    """C-038 / §8.3: a wrapper that calls ``call_next()`` twice, the second body cut short by
    the abort, does not keep the first success: the last return was not completed."""
    runtime = ToolRuntime()
    runs: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        runs.append("body")
        if len(runs) == 2:
            await trio.sleep_forever()
        return "first"

    async def twice(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        first = await call_next()
        assert first.is_error is False
        return await call_next()

    runtime.register(raw_tool(execute=body))
    runtime.wrap_execute(twice)
    result = await execute_and_abort_when_blocked_with(runtime, tool_call(), "stop")
    assert runs == ["body", "body"]
    assert result == aborted(reason="stop")


@pytest.mark.parametrize("path", ["deny", "guard", "ask-no-service", "rejected"])
async def test_c039_every_denial_carries_tool_denied(path: str) -> None:
    """C-039: a pre-execute ``Deny("no")``, a guard returning ``"no"``, an ``Ask`` with no
    approval service and an approval ``REJECTED``: ``Error: <reason>``, ``TOOL_DENIED``."""
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    reason = "no"

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        if path == "deny":
            return Deny(reason)
        return Ask(reason)

    class Rejecting:
        async def request(self, request: ApprovalRequest) -> ApprovalOutcome:
            return ApprovalOutcome.REJECTED

    scope = runtime.open_scope()
    if path == "guard":
        runtime.guard(lambda execution: reason)
    else:
        runtime.on_pre_execute(pre)
    if path == "rejected":
        runtime.approval = Rejecting()
    result = await runtime.execute(tool_call(scope=scope))
    if path == "rejected":
        reason = 'the user rejected tool "echo"'
    assert result == denied(reason)
    assert result.error is not None
    assert result.error.info is not None
    assert result.error.info.code == TOOL_DENIED


async def test_a_caller_cancelled_before_dispatch_wins_over_an_unknown_tool() -> None:
    # Decision 115: check D2 comes before an unknown tool's error. A pre-execute hook that
    # cancels the caller's scope: the call's result is ABORTED_BEFORE_DISPATCH (observers
    # see it), not UNKNOWN_TOOL, and the Cancelled propagates.
    runtime = ToolRuntime()
    seen: list[ToolResult] = []
    runtime.on_result(lambda execution, result: seen.append(result))

    async def cancel_then_allow(execution: ToolExecution, call_next: Any) -> PreDecision:
        scope.cancel()
        return await call_next()  # type: ignore[no-any-return]

    runtime.on_pre_execute(cancel_then_allow)
    with trio.CancelScope() as scope:
        await runtime.execute(ToolCall(call_id="c1", name="nope"))
    assert scope.cancelled_caught
    assert [r.error.info.code for r in seen if r.error and r.error.info] == [
        ABORTED_BEFORE_DISPATCH
    ]
