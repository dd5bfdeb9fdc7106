"""``run_code_body`` (code-mode §3.3 steps 4 to 7): the outcome, code runtime contract
violations, and ``KeyboardInterrupt``-like exceptions reaching the lane."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing

from dsh_tools import (
    CodeRunFailedError,
    JsonValue,
    TextContent,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    thaw_json,
)
from dsh_tools.code import CodeRunLimits, CodeRunOutcome, Dispatch, ToolCallError
from dsh_tools.testing import ScriptedCodeRuntime
from tests.code_helpers import Trace, code_runtime, gather, run_program, submit, tool


@pytest.mark.parametrize(
    ("outcome", "value"),
    [
        (CodeRunOutcome(), {"logs": []}),
        (CodeRunOutcome(logs=["a", "b"]), {"logs": ["a", "b"]}),
        (CodeRunOutcome(result=None), {"logs": [], "result": None}),
        (CodeRunOutcome(logs=["x"], result={"k": [1]}), {"logs": ["x"], "result": {"k": [1]}}),
    ],
)
async def test_an_outcome_becomes_the_value(outcome: CodeRunOutcome, value: object) -> None:
    """§3.3 step 6: logs always, ``result`` only when the program returned one."""

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        return outcome

    runtime, scripted = code_runtime(script)
    result = await run_program(runtime, code="return 1")
    assert thaw_json(result.value) == value
    assert scripted.codes == ["return 1"]


@pytest.mark.parametrize(
    ("behaviour", "content"),
    [
        ("raise", "Error: code run failed (internal): boom"),
        ("return", "Error: code run failed (internal): code runtime returned int; expected "
                   "CodeRunOutcome"),
        ("failed", "Error: code run failed (timeout): the program ran longer than 1.0s"),
        ("plain", "Error: plain failure"),
    ],
)  # fmt: skip
async def test_l083_code_runtime_contract_violations(
    behaviour: str, content: str, autojump_clock: trio.testing.MockClock
) -> None:
    """L-083: ``run`` raising ``RuntimeError("boom")`` and returning ``42`` are internal
    failures; a ``CodeRunFailedError`` is re-raised unchanged; all only after the lane
    settled (the running sub-call was aborted and committed first)."""
    trace = Trace()
    order: list[str] = []
    got: list[object] = []

    async with trio.open_nursery() as outer:

        async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
            await submit(outer, dispatch, "slow", {}, got)
            await trio.sleep(1)
            if behaviour == "raise":
                raise RuntimeError("boom")
            if behaviour == "failed":
                raise CodeRunFailedError.for_run("timeout", "the program ran longer than 1.0s")
            if behaviour == "plain":
                raise CodeRunFailedError("plain failure")
            return 42

        runtime, _ = code_runtime(script)
        runtime.register(tool("slow", trace.body(10)))
        runtime.on_code_dispatch(lambda e: order.append("settle"))
        runtime.on_result(lambda e, r: order.append("outer") if e.parent is None else None)
        result = await run_program(runtime)
    assert result.content == (TextContent(content),)
    assert result.error is not None
    assert result.error.info is not None
    assert result.error.info.code == "CODE_RUN_FAILED"
    assert order == ["settle", "outer"]
    assert trio.current_time() == 1.0


async def test_l083_an_exception_without_a_message_is_named_by_its_class() -> None:
    """The internal detail is the normalized message: the class name when it is empty."""

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        raise KeyError()

    runtime, _ = code_runtime(script)
    result = await run_program(runtime)
    assert result.content == (TextContent("Error: code run failed (internal): KeyError"),)


@pytest.mark.parametrize("where", ["run", "body", "observer", "start"])
async def test_a_keyboard_interrupt_gets_the_bookkeeping_then_propagates_alone(
    where: str, autojump_clock: trio.testing.MockClock
) -> None:
    """§5.6: a ``KeyboardInterrupt`` from ``run``, from a sub-call body or from a settle
    observer: every started sub-call gets its settle event, queued ones are refused, and the
    interrupt propagates alone (a start observer's too: its call was started, so it is
    finished and settled)."""
    trace = Trace()
    got: list[object] = []

    async def interrupting(args: JsonValue, ctx: ToolRunContext) -> object:
        await trio.sleep(1)
        raise KeyboardInterrupt

    async with trio.open_nursery() as outer:

        async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
            if where in ("observer", "start"):
                await submit(outer, dispatch, "quick", {}, got)
            await submit(outer, dispatch, "slow", {}, got)
            if where == "body":
                await submit(outer, dispatch, "interrupting", {}, got)
            await submit(outer, dispatch, "writer", {}, got)
            await trio.sleep(2)
            raise KeyboardInterrupt

        runtime, _ = code_runtime(script)
        runtime.register(tool("slow", trace.body(10)))
        runtime.register(tool("quick", trace.body(1)))
        runtime.register(tool("interrupting", interrupting))
        runtime.register(tool("writer", trace.body(1), parallel=False))
        trace.install(runtime)

        def observer(event: Any) -> None:
            if event.name == "quick":
                raise KeyboardInterrupt

        if where == "observer":
            runtime.on_code_dispatch(observer)
        if where == "start":
            runtime.on_code_dispatch_start(observer)
        with pytest.raises(KeyboardInterrupt) as info:
            await run_program(runtime)
        assert type(info.value) is KeyboardInterrupt
    started = [e.sub_call_id for e in trace.starts]
    assert [e.sub_call_id for e in trace.settles] == started
    assert "c1:code:1" in started
    refused = [str(g) for g in got if isinstance(g, ToolCallError) and "abandoned" in str(g)]
    # The start observer interrupts the program before it submits the writer.
    expected_refusals = (
        []
        if where == "start"
        else ["run_code run is over (run_code aborted); writer tool call abandoned"]
    )
    assert refused == expected_refusals
    expected = {"run": 2.0, "body": 1.0, "observer": 1.0, "start": 0.0}[where]
    assert trio.current_time() == expected


async def test_an_internal_lane_failure_stops_the_program(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """A failure of the lane itself (a runtime bug: here ``prepare`` raising) stops the
    program, finishes what was started and fails run_code as ``internal``."""
    import dsh_tools._lane as lane_module
    from dsh_tools.lowlevel import prepare as real_prepare

    trace = Trace()

    async def prepare(execution: ToolExecution) -> Any:
        if execution.name == "broken":
            raise RuntimeError("stage bug")
        return await real_prepare(execution)

    monkeypatch.setattr(lane_module, "prepare", prepare)
    # Every start through prepare(): no synchronous stage 1 (decision 115) around the bug.
    monkeypatch.setattr(lane_module, "prepare_now", lambda execution: None)

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        await gather(dispatch, [("slow", {}), ("broken", {})])
        raise AssertionError("unreachable")

    runtime, _ = code_runtime(script)
    runtime.register(tool("slow", trace.body(10)))
    runtime.register(tool("broken", trace.body(0)))
    trace.install(runtime)
    result = await run_program(runtime)
    assert result.content == (TextContent("Error: code run failed (internal): stage bug"),)
    assert [(e.sub_call_id, e.is_error) for e in trace.settles] == [
        ("c1:code:1", True),
        ("c1:code:2", True),
    ]
    assert trio.current_time() == 0.0


def test_scripted_code_runtime_is_a_valid_code_runtime() -> None:
    """§8.3: a valid code runtime (its ``language`` is a ``str``, its ``run`` a coroutine
    function) that records each program."""
    from dsh_tools._code_values import is_valid_code_runtime

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        return CodeRunOutcome()

    scripted = ScriptedCodeRuntime(script, language="lua")
    assert is_valid_code_runtime(scripted)
    assert scripted.language == "lua"
    assert scripted.codes == []


async def test_cancelled_while_the_lane_settles(autojump_clock: trio.testing.MockClock) -> None:
    """The caller's cancellation may arrive after the program ended, while the lane still
    commits: the bookkeeping finishes the rest (refusals keep the settled reason) and one
    bare ``Cancelled`` propagates."""
    trace = Trace()
    got: list[object] = []
    in_post = trio.Event()

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        if execution.parent is not None:
            in_post.set()
            await trio.sleep(10)
        return await call_next()

    async with trio.open_nursery() as outer:

        async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
            await submit(outer, dispatch, "writer", {}, got)
            await submit(outer, dispatch, "writer", {}, got)
            await in_post.wait()
            return CodeRunOutcome()

        runtime, _ = code_runtime(script)
        runtime.register(tool("writer", trace.body(1), parallel=False))
        runtime.on_post_execute(post)
        trace.install(runtime)
        with trio.move_on_after(5) as cancel_scope:
            await run_program(runtime)
        assert cancel_scope.cancelled_caught
    assert trio.current_time() == 5.0
    # Its post-execute was cut short: the bookkeeping gives it its cancelled result.
    assert [(e.sub_call_id, e.is_error) for e in trace.settles] == [("c1:code:1", True)]
    assert sorted(str(g) for g in got) == [
        "run_code run is over (run_code settled); writer tool call abandoned",
        "tool call aborted: run_code settled",
    ]


async def test_a_cancellation_group_from_a_hook_is_sorted(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A pre-execute hook whose own nursery raises an error beside the cancellation: the
    lane drops the error (that call gets its cancelled result) and ``Cancelled`` goes on."""
    trace = Trace()

    async def pre(execution: ToolExecution, call_next: Any) -> Any:
        if execution.parent is None:
            return await call_next()

        async def failing_on_cancel() -> None:
            try:
                await trio.sleep_forever()
            finally:
                raise ValueError("cleanup failed")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(failing_on_cancel)
            await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        await dispatch("safe", {})
        raise AssertionError("unreachable")

    runtime, _ = code_runtime(script)
    runtime.register(tool("safe", trace.body(0)))
    runtime.on_pre_execute(pre)
    trace.install(runtime)
    with caplog.at_level(logging.DEBUG, logger="dsh_tools"), trio.move_on_after(1) as scope:
        await run_program(runtime)
    assert scope.cancelled_caught
    assert [(e.sub_call_id, e.is_error) for e in trace.settles] == [("c1:code:1", True)]
    assert any(
        r.getMessage() == "dropping ValueError('cleanup failed') raised alongside a cancellation"
        for r in caplog.records
    )


async def test_l040_a_failure_shows_the_captured_output() -> None:
    """L-040: a run failing with ``output-limit`` after two captured lines: the content is
    exactly the message, ``Captured output:`` and the two lines."""

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        raise CodeRunFailedError.for_run(
            "output-limit",
            f"the program wrote more than {limits.output_bytes} bytes of output",
            ["line 1", "line 2"],
        )

    runtime, _ = code_runtime(script, limits=CodeRunLimits(output_bytes=12))
    result = await run_program(runtime)
    assert result.content == (
        TextContent(
            "Error: code run failed (output-limit): the program wrote more than 12 bytes of "
            "output\nCaptured output:\nline 1\nline 2"
        ),
    )
    assert result.error is not None
    assert result.error.info is not None
    assert (result.error.info.name, result.error.info.code) == (
        "CodeRunFailedError",
        "CODE_RUN_FAILED",
    )
