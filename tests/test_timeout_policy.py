"""The timeout policy (runtime.md §11): conformance group T, on virtual time."""

from __future__ import annotations

import math

import pytest
import trio

from dsh_tools import (
    Abort,
    Accept,
    CallNext,
    ErrorCode,
    ErrorInfo,
    HarnessError,
    JsonValue,
    Output,
    PostDecision,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    ToolTimeoutError,
    UserMessage,
)
from dsh_tools.policies import install_timeout_policy
from tests.pipeline_helpers import failing_nursery_body

FOREVER = math.inf


def budgeted(name: str, body: object, timeout: float | None = 1.0) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"{name} with a budget",
        parameters={"type": "object"},
        output=Output(schema={}, render=lambda args, value: [TextContent(repr(value))]),
        execute=body,  # type: ignore[arg-type]
        timeout=timeout,
    )


def runtime_with(*defns: ToolDefinition) -> ToolRuntime:
    runtime = ToolRuntime()
    install_timeout_policy(runtime)
    for defn in defns:
        runtime.register(defn)
    return runtime


def call(name: str, abort: Abort | None = None) -> ToolCall:
    return ToolCall(call_id="c1", name=name, abort=abort or Abort())


def error_text(result: ToolResult) -> str:
    assert result.is_error
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


def assert_timeout(result: ToolResult, timeout_text: str) -> None:
    assert error_text(result) == f"Error: tool call timed out after {timeout_text}s"
    assert result.error is not None
    assert result.error.message == f"tool call timed out after {timeout_text}s"
    assert result.error.info == ErrorInfo("ToolTimeoutError", "TOOL_TIMEOUT")


async def test_t001_no_timeout_leaves_the_callers_deadline(autojump_clock: object) -> None:
    seen: list[float] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        seen.append(trio.current_effective_deadline())
        return 1

    runtime = runtime_with(budgeted("free", body, timeout=None))
    with trio.move_on_at(123.0):
        result = await runtime.execute(call("free"))
    assert not result.is_error
    assert seen == [123.0]


async def test_t002_fast_body_keeps_its_own_success(autojump_clock: object) -> None:
    async def body(args: JsonValue, ctx: ToolRunContext) -> str:
        await trio.sleep(0.5)
        return "done"

    runtime = runtime_with(budgeted("fast", body, timeout=1))
    result = await runtime.execute(call("fast"))
    assert not result.is_error
    assert result.value == "done"
    assert trio.current_time() == pytest.approx(0.5)


async def test_t003_t004_deadline_covers_the_body_not_post(autojump_clock: object) -> None:
    deadlines: list[tuple[str, float]] = []
    start = trio.current_time()

    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        deadlines.append(("body", trio.current_effective_deadline()))
        return 1

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        deadlines.append(("post", trio.current_effective_deadline()))
        return await call_next()

    runtime = runtime_with(budgeted("b", body, timeout=2.5))
    runtime.on_post_execute(post)
    await runtime.execute(call("b"))
    assert deadlines == [("body", start + 2.5), ("post", math.inf)]


async def test_t005_cooperative_body_times_out_at_exactly_the_deadline(
    autojump_clock: object,
) -> None:
    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        await trio.sleep(FOREVER)
        raise AssertionError("unreachable")

    runtime = runtime_with(budgeted("hang", body, timeout=0.1))
    start = trio.current_time()
    result = await runtime.execute(call("hang"))
    assert_timeout(result, "0.1")
    assert trio.current_time() - start == pytest.approx(0.1)


async def test_t006_body_converting_cancelled_is_replaced_by_timeout(
    autojump_clock: object,
) -> None:
    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        try:
            await trio.sleep(FOREVER)
        except trio.Cancelled:
            raise HarnessError("request aborted", "WEB_ABORTED") from None
        raise AssertionError("unreachable")

    runtime = runtime_with(budgeted("web", body, timeout=1))
    assert_timeout(await runtime.execute(call("web")), "1.0")


async def test_t007_abort_before_the_deadline_stays_aborted(autojump_clock: object) -> None:
    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        await trio.sleep(FOREVER)
        raise AssertionError("unreachable")

    runtime = runtime_with(budgeted("hang", body, timeout=5))
    abort = Abort()
    async with trio.open_nursery() as nursery:

        async def fire() -> None:
            await trio.sleep(1)
            abort.abort()

        nursery.start_soon(fire)
        result = await runtime.execute(call("hang", abort))
    assert result.error is not None
    assert result.error.info == ErrorInfo("AbortError", ErrorCode.ABORTED)
    assert trio.current_time() == pytest.approx(1)


async def test_t008_t017_timeout_first_then_abort_during_cleanup_keeps_timeout(
    autojump_clock: object,
) -> None:
    abort = Abort()
    posts: list[bool] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        try:
            await trio.sleep(FOREVER)
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(0.5)
                abort.abort()  # fires while the body is still unwinding the timeout
                await trio.sleep(0.5)
        raise AssertionError("unreachable")

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        posts.append(result.is_error)
        return await call_next()

    runtime = runtime_with(budgeted("hang", body, timeout=1))
    runtime.on_post_execute(post)
    result = await runtime.execute(call("hang", abort))
    assert_timeout(result, "1.0")
    assert posts == [True]  # T-017: the timeout goes through post-execute
    assert trio.current_time() == pytest.approx(2.0)


@pytest.mark.parametrize("hooks", ["none", "post"])
async def test_t006_t017_a_body_nursery_failing_as_the_deadline_cancels_it_times_out(
    autojump_clock: object, hooks: str
) -> None:
    """T-006 with the body's own nursery: a child turns the deadline's ``Cancelled`` into an
    error, so the nursery raises a group of the ``Cancelled`` and that error. The call timed
    out, exactly as when the body itself turns the ``Cancelled`` into an error: TOOL_TIMEOUT
    through post-execute (T-017), with the body's deferred context (decision 20)."""
    deferred = UserMessage(content=(TextContent("d"),), source={"kind": "tool"}, id="d")
    posts: list[ToolResult] = []

    body = failing_nursery_body(lambda: HarnessError("cleanup failed", "WEB_ABORTED"), deferred)

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        posts.append(result)
        return await call_next()

    runtime = runtime_with(budgeted("hang", body, timeout=1))
    if hooks == "post":
        runtime.on_post_execute(post)
    result = await runtime.execute(call("hang"))
    assert_timeout(result, "1.0")
    assert result.additional_contexts == (deferred,)
    assert posts == ([result] if hooks == "post" else [])
    assert trio.current_time() == pytest.approx(1.0)


async def test_an_inner_wrappers_failure_under_the_deadline_is_not_a_timeout(
    autojump_clock: object,
) -> None:
    """Only a group that held the deadline's own ``Cancelled`` is a timeout: a wrapper
    registered after the policy that fails before the deadline stays a wrapper failure."""

    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        return 1

    async def failing(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        raise HarnessError("wrapper failed", "WRAPPER_FAILURE")

    runtime = runtime_with(budgeted("quick", body, timeout=1))
    runtime.wrap_execute(failing)
    result = await runtime.execute(call("quick"))
    assert result.error is not None
    assert result.error.info == ErrorInfo("HarnessError", "WRAPPER_FAILURE")


async def test_decision_22_deadline_then_abort_around_a_body_that_ignores_both(
    autojump_clock: object,
) -> None:
    """§11 step 3 taken literally (decision 22): the deadline fires first, the Abort later,
    and the body, shielded, returns normally. The policy's scope absorbed nothing and the
    Abort has fired by the time ``call_next()`` returns, so the policy keeps the result,
    which check E made ``ABORTED``."""
    abort = Abort()

    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        with trio.CancelScope(shield=True):
            await trio.sleep(2)  # the deadline (1 s) passes here
            abort.abort()
            await trio.sleep(1)
        return 1

    runtime = runtime_with(budgeted("stubborn", body, timeout=1))
    result = await runtime.execute(call("stubborn", abort))
    assert result.error is not None
    assert result.error.info == ErrorInfo("AbortError", ErrorCode.ABORTED)
    assert trio.current_time() == pytest.approx(3.0)


@pytest.mark.parametrize("timeout", ["1", None, True, 10**400])
def test_t009_a_timeout_error_checks_its_timeout(timeout: object) -> None:
    """``ToolTimeoutError`` refuses a timeout its message could not print, at once, rather
    than constructing and then failing in ``str()`` (which a result would turn into
    ``<unprintable thrown value>``)."""
    with pytest.raises(TypeError, match=r"^ToolTimeoutError timeout "):
        ToolTimeoutError(timeout)  # type: ignore[arg-type]


def test_t009_error_code_value() -> None:
    assert ErrorCode.TOOL_TIMEOUT == "TOOL_TIMEOUT"
    assert ToolTimeoutError(1).code == "TOOL_TIMEOUT"


async def test_t010_disposing_the_policy_restores_the_callers_deadline(
    autojump_clock: object,
) -> None:
    seen: list[float] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        seen.append(trio.current_effective_deadline())
        return 1

    runtime = ToolRuntime()
    runtime.register(budgeted("b", body, timeout=3))
    dispose = install_timeout_policy(runtime)
    await runtime.execute(call("b"))
    dispose()
    await runtime.execute(call("b"))
    assert seen == [3.0, math.inf]


async def test_t011_huge_timeout_is_accepted_and_works(autojump_clock: object) -> None:
    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        await trio.sleep(10)
        return 7

    runtime = runtime_with(budgeted("long", body, timeout=1e12))
    result = await runtime.execute(call("long"))
    assert result.value == 7


async def test_t012_pre_fired_abort_on_a_budgeted_call(autojump_clock: object) -> None:
    ran: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        ran.append("body")
        return 1

    runtime = runtime_with(budgeted("b", body))
    abort = Abort()
    abort.abort()
    result = await runtime.execute(call("b", abort))
    assert result.error is not None
    assert result.error.info == ErrorInfo("AbortError", "ABORTED_BEFORE_DISPATCH")
    assert ran == []


async def test_t013_callers_own_deadline_is_not_a_timeout(autojump_clock: object) -> None:
    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        await trio.sleep(FOREVER)
        raise AssertionError("unreachable")

    seen: list[ToolResult] = []
    runtime = runtime_with(budgeted("hang", body, timeout=10))
    runtime.on_result(lambda execution, result: seen.append(result))
    with trio.move_on_after(1) as caller:
        await runtime.execute(call("hang"))
    assert caller.cancelled_caught
    assert seen[0].error is not None
    assert seen[0].error.info == ErrorInfo("AbortError", "ABORTED")


async def test_t013_outer_wrapper_deadline_is_not_a_timeout(autojump_clock: object) -> None:
    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        await trio.sleep(FOREVER)
        raise AssertionError("unreachable")

    outer_result = ToolResult(is_error=False, value="outer gave up", content=())

    async def outer(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        with trio.move_on_after(1):
            return await call_next()
        return outer_result

    runtime = ToolRuntime()
    runtime.wrap_execute(outer)  # registered before the policy: outermost
    install_timeout_policy(runtime)
    runtime.register(budgeted("hang", body, timeout=10))
    result = await runtime.execute(call("hang"))
    assert not result.is_error
    assert result.value == "outer gave up"


@pytest.mark.parametrize("policy_first", [True, False])
async def test_t014_policy_order_with_a_retry_wrapper(
    autojump_clock: object, policy_first: bool
) -> None:
    attempts: list[float] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        attempts.append(trio.current_time())
        await trio.sleep(0.6)
        return 1

    async def retry_twice(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        await call_next()
        return await call_next()

    runtime = ToolRuntime()
    if policy_first:
        install_timeout_policy(runtime)
        runtime.wrap_execute(retry_twice)
    else:
        runtime.wrap_execute(retry_twice)
        install_timeout_policy(runtime)
    runtime.register(budgeted("b", body, timeout=1))
    result = await runtime.execute(call("b"))
    if policy_first:
        # One budget for both attempts: the second is cut at t=1.0.
        assert_timeout(result, "1.0")
        assert trio.current_time() == pytest.approx(1.0)
    else:
        # One budget per attempt: both fit.
        assert not result.is_error
        assert trio.current_time() == pytest.approx(1.2)
    assert attempts == pytest.approx([0.0, 0.6])


@pytest.mark.parametrize(("timeout", "text"), [(1, "1.0"), (2.5, "2.5")])
def test_t015_message_uses_the_float_repr(timeout: float, text: str) -> None:
    assert str(ToolTimeoutError(timeout)) == f"tool call timed out after {text}s"


async def test_t016_uncooperative_body_runs_to_completion_then_times_out(
    autojump_clock: object,
) -> None:
    finished: list[float] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        with trio.CancelScope(shield=True):
            await trio.sleep(3)
        finished.append(trio.current_time())
        return 1

    runtime = runtime_with(budgeted("stubborn", body, timeout=1))
    result = await runtime.execute(call("stubborn"))
    assert_timeout(result, "1.0")
    assert finished == [pytest.approx(3.0)]


async def test_t017_later_abort_cannot_replace_a_timeout(autojump_clock: object) -> None:
    abort = Abort()

    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        await trio.sleep(FOREVER)
        raise AssertionError("unreachable")

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        abort.abort()
        await trio.sleep(1)
        return Accept()

    runtime = runtime_with(budgeted("hang", body, timeout=1))
    runtime.on_post_execute(post)
    assert_timeout(await runtime.execute(call("hang", abort)), "1.0")


async def test_t018_abort_first_with_cleanup_outlasting_the_deadline(
    autojump_clock: object,
) -> None:
    abort = Abort()

    async def body(args: JsonValue, ctx: ToolRunContext) -> int:
        try:
            await trio.sleep(FOREVER)
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(5)  # cleanup of the abort outlasts the 2 s budget
        raise AssertionError("unreachable")

    runtime = runtime_with(budgeted("hang", body, timeout=2))
    async with trio.open_nursery() as nursery:

        async def fire() -> None:
            await trio.sleep(1)
            abort.abort()

        nursery.start_soon(fire)
        result = await runtime.execute(call("hang", abort))
    assert_timeout(result, "2.0")
    assert trio.current_time() == pytest.approx(6.0)  # returned when the body ended
